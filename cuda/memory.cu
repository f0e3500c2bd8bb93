/*
 * memory.cu - device and pinned allocations, host <-> device copies through pinned staging
 * buffers, and stream / event helpers (the C API of csrc/usbeam.h, "family cuda").
 *
 * Why staging: a cudaMemcpy from pageable host memory is synchronous and goes through a
 * driver bounce buffer anyway.  Copying through our own page-locked chunks, two of them,
 * lets the host memcpy of one chunk overlap the DMA of the other, and keeps the copy on the
 * caller's stream so it is ordered after the kernels queued there.
 *
 * Staging buffers: per device, STAGING_BUFFERS chunks of STAGING_CHUNK bytes, allocated on
 * first use and kept for the life of the process; one mutex per device serialises copies
 * (they are host-bound, so running two at once would not be faster).
 * Units: bytes.  Streams are cudaStream_t passed as void *.
 */
#include "cuda_common.cuh"

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

} // namespace

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

extern "C" usbeam_status usbeam_copy_to_device(void *dst_device, const void *src_host, size_t bytes, void *stream)
{
    if (bytes == 0) return USBEAM_OK;
    if (!dst_device || !src_host) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "copy_to_device: NULL pointer");
    int device = 0;
    usbeam_status st = device_of(dst_device, "copy destination", &device);
    if (st != USBEAM_OK) return st;
    DeviceScope scope(device);
    if (scope.status() != USBEAM_OK) return scope.status();
    Staging *s = nullptr;
    if ((st = staging_for_current_device(&s)) != USBEAM_OK) return st;
    std::lock_guard<std::mutex> hold(s->lock);
    if ((st = staging_ready(s)) != USBEAM_OK) return st;
    cudaStream_t cs = (cudaStream_t)stream;
    const unsigned char *src = (const unsigned char *)src_host;
    unsigned char *dst = (unsigned char *)dst_device;
    size_t n_chunks = (bytes + STAGING_CHUNK - 1) / STAGING_CHUNK;
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

extern "C" usbeam_status usbeam_copy_to_host(void *dst_host, const void *src_device, size_t bytes, void *stream)
{
    if (bytes == 0) return USBEAM_OK;
    if (!dst_host || !src_device) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "copy_to_host: NULL pointer");
    int device = 0;
    usbeam_status st = device_of(src_device, "copy source", &device);
    if (st != USBEAM_OK) return st;
    DeviceScope scope(device);
    if (scope.status() != USBEAM_OK) return scope.status();
    Staging *s = nullptr;
    if ((st = staging_for_current_device(&s)) != USBEAM_OK) return st;
    std::lock_guard<std::mutex> hold(s->lock);
    if ((st = staging_ready(s)) != USBEAM_OK) return st;
    cudaStream_t cs = (cudaStream_t)stream;
    const unsigned char *src = (const unsigned char *)src_device;
    unsigned char *dst = (unsigned char *)dst_host;
    const size_t n_chunks = (bytes + STAGING_CHUNK - 1) / STAGING_CHUNK;
    auto chunk_len = [&](size_t i) {
        const size_t offset = i * STAGING_CHUNK;
        return bytes - offset < STAGING_CHUNK ? bytes - offset : STAGING_CHUNK;
    };
    /* Queue the DMA of chunk i+1 before copying chunk i out, so the two overlap. */
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
    usbeam_cuda_device_count(&count);
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
