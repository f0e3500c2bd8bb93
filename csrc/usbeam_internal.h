/*
 * usbeam_internal.h - what the C kernels (csrc/) and the CUDA kernels (cuda/)
 * share beyond the public header: error reporting, checked allocation and size
 * arithmetic.  It includes no Python or NumPy header, so nvcc can include it.
 */
#ifndef USBEAM_INTERNAL_H
#define USBEAM_INTERNAL_H

#include "usbeam.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Record a detailed, printf-formatted message for the calling thread and return status.
 * Usage: return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "fs must be > 0 (got %g)", fs); */
usbeam_status usbeam_fail(usbeam_status status, const char *format, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* 64-byte aligned, zeroed allocation; NULL on failure or when bytes overflows. */
void *usbeam_alloc(size_t bytes);
void usbeam_free(void *ptr);

/* a*b (and a*b*c) with overflow detection: returns 0 and sets *out, or -1 on overflow. */
int usbeam_mul_size(size_t a, size_t b, size_t *out);
int usbeam_mul_size3(size_t a, size_t b, size_t c, size_t *out);

/* Largest buffer a plan may request, in bytes (guards against absurd sizes before the
 * allocator sees them; larger requests fail with USBEAM_ERR_SIZE_OVERFLOW). */
#define USBEAM_MAX_ALLOCATION ((size_t)1 << 40)

/* Parameter checks that set a message naming the parameter. */
usbeam_status usbeam_check_positive(const char *name, double value);      /* finite and > 0 */
usbeam_status usbeam_check_nonnegative(const char *name, double value);   /* finite and >= 0 */
usbeam_status usbeam_check_finite(const char *name, double value);

#ifdef __cplusplus
}
#endif
#endif /* USBEAM_INTERNAL_H */
