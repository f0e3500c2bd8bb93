/*
 * doppler.cu - color Doppler (Kasai autocorrelator) and power Doppler, CUDA twins of the two
 * plans of csrc/doppler.c (same semantics, same double accumulation; the math and the
 * references are in that file's header).
 *
 * Layout: in  complex64 [n_frames][n_images][nz][nx] on the device (slow time leading;
 *             interleaved re, im float32); power Doppler reads it as [n_frames][n_pixels]
 *         out float32 [n_images][nz][nx] on the device (velocity, variance, power)
 * Units:  velocity m/s, variance (m/s)^2, power |IQ|^2 (linear) or dB.
 *
 * Color stages:
 *   "color.autocorr"  one thread per pixel walks the ensemble (consecutive threads read
 *                     consecutive pixels of a frame: coalesced), accumulating R(lag), R(0) and
 *                     the axial Rz in double in frame order, as the CPU loop does;
 *   "color.smooth"    the separable window with mirrored edges (scipy boundary='symmetric'):
 *                     an x pass into scratch, then a z pass back, all images and
 *                     accumulators in one launch each; the z pass sums the taps in the CPU's
 *                     order;
 *   "color.estimate"  velocity (optionally Loupas-corrected) and variance per pixel.
 * Power stages:
 *   "power.mean"      mean |IQ|^2 over the ensemble, raised to the noise floor, stored as
 *                     float32; the max of the stored values (for the dB reference) by warp
 *                     shuffles and one atomicMax per warp on the IEEE bits (non-negative
 *                     doubles order like their bits; NaN never wins, as on the CPU);
 *   "power.db"        10 log10(P / ref) in place, reading the float32 power as the CPU does.
 * Device buffers (accumulators, scratch, windows, the max) are allocated at plan creation.
 * log10/atan2/hypot of the device libm differ from the host's by an ulp or so
 * (tests/tolerances.py, family cuda).
 */
#include "runtime/exec.cuh"

#include <math.h>

namespace {

constexpr int THREADS = 256;
constexpr double PI = 3.14159265358979323846;

enum { COLOR_AUTOCORR = 0, COLOR_SMOOTH = 1, COLOR_ESTIMATE = 2 };
const char *const COLOR_STAGES[] = {"color.autocorr", "color.smooth", "color.estimate"};
enum { POWER_MEAN = 0, POWER_DB = 1 };
const char *const POWER_STAGES[] = {"power.mean", "power.db"};

unsigned grid_for(size_t n, unsigned cap)
{
    size_t blocks = (n + THREADS - 1) / THREADS;
    if (blocks < 1) blocks = 1;
    return (unsigned)(blocks < cap ? blocks : cap);
}

/* Index mirrored into [0, n), the edge sample repeated (scipy boundary='symmetric'). */
__device__ __forceinline__ long long mirror(long long i, long long n)
{
    const long long period = 2 * n;
    i %= period;
    if (i < 0) i += period;
    return i < n ? i : period - 1 - i;
}

/* acc = double[n_acc][n_pixels]: 0 R(lag) re, 1 R(lag) im, 2 R(0), 3 Rz re, 4 Rz im. */
__global__ void autocorr_kernel(const float2 *__restrict__ iq, size_t n_frames, size_t n_pixels, size_t lag,
                                size_t nz, size_t nx, int axial, double *__restrict__ acc,
                                float *__restrict__ power)
{
    const size_t image_size = nz * nx;
    for (size_t q = (size_t)blockIdx.x * blockDim.x + threadIdx.x; q < n_pixels;
         q += (size_t)gridDim.x * blockDim.x) {
        double sr = 0.0, si = 0.0, sp = 0.0;
        for (size_t t = 0; t < n_frames; ++t) {
            const float2 a = iq[t * n_pixels + q];
            const double ar = a.x, ai = a.y;
            sp += ar * ar + ai * ai;
            if (t + lag < n_frames) { /* a * conj(b) */
                const float2 b = iq[(t + lag) * n_pixels + q];
                const double br = b.x, bi = b.y;
                sr += ar * br + ai * bi;
                si += ai * br - ar * bi;
            }
        }
        acc[q] = sr;
        acc[n_pixels + q] = si;
        acc[2 * n_pixels + q] = sp;
        if (power) power[q] = (float)(sp / (double)n_frames);
        if (axial) {
            /* Rz at row z pairs rows z and z+1; the last row of an image reuses the pair above */
            const size_t z = (q % image_size) / nx;
            const size_t q0 = z + 1 < nz ? q : q - nx;
            double zr = 0.0, zi = 0.0;
            for (size_t t = 0; t < n_frames; ++t) {
                const float2 lo = iq[t * n_pixels + q0], hi = iq[t * n_pixels + q0 + nx];
                zr += (double)hi.x * lo.x + (double)hi.y * lo.y;
                zi += (double)hi.y * lo.x - (double)hi.x * lo.y;
            }
            acc[3 * n_pixels + q] = zr;
            acc[4 * n_pixels + q] = zi;
        }
    }
}

/* Lateral pass: tmp[a][q] = sum_j wx[j] acc[a][row + mirror(x - mx/2 + j)]. */
__global__ void smooth_x_kernel(const double *__restrict__ acc, size_t total, size_t nx,
                                const double *__restrict__ wx, int mx, double *__restrict__ tmp)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        const long long x = (long long)(i % nx);
        const double *row = acc + (i - (size_t)x);
        double sum = 0.0;
        for (int j = 0; j < mx; ++j) sum += wx[j] * row[mirror(x - mx / 2 + j, (long long)nx)];
        tmp[i] = sum;
    }
}

/* Axial pass within each image: acc[a][q] = sum_j wz[j] tmp[a][image + mirror(z - mz/2 + j) nx + x]. */
__global__ void smooth_z_kernel(const double *__restrict__ tmp, size_t total, size_t nz, size_t nx,
                                const double *__restrict__ wz, int mz, double *__restrict__ acc)
{
    const size_t image_size = nz * nx;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        const size_t within = i % image_size;
        const long long z = (long long)(within / nx);
        const double *column = tmp + (i - within) + within % nx;
        double sum = 0.0;
        for (int j = 0; j < mz; ++j) sum += wz[j] * column[mirror(z - mz / 2 + j, (long long)nz) * (long long)nx];
        acc[i] = sum;
    }
}

__global__ void estimate_kernel(const double *__restrict__ acc, size_t n_pixels, int axial, double nyquist,
                                double fc, double axial_scale, double carrier_phase,
                                float *__restrict__ velocity, float *__restrict__ variance)
{
    for (size_t q = (size_t)blockIdx.x * blockDim.x + threadIdx.x; q < n_pixels;
         q += (size_t)gridDim.x * blockDim.x) {
        const double r_re = acc[q], r_im = acc[n_pixels + q], pw = acc[2 * n_pixels + q];
        double v = -nyquist * atan2(r_im, r_re) / PI;
        if (axial) {
            double dev = atan2(acc[4 * n_pixels + q], acc[3 * n_pixels + q]) - carrier_phase;
            dev -= 2.0 * PI * floor(dev / (2.0 * PI) + 0.5);
            const double f_mean = fc + dev * axial_scale;
            if (f_mean > 0.0) v *= fc / f_mean; /* f_mean <= 0: no usable echo, keep the fc scaling */
        }
        velocity[q] = (float)v;
        if (variance) {
            const double ratio = pw > 0.0 ? hypot(r_re, r_im) / pw : 1.0;
            variance[q] = (float)(2.0 * (nyquist / PI) * (nyquist / PI) * (1.0 - ratio));
        }
    }
}

__global__ void power_mean_kernel(const float2 *__restrict__ iq, size_t n_frames, size_t n_pixels,
                                  double floor_power, float *__restrict__ out, unsigned long long *__restrict__ max_bits)
{
    double best = 0.0;
    for (size_t q = (size_t)blockIdx.x * blockDim.x + threadIdx.x; q < n_pixels;
         q += (size_t)gridDim.x * blockDim.x) {
        double sp = 0.0;
        for (size_t t = 0; t < n_frames; ++t) {
            const float2 a = iq[t * n_pixels + q];
            const double ar = a.x, ai = a.y;
            sp += ar * ar + ai * ai;
        }
        double pw = sp / (double)n_frames;
        if (pw < floor_power) pw = floor_power;
        const float stored = (float)pw; /* the max is over the stored values: the brightest pixel is 0 dB */
        out[q] = stored;
        best = (double)stored > best ? (double)stored : best;
    }
    if (!max_bits) return;
    for (int offset = 16; offset > 0; offset >>= 1) {
        const double other = __shfl_down_sync(0xffffffffu, best, offset);
        best = other > best ? other : best;
    }
    if ((threadIdx.x & 31) == 0) atomicMax(max_bits, (unsigned long long)__double_as_longlong(best));
}

__global__ void power_db_kernel(float *__restrict__ out, size_t n_pixels, double fixed_reference,
                                const unsigned long long *__restrict__ max_bits)
{
    const double ref = fixed_reference > 0.0 ? fixed_reference : __longlong_as_double((long long)*max_bits);
    const double ref_db = ref > 0.0 ? 10.0 * log10(ref) : 0.0; /* all-zero ensemble: -inf dB everywhere */
    for (size_t q = (size_t)blockIdx.x * blockDim.x + threadIdx.x; q < n_pixels;
         q += (size_t)gridDim.x * blockDim.x)
        /* the product rounded before the difference, as on the CPU: a contracted FMA would
         * leave the brightest pixel at 5e-18 dB instead of exactly 0 (seen on an H100) */
        out[q] = (float)__dsub_rn(__dmul_rn(10.0, log10((double)out[q])), ref_db);
}

} // namespace

/* ---- color Doppler ------------------------------------------------------------------------ */

struct usbeam_color_cuda {
    usbeam_cuda_exec *exec;
    usbeam_color_params params;
    size_t n_pixels;
    int n_acc;            /* 3, or 5 with the axial correction */
    int smooth;
    double nyquist;
    double *acc;          /* device double[n_acc][n_pixels] */
    double *tmp;          /* device double[n_acc][n_pixels], smoothing scratch (NULL without) */
    double *window_z, *window_x; /* device double[window_z], double[window_x] */
    unsigned grid_cap;
};

extern "C" usbeam_status usbeam_color_cuda_create(const usbeam_color_params *params, const double *window_z,
                                                  const double *window_x, double nyquist, usbeam_color_cuda **out)
{
    if (!params || !window_z || !window_x || !out)
        return usbeam_fail(USBEAM_ERR_NULL_POINTER, "params, windows and plan must not be NULL");
    *out = nullptr;
    usbeam_color_cuda *p = (usbeam_color_cuda *)usbeam_alloc(sizeof *p);
    if (!p) return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "color CUDA plan");
    p->params = *params;
    p->n_pixels = params->n_images * params->nz * params->nx; /* checked for overflow by the CPU plan */
    p->n_acc = params->axial_correction ? 5 : 3;
    p->smooth = params->window_z > 1 || params->window_x > 1;
    p->nyquist = nyquist;
    size_t bytes = 0;
    usbeam_status st = usbeam_cuda_exec_create(COLOR_STAGES, 3, &p->exec);
    if (st == USBEAM_OK && usbeam_mul_size3((size_t)p->n_acc, p->n_pixels, sizeof(double), &bytes) != 0)
        st = usbeam_fail(USBEAM_ERR_SIZE_OVERFLOW, "image: %zu pixels is too large", p->n_pixels);
    if (st == USBEAM_OK) st = usbeam_cuda_exec_alloc(p->exec, bytes, "color accumulators", (void **)&p->acc);
    if (st == USBEAM_OK && p->smooth) {
        const size_t wz = (size_t)params->window_z * sizeof(double), wx = (size_t)params->window_x * sizeof(double);
        st = usbeam_cuda_exec_alloc(p->exec, bytes, "color smoothing scratch", (void **)&p->tmp);
        if (st == USBEAM_OK) st = usbeam_cuda_exec_alloc(p->exec, wz, "color window", (void **)&p->window_z);
        if (st == USBEAM_OK) st = usbeam_cuda_exec_alloc(p->exec, wx, "color window", (void **)&p->window_x);
        if (st == USBEAM_OK) st = usbeam_cuda_exec_upload(p->exec, p->window_z, window_z, wz);
        if (st == USBEAM_OK) st = usbeam_cuda_exec_upload(p->exec, p->window_x, window_x, wx);
    }
    if (st == USBEAM_OK) st = usbeam_cuda_exec_grid_cap(p->exec, &p->grid_cap);
    if (st != USBEAM_OK) {
        usbeam_color_cuda_destroy(p);
        return st;
    }
    *out = p;
    return USBEAM_OK;
}

extern "C" void usbeam_color_cuda_destroy(usbeam_color_cuda *p)
{
    if (!p) return;
    usbeam_cuda_exec_destroy(p->exec);
    usbeam_free(p);
}

extern "C" usbeam_cuda_exec *usbeam_color_cuda_exec(usbeam_color_cuda *p) { return p ? p->exec : nullptr; }

static usbeam_status color_cuda_run(usbeam_color_cuda *p, const float2 *iq, float *velocity, float *variance,
                                    float *power)
{
    usbeam_cuda_exec *e = p->exec;
    cudaStream_t stream = usbeam_cuda_exec_cuda_stream(e);
    const usbeam_color_params *prm = &p->params;
    const size_t n = p->n_pixels;
    usbeam_status st = usbeam_cuda_stage_begin(e, COLOR_AUTOCORR);
    if (st != USBEAM_OK) return st;
    autocorr_kernel<<<grid_for(n, p->grid_cap), THREADS, 0, stream>>>(iq, prm->n_frames, n, (size_t)prm->lag,
                                                                      prm->nz, prm->nx, prm->axial_correction,
                                                                      p->acc, power);
    USBEAM_CUDA_TRY(cudaGetLastError());
    if ((st = usbeam_cuda_stage_end(e, COLOR_AUTOCORR)) != USBEAM_OK) return st;

    if ((st = usbeam_cuda_stage_begin(e, COLOR_SMOOTH)) != USBEAM_OK) return st;
    if (p->smooth) {
        const size_t total = (size_t)p->n_acc * n;
        const unsigned grid = grid_for(total, p->grid_cap);
        smooth_x_kernel<<<grid, THREADS, 0, stream>>>(p->acc, total, prm->nx, p->window_x, prm->window_x, p->tmp);
        USBEAM_CUDA_TRY(cudaGetLastError());
        smooth_z_kernel<<<grid, THREADS, 0, stream>>>(p->tmp, total, prm->nz, prm->nx, p->window_z, prm->window_z,
                                                      p->acc);
        USBEAM_CUDA_TRY(cudaGetLastError());
    }
    if ((st = usbeam_cuda_stage_end(e, COLOR_SMOOTH)) != USBEAM_OK) return st;

    if ((st = usbeam_cuda_stage_begin(e, COLOR_ESTIMATE)) != USBEAM_OK) return st;
    const int axial = prm->axial_correction;
    const double axial_scale = axial ? prm->c / (4.0 * PI * prm->dz) : 0.0; /* Hz per rad */
    const double carrier_phase = axial ? prm->fc / axial_scale : 0.0;      /* rad per row */
    estimate_kernel<<<grid_for(n, p->grid_cap), THREADS, 0, stream>>>(p->acc, n, axial, p->nyquist, prm->fc,
                                                                      axial_scale, carrier_phase, velocity,
                                                                      variance);
    USBEAM_CUDA_TRY(cudaGetLastError());
    return usbeam_cuda_stage_end(e, COLOR_ESTIMATE);
}

extern "C" usbeam_status usbeam_color_cuda_execute(usbeam_color_cuda *p, const void *in, float *velocity,
                                                   float *variance, float *power)
{
    if (!p || !in || !velocity)
        return usbeam_fail(USBEAM_ERR_NULL_POINTER, "plan, in and velocity must not be NULL");
    usbeam_status st = usbeam_cuda_exec_begin(p->exec);
    if (st != USBEAM_OK) return st;
    st = color_cuda_run(p, (const float2 *)in, velocity, variance, power);
    usbeam_cuda_exec_end(p->exec);
    return st;
}

/* ---- power Doppler ------------------------------------------------------------------------ */

struct usbeam_power_cuda {
    usbeam_cuda_exec *exec;
    usbeam_power_params params;
    unsigned long long *max_bits; /* device: max stored power as IEEE bits (dB without a fixed reference) */
    unsigned grid_cap;
};

extern "C" usbeam_status usbeam_power_cuda_create(const usbeam_power_params *params, usbeam_power_cuda **out)
{
    if (!params || !out) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "params and plan must not be NULL");
    *out = nullptr;
    usbeam_power_cuda *p = (usbeam_power_cuda *)usbeam_alloc(sizeof *p);
    if (!p) return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "power CUDA plan");
    p->params = *params;
    usbeam_status st = usbeam_cuda_exec_create(POWER_STAGES, 2, &p->exec);
    if (st == USBEAM_OK)
        st = usbeam_cuda_exec_alloc(p->exec, sizeof(unsigned long long), "power reference", (void **)&p->max_bits);
    if (st == USBEAM_OK) st = usbeam_cuda_exec_grid_cap(p->exec, &p->grid_cap);
    if (st != USBEAM_OK) {
        usbeam_power_cuda_destroy(p);
        return st;
    }
    *out = p;
    return USBEAM_OK;
}

extern "C" void usbeam_power_cuda_destroy(usbeam_power_cuda *p)
{
    if (!p) return;
    usbeam_cuda_exec_destroy(p->exec);
    usbeam_free(p);
}

extern "C" usbeam_cuda_exec *usbeam_power_cuda_exec(usbeam_power_cuda *p) { return p ? p->exec : nullptr; }

static usbeam_status power_cuda_run(usbeam_power_cuda *p, const float2 *iq, float *out)
{
    usbeam_cuda_exec *e = p->exec;
    cudaStream_t stream = usbeam_cuda_exec_cuda_stream(e);
    const usbeam_power_params *prm = &p->params;
    const int need_max = prm->output_db && !(prm->reference > 0.0);
    const unsigned grid = grid_for(prm->n_pixels, p->grid_cap);
    usbeam_status st = usbeam_cuda_stage_begin(e, POWER_MEAN);
    if (st != USBEAM_OK) return st;
    if (need_max) USBEAM_CUDA_TRY(cudaMemsetAsync(p->max_bits, 0, sizeof(unsigned long long), stream));
    power_mean_kernel<<<grid, THREADS, 0, stream>>>(iq, prm->n_frames, prm->n_pixels, prm->noise_floor, out,
                                                    need_max ? p->max_bits : nullptr);
    USBEAM_CUDA_TRY(cudaGetLastError());
    if ((st = usbeam_cuda_stage_end(e, POWER_MEAN)) != USBEAM_OK) return st;
    if (!prm->output_db) return USBEAM_OK;
    if ((st = usbeam_cuda_stage_begin(e, POWER_DB)) != USBEAM_OK) return st;
    power_db_kernel<<<grid, THREADS, 0, stream>>>(out, prm->n_pixels, prm->reference, p->max_bits);
    USBEAM_CUDA_TRY(cudaGetLastError());
    return usbeam_cuda_stage_end(e, POWER_DB);
}

extern "C" usbeam_status usbeam_power_cuda_execute(usbeam_power_cuda *p, const void *in, float *out)
{
    if (!p || !in || !out) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "plan, in and out must not be NULL");
    usbeam_status st = usbeam_cuda_exec_begin(p->exec);
    if (st != USBEAM_OK) return st;
    st = power_cuda_run(p, (const float2 *)in, out);
    usbeam_cuda_exec_end(p->exec);
    return st;
}
