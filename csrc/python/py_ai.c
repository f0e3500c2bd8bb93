/*
 * py_ai.c - Python bindings of the AI hand-off family, model side (see preprocess.c and
 * detect.c); the segmentation bindings are in py_segment.c.
 *   preprocess_plan(...) / preprocess_execute(plan, image, out)
 *   float32_to_float16(x, out) / float16_to_float32(x, out)
 *   detect_plan(...) / detect_execute(plan, raw, detections, counts)
 *   nms_plan(n_boxes, iou, max_keep) / nms_execute(plan, boxes, scores, classes|None, keep, count)
 *   *_execute_device(plan, pointers..., stream): CUDA plans, raw device pointers and a
 *   cudaStream_t as integers (from __cuda_array_interface__), queued without host sync.
 * Plans with scratch are guarded by a per-plan lock taken with the GIL released.
 */
#include "python/py_common.h"
#include "python/py_ai_common.h"

/* ---------------------------------------------------------------- shared helpers */

int usbeam_py_ai_dtype(const char *name, const char *what, usbeam_dtype *dtype, int *npy_type)
{
    static const struct { const char *name; usbeam_dtype dtype; int npy; } table[] = {
        {"uint8", USBEAM_DTYPE_UINT8, NPY_UINT8},       {"float16", USBEAM_DTYPE_FLOAT16, NPY_HALF},
        {"float32", USBEAM_DTYPE_FLOAT32, NPY_FLOAT32}, {"int32", USBEAM_DTYPE_INT32, NPY_INT32},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; ++i) {
        if (strcmp(name, table[i].name) == 0) {
            *dtype = table[i].dtype;
            *npy_type = table[i].npy;
            return 0;
        }
    }
    PyErr_Format(PyExc_TypeError, "%s: unsupported dtype '%s'", what, name);
    return -1;
}

usbeam_ai_handle *usbeam_py_ai_handle_new(void)
{
    usbeam_ai_handle *h = PyMem_Calloc(1, sizeof *h);
    if (!h) {
        PyErr_NoMemory();
        return NULL;
    }
    h->lock = PyThread_allocate_lock();
    if (!h->lock) {
        PyMem_Free(h);
        PyErr_SetString(PyExc_MemoryError, "plan lock");
        return NULL;
    }
    return h;
}

void usbeam_py_ai_handle_free(usbeam_ai_handle *h)
{
    if (!h) return;
    if (h->lock) PyThread_free_lock(h->lock);
    PyMem_Free(h);
}

/* Wrap a handle whose plan was created; on failure destroys everything. */
PyObject *usbeam_py_ai_wrap(usbeam_ai_handle *h, const char *capsule_name, PyCapsule_Destructor destroy)
{
    PyObject *capsule = usbeam_py_plan_capsule(h, capsule_name, destroy);
    if (!capsule) {
        h->destroy(h->plan);
        usbeam_py_ai_handle_free(h);
    }
    return capsule;
}

int usbeam_py_device_pointer(PyObject *value, const char *name, void **pointer)
{
    unsigned long long address = PyLong_AsUnsignedLongLong(value);
    if (PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s must be a device address (a non-negative int)", name);
        return -1;
    }
    *pointer = (void *)(uintptr_t)address;
    return 0;
}

static int check_sizes(const char *names[], const Py_ssize_t values[], int count)
{
    for (int i = 0; i < count; ++i) {
        if (values[i] < 0) {
            PyErr_Format(PyExc_ValueError, "%s must be >= 0 (got %zd)", names[i], values[i]);
            return -1;
        }
    }
    return 0;
}

#define HANDLE_DESTRUCTOR(fn_name, capsule, destroy_fn)                   \
    static void fn_name(PyObject *object)                                 \
    {                                                                     \
        usbeam_ai_handle *h = PyCapsule_GetPointer(object, capsule);      \
        if (h) {                                                          \
            destroy_fn(h->plan);                                          \
            usbeam_py_ai_handle_free(h);                                  \
        }                                                                 \
    }

/* ---------------------------------------------------------------- pre-processing */

#define PREPROCESS_CAPSULE "usbeam.preprocess_plan"
static void destroy_preprocess(void *plan) { usbeam_preprocess_plan_destroy(plan); }
HANDLE_DESTRUCTOR(preprocess_capsule_destroy, PREPROCESS_CAPSULE, destroy_preprocess)

static PyObject *py_preprocess_plan(PyObject *self, PyObject *args, PyObject *kwargs)
{
    (void)self;
    static char *keywords[] = {"n_images", "in_height", "in_width", "in_channels", "in_dtype",
                               "out_height", "out_width", "out_channels", "layout", "out_dtype",
                               "align_corners", "scale", "offset", "backend", NULL};
    Py_ssize_t n_images, in_h, in_w, in_c, out_h, out_w, out_c;
    const char *in_dtype, *layout, *out_dtype, *backend_name = "cpu";
    int align_corners = 0;
    double scale[3], offset[3];
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "nnnnsnnnssp(ddd)(ddd)|s", keywords, &n_images, &in_h,
                                     &in_w, &in_c, &in_dtype, &out_h, &out_w, &out_c, &layout, &out_dtype,
                                     &align_corners, &scale[0], &scale[1], &scale[2], &offset[0],
                                     &offset[1], &offset[2], &backend_name))
        return NULL;
    const char *names[] = {"n_images", "in_height", "in_width", "in_channels", "out_height", "out_width",
                           "out_channels"};
    const Py_ssize_t values[] = {n_images, in_h, in_w, in_c, out_h, out_w, out_c};
    if (check_sizes(names, values, 7) < 0) return NULL;
    usbeam_preprocess_params p;
    memset(&p, 0, sizeof p);
    int npy_in, npy_out;
    if (usbeam_py_ai_dtype(in_dtype, "image", &p.in_dtype, &npy_in) < 0) return NULL;
    if (usbeam_py_ai_dtype(out_dtype, "dtype", &p.out_dtype, &npy_out) < 0) return NULL;
    if (strcmp(layout, "nchw") == 0)
        p.out_layout = USBEAM_LAYOUT_NCHW;
    else if (strcmp(layout, "nhwc") == 0)
        p.out_layout = USBEAM_LAYOUT_NHWC;
    else {
        PyErr_Format(PyExc_ValueError, "layout must be 'nchw' or 'nhwc' (got '%s')", layout);
        return NULL;
    }
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
    usbeam_ai_handle *h = usbeam_py_ai_handle_new();
    if (!h) return NULL;
    h->destroy = destroy_preprocess;
    h->backend = backend;
    h->npy_in = npy_in;
    h->npy_out = npy_out;
    h->n_in = p.n_images * p.in_height * p.in_width * p.in_channels;
    h->n_out = p.n_images * p.out_height * p.out_width * p.out_channels;
    usbeam_status st = usbeam_preprocess_plan_create(&p, backend, (usbeam_preprocess_plan **)&h->plan);
    if (st != USBEAM_OK) {
        usbeam_py_ai_handle_free(h);
        return usbeam_py_raise(st);
    }
    return usbeam_py_ai_wrap(h, PREPROCESS_CAPSULE, preprocess_capsule_destroy);
}

static PyObject *py_preprocess_execute(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *capsule, *in_obj, *out_obj;
    if (!PyArg_ParseTuple(args, "OOO", &capsule, &in_obj, &out_obj)) return NULL;
    usbeam_ai_handle *h = usbeam_py_plan_from_capsule(capsule, PREPROCESS_CAPSULE, "plan");
    if (!h) return NULL;
    if (h->backend != USBEAM_BACKEND_CPU) return usbeam_py_ai_wrong_backend("preprocess");
    const void *in = usbeam_py_array_data(in_obj, "image", h->npy_in, h->n_in, 0);
    if (!in) return NULL;
    void *out = usbeam_py_array_data(out_obj, "out", h->npy_out, h->n_out, 1);
    if (!out) return NULL;
    usbeam_status st;
    Py_BEGIN_ALLOW_THREADS
    st = usbeam_preprocess_execute(h->plan, in, out);
    Py_END_ALLOW_THREADS
    if (st != USBEAM_OK) return usbeam_py_raise(st);
    Py_RETURN_NONE;
}

static PyObject *py_preprocess_execute_device(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *capsule, *in_obj, *out_obj, *stream_obj;
    if (!PyArg_ParseTuple(args, "OOOO", &capsule, &in_obj, &out_obj, &stream_obj)) return NULL;
    usbeam_ai_handle *h = usbeam_py_plan_from_capsule(capsule, PREPROCESS_CAPSULE, "plan");
    if (!h) return NULL;
    if (h->backend != USBEAM_BACKEND_CUDA) return usbeam_py_ai_wrong_backend("preprocess");
    void *in, *out, *stream;
    if (usbeam_py_device_pointer(in_obj, "image", &in) < 0 || usbeam_py_device_pointer(out_obj, "out", &out) < 0 ||
        usbeam_py_device_pointer(stream_obj, "stream", &stream) < 0)
        return NULL;
    usbeam_status st;
    Py_BEGIN_ALLOW_THREADS
    st = usbeam_preprocess_execute_async(h->plan, in, out, stream);
    Py_END_ALLOW_THREADS
    if (st != USBEAM_OK) return usbeam_py_raise(st);
    Py_RETURN_NONE;
}

PyObject *usbeam_py_ai_wrong_backend(const char *what)
{
    PyErr_Format(PyExc_ValueError,
                 "%s: a CPU plan takes NumPy arrays and a CUDA plan device arrays; this plan was "
                 "created for the other backend", what);
    return NULL;
}

/* ---------------------------------------------------------------- FP16 <-> FP32 */

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
    if (st != USBEAM_OK) return usbeam_py_raise(st);
    Py_RETURN_NONE;
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
    if (st != USBEAM_OK) return usbeam_py_raise(st);
    Py_RETURN_NONE;
}

static PyObject *py_convert_device(PyObject *self, PyObject *args)
{
    (void)self;
    const char *direction;
    PyObject *in_obj, *out_obj, *stream_obj;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "sOOnO", &direction, &in_obj, &out_obj, &n, &stream_obj)) return NULL;
    void *in, *out, *stream;
    if (n < 0) return PyErr_Format(PyExc_ValueError, "n must be >= 0");
    if (usbeam_py_device_pointer(in_obj, "x", &in) < 0 || usbeam_py_device_pointer(out_obj, "out", &out) < 0 ||
        usbeam_py_device_pointer(stream_obj, "stream", &stream) < 0)
        return NULL;
    usbeam_status st;
    int to_half = strcmp(direction, "float16") == 0;
    Py_BEGIN_ALLOW_THREADS
    st = to_half ? usbeam_cuda_float32_to_float16(in, out, (size_t)n, stream)
                 : usbeam_cuda_float16_to_float32(in, out, (size_t)n, stream);
    Py_END_ALLOW_THREADS
    if (st != USBEAM_OK) return usbeam_py_raise(st);
    Py_RETURN_NONE;
}

/* ---------------------------------------------------------------- detection */

#define DETECT_CAPSULE "usbeam.detect_plan"
static void destroy_detect(void *plan) { usbeam_detect_plan_destroy(plan); }
HANDLE_DESTRUCTOR(detect_capsule_destroy, DETECT_CAPSULE, destroy_detect)

static PyObject *py_detect_plan(PyObject *self, PyObject *args, PyObject *kwargs)
{
    (void)self;
    static char *keywords[] = {"n_images", "n_anchors", "n_classes", "dtype", "conf", "iou",
                               "max_candidates", "max_det", "class_agnostic", "backend", NULL};
    Py_ssize_t n_images, n_anchors, n_classes, max_candidates, max_det;
    const char *dtype_name, *backend_name = "cpu";
    double conf, iou;
    int agnostic = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "nnnsddnn|ps", keywords, &n_images, &n_anchors, &n_classes,
                                     &dtype_name, &conf, &iou, &max_candidates, &max_det, &agnostic,
                                     &backend_name))
        return NULL;
    const char *names[] = {"n_images", "n_anchors", "n_classes", "max_candidates", "max_det"};
    const Py_ssize_t values[] = {n_images, n_anchors, n_classes, max_candidates, max_det};
    if (check_sizes(names, values, 5) < 0) return NULL;
    usbeam_detect_params p;
    memset(&p, 0, sizeof p);
    int npy_in, npy_unused;
    if (usbeam_py_ai_dtype(dtype_name, "raw", &p.in_dtype, &npy_in) < 0) return NULL;
    (void)npy_unused;
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
    usbeam_ai_handle *h = usbeam_py_ai_handle_new();
    if (!h) return NULL;
    h->destroy = destroy_detect;
    h->backend = backend;
    h->npy_in = npy_in;
    h->n_in = p.n_images * p.n_anchors * (5 + p.n_classes);
    h->n_out = p.n_images * p.max_detections * 6;
    h->n_aux = p.n_images;
    usbeam_status st = usbeam_detect_plan_create(&p, backend, (usbeam_detect_plan **)&h->plan);
    if (st != USBEAM_OK) {
        usbeam_py_ai_handle_free(h);
        return usbeam_py_raise(st);
    }
    return usbeam_py_ai_wrap(h, DETECT_CAPSULE, detect_capsule_destroy);
}

static PyObject *py_detect_execute(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *capsule, *raw_obj, *det_obj, *count_obj;
    if (!PyArg_ParseTuple(args, "OOOO", &capsule, &raw_obj, &det_obj, &count_obj)) return NULL;
    usbeam_ai_handle *h = usbeam_py_plan_from_capsule(capsule, DETECT_CAPSULE, "plan");
    if (!h) return NULL;
    if (h->backend != USBEAM_BACKEND_CPU) return usbeam_py_ai_wrong_backend("detect");
    const void *raw = usbeam_py_array_data(raw_obj, "raw", h->npy_in, h->n_in, 0);
    if (!raw) return NULL;
    float *det = usbeam_py_array_data(det_obj, "detections", NPY_FLOAT32, h->n_out, 1);
    if (!det) return NULL;
    int32_t *counts = usbeam_py_array_data(count_obj, "counts", NPY_INT32, h->n_aux, 1);
    if (!counts) return NULL;
    usbeam_status st;
    Py_BEGIN_ALLOW_THREADS
    PyThread_acquire_lock(h->lock, WAIT_LOCK);
    st = usbeam_detect_execute(h->plan, raw, det, counts);
    PyThread_release_lock(h->lock);
    Py_END_ALLOW_THREADS
    if (st != USBEAM_OK) return usbeam_py_raise(st);
    Py_RETURN_NONE;
}

static PyObject *py_detect_execute_device(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *capsule, *raw_obj, *det_obj, *count_obj, *stream_obj;
    if (!PyArg_ParseTuple(args, "OOOOO", &capsule, &raw_obj, &det_obj, &count_obj, &stream_obj)) return NULL;
    usbeam_ai_handle *h = usbeam_py_plan_from_capsule(capsule, DETECT_CAPSULE, "plan");
    if (!h) return NULL;
    if (h->backend != USBEAM_BACKEND_CUDA) return usbeam_py_ai_wrong_backend("detect");
    void *raw, *det, *counts, *stream;
    if (usbeam_py_device_pointer(raw_obj, "raw", &raw) < 0 ||
        usbeam_py_device_pointer(det_obj, "detections", &det) < 0 ||
        usbeam_py_device_pointer(count_obj, "counts", &counts) < 0 ||
        usbeam_py_device_pointer(stream_obj, "stream", &stream) < 0)
        return NULL;
    usbeam_status st;
    Py_BEGIN_ALLOW_THREADS
    PyThread_acquire_lock(h->lock, WAIT_LOCK);
    st = usbeam_detect_execute_async(h->plan, raw, det, counts, stream);
    PyThread_release_lock(h->lock);
    Py_END_ALLOW_THREADS
    if (st != USBEAM_OK) return usbeam_py_raise(st);
    Py_RETURN_NONE;
}

/* ---------------------------------------------------------------- plain NMS */

#define NMS_CAPSULE "usbeam.nms_plan"
static void destroy_nms(void *plan) { usbeam_nms_plan_destroy(plan); }
HANDLE_DESTRUCTOR(nms_capsule_destroy, NMS_CAPSULE, destroy_nms)

static PyObject *py_nms_plan(PyObject *self, PyObject *args)
{
    (void)self;
    Py_ssize_t n_boxes, max_keep;
    double iou;
    if (!PyArg_ParseTuple(args, "ndn", &n_boxes, &iou, &max_keep)) return NULL;
    const char *names[] = {"n_boxes", "max_keep"};
    const Py_ssize_t values[] = {n_boxes, max_keep};
    if (check_sizes(names, values, 2) < 0) return NULL;
    usbeam_nms_params p = {(size_t)n_boxes, iou, (size_t)max_keep};
    usbeam_ai_handle *h = usbeam_py_ai_handle_new();
    if (!h) return NULL;
    h->destroy = destroy_nms;
    h->n_in = p.n_boxes;
    h->n_out = p.max_keep;
    usbeam_status st = usbeam_nms_plan_create(&p, USBEAM_BACKEND_CPU, (usbeam_nms_plan **)&h->plan);
    if (st != USBEAM_OK) {
        usbeam_py_ai_handle_free(h);
        return usbeam_py_raise(st);
    }
    return usbeam_py_ai_wrap(h, NMS_CAPSULE, nms_capsule_destroy);
}

static PyObject *py_nms_execute(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *capsule, *boxes_obj, *scores_obj, *classes_obj, *keep_obj, *count_obj;
    if (!PyArg_ParseTuple(args, "OOOOOO", &capsule, &boxes_obj, &scores_obj, &classes_obj, &keep_obj, &count_obj))
        return NULL;
    usbeam_ai_handle *h = usbeam_py_plan_from_capsule(capsule, NMS_CAPSULE, "plan");
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
    usbeam_status st;
    Py_BEGIN_ALLOW_THREADS
    PyThread_acquire_lock(h->lock, WAIT_LOCK);
    st = usbeam_nms_execute(h->plan, boxes, scores, classes, keep, count);
    PyThread_release_lock(h->lock);
    Py_END_ALLOW_THREADS
    if (st != USBEAM_OK) return usbeam_py_raise(st);
    Py_RETURN_NONE;
}

#define METHOD_KW(name, fn, doc) {name, (PyCFunction)(void (*)(void))fn, METH_VARARGS | METH_KEYWORDS, doc}

PyMethodDef usbeam_py_ai_methods[] = {
    METHOD_KW("preprocess_plan", py_preprocess_plan, "Create a model-input pre-processing plan."),
    {"preprocess_execute", py_preprocess_execute, METH_VARARGS, "Run a CPU pre-processing plan: (plan, image, out)."},
    {"preprocess_execute_device", py_preprocess_execute_device, METH_VARARGS,
     "Queue a CUDA pre-processing plan: (plan, image_ptr, out_ptr, stream)."},
    {"float32_to_float16", py_float32_to_float16, METH_VARARGS, "(x float32, out float16), round to nearest even."},
    {"float16_to_float32", py_float16_to_float32, METH_VARARGS, "(x float16, out float32)."},
    {"convert_device", py_convert_device, METH_VARARGS,
     "Queue an FP16/FP32 conversion on the GPU: (to 'float16'|'float32', in_ptr, out_ptr, n, stream)."},
    METHOD_KW("detect_plan", py_detect_plan, "Create a detection post-processing plan."),
    {"detect_execute", py_detect_execute, METH_VARARGS, "Run a CPU detection plan: (plan, raw, detections, counts)."},
    {"detect_execute_device", py_detect_execute_device, METH_VARARGS,
     "Queue a CUDA detection plan: (plan, raw_ptr, detections_ptr, counts_ptr, stream)."},
    {"nms_plan", py_nms_plan, METH_VARARGS, "Create a plain NMS plan: (n_boxes, iou, max_keep)."},
    {"nms_execute", py_nms_execute, METH_VARARGS, "Run NMS: (plan, boxes, scores, classes|None, keep, count)."},
    {NULL, NULL, 0, NULL},
};
