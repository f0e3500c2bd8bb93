/*
 * das.cu - delay-and-sum beamforming for linear arrays, CUDA twin of csrc/das.c.
 *
 * Layouts: in  (n_frames, n_transmits, n_elements, n_samples) on the device: int16 / float32
 *              RF or complex64 IQ (interleaved re, im);
 *          out (n_frames, n_points) on the device: float32 (RF) or complex64 (IQ).
 * Units: positions m, times s (the plan's copies, double); s = (tau - t0) fs.
 *
 * The geometry is the CPU plan's (csrc/beamform/das_setup.c), handed over in a
 * usbeam_das_tables (csrc/common/usbeam_internal.h), as rf2iq and rca do, so that this twin
 * never depends on the CPU plan's private struct: element positions, points, transmit models
 * (usbeam_tx_model, with virtual sources), and the receive aperture of each point (a
 * contiguous element range).  Nothing is tabulated: each thread owns one output point and
 * computes, with the per-sample math of csrc/common/usbeam_math.h used unchanged (transmit
 * path, distance, window, interpolation weights, IQ phase rotation), one delay and one set
 * of weights per (transmit, element of its aperture), then applies them to every frame of
 * the batch before moving on, so the delays are computed once per call however many frames
 * there are.
 *
 * Threads: when the points are a lattice in Grid order ((nz, nx) or (ny, nz, nx), x
 * fastest; detected from the coordinates at plan creation), a block is a 2-D tile of
 * 32 points down a column (depth: one warp) x up to 8 columns, and a y slice per grid z;
 * tiles at the grid's edges are partial.  The lanes of a warp then share x, so their
 * apertures are nested ranges around the same centre: the warp walks the union of its
 * lanes' ranges element by element, a lane skipping (before any delay or load) an element
 * outside its own aperture, so that at each step the lanes read one channel at samples a
 * few apart (coalesced).  Any other point list runs in 1-D blocks of consecutive points.
 * A sample outside the record (interpolation range of usbeam_math.h) or of zero window
 * weight is skipped before any data is loaded.
 * Per-frame sums live in shared memory, (n_frames x block) floats (twice for IQ), so the
 * tile width is chosen at plan creation to fit the device (opt-in shared memory beyond
 * 48 KiB); the output is written once per point and frame.
 *
 * Non-finite input: the CPU refuses data holding NaN or inf while it stages it.  Here a
 * NaN or inf a point reads makes its sums non-finite (x * 0 is NaN too), so a thread whose
 * output is non-finite sets the plan's input-fault word (cuda/exec.cu: mapped page-locked
 * host memory, a plain store).  Execute queues nothing more and never waits; the host reads
 * and clears the word once the work has finished (usbeam_cuda_exec_take_input_faults), which
 * usbeam.device does after a host copy of the result, on plan.cuda.synchronize() and at the
 * plan's next call, raising ValueError naming the input.  Only samples the beamformer reads
 * count (the CPU checks every sample), and a finite sum that overflows float32 counts too.
 *
 * Differences from the CPU backend, all within float32 rounding: the CPU folds window,
 * interpolation weight and phase rotation in double and rounds once to float; here the
 * interpolation weights and the rotation are float (usbeam_math.h's contract) and the
 * window uses cos() rather than the CPU's polynomial (|difference| < 1e-11).
 * Reference: Perrot et al., "So you think you can DAS?", Ultrasonics 111 (2021) 106309.
 */
#include "runtime/exec.cuh"

#include "common/usbeam_math.h"

namespace {

enum { STAGE_BEAMFORM = 0 };
const char *const STAGE_NAMES[] = {"das.beamform"};

struct DasGeometry {
    const double *element_x, *element_y, *element_z; /* (n_elements) */
    const double *points;                             /* (n_points, 3) */
    const usbeam_tx_model *tx;                        /* (n_transmits), sources on the device */
    const int32_t *aperture_first, *aperture_count;   /* (n_points) */
    unsigned *input_fault;                            /* mapped host word (exec.cuh) */
    int n_elements, n_transmits, n_samples, n_frames;
    size_t n_points;
    /* thread -> point: p = a * stride_a + b * stride_b + blockIdx.z * stride_c, with
     * a = blockIdx.x * blockDim.x + threadIdx.x < extent_a (down a column of the grid) and
     * b = blockIdx.y * blockDim.y + threadIdx.y < extent_b (along a row) */
    size_t stride_a, stride_b, stride_c;
    unsigned extent_a, extent_b;
    double fs, fc, c, inv_c, t0, f_number, tukey_alpha;
    double window_center, window_half_width;
    int window, interpolation;
};

template <typename In>
__device__ __forceinline__ float load_real(const In *x, int k)
{
    return (float)x[k];
}

/* [lo, hi) -> the union over the 32 lanes of the warp (every lane must call it). */
__device__ __forceinline__ void warp_range_union(int &lo, int &hi)
{
    for (int lane_mask = 16; lane_mask > 0; lane_mask >>= 1) {
        lo = min(lo, __shfl_xor_sync(0xffffffffu, lo, lane_mask));
        hi = max(hi, __shfl_xor_sync(0xffffffffu, hi, lane_mask));
    }
}

/* One thread per point: out[f][p] = sum over (transmit, aperture element) of the
 * interpolated, windowed (and for IQ phase-rotated) sample of frame f. */
template <typename In, bool IQ>
__global__ void das_kernel(DasGeometry g, const In *__restrict__ data, float *__restrict__ out)
{
    extern __shared__ float acc_shared[]; /* [IQ ? 2 : 1][n_frames][threads] */
    const unsigned threads = blockDim.x * blockDim.y, tid = threadIdx.y * blockDim.x + threadIdx.x;
    const unsigned a = blockIdx.x * blockDim.x + threadIdx.x, b = blockIdx.y * blockDim.y + threadIdx.y;
    const bool inside = a < g.extent_a && b < g.extent_b;
    const size_t p = inside ? a * g.stride_a + b * g.stride_b + blockIdx.z * g.stride_c : 0;
    const int n_frames = g.n_frames;
    float *acc_re = acc_shared + tid;
    float *acc_im = acc_re + (size_t)n_frames * threads;
    for (int f = 0; f < n_frames; ++f) {
        acc_re[f * threads] = 0.0f;
        if (IQ) acc_im[f * threads] = 0.0f;
    }

    /* The warp walks the union of its points' apertures, one element at a time: the lanes of
     * a column of the grid share an element (their apertures are nested), so their loads
     * are from one channel at nearby samples.  A lane skips an element outside its own
     * aperture before computing or loading anything. */
    const int first = inside ? g.aperture_first[p] : 0, last = inside ? first + g.aperture_count[p] : 0;
    int union_first = inside ? first : INT_MAX, union_last = inside ? last : INT_MIN;
    warp_range_union(union_first, union_last);
    if (!inside) return; /* no barrier below: idle threads may leave */

    const double x = g.points[3 * p], y = g.points[3 * p + 1], z = g.points[3 * p + 2];
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
        for (int e = union_first; e < union_last; ++e) {
            if (e < first || e >= last) continue; /* outside this point's aperture */
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
                    acc_re[f * threads] += re * rot.re - im * rot.im;
                    acc_im[f * threads] += re * rot.im + im * rot.re;
                }
            } else {
                const In *x0 = data + channel;
                for (int f = 0; f < n_frames; ++f) {
                    const In *xf = x0 + (size_t)f * frame_stride;
                    float v = 0.0f;
                    for (int k = 0; k < taps; ++k) v += w[k] * load_real(xf, k);
                    acc_re[f * threads] += v;
                }
            }
        }
    }
    /* A NaN or inf read from data stays NaN or inf through every later sum (x * 0 included),
     * so a non-finite output is the test for non-finite input the point read (int16 cannot
     * be).  The flag is a plain store to mapped host memory, once per such thread. */
    bool non_finite = false;
    for (int f = 0; f < n_frames; ++f) {
        const size_t o = (size_t)f * g.n_points + p;
        const float re = acc_re[f * threads];
        if (IQ) {
            const float im = acc_im[f * threads];
            ((float2 *)out)[o] = make_float2(re, im);
            non_finite |= !isfinite(re) || !isfinite(im);
        } else {
            out[o] = re;
            if (sizeof(In) == sizeof(float)) non_finite |= !isfinite(re);
        }
    }
    if (non_finite) *(volatile unsigned *)g.input_fault = USBEAM_INPUT_FAULT_NONFINITE;
}

template <typename In, bool IQ>
usbeam_status allow_shared(size_t bytes)
{
    return usbeam_cuda_allow_dynamic_shared((const void *)das_kernel<In, IQ>, bytes);
}

} // namespace

struct usbeam_das_cuda {
    usbeam_cuda_exec *exec;
    DasGeometry geometry;  /* device pointers */
    usbeam_dtype input_dtype;
    dim3 block, grid;
    size_t shared_bytes;
};

/* Length of the rows of points (the run from point 0 sharing its y and z) when the points
 * are a lattice (n_slices, n_rows, row_length), row fastest, as Grid's (nz, nx) and
 * (ny, nz, nx) orders make them: every row of one y and one z, every slice of one y.
 * 0 when they are not.  Only the speed depends on this (neighbouring threads, neighbouring
 * delays): any point list is beamformed correctly either way. */
static size_t lattice_row_length(const double *pts, size_t n_points, size_t *rows_per_slice)
{
    size_t row = 1;
    while (row < n_points && pts[3 * row + 1] == pts[1] && pts[3 * row + 2] == pts[2]) ++row;
    if (row < 2 || n_points % row != 0 || n_points == row) return 0;
    size_t rows = 1; /* rows of the first slice: those starting with its y */
    while (rows < n_points / row && pts[3 * rows * row + 1] == pts[1]) ++rows;
    if ((n_points / row) % rows != 0) return 0;
    for (size_t q = 0; q < n_points; ++q) {
        const double *row_start = pts + 3 * (q - q % row), *slice_start = pts + 3 * (q - q % (row * rows));
        if (pts[3 * q + 1] != slice_start[1] || pts[3 * q + 2] != row_start[2]) return 0;
    }
    *rows_per_slice = rows;
    return row;
}

/* cudaMalloc + upload of bytes from host. */
static usbeam_status upload(usbeam_cuda_exec *e, const void *host, size_t bytes, const char *what, void **device)
{
    usbeam_status st = usbeam_cuda_exec_alloc(e, bytes, what, device);
    if (st == USBEAM_OK) st = usbeam_cuda_exec_upload(e, *device, host, bytes);
    return st;
}

extern "C" usbeam_status usbeam_das_cuda_create(const usbeam_das_tables *tables, usbeam_das_cuda **out)
{
    if (!tables || !out) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "tables and out must not be NULL");
    *out = nullptr;
    const usbeam_das_params *prm = tables->params;
    if (prm->n_elements > (size_t)INT32_MAX || prm->n_transmits > (size_t)INT32_MAX ||
        prm->n_samples > (size_t)INT32_MAX || prm->n_frames > (size_t)INT32_MAX)
        return usbeam_fail(USBEAM_ERR_UNSUPPORTED, "das on CUDA: elements, transmits, samples and frames must each be < 2^31");
    usbeam_das_cuda *p = (usbeam_das_cuda *)usbeam_alloc(sizeof *p);
    if (!p) return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "das CUDA plan");
    *p = usbeam_das_cuda{}; /* zeroed */
    p->input_dtype = prm->input_dtype;
    DasGeometry *g = &p->geometry;
    const size_t n_el = prm->n_elements, n_tx = prm->n_transmits, n_pts = prm->n_points;
    usbeam_tx_model *tx = nullptr;
    void *sources = nullptr;
    const size_t n_sources = tables->n_sources;

    usbeam_status st = usbeam_cuda_exec_create(STAGE_NAMES, 1, &p->exec);
    if (st == USBEAM_OK) st = upload(p->exec, tables->element_x, n_el * sizeof(double), "elements", (void **)&g->element_x);
    if (st == USBEAM_OK) st = upload(p->exec, tables->element_y, n_el * sizeof(double), "elements", (void **)&g->element_y);
    if (st == USBEAM_OK) st = upload(p->exec, tables->element_z, n_el * sizeof(double), "elements", (void **)&g->element_z);
    if (st == USBEAM_OK) st = upload(p->exec, tables->points, 3 * n_pts * sizeof(double), "points", (void **)&g->points);
    if (st == USBEAM_OK)
        st = upload(p->exec, tables->aperture_first, n_pts * sizeof(int32_t), "apertures", (void **)&g->aperture_first);
    if (st == USBEAM_OK)
        st = upload(p->exec, tables->aperture_count, n_pts * sizeof(int32_t), "apertures", (void **)&g->aperture_count);
    if (st == USBEAM_OK && n_sources)
        st = upload(p->exec, tables->tx_sources, 3 * n_sources * sizeof(double), "transmit sources", &sources);
    if (st == USBEAM_OK) {
        /* the models point into the plan's source array: point them into its device copy */
        tx = (usbeam_tx_model *)usbeam_alloc(n_tx * sizeof *tx);
        if (!tx) st = usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "transmits");
    }
    if (st == USBEAM_OK) {
        for (size_t t = 0; t < n_tx; ++t) {
            tx[t] = tables->tx[t];
            if (tx[t].n_sources > 0) tx[t].sources = (const double *)sources + (tables->tx[t].sources - tables->tx_sources);
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
    g->window_center = tables->window_center;
    g->window_half_width = tables->window_half_width;
    g->window = (int)prm->window;           /* USBEAM_DAS_* = USBEAM_WINDOW_* */
    g->interpolation = (int)prm->interpolation; /* USBEAM_DAS_* = USBEAM_INTERP_* */

    if (st == USBEAM_OK) st = usbeam_cuda_exec_input_fault_flag(p->exec, &g->input_fault);
    unsigned lanes = 0;
    if (st == USBEAM_OK) {
        /* Blocks of 32 points down a column of the grid (one warp) x `lanes` columns, the
         * most columns whose per-frame sums fit: 8 within the default 48 KiB, else with the
         * opt-in shared memory the device allows. */
        const size_t per_point = prm->n_frames * sizeof(float) * (tables->is_iq ? 2 : 1);
        const size_t limit = (size_t)usbeam_cuda_exec_max_shared_optin(p->exec);
        lanes = per_point * 32 * 8 <= 48 * 1024 ? 8 : 0;
        for (unsigned l = 4; l >= 1 && !lanes; l /= 2)
            if (per_point * 32 * l <= limit) lanes = l;
        if (!lanes)
            st = usbeam_fail(USBEAM_ERR_UNSUPPORTED,
                             "n_frames: %zu frames per call do not fit the CUDA beamformer's shared memory "
                             "(at most %zu); beamform fewer frames per call",
                             prm->n_frames, limit / (32 * sizeof(float) * (tables->is_iq ? 2 : 1)));
    }
    if (st == USBEAM_OK) {
        const size_t per_point = prm->n_frames * sizeof(float) * (tables->is_iq ? 2 : 1);
        size_t rows = 0;
        const size_t row = lanes > 1 ? lattice_row_length(tables->points, n_pts, &rows) : 0;
        const size_t slices = row ? n_pts / (row * rows) : 0;
        while (row && lanes > 1 && lanes / 2 >= row) lanes /= 2; /* no idle columns in a narrow grid */
        p->shared_bytes = per_point * 32 * lanes;
        if (row && rows <= UINT32_MAX && (row + lanes - 1) / lanes <= 65535u && slices <= 65535u) {
            g->stride_a = row;          /* a: down the column (depth in a Grid) */
            g->stride_b = 1;            /* b: along the row (x) */
            g->stride_c = row * rows;   /* one y slice per grid z */
            g->extent_a = (unsigned)rows;
            g->extent_b = (unsigned)row;
            p->block = dim3(32, lanes, 1);
            p->grid = dim3((unsigned)((rows + 31) / 32), (unsigned)((row + lanes - 1) / lanes), (unsigned)slices);
        } else { /* a list of points: runs of consecutive points */
            const size_t threads = 32 * (size_t)lanes, blocks = (n_pts + threads - 1) / threads;
            if (n_pts > UINT32_MAX || blocks > (size_t)INT32_MAX)
                st = usbeam_fail(USBEAM_ERR_UNSUPPORTED, "points: too many points for one CUDA launch");
            g->stride_a = 1;
            g->stride_b = 0;
            g->stride_c = 0;
            g->extent_a = (unsigned)n_pts;
            g->extent_b = 1;
            p->block = dim3((unsigned)threads, 1, 1);
            p->grid = dim3((unsigned)blocks, 1, 1);
        }
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
    st = usbeam_cuda_stage_begin(e, STAGE_BEAMFORM);
    if (st == USBEAM_OK) {
        switch (p->input_dtype) {
        case USBEAM_DTYPE_INT16:
            das_kernel<short, false><<<p->grid, p->block, p->shared_bytes, stream>>>(p->geometry, (const short *)in,
                                                                                     (float *)out);
            break;
        case USBEAM_DTYPE_FLOAT32:
            das_kernel<float, false><<<p->grid, p->block, p->shared_bytes, stream>>>(p->geometry, (const float *)in,
                                                                                     (float *)out);
            break;
        default:
            das_kernel<float, true><<<p->grid, p->block, p->shared_bytes, stream>>>(p->geometry, (const float *)in,
                                                                                    (float *)out);
            break;
        }
        st = usbeam_cuda_check(cudaGetLastError(), "das_kernel launch", __FILE__, __LINE__);
    }
    if (st == USBEAM_OK) st = usbeam_cuda_stage_end(e, STAGE_BEAMFORM);
    usbeam_cuda_exec_end(e);
    return st;
}
