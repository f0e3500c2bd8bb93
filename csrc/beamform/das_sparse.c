/*
 * das_sparse.c - delay-and-sum as one sparse matrix (the "sparse" formulation): plan create
 * builds the delay-interpolation-apodization operator as CSR, execute applies it as a
 * sparse x dense product over the frames (OpenMP); a CUDA plan hands the CSR to its twin
 * (cuda/das_sparse.cu, cusparseSpMM).
 *
 * Operator: A is (n_points, n_columns), n_columns = n_transmits * n_elements * n_samples,
 * column (t, e, s) = (t * n_elements + e) * n_samples + s (the input's own layout), so
 *     out[f, p] = sum_j A[p, col_j] in[f, col_j]
 * with in (n_frames, n_transmits, n_elements, n_samples) int16 / float32 RF or complex64 IQ
 * and out (n_frames, n_points) float32 / complex64.  Row p holds, for each transmit and each
 * element of p's receive aperture, the interpolation taps (nearest 1, linear 2, cubic 4) of
 * sample (tau - t0) fs with the window and, for IQ, the rotation exp(+j 2 pi fc tau) folded in:
 * the gather formulation's delays, windows and rotations as whole entries per point
 * (usbeam_das_point_entries, das_delays.c: computed in double, stored in float32; the gather
 * execute multiplies the same receive and transmit parts out in float32 instead), with the
 * zero weights (samples outside the record, the window's zero ends) left out.  Columns within
 * a row ascend.
 * Values: float32 (RF) or complex64 (IQ, interleaved re, im); row offsets and column indices
 * int32 (cuSPARSE's 32-bit CSR; a grid whose operator needs more is refused at create).
 * Execute (CPU) stages the input as (column, frame) float32 planes (frame fastest, as das.c
 * does) so each non-zero multiplies a contiguous run of frames: CSR x dense with the dense
 * operand row-major, the frame loop vectorised; rows run in parallel blocks.
 *
 * Why: the operator is built once and applied to every ensemble with one regular kernel that
 * any sparse library (cuSPARSE, MKL, ONNX graphs of Gather + scatter-add) runs; its memory,
 * usbeam_das_sparse_bytes, is the price: 4 + 4 (RF) or 4 + 8 (IQ) bytes per non-zero.
 * Reference: Perrot et al., "So you think you can DAS?", Ultrasonics 111 (2021) 106309;
 * PyMUST dasmtx (D. Garcia) builds the same operator as a SciPy sparse matrix.
 */
#include "beamform/das_internal.h"
#include "common/interrupt.h"

/* Let the compiler fuse a*b + c into FMA in the row loops (ISO C mode would not), as das.c. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=fast")
#endif

#include <stdint.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#define ROW_BLOCK 32 /* rows per OpenMP work item in execute */

struct usbeam_das_sparse_plan {
    usbeam_das_params params; /* scalars only */
    int is_iq;
    size_t n_columns, nnz;
    int32_t *row_offsets; /* (n_points + 1), CPU plans only */
    int32_t *columns;     /* (nnz) */
    float *values;        /* (nnz) or (nnz, 2) for IQ */
    size_t sparse_bytes;
    float *stage;         /* (re plane, im plane if IQ): (column, frame), frame fastest, CPU only */
    float *accumulators;  /* (n_threads, accumulator_stride) row sums, re then im (n_frames each), CPU only */
    size_t accumulator_stride; /* floats per thread: usbeam_thread_words(2 n_frames), the sums being
                                  written at every entry */
    int n_threads;
    usbeam_das_sparse_cuda *cuda; /* USBEAM_BACKEND_CUDA: the twin in cuda/das_sparse.cu */
};

void usbeam_das_sparse_plan_destroy(usbeam_das_sparse_plan *plan)
{
    if (!plan) return;
    usbeam_das_sparse_cuda_destroy(plan->cuda);
    usbeam_free(plan->row_offsets);
    usbeam_free(plan->columns);
    usbeam_free(plan->values);
    usbeam_free(plan->stage);
    usbeam_free(plan->accumulators);
    usbeam_free(plan);
}

usbeam_cuda_exec *usbeam_das_sparse_plan_cuda(usbeam_das_sparse_plan *plan)
{
    return plan && plan->cuda ? usbeam_das_sparse_cuda_exec(plan->cuda) : NULL;
}

size_t usbeam_das_sparse_bytes(const usbeam_das_sparse_plan *plan) { return plan ? plan->sparse_bytes : 0; }

void usbeam_das_sparse_csr(const usbeam_das_sparse_plan *plan, usbeam_das_sparse_view *view)
{
    if (!view) return;
    memset(view, 0, sizeof *view);
    if (!plan) return;
    view->n_rows = plan->params.n_points;
    view->n_columns = plan->n_columns;
    view->nnz = plan->nnz;
    view->is_complex = plan->is_iq;
    view->row_offsets = plan->row_offsets;
    view->columns = plan->columns;
    view->values = plan->values;
}

/* Is the weight of tap k of entry j non-zero?  (IQ: either part.) */
static inline int weight_nonzero(const float *weight, size_t j, int k, int taps, int is_iq)
{
    if (is_iq) return weight[(j * (size_t)taps + (size_t)k) * 2] != 0.0f || weight[(j * (size_t)taps + (size_t)k) * 2 + 1] != 0.0f;
    return weight[j * (size_t)taps + (size_t)k] != 0.0f;
}

/* Non-zeros of every row (pass 0: count into row_offsets[p + 1]) or the row itself (pass 1:
 * fill from row_offsets[p]), from the gather plan's entries, computed per point into the
 * thread's scratch. */
static void build_rows(const usbeam_das_plan *gather, usbeam_das_sparse_plan *plan, int32_t *scratch_tap,
                       float *scratch_weight, int fill)
{
    const usbeam_das_params *prm = &gather->params;
    const ptrdiff_t n_points = (ptrdiff_t)prm->n_points;
    const int taps = gather->taps, is_iq = gather->is_iq;
    const size_t per_thread = gather->max_point_entries ? gather->max_point_entries : 1;
#pragma omp parallel num_threads(usbeam_team_size(gather->n_threads))
    {
#ifdef _OPENMP
        const int thread = omp_get_thread_num();
#else
        const int thread = 0;
#endif
        int32_t *tap = scratch_tap + (size_t)thread * per_thread;
        float *weight = scratch_weight + (size_t)thread * per_thread * (size_t)gather->weight_stride;
#pragma omp for schedule(dynamic, 64)
        for (ptrdiff_t p = 0; p < n_points; ++p) {
            usbeam_das_point_entries(gather, (size_t)p, tap, weight);
            const size_t count = (size_t)gather->aperture_count[p], first = (size_t)gather->aperture_first[p];
            size_t k_out = fill ? (size_t)plan->row_offsets[p] : 0;
            for (size_t t = 0, j = 0; t < prm->n_transmits; ++t) {
                for (size_t i = 0; i < count; ++i, ++j) {
                    const size_t channel = (t * prm->n_elements + first + i) * prm->n_samples;
                    for (int k = 0; k < taps; ++k) {
                        if (!weight_nonzero(weight, j, k, taps, is_iq)) continue;
                        if (fill) {
                            plan->columns[k_out] = (int32_t)(channel + (size_t)tap[j] + (size_t)k);
                            if (is_iq) {
                                plan->values[2 * k_out] = weight[(j * (size_t)taps + (size_t)k) * 2];
                                plan->values[2 * k_out + 1] = weight[(j * (size_t)taps + (size_t)k) * 2 + 1];
                            } else {
                                plan->values[k_out] = weight[j * (size_t)taps + (size_t)k];
                            }
                        }
                        ++k_out;
                    }
                }
            }
            if (!fill) plan->row_offsets[p + 1] = (int32_t)(k_out < (size_t)INT32_MAX ? k_out : (size_t)INT32_MAX);
        }
    }
}

usbeam_status usbeam_das_sparse_plan_create(const usbeam_das_params *params, usbeam_backend backend,
                                            usbeam_das_sparse_plan **plan_out)
{
    usbeam_status st;
    if (!params || !plan_out) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "params and plan must not be NULL");
    *plan_out = NULL;
    if (backend != USBEAM_BACKEND_CPU && backend != USBEAM_BACKEND_CUDA)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "backend: unknown value %d", (int)backend);
    /* The gather plan validates the parameters and computes the geometry (transmit times,
     * apertures); one frame and no table: only its per-point entries are used. */
    usbeam_das_params one = *params;
    one.n_frames = 1;
    one.max_table_bytes = 1;
    usbeam_das_plan *gather = NULL;
    if ((st = usbeam_das_plan_create(&one, USBEAM_BACKEND_CPU, &gather)) != USBEAM_OK) return st;

    int32_t *scratch_tap = NULL;
    float *scratch_weight = NULL;
    usbeam_das_sparse_plan *plan = usbeam_alloc(sizeof *plan);
    if (!plan) {
        st = usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "das sparse plan");
        goto done;
    }
    plan->params = gather->params;
    plan->params.n_frames = params->n_frames;
    plan->params.max_table_bytes = params->max_table_bytes;
    plan->is_iq = gather->is_iq;
    plan->n_threads = gather->n_threads;
    if (usbeam_mul_size3(params->n_transmits, params->n_elements, params->n_samples, &plan->n_columns) != 0 ||
        plan->n_columns > (size_t)INT32_MAX) {
        st = usbeam_fail(USBEAM_ERR_SIZE_OVERFLOW,
                         "formulation='sparse': transmits x elements x samples (%zu x %zu x %zu) exceeds the 32-bit "
                         "column indices of the sparse operator", params->n_transmits, params->n_elements,
                         params->n_samples);
        goto done;
    }
    const size_t per_thread = gather->max_point_entries ? gather->max_point_entries : 1;
    size_t scratch_n, bytes;
    if (usbeam_mul_size(per_thread, (size_t)gather->n_threads, &scratch_n) != 0 ||
        usbeam_mul_size(scratch_n, (size_t)gather->weight_stride * sizeof(float), &bytes) != 0 ||
        bytes > USBEAM_MAX_ALLOCATION) {
        st = usbeam_fail(USBEAM_ERR_SIZE_OVERFLOW, "points: per-thread entries are too large");
        goto done;
    }
    scratch_tap = usbeam_alloc(scratch_n * sizeof(int32_t));
    scratch_weight = usbeam_alloc(bytes);
    plan->row_offsets = usbeam_alloc((params->n_points + 1) * sizeof(int32_t));
    if (!scratch_tap || !scratch_weight || !plan->row_offsets) {
        st = usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "formulation='sparse': cannot allocate the row offsets");
        goto done;
    }
    build_rows(gather, plan, scratch_tap, scratch_weight, 0);
    size_t nnz = 0;
    plan->row_offsets[0] = 0;
    for (size_t p = 0; p < params->n_points; ++p) {
        nnz += (size_t)plan->row_offsets[p + 1];
        if (nnz > (size_t)INT32_MAX) {
            st = usbeam_fail(USBEAM_ERR_SIZE_OVERFLOW,
                             "formulation='sparse': the operator has more than 2^31 - 1 non-zeros (points x "
                             "transmits x aperture x taps); use formulation='gather' or a smaller grid");
            goto done;
        }
        plan->row_offsets[p + 1] = (int32_t)nnz;
    }
    plan->nnz = nnz;
    const size_t value_floats = plan->is_iq ? 2 : 1;
    plan->sparse_bytes = (params->n_points + 1) * sizeof(int32_t) + nnz * (sizeof(int32_t) + value_floats * sizeof(float));
    if (plan->sparse_bytes > USBEAM_MAX_ALLOCATION) {
        st = usbeam_fail(USBEAM_ERR_SIZE_OVERFLOW, "formulation='sparse': the operator is too large");
        goto done;
    }
    plan->columns = usbeam_alloc((nnz ? nnz : 1) * sizeof(int32_t));
    plan->values = usbeam_alloc((nnz ? nnz : 1) * value_floats * sizeof(float));
    if (!plan->columns || !plan->values) {
        st = usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "formulation='sparse': cannot allocate %zu bytes for the operator",
                         plan->sparse_bytes);
        goto done;
    }
    build_rows(gather, plan, scratch_tap, scratch_weight, 1);
    if (backend == USBEAM_BACKEND_CPU) {
        size_t plane;
        if (usbeam_mul_size(plan->n_columns, params->n_frames, &plane) != 0 || plane > USBEAM_MAX_ALLOCATION / 8) {
            st = usbeam_fail(USBEAM_ERR_SIZE_OVERFLOW, "data: frames x transmits x elements x samples is too large");
            goto done;
        }
        plan->stage = usbeam_alloc(plane * value_floats * sizeof(float));
        plan->accumulator_stride = usbeam_thread_words(2 * params->n_frames);
        plan->accumulators = usbeam_alloc((size_t)plan->n_threads * plan->accumulator_stride * sizeof(float));
        if (!plan->stage || !plan->accumulators) {
            st = usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "formulation='sparse': cannot allocate the data staging buffer");
            goto done;
        }
    }
    if (backend == USBEAM_BACKEND_CUDA) {
        const usbeam_das_sparse_view view = {plan->params.n_points, plan->n_columns, plan->nnz, plan->is_iq,
                                             plan->row_offsets, plan->columns, plan->values};
        if ((st = usbeam_das_sparse_cuda_create(&plan->params, &view, &plan->cuda)) != USBEAM_OK) goto done;
        /* the twin holds its device copy: the host CSR served plan creation only */
        usbeam_free(plan->row_offsets);
        usbeam_free(plan->columns);
        usbeam_free(plan->values);
        plan->row_offsets = plan->columns = NULL;
        plan->values = NULL;
    }
    st = USBEAM_OK;
done:
    usbeam_free(scratch_tap);
    usbeam_free(scratch_weight);
    usbeam_das_plan_destroy(gather);
    if (st != USBEAM_OK) {
        usbeam_das_sparse_plan_destroy(plan);
        return st;
    }
    *plan_out = plan;
    return USBEAM_OK;
}

/* The input as (column, frame) planes, frame fastest (re and im apart for IQ): each non-zero
 * then reads one contiguous run of frames, and the frame loop below vectorises (das.c stages
 * its input the same way, for the same reason). */
static size_t stage_input(const usbeam_das_sparse_plan *plan, size_t n_frames, const void *in)
{
    size_t bad = 0; /* values holding NaN or inf (x - x is 0 only for finite x) */
    const size_t n_columns = plan->n_columns;
    const usbeam_dtype dtype = plan->params.input_dtype;
    float *re = plan->stage, *im = plan->stage + n_columns * n_frames;
    const ptrdiff_t n_blocks = (ptrdiff_t)((n_columns + 255) / 256);
#pragma omp parallel for schedule(static) num_threads(usbeam_team_size(plan->n_threads)) reduction(+ : bad)
    for (ptrdiff_t b = 0; b < n_blocks; ++b) {
        const size_t c0 = (size_t)b * 256, c1 = c0 + 256 < n_columns ? c0 + 256 : n_columns;
        for (size_t f = 0; f < n_frames; ++f) {
            const size_t src = f * n_columns;
            if (dtype == USBEAM_DTYPE_COMPLEX64) {
                const float *x = (const float *)in + 2 * src;
                for (size_t c = c0; c < c1; ++c) {
                    re[c * n_frames + f] = x[2 * c];
                    im[c * n_frames + f] = x[2 * c + 1];
                    bad += !(x[2 * c] - x[2 * c] == 0.0f) | !(x[2 * c + 1] - x[2 * c + 1] == 0.0f);
                }
            } else if (dtype == USBEAM_DTYPE_FLOAT32) {
                const float *x = (const float *)in + src;
                for (size_t c = c0; c < c1; ++c) {
                    re[c * n_frames + f] = x[c];
                    bad += !(x[c] - x[c] == 0.0f);
                }
            } else {
                const int16_t *x = (const int16_t *)in + src;
                for (size_t c = c0; c < c1; ++c) re[c * n_frames + f] = (float)x[c];
            }
        }
    }
    return bad;
}

/* Row p for all frames into acc_re / acc_im (n_frames each).  Frames go in blocks of
 * FRAME_BLOCK whose sums stay in registers over the row's non-zeros (the compiler unrolls the
 * fixed-length loops into vectors); the last, shorter block takes the generic loop. */
#define FRAME_BLOCK 16

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
/* an AVX2 + FMA build of the row loops besides the baseline, chosen when the library loads (as das.c) */
#define SPARSE_HOT __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define SPARSE_HOT
#endif

SPARSE_HOT static void row_iq(const usbeam_das_sparse_plan *plan, size_t p, size_t n_frames, float *restrict acc_re,
                   float *restrict acc_im)
{
    const float *re = plan->stage, *im = plan->stage + plan->n_columns * n_frames;
    const int32_t j0 = plan->row_offsets[p], j1 = plan->row_offsets[p + 1];
    size_t f0 = 0;
    for (; f0 + FRAME_BLOCK <= n_frames; f0 += FRAME_BLOCK) {
        float sr[FRAME_BLOCK] = {0}, si[FRAME_BLOCK] = {0};
        for (int32_t j = j0; j < j1; ++j) {
            const float wr = plan->values[2 * j], wi = plan->values[2 * j + 1];
            const float *a = re + (size_t)plan->columns[j] * n_frames + f0;
            const float *b = im + (size_t)plan->columns[j] * n_frames + f0;
            for (int f = 0; f < FRAME_BLOCK; ++f) {
                sr[f] += wr * a[f] - wi * b[f];
                si[f] += wr * b[f] + wi * a[f];
            }
        }
        for (int f = 0; f < FRAME_BLOCK; ++f) acc_re[f0 + f] = sr[f], acc_im[f0 + f] = si[f];
    }
    if (f0 == n_frames) return;
    for (size_t f = f0; f < n_frames; ++f) acc_re[f] = acc_im[f] = 0.0f;
    for (int32_t j = j0; j < j1; ++j) {
        const float wr = plan->values[2 * j], wi = plan->values[2 * j + 1];
        const float *a = re + (size_t)plan->columns[j] * n_frames, *b = im + (size_t)plan->columns[j] * n_frames;
        for (size_t f = f0; f < n_frames; ++f) {
            acc_re[f] += wr * a[f] - wi * b[f];
            acc_im[f] += wr * b[f] + wi * a[f];
        }
    }
}

SPARSE_HOT static void row_rf(const usbeam_das_sparse_plan *plan, size_t p, size_t n_frames, float *restrict acc)
{
    const int32_t j0 = plan->row_offsets[p], j1 = plan->row_offsets[p + 1];
    size_t f0 = 0;
    for (; f0 + FRAME_BLOCK <= n_frames; f0 += FRAME_BLOCK) {
        float sum[FRAME_BLOCK] = {0};
        for (int32_t j = j0; j < j1; ++j) {
            const float w = plan->values[j];
            const float *a = plan->stage + (size_t)plan->columns[j] * n_frames + f0;
            for (int f = 0; f < FRAME_BLOCK; ++f) sum[f] += w * a[f];
        }
        for (int f = 0; f < FRAME_BLOCK; ++f) acc[f0 + f] = sum[f];
    }
    if (f0 == n_frames) return;
    for (size_t f = f0; f < n_frames; ++f) acc[f] = 0.0f;
    for (int32_t j = j0; j < j1; ++j) {
        const float w = plan->values[j];
        const float *a = plan->stage + (size_t)plan->columns[j] * n_frames;
        for (size_t f = f0; f < n_frames; ++f) acc[f] += w * a[f];
    }
}

usbeam_status usbeam_das_sparse_execute_frames(usbeam_das_sparse_plan *plan, size_t n_frames, const void *in,
                                               void *out)
{
    if (!plan || !in || !out) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "plan, in and out must not be NULL");
    const usbeam_das_params *prm = &plan->params;
    if (n_frames == 0 || n_frames > prm->n_frames)
        return usbeam_fail(USBEAM_ERR_INVALID_SHAPE, "n_frames must be in [1, %zu], the plan's capacity (got %zu)",
                           prm->n_frames, n_frames);
    if (plan->cuda) { /* device pointers; the twin runs whole batches of its capacity */
        if (n_frames != prm->n_frames)
            return usbeam_fail(USBEAM_ERR_INVALID_SHAPE, "n_frames must equal the CUDA plan's %zu frames (got %zu)",
                               prm->n_frames, n_frames);
        return usbeam_das_sparse_cuda_execute(plan->cuda, in, out);
    }
    const size_t n_points = prm->n_points;
    const size_t bad = stage_input(plan, n_frames, in); /* NaN / inf found while staging */
    if (bad)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "data contains NaN or infinite values (%zu of %zu samples)",
                           bad, n_frames * plan->n_columns);
    const ptrdiff_t n_blocks = (ptrdiff_t)((n_points + ROW_BLOCK - 1) / ROW_BLOCK);
    usbeam_interrupt interrupt; /* Ctrl-C between row blocks (common/interrupt.h) */
    usbeam_interrupt_begin(&interrupt);
#pragma omp parallel num_threads(usbeam_team_size(plan->n_threads))
    {
#ifdef _OPENMP
        const int thread = omp_get_thread_num();
#else
        const int thread = 0;
#endif
        float *acc_re = plan->accumulators + (size_t)thread * plan->accumulator_stride, *acc_im = acc_re + prm->n_frames;
#pragma omp for schedule(dynamic, 4)
        for (ptrdiff_t b = 0; b < n_blocks; ++b) {
            if (usbeam_interrupt_poll(&interrupt)) continue;
            const size_t p0 = (size_t)b * ROW_BLOCK, p1 = p0 + ROW_BLOCK < n_points ? p0 + ROW_BLOCK : n_points;
            for (size_t p = p0; p < p1; ++p) {
                if (plan->is_iq) {
                    row_iq(plan, p, n_frames, acc_re, acc_im);
                    for (size_t f = 0; f < n_frames; ++f) {
                        float *y = (float *)out + 2 * (f * n_points + p);
                        y[0] = acc_re[f];
                        y[1] = acc_im[f];
                    }
                } else {
                    row_rf(plan, p, n_frames, acc_re);
                    for (size_t f = 0; f < n_frames; ++f) ((float *)out)[f * n_points + p] = acc_re[f];
                }
            }
        }
    }
    usbeam_status st = usbeam_interrupt_end(&interrupt);
    if (st != USBEAM_OK) usbeam_fill_nan(out, n_frames * n_points * (plan->is_iq ? 2 : 1)); /* no partial image */
    return st;
}
