/*
 * py_common.h - shared helpers of the extension module usbeam._core (the only files that
 * see Python and NumPy).  Each kernel family has its binding file py_<family>.c that
 * exports a PyMethodDef table; module.c gathers the tables.
 */
#ifndef USBEAM_PY_COMMON_H
#define USBEAM_PY_COMMON_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define NPY_NO_DEPRECATED_API NPY_2_0_API_VERSION
#define PY_ARRAY_UNIQUE_SYMBOL usbeam_ARRAY_API
#ifndef USBEAM_PY_MODULE_MAIN
#define NO_IMPORT_ARRAY
#endif
#include <numpy/arrayobject.h>

#include "common/usbeam_internal.h"

/* Raise the Python exception that the status table assigns to st, with the calling
 * thread's detailed message.  Returns NULL so callers can `return usbeam_py_raise(st);`. */
PyObject *usbeam_py_raise(usbeam_status st);

/* Check that obj is a NumPy array of the given dtype (NPY_*), C-contiguous and aligned,
 * holding exactly n_elements elements, and writable when writable != 0.  On success
 * returns its data pointer; otherwise raises (TypeError for a wrong type/dtype,
 * ValueError for size/layout/read-only) naming `name` and returns NULL. */
void *usbeam_py_array_data(PyObject *obj, const char *name, int npy_type, size_t n_elements,
                           int writable);

/* Wrap a plan pointer in a capsule whose destructor calls destroy. */
PyObject *usbeam_py_plan_capsule(void *plan, const char *capsule_name, PyCapsule_Destructor on_destroy);
/* Fetch the plan behind a capsule, raising TypeError naming `name` when it is not one. */
void *usbeam_py_plan_from_capsule(PyObject *capsule, const char *capsule_name, const char *name);

/* Parse a backend name ("cpu" or "cuda"); raises ValueError and returns -1 on anything else. */
int usbeam_py_backend(const char *name, usbeam_backend *backend);

/* family cuda (py_device_array.c, py_dlpack.c, py_cuda.c): DeviceArray, DLPack / CUDA array
 * interface exchange, CUDA plans.
 * usbeam_py_plan_buffer: for a CPU plan (exec NULL) usbeam_py_array_data; for a CUDA plan the
 * device pointer of a usbeam.DeviceArray on the plan's device, checked like it. */
void *usbeam_py_plan_buffer(PyObject *obj, const char *name, int npy_type, size_t n_elements, int writable,
                            usbeam_cuda_exec *exec);
/* A capsule on a plan's CUDA state that keeps owner (the plan capsule) alive; None for NULL. */
PyObject *usbeam_py_cuda_exec_capsule(usbeam_cuda_exec *exec, PyObject *owner);
int usbeam_py_device_init(PyObject *module);
extern PyMethodDef usbeam_py_device_methods[];
extern PyMethodDef usbeam_py_dlpack_methods[];
extern PyMethodDef usbeam_py_cuda_methods[];

/* Binding tables of each family (NULL-terminated PyMethodDef arrays). */
extern PyMethodDef usbeam_py_core_methods[];
extern PyMethodDef usbeam_py_bmode_methods[];
/* family rf2iq: */
extern PyMethodDef usbeam_py_rf2iq_methods[];

/* family das: */
extern PyMethodDef usbeam_py_das_methods[];

/* family doppler: */
extern PyMethodDef usbeam_py_doppler_methods[];

/* family hadamard: */
extern PyMethodDef usbeam_py_hadamard_methods[];

/* family rca: */
extern PyMethodDef usbeam_py_rca_methods[];

/* family ai: */
extern PyMethodDef usbeam_py_ai_methods[];
extern PyMethodDef usbeam_py_segment_methods[];

/* family live: */
extern PyMethodDef usbeam_py_live_methods[];

#endif
