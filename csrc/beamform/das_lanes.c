/*
 * das_lanes.c - delay-and-sum of a single frame with the points in the vector lanes: 16
 * consecutive points of the grid (a "group") are summed together, one element of the group's
 * apertures at a time, every point in a lane of its own.  Built for plans of one frame
 * (n_frames = 1) on AVX-512 machines, and of a few (LANES_MAX_FRAMES_IQ below: each frame
 * staged as one and summed as a 1-frame plan sums it, the same bits); das_single.c serves the
 * others of one frame, das.c's multi-frame kernels the rest.
 *
 * Why: with one frame there is nothing to share an entry across, and the per-point loop of
 * das_single.c (the elements of one point in the lanes) pays per point what a point costs
 * beside its entries (a rotation in double, two horizontal reductions, a partial last
 * vector): ~26 ns a point, as much as ~27 of its entries (RESULTS.md, 2026-11-25).  With the
 * points in the lanes nothing is reduced across lanes, and the taps of 16 neighbouring points
 * in one element's row lie a few samples apart, so they come from two vector loads of the
 * row and a permutation instead of 16 scalar loads (a gather where they spread wider).  And
 * the table holds s_rx alone, as a 4-byte fixed-point offset from a whole-sample base per row
 * (the receive table holds 16 bytes a pair): the receive rotation exp(+j 2 pi fc/fs s_rx) is
 * formed here (whole turns removed exactly, the rest from 32nds of a turn in a table and short
 * float polynomials; within das_receive_phase_rad), so a call reads about a quarter of the
 * bytes.
 *
 * Layouts: the lane table (plan creation, usbeam_das_lanes_fill): group g holds points
 * 16 g .. 16 g + 15 and rows lane_offset[g] .. lane_offset[g + 1] - 1, one per element from
 * lane_first[g] on (the union of its points' apertures); row r holds 16 lanes (one per
 * point) of s_rx = |p - e| fs / c and, for windows other than 0 / 1, the window weight (float)
 * in lane_window.  s_rx is held in lane_fixed as int32 offsets in units of 2^-bits sample from
 * the row's lane_base (whole samples; fixed_bits below), where every row and every group's
 * s_tx fit (offsets within +-2^29 units: 32 wavelengths or more); else in double in
 * lane_sample (rows of 16 lanes more than ~64 wavelengths apart).  Fixed point halved the
 * bytes a call reads and put s = s_tx + s_rx, its first tap, fraction and receive turn in
 * int32 lanes where double took two vectors a step: live-1tx 1.64 -> 1.43 ms, live-3tx 3.83
 * -> 3.42 ms (in-process A/B against the double table, p10 of 300 / 150 calls).  A lane
 * outside its point's aperture, or where a 0 / 1 window is 0, holds OUTSIDE_SAMPLE (out of
 * every record: weight 0) or USBEAM_DAS_LANE_FIXED_OUTSIDE.
 * Without a table (a plan over its max_table_bytes: lane_computed), the rows of a group are
 * formed at execute, just before its sums (form_rows), in lane_sample's layout or (a linear
 * array on the x axis, where the group's rows fit) lane_fixed's, and each row's least and
 * most valid s_rx, from which its window start is bounded (as lane_least is, but for all 16
 * lanes at once).  It costs ~1.3-1.5x the table's call (live-3tx, live-1tx: 3.94 and 1.71 ms,
 * in-process p10, against 3.08 and 1.16 ms with the table), where das_single.c's per-point
 * path without a table cost 2.3-2.7x the table.  Forming a row took ~40 cycles, its two
 * 512-bit square roots 32 of them (16 cycles each on this Zen 4, during which no multiply
 * issues); now ~19 on the axis: the roots by a correction of the 14-bit reciprocal root
 * (newton_sqrt, 5 multiplies a vector), d^2 = dx^2 + (y^2 + z^2) in samples, stepped from row
 * to row by additions where the elements are evenly spaced, no window test (das_setup.c
 * trims the apertures), the rows' bounds from the group's extent (on_axis_bounds) instead of
 * reduced from the rows, the lanes' geometry loaded as vectors, and the rows rounded to
 * lane_fixed's offsets by one addition and one permutation, so that the sums are the table's
 * integer ones (~20 % faster than in double).  The roots' 12 multiplies a row bound it (zmm
 * multiplies, rsqrt14 among them, issue one a cycle here).  Inlining the forming into the first
 * transmit's sums, so that its multiplies would overlap the sums' permutations, was tried:
 * 13 % slower (one thread, the next row formed one iteration ahead; 32 % without).  So
 * was forming the rows in lane_fixed's units with a per-row base reduced from the rows (as
 * slow as double).  live-1tx / live-3tx without a table in sessions 21 and 22: 2.47 and
 * 4.82 ms, 2.13 and 4.30 ms.
 * A group that mirrors an earlier one about the array's centre (a grid centred on it) forms
 * no rows: it reads that group's, kept in a slot of the thread, in reverse row and lane order
 * (usbeam_das_lanes_mirrors).
 * One transmit of IQ at fs = 4 fc (lane_quarter; the copies with QUARTER): a whole sample
 * turns the carrier a quarter, so das.c stages sample n times j^n (exact: re and im exchanged,
 * one negated) and the taps of a lane whose s lies f past its base sample b bring j^b with
 * them (tap k times j^(c - k), c = 1 for cubic: exchanges again, in the interpolation's own
 * operations); the lane's rotation exp(+j pi/2 s) is then j^b, already there, times
 * exp(+j pi/2 f), from f by two short polynomials (small_rotation), where turn_rotation forms
 * the turns of s_rx (the row's base times the turns of a unit, 32nds from a table, polynomials
 * of the rest): 10 vector operations instead of 20, of ~41 a row.  The transmit's rotation and
 * t0's phase are then one constant for the image (lane_quarter_rot).  live-1tx 1.18 -> 1.02
 * ms, without a table 1.77 -> 1.56 ms (in-process A/B against the same plan at fs (1 + 2^-50),
 * p10 of 600 / 400 calls; images within 3e-7 relative L2).  With several transmits each row's
 * receive rotation, formed once and read back by the others, costs less than a small_rotation
 * per transmit, so they keep it.
 * With the fixed table, such a plan's rows become each valid lane's s itself (lane_direct,
 * direct_rows, at plan creation, by the sums' own integers): its fraction above
 * DIRECT_REL_BITS bits of its first tap past the row's least (lane_base: the window's start, or
 * the gather's base), and the valid lanes in lane_mask, so that a row takes no base, no bounds
 * and no comparisons: the window's permutations read the low 5 bits as they are (the same
 * bits, 22 + 10 at fs = 4 fc: a fixed row's lanes lie within +-2^29 units, 128 samples, of
 * its base and the transmit's offsets within 2^29 of theirs, so a row's first taps lie at
 * most 384 samples apart, and always fit).  live-1tx 0.97 -> 0.87 ms (in-process
 * A/B against the same plan's fixed rows, p10 of 600 calls, images bit-identical).
 * Per (group, transmit): s_tx = (tau_tx - t0) fs of its 16 points (double) in lane_tx (and
 * as offsets from a base in lane_tx_fixed / lane_tx_base with lane_fixed) and
 * rot_tx = exp(+j 2 pi fc tau_tx) as 16 re then 16 im (float) in lane_rot (IQ); per (group,
 * transmit, row): the least first tap of the row's valid lanes in lane_least (or LEAST_NONE,
 * LEAST_GATHER), so that the window's loads wait for no reduction across lanes (the
 * reductions in the row loop: live-1tx 3.0 ms, 2.5 ms without them), and with lane_fixed the
 * row's valid lanes in lane_mask, which the sums take instead of two comparisons and the
 * scalar bounds of the row (live-3tx 3.12 -> 3.05 ms, p10, alternating processes; the same
 * bits).  Staged data:
 * das.c's planes, (transmit, element, sample) rows `channel` floats apart, re and im apart.
 * Units: samples for s = s_tx + s_rx; turns for the rotations.
 * The same weights as the other paths (usbeam_math.h's validity ranges and Catmull-Rom
 * weights, the plan's double geometry; formed rows compute Hann / Tukey weights by float
 * polynomials, ~1e-7 from the table's); the samples are interpolated first and then
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
/* Table rows read this far ahead of the one being summed: the hardware prefetchers alone left
 * the sums waiting on the table (12 rows ahead: live-1tx 2.11 -> 1.79 ms, live-3tx 4.11 ->
 * 3.73 ms, in-process A/B; 12 to 48 rows ahead the same within 1 %, 6 rows 6 % slower). */
#define PREFETCH_ROWS 16
#define OUTSIDE_SAMPLE (-1e30) /* s_rx of a lane outside its point's aperture */
/* The taps of a group's lanes in one row come from a window of 32 staged samples (two vector
 * loads) when their first taps lie within WINDOW_SPAN - taps of each other; else from a
 * gather.  The window reads up to 31 floats past a row's first tap: into the next row, or the
 * zeroed floats past the planes (das_setup.c), never past the buffer. */
#define WINDOW_SPAN 32
/* lane_least's values beside a first tap (>= 0): no valid lane in the row (it adds nothing),
 * or lanes too far apart for the window (a gather) */
/* Plans of a few frames take the lanes too (usbeam_das_lanes_wanted), each frame staged as one:
 * das.c's multi-frame kernels hold 8 frames a vector (IQ; RF 8 or 16), so fewer leave lanes
 * idle (2 frames of 3 transmits, IQ, 256 x 256: 21.8 ms against 4.2 for one frame).  das.c runs
 * the frames in blocks (usbeam_das_lanes_frame_block), a block of one frame being a 1-frame
 * call, so the lanes cost about one 1-frame call a frame, and the multi-frame kernels about
 * what 8 frames cost from 5 frames on (rows of 8).  Measured (RESULTS.md session 28, p10,
 * 20 MHz, 256 x 256, 128 elements, interleaved with the same plan built with
 * USBEAM_DAS_LANES=0): IQ faster up to 5 frames (11 transmits: 60 against 84 ms; 3: 15 against
 * 21 ms; rows formed, 3 transmits: 26 against 36 ms), level or slower at 6 to 7 (rows formed,
 * 3 transmits, 6 frames: 25.7 against 24.2 ms; 1 transmit at fs (1 + 1e-7) 4 fc, 7 frames: 9.1
 * against 7.6); one transmit of IQ at fs = 4 fc (quarter turns) faster up to 7 (7.4 against
 * 9.1 ms), level at 8; IQ of many transmits faster up to 7 (11 transmits, 6 / 7 frames: 69 / 80
 * against 85 / 87 ms; 8: 105 against 88), where a multi-frame call's staged rows of every
 * transmit leave the caches and a frame's stay nearer; RF faster up to 12 (1, 3, 11
 * transmits: 6.5 against 8.0, 18.0 against 21.3, at 10 frames 59 against 98 ms), slower at 16,
 * whose frames fill a vector (23.6 against 18.7). */
#define LANES_MAX_FRAMES_IQ 5
#define LANES_MAX_FRAMES_QUARTER 7
#define LANES_MAX_FRAMES_MANY_TRANSMITS 7 /* IQ of LANES_MANY_TRANSMITS or more */
#define LANES_MANY_TRANSMITS 8
#define LANES_MAX_FRAMES_RF 12
/* Without a table a block of frames shares the rows formed for a group: 1 transmit, 4 frames in
 * one block 5.8 ms against 8.1 as four; 3 transmits, 4 frames 17.4 against 22.1; but 11
 * transmits, 2 frames 43.6 against 36.1, as the group's windows of every frame and transmit
 * then leave L2 (2 MB a grid row at 11 x 6 x 128 elements x 4 lines). */
#define LANES_FORMED_FRAME_TRANSMITS 16
#define LEAST_NONE (-1)
#define LEAST_GATHER (-2)
/* lane_computed: doubles per formed row (form_rows: 16 s_rx, 16 float weights, padding to 64
 * bytes); the rows' bounds follow them (usbeam_das_lane_formed_doubles) */
#define FORMED_STRIDE USBEAM_DAS_LANE_FORMED_DOUBLES
#define BOUNDS_DOUBLES USBEAM_DAS_LANE_BOUNDS_DOUBLES /* per 8 formed rows: least, most, window starts */

/* The range of s where the interpolation's taps all lie in the record (usbeam_math.h), and the
 * rounding of s to its first tap: the one definition the fill and the sums share. */
static inline void sample_range(int kind, size_t n_samples, double *lo, double *hi)
{
    const double last = (double)n_samples - 1.0;
    *lo = kind == USBEAM_INTERP_CUBIC ? 1.0 : 0.0;
    *hi = kind == USBEAM_INTERP_NEAREST ? last : (kind == USBEAM_INTERP_LINEAR ? last - 1.0 : last - 2.0);
}
static inline double first_tap(int kind, double s)
{
    return (kind == USBEAM_INTERP_NEAREST ? rint(s) : floor(s)) - (kind == USBEAM_INTERP_CUBIC);
}
/* lane_least's value for a row whose valid lanes' first taps span [least, most]: the window's
 * start, LEAST_NONE (none valid: most < least) or LEAST_GATHER (too far apart for the window) */
static inline int row_window(int least, int most, int taps)
{
    return most < least ? LEAST_NONE : (most - least > WINDOW_SPAN - taps ? LEAST_GATHER : least);
}

/* lane_fixed's arithmetic, the one definition the fill and the sums share.  Units of 2^-bits
 * sample, bits = 24 + ceil(log2(fc / fs)) (at least 16; 24 for RF without fc): a unit is at
 * most 2^-24 turn of the receive rotation, so rounding s_rx to units costs at most 2 pi 2^-25
 * = 1.9e-7 rad (within das_receive_phase_rad) and the fraction of a tap as little, and the
 * +-2^29 units an offset may hold are at least 32 wavelengths whatever fs (wider rows, or
 * fc / fs > 8: the table in double).  With s = W + d 2^-bits, W =
 * row base + transmit base (whole samples) and d = s_rx offset + s_tx offset (|d| <= 2^30):
 * s in [lo, hi] is d in [(lo - W) 2^bits, (hi - W) 2^bits] (clamped to int32); the first tap's
 * base is W + floor((d + bias) 2^-bits), bias half a sample for nearest-neighbour (halves
 * up), 0 otherwise; the fraction d mod 2^bits, exact in float.  The receive turn of s_rx mod 1
 * in 2^-32 turn: the high 32 bits of s_rx in units times round(fc / fs 2^(64 - bits)) (mod
 * 2^64; at most 2^40), within 2^-30 turn of exact for s_rx below 2^20 samples. */
#define FIXED_LIMIT ((int64_t)1 << 29) /* the largest offset, units */
/* lane_direct: the bits of a lane's first tap past its row's least (the fraction above them) */
#define DIRECT_REL_BITS 10
static int fixed_bits(const usbeam_das_params *prm)
{
    const double turns_per_sample = prm->fc / prm->fs;
    if (!(turns_per_sample > 0.0 && turns_per_sample < 1e6)) return 24; /* RF with fc = 0: no carrier */
    const int bits = 24 + (int)ceil(log2(turns_per_sample));
    return bits < 16 ? 16 : (bits > 28 ? 28 : bits); /* 28: over fix_transmits' 27, the table in double */
}
static inline int32_t clamp_int32(int64_t v)
{
    return v < INT32_MIN ? INT32_MIN : (v > INT32_MAX ? INT32_MAX : (int32_t)v);
}
/* the least d of a valid lane, (lo - W) 2^bits, clamped to int32 and to -2^30 at least: every
 * lane inside its aperture has d >= -2^29, one outside (USBEAM_DAS_LANE_FIXED_OUTSIDE plus a
 * transmit offset in [0, 2^29]) d < -2^30, so the bound alone sets them apart */
static inline int32_t lower_bound(double lo, int64_t whole, int bits)
{
    const int32_t d_lo = clamp_int32(((int64_t)lo - whole) * ((int64_t)1 << bits));
    return d_lo < -(1 << 30) ? -(1 << 30) : d_lo;
}
/* the greatest d of a valid lane, (hi - W) 2^bits, clamped to int32 */
static inline int32_t upper_bound(double hi, int64_t whole, int bits)
{
    return clamp_int32(((int64_t)hi - whole) * ((int64_t)1 << bits));
}
static int64_t fixed_turns_per_unit(const usbeam_das_params *prm, int bits) /* 2^-32 turn a unit, x 2^32 */
{
    return (int64_t)llrint(ldexp(prm->fc / prm->fs, 64 - bits));
}
static inline int64_t shift_floor(int64_t v, int bits) /* floor(v 2^-bits) */
{
    return v >= 0 ? v >> bits : -((-v - 1) >> bits) - 1;
}
static inline int64_t fixed_bias(int kind, int bits)
{
    return kind == USBEAM_INTERP_NEAREST ? (int64_t)1 << (bits - 1) : 0;
}

int usbeam_das_lanes_wanted(const usbeam_das_plan *plan)
{
#if USBEAM_DAS_MULTI_ISA
    const usbeam_das_params *prm = &plan->params;
    const char *env = getenv("USBEAM_DAS_LANES"); /* 0: das_single.c instead (the tests compare both) */
    const size_t most = !plan->is_iq                              ? LANES_MAX_FRAMES_RF
                        : usbeam_das_quarter_turns(plan)            ? LANES_MAX_FRAMES_QUARTER
                        : prm->n_transmits >= LANES_MANY_TRANSMITS ? LANES_MAX_FRAMES_MANY_TRANSMITS
                                                                    : LANES_MAX_FRAMES_IQ;
    return prm->n_frames <= most && usbeam_das_isa() == 2 && plan->taps == usbeam_interp_taps((int)prm->interpolation) &&
           !(env && env[0] == '0');
#else
    (void)plan;
    return 0;
#endif
}

size_t usbeam_das_lanes_frame_block(const usbeam_das_plan *plan)
{
    const usbeam_das_params *prm = &plan->params;
    if (!plan->lane_computed) return 1;
    const size_t block = LANES_FORMED_FRAME_TRANSMITS / prm->n_transmits;
    return block < 1 ? 1 : block > prm->n_frames ? prm->n_frames : block;
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

/* lane_fixed's rows row0 .. row0 + rows - 1 from their s_rx in double (s_rows): each row's
 * base the whole sample nearest the middle of its valid lanes' range, each lane's offset from
 * it in units (rounded to the nearest); and group g's transmit bases and offsets (its points'
 * s_tx, 0 past the last point) likewise, but from the least s_tx down (offsets >= 0, which
 * lower_bound relies on).  An offset beyond FIXED_LIMIT sets lane_fixed_overflow: the table
 * is then built in double. */
static int fixed_offsets(const double *s, int n, int bits, int from_least, int32_t *base_out, int32_t *offsets)
{
    double least = INFINITY, most = -INFINITY;
    for (int j = 0; j < n; ++j)
        if (s[j] != OUTSIDE_SAMPLE) {
            least = s[j] < least ? s[j] : least;
            most = s[j] > most ? s[j] : most;
        }
    const double base = least <= most ? (from_least ? floor(least) : floor(0.5 * (least + most) + 0.5)) : 0.0;
    int fits = fabs(base) < 1e9;
    for (int j = 0; j < LANES; ++j) {
        const double units = j < n && s[j] != OUTSIDE_SAMPLE ? rint(ldexp(s[j] - base, bits)) : 0.0;
        fits &= fabs(units) <= (double)FIXED_LIMIT;
        offsets[j] = j < n && s[j] == OUTSIDE_SAMPLE ? USBEAM_DAS_LANE_FIXED_OUTSIDE : (fits ? (int32_t)units : 0);
    }
    *base_out = fits ? (int32_t)base : 0;
    return fits;
}

/* group g's transmit offsets and bases (lane_tx_fixed, lane_tx_base); 0 where one does not fit */
static int fix_transmits(usbeam_das_plan *plan, size_t g)
{
    const size_t n_tx = plan->params.n_transmits, n_points = plan->params.n_points;
    const size_t in_group = n_points - g * LANES < LANES ? n_points - g * LANES : LANES;
    int fits = plan->lane_fixed_bits <= 27; /* 28: over 27, the table in double (fixed_bits) */
    for (size_t t = 0; t < n_tx; ++t)
        fits &= fixed_offsets(plan->lane_tx + (g * n_tx + t) * LANES, (int)in_group, plan->lane_fixed_bits, 1,
                              plan->lane_tx_base + g * n_tx + t, plan->lane_tx_fixed + (g * n_tx + t) * LANES);
    return fits;
}

static void fix_rows(usbeam_das_plan *plan, size_t g, size_t rows, const double *s_rows)
{
    const size_t row0 = plan->lane_offset[g];
    int fits = fix_transmits(plan, g);
    for (size_t r = 0; r < rows; ++r)
        fits &= fixed_offsets(s_rows + r * LANES, LANES, plan->lane_fixed_bits, 0, plan->lane_base + row0 + r,
                              plan->lane_fixed + (row0 + r) * LANES);
    if (!fits) {
#pragma omp atomic write
        plan->lane_fixed_overflow = 1;
    }
}

/* Row `row` of lane_fixed (of group g) for transmit t by group_sum's FIXED integers: each valid
 * lane's first tap and fraction of a sample (units of 2^-bits, past the first tap's base)
 * into first / fraction; returns the valid lanes (inside their apertures and the record). */
static unsigned fixed_row_taps(const usbeam_das_plan *plan, size_t g, size_t t, size_t row, int64_t *first, int64_t *fraction)
{
    const usbeam_das_params *prm = &plan->params;
    const int kind = (int)prm->interpolation, bits = plan->lane_fixed_bits;
    const size_t n_tx = prm->n_transmits;
    double lo, hi;
    sample_range(kind, prm->n_samples, &lo, &hi);
    const int64_t whole = (int64_t)plan->lane_base[row] + plan->lane_tx_base[g * n_tx + t];
    const int32_t d_lo = lower_bound(lo, whole, bits), d_hi = upper_bound(hi, whole, bits);
    unsigned mask = 0;
    for (size_t j = 0; j < LANES; ++j) {
        const int32_t off = plan->lane_fixed[row * LANES + j];
        if (off == USBEAM_DAS_LANE_FIXED_OUTSIDE || g * LANES + j >= prm->n_points) continue;
        const int64_t d = (int64_t)off + plan->lane_tx_fixed[(g * n_tx + t) * LANES + j];
        if (d < d_lo || d > d_hi) continue;
        const int64_t u = d + fixed_bias(kind, bits);
        first[j] = whole + shift_floor(u, bits) - (kind == USBEAM_INTERP_CUBIC);
        fraction[j] = u - shift_floor(u, bits) * ((int64_t)1 << bits);
        mask |= 1u << j;
    }
    return mask;
}

/* lane_direct: group g's rows of lane_fixed (one transmit) into each valid lane's first tap and
 * fraction (fixed_row_taps: the same bits as the sums'), (fraction << DIRECT_REL_BITS) | (first
 * tap - lane_base[row]), lane_base[row] now the least first tap of the row's valid lanes (the
 * window's start, or the gather's base); lane_mask[row] holds the valid lanes already. */
static void direct_rows(usbeam_das_plan *plan, size_t g)
{
    const size_t row0 = plan->lane_offset[g], rows = plan->lane_offset[g + 1] - row0;
    for (size_t r = 0; r < rows; ++r) {
        int64_t first[LANES], fraction[LANES], least = INT64_MAX;
        const unsigned mask = fixed_row_taps(plan, g, 0, row0 + r, first, fraction);
        for (size_t j = 0; j < LANES; ++j)
            if (mask >> j & 1) least = first[j] < least ? first[j] : least;
        int32_t *lanes = plan->lane_fixed + (row0 + r) * LANES;
        for (size_t j = 0; j < LANES; ++j)
            lanes[j] = mask >> j & 1 ? (int32_t)(uint32_t)(((uint64_t)fraction[j] << DIRECT_REL_BITS) | (uint64_t)(first[j] - least)) : 0;
        plan->lane_base[row0 + r] = mask ? (int32_t)least : 0;
    }
}

void usbeam_das_lanes_fill(usbeam_das_plan *plan)
{
    const usbeam_das_params *prm = &plan->params;
    const size_t n_points = prm->n_points, n_tx = prm->n_transmits, n_groups = (n_points + LANES - 1) / LANES;
    const size_t widest_floats = usbeam_das_widest_floats(plan);
    plan->lane_fixed_bits = fixed_bits(prm);
    plan->lane_fixed_turns = fixed_turns_per_unit(prm, plan->lane_fixed_bits);
    int reach = 0; /* 1 + the greatest first tap of any valid lane (then + taps - 1) */
    int spread = 0; /* the most first taps of a row's valid lanes lie apart (lane_direct) */
#pragma omp parallel for schedule(dynamic, 8) num_threads(usbeam_team_size(plan->n_threads)) reduction(max : reach, spread)
    for (ptrdiff_t gi = 0; gi < (ptrdiff_t)n_groups; ++gi) {
        const size_t g = (size_t)gi;
#ifdef _OPENMP
        const int thread = omp_get_thread_num();
#else
        const int thread = 0;
#endif
        float *scratch = plan->scratch + (size_t)thread * plan->thread_floats;
        double *sample = (double *)scratch;
        float *window = scratch + 2 * widest_floats;
        const size_t row0 = plan->lane_offset[g], rows = plan->lane_offset[g + 1] - row0;
        /* the rows in double: the table's, or (lane_fixed) the thread's until converted below;
         * NULL: lane_computed */
        double *s_rows = plan->lane_sample ? plan->lane_sample + row0 * LANES
                                           : (plan->lane_fixed ? plan->lane_rows + (size_t)thread * usbeam_das_lane_formed_doubles(plan->lane_max_rows) : NULL);
        float *w_rows = plan->lane_window ? plan->lane_window + row0 * LANES : NULL;
        if (s_rows)
            for (size_t k = 0; k < rows * LANES; ++k) s_rows[k] = OUTSIDE_SAMPLE;
        if (w_rows) memset(w_rows, 0, rows * LANES * sizeof(float));
        for (size_t j = 0; j < LANES; ++j) {
            const size_t p = g * LANES + j;
            const int count = p < n_points && s_rows ? plan->aperture_count[p] : 0;
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
                if (plan->lane_rot) { /* (QUARTER: lane_quarter_rot instead) */
                    double rot_re, rot_im;
                    usbeam_das_rotation(prm->fc * tx_time, &rot_re, &rot_im);
                    plan->lane_rot[(g * n_tx + t) * 2 * LANES + j] = (float)rot_re;
                    plan->lane_rot[(g * n_tx + t) * 2 * LANES + LANES + j] = (float)rot_im;
                }
            }
        }
        if (plan->lane_fixed) fix_rows(plan, g, rows, s_rows);
        /* each row's least first tap over its valid lanes, per transmit: the s, validity and
         * rounding of group_sum (the same double expressions, or lane_fixed's integers) */
        const int kind = (int)prm->interpolation, taps = usbeam_interp_taps(kind);
        double lo, hi;
        sample_range(kind, prm->n_samples, &lo, &hi);
        for (size_t t = 0; s_rows && t < n_tx; ++t) {
            const double *s_tx = plan->lane_tx + (g * n_tx + t) * LANES;
            int32_t *least_rows = plan->lane_least + row0 * n_tx + t * rows;
            for (size_t r = 0; r < rows; ++r) {
                int least = INT32_MAX, most = INT32_MIN;
                if (plan->lane_fixed) { /* group_sum's FIXED integers */
                    int64_t first[LANES], fraction[LANES];
                    const unsigned mask = fixed_row_taps(plan, g, t, row0 + r, first, fraction);
                    for (size_t j = 0; j < LANES; ++j)
                        if (mask >> j & 1) {
                            least = (int)first[j] < least ? (int)first[j] : least;
                            most = (int)first[j] > most ? (int)first[j] : most;
                        }
                    plan->lane_mask[row0 * n_tx + t * rows + r] = (uint16_t)mask;
                } else {
                    for (size_t j = 0; j < LANES; ++j) {
                        const double sv = s_tx[j] + s_rows[r * LANES + j];
                        if (!(sv >= lo && sv <= hi)) continue;
                        const int first = (int)first_tap(kind, sv);
                        least = first < least ? first : least;
                        most = first > most ? first : most;
                    }
                }
                least_rows[r] = row_window(least, most, taps);
                reach = most + 1 > reach ? most + 1 : reach;
                spread = most - least > spread ? most - least : spread;
            }
        }
    }
    plan->lane_reach = reach > 0 ? (size_t)reach + (size_t)usbeam_interp_taps((int)prm->interpolation) - 1 : 0;
    plan->lane_direct = 0;
    if (plan->lane_quarter && plan->lane_fixed && !plan->lane_fixed_overflow && n_tx == 1 && plan->lane_fixed_bits + DIRECT_REL_BITS <= 32 &&
        spread < (1 << DIRECT_REL_BITS)) {
#pragma omp parallel for schedule(dynamic, 8) num_threads(usbeam_team_size(plan->n_threads))
        for (ptrdiff_t gi = 0; gi < (ptrdiff_t)n_groups; ++gi) direct_rows(plan, (size_t)gi);
        plan->lane_direct = 1;
    }
}

/* lane_extent, for form_rows' bounds of a linear array on the x axis without a table: per
 * group its lanes' least and greatest x and y^2 + z^2 and the farthest |x - x_e| of any of
 * their aperture elements (x_e increases with e here: the ends of each range), over the lanes
 * with an aperture; then every element's x; all in samples.  And the groups' transmit offsets
 * in lane_fixed's units (fix_rows' rule), which the rows formed in them take; and lane_pitch,
 * the elements' spacing where every x lies within PITCH_TOLERANCE of an even spacing (form_rows
 * then steps d^2 from row to row), else 0. */
#define PITCH_TOLERANCE 1e-9 /* samples */
/* lane_extent's elements' x in samples, after its groups' extents */
static inline double *extent_x_samples(const usbeam_das_plan *plan)
{
    return plan->lane_extent + (plan->params.n_points + LANES - 1) / LANES * USBEAM_DAS_LANE_EXTENT_DOUBLES;
}
int usbeam_das_lanes_extents(usbeam_das_plan *plan)
{
    const usbeam_das_params *prm = &plan->params;
    const size_t n_points = prm->n_points, n_groups = (n_points + LANES - 1) / LANES;
    const double spm = prm->fs / prm->c, *xe = plan->element_x;
    for (size_t g = 0; g < n_groups; ++g) {
        double x_min = INFINITY, x_max = -INFINITY, a_min = INFINITY, a_max = -INFINITY, reach = 0.0;
        for (size_t p = g * LANES; p < n_points && p < (g + 1) * LANES; ++p) {
            const int first = plan->aperture_first[p], count = plan->aperture_count[p];
            if (count == 0) continue;
            const double *pt = plan->points + 3 * p, x = pt[0] * spm, across = (pt[1] * pt[1] + pt[2] * pt[2]) * (spm * spm);
            x_min = x < x_min ? x : x_min;
            x_max = x > x_max ? x : x_max;
            a_min = across < a_min ? across : a_min;
            a_max = across > a_max ? across : a_max;
            const double to_first = fabs(x - xe[first] * spm), to_last = fabs(x - xe[first + count - 1] * spm);
            reach = to_first > reach ? to_first : reach;
            reach = to_last > reach ? to_last : reach;
        }
        double *extent = plan->lane_extent + g * USBEAM_DAS_LANE_EXTENT_DOUBLES;
        extent[0] = x_min, extent[1] = x_max, extent[2] = a_min, extent[3] = a_max, extent[4] = reach;
        extent[5] = extent[6] = extent[7] = 0.0;
    }
    const size_t ne = prm->n_elements;
    double *x_samples = extent_x_samples(plan);
    for (size_t e = 0; e < ne; ++e) x_samples[e] = xe[e] * spm;
    plan->lane_pitch = ne > 1 ? (x_samples[ne - 1] - x_samples[0]) / (double)(ne - 1) : 0.0;
    for (size_t e = 0; e < ne; ++e)
        if (!(fabs(x_samples[e] - (x_samples[0] + (double)e * plan->lane_pitch)) <= PITCH_TOLERANCE)) plan->lane_pitch = 0.0;
    int fits = 1;
    for (size_t g = 0; g < n_groups; ++g) fits &= fix_transmits(plan, g);
    return fits;
}

/* lane_mirror: a group whose 16 points mirror, lane for lane in reverse order, an earlier
 * group's about the centre of an array whose elements mirror each other (point j's x + the
 * other's point 15 - j's x = x_0 + x_(n-1), y and z equal; element e's x + element
 * n - 1 - e's x the same; apertures mirrored) has the same s_rx as that group, row r and lane j
 * of one being row rows - 1 - r and lane 15 - j of the other, to MIRROR_TOLERANCE (a root moves
 * by at most the error of dx): its rows need no roots, which take two thirds of a formed row
 * (form_rows).  A grid centred on the array (x = linspace(-a, a, n), the usual one) mirrors every
 * group of a row of points in another but the middle one.  The groups are found in their rows
 * (runs of points of equal y and z: a point's mirror in its run is the run's point as far from
 * its other end).  lane_items pairs each tile with the tile of its groups' mirrors, so that one
 * thread runs the two one after the other and the second reads the first's rows from its slots
 * (lane_thread_doubles).  live-1tx without a table 1.51 -> 1.27 ms, live-3tx 3.77 ->
 * 3.68 ms (p10, in-process, the grid x = linspace(-19.05, 19.05, 256) mm, 128 elements: 2042
 * of 4096 groups mirrored). */
#define MIRROR_TOLERANCE 1e-9 /* samples */
long usbeam_das_lanes_mirrors(usbeam_das_plan *plan)
{
    const usbeam_das_params *prm = &plan->params;
    const size_t n_points = prm->n_points, n_groups = (n_points + LANES - 1) / LANES, ne = prm->n_elements;
    if (!plan->lane_extent || !plan->lane_tx_fixed || ne < 2) return 0;
    const double *x_samples = extent_x_samples(plan), spm = prm->fs / prm->c;
    const double twice_centre = x_samples[0] + x_samples[ne - 1];
    for (size_t e = 0; e < ne; ++e)
        if (!(fabs(x_samples[e] + x_samples[ne - 1 - e] - twice_centre) <= MIRROR_TOLERANCE)) return 0;
    const size_t tile_groups = USBEAM_DAS_LANE_SLOTS, n_tiles = (n_groups + tile_groups - 1) / tile_groups;
    int32_t *mirror = usbeam_alloc(n_groups * sizeof(int32_t)), *partner = usbeam_alloc(n_tiles * sizeof(int32_t));
    int32_t *items = usbeam_alloc(2 * n_tiles * sizeof(int32_t));
    if (!mirror || !partner || !items) {
        usbeam_free(mirror), usbeam_free(partner), usbeam_free(items);
        return -1;
    }
    for (size_t k = 0; k < n_tiles; ++k) partner[k] = -1;
    long mirrored = 0;
    size_t run_start = 0, run_end = 0; /* the run of points of equal y and z that holds point p */
    for (size_t g = 0; g < n_groups; ++g) {
        mirror[g] = -1;
        const size_t p = g * LANES;
        if (p + LANES > n_points) continue;
        while (p >= run_end) {
            run_start = run_end++;
            const double *a = plan->points + 3 * run_start;
            while (run_end < n_points && plan->points[3 * run_end + 1] == a[1] && plan->points[3 * run_end + 2] == a[2]) ++run_end;
        }
        if (p + LANES > run_end) continue;
        const size_t mirror_first = run_start + run_end - 1 - (p + LANES - 1); /* of lane 15 */
        if (mirror_first % LANES != 0 || mirror_first >= p) continue; /* the earlier group of a pair is the source */
        const size_t source = mirror_first / LANES;
        const size_t rows = plan->lane_offset[g + 1] - plan->lane_offset[g];
        int ok = rows == plan->lane_offset[source + 1] - plan->lane_offset[source] &&
                 (size_t)plan->lane_first[g] + rows + (size_t)plan->lane_first[source] == ne;
        for (size_t j = 0; ok && j < LANES; ++j) {
            const size_t q = p + j, q_mirror = mirror_first + LANES - 1 - j;
            const int count = plan->aperture_count[q];
            ok = fabs((plan->points[3 * q] + plan->points[3 * q_mirror]) * spm - twice_centre) <= MIRROR_TOLERANCE &&
                 count == plan->aperture_count[q_mirror] &&
                 (count == 0 || plan->aperture_first[q_mirror] + count + plan->aperture_first[q] == (int)ne);
        }
        if (!ok) continue;
        mirror[g] = (int32_t)source;
        const size_t tile = g / tile_groups, source_tile = source / tile_groups;
        if (partner[source_tile] == -1) partner[source_tile] = (int32_t)tile;
        else if (partner[source_tile] != (int32_t)tile) partner[source_tile] = -2; /* mirrors in two tiles: unpaired */
    }
    /* the items: each tile once, a source tile with the tile of its mirrors where that tile
     * comes later and is not already taken (partner: then the pair's second tile, else -1; -3:
     * taken) */
    size_t n_items = 0;
    for (size_t k = 0; k < n_tiles; ++k) partner[k] = partner[k] > (int32_t)k ? partner[k] : -1;
    for (size_t k = 0; k < n_tiles; ++k) {
        if (partner[k] == -3) continue;
        if (partner[k] >= 0 && partner[partner[k]] == -3) partner[k] = -1;
        if (partner[k] >= 0) partner[partner[k]] = -3;
        items[2 * n_items] = (int32_t)k, items[2 * n_items + 1] = partner[k];
        ++n_items;
    }
    /* A group takes its source's rows only where the source is formed earlier in the same item
     * (its own tile, or the first of its pair): then the source's slot holds it whichever
     * thread runs the item, and the image does not depend on the schedule (formed rows and
     * mirrored ones may differ in the last unit).  Its sources marked -2: formed into their
     * slots, the other groups into the thread's last. */
    for (size_t g = 0; g < n_groups; ++g) {
        if (mirror[g] < 0) continue;
        const size_t tile = g / tile_groups, source_tile = (size_t)mirror[g] / tile_groups;
        if (tile != source_tile && partner[source_tile] != (int32_t)tile) mirror[g] = -1;
    }
    for (size_t g = 0; g < n_groups; ++g)
        if (mirror[g] >= 0) mirror[mirror[g]] = -2, ++mirrored;
    usbeam_free(partner);
    if (mirrored == 0) {
        usbeam_free(mirror), usbeam_free(items);
        return 0;
    }
    plan->lane_mirror = mirror, plan->lane_items = items, plan->lane_n_items = n_items;
    plan->lane_thread_doubles = (USBEAM_DAS_LANE_SLOTS + 1) * (usbeam_das_lane_formed_doubles(plan->lane_max_rows) + USBEAM_DAS_LANE_SLOT_TAG);
    return mirrored;
}

#if USBEAM_DAS_MULTI_ISA
/* the lanes' indices in reverse: a mirror group's order (usbeam_das_lanes_mirrors) */
TARGET_AVX512 static inline __m512i lanes_reversed(void) { return _mm512_setr_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0); }
/* 16 floats from two vectors of 8 doubles */
TARGET_AVX512 static inline __m512 floats_of(__m512d lo, __m512d hi)
{
    return _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(lo)), _mm512_cvtpd_ps(hi), 1);
}

TARGET_AVX512 static inline __m512i ints_of(__m512d lo, __m512d hi)
{
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvttpd_epi32(lo)), _mm512_cvttpd_epi32(hi), 1);
}

/* Rounding immediates as literal constants: an intrinsic's immediate must be one even at -O0,
 * where a const variable is not folded (tests/build/test_layout.py compiles every file so). */
#define ROUND_NEAREST (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define ROUND_DOWN (_MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC)

/* Each lane's sample rounded to its first tap's base: to the nearest for nearest-neighbour,
 * down otherwise (cubic then steps one back). */
TARGET_AVX512 static inline __m512d tap_base(int kind, __m512d s)
{
    return kind == USBEAM_INTERP_NEAREST ? _mm512_roundscale_pd(s, ROUND_NEAREST) : _mm512_roundscale_pd(s, ROUND_DOWN);
}

/* exp(+j 2 pi k / 32) for k = 0 .. 31 (k mod 32 of any integer k), rounded to float */
static const float COS_32NDS[32] = {1.0f, 0.98078528040323043f, 0.92387953251128674f, 0.83146961230254524f,
                                    0.70710678118654757f, 0.55557023301960229f, 0.38268343236508984f,
                                    0.19509032201612833f, 0.0f, -0.19509032201612833f, -0.38268343236508984f,
                                    -0.55557023301960229f, -0.70710678118654757f, -0.83146961230254524f,
                                    -0.92387953251128674f, -0.98078528040323043f, -1.0f, -0.98078528040323043f,
                                    -0.92387953251128674f, -0.83146961230254524f, -0.70710678118654757f,
                                    -0.55557023301960229f, -0.38268343236508984f, -0.19509032201612833f, 0.0f,
                                    0.19509032201612833f, 0.38268343236508984f, 0.55557023301960229f,
                                    0.70710678118654757f, 0.83146961230254524f, 0.92387953251128674f,
                                    0.98078528040323043f};
static const float SIN_32NDS[32] = {0.0f, 0.19509032201612833f, 0.38268343236508984f, 0.55557023301960229f,
                                    0.70710678118654757f, 0.83146961230254524f, 0.92387953251128674f,
                                    0.98078528040323043f, 1.0f, 0.98078528040323043f, 0.92387953251128674f,
                                    0.83146961230254524f, 0.70710678118654757f, 0.55557023301960229f,
                                    0.38268343236508984f, 0.19509032201612833f, 0.0f, -0.19509032201612833f,
                                    -0.38268343236508984f, -0.55557023301960229f, -0.70710678118654757f,
                                    -0.83146961230254524f, -0.92387953251128674f, -0.98078528040323043f, -1.0f,
                                    -0.98078528040323043f, -0.92387953251128674f, -0.83146961230254524f,
                                    -0.70710678118654757f, -0.55557023301960229f, -0.38268343236508984f,
                                    -0.19509032201612833f};

/* exp(+j 2 pi turns) of 16 lanes, turns = s_rx fc / fs (lane_fixed: in 32 bits, mod 1): the
 * fraction of a turn left after whole turns are removed (in double, as chunk_receive in
 * das_delays.c does, or in integers), f in [-1/2, 1/2], split into k / 32 turn (k = f rounded
 * to 32nds, its rotation from the two tables by one two-register permutation each) and r =
 * 2 pi (f - k / 32), |r| <= pi / 32, whose sine and cosine take polynomials to r^3 and r^4
 * (truncation < 7.6e-8 and < 1.2e-9).  Within das_receive_phase_rad (test_das_single.py's
 * phase test: 2.8e-7 rad from lane_fixed, 1.9e-7 from double), in 15 vector operations where
 * chunk_receive's quarter turns and polynomials to r^9 / r^10 take 24 (sixteenths and
 * polynomials to r^5 / r^6, 17: live-1tx 1.85 -> 1.61 ms, live-3tx 3.80 -> 3.58 ms, without a
 * table 3.26 -> 3.06 ms, in-process A/B, images within 1.3e-7 relative). */
__attribute__((always_inline)) TARGET_AVX512 static inline void table_rotation(__m512i k, __m512 r, __m512 *c_re,
                                                                             __m512 *c_im)
{
    const __m512 big_c = _mm512_permutex2var_ps(_mm512_loadu_ps(COS_32NDS), k, _mm512_loadu_ps(COS_32NDS + 16));
    const __m512 big_s = _mm512_permutex2var_ps(_mm512_loadu_ps(SIN_32NDS), k, _mm512_loadu_ps(SIN_32NDS + 16));
    const __m512 r2 = _mm512_mul_ps(r, r);
    const __m512 sn = _mm512_fmadd_ps(_mm512_mul_ps(r, r2), _mm512_set1_ps(-1.0f / 6), r);
    const __m512 cs = _mm512_fmadd_ps(r2, _mm512_fmadd_ps(r2, _mm512_set1_ps(1.0f / 24), _mm512_set1_ps(-0.5f)), _mm512_set1_ps(1.0f));
    *c_re = _mm512_fnmadd_ps(big_s, sn, _mm512_mul_ps(big_c, cs));
    *c_im = _mm512_fmadd_ps(big_c, sn, _mm512_mul_ps(big_s, cs));
}

TARGET_AVX512 static inline void receive_rotation(__m512d s_lo, __m512d s_hi, __m512d turns_per_sample, __m512 *c_re,
                                                  __m512 *c_im)
{
    const __m512d u_lo = _mm512_mul_pd(s_lo, turns_per_sample), u_hi = _mm512_mul_pd(s_hi, turns_per_sample);
    const __m512 f = floats_of(_mm512_sub_pd(u_lo, _mm512_roundscale_pd(u_lo, ROUND_NEAREST)),
                               _mm512_sub_pd(u_hi, _mm512_roundscale_pd(u_hi, ROUND_NEAREST)));
    const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(_mm512_set1_ps(32.0f), f), ROUND_NEAREST); /* -16 .. 16 */
    const __m512 r = _mm512_mul_ps(_mm512_set1_ps(6.28318530717958647692f), _mm512_fnmadd_ps(_mm512_set1_ps(1.0f / 32), k, f));
    table_rotation(_mm512_cvtps_epi32(k), r, c_re, c_im); /* the permutations read k mod 32 */
}

/* The same from a turn held in 32 bits (2^-32 turn units, mod 1 turn: lane_fixed's): k the
 * 32nd nearest, r the rest, exact in integers before its rounding to float. */
__attribute__((always_inline)) TARGET_AVX512 static inline void turn_rotation(__m512i turn, __m512 *c_re, __m512 *c_im)
{
    const __m512i shifted = _mm512_add_epi32(turn, _mm512_set1_epi32(1 << 26)); /* by half a 32nd */
    const __m512i rest = _mm512_sub_epi32(_mm512_and_si512(shifted, _mm512_set1_epi32((1 << 27) - 1)), _mm512_set1_epi32(1 << 26));
    const __m512 r = _mm512_mul_ps(_mm512_set1_ps((float)(6.28318530717958647692 / 4294967296.0)), _mm512_cvtepi32_ps(rest));
    table_rotation(_mm512_srli_epi32(shifted, 27), r, c_re, c_im);
}

/* exp(+j theta) of 16 lanes, |theta| <= pi / 4 (QUARTER's rotation): sin and cos by odd and
 * even polynomials to theta^7 and theta^8, their coefficients fitted here for the least
 * greatest error on [0, pi / 4] (Lawson's reweighted least squares in float64: 1.8e-9 and
 * 1e-10), within 5.1e-8 evaluated in float (measured on 2e5 angles): the table_rotation's
 * accuracy (7.6e-8) in 10 vector operations, counting theta's, where turn_rotation and
 * table_rotation take 20. */
__attribute__((always_inline)) TARGET_AVX512 static inline void small_rotation(__m512 theta, __m512 *c_re, __m512 *c_im)
{
    const __m512 t2 = _mm512_mul_ps(theta, theta);
    const __m512 odd = _mm512_fmadd_ps(_mm512_fmadd_ps(_mm512_set1_ps(-1.949565922e-04f), t2, _mm512_set1_ps(8.331978694e-03f)), t2,
                                       _mm512_set1_ps(-1.666665077e-01f));
    const __m512 even = _mm512_fmadd_ps(_mm512_fmadd_ps(_mm512_set1_ps(2.443847188e-05f), t2, _mm512_set1_ps(-1.388736768e-03f)), t2,
                                        _mm512_set1_ps(4.166664556e-02f));
    *c_im = _mm512_fmadd_ps(_mm512_mul_ps(theta, t2), odd, theta);
    *c_re = _mm512_fmadd_ps(t2, _mm512_fmadd_ps(t2, even, _mm512_set1_ps(-0.5f)), _mm512_set1_ps(1.0f));
}

/* lane_fixed's turn of a row base, and a row's turns (the high 32 bits of 16 int64 products).
 * Where turns_per_unit is a multiple of 2^32 (fc / fs a dyadic fraction, as at fs = 4 fc:
 * whole_turns = turns_per_unit / 2^32, else 0), those bits are the low 32 of offsets x
 * whole_turns, one multiply for the 64-bit products' six operations (two of them multiplies,
 * three shuffles): the table's sums over live-1tx's rows 37.9 -> 33.1 cycles a row (one
 * thread, a C harness), the same bits. */
static inline int32_t fixed_base_turn(int64_t base, int bits, int64_t turns_per_unit)
{
    return (int32_t)(uint32_t)(((uint64_t)base * ((uint64_t)1 << bits) * (uint64_t)turns_per_unit) >> 32);
}
static inline int32_t fixed_whole_turns(int64_t turns_per_unit)
{
    return (turns_per_unit & 0xFFFFFFFF) == 0 ? (int32_t)(turns_per_unit >> 32) : 0;
}
__attribute__((always_inline)) TARGET_AVX512 static inline __m512i fixed_turns(__m512i offsets, __m512i turns_per_unit,
                                                                              int32_t whole_turns, int32_t base_turn)
{
    if (whole_turns != 0) return _mm512_add_epi32(_mm512_mullo_epi32(offsets, _mm512_set1_epi32(whole_turns)), _mm512_set1_epi32(base_turn));
    const __m512i lo = _mm512_mullo_epi64(_mm512_cvtepi32_epi64(_mm512_castsi512_si256(offsets)), turns_per_unit);
    const __m512i hi = _mm512_mullo_epi64(_mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(offsets, 1)), turns_per_unit);
    const __m512i high = _mm512_permutex2var_epi32(lo, _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31), hi);
    return _mm512_add_epi32(high, _mm512_set1_epi32(base_turn));
}

/* Window weights (float) at |u| = a of 16 lanes where a <= 1 (the caller masks the rest):
 * usbeam_window's Hann / Tukey, 1 on the flat part (a <= flat) and 0.5 (1 + cos(2 pi x)) with
 * x = (a - flat) turns_per_u in [0, 1/2] turn beyond, as -sin(2 pi (x - 1/4)) by its Taylor
 * polynomial to z^13 on |z| <= pi / 2 (truncation < 6e-8). */
TARGET_AVX512 static inline __m512 window_weights(__m512 a, float flat, float turns_per_u)
{
    const __m512 x = _mm512_mul_ps(_mm512_sub_ps(a, _mm512_set1_ps(flat)), _mm512_set1_ps(turns_per_u));
    const __m512 z = _mm512_mul_ps(_mm512_set1_ps(6.28318530717958647692f), _mm512_sub_ps(x, _mm512_set1_ps(0.25f)));
    const __m512 z2 = _mm512_mul_ps(z, z);
    __m512 sn = _mm512_fmadd_ps(z2, _mm512_set1_ps(1.0f / 6227020800.0f), _mm512_set1_ps(-1.0f / 39916800.0f));
    sn = _mm512_fmadd_ps(z2, sn, _mm512_set1_ps(1.0f / 362880));
    sn = _mm512_fmadd_ps(z2, sn, _mm512_set1_ps(-1.0f / 5040));
    sn = _mm512_fmadd_ps(z2, sn, _mm512_set1_ps(1.0f / 120));
    sn = _mm512_fmadd_ps(z2, sn, _mm512_set1_ps(-1.0f / 6));
    sn = _mm512_mul_ps(z, _mm512_fmadd_ps(z2, sn, _mm512_set1_ps(1.0f)));
    const __m512 w = _mm512_mul_ps(_mm512_set1_ps(0.5f), _mm512_sub_ps(_mm512_set1_ps(1.0f), sn));
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, _mm512_set1_ps(flat), _CMP_LE_OQ), w, _mm512_set1_ps(1.0f));
}

/* Lane k of the result: the least (MOST = 0) or the greatest (1) of the 8 lanes of rows[k], in
 * three rounds of two-input shuffles over the 8 rows together (pairs of lanes, then of 128-bit
 * blocks, then of halves): 21 operations for 8 rows where one reduction a row took 7 in a
 * chain, each behind its row's square roots. */
__attribute__((always_inline)) TARGET_AVX512 static inline __m512d rows_min_max(const double (*rows)[8], const int MOST)
{
#define MIN_MAX(A, B) (MOST ? _mm512_max_pd(A, B) : _mm512_min_pd(A, B))
    __m512d pairs[4], quads[2];
    for (int k = 0; k < 4; ++k) { /* block b: lanes 2b, 2b + 1 of rows 2k, 2k + 1 */
        const __m512d a = _mm512_load_pd(rows[2 * k]), b = _mm512_load_pd(rows[2 * k + 1]);
        pairs[k] = MIN_MAX(_mm512_unpacklo_pd(a, b), _mm512_unpackhi_pd(a, b));
    }
    for (int k = 0; k < 2; ++k) /* blocks: rows 4k, 4k + 1 (of lanes 0-3, of lanes 4-7), rows 4k + 2, 4k + 3 */
        quads[k] = MIN_MAX(_mm512_shuffle_f64x2(pairs[2 * k], pairs[2 * k + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                           _mm512_shuffle_f64x2(pairs[2 * k], pairs[2 * k + 1], _MM_SHUFFLE(3, 1, 3, 1)));
    return MIN_MAX(_mm512_shuffle_f64x2(quads[0], quads[1], _MM_SHUFFLE(2, 0, 2, 0)),
                   _mm512_shuffle_f64x2(quads[0], quads[1], _MM_SHUFFLE(3, 1, 3, 1)));
#undef MIN_MAX
}

/* The x, y and z of 8 consecutive points (24 doubles) in three vectors */
TARGET_AVX512 static inline void points_xyz(const double *pts, __m512d *x, __m512d *y, __m512d *z)
{
    const __m512d a = _mm512_loadu_pd(pts), b = _mm512_loadu_pd(pts + 8), c = _mm512_loadu_pd(pts + 16);
    *x = _mm512_mask_permutexvar_pd(_mm512_permutex2var_pd(a, _mm512_setr_epi64(0, 3, 6, 9, 12, 15, 0, 0), b), 0xC0,
                                    _mm512_setr_epi64(0, 0, 0, 0, 0, 0, 2, 5), c);
    *y = _mm512_mask_permutexvar_pd(_mm512_permutex2var_pd(a, _mm512_setr_epi64(1, 4, 7, 10, 13, 0, 0, 0), b), 0xE0,
                                    _mm512_setr_epi64(0, 0, 0, 0, 0, 0, 3, 6), c);
    *z = _mm512_mask_permutexvar_pd(_mm512_permutex2var_pd(a, _mm512_setr_epi64(2, 5, 8, 11, 14, 0, 0, 0), b), 0xE0,
                                    _mm512_setr_epi64(0, 0, 0, 0, 0, 1, 4, 7), c);
}

/* sqrt of 8 doubles from the 14-bit reciprocal square root r (|error| < 2^-14): with
 * delta = q r^2 - 1 (|delta| < 2^-13, exact to rounding by the fma), sqrt(q) = q r (1 +
 * delta)^(-1/2), taken to its delta^2 term: relative error <= 5/16 |delta|^3 = 5.7e-13
 * (measured 5.4e-13 over 2e8 random q), in 5 multiplies where two Newton steps took 6 (a
 * formed row 26.0 -> 23.8 cycles) and vsqrtpd takes the divider 16 cycles; q = 0 gives 0 (the
 * reciprocal of the least normal is finite). */
TARGET_AVX512 static inline __m512d newton_sqrt(__m512d q)
{
    const __m512d r = _mm512_rsqrt14_pd(_mm512_max_pd(q, _mm512_set1_pd(2.2250738585072014e-308)));
    const __m512d root = _mm512_mul_pd(q, r);
    const __m512d delta = _mm512_fmsub_pd(root, r, _mm512_set1_pd(1.0));
    const __m512d w = _mm512_fmadd_pd(delta, _mm512_set1_pd(0.375), _mm512_set1_pd(-0.5));
    return _mm512_fmadd_pd(_mm512_mul_pd(root, delta), w, root);
}

/* form_rows' rows in flight: the lanes of the last 8 rows' valid s_rx, before reduction */
typedef struct formed_bounds {
    __attribute__((aligned(64))) double least[8][8], most[8][8];
} formed_bounds;

/* A formed row's outputs (form_rows' layouts) from its s_rx in double (sv_lo, sv_hi: lanes 0-7,
 * 8-15) and the lanes inside (in_lo, in_hi); and its bounds, reduced every 8 rows. */
__attribute__((always_inline)) TARGET_AVX512 static inline void
emit_row(double *out, size_t r, size_t rows, __m512d sv_lo, __m512d sv_hi, __mmask8 in_lo, __mmask8 in_hi, formed_bounds *fb,
         double *bounds_out)
{
    const __m512d outside = _mm512_set1_pd(OUTSIDE_SAMPLE), infinite = _mm512_set1_pd(INFINITY);
    const __m512d kept_lo = _mm512_mask_blend_pd(in_lo, outside, sv_lo), kept_hi = _mm512_mask_blend_pd(in_hi, outside, sv_hi);
    _mm512_store_pd(out, kept_lo);
    _mm512_store_pd(out + 8, kept_hi);
    _mm512_store_pd(fb->least[r % 8], _mm512_min_pd(_mm512_mask_blend_pd(in_lo, infinite, sv_lo), _mm512_mask_blend_pd(in_hi, infinite, sv_hi)));
    _mm512_store_pd(fb->most[r % 8], _mm512_max_pd(kept_lo, kept_hi)); /* OUTSIDE_SAMPLE is below any valid s_rx */
    if (r % 8 == 7 || r + 1 == rows) { /* the bounds of rows r - r % 8 .. r */
        for (size_t k = r % 8 + 1; k < 8; ++k) {
            _mm512_store_pd(fb->least[k], infinite);
            _mm512_store_pd(fb->most[k], outside);
        }
        const __m512d most = rows_min_max(fb->most, 1);
        double *bounds = bounds_out + BOUNDS_DOUBLES * (r - r % 8) / 8;
        _mm512_store_pd(bounds, rows_min_max(fb->least, 0));
        _mm512_store_pd(bounds + 8, _mm512_mask_blend_pd(_mm512_cmp_pd_mask(most, outside, _CMP_GT_OQ), _mm512_set1_pd(-INFINITY), most));
    }
}

/* The least and most s_rx of each of group g's rows (form_rows' bounds, 8 rows a vector) from
 * its lane_extent, without reducing the rows: a lane inside element e's aperture has
 * d^2 = (x - x_e)^2 + a, x in [x_min, x_max], a in [a_min, a_max], |x - x_e| <= reach, so d
 * lies between the roots of (x_e's distance to [x_min, x_max])^2 + a_min and of
 * min(reach, max(|x_min - x_e|, |x_max - x_e|))^2 + a_max.  Those roots are q times the
 * 14-bit reciprocal root (rsqrt14: relative error < 2^-14, measured 2^-14.03 here), widened
 * by 2^-13 relative (so past both the root's error and the formed rows', newton_sqrt's 6e-13
 * and form_rows' stepping's 3e-9 sample) and by 1e-3 sample, far over lane_fixed's rounding
 * of the rows and of s_tx (2^-bits sample, bits >= 16), so that every valid lane's first
 * tap, however its s is held, lies within the window the bounds give.  Tight for the usual
 * groups, 16 points of a grid row (a fixed) or column (x fixed); looser bounds only send
 * more rows to the gather (2^-13 is a quarter sample at 2048 samples; newton_sqrt here and
 * 1e-9 cost 0.7 cycle a formed row more).  With the geometry in samples (no scaling of each
 * root), a formed row took 24.4 cycles where the reductions' took 30.4 (one thread, a C
 * harness timing form_rows over live-1tx's groups).  Also the least and most over all the
 * rows. */
TARGET_AVX512 static void on_axis_bounds(const usbeam_das_plan *plan, size_t g, size_t rows, const double *x_samples, double *bounds_out,
                                         double *least_out, double *most_out)
{
    __m512d least_all = _mm512_set1_pd(INFINITY), most_all = _mm512_set1_pd(-INFINITY);
    const double *extent = plan->lane_extent + g * USBEAM_DAS_LANE_EXTENT_DOUBLES;
    const __m512d lo_x = _mm512_set1_pd(extent[0]), hi_x = _mm512_set1_pd(extent[1]);
    const __m512d lo_a = _mm512_set1_pd(extent[2]), hi_a = _mm512_set1_pd(extent[3]), reach = _mm512_set1_pd(extent[4]);
    const __m512d least_scale = _mm512_set1_pd(1.0 - 0x1p-13), most_scale = _mm512_set1_pd(1.0 + 0x1p-13);
    const __m512d tiny = _mm512_set1_pd(2.2250738585072014e-308);
    const __m512d slack = _mm512_set1_pd(1e-3); /* samples: over lane_fixed's rounding of s_rx and s_tx (2^-16 at most) */
    const double *row_x = x_samples + plan->lane_first[g];
    for (size_t r8 = 0; r8 < rows; r8 += 8) {
        const __mmask8 in_rows = rows - r8 >= 8 ? 0xFF : (__mmask8)((1u << (rows - r8)) - 1u);
        const __m512d ex = _mm512_maskz_loadu_pd(in_rows, row_x + r8);
        const __m512d near = _mm512_max_pd(_mm512_max_pd(_mm512_sub_pd(lo_x, ex), _mm512_sub_pd(ex, hi_x)), _mm512_setzero_pd());
        const __m512d far = _mm512_min_pd(_mm512_max_pd(_mm512_sub_pd(ex, lo_x), _mm512_sub_pd(hi_x, ex)), reach);
        double *bounds = bounds_out + BOUNDS_DOUBLES * r8 / 8;
        const __m512d q_least = _mm512_max_pd(_mm512_fmadd_pd(near, near, lo_a), tiny), q_most = _mm512_max_pd(_mm512_fmadd_pd(far, far, hi_a), tiny);
        const __m512d least = _mm512_fmsub_pd(_mm512_mul_pd(q_least, _mm512_rsqrt14_pd(q_least)), least_scale, slack);
        const __m512d most = _mm512_fmadd_pd(_mm512_mul_pd(q_most, _mm512_rsqrt14_pd(q_most)), most_scale, slack);
        _mm512_store_pd(bounds, least);
        _mm512_store_pd(bounds + 8, most);
        least_all = _mm512_mask_min_pd(least_all, in_rows, least_all, least);
        most_all = _mm512_mask_max_pd(most_all, in_rows, most_all, most);
    }
    *least_out = _mm512_reduce_min_pd(least_all);
    *most_out = _mm512_reduce_max_pd(most_all);
}

/* lane_computed: the rows of group g into rows_out, FORMED_STRIDE doubles a row (64-byte
 * aligned): s_rx of its 16 lanes (OUTSIDE_SAMPLE where the element is outside the lane's
 * aperture or has weight 0; or, returning 1, as lane_fixed's offsets from *group_base, see
 * below), then (windowed) their window weights as 16 floats; and into bounds_out,
 * BOUNDS_DOUBLES per 8 rows (rows 8b .. 8b + 7: their least valid s_rx, or +inf, at 24b ..
 * 24b + 7, their most, or -inf, at 24b + 8 .., then room for their window starts,
 * computed_least): on the x axis from lane_extent (on_axis_bounds), else reduced 8 rows at a
 * time (emit_row, rows_min_max; one reduction a row cost ~4 %: no-table live-1tx 2.99 ->
 * 2.87 ms, live-3tx 5.49 -> 5.34 ms, the same bits).
 * The geometry of chunk_distances and chunk_distances_general (das_delays.c: the one
 * definition; the tests hold this copy to the table it fills) with the 16 points in the lanes:
 * distance and window mapping (linear array, whose apertures das_setup.c trims to |u| <= 1),
 * or each element's acceptance cone (general), and each lane's [aperture_first,
 * + aperture_count).
 * The weights are formed in float (window_weights) where the table rounds double ones. */
TARGET_AVX512 static int form_rows(const int WINDOWED, const usbeam_das_plan *plan, size_t g, size_t rows,
                                   double *restrict rows_out, double *restrict bounds_out, int64_t *group_base)
{
    const usbeam_das_params *prm = &plan->params;
    const size_t n_points = prm->n_points, ne = prm->n_elements;
    const int general = plan->general, surface = prm->surface, cone = prm->f_number > 0.0;
    double px[LANES], py[LANES], pz[LANES], across[LANES], centre[LANES], inv_half[LANES];
    int32_t first[LANES], end[LANES];
    /* A whole group on the x axis without a window takes its lanes' x, y^2 + z^2 and
     * apertures straight from the plan's arrays into vectors: written lane by lane to the
     * stack, each vector's load waited on its 8 or 16 stores (a formed row of live-1tx 20.4 ->
     * 18.8 cycles with this). */
    const int lanes_in_vectors = plan->lane_extent && !WINDOWED && (g + 1) * LANES <= n_points;
    __m512d lanes_x[2], lanes_across[2];
    __m512i v_first, v_end;
    if (lanes_in_vectors) {
        for (int h = 0; h < 2; ++h) {
            __m512d y, z;
            points_xyz(plan->points + 3 * (g * LANES + 8 * h), &lanes_x[h], &y, &z);
            lanes_across[h] = _mm512_fmadd_pd(y, y, _mm512_mul_pd(z, z));
        }
        v_first = _mm512_loadu_si512(plan->aperture_first + g * LANES);
        v_end = _mm512_add_epi32(v_first, _mm512_loadu_si512(plan->aperture_count + g * LANES));
    } else {
        for (size_t j = 0; j < LANES; ++j) {
            const size_t p = g * LANES + j < n_points ? g * LANES + j : n_points - 1;
            const double *pt = plan->points + 3 * p;
            px[j] = pt[0], py[j] = pt[1], pz[j] = pt[2];
            across[j] = pt[1] * pt[1] + pt[2] * pt[2];
            if (WINDOWED || general) usbeam_das_window_mapping(plan, pt, &centre[j], &inv_half[j]);
            first[j] = plan->aperture_first[p];
            end[j] = g * LANES + j < n_points ? first[j] + plan->aperture_count[p] : first[j];
        }
        for (int h = 0; h < 2; ++h) lanes_x[h] = _mm512_loadu_pd(px + 8 * h), lanes_across[h] = _mm512_loadu_pd(across + 8 * h);
        v_first = _mm512_loadu_si512(first), v_end = _mm512_loadu_si512(end);
    }
    const double two_f = 2.0 * prm->f_number, alpha = prm->tukey_alpha;
    const float flat = prm->window == USBEAM_DAS_HANN ? 0.0f : (float)(1.0 - alpha);
    const float turns_per_u = prm->window == USBEAM_DAS_HANN ? 0.5f : (float)(0.5 / alpha);
    const __m512d one = _mm512_set1_pd(1.0), zero = _mm512_setzero_pd(), spm = _mm512_set1_pd(prm->fs / prm->c);
    formed_bounds fb;
#define MEMBER(E) (_mm512_cmp_epi32_mask(_mm512_set1_epi32(E), v_first, _MM_CMPINT_NLT) & \
                   _mm512_cmp_epi32_mask(_mm512_set1_epi32(E), v_end, _MM_CMPINT_LT))
    if (plan->lane_extent) { /* chunk_distances on the x axis, in samples: d^2 = dx^2 + (y^2 + z^2) */
        /* Where the group's s_rx span less than lane_fixed's offsets hold (2^(29 - bits)
         * samples from a whole-sample base under the least), the rows go out as those offsets
         * (returns 1), so that the sums are the fixed table's integer ones (receive turns,
         * taps, fractions): s_rx + magic rounds s_rx - base to 2^-bits in the low bits of the
         * double, which one permutation gathers.  Else in double. */
        const double *x_samples = extent_x_samples(plan);
        double least_all, most_all;
        on_axis_bounds(plan, g, rows, x_samples, bounds_out, &least_all, &most_all);
        int fixed = 0;
        if (plan->lane_tx_fixed && least_all <= most_all && fabs(least_all) < 1e9) {
            *group_base = (int64_t)floor(least_all);
            fixed = most_all - (double)*group_base < ldexp(1.0, 29 - plan->lane_fixed_bits);
        }
        const __m512d magic = _mm512_set1_pd(1.5 * ldexp(1.0, 52 - plan->lane_fixed_bits) - (double)*group_base);
        const __m512i low_halves = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        const __m512d spm2 = _mm512_mul_pd(spm, spm);
        const __m512d across_lo = _mm512_mul_pd(lanes_across[0], spm2), across_hi = _mm512_mul_pd(lanes_across[1], spm2);
        const __m512d px_lo = _mm512_mul_pd(lanes_x[0], spm), px_hi = _mm512_mul_pd(lanes_x[1], spm);
        __m512d centre_lo = zero, centre_hi = zero, inv_lo = zero, inv_hi = zero; /* the window's mapping, x in samples */
        if (WINDOWED) {
            centre_lo = _mm512_mul_pd(_mm512_loadu_pd(centre), spm), centre_hi = _mm512_mul_pd(_mm512_loadu_pd(centre + 8), spm);
            inv_lo = _mm512_div_pd(_mm512_loadu_pd(inv_half), spm), inv_hi = _mm512_div_pd(_mm512_loadu_pd(inv_half + 8), spm);
        }
        /* Uniform elements (lane_pitch): d^2 steps from row to row by its first difference,
         * which steps by its second, 2 pitch^2: two additions a vector for a subtraction and
         * a multiply (form_rows 23.8 -> 21.1 cycles a row, one thread, the C harness).  The
         * additions' rounding piles up to at most rows x d^2's ulp plus rows^2 / 2 x the
         * steps' (bounded by the rows' farthest |dx|), which moves a root d by that / 2d:
         * within 1e-9 sample (as lane_pitch's tolerance) where the group's least d^2 allows;
         * else (points at the array's face) each row's d^2 is formed as it is. */
        const double pitch = plan->lane_pitch, *extent = plan->lane_extent + g * USBEAM_DAS_LANE_EXTENT_DOUBLES;
        const double row_x_first = x_samples[plan->lane_first[g]], row_x_last = x_samples[plan->lane_first[g] + rows - 1];
        const double dx_far = fmax(fabs(extent[1] - row_x_first), fabs(row_x_last - extent[0]));
        const double d2_far = dx_far * dx_far + extent[3], step_far = pitch * pitch + 2.0 * fabs(pitch) * dx_far;
        const double piled_up = (double)rows * d2_far * 0x1p-52 + (double)rows * (double)rows * step_far * 0x1p-53;
        const int stepped = pitch != 0.0 && rows > 1 && piled_up <= 2e-9 * sqrt(extent[2]);
        __m512d q_lo = zero, q_hi = zero, step_lo = zero, step_hi = zero;
        const __m512d second = _mm512_set1_pd(2.0 * pitch * pitch);
        if (stepped) {
            const __m512d ex = _mm512_set1_pd(x_samples[plan->lane_first[g]]), p = _mm512_set1_pd(pitch);
            const __m512d dx_lo = _mm512_sub_pd(px_lo, ex), dx_hi = _mm512_sub_pd(px_hi, ex);
            q_lo = _mm512_fmadd_pd(dx_lo, dx_lo, across_lo), q_hi = _mm512_fmadd_pd(dx_hi, dx_hi, across_hi);
            step_lo = _mm512_mul_pd(p, _mm512_fnmadd_pd(_mm512_set1_pd(2.0), dx_lo, p));
            step_hi = _mm512_mul_pd(p, _mm512_fnmadd_pd(_mm512_set1_pd(2.0), dx_hi, p));
        }
        for (size_t r = 0; r < rows; ++r) {
            const int e = plan->lane_first[g] + (int)r;
            const __mmask16 member = MEMBER(e);
            const __m512d ex = _mm512_set1_pd(x_samples[e]);
            __m512d d2_lo, d2_hi;
            if (stepped) {
                d2_lo = q_lo, d2_hi = q_hi;
                q_lo = _mm512_add_pd(q_lo, step_lo), q_hi = _mm512_add_pd(q_hi, step_hi);
                step_lo = _mm512_add_pd(step_lo, second), step_hi = _mm512_add_pd(step_hi, second);
            } else {
                const __m512d dx_lo = _mm512_sub_pd(px_lo, ex), dx_hi = _mm512_sub_pd(px_hi, ex);
                d2_lo = _mm512_fmadd_pd(dx_lo, dx_lo, across_lo), d2_hi = _mm512_fmadd_pd(dx_hi, dx_hi, across_hi);
            }
            const __m512d sv_lo = newton_sqrt(d2_lo), sv_hi = newton_sqrt(d2_hi);
            double *out = rows_out + r * FORMED_STRIDE;
            if (WINDOWED) {
                const __m512d u_lo = _mm512_abs_pd(_mm512_mul_pd(_mm512_sub_pd(ex, centre_lo), inv_lo));
                const __m512d u_hi = _mm512_abs_pd(_mm512_mul_pd(_mm512_sub_pd(ex, centre_hi), inv_hi));
                _mm512_store_ps((float *)(out + 16), _mm512_maskz_mov_ps(member, window_weights(floats_of(u_lo, u_hi), flat, turns_per_u)));
            }
            if (fixed) {
                const __m512i offsets = _mm512_permutex2var_epi32(_mm512_castpd_si512(_mm512_add_pd(sv_lo, magic)), low_halves,
                                                                  _mm512_castpd_si512(_mm512_add_pd(sv_hi, magic)));
                _mm512_store_si512(out, _mm512_mask_blend_epi32(member, _mm512_set1_epi32(USBEAM_DAS_LANE_FIXED_OUTSIDE), offsets));
            } else {
                const __m512d outside = _mm512_set1_pd(OUTSIDE_SAMPLE);
                _mm512_store_pd(out, _mm512_mask_blend_pd((__mmask8)member, outside, sv_lo));
                _mm512_store_pd(out + 8, _mm512_mask_blend_pd((__mmask8)(member >> 8), outside, sv_hi));
            }
        }
        return fixed;
    }
    for (size_t r = 0; r < rows; ++r) {
        const int e = plan->lane_first[g] + (int)r;
        const __mmask16 member = MEMBER(e);
        const __m512d ex = _mm512_set1_pd(plan->element_x[e]), ey = _mm512_set1_pd(plan->element_y[e]);
        const __m512d ez = _mm512_set1_pd(plan->element_z[e]);
        double *out = rows_out + r * FORMED_STRIDE;
        __m512d sv[2], u1[2] = {zero, zero}, u2[2] = {zero, zero};
        __mmask8 in[2];
        for (int h = 0; h < 2; ++h) {
            const __m512d dx = _mm512_sub_pd(_mm512_loadu_pd(px + 8 * h), ex), dy = _mm512_sub_pd(_mm512_loadu_pd(py + 8 * h), ey);
            const __m512d dz = _mm512_sub_pd(_mm512_loadu_pd(pz + 8 * h), ez);
            const __m512d d2 = _mm512_add_pd(_mm512_add_pd(_mm512_mul_pd(dx, dx), _mm512_mul_pd(dy, dy)), _mm512_mul_pd(dz, dz));
            sv[h] = _mm512_mul_pd(newton_sqrt(d2), spm);
            __mmask8 inside = (__mmask8)(member >> (8 * h));
            if (!general) { /* chunk_distances (the aperture trimmed to |u| <= 1) */
                if (WINDOWED)
                    u1[h] = _mm512_abs_pd(_mm512_mul_pd(_mm512_sub_pd(ex, _mm512_loadu_pd(centre + 8 * h)), _mm512_loadu_pd(inv_half + 8 * h)));
            } else if (cone) { /* chunk_distances_general, f_number > 0 */
                const double *f = plan->element_frame + e;
#define DOT(A, B, C) _mm512_add_pd(_mm512_add_pd(_mm512_mul_pd(dx, _mm512_set1_pd(f[(A) * ne])), _mm512_mul_pd(dy, _mm512_set1_pd(f[(B) * ne]))), \
                                   _mm512_mul_pd(dz, _mm512_set1_pd(f[(C) * ne])))
                const __m512d axial = DOT(6, 7, 8), l1 = DOT(0, 1, 2), l2 = surface ? DOT(3, 4, 5) : zero;
#undef DOT
                const __m512d half = _mm512_div_pd(axial, _mm512_set1_pd(two_f));
                const __mmask8 ahead = _mm512_cmp_pd_mask(axial, zero, _CMP_GT_OQ);
                inside &= ahead & _mm512_cmp_pd_mask(_mm512_abs_pd(l1), half, _CMP_LE_OQ) &
                          _mm512_cmp_pd_mask(_mm512_abs_pd(l2), half, _CMP_LE_OQ);
                if (WINDOWED) {
                    const __m512d scale = _mm512_div_pd(_mm512_set1_pd(two_f), _mm512_mask_blend_pd(ahead, one, axial));
                    u1[h] = _mm512_abs_pd(_mm512_mul_pd(l1, scale));
                    u2[h] = _mm512_abs_pd(_mm512_mul_pd(l2, scale));
                }
            } else if (plan->element_window[e] == 0.0) { /* general, f_number = 0: the element's weight */
                inside = 0;
            }
            in[h] = inside;
        }
        if (WINDOWED) {
            __m512 w;
            if (general && !cone) {
                w = _mm512_set1_ps((float)plan->element_window[e]);
            } else {
                w = window_weights(floats_of(u1[0], u1[1]), flat, turns_per_u);
                if (general && surface) w = _mm512_mul_ps(w, window_weights(floats_of(u2[0], u2[1]), flat, turns_per_u));
            }
            _mm512_store_ps((float *)(out + 16), _mm512_maskz_mov_ps((__mmask16)(in[0] | in[1] << 8), w));
        }
        emit_row(out, r, rows, sv[0], sv[1], in[0], in[1], &fb, bounds_out);
    }
#undef MEMBER
    return 0;
}

/* lane_computed: the least first tap of rows 8b .. 8b + 7 for one transmit (their windows'
 * starts), LEAST_GATHER or LEAST_NONE, into the int32 after their bounds, from the range of
 * their valid s_rx and of the transmit's s_tx (tx_lo, tx_hi): s = s_tx + s_rx rounds
 * monotonically, so every valid lane's first tap lies in [first(least s), first(most s)],
 * clipped to the taps of the record (row_window's rules, 8 rows to a vector: one row at a time
 * in scalars, live-1tx without a table 2.62 ms against 2.52, in-process, separate runs). */
__attribute__((always_inline)) TARGET_AVX512 static inline void computed_least(int kind, double *bounds, double tx_lo, double tx_hi,
                                                                              double first_max)
{
    const __m512d s_lo = _mm512_add_pd(_mm512_load_pd(bounds), _mm512_set1_pd(tx_lo));
    const __m512d s_hi = _mm512_add_pd(_mm512_load_pd(bounds + 8), _mm512_set1_pd(tx_hi));
    const __m512d limit = _mm512_set1_pd(1e9);
    /* none valid (+inf / -inf bounds), or (not for the window) a bound of 1e9 samples or more */
    const __mmask8 none = _mm512_cmp_pd_mask(s_lo, s_hi, _CMP_NLE_UQ);
    const __mmask8 far = _mm512_cmp_pd_mask(_mm512_abs_pd(s_lo), limit, _CMP_NLT_UQ) | _mm512_cmp_pd_mask(_mm512_abs_pd(s_hi), limit, _CMP_NLT_UQ);
    const __m512d step = _mm512_set1_pd(kind == USBEAM_INTERP_CUBIC ? 1.0 : 0.0);
    const __m512d lo = _mm512_max_pd(_mm512_sub_pd(tap_base(kind, s_lo), step), _mm512_setzero_pd());
    const __m512d hi = _mm512_min_pd(_mm512_sub_pd(tap_base(kind, s_hi), step), _mm512_set1_pd(first_max));
    const __mmask8 empty = _mm512_cmp_pd_mask(hi, lo, _CMP_LT_OQ);
    const __mmask8 wide = _mm512_cmp_pd_mask(_mm512_sub_pd(hi, lo), _mm512_set1_pd(WINDOW_SPAN - usbeam_interp_taps(kind)), _CMP_GT_OQ);
    /* (far lanes' lo, whatever it is, is replaced before the conversion) */
    __m256i least = _mm512_cvttpd_epi32(_mm512_mask_blend_pd(far | none, lo, _mm512_setzero_pd()));
    least = _mm256_mask_blend_epi32((__mmask8)(wide | far), least, _mm256_set1_epi32(LEAST_GATHER));
    least = _mm256_mask_blend_epi32((__mmask8)(none | (empty & ~far)), least, _mm256_set1_epi32(LEAST_NONE));
    _mm256_store_si256((__m256i *)(bounds + 16), least);
}

/* Catmull-Rom's weights of taps 0 .. 3 at fraction t (usbeam_math.h) */
__attribute__((always_inline)) TARGET_AVX512 static inline void catmull_rom_weights(__m512 t, __m512 *w0, __m512 *w1, __m512 *w2,
                                                                                  __m512 *w3)
{
    const __m512 t2 = _mm512_mul_ps(t, t), t3 = _mm512_mul_ps(t2, t), half = _mm512_set1_ps(0.5f), two = _mm512_set1_ps(2.0f);
    *w0 = _mm512_mul_ps(half, _mm512_sub_ps(_mm512_fmsub_ps(two, t2, t3), t));
    *w1 = _mm512_mul_ps(half, _mm512_fmadd_ps(_mm512_set1_ps(3.0f), t3, _mm512_fnmadd_ps(_mm512_set1_ps(5.0f), t2, two)));
    *w2 = _mm512_mul_ps(half, _mm512_add_ps(_mm512_fnmadd_ps(_mm512_set1_ps(3.0f), t3, _mm512_mul_ps(_mm512_set1_ps(4.0f), t2)), t));
    *w3 = _mm512_mul_ps(half, _mm512_sub_ps(t3, t2));
}

/* Tap K of each valid lane from a staged row (0 elsewhere): WINDOW from the two vectors of
 * the row's 32 samples from the least first tap on (REL: first - least), else a gather. */
#define TAP(K, WINDOW, LO, HI, REL, X, FIRST)                                                                      \
    ((WINDOW) ? _mm512_maskz_permutex2var_ps(valid, LO, _mm512_add_epi32(REL, _mm512_set1_epi32(K)), HI)           \
              : _mm512_mask_i32gather_ps(_mm512_setzero_ps(), valid, _mm512_add_epi32(FIRST, _mm512_set1_epi32(K)), X, 4))

/* Group g's sum for transmit t (before its rotation) into *sum_re / *sum_im.  The receive
 * rotation of each row is formed in the first transmit's pass (FIRST: t = 0), which keeps it
 * in `rotation` (rows x 32 floats, the thread's) for the others to read back from L1; the rows
 * themselves, ~7 KiB, stay in L1 from one transmit to the next.  (A pass of its own before the
 * sums, as first written: live-1tx 5 % and live-3tx 2 % slower, in-process A/B.) */
__attribute__((always_inline)) TARGET_AVX512 static inline void
group_sum(const int KIND, const int IQ, const int WINDOWED, const int COMPUTED, const int FIXED, const int FIRST,
          const int QUARTER, const int DIRECT, const usbeam_das_plan *plan, size_t g,
          __mmask16 lanes, size_t t, const float *restrict re_plane, const float *restrict im_plane,
          float *restrict rotation, const double *restrict formed, ptrdiff_t formed_step, int mirrored, double *restrict bounds,
          int64_t group_base, __m512 *sum_re, __m512 *sum_im)
{
    const usbeam_das_params *prm = &plan->params;
    double lo, hi;
    sample_range(KIND, prm->n_samples, &lo, &hi);
    const __m512d v_lo = _mm512_set1_pd(lo), v_hi = _mm512_set1_pd(hi), turns_per_sample = _mm512_set1_pd(prm->fc / prm->fs);
    const size_t channel = usbeam_das_channel_floats(prm->n_samples, 1), n_tx = prm->n_transmits;
    const __m512d s_tx_lo = _mm512_load_pd(plan->lane_tx + (g * n_tx + t) * LANES);
    const __m512d s_tx_hi = _mm512_load_pd(plan->lane_tx + (g * n_tx + t) * LANES + 8);
    const size_t row0 = plan->lane_offset[g], rows = plan->lane_offset[g + 1] - row0;
    /* the rows: the table's (in double, or FIXED: lane_fixed), or (COMPUTED) formed by form_rows
     * (in double, or FIXED: lane_fixed's offsets from the one base group_base) formed_step
     * doubles apart: -FORMED_STRIDE where they are a mirror group's (mirrored: its rows in
     * reverse and its lanes too, so that the transmit's lanes are reversed to match, and the
     * sums by the caller; tile_lanes_zmm) */
    const ptrdiff_t row_stride = COMPUTED ? formed_step : LANES;
    const double *s_rows = COMPUTED ? formed : (FIXED ? NULL : plan->lane_sample + row0 * LANES);
    const int32_t *fixed_rows = FIXED ? (COMPUTED ? (const int32_t *)formed : plan->lane_fixed + row0 * LANES) : NULL;
    const ptrdiff_t fixed_stride = COMPUTED ? 2 * formed_step : LANES;
    const int32_t *base_rows = FIXED && !COMPUTED ? plan->lane_base + row0 : NULL;
    /* FIXED: the transmit's offsets and base, the units' shift and the turns of a unit */
    const int bits = FIXED ? plan->lane_fixed_bits : 0;
    __m512i tx_fixed = FIXED ? _mm512_load_si512(plan->lane_tx_fixed + (g * n_tx + t) * LANES) : _mm512_setzero_si512();
    if (COMPUTED && FIXED && mirrored) tx_fixed = _mm512_permutexvar_epi32(lanes_reversed(), tx_fixed);
    const int64_t tx_base = FIXED ? plan->lane_tx_base[g * n_tx + t] : 0;
    const int64_t turns_per_unit = FIXED ? plan->lane_fixed_turns : 0;
    const __m128i shift = _mm_cvtsi32_si128(bits);
    const __m512 unit = _mm512_set1_ps(FIXED ? 1.0f / (float)(1 << bits) : 0.0f);
    const __m512i fraction_bits = _mm512_set1_epi32(FIXED ? (1 << bits) - 1 : 0);
    const __m512i bias = _mm512_set1_epi32(FIXED ? (int32_t)fixed_bias(KIND, bits) : 0);
    const __m512i v_turns_per_unit = _mm512_set1_epi64(turns_per_unit);
    const __m512 quarter_turn = _mm512_set1_ps(1.57079632679489662f), minus_eighth_turn = _mm512_set1_ps(-0.785398163397448310f);
    const int32_t whole_turns = fixed_whole_turns(turns_per_unit);
    const float *w_rows = !WINDOWED ? NULL : (COMPUTED ? (const float *)(formed + 16) : plan->lane_window + row0 * LANES);
    const ptrdiff_t w_stride = COMPUTED ? 2 * formed_step : LANES;
    const int32_t *least_rows = COMPUTED ? NULL : plan->lane_least + row0 * n_tx + t * rows;
    const uint16_t *mask_rows = FIXED && !COMPUTED ? plan->lane_mask + row0 * n_tx + t * rows : NULL;
    double tx_least = INFINITY, tx_most = -INFINITY, first_max = 0.0;
    if (COMPUTED) { /* the range of s_tx over the group's points */
        const double *s_tx = plan->lane_tx + (g * n_tx + t) * LANES;
        for (int j = 0; j < LANES; ++j)
            if (lanes >> j & 1) {
                tx_least = s_tx[j] < tx_least ? s_tx[j] : tx_least;
                tx_most = s_tx[j] > tx_most ? s_tx[j] : tx_most;
            }
        first_max = first_tap(KIND, hi);
        for (size_t r8 = 0; r8 < rows; r8 += 8)
            computed_least(KIND, bounds + r8 / 8 * BOUNDS_DOUBLES, tx_least, tx_most, first_max);
    }
    const size_t row_first = (t * prm->n_elements + (size_t)plan->lane_first[g]) * channel;
    /* formed rows share one base (group_base): their rows' base turn and valid range, once */
    const int32_t formed_base_turn = COMPUTED && FIXED ? fixed_base_turn(group_base, bits, turns_per_unit) : 0;
    const int32_t formed_d_lo = COMPUTED && FIXED ? lower_bound(lo, group_base + tx_base, bits) : 0;
    const int32_t formed_d_hi = COMPUTED && FIXED ? upper_bound(hi, group_base + tx_base, bits) : 0;
    /* QUARTER: each lane's rotation from its s's fraction (below), no receive rotation */
    const int RECEIVE_ROTATION = FIRST && IQ && !QUARTER;
    __m512 acc_re = _mm512_setzero_ps(), acc_im = _mm512_setzero_ps();
    for (size_t r = 0; r < rows; ++r) {
        /* the receive rotation: formed by the first transmit (and kept for the others), ahead of
         * the row's skip so that every row has it */
        __m512 c_re_now = _mm512_setzero_ps(), c_im_now = _mm512_setzero_ps();
        /* the row's s_rx: FIXED as offsets in units from a whole-sample base (and the lanes
         * inside their apertures), else in double (OUTSIDE_SAMPLE outside) */
        __m512d s_rx_lo, s_rx_hi;
        __m512i offsets = _mm512_setzero_si512();
        int64_t row_base = 0;
        if (FIXED) {
            offsets = _mm512_load_si512(fixed_rows + (ptrdiff_t)r * fixed_stride);
            row_base = COMPUTED ? group_base : base_rows[r];
        } else if (RECEIVE_ROTATION) {
            s_rx_lo = _mm512_load_pd(s_rows + (ptrdiff_t)r * row_stride), s_rx_hi = _mm512_load_pd(s_rows + (ptrdiff_t)r * row_stride + 8);
        }
        if (RECEIVE_ROTATION) {
            if (FIXED)
                turn_rotation(fixed_turns(offsets, v_turns_per_unit, whole_turns,
                                          COMPUTED ? formed_base_turn : fixed_base_turn(row_base, bits, turns_per_unit)),
                              &c_re_now, &c_im_now);
            else
                receive_rotation(s_rx_lo, s_rx_hi, turns_per_sample, &c_re_now, &c_im_now);
            if (rotation) { /* read back by the other transmits and frames */
                _mm512_store_ps(rotation + 32 * r, c_re_now);
                _mm512_store_ps(rotation + 32 * r + 16, c_im_now);
            }
        }
        const int least = COMPUTED ? ((const int32_t *)(bounds + r / 8 * BOUNDS_DOUBLES + 16))[r % 8] : least_rows[r];
        if (least == LEAST_NONE) continue;
        if (FIXED && !COMPUTED) { /* the table's rows PREFETCH_ROWS ahead (the next group's past the last) */
            _mm_prefetch((const char *)(fixed_rows + (r + PREFETCH_ROWS) * LANES), _MM_HINT_T0);
            if (WINDOWED) _mm_prefetch((const char *)(w_rows + (r + PREFETCH_ROWS) * LANES), _MM_HINT_T0);
        } else if (!COMPUTED) {
            _mm_prefetch((const char *)(s_rows + (r + PREFETCH_ROWS) * LANES), _MM_HINT_T0);
            _mm_prefetch((const char *)(s_rows + (r + PREFETCH_ROWS) * LANES + 8), _MM_HINT_T0);
            if (WINDOWED) _mm_prefetch((const char *)(w_rows + (r + PREFETCH_ROWS) * LANES), _MM_HINT_T0);
        }
        const float *x_re = re_plane + row_first + r * channel, *x_im = IQ ? im_plane + row_first + r * channel : NULL;
        const int window = least >= 0, at = window ? least : 0;
        /* the window's loads first: their address is known before the lanes' delays */
        const __m512 re_lo = _mm512_loadu_ps(x_re + at), re_hi = _mm512_loadu_ps(x_re + at + 16);
        const __m512 im_lo = IQ ? _mm512_loadu_ps(x_im + at) : _mm512_setzero_ps();
        const __m512 im_hi = IQ ? _mm512_loadu_ps(x_im + at + 16) : _mm512_setzero_ps();
        /* each lane's validity, first tap and fraction of s = s_tx + s_rx */
        __mmask16 valid;
        __m512i first, rel; /* rel: first - at, the lane's tap in the window */
        __m512 frac = _mm512_setzero_ps(), theta = _mm512_setzero_ps();
        if (DIRECT) { /* (fraction << DIRECT_REL_BITS) | (first - least): lane_direct */
            valid = (__mmask16)mask_rows[r];
            rel = offsets; /* the permutations read the low 5 bits, the window's taps */
            first = _mm512_add_epi32(_mm512_and_si512(offsets, _mm512_set1_epi32((1 << DIRECT_REL_BITS) - 1)),
                                     _mm512_set1_epi32((int32_t)row_base));
            const __m512 fraction = _mm512_mul_ps(unit, _mm512_cvtepi32_ps(_mm512_srli_epi32(offsets, DIRECT_REL_BITS)));
            if (KIND != USBEAM_INTERP_NEAREST) frac = fraction;
            theta = _mm512_fmadd_ps(fraction, quarter_turn, minus_eighth_turn);
        } else if (FIXED) { /* s = whole + d 2^-bits (fixed_bits) */
            const int64_t whole = row_base + tx_base;
            const __m512i d = _mm512_add_epi32(offsets, tx_fixed);
            if (COMPUTED) /* (a lane outside its aperture falls below d_lo: lower_bound) */
                valid = _mm512_mask_cmp_epi32_mask(_mm512_mask_cmp_epi32_mask(lanes, d, _mm512_set1_epi32(formed_d_lo), _MM_CMPINT_NLT), d,
                                                   _mm512_set1_epi32(formed_d_hi), _MM_CMPINT_LE);
            else /* the table's: the same comparisons, at plan creation */
                valid = (__mmask16)mask_rows[r];
            const __m512i whole_taps = _mm512_sra_epi32(_mm512_add_epi32(d, bias), shift);
            const int32_t first_of_zero = (int32_t)whole - (KIND == USBEAM_INTERP_CUBIC); /* first tap of d = 0 */
            first = _mm512_add_epi32(whole_taps, _mm512_set1_epi32(first_of_zero));
            rel = _mm512_maskz_add_epi32(valid, whole_taps, _mm512_set1_epi32(first_of_zero - at));
            if (KIND != USBEAM_INTERP_NEAREST) /* the fraction's bits, exact in float */
                frac = _mm512_mul_ps(unit, _mm512_cvtepi32_ps(_mm512_and_si512(d, fraction_bits)));
            if (QUARTER) /* s - (its first tap's base) - 1/2: nearest's g 2^-bits is that + 1/2 */
                theta = _mm512_fmadd_ps(KIND == USBEAM_INTERP_NEAREST
                                            ? _mm512_mul_ps(unit, _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_add_epi32(d, bias), fraction_bits)))
                                            : frac,
                                        quarter_turn, minus_eighth_turn);
        } else {
            if (!RECEIVE_ROTATION)
                s_rx_lo = _mm512_load_pd(s_rows + (ptrdiff_t)r * row_stride), s_rx_hi = _mm512_load_pd(s_rows + (ptrdiff_t)r * row_stride + 8);
            const __m512d s_lo = _mm512_add_pd(s_tx_lo, s_rx_lo), s_hi = _mm512_add_pd(s_tx_hi, s_rx_hi);
            const __mmask8 valid_lo = _mm512_cmp_pd_mask(s_lo, v_lo, _CMP_GE_OQ) & _mm512_cmp_pd_mask(s_lo, v_hi, _CMP_LE_OQ);
            const __mmask8 valid_hi = _mm512_cmp_pd_mask(s_hi, v_lo, _CMP_GE_OQ) & _mm512_cmp_pd_mask(s_hi, v_hi, _CMP_LE_OQ);
            valid = (__mmask16)(_mm512_kunpackb((__mmask16)valid_hi, (__mmask16)valid_lo) & lanes);
            const __m512d base_lo = tap_base(KIND, s_lo), base_hi = tap_base(KIND, s_hi);
            first = ints_of(base_lo, base_hi);
            if (KIND != USBEAM_INTERP_NEAREST || QUARTER) frac = floats_of(_mm512_sub_pd(s_lo, base_lo), _mm512_sub_pd(s_hi, base_hi));
            if (QUARTER) /* nearest: frac is s - its first tap already, in [-1/2, 1/2] */
                theta = KIND == USBEAM_INTERP_NEAREST ? _mm512_mul_ps(frac, quarter_turn) : _mm512_fmadd_ps(frac, quarter_turn, minus_eighth_turn);
            if (KIND == USBEAM_INTERP_CUBIC) first = _mm512_sub_epi32(first, _mm512_set1_epi32(1));
            rel = _mm512_maskz_sub_epi32(valid, first, _mm512_set1_epi32(at));
        }
        const __m512 a0 = TAP(0, window, re_lo, re_hi, rel, x_re, first);
        const __m512 b0 = IQ ? TAP(0, window, im_lo, im_hi, rel, x_im, first) : _mm512_setzero_ps();
        __m512 v_re = a0, v_im = b0;
        if (QUARTER && KIND != USBEAM_INTERP_NEAREST) {
            /* staged sample n holds x_n j^n, so tap k of a lane, sample base - c + k (c = 1 for
             * cubic, else 0), is x_(base - c + k) j^(base - c + k): taken times j^(c - k), it
             * is x_(base - c + k) j^base, the j^base the lane's rotation wants (exact: j
             * exchanges re and im and negates one) */
            const __m512 a1 = TAP(1, window, re_lo, re_hi, rel, x_re, first);
            const __m512 b1 = TAP(1, window, im_lo, im_hi, rel, x_im, first);
            if (KIND == USBEAM_INTERP_LINEAR) { /* x0 + f (x1 - x0), x1 = -j (a1 + j b1) = b1 - j a1 */
                v_re = _mm512_fmadd_ps(frac, _mm512_sub_ps(b1, a0), a0);
                v_im = _mm512_fnmadd_ps(frac, _mm512_add_ps(a1, b0), b0);
            } else { /* Catmull-Rom of j x0, x1, -j x2, -x3 */
                const __m512 a2 = TAP(2, window, re_lo, re_hi, rel, x_re, first);
                const __m512 b2 = TAP(2, window, im_lo, im_hi, rel, x_im, first);
                const __m512 a3 = TAP(3, window, re_lo, re_hi, rel, x_re, first);
                const __m512 b3 = TAP(3, window, im_lo, im_hi, rel, x_im, first);
                __m512 w0, w1, w2, w3;
                catmull_rom_weights(frac, &w0, &w1, &w2, &w3);
                v_re = _mm512_fnmadd_ps(w3, a3, _mm512_fmadd_ps(w2, b2, _mm512_fmsub_ps(w1, a1, _mm512_mul_ps(w0, b0))));
                v_im = _mm512_fnmadd_ps(w3, b3, _mm512_fnmadd_ps(w2, a2, _mm512_fmadd_ps(w1, b1, _mm512_mul_ps(w0, a0))));
            }
        } else if (KIND != USBEAM_INTERP_NEAREST) {
            const __m512 a1 = TAP(1, window, re_lo, re_hi, rel, x_re, first);
            const __m512 b1 = IQ ? TAP(1, window, im_lo, im_hi, rel, x_im, first) : _mm512_setzero_ps();
            if (KIND == USBEAM_INTERP_LINEAR) {
                v_re = _mm512_fmadd_ps(frac, _mm512_sub_ps(a1, a0), a0);
                if (IQ) v_im = _mm512_fmadd_ps(frac, _mm512_sub_ps(b1, b0), b0);
            } else { /* Catmull-Rom, usbeam_math.h */
                const __m512 a2 = TAP(2, window, re_lo, re_hi, rel, x_re, first);
                const __m512 a3 = TAP(3, window, re_lo, re_hi, rel, x_re, first);
                __m512 w0, w1, w2, w3;
                catmull_rom_weights(frac, &w0, &w1, &w2, &w3);
                v_re = _mm512_fmadd_ps(w3, a3, _mm512_fmadd_ps(w2, a2, _mm512_fmadd_ps(w1, a1, _mm512_mul_ps(w0, a0))));
                if (IQ) {
                    const __m512 b2 = TAP(2, window, im_lo, im_hi, rel, x_im, first);
                    const __m512 b3 = TAP(3, window, im_lo, im_hi, rel, x_im, first);
                    v_im = _mm512_fmadd_ps(w3, b3, _mm512_fmadd_ps(w2, b2, _mm512_fmadd_ps(w1, b1, _mm512_mul_ps(w0, b0))));
                }
            }
        }
        if (WINDOWED) {
            const __m512 w = _mm512_load_ps(w_rows + (ptrdiff_t)r * w_stride);
            v_re = _mm512_mul_ps(w, v_re);
            if (IQ) v_im = _mm512_mul_ps(w, v_im);
        }
        if (!IQ) {
            acc_re = _mm512_add_ps(acc_re, v_re);
            continue;
        }
        if (QUARTER) small_rotation(theta, &c_re_now, &c_im_now);
        const __m512 c_re = FIRST || QUARTER ? c_re_now : _mm512_load_ps(rotation + 32 * r);
        const __m512 c_im = FIRST || QUARTER ? c_im_now : _mm512_load_ps(rotation + 32 * r + 16);
        acc_re = _mm512_fmadd_ps(c_re, v_re, _mm512_fnmadd_ps(c_im, v_im, acc_re));
        acc_im = _mm512_fmadd_ps(c_re, v_im, _mm512_fmadd_ps(c_im, v_re, acc_im));
    }
    *sum_re = acc_re;
    *sum_im = acc_im;
}

/* Points p0 .. p0 + m - 1 (p0 a multiple of 16) into out_re / out_im. */
__attribute__((always_inline)) TARGET_AVX512 static inline void
tile_lanes_zmm(const int KIND, const int IQ, const int WINDOWED, const int COMPUTED, const int FIXED, const int QUARTER,
               const int DIRECT, const usbeam_das_plan *plan,
               float *rotation, double *formed, size_t p0, size_t m, size_t n_frames, const float *restrict re_frame0,
               const float *restrict im_frame0, float *out_re, float *out_im)
{
    const size_t n_tx = plan->params.n_transmits, bounds_at = FORMED_STRIDE * usbeam_das_lane_formed_rows(plan->lane_max_rows);
    /* with lane_mirror: the slots (usbeam_das_lanes_mirrors), the last for the group at hand */
    const size_t slot_doubles = plan->lane_mirror ? plan->lane_thread_doubles / (USBEAM_DAS_LANE_SLOTS + 1) : 0;
    double *work = COMPUTED && plan->lane_mirror ? formed + USBEAM_DAS_LANE_SLOTS * slot_doubles : formed;
    for (size_t q0 = 0; q0 < m; q0 += LANES) {
        const size_t g = (p0 + q0) / LANES, in_group = m - q0 < LANES ? m - q0 : LANES;
        const __mmask16 lanes = (__mmask16)((1u << in_group) - 1u);
        int64_t group_base = 0;
        int formed_fixed = 0, mirrored = 0;
        const double *rows_at = work;
        ptrdiff_t formed_step = FORMED_STRIDE;
        double *bounds = COMPUTED ? work + bounds_at : NULL;
        if (COMPUTED) {
            const size_t rows = plan->lane_offset[g + 1] - plan->lane_offset[g];
            const int32_t source = plan->lane_mirror ? plan->lane_mirror[g] : -1; /* -2: a source */
            if (source >= 0) { /* a mirror group: the source's rows where a slot holds them in lane_fixed's units */
                const double *kept = formed + (size_t)source % USBEAM_DAS_LANE_SLOTS * slot_doubles;
                const int64_t *tag = (const int64_t *)(kept + slot_doubles - USBEAM_DAS_LANE_SLOT_TAG);
                if (tag[0] == source && tag[2]) {
                    mirrored = formed_fixed = 1, group_base = tag[1];
                    rows_at = kept + (rows - 1) * FORMED_STRIDE, formed_step = -FORMED_STRIDE;
                    double least_all, most_all;
                    on_axis_bounds(plan, g, rows, extent_x_samples(plan), bounds, &least_all, &most_all);
                }
            }
            if (!mirrored) { /* formed here: a source into its slot, tagged */
                double *into = source == -2 ? formed + g % USBEAM_DAS_LANE_SLOTS * slot_doubles : work;
                bounds = into + bounds_at, rows_at = into;
                formed_fixed = form_rows(WINDOWED, plan, g, rows, into, bounds, &group_base);
                if (into != work) {
                    int64_t *tag = (int64_t *)(into + slot_doubles - USBEAM_DAS_LANE_SLOT_TAG);
                    tag[0] = (int64_t)g, tag[1] = group_base, tag[2] = formed_fixed;
                }
            }
        }
        /* the frames of a group one after the other: its rows (formed once), their receive
         * rotations (formed in the first frame's first transmit) and its table's lines serve
         * them all from L1 */
        for (size_t f = 0; f < n_frames; ++f) {
            const float *re_plane = re_frame0 + f * plan->lane_frame, *im_plane = im_frame0 + f * plan->lane_frame;
            __m512 out_r = _mm512_setzero_ps(), out_i = _mm512_setzero_ps();
            for (size_t t = 0; t < n_tx; ++t) {
                __m512 sum_re, sum_im;
#define GROUP_SUM(FIXED_ROWS, FIRST) group_sum(KIND, IQ, WINDOWED, COMPUTED, FIXED_ROWS, FIRST, QUARTER, DIRECT, plan, g, lanes, t, re_plane, im_plane, \
                                               rotation, rows_at, formed_step, mirrored, bounds, group_base, &sum_re, &sum_im)
                const int first = t == 0 && f == 0;
                if (formed_fixed) {
                    if (first)
                        GROUP_SUM(1, 1);
                    else
                        GROUP_SUM(1, 0);
                } else if (first) {
                    GROUP_SUM(FIXED, 1);
                } else {
                    GROUP_SUM(FIXED, 0);
                }
#undef GROUP_SUM
                if (COMPUTED && mirrored) sum_re = _mm512_permutexvar_ps(lanes_reversed(), sum_re), sum_im = _mm512_permutexvar_ps(lanes_reversed(), sum_im);
                if (!IQ) {
                    out_r = _mm512_add_ps(out_r, sum_re);
                    continue;
                }
                /* QUARTER (one transmit): the lanes' rotations left out of the sums, one for all */
                const float *rot = QUARTER ? NULL : plan->lane_rot + (g * n_tx + t) * 2 * LANES;
                const __m512 rot_re = QUARTER ? _mm512_set1_ps(plan->lane_quarter_rot[0]) : _mm512_load_ps(rot);
                const __m512 rot_im = QUARTER ? _mm512_set1_ps(plan->lane_quarter_rot[1]) : _mm512_load_ps(rot + LANES);
                out_r = _mm512_fmadd_ps(rot_re, sum_re, _mm512_fnmadd_ps(rot_im, sum_im, out_r));
                out_i = _mm512_fmadd_ps(rot_re, sum_im, _mm512_fmadd_ps(rot_im, sum_re, out_i));
            }
            _mm512_mask_storeu_ps(out_re + f * USBEAM_DAS_POINT_TILE + q0, lanes, out_r);
            _mm512_mask_storeu_ps(out_im + f * USBEAM_DAS_POINT_TILE + q0, lanes, out_i);
        }
    }
}

/* The copies: (interpolation, IQ, rows) with rows 0 / 1: the table in double without / with
 * window weights, 2 / 3: formed at execute (lane_computed), 4 / 5: the table in lane_fixed;
 * and for IQ the same with QUARTER (lane_quarter), and 6 / 7: lane_fixed's rows direct
 * (lane_direct; RF and IQ without QUARTER never have them: their 6 / 7 are 4 / 5). */
#define TILE_LANES_COPY(NAME, KIND, IQ, QUARTER, ROWS)                                                           \
    TARGET_AVX512 static void NAME##_##KIND##_##IQ##_##ROWS(const usbeam_das_plan *plan, float *rotation,            \
                                                           double *formed, size_t p0, size_t m, size_t n_frames,  \
                                                           const float *re_plane, const float *im_plane,          \
                                                           float *out_re, float *out_im)                          \
    {                                                                                                           \
        tile_lanes_zmm(KIND, IQ, (ROWS) & 1, (ROWS) >> 1 == 1, (ROWS) >> 1 >= 2, QUARTER, (ROWS) >> 1 == 3, plan,    \
                       rotation, formed, p0, m, n_frames, re_plane, im_plane, out_re, out_im);                    \
    }
#define TILE_LANES_ROWS(NAME, KIND, IQ, QUARTER)                                                                 \
    TILE_LANES_COPY(NAME, KIND, IQ, QUARTER, 0) TILE_LANES_COPY(NAME, KIND, IQ, QUARTER, 1)                        \
    TILE_LANES_COPY(NAME, KIND, IQ, QUARTER, 2) TILE_LANES_COPY(NAME, KIND, IQ, QUARTER, 3)                        \
    TILE_LANES_COPY(NAME, KIND, IQ, QUARTER, 4) TILE_LANES_COPY(NAME, KIND, IQ, QUARTER, 5)
#define QUARTER_LANES_ROWS(KIND)                                                                                 \
    TILE_LANES_ROWS(quarter_lanes, KIND, 1, 1) TILE_LANES_COPY(quarter_lanes, KIND, 1, 1, 6)                       \
    TILE_LANES_COPY(quarter_lanes, KIND, 1, 1, 7)
TILE_LANES_ROWS(tile_lanes, 0, 0, 0) TILE_LANES_ROWS(tile_lanes, 0, 1, 0) TILE_LANES_ROWS(tile_lanes, 1, 0, 0)
TILE_LANES_ROWS(tile_lanes, 1, 1, 0) TILE_LANES_ROWS(tile_lanes, 2, 0, 0) TILE_LANES_ROWS(tile_lanes, 2, 1, 0)
QUARTER_LANES_ROWS(0) QUARTER_LANES_ROWS(1) QUARTER_LANES_ROWS(2)
#undef QUARTER_LANES_ROWS
#undef TILE_LANES_ROWS
#undef TILE_LANES_COPY

typedef void (*tile_lanes_fn)(const usbeam_das_plan *, float *, double *, size_t, size_t, size_t, const float *,
                              const float *, float *, float *);
#define ROWS_OF(NAME, KIND, IQ)                                                                                    \
    {NAME##_##KIND##_##IQ##_0, NAME##_##KIND##_##IQ##_1, NAME##_##KIND##_##IQ##_2,                                  \
     NAME##_##KIND##_##IQ##_3, NAME##_##KIND##_##IQ##_4, NAME##_##KIND##_##IQ##_5,                                  \
     NAME##_##KIND##_##IQ##_4, NAME##_##KIND##_##IQ##_5}
#define QUARTER_ROWS_OF(KIND)                                                                                      \
    {quarter_lanes_##KIND##_1_0, quarter_lanes_##KIND##_1_1, quarter_lanes_##KIND##_1_2, quarter_lanes_##KIND##_1_3,    \
     quarter_lanes_##KIND##_1_4, quarter_lanes_##KIND##_1_5, quarter_lanes_##KIND##_1_6, quarter_lanes_##KIND##_1_7}
/* [interpolation][RF, IQ, IQ with QUARTER][rows] */
static const tile_lanes_fn tile_lanes_copies[3][3][8] = {
    {ROWS_OF(tile_lanes, 0, 0), ROWS_OF(tile_lanes, 0, 1), QUARTER_ROWS_OF(0)},
    {ROWS_OF(tile_lanes, 1, 0), ROWS_OF(tile_lanes, 1, 1), QUARTER_ROWS_OF(1)},
    {ROWS_OF(tile_lanes, 2, 0), ROWS_OF(tile_lanes, 2, 1), QUARTER_ROWS_OF(2)}};
#undef QUARTER_ROWS_OF
#undef ROWS_OF
#endif

size_t usbeam_das_lanes_staged_samples(const usbeam_das_plan *plan)
{
    const size_t n_samples = plan->params.n_samples;
#if USBEAM_DAS_MULTI_ISA
    if ((plan->lane_sample || plan->lane_fixed) && usbeam_das_isa() == 2)
        return plan->lane_reach < n_samples ? plan->lane_reach : n_samples;
#endif
    return n_samples;
}

int usbeam_das_lanes_quarter(const usbeam_das_plan *plan)
{
    return plan->lane_quarter && usbeam_das_lanes_active(plan);
}

int usbeam_das_lanes_active(const usbeam_das_plan *plan)
{
#if USBEAM_DAS_MULTI_ISA
    return (plan->lane_sample || plan->lane_fixed || plan->lane_computed) && usbeam_das_isa() == 2;
#else
    (void)plan;
    return 0;
#endif
}

int usbeam_das_tile_lanes(const usbeam_das_plan *plan, int thread, size_t p0, size_t m, size_t n_frames,
                          const float *re_plane, const float *im_plane, float *out_re, float *out_im)
{
#if USBEAM_DAS_MULTI_ISA
    if (!usbeam_das_lanes_active(plan)) return 0;
    const size_t max_rows = (size_t)plan->lane_max_rows;
    float *rotation = plan->lane_cache ? plan->lane_cache + (size_t)thread * 32 * max_rows : NULL;
    double *formed = plan->lane_computed ? plan->lane_rows + (size_t)thread * plan->lane_thread_doubles : NULL;
    const int rows = 2 * (plan->lane_computed ? 1 : plan->lane_fixed ? (plan->lane_direct ? 3 : 2) : 0) + usbeam_das_lanes_windowed(plan);
    tile_lanes_copies[plan->params.interpolation][plan->is_iq + plan->lane_quarter][rows](plan, rotation, formed, p0, m,
                                                                                          n_frames, re_plane, im_plane,
                                                                                          out_re, out_im);
    return 1;
#else
    (void)plan, (void)thread, (void)p0, (void)m, (void)n_frames, (void)re_plane, (void)im_plane, (void)out_re, (void)out_im;
    return 0;
#endif
}
