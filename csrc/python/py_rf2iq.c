/*
 * py_rf2iq.c - Python bindings of the demodulation stage (see demod/rf2iq.c,
 * filter_design.c); plans, buffers, the GIL and the lock follow py_plan.h.
 *   rf2iq_plan(n_lines, n_samples, dtype, fs, fc, t0=0, filter='butter', order=5, wn=0,
 *              cutoff=0, transition_width=0, attenuation=60, taps_re=None, taps_im=None,
 *              decimation=1, backend='cpu') -> plan
 *   rf2iq_execute(plan, rf, out)   rf: dtype of the plan, out: complex64, both C-contiguous
 *   rf2iq_n_out(plan) -> int;  rf2iq_plan_taps(plan) -> float64/complex128 array or None
 *   butter_lowpass(order, wn) -> (b, a);  kaiser_lowpass(fs, cutoff, width, attenuation) -> taps
 */
#include "python/py_plan.h"

/* An execute filters in the plan's scratch (CPU) or device state (CUDA): one at a time, on
 * either backend. */
USBEAM_PY_PLAN_TYPE(rf2iq, 0);

/* Bytes of one RF sample of a plan's input type (int16, float32 or float64). */
static size_t sample_bytes(int npy_type) { return npy_type == NPY_INT16 ? 2 : npy_type == NPY_FLOAT32 ? 4 : 8; }

static PyObject *py_rf2iq_plan(PyObject *self, PyObject *args, PyObject *kwargs)
{
    (void)self;
    static char *keywords[] = {"n_lines", "n_samples", "dtype", "fs", "fc", "t0", "filter", "order", "wn",
                               "cutoff", "transition_width", "attenuation", "taps_re", "taps_im",
                               "decimation", "backend", NULL};
    Py_ssize_t n_lines = 0, n_samples = 0, decimation = 1;
    const char *dtype_name = NULL, *filter_name = "butter", *backend_name = "cpu";
    double fs = 0, fc = 0, t0 = 0, wn = 0, cutoff = 0, width = 0, attenuation = 60.0;
    int order = 5;
    PyObject *taps_re_obj = Py_None, *taps_im_obj = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "nnsdd|dsiddddOOns", keywords, &n_lines, &n_samples,
                                     &dtype_name, &fs, &fc, &t0, &filter_name, &order, &wn, &cutoff, &width,
                                     &attenuation, &taps_re_obj, &taps_im_obj, &decimation, &backend_name))
        return NULL;
    usbeam_backend backend;
    if (usbeam_py_backend(backend_name, &backend) < 0) return NULL;
    if (n_lines < 0 || n_samples < 0) {
        PyErr_SetString(PyExc_ValueError, "n_lines and n_samples must be >= 0");
        return NULL;
    }
    if (decimation < 1) {
        PyErr_Format(PyExc_ValueError, "decimation must be >= 1 (got %zd)", decimation);
        return NULL;
    }
    usbeam_rf2iq_params p = {0};
    int npy_type;
    static const char *const rf_dtypes[] = {"int16", "float32", "float64", NULL};
    if (usbeam_py_dtype(dtype_name, rf_dtypes, &p.input_dtype, &npy_type) < 0) {
        PyErr_Format(PyExc_TypeError, "rf: dtype must be int16, float32 or float64 (got '%s')", dtype_name);
        return NULL;
    }
    p.n_lines = (size_t)n_lines;
    p.n_samples = (size_t)n_samples;
    p.fs = fs;
    p.fc = fc;
    p.t0 = t0;
    p.order = order;
    p.wn = wn;
    p.cutoff = cutoff;
    p.transition_width = width;
    p.attenuation = attenuation;
    p.decimation = (size_t)decimation;
    if (strcmp(filter_name, "butter") == 0) {
        p.filter = USBEAM_RF2IQ_BUTTER;
    } else if (strcmp(filter_name, "kaiser") == 0) {
        p.filter = USBEAM_RF2IQ_KAISER;
    } else if (strcmp(filter_name, "taps") == 0) {
        p.filter = USBEAM_RF2IQ_TAPS;
        if (taps_re_obj == Py_None) {
            PyErr_SetString(PyExc_ValueError, "taps: filter='taps' needs taps_re");
            return NULL;
        }
        if (!PyArray_Check(taps_re_obj)) {
            PyErr_SetString(PyExc_TypeError, "taps_re must be a numpy.ndarray");
            return NULL;
        }
        p.n_taps = (size_t)PyArray_SIZE((PyArrayObject *)taps_re_obj);
        p.taps_re = usbeam_py_array_data(taps_re_obj, "taps_re", NPY_FLOAT64, p.n_taps, 0);
        if (!p.taps_re) return NULL;
        if (taps_im_obj != Py_None) {
            p.taps_im = usbeam_py_array_data(taps_im_obj, "taps_im", NPY_FLOAT64, p.n_taps, 0);
            if (!p.taps_im) return NULL;
        }
    } else {
        PyErr_Format(PyExc_ValueError, "filter must be 'butter', 'kaiser' or 'taps' (got '%s')", filter_name);
        return NULL;
    }
    usbeam_py_plan *h = usbeam_py_plan_new(&rf2iq_plan_type);
    if (!h) return NULL;
    usbeam_rf2iq_plan *plan = NULL;
    usbeam_status st = usbeam_rf2iq_plan_create(&p, backend, &plan); /* copies the taps */
    if (st == USBEAM_OK) {
        h->npy_in = npy_type;
        h->npy_out = NPY_COMPLEX64;
        h->n_outer = p.n_lines;
        h->n_in = p.n_lines * p.n_samples;
        h->n_out = p.n_lines * usbeam_rf2iq_n_out(plan);
    }
    return usbeam_py_plan_wrap(h, st, plan);
}

static PyObject *py_rf2iq_execute(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *capsule, *in_obj, *out_obj;
    if (!PyArg_ParseTuple(args, "OOO", &capsule, &in_obj, &out_obj)) return NULL;
    usbeam_py_plan *h = usbeam_py_plan_from(capsule, &rf2iq_plan_type);
    if (!h) return NULL;
    usbeam_cuda_exec *cuda = usbeam_py_plan_cuda(h);
    const void *in = usbeam_py_plan_buffer(in_obj, "rf", h->npy_in, h->n_in, 0, cuda);
    if (!in) return NULL;
    void *out = usbeam_py_plan_buffer(out_obj, "out", h->npy_out, h->n_out, 1, cuda);
    if (!out) return NULL;
    /* execute reads each line after writing earlier ones: a shared buffer would be corrupted */
    const char *in_begin = in, *out_begin = out;
    const char *in_end = in_begin + h->n_in * sample_bytes(h->npy_in);
    const char *out_end = out_begin + h->n_out * 2 * sizeof(float);
    if (out_begin < in_end && in_begin < out_end) {
        PyErr_SetString(PyExc_ValueError, "out must not overlap rf");
        return NULL;
    }
    usbeam_py_plan_call call = usbeam_py_plan_enter(h, cuda);
    usbeam_status st = usbeam_rf2iq_execute(h->plan, in, out);
    return usbeam_py_plan_finish(&call, st);
}

static PyObject *py_rf2iq_n_out(PyObject *self, PyObject *capsule)
{
    (void)self;
    usbeam_py_plan *h = usbeam_py_plan_from(capsule, &rf2iq_plan_type);
    if (!h) return NULL;
    return PyLong_FromSize_t(usbeam_rf2iq_n_out(h->plan));
}

static PyObject *py_rf2iq_plan_taps(PyObject *self, PyObject *capsule)
{
    (void)self;
    usbeam_py_plan *h = usbeam_py_plan_from(capsule, &rf2iq_plan_type);
    if (!h) return NULL;
    const double *re, *im;
    size_t n;
    usbeam_rf2iq_plan_taps(h->plan, &re, &im, &n);
    if (n == 0) Py_RETURN_NONE;
    npy_intp dims[1] = {(npy_intp)n};
    PyObject *arr = PyArray_SimpleNew(1, dims, im ? NPY_COMPLEX128 : NPY_FLOAT64);
    if (!arr) return NULL;
    double *dst = PyArray_DATA((PyArrayObject *)arr);
    for (size_t k = 0; k < n; ++k) {
        if (im) {
            dst[2 * k] = re[k];
            dst[2 * k + 1] = im[k];
        } else {
            dst[k] = re[k];
        }
    }
    return arr;
}

static PyObject *py_butter_lowpass(PyObject *self, PyObject *args)
{
    (void)self;
    int order;
    double wn;
    if (!PyArg_ParseTuple(args, "id", &order, &wn)) return NULL;
    double b[USBEAM_RF2IQ_MAX_ORDER + 1], a[USBEAM_RF2IQ_MAX_ORDER + 1];
    usbeam_status st = usbeam_butter_lowpass(order, wn, b, a);
    if (st != USBEAM_OK) return usbeam_py_raise(st);
    npy_intp dims[1] = {order + 1};
    PyObject *b_arr = PyArray_SimpleNew(1, dims, NPY_FLOAT64);
    PyObject *a_arr = PyArray_SimpleNew(1, dims, NPY_FLOAT64);
    if (!b_arr || !a_arr) {
        Py_XDECREF(b_arr);
        Py_XDECREF(a_arr);
        return NULL;
    }
    memcpy(PyArray_DATA((PyArrayObject *)b_arr), b, (size_t)(order + 1) * sizeof(double));
    memcpy(PyArray_DATA((PyArrayObject *)a_arr), a, (size_t)(order + 1) * sizeof(double));
    return Py_BuildValue("(NN)", b_arr, a_arr);
}

static PyObject *py_kaiser_lowpass(PyObject *self, PyObject *args)
{
    (void)self;
    double fs, cutoff, width, attenuation;
    if (!PyArg_ParseTuple(args, "dddd", &fs, &cutoff, &width, &attenuation)) return NULL;
    size_t n = 0;
    usbeam_status st = usbeam_kaiser_lowpass(fs, cutoff, width, attenuation, NULL, 0, &n);
    if (st != USBEAM_OK) return usbeam_py_raise(st);
    npy_intp dims[1] = {(npy_intp)n};
    PyObject *arr = PyArray_SimpleNew(1, dims, NPY_FLOAT64);
    if (!arr) return NULL;
    st = usbeam_kaiser_lowpass(fs, cutoff, width, attenuation, PyArray_DATA((PyArrayObject *)arr), n, &n);
    if (st != USBEAM_OK) {
        Py_DECREF(arr);
        return usbeam_py_raise(st);
    }
    return arr;
}

USBEAM_PY_PLAN_CUDA_EXEC_BINDING(rf2iq)

PyMethodDef usbeam_py_rf2iq_methods[] = {
    {"rf2iq_cuda_exec", py_rf2iq_cuda_exec, METH_O, "CUDA state of an RF -> IQ plan (None for the CPU)."},
    {"rf2iq_plan", (PyCFunction)(void (*)(void))py_rf2iq_plan, METH_VARARGS | METH_KEYWORDS,
     "Create an RF -> IQ plan."},
    {"rf2iq_execute", py_rf2iq_execute, METH_VARARGS, "Run an RF -> IQ plan: (plan, rf, out)."},
    {"rf2iq_n_out", py_rf2iq_n_out, METH_O, "Output samples per line of an RF -> IQ plan."},
    {"rf2iq_plan_taps", py_rf2iq_plan_taps, METH_O, "FIR taps of an RF -> IQ plan (None for butter)."},
    {"butter_lowpass", py_butter_lowpass, METH_VARARGS, "Butterworth low-pass (b, a), as scipy.signal.butter."},
    {"kaiser_lowpass", py_kaiser_lowpass, METH_VARARGS,
     "Kaiser-window FIR low-pass taps: (fs, cutoff, transition_width, attenuation)."},
    {NULL, NULL, 0, NULL},
};
