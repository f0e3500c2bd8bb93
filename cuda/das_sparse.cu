/*
 * das_sparse.cu - CUDA twin of csrc/beamform/das_sparse.c: delay-and-sum as the CSR operator
 * A (n_points x n_columns) built on the host at plan creation, applied with cusparseSpMM.
 *
 * Layouts (device): in (n_frames, n_transmits, n_elements, n_samples) int16 / float32 RF or
 * complex64 IQ; out (n_frames, n_points) float32 / complex64.  Row-major in is the
 * column-major n_columns x n_frames matrix B (ld n_columns), and column-major C = A B
 * (n_points x n_frames, ld n_points) is row-major out: cuSPARSE reads and writes the caller's
 * buffers in place (int16 RF is first converted to float32 in a plan buffer).
 * Stages: das_sparse.convert (int16 / float32 RF -> float32, or a scan of the IQ that flags
 * NaN / inf in the plan's input-fault word, as the gather twin does) and das_sparse.spmm.
 * cuSPARSE: CSR with 32-bit indices, CUSPARSE_SPMM_CSR_ALG1 (deterministic), compute type the
 * data's (float32 / complex64), its work buffer allocated at creation (execute allocates
 * nothing; a CUDA-graph capture sees only kernels).  The dense descriptors are made once and
 * pointed at each call's buffers with cusparseDnMatSetValues.
 */
#include "runtime/cuda_common.cuh"
#include "runtime/exec.cuh"

/* cusparse.h names parameters blockDim, which the CUDA emulator defines as a macro */
#pragma push_macro("blockDim")
#undef blockDim
#include <cusparse.h>
#pragma pop_macro("blockDim")
#include <stdint.h>
#include <string.h>

namespace {

const char *const STAGE_NAMES[] = {"das_sparse.convert", "das_sparse.spmm"};
enum { STAGE_CONVERT, STAGE_SPMM };

unsigned grid_blocks(size_t n)
{
    size_t blocks = (n + 255) / 256;
    return (unsigned)(blocks < 4096 ? (blocks ? blocks : 1) : 4096);
}

/* RF to float32 (grid-stride); float input flags a non-finite value in *fault. */
template <class T>
__global__ void convert_rf(const T *in, float *out, size_t n, unsigned *fault)
{
    unsigned bad = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const float v = (float)in[i];
        out[i] = v;
        bad |= !(v - v == 0.0f);
    }
    if (bad) *fault = USBEAM_INPUT_FAULT_NONFINITE;
}

/* IQ is read in place by cuSPARSE: this pass only flags non-finite samples. */
__global__ void scan_iq(const float *in, size_t n, unsigned *fault)
{
    unsigned bad = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        bad |= !(in[i] - in[i] == 0.0f);
    if (bad) *fault = USBEAM_INPUT_FAULT_NONFINITE;
}

usbeam_status cusparse_check(cusparseStatus_t status, const char *what, int line)
{
    if (status == CUSPARSE_STATUS_SUCCESS) return USBEAM_OK;
    if (status == CUSPARSE_STATUS_ALLOC_FAILED)
        return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "cuSPARSE: %s: out of memory (das_sparse.cu:%d)", what, line);
    return usbeam_fail(USBEAM_ERR_CUDA, "cuSPARSE: %s failed (status %d, das_sparse.cu:%d)", what, (int)status, line);
}

}  // namespace

#define USBEAM_CUSPARSE_TRY(call)                                                    \
    do {                                                                             \
        usbeam_status usbeam_st_ = cusparse_check((call), #call, __LINE__);          \
        if (usbeam_st_ != USBEAM_OK) return usbeam_st_;                              \
    } while (0)

struct usbeam_das_sparse_cuda {
    usbeam_cuda_exec *exec;
    usbeam_dtype in_dtype;
    int is_iq;
    size_t n_points, n_columns, n_frames, nnz;
    int32_t *row_offsets, *columns; /* device CSR */
    float *values;                  /* device, (nnz) or (nnz, 2) */
    float *converted;               /* device, RF input as float32 (n_frames * n_columns) */
    void *buffer;                   /* cuSPARSE's SpMM work buffer */
    unsigned *fault;                /* the exec's input-fault word */
    cusparseHandle_t handle;
    cusparseSpMatDescr_t a;
    cusparseDnMatDescr_t b, c;
};

extern "C" void usbeam_das_sparse_cuda_destroy(usbeam_das_sparse_cuda *p)
{
    if (!p) return;
    if (p->a) (void)cusparseDestroySpMat(p->a);
    if (p->b) (void)cusparseDestroyDnMat(p->b);
    if (p->c) (void)cusparseDestroyDnMat(p->c);
    if (p->handle) (void)cusparseDestroy(p->handle);
    usbeam_cuda_exec_destroy(p->exec); /* waits for queued work, frees the device buffers */
    usbeam_free(p);
}

extern "C" usbeam_cuda_exec *usbeam_das_sparse_cuda_exec(usbeam_das_sparse_cuda *p) { return p ? p->exec : nullptr; }

static usbeam_status create_twin(usbeam_das_sparse_cuda *p, const usbeam_das_sparse_view *csr)
{
    usbeam_cuda_exec *e = p->exec;
    const size_t value_floats = p->is_iq ? 2 : 1, nnz = csr->nnz ? csr->nnz : 1;
    usbeam_status st;
    if ((st = usbeam_cuda_exec_alloc(e, (p->n_points + 1) * sizeof(int32_t), "das sparse row offsets",
                                     (void **)&p->row_offsets)) != USBEAM_OK ||
        (st = usbeam_cuda_exec_alloc(e, nnz * sizeof(int32_t), "das sparse columns", (void **)&p->columns)) != USBEAM_OK ||
        (st = usbeam_cuda_exec_alloc(e, nnz * value_floats * sizeof(float), "das sparse values", (void **)&p->values)) != USBEAM_OK)
        return st;
    if ((st = usbeam_cuda_exec_upload(e, p->row_offsets, csr->row_offsets, (p->n_points + 1) * sizeof(int32_t))) != USBEAM_OK)
        return st;
    if (csr->nnz) {
        if ((st = usbeam_cuda_exec_upload(e, p->columns, csr->columns, csr->nnz * sizeof(int32_t))) != USBEAM_OK ||
            (st = usbeam_cuda_exec_upload(e, p->values, csr->values, csr->nnz * value_floats * sizeof(float))) != USBEAM_OK)
            return st;
    }
    size_t dense;
    if (usbeam_mul_size(p->n_columns, p->n_frames, &dense) != 0)
        return usbeam_fail(USBEAM_ERR_SIZE_OVERFLOW, "data: frames x transmits x elements x samples is too large");
    if (!p->is_iq &&
        (st = usbeam_cuda_exec_alloc(e, dense * sizeof(float), "das sparse converted RF", (void **)&p->converted)) != USBEAM_OK)
        return st;
    if ((st = usbeam_cuda_exec_input_fault_flag(e, &p->fault)) != USBEAM_OK) return st;

    const cudaDataType type = p->is_iq ? CUDA_C_32F : CUDA_R_32F;
    USBEAM_CUSPARSE_TRY(cusparseCreate(&p->handle));
    USBEAM_CUSPARSE_TRY(cusparseCreateCsr(&p->a, (int64_t)p->n_points, (int64_t)p->n_columns, (int64_t)csr->nnz,
                                          p->row_offsets, p->columns, p->values, CUSPARSE_INDEX_32I,
                                          CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, type));
    /* placeholders until execute points them at the call's buffers: the value buffer has the
     * right size for neither, but cuSPARSE reads no values before SpMM */
    USBEAM_CUSPARSE_TRY(cusparseCreateDnMat(&p->b, (int64_t)p->n_columns, (int64_t)p->n_frames, (int64_t)p->n_columns,
                                            p->values, type, CUSPARSE_ORDER_COL));
    USBEAM_CUSPARSE_TRY(cusparseCreateDnMat(&p->c, (int64_t)p->n_points, (int64_t)p->n_frames, (int64_t)p->n_points,
                                            p->values, type, CUSPARSE_ORDER_COL));
    const float one[2] = {1.0f, 0.0f}, zero[2] = {0.0f, 0.0f};
    size_t bytes = 0;
    USBEAM_CUSPARSE_TRY(cusparseSpMM_bufferSize(p->handle, CUSPARSE_OPERATION_NON_TRANSPOSE,
                                                CUSPARSE_OPERATION_NON_TRANSPOSE, one, p->a, p->b, zero, p->c, type,
                                                CUSPARSE_SPMM_CSR_ALG1, &bytes));
    return usbeam_cuda_exec_alloc(e, bytes ? bytes : 16, "cuSPARSE SpMM buffer", &p->buffer);
}

extern "C" usbeam_status usbeam_das_sparse_cuda_create(const usbeam_das_params *params, const usbeam_das_sparse_view *csr,
                                                       usbeam_das_sparse_cuda **out)
{
    if (!params || !csr || !out) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "params, csr and out must not be NULL");
    *out = nullptr;
    usbeam_das_sparse_cuda *p = (usbeam_das_sparse_cuda *)usbeam_alloc(sizeof *p);
    if (!p) return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "das sparse CUDA plan");
    memset(p, 0, sizeof *p);
    p->in_dtype = params->input_dtype;
    p->is_iq = csr->is_complex;
    p->n_points = csr->n_rows;
    p->n_columns = csr->n_columns;
    p->n_frames = params->n_frames;
    p->nnz = csr->nnz;
    usbeam_status st = usbeam_cuda_exec_create(STAGE_NAMES, 2, &p->exec);
    if (st == USBEAM_OK) st = create_twin(p, csr);
    if (st != USBEAM_OK) {
        usbeam_das_sparse_cuda_destroy(p);
        return st;
    }
    *out = p;
    return USBEAM_OK;
}

static usbeam_status run(usbeam_das_sparse_cuda *p, const void *in, void *out, cudaStream_t stream)
{
    usbeam_cuda_exec *e = p->exec;
    const size_t n = p->n_columns * p->n_frames;
    usbeam_status st = usbeam_cuda_stage_begin(e, STAGE_CONVERT);
    if (st != USBEAM_OK) return st;
    if (p->is_iq)
        scan_iq<<<grid_blocks(2 * n), 256, 0, stream>>>((const float *)in, 2 * n, p->fault);
    else if (p->in_dtype == USBEAM_DTYPE_INT16)
        convert_rf<int16_t><<<grid_blocks(n), 256, 0, stream>>>((const int16_t *)in, p->converted, n, p->fault);
    else
        convert_rf<float><<<grid_blocks(n), 256, 0, stream>>>((const float *)in, p->converted, n, p->fault);
    USBEAM_CUDA_TRY(cudaGetLastError());
    if ((st = usbeam_cuda_stage_end(e, STAGE_CONVERT)) != USBEAM_OK) return st;

    if ((st = usbeam_cuda_stage_begin(e, STAGE_SPMM)) != USBEAM_OK) return st;
    const cudaDataType type = p->is_iq ? CUDA_C_32F : CUDA_R_32F;
    const float one[2] = {1.0f, 0.0f}, zero[2] = {0.0f, 0.0f};
    USBEAM_CUSPARSE_TRY(cusparseSetStream(p->handle, stream));
    USBEAM_CUSPARSE_TRY(cusparseDnMatSetValues(p->b, p->is_iq ? const_cast<void *>(in) : (void *)p->converted));
    USBEAM_CUSPARSE_TRY(cusparseDnMatSetValues(p->c, out));
    USBEAM_CUSPARSE_TRY(cusparseSpMM(p->handle, CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE, one,
                                     p->a, p->b, zero, p->c, type, CUSPARSE_SPMM_CSR_ALG1, p->buffer));
    return usbeam_cuda_stage_end(e, STAGE_SPMM);
}

extern "C" usbeam_status usbeam_das_sparse_cuda_execute(usbeam_das_sparse_cuda *p, const void *in, void *out)
{
    if (!p || !in || !out) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "plan, in and out must not be NULL");
    usbeam_status st = usbeam_cuda_exec_begin(p->exec);
    if (st != USBEAM_OK) return st;
    st = run(p, in, out, usbeam_cuda_exec_cuda_stream(p->exec));
    usbeam_cuda_exec_end(p->exec);
    return st;
}
