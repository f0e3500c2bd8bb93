/*
 * exec.cuh - the CUDA execution state every CUDA plan owns (cuda/exec.cu): device, stream,
 * per-stage CUDA events and NVTX ranges, and the device buffers it allocated at plan creation.
 *
 * A twin's execute runs:
 *     usbeam_cuda_exec_begin(exec)            (makes the plan's device current)
 *     usbeam_cuda_stage_begin(exec, STAGE)    (event + NVTX push)
 *     kernel<<<..., usbeam_cuda_exec_cuda_stream(exec)>>>(...); USBEAM_CUDA_TRY(cudaGetLastError());
 *     usbeam_cuda_stage_end(exec, STAGE)      (event + NVTX pop)
 *     usbeam_cuda_exec_end(exec)              (restores the caller's device)
 */
#ifndef USBEAM_CUDA_EXEC_CUH
#define USBEAM_CUDA_EXEC_CUH

#include "runtime/cuda_common.cuh"

/* Create the state on the current device: its own non-blocking stream and a start/stop event
 * pair for each of the n_stages stages (names are static strings). */
usbeam_status usbeam_cuda_exec_create(const char *const *stage_names, int n_stages, usbeam_cuda_exec **exec);
void usbeam_cuda_exec_destroy(usbeam_cuda_exec *exec);
/* cudaMalloc of bytes on the plan's device, counted in usbeam_cuda_exec_device_bytes and freed
 * by usbeam_cuda_exec_destroy. */
usbeam_status usbeam_cuda_exec_alloc(usbeam_cuda_exec *exec, size_t bytes, const char *what, void **ptr);
/* Host -> device copy of plan tables in the plan's stream order; src may be freed on return. */
usbeam_status usbeam_cuda_exec_upload(usbeam_cuda_exec *exec, void *dst, const void *src, size_t bytes);
/* Zero bytes of plan memory in the plan's stream order (cudaMemsetAsync). */
usbeam_status usbeam_cuda_exec_zero(usbeam_cuda_exec *exec, void *dst, size_t bytes);
cudaStream_t usbeam_cuda_exec_cuda_stream(const usbeam_cuda_exec *exec);
usbeam_status usbeam_cuda_exec_begin(usbeam_cuda_exec *exec);
void usbeam_cuda_exec_end(usbeam_cuda_exec *exec);
usbeam_status usbeam_cuda_stage_begin(usbeam_cuda_exec *exec, int stage);
usbeam_status usbeam_cuda_stage_end(usbeam_cuda_exec *exec, int stage);
/* Lets `kernel` launch with `bytes` of dynamic shared memory on the current device.  The
 * limit belongs to the kernel, not to a plan: it is raised to the device's opt-in maximum,
 * never set to one plan's size (which would lower it under a plan created earlier). */
usbeam_status usbeam_cuda_allow_dynamic_shared(const void *kernel, size_t bytes);
/* A word the plan's kernels set (a plain store of a USBEAM_INPUT_FAULT_* bit) when they read
 * input that is not finite, in mapped page-locked host memory: *device_flag is its device
 * address, allocated on the first call and freed with the state.  The host reads and clears
 * it with usbeam_cuda_exec_take_input_faults (usbeam.h), once the work has finished. */
usbeam_status usbeam_cuda_exec_input_fault_flag(usbeam_cuda_exec *exec, unsigned **device_flag);
/* Device properties the twins size their launches with. */
int usbeam_cuda_exec_max_shared_optin(const usbeam_cuda_exec *exec);
/* The grid of a grid-stride launch: 8 blocks per multiprocessor of the plan's device, a few
 * waves, which hides latency without more blocks than the device runs at once. */
usbeam_status usbeam_cuda_exec_grid_cap(const usbeam_cuda_exec *exec, unsigned *cap);

#endif
