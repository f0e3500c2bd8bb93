/*
 * py_ai_common.h - what the AI family's two binding files (py_ai.c, py_segment.c) share:
 * the plan handle (plan, its destroy function, the backend, expected element counts and
 * the per-plan lock that makes a plan with scratch safe to call from several threads).
 */
#ifndef USBEAM_PY_AI_COMMON_H
#define USBEAM_PY_AI_COMMON_H

#include "python/py_common.h"
#include "pythread.h"

typedef struct usbeam_ai_handle {
    void *plan;
    void (*destroy)(void *plan);
    usbeam_backend backend;
    int npy_in, npy_out;
    size_t n_in, n_out, n_aux; /* elements of the input, the output and a second output */
    size_t height, width, n_images;
    PyThread_type_lock lock;
} usbeam_ai_handle;

int usbeam_py_ai_dtype(const char *name, const char *what, usbeam_dtype *dtype, int *npy_type);
usbeam_ai_handle *usbeam_py_ai_handle_new(void);
void usbeam_py_ai_handle_free(usbeam_ai_handle *h);
PyObject *usbeam_py_ai_wrap(usbeam_ai_handle *h, const char *capsule_name, PyCapsule_Destructor destroy);
int usbeam_py_device_pointer(PyObject *value, const char *name, void **pointer);
PyObject *usbeam_py_ai_wrong_backend(const char *what);

#endif
