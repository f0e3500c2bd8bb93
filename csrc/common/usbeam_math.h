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
 * helpers below, which take the element x positions to place t = 0). */
typedef struct usbeam_tx_model {
    int spherical;          /* 0: plane wave; 1: spherical wave through (vx, vy, vz) */
    int focused;            /* spherical only: path sign flips with sign(z - vz) */
    double sin_a, cos_a;    /* plane wave direction */
    double x_first;         /* plane wave: x of the first-firing element, m */
    double vx, vy, vz;      /* spherical: virtual source / focus / firing element, m */
    double offset;          /* spherical: path added so the first element fires at t = 0, m */
    int n_sources;          /* > 0: virtual-source model, overrides the fields above */
    const double *sources;  /* (3, n_sources): rows x, z, path offset (m); sources at y = 0 */
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

/* Transmit path length to point p (m); the transmit time is this over c. */
static inline USBEAM_HD double usbeam_tx_path(const usbeam_tx_model *m, double x, double y, double z)
{
    if (m->n_sources > 0) return usbeam_tx_path_sources(m->sources, m->n_sources, x, y, z);
    if (!m->spherical) return (x - m->x_first) * m->sin_a + z * m->cos_a;
    const double r = usbeam_distance(x, y, z, m->vx, m->vy, m->vz);
    if (m->focused) {
        const double side = (z > m->vz) - (z < m->vz); /* sign(z - zf), 0 on the focal plane */
        return m->offset + side * r;
    }
    return m->offset + r;
}

/* Plane wave at angle (rad, > 0 steers toward +x) from elements at x[0 .. n-1] (z = 0). */
static inline USBEAM_HD usbeam_tx_model usbeam_tx_model_plane(double angle, const double *xe, int n)
{
    usbeam_tx_model m = {0, 0, sin(angle), cos(angle), 0.0, 0.0, 0.0, 0.0, 0.0, 0, 0};
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
    usbeam_tx_model m = {1, 0, 0.0, 1.0, 0.0, xv, 0.0, zv, 0.0, 0, 0};
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
    usbeam_tx_model m = {1, 1, 0.0, 1.0, 0.0, xf, 0.0, zf, 0.0, 0, 0};
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
    usbeam_tx_model m = {1, 0, 0.0, 1.0, 0.0, xk, 0.0, 0.0, 0.0, 0, 0};
    return m;
}

/* Virtual sources (3, n) rows x, z, offset (m), e.g. MUST's interpolated delay law. */
static inline USBEAM_HD usbeam_tx_model usbeam_tx_model_sources(const double *sources, int n)
{
    usbeam_tx_model m = {1, 0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, n, sources};
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
