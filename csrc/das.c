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
 * then innermost, contiguous and vectorised, and a tap of every frame is one row.  Points
 * run in parallel; each thread accumulates its point's frames in its own scratch.
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
/* AVX-512 and AVX2 builds of the hot loop besides the baseline, chosen when the library loads. */
#define USBEAM_HOT __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define USBEAM_HOT
#endif

/* Copy the input into the staged (transmit, element, sample, frame) planes. */
static void stage_input(const usbeam_das_plan *plan, const void *in)
{
    const usbeam_das_params *prm = &plan->params;
    const size_t n_frames = prm->n_frames, n_samples = prm->n_samples;
    const size_t channel = n_samples * n_frames;           /* staged floats per (t, e) */
    const size_t frame_stride = prm->n_transmits * prm->n_elements * n_samples; /* input samples per frame */
    const ptrdiff_t n_channels = (ptrdiff_t)(prm->n_transmits * prm->n_elements);
    float *re_plane = plan->stage, *im_plane = plan->stage + plan->stage_plane;
#pragma omp parallel for schedule(static)
    for (ptrdiff_t ch = 0; ch < n_channels; ++ch) {
        float *re = re_plane + (size_t)ch * channel, *im = im_plane + (size_t)ch * channel;
        for (size_t f = 0; f < n_frames; ++f) {
            const size_t src = f * frame_stride + (size_t)ch * n_samples;
            if (prm->input_dtype == USBEAM_DTYPE_COMPLEX64) {
                const float *x = (const float *)in + 2 * src;
                for (size_t n = 0; n < n_samples; ++n) {
                    re[n * n_frames + f] = x[2 * n];
                    im[n * n_frames + f] = x[2 * n + 1];
                }
            } else if (prm->input_dtype == USBEAM_DTYPE_FLOAT32) {
                const float *x = (const float *)in + src;
                for (size_t n = 0; n < n_samples; ++n) re[n * n_frames + f] = x[n];
            } else {
                const int16_t *x = (const int16_t *)in + src;
                for (size_t n = 0; n < n_samples; ++n) re[n * n_frames + f] = (float)x[n];
            }
        }
    }
}

/* Frames are accumulated in blocks of FRAME_BLOCK whose sums stay in registers across
 * all the entries of a point (they touch memory once per point); the frames past the
 * last whole block take a loop of run-time length over the accumulators in scratch. */
#define FRAME_BLOCK 16

/* sums[f] (+)= sum over the point's entries of w * x[row + f], f < N (N a constant
 * FRAME_BLOCK for the whole blocks, run-time for the last partial one). */
#define ACCUMULATE_ENTRIES(TAPS, N, F0, SUM_RE, SUM_IM)                                                       \
    for (size_t t = 0, j = 0; t < prm->n_transmits; ++t) {                                                    \
        const size_t base = (t * prm->n_elements + first) * channel + (F0);                                   \
        for (size_t e = 0; e < count; ++e, ++j) {                                                             \
            const size_t row = base + e * channel + (size_t)tap[j] * n_frames;                                \
            for (int k = 0; k < TAPS; ++k) {                                                                  \
                const float *restrict rr = re_plane + row + (size_t)k * n_frames;                             \
                if (iq) {                                                                                     \
                    const float *restrict ri = im_plane + row + (size_t)k * n_frames;                         \
                    const float wr = weight[j * 2 * TAPS + 2 * k], wi = weight[j * 2 * TAPS + 2 * k + 1];     \
                    for (size_t f = 0; f < (N); ++f) {                                                        \
                        SUM_RE[f] += wr * rr[f] - wi * ri[f];                                                 \
                        SUM_IM[f] += wr * ri[f] + wi * rr[f];                                                 \
                    }                                                                                         \
                } else {                                                                                      \
                    const float wk = weight[j * TAPS + k];                                                    \
                    for (size_t f = 0; f < (N); ++f) SUM_RE[f] += wk * rr[f];                                 \
                }                                                                                             \
            }                                                                                                 \
        }                                                                                                     \
    }

#define DEFINE_BEAMFORM_POINT(TAPS)                                                                          \
    USBEAM_HOT static void beamform_point_##TAPS(const usbeam_das_plan *plan, size_t p, const int32_t *tap,  \
                                                 const float *weight, float *restrict acc_re,                 \
                                                 float *restrict acc_im)                                      \
    {                                                                                                        \
        const usbeam_das_params *prm = &plan->params;                                                        \
        const size_t n_frames = prm->n_frames, channel = prm->n_samples * n_frames;                          \
        const size_t count = (size_t)plan->aperture_count[p], first = (size_t)plan->aperture_first[p];       \
        const float *re_plane = plan->stage, *im_plane = plan->stage + plan->stage_plane;                    \
        const int iq = plan->is_iq;                                                                          \
        const size_t whole = n_frames - n_frames % FRAME_BLOCK;                                              \
        for (size_t f0 = 0; f0 < whole; f0 += FRAME_BLOCK) {                                                 \
            float sum_re[FRAME_BLOCK] = {0}, sum_im[FRAME_BLOCK] = {0};                                      \
            ACCUMULATE_ENTRIES(TAPS, FRAME_BLOCK, f0, sum_re, sum_im)                                        \
            for (int f = 0; f < FRAME_BLOCK; ++f) {                                                          \
                acc_re[f0 + f] = sum_re[f];                                                                  \
                acc_im[f0 + f] = sum_im[f];                                                                  \
            }                                                                                                \
        }                                                                                                    \
        if (whole == n_frames) return;                                                                       \
        const size_t rest = n_frames - whole;                                                                \
        float *restrict rest_re = acc_re + whole, *restrict rest_im = acc_im + whole;                        \
        for (size_t f = 0; f < rest; ++f) rest_re[f] = rest_im[f] = 0.0f;                                    \
        ACCUMULATE_ENTRIES(TAPS, rest, whole, rest_re, rest_im)                                              \
    }

DEFINE_BEAMFORM_POINT(1)
DEFINE_BEAMFORM_POINT(2)
DEFINE_BEAMFORM_POINT(4)

usbeam_status usbeam_das_execute(usbeam_das_plan *plan, const void *in, void *out)
{
    if (!plan || !in || !out) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "plan, in and out must not be NULL");
    const usbeam_das_params *prm = &plan->params;
    const size_t n_frames = prm->n_frames, n_points = prm->n_points;
    stage_input(plan, in);

    const ptrdiff_t count = (ptrdiff_t)n_points;
#pragma omp parallel num_threads(plan->n_threads)
    {
#ifdef _OPENMP
        const int thread = omp_get_thread_num();
#else
        const int thread = 0;
#endif
        float *acc_re = plan->acc + (size_t)thread * 2 * plan->acc_stride;
        float *acc_im = acc_re + plan->acc_stride;
        int32_t *own_tap = plan->has_table ? NULL : plan->thread_tap + (size_t)thread * plan->thread_entries;
        float *own_weight = plan->has_table ? NULL
                                            : plan->thread_weight + (size_t)thread * plan->thread_entries * (size_t)plan->weight_stride;
#pragma omp for schedule(dynamic, 64)
        for (ptrdiff_t p = 0; p < count; ++p) {
            const int32_t *tap = own_tap;
            const float *weight = own_weight;
            if (plan->has_table) {
                tap = plan->table_tap + plan->entry_offset[p];
                weight = plan->table_weight + plan->entry_offset[p] * (size_t)plan->weight_stride;
            } else {
                usbeam_das_point_entries(plan, (size_t)p, own_tap, own_weight);
            }
            switch (plan->taps) {
            case 1: beamform_point_1(plan, (size_t)p, tap, weight, acc_re, acc_im); break;
            case 2: beamform_point_2(plan, (size_t)p, tap, weight, acc_re, acc_im); break;
            default: beamform_point_4(plan, (size_t)p, tap, weight, acc_re, acc_im); break;
            }
            if (plan->is_iq) {
                float *dst = out;
                for (size_t f = 0; f < n_frames; ++f) {
                    dst[2 * (f * n_points + (size_t)p)] = acc_re[f];
                    dst[2 * (f * n_points + (size_t)p) + 1] = acc_im[f];
                }
            } else {
                float *dst = out;
                for (size_t f = 0; f < n_frames; ++f) dst[f * n_points + (size_t)p] = acc_re[f];
            }
        }
    }
    return USBEAM_OK;
}
