/*
 * cusparse.cpp - the cuSPARSE subset usbeam uses (cuda/das_sparse.cu), emulated on the CPU for
 * USBEAM_CUDA=emu builds (see cuda_emu.h): a handle with a stream, CSR and dense-matrix
 * descriptors, and SpMM C = alpha op(A) B + beta C for a CSR A (32-bit indices, zero base),
 * column-major B and C, float32 or complex64, non-transposed operands only (what usbeam
 * calls; anything else is refused with CUSPARSE_STATUS_NOT_SUPPORTED).  C is not read when
 * beta is 0.  Each row sums its non-zeros in order, in the operands' own precision
 * (CSR_ALG1 is deterministic on a GPU as well, but its order is not this one).  The CSR
 * arrays and the dense matrices must lie inside device allocations; work goes on the
 * handle's stream like any other.
 */
#include "cuda_emu.h"

#include <complex>
#include <cstdio>
#include <cstring>
/* cusparse.h names parameters blockDim, which the CUDA emulator defines as a macro */
#pragma push_macro("blockDim")
#undef blockDim
#include <cusparse.h>
#pragma pop_macro("blockDim")

struct cusparseContext {
    cudaStream_t stream = nullptr;
};

struct cusparseSpMatDescr {
    int64_t rows, cols, nnz;
    void *offsets, *columns, *values;
    cusparseIndexType_t offset_type, column_type;
    cusparseIndexBase_t base;
    cudaDataType type;
};

struct cusparseDnMatDescr {
    int64_t rows, cols, ld;
    void *values;
    cudaDataType type;
    cusparseOrder_t order;
};

namespace {

cusparseStatus_t refuse(const char *what, cusparseStatus_t status = CUSPARSE_STATUS_INVALID_VALUE)
{
    fprintf(stderr, "[usbeam cuda emulator] cuSPARSE: %s\n", what);
    return status;
}

size_t type_size(cudaDataType t) { return t == CUDA_C_32F ? 8 : 4; }

template <class T>
void spmm(int64_t m, int64_t n, const int32_t *off, const int32_t *col, const T *val, const T *b, int64_t ldb, T *c,
          int64_t ldc, T alpha, T beta)
{
    for (int64_t j = 0; j < n; ++j)
        for (int64_t i = 0; i < m; ++i) {
            T sum = T(0);
            for (int32_t k = off[i]; k < off[i + 1]; ++k) sum += val[k] * b[(int64_t)col[k] + j * ldb];
            c[i + j * ldc] = beta == T(0) ? alpha * sum : alpha * sum + beta * c[i + j * ldc];
        }
}

}  // namespace

cusparseStatus_t cusparseCreate(cusparseHandle_t *handle)
{
    if (!handle) return refuse("cusparseCreate: NULL handle");
    *handle = new cusparseContext;
    return CUSPARSE_STATUS_SUCCESS;
}

cusparseStatus_t cusparseDestroy(cusparseHandle_t handle)
{
    delete handle;
    return CUSPARSE_STATUS_SUCCESS;
}

cusparseStatus_t cusparseSetStream(cusparseHandle_t handle, cudaStream_t stream)
{
    if (!handle) return CUSPARSE_STATUS_NOT_INITIALIZED;
    handle->stream = stream;
    return CUSPARSE_STATUS_SUCCESS;
}

cusparseStatus_t cusparseCreateCsr(cusparseSpMatDescr_t *descr, int64_t rows, int64_t cols, int64_t nnz,
                                   void *offsets, void *columns, void *values, cusparseIndexType_t offset_type,
                                   cusparseIndexType_t column_type, cusparseIndexBase_t base, cudaDataType type)
{
    if (!descr || rows < 0 || cols < 0 || nnz < 0) return refuse("cusparseCreateCsr: bad size");
    if (offset_type != CUSPARSE_INDEX_32I || column_type != CUSPARSE_INDEX_32I || base != CUSPARSE_INDEX_BASE_ZERO ||
        (type != CUDA_R_32F && type != CUDA_C_32F))
        return refuse("cusparseCreateCsr: only 32-bit zero-based indices, float32 / complex64 values are emulated",
                      CUSPARSE_STATUS_NOT_SUPPORTED);
    if (!usbeam_emu::is_device_range(offsets, (size_t)(rows + 1) * 4) ||
        (nnz && (!usbeam_emu::is_device_range(columns, (size_t)nnz * 4) ||
                 !usbeam_emu::is_device_range(values, (size_t)nnz * type_size(type)))))
        return refuse("cusparseCreateCsr: the CSR arrays are not inside device allocations");
    *descr = new cusparseSpMatDescr{rows, cols, nnz, offsets, columns, values, offset_type, column_type, base, type};
    return CUSPARSE_STATUS_SUCCESS;
}

cusparseStatus_t cusparseDestroySpMat(cusparseConstSpMatDescr_t descr)
{
    delete descr;
    return CUSPARSE_STATUS_SUCCESS;
}

cusparseStatus_t cusparseCreateDnMat(cusparseDnMatDescr_t *descr, int64_t rows, int64_t cols, int64_t ld, void *values,
                                     cudaDataType type, cusparseOrder_t order)
{
    if (!descr || rows < 0 || cols < 0) return refuse("cusparseCreateDnMat: bad size");
    if (order != CUSPARSE_ORDER_COL || (type != CUDA_R_32F && type != CUDA_C_32F))
        return refuse("cusparseCreateDnMat: only column-major float32 / complex64 is emulated",
                      CUSPARSE_STATUS_NOT_SUPPORTED);
    if (ld < (rows > 1 ? rows : 1)) return refuse("cusparseCreateDnMat: leading dimension < rows");
    *descr = new cusparseDnMatDescr{rows, cols, ld, values, type, order};
    return CUSPARSE_STATUS_SUCCESS;
}

cusparseStatus_t cusparseDestroyDnMat(cusparseConstDnMatDescr_t descr)
{
    delete descr;
    return CUSPARSE_STATUS_SUCCESS;
}

cusparseStatus_t cusparseDnMatSetValues(cusparseDnMatDescr_t descr, void *values)
{
    if (!descr) return refuse("cusparseDnMatSetValues: NULL descriptor");
    descr->values = values;
    return CUSPARSE_STATUS_SUCCESS;
}

static cusparseStatus_t check_spmm(cusparseHandle_t handle, cusparseOperation_t op_a, cusparseOperation_t op_b,
                                   cusparseConstSpMatDescr_t a, cusparseConstDnMatDescr_t b, cusparseDnMatDescr_t c,
                                   cudaDataType compute)
{
    if (!handle) return CUSPARSE_STATUS_NOT_INITIALIZED;
    if (!a || !b || !c) return refuse("cusparseSpMM: NULL descriptor");
    if (op_a != CUSPARSE_OPERATION_NON_TRANSPOSE || op_b != CUSPARSE_OPERATION_NON_TRANSPOSE)
        return refuse("cusparseSpMM: only non-transposed operands are emulated", CUSPARSE_STATUS_NOT_SUPPORTED);
    if (a->type != compute || b->type != compute || c->type != compute)
        return refuse("cusparseSpMM: operand and compute types differ", CUSPARSE_STATUS_NOT_SUPPORTED);
    if (b->rows != a->cols || c->rows != a->rows || c->cols != b->cols) return refuse("cusparseSpMM: shapes do not agree");
    return CUSPARSE_STATUS_SUCCESS;
}

cusparseStatus_t cusparseSpMM_bufferSize(cusparseHandle_t handle, cusparseOperation_t op_a, cusparseOperation_t op_b,
                                         const void *, cusparseConstSpMatDescr_t a, cusparseConstDnMatDescr_t b,
                                         const void *, cusparseDnMatDescr_t c, cudaDataType compute, cusparseSpMMAlg_t,
                                         size_t *bytes)
{
    cusparseStatus_t st = check_spmm(handle, op_a, op_b, a, b, c, compute);
    if (st != CUSPARSE_STATUS_SUCCESS) return st;
    if (!bytes) return refuse("cusparseSpMM_bufferSize: NULL size");
    *bytes = 256; /* a small buffer, so a plan that forgot to allocate it faults */
    return CUSPARSE_STATUS_SUCCESS;
}

cusparseStatus_t cusparseSpMM(cusparseHandle_t handle, cusparseOperation_t op_a, cusparseOperation_t op_b,
                              const void *alpha, cusparseConstSpMatDescr_t a, cusparseConstDnMatDescr_t b,
                              const void *beta, cusparseDnMatDescr_t c, cudaDataType compute, cusparseSpMMAlg_t,
                              void *buffer)
{
    cusparseStatus_t st = check_spmm(handle, op_a, op_b, a, b, c, compute);
    if (st != CUSPARSE_STATUS_SUCCESS) return st;
    const size_t item = type_size(compute);
    if (!usbeam_emu::is_device_range(buffer, 256)) return refuse("cusparseSpMM: the work buffer is not device memory");
    if ((b->cols && !usbeam_emu::is_device_range(b->values, (size_t)((b->cols - 1) * b->ld + b->rows) * item)) ||
        (c->cols && !usbeam_emu::is_device_range(c->values, (size_t)((c->cols - 1) * c->ld + c->rows) * item)))
        return refuse("cusparseSpMM: a dense matrix is not inside one device allocation");
    const int64_t m = a->rows, n = b->cols, ldb = b->ld, ldc = c->ld;
    const int32_t *off = (const int32_t *)a->offsets, *col = (const int32_t *)a->columns;
    const void *val = a->values, *bv = b->values;
    void *cv = c->values;
    if (compute == CUDA_R_32F) {
        const float al = *(const float *)alpha, be = *(const float *)beta;
        usbeam_emu::enqueue_work(handle->stream, [=]() {
            spmm<float>(m, n, off, col, (const float *)val, (const float *)bv, ldb, (float *)cv, ldc, al, be);
        });
    } else {
        using Z = std::complex<float>;
        const Z al = *(const Z *)alpha, be = *(const Z *)beta;
        usbeam_emu::enqueue_work(handle->stream, [=]() {
            spmm<Z>(m, n, off, col, (const Z *)val, (const Z *)bv, ldb, (Z *)cv, ldc, al, be);
        });
    }
    return CUSPARSE_STATUS_SUCCESS;
}
