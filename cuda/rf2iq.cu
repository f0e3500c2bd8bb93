/*
 * rf2iq.cu - RF -> IQ demodulation, CUDA twin of csrc/rf2iq.c (same math; read its header).
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
 * tap; the sums are double, as on the CPU (their order differs: the CPU vectorises them).
 *
 * Butterworth, zero-phase filtfilt as scipy (MUST rf2iq): one thread per line runs the
 * recursion forward then backward in double, with scipy's odd extension of padlen samples
 * and lfilter_zi initial states, like the CPU.  The lines live interleaved in a scratch
 * buffer x[s][line] (complex double) so that each step of the recursion is one coalesced
 * access across a warp; stage "rf2iq.mix" down-mixes RF into it through a shared-memory
 * transpose, stage "rf2iq.filtfilt" runs the recursion, stage "rf2iq.decimate" transposes
 * the kept samples back to [line][n_out].  The recursion uses explicitly rounded double
 * operations (no FMA contraction), i.e. the CPU's arithmetic operation for operation.
 */
#include "runtime/exec.cuh"

namespace {

enum { STAGE_FIR = 0, STAGE_MIX = 1, STAGE_FILTFILT = 2, STAGE_DECIMATE = 3 };
const char *const STAGE_NAMES[] = {"rf2iq.fir", "rf2iq.mix", "rf2iq.filtfilt", "rf2iq.decimate"};

constexpr int FIR_OUTPUTS = 128;   /* threads per FIR block = outputs per block */
constexpr int FIR_TAP_CHUNK = 512; /* taps staged per pass */
constexpr int TILE = 32;           /* transpose tile, TILE x TILE values, TILE x TILE_ROWS threads */
constexpr int TILE_ROWS = 8;
constexpr int BUTTER_THREADS = 128;
constexpr unsigned MAX_GRID_Y = 65535u;

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

template <typename T>
__global__ void fir_kernel(const T *__restrict__ rf, size_t n_lines, size_t n_samples, size_t n_out,
                           size_t decimation, const double2 *__restrict__ taps, size_t n_taps, size_t lead,
                           const double2 *__restrict__ phasor, float2 *__restrict__ iq)
{
    extern __shared__ __align__(16) unsigned char shared_bytes[];
    double2 *tap_chunk = (double2 *)shared_bytes;
    T *tile = (T *)(tap_chunk + FIR_TAP_CHUNK);

    const size_t first_out = (size_t)blockIdx.x * FIR_OUTPUTS;
    if (first_out >= n_out) return;
    const size_t outputs = n_out - first_out < FIR_OUTPUTS ? n_out - first_out : FIR_OUTPUTS;
    const size_t j = first_out + threadIdx.x;
    for (size_t line = blockIdx.y; line < n_lines; line += gridDim.y) {
        const T *src = rf + line * n_samples;
        double acc_re = 0.0, acc_im = 0.0;
        for (size_t k0 = 0; k0 < n_taps; k0 += FIR_TAP_CHUNK) {
            const size_t chunk = n_taps - k0 < FIR_TAP_CHUNK ? n_taps - k0 : FIR_TAP_CHUNK;
            const size_t tile_len = (outputs - 1) * decimation + chunk;
            /* padded index first_out*D + k0 + t is RF sample first_out*D + k0 + t - lead */
            const ptrdiff_t origin = (ptrdiff_t)(first_out * decimation + k0) - (ptrdiff_t)lead;
            __syncthreads(); /* the previous chunk is no longer read */
            for (size_t t = threadIdx.x; t < chunk; t += blockDim.x) tap_chunk[t] = taps[k0 + t];
            for (size_t t = threadIdx.x; t < tile_len; t += blockDim.x) {
                const ptrdiff_t m = origin + (ptrdiff_t)t;
                tile[t] = (m >= 0 && m < (ptrdiff_t)n_samples) ? src[m] : (T)0;
            }
            __syncthreads();
            if (threadIdx.x < outputs) {
                const T *x = tile + threadIdx.x * decimation;
                for (size_t k = 0; k < chunk; ++k) {
                    const double v = as_double(x[k]);
                    acc_re += tap_chunk[k].x * v;
                    acc_im += tap_chunk[k].y * v;
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

/* ---- Butterworth filtfilt --------------------------------------------------------------- */

/* x[(pad + m) * n_lines + line] = RF[line][m] * phasor[m], through a shared-memory tile so
 * that both the read (along m) and the write (along line) are coalesced. */
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
        if (line < n_lines && m < n_samples) x[(pad + m) * n_lines + line] = tile[threadIdx.x][r];
    }
}

/* One pass of the transposed direct-form II recursion (scipy.signal.lfilter) over count
 * samples of one line, in place, starting from state step_state * first sample. */
__device__ void iir_pass(double2 *x, size_t stride, size_t count, bool forward, const ButterCoefficients &c)
{
    double zr[USBEAM_RF2IQ_MAX_ORDER], zi[USBEAM_RF2IQ_MAX_ORDER];
    const ptrdiff_t step = forward ? (ptrdiff_t)stride : -(ptrdiff_t)stride;
    double2 *xs = forward ? x : x + (count - 1) * stride;
    const double2 first = *xs;
#pragma unroll
    for (int k = 0; k < USBEAM_RF2IQ_MAX_ORDER; ++k) {
        zr[k] = k < c.order ? __dmul_rn(c.step_state[k], first.x) : 0.0;
        zi[k] = k < c.order ? __dmul_rn(c.step_state[k], first.y) : 0.0;
    }
    const int order = c.order;
    for (size_t s = 0; s < count; ++s, xs += step) {
        const double2 v = *xs;
        const double yr = __dadd_rn(__dmul_rn(c.b[0], v.x), zr[0]);
        const double yi = __dadd_rn(__dmul_rn(c.b[0], v.y), zi[0]);
#pragma unroll
        for (int k = 0; k < USBEAM_RF2IQ_MAX_ORDER; ++k) {
            if (k < order - 1) {
                zr[k] = __dsub_rn(__dadd_rn(zr[k + 1], __dmul_rn(c.b[k + 1], v.x)), __dmul_rn(c.a[k + 1], yr));
                zi[k] = __dsub_rn(__dadd_rn(zi[k + 1], __dmul_rn(c.b[k + 1], v.y)), __dmul_rn(c.a[k + 1], yi));
            } else if (k == order - 1) {
                zr[k] = __dsub_rn(__dmul_rn(c.b[k + 1], v.x), __dmul_rn(c.a[k + 1], yr));
                zi[k] = __dsub_rn(__dmul_rn(c.b[k + 1], v.y), __dmul_rn(c.a[k + 1], yi));
            }
        }
        *xs = make_double2(yr, yi);
    }
}

__global__ void filtfilt_kernel(double2 *__restrict__ x, size_t n_lines, size_t n_samples, size_t pad,
                                ButterCoefficients c)
{
    const size_t line = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (line >= n_lines) return;
    double2 *col = x + line; /* sample s of this line is col[s * n_lines] */
    const size_t L = n_lines;
    /* odd extension: reflect the line through its end points (scipy's padtype='odd') */
    const double2 head = col[pad * L], tail = col[(pad + n_samples - 1) * L];
    for (size_t k = 1; k <= pad; ++k) {
        const double2 in = col[(pad + k) * L], end = col[(pad + n_samples - 1 - k) * L];
        col[(pad - k) * L] = make_double2(__dsub_rn(2.0 * head.x, in.x), __dsub_rn(2.0 * head.y, in.y));
        col[(pad + n_samples - 1 + k) * L] =
            make_double2(__dsub_rn(2.0 * tail.x, end.x), __dsub_rn(2.0 * tail.y, end.y));
    }
    const size_t total = n_samples + 2 * pad;
    iir_pass(col, L, total, true, c);
    iir_pass(col, L, total, false, c);
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
    size_t padlen;
    double2 *scratch;         /* [n_samples + 2 padlen][n_lines] */
};

template <typename T>
static usbeam_status fir_prepare(size_t shared_bytes)
{
    return usbeam_cuda_allow_dynamic_shared((const void *)fir_kernel<T>, shared_bytes);
}

extern "C" usbeam_status usbeam_rf2iq_cuda_create(const usbeam_rf2iq_params *params, const usbeam_rf2iq_tables *t,
                                                  usbeam_rf2iq_cuda **out)
{
    if (!params || !t || !out) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "params, tables and plan must not be NULL");
    *out = nullptr;
    usbeam_rf2iq_cuda *p = (usbeam_rf2iq_cuda *)usbeam_alloc(sizeof *p);
    if (!p) return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "rf2iq CUDA plan");
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
        if ((st = usbeam_cuda_exec_alloc(p->exec, bytes, "filtfilt scratch", (void **)&p->scratch)) != USBEAM_OK)
            goto fail;
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
        /* taps chunk + the input tile of the widest chunk */
        const size_t tile = (size_t)(FIR_OUTPUTS - 1) * params->decimation + FIR_TAP_CHUNK;
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
    filtfilt_kernel<<<(unsigned)((L + BUTTER_THREADS - 1) / BUTTER_THREADS), BUTTER_THREADS, 0, stream>>>(
        p->scratch, L, n, p->padlen, p->coefficients);
    USBEAM_CUDA_TRY(cudaGetLastError());
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
