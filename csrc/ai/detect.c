/*
 * detect.c - detection post-processing: decode an anchor-based head, threshold, top-K and
 * class-aware greedy NMS; plain NMS as torchvision.ops.nms / batched_nms.  The plans (for both
 * backends) and the CPU kernels; the CUDA twin of the detect plan is cuda/detect.cu (plain NMS
 * is CPU only: on the GPU the detect plan does it).
 *
 * Layouts: raw        (n_images, n_anchors, 5 + n_classes)  float32 or float16, rows
 *                     [cx, cy, w, h, objectness, class scores...] (YOLOv5 export: pixels of the
 *                     model input, probabilities);
 *          detections (n_images, max_detections, 6) float32 rows [x1, y1, x2, y2, score, class],
 *                     rows past counts[image] set to 0;  counts (n_images) int32.
 * Semantics (the test reference tests/reference/ai_detect.py follows the same text):
 *   score  = objectness * max class score in float32, the lowest class index on ties;
 *            candidate when score > (float)score_threshold (PyTorch compares a float32 tensor
 *            with a Python float in float32);
 *   boxes  = [cx - w/2, cy - h/2, cx + w/2, cy + h/2] in float32 (YOLOv5 xywh2xyxy);
 *   order  = score descending, ties to the lower anchor index (a stable sort), first
 *            max_candidates kept;
 *   NMS    = torchvision nms_kernel.cpp: greedy, a box is dropped when its IoU with an
 *            already kept box is > iou_threshold (float32 IoU, no +1, threshold compared in
 *            double; see ai_math.h).  Keeping box j iff no kept i < j overlaps it is the
 *            same greedy rule evaluated against the kept list, which costs K * max_detections.
 *   classes: torchvision batched_nms' coordinate trick: boxes are shifted by
 *            class * (max coordinate + 1) in float32, the max over all 4K coordinates of the
 *            candidates (a NaN coordinate makes it NaN, as torch.max does).  torchvision
 *            switches to a per-class loop for large inputs; the two agree except where the
 *            float32 offset rounds a coordinate, which is why this one is documented.
 * NaN or inf in raw is refused on the CPU before anything is written (detections and counts
 *   untouched): only the candidates' boxes are read, so the check is usbeam_count_nonfinite
 *   over the whole of raw.  (The NaN rules above are what the CUDA twin does with them; it
 *   flags them in its plan's input-fault word.)
 * CUDA: a CUDA plan runs cuda/detect.cu on its stream (usbeam_detect_plan_cuda);
 *   usbeam_detect_execute_async is the deprecated stream-taking entry (ai_internal.h).
 * Reference: torchvision.ops.boxes.batched_nms and csrc/ops/cpu/nms_kernel.cpp (BSD-3);
 *   YOLOv5 utils/general.py non_max_suppression (AGPL-3; semantics only).
 */
#include "ai/ai_internal.h"
#include "ai/ai_math.h"

#include <math.h>
#include <string.h>

/* Per-image working set of the CPU backend, sized n_anchors (candidates) once in the plan. */
typedef struct nms_scratch {
    uint32_t *keys, *keys_tmp;   /* sort keys */
    uint32_t *index, *index_tmp; /* anchor / box index of each candidate */
    float *boxes;                /* (K, 4) boxes used for IoU (class-offset) */
    float *areas;                /* (K) */
    int32_t *kept;               /* (max_keep) positions in the sorted list */
} nms_scratch;

static void scratch_free(nms_scratch *s)
{
    usbeam_free(s->keys);
    usbeam_free(s->keys_tmp);
    usbeam_free(s->index);
    usbeam_free(s->index_tmp);
    usbeam_free(s->boxes);
    usbeam_free(s->areas);
    usbeam_free(s->kept);
}

static int scratch_alloc(nms_scratch *s, size_t n, size_t max_keep)
{
    s->keys = usbeam_alloc(n * sizeof(uint32_t));
    s->keys_tmp = usbeam_alloc(n * sizeof(uint32_t));
    s->index = usbeam_alloc(n * sizeof(uint32_t));
    s->index_tmp = usbeam_alloc(n * sizeof(uint32_t));
    s->boxes = usbeam_alloc(n * 4 * sizeof(float));
    s->areas = usbeam_alloc(n * sizeof(float));
    s->kept = usbeam_alloc(max_keep * sizeof(int32_t));
    return s->keys && s->keys_tmp && s->index && s->index_tmp && s->boxes && s->areas && s->kept;
}

/* Stable LSD radix sort of (key, index) pairs by key ascending, 8 bits per pass; the sorted
 * pairs end in s->keys / s->index.  Stability gives "ties to the lower index". */
static void radix_sort(nms_scratch *s, size_t n)
{
    uint32_t *keys = s->keys, *index = s->index, *keys_out = s->keys_tmp, *index_out = s->index_tmp;
    for (unsigned shift = 0; shift < 32; shift += 8) {
        size_t counts[257] = {0};
        for (size_t i = 0; i < n; ++i) ++counts[((keys[i] >> shift) & 0xffu) + 1];
        if (counts[((keys[0] >> shift) & 0xffu) + 1] == n) continue; /* one digit: nothing moves */
        for (size_t d = 0; d < 256; ++d) counts[d + 1] += counts[d];
        for (size_t i = 0; i < n; ++i) {
            size_t slot = counts[(keys[i] >> shift) & 0xffu]++;
            keys_out[slot] = keys[i];
            index_out[slot] = index[i];
        }
        uint32_t *t = keys; keys = keys_out; keys_out = t;
        t = index; index = index_out; index_out = t;
    }
    if (keys != s->keys) {
        memcpy(s->keys, keys, n * sizeof *keys);
        memcpy(s->index, index, n * sizeof *index);
    }
}

/* Largest of the K*4 coordinates; NaN as soon as one is NaN (torch.max). */
static float max_coordinate(const float *boxes, size_t n_values)
{
    float best = -INFINITY;
    for (size_t i = 0; i < n_values; ++i) {
        float v = boxes[i];
        if (v != v) return v;
        if (v > best) best = v;
    }
    return best;
}

/* Shift every box of class c by c * (max + 1) (torchvision batched_nms, float32). */
static void offset_by_class(float *boxes, const float *classes_f, size_t k)
{
    const float step = max_coordinate(boxes, 4 * k) + 1.0f;
    for (size_t i = 0; i < k; ++i) {
        float offset = classes_f[i] * step;
        for (int j = 0; j < 4; ++j) boxes[4 * i + j] += offset;
    }
}

/* Greedy NMS of k boxes already in decreasing score order; positions of the kept ones go to
 * s->kept (at most max_keep).  Returns the number kept. */
static size_t greedy_nms(nms_scratch *s, size_t k, ai_iou_threshold threshold, size_t max_keep)
{
    for (size_t i = 0; i < k; ++i) s->areas[i] = ai_box_area(s->boxes + 4 * i);
    size_t n_kept = 0;
    for (size_t j = 0; j < k && n_kept < max_keep; ++j) {
        const float *box = s->boxes + 4 * j;
        int suppressed = 0;
        for (size_t m = 0; m < n_kept && !suppressed; ++m) {
            size_t i = (size_t)s->kept[m];
            suppressed = ai_iou_exceeds(s->boxes + 4 * i, s->areas[i], box, s->areas[j], threshold);
        }
        if (!suppressed) s->kept[n_kept++] = (int32_t)j;
    }
    return n_kept;
}

/* ---------------------------------------------------------------- detection */

struct usbeam_detect_plan {
    usbeam_detect_params params;
    ai_iou_threshold iou;
    float score_threshold;
    nms_scratch *scratch;     /* CPU: one per image, used in parallel */
    float *classes_f;         /* CPU: (n_images, n_anchors) class of each sorted candidate, as float */
    usbeam_detect_cuda *cuda; /* USBEAM_BACKEND_CUDA: the twin in cuda/detect.cu */
};

usbeam_status usbeam_detect_plan_create(const usbeam_detect_params *params, usbeam_backend backend,
                                        usbeam_detect_plan **plan)
{
    usbeam_status st;
    if (!params || !plan) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "params and plan must not be NULL");
    *plan = NULL;
    if ((st = ai_check_backend(backend)) != USBEAM_OK) return st;
    if (params->n_images == 0) return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "n_images must be >= 1");
    if (params->n_anchors == 0 || params->n_anchors > (size_t)INT32_MAX)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "n_anchors must be in 1 .. %d (got %zu)", INT32_MAX,
                           params->n_anchors);
    if (params->n_classes == 0 || params->n_classes > (1u << 24))
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT,
                           "n_classes must be in 1 .. 2^24 (got %zu): raw rows are [cx, cy, w, h, obj, classes...]",
                           params->n_classes);
    if (params->in_dtype != USBEAM_DTYPE_FLOAT32 && params->in_dtype != USBEAM_DTYPE_FLOAT16)
        return usbeam_fail(USBEAM_ERR_INVALID_DTYPE, "raw: dtype must be float32 or float16");
    if ((st = usbeam_check_finite("conf", params->score_threshold)) != USBEAM_OK) return st;
    if (!(params->iou_threshold >= 0.0 && params->iou_threshold <= 1.0))
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "iou must be in [0, 1] (got %g)", params->iou_threshold);
    if (params->max_candidates == 0 || params->max_candidates > params->n_anchors)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "max_candidates must be in 1 .. n_anchors = %zu (got %zu)",
                           params->n_anchors, params->max_candidates);
    size_t raw_count, scratch_bytes, out_count;
    if (params->max_detections == 0 || params->max_detections > (size_t)INT32_MAX ||
        usbeam_mul_size3(params->n_images, params->max_detections, 6 * sizeof(float), &out_count) != 0 ||
        out_count > USBEAM_MAX_ALLOCATION)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "max_det must be in 1 .. %d with a detections buffer that fits memory (got %zu)",
                           INT32_MAX, params->max_detections);
    if (usbeam_mul_size3(params->n_images, params->n_anchors, 5 + params->n_classes, &raw_count) != 0 ||
        usbeam_mul_size3(params->n_images, params->n_anchors, 48, &scratch_bytes) != 0 ||
        scratch_bytes > USBEAM_MAX_ALLOCATION)
        return usbeam_fail(USBEAM_ERR_SIZE_OVERFLOW, "raw: (%zu, %zu, %zu) is too large", params->n_images,
                           params->n_anchors, 5 + params->n_classes);

    usbeam_detect_plan *p = usbeam_alloc(sizeof *p);
    if (!p) return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "detect plan");
    p->params = *params;
    p->iou = ai_make_iou_threshold(params->iou_threshold);
    p->score_threshold = (float)params->score_threshold;
    if (backend == USBEAM_BACKEND_CPU) {
        p->scratch = usbeam_alloc(params->n_images * sizeof *p->scratch);
        p->classes_f = usbeam_alloc(params->n_images * params->n_anchors * sizeof(float));
        int ok = p->scratch && p->classes_f;
        for (size_t i = 0; ok && i < params->n_images; ++i)
            ok = scratch_alloc(&p->scratch[i], params->n_anchors, params->max_detections);
        if (!ok) {
            usbeam_detect_plan_destroy(p);
            return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "detect plan: scratch for %zu anchors",
                               params->n_anchors);
        }
    }
    if (backend == USBEAM_BACKEND_CUDA && (st = usbeam_detect_cuda_create(params, &p->cuda)) != USBEAM_OK) {
        usbeam_detect_plan_destroy(p);
        return st;
    }
    *plan = p;
    return USBEAM_OK;
}

void usbeam_detect_plan_destroy(usbeam_detect_plan *plan)
{
    if (!plan) return;
    usbeam_detect_cuda_destroy(plan->cuda);
    if (plan->scratch)
        for (size_t i = 0; i < plan->params.n_images; ++i) scratch_free(&plan->scratch[i]);
    usbeam_free(plan->scratch);
    usbeam_free(plan->classes_f);
    usbeam_free(plan);
}

static inline float raw_value(const void *raw, usbeam_dtype dtype, size_t index)
{
    return dtype == USBEAM_DTYPE_FLOAT16 ? ai_half_bits_to_float(((const uint16_t *)raw)[index])
                                         : ((const float *)raw)[index];
}

/* Best class of one row as torch.max / numpy.argmax: the lowest index among equal maxima,
 * and the first NaN wins (the score is then NaN and the row is never a candidate). */
static void best_class(const void *raw, usbeam_dtype dtype, size_t row, size_t n_classes, float *score,
                       uint32_t *cls)
{
    float best = raw_value(raw, dtype, row + 5);
    uint32_t best_index = 0;
    for (size_t c = 1; c < n_classes && best == best; ++c) {
        float v = raw_value(raw, dtype, row + 5 + c);
        if (v > best || v != v) {
            best = v;
            best_index = (uint32_t)c;
        }
    }
    *score = best;
    *cls = best_index;
}

static void detect_image(usbeam_detect_plan *plan, size_t image, const void *raw, float *detections,
                         int32_t *count)
{
    const usbeam_detect_params *prm = &plan->params;
    nms_scratch *s = &plan->scratch[image];
    float *classes_f = plan->classes_f + image * prm->n_anchors;
    const size_t stride = 5 + prm->n_classes;
    const size_t base = image * prm->n_anchors * stride;

    size_t n = 0;
    for (size_t a = 0; a < prm->n_anchors; ++a) {
        const size_t row = base + a * stride;
        float class_score;
        uint32_t cls;
        best_class(raw, prm->in_dtype, row, prm->n_classes, &class_score, &cls);
        float score = raw_value(raw, prm->in_dtype, row + 4) * class_score;
        if (score > plan->score_threshold) {
            s->keys[n] = ai_score_descending_key(score);
            s->index[n] = (uint32_t)a;
            ++n;
        }
    }
    size_t n_kept = 0;
    if (n > 0) {
        radix_sort(s, n);
        const size_t k = n < prm->max_candidates ? n : prm->max_candidates;
        for (size_t i = 0; i < k; ++i) {
            const size_t row = base + (size_t)s->index[i] * stride;
            float cx = raw_value(raw, prm->in_dtype, row), cy = raw_value(raw, prm->in_dtype, row + 1);
            float half_w = raw_value(raw, prm->in_dtype, row + 2) / 2.0f;
            float half_h = raw_value(raw, prm->in_dtype, row + 3) / 2.0f;
            float *box = s->boxes + 4 * i;
            box[0] = cx - half_w;
            box[1] = cy - half_h;
            box[2] = cx + half_w;
            box[3] = cy + half_h;
            float class_score;
            uint32_t cls;
            best_class(raw, prm->in_dtype, row, prm->n_classes, &class_score, &cls);
            classes_f[i] = (float)cls;
        }
        if (!prm->class_agnostic) offset_by_class(s->boxes, classes_f, k);
        n_kept = greedy_nms(s, k, plan->iou, prm->max_detections);
    }
    float *out = detections + image * prm->max_detections * 6;
    for (size_t m = 0; m < n_kept; ++m) {
        const size_t i = (size_t)s->kept[m];
        const size_t row = base + (size_t)s->index[i] * stride;
        float cx = raw_value(raw, prm->in_dtype, row), cy = raw_value(raw, prm->in_dtype, row + 1);
        float half_w = raw_value(raw, prm->in_dtype, row + 2) / 2.0f;
        float half_h = raw_value(raw, prm->in_dtype, row + 3) / 2.0f;
        float class_score;
        uint32_t cls;
        best_class(raw, prm->in_dtype, row, prm->n_classes, &class_score, &cls);
        float *d = out + 6 * m;
        d[0] = cx - half_w;
        d[1] = cy - half_h;
        d[2] = cx + half_w;
        d[3] = cy + half_h;
        d[4] = raw_value(raw, prm->in_dtype, row + 4) * class_score;
        d[5] = (float)cls;
    }
    memset(out + 6 * n_kept, 0, (prm->max_detections - n_kept) * 6 * sizeof(float));
    *count = (int32_t)n_kept;
}

usbeam_cuda_exec *usbeam_detect_plan_cuda(usbeam_detect_plan *plan)
{
    return plan && plan->cuda ? usbeam_detect_cuda_exec(plan->cuda) : NULL;
}

usbeam_status usbeam_detect_execute(usbeam_detect_plan *plan, const void *raw, float *detections,
                                    int32_t *counts)
{
    if (!plan || !raw || !detections || !counts)
        return usbeam_fail(USBEAM_ERR_NULL_POINTER, "plan, raw, detections and counts must not be NULL");
    if (plan->cuda) return usbeam_detect_cuda_execute(plan->cuda, raw, detections, counts); /* device pointers */
    const usbeam_detect_params *prm = &plan->params;
    if (usbeam_count_nonfinite(raw, prm->in_dtype, prm->n_images * prm->n_anchors * (5 + prm->n_classes)))
        return usbeam_fail_nonfinite("raw", "detect_postprocess refuses them; detections and counts are untouched");
    const ptrdiff_t n_images = (ptrdiff_t)plan->params.n_images;
#pragma omp parallel for schedule(dynamic, 1) if (n_images > 1)
    for (ptrdiff_t image = 0; image < n_images; ++image)
        detect_image(plan, (size_t)image, raw, detections, counts + image);
    return USBEAM_OK;
}

typedef struct {
    usbeam_detect_plan *plan;
    const void *raw;
    float *detections;
    int32_t *counts;
} detect_call;

static usbeam_status run_detect(void *context)
{
    detect_call *c = context;
    return usbeam_detect_execute(c->plan, c->raw, c->detections, c->counts);
}

usbeam_status usbeam_detect_execute_async(usbeam_detect_plan *plan, const void *raw, void *detections,
                                          void *counts, void *stream)
{
    if (!plan) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "plan, raw, detections and counts must not be NULL");
    detect_call call = {plan, raw, detections, counts};
    return ai_execute_on_stream(usbeam_detect_plan_cuda(plan), stream ? stream : AI_LEGACY_STREAM, run_detect,
                                &call);
}

/* ---------------------------------------------------------------- plain NMS */

struct usbeam_nms_plan {
    usbeam_nms_params params;
    ai_iou_threshold iou;
    nms_scratch scratch;
    float *classes_f;
};

usbeam_status usbeam_nms_plan_create(const usbeam_nms_params *params, usbeam_backend backend,
                                     usbeam_nms_plan **plan)
{
    if (!params || !plan) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "params and plan must not be NULL");
    *plan = NULL;
    if (backend != USBEAM_BACKEND_CPU)
        return usbeam_fail(USBEAM_ERR_NO_BACKEND,
                           "backend: plain nms runs on the CPU; on the GPU use the detect plan");
    if (params->n_boxes == 0 || params->n_boxes > (size_t)INT32_MAX)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "boxes: the number of boxes must be in 1 .. %d (got %zu)",
                           INT32_MAX, params->n_boxes);
    if (!(params->iou_threshold >= 0.0 && params->iou_threshold <= 1.0))
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "iou must be in [0, 1] (got %g)", params->iou_threshold);
    if (params->max_keep == 0 || params->max_keep > params->n_boxes)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "max_keep must be in 1 .. %zu (got %zu)",
                           params->n_boxes, params->max_keep);
    usbeam_nms_plan *p = usbeam_alloc(sizeof *p);
    if (!p) return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "nms plan");
    p->params = *params;
    p->iou = ai_make_iou_threshold(params->iou_threshold);
    p->classes_f = usbeam_alloc(params->n_boxes * sizeof(float));
    if (!p->classes_f || !scratch_alloc(&p->scratch, params->n_boxes, params->max_keep)) {
        usbeam_nms_plan_destroy(p);
        return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "nms plan: scratch for %zu boxes", params->n_boxes);
    }
    *plan = p;
    return USBEAM_OK;
}

void usbeam_nms_plan_destroy(usbeam_nms_plan *plan)
{
    if (!plan) return;
    scratch_free(&plan->scratch);
    usbeam_free(plan->classes_f);
    usbeam_free(plan);
}

usbeam_status usbeam_nms_execute(usbeam_nms_plan *plan, const float *boxes, const float *scores,
                                 const int32_t *classes, int32_t *keep, int32_t *count)
{
    if (!plan || !boxes || !scores || !keep || !count)
        return usbeam_fail(USBEAM_ERR_NULL_POINTER, "plan, boxes, scores, keep and count must not be NULL");
    nms_scratch *s = &plan->scratch;
    const size_t n = plan->params.n_boxes;
    for (size_t i = 0; i < n; ++i) {
        s->keys[i] = ai_score_descending_key(scores[i]);
        s->index[i] = (uint32_t)i;
    }
    radix_sort(s, n);
    for (size_t i = 0; i < n; ++i) {
        memcpy(s->boxes + 4 * i, boxes + 4 * (size_t)s->index[i], 4 * sizeof(float));
        if (classes) plan->classes_f[i] = (float)classes[s->index[i]];
    }
    if (classes) offset_by_class(s->boxes, plan->classes_f, n);
    size_t n_kept = greedy_nms(s, n, plan->iou, plan->params.max_keep);
    for (size_t m = 0; m < plan->params.max_keep; ++m)
        keep[m] = m < n_kept ? (int32_t)s->index[s->kept[m]] : -1;
    *count = (int32_t)n_kept;
    return USBEAM_OK;
}
