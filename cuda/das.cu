/*
 * das.cu - delay-and-sum beamforming for linear arrays, CUDA twin of csrc/das.c.
 *
 * Layouts: in  (n_frames, n_transmits, n_elements, n_samples) on the device: int16 / float32
 *              RF or complex64 IQ (interleaved re, im);
 *          out (n_frames, n_points) on the device: float32 (RF) or complex64 (IQ).
 * Units: positions m, times s (the plan's copies, double); s = (tau - t0) fs.
 *
 * The geometry is the CPU plan's (csrc/das_setup.c): element positions, points, transmit
 * models (usbeam_tx_model, with virtual sources), and the receive aperture of each point
 * (a contiguous element range).  Nothing is tabulated: each thread owns one output point
 * and computes, with the per-sample math of csrc/usbeam_math.h used unchanged (transmit
 * path, distance, window, interpolation weights, IQ phase rotation), one delay and one set
 * of weights per (transmit, element of its aperture), then applies them to every frame of
 * the batch before moving on, so the delays are computed once per call however many frames
 * there are.  Elements outside the aperture are never visited, and a sample outside the
 * record (interpolation range of usbeam_math.h) is skipped before any data is loaded.
 * Per-frame sums live in shared memory, (n_frames x block) floats (twice for IQ), so the
 * number of points per block is chosen at plan creation to fit the device; the output is
 * written once per point and frame, coalesced along the points.
 *
 * Differences from the CPU backend, all within float32 rounding: the CPU folds window,
 * interpolation weight and phase rotation in double and rounds once to float; here the
 * interpolation weights and the rotation are float (usbeam_math.h's contract) and the
 * window uses cos() rather than the CPU's polynomial (|difference| < 1e-11).  The CPU
 * refuses data holding NaN or inf while it stages it; here it propagates to the outputs of
 * the points that read it (checking would need a host round trip on every call).
 * Reference: Perrot et al., "So you think you can DAS?", Ultrasonics 111 (2021) 106309.
 */
#include "exec.cuh"

#include "../csrc/das_internal.h"

namespace {

enum { STAGE_BEAMFORM = 0 };
const char *const STAGE_NAMES[] = {"das.beamform"};

struct DasGeometry {
    const double *element_x, *element_y, *element_z; /* (n_elements) */
    const double *points;                             /* (n_points, 3) */
    const usbeam_tx_model *tx;                        /* (n_transmits), sources on the device */
    const int32_t *aperture_first, *aperture_count;   /* (n_points) */
    int n_elements, n_transmits, n_samples, n_frames;
    size_t n_points;
    double fs, fc, c, inv_c, t0, f_number, tukey_alpha;
    double window_center, window_half_width;
    int window, interpolation;
};

template <typename In>
__device__ __forceinline__ float load_real(const In *x, int k)
{
    return (float)x[k];
}

/* One thread per point: out[f][p] = sum over (transmit, aperture element) of the
 * interpolated, windowed (and for IQ phase-rotated) sample of frame f. */
template <typename In, bool IQ>
__global__ void das_kernel(DasGeometry g, const In *__restrict__ data, float *__restrict__ out)
{
    extern __shared__ float acc_shared[]; /* [IQ ? 2 : 1][n_frames][blockDim.x] */
    const size_t p = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int n_frames = g.n_frames;
    float *acc_re = acc_shared + threadIdx.x;
    float *acc_im = acc_re + (size_t)n_frames * blockDim.x;
    for (int f = 0; f < n_frames; ++f) {
        acc_re[f * blockDim.x] = 0.0f;
        if (IQ) acc_im[f * blockDim.x] = 0.0f;
    }
    if (p >= g.n_points) return; /* no barrier below: idle threads may leave */

    const double x = g.points[3 * p], y = g.points[3 * p + 1], z = g.points[3 * p + 2];
    const int first = g.aperture_first[p], count = g.aperture_count[p];
    double centre = g.window_center, half_width = g.window_half_width;
    if (g.f_number > 0.0) {
        centre = x;
        half_width = z / (2.0 * g.f_number);
    }
    const double inv_half = half_width > 0.0 ? 1.0 / half_width : 0.0;
    const int taps = usbeam_interp_taps(g.interpolation);
    const size_t frame_stride = (size_t)g.n_transmits * g.n_elements * g.n_samples;

    for (int t = 0; t < g.n_transmits; ++t) {
        const double tx_time = usbeam_tx_path(&g.tx[t], x, y, z) / g.c; /* as the CPU: path / c, then */
        for (int e = first; e < first + count; ++e) {
            const double ex = g.element_x[e];
            const double tau = tx_time + usbeam_distance(x, y, z, ex, g.element_y[e], g.element_z[e]) * g.inv_c; /* + r / c */
            const float apod = (float)usbeam_window(g.window, (ex - centre) * inv_half, g.tukey_alpha);
            int k0;
            float w[USBEAM_INTERP_MAX_TAPS];
            if (apod == 0.0f || !usbeam_interp_weights(g.interpolation, (tau - g.t0) * g.fs, g.n_samples, &k0, w))
                continue; /* skipped before any sample is read */
            for (int k = 0; k < taps; ++k) w[k] *= apod;
            const size_t channel = ((size_t)t * g.n_elements + e) * g.n_samples + (size_t)k0;
            if (IQ) {
                const usbeam_cf32 rot = usbeam_phase_rotation(g.fc, tau);
                const float2 *x0 = (const float2 *)data + channel;
                for (int f = 0; f < n_frames; ++f) {
                    const float2 *xf = x0 + (size_t)f * frame_stride;
                    float re = 0.0f, im = 0.0f;
                    for (int k = 0; k < taps; ++k) {
                        const float2 v = xf[k];
                        re += w[k] * v.x;
                        im += w[k] * v.y;
                    }
                    acc_re[f * blockDim.x] += re * rot.re - im * rot.im;
                    acc_im[f * blockDim.x] += re * rot.im + im * rot.re;
                }
            } else {
                const In *x0 = data + channel;
                for (int f = 0; f < n_frames; ++f) {
                    const In *xf = x0 + (size_t)f * frame_stride;
                    float v = 0.0f;
                    for (int k = 0; k < taps; ++k) v += w[k] * load_real(xf, k);
                    acc_re[f * blockDim.x] += v;
                }
            }
        }
    }
    for (int f = 0; f < n_frames; ++f) {
        const size_t o = (size_t)f * g.n_points + p;
        if (IQ)
            ((float2 *)out)[o] = make_float2(acc_re[f * blockDim.x], acc_im[f * blockDim.x]);
        else
            out[o] = acc_re[f * blockDim.x];
    }
}

template <typename In, bool IQ>
usbeam_status allow_shared(size_t bytes)
{
    if (bytes > 48 * 1024)
        USBEAM_CUDA_TRY(cudaFuncSetAttribute(das_kernel<In, IQ>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
    return USBEAM_OK;
}

} // namespace

struct usbeam_das_cuda {
    usbeam_cuda_exec *exec;
    DasGeometry geometry;  /* device pointers */
    usbeam_dtype input_dtype;
    unsigned threads;      /* points per block */
    size_t shared_bytes;
};

/* cudaMalloc + upload of bytes from host. */
static usbeam_status upload(usbeam_cuda_exec *e, const void *host, size_t bytes, const char *what, void **device)
{
    usbeam_status st = usbeam_cuda_exec_alloc(e, bytes, what, device);
    if (st == USBEAM_OK) st = usbeam_cuda_exec_upload(e, *device, host, bytes);
    return st;
}

extern "C" usbeam_status usbeam_das_cuda_create(const usbeam_das_plan *plan, usbeam_das_cuda **out)
{
    if (!plan || !out) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "plan and out must not be NULL");
    *out = nullptr;
    const usbeam_das_params *prm = &plan->params;
    if (prm->n_elements > (size_t)INT32_MAX || prm->n_transmits > (size_t)INT32_MAX ||
        prm->n_samples > (size_t)INT32_MAX || prm->n_frames > (size_t)INT32_MAX)
        return usbeam_fail(USBEAM_ERR_UNSUPPORTED, "das on CUDA: elements, transmits, samples and frames must each be < 2^31");
    usbeam_das_cuda *p = (usbeam_das_cuda *)usbeam_alloc(sizeof *p);
    if (!p) return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "das CUDA plan");
    p->input_dtype = prm->input_dtype;
    DasGeometry *g = &p->geometry;
    const size_t n_el = prm->n_elements, n_tx = prm->n_transmits, n_pts = prm->n_points;
    usbeam_tx_model *tx = nullptr;
    void *sources = nullptr;
    size_t n_sources = 0;
    for (size_t t = 0; t < n_tx; ++t) n_sources += (size_t)(plan->tx[t].n_sources > 0 ? plan->tx[t].n_sources : 0);

    usbeam_status st = usbeam_cuda_exec_create(STAGE_NAMES, 1, &p->exec);
    if (st == USBEAM_OK) st = upload(p->exec, plan->element_x, n_el * sizeof(double), "elements", (void **)&g->element_x);
    if (st == USBEAM_OK) st = upload(p->exec, plan->element_y, n_el * sizeof(double), "elements", (void **)&g->element_y);
    if (st == USBEAM_OK) st = upload(p->exec, plan->element_z, n_el * sizeof(double), "elements", (void **)&g->element_z);
    if (st == USBEAM_OK) st = upload(p->exec, plan->points, 3 * n_pts * sizeof(double), "points", (void **)&g->points);
    if (st == USBEAM_OK)
        st = upload(p->exec, plan->aperture_first, n_pts * sizeof(int32_t), "apertures", (void **)&g->aperture_first);
    if (st == USBEAM_OK)
        st = upload(p->exec, plan->aperture_count, n_pts * sizeof(int32_t), "apertures", (void **)&g->aperture_count);
    if (st == USBEAM_OK && n_sources)
        st = upload(p->exec, plan->tx_sources, 3 * n_sources * sizeof(double), "transmit sources", &sources);
    if (st == USBEAM_OK) {
        /* the models point into the plan's source array: point them into its device copy */
        tx = (usbeam_tx_model *)usbeam_alloc(n_tx * sizeof *tx);
        if (!tx) st = usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "transmits");
    }
    if (st == USBEAM_OK) {
        for (size_t t = 0; t < n_tx; ++t) {
            tx[t] = plan->tx[t];
            if (tx[t].n_sources > 0) tx[t].sources = (const double *)sources + (plan->tx[t].sources - plan->tx_sources);
        }
        st = upload(p->exec, tx, n_tx * sizeof *tx, "transmits", (void **)&g->tx);
    }
    usbeam_free(tx);

    g->n_elements = (int)n_el;
    g->n_transmits = (int)n_tx;
    g->n_samples = (int)prm->n_samples;
    g->n_frames = (int)prm->n_frames;
    g->n_points = n_pts;
    g->fs = prm->fs;
    g->fc = prm->fc;
    g->c = prm->c;
    g->inv_c = 1.0 / prm->c;
    g->t0 = prm->t0;
    g->f_number = prm->f_number;
    g->tukey_alpha = prm->tukey_alpha;
    g->window_center = plan->window_center;
    g->window_half_width = plan->window_half_width;
    g->window = (int)prm->window;           /* USBEAM_DAS_* = USBEAM_WINDOW_* */
    g->interpolation = (int)prm->interpolation; /* USBEAM_DAS_* = USBEAM_INTERP_* */

    if (st == USBEAM_OK) {
        /* the widest block whose per-frame sums fit in the shared memory a block may have */
        const size_t per_point = prm->n_frames * sizeof(float) * (plan->is_iq ? 2 : 1);
        const size_t limit = (size_t)usbeam_cuda_exec_max_shared_optin(p->exec);
        p->threads = 0;
        for (unsigned threads = 128; threads >= 32 && !p->threads; threads /= 2)
            if (per_point * threads <= limit) p->threads = threads;
        if (!p->threads)
            st = usbeam_fail(USBEAM_ERR_UNSUPPORTED,
                             "n_frames: %zu frames per call do not fit the CUDA beamformer's shared memory "
                             "(at most %zu); beamform fewer frames per call",
                             prm->n_frames, limit / (32 * sizeof(float) * (plan->is_iq ? 2 : 1)));
        p->shared_bytes = per_point * p->threads;
    }
    if (st == USBEAM_OK) {
        switch (prm->input_dtype) {
        case USBEAM_DTYPE_INT16: st = allow_shared<short, false>(p->shared_bytes); break;
        case USBEAM_DTYPE_FLOAT32: st = allow_shared<float, false>(p->shared_bytes); break;
        default: st = allow_shared<float, true>(p->shared_bytes); break;
        }
    }
    if (st != USBEAM_OK) {
        usbeam_das_cuda_destroy(p);
        return st;
    }
    *out = p;
    return USBEAM_OK;
}

extern "C" void usbeam_das_cuda_destroy(usbeam_das_cuda *p)
{
    if (!p) return;
    usbeam_cuda_exec_destroy(p->exec);
    usbeam_free(p);
}

extern "C" usbeam_cuda_exec *usbeam_das_cuda_exec(usbeam_das_cuda *p) { return p ? p->exec : nullptr; }

extern "C" usbeam_status usbeam_das_cuda_execute(usbeam_das_cuda *p, const void *in, void *out)
{
    if (!p || !in || !out) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "plan, in and out must not be NULL");
    usbeam_cuda_exec *e = p->exec;
    usbeam_status st = usbeam_cuda_exec_begin(e);
    if (st != USBEAM_OK) return st;
    cudaStream_t stream = usbeam_cuda_exec_cuda_stream(e);
    const unsigned blocks = (unsigned)((p->geometry.n_points + p->threads - 1) / p->threads);
    st = usbeam_cuda_stage_begin(e, STAGE_BEAMFORM);
    if (st == USBEAM_OK) {
        switch (p->input_dtype) {
        case USBEAM_DTYPE_INT16:
            das_kernel<short, false><<<blocks, p->threads, p->shared_bytes, stream>>>(p->geometry, (const short *)in,
                                                                                      (float *)out);
            break;
        case USBEAM_DTYPE_FLOAT32:
            das_kernel<float, false><<<blocks, p->threads, p->shared_bytes, stream>>>(p->geometry, (const float *)in,
                                                                                      (float *)out);
            break;
        default:
            das_kernel<float, true><<<blocks, p->threads, p->shared_bytes, stream>>>(p->geometry, (const float *)in,
                                                                                     (float *)out);
            break;
        }
        st = usbeam_cuda_check(cudaGetLastError(), "das_kernel launch", __FILE__, __LINE__);
    }
    if (st == USBEAM_OK) st = usbeam_cuda_stage_end(e, STAGE_BEAMFORM);
    usbeam_cuda_exec_end(e);
    return st;
}
