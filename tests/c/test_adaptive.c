/*
 * test_adaptive.c - plain-C tests of the adaptive beamformers (beamform/adaptive.c): plan
 * lifecycle on every method, bad parameters rejected with a message naming them, and a case
 * checked by hand: four elements whose delayed samples are all 1 (a constant record), where CF
 * and GCF are 1 (output = the DAS sum 4), DMAS is the 6 pairwise products (6), p-DAS returns
 * (4 x 1)^p ... = 4^p, and MV with any subarray length returns 1 (weights summing to 1); the
 * same four elements on a convex arc (element normals, cone apertures) give the same values;
 * matrix arrays, elements out of order along x and apertures with a gap are refused.
 * Prints "N passed, N failed".
 */
#include "usbeam.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"

#define N_EL 4
#define N_SAMPLES 64

static double elements[3 * N_EL], normals[3 * N_EL], point[3] = {0.0, 0.0, 1e-3}; /* delays ~26 samples */
static usbeam_transmit tx;

static usbeam_adaptive_params params(usbeam_adaptive_method method)
{
    usbeam_adaptive_params a;
    memset(&a, 0, sizeof a);
    memset(elements, 0, sizeof elements);
    for (int e = 0; e < N_EL; ++e) elements[3 * e] = (e - 1.5) * 3e-4;
    memset(&tx, 0, sizeof tx);
    tx.kind = USBEAM_TRANSMIT_PLANE_WAVE;
    a.das.n_elements = N_EL;
    a.das.element_positions = elements;
    a.das.n_transmits = 1;
    a.das.transmits = &tx;
    a.das.n_points = 1;
    a.das.points = point;
    a.das.n_frames = 1;
    a.das.n_samples = N_SAMPLES;
    a.das.fs = 20e6;
    a.das.fc = 5e6;
    a.das.c = 1540.0;
    a.das.t0 = 0.0;
    a.das.f_number = 0.0;
    a.das.window = USBEAM_DAS_RECT;
    a.das.interpolation = USBEAM_DAS_LINEAR;
    a.das.input_dtype = USBEAM_DTYPE_FLOAT32;
    a.method = method;
    a.p = 2.0;
    a.gcf_m0 = 1;
    a.subarray_length = 2;
    a.diagonal_loading = 0.01;
    a.fdmas_low = 5e6;
    a.fdmas_high = 10e6;
    a.fdmas_half_taps = 4;
    return a;
}

static float run(usbeam_adaptive_params a)
{
    float in[N_EL * N_SAMPLES], out = -1.0f;
    for (int i = 0; i < N_EL * N_SAMPLES; ++i) in[i] = 1.0f;
    usbeam_adaptive_plan *plan = NULL;
    if (usbeam_adaptive_plan_create(&a, USBEAM_BACKEND_CPU, &plan) != USBEAM_OK) return NAN;
    const usbeam_status st = usbeam_adaptive_execute(plan, 1, in, &out);
    usbeam_adaptive_plan_destroy(plan);
    return st == USBEAM_OK ? out : NAN;
}

static int rejected(usbeam_adaptive_params a, const char *name)
{
    usbeam_adaptive_plan *plan = NULL;
    const usbeam_status st = usbeam_adaptive_plan_create(&a, USBEAM_BACKEND_CPU, &plan);
    usbeam_adaptive_plan_destroy(plan);
    return st == USBEAM_ERR_INVALID_ARGUMENT && plan == NULL && strstr(usbeam_last_error(), name) != NULL;
}

int main(void)
{
    CHECK(fabsf(run(params(USBEAM_ADAPTIVE_CF)) - 4.0f) < 1e-5f);
    CHECK(fabsf(run(params(USBEAM_ADAPTIVE_GCF)) - 4.0f) < 1e-5f);
    CHECK(fabsf(run(params(USBEAM_ADAPTIVE_DMAS)) - 6.0f) < 1e-5f);
    CHECK(fabsf(run(params(USBEAM_ADAPTIVE_PDAS)) - 16.0f) < 1e-4f);
    CHECK(fabsf(run(params(USBEAM_ADAPTIVE_MV)) - 1.0f) < 1e-5f);
    usbeam_adaptive_params a = params(USBEAM_ADAPTIVE_MV);
    a.subarray_length = 4;
    CHECK(fabsf(run(a) - 1.0f) < 1e-5f);
    a.temporal_averaging = 3;
    CHECK(fabsf(run(a) - 1.0f) < 1e-5f);
    /* F-DMAS of a constant: the DMAS output is a constant (6) at every offset, and the band-pass
     * removes DC: |output| far below 6 */
    CHECK(fabsf(run(params(USBEAM_ADAPTIVE_FDMAS))) < 0.5f);

    a = params(USBEAM_ADAPTIVE_MV);
    a.subarray_length = N_EL + 1;
    CHECK(rejected(a, "subarray_length"));
    a.subarray_length = 0;
    CHECK(rejected(a, "subarray_length"));
    a = params(USBEAM_ADAPTIVE_MV);
    a.diagonal_loading = -1.0;
    CHECK(rejected(a, "diagonal_loading"));
    a = params(USBEAM_ADAPTIVE_PDAS);
    a.p = 0.5;
    CHECK(rejected(a, "p must"));
    a = params(USBEAM_ADAPTIVE_GCF);
    a.gcf_m0 = 2;
    CHECK(rejected(a, "gcf_m0"));
    a = params(USBEAM_ADAPTIVE_FDMAS);
    a.fdmas_high = 1e6;
    CHECK(rejected(a, "fdmas_low/fdmas_high"));
    a = params(USBEAM_ADAPTIVE_FDMAS);
    a.das.fs = 15e6; /* 2 fc above fs/2 on RF */
    CHECK(rejected(a, "fs >= 4 fc"));
    a = params(USBEAM_ADAPTIVE_CF);
    a.das.fs = -1.0; /* DAS's own validation */
    CHECK(rejected(a, "fs"));
    a = params(USBEAM_ADAPTIVE_CF);
    a.method = (usbeam_adaptive_method)42;
    CHECK(rejected(a, "method"));

    /* convex: the four elements on an arc of radius 10 mm, normals radial; f-number 0.8 puts the
     * point in every element's cone, so the values are those of the linear case */
    const double radius = 10e-3, outer = cos(asin(1.5 * 3e-4 / radius));
    a = params(USBEAM_ADAPTIVE_CF);
    for (int e = 0; e < N_EL; ++e) {
        const double theta = asin(elements[3 * e] / radius);
        elements[3 * e + 2] = radius * (cos(theta) - outer);
        normals[3 * e] = sin(theta), normals[3 * e + 1] = 0.0, normals[3 * e + 2] = cos(theta);
    }
    a.das.element_normals = normals;
    a.das.f_number = 0.8;
    CHECK(fabsf(run(a) - 4.0f) < 1e-5f);
    a.method = USBEAM_ADAPTIVE_DMAS;
    CHECK(fabsf(run(a) - 6.0f) < 1e-5f);
    a.method = USBEAM_ADAPTIVE_MV;
    CHECK(fabsf(run(a) - 1.0f) < 1e-5f);
    /* ... a gap: element 1 turned 1.2 rad sideways no longer sees the point, its neighbours do */
    normals[3] = sin(1.2), normals[5] = cos(1.2);
    a.method = USBEAM_ADAPTIVE_CF;
    CHECK(rejected(a, "not a contiguous run of elements"));
    /* ... a matrix array's surface, elements out of order along x */
    a = params(USBEAM_ADAPTIVE_CF);
    a.das.surface = 1;
    CHECK(rejected(a, "surface"));
    a = params(USBEAM_ADAPTIVE_MV);
    elements[3] = 0.3e-3; /* element 1 to the right of element 2 */
    CHECK(rejected(a, "in order along the array"));

    /* NaN input refused, out untouched */
    a = params(USBEAM_ADAPTIVE_DMAS);
    usbeam_adaptive_plan *plan = NULL;
    CHECK(usbeam_adaptive_plan_create(&a, USBEAM_BACKEND_CPU, &plan) == USBEAM_OK);
    float in[N_EL * N_SAMPLES], out = 7.0f;
    for (int i = 0; i < N_EL * N_SAMPLES; ++i) in[i] = 1.0f;
    in[5] = NAN;
    CHECK(usbeam_adaptive_execute(plan, 1, in, &out) == USBEAM_ERR_INVALID_ARGUMENT && out == 7.0f);
    CHECK(usbeam_adaptive_execute(plan, 2, in, &out) == USBEAM_ERR_INVALID_SHAPE);
    usbeam_adaptive_plan_destroy(plan);
    usbeam_adaptive_plan_destroy(NULL);
    return check_summary();
}
