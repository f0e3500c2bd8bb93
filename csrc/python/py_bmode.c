/*
 * py_bmode.c - Python bindings of the B-mode stage (see bmode/bmode.c); plans, buffers and
 * the GIL follow py_plan.h.
 *   bmode_plan(n_values, n_images, dynamic_range, output, per_image, reference, backend) -> plan
 *   bmode_execute(plan, iq, out)   iq: complex64 C-contiguous, out: uint8 or float32
 *   envelope_plan(n_outer, n_axis, n_inner, output, backend) -> plan   (bmode/envelope.c)
 *   envelope_execute(plan, rf, out)   rf: float32, out: float32 envelope or complex64 analytic
 */
#include "python/py_plan.h"

/* A B-mode execute reads its input and writes its output only: calls on one CPU plan may
 * overlap.  A CUDA execute only queues kernels, and the GIL it keeps serialises the users of
 * the plan's device scratch. */
USBEAM_PY_PLAN_TYPE(bmode, USBEAM_PY_PLAN_REENTRANT | USBEAM_PY_PLAN_CUDA_KEEPS_GIL);

static PyObject *py_bmode_plan(PyObject *self, PyObject *args, PyObject *kwargs)
{
    (void)self;
    static char *keywords[] = {"n_values", "n_images", "dynamic_range", "output", "per_image",
                               "reference", "backend", NULL};
    Py_ssize_t n_values = 0, n_images = 1;
    double dynamic_range = 0, reference = 0;
    const char *output = "uint8", *backend_name = "cpu";
    int per_image = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "nnd|spds", keywords, &n_values, &n_images,
                                     &dynamic_range, &output, &per_image, &reference, &backend_name))
        return NULL;
    usbeam_backend backend;
    if (usbeam_py_backend(backend_name, &backend) < 0) return NULL;
    if (n_values < 0 || n_images < 0) {
        PyErr_SetString(PyExc_ValueError, "n_values and n_images must be >= 0");
        return NULL;
    }
    usbeam_bmode_params p = {0};
    p.n_values = (size_t)n_values;
    p.n_images = (size_t)n_images;
    p.dynamic_range_db = dynamic_range;
    p.per_image = per_image;
    p.reference = reference;
    if (strcmp(output, "uint8") == 0)
        p.output = USBEAM_BMODE_UINT8;
    else if (strcmp(output, "db") == 0)
        p.output = USBEAM_BMODE_DB;
    else {
        PyErr_Format(PyExc_ValueError, "output must be 'uint8' or 'db' (got '%s')", output);
        return NULL;
    }
    usbeam_py_plan *h = usbeam_py_plan_new(&bmode_plan_type);
    if (!h) return NULL;
    h->npy_in = NPY_COMPLEX64;
    h->npy_out = p.output == USBEAM_BMODE_UINT8 ? NPY_UINT8 : NPY_FLOAT32;
    h->n_in = h->n_out = p.n_values;
    usbeam_bmode_plan *plan = NULL;
    usbeam_status st = usbeam_bmode_plan_create(&p, backend, &plan);
    return usbeam_py_plan_wrap(h, st, plan);
}

USBEAM_PY_PLAN_EXECUTE_BINDING(bmode, "image")
USBEAM_PY_PLAN_CUDA_EXEC_BINDING(bmode)

/* An envelope execute reads its input and writes its output only (the kernel table is fixed at
 * creation): CPU calls may overlap; a CUDA execute only queues kernels. */
USBEAM_PY_PLAN_TYPE(envelope, USBEAM_PY_PLAN_REENTRANT | USBEAM_PY_PLAN_CUDA_KEEPS_GIL);

static PyObject *py_envelope_plan(PyObject *self, PyObject *args, PyObject *kwargs)
{
    (void)self;
    static char *keywords[] = {"n_outer", "n_axis", "n_inner", "output", "backend", NULL};
    Py_ssize_t n_outer = 0, n_axis = 0, n_inner = 0;
    const char *output = "magnitude", *backend_name = "cpu";
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "nnn|ss", keywords, &n_outer, &n_axis, &n_inner, &output,
                                     &backend_name))
        return NULL;
    usbeam_backend backend;
    if (usbeam_py_backend(backend_name, &backend) < 0) return NULL;
    if (n_outer < 0 || n_axis < 0 || n_inner < 0) {
        PyErr_SetString(PyExc_ValueError, "n_outer, n_axis and n_inner must be >= 0");
        return NULL;
    }
    usbeam_envelope_params p = {0};
    p.n_outer = (size_t)n_outer;
    p.n_axis = (size_t)n_axis;
    p.n_inner = (size_t)n_inner;
    if (strcmp(output, "magnitude") == 0)
        p.output = USBEAM_ENVELOPE_MAGNITUDE;
    else if (strcmp(output, "analytic") == 0)
        p.output = USBEAM_ENVELOPE_ANALYTIC;
    else {
        PyErr_Format(PyExc_ValueError, "output must be 'magnitude' or 'analytic' (got '%s')", output);
        return NULL;
    }
    usbeam_py_plan *h = usbeam_py_plan_new(&envelope_plan_type);
    if (!h) return NULL;
    h->npy_in = NPY_FLOAT32;
    h->npy_out = p.output == USBEAM_ENVELOPE_MAGNITUDE ? NPY_FLOAT32 : NPY_COMPLEX64;
    h->n_in = h->n_out = p.n_outer * p.n_axis * p.n_inner; /* the library checks the product */
    usbeam_envelope_plan *plan = NULL;
    usbeam_status st = usbeam_envelope_plan_create(&p, backend, &plan);
    return usbeam_py_plan_wrap(h, st, plan);
}

USBEAM_PY_PLAN_EXECUTE_BINDING(envelope, "image")
USBEAM_PY_PLAN_CUDA_EXEC_BINDING(envelope)

PyMethodDef usbeam_py_bmode_methods[] = {
    {"envelope_cuda_exec", py_envelope_cuda_exec, METH_O, "CUDA state of an envelope plan (None for the CPU)."},
    {"envelope_plan", (PyCFunction)(void (*)(void))py_envelope_plan, METH_VARARGS | METH_KEYWORDS,
     "Create an envelope (analytic signal) plan."},
    {"envelope_execute", py_envelope_execute, METH_VARARGS, "Run an envelope plan: (plan, rf, out)."},
    {"bmode_cuda_exec", py_bmode_cuda_exec, METH_O, "CUDA state of a B-mode plan (None for the CPU)."},
    {"bmode_plan", (PyCFunction)(void (*)(void))py_bmode_plan, METH_VARARGS | METH_KEYWORDS,
     "Create a B-mode plan."},
    {"bmode_execute", py_bmode_execute, METH_VARARGS, "Run a B-mode plan: (plan, iq, out)."},
    {NULL, NULL, 0, NULL},
};
