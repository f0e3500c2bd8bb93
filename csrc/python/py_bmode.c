/*
 * py_bmode.c - Python bindings of the B-mode family (see bmode.c).
 *   bmode_plan(n_values, n_images, dynamic_range, output, per_image, reference, backend) -> plan
 *   bmode_execute(plan, iq, out)   iq: complex64 C-contiguous, out: uint8 or float32
 */
#include "python/py_common.h"

#define BMODE_CAPSULE "usbeam.bmode_plan"

typedef struct {
    usbeam_bmode_plan *plan;
    usbeam_bmode_params params;
} bmode_handle;

static void bmode_capsule_destroy(PyObject *capsule)
{
    bmode_handle *h = PyCapsule_GetPointer(capsule, BMODE_CAPSULE);
    if (h) {
        usbeam_bmode_plan_destroy(h->plan);
        PyMem_Free(h);
    }
}

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
    bmode_handle *h = PyMem_Calloc(1, sizeof *h);
    if (!h) return PyErr_NoMemory();
    h->params = p;
    usbeam_status st = usbeam_bmode_plan_create(&p, backend, &h->plan);
    if (st != USBEAM_OK) {
        PyMem_Free(h);
        return usbeam_py_raise(st);
    }
    PyObject *capsule = usbeam_py_plan_capsule(h, BMODE_CAPSULE, bmode_capsule_destroy);
    if (!capsule) {
        usbeam_bmode_plan_destroy(h->plan);
        PyMem_Free(h);
    }
    return capsule;
}

static PyObject *py_bmode_execute(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *capsule, *in_obj, *out_obj;
    if (!PyArg_ParseTuple(args, "OOO", &capsule, &in_obj, &out_obj)) return NULL;
    bmode_handle *h = usbeam_py_plan_from_capsule(capsule, BMODE_CAPSULE, "plan");
    if (!h) return NULL;
    usbeam_cuda_exec *cuda = usbeam_bmode_plan_cuda(h->plan); /* NULL: CPU plan, NumPy arrays */
    const void *in = usbeam_py_plan_buffer(in_obj, "image", NPY_COMPLEX64, h->params.n_values, 0, cuda);
    if (!in) return NULL;
    int out_type = h->params.output == USBEAM_BMODE_UINT8 ? NPY_UINT8 : NPY_FLOAT32;
    void *out = usbeam_py_plan_buffer(out_obj, "out", out_type, h->params.n_values, 1, cuda);
    if (!out) return NULL;
    usbeam_status st;
    if (cuda) {
        /* only queues kernels; holding the GIL serialises users of the plan's device scratch */
        st = usbeam_bmode_execute(h->plan, in, out);
    } else {
        Py_BEGIN_ALLOW_THREADS
        st = usbeam_bmode_execute(h->plan, in, out);
        Py_END_ALLOW_THREADS
    }
    if (st != USBEAM_OK) return usbeam_py_raise(st);
    Py_RETURN_NONE;
}

static PyObject *py_bmode_cuda_exec(PyObject *self, PyObject *capsule)
{
    (void)self;
    bmode_handle *h = usbeam_py_plan_from_capsule(capsule, BMODE_CAPSULE, "plan");
    if (!h) return NULL;
    return usbeam_py_cuda_exec_capsule(usbeam_bmode_plan_cuda(h->plan), capsule);
}

PyMethodDef usbeam_py_bmode_methods[] = {
    {"bmode_cuda_exec", py_bmode_cuda_exec, METH_O, "CUDA state of a B-mode plan (None for the CPU)."},
    {"bmode_plan", (PyCFunction)(void (*)(void))py_bmode_plan, METH_VARARGS | METH_KEYWORDS,
     "Create a B-mode plan."},
    {"bmode_execute", py_bmode_execute, METH_VARARGS, "Run a B-mode plan: (plan, iq, out)."},
    {NULL, NULL, 0, NULL},
};
