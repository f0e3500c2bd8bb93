/*
 * usbeam/beamform.h - stage 2, channel data -> image: delay-and-sum for linear arrays, row-column / TOBE arrays.
 *
 * RF -> acquire -> demod -> [beamform] -> bmode | doppler -> ai
 */
#ifndef USBEAM_BEAMFORM_H
#define USBEAM_BEAMFORM_H

#include "usbeam/core.h"
#include "usbeam/device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Delay-and-sum beamforming for any probe: linear, phased, convex and matrix arrays
 * (csrc/beamform/das_setup.c, das_delays.c, das.c).
 * in : channel data (n_frames, n_transmits, n_elements, n_samples), C order;
 *      int16 or float32 RF, or complex64 IQ (down-mixed with the same t0).
 * out: (n_frames, n_points); float32 for RF input, complex64 for IQ input.
 * Conventions (MUST/PyMUST): x along the array (0 at its centre), z depth; t = 0 when the
 * first element fires; sample n is at t0 + n/fs.  tau = tau_tx(p) + |p - e|/c, sample
 * index s = (tau - t0) fs; IQ samples are rotated by exp(+j 2 pi fc tau).  Element e
 * contributes when |x_p - x_e| <= z_p / (2 F) (F = f_number; 0 = full aperture), weighted
 * by the window; sums over elements and transmits, no normalisation.  Elements with
 * normals (convex arrays), off a strictly increasing x line, or on a surface (matrix
 * arrays): the aperture is each element's acceptance cone around its normal (usbeam_math.h,
 * "Receive aperture and window of an element with a normal"; PyMUST dasmtx / dasmtx3). */
typedef enum usbeam_transmit_kind {
    USBEAM_TRANSMIT_PLANE_WAVE = 0,   /* angle (rad), |angle| < pi/2, > 0 steers to +x */
    USBEAM_TRANSMIT_DIVERGING = 1,    /* virtual source (x, z), z < 0 */
    USBEAM_TRANSMIT_FOCUSED = 2,      /* focus (x, z), z > 0 */
    USBEAM_TRANSMIT_SYNTHETIC = 3,    /* element fires alone */
    USBEAM_TRANSMIT_SOURCES = 4       /* MUST's model of an arbitrary delay law: the wavefront
                                         is the envelope of spherical waves from virtual sources
                                         (x_i, 0, z_i) emitting at path offsets o_i (m):
                                         tau_tx = min_i (o_i + |p - s_i|) / c */
} usbeam_transmit_kind;

typedef struct usbeam_transmit {
    usbeam_transmit_kind kind;
    double angle;    /* plane wave: steering angle, rad */
    double x, z;     /* diverging: virtual source; focused: focus; m */
    size_t element;  /* synthetic aperture: index of the firing element */
    size_t n_sources;        /* sources: number of virtual sources, >= 1 */
    const double *sources;   /* sources: (source_rows, n_sources) rows x (m), [y (m),] z (m),
                                offset o (m) */
    double y;                /* diverging: source y; focused: focus y; m (0 for 2-D imaging) */
    double angle_y;          /* plane wave: steering toward +y, rad, |angle_y| < pi/2; direction
                                (sin a cos b, sin b, cos a cos b) */
    double axis[3];          /* focused: unit beam axis (side of the focus = sign((p - f) . axis));
                                all 0: +z, side = sign(z - z_f) */
    int source_rows;         /* sources: 3 (x, z, o; sources at y = 0) or 4 (x, y, z, o); 0 = 3 */
} usbeam_transmit;

typedef enum usbeam_das_interpolation {
    USBEAM_DAS_NEAREST = 0,   /* round half to even, valid 0 <= s <= n-1 */
    USBEAM_DAS_LINEAR = 1,    /* valid 0 <= s <= n-2 (MUST) */
    USBEAM_DAS_CUBIC = 2      /* Catmull-Rom, valid 1 <= s <= n-3 */
} usbeam_das_interpolation;

typedef enum usbeam_das_window {
    USBEAM_DAS_RECT = 0,
    USBEAM_DAS_HANN = 1,
    USBEAM_DAS_TUKEY = 2      /* tukey_alpha in [0, 1] */
} usbeam_das_window;

typedef struct usbeam_das_params {
    size_t n_elements;
    const double *element_positions;  /* (n_elements, 3) as (x, y, z), m */
    size_t n_transmits;
    const usbeam_transmit *transmits; /* (n_transmits) */
    size_t n_points;
    const double *points;             /* (n_points, 3) as (x, y, z), m; output order */
    size_t n_frames;                  /* frames per execute (the capacity: usbeam_das_execute_frames
                                         takes fewer), >= 1 */
    size_t n_samples;                 /* samples per channel, >= 1 */
    double fs;                        /* sampling frequency, Hz, > 0 */
    double fc;                        /* centre (demodulation) frequency, Hz; > 0 for IQ */
    double c;                         /* speed of sound, m/s, > 0 */
    double t0;                        /* time of sample 0, s */
    double f_number;                  /* receive f-number, >= 0 (0: full aperture) */
    usbeam_das_window window;         /* apodization across the receive aperture */
    double tukey_alpha;               /* Tukey taper fraction, [0, 1] */
    usbeam_das_interpolation interpolation;
    usbeam_dtype input_dtype;         /* INT16 or FLOAT32 (RF) or COMPLEX64 (IQ) */
    size_t max_table_bytes;           /* table budget (DAS: the receive table; adaptive: the
                                         whole entries); above it, execute recomputes them
                                         per call.  0: 1 GiB */
    const double *element_normals;    /* (n_elements, 3) unit normals into the medium (n_z > 0);
                                         NULL: +z for every element */
    int surface;                      /* 0: a line array (linear, phased, convex): aperture and
                                         window in each element's x-z plane; 1: a surface
                                         (matrix array): box aperture in both lateral directions */
} usbeam_das_params;

typedef struct usbeam_das_plan usbeam_das_plan;
usbeam_status usbeam_das_plan_create(const usbeam_das_params *params, usbeam_backend backend,
                                     usbeam_das_plan **plan);
/* in: (n_frames, n_transmits, n_elements, n_samples) of input_dtype;
 * out: (n_frames, n_points) float32 (RF) or complex64 (IQ). */
usbeam_status usbeam_das_execute(usbeam_das_plan *plan, const void *in, void *out);
/* The same for a batch of n_frames <= params.n_frames frames (the plan's capacity):
 * in (n_frames, n_transmits, n_elements, n_samples), out (n_frames, n_points). */
usbeam_status usbeam_das_execute_frames(usbeam_das_plan *plan, size_t n_frames, const void *in, void *out);
void usbeam_das_plan_destroy(usbeam_das_plan *plan);
/* How execute stages a call of n_frames frames: *windows windows of samples going round a ring
 * of *ring_rows rows per channel, or 1 and 0: the whole record at once (a record over 12 MiB of
 * several frames, on a grid whose points come in order of depth, goes round a ring that stays
 * in cache, except IQ of 5 to 8 frames, staged whole); samples [0, *staged_samples) of each
 * channel are staged (NULL: not asked), the rest, which no point reads, only checked for NaN
 * and inf.  USBEAM_ERR_INVALID_ARGUMENT for a CUDA plan. */
usbeam_status usbeam_das_staging(const usbeam_das_plan *plan, size_t n_frames, size_t *windows, size_t *ring_rows,
                                 size_t *staged_samples);
/* Per tile of execute's points (64 points, in grid order), (n_tiles, 2): the samples [first,
 * end) of a channel that hold every in-range interpolation tap its points read, what staging
 * in windows relies on; valid while the plan lives, with *n_tiles; NULL for a CUDA plan and
 * for a plan of a few frames that sums 16 points at a time on AVX-512 (csrc/beamform/das_lanes.c). */
const int32_t *usbeam_das_tile_samples(const usbeam_das_plan *plan, size_t *n_tiles);
/* Bytes of the precomputed receive table (0 when the plan recomputes per call). */
size_t usbeam_das_table_bytes(const usbeam_das_plan *plan);
/* Rows of the lane table (16 points each): a 1-frame CPU plan on an AVX-512 machine sums its
 * points 16 at a time from it (csrc/beamform/das_lanes.c); 0 when the plan has none. */
size_t usbeam_das_lane_rows(const usbeam_das_plan *plan);
/* The lane table's unit when it holds s_rx in fixed point, 2^-bits sample: bits (24 +
 * ceil(log2(fc / fs))); 0 when it holds them in double (rows too wide) or there is none. */
int usbeam_das_lane_fixed_bits(const usbeam_das_plan *plan);
/* 1 when the lane path sums this plan's 1-frame IQ from input staged in quarter turns (one
 * transmit at fs = 4 fc: sample n times j^n, exactly), rotating each point's taps by their
 * fraction of a sample alone (csrc/beamform/das_lanes.c, QUARTER); 2 when, besides, its lane
 * table holds each point's first tap and fraction per element (lane_direct); else 0. */
int usbeam_das_lane_quarter(const usbeam_das_plan *plan);
/* The groups of 16 points whose rows, formed at execute without a table, are another group's
 * in mirror image (a grid symmetric about the centre of a linear array; csrc/beamform/das_lanes.c
 * usbeam_das_lanes_mirrors): they form none of their own.  0 without. */
long usbeam_das_lane_mirrored(const usbeam_das_plan *plan);
/* The plan's transmit times (s), (n_points, n_transmits), valid while the plan lives, with
 * *n_points and *n_transmits; NULL for a CUDA plan (it computes them on the device). */
const double *usbeam_das_transmit_times(const usbeam_das_plan *plan, size_t *n_points, size_t *n_transmits);
/* The plan's receive aperture sizes, (n_points) elements per point (0: no element's cone
 * holds the point), valid while the plan lives, with *n_points; NULL for a CUDA plan. */
const int32_t *usbeam_das_aperture_counts(const usbeam_das_plan *plan, size_t *n_points);
/* Which of the points rows[0 .. n_rows-1] receive a recorded sample: covered[i] = 1 when for
 * one of the transmits (indices, n_selected of them) some element's round-trip time
 * tau = tau_tx + |p - e| / c lies in [t0, t_end] (the aperture is ignored).  The check behind
 * Beamformer's min_coverage, from the plan's transmit times; USBEAM_ERR_INVALID_ARGUMENT for a
 * row or transmit out of range or a CUDA plan (it has no transmit times on the host). */
usbeam_status usbeam_das_coverage(const usbeam_das_plan *plan, const int64_t *rows, size_t n_rows,
                                  const int64_t *transmits, size_t n_selected, double t0, double t_end,
                                  uint8_t *covered);

/* The sparse-matrix formulation of DAS (csrc/beamform/das_sparse.c): the same parameters,
 * the delay-interpolation-apodization operator built at create as CSR (n_points rows,
 * n_transmits * n_elements * n_samples columns in the input's own order) and applied as a
 * sparse x dense product over the frames; the CUDA twin uses cuSPARSE.  Same image as the
 * gather plan (usbeam_das_plan) of the same parameters. */
typedef struct usbeam_das_sparse_view {
    size_t n_rows, n_columns, nnz;
    int is_complex;              /* 1: values are (nnz, 2) (re, im) for IQ input; 0: (nnz) */
    const int32_t *row_offsets;  /* (n_rows + 1) */
    const int32_t *columns;      /* (nnz), ascending within a row */
    const float *values;         /* (nnz) or (nnz, 2) */
} usbeam_das_sparse_view;
typedef struct usbeam_das_sparse_plan usbeam_das_sparse_plan;
usbeam_status usbeam_das_sparse_plan_create(const usbeam_das_params *params, usbeam_backend backend,
                                            usbeam_das_sparse_plan **plan);
/* in (n_frames, n_transmits, n_elements, n_samples), out (n_frames, n_points), n_frames <=
 * params.n_frames (a CUDA plan: exactly). */
usbeam_status usbeam_das_sparse_execute_frames(usbeam_das_sparse_plan *plan, size_t n_frames, const void *in,
                                               void *out);
void usbeam_das_sparse_plan_destroy(usbeam_das_sparse_plan *plan);
/* Bytes of the operator (row offsets, columns, values), on the host or the device. */
size_t usbeam_das_sparse_bytes(const usbeam_das_sparse_plan *plan);
/* The CSR of a CPU plan (pointers into the plan; all NULL / 0 for a CUDA plan). */
void usbeam_das_sparse_csr(const usbeam_das_sparse_plan *plan, usbeam_das_sparse_view *view);

/* PyMUST dasmtx's automatic f-number from the element directivity: lambda_min =
 * c / (fc (1 + bandwidth/2)); alpha minimises |cos(th) sinc(width/lambda_min sin th) - 0.71|
 * on [0, pi/2] by Brent's bounded method with xtol = pi/100 (the iterates of
 * scipy.optimize.fminbound); F = 1 / (2 tan alpha).  bandwidth is a fraction (0.75). */
usbeam_status usbeam_das_auto_f_number(double element_width, double fc, double bandwidth, double c,
                                       double *f_number);

/* Adaptive beamformers for line arrays: linear, phased and convex (element normals)
 * (csrc/beamform/adaptive.c; per-point math in csrc/beamform/adaptive_math.h).  The delays,
 * apertures, windows and interpolation are those of the DAS plan built from `das` (the same
 * table); per point the delayed element signals are compounded over transmits, then combined
 * across the receive aperture by the method instead of summed.  Refused: das.surface = 1
 * (matrix arrays), elements not in order along x, and apertures that are not contiguous runs
 * of elements (adaptive.c).  in/out as usbeam_das_execute.  Formulas and references:
 * adaptive_math.h and usbeam/adaptive.py. */
typedef enum usbeam_adaptive_method {
    USBEAM_ADAPTIVE_CF = 0,    /* coherence factor x DAS */
    USBEAM_ADAPTIVE_GCF = 1,   /* generalised coherence factor (cut-off gcf_m0) x DAS */
    USBEAM_ADAPTIVE_DMAS = 2,  /* delay-multiply-and-sum */
    USBEAM_ADAPTIVE_FDMAS = 3, /* DMAS band-passed around 2 fc along time (fdmas_* below) */
    USBEAM_ADAPTIVE_PDAS = 4,  /* p-th root DAS (p) */
    USBEAM_ADAPTIVE_MV = 5     /* minimum variance (subarray_*, diagonal_loading, temporal_averaging) */
} usbeam_adaptive_method;

typedef struct usbeam_adaptive_params {
    usbeam_das_params das;        /* geometry, transmits, grid, interpolation, window, dtype, table budget */
    usbeam_adaptive_method method;
    double p;                     /* PDAS: root order, >= 1 */
    size_t gcf_m0;                /* GCF: low-frequency cut-off, DFT bins |k| <= gcf_m0, < n_elements / 2 */
    size_t subarray_length;       /* MV: L, 1 <= L <= n_elements; a point with a smaller aperture uses all of it */
    double subarray_fraction;     /* MV: > 0 (<= 1): L = max(1, round(fraction x the point's aperture)) instead */
    double diagonal_loading;      /* MV: delta >= 0, R + delta trace(R) / L I */
    size_t temporal_averaging;    /* MV: K, the covariance averages 2K + 1 samples (offsets -K..K / fs) */
    double fdmas_low, fdmas_high; /* FDMAS: band-pass edges, Hz, 0 < low < high (high >= fs/2: high-pass) */
    size_t fdmas_half_taps;       /* FDMAS: K >= 1, a (2K + 1)-tap Hann-windowed-sinc FIR along time */
} usbeam_adaptive_params;

typedef struct usbeam_adaptive_plan usbeam_adaptive_plan;
usbeam_status usbeam_adaptive_plan_create(const usbeam_adaptive_params *params, usbeam_backend backend,
                                          usbeam_adaptive_plan **plan);
/* in (n_frames <= das.n_frames, n_transmits, n_elements, n_samples), out (n_frames, n_points). */
usbeam_status usbeam_adaptive_execute(usbeam_adaptive_plan *plan, size_t n_frames, const void *in, void *out);
void usbeam_adaptive_plan_destroy(usbeam_adaptive_plan *plan);
/* The F-DMAS filter taps the plan uses (2 fdmas_half_taps + 1 doubles), for tests. */
const double *usbeam_adaptive_fdmas_taps(const usbeam_adaptive_plan *plan, size_t *n_taps);

/* Row-column (RCA) and TOBE arrays: delay-and-sum of decoded acquisitions.
 * Array coordinates (m): the array lies in z = 0, centred on the origin.  Column c is a
 * strip along y at x_c = (c - (n_columns-1)/2) pitch_x; row r a strip along x at
 * y_r = (r - (n_rows-1)/2) pitch_y.  An orientation ("rows" or "columns") names a set of
 * strips; its axis u is y for rows, x for columns.  Times of flight are in csrc/usbeam_math.h
 * (section "row-column arrays") with their references.  t = 0 when the first element fires;
 * sample n of a record is at t0 + n/fs. */
typedef enum usbeam_rca_method {
    USBEAM_RCA_FORCES = 0,    /* decoded Hadamard transmit: element k of the receive orientation */
    USBEAM_RCA_UFORCES = 1,   /* as FORCES, acquisition a from element sparse_elements[a] */
    USBEAM_RCA_HERCULES = 2,  /* one transmit wave; decoded receive: acquisition a = strip a of the
                                 orientation orthogonal to the receive one (2-D receive aperture) */
    USBEAM_RCA_UHERCULES = 3, /* as HERCULES, acquisition a = orthogonal strip sparse_elements[a] */
    USBEAM_RCA_VLS = 4,       /* virtual line source per acquisition (finite focal depth) */
    USBEAM_RCA_TPW = 5,       /* tilted plane wave per acquisition (infinite focal depth) */
    USBEAM_RCA_FLASH = 6      /* unsteered plane waves (angle 0, infinite focal depth) */
} usbeam_rca_method;

#define USBEAM_RCA_MAX_ELEMENTS 4096

typedef struct usbeam_rca_params {
    usbeam_rca_method method;
    size_t n_columns, n_rows;     /* strips along x and along y */
    double pitch_x, pitch_y;      /* m, > 0 */
    double world_to_array[16];    /* row-major 4x4 affine world -> array; last row 0 0 0 1,
                                     invertible linear part */
    int tx_rows, rx_rows;         /* orientation of transmit / receive: 1 rows, 0 columns
                                     (FORCES/uFORCES transmit on the receive orientation) */
    size_t n_frames, n_acquisitions, n_channels, n_samples; /* n_channels = strips of rx orientation */
    int data_complex;             /* 0: float32 RF; 1: complex64 IQ demodulated at fc */
    double fs, fc, c, t0;         /* Hz, Hz (IQ phase), m/s, s */
    int interpolation;            /* USBEAM_INTERP_NEAREST / LINEAR / CUBIC (usbeam_math.h) */
    const double *angles;         /* rad [n_acquisitions] (VLS/TPW/Flash) or [1] (HERCULES) */
    const double *focal_depths;   /* m, same length; +-INFINITY = plane wave, < 0 diverging */
    const int32_t *sparse_elements; /* [n_acquisitions] for uFORCES / uHERCULES, else NULL */
    double voxel_to_world[16];    /* row-major 4x4: (i, j, k, 1) -> world point (m) */
    size_t n_i, n_j, n_k;         /* output [n_k][n_j][n_i] per frame */
    double f_number;              /* >= 0; 0 = no receive apodization (whole aperture) */
    int window;                   /* USBEAM_WINDOW_RECT / HANN / TUKEY over the f-number aperture */
    double tukey_alpha;           /* [0, 1] for TUKEY */
    int coherence_factor;         /* 1: multiply by |sum v|^2 / (N sum |v|^2) (Mallart & Fink) */
    int sum_frames;               /* 1: one output, the coherent sum over frames */
} usbeam_rca_params;

typedef struct usbeam_rca_plan usbeam_rca_plan;
usbeam_status usbeam_rca_plan_create(const usbeam_rca_params *params, usbeam_backend backend,
                                     usbeam_rca_plan **plan);
/* in: [n_frames][n_acquisitions][n_channels][n_samples] float32 or complex64;
 * out: [sum_frames ? 1 : n_frames][n_k][n_j][n_i] float32 or complex64. */
usbeam_status usbeam_rca_execute(usbeam_rca_plan *plan, const void *in, void *out);
void usbeam_rca_plan_destroy(usbeam_rca_plan *plan);

/* The CUDA execution state of a plan (NULL for a CPU plan): usbeam/device.h. */
struct usbeam_das_plan;
usbeam_cuda_exec *usbeam_das_plan_cuda(struct usbeam_das_plan *plan);
struct usbeam_das_sparse_plan;
usbeam_cuda_exec *usbeam_das_sparse_plan_cuda(struct usbeam_das_sparse_plan *plan);
struct usbeam_rca_plan;
usbeam_cuda_exec *usbeam_rca_plan_cuda(struct usbeam_rca_plan *plan);
struct usbeam_adaptive_plan;
usbeam_cuda_exec *usbeam_adaptive_plan_cuda(struct usbeam_adaptive_plan *plan);

#ifdef __cplusplus
}
#endif
#endif /* USBEAM_BEAMFORM_H */
