/*
 * memory.cu - device and pinned allocations, host <-> device copies through pinned staging
 * buffers, and stream / event helpers (the C API of csrc/include/usbeam/device.h).
 *
 * Why staging: a cudaMemcpy from pageable host memory is synchronous and goes through a
 * driver bounce buffer anyway.  Copying through our own page-locked chunks, two of them,
 * lets the host memcpy of one chunk overlap the DMA of the other, and keeps the copy on the
 * caller's stream so it is ordered after the kernels queued there.
 *
 * Staging buffers: per device, STAGING_BUFFERS chunks of STAGING_CHUNK bytes, allocated on
 * first use and kept for the life of the process; one mutex per device serialises copies
 * (they are host-bound, so running two at once would not be faster).
 * Stream-ordered allocation (usbeam_device_alloc / usbeam_device_free_after): DeviceArray
 * memory comes from a per-device pool of CUDA's stream-ordered allocator (cudaMallocFromPoolAsync
 * / cudaFreeAsync, CUDA 11.2+), so that neither an allocation nor a release waits on the host
 * (cudaMalloc may, cudaFree synchronises the whole device).  What we rely on
 * (cuda_runtime_api.h, cudaMallocAsync / cudaFreeAsync / cudaMemPoolSetAttribute):
 *   - an allocation may be used by work queued on its stream after it, and by other streams
 *     once ordered after it (events, stream synchronize);
 *   - the memory must not be touched once its stream reaches the free: frees are queued on a
 *     per-device "free" stream made to wait first (cudaStreamWaitEvent) for the event recorded
 *     after the buffer's last use, so they need neither the host nor the stream that used the
 *     buffer last (which its plan may have destroyed by then);
 *   - with cudaMemPoolReuseAllowInternalDependencies off the pool never makes an allocating
 *     stream wait for a pending free, so the allocation stream never waits on plan work;
 *     memory is reused once its free has completed (opportunistic reuse) or in stream order.
 * The pool keeps freed memory (release threshold: unlimited) so that a result allocated per
 * call costs no driver mapping; on an out-of-memory answer it is trimmed and asked once more.
 * A device without memory pools (cudaDevAttrMemoryPoolsSupported = 0) gets cudaMalloc.
 * Units: bytes.  Streams are cudaStream_t passed as void *.
 */
#include "runtime/cuda_common.cuh"

#include <mutex>
#include <string.h>

namespace {

constexpr int STAGING_BUFFERS = 2;
constexpr size_t STAGING_CHUNK = (size_t)8 << 20; /* 8 MiB: large enough to reach full PCIe rate */
constexpr int MAX_DEVICES = 64;

struct Staging {
    std::mutex lock;
    unsigned char *chunk[STAGING_BUFFERS] = {nullptr, nullptr};
    cudaEvent_t done[STAGING_BUFFERS] = {nullptr, nullptr}; /* DMA out of / into chunk finished */
};

Staging staging_per_device[MAX_DEVICES];

/* Per device, created on first use and kept for the life of the process. */
struct Pool {
    bool ready = false, supported = false;
    cudaMemPool_t pool = nullptr;
    cudaStream_t alloc_stream = nullptr; /* allocations with no consumer stream given */
    cudaStream_t free_stream = nullptr;  /* frees, each after its buffer's last-use event */
};
std::mutex pools_lock;
Pool pools[MAX_DEVICES];

/* Make device current for the scope of the object, restoring the previous one after. */
class DeviceScope {
  public:
    explicit DeviceScope(int device)
    {
        status_ = usbeam_cuda_check(cudaGetDevice(&previous_), "cudaGetDevice", __FILE__, __LINE__);
        if (status_ == USBEAM_OK && previous_ != device)
            status_ = usbeam_cuda_check(cudaSetDevice(device), "cudaSetDevice", __FILE__, __LINE__);
        else
            previous_ = -1; /* nothing to restore */
    }
    ~DeviceScope()
    {
        if (previous_ >= 0) (void)cudaSetDevice(previous_);
    }
    usbeam_status status() const { return status_; }

  private:
    int previous_ = -1;
    usbeam_status status_ = USBEAM_OK;
};

/* The staging state of the current device, its buffers and events created on first use. */
usbeam_status staging_for_current_device(Staging **out)
{
    int device = 0;
    USBEAM_CUDA_TRY(cudaGetDevice(&device));
    if (device < 0 || device >= MAX_DEVICES)
        return usbeam_fail(USBEAM_ERR_UNSUPPORTED, "device %d: staging supports devices 0..%d", device,
                           MAX_DEVICES - 1);
    *out = &staging_per_device[device];
    return USBEAM_OK;
}

usbeam_status staging_ready(Staging *s)
{
    for (int b = 0; b < STAGING_BUFFERS; ++b) {
        if (!s->chunk[b]) USBEAM_CUDA_TRY(cudaMallocHost((void **)&s->chunk[b], STAGING_CHUNK));
        if (!s->done[b]) USBEAM_CUDA_TRY(cudaEventCreateWithFlags(&s->done[b], cudaEventDisableTiming));
    }
    return USBEAM_OK;
}

/* Device of a device pointer, so copies run with that device current. */
usbeam_status device_of(const void *device_ptr, const char *what, int *device)
{
    cudaPointerAttributes attr;
    USBEAM_CUDA_TRY(cudaPointerGetAttributes(&attr, device_ptr));
    if (attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "%s: not a CUDA device pointer", what);
    *device = attr.device;
    return USBEAM_OK;
}

/* The pool of `device` (current), created on first use. */
usbeam_status pool_for_device(int device, Pool **out)
{
    if (device < 0 || device >= MAX_DEVICES)
        return usbeam_fail(USBEAM_ERR_UNSUPPORTED, "device %d: pools support devices 0..%d", device, MAX_DEVICES - 1);
    std::lock_guard<std::mutex> hold(pools_lock);
    Pool *p = &pools[device];
    *out = p;
    if (p->ready) return USBEAM_OK;
    int supported = 0;
    USBEAM_CUDA_TRY(cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, device));
    if (supported) {
        cudaMemPoolProps props;
        memset(&props, 0, sizeof props);
        props.allocType = cudaMemAllocationTypePinned;
        props.handleTypes = cudaMemHandleTypeNone;
        props.location.type = cudaMemLocationTypeDevice;
        props.location.id = device;
        USBEAM_CUDA_TRY(cudaMemPoolCreate(&p->pool, &props));
        unsigned long long keep = ~0ull;
        int off = 0;
        USBEAM_CUDA_TRY(cudaMemPoolSetAttribute(p->pool, cudaMemPoolAttrReleaseThreshold, &keep));
        USBEAM_CUDA_TRY(cudaMemPoolSetAttribute(p->pool, cudaMemPoolReuseAllowInternalDependencies, &off));
        USBEAM_CUDA_TRY(cudaStreamCreateWithFlags(&p->alloc_stream, cudaStreamNonBlocking));
        USBEAM_CUDA_TRY(cudaStreamCreateWithFlags(&p->free_stream, cudaStreamNonBlocking));
    }
    p->supported = supported != 0;
    p->ready = true;
    return USBEAM_OK;
}

} // namespace

extern "C" usbeam_status usbeam_device_alloc(int device, size_t bytes, void *stream, void **ptr, int *pooled)
{
    if (!ptr || !pooled) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "ptr and pooled must not be NULL");
    *ptr = nullptr;
    *pooled = 0;
    if (bytes > USBEAM_MAX_ALLOCATION)
        return usbeam_fail(USBEAM_ERR_SIZE_OVERFLOW, "device buffer of %zu bytes is too large", bytes);
    DeviceScope scope(device);
    if (scope.status() != USBEAM_OK) return scope.status();
    Pool *p = nullptr;
    usbeam_status st = pool_for_device(device, &p);
    if (st != USBEAM_OK) return st;
    if (stream) { /* it would become an allocation node of the graph, not a buffer of ours */
        int capturing = 0;
        if ((st = usbeam_stream_capturing(stream, &capturing)) != USBEAM_OK) return st;
        if (capturing)
            return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT,
                               "device memory cannot be allocated on a stream being captured into a CUDA graph");
    }
    if (!p->supported) return usbeam_device_malloc(device, bytes, ptr);
    cudaStream_t s = stream ? (cudaStream_t)stream : p->alloc_stream;
    cudaError_t err = cudaMallocFromPoolAsync(ptr, bytes ? bytes : 1, p->pool, s);
    if (err == cudaErrorMemoryAllocation) {
        /* memory the pool keeps from completed frees goes back to the device, then once more */
        (void)cudaGetLastError();
        (void)cudaMemPoolTrimTo(p->pool, 0);
        err = cudaMallocFromPoolAsync(ptr, bytes ? bytes : 1, p->pool, s);
    }
    if (err == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        *ptr = nullptr;
        return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "device buffer of %zu bytes on device %d: out of device memory",
                           bytes, device);
    }
    USBEAM_CUDA_TRY(err);
    /* No consumer stream named: any stream may use the memory once we return, which needs the
     * allocation complete.  The allocation stream holds nothing but allocations, which wait for
     * nothing (no internal dependencies), so this wait is for the allocation alone. */
    if (!stream) {
        st = usbeam_cuda_check(cudaStreamSynchronize(p->alloc_stream), "cudaStreamSynchronize", __FILE__, __LINE__);
        if (st != USBEAM_OK) {
            (void)cudaFreeAsync(*ptr, p->alloc_stream);
            *ptr = nullptr;
            return st;
        }
    }
    *pooled = 1;
    return USBEAM_OK;
}

extern "C" usbeam_status usbeam_device_free_after(int device, void *ptr, void *event, int after_legacy)
{
    if (!ptr) {
        if (event) (void)cudaEventDestroy((cudaEvent_t)event);
        return USBEAM_OK;
    }
    DeviceScope scope(device);
    usbeam_status st = scope.status();
    Pool *p = nullptr;
    if (st == USBEAM_OK) st = pool_for_device(device, &p);
    if (st == USBEAM_OK && !p->supported)
        st = usbeam_fail(USBEAM_ERR_INTERNAL, "usbeam_device_free_after: device %d has no memory pools", device);
    if (st == USBEAM_OK && event)
        st = usbeam_cuda_check(cudaStreamWaitEvent(p->free_stream, (cudaEvent_t)event, 0), "cudaStreamWaitEvent",
                               __FILE__, __LINE__);
    /* exported memory: consumers on the legacy default stream (or blocking streams, which it
     * orders) may still read it when their DLPack deleter runs */
    if (st == USBEAM_OK && after_legacy) st = usbeam_stream_wait((void *)p->free_stream, (void *)cudaStreamLegacy);
    if (st == USBEAM_OK) st = usbeam_cuda_check(cudaFreeAsync(ptr, p->free_stream), "cudaFreeAsync", __FILE__, __LINE__);
    /* a pending wait on a destroyed event still happens (cudaEventDestroy) */
    if (event) (void)cudaEventDestroy((cudaEvent_t)event);
    return st;
}

extern "C" usbeam_status usbeam_event_query(void *event, int *complete)
{
    if (!complete) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "complete must not be NULL");
    *complete = 1;
    if (!event) return USBEAM_OK;
    /* A buffer may be let go while this thread captures a graph (a DLPack import dropped at the
     * end of a plan call inside torch.cuda.graph): a query is one of the calls a capture
     * forbids its thread, and on a GPU it invalidates the capture (the next captured call, a
     * convolution, failed with CUDNN_STATUS_INTERNAL_ERROR, H200 2026-11-28).  Asking whether
     * work queued before is done is harmless, so it is asked in relaxed mode, as PyTorch's
     * allocator asks.  Uses inside the capture run at replay, and the graph's owner keeps the
     * memory it replays on alive (torch.cuda.graph's rule): their event-record nodes are not
     * what this asks about. */
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    cudaError_t exchanged = cudaThreadExchangeStreamCaptureMode(&mode);
    cudaError_t err = cudaEventQuery((cudaEvent_t)event);
    if (exchanged == cudaSuccess) (void)cudaThreadExchangeStreamCaptureMode(&mode);
    if (err == cudaErrorNotReady) {
        *complete = 0;
        return USBEAM_OK;
    }
    return usbeam_cuda_check(err, "cudaEventQuery", __FILE__, __LINE__);
}

extern "C" void usbeam_event_destroy(void *event)
{
    if (event) (void)cudaEventDestroy((cudaEvent_t)event);
}

extern "C" usbeam_status usbeam_stream_query(void *stream, int *idle)
{
    if (!idle) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "idle must not be NULL");
    *idle = 1;
    cudaError_t err = cudaStreamQuery((cudaStream_t)stream);
    if (err == cudaErrorNotReady) {
        *idle = 0;
        return USBEAM_OK;
    }
    return usbeam_cuda_check(err, "cudaStreamQuery", __FILE__, __LINE__);
}

extern "C" usbeam_status usbeam_stream_capturing(void *stream, int *capturing)
{
    if (!capturing) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "capturing must not be NULL");
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    USBEAM_CUDA_TRY(cudaStreamIsCapturing((cudaStream_t)stream, &status));
    *capturing = status != cudaStreamCaptureStatusNone;
    return USBEAM_OK;
}

extern "C" usbeam_status usbeam_device_malloc(int device, size_t bytes, void **ptr)
{
    if (!ptr) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "ptr is NULL");
    *ptr = nullptr;
    if (bytes > USBEAM_MAX_ALLOCATION)
        return usbeam_fail(USBEAM_ERR_SIZE_OVERFLOW, "device buffer of %zu bytes is too large", bytes);
    DeviceScope scope(device);
    if (scope.status() != USBEAM_OK) return scope.status();
    cudaError_t err = cudaMalloc(ptr, bytes ? bytes : 1); /* a valid, unique pointer even when empty */
    if (err == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        *ptr = nullptr;
        return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "cudaMalloc of %zu bytes on device %d: out of device memory",
                           bytes, device);
    }
    return usbeam_cuda_check(err, "cudaMalloc", __FILE__, __LINE__);
}

extern "C" usbeam_status usbeam_device_free(void *ptr)
{
    if (!ptr) return USBEAM_OK;
    USBEAM_CUDA_TRY(cudaFree(ptr));
    return USBEAM_OK;
}

extern "C" usbeam_status usbeam_pinned_malloc(size_t bytes, void **ptr)
{
    if (!ptr) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "ptr is NULL");
    *ptr = nullptr;
    if (bytes > USBEAM_MAX_ALLOCATION)
        return usbeam_fail(USBEAM_ERR_SIZE_OVERFLOW, "pinned buffer of %zu bytes is too large", bytes);
    USBEAM_CUDA_TRY(cudaMallocHost(ptr, bytes ? bytes : 1));
    return USBEAM_OK;
}

extern "C" usbeam_status usbeam_pinned_free(void *ptr)
{
    if (!ptr) return USBEAM_OK;
    USBEAM_CUDA_TRY(cudaFreeHost(ptr));
    return USBEAM_OK;
}

namespace {

/* The chunk loops of the two directions, run with the staging buffers locked and ready.
 * Upload: the host fills chunk i while the DMA of chunk i-1 runs; a chunk is refilled only
 * once the DMA that read it last has finished. */
usbeam_status upload_chunks(Staging *s, unsigned char *dst, const unsigned char *src, size_t bytes, cudaStream_t cs)
{
    const size_t n_chunks = (bytes + STAGING_CHUNK - 1) / STAGING_CHUNK;
    for (size_t i = 0; i < n_chunks; ++i) {
        const int b = (int)(i % STAGING_BUFFERS);
        const size_t offset = i * STAGING_CHUNK;
        const size_t len = bytes - offset < STAGING_CHUNK ? bytes - offset : STAGING_CHUNK;
        /* the DMA that last read this chunk must be finished before we overwrite it */
        if (i >= (size_t)STAGING_BUFFERS) USBEAM_CUDA_TRY(cudaEventSynchronize(s->done[b]));
        memcpy(s->chunk[b], src + offset, len);
        USBEAM_CUDA_TRY(cudaMemcpyAsync(dst + offset, s->chunk[b], len, cudaMemcpyHostToDevice, cs));
        USBEAM_CUDA_TRY(cudaEventRecord(s->done[b], cs));
    }
    for (size_t i = n_chunks > (size_t)STAGING_BUFFERS ? n_chunks - STAGING_BUFFERS : 0; i < n_chunks; ++i)
        USBEAM_CUDA_TRY(cudaEventSynchronize(s->done[i % STAGING_BUFFERS]));
    return USBEAM_OK;
}

/* Download: the DMA of chunk i+1 is queued before the host copies chunk i out, so the two
 * overlap. */
usbeam_status download_chunks(Staging *s, unsigned char *dst, const unsigned char *src, size_t bytes, cudaStream_t cs)
{
    const size_t n_chunks = (bytes + STAGING_CHUNK - 1) / STAGING_CHUNK;
    auto chunk_len = [&](size_t i) {
        const size_t offset = i * STAGING_CHUNK;
        return bytes - offset < STAGING_CHUNK ? bytes - offset : STAGING_CHUNK;
    };
    USBEAM_CUDA_TRY(cudaMemcpyAsync(s->chunk[0], src, chunk_len(0), cudaMemcpyDeviceToHost, cs));
    USBEAM_CUDA_TRY(cudaEventRecord(s->done[0], cs));
    for (size_t i = 0; i < n_chunks; ++i) {
        const int b = (int)(i % STAGING_BUFFERS);
        if (i + 1 < n_chunks) {
            const int next = (int)((i + 1) % STAGING_BUFFERS);
            USBEAM_CUDA_TRY(cudaMemcpyAsync(s->chunk[next], src + (i + 1) * STAGING_CHUNK, chunk_len(i + 1),
                                            cudaMemcpyDeviceToHost, cs));
            USBEAM_CUDA_TRY(cudaEventRecord(s->done[next], cs));
        }
        USBEAM_CUDA_TRY(cudaEventSynchronize(s->done[b]));
        memcpy(dst + i * STAGING_CHUNK, s->chunk[b], chunk_len(i));
    }
    return USBEAM_OK;
}

/* A host <-> device copy through the staging buffers of the device that holds the device
 * side, with that device current, on the caller's stream (after the work queued there);
 * complete on return.  What differs between the directions is the chunk loop. */
usbeam_status staged_copy(bool to_device, void *dst, const void *src, size_t bytes, void *stream)
{
    if (bytes == 0) return USBEAM_OK;
    const char *what = to_device ? "copy_to_device" : "copy_to_host";
    if (!dst || !src) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "%s: NULL pointer", what);
    int device = 0;
    usbeam_status st = to_device ? device_of(dst, "copy destination", &device)
                                 : device_of(src, "copy source", &device);
    if (st != USBEAM_OK) return st;
    DeviceScope scope(device);
    if (scope.status() != USBEAM_OK) return scope.status();
    Staging *s = nullptr;
    if ((st = staging_for_current_device(&s)) != USBEAM_OK) return st;
    std::lock_guard<std::mutex> hold(s->lock);
    if ((st = staging_ready(s)) != USBEAM_OK) return st;
    auto loop = to_device ? upload_chunks : download_chunks;
    return loop(s, (unsigned char *)dst, (const unsigned char *)src, bytes, (cudaStream_t)stream);
}

} // namespace

extern "C" usbeam_status usbeam_copy_to_device(void *dst_device, const void *src_host, size_t bytes, void *stream)
{
    return staged_copy(true, dst_device, src_host, bytes, stream);
}

extern "C" usbeam_status usbeam_copy_to_host(void *dst_host, const void *src_device, size_t bytes, void *stream)
{
    return staged_copy(false, dst_host, src_device, bytes, stream);
}

extern "C" usbeam_status usbeam_copy_device(void *dst_device, const void *src_device, size_t bytes, void *stream)
{
    if (bytes == 0) return USBEAM_OK;
    if (!dst_device || !src_device) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "copy_device: NULL pointer");
    USBEAM_CUDA_TRY(cudaMemcpyAsync(dst_device, src_device, bytes, cudaMemcpyDeviceToDevice, (cudaStream_t)stream));
    return USBEAM_OK;
}

extern "C" usbeam_status usbeam_stream_wait(void *consumer, void *producer)
{
    if (consumer == producer) return USBEAM_OK; /* one stream is already ordered */
    cudaEvent_t event;
    USBEAM_CUDA_TRY(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    usbeam_status st = usbeam_cuda_check(cudaEventRecord(event, (cudaStream_t)producer), "cudaEventRecord",
                                         __FILE__, __LINE__);
    if (st == USBEAM_OK)
        st = usbeam_cuda_check(cudaStreamWaitEvent((cudaStream_t)consumer, event, 0), "cudaStreamWaitEvent",
                               __FILE__, __LINE__);
    /* Destroying an event with a pending wait is allowed: the wait still happens. */
    (void)cudaEventDestroy(event);
    return st;
}

extern "C" usbeam_status usbeam_pointer_device(const void *ptr, int *device)
{
    if (!ptr || !device) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "ptr and device must not be NULL");
    return device_of(ptr, "pointer", device);
}

extern "C" usbeam_status usbeam_stream_synchronize(void *stream)
{
    USBEAM_CUDA_TRY(cudaStreamSynchronize((cudaStream_t)stream));
    return USBEAM_OK;
}

extern "C" usbeam_status usbeam_event_record(void **event, void *stream)
{
    if (!event) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "event is NULL");
    /* Inside a capture the record would be an event-record node (cudaEventRecordExternal)
     * naming this event, which its buffer destroys when let go: an array imported for one
     * call inside the capture goes at the call's end, and cudaStreamEndCapture then crashed
     * (H200, 2026-11-29).  A plain record adds no node and leaves the event unusable outside
     * the capture (cudaErrorCapturedEvent).  So nothing is recorded there: the graph's owner
     * keeps the memory it replays on alive and marks it used after each launch (Pipeline
     * does; torch.cuda.graph asks the same of its caller). */
    int capturing = 0;
    usbeam_status st = usbeam_stream_capturing(stream, &capturing);
    if (st != USBEAM_OK) return st;
    if (capturing)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT,
                           "a buffer's last use cannot be recorded on a stream being captured into a CUDA graph");
    if (!*event) {
        cudaEvent_t created;
        USBEAM_CUDA_TRY(cudaEventCreateWithFlags(&created, cudaEventDisableTiming));
        *event = (void *)created;
    }
    USBEAM_CUDA_TRY(cudaEventRecord((cudaEvent_t)*event, (cudaStream_t)stream));
    return USBEAM_OK;
}

extern "C" usbeam_status usbeam_event_wait_destroy(void *event)
{
    if (!event) return USBEAM_OK;
    usbeam_status st = usbeam_cuda_check(cudaEventSynchronize((cudaEvent_t)event), "cudaEventSynchronize",
                                         __FILE__, __LINE__);
    (void)cudaEventDestroy((cudaEvent_t)event);
    return st;
}

extern "C" usbeam_status usbeam_cuda_d2d_bandwidth(int device, size_t bytes, int repeats, double *gbps)
{
    if (!gbps) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "gbps must not be NULL");
    if (bytes == 0 || bytes > USBEAM_MAX_ALLOCATION)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "bytes must be in 1..%zu (got %zu)",
                           (size_t)USBEAM_MAX_ALLOCATION, bytes);
    if (repeats < 1 || repeats > 10000)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "repeats must be in 1..10000 (got %d)", repeats);
    int count = 0;
    usbeam_status counted = usbeam_cuda_device_count(&count);
    if (counted != USBEAM_OK) return counted;
    if (device < 0 || device >= count)
        return usbeam_fail(USBEAM_ERR_NO_DEVICE, "device %d: %d CUDA device(s) available", device, count);
    int previous = 0;
    USBEAM_CUDA_TRY(cudaGetDevice(&previous));
    USBEAM_CUDA_TRY(cudaSetDevice(device));
    void *src = nullptr, *dst = nullptr;
    cudaStream_t stream = nullptr;
    cudaEvent_t start = nullptr, stop = nullptr;
    float *ms = (float *)usbeam_alloc((size_t)repeats * sizeof(float));
    usbeam_status st = ms ? USBEAM_OK : usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "bandwidth probe");
    if (st == USBEAM_OK) st = usbeam_cuda_check(cudaMalloc(&src, bytes), "cudaMalloc", __FILE__, __LINE__);
    if (st == USBEAM_OK) st = usbeam_cuda_check(cudaMalloc(&dst, bytes), "cudaMalloc", __FILE__, __LINE__);
    if (st == USBEAM_OK)
        st = usbeam_cuda_check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate", __FILE__,
                               __LINE__);
    if (st == USBEAM_OK) st = usbeam_cuda_check(cudaEventCreate(&start), "cudaEventCreate", __FILE__, __LINE__);
    if (st == USBEAM_OK) st = usbeam_cuda_check(cudaEventCreate(&stop), "cudaEventCreate", __FILE__, __LINE__);
    if (st == USBEAM_OK) st = usbeam_cuda_check(cudaMemsetAsync(src, 1, bytes, stream), "cudaMemset", __FILE__, __LINE__);
    for (int r = -2; r < repeats && st == USBEAM_OK; ++r) { /* two untimed warm-up copies */
        st = usbeam_cuda_check(cudaEventRecord(start, stream), "cudaEventRecord", __FILE__, __LINE__);
        if (st == USBEAM_OK)
            st = usbeam_cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream), "cudaMemcpyAsync",
                                   __FILE__, __LINE__);
        if (st == USBEAM_OK) st = usbeam_cuda_check(cudaEventRecord(stop, stream), "cudaEventRecord", __FILE__, __LINE__);
        if (st == USBEAM_OK) st = usbeam_cuda_check(cudaEventSynchronize(stop), "cudaEventSynchronize", __FILE__, __LINE__);
        if (st == USBEAM_OK && r >= 0)
            st = usbeam_cuda_check(cudaEventElapsedTime(&ms[r], start, stop), "cudaEventElapsedTime", __FILE__, __LINE__);
    }
    if (st == USBEAM_OK) {
        for (int i = 1; i < repeats; ++i) /* insertion sort: the median */
            for (int j = i; j > 0 && ms[j - 1] > ms[j]; --j) {
                const float t = ms[j];
                ms[j] = ms[j - 1];
                ms[j - 1] = t;
            }
        const double median = repeats % 2 ? ms[repeats / 2] : 0.5 * (ms[repeats / 2 - 1] + ms[repeats / 2]);
        *gbps = median > 0.0 ? 2.0 * (double)bytes / (median * 1e-3) / 1e9 : 0.0;
    }
    if (start) (void)cudaEventDestroy(start);
    if (stop) (void)cudaEventDestroy(stop);
    if (stream) (void)cudaStreamDestroy(stream);
    (void)cudaFree(src);
    (void)cudaFree(dst);
    usbeam_free(ms);
    (void)cudaSetDevice(previous);
    return st;
}
