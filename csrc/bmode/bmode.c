/*
 * bmode.c - B-mode display: envelope |IQ| and log compression, CPU backend.
 *
 * Layout: in  complex64[n_images][n_values / n_images]  (any spatial layout inside)
 *         out uint8 or float32, same layout.
 * Units:  dynamic range in dB; the dB output is 20*log10(|IQ| / ref).
 * Reference semantics: PyMUST/MUST bmode (D. Garcia): I = 20 log10(|IQ|/max|IQ|) + DR,
 *         then 255*I/DR clipped to [0, 255] and cast to uint8 (truncation), with the max
 *         taken over the whole array.  per_image and a fixed reference are extensions
 *         for live display, where each frame must not depend on later frames.
 * NaN or inf: refused (USBEAM_ERR_INVALID_ARGUMENT).  |z|^2 in double is finite exactly when
 *         re and im are (a float32 squared cannot overflow a double), so the pass that already
 *         forms it (the max, or the compression with a fixed reference) ORs a per-thread flag;
 *         a refused call fills out with 0 (uint8) or NaN (dB): no partial image survives.
 */
#include "common/usbeam_internal.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

struct usbeam_bmode_plan {
    usbeam_bmode_params params;
    size_t image_size;
    usbeam_bmode_cuda *cuda; /* USBEAM_BACKEND_CUDA: the twin in cuda/bmode.cu */
};

usbeam_status usbeam_bmode_plan_create(const usbeam_bmode_params *params, usbeam_backend backend,
                                       usbeam_bmode_plan **plan)
{
    usbeam_status st;
    if (!params || !plan) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "params and plan must not be NULL");
    *plan = NULL;
    if (backend != USBEAM_BACKEND_CPU && backend != USBEAM_BACKEND_CUDA)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "backend: unknown value %d", (int)backend);
    if ((st = usbeam_check_positive("dynamic_range", params->dynamic_range_db)) != USBEAM_OK) return st;
    if ((st = usbeam_check_nonnegative("reference", params->reference)) != USBEAM_OK) return st;
    if (params->n_values == 0) return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "image: is empty");
    if (params->n_images == 0 || params->n_values % params->n_images != 0)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT,
                           "n_images (%zu) must divide the number of values (%zu)", params->n_images,
                           params->n_values);
    if (params->output != USBEAM_BMODE_UINT8 && params->output != USBEAM_BMODE_DB)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "output: unknown kind %d", (int)params->output);

    usbeam_bmode_plan *p = usbeam_alloc(sizeof *p);
    if (!p) return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "bmode plan");
    p->params = *params;
    p->image_size = params->n_values / params->n_images;
    if (backend == USBEAM_BACKEND_CUDA && (st = usbeam_bmode_cuda_create(params, &p->cuda)) != USBEAM_OK) {
        usbeam_free(p);
        return st;
    }
    *plan = p;
    return USBEAM_OK;
}

void usbeam_bmode_plan_destroy(usbeam_bmode_plan *plan)
{
    if (plan) usbeam_bmode_cuda_destroy(plan->cuda);
    usbeam_free(plan);
}

usbeam_cuda_exec *usbeam_bmode_plan_cuda(usbeam_bmode_plan *plan)
{
    return plan && plan->cuda ? usbeam_bmode_cuda_exec(plan->cuda) : NULL;
}

/* |z|^2 in double: the max pixel and every other pixel go through the same arithmetic, so
 * the brightest pixel lands exactly on 0 dB (255), as in PyMUST. */
static inline double sample_power(const float *iq, ptrdiff_t i)
{
    double re = iq[2 * i], im = iq[2 * i + 1];
    return re * re + im * im;
}

/* Largest |z|^2 over a block; squared magnitudes avoid a sqrt per sample.  *bad is set
 * when a power is NaN or inf (a non-finite sample). */
static double max_power(const float *iq, size_t n, int *bad)
{
    double best = 0.0, poison = 0.0; /* poison: sum of (power - power), 0 or NaN */
    ptrdiff_t count = (ptrdiff_t)n;
#pragma omp parallel for reduction(max : best) reduction(+ : poison) schedule(static)
    for (ptrdiff_t i = 0; i < count; ++i) {
        double power = sample_power(iq, i);
        best = power > best ? power : best;
        poison += power - power;
    }
    *bad |= !(poison == 0.0);
    return best;
}

/* uint8 display without a libm logarithm per pixel.  Grey level k is reached exactly when
 *   20 log10(|z|/ref) + DR >= k DR/255   <=>   |z|^2 >= ref^2 10^((k - 255) DR / 2550),
 * so the 255 power thresholds are computed once per reference, in double.  Each pixel gets
 * an estimate of its level from a cheap log2 (exponent bits + a cubic on the mantissa,
 * error ~1e-3 in log2, a few hundredths of a grey level for DR >= 10 dB); comparisons
 * against the exact thresholds then settle the level (one step, more only for a range of
 * about 1 dB or less), so the result is the threshold definition itself.  The brightest pixel meets threshold 255 exactly (10^0 = 1), as PyMUST's
 * 255; a zero pixel passes no threshold and lands on 0, as PyMUST's clip does for -inf. */
static inline float approx_log2(float x)
{
    uint32_t bits;
    memcpy(&bits, &x, sizeof bits);
    const float exponent = (float)((int)(bits >> 23) - 127);
    bits = (bits & 0x007FFFFFu) | 0x3F800000u; /* mantissa in [1, 2) */
    float m;
    memcpy(&m, &bits, sizeof m);
    /* cubic fit of log2(m) on [1, 2], max error ~1e-3 */
    return exponent + ((0.15824871f * m - 1.05187502f) * m + 3.04788335f) * m - 2.15418557f;
}

/* Grey level of one pixel of power |z|^2 (see above). */
static inline uint8_t grey_level(double power, const double *threshold, float slope, double inverse_reference)
{
    float ratio = (float)(power * inverse_reference);
    ratio = ratio > 1e-30f ? ratio : 1e-30f; /* 0 and denormals: far below level 0 */
    float estimate = 255.0f + slope * approx_log2(ratio);
    estimate = estimate < 0.0f ? 0.0f : (estimate > 255.0f ? 255.0f : estimate);
    int level = (int)estimate;
    /* settle on the exact thresholds (one step at most unless DR is below ~1 dB) */
    while (level < 255 && power >= threshold[level + 1]) ++level;
    while (level > 0 && !(power >= threshold[level])) --level;
    return (uint8_t)level;
}

static inline float db_value(double power, double ref_db, double range_db)
{
    double db = 10.0 * log10(power) - ref_db;
    return (float)(db > -range_db ? db : -range_db);
}

/* check: also test each power for NaN / inf (a fixed reference: no max pass has looked at
 * them; the loop is written twice so the usual case pays nothing); returns 1 when one was. */
static int compress_uint8(const float *iq, size_t n, double reference_power, double range_db, int check,
                          uint8_t *dst)
{
    double threshold[256];
    threshold[0] = -INFINITY; /* level 0 needs nothing */
    for (int k = 1; k < 256; ++k) threshold[k] = reference_power * pow(10.0, (double)(k - 255) * range_db / 2550.0);
    /* level ~ 255 + (2550 / DR) log10(p / ref^2) = 255 + (2550 log10(2) / DR) log2(p / ref^2) */
    const float slope = (float)(2550.0 * log10(2.0) / range_db);
    const double inverse_reference = 1.0 / reference_power;
    const ptrdiff_t count = (ptrdiff_t)n;
    double poison = 0.0; /* sum of (power - power): 0, or NaN once a power is NaN or inf */
    if (check) {
#pragma omp parallel for schedule(static) reduction(+ : poison)
        for (ptrdiff_t i = 0; i < count; ++i) {
            const double power = sample_power(iq, i);
            poison += power - power;
            dst[i] = grey_level(power, threshold, slope, inverse_reference);
        }
    } else {
#pragma omp parallel for schedule(static)
        for (ptrdiff_t i = 0; i < count; ++i)
            dst[i] = grey_level(sample_power(iq, i), threshold, slope, inverse_reference);
    }
    return !(poison == 0.0);
}

static int compress_db(const float *iq, size_t n, double reference_power, double range_db, int check,
                       float *dst)
{
    const double ref_db = 10.0 * log10(reference_power);
    const ptrdiff_t count = (ptrdiff_t)n;
    double poison = 0.0;
    if (check) {
#pragma omp parallel for schedule(static) reduction(+ : poison)
        for (ptrdiff_t i = 0; i < count; ++i) {
            const double power = sample_power(iq, i);
            poison += power - power;
            dst[i] = db_value(power, ref_db, range_db);
        }
    } else {
#pragma omp parallel for schedule(static)
        for (ptrdiff_t i = 0; i < count; ++i) dst[i] = db_value(sample_power(iq, i), ref_db, range_db);
    }
    return !(poison == 0.0);
}

usbeam_status usbeam_bmode_execute(usbeam_bmode_plan *plan, const void *in, void *out)
{
    if (!plan || !in || !out) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "plan, in and out must not be NULL");
    if (plan->cuda) return usbeam_bmode_cuda_execute(plan->cuda, in, out); /* device pointers */
    const usbeam_bmode_params *prm = &plan->params;
    const float *iq = in;
    size_t out_elem = prm->output == USBEAM_BMODE_UINT8 ? 1 : 4;

    int bad = 0;
    double global_power = prm->reference * prm->reference;
    if (global_power == 0.0 && !prm->per_image) global_power = max_power(iq, prm->n_values, &bad);

    for (size_t img = 0; img < prm->n_images && !bad; ++img) {
        const float *block = iq + 2 * img * plan->image_size;
        double reference = global_power;
        if (reference == 0.0 && prm->per_image) reference = max_power(block, plan->image_size, &bad);
        if (bad) break;
        const int check = prm->reference > 0.0; /* no max pass has tested these samples */
        /* An all-zero image has no scale: every pixel is at the bottom of the range. */
        if (!(reference > 0.0)) reference = INFINITY;
        void *dst = (char *)out + img * plan->image_size * out_elem;
        if (prm->output == USBEAM_BMODE_UINT8)
            bad = compress_uint8(block, plan->image_size, reference, prm->dynamic_range_db, check, dst);
        else
            bad = compress_db(block, plan->image_size, reference, prm->dynamic_range_db, check, dst);
    }
    if (bad) {
        if (prm->output == USBEAM_BMODE_UINT8)
            memset(out, 0, prm->n_values);
        else
            usbeam_fill_nan(out, prm->n_values);
        return usbeam_fail_nonfinite("image", "B-mode refuses them; out is filled with 0 (uint8) or NaN (dB)");
    }
    return USBEAM_OK;
}
