/*
 * das.cu - delay-and-sum beamforming for any probe (linear, phased, convex, matrix arrays), CUDA
 * twin of csrc/beamform/das.c.
 *
 * Layouts: in  (n_frames, n_transmits, n_elements, n_samples) on the device: int16 / float32
 *              RF or complex64 IQ (interleaved re, im);
 *          out (n_frames, n_points) on the device: float32 (RF) or complex64 (IQ).
 * Units: positions m, times s in the plan's (double) copies; inside the kernel, distances are
 * in samples (m x fs / c) and phases in cycles.  s = (tau - t0) fs, rotation exp(+j 2 pi fc tau).
 * The geometry is the CPU plan's (csrc/beamform/das_setup.c), handed over in a usbeam_das_tables
 * (csrc/common/usbeam_internal.h): element positions, points, transmit models and each point's
 * receive aperture (a contiguous element range).
 *
 * Why this shape.  Per (point, element) the work is one delay and one set of weights that every
 * frame shares, then TAPS loads and a few FMAs per frame.  So:
 *   1. Layout.  The input is transposed once per call (transpose_kernel: the input read once,
 *      the scratch written once) into plan-owned scratch laid out (transmit, element, sample,
 *      frame), frames zero-padded to a multiple of 16 bytes: the frames of one (element, sample)
 *      are one contiguous row, read with 16-byte vector loads, so one delay serves every frame
 *      with contiguous loads.  With a single frame the input already is that layout and is read
 *      in place (no scratch, no transpose).  The scratch is allocated at plan creation.
 *   2. Thread mapping.  A warp holds G = 32 / FL points; the FL lanes of a point (a "group")
 *      split the row of frames: lane f of the group owns the 16-byte vectors f, f + FL, ..., VPT
 *      of them per pass, ACC_FLOATS = 8 accumulators in registers (4 IQ or 8 RF frames).  One
 *      warp load instruction thus reads FL x 16 contiguous bytes per point (whole 32-byte
 *      sectors whenever a row holds two vectors or more).  FL is the power of two that covers
 *      the row in one pass, at most 32; longer rows run further passes (the delays are
 *      recomputed: cheap).  PWI_disk, IQ, 32 frames: rows of 256 B, FL = 8, VPT = 2, G = 4.
 *      One frame: FL = 1, 32 points per warp.
 *   3. Delays are computed once per (point, element): the FL lanes of a group compute FL
 *      consecutive elements, then broadcast them one by one (__shfl_sync within the group).
 *   4. Blocks are 2-D tiles of a lattice (Grid order, detected at plan creation): G points down
 *      a column per warp x COLUMNS = 4 columns (the block's warps), a y slice per grid z, so a
 *      warp's delays are a few samples apart and the block's warps read the same channel rows
 *      (L1 reuse).  The warp walks the union of its points' apertures (nested: they share x); a
 *      point skips the elements outside its own.  Any other point list runs in 1-D runs.
 *   5. Stores go through a 4 KB shared-memory stage per block so that a warp writes runs of
 *      consecutive points of one frame (a lane's frames are n_points apart in out).
 *   6. Occupancy (ptxas, sm_90): 64-94 registers, no spill, 4 KB of static shared memory,
 *      128-thread blocks: at most 96 registers give 5 blocks, 20 warps per multiprocessor; each
 *      warp keeps VPT x TAPS independent 16-byte loads in flight per element.
 *
 * Delay math: no double-precision square root, sine or cosine per (point, element).  Per point
 * and transmit, in double, once (transmit_ref): the transmit path (tabulated at plan creation
 * for virtual-source transmits, whose min over 4N sources would otherwise be the largest cost,
 * else computed), rho = sqrt(y^2 + z^2), the point's distance to the array axis, the sample of
 * the reference (path + rho) fs / c - t0 fs as integer + float fraction, and the fraction of
 * its cycles (path + rho) fc / c.  Per (point, element), in float32 (pair_delay): Delta =
 * |p - e| - rho in samples, the receive distance relative to that reference, from
 *     N = |p - e|^2 - rho^2 = dx^2 - e_y (2 y - e_y) - e_z (2 z - e_z)   (dx^2 for a planar array),
 *     N = Delta (2 rho + Delta),
 * with coordinates split on a one-sample grid (integer + fraction, both exact in float) so that
 * dx = x - x_e is correctly rounded (6e-8 sample) and carries its rounding error (Fast2Sum), a
 * guess Delta0 = r - rho from rsqrtf, and one Newton step Delta = Delta0 + R / (2 r) on the
 * residual R = N - Delta0^2 - 2 rho Delta0, formed exactly (FMA-split products, the larger
 * subtracted first, which Sterbenz makes exact).  The integer part is split off before any sum
 * that would round at the size of s.  Phase: fc tau = C_ref + Delta fc / fs with fc / fs as a
 * float pair, whole cycles removed before each sum, sin and cos of the fraction from float
 * polynomials (sincos_turns_f; written out so the emulator and the GPU evaluate the same).
 * Error budget against the exact delay (tests/test_cuda_das.py test_delay_error_budget*, vs
 * tests/reference/das.py and the CPU; tolerances das_cuda_delay_samples, das_cuda_phase_rad):
 *     samples: |ds| <= 6e-8 (dx) + 1.2e-7 (the fraction's rounding) + ~1e-14 r (Newton);
 *              measured <= 1.9e-7 from 0.2 mm to 60 mm deep and 40 mm to the side.
 *     radians: |dphi| <= 2 pi (6e-8 cycle + fc / fs |ds|) + 1e-7 (polynomial);
 *              measured <= 5.3e-7.
 * That is the size of the float32 weights' rounding the CPU does anyway: the DAS tolerances
 * against the CPU (das_cuda_rel_l2) hold unchanged (measured 1e-7 to 5e-7 relative L2, as the
 * double version).  Windows with an f-number are float32 too (|error| < 2e-7); full-aperture
 * windows are per element, computed by the plan in double (usbeam_window).  Probes with element
 * normals or a 2-D face (the plan's "general" geometry: convex, matrix arrays) take each
 * element's aperture and window from its acceptance cone in double, the CPU's own function
 * (usbeam_element_window, usbeam_math.h), on a per-element table of position and frame.
 *
 * Budget per (point, element), computed by one lane and shared by FL: ~30 FP32 instructions of
 * geometry (one MUFU.RSQ), ~13 of sample split and range checks, ~6 of interpolation weights,
 * ~35 of phase (IQ), ~25 of window (Hann / Tukey with an f-number; 0 otherwise), then 2 + TAPS
 * (IQ) or 1 + TAPS (RF) shuffles per lane of the group; per frame: TAPS samples loaded from
 * L1/L2 and 8 (linear IQ), 12 (cubic IQ), 2 (linear RF) FMAs (+ 2 integer-and-add conversions
 * per int16 sample).  PWI_disk (IQ, linear, Hann-free auto f-number): ~85 instructions + 40
 * shuffle lane-ops per pair against 256 FMAs and 512 bytes of loads.
 * Bytes read per point: for each aperture element with its sample in range, TAPS x row bytes
 * (PWI_disk: ~67 elements x 2 x 256 B = 34 KB per point, mostly L1 hits: neighbouring points
 * read the same rows), plus the point (24 B), its aperture (8 B), its transmit paths (8 B per
 * transmit, virtual sources) and 16 B per element of geometry (L1 broadcasts).  From DRAM per
 * call: the input once (transpose), the scratch once each way (L2-resident when it fits) and
 * the output once.
 *
 * Non-finite input: the CPU refuses data holding NaN or inf while it stages it.  Here a NaN or
 * inf a point reads makes its sums non-finite (x * 0 is NaN too), so a thread whose output is
 * non-finite sets the plan's input-fault word (cuda/exec.cu: mapped page-locked host memory, a
 * plain store).  Execute queues nothing more and never waits; the host reads and clears the word
 * once the work has finished (usbeam_cuda_exec_take_input_faults), which usbeam.device does after
 * a host copy of the result, on plan.cuda.synchronize() and at the plan's next call, raising
 * ValueError naming the input.  Only samples the beamformer reads count (the CPU checks every
 * sample), and a finite sum that overflows float32 counts too.  A sample of zero window weight
 * is never read (as on the CPU, where it adds nothing).
 *
 * Graph capture: execute launches one or two kernels into the plan's stream and allocates
 * nothing.
 * Reference: Perrot et al., "So you think you can DAS?", Ultrasonics 111 (2021) 106309.
 */
#include "runtime/exec.cuh"

#include "common/usbeam_math.h"

#include <limits.h>
#include <math.h>

#ifdef USBEAM_CUDA_EMULATED /* g++ (cuda/emu) has no __noinline__ */
#define DAS_NOINLINE __attribute__((noinline))
#else
#define DAS_NOINLINE __noinline__
#endif

namespace {

enum { STAGE_BEAMFORM = 0 };
const char *const STAGE_NAMES[] = {"das.beamform"};

/* Tuning (to measure on a GPU; see the top): warps per block (columns of a lattice tile, runs of
 * a list) and float accumulators per thread per pass (16 would halve the lanes per point and
 * the shuffles, at ~20 more registers: 16 warps per multiprocessor instead of 20). */
constexpr int COLUMNS = 4;
constexpr int THREADS = 32 * COLUMNS;
constexpr int ACC_FLOATS = 8;
constexpr unsigned FULL = 0xffffffffu;
/* Coordinates in samples are split as integer + fraction in float: the integers (and 2 y - e_y)
 * must stay exact, |.| < 2^24; the plan refuses geometry beyond this (hundreds of metres). */
constexpr double MAX_SAMPLES_COORDINATE = 4194304.0; /* 2^22 */
constexpr double MAX_REFERENCE = 536870912.0;        /* 2^29: |S| clamp (int arithmetic) */

struct DasGeometry {
    const double *points;                 /* (n_points, 3), m */
    const float4 *element;                /* (n_elements): x_hi, x_lo (samples), full-aperture window, 0 */
    const float4 *element_yz;             /* (n_elements): y_hi, y_lo, z_hi, z_lo (samples); NULL: planar */
    const double *element_general;        /* (n_elements, 12): x, y, z (m), frame t1, t2, n; NULL: the
                                             linear array's aperture |dx| <= z / 2F */
    int surface;                          /* general: a 2-D face (both lateral directions) */
    double f_number, tukey_alpha;         /* general: the cone's f-number; the window's taper */
    const usbeam_tx_model *tx;            /* (n_transmits), sources on the device */
    const double *tx_path;                /* (n_points, n_transmits) transmit paths, m; NULL: computed */
    const int32_t *aperture_first, *aperture_count; /* (n_points) */
    unsigned *input_fault;                /* mapped host word (exec.cuh) */
    int n_elements, n_transmits, n_samples, n_frames;
    size_t n_points;
    /* thread -> point: p = a * stride_a + b * stride_b + blockIdx.z * stride_c, a < extent_a (down
     * a column: a = blockIdx.x * G + group), b < extent_b (the column: blockIdx.y * blockDim.y +
     * threadIdx.y); a list: a = (blockIdx.x * blockDim.y + threadIdx.y) * G + group, b = 0 */
    size_t stride_a, stride_b, stride_c;
    unsigned extent_a, extent_b;
    int list;
    int lanes;                            /* FL: lanes per point (1 when the input is read in place) */
    int vectors;                          /* 16-byte vectors per scratch row */
    int passes;                           /* frame passes */
    double k;                             /* fs / c: samples per m */
    double t0_fs;                         /* t0 fs */
    double cycles_per_m;                  /* fc / c */
    float ratio_hi, ratio_lo;             /* fc / fs = ratio_hi + ratio_lo */
    double half_per_z;                    /* k / (2 f_number): aperture half-width per m of depth; 0: full */
    float tukey_flat, tukey_turns;        /* 1 - alpha, 0.5 / alpha (Tukey taper in turns) */
    int window;
};

/* ---- per-type access to the data ------------------------------------------------------------ */

/* The frames a thread loads at once: WIDE, a 16-byte vector of a scratch row (FPV frames);
 * otherwise one sample of the input read in place (one frame).  unpack writes NV floats (IQ:
 * re, im interleaved). */
template <typename In, bool WIDE>
struct Frames;

template <>
struct Frames<float2, true> {
    typedef uint4 Vec;
    static constexpr bool IQ = true;
    static constexpr int FPV = 2, NV = 4;
    static __device__ __forceinline__ void unpack(const Vec &v, float x[NV])
    {
        x[0] = __uint_as_float(v.x), x[1] = __uint_as_float(v.y);
        x[2] = __uint_as_float(v.z), x[3] = __uint_as_float(v.w);
    }
};
template <>
struct Frames<float, true> {
    typedef uint4 Vec;
    static constexpr bool IQ = false;
    static constexpr int FPV = 4, NV = 4;
    static __device__ __forceinline__ void unpack(const Vec &v, float x[NV])
    {
        x[0] = __uint_as_float(v.x), x[1] = __uint_as_float(v.y);
        x[2] = __uint_as_float(v.z), x[3] = __uint_as_float(v.w);
    }
};
/* int16 -> float without a conversion instruction (16 per clock per SM): 2^23 + (s + 2^15) as
 * float bits, minus 2^23 + 2^15, exact.  One LOP3 (and a shift for the high half) + one FADD. */
__device__ __forceinline__ float int16_lo(unsigned w)
{
    return __uint_as_float((w & 0xffffu) ^ 0x4b008000u) - 8421376.0f;
}
__device__ __forceinline__ float int16_hi(unsigned w) { return __uint_as_float((w >> 16) ^ 0x4b008000u) - 8421376.0f; }
template <>
struct Frames<short, true> {
    typedef uint4 Vec;
    static constexpr bool IQ = false;
    static constexpr int FPV = 8, NV = 8;
    static __device__ __forceinline__ void unpack(const Vec &v, float x[NV])
    {
        x[0] = int16_lo(v.x), x[1] = int16_hi(v.x), x[2] = int16_lo(v.y), x[3] = int16_hi(v.y);
        x[4] = int16_lo(v.z), x[5] = int16_hi(v.z), x[6] = int16_lo(v.w), x[7] = int16_hi(v.w);
    }
};
template <>
struct Frames<float2, false> {
    typedef float2 Vec;
    static constexpr bool IQ = true;
    static constexpr int FPV = 1, NV = 2;
    static __device__ __forceinline__ void unpack(const Vec &v, float x[NV]) { x[0] = v.x, x[1] = v.y; }
};
template <>
struct Frames<float, false> {
    typedef float Vec;
    static constexpr bool IQ = false;
    static constexpr int FPV = 1, NV = 1;
    static __device__ __forceinline__ void unpack(const Vec &v, float x[NV]) { x[0] = v; }
};
template <>
struct Frames<short, false> {
    typedef short Vec;
    static constexpr bool IQ = false;
    static constexpr int FPV = 1, NV = 1;
    static __device__ __forceinline__ void unpack(const Vec &v, float x[NV]) { x[0] = (float)v; }
};

/* ---- float32 math ---------------------------------------------------------------------------- */

/* sin and cos of 2 pi v for |v| <= 1/2: a quarter turn q = rint(4 v) is removed exactly, leaving
 * |x| <= pi/4 where Taylor polynomials of degree 9 and 10 are below float rounding (truncation
 * < 2e-9); |error| <= 2e-7 with the rounding of 2 pi r.  Written out (not sincospif) so the
 * emulator and the GPU evaluate the same polynomial. */
__device__ __forceinline__ void sincos_turns_f(float v, float *sin_out, float *cos_out)
{
    const float q = rintf(4.0f * v);
    const float r = fmaf(-0.25f, q, v); /* exact: |r| <= 1/8 */
    const float x = r * 6.28318530717958647692f, x2 = x * x;
    float sp = fmaf(x2, 2.75573192e-6f, -1.98412698e-4f);
    sp = fmaf(sp, x2, 8.33333333e-3f);
    sp = fmaf(sp, x2, -1.66666667e-1f);
    const float s = fmaf(sp * x2, x, x);
    float cp = fmaf(x2, -2.75573192e-7f, 2.48015873e-5f);
    cp = fmaf(cp, x2, -1.38888889e-3f);
    cp = fmaf(cp, x2, 4.16666667e-2f);
    cp = fmaf(cp, x2, -0.5f);
    const float c = fmaf(cp, x2, 1.0f);
    const int quadrant = (int)q & 3; /* rotate (c, s) by q quarter turns */
    const bool swap = quadrant & 1;
    const float sin_v = swap ? c : s, cos_v = swap ? s : c;
    *sin_out = (quadrant == 2 || quadrant == 3) ? -sin_v : sin_v;
    *cos_out = (quadrant == 1 || quadrant == 2) ? -cos_v : cos_v;
}

/* Window weight at a = |u| in [0, 1] (the point's own aperture; a is clamped, so an aperture
 * member just past |u| = 1 by rounding keeps its rect weight 1 and its taper weight 0). */
__device__ __forceinline__ float window_f(const DasGeometry &g, float a)
{
    float s, c;
    if (g.window == USBEAM_WINDOW_HANN) {
        sincos_turns_f(0.5f * a, &s, &c); /* cos(pi a) */
        return 0.5f + 0.5f * c;
    }
    if (g.window == USBEAM_WINDOW_TUKEY && a > g.tukey_flat) {
        sincos_turns_f((a - g.tukey_flat) * g.tukey_turns, &s, &c); /* cos(pi (a - (1 - alpha)) / alpha) */
        return 0.5f + 0.5f * c;
    }
    return 1.0f;
}

/* (hi, lo) - b (hi, lo) for the general (non-planar) geometry: subtract e (2 p - e) from
 * N = (n_hi, n_lo), e = (eh, el), 2 p = (ph2, pl2), with error-free transformations. */
__device__ __forceinline__ void subtract_offset(float &n_hi, float &n_lo, float eh, float el, float ph2, float pl2)
{
    const float a = ph2 - eh, b = pl2 - el; /* a exact (integers) */
    const float vh = a + b, bb = vh - a, vl = (a - (vh - bb)) + (b - bb); /* TwoSum */
    const float th = __fmul_rn(eh, vh);
    const float tl = fmaf(eh, vh, -th) + fmaf(eh, vl, el * vh);
    const float s = n_hi - th, sb = s - n_hi;
    const float err = (n_hi - (s - sb)) + (-th - sb);
    n_hi = s;
    n_lo = n_lo + err - tl;
}

/* What every lane of a point keeps: the point in float pieces (samples). */
struct PointRef {
    float x_hi, x_lo;           /* x k split on the sample grid */
    float rho_hi, m2rho_lo;     /* rho k = rho_hi + rho_lo (m2rho_lo = -2 rho_lo) */
    float inv_half;             /* 1 / aperture half-width (samples), f-number apertures */
};
/* ... and per transmit: the reference sample and cycle. */
struct TxRef {
    int s_int;                  /* floor(S) */
    float s_frac, s_f;          /* S - floor(S); S as float (range check) */
    float c_frac;               /* C - rint(C), cycles */
};

__device__ __forceinline__ void split_samples(double v, float &hi, float &lo)
{
    const double h = rint(v);
    hi = (float)h;
    lo = (float)(v - h);
}

__device__ __forceinline__ PointRef point_ref(const DasGeometry &g, const double *pt)
{
    PointRef r;
    const double x = pt[0], y = pt[1], z = pt[2];
    split_samples(x * g.k, r.x_hi, r.x_lo);
    const double rho = sqrt(y * y + z * z) * g.k; /* once per point */
    r.rho_hi = (float)rho;
    const float rho_lo = (float)(rho - (double)r.rho_hi);
    r.m2rho_lo = -2.0f * rho_lo;
    const double half = z * g.half_per_z;
    r.inv_half = half > 0.0 ? (float)(1.0 / half) : 0.0f;
    return r;
}

/* The reference of point pt for transmit t, in double.  Not inlined: it runs once per point and
 * transmit, and inlined it would keep the point's doubles (and the virtual-source loop's state)
 * in registers across the element loop. */
__device__ DAS_NOINLINE TxRef transmit_ref(const double *pt, const usbeam_tx_model *tx, const double *tx_path,
                                           size_t p, int t, int n_transmits, double k, double t0_fs,
                                           double cycles_per_m)
{
    const double x = pt[0], y = pt[1], z = pt[2];
    const double path = tx_path ? tx_path[p * (size_t)n_transmits + t] : usbeam_tx_path(&tx[t], x, y, z);
    const double ref = path + sqrt(y * y + z * z); /* m: transmit path + rho */
    double s = fma(ref, k, -t0_fs);
    s = fmin(fmax(s, -MAX_REFERENCE), MAX_REFERENCE);
    const double fl = floor(s);
    TxRef r;
    r.s_int = (int)fl;
    r.s_frac = (float)(s - fl);
    r.s_f = (float)s;
    const double cycles = ref * cycles_per_m;
    r.c_frac = (float)(cycles - rint(cycles));
    return r;
}

/* Delay and weights of element e for one point and transmit: returns the first tap, or -1 when
 * the sample is outside the interpolation's range (usbeam_math.h) or of zero window weight.
 * w[] are the interpolation weights times the window (for IQ nearest the window goes into the
 * rotation instead); (rot_c, rot_s) = exp(+j 2 pi fc tau) for IQ. */
template <int TAPS, bool IQ>
__device__ __forceinline__ int pair_delay(const DasGeometry &g, const PointRef &pr, const TxRef &tr, const double *pt,
                                          int e, float w[TAPS], float &rot_c, float &rot_s)
{
    const float4 el = __ldg(&g.element[e]);
    /* dx = x - x_e in samples, exactly rounded, with its rounding error (Fast2Sum: |a| >= |b|
     * or a = 0, a an integer and |b| <= 1) */
    const float a = pr.x_hi - el.x, b = pr.x_lo - el.y;
    const float dx = a + b, dx_lo = b - (dx - a);
    /* N = |p - e|^2 - rho^2 as (n_hi, n_lo) */
    float n_hi = __fmul_rn(dx, dx);
    float n_lo = fmaf(dx, dx, -n_hi) + 2.0f * dx * dx_lo;
    if (g.element_yz) { /* elements off the x axis (rare): 2 y and 2 z split here, not kept */
        const float4 yz = __ldg(&g.element_yz[e]);
        float h, l;
        split_samples(pt[1] * g.k, h, l);
        subtract_offset(n_hi, n_lo, yz.x, yz.y, 2.0f * h, 2.0f * l);
        split_samples(pt[2] * g.k, h, l);
        subtract_offset(n_hi, n_lo, yz.z, yz.w, 2.0f * h, 2.0f * l);
        /* the pieces of e (integer + fraction) leave n_lo as large as |e_z| z: renormalise, or
         * the guess below would miss it (TwoSum: either may be the larger) */
        const float s = n_hi + n_lo, sb = s - n_hi;
        n_lo = (n_hi - (s - sb)) + (n_lo - sb);
        n_hi = s;
    }
    /* Delta = r - rho: a guess d0 from rsqrtf (|error| ~ 1e-7 r), then one Newton step on
     * N = Delta (2 rho + Delta): Delta = d0 + R / (2 r), R = N - d0^2 - 2 rho d0.  The products
     * are split exactly (FMA) and the larger one is taken from N first: that difference is
     * exact (Sterbenz: N lies within a factor 2 of it), and so is the next up to ~1e-14 N, so R
     * is exact to float rounding of its small terms whatever the geometry. */
    const float r2 = fmaf(pr.rho_hi, pr.rho_hi, n_hi);
    const float rs = r2 > 0.0f ? rsqrtf(r2) : 0.0f;
    const float d0 = r2 * rs - pr.rho_hi;
    const float m2rho = -2.0f * pr.rho_hi;
    const float sq = __fmul_rn(d0, d0), sq_lo = fmaf(d0, d0, -sq);
    const float pq = __fmul_rn(m2rho, d0), pq_lo = fmaf(m2rho, d0, -pq); /* -2 rho_hi d0 */
    const float r_hi = sq >= fabsf(pq) ? __fadd_rn(n_hi - sq, pq) : __fsub_rn(n_hi + pq, sq);
    const float residual = r_hi + (((n_lo - sq_lo) + pq_lo) + pr.m2rho_lo * d0);
    const float d_lo = residual * (0.5f * rs);
    /* s = S + d0 + d_lo: whole samples apart first, so no sum rounds at the size of s */
    const float s_est = tr.s_f + d0;
    if (!(s_est > -4.0f && s_est < (float)g.n_samples + 4.0f)) return -1; /* far out; NaN-safe */
    const float d_int = floorf(d0);
    const float sf = (tr.s_frac + (d0 - d_int)) + d_lo;
    const float sf_int = floorf(sf);
    const float t = sf - sf_int;
    const int k = tr.s_int + (int)d_int + (int)sf_int; /* floor(s) */
    const int n = g.n_samples;
    int first;
    if (TAPS == 1) { /* 0 <= s <= n-1, round half to even */
        if (!(k >= 0 && (k < n - 1 || (k == n - 1 && t == 0.0f)))) return -1;
        first = k + ((t > 0.5f || (t == 0.5f && (k & 1))) ? 1 : 0);
        w[0] = 1.0f;
    } else if (TAPS == 2) { /* 0 <= s <= n-2 */
        if (!(k >= 0 && (k < n - 2 || (k == n - 2 && t == 0.0f)))) return -1;
        first = k;
        w[0] = 1.0f - t;
        w[1] = t;
    } else { /* 1 <= s <= n-3: Catmull-Rom */
        if (!(k >= 1 && (k < n - 3 || (k == n - 3 && t == 0.0f)))) return -1;
        first = k - 1;
        usbeam_catmull_rom_weights(t, w);
    }
    float apod;
    if (g.element_general && g.f_number > 0.0) { /* the element's own cone, in double (rare geometry) */
        const double *row = g.element_general + 12 * (size_t)e;
        apod = (float)usbeam_element_window(row + 3, g.surface, g.f_number, g.window, g.tukey_alpha, pt[0] - row[0],
                                            pt[1] - row[1], pt[2] - row[2]);
    } else {
        apod = g.half_per_z > 0.0 && !g.element_general ? window_f(g, fminf(fabsf(dx * pr.inv_half), 1.0f)) : el.z;
    }
    if (apod == 0.0f) return -1;
    if (IQ) {
        /* fc tau = C_ref + (d0 + d_lo) fc / fs, whole cycles removed before each sum */
        const float p = __fmul_rn(d0, g.ratio_hi);
        const float p_err = fmaf(d0, g.ratio_hi, -p);
        float cycles = (tr.c_frac + (p - rintf(p))) + (p_err + fmaf(d0, g.ratio_lo, d_lo * g.ratio_hi));
        cycles -= rintf(cycles);
        sincos_turns_f(cycles, &rot_s, &rot_c);
    }
    if (IQ && TAPS == 1) {
        rot_c *= apod;
        rot_s *= apod;
    } else {
        for (int q = 0; q < TAPS; ++q) w[q] *= apod;
    }
    return first;
}

/* [lo, hi) -> the union over the 32 lanes of the warp (every lane must call it). */
__device__ __forceinline__ void warp_range_union(int &lo, int &hi)
{
    for (int lane_mask = 16; lane_mask > 0; lane_mask >>= 1) {
        lo = min(lo, __shfl_xor_sync(FULL, lo, lane_mask));
        hi = max(hi, __shfl_xor_sync(FULL, hi, lane_mask));
    }
}

/* One group of FL lanes per point: out[f][p] = sum over (transmit, aperture element) of the
 * interpolated, windowed (IQ: phase-rotated) sample of frame f.  data: the scratch rows
 * (WIDE) or the input itself (one frame). */
template <typename In, int TAPS, bool WIDE>
__global__ void __launch_bounds__(THREADS, 5) das_kernel(const DasGeometry g, const void *__restrict__ data_,
                                                      float *__restrict__ out)
{
    typedef Frames<In, WIDE> F;
    typedef typename F::Vec Vec;
    constexpr bool IQ = F::IQ;
    constexpr int NV = F::NV, VPT = WIDE ? ACC_FLOATS / NV : 1;
    constexpr int WEIGHTS = (IQ && TAPS == 1) ? 0 : TAPS; /* IQ nearest: the window is in the rotation */
    const Vec *__restrict__ data = (const Vec *)data_;
    const int fl = WIDE ? g.lanes : 1;
    const int lane = (int)threadIdx.x;
    const int lane_f = lane & (fl - 1), group = lane / fl, per_warp = 32 / fl;
    unsigned a, b;
    if (g.list) {
        a = (blockIdx.x * blockDim.y + threadIdx.y) * (unsigned)per_warp + (unsigned)group;
        b = 0;
    } else {
        a = blockIdx.x * (unsigned)per_warp + (unsigned)group;
        b = blockIdx.y * blockDim.y + threadIdx.y;
    }
    const bool inside = a < g.extent_a && b < g.extent_b;
    /* the point's slot in the block's stage: consecutive slots are consecutive points in out */
    __shared__ float stage[ACC_FLOATS * THREADS];
    const int tid = (int)(threadIdx.y * blockDim.x + threadIdx.x), threads = (int)(blockDim.x * blockDim.y);
    const int points_per_block = per_warp * (int)blockDim.y, block_shift = __ffs(points_per_block) - 1;
    const int slot = g.list ? (int)threadIdx.y * per_warp + group : group * (int)blockDim.y + (int)threadIdx.y;
    const size_t p = inside ? a * g.stride_a + b * g.stride_b + blockIdx.z * g.stride_c : 0;
    const int first = inside ? g.aperture_first[p] : 0, last = inside ? first + g.aperture_count[p] : 0;
    /* The warp walks the union of its points' apertures (nested down a column): every lane
     * takes part in every broadcast; a point skips the elements outside its own aperture. */
    int union_first = first < last ? first : INT_MAX, union_last = first < last ? last : INT_MIN;
    warp_range_union(union_first, union_last); /* empty: the loops below run no element, zeros are stored */

    const double *pt = g.points + 3 * p;
    const PointRef pr = point_ref(g, pt);
    const unsigned row_vectors = WIDE ? (unsigned)g.vectors : 1u; /* 32-bit offsets: the plan checks the size */
    bool non_finite = false;

    for (int pass = 0; pass < g.passes; ++pass) {
        const int vector0 = WIDE ? pass * fl * VPT + lane_f : 0; /* this lane's first vector of the row */
        float acc[VPT][NV];
#pragma unroll
        for (int v = 0; v < VPT; ++v)
#pragma unroll
            for (int i = 0; i < NV; ++i) acc[v][i] = 0.0f;
        bool vector_ok[VPT];
#pragma unroll
        for (int v = 0; v < VPT; ++v) vector_ok[v] = WIDE ? vector0 + v * fl < g.vectors : v == 0;

        for (int t = 0; t < g.n_transmits; ++t) {
            const TxRef tr = transmit_ref(pt, g.tx, g.tx_path, p, t, g.n_transmits, g.k, g.t0_fs, g.cycles_per_m);
            const unsigned channel0 = (unsigned)t * (unsigned)g.n_elements; /* (transmit, element 0) */
            for (int e0 = union_first; e0 < union_last; e0 += fl) {
                const int e = e0 + lane_f;
                float w[TAPS], rot_c = 1.0f, rot_s = 0.0f;
#pragma unroll
                for (int q = 0; q < TAPS; ++q) w[q] = 0.0f;
                int tap = -1;
                if (e >= first && e < last) tap = pair_delay<TAPS, IQ>(g, pr, tr, pt, e, w, rot_c, rot_s);
                const int n_here = min(fl, union_last - e0);
                for (int j = 0; j < n_here; ++j) {
                    /* broadcast element e0 + j's delay from lane j of the group */
                    int tap_j = tap;
                    float w_j[TAPS], c_j = rot_c, s_j = rot_s;
#pragma unroll
                    for (int q = 0; q < TAPS; ++q) w_j[q] = w[q];
                    if (WIDE) {
                        tap_j = __shfl_sync(FULL, tap, j, fl);
#pragma unroll
                        for (int q = 0; q < WEIGHTS; ++q) w_j[q] = __shfl_sync(FULL, w[q], j, fl);
                        if (IQ) {
                            c_j = __shfl_sync(FULL, rot_c, j, fl);
                            s_j = __shfl_sync(FULL, rot_s, j, fl);
                        }
                    }
                    if (tap_j < 0) continue;
                    const unsigned sample_row =
                        (channel0 + (unsigned)(e0 + j)) * (unsigned)g.n_samples + (unsigned)tap_j;
                    const Vec *row = data + (sample_row * row_vectors + (unsigned)vector0);
#pragma unroll
                    for (int v = 0; v < VPT; ++v) {
                        if (!vector_ok[v]) continue;
                        float xs[TAPS][NV];
#pragma unroll
                        for (int q = 0; q < TAPS; ++q) F::unpack(__ldg(row + q * row_vectors + v * fl), xs[q]);
                        if (IQ) {
#pragma unroll
                            for (int i = 0; i < NV; i += 2) {
                                float re, im;
                                if (WEIGHTS == 0) {
                                    re = xs[0][i];
                                    im = xs[0][i + 1];
                                } else {
                                    re = w_j[0] * xs[0][i];
                                    im = w_j[0] * xs[0][i + 1];
#pragma unroll
                                    for (int q = 1; q < TAPS; ++q) {
                                        re = fmaf(w_j[q], xs[q][i], re);
                                        im = fmaf(w_j[q], xs[q][i + 1], im);
                                    }
                                }
                                acc[v][i] = fmaf(c_j, re, fmaf(-s_j, im, acc[v][i]));
                                acc[v][i + 1] = fmaf(s_j, re, fmaf(c_j, im, acc[v][i + 1]));
                            }
                        } else {
#pragma unroll
                            for (int i = 0; i < NV; ++i) {
                                float sum = acc[v][i];
#pragma unroll
                                for (int q = 0; q < TAPS; ++q) sum = fmaf(w_j[q], xs[q][i], sum);
                                acc[v][i] = sum;
                            }
                        }
                    }
                }
            }
        }
        /* Stores: the block's sums go through shared memory so that a warp writes runs of
         * consecutive points of one frame (a lane holds frames of one point, which are
         * n_points apart in out): stage[frame of the pass][point of the block]. */
        __syncthreads(); /* the previous pass has read the stage */
#pragma unroll
        for (int v = 0; v < VPT; ++v)
#pragma unroll
            for (int i = 0; i < NV; ++i) {
                const int f = (lane_f + v * fl) * F::FPV + (IQ ? i / 2 : i); /* frame of the pass */
                stage[(f * points_per_block + slot) * (IQ ? 2 : 1) + (IQ ? i % 2 : 0)] = acc[v][i];
            }
        __syncthreads();
        const int frames_per_pass = fl * VPT * F::FPV, frame0 = pass * frames_per_pass;
        for (int q = tid; q < frames_per_pass * points_per_block; q += threads) {
            const int f = frame0 + (q >> block_shift), s = q & (points_per_block - 1);
            if (f >= g.n_frames) break; /* q grows with f */
            unsigned a_s, b_s;
            if (g.list) {
                a_s = (blockIdx.x * blockDim.y) * (unsigned)per_warp + (unsigned)s;
                b_s = 0;
            } else {
                a_s = blockIdx.x * (unsigned)per_warp + (unsigned)s / blockDim.y;
                b_s = blockIdx.y * blockDim.y + (unsigned)s % blockDim.y;
            }
            if (!(a_s < g.extent_a && b_s < g.extent_b)) continue;
            const size_t o = (size_t)f * g.n_points + a_s * g.stride_a + b_s * g.stride_b + blockIdx.z * g.stride_c;
            /* A NaN or inf read from data stays NaN or inf through every later sum (x * 0
             * included), so a non-finite output is the test for non-finite input the point read
             * (int16 cannot be).  The flag is a plain store to mapped host memory. */
            if (IQ) {
                const float re = stage[2 * q], im = stage[2 * q + 1];
                ((float2 *)out)[o] = make_float2(re, im);
                non_finite |= !isfinite(re) || !isfinite(im);
            } else {
                out[o] = stage[q];
                if (sizeof(In) == sizeof(float)) non_finite |= !isfinite(stage[q]);
            }
        }
    }
    if (non_finite) *(volatile unsigned *)g.input_fault = USBEAM_INPUT_FAULT_NONFINITE;
}

/* (n_frames, channels, n_samples) -> (channels, n_samples, row) with frames >= n_frames zero:
 * tiles of 32 samples x 32 frames through shared memory, read along samples and written along
 * frames (a channel's 32 samples x row frames are contiguous in the scratch). */
template <typename T>
__global__ void __launch_bounds__(256) transpose_kernel(const T *__restrict__ in, T *__restrict__ scratch, int n_frames,
                                                        int row, int n_samples, size_t channels, unsigned sample_tiles)
{
    __shared__ T tile[32][33];
    const size_t channel = blockIdx.x / sample_tiles;
    const int s0 = (int)(blockIdx.x % sample_tiles) * 32, f0 = (int)blockIdx.y * 32;
    const int tx = (int)threadIdx.x;
    for (int fy = (int)threadIdx.y; fy < 32; fy += 8) {
        const int f = f0 + fy, s = s0 + tx;
        T v = T();
        if (f < n_frames && s < n_samples) v = in[((size_t)f * channels + channel) * n_samples + s];
        tile[fy][tx] = v;
    }
    __syncthreads();
    for (int sy = (int)threadIdx.y; sy < 32; sy += 8) {
        const int s = s0 + sy, f = f0 + tx;
        if (s < n_samples && f < row) scratch[(channel * n_samples + s) * (size_t)row + f] = tile[tx][sy];
    }
}

/* Transmit paths (m) of every (point, transmit), once at plan creation: the virtual-source
 * model takes the min over 4N sources, far too much to redo per call. */
__global__ void __launch_bounds__(256) tx_path_kernel(const double *__restrict__ points, const usbeam_tx_model *tx,
                                                      size_t n_points, int n_transmits, double *__restrict__ path)
{
    const size_t total = n_points * (size_t)n_transmits;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        const size_t p = i / (size_t)n_transmits;
        const int t = (int)(i % (size_t)n_transmits);
        path[i] = usbeam_tx_path(&tx[t], points[3 * p], points[3 * p + 1], points[3 * p + 2]);
    }
}

} // namespace

struct usbeam_das_cuda {
    usbeam_cuda_exec *exec;
    DasGeometry geometry;  /* device pointers */
    usbeam_dtype input_dtype;
    int taps;
    bool wide;             /* the input goes through the scratch (n_frames > 1) */
    void *scratch;         /* (n_transmits x n_elements, n_samples, row) of the input's type */
    int row;               /* frames per scratch row (n_frames padded to 16 bytes) */
    size_t channels;       /* n_transmits x n_elements */
    unsigned sample_tiles;
    dim3 block, grid, transpose_grid;
};

/* Length of the rows of points (the run from point 0 sharing its y and z) when the points
 * are a lattice (n_slices, n_rows, row_length), row fastest, as Grid's (nz, nx) and
 * (ny, nz, nx) orders make them: every row of one y and one z, every slice of one y.
 * 0 when they are not.  Only the speed depends on this (neighbouring threads, neighbouring
 * delays): any point list is beamformed correctly either way. */
static size_t lattice_row_length(const double *pts, size_t n_points, size_t *rows_per_slice)
{
    size_t row = 1;
    while (row < n_points && pts[3 * row + 1] == pts[1] && pts[3 * row + 2] == pts[2]) ++row;
    if (row < 2 || n_points % row != 0 || n_points == row) return 0;
    size_t rows = 1; /* rows of the first slice: those starting with its y */
    while (rows < n_points / row && pts[3 * rows * row + 1] == pts[1]) ++rows;
    if ((n_points / row) % rows != 0) return 0;
    for (size_t q = 0; q < n_points; ++q) {
        const double *row_start = pts + 3 * (q - q % row), *slice_start = pts + 3 * (q - q % (row * rows));
        if (pts[3 * q + 1] != slice_start[1] || pts[3 * q + 2] != row_start[2]) return 0;
    }
    *rows_per_slice = rows;
    return row;
}

/* cudaMalloc + upload of bytes from host. */
static usbeam_status upload(usbeam_cuda_exec *e, const void *host, size_t bytes, const char *what, void **device)
{
    usbeam_status st = usbeam_cuda_exec_alloc(e, bytes, what, device);
    if (st == USBEAM_OK) st = usbeam_cuda_exec_upload(e, *device, host, bytes);
    return st;
}

/* v (samples) as float hi (integer) + lo; false when beyond the exact range of the split. */
static bool split_host(double v, float *hi, float *lo)
{
    if (!(fabs(v) < MAX_SAMPLES_COORDINATE)) return false;
    const double h = rint(v);
    *hi = (float)h;
    *lo = (float)(v - h);
    return true;
}

static unsigned next_pow2(unsigned v)
{
    unsigned p = 1;
    while (p < v) p <<= 1;
    return p;
}

/* Per-element geometry in samples and the full-aperture window (the CPU's own, in double),
 * uploaded as float4 rows; a second table of y and z only when some element is off the x axis. */
static usbeam_status element_tables(usbeam_das_cuda *p, const usbeam_das_tables *tables, double k)
{
    const usbeam_das_params *prm = tables->params;
    const size_t n_el = prm->n_elements;
    float4 *xs = (float4 *)usbeam_alloc(n_el * sizeof(float4)), *yz = (float4 *)usbeam_alloc(n_el * sizeof(float4));
    usbeam_status st = USBEAM_OK;
    if (!xs || !yz) st = usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "das CUDA plan: element tables");
    bool planar = true, in_range = true;
    const double half = tables->window_half_width, inv_half = half > 0.0 ? 1.0 / half : 0.0;
    for (size_t e = 0; st == USBEAM_OK && e < n_el; ++e) {
        const double u = (tables->element_x[e] - tables->window_center) * inv_half;
        float w = (float)(tables->general ? tables->element_window[e] : usbeam_window((int)prm->window, u, prm->tukey_alpha));
        xs[e] = make_float4(0.0f, 0.0f, w, 0.0f);
        yz[e] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        in_range &= split_host(tables->element_x[e] * k, &xs[e].x, &xs[e].y);
        in_range &= split_host(tables->element_y[e] * k, &yz[e].x, &yz[e].y);
        in_range &= split_host(tables->element_z[e] * k, &yz[e].z, &yz[e].w);
        planar &= tables->element_y[e] == 0.0 && tables->element_z[e] == 0.0;
    }
    if (st == USBEAM_OK && !in_range)
        st = usbeam_fail(USBEAM_ERR_UNSUPPORTED,
                         "element_positions: das on CUDA needs |position| x fs / c < 2^22 samples");
    DasGeometry *g = &p->geometry;
    if (st == USBEAM_OK)
        st = upload(p->exec, xs, n_el * sizeof(float4), "elements", (void **)&g->element);
    if (st == USBEAM_OK && !planar)
        st = upload(p->exec, yz, n_el * sizeof(float4), "elements", (void **)&g->element_yz);
    usbeam_free(xs);
    usbeam_free(yz);
    if (st == USBEAM_OK && tables->general) { /* positions and frames for the cone apertures */
        double *rows = (double *)usbeam_alloc(n_el * 12 * sizeof(double));
        if (!rows) return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "das CUDA plan: element frames");
        for (size_t e = 0; e < n_el; ++e) {
            rows[12 * e] = tables->element_x[e];
            rows[12 * e + 1] = tables->element_y[e];
            rows[12 * e + 2] = tables->element_z[e];
            for (int q = 0; q < 9; ++q) rows[12 * e + 3 + q] = tables->element_frame[q * n_el + e];
        }
        st = upload(p->exec, rows, n_el * 12 * sizeof(double), "element frames", (void **)&g->element_general);
        usbeam_free(rows);
        g->surface = prm->surface;
        g->f_number = prm->f_number;
        g->tukey_alpha = prm->tukey_alpha;
    }
    return st;
}

/* The transmit models (sources pointed into their device copy) and, when some transmit is a
 * virtual-source model and the table fits the plan's budget, every (point, transmit) path,
 * computed once on the device. */
static usbeam_status transmit_tables(usbeam_das_cuda *p, const usbeam_das_tables *tables)
{
    const usbeam_das_params *prm = tables->params;
    DasGeometry *g = &p->geometry;
    const size_t n_tx = prm->n_transmits, n_sources = tables->n_source_values; /* doubles */
    void *sources = nullptr;
    usbeam_status st = USBEAM_OK;
    if (n_sources)
        st = upload(p->exec, tables->tx_sources, n_sources * sizeof(double), "transmit sources", &sources);
    usbeam_tx_model *tx = nullptr;
    if (st == USBEAM_OK) {
        tx = (usbeam_tx_model *)usbeam_alloc(n_tx * sizeof *tx);
        if (!tx) st = usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "transmits");
    }
    if (st == USBEAM_OK) {
        for (size_t t = 0; t < n_tx; ++t) {
            tx[t] = tables->tx[t];
            if (tx[t].n_sources > 0)
                tx[t].sources = (const double *)sources + (tables->tx[t].sources - tables->tx_sources);
        }
        st = upload(p->exec, tx, n_tx * sizeof *tx, "transmits", (void **)&g->tx);
    }
    usbeam_free(tx);
    size_t table_bytes = 0;
    const size_t budget = prm->max_table_bytes ? prm->max_table_bytes : (size_t)1 << 30;
    if (st != USBEAM_OK || n_sources == 0 || usbeam_mul_size3(prm->n_points, n_tx, sizeof(double), &table_bytes) != 0 ||
        table_bytes > budget)
        return st; /* computed per point in the kernel */
    st = usbeam_cuda_exec_alloc(p->exec, table_bytes, "transmit paths", (void **)&g->tx_path);
    unsigned cap = 0;
    if (st == USBEAM_OK) st = usbeam_cuda_exec_grid_cap(p->exec, &cap);
    if (st == USBEAM_OK) {
        const size_t total = prm->n_points * n_tx, blocks = (total + 255) / 256;
        tx_path_kernel<<<(unsigned)(blocks < cap ? blocks : cap), 256, 0, usbeam_cuda_exec_cuda_stream(p->exec)>>>(
            g->points, g->tx, prm->n_points, (int)n_tx, (double *)g->tx_path);
        st = usbeam_cuda_check(cudaGetLastError(), "tx_path_kernel launch", __FILE__, __LINE__);
    }
    return st;
}

/* Frames: the scratch row (16-byte vectors), lanes per point and passes (see the top). */
static usbeam_status frame_layout(usbeam_das_cuda *p, const usbeam_das_params *prm)
{
    DasGeometry *g = &p->geometry;
    const size_t n_frames = prm->n_frames;
    const size_t bytes =
        prm->input_dtype == USBEAM_DTYPE_COMPLEX64 ? 8 : prm->input_dtype == USBEAM_DTYPE_FLOAT32 ? 4 : 2;
    const size_t floats_per_vector = prm->input_dtype == USBEAM_DTYPE_INT16 ? 8 : 4; /* Frames<>::NV */
    p->wide = n_frames > 1;
    p->channels = prm->n_transmits * prm->n_elements;
    g->lanes = 1;
    g->vectors = 1;
    g->passes = 1;
    size_t rows = 0; /* the kernel indexes rows and vectors in 32 bits */
    if (usbeam_mul_size(p->channels, prm->n_samples, &rows) != 0 || rows > UINT32_MAX)
        return usbeam_fail(USBEAM_ERR_UNSUPPORTED, "data: das on CUDA needs transmits x elements x samples < 2^32");
    if (!p->wide) return USBEAM_OK; /* one frame: the input is (transmit, element, sample, 1) already */
    const size_t frames_per_vector = 16 / bytes;
    const size_t vectors = (n_frames + frames_per_vector - 1) / frames_per_vector;
    const size_t per_thread = ACC_FLOATS / floats_per_vector;
    size_t lanes = next_pow2((unsigned)((vectors + per_thread - 1) / per_thread));
    if (lanes < 2) lanes = 2; /* vectors >= 2 here... */
    if (vectors < 2) lanes = 1; /* ... else one lane reads the row */
    if (lanes > 32) lanes = 32;
    g->lanes = (int)lanes;
    g->vectors = (int)vectors;
    g->passes = (int)((vectors + lanes * per_thread - 1) / (lanes * per_thread));
    size_t scratch_bytes = 0;
    if (usbeam_mul_size3(p->channels, prm->n_samples, vectors * 16, &scratch_bytes) != 0 ||
        scratch_bytes > USBEAM_MAX_ALLOCATION || scratch_bytes / 16 > UINT32_MAX ||
        vectors * frames_per_vector > INT32_MAX)
        return usbeam_fail(USBEAM_ERR_SIZE_OVERFLOW, "data: its transposed copy (%zu frames) is too large", n_frames);
    p->row = (int)(vectors * frames_per_vector);
    p->sample_tiles = (unsigned)((prm->n_samples + 31) / 32);
    const size_t blocks = p->channels * p->sample_tiles, frame_tiles = ((size_t)p->row + 31) / 32;
    if (blocks > (size_t)INT32_MAX || frame_tiles > 65535)
        return usbeam_fail(USBEAM_ERR_UNSUPPORTED, "data: too many channels, samples or frames for one CUDA launch");
    p->transpose_grid = dim3((unsigned)blocks, (unsigned)frame_tiles, 1);
    return usbeam_cuda_exec_alloc(p->exec, scratch_bytes, "transposed data", &p->scratch);
}

extern "C" usbeam_status usbeam_das_cuda_create(const usbeam_das_tables *tables, usbeam_das_cuda **out)
{
    if (!tables || !out) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "tables and out must not be NULL");
    *out = nullptr;
    const usbeam_das_params *prm = tables->params;
    if (prm->n_elements > (size_t)INT32_MAX || prm->n_transmits > (size_t)INT32_MAX ||
        prm->n_samples > (size_t)INT32_MAX / 2 || prm->n_frames > (size_t)INT32_MAX)
        return usbeam_fail(USBEAM_ERR_UNSUPPORTED,
                           "das on CUDA: elements, transmits, samples and frames must each be < 2^31");
    usbeam_das_cuda *p = (usbeam_das_cuda *)usbeam_alloc(sizeof *p);
    if (!p) return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "das CUDA plan");
    *p = usbeam_das_cuda{}; /* zeroed */
    p->input_dtype = prm->input_dtype;
    p->taps = usbeam_interp_taps((int)prm->interpolation);
    DasGeometry *g = &p->geometry;
    const size_t n_pts = prm->n_points;
    const double k = prm->fs / prm->c;

    usbeam_status st = usbeam_cuda_exec_create(STAGE_NAMES, 1, &p->exec);
    if (st == USBEAM_OK) {
        bool in_range = true; /* the float split of the points' coordinates (point_ref) */
        for (size_t q = 0; q < 3 * n_pts && in_range; ++q)
            in_range = fabs(tables->points[q] * k) < MAX_SAMPLES_COORDINATE;
        if (!in_range)
            st = usbeam_fail(USBEAM_ERR_UNSUPPORTED, "points: das on CUDA needs |position| x fs / c < 2^22 samples");
    }
    if (st == USBEAM_OK)
        st = upload(p->exec, tables->points, 3 * n_pts * sizeof(double), "points", (void **)&g->points);
    if (st == USBEAM_OK)
        st = upload(p->exec, tables->aperture_first, n_pts * sizeof(int32_t), "apertures", (void **)&g->aperture_first);
    if (st == USBEAM_OK)
        st = upload(p->exec, tables->aperture_count, n_pts * sizeof(int32_t), "apertures", (void **)&g->aperture_count);
    if (st == USBEAM_OK) st = element_tables(p, tables, k);
    if (st == USBEAM_OK) st = transmit_tables(p, tables);
    if (st == USBEAM_OK) st = frame_layout(p, prm);

    g->n_elements = (int)prm->n_elements;
    g->n_transmits = (int)prm->n_transmits;
    g->n_samples = (int)prm->n_samples;
    g->n_frames = (int)prm->n_frames;
    g->n_points = n_pts;
    g->k = k;
    g->t0_fs = prm->t0 * prm->fs;
    g->cycles_per_m = prm->fc / prm->c;
    const double ratio = prm->fc / prm->fs;
    g->ratio_hi = (float)ratio;
    g->ratio_lo = (float)(ratio - (double)g->ratio_hi);
    g->half_per_z = prm->f_number > 0.0 ? k / (2.0 * prm->f_number) : 0.0;
    g->window = (int)prm->window; /* USBEAM_DAS_* = USBEAM_WINDOW_* */
    if (g->window == USBEAM_WINDOW_TUKEY && !(prm->tukey_alpha > 0.0)) g->window = USBEAM_WINDOW_RECT;
    g->tukey_flat = (float)(1.0 - prm->tukey_alpha);
    g->tukey_turns = prm->tukey_alpha > 0.0 ? (float)(0.5 / prm->tukey_alpha) : 0.0f;

    if (st == USBEAM_OK) st = usbeam_cuda_exec_input_fault_flag(p->exec, &g->input_fault);
    if (st == USBEAM_OK) {
        /* Blocks: COLUMNS warps of G points each.  A lattice: G points down a column per warp,
         * the block's warps on neighbouring columns (fewer in a grid narrower than 8). */
        const unsigned per_warp = 32u / (unsigned)g->lanes;
        size_t rows = 0;
        const size_t row = lattice_row_length(tables->points, n_pts, &rows);
        const size_t slices = row ? n_pts / (row * rows) : 0;
        unsigned columns = COLUMNS;
        while (row && columns > 1 && columns / 2 >= row) columns /= 2; /* no idle columns in a narrow grid */
        if (row && rows <= UINT32_MAX && (rows + per_warp - 1) / per_warp <= (size_t)INT32_MAX &&
            (row + columns - 1) / columns <= 65535u && slices <= 65535u) {
            g->list = 0;
            g->stride_a = row;          /* a: down the column (depth in a Grid) */
            g->stride_b = 1;            /* b: along the row (x) */
            g->stride_c = row * rows;   /* one y slice per grid z */
            g->extent_a = (unsigned)rows;
            g->extent_b = (unsigned)row;
            p->block = dim3(32, columns, 1);
            p->grid = dim3((unsigned)((rows + per_warp - 1) / per_warp), (unsigned)((row + columns - 1) / columns),
                           (unsigned)slices);
        } else { /* a list of points: runs of consecutive points */
            const size_t per_block = (size_t)per_warp * COLUMNS, blocks = (n_pts + per_block - 1) / per_block;
            if (n_pts > UINT32_MAX || blocks > (size_t)INT32_MAX)
                st = usbeam_fail(USBEAM_ERR_UNSUPPORTED, "points: too many points for one CUDA launch");
            g->list = 1;
            g->stride_a = 1;
            g->stride_b = 0;
            g->stride_c = 0;
            g->extent_a = (unsigned)n_pts;
            g->extent_b = 1;
            p->block = dim3(32, COLUMNS, 1);
            p->grid = dim3((unsigned)blocks, 1, 1);
        }
    }
    if (st != USBEAM_OK) {
        usbeam_das_cuda_destroy(p);
        return st;
    }
    *out = p;
    return USBEAM_OK;
}

extern "C" void usbeam_das_cuda_destroy(usbeam_das_cuda *p)
{
    if (!p) return;
    usbeam_cuda_exec_destroy(p->exec);
    usbeam_free(p);
}

extern "C" usbeam_cuda_exec *usbeam_das_cuda_exec(usbeam_das_cuda *p) { return p ? p->exec : nullptr; }

template <typename In, bool WIDE>
static void launch_das(const usbeam_das_cuda *p, const void *data, float *out, cudaStream_t stream)
{
    switch (p->taps) {
    case 1: das_kernel<In, 1, WIDE><<<p->grid, p->block, 0, stream>>>(p->geometry, data, out); break;
    case 2: das_kernel<In, 2, WIDE><<<p->grid, p->block, 0, stream>>>(p->geometry, data, out); break;
    default: das_kernel<In, 4, WIDE><<<p->grid, p->block, 0, stream>>>(p->geometry, data, out); break;
    }
}

template <typename In>
static void launch(const usbeam_das_cuda *p, const void *in, float *out, cudaStream_t stream)
{
    if (!p->wide) {
        launch_das<In, false>(p, in, out, stream);
        return;
    }
    transpose_kernel<In><<<p->transpose_grid, dim3(32, 8), 0, stream>>>(
        (const In *)in, (In *)p->scratch, p->geometry.n_frames, p->row, p->geometry.n_samples, p->channels,
        p->sample_tiles);
    launch_das<In, true>(p, p->scratch, out, stream);
}

extern "C" usbeam_status usbeam_das_cuda_execute(usbeam_das_cuda *p, const void *in, void *out)
{
    if (!p || !in || !out) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "plan, in and out must not be NULL");
    usbeam_cuda_exec *e = p->exec;
    usbeam_status st = usbeam_cuda_exec_begin(e);
    if (st != USBEAM_OK) return st;
    cudaStream_t stream = usbeam_cuda_exec_cuda_stream(e);
    st = usbeam_cuda_stage_begin(e, STAGE_BEAMFORM);
    if (st == USBEAM_OK) {
        switch (p->input_dtype) {
        case USBEAM_DTYPE_INT16: launch<short>(p, in, (float *)out, stream); break;
        case USBEAM_DTYPE_FLOAT32: launch<float>(p, in, (float *)out, stream); break;
        default: launch<float2>(p, in, (float *)out, stream); break;
        }
        st = usbeam_cuda_check(cudaGetLastError(), "das_kernel launch", __FILE__, __LINE__);
    }
    if (st == USBEAM_OK) st = usbeam_cuda_stage_end(e, STAGE_BEAMFORM);
    usbeam_cuda_exec_end(e);
    return st;
}
