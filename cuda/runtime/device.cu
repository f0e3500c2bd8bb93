/*
 * device.cu - CUDA device query and the error translation every CUDA file uses.
 *
 * Built only when setup.py finds nvcc (USBEAM_CUDA=auto|1).  Linked against the
 * static CUDA runtime, so importing usbeam on a machine without a driver still works:
 * the query then reports zero devices instead of failing.
 */
#include "common/usbeam_internal.h"
#include "runtime/cuda_common.cuh"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

extern "C" usbeam_status usbeam_cuda_check(cudaError_t err, const char *what, const char *file, int line)
{
    if (err == cudaSuccess) return USBEAM_OK;
    return usbeam_fail(USBEAM_ERR_CUDA, "%s failed at %s:%d: %s (%s)", what, file, line,
                       cudaGetErrorName(err), cudaGetErrorString(err));
}

extern "C" usbeam_status usbeam_cublas_check(int status, const char *what, const char *file, int line)
{
    if (status == (int)CUBLAS_STATUS_SUCCESS) return USBEAM_OK;
    return usbeam_fail(USBEAM_ERR_CUBLAS, "%s failed at %s:%d: cuBLAS status %d (%s)", what, file,
                       line, status, cublasGetStatusString((cublasStatus_t)status));
}

extern "C" usbeam_status usbeam_cuda_device_count(int *count)
{
    if (!count) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "count is NULL");
    *count = 0;
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    /* No device, or no driver (or one older than the runtime), is an answer, not an error. */
    if (err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver) {
        (void)cudaGetLastError();
        return USBEAM_OK;
    }
    /* Anything else (a driver that fails to initialise, a device in a bad state, a missing
     * fabric manager ...) is reported, so the user learns why the GPU is not usable. */
    if (err != cudaSuccess) {
        (void)cudaGetLastError();
        return usbeam_fail(USBEAM_ERR_CUDA, "the CUDA device query failed: cudaGetDeviceCount: %s (%s)",
                           cudaGetErrorName(err), cudaGetErrorString(err));
    }
    *count = n;
    return USBEAM_OK;
}

extern "C" usbeam_status usbeam_cuda_device_info(int device, usbeam_device_info *info)
{
    if (!info) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "info is NULL");
    memset(info, 0, sizeof *info);
    int n = 0;
    usbeam_status st = usbeam_cuda_device_count(&n);
    if (st != USBEAM_OK) return st;
    if (device < 0 || device >= n)
        return usbeam_fail(USBEAM_ERR_NO_DEVICE, "device %d: %d CUDA device(s) available", device, n);
    cudaDeviceProp prop;
    USBEAM_CUDA_TRY(cudaGetDeviceProperties(&prop, device));
    snprintf(info->name, sizeof info->name, "%s", prop.name);
    info->major = prop.major;
    info->minor = prop.minor;
    info->total_memory_bytes = prop.totalGlobalMem;
    info->multiprocessors = prop.multiProcessorCount;
    USBEAM_CUDA_TRY(cudaDriverGetVersion(&info->driver_version));
    USBEAM_CUDA_TRY(cudaRuntimeGetVersion(&info->runtime_version));
    return USBEAM_OK;
}
