/*
 * py_common.h - the bottom layer of the extension module usbeam._core, the only code that
 * sees Python and NumPy: what every binding file calls, and nothing that calls back up
 * (py_common.c depends on the library alone).
 *
 * Conventions the whole binding keeps, implemented here:
 *   - A failed library call returns a usbeam_status; usbeam_py_raise turns it into the
 *     exception the one status table (USBEAM_STATUS_TABLE) assigns, with the calling
 *     thread's detailed message, so codes, messages and exception kinds have one source.
 *   - A caller's array is checked before the library sees it: TypeError for a wrong type or
 *     dtype, ValueError for a wrong size, layout or a read-only output; every message names
 *     the parameter.
 *   - A backend is named "cpu" or "cuda".
 * Plans and their calls follow py_plan.h; device arrays live in device/.
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

/* Create usbeam.UsbeamError (a RuntimeError: the kind the status table calls RUNTIME) and add
 * it to module.  Called once by PyInit__core, before any binding can raise. */
int usbeam_py_error_init(PyObject *module);

/* Raise the Python exception that the status table assigns to st, with the calling
 * thread's detailed message.  Returns NULL so callers can `return usbeam_py_raise(st);`. */
PyObject *usbeam_py_raise(usbeam_status st);

/* Ctrl-C during a long library call (common/interrupt.h).  With the GIL held, before it is
 * released: usbeam_py_interrupt_wanted() says whether the calling thread is the main thread,
 * the only one CPython runs signal handlers on (other threads' calls stay as they were).  If
 * so, with the GIL released: usbeam_py_interrupt_begin(the released thread state) registers a
 * check that takes the GIL back for a moment every ~50 ms of a long execute and runs
 * PyErr_CheckSignals; usbeam_py_interrupt_end() unregisters it, before the GIL is taken back.
 * A call stopped by it returns USBEAM_ERR_INTERRUPTED and usbeam_py_raise keeps the handler's
 * exception (KeyboardInterrupt). */
int usbeam_py_interrupt_wanted(void);
void usbeam_py_interrupt_begin(PyThreadState *released);
void usbeam_py_interrupt_end(void);

/* Before a host wait for a CUDA stream (a copy of a result out, a synchronize), with the GIL
 * held: on the main thread of a GPU build, wait for the stream by polling it with the GIL
 * released and the signal handlers run every 50 ms, so Ctrl-C interrupts the wait.  Returns 0
 * (the stream is idle, or the wait is left to the blocking call: other threads, the CUDA
 * emulator) or -1 with the handler's exception (KeyboardInterrupt) set. */
int usbeam_py_wait_stream(void *stream);
/* _core._interruptible_wait_test(seconds): the same polling loop on a stand-in that is idle
 * after `seconds` (tests without a GPU). */
PyObject *usbeam_py_wait_test(PyObject *self, PyObject *seconds);

/* None for USBEAM_OK, otherwise usbeam_py_raise(st). */
PyObject *usbeam_py_none_or_raise(usbeam_status st);

/* Check that obj is a NumPy array of the given dtype (NPY_*), C-contiguous and aligned,
 * holding exactly n_elements elements, and writable when writable != 0.  On success
 * returns its data pointer; otherwise raises (TypeError for a wrong type/dtype,
 * ValueError for size/layout/read-only) naming `name` and returns NULL. */
void *usbeam_py_array_data(PyObject *obj, const char *name, int npy_type, size_t n_elements,
                           int writable);

/* Wrap a pointer in a capsule whose destructor is on_destroy (py_plan.h builds plans on it). */
PyObject *usbeam_py_plan_capsule(void *plan, const char *capsule_name, PyCapsule_Destructor on_destroy);
/* Fetch the pointer behind a capsule, raising TypeError naming `name` when it is not one. */
void *usbeam_py_plan_from_capsule(PyObject *capsule, const char *capsule_name, const char *name);

/* The usbeam dtype and NumPy type NumPy calls `name` ("int16", "float32", ...) when name is
 * one of `allowed` (NULL-terminated); -1 otherwise, with no exception set: each caller words
 * its own TypeError, naming what it parses. */
int usbeam_py_dtype(const char *name, const char *const *allowed, usbeam_dtype *dtype, int *npy_type);

/* Parse a backend name ("cpu" or "cuda"); raises ValueError and returns -1 on anything else. */
int usbeam_py_backend(const char *name, usbeam_backend *backend);

/* Load NumPy's C API into the table py_common.c owns (once, from the module init). */
int usbeam_py_import_numpy(void);

/* The binding tables module.c registers, in stage order: each binding file exports one
 * NULL-terminated PyMethodDef array. */
extern PyMethodDef usbeam_py_core_methods[];
extern PyMethodDef usbeam_py_device_methods[];
extern PyMethodDef usbeam_py_device_array_methods[];
extern PyMethodDef usbeam_da_dlpack_methods[];
extern PyMethodDef usbeam_py_dlpack_methods[];
extern PyMethodDef usbeam_py_cuda_methods[];
extern PyMethodDef usbeam_py_hadamard_methods[];
extern PyMethodDef usbeam_py_live_methods[];
extern PyMethodDef usbeam_py_rf2iq_methods[];
extern PyMethodDef usbeam_py_das_methods[];
extern PyMethodDef usbeam_py_adaptive_methods[];
extern PyMethodDef usbeam_py_rca_methods[];
extern PyMethodDef usbeam_py_bmode_methods[];
extern PyMethodDef usbeam_py_scan_convert_methods[];
extern PyMethodDef usbeam_py_doppler_methods[];
extern PyMethodDef usbeam_py_ai_methods[];
extern PyMethodDef usbeam_py_segment_methods[];

/* Add usbeam.DeviceArray to module and register the at-exit release of parked buffers
 * (device/py_device_array.c). */
int usbeam_py_device_init(PyObject *module, const PyMethodDef *protocol_methods);

#endif
