/*
 * das_delays.c - the geometry of one point for delay-and-sum (any probe): transmit time, and for each
 * (transmit, element of the receive aperture) the first interpolation tap and its weights
 * with the window and the IQ phase rotation folded in (layout in das_internal.h).  Plan
 * creation runs this for every point (the table); without a table, execute does.
 *
 * Units: positions m, times s; tau = tau_tx + |p - e| / c; s = (tau - t0) fs.
 * The math is that of usbeam_math.h (interpolation validity ranges, windows, transmit
 * models).  The loops here are written so the compiler vectorises them over the elements
 * of a chunk of the aperture: no calls but sqrt, branch-free selects, and sin/cos from
 * polynomials on a reduced argument (|error| < 1e-11, far below the float32 weights).
 * Reference: Perrot et al., "So you think you can DAS?", Ultrasonics 111 (2021) 106309.
 */
#include "beamform/das_internal.h"

#include <math.h>
#include <stdint.h>

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=fast", "no-trapping-math")
#endif

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
#define USBEAM_VECTOR __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define USBEAM_VECTOR
#endif

#define CHUNK 64 /* elements processed together (stack buffers) */

/* sin and cos of 2 pi turns for any finite turns.  The whole turns are removed first
 * (exact in double for |turns| < 2^52), then a quarter turn q in {-2..2}, leaving
 * |r| <= pi/4 where Taylor polynomials of degree 11 and 12 are accurate to < 1e-11. */
static inline void sincos_turns(double turns, double *sin_out, double *cos_out)
{
    const double frac = turns - rint(turns);  /* [-1/2, 1/2] */
    const double q = rint(4.0 * frac);        /* quarter turns, -2..2 */
    const double r = 2.0 * USBEAM_PI * (frac - 0.25 * q);
    const double r2 = r * r;
    const double s = r * (1.0 + r2 * (-1.0 / 6 + r2 * (1.0 / 120 + r2 * (-1.0 / 5040 + r2 * (1.0 / 362880 + r2 * (-1.0 / 39916800))))));
    const double c = 1.0 + r2 * (-0.5 + r2 * (1.0 / 24 + r2 * (-1.0 / 720 + r2 * (1.0 / 40320 + r2 * (-1.0 / 3628800 + r2 * (1.0 / 479001600))))));
    /* q = +-1: angle r +- pi/2 (sin = q c, cos = -q s); q = 0, +-2: sign 1 - |q|.  As
     * arithmetic (odd = |q| (2 - |q|) is 1 for |q| = 1, else 0) so loops stay branch-free. */
    const double a = fabs(q), odd = a * (2.0 - a);
    *sin_out = odd * q * c + (1.0 - a) * s;
    *cos_out = (1.0 - a) * c - odd * q * s;
}

/* min over sources [lo, hi) of (o_i + |p - s_i|), at most `bound`, exactly in double but
 * found fast: float values of a chunk of sources (vectorised), then double only for the
 * sources whose float value is within a margin of the float minimum so far (the margin,
 * 1e-7 m + 1e-5 relative, is far above float rounding, and the running minimum only
 * decreases, so the true minimiser is always among those evaluated in double).  Sources
 * are (3, n) rows x, z, o. */
USBEAM_VECTOR static double sources_min(const double *sources, const float *sources_f, int n, int lo, int hi, double x,
                                        double y, double z, double bound)
{
    enum { SOURCE_CHUNK = 256 };
    const float *sx = sources_f, *sz = sources_f + n, *so = sources_f + 2 * n;
    const float xf = (float)x, zf = (float)z, y2 = (float)(y * y);
    float value[SOURCE_CHUNK];
    float best = INFINITY;
    double exact = bound;
    for (int i0 = lo; i0 < hi; i0 += SOURCE_CHUNK) {
        const int m = hi - i0 < SOURCE_CHUNK ? hi - i0 : SOURCE_CHUNK;
        float chunk_best = INFINITY;
#if defined(_OPENMP)
#pragma omp simd reduction(min : chunk_best)
#endif
        for (int i = 0; i < m; ++i) {
            const float dx = xf - sx[i0 + i], dz = zf - sz[i0 + i];
            value[i] = so[i0 + i] + sqrtf(dx * dx + y2 + dz * dz);
            chunk_best = value[i] < chunk_best ? value[i] : chunk_best;
        }
        best = chunk_best < best ? chunk_best : best;
        const float limit = best + 1e-7f + 1e-5f * fabsf(best);
        for (int i = 0; i < m; ++i) {
            if (value[i] <= limit) {
                const double dx = x - sources[i0 + i], dz = z - sources[n + i0 + i];
                const double path = sources[2 * n + i0 + i] + sqrt(dx * dx + y * y + dz * dz);
                exact = path < exact ? path : exact;
            }
        }
    }
    return exact;
}

/* First index of the sorted xs[0 .. n-1] with xs[i] >= value (n if none). */
static int lower_index(const double *xs, int n, double value)
{
    int lo = 0, hi = n;
    while (lo < hi) {
        const int mid = lo + (hi - lo) / 2;
        if (xs[mid] < value) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* Transmit path of a virtual-source transmit: min_i (o_i + |p - s_i|), exactly.  The
 * sources are sorted by x, so only a window of them is searched: with U the path through
 * the sources nearest to p in x, a source can only do better when o_min + |p - s_i| <= U,
 * and |p - s_i| >= sqrt(dx^2 + dz_min^2 + y^2) (dz_min: distance from z to the sources'
 * z range) bounds |dx| by W = sqrt((U - o_min)^2 - dz_min^2 - y^2).  Below a steered or
 * focused law the window is wide; below an unsteered one it is a few sources. */
static double sources_path(const double *sources, const float *sources_f, int n, const double bounds[3], double x,
                           double y, double z)
{
    const double *sx = sources, *sz = sources + n, *so = sources + 2 * n;
    const int k = lower_index(sx, n, x);
    double upper = INFINITY;
    for (int i = k - 1; i <= k; ++i) {
        if (i < 0 || i >= n) continue;
        const double dx = x - sx[i], dz = z - sz[i];
        const double path = so[i] + sqrt(dx * dx + y * y + dz * dz);
        upper = path < upper ? path : upper;
    }
    const double o_min = bounds[0], z_lo = bounds[1], z_hi = bounds[2];
    const double dz_min = z < z_lo ? z_lo - z : (z > z_hi ? z - z_hi : 0.0);
    const double reach = upper - o_min, w2 = reach * reach - dz_min * dz_min - y * y;
    if (!(w2 > 0.0)) return upper;
    const double w = sqrt(w2) * (1.0 + 1e-12) + 1e-12; /* a hair wider than the bound */
    const int lo = lower_index(sx, n, x - w);
    int end = lower_index(sx, n, x + w);
    while (end < n && sx[end] <= x + w) ++end; /* sources exactly at x + w are inside */
    return sources_min(sources, sources_f, n, lo, end, x, y, z, upper);
}

double usbeam_das_transmit_time(const usbeam_das_plan *plan, size_t t, const double *pt)
{
    const usbeam_tx_model *m = &plan->tx[t];
    if (m->n_sources > 0 && m->source_rows == 3)
        return sources_path(m->sources, plan->tx_sources_f + (m->sources - plan->tx_sources), m->n_sources,
                            plan->tx_source_bounds + 3 * t, pt[0], pt[1], pt[2]) /
               plan->params.c;
    return usbeam_tx_path(m, pt[0], pt[1], pt[2]) / plan->params.c;
}

/* Two-way times tau[i] and window weights apod[i] of elements e0 .. e0+n-1. */
USBEAM_VECTOR static void chunk_times(const usbeam_das_plan *plan, const double *pt, double tx_time, int e0, int n,
                                      double centre, double inv_half, double *restrict tau, double *restrict apod)
{
    const usbeam_das_params *prm = &plan->params;
    const double *ex = plan->element_x + e0, *ey = plan->element_y + e0, *ez = plan->element_z + e0;
    const double inv_c = 1.0 / prm->c, alpha = prm->tukey_alpha;
    for (int i = 0; i < n; ++i) {
        const double dx = pt[0] - ex[i], dy = pt[1] - ey[i], dz = pt[2] - ez[i];
        tau[i] = tx_time + sqrt(dx * dx + dy * dy + dz * dz) * inv_c;
    }
    if (prm->window == USBEAM_DAS_HANN) {
        for (int i = 0; i < n; ++i) {
            double s, c;
            const double a = fabs((ex[i] - centre) * inv_half);
            sincos_turns(0.5 * a, &s, &c);
            apod[i] = a <= 1.0 ? 0.5 * (1.0 + c) : 0.0;
        }
    } else if (prm->window == USBEAM_DAS_TUKEY && alpha > 0.0) {
        const double flat = 1.0 - alpha, turns_per_u = 0.5 / alpha;
        for (int i = 0; i < n; ++i) {
            double s, c;
            const double a = fabs((ex[i] - centre) * inv_half);
            sincos_turns((a - flat) * turns_per_u, &s, &c);
            apod[i] = a <= flat ? 1.0 : (a <= 1.0 ? 0.5 * (1.0 + c) : 0.0);
        }
    } else { /* rect, and Tukey with alpha = 0 */
        for (int i = 0; i < n; ++i) apod[i] = fabs((ex[i] - centre) * inv_half) <= 1.0 ? 1.0 : 0.0;
    }
}

/* chunk_times for the general geometry (elements with normals, surfaces): each element's own
 * acceptance cone and window, usbeam_element_window (usbeam_math.h) written branch-free over
 * the chunk so it vectorises (frames in plan->element_frame are (9, n) rows); or the
 * element's full-aperture weight (f_number = 0). */
USBEAM_VECTOR static void chunk_times_general(const usbeam_das_plan *plan, const double *pt, double tx_time, int e0,
                                              int n, double *restrict tau, double *restrict apod)
{
    const usbeam_das_params *prm = &plan->params;
    const size_t ne = prm->n_elements;
    const double *ex = plan->element_x + e0, *ey = plan->element_y + e0, *ez = plan->element_z + e0;
    const double *f = plan->element_frame + e0;
    const double *t1x = f, *t1y = f + ne, *t1z = f + 2 * ne, *t2x = f + 3 * ne, *t2y = f + 4 * ne, *t2z = f + 5 * ne;
    const double *nx = f + 6 * ne, *ny = f + 7 * ne, *nz = f + 8 * ne;
    const double inv_c = 1.0 / prm->c, two_f = 2.0 * prm->f_number, alpha = prm->tukey_alpha;
    const int surface = prm->surface, window = (int)prm->window;
    double u1[CHUNK], u2[CHUNK];
    for (int i = 0; i < n; ++i) {
        const double dx = pt[0] - ex[i], dy = pt[1] - ey[i], dz = pt[2] - ez[i];
        tau[i] = tx_time + sqrt(dx * dx + dy * dy + dz * dz) * inv_c;
        const double axial = dx * nx[i] + dy * ny[i] + dz * nz[i];
        const double l1 = dx * t1x[i] + dy * t1y[i] + dz * t1z[i];
        const double l2 = surface ? dx * t2x[i] + dy * t2y[i] + dz * t2z[i] : 0.0;
        const double half = axial / two_f;
        const int inside = (axial > 0.0) & (fabs(l1) <= half) & (fabs(l2) <= half);
        const double scale = inside ? two_f / axial : 0.0;
        u1[i] = fabs(l1 * scale);
        u2[i] = fabs(l2 * scale);
        apod[i] = inside ? 1.0 : 0.0;
    }
    if (!(prm->f_number > 0.0)) {
        for (int i = 0; i < n; ++i) apod[i] = plan->element_window[e0 + i];
        return;
    }
    if (window == USBEAM_DAS_HANN || (window == USBEAM_DAS_TUKEY && alpha > 0.0)) {
        const double flat = window == USBEAM_DAS_HANN ? 0.0 : 1.0 - alpha;
        const double turns_per_u = window == USBEAM_DAS_HANN ? 0.5 : 0.5 / alpha;
        for (int i = 0; i < n; ++i) { /* 0.5 (1 + cos(pi (a - flat) / (1 - flat))) past the flat part */
            double s, c1, c2;
            sincos_turns((u1[i] - flat) * turns_per_u, &s, &c1);
            sincos_turns((u2[i] - flat) * turns_per_u, &s, &c2);
            const double w1 = u1[i] <= flat ? 1.0 : 0.5 * (1.0 + c1), w2 = u2[i] <= flat ? 1.0 : 0.5 * (1.0 + c2);
            apod[i] *= w1 * (surface ? w2 : 1.0);
        }
    }
}

/* Interpolation taps and weights (times apod) of n times; w is (taps, n). */
USBEAM_VECTOR static void chunk_weights(const usbeam_das_plan *plan, const double *restrict tau, const double *restrict apod,
                                        int n, int32_t *restrict first_tap, double *restrict w)
{
    const usbeam_das_params *prm = &plan->params;
    const double last = (double)prm->n_samples - 1.0;
    switch ((int)prm->interpolation) {
    case USBEAM_INTERP_NEAREST:
        for (int i = 0; i < n; ++i) {
            const double s = (tau[i] - prm->t0) * prm->fs;
            const int valid = (s >= 0.0) & (s <= last);
            first_tap[i] = valid ? (int32_t)rint(s) : 0; /* ties to even */
            w[i] = valid ? apod[i] : 0.0;
        }
        break;
    case USBEAM_INTERP_LINEAR:
        for (int i = 0; i < n; ++i) {
            const double s = (tau[i] - prm->t0) * prm->fs;
            const int valid = (s >= 0.0) & (s <= last - 1.0);
            const double base = floor(valid ? s : 0.0), t = s - base;
            first_tap[i] = (int32_t)base;
            w[i] = valid ? (1.0 - t) * apod[i] : 0.0;
            w[n + i] = valid ? t * apod[i] : 0.0;
        }
        break;
    default: /* cubic (Catmull-Rom) */
        for (int i = 0; i < n; ++i) {
            const double s = (tau[i] - prm->t0) * prm->fs;
            const int valid = (s >= 1.0) & (s <= last - 2.0);
            const double base = floor(valid ? s : 1.0), t = s - base;
            const double t2 = t * t, t3 = t2 * t, g = valid ? 0.5 * apod[i] : 0.0;
            first_tap[i] = (int32_t)base - 1;
            w[i] = g * (-t3 + 2.0 * t2 - t);
            w[n + i] = g * (3.0 * t3 - 5.0 * t2 + 2.0);
            w[2 * n + i] = g * (-3.0 * t3 + 4.0 * t2 + t);
            w[3 * n + i] = g * (t3 - t2);
        }
        break;
    }
}

/* exp(+j 2 pi fc tau) of n times into (re, im). */
USBEAM_VECTOR static void chunk_rotation(double fc, const double *restrict tau, int n, double *restrict re, double *restrict im)
{
    for (int i = 0; i < n; ++i) sincos_turns(fc * tau[i], &im[i], &re[i]);
}

void usbeam_das_point_entries(const usbeam_das_plan *plan, size_t p, int32_t *tap, float *weight)
{
    const usbeam_das_params *prm = &plan->params;
    const double *pt = plan->points + 3 * p;
    const int first = plan->aperture_first[p], count = plan->aperture_count[p];
    const int taps = plan->taps, stride = plan->weight_stride;
    /* window coordinate u = (x_e - centre) / half_width: the point's aperture, or the array */
    double centre = plan->window_center, half_width = plan->window_half_width;
    if (prm->f_number > 0.0) {
        centre = pt[0];
        half_width = pt[2] / (2.0 * prm->f_number);
    }
    const double inv_half = half_width > 0.0 ? 1.0 / half_width : 0.0;
    double tau[CHUNK], apod[CHUNK], w[USBEAM_INTERP_MAX_TAPS * CHUNK], re[CHUNK], im[CHUNK];
    int32_t first_tap[CHUNK];
    size_t j = 0;
    for (size_t t = 0; t < prm->n_transmits; ++t) {
        const double tx_time = plan->tx_time[p * prm->n_transmits + t];
        for (int e0 = first; e0 < first + count; e0 += CHUNK) {
            const int n = first + count - e0 < CHUNK ? first + count - e0 : CHUNK;
            if (plan->general) chunk_times_general(plan, pt, tx_time, e0, n, tau, apod);
            else chunk_times(plan, pt, tx_time, e0, n, centre, inv_half, tau, apod);
            chunk_weights(plan, tau, apod, n, first_tap, w);
            if (plan->is_iq) chunk_rotation(prm->fc, tau, n, re, im);
            for (int i = 0; i < n; ++i, ++j) {
                float *wj = weight + j * (size_t)stride;
                tap[j] = first_tap[i];
                for (int k = 0; k < taps; ++k) {
                    const double wk = w[k * n + i];
                    if (plan->is_iq) {
                        wj[2 * k] = (float)(wk * re[i]);
                        wj[2 * k + 1] = (float)(wk * im[i]);
                    } else {
                        wj[k] = (float)wk;
                    }
                }
            }
        }
    }
}
