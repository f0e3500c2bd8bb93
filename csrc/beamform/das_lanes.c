/*
 * das_lanes.c - delay-and-sum of a single frame with the points in the vector lanes: 16
 * consecutive points of the grid (a "group") are summed together, one element of the group's
 * apertures at a time, every point in a lane of its own.  Built for plans of one frame
 * (n_frames = 1) on AVX-512 machines; das_single.c serves the others.
 *
 * Why: with one frame there is nothing to share an entry across, and the per-point loop of
 * das_single.c (the elements of one point in the lanes) pays per point what a point costs
 * beside its entries (a rotation in double, two horizontal reductions, a partial last
 * vector): ~26 ns a point, as much as ~27 of its entries (RESULTS.md, 2026-11-25).  With the
 * points in the lanes nothing is reduced across lanes, and the taps of 16 neighbouring points
 * in one element's row lie a few samples apart, so they come from two vector loads of the
 * row and a permutation instead of 16 scalar loads (a gather where they spread wider).  And
 * the table holds s_rx alone (8 bytes a pair, the receive table's 16): the receive rotation
 * exp(+j 2 pi fc/fs s_rx) is formed here, as chunk_receive (das_delays.c) forms it (whole
 * turns removed in double, the rest by float polynomials; within das_receive_phase_rad), so
 * a call reads half the bytes.
 *
 * Layouts: the lane table (plan creation, usbeam_das_lanes_fill): group g holds points
 * 16 g .. 16 g + 15 and rows lane_offset[g] .. lane_offset[g + 1] - 1, one per element from
 * lane_first[g] on (the union of its points' apertures); row r holds 16 lanes (one per
 * point) of s_rx = |p - e| fs / c (double, samples) in lane_sample and, for windows other than
 * 0 / 1, the window weight (float) in lane_window.  A lane outside its point's aperture, or
 * where a 0 / 1 window is 0, holds s_rx = OUTSIDE_SAMPLE (out of every record: weight 0).
 * Per (group, transmit): s_tx = (tau_tx - t0) fs of its 16 points (double) in lane_tx and
 * rot_tx = exp(+j 2 pi fc tau_tx) as 16 re then 16 im (float) in lane_rot (IQ); per (group,
 * transmit, row): the least first tap of the row's valid lanes in lane_least (or LEAST_NONE,
 * LEAST_GATHER), so that the window's loads wait for no reduction across lanes (the
 * reductions in the row loop: live-1tx 3.0 ms, 2.5 ms without them).  Staged data:
 * das.c's planes, (transmit, element, sample) rows `channel` floats apart, re and im apart.
 * Units: samples for s = s_tx + s_rx; turns for the rotations.
 * The same weights as the other paths (usbeam_math.h's validity ranges and Catmull-Rom
 * weights, the plan's double geometry); the samples are interpolated first and then
 * weighted, so sums differ from das_single.c's in float rounding only.  Each lane sums its
 * elements in order, then its transmits in order: the same bits on any number of threads.
 * Reference: Perrot et al., "So you think you can DAS?", Ultrasonics 111 (2021) 106309.
 */
#include "beamform/das_internal.h"
#include "beamform/das_isa.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=fast", "no-trapping-math")
#endif

#define LANES 16
#define OUTSIDE_SAMPLE (-1e30) /* s_rx of a lane outside its point's aperture */
/* The taps of a group's lanes in one row come from a window of 32 staged samples (two vector
 * loads) when their first taps lie within WINDOW_SPAN - taps of each other; else from a
 * gather.  The window reads up to 31 floats past a row's first tap: into the next row, or the
 * zeroed floats past the planes (das_setup.c), never past the buffer. */
#define WINDOW_SPAN 32
/* lane_least's values beside a first tap (>= 0): no valid lane in the row (it adds nothing),
 * or lanes too far apart for the window (a gather) */
#define LEAST_NONE (-1)
#define LEAST_GATHER (-2)

/* The range of s where the interpolation's taps all lie in the record (usbeam_math.h), and the
 * rounding of s to its first tap: the one definition the fill and the sums share. */
static inline void sample_range(int kind, size_t n_samples, double *lo, double *hi)
{
    const double last = (double)n_samples - 1.0;
    *lo = kind == USBEAM_INTERP_CUBIC ? 1.0 : 0.0;
    *hi = kind == USBEAM_INTERP_NEAREST ? last : (kind == USBEAM_INTERP_LINEAR ? last - 1.0 : last - 2.0);
}

int usbeam_das_lanes_wanted(const usbeam_das_plan *plan)
{
#if USBEAM_DAS_MULTI_ISA
    const usbeam_das_params *prm = &plan->params;
    const char *env = getenv("USBEAM_DAS_LANES"); /* 0: das_single.c instead (the tests compare both) */
    return prm->n_frames == 1 && usbeam_das_isa() == 2 && plan->taps == usbeam_interp_taps((int)prm->interpolation) &&
           !(env && env[0] == '0');
#else
    (void)plan;
    return 0;
#endif
}

int usbeam_das_lanes_windowed(const usbeam_das_plan *plan)
{
    const usbeam_das_params *prm = &plan->params;
    return prm->window == USBEAM_DAS_HANN || (prm->window == USBEAM_DAS_TUKEY && prm->tukey_alpha > 0.0);
}

size_t usbeam_das_lanes_count_rows(usbeam_das_plan *plan)
{
    const size_t n_points = plan->params.n_points, n_groups = (n_points + LANES - 1) / LANES;
    size_t rows = 0;
    for (size_t g = 0; g < n_groups; ++g) {
        int lo = INT32_MAX, hi = -1;
        for (size_t p = g * LANES; p < n_points && p < (g + 1) * LANES; ++p) {
            const int first = plan->aperture_first[p], count = plan->aperture_count[p];
            if (count == 0) continue;
            lo = first < lo ? first : lo;
            hi = first + count - 1 > hi ? first + count - 1 : hi;
        }
        const int span = hi >= lo ? hi - lo + 1 : 0;
        plan->lane_first[g] = span ? lo : 0;
        plan->lane_offset[g] = rows;
        rows += (size_t)span;
        plan->lane_max_rows = span > plan->lane_max_rows ? span : plan->lane_max_rows;
    }
    plan->lane_offset[n_groups] = rows;
    return rows;
}

void usbeam_das_lanes_fill(usbeam_das_plan *plan)
{
    const usbeam_das_params *prm = &plan->params;
    const size_t n_points = prm->n_points, n_tx = prm->n_transmits, n_groups = (n_points + LANES - 1) / LANES;
    const size_t widest_floats = usbeam_das_widest_floats(plan);
#pragma omp parallel for schedule(dynamic, 8) num_threads(usbeam_team_size(plan->n_threads))
    for (ptrdiff_t gi = 0; gi < (ptrdiff_t)n_groups; ++gi) {
        const size_t g = (size_t)gi;
#ifdef _OPENMP
        float *scratch = plan->scratch + (size_t)omp_get_thread_num() * plan->thread_floats;
#else
        float *scratch = plan->scratch;
#endif
        double *sample = (double *)scratch;
        float *window = scratch + 2 * widest_floats;
        const size_t row0 = plan->lane_offset[g], rows = plan->lane_offset[g + 1] - row0;
        double *s_rows = plan->lane_sample + row0 * LANES;
        float *w_rows = plan->lane_window ? plan->lane_window + row0 * LANES : NULL;
        for (size_t k = 0; k < rows * LANES; ++k) s_rows[k] = OUTSIDE_SAMPLE;
        if (w_rows) memset(w_rows, 0, rows * LANES * sizeof(float));
        for (size_t j = 0; j < LANES; ++j) {
            const size_t p = g * LANES + j;
            const int count = p < n_points ? plan->aperture_count[p] : 0;
            if (count > 0) {
                usbeam_das_point_geometry(plan, p, sample, window);
                const size_t skip = (size_t)(plan->aperture_first[p] - plan->lane_first[g]);
                for (int i = 0; i < count; ++i) {
                    const size_t at = (skip + (size_t)i) * LANES + j;
                    if (w_rows) {
                        s_rows[at] = sample[i];
                        w_rows[at] = window[i];
                    } else if (window[i] != 0.0f) {
                        s_rows[at] = sample[i];
                    }
                }
            }
            for (size_t t = 0; t < n_tx; ++t) {
                const double tx_time = p < n_points ? plan->tx_time[p * n_tx + t] : prm->t0;
                plan->lane_tx[(g * n_tx + t) * LANES + j] = (tx_time - prm->t0) * prm->fs;
                if (plan->is_iq) {
                    double rot_re, rot_im;
                    usbeam_das_rotation(prm->fc * tx_time, &rot_re, &rot_im);
                    plan->lane_rot[(g * n_tx + t) * 2 * LANES + j] = (float)rot_re;
                    plan->lane_rot[(g * n_tx + t) * 2 * LANES + LANES + j] = (float)rot_im;
                }
            }
        }
        /* each row's least first tap over its valid lanes, per transmit: the s, validity and
         * rounding of group_sum (the same double expressions) */
        const int kind = (int)prm->interpolation, taps = usbeam_interp_taps(kind);
        double lo, hi;
        sample_range(kind, prm->n_samples, &lo, &hi);
        for (size_t t = 0; t < n_tx; ++t) {
            const double *s_tx = plan->lane_tx + (g * n_tx + t) * LANES;
            int32_t *least_rows = plan->lane_least + row0 * n_tx + t * rows;
            for (size_t r = 0; r < rows; ++r) {
                int least = INT32_MAX, most = INT32_MIN;
                for (size_t j = 0; j < LANES; ++j) {
                    const double sv = s_tx[j] + s_rows[r * LANES + j];
                    if (!(sv >= lo && sv <= hi)) continue;
                    const int first = (int)(kind == USBEAM_INTERP_NEAREST ? rint(sv) : floor(sv)) - (kind == USBEAM_INTERP_CUBIC);
                    least = first < least ? first : least;
                    most = first > most ? first : most;
                }
                least_rows[r] = most < least ? LEAST_NONE : (most - least > WINDOW_SPAN - taps ? LEAST_GATHER : least);
            }
        }
    }
}

#if USBEAM_DAS_MULTI_ISA
/* 16 floats from two vectors of 8 doubles */
TARGET_AVX512 static inline __m512 floats_of(__m512d lo, __m512d hi)
{
    return _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(lo)), _mm512_cvtpd_ps(hi), 1);
}

TARGET_AVX512 static inline __m512i ints_of(__m512d lo, __m512d hi)
{
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvttpd_epi32(lo)), _mm512_cvttpd_epi32(hi), 1);
}

/* exp(+j 2 pi turns) of 16 lanes, turns = s_rx fc / fs: chunk_receive's reduction (whole
 * turns off in double, the rest in float) and its polynomials on |r| <= pi / 4. */
TARGET_AVX512 static inline void receive_rotation(__m512d s_lo, __m512d s_hi, __m512d turns_per_sample, __m512 *c_re,
                                                  __m512 *c_im)
{
    const int nearest = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
    const __m512d u_lo = _mm512_mul_pd(s_lo, turns_per_sample), u_hi = _mm512_mul_pd(s_hi, turns_per_sample);
    const __m512 f = floats_of(_mm512_sub_pd(u_lo, _mm512_roundscale_pd(u_lo, nearest)),
                               _mm512_sub_pd(u_hi, _mm512_roundscale_pd(u_hi, nearest)));
    const __m512 q = _mm512_roundscale_ps(_mm512_mul_ps(_mm512_set1_ps(4.0f), f), nearest);
    const __m512 r = _mm512_mul_ps(_mm512_set1_ps(6.28318530717958647692f), _mm512_fnmadd_ps(_mm512_set1_ps(0.25f), q, f));
    const __m512 r2 = _mm512_mul_ps(r, r);
    __m512 sn = _mm512_fmadd_ps(r2, _mm512_set1_ps(1.0f / 362880), _mm512_set1_ps(-1.0f / 5040));
    sn = _mm512_fmadd_ps(r2, sn, _mm512_set1_ps(1.0f / 120));
    sn = _mm512_fmadd_ps(r2, sn, _mm512_set1_ps(-1.0f / 6));
    sn = _mm512_mul_ps(r, _mm512_fmadd_ps(r2, sn, _mm512_set1_ps(1.0f)));
    __m512 cs = _mm512_fmadd_ps(r2, _mm512_set1_ps(-1.0f / 3628800), _mm512_set1_ps(1.0f / 40320));
    cs = _mm512_fmadd_ps(r2, cs, _mm512_set1_ps(-1.0f / 720));
    cs = _mm512_fmadd_ps(r2, cs, _mm512_set1_ps(1.0f / 24));
    cs = _mm512_fmadd_ps(r2, cs, _mm512_set1_ps(-0.5f));
    cs = _mm512_fmadd_ps(r2, cs, _mm512_set1_ps(1.0f));
    /* quarter turns q in {-2..2}: q = +-1 swaps sine and cosine, q = +-2 flips both signs */
    const __m512 a = _mm512_abs_ps(q), one = _mm512_set1_ps(1.0f);
    const __m512 odd_q = _mm512_mul_ps(_mm512_mul_ps(a, _mm512_sub_ps(_mm512_set1_ps(2.0f), a)), q), even = _mm512_sub_ps(one, a);
    *c_im = _mm512_fmadd_ps(odd_q, cs, _mm512_mul_ps(even, sn));
    *c_re = _mm512_fnmadd_ps(odd_q, sn, _mm512_mul_ps(even, cs));
}

/* Tap K of each valid lane from a staged row (0 elsewhere): WINDOW from the two vectors of
 * the row's 32 samples from the least first tap on (REL: first - least), else a gather. */
#define TAP(K, WINDOW, LO, HI, REL, X, FIRST)                                                                      \
    ((WINDOW) ? _mm512_maskz_permutex2var_ps(valid, LO, _mm512_add_epi32(REL, _mm512_set1_epi32(K)), HI)           \
              : _mm512_mask_i32gather_ps(_mm512_setzero_ps(), valid, _mm512_add_epi32(FIRST, _mm512_set1_epi32(K)), X, 4))

/* Group g's sum for transmit t (before its rotation) into *sum_re / *sum_im.  The receive
 * rotations of the group's rows are formed before its first transmit into `rotation` (rows x
 * 32 floats, the thread's) and read back from L1 by every transmit; the rows themselves,
 * ~7 KiB, stay in L1 from one transmit to the next. */
__attribute__((always_inline)) TARGET_AVX512 static inline void
group_sum(const int KIND, const int IQ, const int WINDOWED, const usbeam_das_plan *plan, size_t g, __mmask16 lanes,
          size_t t, const float *restrict re_plane, const float *restrict im_plane, float *restrict rotation,
          __m512 *sum_re, __m512 *sum_im)
{
    const usbeam_das_params *prm = &plan->params;
    double lo, hi;
    sample_range(KIND, prm->n_samples, &lo, &hi);
    const __m512d v_lo = _mm512_set1_pd(lo), v_hi = _mm512_set1_pd(hi), turns_per_sample = _mm512_set1_pd(prm->fc / prm->fs);
    const int rounding = KIND == USBEAM_INTERP_NEAREST ? (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
                                                       : (_MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    const size_t channel = usbeam_das_channel_floats(prm->n_samples, 1), n_tx = prm->n_transmits;
    const __m512d s_tx_lo = _mm512_load_pd(plan->lane_tx + (g * n_tx + t) * LANES);
    const __m512d s_tx_hi = _mm512_load_pd(plan->lane_tx + (g * n_tx + t) * LANES + 8);
    const size_t row0 = plan->lane_offset[g], rows = plan->lane_offset[g + 1] - row0;
    const double *s_rows = plan->lane_sample + row0 * LANES;
    const float *w_rows = WINDOWED ? plan->lane_window + row0 * LANES : NULL;
    const int32_t *least_rows = plan->lane_least + row0 * n_tx + t * rows;
    const size_t row_first = (t * prm->n_elements + (size_t)plan->lane_first[g]) * channel;
    __m512 acc_re = _mm512_setzero_ps(), acc_im = _mm512_setzero_ps();
    if (IQ && t == 0) /* a pass of its own, before the sums */
        for (size_t r = 0; r < rows; ++r) {
            __m512 c_re, c_im;
            receive_rotation(_mm512_load_pd(s_rows + r * LANES), _mm512_load_pd(s_rows + r * LANES + 8), turns_per_sample,
                             &c_re, &c_im);
            _mm512_store_ps(rotation + 32 * r, c_re);
            _mm512_store_ps(rotation + 32 * r + 16, c_im);
        }
    for (size_t r = 0; r < rows; ++r) {
        const int least = least_rows[r];
        if (least == LEAST_NONE) continue;
        const float *x_re = re_plane + row_first + r * channel, *x_im = IQ ? im_plane + row_first + r * channel : NULL;
        const int window = least >= 0, at = window ? least : 0;
        /* the window's loads first: their address is known before the lanes' delays */
        const __m512 re_lo = _mm512_loadu_ps(x_re + at), re_hi = _mm512_loadu_ps(x_re + at + 16);
        const __m512 im_lo = IQ ? _mm512_loadu_ps(x_im + at) : _mm512_setzero_ps();
        const __m512 im_hi = IQ ? _mm512_loadu_ps(x_im + at + 16) : _mm512_setzero_ps();
        const __m512d s_rx_lo = _mm512_load_pd(s_rows + r * LANES), s_rx_hi = _mm512_load_pd(s_rows + r * LANES + 8);
        const __m512d s_lo = _mm512_add_pd(s_tx_lo, s_rx_lo), s_hi = _mm512_add_pd(s_tx_hi, s_rx_hi);
        const __mmask8 valid_lo = _mm512_cmp_pd_mask(s_lo, v_lo, _CMP_GE_OQ) & _mm512_cmp_pd_mask(s_lo, v_hi, _CMP_LE_OQ);
        const __mmask8 valid_hi = _mm512_cmp_pd_mask(s_hi, v_lo, _CMP_GE_OQ) & _mm512_cmp_pd_mask(s_hi, v_hi, _CMP_LE_OQ);
        const __mmask16 valid = (__mmask16)(_mm512_kunpackb((__mmask16)valid_hi, (__mmask16)valid_lo) & lanes);
        const __m512d base_lo = _mm512_roundscale_pd(s_lo, rounding), base_hi = _mm512_roundscale_pd(s_hi, rounding);
        __m512i first = ints_of(base_lo, base_hi);
        if (KIND == USBEAM_INTERP_CUBIC) first = _mm512_sub_epi32(first, _mm512_set1_epi32(1));
        const __m512i rel = _mm512_maskz_sub_epi32(valid, first, _mm512_set1_epi32(at));
        const __m512 a0 = TAP(0, window, re_lo, re_hi, rel, x_re, first);
        const __m512 b0 = IQ ? TAP(0, window, im_lo, im_hi, rel, x_im, first) : _mm512_setzero_ps();
        __m512 v_re = a0, v_im = b0;
        if (KIND != USBEAM_INTERP_NEAREST) {
            const __m512 frac = floats_of(_mm512_sub_pd(s_lo, base_lo), _mm512_sub_pd(s_hi, base_hi));
            const __m512 a1 = TAP(1, window, re_lo, re_hi, rel, x_re, first);
            const __m512 b1 = IQ ? TAP(1, window, im_lo, im_hi, rel, x_im, first) : _mm512_setzero_ps();
            if (KIND == USBEAM_INTERP_LINEAR) {
                v_re = _mm512_fmadd_ps(frac, _mm512_sub_ps(a1, a0), a0);
                if (IQ) v_im = _mm512_fmadd_ps(frac, _mm512_sub_ps(b1, b0), b0);
            } else { /* Catmull-Rom, usbeam_math.h */
                const __m512 a2 = TAP(2, window, re_lo, re_hi, rel, x_re, first);
                const __m512 a3 = TAP(3, window, re_lo, re_hi, rel, x_re, first);
                const __m512 t2 = _mm512_mul_ps(frac, frac), t3 = _mm512_mul_ps(t2, frac), half = _mm512_set1_ps(0.5f);
                const __m512 two = _mm512_set1_ps(2.0f);
                const __m512 w0 = _mm512_mul_ps(half, _mm512_sub_ps(_mm512_fmsub_ps(two, t2, t3), frac));
                const __m512 w1 =
                    _mm512_mul_ps(half, _mm512_fmadd_ps(_mm512_set1_ps(3.0f), t3, _mm512_fnmadd_ps(_mm512_set1_ps(5.0f), t2, two)));
                const __m512 w2 = _mm512_mul_ps(
                    half, _mm512_add_ps(_mm512_fnmadd_ps(_mm512_set1_ps(3.0f), t3, _mm512_mul_ps(_mm512_set1_ps(4.0f), t2)), frac));
                const __m512 w3 = _mm512_mul_ps(half, _mm512_sub_ps(t3, t2));
                v_re = _mm512_fmadd_ps(w3, a3, _mm512_fmadd_ps(w2, a2, _mm512_fmadd_ps(w1, a1, _mm512_mul_ps(w0, a0))));
                if (IQ) {
                    const __m512 b2 = TAP(2, window, im_lo, im_hi, rel, x_im, first);
                    const __m512 b3 = TAP(3, window, im_lo, im_hi, rel, x_im, first);
                    v_im = _mm512_fmadd_ps(w3, b3, _mm512_fmadd_ps(w2, b2, _mm512_fmadd_ps(w1, b1, _mm512_mul_ps(w0, b0))));
                }
            }
        }
        if (WINDOWED) {
            const __m512 w = _mm512_load_ps(w_rows + r * LANES);
            v_re = _mm512_mul_ps(w, v_re);
            if (IQ) v_im = _mm512_mul_ps(w, v_im);
        }
        if (!IQ) {
            acc_re = _mm512_add_ps(acc_re, v_re);
            continue;
        }
        const __m512 c_re = _mm512_load_ps(rotation + 32 * r), c_im = _mm512_load_ps(rotation + 32 * r + 16);
        acc_re = _mm512_fmadd_ps(c_re, v_re, _mm512_fnmadd_ps(c_im, v_im, acc_re));
        acc_im = _mm512_fmadd_ps(c_re, v_im, _mm512_fmadd_ps(c_im, v_re, acc_im));
    }
    *sum_re = acc_re;
    *sum_im = acc_im;
}

/* Points p0 .. p0 + m - 1 (p0 a multiple of 16) into out_re / out_im. */
__attribute__((always_inline)) TARGET_AVX512 static inline void
tile_lanes_zmm(const int KIND, const int IQ, const int WINDOWED, const usbeam_das_plan *plan, float *rotation,
               size_t p0, size_t m, const float *restrict re_plane, const float *restrict im_plane, float *out_re,
               float *out_im)
{
    const size_t n_tx = plan->params.n_transmits;
    for (size_t q0 = 0; q0 < m; q0 += LANES) {
        const size_t g = (p0 + q0) / LANES, in_group = m - q0 < LANES ? m - q0 : LANES;
        const __mmask16 lanes = (__mmask16)((1u << in_group) - 1u);
        __m512 out_r = _mm512_setzero_ps(), out_i = _mm512_setzero_ps();
        for (size_t t = 0; t < n_tx; ++t) {
            __m512 sum_re, sum_im;
            group_sum(KIND, IQ, WINDOWED, plan, g, lanes, t, re_plane, im_plane, rotation, &sum_re, &sum_im);
            if (!IQ) {
                out_r = _mm512_add_ps(out_r, sum_re);
                continue;
            }
            const float *rot = plan->lane_rot + (g * n_tx + t) * 2 * LANES;
            const __m512 rot_re = _mm512_load_ps(rot), rot_im = _mm512_load_ps(rot + LANES);
            out_r = _mm512_fmadd_ps(rot_re, sum_re, _mm512_fnmadd_ps(rot_im, sum_im, out_r));
            out_i = _mm512_fmadd_ps(rot_re, sum_im, _mm512_fmadd_ps(rot_im, sum_re, out_i));
        }
        _mm512_mask_storeu_ps(out_re + q0, lanes, out_r);
        _mm512_mask_storeu_ps(out_im + q0, lanes, out_i);
    }
}

#define TILE_LANES_COPY(KIND, IQ, WINDOWED)                                                                     \
    TARGET_AVX512 static void tile_lanes_##KIND##_##IQ##_##WINDOWED(const usbeam_das_plan *plan, float *rotation,     \
                                                                   size_t p0, size_t m, const float *re_plane,    \
                                                                   const float *im_plane, float *out_re,          \
                                                                   float *out_im)                                 \
    {                                                                                                           \
        tile_lanes_zmm(KIND, IQ, WINDOWED, plan, rotation, p0, m, re_plane, im_plane, out_re, out_im);          \
    }
TILE_LANES_COPY(0, 0, 0) TILE_LANES_COPY(0, 0, 1) TILE_LANES_COPY(0, 1, 0) TILE_LANES_COPY(0, 1, 1)
TILE_LANES_COPY(1, 0, 0) TILE_LANES_COPY(1, 0, 1) TILE_LANES_COPY(1, 1, 0) TILE_LANES_COPY(1, 1, 1)
TILE_LANES_COPY(2, 0, 0) TILE_LANES_COPY(2, 0, 1) TILE_LANES_COPY(2, 1, 0) TILE_LANES_COPY(2, 1, 1)
#undef TILE_LANES_COPY

typedef void (*tile_lanes_fn)(const usbeam_das_plan *, float *, size_t, size_t, const float *, const float *, float *,
                              float *);
static const tile_lanes_fn tile_lanes_copies[3][2][2] = {
    {{tile_lanes_0_0_0, tile_lanes_0_0_1}, {tile_lanes_0_1_0, tile_lanes_0_1_1}},
    {{tile_lanes_1_0_0, tile_lanes_1_0_1}, {tile_lanes_1_1_0, tile_lanes_1_1_1}},
    {{tile_lanes_2_0_0, tile_lanes_2_0_1}, {tile_lanes_2_1_0, tile_lanes_2_1_1}},
};
#endif

int usbeam_das_tile_lanes(const usbeam_das_plan *plan, int thread, size_t p0, size_t m, const float *re_plane,
                          const float *im_plane, float *out_re, float *out_im)
{
#if USBEAM_DAS_MULTI_ISA
    if (!plan->lane_sample || usbeam_das_isa() != 2) return 0;
    float *rotation = plan->lane_cache + (size_t)thread * 32 * (size_t)plan->lane_max_rows;
    tile_lanes_copies[plan->params.interpolation][plan->is_iq][plan->lane_window != NULL](plan, rotation, p0, m, re_plane,
                                                                                         im_plane, out_re, out_im);
    return 1;
#else
    (void)plan, (void)thread, (void)p0, (void)m, (void)re_plane, (void)im_plane, (void)out_re, (void)out_im;
    return 0;
#endif
}
