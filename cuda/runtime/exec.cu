/*
 * exec.cu - the CUDA execution state of a plan (see exec.cuh): device, stream, stage events,
 * NVTX ranges and the plan's device buffers.
 *
 * Streams: each plan creates its own non-blocking stream at plan creation so that plans
 * run concurrently and never serialise behind the legacy default stream; a caller may
 * substitute its own stream (usbeam_cuda_exec_set_stream) to order usbeam's work with its
 * own (e.g. a PyTorch or CuPy stream).
 * Timing: one (start, stop) event pair per stage, recorded around the stage's launches on
 * the plan's stream; times are read after the fact, so timing adds no host synchronisation
 * to execute.  NVTX ranges carry the same stage names (Nsight Systems shows them on the
 * host timeline, where the launches are issued); a range opened by stage_begin is closed by
 * stage_end or, when a launch failed in between, by usbeam_cuda_exec_end.
 * Graph capture (cuda/graph.cu): while the plan's stream is being captured, a plain
 * cudaEventRecord would add no node to the graph and leave the event "captured": querying,
 * synchronising or timing it then fails with cudaErrorCapturedEvent (driver_types.h), and a
 * replay would not record it.  The stage events are therefore recorded with
 * cudaEventRecordWithFlags(cudaEventRecordExternal) while capturing (cuda_runtime_api.h: "Event
 * is captured in the graph as an external event node when performing stream capture"), which
 * makes them event-record nodes that every launch of the graph records, so the stage times
 * read after a replay are the replay's.
 */
#include "runtime/exec.cuh"
#include "runtime/cublas_plan.cuh"

#include <nvtx3/nvToolsExt.h>
#include <string.h>

#define USBEAM_CUDA_MAX_BUFFERS 16

struct usbeam_cuda_exec {
    int device;
    int previous_device;        /* restored by usbeam_cuda_exec_end; -1: nothing to restore */
    cudaStream_t own_stream;
    cudaStream_t stream;        /* own_stream or the caller's */
    int n_stages;
    const char *stage_names[USBEAM_CUDA_MAX_STAGES];
    cudaEvent_t start[USBEAM_CUDA_MAX_STAGES], stop[USBEAM_CUDA_MAX_STAGES];
    unsigned recorded;          /* bit s: stage s ran in the last execute */
    int capturing;              /* the stream is being captured (checked by exec_begin) */
    int open_range;             /* an NVTX range of a stage is open */
    int max_shared_optin;       /* bytes of shared memory a block may opt in to */
    void *buffers[USBEAM_CUDA_MAX_BUFFERS];
    int n_buffers;
    size_t device_bytes;
    cudaEvent_t done;           /* recorded by exec_end on the stream the execute used */
    int done_recorded;
    unsigned *input_fault;      /* mapped page-locked word the kernels set (NULL until asked for) */
    unsigned *input_fault_device; /* its device address */
};

usbeam_status usbeam_cuda_exec_create(const char *const *stage_names, int n_stages, usbeam_cuda_exec **out)
{
    if (!out) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "exec is NULL");
    *out = nullptr;
    if (n_stages < 1 || n_stages > USBEAM_CUDA_MAX_STAGES)
        return usbeam_fail(USBEAM_ERR_INTERNAL, "CUDA plan with %d stages (1..%d)", n_stages,
                           USBEAM_CUDA_MAX_STAGES);
    int count = 0;
    usbeam_status counted = usbeam_cuda_device_count(&count);
    if (counted != USBEAM_OK) return counted;
    if (count == 0) return usbeam_fail(USBEAM_ERR_NO_DEVICE, "backend: no CUDA device is visible");
    usbeam_cuda_exec *e = (usbeam_cuda_exec *)usbeam_alloc(sizeof *e);
    if (!e) return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "CUDA plan state");
    e->previous_device = -1;
    e->n_stages = n_stages;
    usbeam_status st = usbeam_cuda_check(cudaGetDevice(&e->device), "cudaGetDevice", __FILE__, __LINE__);
    if (st == USBEAM_OK)
        st = usbeam_cuda_check(cudaDeviceGetAttribute(&e->max_shared_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin,
                                                      e->device),
                               "cudaDeviceGetAttribute", __FILE__, __LINE__);
    if (st == USBEAM_OK)
        st = usbeam_cuda_check(cudaStreamCreateWithFlags(&e->own_stream, cudaStreamNonBlocking),
                               "cudaStreamCreateWithFlags", __FILE__, __LINE__);
    e->stream = e->own_stream;
    for (int s = 0; s < n_stages && st == USBEAM_OK; ++s) {
        e->stage_names[s] = stage_names[s];
        st = usbeam_cuda_check(cudaEventCreate(&e->start[s]), "cudaEventCreate", __FILE__, __LINE__);
        if (st == USBEAM_OK)
            st = usbeam_cuda_check(cudaEventCreate(&e->stop[s]), "cudaEventCreate", __FILE__, __LINE__);
    }
    if (st == USBEAM_OK)
        st = usbeam_cuda_check(cudaEventCreateWithFlags(&e->done, cudaEventDisableTiming), "cudaEventCreateWithFlags",
                               __FILE__, __LINE__);
    if (st != USBEAM_OK) {
        usbeam_cuda_exec_destroy(e);
        return st;
    }
    *out = e;
    return USBEAM_OK;
}

void usbeam_cuda_exec_destroy(usbeam_cuda_exec *e)
{
    if (!e) return;
    int previous = -1;
    if (cudaGetDevice(&previous) == cudaSuccess && previous != e->device) (void)cudaSetDevice(e->device);
    /* Work still queued may read the buffers: finish it before freeing them.  The last execute
     * is waited for through its event, not its stream: a caller's stream the plan was given may
     * have been destroyed since (an event outlives the stream it was recorded on). */
    if (e->done && e->done_recorded) (void)cudaEventSynchronize(e->done);
    if (e->own_stream) (void)cudaStreamSynchronize(e->own_stream);
    for (int b = 0; b < e->n_buffers; ++b) (void)cudaFree(e->buffers[b]);
    for (int s = 0; s < e->n_stages; ++s) {
        if (e->start[s]) (void)cudaEventDestroy(e->start[s]);
        if (e->stop[s]) (void)cudaEventDestroy(e->stop[s]);
    }
    if (e->done) (void)cudaEventDestroy(e->done);
    if (e->own_stream) (void)cudaStreamDestroy(e->own_stream);
    if (e->input_fault) (void)cudaFreeHost(e->input_fault);
    if (previous >= 0 && previous != e->device) (void)cudaSetDevice(previous);
    (void)cudaGetLastError(); /* nothing above may leave a sticky error for the next call */
    usbeam_free(e);
}

usbeam_status usbeam_cuda_exec_alloc(usbeam_cuda_exec *e, size_t bytes, const char *what, void **ptr)
{
    *ptr = nullptr;
    if (e->n_buffers == USBEAM_CUDA_MAX_BUFFERS)
        return usbeam_fail(USBEAM_ERR_INTERNAL, "%s: more than %d device buffers in one plan", what,
                           USBEAM_CUDA_MAX_BUFFERS);
    if (bytes > USBEAM_MAX_ALLOCATION)
        return usbeam_fail(USBEAM_ERR_SIZE_OVERFLOW, "%s: %zu bytes of device memory is too large", what, bytes);
    cudaError_t err = cudaMalloc(ptr, bytes ? bytes : 1);
    if (err == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        *ptr = nullptr;
        return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "%s: cannot allocate %zu bytes on CUDA device %d", what, bytes,
                           e->device);
    }
    USBEAM_CUDA_TRY(err);
    e->buffers[e->n_buffers++] = *ptr;
    e->device_bytes += bytes;
    return USBEAM_OK;
}

/* The one ordered upload path of every twin: tables go in the plan's stream order (a pageable
 * cudaMemcpy would run on the legacy default stream, which the plan's non-blocking stream and a
 * caller's stream never wait for, and may return before its DMA lands).  A pageable source is
 * staged before cudaMemcpyAsync returns, so the caller may free it at once. */
usbeam_status usbeam_cuda_exec_upload(usbeam_cuda_exec *e, void *dst, const void *src, size_t bytes)
{
    if (bytes) USBEAM_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, e->stream));
    return USBEAM_OK;
}

usbeam_status usbeam_cuda_exec_zero(usbeam_cuda_exec *e, void *dst, size_t bytes)
{
    if (bytes) USBEAM_CUDA_TRY(cudaMemsetAsync(dst, 0, bytes, e->stream));
    return USBEAM_OK;
}

cudaStream_t usbeam_cuda_exec_cuda_stream(const usbeam_cuda_exec *e) { return e->stream; }

int usbeam_cuda_exec_max_shared_optin(const usbeam_cuda_exec *e) { return e->max_shared_optin; }

usbeam_status usbeam_cuda_exec_grid_cap(const usbeam_cuda_exec *e, unsigned *cap)
{
    int sms = 0;
    usbeam_status st = usbeam_cuda_check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, e->device),
                                         "cudaDeviceGetAttribute", __FILE__, __LINE__);
    *cap = (unsigned)(sms > 0 ? sms : 1) * 8u;
    return st;
}

usbeam_status usbeam_cuda_exec_begin(usbeam_cuda_exec *e)
{
    int current = 0;
    USBEAM_CUDA_TRY(cudaGetDevice(&current));
    e->previous_device = -1;
    if (current != e->device) {
        USBEAM_CUDA_TRY(cudaSetDevice(e->device));
        e->previous_device = current;
    }
    e->recorded = 0;
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    USBEAM_CUDA_TRY(cudaStreamIsCapturing(e->stream, &status));
    e->capturing = status != cudaStreamCaptureStatusNone;
    return USBEAM_OK;
}

void usbeam_cuda_exec_end(usbeam_cuda_exec *e)
{
    if (e->open_range) { /* a stage failed between begin and end */
        nvtxRangePop();
        e->open_range = 0;
    }
    if (cudaEventRecordWithFlags(e->done, e->stream, e->capturing ? cudaEventRecordExternal : cudaEventRecordDefault) ==
        cudaSuccess)
        e->done_recorded = 1;
    else
        (void)cudaGetLastError();
    if (e->previous_device >= 0) (void)cudaSetDevice(e->previous_device);
    e->previous_device = -1;
}

/* Stage events: event-record nodes of the graph while capturing (see the top of the file). */
static cudaError_t record_stage_event(const usbeam_cuda_exec *e, cudaEvent_t event)
{
    return cudaEventRecordWithFlags(event, e->stream, e->capturing ? cudaEventRecordExternal : cudaEventRecordDefault);
}

usbeam_status usbeam_cuda_stage_begin(usbeam_cuda_exec *e, int stage)
{
    if (e->open_range) { /* the previous stage failed before its end: close its range */
        nvtxRangePop();
        e->open_range = 0;
    }
    USBEAM_CUDA_TRY(record_stage_event(e, e->start[stage]));
    nvtxRangePushA(e->stage_names[stage]);
    e->open_range = 1;
    return USBEAM_OK;
}

usbeam_status usbeam_cuda_stage_end(usbeam_cuda_exec *e, int stage)
{
    if (e->open_range) {
        nvtxRangePop();
        e->open_range = 0;
    }
    USBEAM_CUDA_TRY(record_stage_event(e, e->stop[stage]));
    e->recorded |= 1u << stage;
    return USBEAM_OK;
}

extern "C" usbeam_status usbeam_cuda_exec_set_stream(usbeam_cuda_exec *e, void *stream)
{
    if (!e) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "plan has no CUDA state (created for the CPU?)");
    cudaStream_t next = stream ? (cudaStream_t)stream : e->own_stream;
    /* Work already queued on the old stream comes before anything queued on the new one. */
    if (next != e->stream) {
        usbeam_status st = usbeam_stream_wait((void *)next, (void *)e->stream);
        if (st != USBEAM_OK) return st;
    }
    e->stream = next;
    return USBEAM_OK;
}

extern "C" void *usbeam_cuda_exec_stream(const usbeam_cuda_exec *e) { return e ? (void *)e->stream : nullptr; }

extern "C" int usbeam_cuda_exec_device(const usbeam_cuda_exec *e) { return e ? e->device : -1; }

extern "C" size_t usbeam_cuda_exec_device_bytes(const usbeam_cuda_exec *e) { return e ? e->device_bytes : 0; }

extern "C" usbeam_status usbeam_cuda_exec_timings(usbeam_cuda_exec *e, size_t capacity, const char **names,
                                                  float *ms, size_t *n_stages)
{
    if (!e || !n_stages) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "exec and n_stages must not be NULL");
    *n_stages = 0;
    for (int s = 0; s < e->n_stages; ++s) {
        if (!(e->recorded & (1u << s))) continue;
        if (*n_stages == capacity) break;
        float elapsed = 0.0f;
        USBEAM_CUDA_TRY(cudaEventSynchronize(e->stop[s]));
        USBEAM_CUDA_TRY(cudaEventElapsedTime(&elapsed, e->start[s], e->stop[s]));
        if (names) names[*n_stages] = e->stage_names[s];
        if (ms) ms[*n_stages] = elapsed;
        ++*n_stages;
    }
    return USBEAM_OK;
}

usbeam_status usbeam_cuda_allow_dynamic_shared(const void *kernel, size_t bytes)
{
    if (bytes <= 48 * 1024) return USBEAM_OK; /* every device allows this much without opting in */
    int device = 0, optin = 0;
    USBEAM_CUDA_TRY(cudaGetDevice(&device));
    USBEAM_CUDA_TRY(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    if (bytes > (size_t)optin)
        return usbeam_fail(USBEAM_ERR_UNSUPPORTED, "a launch needs %zu bytes of shared memory; device %d allows %d",
                           bytes, device, optin);
    USBEAM_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, optin));
    return USBEAM_OK;
}
/* Input faults: a word of mapped page-locked host memory, written by the kernels with a plain
 * store (every writer stores the same bits, so no atomic is needed) and read by the host with
 * no CUDA call.  Execute therefore adds nothing to the stream (no copy, no memset, nothing in
 * a captured graph), and a clean run never touches PCIe.  The word is valid on the host for
 * the work that has finished, i.e. after the caller synchronised with the plan's stream. */
usbeam_status usbeam_cuda_exec_input_fault_flag(usbeam_cuda_exec *e, unsigned **device_flag)
{
    *device_flag = nullptr;
    if (!e->input_fault) {
        void *host = nullptr;
        USBEAM_CUDA_TRY(cudaHostAlloc(&host, sizeof(unsigned), cudaHostAllocMapped | cudaHostAllocPortable));
        e->input_fault = (unsigned *)host;
        *e->input_fault = 0u;
        /* Under unified virtual addressing (every platform CUDA 12+ supports) the pointer
         * cudaHostAlloc returns is valid in kernels as it is (CUDA C++ Programming Guide,
         * "Unified Virtual Address Space"): no cudaHostGetDevicePointer needed. */
        e->input_fault_device = e->input_fault;
    }
    *device_flag = e->input_fault_device;
    return USBEAM_OK;
}

extern "C" unsigned usbeam_cuda_exec_take_input_faults(usbeam_cuda_exec *e)
{
    if (!e || !e->input_fault) return 0u;
    return __atomic_exchange_n(e->input_fault, 0u, __ATOMIC_ACQ_REL);
}

usbeam_status usbeam_cublas_plan_create(usbeam_cuda_exec *exec, cublasHandle_t *handle, void **workspace)
{
    *handle = nullptr;
    usbeam_status st = usbeam_cuda_exec_alloc(exec, USBEAM_CUBLAS_WORKSPACE_BYTES, "cuBLAS workspace", workspace);
    if (st != USBEAM_OK) return st;
    USBEAM_CUBLAS_TRY(cublasCreate(handle));
    USBEAM_CUBLAS_TRY(cublasSetMathMode(*handle, CUBLAS_PEDANTIC_MATH));
    return USBEAM_OK;
}

usbeam_status usbeam_cublas_plan_bind(cublasHandle_t handle, void *workspace, cudaStream_t stream)
{
    USBEAM_CUBLAS_TRY(cublasSetStream(handle, stream));
    USBEAM_CUBLAS_TRY(cublasSetWorkspace(handle, workspace, USBEAM_CUBLAS_WORKSPACE_BYTES));
    return USBEAM_OK;
}
