/*
 * py_hadamard.c - Python bindings of the Hadamard family (see hadamard.c).
 *   hadamard_matrix(order) -> int8 ndarray (order, order)
 *   hadamard_plan(order, n_outer, n_inner, in_dtype, out_dtype, algorithm, transmit_last,
 *                 matrix=None, backend='cpu') -> plan
 *   hadamard_execute(plan, data, out)     (NumPy arrays; DeviceArrays for a CUDA plan)
 *   hadamard_cuda_exec(plan) -> capsule on the plan's CUDA state, or None
 * dtypes are names: 'int16', 'int32', 'float32'; algorithm 'direct', 'fast' or 'gemm'
 * (CUDA only).
 */
#include "python/py_common.h"

#define HADAMARD_CAPSULE "usbeam.hadamard_plan"

typedef struct {
    usbeam_hadamard_plan *plan;
    usbeam_hadamard_params params;
    PyThread_type_lock lock; /* one execute at a time: the plan's scratch is shared */
} hadamard_handle;

static void hadamard_capsule_destroy(PyObject *capsule)
{
    hadamard_handle *h = PyCapsule_GetPointer(capsule, HADAMARD_CAPSULE);
    if (h) {
        usbeam_hadamard_plan_destroy(h->plan);
        if (h->lock) PyThread_free_lock(h->lock);
        PyMem_Free(h);
    }
}

static int parse_dtype(const char *name, const char *what, usbeam_dtype *dtype, int *npy_type)
{
    if (strcmp(name, "int16") == 0) {
        *dtype = USBEAM_DTYPE_INT16;
        *npy_type = NPY_INT16;
    } else if (strcmp(name, "int32") == 0) {
        *dtype = USBEAM_DTYPE_INT32;
        *npy_type = NPY_INT32;
    } else if (strcmp(name, "float32") == 0) {
        *dtype = USBEAM_DTYPE_FLOAT32;
        *npy_type = NPY_FLOAT32;
    } else {
        PyErr_Format(PyExc_TypeError, "%s must be int16, int32 or float32 (got '%s')", what, name);
        return -1;
    }
    return 0;
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
    hadamard_handle *h = PyMem_Calloc(1, sizeof *h);
    if (!h) return PyErr_NoMemory();
    h->lock = PyThread_allocate_lock();
    if (!h->lock) {
        PyMem_Free(h);
        return PyErr_NoMemory();
    }
    usbeam_status st = usbeam_hadamard_plan_create(&p, backend, &h->plan);
    if (st != USBEAM_OK) {
        PyThread_free_lock(h->lock);
        PyMem_Free(h);
        return usbeam_py_raise(st);
    }
    p.matrix = NULL; /* the plan copied it */
    h->params = p;
    PyObject *capsule = usbeam_py_plan_capsule(h, HADAMARD_CAPSULE, hadamard_capsule_destroy);
    if (!capsule) {
        usbeam_hadamard_plan_destroy(h->plan);
        PyThread_free_lock(h->lock);
        PyMem_Free(h);
    }
    return capsule;
}

static int npy_of(usbeam_dtype d)
{
    return d == USBEAM_DTYPE_INT16 ? NPY_INT16 : d == USBEAM_DTYPE_INT32 ? NPY_INT32 : NPY_FLOAT32;
}

static PyObject *py_hadamard_execute(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *capsule, *in_obj, *out_obj;
    if (!PyArg_ParseTuple(args, "OOO", &capsule, &in_obj, &out_obj)) return NULL;
    hadamard_handle *h = usbeam_py_plan_from_capsule(capsule, HADAMARD_CAPSULE, "plan");
    if (!h) return NULL;
    size_t count = h->params.n_outer * h->params.order * h->params.n_inner; /* checked by plan_create */
    usbeam_cuda_exec *cuda = usbeam_hadamard_plan_cuda(h->plan); /* NULL: CPU plan, NumPy arrays */
    const void *in = usbeam_py_plan_buffer(in_obj, "data", npy_of(h->params.in_dtype), count, 0, cuda);
    if (!in) return NULL;
    void *out = usbeam_py_plan_buffer(out_obj, "out", npy_of(h->params.out_dtype), count, 1, cuda);
    if (!out) return NULL;
    usbeam_status st;
    Py_BEGIN_ALLOW_THREADS
    PyThread_acquire_lock(h->lock, WAIT_LOCK);
    st = usbeam_hadamard_execute(h->plan, in, out);
    PyThread_release_lock(h->lock);
    Py_END_ALLOW_THREADS
    if (st != USBEAM_OK) return usbeam_py_raise(st);
    Py_RETURN_NONE;
}

static PyObject *py_hadamard_cuda_exec(PyObject *self, PyObject *capsule)
{
    (void)self;
    hadamard_handle *h = usbeam_py_plan_from_capsule(capsule, HADAMARD_CAPSULE, "plan");
    if (!h) return NULL;
    return usbeam_py_cuda_exec_capsule(usbeam_hadamard_plan_cuda(h->plan), capsule);
}

PyMethodDef usbeam_py_hadamard_methods[] = {
    {"hadamard_matrix", py_hadamard_matrix, METH_VARARGS, "usbeam's Hadamard matrix of an order (int8)."},
    {"hadamard_plan", (PyCFunction)(void (*)(void))py_hadamard_plan, METH_VARARGS | METH_KEYWORDS,
     "Create a Hadamard decode plan."},
    {"hadamard_execute", py_hadamard_execute, METH_VARARGS, "Run a Hadamard decode plan: (plan, data, out)."},
    {"hadamard_cuda_exec", py_hadamard_cuda_exec, METH_O, "CUDA state of a Hadamard plan (None for the CPU)."},
    {NULL, NULL, 0, NULL},
};
