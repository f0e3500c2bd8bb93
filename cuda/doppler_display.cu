/*
 * doppler_display.cu - display post-processing of successive Doppler outputs, CUDA twin of
 * csrc/doppler_display.c (same steps, same float32 arithmetic, same results bit for bit; the
 * steps and their reference are in that file's header).
 *
 * Layout: velocity, power, out_velocity, out_power float32 [n_images][nz][nx] on the device;
 *         mask uint8, same shape.  The n_images of one execute are successive outputs in time
 *         order; persistence runs through them and on into the next execute.
 * Units:  velocity m/s; power in the caller's unit (linear or dB), as the threshold.
 *
 * One stage, "display.filter": one thread per pixel (consecutive threads, consecutive
 * pixels of a row: coalesced) walks the images in time order, so the recursive average needs
 * no synchronisation between images and its history stays in a register between them.  Per
 * image and per given input it forms the 3x3 median with replicated edges from the input
 * (the network of usbeam_math.h, shared with the CPU), averages it with the history, then
 * applies the masks.  The history lives on the device in the plan (float32[2][nz][nx]) and is
 * read only after a first image has written it (create / reset start afresh).
 * The CPU computes p * prev + (1 - p) * x with no fused multiply-add (C11, -ffp-contract=off);
 * __fmul_rn / __fadd_rn keep nvcc from contracting it, so both round the same way.
 * Non-finite input: the CPU's callers refuse it; here each thread checks its own input
 * pixel (every pixel is some thread's) and stores USBEAM_INPUT_FAULT_NONFINITE in the plan's
 * mapped fault word (exec.cuh), which usbeam.device reads once the work has finished.
 */
#include "runtime/exec.cuh"

#include "common/usbeam_math.h"

#include <math.h>

namespace {

constexpr int THREADS = 256;
enum { DISPLAY_FILTER = 0 };
const char *const DISPLAY_STAGES[] = {"display.filter"};

struct display_args {
    const float *in[2];  /* velocity, power (NULL: not given) */
    float *out[2];
    unsigned char *mask; /* may be NULL */
    float *history[2];   /* device float32[nz][nx] each */
    size_t n_images, nz, nx;
    float keep, take, power_threshold, velocity_threshold;
    int median;
    int started;    /* the history holds the previous image */
    int persistent; /* persistence > 0 */
    unsigned *input_fault;
};

__device__ __forceinline__ float filtered(const float *image, long long z, long long x, long long nz, long long nx,
                                          int median)
{
    if (!median) return image[z * nx + x];
    float v[9];
    int k = 0;
    for (long long dz = -1; dz <= 1; ++dz) {
        const long long zz = usbeam_clamp_index(z + dz, nz);
        for (long long dx = -1; dx <= 1; ++dx) v[k++] = image[zz * nx + usbeam_clamp_index(x + dx, nx)];
    }
    return usbeam_median9f(v);
}

__global__ void display_kernel(display_args a)
{
    const size_t n = a.nz * a.nx;
    for (size_t q = (size_t)blockIdx.x * blockDim.x + threadIdx.x; q < n; q += (size_t)gridDim.x * blockDim.x) {
        const long long z = (long long)(q / a.nx), x = (long long)(q % a.nx);
        float hist[2] = {0.0f, 0.0f};
        for (int c = 0; c < 2; ++c)
            if (a.in[c] && a.started && a.persistent) hist[c] = a.history[c][q];
        bool non_finite = false;
        int have_history = a.started;
        for (size_t img = 0; img < a.n_images; ++img) {
            const size_t base = img * n;
            float value[2] = {0.0f, 0.0f};
            for (int c = 0; c < 2; ++c) {
                if (!a.in[c]) continue;
                const float *image = a.in[c] + base;
                non_finite |= !isfinite(image[q]);
                const float current = filtered(image, z, x, (long long)a.nz, (long long)a.nx, a.median);
                hist[c] = have_history && a.persistent
                              ? __fadd_rn(__fmul_rn(a.keep, hist[c]), __fmul_rn(a.take, current))
                              : current;
                value[c] = hist[c];
            }
            have_history = 1;
            int shown = 1;
            if (a.in[1] && !(value[1] >= a.power_threshold)) shown = 0;
            if (a.in[0] && !(fabsf(value[0]) >= a.velocity_threshold)) shown = 0;
            if (a.in[0]) a.out[0][base + q] = shown ? value[0] : 0.0f;
            if (a.in[1]) a.out[1][base + q] = value[1];
            if (a.mask) a.mask[base + q] = (unsigned char)shown;
        }
        for (int c = 0; c < 2; ++c)
            if (a.in[c]) a.history[c][q] = hist[c];
        if (non_finite) *(volatile unsigned *)a.input_fault = USBEAM_INPUT_FAULT_NONFINITE; /* mapped host word */
    }
}

} // namespace

struct usbeam_doppler_display_cuda {
    usbeam_cuda_exec *exec;
    usbeam_doppler_display_params params;
    float *history[2]; /* device float32[nz][nx]: velocity, power */
    unsigned *input_fault;
    unsigned grid_cap;
    int started; /* host flag: the kernels queued so far wrote the history (reset clears it) */
};

extern "C" usbeam_status usbeam_doppler_display_cuda_create(const usbeam_doppler_display_params *params,
                                                            usbeam_doppler_display_cuda **out)
{
    if (!params || !out) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "params and plan must not be NULL");
    *out = nullptr;
    usbeam_doppler_display_cuda *p = (usbeam_doppler_display_cuda *)usbeam_alloc(sizeof *p);
    if (!p) return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "display CUDA plan");
    p->params = *params;
    const size_t bytes = params->nz * params->nx * sizeof(float); /* checked for overflow by the CPU plan */
    usbeam_status st = usbeam_cuda_exec_create(DISPLAY_STAGES, 1, &p->exec);
    if (st == USBEAM_OK) st = usbeam_cuda_exec_alloc(p->exec, bytes, "display history", (void **)&p->history[0]);
    if (st == USBEAM_OK) st = usbeam_cuda_exec_alloc(p->exec, bytes, "display history", (void **)&p->history[1]);
    if (st == USBEAM_OK) st = usbeam_cuda_exec_input_fault_flag(p->exec, &p->input_fault);
    if (st == USBEAM_OK) st = usbeam_cuda_exec_grid_cap(p->exec, &p->grid_cap);
    if (st != USBEAM_OK) {
        usbeam_doppler_display_cuda_destroy(p);
        return st;
    }
    *out = p;
    return USBEAM_OK;
}

extern "C" void usbeam_doppler_display_cuda_destroy(usbeam_doppler_display_cuda *p)
{
    if (!p) return;
    usbeam_cuda_exec_destroy(p->exec);
    usbeam_free(p);
}

extern "C" usbeam_cuda_exec *usbeam_doppler_display_cuda_exec(usbeam_doppler_display_cuda *p)
{
    return p ? p->exec : nullptr;
}

/* Work already queued keeps the history it wrote; the next kernel simply does not read it. */
extern "C" usbeam_status usbeam_doppler_display_cuda_reset(usbeam_doppler_display_cuda *p)
{
    if (!p) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "plan must not be NULL");
    p->started = 0;
    return USBEAM_OK;
}

static usbeam_status display_cuda_run(usbeam_doppler_display_cuda *p, const display_args &args)
{
    usbeam_cuda_exec *e = p->exec;
    const size_t n = p->params.nz * p->params.nx;
    size_t blocks = (n + THREADS - 1) / THREADS;
    if (blocks > p->grid_cap) blocks = p->grid_cap;
    usbeam_status st = usbeam_cuda_stage_begin(e, DISPLAY_FILTER);
    if (st != USBEAM_OK) return st;
    display_kernel<<<(unsigned)blocks, THREADS, 0, usbeam_cuda_exec_cuda_stream(e)>>>(args);
    USBEAM_CUDA_TRY(cudaGetLastError());
    return usbeam_cuda_stage_end(e, DISPLAY_FILTER);
}

extern "C" usbeam_status usbeam_doppler_display_cuda_execute(usbeam_doppler_display_cuda *p, const float *velocity,
                                                             const float *power, float *out_velocity,
                                                             float *out_power, uint8_t *mask)
{
    if (!p) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "plan must not be NULL");
    if ((!velocity && !power) || (velocity && !out_velocity) || (power && !out_power))
        return usbeam_fail(USBEAM_ERR_NULL_POINTER, "each given input needs its output buffer");
    const usbeam_doppler_display_params *prm = &p->params;
    display_args a = {};
    a.in[0] = velocity;
    a.in[1] = power;
    a.out[0] = out_velocity;
    a.out[1] = out_power;
    a.mask = mask;
    a.history[0] = p->history[0];
    a.history[1] = p->history[1];
    a.n_images = prm->n_images;
    a.nz = prm->nz;
    a.nx = prm->nx;
    a.keep = (float)prm->persistence;
    a.take = (float)(1.0 - prm->persistence);
    a.power_threshold = (float)prm->power_threshold;
    a.velocity_threshold = (float)prm->velocity_threshold;
    a.median = prm->median;
    a.started = p->started;
    a.persistent = prm->persistence != 0.0;
    a.input_fault = p->input_fault;
    usbeam_status st = usbeam_cuda_exec_begin(p->exec);
    if (st != USBEAM_OK) return st;
    st = display_cuda_run(p, a);
    usbeam_cuda_exec_end(p->exec);
    if (st == USBEAM_OK) p->started = 1;
    return st;
}
