/*
 * test_core.c - plain-C tests of the public contract: status table, plan lifecycle,
 * bad parameters rejected with a message, destroy(NULL).  Built by `make ctest` and,
 * under AddressSanitizer + UBSan, by `make asan`.  Prints "N passed, N failed".
 */
#include "usbeam.h"

#include <complex.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"

static void test_status_table(void)
{
    CHECK(strcmp(usbeam_status_string(USBEAM_OK), "success") == 0);
    CHECK(strlen(usbeam_status_string(USBEAM_ERR_CUDA)) > 0);
    CHECK(strcmp(usbeam_status_string((usbeam_status)9999), "unknown status") == 0);
}

static void test_bmode(void)
{
    usbeam_bmode_plan *plan = NULL;
    usbeam_bmode_params p = {.n_values = 4, .n_images = 1, .dynamic_range_db = 40.0};
    usbeam_bmode_params bad = p;
    bad.dynamic_range_db = -1;
    CHECK(usbeam_bmode_plan_create(&bad, USBEAM_BACKEND_CPU, &plan) == USBEAM_ERR_INVALID_ARGUMENT);
    CHECK(plan == NULL);
    CHECK(strstr(usbeam_last_error(), "dynamic_range") != NULL);
    bad = p;
    bad.dynamic_range_db = NAN;
    CHECK(usbeam_bmode_plan_create(&bad, USBEAM_BACKEND_CPU, &plan) == USBEAM_ERR_INVALID_ARGUMENT);
    CHECK(usbeam_bmode_plan_create(&p, USBEAM_BACKEND_CPU, &plan) == USBEAM_OK);
    /* amplitudes 1, 0.1, 0.01, 0  ->  0 dB, -20 dB, -40 dB, -inf */
    float iq[8] = {1, 0, 0, 0.1f, 0.01f, 0, 0, 0};
    unsigned char img[4] = {7, 7, 7, 7};
    CHECK(usbeam_bmode_execute(plan, iq, img) == USBEAM_OK);
    CHECK(img[0] == 255);
    CHECK(img[1] == 127); /* 255 * 20/40 = 127.5, truncated */
    CHECK(img[2] <= 1);    /* -40 dB sits on the floor (float rounding may leave 0.x) */
    CHECK(img[3] == 0);
    CHECK(usbeam_bmode_execute(NULL, iq, img) == USBEAM_ERR_NULL_POINTER);
    usbeam_bmode_plan_destroy(plan);
    usbeam_bmode_plan_destroy(NULL);
}

static void test_device_query(void)
{
    int count = -1;
    CHECK(usbeam_cuda_device_count(&count) == USBEAM_OK);
    CHECK(count >= 0);
    usbeam_device_info info;
    CHECK(usbeam_cuda_device_info(count, &info) != USBEAM_OK); /* one past the last device */
}



int main(void)
{
    test_status_table();
    test_bmode();
    test_device_query();

    return check_summary();
}
