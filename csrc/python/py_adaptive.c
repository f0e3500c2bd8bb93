/*
 * py_adaptive.c - Python bindings of the adaptive beamformers (beamform/adaptive.c); plans,
 * buffers, the GIL and the lock follow py_plan.h, the geometry arguments py_das.c's das_plan.
 *   adaptive_plan(<das_plan's arguments>, method_options=(method, p, gcf_m0, subarray_length,
 *                 subarray_fraction, diagonal_loading, temporal_averaging, fdmas_low,
 *                 fdmas_high, fdmas_half_taps))
 *       method: 'cf' | 'gcf' | 'dmas' | 'fdmas' | 'pdas' | 'mv' (usbeam_adaptive_method);
 *       element_normals (n_elements, 3) float64 and surface as das_plan's (convex arrays).
 *   adaptive_execute(plan, data, out[, n_frames]) data (n_frames, n_tx, n_el, n_samples),
 *       out (n_frames, n_points) float32 (RF) or complex64 (IQ); GIL released, per-plan lock.
 *   adaptive_fdmas_taps(plan) -> tuple of the F-DMAS taps g[k], k = -K..K (complex; () if none)
 */
#include "python/py_plan.h"

USBEAM_PY_PLAN_TYPE(adaptive, 0);

/* method_options = (method, p, gcf_m0, subarray_length, subarray_fraction, diagonal_loading,
 * temporal_averaging, fdmas_low, fdmas_high, fdmas_half_taps) into a */
static int parse_method_options(PyObject *options, usbeam_adaptive_params *a)
{
    static const char *const methods[] = {"cf", "gcf", "dmas", "fdmas", "pdas", "mv", NULL};
    const char *method;
    Py_ssize_t gcf_m0, subarray_length, temporal_averaging, fdmas_half_taps;
    if (!PyTuple_Check(options)) {
        PyErr_SetString(PyExc_TypeError, "method_options must be a tuple");
        return -1;
    }
    if (!PyArg_ParseTuple(options, "sdnnddnddn;method_options: (method, p, gcf_m0, subarray_length, "
                                   "subarray_fraction, diagonal_loading, temporal_averaging, fdmas_low, fdmas_high, "
                                   "fdmas_half_taps)",
                          &method, &a->p, &gcf_m0, &subarray_length, &a->subarray_fraction, &a->diagonal_loading,
                          &temporal_averaging, &a->fdmas_low, &a->fdmas_high, &fdmas_half_taps))
        return -1;
    if (gcf_m0 < 0 || subarray_length < 0 || temporal_averaging < 0 || fdmas_half_taps < 0) {
        PyErr_SetString(PyExc_ValueError,
                        "gcf_m0, subarray_length, temporal_averaging and fdmas_half_taps must be >= 0");
        return -1;
    }
    int code = -1;
    for (int k = 0; methods[k]; ++k)
        if (strcmp(method, methods[k]) == 0) code = k;
    if (code < 0) {
        PyErr_Format(PyExc_ValueError, "method: unknown value '%s'", method);
        return -1;
    }
    a->method = (usbeam_adaptive_method)code;
    a->gcf_m0 = (size_t)gcf_m0;
    a->subarray_length = (size_t)subarray_length;
    a->temporal_averaging = (size_t)temporal_averaging;
    a->fdmas_half_taps = (size_t)fdmas_half_taps;
    return 0;
}

/* adaptive_plan(<das_plan's arguments>, method_options=(...)): the geometry goes through the
 * DAS plans' own parser; the method's options come as one keyword. */
static PyObject *py_adaptive_plan(PyObject *self, PyObject *args, PyObject *kwargs)
{
    (void)self;
    PyObject *options = kwargs ? PyDict_GetItemString(kwargs, "method_options") : NULL; /* borrowed */
    if (!options) {
        PyErr_SetString(PyExc_TypeError, "adaptive_plan needs the keyword method_options");
        return NULL;
    }
    usbeam_adaptive_params a = {0};
    if (parse_method_options(options, &a) < 0) return NULL;
    PyObject *das_kwargs = PyDict_Copy(kwargs);
    if (!das_kwargs) return NULL;
    if (PyDict_DelItemString(das_kwargs, "method_options") < 0) {
        Py_DECREF(das_kwargs);
        return NULL;
    }
    usbeam_py_das_args g;
    const int parsed = usbeam_py_das_args_parse(args, das_kwargs, &g);
    Py_DECREF(das_kwargs);
    if (parsed < 0) return NULL;
    a.das = g.p;
    usbeam_py_plan *h = usbeam_py_plan_new(&adaptive_plan_type);
    usbeam_adaptive_plan *plan = NULL;
    usbeam_status st = USBEAM_OK;
    if (h) {
        Py_BEGIN_ALLOW_THREADS
        st = usbeam_adaptive_plan_create(&a, g.backend, &plan);
        Py_END_ALLOW_THREADS
    }
    usbeam_py_das_args_release(&g);
    if (!h) return NULL;
    usbeam_py_das_plan_shape(h, &a.das, g.in_type, g.out_type);
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
