/*
 * das_internal.h - the DAS plan as the family's files share it (not part of the public
 * contract): das_setup.c (validation, plan create/destroy, transmit times, apertures,
 * table), das_delays.c (per-point delays and weights), das_single.c (the 1-frame sums), das.c
 * (execute).  The sparse (das_sparse.c) and adaptive (adaptive.c) plans build on a CPU DAS
 * plan for its geometry and read whole entries (below).
 *
 * The delay of (point p, transmit t, element e) is split into its two parts:
 *   s(p, t, e) = s_tx(p, t) + s_rx(p, e),  s_tx = (tau_tx - t0) fs,  s_rx = |p - e| fs / c
 * (samples), and the weight of an IQ sample into w_interp(s) x rot_tx(p, t) x c_rx(p, e), with
 * rot_tx = exp(+j 2 pi fc tau_tx) and c_rx = window(p, e) exp(+j 2 pi fc |p - e| / c) (RF:
 * c_rx = window, no rotation).  The receive part, the costly one (a square root, a window and
 * a sine/cosine per pair), is computed once per (point, element) and shared by every transmit
 * and frame; the transmit part once per (point, transmit).  Both in double; s is summed in
 * double, the weights are multiplied out in float32 (das_delays.c; error bound in
 * tests/tolerances.py, das_factored_weight_rel).
 *
 * The receive part is the only place the per-(point, element) math lives (distance, and the
 * window: the linear array's over the point's aperture along x, or in the general geometry
 * each element's acceptance cone around its normal, usbeam_math.h); das.c's fast paths serve
 * both geometries.
 *
 * Receive table (optional, within max_table_bytes): for point p the elements of its aperture
 * (a contiguous range [aperture_first[p], aperture_first[p] + aperture_count[p])) at
 * receive_offset[p]: rx_sample (double) and rx_re, rx_im (float; IQ only for rx_im).  Without
 * it execute recomputes them per point (usbeam_das_point_receive).
 *
 * Whole entries (usbeam_das_point_entries, for the sparse and adaptive plans, formed at their
 * plan time from the same receive part and the transmit times, in double, rounded once to
 * float32): for point p, transmit t and element e of its aperture, ordered (transmit,
 * element), the first interpolation tap (a sample index, int32) and `weight_stride` float
 * weights: `taps` real weights (RF) or `taps` (re, im) pairs (IQ) in which the window and the
 * IQ phase rotation exp(+j 2 pi fc tau) are folded.  Out-of-range samples have zero weights
 * and tap 0.  usbeam_das_entry_table_create tabulates them for every point (entry_offset).
 *
 * Entries (execute's per-thread scratch, filled per point by usbeam_das_transmit_entries):
 * for each (transmit, aperture element) of the point, ordered (transmit, element): `row`, the
 * staged offset of the first interpolation tap's row, and `weight_stride` floats: `taps` real
 * weights (RF) or `taps` (re, im) pairs (IQ), or for linear IQ in rows of 8 frames on AVX-512
 * the same four floats of 16 entries at a time as four runs of 16 (usbeam_das_weights_soa).
 * Out-of-range samples have zero weights and tap 0 (a valid row).
 *
 * A CUDA plan (cuda != NULL) allocates only the geometry, transmit models and apertures its
 * twin uploads (handed over as a usbeam_das_tables, so cuda/das.cu never includes this
 * header), and frees them once the twin is created: after plan creation every pointer
 * below is NULL (nothing marked "CPU only" is ever allocated: no staging buffer, no transmit
 * times, no entries, no table or scratch).
 */
#ifndef USBEAM_DAS_INTERNAL_H
#define USBEAM_DAS_INTERNAL_H

#include "common/usbeam_internal.h"
#include "common/usbeam_math.h"

#define USBEAM_DAS_POINT_TILE 64 /* points per output tile in execute */
#define USBEAM_DAS_SOURCE_BLOCK 16 /* virtual sources per bounding block (das_delays.c) */
#define USBEAM_DAS_SOURCE_GROUP 4  /* blocks per group, bounded as one first (das_delays.c) */
/* A block of virtual sources as a chord from its first source (x0, z0) along the unit (ux, uz):
 * the sources' positions along it lie in [u_lo, u_hi] and within dev of it; their offsets
 * satisfy o >= alpha + beta u; k = beta / sqrt(1 - beta^2) where |beta| < 1. */
enum usbeam_das_block_row {
    USBEAM_DAS_BLOCK_X0, USBEAM_DAS_BLOCK_Z0, USBEAM_DAS_BLOCK_UX, USBEAM_DAS_BLOCK_UZ, USBEAM_DAS_BLOCK_U_LO,
    USBEAM_DAS_BLOCK_U_HI, USBEAM_DAS_BLOCK_BETA, USBEAM_DAS_BLOCK_K, USBEAM_DAS_BLOCK_ALPHA, USBEAM_DAS_BLOCK_DEV,
    USBEAM_DAS_BLOCK_ROWS
};
/* Doubles of tx_source_blocks for n virtual sources: the rows of their blocks and groups. */
static inline size_t usbeam_das_source_bounds(size_t n)
{
    const size_t n_blocks = (n + USBEAM_DAS_SOURCE_BLOCK - 1) / USBEAM_DAS_SOURCE_BLOCK;
    return USBEAM_DAS_BLOCK_ROWS * (n_blocks + (n_blocks + USBEAM_DAS_SOURCE_GROUP - 1) / USBEAM_DAS_SOURCE_GROUP);
}

#define USBEAM_DAS_ENTRY_BLOCK 512 /* entries of a point filled and summed at a time (thread scratch) */

/* Staged floats between two channels (transmit, element) for n_frames frames: the
 * n_samples x n_frames of a channel rounded up to an ODD number of 64-byte lines.  A point
 * reads rows of ~100 channels at nearly the same sample: with a stride of a power of two
 * (2048 samples x 8 frames = 64 KiB) they would all fall in the same few sets of L1 and L2
 * and evict each other; an odd number of lines spreads them over every set. */
static inline size_t usbeam_das_channel_floats(size_t n_samples, size_t n_frames)
{
    return 16 * (((n_samples * n_frames + 15) / 16) | 1);
}

/* Floats a staged sample takes: its frames (RF, and IQ of one frame: re and im planes apart,
 * as the 1-frame paths read 16 or 32 consecutive samples of a plane), or (IQ of 2 frames or
 * more) its re row of the frames followed by its im row, so that the two taps of a linear
 * entry of 8 frames are two whole 64-byte lines where the planes made them three on average
 * (its re and im rows each 64 bytes from a 32-byte boundary: large-256 ~93 -> ~85 ms, one
 * process per build, the same bits).  5 to 7 frames take the rows of 8 (the frames past the
 * call's are not staged, and not stored): the 8-frame pair kernels then read each tap as one
 * line, where rows of 10-14 floats straddled lines (RESULTS.md, session 27).  das.c stages so;
 * das_setup.c sizes the buffer. */
static inline size_t usbeam_das_staged_row_floats(int is_iq, size_t n_frames)
{
    const size_t frames = n_frames >= 5 && n_frames < 8 ? 8 : n_frames;
    return is_iq && n_frames >= 2 ? 2 * frames : frames;
}
/* IQ staged in rows of 8 frames (5 to 8 frames: the 8-frame pair kernels), which execute stages
 * whole, prefetches a transmit's lines at a time (PREFETCH_LINES) and forms with weights in runs
 * of 16 (das.c) */
static inline int usbeam_das_iq_rows_of_8(int is_iq, size_t row_floats)
{
    return is_iq && row_floats == 16;
}

/* Doubles of one row formed at execute by the lane path without a table (das_lanes.c) */
#define USBEAM_DAS_LANE_FORMED_DOUBLES 32
/* Doubles per 8 formed rows of their bounds and window starts (das_lanes.c, form_rows) */
#define USBEAM_DAS_LANE_BOUNDS_DOUBLES 24
/* lane_rows per thread: the formed rows (max_rows rounded up to 8, USBEAM_DAS_LANE_FORMED_DOUBLES
 * each), then their bounds, USBEAM_DAS_LANE_BOUNDS_DOUBLES per 8 rows */
static inline size_t usbeam_das_lane_formed_rows(int max_rows) { return ((size_t)max_rows + 7) / 8 * 8; }
static inline size_t usbeam_das_lane_formed_doubles(int max_rows)
{
    return usbeam_das_lane_formed_rows(max_rows) * USBEAM_DAS_LANE_FORMED_DOUBLES +
           usbeam_das_lane_formed_rows(max_rows) / 8 * USBEAM_DAS_LANE_BOUNDS_DOUBLES;
}
/* With lane_mirror, a thread's lane_rows hold one slot per group of a tile (a group's formed
 * rows, kept for the tile that mirrors it) and one for the group at hand, each followed by
 * USBEAM_DAS_LANE_SLOT_TAG doubles: the group (-1: none), its base, whether its rows are fixed */
#define USBEAM_DAS_LANE_SLOTS (USBEAM_DAS_POINT_TILE / 16)
#define USBEAM_DAS_LANE_SLOT_TAG 8
/* lane_fixed's value for a lane outside its aperture */
#define USBEAM_DAS_LANE_FIXED_OUTSIDE INT32_MIN

struct usbeam_das_plan {
    usbeam_das_params params;   /* scalars only: the pointers below are the plan's copies */
    double *element_x, *element_y, *element_z; /* (n_elements) each */
    double *points;             /* (n_points, 3) */
    usbeam_tx_model *tx;        /* (n_transmits) */
    double *tx_sources;         /* virtual sources of all SOURCES transmits, concatenated (3, n)
                                   blocks, each sorted by x */
    double *tx_source_blocks;   /* per 3-row SOURCES transmit, its sources in blocks of USBEAM_DAS_SOURCE_BLOCK:
                                   (USBEAM_DAS_BLOCK_ROWS, n_blocks) rows, enum usbeam_das_block_row, then
                                   the same rows (USBEAM_DAS_BLOCK_ROWS, n_groups) of the groups of
                                   USBEAM_DAS_SOURCE_GROUP blocks (CPU only; usbeam_das_source_bounds) */
    size_t *tx_block_offset;    /* (n_transmits): where transmit t's rows start in tx_source_blocks (CPU only) */
    int is_iq;
    int taps;                   /* interpolation taps per entry */
    int weight_stride;          /* floats per entry: taps (RF) or 2 taps (IQ) */
    double window_center, window_half_width; /* full aperture (f_number = 0) window mapping, m */
    int general;                /* 1: apertures from element normals (convex, matrix, any line
                                   that is not x strictly increasing with normals +z) */
    double *element_frame;      /* general: (9, n_elements) rows t1x t1y t1z t2x t2y t2z nx ny nz
                                   (usbeam_element_frame), so loops over elements vectorise */
    double *element_window;     /* general: (n_elements) full-aperture window (f_number = 0) */

    double *tx_time;            /* (n_points, n_transmits) transmit times, s (CPU only) */
    int32_t *aperture_first;    /* (n_points) */
    int32_t *aperture_count;    /* (n_points) */
    size_t *receive_offset;     /* (n_points + 1) (CPU only) */
    size_t n_receive;           /* (point, aperture element) pairs */
    int widest;                 /* largest aperture count */
    int subtile_points;         /* points beamformed transmit by transmit (das.c, beamform_points) */
    size_t max_point_entries;   /* n_transmits x widest: whole entries of one point at most */

    int has_table;              /* 1: receive parts precomputed; 0: computed per point in execute */
    double *table_sample;       /* (n_receive) s_rx, samples */
    float *table_re, *table_im; /* (n_receive) c_rx (table_im: IQ only) */
    int32_t *tile_samples;      /* (n_points / USBEAM_DAS_POINT_TILE rounded up, 2): the samples
                                   [first, end) of a channel hold every in-range tap that execute's
                                   tile k reads (staging in windows, das.c); NULL (a lane plan, or
                                   the bounds' scratch not allocated): stage it all at once */
    size_t tile_reach;          /* with tile_samples: the largest end, the samples a record staged
                                   whole needs (das.c plan_stage_windows) */
    /* The lane table of a 1-frame plan on AVX-512 (das_lanes.c, layout there), in place of the
     * receive table (has_table = 0); NULL otherwise. */
    int32_t *lane_first;        /* (n_groups) first element of each group of 16 points */
    size_t *lane_offset;        /* (n_groups + 1) its rows */
    double *lane_sample;        /* (rows, 16) s_rx; NULL where lane_fixed holds it */
    int32_t *lane_fixed;        /* (rows, 16) s_rx - lane_base[row] in units of 2^-lane_fixed_bits
                                   sample (USBEAM_DAS_LANE_FIXED_OUTSIDE outside the aperture):
                                   the table in half the bytes, when every row's lanes and every
                                   group's s_tx fit (das_lanes.c); else NULL and lane_sample */
    int32_t *lane_base;         /* (rows) whole samples, with lane_fixed */
    int32_t *lane_tx_fixed;     /* with lane_fixed, or lane_extent where they fit: (n_groups,
                                   n_transmits, 16) s_tx - lane_tx_base */
    int32_t *lane_tx_base;      /* (n_groups, n_transmits) whole samples, in the same units */
    int lane_fixed_bits;
    int64_t lane_fixed_turns;   /* turns of a unit in 2^-(64 - bits), rounded (das_lanes.c) */
    float *lane_window;         /* (rows, 16) window weights; NULL for a 0 / 1 window (rect) */
    double *lane_tx;            /* (n_groups, n_transmits, 16) s_tx */
    float *lane_rot;            /* (n_groups, n_transmits, 2, 16) rot_tx (re, im) (IQ without
                                   lane_quarter) */
    int lane_quarter;           /* IQ, one transmit, fs = 4 fc: staged sample n holds x_n j^n and
                                   the sums rotate each lane by its s's fraction alone (das_lanes.c
                                   QUARTER); then lane_quarter_rot, the rotation left over */
    float lane_quarter_rot[2];  /* exp(+j 2 pi (fc t0 + 1/8)), 1/8 turn only if not nearest */
    int lane_direct;            /* lane_quarter with lane_fixed (one transmit): its rows hold each
                                   valid lane's s as its first tap past lane_base[row] (the row's
                                   least) and fraction (das_lanes.c direct_rows), lane_mask the
                                   valid lanes: the sums take them as they are */
    uint16_t *lane_mask;        /* with lane_fixed: (rows, n_transmits) laid out as lane_least: the
                                   lanes of a row valid for a transmit (inside their apertures and
                                   the record), which the sums take instead of comparing */
    int lane_max_rows;          /* the most rows of a group */
    float *lane_cache;          /* (n_threads, lane_max_rows, 32) the receive rotations of a group's
                                   rows (IQ, several transmits or frames) */
    int32_t *lane_least;        /* (rows, n_transmits) per group (from lane_offset[g] n_transmits on,
                                   transmit-major): the least first tap of the row's valid lanes */
    int lane_computed;          /* 1: no lane table (over the budget): each group's rows are
                                   formed at execute into lane_rows */
    double *lane_rows;          /* lane_computed: per thread lane_thread_doubles:
                                   the formed rows (s_rx of 16 lanes, their weights), then the
                                   rows' least and most valid s_rx and window starts
                                   (das_lanes.c); while
                                   usbeam_das_lanes_fill builds lane_fixed, its rows in double */
    int lane_fixed_overflow;    /* set by usbeam_das_lanes_fill: a row of lane_fixed did not fit */
    size_t lane_reach;          /* with a lane table: 1 + the last sample any valid lane's taps
                                   read (usbeam_das_lanes_fill), the samples execute stages */
    double *lane_extent;        /* lane_computed, a linear array on the x axis: per group
                                   USBEAM_DAS_LANE_EXTENT_DOUBLES (its lanes' least and greatest x
                                   and y^2 + z^2, the farthest |x - x_e| of their apertures), then
                                   each element's x (n_elements), in samples (fs / c; das_lanes.c
                                   usbeam_das_lanes_extents); else NULL */
    double lane_pitch;          /* with lane_extent: the elements' spacing in samples where
                                   uniform (form_rows steps d^2 by its differences), else 0 */
    int32_t *lane_mirror;       /* with lane_extent, where some groups mirror others about the
                                   array's centre: per group the group whose formed rows, in
                                   reverse row and lane order, are its own, -2 for such a source,
                                   else -1 (das_lanes.c usbeam_das_lanes_mirrors); else NULL */
    int32_t *lane_items;        /* with lane_mirror: (lane_n_items, 2) the tiles one thread runs
                                   one after the other, a tile and the tile that mirrors it (or
                                   -1), so that the second reads the first's formed rows */
    size_t lane_n_items;
    size_t lane_thread_doubles; /* lane_rows per thread: usbeam_das_lane_formed_doubles, or with
                                   lane_mirror USBEAM_DAS_LANE_SLOTS + 1 such slots and tags */

    int n_threads;
    size_t thread_floats;       /* floats of one thread's scratch (below) */
    float *scratch;             /* per thread: subtile_points receive parts (sample as double, re,
                                   im: widest each), their transmit rotations, entries (row:
                                   ptrdiff_t, weights: weight_stride floats; ENTRY_BLOCK of them),
                                   twice: usbeam_das_scratch_entries */
    float *tile;                /* (n_threads, re/im, USBEAM_DAS_POINT_TILE, n_frames) output tiles */

    size_t stage_plane;         /* floats in one staged plane: n_tx * n_el * channel(capacity), + 32
                                   so the two planes do not alias either; a lane plan's (lane_frame)
                                   those of one frame */
    size_t lane_frame;          /* a lane plan (usbeam_das_lanes_wanted): floats from one frame's
                                   staged planes to the next's (the plane, RF, or both, IQ); 0 else */
    float *stage;               /* (transmit, element, sample, frame), frame the fastest, for the
                                   n_frames of the current call (CPU only): a plane (RF), two (IQ of
                                   one frame: re, im), or IQ rows of re then im (das.c,
                                   usbeam_das_staged_row_floats); a lane plan stages each frame
                                   as one, lane_frame floats apart, a block of frames at a time
                                   (usbeam_das_lanes_frame_block) */
    usbeam_das_cuda *cuda;      /* USBEAM_BACKEND_CUDA: the twin in cuda/das.cu (owns the device geometry) */
    /* the arrays above from element_x to receive_offset share one block, the receive table's
     * two or three arrays another (alloc_block, das_setup.c): freed as blocks */
    void *geometry_block, *table_block;
};

/* Receive part of point p (the layout above): sample[i], re[i], im[i] for the i-th element of
 * its aperture (im only for IQ); das_delays.c. */
void usbeam_das_point_receive(const usbeam_das_plan *plan, size_t p, double *sample, float *re, float *im);
/* s_rx (as above) and the window weight (float) of the elements of point p's aperture;
 * das_delays.c. */
void usbeam_das_point_geometry(const usbeam_das_plan *plan, size_t p, double *sample, float *window);
/* The linear array's window mapping of point pt: u = (x_e - centre) * inv_half (das_delays.c). */
void usbeam_das_window_mapping(const usbeam_das_plan *plan, const double *pt, double *centre, double *inv_half);
/* bounds[0], bounds[1]: the [first, end) samples holding every in-range tap of points [p0, p1)
 * (plan->tile_samples), from their s_rx (point p's from s_rx_tile + receive_offset[p] -
 * receive_offset[p0] on) and the transmit times; das_delays.c. */
void usbeam_das_tile_sample_bounds(const usbeam_das_plan *plan, size_t p0, size_t p1, const double *s_rx_tile,
                                   int32_t *bounds);
/* Entries of one transmit: for each of `count` aperture elements i, the row offset
 * row0 + i * channel + first_tap_row * frames and the weights (layout above), from the receive
 * part and the transmit's s_tx (samples) and rotation (rot_re, rot_im; IQ); das_delays.c.
 * first_tap_row is the first tap's sample, or with ring > 0 that sample % ring (staging in a
 * ring, das.c), and an out-of-range tap's row is 0, or ring + USBEAM_DAS_RING_REPEATS.
 * weights_soa: the weights in runs of 16, where usbeam_das_weights_soa says so (else 0). */
void usbeam_das_transmit_entries(const usbeam_das_plan *plan, size_t count, const double *sample, const float *re,
                                 const float *im, double s_tx, float rot_re, float rot_im, ptrdiff_t row0,
                                 ptrdiff_t channel, ptrdiff_t frames, size_t ring, int weights_soa, ptrdiff_t *row,
                                 float *weight);
/* 1 when execute's entries of a call staged in rows of row_floats floats hold their IQ weights
 * as runs of 16 (weights_soa above): each group of 16 entries, 16 k .. 16 k + 15, holds 64
 * floats from weight + 64 k on, w0 re of its 16 entries, then w0 im, w1 re, w1 im (a last
 * group of fewer leaves its runs' last lanes unwritten).  Linear IQ in rows of 8 frames (5 to
 * 8 frames) on AVX-512: the entries that das.c's iq_pair8_soa_2 sums. */
int usbeam_das_weights_soa(const usbeam_das_plan *plan, size_t row_floats);
/* Rows repeated past a staging ring (rows ring .. ring + 3 = rows 0 .. 3, so a tap run starting
 * at row ring - 1 does not wrap), then as many zero rows (das.c). */
#define USBEAM_DAS_RING_REPEATS 4
/* Points whose entries execute forms and sums transmit by transmit (das.c, beamform_points): at
 * most USBEAM_DAS_SUBTILE_MAX, fewer where their receive parts and transmit rotations would
 * take more than USBEAM_DAS_SUBTILE_FLOATS of the thread's scratch (das_setup.c) */
#define USBEAM_DAS_SUBTILE_MAX 32
#define USBEAM_DAS_SUBTILE_FLOATS ((size_t)1 << 15)
/* Floats of a thread's scratch per receive array (sample counts double): the widest aperture,
 * rounded up to 16. */
static inline size_t usbeam_das_widest_floats(const usbeam_das_plan *plan)
{
    return ((size_t)(plan->widest > 0 ? plan->widest : 1) + 15) / 16 * 16;
}
/* A thread's scratch: subtile_points receive parts (4 widest_floats each), then their transmit
 * rotations (2 n_transmits doubles each, rounded up to 16 floats), then two blocks of entries
 * (das.c beamform_points forms one while it sums the other), each a ptrdiff_t row per entry,
 * then weight_stride floats per entry, + 16 floats the pair kernels read past (64-byte multiples
 * throughout, so every block starts aligned) */
static inline size_t usbeam_das_scratch_rotations_at(size_t subtile_points, size_t widest_floats)
{
    return subtile_points * 4 * widest_floats;
}
static inline size_t usbeam_das_scratch_rows_at(size_t subtile_points, size_t widest_floats, size_t n_transmits)
{
    return usbeam_das_scratch_rotations_at(subtile_points, widest_floats) + (4 * subtile_points * n_transmits + 15) / 16 * 16;
}
static inline size_t usbeam_das_entry_block_floats(size_t weight_stride)
{
    return ((size_t)USBEAM_DAS_ENTRY_BLOCK * (sizeof(ptrdiff_t) / sizeof(float) + weight_stride) + 16 + 15) / 16 * 16;
}
static inline double *usbeam_das_scratch_rotations(const usbeam_das_plan *plan, float *scratch)
{
    return (double *)(scratch + usbeam_das_scratch_rotations_at((size_t)plan->subtile_points, usbeam_das_widest_floats(plan)));
}
/* entry block b (0 or 1) of a thread's scratch */
static inline ptrdiff_t *usbeam_das_scratch_entries(const usbeam_das_plan *plan, float *scratch, int b)
{
    return (ptrdiff_t *)(scratch + usbeam_das_scratch_rows_at((size_t)plan->subtile_points, usbeam_das_widest_floats(plan),
                                                               plan->params.n_transmits) +
                         (size_t)b * usbeam_das_entry_block_floats((size_t)plan->weight_stride));
}
/* The receive part of point p (layout above): the table's rows, or computed into the thread's
 * scratch (sample, then re, then im, widest_floats apart) when the plan has no table. */
static inline void usbeam_das_receive_part(const usbeam_das_plan *plan, size_t p, float *scratch,
                                           const double **sample, const float **re, const float **im)
{
    if (plan->has_table) {
        const size_t off = plan->receive_offset[p];
        *sample = plan->table_sample + off;
        *re = plan->table_re + off;
        *im = plan->is_iq ? plan->table_im + off : NULL;
        return;
    }
    const size_t widest_floats = usbeam_das_widest_floats(plan);
    double *own_sample = (double *)scratch;
    float *own_re = scratch + 2 * widest_floats, *own_im = scratch + 3 * widest_floats;
    usbeam_das_point_receive(plan, p, own_sample, own_re, own_im);
    *sample = own_sample, *re = own_re, *im = plan->is_iq ? own_im : NULL;
}
/* Instruction set of the vectorised copies: 2 AVX-512, 1 AVX2 + FMA, 0 baseline; das_delays.c. */
int usbeam_das_isa(void);
/* One frame: the entries of one transmit formed and summed at once (no scratch), added to
 * *acc_re (and *acc_im for IQ); x_re / x_im: the staged rows of (transmit, first aperture
 * element); das_single.c. */
void usbeam_das_transmit_sum_single(const usbeam_das_plan *plan, size_t count, const double *sample, const float *re,
                                    const float *im, double s_tx, float rot_re, float rot_im, ptrdiff_t channel,
                                    const float *x_re, const float *x_im, float *acc_re, float *acc_im);
/* One frame, points p0 .. p0 + m - 1 into out_re[0 .. m) / out_im (0 for RF), from the staged
 * planes: 1 when done (AVX-512 and the plan's taps), 0 to take the per-point path; scratch: the
 * thread's (the receive part without a table); das_single.c. */
int usbeam_das_tile_single(const usbeam_das_plan *plan, size_t p0, size_t m, float *scratch, const float *re_plane,
                           const float *im_plane, float *out_re, float *out_im);
/* The lane table (das_lanes.c): whether plan creation builds it (a plan of one frame, or of a
 * few, on AVX-512, unless USBEAM_DAS_LANES=0) and whether it holds window weights (a window other than 0 / 1);
 * each group's first element and row offsets from the apertures into lane_first / lane_offset
 * (allocated), returning the rows; then the rows themselves (lane_sample or lane_fixed and
 * lane_base, lane_mask, lane_window, lane_tx, lane_rot, lane_least allocated, as the plan has
 * them; lane_fixed_overflow set if a row does not fit lane_fixed; lane_fixed's rows made
 * direct, lane_direct, where lane_quarter allows) from the receive geometry and the transmit
 * times; without a table (lane_computed: lane_sample, lane_window and lane_least NULL),
 * lane_tx and lane_rot alone.
 * Execute (the calling thread's number, for its cache of rotations): points p0 .. p0 + m - 1
 * (a tile, from a multiple of 16) of n_frames frames, frame f staged from re_plane / im_plane +
 * f lane_frame, into out_re / out_im + f USBEAM_DAS_POINT_TILE, 1 when done, 0 when the plan
 * has no lane table. */
int usbeam_das_lanes_wanted(const usbeam_das_plan *plan);
/* One transmit of IQ at fs = 4 fc: a lane plan's input staged in quarter turns (lane_quarter) */
static inline int usbeam_das_quarter_turns(const usbeam_das_plan *plan)
{
    return plan->is_iq && plan->params.n_transmits == 1 && plan->params.fs == 4.0 * plan->params.fc;
}
/* The frames a lane execute stages and sums together (das.c lanes_blocks): 1 from a table,
 * more where the rows are formed at execute, so that a group forms them once for the block */
size_t usbeam_das_lanes_frame_block(const usbeam_das_plan *plan);
int usbeam_das_lanes_windowed(const usbeam_das_plan *plan);
size_t usbeam_das_lanes_count_rows(usbeam_das_plan *plan);
void usbeam_das_lanes_fill(usbeam_das_plan *plan);
#define USBEAM_DAS_LANE_EXTENT_DOUBLES 8
/* lane_extent, and lane_tx_fixed / lane_tx_base (0: they do not fit; the formed rows in double) */
int usbeam_das_lanes_extents(usbeam_das_plan *plan);
/* lane_mirror, lane_items and lane_thread_doubles of a plan with lane_extent and
 * lane_tx_fixed, where groups mirror others; returns the mirrored groups (0: none, nothing
 * allocated) or -1 (out of memory) */
long usbeam_das_lanes_mirrors(usbeam_das_plan *plan);
int usbeam_das_tile_lanes(const usbeam_das_plan *plan, int thread, size_t p0, size_t m, size_t n_frames,
                          const float *re_plane, const float *im_plane, float *out_re, float *out_im);
/* The samples of every channel that a lane execute stages (per frame): lane_reach where
 * usbeam_das_tile_lanes runs from the lane table, else n_samples. */
size_t usbeam_das_lanes_staged_samples(const usbeam_das_plan *plan);
/* 1 where usbeam_das_tile_lanes runs (the plan's lane table or formed rows, on AVX-512), else 0 */
int usbeam_das_lanes_active(const usbeam_das_plan *plan);
/* 1 where a lane execute stages the input rotated by quarter turns (lane_quarter: sample n
 * times j^n) for usbeam_das_tile_lanes, else 0. */
int usbeam_das_lanes_quarter(const usbeam_das_plan *plan);
/* Whole entries of point p (layout above) into tap[] (max_point_entries) and weight[]
 * (max_point_entries x weight_stride); das_delays.c. */
void usbeam_das_point_entries(const usbeam_das_plan *plan, size_t p, int32_t *tap, float *weight);

/* Whole entries of every point: point p's at offset[p] .. offset[p + 1]. */
typedef struct usbeam_das_entry_table {
    size_t *offset;   /* (n_points + 1) */
    size_t n_entries;
    int32_t *tap;     /* (n_entries), NULL when the table exceeds the budget */
    float *weight;    /* (n_entries, weight_stride), NULL likewise */
} usbeam_das_entry_table;
/* The offsets, and the entries when n_entries x (4 + 4 weight_stride) bytes fit `budget` (0:
 * the DAS default, as max_table_bytes); das_setup.c.  Free with usbeam_das_entry_table_free. */
usbeam_status usbeam_das_entry_table_create(const usbeam_das_plan *plan, size_t budget, usbeam_das_entry_table *table);
void usbeam_das_entry_table_free(usbeam_das_entry_table *table);
/* Transmit times of points p0 .. p1-1 (every transmit) into plan->tx_time, the same values;
 * hints: (n_transmits) blocks of virtual sources (-1: none) carried from one point to its
 * neighbour, which makes the search fast (das_delays.c). */
void usbeam_das_fill_transmit_times(const usbeam_das_plan *plan, size_t p0, size_t p1, int *hints);
/* exp(+j 2 pi turns) as (cos, sin), exact to ~1e-11 for any finite turns; das_delays.c. */
void usbeam_das_rotation(double turns, double *re, double *im);
/* exp(+j 2 pi fc tau_tx) of point p's transmits t0 .. t0 + n - 1 (execute, IQ) */
void usbeam_das_transmit_rotations(const usbeam_das_plan *plan, size_t p, size_t t0, size_t n, double *re, double *im);

#endif
