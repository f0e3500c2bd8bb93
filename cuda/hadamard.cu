/*
 * hadamard.cu - Hadamard decoding along the transmit axis, CUDA twin of csrc/hadamard.c.
 *
 * Layouts (device memory): in  [n_outer][n][n_inner]  int16, int32 or float32 (n = transmits);
 *                          out [n_outer][n][n_inner], or [n_outer][n_inner][n] with
 *                          transmit_last (n = decoded elements), float32 or int32.
 * A "sample" is one (outer, inner) position: the n values of a column along the transmit
 * axis.  out[e] = (1/n) sum_t H[t][e] in[t]; units are those of the input.
 *
 * Three paths, chosen by the plan's algorithm:
 *   DIRECT - a kernel that reads the input type directly (no converted copy) and forms the
 *            dense sums.  Orders <= 32 keep the whole column in registers, one thread per
 *            sample; larger orders stage a tile of 32 samples x n transmits in shared memory
 *            (loads coalesced along the samples) and each thread forms (element, sample) sums.
 *            H^T travels as sign bits (bit t of word e: H[t][e] = -1).
 *   FAST   - the factorised product of csrc/hadamard.c on the shared-memory tile: B^T on each
 *            chunk of m rows (m = 1, 12 or 20), then log2(n/m) butterfly passes (a + b, a - b):
 *            the fast Walsh-Hadamard transform for n = 2^k.
 *   GEMM   - int16 or float32 converted to a float32 copy, then one cuBLAS SGEMM per outer
 *            index (strided batched), then a scaling pass.  The handle runs in
 *            CUBLAS_PEDANTIC_MATH: full FP32 arithmetic, never TF32 or reduced-precision
 *            tensor-core math, whatever NVIDIA_TF32_OVERRIDE or the defaults of a future
 *            cuBLAS say.  int32 input is refused: above 2^24 a float32 copy is inexact.
 *
 * Exactness, as the CPU: integer input is accumulated in int32 (int16 input) or int64 (int32
 * input), float32 input in double, in the same order as csrc/hadamard.c (t ascending for
 * the dense sums; the same butterfly tree for FAST), and the result is scaled once as
 * (float)((double)sum * (1/n)) or divided with rounding to nearest, ties away from zero.
 * So DIRECT and FAST are bit-identical to the CPU backend.  GEMM on int16 is too: every
 * product is +-x and every partial sum an integer below 2^23, exact in FP32 in any order.
 * GEMM on float32 input sums in FP32 where the CPU sums in double (see tests/tolerances.py).
 *
 * Reference: the fast Walsh-Hadamard transform, e.g. Fino & Algazi, IEEE Trans. Computers
 * C-25 (1976) 1142; matrices as documented in csrc/hadamard.c.
 */
#include "runtime/cublas_plan.cuh"

#include <cublas_v2.h>
#include <stdint.h>
#include <string.h>

namespace {

enum { STAGE_CONVERT = 0, STAGE_DECODE = 1, STAGE_SCALE = 2 };
const char *const STAGE_NAMES[] = {"hadamard.convert", "hadamard.decode", "hadamard.scale"};

constexpr int REGISTER_MAX_ORDER = 32; /* columns this long stay in registers */
constexpr int TILE_SAMPLES = 32;       /* samples per shared-memory tile: one warp along them */
constexpr int TILE_THREADS = 256;
constexpr int MAX_SIGN_WORDS = USBEAM_HADAMARD_MAX_ORDER * USBEAM_HADAMARD_MAX_ORDER / 32;
/* GEMM: cuBLAS workspace owned by the plan (NVIDIA's recommendation for Hopper, as in
 * cuda/clutter_svd.cu): without one cuBLAS takes its own from a pool inside execute, which a
 * CUDA-graph capture of the chain cannot hold.  cublasSetStream resets the handle's workspace
 * to the default, so execute sets it again after every cublasSetStream. */

struct Layout {
    int n, base;              /* order, Paley base order m of FAST */
    size_t inner, samples;    /* n_inner, n_outer * n_inner */
    int transmit_last, out_int32;
    int words_per_element;    /* (n + 31) / 32 words of sign bits per decoded element */
    double inv_n;
};

template <typename In> struct Accumulator;
template <> struct Accumulator<int16_t> { typedef int32_t type; };
template <> struct Accumulator<int32_t> { typedef long long type; };
template <> struct Accumulator<float> { typedef double type; };

__device__ __forceinline__ size_t column_start(const Layout &L, size_t s)
{
    return (s / L.inner) * (size_t)L.n * L.inner + s % L.inner;
}

__device__ __forceinline__ int32_t divide_rounded(long long sum, long long n)
{
    long long q = sum >= 0 ? (sum + n / 2) / n : -((-sum + n / 2) / n);
    if (q > INT32_MAX) q = INT32_MAX;
    if (q < INT32_MIN) q = INT32_MIN;
    return (int32_t)q;
}

template <typename A>
__device__ __forceinline__ void store(const Layout &L, void *out, size_t s, int e, A sum)
{
    const size_t at = L.transmit_last ? s * (size_t)L.n + (size_t)e : column_start(L, s) + (size_t)e * L.inner;
    if (L.out_int32)
        ((int32_t *)out)[at] = divide_rounded((long long)sum, L.n);
    else
        ((float *)out)[at] = (float)((double)sum * L.inv_n);
}

/* + x or - x: the entries are +-1; a + (-x) is exactly a - x, so the order of the CPU's sums
 * is kept. */
template <typename A>
__device__ __forceinline__ A signed_term(uint32_t word, int bit, A x)
{
    return ((word >> bit) & 1u) ? -x : x;
}

/* DIRECT, order <= 32: one thread per sample, the column in registers; sign_bits[e] holds
 * the sign bits of element e (the same word for the whole warp: a broadcast load). */
template <typename In>
__global__ void __launch_bounds__(128) decode_registers(Layout L, const uint32_t *__restrict__ sign_bits,
                                                       const In *__restrict__ in, void *__restrict__ out)
{
    typedef typename Accumulator<In>::type A;
    const size_t s = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= L.samples) return;
    const In *x = in + column_start(L, s);
    A v[REGISTER_MAX_ORDER];
#pragma unroll
    for (int t = 0; t < REGISTER_MAX_ORDER; ++t) v[t] = t < L.n ? (A)x[(size_t)t * L.inner] : (A)0;
    for (int e = 0; e < L.n; ++e) {
        const uint32_t word = __ldg(sign_bits + e);
        A sum = 0;
#pragma unroll
        for (int t = 0; t < REGISTER_MAX_ORDER; ++t)
            if (t < L.n) sum += signed_term(word, t, v[t]);
        store(L, out, s, e, sum);
    }
}

/* DIRECT for any order, and FAST: a tile [n][TILE_SAMPLES] of accumulators in shared memory.
 * sign_bits: DIRECT, [n][words_per_element] for H^T; FAST, [m] words for B^T. */
template <typename In, bool FAST>
__global__ void __launch_bounds__(TILE_THREADS) decode_tile(Layout L, const uint32_t *__restrict__ sign_bits,
                                                            const In *__restrict__ in, void *__restrict__ out)
{
    typedef typename Accumulator<In>::type A;
    extern __shared__ unsigned char shared_raw[];
    A *x = (A *)shared_raw;                                        /* [n][TILE_SAMPLES] */
    uint32_t *signs = (uint32_t *)(x + (size_t)L.n * TILE_SAMPLES); /* copy of sign_bits */
    const int n = L.n;
    const size_t first = (size_t)blockIdx.x * TILE_SAMPLES;
    const int n_words = FAST ? L.base : n * L.words_per_element;
    for (int w = threadIdx.x; w < n_words; w += blockDim.x) signs[w] = sign_bits[w];
    for (int k = threadIdx.x; k < n * TILE_SAMPLES; k += blockDim.x) {
        const int t = k / TILE_SAMPLES, j = k % TILE_SAMPLES;
        const size_t s = first + (size_t)j;
        x[k] = s < L.samples ? (A)in[column_start(L, s) + (size_t)t * L.inner] : (A)0;
    }
    __syncthreads();
    if (!FAST) {
        /* a warp shares e (its sign words are broadcast) and spans 32 samples */
        for (int k = threadIdx.x; k < n * TILE_SAMPLES; k += blockDim.x) {
            const int e = k / TILE_SAMPLES, j = k % TILE_SAMPLES;
            const size_t s = first + (size_t)j;
            const uint32_t *row = signs + e * L.words_per_element;
            A sum = 0;
            for (int t = 0; t < n; ++t) sum += signed_term(row[t >> 5], t & 31, x[t * TILE_SAMPLES + j]);
            if (s < L.samples) store(L, out, s, e, sum);
        }
        return;
    }
    const int m = L.base;
    if (m > 1) { /* B^T on each chunk of m rows, in place: one thread owns a (chunk, sample) */
        for (int k = threadIdx.x; k < (n / m) * TILE_SAMPLES; k += blockDim.x) {
            const int chunk = k / TILE_SAMPLES, j = k % TILE_SAMPLES;
            A *column = x + chunk * m * TILE_SAMPLES + j;
            A v[20];
#pragma unroll
            for (int t = 0; t < 20; ++t) v[t] = t < m ? column[t * TILE_SAMPLES] : (A)0;
            for (int e = 0; e < m; ++e) {
                A sum = 0;
#pragma unroll
                for (int t = 0; t < 20; ++t)
                    if (t < m) sum += signed_term(signs[e], t, v[t]);
                column[e * TILE_SAMPLES] = sum;
            }
        }
        __syncthreads();
    }
    for (int half = m; half < n; half *= 2) {
        for (int k = threadIdx.x; k < (n / 2) * TILE_SAMPLES; k += blockDim.x) {
            const int pair = k / TILE_SAMPLES, j = k % TILE_SAMPLES;
            const int r = (pair / half) * 2 * half + pair % half;
            A *a = x + r * TILE_SAMPLES + j, *b = a + half * TILE_SAMPLES;
            const A sum = *a + *b, diff = *a - *b;
            *a = sum;
            *b = diff;
        }
        __syncthreads();
    }
    for (int k = threadIdx.x; k < n * TILE_SAMPLES; k += blockDim.x) {
        const int e = k / TILE_SAMPLES, j = k % TILE_SAMPLES;
        const size_t s = first + (size_t)j;
        if (s < L.samples) store(L, out, s, e, x[k]);
    }
}

template <typename In>
__global__ void convert_to_float(const In *__restrict__ in, float *__restrict__ out, size_t count)
{
    for (size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x; k < count; k += (size_t)gridDim.x * blockDim.x)
        out[k] = (float)in[k];
}

/* GEMM result y [outer][n][inner] (float) -> out, scaled as the CPU scales its sums. */
__global__ void scale_gemm_output(Layout L, const float *__restrict__ y, void *__restrict__ out)
{
    const size_t count = L.samples * (size_t)L.n;
    for (size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x; k < count; k += (size_t)gridDim.x * blockDim.x) {
        const size_t inner = L.inner, o = k / ((size_t)L.n * inner), rest = k % ((size_t)L.n * inner);
        const int e = (int)(rest / inner);
        const size_t s = o * inner + rest % inner;
        if (L.out_int32)
            store(L, out, s, e, (long long)y[k]);
        else
            store(L, out, s, e, (double)y[k]);
    }
}

template <typename In>
usbeam_status allow_tile_shared(size_t bytes)
{
    usbeam_status st = usbeam_cuda_allow_dynamic_shared((const void *)decode_tile<In, false>, bytes);
    return st == USBEAM_OK ? usbeam_cuda_allow_dynamic_shared((const void *)decode_tile<In, true>, bytes) : st;
}

unsigned grid_stride_blocks(size_t count)
{
    const size_t blocks = (count + 255) / 256;
    return (unsigned)(blocks < 65535u * 16u ? (blocks ? blocks : 1) : 65535u * 16u);
}

} // namespace

struct usbeam_hadamard_cuda {
    usbeam_cuda_exec *exec;
    Layout layout;
    usbeam_dtype in_dtype;
    usbeam_hadamard_algorithm algorithm;
    uint32_t *sign_bits;       /* device: DIRECT [n][words] of H^T, FAST [m] of B^T */
    size_t tile_shared_bytes;
    cublasHandle_t cublas;     /* GEMM */
    float *h_float;            /* device, GEMM: H as a column-major n x n float matrix */
    float *converted, *product; /* device, GEMM: [outer][n][inner] float each */
    void *cublas_workspace;    /* device, GEMM: USBEAM_CUBLAS_WORKSPACE_BYTES */
    size_t n_outer;
};

extern "C" void usbeam_hadamard_cuda_destroy(usbeam_hadamard_cuda *p)
{
    if (!p) return;
    if (p->cublas) (void)cublasDestroy(p->cublas);
    usbeam_cuda_exec_destroy(p->exec); /* waits for queued work, frees the device buffers */
    usbeam_free(p);
}

extern "C" usbeam_cuda_exec *usbeam_hadamard_cuda_exec(usbeam_hadamard_cuda *p) { return p ? p->exec : nullptr; }

static usbeam_status create_gemm(usbeam_hadamard_cuda *p, const int8_t *matrix, size_t total)
{
    const int n = p->layout.n;
    if (p->layout.inner > (size_t)INT32_MAX || p->n_outer > (size_t)INT32_MAX)
        return usbeam_fail(USBEAM_ERR_UNSUPPORTED, "algorithm 'gemm': n_outer and n_inner must each be < 2^31");
    float *host = (float *)usbeam_alloc((size_t)n * n * sizeof(float));
    if (!host) return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "hadamard GEMM matrix");
    /* column-major B with B(t, e) = H[t][e] at e * n + t: Y^T = X^T H per outer index */
    for (int t = 0; t < n; ++t)
        for (int e = 0; e < n; ++e) host[(size_t)e * n + t] = (float)matrix[(size_t)t * n + e];
    usbeam_status st = usbeam_cuda_exec_alloc(p->exec, (size_t)n * n * sizeof(float), "hadamard matrix",
                                              (void **)&p->h_float);
    if (st == USBEAM_OK) st = usbeam_cuda_exec_upload(p->exec, p->h_float, host, (size_t)n * n * sizeof(float));
    usbeam_free(host);
    size_t bytes;
    if (st == USBEAM_OK && usbeam_mul_size(total, sizeof(float), &bytes) != 0)
        st = usbeam_fail(USBEAM_ERR_SIZE_OVERFLOW, "data: too large for the GEMM scratch");
    if (st == USBEAM_OK) st = usbeam_cuda_exec_alloc(p->exec, bytes, "hadamard converted input", (void **)&p->converted);
    if (st == USBEAM_OK) st = usbeam_cuda_exec_alloc(p->exec, bytes, "hadamard GEMM product", (void **)&p->product);
    if (st != USBEAM_OK) return st;
    return usbeam_cublas_plan_create(p->exec, &p->cublas, &p->cublas_workspace);
}

extern "C" usbeam_status usbeam_hadamard_cuda_create(const usbeam_hadamard_params *params, const int8_t *matrix,
                                                     size_t base_order, usbeam_hadamard_cuda **out)
{
    if (!params || !matrix || !out) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "params, matrix and out must not be NULL");
    *out = nullptr;
    const size_t n = params->order;
    if (params->algorithm == USBEAM_HADAMARD_GEMM && params->in_dtype == USBEAM_DTYPE_INT32)
        return usbeam_fail(USBEAM_ERR_UNSUPPORTED,
                           "algorithm 'gemm' takes int16 or float32 data (int32 is inexact in float32); "
                           "use 'direct' or 'fast'");
    size_t total;
    if (usbeam_mul_size3(params->n_outer, n, params->n_inner, &total) != 0)
        return usbeam_fail(USBEAM_ERR_SIZE_OVERFLOW, "data: too large");
    if (params->n_outer * params->n_inner / TILE_SAMPLES >= (size_t)INT32_MAX)
        return usbeam_fail(USBEAM_ERR_UNSUPPORTED, "data: more than 2^36 samples per call on CUDA");
    usbeam_hadamard_cuda *p = (usbeam_hadamard_cuda *)usbeam_alloc(sizeof *p);
    if (!p) return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "hadamard CUDA plan");
    memset(p, 0, sizeof *p);
    p->in_dtype = params->in_dtype;
    p->algorithm = params->algorithm;
    p->n_outer = params->n_outer;
    Layout *L = &p->layout;
    L->n = (int)n;
    L->base = (int)base_order;
    L->inner = params->n_inner;
    L->samples = params->n_outer * params->n_inner;
    L->transmit_last = params->transmit_last != 0;
    L->out_int32 = params->out_dtype == USBEAM_DTYPE_INT32;
    L->words_per_element = (int)((n + 31) / 32);
    L->inv_n = 1.0 / (double)n;

    usbeam_status st = usbeam_cuda_exec_create(STAGE_NAMES, 3, &p->exec);
    if (st == USBEAM_OK && p->algorithm == USBEAM_HADAMARD_GEMM) {
        st = create_gemm(p, matrix, total);
    } else if (st == USBEAM_OK) {
        /* sign bits: bit t of word (e, t / 32) set where H[t][e] = -1 (FAST: B = top-left m x m) */
        static_assert(MAX_SIGN_WORDS >= 20, "sign buffer");
        uint32_t bits[MAX_SIGN_WORDS] = {0};
        const size_t rows = p->algorithm == USBEAM_HADAMARD_FAST ? base_order : n;
        const size_t words = p->algorithm == USBEAM_HADAMARD_FAST ? base_order : n * (size_t)L->words_per_element;
        for (size_t e = 0; e < rows; ++e)
            for (size_t t = 0; t < rows; ++t)
                if (matrix[t * n + e] < 0) {
                    if (p->algorithm == USBEAM_HADAMARD_FAST)
                        bits[e] |= 1u << t;
                    else
                        bits[e * (size_t)L->words_per_element + t / 32] |= 1u << (t % 32);
                }
        st = usbeam_cuda_exec_alloc(p->exec, words * sizeof(uint32_t), "hadamard signs", (void **)&p->sign_bits);
        if (st == USBEAM_OK) st = usbeam_cuda_exec_upload(p->exec, p->sign_bits, bits, words * sizeof(uint32_t));
        const size_t acc = p->in_dtype == USBEAM_DTYPE_INT16 ? 4 : 8;
        p->tile_shared_bytes = n * TILE_SAMPLES * acc + words * sizeof(uint32_t);
        if (st == USBEAM_OK && p->tile_shared_bytes > (size_t)usbeam_cuda_exec_max_shared_optin(p->exec))
            st = usbeam_fail(USBEAM_ERR_UNSUPPORTED, "order %zu: the decode tile (%zu bytes) exceeds the device's "
                             "shared memory per block", n, p->tile_shared_bytes);
        if (st == USBEAM_OK) {
            switch (p->in_dtype) {
            case USBEAM_DTYPE_INT16: st = allow_tile_shared<int16_t>(p->tile_shared_bytes); break;
            case USBEAM_DTYPE_INT32: st = allow_tile_shared<int32_t>(p->tile_shared_bytes); break;
            default: st = allow_tile_shared<float>(p->tile_shared_bytes); break;
            }
        }
    }
    if (st != USBEAM_OK) {
        usbeam_hadamard_cuda_destroy(p);
        return st;
    }
    *out = p;
    return USBEAM_OK;
}

template <typename In>
static void launch_decode(usbeam_hadamard_cuda *p, const void *in, void *out, cudaStream_t stream)
{
    const Layout &L = p->layout;
    if (p->algorithm == USBEAM_HADAMARD_DIRECT && L.n <= REGISTER_MAX_ORDER) {
        const unsigned blocks = (unsigned)((L.samples + 127) / 128);
        decode_registers<In><<<blocks, 128, 0, stream>>>(L, p->sign_bits, (const In *)in, out);
        return;
    }
    const unsigned blocks = (unsigned)((L.samples + TILE_SAMPLES - 1) / TILE_SAMPLES);
    if (p->algorithm == USBEAM_HADAMARD_FAST)
        decode_tile<In, true><<<blocks, TILE_THREADS, p->tile_shared_bytes, stream>>>(L, p->sign_bits, (const In *)in,
                                                                                      out);
    else
        decode_tile<In, false><<<blocks, TILE_THREADS, p->tile_shared_bytes, stream>>>(L, p->sign_bits,
                                                                                       (const In *)in, out);
}

static usbeam_status execute_gemm(usbeam_hadamard_cuda *p, const void *in, void *out, cudaStream_t stream)
{
    usbeam_cuda_exec *e = p->exec;
    const Layout &L = p->layout;
    const size_t total = L.samples * (size_t)L.n;
    usbeam_status st = usbeam_cuda_stage_begin(e, STAGE_CONVERT);
    if (st != USBEAM_OK) return st;
    if (p->in_dtype == USBEAM_DTYPE_INT16)
        convert_to_float<int16_t><<<grid_stride_blocks(total), 256, 0, stream>>>((const int16_t *)in, p->converted, total);
    else
        convert_to_float<float><<<grid_stride_blocks(total), 256, 0, stream>>>((const float *)in, p->converted, total);
    USBEAM_CUDA_TRY(cudaGetLastError());
    if ((st = usbeam_cuda_stage_end(e, STAGE_CONVERT)) != USBEAM_OK) return st;

    if ((st = usbeam_cuda_stage_begin(e, STAGE_DECODE)) != USBEAM_OK) return st;
    /* Row-major X [n][inner] is the column-major inner x n matrix X^T; Y^T = X^T H, and
     * column-major Y^T (inner x n) is row-major Y [n][inner]: the layout of in. */
    const float one = 1.0f, zero = 0.0f;
    const int m = (int)L.inner, n = L.n;
    const long long stride = (long long)n * (long long)L.inner;
    if ((st = usbeam_cublas_plan_bind(p->cublas, p->cublas_workspace, stream)) != USBEAM_OK) return st;
    USBEAM_CUBLAS_TRY(cublasSgemmStridedBatched(p->cublas, CUBLAS_OP_N, CUBLAS_OP_N, m, n, n, &one, p->converted, m,
                                                stride, p->h_float, n, 0, &zero, p->product, m, stride,
                                                (int)p->n_outer));
    if ((st = usbeam_cuda_stage_end(e, STAGE_DECODE)) != USBEAM_OK) return st;

    if ((st = usbeam_cuda_stage_begin(e, STAGE_SCALE)) != USBEAM_OK) return st;
    scale_gemm_output<<<grid_stride_blocks(total), 256, 0, stream>>>(L, p->product, out);
    USBEAM_CUDA_TRY(cudaGetLastError());
    return usbeam_cuda_stage_end(e, STAGE_SCALE);
}

extern "C" usbeam_status usbeam_hadamard_cuda_execute(usbeam_hadamard_cuda *p, const void *in, void *out)
{
    if (!p || !in || !out) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "plan, in and out must not be NULL");
    usbeam_cuda_exec *e = p->exec;
    usbeam_status st = usbeam_cuda_exec_begin(e);
    if (st != USBEAM_OK) return st;
    cudaStream_t stream = usbeam_cuda_exec_cuda_stream(e);
    if (p->algorithm == USBEAM_HADAMARD_GEMM) {
        st = execute_gemm(p, in, out, stream);
    } else {
        st = usbeam_cuda_stage_begin(e, STAGE_DECODE);
        if (st == USBEAM_OK) {
            switch (p->in_dtype) {
            case USBEAM_DTYPE_INT16: launch_decode<int16_t>(p, in, out, stream); break;
            case USBEAM_DTYPE_INT32: launch_decode<int32_t>(p, in, out, stream); break;
            default: launch_decode<float>(p, in, out, stream); break;
            }
            st = usbeam_cuda_check(cudaGetLastError(), "hadamard decode launch", __FILE__, __LINE__);
        }
        if (st == USBEAM_OK) st = usbeam_cuda_stage_end(e, STAGE_DECODE);
    }
    usbeam_cuda_exec_end(e);
    return st;
}
