/*
 * module.c - the extension module usbeam._core: module init, the status -> exception
 * mapping (driven by the one status table in usbeam.h), array and capsule helpers, and
 * build/device queries.  Kernel bindings live in py_<family>.c.
 */
#define USBEAM_PY_MODULE_MAIN
#include "python/py_common.h"
#include "backend/cuda_seam.h"

static PyObject *usbeam_error_type; /* usbeam.UsbeamError, a RuntimeError */

PyObject *usbeam_py_raise(usbeam_status st)
{
    PyObject *type = usbeam_error_type;
    switch (st) {
#define VALUE PyExc_ValueError
#define TYPE PyExc_TypeError
#define MEMORY PyExc_MemoryError
#define RUNTIME usbeam_error_type
#define NOTIMPL PyExc_NotImplementedError
#define USBEAM_X_EXC(name, value, message, pykind) \
    case name:                                     \
        type = pykind;                             \
        break;
        USBEAM_STATUS_TABLE(USBEAM_X_EXC)
#undef USBEAM_X_EXC
#undef VALUE
#undef TYPE
#undef MEMORY
#undef RUNTIME
#undef NOTIMPL
    }
    const char *detail = usbeam_last_error();
    if (detail && detail[0])
        PyErr_Format(type, "%s", detail);
    else
        PyErr_Format(type, "%s", usbeam_status_string(st));
    usbeam_clear_error();
    return NULL;
}

void *usbeam_py_array_data(PyObject *obj, const char *name, int npy_type, size_t n_elements,
                           int writable)
{
    if (!PyArray_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s must be a numpy.ndarray (got %s)", name, Py_TYPE(obj)->tp_name);
        return NULL;
    }
    PyArrayObject *arr = (PyArrayObject *)obj;
    if (PyArray_TYPE(arr) != npy_type) {
        PyArray_Descr *want = PyArray_DescrFromType(npy_type);
        PyErr_Format(PyExc_TypeError, "%s must have dtype %s (got %s)", name,
                     want ? want->typeobj->tp_name : "?", PyArray_DESCR(arr)->typeobj->tp_name);
        Py_XDECREF(want);
        return NULL;
    }
    if (!PyArray_IS_C_CONTIGUOUS(arr) || !PyArray_ISALIGNED(arr) || PyArray_ISBYTESWAPPED(arr)) {
        PyErr_Format(PyExc_ValueError, "%s must be C-contiguous, aligned and in native byte order", name);
        return NULL;
    }
    if ((size_t)PyArray_SIZE(arr) != n_elements) {
        PyErr_Format(PyExc_ValueError, "%s must hold %zu elements (got %zd)", name, n_elements,
                     (Py_ssize_t)PyArray_SIZE(arr));
        return NULL;
    }
    if (writable && !PyArray_ISWRITEABLE(arr)) {
        PyErr_Format(PyExc_ValueError, "%s is read-only", name);
        return NULL;
    }
    return PyArray_DATA(arr);
}

PyObject *usbeam_py_plan_capsule(void *plan, const char *capsule_name, PyCapsule_Destructor on_destroy)
{
    return PyCapsule_New(plan, capsule_name, on_destroy);
}

void *usbeam_py_plan_from_capsule(PyObject *capsule, const char *capsule_name, const char *name)
{
    if (!PyCapsule_IsValid(capsule, capsule_name)) {
        PyErr_Format(PyExc_TypeError, "%s must be a %s capsule", name, capsule_name);
        return NULL;
    }
    return PyCapsule_GetPointer(capsule, capsule_name);
}

int usbeam_py_backend(const char *name, usbeam_backend *backend)
{
    if (strcmp(name, "cpu") == 0) {
        *backend = USBEAM_BACKEND_CPU;
        return 0;
    }
    if (strcmp(name, "cuda") == 0) {
        *backend = USBEAM_BACKEND_CUDA;
        return 0;
    }
    PyErr_Format(PyExc_ValueError, "backend must be 'cpu' or 'cuda' (got '%s')", name);
    return -1;
}

/* ---- build and device queries ---------------------------------------------------- */

static PyObject *py_build_info(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
    /* CUDA facts come from the loaded usbeam._cuda (usbeam._backend adds why it is absent). */
    const usbeam_cuda_api *cuda = usbeam_cuda_installed();
    /* why a loaded CUDA backend sees no usable device when the driver's answer is an error
     * (None: it answered, with or without devices) */
    int count = 0;
    PyObject *cuda_error = Py_None;
    if (cuda && usbeam_cuda_device_count(&count) != USBEAM_OK) {
        cuda_error = PyUnicode_FromString(usbeam_last_error());
        if (!cuda_error) return NULL;
        usbeam_clear_error();
    } else {
        Py_INCREF(cuda_error);
    }
    return Py_BuildValue("{s:i,s:i,s:i,s:s,s:N,s:i,s:s,s:(iii)}", "cuda", cuda != NULL, "cuda_emulated",
                         cuda ? cuda->emulated : 0, "cuda_runtime_version", cuda ? cuda->cuda_runtime_version : 0,
                         "cuda_architectures", cuda ? cuda->architectures : "", "cuda_error", cuda_error,
                         "cpu_threads", usbeam_cpu_threads(), "openmp",
#ifdef _OPENMP
                         "yes",
#else
                         "no",
#endif
                         "version", USBEAM_VERSION_MAJOR, USBEAM_VERSION_MINOR, USBEAM_VERSION_PATCH);
}

/* _install_cuda(capsule): take usbeam._cuda's table (csrc/cuda_seam.h); called once by
 * usbeam._backend.load_cuda, before any CUDA plan or device array exists. */
static PyObject *py_install_cuda(PyObject *self, PyObject *capsule)
{
    (void)self;
    const usbeam_cuda_api *api = PyCapsule_GetPointer(capsule, "usbeam._cuda.api");
    if (!api) return NULL;
    usbeam_status st = usbeam_cuda_install(api);
    if (st != USBEAM_OK) return usbeam_py_raise(st);
    Py_RETURN_NONE;
}

/* _set_cuda_unavailable(reason): the one line the CUDA entry points give while it is absent. */
static PyObject *py_set_cuda_unavailable(PyObject *self, PyObject *arg)
{
    (void)self;
    const char *reason = PyUnicode_AsUTF8(arg);
    if (!reason) return NULL;
    usbeam_cuda_set_unavailable(reason);
    Py_RETURN_NONE;
}

static PyObject *py_cuda_device_count(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
    int count = 0;
    usbeam_status st = usbeam_cuda_device_count(&count);
    if (st != USBEAM_OK) return usbeam_py_raise(st);
    return PyLong_FromLong(count);
}

static PyObject *py_cuda_device_info(PyObject *self, PyObject *args)
{
    (void)self;
    int device = 0;
    if (!PyArg_ParseTuple(args, "i", &device)) return NULL;
    usbeam_device_info info;
    usbeam_status st = usbeam_cuda_device_info(device, &info);
    if (st != USBEAM_OK) return usbeam_py_raise(st);
    return Py_BuildValue("{s:s,s:(ii),s:n,s:i,s:i,s:i}", "name", info.name, "compute_capability",
                         info.major, info.minor, "total_memory_bytes", (Py_ssize_t)info.total_memory_bytes,
                         "multiprocessors", info.multiprocessors, "driver_version", info.driver_version,
                         "runtime_version", info.runtime_version);
}

static PyObject *py_status_table(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
    PyObject *table = PyDict_New();
    if (!table) return NULL;
#define USBEAM_X_ENTRY(name, value, message, pykind)                               \
    {                                                                              \
        PyObject *entry = Py_BuildValue("(ss)", #name, message);                   \
        PyObject *key = PyLong_FromLong(value);                                    \
        if (!entry || !key || PyDict_SetItem(table, key, entry) < 0) {             \
            Py_XDECREF(entry);                                                     \
            Py_XDECREF(key);                                                       \
            Py_DECREF(table);                                                      \
            return NULL;                                                           \
        }                                                                          \
        Py_DECREF(entry);                                                          \
        Py_DECREF(key);                                                            \
    }
    USBEAM_STATUS_TABLE(USBEAM_X_ENTRY)
#undef USBEAM_X_ENTRY
    return table;
}

static PyObject *py_set_thread_limit(PyObject *self, PyObject *arg)
{
    (void)self;
    long n = PyLong_AsLong(arg);
    if (n == -1 && PyErr_Occurred()) return NULL;
    if (n < 1 || n > 4096) {
        PyErr_Format(PyExc_ValueError, "threads must be an integer in [1, 4096] (got %ld)", n);
        return NULL;
    }
    usbeam_status st = usbeam_set_thread_limit((int)n);
    if (st != USBEAM_OK) return usbeam_py_raise(st);
    Py_RETURN_NONE;
}

PyMethodDef usbeam_py_core_methods[] = {
    {"build_info", py_build_info, METH_NOARGS, "Build configuration: CUDA compiled in, OpenMP threads, version."},
    {"set_thread_limit", py_set_thread_limit, METH_O, "Cap the CPU threads of executes called from this OS thread."},
    {"cuda_device_count", py_cuda_device_count, METH_NOARGS, "Number of usable CUDA devices (0 without CUDA)."},
    {"cuda_device_info", py_cuda_device_info, METH_VARARGS, "Properties of one CUDA device."},
    {"status_table", py_status_table, METH_NOARGS, "The status code table: {code: (name, message)}."},
    {"_install_cuda", py_install_cuda, METH_O, "Install usbeam._cuda's table (usbeam._backend.load_cuda)."},
    {"_set_cuda_unavailable", py_set_cuda_unavailable, METH_O, "Why the CUDA backend is absent (one line)."},
    {NULL, NULL, 0, NULL},
};

static PyMethodDef *const method_tables[] = {
    usbeam_py_core_methods,
    usbeam_py_bmode_methods,
    /* family cuda: */
    usbeam_py_device_methods,
    usbeam_py_dlpack_methods,
    usbeam_py_cuda_methods,
    /* family rf2iq: */
    usbeam_py_rf2iq_methods,

    /* family das: */
    usbeam_py_das_methods,

    /* family doppler: */
    usbeam_py_doppler_methods,

    /* family hadamard: */
    usbeam_py_hadamard_methods,

    /* family rca: */
    usbeam_py_rca_methods,

    /* family ai: */
    usbeam_py_ai_methods,
    usbeam_py_segment_methods,

    /* family live: */
    usbeam_py_live_methods,
};

static struct PyModuleDef core_module = {PyModuleDef_HEAD_INIT, "usbeam._core",
                                         "usbeam C core (CPU reference backend and, when built, CUDA).",
                                         -1, NULL, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__core(void)
{
    import_array();
    PyObject *module_name = NULL;
    PyObject *module = PyModule_Create(&core_module);
    if (!module) return NULL;
    usbeam_error_type = PyErr_NewExceptionWithDoc("usbeam.UsbeamError",
                                                  "A usbeam runtime failure (backend, device or internal).",
                                                  PyExc_RuntimeError, NULL);
    if (!usbeam_error_type || PyModule_AddObjectRef(module, "UsbeamError", usbeam_error_type) < 0) goto fail;
    module_name = PyModule_GetNameObject(module);
    if (!module_name) goto fail;
    for (size_t t = 0; t < sizeof method_tables / sizeof method_tables[0]; ++t) {
        for (PyMethodDef *def = method_tables[t]; def->ml_name; ++def) {
            PyObject *fn = PyCFunction_NewEx(def, NULL, module_name);
            if (!fn || PyModule_AddObject(module, def->ml_name, fn) < 0) {
                Py_XDECREF(fn);
                goto fail;
            }
        }
    }
    Py_DECREF(module_name);
    /* family cuda: */
    if (usbeam_py_device_init(module) < 0) goto fail_types;
    return module;
fail_types:
    Py_DECREF(module);
    return NULL;
fail:
    Py_XDECREF(module_name);
    Py_DECREF(module);
    return NULL;
}
