/*
 * ai_internal.h - the seam between the AI hand-off plans (csrc/preprocess.c, detect.c,
 * segment.c) and their CUDA halves (cuda/preprocess.cu, detect.cu, segment.cu).
 * The C plan validates parameters and computes tables in double; a CUDA plan then hands
 * them to usbeam_cuda_*_create, which owns every device allocation (made once, there).
 * They are entry points of the CUDA seam (cuda_seam.h).
 */
#ifndef USBEAM_AI_INTERNAL_H
#define USBEAM_AI_INTERNAL_H

#include "common/usbeam_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bilinear taps of one axis: out index -> (first source index, second, weight of second). */
typedef struct usbeam_resize_tap {
    int32_t first, second;
    float weight;
} usbeam_resize_tap;

typedef struct usbeam_cuda_preprocess usbeam_cuda_preprocess;
usbeam_status usbeam_cuda_preprocess_create(const usbeam_preprocess_params *params,
                                            const usbeam_resize_tap *rows, const usbeam_resize_tap *cols,
                                            const float *scale, const float *offset,
                                            usbeam_cuda_preprocess **state);
usbeam_status usbeam_cuda_preprocess_run(usbeam_cuda_preprocess *state, const void *in, void *out,
                                         void *stream);
void usbeam_cuda_preprocess_destroy(usbeam_cuda_preprocess *state);

typedef struct usbeam_cuda_detect usbeam_cuda_detect;
usbeam_status usbeam_cuda_detect_create(const usbeam_detect_params *params, usbeam_cuda_detect **state);
usbeam_status usbeam_cuda_detect_run(usbeam_cuda_detect *state, const void *raw, void *detections,
                                     void *counts, void *stream);
void usbeam_cuda_detect_destroy(usbeam_cuda_detect *state);

typedef struct usbeam_cuda_components usbeam_cuda_components;
usbeam_status usbeam_cuda_components_create(const usbeam_components_params *params,
                                            usbeam_cuda_components **state);
/* operation: 0 label, 1 fill holes, 2 largest component, 3 remove small (min_area) */
usbeam_status usbeam_cuda_components_run(usbeam_cuda_components *state, int operation,
                                         const uint8_t *mask, void *out, int32_t *counts,
                                         size_t min_area, void *stream);
void usbeam_cuda_components_destroy(usbeam_cuda_components *state);

#ifdef __cplusplus
}
#endif
#endif
