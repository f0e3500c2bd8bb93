/*
 * slot_ring.cu - CUDA half of live sessions: the pinned/device slot ring with an upload stream
 * and a compute stream synchronised by events, and the pinned host-to-device bandwidth
 * reference.  Protocol (per slot k, see usbeam.h "family: live"):
 *
 *   CPU:      host_slot(k)  -- waits for event uploaded[k] (previous DMA out of host[k] done)
 *             map channels into host[k] (usbeam_live_gather_execute)
 *   upload:   wait consumed[k] -> memcpyAsync host[k] -> dev[k] -> record uploaded[k]
 *   compute:  wait uploaded[k] -> pipeline kernels on dev[k]  -> record consumed[k]
 *
 * so dev[k] is never overwritten while compute reads it and never read while partly
 * written, host[k] is never rewritten while the DMA reads it, and uploads of one slot
 * overlap compute on another.  Layout: slot_bytes of raw bytes per slot (the mapped frame).
 * compute_start[k] (recorded once the compute stream has waited for the upload) and
 * consumed[k] time the compute of a frame on the GPU; upload_start[k] and uploaded[k] its
 * copy.  query(k) asks, without waiting, whether consumed[k] has completed: the session keeps
 * two frames in flight (it queues frame k+1's chain before it waits for frame k) and asks it
 * before that launch to know whether frame k's pipeline stage events can still be read (the
 * next call re-records them).  The bookkeeping flags of slot k are only touched by the thread that owns the slot
 * at that step of usbeam.live's state machine (FREE -> WRITING -> READY -> UPLOADING ->
 * UPLOADED -> COMPUTING), whose transitions happen under the session's lock.
 *
 * STATUS: compiled with nvcc (sm_90) and tested under the CPU emulator of the CUDA runtime
 * (cuda/emu: stream/event order); not yet run on a GPU.
 */
#include "common/usbeam_internal.h"
#include "runtime/cuda_common.cuh"

#include <algorithm>
#include <atomic>
#include <cuda_runtime.h>
#include <vector>

#define LIVE_MAX_SLOTS 64

/* Rings alive in this process (a leak check for sessions stopped and restarted). */
static std::atomic<int> live_ring_count{0};

struct usbeam_live_cuda_ring {
    int device = 0;
    int n_slots = 0;
    size_t slot_bytes = 0;
    void *host[LIVE_MAX_SLOTS] = {};
    void *dev[LIVE_MAX_SLOTS] = {};
    cudaEvent_t upload_start[LIVE_MAX_SLOTS] = {};
    cudaEvent_t uploaded[LIVE_MAX_SLOTS] = {};
    cudaEvent_t compute_start[LIVE_MAX_SLOTS] = {};
    cudaEvent_t consumed[LIVE_MAX_SLOTS] = {};
    bool upload_recorded[LIVE_MAX_SLOTS] = {};
    bool consume_recorded[LIVE_MAX_SLOTS] = {};
    bool compute_started[LIVE_MAX_SLOTS] = {};
    cudaStream_t upload = nullptr;
    cudaStream_t compute = nullptr;
};

static usbeam_status check_slot(const usbeam_live_cuda_ring *ring, int slot)
{
    if (!ring) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "ring must not be NULL");
    if (slot < 0 || slot >= ring->n_slots)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "slot must be in 0..%d (got %d)", ring->n_slots - 1, slot);
    return USBEAM_OK;
}

/* The calling thread's current device, switched to the ring's for one call and restored on
 * return: a session's threads may use other devices in between (a ring call must not leave
 * them on this one). */
struct DeviceScope {
    int previous = -1;
    cudaError_t enter(int device)
    {
        cudaError_t err = cudaGetDevice(&previous);
        if (err != cudaSuccess || previous == device) {
            previous = -1;
            return err;
        }
        return cudaSetDevice(device);
    }
    ~DeviceScope()
    {
        if (previous >= 0) (void)cudaSetDevice(previous);
    }
};

extern "C" void usbeam_live_cuda_ring_destroy(usbeam_live_cuda_ring *ring)
{
    if (!ring) return;
    DeviceScope scope;
    (void)scope.enter(ring->device);
    if (ring->upload) (void)cudaStreamSynchronize(ring->upload);
    if (ring->compute) (void)cudaStreamSynchronize(ring->compute);
    for (int k = 0; k < LIVE_MAX_SLOTS; ++k) {
        if (ring->host[k]) (void)cudaFreeHost(ring->host[k]);
        if (ring->dev[k]) (void)cudaFree(ring->dev[k]);
        if (ring->upload_start[k]) (void)cudaEventDestroy(ring->upload_start[k]);
        if (ring->uploaded[k]) (void)cudaEventDestroy(ring->uploaded[k]);
        if (ring->compute_start[k]) (void)cudaEventDestroy(ring->compute_start[k]);
        if (ring->consumed[k]) (void)cudaEventDestroy(ring->consumed[k]);
    }
    if (ring->upload) (void)cudaStreamDestroy(ring->upload);
    if (ring->compute) (void)cudaStreamDestroy(ring->compute);
    (void)cudaGetLastError();
    delete ring;
    live_ring_count.fetch_sub(1);
}

extern "C" int usbeam_live_cuda_ring_count(void) { return live_ring_count.load(); }

static usbeam_status ring_init(usbeam_live_cuda_ring *r)
{
    DeviceScope scope;
    USBEAM_CUDA_TRY(scope.enter(r->device));
    USBEAM_CUDA_TRY(cudaStreamCreateWithFlags(&r->upload, cudaStreamNonBlocking));
    USBEAM_CUDA_TRY(cudaStreamCreateWithFlags(&r->compute, cudaStreamNonBlocking));
    for (int k = 0; k < r->n_slots; ++k) {
        USBEAM_CUDA_TRY(cudaHostAlloc(&r->host[k], r->slot_bytes, cudaHostAllocDefault));
        USBEAM_CUDA_TRY(cudaMalloc(&r->dev[k], r->slot_bytes));
        USBEAM_CUDA_TRY(cudaEventCreate(&r->upload_start[k]));
        USBEAM_CUDA_TRY(cudaEventCreate(&r->uploaded[k]));
        USBEAM_CUDA_TRY(cudaEventCreate(&r->compute_start[k]));
        USBEAM_CUDA_TRY(cudaEventCreate(&r->consumed[k])); /* timed: compute_start -> consumed */
    }
    return USBEAM_OK;
}

extern "C" usbeam_status usbeam_live_cuda_ring_create(int device, int n_slots, size_t slot_bytes,
                                                      usbeam_live_cuda_ring **ring)
{
    if (!ring) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "ring must not be NULL");
    *ring = nullptr;
    if (n_slots < 2 || n_slots > LIVE_MAX_SLOTS)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "slots must be in 2..%d (got %d)", LIVE_MAX_SLOTS, n_slots);
    if (slot_bytes == 0 || slot_bytes > USBEAM_MAX_ALLOCATION)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "slot_bytes must be in 1..%zu (got %zu)",
                           (size_t)USBEAM_MAX_ALLOCATION, slot_bytes);
    int count = 0;
    usbeam_status counted = usbeam_cuda_device_count(&count);
    if (counted != USBEAM_OK) return counted;
    if (device < 0 || device >= count)
        return usbeam_fail(USBEAM_ERR_NO_DEVICE, "device %d: %d CUDA device(s) available", device, count);
    usbeam_live_cuda_ring *r = new (std::nothrow) usbeam_live_cuda_ring();
    if (!r) return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "live ring");
    r->device = device;
    r->n_slots = n_slots;
    r->slot_bytes = slot_bytes;
    live_ring_count.fetch_add(1);
    usbeam_status st = ring_init(r);
    if (st != USBEAM_OK) {
        usbeam_live_cuda_ring_destroy(r);
        return st;
    }
    *ring = r;
    return USBEAM_OK;
}

extern "C" usbeam_status usbeam_live_cuda_ring_host_slot(usbeam_live_cuda_ring *ring, int slot, void **host)
{
    usbeam_status st = check_slot(ring, slot);
    if (st != USBEAM_OK) return st;
    if (!host) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "host must not be NULL");
    /* the pinned buffer may still be the source of an in-flight DMA */
    if (ring->upload_recorded[slot]) USBEAM_CUDA_TRY(cudaEventSynchronize(ring->uploaded[slot]));
    *host = ring->host[slot];
    return USBEAM_OK;
}

extern "C" usbeam_status usbeam_live_cuda_ring_upload(usbeam_live_cuda_ring *ring, int slot, size_t bytes)
{
    usbeam_status st = check_slot(ring, slot);
    if (st != USBEAM_OK) return st;
    if (bytes == 0 || bytes > ring->slot_bytes)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "bytes must be in 1..%zu (got %zu)", ring->slot_bytes, bytes);
    DeviceScope scope;
    USBEAM_CUDA_TRY(scope.enter(ring->device));
    /* the device buffer may still be read by the compute stream */
    if (ring->consume_recorded[slot]) USBEAM_CUDA_TRY(cudaStreamWaitEvent(ring->upload, ring->consumed[slot], 0));
    USBEAM_CUDA_TRY(cudaEventRecord(ring->upload_start[slot], ring->upload));
    USBEAM_CUDA_TRY(cudaMemcpyAsync(ring->dev[slot], ring->host[slot], bytes, cudaMemcpyHostToDevice, ring->upload));
    USBEAM_CUDA_TRY(cudaEventRecord(ring->uploaded[slot], ring->upload));
    ring->upload_recorded[slot] = true;
    return USBEAM_OK;
}

extern "C" usbeam_status usbeam_live_cuda_ring_acquire(usbeam_live_cuda_ring *ring, int slot, void **device,
                                                       void **stream)
{
    usbeam_status st = check_slot(ring, slot);
    if (st != USBEAM_OK) return st;
    if (!device || !stream) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "device and stream must not be NULL");
    if (!ring->upload_recorded[slot])
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "slot %d has not been uploaded", slot);
    DeviceScope scope;
    USBEAM_CUDA_TRY(scope.enter(ring->device));
    USBEAM_CUDA_TRY(cudaStreamWaitEvent(ring->compute, ring->uploaded[slot], 0));
    USBEAM_CUDA_TRY(cudaEventRecord(ring->compute_start[slot], ring->compute));
    ring->compute_started[slot] = true;
    *device = ring->dev[slot];
    *stream = (void *)ring->compute;
    return USBEAM_OK;
}

extern "C" usbeam_status usbeam_live_cuda_ring_release(usbeam_live_cuda_ring *ring, int slot)
{
    usbeam_status st = check_slot(ring, slot);
    if (st != USBEAM_OK) return st;
    DeviceScope scope;
    USBEAM_CUDA_TRY(scope.enter(ring->device));
    USBEAM_CUDA_TRY(cudaEventRecord(ring->consumed[slot], ring->compute));
    ring->consume_recorded[slot] = true;
    return USBEAM_OK;
}

extern "C" usbeam_status usbeam_live_cuda_ring_query(usbeam_live_cuda_ring *ring, int slot, int *done)
{
    usbeam_status st = check_slot(ring, slot);
    if (st != USBEAM_OK) return st;
    if (!done) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "done must not be NULL");
    *done = 0;
    if (!ring->consume_recorded[slot])
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "slot %d has not been released", slot);
    DeviceScope scope;
    USBEAM_CUDA_TRY(scope.enter(ring->device));
    /* a query, never a wait: the session asks it before queueing the next frame's chain */
    cudaError_t err = cudaEventQuery(ring->consumed[slot]);
    if (err == cudaErrorNotReady) return USBEAM_OK;
    *done = err == cudaSuccess;
    return usbeam_cuda_check(err, "cudaEventQuery", __FILE__, __LINE__);
}

extern "C" usbeam_status usbeam_live_cuda_ring_compute_seconds(usbeam_live_cuda_ring *ring, int slot,
                                                               double *seconds)
{
    usbeam_status st = check_slot(ring, slot);
    if (st != USBEAM_OK) return st;
    if (!seconds) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "seconds must not be NULL");
    if (!ring->compute_started[slot] || !ring->consume_recorded[slot])
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "slot %d has not been acquired and released", slot);
    USBEAM_CUDA_TRY(cudaEventSynchronize(ring->consumed[slot]));
    float ms = 0.0f;
    USBEAM_CUDA_TRY(cudaEventElapsedTime(&ms, ring->compute_start[slot], ring->consumed[slot]));
    *seconds = ms * 1e-3;
    return USBEAM_OK;
}

extern "C" usbeam_status usbeam_live_cuda_ring_upload_seconds(usbeam_live_cuda_ring *ring, int slot, double *seconds)
{
    usbeam_status st = check_slot(ring, slot);
    if (st != USBEAM_OK) return st;
    if (!seconds) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "seconds must not be NULL");
    if (!ring->upload_recorded[slot])
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "slot %d has not been uploaded", slot);
    USBEAM_CUDA_TRY(cudaEventSynchronize(ring->uploaded[slot]));
    float ms = 0.0f;
    USBEAM_CUDA_TRY(cudaEventElapsedTime(&ms, ring->upload_start[slot], ring->uploaded[slot]));
    *seconds = ms * 1e-3;
    return USBEAM_OK;
}

extern "C" usbeam_status usbeam_live_cuda_ring_synchronize(usbeam_live_cuda_ring *ring)
{
    if (!ring) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "ring must not be NULL");
    DeviceScope scope;
    USBEAM_CUDA_TRY(scope.enter(ring->device));
    USBEAM_CUDA_TRY(cudaStreamSynchronize(ring->upload));
    USBEAM_CUDA_TRY(cudaStreamSynchronize(ring->compute));
    return USBEAM_OK;
}

/* Buffers and events of the bandwidth probe, released on every path. */
struct bandwidth_probe {
    void *host = nullptr, *dev = nullptr;
    cudaEvent_t start = nullptr, stop = nullptr;
    cudaStream_t stream = nullptr;
    ~bandwidth_probe()
    {
        if (stream) (void)cudaStreamSynchronize(stream);
        if (host) (void)cudaFreeHost(host);
        if (dev) (void)cudaFree(dev);
        if (start) (void)cudaEventDestroy(start);
        if (stop) (void)cudaEventDestroy(stop);
        if (stream) (void)cudaStreamDestroy(stream);
        (void)cudaGetLastError();
    }
};

static usbeam_status measure_h2d(int device, size_t bytes, int repeats, double *gbps)
{
    DeviceScope scope;
    USBEAM_CUDA_TRY(scope.enter(device));
    bandwidth_probe p;
    USBEAM_CUDA_TRY(cudaHostAlloc(&p.host, bytes, cudaHostAllocDefault));
    USBEAM_CUDA_TRY(cudaMalloc(&p.dev, bytes));
    USBEAM_CUDA_TRY(cudaEventCreate(&p.start));
    USBEAM_CUDA_TRY(cudaEventCreate(&p.stop));
    USBEAM_CUDA_TRY(cudaStreamCreateWithFlags(&p.stream, cudaStreamNonBlocking));
    std::vector<double> seconds;
    for (int i = 0; i < repeats + 2; ++i) { /* two warm-up copies */
        USBEAM_CUDA_TRY(cudaEventRecord(p.start, p.stream));
        USBEAM_CUDA_TRY(cudaMemcpyAsync(p.dev, p.host, bytes, cudaMemcpyHostToDevice, p.stream));
        USBEAM_CUDA_TRY(cudaEventRecord(p.stop, p.stream));
        USBEAM_CUDA_TRY(cudaEventSynchronize(p.stop));
        float ms = 0.0f;
        USBEAM_CUDA_TRY(cudaEventElapsedTime(&ms, p.start, p.stop));
        if (i >= 2) seconds.push_back(ms * 1e-3);
    }
    std::sort(seconds.begin(), seconds.end());
    double median = seconds[seconds.size() / 2];
    *gbps = median > 0 ? (double)bytes / median / 1e9 : 0.0;
    return USBEAM_OK;
}

extern "C" usbeam_status usbeam_live_cuda_h2d_bandwidth(int device, size_t bytes, int repeats, double *gbps)
{
    if (!gbps) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "gbps must not be NULL");
    if (bytes == 0 || bytes > USBEAM_MAX_ALLOCATION)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "bytes must be > 0 (got %zu)", bytes);
    if (repeats < 1) return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "repeats must be >= 1 (got %d)", repeats);
    int count = 0;
    usbeam_status counted = usbeam_cuda_device_count(&count);
    if (counted != USBEAM_OK) return counted;
    if (device < 0 || device >= count)
        return usbeam_fail(USBEAM_ERR_NO_DEVICE, "device %d: %d CUDA device(s) available", device, count);
    try {
        return measure_h2d(device, bytes, repeats, gbps);
    } catch (...) {
        return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "bandwidth probe: host allocation failed");
    }
}
