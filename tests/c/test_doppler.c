/*
 * test_doppler.c - plain-C tests of the Doppler family: plan lifecycle, parameter checks
 * that name the parameter, and analytic cases (a constant ensemble is removed by every
 * clutter filter; a pure tone gives the Kasai velocity c*PRF*w/(4*pi*fc); the IIR stream in
 * blocks equals the whole record; power and display on hand-computed values).  Built by
 * `make ctest` and `make asan`.  Prints "N passed, N failed".
 */
#include "usbeam.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

#define NF 16
#define NP 12

static void fill_tone(float *iq, size_t n_frames, size_t n_pixels, double w, double amp, double dc)
{
    for (size_t t = 0; t < n_frames; ++t)
        for (size_t p = 0; p < n_pixels; ++p) {
            double phase = w * (double)t + 0.3 * (double)p;
            iq[2 * (t * n_pixels + p)] = (float)(amp * cos(phase) + dc * (1.0 + 0.1 * (double)p));
            iq[2 * (t * n_pixels + p) + 1] = (float)(amp * sin(phase) - 0.5 * dc);
        }
}

static void test_clutter_bad_parameters(void)
{
    usbeam_clutter_plan *plan = NULL;
    usbeam_clutter_params p = {.n_frames = 4, .n_pixels = 10, .method = USBEAM_CLUTTER_POLY, .poly_order = 3};
    CHECK(usbeam_clutter_plan_create(&p, USBEAM_BACKEND_CPU, &plan) == USBEAM_ERR_INVALID_ARGUMENT);
    CHECK(plan == NULL && strstr(usbeam_last_error(), "poly_order") != NULL);
    p = (usbeam_clutter_params){.n_frames = 8, .n_pixels = 10, .method = USBEAM_CLUTTER_SVD, .svd_low = 4,
                                .svd_high = 2};
    CHECK(usbeam_clutter_plan_create(&p, USBEAM_BACKEND_CPU, &plan) == USBEAM_ERR_INVALID_ARGUMENT);
    CHECK(strstr(usbeam_last_error(), "svd_low") != NULL);
    p.svd_low = 0;
    p.svd_high = 8;
    CHECK(usbeam_clutter_plan_create(&p, USBEAM_BACKEND_CPU, &plan) == USBEAM_ERR_INVALID_ARGUMENT);
    CHECK(strstr(usbeam_last_error(), "svd_high") != NULL);
    p = (usbeam_clutter_params){.n_frames = 8, .n_pixels = 10, .method = USBEAM_CLUTTER_IIR, .iir_order = 4,
                                .iir_cutoff = NAN};
    CHECK(usbeam_clutter_plan_create(&p, USBEAM_BACKEND_CPU, &plan) == USBEAM_ERR_INVALID_ARGUMENT);
    CHECK(strstr(usbeam_last_error(), "iir_cutoff") != NULL);
    p.iir_cutoff = 0.1;
    p.iir_init = USBEAM_IIR_INIT_PROJECTION;
    p.iir_init_frames = 4;
    CHECK(usbeam_clutter_plan_create(&p, USBEAM_BACKEND_CPU, &plan) == USBEAM_ERR_INVALID_ARGUMENT);
    CHECK(strstr(usbeam_last_error(), "iir_init_frames") != NULL);
    p.method = (usbeam_clutter_method)42;
    CHECK(usbeam_clutter_plan_create(&p, USBEAM_BACKEND_CPU, &plan) == USBEAM_ERR_INVALID_ARGUMENT);
    /* algorithm GEMM is cuBLAS: the CPU backend refuses it, and it exists for the projections only */
    p = (usbeam_clutter_params){.n_frames = 8, .n_pixels = 10, .method = USBEAM_CLUTTER_POLY, .poly_order = 1,
                                .algorithm = USBEAM_CLUTTER_GEMM};
    CHECK(usbeam_clutter_plan_create(&p, USBEAM_BACKEND_CPU, &plan) == USBEAM_ERR_UNSUPPORTED);
    CHECK(plan == NULL && strstr(usbeam_last_error(), "gemm") != NULL);
    p.method = USBEAM_CLUTTER_SVD;
    CHECK(usbeam_clutter_plan_create(&p, USBEAM_BACKEND_CUDA, &plan) == USBEAM_ERR_INVALID_ARGUMENT);
    CHECK(plan == NULL && strstr(usbeam_last_error(), "gemm") != NULL);
    p = (usbeam_clutter_params){.n_frames = 8, .n_pixels = 10, .method = USBEAM_CLUTTER_MEAN,
                                .algorithm = (usbeam_clutter_algorithm)7};
    CHECK(usbeam_clutter_plan_create(&p, USBEAM_BACKEND_CPU, &plan) == USBEAM_ERR_INVALID_ARGUMENT);
    CHECK(strstr(usbeam_last_error(), "algorithm") != NULL);
    CHECK(usbeam_clutter_plan_create(NULL, USBEAM_BACKEND_CPU, &plan) == USBEAM_ERR_NULL_POINTER);
    usbeam_clutter_plan_destroy(NULL);
}

/* A constant (DC) ensemble is removed exactly by every method (IIR with projection init). */
static void test_clutter_removes_constant(void)
{
    static float iq[2 * NF * NP], out[2 * NF * NP];
    fill_tone(iq, NF, NP, 0.0, 0.0, 50.0);
    usbeam_clutter_params cases[] = {
        {.n_frames = NF, .n_pixels = NP, .method = USBEAM_CLUTTER_MEAN},
        {.n_frames = NF, .n_pixels = NP, .method = USBEAM_CLUTTER_POLY, .poly_order = 3},
        {.n_frames = NF, .n_pixels = NP, .method = USBEAM_CLUTTER_SVD, .svd_low = 1, .svd_high = -1},
        {.n_frames = NF, .n_pixels = NP, .method = USBEAM_CLUTTER_SVD, .svd_low = -1, .svd_high = -1,
         .svd_auto_frequency = 0.05},
        {.n_frames = NF, .n_pixels = NP, .method = USBEAM_CLUTTER_IIR, .iir_order = 4, .iir_cutoff = 0.1,
         .iir_init = USBEAM_IIR_INIT_PROJECTION},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c) {
        usbeam_clutter_plan *plan = NULL;
        CHECK(usbeam_clutter_plan_create(&cases[c], USBEAM_BACKEND_CPU, &plan) == USBEAM_OK);
        if (!plan) continue;
        for (size_t i = 0; i < 2 * NF * NP; ++i) out[i] = NAN;
        CHECK(usbeam_clutter_execute(plan, iq, out) == USBEAM_OK);
        double worst = 0.0;
        for (size_t i = 0; i < 2 * NF * NP; ++i) worst = fmax(worst, isnan(out[i]) ? INFINITY : fabs(out[i]));
        CHECK(worst < 1e-4); /* 50 in, float32 rounding out */
        if (cases[c].method == USBEAM_CLUTTER_SVD) {
            double sv[NF];
            int low = -2, high = -2;
            CHECK(usbeam_clutter_svd_info(plan, sv, &low, &high) == USBEAM_OK);
            /* rank one; the automatic cut may also drop null components, which hold nothing */
            CHECK(high == NF - 1 && (cases[c].svd_low < 0 ? low >= 1 : low == 1));
            CHECK(sv[0] > 100.0 && sv[1] < 1e-6 * sv[0]);
        }
        usbeam_clutter_plan_destroy(plan);
    }
}

static void test_iir_stream(void)
{
    enum { N = 32, BLOCK = 8 };
    static float iq[2 * N * NP], whole[2 * N * NP], blocks[2 * N * NP];
    fill_tone(iq, N, NP, 1.1, 1.0, 30.0);
    usbeam_clutter_params p = {.n_frames = N, .n_pixels = NP, .method = USBEAM_CLUTTER_IIR, .iir_order = 3,
                               .iir_cutoff = 0.07, .iir_init = USBEAM_IIR_INIT_PROJECTION, .iir_init_frames = BLOCK};
    usbeam_clutter_plan *a = NULL, *b = NULL;
    CHECK(usbeam_clutter_plan_create(&p, USBEAM_BACKEND_CPU, &a) == USBEAM_OK);
    p.n_frames = BLOCK;
    p.iir_init_frames = 0;
    CHECK(usbeam_clutter_plan_create(&p, USBEAM_BACKEND_CPU, &b) == USBEAM_OK);
    if (!a || !b) return;
    CHECK(usbeam_clutter_execute(a, iq, whole) == USBEAM_OK);
    for (int s = 0; s < N; s += BLOCK)
        CHECK(usbeam_clutter_execute(b, iq + 2 * s * NP, blocks + 2 * s * NP) == USBEAM_OK);
    double worst = 0.0;
    for (size_t i = 0; i < 2 * N * NP; ++i) worst = fmax(worst, fabs(whole[i] - blocks[i]));
    CHECK(worst < 1e-5);
    CHECK(usbeam_clutter_reset(b) == USBEAM_OK);
    usbeam_clutter_plan_destroy(a);
    usbeam_clutter_plan_destroy(b);
}

static void test_color(void)
{
    const double fc = 5e6, prf = 4e3, c = 1540.0, w = 0.9;
    static float iq[2 * NF * NP];
    float v[NP], var[NP], pw[NP];
    fill_tone(iq, NF, NP, w, 2.0, 0.0);
    usbeam_color_params p = {.n_frames = NF, .n_images = 1, .nz = 3, .nx = 4, .fc = fc, .prf = prf, .c = c,
                             .lag = 1, .window_z = 3, .window_x = 2, .window = USBEAM_WINDOW_HAMMING};
    usbeam_color_plan *plan = NULL;
    CHECK(usbeam_color_plan_create(&p, USBEAM_BACKEND_CPU, &plan) == USBEAM_OK);
    if (!plan) return;
    CHECK(usbeam_color_execute(plan, iq, v, var, pw) == USBEAM_OK);
    double want = c * prf * w / (4.0 * 3.14159265358979323846 * fc);
    int ok = 1;
    for (int i = 0; i < NP; ++i) ok &= fabs(v[i] - want) < 1e-6 * want && fabs(pw[i] - 4.0) < 1e-5;
    CHECK(ok);
    CHECK(usbeam_color_execute(plan, iq, v, NULL, NULL) == USBEAM_OK);
    CHECK(usbeam_color_execute(plan, NULL, v, NULL, NULL) == USBEAM_ERR_NULL_POINTER);
    usbeam_color_plan_destroy(plan);

    usbeam_color_params bad = p;
    bad.prf = 0.0;
    CHECK(usbeam_color_plan_create(&bad, USBEAM_BACKEND_CPU, &plan) == USBEAM_ERR_INVALID_ARGUMENT);
    CHECK(strstr(usbeam_last_error(), "prf") != NULL);
    bad = p;
    bad.lag = NF;
    CHECK(usbeam_color_plan_create(&bad, USBEAM_BACKEND_CPU, &plan) == USBEAM_ERR_INVALID_ARGUMENT);
    CHECK(strstr(usbeam_last_error(), "lag") != NULL);
    bad = p;
    bad.axial_correction = 1;
    CHECK(usbeam_color_plan_create(&bad, USBEAM_BACKEND_CPU, &plan) == USBEAM_ERR_INVALID_ARGUMENT);
    CHECK(strstr(usbeam_last_error(), "dz") != NULL);
    usbeam_color_plan_destroy(NULL);
}

static void test_power_and_display(void)
{
    float iq[2 * 2 * 3] = {3, 4, 0, 0, 1, 0, /* frame 0: |x|^2 = 25, 0, 1 */
                           0, 5, 0, 0, 0, 1}; /* frame 1: 25, 0, 1 */
    float out[3];
    usbeam_power_params p = {.n_frames = 2, .n_pixels = 3, .output_db = 1, .noise_floor = 0.25};
    usbeam_power_plan *plan = NULL;
    CHECK(usbeam_power_plan_create(&p, USBEAM_BACKEND_CPU, &plan) == USBEAM_OK);
    if (plan) {
        CHECK(usbeam_power_execute(plan, iq, out) == USBEAM_OK);
        CHECK(out[0] == 0.0f && fabs(out[1] + 20.0) < 1e-5 && fabs(out[2] + 10.0 * log10(25.0)) < 1e-5);
        usbeam_power_plan_destroy(plan);
    }
    p.noise_floor = -1;
    CHECK(usbeam_power_plan_create(&p, USBEAM_BACKEND_CPU, &plan) == USBEAM_ERR_INVALID_ARGUMENT);
    CHECK(strstr(usbeam_last_error(), "noise_floor") != NULL);

    float vel[9] = {0, 0, 0, 0, 9, 0, 0, 0.5f, 0}, pwr[9] = {1, 1, 1, 1, 1, 1, 1, 1, -1};
    float ov[9], op[9];
    uint8_t mask[9];
    usbeam_doppler_display_params d = {.n_images = 1, .nz = 3, .nx = 3, .median = 1, .persistence = 0.5,
                                       .power_threshold = 0.0, .velocity_threshold = 0.1};
    usbeam_doppler_display_plan *disp = NULL;
    CHECK(usbeam_doppler_display_plan_create(&d, USBEAM_BACKEND_CPU, &disp) == USBEAM_OK);
    if (disp) {
        CHECK(usbeam_doppler_display_execute(disp, vel, pwr, ov, op, mask) == USBEAM_OK);
        CHECK(ov[4] == 0.0f && mask[4] == 0); /* the median removes the isolated outlier */
        d.persistence = 1.0;
        usbeam_doppler_display_plan_destroy(disp);
    }
    CHECK(usbeam_doppler_display_plan_create(&d, USBEAM_BACKEND_CPU, &disp) == USBEAM_ERR_INVALID_ARGUMENT);
    CHECK(strstr(usbeam_last_error(), "persistence") != NULL);
}

int main(void)
{
    test_clutter_bad_parameters();
    test_clutter_removes_constant();
    test_iir_stream();
    test_color();
    test_power_and_display();
    return check_summary();
}
