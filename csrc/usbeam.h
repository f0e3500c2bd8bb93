/*
 * usbeam.h - the public C contract of usbeam.
 *
 * Every kernel family follows one shape (after FFTW / FINUFFT):
 *
 *   usbeam_status usbeam_<family>_plan_create(const usbeam_<family>_params *params,
 *                                             usbeam_backend backend,
 *                                             usbeam_<family>_plan **plan);
 *   usbeam_status usbeam_<family>_execute(usbeam_<family>_plan *plan, const void *in, void *out);
 *   void          usbeam_<family>_plan_destroy(usbeam_<family>_plan *plan);   (safe on NULL)
 *
 * - Parameter structs are plain C, in SI units (s, m, Hz, rad); each field says its
 *   units and shape.  plan_create copies everything it needs: no user pointer is
 *   kept after it returns.
 * - Geometry-dependent work (delays, apodization, filter taps, index tables) is done
 *   once in plan_create, in double precision.
 * - execute allocates nothing; its scratch space belongs to the plan.  Different
 *   plans may execute concurrently from different threads; one plan may not.
 * - Every call returns a usbeam_status.  On failure usbeam_last_error() gives a
 *   message for the calling thread that names the offending parameter.
 *
 * Arrays are C-order with the fastest axis last, e.g. channel data
 * (n_frames, n_transmits, n_elements, n_samples), which is MATLAB's column-major
 * (n_samples, n_elements, n_transmits, n_frames) without a copy.
 * Complex data is interleaved (re, im) float32 pairs ("complex64").
 *
 * This header contains no CUDA types: device pointers travel as void *.
 */
#ifndef USBEAM_H
#define USBEAM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define USBEAM_VERSION_MAJOR 0
#define USBEAM_VERSION_MINOR 1
#define USBEAM_VERSION_PATCH 0

/* ------------------------------------------------------------------------ */
/* Status codes: the one table.                                               */
/* Columns: enum name, numeric value, message, Python exception kind.         */
/* The Python exception kind is one of VALUE, TYPE, MEMORY, RUNTIME, NOTIMPL;  */
/* the extension module maps it to ValueError, TypeError, MemoryError,        */
/* usbeam.UsbeamError (a RuntimeError) and NotImplementedError.                */
/* ------------------------------------------------------------------------ */
#define USBEAM_STATUS_TABLE(X)                                                          \
    X(USBEAM_OK,                    0, "success",                              RUNTIME) \
    X(USBEAM_ERR_INVALID_ARGUMENT,  1, "invalid argument",                     VALUE)   \
    X(USBEAM_ERR_INVALID_DTYPE,     2, "unsupported data type",                TYPE)    \
    X(USBEAM_ERR_INVALID_SHAPE,     3, "array shape does not match the plan",  VALUE)   \
    X(USBEAM_ERR_OUT_OF_MEMORY,     4, "out of memory",                        MEMORY)  \
    X(USBEAM_ERR_SIZE_OVERFLOW,     5, "requested size is too large",          MEMORY)  \
    X(USBEAM_ERR_UNSUPPORTED,       6, "operation not supported",              NOTIMPL) \
    X(USBEAM_ERR_NO_BACKEND,        7, "backend not available in this build",  RUNTIME) \
    X(USBEAM_ERR_NO_DEVICE,         8, "no CUDA device available",             RUNTIME) \
    X(USBEAM_ERR_CUDA,              9, "CUDA runtime error",                   RUNTIME) \
    X(USBEAM_ERR_CUBLAS,           10, "cuBLAS error",                         RUNTIME) \
    X(USBEAM_ERR_NULL_POINTER,     11, "null pointer argument",                VALUE)   \
    X(USBEAM_ERR_INTERNAL,         12, "internal error",                       RUNTIME)

typedef enum usbeam_status {
#define USBEAM_X_ENUM(name, value, message, pykind) name = value,
    USBEAM_STATUS_TABLE(USBEAM_X_ENUM)
#undef USBEAM_X_ENUM
} usbeam_status;

/* Static text of a status code (never NULL). */
const char *usbeam_status_string(usbeam_status status);
/* The detailed message of the last failure on the calling thread ("" if none).
 * It names the offending parameter, e.g. "fs must be finite and > 0 (got -1)". */
const char *usbeam_last_error(void);
/* Forget the calling thread's last error message. */
void usbeam_clear_error(void);

/* ------------------------------------------------------------------------ */
/* Backends and element types                                               */
/* ------------------------------------------------------------------------ */
typedef enum usbeam_backend {
    USBEAM_BACKEND_CPU = 0,  /* C reference, OpenMP */
    USBEAM_BACKEND_CUDA = 1  /* cuda/, only when built with nvcc */
} usbeam_backend;

typedef enum usbeam_dtype {
    USBEAM_DTYPE_INT16 = 0,
    USBEAM_DTYPE_FLOAT32 = 1,
    USBEAM_DTYPE_COMPLEX64 = 2,  /* interleaved float32 (re, im) */
    USBEAM_DTYPE_UINT8 = 3,
    USBEAM_DTYPE_FLOAT16 = 4,
    USBEAM_DTYPE_INT32 = 5,
    USBEAM_DTYPE_FLOAT64 = 6
} usbeam_dtype;

/* Size in bytes of one element of dtype, 0 for an unknown value. */
size_t usbeam_dtype_size(usbeam_dtype dtype);

/* Number of OpenMP threads the CPU backend uses (1 without OpenMP). */
int usbeam_cpu_threads(void);
/* 1 when this build contains the CUDA backend. */
int usbeam_built_with_cuda(void);

/* ------------------------------------------------------------------------ */
/* CUDA device query (answers "no device" in a CPU-only build)              */
/* ------------------------------------------------------------------------ */
typedef struct usbeam_device_info {
    char name[256];
    int major, minor;            /* compute capability */
    size_t total_memory_bytes;
    int multiprocessors;
    int driver_version, runtime_version;  /* as cudaDriverGetVersion / cudaRuntimeGetVersion */
} usbeam_device_info;

/* Number of usable CUDA devices; 0 (and USBEAM_OK) when there is none or no driver. */
usbeam_status usbeam_cuda_device_count(int *count);
usbeam_status usbeam_cuda_device_info(int device, usbeam_device_info *info);

/* ------------------------------------------------------------------------ */
/* B-mode: envelope and log compression                                      */
/* in : complex64 beamformed IQ, n_values (any spatial/frame layout)         */
/* out: uint8, as PyMUST bmode: 255*(20 log10(|IQ|/ref) + DR)/DR clipped to */
/*      [0, 255] and truncated; or float32 dB: 20 log10(|IQ|/ref) floored at  */
/*      -DR.  ref is the max |IQ| (global or per image) or a fixed value.     */
/* ------------------------------------------------------------------------ */
typedef enum usbeam_bmode_output {
    USBEAM_BMODE_UINT8 = 0,   /* display image, PyMUST-compatible */
    USBEAM_BMODE_DB = 1       /* float32 decibels relative to the reference */
} usbeam_bmode_output;

typedef struct usbeam_bmode_params {
    size_t n_values;           /* number of complex samples per execute */
    size_t n_images;           /* n_values is n_images blocks; reference per block if per_image */
    double dynamic_range_db;   /* > 0, dB */
    usbeam_bmode_output output;
    int per_image;             /* 0: one reference (the max) over the whole array, as PyMUST;
                                  1: each of the n_images blocks is normalised by its own max */
    double reference;          /* > 0: fixed amplitude reference instead of the max (live display);
                                  0: use the max */
} usbeam_bmode_params;

typedef struct usbeam_bmode_plan usbeam_bmode_plan;
usbeam_status usbeam_bmode_plan_create(const usbeam_bmode_params *params, usbeam_backend backend,
                                       usbeam_bmode_plan **plan);
/* in: complex64[n_values]; out: uint8 or float32 [n_values] */
usbeam_status usbeam_bmode_execute(usbeam_bmode_plan *plan, const void *in, void *out);
void usbeam_bmode_plan_destroy(usbeam_bmode_plan *plan);

/* ======== family: rf2iq ======== */
/* (declarations of the rf2iq family go below this line) */
/* RF -> IQ demodulation (csrc/rf2iq.c, filter design in csrc/filter_design.c).
 * in : RF, (n_lines, n_samples) C-order, samples last; int16, float32 or float64.
 * out: complex64 IQ, (n_lines, n_out), n_out = ceil(n_samples / decimation).
 * IQ[n] = 2 * lowpass(RF[m] * exp(-2j*pi*fc*(t0 + m/fs)))[n*decimation]
 * (the factor 2 preserves the envelope).  No assumption fs > 2*fc: undersampled band-pass
 * RF demodulates as long as fc is given. */
typedef enum usbeam_rf2iq_filter {
    USBEAM_RF2IQ_BUTTER = 0,  /* Butterworth, zero-phase filtfilt as scipy.signal.filtfilt (MUST rf2iq) */
    USBEAM_RF2IQ_KAISER = 1,  /* linear-phase FIR, Kaiser window designed from cutoff / width / attenuation */
    USBEAM_RF2IQ_TAPS = 2     /* user FIR taps (real or complex), applied centred */
} usbeam_rf2iq_filter;

typedef struct usbeam_rf2iq_params {
    size_t n_lines;            /* number of RF lines (product of the leading axes), >= 1 */
    size_t n_samples;          /* samples per line, >= 1 (butter: > 3*(order+1), as filtfilt) */
    usbeam_dtype input_dtype;  /* USBEAM_DTYPE_INT16, _FLOAT32 or _FLOAT64 */
    double fs;                 /* sampling frequency of the RF, Hz, > 0 */
    double fc;                 /* demodulation (carrier) frequency, Hz, > 0 */
    double t0;                 /* time of the first sample, s, finite */
    usbeam_rf2iq_filter filter;
    /* butter */
    int order;                 /* filter order, 1..USBEAM_RF2IQ_MAX_ORDER (the (b, a) recursion is
                                  ill-conditioned for high orders at low wn, as in scipy) */
    double wn;                 /* normalised cutoff in (0, 1), 1 = fs/2 (scipy.signal.butter's Wn) */
    /* kaiser */
    double cutoff;             /* cutoff frequency of the baseband low-pass, Hz, in (0, fs/2) */
    double transition_width;   /* width of the transition band, Hz, > 0 */
    double attenuation;        /* stop-band attenuation, dB, >= 8 (Kaiser's formulas) */
    /* taps: copied at plan creation */
    const double *taps_re;     /* n_taps real parts */
    const double *taps_im;     /* n_taps imaginary parts, or NULL for real taps */
    size_t n_taps;             /* >= 1 */
    size_t decimation;         /* keep every decimation-th filtered sample, >= 1 */
} usbeam_rf2iq_params;

#define USBEAM_RF2IQ_MAX_ORDER 16
#define USBEAM_RF2IQ_MAX_TAPS ((size_t)1 << 20)

typedef struct usbeam_rf2iq_plan usbeam_rf2iq_plan;
usbeam_status usbeam_rf2iq_plan_create(const usbeam_rf2iq_params *params, usbeam_backend backend,
                                       usbeam_rf2iq_plan **plan);
/* in: RF[n_lines][n_samples] of input_dtype; out: complex64 [n_lines][n_out] */
usbeam_status usbeam_rf2iq_execute(usbeam_rf2iq_plan *plan, const void *in, void *out);
void usbeam_rf2iq_plan_destroy(usbeam_rf2iq_plan *plan);
/* Output samples per line: ceil(n_samples / decimation). */
size_t usbeam_rf2iq_n_out(const usbeam_rf2iq_plan *plan);
/* The plan's FIR taps (kaiser or user, NULL im for real taps); *n_taps = 0 for butter. */
void usbeam_rf2iq_plan_taps(const usbeam_rf2iq_plan *plan, const double **taps_re,
                            const double **taps_im, size_t *n_taps);

/* Digital Butterworth low-pass, equal to scipy.signal.butter(order, wn): b and a hold
 * order+1 coefficients each, a[0] = 1. */
usbeam_status usbeam_butter_lowpass(int order, double wn, double *b, double *a);
/* Kaiser-window FIR low-pass (scipy.signal.kaiserord + firwin, length made odd, unit DC
 * gain).  Call with taps NULL to get *n_taps; then with capacity >= *n_taps. */
usbeam_status usbeam_kaiser_lowpass(double fs, double cutoff, double transition_width,
                                    double attenuation, double *taps, size_t capacity,
                                    size_t *n_taps);

/* ======== family: das ======== */
/* (declarations of the das family go below this line) */

/* ======== family: doppler ======== */
/* (declarations of the doppler family go below this line) */

/* ======== family: hadamard ======== */
/* (declarations of the hadamard family go below this line) */
/* Hadamard aperture-encoding matrices and decoding along the transmit axis.
 * Orders: 2^k, 12*2^k, 20*2^k, at most USBEAM_HADAMARD_MAX_ORDER (1 is the trivial [1]).
 * The matrix of each order (the contract between scanner and decoder): entries +-1,
 * H H^T = n I, built as S_{2^k} (x) B where S is the natural-order Sylvester matrix
 * (S_{2m} = [[S, S], [S, -S]]) and B is [1], the Paley I matrix of q = 11 (n = 12) or of
 * q = 19 (n = 20): B = I + [[0, 1^T], [-1, Q]], Q[i][j] = chi(j - i), chi the quadratic
 * character mod q.  Transmit t fires element e with polarity H[t][e]; decoding is
 * out[e] = (1/n) sum_t H[t][e] in[t]. */
#define USBEAM_HADAMARD_MAX_ORDER 256

/* 1 when order has a Hadamard matrix in usbeam, else 0. */
int usbeam_hadamard_order_supported(size_t order);
/* Fill matrix[order*order] (row-major, row = transmit, column = element) with +-1. */
usbeam_status usbeam_hadamard_matrix(size_t order, int8_t *matrix);

typedef enum usbeam_hadamard_algorithm {
    USBEAM_HADAMARD_DIRECT = 0, /* dense (1/n) H^T x, O(n^2) per sample, any matrix */
    USBEAM_HADAMARD_FAST = 1    /* butterflies over the Sylvester factor, O(n log n) for 2^k;
                                   only for the matrices of usbeam_hadamard_matrix */
} usbeam_hadamard_algorithm;

typedef struct usbeam_hadamard_params {
    size_t order;            /* n: length of the transmit axis */
    const int8_t *matrix;    /* NULL: usbeam_hadamard_matrix(order); else n*n entries +-1 with
                                H H^T = n I (copied by plan_create) */
    size_t n_outer;          /* product of the dimensions before the transmit axis (>= 1) */
    size_t n_inner;          /* product of the dimensions after it (>= 1) */
    usbeam_dtype in_dtype;   /* INT16, INT32 or FLOAT32 */
    usbeam_dtype out_dtype;  /* FLOAT32, or INT32 for integer input (rounded to nearest,
                                ties away from zero; exact for encoded integer data) */
    usbeam_hadamard_algorithm algorithm;
    int transmit_last;       /* 0: out has the layout of in, (outer, n, inner);
                                1: out is (outer, inner, n): the decoded values of one
                                sample are contiguous */
} usbeam_hadamard_params;

typedef struct usbeam_hadamard_plan usbeam_hadamard_plan;
usbeam_status usbeam_hadamard_plan_create(const usbeam_hadamard_params *params, usbeam_backend backend,
                                          usbeam_hadamard_plan **plan);
/* in: in_dtype[n_outer][order][n_inner]; out: out_dtype, layout per transmit_last. */
usbeam_status usbeam_hadamard_execute(usbeam_hadamard_plan *plan, const void *in, void *out);
void usbeam_hadamard_plan_destroy(usbeam_hadamard_plan *plan);

/* ======== family: rca ======== */
/* (declarations of the rca family go below this line) */
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

/* ======== family: ai ======== */
/* (declarations of the ai family go below this line) */

/* ======== family: live ======== */
/* (declarations of the live family go below this line) */

#ifdef __cplusplus
}
#endif
#endif /* USBEAM_H */
