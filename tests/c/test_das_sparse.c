/*
 * test_das_sparse.c - plain-C tests of the sparse-matrix formulation of delay-and-sum
 * (csrc/beamform/das_sparse.c): a hand-checked case (one element, a whole-sample and a
 * half-sample delay: one and two non-zeros), the CSR view, the same image as the gather plan
 * on a small random case (transmits, f-number, Hann, cubic, IQ and int16), smaller batches,
 * non-finite input refused, bad parameters named, NULL accepted by destroy.
 * Prints "N passed, N failed".
 */
#include "usbeam.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

#define FS 20e6
#define C_SOUND 1540.0

static usbeam_das_params one_element(double *element, double *point, usbeam_transmit *tx, double index)
{
    memset(element, 0, 3 * sizeof(double));
    point[0] = point[1] = 0.0;
    point[2] = index / FS * C_SOUND / 2.0;
    memset(tx, 0, sizeof *tx);
    tx->kind = USBEAM_TRANSMIT_SYNTHETIC;
    usbeam_das_params p = {0};
    p.n_elements = 1, p.element_positions = element;
    p.n_transmits = 1, p.transmits = tx;
    p.n_points = 1, p.points = point;
    p.n_frames = 2, p.n_samples = 16;
    p.fs = FS, p.fc = 5e6, p.c = C_SOUND;
    p.interpolation = USBEAM_DAS_LINEAR;
    p.input_dtype = USBEAM_DTYPE_FLOAT32;
    return p;
}

static void test_hand_checked(void)
{
    double element[3], point[3];
    usbeam_transmit tx;
    float rf[32];
    for (int k = 0; k < 32; ++k) rf[k] = (float)(k * k % 7) - 3.0f;
    float out[2] = {-99.0f, -99.0f};
    usbeam_das_params p = one_element(element, point, &tx, 5.0);
    usbeam_das_sparse_plan *plan = NULL;
    CHECK(usbeam_das_sparse_plan_create(&p, USBEAM_BACKEND_CPU, &plan) == USBEAM_OK);
    usbeam_das_sparse_view v;
    usbeam_das_sparse_csr(plan, &v);
    /* a whole-sample delay: the linear taps are (1, 0); the zero is left out */
    CHECK(v.n_rows == 1 && v.n_columns == 16 && v.nnz == 1 && v.is_complex == 0);
    CHECK(v.row_offsets[0] == 0 && v.row_offsets[1] == 1 && v.columns[0] == 5 && fabsf(v.values[0] - 1.0f) < 1e-6f);
    CHECK(usbeam_das_sparse_bytes(plan) == 2 * sizeof(int32_t) + 1 * (sizeof(int32_t) + sizeof(float)));
    CHECK(usbeam_das_sparse_execute_frames(plan, 2, rf, out) == USBEAM_OK);
    CHECK(fabsf(out[0] - rf[5]) < 1e-5f && fabsf(out[1] - rf[21]) < 1e-5f);
    out[0] = out[1] = -99.0f;
    CHECK(usbeam_das_sparse_execute_frames(plan, 1, rf + 16, out) == USBEAM_OK);
    CHECK(fabsf(out[0] - rf[21]) < 1e-5f && out[1] == -99.0f);
    CHECK(usbeam_das_sparse_execute_frames(plan, 3, rf, out) == USBEAM_ERR_INVALID_SHAPE);
    CHECK(strstr(usbeam_last_error(), "n_frames") != NULL);
    rf[9] = NAN;
    CHECK(usbeam_das_sparse_execute_frames(plan, 2, rf, out) == USBEAM_ERR_INVALID_ARGUMENT);
    CHECK(strstr(usbeam_last_error(), "NaN") != NULL);
    rf[9] = 1.0f;
    usbeam_das_sparse_plan_destroy(plan);

    p = one_element(element, point, &tx, 6.5); /* half a sample: the mean of two */
    CHECK(usbeam_das_sparse_plan_create(&p, USBEAM_BACKEND_CPU, &plan) == USBEAM_OK);
    usbeam_das_sparse_csr(plan, &v);
    CHECK(v.nnz == 2 && v.columns[0] == 6 && v.columns[1] == 7);
    CHECK(usbeam_das_sparse_execute_frames(plan, 2, rf, out) == USBEAM_OK);
    CHECK(fabsf(out[0] - 0.5f * (rf[6] + rf[7])) < 1e-5f && fabsf(out[1] - 0.5f * (rf[22] + rf[23])) < 1e-5f);
    usbeam_das_sparse_plan_destroy(plan);
    usbeam_das_sparse_plan_destroy(NULL);
}

static double uniform(unsigned *state)
{
    *state = *state * 1664525u + 1013904223u;
    return (double)(*state >> 8) / (double)(1u << 24);
}

/* gather and sparse plans of the same parameters: relative L2 difference of their outputs */
static double gather_vs_sparse(usbeam_dtype dtype, usbeam_das_interpolation interp, unsigned seed)
{
    enum { E = 12, P = 30, S = 200, F = 19, T = 3 };
    double elements[3 * E], points[3 * P];
    for (int e = 0; e < E; ++e) elements[3 * e] = (e - (E - 1) / 2.0) * 3e-4, elements[3 * e + 1] = elements[3 * e + 2] = 0;
    for (int i = 0; i < P; ++i) {
        points[3 * i] = (uniform(&seed) - 0.5) * 3e-3;
        points[3 * i + 1] = 0;
        points[3 * i + 2] = 2e-3 + uniform(&seed) * 6e-3;
    }
    usbeam_transmit tx[T] = {{0}};
    tx[0].kind = USBEAM_TRANSMIT_PLANE_WAVE, tx[0].angle = 0.1;
    tx[1].kind = USBEAM_TRANSMIT_DIVERGING, tx[1].x = 1e-3, tx[1].z = -8e-3;
    tx[2].kind = USBEAM_TRANSMIT_FOCUSED, tx[2].x = 0.0, tx[2].z = 5e-3;
    usbeam_das_params p = {0};
    p.n_elements = E, p.element_positions = elements;
    p.n_transmits = T, p.transmits = tx;
    p.n_points = P, p.points = points;
    p.n_frames = F, p.n_samples = S;
    p.fs = FS, p.fc = 5e6, p.c = C_SOUND, p.t0 = 1e-6, p.f_number = 1.3;
    p.window = USBEAM_DAS_HANN, p.interpolation = interp, p.input_dtype = dtype;
    const int complex_data = dtype == USBEAM_DTYPE_COMPLEX64;
    const size_t n_in = (size_t)F * T * E * S * (complex_data ? 2 : 1), n_out = (size_t)F * P * (complex_data ? 2 : 1);
    void *in = malloc(n_in * (dtype == USBEAM_DTYPE_INT16 ? sizeof(int16_t) : sizeof(float)));
    float *a = malloc(n_out * sizeof(float)), *b = malloc(n_out * sizeof(float));
    for (size_t k = 0; k < n_in; ++k) {
        if (dtype == USBEAM_DTYPE_INT16) ((int16_t *)in)[k] = (int16_t)(uniform(&seed) * 6000 - 3000);
        else ((float *)in)[k] = (float)(uniform(&seed) * 2 - 1);
    }
    usbeam_das_plan *gather = NULL;
    usbeam_das_sparse_plan *sparse = NULL;
    double num = 0, den = 0;
    if (usbeam_das_plan_create(&p, USBEAM_BACKEND_CPU, &gather) == USBEAM_OK &&
        usbeam_das_sparse_plan_create(&p, USBEAM_BACKEND_CPU, &sparse) == USBEAM_OK &&
        usbeam_das_execute(gather, in, a) == USBEAM_OK && usbeam_das_sparse_execute_frames(sparse, F, in, b) == USBEAM_OK) {
        for (size_t k = 0; k < n_out; ++k) num += (double)(a[k] - b[k]) * (a[k] - b[k]), den += (double)a[k] * a[k];
    } else {
        num = den = 1; /* a failure: relative difference 1 */
    }
    usbeam_das_plan_destroy(gather);
    usbeam_das_sparse_plan_destroy(sparse);
    free(in), free(a), free(b);
    return den > 0 ? sqrt(num / den) : 1.0;
}

static void test_same_image_as_gather(void)
{
    CHECK(gather_vs_sparse(USBEAM_DTYPE_COMPLEX64, USBEAM_DAS_CUBIC, 1) < 1e-5);
    CHECK(gather_vs_sparse(USBEAM_DTYPE_COMPLEX64, USBEAM_DAS_LINEAR, 2) < 1e-5);
    CHECK(gather_vs_sparse(USBEAM_DTYPE_INT16, USBEAM_DAS_LINEAR, 3) < 1e-5);
    CHECK(gather_vs_sparse(USBEAM_DTYPE_FLOAT32, USBEAM_DAS_NEAREST, 4) < 1e-5);
}

static void test_bad_parameters(void)
{
    double element[3], point[3];
    usbeam_transmit tx;
    usbeam_das_params p = one_element(element, point, &tx, 5.0);
    usbeam_das_sparse_plan *plan = (usbeam_das_sparse_plan *)&p; /* must be cleared on failure */
    p.fs = -1.0;
    CHECK(usbeam_das_sparse_plan_create(&p, USBEAM_BACKEND_CPU, &plan) == USBEAM_ERR_INVALID_ARGUMENT);
    CHECK(plan == NULL && strstr(usbeam_last_error(), "fs") != NULL);
    p = one_element(element, point, &tx, 5.0);
    CHECK(usbeam_das_sparse_plan_create(NULL, USBEAM_BACKEND_CPU, &plan) == USBEAM_ERR_NULL_POINTER);
    CHECK(usbeam_das_sparse_plan_create(&p, (usbeam_backend)7, &plan) == USBEAM_ERR_INVALID_ARGUMENT);
    CHECK(usbeam_das_sparse_execute_frames(NULL, 1, element, element) == USBEAM_ERR_NULL_POINTER);
    CHECK(usbeam_das_sparse_bytes(NULL) == 0);
}

int main(void)
{
    test_hand_checked();
    test_same_image_as_gather();
    test_bad_parameters();
    return check_summary();
}
