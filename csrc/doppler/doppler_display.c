/*
 * doppler_display.c - display post-processing of successive Doppler outputs, CPU backend.
 *
 * Layout: velocity, power, outputs float32[n_images][nz][nx]; mask uint8, same shape.  The
 *         n_images of one execute are successive outputs in time order (persistence runs
 *         through them, then on into the next execute).
 * Units:  velocity in m/s; power in whatever unit the caller uses (linear or dB), the power
 *         threshold in the same unit.
 * Steps, in the order of a scanner's colour post-processor (e.g. Evans & McDicken, Doppler
 * Ultrasound, 2nd ed., ch. 11):
 *   1. 3x3 median of each image (edges replicated), velocity and power separately: removes
 *      isolated speckle-like outliers while keeping vessel edges.
 *   2. persistence: first-order recursive average y = p * y_prev + (1 - p) * x per pixel; the
 *      first image after create/reset starts the history (y = x).  Averaging velocities is
 *      the usual display compromise; it smears across an aliasing wrap.
 *   3. masks: a pixel is shown when power >= power_threshold and |v| >= velocity_threshold;
 *      a hidden pixel gets velocity 0 and mask 0; the power output is not masked.
 * Backend CUDA: create validates here as for the CPU, then hands the parameters to the twin in
 * cuda/doppler_display.cu (which keeps the persistence history on the device; no host
 * buffers); execute and reset forward.  The median network is shared (usbeam_math.h).
 */
#include "common/usbeam_internal.h"
#include "common/usbeam_math.h"

#include <math.h>
#include <string.h>

struct usbeam_doppler_display_plan {
    usbeam_doppler_display_params params;
    size_t image_size;
    float *history[2];   /* velocity, power: the previous persisted image */
    float *median_tmp;   /* one image */
    int started;
    usbeam_doppler_display_cuda *cuda; /* backend CUDA: the twin, which owns the device history */
};

usbeam_status usbeam_doppler_display_plan_create(const usbeam_doppler_display_params *params,
                                                 usbeam_backend backend, usbeam_doppler_display_plan **plan)
{
    usbeam_status st;
    if (!params || !plan) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "params and plan must not be NULL");
    *plan = NULL;
    if (backend != USBEAM_BACKEND_CPU && backend != USBEAM_BACKEND_CUDA)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "backend: unknown backend %d", (int)backend);
    if (params->n_images == 0 || params->nz == 0 || params->nx == 0)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "image: is empty (%zu images of %zu x %zu)",
                           params->n_images, params->nz, params->nx);
    if ((st = usbeam_check_nonnegative("persistence", params->persistence)) != USBEAM_OK) return st;
    if (params->persistence >= 1.0)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "persistence must be in [0, 1) (got %g)", params->persistence);
    if ((st = usbeam_check_finite("power_threshold", params->power_threshold)) != USBEAM_OK) return st;
    if ((st = usbeam_check_nonnegative("velocity_threshold", params->velocity_threshold)) != USBEAM_OK) return st;
    size_t image_size, bytes;
    if (usbeam_mul_size(params->nz, params->nx, &image_size) != 0 ||
        usbeam_mul_size(image_size, sizeof(float), &bytes) != 0 || bytes > USBEAM_MAX_ALLOCATION)
        return usbeam_fail(USBEAM_ERR_SIZE_OVERFLOW, "image: %zu x %zu is too large", params->nz, params->nx);
    usbeam_doppler_display_plan *p = usbeam_alloc(sizeof *p);
    if (!p) return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "display plan");
    p->params = *params;
    p->image_size = image_size;
    if (backend == USBEAM_BACKEND_CUDA) {
        if ((st = usbeam_doppler_display_cuda_create(params, &p->cuda)) != USBEAM_OK) {
            usbeam_free(p);
            return st;
        }
        *plan = p;
        return USBEAM_OK;
    }
    p->history[0] = usbeam_alloc(bytes);
    p->history[1] = usbeam_alloc(bytes);
    p->median_tmp = usbeam_alloc(bytes);
    if (!p->history[0] || !p->history[1] || !p->median_tmp) {
        usbeam_doppler_display_plan_destroy(p);
        return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "display plan: %zu x %zu images", params->nz, params->nx);
    }
    *plan = p;
    return USBEAM_OK;
}

void usbeam_doppler_display_plan_destroy(usbeam_doppler_display_plan *plan)
{
    if (!plan) return;
    usbeam_doppler_display_cuda_destroy(plan->cuda);
    usbeam_free(plan->history[0]);
    usbeam_free(plan->history[1]);
    usbeam_free(plan->median_tmp);
    usbeam_free(plan);
}

usbeam_status usbeam_doppler_display_reset(usbeam_doppler_display_plan *plan)
{
    if (!plan) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "plan must not be NULL");
    plan->started = 0;
    if (plan->cuda) return usbeam_doppler_display_cuda_reset(plan->cuda);
    return USBEAM_OK;
}

usbeam_cuda_exec *usbeam_doppler_display_plan_cuda(usbeam_doppler_display_plan *plan)
{
    return plan && plan->cuda ? usbeam_doppler_display_cuda_exec(plan->cuda) : NULL;
}

static void median3x3(const float *in, float *out, size_t nz, size_t nx)
{
    const ptrdiff_t NZ = (ptrdiff_t)nz, NX = (ptrdiff_t)nx;
#pragma omp parallel for schedule(static)
    for (ptrdiff_t z = 0; z < NZ; ++z) {
        for (ptrdiff_t x = 0; x < NX; ++x) {
            float v[9];
            int k = 0;
            for (ptrdiff_t dz = -1; dz <= 1; ++dz) {
                const ptrdiff_t zz = (ptrdiff_t)usbeam_clamp_index(z + dz, NZ);
                for (ptrdiff_t dx = -1; dx <= 1; ++dx) {
                    const ptrdiff_t xx = (ptrdiff_t)usbeam_clamp_index(x + dx, NX);
                    v[k++] = in[zz * NX + xx];
                }
            }
            out[z * NX + x] = usbeam_median9f(v);
        }
    }
}

usbeam_status usbeam_doppler_display_execute(usbeam_doppler_display_plan *plan, const float *velocity,
                                             const float *power, float *out_velocity, float *out_power,
                                             uint8_t *mask)
{
    if (!plan) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "plan must not be NULL");
    if (!velocity && !power) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "velocity and power are both NULL");
    if ((velocity && !out_velocity) || (power && !out_power))
        return usbeam_fail(USBEAM_ERR_NULL_POINTER, "each given input needs its output buffer");
    if (plan->cuda)
        return usbeam_doppler_display_cuda_execute(plan->cuda, velocity, power, out_velocity, out_power, mask);
    const usbeam_doppler_display_params *prm = &plan->params;
    const size_t n = plan->image_size;
    const ptrdiff_t count = (ptrdiff_t)n;
    const float keep = (float)prm->persistence, take = (float)(1.0 - prm->persistence);
    const float power_threshold = (float)prm->power_threshold, velocity_threshold = (float)prm->velocity_threshold;
    for (size_t img = 0; img < prm->n_images; ++img) {
        const float *inputs[2] = {velocity ? velocity + img * n : NULL, power ? power + img * n : NULL};
        float *outputs[2] = {velocity ? out_velocity + img * n : NULL, power ? out_power + img * n : NULL};
        for (int c = 0; c < 2; ++c) {
            if (!inputs[c]) continue;
            const float *src = inputs[c];
            if (prm->median) {
                median3x3(src, plan->median_tmp, prm->nz, prm->nx);
                src = plan->median_tmp;
            }
            float *hist = plan->history[c], *dst = outputs[c];
            if (!plan->started || prm->persistence == 0.0) {
#pragma omp parallel for schedule(static)
                for (ptrdiff_t q = 0; q < count; ++q) hist[q] = src[q];
            } else {
#pragma omp parallel for schedule(static)
                for (ptrdiff_t q = 0; q < count; ++q) hist[q] = keep * hist[q] + take * src[q];
            }
            memcpy(dst, hist, n * sizeof(float));
        }
        plan->started = 1;
        float *vel = outputs[0], *pwr = outputs[1];
        uint8_t *m = mask ? mask + img * n : NULL;
#pragma omp parallel for schedule(static)
        for (ptrdiff_t q = 0; q < count; ++q) {
            int shown = 1;
            if (pwr && !(pwr[q] >= power_threshold)) shown = 0;
            if (vel && !(fabsf(vel[q]) >= velocity_threshold)) shown = 0;
            if (vel && !shown) vel[q] = 0.0f;
            if (m) m[q] = (uint8_t)shown;
        }
    }
    return USBEAM_OK;
}
