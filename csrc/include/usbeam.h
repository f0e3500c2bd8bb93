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
 * - Floating-point input data holding NaN or inf is refused by the CPU backend's execute
 *   (USBEAM_ERR_INVALID_ARGUMENT, "<name> contains NaN or infinite values (...)"); out is then
 *   untouched (das, rca, the SVD clutter filter, detect) or filled with NaN (0 for uint8
 *   B-mode), and persistent state (the IIR clutter filter's) is left as it was.
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
/* Caps at n (>= 1) the CPU threads of every execute called from the calling OS thread, plans
 * created with more included (a live session's compute thread leaves a core to the thread
 * that copies frames in; an OpenMP team sharing a core with it waits for its slowest thread
 * at every barrier).  No effect without OpenMP. */
usbeam_status usbeam_set_thread_limit(int n);
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

/* Number of usable CUDA devices; 0 (and USBEAM_OK) when there is none or no (recent enough)
 * driver; USBEAM_ERR_CUDA, naming the driver's error, when the query fails otherwise. */
usbeam_status usbeam_cuda_device_count(int *count);
usbeam_status usbeam_cuda_device_info(int device, usbeam_device_info *info);

/* ======== family cuda ======== */
/* Device memory, host <-> device copies, streams, and the CUDA execution state of plans
 * (cuda/memory.cu, cuda/exec.cu).  Device pointers and CUDA streams are void *; a NULL
 * stream is CUDA's legacy default stream.  A build without CUDA answers every call with
 * USBEAM_ERR_NO_BACKEND (usbeam_device_free and usbeam_pinned_free accept NULL anywhere). */
usbeam_status usbeam_device_malloc(int device, size_t bytes, void **ptr);   /* cudaMalloc on device */
usbeam_status usbeam_device_free(void *ptr);   /* cudaFree (synchronises with the device); NULL is a no-op */
usbeam_status usbeam_pinned_malloc(size_t bytes, void **ptr);   /* page-locked host memory */
usbeam_status usbeam_pinned_free(void *ptr);
/* Host <-> device copies of bytes, ordered after the work already queued on stream and
 * complete when the call returns.  Pageable host memory goes through the library's pinned
 * staging buffers (chunked, double-buffered), so the DMA engine overlaps the host memcpy. */
usbeam_status usbeam_copy_to_device(void *dst_device, const void *src_host, size_t bytes, void *stream);
usbeam_status usbeam_copy_to_host(void *dst_host, const void *src_device, size_t bytes, void *stream);
/* Device -> device copy queued on stream (asynchronous). */
usbeam_status usbeam_copy_device(void *dst_device, const void *src_device, size_t bytes, void *stream);
/* Device -> device cudaMemcpy bandwidth on device: (bytes read + bytes written) / time, GB/s,
 * the median of repeats copies of bytes timed with CUDA events (a benchmark's yardstick). */
usbeam_status usbeam_cuda_d2d_bandwidth(int device, size_t bytes, int repeats, double *gbps);
/* CUDA device that owns a device (or managed) pointer; USBEAM_ERR_INVALID_ARGUMENT when
 * ptr is host memory. */
usbeam_status usbeam_pointer_device(const void *ptr, int *device);
/* Make consumer wait (on the device, not the host) for the work queued so far on producer. */
usbeam_status usbeam_stream_wait(void *consumer, void *producer);
usbeam_status usbeam_stream_synchronize(void *stream);
/* Record an event on stream into *event (created on first use, timing disabled); inside a
 * stream capture it becomes an event-record node of the graph (cudaEventRecordExternal) ... */
usbeam_status usbeam_event_record(void **event, void *stream);
/* ... and later wait for it on the host and destroy it (NULL event: no-op), or ask whether the
 * work before it has finished (*complete; NULL event: 1; no host wait), or just destroy it. */
usbeam_status usbeam_event_wait_destroy(void *event);
usbeam_status usbeam_event_query(void *event, int *complete);
void usbeam_event_destroy(void *event);
/* *idle = 1 when everything queued on stream has finished (cudaStreamQuery; no host wait). */
usbeam_status usbeam_stream_query(void *stream, int *idle);
/* *capturing = 1 while stream is being captured into a CUDA graph. */
usbeam_status usbeam_stream_capturing(void *stream, int *capturing);
/* Stream-ordered device memory (CUDA's pool allocator; cudaMalloc on a device without pools,
 * *pooled = 0, freed with usbeam_device_free).  Work queued on stream after the call may use
 * it; stream NULL: any stream may once the call returns.  Never waits for queued work. */
usbeam_status usbeam_device_alloc(int device, size_t bytes, void *stream, void **ptr, int *pooled);
/* Free a pooled allocation of device once the work recorded in event (NULL: none; destroyed
 * here) and, with after_legacy, the work queued so far on the legacy default stream have
 * finished; returns at once (cudaFreeAsync). */
usbeam_status usbeam_device_free_after(int device, void *ptr, void *event, int after_legacy);
/* CUDA graphs (cuda/graph.cu): capture the work queued on stream (not the legacy default
 * stream) between begin and end into an executable graph, replayed by launch on any stream;
 * abort ends a capture that failed half-way and drops it. */
usbeam_status usbeam_graph_capture_begin(void *stream);
usbeam_status usbeam_graph_capture_end(void *stream, void **graph_exec);
void usbeam_graph_capture_abort(void *stream);
usbeam_status usbeam_graph_launch(void *graph_exec, void *stream);
void usbeam_graph_destroy(void *graph_exec);

/* The CUDA execution state of a plan created with USBEAM_BACKEND_CUDA: its device, the
 * stream it runs on (its own, created at plan creation, or one the caller sets) and a pair
 * of CUDA events per stage.  Execute of a CUDA plan takes device pointers, queues its work
 * on that stream and returns without waiting; NVTX ranges name every stage. */
typedef struct usbeam_cuda_exec usbeam_cuda_exec;
#define USBEAM_CUDA_MAX_STAGES 8
/* Run on stream (a cudaStream_t of the plan's device, owned by the caller, who keeps it
 * alive while the plan uses it); NULL returns to the plan's own stream. */
usbeam_status usbeam_cuda_exec_set_stream(usbeam_cuda_exec *exec, void *stream);
void *usbeam_cuda_exec_stream(const usbeam_cuda_exec *exec);
int usbeam_cuda_exec_device(const usbeam_cuda_exec *exec);
/* Stage names and times (ms, CUDA events) of the last execute; waits for it to finish.
 * *n_stages = 0 before the first execute. */
usbeam_status usbeam_cuda_exec_timings(usbeam_cuda_exec *exec, size_t capacity, const char **names,
                                       float *ms, size_t *n_stages);
/* Device memory the plan holds, bytes. */
size_t usbeam_cuda_exec_device_bytes(const usbeam_cuda_exec *exec);
/* Input faults the plan's kernels met since the last call, as bits (0: none); read and
 * cleared without any CUDA call, so it covers the executes that have finished (call it after
 * synchronising with the plan's stream).  The beamformers (das, rca) set
 * USBEAM_INPUT_FAULT_NONFINITE when a sum they formed is NaN or infinite, i.e. when a sample
 * they read is; B-mode and the Doppler display when a pixel they read is. */
#define USBEAM_INPUT_FAULT_NONFINITE 1u
unsigned usbeam_cuda_exec_take_input_faults(usbeam_cuda_exec *exec);
/* The CUDA execution state of a family's plan; NULL for a CPU plan. */
struct usbeam_bmode_plan;
struct usbeam_rf2iq_plan;
usbeam_cuda_exec *usbeam_bmode_plan_cuda(struct usbeam_bmode_plan *plan);
usbeam_cuda_exec *usbeam_rf2iq_plan_cuda(struct usbeam_rf2iq_plan *plan);
struct usbeam_das_plan;
usbeam_cuda_exec *usbeam_das_plan_cuda(struct usbeam_das_plan *plan);
struct usbeam_hadamard_plan;
usbeam_cuda_exec *usbeam_hadamard_plan_cuda(struct usbeam_hadamard_plan *plan);
struct usbeam_rca_plan;
usbeam_cuda_exec *usbeam_rca_plan_cuda(struct usbeam_rca_plan *plan);

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
    size_t max_table_bytes;           /* delay/weight table budget; above it, execute
                                         recomputes them per call.  0: 1 GiB */
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
/* Ensembles of beamformed IQ frames: complex64 [n_frames][n_pixels], slow time on the
 * leading axis (n_pixels = the product of the spatial axes, e.g. nz*nx).  Velocities in m/s,
 * frequencies as fractions of the PRF unless named *_hz.  Algorithms: csrc/clutter.c (with
 * clutter_svd.c and clutter_iir.c), csrc/doppler.c, csrc/doppler_display.c. */

/* -- clutter (wall) filter along slow time -- */
typedef enum usbeam_clutter_method {
    USBEAM_CLUTTER_MEAN = 0,  /* subtract the slow-time mean (= POLY of order 0) */
    USBEAM_CLUTTER_POLY = 1,  /* project out Legendre polynomials of degree 0..poly_order */
    USBEAM_CLUTTER_SVD = 2,   /* keep singular components [svd_low, svd_high] of the Casorati matrix */
    USBEAM_CLUTTER_IIR = 3    /* Butterworth high-pass, state carried across executes */
} usbeam_clutter_method;

typedef enum usbeam_iir_init {
    USBEAM_IIR_INIT_ZERO = 0,       /* filter starts at rest (a transient follows) */
    USBEAM_IIR_INIT_PROJECTION = 1  /* initial state chosen to minimise output energy over the
                                       first iir_init_frames frames (Chornoboy 1990) */
} usbeam_iir_init;

/* How the CUDA backend applies the 'mean' / 'poly' projection y = x - Q Q^T x. */
typedef enum usbeam_clutter_algorithm {
    USBEAM_CLUTTER_KERNEL = 0, /* fused kernel: one pass, double accumulation in the CPU's order */
    USBEAM_CLUTTER_GEMM = 1    /* CUDA backend only: two cuBLAS SGEMMs (full FP32, never TF32)
                                  through a plan-owned scratch (cuda/clutter.cu) */
} usbeam_clutter_algorithm;

typedef struct usbeam_clutter_params {
    size_t n_frames;              /* slow-time samples per execute (>= 2) */
    size_t n_pixels;              /* spatial samples per frame (>= 1) */
    usbeam_clutter_method method;
    int poly_order;               /* POLY: >= 0; n_frames >= poly_order + 2 */
    int svd_low;                  /* SVD: first kept component (0 = largest singular value);
                                     -1 = automatic (mean Doppler frequency criterion) */
    int svd_high;                 /* SVD: last kept component, <= n_frames-1; -1 = n_frames-1 */
    double svd_auto_frequency;    /* SVD automatic low cut-off: components are tissue while the mean
                                     Doppler frequency of their temporal singular vector is below
                                     this, as a fraction of the PRF, in (0, 0.5) */
    int iir_order;                /* IIR: Butterworth order, 1..10 */
    double iir_cutoff;            /* IIR: -3 dB cut-off as a fraction of the PRF, in (0, 0.5) */
    usbeam_iir_init iir_init;
    size_t iir_init_frames;       /* IIR projection window after a reset: 0 = n_frames; otherwise
                                     iir_order < iir_init_frames <= n_frames */
    usbeam_clutter_algorithm algorithm; /* MEAN / POLY: KERNEL (0) or GEMM (CUDA only) */
} usbeam_clutter_params;

typedef struct usbeam_clutter_plan usbeam_clutter_plan;
usbeam_status usbeam_clutter_plan_create(const usbeam_clutter_params *params, usbeam_backend backend,
                                         usbeam_clutter_plan **plan);
/* in, out: complex64[n_frames][n_pixels]; out may be in (in-place). */
usbeam_status usbeam_clutter_execute(usbeam_clutter_plan *plan, const void *in, void *out);
/* IIR: forget the filter state, so that the next execute starts a new record. */
usbeam_status usbeam_clutter_reset(usbeam_clutter_plan *plan);
/* SVD: singular values of the last execute (double[n_frames], descending) and the cut-offs
 * used (low may be n_frames when every component was judged tissue). */
usbeam_status usbeam_clutter_svd_info(const usbeam_clutter_plan *plan, double *singular_values,
                                      int *low, int *high);
void usbeam_clutter_plan_destroy(usbeam_clutter_plan *plan);

/* -- color Doppler (Kasai lag-k autocorrelation) -- */
typedef enum usbeam_doppler_window {
    USBEAM_WINDOW_BOXCAR = 0,
    USBEAM_WINDOW_HAMMING = 1   /* symmetric Hamming, as PyMUST iq2doppler */
} usbeam_doppler_window;

typedef struct usbeam_color_params {
    size_t n_frames;           /* ensemble length, > lag */
    size_t n_images;           /* independent images per frame (n_pixels = n_images*nz*nx) */
    size_t nz, nx;             /* image rows (depth) and columns */
    double fc;                 /* Hz, > 0: demodulation (centre) frequency */
    double prf;                /* Hz, > 0 */
    double c;                  /* m/s, > 0 */
    int lag;                   /* >= 1 */
    int window_z, window_x;    /* spatial averaging of R(lag) and R(0): window_z x window_x pixels
                                  (1 x 1 = none), edges mirrored as scipy boundary='symmetric' */
    usbeam_doppler_window window;
    int axial_correction;      /* 1: Loupas 2-D autocorrelator: velocity scaled by fc / f_mean,
                                  f_mean estimated from the axial lag-1 autocorrelation */
    double dz;                 /* m, > 0 when axial_correction: axial pixel spacing */
} usbeam_color_params;

typedef struct usbeam_color_plan usbeam_color_plan;
usbeam_status usbeam_color_plan_create(const usbeam_color_params *params, usbeam_backend backend,
                                       usbeam_color_plan **plan);
/* in: complex64[n_frames][n_images][nz][nx]; velocity, variance: float32[n_images][nz][nx];
 * variance or power (mean |IQ|^2 over the ensemble) may be NULL. */
usbeam_status usbeam_color_execute(usbeam_color_plan *plan, const void *in, float *velocity,
                                   float *variance, float *power);
void usbeam_color_plan_destroy(usbeam_color_plan *plan);

/* -- power Doppler: P = mean over the ensemble of |IQ|^2 (= R(0)/n_frames) -- */
typedef struct usbeam_power_params {
    size_t n_frames, n_pixels;
    int output_db;             /* 0: linear P; 1: 10 log10(P / reference) */
    double reference;          /* dB: > 0 fixed power reference; 0 = max P of the execute */
    double noise_floor;        /* >= 0, linear power: P below it is set to it (0 = no floor) */
} usbeam_power_params;

typedef struct usbeam_power_plan usbeam_power_plan;
usbeam_status usbeam_power_plan_create(const usbeam_power_params *params, usbeam_backend backend,
                                       usbeam_power_plan **plan);
/* in: complex64[n_frames][n_pixels]; out: float32[n_pixels] */
usbeam_status usbeam_power_execute(usbeam_power_plan *plan, const void *in, float *out);
void usbeam_power_plan_destroy(usbeam_power_plan *plan);
/* The CUDA execution state of a color / power Doppler plan; NULL for a CPU plan.  A CUDA plan's
 * execute takes device pointers, queues its kernels and returns without waiting. */
usbeam_cuda_exec *usbeam_color_plan_cuda(usbeam_color_plan *plan);
usbeam_cuda_exec *usbeam_power_plan_cuda(usbeam_power_plan *plan);
/* The clutter filter's CUDA state ('mean' and 'poly' only on CUDA); NULL for a CPU plan. */
usbeam_cuda_exec *usbeam_clutter_plan_cuda(usbeam_clutter_plan *plan);

/* -- display post-processing of successive Doppler outputs -- */
typedef struct usbeam_doppler_display_params {
    size_t n_images, nz, nx;   /* each execute takes n_images successive images of nz x nx */
    int median;                /* 1: 3x3 median of velocity and power (edges replicated) */
    double persistence;        /* in [0, 1): out = p * previous + (1 - p) * current */
    double power_threshold;    /* finite: pixels with power below it are masked */
    double velocity_threshold; /* >= 0, m/s: pixels with |v| below it are masked */
} usbeam_doppler_display_params;

typedef struct usbeam_doppler_display_plan usbeam_doppler_display_plan;
usbeam_status usbeam_doppler_display_plan_create(const usbeam_doppler_display_params *params,
                                                 usbeam_backend backend,
                                                 usbeam_doppler_display_plan **plan);
/* velocity, power: float32[n_images][nz][nx] (either may be NULL, not both; a NULL input skips
 * its test and its output); out_velocity / out_power: same shape (masked velocity is 0,
 * masked power keeps its value); mask: uint8, 1 = shown (may be NULL). */
usbeam_status usbeam_doppler_display_execute(usbeam_doppler_display_plan *plan, const float *velocity,
                                             const float *power, float *out_velocity,
                                             float *out_power, uint8_t *mask);
/* Forget the persistence history. */
usbeam_status usbeam_doppler_display_reset(usbeam_doppler_display_plan *plan);
void usbeam_doppler_display_plan_destroy(usbeam_doppler_display_plan *plan);
/* The CUDA execution state of a display plan; NULL for a CPU plan.  A CUDA plan's execute takes
 * device pointers, queues one kernel and returns without waiting; its kernel flags non-finite
 * input (usbeam_cuda_exec_take_input_faults) where the CPU's caller refuses it. */
usbeam_cuda_exec *usbeam_doppler_display_plan_cuda(usbeam_doppler_display_plan *plan);

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
    USBEAM_HADAMARD_FAST = 1,   /* butterflies over the Sylvester factor, O(n log n) for 2^k;
                                   only for the matrices of usbeam_hadamard_matrix */
    USBEAM_HADAMARD_GEMM = 2    /* CUDA backend only: cuBLAS SGEMM (full FP32, never TF32) on a
                                   float32 copy of int16 or float32 data (cuda/hadamard.cu) */
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
/* AI model hand-off (issue #6): pre-processing, FP16 conversion, detection and
 * segmentation post-processing.  CPU kernels in csrc/preprocess.c, detect.c, segment.c;
 * CUDA twins in cuda/preprocess.cu, detect.cu, segment.cu.  A plan created with
 * USBEAM_BACKEND_CUDA takes device pointers; its *_execute_async entry takes a
 * cudaStream_t as void * (NULL: the legacy default stream), never synchronises the host,
 * and *_execute on it is *_execute_async(..., NULL).  On a CPU plan the stream is ignored. */

/* -- pre-processing: image -> model input (bilinear resize, normalise, cast, layout) -- */
typedef enum usbeam_tensor_layout {
    USBEAM_LAYOUT_NCHW = 0,  /* (n_images, channels, height, width) */
    USBEAM_LAYOUT_NHWC = 1   /* (n_images, height, width, channels) */
} usbeam_tensor_layout;

typedef struct usbeam_preprocess_params {
    size_t n_images;             /* batch size, >= 1 */
    size_t in_height, in_width;  /* input image size in pixels, >= 1 */
    size_t in_channels;          /* 1 or 3; input is (n_images, in_height, in_width, in_channels) */
    usbeam_dtype in_dtype;       /* UINT8, FLOAT16 or FLOAT32 */
    size_t out_height, out_width;  /* model input size in pixels, >= 1 */
    size_t out_channels;         /* 1 or 3; 3 from a 1-channel input repeats the grey level */
    usbeam_tensor_layout out_layout;
    usbeam_dtype out_dtype;      /* FLOAT32 or FLOAT16 (round to nearest even) */
    int align_corners;           /* 0: pixel centres at i + 0.5, source x = (x_out + 0.5) * in / out
                                    - 0.5 clamped at 0 (PyTorch align_corners=False, OpenCV
                                    INTER_LINEAR); 1: corner pixels aligned, source x = x_out *
                                    (in - 1) / (out - 1) (PyTorch align_corners=True) */
    double scale[3], offset[3];  /* per output channel: value = interpolated * scale + offset
                                    (mean/std normalisation is scale = s / std, offset = -mean / std) */
} usbeam_preprocess_params;

typedef struct usbeam_preprocess_plan usbeam_preprocess_plan;
usbeam_status usbeam_preprocess_plan_create(const usbeam_preprocess_params *params,
                                            usbeam_backend backend, usbeam_preprocess_plan **plan);
/* in: (n_images, in_height, in_width, in_channels) of in_dtype; out: out_layout of out_dtype */
usbeam_status usbeam_preprocess_execute(usbeam_preprocess_plan *plan, const void *in, void *out);
usbeam_status usbeam_preprocess_execute_async(usbeam_preprocess_plan *plan, const void *in, void *out,
                                              void *stream);
void usbeam_preprocess_plan_destroy(usbeam_preprocess_plan *plan);

/* -- FP16 <-> FP32, round to nearest even, bit-exact with numpy astype (NaN payloads kept,
 *    as numpy does: the top 10 payload bits, a NaN never becomes inf) -- */
usbeam_status usbeam_float32_to_float16(const float *in, uint16_t *out, size_t n);
usbeam_status usbeam_float16_to_float32(const uint16_t *in, float *out, size_t n);
/* Device pointers; stream is a cudaStream_t (NULL: default stream).  NO_BACKEND without CUDA. */
usbeam_status usbeam_cuda_float32_to_float16(const void *in, void *out, size_t n, void *stream);
usbeam_status usbeam_cuda_float16_to_float32(const void *in, void *out, size_t n, void *stream);

/* -- detection post-processing: decode, threshold, top-K, class-aware NMS -- */
/* Raw head rows [cx, cy, w, h, objectness, class scores...] as exported by YOLOv5 (already
 * decoded: pixels and probabilities).  score = objectness * max class score (float32, ties
 * to the lower class), kept when score > (float)score_threshold; boxes xyxy = cx -/+ w/2.
 * Candidates are sorted by score descending, ties to the lower anchor index, cut to
 * max_candidates, then greedy NMS exactly as torchvision.ops.nms (float32 IoU, no +1,
 * suppress when IoU > iou_threshold compared in double), class-aware by the coordinate
 * offset of torchvision's batched_nms (offset = class * (max coordinate + 1), float32). */
typedef struct usbeam_detect_params {
    size_t n_images;         /* batch, >= 1 */
    size_t n_anchors;        /* rows per image, >= 1 */
    size_t n_classes;        /* >= 1; a row has 5 + n_classes values */
    usbeam_dtype in_dtype;   /* FLOAT32 or FLOAT16 */
    double score_threshold;  /* finite */
    double iou_threshold;    /* in [0, 1] */
    size_t max_candidates;   /* top-K before NMS, 1 .. n_anchors */
    size_t max_detections;   /* rows of the output per image, >= 1 */
    int class_agnostic;      /* 1: one NMS over all classes */
} usbeam_detect_params;

typedef struct usbeam_detect_plan usbeam_detect_plan;
usbeam_status usbeam_detect_plan_create(const usbeam_detect_params *params, usbeam_backend backend,
                                        usbeam_detect_plan **plan);
/* raw: (n_images, n_anchors, 5 + n_classes); detections: float32 (n_images, max_detections, 6)
 * rows [x1, y1, x2, y2, score, class], rows past the count are zero; counts: int32 (n_images) */
usbeam_status usbeam_detect_execute(usbeam_detect_plan *plan, const void *raw, float *detections,
                                    int32_t *counts);
usbeam_status usbeam_detect_execute_async(usbeam_detect_plan *plan, const void *raw, void *detections,
                                          void *counts, void *stream);
void usbeam_detect_plan_destroy(usbeam_detect_plan *plan);

/* Plain NMS over n_boxes (torchvision.ops.nms / batched_nms semantics as above). */
typedef struct usbeam_nms_params {
    size_t n_boxes;        /* >= 1 */
    double iou_threshold;  /* in [0, 1] */
    size_t max_keep;       /* 1 .. n_boxes */
} usbeam_nms_params;

typedef struct usbeam_nms_plan usbeam_nms_plan;
usbeam_status usbeam_nms_plan_create(const usbeam_nms_params *params, usbeam_backend backend,
                                     usbeam_nms_plan **plan);
/* boxes float32 (n_boxes, 4) x1 y1 x2 y2; scores float32 (n_boxes); classes int32 (n_boxes) or
 * NULL for one class; keep int32 (max_keep): kept indices by decreasing score, -1 past count;
 * count int32 (1). */
usbeam_status usbeam_nms_execute(usbeam_nms_plan *plan, const float *boxes, const float *scores,
                                 const int32_t *classes, int32_t *keep, int32_t *count);
void usbeam_nms_plan_destroy(usbeam_nms_plan *plan);

/* -- segmentation post-processing -- */
/* mask[i] = value[i] > threshold (compared in double), value float32 or float16. */
usbeam_status usbeam_mask_threshold(const void *values, usbeam_dtype dtype, size_t n, double threshold,
                                    uint8_t *mask);
/* scores (n_images, n_classes, n_pixels) -> labels int32 (n_images, n_pixels): index of the max,
 * ties and NaN as numpy.argmax (first maximum; the first NaN wins). */
usbeam_status usbeam_mask_argmax(const void *scores, usbeam_dtype dtype, size_t n_images,
                                 size_t n_classes, size_t n_pixels, int32_t *labels);
/* The same two on device pointers, queued on stream (cudaStream_t as void *). */
usbeam_status usbeam_cuda_mask_threshold(const void *values, usbeam_dtype dtype, size_t n,
                                         double threshold, uint8_t *mask, void *stream);
usbeam_status usbeam_cuda_mask_argmax(const void *scores, usbeam_dtype dtype, size_t n_images,
                                      size_t n_classes, size_t n_pixels, int32_t *labels, void *stream);

/* Connected components of binary masks (nonzero = foreground), numbered as
 * scipy.ndimage.label: 1..N in raster order of each component's first pixel. */
typedef struct usbeam_components_params {
    size_t n_images;         /* >= 1 */
    size_t height, width;    /* >= 1, height * width < 2^31 */
    int connectivity;        /* 4 (scipy's default cross) or 8 (3x3 square) */
} usbeam_components_params;

typedef struct usbeam_components_plan usbeam_components_plan;
usbeam_status usbeam_components_plan_create(const usbeam_components_params *params,
                                            usbeam_backend backend, usbeam_components_plan **plan);
/* mask uint8 (n_images, height, width); labels int32, same shape; counts int32 (n_images) */
usbeam_status usbeam_label_execute(usbeam_components_plan *plan, const uint8_t *mask, int32_t *labels,
                                   int32_t *counts);
/* out uint8 0/1: the mask with holes filled as scipy.ndimage.binary_fill_holes; the
 * background is flooded from the border with the plan's connectivity (4 = scipy default). */
usbeam_status usbeam_fill_holes_execute(usbeam_components_plan *plan, const uint8_t *mask, uint8_t *out);
/* out uint8 0/1: the largest component (ties: the lower label); empty mask -> all zero. */
usbeam_status usbeam_largest_component_execute(usbeam_components_plan *plan, const uint8_t *mask,
                                               uint8_t *out);
/* out uint8 0/1: the components whose area (pixels) is >= min_area. */
usbeam_status usbeam_remove_small_execute(usbeam_components_plan *plan, const uint8_t *mask,
                                          size_t min_area, uint8_t *out);
/* CUDA plans: the stream (cudaStream_t as void *) the executes above are queued on
 * (NULL, the default, is the legacy default stream); they take device pointers and never
 * synchronise the host.  Ignored by CPU plans. */
usbeam_status usbeam_components_set_stream(usbeam_components_plan *plan, void *stream);
void usbeam_components_plan_destroy(usbeam_components_plan *plan);

/* Per label 1..n_labels of one int32 label image (height, width): area (pixels), bbox
 * [min_row, min_col, max_row + 1, max_col + 1] and centroid [row, col] (mean pixel index).
 * An absent label gets area 0, bbox 0 and a NaN centroid; labels < 0 or > n_labels fail.
 * area int32 (n_labels), bbox int32 (n_labels, 4), centroid float64 (n_labels, 2). */
usbeam_status usbeam_regionprops_basic(const int32_t *labels, size_t height, size_t width,
                                       size_t n_labels, int32_t *area, int32_t *bbox, double *centroid);
/* The same on device pointers, queued on stream (cudaStream_t as void *); labels outside
 * 1..n_labels are ignored there (checking them would need a host synchronisation). */
usbeam_status usbeam_cuda_regionprops_basic(const int32_t *labels, size_t height, size_t width,
                                            size_t n_labels, int32_t *area, int32_t *bbox,
                                            double *centroid, void *stream);

/* ======== family: live ======== */
/* (declarations of the live family go below this line) */
/* Channel mapping of live frames, applied while a raw frame is copied into a session
 * slot, so only used channels travel on.
 * raw : one acquisition frame as the scanner holds it, MATLAB shape (n_rows, n_channels),
 *       n_rows = samples x acquisitions; any element strides (column-major Vantage RcvData:
 *       row_stride 1, channel_stride n_rows).
 * out : [n_acquisitions][n_elements][n_samples] C order: out[a][e][k] =
 *       raw[acquisition_row[a] + k][element_channel[e]].                                   */
typedef struct usbeam_live_gather_params {
    size_t n_rows, n_channels;          /* raw frame geometry */
    size_t n_acquisitions, n_elements, n_samples;
    const int32_t *element_channel;     /* [n_elements] 0-based channel of each element */
    const int64_t *acquisition_row;     /* [n_acquisitions] 0-based first raw row */
    usbeam_dtype dtype;                 /* INT16, FLOAT32 or FLOAT64; out has the same type */
} usbeam_live_gather_params;

typedef struct usbeam_live_gather_plan usbeam_live_gather_plan;
usbeam_status usbeam_live_gather_plan_create(const usbeam_live_gather_params *params,
                                             usbeam_live_gather_plan **plan);
/* row_stride, channel_stride: element strides of raw.  The plan has no scratch: one plan
 * may execute from several threads at once. */
usbeam_status usbeam_live_gather_execute(const usbeam_live_gather_plan *plan, const void *raw,
                                         ptrdiff_t row_stride, ptrdiff_t channel_stride, void *out);
void usbeam_live_gather_plan_destroy(usbeam_live_gather_plan *plan);

/* CUDA half of a live session (cuda/live.cu; a CPU-only build answers USBEAM_ERR_NO_BACKEND).
 * A ring of n_slots pinned host buffers and device buffers, an upload stream and a compute
 * stream.  Per slot k: host_slot(k) waits until the previous upload from host buffer k has
 * finished (the CPU then maps channels into it); upload(k) makes the upload stream wait
 * until compute has released device buffer k, copies, and records "uploaded"; acquire(k)
 * makes the compute stream wait for "uploaded" and returns the device buffer and the
 * compute stream (cudaStream_t as void *) to enqueue the pipeline on; release(k) records
 * "consumed".  So a device slot is never overwritten while in use nor read while partly
 * written, and copies overlap compute.  Tested under the CUDA emulator, not yet on a GPU. */
typedef struct usbeam_live_cuda_ring usbeam_live_cuda_ring;
usbeam_status usbeam_live_cuda_ring_create(int device, int n_slots, size_t slot_bytes,
                                           usbeam_live_cuda_ring **ring);
usbeam_status usbeam_live_cuda_ring_host_slot(usbeam_live_cuda_ring *ring, int slot, void **host);
usbeam_status usbeam_live_cuda_ring_upload(usbeam_live_cuda_ring *ring, int slot, size_t bytes);
usbeam_status usbeam_live_cuda_ring_acquire(usbeam_live_cuda_ring *ring, int slot, void **device,
                                            void **stream);
usbeam_status usbeam_live_cuda_ring_release(usbeam_live_cuda_ring *ring, int slot);
/* Seconds the last upload of slot took (event timing; waits for it to finish). */
usbeam_status usbeam_live_cuda_ring_upload_seconds(usbeam_live_cuda_ring *ring, int slot, double *seconds);
/* GPU seconds from acquire(slot) to release(slot) on the compute stream; waits for release's
 * event, i.e. for the work queued on the compute stream in between. */
usbeam_status usbeam_live_cuda_ring_compute_seconds(usbeam_live_cuda_ring *ring, int slot, double *seconds);
usbeam_status usbeam_live_cuda_ring_synchronize(usbeam_live_cuda_ring *ring);
void usbeam_live_cuda_ring_destroy(usbeam_live_cuda_ring *ring);
/* Rings created and not yet destroyed in this process (leak checks). */
int usbeam_live_cuda_ring_count(void);
/* Pinned host-to-device cudaMemcpy bandwidth (GB/s, median of repeats) of a bytes-sized copy:
 * the reference the live upload rate is compared with. */
usbeam_status usbeam_live_cuda_h2d_bandwidth(int device, size_t bytes, int repeats, double *gbps);

#ifdef __cplusplus
}
#endif
#endif /* USBEAM_H */
