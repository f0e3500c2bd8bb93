/*
 * scan_convert.c - scan conversion of sector images (convex and phased arrays, and any image on a
 * polar grid: B-mode uint8 or dB, Doppler maps), CPU backend.
 *
 * Layout: in  (n_images, n_r, n_theta) uint8 or float32, theta fastest (a PolarGrid image);
 *         out (n_images, n_points) of the same dtype, the points in the caller's order (a
 *         Cartesian Grid's (nz, nx), z the slower).
 * Units:  positions m, angles rad; theta measured from +z toward +x about the apex.
 * Method: plan creation maps each output point (x, z) to fractional polar indices, in double,
 *         u = (|p - apex| - r0) / dr and v = (atan2(x - apex_x, z - apex_z) - theta0) / dtheta;
 *         outside 0 <= u <= n_r - 1, 0 <= v <= n_theta - 1 the point gets `fill` (the mask
 *         outside the sector).  Inside, its first neighbour i * n_theta + j (i = floor(u),
 *         j = floor(v), clamped to n - 2 so the last row / column is reached with fraction 1)
 *         and the fractions (u - i, v - j) are tabulated; execute is one bilinear mix of four
 *         samples per point and image (usbeam_bilinear_f, usbeam_math.h, shared with
 *         cuda/scan_convert.cu).  This is scipy.ndimage.map_coordinates(order=1) at (u, v).
 * NaN or inf in float input: refused before anything is written (usbeam_count_nonfinite).
 * Reference: bilinear interpolation in the acquisition (r, theta) coordinates, the usual
 *         digital scan converter (e.g. Ophir & Maklad, "Digital scan converters in diagnostic
 *         ultrasound imaging", Proc. IEEE 67(4) 1979).
 */
#include "common/usbeam_internal.h"
#include "common/usbeam_math.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

struct usbeam_scan_convert_plan {
    usbeam_scan_convert_params params; /* its points pointer is NULL */
    int32_t *first;                    /* (n_points) first neighbour, -1 outside the sector */
    float *fraction;                   /* (n_points, 2) (fr, ft) */
    float fill;
    usbeam_scan_convert_cuda *cuda;    /* USBEAM_BACKEND_CUDA: the twin in cuda/scan_convert.cu */
};

static usbeam_status validate(const usbeam_scan_convert_params *prm)
{
    usbeam_status st;
    if (prm->n_images == 0) return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "image: no images (n_images = 0)");
    if (prm->n_r < 2 || prm->n_theta < 2)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "polar_grid: needs at least 2 radii and 2 angles (got %zu x %zu)",
                           prm->n_r, prm->n_theta);
    size_t per_image = 0;
    if (usbeam_mul_size(prm->n_r, prm->n_theta, &per_image) != 0 || per_image > (size_t)INT32_MAX)
        return usbeam_fail(USBEAM_ERR_SIZE_OVERFLOW, "polar_grid: n_r x n_theta must be < 2^31");
    if (prm->n_points == 0) return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "cartesian_grid: is empty");
    if (!prm->points) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "points is NULL");
    if ((st = usbeam_check_nonnegative("r0", prm->r0)) != USBEAM_OK) return st;
    if ((st = usbeam_check_positive("dr", prm->dr)) != USBEAM_OK) return st;
    if ((st = usbeam_check_positive("dtheta", prm->dtheta)) != USBEAM_OK) return st;
    if ((st = usbeam_check_finite("theta0", prm->theta0)) != USBEAM_OK) return st;
    if ((st = usbeam_check_finite("apex_x", prm->apex_x)) != USBEAM_OK) return st;
    if ((st = usbeam_check_finite("apex_z", prm->apex_z)) != USBEAM_OK) return st;
    const double theta_end = prm->theta0 + (double)(prm->n_theta - 1) * prm->dtheta;
    if (!(prm->theta0 > -USBEAM_PI && theta_end < USBEAM_PI))
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "polar_grid: angles must lie within (-pi, pi) (got %g to %g)",
                           prm->theta0, theta_end);
    if (prm->dtype != USBEAM_DTYPE_UINT8 && prm->dtype != USBEAM_DTYPE_FLOAT32)
        return usbeam_fail(USBEAM_ERR_INVALID_DTYPE, "image: dtype must be uint8 or float32 (got code %d)", (int)prm->dtype);
    if ((st = usbeam_check_finite("fill", prm->fill)) != USBEAM_OK) return st;
    if (prm->dtype == USBEAM_DTYPE_UINT8 && !(prm->fill >= 0.0 && prm->fill <= 255.0 && prm->fill == floor(prm->fill)))
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "fill must be an integer in [0, 255] for uint8 images (got %g)", prm->fill);
    for (size_t i = 0; i < 2 * prm->n_points; ++i)
        if (!isfinite(prm->points[i]))
            return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "points must be finite (entry %zu is %g)", i, prm->points[i]);
    size_t images = 0;
    if (usbeam_mul_size(prm->n_images, prm->n_points, &images) != 0 || usbeam_mul_size(prm->n_images, per_image, &images) != 0)
        return usbeam_fail(USBEAM_ERR_SIZE_OVERFLOW, "image: n_images x points is too large");
    return USBEAM_OK;
}

/* Index and fraction along one polar axis: 0 when `u` (fractional index) is outside [0, n-1]. */
static int axis_cell(double u, size_t n, int *index, float *fraction)
{
    if (!(u >= 0.0 && u <= (double)(n - 1))) return 0;
    double cell = floor(u);
    if (cell > (double)(n - 2)) cell = (double)(n - 2); /* the last sample: fraction 1 */
    *index = (int)cell;
    *fraction = (float)(u - cell);
    return 1;
}

void usbeam_scan_convert_plan_destroy(usbeam_scan_convert_plan *plan)
{
    if (!plan) return;
    usbeam_scan_convert_cuda_destroy(plan->cuda);
    usbeam_free(plan->first);
    usbeam_free(plan->fraction);
    usbeam_free(plan);
}

usbeam_cuda_exec *usbeam_scan_convert_plan_cuda(usbeam_scan_convert_plan *plan)
{
    return plan && plan->cuda ? usbeam_scan_convert_cuda_exec(plan->cuda) : NULL;
}

usbeam_status usbeam_scan_convert_plan_create(const usbeam_scan_convert_params *params, usbeam_backend backend,
                                              usbeam_scan_convert_plan **plan_out)
{
    usbeam_status st;
    if (!params || !plan_out) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "params and plan must not be NULL");
    *plan_out = NULL;
    if (backend != USBEAM_BACKEND_CPU && backend != USBEAM_BACKEND_CUDA)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "backend: unknown value %d", (int)backend);
    if ((st = validate(params)) != USBEAM_OK) return st;
    const size_t n = params->n_points;
    size_t bytes = 0;
    if (usbeam_mul_size(n, 2 * sizeof(float), &bytes) != 0 || bytes > USBEAM_MAX_ALLOCATION)
        return usbeam_fail(USBEAM_ERR_SIZE_OVERFLOW, "cartesian_grid: %zu points is too many", n);
    usbeam_scan_convert_plan *plan = usbeam_alloc(sizeof *plan);
    if (!plan) return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "scan conversion plan");
    plan->params = *params;
    plan->params.points = NULL;
    plan->fill = (float)params->fill;
    plan->first = usbeam_alloc(n * sizeof(int32_t));
    plan->fraction = usbeam_alloc(bytes);
    if (!plan->first || !plan->fraction) {
        usbeam_scan_convert_plan_destroy(plan);
        return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "scan conversion table (%zu points)", n);
    }
    const usbeam_scan_convert_params *prm = params;
    const ptrdiff_t count = (ptrdiff_t)n;
#pragma omp parallel for schedule(static)
    for (ptrdiff_t q = 0; q < count; ++q) {
        const double dx = prm->points[2 * q] - prm->apex_x, dz = prm->points[2 * q + 1] - prm->apex_z;
        const double u = (sqrt(dx * dx + dz * dz) - prm->r0) / prm->dr;
        const double v = (atan2(dx, dz) - prm->theta0) / prm->dtheta;
        int i = 0, j = 0;
        float fr = 0.0f, ft = 0.0f;
        const int inside = axis_cell(u, prm->n_r, &i, &fr) && axis_cell(v, prm->n_theta, &j, &ft);
        plan->first[q] = inside ? (int32_t)((size_t)i * prm->n_theta + (size_t)j) : -1;
        plan->fraction[2 * q] = inside ? fr : 0.0f;
        plan->fraction[2 * q + 1] = inside ? ft : 0.0f;
    }
    if (backend == USBEAM_BACKEND_CUDA) {
        const usbeam_scan_convert_tables tables = {&plan->params, plan->first, plan->fraction, plan->fill};
        if ((st = usbeam_scan_convert_cuda_create(&tables, &plan->cuda)) != USBEAM_OK) {
            usbeam_scan_convert_plan_destroy(plan);
            return st;
        }
        usbeam_free(plan->first); /* the twin holds its device copies */
        usbeam_free(plan->fraction);
        plan->first = NULL;
        plan->fraction = NULL;
    }
    *plan_out = plan;
    return USBEAM_OK;
}

usbeam_status usbeam_scan_convert_execute(usbeam_scan_convert_plan *plan, const void *in, void *out)
{
    if (!plan || !in || !out) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "plan, in and out must not be NULL");
    if (plan->cuda) return usbeam_scan_convert_cuda_execute(plan->cuda, in, out); /* device pointers */
    const usbeam_scan_convert_params *prm = &plan->params;
    const size_t image_size = prm->n_r * prm->n_theta, n_theta = prm->n_theta;
    const int is_u8 = prm->dtype == USBEAM_DTYPE_UINT8;
    if (!is_u8 && usbeam_count_nonfinite(in, USBEAM_DTYPE_FLOAT32, prm->n_images * image_size) > 0)
        return usbeam_fail_nonfinite("image", "scan conversion refuses them; out is left untouched");
    const ptrdiff_t count = (ptrdiff_t)(prm->n_images * prm->n_points);
    const size_t n_points = prm->n_points;
    const int32_t *first = plan->first;
    const float *fraction = plan->fraction;
    if (is_u8) {
        const uint8_t *src = in;
        uint8_t *dst = out;
        const uint8_t fill = (uint8_t)plan->fill;
#pragma omp parallel for schedule(static)
        for (ptrdiff_t k = 0; k < count; ++k) {
            const size_t q = (size_t)k % n_points, img = (size_t)k / n_points;
            const int32_t f = first[q];
            if (f < 0) {
                dst[k] = fill;
                continue;
            }
            const uint8_t *s = src + img * image_size + (size_t)f;
            dst[k] = usbeam_round_u8(usbeam_bilinear_f(s[0], s[1], s[n_theta], s[n_theta + 1], fraction[2 * q],
                                                       fraction[2 * q + 1]));
        }
    } else {
        const float *src = in;
        float *dst = out;
        const float fill = plan->fill;
#pragma omp parallel for schedule(static)
        for (ptrdiff_t k = 0; k < count; ++k) {
            const size_t q = (size_t)k % n_points, img = (size_t)k / n_points;
            const int32_t f = first[q];
            if (f < 0) {
                dst[k] = fill;
                continue;
            }
            const float *s = src + img * image_size + (size_t)f;
            dst[k] = usbeam_bilinear_f(s[0], s[1], s[n_theta], s[n_theta + 1], fraction[2 * q], fraction[2 * q + 1]);
        }
    }
    return USBEAM_OK;
}
