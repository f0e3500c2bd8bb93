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

#include <stdint.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
/* One AVX2 build of the hot loop besides the baseline, chosen when the library loads. */
#define USBEAM_HOT __attribute__((target_clones("avx2", "default")))
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

/* acc[f] += sum_k w[k] * x[(tap + k) * n_frames + f], real data and weights. */
static inline void accumulate_real(const float *restrict x, const float *restrict w, int taps, size_t n_frames,
                                   float *restrict acc)
{
    for (int k = 0; k < taps; ++k) {
        const float wk = w[k];
        const float *restrict row = x + (size_t)k * n_frames;
        for (size_t f = 0; f < n_frames; ++f) acc[f] += wk * row[f];
    }
}

/* Complex multiply-accumulate of complex weights with split re/im rows. */
static inline void accumulate_complex(const float *restrict xr, const float *restrict xi, const float *restrict w,
                                      int taps, size_t n_frames, float *restrict acc_re, float *restrict acc_im)
{
    for (int k = 0; k < taps; ++k) {
        const float wr = w[2 * k], wi = w[2 * k + 1];
        const float *restrict rr = xr + (size_t)k * n_frames, *restrict ri = xi + (size_t)k * n_frames;
        for (size_t f = 0; f < n_frames; ++f) {
            acc_re[f] += wr * rr[f] - wi * ri[f];
            acc_im[f] += wr * ri[f] + wi * rr[f];
        }
    }
}

/* Beamform one point into acc (re, im planes) from its entries; TAPS is a constant per
 * call site so the tap loop unrolls. */
#define DEFINE_BEAMFORM_POINT(TAPS)                                                                          \
    USBEAM_HOT static void beamform_point_##TAPS(const usbeam_das_plan *plan, size_t p, const int32_t *tap,  \
                                                 const float *weight, float *restrict acc_re,                 \
                                                 float *restrict acc_im)                                      \
    {                                                                                                        \
        const usbeam_das_params *prm = &plan->params;                                                        \
        const size_t n_frames = prm->n_frames, channel = prm->n_samples * n_frames;                          \
        const int first = plan->aperture_first[p], count = plan->aperture_count[p];                          \
        const float *re_plane = plan->stage, *im_plane = plan->stage + plan->stage_plane;                    \
        memset(acc_re, 0, n_frames * sizeof(float));                                                         \
        memset(acc_im, 0, n_frames * sizeof(float));                                                         \
        size_t j = 0;                                                                                        \
        for (size_t t = 0; t < prm->n_transmits; ++t) {                                                      \
            for (int e = first; e < first + count; ++e, ++j) {                                               \
                const size_t row = ((t * prm->n_elements + (size_t)e) * channel) + (size_t)tap[j] * n_frames; \
                if (plan->is_iq)                                                                             \
                    accumulate_complex(re_plane + row, im_plane + row, weight + j * (2 * TAPS), TAPS,         \
                                       n_frames, acc_re, acc_im);                                            \
                else                                                                                         \
                    accumulate_real(re_plane + row, weight + j * TAPS, TAPS, n_frames, acc_re);              \
            }                                                                                                \
        }                                                                                                    \
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
