/*
 * segment.cu - segmentation post-processing on the device, CUDA twin of csrc/ai/segment.c: the
 * components plan (labelling numbered as scipy.ndimage.label, hole filling, largest component,
 * small-component removal) and the plan-less functions (per-label area, bounding box and
 * centroid; logits threshold; class argmax).
 *
 * Layouts: masks uint8 (n_images, height, width), nonzero = foreground; labels int32, same
 *   shape, 0 = background; scores (n_images, n_classes, n_pixels) float32/float16; all device.
 * Units: pixels (areas are pixel counts, centroids mean row / column indices).
 * Labelling: union-find on the GPU (O. Kalentev et al., "Connected component labeling on a 2D
 *   grid using CUDA", JPDC 2011; S. Allegretti et al., "Optimized block-based algorithms to
 *   label connected components on GPUs", IEEE TPDS 2020): every foreground pixel starts as
 *   its own root (its flat index), each pixel unites with its already-scanned neighbours by
 *   lock-free atomicCAS linking of the larger root under the smaller, then every pixel is
 *   pointed at its root.  The root of a component is thus its smallest flat index - its first
 *   pixel in raster order - so an exclusive scan of "is a root" flags numbers the components
 *   1..N in raster order of first pixels, exactly scipy.ndimage.label's numbering, whatever
 *   order the threads ran in.  Batched images are independent (no link crosses an image).
 * Holes: the background is labelled the same way; its components with a border pixel are the
 *   outside (scipy.ndimage.binary_fill_holes with the plan's connectivity).
 * Stages of the components plan, on its stream (runtime/exec.cuh), no host synchronisation:
 *   "components.union_find" (every operation), then "components.number" (label),
 *   "components.fill" (fill holes) or "components.select" (largest, remove small).  The masks
 *   are bytes, so there is no non-finite input to flag.  The plan's scratch serves one execute
 *   at a time, which its stream orders (usbeam_cuda_exec_set_stream makes a new stream wait for
 *   the work queued on the old one).
 * The plan-less functions take the caller's stream (cudaStream_t as void *): they hold no
 *   scratch and no state, so a plan would only carry the stream.
 */
#include "ai/ai_math.h"
#include "runtime/exec.cuh"

#include <cub/cub.cuh>
#include <math.h>
#include <math_constants.h>
#include <stdint.h>

namespace {

enum { STAGE_UNION_FIND = 0, STAGE_NUMBER = 1, STAGE_FILL = 2, STAGE_SELECT = 3 };
const char *const STAGE_NAMES[] = {"components.union_find", "components.number", "components.fill",
                                   "components.select"};

struct grid_view {
    int height, width, connectivity, invert;
    size_t image_size, total;
};

__device__ __forceinline__ bool is_set(const uint8_t *mask, size_t g, int invert)
{
    return (mask[g] != 0) != (invert != 0);
}

__device__ __forceinline__ int find_root(const int *parent, int x)
{
    const volatile int *p = parent;
    int next = p[x];
    while (next != x) {
        x = next;
        next = p[x];
    }
    return x;
}

__device__ void unite(int *parent, int a, int b)
{
    for (;;) {
        a = find_root(parent, a);
        b = find_root(parent, b);
        if (a == b) return;
        if (a > b) {
            int t = a;
            a = b;
            b = t;
        }
        const int old = atomicCAS(&parent[b], b, a); /* link the larger root under the smaller */
        if (old == b) return;
        b = old; /* b stopped being a root meanwhile: retry from its new parent */
    }
}

#define GRID_STRIDE(i, n) \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

__global__ void init_kernel(grid_view v, const uint8_t *mask, int *parent)
{
    GRID_STRIDE(g, v.total) parent[g] = is_set(mask, g, v.invert) ? (int)g : -1;
}

__global__ void merge_kernel(grid_view v, const uint8_t *mask, int *parent)
{
    GRID_STRIDE(g, v.total)
    {
        if (!is_set(mask, g, v.invert)) continue;
        const size_t i = g % v.image_size;
        const int x = (int)(i % v.width), y = (int)(i / v.width);
        if (x > 0 && is_set(mask, g - 1, v.invert)) unite(parent, (int)g, (int)g - 1);
        if (y > 0) {
            const size_t up = g - v.width;
            if (is_set(mask, up, v.invert)) unite(parent, (int)g, (int)up);
            if (v.connectivity == 8) {
                if (x > 0 && is_set(mask, up - 1, v.invert)) unite(parent, (int)g, (int)up - 1);
                if (x + 1 < v.width && is_set(mask, up + 1, v.invert)) unite(parent, (int)g, (int)up + 1);
            }
        }
    }
}

__global__ void compress_kernel(grid_view v, int *parent, int *flags)
{
    GRID_STRIDE(g, v.total)
    {
        const int p = parent[g];
        if (p < 0) {
            flags[g] = 0;
            continue;
        }
        const int root = find_root(parent, (int)g);
        parent[g] = root;
        flags[g] = root == (int)g;
    }
}

/* labels[g] = 1 + (roots before g's root in its image); counts per image. */
__global__ void number_kernel(grid_view v, const int *rank, int *labels)
{
    GRID_STRIDE(g, v.total)
    {
        const int root = labels[g];
        const size_t image_start = (g / v.image_size) * v.image_size;
        labels[g] = root < 0 ? 0 : rank[root] - rank[image_start] + 1;
    }
}

__global__ void count_kernel(grid_view v, size_t n_images, const int *rank, const int *flags, int *counts)
{
    GRID_STRIDE(b, n_images)
    {
        const size_t start = b * v.image_size, last = start + v.image_size - 1;
        counts[b] = rank[last] + flags[last] - rank[start];
    }
}

/* Background components touching the border are outside: mark their roots. */
__global__ void border_kernel(grid_view v, const int *parent, int *outside)
{
    const size_t perimeter = 2 * (size_t)v.width + 2 * (size_t)v.height;
    GRID_STRIDE(t, perimeter * (v.total / v.image_size))
    {
        const size_t image = t / perimeter, e = t % perimeter;
        size_t i;
        if (e < (size_t)v.width)
            i = e;
        else if (e < 2 * (size_t)v.width)
            i = (size_t)(v.height - 1) * v.width + (e - v.width);
        else if (e < 2 * (size_t)v.width + v.height)
            i = (e - 2 * (size_t)v.width) * v.width;
        else
            i = (e - 2 * (size_t)v.width - v.height) * v.width + v.width - 1;
        const int root = parent[image * v.image_size + i];
        if (root >= 0) outside[root] = 1;
    }
}

__global__ void fill_kernel(grid_view v, const int *parent, const int *outside, uint8_t *out)
{
    GRID_STRIDE(g, v.total)
    {
        const int root = parent[g]; /* background root, or -1 for foreground */
        out[g] = root < 0 || !outside[root];
    }
}

__global__ void area_kernel(grid_view v, const int *parent, int *area)
{
    GRID_STRIDE(g, v.total)
    {
        const int root = parent[g];
        if (root >= 0) atomicAdd(&area[root], 1);
    }
}

/* Largest area, ties to the smaller root (= the lower label): max of (area << 32 | ~root). */
__global__ void best_kernel(grid_view v, const int *parent, const int *area, unsigned long long *best)
{
    GRID_STRIDE(g, v.total)
    {
        if (parent[g] != (int)g) continue;
        const unsigned long long local = (unsigned long long)(g % v.image_size);
        const unsigned long long key = ((unsigned long long)area[g] << 32) | (0xffffffffull - local);
        atomicMax(&best[g / v.image_size], key);
    }
}

__global__ void select_kernel(grid_view v, const int *parent, const int *area, const unsigned long long *best,
                              size_t min_area, int largest, uint8_t *out)
{
    GRID_STRIDE(g, v.total)
    {
        const int root = parent[g];
        if (root < 0) {
            out[g] = 0;
        } else if (largest) {
            const size_t image_start = (g / v.image_size) * v.image_size;
            const unsigned long long key = best[g / v.image_size];
            out[g] = (size_t)root == image_start + (0xffffffffull - (key & 0xffffffffull));
        } else {
            out[g] = (size_t)area[root] >= min_area;
        }
    }
}

/* The grid of a grid-stride launch over n items, at most cap blocks of 256 threads. */
unsigned grid_for(size_t n, unsigned cap)
{
    size_t blocks = (n + 255) / 256;
    if (blocks < 1) blocks = 1;
    return (unsigned)(blocks < cap ? blocks : cap);
}

/* The plan-less functions know no device to size a grid cap by: 8192 blocks of 256 threads
 * are a few waves of any current GPU, and the grid-stride loops do the rest. */
constexpr unsigned PLANLESS_GRID_CAP = 8192;

} // namespace

struct usbeam_components_cuda {
    usbeam_cuda_exec *exec;
    usbeam_components_params params;
    size_t image_size, total;  /* pixels per image, in the batch (< 2^31: int links) */
    int *parent;               /* (total) union-find links, when the output is not the label buffer */
    int *flags, *rank;         /* (total) root flags, their exclusive scan; flags doubles as area/border marks */
    unsigned long long *best;  /* (n_images) packed (area, ~root) of the largest component */
    void *scan_storage;        /* cub's temporary storage, sized at create */
    size_t scan_storage_bytes;
    unsigned grid_cap;         /* grid-stride launches: a few waves of the device */
};

extern "C" usbeam_status usbeam_components_cuda_create(const usbeam_components_params *params,
                                                       usbeam_components_cuda **out)
{
    if (!params || !out) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "params and plan must not be NULL");
    *out = nullptr;
    const size_t image_size = params->height * params->width, total = params->n_images * image_size;
    if (total >= (size_t)INT32_MAX) /* links are int pixel indices of the whole batch */
        return usbeam_fail(USBEAM_ERR_SIZE_OVERFLOW,
                           "mask: n_images * height * width must be < 2^31 on the CUDA backend (got %zu)", total);
    usbeam_components_cuda *p = (usbeam_components_cuda *)usbeam_alloc(sizeof *p);
    if (!p) return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "components CUDA plan");
    p->params = *params;
    p->image_size = image_size;
    p->total = total;
    usbeam_status st = usbeam_cuda_exec_create(STAGE_NAMES, 4, &p->exec);
    usbeam_cuda_exec *e = p->exec;
    if (st == USBEAM_OK) st = usbeam_cuda_exec_alloc(e, total * sizeof(int), "components links", (void **)&p->parent);
    if (st == USBEAM_OK) st = usbeam_cuda_exec_alloc(e, total * sizeof(int), "components flags", (void **)&p->flags);
    if (st == USBEAM_OK) st = usbeam_cuda_exec_alloc(e, total * sizeof(int), "components ranks", (void **)&p->rank);
    if (st == USBEAM_OK)
        st = usbeam_cuda_exec_alloc(e, params->n_images * sizeof(unsigned long long), "components largest",
                                    (void **)&p->best);
    if (st == USBEAM_OK) /* a size query: cub reads no pointer when the storage is NULL */
        st = usbeam_cuda_check(cub::DeviceScan::ExclusiveSum(nullptr, p->scan_storage_bytes, p->flags, p->rank,
                                                             (int)total),
                               "cub::DeviceScan::ExclusiveSum (size)", __FILE__, __LINE__);
    if (st == USBEAM_OK)
        st = usbeam_cuda_exec_alloc(e, p->scan_storage_bytes, "components scan storage", &p->scan_storage);
    if (st == USBEAM_OK) st = usbeam_cuda_exec_grid_cap(e, &p->grid_cap);
    if (st != USBEAM_OK) {
        usbeam_components_cuda_destroy(p);
        return st;
    }
    *out = p;
    return USBEAM_OK;
}

extern "C" void usbeam_components_cuda_destroy(usbeam_components_cuda *p)
{
    if (!p) return;
    usbeam_cuda_exec_destroy(p->exec); /* frees every buffer above with the stream and events */
    usbeam_free(p);
}

extern "C" usbeam_cuda_exec *usbeam_components_cuda_exec(usbeam_components_cuda *p) { return p ? p->exec : nullptr; }

static usbeam_status components_cuda_run(usbeam_components_cuda *p, usbeam_components_operation operation,
                                         const uint8_t *mask, void *out, int32_t *counts, size_t min_area)
{
    usbeam_cuda_exec *e = p->exec;
    const cudaStream_t stream = usbeam_cuda_exec_cuda_stream(e);
    const int fill = operation == USBEAM_COMPONENTS_FILL_HOLES;
    const grid_view v = {(int)p->params.height, (int)p->params.width, p->params.connectivity, fill, p->image_size,
                         p->total};
    /* labelling links in the caller's label buffer (no copy at the end); the other operations
     * in the plan's */
    int *parent = operation == USBEAM_COMPONENTS_LABEL ? (int *)out : p->parent;
    const unsigned grid = grid_for(p->total, p->grid_cap);

    usbeam_status st = usbeam_cuda_stage_begin(e, STAGE_UNION_FIND);
    if (st != USBEAM_OK) return st;
    init_kernel<<<grid, 256, 0, stream>>>(v, mask, parent);
    merge_kernel<<<grid, 256, 0, stream>>>(v, mask, parent);
    compress_kernel<<<grid, 256, 0, stream>>>(v, parent, p->flags);
    USBEAM_CUDA_TRY(cudaGetLastError());
    if ((st = usbeam_cuda_stage_end(e, STAGE_UNION_FIND)) != USBEAM_OK) return st;

    if (operation == USBEAM_COMPONENTS_LABEL) {
        if ((st = usbeam_cuda_stage_begin(e, STAGE_NUMBER)) != USBEAM_OK) return st;
        size_t storage = p->scan_storage_bytes;
        USBEAM_CUDA_TRY(
            cub::DeviceScan::ExclusiveSum(p->scan_storage, storage, p->flags, p->rank, (int)p->total, stream));
        count_kernel<<<grid_for(p->params.n_images, p->grid_cap), 256, 0, stream>>>(v, p->params.n_images, p->rank,
                                                                                   p->flags, counts);
        number_kernel<<<grid, 256, 0, stream>>>(v, p->rank, parent);
        USBEAM_CUDA_TRY(cudaGetLastError());
        return usbeam_cuda_stage_end(e, STAGE_NUMBER);
    }
    if (fill) {
        if ((st = usbeam_cuda_stage_begin(e, STAGE_FILL)) != USBEAM_OK) return st;
        USBEAM_CUDA_TRY(cudaMemsetAsync(p->flags, 0, p->total * sizeof(int), stream));
        border_kernel<<<grid, 256, 0, stream>>>(v, parent, p->flags);
        fill_kernel<<<grid, 256, 0, stream>>>(v, parent, p->flags, (uint8_t *)out);
        USBEAM_CUDA_TRY(cudaGetLastError());
        return usbeam_cuda_stage_end(e, STAGE_FILL);
    }
    const int largest = operation == USBEAM_COMPONENTS_LARGEST;
    if ((st = usbeam_cuda_stage_begin(e, STAGE_SELECT)) != USBEAM_OK) return st;
    USBEAM_CUDA_TRY(cudaMemsetAsync(p->flags, 0, p->total * sizeof(int), stream));
    area_kernel<<<grid, 256, 0, stream>>>(v, parent, p->flags);
    if (largest) {
        USBEAM_CUDA_TRY(cudaMemsetAsync(p->best, 0, p->params.n_images * sizeof(unsigned long long), stream));
        best_kernel<<<grid, 256, 0, stream>>>(v, parent, p->flags, p->best);
    }
    select_kernel<<<grid, 256, 0, stream>>>(v, parent, p->flags, p->best, min_area, largest, (uint8_t *)out);
    USBEAM_CUDA_TRY(cudaGetLastError());
    return usbeam_cuda_stage_end(e, STAGE_SELECT);
}

extern "C" usbeam_status usbeam_components_cuda_execute(usbeam_components_cuda *p,
                                                        usbeam_components_operation operation, const uint8_t *mask,
                                                        void *out, int32_t *counts, size_t min_area)
{
    if (!p || !mask || !out || (operation == USBEAM_COMPONENTS_LABEL && !counts))
        return usbeam_fail(USBEAM_ERR_NULL_POINTER, "plan, mask, out and counts must not be NULL");
    if ((unsigned)operation > (unsigned)USBEAM_COMPONENTS_REMOVE_SMALL)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "operation: unknown value %d", (int)operation);
    usbeam_status st = usbeam_cuda_exec_begin(p->exec);
    if (st != USBEAM_OK) return st;
    st = components_cuda_run(p, operation, mask, out, counts, min_area);
    usbeam_cuda_exec_end(p->exec);
    return st;
}

/* ---------------------------------------------------------------- region properties */

namespace {

__global__ void props_init_kernel(size_t n_labels, int32_t *area, int32_t *bbox, double *centroid)
{
    GRID_STRIDE(k, n_labels)
    {
        area[k] = 0;
        bbox[4 * k] = bbox[4 * k + 1] = INT32_MAX;
        bbox[4 * k + 2] = bbox[4 * k + 3] = 0;
        centroid[2 * k] = centroid[2 * k + 1] = 0.0;
    }
}

/* Integer index sums accumulate exactly in double (< 2^53), so the atomics' order is irrelevant. */
__global__ void props_accumulate_kernel(const int32_t *labels, int width, size_t n, size_t n_labels, int32_t *area,
                                        int32_t *bbox, double *centroid)
{
    GRID_STRIDE(i, n)
    {
        const int32_t label = labels[i];
        if (label <= 0 || (size_t)label > n_labels) continue; /* out-of-range labels are ignored here */
        const size_t k = (size_t)label - 1;
        const int y = (int)(i / width), x = (int)(i % width);
        atomicAdd(&area[k], 1);
        atomicMin(&bbox[4 * k], y);
        atomicMin(&bbox[4 * k + 1], x);
        atomicMax(&bbox[4 * k + 2], y + 1);
        atomicMax(&bbox[4 * k + 3], x + 1);
        atomicAdd(&centroid[2 * k], (double)y);
        atomicAdd(&centroid[2 * k + 1], (double)x);
    }
}

__global__ void props_finish_kernel(size_t n_labels, const int32_t *area, int32_t *bbox, double *centroid)
{
    GRID_STRIDE(k, n_labels)
    {
        if (area[k] == 0) {
            bbox[4 * k] = bbox[4 * k + 1] = 0;
            centroid[2 * k] = centroid[2 * k + 1] = CUDART_NAN;
        } else {
            centroid[2 * k] /= area[k];
            centroid[2 * k + 1] /= area[k];
        }
    }
}

} // namespace

extern "C" usbeam_status usbeam_cuda_regionprops_basic(const int32_t *labels, size_t height, size_t width,
                                                       size_t n_labels, int32_t *area, int32_t *bbox,
                                                       double *centroid, void *stream_ptr)
{
    if (!labels || (n_labels > 0 && (!area || !bbox || !centroid)))
        return usbeam_fail(USBEAM_ERR_NULL_POINTER, "labels, area, bbox and centroid must not be NULL");
    const size_t n = height * width;
    if (n >= (size_t)INT32_MAX || n_labels > (size_t)INT32_MAX)
        return usbeam_fail(USBEAM_ERR_SIZE_OVERFLOW, "labels: %zu x %zu is too large", height, width);
    if (n_labels == 0) return USBEAM_OK;
    const cudaStream_t stream = (cudaStream_t)stream_ptr;
    const unsigned label_grid = grid_for(n_labels, PLANLESS_GRID_CAP), pixel_grid = grid_for(n, PLANLESS_GRID_CAP);
    props_init_kernel<<<label_grid, 256, 0, stream>>>(n_labels, area, bbox, centroid);
    props_accumulate_kernel<<<pixel_grid, 256, 0, stream>>>(labels, (int)width, n, n_labels, area, bbox, centroid);
    props_finish_kernel<<<label_grid, 256, 0, stream>>>(n_labels, area, bbox, centroid);
    USBEAM_CUDA_TRY(cudaGetLastError());
    return USBEAM_OK;
}

/* ---------------------------------------------------------------- threshold and argmax */

namespace {

__global__ void threshold_kernel(const void *values, int half, size_t n, double threshold, uint8_t *mask)
{
    GRID_STRIDE(i, n)
    {
        const float v = half ? ai_half_bits_to_float(((const uint16_t *)values)[i]) : ((const float *)values)[i];
        mask[i] = (double)v > threshold;
    }
}

__global__ void argmax_kernel(const void *scores, int half, size_t n_classes, size_t n_pixels, size_t n,
                              int32_t *labels)
{
    GRID_STRIDE(i, n)
    {
        const size_t base = (i / n_pixels) * n_classes * n_pixels + i % n_pixels;
        float best = 0.0f;
        int32_t best_class = 0;
        for (size_t c = 0; c < n_classes; ++c) {
            const size_t at = base + c * n_pixels;
            const float v = half ? ai_half_bits_to_float(((const uint16_t *)scores)[at]) : ((const float *)scores)[at];
            if (c == 0 || v > best || v != v) {
                best = v;
                best_class = (int32_t)c;
                if (v != v) break; /* numpy.argmax: the first NaN is the maximum */
            }
        }
        labels[i] = best_class;
    }
}

} // namespace

extern "C" usbeam_status usbeam_cuda_mask_threshold(const void *values, usbeam_dtype dtype, size_t n,
                                                    double threshold, uint8_t *mask, void *stream)
{
    if (!values || !mask) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "values and mask must not be NULL");
    if (isnan(threshold)) return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "threshold must not be NaN");
    if (dtype != USBEAM_DTYPE_FLOAT32 && dtype != USBEAM_DTYPE_FLOAT16)
        return usbeam_fail(USBEAM_ERR_INVALID_DTYPE, "logits: dtype must be float32 or float16");
    if (n == 0) return USBEAM_OK;
    threshold_kernel<<<grid_for(n, PLANLESS_GRID_CAP), 256, 0, (cudaStream_t)stream>>>(
        values, dtype == USBEAM_DTYPE_FLOAT16, n, threshold, mask);
    USBEAM_CUDA_TRY(cudaGetLastError());
    return USBEAM_OK;
}

extern "C" usbeam_status usbeam_cuda_mask_argmax(const void *scores, usbeam_dtype dtype, size_t n_images,
                                                 size_t n_classes, size_t n_pixels, int32_t *labels, void *stream)
{
    if (!scores || !labels) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "scores and labels must not be NULL");
    if (dtype != USBEAM_DTYPE_FLOAT32 && dtype != USBEAM_DTYPE_FLOAT16)
        return usbeam_fail(USBEAM_ERR_INVALID_DTYPE, "scores: dtype must be float32 or float16");
    if (n_classes == 0) return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "scores: the number of classes must be >= 1");
    const size_t n = n_images * n_pixels;
    if (n == 0) return USBEAM_OK;
    argmax_kernel<<<grid_for(n, PLANLESS_GRID_CAP), 256, 0, (cudaStream_t)stream>>>(
        scores, dtype == USBEAM_DTYPE_FLOAT16, n_classes, n_pixels, n, labels);
    USBEAM_CUDA_TRY(cudaGetLastError());
    return USBEAM_OK;
}
