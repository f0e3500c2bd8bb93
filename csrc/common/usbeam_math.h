/*
 * usbeam_math.h - per-sample math shared by the C kernels (csrc/) and the CUDA kernels
 * (cuda/): fractional-index interpolation, apodization windows, times of flight and the
 * IQ phase rotation.  Header-only: every function is `static inline USBEAM_HD`, so nvcc
 * compiles it for host and device; it uses nothing beyond <math.h>.
 *
 * Index convention: a sample sequence x[0 .. n-1] holds x(t0 + k/fs); the fractional
 * index of time t is s = (t - t0) * fs.  Interpolation never reads outside [0, n-1]:
 * each routine says whether s is inside its valid range and, when it is not, returns 0
 * and zero weights (the caller skips the sample; this is MUST's convention).
 *
 * Valid ranges (n = number of samples):
 *   nearest  0 <= s <= n-1          tap round(s), ties to even (numpy.round, MUST)
 *   linear   0 <= s <= n-2          taps floor(s), floor(s)+1 (MUST dasmtx)
 *   cubic    1 <= s <= n-3          taps floor(s)-1 .. floor(s)+2, all four inside
 *            (Catmull-Rom cubic Hermite, Keys a = -1/2; exact for quadratics).
 *
 * Tap weights are exposed (usbeam_interp_weights_*) so a kernel can fold apodization and
 * phase into them once per (point, element) and reuse them across frames.
 *
 * Geometry (SI units): x along the array (x = 0 at its centre), y elevation, z depth > 0.
 * Transmit models follow MUST txdelay with t = 0 when the first element fires; a model
 * gives the transmit PATH length (m), tau_tx = path / c:
 *   plane wave, angle a:      (x - x_first) sin a + z cos a, x_first the first-firing
 *                             element (x_min for a > 0, x_max for a < 0, either for a = 0)
 *   diverging, source v:      |p - v| - min_e |e - v|           (v behind the array)
 *   focused, focus f:         max_e |e - f| + sign(z - f_z) |p - f|   (virtual source)
 *   synthetic aperture, e_k:  |p - e_k|
 *   virtual sources s_i:      min_i (o_i + |p - s_i|)   (MUST dasmtx's model of an
 *                             arbitrary delay law, o_i = c * delay_i)
 * with element positions e in 3-D for convex and matrix arrays (the *3 builders), a plane
 * wave then (p - e_first) . d, e_first the element of least e . d, and a focused wave's side
 * sign((p - f) . axis) along a steered beam axis.
 * References: MUST/PyMUST txdelay and dasmtx (D. Garcia); Perrot et al., "So you think you
 * can DAS?", Ultrasonics 111 (2021) 106309; Keys, "Cubic convolution interpolation",
 * IEEE TASSP 29 (1981).
 */
#ifndef USBEAM_MATH_H
#define USBEAM_MATH_H

#include <math.h>

#ifdef __CUDACC__
#define USBEAM_HD __host__ __device__
#else
#define USBEAM_HD
#endif

#ifndef USBEAM_PI
#define USBEAM_PI 3.14159265358979323846
#endif

/* One complex64 sample, layout-compatible with interleaved (re, im) float32 and float2. */
typedef struct usbeam_cf32 {
    float re, im;
} usbeam_cf32;

/* Interpolation kinds; the values are part of the public params (usbeam.h). */
#define USBEAM_INTERP_NEAREST 0
#define USBEAM_INTERP_LINEAR 1
#define USBEAM_INTERP_CUBIC 2
#define USBEAM_INTERP_MAX_TAPS 4

/* ------------------------------------------------------------------------------------ */
/* Interpolation weights                                                                 */
/* Each returns 1 when s is in the valid range (then *first is the first tap index and  */
/* w[0 .. taps-1] its weights), else 0 with *first = 0 and zero weights.                */
/* The weights are float32; s is double (a sample index of a long record needs more     */
/* than float's 24 bits to keep its fraction) or float in the _f variants (GPU).        */
/* ------------------------------------------------------------------------------------ */

/* Number of taps of an interpolation kind (0 for an unknown kind). */
static inline USBEAM_HD int usbeam_interp_taps(int kind)
{
    return kind == USBEAM_INTERP_NEAREST ? 1 : kind == USBEAM_INTERP_LINEAR ? 2 : kind == USBEAM_INTERP_CUBIC ? 4 : 0;
}

/* Catmull-Rom weights of taps floor(s)-1 .. floor(s)+2 at fraction t in [0, 1). */
static inline USBEAM_HD void usbeam_catmull_rom_weights(float t, float w[4])
{
    const float t2 = t * t, t3 = t2 * t;
    w[0] = 0.5f * (-t3 + 2.0f * t2 - t);
    w[1] = 0.5f * (3.0f * t3 - 5.0f * t2 + 2.0f);
    w[2] = 0.5f * (-3.0f * t3 + 4.0f * t2 + t);
    w[3] = 0.5f * (t3 - t2);
}

static inline USBEAM_HD void usbeam_zero_weights(int *first, float w[USBEAM_INTERP_MAX_TAPS])
{
    *first = 0;
    for (int k = 0; k < USBEAM_INTERP_MAX_TAPS; ++k) w[k] = 0.0f;
}

/* The whole-sample part and fraction of s, both exact for |s| < 2^52. */
#define USBEAM_DEFINE_INTERP_WEIGHTS(SUFFIX, REAL, FLOOR, RINT)                                         \
    static inline USBEAM_HD int usbeam_interp_weights##SUFFIX(int kind, REAL s, int n, int *first,     \
                                                               float w[USBEAM_INTERP_MAX_TAPS])        \
    {                                                                                                  \
        usbeam_zero_weights(first, w);                                                                 \
        /* the comparisons are false for NaN, so a NaN index is simply out of range */                 \
        if (kind == USBEAM_INTERP_NEAREST) {                                                           \
            if (!(s >= (REAL)0 && s <= (REAL)(n - 1))) return 0;                                       \
            *first = (int)RINT(s); /* default rounding mode: ties to even */                           \
            w[0] = 1.0f;                                                                               \
            return 1;                                                                                  \
        }                                                                                              \
        if (kind == USBEAM_INTERP_LINEAR) {                                                            \
            if (!(s >= (REAL)0 && s <= (REAL)(n - 2))) return 0;                                       \
            REAL base = FLOOR(s);                                                                      \
            float t = (float)(s - base);                                                               \
            *first = (int)base;                                                                        \
            w[0] = 1.0f - t;                                                                           \
            w[1] = t;                                                                                  \
            return 1;                                                                                  \
        }                                                                                              \
        if (kind == USBEAM_INTERP_CUBIC) {                                                             \
            if (!(s >= (REAL)1 && s <= (REAL)(n - 3))) return 0;                                       \
            REAL base = FLOOR(s);                                                                      \
            *first = (int)base - 1;                                                                    \
            usbeam_catmull_rom_weights((float)(s - base), w);                                          \
            return 1;                                                                                  \
        }                                                                                              \
        return 0;                                                                                      \
    }

USBEAM_DEFINE_INTERP_WEIGHTS(, double, floor, rint)
USBEAM_DEFINE_INTERP_WEIGHTS(_f, float, floorf, rintf)
#undef USBEAM_DEFINE_INTERP_WEIGHTS

/* Interpolate a real sequence x[0 .. n-1] at s; returns 1 and *value when s is valid,
 * else 0 and *value = 0. */
static inline USBEAM_HD int usbeam_interp_real(int kind, const float *x, int n, double s, float *value)
{
    int first;
    float w[USBEAM_INTERP_MAX_TAPS];
    int valid = usbeam_interp_weights(kind, s, n, &first, w);
    float acc = 0.0f;
    if (valid) {
        const int taps = usbeam_interp_taps(kind);
        for (int k = 0; k < taps; ++k) acc += w[k] * x[first + k];
    }
    *value = acc;
    return valid;
}

/* Interpolate a complex sequence (interleaved re, im) at s; same contract. */
static inline USBEAM_HD int usbeam_interp_complex(int kind, const usbeam_cf32 *x, int n, double s,
                                                  usbeam_cf32 *value)
{
    int first;
    float w[USBEAM_INTERP_MAX_TAPS];
    int valid = usbeam_interp_weights(kind, s, n, &first, w);
    usbeam_cf32 acc = {0.0f, 0.0f};
    if (valid) {
        const int taps = usbeam_interp_taps(kind);
        for (int k = 0; k < taps; ++k) {
            acc.re += w[k] * x[first + k].re;
            acc.im += w[k] * x[first + k].im;
        }
    }
    *value = acc;
    return valid;
}

/* ------------------------------------------------------------------------------------ */
/* Apodization windows on the normalised aperture coordinate u in [-1, 1] (0 outside).   */
/* ------------------------------------------------------------------------------------ */
#define USBEAM_WINDOW_RECT 0
#define USBEAM_WINDOW_HANN 1
#define USBEAM_WINDOW_TUKEY 2

/* Tukey(alpha): flat for |u| <= 1 - alpha, a raised-cosine half-period over the outer
 * alpha of each side.  alpha = 0 is rect, alpha = 1 is Hann: 0.5 (1 + cos(pi u)). */
static inline USBEAM_HD double usbeam_window_tukey(double u, double alpha)
{
    const double a = fabs(u);
    if (!(a <= 1.0)) return 0.0;
    if (alpha <= 0.0 || a <= 1.0 - alpha) return 1.0;
    return 0.5 * (1.0 + cos(USBEAM_PI * (a - (1.0 - alpha)) / alpha));
}

static inline USBEAM_HD double usbeam_window(int kind, double u, double tukey_alpha)
{
    if (!(fabs(u) <= 1.0)) return 0.0;
    switch (kind) {
    case USBEAM_WINDOW_RECT: return 1.0;
    case USBEAM_WINDOW_HANN: return 0.5 * (1.0 + cos(USBEAM_PI * u));
    case USBEAM_WINDOW_TUKEY: return usbeam_window_tukey(u, tukey_alpha);
    default: return 0.0;
    }
}

/* ------------------------------------------------------------------------------------ */
/* Time of flight                                                                        */
/* ------------------------------------------------------------------------------------ */

/* Receive (or any) distance between point p and element e, m. */
static inline USBEAM_HD double usbeam_distance(double px, double py, double pz, double ex, double ey,
                                               double ez)
{
    const double dx = px - ex, dy = py - ey, dz = pz - ez;
    return sqrt(dx * dx + dy * dy + dz * dz);
}

/* A transmit reduced to what the time of flight needs (built by the usbeam_tx_model_*
 * helpers below, which take the element positions to place t = 0).  The fields after
 * `sources` serve arrays off the x axis (convex, matrix) and steered 3-D beams; the helpers
 * of the linear-array case leave them 0, which keeps its formulas exactly as they were. */
typedef struct usbeam_tx_model {
    int spherical;          /* 0: plane wave; 1: spherical wave through (vx, vy, vz) */
    int focused;            /* spherical only: path sign flips with sign(z - vz) */
    double sin_a, cos_a;    /* plane wave direction (x and z components) */
    double x_first;         /* plane wave: x of the first-firing element, m */
    double vx, vy, vz;      /* spherical: virtual source / focus / firing element, m */
    double offset;          /* spherical: path added so the first element fires at t = 0, m */
    int n_sources;          /* > 0: virtual-source model, overrides the fields above */
    const double *sources;  /* (source_rows, n_sources): rows x, [y,] z, path offset (m) */
    int source_rows;        /* 3: (x, z, o), sources at y = 0; 4: (x, y, z, o) */
    int plane3;             /* plane wave from a first element off the x axis or steered in y */
    double dir_y, y_first, z_first; /* plane3: y component of the direction; first element's y, z */
    int has_axis;           /* focused: side = sign((p - f) . axis) instead of sign(z - f_z) */
    double axis_x, axis_y, axis_z;
} usbeam_tx_model;

/* min_i (o_i + |p - s_i|) over virtual sources (3, n) rows x, z, o (m). */
static inline USBEAM_HD double usbeam_tx_path_sources(const double *sources, int n, double x, double y, double z)
{
    const double *sx = sources, *sz = sources + n, *so = sources + 2 * n;
    const double y2 = y * y;
    double best = INFINITY;
#if defined(_OPENMP) && !defined(__CUDACC__)
#pragma omp simd reduction(min : best)
#endif
    for (int i = 0; i < n; ++i) {
        const double dx = x - sx[i], dz = z - sz[i];
        const double path = so[i] + sqrt(dx * dx + y2 + dz * dz);
        best = path < best ? path : best;
    }
    return best;
}

/* The same over sources (4, n) rows x, y, z, o (m): a matrix array's delay law (PyMUST
 * dasmtx3's model: the firing elements themselves). */
static inline USBEAM_HD double usbeam_tx_path_sources3(const double *sources, int n, double x, double y, double z)
{
    const double *sx = sources, *sy = sources + n, *sz = sources + 2 * n, *so = sources + 3 * n;
    double best = INFINITY;
    for (int i = 0; i < n; ++i) {
        const double dx = x - sx[i], dy = y - sy[i], dz = z - sz[i];
        const double path = so[i] + sqrt(dx * dx + dy * dy + dz * dz);
        best = path < best ? path : best;
    }
    return best;
}

/* Transmit path length to point p (m); the transmit time is this over c. */
static inline USBEAM_HD double usbeam_tx_path(const usbeam_tx_model *m, double x, double y, double z)
{
    if (m->n_sources > 0)
        return m->source_rows == 4 ? usbeam_tx_path_sources3(m->sources, m->n_sources, x, y, z)
                                   : usbeam_tx_path_sources(m->sources, m->n_sources, x, y, z);
    if (!m->spherical) {
        if (m->plane3) return (x - m->x_first) * m->sin_a + (y - m->y_first) * m->dir_y + (z - m->z_first) * m->cos_a;
        return (x - m->x_first) * m->sin_a + z * m->cos_a;
    }
    const double r = usbeam_distance(x, y, z, m->vx, m->vy, m->vz);
    if (m->focused) {
        double side;
        if (m->has_axis) { /* past the focus along the beam axis */
            const double along = m->axis_x * (x - m->vx) + m->axis_y * (y - m->vy) + m->axis_z * (z - m->vz);
            side = (along > 0.0) - (along < 0.0);
        } else {
            side = (z > m->vz) - (z < m->vz); /* sign(z - zf), 0 on the focal plane */
        }
        return m->offset + side * r;
    }
    return m->offset + r;
}

/* A model with every field zero (the builders set what their kind needs). */
static inline USBEAM_HD usbeam_tx_model usbeam_tx_model_blank(void)
{
    usbeam_tx_model m;
    m.spherical = 0, m.focused = 0;
    m.sin_a = 0.0, m.cos_a = 1.0, m.x_first = 0.0;
    m.vx = 0.0, m.vy = 0.0, m.vz = 0.0, m.offset = 0.0;
    m.n_sources = 0, m.sources = 0, m.source_rows = 3;
    m.plane3 = 0, m.dir_y = 0.0, m.y_first = 0.0, m.z_first = 0.0;
    m.has_axis = 0, m.axis_x = 0.0, m.axis_y = 0.0, m.axis_z = 0.0;
    return m;
}

/* Plane wave at angle (rad, > 0 steers toward +x) from elements at x[0 .. n-1] (z = 0). */
static inline USBEAM_HD usbeam_tx_model usbeam_tx_model_plane(double angle, const double *xe, int n)
{
    usbeam_tx_model m = usbeam_tx_model_blank();
    m.sin_a = sin(angle), m.cos_a = cos(angle);
    double x_min = xe[0], x_max = xe[0];
    for (int e = 1; e < n; ++e) {
        x_min = xe[e] < x_min ? xe[e] : x_min;
        x_max = xe[e] > x_max ? xe[e] : x_max;
    }
    m.x_first = angle >= 0.0 ? x_min : x_max;
    return m;
}

/* Diverging wave from a virtual source (xv, zv), zv < 0; elements at (xe, 0, 0). */
static inline USBEAM_HD usbeam_tx_model usbeam_tx_model_diverging(double xv, double zv, const double *xe, int n)
{
    usbeam_tx_model m = usbeam_tx_model_blank();
    m.spherical = 1, m.vx = xv, m.vz = zv;
    double nearest = INFINITY;
    for (int e = 0; e < n; ++e) {
        const double d = usbeam_distance(xe[e], 0.0, 0.0, xv, 0.0, zv);
        nearest = d < nearest ? d : nearest;
    }
    m.offset = -nearest;
    return m;
}

/* Focused wave through (xf, zf), zf > 0: the farthest element fires first. */
static inline USBEAM_HD usbeam_tx_model usbeam_tx_model_focused(double xf, double zf, const double *xe, int n)
{
    usbeam_tx_model m = usbeam_tx_model_blank();
    m.spherical = 1, m.focused = 1, m.vx = xf, m.vz = zf;
    double farthest = 0.0;
    for (int e = 0; e < n; ++e) {
        const double d = usbeam_distance(xe[e], 0.0, 0.0, xf, 0.0, zf);
        farthest = d > farthest ? d : farthest;
    }
    m.offset = farthest;
    return m;
}

/* Synthetic aperture: the element at (xk, 0, 0) fires alone at t = 0. */
static inline USBEAM_HD usbeam_tx_model usbeam_tx_model_synthetic(double xk)
{
    usbeam_tx_model m = usbeam_tx_model_blank();
    m.spherical = 1, m.vx = xk;
    return m;
}

/* Virtual sources (3, n) rows x, z, offset (m), e.g. MUST's interpolated delay law. */
static inline USBEAM_HD usbeam_tx_model usbeam_tx_model_sources(const double *sources, int n)
{
    usbeam_tx_model m = usbeam_tx_model_blank();
    m.spherical = 1, m.n_sources = n, m.sources = sources;
    return m;
}

/* ---- the same for elements anywhere: positions (xe, ye, ze)[0 .. n-1], m ----------------- */
/* For elements on the x axis (ye = ze = 0) with no y steering, no axis, these give exactly  */
/* the models above (the linear-array case keeps its formulas).                             */

static inline USBEAM_HD int usbeam_on_x_axis(const double *ye, const double *ze, int n)
{
    for (int e = 0; e < n; ++e)
        if (ye[e] != 0.0 || ze[e] != 0.0) return 0;
    return 1;
}

/* Plane wave along d = (sin a cos b, sin b, cos a cos b): path (p - e_first) . d, e_first the
 * element of least e . d (MUST txdelay, convex arrays included: the wavefront tangent to the
 * face fires it first). */
static inline USBEAM_HD usbeam_tx_model usbeam_tx_model_plane3(double angle, double angle_y, const double *xe,
                                                               const double *ye, const double *ze, int n)
{
    if (angle_y == 0.0 && usbeam_on_x_axis(ye, ze, n)) return usbeam_tx_model_plane(angle, xe, n);
    usbeam_tx_model m = usbeam_tx_model_blank();
    m.sin_a = sin(angle) * cos(angle_y), m.cos_a = cos(angle) * cos(angle_y);
    m.plane3 = 1;
    m.dir_y = sin(angle_y);
    int first = 0;
    double least = INFINITY;
    for (int e = 0; e < n; ++e) {
        const double along = xe[e] * m.sin_a + ye[e] * m.dir_y + ze[e] * m.cos_a;
        if (along < least) least = along, first = e;
    }
    m.x_first = xe[first], m.y_first = ye[first], m.z_first = ze[first];
    return m;
}

/* Diverging wave from a virtual source v: path |p - v| - min_e |e - v|. */
static inline USBEAM_HD usbeam_tx_model usbeam_tx_model_diverging3(double xv, double yv, double zv, const double *xe,
                                                                   const double *ye, const double *ze, int n)
{
    usbeam_tx_model m = usbeam_tx_model_blank();
    m.spherical = 1, m.vx = xv, m.vy = yv, m.vz = zv;
    double nearest = INFINITY;
    for (int e = 0; e < n; ++e) {
        const double d = usbeam_distance(xe[e], ye[e], ze[e], xv, yv, zv);
        nearest = d < nearest ? d : nearest;
    }
    m.offset = -nearest;
    return m;
}

/* Focused wave through f: path max_e |e - f| + side |p - f|, side = sign((p - f) . axis)
 * with axis a unit vector, or sign(z - f_z) when axis is NULL. */
static inline USBEAM_HD usbeam_tx_model usbeam_tx_model_focused3(double xf, double yf, double zf, const double *axis,
                                                                 const double *xe, const double *ye,
                                                                 const double *ze, int n)
{
    usbeam_tx_model m = usbeam_tx_model_blank();
    m.spherical = 1, m.focused = 1, m.vx = xf, m.vy = yf, m.vz = zf;
    double farthest = 0.0;
    for (int e = 0; e < n; ++e) {
        const double d = usbeam_distance(xe[e], ye[e], ze[e], xf, yf, zf);
        farthest = d > farthest ? d : farthest;
    }
    m.offset = farthest;
    if (axis) {
        m.has_axis = 1;
        m.axis_x = axis[0], m.axis_y = axis[1], m.axis_z = axis[2];
    }
    return m;
}

/* Synthetic aperture: the element at (xk, yk, zk) fires alone at t = 0. */
static inline USBEAM_HD usbeam_tx_model usbeam_tx_model_synthetic3(double xk, double yk, double zk)
{
    usbeam_tx_model m = usbeam_tx_model_blank();
    m.spherical = 1, m.vx = xk, m.vy = yk, m.vz = zk;
    return m;
}

/* Virtual sources with their y: (4, n) rows x, y, z, offset (m). */
static inline USBEAM_HD usbeam_tx_model usbeam_tx_model_sources3(const double *sources, int n)
{
    usbeam_tx_model m = usbeam_tx_model_blank();
    m.spherical = 1, m.n_sources = n, m.sources = sources, m.source_rows = 4;
    return m;
}

/* IQ phase rotation exp(+j 2 pi fc tau), tau the absolute two-way time (s).  The phase
 * is formed in double: 2 pi fc tau reaches thousands of radians. */
static inline USBEAM_HD usbeam_cf32 usbeam_phase_rotation(double fc, double tau)
{
    const double phase = 2.0 * USBEAM_PI * fc * tau;
    usbeam_cf32 r = {(float)cos(phase), (float)sin(phase)};
    return r;
}

/* ------------------------------------------------------------------------------------ */
/* Receive aperture of a linear array                                                    */
/* ------------------------------------------------------------------------------------ */

/* Elements e with |xp - xe[e]| <= half_width, for xe strictly increasing: a contiguous
 * range [*first, *last].  Returns the count (0 when empty: *first = 0, *last = -1).  The
 * predicate is evaluated exactly as written, so borderline elements agree with MUST. */
static inline USBEAM_HD int usbeam_aperture_range(const double *xe, int n, double xp, double half_width,
                                                  int *first, int *last)
{
    int lo = 0, hi = n; /* first index with xe >= xp - half_width, by the predicate itself */
    while (lo < hi) {
        const int mid = lo + (hi - lo) / 2;
        if (xe[mid] < xp && !(fabs(xp - xe[mid]) <= half_width)) lo = mid + 1;
        else hi = mid;
    }
    int begin = lo;
    lo = begin;
    hi = n; /* first index past the aperture on the right */
    while (lo < hi) {
        const int mid = lo + (hi - lo) / 2;
        if (xe[mid] <= xp || fabs(xp - xe[mid]) <= half_width) lo = mid + 1;
        else hi = mid;
    }
    int end = lo - 1;
    if (begin > end || !(fabs(xp - xe[begin]) <= half_width)) {
        *first = 0;
        *last = -1;
        return 0;
    }
    *first = begin;
    *last = end;
    return end - begin + 1;
}

/* ------------------------------------------------------------------------------------ */
/* Receive aperture and window of an element with a normal (convex, phased, matrix)      */
/* Each element carries a frame (9 doubles): t1 (lateral, in the array's line or its    */
/* x direction), t2 (the second lateral direction, surfaces only), n (the normal into    */
/* the medium).  For d = p - e: axial a = d . n, lateral l1 = d . t1 (l2 = d . t2).      */
/* Aperture with f-number F > 0: a > 0 and |l1| <= a / (2F) (and |l2| <= a / (2F) on a   */
/* surface), the element's acceptance cone; the window is w(l1 2F / a) (times           */
/* w(l2 2F / a)).  For a line array l1 / a = tan(angle of d to the normal in the x-z    */
/* plane): PyMUST dasmtx's |asin(dx / r) - theta_e| <= atan(1 / 2F) for convex arrays,  */
/* |x - x_e| <= z / 2F on a linear one; on a surface the box of PyMUST dasmtx3.          */
/* ------------------------------------------------------------------------------------ */

/* The frame of an element with normal (nx, ny, nz) (unit).  A line array: t1 = (nz, 0, -nx)
 * normalised (in the x-z plane), t2 = 0.  A surface: t1 = x projected on the element's
 * plane (y when the normal lies along x), t2 = n x t1.  Returns 0 for a degenerate normal. */
static inline USBEAM_HD int usbeam_element_frame(double nx, double ny, double nz, int surface, double frame[9])
{
    double t1x, t1y, t1z;
    if (!surface) {
        const double h = sqrt(nx * nx + nz * nz);
        if (!(h > 1e-6)) return 0;
        t1x = nz / h, t1y = 0.0, t1z = -nx / h;
    } else {
        t1x = 1.0 - nx * nx, t1y = -nx * ny, t1z = -nx * nz; /* x - (x . n) n */
        double h = sqrt(t1x * t1x + t1y * t1y + t1z * t1z);
        if (!(h > 1e-6)) { /* normal along x: take y instead */
            t1x = -ny * nx, t1y = 1.0 - ny * ny, t1z = -ny * nz;
            h = sqrt(t1x * t1x + t1y * t1y + t1z * t1z);
        }
        t1x /= h, t1y /= h, t1z /= h;
    }
    frame[0] = t1x, frame[1] = t1y, frame[2] = t1z;
    if (surface) {
        frame[3] = ny * t1z - nz * t1y, frame[4] = nz * t1x - nx * t1z, frame[5] = nx * t1y - ny * t1x;
    } else {
        frame[3] = frame[4] = frame[5] = 0.0;
    }
    frame[6] = nx, frame[7] = ny, frame[8] = nz;
    return 1;
}

/* 1 when point offset d = p - e is in the element's f-number aperture (F > 0). */
static inline USBEAM_HD int usbeam_element_in_aperture(const double frame[9], int surface, double f_number, double dx,
                                                       double dy, double dz)
{
    const double axial = dx * frame[6] + dy * frame[7] + dz * frame[8];
    if (!(axial > 0.0)) return 0;
    const double half = axial / (2.0 * f_number);
    const double l1 = dx * frame[0] + dy * frame[1] + dz * frame[2];
    if (!(fabs(l1) <= half)) return 0;
    if (!surface) return 1;
    const double l2 = dx * frame[3] + dy * frame[4] + dz * frame[5];
    return fabs(l2) <= half;
}

/* Window weight of the element for offset d within its f-number aperture (0 outside). */
static inline USBEAM_HD double usbeam_element_window(const double frame[9], int surface, double f_number, int kind,
                                                     double tukey_alpha, double dx, double dy, double dz)
{
    if (!usbeam_element_in_aperture(frame, surface, f_number, dx, dy, dz)) return 0.0;
    if (kind == USBEAM_WINDOW_RECT) return 1.0;
    const double axial = dx * frame[6] + dy * frame[7] + dz * frame[8];
    const double scale = 2.0 * f_number / axial;
    const double l1 = dx * frame[0] + dy * frame[1] + dz * frame[2];
    double w = usbeam_window(kind, l1 * scale, tukey_alpha);
    if (surface) w *= usbeam_window(kind, (dx * frame[3] + dy * frame[4] + dz * frame[5]) * scale, tukey_alpha);
    return w;
}

/* ------------------------------------------------------------------------------------ */
/* Row-column arrays (family rca; appended by the RCA family, see csrc/rca.c)            */
/* Array coordinates: z = 0 is the array, columns are strips along y placed along x,    */
/* rows strips along x placed along y.  An orientation's axis u is x for columns and y  */
/* for rows; the other in-plane axis is v.  Paths are in m; time = path / c.            */
/* References: Ceroici et al., "Fast Orthogonal Row-Column Electronic Scanning With     */
/* Top-Orthogonal-to-Bottom Electrode Arrays" (FORCES), IEEE TUFFC 64(6) 2017; Sobhani  */
/* et al., "Ultrafast Orthogonal Row-Column Electronic Scanning (uFORCES) With Bias-    */
/* Switchable TOBE 2D Arrays", IEEE TUFFC 69(10) 2823-2836, 2022 (transmit on rows,     */
/* bias-coded columns, receive on columns); "Hadamard Encoded Row Column Ultrasonic     */
/* Expansive Scanning (HERCULES) with Bias-Switchable Row-Column Arrays", arXiv         */
/* 2506.11443 (plane/cylindrical transmit, Hadamard-encoded read-out: a full 2-D       */
/* receive aperture); Rasmussen et al., "3-D Imaging Using Row-Column-Addressed Arrays  */
/* With Integrated Apodization", IEEE TUFFC 62(5) 2015 (plane waves, virtual line       */
/* sources); Palamar et al., "An Open Source Realtime GPU Beamformer for Row-Column and */
/* TOBE Arrays" (ogl_beamforming): the same paths, with t = 0 and the origin placed     */
/* differently (array corner, no first-element shift) - usbeam uses the linear-array    */
/* convention above (array centre, t = 0 when the first element fires).                 */
/* ------------------------------------------------------------------------------------ */

/* Receive path to a strip at u_e along axis u: the strip spans v, so the nearest point on
 * it is in the (u, z) plane of the point (stationary-phase arrival of a long element). */
static inline USBEAM_HD double usbeam_rca_strip_path(double u, double z, double u_e)
{
    const double du = u - u_e;
    return sqrt(du * du + z * z);
}

/* FORCES / uFORCES decoded transmit of element k (FORCES paper, eq. for the decoded
 * synthetic-transmit data): the elevation-focused element acts as a source at the centre
 * of the strip, (u_k, v = 0, 0), so the path is the 3-D distance to that point. */
static inline USBEAM_HD double usbeam_rca_forces_tx_path(double u, double v, double z, double u_k)
{
    const double du = u - u_k;
    return sqrt(du * du + v * v + z * z);
}

/* HERCULES decoded receive at the crossing of receive strip u_c and orthogonal strip v_r:
 * a 2-D aperture element at (u_c, v_r, 0), 3-D distance. */
static inline USBEAM_HD double usbeam_rca_hercules_rx_path(double u, double v, double z, double u_c,
                                                           double v_r)
{
    const double du = u - u_c, dv = v - v_r;
    return sqrt(du * du + dv * dv + z * z);
}

/* Transmit of a whole orientation (TPW, VLS, Flash, HERCULES): a cylindrical or plane wave
 * invariant along v, so its path is the linear-array model of the (u, z) plane
 * (usbeam_tx_path with y = 0).  focal_depth +-inf: plane wave at angle; > 0: virtual line
 * source focused at depth f along the angle, f (sin a, cos a); < 0: diverging from the
 * virtual line source behind the array.  ue[0 .. n-1] are the transmit strip positions,
 * used to put t = 0 at the first firing strip. */
static inline USBEAM_HD usbeam_tx_model usbeam_rca_wave_model(double angle, double focal_depth,
                                                              const double *ue, int n)
{
    if (isinf(focal_depth)) return usbeam_tx_model_plane(angle, ue, n);
    const double fu = focal_depth * sin(angle), fz = focal_depth * cos(angle);
    if (focal_depth > 0.0) return usbeam_tx_model_focused(fu, fz, ue, n);
    return usbeam_tx_model_diverging(fu, fz, ue, n);
}

/* ------------------------------------------------------------------------------------ */
/* Scan conversion (csrc/bmode/scan_convert.c and cuda/scan_convert.cu)                  */
/* A pixel's four polar neighbours start at `first` = i * n_theta + j (row i, column j)   */
/* with fractions (fr along r, ft along theta) in [0, 1]; first < 0 marks a pixel outside */
/* the sector.  Bilinear: (1-fr)((1-ft) v00 + ft v01) + fr ((1-ft) v10 + ft v11).         */
/* ------------------------------------------------------------------------------------ */
static inline USBEAM_HD float usbeam_bilinear_f(float v00, float v01, float v10, float v11, float fr, float ft)
{
#ifdef __CUDA_ARCH__
    /* nvcc would contract each a + b * c into one FMA (one rounding); the CPU build (baseline
     * x86-64, no FMA) rounds the product first: round it here too, so both give the same bits
     * (tests/bmode/test_cuda_scan_convert.py compares them exactly; seen differing by an ulp
     * on an H100 before this). */
    const float near_row = __fadd_rn(v00, __fmul_rn(ft, v01 - v00));
    const float far_row = __fadd_rn(v10, __fmul_rn(ft, v11 - v10));
    return __fadd_rn(near_row, __fmul_rn(fr, far_row - near_row));
#else
    const float near_row = v00 + ft * (v01 - v00), far_row = v10 + ft * (v11 - v10);
    return near_row + fr * (far_row - near_row);
#endif
}

/* float -> uint8 for a bilinear mix of uint8 values: round half up (the value is in [0, 255]
 * up to rounding, clamped). */
static inline USBEAM_HD unsigned char usbeam_round_u8(float v)
{
    const float r = floorf(v + 0.5f);
    return (unsigned char)(r < 0.0f ? 0.0f : (r > 255.0f ? 255.0f : r));
}

/* ------------------------------------------------------------------------------------ */
/* Median of 9 (Doppler display, csrc/doppler_display.c and cuda/doppler_display.cu)    */
/* ------------------------------------------------------------------------------------ */
static inline USBEAM_HD void usbeam_sort2f(float *a, float *b)
{
    /* a NaN operand makes `<` false: the pair is swapped.  Both backends share this exact
     * network, so even NaN input gives the same (meaningless) value on both. */
    const float lo = *a < *b ? *a : *b, hi = *a < *b ? *b : *a;
    *a = lo;
    *b = hi;
}

/* Median of v[0..8] by the classic 19-exchange network (Paeth, Graphics Gems 1990); v is
 * reordered. */
static inline USBEAM_HD float usbeam_median9f(float *v)
{
    usbeam_sort2f(&v[1], &v[2]); usbeam_sort2f(&v[4], &v[5]); usbeam_sort2f(&v[7], &v[8]);
    usbeam_sort2f(&v[0], &v[1]); usbeam_sort2f(&v[3], &v[4]); usbeam_sort2f(&v[6], &v[7]);
    usbeam_sort2f(&v[1], &v[2]); usbeam_sort2f(&v[4], &v[5]); usbeam_sort2f(&v[7], &v[8]);
    usbeam_sort2f(&v[0], &v[3]); usbeam_sort2f(&v[5], &v[8]); usbeam_sort2f(&v[4], &v[7]);
    usbeam_sort2f(&v[3], &v[6]); usbeam_sort2f(&v[1], &v[4]); usbeam_sort2f(&v[2], &v[5]);
    usbeam_sort2f(&v[4], &v[7]); usbeam_sort2f(&v[4], &v[2]); usbeam_sort2f(&v[6], &v[4]);
    usbeam_sort2f(&v[4], &v[2]);
    return v[4];
}

/* Replicated-edge index: i clamped into [0, n-1] (the display median's edge convention). */
static inline USBEAM_HD long long usbeam_clamp_index(long long i, long long n)
{
    return i < 0 ? 0 : (i >= n ? n - 1 : i);
}

/* ---- envelope: the discrete Hilbert transform of a line (csrc/bmode/envelope.c) --------
 * scipy.signal.hilbert forms the analytic signal of an n-sample line as ifft(h fft(x)), h = 1
 * at DC (and at n/2 for even n), 2 on the positive bins, 0 on the negative ones.  Its
 * imaginary part is the circular convolution y[i] = sum_m kernel[(i - m) mod n] x[m] with
 *   kernel[d] = (2/n) sum_{k=1}^{K} sin(2 pi k d / n),  K = ceil(n/2) - 1
 *             = (2/n) sin(K t / 2) sin((K + 1) t / 2) / sin(t / 2),  t = 2 pi d / n
 * (a sum of sines in closed form), kernel[0] = 0.  The plan tabulates it in double. */
static inline USBEAM_HD double usbeam_hilbert_kernel(long long d, long long n)
{
    const long long K = (n + 1) / 2 - 1;
    d %= n;
    if (d < 0) d += n;
    if (K <= 0 || d == 0) return 0.0;
    const double t = 2.0 * 3.14159265358979323846 * (double)d / (double)n;
    return 2.0 / (double)n * sin(0.5 * (double)K * t) * sin(0.5 * (double)(K + 1) * t) / sin(0.5 * t);
}

/* The envelope of one sample: |x + j y| of the line value and its Hilbert transform. */
static inline USBEAM_HD float usbeam_envelope_magnitude(double x, double y) { return (float)sqrt(x * x + y * y); }

#endif /* USBEAM_MATH_H */
