/*
 * das_delays.c - the geometry of one point for delay-and-sum (layouts in das_internal.h):
 * its transmit times (plan creation), its receive part per element of its aperture, s_rx =
 * |p - e| fs / c and c_rx = window x exp(+j 2 pi fc |p - e| / c) (usbeam_das_point_receive:
 * the receive table at plan creation, or execute without one), and the entries of one
 * transmit: s = s_tx + s_rx, the first tap's row and the interpolation weights times
 * rot_tx x c_rx (usbeam_das_transmit_entries, execute).
 *
 * Units: positions m, times s; tau = tau_tx + |p - e| / c; s = (tau - t0) fs
 *        = (tau_tx - t0) fs + |p - e| fs / c, summed in double.
 * The math is that of usbeam_math.h (interpolation validity ranges, windows, transmit
 * models).  The loops here are written so the compiler vectorises them over the elements
 * of a chunk of the aperture: no calls but sqrt, branch-free selects, and sin/cos from
 * polynomials on a reduced argument (|error| < 1e-11, far below the float32 weights).
 * Reference: Perrot et al., "So you think you can DAS?", Ultrasonics 111 (2021) 106309.
 */
#include "beamform/das_internal.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=fast", "no-trapping-math")
#endif


/* The vectorised loops are inlined into one copy per instruction set (AVX-512, AVX2 + FMA,
 * baseline), chosen at run time by usbeam_das_isa() (see das.c for why not target_clones). */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
#define USBEAM_DAS_MULTI_ISA 1
#define INLINE_BODY static inline __attribute__((always_inline))
#define TARGET_AVX2 __attribute__((target("avx2,fma,bmi,bmi2,popcnt,lzcnt,f16c,movbe")))
#define TARGET_AVX512 __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx512cd,avx2,fma,bmi,bmi2,popcnt,lzcnt,f16c,movbe")))
#else
#define USBEAM_DAS_MULTI_ISA 0
#define INLINE_BODY static inline
#endif

int usbeam_das_isa(void)
{
#if USBEAM_DAS_MULTI_ISA
    static int level = -1; /* a benign race: every thread computes the same value */
    if (level < 0) {
        __builtin_cpu_init();
        const int v3 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
        const int v4 = v3 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                       __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
        level = v4 ? 2 : v3;
        /* USBEAM_DAS_ISA=0|1|2 caps the level: the tests run every copy on one machine */
        const char *cap = getenv("USBEAM_DAS_ISA");
        if (cap && cap[0] >= '0' && cap[0] <= '2' && cap[0] - '0' < level) level = cap[0] - '0';
    }
    return level;
#else
    return 0;
#endif
}

#define CHUNK 64 /* elements processed together (stack buffers) */

/* sin and cos of 2 pi turns for any finite turns.  The whole turns are removed first
 * (exact in double for |turns| < 2^52), then a quarter turn q in {-2..2}, leaving
 * |r| <= pi/4 where Taylor polynomials of degree 11 and 12 are accurate to < 1e-11. */
INLINE_BODY void sincos_turns(double turns, double *sin_out, double *cos_out)
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
static double sources_min(const double *sources, const float *sources_f, int n, int lo, int hi, double x,
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
    if (m->n_sources > 0)
        return sources_path(m->sources, plan->tx_sources_f + (m->sources - plan->tx_sources), m->n_sources,
                            plan->tx_source_bounds + 3 * t, pt[0], pt[1], pt[2]) /
               plan->params.c;
    return usbeam_tx_path(m, pt[0], pt[1], pt[2]) / plan->params.c;
}

void usbeam_das_rotation(double turns, double *re, double *im) { sincos_turns(turns, im, re); }

/* Receive distances d[i] (m) and window weights apod[i] of elements e0 .. e0+n-1. */
INLINE_BODY void chunk_distances(const usbeam_das_plan *plan, const double *pt, int e0, int n, double centre,
                                          double inv_half, double *restrict d, double *restrict apod)
{
    const usbeam_das_params *prm = &plan->params;
    const double *ex = plan->element_x + e0, *ey = plan->element_y + e0, *ez = plan->element_z + e0;
    const double alpha = prm->tukey_alpha;
    for (int i = 0; i < n; ++i) {
        const double dx = pt[0] - ex[i], dy = pt[1] - ey[i], dz = pt[2] - ez[i];
        d[i] = sqrt(dx * dx + dy * dy + dz * dz);
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

/* s_rx = d fs / c and c_rx = apod exp(+j 2 pi fc d / c) (RF: apod) of n elements. */
INLINE_BODY void chunk_receive(const usbeam_das_plan *plan, int n, const double *restrict d,
                                        const double *restrict apod, double *restrict sample, float *restrict re,
                                        float *restrict im)
{
    const usbeam_das_params *prm = &plan->params;
    const double samples_per_m = prm->fs / prm->c, turns_per_m = prm->fc / prm->c;
    for (int i = 0; i < n; ++i) sample[i] = d[i] * samples_per_m;
    if (plan->is_iq) {
        for (int i = 0; i < n; ++i) {
            double s, c;
            sincos_turns(d[i] * turns_per_m, &s, &c);
            re[i] = (float)(apod[i] * c);
            im[i] = (float)(apod[i] * s);
        }
    } else {
        for (int i = 0; i < n; ++i) re[i] = (float)apod[i];
    }
}

INLINE_BODY void point_receive(const usbeam_das_plan *plan, size_t p, double *sample, float *re, float *im)
{
    const usbeam_das_params *prm = &plan->params;
    const double *pt = plan->points + 3 * p;
    const int first = plan->aperture_first[p], count = plan->aperture_count[p];
    /* window coordinate u = (x_e - centre) / half_width: the point's aperture, or the array */
    double centre = plan->window_center, half_width = plan->window_half_width;
    if (prm->f_number > 0.0) {
        centre = pt[0];
        half_width = pt[2] / (2.0 * prm->f_number);
    }
    const double inv_half = half_width > 0.0 ? 1.0 / half_width : 0.0;
    double d[CHUNK], apod[CHUNK];
    for (int e0 = first; e0 < first + count; e0 += CHUNK) {
        const int n = first + count - e0 < CHUNK ? first + count - e0 : CHUNK;
        const int i0 = e0 - first;
        chunk_distances(plan, pt, e0, n, centre, inv_half, d, apod);
        chunk_receive(plan, n, d, apod, sample + i0, re + i0, plan->is_iq ? im + i0 : NULL);
    }
}

/* The entries of one transmit.  s = s_tx + s_rx in double (its fraction needs more than
 * float's 24 bits); the interpolation weights of the fraction, the transmit rotation times
 * c_rx and their product in float32.  One loop per kind, branch-free, so each vectorises
 * over the elements. */
INLINE_BODY void transmit_entries(const usbeam_das_plan *plan, size_t count, const double *restrict sample,
                                               const float *restrict re, const float *restrict im, double s_tx,
                                               float rot_re, float rot_im, ptrdiff_t row0, ptrdiff_t channel,
                                               ptrdiff_t frames, ptrdiff_t *restrict row, float *restrict weight)
{
    const usbeam_das_params *prm = &plan->params;
    const double last = (double)prm->n_samples - 1.0;
    const ptrdiff_t n = (ptrdiff_t)count;
    const int kind = (int)prm->interpolation, is_iq = plan->is_iq;
    if (plan->taps != usbeam_interp_taps(kind)) { /* a record shorter than the taps: nothing in range */
        for (ptrdiff_t i = 0; i < n; ++i) {
            row[i] = row0 + i * channel;
            for (int k = 0; k < plan->weight_stride; ++k) weight[i * plan->weight_stride + k] = 0.0f;
        }
        return;
    }
    /* one loop per (kind, RF / IQ), so each is branch-free; the tap goes through int32 (the
     * plan bounds n_samples by INT32_MAX / 2), which converts from double in vectors */
#define ROW(base) (row0 + i * channel + (ptrdiff_t)(int32_t)(base) * frames)
#define ROTATED(RE, IM) const float RE = rot_re * re[i] - rot_im * im[i], IM = rot_re * im[i] + rot_im * re[i]
    if (kind == USBEAM_INTERP_NEAREST) {
        if (is_iq) {
            for (ptrdiff_t i = 0; i < n; ++i) {
                const double s = s_tx + sample[i];
                const int valid = (s >= 0.0) & (s <= last);
                const float g = valid ? 1.0f : 0.0f;
                row[i] = ROW(valid ? rint(s) : 0.0); /* ties to even */
                ROTATED(cr, ci);
                weight[2 * i] = g * cr;
                weight[2 * i + 1] = g * ci;
            }
        } else {
            for (ptrdiff_t i = 0; i < n; ++i) {
                const double s = s_tx + sample[i];
                const int valid = (s >= 0.0) & (s <= last);
                row[i] = ROW(valid ? rint(s) : 0.0);
                weight[i] = valid ? re[i] : 0.0f;
            }
        }
    } else if (kind == USBEAM_INTERP_LINEAR) {
        if (is_iq) {
            for (ptrdiff_t i = 0; i < n; ++i) {
                const double s = s_tx + sample[i];
                const int valid = (s >= 0.0) & (s <= last - 1.0);
                const double base = floor(valid ? s : 0.0);
                const float t = (float)(s - base), g = valid ? 1.0f : 0.0f;
                const float w0 = g - g * t, w1 = g * t;
                row[i] = ROW(base);
                ROTATED(cr, ci);
                weight[4 * i] = w0 * cr;
                weight[4 * i + 1] = w0 * ci;
                weight[4 * i + 2] = w1 * cr;
                weight[4 * i + 3] = w1 * ci;
            }
        } else {
            for (ptrdiff_t i = 0; i < n; ++i) {
                const double s = s_tx + sample[i];
                const int valid = (s >= 0.0) & (s <= last - 1.0);
                const double base = floor(valid ? s : 0.0);
                const float t = (float)(s - base), g = valid ? re[i] : 0.0f;
                row[i] = ROW(base);
                weight[2 * i] = g - g * t;
                weight[2 * i + 1] = g * t;
            }
        }
    } else { /* cubic (Catmull-Rom, usbeam_math.h) */
#define CUBIC_WEIGHTS                                                                                  \
    const double s = s_tx + sample[i];                                                                 \
    const int valid = (s >= 1.0) & (s <= last - 2.0);                                                  \
    const double base = floor(valid ? s : 1.0);                                                        \
    const float t = (float)(s - base), g = valid ? 0.5f : 0.0f;                                        \
    const float t2 = t * t, t3 = t2 * t;                                                               \
    const float w0 = g * (-t3 + 2.0f * t2 - t), w1 = g * (3.0f * t3 - 5.0f * t2 + 2.0f);               \
    const float w2 = g * (-3.0f * t3 + 4.0f * t2 + t), w3 = g * (t3 - t2);                             \
    row[i] = ROW(base - 1.0)
        if (is_iq) {
            for (ptrdiff_t i = 0; i < n; ++i) {
                CUBIC_WEIGHTS;
                ROTATED(cr, ci);
                weight[8 * i] = w0 * cr, weight[8 * i + 1] = w0 * ci;
                weight[8 * i + 2] = w1 * cr, weight[8 * i + 3] = w1 * ci;
                weight[8 * i + 4] = w2 * cr, weight[8 * i + 5] = w2 * ci;
                weight[8 * i + 6] = w3 * cr, weight[8 * i + 7] = w3 * ci;
            }
        } else {
            for (ptrdiff_t i = 0; i < n; ++i) {
                CUBIC_WEIGHTS;
                weight[4 * i] = w0 * re[i], weight[4 * i + 1] = w1 * re[i];
                weight[4 * i + 2] = w2 * re[i], weight[4 * i + 3] = w3 * re[i];
            }
        }
#undef CUBIC_WEIGHTS
    }
#undef ROW
#undef ROTATED
}

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
    const double s = s_tx + sample[i];                                                                 \
    const int valid = (s >= 1.0) & (s <= last - 2.0);                                                  \
    const double base = floor(valid ? s : 1.0);                                                        \
    const float t = (float)(s - base), g = valid ? 0.5f : 0.0f;                                        \
    const float t2 = t * t, t3 = t2 * t;                                                               \
    const float w0 = g * (-t3 + 2.0f * t2 - t), w1 = g * (3.0f * t3 - 5.0f * t2 + 2.0f);               \
    const float w2 = g * (-3.0f * t3 + 4.0f * t2 + t), w3 = g * (t3 - t2);                             \
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

/* The per-instruction-set copies and their dispatch. */
#define DEFINE_ISA_COPIES(SUFFIX, TARGET)                                                                  \
    TARGET static void point_receive_##SUFFIX(const usbeam_das_plan *plan, size_t p, double *sample, float *re, \
                                              float *im)                                                    \
    {                                                                                                       \
        point_receive(plan, p, sample, re, im);                                                             \
    }                                                                                                       \
    TARGET static void transmit_entries_##SUFFIX(const usbeam_das_plan *plan, size_t count, const double *sample, \
                                                 const float *re, const float *im, double s_tx, float rot_re,   \
                                                 float rot_im, ptrdiff_t row0, ptrdiff_t channel,               \
                                                 ptrdiff_t frames, ptrdiff_t *row, float *weight)               \
    {                                                                                                       \
        transmit_entries(plan, count, sample, re, im, s_tx, rot_re, rot_im, row0, channel, frames, row, weight); \
    }                                                                                                       \
    TARGET static void transmit_sum_single_##SUFFIX(const usbeam_das_plan *plan, size_t count, const double *sample, \
                                                    const float *re, const float *im, double s_tx, float rot_re, \
                                                    float rot_im, ptrdiff_t channel, const float *x_re,         \
                                                    const float *x_im, float *acc_re, float *acc_im)            \
    {                                                                                                       \
        transmit_sum_single(plan, count, sample, re, im, s_tx, rot_re, rot_im, channel, x_re, x_im, acc_re, acc_im); \
    }
#if USBEAM_DAS_MULTI_ISA
DEFINE_ISA_COPIES(avx2, TARGET_AVX2)
DEFINE_ISA_COPIES(avx512, TARGET_AVX512)
#endif

void usbeam_das_point_receive(const usbeam_das_plan *plan, size_t p, double *sample, float *re, float *im)
{
#if USBEAM_DAS_MULTI_ISA
    switch (usbeam_das_isa()) {
    case 2: point_receive_avx512(plan, p, sample, re, im); return;
    case 1: point_receive_avx2(plan, p, sample, re, im); return;
    default: break;
    }
#endif
    point_receive(plan, p, sample, re, im);
}

void usbeam_das_transmit_entries(const usbeam_das_plan *plan, size_t count, const double *sample, const float *re,
                                 const float *im, double s_tx, float rot_re, float rot_im, ptrdiff_t row0,
                                 ptrdiff_t channel, ptrdiff_t frames, ptrdiff_t *row, float *weight)
{
#if USBEAM_DAS_MULTI_ISA
    switch (usbeam_das_isa()) {
    case 2: transmit_entries_avx512(plan, count, sample, re, im, s_tx, rot_re, rot_im, row0, channel, frames, row, weight); return;
    case 1: transmit_entries_avx2(plan, count, sample, re, im, s_tx, rot_re, rot_im, row0, channel, frames, row, weight); return;
    default: break;
    }
#endif
    transmit_entries(plan, count, sample, re, im, s_tx, rot_re, rot_im, row0, channel, frames, row, weight);
}

void usbeam_das_transmit_sum_single(const usbeam_das_plan *plan, size_t count, const double *sample, const float *re,
                                    const float *im, double s_tx, float rot_re, float rot_im, ptrdiff_t channel,
                                    const float *x_re, const float *x_im, float *acc_re, float *acc_im)
{
#if USBEAM_DAS_MULTI_ISA
    switch (usbeam_das_isa()) {
    case 2: transmit_sum_single_avx512(plan, count, sample, re, im, s_tx, rot_re, rot_im, channel, x_re, x_im, acc_re, acc_im); return;
    case 1: transmit_sum_single_avx2(plan, count, sample, re, im, s_tx, rot_re, rot_im, channel, x_re, x_im, acc_re, acc_im); return;
    default: break;
    }
#endif
    transmit_sum_single(plan, count, sample, re, im, s_tx, rot_re, rot_im, channel, x_re, x_im, acc_re, acc_im);
}
