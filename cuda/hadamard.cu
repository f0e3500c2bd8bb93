/*
 * hadamard.cu - Hadamard decoding along the transmit axis, CUDA twin of csrc/acquire/hadamard.c.
 *
 * Layouts (device memory): in  [n_outer][n][n_inner]  int16, int32 or float32 (n = transmits);
 *                          out [n_outer][n][n_inner], or [n_outer][n_inner][n] with
 *                          transmit_last (n = decoded elements), float32 or int32.
 * A "sample" is one (outer, inner) position: the n values of a column along the transmit
 * axis.  out[e] = (1/n) sum_t H[t][e] in[t]; units are those of the input.
 *
 * Three paths, chosen by the plan's algorithm:
 *   FAST   - the factorised product of csrc/acquire/hadamard.c, H^T = S^T (x) B^T (S Sylvester,
 *            B the Paley base of order m = 1, 12 or 20): B^T on each chunk of m rows, then the
 *            fast Walsh-Hadamard transform across chunks (Fino & Algazi, IEEE Trans. Computers
 *            C-25 (1976) 1142): log2(n/m) butterfly stages (a, b) -> (a + b, a - b).  The
 *            stages run in registers, radix 16: each thread holds up to 16 values of one
 *            column and applies up to four stages to them (n = 128: 4 + 3 stages, two passes
 *            over the shared-memory tile instead of seven).
 *   DIRECT - the dense product with H^T (n^2 additions per sample), any +-1 matrix.
 *   GEMM   - int16 or float32 converted to a float32 copy, then one cuBLAS SGEMM per outer
 *            index (strided batched), then a scaling pass.  The handle runs in
 *            CUBLAS_PEDANTIC_MATH: full FP32 arithmetic, never TF32 or reduced-precision
 *            tensor-core math, whatever NVIDIA_TF32_OVERRIDE or the defaults of a future
 *            cuBLAS say.  int32 input is refused: above 2^24 a float32 copy is inexact.
 *
 * FAST and DIRECT are one kernel each, structured as load -> compute -> store over a tile of
 * S consecutive samples x n rows held in shared memory (S = 16..256, a power of two, sized
 * so the tile is about 32 KiB: several blocks per SM).  Memory traffic per value: exactly
 * one global read (sizeof(In) bytes) and one global write (4 bytes); no index division per
 * value (the block's first column is one 64-bit division per thread; each thread's columns
 * are fixed, so their bases are computed once).  Global accesses, by layout:
 *   load  - VECTOR  (n_inner % (16/sizeof(In)) == 0, input 16-byte aligned): each thread
 *                   reads 16-byte vectors (8 int16 or 4 int32/float samples of one row),
 *                   up to MAX_LOADS of them issued before the first is used; lanes run along
 *                   the samples of a row, so a warp reads whole 128-byte lines.
 *           SEGMENT (n_inner == 1: the transmit axis is the input's last): the tile is one
 *                   contiguous run of S*n values, read as 16-byte vectors plus a scalar tail.
 *           SCALAR  (any other shape or a misaligned view): one value per load, lanes along
 *                   samples (coalesced wherever the samples are contiguous), SCALAR_BATCH
 *                   loads issued before the first is used.
 *   store - VECTOR  (layout kept, n_inner % 4 == 0, output aligned): 16-byte stores of 4
 *                   samples of one decoded row, lanes along the samples.
 *           SEGMENT (transmit_last, or n_inner == 1): the tile's outputs are one contiguous
 *                   run of S*n values; lanes run along the decoded elements (for n % 32 == 0
 *                   a warp writes 4 samples x 32 elements, four full 128-byte lines), 16-byte
 *                   stores when aligned, a scalar tail.
 *           SCALAR  otherwise (lanes along samples).
 * Shared memory: the tile stores row r at r*S, with the 16-byte chunks of each row permuted
 * by ((r >> 2) & 7) (XOR swizzle).  Row accesses along samples (loads, butterflies, vector
 * stores) and the column accesses of the transmit_last store (lanes over 8 rows x 4 samples)
 * are then free of bank conflicts for 4-byte accumulators.
 *
 * Exactness, as the CPU: integer input is accumulated in int32 (int16 input) or int64 (int32
 * input), float32 input in double.  Dense sums run t ascending from 0, and every butterfly
 * stage is the CPU's (a + b, a - b) on the same pair in the same stage order (half = m, 2m,
 * 4m, ...), so each output is the same expression as on the CPU.  The result is scaled once
 * as (float)((double)sum * (1/n)) (for int32 sums and n = 2^k the float product
 * (float)sum * 2^-k, which is the same number: both are exact) or divided with rounding to
 * nearest, ties away from zero (a shift for n = 2^k; otherwise a 32-bit multiply-high
 * division or a corrected double estimate, never a 64-bit division).  So DIRECT and FAST
 * are bit-identical to the CPU backend.  GEMM on int16 is too: every product is +-x and every
 * partial sum an integer below 2^23, exact in FP32 in any order.  GEMM on float32 input sums
 * in FP32 where the CPU sums in double (see tests/tolerances.py).
 */
#include "runtime/cublas_plan.cuh"

#include <cublas_v2.h>
#include <stdint.h>
#include <string.h>

namespace {

enum { STAGE_CONVERT = 0, STAGE_DECODE = 1, STAGE_SCALE = 2 };
const char *const STAGE_NAMES[] = {"hadamard.convert", "hadamard.decode", "hadamard.scale"};

constexpr int THREADS = 256;           /* per block; a multiple of every S / V below */
constexpr int MIN_LOG2_TILE = 4;       /* S >= 16: two 16-byte vectors per row at least */
constexpr int MAX_LOG2_TILE = 8;       /* S <= THREADS: each thread keeps one column per phase */
constexpr size_t FAST_TILE_BYTES = 32768;   /* FAST: one tile of accumulators */
constexpr size_t DIRECT_TILE_BYTES = 16384; /* DIRECT: input and output tiles */
constexpr int MAX_LOADS = 4;           /* 16-byte loads per thread: (n S / V) / THREADS <= 4 */
constexpr int SCALAR_BATCH = 8;        /* scalar loads in flight per thread */
constexpr int RADIX_BITS = 4;          /* butterfly stages per register pass (16 values) */
/* GEMM: cuBLAS workspace owned by the plan (NVIDIA's recommendation for Hopper, as in
 * cuda/clutter_svd.cu): without one cuBLAS takes its own from a pool inside execute, which a
 * CUDA-graph capture of the chain cannot hold.  cublasSetStream resets the handle's workspace
 * to the default, so execute sets it again after every cublasSetStream. */

enum { LOAD_VECTOR, LOAD_SEGMENT, LOAD_SCALAR };
enum { STORE_VECTOR, STORE_SEGMENT, STORE_SCALAR };

/* x / d for 32-bit x by a multiply-high (Granlund & Montgomery, PLDI 1994, fig. 4.1): exact
 * for every 32-bit x and 1 <= d < 2^31. */
struct FastDiv {
    uint32_t d, m, shift1, shift2;
    void init(uint32_t divisor)
    {
        int l = 0;
        while ((1ull << l) < divisor) ++l;
        d = divisor;
        m = (uint32_t)(((1ull << 32) * ((1ull << l) - divisor)) / divisor + 1);
        shift1 = l > 0 ? 1 : 0;
        shift2 = l > 0 ? (uint32_t)(l - 1) : 0;
    }
    __device__ __forceinline__ uint32_t div(uint32_t x) const
    {
        const uint32_t t = (uint32_t)(((uint64_t)m * x) >> 32);
        return (t + ((x - t) >> shift1)) >> shift2;
    }
};

struct Layout {
    int n, base;              /* order, Paley base order m of FAST (DIRECT: n) */
    int log2n;                /* log2(n) when n is a power of two, else -1 */
    int chunk_bits;           /* FAST: log2(n / m), the butterfly stages */
    int log2S;                /* samples per tile S = 2^log2S */
    size_t inner, samples;    /* n_inner, n_outer * n_inner */
    int transmit_last, out_int32;
    int load_mode, store_mode; /* per call: they depend on the pointers' alignment */
    FastDiv by_n, by_n32;     /* n, and n / 32 where 32 divides n */
    double inv_n;
    float inv_n_f;            /* 2^-log2n where n is a power of two */
};

template <typename In> struct Traits;
/* A: the CPU's accumulator; Raw: a 16-byte vector of V input values; FAST_BLOCKS: FAST blocks
 * per SM the register allocation must allow for n = 2^k (int16: 48 registers, 5 blocks of
 * 256 threads and 5 tiles of 32 KiB per SM, without a spill; the 8-byte accumulators and the
 * B^T pass of m = 12, 20 would spill under such a bound and keep the compiler's choice). */
template <> struct Traits<int16_t> {
    typedef int32_t A;
    typedef uint4 Raw;
    static constexpr int V = 8, FAST_BLOCKS = 5;
};
template <> struct Traits<int32_t> {
    typedef long long A;
    typedef int4 Raw;
    static constexpr int V = 4, FAST_BLOCKS = 1;
};
template <> struct Traits<float> {
    typedef double A;
    typedef float4 Raw;
    static constexpr int V = 4, FAST_BLOCKS = 1;
};

template <typename In, int M> struct FastBlocks {
    static constexpr int value = M == 1 ? Traits<In>::FAST_BLOCKS : 1;
};

/* Streaming (evict-first) accesses on the GPU: every value is read once and written once. */
template <typename T> __device__ __forceinline__ T load_once(const T *p) { return __ldcs(p); }
template <typename T> __device__ __forceinline__ void store_once(T *p, T v) { __stcs(p, v); }

__device__ __forceinline__ void unpack(const uint4 &r, int32_t (&v)[8])
{
    const uint32_t w[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
    for (int q = 0; q < 4; ++q) { /* little-endian: the lower half is the earlier sample */
        v[2 * q] = (int32_t)(int16_t)(uint16_t)(w[q] & 0xffffu);
        v[2 * q + 1] = (int32_t)(int16_t)(uint16_t)(w[q] >> 16);
    }
}
__device__ __forceinline__ void unpack(const int4 &r, long long (&v)[4])
{
    v[0] = r.x, v[1] = r.y, v[2] = r.z, v[3] = r.w;
}
__device__ __forceinline__ void unpack(const float4 &r, double (&v)[4])
{
    v[0] = r.x, v[1] = r.y, v[2] = r.z, v[3] = r.w;
}

/* One 16-byte chunk of accumulators to or from shared memory. */
__device__ __forceinline__ void put_chunk(int32_t *p, const int32_t *v) { *(int4 *)p = make_int4(v[0], v[1], v[2], v[3]); }
__device__ __forceinline__ void put_chunk(long long *p, const long long *v) { *(longlong2 *)p = make_longlong2(v[0], v[1]); }
__device__ __forceinline__ void put_chunk(double *p, const double *v) { *(double2 *)p = make_double2(v[0], v[1]); }
__device__ __forceinline__ void get_chunk(const int32_t *p, int32_t *v)
{
    const int4 c = *(const int4 *)p;
    v[0] = c.x, v[1] = c.y, v[2] = c.z, v[3] = c.w;
}
__device__ __forceinline__ void get_chunk(const long long *p, long long *v)
{
    const longlong2 c = *(const longlong2 *)p;
    v[0] = c.x, v[1] = c.y;
}
__device__ __forceinline__ void get_chunk(const double *p, double *v)
{
    const double2 c = *(const double2 *)p;
    v[0] = c.x, v[1] = c.y;
}

/* The shared-memory tile [n][S] of accumulators: row r at r*S, its 16-byte chunks (CW values)
 * permuted by XOR with ((r >> 2) & 7) (masked to the chunks of a row).  The permutation keeps
 * each chunk contiguous, so vector accesses of whole chunks stay 16-byte accesses. */
template <typename A>
struct Tile {
    static constexpr int CW = 16 / (int)sizeof(A);
    A *p;
    int log2S, swizzle_mask;
    __device__ __forceinline__ Tile(A *base, int log2_samples)
        : p(base), log2S(log2_samples), swizzle_mask(((1 << log2_samples) / CW - 1) & 7)
    {
    }
    __device__ __forceinline__ int at(int r, int j) const
    {
        return (r << log2S) + (j ^ (((r >> 2) & swizzle_mask) * CW));
    }
    __device__ __forceinline__ A &operator()(int r, int j) const { return p[at(r, j)]; }
};

/* Offset of the column of sample s0 + j, given s0 = o0 * inner + i0 (i0 < inner) and j < S:
 * one compare where inner >= S, a 32-bit division of a number below 2 S otherwise. */
__device__ __forceinline__ size_t column_base(const Layout &L, size_t o0, size_t i0, int j)
{
    size_t i = i0 + (size_t)j, o = o0;
    if (i >= L.inner) {
        if (L.inner >= ((size_t)1 << L.log2S)) {
            i -= L.inner;
            ++o;
        } else {
            const uint32_t q = (uint32_t)i / (uint32_t)L.inner;
            i -= (size_t)q * L.inner;
            o += q;
        }
    }
    return o * (size_t)L.n * L.inner + i;
}

/* ---- load: global -> tile (one read per value) ----------------------------------------- */

template <typename In>
__device__ __forceinline__ void load_tile(const Layout &L, const In *__restrict__ in, const Tile<typename Traits<In>::A> &x,
                                          size_t s0, size_t o0, size_t i0, int count)
{
    typedef typename Traits<In>::A A;
    typedef typename Traits<In>::Raw Raw;
    constexpr int V = Traits<In>::V, CW = Tile<A>::CW;
    static_assert(V == 2 * CW, "an input vector fills two accumulator chunks");
    const int n = L.n, S = 1 << L.log2S, tid = threadIdx.x;
    if (L.load_mode == LOAD_VECTOR) {
        /* thread -> (vector w of its row, rows t0, t0 + step, ...): w is fixed per thread */
        const int log2W = L.log2S - (V == 8 ? 3 : 2), w = tid & ((1 << log2W) - 1);
        const int t0 = tid >> log2W, step = THREADS >> log2W, j = w * V;
        const bool valid = j < count; /* count is a multiple of V here */
        const In *src = in + (valid ? column_base(L, o0, i0, j) : 0);
        Raw raw[MAX_LOADS];
#pragma unroll
        for (int u = 0; u < MAX_LOADS; ++u) { /* all loads issued before the first is used */
            const int t = t0 + u * step;
            if (valid && t < n) raw[u] = load_once((const Raw *)(src + (size_t)t * L.inner));
        }
        /* the two chunks of a vector, stored in an order that keeps the 8 lanes of each
         * quarter-warp on distinct banks */
        const int first = (w >> 2) & 1;
#pragma unroll
        for (int u = 0; u < MAX_LOADS; ++u) {
            const int t = t0 + u * step;
            if (t >= n) break;
            A v[V], a[CW], b[CW];
            if (valid)
                unpack(raw[u], v);
            else
#pragma unroll
                for (int q = 0; q < V; ++q) v[q] = 0;
#pragma unroll
            for (int q = 0; q < CW; ++q) { /* selects, not a run-time index (local memory) */
                a[q] = first ? v[CW + q] : v[q];
                b[q] = first ? v[q] : v[CW + q];
            }
            put_chunk(&x(t, j + first * CW), a);
            put_chunk(&x(t, j + (1 - first) * CW), b);
        }
        return;
    }
    if (L.load_mode == LOAD_SEGMENT) {
        /* inner == 1: the columns of the tile are one run in[s0 n .. (s0 + count) n) */
        const In *src = in + s0 * (size_t)n;
        const int values = count * n, vectors = (((uintptr_t)in & 15) == 0) ? values / V : 0;
        Raw raw[MAX_LOADS];
#pragma unroll
        for (int u = 0; u < MAX_LOADS; ++u) {
            const int k = tid + u * THREADS;
            if (k < vectors) raw[u] = load_once((const Raw *)src + k);
        }
#pragma unroll
        for (int u = 0; u < MAX_LOADS; ++u) {
            const int k = tid + u * THREADS;
            if (k >= vectors) break;
            A v[V];
            unpack(raw[u], v);
#pragma unroll
            for (int q = 0; q < V; ++q) {
                const uint32_t value = (uint32_t)(k * V + q), j = L.by_n.div(value);
                x((int)(value - j * (uint32_t)n), (int)j) = v[q];
            }
        }
        for (int value = vectors * V + tid; value < values; value += THREADS) { /* tail */
            const uint32_t j = L.by_n.div((uint32_t)value);
            x(value - (int)j * n, (int)j) = (A)__ldg(src + value);
        }
        for (int k = tid; k < (S - count) * n; k += THREADS) /* samples past the end */
            x(k % n, count + k / n) = 0;
        return;
    }
    /* SCALAR: thread -> (sample j, rows t0, t0 + step, ...): j is fixed per thread */
    const int j = tid & (S - 1), t0 = tid >> L.log2S, step = THREADS >> L.log2S;
    const bool valid = j < count;
    const In *src = in + (valid ? column_base(L, o0, i0, j) : 0);
    for (int t = t0; t < n; t += step * SCALAR_BATCH) {
        In r[SCALAR_BATCH];
#pragma unroll
        for (int u = 0; u < SCALAR_BATCH; ++u) {
            const int tt = t + u * step;
            r[u] = (valid && tt < n) ? __ldg(src + (size_t)tt * L.inner) : (In)0;
        }
#pragma unroll
        for (int u = 0; u < SCALAR_BATCH; ++u) {
            const int tt = t + u * step;
            if (tt < n) x(tt, j) = (A)r[u];
        }
    }
}

/* ---- store: tile -> global, scaled (one write per value) -------------------------------- */

/* Integer H^T x / n rounded to nearest, ties away from zero, saturated, as the CPU's
 * divide_rounded, without a 64-bit division: a shift for n = 2^k; otherwise a multiply-high
 * below 2^32 (always for int16 input) and above (int32 input: x <= 2^39 + n/2, exact in
 * double), a truncated double estimate.  fl(1/n) n - 1 = +-2^-54 for every n = 12 2^k or
 * 20 2^k, so the estimate's error is below x 2^-52 < 1/n and the truncation is exact for
 * x < 2^44; the remainder check is a guard that costs two compares. */
__device__ __forceinline__ int32_t divide_rounded(long long sum, const Layout &L)
{
    const unsigned long long magnitude = sum >= 0 ? (unsigned long long)sum : 0ull - (unsigned long long)sum;
    const unsigned long long x = magnitude + (unsigned long long)(L.n / 2), n = (unsigned long long)L.n;
    unsigned long long q;
    if (L.log2n >= 0) {
        q = x >> L.log2n;
    } else if (x <= 0xffffffffull) {
        q = L.by_n.div((uint32_t)x);
    } else {
        q = (unsigned long long)((double)x * L.inv_n);
        long long r = (long long)(x - q * n);
        while (r < 0) --q, r += (long long)n;
        while (r >= (long long)n) ++q, r -= (long long)n;
    }
    const long long v = sum >= 0 ? (long long)q : -(long long)q;
    return v > INT32_MAX ? INT32_MAX : v < INT32_MIN ? INT32_MIN : (int32_t)v;
}

/* (float)((double)sum * (1/n)); for int32 sums (|sum| <= 2^23) and n = 2^k the float product
 * gives the same number without double arithmetic (both are exact before the last rounding,
 * and there is none: sum is exact in float and 2^-k scales exactly). */
__device__ __forceinline__ float scale_float(int32_t sum, const Layout &L)
{
    return L.log2n >= 0 ? (float)sum * L.inv_n_f : (float)((double)sum * L.inv_n);
}
__device__ __forceinline__ float scale_float(long long sum, const Layout &L) { return (float)((double)sum * L.inv_n); }
__device__ __forceinline__ float scale_float(double sum, const Layout &L) { return (float)(sum * L.inv_n); }

template <typename A>
__device__ __forceinline__ void put_scaled(const Layout &L, void *out, size_t at, A sum)
{
    if (L.out_int32)
        ((int32_t *)out)[at] = divide_rounded((long long)sum, L);
    else
        ((float *)out)[at] = scale_float(sum, L);
}

/* four consecutive outputs at out + at (16-byte aligned) */
template <typename A>
__device__ __forceinline__ void put_scaled4(const Layout &L, void *out, size_t at, const A (&v)[4])
{
    if (L.out_int32)
        store_once((int4 *)((int32_t *)out + at), make_int4(divide_rounded((long long)v[0], L), divide_rounded((long long)v[1], L),
                                                             divide_rounded((long long)v[2], L), divide_rounded((long long)v[3], L)));
    else
        store_once((float4 *)((float *)out + at),
                   make_float4(scale_float(v[0], L), scale_float(v[1], L), scale_float(v[2], L), scale_float(v[3], L)));
}

template <typename A>
__device__ __forceinline__ void store_tile(const Layout &L, const Tile<A> &y, void *__restrict__ out, size_t s0, size_t o0,
                                           size_t i0, int count)
{
    constexpr int CW = Tile<A>::CW;
    const int n = L.n, S = 1 << L.log2S, tid = threadIdx.x;
    if (L.store_mode == STORE_VECTOR) {
        /* thread -> (4 samples w of a decoded row, rows e0, e0 + step, ...): w fixed per thread;
         * lanes along the samples of a row: 16-byte stores, whole 128-byte lines per 8 lanes */
        const int log2W = L.log2S - 2, w = tid & ((1 << log2W) - 1), e0 = tid >> log2W, step = THREADS >> log2W;
        const int j = 4 * w;
        if (j >= count) return; /* count is a multiple of 4 here */
        const size_t base = column_base(L, o0, i0, j);
        for (int e = e0; e < n; e += step) {
            A v[4];
#pragma unroll
            for (int c = 0; c < 4; c += CW) get_chunk(&y(e, j + c), v + c);
            put_scaled4(L, out, base + (size_t)e * L.inner, v);
        }
        return;
    }
    if (L.store_mode == STORE_SEGMENT) {
        /* transmit_last (or inner == 1): the tile's outputs are out[s0 n .. (s0 + count) n),
         * sample j's n values contiguous; lanes along the decoded elements */
        const size_t first = s0 * (size_t)n;
        const bool aligned = ((uintptr_t)out & 15) == 0;
        if (aligned && n % 32 == 0) {
            /* 32 consecutive items = 4 samples x 8 quads of elements: each lane 16 bytes, each
             * group of 8 lanes one 128-byte line; the 4 column reads of a quad hit 32
             * distinct banks (rows 4 sub + q differ in (r >> 2) & 7, the swizzle) */
            const int items = (n << L.log2S) / 4, per_32 = n / 32;
            for (int k = tid; k < items; k += THREADS) {
                const int sub = k & 7, js = (k >> 3) & 3, rest = k >> 5;
                const int jb = (int)L.by_n32.div((uint32_t)rest), eb = rest - jb * per_32;
                const int j = 4 * jb + js, e = 32 * eb + 4 * sub;
                if (j >= count) continue;
                A v[4];
#pragma unroll
                for (int q = 0; q < 4; ++q) v[q] = y(e + q, j);
                put_scaled4(L, out, first + (size_t)j * n + e, v);
            }
        } else if (aligned && n % 4 == 0) {
            const int quads = count * n / 4;
            for (int k = tid; k < quads; k += THREADS) {
                const uint32_t value = 4u * (uint32_t)k, j = L.by_n.div(value);
                const int e = (int)(value - j * (uint32_t)n);
                A v[4];
#pragma unroll
                for (int q = 0; q < 4; ++q) v[q] = y(e + q, (int)j);
                put_scaled4(L, out, first + value, v);
            }
        } else { /* n = 1, 2 or a misaligned view: one value per store, still coalesced */
            const int values = count * n;
            for (int k = tid; k < values; k += THREADS) {
                const uint32_t j = L.by_n.div((uint32_t)k);
                put_scaled(L, out, first + (size_t)k, y(k - (int)j * n, (int)j));
            }
        }
        return;
    }
    /* SCALAR: thread -> (sample j, rows e0, e0 + step, ...), j fixed per thread */
    const int j = tid & (S - 1), e0 = tid >> L.log2S, step = THREADS >> L.log2S;
    if (j >= count) return;
    const size_t base = column_base(L, o0, i0, j);
    for (int e = e0; e < n; e += step) put_scaled(L, out, base + (size_t)e * L.inner, y(e, j));
}

/* ---- compute ---------------------------------------------------------------------------- */

/* acc[i] = sum_{t < rows} (-1)^(bit i of words[t]) x(row0 + t, j), t ascending from 0 (the
 * CPU's order), for i < outputs <= EB.  A warp shares words[t]: a broadcast read. */
template <typename A, int EB>
__device__ __forceinline__ void dense_sums(const Tile<A> &x, int row0, int rows, int j, const uint32_t *words, int outputs,
                                           A (&acc)[EB])
{
#pragma unroll
    for (int i = 0; i < EB; ++i) acc[i] = 0;
    for (int t = 0; t < rows; ++t) {
        const A v = x(row0 + t, j);
        const uint32_t w = words[t];
#pragma unroll
        for (int i = 0; i < EB; ++i) /* + (-v) is exactly - v: the CPU's row -= x */
            if (i < outputs) acc[i] += ((w >> i) & 1u) ? -v : v;
    }
}

/* FAST, m > 1: B^T on each chunk of M rows, in place; thread -> (chunk, sample j), j fixed. */
template <typename A, int M>
__device__ __forceinline__ void base_pass(const Layout &L, const Tile<A> &x, const uint32_t *words)
{
    constexpr int EB = M <= 16 ? 16 : 32;
    const int items = (L.n / M) << L.log2S, S = 1 << L.log2S;
    for (int k = threadIdx.x; k < items; k += THREADS) {
        const int j = k & (S - 1), row0 = (k >> L.log2S) * M;
        A acc[EB];
        dense_sums<A, EB>(x, row0, M, j, words, M, acc);
#pragma unroll
        for (int e = 0; e < M; ++e) x(row0 + e, j) = acc[e];
    }
}

/* FAST: butterfly stages for chunk bits b .. b + log2(R) - 1 in registers.  Thread -> (group,
 * sample j): the R rows r0 + q (M << b), q < R, of column j, whose chunk indices differ in
 * exactly those bits; stage h = 1, 2, .. R/2 pairs (q, q + h) as the CPU pairs
 * (r, r + half) with half = M 2^b h.  Lanes run along the samples of a row: no bank
 * conflict for 4-byte accumulators. */
template <typename A, int R, int M>
__device__ __forceinline__ void radix_pass(const Layout &L, const Tile<A> &x, int b)
{
    const int S = 1 << L.log2S, groups = L.n / R, items = groups << L.log2S, low = M << b;
    for (int k = threadIdx.x; k < items; k += THREADS) {
        const int j = k & (S - 1), g = k >> L.log2S;
        const int hi = (g >> b) / M, lo = g - hi * low, r0 = hi * low * R + lo;
        A v[R];
#pragma unroll
        for (int q = 0; q < R; ++q) v[q] = x(r0 + q * low, j);
#pragma unroll
        for (int h = 1; h < R; h *= 2)
#pragma unroll
            for (int q = 0; q < R; ++q)
                if (!(q & h)) {
                    const A a = v[q], c = v[q + h];
                    v[q] = a + c;
                    v[q + h] = a - c;
                }
#pragma unroll
        for (int q = 0; q < R; ++q) x(r0 + q * low, j) = v[q];
    }
}

/* The block's tile: samples s0 .. s0 + count - 1, s0 = o0 * inner + i0. */
struct TileOrigin {
    size_t s0, o0, i0;
    int count;
};

__device__ __forceinline__ TileOrigin tile_origin(const Layout &L)
{
    TileOrigin t;
    t.s0 = (size_t)blockIdx.x << L.log2S;
    t.o0 = t.s0 / L.inner; /* the one 64-bit division, per thread and block */
    t.i0 = t.s0 - t.o0 * L.inner;
    const size_t left = L.samples - t.s0;
    t.count = left < ((size_t)1 << L.log2S) ? (int)left : 1 << L.log2S;
    return t;
}

/* FAST for n = M 2^k.  Shared memory: the tile [n][S] of accumulators, then M sign words.
 * Traffic per value: one global read, one global write; shared memory: one write (load),
 * a read and a write per pass (ceil(k / 4) passes, plus one for B^T), one read (store). */
template <typename In, int M>
__global__ void __launch_bounds__(THREADS, FastBlocks<In, M>::value) fast_kernel(Layout L, const uint32_t *__restrict__ signs,
                                                       const void *__restrict__ in, void *__restrict__ out)
{
    typedef typename Traits<In>::A A;
    extern __shared__ __align__(16) unsigned char shared_raw[];
    const Tile<A> x((A *)shared_raw, L.log2S);
    uint32_t *words = (uint32_t *)(shared_raw + ((size_t)L.n << L.log2S) * sizeof(A));
    const TileOrigin o = tile_origin(L);
    if (M > 1)
        for (int w = threadIdx.x; w < M; w += THREADS) words[w] = signs[w];
    load_tile<In>(L, (const In *)in, x, o.s0, o.o0, o.i0, o.count);
    __syncthreads();
    if (M > 1) {
        base_pass<A, M>(L, x, words);
        __syncthreads();
    }
    for (int b = 0; b < L.chunk_bits; b += RADIX_BITS) {
        switch (L.chunk_bits - b < RADIX_BITS ? L.chunk_bits - b : RADIX_BITS) { /* uniform */
        case 4: radix_pass<A, 16, M>(L, x, b); break;
        case 3: radix_pass<A, 8, M>(L, x, b); break;
        case 2: radix_pass<A, 4, M>(L, x, b); break;
        default: radix_pass<A, 2, M>(L, x, b); break;
        }
        __syncthreads();
    }
    store_tile<A>(L, x, out, o.s0, o.o0, o.i0, o.count);
}

/* DIRECT: y = H^T x on the tile.  Thread -> (sample j, block c of up to EB = 32 decoded
 * elements): it reads the column once per block (n shared loads for EB n additions), the sign
 * words [c][t] (bit i: H[t][32 c + i] = -1) are shared by the warp.  Shared memory: tiles
 * x and y [n][S], then ceil(n / 32) n sign words.  Traffic per value as FAST. */
template <typename In, int EB>
__global__ void __launch_bounds__(THREADS) direct_kernel(Layout L, const uint32_t *__restrict__ signs,
                                                         const void *__restrict__ in, void *__restrict__ out)
{
    typedef typename Traits<In>::A A;
    extern __shared__ __align__(16) unsigned char shared_raw[];
    const size_t tile_values = (size_t)L.n << L.log2S;
    const Tile<A> x((A *)shared_raw, L.log2S), y((A *)shared_raw + tile_values, L.log2S);
    uint32_t *words = (uint32_t *)((A *)shared_raw + 2 * tile_values);
    const int n = L.n, blocks = (n + 31) / 32, S = 1 << L.log2S;
    const TileOrigin o = tile_origin(L);
    for (int w = threadIdx.x; w < blocks * n; w += THREADS) words[w] = signs[w];
    load_tile<In>(L, (const In *)in, x, o.s0, o.o0, o.i0, o.count);
    __syncthreads();
    for (int k = threadIdx.x; k < (blocks << L.log2S); k += THREADS) {
        const int j = k & (S - 1), c = k >> L.log2S, outputs = n - c * 32 < EB ? n - c * 32 : EB;
        A acc[EB];
        dense_sums<A, EB>(x, 0, n, j, words + c * n, outputs, acc);
#pragma unroll
        for (int i = 0; i < EB; ++i)
            if (i < outputs) y(c * 32 + i, j) = acc[i];
    }
    __syncthreads();
    store_tile<A>(L, y, out, o.s0, o.o0, o.i0, o.count);
}

template <typename In>
__global__ void convert_to_float(const In *__restrict__ in, float *__restrict__ out, size_t count)
{
    for (size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x; k < count; k += (size_t)gridDim.x * blockDim.x)
        out[k] = (float)in[k];
}

/* GEMM result y [outer][n][inner] (float) -> out, scaled as the CPU scales its sums.  With
 * the layout kept, out has y's layout (no index arithmetic); transmit_last transposes. */
__global__ void scale_gemm_output(Layout L, const float *__restrict__ y, void *__restrict__ out)
{
    const size_t count = L.samples * (size_t)L.n;
    for (size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x; k < count; k += (size_t)gridDim.x * blockDim.x) {
        size_t at = k;
        if (L.transmit_last) {
            const size_t inner = L.inner, o = k / ((size_t)L.n * inner), rest = k % ((size_t)L.n * inner);
            at = (o * inner + rest % inner) * (size_t)L.n + rest / inner;
        }
        if (L.out_int32)
            put_scaled(L, out, at, (long long)y[k]);
        else
            put_scaled(L, out, at, (double)y[k]);
    }
}

unsigned grid_stride_blocks(size_t count)
{
    const size_t blocks = (count + 255) / 256;
    return (unsigned)(blocks < 65535u * 16u ? (blocks ? blocks : 1) : 65535u * 16u);
}

typedef void (*DecodeKernel)(Layout, const uint32_t *, const void *, void *);

template <typename In>
DecodeKernel fast_kernel_for(int m)
{
    return m == 12 ? fast_kernel<In, 12> : m == 20 ? fast_kernel<In, 20> : fast_kernel<In, 1>;
}

template <typename In>
DecodeKernel direct_kernel_for(int n)
{
    return n > 16 ? direct_kernel<In, 32> : n > 8 ? direct_kernel<In, 16> : n > 4 ? direct_kernel<In, 8> : direct_kernel<In, 4>;
}

int floor_log2(size_t v)
{
    int l = -1;
    while (v) ++l, v >>= 1;
    return l;
}

} // namespace

struct usbeam_hadamard_cuda {
    usbeam_cuda_exec *exec;
    Layout layout;
    usbeam_dtype in_dtype;
    usbeam_hadamard_algorithm algorithm;
    DecodeKernel kernel;       /* FAST or DIRECT */
    uint32_t *sign_bits;       /* device: DIRECT [ceil(n/32)][n] of H^T, FAST [m] of B^T */
    size_t shared_bytes;
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
    size_t bytes = 0;
    if (st == USBEAM_OK && usbeam_mul_size(total, sizeof(float), &bytes) != 0)
        st = usbeam_fail(USBEAM_ERR_SIZE_OVERFLOW, "data: too large for the GEMM scratch");
    if (st == USBEAM_OK) st = usbeam_cuda_exec_alloc(p->exec, bytes, "hadamard converted input", (void **)&p->converted);
    if (st == USBEAM_OK) st = usbeam_cuda_exec_alloc(p->exec, bytes, "hadamard GEMM product", (void **)&p->product);
    if (st != USBEAM_OK) return st;
    return usbeam_cublas_plan_create(p->exec, &p->cublas, &p->cublas_workspace);
}

/* FAST or DIRECT: the kernel, its tile (S = 2^log2S samples, about tile_bytes of
 * accumulators per tile, S in [16, 256]), the sign words and the shared memory. */
static usbeam_status create_tiled(usbeam_hadamard_cuda *p, const int8_t *matrix)
{
    Layout *L = &p->layout;
    const int n = L->n, m = L->base;
    const bool fast = p->algorithm == USBEAM_HADAMARD_FAST;
    const size_t acc = p->in_dtype == USBEAM_DTYPE_INT16 ? 4 : 8;
    int log2S = floor_log2((fast ? FAST_TILE_BYTES : DIRECT_TILE_BYTES) / ((size_t)n * acc));
    log2S = log2S < MIN_LOG2_TILE ? MIN_LOG2_TILE : log2S > MAX_LOG2_TILE ? MAX_LOG2_TILE : log2S;
    L->log2S = log2S;
    L->chunk_bits = fast ? floor_log2((size_t)(n / m)) : 0;
    /* 16-byte vectors per thread in the load phase: n S / V / THREADS <= MAX_LOADS */
    const size_t vector_values = p->in_dtype == USBEAM_DTYPE_INT16 ? 8 : 4;
    if (((size_t)n << log2S) / vector_values > (size_t)MAX_LOADS * THREADS)
        return usbeam_fail(USBEAM_ERR_INTERNAL, "hadamard: tile of order %d too large", n);
    if ((L->samples + ((size_t)1 << log2S) - 1) >> log2S > (size_t)INT32_MAX)
        return usbeam_fail(USBEAM_ERR_UNSUPPORTED, "data: more than 2^35 samples per call on CUDA");

    /* sign words.  FAST: word t, bit e set where B[t][e] = H[t][e] = -1 (t, e < m).
     * DIRECT: word [c][t], bit i set where H[t][32 c + i] = -1. */
    const size_t blocks = ((size_t)n + 31) / 32, words = fast ? (size_t)m : blocks * n;
    uint32_t *bits = (uint32_t *)usbeam_alloc((words ? words : 1) * sizeof(uint32_t));
    if (!bits) return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "hadamard signs");
    memset(bits, 0, (words ? words : 1) * sizeof(uint32_t));
    const size_t rows = fast ? (size_t)m : (size_t)n;
    for (size_t t = 0; t < rows; ++t)
        for (size_t e = 0; e < rows; ++e)
            if (matrix[t * n + e] < 0) bits[(fast ? 0 : (e / 32) * n) + t] |= 1u << (e % 32);
    usbeam_status st = usbeam_cuda_exec_alloc(p->exec, (words ? words : 1) * sizeof(uint32_t), "hadamard signs",
                                              (void **)&p->sign_bits);
    if (st == USBEAM_OK) st = usbeam_cuda_exec_upload(p->exec, p->sign_bits, bits, (words ? words : 1) * sizeof(uint32_t));
    usbeam_free(bits);
    if (st != USBEAM_OK) return st;

    const size_t tile = ((size_t)n << log2S) * acc;
    p->shared_bytes = (fast ? tile : 2 * tile) + (fast && m == 1 ? 0 : words * sizeof(uint32_t));
    if (p->shared_bytes > (size_t)usbeam_cuda_exec_max_shared_optin(p->exec))
        return usbeam_fail(USBEAM_ERR_UNSUPPORTED, "order %d: the decode tile (%zu bytes) exceeds the device's "
                           "shared memory per block", n, p->shared_bytes);
    switch (p->in_dtype) {
    case USBEAM_DTYPE_INT16: p->kernel = fast ? fast_kernel_for<int16_t>(m) : direct_kernel_for<int16_t>(n); break;
    case USBEAM_DTYPE_INT32: p->kernel = fast ? fast_kernel_for<int32_t>(m) : direct_kernel_for<int32_t>(n); break;
    default: p->kernel = fast ? fast_kernel_for<float>(m) : direct_kernel_for<float>(n); break;
    }
    return usbeam_cuda_allow_dynamic_shared((const void *)p->kernel, p->shared_bytes);
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
    usbeam_hadamard_cuda *p = (usbeam_hadamard_cuda *)usbeam_alloc(sizeof *p);
    if (!p) return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "hadamard CUDA plan");
    memset(p, 0, sizeof *p);
    p->in_dtype = params->in_dtype;
    p->algorithm = params->algorithm;
    p->n_outer = params->n_outer;
    Layout *L = &p->layout;
    L->n = (int)n;
    L->base = p->algorithm == USBEAM_HADAMARD_FAST ? (int)base_order : (int)n;
    L->log2n = (n & (n - 1)) == 0 ? floor_log2(n) : -1;
    L->inner = params->n_inner;
    L->samples = params->n_outer * params->n_inner;
    L->transmit_last = params->transmit_last != 0;
    L->out_int32 = params->out_dtype == USBEAM_DTYPE_INT32;
    L->by_n.init((uint32_t)n);
    L->by_n32.init(n % 32 == 0 ? (uint32_t)(n / 32) : 1u);
    L->inv_n = 1.0 / (double)n;
    L->inv_n_f = (float)L->inv_n; /* exact where it is used (n = 2^k) */

    usbeam_status st = usbeam_cuda_exec_create(STAGE_NAMES, 3, &p->exec);
    if (st == USBEAM_OK) st = p->algorithm == USBEAM_HADAMARD_GEMM ? create_gemm(p, matrix, total) : create_tiled(p, matrix);
    if (st != USBEAM_OK) {
        usbeam_hadamard_cuda_destroy(p);
        return st;
    }
    *out = p;
    return USBEAM_OK;
}

/* The access modes of this call: vectors need 16-byte aligned pointers, which a view of an
 * array (DeviceArray a[k], a foreign pointer) need not have. */
static Layout call_layout(const usbeam_hadamard_cuda *p, const void *in, const void *out)
{
    Layout L = p->layout;
    const size_t in_bytes = p->in_dtype == USBEAM_DTYPE_INT16 ? 2 : 4, vector = 16 / in_bytes;
    const bool in_aligned = ((uintptr_t)in & 15) == 0, out_aligned = ((uintptr_t)out & 15) == 0;
    L.load_mode = L.inner == 1 ? LOAD_SEGMENT : (in_aligned && L.inner % vector == 0) ? LOAD_VECTOR : LOAD_SCALAR;
    L.store_mode = (L.transmit_last || L.inner == 1) ? STORE_SEGMENT
                   : (out_aligned && L.inner % 4 == 0) ? STORE_VECTOR : STORE_SCALAR;
    return L;
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
            const Layout L = call_layout(p, in, out);
            const unsigned blocks = (unsigned)((L.samples + ((size_t)1 << L.log2S) - 1) >> L.log2S);
            const DecodeKernel kernel = p->kernel;
            kernel<<<blocks, THREADS, p->shared_bytes, stream>>>(L, p->sign_bits, in, out);
            st = usbeam_cuda_check(cudaGetLastError(), "hadamard decode launch", __FILE__, __LINE__);
        }
        if (st == USBEAM_OK) st = usbeam_cuda_stage_end(e, STAGE_DECODE);
    }
    usbeam_cuda_exec_end(e);
    return st;
}
