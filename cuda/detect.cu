/*
 * detect.cu - CUDA twin of csrc/detect.c: detection post-processing (decode, threshold,
 * top-K, class-aware greedy NMS) for a batch of raw heads, entirely on the device.
 *
 * Layouts and semantics: as csrc/detect.c (raw (n_images, n_anchors, 5 + n_classes) float32
 * or float16 -> detections (n_images, max_detections, 6) float32 and counts (n_images) int32).
 * Pipeline, all queued on the caller's stream with no host synchronisation:
 *   1. decode: per anchor, score and a 64-bit key (descending-score key << 32 | anchor), or
 *      all ones when not a candidate; a per-image candidate count (atomic, order-free);
 *   2. sort the keys of each image (cub::DeviceSegmentedRadixSort): score descending, ties to
 *      the lower anchor - the stable order of the CPU code, made unique by the anchor bits;
 *   3. gather the first K = min(count, max_candidates) boxes, the max coordinate per image
 *      (NaN-propagating), the class offset and the areas;
 *   4. the IoU bit matrix of the K boxes, 64 columns per word (torchvision's CUDA layout);
 *   5. one warp per image walks the matrix greedily, skipping suppressed boxes a word at a
 *      time, until max_detections are kept, then writes the rows and the count.
 * All float arithmetic uses _rn intrinsics in the C code's order (no FMA contraction), so
 * results are bit-identical to the CPU backend.  K is limited to 65536 on this backend (the
 * removed-bit set of a walk lives in shared memory).
 * The plan's scratch (keys, boxes, mask) serves one execute at a time: an execute on another
 * stream than the previous one waits for it (an event), as usbeam_cuda_exec_set_stream does.
 * Reference: torchvision csrc/ops/cuda/nms_kernel.cu (the bit-matrix layout; BSD-3).
 */
#include "ai/ai_internal.h"
#include "ai/ai_math.h"
#include "runtime/cuda_common.cuh"

#include <cub/cub.cuh>
#include <cuda_runtime.h>
#include <stdint.h>

#define WORD_BITS 64
#define MAX_CUDA_CANDIDATES 65536

struct usbeam_cuda_detect {
    usbeam_detect_params params;
    ai_iou_threshold iou;
    float score_threshold;
    size_t words; /* ceil(K / 64) */
    unsigned long long *keys, *keys_sorted;
    int *segment_offsets;
    int *candidate_counts;
    float *boxes, *areas, *classes_f;
    unsigned long long *iou_mask; /* (n_images, K, words) */
    int *kept;                    /* (n_images, max_detections) sorted positions */
    void *sort_storage;
    size_t sort_storage_bytes;
    cudaEvent_t done;          /* recorded after each execute */
    cudaStream_t last_stream;  /* the stream of the previous execute */
    int executed;
};

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

/* torch.max / numpy.argmax over the class scores: first maximum, first NaN wins. */
__device__ __forceinline__ float best_class(const raw_view &r, size_t row, int *cls)
{
    float best = raw_at(r, row + 5);
    int index = 0;
    for (int c = 1; c < r.n_classes && best == best; ++c) {
        float v = raw_at(r, row + 5 + c);
        if (v > best || v != v) {
            best = v;
            index = c;
        }
    }
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
                              unsigned long long *keys, int *counts)
{
    for (size_t g = blockIdx.x * (size_t)blockDim.x + threadIdx.x; g < n_total; g += (size_t)gridDim.x * blockDim.x) {
        const size_t row = g * r.stride;
        int cls;
        const float score = __fmul_rn(raw_at(r, row + 4), best_class(r, row, &cls));
        unsigned long long key = ~0ull;
        if (score > threshold) {
            const size_t anchor = g % n_anchors;
            key = ((unsigned long long)ai_score_descending_key(score) << 32) | (unsigned long long)anchor;
            atomicAdd(&counts[g / n_anchors], 1);
        }
        keys[g] = key;
    }
}

/* Sorted position p of image b: its box (xyxy), class (as float) and, after the offset, area. */
__global__ void gather_kernel(raw_view r, size_t n_anchors, int k_max, const unsigned long long *keys_sorted,
                              const int *counts, float *boxes, float *classes_f)
{
    const int b = blockIdx.y;
    const int k = min(counts[b], k_max);
    for (int p = blockIdx.x * blockDim.x + threadIdx.x; p < k; p += gridDim.x * blockDim.x) {
        const size_t anchor = (size_t)(keys_sorted[(size_t)b * n_anchors + p] & 0xffffffffull);
        const size_t row = ((size_t)b * n_anchors + anchor) * r.stride;
        int cls;
        best_class(r, row, &cls);
        decode_box(r, row, boxes + ((size_t)b * k_max + p) * 4);
        classes_f[(size_t)b * k_max + p] = (float)cls;
    }
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

extern "C" void usbeam_cuda_detect_destroy(usbeam_cuda_detect *s)
{
    if (!s) return;
    cudaFree(s->keys);
    cudaFree(s->keys_sorted);
    cudaFree(s->segment_offsets);
    cudaFree(s->candidate_counts);
    cudaFree(s->boxes);
    cudaFree(s->areas);
    cudaFree(s->classes_f);
    cudaFree(s->iou_mask);
    cudaFree(s->kept);
    cudaFree(s->sort_storage);
    if (s->done) cudaEventDestroy(s->done);
    usbeam_free(s);
}

extern "C" usbeam_status usbeam_cuda_detect_create(const usbeam_detect_params *params, usbeam_cuda_detect **state)
{
    *state = NULL;
    const size_t n_images = params->n_images, n_anchors = params->n_anchors, k = params->max_candidates;
    if (k > MAX_CUDA_CANDIDATES)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "max_candidates must be <= %d on the CUDA backend (got %zu)",
                           MAX_CUDA_CANDIDATES, k);
    if (n_images > 65535)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "n_images must be <= 65535 on the CUDA backend (got %zu)",
                           n_images);
    const size_t total = n_images * n_anchors;
    if (total > (size_t)INT32_MAX)
        return usbeam_fail(USBEAM_ERR_SIZE_OVERFLOW, "raw: n_images * n_anchors must be < 2^31 on the CUDA backend");
    usbeam_cuda_detect *s = (usbeam_cuda_detect *)usbeam_alloc(sizeof *s);
    if (!s) return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "detect plan (CUDA)");
    s->params = *params;
    s->iou = ai_make_iou_threshold(params->iou_threshold);
    s->score_threshold = (float)params->score_threshold;
    s->words = (k + WORD_BITS - 1) / WORD_BITS;
    usbeam_status st = USBEAM_OK;
#define TRY(call)                                                               \
    do {                                                                        \
        st = usbeam_cuda_check((call), #call, __FILE__, __LINE__);              \
        if (st != USBEAM_OK) {                                                  \
            usbeam_cuda_detect_destroy(s);                                      \
            return st;                                                          \
        }                                                                       \
    } while (0)
    TRY(cudaMalloc((void **)&s->keys, total * sizeof(unsigned long long)));
    TRY(cudaMalloc((void **)&s->keys_sorted, total * sizeof(unsigned long long)));
    TRY(cudaMalloc((void **)&s->segment_offsets, (n_images + 1) * sizeof(int)));
    TRY(cudaMalloc((void **)&s->candidate_counts, n_images * sizeof(int)));
    TRY(cudaMalloc((void **)&s->boxes, n_images * k * 4 * sizeof(float)));
    TRY(cudaMalloc((void **)&s->areas, n_images * k * sizeof(float)));
    TRY(cudaMalloc((void **)&s->classes_f, n_images * k * sizeof(float)));
    TRY(cudaMalloc((void **)&s->iou_mask, n_images * k * s->words * sizeof(unsigned long long)));
    TRY(cudaMalloc((void **)&s->kept, n_images * params->max_detections * sizeof(int)));
    int *offsets = (int *)usbeam_alloc((n_images + 1) * sizeof(int));
    if (!offsets) {
        usbeam_cuda_detect_destroy(s);
        return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "detect plan (CUDA): segment offsets");
    }
    for (size_t b = 0; b <= n_images; ++b) offsets[b] = (int)(b * n_anchors);
    st = usbeam_cuda_check(cudaMemcpy(s->segment_offsets, offsets, (n_images + 1) * sizeof(int), cudaMemcpyHostToDevice),
                           "cudaMemcpy(segment offsets)", __FILE__, __LINE__);
    usbeam_free(offsets);
    if (st != USBEAM_OK) {
        usbeam_cuda_detect_destroy(s);
        return st;
    }
    TRY(cub::DeviceSegmentedRadixSort::SortKeys(NULL, s->sort_storage_bytes, s->keys, s->keys_sorted, (int)total,
                                                (int)n_images, s->segment_offsets, s->segment_offsets + 1));
    TRY(cudaMalloc(&s->sort_storage, s->sort_storage_bytes ? s->sort_storage_bytes : 1));
    TRY(cudaEventCreateWithFlags(&s->done, cudaEventDisableTiming));
#undef TRY
    *state = s;
    return USBEAM_OK;
}

extern "C" usbeam_status usbeam_cuda_detect_run(usbeam_cuda_detect *s, const void *raw, void *detections, void *counts,
                                                void *stream_ptr)
{
    cudaStream_t stream = (cudaStream_t)stream_ptr;
    const usbeam_detect_params *p = &s->params;
    const size_t total = p->n_images * p->n_anchors;
    const int k_max = (int)p->max_candidates;
    raw_view r = {raw, p->in_dtype == USBEAM_DTYPE_FLOAT16, 5 + p->n_classes, (int)p->n_classes};

    /* the previous execute, on another stream, may still be using the scratch */
    if (s->executed && stream != s->last_stream) USBEAM_CUDA_TRY(cudaStreamWaitEvent(stream, s->done, 0));
    USBEAM_CUDA_TRY(cudaMemsetAsync(s->candidate_counts, 0, p->n_images * sizeof(int), stream));
    unsigned blocks = (unsigned)((total + 255) / 256);
    decode_kernel<<<blocks < 4096 ? blocks : 4096, 256, 0, stream>>>(r, p->n_anchors, total, s->score_threshold,
                                                                    s->keys, s->candidate_counts);
    USBEAM_CUDA_TRY(cudaGetLastError());
    size_t storage = s->sort_storage_bytes;
    USBEAM_CUDA_TRY(cub::DeviceSegmentedRadixSort::SortKeys(s->sort_storage, storage, s->keys, s->keys_sorted,
                                                            (int)total, (int)p->n_images, s->segment_offsets,
                                                            s->segment_offsets + 1, 0, 64, stream));
    dim3 gather_grid((unsigned)((k_max + 255) / 256), (unsigned)p->n_images);
    gather_kernel<<<gather_grid, 256, 0, stream>>>(r, p->n_anchors, k_max, s->keys_sorted, s->candidate_counts,
                                                   s->boxes, s->classes_f);
    USBEAM_CUDA_TRY(cudaGetLastError());
    offset_kernel<<<(unsigned)p->n_images, 256, 0, stream>>>(k_max, s->candidate_counts, p->class_agnostic, s->boxes,
                                                             s->classes_f, s->areas);
    USBEAM_CUDA_TRY(cudaGetLastError());
    dim3 mask_grid((unsigned)s->words, (unsigned)s->words, (unsigned)p->n_images);
    iou_mask_kernel<<<mask_grid, WORD_BITS, 0, stream>>>(k_max, s->words, s->candidate_counts, s->boxes, s->areas,
                                                         s->iou, s->iou_mask);
    USBEAM_CUDA_TRY(cudaGetLastError());
    walk_kernel<<<(unsigned)p->n_images, 32, s->words * sizeof(unsigned long long), stream>>>(
        r, p->n_anchors, k_max, s->words, (int)p->max_detections, s->candidate_counts, s->keys_sorted, s->iou_mask,
        s->kept, (float *)detections, (int *)counts);
    USBEAM_CUDA_TRY(cudaGetLastError());
    USBEAM_CUDA_TRY(cudaEventRecord(s->done, stream));
    s->last_stream = stream;
    s->executed = 1;
    return USBEAM_OK;
}
