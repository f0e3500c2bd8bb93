/*
 * finite.c - refusing NaN and infinite input data: the message every kernel family uses, the
 * count for kernels that do not read every sample once (detect_postprocess reads the boxes
 * of candidates only, and runs it first; model_input, which may skip pixels when it shrinks,
 * runs it on slices inside its own parallel loop), and the NaN fill that replaces a partial
 * output.
 *
 * Layout: flat arrays of n values (complex64: n interleaved (re, im) pairs).
 * Test: a value v is finite exactly when v - v == 0 (NaN - NaN and inf - inf are NaN), which
 * compiles to a subtract and a compare per value and vectorises; float16 is finite when its
 * exponent field (bits 10..14) is not all ones.  No -ffast-math anywhere in the build, so the
 * compiler may not assume the values finite.
 */
#include "common/usbeam_internal.h"

#include <math.h>

usbeam_status usbeam_fail_nonfinite(const char *name, const char *where)
{
    return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "%s contains NaN or infinite values (%s)", name, where);
}

/* Non-finite values among x[begin, end) (indices in scalars: complex64 as float32 pairs). */
static size_t count_range(const void *data, usbeam_dtype dtype, ptrdiff_t begin, ptrdiff_t end)
{
    size_t bad = 0;
    if (dtype == USBEAM_DTYPE_FLOAT32 || dtype == USBEAM_DTYPE_COMPLEX64) {
        const float *x = data;
#pragma omp simd reduction(+ : bad)
        for (ptrdiff_t i = begin; i < end; ++i) bad += !(x[i] - x[i] == 0.0f);
    } else if (dtype == USBEAM_DTYPE_FLOAT64) {
        const double *x = data;
#pragma omp simd reduction(+ : bad)
        for (ptrdiff_t i = begin; i < end; ++i) bad += !(x[i] - x[i] == 0.0);
    } else if (dtype == USBEAM_DTYPE_FLOAT16) {
        const uint16_t *x = data;
#pragma omp simd reduction(+ : bad)
        for (ptrdiff_t i = begin; i < end; ++i) bad += (x[i] & 0x7C00u) == 0x7C00u;
    }
    return bad;
}

/* A large array is shared out among the threads in chunks; a small one, or a call from inside
 * a parallel region (a slice of a kernel's own work), runs on the calling thread alone, with
 * no OpenMP region at all (a fork/join costs more than 64 Ki values). */
#define FINITE_CHUNK 65536

size_t usbeam_count_nonfinite(const void *data, usbeam_dtype dtype, size_t n)
{
    if (!data || n == 0) return 0;
    const ptrdiff_t count = (ptrdiff_t)(dtype == USBEAM_DTYPE_COMPLEX64 ? 2 * n : n);
#ifdef _OPENMP
    if (count > FINITE_CHUNK && !omp_in_parallel()) {
        const ptrdiff_t n_chunks = (count + FINITE_CHUNK - 1) / FINITE_CHUNK;
        size_t bad = 0;
#pragma omp parallel for schedule(static) reduction(+ : bad)
        for (ptrdiff_t c = 0; c < n_chunks; ++c) {
            const ptrdiff_t begin = c * FINITE_CHUNK, end = begin + FINITE_CHUNK < count ? begin + FINITE_CHUNK : count;
            bad += count_range(data, dtype, begin, end);
        }
        return bad;
    }
#endif
    return count_range(data, dtype, 0, count);
}

void usbeam_fill_nan(float *out, size_t n)
{
    const ptrdiff_t count = (ptrdiff_t)n;
#pragma omp parallel for simd schedule(static) if (count > FINITE_CHUNK)
    for (ptrdiff_t i = 0; i < count; ++i) out[i] = NAN;
}
