/*
 * test_finite.c - plain-C tests of the refusal of NaN and inf input data (csrc/finite.c and
 * the kernels' fused checks): usbeam_count_nonfinite counts exactly the planted values for
 * every dtype, on both sides of its parallel chunking; an IIR clutter plan that refused a
 * block goes on bit for bit as a plan that never saw it; a refused power Doppler call names
 * `iq` and leaves NaN in out.  Built by `make ctest` and `make asan`.  Prints "N passed,
 * N failed".
 */
#include "usbeam.h"
#include "common/usbeam_internal.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

/* sizes on both sides of the 64 Ki chunk of usbeam_count_nonfinite, and across chunk ends */
static const size_t SIZES[] = {1, 7, 65536, 65537, 200003};

/* the expected counts, from libm's isfinite and the half exponent field */
static size_t reference_count_float(const float *x, size_t n)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; ++i) bad += !isfinite(x[i]);
    return bad;
}

static size_t reference_count_half(const uint16_t *h, size_t n)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; ++i) bad += ((h[i] >> 10) & 0x1Fu) == 0x1Fu;
    return bad;
}

static void test_count_float32_and_complex(void)
{
    for (size_t s = 0; s < sizeof SIZES / sizeof SIZES[0]; ++s) {
        const size_t n = SIZES[s];
        float *x = malloc(2 * n * sizeof *x);
        for (size_t i = 0; i < 2 * n; ++i) x[i] = (float)((double)i * 1e-3 - 7.0);
        CHECK(usbeam_count_nonfinite(x, USBEAM_DTYPE_FLOAT32, n) == 0);
        CHECK(usbeam_count_nonfinite(x, USBEAM_DTYPE_COMPLEX64, n) == 0);
        x[n - 1] = NAN;
        x[0] = INFINITY;
        if (n > 65537) {
            x[65535] = -INFINITY; /* the last value of the first chunk */
            x[65536] = NAN;       /* the first of the second */
        }
        CHECK(reference_count_float(x, n) > 0);
        CHECK(usbeam_count_nonfinite(x, USBEAM_DTYPE_FLOAT32, n) == reference_count_float(x, n));
        x[2 * n - 1] = NAN; /* beyond n float32 values, inside n complex values */
        CHECK(usbeam_count_nonfinite(x, USBEAM_DTYPE_FLOAT32, n) == reference_count_float(x, n));
        CHECK(usbeam_count_nonfinite(x, USBEAM_DTYPE_COMPLEX64, n) == reference_count_float(x, 2 * n));
        free(x);
    }
}

static void test_count_float64_and_float16(void)
{
    for (size_t s = 0; s < sizeof SIZES / sizeof SIZES[0]; ++s) {
        const size_t n = SIZES[s];
        double *d = malloc(n * sizeof *d);
        uint16_t *h = malloc(n * sizeof *h);
        for (size_t i = 0; i < n; ++i) {
            d[i] = 1e300 * ((double)i - 3.0); /* large but finite */
            h[i] = (uint16_t)(i % 0x7C00u);   /* every finite positive half (0x7BFF = 65504) */
        }
        CHECK(usbeam_count_nonfinite(d, USBEAM_DTYPE_FLOAT64, n) == 0);
        CHECK(usbeam_count_nonfinite(h, USBEAM_DTYPE_FLOAT16, n) == 0);
        d[n / 2] = -INFINITY;
        h[n / 2] = 0xFC00u; /* -inf */
        h[n - 1] = 0x7E01u; /* a NaN */
        CHECK(usbeam_count_nonfinite(d, USBEAM_DTYPE_FLOAT64, n) == 1);
        CHECK(usbeam_count_nonfinite(h, USBEAM_DTYPE_FLOAT16, n) == reference_count_half(h, n));
        h[0] = 0xFBFFu; /* -65504: finite */
        CHECK(usbeam_count_nonfinite(h, USBEAM_DTYPE_FLOAT16, n) == reference_count_half(h, n));
        CHECK(usbeam_count_nonfinite(h, USBEAM_DTYPE_INT16, n) == 0); /* integers: nothing to check */
        free(d);
        free(h);
    }
}

static void fill_noise(float *x, size_t n, unsigned *seed)
{
    for (size_t i = 0; i < n; ++i) {
        *seed = *seed * 1103515245u + 12345u;
        x[i] = (float)((double)(*seed >> 8) / (double)(1u << 24) - 0.5);
    }
}

/* Two IIR plans fed the same clean blocks, one also a refused block with one bad value:
 * their outputs afterwards are identical (the refused block changed no state). */
static void test_iir_refused_block_keeps_state(usbeam_iir_init init, float bad_value)
{
    enum { NF = 8, NP = 150 }; /* 150 pixels: three pixel blocks */
    usbeam_clutter_params prm = {0};
    prm.n_frames = NF;
    prm.n_pixels = NP;
    prm.method = USBEAM_CLUTTER_IIR;
    prm.iir_order = 4;
    prm.iir_cutoff = 0.1;
    prm.iir_init = init;
    usbeam_clutter_plan *a = NULL, *b = NULL;
    CHECK(usbeam_clutter_plan_create(&prm, USBEAM_BACKEND_CPU, &a) == USBEAM_OK);
    CHECK(usbeam_clutter_plan_create(&prm, USBEAM_BACKEND_CPU, &b) == USBEAM_OK);
    if (!a || !b) return;
    static float in[2 * NF * NP], bad[2 * NF * NP], out_a[2 * NF * NP], out_b[2 * NF * NP];
    unsigned seed = 7u;
    for (int block = 0; block < 3; ++block) {
        fill_noise(in, 2 * NF * NP, &seed);
        if (block == 1) {
            const size_t k = 2 * (5 * NP + 149) + 1; /* frame 5, last pixel, imaginary part */
            memcpy(bad, in, sizeof bad);
            bad[k] = bad_value;
            for (size_t i = 0; i < 2 * NF * NP; ++i) out_a[i] = 3.0f;
            CHECK(usbeam_clutter_execute(a, bad, out_a) == USBEAM_ERR_INVALID_ARGUMENT);
            CHECK(strncmp(usbeam_last_error(), "iq contains NaN or infinite values", 34) == 0);
            CHECK(isnan(out_a[0]) && isnan(out_a[2 * NF * NP - 1]));
            /* the input is kept: the bad value and every other one */
            CHECK(!isfinite(bad[k]) && memcmp(bad, in, k * sizeof(float)) == 0 &&
                  memcmp(bad + k + 1, in + k + 1, (2 * NF * NP - k - 1) * sizeof(float)) == 0);
        }
        CHECK(usbeam_clutter_execute(a, in, out_a) == USBEAM_OK);
        CHECK(usbeam_clutter_execute(b, in, out_b) == USBEAM_OK);
        CHECK(memcmp(out_a, out_b, sizeof out_a) == 0);
    }
    usbeam_clutter_plan_destroy(a);
    usbeam_clutter_plan_destroy(b);
}

static void test_power_refusal(void)
{
    enum { NF = 6, NP = 300 };
    usbeam_power_params prm = {0};
    prm.n_frames = NF;
    prm.n_pixels = NP;
    usbeam_power_plan *plan = NULL;
    CHECK(usbeam_power_plan_create(&prm, USBEAM_BACKEND_CPU, &plan) == USBEAM_OK);
    if (!plan) return;
    static float in[2 * NF * NP], out[NP];
    unsigned seed = 3u;
    fill_noise(in, 2 * NF * NP, &seed);
    CHECK(usbeam_power_execute(plan, in, out) == USBEAM_OK);
    in[2 * (3 * NP + 299)] = INFINITY;
    CHECK(usbeam_power_execute(plan, in, out) == USBEAM_ERR_INVALID_ARGUMENT);
    CHECK(strncmp(usbeam_last_error(), "iq contains NaN or infinite values", 34) == 0);
    int all_nan = 1;
    for (size_t i = 0; i < NP; ++i) all_nan &= isnan(out[i]) != 0;
    CHECK(all_nan);
    usbeam_power_plan_destroy(plan);
}

int main(void)
{
    test_count_float32_and_complex();
    test_count_float64_and_float16();
    test_iir_refused_block_keeps_state(USBEAM_IIR_INIT_ZERO, NAN);
    test_iir_refused_block_keeps_state(USBEAM_IIR_INIT_PROJECTION, -INFINITY);
    test_power_refusal();
    return check_summary();
}
