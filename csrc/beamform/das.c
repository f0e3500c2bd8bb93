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
 * entries of a point; a single frame is vectorised over the entries instead.  Points run
 * in parallel, in tiles whose output rows are written contiguously; each thread has its
 * own scratch.
 * Reference: Perrot et al., "So you think you can DAS?", Ultrasonics 111 (2021) 106309.
 */
#include "beamform/das_internal.h"
#include "common/interrupt.h"

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
 * library loads.  (An AVX-512 clone measured no faster on the EPYC development machine:
 * the kernels are bound by loads and FMA latency, not by vector width.) */
#define USBEAM_HOT __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define USBEAM_HOT
#endif

#define STAGE_TILE 32

/* Copy the input into the staged (transmit, element, sample, frame) planes.  Returns the
 * number of channels holding a NaN or an infinity (x - x is 0 only for finite x), so bad
 * data is refused without a separate pass over it. */
static size_t stage_input(const usbeam_das_plan *plan, size_t n_frames, const void *in)
{
    const usbeam_das_params *prm = &plan->params;
    const size_t n_samples = prm->n_samples;
    const size_t channel = n_samples * n_frames;           /* staged floats per (t, e) */
    const size_t frame_stride = prm->n_transmits * prm->n_elements * n_samples; /* input samples per frame */
    const ptrdiff_t n_channels = (ptrdiff_t)(prm->n_transmits * prm->n_elements);
    float *re_plane = plan->stage, *im_plane = plan->stage + plan->stage_plane;
    size_t bad_channels = 0;
#pragma omp parallel for schedule(dynamic, 8) reduction(+ : bad_channels)
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

/* Sum over a point's entries for frames f0 .. f0 + 8 NV - 1 into acc[0 .. 8 NV - 1], NV
 * vectors of sums per plane held in registers for the whole point (they touch memory once). */
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
            STORE8(acc_re + 8 * q, sum_re[q]);                                                        \
            STORE8(acc_im + 8 * q, sum_im[q]);                                                        \
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
        for (int q = 0; q < NV; ++q) STORE8(acc_re + 8 * q, sum[q]);                                  \
    }

DEFINE_BLOCK_KERNELS(1, 4)
DEFINE_BLOCK_KERNELS(1, 1)
DEFINE_BLOCK_KERNELS(2, 4)
DEFINE_BLOCK_KERNELS(2, 1)
DEFINE_BLOCK_KERNELS(4, 4)
DEFINE_BLOCK_KERNELS(4, 1)

#if defined(_OPENMP)
#define SIMD_SUM_IQ _Pragma("omp simd reduction(+ : sum_re, sum_im)")
#define SIMD_SUM_RF _Pragma("omp simd reduction(+ : sum)")
#else
#define SIMD_SUM_IQ
#define SIMD_SUM_RF
#endif

/* A single frame: no frame axis to vectorise, so the vector lanes take entries instead
 * (gathered samples, an OpenMP SIMD reduction). */
#define DEFINE_SINGLE_KERNELS(TAPS)                                                                         \
    USBEAM_HOT static void iq_single_##TAPS(const point_view *v, float *acc_re, float *acc_im)               \
    {                                                                                                      \
        float sum_re = 0.0f, sum_im = 0.0f;                                                                \
        for (size_t t = 0; t < v->n_transmits; ++t) {                                                      \
            const size_t j0 = t * v->count;                                                                \
            const float *re = v->re_plane + v->channel0 + t * v->transmit_stride;                          \
            const float *im = v->im_plane + v->channel0 + t * v->transmit_stride;                          \
            const int32_t *tap = v->tap + j0;                                                              \
            const float *w = v->weight + j0 * 2 * TAPS;                                                    \
            const ptrdiff_t count = (ptrdiff_t)v->count, channel = (ptrdiff_t)v->channel;                  \
            SIMD_SUM_IQ                                                                                    \
            for (ptrdiff_t e = 0; e < count; ++e) {                                                        \
                const ptrdiff_t row = e * channel + tap[e];                                                \
                for (int k = 0; k < TAPS; ++k) {                                                           \
                    const float a = re[row + k], b = im[row + k];                                          \
                    const float wr = w[e * 2 * TAPS + 2 * k], wi = w[e * 2 * TAPS + 2 * k + 1];            \
                    sum_re += wr * a - wi * b;                                                             \
                    sum_im += wr * b + wi * a;                                                             \
                }                                                                                          \
            }                                                                                              \
        }                                                                                                  \
        *acc_re = sum_re;                                                                                  \
        *acc_im = sum_im;                                                                                  \
    }                                                                                                      \
    USBEAM_HOT static void rf_single_##TAPS(const point_view *v, float *acc_re)                             \
    {                                                                                                      \
        float sum = 0.0f;                                                                                  \
        for (size_t t = 0; t < v->n_transmits; ++t) {                                                      \
            const size_t j0 = t * v->count;                                                                \
            const float *x = v->re_plane + v->channel0 + t * v->transmit_stride;                           \
            const int32_t *tap = v->tap + j0;                                                              \
            const float *w = v->weight + j0 * TAPS;                                                        \
            const ptrdiff_t count = (ptrdiff_t)v->count, channel = (ptrdiff_t)v->channel;                  \
            SIMD_SUM_RF                                                                                    \
            for (ptrdiff_t e = 0; e < count; ++e) {                                                        \
                const ptrdiff_t row = e * channel + tap[e];                                                \
                for (int k = 0; k < TAPS; ++k) sum += w[e * TAPS + k] * x[row + k];                        \
            }                                                                                              \
        }                                                                                                  \
        *acc_re = sum;                                                                                     \
    }

DEFINE_SINGLE_KERNELS(1)
DEFINE_SINGLE_KERNELS(2)
DEFINE_SINGLE_KERNELS(4)

/* All frames of one point into acc_re / acc_im: blocks of 32, then of 8; the last
 * n_frames % 8 frames by an 8-frame block whose extra lanes read past the row (into the
 * next row, or the staging buffer's padding: finite values) and are not stored. */
static void beamform_point(const usbeam_das_plan *plan, const point_view *v, float *acc_re, float *acc_im)
{
    const size_t n_frames = v->n_frames;
    if (n_frames == 1) {
        switch (plan->taps) {
        case 1: plan->is_iq ? iq_single_1(v, acc_re, acc_im) : rf_single_1(v, acc_re); break;
        case 2: plan->is_iq ? iq_single_2(v, acc_re, acc_im) : rf_single_2(v, acc_re); break;
        default: plan->is_iq ? iq_single_4(v, acc_re, acc_im) : rf_single_4(v, acc_re); break;
        }
        return;
    }
    size_t f0 = 0;
#define RUN_BLOCK(NV, RE, IM)                                                                   \
    switch (plan->taps) {                                                                       \
    case 1: plan->is_iq ? iq_block_1_##NV(v, f0, RE, IM) : rf_block_1_##NV(v, f0, RE); break;   \
    case 2: plan->is_iq ? iq_block_2_##NV(v, f0, RE, IM) : rf_block_2_##NV(v, f0, RE); break;   \
    default: plan->is_iq ? iq_block_4_##NV(v, f0, RE, IM) : rf_block_4_##NV(v, f0, RE); break;  \
    }
    for (; f0 + 32 <= n_frames; f0 += 32) RUN_BLOCK(4, acc_re + f0, acc_im + f0)
    for (; f0 + 8 <= n_frames; f0 += 8) RUN_BLOCK(1, acc_re + f0, acc_im + f0)
    if (f0 < n_frames) {
        float last_re[8], last_im[8];
        RUN_BLOCK(1, last_re, last_im)
        for (size_t f = f0; f < n_frames; ++f) {
            acc_re[f] = last_re[f - f0];
            acc_im[f] = last_im[f - f0];
        }
    }
#undef RUN_BLOCK
}

usbeam_status usbeam_das_execute(usbeam_das_plan *plan, const void *in, void *out)
{
    if (!plan) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "plan must not be NULL");
    return usbeam_das_execute_frames(plan, plan->params.n_frames, in, out);
}

usbeam_status usbeam_das_execute_frames(usbeam_das_plan *plan, size_t n_frames, const void *in, void *out)
{
    if (!plan || !in || !out) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "plan, in and out must not be NULL");
    const usbeam_das_params *prm = &plan->params;
    if (n_frames == 0 || n_frames > prm->n_frames)
        return usbeam_fail(USBEAM_ERR_INVALID_SHAPE, "n_frames must be in [1, %zu], the plan's capacity (got %zu)",
                           prm->n_frames, n_frames);
    if (plan->cuda) { /* device pointers; the CUDA twin runs whole batches of its capacity */
        if (n_frames != prm->n_frames)
            return usbeam_fail(USBEAM_ERR_INVALID_SHAPE, "n_frames must equal the CUDA plan's %zu frames (got %zu)",
                               prm->n_frames, n_frames);
        return usbeam_das_cuda_execute(plan->cuda, in, out);
    }
    const size_t n_points = prm->n_points;
    const size_t bad_channels = stage_input(plan, n_frames, in);
    if (bad_channels)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "data contains NaN or infinite values (in %zu of %zu channels)",
                           bad_channels, prm->n_transmits * prm->n_elements);

    /* Points go in tiles of USBEAM_DAS_POINT_TILE: each point's frames land in the thread's
     * tile, then every frame's run of the tile's points is written to out contiguously
     * (instead of n_frames scattered stores per point). */
    const size_t tile = USBEAM_DAS_POINT_TILE;
    const ptrdiff_t n_tiles = (ptrdiff_t)((n_points + tile - 1) / tile);
    usbeam_interrupt interrupt; /* Ctrl-C between tiles (common/interrupt.h) */
    usbeam_interrupt_begin(&interrupt);
#pragma omp parallel num_threads(usbeam_team_size(plan->n_threads))
    {
#ifdef _OPENMP
        const int thread = omp_get_thread_num();
#else
        const int thread = 0;
#endif
        /* (point of the tile, frame): the kernels write each point's frames contiguously */
        float *tile_re = plan->tile + (size_t)thread * 2 * prm->n_frames * tile;
        float *tile_im = tile_re + prm->n_frames * tile;
        int32_t *own_tap = plan->has_table ? NULL : plan->thread_tap + (size_t)thread * plan->thread_entries;
        float *own_weight = plan->has_table ? NULL
                                            : plan->thread_weight + (size_t)thread * plan->thread_entries * (size_t)plan->weight_stride;
#pragma omp for schedule(dynamic, 1)
        for (ptrdiff_t k = 0; k < n_tiles; ++k) {
            if (usbeam_interrupt_poll(&interrupt)) continue;
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
                beamform_point(plan, &view, tile_re + i * n_frames, tile_im + i * n_frames);
            }
            /* transpose on the way out: each frame's run of m points is contiguous in out */
            for (size_t f = 0; f < n_frames; ++f) {
                if (plan->is_iq) {
                    float *dst = (float *)out + 2 * (f * n_points + p0);
                    for (size_t i = 0; i < m; ++i) {
                        dst[2 * i] = tile_re[i * n_frames + f];
                        dst[2 * i + 1] = tile_im[i * n_frames + f];
                    }
                } else {
                    float *dst = (float *)out + f * n_points + p0;
                    for (size_t i = 0; i < m; ++i) dst[i] = tile_re[i * n_frames + f];
                }
            }
        }
    }
    usbeam_status st = usbeam_interrupt_end(&interrupt);
    if (st != USBEAM_OK) usbeam_fill_nan(out, n_frames * n_points * (plan->is_iq ? 2 : 1)); /* no partial image */
    return st;
}
