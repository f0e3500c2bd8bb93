/*
 * py_common.c - the bottom layer of usbeam._core (py_common.h): status -> exception, NumPy
 * array checks, capsules and backend names.  It calls the library only, never another
 * binding file, so every binding file (device arrays included) can build on it.
 */
/* This file holds NumPy's C-API table for the whole module (PY_ARRAY_UNIQUE_SYMBOL): the
 * bottom layer owns it, so no binding file depends on module.c, which only registers. */
#define USBEAM_PY_MODULE_MAIN
#include "python/py_common.h"

#include "backend/cuda_seam.h"

#include <time.h>

int usbeam_py_import_numpy(void)
{
    import_array1(-1);
    return 0;
}

/* usbeam.UsbeamError, a RuntimeError: the exception of the status table's RUNTIME rows. */
static PyObject *usbeam_error_type;

int usbeam_py_error_init(PyObject *module)
{
    usbeam_error_type = PyErr_NewExceptionWithDoc("usbeam.UsbeamError",
                                                  "A usbeam runtime failure (backend, device or internal).",
                                                  PyExc_RuntimeError, NULL);
    if (!usbeam_error_type) return -1;
    return PyModule_AddObjectRef(module, "UsbeamError", usbeam_error_type);
}

PyObject *usbeam_py_raise(usbeam_status st)
{
    /* an interrupted call stopped because the signal handler raised (usbeam_py_check_signals):
     * that exception, KeyboardInterrupt for Ctrl-C, is already set and is the one to keep */
    if (st == USBEAM_ERR_INTERRUPTED && PyErr_Occurred()) {
        usbeam_clear_error();
        return NULL;
    }
    PyObject *type = usbeam_error_type;
    switch (st) {
#define VALUE PyExc_ValueError
#define TYPE PyExc_TypeError
#define MEMORY PyExc_MemoryError
#define RUNTIME usbeam_error_type
#define NOTIMPL PyExc_NotImplementedError
#define INTERRUPT PyExc_KeyboardInterrupt
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
#undef INTERRUPT
    }
    /* the library's message says what was wrong; the table's only which kind of failure */
    const char *detail = usbeam_last_error();
    if (detail && detail[0])
        PyErr_Format(type, "%s", detail);
    else
        PyErr_Format(type, "%s", usbeam_status_string(st));
    usbeam_clear_error();
    return NULL;
}

PyObject *usbeam_py_none_or_raise(usbeam_status st)
{
    if (st != USBEAM_OK) return usbeam_py_raise(st);
    Py_RETURN_NONE;
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
    /* the kernels index flat, in native order: anything else would be read wrongly, not slowly */
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
    /* the name check is what keeps one kind of capsule out of another kind's calls */
    if (!PyCapsule_IsValid(capsule, capsule_name)) {
        PyErr_Format(PyExc_TypeError, "%s must be a %s capsule", name, capsule_name);
        return NULL;
    }
    return PyCapsule_GetPointer(capsule, capsule_name);
}

int usbeam_py_dtype(const char *name, const char *const *allowed, usbeam_dtype *dtype, int *npy_type)
{
    static const struct {
        const char *name;
        usbeam_dtype dtype;
        int npy_type;
    } dtypes[] = {
        {"int16", USBEAM_DTYPE_INT16, NPY_INT16},         {"int32", USBEAM_DTYPE_INT32, NPY_INT32},
        {"float32", USBEAM_DTYPE_FLOAT32, NPY_FLOAT32},   {"float64", USBEAM_DTYPE_FLOAT64, NPY_FLOAT64},
        {"complex64", USBEAM_DTYPE_COMPLEX64, NPY_COMPLEX64}, {"uint8", USBEAM_DTYPE_UINT8, NPY_UINT8},
        {"float16", USBEAM_DTYPE_FLOAT16, NPY_FLOAT16},
    };
    for (size_t a = 0; allowed[a]; ++a) {
        if (strcmp(name, allowed[a]) != 0) continue;
        for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; ++d) {
            if (strcmp(name, dtypes[d].name) == 0) {
                *dtype = dtypes[d].dtype;
                *npy_type = dtypes[d].npy_type;
                return 0;
            }
        }
    }
    return -1;
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

/* ---- Ctrl-C during a long call (common/interrupt.h) ------------------------------------- */

/* The check the library calls, on the calling thread with the GIL released, every ~50 ms of a
 * long execute: take the GIL back for a moment and run the Python signal handlers.  A handler
 * that raised (KeyboardInterrupt) leaves its exception set on this thread state, which the
 * binding finds when the call returns USBEAM_ERR_INTERRUPTED (usbeam_py_raise). */
static int check_signals(void *thread_state)
{
    PyEval_RestoreThread((PyThreadState *)thread_state);
    const int raised = PyErr_CheckSignals() != 0;
    (void)PyEval_SaveThread();
    return raised;
}

/* The identity of the main thread, the only one CPython runs signal handlers on; 0 until
 * known (threading.main_thread() is what CPython itself compares with). */
static unsigned long main_thread_ident(void)
{
    static unsigned long ident;
    if (ident || PyErr_Occurred()) return ident; /* a pending exception is not ours to clear */
    PyObject *threading = PyImport_ImportModule("threading");
    PyObject *main = threading ? PyObject_CallMethod(threading, "main_thread", NULL) : NULL;
    PyObject *value = main ? PyObject_GetAttrString(main, "ident") : NULL;
    if (value && PyLong_Check(value)) ident = PyLong_AsUnsignedLong(value);
    if (PyErr_Occurred()) ident = 0;
    Py_XDECREF(value);
    Py_XDECREF(main);
    Py_XDECREF(threading);
    PyErr_Clear(); /* no answer: calls stay uninterruptible, as before */
    return ident;
}

int usbeam_py_interrupt_wanted(void) { return PyThread_get_thread_ident() == main_thread_ident(); }

void usbeam_py_interrupt_begin(PyThreadState *released) { (void)usbeam_set_interrupt_check(check_signals, released, 0.0); }

void usbeam_py_interrupt_end(void) { (void)usbeam_set_interrupt_check(NULL, NULL, 0.0); }

/* ---- Ctrl-C while the host waits for CUDA work ---------------------------------------------
 * A CUDA plan queues its kernels and returns; the host waits when it copies a result out or
 * synchronises, and cudaStreamSynchronize cannot be interrupted.  On the main thread the binding
 * therefore first polls the stream (cudaStreamQuery, through the seam) with the GIL released,
 * sleeping 20 us, doubling to 200 us (so a wait ends at most ~0.2 ms after the work), and every
 * 50 ms takes the GIL to run the signal handlers; once the stream is idle the blocking call
 * returns at once.  The CUDA emulator runs queued work only when the host synchronises (a query
 * never advances it, cuda/emu/README.md), so there, as on other threads, the wait is left to
 * the blocking call. */

static double monotonic_seconds(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + 1e-9 * (double)now.tv_nsec;
}

/* Poll ready(context) (1: done, 0: not yet, -1: cannot tell) until it is not 0; returns 0, or
 * -1 with the exception a signal handler raised. */
static int poll_interruptibly(int (*ready)(void *context), void *context)
{
    long sleep_ns = 20000;
    for (;;) {
        int state;
        Py_BEGIN_ALLOW_THREADS
        const double check_at = monotonic_seconds() + 0.05;
        while ((state = ready(context)) == 0 && monotonic_seconds() < check_at) {
            const struct timespec pause = {0, sleep_ns};
            nanosleep(&pause, NULL);
            sleep_ns = sleep_ns < 100000 ? 2 * sleep_ns : 200000;
        }
        Py_END_ALLOW_THREADS
        if (state != 0) return 0;
        if (PyErr_CheckSignals() < 0) return -1;
    }
}

static int stream_idle(void *stream)
{
    int idle = 0;
    if (usbeam_stream_query(stream, &idle) != USBEAM_OK) {
        usbeam_clear_error(); /* the blocking call that follows reports it */
        return -1;
    }
    return idle ? 1 : 0;
}

int usbeam_py_wait_stream(void *stream)
{
    const usbeam_cuda_api *cuda = usbeam_cuda_installed();
    if (!cuda || cuda->emulated || !usbeam_py_interrupt_wanted()) return 0;
    if (stream_idle(stream) != 0) return 0; /* done already (or an error for the blocking call) */
    return poll_interruptibly(stream_idle, stream);
}

/* The test of the polling loop without a GPU: a "stream" that becomes idle `seconds` after the
 * call (tests/device/test_interrupt_wait.py sends SIGINT into a long one). */
static int deadline_passed(void *deadline) { return monotonic_seconds() >= *(double *)deadline; }

PyObject *usbeam_py_wait_test(PyObject *self, PyObject *seconds)
{
    (void)self;
    const double wait = PyFloat_AsDouble(seconds);
    if (wait == -1.0 && PyErr_Occurred()) return NULL;
    if (!(wait >= 0.0 && wait <= 3600.0)) {
        PyErr_SetString(PyExc_ValueError, "seconds must be in [0, 3600]");
        return NULL;
    }
    double deadline = monotonic_seconds() + wait;
    if (poll_interruptibly(deadline_passed, &deadline) < 0) return NULL;
    Py_RETURN_NONE;
}
