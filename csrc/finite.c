/*
 * finite.c - refusing NaN and infinite input data: the message every kernel family uses, the
 * count that the families whose kernel does not read every sample once (model_input, which
 * may skip pixels when it shrinks; detect_postprocess, which reads the boxes of candidates
 * only) run before they start, and the NaN fill that replaces a partial output.
 *
 * Layout: flat arrays of n values (complex64: n interleaved (re, im) pairs).
 * Test: a value v is finite exactly when v - v == 0 (NaN - NaN and inf - inf are NaN), which
 * compiles to a subtract and a compare per value and vectorises; float16 is finite when its
 * exponent field (bits 10..14) is not all ones.  No -ffast-math anywhere in the build, so the
 * compiler may not assume the values finite.
 */
#include "usbeam_internal.h"

#include <math.h>

usbeam_status usbeam_fail_nonfinite(const char *name, const char *where)
{
    return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "%s contains NaN or infinite values (%s)", name, where);
}

/* Values are counted in chunks so that a large array is shared out among the threads and a
 * small one runs on the calling thread alone (a fork/join costs more than 64 Ki values). */
#define FINITE_PARALLEL_MIN 65536

size_t usbeam_count_nonfinite(const void *data, usbeam_dtype dtype, size_t n)
{
    if (!data || n == 0) return 0;
    size_t bad = 0;
    if (dtype == USBEAM_DTYPE_FLOAT32 || dtype == USBEAM_DTYPE_COMPLEX64) {
        const float *x = data;
        const ptrdiff_t count = (ptrdiff_t)(dtype == USBEAM_DTYPE_COMPLEX64 ? 2 * n : n);
#pragma omp parallel for simd schedule(static) reduction(+ : bad) if (count > FINITE_PARALLEL_MIN)
        for (ptrdiff_t i = 0; i < count; ++i) bad += !(x[i] - x[i] == 0.0f);
    } else if (dtype == USBEAM_DTYPE_FLOAT64) {
        const double *x = data;
        const ptrdiff_t count = (ptrdiff_t)n;
#pragma omp parallel for simd schedule(static) reduction(+ : bad) if (count > FINITE_PARALLEL_MIN)
        for (ptrdiff_t i = 0; i < count; ++i) bad += !(x[i] - x[i] == 0.0);
    } else if (dtype == USBEAM_DTYPE_FLOAT16) {
        const uint16_t *x = data;
        const ptrdiff_t count = (ptrdiff_t)n;
#pragma omp parallel for simd schedule(static) reduction(+ : bad) if (count > FINITE_PARALLEL_MIN)
        for (ptrdiff_t i = 0; i < count; ++i) bad += (x[i] & 0x7C00u) == 0x7C00u;
    }
    return bad;
}

void usbeam_fill_nan(float *out, size_t n)
{
    const ptrdiff_t count = (ptrdiff_t)n;
#pragma omp parallel for simd schedule(static) if (count > FINITE_PARALLEL_MIN)
    for (ptrdiff_t i = 0; i < count; ++i) out[i] = NAN;
}
