/*
 * usbeam/ai.h - stage 4, images <-> models: model input, FP16 conversion, detection post-processing and NMS, segmentation.
 *
 * RF -> acquire -> demod -> beamform -> bmode | doppler -> [ai]
 */
#ifndef USBEAM_AI_H
#define USBEAM_AI_H

#include "usbeam/core.h"
#include "usbeam/device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* AI model hand-off (issue #6): pre-processing, FP16 conversion, detection and
 * segmentation post-processing.  CPU kernels in csrc/ai/preprocess.c, detect.c, segment.c;
 * CUDA twins in cuda/preprocess.cu, detect.cu, segment.cu.
 *
 * CUDA plans have the shape of every other family: a plan created with USBEAM_BACKEND_CUDA
 * takes device pointers, its executes queue on the plan's stream and never synchronise the
 * host, and usbeam_<family>_plan_cuda() returns its CUDA execution state (usbeam/device.h):
 * usbeam_cuda_exec_set_stream to run on the caller's stream (NULL: back to the plan's own,
 * non-blocking stream, the one a new plan uses), stage times, device bytes, input faults.
 * The plan-less device functions (usbeam_cuda_float32_to_float16, usbeam_cuda_mask_threshold,
 * ...) take the stream as an argument instead: they have no plan to hold one.
 *
 * Deprecated, kept for one release: usbeam_preprocess_execute_async and
 * usbeam_detect_execute_async queue that one execute on `stream` (NULL: CUDA's legacy default
 * stream, as before): the plan switches to it and back, so it keeps no reference to it, and the
 * plan's stream waits for the execute (inside a graph capture of `stream` the plan stays on
 * it); usbeam_components_set_stream names the stream every later execute of the plan is queued
 * on in that way (NULL: the legacy default stream).  On a CPU plan the stream is ignored.
 * Before, a CUDA plan's plain execute queued on the legacy default stream; it now queues on
 * the plan's stream. */

/* -- pre-processing: image -> model input (bilinear resize, normalise, cast, layout) -- */
typedef enum usbeam_tensor_layout {
    USBEAM_LAYOUT_NCHW = 0,  /* (n_images, channels, height, width) */
    USBEAM_LAYOUT_NHWC = 1   /* (n_images, height, width, channels) */
} usbeam_tensor_layout;

typedef struct usbeam_preprocess_params {
    size_t n_images;             /* batch size, >= 1 */
    size_t in_height, in_width;  /* input image size in pixels, >= 1 */
    size_t in_channels;          /* 1 or 3; input is (n_images, in_height, in_width, in_channels) */
    usbeam_dtype in_dtype;       /* UINT8, FLOAT16 or FLOAT32 */
    size_t out_height, out_width;  /* model input size in pixels, >= 1 */
    size_t out_channels;         /* 1 or 3; 3 from a 1-channel input repeats the grey level */
    usbeam_tensor_layout out_layout;
    usbeam_dtype out_dtype;      /* FLOAT32 or FLOAT16 (round to nearest even) */
    int align_corners;           /* 0: pixel centres at i + 0.5, source x = (x_out + 0.5) * in / out
                                    - 0.5 clamped at 0 (PyTorch align_corners=False, OpenCV
                                    INTER_LINEAR); 1: corner pixels aligned, source x = x_out *
                                    (in - 1) / (out - 1) (PyTorch align_corners=True) */
    double scale[3], offset[3];  /* per output channel: value = interpolated * scale + offset
                                    (mean/std normalisation is scale = s / std, offset = -mean / std) */
} usbeam_preprocess_params;

typedef struct usbeam_preprocess_plan usbeam_preprocess_plan;
usbeam_status usbeam_preprocess_plan_create(const usbeam_preprocess_params *params,
                                            usbeam_backend backend, usbeam_preprocess_plan **plan);
/* in: (n_images, in_height, in_width, in_channels) of in_dtype; out: out_layout of out_dtype */
usbeam_status usbeam_preprocess_execute(usbeam_preprocess_plan *plan, const void *in, void *out);
void usbeam_preprocess_plan_destroy(usbeam_preprocess_plan *plan);
/* The CUDA execution state of a plan (NULL for a CPU plan): one stage, "preprocess.resize".
 * Its input-fault word flags a NaN or inf pixel the resize read (float16/float32 images): the
 * CPU refuses such an image, the twin computes with it. */
usbeam_cuda_exec *usbeam_preprocess_plan_cuda(usbeam_preprocess_plan *plan);
/* Deprecated: usbeam_preprocess_execute queued on stream (NULL: the legacy default stream);
 * see the top of this header. */
usbeam_status usbeam_preprocess_execute_async(usbeam_preprocess_plan *plan, const void *in, void *out,
                                              void *stream);

/* -- FP16 <-> FP32, round to nearest even, bit-exact with numpy astype (NaN payloads kept,
 *    as numpy does: the top 10 payload bits, a NaN never becomes inf) -- */
usbeam_status usbeam_float32_to_float16(const float *in, uint16_t *out, size_t n);
usbeam_status usbeam_float16_to_float32(const uint16_t *in, float *out, size_t n);
/* Device pointers, queued on stream (a cudaStream_t; NULL: the legacy default stream); these
 * plan-less functions keep their stream argument.  NO_BACKEND without CUDA. */
usbeam_status usbeam_cuda_float32_to_float16(const void *in, void *out, size_t n, void *stream);
usbeam_status usbeam_cuda_float16_to_float32(const void *in, void *out, size_t n, void *stream);

/* -- detection post-processing: decode, threshold, top-K, class-aware NMS -- */
/* Raw head rows [cx, cy, w, h, objectness, class scores...] as exported by YOLOv5 (already
 * decoded: pixels and probabilities).  score = objectness * max class score (float32, ties
 * to the lower class), kept when score > (float)score_threshold; boxes xyxy = cx -/+ w/2.
 * Candidates are sorted by score descending, ties to the lower anchor index, cut to
 * max_candidates, then greedy NMS exactly as torchvision.ops.nms (float32 IoU, no +1,
 * suppress when IoU > iou_threshold compared in double), class-aware by the coordinate
 * offset of torchvision's batched_nms (offset = class * (max coordinate + 1), float32). */
typedef struct usbeam_detect_params {
    size_t n_images;         /* batch, >= 1 */
    size_t n_anchors;        /* rows per image, >= 1 */
    size_t n_classes;        /* >= 1; a row has 5 + n_classes values */
    usbeam_dtype in_dtype;   /* FLOAT32 or FLOAT16 */
    double score_threshold;  /* finite */
    double iou_threshold;    /* in [0, 1] */
    size_t max_candidates;   /* top-K before NMS, 1 .. n_anchors */
    size_t max_detections;   /* rows of the output per image, >= 1 */
    int class_agnostic;      /* 1: one NMS over all classes */
} usbeam_detect_params;

typedef struct usbeam_detect_plan usbeam_detect_plan;
usbeam_status usbeam_detect_plan_create(const usbeam_detect_params *params, usbeam_backend backend,
                                        usbeam_detect_plan **plan);
/* raw: (n_images, n_anchors, 5 + n_classes); detections: float32 (n_images, max_detections, 6)
 * rows [x1, y1, x2, y2, score, class], rows past the count are zero; counts: int32 (n_images) */
usbeam_status usbeam_detect_execute(usbeam_detect_plan *plan, const void *raw, float *detections,
                                    int32_t *counts);
void usbeam_detect_plan_destroy(usbeam_detect_plan *plan);
/* The CUDA execution state of a plan (NULL for a CPU plan): stages "detect.decode",
 * "detect.sort", "detect.overlap" and "detect.nms".  Its input-fault word flags a NaN or inf the
 * kernels read: any objectness or class score, the box of any of the top max_candidates rows
 * (the CPU refuses such a head; the twin follows torchvision's NaN rules above).  At most 65535
 * images and 65536 candidates per image on CUDA. */
usbeam_cuda_exec *usbeam_detect_plan_cuda(usbeam_detect_plan *plan);
/* Deprecated: usbeam_detect_execute queued on stream (NULL: the legacy default stream). */
usbeam_status usbeam_detect_execute_async(usbeam_detect_plan *plan, const void *raw, void *detections,
                                          void *counts, void *stream);

/* Plain NMS over n_boxes (torchvision.ops.nms / batched_nms semantics as above). */
typedef struct usbeam_nms_params {
    size_t n_boxes;        /* >= 1 */
    double iou_threshold;  /* in [0, 1] */
    size_t max_keep;       /* 1 .. n_boxes */
} usbeam_nms_params;

typedef struct usbeam_nms_plan usbeam_nms_plan;
usbeam_status usbeam_nms_plan_create(const usbeam_nms_params *params, usbeam_backend backend,
                                     usbeam_nms_plan **plan);
/* boxes float32 (n_boxes, 4) x1 y1 x2 y2; scores float32 (n_boxes); classes int32 (n_boxes) or
 * NULL for one class; keep int32 (max_keep): kept indices by decreasing score, -1 past count;
 * count int32 (1). */
usbeam_status usbeam_nms_execute(usbeam_nms_plan *plan, const float *boxes, const float *scores,
                                 const int32_t *classes, int32_t *keep, int32_t *count);
void usbeam_nms_plan_destroy(usbeam_nms_plan *plan);

/* -- segmentation post-processing -- */
/* mask[i] = value[i] > threshold (compared in double), value float32 or float16. */
usbeam_status usbeam_mask_threshold(const void *values, usbeam_dtype dtype, size_t n, double threshold,
                                    uint8_t *mask);
/* scores (n_images, n_classes, n_pixels) -> labels int32 (n_images, n_pixels): index of the max,
 * ties and NaN as numpy.argmax (first maximum; the first NaN wins). */
usbeam_status usbeam_mask_argmax(const void *scores, usbeam_dtype dtype, size_t n_images,
                                 size_t n_classes, size_t n_pixels, int32_t *labels);
/* The same two on device pointers, queued on stream (cudaStream_t as void *). */
usbeam_status usbeam_cuda_mask_threshold(const void *values, usbeam_dtype dtype, size_t n,
                                         double threshold, uint8_t *mask, void *stream);
usbeam_status usbeam_cuda_mask_argmax(const void *scores, usbeam_dtype dtype, size_t n_images,
                                      size_t n_classes, size_t n_pixels, int32_t *labels, void *stream);

/* Connected components of binary masks (nonzero = foreground), numbered as
 * scipy.ndimage.label: 1..N in raster order of each component's first pixel. */
typedef struct usbeam_components_params {
    size_t n_images;         /* >= 1 */
    size_t height, width;    /* >= 1, height * width < 2^31 */
    int connectivity;        /* 4 (scipy's default cross) or 8 (3x3 square) */
} usbeam_components_params;

typedef struct usbeam_components_plan usbeam_components_plan;
usbeam_status usbeam_components_plan_create(const usbeam_components_params *params,
                                            usbeam_backend backend, usbeam_components_plan **plan);
/* mask uint8 (n_images, height, width); labels int32, same shape; counts int32 (n_images) */
usbeam_status usbeam_label_execute(usbeam_components_plan *plan, const uint8_t *mask, int32_t *labels,
                                   int32_t *counts);
/* out uint8 0/1: the mask with holes filled as scipy.ndimage.binary_fill_holes; the
 * background is flooded from the border with the plan's connectivity (4 = scipy default). */
usbeam_status usbeam_fill_holes_execute(usbeam_components_plan *plan, const uint8_t *mask, uint8_t *out);
/* out uint8 0/1: the largest component (ties: the lower label); empty mask -> all zero. */
usbeam_status usbeam_largest_component_execute(usbeam_components_plan *plan, const uint8_t *mask,
                                               uint8_t *out);
/* out uint8 0/1: the components whose area (pixels) is >= min_area. */
usbeam_status usbeam_remove_small_execute(usbeam_components_plan *plan, const uint8_t *mask,
                                          size_t min_area, uint8_t *out);
void usbeam_components_plan_destroy(usbeam_components_plan *plan);
/* The CUDA execution state of a plan (NULL for a CPU plan): stages "components.union_find",
 * then "components.number" (label), "components.fill" (fill holes) or "components.select"
 * (largest, remove small).  Masks are uint8, so there is no input fault to flag. */
usbeam_cuda_exec *usbeam_components_plan_cuda(usbeam_components_plan *plan);
/* Deprecated: every later execute of the plan is queued on stream (NULL: the legacy default
 * stream) as by usbeam_preprocess_execute_async; use usbeam_cuda_exec_set_stream on
 * usbeam_components_plan_cuda(plan) instead.  Ignored by a CPU plan. */
usbeam_status usbeam_components_set_stream(usbeam_components_plan *plan, void *stream);

/* Per label 1..n_labels of one int32 label image (height, width): area (pixels), bbox
 * [min_row, min_col, max_row + 1, max_col + 1] and centroid [row, col] (mean pixel index).
 * An absent label gets area 0, bbox 0 and a NaN centroid; labels < 0 or > n_labels fail.
 * area int32 (n_labels), bbox int32 (n_labels, 4), centroid float64 (n_labels, 2). */
usbeam_status usbeam_regionprops_basic(const int32_t *labels, size_t height, size_t width,
                                       size_t n_labels, int32_t *area, int32_t *bbox, double *centroid);
/* The same on device pointers, queued on stream (cudaStream_t as void *); labels outside
 * 1..n_labels are ignored there (checking them would need a host synchronisation). */
usbeam_status usbeam_cuda_regionprops_basic(const int32_t *labels, size_t height, size_t width,
                                            size_t n_labels, int32_t *area, int32_t *bbox,
                                            double *centroid, void *stream);

#ifdef __cplusplus
}
#endif
#endif /* USBEAM_AI_H */
