/*
 * test_das.c - plain-C tests of the delay-and-sum family: plan lifecycle, bad parameters
 * rejected with a message naming them, a tiny numeric case checked by hand (one element,
 * a whole-sample and a half-sample delay), table and per-call delays agreeing, the
 * automatic f-number of PyMUST, and usbeam_math.h's pieces.  Prints "N passed, N failed".
 */
#include "usbeam.h"
#include "common/usbeam_math.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"

#define FS 20e6
#define C_SOUND 1540.0

/* One element at the origin; a synthetic-aperture transmit; one on-axis point whose
 * two-way delay is `index` samples: tau = 2 z / c = index / fs. */
static usbeam_das_params one_element(double *element, double *point, usbeam_transmit *tx, double index)
{
    memset(element, 0, 3 * sizeof(double));
    point[0] = point[1] = 0.0;
    point[2] = index / FS * C_SOUND / 2.0;
    memset(tx, 0, sizeof *tx);
    tx->kind = USBEAM_TRANSMIT_SYNTHETIC;
    usbeam_das_params p = {0};
    p.n_elements = 1;
    p.element_positions = element;
    p.n_transmits = 1;
    p.transmits = tx;
    p.n_points = 1;
    p.points = point;
    p.n_frames = 2;
    p.n_samples = 16;
    p.fs = FS;
    p.fc = 5e6;
    p.c = C_SOUND;
    p.t0 = 0.0;
    p.f_number = 0.0;
    p.window = USBEAM_DAS_RECT;
    p.interpolation = USBEAM_DAS_LINEAR;
    p.input_dtype = USBEAM_DTYPE_FLOAT32;
    return p;
}

static void test_tiny_numeric(void)
{
    double element[3], point[3];
    usbeam_transmit tx;
    float rf[2 * 16];
    for (int k = 0; k < 32; ++k) rf[k] = (float)(k * k % 7) - 3.0f;  /* frame 1 = rf + 16 */
    float out[2] = {-99.0f, -99.0f};

    usbeam_das_params p = one_element(element, point, &tx, 5.0);
    usbeam_das_plan *plan = NULL;
    CHECK(usbeam_das_plan_create(&p, USBEAM_BACKEND_CPU, &plan) == USBEAM_OK);
    CHECK(usbeam_das_table_bytes(plan) > 0);
    CHECK(usbeam_das_execute(plan, rf, out) == USBEAM_OK);
    CHECK(fabsf(out[0] - rf[5]) < 1e-5f && fabsf(out[1] - rf[16 + 5]) < 1e-5f);
    /* a smaller batch on the same plan: frame 1 alone */
    out[0] = out[1] = -99.0f;
    CHECK(usbeam_das_execute_frames(plan, 1, rf + 16, out) == USBEAM_OK);
    CHECK(fabsf(out[0] - rf[16 + 5]) < 1e-5f && out[1] == -99.0f);
    CHECK(usbeam_das_execute_frames(plan, 3, rf, out) == USBEAM_ERR_INVALID_SHAPE);
    CHECK(strstr(usbeam_last_error(), "n_frames") != NULL);
    CHECK(usbeam_das_execute_frames(plan, 0, rf, out) == USBEAM_ERR_INVALID_SHAPE);
    usbeam_das_plan_destroy(plan);

    p = one_element(element, point, &tx, 6.5);
    p.max_table_bytes = 1; /* recompute the delays in execute: same answer */
    CHECK(usbeam_das_plan_create(&p, USBEAM_BACKEND_CPU, &plan) == USBEAM_OK);
    CHECK(usbeam_das_table_bytes(plan) == 0);
    CHECK(usbeam_das_execute(plan, rf, out) == USBEAM_OK);
    CHECK(fabsf(out[0] - 0.5f * (rf[6] + rf[7])) < 1e-5f);
    CHECK(fabsf(out[1] - 0.5f * (rf[22] + rf[23])) < 1e-5f);
    usbeam_das_plan_destroy(plan);

    /* IQ: the sample times exp(+j 2 pi fc tau) */
    p = one_element(element, point, &tx, 5.0);
    p.input_dtype = USBEAM_DTYPE_COMPLEX64;
    p.interpolation = USBEAM_DAS_NEAREST;
    float iq[2 * 2 * 16], iq_out[4];
    for (int k = 0; k < 64; ++k) iq[k] = (float)((k * 5) % 11) - 5.0f;
    CHECK(usbeam_das_plan_create(&p, USBEAM_BACKEND_CPU, &plan) == USBEAM_OK);
    CHECK(usbeam_das_execute(plan, iq, iq_out) == USBEAM_OK);
    double phase = 2.0 * USBEAM_PI * 5e6 * 5.0 / FS;
    double re = iq[10] * cos(phase) - iq[11] * sin(phase), im = iq[10] * sin(phase) + iq[11] * cos(phase);
    CHECK(fabs(iq_out[0] - re) < 1e-5 && fabs(iq_out[1] - im) < 1e-5);
    usbeam_das_plan_destroy(plan);
}

static void test_bad_parameters(void)
{
    double element[3], point[3];
    usbeam_transmit tx;
    usbeam_das_plan *plan = (usbeam_das_plan *)&plan; /* must be reset to NULL on failure */
    usbeam_das_params good = one_element(element, point, &tx, 5.0), p;

    CHECK(usbeam_das_plan_create(NULL, USBEAM_BACKEND_CPU, &plan) == USBEAM_ERR_NULL_POINTER);
    p = good, p.fs = -1;
    CHECK(usbeam_das_plan_create(&p, USBEAM_BACKEND_CPU, &plan) == USBEAM_ERR_INVALID_ARGUMENT);
    CHECK(plan == NULL && strstr(usbeam_last_error(), "fs") != NULL);
    p = good, p.c = NAN;
    CHECK(usbeam_das_plan_create(&p, USBEAM_BACKEND_CPU, &plan) == USBEAM_ERR_INVALID_ARGUMENT);
    CHECK(strstr(usbeam_last_error(), "c ") != NULL || strstr(usbeam_last_error(), "c must") != NULL);
    p = good, p.t0 = INFINITY;
    CHECK(usbeam_das_plan_create(&p, USBEAM_BACKEND_CPU, &plan) == USBEAM_ERR_INVALID_ARGUMENT);
    CHECK(strstr(usbeam_last_error(), "t0") != NULL);
    p = good, p.f_number = -0.5;
    CHECK(usbeam_das_plan_create(&p, USBEAM_BACKEND_CPU, &plan) == USBEAM_ERR_INVALID_ARGUMENT);
    CHECK(strstr(usbeam_last_error(), "f_number") != NULL);
    p = good, p.n_points = 0;
    CHECK(usbeam_das_plan_create(&p, USBEAM_BACKEND_CPU, &plan) == USBEAM_ERR_INVALID_ARGUMENT);
    CHECK(strstr(usbeam_last_error(), "points") != NULL);
    p = good, p.n_samples = 0;
    CHECK(usbeam_das_plan_create(&p, USBEAM_BACKEND_CPU, &plan) == USBEAM_ERR_INVALID_ARGUMENT);
    p = good, p.input_dtype = USBEAM_DTYPE_FLOAT64;
    CHECK(usbeam_das_plan_create(&p, USBEAM_BACKEND_CPU, &plan) == USBEAM_ERR_INVALID_DTYPE);
    p = good, p.input_dtype = USBEAM_DTYPE_COMPLEX64, p.fc = 0.0;
    CHECK(usbeam_das_plan_create(&p, USBEAM_BACKEND_CPU, &plan) == USBEAM_ERR_INVALID_ARGUMENT);
    CHECK(strstr(usbeam_last_error(), "fc") != NULL);
    p = good, p.tukey_alpha = 1.5;
    CHECK(usbeam_das_plan_create(&p, USBEAM_BACKEND_CPU, &plan) == USBEAM_ERR_INVALID_ARGUMENT);
    p = good, p.interpolation = (usbeam_das_interpolation)7;
    CHECK(usbeam_das_plan_create(&p, USBEAM_BACKEND_CPU, &plan) == USBEAM_ERR_INVALID_ARGUMENT);
    CHECK(strstr(usbeam_last_error(), "interpolation") != NULL);
    p = good, point[1] = NAN;
    CHECK(usbeam_das_plan_create(&p, USBEAM_BACKEND_CPU, &plan) == USBEAM_ERR_INVALID_ARGUMENT);
    CHECK(strstr(usbeam_last_error(), "points") != NULL);
    point[1] = 0.0;
    tx.element = 1; /* out of range for one element */
    CHECK(usbeam_das_plan_create(&good, USBEAM_BACKEND_CPU, &plan) == USBEAM_ERR_INVALID_ARGUMENT);
    CHECK(strstr(usbeam_last_error(), "element") != NULL);
    tx.element = 0;
    tx.kind = USBEAM_TRANSMIT_PLANE_WAVE, tx.angle = 2.0;
    CHECK(usbeam_das_plan_create(&good, USBEAM_BACKEND_CPU, &plan) == USBEAM_ERR_INVALID_ARGUMENT);
    CHECK(strstr(usbeam_last_error(), "angle") != NULL);
    tx.kind = USBEAM_TRANSMIT_SOURCES, tx.n_sources = 1, tx.sources = NULL;
    CHECK(usbeam_das_plan_create(&good, USBEAM_BACKEND_CPU, &plan) == USBEAM_ERR_NULL_POINTER);
    tx.kind = USBEAM_TRANSMIT_SYNTHETIC;
    CHECK(usbeam_das_plan_create(&good, USBEAM_BACKEND_CUDA, &plan) == USBEAM_ERR_NO_BACKEND);

    p = good, p.n_frames = (size_t)1 << 62; /* sizes that overflow must fail cleanly */
    CHECK(usbeam_das_plan_create(&p, USBEAM_BACKEND_CPU, &plan) != USBEAM_OK);

    CHECK(usbeam_das_plan_create(&good, USBEAM_BACKEND_CPU, &plan) == USBEAM_OK);
    float buffer[64] = {0};
    CHECK(usbeam_das_execute(plan, NULL, buffer) == USBEAM_ERR_NULL_POINTER);
    CHECK(usbeam_das_execute(NULL, buffer, buffer) == USBEAM_ERR_NULL_POINTER);
    usbeam_das_plan_destroy(plan);
    usbeam_das_plan_destroy(NULL);
}

static void test_auto_f_number(void)
{
    double f = 0;
    CHECK(usbeam_das_auto_f_number(0.262e-3, 5e6, 0.15, 1480.0, &f) == USBEAM_OK);
    CHECK(fabs(f - 1.1248487475247932) < 1e-12);
    CHECK(usbeam_das_auto_f_number(-1, 5e6, 0.15, 1480.0, &f) == USBEAM_ERR_INVALID_ARGUMENT);
    CHECK(strstr(usbeam_last_error(), "width") != NULL);
    CHECK(usbeam_das_auto_f_number(0.262e-3, 5e6, 2.5, 1480.0, &f) == USBEAM_ERR_INVALID_ARGUMENT);
    CHECK(strstr(usbeam_last_error(), "bandwidth") != NULL);
}

static void test_math_header(void)
{
    int first;
    float w[USBEAM_INTERP_MAX_TAPS];
    CHECK(usbeam_interp_weights(USBEAM_INTERP_NEAREST, 2.5, 10, &first, w) && first == 2);  /* ties to even */
    CHECK(usbeam_interp_weights(USBEAM_INTERP_NEAREST, 3.5, 10, &first, w) && first == 4);
    CHECK(!usbeam_interp_weights(USBEAM_INTERP_NEAREST, 9.01, 10, &first, w));
    CHECK(usbeam_interp_weights(USBEAM_INTERP_LINEAR, 8.0, 10, &first, w) && first == 8 && w[0] == 1.0f);
    CHECK(!usbeam_interp_weights(USBEAM_INTERP_LINEAR, 8.01, 10, &first, w));
    CHECK(!usbeam_interp_weights(USBEAM_INTERP_LINEAR, NAN, 10, &first, w));
    CHECK(usbeam_interp_weights(USBEAM_INTERP_CUBIC, 1.0, 10, &first, w) && first == 0 && w[1] == 1.0f);
    CHECK(!usbeam_interp_weights(USBEAM_INTERP_CUBIC, 0.99, 10, &first, w));
    CHECK(usbeam_interp_weights_f(USBEAM_INTERP_CUBIC, 4.5f, 10, &first, w) && first == 3);
    CHECK(fabsf(w[0] + w[1] + w[2] + w[3] - 1.0f) < 1e-6f && fabsf(w[0] + 0.0625f) < 1e-7f);
    usbeam_cf32 x[4] = {{1, 0}, {3, -2}, {5, 4}, {7, 0}}, v;
    CHECK(usbeam_interp_complex(USBEAM_INTERP_LINEAR, x, 4, 1.25, &v) && fabsf(v.re - 3.5f) < 1e-6f && fabsf(v.im + 0.5f) < 1e-6f);
    CHECK(usbeam_window(USBEAM_WINDOW_HANN, 0.0, 0) == 1.0 && fabs(usbeam_window(USBEAM_WINDOW_HANN, 1.0, 0)) < 1e-15);
    CHECK(usbeam_window(USBEAM_WINDOW_TUKEY, 0.4, 0.5) == 1.0 && fabs(usbeam_window(USBEAM_WINDOW_TUKEY, 0.75, 0.5) - 0.5) < 1e-12);
    CHECK(usbeam_window(USBEAM_WINDOW_RECT, 1.01, 0) == 0.0);
    double xe[5] = {-2, -1, 0, 1, 2};
    int lo, hi;
    CHECK(usbeam_aperture_range(xe, 5, 0.5, 1.0, &lo, &hi) == 2 && lo == 2 && hi == 3);
    CHECK(usbeam_aperture_range(xe, 5, 0.5, 0.1, &lo, &hi) == 0);
    CHECK(usbeam_aperture_range(xe, 5, 1.0, 1.0, &lo, &hi) == 3 && lo == 2 && hi == 4); /* edges included */
    usbeam_tx_model m = usbeam_tx_model_plane(-0.2, xe, 5);
    CHECK(fabs(usbeam_tx_path(&m, 0.0, 0.0, 1.0) - (-2.0 * sin(-0.2) + cos(-0.2))) < 1e-15);
    m = usbeam_tx_model_diverging(0.0, -1.0, xe, 5);
    CHECK(fabs(usbeam_tx_path(&m, 0.0, 0.0, 1.0) - 1.0) < 1e-15);
    m = usbeam_tx_model_focused(0.0, 2.0, xe, 5);
    CHECK(fabs(usbeam_tx_path(&m, 0.0, 0.0, 1.0) - (sqrt(8.0) - 1.0)) < 1e-15);
    double sources[6] = {-1, 1, 0, 0, 0.5, 0}; /* x row, z row, offset row */
    m = usbeam_tx_model_sources(sources, 2);
    CHECK(fabs(usbeam_tx_path(&m, 1.0, 0.0, 1.0) - 1.0) < 1e-15);
}

int main(void)
{
    test_tiny_numeric();
    test_bad_parameters();
    test_auto_f_number();
    test_math_header();
    return check_summary();
}
