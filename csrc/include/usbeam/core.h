/*
 * usbeam/core.h - what every stage shares: version, status codes, errors, backends, dtypes, threads.
 *
 * Included by every stage header; include "usbeam.h" for the whole API.
 */
#ifndef USBEAM_CORE_H
#define USBEAM_CORE_H

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
/* The Python exception kind is one of VALUE, TYPE, MEMORY, RUNTIME, NOTIMPL,  */
/* INTERRUPT; the extension module maps it to ValueError, TypeError,           */
/* MemoryError, usbeam.UsbeamError (a RuntimeError), NotImplementedError and   */
/* KeyboardInterrupt (or the exception the caller's signal handler raised).    */
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
    X(USBEAM_ERR_INTERNAL,         12, "internal error",                       RUNTIME) \
    X(USBEAM_ERR_INTERRUPTED,      13, "interrupted",                          INTERRUPT)

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
/* Interrupting long work.  A CPU execute that runs longer than interval seconds (<= 0: the
 * default, 0.05) calls the check registered by the calling OS thread, from that thread, at
 * most every interval (never from an OpenMP worker); when it returns nonzero the execute stops within about one tile per thread
 * and returns USBEAM_ERR_INTERRUPTED, its float outputs filled with NaN (no partial result)
 * and the plan as usable as after a finished call.  NULL unregisters.  The Python binding
 * registers a check that runs CPython's signal handlers, so Ctrl-C raises KeyboardInterrupt;
 * a MATLAB client could register one that asks utIsInterruptPending.  The check must not call
 * into the plan being executed. */
typedef int (*usbeam_interrupt_check)(void *context);
usbeam_status usbeam_set_interrupt_check(usbeam_interrupt_check check, void *context, double interval);
/* Plans keep the large blocks (receive tables, staging buffers) of plans destroyed before
 * them, up to 256 MiB in all, for the next plan to reuse without faulting fresh pages in:
 * the bytes kept now, and giving them back to the system (returns the bytes released). */
size_t usbeam_cached_memory(void);
size_t usbeam_release_cached_memory(void);
/* 1 when the CUDA backend (the module usbeam._cuda, csrc/backend/cuda_seam.h) is loaded. */
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

#ifdef __cplusplus
}
#endif
#endif /* USBEAM_CORE_H */
