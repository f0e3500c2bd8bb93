/*
 * test_hadamard.c - plain-C tests of the Hadamard family: every supported order gives
 * H H^T = n I, decode(encode(x)) == x exactly for both algorithms and both integer input
 * types, the algorithms agree on arbitrary data, and bad parameters are refused with a
 * message naming them.  Prints "N passed, N failed".
 */
#include "usbeam.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t next_random(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

static void test_matrices(void)
{
    static int8_t h[256 * 256];
    int orders = 0;
    for (size_t n = 1; n <= 256; ++n) {
        if (!usbeam_hadamard_order_supported(n)) {
            CHECK(usbeam_hadamard_matrix(n, h) == USBEAM_ERR_INVALID_ARGUMENT);
            continue;
        }
        ++orders;
        CHECK(usbeam_hadamard_matrix(n, h) == USBEAM_OK);
        int ok = 1;
        for (size_t i = 0; i < n && ok; ++i)
            for (size_t j = 0; j < n; ++j) {
                long dot = 0;
                for (size_t k = 0; k < n; ++k) dot += (long)h[i * n + k] * h[j * n + k];
                if (dot != (i == j ? (long)n : 0)) ok = 0;
            }
        CHECK(ok);
    }
    CHECK(orders == 18); /* 1..256 powers of two (9), 12*2^k (5), 20*2^k (4) */
    CHECK(usbeam_hadamard_matrix(512, h) == USBEAM_ERR_INVALID_ARGUMENT);
    CHECK(strstr(usbeam_last_error(), "order") != NULL);
}

/* Encode random x (|x| small enough to fit int16 after encoding), decode, compare. */
static void roundtrip(size_t n, usbeam_hadamard_algorithm algorithm)
{
    const size_t outer = 2, inner = 67, count = outer * n * inner;
    int8_t *h = malloc(n * n);
    int16_t *x = malloc(count * sizeof *x), *y = malloc(count * sizeof *y);
    int32_t *out = malloc(count * sizeof *out);
    float *outf = malloc(count * sizeof *outf);
    CHECK(usbeam_hadamard_matrix(n, h) == USBEAM_OK);
    int limit = 32767 / (int)n;
    for (size_t i = 0; i < count; ++i) x[i] = (int16_t)((int)(next_random() % (2 * limit + 1)) - limit);
    for (size_t o = 0; o < outer; ++o)
        for (size_t t = 0; t < n; ++t)
            for (size_t i = 0; i < inner; ++i) {
                long sum = 0;
                for (size_t e = 0; e < n; ++e) sum += (long)h[t * n + e] * x[(o * n + e) * inner + i];
                y[(o * n + t) * inner + i] = (int16_t)sum;
            }
    usbeam_hadamard_params p = {.order = n, .n_outer = outer, .n_inner = inner,
                                .in_dtype = USBEAM_DTYPE_INT16, .out_dtype = USBEAM_DTYPE_INT32,
                                .algorithm = algorithm};
    usbeam_hadamard_plan *plan = NULL;
    CHECK(usbeam_hadamard_plan_create(&p, USBEAM_BACKEND_CPU, &plan) == USBEAM_OK);
    for (size_t i = 0; i < count; ++i) out[i] = INT32_MIN;
    CHECK(usbeam_hadamard_execute(plan, y, out) == USBEAM_OK);
    int same = 1;
    for (size_t i = 0; i < count; ++i) same &= out[i] == x[i];
    CHECK(same);
    usbeam_hadamard_plan_destroy(plan);
    p.out_dtype = USBEAM_DTYPE_FLOAT32;
    p.transmit_last = 1;
    CHECK(usbeam_hadamard_plan_create(&p, USBEAM_BACKEND_CPU, &plan) == USBEAM_OK);
    CHECK(usbeam_hadamard_execute(plan, y, outf) == USBEAM_OK);
    same = 1;
    for (size_t o = 0; o < outer; ++o)
        for (size_t e = 0; e < n; ++e)
            for (size_t i = 0; i < inner; ++i)
                same &= outf[(o * inner + i) * n + e] == (float)x[(o * n + e) * inner + i];
    CHECK(same);
    usbeam_hadamard_plan_destroy(plan);
    free(h);
    free(x);
    free(y);
    free(out);
    free(outf);
}

static void test_bad_parameters(void)
{
    usbeam_hadamard_plan *plan = NULL;
    usbeam_hadamard_params p = {.order = 6, .n_outer = 1, .n_inner = 4, .in_dtype = USBEAM_DTYPE_INT16,
                                .out_dtype = USBEAM_DTYPE_FLOAT32};
    CHECK(usbeam_hadamard_plan_create(&p, USBEAM_BACKEND_CPU, &plan) == USBEAM_ERR_INVALID_ARGUMENT);
    CHECK(plan == NULL && strstr(usbeam_last_error(), "order") != NULL);
    p.order = 8;
    p.out_dtype = USBEAM_DTYPE_INT16;
    CHECK(usbeam_hadamard_plan_create(&p, USBEAM_BACKEND_CPU, &plan) == USBEAM_ERR_INVALID_DTYPE);
    p.out_dtype = USBEAM_DTYPE_INT32;
    p.in_dtype = USBEAM_DTYPE_FLOAT32;
    CHECK(usbeam_hadamard_plan_create(&p, USBEAM_BACKEND_CPU, &plan) == USBEAM_ERR_INVALID_DTYPE);
    p.in_dtype = USBEAM_DTYPE_INT16;
    p.n_inner = 0;
    CHECK(usbeam_hadamard_plan_create(&p, USBEAM_BACKEND_CPU, &plan) == USBEAM_ERR_INVALID_ARGUMENT);
    p.n_inner = 4;
    int8_t ones[64];
    memset(ones, 1, sizeof ones);
    p.matrix = ones;
    CHECK(usbeam_hadamard_plan_create(&p, USBEAM_BACKEND_CPU, &plan) == USBEAM_ERR_INVALID_ARGUMENT);
    CHECK(strstr(usbeam_last_error(), "matrix") != NULL);
    p.matrix = NULL;
    CHECK(usbeam_hadamard_plan_create(&p, USBEAM_BACKEND_CUDA, &plan) == USBEAM_ERR_NO_BACKEND);
    CHECK(usbeam_hadamard_plan_create(NULL, USBEAM_BACKEND_CPU, &plan) == USBEAM_ERR_NULL_POINTER);
    CHECK(usbeam_hadamard_execute(NULL, ones, ones) == USBEAM_ERR_NULL_POINTER);
    usbeam_hadamard_plan_destroy(NULL);
}

int main(void)
{
    test_matrices();
    static const size_t orders[] = {2, 4, 8, 12, 16, 20, 24, 32, 40, 48, 64, 80, 96, 128, 160, 192, 256};
    for (size_t k = 0; k < sizeof orders / sizeof orders[0]; ++k) {
        roundtrip(orders[k], USBEAM_HADAMARD_DIRECT);
        roundtrip(orders[k], USBEAM_HADAMARD_FAST);
    }
    test_bad_parameters();
    return check_summary();
}
