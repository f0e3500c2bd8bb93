/*
 * py_segment.c - Python bindings of the AI family's segmentation post-processing (see
 * segment.c).
 *   mask_threshold(values, threshold, mask) / mask_argmax(scores, n_images, n_classes, mask)
 *   components_plan(n_images, height, width, connectivity, backend)
 *   label_execute(plan, mask, labels, counts) / fill_holes_execute(plan, mask, out)
 *   largest_component_execute(plan, mask, out) / remove_small_execute(plan, mask, min_area, out)
 *   components_execute_device(plan, operation, mask_ptr, out_ptr, counts_ptr, min_area, stream)
 *   regionprops_basic(labels, n_labels, area, bbox, centroid)
 */
#include "python/py_ai_common.h"

static PyObject *py_mask_threshold(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *in_obj, *out_obj;
    double threshold;
    if (!PyArg_ParseTuple(args, "OdO", &in_obj, &threshold, &out_obj)) return NULL;
    if (!PyArray_Check(in_obj)) return PyErr_Format(PyExc_TypeError, "logits must be a numpy.ndarray");
    PyArrayObject *arr = (PyArrayObject *)in_obj;
    int npy = PyArray_TYPE(arr) == NPY_HALF ? NPY_HALF : NPY_FLOAT32;
    size_t n = (size_t)PyArray_SIZE(arr);
    const void *in = usbeam_py_array_data(in_obj, "logits", npy, n, 0);
    if (!in) return NULL;
    uint8_t *out = usbeam_py_array_data(out_obj, "out", NPY_BOOL, n, 1);
    if (!out) return NULL;
    usbeam_status st;
    Py_BEGIN_ALLOW_THREADS
    st = usbeam_mask_threshold(in, npy == NPY_HALF ? USBEAM_DTYPE_FLOAT16 : USBEAM_DTYPE_FLOAT32, n, threshold, out);
    Py_END_ALLOW_THREADS
    if (st != USBEAM_OK) return usbeam_py_raise(st);
    Py_RETURN_NONE;
}

static PyObject *py_mask_argmax(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *in_obj, *out_obj;
    Py_ssize_t n_images, n_classes;
    if (!PyArg_ParseTuple(args, "OnnO", &in_obj, &n_images, &n_classes, &out_obj)) return NULL;
    if (!PyArray_Check(in_obj)) return PyErr_Format(PyExc_TypeError, "scores must be a numpy.ndarray");
    if (n_images <= 0 || n_classes <= 0)
        return PyErr_Format(PyExc_ValueError, "n_images and n_classes must be >= 1");
    PyArrayObject *arr = (PyArrayObject *)in_obj;
    int npy = PyArray_TYPE(arr) == NPY_HALF ? NPY_HALF : NPY_FLOAT32;
    size_t n = (size_t)PyArray_SIZE(arr);
    if (n % ((size_t)n_images * (size_t)n_classes) != 0)
        return PyErr_Format(PyExc_ValueError, "scores: %zu values are not n_images x n_classes x pixels", n);
    size_t n_pixels = n / ((size_t)n_images * (size_t)n_classes);
    const void *in = usbeam_py_array_data(in_obj, "scores", npy, n, 0);
    if (!in) return NULL;
    int32_t *out = usbeam_py_array_data(out_obj, "out", NPY_INT32, (size_t)n_images * n_pixels, 1);
    if (!out) return NULL;
    usbeam_status st;
    Py_BEGIN_ALLOW_THREADS
    st = usbeam_mask_argmax(in, npy == NPY_HALF ? USBEAM_DTYPE_FLOAT16 : USBEAM_DTYPE_FLOAT32, (size_t)n_images,
                            (size_t)n_classes, n_pixels, out);
    Py_END_ALLOW_THREADS
    if (st != USBEAM_OK) return usbeam_py_raise(st);
    Py_RETURN_NONE;
}

#define COMPONENTS_CAPSULE "usbeam.components_plan"
static void destroy_components(void *plan) { usbeam_components_plan_destroy(plan); }

static void components_capsule_destroy(PyObject *object)
{
    usbeam_ai_handle *h = PyCapsule_GetPointer(object, COMPONENTS_CAPSULE);
    if (h) {
        destroy_components(h->plan);
        usbeam_py_ai_handle_free(h);
    }
}

static PyObject *py_components_plan(PyObject *self, PyObject *args, PyObject *kwargs)
{
    (void)self;
    static char *keywords[] = {"n_images", "height", "width", "connectivity", "backend", NULL};
    Py_ssize_t n_images, height, width;
    int connectivity = 4;
    const char *backend_name = "cpu";
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "nnn|is", keywords, &n_images, &height, &width, &connectivity,
                                     &backend_name))
        return NULL;
    if (n_images < 0 || height < 0 || width < 0)
        return PyErr_Format(PyExc_ValueError, "mask: n_images, height and width must be >= 0");
    usbeam_backend backend;
    if (usbeam_py_backend(backend_name, &backend) < 0) return NULL;
    usbeam_components_params p = {(size_t)n_images, (size_t)height, (size_t)width, connectivity};
    usbeam_ai_handle *h = usbeam_py_ai_handle_new();
    if (!h) return NULL;
    h->destroy = destroy_components;
    h->backend = backend;
    h->n_images = p.n_images;
    h->n_in = p.n_images * p.height * p.width;
    usbeam_status st = usbeam_components_plan_create(&p, backend, (usbeam_components_plan **)&h->plan);
    if (st != USBEAM_OK) {
        usbeam_py_ai_handle_free(h);
        return usbeam_py_raise(st);
    }
    return usbeam_py_ai_wrap(h, COMPONENTS_CAPSULE, components_capsule_destroy);
}

/* operation: 0 label, 1 fill holes, 2 largest component, 3 remove small */
static PyObject *components_run(PyObject *args, int operation)
{
    PyObject *capsule, *mask_obj, *out_obj, *counts_obj = NULL;
    Py_ssize_t min_area = 0;
    int ok;
    if (operation == 0)
        ok = PyArg_ParseTuple(args, "OOOO", &capsule, &mask_obj, &out_obj, &counts_obj);
    else if (operation == 3)
        ok = PyArg_ParseTuple(args, "OOnO", &capsule, &mask_obj, &min_area, &out_obj);
    else
        ok = PyArg_ParseTuple(args, "OOO", &capsule, &mask_obj, &out_obj);
    if (!ok) return NULL;
    if (min_area < 0) return PyErr_Format(PyExc_ValueError, "min_area must be >= 0 (got %zd)", min_area);
    usbeam_ai_handle *h = usbeam_py_plan_from_capsule(capsule, COMPONENTS_CAPSULE, "plan");
    if (!h) return NULL;
    if (h->backend != USBEAM_BACKEND_CPU) return usbeam_py_ai_wrong_backend("components");
    const uint8_t *mask = usbeam_py_array_data(mask_obj, "mask", NPY_BOOL, h->n_in, 0);
    if (!mask) return NULL;
    void *out = usbeam_py_array_data(out_obj, "out", operation == 0 ? NPY_INT32 : NPY_BOOL, h->n_in, 1);
    if (!out) return NULL;
    int32_t *counts = NULL;
    if (operation == 0 && !(counts = usbeam_py_array_data(counts_obj, "counts", NPY_INT32, h->n_images, 1)))
        return NULL;
    usbeam_status st;
    Py_BEGIN_ALLOW_THREADS
    PyThread_acquire_lock(h->lock, WAIT_LOCK);
    switch (operation) {
    case 0: st = usbeam_label_execute(h->plan, mask, out, counts); break;
    case 1: st = usbeam_fill_holes_execute(h->plan, mask, out); break;
    case 2: st = usbeam_largest_component_execute(h->plan, mask, out); break;
    default: st = usbeam_remove_small_execute(h->plan, mask, (size_t)min_area, out); break;
    }
    PyThread_release_lock(h->lock);
    Py_END_ALLOW_THREADS
    if (st != USBEAM_OK) return usbeam_py_raise(st);
    Py_RETURN_NONE;
}

static PyObject *py_label_execute(PyObject *self, PyObject *args) { (void)self; return components_run(args, 0); }
static PyObject *py_fill_holes_execute(PyObject *self, PyObject *args) { (void)self; return components_run(args, 1); }
static PyObject *py_largest_execute(PyObject *self, PyObject *args) { (void)self; return components_run(args, 2); }
static PyObject *py_remove_small_execute(PyObject *self, PyObject *args) { (void)self; return components_run(args, 3); }

static PyObject *py_components_execute_device(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *capsule, *mask_obj, *out_obj, *counts_obj, *stream_obj;
    int operation;
    Py_ssize_t min_area;
    if (!PyArg_ParseTuple(args, "OiOOOnO", &capsule, &operation, &mask_obj, &out_obj, &counts_obj, &min_area,
                          &stream_obj))
        return NULL;
    usbeam_ai_handle *h = usbeam_py_plan_from_capsule(capsule, COMPONENTS_CAPSULE, "plan");
    if (!h) return NULL;
    if (h->backend != USBEAM_BACKEND_CUDA) return usbeam_py_ai_wrong_backend("components");
    if (operation < 0 || operation > 3) return PyErr_Format(PyExc_ValueError, "operation must be 0 .. 3");
    if (min_area < 0) return PyErr_Format(PyExc_ValueError, "min_area must be >= 0 (got %zd)", min_area);
    void *mask, *out, *counts = NULL, *stream;
    if (usbeam_py_device_pointer(mask_obj, "mask", &mask) < 0 || usbeam_py_device_pointer(out_obj, "out", &out) < 0 ||
        usbeam_py_device_pointer(stream_obj, "stream", &stream) < 0)
        return NULL;
    if (operation == 0 && usbeam_py_device_pointer(counts_obj, "counts", &counts) < 0) return NULL;
    usbeam_status st;
    Py_BEGIN_ALLOW_THREADS
    PyThread_acquire_lock(h->lock, WAIT_LOCK);
    st = usbeam_components_set_stream(h->plan, stream);
    if (st == USBEAM_OK) {
        switch (operation) {
        case 0: st = usbeam_label_execute(h->plan, mask, out, counts); break;
        case 1: st = usbeam_fill_holes_execute(h->plan, mask, out); break;
        case 2: st = usbeam_largest_component_execute(h->plan, mask, out); break;
        default: st = usbeam_remove_small_execute(h->plan, mask, (size_t)min_area, out); break;
        }
    }
    PyThread_release_lock(h->lock);
    Py_END_ALLOW_THREADS
    if (st != USBEAM_OK) return usbeam_py_raise(st);
    Py_RETURN_NONE;
}

static PyObject *py_regionprops_basic(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *labels_obj, *area_obj, *bbox_obj, *centroid_obj;
    Py_ssize_t n_labels;
    if (!PyArg_ParseTuple(args, "OnOOO", &labels_obj, &n_labels, &area_obj, &bbox_obj, &centroid_obj)) return NULL;
    if (!PyArray_Check(labels_obj) || PyArray_NDIM((PyArrayObject *)labels_obj) != 2)
        return PyErr_Format(PyExc_ValueError, "labels must be a 2-D numpy.ndarray");
    if (n_labels < 0) return PyErr_Format(PyExc_ValueError, "n_labels must be >= 0 (got %zd)", n_labels);
    npy_intp *dims = PyArray_DIMS((PyArrayObject *)labels_obj);
    size_t height = (size_t)dims[0], width = (size_t)dims[1], n = (size_t)n_labels;
    const int32_t *labels = usbeam_py_array_data(labels_obj, "labels", NPY_INT32, height * width, 0);
    if (!labels) return NULL;
    int32_t *area = usbeam_py_array_data(area_obj, "area", NPY_INT32, n, 1);
    if (!area) return NULL;
    int32_t *bbox = usbeam_py_array_data(bbox_obj, "bbox", NPY_INT32, 4 * n, 1);
    if (!bbox) return NULL;
    double *centroid = usbeam_py_array_data(centroid_obj, "centroid", NPY_FLOAT64, 2 * n, 1);
    if (!centroid) return NULL;
    usbeam_status st;
    Py_BEGIN_ALLOW_THREADS
    st = usbeam_regionprops_basic(labels, height, width, n, area, bbox, centroid);
    Py_END_ALLOW_THREADS
    if (st != USBEAM_OK) return usbeam_py_raise(st);
    Py_RETURN_NONE;
}

/* (operation 'threshold'|'argmax', in_ptr, dtype, n_images, n_classes, n_pixels, threshold, out_ptr, stream) */
static PyObject *py_mask_device(PyObject *self, PyObject *args)
{
    (void)self;
    const char *operation, *dtype_name;
    PyObject *in_obj, *out_obj, *stream_obj;
    Py_ssize_t n_images, n_classes, n_pixels;
    double threshold;
    if (!PyArg_ParseTuple(args, "sOsnnndOO", &operation, &in_obj, &dtype_name, &n_images, &n_classes, &n_pixels,
                          &threshold, &out_obj, &stream_obj))
        return NULL;
    if (n_images < 0 || n_classes < 1 || n_pixels < 0)
        return PyErr_Format(PyExc_ValueError, "n_images and n_pixels must be >= 0, n_classes >= 1");
    usbeam_dtype dtype;
    int npy;
    if (usbeam_py_ai_dtype(dtype_name, "logits", &dtype, &npy) < 0) return NULL;
    void *in, *out, *stream;
    if (usbeam_py_device_pointer(in_obj, "logits", &in) < 0 || usbeam_py_device_pointer(out_obj, "out", &out) < 0 ||
        usbeam_py_device_pointer(stream_obj, "stream", &stream) < 0)
        return NULL;
    int argmax = strcmp(operation, "argmax") == 0;
    usbeam_status st;
    Py_BEGIN_ALLOW_THREADS
    st = argmax ? usbeam_cuda_mask_argmax(in, dtype, (size_t)n_images, (size_t)n_classes, (size_t)n_pixels, out, stream)
                : usbeam_cuda_mask_threshold(in, dtype, (size_t)(n_images * n_pixels), threshold, out, stream);
    Py_END_ALLOW_THREADS
    if (st != USBEAM_OK) return usbeam_py_raise(st);
    Py_RETURN_NONE;
}

static PyObject *py_regionprops_basic_device(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *labels_obj, *area_obj, *bbox_obj, *centroid_obj, *stream_obj;
    Py_ssize_t height, width, n_labels;
    if (!PyArg_ParseTuple(args, "OnnnOOOO", &labels_obj, &height, &width, &n_labels, &area_obj, &bbox_obj,
                          &centroid_obj, &stream_obj))
        return NULL;
    if (height <= 0 || width <= 0 || n_labels < 0)
        return PyErr_Format(PyExc_ValueError, "labels: height and width must be >= 1 and n_labels >= 0");
    void *labels, *area, *bbox, *centroid, *stream;
    if (usbeam_py_device_pointer(labels_obj, "labels", &labels) < 0 ||
        usbeam_py_device_pointer(area_obj, "area", &area) < 0 || usbeam_py_device_pointer(bbox_obj, "bbox", &bbox) < 0 ||
        usbeam_py_device_pointer(centroid_obj, "centroid", &centroid) < 0 ||
        usbeam_py_device_pointer(stream_obj, "stream", &stream) < 0)
        return NULL;
    usbeam_status st;
    Py_BEGIN_ALLOW_THREADS
    st = usbeam_cuda_regionprops_basic(labels, (size_t)height, (size_t)width, (size_t)n_labels, area, bbox, centroid,
                                       stream);
    Py_END_ALLOW_THREADS
    if (st != USBEAM_OK) return usbeam_py_raise(st);
    Py_RETURN_NONE;
}

PyMethodDef usbeam_py_segment_methods[] = {
    {"mask_device", py_mask_device, METH_VARARGS,
     "Queue threshold/argmax on the GPU: (op, in_ptr, dtype, n_images, n_classes, n_pixels, threshold, out_ptr, stream)."},
    {"regionprops_basic_device", py_regionprops_basic_device, METH_VARARGS,
     "Queue region properties on the GPU: (labels_ptr, height, width, n_labels, area_ptr, bbox_ptr, centroid_ptr, stream)."},
    {"mask_threshold", py_mask_threshold, METH_VARARGS, "(logits, threshold, out bool): out = logits > threshold."},
    {"mask_argmax", py_mask_argmax, METH_VARARGS, "(scores, n_images, n_classes, out int32): class argmax."},
    {"components_plan", (PyCFunction)(void (*)(void))py_components_plan, METH_VARARGS | METH_KEYWORDS,
     "Create a connected-components plan."},
    {"label_execute", py_label_execute, METH_VARARGS, "(plan, mask bool, labels int32, counts int32)."},
    {"fill_holes_execute", py_fill_holes_execute, METH_VARARGS, "(plan, mask bool, out bool)."},
    {"largest_component_execute", py_largest_execute, METH_VARARGS, "(plan, mask bool, out bool)."},
    {"remove_small_execute", py_remove_small_execute, METH_VARARGS, "(plan, mask bool, min_area, out bool)."},
    {"components_execute_device", py_components_execute_device, METH_VARARGS,
     "Queue a CUDA components plan: (plan, operation, mask_ptr, out_ptr, counts_ptr, min_area, stream)."},
    {"regionprops_basic", py_regionprops_basic, METH_VARARGS,
     "(labels int32 2-D, n_labels, area int32, bbox int32, centroid float64)."},
    {NULL, NULL, 0, NULL},
};
