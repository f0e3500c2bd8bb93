/*
 * py_hadamard.c - Python bindings of Hadamard decoding (see acquire/hadamard.c); plans,
 * buffers, the GIL and the lock follow py_plan.h.
 *   hadamard_matrix(order) -> int8 ndarray (order, order)
 *   hadamard_plan(order, n_outer, n_inner, in_dtype, out_dtype, algorithm, transmit_last,
 *                 matrix=None, backend='cpu') -> plan
 *   hadamard_execute(plan, data, out)     (NumPy arrays; DeviceArrays for a CUDA plan)
 *   hadamard_cuda_exec(plan) -> capsule on the plan's CUDA state, or None
 * dtypes are names: 'int16', 'int32', 'float32'; algorithm 'direct', 'fast' or 'gemm'
 * (CUDA only).
 */
#include "python/py_plan.h"

/* An execute works in the plan's per-thread scratch (CPU) or device state (CUDA): one at a
 * time, on either backend. */
USBEAM_PY_PLAN_TYPE(hadamard, 0);

/* The sample types of Hadamard data, encoded and decoded. */
static int parse_dtype(const char *name, const char *what, usbeam_dtype *dtype, int *npy_type)
{
    static const char *const allowed[] = {"int16", "int32", "float32", NULL};
    if (usbeam_py_dtype(name, allowed, dtype, npy_type) == 0) return 0;
    PyErr_Format(PyExc_TypeError, "%s must be int16, int32 or float32 (got '%s')", what, name);
    return -1;
}

static PyObject *py_hadamard_matrix(PyObject *self, PyObject *args)
{
    (void)self;
    Py_ssize_t order = 0;
    if (!PyArg_ParseTuple(args, "n", &order)) return NULL;
    if (order <= 0 || !usbeam_hadamard_order_supported((size_t)order)) {
        PyErr_Format(PyExc_ValueError,
                     "order %zd has no Hadamard matrix in usbeam (orders are 2^k, 12*2^k and 20*2^k up to %d)",
                     order, USBEAM_HADAMARD_MAX_ORDER);
        return NULL;
    }
    npy_intp dims[2] = {order, order};
    PyObject *arr = PyArray_SimpleNew(2, dims, NPY_INT8);
    if (!arr) return NULL;
    usbeam_status st = usbeam_hadamard_matrix((size_t)order, PyArray_DATA((PyArrayObject *)arr));
    if (st != USBEAM_OK) {
        Py_DECREF(arr);
        return usbeam_py_raise(st);
    }
    return arr;
}

static PyObject *py_hadamard_plan(PyObject *self, PyObject *args, PyObject *kwargs)
{
    (void)self;
    static char *keywords[] = {"order",     "n_outer",       "n_inner", "in_dtype", "out_dtype",
                               "algorithm", "transmit_last", "matrix",  "backend",  NULL};
    Py_ssize_t order = 0, n_outer = 0, n_inner = 0;
    const char *in_name = "int16", *out_name = "float32", *algorithm = "direct", *backend_name = "cpu";
    int transmit_last = 0;
    PyObject *matrix_obj = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "nnn|sssiOs", keywords, &order, &n_outer, &n_inner,
                                     &in_name, &out_name, &algorithm, &transmit_last, &matrix_obj,
                                     &backend_name))
        return NULL;
    usbeam_backend backend;
    if (usbeam_py_backend(backend_name, &backend) < 0) return NULL;
    if (order <= 0 || n_outer <= 0 || n_inner <= 0) {
        PyErr_SetString(PyExc_ValueError, "order, n_outer and n_inner must be >= 1");
        return NULL;
    }
    usbeam_hadamard_params p = {0};
    int npy_in, npy_out;
    if (parse_dtype(in_name, "data dtype", &p.in_dtype, &npy_in) < 0) return NULL;
    if (parse_dtype(out_name, "output dtype", &p.out_dtype, &npy_out) < 0) return NULL;
    if (strcmp(algorithm, "direct") == 0)
        p.algorithm = USBEAM_HADAMARD_DIRECT;
    else if (strcmp(algorithm, "fast") == 0)
        p.algorithm = USBEAM_HADAMARD_FAST;
    else if (strcmp(algorithm, "gemm") == 0)
        p.algorithm = USBEAM_HADAMARD_GEMM;
    else {
        PyErr_Format(PyExc_ValueError, "algorithm must be 'direct', 'fast' or 'gemm' (got '%s')", algorithm);
        return NULL;
    }
    p.order = (size_t)order;
    p.n_outer = (size_t)n_outer;
    p.n_inner = (size_t)n_inner;
    p.transmit_last = transmit_last != 0;
    if (matrix_obj != Py_None) {
        p.matrix = usbeam_py_array_data(matrix_obj, "matrix", NPY_INT8, (size_t)order * (size_t)order, 0);
        if (!p.matrix) return NULL;
    }
    usbeam_py_plan *h = usbeam_py_plan_new(&hadamard_plan_type);
    if (!h) return NULL;
    h->npy_in = npy_in;
    h->npy_out = npy_out;
    h->n_in = h->n_out = p.n_outer * p.order * p.n_inner; /* kept only if plan_create accepts the sizes */
    usbeam_hadamard_plan *plan = NULL;
    usbeam_status st = usbeam_hadamard_plan_create(&p, backend, &plan);
    return usbeam_py_plan_wrap(h, st, plan); /* the plan copied the matrix */
}

USBEAM_PY_PLAN_EXECUTE_BINDING(hadamard, "data")
USBEAM_PY_PLAN_CUDA_EXEC_BINDING(hadamard)

PyMethodDef usbeam_py_hadamard_methods[] = {
    {"hadamard_matrix", py_hadamard_matrix, METH_VARARGS, "usbeam's Hadamard matrix of an order (int8)."},
    {"hadamard_plan", (PyCFunction)(void (*)(void))py_hadamard_plan, METH_VARARGS | METH_KEYWORDS,
     "Create a Hadamard decode plan."},
    {"hadamard_execute", py_hadamard_execute, METH_VARARGS, "Run a Hadamard decode plan: (plan, data, out)."},
    {"hadamard_cuda_exec", py_hadamard_cuda_exec, METH_O, "CUDA state of a Hadamard plan (None for the CPU)."},
    {NULL, NULL, 0, NULL},
};
