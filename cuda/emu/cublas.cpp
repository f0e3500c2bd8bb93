/*
 * cublas.cpp - the cuBLAS subset usbeam uses, emulated on the CPU for USBEAM_CUDA=emu builds
 * (see cuda_emu.h).  Column-major, BLAS semantics: C = alpha op(A) op(B) + beta C, with C not
 * read when beta is 0; herk writes only the `uplo` triangle (the other one keeps whatever it
 * held, the 0xFF poison of a fresh allocation included) and zeroes the imaginary part of the
 * diagonal.  Sums run in the operands' own precision, in index order.  Every matrix must lie
 * inside one device allocation; work goes on the handle's stream like any other.
 */
#include "cuda_emu.h"

#include <complex>
#include <cublas_v2.h>
#include <cstdio>

struct cublasContext {
    cudaStream_t stream = nullptr;
    cublasMath_t math = CUBLAS_DEFAULT_MATH;
};

namespace {

template <class T>
bool matrix_in_device(const T *p, long long rows, long long cols, long long ld, long long stride = 0, int batches = 1)
{
    if (rows == 0 || cols == 0) return true;
    size_t last = (size_t)((cols - 1) * ld + rows) + (size_t)(batches - 1) * (size_t)stride;
    return usbeam_emu::is_device_range(p, last * sizeof(T));
}

cublasStatus_t invalid(const char *what)
{
    fprintf(stderr, "[usbeam cuda emulator] %s\n", what);
    return CUBLAS_STATUS_INVALID_VALUE;
}

template <class T>
T op_element(const T *a, cublasOperation_t op, long long i, long long l, long long ld)
{
    if (op == CUBLAS_OP_N) return a[i + l * ld];
    T v = a[l + i * ld];
    if constexpr (!std::is_floating_point_v<T>)
        if (op == CUBLAS_OP_C) return std::conj(v);
    return v;
}

template <class T>
cublasStatus_t gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, T alpha,
                    const T *A, int lda, long long sa, const T *B, int ldb, long long sb, T beta, T *C, int ldc,
                    long long sc, int batches, const char *name)
{
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (m < 0 || n < 0 || k < 0 || batches < 0) return invalid("gemm: negative size");
    int a_rows = ta == CUBLAS_OP_N ? m : k, a_cols = ta == CUBLAS_OP_N ? k : m;
    int b_rows = tb == CUBLAS_OP_N ? k : n, b_cols = tb == CUBLAS_OP_N ? n : k;
    if (lda < std::max(1, a_rows) || ldb < std::max(1, b_rows) || ldc < std::max(1, m)) return invalid("gemm: leading dimension");
    if (!matrix_in_device(A, a_rows, a_cols, lda, sa, batches) || !matrix_in_device(B, b_rows, b_cols, ldb, sb, batches) ||
        !matrix_in_device(C, m, n, ldc, sc, batches)) {
        fprintf(stderr, "[usbeam cuda emulator] %s: ", name);
        return invalid("a matrix is not inside one device allocation");
    }
    usbeam_emu::enqueue_work(h->stream, [=]() {
        for (int b = 0; b < batches; ++b) {
            const T *a = A + b * sa, *bb = B + b * sb;
            T *c = C + b * sc;
            for (long long j = 0; j < n; ++j)
                for (long long i = 0; i < m; ++i) {
                    T sum = T(0);
                    for (long long l = 0; l < k; ++l) sum += op_element(a, ta, i, l, lda) * op_element(bb, tb, l, j, ldb);
                    c[i + j * ldc] = beta == T(0) ? alpha * sum : alpha * sum + beta * c[i + j * ldc];
                }
        }
    });
    return CUBLAS_STATUS_SUCCESS;
}

template <class R>
cublasStatus_t herk(cublasHandle_t h, cublasFillMode_t uplo, cublasOperation_t trans, int n, int k, R alpha,
                    const std::complex<R> *A, int lda, R beta, std::complex<R> *C, int ldc)
{
    using Z = std::complex<R>;
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (trans == CUBLAS_OP_T) return invalid("herk: CUBLAS_OP_T is not allowed");
    int a_rows = trans == CUBLAS_OP_N ? n : k, a_cols = trans == CUBLAS_OP_N ? k : n;
    if (n < 0 || k < 0 || lda < std::max(1, a_rows) || ldc < std::max(1, n)) return invalid("herk: size");
    if (!matrix_in_device(A, a_rows, a_cols, lda) || !matrix_in_device(C, n, n, ldc))
        return invalid("herk: a matrix is not inside one device allocation");
    usbeam_emu::enqueue_work(h->stream, [=]() {
        for (long long j = 0; j < n; ++j)
            for (long long i = 0; i < n; ++i) {
                if (uplo == CUBLAS_FILL_MODE_UPPER ? i > j : i < j) continue;
                Z sum = Z(0);
                for (long long l = 0; l < k; ++l) {
                    /* op(A) op(A)^H: (i, j) = sum_l op(A)(i, l) conj(op(A)(j, l)) */
                    Z x = trans == CUBLAS_OP_N ? A[i + l * lda] : std::conj(A[l + i * lda]);
                    Z y = trans == CUBLAS_OP_N ? A[j + l * lda] : std::conj(A[l + j * lda]);
                    sum += x * std::conj(y);
                }
                Z value = beta == R(0) ? alpha * sum : alpha * sum + beta * C[i + j * ldc];
                if (i == j) value = Z(value.real(), R(0));
                C[i + j * ldc] = value;
            }
    });
    return CUBLAS_STATUS_SUCCESS;
}

} /* namespace */

extern "C" {

cublasStatus_t cublasCreate(cublasHandle_t *handle)
{
    *handle = new cublasContext;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy(cublasHandle_t handle)
{
    delete handle;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream)
{
    if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
    handle->stream = stream;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode)
{
    if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
    handle->math = mode;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetWorkspace(cublasHandle_t handle, void *workspace, size_t bytes)
{
    if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (bytes && !usbeam_emu::is_device_range(workspace, bytes)) return invalid("cublasSetWorkspace: not device memory");
    return CUBLAS_STATUS_SUCCESS;
}
const char *cublasGetStatusString(cublasStatus_t status)
{
    switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    default: return "CUBLAS_STATUS (emulated)";
    }
}

cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                         int k, const float *alpha, const float *A, int lda, long long sa,
                                         const float *B, int ldb, long long sb, const float *beta, float *C, int ldc,
                                         long long sc, int batches)
{
    return gemm<float>(h, ta, tb, m, n, k, *alpha, A, lda, sa, B, ldb, sb, *beta, C, ldc, sc, batches,
                       "cublasSgemmStridedBatched");
}
cublasStatus_t cublasSgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                           const float *alpha, const float *A, int lda, const float *B, int ldb, const float *beta,
                           float *C, int ldc)
{
    return gemm<float>(h, ta, tb, m, n, k, *alpha, A, lda, 0, B, ldb, 0, *beta, C, ldc, 0, 1, "cublasSgemm");
}
cublasStatus_t cublasCgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                           const cuComplex *alpha, const cuComplex *A, int lda, const cuComplex *B, int ldb,
                           const cuComplex *beta, cuComplex *C, int ldc)
{
    using Z = std::complex<float>;
    return gemm<Z>(h, ta, tb, m, n, k, Z(alpha->x, alpha->y), (const Z *)A, lda, 0, (const Z *)B, ldb, 0,
                   Z(beta->x, beta->y), (Z *)C, ldc, 0, 1, "cublasCgemm");
}
cublasStatus_t cublasZgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                         int k, const cuDoubleComplex *alpha, const cuDoubleComplex *A, int lda,
                                         long long sa, const cuDoubleComplex *B, int ldb, long long sb,
                                         const cuDoubleComplex *beta, cuDoubleComplex *C, int ldc, long long sc,
                                         int batches)
{
    using Z = std::complex<double>;
    return gemm<Z>(h, ta, tb, m, n, k, Z(alpha->x, alpha->y), (const Z *)A, lda, sa, (const Z *)B, ldb, sb,
                   Z(beta->x, beta->y), (Z *)C, ldc, sc, batches, "cublasZgemmStridedBatched");
}
cublasStatus_t cublasCherk(cublasHandle_t h, cublasFillMode_t uplo, cublasOperation_t trans, int n, int k,
                           const float *alpha, const cuComplex *A, int lda, const float *beta, cuComplex *C, int ldc)
{
    return herk<float>(h, uplo, trans, n, k, *alpha, (const std::complex<float> *)A, lda, *beta,
                       (std::complex<float> *)C, ldc);
}
cublasStatus_t cublasZherk(cublasHandle_t h, cublasFillMode_t uplo, cublasOperation_t trans, int n, int k,
                           const double *alpha, const cuDoubleComplex *A, int lda, const double *beta,
                           cuDoubleComplex *C, int ldc)
{
    return herk<double>(h, uplo, trans, n, k, *alpha, (const std::complex<double> *)A, lda, *beta,
                        (std::complex<double> *)C, ldc);
}

} /* extern "C" */
