/*
 * roofline.c - the machine's ceilings for the DAS roofline (benchmarks/bench_das.py):
 * float32 FMA peak (AVX2 ymm and AVX-512 zmm, 12 independent accumulator chains per thread in registers,
 * so neither the 4-cycle FMA latency nor the loads bound it) and memory bandwidth (a read
 * of a 1 GiB buffer, a copy and a triad over 512 MiB arrays), with one thread per core
 * (OpenMP).  Prints one JSON line:
 *   {"threads": T, "fma_gflops_ymm": ..., "fma_gflops_zmm": ..., "read_gbs": ..., "copy_gbs": ..., "triad_gbs": ...}
 * Each figure is the best of `reps` runs (the ceiling, as STREAM reports).  Bytes of the
 * copy and triad count reads + writes (write-allocate not counted, as STREAM).
 * Build: cc -O2 -fopenmp benchmarks/roofline.c -o build/roofline   (bench_das.py does it)
 */
#define _POSIX_C_SOURCE 199309L
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

#define CHAINS 12

__attribute__((target("avx2,fma"))) static float fma_ymm(long iters, float seed)
{
    /* twelve accumulators written out, so they live in registers whatever the optimiser does */
    const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(seed * 1e-7f);
    __m256 c0 = _mm256_set1_ps(seed), c1 = _mm256_set1_ps(seed + 1), c2 = _mm256_set1_ps(seed + 2), c3 = _mm256_set1_ps(seed + 3), c4 = _mm256_set1_ps(seed + 4),
           c5 = _mm256_set1_ps(seed + 5), c6 = _mm256_set1_ps(seed + 6), c7 = _mm256_set1_ps(seed + 7), c8 = _mm256_set1_ps(seed + 8), c9 = _mm256_set1_ps(seed + 9),
           c10 = _mm256_set1_ps(seed + 10), c11 = _mm256_set1_ps(seed + 11);
    for (long k = 0; k < iters; ++k) {
        __asm__ volatile("" : "+x"(c0), "+x"(c1), "+x"(c2), "+x"(c3), "+x"(c4), "+x"(c5));
        c0 = _mm256_fmadd_ps(c0, a, b), c1 = _mm256_fmadd_ps(c1, a, b), c2 = _mm256_fmadd_ps(c2, a, b), c3 = _mm256_fmadd_ps(c3, a, b);
        c4 = _mm256_fmadd_ps(c4, a, b), c5 = _mm256_fmadd_ps(c5, a, b), c6 = _mm256_fmadd_ps(c6, a, b), c7 = _mm256_fmadd_ps(c7, a, b);
        c8 = _mm256_fmadd_ps(c8, a, b), c9 = _mm256_fmadd_ps(c9, a, b), c10 = _mm256_fmadd_ps(c10, a, b), c11 = _mm256_fmadd_ps(c11, a, b);
    }
    float out[16];
    _mm256_storeu_ps(out, c0 + c1 + c2 + c3 + c4 + c5 + c6 + c7 + c8 + c9 + c10 + c11);
    return out[0];
}

__attribute__((target("avx512f"))) static float fma_zmm(long iters, float seed)
{
    /* twelve accumulators written out, so they live in registers whatever the optimiser does */
    const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(seed * 1e-7f);
    __m512 c0 = _mm512_set1_ps(seed), c1 = _mm512_set1_ps(seed + 1), c2 = _mm512_set1_ps(seed + 2), c3 = _mm512_set1_ps(seed + 3), c4 = _mm512_set1_ps(seed + 4),
           c5 = _mm512_set1_ps(seed + 5), c6 = _mm512_set1_ps(seed + 6), c7 = _mm512_set1_ps(seed + 7), c8 = _mm512_set1_ps(seed + 8), c9 = _mm512_set1_ps(seed + 9),
           c10 = _mm512_set1_ps(seed + 10), c11 = _mm512_set1_ps(seed + 11);
    for (long k = 0; k < iters; ++k) {
        __asm__ volatile("" : "+x"(c0), "+x"(c1), "+x"(c2), "+x"(c3), "+x"(c4), "+x"(c5));
        c0 = _mm512_fmadd_ps(c0, a, b), c1 = _mm512_fmadd_ps(c1, a, b), c2 = _mm512_fmadd_ps(c2, a, b), c3 = _mm512_fmadd_ps(c3, a, b);
        c4 = _mm512_fmadd_ps(c4, a, b), c5 = _mm512_fmadd_ps(c5, a, b), c6 = _mm512_fmadd_ps(c6, a, b), c7 = _mm512_fmadd_ps(c7, a, b);
        c8 = _mm512_fmadd_ps(c8, a, b), c9 = _mm512_fmadd_ps(c9, a, b), c10 = _mm512_fmadd_ps(c10, a, b), c11 = _mm512_fmadd_ps(c11, a, b);
    }
    float out[16];
    _mm512_storeu_ps(out, c0 + c1 + c2 + c3 + c4 + c5 + c6 + c7 + c8 + c9 + c10 + c11);
    return out[0];
}

/* best GFLOP/s of `reps` runs of all threads together */
static double fma_peak(int zmm, int reps)
{
    const long iters = 20000000;
    const int lanes = zmm ? 16 : 8;
    double best = 0.0;
    volatile float sink = 0.0f;
    for (int r = 0; r < reps; ++r) {
        double t = 0.0;
#pragma omp parallel reduction(max : t)
        {
#pragma omp barrier
            const double t0 = now();
            sink += zmm ? fma_zmm(iters, 1.0f + omp_get_thread_num()) : fma_ymm(iters, 1.0f + omp_get_thread_num());
            t = now() - t0;
        }
        const double flops = 2.0 * lanes * CHAINS * (double)iters * omp_get_max_threads();
        if (flops / t / 1e9 > best) best = flops / t / 1e9;
    }
    return best;
}

int main(int argc, char **argv)
{
    const int reps = argc > 1 ? atoi(argv[1]) : 5;
    const size_t n = (size_t)1 << 27; /* floats: 512 MiB per array */
    float *a = aligned_alloc(64, n * 4), *b = aligned_alloc(64, n * 4), *c = aligned_alloc(64, n * 4);
    if (!a || !b || !c) return 1;
    const long nn = (long)n;
#pragma omp parallel for schedule(static)
    for (long i = 0; i < nn; ++i) a[i] = 1.0f, b[i] = 2.0f, c[i] = 0.5f;
    double read = 0, copy = 0, triad = 0;
    volatile float sink = 0.0f;
    for (int r = 0; r < reps; ++r) {
        double t = now();
        float s = 0.0f;
#pragma omp parallel for simd schedule(static) reduction(+ : s)
        for (long i = 0; i < nn; ++i) s += a[i] + b[i];
        t = now() - t;
        sink += s;
        if (8.0 * n / t / 1e9 > read) read = 8.0 * n / t / 1e9;
        t = now();
#pragma omp parallel for simd schedule(static)
        for (long i = 0; i < nn; ++i) c[i] = a[i];
        t = now() - t;
        if (8.0 * n / t / 1e9 > copy) copy = 8.0 * n / t / 1e9;
        t = now();
#pragma omp parallel for simd schedule(static)
        for (long i = 0; i < nn; ++i) a[i] = b[i] + 0.5f * c[i];
        t = now() - t;
        if (12.0 * n / t / 1e9 > triad) triad = 12.0 * n / t / 1e9;
    }
    const double ymm = fma_peak(0, reps), zmm = fma_peak(1, reps);
    printf("{\"threads\": %d, \"fma_gflops_ymm\": %.1f, \"fma_gflops_zmm\": %.1f, \"read_gbs\": %.1f, \"copy_gbs\": %.1f, "
           "\"triad_gbs\": %.1f}\n",
           omp_get_max_threads(), ymm, zmm, read, copy, triad);
    free(a), free(b), free(c);
    return sink == 12345.0f;
}
