/*
 * py_segment.c - Python bindings of the AI hand-off stage, segmentation side
 * (csrc/ai/segment.c); plans, buffers, the GIL and the lock follow py_plan.h.
 *   mask_threshold(values, threshold, mask) / mask_argmax(scores, n_images, n_classes, mask)
 *   components_plan(n_images, height, width, connectivity, backend) / components_cuda_exec(plan)
 *   label_execute(plan, mask, labels, counts, back=0) / fill_holes_execute(plan, mask, out, back=0)
 *   largest_component_execute(plan, mask, out, back=0)
 *   remove_small_execute(plan, mask, min_area, out, back=0)
 *   regionprops_basic(labels, n_labels, area, bbox, centroid)
 *   mask_device(op, in_ptr, dtype, n_images, n_classes, n_pixels, threshold, out_ptr, stream)
 *   regionprops_basic_device(labels_ptr, height, width, n_labels, area_ptr, bbox_ptr, centroid_ptr, stream)
 * Components buffers are flat: NumPy arrays for a CPU plan, usbeam.DeviceArrays on the plan's
 * device for a CUDA plan, queued on the plan's stream; masks are bool or uint8 (nonzero = set).
 * back, a cudaStream_t as an integer: the stream the plan returns to after the call
 * (ai_return_to), when usbeam.ai switched it to the call's stream; 0: stay.
 * The *_device functions have no plan: raw device addresses and their stream, as integers.
 */
#include "python/py_plan.h" /* first: Python.h sets the feature macros */

#include "ai/ai_internal.h"

/* The CPU operations label into the plan's scratch: one call at a time.  A CUDA execute only
 * queues kernels and keeps the GIL (usbeam.ai holds a per-plan lock around a call's stream
 * switch, imports and execute). */
USBEAM_PY_PLAN_TYPE(components, USBEAM_PY_PLAN_CUDA_KEEPS_GIL);

/* ---- threshold and argmax (host) ------------------------------------------------------------- */

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
    return usbeam_py_none_or_raise(st);
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
    return usbeam_py_none_or_raise(st);
}

/* ---- connected components -------------------------------------------------------------------- */

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
    usbeam_py_plan *h = usbeam_py_plan_new(&components_plan_type);
    if (!h) return NULL;
    h->backend = backend;
    h->n_in = h->n_out = p.n_images * p.height * p.width;
    h->n_aux = p.n_images; /* counts of a labelling */
    h->n_outer = p.n_images;
    usbeam_components_plan *plan = NULL;
    usbeam_status st = usbeam_components_plan_create(&p, backend, &plan);
    return usbeam_py_plan_wrap(h, st, plan);
}

USBEAM_PY_PLAN_CUDA_EXEC_BINDING(components)

/* NumPy type of a mask argument: uint8 when its .dtype (NumPy or DeviceArray) says so, bool
 * otherwise, so that anything else is refused naming the mask and the bool type. */
static int mask_type(PyObject *obj)
{
    PyObject *dtype = PyObject_GetAttrString(obj, "dtype");
    if (!dtype) {
        PyErr_Clear();
        return NPY_BOOL;
    }
    const int type = PyArray_DescrCheck(dtype) ? ((PyArray_Descr *)dtype)->type_num : NPY_BOOL;
    Py_DECREF(dtype);
    return type == NPY_UINT8 ? NPY_UINT8 : NPY_BOOL;
}

static usbeam_status run_components(usbeam_components_plan *plan, usbeam_components_operation operation,
                                    const uint8_t *mask, void *out, int32_t *counts, size_t min_area)
{
    switch (operation) {
    case USBEAM_COMPONENTS_LABEL: return usbeam_label_execute(plan, mask, out, counts);
    case USBEAM_COMPONENTS_FILL_HOLES: return usbeam_fill_holes_execute(plan, mask, out);
    case USBEAM_COMPONENTS_LARGEST: return usbeam_largest_component_execute(plan, mask, out);
    default: return usbeam_remove_small_execute(plan, mask, min_area, out);
    }
}

static PyObject *components_execute(PyObject *args, usbeam_components_operation operation)
{
    PyObject *capsule, *mask_obj, *out_obj, *counts_obj = NULL;
    Py_ssize_t min_area = 0;
    unsigned long long back = 0;
    int ok;
    if (operation == USBEAM_COMPONENTS_LABEL)
        ok = PyArg_ParseTuple(args, "OOOO|K", &capsule, &mask_obj, &out_obj, &counts_obj, &back);
    else if (operation == USBEAM_COMPONENTS_REMOVE_SMALL)
        ok = PyArg_ParseTuple(args, "OOnO|K", &capsule, &mask_obj, &min_area, &out_obj, &back);
    else
        ok = PyArg_ParseTuple(args, "OOO|K", &capsule, &mask_obj, &out_obj, &back);
    if (!ok) return NULL;
    if (min_area < 0) return PyErr_Format(PyExc_ValueError, "min_area must be >= 0 (got %zd)", min_area);
    usbeam_py_plan *h = usbeam_py_plan_from(capsule, &components_plan_type);
    if (!h) return NULL;
    usbeam_cuda_exec *cuda = usbeam_py_plan_cuda(h);
    const int labels = operation == USBEAM_COMPONENTS_LABEL;
    const uint8_t *mask = usbeam_py_plan_buffer(mask_obj, "mask", mask_type(mask_obj), h->n_in, 0, cuda);
    if (!mask) return NULL;
    void *out = usbeam_py_plan_buffer(out_obj, "out", labels ? NPY_INT32 : NPY_BOOL, h->n_out, 1, cuda);
    if (!out) return NULL;
    int32_t *counts = NULL;
    if (labels && !(counts = usbeam_py_plan_buffer(counts_obj, "counts", NPY_INT32, h->n_aux, 1, cuda))) return NULL;
    usbeam_py_plan_call call = usbeam_py_plan_enter(h, cuda);
    usbeam_status st = run_components(h->plan, operation, mask, out, counts, (size_t)min_area);
    usbeam_status returned = ai_return_to(cuda, (void *)(uintptr_t)back);
    return usbeam_py_plan_finish(&call, st != USBEAM_OK ? st : returned);
}

static PyObject *py_label_execute(PyObject *self, PyObject *args)
{
    (void)self;
    return components_execute(args, USBEAM_COMPONENTS_LABEL);
}

static PyObject *py_fill_holes_execute(PyObject *self, PyObject *args)
{
    (void)self;
    return components_execute(args, USBEAM_COMPONENTS_FILL_HOLES);
}

static PyObject *py_largest_execute(PyObject *self, PyObject *args)
{
    (void)self;
    return components_execute(args, USBEAM_COMPONENTS_LARGEST);
}

static PyObject *py_remove_small_execute(PyObject *self, PyObject *args)
{
    (void)self;
    return components_execute(args, USBEAM_COMPONENTS_REMOVE_SMALL);
}

/* ---- region properties (host) ----------------------------------------------------------------- */

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
    return usbeam_py_none_or_raise(st);
}

/* ---- plan-less device functions -------------------------------------------------------------- */
/* usbeam.ai has checked the arrays (shape, dtype, no overlap) and passes addresses; each call
 * only queues kernels, so the GIL is kept, as a CUDA plan's execute keeps it. */

static PyObject *py_mask_device(PyObject *self, PyObject *args)
{
    (void)self;
    static const char *const logit_dtypes[] = {"float16", "float32", NULL};
    const char *operation, *dtype_name;
    unsigned long long in, out, stream;
    Py_ssize_t n_images, n_classes, n_pixels;
    double threshold;
    if (!PyArg_ParseTuple(args, "sKsnnndKK", &operation, &in, &dtype_name, &n_images, &n_classes, &n_pixels,
                          &threshold, &out, &stream))
        return NULL;
    if (n_images < 0 || n_classes < 1 || n_pixels < 0)
        return PyErr_Format(PyExc_ValueError, "n_images and n_pixels must be >= 0, n_classes >= 1");
    usbeam_dtype dtype;
    int npy;
    if (usbeam_py_dtype(dtype_name, logit_dtypes, &dtype, &npy) < 0)
        return PyErr_Format(PyExc_TypeError, "logits: unsupported dtype '%s'", dtype_name);
    const int argmax = strcmp(operation, "argmax") == 0;
    if (!argmax && strcmp(operation, "threshold") != 0)
        return PyErr_Format(PyExc_ValueError, "operation must be 'threshold' or 'argmax' (got '%s')", operation);
    const void *values = (const void *)(uintptr_t)in;
    void *queue = (void *)(uintptr_t)stream;
    usbeam_status st = argmax ? usbeam_cuda_mask_argmax(values, dtype, (size_t)n_images, (size_t)n_classes,
                                                        (size_t)n_pixels, (int32_t *)(uintptr_t)out, queue)
                              : usbeam_cuda_mask_threshold(values, dtype, (size_t)n_images * (size_t)n_pixels,
                                                           threshold, (uint8_t *)(uintptr_t)out, queue);
    return usbeam_py_none_or_raise(st);
}

static PyObject *py_regionprops_basic_device(PyObject *self, PyObject *args)
{
    (void)self;
    unsigned long long labels, area, bbox, centroid, stream;
    Py_ssize_t height, width, n_labels;
    if (!PyArg_ParseTuple(args, "KnnnKKKK", &labels, &height, &width, &n_labels, &area, &bbox, &centroid, &stream))
        return NULL;
    if (height <= 0 || width <= 0 || n_labels < 0)
        return PyErr_Format(PyExc_ValueError, "labels: height and width must be >= 1 and n_labels >= 0");
    usbeam_status st = usbeam_cuda_regionprops_basic((const int32_t *)(uintptr_t)labels, (size_t)height,
                                                     (size_t)width, (size_t)n_labels, (int32_t *)(uintptr_t)area,
                                                     (int32_t *)(uintptr_t)bbox, (double *)(uintptr_t)centroid,
                                                     (void *)(uintptr_t)stream);
    return usbeam_py_none_or_raise(st);
}

PyMethodDef usbeam_py_segment_methods[] = {
    {"mask_threshold", py_mask_threshold, METH_VARARGS, "(logits, threshold, out bool): out = logits > threshold."},
    {"mask_argmax", py_mask_argmax, METH_VARARGS, "(scores, n_images, n_classes, out int32): class argmax."},
    {"components_plan", (PyCFunction)(void (*)(void))py_components_plan, METH_VARARGS | METH_KEYWORDS,
     "Create a connected-components plan."},
    {"components_cuda_exec", py_components_cuda_exec, METH_O, "CUDA state of a components plan (None for the CPU)."},
    {"label_execute", py_label_execute, METH_VARARGS, "(plan, mask bool|uint8, labels int32, counts int32, back=0)."},
    {"fill_holes_execute", py_fill_holes_execute, METH_VARARGS, "(plan, mask bool|uint8, out bool, back=0)."},
    {"largest_component_execute", py_largest_execute, METH_VARARGS, "(plan, mask bool|uint8, out bool, back=0)."},
    {"remove_small_execute", py_remove_small_execute, METH_VARARGS,
     "(plan, mask bool|uint8, min_area, out bool, back=0)."},
    {"regionprops_basic", py_regionprops_basic, METH_VARARGS,
     "(labels int32 2-D, n_labels, area int32, bbox int32, centroid float64)."},
    {"mask_device", py_mask_device, METH_VARARGS,
     "Queue threshold/argmax on the GPU: (op, in_ptr, dtype, n_images, n_classes, n_pixels, threshold, out_ptr, stream)."},
    {"regionprops_basic_device", py_regionprops_basic_device, METH_VARARGS,
     "Queue region properties on the GPU: (labels_ptr, height, width, n_labels, area_ptr, bbox_ptr, centroid_ptr, stream)."},
    {NULL, NULL, 0, NULL},
};
