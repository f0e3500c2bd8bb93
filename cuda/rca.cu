/*
 * rca.cu - delay-and-sum for row-column (RCA) and TOBE arrays, CUDA twin of csrc/rca.c.
 *
 * Layouts (device memory): in  [n_frames][n_acquisitions][n_channels][n_samples] float32 RF
 *                               or complex64 IQ (interleaved re, im);
 *                          out [sum_frames ? 1 : n_frames][n_k][n_j][n_i] float32 / complex64.
 * Units: m, s, Hz; sample index s = (tau - t0) fs, tau = (tx path + rx path) / c.
 *
 * Every method of the CPU backend (FORCES, uFORCES, HERCULES, uHERCULES, VLS, TPW, Flash),
 * every interpolation and window, the coherence factor and the frame sum, with the paths,
 * windows, interpolation weights and phase rotation of csrc/usbeam_math.h used unchanged
 * and the CPU plan's tables (voxel -> array transform, strip positions, wave models,
 * HERCULES radial window table).
 *
 * Threads: one per voxel over a 2-D tile of voxels: 32 down the depth axis (the voxel axis
 * most along the array's z; one warp) x up to 8 along the longest other axis, the third
 * axis over the grid's z (a lateral slice thinner than 16 voxels tiles its two longest
 * axes instead); tiles at the grid's edges are partial.  The lanes of a warp share their
 * lateral position, so their delays are close and their receive apertures are nested
 * ranges around one centre: the warp walks the union of its lanes' channel ranges and a
 * lane skips a channel outside its own before any delay or load, so at each step the lanes
 * read one record at nearby samples (coalesced).
 * Delays: each thread computes its transmit delay of every acquisition once, and for strip
 * receive (every method but HERCULES) its receive delay and weight of every channel once,
 * then reuses each pair delay for every frame of the batch.  Transmit delays are kept in
 * shared memory as int32 fixed-point differences from the delays of the tile's first voxel
 * (a double per acquisition, shared by the block), on the finest step at which the tile's
 * largest difference fits in 2^30 steps: neighbouring voxels' delays differ by tens to
 * hundreds of samples, so a step is ~1e-7 sample, where a float sample index (thousands)
 * would keep only ~1e-4 and a float difference ~1e-5.  The receive aperture (f-number) bounds the channel loop before any
 * sample is read, and samples outside the record are skipped as on the CPU.
 * HERCULES receives on a 2-D aperture (one receive path per pair), read from the radial
 * window table of the CPU plan as the CPU does.
 * Sums are float32 (the CPU sums in double): see tests/tolerances.py, das_cuda / rca_cuda.
 * Non-finite input (the CPU refuses it while it reads the data): a NaN or inf sample a voxel
 * reads leaves its sums non-finite, and such a thread sets the plan's input-fault word
 * (mapped host memory, cuda/exec.cu) with one plain store; the host reads it once the work
 * has finished, without a round trip per call (usbeam.device raises ValueError naming the
 * input: see cuda/das.cu).
 *
 * Reference: csrc/rca.c and the papers cited in csrc/usbeam_math.h (row-column section).
 */
#include "runtime/exec.cuh"

#include "common/usbeam_math.h"

namespace {

enum { STAGE_BEAMFORM = 0 };
const char *const STAGE_NAMES[] = {"rca.beamform"};

struct RcaGeometry {
    double m[12];                   /* voxel (i, j, k, 1) -> array (x, y, z), rows */
    const double *rx_u;             /* [n_channels] */
    const double *acq_position;     /* [n_acquisitions]: FORCES u_k, HERCULES v_r */
    const usbeam_tx_model *waves;   /* [n_waves] */
    const float *radial_window;     /* HERCULES [radial_steps + 2] */
    unsigned *input_fault;          /* mapped host word (exec.cuh) */
    int radial_steps;
    int method, rx_rows, tx_rows, forces, hercules;
    int n_acq, n_ch, n_samples, n_frames, out_frames;
    int dims[3];                    /* n_i, n_j, n_k */
    int axis_x, axis_y, axis_z;     /* voxel axis of the tile's x, y and of the grid's z */
    size_t n_voxels;
    double fs, fc, c, inv_c, t0, f_number, tukey_alpha, rx_pitch;
    int window, interpolation, coherence, sum_frames;
};

struct Point {
    double x, y, z;
};

__device__ __forceinline__ Point voxel_point(const RcaGeometry &g, const int idx[3])
{
    const double i = idx[0], j = idx[1], k = idx[2];
    return {g.m[0] * i + g.m[1] * j + g.m[2] * k + g.m[3], g.m[4] * i + g.m[5] * j + g.m[6] * k + g.m[7],
            g.m[8] * i + g.m[9] * j + g.m[10] * k + g.m[11]};
}

/* Transmit path (m) of acquisition a to point p, as voxel_geometry in csrc/rca.c. */
__device__ __forceinline__ double tx_path(const RcaGeometry &g, const Point &p, int a)
{
    const double u_rx = g.rx_rows ? p.y : p.x, v_rx = g.rx_rows ? p.x : p.y, u_tx = g.tx_rows ? p.y : p.x;
    if (g.forces) return usbeam_rca_forces_tx_path(u_rx, v_rx, p.z, g.acq_position[a]);
    if (g.hercules) return usbeam_tx_path(&g.waves[0], u_tx, 0.0, p.z);
    return usbeam_tx_path(&g.waves[a], u_tx, 0.0, p.z);
}

/* Per-thread sums live in shared memory: [n_sums][out_frames][threads]. */
template <bool IQ>
__global__ void rca_kernel(RcaGeometry g, const float *__restrict__ data, float *__restrict__ out)
{
    extern __shared__ double shared_d[];
    const int threads = blockDim.x * blockDim.y, tid = threadIdx.y * blockDim.x + threadIdx.x;
    double *tx_ref = shared_d;                                  /* [n_acq] */
    unsigned *largest_offset = (unsigned *)(tx_ref + g.n_acq);  /* float bits; one double slot */
    int32_t *tx_offset = (int32_t *)(tx_ref + g.n_acq + 1);     /* [n_acq][threads] */
    float *sums = (float *)(tx_offset + (size_t)g.n_acq * threads); /* [3][out_frames][threads] */
    float *sum_re = sums + tid, *sum_im = sum_re + (size_t)g.out_frames * threads,
          *sum_power = sum_im + (size_t)g.out_frames * threads;

    int idx[3], ref_idx[3];
    for (int d = 0; d < 3; ++d) { /* unrolled selects: no dynamically indexed (local-memory) array */
        idx[d] = d == g.axis_x ? (int)(blockIdx.x * blockDim.x + threadIdx.x)
                 : d == g.axis_y ? (int)(blockIdx.y * blockDim.y + threadIdx.y) : (int)blockIdx.z;
        ref_idx[d] = d == g.axis_x ? (int)(blockIdx.x * blockDim.x)
                     : d == g.axis_y ? (int)(blockIdx.y * blockDim.y) : (int)blockIdx.z;
    }
    const Point ref = voxel_point(g, ref_idx);
    for (int a = tid; a < g.n_acq; a += threads) tx_ref[a] = (tx_path(g, ref, a) * g.inv_c - g.t0) * g.fs;
    if (tid == 0) *largest_offset = 0u;
    __syncthreads();

    /* Transmit delays (samples, t0 removed) once per voxel and acquisition, kept as int32
     * fixed-point differences from the tile's reference voxel, with the finest step at which
     * the tile's largest difference still fits: first the largest |difference| of the tile,
     * then the quantised differences (the paths are computed twice, n_acq square roots per
     * voxel against n_acq x n_channels pairs). */
    const bool inside = idx[0] < g.dims[0] && idx[1] < g.dims[1] && idx[2] < g.dims[2];
    const Point p = voxel_point(g, idx);
    if (inside) {
        float own_largest = 0.0f;
        for (int a = 0; a < g.n_acq; ++a)
            own_largest = fmaxf(own_largest, (float)fabs((tx_path(g, p, a) * g.inv_c - g.t0) * g.fs - tx_ref[a]));
        atomicMax(largest_offset, __float_as_uint(own_largest)); /* non-negative floats order as their bits */
    }
    __syncthreads(); /* the last barrier: threads outside the grid may leave after the warp's union below */
    int exponent = 0;
    const double largest = (double)__uint_as_float(*largest_offset);
    (void)frexp(largest > 1e-6 ? largest : 1e-6, &exponent); /* largest < 2^exponent */
    const double to_fixed = isfinite(largest) ? ldexp(1.0, 30 - exponent) : 1.0; /* |offset| < 2^30 */
    const double from_fixed = 1.0 / to_fixed;
    if (inside) {
        for (int f = 0; f < g.out_frames; ++f) {
            sum_re[f * threads] = 0.0f;
            if (IQ) sum_im[f * threads] = 0.0f;
            if (g.coherence) sum_power[f * threads] = 0.0f;
        }
        for (int a = 0; a < g.n_acq; ++a) {
            const double offset = ((tx_path(g, p, a) * g.inv_c - g.t0) * g.fs - tx_ref[a]) * to_fixed;
            tx_offset[a * threads + tid] = (int32_t)fmax(fmin(rint(offset), 2147483647.0), -2147483647.0);
        }
    }

    const double u_rx = g.rx_rows ? p.y : p.x, v_rx = g.rx_rows ? p.x : p.y, z = p.z;
    const int taps = usbeam_interp_taps(g.interpolation);
    const size_t record_stride = (size_t)g.n_samples, frame_stride = (size_t)g.n_acq * g.n_ch * g.n_samples;
    /* receive aperture: |u - u_c| <= z / (2 F#), empty in front of nothing (z <= 0) */
    int c_first = 0, c_last = g.n_ch - 1;
    double half_width = INFINITY, aperture2 = INFINITY, inv_aperture2 = 0.0;
    if (g.f_number > 0.0) {
        half_width = z > 0.0 ? z / (2.0 * g.f_number) : -1.0;
        aperture2 = z > 0.0 ? half_width * half_width : -1.0;
        inv_aperture2 = z > 0.0 ? 1.0 / aperture2 : 0.0;
        if (!g.hercules) { /* strips sorted, window symmetric: a contiguous range (one spare each side) */
            const double centre = 0.5 * (g.n_ch - 1) + u_rx / g.rx_pitch, reach = half_width / g.rx_pitch;
            const double lo = fmax(floor(centre - reach) - 1.0, 0.0), hi = fmin(ceil(centre + reach) + 1.0, g.n_ch - 1.0);
            c_first = (int)lo;
            c_last = half_width >= 0.0 && lo <= hi ? (int)hi : -1;
        }
    }
    /* The warp walks the union of its lanes' channel ranges (lanes down the depth axis share
     * u, so the ranges are nested) and each lane skips a channel outside its own before any
     * delay or load: at each step the lanes read one record at nearby samples. */
    int union_first = inside ? c_first : INT_MAX, union_last = inside ? c_last : INT_MIN;
    for (int lane_mask = 16; lane_mask > 0; lane_mask >>= 1) {
        union_first = min(union_first, __shfl_xor_sync(0xffffffffu, union_first, lane_mask));
        union_last = max(union_last, __shfl_xor_sync(0xffffffffu, union_last, lane_mask));
    }
    if (!inside) return;
    int count = 0;
    for (int c = union_first; c <= union_last; ++c) {
        if (c < c_first || c > c_last) continue; /* outside this voxel's aperture */
        const double du = u_rx - g.rx_u[c];
        double s_rx = 0.0;
        float weight = 1.0f;
        if (!g.hercules) {
            if (g.f_number > 0.0) {
                weight = (float)usbeam_window(g.window, fabs(du) * 2.0 * g.f_number / z, g.tukey_alpha);
                if (weight == 0.0f) continue; /* skipped before any sample is read */
            }
            s_rx = usbeam_rca_strip_path(u_rx, z, g.rx_u[c]) * g.inv_c * g.fs;
        }
        for (int a = 0; a < g.n_acq; ++a) {
            double s;
            float w = weight;
            if (g.hercules) {
                const double dv = v_rx - g.acq_position[a], lateral2 = du * du + dv * dv;
                if (lateral2 > aperture2) continue;
                if (g.f_number > 0.0) {
                    const double q = lateral2 * inv_aperture2 * g.radial_steps;
                    const int k = (int)q;
                    const double frac = q - k;
                    w = (float)((1.0 - frac) * g.radial_window[k] + frac * g.radial_window[k + 1]);
                    if (w == 0.0f) continue;
                }
                /* the single wave's delay: tx_ref[a] + offset is the same for every a */
                s = tx_ref[a] + tx_offset[a * threads + tid] * from_fixed + sqrt(lateral2 + z * z) * g.inv_c * g.fs;
            } else {
                s = s_rx + tx_ref[a] + tx_offset[a * threads + tid] * from_fixed;
            }
            int first;
            float tw[USBEAM_INTERP_MAX_TAPS];
            if (!usbeam_interp_weights(g.interpolation, s, g.n_samples, &first, tw)) continue;
            for (int t = 0; t < taps; ++t) tw[t] *= w;
            ++count;
            const size_t record = ((size_t)a * g.n_ch + c) * record_stride + (size_t)first;
            usbeam_cf32 rot = {1.0f, 0.0f};
            if (IQ) rot = usbeam_phase_rotation(g.fc, s / g.fs + g.t0); /* tau of the pair */
            for (int f = 0; f < g.n_frames; ++f) {
                const int o = (g.sum_frames ? 0 : f) * threads;
                if (IQ) {
                    const float2 *x = (const float2 *)data + (size_t)f * frame_stride + record;
                    float re = 0.0f, im = 0.0f;
                    for (int t = 0; t < taps; ++t) {
                        const float2 v = x[t];
                        re += tw[t] * v.x;
                        im += tw[t] * v.y;
                    }
                    const float vr = re * rot.re - im * rot.im, vi = re * rot.im + im * rot.re;
                    sum_re[o] += vr;
                    sum_im[o] += vi;
                    if (g.coherence) sum_power[o] += vr * vr + vi * vi;
                } else {
                    const float *x = data + (size_t)f * frame_stride + record;
                    float v = 0.0f;
                    for (int t = 0; t < taps; ++t) v += tw[t] * x[t];
                    sum_re[o] += v;
                    if (g.coherence) sum_power[o] += v * v;
                }
            }
        }
    }
    const size_t voxel = ((size_t)idx[2] * g.dims[1] + idx[1]) * g.dims[0] + idx[0];
    const double n_terms = (double)count * (g.sum_frames ? g.n_frames : 1);
    bool non_finite = false; /* NaN or inf read from data stays so through every later sum */
    for (int f = 0; f < g.out_frames; ++f) {
        const double re = sum_re[f * threads], im = IQ ? sum_im[f * threads] : 0.0;
        double scale = 1.0;
        non_finite |= !isfinite(re) || !isfinite(im);
        if (g.coherence) {
            const double power = sum_power[f * threads];
            scale = power > 0.0 ? (re * re + im * im) / (n_terms * power) : 0.0;
            non_finite |= !isfinite(power);
        }
        const size_t at = (size_t)f * g.n_voxels + voxel;
        if (IQ)
            ((float2 *)out)[at] = make_float2((float)(scale * re), (float)(scale * im));
        else
            out[at] = (float)(scale * re);
    }
    if (non_finite) *(volatile unsigned *)g.input_fault = USBEAM_INPUT_FAULT_NONFINITE; /* mapped host word */
}

template <bool IQ>
usbeam_status allow_shared(size_t bytes)
{
    return usbeam_cuda_allow_dynamic_shared((const void *)rca_kernel<IQ>, bytes);
}

} // namespace

struct usbeam_rca_cuda {
    usbeam_cuda_exec *exec;
    RcaGeometry geometry; /* device pointers */
    dim3 block, grid;
    size_t shared_bytes;
    int iq;
};

extern "C" void usbeam_rca_cuda_destroy(usbeam_rca_cuda *p)
{
    if (!p) return;
    usbeam_cuda_exec_destroy(p->exec);
    usbeam_free(p);
}

extern "C" usbeam_cuda_exec *usbeam_rca_cuda_exec(usbeam_rca_cuda *p) { return p ? p->exec : nullptr; }

static usbeam_status upload(usbeam_cuda_exec *e, const void *host, size_t bytes, const char *what, void **device)
{
    usbeam_status st = usbeam_cuda_exec_alloc(e, bytes, what, device);
    if (st == USBEAM_OK) st = usbeam_cuda_exec_upload(e, *device, host, bytes);
    return st;
}

extern "C" usbeam_status usbeam_rca_cuda_create(const usbeam_rca_tables *t, usbeam_rca_cuda **out)
{
    if (!t || !t->params || !out) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "tables and out must not be NULL");
    *out = nullptr;
    const usbeam_rca_params *prm = t->params;
    if (prm->n_i > 65535u * 1024u || prm->n_j > 65535u * 1024u || prm->n_k > 65535u * 1024u ||
        prm->n_frames > (size_t)INT32_MAX || prm->n_acquisitions > (size_t)INT32_MAX)
        return usbeam_fail(USBEAM_ERR_UNSUPPORTED, "rca on CUDA: grid or batch too large for one launch");
    usbeam_rca_cuda *p = (usbeam_rca_cuda *)usbeam_alloc(sizeof *p);
    if (!p) return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "rca CUDA plan");
    *p = usbeam_rca_cuda{}; /* zeroed */
    p->block = dim3(0, 0, 0); /* no tile chosen yet */
    RcaGeometry *g = &p->geometry;
    for (int k = 0; k < 12; ++k) g->m[k] = t->voxel_to_array[k];
    g->method = (int)prm->method;
    g->forces = prm->method == USBEAM_RCA_FORCES || prm->method == USBEAM_RCA_UFORCES;
    g->hercules = prm->method == USBEAM_RCA_HERCULES || prm->method == USBEAM_RCA_UHERCULES;
    g->rx_rows = prm->rx_rows;
    g->tx_rows = prm->tx_rows;
    g->n_acq = (int)prm->n_acquisitions;
    g->n_ch = (int)prm->n_channels;
    g->n_samples = (int)prm->n_samples;
    g->n_frames = (int)prm->n_frames;
    g->out_frames = prm->sum_frames ? 1 : (int)prm->n_frames;
    g->dims[0] = (int)prm->n_i;
    g->dims[1] = (int)prm->n_j;
    g->dims[2] = (int)prm->n_k;
    g->n_voxels = prm->n_i * prm->n_j * prm->n_k;
    g->fs = prm->fs;
    g->fc = prm->fc;
    g->c = prm->c;
    g->inv_c = 1.0 / prm->c;
    g->t0 = prm->t0;
    g->f_number = prm->f_number;
    g->tukey_alpha = prm->tukey_alpha;
    g->rx_pitch = prm->rx_rows ? prm->pitch_y : prm->pitch_x;
    g->window = prm->window;
    g->interpolation = prm->interpolation;
    g->coherence = prm->coherence_factor != 0;
    g->sum_frames = prm->sum_frames != 0;
    g->radial_steps = t->radial_steps;
    p->iq = prm->data_complex != 0;

    /* Tiles of 32 voxels down the depth axis (the voxel axis most along the array's z; one
     * warp) x up to 8 along the longest other axis; the third runs over the grid's z.  A
     * depth axis of fewer than 16 voxels (a lateral slice) gives way to the longest axis. */
    int depth = -1;
    for (int d = 0; d < 3; ++d)
        if (g->dims[d] >= 16 && (depth < 0 || fabs(g->m[8 + d]) > fabs(g->m[8 + depth]))) depth = d;
    if (depth < 0)
        for (int d = 0; d < 3; ++d)
            if (depth < 0 || g->dims[d] > g->dims[depth]) depth = d;
    const int other1 = depth == 0 ? 1 : 0, other2 = depth == 2 ? 1 : 2;
    g->axis_x = depth;
    g->axis_y = g->dims[other2] > g->dims[other1] ? other2 : other1;
    g->axis_z = g->axis_y == other1 ? other2 : other1;

    usbeam_status st = usbeam_cuda_exec_create(STAGE_NAMES, 1, &p->exec);
    if (st == USBEAM_OK)
        st = upload(p->exec, t->rx_u, prm->n_channels * sizeof(double), "strip positions", (void **)&g->rx_u);
    if (st == USBEAM_OK)
        st = upload(p->exec, t->acq_position, prm->n_acquisitions * sizeof(double), "acquisition positions",
                    (void **)&g->acq_position);
    if (st == USBEAM_OK && t->n_waves)
        st = upload(p->exec, t->waves, t->n_waves * sizeof(usbeam_tx_model), "transmit waves", (void **)&g->waves);
    if (st == USBEAM_OK && t->radial_window)
        st = upload(p->exec, t->radial_window, ((size_t)t->radial_steps + 2) * sizeof(float), "radial window",
                    (void **)&g->radial_window);
    if (st == USBEAM_OK) st = usbeam_cuda_exec_input_fault_flag(p->exec, &g->input_fault);
    if (st == USBEAM_OK) {
        /* the widest tile whose delays and sums fit the shared memory a block may have */
        const size_t per_thread = (prm->n_acquisitions + 3 * (size_t)g->out_frames) * sizeof(float);
        const size_t fixed = (prm->n_acquisitions + 1) * sizeof(double);
        const size_t limit = (size_t)usbeam_cuda_exec_max_shared_optin(p->exec);
        unsigned lanes = fixed + per_thread * 32 * 8 <= 48 * 1024 ? 8 : 0;
        for (unsigned l = 4; l >= 1 && !lanes; l /= 2)
            if (fixed + per_thread * 32 * l <= limit) lanes = l;
        while (lanes > 1 && (int)lanes / 2 >= g->dims[g->axis_y]) lanes /= 2; /* no idle columns */
        if (lanes) p->block = dim3(32, lanes, 1);
        if (!p->block.x)
            st = usbeam_fail(USBEAM_ERR_UNSUPPORTED,
                             "n_acquisitions and n_frames: %zu acquisitions and %d output frames do not fit the "
                             "CUDA beamformer's shared memory (%zu bytes); beamform fewer frames per call",
                             prm->n_acquisitions, g->out_frames, limit);
        p->shared_bytes = fixed + per_thread * p->block.x * p->block.y;
    }
    if (st == USBEAM_OK) {
        p->grid = dim3((unsigned)((g->dims[g->axis_x] + p->block.x - 1) / p->block.x),
                       (unsigned)((g->dims[g->axis_y] + p->block.y - 1) / p->block.y), (unsigned)g->dims[g->axis_z]);
        if (p->grid.y > 65535u || p->grid.z > 65535u)
            st = usbeam_fail(USBEAM_ERR_UNSUPPORTED, "output grid: too many voxels along one axis for CUDA");
    }
    if (st == USBEAM_OK) st = p->iq ? allow_shared<true>(p->shared_bytes) : allow_shared<false>(p->shared_bytes);
    if (st != USBEAM_OK) {
        usbeam_rca_cuda_destroy(p);
        return st;
    }
    *out = p;
    return USBEAM_OK;
}

extern "C" usbeam_status usbeam_rca_cuda_execute(usbeam_rca_cuda *p, const void *in, void *out)
{
    if (!p || !in || !out) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "plan, in and out must not be NULL");
    usbeam_cuda_exec *e = p->exec;
    usbeam_status st = usbeam_cuda_exec_begin(e);
    if (st != USBEAM_OK) return st;
    cudaStream_t stream = usbeam_cuda_exec_cuda_stream(e);
    st = usbeam_cuda_stage_begin(e, STAGE_BEAMFORM);
    if (st == USBEAM_OK) {
        if (p->iq)
            rca_kernel<true><<<p->grid, p->block, p->shared_bytes, stream>>>(p->geometry, (const float *)in,
                                                                            (float *)out);
        else
            rca_kernel<false><<<p->grid, p->block, p->shared_bytes, stream>>>(p->geometry, (const float *)in,
                                                                             (float *)out);
        st = usbeam_cuda_check(cudaGetLastError(), "rca_kernel launch", __FILE__, __LINE__);
    }
    if (st == USBEAM_OK) st = usbeam_cuda_stage_end(e, STAGE_BEAMFORM);
    usbeam_cuda_exec_end(e);
    return st;
}
