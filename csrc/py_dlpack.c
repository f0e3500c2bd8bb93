/*
 * py_dlpack.c - usbeam.DeviceArray and zero-copy exchange (DLPack 1.x, CUDA array interface),
 * plus the Python side of CUDA plans (device buffers of execute, stream, stage timings).
 *
 * DeviceArray: an n-d, C-contiguous array in host memory (kDLCPU) or CUDA device memory
 * (kDLCUDA), shape in elements, one of usbeam's dtypes.  Its memory is a reference-counted
 * `buffer` shared by every view and every exported DLPack tensor, released by whoever drops
 * the last reference, on any thread, with or without the GIL (DLPack deleters may run
 * anywhere).  A buffer is one of: usbeam's own host allocation (256-byte aligned, as DLPack
 * recommends), usbeam's own cudaMalloc, or a foreign tensor imported through DLPack (its
 * deleter is called on release) or the CUDA array interface (a reference to the exporting
 * object, dropped under the GIL).
 *
 * Export: __dlpack__(stream=None, max_version=None, dl_device=None, copy=None) gives a
 * "dltensor_versioned" capsule (DLManagedTensorVersioned) when max_version >= (1, 0), the
 * legacy "dltensor" capsule otherwise; the tensor is compact (strides NULL), data is the
 * allocation base and byte_offset the view's offset.  A CUDA array makes the consumer's
 * stream wait (an event, no host wait) for the writes pending on the array's stream
 * (array API semantics: stream None or 1 = legacy default, 2 = per-thread default, a
 * handle otherwise, -1 = no synchronisation, 0 refused as ambiguous).  copy=True, or a
 * dl_device other than the array's, exports a copy flagged DLPACK_FLAG_BITMASK_IS_COPIED.
 * Import: device_from_dlpack(obj, stream) asks obj.__dlpack__(stream=..., max_version=(1, 0))
 * (falling back to the legacy call for pre-1.0 producers), checks version, device, dtype,
 * contiguity and byte_offset, and only then renames the capsule "used_..." and takes the
 * tensor; on any refusal the capsule stays unconsumed and its destructor frees the tensor.
 *
 * Spec: DLPack 1.1 (csrc/dlpack.h); Python array API standard, "Data interchange";
 * Numba's CUDA array interface v3.
 */
#include "py_common.h"

#include "dlpack.h"

#include <stdlib.h>
#include <string.h>

#define DEVICE_MAX_NDIM 32
#define HOST_ALIGNMENT 256

static const char VERSIONED_NAME[] = "dltensor_versioned";
static const char VERSIONED_USED[] = "used_dltensor_versioned";
static const char LEGACY_NAME[] = "dltensor";
static const char LEGACY_USED[] = "used_dltensor";
static const char EXEC_CAPSULE[] = "usbeam.cuda_exec";

/* ---- dtypes ------------------------------------------------------------------------- */

typedef struct {
    usbeam_dtype dtype;
    int npy_type;
    uint8_t dl_code, dl_bits;
    const char *typestr; /* CUDA array interface (little-endian hosts) */
} dtype_entry;

static const dtype_entry DTYPES[] = {
    {USBEAM_DTYPE_INT16, NPY_INT16, kDLInt, 16, "<i2"},
    {USBEAM_DTYPE_FLOAT32, NPY_FLOAT32, kDLFloat, 32, "<f4"},
    {USBEAM_DTYPE_COMPLEX64, NPY_COMPLEX64, kDLComplex, 64, "<c8"},
    {USBEAM_DTYPE_UINT8, NPY_UINT8, kDLUInt, 8, "|u1"},
    {USBEAM_DTYPE_FLOAT16, NPY_FLOAT16, kDLFloat, 16, "<f2"},
    {USBEAM_DTYPE_INT32, NPY_INT32, kDLInt, 32, "<i4"},
    {USBEAM_DTYPE_FLOAT64, NPY_FLOAT64, kDLFloat, 64, "<f8"},
};
#define N_DTYPES (sizeof DTYPES / sizeof DTYPES[0])
#define SUPPORTED_DTYPES "int16, float32, complex64, uint8, float16, int32 or float64"

static const dtype_entry *dtype_by_npy(int npy_type)
{
    for (size_t i = 0; i < N_DTYPES; ++i)
        if (DTYPES[i].npy_type == npy_type) return &DTYPES[i];
    return NULL;
}

static const dtype_entry *dtype_by_dl(DLDataType t)
{
    if (t.lanes != 1) return NULL;
    for (size_t i = 0; i < N_DTYPES; ++i)
        if (DTYPES[i].dl_code == t.code && DTYPES[i].dl_bits == t.bits) return &DTYPES[i];
    return NULL;
}

/* ---- shared buffers ------------------------------------------------------------------- */

typedef enum { BUF_HOST, BUF_DEVICE, BUF_DLPACK_LEGACY, BUF_DLPACK_VERSIONED, BUF_PYOBJECT } buffer_kind;

typedef struct {
    long refs;         /* atomic */
    buffer_kind kind;
    void *base;        /* allocation base (foreign: the tensor's data pointer) */
    void *foreign;     /* DLManagedTensor(Versioned) * or PyObject * */
    void *last_use;    /* CUDA event after the last queued kernel that reads/writes it, or NULL */
} usbeam_buffer;

static usbeam_buffer *buffer_new(buffer_kind kind, void *base, void *foreign)
{
    usbeam_buffer *b = calloc(1, sizeof *b);
    if (!b) return NULL;
    b->refs = 1;
    b->kind = kind;
    b->base = base;
    b->foreign = foreign;
    return b;
}

static void buffer_retain(usbeam_buffer *b) { __atomic_add_fetch(&b->refs, 1, __ATOMIC_RELAXED); }

static int interpreter_finalizing(void)
{
#if PY_VERSION_HEX >= 0x030D0000
    return Py_IsFinalizing();
#else
    return _Py_IsFinalizing();
#endif
}

/* Drop one reference; the last one frees the memory.  Safe on any thread without the GIL. */
static void buffer_release(usbeam_buffer *b)
{
    if (!b || __atomic_sub_fetch(&b->refs, 1, __ATOMIC_ACQ_REL) != 0) return;
    /* Kernels queued on the memory must finish before its owner may reuse it (a foreign pool
     * would otherwise hand it out while we still read it); cudaFree alone would be enough
     * for our own allocations, but not for foreign ones. */
    if (b->last_use) (void)usbeam_event_wait_destroy(b->last_use);
    switch (b->kind) {
    case BUF_HOST:
        free(b->base);
        break;
    case BUF_DEVICE:
        (void)usbeam_device_free(b->base);
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

/* ---- DeviceArray ------------------------------------------------------------------------ */

typedef struct {
    PyObject_HEAD
    usbeam_buffer *buffer;
    size_t offset;       /* bytes from buffer->base to the first element */
    int ndim;
    int64_t shape[DEVICE_MAX_NDIM];
    const dtype_entry *dtype;
    int device_type;     /* kDLCPU or kDLCUDA */
    int device_id;
    int readonly;
    uintptr_t stream;    /* stream with writes still pending (0: none; 1 = legacy default) */
} DeviceArrayObject;

static PyTypeObject DeviceArrayType;

static size_t array_size(const DeviceArrayObject *a)
{
    size_t n = 1;
    for (int d = 0; d < a->ndim; ++d) n *= (size_t)a->shape[d];
    return n;
}

static size_t array_nbytes(const DeviceArrayObject *a) { return array_size(a) * (size_t)a->dtype->dl_bits / 8; }

static char *array_data(const DeviceArrayObject *a) { return (char *)a->buffer->base + a->offset; }

/* A new array object taking over one reference to buffer (released on failure). */
static DeviceArrayObject *array_new(usbeam_buffer *buffer, size_t offset, int ndim, const int64_t *shape,
                                    const dtype_entry *dtype, int device_type, int device_id, int readonly)
{
    DeviceArrayObject *a = PyObject_New(DeviceArrayObject, &DeviceArrayType);
    if (!a) {
        buffer_release(buffer);
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
    return a;
}

static void array_dealloc(DeviceArrayObject *a)
{
    buffer_release(a->buffer);
    PyObject_Free(a);
}

/* Parse a shape (sequence of non-negative ints) into shape[]; returns ndim or -1. */
static int parse_shape(PyObject *seq, int64_t *shape, size_t item_bytes)
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

static void *host_alloc(size_t bytes)
{
    size_t rounded = (bytes + HOST_ALIGNMENT - 1) / HOST_ALIGNMENT * HOST_ALIGNMENT;
    return aligned_alloc(HOST_ALIGNMENT, rounded ? rounded : HOST_ALIGNMENT);
}

/* A fresh, uninitialised array; device_type kDLCPU or kDLCUDA. */
static DeviceArrayObject *array_empty(int ndim, const int64_t *shape, const dtype_entry *dtype, int device_type,
                                      int device_id)
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
        Py_BEGIN_ALLOW_THREADS
        st = usbeam_device_malloc(device_id, bytes, &base);
        Py_END_ALLOW_THREADS
        if (st != USBEAM_OK) return (DeviceArrayObject *)usbeam_py_raise(st);
        kind = BUF_DEVICE;
    }
    usbeam_buffer *b = buffer_new(kind, base, NULL);
    if (!b) {
        if (kind == BUF_HOST)
            free(base);
        else
            (void)usbeam_device_free(base);
        return (DeviceArrayObject *)PyErr_NoMemory();
    }
    return array_new(b, 0, ndim, shape, dtype, device_type, device_id, 0);
}

/* Stream argument of the array API: None -> legacy default (1); ints as given. */
static int parse_stream(PyObject *obj, const char *name, intptr_t *stream)
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

/* Copy src into a new array on (device_type, device_id); the copy is complete on return. */
static DeviceArrayObject *array_copy_to(DeviceArrayObject *src, int device_type, int device_id)
{
    DeviceArrayObject *dst = array_empty(src->ndim, src->shape, src->dtype, device_type, device_id);
    if (!dst) return NULL;
    const size_t bytes = array_nbytes(src);
    usbeam_status st = USBEAM_OK;
    void *stream = (void *)src->stream;
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

static void versioned_deleter(DLManagedTensorVersioned *self)
{
    buffer_release(self->manager_ctx);
    free(self);
}

static void legacy_deleter(DLManagedTensor *self)
{
    buffer_release(self->manager_ctx);
    free(self);
}

static void versioned_capsule_destructor(PyObject *capsule)
{
    if (!PyCapsule_IsValid(capsule, VERSIONED_NAME)) return; /* consumed ("used_...") */
    DLManagedTensorVersioned *m = PyCapsule_GetPointer(capsule, VERSIONED_NAME);
    if (m && m->deleter) m->deleter(m);
}

static void legacy_capsule_destructor(PyObject *capsule)
{
    if (!PyCapsule_IsValid(capsule, LEGACY_NAME)) return;
    DLManagedTensor *m = PyCapsule_GetPointer(capsule, LEGACY_NAME);
    if (m && m->deleter) m->deleter(m);
}

static void fill_tensor(const DeviceArrayObject *a, DLTensor *t, int64_t *shape)
{
    t->data = a->buffer->base;
    t->byte_offset = a->offset;
    t->device.device_type = (DLDeviceType)a->device_type;
    t->device.device_id = a->device_id;
    t->ndim = a->ndim;
    t->dtype.code = a->dtype->dl_code;
    t->dtype.bits = a->dtype->dl_bits;
    t->dtype.lanes = 1;
    for (int d = 0; d < a->ndim; ++d) shape[d] = a->shape[d];
    t->shape = shape;
    t->strides = NULL; /* compact, C order */
}

/* The capsule of a (versioned or legacy) managed tensor viewing a's memory. */
static PyObject *export_capsule(DeviceArrayObject *a, int versioned, int copied)
{
    if (versioned) {
        DLManagedTensorVersioned *m = calloc(1, sizeof *m + (size_t)(a->ndim ? a->ndim : 1) * sizeof(int64_t));
        if (!m) return PyErr_NoMemory();
        m->version.major = USBEAM_DLPACK_MAJOR_VERSION;
        m->version.minor = USBEAM_DLPACK_MINOR_VERSION;
        m->flags = (a->readonly ? DLPACK_FLAG_BITMASK_READ_ONLY : 0) | (copied ? DLPACK_FLAG_BITMASK_IS_COPIED : 0);
        fill_tensor(a, &m->dl_tensor, (int64_t *)(m + 1));
        m->manager_ctx = a->buffer;
        m->deleter = versioned_deleter;
        buffer_retain(a->buffer);
        PyObject *capsule = PyCapsule_New(m, VERSIONED_NAME, versioned_capsule_destructor);
        if (!capsule) versioned_deleter(m);
        return capsule;
    }
    DLManagedTensor *m = calloc(1, sizeof *m + (size_t)(a->ndim ? a->ndim : 1) * sizeof(int64_t));
    if (!m) return PyErr_NoMemory();
    fill_tensor(a, &m->dl_tensor, (int64_t *)(m + 1));
    m->manager_ctx = a->buffer;
    m->deleter = legacy_deleter;
    buffer_retain(a->buffer);
    PyObject *capsule = PyCapsule_New(m, LEGACY_NAME, legacy_capsule_destructor);
    if (!capsule) legacy_deleter(m);
    return capsule;
}

static int parse_device_tuple(PyObject *obj, const char *name, int *type, int *id)
{
    if (!PyArg_ParseTuple(obj, "ii", type, id)) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s must be a (device_type, device_id) tuple", name);
        return -1;
    }
    return 0;
}

static PyObject *array_dlpack(DeviceArrayObject *self, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"stream", "max_version", "dl_device", "copy", NULL};
    PyObject *stream_obj = Py_None, *max_version = Py_None, *dl_device = Py_None, *copy_obj = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$OOOO:__dlpack__", keywords, &stream_obj, &max_version,
                                     &dl_device, &copy_obj))
        return NULL;
    int versioned = 0;
    if (max_version != Py_None) {
        unsigned major = 0, minor = 0;
        if (!PyArg_ParseTuple(max_version, "II", &major, &minor)) {
            PyErr_Clear();
            PyErr_SetString(PyExc_TypeError, "max_version must be a (major, minor) tuple");
            return NULL;
        }
        versioned = major >= 1;
    }
    int copy = -1; /* None: copy only if needed */
    if (copy_obj != Py_None && (copy = PyObject_IsTrue(copy_obj)) < 0) return NULL;
    int target_type = self->device_type, target_id = self->device_id;
    if (dl_device != Py_None && parse_device_tuple(dl_device, "dl_device", &target_type, &target_id) < 0)
        return NULL;
    if (target_type != kDLCPU && target_type != kDLCUDA) {
        PyErr_Format(PyExc_BufferError, "dl_device: usbeam exports to kDLCPU or kDLCUDA only (got device type %d)",
                     target_type);
        return NULL;
    }
    const int same_device = target_type == self->device_type && target_id == self->device_id;
    if (!same_device && copy == 0) {
        PyErr_SetString(PyExc_BufferError, "dl_device differs from the array's device and copy=False");
        return NULL;
    }
    if (target_type == kDLCUDA && self->device_type == kDLCUDA && !same_device) {
        PyErr_SetString(PyExc_BufferError, "dl_device: copies between CUDA devices are not supported");
        return NULL;
    }
    if (self->readonly && !versioned) {
        PyErr_SetString(PyExc_BufferError,
                        "a read-only array cannot be exported as a legacy DLPack capsule (it has no read-only "
                        "flag); ask for max_version=(1, 0)");
        return NULL;
    }
    /* Where the consumer will read: the stream argument is about the exported tensor's device. */
    intptr_t consumer = 0;
    if (target_type == kDLCUDA) {
        if (parse_stream(stream_obj, "stream", &consumer) < 0) return NULL;
    } else if (stream_obj != Py_None) {
        /* array API: a CPU consumer passes None (-1, "no synchronisation", is harmless too) */
        long long v = PyLong_AsLongLong(stream_obj);
        if (v != -1 || PyErr_Occurred()) {
            PyErr_Clear();
            PyErr_SetString(PyExc_BufferError, "stream must be None for a CPU array");
            return NULL;
        }
    }
    if (!same_device || copy == 1) {
        DeviceArrayObject *copied = array_copy_to(self, target_type, target_id);
        if (!copied) return NULL;
        copied->readonly = 0;
        PyObject *capsule = export_capsule(copied, versioned, 1);
        Py_DECREF(copied);
        return capsule;
    }
    if (self->device_type == kDLCUDA && consumer != -1 && self->stream != 0 && (uintptr_t)consumer != self->stream) {
        usbeam_status st = usbeam_stream_wait((void *)consumer, (void *)self->stream);
        if (st != USBEAM_OK) return usbeam_py_raise(st);
    }
    return export_capsule(self, versioned, 0);
}

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

/* Host copy: a new C-contiguous ndarray (or into out, exact shape and dtype). */
static PyObject *array_to_numpy(DeviceArrayObject *self, PyObject *args, PyObject *kwargs)
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
static PyObject *array_copy_from_host(DeviceArrayObject *self, PyObject *src)
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
    Py_RETURN_NONE;
}

/* View with another shape of the same number of elements. */
static PyObject *array_reshape(DeviceArrayObject *self, PyObject *shape_obj)
{
    int64_t shape[DEVICE_MAX_NDIM];
    int ndim = parse_shape(shape_obj, shape, 1);
    if (ndim < 0) return NULL;
    size_t n = 1;
    for (int d = 0; d < ndim; ++d) n *= (size_t)shape[d];
    if (n != array_size(self)) {
        PyErr_Format(PyExc_ValueError, "reshape: %zu elements cannot take a shape of %zu", array_size(self), n);
        return NULL;
    }
    buffer_retain(self->buffer);
    DeviceArrayObject *v = array_new(self->buffer, self->offset, ndim, shape, self->dtype, self->device_type,
                                     self->device_id, self->readonly);
    if (v) v->stream = self->stream;
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
    DeviceArrayObject *v = array_new(self->buffer, self->offset + (size_t)start * row_bytes, ndim, shape, self->dtype,
                                     self->device_type, self->device_id, self->readonly);
    if (v) v->stream = self->stream;
    return (PyObject *)v;
}

/* Kernels queued on stream use this array: note the stream (pending writes) and an event so
 * the memory outlives them. */
static PyObject *array_mark_used(DeviceArrayObject *self, PyObject *stream_obj)
{
    if (self->device_type != kDLCUDA) Py_RETURN_NONE;
    intptr_t stream;
    if (parse_stream(stream_obj, "stream", &stream) < 0) return NULL;
    usbeam_status st = usbeam_event_record(&self->buffer->last_use, (void *)stream);
    if (st != USBEAM_OK) return usbeam_py_raise(st);
    self->stream = (uintptr_t)stream;
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

static PyMethodDef array_methods[] = {
    {"__dlpack__", (PyCFunction)(void (*)(void))array_dlpack, METH_VARARGS | METH_KEYWORDS,
     "DLPack capsule: __dlpack__(*, stream=None, max_version=None, dl_device=None, copy=None)."},
    {"__dlpack_device__", (PyCFunction)array_dlpack_device, METH_NOARGS, "(device_type, device_id) as DLPack."},
    {"to_numpy", (PyCFunction)(void (*)(void))array_to_numpy, METH_VARARGS | METH_KEYWORDS,
     "Explicit host copy (through pinned staging buffers for CUDA memory): to_numpy(*, out=None)."},
    {"copy_from_host", (PyCFunction)array_copy_from_host, METH_O,
     "Overwrite the contents from a host ndarray of the same shape and dtype."},
    {"reshape", (PyCFunction)array_reshape, METH_O, "View with another shape (same number of elements)."},
    {"_mark_used", (PyCFunction)array_mark_used, METH_O, "Record that work queued on a stream uses this array."},
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

static PyTypeObject DeviceArrayType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "usbeam.DeviceArray",
    .tp_basicsize = sizeof(DeviceArrayObject),
    .tp_dealloc = (destructor)array_dealloc,
    .tp_repr = (reprfunc)array_repr,
    .tp_as_mapping = &array_mapping,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A C-contiguous array in host or CUDA device memory, exchanged without copies through DLPack "
              "and the CUDA array interface.  Create with usbeam.device.empty / from_numpy / asarray.",
    .tp_methods = array_methods,
    .tp_getset = array_getset,
};

/* ---- import ----------------------------------------------------------------------------- */

/* Check a DLTensor against what usbeam accepts; raises naming `name`. */
static const dtype_entry *check_tensor(const DLTensor *t, const char *name)
{
    if (t->device.device_type != kDLCPU && t->device.device_type != kDLCUDA &&
        t->device.device_type != kDLCUDAHost && t->device.device_type != kDLCUDAManaged) {
        PyErr_Format(PyExc_TypeError, "%s: DLPack device type %d is not supported (CPU or CUDA memory only)", name,
                     (int)t->device.device_type);
        return NULL;
    }
    const dtype_entry *dt = dtype_by_dl(t->dtype);
    if (!dt) {
        PyErr_Format(PyExc_TypeError,
                     "%s: DLPack dtype (code %d, %d bits, %d lanes) is not supported; usbeam takes " SUPPORTED_DTYPES,
                     name, (int)t->dtype.code, (int)t->dtype.bits, (int)t->dtype.lanes);
        return NULL;
    }
    if (t->ndim < 0 || t->ndim > DEVICE_MAX_NDIM) {
        PyErr_Format(PyExc_ValueError, "%s: %d dimensions (at most %d)", name, (int)t->ndim, DEVICE_MAX_NDIM);
        return NULL;
    }
    if (t->ndim > 0 && !t->shape) {
        PyErr_Format(PyExc_ValueError, "%s: DLPack tensor has a NULL shape", name);
        return NULL;
    }
    size_t total = (size_t)dt->dl_bits / 8;
    int empty = 0;
    for (int d = 0; d < t->ndim; ++d) {
        if (t->shape[d] < 0) {
            PyErr_Format(PyExc_ValueError, "%s: negative extent %lld on axis %d", name, (long long)t->shape[d], d);
            return NULL;
        }
        if (t->shape[d] == 0) empty = 1;
        if (usbeam_mul_size(total, (size_t)t->shape[d], &total) != 0) {
            PyErr_Format(PyExc_ValueError, "%s: size overflows", name);
            return NULL;
        }
    }
    if (t->strides && !empty) {
        int64_t expected = 1;
        for (int d = t->ndim - 1; d >= 0; --d) {
            if (t->shape[d] != 1 && t->strides[d] != expected) {
                PyErr_Format(PyExc_ValueError,
                             "%s must be C-contiguous: axis %d has stride %lld elements, a compact array has %lld "
                             "(pass a contiguous copy, e.g. numpy.ascontiguousarray)",
                             name, d, (long long)t->strides[d], (long long)expected);
                return NULL;
            }
            expected *= t->shape[d];
        }
    }
    if (!t->data && !empty) {
        PyErr_Format(PyExc_ValueError, "%s: DLPack tensor has a NULL data pointer", name);
        return NULL;
    }
    /* element alignment: the kernels load whole elements */
    uintptr_t first = (uintptr_t)t->data + (uintptr_t)t->byte_offset;
    size_t align = dt->dtype == USBEAM_DTYPE_COMPLEX64 ? 8 : (size_t)dt->dl_bits / 8;
    if (!empty && first % align != 0) {
        PyErr_Format(PyExc_ValueError, "%s: data is not aligned to its %zu-byte elements", name, align);
        return NULL;
    }
    return dt;
}

/* device_from_dlpack(obj, stream=None, name='array') -> DeviceArray viewing obj's memory. */
static PyObject *py_device_from_dlpack(PyObject *self, PyObject *args, PyObject *kwargs)
{
    (void)self;
    static char *keywords[] = {"obj", "stream", "name", NULL};
    PyObject *obj, *stream_obj = Py_None;
    const char *name = "array";
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|Os", keywords, &obj, &stream_obj, &name)) return NULL;
    PyObject *dev = PyObject_CallMethod(obj, "__dlpack_device__", NULL);
    if (!dev) return NULL;
    int dev_type, dev_id;
    int bad = parse_device_tuple(dev, "__dlpack_device__()", &dev_type, &dev_id);
    Py_DECREF(dev);
    if (bad < 0) return NULL;
    const int cuda_memory = dev_type == kDLCUDA || dev_type == kDLCUDAManaged;
    if (cuda_memory && !usbeam_built_with_cuda()) {
        PyErr_Format(PyExc_TypeError, "%s is in CUDA memory but usbeam was built without CUDA", name);
        return NULL;
    }
    if (!cuda_memory && dev_type != kDLCPU && dev_type != kDLCUDAHost) {
        PyErr_Format(PyExc_TypeError, "%s: DLPack device type %d is not supported (CPU or CUDA memory only)", name,
                     dev_type);
        return NULL;
    }
    /* The consumer's stream: only CUDA producers get one (array API: None for the CPU). */
    PyObject *stream_arg = Py_None;
    if (cuda_memory) {
        intptr_t s;
        if (parse_stream(stream_obj, "stream", &s) < 0) return NULL;
        stream_arg = PyLong_FromSsize_t((Py_ssize_t)s);
        if (!stream_arg) return NULL;
    } else {
        Py_INCREF(stream_arg);
    }
    PyObject *method = PyObject_GetAttrString(obj, "__dlpack__");
    if (!method) {
        Py_DECREF(stream_arg);
        return NULL;
    }
    PyObject *empty = PyTuple_New(0);
    PyObject *kw = Py_BuildValue("{s:O,s:(ii)}", "stream", stream_arg, "max_version", 1, 0);
    PyObject *capsule = (empty && kw) ? PyObject_Call(method, empty, kw) : NULL;
    if (!capsule && PyErr_ExceptionMatches(PyExc_TypeError)) {
        /* a pre-1.0 producer does not know max_version: ask for the legacy capsule */
        PyErr_Clear();
        Py_XDECREF(kw);
        kw = Py_BuildValue("{s:O}", "stream", stream_arg);
        capsule = kw ? PyObject_Call(method, empty, kw) : NULL;
    }
    Py_XDECREF(kw);
    Py_XDECREF(empty);
    Py_DECREF(method);
    Py_DECREF(stream_arg);
    if (!capsule) return NULL;

    const DLTensor *tensor;
    void *managed;
    uint64_t flags = 0;
    int versioned;
    if (PyCapsule_IsValid(capsule, VERSIONED_NAME)) {
        DLManagedTensorVersioned *m = PyCapsule_GetPointer(capsule, VERSIONED_NAME);
        if (m->version.major != USBEAM_DLPACK_MAJOR_VERSION) {
            PyErr_Format(PyExc_BufferError, "%s: DLPack version %u.%u is not supported (major version %d expected)",
                         name, m->version.major, m->version.minor, USBEAM_DLPACK_MAJOR_VERSION);
            Py_DECREF(capsule); /* unconsumed: its destructor calls the deleter */
            return NULL;
        }
        tensor = &m->dl_tensor;
        flags = m->flags;
        managed = m;
        versioned = 1;
    } else if (PyCapsule_IsValid(capsule, LEGACY_NAME)) {
        DLManagedTensor *m = PyCapsule_GetPointer(capsule, LEGACY_NAME);
        tensor = &m->dl_tensor;
        managed = m;
        versioned = 0;
    } else {
        PyErr_Format(PyExc_TypeError, "%s.__dlpack__() returned %s, not an unconsumed DLPack capsule", name,
                     Py_TYPE(capsule)->tp_name);
        Py_DECREF(capsule);
        return NULL;
    }
    const dtype_entry *dt = check_tensor(tensor, name);
    if (!dt) {
        Py_DECREF(capsule);
        return NULL;
    }
    const int tensor_type = tensor->device.device_type;
    const int on_cuda = tensor_type == kDLCUDA || tensor_type == kDLCUDAManaged;
    usbeam_buffer *b = buffer_new(versioned ? BUF_DLPACK_VERSIONED : BUF_DLPACK_LEGACY, tensor->data, managed);
    if (!b) {
        Py_DECREF(capsule);
        return PyErr_NoMemory();
    }
    /* From here the tensor is ours: the capsule must not free it again. */
    if (PyCapsule_SetName(capsule, versioned ? VERSIONED_USED : LEGACY_USED) < 0) {
        free(b);
        Py_DECREF(capsule);
        return NULL;
    }
    Py_DECREF(capsule);
    return (PyObject *)array_new(b, (size_t)tensor->byte_offset, tensor->ndim, tensor->shape, dt,
                                 on_cuda ? kDLCUDA : kDLCPU, on_cuda ? tensor->device.device_id : 0,
                                 (flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0);
}

/* device_wrap(ptr, shape, dtype, readonly, owner, name) -> DeviceArray over CUDA memory at ptr
 * kept alive by a reference to owner (CUDA array interface import; Python parsed the dict). */
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
    const dtype_entry *dt = dtype_by_npy(descr->type_num);
    Py_DECREF(descr);
    if (!dt) {
        PyErr_Format(PyExc_TypeError, "%s: dtype is not supported; usbeam takes " SUPPORTED_DTYPES, name);
        return NULL;
    }
    int64_t shape[DEVICE_MAX_NDIM];
    int ndim = parse_shape(shape_obj, shape, (size_t)dt->dl_bits / 8);
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
    usbeam_buffer *b = buffer_new(BUF_PYOBJECT, (void *)(uintptr_t)ptr, owner);
    if (!b) return PyErr_NoMemory();
    Py_INCREF(owner);
    return (PyObject *)array_new(b, 0, ndim, shape, dt, kDLCUDA, device, readonly);
}

/* device_empty(shape, dtype, device_type, device_id) */
static PyObject *py_device_empty(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *shape_obj;
    PyArray_Descr *descr;
    int device_type, device_id;
    if (!PyArg_ParseTuple(args, "OO&ii", &shape_obj, PyArray_DescrConverter, &descr, &device_type, &device_id))
        return NULL;
    const dtype_entry *dt = dtype_by_npy(descr->type_num);
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
    int ndim = parse_shape(shape_obj, shape, (size_t)dt->dl_bits / 8);
    if (ndim < 0) return NULL;
    return (PyObject *)array_empty(ndim, shape, dt, device_type, device_type == kDLCPU ? 0 : device_id);
}

static PyObject *py_stream_wait(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *consumer_obj, *producer_obj;
    if (!PyArg_ParseTuple(args, "OO", &consumer_obj, &producer_obj)) return NULL;
    intptr_t consumer, producer;
    if (parse_stream(consumer_obj, "consumer", &consumer) < 0 || parse_stream(producer_obj, "producer", &producer) < 0)
        return NULL;
    usbeam_status st = usbeam_stream_wait((void *)consumer, (void *)producer);
    if (st != USBEAM_OK) return usbeam_py_raise(st);
    Py_RETURN_NONE;
}

static PyObject *py_stream_synchronize(PyObject *self, PyObject *stream_obj)
{
    (void)self;
    intptr_t stream;
    if (parse_stream(stream_obj, "stream", &stream) < 0) return NULL;
    usbeam_status st;
    Py_BEGIN_ALLOW_THREADS
    st = usbeam_stream_synchronize((void *)stream);
    Py_END_ALLOW_THREADS
    if (st != USBEAM_OK) return usbeam_py_raise(st);
    Py_RETURN_NONE;
}

/* ---- CUDA plans --------------------------------------------------------------------------- */

void *usbeam_py_plan_buffer(PyObject *obj, const char *name, int npy_type, size_t n_elements, int writable,
                            usbeam_cuda_exec *exec)
{
    if (!exec) return usbeam_py_array_data(obj, name, npy_type, n_elements, writable);
    if (!PyObject_TypeCheck(obj, &DeviceArrayType)) {
        PyErr_Format(PyExc_TypeError, "%s must be a usbeam.DeviceArray for a CUDA plan (got %s)", name,
                     Py_TYPE(obj)->tp_name);
        return NULL;
    }
    DeviceArrayObject *a = (DeviceArrayObject *)obj;
    if (a->device_type != kDLCUDA || a->device_id != usbeam_cuda_exec_device(exec)) {
        PyErr_Format(PyExc_ValueError, "%s must be in the memory of CUDA device %d, the plan's", name,
                     usbeam_cuda_exec_device(exec));
        return NULL;
    }
    if (a->dtype->npy_type != npy_type) {
        const dtype_entry *want = dtype_by_npy(npy_type);
        PyErr_Format(PyExc_TypeError, "%s must have dtype %s", name, want ? want->typestr : "?");
        return NULL;
    }
    if (array_size(a) != n_elements) {
        PyErr_Format(PyExc_ValueError, "%s must hold %zu elements (got %zu)", name, n_elements, array_size(a));
        return NULL;
    }
    if (writable && a->readonly) {
        PyErr_Format(PyExc_ValueError, "%s is read-only", name);
        return NULL;
    }
    return array_data(a);
}

static void exec_capsule_destroy(PyObject *capsule)
{
    Py_XDECREF((PyObject *)PyCapsule_GetContext(capsule));
}

PyObject *usbeam_py_cuda_exec_capsule(usbeam_cuda_exec *exec, PyObject *owner)
{
    if (!exec) Py_RETURN_NONE;
    PyObject *capsule = PyCapsule_New(exec, EXEC_CAPSULE, exec_capsule_destroy);
    if (!capsule) return NULL;
    Py_INCREF(owner); /* the plan outlives every handle on its CUDA state */
    if (PyCapsule_SetContext(capsule, owner) < 0) {
        Py_DECREF(owner);
        Py_DECREF(capsule);
        return NULL;
    }
    return capsule;
}

static usbeam_cuda_exec *exec_from(PyObject *capsule)
{
    return usbeam_py_plan_from_capsule(capsule, EXEC_CAPSULE, "exec");
}

static PyObject *py_cuda_exec_info(PyObject *self, PyObject *capsule)
{
    (void)self;
    usbeam_cuda_exec *e = exec_from(capsule);
    if (!e) return NULL;
    return Py_BuildValue("{s:n,s:i,s:n}", "stream", (Py_ssize_t)(uintptr_t)usbeam_cuda_exec_stream(e), "device",
                         usbeam_cuda_exec_device(e), "device_bytes", (Py_ssize_t)usbeam_cuda_exec_device_bytes(e));
}

static PyObject *py_cuda_exec_set_stream(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *capsule, *stream_obj;
    if (!PyArg_ParseTuple(args, "OO", &capsule, &stream_obj)) return NULL;
    usbeam_cuda_exec *e = exec_from(capsule);
    if (!e) return NULL;
    intptr_t stream = 0; /* None: the plan's own stream */
    if (stream_obj != Py_None && parse_stream(stream_obj, "stream", &stream) < 0) return NULL;
    if (stream == -1) {
        PyErr_SetString(PyExc_ValueError, "stream: -1 is not a stream");
        return NULL;
    }
    /* cudaStreamLegacy is 0x1 and cudaStreamPerThread 0x2, so the array API's 1 and 2 are
     * already the handles CUDA expects. */
    usbeam_status st = usbeam_cuda_exec_set_stream(e, (void *)stream);
    if (st != USBEAM_OK) return usbeam_py_raise(st);
    Py_RETURN_NONE;
}

static PyObject *py_cuda_exec_timings(PyObject *self, PyObject *capsule)
{
    (void)self;
    usbeam_cuda_exec *e = exec_from(capsule);
    if (!e) return NULL;
    const char *names[USBEAM_CUDA_MAX_STAGES];
    float ms[USBEAM_CUDA_MAX_STAGES];
    size_t n = 0;
    usbeam_status st;
    Py_BEGIN_ALLOW_THREADS
    st = usbeam_cuda_exec_timings(e, USBEAM_CUDA_MAX_STAGES, names, ms, &n);
    Py_END_ALLOW_THREADS
    if (st != USBEAM_OK) return usbeam_py_raise(st);
    PyObject *d = PyDict_New();
    if (!d) return NULL;
    for (size_t i = 0; i < n; ++i) {
        PyObject *v = PyFloat_FromDouble(ms[i] * 1e-3);
        if (!v || PyDict_SetItemString(d, names[i], v) < 0) {
            Py_XDECREF(v);
            Py_DECREF(d);
            return NULL;
        }
        Py_DECREF(v);
    }
    return d;
}

PyMethodDef usbeam_py_device_methods[] = {
    {"device_from_dlpack", (PyCFunction)(void (*)(void))py_device_from_dlpack, METH_VARARGS | METH_KEYWORDS,
     "Zero-copy import of an object with __dlpack__: (obj, stream=None, name='array') -> DeviceArray."},
    {"device_wrap", py_device_wrap, METH_VARARGS,
     "DeviceArray over CUDA memory: (ptr, shape, dtype, readonly, owner, name)."},
    {"device_empty", py_device_empty, METH_VARARGS, "Uninitialised DeviceArray: (shape, dtype, device_type, device_id)."},
    {"stream_wait", py_stream_wait, METH_VARARGS, "Make stream consumer wait for producer's queued work."},
    {"stream_synchronize", py_stream_synchronize, METH_O, "Wait on the host for a stream's queued work."},
    {"cuda_exec_info", py_cuda_exec_info, METH_O, "{stream, device, device_bytes} of a CUDA plan."},
    {"cuda_exec_set_stream", py_cuda_exec_set_stream, METH_VARARGS,
     "Run a CUDA plan on a caller's stream (None: its own)."},
    {"cuda_exec_timings", py_cuda_exec_timings, METH_O, "{stage: seconds} of a CUDA plan's last execute."},
    {NULL, NULL, 0, NULL},
};

int usbeam_py_device_init(PyObject *module)
{
    if (PyType_Ready(&DeviceArrayType) < 0) return -1;
    return PyModule_AddObjectRef(module, "DeviceArray", (PyObject *)&DeviceArrayType);
}
