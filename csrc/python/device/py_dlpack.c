/*
 * py_dlpack.c - zero-copy exchange of usbeam.DeviceArray through DLPack 1.x: export
 * (DeviceArray.__dlpack__) and import (device_from_dlpack).  The type is in py_device_array.c.
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
 * Spec: DLPack 1.1 (device/dlpack.h); Python array API standard, "Data interchange";
 * Numba's CUDA array interface v3.
 */
#include "python/device/py_device.h"
#include "backend/cuda_seam.h"

#include <stdlib.h>
#include <string.h>

static const char VERSIONED_NAME[] = "dltensor_versioned";
static const char VERSIONED_USED[] = "used_dltensor_versioned";
static const char LEGACY_NAME[] = "dltensor";
static const char LEGACY_USED[] = "used_dltensor";

static void versioned_deleter(DLManagedTensorVersioned *self)
{
    usbeam_da_buffer_release(self->manager_ctx);
    free(self);
}

static void legacy_deleter(DLManagedTensor *self)
{
    usbeam_da_buffer_release(self->manager_ctx);
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
        __atomic_store_n(&a->buffer->exported, 1, __ATOMIC_RELEASE); /* read on any stream */
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
    __atomic_store_n(&a->buffer->exported, 1, __ATOMIC_RELEASE); /* read on any stream */
    PyObject *capsule = PyCapsule_New(m, LEGACY_NAME, legacy_capsule_destructor);
    if (!capsule) legacy_deleter(m);
    return capsule;
}

int usbeam_da_parse_device_tuple(PyObject *obj, const char *name, int *type, int *id)
{
    if (!PyArg_ParseTuple(obj, "ii", type, id)) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s must be a (device_type, device_id) tuple", name);
        return -1;
    }
    return 0;
}

PyObject *usbeam_py_array_dlpack(DeviceArrayObject *self, PyObject *args, PyObject *kwargs)
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
    if (dl_device != Py_None && usbeam_da_parse_device_tuple(dl_device, "dl_device", &target_type, &target_id) < 0)
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
        if (usbeam_da_parse_stream(stream_obj, "stream", &consumer) < 0) return NULL;
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
        DeviceArrayObject *copied = usbeam_da_array_copy_to(self, target_type, target_id);
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
    const dtype_entry *dt = usbeam_da_dtype_by_dl(t->dtype);
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
    int bad = usbeam_da_parse_device_tuple(dev, "__dlpack_device__()", &dev_type, &dev_id);
    Py_DECREF(dev);
    if (bad < 0) return NULL;
    const int cuda_memory = dev_type == kDLCUDA || dev_type == kDLCUDAManaged;
    if (cuda_memory && !usbeam_built_with_cuda()) {
        PyErr_Format(PyExc_TypeError, "%s is in CUDA memory but %s", name, usbeam_cuda_unavailable_reason());
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
        if (usbeam_da_parse_stream(stream_obj, "stream", &s) < 0) return NULL;
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
    usbeam_buffer *b = usbeam_da_buffer_new(versioned ? BUF_DLPACK_VERSIONED : BUF_DLPACK_LEGACY, tensor->data, managed);
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
    return (PyObject *)usbeam_da_array_new(b, (size_t)tensor->byte_offset, tensor->ndim, tensor->shape, dt,
                                 on_cuda ? kDLCUDA : kDLCPU, on_cuda ? tensor->device.device_id : 0,
                                 (flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0);
}

/* device_wrap(ptr, shape, dtype, readonly, owner, name) -> DeviceArray over CUDA memory at ptr
 * kept alive by a reference to owner (CUDA array interface import; Python parsed the dict). */
PyMethodDef usbeam_py_dlpack_methods[] = {
    {"device_from_dlpack", (PyCFunction)(void (*)(void))py_device_from_dlpack, METH_VARARGS | METH_KEYWORDS,
     "Zero-copy import of an object with __dlpack__: (obj, stream=None, name='array') -> DeviceArray."},
    {NULL, NULL, 0, NULL},
};
