/*
 * test_ai.c - plain-C tests of the AI hand-off family: FP16 conversion on every half and on
 * hand-picked float32 values (ties, subnormals, overflow, NaN payloads), resize analytic cases,
 * detection and NMS semantics on small hand-made heads, labelling numbering, hole filling and
 * region properties, every plan rejecting bad parameters with a message naming them, and the
 * CUDA shape of the plans (usbeam_<family>_plan_cuda, the deprecated stream-taking entries) in
 * this build, whose CUDA seam has no backend installed.  Prints "N passed, N failed".
 */
#include "usbeam.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"

static uint32_t bits_of(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    return b;
}

static float float_of(uint32_t b)
{
    float f;
    memcpy(&f, &b, 4);
    return f;
}

static uint16_t to_half(float f)
{
    uint16_t h;
    usbeam_float32_to_float16(&f, &h, 1);
    return h;
}

static void test_fp16(void)
{
    /* every half survives half -> float -> half, NaN payloads included */
    int round_trip_ok = 1;
    for (uint32_t h = 0; h < 65536; ++h) {
        uint16_t in = (uint16_t)h, back;
        float f;
        usbeam_float16_to_float32(&in, &f, 1);
        usbeam_float32_to_float16(&f, &back, 1);
        if (back != in) round_trip_ok = 0;
    }
    CHECK(round_trip_ok);
    CHECK(to_half(1.0f) == 0x3c00);
    CHECK(to_half(-2.0f) == 0xc000);
    CHECK(to_half(65504.0f) == 0x7bff);
    CHECK(to_half(65519.996f) == 0x7bff);
    CHECK(to_half(65520.0f) == 0x7c00);               /* tie to even overflows */
    CHECK(to_half(float_of(0x33000000u)) == 0x0000);  /* 2^-25: tie to even -> 0 */
    CHECK(to_half(float_of(0x33000001u)) == 0x0001);
    CHECK(to_half(float_of(0x33c00000u)) == 0x0002);  /* 1.5 * 2^-24: tie to even -> 2 */
    CHECK(to_half(1.0f + 1.0f / 2048) == 0x3c00);     /* halfway, even below */
    CHECK(to_half(1.0f + 3.0f / 2048) == 0x3c02);     /* halfway, even above */
    CHECK(to_half(float_of(0x7f800001u)) == 0x7c01);  /* NaN whose payload vanishes stays NaN */
    CHECK(to_half(float_of(0xffc00000u)) == 0xfe00);
    CHECK(to_half(INFINITY) == 0x7c00 && to_half(-INFINITY) == 0xfc00);
    uint16_t sub = 0x0001;
    float f;
    usbeam_float16_to_float32(&sub, &f, 1);
    CHECK(bits_of(f) == 0x33800000u);
    CHECK(usbeam_float32_to_float16(NULL, &sub, 1) == USBEAM_ERR_NULL_POINTER);
    CHECK(usbeam_cuda_float32_to_float16(&f, &sub, 1, NULL) != USBEAM_OK || usbeam_built_with_cuda());
}

static void test_preprocess(void)
{
    usbeam_preprocess_params p = {.n_images = 1, .in_height = 1, .in_width = 2, .in_channels = 1,
                                  .in_dtype = USBEAM_DTYPE_FLOAT32, .out_height = 1, .out_width = 4,
                                  .out_channels = 3, .out_layout = USBEAM_LAYOUT_NHWC,
                                  .out_dtype = USBEAM_DTYPE_FLOAT32, .align_corners = 0,
                                  .scale = {1, 2, 1}, .offset = {0, 0, -1}};
    usbeam_preprocess_plan *plan = NULL;
    CHECK(usbeam_preprocess_plan_create(&p, USBEAM_BACKEND_CPU, &plan) == USBEAM_OK);
    float in[2] = {0, 4}, out[12];
    for (int i = 0; i < 12; ++i) out[i] = NAN;
    CHECK(usbeam_preprocess_execute(plan, in, out) == USBEAM_OK);
    const float want[4] = {0, 1, 3, 4}; /* pixel centres: sources -0.25 (clamped), 0.25, 0.75, 1.25 */
    int ok = 1;
    for (int x = 0; x < 4; ++x)
        ok &= out[3 * x] == want[x] && out[3 * x + 1] == 2 * want[x] && out[3 * x + 2] == want[x] - 1;
    CHECK(ok);
    usbeam_preprocess_plan_destroy(plan);
    usbeam_preprocess_plan_destroy(NULL);

    usbeam_preprocess_params bad = p;
    bad.in_channels = 2;
    CHECK(usbeam_preprocess_plan_create(&bad, USBEAM_BACKEND_CPU, &plan) == USBEAM_ERR_INVALID_ARGUMENT);
    CHECK(plan == NULL && strstr(usbeam_last_error(), "in_channels"));
    bad = p;
    bad.scale[1] = NAN;
    CHECK(usbeam_preprocess_plan_create(&bad, USBEAM_BACKEND_CPU, &plan) == USBEAM_ERR_INVALID_ARGUMENT);
    CHECK(strstr(usbeam_last_error(), "scale[1]") != NULL);
    bad = p;
    bad.out_width = 0;
    CHECK(usbeam_preprocess_plan_create(&bad, USBEAM_BACKEND_CPU, &plan) == USBEAM_ERR_INVALID_ARGUMENT);
    CHECK(strstr(usbeam_last_error(), "out_width") != NULL);
    bad = p;
    bad.out_dtype = USBEAM_DTYPE_UINT8;
    CHECK(usbeam_preprocess_plan_create(&bad, USBEAM_BACKEND_CPU, &plan) == USBEAM_ERR_INVALID_DTYPE);
}

static void set_row(float *row, float cx, float cy, float w, float h, float obj, float c0, float c1)
{
    row[0] = cx, row[1] = cy, row[2] = w, row[3] = h, row[4] = obj, row[5] = c0, row[6] = c1;
}

static void test_detect(void)
{
    /* anchors: 0 and 1 overlap heavily (same class), 2 overlaps 0 but is another class,
       3 is below threshold, 4 ties anchor 0's score and box: the lower index wins */
    float raw[5 * 7];
    set_row(raw + 0, 50, 50, 20, 20, 0.9f, 1.0f, 0.0f);
    set_row(raw + 7, 52, 50, 20, 20, 0.8f, 1.0f, 0.5f);
    set_row(raw + 14, 50, 50, 20, 20, 0.7f, 0.2f, 1.0f);
    set_row(raw + 21, 10, 10, 5, 5, 0.1f, 1.0f, 0.0f);
    set_row(raw + 28, 50, 50, 20, 20, 0.9f, 1.0f, 0.0f);
    usbeam_detect_params p = {.n_images = 1, .n_anchors = 5, .n_classes = 2, .in_dtype = USBEAM_DTYPE_FLOAT32,
                              .score_threshold = 0.25, .iou_threshold = 0.45, .max_candidates = 5,
                              .max_detections = 4};
    usbeam_detect_plan *plan = NULL;
    CHECK(usbeam_detect_plan_create(&p, USBEAM_BACKEND_CPU, &plan) == USBEAM_OK);
    float det[4 * 6];
    int32_t count = -1;
    for (int i = 0; i < 24; ++i) det[i] = NAN;
    CHECK(usbeam_detect_execute(plan, raw, det, &count) == USBEAM_OK);
    CHECK(count == 2);
    CHECK(det[0] == 40 && det[1] == 40 && det[2] == 60 && det[3] == 60 && det[4] == 0.9f && det[5] == 0);
    CHECK(det[6 + 4] == 0.7f && det[6 + 5] == 1);
    int zero = 1;
    for (int i = 12; i < 24; ++i) zero &= det[i] == 0;
    CHECK(zero);
    usbeam_detect_plan_destroy(plan);

    usbeam_detect_params bad = p;
    bad.iou_threshold = 1.5;
    CHECK(usbeam_detect_plan_create(&bad, USBEAM_BACKEND_CPU, &plan) == USBEAM_ERR_INVALID_ARGUMENT);
    CHECK(strstr(usbeam_last_error(), "iou") != NULL);
    bad = p;
    bad.n_classes = 0;
    CHECK(usbeam_detect_plan_create(&bad, USBEAM_BACKEND_CPU, &plan) == USBEAM_ERR_INVALID_ARGUMENT);
    CHECK(strstr(usbeam_last_error(), "n_classes") != NULL);
    bad = p;
    bad.score_threshold = INFINITY;
    CHECK(usbeam_detect_plan_create(&bad, USBEAM_BACKEND_CPU, &plan) == USBEAM_ERR_INVALID_ARGUMENT);
    bad = p;
    bad.in_dtype = USBEAM_DTYPE_INT32;
    CHECK(usbeam_detect_plan_create(&bad, USBEAM_BACKEND_CPU, &plan) == USBEAM_ERR_INVALID_DTYPE);

    /* plain NMS: IoU float32(1/3) > 1/3 in double -> suppressed */
    const float boxes[8] = {0, 0, 2, 1, 1, 0, 3, 1};
    const float scores[2] = {0.9f, 0.8f};
    usbeam_nms_params np_ = {.n_boxes = 2, .iou_threshold = 1.0 / 3.0, .max_keep = 2};
    usbeam_nms_plan *nms = NULL;
    CHECK(usbeam_nms_plan_create(&np_, USBEAM_BACKEND_CPU, &nms) == USBEAM_OK);
    int32_t keep[2], n_keep;
    CHECK(usbeam_nms_execute(nms, boxes, scores, NULL, keep, &n_keep) == USBEAM_OK);
    CHECK(n_keep == 1 && keep[0] == 0 && keep[1] == -1);
    const int32_t classes[2] = {0, 1};
    CHECK(usbeam_nms_execute(nms, boxes, scores, classes, keep, &n_keep) == USBEAM_OK);
    CHECK(n_keep == 2 && keep[0] == 0 && keep[1] == 1);
    usbeam_nms_plan_destroy(nms);
    np_.iou_threshold = NAN;
    CHECK(usbeam_nms_plan_create(&np_, USBEAM_BACKEND_CPU, &nms) == USBEAM_ERR_INVALID_ARGUMENT);
}

static void test_segment(void)
{
    /* 0 1 0 1      4-connectivity: 4 components numbered in raster order of first pixels;
       1 0 0 1      8-connectivity: the diagonals join (0,1)-(1,0) and (1,3)-(2,2) */
    const uint8_t mask[12] = {0, 1, 0, 1, 1, 0, 0, 1, 0, 0, 1, 0};
    usbeam_components_params p = {.n_images = 1, .height = 3, .width = 4, .connectivity = 4};
    usbeam_components_plan *plan = NULL;
    CHECK(usbeam_components_plan_create(&p, USBEAM_BACKEND_CPU, &plan) == USBEAM_OK);
    int32_t labels[12], count;
    CHECK(usbeam_label_execute(plan, mask, labels, &count) == USBEAM_OK);
    const int32_t want4[12] = {0, 1, 0, 2, 3, 0, 0, 2, 0, 0, 4, 0};
    CHECK(count == 4 && memcmp(labels, want4, sizeof want4) == 0);
    uint8_t out[12];
    CHECK(usbeam_largest_component_execute(plan, mask, out) == USBEAM_OK);
    CHECK(out[3] == 1 && out[7] == 1 && out[1] == 0 && out[10] == 0);
    CHECK(usbeam_remove_small_execute(plan, mask, 2, out) == USBEAM_OK);
    CHECK(out[3] && out[7] && !out[1] && !out[4] && !out[10]);
    usbeam_components_plan_destroy(plan);
    p.connectivity = 8;
    CHECK(usbeam_components_plan_create(&p, USBEAM_BACKEND_CPU, &plan) == USBEAM_OK);
    CHECK(usbeam_label_execute(plan, mask, labels, &count) == USBEAM_OK);
    const int32_t want8[12] = {0, 1, 0, 2, 1, 0, 0, 2, 0, 0, 2, 0};
    CHECK(count == 2 && memcmp(labels, want8, sizeof want8) == 0);
    usbeam_components_plan_destroy(plan);

    /* a ring with a one-pixel hole: filled; the same ring open to the border is not */
    uint8_t ring[25] = {0};
    for (int y = 1; y < 4; ++y)
        for (int x = 1; x < 4; ++x) ring[y * 5 + x] = !(y == 2 && x == 2);
    usbeam_components_params rp = {.n_images = 1, .height = 5, .width = 5, .connectivity = 4};
    CHECK(usbeam_components_plan_create(&rp, USBEAM_BACKEND_CPU, &plan) == USBEAM_OK);
    uint8_t filled[25];
    CHECK(usbeam_fill_holes_execute(plan, ring, filled) == USBEAM_OK);
    CHECK(filled[12] == 1 && filled[0] == 0 && filled[6] == 1);
    usbeam_components_plan_destroy(plan);

    int32_t area[4], bbox[16];
    double centroid[8];
    CHECK(usbeam_regionprops_basic(want4, 3, 4, 2, area, bbox, centroid) == USBEAM_ERR_INVALID_ARGUMENT);
    CHECK(strstr(usbeam_last_error(), "labels") != NULL);
    CHECK(usbeam_regionprops_basic(want4, 3, 4, 4, area, bbox, centroid) == USBEAM_OK);
    CHECK(area[0] == 1 && area[1] == 2 && area[3] == 1);
    CHECK(bbox[4] == 0 && bbox[5] == 3 && bbox[6] == 2 && bbox[7] == 4);
    CHECK(centroid[2] == 0.5 && centroid[3] == 3.0);
}

/* The plans' CUDA shape without a CUDA backend: a CUDA plan cannot be made (NO_BACKEND naming
 * the twin), a CPU plan has no CUDA state, and the deprecated stream-taking entries are the
 * plain executes on a CPU plan, whatever the stream (it is never dereferenced there). */
static void test_cuda_shape(void)
{
    if (usbeam_built_with_cuda()) return; /* tests/test_ai_cuda.py covers a real backend */
    void *const stream = (void *)(uintptr_t)0x5eed;

    usbeam_preprocess_params pp = {.n_images = 1, .in_height = 2, .in_width = 2, .in_channels = 1,
                                   .in_dtype = USBEAM_DTYPE_UINT8, .out_height = 3, .out_width = 3,
                                   .out_channels = 1, .out_dtype = USBEAM_DTYPE_FLOAT32, .scale = {1, 1, 1}};
    usbeam_preprocess_plan *prep = (usbeam_preprocess_plan *)stream;
    CHECK(usbeam_preprocess_plan_create(&pp, USBEAM_BACKEND_CUDA, &prep) == USBEAM_ERR_NO_BACKEND);
    CHECK(prep == NULL && strstr(usbeam_last_error(), "preprocess_cuda_create") != NULL);
    CHECK(usbeam_preprocess_plan_create(&pp, (usbeam_backend)7, &prep) == USBEAM_ERR_INVALID_ARGUMENT);
    CHECK(strstr(usbeam_last_error(), "backend") != NULL);
    CHECK(usbeam_preprocess_plan_create(&pp, USBEAM_BACKEND_CPU, &prep) == USBEAM_OK);
    CHECK(usbeam_preprocess_plan_cuda(prep) == NULL && usbeam_preprocess_plan_cuda(NULL) == NULL);
    const uint8_t image[4] = {0, 10, 20, 30};
    float plain[9], queued[9];
    CHECK(usbeam_preprocess_execute(prep, image, plain) == USBEAM_OK);
    CHECK(usbeam_preprocess_execute_async(prep, image, queued, stream) == USBEAM_OK);
    CHECK(memcmp(plain, queued, sizeof plain) == 0 && plain[8] == 30.0f);
    CHECK(usbeam_preprocess_execute_async(NULL, image, queued, NULL) == USBEAM_ERR_NULL_POINTER);
    CHECK(usbeam_preprocess_execute_async(prep, NULL, queued, NULL) == USBEAM_ERR_NULL_POINTER);
    usbeam_preprocess_plan_destroy(prep);

    float raw[2 * 6] = {10, 10, 4, 4, 0.9f, 1.0f, 11, 10, 4, 4, 0.8f, 1.0f};
    usbeam_detect_params dp = {.n_images = 1, .n_anchors = 2, .n_classes = 1, .in_dtype = USBEAM_DTYPE_FLOAT32,
                               .score_threshold = 0.5, .iou_threshold = 0.5, .max_candidates = 2,
                               .max_detections = 2};
    usbeam_detect_plan *det = NULL;
    CHECK(usbeam_detect_plan_create(&dp, USBEAM_BACKEND_CUDA, &det) == USBEAM_ERR_NO_BACKEND);
    CHECK(det == NULL && strstr(usbeam_last_error(), "detect_cuda_create") != NULL);
    CHECK(usbeam_detect_plan_create(&dp, USBEAM_BACKEND_CPU, &det) == USBEAM_OK);
    CHECK(usbeam_detect_plan_cuda(det) == NULL && usbeam_detect_plan_cuda(NULL) == NULL);
    float rows[2][12];
    int32_t counts[2] = {-1, -1};
    CHECK(usbeam_detect_execute(det, raw, rows[0], &counts[0]) == USBEAM_OK);
    CHECK(usbeam_detect_execute_async(det, raw, rows[1], &counts[1], stream) == USBEAM_OK);
    CHECK(counts[0] == 1 && counts[1] == 1 && memcmp(rows[0], rows[1], sizeof rows[0]) == 0);
    CHECK(usbeam_detect_execute_async(NULL, raw, rows[1], &counts[1], NULL) == USBEAM_ERR_NULL_POINTER);
    usbeam_detect_plan_destroy(det);

    usbeam_components_params cp = {.n_images = 1, .height = 2, .width = 2, .connectivity = 4};
    usbeam_components_plan *comp = NULL;
    CHECK(usbeam_components_plan_create(&cp, USBEAM_BACKEND_CUDA, &comp) == USBEAM_ERR_NO_BACKEND);
    CHECK(comp == NULL && strstr(usbeam_last_error(), "components_cuda_create") != NULL);
    CHECK(usbeam_components_plan_create(&cp, USBEAM_BACKEND_CPU, &comp) == USBEAM_OK);
    CHECK(usbeam_components_plan_cuda(comp) == NULL && usbeam_components_plan_cuda(NULL) == NULL);
    CHECK(usbeam_components_set_stream(comp, stream) == USBEAM_OK);
    CHECK(usbeam_components_set_stream(comp, NULL) == USBEAM_OK);
    CHECK(usbeam_components_set_stream(NULL, stream) == USBEAM_ERR_NULL_POINTER);
    const uint8_t diagonal[4] = {1, 0, 0, 1};
    int32_t labels[4], n_labels = -1;
    CHECK(usbeam_label_execute(comp, diagonal, labels, &n_labels) == USBEAM_OK && n_labels == 2);
    usbeam_components_plan_destroy(comp);

    /* the plan-less device functions keep their stream argument and say what is missing */
    int32_t area[1], bbox[4];
    double centroid[2];
    CHECK(usbeam_cuda_regionprops_basic(labels, 2, 2, 1, area, bbox, centroid, stream) == USBEAM_ERR_NO_BACKEND);
    CHECK(strstr(usbeam_last_error(), "cuda_regionprops_basic") != NULL);
    uint8_t mask[4];
    CHECK(usbeam_cuda_mask_threshold(raw, USBEAM_DTYPE_FLOAT32, 4, 0.5, mask, stream) == USBEAM_ERR_NO_BACKEND);
}

int main(void)
{
    test_fp16();
    test_preprocess();
    test_detect();
    test_segment();
    test_cuda_shape();
    return check_summary();
}
