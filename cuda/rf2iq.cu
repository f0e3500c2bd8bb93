/*
 * rf2iq.cu - RF -> IQ demodulation, CUDA twin of csrc/demod/rf2iq.c (same math; read its header).
 *
 * Layout: in  RF [n_lines][n_samples] (int16 / float32 / float64) on the device;
 *         out IQ [n_lines][n_out] complex64 on the device, n_out = ceil(n_samples / D).
 * Tables come from rf2iq.c (double, plan time): phasor[m] = exp(-2j pi fc (t0 + m/fs)),
 * Butterworth (b, a, filtfilt step state, padlen) or reversed modulated FIR taps q.
 *
 * FIR (kaiser / taps), stage "rf2iq.fir": a block computes FIR_OUTPUTS consecutive kept
 * outputs of one line, one per thread.  (h * x)[j D] = phasor[j D] sum_k q[k] rfpad[j D + k],
 * rfpad = the RF line with `lead` zeros before it and zeros after.  The taps are walked in
 * chunks of FIR_TAP_CHUNK: the block first stages the chunk of taps and the input tile it
 * touches, (FIR_OUTPUTS-1) D + chunk samples kept in the input dtype, in shared memory, so
 * each RF sample is read from global memory once per block and chunk instead of once per
 * tap.  The tile is stored by phase (polyphase layout): sample t at (t mod D) Q + t / D, so
 * that thread i's tap k, sample i D + k, sits at (k mod D) Q + i + k / D and the 32 lanes of
 * a warp read 32 consecutive elements (no bank conflict; the plain layout put lane i at
 * i D + k, a D-way conflict).  The taps are summed phase by phase (k = p, p + D, ...), in
 * double; the CPU sums them in another order too (it vectorises), hence tolerances.py.
 *
 * Butterworth, zero-phase filtfilt as scipy (MUST rf2iq): the recursion (transposed
 * direct form II, scipy.signal.lfilter) forward then backward in double, with scipy's odd
 * extension of padlen samples and lfilter_zi initial states, like the CPU.  The lines live
 * interleaved in a scratch buffer x[s][line] (complex double) so that each step of a
 * recursion is one coalesced access across a warp of lines.  Stage "rf2iq.mix" down-mixes
 * RF into it through a shared-memory transpose and writes the odd extension; stage
 * "rf2iq.filtfilt" runs the recursions; stage "rf2iq.decimate" transposes the kept samples
 * back to [line][n_out].  Every recursion step uses explicitly rounded double operations
 * (no FMA contraction): the CPU's arithmetic, operation for operation.
 *
 * filtfilt is a chunked linear-recurrence scan (the blocked form of the parallel prefix for
 * linear recurrences: Kogge & Stone, IEEE Trans. Computers C-22 (1973) 786; Blelloch, "Prefix
 * sums and their applications", CMU-CS-90-190, section 1.4), per direction:
 *   1. each (line, chunk of C samples) runs the recursion from a zero state (chunk 0 from the
 *      true initial state), writing its outputs in place and its final state;
 *   2. per line, the true state at each chunk start: z[c+1] = z0_end[c] + F^C z[c], F the
 *      recursion's state matrix with zero input (F^C computed at plan time by C zero-input
 *      steps from each unit state): ceil(total / C) matrix-vector products per line;
 *   3. each (line, chunk) adds the zero-input response of its true start state,
 *      y[s] += (F^(s - start) z[c])_0, one O(order) step per sample.
 * The forward correction and the backward zero-state pass of a chunk run in one kernel (the
 * backward pass of a chunk needs only that chunk's final forward outputs), and the last
 * backward correction writes the kept samples only.  Per sample and direction: one
 * recursion step and one zero-input step (the serial recursion: one step), on lines x chunks
 * threads instead of one thread per line; memory traffic per sample of the scratch (16
 * bytes): forward, 2 reads and 2 writes; backward, 1 read and 1 write plus 1 read and 1
 * write per kept sample; the scan adds 2 order reads and writes per chunk and direction.
 * Exact up to rounding: the correction changes the order of roundings.  In (b, a) form a
 * high-order low-cutoff Butterworth is ill-conditioned (F is far from normal: the carried
 * states cancel), so the plan measures the chunked result against the serial recursion on
 * a probe line, on the host, with these very functions (__host__ __device__, the same
 * operations): it takes the smallest chunk length C that keeps max |chunked - serial| within
 * PROBE_MAX_REL of max |serial| and, when none does (e.g. order 8 or 10 at Wn 0.05), or
 * fewer than 4 chunks would remain (short lines, or so many lines that lines x chunks near
 * TARGET_THREADS asks for long chunks), runs the serial recursion, one thread per line: the
 * CPU's result for any filter.
 */
#include "runtime/exec.cuh"

namespace {

enum { STAGE_FIR = 0, STAGE_MIX = 1, STAGE_FILTFILT = 2, STAGE_DECIMATE = 3 };
const char *const STAGE_NAMES[] = {"rf2iq.fir", "rf2iq.mix", "rf2iq.filtfilt", "rf2iq.decimate"};

constexpr int FIR_OUTPUTS = 128;   /* threads per FIR block = outputs per block */
constexpr int FIR_TAP_CHUNK = 512; /* taps staged per pass */
constexpr int TILE = 32;           /* transpose tile, TILE x TILE values, TILE x TILE_ROWS threads */
constexpr int TILE_ROWS = 8;
constexpr int SERIAL_THREADS = 128;
constexpr int CHUNK_ROWS = 4;      /* chunk kernels: 32 lines x CHUNK_ROWS chunks per block */
constexpr int SCAN_THREADS = 128;
constexpr int PREFETCH = 8;        /* samples loaded ahead of the recursion, per thread */
/* filtfilt kernels: at least 3 blocks of 128 threads per SM (<= 168 registers; without the
 * bound the order <= 16 instantiation takes 241, 2 blocks).  12 warps x 8 loads x 512 bytes
 * in flight per SM, about what an H100 needs to stream from DRAM. */
constexpr int FILTFILT_MIN_BLOCKS = 3;
constexpr unsigned MAX_GRID_Y = 65535u;
/* chunked filtfilt: chunk lengths 2^k from MIN_CHUNK up, at least MIN_CHUNKS per line;
 * the smallest C that gives about TARGET_THREADS (lines x chunks) is tried first */
constexpr size_t MIN_CHUNK = 32, MIN_CHUNKS = 4, TARGET_THREADS = 1u << 17;
constexpr double PROBE_MAX_REL = 1e-9; /* 1000x below tolerances.py rf2iq_cuda_rel */

struct ButterCoefficients {
    double b[USBEAM_RF2IQ_MAX_ORDER + 1], a[USBEAM_RF2IQ_MAX_ORDER + 1];
    double step_state[USBEAM_RF2IQ_MAX_ORDER];
    int order;
};

template <typename T>
__device__ __forceinline__ double as_double(T v)
{
    return (double)v;
}

/* ---- FIR ---------------------------------------------------------------------------- */

/* Thread i -> kept output first_out + i of line blockIdx.y (+ k gridDim.y).  Per block and
 * tap chunk: global reads of (FIR_OUTPUTS - 1) D + chunk samples and chunk taps (coalesced),
 * then 2 chunk DFMA per thread from shared memory (taps: broadcast; tile: consecutive). */
template <typename T>
__global__ void fir_kernel(const T *__restrict__ rf, size_t n_lines, size_t n_samples, size_t n_out,
                           size_t decimation, const double2 *__restrict__ taps, size_t n_taps, size_t lead,
                           const double2 *__restrict__ phasor, float2 *__restrict__ iq)
{
    extern __shared__ __align__(16) unsigned char shared_bytes[];
    double2 *tap_chunk = (double2 *)shared_bytes;
    T *tile = (T *)(tap_chunk + FIR_TAP_CHUNK);
    /* phase rows of Q elements: Q * D covers the widest tile, (FIR_OUTPUTS-1) D + FIR_TAP_CHUNK */
    const unsigned D = (unsigned)decimation, Q = FIR_OUTPUTS - 1 + (FIR_TAP_CHUNK + D - 1) / D;

    const size_t first_out = (size_t)blockIdx.x * FIR_OUTPUTS;
    if (first_out >= n_out) return;
    const size_t outputs = n_out - first_out < FIR_OUTPUTS ? n_out - first_out : FIR_OUTPUTS;
    const size_t j = first_out + threadIdx.x;
    for (size_t line = blockIdx.y; line < n_lines; line += gridDim.y) {
        const T *src = rf + line * n_samples;
        double acc_re = 0.0, acc_im = 0.0;
        for (size_t k0 = 0; k0 < n_taps; k0 += FIR_TAP_CHUNK) {
            const unsigned chunk = (unsigned)(n_taps - k0 < FIR_TAP_CHUNK ? n_taps - k0 : FIR_TAP_CHUNK);
            const unsigned tile_len = (unsigned)(outputs - 1) * D + chunk;
            /* padded index first_out*D + k0 + t is RF sample first_out*D + k0 + t - lead */
            const ptrdiff_t origin = (ptrdiff_t)(first_out * decimation + k0) - (ptrdiff_t)lead;
            __syncthreads(); /* the previous chunk is no longer read */
            for (unsigned t = threadIdx.x; t < chunk; t += blockDim.x) tap_chunk[t] = taps[k0 + t];
            for (unsigned t = threadIdx.x; t < tile_len; t += blockDim.x) {
                const ptrdiff_t m = origin + (ptrdiff_t)t;
                const unsigned q = t / D; /* 32-bit: once per staged sample, not per tap */
                tile[(t - q * D) * Q + q] = (m >= 0 && m < (ptrdiff_t)n_samples) ? src[m] : (T)0;
            }
            __syncthreads();
            if (threadIdx.x < outputs) {
                const unsigned phases = D < chunk ? D : chunk;
                for (unsigned p = 0; p < phases; ++p) {
                    const T *x = tile + p * Q + threadIdx.x;
                    for (unsigned k = p, q = 0; k < chunk; k += D, ++q) {
                        const double v = as_double(x[q]);
                        acc_re += tap_chunk[k].x * v;
                        acc_im += tap_chunk[k].y * v;
                    }
                }
            }
        }
        if (threadIdx.x < outputs) {
            const double2 p = phasor[j * decimation];
            iq[line * n_out + j] = make_float2((float)(2.0 * (acc_re * p.x - acc_im * p.y)),
                                               (float)(2.0 * (acc_re * p.y + acc_im * p.x)));
        }
    }
}

/* ---- Butterworth filtfilt: the recursion, shared by the kernels and the plan-time probe ---- */

/* RF2IQ_UNROLL for code the host compiler sees too (it does not know the pragma) */
#ifdef __CUDA_ARCH__
#define RF2IQ_UNROLL _Pragma("unroll")
#else
#define RF2IQ_UNROLL
#endif

/* Correctly rounded double operations, never contracted into an FMA (the host compiler does
 * not contract in ISO C++ mode, the emulator builds with -ffp-contract=off). */
__host__ __device__ __forceinline__ double mul_rn(double a, double b)
{
#ifdef __CUDA_ARCH__
    return __dmul_rn(a, b);
#else
    return a * b;
#endif
}
__host__ __device__ __forceinline__ double add_rn(double a, double b)
{
#ifdef __CUDA_ARCH__
    return __dadd_rn(a, b);
#else
    return a + b;
#endif
}
__host__ __device__ __forceinline__ double sub_rn(double a, double b)
{
#ifdef __CUDA_ARCH__
    return __dsub_rn(a, b);
#else
    return a - b;
#endif
}

/* One step of the transposed direct-form II recursion (scipy.signal.lfilter), the CPU's
 * iir_pass operation for operation; NB >= order bounds the unrolled state.  Each z[k] is
 * written under the one predicate k < order, its first term chosen by a select: a separate
 * branch for k == order - 1 lets the compiler fold it into one store at a run-time index,
 * which puts z in local memory. */
template <int NB>
__host__ __device__ __forceinline__ double2 tdf2_step(const ButterCoefficients &c, double2 (&z)[NB], double2 v)
{
    const int order = c.order;
    const double2 y = make_double2(add_rn(mul_rn(c.b[0], v.x), z[0].x), add_rn(mul_rn(c.b[0], v.y), z[0].y));
RF2IQ_UNROLL
    for (int k = 0; k < NB; ++k) {
        const int next = k + 1 < NB ? k + 1 : k; /* k + 1 where it is used (k < order - 1) */
        const double bx = mul_rn(c.b[k + 1], v.x), by = mul_rn(c.b[k + 1], v.y);
        /* z[k+1] + b v - a y, and at k = order - 1 (no z[k+1]): b v - a y */
        const double fx = k < order - 1 ? add_rn(z[next].x, bx) : bx;
        const double fy = k < order - 1 ? add_rn(z[next].y, by) : by;
        if (k < order) z[k] = make_double2(sub_rn(fx, mul_rn(c.a[k + 1], y.x)), sub_rn(fy, mul_rn(c.a[k + 1], y.y)));
    }
    return y;
}

/* One zero-input step, w <- F w (the output of that step is w[0], taken before). */
template <int NB>
__host__ __device__ __forceinline__ void zero_input_step(const ButterCoefficients &c, double2 (&w)[NB])
{
    const int order = c.order;
    const double2 w0 = w[0];
RF2IQ_UNROLL
    for (int k = 0; k < NB; ++k) {
        const int next = k + 1 < NB ? k + 1 : k;
        const double ax = mul_rn(c.a[k + 1], w0.x), ay = mul_rn(c.a[k + 1], w0.y);
        if (k < order)
            w[k] = k < order - 1 ? make_double2(sub_rn(w[next].x, ax), sub_rn(w[next].y, ay)) : make_double2(-ax, -ay);
    }
}

template <int NB>
__host__ __device__ __forceinline__ void scaled_state(const ButterCoefficients &c, double2 v, double2 (&z)[NB])
{
RF2IQ_UNROLL
    for (int k = 0; k < NB; ++k)
        z[k] = k < c.order ? make_double2(mul_rn(c.step_state[k], v.x), mul_rn(c.step_state[k], v.y))
                           : make_double2(0.0, 0.0);
}

/* Walk count samples of one column, first, first + dir, ..., in place: *p = op(*p) in order,
 * loading PREFETCH samples ahead so that many loads are in flight at every step (the stores go
 * to other samples).  op carries the recursion's state (it runs one sample after another). */
template <class Op>
__host__ __device__ __forceinline__ void sweep_prefetched(double2 *__restrict__ col, size_t L, ptrdiff_t first, int dir,
                                                          int count, Op op)
{
    const ptrdiff_t step = dir * (ptrdiff_t)L, ahead = PREFETCH * step;
    double2 *p = col + first * (ptrdiff_t)L;
    double2 v[PREFETCH];
RF2IQ_UNROLL
    for (int u = 0; u < PREFETCH; ++u)
        if (u < count) v[u] = p[u * step];
    for (int s0 = 0; s0 < count; s0 += PREFETCH) {
RF2IQ_UNROLL
        for (int u = 0; u < PREFETCH; ++u, p += step) {
            if (s0 + u >= count) break;
            const double2 in = v[u];
            if (s0 + u + PREFETCH < count) v[u] = p[ahead];
            *p = op(in);
        }
    }
}

/* The IIR recursion (direct form II transposed) over count samples from first in direction
 * dir, in place, state z carried in and out. */
template <int NB>
__host__ __device__ __forceinline__ void run_recursion(double2 *__restrict__ col, size_t L, ptrdiff_t first, int dir,
                                                       int count, const ButterCoefficients &c, double2 (&z)[NB])
{
    sweep_prefetched(col, L, first, dir, count, [&](double2 in) { return tdf2_step<NB>(c, z, in); });
}

/* y[s] += (zero-input response of state z)_0 over samples first, first + dir, ... (count of
 * them), in place, z updated. */
template <int NB>
__host__ __device__ __forceinline__ void add_zero_input_response(double2 *__restrict__ col, size_t L, ptrdiff_t first,
                                                                 int dir, int count, const ButterCoefficients &c,
                                                                 double2 (&z)[NB])
{
    sweep_prefetched(col, L, first, dir, count, [&](double2 y) {
        const double2 out = make_double2(add_rn(y.x, z[0].x), add_rn(y.y, z[0].y));
        zero_input_step<NB>(c, z);
        return out;
    });
}

/* Serial filtfilt of one line (already extended: total samples), as the CPU. */
template <int NB>
__host__ __device__ void filtfilt_line(double2 *col, size_t L, size_t total, const ButterCoefficients &c)
{
    double2 z[NB];
    scaled_state<NB>(c, col[0], z);
    run_recursion<NB>(col, L, 0, 1, (int)total, c, z);
    scaled_state<NB>(c, col[(total - 1) * L], z);
    run_recursion<NB>(col, L, (ptrdiff_t)total - 1, -1, (int)total, c, z);
}

struct Chunking {
    size_t total;     /* samples per extended line */
    int length, count; /* C, and ceil(total / C) chunks */
};

/* state slot k of chunk `chunk` of this line: S[(chunk * order + k) * L] (S = states + line) */
__host__ __device__ __forceinline__ size_t state_at(int chunk, int k, int order, size_t L)
{
    return ((size_t)chunk * order + k) * L;
}

/* Phase 1, forward: chunk `chunk` from the zero state (chunk 0: lfilter_zi x[0]); its end
 * state into S. */
template <int NB>
__host__ __device__ void chunk_forward(double2 *col, double2 *S, size_t L, const Chunking &ch, int chunk,
                                       const ButterCoefficients &c)
{
    const size_t start = (size_t)chunk * ch.length;
    const int count = (int)(ch.total - start < (size_t)ch.length ? ch.total - start : (size_t)ch.length);
    double2 z[NB];
    if (chunk == 0)
        scaled_state<NB>(c, col[0], z);
    else
RF2IQ_UNROLL
        for (int k = 0; k < NB; ++k) z[k] = make_double2(0.0, 0.0);
    run_recursion<NB>(col, L, (ptrdiff_t)start, 1, count, c, z);
RF2IQ_UNROLL
    for (int k = 0; k < NB; ++k)
        if (k < c.order) S[state_at(chunk, k, c.order, L)] = z[k];
}

/* Phase 2, one line: the chunks' true start states from their zero-state end states, in
 * the direction's order; F = F^C row-major [order][order].  The first chunk of the direction
 * ran from the true state already: its slot holds a true end state. */
template <int NB>
__host__ __device__ void scan_line(double2 *S, size_t L, int chunks, const ButterCoefficients &c, const double *F, bool forward)
{
    const int order = c.order;
    double2 z[NB];
    const int first = forward ? 0 : chunks - 1, step = forward ? 1 : -1;
RF2IQ_UNROLL
    for (int k = 0; k < NB; ++k) z[k] = k < order ? S[state_at(first, k, order, L)] : make_double2(0.0, 0.0);
    for (int i = 1; i < chunks; ++i) {
        const int chunk = first + step * i;
        double2 end[NB]; /* the chunk's end state from zero, then from z */
RF2IQ_UNROLL
        for (int k = 0; k < NB; ++k) {
            end[k] = k < order ? S[state_at(chunk, k, order, L)] : make_double2(0.0, 0.0);
            if (k < order) S[state_at(chunk, k, order, L)] = z[k];
        }
        if (i == chunks - 1) break; /* the last chunk's end state is not needed */
RF2IQ_UNROLL
        for (int k = 0; k < NB; ++k)
RF2IQ_UNROLL
            for (int j = 0; j < NB; ++j)
                if (k < order && j < order) {
                    const double f = F[k * order + j];
                    end[k] = make_double2(add_rn(end[k].x, mul_rn(f, z[j].x)), add_rn(end[k].y, mul_rn(f, z[j].y)));
                }
RF2IQ_UNROLL
        for (int k = 0; k < NB; ++k) z[k] = end[k];
    }
}

/* Phase 3 forward + phase 1 backward of one chunk: add the zero-input response of the true
 * start state (chunks after the first), then run the backward recursion over the chunk's
 * final forward outputs from the zero state (the last chunk: lfilter_zi y[total - 1]); the
 * backward end state replaces the forward start state in S. */
template <int NB>
__host__ __device__ void chunk_fix_then_backward(double2 *col, double2 *S, size_t L, const Chunking &ch, int chunk,
                                                 const ButterCoefficients &c)
{
    const size_t start = (size_t)chunk * ch.length;
    const int count = (int)(ch.total - start < (size_t)ch.length ? ch.total - start : (size_t)ch.length);
    double2 z[NB];
    if (chunk > 0) {
RF2IQ_UNROLL
        for (int k = 0; k < NB; ++k) z[k] = k < c.order ? S[state_at(chunk, k, c.order, L)] : make_double2(0.0, 0.0);
        add_zero_input_response<NB>(col, L, (ptrdiff_t)start, 1, count, c, z);
    }
    if (chunk == ch.count - 1)
        scaled_state<NB>(c, col[(ch.total - 1) * L], z);
    else
RF2IQ_UNROLL
        for (int k = 0; k < NB; ++k) z[k] = make_double2(0.0, 0.0);
    run_recursion<NB>(col, L, (ptrdiff_t)(start + count) - 1, -1, count, c, z);
RF2IQ_UNROLL
    for (int k = 0; k < NB; ++k)
        if (k < c.order) S[state_at(chunk, k, c.order, L)] = z[k];
}

/* Phase 3 backward: the zero-input response of the true start state (chunks before the last),
 * added to the kept samples only, s = pad + j D (the rest is never read again). */
template <int NB>
__host__ __device__ void chunk_fix_backward(double2 *col, const double2 *S, size_t L, const Chunking &ch, int chunk,
                                            const ButterCoefficients &c, size_t pad, size_t n, size_t decimation)
{
    if (chunk == ch.count - 1) return; /* ran from its true state */
    const size_t start = (size_t)chunk * ch.length, end = start + (size_t)ch.length; /* a full chunk */
    if (end <= pad || start >= pad + n) return; /* extension only */
    const size_t last = (end < pad + n ? end : pad + n) - 1; /* last interior sample in the chunk */
    size_t kept = pad + (last - pad) / decimation * decimation; /* the one division per thread */
    if (kept < start) return; /* no kept sample here */
    double2 z[NB];
RF2IQ_UNROLL
    for (int k = 0; k < NB; ++k) z[k] = k < c.order ? S[state_at(chunk, k, c.order, L)] : make_double2(0.0, 0.0);
    for (size_t s = end; s-- > start;) {
        if (s == kept) {
            double2 *p = col + s * L;
            const double2 y = *p;
            *p = make_double2(add_rn(y.x, z[0].x), add_rn(y.y, z[0].y));
            if (kept < pad + decimation) break; /* j = 0 done */
            kept -= decimation;
        }
        zero_input_step<NB>(c, z);
    }
}

/* ---- Butterworth filtfilt: kernels ---------------------------------------------------- */

/* x[(pad + m) * n_lines + line] = RF[line][m] * phasor[m], through a shared-memory tile so
 * that both the read (along m) and the write (along line) are coalesced; the writer of
 * sample m in 1..pad (n-1-pad..n-2) also writes its odd reflection through the first (last)
 * sample, x[pad - m] = 2 x[pad] - x[pad + m], as scipy's padtype='odd' (the CPU's order). */
template <typename T>
__global__ void mix_transpose_kernel(const T *__restrict__ rf, size_t n_lines, size_t n_samples, size_t pad,
                                     const double2 *__restrict__ phasor, double2 *__restrict__ x)
{
    __shared__ double2 tile[TILE][TILE + 1];
    const size_t m0 = (size_t)blockIdx.x * TILE, line0 = (size_t)blockIdx.y * TILE;
    for (int r = threadIdx.y; r < TILE; r += TILE_ROWS) {
        const size_t line = line0 + r, m = m0 + threadIdx.x;
        if (line < n_lines && m < n_samples) {
            const double v = as_double(rf[line * n_samples + m]);
            const double2 p = phasor[m];
            tile[r][threadIdx.x] = make_double2(__dmul_rn(v, p.x), __dmul_rn(v, p.y));
        }
    }
    __syncthreads();
    for (int r = threadIdx.y; r < TILE; r += TILE_ROWS) {
        const size_t m = m0 + r, line = line0 + threadIdx.x;
        if (line >= n_lines || m >= n_samples) continue;
        const double2 v = tile[threadIdx.x][r];
        x[(pad + m) * n_lines + line] = v;
        if (m >= 1 && m <= pad) { /* head reflection, through sample 0 */
            const double h = as_double(rf[line * n_samples]);
            const double2 head = make_double2(__dmul_rn(h, phasor[0].x), __dmul_rn(h, phasor[0].y));
            x[(pad - m) * n_lines + line] = make_double2(__dsub_rn(2.0 * head.x, v.x), __dsub_rn(2.0 * head.y, v.y));
        }
        if (m + 1 + pad >= n_samples && m + 2 <= n_samples) { /* tail, through sample n - 1 */
            const double t = as_double(rf[line * n_samples + n_samples - 1]);
            const double2 tail = make_double2(__dmul_rn(t, phasor[n_samples - 1].x), __dmul_rn(t, phasor[n_samples - 1].y));
            x[(pad + 2 * (n_samples - 1) - m) * n_lines + line] =
                make_double2(__dsub_rn(2.0 * tail.x, v.x), __dsub_rn(2.0 * tail.y, v.y));
        }
    }
}

/* Thread -> (line: threadIdx.x across a warp, chunk: blockIdx.y * CHUNK_ROWS + threadIdx.y).
 * A warp steps 32 consecutive lines of one chunk through their samples together: one
 * coalesced 512-byte access per sample.  Traffic per sample: forward, a read and a write
 * (phase 1), then a read and a write (phase 3) plus a read and a write (backward phase 1,
 * mostly from cache); backward phase 3, a read and a write per kept sample. */
template <int NB>
__global__ void __launch_bounds__(TILE *CHUNK_ROWS, FILTFILT_MIN_BLOCKS) chunk_forward_kernel(double2 *__restrict__ x, double2 *__restrict__ states,
                                                                          size_t n_lines, Chunking ch, ButterCoefficients c)
{
    const size_t line = (size_t)blockIdx.x * TILE + threadIdx.x;
    const int chunk = (int)(blockIdx.y * CHUNK_ROWS + threadIdx.y);
    if (line >= n_lines || chunk >= ch.count) return;
    chunk_forward<NB>(x + line, states + line, n_lines, ch, chunk, c);
}

/* Thread -> line; F^C (order^2 doubles) in shared memory, read by all lanes at once. */
template <int NB>
__global__ void __launch_bounds__(SCAN_THREADS) scan_kernel(double2 *__restrict__ states, size_t n_lines, int chunks,
                                                            ButterCoefficients c, const double *__restrict__ power,
                                                            int forward)
{
    __shared__ double F[USBEAM_RF2IQ_MAX_ORDER * USBEAM_RF2IQ_MAX_ORDER];
    for (int k = threadIdx.x; k < c.order * c.order; k += blockDim.x) F[k] = power[k];
    __syncthreads();
    const size_t line = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (line < n_lines) scan_line<NB>(states + line, n_lines, chunks, c, F, forward != 0);
}

template <int NB>
__global__ void __launch_bounds__(TILE *CHUNK_ROWS, FILTFILT_MIN_BLOCKS) chunk_fix_then_backward_kernel(double2 *__restrict__ x,
                                                                                    double2 *__restrict__ states,
                                                                                    size_t n_lines, Chunking ch,
                                                                                    ButterCoefficients c)
{
    const size_t line = (size_t)blockIdx.x * TILE + threadIdx.x;
    const int chunk = (int)(blockIdx.y * CHUNK_ROWS + threadIdx.y);
    if (line >= n_lines || chunk >= ch.count) return;
    chunk_fix_then_backward<NB>(x + line, states + line, n_lines, ch, chunk, c);
}

template <int NB>
__global__ void __launch_bounds__(TILE *CHUNK_ROWS, FILTFILT_MIN_BLOCKS) chunk_fix_backward_kernel(double2 *__restrict__ x,
                                                                               const double2 *__restrict__ states,
                                                                               size_t n_lines, Chunking ch,
                                                                               ButterCoefficients c, size_t pad,
                                                                               size_t n_samples, size_t decimation)
{
    const size_t line = (size_t)blockIdx.x * TILE + threadIdx.x;
    const int chunk = (int)(blockIdx.y * CHUNK_ROWS + threadIdx.y);
    if (line >= n_lines || chunk >= ch.count) return;
    chunk_fix_backward<NB>(x + line, states + line, n_lines, ch, chunk, c, pad, n_samples, decimation);
}

/* Where no chunk length is accurate enough: one thread per line, the whole recursion. */
template <int NB>
__global__ void __launch_bounds__(SERIAL_THREADS, FILTFILT_MIN_BLOCKS) filtfilt_serial_kernel(double2 *__restrict__ x, size_t n_lines,
                                                                          size_t total, ButterCoefficients c)
{
    const size_t line = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (line < n_lines) filtfilt_line<NB>(x + line, n_lines, total, c);
}

/* iq[line][j] = 2 x[(pad + j D) * n_lines + line], transposed through shared memory. */
__global__ void decimate_transpose_kernel(const double2 *__restrict__ x, size_t n_lines, size_t n_out, size_t pad,
                                          size_t decimation, float2 *__restrict__ iq)
{
    __shared__ float2 tile[TILE][TILE + 1];
    const size_t j0 = (size_t)blockIdx.x * TILE, line0 = (size_t)blockIdx.y * TILE;
    for (int r = threadIdx.y; r < TILE; r += TILE_ROWS) {
        const size_t j = j0 + r, line = line0 + threadIdx.x;
        if (line < n_lines && j < n_out) {
            const double2 y = x[(pad + j * decimation) * n_lines + line];
            tile[threadIdx.x][r] = make_float2((float)(2.0 * y.x), (float)(2.0 * y.y));
        }
    }
    __syncthreads();
    for (int r = threadIdx.y; r < TILE; r += TILE_ROWS) {
        const size_t line = line0 + r, j = j0 + threadIdx.x;
        if (line < n_lines && j < n_out) iq[line * n_out + j] = tile[r][threadIdx.x];
    }
}

size_t dtype_bytes(usbeam_dtype dtype)
{
    return dtype == USBEAM_DTYPE_INT16 ? 2 : dtype == USBEAM_DTYPE_FLOAT32 ? 4 : 8;
}

/* ---- plan time: the chunk length ------------------------------------------------------ */

/* F^C, row-major: column j is C zero-input steps from unit state j. */
template <int NB>
void chunk_power(const ButterCoefficients &c, int length, double *F)
{
    for (int j = 0; j < c.order; ++j) {
        double2 w[NB];
        for (int k = 0; k < NB; ++k) w[k] = make_double2(k == j ? 1.0 : 0.0, 0.0);
        for (int s = 0; s < length; ++s) zero_input_step<NB>(c, w);
        for (int k = 0; k < c.order; ++k) F[k * c.order + j] = w[k].x;
    }
}

/* The chunked filtfilt of one extended line (stride 1) exactly as the kernels run it. */
template <int NB>
void filtfilt_chunked_host(double2 *line, double2 *S, const Chunking &ch, const ButterCoefficients &c, const double *F,
                           size_t pad, size_t n)
{
    for (int k = 0; k < ch.count; ++k) chunk_forward<NB>(line, S, 1, ch, k, c);
    scan_line<NB>(S, 1, ch.count, c, F, true);
    for (int k = 0; k < ch.count; ++k) chunk_fix_then_backward<NB>(line, S, 1, ch, k, c);
    scan_line<NB>(S, 1, ch.count, c, F, false);
    for (int k = 0; k < ch.count; ++k) chunk_fix_backward<NB>(line, S, 1, ch, k, c, pad, n, 1);
}

/* The smallest chunk length (2^k, from about TARGET_THREADS lines x chunks, at least
 * MIN_CHUNKS chunks) whose chunked filtfilt of a probe line (white noise in [-1, 1) on both
 * parts: little of it passes the low-pass, so the carried states are large against the
 * output, the pessimistic case) agrees with the serial recursion within PROBE_MAX_REL of
 * the output's maximum; 0 where none does (serial kernel).  F receives that length's F^C. */
template <int NB>
usbeam_status choose_chunk(const ButterCoefficients &c, size_t n, size_t pad, size_t n_lines, int *length, double *F)
{
    *length = 0;
    const size_t total = n + 2 * pad;
    size_t first = MIN_CHUNK;
    while (first < (size_t)1 << 20 && n_lines * (total / (2 * first)) >= TARGET_THREADS) first *= 2;
    if (first * MIN_CHUNKS > total) return USBEAM_OK;
    double2 *probe = (double2 *)usbeam_alloc(3 * total * sizeof(double2));
    double2 *S = (double2 *)usbeam_alloc((total / MIN_CHUNK + 1) * USBEAM_RF2IQ_MAX_ORDER * sizeof(double2));
    if (!probe || !S) {
        usbeam_free(probe);
        usbeam_free(S);
        return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "rf2iq: filtfilt probe line");
    }
    double2 *line = probe + total, *serial = probe + 2 * total;
    uint64_t state = 0x9e3779b97f4a7c15ull; /* xorshift64*: the same probe every time */
    for (size_t m = 0; m < n; ++m) {
        double part[2];
        for (double &v : part) {
            state ^= state >> 12, state ^= state << 25, state ^= state >> 27;
            v = (double)((state * 0x2545f4914f6cdd1dull) >> 11) * 0x1.0p-52 - 1.0;
        }
        probe[pad + m] = make_double2(part[0], part[1]);
    }
    const double2 head = probe[pad], tail = probe[pad + n - 1];
    for (size_t k = 1; k <= pad; ++k) { /* the odd extension, as mix_transpose_kernel */
        const double2 in = probe[pad + k], end = probe[pad + n - 1 - k];
        probe[pad - k] = make_double2(sub_rn(2.0 * head.x, in.x), sub_rn(2.0 * head.y, in.y));
        probe[pad + n - 1 + k] = make_double2(sub_rn(2.0 * tail.x, end.x), sub_rn(2.0 * tail.y, end.y));
    }
    memcpy(serial, probe, total * sizeof(double2));
    filtfilt_line<NB>(serial, 1, total, c);
    double scale = 0.0;
    for (size_t m = pad; m < pad + n; ++m) scale = fmax(scale, fmax(fabs(serial[m].x), fabs(serial[m].y)));
    for (size_t C = first; C * MIN_CHUNKS <= total && *length == 0; C *= 2) {
        const Chunking ch = {total, (int)C, (int)((total + C - 1) / C)};
        chunk_power<NB>(c, (int)C, F);
        memcpy(line, probe, total * sizeof(double2));
        filtfilt_chunked_host<NB>(line, S, ch, c, F, pad, n);
        double error = 0.0;
        for (size_t m = pad; m < pad + n; ++m)
            error = fmax(error, fmax(fabs(line[m].x - serial[m].x), fabs(line[m].y - serial[m].y)));
        if (error <= PROBE_MAX_REL * scale) *length = (int)C; /* NaN (overflow) fails too */
    }
    usbeam_free(probe);
    usbeam_free(S);
    return USBEAM_OK;
}

} // namespace

struct usbeam_rf2iq_cuda {
    usbeam_cuda_exec *exec;
    usbeam_rf2iq_params params;
    size_t n_out;
    double2 *phasor;          /* [n_samples] */
    /* FIR */
    double2 *taps;            /* [n_taps] q = reversed modulated taps */
    size_t n_taps, lead;
    size_t fir_shared_bytes;
    /* butter */
    ButterCoefficients coefficients;
    int bound;                /* NB: the state arrays' bound, 4, 8 or 16 >= order */
    size_t padlen;
    double2 *scratch;         /* [n_samples + 2 padlen][n_lines] */
    Chunking chunking;        /* length 0: the serial kernel */
    double2 *states;          /* [chunks][order][n_lines] */
    double *power;            /* F^C [order][order] */
};

template <typename T>
static usbeam_status fir_prepare(size_t shared_bytes)
{
    return usbeam_cuda_allow_dynamic_shared((const void *)fir_kernel<T>, shared_bytes);
}

/* The chunked scan's tables and buffers, or nothing (serial kernel). */
static usbeam_status butter_prepare(usbeam_rf2iq_cuda *p)
{
    const usbeam_rf2iq_params *prm = &p->params;
    const ButterCoefficients &c = p->coefficients;
    double F[USBEAM_RF2IQ_MAX_ORDER * USBEAM_RF2IQ_MAX_ORDER];
    int length = 0;
    usbeam_status st = p->bound == 4    ? choose_chunk<4>(c, prm->n_samples, p->padlen, prm->n_lines, &length, F)
                       : p->bound == 8 ? choose_chunk<8>(c, prm->n_samples, p->padlen, prm->n_lines, &length, F)
                                       : choose_chunk<16>(c, prm->n_samples, p->padlen, prm->n_lines, &length, F);
    p->chunking.total = prm->n_samples + 2 * p->padlen;
    p->chunking.length = length;
    p->chunking.count = length ? (int)((p->chunking.total + length - 1) / length) : 1;
    if (st != USBEAM_OK || length == 0) return st;
    if ((size_t)(p->chunking.count + CHUNK_ROWS - 1) / CHUNK_ROWS > MAX_GRID_Y) { /* 2^20+ samples: serial */
        p->chunking.length = 0, p->chunking.count = 1;
        return USBEAM_OK;
    }
    size_t bytes;
    if (usbeam_mul_size3((size_t)p->chunking.count * (size_t)c.order, prm->n_lines, sizeof(double2), &bytes) != 0)
        return usbeam_fail(USBEAM_ERR_SIZE_OVERFLOW, "rf: filtfilt chunk states overflow");
    const size_t f_bytes = (size_t)c.order * c.order * sizeof(double);
    if ((st = usbeam_cuda_exec_alloc(p->exec, bytes, "filtfilt chunk states", (void **)&p->states)) != USBEAM_OK ||
        (st = usbeam_cuda_exec_alloc(p->exec, f_bytes, "filtfilt F^C", (void **)&p->power)) != USBEAM_OK)
        return st;
    return usbeam_cuda_exec_upload(p->exec, p->power, F, f_bytes);
}

extern "C" usbeam_status usbeam_rf2iq_cuda_create(const usbeam_rf2iq_params *params, const usbeam_rf2iq_tables *t,
                                                  usbeam_rf2iq_cuda **out)
{
    if (!params || !t || !out) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "params, tables and plan must not be NULL");
    *out = nullptr;
    usbeam_rf2iq_cuda *p = (usbeam_rf2iq_cuda *)usbeam_alloc(sizeof *p);
    if (!p) return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "rf2iq CUDA plan");
    memset(p, 0, sizeof *p);
    p->params = *params;
    p->params.taps_re = p->params.taps_im = nullptr; /* keep no user pointer */
    p->n_out = t->n_out;
    const size_t n = params->n_samples;
    const bool butter = params->filter == USBEAM_RF2IQ_BUTTER;
    double2 *host = nullptr;
    usbeam_status st = usbeam_cuda_exec_create(STAGE_NAMES, 4, &p->exec);
    if (st != USBEAM_OK) goto fail;

    /* phasor table, interleaved for one 16-byte load */
    host = (double2 *)usbeam_alloc(n * sizeof(double2));
    if (!host) {
        st = usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "phasor table");
        goto fail;
    }
    for (size_t m = 0; m < n; ++m) host[m] = make_double2(t->phasor_re[m], t->phasor_im[m]);
    if ((st = usbeam_cuda_exec_alloc(p->exec, n * sizeof(double2), "phasor table", (void **)&p->phasor)) != USBEAM_OK ||
        (st = usbeam_cuda_exec_upload(p->exec, p->phasor, host, n * sizeof(double2))) != USBEAM_OK)
        goto fail;
    usbeam_free(host);
    host = nullptr;

    if (butter) {
        p->coefficients.order = params->order;
        for (int k = 0; k <= params->order; ++k) {
            p->coefficients.b[k] = t->b[k];
            p->coefficients.a[k] = t->a[k];
        }
        for (int k = 0; k < params->order; ++k) p->coefficients.step_state[k] = t->step_state[k];
        p->bound = params->order <= 4 ? 4 : params->order <= 8 ? 8 : 16;
        p->padlen = t->padlen;
        size_t rows = n + 2 * t->padlen, bytes;
        if (usbeam_mul_size3(rows, params->n_lines, sizeof(double2), &bytes) != 0) {
            st = usbeam_fail(USBEAM_ERR_SIZE_OVERFLOW, "rf: %zu lines x %zu samples of scratch overflows",
                             params->n_lines, rows);
            goto fail;
        }
        if ((params->n_lines + TILE - 1) / TILE > MAX_GRID_Y) {
            st = usbeam_fail(USBEAM_ERR_UNSUPPORTED, "rf: %zu lines, at most %zu on the CUDA Butterworth path",
                             params->n_lines, (size_t)MAX_GRID_Y * TILE);
            goto fail;
        }
        if (rows > (size_t)INT32_MAX) {
            st = usbeam_fail(USBEAM_ERR_UNSUPPORTED, "rf: %zu samples per line, at most 2^31 on the CUDA Butterworth path",
                             rows);
            goto fail;
        }
        if ((st = usbeam_cuda_exec_alloc(p->exec, bytes, "filtfilt scratch", (void **)&p->scratch)) != USBEAM_OK)
            goto fail;
        if ((st = butter_prepare(p)) != USBEAM_OK) goto fail;
    } else {
        p->n_taps = t->n_taps;
        p->lead = t->lead;
        host = (double2 *)usbeam_alloc(t->n_taps * sizeof(double2));
        if (!host) {
            st = usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "taps");
            goto fail;
        }
        for (size_t k = 0; k < t->n_taps; ++k) host[k] = make_double2(t->modulated_re[k], t->modulated_im[k]);
        if ((st = usbeam_cuda_exec_alloc(p->exec, t->n_taps * sizeof(double2), "taps", (void **)&p->taps)) !=
                USBEAM_OK ||
            (st = usbeam_cuda_exec_upload(p->exec, p->taps, host, t->n_taps * sizeof(double2))) != USBEAM_OK)
            goto fail;
        usbeam_free(host);
        host = nullptr;
        /* taps chunk + the input tile of the widest chunk, by phase: D rows of Q samples */
        const size_t D = params->decimation;
        if (D > (size_t)INT32_MAX / FIR_OUTPUTS) {
            st = usbeam_fail(USBEAM_ERR_UNSUPPORTED, "decimation: %zu is too large for the CUDA FIR path", D);
            goto fail;
        }
        const size_t tile = D * (FIR_OUTPUTS - 1 + (FIR_TAP_CHUNK + D - 1) / D);
        p->fir_shared_bytes = FIR_TAP_CHUNK * sizeof(double2) + tile * dtype_bytes(params->input_dtype);
        if (p->fir_shared_bytes > (size_t)usbeam_cuda_exec_max_shared_optin(p->exec)) {
            st = usbeam_fail(USBEAM_ERR_UNSUPPORTED,
                             "decimation: %zu needs %zu bytes of shared memory per block on the CUDA FIR path "
                             "(the device allows %d)",
                             params->decimation, p->fir_shared_bytes, usbeam_cuda_exec_max_shared_optin(p->exec));
            goto fail;
        }
        switch (params->input_dtype) {
        case USBEAM_DTYPE_INT16: st = fir_prepare<short>(p->fir_shared_bytes); break;
        case USBEAM_DTYPE_FLOAT32: st = fir_prepare<float>(p->fir_shared_bytes); break;
        default: st = fir_prepare<double>(p->fir_shared_bytes); break;
        }
        if (st != USBEAM_OK) goto fail;
    }
    *out = p;
    return USBEAM_OK;
fail:
    usbeam_free(host);
    usbeam_rf2iq_cuda_destroy(p);
    return st;
}

extern "C" void usbeam_rf2iq_cuda_destroy(usbeam_rf2iq_cuda *p)
{
    if (!p) return;
    usbeam_cuda_exec_destroy(p->exec);
    usbeam_free(p);
}

extern "C" usbeam_cuda_exec *usbeam_rf2iq_cuda_exec(usbeam_rf2iq_cuda *p) { return p ? p->exec : nullptr; }

template <int NB>
static usbeam_status launch_filtfilt(usbeam_rf2iq_cuda *p, cudaStream_t stream)
{
    const size_t L = p->params.n_lines;
    const Chunking &ch = p->chunking;
    const ButterCoefficients &c = p->coefficients;
    if (ch.length == 0) {
        filtfilt_serial_kernel<NB><<<(unsigned)((L + SERIAL_THREADS - 1) / SERIAL_THREADS), SERIAL_THREADS, 0, stream>>>(
            p->scratch, L, ch.total, c);
        USBEAM_CUDA_TRY(cudaGetLastError());
        return USBEAM_OK;
    }
    const dim3 block(TILE, CHUNK_ROWS), grid((unsigned)((L + TILE - 1) / TILE), (unsigned)((ch.count + CHUNK_ROWS - 1) / CHUNK_ROWS));
    const unsigned scan_blocks = (unsigned)((L + SCAN_THREADS - 1) / SCAN_THREADS);
    chunk_forward_kernel<NB><<<grid, block, 0, stream>>>(p->scratch, p->states, L, ch, c);
    USBEAM_CUDA_TRY(cudaGetLastError());
    scan_kernel<NB><<<scan_blocks, SCAN_THREADS, 0, stream>>>(p->states, L, ch.count, c, p->power, 1);
    USBEAM_CUDA_TRY(cudaGetLastError());
    chunk_fix_then_backward_kernel<NB><<<grid, block, 0, stream>>>(p->scratch, p->states, L, ch, c);
    USBEAM_CUDA_TRY(cudaGetLastError());
    scan_kernel<NB><<<scan_blocks, SCAN_THREADS, 0, stream>>>(p->states, L, ch.count, c, p->power, 0);
    USBEAM_CUDA_TRY(cudaGetLastError());
    chunk_fix_backward_kernel<NB><<<grid, block, 0, stream>>>(p->scratch, p->states, L, ch, c, p->padlen,
                                                              p->params.n_samples, p->params.decimation);
    USBEAM_CUDA_TRY(cudaGetLastError());
    return USBEAM_OK;
}

template <typename T>
static usbeam_status rf2iq_cuda_run(usbeam_rf2iq_cuda *p, const T *rf, float2 *iq)
{
    usbeam_cuda_exec *e = p->exec;
    cudaStream_t stream = usbeam_cuda_exec_cuda_stream(e);
    const usbeam_rf2iq_params *prm = &p->params;
    const size_t L = prm->n_lines, n = prm->n_samples;
    usbeam_status st;
    if (prm->filter != USBEAM_RF2IQ_BUTTER) {
        if ((st = usbeam_cuda_stage_begin(e, STAGE_FIR)) != USBEAM_OK) return st;
        dim3 grid((unsigned)((p->n_out + FIR_OUTPUTS - 1) / FIR_OUTPUTS), (unsigned)(L < MAX_GRID_Y ? L : MAX_GRID_Y));
        fir_kernel<T><<<grid, FIR_OUTPUTS, p->fir_shared_bytes, stream>>>(rf, L, n, p->n_out, prm->decimation, p->taps,
                                                                          p->n_taps, p->lead, p->phasor, iq);
        USBEAM_CUDA_TRY(cudaGetLastError());
        return usbeam_cuda_stage_end(e, STAGE_FIR);
    }
    const dim3 block(TILE, TILE_ROWS);
    if ((st = usbeam_cuda_stage_begin(e, STAGE_MIX)) != USBEAM_OK) return st;
    dim3 mix_grid((unsigned)((n + TILE - 1) / TILE), (unsigned)((L + TILE - 1) / TILE));
    mix_transpose_kernel<T><<<mix_grid, block, 0, stream>>>(rf, L, n, p->padlen, p->phasor, p->scratch);
    USBEAM_CUDA_TRY(cudaGetLastError());
    if ((st = usbeam_cuda_stage_end(e, STAGE_MIX)) != USBEAM_OK) return st;

    if ((st = usbeam_cuda_stage_begin(e, STAGE_FILTFILT)) != USBEAM_OK) return st;
    st = p->bound == 4 ? launch_filtfilt<4>(p, stream) : p->bound == 8 ? launch_filtfilt<8>(p, stream)
                                                                          : launch_filtfilt<16>(p, stream);
    if (st != USBEAM_OK) return st;
    if ((st = usbeam_cuda_stage_end(e, STAGE_FILTFILT)) != USBEAM_OK) return st;

    if ((st = usbeam_cuda_stage_begin(e, STAGE_DECIMATE)) != USBEAM_OK) return st;
    dim3 out_grid((unsigned)((p->n_out + TILE - 1) / TILE), (unsigned)((L + TILE - 1) / TILE));
    decimate_transpose_kernel<<<out_grid, block, 0, stream>>>(p->scratch, L, p->n_out, p->padlen, prm->decimation, iq);
    USBEAM_CUDA_TRY(cudaGetLastError());
    return usbeam_cuda_stage_end(e, STAGE_DECIMATE);
}

extern "C" usbeam_status usbeam_rf2iq_cuda_execute(usbeam_rf2iq_cuda *p, const void *in, void *out)
{
    if (!p || !in || !out) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "plan, in and out must not be NULL");
    usbeam_status st = usbeam_cuda_exec_begin(p->exec);
    if (st != USBEAM_OK) return st;
    switch (p->params.input_dtype) {
    case USBEAM_DTYPE_INT16: st = rf2iq_cuda_run(p, (const short *)in, (float2 *)out); break;
    case USBEAM_DTYPE_FLOAT32: st = rf2iq_cuda_run(p, (const float *)in, (float2 *)out); break;
    default: st = rf2iq_cuda_run(p, (const double *)in, (float2 *)out); break;
    }
    usbeam_cuda_exec_end(p->exec);
    return st;
}
