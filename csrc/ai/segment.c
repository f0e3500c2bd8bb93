/*
 * segment.c - segmentation post-processing: logits threshold, multi-class argmax,
 * connected-component labelling, hole filling, largest component / small-component removal,
 * and per-label area, bounding box, centroid.  The components plan (for both backends) and the
 * CPU kernels; the CUDA twin is cuda/segment.cu (the plan-less device functions, threshold,
 * argmax and region properties, are there too).
 *
 * Layouts: values (n) float32/float16; scores (n_images, n_classes, n_pixels) (NCHW with the
 *          pixels flattened); masks uint8 (n_images, height, width), nonzero = foreground;
 *          labels int32 (n_images, height, width), 0 = background.
 * Units:   pixels (areas are pixel counts, centroids mean row / column indices).
 * Labelling: union-find over a raster scan (Wu, Otoo & Suzuki, "Optimizing two-pass
 *          connected-component labeling algorithms", Pattern Anal. Appl. 2009), the union
 *          always linking the larger root under the smaller, so every component's root is
 *          its first pixel in raster order.  A second raster pass then numbers roots 1..N in
 *          the order they are met, which is exactly scipy.ndimage.label's numbering.  The
 *          parent links live in the caller's int32 label buffer, so labelling needs no
 *          scratch.  4-connectivity = scipy's default cross, 8 = np.ones((3, 3)).
 * Holes:   scipy.ndimage.binary_fill_holes: background pixels not connected (with the plan's
 *          connectivity, 4 = scipy's default structure) to the image border are filled,
 *          found here as the background components that touch the border.
 * CUDA:    a CUDA components plan runs cuda/segment.cu on its stream (usbeam_components_plan_cuda);
 *          usbeam_components_set_stream is the deprecated way to set it (ai_internal.h).
 */
#include "ai/ai_internal.h"
#include "ai/ai_math.h"

#include <math.h>
#include <string.h>

/* ---------------------------------------------------------------- threshold and argmax */

usbeam_status usbeam_mask_threshold(const void *values, usbeam_dtype dtype, size_t n, double threshold,
                                    uint8_t *mask)
{
    if (!values || !mask) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "values and mask must not be NULL");
    if (isnan(threshold)) return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "threshold must not be NaN");
    if (dtype != USBEAM_DTYPE_FLOAT32 && dtype != USBEAM_DTYPE_FLOAT16)
        return usbeam_fail(USBEAM_ERR_INVALID_DTYPE, "logits: dtype must be float32 or float16");
    const ptrdiff_t count = (ptrdiff_t)n;
    if (dtype == USBEAM_DTYPE_FLOAT32) {
        const float *v = values;
#pragma omp parallel for schedule(static) if (count > 65536)
        for (ptrdiff_t i = 0; i < count; ++i) mask[i] = (double)v[i] > threshold;
    } else {
        const uint16_t *v = values;
#pragma omp parallel for schedule(static) if (count > 65536)
        for (ptrdiff_t i = 0; i < count; ++i) mask[i] = (double)ai_half_bits_to_float(v[i]) > threshold;
    }
    return USBEAM_OK;
}

usbeam_status usbeam_mask_argmax(const void *scores, usbeam_dtype dtype, size_t n_images,
                                 size_t n_classes, size_t n_pixels, int32_t *labels)
{
    if (!scores || !labels) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "scores and labels must not be NULL");
    if (dtype != USBEAM_DTYPE_FLOAT32 && dtype != USBEAM_DTYPE_FLOAT16)
        return usbeam_fail(USBEAM_ERR_INVALID_DTYPE, "scores: dtype must be float32 or float16");
    if (n_classes == 0 || n_classes > (size_t)INT32_MAX)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "scores: the number of classes must be >= 1");
    size_t total;
    if (usbeam_mul_size(n_images, n_pixels, &total) != 0)
        return usbeam_fail(USBEAM_ERR_SIZE_OVERFLOW, "scores: too many pixels");
    const ptrdiff_t count = (ptrdiff_t)total;
#pragma omp parallel for schedule(static) if (count > 16384)
    for (ptrdiff_t i = 0; i < count; ++i) {
        const size_t image = (size_t)i / n_pixels, pixel = (size_t)i % n_pixels;
        const size_t base = image * n_classes * n_pixels + pixel;
        float best = 0.0f;
        int32_t best_class = 0;
        for (size_t c = 0; c < n_classes; ++c) {
            size_t at = base + c * n_pixels;
            float v = dtype == USBEAM_DTYPE_FLOAT32 ? ((const float *)scores)[at]
                                                    : ai_half_bits_to_float(((const uint16_t *)scores)[at]);
            if (c == 0 || v > best || v != v) {
                best = v;
                best_class = (int32_t)c;
                if (v != v) break; /* numpy.argmax: the first NaN is the maximum */
            }
        }
        labels[i] = best_class;
    }
    return USBEAM_OK;
}

/* ---------------------------------------------------------------- labelling */

static int32_t find_root(int32_t *parent, int32_t i)
{
    while (parent[i] != i) {
        parent[i] = parent[parent[i]]; /* path halving keeps parent[i] <= i */
        i = parent[i];
    }
    return i;
}

static void unite(int32_t *parent, int32_t a, int32_t b)
{
    a = find_root(parent, a);
    b = find_root(parent, b);
    if (a < b)
        parent[b] = a;
    else if (b < a)
        parent[a] = b;
}

/* Root of an already-labelled neighbour, and e joined to it: e is fresh (its own root), so
 * its first link is a plain assignment; later links are full unions. */
static void link_first(int32_t *parent, int32_t e, int32_t neighbour)
{
    parent[e] = find_root(parent, neighbour);
}

/* Labels one image of pixels where (mask != 0) != invert; returns the number of components.
 * Neighbours already scanned: a (up-left), b (up), c (up-right), d (left).  For 8-connectivity
 * the decision tree of Wu et al. skips unions that are implied: b touches a, c and d, and a
 * touches d, so at most two unions are needed (c with a, or c with d). */
static int32_t label_image(const uint8_t *mask, int invert, size_t height, size_t width, int connectivity,
                           int32_t *labels)
{
    const uint8_t on = invert ? 0 : 1;
#define FG(index) ((mask[(index)] != 0) == on)
    for (size_t y = 0; y < height; ++y) {
        const int32_t row = (int32_t)(y * width);
        for (size_t x = 0; x < width; ++x) {
            const int32_t e = row + (int32_t)x;
            if (!FG(e)) {
                labels[e] = -1;
                continue;
            }
            labels[e] = e;
            const int has_d = x > 0 && FG(e - 1);
            if (y == 0) {
                if (has_d) link_first(labels, e, e - 1);
                continue;
            }
            const int32_t b = e - (int32_t)width;
            if (connectivity == 4) {
                if (FG(b)) {
                    link_first(labels, e, b);
                    if (has_d) unite(labels, e, e - 1);
                } else if (has_d) {
                    link_first(labels, e, e - 1);
                }
                continue;
            }
            const int has_a = x > 0 && FG(b - 1);
            const int has_c = x + 1 < width && FG(b + 1);
            if (FG(b)) {
                link_first(labels, e, b);
            } else if (has_c) {
                link_first(labels, e, b + 1);
                if (has_a)
                    unite(labels, e, b - 1);
                else if (has_d)
                    unite(labels, e, e - 1);
            } else if (has_a) {
                link_first(labels, e, b - 1);
            } else if (has_d) {
                link_first(labels, e, e - 1);
            }
        }
    }
#undef FG
    /* parent[i] <= i, so when pixel i is reached its parent already holds its final label */
    int32_t count = 0;
    const int32_t n = (int32_t)(height * width);
    for (int32_t i = 0; i < n; ++i) {
        const int32_t parent = labels[i];
        if (parent < 0)
            labels[i] = 0;
        else if (parent == i)
            labels[i] = ++count;
        else
            labels[i] = labels[parent];
    }
    return count;
}

struct usbeam_components_plan {
    usbeam_components_params params;
    size_t image_size;
    int32_t *labels; /* CPU: (n_images, height, width) scratch for the mask -> mask operations */
    int32_t *areas;  /* CPU: (n_images, image_size + 1) pixel count per label */
    usbeam_components_cuda *cuda; /* USBEAM_BACKEND_CUDA: the twin in cuda/segment.cu */
    void *call_stream; /* set by the deprecated usbeam_components_set_stream: each execute is
                          queued there (ai_execute_on_stream); NULL: the plan's stream */
};

usbeam_status usbeam_components_plan_create(const usbeam_components_params *params,
                                            usbeam_backend backend, usbeam_components_plan **plan)
{
    if (!params || !plan) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "params and plan must not be NULL");
    *plan = NULL;
    usbeam_status st = ai_check_backend(backend);
    if (st != USBEAM_OK) return st;
    if (params->n_images == 0) return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "n_images must be >= 1");
    if (params->height == 0 || params->width == 0)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "mask: height and width must be >= 1 (got %zu x %zu)",
                           params->height, params->width);
    size_t image_size, total;
    if (usbeam_mul_size(params->height, params->width, &image_size) != 0 || image_size >= (size_t)INT32_MAX)
        return usbeam_fail(USBEAM_ERR_SIZE_OVERFLOW, "mask: %zu x %zu pixels do not fit int32 labels",
                           params->height, params->width);
    if (usbeam_mul_size3(params->n_images, image_size + 1, 2 * sizeof(int32_t), &total) != 0 ||
        total > USBEAM_MAX_ALLOCATION)
        return usbeam_fail(USBEAM_ERR_SIZE_OVERFLOW, "mask: %zu images of %zu pixels are too many",
                           params->n_images, image_size);
    if (params->connectivity != 4 && params->connectivity != 8)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "connectivity must be 4 or 8 (got %d)",
                           params->connectivity);
    usbeam_components_plan *p = usbeam_alloc(sizeof *p);
    if (!p) return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "components plan");
    p->params = *params;
    p->image_size = image_size;
    if (backend == USBEAM_BACKEND_CPU) {
        p->labels = usbeam_alloc(params->n_images * image_size * sizeof(int32_t));
        p->areas = usbeam_alloc(params->n_images * (image_size + 1) * sizeof(int32_t));
        if (!p->labels || !p->areas) {
            usbeam_components_plan_destroy(p);
            return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "components plan: scratch for %zu pixels",
                               params->n_images * image_size);
        }
    }
    if (backend == USBEAM_BACKEND_CUDA) {
        st = usbeam_components_cuda_create(params, &p->cuda);
        if (st != USBEAM_OK) {
            usbeam_components_plan_destroy(p);
            return st;
        }
    }
    *plan = p;
    return USBEAM_OK;
}

void usbeam_components_plan_destroy(usbeam_components_plan *plan)
{
    if (!plan) return;
    usbeam_components_cuda_destroy(plan->cuda);
    usbeam_free(plan->labels);
    usbeam_free(plan->areas);
    usbeam_free(plan);
}

usbeam_cuda_exec *usbeam_components_plan_cuda(usbeam_components_plan *plan)
{
    return plan && plan->cuda ? usbeam_components_cuda_exec(plan->cuda) : NULL;
}

usbeam_status usbeam_components_set_stream(usbeam_components_plan *plan, void *stream)
{
    if (!plan) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "plan must not be NULL");
    /* kept as before, a pointer each execute queues on, not the plan's stream: a caller of this
     * entry never had to keep the stream alive after its last execute */
    plan->call_stream = stream ? stream : AI_LEGACY_STREAM;
    return USBEAM_OK;
}


/* One image of a mask -> mask operation (the operation codes are the CUDA seam's, so both
 * backends take the same), using the plan's label and area scratch. */
static void components_image(usbeam_components_plan *plan, usbeam_components_operation operation, size_t image,
                             const uint8_t *mask, size_t min_area, uint8_t *out)
{
    const size_t h = plan->params.height, w = plan->params.width, n = plan->image_size;
    int32_t *labels = plan->labels + image * n;
    int32_t *areas = plan->areas + image * (n + 1);
    mask += image * n;
    out += image * n;
    const int fill = operation == USBEAM_COMPONENTS_FILL_HOLES;
    const int32_t count = label_image(mask, fill, h, w, plan->params.connectivity, labels);
    memset(areas, 0, ((size_t)count + 1) * sizeof *areas);
    if (fill) {
        /* areas[] marks the background components that reach the border */
        for (size_t x = 0; x < w; ++x) areas[labels[x]] = areas[labels[(h - 1) * w + x]] = 1;
        for (size_t y = 0; y < h; ++y) areas[labels[y * w]] = areas[labels[y * w + w - 1]] = 1;
        for (size_t i = 0; i < n; ++i) out[i] = labels[i] == 0 || !areas[labels[i]];
        return;
    }
    for (size_t i = 0; i < n; ++i) ++areas[labels[i]];
    if (operation == USBEAM_COMPONENTS_LARGEST) {
        int32_t best = 0;
        for (int32_t k = 1; k <= count; ++k)
            if (best == 0 || areas[k] > areas[best]) best = k;
        for (size_t i = 0; i < n; ++i) out[i] = best != 0 && labels[i] == best;
    } else {
        for (size_t i = 0; i < n; ++i) out[i] = labels[i] != 0 && (size_t)areas[labels[i]] >= min_area;
    }
}

/* A CUDA execute, on the stream the deprecated usbeam_components_set_stream gave if any. */
typedef struct {
    usbeam_components_cuda *cuda;
    usbeam_components_operation operation;
    const uint8_t *mask;
    void *out;
    int32_t *counts;
    size_t min_area;
} components_call;

static usbeam_status run_components_cuda(void *context)
{
    components_call *c = context;
    return usbeam_components_cuda_execute(c->cuda, c->operation, c->mask, c->out, c->counts, c->min_area);
}

static usbeam_status components_cuda(usbeam_components_plan *plan, usbeam_components_operation operation,
                                     const uint8_t *mask, void *out, int32_t *counts, size_t min_area)
{
    components_call call = {plan->cuda, operation, mask, out, counts, min_area};
    return ai_execute_on_stream(usbeam_components_cuda_exec(plan->cuda), plan->call_stream, run_components_cuda,
                                &call);
}

static usbeam_status run_mask_operation(usbeam_components_plan *plan, usbeam_components_operation operation,
                                        const uint8_t *mask, size_t min_area, uint8_t *out)
{
    if (!plan || !mask || !out) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "plan, mask and out must not be NULL");
    if (plan->cuda) return components_cuda(plan, operation, mask, out, NULL, min_area);
    const ptrdiff_t n_images = (ptrdiff_t)plan->params.n_images;
#pragma omp parallel for schedule(dynamic, 1) if (n_images > 1)
    for (ptrdiff_t image = 0; image < n_images; ++image)
        components_image(plan, operation, (size_t)image, mask, min_area, out);
    return USBEAM_OK;
}

usbeam_status usbeam_label_execute(usbeam_components_plan *plan, const uint8_t *mask, int32_t *labels,
                                   int32_t *counts)
{
    if (!plan || !mask || !labels || !counts)
        return usbeam_fail(USBEAM_ERR_NULL_POINTER, "plan, mask, labels and counts must not be NULL");
    if (plan->cuda) return components_cuda(plan, USBEAM_COMPONENTS_LABEL, mask, labels, counts, 0);
    const size_t n = plan->image_size;
    const ptrdiff_t n_images = (ptrdiff_t)plan->params.n_images;
#pragma omp parallel for schedule(dynamic, 1) if (n_images > 1)
    for (ptrdiff_t image = 0; image < n_images; ++image)
        counts[image] = label_image(mask + (size_t)image * n, 0, plan->params.height, plan->params.width,
                                    plan->params.connectivity, labels + (size_t)image * n);
    return USBEAM_OK;
}

usbeam_status usbeam_fill_holes_execute(usbeam_components_plan *plan, const uint8_t *mask, uint8_t *out)
{
    return run_mask_operation(plan, USBEAM_COMPONENTS_FILL_HOLES, mask, 0, out);
}

usbeam_status usbeam_largest_component_execute(usbeam_components_plan *plan, const uint8_t *mask,
                                               uint8_t *out)
{
    return run_mask_operation(plan, USBEAM_COMPONENTS_LARGEST, mask, 0, out);
}

usbeam_status usbeam_remove_small_execute(usbeam_components_plan *plan, const uint8_t *mask,
                                          size_t min_area, uint8_t *out)
{
    return run_mask_operation(plan, USBEAM_COMPONENTS_REMOVE_SMALL, mask, min_area, out);
}

/* ---------------------------------------------------------------- region properties */

usbeam_status usbeam_regionprops_basic(const int32_t *labels, size_t height, size_t width,
                                       size_t n_labels, int32_t *area, int32_t *bbox, double *centroid)
{
    if (!labels || (n_labels > 0 && (!area || !bbox || !centroid)))
        return usbeam_fail(USBEAM_ERR_NULL_POINTER, "labels, area, bbox and centroid must not be NULL");
    size_t n;
    if (usbeam_mul_size(height, width, &n) != 0 || n >= (size_t)INT32_MAX || n_labels > (size_t)INT32_MAX)
        return usbeam_fail(USBEAM_ERR_SIZE_OVERFLOW, "labels: %zu x %zu is too large", height, width);
    for (size_t i = 0; i < n; ++i)
        if (labels[i] < 0 || (size_t)labels[i] > n_labels)
            return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "labels: value %d at pixel %zu is outside 0 .. %zu",
                               (int)labels[i], i, n_labels);
    for (size_t k = 0; k < n_labels; ++k) {
        area[k] = 0;
        bbox[4 * k] = bbox[4 * k + 1] = INT32_MAX;
        bbox[4 * k + 2] = bbox[4 * k + 3] = 0;
        centroid[2 * k] = centroid[2 * k + 1] = 0.0;
    }
    /* integer index sums in double are exact below 2^53 (n < 2^31 pixels of index < 2^31) */
    for (size_t y = 0; y < height; ++y) {
        for (size_t x = 0; x < width; ++x) {
            const int32_t label = labels[y * width + x];
            if (label == 0) continue;
            const size_t k = (size_t)label - 1;
            ++area[k];
            int32_t *b = bbox + 4 * k;
            if ((int32_t)y < b[0]) b[0] = (int32_t)y;
            if ((int32_t)x < b[1]) b[1] = (int32_t)x;
            if ((int32_t)y + 1 > b[2]) b[2] = (int32_t)y + 1;
            if ((int32_t)x + 1 > b[3]) b[3] = (int32_t)x + 1;
            centroid[2 * k] += (double)y;
            centroid[2 * k + 1] += (double)x;
        }
    }
    for (size_t k = 0; k < n_labels; ++k) {
        if (area[k] == 0) {
            bbox[4 * k] = bbox[4 * k + 1] = 0;
            centroid[2 * k] = centroid[2 * k + 1] = NAN;
        } else {
            centroid[2 * k] /= area[k];
            centroid[2 * k + 1] /= area[k];
        }
    }
    return USBEAM_OK;
}

