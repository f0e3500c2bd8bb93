/*
 * preprocess.cu - image -> model input (bilinear resize, per-channel scale/offset, channel
 * repeat, NCHW/NHWC, FP32/FP16) in one kernel, and the FP16 <-> FP32 conversion kernels: CUDA
 * twin of csrc/ai/preprocess.c.
 *
 * Layouts: in  (n_images, in_height, in_width, in_channels) uint8 / float16 / float32, device;
 *          out (n_images, out_channels, out_height, out_width) NCHW or
 *              (n_images, out_height, out_width, out_channels) NHWC, float32 or float16, device.
 * Units:   pixels; an output value is the interpolated grey level times scale plus offset.
 * Semantics: as csrc/ai/preprocess.c, which computes the taps of each axis in double and the
 *   per-channel affine (usbeam_preprocess_tables); they are uploaded once at plan creation.
 *   One thread per output pixel computes all its channels.  The blend uses _rn intrinsics in
 *   the C code's order, so no FMA contraction changes a rounding: CPU and GPU outputs are
 *   bit-identical (tests/test_ai_cuda.py).
 * Stage: "preprocess.resize", on the plan's stream (runtime/exec.cuh), no host synchronisation.
 * Non-finite input: the CPU refuses a NaN or inf float image (and fills out with NaN); here the
 *   kernel computes with it (NaN and inf reach the output as the blend makes them) and every
 *   thread that read a non-finite tap stores USBEAM_INPUT_FAULT_NONFINITE once into the plan's
 *   mapped fault word, read by the host once the work has finished.  A shrinking resize skips
 *   pixels: a NaN that no output reads is not flagged, and changes nothing.
 * FP16 <-> FP32 (bit-exact with numpy's astype, NaN payloads kept: ai_math.h): plan-less
 *   element-wise kernels queued on the caller's stream.  They keep NaN and inf by definition,
 *   so there is nothing to flag, and no plan to hold stage events.
 */
#include "ai/ai_math.h"
#include "runtime/exec.cuh"

#include <math.h>
#include <stdint.h>

namespace {

enum { STAGE_RESIZE = 0 };
const char *const STAGE_NAMES[] = {"preprocess.resize"};
constexpr unsigned THREADS = 256;

/* Everything the kernel needs besides the pointers, fixed at plan creation. */
struct preprocess_args {
    const usbeam_resize_tap *rows, *cols; /* device copies of the taps */
    int in_height, in_width, in_channels, out_height, out_width, out_channels, nchw, in_dtype, out_half;
    float scale[3], offset[3];
};

__device__ __forceinline__ float load_pixel(const void *in, int dtype, size_t index)
{
    if (dtype == USBEAM_DTYPE_UINT8) return (float)((const uint8_t *)in)[index];
    if (dtype == USBEAM_DTYPE_FLOAT16) return ai_half_bits_to_float(((const uint16_t *)in)[index]);
    return ((const float *)in)[index];
}

/* a + w (b - a), each operation rounded on its own: the C code's expression without FMA. */
__device__ __forceinline__ float lerp_rn(float a, float b, float w)
{
    return __fadd_rn(a, __fmul_rn(w, __fsub_rn(b, a)));
}

/* Grid-stride over the n_pixels output pixels (image, y, x) of the batch. */
__global__ void preprocess_kernel(preprocess_args a, const void *__restrict__ in, void *__restrict__ out,
                                  size_t n_pixels, unsigned *input_fault)
{
    bool non_finite = false;
    for (size_t p = blockIdx.x * (size_t)blockDim.x + threadIdx.x; p < n_pixels; p += (size_t)gridDim.x * blockDim.x) {
        const size_t x = p % a.out_width;
        const size_t y = (p / a.out_width) % a.out_height;
        const size_t image = p / ((size_t)a.out_width * a.out_height);
        const usbeam_resize_tap ty = a.rows[y], tx = a.cols[x];
        const size_t row_len = (size_t)a.in_width * a.in_channels;
        const size_t base = image * a.in_height * row_len;
        const size_t top = base + (size_t)ty.first * row_len, bottom = base + (size_t)ty.second * row_len;
        const size_t left = (size_t)tx.first * a.in_channels, right = (size_t)tx.second * a.in_channels;
        const size_t plane = (size_t)a.out_height * a.out_width;
        for (int c = 0; c < a.out_channels; ++c) {
            const int ci = a.in_channels == 1 ? 0 : c;
            const float p00 = load_pixel(in, a.in_dtype, top + left + ci);
            const float p01 = load_pixel(in, a.in_dtype, top + right + ci);
            const float p10 = load_pixel(in, a.in_dtype, bottom + left + ci);
            const float p11 = load_pixel(in, a.in_dtype, bottom + right + ci);
            non_finite |= !(isfinite(p00) && isfinite(p01) && isfinite(p10) && isfinite(p11));
            const float upper = lerp_rn(p00, p01, tx.weight), lower = lerp_rn(p10, p11, tx.weight);
            const float value = __fadd_rn(__fmul_rn(lerp_rn(upper, lower, ty.weight), a.scale[c]), a.offset[c]);
            const size_t index = a.nchw ? (image * a.out_channels + c) * plane + y * a.out_width + x
                                        : p * a.out_channels + c;
            if (a.out_half)
                ((uint16_t *)out)[index] = ai_float_to_half_bits(value);
            else
                ((float *)out)[index] = value;
        }
    }
    if (non_finite) *(volatile unsigned *)input_fault = USBEAM_INPUT_FAULT_NONFINITE; /* mapped host word */
}

unsigned grid_for(size_t n, unsigned cap)
{
    size_t blocks = (n + THREADS - 1) / THREADS;
    if (blocks < 1) blocks = 1;
    return (unsigned)(blocks < cap ? blocks : cap);
}

} // namespace

struct usbeam_preprocess_cuda {
    usbeam_cuda_exec *exec;
    preprocess_args args; /* complete once create has uploaded the taps */
    size_t n_pixels;      /* n_images * out_height * out_width */
    unsigned *input_fault; /* mapped host word (exec.cuh) */
    unsigned grid_cap;     /* grid-stride launch: a few waves of the device */
};

extern "C" usbeam_status usbeam_preprocess_cuda_create(const usbeam_preprocess_params *params,
                                                       const usbeam_preprocess_tables *tables,
                                                       usbeam_preprocess_cuda **out)
{
    if (!params || !tables || !out)
        return usbeam_fail(USBEAM_ERR_NULL_POINTER, "params, tables and plan must not be NULL");
    *out = nullptr;
    usbeam_preprocess_cuda *p = (usbeam_preprocess_cuda *)usbeam_alloc(sizeof *p);
    if (!p) return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "preprocess CUDA plan");
    /* the C plan has checked every size: each fits int32 and the batch fits memory */
    preprocess_args *a = &p->args;
    a->in_height = (int)params->in_height;
    a->in_width = (int)params->in_width;
    a->in_channels = (int)params->in_channels;
    a->out_height = (int)params->out_height;
    a->out_width = (int)params->out_width;
    a->out_channels = (int)params->out_channels;
    a->nchw = params->out_layout == USBEAM_LAYOUT_NCHW;
    a->in_dtype = (int)params->in_dtype;
    a->out_half = params->out_dtype == USBEAM_DTYPE_FLOAT16;
    for (int c = 0; c < 3; ++c) {
        a->scale[c] = tables->scale[c];
        a->offset[c] = tables->offset[c];
    }
    p->n_pixels = params->n_images * params->out_height * params->out_width;
    const size_t row_bytes = params->out_height * sizeof(usbeam_resize_tap);
    const size_t col_bytes = params->out_width * sizeof(usbeam_resize_tap);
    usbeam_resize_tap *rows = nullptr, *cols = nullptr;
    usbeam_status st = usbeam_cuda_exec_create(STAGE_NAMES, 1, &p->exec);
    if (st == USBEAM_OK) st = usbeam_cuda_exec_alloc(p->exec, row_bytes, "preprocess row taps", (void **)&rows);
    if (st == USBEAM_OK) st = usbeam_cuda_exec_alloc(p->exec, col_bytes, "preprocess column taps", (void **)&cols);
    if (st == USBEAM_OK) st = usbeam_cuda_exec_upload(p->exec, rows, tables->rows, row_bytes);
    if (st == USBEAM_OK) st = usbeam_cuda_exec_upload(p->exec, cols, tables->cols, col_bytes);
    if (st == USBEAM_OK) st = usbeam_cuda_exec_input_fault_flag(p->exec, &p->input_fault);
    if (st == USBEAM_OK) st = usbeam_cuda_exec_grid_cap(p->exec, &p->grid_cap);
    if (st != USBEAM_OK) {
        usbeam_preprocess_cuda_destroy(p);
        return st;
    }
    a->rows = rows;
    a->cols = cols;
    *out = p;
    return USBEAM_OK;
}

extern "C" void usbeam_preprocess_cuda_destroy(usbeam_preprocess_cuda *p)
{
    if (!p) return;
    usbeam_cuda_exec_destroy(p->exec); /* frees the taps with the plan's other device memory */
    usbeam_free(p);
}

extern "C" usbeam_cuda_exec *usbeam_preprocess_cuda_exec(usbeam_preprocess_cuda *p) { return p ? p->exec : nullptr; }

static usbeam_status preprocess_cuda_run(usbeam_preprocess_cuda *p, const void *in, void *out)
{
    usbeam_cuda_exec *e = p->exec;
    usbeam_status st = usbeam_cuda_stage_begin(e, STAGE_RESIZE);
    if (st != USBEAM_OK) return st;
    preprocess_kernel<<<grid_for(p->n_pixels, p->grid_cap), THREADS, 0, usbeam_cuda_exec_cuda_stream(e)>>>(
        p->args, in, out, p->n_pixels, p->input_fault);
    USBEAM_CUDA_TRY(cudaGetLastError());
    return usbeam_cuda_stage_end(e, STAGE_RESIZE);
}

extern "C" usbeam_status usbeam_preprocess_cuda_execute(usbeam_preprocess_cuda *p, const void *in, void *out)
{
    if (!p || !in || !out) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "plan, in and out must not be NULL");
    usbeam_status st = usbeam_cuda_exec_begin(p->exec);
    if (st != USBEAM_OK) return st;
    st = preprocess_cuda_run(p, in, out);
    usbeam_cuda_exec_end(p->exec);
    return st;
}

/* ---------------------------------------------------------------- FP16 <-> FP32 */

namespace {

__global__ void float_to_half_kernel(const float *__restrict__ in, uint16_t *__restrict__ out, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = ai_float_to_half_bits(in[i]);
}

__global__ void half_to_float_kernel(const uint16_t *__restrict__ in, float *__restrict__ out, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = ai_half_bits_to_float(in[i]);
}

/* Without a plan there is no device query behind a grid cap: 2^20 blocks of 256 threads cover
 * 2^28 elements per pass, more waves than any device runs at once, and the loop does the rest. */
constexpr unsigned CONVERT_GRID_CAP = 1u << 20;

} // namespace

extern "C" usbeam_status usbeam_cuda_float32_to_float16(const void *in, void *out, size_t n, void *stream)
{
    if (n == 0) return USBEAM_OK;
    if (!in || !out) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "in and out must not be NULL");
    float_to_half_kernel<<<grid_for(n, CONVERT_GRID_CAP), THREADS, 0, (cudaStream_t)stream>>>((const float *)in,
                                                                                              (uint16_t *)out, n);
    USBEAM_CUDA_TRY(cudaGetLastError());
    return USBEAM_OK;
}

extern "C" usbeam_status usbeam_cuda_float16_to_float32(const void *in, void *out, size_t n, void *stream)
{
    if (n == 0) return USBEAM_OK;
    if (!in || !out) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "in and out must not be NULL");
    half_to_float_kernel<<<grid_for(n, CONVERT_GRID_CAP), THREADS, 0, (cudaStream_t)stream>>>((const uint16_t *)in,
                                                                                              (float *)out, n);
    USBEAM_CUDA_TRY(cudaGetLastError());
    return USBEAM_OK;
}
