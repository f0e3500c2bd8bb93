/*
 * status.c - status table lookups, the per-thread error message, checked allocation
 * and the build/backend queries that every kernel family uses.
 */
#include "common/usbeam_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#define USBEAM_ERROR_CAPACITY 512

static _Thread_local char last_error_message[USBEAM_ERROR_CAPACITY];

const char *usbeam_status_string(usbeam_status status)
{
    switch (status) {
#define USBEAM_X_CASE(name, value, message, pykind) \
    case name:                                       \
        return message;
        USBEAM_STATUS_TABLE(USBEAM_X_CASE)
#undef USBEAM_X_CASE
    }
    return "unknown status";
}

const char *usbeam_last_error(void) { return last_error_message; }

void usbeam_clear_error(void) { last_error_message[0] = '\0'; }

usbeam_status usbeam_vfail(usbeam_status status, const char *format, va_list args);
usbeam_status usbeam_vfail(usbeam_status status, const char *format, va_list args)
{
    vsnprintf(last_error_message, sizeof last_error_message, format, args);
    return status;
}

usbeam_status usbeam_fail(usbeam_status status, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    usbeam_vfail(status, format, args);
    va_end(args);
    return status;
}

void *usbeam_alloc(size_t bytes)
{
    if (bytes == 0) bytes = 1;
    if (bytes > USBEAM_MAX_ALLOCATION) return NULL;
    size_t rounded = (bytes + 63u) & ~(size_t)63u;
    void *ptr = aligned_alloc(64, rounded);
    if (ptr) memset(ptr, 0, rounded);
    return ptr;
}

void usbeam_free(void *ptr) { free(ptr); }

usbeam_status usbeam_check_finite(const char *name, double value)
{
    if (!isfinite(value))
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "%s must be finite (got %g)", name, value);
    return USBEAM_OK;
}

usbeam_status usbeam_check_positive(const char *name, double value)
{
    if (!isfinite(value) || !(value > 0))
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "%s must be finite and > 0 (got %g)", name,
                           value);
    return USBEAM_OK;
}

usbeam_status usbeam_check_nonnegative(const char *name, double value)
{
    if (!isfinite(value) || value < 0)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "%s must be finite and >= 0 (got %g)", name,
                           value);
    return USBEAM_OK;
}

size_t usbeam_dtype_size(usbeam_dtype dtype)
{
    switch (dtype) {
    case USBEAM_DTYPE_INT16: return 2;
    case USBEAM_DTYPE_FLOAT32: return 4;
    case USBEAM_DTYPE_COMPLEX64: return 8;
    case USBEAM_DTYPE_UINT8: return 1;
    case USBEAM_DTYPE_FLOAT16: return 2;
    case USBEAM_DTYPE_INT32: return 4;
    case USBEAM_DTYPE_FLOAT64: return 8;
    }
    return 0;
}

int usbeam_cpu_threads(void)
{
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

usbeam_status usbeam_set_thread_limit(int n)
{
    if (n < 1) return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "threads must be >= 1 (got %d)", n);
#ifdef _OPENMP
    omp_set_num_threads(n);
#endif
    return USBEAM_OK;
}
