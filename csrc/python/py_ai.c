/*
 * py_ai.c - Python bindings of the AI hand-off stage, model side (csrc/ai/preprocess.c and
 * detect.c); plans, buffers, the GIL and the lock follow py_plan.h.  The segmentation bindings
 * are in py_segment.c.
 *   preprocess_plan(...) / preprocess_execute(plan, image, out, back=0) / preprocess_cuda_exec(plan)
 *   detect_plan(...) / detect_execute(plan, raw, detections, counts, back=0) / detect_cuda_exec(plan)
 *   nms_plan(n_boxes, iou, max_keep) / nms_execute(plan, boxes, scores, classes|None, keep, count)
 *   float32_to_float16(x, out) / float16_to_float32(x, out)
 *   convert_device(to 'float16'|'float32', in_ptr, out_ptr, n, stream)
 * Buffers are flat: NumPy arrays of the plan's element counts for a CPU plan, usbeam.DeviceArrays
 * on the plan's device for a CUDA plan (usbeam.ai imports any CUDA array as one), queued on
 * the plan's stream.  back, a cudaStream_t as an integer: the stream the plan returns to after
 * the call (ai_return_to), when usbeam.ai switched it to the call's stream; 0: stay (a CPU plan
 * ignores it).  convert_device has no plan: raw device addresses and its stream, as integers.
 */
#include "python/py_plan.h" /* first: Python.h sets the feature macros */

#include "ai/ai_internal.h"

/* The CPU pre-processing writes nothing but out: reentrant.  Detection keeps per-image scratch
 * in the plan: one call at a time on the CPU.  A CUDA execute only queues kernels and keeps the
 * GIL (usbeam.ai holds a per-plan lock around a call's stream switch, imports and execute). */
USBEAM_PY_PLAN_TYPE(preprocess, USBEAM_PY_PLAN_REENTRANT | USBEAM_PY_PLAN_CUDA_KEEPS_GIL);
USBEAM_PY_PLAN_TYPE(detect, USBEAM_PY_PLAN_CUDA_KEEPS_GIL);
USBEAM_PY_HOST_PLAN_TYPE(nms, 0);

static int check_sizes(const char *const names[], const Py_ssize_t values[], int count)
{
    for (int i = 0; i < count; ++i) {
        if (values[i] < 0) {
            PyErr_Format(PyExc_ValueError, "%s must be >= 0 (got %zd)", names[i], values[i]);
            return -1;
        }
    }
    return 0;
}

/* A dtype name among `allowed` (NULL-terminated), or TypeError naming what it is for. */
static int parse_dtype(const char *name, const char *const *allowed, const char *what, usbeam_dtype *dtype,
                       int *npy_type)
{
    if (usbeam_py_dtype(name, allowed, dtype, npy_type) == 0) return 0;
    PyErr_Format(PyExc_TypeError, "%s: unsupported dtype '%s'", what, name);
    return -1;
}

/* ---- pre-processing -------------------------------------------------------------------- */

static PyObject *py_preprocess_plan(PyObject *self, PyObject *args, PyObject *kwargs)
{
    (void)self;
    static char *keywords[] = {"n_images", "in_height", "in_width", "in_channels", "in_dtype",
                               "out_height", "out_width", "out_channels", "layout", "out_dtype",
                               "align_corners", "scale", "offset", "backend", NULL};
    static const char *const image_dtypes[] = {"uint8", "float16", "float32", NULL};
    static const char *const model_dtypes[] = {"float16", "float32", NULL};
    Py_ssize_t n_images, in_h, in_w, in_c, out_h, out_w, out_c;
    const char *in_dtype, *layout, *out_dtype, *backend_name = "cpu";
    int align_corners = 0;
    double scale[3], offset[3];
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "nnnnsnnnssp(ddd)(ddd)|s", keywords, &n_images, &in_h,
                                     &in_w, &in_c, &in_dtype, &out_h, &out_w, &out_c, &layout, &out_dtype,
                                     &align_corners, &scale[0], &scale[1], &scale[2], &offset[0],
                                     &offset[1], &offset[2], &backend_name))
        return NULL;
    const char *const names[] = {"n_images", "in_height", "in_width", "in_channels", "out_height", "out_width",
                                 "out_channels"};
    const Py_ssize_t values[] = {n_images, in_h, in_w, in_c, out_h, out_w, out_c};
    if (check_sizes(names, values, 7) < 0) return NULL;
    usbeam_preprocess_params p;
    memset(&p, 0, sizeof p);
    int npy_in, npy_out;
    if (parse_dtype(in_dtype, image_dtypes, "image", &p.in_dtype, &npy_in) < 0) return NULL;
    if (parse_dtype(out_dtype, model_dtypes, "dtype", &p.out_dtype, &npy_out) < 0) return NULL;
    if (strcmp(layout, "nchw") == 0)
        p.out_layout = USBEAM_LAYOUT_NCHW;
    else if (strcmp(layout, "nhwc") == 0)
        p.out_layout = USBEAM_LAYOUT_NHWC;
    else
        return PyErr_Format(PyExc_ValueError, "layout must be 'nchw' or 'nhwc' (got '%s')", layout);
    usbeam_backend backend;
    if (usbeam_py_backend(backend_name, &backend) < 0) return NULL;
    p.n_images = (size_t)n_images;
    p.in_height = (size_t)in_h;
    p.in_width = (size_t)in_w;
    p.in_channels = (size_t)in_c;
    p.out_height = (size_t)out_h;
    p.out_width = (size_t)out_w;
    p.out_channels = (size_t)out_c;
    p.align_corners = align_corners;
    memcpy(p.scale, scale, sizeof scale);
    memcpy(p.offset, offset, sizeof offset);
    usbeam_py_plan *h = usbeam_py_plan_new(&preprocess_plan_type);
    if (!h) return NULL;
    h->backend = backend;
    h->npy_in = npy_in;
    h->npy_out = npy_out;
    h->n_in = p.n_images * p.in_height * p.in_width * p.in_channels;
    h->n_out = p.n_images * p.out_height * p.out_width * p.out_channels;
    h->n_outer = p.n_images;
    usbeam_preprocess_plan *plan = NULL;
    usbeam_status st = usbeam_preprocess_plan_create(&p, backend, &plan);
    return usbeam_py_plan_wrap(h, st, plan);
}

static PyObject *py_preprocess_execute(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *capsule, *in_obj, *out_obj;
    unsigned long long back = 0;
    if (!PyArg_ParseTuple(args, "OOO|K", &capsule, &in_obj, &out_obj, &back)) return NULL;
    usbeam_py_plan *h = usbeam_py_plan_from(capsule, &preprocess_plan_type);
    if (!h) return NULL;
    usbeam_cuda_exec *cuda = usbeam_py_plan_cuda(h);
    const void *in = usbeam_py_plan_buffer(in_obj, "image", h->npy_in, h->n_in, 0, cuda);
    if (!in) return NULL;
    void *out = usbeam_py_plan_buffer(out_obj, "out", h->npy_out, h->n_out, 1, cuda);
    if (!out) return NULL;
    usbeam_py_plan_call call = usbeam_py_plan_enter(h, cuda);
    usbeam_status st = usbeam_preprocess_execute(h->plan, in, out);
    usbeam_status returned = ai_return_to(cuda, (void *)(uintptr_t)back);
    return usbeam_py_plan_finish(&call, st != USBEAM_OK ? st : returned);
}

USBEAM_PY_PLAN_CUDA_EXEC_BINDING(preprocess)

/* ---- FP16 <-> FP32 ----------------------------------------------------------------------- */

static PyObject *py_float32_to_float16(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *in_obj, *out_obj;
    if (!PyArg_ParseTuple(args, "OO", &in_obj, &out_obj)) return NULL;
    if (!PyArray_Check(in_obj)) return PyErr_Format(PyExc_TypeError, "x must be a numpy.ndarray");
    size_t n = (size_t)PyArray_SIZE((PyArrayObject *)in_obj);
    const float *in = usbeam_py_array_data(in_obj, "x", NPY_FLOAT32, n, 0);
    if (!in) return NULL;
    uint16_t *out = usbeam_py_array_data(out_obj, "out", NPY_HALF, n, 1);
    if (!out) return NULL;
    usbeam_status st;
    Py_BEGIN_ALLOW_THREADS
    st = usbeam_float32_to_float16(in, out, n);
    Py_END_ALLOW_THREADS
    return usbeam_py_none_or_raise(st);
}

static PyObject *py_float16_to_float32(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *in_obj, *out_obj;
    if (!PyArg_ParseTuple(args, "OO", &in_obj, &out_obj)) return NULL;
    if (!PyArray_Check(in_obj)) return PyErr_Format(PyExc_TypeError, "x must be a numpy.ndarray");
    size_t n = (size_t)PyArray_SIZE((PyArrayObject *)in_obj);
    const uint16_t *in = usbeam_py_array_data(in_obj, "x", NPY_HALF, n, 0);
    if (!in) return NULL;
    float *out = usbeam_py_array_data(out_obj, "out", NPY_FLOAT32, n, 1);
    if (!out) return NULL;
    usbeam_status st;
    Py_BEGIN_ALLOW_THREADS
    st = usbeam_float16_to_float32(in, out, n);
    Py_END_ALLOW_THREADS
    return usbeam_py_none_or_raise(st);
}

/* Plan-less: usbeam.ai has checked both arrays (shape, dtype, no overlap) and passes addresses. */
static PyObject *py_convert_device(PyObject *self, PyObject *args)
{
    (void)self;
    const char *direction;
    unsigned long long in, out, stream;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "sKKnK", &direction, &in, &out, &n, &stream)) return NULL;
    if (n < 0) return PyErr_Format(PyExc_ValueError, "n must be >= 0 (got %zd)", n);
    const int to_half = strcmp(direction, "float16") == 0;
    if (!to_half && strcmp(direction, "float32") != 0)
        return PyErr_Format(PyExc_ValueError, "to must be 'float16' or 'float32' (got '%s')", direction);
    /* only queues a kernel: the GIL is kept, as a CUDA plan's execute keeps it */
    usbeam_status st = to_half ? usbeam_cuda_float32_to_float16((const void *)(uintptr_t)in, (void *)(uintptr_t)out,
                                                               (size_t)n, (void *)(uintptr_t)stream)
                               : usbeam_cuda_float16_to_float32((const void *)(uintptr_t)in, (void *)(uintptr_t)out,
                                                               (size_t)n, (void *)(uintptr_t)stream);
    return usbeam_py_none_or_raise(st);
}

/* ---- detection ----------------------------------------------------------------------------- */

static PyObject *py_detect_plan(PyObject *self, PyObject *args, PyObject *kwargs)
{
    (void)self;
    static char *keywords[] = {"n_images", "n_anchors", "n_classes", "dtype", "conf", "iou",
                               "max_candidates", "max_det", "class_agnostic", "backend", NULL};
    static const char *const raw_dtypes[] = {"float16", "float32", NULL};
    Py_ssize_t n_images, n_anchors, n_classes, max_candidates, max_det;
    const char *dtype_name, *backend_name = "cpu";
    double conf, iou;
    int agnostic = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "nnnsddnn|ps", keywords, &n_images, &n_anchors, &n_classes,
                                     &dtype_name, &conf, &iou, &max_candidates, &max_det, &agnostic,
                                     &backend_name))
        return NULL;
    const char *const names[] = {"n_images", "n_anchors", "n_classes", "max_candidates", "max_det"};
    const Py_ssize_t values[] = {n_images, n_anchors, n_classes, max_candidates, max_det};
    if (check_sizes(names, values, 5) < 0) return NULL;
    usbeam_detect_params p;
    memset(&p, 0, sizeof p);
    int npy_in;
    if (parse_dtype(dtype_name, raw_dtypes, "raw", &p.in_dtype, &npy_in) < 0) return NULL;
    usbeam_backend backend;
    if (usbeam_py_backend(backend_name, &backend) < 0) return NULL;
    p.n_images = (size_t)n_images;
    p.n_anchors = (size_t)n_anchors;
    p.n_classes = (size_t)n_classes;
    p.score_threshold = conf;
    p.iou_threshold = iou;
    p.max_candidates = (size_t)max_candidates;
    p.max_detections = (size_t)max_det;
    p.class_agnostic = agnostic;
    usbeam_py_plan *h = usbeam_py_plan_new(&detect_plan_type);
    if (!h) return NULL;
    h->backend = backend;
    h->npy_in = npy_in;
    h->npy_out = NPY_FLOAT32;
    h->n_in = p.n_images * p.n_anchors * (5 + p.n_classes);
    h->n_out = p.n_images * p.max_detections * 6;
    h->n_aux = p.n_images; /* counts */
    h->n_outer = p.n_images;
    usbeam_detect_plan *plan = NULL;
    usbeam_status st = usbeam_detect_plan_create(&p, backend, &plan);
    return usbeam_py_plan_wrap(h, st, plan);
}

static PyObject *py_detect_execute(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *capsule, *raw_obj, *det_obj, *count_obj;
    unsigned long long back = 0;
    if (!PyArg_ParseTuple(args, "OOOO|K", &capsule, &raw_obj, &det_obj, &count_obj, &back)) return NULL;
    usbeam_py_plan *h = usbeam_py_plan_from(capsule, &detect_plan_type);
    if (!h) return NULL;
    usbeam_cuda_exec *cuda = usbeam_py_plan_cuda(h);
    const void *raw = usbeam_py_plan_buffer(raw_obj, "raw", h->npy_in, h->n_in, 0, cuda);
    if (!raw) return NULL;
    float *detections = usbeam_py_plan_buffer(det_obj, "detections", NPY_FLOAT32, h->n_out, 1, cuda);
    if (!detections) return NULL;
    int32_t *counts = usbeam_py_plan_buffer(count_obj, "counts", NPY_INT32, h->n_aux, 1, cuda);
    if (!counts) return NULL;
    usbeam_py_plan_call call = usbeam_py_plan_enter(h, cuda);
    usbeam_status st = usbeam_detect_execute(h->plan, raw, detections, counts);
    usbeam_status returned = ai_return_to(cuda, (void *)(uintptr_t)back);
    return usbeam_py_plan_finish(&call, st != USBEAM_OK ? st : returned);
}

USBEAM_PY_PLAN_CUDA_EXEC_BINDING(detect)

/* ---- plain NMS ------------------------------------------------------------------------------ */

static PyObject *py_nms_plan(PyObject *self, PyObject *args)
{
    (void)self;
    Py_ssize_t n_boxes, max_keep;
    double iou;
    if (!PyArg_ParseTuple(args, "ndn", &n_boxes, &iou, &max_keep)) return NULL;
    const char *const names[] = {"n_boxes", "max_keep"};
    const Py_ssize_t values[] = {n_boxes, max_keep};
    if (check_sizes(names, values, 2) < 0) return NULL;
    usbeam_nms_params p = {(size_t)n_boxes, iou, (size_t)max_keep};
    usbeam_py_plan *h = usbeam_py_plan_new(&nms_plan_type);
    if (!h) return NULL;
    h->backend = USBEAM_BACKEND_CPU;
    h->n_in = p.n_boxes;
    h->n_out = p.max_keep;
    usbeam_nms_plan *plan = NULL;
    usbeam_status st = usbeam_nms_plan_create(&p, USBEAM_BACKEND_CPU, &plan);
    return usbeam_py_plan_wrap(h, st, plan);
}

static PyObject *py_nms_execute(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *capsule, *boxes_obj, *scores_obj, *classes_obj, *keep_obj, *count_obj;
    if (!PyArg_ParseTuple(args, "OOOOOO", &capsule, &boxes_obj, &scores_obj, &classes_obj, &keep_obj, &count_obj))
        return NULL;
    usbeam_py_plan *h = usbeam_py_plan_from(capsule, &nms_plan_type);
    if (!h) return NULL;
    const float *boxes = usbeam_py_array_data(boxes_obj, "boxes", NPY_FLOAT32, 4 * h->n_in, 0);
    if (!boxes) return NULL;
    const float *scores = usbeam_py_array_data(scores_obj, "scores", NPY_FLOAT32, h->n_in, 0);
    if (!scores) return NULL;
    const int32_t *classes = NULL;
    if (classes_obj != Py_None && !(classes = usbeam_py_array_data(classes_obj, "classes", NPY_INT32, h->n_in, 0)))
        return NULL;
    int32_t *keep = usbeam_py_array_data(keep_obj, "keep", NPY_INT32, h->n_out, 1);
    if (!keep) return NULL;
    int32_t *count = usbeam_py_array_data(count_obj, "count", NPY_INT32, 1, 1);
    if (!count) return NULL;
    usbeam_py_plan_call call = usbeam_py_plan_enter(h, NULL);
    usbeam_status st = usbeam_nms_execute(h->plan, boxes, scores, classes, keep, count);
    return usbeam_py_plan_finish(&call, st);
}

#define METHOD_KW(name, fn, doc) {name, (PyCFunction)(void (*)(void))fn, METH_VARARGS | METH_KEYWORDS, doc}

PyMethodDef usbeam_py_ai_methods[] = {
    METHOD_KW("preprocess_plan", py_preprocess_plan, "Create a model-input pre-processing plan."),
    {"preprocess_execute", py_preprocess_execute, METH_VARARGS,
     "Run a pre-processing plan: (plan, image, out, back=0); NumPy arrays (CPU) or DeviceArrays (CUDA)."},
    {"preprocess_cuda_exec", py_preprocess_cuda_exec, METH_O, "CUDA state of a pre-processing plan (None for the CPU)."},
    {"float32_to_float16", py_float32_to_float16, METH_VARARGS, "(x float32, out float16), round to nearest even."},
    {"float16_to_float32", py_float16_to_float32, METH_VARARGS, "(x float16, out float32)."},
    {"convert_device", py_convert_device, METH_VARARGS,
     "Queue an FP16/FP32 conversion on the GPU: (to 'float16'|'float32', in_ptr, out_ptr, n, stream)."},
    METHOD_KW("detect_plan", py_detect_plan, "Create a detection post-processing plan."),
    {"detect_execute", py_detect_execute, METH_VARARGS,
     "Run a detection plan: (plan, raw, detections, counts, back=0); NumPy arrays (CPU) or DeviceArrays (CUDA)."},
    {"detect_cuda_exec", py_detect_cuda_exec, METH_O, "CUDA state of a detection plan (None for the CPU)."},
    {"nms_plan", py_nms_plan, METH_VARARGS, "Create a plain NMS plan: (n_boxes, iou, max_keep)."},
    {"nms_execute", py_nms_execute, METH_VARARGS, "Run NMS: (plan, boxes, scores, classes|None, keep, count)."},
    {NULL, NULL, 0, NULL},
};
