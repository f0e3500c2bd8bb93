/*
 * adaptive_math.h - the per-point math of the adaptive beamformers, shared by the C CPU
 * reference (beamform/adaptive.c) and its CUDA twin (cuda/adaptive.cu): header-only,
 * `static inline USBEAM_HD`, double precision throughout (the inputs are float32 delayed
 * samples; the nonlinear steps and the covariance solve run in double).
 *
 * Layouts (one point, one frame):
 *   entries  (n_transmits, count) in das_internal.h's layout: tap[j] the first interpolation
 *            tap (sample index), weight[j * stride ...] its `taps` real weights (RF) or
 *            (re, im) pairs (IQ), window and IQ rotation exp(+j 2 pi fc tau) folded in;
 *   frame    (n_transmits, n_elements, n_samples) channel data of one frame, C order;
 *   v        (n_offsets, count) complex: v[o][e] = sum_t delayed sample of element first + e
 *            read `offset_o` samples after its delay (o = 0 .. n_offsets-1 <-> offsets
 *            -K .. K), i.e. the element signals compounded over transmits.  For IQ data the
 *            rotation stays that of the delay itself, so v[o][e] = a_e(tau_e + k/fs)
 *            exp(-j 2 pi fc k / fs) with a the analytic signal: a phase common to all
 *            elements, which the covariance (MV) cancels and F-DMAS takes into its taps.
 *
 * Methods (references in usbeam/adaptive.py; s_e = v[centre][e], N = count):
 *   CF   (Mallart & Fink 1994): |sum s|^2 / (N sum |s|^2)
 *   GCF  (Li & Li 2003): sum_{|k| <= M0} |S(k)|^2 / (N sum |s|^2), S the N-point DFT over e
 *   DMAS (Matrone et al. 2015): sum_{i<j} q_i q_j = ((sum q)^2 - sum q^2) / 2 with the signed
 *        square root q = s / sqrt|s| (sign(s) sqrt|s| for real s; |s|^(1/2) e^{j arg s} for IQ)
 *   p-DAS (Polichetti et al. 2018): r = sum |s|^(1/p) e^{j arg s}; |r|^p e^{j arg r}
 *   MV   (Synnevag et al. 2007, 2009): subarrays of length L, temporal averaging over the
 *        n_offsets samples, R + (delta trace(R) / L) I, w = R^-1 a / (a^H R^-1 a), a = 1,
 *        output (1 / n_sub) sum_l w^H x_l at the centre sample.
 */
#ifndef USBEAM_ADAPTIVE_MATH_H
#define USBEAM_ADAPTIVE_MATH_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "common/usbeam_math.h"
#include "usbeam.h"

/* Input sample kinds of the gather. */
#define USBEAM_ADAPTIVE_INT16 0
#define USBEAM_ADAPTIVE_FLOAT32 1
#define USBEAM_ADAPTIVE_COMPLEX64 2

typedef struct usbeam_adaptive_cplx {
    double re, im;
} usbeam_adaptive_cplx;

static inline USBEAM_HD usbeam_adaptive_cplx usbeam_adaptive_mul(usbeam_adaptive_cplx a, usbeam_adaptive_cplx b)
{
    usbeam_adaptive_cplx r = {a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re};
    return r;
}

/* The delayed element signals of one point at one sample offset (layouts above): v[e] for
 * e < count.  A tap outside [0, n_samples) reads zero (an offset past the record's ends). */
static inline USBEAM_HD void usbeam_adaptive_gather(const void *frame, int kind, size_t n_elements, size_t n_samples,
                                                    int n_transmits, int first, int count, const int32_t *tap,
                                                    const float *weight, int taps, int is_iq, int offset,
                                                    usbeam_adaptive_cplx *v)
{
    const int stride = is_iq ? 2 * taps : taps;
    for (int e = 0; e < count; ++e) {
        double re = 0.0, im = 0.0;
        for (int t = 0; t < n_transmits; ++t) {
            const size_t j = (size_t)t * (size_t)count + (size_t)e;
            const size_t row = ((size_t)t * n_elements + (size_t)(first + e)) * n_samples;
            const float *w = weight + j * (size_t)stride;
            for (int k = 0; k < taps; ++k) {
                const long long s = (long long)tap[j] + k + offset;
                if (s < 0 || s >= (long long)n_samples) continue;
                if (kind == USBEAM_ADAPTIVE_COMPLEX64) {
                    const float *x = (const float *)frame + 2 * (row + (size_t)s);
                    re += (double)w[2 * k] * x[0] - (double)w[2 * k + 1] * x[1];
                    im += (double)w[2 * k] * x[1] + (double)w[2 * k + 1] * x[0];
                } else {
                    const double x = kind == USBEAM_ADAPTIVE_INT16 ? (double)((const int16_t *)frame)[row + (size_t)s]
                                                                   : (double)((const float *)frame)[row + (size_t)s];
                    re += (double)w[k] * x;
                }
            }
        }
        v[e].re = re;
        v[e].im = im;
    }
}

static inline USBEAM_HD double usbeam_adaptive_energy(const usbeam_adaptive_cplx *s, int n)
{
    double e = 0.0;
    for (int i = 0; i < n; ++i) e += s[i].re * s[i].re + s[i].im * s[i].im;
    return e;
}

static inline USBEAM_HD usbeam_adaptive_cplx usbeam_adaptive_sum(const usbeam_adaptive_cplx *s, int n)
{
    usbeam_adaptive_cplx r = {0.0, 0.0};
    for (int i = 0; i < n; ++i) {
        r.re += s[i].re;
        r.im += s[i].im;
    }
    return r;
}

/* Generalised coherence factor; m0 = 0 is the coherence factor.  0 when the signals are 0.
 * twiddle: scratch of n values (the n-th roots of unity, computed once per call). */
static inline USBEAM_HD double usbeam_adaptive_gcf(const usbeam_adaptive_cplx *s, int n, int m0,
                                                   usbeam_adaptive_cplx *twiddle)
{
    const double energy = usbeam_adaptive_energy(s, n);
    if (!(energy > 0.0)) return 0.0;
    if (2 * m0 + 1 >= n) return 1.0; /* the low band holds every DFT bin */
    if (m0 == 0) { /* CF: |S(0)|^2 */
        const usbeam_adaptive_cplx sum = usbeam_adaptive_sum(s, n);
        return (sum.re * sum.re + sum.im * sum.im) / ((double)n * energy);
    }
    for (int m = 0; m < n; ++m) { /* exp(-j 2 pi m / n) */
        const double angle = -2.0 * USBEAM_PI * (double)m / (double)n;
        twiddle[m].re = cos(angle);
        twiddle[m].im = sin(angle);
    }
    double low = 0.0;
    for (int k = -m0; k <= m0; ++k) {
        double re = 0.0, im = 0.0;
        const int step = ((k % n) + n) % n;
        int m = 0;
        for (int e = 0; e < n; ++e) { /* S(k) = sum_e s_e exp(-j 2 pi k e / n), m = k e mod n */
            const usbeam_adaptive_cplx w = twiddle[m];
            re += s[e].re * w.re - s[e].im * w.im;
            im += s[e].re * w.im + s[e].im * w.re;
            m += step;
            if (m >= n) m -= n;
        }
        low += re * re + im * im;
    }
    return low / ((double)n * energy);
}

/* |s|^power e^{j arg s} (0 for s = 0): the signed root of RF, the phase-keeping root of IQ. */
static inline USBEAM_HD usbeam_adaptive_cplx usbeam_adaptive_signed_power(usbeam_adaptive_cplx s, double power)
{
    const double m = sqrt(s.re * s.re + s.im * s.im);
    usbeam_adaptive_cplx r = {0.0, 0.0};
    if (m > 0.0) {
        const double f = pow(m, power) / m;
        r.re = s.re * f;
        r.im = s.im * f;
    }
    return r;
}

/* Delay-multiply-and-sum: sum over pairs i < j of q_i q_j, q the signed square roots. */
static inline USBEAM_HD usbeam_adaptive_cplx usbeam_adaptive_dmas(const usbeam_adaptive_cplx *s, int n)
{
    usbeam_adaptive_cplx sum = {0.0, 0.0}, squares = {0.0, 0.0};
    for (int i = 0; i < n; ++i) {
        const usbeam_adaptive_cplx q = usbeam_adaptive_signed_power(s[i], 0.5);
        const usbeam_adaptive_cplx q2 = usbeam_adaptive_mul(q, q);
        sum.re += q.re;
        sum.im += q.im;
        squares.re += q2.re;
        squares.im += q2.im;
    }
    const usbeam_adaptive_cplx total = usbeam_adaptive_mul(sum, sum);
    usbeam_adaptive_cplx r = {0.5 * (total.re - squares.re), 0.5 * (total.im - squares.im)};
    return r;
}

/* p-DAS: the p-th roots summed, raised back to the power p with the sum's sign/phase. */
static inline USBEAM_HD usbeam_adaptive_cplx usbeam_adaptive_pdas(const usbeam_adaptive_cplx *s, int n, double p)
{
    usbeam_adaptive_cplx sum = {0.0, 0.0};
    for (int i = 0; i < n; ++i) {
        const usbeam_adaptive_cplx q = usbeam_adaptive_signed_power(s[i], 1.0 / p);
        sum.re += q.re;
        sum.im += q.im;
    }
    return usbeam_adaptive_signed_power(sum, p);
}

/* Minimum variance (Capon) at one point.  v: (n_offsets, count) as above, centre the offset 0
 * row; L <= count the subarray length; loading delta >= 0.  R (L * L) and u (L) are scratch.
 * Where the loaded covariance is not positive definite (delta = 0 with too few snapshots, or
 * signals all zero) the weights fall back to uniform ones (a / L: delay-and-sum over the
 * subarrays), so a point never takes NaN. */
static inline USBEAM_HD usbeam_adaptive_cplx usbeam_adaptive_mv(const usbeam_adaptive_cplx *v, int n_offsets, int centre,
                                                                int count, int L, double delta,
                                                                usbeam_adaptive_cplx *R, usbeam_adaptive_cplx *u)
{
    const int n_sub = count - L + 1;
    usbeam_adaptive_cplx y = {0.0, 0.0};
    if (count < 1 || L < 1 || n_sub < 1) return y;
    for (int i = 0; i < L * L; ++i) R[i].re = R[i].im = 0.0;
    /* R = sum over offsets and subarrays of x x^H (lower triangle; the scale cancels in w) */
    for (int o = 0; o < n_offsets; ++o) {
        const usbeam_adaptive_cplx *row = v + (size_t)o * (size_t)count;
        for (int l = 0; l < n_sub; ++l) {
            const usbeam_adaptive_cplx *x = row + l;
            for (int i = 0; i < L; ++i)
                for (int j = 0; j <= i; ++j) { /* x_i conj(x_j) */
                    R[i * L + j].re += x[i].re * x[j].re + x[i].im * x[j].im;
                    R[i * L + j].im += x[i].im * x[j].re - x[i].re * x[j].im;
                }
        }
    }
    double trace = 0.0;
    for (int i = 0; i < L; ++i) trace += R[i * L + i].re;
    int ok = trace > 0.0;
    const double load = delta * trace / (double)L;
    for (int i = 0; i < L; ++i) R[i * L + i].re += load;
    /* Cholesky R = G G^H in place (lower triangle), then G z = a and G^H u = z */
    for (int j = 0; ok && j < L; ++j) {
        double d = R[j * L + j].re;
        for (int k = 0; k < j; ++k) d -= R[j * L + k].re * R[j * L + k].re + R[j * L + k].im * R[j * L + k].im;
        if (!(d > 1e-12 * trace / (double)L)) { /* (numerically) singular: fall back below */
            ok = 0;
            break;
        }
        const double g = sqrt(d);
        R[j * L + j].re = g;
        R[j * L + j].im = 0.0;
        for (int i = j + 1; i < L; ++i) { /* G_ij = (R_ij - sum_k G_ik conj(G_jk)) / G_jj */
            double re = R[i * L + j].re, im = R[i * L + j].im;
            for (int k = 0; k < j; ++k) {
                const usbeam_adaptive_cplx a = R[i * L + k], b = R[j * L + k];
                re -= a.re * b.re + a.im * b.im;
                im -= a.im * b.re - a.re * b.im;
            }
            R[i * L + j].re = re / g;
            R[i * L + j].im = im / g;
        }
    }
    if (ok) {
        for (int i = 0; i < L; ++i) { /* forward: G z = 1 */
            double re = 1.0, im = 0.0;
            for (int k = 0; k < i; ++k) {
                const usbeam_adaptive_cplx g = R[i * L + k], z = u[k];
                re -= g.re * z.re - g.im * z.im;
                im -= g.re * z.im + g.im * z.re;
            }
            u[i].re = re / R[i * L + i].re;
            u[i].im = im / R[i * L + i].re;
        }
        for (int i = L - 1; i >= 0; --i) { /* backward: G^H u = z, (G^H)_ik = conj(G_ki) */
            double re = u[i].re, im = u[i].im;
            for (int k = i + 1; k < L; ++k) {
                const usbeam_adaptive_cplx g = R[k * L + i], x = u[k];
                re -= g.re * x.re + g.im * x.im;
                im -= g.re * x.im - g.im * x.re;
            }
            u[i].re = re / R[i * L + i].re;
            u[i].im = im / R[i * L + i].re;
        }
        const usbeam_adaptive_cplx total = usbeam_adaptive_sum(u, L); /* a^H R^-1 a, real > 0 */
        ok = total.re > 0.0 && isfinite(total.re);
        for (int i = 0; ok && i < L; ++i) { /* w = u / (a^H u) */
            u[i].re /= total.re;
            u[i].im /= total.re;
        }
    }
    if (!ok)
        for (int i = 0; i < L; ++i) {
            u[i].re = 1.0 / (double)L;
            u[i].im = 0.0;
        }
    const usbeam_adaptive_cplx *row = v + (size_t)centre * (size_t)count;
    for (int l = 0; l < n_sub; ++l)
        for (int i = 0; i < L; ++i) { /* conj(w_i) x_i */
            const usbeam_adaptive_cplx w = u[i], x = row[l + i];
            y.re += w.re * x.re + w.im * x.im;
            y.im += w.re * x.im - w.im * x.re;
        }
    y.re /= (double)n_sub;
    y.im /= (double)n_sub;
    return y;
}

/* MV's subarray length at a point whose aperture has `count` elements (0 for none). */
static inline USBEAM_HD int usbeam_adaptive_subarray(const usbeam_adaptive_params *prm, int count)
{
    if (count < 1) return 0;
    if (prm->subarray_fraction > 0.0) {
        const int L = (int)floor(prm->subarray_fraction * count + 0.5);
        return L < 1 ? 1 : (L > count ? count : L);
    }
    return (size_t)count < prm->subarray_length ? count : (int)prm->subarray_length;
}

/* One point of one frame: the method's value from its entries (tap, weight: the point's
 * (n_transmits, count) entries), frame (n_transmits, n_elements, n_samples), the F-DMAS taps
 * (n_offsets, reversed; NULL otherwise) and scratch (n_offsets * count values, then L (L + 1) for
 * MV or count for GCF's twiddles). */
static inline USBEAM_HD usbeam_adaptive_cplx usbeam_adaptive_point(const usbeam_adaptive_params *prm, int kind, int is_iq, int taps,
                                           int n_offsets, int centre, int first, int count, const int32_t *tap,
                                           const float *weight, const void *frame, const double *fir_re,
                                           const double *fir_im, usbeam_adaptive_cplx *scratch)
{
    usbeam_adaptive_cplx y = {0.0, 0.0};
    if (count < 1) return y;
    const usbeam_das_params *das = &prm->das;
    usbeam_adaptive_cplx *v = scratch;
    for (int o = 0; o < n_offsets; ++o)
        usbeam_adaptive_gather(frame, kind, das->n_elements, das->n_samples, (int)das->n_transmits, first, count, tap,
                               weight, taps, is_iq, o - centre, v + (size_t)o * (size_t)count);
    const usbeam_adaptive_cplx *s = v + (size_t)centre * (size_t)count;
    switch (prm->method) {
    case USBEAM_ADAPTIVE_CF:
    case USBEAM_ADAPTIVE_GCF: {
        const double factor = usbeam_adaptive_gcf(s, count, prm->method == USBEAM_ADAPTIVE_CF ? 0 : (int)prm->gcf_m0,
                                                  v + (size_t)n_offsets * (size_t)count);
        y = usbeam_adaptive_sum(s, count);
        y.re *= factor;
        y.im *= factor;
        break;
    }
    case USBEAM_ADAPTIVE_DMAS:
        y = usbeam_adaptive_dmas(s, count);
        break;
    case USBEAM_ADAPTIVE_FDMAS:
        for (int o = 0; o < n_offsets; ++o) {
            const usbeam_adaptive_cplx d = usbeam_adaptive_dmas(v + (size_t)o * (size_t)count, count);
            y.re += fir_re[o] * d.re - fir_im[o] * d.im;
            y.im += fir_re[o] * d.im + fir_im[o] * d.re;
        }
        break;
    case USBEAM_ADAPTIVE_PDAS:
        y = usbeam_adaptive_pdas(s, count, prm->p);
        break;
    default: { /* MV */
        const int L = usbeam_adaptive_subarray(prm, count);
        usbeam_adaptive_cplx *R = v + (size_t)n_offsets * (size_t)count;
        y = usbeam_adaptive_mv(v, n_offsets, centre, count, L, prm->diagonal_loading, R, R + (size_t)L * (size_t)L);
        break;
    }
    }
    return y;
}

#endif /* USBEAM_ADAPTIVE_MATH_H */
