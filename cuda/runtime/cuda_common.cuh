/*
 * cuda_common.cuh - checked CUDA / cuBLAS calls for the CUDA sources.
 * Every runtime and cuBLAS call goes through USBEAM_CUDA_TRY / USBEAM_CUBLAS_TRY, which
 * turn a failure into a usbeam_status with a message (never an abort).
 */
#ifndef USBEAM_CUDA_COMMON_CUH
#define USBEAM_CUDA_COMMON_CUH

#include "common/usbeam_internal.h"
#include <cuda_runtime.h>

extern "C" usbeam_status usbeam_cuda_check(cudaError_t err, const char *what, const char *file, int line);
extern "C" usbeam_status usbeam_cublas_check(int status, const char *what, const char *file, int line);

#define USBEAM_CUDA_TRY(call)                                                              \
    do {                                                                                   \
        usbeam_status usbeam_st_ = usbeam_cuda_check((call), #call, __FILE__, __LINE__);   \
        if (usbeam_st_ != USBEAM_OK) return usbeam_st_;                                    \
    } while (0)

#define USBEAM_CUBLAS_TRY(call)                                                                 \
    do {                                                                                        \
        usbeam_status usbeam_st_ = usbeam_cublas_check((int)(call), #call, __FILE__, __LINE__); \
        if (usbeam_st_ != USBEAM_OK) return usbeam_st_;                                         \
    } while (0)

#endif
