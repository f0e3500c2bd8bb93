/*
 * cuda_module.c - the extension module usbeam._cuda: the CUDA backend (the cuda/ sources, linked
 * with the static CUDA runtime and cuBLAS) as a module of its own, so that usbeam._core never
 * links a CUDA library.  Python imports it on first use of the CUDA backend
 * (usbeam._backend.load_cuda, after finding cuBLAS in the toolkit or the NVIDIA wheels) and
 * hands its table to _core (csrc/cuda_seam.h): `api` is a capsule holding that table.
 *
 * The C library functions the CUDA code calls (usbeam_fail, usbeam_alloc, ...) are forwarded to
 * _core's through the services _core passes to connect(): the per-thread error message has one
 * home, so an error raised inside a CUDA function reads like any other.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "backend/cuda_seam.h"

#ifndef USBEAM_CUDA_ARCHITECTURES
#define USBEAM_CUDA_ARCHITECTURES "unknown"
#endif

static const usbeam_host_services *host;

static void connect_host(const usbeam_host_services *services) { host = services; }

usbeam_status usbeam_fail(usbeam_status status, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    status = host->vfail(status, format, args);
    va_end(args);
    return status;
}

void *usbeam_alloc(size_t bytes) { return host->alloc(bytes); }

void usbeam_free(void *ptr) { host->free(ptr); }

#define USBEAM_SEAM_ENTRY(ret, name, params, args, fallback) .name = name,
#define USBEAM_SEAM_ENTRY_V(name, params, args) .name = name,
static const usbeam_cuda_api cuda_api = {
    .signature = USBEAM_CUDA_SEAM_SIGNATURE,
#ifdef USBEAM_CUDA_EMULATED
    .emulated = 1,
#else
    .emulated = 0,
#endif
    .cuda_runtime_version = CUDART_VERSION,
    .architectures = USBEAM_CUDA_ARCHITECTURES,
    .connect = connect_host,
    USBEAM_CUDA_ENTRY_POINTS(USBEAM_SEAM_ENTRY, USBEAM_SEAM_ENTRY_V)};

static struct PyModuleDef cuda_module = {
    PyModuleDef_HEAD_INIT, "usbeam._cuda",
    "usbeam's CUDA backend; loaded by usbeam._backend.load_cuda, used through usbeam._core.", -1, NULL,
    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__cuda(void)
{
    PyObject *module = PyModule_Create(&cuda_module);
    if (!module) return NULL;
    PyObject *capsule = PyCapsule_New((void *)&cuda_api, "usbeam._cuda.api", NULL);
    if (!capsule || PyModule_AddObject(module, "api", capsule) < 0) {
        Py_XDECREF(capsule);
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
