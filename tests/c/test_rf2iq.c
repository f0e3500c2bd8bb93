/*
 * test_rf2iq.c - plain-C tests of the rf2iq family: plan lifecycle, bad parameters rejected
 * with the parameter named in usbeam_last_error(), and small numeric checks with known
 * answers (Butterworth coefficients in closed form, identity taps, a tone at fc).
 * Built by `make ctest` and, under AddressSanitizer + UBSan, by `make asan`.
 */
#include "usbeam.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"

static usbeam_rf2iq_params good_params(void)
{
    usbeam_rf2iq_params p = {.n_lines = 3, .n_samples = 64, .input_dtype = USBEAM_DTYPE_FLOAT32,
                             .fs = 20e6, .fc = 5e6, .t0 = 0.0, .filter = USBEAM_RF2IQ_BUTTER,
                             .order = 5, .wn = 0.5, .decimation = 1};
    return p;
}

/* Create must fail with status and a message that names `word`; no plan is returned. */
static void expect_rejected(usbeam_rf2iq_params p, usbeam_status status, const char *word)
{
    usbeam_rf2iq_plan *plan = (usbeam_rf2iq_plan *)&plan; /* non-NULL: create must reset it */
    usbeam_clear_error();
    CHECK(usbeam_rf2iq_plan_create(&p, USBEAM_BACKEND_CPU, &plan) == status);
    CHECK(plan == NULL);
    if (!strstr(usbeam_last_error(), word)) {
        ++failed;
        fprintf(stderr, "message '%s' does not name '%s'\n", usbeam_last_error(), word);
    } else {
        ++passed;
    }
}

static void test_bad_parameters(void)
{
    usbeam_rf2iq_params p;
    p = good_params(); p.fs = -1;                 expect_rejected(p, USBEAM_ERR_INVALID_ARGUMENT, "fs");
    p = good_params(); p.fc = NAN;                expect_rejected(p, USBEAM_ERR_INVALID_ARGUMENT, "fc");
    p = good_params(); p.t0 = INFINITY;           expect_rejected(p, USBEAM_ERR_INVALID_ARGUMENT, "t0");
    p = good_params(); p.wn = 1.0;                expect_rejected(p, USBEAM_ERR_INVALID_ARGUMENT, "Wn");
    p = good_params(); p.order = 0;               expect_rejected(p, USBEAM_ERR_INVALID_ARGUMENT, "order");
    p = good_params(); p.decimation = 0;          expect_rejected(p, USBEAM_ERR_INVALID_ARGUMENT, "decimation");
    p = good_params(); p.n_samples = 18;          expect_rejected(p, USBEAM_ERR_INVALID_ARGUMENT, "n_samples");
    p = good_params(); p.n_lines = 0;             expect_rejected(p, USBEAM_ERR_INVALID_ARGUMENT, "n_lines");
    p = good_params(); p.input_dtype = USBEAM_DTYPE_UINT8; expect_rejected(p, USBEAM_ERR_INVALID_DTYPE, "dtype");
    p = good_params(); p.n_lines = SIZE_MAX / 2;  p.n_samples = 1000;
    expect_rejected(p, USBEAM_ERR_SIZE_OVERFLOW, "rf");
    p = good_params(); p.filter = USBEAM_RF2IQ_KAISER; p.cutoff = 10e6; p.transition_width = 1e6;
    p.attenuation = 60;                           expect_rejected(p, USBEAM_ERR_INVALID_ARGUMENT, "cutoff");
    p.cutoff = 2e6; p.transition_width = 1e-3;    expect_rejected(p, USBEAM_ERR_INVALID_ARGUMENT, "transition_width");
    p.transition_width = 1e6; p.attenuation = 3;  expect_rejected(p, USBEAM_ERR_INVALID_ARGUMENT, "attenuation");
    double taps[2] = {1.0, NAN};
    p = good_params(); p.filter = USBEAM_RF2IQ_TAPS; p.taps_re = taps; p.n_taps = 2;
    expect_rejected(p, USBEAM_ERR_INVALID_ARGUMENT, "taps");
    p.n_taps = 0;                                 expect_rejected(p, USBEAM_ERR_INVALID_ARGUMENT, "taps");
    p = good_params();
    usbeam_rf2iq_plan *plan = NULL;
    CHECK(usbeam_rf2iq_plan_create(&p, USBEAM_BACKEND_CUDA, &plan) == USBEAM_ERR_NO_BACKEND);
    CHECK(usbeam_rf2iq_plan_create(NULL, USBEAM_BACKEND_CPU, &plan) == USBEAM_ERR_NULL_POINTER);
}

static void test_butter_closed_form(void)
{
    /* order 2, Wn = 0.5: a = [1, 0, 3 - 2 sqrt 2], b = (1 - 1/sqrt 2) [1, 2, 1] */
    double b[3], a[3];
    CHECK(usbeam_butter_lowpass(2, 0.5, b, a) == USBEAM_OK);
    CHECK(fabs(a[0] - 1.0) < 1e-15 && fabs(a[1]) < 1e-15 && fabs(a[2] - (3.0 - 2.0 * sqrt(2.0))) < 1e-15);
    double b0 = 1.0 - 1.0 / sqrt(2.0);
    CHECK(fabs(b[0] - b0) < 1e-15 && fabs(b[1] - 2 * b0) < 1e-15 && fabs(b[2] - b0) < 1e-15);
    /* order 1, Wn = 0.5: b = [0.5, 0.5], a = [1, 0] */
    CHECK(usbeam_butter_lowpass(1, 0.5, b, a) == USBEAM_OK);
    CHECK(fabs(b[0] - 0.5) < 1e-15 && fabs(b[1] - 0.5) < 1e-15 && fabs(a[1]) < 1e-15);
    CHECK(usbeam_butter_lowpass(3, 1.5, b, a) == USBEAM_ERR_INVALID_ARGUMENT);
    CHECK(strstr(usbeam_last_error(), "Wn") != NULL);
}

static void test_identity_taps_and_decimation(void)
{
    /* fc = fs/4, t0 = 0: the phasor is 1, -j, -1, j; the single tap 1 leaves 2 x[n] */
    double tap = 1.0;
    int16_t rf[2][4] = {{1, 2, 3, 4}, {-5, 6, -7, 8}};
    float out[2][4][2];
    const float want[2][4][2] = {{{2, 0}, {0, -4}, {-6, 0}, {0, 8}}, {{-10, 0}, {0, -12}, {14, 0}, {0, 16}}};
    usbeam_rf2iq_params p = {.n_lines = 2, .n_samples = 4, .input_dtype = USBEAM_DTYPE_INT16, .fs = 4.0,
                             .fc = 1.0, .filter = USBEAM_RF2IQ_TAPS, .taps_re = &tap, .n_taps = 1,
                             .decimation = 1};
    usbeam_rf2iq_plan *plan = NULL;
    CHECK(usbeam_rf2iq_plan_create(&p, USBEAM_BACKEND_CPU, &plan) == USBEAM_OK);
    tap = 99.0; /* the plan keeps its own copy */
    CHECK(usbeam_rf2iq_n_out(plan) == 4);
    memset(out, 0xff, sizeof out);
    CHECK(usbeam_rf2iq_execute(plan, rf, out) == USBEAM_OK);
    int exact = 1;
    for (int l = 0; l < 2; ++l)
        for (int n = 0; n < 4; ++n)
            exact &= fabsf(out[l][n][0] - want[l][n][0]) < 1e-5f && fabsf(out[l][n][1] - want[l][n][1]) < 1e-5f;
    CHECK(exact);
    CHECK(usbeam_rf2iq_execute(plan, NULL, out) == USBEAM_ERR_NULL_POINTER);
    usbeam_rf2iq_plan_destroy(plan);

    tap = 1.0;
    p.decimation = 3; /* keeps samples 0 and 3 */
    CHECK(usbeam_rf2iq_plan_create(&p, USBEAM_BACKEND_CPU, &plan) == USBEAM_OK);
    CHECK(usbeam_rf2iq_n_out(plan) == 2);
    float small[2][2][2];
    CHECK(usbeam_rf2iq_execute(plan, rf, small) == USBEAM_OK);
    CHECK(fabsf(small[0][1][1] - 8.0f) < 1e-5f && fabsf(small[1][0][0] + 10.0f) < 1e-5f);
    usbeam_rf2iq_plan_destroy(plan);
    usbeam_rf2iq_plan_destroy(NULL);
}

static void test_tone_at_fc(void)
{
    /* cos(2 pi fc t + phi) demodulates to exp(j phi) in the interior, for butter and kaiser */
    enum { N = 400 };
    float rf[N];
    float iq[N][2];
    const double fs = 40e6, fc = 5e6, t0 = 1.3e-6, phi = 0.7;
    for (int n = 0; n < N; ++n) rf[n] = (float)cos(2.0 * 3.14159265358979323846 * fc * (t0 + n / fs) + phi);
    for (int kind = 0; kind < 2; ++kind) {
        usbeam_rf2iq_params p = {.n_lines = 1, .n_samples = N, .input_dtype = USBEAM_DTYPE_FLOAT32, .fs = fs,
                                 .fc = fc, .t0 = t0, .order = 5, .wn = 0.25, .cutoff = 5e6,
                                 .transition_width = 2.5e6, .attenuation = 60, .decimation = 1};
        p.filter = kind == 0 ? USBEAM_RF2IQ_BUTTER : USBEAM_RF2IQ_KAISER;
        usbeam_rf2iq_plan *plan = NULL;
        CHECK(usbeam_rf2iq_plan_create(&p, USBEAM_BACKEND_CPU, &plan) == USBEAM_OK);
        CHECK(usbeam_rf2iq_execute(plan, rf, iq) == USBEAM_OK);
        double worst = 0.0;
        for (int n = N / 4; n < 3 * N / 4; ++n)
            worst = fmax(worst, hypot(iq[n][0] - cos(phi), iq[n][1] - sin(phi)));
        CHECK(worst < 3e-3);
        usbeam_rf2iq_plan_destroy(plan);
    }
}

int main(void)
{
    test_bad_parameters();
    test_butter_closed_form();
    test_identity_taps_and_decimation();
    test_tone_at_fc();
    return check_summary();
}
