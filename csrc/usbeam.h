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

/* ======== family: das ======== */
/* (declarations of the das family go below this line) */

/* Delay-and-sum beamforming for linear arrays (csrc/das_setup.c, csrc/das.c).
 * in : channel data (n_frames, n_transmits, n_elements, n_samples), C order;
 *      int16 or float32 RF, or complex64 IQ (down-mixed with the same t0).
 * out: (n_frames, n_points); float32 for RF input, complex64 for IQ input.
 * Conventions (MUST/PyMUST): x along the array (0 at its centre), z depth; t = 0 when the
 * first element fires; sample n is at t0 + n/fs.  tau = tau_tx(p) + |p - e|/c, sample
 * index s = (tau - t0) fs; IQ samples are rotated by exp(+j 2 pi fc tau).  Element e
 * contributes when |x_p - x_e| <= z_p / (2 F) (F = f_number; 0 = full aperture), weighted
 * by the window; sums over elements and transmits, no normalisation. */
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
    const double *sources;   /* sources: (3, n_sources) rows x (m), z (m), offset o (m) */
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
    const double *element_positions;  /* (n_elements, 3) as (x, y, z), m; x strictly
                                         increasing; transmit models use x only (z = 0) */
    size_t n_transmits;
    const usbeam_transmit *transmits; /* (n_transmits) */
    size_t n_points;
    const double *points;             /* (n_points, 3) as (x, y, z), m; output order */
    size_t n_frames;                  /* frames per execute, >= 1 */
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
    size_t max_table_bytes;           /* delay/weight table budget; above it, execute
                                         recomputes them per call.  0: 1 GiB */
} usbeam_das_params;

typedef struct usbeam_das_plan usbeam_das_plan;
usbeam_status usbeam_das_plan_create(const usbeam_das_params *params, usbeam_backend backend,
                                     usbeam_das_plan **plan);
/* in: (n_frames, n_transmits, n_elements, n_samples) of input_dtype;
 * out: (n_frames, n_points) float32 (RF) or complex64 (IQ). */
usbeam_status usbeam_das_execute(usbeam_das_plan *plan, const void *in, void *out);
void usbeam_das_plan_destroy(usbeam_das_plan *plan);
/* Bytes of the precomputed delay/weight table (0 when the plan recomputes per call). */
size_t usbeam_das_table_bytes(const usbeam_das_plan *plan);

/* PyMUST dasmtx's automatic f-number from the element directivity: lambda_min =
 * c / (fc (1 + bandwidth/2)); alpha minimises |cos(th) sinc(width/lambda_min sin th) - 0.71|
 * on [0, pi/2] by Brent's bounded method with xtol = pi/100 (the iterates of
 * scipy.optimize.fminbound); F = 1 / (2 tan alpha).  bandwidth is a fraction (0.75). */
usbeam_status usbeam_das_auto_f_number(double element_width, double fc, double bandwidth, double c,
                                       double *f_number);

/* ======== family: doppler ======== */
/* (declarations of the doppler family go below this line) */

/* ======== family: hadamard ======== */
/* (declarations of the hadamard family go below this line) */

/* ======== family: rca ======== */
/* (declarations of the rca family go below this line) */

/* ======== family: ai ======== */
/* (declarations of the ai family go below this line) */

/* ======== family: live ======== */
/* (declarations of the live family go below this line) */

#ifdef __cplusplus
}
#endif
#endif /* USBEAM_H */
