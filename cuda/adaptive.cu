/*
 * adaptive.cu - adaptive beamformers (CF, GCF, DMAS, F-DMAS, p-DAS, MV), CUDA twin of
 * csrc/beamform/adaptive.c.
 *
 * Layouts: in  (n_frames, n_transmits, n_elements, n_samples) on the device: int16 / float32
 *              RF or complex64 IQ (interleaved re, im);
 *          out (n_frames, n_points) on the device: float32 (RF) or complex64 (IQ).
 * Tables (usbeam_adaptive_tables, csrc/common/usbeam_internal.h): the CPU plan's DAS delay
 * table -- per (point, transmit, element of the point's aperture) the first interpolation tap
 * and its float32 weights (window and IQ rotation folded in) -- the apertures and the F-DMAS
 * taps, uploaded once at plan creation.
 *
 * Why this shape.  Each (point, frame) is independent and its work is the per-point math of
 * csrc/beamform/adaptive_math.h, the very code the CPU runs (double precision, the same order
 * of operations), so one thread computes one (point, frame) with the CPU's function and the
 * twin differs from the CPU only by FMA contraction and the device's pow/sqrt/sin/cos last bits.
 * The per-point scratch (element signals at 2K + 1 offsets, MV's L x L covariance) does not
 * fit in registers for real apertures, so each worker thread owns a slice of a plan-allocated
 * scratch buffer (at most 256 MiB) and walks the (point, frame) items grid-stride.  Speed is
 * that of a first, correct twin: MV's Cholesky per thread, scratch in global memory (cached).
 * Non-finite input: a thread whose element signals or result hold NaN/inf flags the plan's
 * input-fault word (exec.cuh); usbeam.device raises once the work is done.
 */
#include "runtime/exec.cuh"

#include "beamform/adaptive_math.h"

#include <math.h>
#include <stdint.h>

enum { STAGE_BEAMFORM = 0 };
static const char *const STAGE_NAMES[] = {"adaptive.beamform"};
static const size_t MAX_SCRATCH_BYTES = (size_t)256 << 20;
static const unsigned THREADS = 128;

struct AdaptiveTables {
    usbeam_adaptive_params params; /* by value; das pointers NULL */
    int kind, is_iq, taps, n_offsets, centre;
    size_t n_points;
    const int32_t *aperture_first, *aperture_count;
    const size_t *entry_offset;
    const int32_t *tap;
    const float *weight;
    const double *fir_re, *fir_im; /* NULL unless F-DMAS */
    usbeam_adaptive_cplx *scratch; /* (workers, thread_values) */
    size_t thread_values, workers;
    unsigned *input_fault;
};

struct usbeam_adaptive_cuda {
    usbeam_cuda_exec *exec;
    AdaptiveTables t;
};

__global__ void __launch_bounds__(128) adaptive_kernel(const AdaptiveTables t, size_t n_frames, const void *__restrict__ in,
                                                      float *__restrict__ out)
{
    const size_t worker = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (worker >= t.workers) return;
    const usbeam_das_params *das = &t.params.das;
    const size_t frame_values = das->n_transmits * das->n_elements * das->n_samples;
    const size_t sample_bytes = t.kind == USBEAM_ADAPTIVE_INT16 ? 2 : (t.kind == USBEAM_ADAPTIVE_FLOAT32 ? 4 : 8);
    const int stride = t.is_iq ? 2 * t.taps : t.taps;
    usbeam_adaptive_cplx *scratch = t.scratch + worker * t.thread_values;
    const size_t items = t.n_points * n_frames;
    bool non_finite = false;
    for (size_t item = worker; item < items; item += t.workers) {
        const size_t p = item % t.n_points, f = item / t.n_points; /* neighbouring threads: neighbouring points */
        const void *frame = (const char *)in + f * frame_values * sample_bytes;
        const size_t entry = t.entry_offset[p];
        const usbeam_adaptive_cplx y = usbeam_adaptive_point(
            &t.params, t.kind, t.is_iq, t.taps, t.n_offsets, t.centre, t.aperture_first[p], t.aperture_count[p],
            t.tap + entry, t.weight + entry * (size_t)stride, frame, t.fir_re, t.fir_im, scratch);
        /* the element signals (scratch's first n_offsets x count values) hold any NaN/inf sample
         * read: the methods' roots and tests (|s| > 0) would turn some into zeros */
        const size_t n_values = (size_t)t.n_offsets * (size_t)t.aperture_count[p];
        for (size_t i = 0; i < n_values; ++i) non_finite |= !(isfinite(scratch[i].re) && isfinite(scratch[i].im));
        non_finite |= !(isfinite(y.re) && isfinite(y.im));
        if (t.is_iq) {
            out[2 * item] = (float)y.re;
            out[2 * item + 1] = (float)y.im;
        } else {
            out[item] = (float)y.re;
        }
    }
    if (non_finite) *(volatile unsigned *)t.input_fault = USBEAM_INPUT_FAULT_NONFINITE;
}

static usbeam_status upload(usbeam_cuda_exec *e, const void *host, size_t bytes, const char *what, void **device)
{
    usbeam_status st = usbeam_cuda_exec_alloc(e, bytes ? bytes : 1, what, device);
    if (st == USBEAM_OK && bytes) st = usbeam_cuda_exec_upload(e, *device, host, bytes);
    return st;
}

extern "C" void usbeam_adaptive_cuda_destroy(usbeam_adaptive_cuda *p)
{
    if (!p) return;
    usbeam_cuda_exec_destroy(p->exec); /* frees every allocation of the plan */
    usbeam_free(p);
}

extern "C" usbeam_cuda_exec *usbeam_adaptive_cuda_exec(usbeam_adaptive_cuda *p) { return p ? p->exec : nullptr; }

extern "C" usbeam_status usbeam_adaptive_cuda_create(const usbeam_adaptive_tables *tables, usbeam_adaptive_cuda **out)
{
    if (!tables || !out) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "tables and out must not be NULL");
    *out = nullptr;
    const usbeam_adaptive_params *prm = tables->params;
    const size_t n_pts = prm->das.n_points;
    usbeam_adaptive_cuda *p = (usbeam_adaptive_cuda *)usbeam_alloc(sizeof *p);
    if (!p) return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "adaptive CUDA plan");
    *p = usbeam_adaptive_cuda{};
    AdaptiveTables *t = &p->t;
    t->params = *prm;
    t->kind = tables->kind;
    t->is_iq = tables->is_iq;
    t->taps = tables->taps;
    t->n_offsets = tables->n_offsets;
    t->centre = tables->centre;
    t->n_points = n_pts;
    const size_t weight_floats = (size_t)(tables->is_iq ? 2 : 1) * (size_t)tables->taps;
    t->thread_values = (size_t)tables->n_offsets * (size_t)(tables->widest > 0 ? tables->widest : 1) +
                       (prm->method == USBEAM_ADAPTIVE_MV
                            ? (size_t)tables->widest_subarray * (size_t)(tables->widest_subarray + 1)
                            : prm->method == USBEAM_ADAPTIVE_GCF ? (size_t)(tables->widest > 0 ? tables->widest : 1) : 0);
    const size_t per_worker = t->thread_values * sizeof(usbeam_adaptive_cplx);
    size_t workers = MAX_SCRATCH_BYTES / per_worker;
    const size_t items = n_pts * prm->das.n_frames;
    workers = workers < items ? workers : items;
    workers = workers < (size_t)1 << 20 ? workers : (size_t)1 << 20;
    if (workers < 1) workers = 1;
    t->workers = workers;

    usbeam_status st = usbeam_cuda_exec_create(STAGE_NAMES, 1, &p->exec);
    if (st == USBEAM_OK)
        st = upload(p->exec, tables->aperture_first, n_pts * sizeof(int32_t), "apertures", (void **)&t->aperture_first);
    if (st == USBEAM_OK)
        st = upload(p->exec, tables->aperture_count, n_pts * sizeof(int32_t), "apertures", (void **)&t->aperture_count);
    if (st == USBEAM_OK)
        st = upload(p->exec, tables->entry_offset, (n_pts + 1) * sizeof(size_t), "entry offsets", (void **)&t->entry_offset);
    if (st == USBEAM_OK)
        st = upload(p->exec, tables->table_tap, tables->n_entries * sizeof(int32_t), "delay table", (void **)&t->tap);
    if (st == USBEAM_OK)
        st = upload(p->exec, tables->table_weight, tables->n_entries * weight_floats * sizeof(float), "weight table",
                    (void **)&t->weight);
    if (st == USBEAM_OK && tables->fir_re) {
        st = upload(p->exec, tables->fir_re, (size_t)tables->n_offsets * sizeof(double), "fdmas taps", (void **)&t->fir_re);
        if (st == USBEAM_OK)
            st = upload(p->exec, tables->fir_im, (size_t)tables->n_offsets * sizeof(double), "fdmas taps", (void **)&t->fir_im);
    }
    if (st == USBEAM_OK) st = usbeam_cuda_exec_alloc(p->exec, workers * per_worker, "adaptive scratch", (void **)&t->scratch);
    if (st == USBEAM_OK) st = usbeam_cuda_exec_input_fault_flag(p->exec, &t->input_fault);
    if (st != USBEAM_OK) {
        usbeam_adaptive_cuda_destroy(p);
        return st;
    }
    *out = p;
    return USBEAM_OK;
}

extern "C" usbeam_status usbeam_adaptive_cuda_execute(usbeam_adaptive_cuda *p, size_t n_frames, const void *in, void *out)
{
    if (!p || !in || !out) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "plan, in and out must not be NULL");
    usbeam_cuda_exec *e = p->exec;
    usbeam_status st = usbeam_cuda_exec_begin(e);
    if (st != USBEAM_OK) return st;
    cudaStream_t stream = usbeam_cuda_exec_cuda_stream(e);
    st = usbeam_cuda_stage_begin(e, STAGE_BEAMFORM);
    if (st == USBEAM_OK) {
        const unsigned blocks = (unsigned)((p->t.workers + THREADS - 1) / THREADS);
        adaptive_kernel<<<blocks, THREADS, 0, stream>>>(p->t, n_frames, in, (float *)out);
        st = usbeam_cuda_check(cudaGetLastError(), "adaptive_kernel launch", __FILE__, __LINE__);
    }
    if (st == USBEAM_OK) st = usbeam_cuda_stage_end(e, STAGE_BEAMFORM);
    usbeam_cuda_exec_end(e);
    return st;
}
