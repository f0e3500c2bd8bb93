/*
 * py_scan_convert.c - Python bindings of scan conversion (see bmode/scan_convert.c); plans,
 * buffers and the GIL follow py_plan.h.
 *   scan_convert_plan(n_images, n_r, n_theta, r0, dr, theta0, dtheta, apex_x, apex_z, points,
 *                     dtype, fill, backend) -> plan
 *       points: float64 (n_points, 2) as (x, z); dtype: 'uint8' | 'float32'.
 *   scan_convert_execute(plan, image, out)   image (n_images, n_r, n_theta), out (n_images,
 *       n_points), both C-contiguous of the plan's dtype.
 */
#include "python/py_plan.h"

/* An execute reads its input and the plan's table and writes its output only: calls on one
 * CPU plan may overlap; a CUDA execute only queues a kernel. */
USBEAM_PY_PLAN_TYPE(scan_convert, USBEAM_PY_PLAN_REENTRANT | USBEAM_PY_PLAN_CUDA_KEEPS_GIL);

static PyObject *py_scan_convert_plan(PyObject *self, PyObject *args, PyObject *kwargs)
{
    (void)self;
    static char *keywords[] = {"n_images", "n_r", "n_theta", "r0", "dr", "theta0", "dtheta", "apex_x", "apex_z",
                               "points", "dtype", "fill", "backend", NULL};
    Py_ssize_t n_images, n_r, n_theta;
    double r0, dr, theta0, dtheta, apex_x, apex_z, fill = 0.0;
    PyObject *points_obj;
    const char *dtype = "float32", *backend_name = "cpu";
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "nnnddddddO|sds", keywords, &n_images, &n_r, &n_theta, &r0, &dr,
                                     &theta0, &dtheta, &apex_x, &apex_z, &points_obj, &dtype, &fill, &backend_name))
        return NULL;
    usbeam_backend backend;
    if (usbeam_py_backend(backend_name, &backend) < 0) return NULL;
    if (n_images < 1 || n_r < 0 || n_theta < 0) {
        PyErr_SetString(PyExc_ValueError, "n_images must be >= 1, n_r and n_theta >= 0");
        return NULL;
    }
    usbeam_scan_convert_params p = {0};
    int npy_type;
    if (strcmp(dtype, "uint8") == 0) {
        p.dtype = USBEAM_DTYPE_UINT8, npy_type = NPY_UINT8;
    } else if (strcmp(dtype, "float32") == 0) {
        p.dtype = USBEAM_DTYPE_FLOAT32, npy_type = NPY_FLOAT32;
    } else {
        PyErr_Format(PyExc_TypeError, "dtype must be 'uint8' or 'float32' (got '%s')", dtype);
        return NULL;
    }
    PyArrayObject *points = (PyArrayObject *)PyArray_FromAny(points_obj, PyArray_DescrFromType(NPY_FLOAT64), 2, 2,
                                                              NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED, NULL);
    if (!points || PyArray_DIM(points, 1) != 2) {
        Py_XDECREF(points);
        PyErr_Clear();
        PyErr_SetString(PyExc_ValueError, "points must be a float array of shape (n_points, 2)");
        return NULL;
    }
    p.n_images = (size_t)n_images;
    p.n_r = (size_t)n_r, p.n_theta = (size_t)n_theta;
    p.r0 = r0, p.dr = dr, p.theta0 = theta0, p.dtheta = dtheta, p.apex_x = apex_x, p.apex_z = apex_z;
    p.n_points = (size_t)PyArray_DIM(points, 0);
    p.points = PyArray_DATA(points);
    p.fill = fill;
    usbeam_py_plan *h = usbeam_py_plan_new(&scan_convert_plan_type);
    usbeam_scan_convert_plan *plan = NULL;
    usbeam_status st = USBEAM_OK;
    if (h) {
        Py_BEGIN_ALLOW_THREADS
        st = usbeam_scan_convert_plan_create(&p, backend, &plan);
        Py_END_ALLOW_THREADS
    }
    Py_DECREF(points);
    if (!h) return NULL;
    h->npy_in = h->npy_out = npy_type;
    h->n_in = p.n_images * p.n_r * p.n_theta;
    h->n_out = p.n_images * p.n_points;
    return usbeam_py_plan_wrap(h, st, plan);
}

USBEAM_PY_PLAN_EXECUTE_BINDING(scan_convert, "image")
USBEAM_PY_PLAN_CUDA_EXEC_BINDING(scan_convert)

PyMethodDef usbeam_py_scan_convert_methods[] = {
    {"scan_convert_cuda_exec", py_scan_convert_cuda_exec, METH_O, "CUDA state of a scan conversion plan (None for the CPU)."},
    {"scan_convert_plan", (PyCFunction)(void (*)(void))py_scan_convert_plan, METH_VARARGS | METH_KEYWORDS,
     "Create a scan conversion plan."},
    {"scan_convert_execute", py_scan_convert_execute, METH_VARARGS, "Run a scan conversion plan: (plan, image, out)."},
    {NULL, NULL, 0, NULL},
};
