/*
 * cublas_plan.cuh - the cuBLAS handle a CUDA plan owns (cuda/exec.cu), shared by the twins
 * that multiply through cuBLAS (Hadamard 'gemm', clutter 'gemm', the SVD clutter filter).
 *
 * Full FP32 (CUBLAS_PEDANTIC_MATH: never TF32 or reduced-precision reductions) and a
 * workspace the plan allocates at creation: with its own workspace cuBLAS allocates nothing
 * inside execute, which a CUDA-graph capture of the chain needs.  cublasSetStream resets the
 * handle's workspace to the default (cublas_api.h), so each execute binds the stream and then
 * the workspace again (the plan may have been moved to another stream since: set_stream).
 */
#ifndef USBEAM_CUBLAS_PLAN_CUH
#define USBEAM_CUBLAS_PLAN_CUH

#include "runtime/exec.cuh"

#include <cublas_v2.h>

/* Bytes of the plan-owned cuBLAS workspace (enough for the GEMM shapes the twins use). */
constexpr size_t USBEAM_CUBLAS_WORKSPACE_BYTES = 32u << 20;

/* At plan creation: the workspace from exec (freed with it) and a handle in pedantic mode;
 * the caller destroys the handle (cublasDestroy) when it is not NULL. */
usbeam_status usbeam_cublas_plan_create(usbeam_cuda_exec *exec, cublasHandle_t *handle, void **workspace);
/* At each execute, before the first cuBLAS call: stream, then workspace. */
usbeam_status usbeam_cublas_plan_bind(cublasHandle_t handle, void *workspace, cudaStream_t stream);

#endif
