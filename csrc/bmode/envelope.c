/*
 * envelope.c - the envelope (magnitude of the analytic signal) of real RF lines, CPU backend,
 * so that beamformed RF images (das on RF, RCABeamformer(data='rf')) reach B-mode.
 *
 * Layout: in  float32 [n_outer][n_axis][n_inner]: each line runs along the middle axis, its
 *             samples n_inner apart (an RF image (n_frames, nz, nx) along depth: n_outer =
 *             n_frames, n_axis = nz, n_inner = nx; along the last axis n_inner = 1);
 *         out float32 envelope or complex64 analytic signal (interleaved re, im), same layout.
 * Units:  none (the envelope has the unit of the RF).
 * Method: the analytic signal of scipy.signal.hilbert (Marple, "Computing the discrete-time
 *         analytic signal via FFT", IEEE TSP 47(9) 1999): ifft(h fft(x)) over the whole line,
 *         whose imaginary part H x is a circular convolution with the kernel of
 *         usbeam_hilbert_kernel (common/usbeam_math.h), tabulated here in double.  The plan
 *         applies it directly, O(n_axis^2) per line, as a product of the circulant matrix with
 *         the lines (the inner axis is contiguous, so the loop over it vectorises), summing in
 *         double: the result is scipy's to float32 rounding, edges included (one DFT period,
 *         as scipy: no FIR transient, and the same circular wrap).  For nz of a few hundred
 *         samples this costs about as much as the beamforming that made the image; deep RF
 *         lines (thousands of samples) are better demodulated to IQ first (rf2iq).
 * NaN or inf: every output of a line sums every sample of it (0 * NaN is NaN), so the pass
 *         itself finds them: refused (USBEAM_ERR_INVALID_ARGUMENT), out filled with NaN.
 * Long calls poll the caller's interrupt check between blocks (common/interrupt.h).
 */
#include "common/interrupt.h"
#include "common/usbeam_internal.h"
#include "common/usbeam_math.h"

#include <math.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

/* A work item: ROWS outputs along the axis x COLUMNS consecutive lines (inner index), with
 * their double accumulators on the stack (ROWS x COLUMNS x 8 bytes = 4 KiB). */
#define ROWS 8
#define COLUMNS 64

struct usbeam_envelope_plan {
    usbeam_envelope_params params;
    double *kernel_by_offset; /* [2 n_axis - 1]: entry n_axis - 1 - i + m weighs x[m] in y[i] */
    int n_threads;
    usbeam_envelope_cuda *cuda; /* USBEAM_BACKEND_CUDA: the twin in cuda/envelope.cu */
};

usbeam_status usbeam_envelope_plan_create(const usbeam_envelope_params *params, usbeam_backend backend,
                                          usbeam_envelope_plan **plan)
{
    if (!params || !plan) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "params and plan must not be NULL");
    *plan = NULL;
    if (backend != USBEAM_BACKEND_CPU && backend != USBEAM_BACKEND_CUDA)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "backend: unknown value %d", (int)backend);
    const usbeam_envelope_params *p = params;
    if (p->n_outer == 0 || p->n_axis == 0 || p->n_inner == 0)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "image: is empty (n_outer %zu, n_axis %zu, n_inner %zu)",
                           p->n_outer, p->n_axis, p->n_inner);
    if (p->output != USBEAM_ENVELOPE_MAGNITUDE && p->output != USBEAM_ENVELOPE_ANALYTIC)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "output: unknown kind %d", (int)p->output);
    size_t n_values, out_bytes, table_bytes;
    if (usbeam_mul_size3(p->n_outer, p->n_axis, p->n_inner, &n_values) != 0 ||
        usbeam_mul_size(n_values, p->output == USBEAM_ENVELOPE_ANALYTIC ? 8 : 4, &out_bytes) != 0 ||
        out_bytes > USBEAM_MAX_ALLOCATION || p->n_axis > (size_t)1 << 31 ||
        usbeam_mul_size(2 * p->n_axis - 1, sizeof(double), &table_bytes) != 0)
        return usbeam_fail(USBEAM_ERR_SIZE_OVERFLOW, "image: %zu x %zu x %zu values is too large", p->n_outer,
                           p->n_axis, p->n_inner);

    usbeam_envelope_plan *pl = usbeam_alloc(sizeof *pl);
    if (!pl) return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "envelope plan");
    pl->params = *p;
    pl->kernel_by_offset = usbeam_alloc(table_bytes);
    if (!pl->kernel_by_offset) {
        usbeam_envelope_plan_destroy(pl);
        return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "envelope plan: Hilbert kernel of %zu samples", p->n_axis);
    }
    const long long n = (long long)p->n_axis;
    for (long long u = 0; u < 2 * n - 1; ++u) pl->kernel_by_offset[u] = usbeam_hilbert_kernel(n - 1 - u, n);
    pl->n_threads = usbeam_cpu_threads();
    if (backend == USBEAM_BACKEND_CUDA) {
        /* kernel[d] = kernel_by_offset[n - 1 - d] */
        usbeam_status st = USBEAM_OK;
        double *kernel = usbeam_alloc((size_t)n * sizeof(double));
        if (!kernel) st = usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "envelope plan: Hilbert kernel");
        for (long long d = 0; kernel && d < n; ++d) kernel[d] = pl->kernel_by_offset[n - 1 - d];
        if (st == USBEAM_OK) st = usbeam_envelope_cuda_create(p, kernel, &pl->cuda);
        usbeam_free(kernel);
        if (st != USBEAM_OK) {
            usbeam_envelope_plan_destroy(pl);
            return st;
        }
    }
    *plan = pl;
    return USBEAM_OK;
}

void usbeam_envelope_plan_destroy(usbeam_envelope_plan *plan)
{
    if (!plan) return;
    usbeam_envelope_cuda_destroy(plan->cuda);
    usbeam_free(plan->kernel_by_offset);
    usbeam_free(plan);
}

usbeam_cuda_exec *usbeam_envelope_plan_cuda(usbeam_envelope_plan *plan)
{
    return plan && plan->cuda ? usbeam_envelope_cuda_exec(plan->cuda) : NULL;
}

/* Outputs [i0, i0 + rows) x lines [j0, j0 + cols) of outer block o; returns 1 when an output
 * was not finite (a non-finite sample in one of the lines). */
static int envelope_block(const usbeam_envelope_plan *plan, const float *in, void *out, size_t o, size_t i0,
                          size_t rows, size_t j0, size_t cols)
{
    const size_t n = plan->params.n_axis, inner = plan->params.n_inner;
    const float *lines = in + o * n * inner + j0;
    double acc[ROWS][COLUMNS];
    for (size_t r = 0; r < rows; ++r)
        for (size_t c = 0; c < cols; ++c) acc[r][c] = 0.0;
    for (size_t m = 0; m < n; ++m) {
        const float *x = lines + m * inner;
        const double *weight = plan->kernel_by_offset + (n - 1 - i0) + m; /* weight[-r]: output i0 + r */
        for (size_t r = 0; r < rows; ++r) {
            const double w = weight[-(ptrdiff_t)r];
            double *a = acc[r];
#pragma omp simd
            for (size_t c = 0; c < cols; ++c) a[c] += w * (double)x[c];
        }
    }
    int bad = 0;
    for (size_t r = 0; r < rows; ++r) {
        const size_t at = (o * n + i0 + r) * inner + j0;
        const float *x = in + at;
        for (size_t c = 0; c < cols; ++c) bad |= !(acc[r][c] - acc[r][c] == 0.0);
        if (plan->params.output == USBEAM_ENVELOPE_MAGNITUDE) {
            float *dst = (float *)out + at;
            for (size_t c = 0; c < cols; ++c) dst[c] = usbeam_envelope_magnitude((double)x[c], acc[r][c]);
        } else {
            float *dst = (float *)out + 2 * at;
            for (size_t c = 0; c < cols; ++c) {
                dst[2 * c] = x[c];
                dst[2 * c + 1] = (float)acc[r][c];
            }
        }
    }
    return bad;
}

usbeam_status usbeam_envelope_execute(usbeam_envelope_plan *plan, const void *in, void *out)
{
    if (!plan || !in || !out) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "plan, in and out must not be NULL");
    if (plan->cuda) return usbeam_envelope_cuda_execute(plan->cuda, in, out); /* device pointers, queued */
    const usbeam_envelope_params *p = &plan->params;
    const size_t row_blocks = (p->n_axis + ROWS - 1) / ROWS, column_blocks = (p->n_inner + COLUMNS - 1) / COLUMNS;
    const ptrdiff_t n_items = (ptrdiff_t)(p->n_outer * row_blocks * column_blocks);
    int bad = 0;
    usbeam_interrupt interrupt;
    usbeam_interrupt_begin(&interrupt);
#pragma omp parallel for schedule(dynamic, 4) num_threads(usbeam_team_size(plan->n_threads)) reduction(| : bad)
    for (ptrdiff_t item = 0; item < n_items; ++item) {
        if (usbeam_interrupt_poll(&interrupt)) continue;
        const size_t column_block = (size_t)item % column_blocks, rest = (size_t)item / column_blocks;
        const size_t row_block = rest % row_blocks, o = rest / row_blocks;
        const size_t i0 = row_block * ROWS, j0 = column_block * COLUMNS;
        const size_t rows = p->n_axis - i0 < ROWS ? p->n_axis - i0 : ROWS;
        const size_t cols = p->n_inner - j0 < COLUMNS ? p->n_inner - j0 : COLUMNS;
        bad |= envelope_block(plan, in, out, o, i0, rows, j0, cols);
    }
    const size_t n_floats = p->n_outer * p->n_axis * p->n_inner * (p->output == USBEAM_ENVELOPE_ANALYTIC ? 2 : 1);
    usbeam_status st = usbeam_interrupt_end(&interrupt);
    if (st == USBEAM_OK && bad)
        st = usbeam_fail_nonfinite("image", "the envelope refuses them; out is filled with NaN");
    if (st != USBEAM_OK) usbeam_fill_nan(out, n_floats);
    return st;
}
