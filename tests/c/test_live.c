/*
 * test_live.c - the live channel-mapping kernel (live.c) in plain C: column-major and
 * row-major raw frames against the definition out[a][e][k] = raw[row[a] + k][channel[e]],
 * every output element written (poisoned first), bad tables refused with a message naming
 * the parameter.  Prints "N passed, N failed".
 */
#include "usbeam.h"

#include <stdio.h>
#include <string.h>

#include "check.h"

enum { ROWS = 50, CHANNELS = 6, ELEMENTS = 4, ACQ = 2, SAMPLES = 20 };

static void test_gather_both_layouts(void)
{
    int32_t channel[ELEMENTS] = {5, 0, 3, 2};
    int64_t row[ACQ] = {3, 28};
    usbeam_live_gather_params p = {ROWS, CHANNELS, ACQ, ELEMENTS, SAMPLES, channel, row, USBEAM_DTYPE_INT16};
    usbeam_live_gather_plan *plan = NULL;
    CHECK(usbeam_live_gather_plan_create(&p, &plan) == USBEAM_OK);
    channel[0] = 99; /* the plan keeps its own copy */
    static int16_t col_major[ROWS * CHANNELS], row_major[ROWS * CHANNELS];
    for (int r = 0; r < ROWS; ++r)
        for (int c = 0; c < CHANNELS; ++c) {
            int16_t v = (int16_t)(r * 100 + c);
            col_major[c * ROWS + r] = v;
            row_major[r * CHANNELS + c] = v;
        }
    static int16_t out[ACQ * ELEMENTS * SAMPLES];
    const int32_t expect_channel[ELEMENTS] = {5, 0, 3, 2};
    for (int layout = 0; layout < 2; ++layout) {
        memset(out, 0x5a, sizeof out);
        usbeam_status st = layout == 0 ? usbeam_live_gather_execute(plan, col_major, 1, ROWS, out)
                                       : usbeam_live_gather_execute(plan, row_major, CHANNELS, 1, out);
        CHECK(st == USBEAM_OK);
        int wrong = 0;
        for (int a = 0; a < ACQ; ++a)
            for (int e = 0; e < ELEMENTS; ++e)
                for (int k = 0; k < SAMPLES; ++k)
                    wrong += out[(a * ELEMENTS + e) * SAMPLES + k] != (int16_t)((row[a] + k) * 100 + expect_channel[e]);
        CHECK(wrong == 0);
    }
    CHECK(usbeam_live_gather_execute(plan, NULL, 1, ROWS, out) == USBEAM_ERR_NULL_POINTER);
    usbeam_live_gather_plan_destroy(plan);
    usbeam_live_gather_plan_destroy(NULL);
}

static void test_bad_tables(void)
{
    int32_t channel[2] = {0, 6};
    int64_t row[1] = {0};
    usbeam_live_gather_params p = {ROWS, CHANNELS, 1, 2, SAMPLES, channel, row, USBEAM_DTYPE_INT16};
    usbeam_live_gather_plan *plan = NULL;
    CHECK(usbeam_live_gather_plan_create(&p, &plan) == USBEAM_ERR_INVALID_ARGUMENT && plan == NULL);
    CHECK(strstr(usbeam_last_error(), "element_channel[1]") != NULL);
    channel[1] = 1;
    row[0] = ROWS - SAMPLES + 1;
    CHECK(usbeam_live_gather_plan_create(&p, &plan) == USBEAM_ERR_INVALID_ARGUMENT);
    CHECK(strstr(usbeam_last_error(), "acquisition_row[0]") != NULL);
    row[0] = 0;
    p.dtype = USBEAM_DTYPE_COMPLEX64;
    CHECK(usbeam_live_gather_plan_create(&p, &plan) == USBEAM_ERR_INVALID_DTYPE);
    p.dtype = USBEAM_DTYPE_INT16;
    p.n_samples = 0;
    CHECK(usbeam_live_gather_plan_create(&p, &plan) == USBEAM_ERR_INVALID_ARGUMENT);
    CHECK(usbeam_live_gather_plan_create(NULL, &plan) == USBEAM_ERR_NULL_POINTER);
}

/* The C tests link without CUDA: every ring entry point answers USBEAM_ERR_NO_BACKEND
 * (cuda/live.cu is tested from Python on a GPU), never crashes on NULL, counts no ring. */
static void test_ring_without_cuda(void)
{
    usbeam_live_cuda_ring *ring = (usbeam_live_cuda_ring *)1;
    void *ptr = NULL, *stream = NULL;
    double seconds = 0;
    CHECK(usbeam_live_cuda_ring_create(0, 3, 1024, &ring) == USBEAM_ERR_NO_BACKEND);
    CHECK(ring == NULL);
    CHECK(usbeam_live_cuda_ring_host_slot(NULL, 0, &ptr) == USBEAM_ERR_NO_BACKEND);
    CHECK(usbeam_live_cuda_ring_upload(NULL, 0, 1) == USBEAM_ERR_NO_BACKEND);
    CHECK(usbeam_live_cuda_ring_acquire(NULL, 0, &ptr, &stream) == USBEAM_ERR_NO_BACKEND);
    CHECK(usbeam_live_cuda_ring_release(NULL, 0) == USBEAM_ERR_NO_BACKEND);
    CHECK(usbeam_live_cuda_ring_upload_seconds(NULL, 0, &seconds) == USBEAM_ERR_NO_BACKEND);
    CHECK(usbeam_live_cuda_ring_compute_seconds(NULL, 0, &seconds) == USBEAM_ERR_NO_BACKEND);
    CHECK(usbeam_live_cuda_ring_synchronize(NULL) == USBEAM_ERR_NO_BACKEND);
    CHECK(usbeam_live_cuda_ring_count() == 0);
    usbeam_live_cuda_ring_destroy(NULL);
}

int main(void)
{
    test_gather_both_layouts();
    test_bad_tables();
    test_ring_without_cuda();
    return check_summary();
}
