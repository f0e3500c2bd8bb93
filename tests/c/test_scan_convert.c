/*
 * test_scan_convert.c - plain-C tests of scan conversion (csrc/bmode/scan_convert.c): an image
 * linear in (row, column) is reproduced exactly by the bilinear mix at any point of the sector
 * (u, v computed here from the math, in double); points outside the sector get the fill; uint8
 * rounds half up; bad parameters are refused naming them; NaN input is refused before writing.
 * Built by `make ctest` and `make asan`.  Prints "N passed, N failed".
 */
#include "usbeam.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"

enum { NR = 6, NT = 5, NP = 4 };

static usbeam_scan_convert_params base(const double *points)
{
    usbeam_scan_convert_params p = {0};
    p.n_images = 2;
    p.n_r = NR, p.n_theta = NT;
    p.r0 = 0.03, p.dr = 0.002, p.theta0 = -0.4, p.dtheta = 0.2;
    p.apex_x = 0.0, p.apex_z = -0.02;
    p.n_points = NP, p.points = points;
    p.dtype = USBEAM_DTYPE_FLOAT32;
    p.fill = -7.0;
    return p;
}

static void test_linear_image_is_exact(void)
{
    /* three points inside the sector (r, theta) and one outside (beyond the last angle) */
    const double rt[NP][2] = {{0.031, -0.33}, {0.0395, 0.05}, {0.0395, 0.39}, {0.035, 0.55}};
    double points[2 * NP];
    for (int q = 0; q < NP; ++q) {
        points[2 * q] = rt[q][0] * sin(rt[q][1]);
        points[2 * q + 1] = -0.02 + rt[q][0] * cos(rt[q][1]);
    }
    usbeam_scan_convert_params p = base(points);
    usbeam_scan_convert_plan *plan = NULL;
    CHECK(usbeam_scan_convert_plan_create(&p, USBEAM_BACKEND_CPU, &plan) == USBEAM_OK);
    float image[2 * NR * NT], out[2 * NP];
    for (int k = 0; k < 2; ++k)
        for (int i = 0; i < NR; ++i)
            for (int j = 0; j < NT; ++j) image[(k * NR + i) * NT + j] = (float)(1.5 * i - 0.75 * j + 10.0 * k);
    for (int q = 0; q < 2 * NP; ++q) out[q] = NAN;
    CHECK(usbeam_scan_convert_execute(plan, image, out) == USBEAM_OK);
    for (int k = 0; k < 2; ++k) {
        for (int q = 0; q < 3; ++q) {
            const double dx = points[2 * q], dz = points[2 * q + 1] + 0.02;
            const double u = (sqrt(dx * dx + dz * dz) - 0.03) / 0.002, v = (atan2(dx, dz) + 0.4) / 0.2;
            CHECK(fabs(out[k * NP + q] - (1.5 * u - 0.75 * v + 10.0 * k)) < 1e-5);
        }
        CHECK(out[k * NP + 3] == -7.0f);
    }
    image[7] = NAN;
    for (int q = 0; q < 2 * NP; ++q) out[q] = 3.0f;
    CHECK(usbeam_scan_convert_execute(plan, image, out) == USBEAM_ERR_INVALID_ARGUMENT);
    CHECK(strstr(usbeam_last_error(), "image") != NULL);
    CHECK(out[0] == 3.0f && out[2 * NP - 1] == 3.0f); /* untouched */
    usbeam_scan_convert_plan_destroy(plan);
}

static void test_uint8_rounds(void)
{
    /* column j holds 10 + j; row 2, 0.6 and 0.3 of the way from column 1 to 2: 11.6 -> 12 and
     * 11.3 -> 11 (rounded, not truncated) */
    double points[4] = {0.034 * sin(-0.08), -0.02 + 0.034 * cos(-0.08), 0.034 * sin(-0.14), -0.02 + 0.034 * cos(-0.14)};
    usbeam_scan_convert_params p = base(points);
    p.n_images = 1, p.n_points = 2, p.dtype = USBEAM_DTYPE_UINT8, p.fill = 0.0;
    usbeam_scan_convert_plan *plan = NULL;
    CHECK(usbeam_scan_convert_plan_create(&p, USBEAM_BACKEND_CPU, &plan) == USBEAM_OK);
    unsigned char image[NR * NT], out[2] = {0, 0};
    for (int i = 0; i < NR * NT; ++i) image[i] = (unsigned char)(10 + i % NT);
    CHECK(usbeam_scan_convert_execute(plan, image, out) == USBEAM_OK);
    CHECK(out[0] == 12 && out[1] == 11);
    usbeam_scan_convert_plan_destroy(plan);
}

static void test_bad_parameters_are_named(void)
{
    double points[2] = {0.0, 0.02};
    usbeam_scan_convert_plan *plan = NULL;
    usbeam_scan_convert_params p = base(points);
    p.n_points = 1;
    p.dr = 0.0;
    CHECK(usbeam_scan_convert_plan_create(&p, USBEAM_BACKEND_CPU, &plan) == USBEAM_ERR_INVALID_ARGUMENT);
    CHECK(strstr(usbeam_last_error(), "dr") != NULL && plan == NULL);
    p = base(points), p.n_points = 1, p.n_theta = 1;
    CHECK(usbeam_scan_convert_plan_create(&p, USBEAM_BACKEND_CPU, &plan) == USBEAM_ERR_INVALID_ARGUMENT);
    CHECK(strstr(usbeam_last_error(), "polar_grid") != NULL);
    p = base(points), p.n_points = 1, p.theta0 = -3.5;
    CHECK(usbeam_scan_convert_plan_create(&p, USBEAM_BACKEND_CPU, &plan) == USBEAM_ERR_INVALID_ARGUMENT);
    p = base(points), p.n_points = 1, p.dtype = USBEAM_DTYPE_UINT8, p.fill = 300.0;
    CHECK(usbeam_scan_convert_plan_create(&p, USBEAM_BACKEND_CPU, &plan) == USBEAM_ERR_INVALID_ARGUMENT);
    CHECK(strstr(usbeam_last_error(), "fill") != NULL);
    p = base(points), p.n_points = 1, p.dtype = USBEAM_DTYPE_COMPLEX64;
    CHECK(usbeam_scan_convert_plan_create(&p, USBEAM_BACKEND_CPU, &plan) == USBEAM_ERR_INVALID_DTYPE);
    points[1] = NAN;
    p = base(points), p.n_points = 1;
    CHECK(usbeam_scan_convert_plan_create(&p, USBEAM_BACKEND_CPU, &plan) == USBEAM_ERR_INVALID_ARGUMENT);
    CHECK(strstr(usbeam_last_error(), "points") != NULL);
    usbeam_scan_convert_plan_destroy(NULL);
}

int main(void)
{
    test_linear_image_is_exact();
    test_uint8_rounds();
    test_bad_parameters_are_named();
    return check_summary();
}
