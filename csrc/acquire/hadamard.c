/*
 * hadamard.c - Hadamard matrices for aperture encoding and decoding along the transmit axis,
 * CPU backend.
 *
 * Matrices (usbeam.h, family hadamard): order n = 2^k * m with m in {1, 12, 20}, n <= 256.
 *   H = S_{2^k} (x) B_m, S the natural-order Sylvester matrix (S_1 = [1],
 *   S_{2p} = [[S_p, S_p], [S_p, -S_p]]; J. J. Sylvester, Phil. Mag. 34, 1867) and B_m the
 *   Paley I matrix of the prime q = m - 1 = 3 mod 4 (R. E. A. C. Paley, J. Math. Phys. 12,
 *   1933): B = I + [[0, 1^T], [-1, Q]], Q[i][j] = chi(j - i), chi the quadratic character
 *   mod q (chi(0) = 0).  Q is antisymmetric because chi(-1) = -1 when q = 3 mod 4, which
 *   makes B B^T = (q + 1) I.  Entries are +-1; H H^T = H^T H = n I.
 *
 * Layouts: in  [n_outer][n][n_inner]  (n = transmits; any dtype of int16, int32, float32)
 *          out [n_outer][n][n_inner]  or, with transmit_last, [n_outer][n_inner][n]
 *          (n = decoded elements).  out[e] = (1/n) sum_t H[t][e] in[t].
 * Units: those of the input.
 *
 * Exactness: integer input is accumulated in an integer type wide enough for every sum
 * (int32 for int16: 256 * 32768 = 2^23; int64 for int32), so both algorithms give the same
 * integer H^T x.  The scaling by 1/n is done last: float32 output is the correctly rounded
 * (double) sum / n; int32 output is sum / n rounded to nearest, ties away from zero, which
 * is exact whenever the input is an encoding H x of integer data.
 *
 * Data movement: a tile of TILE samples (consecutive (outer, inner) positions) is gathered
 * into per-thread scratch as [n][TILE]: the transmits of one sample become one column,
 * and the arithmetic runs along rows of TILE contiguous samples, which vectorises for any
 * input layout (transmit axis first or last).
 *
 * Algorithms: DIRECT, the dense product with H^T (n^2 multiply-adds per sample);
 * FAST, the factorised product H^T x = (S^T (x) B^T) x: B^T on each of the 2^k chunks of m
 * rows (m^2 each), then log2(2^k) butterfly passes (a + b, a - b) across chunks
 * (the fast Walsh-Hadamard transform), i.e. n log2 n additions for n = 2^k.
 *
 * NaN or inf float32 input is refused (USBEAM_ERR_INVALID_ARGUMENT): every entry of H is +-1,
 * so each decoded value of a sample is a double sum of +-(all n transmits), non-finite
 * exactly when one of them is; element 0 of every sample is tested as the tile is scattered
 * (one compare per n values).  A refused call fills out with NaN (no partial result).
 */
#include "common/interrupt.h"
#include "common/usbeam_internal.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#define TILE 64

/* ---- matrices ---------------------------------------------------------------------------- */

/* Split n = 2^k * m with m in {1, 12, 20}; returns m, or 0 when n has no matrix here. */
static size_t hadamard_base_order(size_t n)
{
    if (n == 0 || n > USBEAM_HADAMARD_MAX_ORDER) return 0;
    while (n % 2 == 0 && n != 12 && n != 20) n /= 2;
    return (n == 1 || n == 12 || n == 20) ? n : 0;
}

int usbeam_hadamard_order_supported(size_t order) { return hadamard_base_order(order) != 0; }

static int quadratic_character(long a, long q)
{
    a = ((a % q) + q) % q;
    if (a == 0) return 0;
    for (long x = 1; x < q; ++x)
        if ((x * x) % q == a) return 1;
    return -1;
}

/* Paley I matrix of order q + 1 into b (row-major, stride q + 1). */
static void paley_one(long q, int8_t *b)
{
    long n = q + 1;
    for (long i = 0; i < n; ++i) {
        for (long j = 0; j < n; ++j) {
            int v;
            if (i == 0)
                v = 1;
            else if (j == 0)
                v = -1;
            else
                v = quadratic_character(j - i, q) + (i == j);
            b[i * n + j] = (int8_t)v;
        }
    }
}

usbeam_status usbeam_hadamard_matrix(size_t order, int8_t *matrix)
{
    if (!matrix) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "matrix must not be NULL");
    size_t m = hadamard_base_order(order);
    if (m == 0)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT,
                           "order %zu has no Hadamard matrix in usbeam (orders are 2^k, 12*2^k and "
                           "20*2^k up to %d)",
                           order, USBEAM_HADAMARD_MAX_ORDER);
    size_t n = order;
    if (m == 1)
        matrix[0] = 1;
    else
        paley_one((long)m - 1, matrix);
    /* Sylvester doubling in place: the current p x p matrix sits at stride p; spread it to
     * stride n first (from the last row, so nothing is overwritten before it is read). */
    size_t p = m;
    if (p < n) {
        for (size_t i = p; i-- > 0;)
            memmove(matrix + i * n, matrix + i * p, p);
    }
    for (; p < n; p *= 2) {
        for (size_t i = 0; i < p; ++i) {
            int8_t *top = matrix + i * n, *bottom = matrix + (i + p) * n;
            for (size_t j = 0; j < p; ++j) {
                top[p + j] = top[j];
                bottom[j] = top[j];
                bottom[p + j] = (int8_t)-top[j];
            }
        }
    }
    return USBEAM_OK;
}

/* ---- plan -------------------------------------------------------------------------------- */

struct usbeam_hadamard_plan {
    usbeam_hadamard_params params; /* matrix pointer cleared */
    size_t n, base;                /* order and Paley base order m (FAST) */
    int32_t *ht_i32;               /* H^T as [element][transmit] */
    int64_t *ht_i64;
    double *ht_f64;
    int32_t *bt_i32;               /* B^T (m x m) for FAST */
    int64_t *bt_i64;
    double *bt_f64;
    int n_threads;
    size_t scratch_stride;         /* bytes per thread */
    unsigned char *scratch;
    usbeam_hadamard_cuda *cuda;    /* USBEAM_BACKEND_CUDA: the twin in cuda/hadamard.cu */
};

void usbeam_hadamard_plan_destroy(usbeam_hadamard_plan *plan)
{
    if (!plan) return;
    usbeam_hadamard_cuda_destroy(plan->cuda);
    usbeam_free(plan->ht_i32);
    usbeam_free(plan->ht_i64);
    usbeam_free(plan->ht_f64);
    usbeam_free(plan->bt_i32);
    usbeam_free(plan->bt_i64);
    usbeam_free(plan->bt_f64);
    usbeam_free(plan->scratch);
    usbeam_free(plan);
}

/* Entries +-1 and H H^T = n I, checked in integers. */
static usbeam_status check_user_matrix(const int8_t *h, size_t n)
{
    for (size_t i = 0; i < n * n; ++i)
        if (h[i] != 1 && h[i] != -1)
            return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT,
                               "matrix entries must be +1 or -1 (entry [%zu][%zu] is %d)", i / n, i % n,
                               (int)h[i]);
    for (size_t i = 0; i < n; ++i)
        for (size_t j = i; j < n; ++j) {
            long dot = 0;
            for (size_t k = 0; k < n; ++k) dot += (long)h[i * n + k] * h[j * n + k];
            if (dot != (i == j ? (long)n : 0))
                return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT,
                                   "matrix is not a Hadamard matrix: rows %zu and %zu give "
                                   "H H^T = %ld instead of %ld",
                                   i, j, dot, i == j ? (long)n : 0L);
        }
    return USBEAM_OK;
}

static usbeam_status fill_transposes(usbeam_hadamard_plan *p, const int8_t *h)
{
    size_t n = p->n, m = p->base;
    usbeam_dtype in = p->params.in_dtype;
    void **ht = in == USBEAM_DTYPE_INT16 ? (void **)&p->ht_i32
                : in == USBEAM_DTYPE_INT32 ? (void **)&p->ht_i64 : (void **)&p->ht_f64;
    void **bt = in == USBEAM_DTYPE_INT16 ? (void **)&p->bt_i32
                : in == USBEAM_DTYPE_INT32 ? (void **)&p->bt_i64 : (void **)&p->bt_f64;
    *ht = usbeam_alloc(n * n * 8);
    *bt = usbeam_alloc(m * m * 8);
    if (!*ht || !*bt) return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "hadamard plan matrices");
    /* The top-left m x m block of S (x) B is B itself (S[0][0] = 1). */
    for (size_t e = 0; e < n; ++e)
        for (size_t t = 0; t < n; ++t) {
            int v = h[t * n + e];
            if (p->ht_i32) p->ht_i32[e * n + t] = v;
            if (p->ht_i64) p->ht_i64[e * n + t] = v;
            if (p->ht_f64) p->ht_f64[e * n + t] = v;
            if (e < m && t < m) {
                if (p->bt_i32) p->bt_i32[e * m + t] = v;
                if (p->bt_i64) p->bt_i64[e * m + t] = v;
                if (p->bt_f64) p->bt_f64[e * m + t] = v;
            }
        }
    return USBEAM_OK;
}

usbeam_status usbeam_hadamard_plan_create(const usbeam_hadamard_params *params, usbeam_backend backend,
                                          usbeam_hadamard_plan **plan)
{
    if (!params || !plan) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "params and plan must not be NULL");
    *plan = NULL;
    if (backend != USBEAM_BACKEND_CPU && backend != USBEAM_BACKEND_CUDA)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "backend: unknown value %d", (int)backend);
    size_t n = params->order;
    if (n == 0 || n > USBEAM_HADAMARD_MAX_ORDER)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "order must be in 1..%d (got %zu)",
                           USBEAM_HADAMARD_MAX_ORDER, n);
    if (!params->matrix && !usbeam_hadamard_order_supported(n))
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT,
                           "order %zu has no Hadamard matrix in usbeam (orders are 2^k, 12*2^k and "
                           "20*2^k up to %d)",
                           n, USBEAM_HADAMARD_MAX_ORDER);
    if (params->n_outer == 0 || params->n_inner == 0)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "data: n_outer and n_inner must be >= 1");
    size_t total;
    if (usbeam_mul_size3(params->n_outer, n, params->n_inner, &total) != 0 || total > USBEAM_MAX_ALLOCATION)
        return usbeam_fail(USBEAM_ERR_SIZE_OVERFLOW, "data: %zu x %zu x %zu values is too large",
                           params->n_outer, n, params->n_inner);
    usbeam_dtype in = params->in_dtype, out = params->out_dtype;
    if (in != USBEAM_DTYPE_INT16 && in != USBEAM_DTYPE_INT32 && in != USBEAM_DTYPE_FLOAT32)
        return usbeam_fail(USBEAM_ERR_INVALID_DTYPE, "data dtype must be int16, int32 or float32");
    if (out != USBEAM_DTYPE_FLOAT32 && !(out == USBEAM_DTYPE_INT32 && in != USBEAM_DTYPE_FLOAT32))
        return usbeam_fail(USBEAM_ERR_INVALID_DTYPE,
                           "output dtype must be float32, or int32 for integer input");
    if (params->algorithm != USBEAM_HADAMARD_DIRECT && params->algorithm != USBEAM_HADAMARD_FAST &&
        params->algorithm != USBEAM_HADAMARD_GEMM)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "algorithm: unknown value %d", (int)params->algorithm);
    if (params->algorithm == USBEAM_HADAMARD_GEMM && backend != USBEAM_BACKEND_CUDA)
        return usbeam_fail(USBEAM_ERR_UNSUPPORTED, "algorithm 'gemm' (cuBLAS) runs on the CUDA backend only");

    usbeam_status st = USBEAM_OK;
    int8_t *library = usbeam_alloc(n * n);
    if (!library) return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "hadamard matrix");
    const int8_t *h = params->matrix;
    if (h) {
        st = check_user_matrix(h, n);
        if (st == USBEAM_OK && params->algorithm == USBEAM_HADAMARD_FAST &&
            (!usbeam_hadamard_order_supported(n) || usbeam_hadamard_matrix(n, library) != USBEAM_OK ||
             memcmp(library, h, n * n) != 0))
            st = usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT,
                             "algorithm 'fast' needs usbeam's own matrix of order %zu "
                             "(a user matrix is decoded with 'direct')",
                             n);
    } else {
        st = usbeam_hadamard_matrix(n, library);
        h = library;
    }
    if (st != USBEAM_OK) {
        usbeam_free(library);
        return st;
    }

    usbeam_hadamard_plan *p = usbeam_alloc(sizeof *p);
    if (!p) {
        usbeam_free(library);
        return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "hadamard plan");
    }
    p->params = *params;
    p->params.matrix = NULL;
    p->n = n;
    p->base = params->algorithm == USBEAM_HADAMARD_FAST ? hadamard_base_order(n) : n;
#ifdef _OPENMP
    p->n_threads = omp_get_max_threads();
#else
    p->n_threads = 1;
#endif
    if (p->n_threads < 1) p->n_threads = 1;
    if (backend == USBEAM_BACKEND_CUDA) { /* the twin copies the matrix; no host scratch */
        st = usbeam_hadamard_cuda_create(&p->params, h, p->base, &p->cuda);
        usbeam_free(library);
        if (st != USBEAM_OK) {
            usbeam_hadamard_plan_destroy(p);
            return st;
        }
        *plan = p;
        return USBEAM_OK;
    }
    st = fill_transposes(p, h);
    usbeam_free(library);
    /* two [n][TILE] accumulator blocks of 8-byte values per thread */
    p->scratch_stride = 2 * n * TILE * 8;
    if (st == USBEAM_OK) {
        p->scratch = usbeam_alloc(p->scratch_stride * (size_t)p->n_threads);
        if (!p->scratch) st = usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "hadamard scratch");
    }
    if (st != USBEAM_OK) {
        usbeam_hadamard_plan_destroy(p);
        return st;
    }
    *plan = p;
    return USBEAM_OK;
}

/* ---- tile kernels -------------------------------------------------------------------------- */

/* Integer H^T x / n rounded to nearest, ties away from zero. */
static inline int32_t divide_rounded(int64_t sum, int64_t n)
{
    int64_t q = sum >= 0 ? (sum + n / 2) / n : -((-sum + n / 2) / n);
    if (q > INT32_MAX) q = INT32_MAX;
    if (q < INT32_MIN) q = INT32_MIN;
    return (int32_t)q;
}

/* row += src or row -= src: entries are +-1, so the product is an add or a subtract, which
 * vectorises with plain SSE2 (a 32-bit integer multiply needs SSE4.1). */
#define DEFINE_ADD_SIGNED(NAME, ACC_T)                                                          \
    static inline void NAME(ACC_T *restrict row, const ACC_T *restrict src, int positive)      \
    {                                                                                           \
        if (positive)                                                                           \
            for (size_t j = 0; j < TILE; ++j) row[j] += src[j];                                 \
        else                                                                                    \
            for (size_t j = 0; j < TILE; ++j) row[j] -= src[j];                                 \
    }
DEFINE_ADD_SIGNED(add_signed_i32, int32_t)
DEFINE_ADD_SIGNED(add_signed_i64, int64_t)
DEFINE_ADD_SIGNED(add_signed_f64, double)
#undef DEFINE_ADD_SIGNED

/*
 * DECODE_TILE(NAME, IN_T, ACC_T) defines one tile pass for input type IN_T accumulated in
 * ACC_T: gather -> DIRECT or FAST -> scale and scatter.  x and y are [n][TILE] scratch.
 * Returns 1 when a decoded value is NaN or inf (only possible for float input).
 */
#define DECODE_TILE(NAME, IN_T, ACC_T, HT, BT, ADD_SIGNED)                                                        \
    static int NAME(const usbeam_hadamard_plan *p, const IN_T *in, void *out, size_t first,           \
                     size_t count, ACC_T *x, ACC_T *y)                                                 \
    {                                                                                                  \
        const size_t n = p->n, inner = p->params.n_inner;                                              \
        size_t base[TILE];                                                                             \
        for (size_t j = 0; j < count; ++j) {                                                           \
            size_t s = first + j;                                                                      \
            base[j] = (s / inner) * n * inner + s % inner;                                             \
        }                                                                                              \
        for (size_t t = 0; t < n; ++t)                                                                 \
            for (size_t j = 0; j < TILE; ++j)                                                          \
                x[t * TILE + j] = j < count ? (ACC_T)in[base[j] + t * inner] : (ACC_T)0;               \
        ACC_T *result;                                                                                 \
        if (p->params.algorithm == USBEAM_HADAMARD_DIRECT) {                                           \
            for (size_t e = 0; e < n; ++e) {                                                           \
                ACC_T *row = y + e * TILE;                                                             \
                const ACC_T *h = p->HT + e * n;                                                        \
                for (size_t j = 0; j < TILE; ++j) row[j] = 0;                                          \
                for (size_t t = 0; t < n; ++t)                                                         \
                    ADD_SIGNED(row, x + t * TILE, h[t] > 0);                                       \
            }                                                                                          \
            result = y;                                                                                \
        } else {                                                                                       \
            const size_t m = p->base;                                                                  \
            if (m > 1) {                                                                               \
                for (size_t c = 0; c < n; c += m) {                                                    \
                    for (size_t e = 0; e < m; ++e) {                                                   \
                        ACC_T *row = y + (c + e) * TILE;                                               \
                        const ACC_T *b = p->BT + e * m;                                                \
                        for (size_t j = 0; j < TILE; ++j) row[j] = 0;                                  \
                        for (size_t t = 0; t < m; ++t)                                                 \
                            ADD_SIGNED(row, x + (c + t) * TILE, b[t] > 0);                         \
                    }                                                                                  \
                }                                                                                      \
                ACC_T *swap = x;                                                                       \
                x = y;                                                                                 \
                y = swap;                                                                              \
            }                                                                                          \
            for (size_t half = m; half < n; half *= 2)                                                 \
                for (size_t start = 0; start < n; start += 2 * half)                                   \
                    for (size_t r = start; r < start + half; ++r) {                                    \
                        ACC_T *a = x + r * TILE, *b = x + (r + half) * TILE;                           \
                        for (size_t j = 0; j < TILE; ++j) {                                            \
                            ACC_T sum = a[j] + b[j], diff = a[j] - b[j];                               \
                            a[j] = sum;                                                                \
                            b[j] = diff;                                                               \
                        }                                                                              \
                    }                                                                                  \
            result = x;                                                                                \
        }                                                                                              \
        const int last = p->params.transmit_last;                                                      \
        int nonfinite = 0; /* element 0 of each sample: finite exactly when all its inputs are */      \
        for (size_t j = 0; j < TILE; ++j)                                                              \
            nonfinite |= !((double)result[j] - (double)result[j] == 0.0);                              \
        if (p->params.out_dtype == USBEAM_DTYPE_FLOAT32) {                                             \
            float *dst = out;                                                                          \
            const double inv = 1.0 / (double)n;                                                        \
            for (size_t e = 0; e < n; ++e)                                                             \
                for (size_t j = 0; j < count; ++j) {                                                   \
                    size_t at = last ? (first + j) * n + e : base[j] + e * inner;                      \
                    dst[at] = (float)((double)result[e * TILE + j] * inv);                             \
                }                                                                                      \
        } else {                                                                                       \
            int32_t *dst = out;                                                                        \
            for (size_t e = 0; e < n; ++e)                                                             \
                for (size_t j = 0; j < count; ++j) {                                                   \
                    size_t at = last ? (first + j) * n + e : base[j] + e * inner;                      \
                    dst[at] = divide_rounded((int64_t)result[e * TILE + j], (int64_t)n);               \
                }                                                                                      \
        }                                                                                              \
        return nonfinite;                                                                              \
    }

DECODE_TILE(decode_tile_int16, int16_t, int32_t, ht_i32, bt_i32, add_signed_i32)
DECODE_TILE(decode_tile_int32, int32_t, int64_t, ht_i64, bt_i64, add_signed_i64)
DECODE_TILE(decode_tile_float32, float, double, ht_f64, bt_f64, add_signed_f64)

usbeam_status usbeam_hadamard_execute(usbeam_hadamard_plan *plan, const void *in, void *out)
{
    if (!plan || !in || !out) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "plan, in and out must not be NULL");
    if (plan->cuda) return usbeam_hadamard_cuda_execute(plan->cuda, in, out); /* device pointers, queued */
    const size_t samples = plan->params.n_outer * plan->params.n_inner;
    const ptrdiff_t n_tiles = (ptrdiff_t)((samples + TILE - 1) / TILE);
    const usbeam_dtype dtype = plan->params.in_dtype;
    int bad = 0;
    usbeam_interrupt interrupt; /* Ctrl-C between tiles (common/interrupt.h) */
    usbeam_interrupt_begin(&interrupt);
#pragma omp parallel for schedule(static) num_threads(usbeam_team_size(plan->n_threads)) reduction(| : bad)
    for (ptrdiff_t tile = 0; tile < n_tiles; ++tile) {
        if (usbeam_interrupt_poll(&interrupt)) continue;
        int thread = 0;
#ifdef _OPENMP
        thread = omp_get_thread_num();
#endif
        unsigned char *scratch = plan->scratch + (size_t)thread * plan->scratch_stride;
        size_t first = (size_t)tile * TILE;
        size_t count = samples - first < TILE ? samples - first : TILE;
        size_t half = plan->scratch_stride / 2;
        if (dtype == USBEAM_DTYPE_INT16)
            decode_tile_int16(plan, in, out, first, count, (int32_t *)scratch, (int32_t *)(scratch + half));
        else if (dtype == USBEAM_DTYPE_INT32)
            decode_tile_int32(plan, in, out, first, count, (int64_t *)scratch, (int64_t *)(scratch + half));
        else
            bad |= decode_tile_float32(plan, in, out, first, count, (double *)scratch, (double *)(scratch + half));
    }
    const usbeam_status st = usbeam_interrupt_end(&interrupt);
    if (st != USBEAM_OK) { /* no partial result: NaN, or 0 for integer output */
        if (plan->params.out_dtype == USBEAM_DTYPE_FLOAT32)
            usbeam_fill_nan(out, samples * plan->n);
        else
            memset(out, 0, samples * plan->n * usbeam_dtype_size(plan->params.out_dtype));
        return st;
    }
    if (bad) { /* float input, float32 output */
        usbeam_fill_nan(out, samples * plan->n);
        return usbeam_fail_nonfinite("data", "hadamard_decode refuses them; out is filled with NaN");
    }
    return USBEAM_OK;
}

usbeam_cuda_exec *usbeam_hadamard_plan_cuda(usbeam_hadamard_plan *plan)
{
    return plan && plan->cuda ? usbeam_hadamard_cuda_exec(plan->cuda) : NULL;
}
