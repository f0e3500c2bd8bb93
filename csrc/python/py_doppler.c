/*
 * py_doppler.c - Python bindings of the Doppler stage (clutter.c, doppler.c,
 * doppler_display.c); plans, buffers, the GIL and the lock follow py_plan.h.
 *   clutter_plan(n_frames, n_pixels, method, ...) / clutter_execute(plan, iq, out)
 *   clutter_reset(plan) / clutter_svd_info(plan) -> (singular_values, low, high)
 *   color_plan(...) / color_execute(plan, iq, velocity, variance|None, power|None)
 *   power_plan(...) / power_execute(plan, iq, out)
 *   doppler_display_plan(...) / doppler_display_execute(plan, v|None, p|None, out_v|None,
 *       out_p|None, mask|None) / doppler_display_reset(plan) / doppler_display_cuda_exec(plan)
 */
#include "python/py_plan.h"

/* A clutter filter keeps its IIR state, the color plan its smoothing scratch, the display its
 * persistence history: on the CPU one call at a time (power follows the same rules).  A CUDA
 * execute only queues kernels, and the GIL it keeps serialises the users of the plan's device
 * state.  reset and svd_info run on the host: they always take the lock. */
USBEAM_PY_PLAN_TYPE(clutter, USBEAM_PY_PLAN_CUDA_KEEPS_GIL);
USBEAM_PY_PLAN_TYPE(color, USBEAM_PY_PLAN_CUDA_KEEPS_GIL);
USBEAM_PY_PLAN_TYPE(power, USBEAM_PY_PLAN_CUDA_KEEPS_GIL);
USBEAM_PY_PLAN_TYPE(doppler_display, USBEAM_PY_PLAN_CUDA_KEEPS_GIL);

static int nonnegative_sizes(const char *what, Py_ssize_t a, Py_ssize_t b, Py_ssize_t c, Py_ssize_t d)
{
    if (a < 0 || b < 0 || c < 0 || d < 0) {
        PyErr_Format(PyExc_ValueError, "%s must be >= 0", what);
        return -1;
    }
    return 0;
}

/* ---- clutter --------------------------------------------------------------------------- */

static PyObject *py_clutter_plan(PyObject *self, PyObject *args, PyObject *kwargs)
{
    (void)self;
    static char *keywords[] = {"n_frames", "n_pixels", "method", "poly_order", "svd_low", "svd_high",
                               "svd_auto_frequency", "iir_order", "iir_cutoff", "iir_init",
                               "iir_init_frames", "backend", "algorithm", NULL};
    Py_ssize_t n_frames, n_pixels, init_frames = 0;
    const char *method = "poly", *init = "projection", *backend_name = "cpu", *algorithm = "kernel";
    int poly_order = 1, svd_low = -1, svd_high = -1, iir_order = 4;
    double auto_frequency = 0.05, cutoff = 0.1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "nn|siiididsnss", keywords, &n_frames, &n_pixels, &method,
                                     &poly_order, &svd_low, &svd_high, &auto_frequency, &iir_order, &cutoff,
                                     &init, &init_frames, &backend_name, &algorithm))
        return NULL;
    if (nonnegative_sizes("n_frames, n_pixels and iir_init_frames", n_frames, n_pixels, init_frames, 0) < 0)
        return NULL;
    usbeam_backend backend;
    if (usbeam_py_backend(backend_name, &backend) < 0) return NULL;
    usbeam_clutter_params p = {0};
    p.n_frames = (size_t)n_frames;
    p.n_pixels = (size_t)n_pixels;
    if (strcmp(method, "mean") == 0) p.method = USBEAM_CLUTTER_MEAN;
    else if (strcmp(method, "poly") == 0) p.method = USBEAM_CLUTTER_POLY;
    else if (strcmp(method, "svd") == 0) p.method = USBEAM_CLUTTER_SVD;
    else if (strcmp(method, "iir") == 0) p.method = USBEAM_CLUTTER_IIR;
    else {
        PyErr_Format(PyExc_ValueError, "method must be 'mean', 'poly', 'svd' or 'iir' (got '%s')", method);
        return NULL;
    }
    if (strcmp(init, "zero") == 0) p.iir_init = USBEAM_IIR_INIT_ZERO;
    else if (strcmp(init, "projection") == 0) p.iir_init = USBEAM_IIR_INIT_PROJECTION;
    else {
        PyErr_Format(PyExc_ValueError, "init must be 'zero' or 'projection' (got '%s')", init);
        return NULL;
    }
    if (strcmp(algorithm, "kernel") == 0) p.algorithm = USBEAM_CLUTTER_KERNEL;
    else if (strcmp(algorithm, "gemm") == 0) p.algorithm = USBEAM_CLUTTER_GEMM;
    else {
        PyErr_Format(PyExc_ValueError, "algorithm must be 'kernel' or 'gemm' (got '%s')", algorithm);
        return NULL;
    }
    p.poly_order = poly_order;
    p.svd_low = svd_low;
    p.svd_high = svd_high;
    p.svd_auto_frequency = auto_frequency;
    p.iir_order = iir_order;
    p.iir_cutoff = cutoff;
    p.iir_init_frames = (size_t)init_frames;
    usbeam_py_plan *h = usbeam_py_plan_new(&clutter_plan_type);
    if (!h) return NULL;
    h->npy_in = h->npy_out = NPY_COMPLEX64;
    h->n_in = h->n_out = p.n_frames * p.n_pixels;
    h->n_outer = p.n_frames;
    usbeam_clutter_plan *plan = NULL;
    usbeam_status st = usbeam_clutter_plan_create(&p, backend, &plan);
    return usbeam_py_plan_wrap(h, st, plan);
}

USBEAM_PY_PLAN_EXECUTE_BINDING(clutter, "iq")

static PyObject *py_clutter_reset(PyObject *self, PyObject *capsule)
{
    (void)self;
    usbeam_py_plan *h = usbeam_py_plan_from(capsule, &clutter_plan_type);
    if (!h) return NULL;
    usbeam_py_plan_call call = usbeam_py_plan_enter(h, NULL);
    usbeam_status st = usbeam_clutter_reset(h->plan);
    return usbeam_py_plan_finish(&call, st);
}

static PyObject *py_clutter_svd_info(PyObject *self, PyObject *capsule)
{
    (void)self;
    usbeam_py_plan *h = usbeam_py_plan_from(capsule, &clutter_plan_type);
    if (!h) return NULL;
    npy_intp dims[1] = {(npy_intp)h->n_outer};
    PyObject *values = PyArray_SimpleNew(1, dims, NPY_FLOAT64);
    if (!values) return NULL;
    int low = -1, high = -1;
    usbeam_py_plan_call call = usbeam_py_plan_enter(h, NULL);
    usbeam_status st = usbeam_clutter_svd_info(h->plan, PyArray_DATA((PyArrayObject *)values), &low, &high);
    usbeam_py_plan_leave(&call);
    if (st != USBEAM_OK) {
        Py_DECREF(values);
        return usbeam_py_raise(st);
    }
    return Py_BuildValue("(Nii)", values, low, high);
}

/* ---- color and power ---------------------------------------------------------------------- */

static PyObject *py_color_plan(PyObject *self, PyObject *args, PyObject *kwargs)
{
    (void)self;
    static char *keywords[] = {"n_frames", "n_images", "nz", "nx", "fc", "prf", "c", "lag", "window_z",
                               "window_x", "window", "axial_correction", "dz", "backend", NULL};
    Py_ssize_t n_frames, n_images, nz, nx;
    double fc, prf, c = 1540.0, dz = 0.0;
    int lag = 1, window_z = 1, window_x = 1, axial = 0;
    const char *window = "hamming", *backend_name = "cpu";
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "nnnndd|diiispds", keywords, &n_frames, &n_images, &nz, &nx,
                                     &fc, &prf, &c, &lag, &window_z, &window_x, &window, &axial, &dz,
                                     &backend_name))
        return NULL;
    if (nonnegative_sizes("n_frames, n_images, nz and nx", n_frames, n_images, nz, nx) < 0) return NULL;
    usbeam_backend backend;
    if (usbeam_py_backend(backend_name, &backend) < 0) return NULL;
    usbeam_color_params p = {0};
    p.n_frames = (size_t)n_frames;
    p.n_images = (size_t)n_images;
    p.nz = (size_t)nz;
    p.nx = (size_t)nx;
    p.fc = fc;
    p.prf = prf;
    p.c = c;
    p.lag = lag;
    p.window_z = window_z;
    p.window_x = window_x;
    if (strcmp(window, "boxcar") == 0) p.window = USBEAM_WINDOW_BOXCAR;
    else if (strcmp(window, "hamming") == 0) p.window = USBEAM_WINDOW_HAMMING;
    else {
        PyErr_Format(PyExc_ValueError, "window must be 'boxcar' or 'hamming' (got '%s')", window);
        return NULL;
    }
    p.axial_correction = axial;
    p.dz = dz;
    usbeam_py_plan *h = usbeam_py_plan_new(&color_plan_type);
    if (!h) return NULL;
    h->npy_in = NPY_COMPLEX64;
    h->npy_out = NPY_FLOAT32;
    h->n_out = p.n_images * p.nz * p.nx;
    h->n_in = h->n_out * p.n_frames;
    usbeam_color_plan *plan = NULL;
    usbeam_status st = usbeam_color_plan_create(&p, backend, &plan);
    return usbeam_py_plan_wrap(h, st, plan);
}

/* An optional buffer of a call (usbeam_py_plan_buffer); None gives NULL without error. */
static int optional_plan_buffer(PyObject *obj, const char *name, int npy_type, size_t n, int writable,
                                usbeam_cuda_exec *cuda, void **data)
{
    *data = NULL;
    if (obj == Py_None) return 0;
    *data = usbeam_py_plan_buffer(obj, name, npy_type, n, writable, cuda);
    return *data ? 0 : -1;
}

static PyObject *py_color_execute(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *capsule, *in_obj, *vel_obj, *var_obj = Py_None, *pow_obj = Py_None;
    if (!PyArg_ParseTuple(args, "OOO|OO", &capsule, &in_obj, &vel_obj, &var_obj, &pow_obj)) return NULL;
    usbeam_py_plan *h = usbeam_py_plan_from(capsule, &color_plan_type);
    if (!h) return NULL;
    usbeam_cuda_exec *cuda = usbeam_py_plan_cuda(h);
    const void *in = usbeam_py_plan_buffer(in_obj, "iq", h->npy_in, h->n_in, 0, cuda);
    if (!in) return NULL;
    float *velocity = usbeam_py_plan_buffer(vel_obj, "velocity", h->npy_out, h->n_out, 1, cuda);
    if (!velocity) return NULL;
    void *variance, *power;
    if (optional_plan_buffer(var_obj, "variance", h->npy_out, h->n_out, 1, cuda, &variance) < 0) return NULL;
    if (optional_plan_buffer(pow_obj, "power", h->npy_out, h->n_out, 1, cuda, &power) < 0) return NULL;
    usbeam_py_plan_call call = usbeam_py_plan_enter(h, cuda);
    usbeam_status st = usbeam_color_execute(h->plan, in, velocity, variance, power);
    return usbeam_py_plan_finish(&call, st);
}

static PyObject *py_power_plan(PyObject *self, PyObject *args, PyObject *kwargs)
{
    (void)self;
    static char *keywords[] = {"n_frames", "n_pixels", "output_db", "reference", "noise_floor", "backend", NULL};
    Py_ssize_t n_frames, n_pixels;
    int output_db = 0;
    double reference = 0.0, noise_floor = 0.0;
    const char *backend_name = "cpu";
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "nn|pdds", keywords, &n_frames, &n_pixels, &output_db,
                                     &reference, &noise_floor, &backend_name))
        return NULL;
    if (nonnegative_sizes("n_frames and n_pixels", n_frames, n_pixels, 0, 0) < 0) return NULL;
    usbeam_backend backend;
    if (usbeam_py_backend(backend_name, &backend) < 0) return NULL;
    usbeam_power_params p = {0};
    p.n_frames = (size_t)n_frames;
    p.n_pixels = (size_t)n_pixels;
    p.output_db = output_db;
    p.reference = reference;
    p.noise_floor = noise_floor;
    usbeam_py_plan *h = usbeam_py_plan_new(&power_plan_type);
    if (!h) return NULL;
    h->npy_in = NPY_COMPLEX64;
    h->npy_out = NPY_FLOAT32;
    h->n_out = p.n_pixels;
    h->n_in = p.n_pixels * p.n_frames;
    usbeam_power_plan *plan = NULL;
    usbeam_status st = usbeam_power_plan_create(&p, backend, &plan);
    return usbeam_py_plan_wrap(h, st, plan);
}

USBEAM_PY_PLAN_EXECUTE_BINDING(power, "iq")
USBEAM_PY_PLAN_CUDA_EXEC_BINDING(clutter)
USBEAM_PY_PLAN_CUDA_EXEC_BINDING(color)
USBEAM_PY_PLAN_CUDA_EXEC_BINDING(power)

/* ---- display ---------------------------------------------------------------------------- */

static PyObject *py_display_plan(PyObject *self, PyObject *args, PyObject *kwargs)
{
    (void)self;
    static char *keywords[] = {"n_images", "nz", "nx", "median", "persistence", "power_threshold",
                               "velocity_threshold", "backend", NULL};
    Py_ssize_t n_images, nz, nx;
    int median = 0;
    double persistence = 0.0, power_threshold = 0.0, velocity_threshold = 0.0;
    const char *backend_name = "cpu";
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "nnn|pddds", keywords, &n_images, &nz, &nx, &median,
                                     &persistence, &power_threshold, &velocity_threshold, &backend_name))
        return NULL;
    if (nonnegative_sizes("n_images, nz and nx", n_images, nz, nx, 0) < 0) return NULL;
    usbeam_backend backend;
    if (usbeam_py_backend(backend_name, &backend) < 0) return NULL;
    usbeam_doppler_display_params p = {0};
    p.n_images = (size_t)n_images;
    p.nz = (size_t)nz;
    p.nx = (size_t)nx;
    p.median = median;
    p.persistence = persistence;
    p.power_threshold = power_threshold;
    p.velocity_threshold = velocity_threshold;
    usbeam_py_plan *h = usbeam_py_plan_new(&doppler_display_plan_type);
    if (!h) return NULL;
    h->npy_in = h->npy_out = NPY_FLOAT32;
    h->n_in = h->n_out = p.n_images * p.nz * p.nx;
    usbeam_doppler_display_plan *plan = NULL;
    usbeam_status st = usbeam_doppler_display_plan_create(&p, backend, &plan);
    return usbeam_py_plan_wrap(h, st, plan);
}

static PyObject *py_display_execute(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *capsule, *v_obj, *p_obj, *ov_obj, *op_obj, *m_obj;
    if (!PyArg_ParseTuple(args, "OOOOOO", &capsule, &v_obj, &p_obj, &ov_obj, &op_obj, &m_obj)) return NULL;
    usbeam_py_plan *h = usbeam_py_plan_from(capsule, &doppler_display_plan_type);
    if (!h) return NULL;
    usbeam_cuda_exec *cuda = usbeam_py_plan_cuda(h);
    void *velocity, *power, *out_velocity, *out_power, *mask;
    if (optional_plan_buffer(v_obj, "velocity", NPY_FLOAT32, h->n_in, 0, cuda, &velocity) < 0) return NULL;
    if (optional_plan_buffer(p_obj, "power", NPY_FLOAT32, h->n_in, 0, cuda, &power) < 0) return NULL;
    if (optional_plan_buffer(ov_obj, "out_velocity", NPY_FLOAT32, h->n_out, 1, cuda, &out_velocity) < 0) return NULL;
    if (optional_plan_buffer(op_obj, "out_power", NPY_FLOAT32, h->n_out, 1, cuda, &out_power) < 0) return NULL;
    if (optional_plan_buffer(m_obj, "mask", NPY_UINT8, h->n_out, 1, cuda, &mask) < 0) return NULL;
    if ((velocity && !out_velocity) || (power && !out_power) || (!velocity && !power)) {
        PyErr_SetString(PyExc_ValueError, "velocity/power: give at least one, each with its output buffer");
        return NULL;
    }
    usbeam_py_plan_call call = usbeam_py_plan_enter(h, cuda);
    usbeam_status st = usbeam_doppler_display_execute(h->plan, velocity, power, out_velocity, out_power, mask);
    return usbeam_py_plan_finish(&call, st);
}

static PyObject *py_display_reset(PyObject *self, PyObject *capsule)
{
    (void)self;
    usbeam_py_plan *h = usbeam_py_plan_from(capsule, &doppler_display_plan_type);
    if (!h) return NULL;
    usbeam_py_plan_call call = usbeam_py_plan_enter(h, NULL);
    usbeam_status st = usbeam_doppler_display_reset(h->plan);
    return usbeam_py_plan_finish(&call, st);
}

USBEAM_PY_PLAN_CUDA_EXEC_BINDING(doppler_display)

#define KW(fn) (PyCFunction)(void (*)(void))(fn)
PyMethodDef usbeam_py_doppler_methods[] = {
    {"clutter_plan", KW(py_clutter_plan), METH_VARARGS | METH_KEYWORDS, "Create a clutter-filter plan."},
    {"clutter_execute", py_clutter_execute, METH_VARARGS, "Run a clutter filter: (plan, iq, out)."},
    {"clutter_reset", py_clutter_reset, METH_O, "Forget the IIR state of a clutter plan."},
    {"clutter_svd_info", py_clutter_svd_info, METH_O,
     "plan -> (singular values, low, high) of the last SVD execute."},
    {"color_plan", KW(py_color_plan), METH_VARARGS | METH_KEYWORDS, "Create a color Doppler plan."},
    {"color_execute", py_color_execute, METH_VARARGS,
     "Run color Doppler: (plan, iq, velocity, variance=None, power=None)."},
    {"power_plan", KW(py_power_plan), METH_VARARGS | METH_KEYWORDS, "Create a power Doppler plan."},
    {"power_execute", py_power_execute, METH_VARARGS, "Run power Doppler: (plan, iq, out)."},
    {"clutter_cuda_exec", py_clutter_cuda_exec, METH_O, "CUDA state of a clutter plan (None for the CPU)."},
    {"color_cuda_exec", py_color_cuda_exec, METH_O, "CUDA state of a color Doppler plan (None for the CPU)."},
    {"power_cuda_exec", py_power_cuda_exec, METH_O, "CUDA state of a power Doppler plan (None for the CPU)."},
    {"doppler_display_plan", KW(py_display_plan), METH_VARARGS | METH_KEYWORDS,
     "Create a Doppler display post-processing plan."},
    {"doppler_display_execute", py_display_execute, METH_VARARGS,
     "(plan, velocity|None, power|None, out_velocity|None, out_power|None, mask|None)."},
    {"doppler_display_reset", py_display_reset, METH_O, "Forget the persistence history."},
    {"doppler_display_cuda_exec", py_doppler_display_cuda_exec, METH_O,
     "CUDA state of a Doppler display plan (None for the CPU)."},
    {NULL, NULL, 0, NULL},
};
