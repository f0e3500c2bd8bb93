/*
 * preprocess.cu - CUDA twin of csrc/preprocess.c: image -> model input (bilinear resize,
 * per-channel scale/offset, channel repeat, NCHW/NHWC, FP32/FP16) in one kernel, and the
 * FP16 <-> FP32 conversion kernels.
 *
 * Layouts and conventions: as csrc/preprocess.c (the resize taps are computed there, in
 * double, and copied here once at plan creation).  One thread per output pixel computes all
 * its channels.  The blend uses explicit _rn intrinsics in the same order as the C code, so
 * no FMA contraction changes a rounding: CPU and GPU outputs are bit-identical.
 * Asynchronous: everything is queued on the caller's stream; no host synchronisation.
 */
#include "ai/ai_internal.h"
#include "ai/ai_math.h"
#include "runtime/cuda_common.cuh"

#include <cuda_runtime.h>
#include <stdint.h>

struct usbeam_cuda_preprocess {
    usbeam_preprocess_params params;
    usbeam_resize_tap *rows, *cols; /* device */
    float scale[3], offset[3];
};

struct preprocess_args {
    const usbeam_resize_tap *rows, *cols;
    int in_height, in_width, in_channels, out_height, out_width, out_channels, nchw, in_dtype, out_half;
    float scale[3], offset[3];
};

__device__ __forceinline__ float load_pixel(const void *in, int dtype, size_t index)
{
    if (dtype == USBEAM_DTYPE_UINT8) return (float)((const uint8_t *)in)[index];
    if (dtype == USBEAM_DTYPE_FLOAT16) return ai_half_bits_to_float(((const uint16_t *)in)[index]);
    return ((const float *)in)[index];
}

__device__ __forceinline__ float lerp_rn(float a, float b, float w)
{
    return __fadd_rn(a, __fmul_rn(w, __fsub_rn(b, a)));
}

__global__ void preprocess_kernel(preprocess_args a, const void *__restrict__ in, void *__restrict__ out,
                                  size_t n_pixels)
{
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
            const float upper = lerp_rn(load_pixel(in, a.in_dtype, top + left + ci),
                                        load_pixel(in, a.in_dtype, top + right + ci), tx.weight);
            const float lower = lerp_rn(load_pixel(in, a.in_dtype, bottom + left + ci),
                                        load_pixel(in, a.in_dtype, bottom + right + ci), tx.weight);
            const float value = __fadd_rn(__fmul_rn(lerp_rn(upper, lower, ty.weight), a.scale[c]), a.offset[c]);
            const size_t index = a.nchw ? (image * a.out_channels + c) * plane + y * a.out_width + x
                                        : p * a.out_channels + c;
            if (a.out_half)
                ((uint16_t *)out)[index] = ai_float_to_half_bits(value);
            else
                ((float *)out)[index] = value;
        }
    }
}

static unsigned grid_for(size_t n, unsigned block)
{
    size_t blocks = (n + block - 1) / block;
    return (unsigned)(blocks < 65535u * 16u ? (blocks ? blocks : 1) : 65535u * 16u);
}

extern "C" usbeam_status usbeam_cuda_preprocess_create(const usbeam_preprocess_params *params,
                                                       const usbeam_resize_tap *rows,
                                                       const usbeam_resize_tap *cols, const float *scale,
                                                       const float *offset, usbeam_cuda_preprocess **state)
{
    *state = NULL;
    usbeam_cuda_preprocess *s = (usbeam_cuda_preprocess *)usbeam_alloc(sizeof *s);
    if (!s) return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "preprocess plan (CUDA)");
    s->params = *params;
    for (int c = 0; c < 3; ++c) {
        s->scale[c] = scale[c];
        s->offset[c] = offset[c];
    }
    *state = s; /* from here on, usbeam_cuda_preprocess_destroy releases what was made */
    USBEAM_CUDA_TRY(cudaMalloc((void **)&s->rows, params->out_height * sizeof *rows));
    USBEAM_CUDA_TRY(cudaMalloc((void **)&s->cols, params->out_width * sizeof *cols));
    USBEAM_CUDA_TRY(cudaMemcpy(s->rows, rows, params->out_height * sizeof *rows, cudaMemcpyHostToDevice));
    USBEAM_CUDA_TRY(cudaMemcpy(s->cols, cols, params->out_width * sizeof *cols, cudaMemcpyHostToDevice));
    return USBEAM_OK;
}

extern "C" void usbeam_cuda_preprocess_destroy(usbeam_cuda_preprocess *state)
{
    if (!state) return;
    cudaFree(state->rows);
    cudaFree(state->cols);
    usbeam_free(state);
}

extern "C" usbeam_status usbeam_cuda_preprocess_run(usbeam_cuda_preprocess *s, const void *in, void *out,
                                                    void *stream)
{
    const usbeam_preprocess_params *p = &s->params;
    preprocess_args a;
    a.rows = s->rows;
    a.cols = s->cols;
    a.in_height = (int)p->in_height;
    a.in_width = (int)p->in_width;
    a.in_channels = (int)p->in_channels;
    a.out_height = (int)p->out_height;
    a.out_width = (int)p->out_width;
    a.out_channels = (int)p->out_channels;
    a.nchw = p->out_layout == USBEAM_LAYOUT_NCHW;
    a.in_dtype = (int)p->in_dtype;
    a.out_half = p->out_dtype == USBEAM_DTYPE_FLOAT16;
    for (int c = 0; c < 3; ++c) {
        a.scale[c] = s->scale[c];
        a.offset[c] = s->offset[c];
    }
    const size_t n_pixels = p->n_images * p->out_height * p->out_width;
    preprocess_kernel<<<grid_for(n_pixels, 256), 256, 0, (cudaStream_t)stream>>>(a, in, out, n_pixels);
    USBEAM_CUDA_TRY(cudaGetLastError());
    return USBEAM_OK;
}

/* ---------------------------------------------------------------- FP16 <-> FP32 */

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

extern "C" usbeam_status usbeam_cuda_float32_to_float16(const void *in, void *out, size_t n, void *stream)
{
    if (n == 0) return USBEAM_OK;
    if (!in || !out) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "in and out must not be NULL");
    float_to_half_kernel<<<grid_for(n, 256), 256, 0, (cudaStream_t)stream>>>((const float *)in, (uint16_t *)out, n);
    USBEAM_CUDA_TRY(cudaGetLastError());
    return USBEAM_OK;
}

extern "C" usbeam_status usbeam_cuda_float16_to_float32(const void *in, void *out, size_t n, void *stream)
{
    if (n == 0) return USBEAM_OK;
    if (!in || !out) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "in and out must not be NULL");
    half_to_float_kernel<<<grid_for(n, 256), 256, 0, (cudaStream_t)stream>>>((const uint16_t *)in, (float *)out, n);
    USBEAM_CUDA_TRY(cudaGetLastError());
    return USBEAM_OK;
}
