/*
 * py_device_memory.c - the memory behind usbeam.DeviceArray (py_device.h says what a buffer
 * is): reference-counted buffers and their release without a host wait, fresh host and
 * device allocations, explicit host <-> device copies (to_numpy, copy_from_host, copies to
 * another device), and the module functions device_empty / device_wrap / stream_wait /
 * stream_synchronize / stream_query / device_release_pending.  The type itself is in
 * py_device_array.c.
 *
 * Streams are the array API's integers: None -> the legacy default stream (1), 2 the
 * per-thread one, 0 refused as ambiguous; copies are complete when they return.
 */
#include "python/device/py_device.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ---- shared buffers ------------------------------------------------------------------ */

usbeam_buffer *usbeam_da_buffer_new(buffer_kind kind, void *base, void *foreign)
{
    usbeam_buffer *b = calloc(1, sizeof *b);
    if (!b) return NULL;
    b->refs = 1;
    b->kind = kind;
    b->base = base;
    b->foreign = foreign;
    return b;
}

static int interpreter_finalizing(void)
{
#if PY_VERSION_HEX >= 0x030D0000
    return Py_IsFinalizing();
#else
    return _Py_IsFinalizing();
#endif
}

/* Free the memory now: the work that used it has finished (or never existed). */
static void buffer_finalize(usbeam_buffer *b)
{
    usbeam_event_destroy(b->last_use);
    switch (b->kind) {
    case BUF_HOST:
        free(b->base);
        break;
    case BUF_DEVICE:
        (void)usbeam_device_free(b->base);
        break;
    case BUF_DEVICE_POOLED:
        (void)usbeam_device_free_after(b->device, b->base, NULL, 0);
        break;
    case BUF_DLPACK_LEGACY: {
        DLManagedTensor *m = b->foreign;
        if (m->deleter) m->deleter(m);
        break;
    }
    case BUF_DLPACK_VERSIONED: {
        DLManagedTensorVersioned *m = b->foreign;
        if (m->deleter) m->deleter(m);
        break;
    }
    case BUF_PYOBJECT:
        /* at interpreter shutdown the object is gone with everything else */
        if (!interpreter_finalizing()) {
            PyGILState_STATE gil = PyGILState_Ensure();
            Py_DECREF((PyObject *)b->foreign);
            PyGILState_Release(gil);
        }
        break;
    }
    usbeam_clear_error();
    free(b);
}

/* Buffers released while work queued on them may still run (py_device.h).  The list is
 * touched under pending_lock only; deleters and reference drops run outside it (they may
 * release other buffers). */
static pthread_mutex_t pending_lock = PTHREAD_MUTEX_INITIALIZER;
static usbeam_buffer *pending_head;

size_t usbeam_da_release_pending(int wait)
{
    usbeam_buffer *done = NULL;
    size_t left = 0;
    pthread_mutex_lock(&pending_lock);
    usbeam_buffer **link = &pending_head;
    while (*link) {
        usbeam_buffer *b = *link;
        int complete = 1;
        usbeam_status st;
        if (wait) {
            st = usbeam_event_wait_destroy(b->last_use);
            b->last_use = NULL;
        } else {
            st = usbeam_event_query(b->last_use, &complete);
        }
        /* an event that cannot be asked (a device fault is sticky) never answers: let go */
        if (st != USBEAM_OK) {
            complete = 1;
            usbeam_clear_error();
        }
        if (complete) {
            *link = b->next_pending;
            b->next_pending = done;
            done = b;
        } else {
            link = &b->next_pending;
            ++left;
        }
    }
    pthread_mutex_unlock(&pending_lock);
    while (done) {
        usbeam_buffer *next = done->next_pending;
        buffer_finalize(done);
        done = next;
    }
    return left;
}

/* Drop one reference; the last one frees the memory, without waiting on the host for the
 * kernels queued on it: a foreign owner must not reuse the memory (its pool would hand it out
 * while we still read it), so it is kept until they finish.  Any thread, without the GIL. */
void usbeam_da_buffer_release(usbeam_buffer *b)
{
    if (!b || __atomic_sub_fetch(&b->refs, 1, __ATOMIC_ACQ_REL) != 0) return;
    if (__atomic_load_n(&pending_head, __ATOMIC_ACQUIRE)) (void)usbeam_da_release_pending(0);
    if (b->kind == BUF_DEVICE_POOLED) {
        /* cudaFreeAsync after the last-use event; consumers of an export on the legacy stream too */
        void *event = b->last_use;
        b->last_use = NULL;
        if (usbeam_device_free_after(b->device, b->base, event, __atomic_load_n(&b->exported, __ATOMIC_ACQUIRE)) !=
            USBEAM_OK)
            usbeam_clear_error(); /* the device failed: leaking beats freeing memory in use */
        free(b);
        return;
    }
    int complete = 1;
    if (b->last_use && usbeam_event_query(b->last_use, &complete) != USBEAM_OK) {
        usbeam_clear_error(); /* the device cannot answer (a sticky fault): nothing will run */
        complete = 1;
    }
    if (!complete) {
        /* the next release, plan call or synchronize asks again */
        pthread_mutex_lock(&pending_lock);
        b->next_pending = pending_head;
        __atomic_store_n(&pending_head, b, __ATOMIC_RELEASE);
        pthread_mutex_unlock(&pending_lock);
        return;
    }
    buffer_finalize(b);
}

/* ---- allocation, streams and copies -------------------------------------------------- */

/* Stream argument of the array API: None -> legacy default (1); ints as given. */
int usbeam_da_parse_stream(PyObject *obj, const char *name, intptr_t *stream)
{
    if (obj == Py_None) {
        *stream = 1;
        return 0;
    }
    long long v = PyLong_AsLongLong(obj);
    if (v == -1 && PyErr_Occurred()) {
        PyErr_Format(PyExc_TypeError, "%s must be None or an integer CUDA stream handle", name);
        return -1;
    }
    if (v == 0) {
        PyErr_Format(PyExc_ValueError,
                     "%s=0 is ambiguous for CUDA (use 1 for the legacy default stream, 2 for the per-thread one)",
                     name);
        return -1;
    }
    *stream = (intptr_t)v;
    return 0;
}

/* Host copy: a new C-contiguous ndarray (or into out, exact shape and dtype). */
PyObject *usbeam_da_array_to_numpy(DeviceArrayObject *self, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"out", NULL};
    PyObject *out = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$O:to_numpy", keywords, &out)) return NULL;
    npy_intp dims[DEVICE_MAX_NDIM];
    for (int d = 0; d < self->ndim; ++d) dims[d] = (npy_intp)self->shape[d];
    if (out == Py_None) {
        out = PyArray_SimpleNew(self->ndim, dims, self->dtype->npy_type);
        if (!out) return NULL;
    } else {
        if (!PyArray_Check(out) || PyArray_NDIM((PyArrayObject *)out) != self->ndim ||
            !PyArray_CompareLists(PyArray_DIMS((PyArrayObject *)out), dims, self->ndim)) {
            PyErr_SetString(PyExc_ValueError, "out must be a numpy array of the DeviceArray's shape");
            return NULL;
        }
        if (!usbeam_py_array_data(out, "out", self->dtype->npy_type, array_size(self), 1)) return NULL;
        Py_INCREF(out);
    }
    void *dst = PyArray_DATA((PyArrayObject *)out);
    const size_t bytes = array_nbytes(self);
    usbeam_status st = USBEAM_OK;
    void *stream = (void *)self->stream;
    if (self->device_type != kDLCPU && usbeam_py_wait_stream(stream) < 0) { /* Ctrl-C while waiting */
        Py_DECREF(out);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    if (self->device_type == kDLCPU)
        memcpy(dst, array_data(self), bytes);
    else
        st = usbeam_copy_to_host(dst, array_data(self), bytes, stream);
    Py_END_ALLOW_THREADS
    if (st != USBEAM_OK) {
        Py_DECREF(out);
        return usbeam_py_raise(st);
    }
    return out;
}

/* Overwrite the contents from a host ndarray of the same shape and dtype (complete on return). */
PyObject *usbeam_da_array_copy_from_host(DeviceArrayObject *self, PyObject *src)
{
    if (self->readonly) {
        PyErr_SetString(PyExc_ValueError, "copy_from_host: the DeviceArray is read-only");
        return NULL;
    }
    if (!PyArray_Check(src)) {
        PyErr_Format(PyExc_TypeError, "copy_from_host: source must be a numpy.ndarray (got %s)", Py_TYPE(src)->tp_name);
        return NULL;
    }
    npy_intp dims[DEVICE_MAX_NDIM];
    for (int d = 0; d < self->ndim; ++d) dims[d] = (npy_intp)self->shape[d];
    if (PyArray_NDIM((PyArrayObject *)src) != self->ndim ||
        !PyArray_CompareLists(PyArray_DIMS((PyArrayObject *)src), dims, self->ndim)) {
        PyErr_SetString(PyExc_ValueError, "copy_from_host: source must have the DeviceArray's shape");
        return NULL;
    }
    const void *data = usbeam_py_array_data(src, "source", self->dtype->npy_type, array_size(self), 0);
    if (!data) return NULL;
    const size_t bytes = array_nbytes(self);
    usbeam_status st = USBEAM_OK;
    void *stream = (void *)self->stream;
    Py_BEGIN_ALLOW_THREADS
    if (self->device_type == kDLCPU)
        memcpy(array_data(self), data, bytes);
    else
        st = usbeam_copy_to_device(array_data(self), data, bytes, stream);
    Py_END_ALLOW_THREADS
    if (st != USBEAM_OK) return usbeam_py_raise(st);
    self->stream = 0; /* the copy waited for everything before it */
    Py_CLEAR(self->stream_owner);
    Py_RETURN_NONE;
}


/* ---- module functions ---------------------------------------------------------------- */

static PyObject *py_stream_wait(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *consumer_obj, *producer_obj;
    if (!PyArg_ParseTuple(args, "OO", &consumer_obj, &producer_obj)) return NULL;
    intptr_t consumer, producer;
    if (usbeam_da_parse_stream(consumer_obj, "consumer", &consumer) < 0 || usbeam_da_parse_stream(producer_obj, "producer", &producer) < 0)
        return NULL;
    usbeam_status st = usbeam_stream_wait((void *)consumer, (void *)producer);
    return usbeam_py_none_or_raise(st);
}

static PyObject *py_stream_synchronize(PyObject *self, PyObject *stream_obj)
{
    (void)self;
    intptr_t stream;
    if (usbeam_da_parse_stream(stream_obj, "stream", &stream) < 0) return NULL;
    if (usbeam_py_wait_stream((void *)stream) < 0) return NULL; /* Ctrl-C while waiting */
    usbeam_status st;
    Py_BEGIN_ALLOW_THREADS
    st = usbeam_stream_synchronize((void *)stream);
    if (st == USBEAM_OK) (void)usbeam_da_release_pending(0); /* what waited on that stream can go */
    Py_END_ALLOW_THREADS
    return usbeam_py_none_or_raise(st);
}

/* stream_query(stream) -> True when everything queued on the stream has finished (no wait). */
static PyObject *py_stream_query(PyObject *self, PyObject *stream_obj)
{
    (void)self;
    intptr_t stream;
    if (usbeam_da_parse_stream(stream_obj, "stream", &stream) < 0) return NULL;
    int idle = 1;
    usbeam_status st = usbeam_stream_query((void *)stream, &idle);
    if (st != USBEAM_OK) return usbeam_py_raise(st);
    return PyBool_FromLong(idle);
}

/* device_release_pending(wait=False) -> number of released buffers still parked (their
 * queued work unfinished); wait=True waits for all of them (interpreter exit). */
static PyObject *py_device_release_pending(PyObject *self, PyObject *args)
{
    (void)self;
    int wait = 0;
    if (!PyArg_ParseTuple(args, "|p", &wait)) return NULL;
    size_t left;
    Py_BEGIN_ALLOW_THREADS
    left = usbeam_da_release_pending(wait);
    Py_END_ALLOW_THREADS
    return PyLong_FromSize_t(left);
}

PyMethodDef usbeam_py_device_methods[] = {
    {"stream_wait", py_stream_wait, METH_VARARGS, "Make stream consumer wait for producer's queued work."},
    {"stream_synchronize", py_stream_synchronize, METH_O, "Wait on the host for a stream's queued work."},
    {"stream_query", py_stream_query, METH_O, "True when a stream's queued work has finished (no host wait)."},
    {"device_release_pending", py_device_release_pending, METH_VARARGS,
     "Release the buffers parked until their queued work finished: (wait=False) -> how many stay parked."},
    {NULL, NULL, 0, NULL},
};
