/*
 * das.c - delay-and-sum beamforming for linear arrays, CPU execute (OpenMP).
 *
 * Layouts: in  (n_frames, n_transmits, n_elements, n_samples): int16 / float32 RF or
 *              complex64 IQ (interleaved re, im);
 *          out (n_frames, n_points): float32 (RF) or complex64 (IQ).
 * Units: none here; the plan (das_setup.c) turned geometry (m, s, Hz) into sample taps
 * and weights with the window and the IQ phase rotation exp(+j 2 pi fc tau) folded in.
 *
 * Why this shape: each (point, transmit, element) needs one delay and one set of weights
 * that all frames share, so the input is first staged in the plan as
 * (transmit, element, sample, frame) float32 planes (re and im apart).  The frame loop is
 * then innermost, contiguous and vectorised, and a tap of every frame is one row: the
 * kernels keep blocks of 32 (then 8) frames of sums in vector registers across all the
 * entries of a point.  Points run in parallel; each thread has its own scratch.
 * Reference: Perrot et al., "So you think you can DAS?", Ultrasonics 111 (2021) 106309.
 */
#include "das_internal.h"

/* Let the compiler fuse a*b + c into FMA in the hot loops (ISO C mode would not). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=fast")
#endif

#include <stdint.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
/* An AVX2 + FMA build (x86-64-v3) of the hot loops besides the baseline, chosen when the
 * library loads.  (An AVX-512 clone measured slower on the EPYC development machine.) */
#define USBEAM_HOT __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define USBEAM_HOT
#endif

#define STAGE_TILE 32

/* Copy the input into the staged (transmit, element, sample, frame) planes.  Returns the
 * number of channels holding a NaN or an infinity (x - x is 0 only for finite x), so bad
 * data is refused without a separate pass over it. */
static size_t stage_input(const usbeam_das_plan *plan, const void *in)
{
    const usbeam_das_params *prm = &plan->params;
    const size_t n_frames = prm->n_frames, n_samples = prm->n_samples;
    const size_t channel = n_samples * n_frames;           /* staged floats per (t, e) */
    const size_t frame_stride = prm->n_transmits * prm->n_elements * n_samples; /* input samples per frame */
    const ptrdiff_t n_channels = (ptrdiff_t)(prm->n_transmits * prm->n_elements);
    float *re_plane = plan->stage, *im_plane = plan->stage + plan->stage_plane;
    size_t bad_channels = 0;
#pragma omp parallel for schedule(static) reduction(+ : bad_channels)
    for (ptrdiff_t ch = 0; ch < n_channels; ++ch) {
        float *re = re_plane + (size_t)ch * channel, *im = im_plane + (size_t)ch * channel;
        int finite = 1;
        /* tiles of STAGE_TILE samples x all frames stay in L1 while they are transposed */
        for (size_t n0 = 0; n0 < n_samples; n0 += STAGE_TILE) {
            const size_t n1 = n0 + STAGE_TILE < n_samples ? n0 + STAGE_TILE : n_samples;
            for (size_t f = 0; f < n_frames; ++f) {
                const size_t src = f * frame_stride + (size_t)ch * n_samples;
                if (prm->input_dtype == USBEAM_DTYPE_COMPLEX64) {
                    const float *x = (const float *)in + 2 * src;
                    for (size_t n = n0; n < n1; ++n) {
                        re[n * n_frames + f] = x[2 * n];
                        im[n * n_frames + f] = x[2 * n + 1];
                        finite &= (x[2 * n] - x[2 * n] == 0.0f) & (x[2 * n + 1] - x[2 * n + 1] == 0.0f);
                    }
                } else if (prm->input_dtype == USBEAM_DTYPE_FLOAT32) {
                    const float *x = (const float *)in + src;
                    for (size_t n = n0; n < n1; ++n) {
                        re[n * n_frames + f] = x[n];
                        finite &= x[n] - x[n] == 0.0f;
                    }
                } else {
                    const int16_t *x = (const int16_t *)in + src;
                    for (size_t n = n0; n < n1; ++n) re[n * n_frames + f] = (float)x[n];
                }
            }
        }
        bad_channels += !finite;
    }
    return bad_channels;
}

/* The entries of one point, as the kernels read them. */
typedef struct point_view {
    const float *re_plane, *im_plane; /* staged data */
    const int32_t *tap;               /* (n_entries) first tap of each entry */
    const float *weight;              /* (n_entries, weight_stride) */
    size_t n_transmits, count;        /* entries = n_transmits x count (aperture) */
    size_t channel0;                  /* staged offset of (transmit 0, first aperture element) */
    size_t transmit_stride;           /* staged floats between transmits */
    size_t channel;                   /* staged floats per channel: n_samples x n_frames */
    size_t n_frames;
} point_view;

/* Eight frames of one staged row.  GCC/Clang vector extensions: the compiler maps them on
 * whatever the clone's instruction set offers (one AVX2 register, two SSE registers). */
typedef float frames8 __attribute__((vector_size(32)));

/* Unaligned load / store of 8 floats (macros: a function passing a 32-byte vector by
 * value would change ABI between the clones). */
#define LOAD8(dst, src) memcpy(&(dst), (src), sizeof(frames8))
#define STORE8(dst, src) memcpy((dst), &(src), sizeof(frames8))

/* Sum over a point's entries for frames f0 .. f0 + 8 NV - 1, NV vectors of sums per plane
 * held in registers for the whole point (they touch memory once). */
#define DEFINE_BLOCK_KERNELS(TAPS, NV)                                                                     \
    USBEAM_HOT static void iq_block_##TAPS##_##NV(const point_view *v, size_t f0, float *acc_re,           \
                                                   float *acc_im)                                           \
    {                                                                                                      \
        frames8 sum_re[NV], sum_im[NV];                                                                    \
        for (int q = 0; q < NV; ++q) sum_re[q] = sum_im[q] = (frames8){0};                                 \
        for (size_t t = 0, j = 0; t < v->n_transmits; ++t) {                                               \
            const size_t base = v->channel0 + t * v->transmit_stride + f0;                                 \
            for (size_t e = 0; e < v->count; ++e, ++j) {                                                   \
                const size_t row = base + e * v->channel + (size_t)v->tap[j] * v->n_frames;                \
                for (int k = 0; k < TAPS; ++k) {                                                           \
                    const float *xr = v->re_plane + row + (size_t)k * v->n_frames;                         \
                    const float *xi = v->im_plane + row + (size_t)k * v->n_frames;                         \
                    const float wr = v->weight[j * 2 * TAPS + 2 * k], wi = v->weight[j * 2 * TAPS + 2 * k + 1]; \
                    for (int q = 0; q < NV; ++q) {                                                         \
                        frames8 a, b;                                                                      \
                        LOAD8(a, xr + 8 * q);                                                              \
                        LOAD8(b, xi + 8 * q);                                                              \
                        /* four fused multiply-adds, two independent chains per sum */                     \
                        sum_re[q] += wr * a;                                                               \
                        sum_im[q] += wr * b;                                                               \
                        sum_re[q] -= wi * b;                                                               \
                        sum_im[q] += wi * a;                                                               \
                    }                                                                                      \
                }                                                                                          \
            }                                                                                              \
        }                                                                                                  \
        for (int q = 0; q < NV; ++q) {                                                                     \
            STORE8(acc_re + f0 + 8 * q, sum_re[q]);                                                        \
            STORE8(acc_im + f0 + 8 * q, sum_im[q]);                                                        \
        }                                                                                                  \
    }                                                                                                      \
    USBEAM_HOT static void rf_block_##TAPS##_##NV(const point_view *v, size_t f0, float *acc_re)           \
    {                                                                                                      \
        frames8 sum[NV];                                                                                   \
        for (int q = 0; q < NV; ++q) sum[q] = (frames8){0};                                                \
        for (size_t t = 0, j = 0; t < v->n_transmits; ++t) {                                               \
            const size_t base = v->channel0 + t * v->transmit_stride + f0;                                 \
            for (size_t e = 0; e < v->count; ++e, ++j) {                                                   \
                const size_t row = base + e * v->channel + (size_t)v->tap[j] * v->n_frames;                \
                for (int k = 0; k < TAPS; ++k) {                                                           \
                    const float *x = v->re_plane + row + (size_t)k * v->n_frames;                          \
                    const float w = v->weight[j * TAPS + k];                                               \
                    for (int q = 0; q < NV; ++q) {                                                         \
                        frames8 a;                                                                         \
                        LOAD8(a, x + 8 * q);                                                               \
                        sum[q] += w * a;                                                                   \
                    }                                                                                      \
                }                                                                                          \
            }                                                                                              \
        }                                                                                                  \
        for (int q = 0; q < NV; ++q) STORE8(acc_re + f0 + 8 * q, sum[q]);                                  \
    }

DEFINE_BLOCK_KERNELS(1, 4)
DEFINE_BLOCK_KERNELS(1, 1)
DEFINE_BLOCK_KERNELS(2, 4)
DEFINE_BLOCK_KERNELS(2, 1)
DEFINE_BLOCK_KERNELS(4, 4)
DEFINE_BLOCK_KERNELS(4, 1)

/* Frames past the last block of 8 (and every frame when n_frames < 8), one at a time. */
static void tail_frames(const point_view *v, int taps, int iq, size_t f0, float *acc_re, float *acc_im)
{
    const int stride = iq ? 2 * taps : taps;
    for (size_t f = f0; f < v->n_frames; ++f) {
        float sum_re = 0.0f, sum_im = 0.0f;
        for (size_t t = 0, j = 0; t < v->n_transmits; ++t) {
            const size_t base = v->channel0 + t * v->transmit_stride + f;
            for (size_t e = 0; e < v->count; ++e, ++j) {
                const size_t row = base + e * v->channel + (size_t)v->tap[j] * v->n_frames;
                const float *w = v->weight + j * (size_t)stride;
                for (int k = 0; k < taps; ++k) {
                    const float a = v->re_plane[row + (size_t)k * v->n_frames];
                    if (iq) {
                        const float b = v->im_plane[row + (size_t)k * v->n_frames];
                        sum_re += w[2 * k] * a - w[2 * k + 1] * b;
                        sum_im += w[2 * k] * b + w[2 * k + 1] * a;
                    } else {
                        sum_re += w[k] * a;
                    }
                }
            }
        }
        acc_re[f] = sum_re;
        acc_im[f] = sum_im;
    }
}

/* All frames of one point into acc_re / acc_im: blocks of 32, then of 8, then singles. */
static void beamform_point(const usbeam_das_plan *plan, const point_view *v, float *acc_re, float *acc_im)
{
    const size_t n_frames = v->n_frames;
    size_t f0 = 0;
#define RUN_BLOCK(NV)                                                                         \
    switch (plan->taps) {                                                                     \
    case 1: plan->is_iq ? iq_block_1_##NV(v, f0, acc_re, acc_im) : rf_block_1_##NV(v, f0, acc_re); break; \
    case 2: plan->is_iq ? iq_block_2_##NV(v, f0, acc_re, acc_im) : rf_block_2_##NV(v, f0, acc_re); break; \
    default: plan->is_iq ? iq_block_4_##NV(v, f0, acc_re, acc_im) : rf_block_4_##NV(v, f0, acc_re); break; \
    }
    for (; f0 + 32 <= n_frames; f0 += 32) RUN_BLOCK(4)
    for (; f0 + 8 <= n_frames; f0 += 8) RUN_BLOCK(1)
#undef RUN_BLOCK
    if (f0 < n_frames) tail_frames(v, plan->taps, plan->is_iq, f0, acc_re, acc_im);
}

usbeam_status usbeam_das_execute(usbeam_das_plan *plan, const void *in, void *out)
{
    if (!plan || !in || !out) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "plan, in and out must not be NULL");
    const usbeam_das_params *prm = &plan->params;
    const size_t n_frames = prm->n_frames, n_points = prm->n_points;
    const size_t bad_channels = stage_input(plan, in);
    if (bad_channels)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "data contains NaN or infinite values (in %zu of %zu channels)",
                           bad_channels, prm->n_transmits * prm->n_elements);

    /* Points go in tiles of USBEAM_DAS_POINT_TILE: each point's frames land in a column
     * of the thread's tile, then every frame's row of the tile is written to out in one
     * contiguous run (instead of n_frames scattered stores per point). */
    const size_t tile = USBEAM_DAS_POINT_TILE;
    const ptrdiff_t n_tiles = (ptrdiff_t)((n_points + tile - 1) / tile);
#pragma omp parallel num_threads(plan->n_threads)
    {
#ifdef _OPENMP
        const int thread = omp_get_thread_num();
#else
        const int thread = 0;
#endif
        float *acc_re = plan->acc + (size_t)thread * 2 * plan->acc_stride;
        float *acc_im = acc_re + plan->acc_stride;
        float *tile_re = plan->tile + (size_t)thread * 2 * n_frames * tile;
        float *tile_im = tile_re + n_frames * tile;
        int32_t *own_tap = plan->has_table ? NULL : plan->thread_tap + (size_t)thread * plan->thread_entries;
        float *own_weight = plan->has_table ? NULL
                                            : plan->thread_weight + (size_t)thread * plan->thread_entries * (size_t)plan->weight_stride;
#pragma omp for schedule(dynamic, 1)
        for (ptrdiff_t k = 0; k < n_tiles; ++k) {
            const size_t p0 = (size_t)k * tile, m = n_points - p0 < tile ? n_points - p0 : tile;
            for (size_t i = 0; i < m; ++i) {
                const size_t p = p0 + i;
                const int32_t *tap = own_tap;
                const float *weight = own_weight;
                if (plan->has_table) {
                    tap = plan->table_tap + plan->entry_offset[p];
                    weight = plan->table_weight + plan->entry_offset[p] * (size_t)plan->weight_stride;
                } else {
                    usbeam_das_point_entries(plan, p, own_tap, own_weight);
                }
                const point_view view = {
                    .re_plane = plan->stage,
                    .im_plane = plan->stage + plan->stage_plane,
                    .tap = tap,
                    .weight = weight,
                    .n_transmits = prm->n_transmits,
                    .count = (size_t)plan->aperture_count[p],
                    .channel0 = (size_t)plan->aperture_first[p] * prm->n_samples * n_frames,
                    .transmit_stride = prm->n_elements * prm->n_samples * n_frames,
                    .channel = prm->n_samples * n_frames,
                    .n_frames = n_frames,
                };
                beamform_point(plan, &view, acc_re, acc_im);
                for (size_t f = 0; f < n_frames; ++f) {
                    tile_re[f * tile + i] = acc_re[f];
                    tile_im[f * tile + i] = acc_im[f];
                }
            }
            for (size_t f = 0; f < n_frames; ++f) {
                const float *re = tile_re + f * tile, *im = tile_im + f * tile;
                if (plan->is_iq) {
                    float *dst = (float *)out + 2 * (f * n_points + p0);
                    for (size_t i = 0; i < m; ++i) {
                        dst[2 * i] = re[i];
                        dst[2 * i + 1] = im[i];
                    }
                } else {
                    memcpy((float *)out + f * n_points + p0, re, m * sizeof(float));
                }
            }
        }
    }
    return USBEAM_OK;
}
