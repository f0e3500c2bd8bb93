/*
 * py_live.c - Python bindings of live acquisition: the channel-mapping copy
 * (acquire/gather.c), the server side of the shared-memory region (shm/shm_server.c) and the
 * CUDA slot ring (cuda/runtime/slot_ring.cu), used by usbeam.live and usbeam.serve.  All
 * three are owned by capsules as py_plan.h says; the calls that wait or copy release the GIL.
 *   live_gather_plan(n_rows, n_channels, element_channel, acquisition_row, n_samples, dtype)
 *   live_gather(plan, raw, out) -> s  raw: 2-D (rows, channels), any strides; out C-contiguous;
 *                                     returns the seconds the copy itself took
 *   shm_server_create(name, slots, results, slot_bytes, result_bytes, policy, write_timeout_ms,
 *                     replace_stale) -> server
 *   shm_server_next_frame(server, timeout_ms) -> None | (slot, frame_id, generation, push_ns, bytes view)
 *   shm_server_release(server, slot); shm_server_post(server, frame_id, status, image, push_ns, message)
 *   shm_server_params(server, generation) -> (latest generation, text of `generation` | None)
 *                     None for generation 0; ValueError when that generation is gone from the ring
 *   shm_server_counters(server) -> dict; shm_server_stop(server); shm_now_ns()
 * The CUDA slot ring of a live session (usbeam.live.cuda_session):
 *   live_cuda_ring_create(device, slots, slot_bytes) -> ring
 *   live_cuda_ring_host_slot(ring, k) -> uint8 view of pinned slot k (waits for its last upload)
 *   live_cuda_ring_upload(ring, k, bytes); live_cuda_ring_acquire(ring, k) -> (device_ptr, stream)
 *   live_cuda_ring_release(ring, k); live_cuda_ring_seconds(ring, k) -> (upload_s, compute_s)
 *   live_cuda_ring_done(ring, k) -> whether k's released work has finished (never waits)
 *   live_cuda_ring_synchronize(ring); live_cuda_ring_count() -> rings alive in the process
 * Frame views returned by next_frame keep the server capsule (and the mapping) alive; so do
 * the pinned views of a ring's slots.
 */
#include "python/py_plan.h"
#include "shm/shm_server.h"

/* The channel-mapping copy reads its tables only: calls on one plan may overlap. */
USBEAM_PY_HOST_PLAN_TYPE(live_gather, USBEAM_PY_PLAN_REENTRANT);

/* The server and the ring are owned like plans, without the binding's lock: the server locks
 * its region itself, and a ring's session (usbeam.live.cuda_session) orders its slot calls. */
static void server_destroy(void *server) { usbeam_shm_server_destroy(server); }
static const usbeam_py_plan_type server_type = {"usbeam.shm_server", "server", server_destroy, NULL,
                                                USBEAM_PY_PLAN_REENTRANT};

static void ring_destroy(void *ring) { usbeam_live_cuda_ring_destroy(ring); }
static const usbeam_py_plan_type ring_type = {"usbeam.live_cuda_ring", "ring", ring_destroy, NULL,
                                              USBEAM_PY_PLAN_REENTRANT};

/* A 1-D uint8 view of bytes owned by `owner` (a capsule), which the view keeps alive. */
static PyObject *bytes_view(void *data, size_t bytes, int writable, PyObject *owner)
{
    npy_intp n = (npy_intp)bytes;
    PyObject *view = PyArray_New(&PyArray_Type, 1, &n, NPY_UINT8, NULL, data, 0, writable ? NPY_ARRAY_CARRAY : 0,
                                 NULL);
    if (!view) return NULL;
    Py_INCREF(owner);
    if (PyArray_SetBaseObject((PyArrayObject *)view, owner) < 0) {
        Py_DECREF(view);
        return NULL;
    }
    return view;
}

/* ---- channel-mapping copy --------------------------------------------------------- */

static PyObject *py_live_gather_plan(PyObject *self, PyObject *args, PyObject *kwargs)
{
    (void)self;
    static char *keywords[] = {"n_rows", "n_channels", "element_channel", "acquisition_row", "n_samples",
                               "dtype", NULL};
    Py_ssize_t n_rows, n_channels, n_samples;
    PyObject *channel_obj, *row_obj;
    const char *dtype_name = "int16";
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "nnOOn|s", keywords, &n_rows, &n_channels, &channel_obj,
                                     &row_obj, &n_samples, &dtype_name))
        return NULL;
    if (n_rows <= 0 || n_channels <= 0 || n_samples <= 0) {
        PyErr_SetString(PyExc_ValueError, "n_rows, n_channels and n_samples must be > 0");
        return NULL;
    }
    if (!PyArray_Check(channel_obj) || !PyArray_Check(row_obj)) {
        PyErr_SetString(PyExc_TypeError, "element_channel and acquisition_row must be numpy arrays");
        return NULL;
    }
    Py_ssize_t n_elements = PyArray_SIZE((PyArrayObject *)channel_obj);
    Py_ssize_t n_acq = PyArray_SIZE((PyArrayObject *)row_obj);
    const int32_t *channels = usbeam_py_array_data(channel_obj, "element_channel", NPY_INT32, (size_t)n_elements, 0);
    if (!channels) return NULL;
    const int64_t *rows = usbeam_py_array_data(row_obj, "acquisition_row", NPY_INT64, (size_t)n_acq, 0);
    if (!rows) return NULL;
    usbeam_live_gather_params p = {0};
    int npy_type;
    static const char *const dtypes[] = {"int16", "float32", "float64", NULL};
    if (usbeam_py_dtype(dtype_name, dtypes, &p.dtype, &npy_type) < 0) {
        PyErr_Format(PyExc_TypeError, "dtype must be 'int16', 'float32' or 'float64' (got '%s')", dtype_name);
        return NULL;
    }
    p.n_rows = (size_t)n_rows;
    p.n_channels = (size_t)n_channels;
    p.n_acquisitions = (size_t)n_acq;
    p.n_elements = (size_t)n_elements;
    p.n_samples = (size_t)n_samples;
    p.element_channel = channels; /* copied by the plan */
    p.acquisition_row = rows;
    usbeam_py_plan *h = usbeam_py_plan_new(&live_gather_plan_type);
    if (!h) return NULL;
    h->npy_in = h->npy_out = npy_type;
    h->n_outer = p.n_rows;
    h->n_in = p.n_rows * p.n_channels;
    h->n_out = p.n_acquisitions * p.n_elements * p.n_samples;
    usbeam_live_gather_plan *plan = NULL;
    usbeam_status st = usbeam_live_gather_plan_create(&p, &plan);
    return usbeam_py_plan_wrap(h, st, plan);
}

static PyObject *py_live_gather(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *capsule, *raw_obj, *out_obj;
    if (!PyArg_ParseTuple(args, "OOO", &capsule, &raw_obj, &out_obj)) return NULL;
    usbeam_py_plan *h = usbeam_py_plan_from(capsule, &live_gather_plan_type);
    if (!h) return NULL;
    if (!PyArray_Check(raw_obj)) {
        PyErr_Format(PyExc_TypeError, "frame must be a numpy.ndarray (got %s)", Py_TYPE(raw_obj)->tp_name);
        return NULL;
    }
    PyArrayObject *raw = (PyArrayObject *)raw_obj;
    if (PyArray_TYPE(raw) != h->npy_in) {
        PyErr_SetString(PyExc_TypeError, "frame has the wrong dtype for this channel map");
        return NULL;
    }
    const size_t rows = h->n_outer, channels = h->n_in / h->n_outer; /* n_rows >= 1 */
    if (PyArray_NDIM(raw) != 2 || (size_t)PyArray_DIM(raw, 0) != rows || (size_t)PyArray_DIM(raw, 1) != channels) {
        PyErr_Format(PyExc_ValueError, "frame must have shape (%zu, %zu) (rows, channels)", rows, channels);
        return NULL;
    }
    npy_intp item = PyArray_ITEMSIZE(raw);
    npy_intp rs = PyArray_STRIDE(raw, 0), cs = PyArray_STRIDE(raw, 1);
    if (!PyArray_ISALIGNED(raw) || rs % item != 0 || cs % item != 0 || PyArray_ISBYTESWAPPED(raw)) {
        PyErr_SetString(PyExc_ValueError, "frame must be aligned, in native byte order, with whole-element strides");
        return NULL;
    }
    void *out = usbeam_py_array_data(out_obj, "out", h->npy_out, h->n_out, 1);
    if (!out) return NULL;
    const void *in = PyArray_DATA(raw);
    usbeam_py_plan_call call = usbeam_py_plan_enter(h, NULL);
    int64_t t0 = usbeam_shm_now_ns();
    usbeam_status st = usbeam_live_gather_execute(h->plan, in, (ptrdiff_t)(rs / item), (ptrdiff_t)(cs / item), out);
    int64_t t1 = usbeam_shm_now_ns();
    usbeam_py_plan_leave(&call);
    if (st != USBEAM_OK) return usbeam_py_raise(st);
    /* the copy's own duration, without the wait for the GIL afterwards (the stats'
     * "upload" bandwidth, as CUDA events would time a host-to-device copy) */
    return PyFloat_FromDouble((double)(t1 - t0) * 1e-9);
}

/* ---- shared-memory server ------------------------------------------------------- */

static usbeam_shm_server *server_from(PyObject *capsule)
{
    usbeam_py_plan *h = usbeam_py_plan_from(capsule, &server_type);
    return h ? h->plan : NULL;
}

static PyObject *py_shm_server_create(PyObject *self, PyObject *args, PyObject *kwargs)
{
    (void)self;
    static char *keywords[] = {"name", "slots", "results", "slot_bytes", "result_bytes", "policy",
                               "write_timeout_ms", "replace_stale", NULL};
    const char *name;
    unsigned int slots = 3, results = 8, policy = 0, write_timeout_ms = 1000;
    unsigned long long slot_bytes = 0, result_bytes = 0;
    int replace_stale = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "sIIKK|IIp", keywords, &name, &slots, &results, &slot_bytes,
                                     &result_bytes, &policy, &write_timeout_ms, &replace_stale))
        return NULL;
    usbeam_shm_server_config cfg = {name, slots, results, slot_bytes, result_bytes, policy, write_timeout_ms,
                                    replace_stale};
    usbeam_py_plan *h = usbeam_py_plan_new(&server_type);
    if (!h) return NULL;
    usbeam_shm_server *s = NULL;
    usbeam_status st = usbeam_shm_server_create(&cfg, &s);
    return usbeam_py_plan_wrap(h, st, s);
}

static PyObject *py_shm_server_next_frame(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *capsule;
    int timeout_ms = 0;
    if (!PyArg_ParseTuple(args, "Oi", &capsule, &timeout_ms)) return NULL;
    usbeam_shm_server *s = server_from(capsule);
    if (!s) return NULL;
    usbeam_shm_frame frame;
    usbeam_status st;
    Py_BEGIN_ALLOW_THREADS
    st = usbeam_shm_server_next_frame(s, timeout_ms, &frame);
    Py_END_ALLOW_THREADS
    if (st != USBEAM_OK) return usbeam_py_raise(st);
    if (!frame.data) Py_RETURN_NONE;
    PyObject *view = bytes_view((void *)frame.data, frame.bytes, 0, capsule);
    if (!view) return NULL;
    return Py_BuildValue("(IKKLN)", frame.slot, (unsigned long long)frame.frame_id,
                         (unsigned long long)frame.param_generation, (long long)frame.push_ns, view);
}

static PyObject *py_shm_server_release(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *capsule;
    unsigned int slot;
    if (!PyArg_ParseTuple(args, "OI", &capsule, &slot)) return NULL;
    usbeam_shm_server *s = server_from(capsule);
    if (!s) return NULL;
    return usbeam_py_none_or_raise(usbeam_shm_server_release(s, slot));
}

static int usbeam_dtype_of(int npy_type, uint32_t *dtype)
{
    switch (npy_type) {
    case NPY_INT16: *dtype = USBEAM_DTYPE_INT16; return 0;
    case NPY_FLOAT32: *dtype = USBEAM_DTYPE_FLOAT32; return 0;
    case NPY_COMPLEX64: *dtype = USBEAM_DTYPE_COMPLEX64; return 0;
    case NPY_UINT8: *dtype = USBEAM_DTYPE_UINT8; return 0;
    case NPY_FLOAT16: *dtype = USBEAM_DTYPE_FLOAT16; return 0;
    case NPY_INT32: *dtype = USBEAM_DTYPE_INT32; return 0;
    case NPY_FLOAT64: *dtype = USBEAM_DTYPE_FLOAT64; return 0;
    }
    return -1;
}

static PyObject *py_shm_server_post(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *capsule, *image_obj;
    unsigned long long frame_id;
    int status;
    long long push_ns;
    const char *message = "";
    if (!PyArg_ParseTuple(args, "OKiOL|s", &capsule, &frame_id, &status, &image_obj, &push_ns, &message))
        return NULL;
    usbeam_shm_server *s = server_from(capsule);
    if (!s) return NULL;
    const void *data = NULL;
    uint64_t bytes = 0, shape[USBEAM_SHM_MAX_DIMS] = {0};
    uint32_t dtype = 0, ndim = 0;
    if (image_obj != Py_None) {
        if (!PyArray_Check(image_obj)) {
            PyErr_SetString(PyExc_TypeError, "image must be a numpy.ndarray or None");
            return NULL;
        }
        PyArrayObject *img = (PyArrayObject *)image_obj;
        if (usbeam_dtype_of(PyArray_TYPE(img), &dtype) < 0) {
            PyErr_SetString(PyExc_TypeError, "image dtype has no usbeam_dtype code");
            return NULL;
        }
        if (PyArray_NDIM(img) > (int)USBEAM_SHM_MAX_DIMS) {
            PyErr_Format(PyExc_ValueError, "image must have at most %u dimensions", USBEAM_SHM_MAX_DIMS);
            return NULL;
        }
        data = usbeam_py_array_data(image_obj, "image", PyArray_TYPE(img), (size_t)PyArray_SIZE(img), 0);
        if (!data) return NULL;
        ndim = (uint32_t)PyArray_NDIM(img);
        for (uint32_t d = 0; d < ndim; ++d) shape[d] = (uint64_t)PyArray_DIM(img, (int)d);
        bytes = (uint64_t)PyArray_NBYTES(img);
    }
    usbeam_status st;
    Py_BEGIN_ALLOW_THREADS
    st = usbeam_shm_server_post(s, frame_id, status, data, bytes, dtype, ndim, shape, push_ns, message);
    Py_END_ALLOW_THREADS
    return usbeam_py_none_or_raise(st);
}

static PyObject *py_shm_server_params(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *capsule;
    unsigned long long generation;
    if (!PyArg_ParseTuple(args, "OK", &capsule, &generation)) return NULL;
    usbeam_shm_server *s = server_from(capsule);
    if (!s) return NULL;
    char *text = PyMem_Malloc(USBEAM_SHM_PARAM_CAPACITY);
    if (!text) return PyErr_NoMemory();
    uint64_t latest = 0;
    size_t bytes = 0;
    usbeam_status st = usbeam_shm_server_params(s, generation, text, USBEAM_SHM_PARAM_CAPACITY, &bytes, &latest);
    PyObject *result = NULL;
    if (st != USBEAM_OK)
        usbeam_py_raise(st);
    else if (generation == 0)
        result = Py_BuildValue("(KO)", (unsigned long long)latest, Py_None);
    else
        result = Py_BuildValue("(Ks#)", (unsigned long long)latest, text, (Py_ssize_t)bytes);
    PyMem_Free(text);
    return result;
}

static PyObject *py_shm_server_counters(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *capsule;
    if (!PyArg_ParseTuple(args, "O", &capsule)) return NULL;
    usbeam_shm_server *s = server_from(capsule);
    if (!s) return NULL;
    usbeam_shm_counters c;
    usbeam_status st = usbeam_shm_server_counters(s, &c);
    if (st != USBEAM_OK) return usbeam_py_raise(st);
    return Py_BuildValue("{s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K}", "pushed", (unsigned long long)c.pushed, "dropped",
                         (unsigned long long)c.dropped, "rejected", (unsigned long long)c.rejected, "abandoned",
                         (unsigned long long)c.abandoned, "processed", (unsigned long long)c.processed, "failed",
                         (unsigned long long)c.failed, "stalled", (unsigned long long)c.stalled, "discarded",
                         (unsigned long long)c.discarded);
}

static PyObject *py_shm_server_stop(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *capsule;
    if (!PyArg_ParseTuple(args, "O", &capsule)) return NULL;
    usbeam_shm_server *s = server_from(capsule);
    if (!s) return NULL;
    usbeam_shm_server_stop(s);
    Py_RETURN_NONE;
}

/* ---- CUDA slot ring ----------------------------------------------------------------- */

static usbeam_py_plan *ring_from(PyObject *capsule) { return usbeam_py_plan_from(capsule, &ring_type); }

/* The (ring, k) arguments of the per-slot calls; the slot index itself is checked by the ring. */
static usbeam_py_plan *ring_slot_args(PyObject *args, PyObject **capsule, int *slot)
{
    if (!PyArg_ParseTuple(args, "Oi", capsule, slot)) return NULL;
    return ring_from(*capsule);
}

static PyObject *py_live_cuda_ring_create(PyObject *self, PyObject *args)
{
    (void)self;
    int device = 0, slots = 3;
    Py_ssize_t slot_bytes = 0;
    if (!PyArg_ParseTuple(args, "iin", &device, &slots, &slot_bytes)) return NULL;
    if (slot_bytes <= 0) {
        PyErr_SetString(PyExc_ValueError, "slot_bytes must be > 0");
        return NULL;
    }
    usbeam_py_plan *h = usbeam_py_plan_new(&ring_type);
    if (!h) return NULL;
    h->n_out = (size_t)slot_bytes; /* the uint8 elements of a slot's host view */
    usbeam_live_cuda_ring *ring = NULL;
    usbeam_status st;
    Py_BEGIN_ALLOW_THREADS
    st = usbeam_live_cuda_ring_create(device, slots, (size_t)slot_bytes, &ring);
    Py_END_ALLOW_THREADS
    return usbeam_py_plan_wrap(h, st, ring);
}

static PyObject *py_live_cuda_ring_host_slot(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *capsule;
    int slot;
    usbeam_py_plan *h = ring_slot_args(args, &capsule, &slot);
    if (!h) return NULL;
    void *host = NULL;
    usbeam_py_plan_call call = usbeam_py_plan_enter(h, NULL);
    usbeam_status st = usbeam_live_cuda_ring_host_slot(h->plan, slot, &host);
    usbeam_py_plan_leave(&call);
    if (st != USBEAM_OK) return usbeam_py_raise(st);
    return bytes_view(host, h->n_out, 1, capsule);
}

static PyObject *py_live_cuda_ring_upload(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *capsule;
    int slot;
    Py_ssize_t bytes;
    if (!PyArg_ParseTuple(args, "Oin", &capsule, &slot, &bytes)) return NULL;
    usbeam_py_plan *h = ring_from(capsule);
    if (!h) return NULL;
    if (bytes <= 0) {
        PyErr_SetString(PyExc_ValueError, "bytes must be > 0");
        return NULL;
    }
    usbeam_py_plan_call call = usbeam_py_plan_enter(h, NULL);
    usbeam_status st = usbeam_live_cuda_ring_upload(h->plan, slot, (size_t)bytes);
    return usbeam_py_plan_finish(&call, st);
}

static PyObject *py_live_cuda_ring_acquire(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *capsule;
    int slot;
    usbeam_py_plan *h = ring_slot_args(args, &capsule, &slot);
    if (!h) return NULL;
    void *device = NULL, *stream = NULL;
    usbeam_py_plan_call call = usbeam_py_plan_enter(h, NULL);
    usbeam_status st = usbeam_live_cuda_ring_acquire(h->plan, slot, &device, &stream);
    usbeam_py_plan_leave(&call);
    if (st != USBEAM_OK) return usbeam_py_raise(st);
    return Py_BuildValue("(KK)", (unsigned long long)(uintptr_t)device, (unsigned long long)(uintptr_t)stream);
}

static PyObject *py_live_cuda_ring_release(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *capsule;
    int slot;
    usbeam_py_plan *h = ring_slot_args(args, &capsule, &slot);
    if (!h) return NULL;
    usbeam_py_plan_call call = usbeam_py_plan_enter(h, NULL);
    usbeam_status st = usbeam_live_cuda_ring_release(h->plan, slot);
    return usbeam_py_plan_finish(&call, st);
}

static PyObject *py_live_cuda_ring_seconds(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *capsule;
    int slot;
    usbeam_py_plan *h = ring_slot_args(args, &capsule, &slot);
    if (!h) return NULL;
    double upload_s = 0, compute_s = 0;
    usbeam_py_plan_call call = usbeam_py_plan_enter(h, NULL);
    usbeam_status st = usbeam_live_cuda_ring_compute_seconds(h->plan, slot, &compute_s);
    if (st == USBEAM_OK) st = usbeam_live_cuda_ring_upload_seconds(h->plan, slot, &upload_s);
    usbeam_py_plan_leave(&call);
    if (st != USBEAM_OK) return usbeam_py_raise(st);
    return Py_BuildValue("(dd)", upload_s, compute_s);
}

static PyObject *py_live_cuda_ring_done(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *capsule;
    int slot;
    usbeam_py_plan *h = ring_slot_args(args, &capsule, &slot);
    if (!h) return NULL;
    int done = 0;
    /* never waits for the device, but may for the runtime's locks: the GIL is released */
    usbeam_py_plan_call call = usbeam_py_plan_enter(h, NULL);
    usbeam_status st = usbeam_live_cuda_ring_query(h->plan, slot, &done);
    usbeam_py_plan_leave(&call);
    if (st != USBEAM_OK) return usbeam_py_raise(st);
    return PyBool_FromLong(done);
}

static PyObject *py_live_cuda_ring_synchronize(PyObject *self, PyObject *capsule)
{
    (void)self;
    usbeam_py_plan *h = ring_from(capsule);
    if (!h) return NULL;
    usbeam_py_plan_call call = usbeam_py_plan_enter(h, NULL);
    usbeam_status st = usbeam_live_cuda_ring_synchronize(h->plan);
    return usbeam_py_plan_finish(&call, st);
}

static PyObject *py_live_cuda_ring_count(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
    return PyLong_FromLong(usbeam_live_cuda_ring_count());
}

static PyObject *py_shm_now_ns(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
    return PyLong_FromLongLong((long long)usbeam_shm_now_ns());
}

PyMethodDef usbeam_py_live_methods[] = {
    {"live_gather_plan", (PyCFunction)(void (*)(void))py_live_gather_plan, METH_VARARGS | METH_KEYWORDS,
     "Create a channel-mapping plan for live frames."},
    {"live_gather", py_live_gather, METH_VARARGS, "Map one raw frame: (plan, raw, out)."},
    {"shm_server_create", (PyCFunction)(void (*)(void))py_shm_server_create, METH_VARARGS | METH_KEYWORDS,
     "Create and own a usbeam shared-memory region."},
    {"shm_server_next_frame", py_shm_server_next_frame, METH_VARARGS, "Take the oldest READY frame."},
    {"shm_server_release", py_shm_server_release, METH_VARARGS, "Free a slot taken by next_frame."},
    {"shm_server_post", py_shm_server_post, METH_VARARGS, "Post the outcome of a frame."},
    {"shm_server_params", py_shm_server_params, METH_VARARGS, "Parameters of one generation."},
    {"shm_server_counters", py_shm_server_counters, METH_VARARGS, "Region counters."},
    {"shm_server_stop", py_shm_server_stop, METH_VARARGS, "Mark stopped and unlink the name."},
    {"shm_now_ns", py_shm_now_ns, METH_NOARGS, "CLOCK_MONOTONIC in ns (the region's clock)."},
    {"live_cuda_ring_create", py_live_cuda_ring_create, METH_VARARGS,
     "Pinned/device slot ring of a CUDA live session: (device, slots, slot_bytes)."},
    {"live_cuda_ring_host_slot", py_live_cuda_ring_host_slot, METH_VARARGS,
     "(ring, k) -> uint8 view of pinned slot k, once its last upload has finished."},
    {"live_cuda_ring_upload", py_live_cuda_ring_upload, METH_VARARGS, "(ring, k, bytes): queue slot k's upload."},
    {"live_cuda_ring_acquire", py_live_cuda_ring_acquire, METH_VARARGS,
     "(ring, k) -> (device_ptr, compute_stream), the compute stream ordered after k's upload."},
    {"live_cuda_ring_release", py_live_cuda_ring_release, METH_VARARGS,
     "(ring, k): record that the compute stream's work on slot k is queued."},
    {"live_cuda_ring_seconds", py_live_cuda_ring_seconds, METH_VARARGS,
     "(ring, k) -> (upload_s, compute_s) of slot k's last frame (waits for its compute)."},
    {"live_cuda_ring_done", py_live_cuda_ring_done, METH_VARARGS,
     "(ring, k) -> True if slot k's released compute has finished (a query, never a wait)."},
    {"live_cuda_ring_synchronize", py_live_cuda_ring_synchronize, METH_O, "Wait for both streams of a ring."},
    {"live_cuda_ring_count", py_live_cuda_ring_count, METH_NOARGS, "CUDA slot rings alive in this process."},
    {NULL, NULL, 0, NULL},
};
