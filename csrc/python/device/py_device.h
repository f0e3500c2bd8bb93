/*
 * py_device.h - what the DeviceArray sources share (private to the extension):
 * py_device_array.c (the type, views, attributes), py_device_memory.c (buffers, allocation,
 * copies, stream functions), py_dlpack.c (DLPack export and import) and py_cuda.c (a plan's
 * CUDA state, graphs); py_plan.c reads DeviceArrays as a CUDA plan's buffers.
 *
 * A DeviceArray is an n-d, C-contiguous array in host memory (kDLCPU) or CUDA device memory
 * (kDLCUDA), shape in elements, one of usbeam's dtypes.  Its memory is a reference-counted
 * usbeam_buffer shared by every view and every exported DLPack tensor, released by whoever
 * drops the last reference, on any thread, with or without the GIL (DLPack deleters may run
 * anywhere).
 */
#ifndef USBEAM_PY_DEVICE_H
#define USBEAM_PY_DEVICE_H

#include "python/py_common.h"

#include "python/device/dlpack.h"

#define DEVICE_MAX_NDIM 32
#define SUPPORTED_DTYPES "int16, float32, complex64, uint8, float16, int32, float64 or bool"

typedef struct {
    usbeam_dtype dtype;
    int npy_type;
    uint8_t dl_code, dl_bits;
    const char *typestr; /* CUDA array interface (little-endian hosts) */
} dtype_entry;

/* Kinds of memory behind a buffer: usbeam's own host allocation (256-byte aligned, as DLPack
 * recommends), stream-ordered device memory (usbeam_device_alloc; BUF_DEVICE: cudaMalloc on a
 * device without memory pools), or a foreign tensor imported through DLPack (its deleter is
 * called on release) or the CUDA array interface (a reference to the exporting object,
 * dropped under the GIL).
 *
 * Release never waits on the host for queued work: pooled memory is freed in stream order
 * after the last-use event (cudaFreeAsync); any other buffer with a last-use event whose work
 * may still be queued is parked on a pending list and released (deleter, reference, cudaFree)
 * once cudaEventQuery says the work is done, checked at later releases and plan calls, after
 * stream_synchronize and at interpreter exit (usbeam_da_release_pending). */
typedef enum { BUF_HOST, BUF_DEVICE, BUF_DEVICE_POOLED, BUF_DLPACK_LEGACY, BUF_DLPACK_VERSIONED, BUF_PYOBJECT } buffer_kind;

typedef struct usbeam_buffer {
    long refs;         /* atomic */
    buffer_kind kind;
    void *base;        /* allocation base (foreign: the tensor's data pointer) */
    void *foreign;     /* DLManagedTensor(Versioned) * or PyObject * */
    void *last_use;    /* CUDA event after the last queued kernel that reads/writes it, or NULL */
    int device;        /* CUDA device of device memory */
    int exported;      /* atomic: handed out through DLPack or the CUDA array interface */
    struct usbeam_buffer *next_pending; /* pending-release list link */
} usbeam_buffer;

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
    PyObject *stream_owner; /* keeps that stream alive (the producing plan), or NULL */
} DeviceArrayObject;

extern PyTypeObject usbeam_DeviceArrayType;

static inline size_t array_size(const DeviceArrayObject *a)
{
    size_t n = 1;
    for (int d = 0; d < a->ndim; ++d) n *= (size_t)a->shape[d];
    return n;
}

static inline size_t array_nbytes(const DeviceArrayObject *a) { return array_size(a) * (size_t)a->dtype->dl_bits / 8; }

static inline char *array_data(const DeviceArrayObject *a) { return (char *)a->buffer->base + a->offset; }

static inline void buffer_retain(usbeam_buffer *b) { __atomic_add_fetch(&b->refs, 1, __ATOMIC_RELAXED); }

/* py_device_array.c */
const dtype_entry *usbeam_da_dtype_by_npy(int npy_type);
const dtype_entry *usbeam_da_dtype_by_dl(DLDataType t);
/* A new array object taking over one reference to buffer (released on failure). */
DeviceArrayObject *usbeam_da_array_new(usbeam_buffer *buffer, size_t offset, int ndim, const int64_t *shape,
                                       const dtype_entry *dtype, int device_type, int device_id, int readonly);
/* Parse a shape (sequence of non-negative ints) into shape[]; returns ndim or -1. */
int usbeam_da_parse_shape(PyObject *seq, int64_t *shape, size_t item_bytes);

/* py_device_memory.c */
usbeam_buffer *usbeam_da_buffer_new(buffer_kind kind, void *base, void *foreign);
/* Drop one reference; the last one frees the memory.  Safe on any thread without the GIL. */
void usbeam_da_buffer_release(usbeam_buffer *b);
/* A fresh, uninitialised array; device_type kDLCPU or kDLCUDA.  stream (CUDA, not NULL): the
 * memory is allocated in that stream's order and the array names it as pending (the caller
 * keeps the stream alive: stream_owner); NULL: usable on any stream at once. */
DeviceArrayObject *usbeam_da_array_empty(int ndim, const int64_t *shape, const dtype_entry *dtype, int device_type,
                                         int device_id, void *stream);
/* Release the parked buffers whose work has finished (wait: wait for all of them); returns
 * how many stay parked.  Any thread, with or without the GIL. */
size_t usbeam_da_release_pending(int wait);
/* Copy src into a new array on (device_type, device_id); the copy is complete on return. */
DeviceArrayObject *usbeam_da_array_copy_to(DeviceArrayObject *src, int device_type, int device_id);
/* DeviceArray.to_numpy(*, out=None) and DeviceArray.copy_from_host(src): host copies. */
PyObject *usbeam_da_array_to_numpy(DeviceArrayObject *self, PyObject *args, PyObject *kwargs);
PyObject *usbeam_da_array_copy_from_host(DeviceArrayObject *self, PyObject *src);
/* Stream argument of the array API: None -> legacy default (1); other ints as given; 0 refused. */
int usbeam_da_parse_stream(PyObject *obj, const char *name, intptr_t *stream);

/* py_cuda.c: a capsule on a plan's CUDA state that keeps owner (the plan's capsule) alive;
 * None for NULL (a CPU plan). */
PyObject *usbeam_py_cuda_exec_capsule(usbeam_cuda_exec *exec, PyObject *owner);

/* py_dlpack.c: DeviceArray.__dlpack__, and the (device_type, device_id) of a dl_device */
PyObject *usbeam_py_array_dlpack(DeviceArrayObject *self, PyObject *args, PyObject *kwargs);
int usbeam_da_parse_device_tuple(PyObject *obj, const char *name, int *type, int *id);

#endif
