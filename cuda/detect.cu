/*
 * detect.cu - detection post-processing (decode, threshold, top-K, class-aware greedy NMS) for a
 * batch of raw heads, entirely on the device: CUDA twin of csrc/ai/detect.c.
 *
 * Layouts: raw (n_images, n_anchors, 5 + n_classes) float32 or float16, rows [cx, cy, w, h,
 *   objectness, class scores...] -> detections (n_images, max_detections, 6) float32 rows
 *   [x1, y1, x2, y2, score, class], zero past the count, and counts (n_images) int32; all device.
 * Units: pixels of the model input (boxes), probabilities (scores).
 * Semantics: as csrc/ai/detect.c (torchvision nms / batched_nms, YOLOv5 decoding).
 * Stages, all queued on the plan's stream (runtime/exec.cuh) with no host synchronisation:
 *   "detect.decode": per anchor, the score and a 64-bit key (descending-score key << 32 |
 *      anchor), or all ones when not a candidate; a per-image candidate count (atomic,
 *      order-free);
 *   "detect.sort": the keys of each image sorted (cub::DeviceSegmentedRadixSort): score
 *      descending, ties to the lower anchor - the stable order of the CPU code, made unique by
 *      the anchor bits;
 *   "detect.overlap": the first K = min(count, max_candidates) boxes gathered, the max
 *      coordinate per image (NaN-propagating), the class offset, the areas, then the IoU bit
 *      matrix of the K boxes, 64 columns per word (torchvision's CUDA layout);
 *   "detect.nms": one warp per image walks the matrix greedily, skipping suppressed boxes a
 *      word at a time, until max_detections are kept, then writes the rows and the count.
 * All float arithmetic uses _rn intrinsics in the C code's order (no FMA contraction), so
 * results are bit-identical to the CPU backend.  K is limited to 65536 on this backend (the
 * removed-bit set of a walk lives in shared memory).
 * Scratch: the plan's buffers serve one execute at a time, which the plan's stream orders
 * (usbeam_cuda_exec_set_stream makes a new stream wait for the work queued on the old one).
 * Non-finite input: the CPU refuses a head with NaN or inf anywhere; here the kernels keep
 * torchvision's NaN rules (csrc/ai/detect.c) and flag what they read in the plan's mapped
 * fault word (USBEAM_INPUT_FAULT_NONFINITE): every objectness and class score (decode), and the
 * box of every candidate within the top K (overlap).  A NaN box of a row that is not a
 * candidate is read by no kernel and changes no output.
 * Reference: torchvision csrc/ops/cuda/nms_kernel.cu (the bit-matrix layout; BSD-3).
 */
#include "ai/ai_math.h"
#include "runtime/exec.cuh"

#include <cub/cub.cuh>
#include <math.h>
#include <stdint.h>

namespace {

enum { STAGE_DECODE = 0, STAGE_SORT = 1, STAGE_OVERLAP = 2, STAGE_NMS = 3 };
const char *const STAGE_NAMES[] = {"detect.decode", "detect.sort", "detect.overlap", "detect.nms"};
constexpr int WORD_BITS = 64;
constexpr size_t MAX_CUDA_CANDIDATES = 65536;

struct raw_view {
    const void *data;
    int half;
    size_t stride; /* 5 + n_classes */
    int n_classes;
};

__device__ __forceinline__ float raw_at(const raw_view &r, size_t index)
{
    return r.half ? ai_half_bits_to_float(((const uint16_t *)r.data)[index]) : ((const float *)r.data)[index];
}

/* torch.max / numpy.argmax over the class scores: first maximum, first NaN wins.  *finite
 * (when not NULL) is cleared when a score read is NaN or inf: the scan stops at the first NaN,
 * which is one, so a row with any non-finite class score clears it. */
__device__ __forceinline__ float best_class(const raw_view &r, size_t row, int *cls, bool *finite = nullptr)
{
    float best = raw_at(r, row + 5);
    bool all_finite = isfinite(best);
    int index = 0;
    for (int c = 1; c < r.n_classes && best == best; ++c) {
        float v = raw_at(r, row + 5 + c);
        all_finite &= isfinite(v);
        if (v > best || v != v) {
            best = v;
            index = c;
        }
    }
    if (finite) *finite = all_finite;
    *cls = index;
    return best;
}

__device__ __forceinline__ void decode_box(const raw_view &r, size_t row, float *box)
{
    const float cx = raw_at(r, row), cy = raw_at(r, row + 1);
    const float half_w = __fdiv_rn(raw_at(r, row + 2), 2.0f), half_h = __fdiv_rn(raw_at(r, row + 3), 2.0f);
    box[0] = __fsub_rn(cx, half_w);
    box[1] = __fsub_rn(cy, half_h);
    box[2] = __fadd_rn(cx, half_w);
    box[3] = __fadd_rn(cy, half_h);
}

__global__ void decode_kernel(raw_view r, size_t n_anchors, size_t n_total, float threshold,
                              unsigned long long *keys, int *counts, unsigned *input_fault)
{
    bool non_finite = false;
    for (size_t g = blockIdx.x * (size_t)blockDim.x + threadIdx.x; g < n_total; g += (size_t)gridDim.x * blockDim.x) {
        const size_t row = g * r.stride;
        int cls;
        bool finite;
        const float objectness = raw_at(r, row + 4);
        const float score = __fmul_rn(objectness, best_class(r, row, &cls, &finite));
        non_finite |= !(finite && isfinite(objectness));
        unsigned long long key = ~0ull;
        if (score > threshold) {
            const size_t anchor = g % n_anchors;
            key = ((unsigned long long)ai_score_descending_key(score) << 32) | (unsigned long long)anchor;
            atomicAdd(&counts[g / n_anchors], 1);
        }
        keys[g] = key;
    }
    if (non_finite) *(volatile unsigned *)input_fault = USBEAM_INPUT_FAULT_NONFINITE; /* mapped host word */
}

/* Sorted position p of image b: its box (xyxy), class (as float) and, after the offset, area. */
__global__ void gather_kernel(raw_view r, size_t n_anchors, int k_max, const unsigned long long *keys_sorted,
                              const int *counts, float *boxes, float *classes_f, unsigned *input_fault)
{
    const int b = blockIdx.y;
    const int k = min(counts[b], k_max);
    bool non_finite = false;
    for (int p = blockIdx.x * blockDim.x + threadIdx.x; p < k; p += gridDim.x * blockDim.x) {
        const size_t anchor = (size_t)(keys_sorted[(size_t)b * n_anchors + p] & 0xffffffffull);
        const size_t row = ((size_t)b * n_anchors + anchor) * r.stride;
        int cls;
        best_class(r, row, &cls);
        float *box = boxes + ((size_t)b * k_max + p) * 4;
        decode_box(r, row, box);
        for (int j = 0; j < 4; ++j) non_finite |= !isfinite(raw_at(r, row + j));
        classes_f[(size_t)b * k_max + p] = (float)cls;
    }
    if (non_finite) *(volatile unsigned *)input_fault = USBEAM_INPUT_FAULT_NONFINITE; /* mapped host word */
}

__device__ __forceinline__ float nan_max(float a, float b)
{
    if (a != a) return a;
    if (b != b) return b;
    return b > a ? b : a;
}

/* One block per image: max coordinate (torch.max), class offsets, areas. */
__global__ void offset_kernel(int k_max, const int *counts, int class_agnostic, float *boxes,
                              const float *classes_f, float *areas)
{
    const int b = blockIdx.x;
    const int k = min(counts[b], k_max);
    float *image_boxes = boxes + (size_t)b * k_max * 4;
    __shared__ float partial[256];
    if (!class_agnostic) {
        float best = -INFINITY;
        for (int i = threadIdx.x; i < 4 * k; i += blockDim.x) best = nan_max(best, image_boxes[i]);
        partial[threadIdx.x] = best;
        __syncthreads();
        for (int half = blockDim.x / 2; half > 0; half /= 2) {
            if ((int)threadIdx.x < half) partial[threadIdx.x] = nan_max(partial[threadIdx.x], partial[threadIdx.x + half]);
            __syncthreads();
        }
        const float step = __fadd_rn(partial[0], 1.0f);
        for (int p = threadIdx.x; p < k; p += blockDim.x) {
            const float offset = __fmul_rn(classes_f[(size_t)b * k_max + p], step);
            for (int j = 0; j < 4; ++j) image_boxes[4 * p + j] = __fadd_rn(image_boxes[4 * p + j], offset);
        }
        __syncthreads();
    }
    for (int p = threadIdx.x; p < k; p += blockDim.x) areas[(size_t)b * k_max + p] = ai_box_area(image_boxes + 4 * p);
}

/* Block (column word, row block of 64, image): bit j of word (i, col) = box j (> i) overlaps i. */
__global__ void iou_mask_kernel(int k_max, size_t words, const int *counts, const float *boxes, const float *areas,
                                ai_iou_threshold threshold, unsigned long long *mask)
{
    const int b = blockIdx.z;
    const int k = min(counts[b], k_max);
    const int row_start = blockIdx.y * WORD_BITS, col_start = blockIdx.x * WORD_BITS;
    if (row_start >= k || col_start >= k || col_start + WORD_BITS <= row_start) return;
    __shared__ float col_boxes[WORD_BITS * 4];
    __shared__ float col_areas[WORD_BITS];
    const float *image_boxes = boxes + (size_t)b * k_max * 4;
    const float *image_areas = areas + (size_t)b * k_max;
    const int n_cols = min(WORD_BITS, k - col_start);
    if ((int)threadIdx.x < n_cols) {
        for (int j = 0; j < 4; ++j) col_boxes[4 * threadIdx.x + j] = image_boxes[4 * (col_start + threadIdx.x) + j];
        col_areas[threadIdx.x] = image_areas[col_start + threadIdx.x];
    }
    __syncthreads();
    const int i = row_start + threadIdx.x;
    if (i >= k) return;
    const float *box = image_boxes + 4 * i;
    const float area = image_areas[i];
    unsigned long long bits = 0;
    for (int c = 0; c < n_cols; ++c) {
        const int j = col_start + c;
        if (j > i && ai_iou_exceeds(box, area, col_boxes + 4 * c, col_areas[c], threshold)) bits |= 1ull << c;
    }
    mask[((size_t)b * k_max + i) * words + blockIdx.x] = bits;
}

/* One warp per image: the greedy walk, then the output rows and the count. */
__global__ void walk_kernel(raw_view r, size_t n_anchors, int k_max, size_t words, int max_det, const int *counts,
                            const unsigned long long *keys_sorted, const unsigned long long *mask, int *kept,
                            float *detections, int *out_counts)
{
    extern __shared__ unsigned long long removed[];
    const int b = blockIdx.x, lane = threadIdx.x;
    const int k = min(counts[b], k_max);
    const size_t n_words = ((size_t)k + WORD_BITS - 1) / WORD_BITS;
    for (size_t w = lane; w < n_words; w += 32) removed[w] = 0;
    __syncwarp();
    int n_kept = 0;
    int *image_kept = kept + (size_t)b * max_det;
    for (size_t w = 0; w < n_words && n_kept < max_det; ++w) {
        const int valid = (int)min((size_t)WORD_BITS, (size_t)k - w * WORD_BITS);
        const unsigned long long valid_bits = valid == WORD_BITS ? ~0ull : ((1ull << valid) - 1ull);
        unsigned long long candidates = ~removed[w] & valid_bits;
        /* Every lane reads removed[] before any lane ORs the next row into it: without these
         * barriers a lagging lane would read bits of a row the others already added (which
         * cannot change its next pick, but is a shared-memory race all the same). */
        __syncwarp();
        while (candidates && n_kept < max_det) {
            const int bit = __ffsll((long long)candidates) - 1;
            const int i = (int)(w * WORD_BITS) + bit;
            if (lane == 0) image_kept[n_kept] = i;
            ++n_kept;
            const unsigned long long *row = mask + ((size_t)b * k_max + i) * words;
            for (size_t v = w + lane; v < n_words; v += 32) removed[v] |= row[v];
            __syncwarp();
            const unsigned long long above = bit == 63 ? 0ull : (~0ull << (bit + 1));
            candidates = ~removed[w] & valid_bits & above;
            __syncwarp();
        }
    }
    __syncwarp();
    float *out = detections + (size_t)b * max_det * 6;
    for (int m = lane; m < max_det; m += 32) {
        float *d = out + 6 * (size_t)m;
        if (m < n_kept) {
            const int i = image_kept[m];
            const size_t anchor = (size_t)(keys_sorted[(size_t)b * n_anchors + i] & 0xffffffffull);
            const size_t row = ((size_t)b * n_anchors + anchor) * r.stride;
            int cls;
            const float class_score = best_class(r, row, &cls);
            decode_box(r, row, d);
            d[4] = __fmul_rn(raw_at(r, row + 4), class_score);
            d[5] = (float)cls;
        } else {
            for (int j = 0; j < 6; ++j) d[j] = 0.0f;
        }
    }
    if (lane == 0) out_counts[b] = n_kept;
}

} // namespace

struct usbeam_detect_cuda {
    usbeam_cuda_exec *exec;
    usbeam_detect_params params;
    ai_iou_threshold iou;
    float score_threshold;             /* (float)score_threshold, as detect.c compares */
    size_t words;                      /* ceil(K / 64) */
    unsigned long long *keys, *keys_sorted; /* (n_images, n_anchors) sort keys, device */
    int *segment_offsets;              /* (n_images + 1) image b's keys start at b * n_anchors */
    int *candidate_counts;             /* (n_images) */
    float *boxes, *areas, *classes_f;  /* (n_images, K, 4), (n_images, K), (n_images, K) */
    unsigned long long *iou_mask;      /* (n_images, K, words) */
    int *kept;                         /* (n_images, max_detections) sorted positions */
    void *sort_storage;                /* cub's temporary storage, sized at create */
    size_t sort_storage_bytes;
    unsigned *input_fault;             /* mapped host word (exec.cuh) */
    unsigned grid_cap;                 /* grid-stride launches: a few waves of the device */
};

/* A plan buffer of count elements of element bytes (the C plan bounds every product). */
static usbeam_status plan_buffer(usbeam_cuda_exec *e, size_t count, size_t element, const char *what, void **ptr)
{
    size_t bytes;
    if (usbeam_mul_size(count, element, &bytes) != 0)
        return usbeam_fail(USBEAM_ERR_SIZE_OVERFLOW, "%s: %zu elements are too many", what, count);
    return usbeam_cuda_exec_alloc(e, bytes, what, ptr);
}

extern "C" usbeam_status usbeam_detect_cuda_create(const usbeam_detect_params *params, usbeam_detect_cuda **out)
{
    if (!params || !out) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "params and plan must not be NULL");
    *out = nullptr;
    const size_t n_images = params->n_images, n_anchors = params->n_anchors, k = params->max_candidates;
    if (k > MAX_CUDA_CANDIDATES)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "max_candidates must be <= %zu on the CUDA backend (got %zu)",
                           MAX_CUDA_CANDIDATES, k);
    if (n_images > 65535) /* one grid row (gather) or block (walk) per image */
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "n_images must be <= 65535 on the CUDA backend (got %zu)",
                           n_images);
    const size_t total = n_images * n_anchors;
    if (total > (size_t)INT32_MAX) /* cub's segmented sort counts items in int */
        return usbeam_fail(USBEAM_ERR_SIZE_OVERFLOW, "raw: n_images * n_anchors must be < 2^31 on the CUDA backend");
    usbeam_detect_cuda *p = (usbeam_detect_cuda *)usbeam_alloc(sizeof *p);
    if (!p) return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "detect CUDA plan");
    p->params = *params;
    p->iou = ai_make_iou_threshold(params->iou_threshold);
    p->score_threshold = (float)params->score_threshold;
    p->words = (k + WORD_BITS - 1) / WORD_BITS;
    usbeam_status st = usbeam_cuda_exec_create(STAGE_NAMES, 4, &p->exec);
    usbeam_cuda_exec *e = p->exec;
    const size_t ull = sizeof(unsigned long long);
    if (st == USBEAM_OK) st = plan_buffer(e, total, ull, "detect keys", (void **)&p->keys);
    if (st == USBEAM_OK) st = plan_buffer(e, total, ull, "detect sorted keys", (void **)&p->keys_sorted);
    if (st == USBEAM_OK) st = plan_buffer(e, n_images + 1, sizeof(int), "detect offsets", (void **)&p->segment_offsets);
    if (st == USBEAM_OK) st = plan_buffer(e, n_images, sizeof(int), "detect counts", (void **)&p->candidate_counts);
    if (st == USBEAM_OK) st = plan_buffer(e, n_images * k, 4 * sizeof(float), "detect boxes", (void **)&p->boxes);
    if (st == USBEAM_OK) st = plan_buffer(e, n_images * k, sizeof(float), "detect areas", (void **)&p->areas);
    if (st == USBEAM_OK) st = plan_buffer(e, n_images * k, sizeof(float), "detect classes", (void **)&p->classes_f);
    if (st == USBEAM_OK) st = plan_buffer(e, n_images * k * p->words, ull, "detect IoU mask", (void **)&p->iou_mask);
    if (st == USBEAM_OK)
        st = plan_buffer(e, n_images * params->max_detections, sizeof(int), "detect kept", (void **)&p->kept);
    if (st == USBEAM_OK) {
        /* segment b of the sort is image b's anchors: offsets b * n_anchors, b = 0 .. n_images */
        int *offsets = (int *)usbeam_alloc((n_images + 1) * sizeof(int));
        if (!offsets) st = usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "detect CUDA plan: segment offsets");
        for (size_t b = 0; offsets && b <= n_images; ++b) offsets[b] = (int)(b * n_anchors);
        if (st == USBEAM_OK) st = usbeam_cuda_exec_upload(e, p->segment_offsets, offsets, (n_images + 1) * sizeof(int));
        usbeam_free(offsets);
    }
    if (st == USBEAM_OK) /* a size query: cub reads no pointer when the storage is NULL */
        st = usbeam_cuda_check(cub::DeviceSegmentedRadixSort::SortKeys(nullptr, p->sort_storage_bytes, p->keys,
                                                                       p->keys_sorted, (int)total, (int)n_images,
                                                                       p->segment_offsets, p->segment_offsets + 1),
                               "cub::DeviceSegmentedRadixSort::SortKeys (size)", __FILE__, __LINE__);
    if (st == USBEAM_OK) st = usbeam_cuda_exec_alloc(e, p->sort_storage_bytes, "detect sort storage", &p->sort_storage);
    if (st == USBEAM_OK) st = usbeam_cuda_exec_input_fault_flag(e, &p->input_fault);
    if (st == USBEAM_OK) st = usbeam_cuda_exec_grid_cap(e, &p->grid_cap);
    if (st != USBEAM_OK) {
        usbeam_detect_cuda_destroy(p);
        return st;
    }
    *out = p;
    return USBEAM_OK;
}

extern "C" void usbeam_detect_cuda_destroy(usbeam_detect_cuda *p)
{
    if (!p) return;
    usbeam_cuda_exec_destroy(p->exec); /* frees every buffer above with the stream and events */
    usbeam_free(p);
}

extern "C" usbeam_cuda_exec *usbeam_detect_cuda_exec(usbeam_detect_cuda *p) { return p ? p->exec : nullptr; }

static usbeam_status detect_cuda_run(usbeam_detect_cuda *p, const void *raw, float *detections, int *counts)
{
    usbeam_cuda_exec *e = p->exec;
    const cudaStream_t stream = usbeam_cuda_exec_cuda_stream(e);
    const usbeam_detect_params *prm = &p->params;
    const size_t total = prm->n_images * prm->n_anchors;
    const int k_max = (int)prm->max_candidates;
    const raw_view r = {raw, prm->in_dtype == USBEAM_DTYPE_FLOAT16, 5 + prm->n_classes, (int)prm->n_classes};
    const unsigned decode_blocks = (unsigned)((total + 255) / 256);

    usbeam_status st = usbeam_cuda_stage_begin(e, STAGE_DECODE);
    if (st != USBEAM_OK) return st;
    USBEAM_CUDA_TRY(cudaMemsetAsync(p->candidate_counts, 0, prm->n_images * sizeof(int), stream));
    decode_kernel<<<decode_blocks < p->grid_cap ? decode_blocks : p->grid_cap, 256, 0, stream>>>(
        r, prm->n_anchors, total, p->score_threshold, p->keys, p->candidate_counts, p->input_fault);
    USBEAM_CUDA_TRY(cudaGetLastError());
    if ((st = usbeam_cuda_stage_end(e, STAGE_DECODE)) != USBEAM_OK) return st;

    if ((st = usbeam_cuda_stage_begin(e, STAGE_SORT)) != USBEAM_OK) return st;
    size_t storage = p->sort_storage_bytes;
    USBEAM_CUDA_TRY(cub::DeviceSegmentedRadixSort::SortKeys(p->sort_storage, storage, p->keys, p->keys_sorted,
                                                            (int)total, (int)prm->n_images, p->segment_offsets,
                                                            p->segment_offsets + 1, 0, 64, stream));
    if ((st = usbeam_cuda_stage_end(e, STAGE_SORT)) != USBEAM_OK) return st;

    if ((st = usbeam_cuda_stage_begin(e, STAGE_OVERLAP)) != USBEAM_OK) return st;
    const dim3 gather_grid((unsigned)((k_max + 255) / 256), (unsigned)prm->n_images);
    gather_kernel<<<gather_grid, 256, 0, stream>>>(r, prm->n_anchors, k_max, p->keys_sorted, p->candidate_counts,
                                                   p->boxes, p->classes_f, p->input_fault);
    USBEAM_CUDA_TRY(cudaGetLastError());
    offset_kernel<<<(unsigned)prm->n_images, 256, 0, stream>>>(k_max, p->candidate_counts, prm->class_agnostic,
                                                               p->boxes, p->classes_f, p->areas);
    USBEAM_CUDA_TRY(cudaGetLastError());
    const dim3 mask_grid((unsigned)p->words, (unsigned)p->words, (unsigned)prm->n_images);
    iou_mask_kernel<<<mask_grid, WORD_BITS, 0, stream>>>(k_max, p->words, p->candidate_counts, p->boxes, p->areas,
                                                         p->iou, p->iou_mask);
    USBEAM_CUDA_TRY(cudaGetLastError());
    if ((st = usbeam_cuda_stage_end(e, STAGE_OVERLAP)) != USBEAM_OK) return st;

    if ((st = usbeam_cuda_stage_begin(e, STAGE_NMS)) != USBEAM_OK) return st;
    walk_kernel<<<(unsigned)prm->n_images, 32, p->words * sizeof(unsigned long long), stream>>>(
        r, prm->n_anchors, k_max, p->words, (int)prm->max_detections, p->candidate_counts, p->keys_sorted,
        p->iou_mask, p->kept, detections, counts);
    USBEAM_CUDA_TRY(cudaGetLastError());
    return usbeam_cuda_stage_end(e, STAGE_NMS);
}

extern "C" usbeam_status usbeam_detect_cuda_execute(usbeam_detect_cuda *p, const void *raw, void *detections,
                                                    void *counts)
{
    if (!p || !raw || !detections || !counts)
        return usbeam_fail(USBEAM_ERR_NULL_POINTER, "plan, raw, detections and counts must not be NULL");
    usbeam_status st = usbeam_cuda_exec_begin(p->exec);
    if (st != USBEAM_OK) return st;
    st = detect_cuda_run(p, raw, (float *)detections, (int *)counts);
    usbeam_cuda_exec_end(p->exec);
    return st;
}
