/*
 * rca.cu - delay-and-sum for row-column (RCA) and TOBE arrays, CUDA twin of csrc/beamform/rca.c.
 *
 * Layouts (device memory): in  [n_frames][n_acquisitions][n_channels][n_samples] float32 RF
 *                               or complex64 IQ (interleaved re, im);
 *                          out [sum_frames ? 1 : n_frames][n_k][n_j][n_i] float32 / complex64.
 * Units: m, s, Hz; sample index s = (tau - t0) fs, tau = (tx path + rx path) / c.
 *
 * Every method of the CPU backend (FORCES, uFORCES, HERCULES, uHERCULES, VLS, TPW, Flash),
 * every interpolation and window, the coherence factor and the frame sum, with the paths and
 * windows of csrc/common/usbeam_math.h and the CPU plan's tables (voxel -> array transform,
 * strip positions, wave models, HERCULES radial window table).
 *
 * Thread mapping: one thread per voxel over a 2-D tile of voxels: 32 down the depth axis (the
 * voxel axis most along the array's z; one warp) x up to 8 along the longest other axis, the
 * third axis over the grid's z (a lateral slice thinner than 16 voxels tiles its two longest
 * axes instead); tiles at the grid's edges are partial.  The lanes of a warp share their
 * lateral position, so their delays are close and their receive apertures are nested ranges
 * around one centre: the warp walks the union of its lanes' channel ranges and a lane skips a
 * channel outside its own before any delay or load, so at each step the lanes read one record
 * at nearby samples (coalesced).
 *
 * Loop order and shared memory (why: occupancy).  Acquisitions are taken in chunks of CHUNK =
 * 16.  For each chunk a thread writes one 8-byte term per acquisition into its own column of
 * dynamic shared memory ([CHUNK][threads]; no other thread reads it, so there is no barrier),
 * then walks its channels, recomputing each channel's receive term for the chunk (one double
 * square root and one window per channel and chunk: n_ch x n_acq / 16 per voxel, against
 * n_ch x n_acq pairs), then the chunk's acquisitions:
 *   strips (FORCES, uFORCES, VLS, TPW, Flash): acquisition term = transmit delay T_a, channel
 *     term = strip receive delay R_c, pair index s = T_a + R_c;
 *   HERCULES, uHERCULES: acquisition term = dv_a^2 (samples^2, float-float), channel terms =
 *     du_c^2 + z^2 (float-float) and du_c^2, pair index s = T (the one wave, per voxel) +
 *     |p - e_ca|.
 * Shared memory per thread: 128 B (CHUNK x 8), plus 4 B per sum (re; im for IQ; power for the
 * coherence factor) and output frame only when several output frames are kept apart; one
 * output frame (one frame, or sum_frames) sums in registers.  The previous design kept every
 * acquisition's delay per thread (n_acq x 4 B + 12 B: 524 B at 128 acquisitions), which capped
 * occupancy near 19 % whatever the tile.  Now a 256-thread block takes 32 KB and registers
 * decide: __launch_bounds__(256, 4) holds every kernel to 64 registers without spills, so 4
 * blocks (32 warps, 50 %) per SM.  Kernels are compiled per data type, receive model and
 * interpolation, and ONE (one frame, no coherence factor: a plain register sum, no frame loop
 * and no pair count) or not.
 *
 * No FP64 per pair (why: FP64 runs at half the FP32 rate on H100 and at 1/64 on most other
 * GPUs; a double sin+cos per IQ pair or a double sqrt per HERCULES pair cost more than the
 * rest of the pair).  Each term is formed in double once and kept as an int64 fixed-point
 * sample index with 32 fractional bits (32.32), minus the lowest valid index of the
 * interpolation.  A pair's index is then one exact 64-bit integer add: its high word is the
 * first tap, its low word the fraction, and one unsigned 64-bit compare against the span of
 * valid indices is usbeam_interp_weights' range test (s in [0, n-1], [0, n-2] or [1, n-3]).
 * (A float index would keep ~1e-4 sample at 2816 samples, a float difference from a per-voxel
 * reference ~6e-5 at the thousand-sample spreads of a 128-strip aperture: ~1e-4 relative on
 * full-band data, ten times rca_cuda_rel_l2.  The tile-reference int32 offsets of the previous
 * design needed a double add per pair to use.)  The fraction becomes a float by OR-ing its top
 * 23 bits into the mantissa of 1.0f, and integers become floats by magic-number rounding,
 * since conversions run at 1/8 of the FP32 rate on sm_90.  A term of more than 2^30 samples,
 * or not finite, is replaced by -2^62: every pair that uses it is out of the record.
 *   HERCULES: r^2 = (du^2 + z^2) + dv^2 is added in float-float (TwoSum), r = sqrt(r^2) by
 *   rsqrtf and one Newton step on the fma residual, and r0 + correction is split into 32.32 by
 *   magic-number rounding (valid below 2^19 samples; plans whose record could reach 2^18 are
 *   refused).  Its radial window is read from the CPU plan's table at a float q = (r / half-
 *   width)^2 steps; q decides whether the pair is inside the disc, except within two table
 *   steps of the edge (~0.1 % of the pairs), where the disc test and q are the CPU's own
 *   double arithmetic in metres^2 (voxel coordinates too are computed bit for bit as on the
 *   CPU): the same edge pairs are kept and the same zero weights skipped, which the
 *   coherence factor's pair count and rect windows would show.
 *   IQ: the phase fc tau = fc t0 + s fc / fs is summed modulo one cycle in 2^-32-cycle fixed
 *   point from the pair's index (fc/fs with 64 fractional bits; integer products wrap whole
 *   cycles away: four multiplies), rounded to a centred float and rotated by sincospif.
 *
 * Error budget against the CPU backend (double throughout; tests/test_cuda_rca.py holds the
 * kernel to rca_cuda_rel_l2 on every method, on deep full-band records and on exact edges):
 *   sample index: terms rounded to 2^-32 sample; fraction truncated to 2^-23 sample, so
 *     <= 1.2e-7 sample (the CPU rounds its fraction to float too, <= 3e-8); HERCULES r within
 *     3e-8 sample (TwoSum and Newton on the fma residual leave ~1e-12 relative, the correction
 *     is rounded to 2^-24 sample).  Cubic interpolation of full-band white noise moves by ~1.5
 *     times its RMS per sample of shift, so <= ~2e-7 relative per term.
 *   phase: fixed-point sum within 3 x 2^-32 cycle, centred and rounded to 2^-23 cycle (<= 6e-8
 *     cycle), sincospif within 1 ulp: <= 5e-7 rad, i.e. <= 5e-7 relative per term, whatever
 *     fc/fs and however long the record (a float phase of thousands of radians: ~1e-4 rad).
 *   weights: strip windows in float away from the edge (cos^2(pi x / 2) by cospif, ~2e-7
 *     relative), the CPU's double expression within 1e-3 of it; HERCULES table at a float q
 *     (~2e-7 relative).
 *   So each term is within ~1e-6 relative of the CPU's, and the float32 sums (the CPU sums in
 *   double) dominate as before: measured on the emulator <= 3.5e-7 on the tests' cases and
 *   <= 2e-6 at the paper configuration (benchmarks/gpu_rca.py, B-scan strides), against
 *   rca_cuda_rel_l2 = 1e-5.
 *
 * Per-pair instruction budget.  Target: 15 ns/point for the FORCES B-scan on an H100 (132
 * SMs at 1.98 GHz) with ~7000-9000 pairs per voxel at f# 1 leaves ~0.44 SM cycles, i.e. ~56
 * lane instructions (128 lanes a cycle), per pair.  The PTX of the pair loop (ld.param and
 * moves not counted; SASS not read: no cuobjdump here; 64-bit integer operations are two SASS
 * instructions each):
 *   RF, cubic, strips, ONE: 41 per pair in the record (9 outside): LDS.64 of the transmit
 *     term; 64-bit add, compare and branch (3); fraction (3); Catmull-Rom weights (16, the
 *     shared usbeam_catmull_rom_weights); tap address (3); 4 LDG + 4 FFMA; the weighted sum
 *     (1); loop (6).  No FP64, no conversion.
 *   IQ adds ~60: phase (~10 integer and float), sincospif (~35 with its special-case
 *     branches), the rotation and the second component (~15).
 *   HERCULES adds ~50: float q and the radial table (~12, 2 LDG of a 16 KB table), float-float
 *     r and its 32.32 split (~32), the add to the voxel's transmit term (2).
 * The 4 gathers per pair (each warp-wide load spans ~70 samples at the B-scan's ~2 samples
 * per depth voxel, ~3 L1 lines) are ~12 L1 wavefronts per warp and pair, ~0.4 SM cycles per
 * pair: the L1 gather, not the ALU, is the likely limiter now.  To be measured on a GPU.
 *
 * Sums are float32 (the CPU sums in double): see tests/tolerances.py, rca_cuda_*.
 * Non-finite input (the CPU refuses it while it reads the data): a NaN or inf sample a voxel
 * reads leaves its sums non-finite, and such a thread sets the plan's input-fault word
 * (mapped host memory, cuda/exec.cu) with one plain store; the host reads it once the work
 * has finished, without a round trip per call (usbeam.device raises ValueError naming the
 * input: see cuda/das.cu).
 *
 * Reference: csrc/beamform/rca.c and the papers cited in csrc/common/usbeam_math.h
 * (row-column section).
 */
#include "runtime/exec.cuh"

#include "common/usbeam_math.h"

namespace {

enum { STAGE_BEAMFORM = 0 };
const char *const STAGE_NAMES[] = {"rca.beamform"};

/* Acquisitions per chunk: 16 x 8 B = 128 B of shared memory per thread. */
constexpr int CHUNK = 16;
constexpr int MAX_LANES = 8; /* tile columns: blocks of at most 32 x 8 threads */
/* A delay term outside +-2^30 samples: any pair index formed with it is negative. */
constexpr long long FIXED_OUT = -(1LL << 62);

struct RcaGeometry {
    double m[12];                   /* voxel (i, j, k, 1) -> array (x, y, z), rows */
    const double *rx_u;             /* [n_channels] */
    const double *acq_position;     /* [n_acquisitions]: FORCES u_k, HERCULES v_r */
    const usbeam_tx_model *waves;   /* [n_waves] */
    const float *radial_window;     /* HERCULES [radial_steps + 2] */
    unsigned *input_fault;          /* mapped host word (exec.cuh) */
    int radial_steps;
    int rx_rows, tx_rows, forces;
    int n_acq, n_ch, n_samples, n_frames, out_frames, chunk;
    int dims[3];                    /* n_i, n_j, n_k */
    int axis_x, axis_y, axis_z;     /* voxel axis of the tile's x, y and of the grid's z */
    size_t n_voxels;
    size_t acq_stride, frame_stride; /* samples between acquisitions, frames (constant-bank operands, not registers) */
    double fs, inv_c, t0, f_number, tukey_alpha, inv_tukey_alpha, rx_pitch;
    double samples_per_m;           /* fs / c */
    double first_index;             /* lowest valid sample index (cubic 1, else 0), taken off every delay */
    float q_inside, q_outside;      /* HERCULES: radial_steps -+ 2, the float q decides outside [q_inside, q_outside] */
    unsigned long long span;        /* highest - lowest valid index, 2^-32 samples */
    int record_usable;              /* n_samples holds at least one valid index */
    unsigned phase0;                /* fc (t0 + first_index / fs) modulo 1, 2^-32 cycles */
    unsigned k_int, k_hi, k_lo;     /* fc / fs: integer part, then 64 fractional bits */
    int window, coherence, sum_frames;
    int apodize;                    /* f_number > 0 (an int: no FP64 compare in the pair loop) */
};

struct Point {
    double x, y, z;
};

template <bool IQ> struct SampleOf {
    typedef float type;
};
template <> struct SampleOf<true> {
    typedef float2 type;
};

/* Array coordinates of a voxel, bit for bit as voxel_geometry in csrc/beamform/rca.c (no
 * contraction into FMAs), so that aperture edges fall on the same pairs as on the CPU. */
__device__ __forceinline__ Point voxel_point(const RcaGeometry &g, const int idx[3])
{
    const double i = idx[0], j = idx[1], k = idx[2];
    const double *m = g.m;
    return {__dadd_rn(__dadd_rn(__dadd_rn(__dmul_rn(m[0], i), __dmul_rn(m[1], j)), __dmul_rn(m[2], k)), m[3]),
            __dadd_rn(__dadd_rn(__dadd_rn(__dmul_rn(m[4], i), __dmul_rn(m[5], j)), __dmul_rn(m[6], k)), m[7]),
            __dadd_rn(__dadd_rn(__dadd_rn(__dmul_rn(m[8], i), __dmul_rn(m[9], j)), __dmul_rn(m[10], k)), m[11])};
}

/* The voxel (i, j, k) of this thread: the tile's x along axis_x, y along axis_y, the grid's z
 * along axis_z (unrolled selects: no dynamically indexed, local-memory array). */
struct VoxelIndex {
    int idx[3];
};
__device__ __forceinline__ VoxelIndex thread_voxel(const RcaGeometry &g)
{
    VoxelIndex v;
    for (int d = 0; d < 3; ++d)
        v.idx[d] = d == g.axis_x ? (int)(blockIdx.x * blockDim.x + threadIdx.x)
                   : d == g.axis_y ? (int)(blockIdx.y * blockDim.y + threadIdx.y) : (int)blockIdx.z;
    return v;
}

/* Transmit path (m) of acquisition a to point p, as voxel_geometry in csrc/beamform/rca.c. */
__device__ __forceinline__ double tx_path(const RcaGeometry &g, const Point &p, int a)
{
    const double u_rx = g.rx_rows ? p.y : p.x, v_rx = g.rx_rows ? p.x : p.y, u_tx = g.tx_rows ? p.y : p.x;
    if (g.forces) return usbeam_rca_forces_tx_path(u_rx, v_rx, p.z, __ldg(&g.acq_position[a]));
    return usbeam_tx_path(&g.waves[a], u_tx, 0.0, p.z);
}

/* A delay term (samples) in 32.32 fixed point; FIXED_OUT beyond +-2^30 samples or not finite. */
__device__ __forceinline__ long long to_fixed(double samples)
{
    return fabs(samples) < 0x1p30 ? (long long)llrint(samples * 0x1p32) : FIXED_OUT;
}

/* x, opaque to the optimiser: the front end would otherwise recompute a loop-invariant float
 * from its double inputs in every pair (rematerialisation to save a register), bringing FP64
 * and double -> float conversions back into the pair loop (seen in the PTX). */
__device__ __forceinline__ float kept(float x)
{
#ifndef USBEAM_CUDA_EMULATED
    asm("" : "+f"(x));
#endif
    return x;
}

/* The fraction of a 32.32 index as a float in [0, 1): its top 23 bits in the mantissa of 1.0f
 * (truncation, < 2^-23 sample; no int -> float conversion). */
__device__ __forceinline__ float fraction_of(unsigned frac) { return __uint_as_float(0x3f800000u | (frac >> 9)) - 1.0f; }

/* round(x) for |x| <= 2^22 by magic-number addition (1.5 x 2^23): the integer lands in the
 * low mantissa bits, ties to even. */
__device__ __forceinline__ int magic_int(float rounded) { return __float_as_int(rounded) - 0x4B400000; }
constexpr float MAGIC = 12582912.0f;

/* The CPU's receive_weight in double; out of line, as radial_weight_exact below. */
__device__ __forceinline__ float strip_weight_exact(const RcaGeometry &g, double du, double z)
{
    return (float)usbeam_window(g.window, fabs(du) * 2.0 * g.f_number / z, g.tukey_alpha);
}

/* Receive weight of a strip at lateral distance |du| from a voxel at depth z > 0 (the CPU's
 * receive_weight, u = |du| 2 F# / z).  Far from the aperture edge in float: Hann and Tukey's
 * taper as cos^2(pi x / 2) = (1 + cos(pi x)) / 2, accurate to a few ulp even where small.
 * Within 1e-3 of the edge (u >= 0.999, a few per cent of the channels) the CPU's double
 * expression, so that weights the CPU rounds to 0 (skipped, not counted by the coherence
 * factor) are 0 here too. */
__device__ __forceinline__ float strip_weight(const RcaGeometry &g, double du, double z, double u_scale)
{
    const double u = fabs(du) * u_scale;
    if (u < 0.999) {
        double x = -1.0; /* taper coordinate; < 0 on the flat part */
        if (g.window == USBEAM_WINDOW_HANN) x = u;
        else if (g.window == USBEAM_WINDOW_TUKEY && g.tukey_alpha > 0.0 && !(u <= 1.0 - g.tukey_alpha))
            x = (u - (1.0 - g.tukey_alpha)) * g.inv_tukey_alpha;
        if (x < 0.0) return 1.0f;
        const float c = cospif(0.5f * (float)x);
        return c * c;
    }
    return strip_weight_exact(g, du, z);
}

/* HERCULES receive path |p - e| (samples) of r^2 = a + b (samples^2, each hi + lo floats) in
 * 32.32 fixed point, without FP64: TwoSum a_hi + b_hi, r0 = s rsqrt(s), one Newton step
 * on the residual s - r0^2 (exact by fma up to 2^-24 of itself) plus the low parts, then
 * r0 split into rint(r0) + (r0 - rint(r0)) (exact) and the correction rounded to 2^-24
 * sample.  Error <= 3e-8 sample.  Valid for r < 2^19 samples (magic-number ranges);
 * FIXED_OUT beyond. */
__device__ __forceinline__ long long radius_fixed(float a_hi, float a_lo, float b_hi, float b_lo)
{
    const float s = a_hi + b_hi, bb = s - a_hi;
    const float tail = ((a_hi - (s - bb)) + (b_hi - bb)) + (a_lo + b_lo);
    if (!(s < 0x1p38f)) return FIXED_OUT;
    const float y = rsqrtf(fmaxf(s, 0x1p-60f));
    const float r0 = s * y;
    const float corr = (fmaf(-r0, r0, s) + tail) * (0.5f * y);
    const float m = r0 + MAGIC;
    const int whole = magic_int(m);
    const int f0 = magic_int(fmaf(r0 - (m - MAGIC), 0x1p23f, MAGIC)); /* (r0 - rint r0) 2^23 */
    const int f1 = magic_int(fmaf(corr, 0x1p24f, MAGIC));              /* corr 2^24, |corr| < 2^-2 */
    return (long long)whole * 4294967296LL + (long long)(2 * f0 + f1) * 256; /* no left shift of a negative value */
}

/* HERCULES weight of pair (acquisition a, channel c) near the aperture edge, bit for bit as
 * accumulate_general in csrc/beamform/rca.c: lateral^2 = du^2 + dv^2 against the squared
 * half-width and q = lateral^2 / half-width^2 x steps in metres^2, in the CPU's order and
 * without contraction; -1 outside the disc, else the weight (0 is skipped, as on the CPU).
 * Only for pairs whose float q is within two table steps of the edge (~0.1 % of them). */
__device__ __forceinline__ double radial_weight_exact(const RcaGeometry &g, int c, int a)
{
    const Point p = voxel_point(g, thread_voxel(g).idx); /* recomputed: no registers held across the pair loop */
    const double u_rx = g.rx_rows ? p.y : p.x, v_rx = g.rx_rows ? p.x : p.y, z = p.z;
    const double du = u_rx - __ldg(&g.rx_u[c]), dv = v_rx - __ldg(&g.acq_position[a]);
    const double lateral2 = __dadd_rn(__dmul_rn(du, du), __dmul_rn(dv, dv));
    const double half_width = z / (2.0 * g.f_number), aperture2 = __dmul_rn(half_width, half_width);
    if (lateral2 > aperture2) return -1.0;
    const double q = __dmul_rn(__dmul_rn(lateral2, 1.0 / aperture2), (double)g.radial_steps);
    const int k = min((int)q, g.radial_steps);
    const double frac = q - k;
    return __dadd_rn(__dmul_rn(1.0 - frac, (double)__ldg(&g.radial_window[k])),
                     __dmul_rn(frac, (double)__ldg(&g.radial_window[k + 1])));
}

/* exp(+j 2 pi fc tau) w for the pair at index whole + frac 2^-32 (first valid index taken
 * off): fc tau = fc t0 + s fc / fs summed modulo one cycle in 2^-32-cycle units (the products
 * wrap at 2^32, i.e. whole cycles drop out), centred to [-1/2, 1/2) and rounded to 2^-23
 * cycle, then sincospif. */
__device__ __forceinline__ float2 pair_phasor(const RcaGeometry &g, unsigned whole, unsigned frac, float w)
{
    const unsigned cycles = g.phase0 + whole * g.k_hi + __umulhi(whole, g.k_lo) + frac * g.k_int + __umulhi(frac, g.k_hi);
    const int q = (int)(cycles + 256u) >> 9; /* [-2^22, 2^22): 2^-23 cycle */
    float sn, cs;
    sincospif((__int_as_float(0x4B400000 + q) - MAGIC) * 0x1p-22f, &sn, &cs);
    return make_float2(w * cs, w * sn);
}

struct Sums {
    float re, im, power; /* one output frame: registers */
    float *shared;       /* several: [n_sums][out_frames][threads], this thread's column */
    size_t stride;       /* between the re, im and power planes */
    int threads, count;
};

/* The interpolated sample of one frame, weighted (rot = w, or w exp(j phase) for IQ). */
template <bool IQ, int TAPS>
__device__ __forceinline__ float2 frame_value(const typename SampleOf<IQ>::type *x, const float *tw, float2 rot)
{
    if (IQ) {
        float re = 0.0f, im = 0.0f;
#pragma unroll
        for (int t = 0; t < TAPS; ++t) {
            const float2 v = ((const float2 *)x)[t];
            re += tw[t] * v.x;
            im += tw[t] * v.y;
        }
        return make_float2(re * rot.x - im * rot.y, re * rot.y + im * rot.x);
    }
    float v = 0.0f;
#pragma unroll
    for (int t = 0; t < TAPS; ++t) v += tw[t] * ((const float *)x)[t];
    return make_float2(v * rot.x, 0.0f);
}

/* Adds one frame's value of a pair to the sums of its output frame. */
template <bool IQ>
__device__ __forceinline__ void add_frame(const RcaGeometry &g, Sums &sums, int f, float2 v)
{
    if (g.out_frames == 1) {
        sums.re += v.x;
        if (IQ) sums.im += v.y;
        if (g.coherence) sums.power += v.x * v.x + v.y * v.y;
    } else {
        float *o = sums.shared + (size_t)f * sums.threads;
        o[0] += v.x;
        if (IQ) o[sums.stride] += v.y;
        if (g.coherence) o[(IQ ? 2 : 1) * sums.stride] += v.x * v.x + v.y * v.y;
    }
}

/* One (acquisition, channel) pair at index s (32.32, first valid index taken off, already
 * checked to be in the record) of the record `record`, weight w, every frame.  ONE: one frame
 * in and out, no coherence factor (a plain sum in registers, no pair count). */
template <bool IQ, int KIND, bool ONE>
__device__ __forceinline__ void accumulate(const RcaGeometry &g, const typename SampleOf<IQ>::type *record,
                                           long long s, float w, Sums &sums)
{
    const unsigned whole = (unsigned)((unsigned long long)s >> 32), frac = (unsigned)s;
    constexpr int taps = KIND == USBEAM_INTERP_NEAREST ? 1 : KIND == USBEAM_INTERP_LINEAR ? 2 : 4;
    float tw[taps];
    unsigned first = whole; /* linear: floor(s); cubic: floor(s) - 1, the first index taken off */
    if (KIND == USBEAM_INTERP_NEAREST) { /* round(s), ties to even as rint */
        first += frac > 0x80000000u || (frac == 0x80000000u && (whole & 1u));
        tw[0] = 1.0f;
    } else if (KIND == USBEAM_INTERP_LINEAR) {
        const float t = fraction_of(frac);
        tw[0] = 1.0f - t;
        tw[1] = t;
    } else {
        usbeam_catmull_rom_weights(fraction_of(frac), tw);
    }
    const typename SampleOf<IQ>::type *x = record + first;
    float2 rot = make_float2(w, 0.0f);
    if (IQ) rot = pair_phasor(g, whole, frac, w);
    if (ONE) {
        const float2 v = frame_value<IQ, taps>(x, tw, rot);
        sums.re += v.x;
        if (IQ) sums.im += v.y;
        return;
    }
    ++sums.count;
    add_frame<IQ>(g, sums, 0, frame_value<IQ, taps>(x, tw, rot)); /* the first frame peeled: one-frame calls loop no more */
    for (int f = 1; f < g.n_frames; ++f) add_frame<IQ>(g, sums, f, frame_value<IQ, taps>(x += g.frame_stride, tw, rot));
}

template <bool IQ, bool HERCULES, int KIND, bool ONE>
__global__ void __launch_bounds__(32 * MAX_LANES, 4) rca_kernel(RcaGeometry g, const float *__restrict__ data,
                                                             float *__restrict__ out)
{
    typedef typename SampleOf<IQ>::type Sample;
    extern __shared__ long long shared_terms[];
    const int threads = blockDim.x * blockDim.y, tid = threadIdx.y * blockDim.x + threadIdx.x;
    long long *const term = shared_terms + tid; /* [chunk][threads]: this thread's column */

    const VoxelIndex voxel_index = thread_voxel(g);
    const int *const idx = voxel_index.idx;
    const bool inside = idx[0] < g.dims[0] && idx[1] < g.dims[1] && idx[2] < g.dims[2];
    const Point p = voxel_point(g, idx);
    const double u_rx = g.rx_rows ? p.y : p.x, v_rx = g.rx_rows ? p.x : p.y, z = p.z;

    /* receive aperture: |u - u_c| <= z / (2 F#), empty in front of nothing (z <= 0); strips
     * sorted, window symmetric: a contiguous range (one spare each side).  HERCULES' disc
     * du^2 + dv^2 <= hw^2 lies inside the same range. */
    int c_first = 0, c_last = g.record_usable ? g.n_ch - 1 : -1;
    double half_width = INFINITY;
    if (g.f_number > 0.0) {
        half_width = z > 0.0 ? z / (2.0 * g.f_number) : -1.0;
        const double centre = 0.5 * (g.n_ch - 1) + u_rx / g.rx_pitch, reach = half_width / g.rx_pitch;
        const double lo = fmax(floor(centre - reach) - 1.0, 0.0), hi = fmin(ceil(centre + reach) + 1.0, g.n_ch - 1.0);
        c_first = (int)lo;
        if (!(half_width >= 0.0 && lo <= hi)) c_last = -1;
        else if (c_last >= 0) c_last = (int)hi;
    }
    /* The warp walks the union of its lanes' channel ranges (lanes down the depth axis share
     * u, so the ranges are nested) and each lane skips a channel outside its own before any
     * delay or load: at each step the lanes read one record at nearby samples. */
    int union_first = inside ? c_first : INT_MAX, union_last = inside ? c_last : INT_MIN;
    for (int lane_mask = 16; lane_mask > 0; lane_mask >>= 1) {
        union_first = min(union_first, __shfl_xor_sync(0xffffffffu, union_first, lane_mask));
        union_last = max(union_last, __shfl_xor_sync(0xffffffffu, union_last, lane_mask));
    }
    if (!inside) return; /* no barrier below: every thread uses only its own shared column */

    Sums sums = {0.0f, 0.0f, 0.0f, (float *)(shared_terms + (size_t)g.chunk * threads) + tid,
                 (size_t)g.out_frames * threads, threads, 0};
    if (g.out_frames > 1)
        for (int k = 0; k < 1 + IQ + g.coherence; ++k)
            for (int f = 0; f < g.out_frames; ++f) sums.shared[k * sums.stride + (size_t)f * threads] = 0.0f;
    const Sample *const samples = (const Sample *)data;

    /* voxel constants: strips, the window's u per metre of |du|; HERCULES, the one wave's
     * transmit delay, z^2 and the aperture (samples^2) and the radial table's q per sample^2 */
    const double u_scale = g.f_number > 0.0 && z > 0.0 ? 2.0 * g.f_number / z : 0.0;
    long long tx_voxel = 0;
    double z2 = 0.0, aperture2 = INFINITY;
    float q_scale = 0.0f;
    if (HERCULES) {
        tx_voxel = to_fixed((usbeam_tx_path(&g.waves[0], g.tx_rows ? p.y : p.x, 0.0, z) * g.inv_c - g.t0) * g.fs -
                            g.first_index);
        const double z_s = z * g.samples_per_m;
        z2 = z_s * z_s;
        if (g.f_number > 0.0 && half_width >= 0.0) {
            const double hw = half_width * g.samples_per_m;
            aperture2 = hw * hw;
            q_scale = aperture2 > 0.0 ? (float)(g.radial_steps / aperture2) : 0.0f;
        }
    }

    for (int a0 = 0; a0 < g.n_acq; a0 += g.chunk) {
        const int n_chunk = min(g.chunk, g.n_acq - a0);
        const long long *const chunk_end = term + (size_t)n_chunk * threads;
        /* the chunk's acquisition terms, this thread's column */
        for (int j = 0; j < n_chunk; ++j) {
            if (HERCULES) {
                const double dv = (v_rx - __ldg(&g.acq_position[a0 + j])) * g.samples_per_m, dv2 = dv * dv;
                const float hi = (float)dv2, lo = (float)(dv2 - hi); /* packed: hi in the low word */
                term[j * threads] = (long long)(((unsigned long long)__float_as_uint(lo) << 32) | __float_as_uint(hi));
            } else {
                term[j * threads] = to_fixed((tx_path(g, p, a0 + j) * g.inv_c - g.t0) * g.fs - g.first_index);
            }
        }
        for (int c = union_first; c <= union_last; ++c) {
            if (c < c_first || c > c_last) continue; /* outside this voxel's aperture */
            const double u_c = __ldg(&g.rx_u[c]), du = u_rx - u_c;
            const Sample *record = samples + ((size_t)a0 * g.n_ch + c) * g.n_samples;
            if (!HERCULES) {
                float w = 1.0f;
                if (g.apodize) {
                    w = strip_weight(g, du, z, u_scale);
                    if (w == 0.0f) continue; /* skipped before any sample is read */
                }
                const long long rx = to_fixed(usbeam_rca_strip_path(u_rx, z, u_c) * g.inv_c * g.fs);
                for (const long long *acq_term = term; acq_term != chunk_end; acq_term += threads, record += g.acq_stride) {
                    const long long s = *acq_term + rx;
                    if ((unsigned long long)s > g.span) continue; /* outside the record */
                    accumulate<IQ, KIND, ONE>(g, record, s, w, sums);
                }
            } else {
                const double du_s = du * g.samples_per_m, du2 = du_s * du_s, a2 = du2 + z2;
                const float a_hi = kept((float)a2), a_lo = kept((float)(a2 - (float)a2)), du2_f = kept((float)du2);
                /* a channel whose every pair is outside the disc (q > steps + 2 at dv = 0) */
                if (g.apodize && du2_f * q_scale > g.q_outside) continue;
                int a = a0;
                for (const long long *acq_term = term; acq_term != chunk_end; acq_term += threads, record += g.acq_stride, ++a) {
                    const unsigned long long packed = (unsigned long long)*acq_term;
                    const float2 dv2 = make_float2(__uint_as_float((unsigned)packed), __uint_as_float((unsigned)(packed >> 32)));
                    float w = 1.0f;
                    if (g.apodize) {
                        /* q = (r / half-width)^2 steps in float (~3e-7 relative): clearly inside
                         * the disc, the table in float; clearly outside, skipped; within two steps
                         * of the edge, the CPU's own arithmetic decides */
                        const float q = (du2_f + dv2.x) * q_scale;
                        if (q < g.q_inside) { /* k = floor or ceil of q - 1/2: lerp is continuous */
                            const float m = (q - 0.5f) + MAGIC;
                            const int k = magic_int(m);
                            const float lo = __ldg(&g.radial_window[k]), hi = __ldg(&g.radial_window[k + 1]);
                            w = fmaf(q - (m - MAGIC), hi - lo, lo);
                        } else if (q > g.q_outside) {
                            continue; /* outside the disc */
                        } else {
                            const double exact = radial_weight_exact(g, c, a);
                            if (!(exact > 0.0)) continue; /* outside, or a zero weight the CPU skips */
                            w = (float)exact;
                        }
                    }
                    const long long s = tx_voxel + radius_fixed(a_hi, a_lo, dv2.x, dv2.y);
                    if ((unsigned long long)s > g.span) continue; /* outside the record */
                    accumulate<IQ, KIND, ONE>(g, record, s, w, sums);
                }
            }
        }
    }

    const size_t voxel = ((size_t)idx[2] * g.dims[1] + idx[1]) * g.dims[0] + idx[0];
    const double n_terms = (double)sums.count * (g.sum_frames ? g.n_frames : 1);
    bool non_finite = false; /* NaN or inf read from data stays so through every later sum */
    for (int f = 0; f < g.out_frames; ++f) {
        const float *o = sums.shared + (size_t)f * threads;
        const double re = g.out_frames == 1 ? sums.re : o[0];
        const double im = IQ ? (g.out_frames == 1 ? sums.im : o[sums.stride]) : 0.0;
        double scale = 1.0;
        non_finite |= !isfinite(re) || !isfinite(im);
        if (g.coherence) {
            const double power = g.out_frames == 1 ? sums.power : o[(IQ ? 2 : 1) * sums.stride];
            scale = power > 0.0 ? (re * re + im * im) / (n_terms * power) : 0.0;
            non_finite |= !isfinite(power);
        }
        const size_t at = (size_t)f * g.n_voxels + voxel;
        if (IQ)
            ((float2 *)out)[at] = make_float2((float)(scale * re), (float)(scale * im));
        else
            out[at] = (float)(scale * re);
    }
    if (non_finite) *(volatile unsigned *)g.input_fault = USBEAM_INPUT_FAULT_NONFINITE; /* mapped host word */
}

typedef void (*RcaKernel)(RcaGeometry, const float *, float *);

template <bool IQ, bool HERCULES, bool ONE>
RcaKernel kernel_of_kind(int interpolation)
{
    if (interpolation == USBEAM_INTERP_NEAREST) return rca_kernel<IQ, HERCULES, USBEAM_INTERP_NEAREST, ONE>;
    if (interpolation == USBEAM_INTERP_LINEAR) return rca_kernel<IQ, HERCULES, USBEAM_INTERP_LINEAR, ONE>;
    return rca_kernel<IQ, HERCULES, USBEAM_INTERP_CUBIC, ONE>;
}

template <bool IQ, bool HERCULES>
RcaKernel kernel_of_frames(bool one, int interpolation)
{
    return one ? kernel_of_kind<IQ, HERCULES, true>(interpolation) : kernel_of_kind<IQ, HERCULES, false>(interpolation);
}

/* The kernel of a plan: data type, receive model, interpolation, and whether it is the plain
 * one-frame sum (ONE: one frame, no coherence factor; the frame loop and the uniform branches
 * on out_frames and coherence, ~8 instructions a pair, are compiled out). */
RcaKernel kernel_for(bool iq, bool hercules, bool one, int interpolation)
{
    if (iq)
        return hercules ? kernel_of_frames<true, true>(one, interpolation)
                        : kernel_of_frames<true, false>(one, interpolation);
    return hercules ? kernel_of_frames<false, true>(one, interpolation)
                    : kernel_of_frames<false, false>(one, interpolation);
}

} // namespace

struct usbeam_rca_cuda {
    usbeam_cuda_exec *exec;
    RcaGeometry geometry; /* device pointers */
    RcaKernel kernel;     /* rca_kernel<IQ, HERCULES, interpolation> */
    dim3 block, grid;
    size_t shared_bytes;
};

extern "C" void usbeam_rca_cuda_destroy(usbeam_rca_cuda *p)
{
    if (!p) return;
    usbeam_cuda_exec_destroy(p->exec);
    usbeam_free(p);
}

extern "C" usbeam_cuda_exec *usbeam_rca_cuda_exec(usbeam_rca_cuda *p) { return p ? p->exec : nullptr; }

static usbeam_status upload(usbeam_cuda_exec *e, const void *host, size_t bytes, const char *what, void **device)
{
    usbeam_status st = usbeam_cuda_exec_alloc(e, bytes, what, device);
    if (st == USBEAM_OK) st = usbeam_cuda_exec_upload(e, *device, host, bytes);
    return st;
}

extern "C" usbeam_status usbeam_rca_cuda_create(const usbeam_rca_tables *t, usbeam_rca_cuda **out)
{
    if (!t || !t->params || !out) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "tables and out must not be NULL");
    *out = nullptr;
    const usbeam_rca_params *prm = t->params;
    if (prm->n_i > 65535u * 1024u || prm->n_j > 65535u * 1024u || prm->n_k > 65535u * 1024u ||
        prm->n_frames > (size_t)INT32_MAX || prm->n_acquisitions > (size_t)INT32_MAX)
        return usbeam_fail(USBEAM_ERR_UNSUPPORTED, "rca on CUDA: grid or batch too large for one launch");
    usbeam_rca_cuda *p = (usbeam_rca_cuda *)usbeam_alloc(sizeof *p);
    if (!p) return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "rca CUDA plan");
    *p = usbeam_rca_cuda{}; /* zeroed */
    p->block = dim3(0, 0, 0); /* no tile chosen yet */
    RcaGeometry *g = &p->geometry;
    for (int k = 0; k < 12; ++k) g->m[k] = t->voxel_to_array[k];
    g->forces = prm->method == USBEAM_RCA_FORCES || prm->method == USBEAM_RCA_UFORCES;
    const bool hercules = prm->method == USBEAM_RCA_HERCULES || prm->method == USBEAM_RCA_UHERCULES;
    /* HERCULES' fixed-point receive path holds r < 2^19 samples: a record (with its start
     * t0) within 2^18 samples of the transmit keeps every pair that could be in it inside. */
    if (hercules && (double)prm->n_samples + fmax(prm->t0 * prm->fs, 0.0) > 262144.0) {
        usbeam_free(p);
        return usbeam_fail(USBEAM_ERR_UNSUPPORTED, "rca on CUDA: HERCULES records of more than 2^18 samples after "
                           "the transmit (n_samples %zu, t0 fs %g) are not supported", prm->n_samples, prm->t0 * prm->fs);
    }
    g->rx_rows = prm->rx_rows;
    g->tx_rows = prm->tx_rows;
    g->n_acq = (int)prm->n_acquisitions;
    g->n_ch = (int)prm->n_channels;
    g->n_samples = (int)prm->n_samples;
    g->n_frames = (int)prm->n_frames;
    g->out_frames = prm->sum_frames ? 1 : (int)prm->n_frames;
    g->dims[0] = (int)prm->n_i;
    g->dims[1] = (int)prm->n_j;
    g->dims[2] = (int)prm->n_k;
    g->n_voxels = prm->n_i * prm->n_j * prm->n_k;
    g->acq_stride = prm->n_channels * prm->n_samples;
    g->frame_stride = prm->n_acquisitions * g->acq_stride;
    g->chunk = (int)(prm->n_acquisitions < (size_t)CHUNK ? prm->n_acquisitions : (size_t)CHUNK);
    g->fs = prm->fs;
    g->inv_c = 1.0 / prm->c;
    g->samples_per_m = prm->fs / prm->c;
    g->t0 = prm->t0;
    g->f_number = prm->f_number;
    g->apodize = prm->f_number > 0.0;
    g->tukey_alpha = prm->tukey_alpha;
    g->inv_tukey_alpha = prm->tukey_alpha > 0.0 ? 1.0 / prm->tukey_alpha : 0.0;
    g->rx_pitch = prm->rx_rows ? prm->pitch_y : prm->pitch_x;
    g->window = prm->window;
    g->coherence = prm->coherence_factor != 0;
    g->sum_frames = prm->sum_frames != 0;
    g->radial_steps = t->radial_steps;
    g->q_inside = (float)(t->radial_steps - 2);
    g->q_outside = (float)(t->radial_steps + 2);
    /* valid indices [lowest, highest] of the interpolation (usbeam_interp_weights) */
    const int lowest = prm->interpolation == USBEAM_INTERP_CUBIC ? 1 : 0;
    const long long highest = (long long)prm->n_samples - usbeam_interp_taps(prm->interpolation) +
                              (prm->interpolation == USBEAM_INTERP_CUBIC ? 1 : 0);
    g->first_index = lowest;
    g->record_usable = highest >= lowest;
    g->span = g->record_usable ? (unsigned long long)(highest - lowest) << 32 : 0;
    /* IQ phase constants: fc / fs as integer + 64-bit fraction, fc (t0 + lowest / fs) mod 1 */
    const double k = prm->fc / prm->fs, k_whole = floor(k);
    const unsigned long long k_frac = (unsigned long long)ldexp(k - k_whole, 64);
    g->k_int = (unsigned)fmod(k_whole, 4294967296.0);
    g->k_hi = (unsigned)(k_frac >> 32);
    g->k_lo = (unsigned)k_frac;
    const double phase0 = prm->fc * prm->t0 + lowest * k;
    g->phase0 = (unsigned)(unsigned long long)llrint(ldexp(phase0 - floor(phase0), 32));
    p->kernel = kernel_for(prm->data_complex != 0, hercules, prm->n_frames == 1 && !g->coherence, prm->interpolation);

    /* Tiles of 32 voxels down the depth axis (the voxel axis most along the array's z; one
     * warp) x up to 8 along the longest other axis; the third runs over the grid's z.  A
     * depth axis of fewer than 16 voxels (a lateral slice) gives way to the longest axis. */
    int depth = -1;
    for (int d = 0; d < 3; ++d)
        if (g->dims[d] >= 16 && (depth < 0 || fabs(g->m[8 + d]) > fabs(g->m[8 + depth]))) depth = d;
    if (depth < 0)
        for (int d = 0; d < 3; ++d)
            if (depth < 0 || g->dims[d] > g->dims[depth]) depth = d;
    const int other1 = depth == 0 ? 1 : 0, other2 = depth == 2 ? 1 : 2;
    g->axis_x = depth;
    g->axis_y = g->dims[other2] > g->dims[other1] ? other2 : other1;
    g->axis_z = g->axis_y == other1 ? other2 : other1;

    usbeam_status st = usbeam_cuda_exec_create(STAGE_NAMES, 1, &p->exec);
    if (st == USBEAM_OK)
        st = upload(p->exec, t->rx_u, prm->n_channels * sizeof(double), "strip positions", (void **)&g->rx_u);
    if (st == USBEAM_OK)
        st = upload(p->exec, t->acq_position, prm->n_acquisitions * sizeof(double), "acquisition positions",
                    (void **)&g->acq_position);
    if (st == USBEAM_OK && t->n_waves)
        st = upload(p->exec, t->waves, t->n_waves * sizeof(usbeam_tx_model), "transmit waves", (void **)&g->waves);
    if (st == USBEAM_OK && t->radial_window)
        st = upload(p->exec, t->radial_window, ((size_t)t->radial_steps + 2) * sizeof(float), "radial window",
                    (void **)&g->radial_window);
    if (st == USBEAM_OK) st = usbeam_cuda_exec_input_fault_flag(p->exec, &g->input_fault);
    if (st == USBEAM_OK) {
        /* the widest tile whose chunk terms and sums fit the shared memory a block may have:
         * CHUNK x 8 B per thread, and the sums of several output frames (one sums in registers) */
        const size_t n_sums = 1 + (prm->data_complex != 0) + (size_t)g->coherence;
        const size_t per_thread = (size_t)g->chunk * sizeof(long long) +
                                  (g->out_frames > 1 ? n_sums * (size_t)g->out_frames * sizeof(float) : 0);
        const size_t limit = (size_t)usbeam_cuda_exec_max_shared_optin(p->exec);
        unsigned lanes = per_thread * 32 * MAX_LANES <= 48 * 1024 ? MAX_LANES : 0;
        for (unsigned l = MAX_LANES / 2; l >= 1 && !lanes; l /= 2)
            if (per_thread * 32 * l <= limit) lanes = l;
        while (lanes > 1 && (int)lanes / 2 >= g->dims[g->axis_y]) lanes /= 2; /* no idle columns */
        if (lanes) p->block = dim3(32, lanes, 1);
        if (!p->block.x)
            st = usbeam_fail(USBEAM_ERR_UNSUPPORTED,
                             "n_acquisitions and n_frames: %zu acquisitions and %d output frames do not fit the "
                             "CUDA beamformer's shared memory (%zu bytes); beamform fewer frames per call",
                             prm->n_acquisitions, g->out_frames, limit);
        p->shared_bytes = per_thread * p->block.x * p->block.y;
    }
    if (st == USBEAM_OK) {
        p->grid = dim3((unsigned)((g->dims[g->axis_x] + p->block.x - 1) / p->block.x),
                       (unsigned)((g->dims[g->axis_y] + p->block.y - 1) / p->block.y), (unsigned)g->dims[g->axis_z]);
        if (p->grid.y > 65535u || p->grid.z > 65535u)
            st = usbeam_fail(USBEAM_ERR_UNSUPPORTED, "output grid: too many voxels along one axis for CUDA");
    }
    if (st == USBEAM_OK) st = usbeam_cuda_allow_dynamic_shared((const void *)p->kernel, p->shared_bytes);
    if (st != USBEAM_OK) {
        usbeam_rca_cuda_destroy(p);
        return st;
    }
    *out = p;
    return USBEAM_OK;
}

extern "C" usbeam_status usbeam_rca_cuda_execute(usbeam_rca_cuda *p, const void *in, void *out)
{
    if (!p || !in || !out) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "plan, in and out must not be NULL");
    usbeam_cuda_exec *e = p->exec;
    usbeam_status st = usbeam_cuda_exec_begin(e);
    if (st != USBEAM_OK) return st;
    cudaStream_t stream = usbeam_cuda_exec_cuda_stream(e);
    st = usbeam_cuda_stage_begin(e, STAGE_BEAMFORM);
    if (st == USBEAM_OK) {
        const RcaKernel kernel = p->kernel;
        kernel<<<p->grid, p->block, p->shared_bytes, stream>>>(p->geometry, (const float *)in, (float *)out);
        st = usbeam_cuda_check(cudaGetLastError(), "rca_kernel launch", __FILE__, __LINE__);
    }
    if (st == USBEAM_OK) st = usbeam_cuda_stage_end(e, STAGE_BEAMFORM);
    usbeam_cuda_exec_end(e);
    return st;
}
