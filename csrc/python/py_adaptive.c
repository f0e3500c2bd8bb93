/*
 * py_adaptive.c - Python bindings of the adaptive beamformers (beamform/adaptive.c); plans,
 * buffers, the GIL and the lock follow py_plan.h, the geometry arguments py_das.c's das_plan.
 *   adaptive_plan(element_positions, transmits, points, n_frames, n_samples, fs, fc, c, t0,
 *                 f_number, window, tukey_alpha, interpolation, dtype, max_table_bytes, backend,
 *                 method, p, gcf_m0, subarray_length, subarray_fraction, diagonal_loading,
 *                 temporal_averaging, fdmas_low, fdmas_high, fdmas_half_taps,
 *                 element_normals=None, surface=0)
 *       method: 'cf' | 'gcf' | 'dmas' | 'fdmas' | 'pdas' | 'mv' (usbeam_adaptive_method);
 *       element_normals (n_elements, 3) float64 and surface as das_plan's (convex arrays).
 *   adaptive_execute(plan, data, out[, n_frames]) data (n_frames, n_tx, n_el, n_samples),
 *       out (n_frames, n_points) float32 (RF) or complex64 (IQ); GIL released, per-plan lock.
 *   adaptive_fdmas_taps(plan) -> tuple of the F-DMAS taps g[k], k = -K..K (complex; () if none)
 */
#include "python/py_plan.h"

USBEAM_PY_PLAN_TYPE(adaptive, 0);

PyArrayObject *usbeam_py_das_xyz_array(PyObject *obj, const char *name);
int usbeam_py_das_transmits(PyObject *seq, usbeam_transmit **out, size_t *count, PyObject **keep);
typedef usbeam_status (*usbeam_py_das_frames_run)(void *plan, size_t n_frames, const void *in, void *out);
void usbeam_py_das_plan_shape(usbeam_py_plan *h, const usbeam_das_params *p, int in_type, int out_type);
PyObject *usbeam_py_das_frames_execute(PyObject *args, const usbeam_py_plan_type *type, usbeam_py_das_frames_run run);

static int lookup(const char *name, const char *value, const char *const *options, int *code)
{
    for (int k = 0; options[k]; ++k)
        if (strcmp(value, options[k]) == 0) {
            *code = k;
            return 0;
        }
    PyErr_Format(PyExc_ValueError, "%s: unknown value '%s'", name, value);
    return -1;
}

static PyObject *py_adaptive_plan(PyObject *self, PyObject *args, PyObject *kwargs)
{
    (void)self;
    static char *keywords[] = {"element_positions", "transmits", "points", "n_frames", "n_samples", "fs", "fc", "c",
                               "t0", "f_number", "window", "tukey_alpha", "interpolation", "dtype", "max_table_bytes",
                               "backend", "method", "p", "gcf_m0", "subarray_length", "subarray_fraction",
                               "diagonal_loading", "temporal_averaging", "fdmas_low", "fdmas_high", "fdmas_half_taps",
                               "element_normals", "surface", NULL};
    static const char *const windows[] = {"rect", "hann", "tukey", NULL};
    static const char *const interpolations[] = {"nearest", "linear", "cubic", NULL};
    static const char *const methods[] = {"cf", "gcf", "dmas", "fdmas", "pdas", "mv", NULL};
    PyObject *elements_obj, *transmits_obj, *points_obj, *normals_obj = Py_None;
    int surface = 0;
    Py_ssize_t n_frames, n_samples, max_table_bytes, gcf_m0, subarray_length, temporal_averaging, fdmas_half_taps;
    double fs, fc, c, t0, f_number, tukey_alpha, p_root, subarray_fraction, loading, fdmas_low, fdmas_high;
    const char *window, *interpolation, *dtype, *backend_name, *method;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOnndddddsdssnssdnnddnddn|Oi", keywords, &elements_obj,
                                     &transmits_obj, &points_obj, &n_frames, &n_samples, &fs, &fc, &c, &t0, &f_number,
                                     &window, &tukey_alpha, &interpolation, &dtype, &max_table_bytes, &backend_name,
                                     &method, &p_root, &gcf_m0, &subarray_length, &subarray_fraction, &loading,
                                     &temporal_averaging, &fdmas_low, &fdmas_high, &fdmas_half_taps, &normals_obj,
                                     &surface))
        return NULL;
    usbeam_backend backend;
    if (usbeam_py_backend(backend_name, &backend) < 0) return NULL;
    if (n_frames < 1 || n_samples < 1 || max_table_bytes < 0 || gcf_m0 < 0 || subarray_length < 0 ||
        temporal_averaging < 0 || fdmas_half_taps < 0) {
        PyErr_SetString(PyExc_ValueError, "n_frames and n_samples must be >= 1; max_table_bytes, gcf_m0, "
                                          "subarray_length, temporal_averaging, fdmas_half_taps >= 0");
        return NULL;
    }
    usbeam_adaptive_params a = {0};
    usbeam_das_params *p = &a.das;
    int window_code, interpolation_code, method_code;
    if (lookup("window", window, windows, &window_code) < 0 ||
        lookup("interpolation", interpolation, interpolations, &interpolation_code) < 0 ||
        lookup("method", method, methods, &method_code) < 0)
        return NULL;
    int in_type, out_type;
    if (strcmp(dtype, "int16") == 0) {
        p->input_dtype = USBEAM_DTYPE_INT16, in_type = NPY_INT16, out_type = NPY_FLOAT32;
    } else if (strcmp(dtype, "float32") == 0) {
        p->input_dtype = USBEAM_DTYPE_FLOAT32, in_type = NPY_FLOAT32, out_type = NPY_FLOAT32;
    } else if (strcmp(dtype, "complex64") == 0) {
        p->input_dtype = USBEAM_DTYPE_COMPLEX64, in_type = NPY_COMPLEX64, out_type = NPY_COMPLEX64;
    } else {
        PyErr_Format(PyExc_TypeError, "dtype must be 'int16', 'float32' or 'complex64' (got '%s')", dtype);
        return NULL;
    }
    PyArrayObject *elements = usbeam_py_das_xyz_array(elements_obj, "element_positions");
    if (!elements) return NULL;
    PyArrayObject *normals = NULL;
    if (normals_obj != Py_None) {
        if (!(normals = usbeam_py_das_xyz_array(normals_obj, "element_normals"))) {
            Py_DECREF(elements);
            return NULL;
        }
        if (PyArray_DIM(normals, 0) != PyArray_DIM(elements, 0)) {
            PyErr_Format(PyExc_ValueError, "element_normals must have the shape of element_positions (%zd, 3)",
                         PyArray_DIM(elements, 0));
            Py_DECREF(elements);
            Py_DECREF(normals);
            return NULL;
        }
    }
    PyArrayObject *points = usbeam_py_das_xyz_array(points_obj, "points");
    if (!points) {
        Py_DECREF(elements);
        Py_XDECREF(normals);
        return NULL;
    }
    usbeam_transmit *transmits = NULL;
    PyObject *keep = NULL;
    if (usbeam_py_das_transmits(transmits_obj, &transmits, &p->n_transmits, &keep) < 0) {
        Py_DECREF(elements);
        Py_XDECREF(normals);
        Py_DECREF(points);
        return NULL;
    }
    p->n_elements = (size_t)PyArray_DIM(elements, 0);
    p->element_positions = PyArray_DATA(elements);
    p->element_normals = normals ? PyArray_DATA(normals) : NULL;
    p->surface = surface;
    p->transmits = transmits;
    p->n_points = (size_t)PyArray_DIM(points, 0);
    p->points = PyArray_DATA(points);
    p->n_frames = (size_t)n_frames;
    p->n_samples = (size_t)n_samples;
    p->fs = fs, p->fc = fc, p->c = c, p->t0 = t0, p->f_number = f_number;
    p->window = (usbeam_das_window)window_code;
    p->tukey_alpha = tukey_alpha;
    p->interpolation = (usbeam_das_interpolation)interpolation_code;
    p->max_table_bytes = (size_t)max_table_bytes;
    a.method = (usbeam_adaptive_method)method_code;
    a.p = p_root;
    a.gcf_m0 = (size_t)gcf_m0;
    a.subarray_length = (size_t)subarray_length;
    a.subarray_fraction = subarray_fraction;
    a.diagonal_loading = loading;
    a.temporal_averaging = (size_t)temporal_averaging;
    a.fdmas_low = fdmas_low;
    a.fdmas_high = fdmas_high;
    a.fdmas_half_taps = (size_t)fdmas_half_taps;

    usbeam_py_plan *h = usbeam_py_plan_new(&adaptive_plan_type);
    usbeam_adaptive_plan *plan = NULL;
    usbeam_status st = USBEAM_OK;
    if (h) {
        Py_BEGIN_ALLOW_THREADS
        st = usbeam_adaptive_plan_create(&a, backend, &plan);
        Py_END_ALLOW_THREADS
    }
    PyMem_Free(transmits);
    Py_DECREF(keep);
    Py_DECREF(elements);
    Py_XDECREF(normals);
    Py_DECREF(points);
    if (!h) return NULL;
    usbeam_py_das_plan_shape(h, p, in_type, out_type);
    return usbeam_py_plan_wrap(h, st, plan);
}

static usbeam_status adaptive_run(void *plan, size_t n_frames, const void *in, void *out)
{
    return usbeam_adaptive_execute(plan, n_frames, in, out);
}

static PyObject *py_adaptive_execute(PyObject *self, PyObject *args)
{
    (void)self;
    return usbeam_py_das_frames_execute(args, &adaptive_plan_type, adaptive_run);
}

static PyObject *py_adaptive_fdmas_taps(PyObject *self, PyObject *capsule)
{
    (void)self;
    usbeam_py_plan *h = usbeam_py_plan_from(capsule, &adaptive_plan_type);
    if (!h) return NULL;
    size_t n = 0;
    const double *g = usbeam_adaptive_fdmas_taps(h->plan, &n);
    PyObject *taps = PyTuple_New((Py_ssize_t)n);
    for (size_t k = 0; taps && k < n; ++k) {
        PyObject *value = PyComplex_FromDoubles(g[k], g[n + k]);
        if (!value) {
            Py_DECREF(taps);
            return NULL;
        }
        PyTuple_SET_ITEM(taps, (Py_ssize_t)k, value);
    }
    return taps;
}

USBEAM_PY_PLAN_CUDA_EXEC_BINDING(adaptive)

PyMethodDef usbeam_py_adaptive_methods[] = {
    {"adaptive_cuda_exec", py_adaptive_cuda_exec, METH_O, "CUDA state of an adaptive plan (None for the CPU)."},
    {"adaptive_plan", (PyCFunction)(void (*)(void))py_adaptive_plan, METH_VARARGS | METH_KEYWORDS, "Create an adaptive beamforming plan."},
    {"adaptive_execute", py_adaptive_execute, METH_VARARGS, "Run an adaptive plan: (plan, data, out, n_frames)."},
    {"adaptive_fdmas_taps", py_adaptive_fdmas_taps, METH_O, "The F-DMAS filter taps g[k], k = -K..K."},
    {NULL, NULL, 0, NULL},
};
