/*
 * preprocess.c - image -> model input in one pass, and FP16 <-> FP32 conversion: the plan (for
 * both backends) and the CPU kernels; the CUDA twin is cuda/preprocess.cu, which gets the taps
 * and the per-channel affine computed here (usbeam_preprocess_tables).
 *
 * Layouts: in  (n_images, in_height, in_width, in_channels), uint8 / float16 / float32,
 *              e.g. usbeam B-mode output (in_channels = 1);
 *          out (n_images, out_channels, out_height, out_width)  NCHW, or
 *              (n_images, out_height, out_width, out_channels)  NHWC, float32 or float16.
 * Units:   pixels; values are the input's grey levels times scale plus offset per channel.
 * Resize:  bilinear, no antialiasing.  align_corners = 0 follows PyTorch
 *          F.interpolate(mode="bilinear", align_corners=False) and OpenCV INTER_LINEAR:
 *          output pixel centre x_out + 0.5 maps to (x_out + 0.5) * in / out in input pixel
 *          units, so source x = (x_out + 0.5) * in / out - 0.5, clamped at 0 below and to
 *          the last pixel above.  align_corners = 1 maps the corner pixel centres onto each
 *          other: source x = x_out * (in - 1) / (out - 1) (0 when out = 1).
 *          Source coordinates and weights are computed once, in double, in plan create; the
 *          per-pixel blend runs in float32.
 * FP16:    see ai_math.h (bit-exact with numpy's astype).
 * NaN or inf float input is refused: a resize that shrinks by more than 2 skips pixels, so
 *          the blend cannot be the check; instead each output row, in the same parallel loop,
 *          checks the input rows it owns ([r in_h / out_h, (r+1) in_h / out_h), a partition of
 *          the image) just before it blends (for a shrink its taps lie in or next to those
 *          rows, then in cache).  A refused call fills out with NaN (no partial tensor).  The
 *          FP16 <-> FP32 conversions keep NaN and inf (numpy's astype: NaN in is NaN out).
 * CUDA:    a CUDA plan runs cuda/preprocess.cu on its stream (usbeam_preprocess_plan_cuda);
 *          usbeam_preprocess_execute_async is the deprecated stream-taking entry (ai_internal.h).
 */
#include "ai/ai_internal.h"
#include "ai/ai_math.h"

#include <math.h>

struct usbeam_preprocess_plan {
    usbeam_preprocess_params params;
    usbeam_resize_tap *rows; /* out_height taps */
    usbeam_resize_tap *cols; /* out_width taps */
    float scale[3], offset[3];
    usbeam_preprocess_cuda *cuda; /* USBEAM_BACKEND_CUDA: the twin in cuda/preprocess.cu */
};

static usbeam_status check_size(const char *name, size_t value)
{
    if (value == 0 || value > (size_t)INT32_MAX)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "%s must be in 1 .. %d (got %zu)", name,
                           INT32_MAX, value);
    return USBEAM_OK;
}

/* Taps mapping n_out output pixels onto n_in input pixels along one axis. */
static void resize_taps(size_t n_in, size_t n_out, int align_corners, usbeam_resize_tap *taps)
{
    const double last = (double)(n_in - 1);
    for (size_t i = 0; i < n_out; ++i) {
        double source;
        if (align_corners)
            source = n_out > 1 ? (double)i * last / (double)(n_out - 1) : 0.0;
        else
            source = ((double)i + 0.5) * (double)n_in / (double)n_out - 0.5;
        if (source < 0.0) source = 0.0;
        if (source > last) source = last;
        double first = floor(source);
        taps[i].first = (int32_t)first;
        taps[i].second = (int32_t)(first < last ? first + 1.0 : first);
        taps[i].weight = (float)(source - first);
    }
}

usbeam_status usbeam_preprocess_plan_create(const usbeam_preprocess_params *params,
                                            usbeam_backend backend, usbeam_preprocess_plan **plan)
{
    usbeam_status st;
    if (!params || !plan) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "params and plan must not be NULL");
    *plan = NULL;
    if ((st = ai_check_backend(backend)) != USBEAM_OK) return st;
    if ((st = check_size("n_images", params->n_images)) != USBEAM_OK) return st;
    if ((st = check_size("in_height", params->in_height)) != USBEAM_OK) return st;
    if ((st = check_size("in_width", params->in_width)) != USBEAM_OK) return st;
    if ((st = check_size("out_height", params->out_height)) != USBEAM_OK) return st;
    if ((st = check_size("out_width", params->out_width)) != USBEAM_OK) return st;
    if (params->in_channels != 1 && params->in_channels != 3)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "in_channels must be 1 or 3 (got %zu)",
                           params->in_channels);
    if (params->out_channels != 1 && params->out_channels != 3)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "out_channels must be 1 or 3 (got %zu)",
                           params->out_channels);
    if (params->in_channels == 3 && params->out_channels == 1)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT,
                           "out_channels: a 3-channel input needs 3 output channels (no colour conversion)");
    if (params->in_dtype != USBEAM_DTYPE_UINT8 && params->in_dtype != USBEAM_DTYPE_FLOAT16 &&
        params->in_dtype != USBEAM_DTYPE_FLOAT32)
        return usbeam_fail(USBEAM_ERR_INVALID_DTYPE, "in_dtype must be uint8, float16 or float32");
    if (params->out_dtype != USBEAM_DTYPE_FLOAT16 && params->out_dtype != USBEAM_DTYPE_FLOAT32)
        return usbeam_fail(USBEAM_ERR_INVALID_DTYPE, "out_dtype must be float16 or float32");
    if (params->out_layout != USBEAM_LAYOUT_NCHW && params->out_layout != USBEAM_LAYOUT_NHWC)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "layout: unknown value %d", (int)params->out_layout);
    for (size_t c = 0; c < params->out_channels; ++c) {
        if (!isfinite(params->scale[c]) || !(fabs(params->scale[c]) <= 3.4e38))
            return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "scale[%zu] must be finite in float32 (got %g)",
                               c, params->scale[c]);
        if (!isfinite(params->offset[c]) || !(fabs(params->offset[c]) <= 3.4e38))
            return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "offset[%zu] must be finite in float32 (got %g)",
                               c, params->offset[c]);
    }
    size_t in_count, out_count;
    if (usbeam_mul_size3(params->n_images, params->in_height * params->in_channels, params->in_width,
                         &in_count) != 0 ||
        usbeam_mul_size3(params->n_images, params->out_height * params->out_channels, params->out_width,
                         &out_count) != 0 ||
        in_count > USBEAM_MAX_ALLOCATION || out_count > USBEAM_MAX_ALLOCATION)
        return usbeam_fail(USBEAM_ERR_SIZE_OVERFLOW, "image: the input or output size is too large");

    usbeam_preprocess_plan *p = usbeam_alloc(sizeof *p);
    if (!p) return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "preprocess plan");
    p->params = *params;
    p->rows = usbeam_alloc(params->out_height * sizeof *p->rows);
    p->cols = usbeam_alloc(params->out_width * sizeof *p->cols);
    if (!p->rows || !p->cols) {
        usbeam_preprocess_plan_destroy(p);
        return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "preprocess plan: resize tables");
    }
    resize_taps(params->in_height, params->out_height, params->align_corners, p->rows);
    resize_taps(params->in_width, params->out_width, params->align_corners, p->cols);
    for (size_t c = 0; c < 3; ++c) {
        size_t source = c < params->out_channels ? c : 0;
        p->scale[c] = (float)params->scale[source];
        p->offset[c] = (float)params->offset[source];
    }
    if (backend == USBEAM_BACKEND_CUDA) {
        const usbeam_preprocess_tables tables = {p->rows, p->cols, p->scale, p->offset};
        st = usbeam_preprocess_cuda_create(params, &tables, &p->cuda);
        if (st != USBEAM_OK) {
            usbeam_preprocess_plan_destroy(p);
            return st;
        }
    }
    *plan = p;
    return USBEAM_OK;
}

void usbeam_preprocess_plan_destroy(usbeam_preprocess_plan *plan)
{
    if (!plan) return;
    usbeam_preprocess_cuda_destroy(plan->cuda);
    usbeam_free(plan->rows);
    usbeam_free(plan->cols);
    usbeam_free(plan);
}

static inline float load_u8(const void *in, size_t index) { return (float)((const uint8_t *)in)[index]; }
static inline float load_f16(const void *in, size_t index)
{
    return ai_half_bits_to_float(((const uint16_t *)in)[index]);
}
static inline float load_f32(const void *in, size_t index) { return ((const float *)in)[index]; }

/* One output row of one image, every column and channel; one copy per input type so that the
 * load inlines (the blend order is the one cuda/preprocess.cu reproduces with _rn intrinsics). */
#define DEFINE_RESIZE_ROW(name, load)                                                                    \
    static void name(const usbeam_preprocess_plan *plan, const void *in, size_t image, size_t out_row,   \
                     void *out)                                                                          \
    {                                                                                                    \
        const usbeam_preprocess_params *prm = &plan->params;                                             \
        const size_t in_c = prm->in_channels, out_c = prm->out_channels;                                 \
        const size_t in_row_len = prm->in_width * in_c;                                                  \
        const size_t image_base = image * prm->in_height * in_row_len;                                   \
        const usbeam_resize_tap ty = plan->rows[out_row];                                                \
        const size_t top = image_base + (size_t)ty.first * in_row_len;                                  \
        const size_t bottom = image_base + (size_t)ty.second * in_row_len;                               \
        const size_t plane = prm->out_height * prm->out_width;                                           \
        const int nchw = prm->out_layout == USBEAM_LAYOUT_NCHW, half = prm->out_dtype == USBEAM_DTYPE_FLOAT16; \
        for (size_t c = 0; c < out_c; ++c) {                                                             \
            const size_t ci = in_c == 1 ? 0 : c;                                                         \
            const float scale = plan->scale[c], offset = plan->offset[c];                                \
            const size_t first = nchw ? (image * out_c + c) * plane + out_row * prm->out_width           \
                                      : (image * prm->out_height + out_row) * prm->out_width * out_c + c; \
            const size_t step = nchw ? 1 : out_c;                                                        \
            for (size_t x = 0; x < prm->out_width; ++x) {                                                \
                const usbeam_resize_tap tx = plan->cols[x];                                              \
                const size_t left = (size_t)tx.first * in_c + ci, right = (size_t)tx.second * in_c + ci; \
                /* a + w (b - a): a constant neighbourhood gives exactly the constant */                 \
                const float p00 = load(in, top + left), p01 = load(in, top + right);                     \
                const float p10 = load(in, bottom + left), p11 = load(in, bottom + right);               \
                const float upper = p00 + tx.weight * (p01 - p00);                                       \
                const float lower = p10 + tx.weight * (p11 - p10);                                       \
                const float value = (upper + ty.weight * (lower - upper)) * scale + offset;              \
                if (half)                                                                                \
                    ((uint16_t *)out)[first + x * step] = ai_float_to_half_bits(value);                  \
                else                                                                                     \
                    ((float *)out)[first + x * step] = value;                                            \
            }                                                                                            \
        }                                                                                                \
    }

DEFINE_RESIZE_ROW(resize_row_u8, load_u8)
DEFINE_RESIZE_ROW(resize_row_f16, load_f16)
DEFINE_RESIZE_ROW(resize_row_f32, load_f32)

usbeam_cuda_exec *usbeam_preprocess_plan_cuda(usbeam_preprocess_plan *plan)
{
    return plan && plan->cuda ? usbeam_preprocess_cuda_exec(plan->cuda) : NULL;
}

usbeam_status usbeam_preprocess_execute(usbeam_preprocess_plan *plan, const void *in, void *out)
{
    if (!plan || !in || !out) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "plan, in and out must not be NULL");
    if (plan->cuda) return usbeam_preprocess_cuda_execute(plan->cuda, in, out); /* device pointers */
    void (*resize_row)(const usbeam_preprocess_plan *, const void *, size_t, size_t, void *) =
        plan->params.in_dtype == USBEAM_DTYPE_UINT8     ? resize_row_u8
        : plan->params.in_dtype == USBEAM_DTYPE_FLOAT16 ? resize_row_f16
                                                        : resize_row_f32;
    const usbeam_preprocess_params *prm = &plan->params;
    const size_t in_h = prm->in_height, out_h = prm->out_height, row_values = prm->in_width * prm->in_channels;
    const size_t value_size = prm->in_dtype == USBEAM_DTYPE_FLOAT32 ? 4 : prm->in_dtype == USBEAM_DTYPE_FLOAT16 ? 2 : 0;
    const ptrdiff_t n_rows = (ptrdiff_t)(prm->n_images * out_h);
    int bad = 0;
#pragma omp parallel for schedule(static) reduction(| : bad)
    for (ptrdiff_t r = 0; r < n_rows; ++r) {
        const size_t image = (size_t)r / out_h, row = (size_t)r % out_h;
        if (value_size) { /* uint8 needs no check */
            const size_t lo = row * in_h / out_h, hi = (row + 1) * in_h / out_h;
            const char *first = (const char *)in + (image * in_h + lo) * row_values * value_size;
            bad |= usbeam_count_nonfinite(first, prm->in_dtype, (hi - lo) * row_values) != 0;
        }
        resize_row(plan, in, image, row, out);
    }
    if (bad) {
        const size_t n_out = prm->n_images * out_h * prm->out_width * prm->out_channels;
        if (prm->out_dtype == USBEAM_DTYPE_FLOAT16) {
            uint16_t *half = out;
            for (size_t i = 0; i < n_out; ++i) half[i] = 0x7E00u; /* float16 quiet NaN */
        } else {
            usbeam_fill_nan(out, n_out);
        }
        return usbeam_fail_nonfinite("image", "model_input refuses them; out is filled with NaN");
    }
    return USBEAM_OK;
}

typedef struct {
    usbeam_preprocess_plan *plan;
    const void *in;
    void *out;
} preprocess_call;

static usbeam_status run_preprocess(void *context)
{
    preprocess_call *c = context;
    return usbeam_preprocess_execute(c->plan, c->in, c->out);
}

usbeam_status usbeam_preprocess_execute_async(usbeam_preprocess_plan *plan, const void *in, void *out,
                                              void *stream)
{
    if (!plan) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "plan, in and out must not be NULL");
    preprocess_call call = {plan, in, out};
    return ai_execute_on_stream(usbeam_preprocess_plan_cuda(plan), stream ? stream : AI_LEGACY_STREAM,
                                run_preprocess, &call);
}

usbeam_status usbeam_float32_to_float16(const float *in, uint16_t *out, size_t n)
{
    if (!in || !out) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "in and out must not be NULL");
    const ptrdiff_t count = (ptrdiff_t)n;
#pragma omp parallel for schedule(static) if (count > 65536)
    for (ptrdiff_t i = 0; i < count; ++i) out[i] = ai_float_to_half_bits(in[i]);
    return USBEAM_OK;
}

usbeam_status usbeam_float16_to_float32(const uint16_t *in, float *out, size_t n)
{
    if (!in || !out) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "in and out must not be NULL");
    const ptrdiff_t count = (ptrdiff_t)n;
#pragma omp parallel for schedule(static) if (count > 65536)
    for (ptrdiff_t i = 0; i < count; ++i) out[i] = ai_half_bits_to_float(in[i]);
    return USBEAM_OK;
}

