/*
 * das_delays.c - the geometry of one point for delay-and-sum, any probe (layouts in
 * das_internal.h): its transmit times (plan creation), its receive part per element of its
 * aperture, s_rx = |p - e| fs / c and c_rx = window x exp(+j 2 pi fc |p - e| / c)
 * (usbeam_das_point_receive: the receive table at plan creation, or execute without one), and
 * the entries of one transmit: s = s_tx + s_rx, the first tap's row and the interpolation
 * weights times rot_tx x c_rx (usbeam_das_transmit_entries, execute); and the whole entries
 * of a point in double for the sparse and adaptive plans (usbeam_das_point_entries).
 * The window is the linear array's (over the point's aperture along x, or over the array)
 * or, in the general geometry (convex, phased, matrix arrays: plan->general), each element's
 * acceptance cone around its normal (usbeam_element_window, usbeam_math.h).
 *
 * Units: positions m, times s; tau = tau_tx + |p - e| / c; s = (tau - t0) fs
 *        = (tau_tx - t0) fs + |p - e| fs / c, summed in double.
 * The math is that of usbeam_math.h (interpolation validity ranges, windows, transmit
 * models).  The loops here are written so the compiler vectorises them over the elements
 * of a chunk of the aperture: no calls but sqrt, branch-free selects, and sin/cos from
 * polynomials on a reduced argument (|error| < 1e-11; the receive rotation, which is stored
 * as float weights, reduces in double and evaluates in float: < 4e-7 rad, chunk_receive).
 * Reference: Perrot et al., "So you think you can DAS?", Ultrasonics 111 (2021) 106309.
 */
#include "beamform/das_internal.h"
#include "beamform/das_isa.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=fast", "no-trapping-math")
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


/* Transmit path of a virtual-source transmit: min_i (o_i + |p - s_i|) over the (3, n) rows
 * x, z, o of its sources (sorted by x), exactly in double, found fast with blocks of
 * USBEAM_DAS_SOURCE_BLOCK consecutive sources (das_internal.h, built at plan creation: each
 * block as a chord from its first source along the unit d, the sources' extent [u_lo, u_hi]
 * along it and largest distance dev from it, and a line o >= alpha + beta u under the
 * offsets).  No source of block b does better than
 *   lb_b = alpha + min over u in [u_lo, u_hi] of (beta u + sqrt((a - u)^2 + h^2)) - dev
 * (a, h: p's coordinate along the chord and distance from its line, y included), the minimum
 * of a convex function, at u = a - h beta / sqrt(1 - beta^2) clamped (at an end for
 * |beta| >= 1).  So after the block of the previous points' minimiser (`hint`: neighbouring
 * points have neighbouring minimisers) only the blocks with lb_b within the running minimum
 * are evaluated.  The same bound over groups of USBEAM_DAS_SOURCE_GROUP blocks comes first,
 * and only the blocks of groups within the running minimum are bounded one by one: on MUST's
 * 512 sources of a C5-2v diverging wave, 8 group bounds and those of the few blocks near the
 * minimiser instead of 32 (groups of 2 and 8 blocks gained less than 4).  The bounds are
 * compared with a margin (1e-12 relative + 1e-15 m) far above their rounding, so every source
 * whose value could be the least is evaluated (a group's bound is a block's over more
 * sources): the result is the minimum over all sources, bit for bit.
 * TX_LANES neighbouring points go through this in step, one point per lane: a group or block
 * is looked into when its bound passes in ANY lane, and a block's sources are then evaluated
 * in every lane.  A lane whose bound did not pass gets values above its minimum from that
 * block, which leave its minimum as it was, so each lane's result is still the minimum over
 * all sources, bit for bit: each source's path is the same double expression in every lane
 * and every copy (these functions are compiled without floating-point contraction, the pragma
 * below, so the AVX2 / AVX-512 copies round exactly as the baseline).  Neighbouring points
 * share their candidate blocks, so 8 points cost about one point's branches and bounds, and
 * the square roots run 8 points to a vector: convex plan 6.7 -> 5.9 ms against one point at a
 * time vectorised over a block's sources (in-process A/B, the same times bit for bit).  On
 * MUST's 4 n spline sources of the C5-2v diverging wave, 8 points of its polar grid take 3.2
 * blocks of sources, 8 group bounds and 7.3 block bounds; one point at a time the chord bound
 * left 1.6 blocks per point, where the blocks' bounding boxes and least offsets left 3.5
 * (convex C5-2v) to 4.4 (phased P4-2v). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
#endif
enum { TX_LANES = 8 };
typedef double tx_lanes[TX_LANES];

/* the sources lo .. hi-1 (block b) in every lane: a lane's minimum best[k] and its block
 * best_block[k] move to this block where it does better */
INLINE_BODY void source_block_min(const double *sources, int n, int lo, int hi, int b, const double *x,
                                  const double *y2, const double *z, double *best, int *best_block)
{
    const double *sx = sources, *sz = sources + n, *so = sources + 2 * n;
    tx_lanes least;
    for (int k = 0; k < TX_LANES; ++k) least[k] = INFINITY;
    for (int i = lo; i < hi; ++i) {
#if defined(_OPENMP)
#pragma omp simd
#endif
        for (int k = 0; k < TX_LANES; ++k) {
            const double dx = x[k] - sx[i], dz = z[k] - sz[i];
            const double path = so[i] + sqrt(dx * dx + y2[k] + dz * dz);
            least[k] = path < least[k] ? path : least[k];
        }
    }
    for (int k = 0; k < TX_LANES; ++k)
        if (least[k] < best[k]) best[k] = least[k], best_block[k] = b;
}

/* First index of the sorted xs[0 .. n-1] with xs[i] >= value (n if none). */
INLINE_BODY int lower_index(const double *xs, int n, double value)
{
    int lo = 0, hi = n;
    while (lo < hi) {
        const int mid = lo + (hi - lo) / 2;
        if (xs[mid] < value) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* 1 when lb_i (above) of block or group i of rows is within the running minimum, with its
 * margin, in at least one lane.  with_y: a point off the sources' plane (y != 0), a constant
 * in each loop below, so that the plane's case needs no square root for h and both vectorise
 * (selects, not fmin / fmax). */
INLINE_BODY int chord_bound_passes(const double *rows, int n_rows, int i, const double *x, const double *y2,
                                   const double *z, int with_y, const double *best)
{
#define AT(r) rows[(size_t)(r) * (size_t)n_rows + (size_t)i]
    const double x0 = AT(USBEAM_DAS_BLOCK_X0), z0 = AT(USBEAM_DAS_BLOCK_Z0), ux = AT(USBEAM_DAS_BLOCK_UX),
                 uz = AT(USBEAM_DAS_BLOCK_UZ), u_lo = AT(USBEAM_DAS_BLOCK_U_LO), u_hi = AT(USBEAM_DAS_BLOCK_U_HI),
                 beta = AT(USBEAM_DAS_BLOCK_BETA), slope = AT(USBEAM_DAS_BLOCK_K), alpha = AT(USBEAM_DAS_BLOCK_ALPHA),
                 dev = AT(USBEAM_DAS_BLOCK_DEV);
#undef AT
    const int free_u = fabs(beta) < 1.0;
    const double u_end = beta > 0.0 ? u_lo : u_hi;
    tx_lanes excess; /* lb - (running minimum + margin): <= 0 passes (exact for finite values) */
#define EXCESS_LOOP(H)                                                                                      \
    for (int k = 0; k < TX_LANES; ++k) {                                                                    \
        const double qx = x[k] - x0, qz = z[k] - z0;                                                        \
        const double a = qx * ux + qz * uz, w = qx * uz - qz * ux;                                          \
        const double h = H;                                                                                 \
        const double u_free = free_u ? a - slope * h : u_end;                                               \
        const double u = u_free < u_lo ? u_lo : (u_free > u_hi ? u_hi : u_free);                            \
        const double bound = alpha + beta * u + sqrt((a - u) * (a - u) + h * h) - dev;                     \
        excess[k] = bound - (best[k] + 1e-12 * best[k] + 1e-15);                                            \
    }
    if (with_y) EXCESS_LOOP(sqrt(w * w + y2[k]))
    else EXCESS_LOOP(fabs(w))
#undef EXCESS_LOOP
    double least = excess[0];
    for (int k = 1; k < TX_LANES; ++k) least = excess[k] < least ? excess[k] : least;
    return least <= 0.0;
}

/* best[k] = the path of point (x[k], y[k], z[k]) for every lane; *hint: the block of the
 * last lane's minimiser, for the next points */
INLINE_BODY void sources_path(const double *sources, int n, const double *blocks, int *hint, const double *x,
                              const double *y, const double *z, double *best)
{
    const int n_blocks = (n + USBEAM_DAS_SOURCE_BLOCK - 1) / USBEAM_DAS_SOURCE_BLOCK;
    const int n_groups = (n_blocks + USBEAM_DAS_SOURCE_GROUP - 1) / USBEAM_DAS_SOURCE_GROUP;
    const double *groups = blocks + (size_t)USBEAM_DAS_BLOCK_ROWS * (size_t)n_blocks;
    tx_lanes y2;
    int with_y = 0, best_block[TX_LANES];
    int start = *hint;
    if (start < 0 || start >= n_blocks) { /* no hint: the block of the sources nearest in x */
        const int k = lower_index(sources, n, x[0]);
        start = (k < n ? k : n - 1) / USBEAM_DAS_SOURCE_BLOCK;
    }
    for (int k = 0; k < TX_LANES; ++k) {
        y2[k] = y[k] * y[k];
        with_y |= y[k] != 0.0;
        best[k] = INFINITY;
        best_block[k] = start;
    }
#define BLOCK_END(b) ((b) + 1 < n_blocks ? ((b) + 1) * USBEAM_DAS_SOURCE_BLOCK : n)
    source_block_min(sources, n, start * USBEAM_DAS_SOURCE_BLOCK, BLOCK_END(start), start, x, y2, z, best, best_block);
    for (int g = 0; g < n_groups; ++g) {
        if (!chord_bound_passes(groups, n_groups, g, x, y2, z, with_y, best)) continue;
        const int b0 = g * USBEAM_DAS_SOURCE_GROUP;
        const int b1 = b0 + USBEAM_DAS_SOURCE_GROUP < n_blocks ? b0 + USBEAM_DAS_SOURCE_GROUP : n_blocks;
        for (int b = b0; b < b1; ++b) {
            if (b == start || !chord_bound_passes(blocks, n_blocks, b, x, y2, z, with_y, best)) continue;
            source_block_min(sources, n, b * USBEAM_DAS_SOURCE_BLOCK, BLOCK_END(b), b, x, y2, z, best, best_block);
        }
    }
#undef BLOCK_END
    *hint = best_block[TX_LANES - 1];
}

/* Transmit times of points p0 .. p1-1 for every transmit into tx_time (n_points, n_transmits),
 * TX_LANES points at a time (past p1 the lanes repeat the last point); hints[t] carried from
 * one set of points to the next. */
INLINE_BODY void transmit_times(const usbeam_das_plan *plan, size_t p0, size_t p1, int *hints)
{
    const size_t n_tx = plan->params.n_transmits;
    for (size_t q = p0; q < p1; q += TX_LANES) {
        tx_lanes x, y, z, path;
        for (int k = 0; k < TX_LANES; ++k) {
            const double *pt = plan->points + 3 * (q + (size_t)k < p1 ? q + (size_t)k : p1 - 1);
            x[k] = pt[0], y[k] = pt[1], z[k] = pt[2];
        }
        for (size_t t = 0; t < n_tx; ++t) {
            const usbeam_tx_model *m = &plan->tx[t];
            if (m->n_sources > 0 && m->source_rows == 3)
                sources_path(m->sources, m->n_sources, plan->tx_source_blocks + plan->tx_block_offset[t], &hints[t], x,
                             y, z, path);
            else
                for (int k = 0; k < TX_LANES; ++k) path[k] = usbeam_tx_path(m, x[k], y[k], z[k]);
            for (size_t k = 0; k < TX_LANES && q + k < p1; ++k)
                plan->tx_time[(q + k) * n_tx + t] = path[k] / plan->params.c;
        }
    }
}

#if USBEAM_DAS_MULTI_ISA
TARGET_AVX512 static void transmit_times_avx512(const usbeam_das_plan *plan, size_t p0, size_t p1, int *hints)
{
    transmit_times(plan, p0, p1, hints);
}
TARGET_AVX2 static void transmit_times_avx2(const usbeam_das_plan *plan, size_t p0, size_t p1, int *hints)
{
    transmit_times(plan, p0, p1, hints);
}
#endif

void usbeam_das_fill_transmit_times(const usbeam_das_plan *plan, size_t p0, size_t p1, int *hints)
{
    USBEAM_DAS_DISPATCH(transmit_times, plan, p0, p1, hints);
    transmit_times(plan, p0, p1, hints);
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

/* exp(+j 2 pi turns), once per (point, transmit) in execute: the x86-64 baseline has no rounding
 * instruction (rint becomes a compare-and-add sequence) nor FMA, and its two long polynomial chains
 * took ~12 ns a call, 5-9 % of a 1-frame call; the AVX2 + FMA copy (also taken on AVX-512
 * machines, so both give the same bits) uses vroundsd and fused multiply-adds. */
#if USBEAM_DAS_MULTI_ISA
TARGET_AVX2 static void rotation_fma(double turns, double *re, double *im) { sincos_turns(turns, im, re); }
#endif

void usbeam_das_rotation(double turns, double *re, double *im)
{
#if USBEAM_DAS_MULTI_ISA
    if (usbeam_das_isa() >= 1) {
        rotation_fma(turns, re, im);
        return;
    }
#endif
    sincos_turns(turns, im, re);
}

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

/* chunk_distances for the general geometry (elements with normals, surfaces): each element's
 * own acceptance cone and window, usbeam_element_window (usbeam_math.h) written branch-free
 * over the chunk so it vectorises (frames in plan->element_frame are (9, n) rows); or the
 * element's full-aperture weight (f_number = 0). */
INLINE_BODY void chunk_distances_general(const usbeam_das_plan *plan, const double *pt, int e0, int n,
                                         double *restrict d, double *restrict apod)
{
    const usbeam_das_params *prm = &plan->params;
    const size_t ne = prm->n_elements;
    const double *ex = plan->element_x + e0, *ey = plan->element_y + e0, *ez = plan->element_z + e0;
    const double *f = plan->element_frame + e0;
    const double *t1x = f, *t1y = f + ne, *t1z = f + 2 * ne, *t2x = f + 3 * ne, *t2y = f + 4 * ne, *t2z = f + 5 * ne;
    const double *nx = f + 6 * ne, *ny = f + 7 * ne, *nz = f + 8 * ne;
    const double two_f = 2.0 * prm->f_number, alpha = prm->tukey_alpha;
    const int surface = prm->surface, window = (int)prm->window;
    double u1[CHUNK], u2[CHUNK];
    /* the window's coordinates u1, u2 (a second division per element) only where it is shaped */
    const int shaped = prm->f_number > 0.0 && (window == USBEAM_DAS_HANN || (window == USBEAM_DAS_TUKEY && alpha > 0.0));
#define CONE_LOOP(SHAPED)                                                                                  \
    for (int i = 0; i < n; ++i) {                                                                         \
        const double dx = pt[0] - ex[i], dy = pt[1] - ey[i], dz = pt[2] - ez[i];                          \
        d[i] = sqrt(dx * dx + dy * dy + dz * dz);                                                         \
        const double axial = dx * nx[i] + dy * ny[i] + dz * nz[i];                                        \
        const double l1 = dx * t1x[i] + dy * t1y[i] + dz * t1z[i];                                        \
        const double l2_any = dx * t2x[i] + dy * t2y[i] + dz * t2z[i]; /* the rows exist */              \
        const double l2 = surface ? l2_any : 0.0;                                                         \
        const double half = axial / two_f;                                                                \
        const double inside = ((axial > 0.0) & (fabs(l1) <= half) & (fabs(l2) <= half)) ? 1.0 : 0.0;      \
        if (SHAPED) {                                                                                     \
            const double scale = inside * two_f / (axial > 0.0 ? axial : 1.0);                            \
            u1[i] = fabs(l1 * scale);                                                                     \
            u2[i] = fabs(l2 * scale);                                                                     \
        }                                                                                                 \
        apod[i] = inside;                                                                                 \
    }
    /* written so that GCC vectorises them: a double mask, and the division made unconditional
     * (by 1 outside the cone), as a division under a condition or an int mask kept the loop
     * scalar (measured: the receive table of a convex plan 2.05 -> 0.77 ms) */
    if (shaped) CONE_LOOP(1)
    else CONE_LOOP(0)
#undef CONE_LOOP
    if (!(prm->f_number > 0.0)) {
        for (int i = 0; i < n; ++i) apod[i] = plan->element_window[e0 + i];
        return;
    }
    if (shaped) {
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
            /* whole turns removed in double (exact), the rest in float: the weights are float */
            const double turns = d[i] * turns_per_m;
            const float f = (float)(turns - rint(turns)); /* [-1/2, 1/2], within 3e-8 turn */
            const float q = rintf(4.0f * f);
            const float r = 6.28318530717958647692f * (f - 0.25f * q), r2 = r * r; /* |r| <= pi/4 */
            const float sn = r * (1.0f + r2 * (-1.0f / 6 + r2 * (1.0f / 120 + r2 * (-1.0f / 5040 + r2 * (1.0f / 362880)))));
            const float cs = 1.0f + r2 * (-0.5f + r2 * (1.0f / 24 + r2 * (-1.0f / 720 + r2 * (1.0f / 40320 + r2 * (-1.0f / 3628800)))));
            const float a = fabsf(q), odd = a * (2.0f - a);
            const float s = odd * q * cs + (1.0f - a) * sn, c = (1.0f - a) * cs - odd * q * sn;
            const float w = (float)apod[i];
            re[i] = w * c;
            im[i] = w * s;
        }
    } else {
        for (int i = 0; i < n; ++i) re[i] = (float)apod[i];
    }
}

/* The window mapping of the linear array: u = (x_e - centre) * inv_half over the point's
 * aperture (f_number > 0) or the array (f_number = 0). */
INLINE_BODY void window_mapping(const usbeam_das_plan *plan, const double *pt, double *centre, double *inv_half)
{
    const usbeam_das_params *prm = &plan->params;
    double half_width = plan->window_half_width;
    *centre = plan->window_center;
    if (prm->f_number > 0.0) {
        *centre = pt[0];
        half_width = pt[2] / (2.0 * prm->f_number);
    }
    *inv_half = half_width > 0.0 ? 1.0 / half_width : 0.0;
}

/* The per-(point, element) math, the one definition every path uses: distances d (m) and
 * window weights of elements e0 .. e0+n-1, linear array or general geometry. */
INLINE_BODY void chunk_geometry(const usbeam_das_plan *plan, const double *pt, int e0, int n, double centre,
                                double inv_half, double *restrict d, double *restrict apod)
{
    if (plan->general) chunk_distances_general(plan, pt, e0, n, d, apod);
    else chunk_distances(plan, pt, e0, n, centre, inv_half, d, apod);
}

INLINE_BODY void point_receive(const usbeam_das_plan *plan, size_t p, double *sample, float *re, float *im)
{
    const double *pt = plan->points + 3 * p;
    const int first = plan->aperture_first[p], count = plan->aperture_count[p];
    double centre, inv_half;
    window_mapping(plan, pt, &centre, &inv_half);
    double d[CHUNK], apod[CHUNK], s[CHUNK];
    float r[CHUNK], m[CHUNK];
    const int n_elements = (int)plan->params.n_elements;
    for (int e0 = first; e0 < first + count; e0 += CHUNK) {
        const int n = first + count - e0 < CHUNK ? first + count - e0 : CHUNK;
        const int i0 = e0 - first;
        /* The chunk widened to whole vectors of 8 with the elements after it (or before it at
         * the array's end), whose values are computed and dropped: the vector loops then run
         * without their scalar remainder (up to 7 elements a point, each a scalar square root
         * and sine/cosine in double).  The same math per element. */
        const int n_pad = (n + 7) / 8 * 8;
        const int start = e0 + n_pad <= n_elements ? e0 : n_elements - n_pad;
        if (n_pad == n || start < 0) {
            chunk_geometry(plan, pt, e0, n, centre, inv_half, d, apod);
            chunk_receive(plan, n, d, apod, sample + i0, re + i0, plan->is_iq ? im + i0 : NULL);
            continue;
        }
        chunk_geometry(plan, pt, start, n_pad, centre, inv_half, d, apod);
        chunk_receive(plan, n_pad, d, apod, s, r, m);
        const int skip = e0 - start;
        memcpy(sample + i0, s + skip, (size_t)n * sizeof *s);
        memcpy(re + i0, r + skip, (size_t)n * sizeof *r);
        if (plan->is_iq) memcpy(im + i0, m + skip, (size_t)n * sizeof *m);
    }
}

/* s_rx (as point_receive) and the window weight of each element of point p's aperture, the
 * weight rounded to float: the lane table's (das_lanes.c), which forms the rotation itself. */
INLINE_BODY void point_geometry(const usbeam_das_plan *plan, size_t p, double *sample, float *window)
{
    const double *pt = plan->points + 3 * p;
    const int first = plan->aperture_first[p], count = plan->aperture_count[p];
    const double samples_per_m = plan->params.fs / plan->params.c;
    double centre, inv_half, d[CHUNK], apod[CHUNK];
    window_mapping(plan, pt, &centre, &inv_half);
    for (int e0 = first; e0 < first + count; e0 += CHUNK) {
        const int n = first + count - e0 < CHUNK ? first + count - e0 : CHUNK, i0 = e0 - first;
        chunk_geometry(plan, pt, e0, n, centre, inv_half, d, apod);
        for (int i = 0; i < n; ++i) {
            sample[i0 + i] = d[i] * samples_per_m;
            window[i0 + i] = (float)apod[i];
        }
    }
}

/* Interpolation taps and weights (times apod) of n delays s (samples), in double; w is
 * (taps, n).  The validity ranges and Catmull-Rom weights of usbeam_math.h. */
INLINE_BODY void chunk_weights(const usbeam_das_plan *plan, const double *restrict sample, const double *restrict apod,
                               int n, int32_t *restrict first_tap, double *restrict w)
{
    const usbeam_das_params *prm = &plan->params;
    const double last = (double)prm->n_samples - 1.0;
    switch ((int)prm->interpolation) {
    case USBEAM_INTERP_NEAREST:
        for (int i = 0; i < n; ++i) {
            const double s = sample[i];
            const int valid = (s >= 0.0) & (s <= last);
            first_tap[i] = valid ? (int32_t)rint(s) : 0; /* ties to even */
            w[i] = valid ? apod[i] : 0.0;
        }
        break;
    case USBEAM_INTERP_LINEAR:
        for (int i = 0; i < n; ++i) {
            const double s = sample[i];
            const int valid = (s >= 0.0) & (s <= last - 1.0);
            const double base = floor(valid ? s : 0.0), t = s - base;
            first_tap[i] = (int32_t)base;
            w[i] = valid ? (1.0 - t) * apod[i] : 0.0;
            w[n + i] = valid ? t * apod[i] : 0.0;
        }
        break;
    default: /* cubic (Catmull-Rom) */
        for (int i = 0; i < n; ++i) {
            const double s = sample[i];
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

/* Whole entries of point p (das_internal.h), for the sparse and adaptive plans at their plan
 * time: the receive part of chunk_geometry and the transmit times, all in double (s = s_tx +
 * s_rx as execute sums it, the rotation exp(+j 2 pi fc tau_tx) exp(+j 2 pi fc |p - e| / c)),
 * each weight rounded once to float32, as the former full table was. */
INLINE_BODY void point_entries(const usbeam_das_plan *plan, size_t p, int32_t *tap, float *weight)
{
    const usbeam_das_params *prm = &plan->params;
    const double *pt = plan->points + 3 * p;
    const int first = plan->aperture_first[p], count = plan->aperture_count[p];
    const int taps = plan->taps, stride = plan->weight_stride;
    const double samples_per_m = prm->fs / prm->c, turns_per_m = prm->fc / prm->c;
    double centre, inv_half;
    window_mapping(plan, pt, &centre, &inv_half);
    double d[CHUNK], apod[CHUNK], s[CHUNK], w[USBEAM_INTERP_MAX_TAPS * CHUNK], rx_re[CHUNK], rx_im[CHUNK];
    int32_t first_tap[CHUNK];
    for (int e0 = first; e0 < first + count; e0 += CHUNK) {
        const int n = first + count - e0 < CHUNK ? first + count - e0 : CHUNK;
        const int i0 = e0 - first;
        chunk_geometry(plan, pt, e0, n, centre, inv_half, d, apod);
        if (plan->is_iq)
            for (int i = 0; i < n; ++i) sincos_turns(d[i] * turns_per_m, &rx_im[i], &rx_re[i]);
        for (size_t t = 0; t < prm->n_transmits; ++t) {
            const double tx_time = plan->tx_time[p * prm->n_transmits + t];
            const double s_tx = (tx_time - prm->t0) * prm->fs;
            for (int i = 0; i < n; ++i) s[i] = s_tx + d[i] * samples_per_m;
            chunk_weights(plan, s, apod, n, first_tap, w);
            double tx_re = 1.0, tx_im = 0.0;
            if (plan->is_iq) sincos_turns(prm->fc * tx_time, &tx_im, &tx_re);
            for (int i = 0; i < n; ++i) {
                const size_t j = t * (size_t)count + (size_t)(i0 + i);
                float *wj = weight + j * (size_t)stride;
                tap[j] = first_tap[i];
                if (plan->is_iq) {
                    const double cr = tx_re * rx_re[i] - tx_im * rx_im[i], ci = tx_re * rx_im[i] + tx_im * rx_re[i];
                    for (int k = 0; k < taps; ++k) {
                        wj[2 * k] = (float)(w[k * n + i] * cr);
                        wj[2 * k + 1] = (float)(w[k * n + i] * ci);
                    }
                } else {
                    for (int k = 0; k < taps; ++k) wj[k] = (float)w[k * n + i];
                }
            }
        }
    }
}

/* The entries of one transmit.  s = s_tx + s_rx in double (its fraction needs more than
 * float's 24 bits); the interpolation weights of the fraction, the transmit rotation times
 * c_rx and their product in float32.  One loop per kind, branch-free, so each vectorises
 * over the elements. */
/* out[4 j + k] = plane[k][j] for 8 entries j: four planes of 8 floats into one row of 32,
 * by two rounds of two-input shuffles (GCC / Clang vector extensions). */
typedef float weights8 __attribute__((vector_size(32)));
INLINE_BODY void interleave4x8(const float plane[4][8], float *out)
{
    weights8 a, b, c, d;
    memcpy(&a, plane[0], sizeof a);
    memcpy(&b, plane[1], sizeof b);
    memcpy(&c, plane[2], sizeof c);
    memcpy(&d, plane[3], sizeof d);
    const weights8 ab_lo = __builtin_shufflevector(a, b, 0, 8, 1, 9, 2, 10, 3, 11);
    const weights8 ab_hi = __builtin_shufflevector(a, b, 4, 12, 5, 13, 6, 14, 7, 15);
    const weights8 cd_lo = __builtin_shufflevector(c, d, 0, 8, 1, 9, 2, 10, 3, 11);
    const weights8 cd_hi = __builtin_shufflevector(c, d, 4, 12, 5, 13, 6, 14, 7, 15);
    const weights8 o0 = __builtin_shufflevector(ab_lo, cd_lo, 0, 1, 8, 9, 2, 3, 10, 11);
    const weights8 o1 = __builtin_shufflevector(ab_lo, cd_lo, 4, 5, 12, 13, 6, 7, 14, 15);
    const weights8 o2 = __builtin_shufflevector(ab_hi, cd_hi, 0, 1, 8, 9, 2, 3, 10, 11);
    const weights8 o3 = __builtin_shufflevector(ab_hi, cd_hi, 4, 5, 12, 13, 6, 7, 14, 15);
    memcpy(out, &o0, sizeof o0);
    memcpy(out + 8, &o1, sizeof o1);
    memcpy(out + 16, &o2, sizeof o2);
    memcpy(out + 24, &o3, sizeof o3);
}

INLINE_BODY void transmit_entries(const usbeam_das_plan *plan, size_t count, const double *restrict sample,
                                               const float *restrict re, const float *restrict im, double s_tx,
                                               float rot_re, float rot_im, ptrdiff_t row0, ptrdiff_t channel,
                                               ptrdiff_t frames, size_t ring, ptrdiff_t *restrict row,
                                               float *restrict weight)
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
     * plan bounds n_samples by INT32_MAX / 2), which converts from double in vectors.  A tap run
     * in range starts at row base, or base % ring in a ring (das.c; base * (1 / ring) can round
     * up to an integer only at a multiple of ring, whose row ring repeats row 0); out of range,
     * at row 0, or the ring's zero rows.  Without a ring both are the identity. */
    const double wrap = ring ? (double)ring : 0.0, inv_wrap = ring ? 1.0 / (double)ring : 0.0;
    const double off_row = ring ? (double)(ring + USBEAM_DAS_RING_REPEATS) : 0.0;
#define SLOT(base, valid) ((valid) ? (base) - wrap * floor((base) * inv_wrap) : off_row)
#define ROW(slot) (row0 + i * channel + (ptrdiff_t)(int32_t)(slot) * frames)
#define ROTATED(RE, IM) const float RE = rot_re * re[i] - rot_im * im[i], IM = rot_re * im[i] + rot_im * re[i]
    if (kind == USBEAM_INTERP_NEAREST) {
        if (is_iq) {
            for (ptrdiff_t i = 0; i < n; ++i) {
                const double s = s_tx + sample[i];
                const int valid = (s >= 0.0) & (s <= last);
                const float g = valid ? 1.0f : 0.0f;
                row[i] = ROW(SLOT(rint(s), valid)); /* ties to even */
                ROTATED(cr, ci);
                weight[2 * i] = g * cr;
                weight[2 * i + 1] = g * ci;
            }
        } else {
            for (ptrdiff_t i = 0; i < n; ++i) {
                const double s = s_tx + sample[i];
                const int valid = (s >= 0.0) & (s <= last);
                row[i] = ROW(SLOT(rint(s), valid));
                weight[i] = valid ? re[i] : 0.0f;
            }
        }
    } else if (kind == USBEAM_INTERP_LINEAR) {
        if (is_iq) {
            /* blocks of 8 entries: the four weights of each formed in planes (vectorised) and
             * interleaved in registers (GCC stored the interleaved group one float at a time) */
            ptrdiff_t i = 0;
            for (; i + 8 <= n; i += 8) {
                float plane[4][8];
                for (int j = 0; j < 8; ++j) {
                    const double s = s_tx + sample[i + j];
                    const int valid = (s >= 0.0) & (s <= last - 1.0);
                    const double base = floor(valid ? s : 0.0);
                    const float t = (float)(s - base), g = valid ? 1.0f : 0.0f;
                    const float w0 = g - g * t, w1 = g * t;
                    row[i + j] = row0 + (i + j) * channel + (ptrdiff_t)(int32_t)SLOT(base, valid) * frames;
                    const float cr = rot_re * re[i + j] - rot_im * im[i + j], ci = rot_re * im[i + j] + rot_im * re[i + j];
                    plane[0][j] = w0 * cr;
                    plane[1][j] = w0 * ci;
                    plane[2][j] = w1 * cr;
                    plane[3][j] = w1 * ci;
                }
                interleave4x8(plane, weight + 4 * i);
            }
            for (; i < n; ++i) {
                const double s = s_tx + sample[i];
                const int valid = (s >= 0.0) & (s <= last - 1.0);
                const double base = floor(valid ? s : 0.0);
                const float t = (float)(s - base), g = valid ? 1.0f : 0.0f;
                const float w0 = g - g * t, w1 = g * t;
                row[i] = ROW(SLOT(base, valid));
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
                row[i] = ROW(SLOT(base, valid));
                weight[2 * i] = g - g * t;
                weight[2 * i + 1] = g * t;
            }
        }
    } else { /* cubic (Catmull-Rom, usbeam_math.h) */
#define CUBIC_WEIGHTS                                                                                  \
    USBEAM_DAS_CUBIC_ENTRY(s_tx, sample[i], last);                                                     \
    row[i] = ROW(SLOT(base - 1.0, valid))
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
#undef SLOT
#undef ROW
#undef ROTATED
}

/* For a tile of execute's points [p0, p1) (USBEAM_DAS_POINT_TILE, in order), the samples of a
 * channel its in-range taps read, bounds[0] to bounds[1] (exclusive): from floor of the least
 * s = s_tx + s_rx over its entries less one (cubic's first tap) to floor of the largest plus
 * 2 (cubic's last), each bounded by the extreme transmit part plus the extreme receive part,
 * with one sample of margin either side.  (Taps out of range read rows that do not depend on
 * s: das_delays.c.)  Execute stages the input in windows of samples just ahead of the tiles
 * that read them, round a ring that stays in cache (das.c).  At plan creation, per tile, with
 * its points' receive parts just computed: s_rx of point p from s_rx_tile +
 * receive_offset[p] - receive_offset[p0] on (the table's rows, or a plan without the table's
 * scratch). */
INLINE_BODY void tile_sample_bounds(const usbeam_das_plan *plan, size_t p0, size_t p1, const double *s_rx_tile,
                                    int32_t *bounds)
{
    const usbeam_das_params *prm = &plan->params;
    const size_t n_tx = prm->n_transmits;
    const double n_samples = (double)prm->n_samples;
    /* eight lanes of running extremes over the whole tile, reduced once at its end (a reduction
     * per point cost a third of the receive table's time); a point's last block of eight
     * overlaps its previous one, which leaves extremes unchanged */
    double lo[8], hi[8];
    for (int j = 0; j < 8; ++j) lo[j] = n_samples, hi[j] = 0.0;
    for (size_t p = p0; p < p1; ++p) {
        const size_t count = (size_t)plan->aperture_count[p];
        if (count == 0) continue;
        const double *s_rx = s_rx_tile + (plan->receive_offset[p] - plan->receive_offset[p0]), *tx = plan->tx_time + p * n_tx;
        double tx_lo = tx[0], tx_hi = tx[0];
        for (size_t t = 1; t < n_tx; ++t) {
            tx_lo = tx[t] < tx_lo ? tx[t] : tx_lo;
            tx_hi = tx[t] > tx_hi ? tx[t] : tx_hi;
        }
        const double s_lo = (tx_lo - prm->t0) * prm->fs, s_hi = (tx_hi - prm->t0) * prm->fs; /* as execute's s_tx */
        if (count < 8) {
            for (size_t i = 0; i < count; ++i) {
                lo[0] = s_lo + s_rx[i] < lo[0] ? s_lo + s_rx[i] : lo[0];
                hi[0] = s_hi + s_rx[i] > hi[0] ? s_hi + s_rx[i] : hi[0];
            }
            continue;
        }
        /* the point's own extremes of s_rx first, s_tx added once: rounding is monotone, so
         * s_lo + (least s_rx) is the least s_lo + s_rx (half the operations in the element
         * loop, no chain through the tile's, and vector selects: the bounds took 0.44 ms of a
         * 3.48 ms phased P4-2v plan, now 0.12 ms, in-process A/B) */
        double least_rx[8], most_rx[8];
        for (int j = 0; j < 8; ++j) least_rx[j] = most_rx[j] = s_rx[j];
        for (size_t i0 = 8; i0 < count; i0 += 8) {
            const double *s = s_rx + (i0 + 8 <= count ? i0 : count - 8);
#if defined(_OPENMP)
#pragma omp simd /* GCC keeps the selects scalar otherwise */
#endif
            for (int j = 0; j < 8; ++j) {
                least_rx[j] = s[j] < least_rx[j] ? s[j] : least_rx[j];
                most_rx[j] = s[j] > most_rx[j] ? s[j] : most_rx[j];
            }
        }
#if defined(_OPENMP)
#pragma omp simd
#endif
        for (int j = 0; j < 8; ++j) {
            lo[j] = s_lo + least_rx[j] < lo[j] ? s_lo + least_rx[j] : lo[j];
            hi[j] = s_hi + most_rx[j] > hi[j] ? s_hi + most_rx[j] : hi[j];
        }
    }
    double least = lo[0], last = hi[0];
    for (int j = 1; j < 8; ++j) {
        least = lo[j] < least ? lo[j] : least;
        last = hi[j] > last ? hi[j] : last;
    }
    const double first = floor(least) - 2.0, end = floor(last) + 4.0;
    bounds[0] = (int32_t)(first > 0.0 ? (first < n_samples ? first : n_samples) : 0.0);
    bounds[1] = (int32_t)(end < n_samples ? end : n_samples);
}

/* exp(+j 2 pi fc tau_tx) of point p's transmits t0 .. t0 + n - 1, a loop the compiler
 * vectorises (usbeam_das_rotation's math, one transmit per lane) */
INLINE_BODY void transmit_rotations(const usbeam_das_plan *plan, size_t p, size_t t0, size_t n, double *restrict re,
                                    double *restrict im)
{
    const double fc = plan->params.fc, *tx_time = plan->tx_time + p * plan->params.n_transmits + t0;
    for (size_t k = 0; k < n; ++k) sincos_turns(fc * tx_time[k], &im[k], &re[k]);
}

/* The per-instruction-set copies and their dispatch. */
#define DEFINE_ISA_COPIES(SUFFIX, TARGET)                                                                  \
    TARGET static void transmit_rotations_##SUFFIX(const usbeam_das_plan *plan, size_t p, size_t t0, size_t n,     \
                                                   double *re, double *im)                                      \
    {                                                                                                       \
        transmit_rotations(plan, p, t0, n, re, im);                                                         \
    }                                                                                                       \
    TARGET static void point_receive_##SUFFIX(const usbeam_das_plan *plan, size_t p, double *sample, float *re, \
                                              float *im)                                                    \
    {                                                                                                       \
        point_receive(plan, p, sample, re, im);                                                             \
    }                                                                                                       \
    TARGET static void point_geometry_##SUFFIX(const usbeam_das_plan *plan, size_t p, double *sample, float *window) \
    {                                                                                                       \
        point_geometry(plan, p, sample, window);                                                            \
    }                                                                                                       \
    TARGET static void point_entries_##SUFFIX(const usbeam_das_plan *plan, size_t p, int32_t *tap, float *weight) \
    {                                                                                                       \
        point_entries(plan, p, tap, weight);                                                                \
    }                                                                                                       \
    TARGET static void transmit_entries_##SUFFIX(const usbeam_das_plan *plan, size_t count, const double *sample, \
                                                 const float *re, const float *im, double s_tx, float rot_re,   \
                                                 float rot_im, ptrdiff_t row0, ptrdiff_t channel,               \
                                                 ptrdiff_t frames, size_t ring, ptrdiff_t *row, float *weight)  \
    {                                                                                                       \
        transmit_entries(plan, count, sample, re, im, s_tx, rot_re, rot_im, row0, channel, frames, ring, row, weight); \
    }                                                                                                       \
    TARGET static void tile_sample_bounds_##SUFFIX(const usbeam_das_plan *plan, size_t p0, size_t p1,            \
                                                   const double *s_rx_tile, int32_t *bounds)                    \
    {                                                                                                       \
        tile_sample_bounds(plan, p0, p1, s_rx_tile, bounds);                                                \
    }
#if USBEAM_DAS_MULTI_ISA
DEFINE_ISA_COPIES(avx2, TARGET_AVX2)
DEFINE_ISA_COPIES(avx512, TARGET_AVX512)
#endif

void usbeam_das_point_receive(const usbeam_das_plan *plan, size_t p, double *sample, float *re, float *im)
{
    USBEAM_DAS_DISPATCH(point_receive, plan, p, sample, re, im);
    point_receive(plan, p, sample, re, im);
}

void usbeam_das_window_mapping(const usbeam_das_plan *plan, const double *pt, double *centre, double *inv_half)
{
    window_mapping(plan, pt, centre, inv_half);
}

void usbeam_das_point_geometry(const usbeam_das_plan *plan, size_t p, double *sample, float *window)
{
    USBEAM_DAS_DISPATCH(point_geometry, plan, p, sample, window);
    point_geometry(plan, p, sample, window);
}

void usbeam_das_tile_sample_bounds(const usbeam_das_plan *plan, size_t p0, size_t p1, const double *s_rx_tile,
                                   int32_t *bounds)
{
    USBEAM_DAS_DISPATCH(tile_sample_bounds, plan, p0, p1, s_rx_tile, bounds);
    tile_sample_bounds(plan, p0, p1, s_rx_tile, bounds);
}

void usbeam_das_point_entries(const usbeam_das_plan *plan, size_t p, int32_t *tap, float *weight)
{
    USBEAM_DAS_DISPATCH(point_entries, plan, p, tap, weight);
    point_entries(plan, p, tap, weight);
}

#if USBEAM_DAS_MULTI_ISA
/* transmit_entries' linear IQ loop on AVX-512, 16 entries at a time in 512-bit vectors, the
 * last block of fewer by masked loads and stores.  GCC compiled that loop in 256-bit vectors
 * with a 64-bit multiply a row, and a point's blocks of ~47 entries left a tail of up to 15 to
 * its scalar loop (a third of the time in transmit_entries); here each row is the double
 * product of the first tap (or its slot round a ring: SLOT's expressions) and the row length,
 * converted.  The same expressions (s in double, its floor, the fraction and the rotation in
 * float), so the same entries up to the sign of a zero weight: large-256 95.2 -> 90.2 ms, the
 * same image bits (one process per build, 3 x 12 calls).
 * With soa (usbeam_das_weights_soa: rows of 8 frames) each 16 entries' four weights go out as
 * four runs of 16, as the vectors hold them, where the interleaved layout took a 4 x 4
 * transpose (16 shuffles a vector); das.c's iq_pair8_soa_2 reads them there.  large-256 79.6
 * -> 74.6 and 77.7 -> 73.2 ms (the two orders), 3 plane waves of 8 frames round a ring 31.9 ->
 * 30.0 ms, 5 of 8 frames 36.6 -> 33.7 ms; the same bits (RESULTS.md, session 31). */
#define ROUND_DOWN_NO_EXC (_MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC)
TARGET_AVX512 static void linear_iq_entries_avx512(size_t count, const double *restrict sample, const float *restrict re,
                                                     const float *restrict im, double s_tx, double last, float rot_re,
                                                     float rot_im, ptrdiff_t row0, ptrdiff_t channel, ptrdiff_t frames,
                                                     size_t ring, int soa, ptrdiff_t *restrict row, float *restrict weight)
{
    const __m512d v_tx = _mm512_set1_pd(s_tx), zero = _mm512_setzero_pd(), top = _mm512_set1_pd(last - 1.0);
    const __m512d v_frames = _mm512_set1_pd((double)frames);
    /* transmit_entries' SLOT: round a ring, base % ring, or the ring's zero rows out of range */
    const __m512d wrap = _mm512_set1_pd((double)ring), inv_wrap = _mm512_set1_pd(ring ? 1.0 / (double)ring : 0.0);
    const __m512d off_row = _mm512_set1_pd((double)(ring + USBEAM_DAS_RING_REPEATS));
    const __m512 one = _mm512_set1_ps(1.0f), v_rot_re = _mm512_set1_ps(rot_re), v_rot_im = _mm512_set1_ps(rot_im);
    const __m512i lanes = _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7);
    __m512i first_lo = _mm512_add_epi64(_mm512_set1_epi64(row0), _mm512_mullo_epi64(lanes, _mm512_set1_epi64(channel)));
    __m512i first_hi = _mm512_add_epi64(first_lo, _mm512_set1_epi64(8 * channel));
    const __m512i step = _mm512_set1_epi64(16 * channel);
    /* the masks of the weights' four stores: entries 4k .. 4k + 3, four floats each */
    static const uint16_t nibbles[16] = {0x0000, 0x000f, 0x00f0, 0x00ff, 0x0f00, 0x0f0f, 0x0ff0, 0x0fff,
                                         0xf000, 0xf00f, 0xf0f0, 0xf0ff, 0xff00, 0xff0f, 0xfff0, 0xffff};
    for (size_t i = 0; i < count; i += 16) {
        const __mmask16 in = count - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (count - i)) - 1u);
        const __mmask8 in_lo = (__mmask8)in, in_hi = (__mmask8)(in >> 8);
        const __m512d s_lo = _mm512_add_pd(v_tx, _mm512_maskz_loadu_pd(in_lo, sample + i));
        const __m512d s_hi = _mm512_add_pd(v_tx, _mm512_maskz_loadu_pd(in_hi, sample + i + 8));
        const __mmask8 valid_lo = _mm512_mask_cmp_pd_mask(_mm512_cmp_pd_mask(s_lo, zero, _CMP_GE_OQ), s_lo, top, _CMP_LE_OQ);
        const __mmask8 valid_hi = _mm512_mask_cmp_pd_mask(_mm512_cmp_pd_mask(s_hi, zero, _CMP_GE_OQ), s_hi, top, _CMP_LE_OQ);
        const __m512d base_lo = _mm512_maskz_roundscale_pd(valid_lo, s_lo, ROUND_DOWN_NO_EXC); /* 0 outside */
        const __m512d base_hi = _mm512_maskz_roundscale_pd(valid_hi, s_hi, ROUND_DOWN_NO_EXC);
        __m512d slot_lo = base_lo, slot_hi = base_hi;
        if (ring) {
            const __m512d laps_lo = _mm512_roundscale_pd(_mm512_mul_pd(base_lo, inv_wrap), ROUND_DOWN_NO_EXC);
            const __m512d laps_hi = _mm512_roundscale_pd(_mm512_mul_pd(base_hi, inv_wrap), ROUND_DOWN_NO_EXC);
            slot_lo = _mm512_mask_blend_pd(valid_lo, off_row, _mm512_fnmadd_pd(wrap, laps_lo, base_lo));
            slot_hi = _mm512_mask_blend_pd(valid_hi, off_row, _mm512_fnmadd_pd(wrap, laps_hi, base_hi));
        }
        const __m512i rows_lo = _mm512_cvtpd_epi64(_mm512_mul_pd(slot_lo, v_frames));
        const __m512i rows_hi = _mm512_cvtpd_epi64(_mm512_mul_pd(slot_hi, v_frames));
        _mm512_mask_storeu_epi64(row + i, in_lo, _mm512_add_epi64(first_lo, rows_lo));
        _mm512_mask_storeu_epi64(row + i + 8, in_hi, _mm512_add_epi64(first_hi, rows_hi));
        first_lo = _mm512_add_epi64(first_lo, step);
        first_hi = _mm512_add_epi64(first_hi, step);
        const __mmask16 valid = (__mmask16)(valid_lo | (unsigned)valid_hi << 8);
        const __m512 t = _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(_mm512_sub_pd(s_lo, base_lo))),
                                            _mm512_cvtpd_ps(_mm512_sub_pd(s_hi, base_hi)), 1);
        const __m512 w0 = _mm512_maskz_sub_ps(valid, one, t), w1 = _mm512_maskz_mov_ps(valid, t);
        const __m512 x_re = _mm512_maskz_loadu_ps(in, re + i), x_im = _mm512_maskz_loadu_ps(in, im + i);
        const __m512 c_re = _mm512_fmsub_ps(v_rot_re, x_re, _mm512_mul_ps(v_rot_im, x_im));
        const __m512 c_im = _mm512_fmadd_ps(v_rot_re, x_im, _mm512_mul_ps(v_rot_im, x_re));
        const __m512 p0 = _mm512_mul_ps(w0, c_re), p1 = _mm512_mul_ps(w0, c_im);
        const __m512 p2 = _mm512_mul_ps(w1, c_re), p3 = _mm512_mul_ps(w1, c_im);
        float *out = weight + 4 * i;
        if (soa) { /* the group's four weights as four runs of 16 (usbeam_das_weights_soa) */
            _mm512_mask_storeu_ps(out, in, p0);
            _mm512_mask_storeu_ps(out + 16, in, p1);
            _mm512_mask_storeu_ps(out + 32, in, p2);
            _mm512_mask_storeu_ps(out + 48, in, p3);
            continue;
        }
        /* weight[4 j + k] = p_k[j]: pairs within 128-bit blocks, then a 4 x 4 transpose of the blocks */
        const __m512 a = _mm512_unpacklo_ps(p0, p1), b = _mm512_unpackhi_ps(p0, p1);
        const __m512 c = _mm512_unpacklo_ps(p2, p3), d = _mm512_unpackhi_ps(p2, p3);
        const __m512 e0 = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(a), _mm512_castps_pd(c))); /* block b: entry 4b */
        const __m512 e1 = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(a), _mm512_castps_pd(c))); /* 4b + 1 */
        const __m512 e2 = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(b), _mm512_castps_pd(d))); /* 4b + 2 */
        const __m512 e3 = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(b), _mm512_castps_pd(d))); /* 4b + 3 */
        const __m512 f0 = _mm512_shuffle_f32x4(e0, e1, _MM_SHUFFLE(1, 0, 1, 0)), f1 = _mm512_shuffle_f32x4(e2, e3, _MM_SHUFFLE(1, 0, 1, 0));
        const __m512 g0 = _mm512_shuffle_f32x4(e0, e1, _MM_SHUFFLE(3, 2, 3, 2)), g1 = _mm512_shuffle_f32x4(e2, e3, _MM_SHUFFLE(3, 2, 3, 2));
        _mm512_mask_storeu_ps(out, nibbles[in & 15], _mm512_shuffle_f32x4(f0, f1, _MM_SHUFFLE(2, 0, 2, 0)));
        _mm512_mask_storeu_ps(out + 16, nibbles[in >> 4 & 15], _mm512_shuffle_f32x4(f0, f1, _MM_SHUFFLE(3, 1, 3, 1)));
        _mm512_mask_storeu_ps(out + 32, nibbles[in >> 8 & 15], _mm512_shuffle_f32x4(g0, g1, _MM_SHUFFLE(2, 0, 2, 0)));
        _mm512_mask_storeu_ps(out + 48, nibbles[in >> 12], _mm512_shuffle_f32x4(g0, g1, _MM_SHUFFLE(3, 1, 3, 1)));
    }
}
#undef ROUND_DOWN_NO_EXC
#endif

void usbeam_das_transmit_rotations(const usbeam_das_plan *plan, size_t p, size_t t0, size_t n, double *re, double *im)
{
    USBEAM_DAS_DISPATCH(transmit_rotations, plan, p, t0, n, re, im);
    transmit_rotations(plan, p, t0, n, re, im);
}

int usbeam_das_weights_soa(const usbeam_das_plan *plan, size_t row_floats)
{
#if USBEAM_DAS_MULTI_ISA
    return plan->params.interpolation == USBEAM_INTERP_LINEAR && usbeam_das_iq_rows_of_8(plan->is_iq, row_floats) &&
           plan->taps == usbeam_interp_taps(USBEAM_INTERP_LINEAR) && usbeam_das_isa() == 2;
#else
    (void)plan, (void)row_floats;
    return 0;
#endif
}

void usbeam_das_transmit_entries(const usbeam_das_plan *plan, size_t count, const double *sample, const float *re,
                                 const float *im, double s_tx, float rot_re, float rot_im, ptrdiff_t row0,
                                 ptrdiff_t channel, ptrdiff_t frames, size_t ring, int weights_soa, ptrdiff_t *row,
                                 float *weight)
{
#if USBEAM_DAS_MULTI_ISA
    if (plan->params.interpolation == USBEAM_INTERP_LINEAR && plan->is_iq &&
        plan->taps == usbeam_interp_taps(USBEAM_INTERP_LINEAR) && usbeam_das_isa() == 2) {
        linear_iq_entries_avx512(count, sample, re, im, s_tx, (double)plan->params.n_samples - 1.0, rot_re, rot_im, row0,
                                 channel, frames, ring, weights_soa, row, weight);
        return;
    }
#else
    (void)weights_soa;
#endif
    USBEAM_DAS_DISPATCH(transmit_entries, plan, count, sample, re, im, s_tx, rot_re, rot_im, row0, channel, frames, ring,
                        row, weight);
    transmit_entries(plan, count, sample, re, im, s_tx, rot_re, rot_im, row0, channel, frames, ring, row, weight);
}
