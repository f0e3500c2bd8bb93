/*
 * test_rca.c - plain-C tests of the row-column family: plan validation names the bad
 * parameter (singular transform, sparse index out of range, acquisition count, angles),
 * and the FORCES and HERCULES delays read back through a ramp record match the paths
 * written out here from the papers' geometry.  Prints "N passed, N failed".
 */
#include "usbeam.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

enum { NC = 8, NR = 6, NS = 600 };
static const double PX = 0.3e-3, PY = 0.25e-3, FS = 20e6, C = 1540.0;

static usbeam_rca_params base_params(void)
{
    usbeam_rca_params p;
    memset(&p, 0, sizeof p);
    p.method = USBEAM_RCA_FORCES;
    p.n_columns = NC;
    p.n_rows = NR;
    p.pitch_x = PX;
    p.pitch_y = PY;
    for (int i = 0; i < 4; ++i) p.world_to_array[5 * i] = p.voxel_to_world[5 * i] = 1.0;
    p.n_frames = 1;
    p.n_acquisitions = NC;
    p.n_channels = NC;
    p.n_samples = NS;
    p.fs = FS;
    p.c = C;
    p.interpolation = 1; /* linear */
    p.n_i = p.n_j = p.n_k = 1;
    p.window = 1;
    return p;
}

static void test_validation(void)
{
    usbeam_rca_plan *plan = NULL;
    usbeam_rca_params p = base_params();
    p.world_to_array[10] = 0.0; /* z row zero: singular */
    CHECK(usbeam_rca_plan_create(&p, USBEAM_BACKEND_CPU, &plan) == USBEAM_ERR_INVALID_ARGUMENT);
    CHECK(plan == NULL && strstr(usbeam_last_error(), "singular") != NULL);
    p = base_params();
    p.n_acquisitions = NC - 1;
    CHECK(usbeam_rca_plan_create(&p, USBEAM_BACKEND_CPU, &plan) == USBEAM_ERR_INVALID_SHAPE);
    CHECK(strstr(usbeam_last_error(), "n_acquisitions") != NULL);
    p = base_params();
    p.method = USBEAM_RCA_UFORCES;
    int32_t sparse[2] = {1, NC};
    p.n_acquisitions = 2;
    p.sparse_elements = sparse;
    CHECK(usbeam_rca_plan_create(&p, USBEAM_BACKEND_CPU, &plan) == USBEAM_ERR_INVALID_ARGUMENT);
    CHECK(strstr(usbeam_last_error(), "sparse_elements[1]") != NULL);
    p.sparse_elements = NULL;
    CHECK(usbeam_rca_plan_create(&p, USBEAM_BACKEND_CPU, &plan) == USBEAM_ERR_NULL_POINTER);
    p = base_params();
    p.method = USBEAM_RCA_TPW;
    p.n_acquisitions = 1;
    double angle = 2.0, depth = INFINITY;
    p.angles = &angle;
    p.focal_depths = &depth;
    CHECK(usbeam_rca_plan_create(&p, USBEAM_BACKEND_CPU, &plan) == USBEAM_ERR_INVALID_ARGUMENT);
    CHECK(strstr(usbeam_last_error(), "angles[0]") != NULL);
    p = base_params();
    p.fs = NAN;
    CHECK(usbeam_rca_plan_create(&p, USBEAM_BACKEND_CPU, &plan) == USBEAM_ERR_INVALID_ARGUMENT);
    CHECK(strstr(usbeam_last_error(), "fs") != NULL);
    p = base_params();
    CHECK(usbeam_rca_plan_create(&p, USBEAM_BACKEND_CUDA, &plan) == USBEAM_ERR_NO_BACKEND);
    CHECK(usbeam_rca_plan_create(NULL, USBEAM_BACKEND_CPU, &plan) == USBEAM_ERR_NULL_POINTER);
    CHECK(usbeam_rca_execute(NULL, &angle, &angle) == USBEAM_ERR_NULL_POINTER);
    usbeam_rca_plan_destroy(NULL);
}

static double strip(int e, int n, double pitch) { return (e - 0.5 * (n - 1)) * pitch; }

/* Ramp record on pair (a, c) of a one-voxel plan: the output is the sample index. */
static double readback(usbeam_rca_params *p, size_t a, size_t c)
{
    usbeam_rca_plan *plan = NULL;
    if (usbeam_rca_plan_create(p, USBEAM_BACKEND_CPU, &plan) != USBEAM_OK) return NAN;
    size_t count = p->n_acquisitions * p->n_channels * NS;
    float *data = calloc(count, sizeof *data);
    float out = -1.0f;
    for (int n = 0; n < NS; ++n) data[(a * p->n_channels + c) * NS + (size_t)n] = (float)n;
    usbeam_status st = usbeam_rca_execute(plan, data, &out);
    free(data);
    usbeam_rca_plan_destroy(plan);
    return st == USBEAM_OK ? out : NAN;
}

static void test_delays(void)
{
    const double x = 0.7e-3, y = -0.4e-3, z = 6e-3;
    usbeam_rca_params p = base_params();
    p.voxel_to_world[3] = x;
    p.voxel_to_world[7] = y;
    p.voxel_to_world[11] = z;
    /* FORCES, receive on columns: transmit from (x_k, 0, 0), receive on strip x_c */
    for (int k = 0; k < NC; k += 3)
        for (int c = 0; c < NC; c += 2) {
            double xk = strip(k, NC, PX), xc = strip(c, NC, PX);
            double path = sqrt((x - xk) * (x - xk) + y * y + z * z) + sqrt((x - xc) * (x - xc) + z * z);
            CHECK(fabs(readback(&p, (size_t)k, (size_t)c) - path / C * FS) < 2e-4);
        }
    /* HERCULES, plane wave from the rows at angle 0, receive on columns, decoded rows */
    p.method = USBEAM_RCA_HERCULES;
    p.tx_rows = 1;
    p.n_acquisitions = NR;
    double angle = 0.0, depth = INFINITY;
    p.angles = &angle;
    p.focal_depths = &depth;
    for (int r = 0; r < NR; r += 2)
        for (int c = 1; c < NC; c += 3) {
            double yr = strip(r, NR, PY), xc = strip(c, NC, PX);
            double path = z + sqrt((x - xc) * (x - xc) + (y - yr) * (y - yr) + z * z);
            CHECK(fabs(readback(&p, (size_t)r, (size_t)c) - path / C * FS) < 2e-4);
        }
}

int main(void)
{
    test_validation();
    test_delays();
    return check_summary();
}
