/*
 * usbeam/device.h - device memory, copies, streams, events, graphs, the CUDA execution state of plans, and the live upload ring.
 *
 * Implemented in cuda/runtime/ (usbeam._cuda); without it every call answers USBEAM_ERR_NO_BACKEND.
 */
#ifndef USBEAM_DEVICE_H
#define USBEAM_DEVICE_H

#include "usbeam/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Device memory, host <-> device copies, streams, and the CUDA execution state of plans
 * (cuda/memory.cu, cuda/exec.cu).  Device pointers and CUDA streams are void *; a NULL
 * stream is CUDA's legacy default stream.  A build without CUDA answers every call with
 * USBEAM_ERR_NO_BACKEND (usbeam_device_free and usbeam_pinned_free accept NULL anywhere). */
usbeam_status usbeam_device_malloc(int device, size_t bytes, void **ptr);   /* cudaMalloc on device */
usbeam_status usbeam_device_free(void *ptr);   /* cudaFree (synchronises with the device); NULL is a no-op */
usbeam_status usbeam_pinned_malloc(size_t bytes, void **ptr);   /* page-locked host memory */
usbeam_status usbeam_pinned_free(void *ptr);
/* Host <-> device copies of bytes, ordered after the work already queued on stream and
 * complete when the call returns.  Pageable host memory goes through the library's pinned
 * staging buffers (chunked, double-buffered), so the DMA engine overlaps the host memcpy. */
usbeam_status usbeam_copy_to_device(void *dst_device, const void *src_host, size_t bytes, void *stream);
usbeam_status usbeam_copy_to_host(void *dst_host, const void *src_device, size_t bytes, void *stream);
/* Device -> device copy queued on stream (asynchronous). */
usbeam_status usbeam_copy_device(void *dst_device, const void *src_device, size_t bytes, void *stream);
/* Device -> device cudaMemcpy bandwidth on device: (bytes read + bytes written) / time, GB/s,
 * the median of repeats copies of bytes timed with CUDA events (a benchmark's yardstick). */
usbeam_status usbeam_cuda_d2d_bandwidth(int device, size_t bytes, int repeats, double *gbps);
/* CUDA device that owns a device (or managed) pointer; USBEAM_ERR_INVALID_ARGUMENT when
 * ptr is host memory. */
usbeam_status usbeam_pointer_device(const void *ptr, int *device);
/* Make consumer wait (on the device, not the host) for the work queued so far on producer. */
usbeam_status usbeam_stream_wait(void *consumer, void *producer);
usbeam_status usbeam_stream_synchronize(void *stream);
/* Record an event on stream into *event (created on first use, timing disabled); refused on a
 * stream being captured into a graph, whose node would outlive the event (memory.cu) ... */
usbeam_status usbeam_event_record(void **event, void *stream);
/* ... and later wait for it on the host and destroy it (NULL event: no-op), or ask whether the
 * work before it has finished (*complete; NULL event: 1; no host wait), or just destroy it. */
usbeam_status usbeam_event_wait_destroy(void *event);
usbeam_status usbeam_event_query(void *event, int *complete);
void usbeam_event_destroy(void *event);
/* *idle = 1 when everything queued on stream has finished (cudaStreamQuery; no host wait). */
usbeam_status usbeam_stream_query(void *stream, int *idle);
/* *capturing = 1 while stream is being captured into a CUDA graph. */
usbeam_status usbeam_stream_capturing(void *stream, int *capturing);
/* Stream-ordered device memory (CUDA's pool allocator; cudaMalloc on a device without pools,
 * *pooled = 0, freed with usbeam_device_free).  Work queued on stream after the call may use
 * it; stream NULL: any stream may once the call returns.  Never waits for queued work. */
usbeam_status usbeam_device_alloc(int device, size_t bytes, void *stream, void **ptr, int *pooled);
/* Free a pooled allocation of device once the work recorded in event (NULL: none; destroyed
 * here) and, with after_legacy, the work queued so far on the legacy default stream have
 * finished; returns at once (cudaFreeAsync). */
usbeam_status usbeam_device_free_after(int device, void *ptr, void *event, int after_legacy);
/* CUDA graphs (cuda/graph.cu): capture the work queued on stream (not the legacy default
 * stream) between begin and end into an executable graph, replayed by launch on any stream;
 * abort ends a capture that failed half-way and drops it. */
usbeam_status usbeam_graph_capture_begin(void *stream);
usbeam_status usbeam_graph_capture_end(void *stream, void **graph_exec);
void usbeam_graph_capture_abort(void *stream);
usbeam_status usbeam_graph_launch(void *graph_exec, void *stream);
void usbeam_graph_destroy(void *graph_exec);

/* The CUDA execution state of a plan created with USBEAM_BACKEND_CUDA: its device, the
 * stream it runs on (its own, created at plan creation, or one the caller sets) and a pair
 * of CUDA events per stage.  Execute of a CUDA plan takes device pointers, queues its work
 * on that stream and returns without waiting; NVTX ranges name every stage. */
typedef struct usbeam_cuda_exec usbeam_cuda_exec;
#define USBEAM_CUDA_MAX_STAGES 8
/* Run on stream (a cudaStream_t of the plan's device, owned by the caller, who keeps it
 * alive while the plan uses it); NULL returns to the plan's own stream. */
usbeam_status usbeam_cuda_exec_set_stream(usbeam_cuda_exec *exec, void *stream);
void *usbeam_cuda_exec_stream(const usbeam_cuda_exec *exec);
int usbeam_cuda_exec_device(const usbeam_cuda_exec *exec);
/* Stage names and times (ms, CUDA events) of the last execute; waits for it to finish.
 * *n_stages = 0 before the first execute. */
usbeam_status usbeam_cuda_exec_timings(usbeam_cuda_exec *exec, size_t capacity, const char **names,
                                       float *ms, size_t *n_stages);
/* Device memory the plan holds, bytes. */
size_t usbeam_cuda_exec_device_bytes(const usbeam_cuda_exec *exec);
/* Input faults the plan's kernels met since the last call, as bits (0: none); read and
 * cleared without any CUDA call, so it covers the executes that have finished (call it after
 * synchronising with the plan's stream).  The beamformers (das, rca) set
 * USBEAM_INPUT_FAULT_NONFINITE when a sum they formed is NaN or infinite, i.e. when a sample
 * they read is; B-mode and the Doppler display when a pixel they read is. */
#define USBEAM_INPUT_FAULT_NONFINITE 1u
unsigned usbeam_cuda_exec_take_input_faults(usbeam_cuda_exec *exec);

/* CUDA half of a live session (cuda/runtime/slot_ring.cu; a CPU-only build answers USBEAM_ERR_NO_BACKEND).
 * A ring of n_slots pinned host buffers and device buffers, an upload stream and a compute
 * stream.  Per slot k: host_slot(k) waits until the previous upload from host buffer k has
 * finished (the CPU then maps channels into it); upload(k) makes the upload stream wait
 * until compute has released device buffer k, copies, and records "uploaded"; acquire(k)
 * makes the compute stream wait for "uploaded" and returns the device buffer and the
 * compute stream (cudaStream_t as void *) to enqueue the pipeline on; release(k) records
 * "consumed".  So a device slot is never overwritten while in use nor read while partly
 * written, and copies overlap compute.  Tested under the CUDA emulator, not yet on a GPU. */
typedef struct usbeam_live_cuda_ring usbeam_live_cuda_ring;
usbeam_status usbeam_live_cuda_ring_create(int device, int n_slots, size_t slot_bytes,
                                           usbeam_live_cuda_ring **ring);
usbeam_status usbeam_live_cuda_ring_host_slot(usbeam_live_cuda_ring *ring, int slot, void **host);
usbeam_status usbeam_live_cuda_ring_upload(usbeam_live_cuda_ring *ring, int slot, size_t bytes);
usbeam_status usbeam_live_cuda_ring_acquire(usbeam_live_cuda_ring *ring, int slot, void **device,
                                            void **stream);
usbeam_status usbeam_live_cuda_ring_release(usbeam_live_cuda_ring *ring, int slot);
/* Seconds the last upload of slot took (event timing; waits for it to finish). */
usbeam_status usbeam_live_cuda_ring_upload_seconds(usbeam_live_cuda_ring *ring, int slot, double *seconds);
/* GPU seconds from acquire(slot) to release(slot) on the compute stream; waits for release's
 * event, i.e. for the work queued on the compute stream in between. */
usbeam_status usbeam_live_cuda_ring_compute_seconds(usbeam_live_cuda_ring *ring, int slot, double *seconds);
/* *done = 1 if release(slot)'s event has completed (the work queued before it finished), 0 if
 * not yet; never waits (cudaEventQuery).  The slot must have been released. */
usbeam_status usbeam_live_cuda_ring_query(usbeam_live_cuda_ring *ring, int slot, int *done);
usbeam_status usbeam_live_cuda_ring_synchronize(usbeam_live_cuda_ring *ring);
void usbeam_live_cuda_ring_destroy(usbeam_live_cuda_ring *ring);
/* Rings created and not yet destroyed in this process (leak checks). */
int usbeam_live_cuda_ring_count(void);
/* Pinned host-to-device cudaMemcpy bandwidth (GB/s, median of repeats) of a bytes-sized copy:
 * the reference the live upload rate is compared with. */
usbeam_status usbeam_live_cuda_h2d_bandwidth(int device, size_t bytes, int repeats, double *gbps);

#ifdef __cplusplus
}
#endif
#endif /* USBEAM_DEVICE_H */
