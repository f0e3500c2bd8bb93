/*
 * das_single.c - delay-and-sum of a single frame on the CPU: for each point, the entries of
 * every transmit formed and summed in one loop over the point's aperture, 8 elements a step
 * (no scratch of entries, which a single frame would not amortise).  The portable loop and
 * its vector copies: AVX-512 sums a whole tile of points per call with every transmit of a
 * point in the same accumulators (usbeam_das_tile_single), AVX2 + FMA a point and transmit
 * per call (usbeam_das_transmit_sum_single); both called by das.c's execute.
 * Layouts: the staged planes of das.c, (transmit, element, sample) float32 rows `channel`
 *          floats apart (re and im apart); the receive part of a point (das_internal.h):
 *          s_rx (double, samples), c_rx = window x exp(+j 2 pi fc |p - e| / c) (float).
 * Units: samples for s = s_tx + s_rx, s_tx = (tau_tx - t0) fs; turns for the rotations.
 * The sums run in fixed lanes and a fixed reduction: the same bits for the same inputs on
 * any number of threads (tests/beamform/test_das_single.py).
 * Reference: Perrot et al., "So you think you can DAS?", Ultrasonics 111 (2021) 106309.
 */
#include "beamform/das_internal.h"
#include "beamform/das_isa.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=fast", "no-trapping-math")
#endif

/* One frame: the entries of one transmit formed and summed in the same vectorised loop (the
 * same math as transmit_entries; the interpolation is applied to the samples first, then the
 * rotation, which rounds differently only in the last bits): *acc_re (, *acc_im) += the sum.
 * x_re / x_im point at the staged row of (this transmit, first aperture element). */
INLINE_BODY void transmit_sum_single(const usbeam_das_plan *plan, size_t count, const double *restrict sample,
                                     const float *restrict re, const float *restrict im, double s_tx, float rot_re,
                                     float rot_im, ptrdiff_t channel, const float *restrict x_re,
                                     const float *restrict x_im, float *acc_re, float *acc_im)
{
    const usbeam_das_params *prm = &plan->params;
    const double last = (double)prm->n_samples - 1.0;
    const ptrdiff_t n = (ptrdiff_t)count;
    const int kind = (int)prm->interpolation;
    if (plan->taps != usbeam_interp_taps(kind)) return; /* a record shorter than the taps: nothing in range */
    float sum_re = 0.0f, sum_im = 0.0f;
#define AT(base) (i * channel + (ptrdiff_t)(int32_t)(base))
#define ROTATE_ADD(VA, VB)                                                                              \
    {                                                                                                  \
        const float cr = rot_re * re[i] - rot_im * im[i], ci = rot_re * im[i] + rot_im * re[i];       \
        sum_re += cr * (VA) - ci * (VB);                                                               \
        sum_im += cr * (VB) + ci * (VA);                                                               \
    }
#if defined(_OPENMP)
#define SIMD_IQ _Pragma("omp simd reduction(+ : sum_re, sum_im)")
#define SIMD_RF _Pragma("omp simd reduction(+ : sum_re)")
#else
#define SIMD_IQ
#define SIMD_RF
#endif
    if (kind == USBEAM_INTERP_NEAREST) {
        if (plan->is_iq) {
            SIMD_IQ
            for (ptrdiff_t i = 0; i < n; ++i) {
                const double s = s_tx + sample[i];
                const int valid = (s >= 0.0) & (s <= last);
                const ptrdiff_t k = AT(valid ? rint(s) : 0.0);
                const float g = valid ? 1.0f : 0.0f;
                ROTATE_ADD(g * x_re[k], g * x_im[k])
            }
        } else {
            SIMD_RF
            for (ptrdiff_t i = 0; i < n; ++i) {
                const double s = s_tx + sample[i];
                const int valid = (s >= 0.0) & (s <= last);
                const ptrdiff_t k = AT(valid ? rint(s) : 0.0);
                sum_re += (valid ? re[i] : 0.0f) * x_re[k];
            }
        }
    } else if (kind == USBEAM_INTERP_LINEAR) {
#define LINEAR_WEIGHTS                                                                                 \
    const double s = s_tx + sample[i];                                                                 \
    const int valid = (s >= 0.0) & (s <= last - 1.0);                                                  \
    const double base = floor(valid ? s : 0.0);                                                        \
    const float t = (float)(s - base), g = valid ? 1.0f : 0.0f;                                        \
    const float w0 = g - g * t, w1 = g * t;                                                            \
    const ptrdiff_t k = AT(base)
        if (plan->is_iq) {
            SIMD_IQ
            for (ptrdiff_t i = 0; i < n; ++i) {
                LINEAR_WEIGHTS;
                ROTATE_ADD(w0 * x_re[k] + w1 * x_re[k + 1], w0 * x_im[k] + w1 * x_im[k + 1])
            }
        } else {
            SIMD_RF
            for (ptrdiff_t i = 0; i < n; ++i) {
                LINEAR_WEIGHTS;
                sum_re += re[i] * (w0 * x_re[k] + w1 * x_re[k + 1]);
            }
        }
#undef LINEAR_WEIGHTS
    } else { /* cubic (Catmull-Rom) */
#define CUBIC_WEIGHTS                                                                                  \
    USBEAM_DAS_CUBIC_ENTRY(s_tx, sample[i], last);                                                     \
    const ptrdiff_t k = AT(base - 1.0)
        if (plan->is_iq) {
            SIMD_IQ
            for (ptrdiff_t i = 0; i < n; ++i) {
                CUBIC_WEIGHTS;
                ROTATE_ADD(w0 * x_re[k] + w1 * x_re[k + 1] + w2 * x_re[k + 2] + w3 * x_re[k + 3],
                           w0 * x_im[k] + w1 * x_im[k + 1] + w2 * x_im[k + 2] + w3 * x_im[k + 3])
            }
        } else {
            SIMD_RF
            for (ptrdiff_t i = 0; i < n; ++i) {
                CUBIC_WEIGHTS;
                sum_re += re[i] * (w0 * x_re[k] + w1 * x_re[k + 1] + w2 * x_re[k + 2] + w3 * x_re[k + 3]);
            }
        }
#undef CUBIC_WEIGHTS
    }
#undef AT
#undef ROTATE_ADD
#undef SIMD_IQ
#undef SIMD_RF
    *acc_re += sum_re;
    if (plan->is_iq) *acc_im += sum_im;
}

#if USBEAM_DAS_MULTI_ISA
/* transmit_sum_single written with AVX-512 intrinsics (tile_single_zmm, a tile of points per
 * call) and AVX2 + FMA (sum_single_ymm, below).  (GCC does not vectorise the portable loop
 * above inside a target("avx512f") copy: it stays scalar, ~2 ns per entry.)  8 entries per step:
 * s in double (8 lanes), the taps fetched as PAIRS of floats (x[k], x[k + 1]) by one 64-bit load
 * each and spread with the pairs' weights over 16 float lanes.  The same math and validity
 * ranges as transmit_sum_single; the products are grouped differently ((w cr) x rather than
 * cr (w x)), so the result differs from the portable loop in the last bits only.  The sums run
 * over the entries in index order in fixed lanes and accumulators, reduced in a fixed order:
 * the same bits for the same inputs on any thread.  Tap offsets are int32: the caller checks
 * that the rows of the aperture fit.  KIND and IQ are constants in each copy (below),
 * so every copy is one straight loop. */
TARGET_AVX512 static inline __m512 pairs_of(__m256 lo, __m256 hi) /* lo0 hi0 lo1 hi1 ... */
{
    const __m512i order = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    return _mm512_permutex2var_ps(_mm512_castps256_ps512(lo), order, _mm512_castps256_ps512(hi));
}

/* x[at_j], x[at_j + 1] of the 8 lanes j as 16 floats (8-byte loads: measured as fast as a
 * 64-bit gather on the development machine, and portable to gathers' slow cores) */
TARGET_AVX512 static inline __m512 load_pairs(const float *x, __m256i at)
{
    int32_t k[8];
    _mm256_storeu_si256((__m256i *)k, at);
    __m128i q[4];
    for (int j = 0; j < 4; ++j) {
        long long lo, hi;
        memcpy(&lo, x + k[2 * j], sizeof lo);
        memcpy(&hi, x + k[2 * j + 1], sizeof hi);
        q[j] = _mm_set_epi64x(hi, lo);
    }
    __m512i v = _mm512_castsi128_si512(q[0]);
    v = _mm512_inserti64x2(v, q[1], 1);
    v = _mm512_inserti64x2(v, q[2], 2);
    v = _mm512_inserti64x2(v, q[3], 3);
    return _mm512_castsi512_ps(v);
}

/* One frame, a tile of points (AVX-512): each point's transmits summed into the same four
 * accumulators and reduced once per point, with the constants set once per tile, the
 * receive parts read (or computed) per point and the dispatch done once.  A call per point
 * and transmit (as the AVX2 copy below still makes) repeats the set-up, the dispatch and two
 * reductions each time: the tile took 11-13 % off a 1-frame execute at ~47 aperture elements
 * per point (benchmarks/RESULTS.md, 2026-11-25).  Within a point the sums run over
 * transmits, then entries, in fixed lanes: the same bits on any thread. */
__attribute__((always_inline)) TARGET_AVX512 static inline void
tile_single_zmm(const int KIND, const int IQ, const usbeam_das_plan *plan, size_t p0, size_t m, float *scratch,
                const float *restrict re_plane, const float *restrict im_plane, float *out_re, float *out_im)
{
    const usbeam_das_params *prm = &plan->params;
    const double last = (double)prm->n_samples - 1.0;
    const int32_t channel = (int32_t)usbeam_das_channel_floats(prm->n_samples, 1);
    const size_t transmit_stride = prm->n_elements * (size_t)channel;
    const double lo = KIND == USBEAM_INTERP_CUBIC ? 1.0 : 0.0;
    const double hi = KIND == USBEAM_INTERP_NEAREST ? last : (KIND == USBEAM_INTERP_LINEAR ? last - 1.0 : last - 2.0);
    const __m512d v_lo = _mm512_set1_pd(lo), v_hi = _mm512_set1_pd(hi);
    const __m256 gain = _mm256_set1_ps(KIND == USBEAM_INTERP_CUBIC ? 0.5f : 1.0f), zero8 = _mm256_setzero_ps();
    const __m256i row_first = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(channel));
    const __m256i row_step = _mm256_set1_epi32((int32_t)(8u * (uint32_t)channel));
    const __m256i tap_shift = _mm256_set1_epi32(KIND == USBEAM_INTERP_CUBIC ? -1 : 0);
    for (size_t q = 0; q < m; ++q) {
        const size_t p = p0 + q;
        const ptrdiff_t n = (ptrdiff_t)plan->aperture_count[p];
        __m512 rr = _mm512_setzero_ps(), ii = _mm512_setzero_ps(), ri = _mm512_setzero_ps(), ir = _mm512_setzero_ps();
        if (n == 0) {
            out_re[q] = out_im[q] = 0.0f;
            continue;
        }
        const double *sample;
        const float *re, *im;
        usbeam_das_receive_part(plan, p, scratch, &sample, &re, &im);
        const size_t first_row = (size_t)plan->aperture_first[p] * (size_t)channel;
        for (size_t t = 0; t < prm->n_transmits; ++t) {
            const double tx_time = plan->tx_time[p * prm->n_transmits + t];
            const __m512d v_tx = _mm512_set1_pd((tx_time - prm->t0) * prm->fs);
            __m256 v_rot_re = zero8, v_rot_im = zero8;
            if (IQ) {
                double rot_re, rot_im;
                sincos_turns(prm->fc * tx_time, &rot_im, &rot_re); /* usbeam_das_rotation, inlined */
                v_rot_re = _mm256_set1_ps((float)rot_re), v_rot_im = _mm256_set1_ps((float)rot_im);
            }
            const float *x_re = re_plane + first_row + t * transmit_stride;
            const float *x_im = IQ ? im_plane + first_row + t * transmit_stride : NULL;
            __m256i row = row_first;
            for (ptrdiff_t i = 0; i < n; i += 8, row = _mm256_add_epi32(row, row_step)) {
                const __mmask8 live = n - i >= 8 ? (__mmask8)0xff : (__mmask8)((1u << (n - i)) - 1u);
                _mm_prefetch((const char *)(sample + i) + 1024, _MM_HINT_T0);
                _mm_prefetch((const char *)(re + i) + 512, _MM_HINT_T0);
                if (IQ) _mm_prefetch((const char *)(im + i) + 512, _MM_HINT_T0);
                const __m512d s = _mm512_add_pd(v_tx, _mm512_maskz_loadu_pd(live, sample + i));
                const __mmask8 valid =
                    _mm512_cmp_pd_mask(s, v_lo, _CMP_GE_OQ) & _mm512_cmp_pd_mask(s, v_hi, _CMP_LE_OQ) & live;
                const __m512d base = KIND == USBEAM_INTERP_NEAREST
                                         ? _mm512_maskz_roundscale_pd(valid, s, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
                                         : _mm512_maskz_roundscale_pd(valid, s, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
                const __m256i tap = _mm256_maskz_mov_epi32(
                    live, _mm256_add_epi32(row, _mm256_maskz_add_epi32(valid, _mm512_cvttpd_epi32(base), tap_shift)));
                const __m256 g = _mm256_maskz_mov_ps(valid, gain);
                __m256 w0, w1, w2 = zero8, w3 = zero8;
                if (KIND == USBEAM_INTERP_NEAREST) {
                    w0 = g, w1 = zero8;
                } else {
                    const __m256 tf = _mm512_cvtpd_ps(_mm512_sub_pd(s, base));
                    if (KIND == USBEAM_INTERP_LINEAR) {
                        w1 = _mm256_mul_ps(g, tf);
                        w0 = _mm256_sub_ps(g, w1);
                    } else {
                        const __m256 t2 = _mm256_mul_ps(tf, tf), t3 = _mm256_mul_ps(t2, tf), two = _mm256_set1_ps(2.0f);
                        w0 = _mm256_mul_ps(g, _mm256_sub_ps(_mm256_fmsub_ps(two, t2, t3), tf));
                        w1 = _mm256_mul_ps(g, _mm256_fmadd_ps(_mm256_set1_ps(3.0f), t3,
                                                              _mm256_fnmadd_ps(_mm256_set1_ps(5.0f), t2, two)));
                        w2 = _mm256_mul_ps(g, _mm256_add_ps(_mm256_fnmadd_ps(_mm256_set1_ps(3.0f), t3,
                                                                             _mm256_mul_ps(_mm256_set1_ps(4.0f), t2)), tf));
                        w3 = _mm256_mul_ps(g, _mm256_sub_ps(t3, t2));
                    }
                }
                const __m256 c_re = _mm256_maskz_loadu_ps(live, re + i);
                __m256 cr = c_re, ci = zero8;
                if (IQ) {
                    const __m256 c_im = _mm256_maskz_loadu_ps(live, im + i);
                    cr = _mm256_fmsub_ps(v_rot_re, c_re, _mm256_mul_ps(v_rot_im, c_im));
                    ci = _mm256_fmadd_ps(v_rot_re, c_im, _mm256_mul_ps(v_rot_im, c_re));
                }
#define PAIR_SUM(W_LO, W_HI, SHIFT)                                                                     \
    {                                                                                                  \
        const __m256i at_ = _mm256_add_epi32(tap, _mm256_set1_epi32(SHIFT));                           \
        const __m512 a_ = load_pairs(x_re, at_);                                                       \
        const __m512 wr_ = pairs_of(_mm256_mul_ps(W_LO, cr), _mm256_mul_ps(W_HI, cr));                 \
        rr = _mm512_fmadd_ps(wr_, a_, rr);                                                             \
        if (IQ) {                                                                                      \
            const __m512 b_ = load_pairs(x_im, at_);                                                   \
            const __m512 wi_ = pairs_of(_mm256_mul_ps(W_LO, ci), _mm256_mul_ps(W_HI, ci));             \
            ri = _mm512_fmadd_ps(wi_, b_, ri);                                                         \
            ii = _mm512_fmadd_ps(wr_, b_, ii);                                                         \
            ir = _mm512_fmadd_ps(wi_, a_, ir);                                                         \
        }                                                                                              \
    }
                PAIR_SUM(w0, w1, 0)
                if (KIND == USBEAM_INTERP_CUBIC) PAIR_SUM(w2, w3, 2)
#undef PAIR_SUM
            }
        }
        out_re[q] = _mm512_reduce_add_ps(_mm512_sub_ps(rr, ri));
        out_im[q] = IQ ? _mm512_reduce_add_ps(_mm512_add_ps(ii, ir)) : 0.0f;
    }
}

TARGET_AVX512 static void tile_single_avx512(const usbeam_das_plan *plan, size_t p0, size_t m, float *scratch,
                                             const float *re_plane, const float *im_plane, float *out_re,
                                             float *out_im)
{
    const int kind = (int)plan->params.interpolation;
    if (plan->is_iq) {
        if (kind == USBEAM_INTERP_NEAREST)
            tile_single_zmm(USBEAM_INTERP_NEAREST, 1, plan, p0, m, scratch, re_plane, im_plane, out_re, out_im);
        else if (kind == USBEAM_INTERP_LINEAR)
            tile_single_zmm(USBEAM_INTERP_LINEAR, 1, plan, p0, m, scratch, re_plane, im_plane, out_re, out_im);
        else
            tile_single_zmm(USBEAM_INTERP_CUBIC, 1, plan, p0, m, scratch, re_plane, im_plane, out_re, out_im);
    } else {
        if (kind == USBEAM_INTERP_NEAREST)
            tile_single_zmm(USBEAM_INTERP_NEAREST, 0, plan, p0, m, scratch, re_plane, im_plane, out_re, out_im);
        else if (kind == USBEAM_INTERP_LINEAR)
            tile_single_zmm(USBEAM_INTERP_LINEAR, 0, plan, p0, m, scratch, re_plane, im_plane, out_re, out_im);
        else
            tile_single_zmm(USBEAM_INTERP_CUBIC, 0, plan, p0, m, scratch, re_plane, im_plane, out_re, out_im);
    }
}

/* transmit_sum_single's entry for a vector copy: the plan's (interpolation, RF / IQ) to one
 * of the straight loops SUM (sum_single_ymm). */
#define DEFINE_SUM_SINGLE_ENTRY(TARGET, SUM)                                                                \
    TARGET static void transmit_##SUM(const usbeam_das_plan *plan, size_t count, const double *sample,      \
                                      const float *re, const float *im, double s_tx, float rot_re,          \
                                      float rot_im, ptrdiff_t channel, const float *x_re, const float *x_im, \
                                      float *acc_re, float *acc_im)                                         \
    {                                                                                                       \
        const int kind = (int)plan->params.interpolation;                                                   \
        if (plan->taps != usbeam_interp_taps(kind)) return; /* a record shorter than the taps */             \
        const double last = (double)plan->params.n_samples - 1.0;                                           \
        const ptrdiff_t n = (ptrdiff_t)count;                                                               \
        const int32_t ch = (int32_t)channel;                                                                \
        const int iq = plan->is_iq;                                                                         \
        if (kind == USBEAM_INTERP_NEAREST && iq)                                                            \
            SUM(USBEAM_INTERP_NEAREST, 1, n, sample, re, im, s_tx, last, rot_re, rot_im, ch, x_re, x_im, acc_re, acc_im); \
        else if (kind == USBEAM_INTERP_LINEAR && iq)                                                        \
            SUM(USBEAM_INTERP_LINEAR, 1, n, sample, re, im, s_tx, last, rot_re, rot_im, ch, x_re, x_im, acc_re, acc_im); \
        else if (iq)                                                                                        \
            SUM(USBEAM_INTERP_CUBIC, 1, n, sample, re, im, s_tx, last, rot_re, rot_im, ch, x_re, x_im, acc_re, acc_im); \
        else if (kind == USBEAM_INTERP_NEAREST)                                                             \
            SUM(USBEAM_INTERP_NEAREST, 0, n, sample, re, im, s_tx, last, rot_re, rot_im, ch, x_re, x_im, acc_re, acc_im); \
        else if (kind == USBEAM_INTERP_LINEAR)                                                              \
            SUM(USBEAM_INTERP_LINEAR, 0, n, sample, re, im, s_tx, last, rot_re, rot_im, ch, x_re, x_im, acc_re, acc_im); \
        else                                                                                                \
            SUM(USBEAM_INTERP_CUBIC, 0, n, sample, re, im, s_tx, last, rot_re, rot_im, ch, x_re, x_im, acc_re, acc_im); \
    }

/* The same for AVX2 + FMA (x86-64-v3): 4 entries a step (s in 4 double lanes), the pairs of
 * float taps and their weights over 8 float lanes, masks as vectors. */
TARGET_AVX2 static inline __m256 pairs_of4(__m128 lo, __m128 hi) /* lo0 hi0 lo1 hi1 ... */
{
    return _mm256_set_m128(_mm_unpackhi_ps(lo, hi), _mm_unpacklo_ps(lo, hi));
}

TARGET_AVX2 static inline __m256 load_pairs4(const float *x, __m128i at)
{
    int32_t k[4];
    _mm_storeu_si128((__m128i *)k, at);
    long long p[4];
    for (int j = 0; j < 4; ++j) memcpy(&p[j], x + k[j], sizeof p[j]);
    return _mm256_castsi256_ps(_mm256_set_epi64x(p[3], p[2], p[1], p[0]));
}

TARGET_AVX2 static inline float sum_lanes8(__m256 v) /* a fixed order */
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

__attribute__((always_inline)) TARGET_AVX2 static inline void
sum_single_ymm(const int KIND, const int IQ, ptrdiff_t n, const double *restrict sample, const float *restrict re,
               const float *restrict im, double s_tx, double last, float rot_re, float rot_im, int32_t channel,
               const float *restrict x_re, const float *restrict x_im, float *acc_re, float *acc_im)
{
    const double lo = KIND == USBEAM_INTERP_CUBIC ? 1.0 : 0.0;
    const double hi = KIND == USBEAM_INTERP_NEAREST ? last : (KIND == USBEAM_INTERP_LINEAR ? last - 1.0 : last - 2.0);
    const __m256d v_lo = _mm256_set1_pd(lo), v_hi = _mm256_set1_pd(hi), v_tx = _mm256_set1_pd(s_tx);
    const __m128 gain = _mm_set1_ps(KIND == USBEAM_INTERP_CUBIC ? 0.5f : 1.0f), zero4 = _mm_setzero_ps();
    const __m128 v_rot_re = _mm_set1_ps(rot_re), v_rot_im = _mm_set1_ps(rot_im);
    const __m128i lane = _mm_setr_epi32(0, 1, 2, 3), tap_shift = _mm_set1_epi32(KIND == USBEAM_INTERP_CUBIC ? -1 : 0);
    const __m256i even = _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6);
    __m128i row = _mm_mullo_epi32(lane, _mm_set1_epi32(channel));
    const __m128i row_step = _mm_set1_epi32((int32_t)(4u * (uint32_t)channel)); /* as row_step above */
    __m256 rr = _mm256_setzero_ps(), ii = _mm256_setzero_ps(), ri = _mm256_setzero_ps(), ir = _mm256_setzero_ps();
    for (ptrdiff_t i = 0; i < n; i += 4, row = _mm_add_epi32(row, row_step)) {
        const int m = n - i >= 4 ? 4 : (int)(n - i);
        const __m128i live = _mm_cmpgt_epi32(_mm_set1_epi32(m), lane);
        const __m256i live64 = _mm256_cvtepi32_epi64(live);
        _mm_prefetch((const char *)(sample + i) + 1024, _MM_HINT_T0);
        _mm_prefetch((const char *)(re + i) + 512, _MM_HINT_T0);
        if (IQ) _mm_prefetch((const char *)(im + i) + 512, _MM_HINT_T0);
        const __m256d s = _mm256_add_pd(v_tx, _mm256_maskload_pd(sample + i, live64));
        const __m256d ok = _mm256_and_pd(_mm256_and_pd(_mm256_cmp_pd(s, v_lo, _CMP_GE_OQ), _mm256_cmp_pd(s, v_hi, _CMP_LE_OQ)),
                                         _mm256_castsi256_pd(live64));
        const __m256d base = _mm256_and_pd( /* ties to even, as rint; invalid: 0, the row start */
            ok, KIND == USBEAM_INTERP_NEAREST ? _mm256_round_pd(s, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
                                              : _mm256_round_pd(s, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC));
        const __m128i valid = _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(_mm256_castpd_si256(ok), even));
        const __m128i tap = _mm_and_si128(
            live, _mm_add_epi32(row, _mm_add_epi32(_mm256_cvttpd_epi32(base), _mm_and_si128(valid, tap_shift))));
        const __m128 g = _mm_and_ps(_mm_castsi128_ps(valid), gain);
        __m128 w0, w1, w2 = zero4, w3 = zero4;
        if (KIND == USBEAM_INTERP_NEAREST) {
            w0 = g, w1 = zero4;
        } else {
            const __m128 t = _mm256_cvtpd_ps(_mm256_sub_pd(s, base));
            if (KIND == USBEAM_INTERP_LINEAR) {
                w1 = _mm_mul_ps(g, t);
                w0 = _mm_sub_ps(g, w1);
            } else {
                const __m128 t2 = _mm_mul_ps(t, t), t3 = _mm_mul_ps(t2, t), two = _mm_set1_ps(2.0f);
                w0 = _mm_mul_ps(g, _mm_sub_ps(_mm_fmsub_ps(two, t2, t3), t));
                w1 = _mm_mul_ps(g, _mm_fmadd_ps(_mm_set1_ps(3.0f), t3, _mm_fnmadd_ps(_mm_set1_ps(5.0f), t2, two)));
                w2 = _mm_mul_ps(g, _mm_add_ps(_mm_fnmadd_ps(_mm_set1_ps(3.0f), t3, _mm_mul_ps(_mm_set1_ps(4.0f), t2)), t));
                w3 = _mm_mul_ps(g, _mm_sub_ps(t3, t2));
            }
        }
        const __m128 c_re = _mm_maskload_ps(re + i, live);
        __m128 cr = c_re, ci = zero4;
        if (IQ) {
            const __m128 c_im = _mm_maskload_ps(im + i, live);
            cr = _mm_fmsub_ps(v_rot_re, c_re, _mm_mul_ps(v_rot_im, c_im));
            ci = _mm_fmadd_ps(v_rot_re, c_im, _mm_mul_ps(v_rot_im, c_re));
        }
#define PAIR_SUM(W_LO, W_HI, SHIFT)                                                                     \
    {                                                                                                  \
        const __m128i at_ = _mm_add_epi32(tap, _mm_set1_epi32(SHIFT));                                 \
        const __m256 a_ = load_pairs4(x_re, at_);                                                      \
        const __m256 wr_ = pairs_of4(_mm_mul_ps(W_LO, cr), _mm_mul_ps(W_HI, cr));                      \
        rr = _mm256_fmadd_ps(wr_, a_, rr);                                                             \
        if (IQ) {                                                                                      \
            const __m256 b_ = load_pairs4(x_im, at_);                                                  \
            const __m256 wi_ = pairs_of4(_mm_mul_ps(W_LO, ci), _mm_mul_ps(W_HI, ci));                  \
            ri = _mm256_fmadd_ps(wi_, b_, ri);                                                         \
            ii = _mm256_fmadd_ps(wr_, b_, ii);                                                         \
            ir = _mm256_fmadd_ps(wi_, a_, ir);                                                         \
        }                                                                                              \
    }
        PAIR_SUM(w0, w1, 0)
        if (KIND == USBEAM_INTERP_CUBIC) PAIR_SUM(w2, w3, 2)
#undef PAIR_SUM
    }
    *acc_re += sum_lanes8(_mm256_sub_ps(rr, ri));
    if (IQ) *acc_im += sum_lanes8(_mm256_add_ps(ii, ir));
}

DEFINE_SUM_SINGLE_ENTRY(TARGET_AVX2, sum_single_ymm)
#endif

#if USBEAM_DAS_MULTI_ISA
TARGET_AVX2 static void transmit_sum_single_avx2(const usbeam_das_plan *plan, size_t count, const double *sample,
                                                 const float *re, const float *im, double s_tx, float rot_re,
                                                 float rot_im, ptrdiff_t channel, const float *x_re, const float *x_im,
                                                 float *acc_re, float *acc_im)
{
    transmit_sum_single(plan, count, sample, re, im, s_tx, rot_re, rot_im, channel, x_re, x_im, acc_re, acc_im);
}
TARGET_AVX512 static void transmit_sum_single_avx512(const usbeam_das_plan *plan, size_t count, const double *sample,
                                                     const float *re, const float *im, double s_tx, float rot_re,
                                                     float rot_im, ptrdiff_t channel, const float *x_re,
                                                     const float *x_im, float *acc_re, float *acc_im)
{
    transmit_sum_single(plan, count, sample, re, im, s_tx, rot_re, rot_im, channel, x_re, x_im, acc_re, acc_im);
}
#endif

int usbeam_das_tile_single(const usbeam_das_plan *plan, size_t p0, size_t m, float *scratch, const float *re_plane,
                           const float *im_plane, float *out_re, float *out_im)
{
#if USBEAM_DAS_MULTI_ISA
    const usbeam_das_params *prm = &plan->params;
    const double channel = (double)usbeam_das_channel_floats(prm->n_samples, 1);
    if (usbeam_das_isa() == 2 && plan->taps == usbeam_interp_taps((int)prm->interpolation) &&
        ((double)prm->n_elements - 1.0) * channel + (double)prm->n_samples + 4.0 < (double)INT32_MAX) {
        tile_single_avx512(plan, p0, m, scratch, re_plane, im_plane, out_re, out_im);
        return 1;
    }
#else
    (void)plan, (void)p0, (void)m, (void)scratch, (void)re_plane, (void)im_plane, (void)out_re, (void)out_im;
#endif
    return 0;
}

void usbeam_das_transmit_sum_single(const usbeam_das_plan *plan, size_t count, const double *sample, const float *re,
                                    const float *im, double s_tx, float rot_re, float rot_im, ptrdiff_t channel,
                                    const float *x_re, const float *x_im, float *acc_re, float *acc_im)
{
#if USBEAM_DAS_MULTI_ISA
    switch (usbeam_das_isa()) {
    case 2: /* (AVX-512 sums whole tiles, usbeam_das_tile_single; here only what it declines) */
        transmit_sum_single_avx512(plan, count, sample, re, im, s_tx, rot_re, rot_im, channel, x_re, x_im, acc_re, acc_im);
        return;
    case 1:
        if (count > 0 && (double)(count - 1) * (double)channel + (double)plan->params.n_samples + 4.0 < (double)INT32_MAX) {
            transmit_sum_single_ymm(plan, count, sample, re, im, s_tx, rot_re, rot_im, channel, x_re, x_im, acc_re, acc_im);
            return;
        }
        transmit_sum_single_avx2(plan, count, sample, re, im, s_tx, rot_re, rot_im, channel, x_re, x_im, acc_re, acc_im);
        return;
    default: break;
    }
#endif
    transmit_sum_single(plan, count, sample, re, im, s_tx, rot_re, rot_im, channel, x_re, x_im, acc_re, acc_im);
}
