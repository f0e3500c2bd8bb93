/*
 * py_cuda.c - CUDA from Python beyond the arrays: the capsule on a plan's CUDA state and its
 * cuda_exec_* functions (stream, device, stage timings, input faults; wrapped by
 * usbeam.device.CudaExecution), CUDA graph capture and launch, raw device copies and the
 * copy-bandwidth probes (device to device; pinned host to device, as a live session uploads).
 * Which buffers a CUDA plan takes is py_plan.c's concern.
 */
#include "python/device/py_device.h"

static const char EXEC_CAPSULE[] = "usbeam.cuda_exec";

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
    if (stream_obj != Py_None && usbeam_da_parse_stream(stream_obj, "stream", &stream) < 0) return NULL;
    if (stream == -1) {
        PyErr_SetString(PyExc_ValueError, "stream: -1 is not a stream");
        return NULL;
    }
    /* cudaStreamLegacy is 0x1 and cudaStreamPerThread 0x2, so the array API's 1 and 2 are
     * already the handles CUDA expects. */
    usbeam_status st = usbeam_cuda_exec_set_stream(e, (void *)stream);
    return usbeam_py_none_or_raise(st);
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

/* Read and clear the plan's input-fault bits (no CUDA call: valid for finished work). */
static PyObject *py_cuda_exec_take_input_faults(PyObject *self, PyObject *capsule)
{
    (void)self;
    usbeam_cuda_exec *e = exec_from(capsule);
    if (!e) return NULL;
    return PyLong_FromUnsignedLong(usbeam_cuda_exec_take_input_faults(e));
}

/* The copy-bandwidth probes: (bytes, repeats=20, device=0) -> GB/s, timed with CUDA events
 * by the probe itself; the GIL is released while it copies. */
static PyObject *bandwidth(PyObject *args, usbeam_status (*probe)(int device, size_t bytes, int repeats,
                                                                  double *gbps))
{
    Py_ssize_t bytes = 0;
    int repeats = 20, device = 0;
    if (!PyArg_ParseTuple(args, "n|ii", &bytes, &repeats, &device)) return NULL;
    if (bytes <= 0) {
        PyErr_SetString(PyExc_ValueError, "bytes must be > 0");
        return NULL;
    }
    double gbps = 0.0;
    usbeam_status st;
    Py_BEGIN_ALLOW_THREADS
    st = probe(device, (size_t)bytes, repeats, &gbps);
    Py_END_ALLOW_THREADS
    if (st != USBEAM_OK) return usbeam_py_raise(st);
    return PyFloat_FromDouble(gbps);
}

static PyObject *py_cuda_d2d_bandwidth(PyObject *self, PyObject *args)
{
    (void)self;
    return bandwidth(args, usbeam_cuda_d2d_bandwidth);
}

/* the upload path of a CUDA live session (usbeam.live.cuda_session), pinned memory */
static PyObject *py_live_cuda_h2d_bandwidth(PyObject *self, PyObject *args)
{
    (void)self;
    return bandwidth(args, usbeam_live_cuda_h2d_bandwidth);
}

/* ---- CUDA graphs: graph_capture_begin(stream), graph_capture_end(stream) -> capsule,
 * graph_capture_abort(stream), graph_launch(capsule, stream), device_copy(dst, src, stream) */
#define GRAPH_CAPSULE "usbeam.cuda_graph"

/* The graph's event-record nodes name the stage events of the plans it captured, which a plan
 * destroys with itself: the capsule holds the plans (its context) and lets go of them only
 * after the executable graph, whatever order the caller drops them in. */
static void graph_capsule_destroy(PyObject *capsule)
{
    usbeam_graph_destroy(PyCapsule_GetPointer(capsule, GRAPH_CAPSULE));
    Py_XDECREF((PyObject *)PyCapsule_GetContext(capsule));
}

static int capture_stream(PyObject *obj, void **stream)
{
    intptr_t s = 0;
    if (usbeam_da_parse_stream(obj, "stream", &s) < 0) return -1;
    if (s == -1 || s == 1) {
        PyErr_SetString(PyExc_ValueError, "stream: a graph is captured on a created stream (not -1 or the legacy "
                                          "default stream)");
        return -1;
    }
    *stream = (void *)s;
    return 0;
}

static PyObject *py_graph_capture_begin(PyObject *self, PyObject *stream_obj)
{
    (void)self;
    void *stream;
    if (capture_stream(stream_obj, &stream) < 0) return NULL;
    usbeam_status st = usbeam_graph_capture_begin(stream);
    return usbeam_py_none_or_raise(st);
}

/* graph_capture_end(stream, plans=None): plans, the objects whose work was captured, are
 * kept alive by the graph (graph_capsule_destroy). */
static PyObject *py_graph_capture_end(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *stream_obj, *plans = Py_None;
    if (!PyArg_ParseTuple(args, "O|O:graph_capture_end", &stream_obj, &plans)) return NULL;
    void *stream, *graph = NULL;
    if (capture_stream(stream_obj, &stream) < 0) return NULL;
    usbeam_status st = usbeam_graph_capture_end(stream, &graph);
    if (st != USBEAM_OK) return usbeam_py_raise(st);
    PyObject *capsule = PyCapsule_New(graph, GRAPH_CAPSULE, graph_capsule_destroy);
    if (!capsule) {
        usbeam_graph_destroy(graph);
        return NULL;
    }
    if (plans != Py_None && PyCapsule_SetContext(capsule, Py_NewRef(plans)) < 0) {
        Py_DECREF(plans);
        Py_DECREF(capsule);
        return NULL;
    }
    return capsule;
}

static PyObject *py_graph_capture_abort(PyObject *self, PyObject *stream_obj)
{
    (void)self;
    void *stream;
    if (capture_stream(stream_obj, &stream) < 0) return NULL;
    usbeam_graph_capture_abort(stream);
    Py_RETURN_NONE;
}

static PyObject *py_graph_launch(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *capsule, *stream_obj;
    if (!PyArg_ParseTuple(args, "OO", &capsule, &stream_obj)) return NULL;
    void *graph = PyCapsule_GetPointer(capsule, GRAPH_CAPSULE);
    if (!graph) return NULL;
    void *stream;
    if (capture_stream(stream_obj, &stream) < 0) return NULL;
    usbeam_status st = usbeam_graph_launch(graph, stream);
    return usbeam_py_none_or_raise(st);
}

/* device_copy(dst_ptr, src_ptr, bytes, stream): cudaMemcpyAsync device -> device on stream. */
static PyObject *py_device_copy(PyObject *self, PyObject *args)
{
    (void)self;
    unsigned long long dst, src;
    Py_ssize_t bytes;
    PyObject *stream_obj;
    if (!PyArg_ParseTuple(args, "KKnO", &dst, &src, &bytes, &stream_obj)) return NULL;
    if (bytes < 0) {
        PyErr_SetString(PyExc_ValueError, "bytes must be >= 0");
        return NULL;
    }
    intptr_t stream = 0;
    if (usbeam_da_parse_stream(stream_obj, "stream", &stream) < 0) return NULL;
    usbeam_status st = usbeam_copy_device((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, (size_t)bytes,
                                          (void *)stream);
    return usbeam_py_none_or_raise(st);
}

PyMethodDef usbeam_py_cuda_methods[] = {
    {"graph_capture_begin", py_graph_capture_begin, METH_O, "Start capturing a stream's work into a CUDA graph."},
    {"graph_capture_end", py_graph_capture_end, METH_VARARGS,
     "graph_capture_end(stream, plans=None): end a capture; an executable CUDA graph (capsule) that keeps plans alive."},
    {"graph_capture_abort", py_graph_capture_abort, METH_O, "End a failed capture and drop it."},
    {"graph_launch", py_graph_launch, METH_VARARGS, "(graph, stream): replay a captured graph on stream."},
    {"device_copy", py_device_copy, METH_VARARGS, "(dst_ptr, src_ptr, bytes, stream): async device copy."},
    {"cuda_d2d_bandwidth", py_cuda_d2d_bandwidth, METH_VARARGS,
     "(bytes, repeats=20, device=0) -> device-to-device cudaMemcpy GB/s (read + written bytes), CUDA events."},
    {"live_cuda_h2d_bandwidth", py_live_cuda_h2d_bandwidth, METH_VARARGS,
     "Pinned host-to-device copy bandwidth in GB/s: (bytes, repeats=20, device=0)."},
    {"cuda_exec_info", py_cuda_exec_info, METH_O, "{stream, device, device_bytes} of a CUDA plan."},
    {"cuda_exec_set_stream", py_cuda_exec_set_stream, METH_VARARGS,
     "Run a CUDA plan on a caller's stream (None: its own)."},
    {"cuda_exec_timings", py_cuda_exec_timings, METH_O, "{stage: seconds} of a CUDA plan's last execute."},
    {"cuda_exec_take_input_faults", py_cuda_exec_take_input_faults, METH_O,
     "Input-fault bits (1: non-finite data read) of a CUDA plan's finished executes since the last call; clears them."},
    {NULL, NULL, 0, NULL},
};
