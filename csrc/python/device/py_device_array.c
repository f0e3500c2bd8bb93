/*
 * py_device_array.c - the usbeam.DeviceArray type: its dtypes, array objects over a shared
 * buffer, views (reshape, a[i], a[start:stop]: same buffer, a byte offset), the
 * __cuda_array_interface__ and the other attributes, and the record of the stream that last
 * used an array (_mark_used).  Memory, copies and the module's device/stream functions are in
 * py_device_memory.c; DLPack exchange in py_dlpack.c (py_device.h says what they share).
 *
 * Views share the buffer and the pending-stream record of their base, so a consumer of a view
 * orders itself after the writes to the base.  CUDA array interface v3 (Numba documentation):
 * shape, typestr, data (ptr, readonly), version, strides (None: C-contiguous), stream (the
 * producer's, None when nothing is pending).
 */
#include "python/device/py_device.h"

#include <string.h>

/* ---- dtypes -------------------------------------------------------------------------- */

static const dtype_entry DTYPES[] = {
    {USBEAM_DTYPE_INT16, NPY_INT16, kDLInt, 16, "<i2"},
    {USBEAM_DTYPE_FLOAT32, NPY_FLOAT32, kDLFloat, 32, "<f4"},
    {USBEAM_DTYPE_COMPLEX64, NPY_COMPLEX64, kDLComplex, 64, "<c8"},
    {USBEAM_DTYPE_UINT8, NPY_UINT8, kDLUInt, 8, "|u1"},
    {USBEAM_DTYPE_FLOAT16, NPY_FLOAT16, kDLFloat, 16, "<f2"},
    {USBEAM_DTYPE_INT32, NPY_INT32, kDLInt, 32, "<i4"},
    {USBEAM_DTYPE_FLOAT64, NPY_FLOAT64, kDLFloat, 64, "<f8"},
    /* masks (PyTorch's torch.bool, DLPack kDLBool): one byte, 0 or 1, the bytes of a uint8 mask */
    {USBEAM_DTYPE_UINT8, NPY_BOOL, kDLBool, 8, "|b1"},
};
#define N_DTYPES (sizeof DTYPES / sizeof DTYPES[0])

const dtype_entry *usbeam_da_dtype_by_npy(int npy_type)
{
    for (size_t i = 0; i < N_DTYPES; ++i)
        if (DTYPES[i].npy_type == npy_type) return &DTYPES[i];
    return NULL;
}

const dtype_entry *usbeam_da_dtype_by_dl(DLDataType t)
{
    if (t.lanes != 1) return NULL;
    for (size_t i = 0; i < N_DTYPES; ++i)
        if (DTYPES[i].dl_code == t.code && DTYPES[i].dl_bits == t.bits) return &DTYPES[i];
    return NULL;
}

/* ---- array objects ------------------------------------------------------------------- */

/* A new array object taking over one reference to buffer (released on failure). */
DeviceArrayObject *usbeam_da_array_new(usbeam_buffer *buffer, size_t offset, int ndim, const int64_t *shape,
                                    const dtype_entry *dtype, int device_type, int device_id, int readonly)
{
    DeviceArrayObject *a = PyObject_New(DeviceArrayObject, &usbeam_DeviceArrayType);
    if (!a) {
        usbeam_da_buffer_release(buffer);
        return NULL;
    }
    a->buffer = buffer;
    a->offset = offset;
    a->ndim = ndim;
    memset(a->shape, 0, sizeof a->shape);
    for (int d = 0; d < ndim; ++d) a->shape[d] = shape[d];
    a->dtype = dtype;
    a->device_type = device_type;
    a->device_id = device_id;
    a->readonly = readonly;
    a->stream = 0;
    a->stream_owner = NULL;
    return a;
}

static void array_dealloc(DeviceArrayObject *a)
{
    usbeam_da_buffer_release(a->buffer); /* queues or parks the release first ... */
    Py_XDECREF(a->stream_owner);          /* ... then the producer's stream may go (a plan's
                                             destroy finishes the work queued on its stream) */
    PyObject_Free(a);
}

/* Parse a shape (sequence of non-negative ints) into shape[]; returns ndim or -1. */
int usbeam_da_parse_shape(PyObject *seq, int64_t *shape, size_t item_bytes)
{
    PyObject *fast = PySequence_Fast(seq, "shape must be a sequence of integers");
    if (!fast) return -1;
    Py_ssize_t ndim = PySequence_Fast_GET_SIZE(fast);
    if (ndim > DEVICE_MAX_NDIM) {
        Py_DECREF(fast);
        PyErr_Format(PyExc_ValueError, "shape: at most %d dimensions (got %zd)", DEVICE_MAX_NDIM, ndim);
        return -1;
    }
    size_t total = item_bytes;
    for (Py_ssize_t d = 0; d < ndim; ++d) {
        long long v = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(fast, d));
        if (v == -1 && PyErr_Occurred()) {
            Py_DECREF(fast);
            return -1;
        }
        if (v < 0) {
            Py_DECREF(fast);
            PyErr_Format(PyExc_ValueError, "shape: dimension %zd is negative (%lld)", d, v);
            return -1;
        }
        if (usbeam_mul_size(total, (size_t)v, &total) != 0 || total > USBEAM_MAX_ALLOCATION) {
            Py_DECREF(fast);
            PyErr_SetString(PyExc_MemoryError, "shape: the array is too large");
            return -1;
        }
        shape[d] = v;
    }
    Py_DECREF(fast);
    return (int)ndim;
}

/* ---- attributes ---------------------------------------------------------------------- */

static PyObject *array_dlpack_device(DeviceArrayObject *self, PyObject *noargs)
{
    (void)noargs;
    return Py_BuildValue("(ii)", self->device_type, self->device_id);
}

static PyObject *array_shape_tuple(const DeviceArrayObject *a)
{
    PyObject *t = PyTuple_New(a->ndim);
    if (!t) return NULL;
    for (int d = 0; d < a->ndim; ++d) {
        PyObject *v = PyLong_FromLongLong(a->shape[d]);
        if (!v) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, d, v);
    }
    return t;
}

static PyObject *array_get_cai(DeviceArrayObject *self, void *closure)
{
    (void)closure;
    if (self->device_type != kDLCUDA) {
        PyErr_SetString(PyExc_AttributeError, "__cuda_array_interface__: this DeviceArray is in host memory");
        return NULL;
    }
    PyObject *shape = array_shape_tuple(self);
    if (!shape) return NULL;
    PyObject *stream = self->stream ? PyLong_FromSize_t((size_t)self->stream) : Py_NewRef(Py_None);
    if (!stream) {
        Py_DECREF(shape);
        return NULL;
    }
    /* the consumer may read it on any stream: a release must also wait for the legacy stream */
    __atomic_store_n(&self->buffer->exported, 1, __ATOMIC_RELEASE);
    /* empty arrays: data pointer 0, as the interface asks */
    size_t ptr = array_size(self) ? (size_t)array_data(self) : 0;
    return Py_BuildValue("{s:N,s:s,s:(NO),s:i,s:O,s:N}", "shape", shape, "typestr", self->dtype->typestr, "data",
                         PyLong_FromSize_t(ptr), self->readonly ? Py_True : Py_False, "version", 3, "strides",
                         Py_None, "stream", stream);
}

static PyObject *array_get_shape(DeviceArrayObject *self, void *closure)
{
    (void)closure;
    return array_shape_tuple(self);
}

static PyObject *array_get_dtype(DeviceArrayObject *self, void *closure)
{
    (void)closure;
    return (PyObject *)PyArray_DescrFromType(self->dtype->npy_type);
}

static PyObject *array_get_ndim(DeviceArrayObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromLong(self->ndim);
}

static PyObject *array_get_size(DeviceArrayObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromSize_t(array_size(self));
}

static PyObject *array_get_nbytes(DeviceArrayObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromSize_t(array_nbytes(self));
}

static PyObject *array_get_ptr(DeviceArrayObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromSize_t((size_t)array_data(self));
}

static PyObject *array_get_device(DeviceArrayObject *self, void *closure)
{
    (void)closure;
    if (self->device_type == kDLCPU) return PyUnicode_FromString("cpu");
    return PyUnicode_FromFormat("cuda:%d", self->device_id);
}

static PyObject *array_get_readonly(DeviceArrayObject *self, void *closure)
{
    (void)closure;
    return PyBool_FromLong(self->readonly);
}

static PyObject *array_get_stream(DeviceArrayObject *self, void *closure)
{
    (void)closure;
    if (!self->stream) Py_RETURN_NONE;
    return PyLong_FromSize_t((size_t)self->stream);
}

/* ---- views and the type -------------------------------------------------------------- */

/* View with another shape of the same number of elements. */
static PyObject *array_reshape(DeviceArrayObject *self, PyObject *shape_obj)
{
    int64_t shape[DEVICE_MAX_NDIM];
    int ndim = usbeam_da_parse_shape(shape_obj, shape, 1);
    if (ndim < 0) return NULL;
    size_t n = 1;
    for (int d = 0; d < ndim; ++d) n *= (size_t)shape[d];
    if (n != array_size(self)) {
        PyErr_Format(PyExc_ValueError, "reshape: %zu elements cannot take a shape of %zu", array_size(self), n);
        return NULL;
    }
    buffer_retain(self->buffer);
    DeviceArrayObject *v = usbeam_da_array_new(self->buffer, self->offset, ndim, shape, self->dtype, self->device_type,
                                     self->device_id, self->readonly);
    if (v) {
        v->stream = self->stream;
        v->stream_owner = Py_XNewRef(self->stream_owner);
    }
    return (PyObject *)v;
}

/* a[i] or a[start:stop] along the first axis: a contiguous view (byte offset into the buffer). */
static PyObject *array_subscript(DeviceArrayObject *self, PyObject *key)
{
    if (self->ndim == 0) {
        PyErr_SetString(PyExc_IndexError, "a 0-d DeviceArray cannot be indexed");
        return NULL;
    }
    const Py_ssize_t rows = (Py_ssize_t)self->shape[0];
    const size_t row_bytes = self->shape[0] ? array_nbytes(self) / (size_t)self->shape[0] : 0;
    Py_ssize_t start, stop, step, count;
    int drop_axis = 0;
    if (PySlice_Check(key)) {
        if (PySlice_Unpack(key, &start, &stop, &step) < 0) return NULL;
        count = PySlice_AdjustIndices(rows, &start, &stop, step);
        if (step != 1) {
            PyErr_SetString(PyExc_IndexError, "DeviceArray views must be contiguous: slice step must be 1");
            return NULL;
        }
    } else {
        Py_ssize_t i = PyNumber_AsSsize_t(key, PyExc_IndexError);
        if (i == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            PyErr_SetString(PyExc_IndexError, "DeviceArray supports an integer or a step-1 slice on the first axis");
            return NULL;
        }
        if (i < 0) i += rows;
        if (i < 0 || i >= rows) {
            PyErr_Format(PyExc_IndexError, "index out of range for axis 0 of size %zd", rows);
            return NULL;
        }
        start = i;
        count = 1;
        drop_axis = 1;
    }
    int64_t shape[DEVICE_MAX_NDIM];
    int ndim = 0;
    if (!drop_axis) shape[ndim++] = count;
    for (int d = 1; d < self->ndim; ++d) shape[ndim++] = self->shape[d];
    buffer_retain(self->buffer);
    DeviceArrayObject *v = usbeam_da_array_new(self->buffer, self->offset + (size_t)start * row_bytes, ndim, shape, self->dtype,
                                     self->device_type, self->device_id, self->readonly);
    if (v) {
        v->stream = self->stream;
        v->stream_owner = Py_XNewRef(self->stream_owner);
    }
    return (PyObject *)v;
}

/* Kernels queued on stream use this array: note the stream (pending writes) and an event so
 * the memory outlives them.  owner (optional) is the object that keeps the stream alive, the
 * producing plan: a later consumer or copy uses the stream, which a plan destroyed in the
 * meantime would have destroyed with it.  While the stream is captured into a graph no event
 * is recorded (usbeam_event_record says why): the uses run at each replay, and the graph's
 * owner keeps the memory alive and marks it used after each launch. */
static PyObject *array_mark_used(DeviceArrayObject *self, PyObject *args)
{
    PyObject *stream_obj, *owner = Py_None;
    if (!PyArg_ParseTuple(args, "O|O:_mark_used", &stream_obj, &owner)) return NULL;
    if (self->device_type != kDLCUDA) Py_RETURN_NONE;
    intptr_t stream;
    if (usbeam_da_parse_stream(stream_obj, "stream", &stream) < 0) return NULL;
    int capturing = 0;
    usbeam_status st = usbeam_stream_capturing((void *)stream, &capturing);
    if (st == USBEAM_OK && !capturing) st = usbeam_event_record(&self->buffer->last_use, (void *)stream);
    if (st != USBEAM_OK) return usbeam_py_raise(st);
    self->stream = (uintptr_t)stream;
    Py_XSETREF(self->stream_owner, owner == Py_None ? NULL : Py_NewRef(owner));
    /* every plan call passes here: let go of the parked buffers whose work has finished (not
     * while capturing a graph, where nothing may be queried) */
    if (!capturing) (void)usbeam_da_release_pending(0);
    Py_RETURN_NONE;
}

static PyObject *array_repr(DeviceArrayObject *self)
{
    PyObject *shape = array_shape_tuple(self);
    if (!shape) return NULL;
    PyObject *device = array_get_device(self, NULL);
    PyArray_Descr *descr = PyArray_DescrFromType(self->dtype->npy_type);
    PyObject *r = NULL;
    if (device && descr)
        r = PyUnicode_FromFormat("DeviceArray(shape=%R, dtype=%S, device='%U', ptr=%p%s)", shape, (PyObject *)descr,
                                 device, (void *)array_data(self), self->readonly ? ", readonly" : "");
    Py_XDECREF(descr);
    Py_XDECREF(device);
    Py_DECREF(shape);
    return r;
}

/* ---- construction: new arrays over fresh or foreign memory ------------------------------ */

/* Host arrays are aligned for any vector load and for the pinned staging copies' chunks. */
#define HOST_ALIGNMENT 256

static void *host_alloc(size_t bytes)
{
    size_t rounded = (bytes + HOST_ALIGNMENT - 1) / HOST_ALIGNMENT * HOST_ALIGNMENT;
    return aligned_alloc(HOST_ALIGNMENT, rounded ? rounded : HOST_ALIGNMENT);
}

/* A fresh, uninitialised array; device_type kDLCPU or kDLCUDA. */
DeviceArrayObject *usbeam_da_array_empty(int ndim, const int64_t *shape, const dtype_entry *dtype, int device_type,
                                      int device_id, void *stream)
{
    size_t bytes = (size_t)dtype->dl_bits / 8;
    for (int d = 0; d < ndim; ++d) bytes *= (size_t)shape[d];
    void *base = NULL;
    buffer_kind kind;
    if (device_type == kDLCPU) {
        base = host_alloc(bytes);
        if (!base) return (DeviceArrayObject *)PyErr_NoMemory();
        kind = BUF_HOST;
    } else {
        usbeam_status st;
        int pooled = 0;
        Py_BEGIN_ALLOW_THREADS
        st = usbeam_device_alloc(device_id, bytes, stream, &base, &pooled);
        Py_END_ALLOW_THREADS
        if (st != USBEAM_OK) return (DeviceArrayObject *)usbeam_py_raise(st);
        kind = pooled ? BUF_DEVICE_POOLED : BUF_DEVICE;
    }
    usbeam_buffer *b = usbeam_da_buffer_new(kind, base, NULL);
    if (!b) {
        if (kind == BUF_HOST)
            free(base);
        else if (kind == BUF_DEVICE_POOLED)
            (void)usbeam_device_free_after(device_id, base, NULL, 0);
        else
            (void)usbeam_device_free(base);
        return (DeviceArrayObject *)PyErr_NoMemory();
    }
    b->device = device_id;
    if (kind == BUF_DEVICE_POOLED && stream) {
        /* a free, on another stream, must come after the allocation even if nothing uses it */
        usbeam_status st = usbeam_event_record(&b->last_use, stream);
        if (st != USBEAM_OK) {
            usbeam_da_buffer_release(b);
            return (DeviceArrayObject *)usbeam_py_raise(st);
        }
    }
    DeviceArrayObject *a = usbeam_da_array_new(b, 0, ndim, shape, dtype, device_type, device_id, 0);
    if (a && stream && kind == BUF_DEVICE_POOLED)
        a->stream = (uintptr_t)stream; /* the allocation is pending there: consumers order after it */
    return a;
}

/* Copy src into a new array on (device_type, device_id); the copy is complete on return. */
DeviceArrayObject *usbeam_da_array_copy_to(DeviceArrayObject *src, int device_type, int device_id)
{
    DeviceArrayObject *dst = usbeam_da_array_empty(src->ndim, src->shape, src->dtype, device_type, device_id, NULL);
    if (!dst) return NULL;
    const size_t bytes = array_nbytes(src);
    usbeam_status st = USBEAM_OK;
    void *stream = (void *)src->stream;
    if (src->device_type != kDLCPU && usbeam_py_wait_stream(stream) < 0) { /* Ctrl-C while waiting */
        Py_DECREF(dst);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    if (src->device_type == kDLCPU && device_type == kDLCPU)
        memcpy(array_data(dst), array_data(src), bytes);
    else if (src->device_type == kDLCPU)
        st = usbeam_copy_to_device(array_data(dst), array_data(src), bytes, NULL);
    else if (device_type == kDLCPU)
        st = usbeam_copy_to_host(array_data(dst), array_data(src), bytes, stream);
    else {
        st = usbeam_copy_device(array_data(dst), array_data(src), bytes, stream);
        if (st == USBEAM_OK) st = usbeam_stream_synchronize(stream);
    }
    Py_END_ALLOW_THREADS
    if (st != USBEAM_OK) {
        Py_DECREF(dst);
        return (DeviceArrayObject *)usbeam_py_raise(st);
    }
    return dst;
}

static PyObject *py_device_wrap(PyObject *self, PyObject *args)
{
    (void)self;
    unsigned long long ptr;
    PyObject *shape_obj, *owner;
    PyArray_Descr *descr;
    int readonly;
    const char *name;
    if (!PyArg_ParseTuple(args, "KOO&pOs", &ptr, &shape_obj, PyArray_DescrConverter, &descr, &readonly, &owner, &name))
        return NULL;
    const dtype_entry *dt = usbeam_da_dtype_by_npy(descr->type_num);
    Py_DECREF(descr);
    if (!dt) {
        PyErr_Format(PyExc_TypeError, "%s: dtype is not supported; usbeam takes " SUPPORTED_DTYPES, name);
        return NULL;
    }
    int64_t shape[DEVICE_MAX_NDIM];
    int ndim = usbeam_da_parse_shape(shape_obj, shape, (size_t)dt->dl_bits / 8);
    if (ndim < 0) return NULL;
    size_t n = 1;
    for (int d = 0; d < ndim; ++d) n *= (size_t)shape[d];
    int device = 0;
    if (n) {
        if (!ptr) {
            PyErr_Format(PyExc_ValueError, "%s: NULL data pointer", name);
            return NULL;
        }
        usbeam_status st = usbeam_pointer_device((const void *)(uintptr_t)ptr, &device);
        if (st != USBEAM_OK) return usbeam_py_raise(st);
    }
    usbeam_buffer *b = usbeam_da_buffer_new(BUF_PYOBJECT, (void *)(uintptr_t)ptr, owner);
    if (!b) return PyErr_NoMemory();
    Py_INCREF(owner);
    return (PyObject *)usbeam_da_array_new(b, 0, ndim, shape, dt, kDLCUDA, device, readonly);
}

/* device_empty(shape, dtype, device_type, device_id, stream=None, owner=None): with a stream,
 * the memory is allocated in its order (no host wait at all) and owner keeps it alive. */
static PyObject *py_device_empty(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *shape_obj, *stream_obj = Py_None, *owner = Py_None;
    PyArray_Descr *descr;
    int device_type, device_id;
    if (!PyArg_ParseTuple(args, "OO&ii|OO", &shape_obj, PyArray_DescrConverter, &descr, &device_type, &device_id,
                          &stream_obj, &owner))
        return NULL;
    intptr_t stream = 0;
    if (stream_obj != Py_None && usbeam_da_parse_stream(stream_obj, "stream", &stream) < 0) {
        Py_DECREF(descr);
        return NULL;
    }
    const dtype_entry *dt = usbeam_da_dtype_by_npy(descr->type_num);
    Py_DECREF(descr);
    if (!dt) {
        PyErr_SetString(PyExc_TypeError, "dtype is not supported; usbeam takes " SUPPORTED_DTYPES);
        return NULL;
    }
    if (device_type != kDLCPU && device_type != kDLCUDA) {
        PyErr_Format(PyExc_ValueError, "device: type %d (kDLCPU = 1 or kDLCUDA = 2)", device_type);
        return NULL;
    }
    int64_t shape[DEVICE_MAX_NDIM];
    int ndim = usbeam_da_parse_shape(shape_obj, shape, (size_t)dt->dl_bits / 8);
    if (ndim < 0) return NULL;
    const int cuda = device_type == kDLCUDA;
    DeviceArrayObject *a = usbeam_da_array_empty(ndim, shape, dt, device_type, cuda ? device_id : 0,
                                                 cuda ? (void *)stream : NULL);
    if (a && a->stream && owner != Py_None) a->stream_owner = Py_NewRef(owner);
    return (PyObject *)a;
}

static PyMethodDef array_methods[] = {
    {"__dlpack_device__", (PyCFunction)array_dlpack_device, METH_NOARGS, "(device_type, device_id) as DLPack."},
    {"to_numpy", (PyCFunction)(void (*)(void))usbeam_da_array_to_numpy, METH_VARARGS | METH_KEYWORDS,
     "Explicit host copy (through pinned staging buffers for CUDA memory): to_numpy(*, out=None)."},
    {"copy_from_host", (PyCFunction)usbeam_da_array_copy_from_host, METH_O,
     "Overwrite the contents from a host ndarray of the same shape and dtype."},
    {"reshape", (PyCFunction)array_reshape, METH_O, "View with another shape (same number of elements)."},
    {"_mark_used", (PyCFunction)array_mark_used, METH_VARARGS, "Record that work queued on a stream uses this array."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef array_getset[] = {
    {"__cuda_array_interface__", (getter)array_get_cai, NULL, "CUDA array interface v3 (CUDA arrays only).", NULL},
    {"shape", (getter)array_get_shape, NULL, "Shape, elements.", NULL},
    {"dtype", (getter)array_get_dtype, NULL, "numpy.dtype of the elements.", NULL},
    {"ndim", (getter)array_get_ndim, NULL, "Number of dimensions.", NULL},
    {"size", (getter)array_get_size, NULL, "Number of elements.", NULL},
    {"nbytes", (getter)array_get_nbytes, NULL, "Bytes of data.", NULL},
    {"ptr", (getter)array_get_ptr, NULL, "Address of the first element (host or device).", NULL},
    {"device", (getter)array_get_device, NULL, "'cpu' or 'cuda:N'.", NULL},
    {"readonly", (getter)array_get_readonly, NULL, "True when the memory must not be written.", NULL},
    {"stream", (getter)array_get_stream, NULL, "CUDA stream with writes still pending, or None.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMappingMethods array_mapping = {NULL, (binaryfunc)array_subscript, NULL};

PyTypeObject usbeam_DeviceArrayType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "usbeam.DeviceArray",
    .tp_basicsize = sizeof(DeviceArrayObject),
    .tp_dealloc = (destructor)array_dealloc,
    .tp_repr = (reprfunc)array_repr,
    .tp_as_mapping = &array_mapping,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A C-contiguous array in host or CUDA device memory, exchanged without copies through DLPack "
              "and the CUDA array interface.  Create with usbeam.device.empty / from_numpy / asarray.",
    /* .tp_methods: set by usbeam_py_device_init */
    .tp_getset = array_getset,
};

/* Module functions that make arrays (the memory-level ones are in py_device_memory.c). */
PyMethodDef usbeam_py_device_array_methods[] = {
    {"device_wrap", py_device_wrap, METH_VARARGS,
     "DeviceArray over CUDA memory: (ptr, shape, dtype, readonly, owner, name)."},
    {"device_empty", py_device_empty, METH_VARARGS,
     "Uninitialised DeviceArray: (shape, dtype, device_type, device_id, stream=None, owner=None)."},
    {NULL, NULL, 0, NULL},
};

/* The type's methods are this file's plus those the protocol layers above it contribute
 * (DLPack export: py_dlpack.c), handed in by the module init: the type never calls up into
 * the files that build on it, so the device binding has no dependency loop. */
#define MAX_ARRAY_METHODS 16

int usbeam_py_device_init(PyObject *module, const PyMethodDef *protocol_methods)
{
    static PyMethodDef methods[MAX_ARRAY_METHODS];
    size_t n = 0;
    for (const PyMethodDef *m = array_methods; m->ml_name; ++m) methods[n++] = *m;
    for (const PyMethodDef *m = protocol_methods; m && m->ml_name; ++m) {
        if (n + 1 >= MAX_ARRAY_METHODS) {
            PyErr_SetString(PyExc_SystemError, "DeviceArray: too many methods");
            return -1;
        }
        methods[n++] = *m;
    }
    methods[n] = (PyMethodDef){NULL, NULL, 0, NULL};
    usbeam_DeviceArrayType.tp_methods = methods;
    if (PyType_Ready(&usbeam_DeviceArrayType) < 0) return -1;
    if (PyModule_AddObjectRef(module, "DeviceArray", (PyObject *)&usbeam_DeviceArrayType) < 0) return -1;
    /* At exit, wait for the work on parked buffers and release them while Python still runs
     * (their owners' references and deleters need it). */
    PyObject *release = PyObject_GetAttrString(module, "device_release_pending");
    PyObject *atexit = release ? PyImport_ImportModule("atexit") : NULL;
    PyObject *r = atexit ? PyObject_CallMethod(atexit, "register", "OO", release, Py_True) : NULL;
    Py_XDECREF(r);
    Py_XDECREF(atexit);
    Py_XDECREF(release);
    return r ? 0 : -1;
}
