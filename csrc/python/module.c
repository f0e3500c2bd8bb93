/*
 * module.c - the registrar of the extension module usbeam._core: PyInit__core, which adds
 * every binding file's table in stage order, and the module-level queries (build and device
 * facts, the status table, the thread limit, the CUDA backend's installation).
 *
 * It sits on top of the binding and nothing calls into it: the shared helpers are in
 * py_common.c (the bottom layer), plans in py_plan.c, each stage's bindings in py_<stage>.c
 * and device arrays in device/.
 */
#include "python/py_common.h"
#include "backend/cuda_seam.h"

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

/* _install_cuda(capsule): take usbeam._cuda's table (csrc/backend/cuda_seam.h); called once by
 * usbeam._backend.load_cuda, before any CUDA plan or device array exists. */
static PyObject *py_install_cuda(PyObject *self, PyObject *capsule)
{
    (void)self;
    const usbeam_cuda_api *api = PyCapsule_GetPointer(capsule, "usbeam._cuda.api");
    if (!api) return NULL;
    usbeam_status st = usbeam_cuda_install(api);
    return usbeam_py_none_or_raise(st);
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
    return usbeam_py_none_or_raise(st);
}

static PyObject *py_release_cached_memory(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
    return PyLong_FromSize_t(usbeam_release_cached_memory());
}

static PyObject *py_cached_memory(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
    return PyLong_FromSize_t(usbeam_cached_memory());
}

PyMethodDef usbeam_py_core_methods[] = {
    {"build_info", py_build_info, METH_NOARGS, "Build configuration: CUDA compiled in, OpenMP threads, version."},
    {"set_thread_limit", py_set_thread_limit, METH_O, "Cap the CPU threads of executes called from this OS thread."},
    {"release_cached_memory", py_release_cached_memory, METH_NOARGS,
     "Give back the large blocks kept from destroyed plans; returns the bytes released."},
    {"cached_memory", py_cached_memory, METH_NOARGS, "Bytes of large blocks kept from destroyed plans for reuse."},
    {"cuda_device_count", py_cuda_device_count, METH_NOARGS, "Number of usable CUDA devices (0 without CUDA)."},
    {"cuda_device_info", py_cuda_device_info, METH_VARARGS, "Properties of one CUDA device."},
    {"status_table", py_status_table, METH_NOARGS, "The status code table: {code: (name, message)}."},
    {"_interruptible_wait_test", usbeam_py_wait_test, METH_O,
     "Test of the Ctrl-C-aware host wait for CUDA work: poll a stand-in that is idle after `seconds`."},
    {"_install_cuda", py_install_cuda, METH_O, "Install usbeam._cuda's table (usbeam._backend.load_cuda)."},
    {"_set_cuda_unavailable", py_set_cuda_unavailable, METH_O, "Why the CUDA backend is absent (one line)."},
    {NULL, NULL, 0, NULL},
};

/* Stage order, as the library's headers and the Python package read: the module-level
 * queries, device arrays, acquisition, demodulation, beamforming, B-mode, Doppler, AI. */
static PyMethodDef *const method_tables[] = {
    usbeam_py_core_methods,
    usbeam_py_device_methods,
    usbeam_py_device_array_methods,
    usbeam_py_dlpack_methods,
    usbeam_py_cuda_methods,
    usbeam_py_hadamard_methods,
    usbeam_py_live_methods,
    usbeam_py_rf2iq_methods,
    usbeam_py_das_methods,
    usbeam_py_adaptive_methods,
    usbeam_py_rca_methods,
    usbeam_py_bmode_methods,
    usbeam_py_scan_convert_methods,
    usbeam_py_doppler_methods,
    usbeam_py_ai_methods,
    usbeam_py_segment_methods,
};

static struct PyModuleDef core_module = {PyModuleDef_HEAD_INIT, "usbeam._core",
                                         "usbeam C core (CPU reference backend and, when built, CUDA).",
                                         -1, NULL, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__core(void)
{
    if (usbeam_py_import_numpy() < 0) return NULL;
    PyObject *module_name = NULL;
    PyObject *module = PyModule_Create(&core_module);
    if (!module) return NULL;
    if (usbeam_py_error_init(module) < 0) goto fail;
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
    if (usbeam_py_device_init(module, usbeam_da_dlpack_methods) < 0) goto fail_types;
    return module;
fail_types:
    Py_DECREF(module);
    return NULL;
fail:
    Py_XDECREF(module_name);
    Py_DECREF(module);
    return NULL;
}
