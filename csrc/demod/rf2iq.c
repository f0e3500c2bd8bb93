/*
 * rf2iq.c - RF -> IQ demodulation (down-mixing, low-pass, optional decimation), CPU backend.
 *
 * Layout: in  RF [n_lines][n_samples], int16 / float32 / float64, samples last (MATLAB's
 *             RF(n_samples, n_elements, n_frames) is this without a copy);
 *         out IQ [n_lines][n_out], complex64 interleaved (re, im), n_out = ceil(n_samples / D).
 * Units:  fs, fc, cutoff, transition_width in Hz; t0 in s; attenuation in dB.
 * Math:   x[m]  = RF[m] * exp(-2j*pi*fc*(t0 + m/fs))          (phasor table, double, at plan time)
 *         IQ[n] = 2 * (h * x)[n*D]                             (the 2 keeps the envelope amplitude)
 *   butter: h is the Butterworth low-pass of filter_design.c run forward then backward
 *     (zero phase) exactly as scipy.signal.filtfilt with its defaults: odd extension by
 *     padlen = 3*(order+1) samples at both ends, initial state lfilter_zi scaled by the first
 *     sample of each pass, recursion in double.  This is MUST / PyMUST rf2iq (D. Garcia;
 *     Madiena et al., IEEE TUFFC 2018;65:795-802), which also covers undersampled band-pass
 *     RF (fs < 2 fc): nothing here assumes fs > 2 fc.
 *   kaiser / taps: linear-phase FIR applied centred, (h * x)[n] = sum_k h[k] x[n + c - k],
 *     c = (n_taps - 1) / 2 (integer division), x = 0 outside the line (numpy's
 *     convolve(x, h, 'same')); only the kept outputs are computed.  Since
 *     x[n + c - k] = RF[n + c - k] phasor[n] exp(+2j pi fc (k - c)/fs), the taps are modulated
 *     once at plan time and run on the real RF; the phasor multiplies the kept outputs only
 *     (two multiply-adds per tap instead of four for complex taps).
 * Execute allocates nothing: each OpenMP thread owns a scratch line in the plan.
 * NaN or inf RF (float32 / float64) is refused: the pass that reads each sample once (the
 * mixing of the Butterworth path, the line load of the FIR path) ORs a per-line flag
 * (x - x is 0 only for finite x); a refused call fills out with NaN, no partial IQ.
 * The Butterworth recursion is serial in time, so BUTTER_LINES lines run through it together
 * (their re and im parts interleaved as 2*BUTTER_LINES channels per sample): the channel loops
 * vectorise and hide the latency of the recursion.  Each channel sees the same arithmetic as
 * a line filtered alone.
 */
#include "common/interrupt.h"
#include "common/usbeam_internal.h"

#include <math.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#define PI_DOUBLE 3.14159265358979323846
#define BUTTER_LINES 4
#define BUTTER_CHANNELS (2 * BUTTER_LINES)

struct usbeam_rf2iq_plan {
    usbeam_rf2iq_params params;  /* copy; the taps pointers below replace the user's */
    size_t n_out;
    double *phasor_re, *phasor_im; /* [n_samples] exp(-2j*pi*fc*t) */
    /* butter: b, a (a[0] = 1) and the filtfilt initial state for a unit step */
    double b[USBEAM_RF2IQ_MAX_ORDER + 1], a[USBEAM_RF2IQ_MAX_ORDER + 1];
    double step_state[USBEAM_RF2IQ_MAX_ORDER];
    size_t padlen;
    /* FIR: taps in the user's order, and q[j] = h[K-1-j] exp(-2j pi fc (j - lead)/fs) (reversed
     * for a contiguous dot product, modulated so it runs on the real RF; see fir_line) */
    double *taps_re, *taps_im;       /* taps_im NULL for real taps */
    double *modulated_re, *modulated_im;
    size_t n_taps;
    /* per-thread scratch of scratch_per_thread doubles: butter: scratch_len samples x
     * BUTTER_CHANNELS interleaved channels; FIR: the zero-padded real RF line */
    int n_threads;
    size_t scratch_len, scratch_per_thread;
    double *scratch;   /* CPU plans only */
    usbeam_rf2iq_cuda *cuda; /* USBEAM_BACKEND_CUDA: the twin in cuda/rf2iq.cu */
};

size_t usbeam_rf2iq_n_out(const usbeam_rf2iq_plan *plan) { return plan ? plan->n_out : 0; }

usbeam_cuda_exec *usbeam_rf2iq_plan_cuda(usbeam_rf2iq_plan *plan)
{
    return plan && plan->cuda ? usbeam_rf2iq_cuda_exec(plan->cuda) : NULL;
}

void usbeam_rf2iq_plan_taps(const usbeam_rf2iq_plan *plan, const double **taps_re,
                            const double **taps_im, size_t *n_taps)
{
    if (taps_re) *taps_re = plan ? plan->taps_re : NULL;
    if (taps_im) *taps_im = plan ? plan->taps_im : NULL;
    if (n_taps) *n_taps = plan ? plan->n_taps : 0;
}

void usbeam_rf2iq_plan_destroy(usbeam_rf2iq_plan *plan)
{
    if (!plan) return;
    usbeam_rf2iq_cuda_destroy(plan->cuda);
    usbeam_free(plan->phasor_re);
    usbeam_free(plan->phasor_im);
    usbeam_free(plan->taps_re);
    usbeam_free(plan->taps_im);
    usbeam_free(plan->modulated_re);
    usbeam_free(plan->modulated_im);
    usbeam_free(plan->scratch);
    usbeam_free(plan);
}

/* Allocate n doubles, failing with a message naming what when the size is absurd. */
static usbeam_status alloc_doubles(size_t n, const char *what, double **out)
{
    size_t bytes;
    if (usbeam_mul_size(n, sizeof(double), &bytes) != 0 || bytes > USBEAM_MAX_ALLOCATION)
        return usbeam_fail(USBEAM_ERR_SIZE_OVERFLOW, "%s: %zu values is too large", what, n);
    *out = usbeam_alloc(bytes);
    if (!*out) return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "%s: cannot allocate %zu bytes", what, bytes);
    return USBEAM_OK;
}

/* Initial state of the transposed direct-form II recursion that makes the filter's response
 * to a constant input start in steady state (scipy.signal.lfilter_zi): with a unit step the
 * output settles at H(1) = sum(b)/sum(a) and the delays at z_k = sum_{j>k} (b_j - a_j H(1)). */
static void step_initial_state(const double *b, const double *a, int order, double *state)
{
    double sum_b = 0.0, sum_a = 0.0;
    for (int k = 0; k <= order; ++k) {
        sum_b += b[k];
        sum_a += a[k];
    }
    double dc_gain = sum_b / sum_a;
    double acc = 0.0;
    for (int k = order; k >= 1; --k) {
        acc += b[k] - a[k] * dc_gain;
        state[k - 1] = acc;
    }
}

static usbeam_status validate(const usbeam_rf2iq_params *p)
{
    usbeam_status st;
    if (p->n_lines == 0) return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "rf: n_lines is 0 (empty input)");
    if (p->n_samples == 0) return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "rf: n_samples is 0 (empty input)");
    if (p->input_dtype != USBEAM_DTYPE_INT16 && p->input_dtype != USBEAM_DTYPE_FLOAT32 &&
        p->input_dtype != USBEAM_DTYPE_FLOAT64)
        return usbeam_fail(USBEAM_ERR_INVALID_DTYPE, "rf: dtype must be int16, float32 or float64 (code %d)",
                           (int)p->input_dtype);
    if ((st = usbeam_check_positive("fs", p->fs)) != USBEAM_OK) return st;
    if ((st = usbeam_check_positive("fc", p->fc)) != USBEAM_OK) return st;
    if ((st = usbeam_check_finite("t0", p->t0)) != USBEAM_OK) return st;
    if (p->decimation < 1) return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "decimation must be >= 1 (got 0)");
    size_t total;
    if (usbeam_mul_size(p->n_lines, p->n_samples, &total) != 0)
        return usbeam_fail(USBEAM_ERR_SIZE_OVERFLOW, "rf: %zu lines x %zu samples overflows", p->n_lines,
                           p->n_samples);
    switch (p->filter) {
    case USBEAM_RF2IQ_BUTTER:
        if (p->order < 1 || p->order > USBEAM_RF2IQ_MAX_ORDER)
            return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "order must be in 1..%d (got %d)",
                               USBEAM_RF2IQ_MAX_ORDER, p->order);
        if (!(p->wn > 0.0 && p->wn < 1.0))
            return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT,
                               "Wn (normalised cutoff, 1 = fs/2) must be in (0, 1) (got %g)", p->wn);
        if (p->n_samples <= (size_t)(3 * (p->order + 1)))
            return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT,
                               "n_samples (%zu) must exceed 3*(order+1) = %d for the filtfilt edge padding",
                               p->n_samples, 3 * (p->order + 1));
        break;
    case USBEAM_RF2IQ_KAISER:
        break; /* usbeam_kaiser_lowpass checks cutoff, transition_width and attenuation */
    case USBEAM_RF2IQ_TAPS:
        if (p->n_taps == 0 || !p->taps_re) return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "taps: empty");
        if (p->n_taps > USBEAM_RF2IQ_MAX_TAPS)
            return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "taps: %zu taps, at most %zu", p->n_taps,
                               USBEAM_RF2IQ_MAX_TAPS);
        for (size_t k = 0; k < p->n_taps; ++k)
            if (!isfinite(p->taps_re[k]) || (p->taps_im && !isfinite(p->taps_im[k])))
                return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "taps: tap %zu is not finite", k);
        break;
    default:
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "filter: unknown kind %d", (int)p->filter);
    }
    return USBEAM_OK;
}

/* Copy (or design) the FIR taps and prepare their reversed, modulated copy for execute. */
static usbeam_status setup_fir(usbeam_rf2iq_plan *plan, const usbeam_rf2iq_params *p)
{
    usbeam_status st;
    size_t n = p->n_taps;
    int complex_taps = p->filter == USBEAM_RF2IQ_TAPS && p->taps_im != NULL;
    if (p->filter == USBEAM_RF2IQ_KAISER) {
        st = usbeam_kaiser_lowpass(p->fs, p->cutoff, p->transition_width, p->attenuation, NULL, 0, &n);
        if (st != USBEAM_OK) return st;
    }
    if ((st = alloc_doubles(n, "taps", &plan->taps_re)) != USBEAM_OK) return st;
    if ((st = alloc_doubles(n, "taps", &plan->modulated_re)) != USBEAM_OK) return st;
    if ((st = alloc_doubles(n, "taps", &plan->modulated_im)) != USBEAM_OK) return st;
    if (complex_taps && (st = alloc_doubles(n, "taps", &plan->taps_im)) != USBEAM_OK) return st;
    if (p->filter == USBEAM_RF2IQ_KAISER) {
        st = usbeam_kaiser_lowpass(p->fs, p->cutoff, p->transition_width, p->attenuation, plan->taps_re, n, &n);
        if (st != USBEAM_OK) return st;
    } else {
        memcpy(plan->taps_re, p->taps_re, n * sizeof(double));
        if (complex_taps) memcpy(plan->taps_im, p->taps_im, n * sizeof(double));
    }
    const double lead = (double)(n - 1 - (n - 1) / 2);
    for (size_t j = 0; j < n; ++j) {
        double h_re = plan->taps_re[n - 1 - j], h_im = complex_taps ? plan->taps_im[n - 1 - j] : 0.0;
        double angle = -2.0 * PI_DOUBLE * p->fc * ((double)j - lead) / p->fs;
        double c = cos(angle), s = sin(angle);
        plan->modulated_re[j] = h_re * c - h_im * s;
        plan->modulated_im[j] = h_re * s + h_im * c;
    }
    plan->n_taps = n;
    plan->params.taps_re = plan->taps_re;
    plan->params.taps_im = plan->taps_im;
    plan->params.n_taps = n;
    return USBEAM_OK;
}

usbeam_status usbeam_rf2iq_plan_create(const usbeam_rf2iq_params *params, usbeam_backend backend,
                                       usbeam_rf2iq_plan **plan)
{
    usbeam_status st;
    if (!params || !plan) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "params and plan must not be NULL");
    *plan = NULL;
    if (backend != USBEAM_BACKEND_CPU && backend != USBEAM_BACKEND_CUDA)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "backend: unknown value %d", (int)backend);
    if ((st = validate(params)) != USBEAM_OK) return st;

    usbeam_rf2iq_plan *p = usbeam_alloc(sizeof *p);
    if (!p) return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "rf2iq plan");
    p->params = *params;
    p->params.taps_re = p->params.taps_im = NULL;
    const size_t n = params->n_samples;
    p->n_out = (n - 1) / params->decimation + 1;

    if ((st = alloc_doubles(n, "phasor table", &p->phasor_re)) != USBEAM_OK) goto fail;
    if ((st = alloc_doubles(n, "phasor table", &p->phasor_im)) != USBEAM_OK) goto fail;
    for (size_t m = 0; m < n; ++m) {
        double phase = 2.0 * PI_DOUBLE * params->fc * ((double)m / params->fs + params->t0);
        p->phasor_re[m] = cos(phase);
        p->phasor_im[m] = -sin(phase);
    }

    size_t line_len;
    if (params->filter == USBEAM_RF2IQ_BUTTER) {
        if ((st = usbeam_butter_lowpass(params->order, params->wn, p->b, p->a)) != USBEAM_OK) goto fail;
        step_initial_state(p->b, p->a, params->order, p->step_state);
        p->padlen = 3 * (size_t)(params->order + 1);
        line_len = n + 2 * p->padlen;
    } else {
        if ((st = setup_fir(p, params)) != USBEAM_OK) goto fail;
        line_len = n + p->n_taps - 1;
        if (line_len < n) {
            st = usbeam_fail(USBEAM_ERR_SIZE_OVERFLOW, "taps: too many");
            goto fail;
        }
    }

    const int butter = params->filter == USBEAM_RF2IQ_BUTTER;
    const size_t work_items = butter ? (params->n_lines + BUTTER_LINES - 1) / BUTTER_LINES : params->n_lines;
    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    if ((size_t)threads > work_items) threads = (int)work_items;
    if (threads < 1) threads = 1;
    p->n_threads = threads;
    p->scratch_len = line_len;
    size_t scratch_count;
    if (usbeam_mul_size(line_len, butter ? BUTTER_CHANNELS : 1, &p->scratch_per_thread) != 0 ||
        usbeam_mul_size(p->scratch_per_thread, (size_t)threads, &scratch_count) != 0) {
        st = usbeam_fail(USBEAM_ERR_SIZE_OVERFLOW, "rf: scratch line of %zu samples is too large", line_len);
        goto fail;
    }
    if (backend == USBEAM_BACKEND_CPU && (st = alloc_doubles(scratch_count, "scratch", &p->scratch)) != USBEAM_OK)
        goto fail; /* a CUDA plan's work space is on the device */
    if (backend == USBEAM_BACKEND_CUDA) {
        const usbeam_rf2iq_tables tables = {p->phasor_re, p->phasor_im, p->n_out, p->b, p->a, p->step_state,
                                            p->padlen, p->modulated_re, p->modulated_im, p->n_taps,
                                            p->n_taps - 1 - (p->n_taps - 1) / 2};
        if ((st = usbeam_rf2iq_cuda_create(&p->params, &tables, &p->cuda)) != USBEAM_OK) goto fail;
    }
    *plan = p;
    return USBEAM_OK;
fail:
    usbeam_rf2iq_plan_destroy(p);
    return st;
}

/* x[m] = RF[m] * phasor[m] into re[m*stride], im[m*stride]; the RF line is read as double.
 * Returns 1 when the line holds a NaN or an inf. */
static int mix_line(const usbeam_rf2iq_plan *plan, const void *in, size_t line, double *re, double *im,
                    size_t stride)
{
    int nonfinite = 0; /* x - x is 0 only for finite x */
    const size_t n = plan->params.n_samples;
    const double *pr = plan->phasor_re, *pi = plan->phasor_im;
    switch (plan->params.input_dtype) {
    case USBEAM_DTYPE_INT16: {
        const int16_t *rf = (const int16_t *)in + line * n;
        for (size_t m = 0; m < n; ++m) {
            re[m * stride] = rf[m] * pr[m];
            im[m * stride] = rf[m] * pi[m];
        }
        break;
    }
    case USBEAM_DTYPE_FLOAT32: {
        const float *rf = (const float *)in + line * n;
        for (size_t m = 0; m < n; ++m) {
            re[m * stride] = (double)rf[m] * pr[m];
            im[m * stride] = (double)rf[m] * pi[m];
            nonfinite |= !(rf[m] - rf[m] == 0.0f);
        }
        break;
    }
    default: {
        const double *rf = (const double *)in + line * n;
        for (size_t m = 0; m < n; ++m) {
            re[m * stride] = rf[m] * pr[m];
            im[m * stride] = rf[m] * pi[m];
            nonfinite |= !(rf[m] - rf[m] == 0.0);
        }
        break;
    }
    }
    return nonfinite;
}

/* One pass of the recursion (transposed direct form II, as scipy.signal.lfilter) over the
 * count samples of x (BUTTER_CHANNELS channels per sample), in place, forward (step +1 from
 * sample 0) or backward (step -1 from sample count-1); each channel's state starts at
 * step_state times its first sample (filtfilt's initial conditions). */
static void iir_pass(const usbeam_rf2iq_plan *plan, double *x, size_t count, int forward)
{
    enum { C = BUTTER_CHANNELS };
    const int order = plan->params.order;
    const double *b = plan->b, *a = plan->a;
    double z[USBEAM_RF2IQ_MAX_ORDER][C], y[C];
    const ptrdiff_t step = forward ? C : -C;
    double *xs = forward ? x : x + (count - 1) * C;
    for (int k = 0; k < order; ++k)
        for (int c = 0; c < C; ++c) z[k][c] = plan->step_state[k] * xs[c];
    for (size_t s = 0; s < count; ++s, xs += step) {
        for (int c = 0; c < C; ++c) y[c] = b[0] * xs[c] + z[0][c];
        for (int k = 0; k < order - 1; ++k)
            for (int c = 0; c < C; ++c) z[k][c] = z[k + 1][c] + b[k + 1] * xs[c] - a[k + 1] * y[c];
        for (int c = 0; c < C; ++c) z[order - 1][c] = b[order] * xs[c] - a[order] * y[c];
        for (int c = 0; c < C; ++c) xs[c] = y[c];
    }
}

/* Lines first .. first+BUTTER_LINES-1 (fewer at the end: the spare channels run on zeros).
 * Returns 1 when one of them holds a NaN or an inf. */
static int butter_lines(const usbeam_rf2iq_plan *plan, const void *in, size_t first, double *x, void *out)
{
    int bad = 0;
    enum { C = BUTTER_CHANNELS };
    const size_t n = plan->params.n_samples, pad = plan->padlen, total = n + 2 * pad;
    const size_t n_lines = plan->params.n_lines;
    const size_t lines = n_lines - first < BUTTER_LINES ? n_lines - first : BUTTER_LINES;
    if (lines < BUTTER_LINES) memset(x, 0, total * C * sizeof(double));
    for (size_t l = 0; l < lines; ++l) {
        double *re = x + 2 * l, *im = re + 1;
        bad |= mix_line(plan, in, first + l, re + pad * C, im + pad * C, C);
        /* odd extension: reflect the line through its end points */
        for (size_t k = 1; k <= pad; ++k) {
            re[(pad - k) * C] = 2.0 * re[pad * C] - re[(pad + k) * C];
            im[(pad - k) * C] = 2.0 * im[pad * C] - im[(pad + k) * C];
            re[(pad + n - 1 + k) * C] = 2.0 * re[(pad + n - 1) * C] - re[(pad + n - 1 - k) * C];
            im[(pad + n - 1 + k) * C] = 2.0 * im[(pad + n - 1) * C] - im[(pad + n - 1 - k) * C];
        }
    }
    iir_pass(plan, x, total, 1);
    iir_pass(plan, x, total, 0);
    const size_t step = plan->params.decimation;
    for (size_t l = 0; l < lines; ++l) {
        float *iq = (float *)out + 2 * (first + l) * plan->n_out;
        const double *y = x + pad * C + 2 * l;
        for (size_t j = 0; j < plan->n_out; ++j) {
            iq[2 * j] = (float)(2.0 * y[j * step * C]);
            iq[2 * j + 1] = (float)(2.0 * y[j * step * C + 1]);
        }
    }
    return bad;
}

/* Read RF line `line` as double into rf[0..n) (int16 / float32 / float64); returns 1 when
 * it holds a NaN or an inf. */
static int load_line(const usbeam_rf2iq_plan *plan, const void *in, size_t line, double *rf)
{
    const size_t n = plan->params.n_samples;
    int nonfinite = 0; /* x - x is 0 only for finite x */
    switch (plan->params.input_dtype) {
    case USBEAM_DTYPE_INT16: {
        const int16_t *src = (const int16_t *)in + line * n;
        for (size_t m = 0; m < n; ++m) rf[m] = src[m];
        break;
    }
    case USBEAM_DTYPE_FLOAT32: {
        const float *src = (const float *)in + line * n;
#pragma omp simd reduction(| : nonfinite)
        for (size_t m = 0; m < n; ++m) {
            const float v = src[m];
            rf[m] = v;
            nonfinite |= !(v - v == 0.0f);
        }
        break;
    }
    default: {
        const double *src = (const double *)in + line * n;
#pragma omp simd reduction(| : nonfinite)
        for (size_t m = 0; m < n; ++m) {
            const double v = src[m];
            rf[m] = v;
            nonfinite |= !(v - v == 0.0);
        }
        break;
    }
    }
    return nonfinite;
}

/* out = 2 * phasor[m] * (re + j im), as complex64 */
static inline void store_rotated(const usbeam_rf2iq_plan *plan, size_t m, double re, double im, float *out)
{
    const double pr = plan->phasor_re[m], pi = plan->phasor_im[m];
    out[0] = (float)(2.0 * (re * pr - im * pi));
    out[1] = (float)(2.0 * (re * pi + im * pr));
}

/* Returns 1 when the line holds a NaN or an inf. */
static int fir_line(const usbeam_rf2iq_plan *plan, const void *in, size_t line, double *rf, float *out)
{
    const size_t n = plan->params.n_samples, taps = plan->n_taps;
    const size_t centre = (taps - 1) / 2, lead = taps - 1 - centre; /* zeros before / after */
    memset(rf, 0, lead * sizeof(double));
    const int bad = load_line(plan, in, line, rf + lead);
    memset(rf + lead + n, 0, centre * sizeof(double));
    /* (h * x)[m] = sum_k h[k] x[m + c - k] = phasor[m] sum_j q[j] rfpad[m + j] */
    const double *qr = plan->modulated_re, *qi = plan->modulated_im;
    const size_t step = plan->params.decimation;
    /* Two outputs per pass over the taps: each tap is loaded once for both. */
    size_t j = 0;
    for (; j + 1 < plan->n_out; j += 2) {
        const double *r0 = rf + j * step, *r1 = r0 + step;
        double re0 = 0.0, im0 = 0.0, re1 = 0.0, im1 = 0.0;
#pragma omp simd reduction(+ : re0, im0, re1, im1)
        for (size_t k = 0; k < taps; ++k) {
            re0 += qr[k] * r0[k];
            im0 += qi[k] * r0[k];
            re1 += qr[k] * r1[k];
            im1 += qi[k] * r1[k];
        }
        store_rotated(plan, j * step, re0, im0, out + 2 * j);
        store_rotated(plan, (j + 1) * step, re1, im1, out + 2 * j + 2);
    }
    if (j < plan->n_out) {
        const double *r0 = rf + j * step;
        double re0 = 0.0, im0 = 0.0;
#pragma omp simd reduction(+ : re0, im0)
        for (size_t k = 0; k < taps; ++k) {
            re0 += qr[k] * r0[k];
            im0 += qi[k] * r0[k];
        }
        store_rotated(plan, j * step, re0, im0, out + 2 * j);
    }
    return bad;
}

usbeam_status usbeam_rf2iq_execute(usbeam_rf2iq_plan *plan, const void *in, void *out)
{
    if (!plan || !in || !out) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "plan, in and out must not be NULL");
    if (plan->cuda) return usbeam_rf2iq_cuda_execute(plan->cuda, in, out); /* device pointers */
    const size_t n_lines = plan->params.n_lines;
    const int butter = plan->params.filter == USBEAM_RF2IQ_BUTTER;
    const ptrdiff_t n_items = (ptrdiff_t)(butter ? (n_lines + BUTTER_LINES - 1) / BUTTER_LINES : n_lines);
    int bad = 0;
    usbeam_interrupt interrupt; /* Ctrl-C between lines (common/interrupt.h) */
    usbeam_interrupt_begin(&interrupt);
#pragma omp parallel num_threads(usbeam_team_size(plan->n_threads)) reduction(| : bad)
    {
        int tid = 0;
#ifdef _OPENMP
        tid = omp_get_thread_num();
#endif
        double *scratch = plan->scratch + (size_t)tid * plan->scratch_per_thread;
#pragma omp for schedule(static)
        for (ptrdiff_t item = 0; item < n_items; ++item) {
            if (usbeam_interrupt_poll(&interrupt)) continue;
            if (butter)
                bad |= butter_lines(plan, in, (size_t)item * BUTTER_LINES, scratch, out);
            else
                bad |= fir_line(plan, in, (size_t)item, scratch, (float *)out + 2 * (size_t)item * plan->n_out);
        }
    }
    const usbeam_status st = usbeam_interrupt_end(&interrupt);
    if (bad || st != USBEAM_OK) {
        usbeam_fill_nan(out, 2 * n_lines * plan->n_out);
        if (st != USBEAM_OK) return st;
        return usbeam_fail_nonfinite("rf", "rf2iq refuses them; out is filled with NaN");
    }
    return USBEAM_OK;
}
