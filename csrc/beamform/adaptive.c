/*
 * adaptive.c - adaptive beamformers for line arrays (linear, phased, convex), CPU reference:
 * coherence factor and
 * generalised coherence factor weighting DAS, delay-multiply-and-sum and its filtered form,
 * p-DAS, and minimum variance (Capon) with subarray averaging, diagonal loading and temporal
 * averaging (usbeam.h, family adaptive; per-point math in adaptive_math.h, shared with
 * cuda/adaptive.cu).
 *
 * Delays, receive apertures, windows and interpolation weights are DAS's: the plan holds a
 * CPU DAS plan built from params->das (one frame, no receive table: only its geometry is
 * used) and reads its per-(point, transmit, element) entries (das_internal.h), tabulated at
 * plan creation when they fit params->das.max_table_bytes (usbeam_das_entry_table_create),
 * else recomputed per point (usbeam_das_point_entries).
 *
 * Geometry: the methods treat a point's receive aperture as a row of neighbouring elements
 * (CF's N, GCF's spatial DFT across it, MV's subarrays sliding along it), so the plan takes
 * line arrays whose elements are listed in order along the array (x strictly monotonic) and
 * whose apertures are contiguous runs of elements: always on a linear array; on a convex
 * array (element normals, das.element_normals) each element's cone |lateral| <= axial / (2F)
 * holds a point for an interval of element angles around the point's own angle (the margin
 * r cos(d) - R - 2F r |sin(d)| falls with |d|, d the angle from element to point seen from
 * the centre of curvature), so the DAS plan's [aperture_first, + aperture_count) range holds
 * only elements that see the point.  The plan checks that run for every point (an element
 * inside it outside its cone would enter CF/GCF/MV as a zero signal and bias them) and
 * refuses matrix arrays (das.surface: a 2-D aperture has no such row).
 *
 * Layouts: in (n_frames, n_transmits, n_elements, n_samples) int16 / float32 RF or complex64
 * IQ; out (n_frames, n_points) float32 (RF) or complex64 (IQ).  Per point: v (n_offsets,
 * aperture) complex double, n_offsets = 2K + 1 sample offsets around the delay (K = MV's
 * temporal averaging or F-DMAS's filter half-length, else 0).
 * F-DMAS filter (Matrone et al., IEEE TMI 34(4) 2015: DMAS then a band-pass around 2 fc): a
 * Hann-windowed-sinc FIR of 2K + 1 taps on the time axis of the DMAS output at fs, pass band
 * [fdmas_low, fdmas_high] (RF; the upper edge capped at fs/2) or, for IQ, the same band
 * shifted down by 2 fc (the analytic DMAS output at baseband, edges capped at +-fs/2), scaled
 * to unit gain at 2 fc.  Output at the point's own time: out = sum_k g[-k] y_dmas(k).
 */
#include "beamform/adaptive_internal.h"
#include "common/interrupt.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

static double sinc_pi(double x) { return x == 0.0 ? 1.0 : sin(USBEAM_PI * x) / (USBEAM_PI * x); }

/* F-DMAS taps g[k], k = -K..K, applied as out = sum_k g[-k] y(k): stored reversed, so
 * fir_re/fir_im[o] multiplies y at offset o - K. */
static usbeam_status design_fdmas(usbeam_adaptive_plan *plan)
{
    const usbeam_adaptive_params *prm = &plan->params;
    const int K = (int)prm->fdmas_half_taps;
    const double fs = prm->das.fs, fc = prm->das.fc, nyquist = 0.5 * fs;
    double lo = prm->fdmas_low, hi = prm->fdmas_high, ref;
    if (plan->is_iq) { /* baseband: frequencies relative to 2 fc */
        lo = lo - 2.0 * fc < -nyquist ? -nyquist : lo - 2.0 * fc;
        hi = hi - 2.0 * fc > nyquist ? nyquist : hi - 2.0 * fc;
        ref = 0.0;
    } else {
        if (!(lo < nyquist))
            return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "fdmas_low (%g Hz) must be below fs/2 (%g Hz)", lo, nyquist);
        if (!(2.0 * fc <= nyquist))
            return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT,
                               "method fdmas on RF needs fs >= 4 fc (the DMAS spectrum sits at 2 fc = %g Hz, above fs/2 = %g Hz): "
                               "sample faster or beamform IQ", 2.0 * fc, nyquist);
        hi = hi > nyquist ? nyquist : hi;
        ref = 2.0 * fc;
    }
    if (!(lo < hi))
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "fdmas_low/fdmas_high: no pass band left within +-fs/2 (%g..%g Hz)", lo, hi);
    const double centre = 0.5 * (lo + hi), half = 0.5 * (hi - lo);
    double gain_re = 0.0, gain_im = 0.0;
    for (int k = -K; k <= K; ++k) {
        const double hann = 0.5 * (1.0 + cos(USBEAM_PI * k / (K + 1.0)));
        const double lowpass = hann * 2.0 * half / fs * sinc_pi(2.0 * half * k / fs);
        /* a real band-pass for RF (cos: both signs of frequency), a complex shift for IQ */
        const double phase = 2.0 * USBEAM_PI * centre * k / fs;
        const double g_re = plan->is_iq ? lowpass * cos(phase) : 2.0 * lowpass * cos(phase);
        const double g_im = plan->is_iq ? lowpass * sin(phase) : 0.0;
        plan->fir_design[k + K] = g_re;
        plan->fir_design[plan->n_offsets + k + K] = g_im;
        const double turn = -2.0 * USBEAM_PI * ref * k / fs; /* G(ref) = sum g[k] e^{-j 2 pi ref k / fs} */
        gain_re += g_re * cos(turn) - g_im * sin(turn);
        gain_im += g_re * sin(turn) + g_im * cos(turn);
    }
    const double gain = sqrt(gain_re * gain_re + gain_im * gain_im);
    if (!(gain > 1e-3))
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "fdmas_low/fdmas_high: the pass band does not contain 2 fc (%g Hz)", 2.0 * fc);
    for (int k = -K; k <= K; ++k) { /* unit gain at 2 fc; reversed for out = sum g[-k] y(k) */
        plan->fir_design[k + K] /= gain;
        plan->fir_design[plan->n_offsets + k + K] /= gain;
    }
    for (int o = 0; o < plan->n_offsets; ++o) {
        plan->fir_re[o] = plan->fir_design[plan->n_offsets - 1 - o];
        plan->fir_im[o] = plan->fir_design[2 * plan->n_offsets - 1 - o];
    }
    return USBEAM_OK;
}

/* The receive aperture of every point is a contiguous run of elements that all see it (file
 * comment): on the general geometry (element normals) with an f-number aperture, every
 * element of [aperture_first, + aperture_count) must have the point in its cone. */
static usbeam_status check_contiguous_apertures(const usbeam_das_plan *d)
{
    const usbeam_das_params *prm = &d->params;
    if (!d->general || !(prm->f_number > 0.0)) return USBEAM_OK;
    const size_t n = prm->n_elements;
    const ptrdiff_t n_points = (ptrdiff_t)prm->n_points;
    ptrdiff_t bad = n_points;
#pragma omp parallel for schedule(static) reduction(min : bad)
    for (ptrdiff_t p = 0; p < n_points; ++p) {
        const double *pt = d->points + 3 * p;
        const int first = d->aperture_first[p], count = d->aperture_count[p];
        for (int e = first; e < first + count; ++e) {
            double frame[9];
            for (int q = 0; q < 9; ++q) frame[q] = d->element_frame[(size_t)q * n + (size_t)e];
            if (!usbeam_element_in_aperture(frame, prm->surface, prm->f_number, pt[0] - d->element_x[e],
                                            pt[1] - d->element_y[e], pt[2] - d->element_z[e])) {
                bad = p < bad ? p : bad;
                break;
            }
        }
    }
    if (bad < n_points)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT,
                           "element_normals: the receive aperture of point %td (%g, %g, %g) m is not a contiguous run of "
                           "elements (an element between its first and last does not see it): adaptive methods need "
                           "elements ordered along a line or convex array", bad, d->points[3 * bad], d->points[3 * bad + 1],
                           d->points[3 * bad + 2]);
    return USBEAM_OK;
}

static usbeam_status validate(const usbeam_adaptive_params *prm)
{
    const size_t n_el = prm->das.n_elements;
    if (prm->das.surface)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT,
                           "surface: adaptive methods take line arrays (linear, phased, convex); a matrix array's 2-D "
                           "aperture is no row of neighbouring elements for CF/GCF/MV");
    if (prm->das.element_positions && n_el > 1) { /* elements in order along the array */
        const double *pos = prm->das.element_positions;
        const double direction = pos[3] - pos[0];
        for (size_t e = 1; e < n_el; ++e)
            if (!((pos[3 * e] - pos[3 * (e - 1)]) * direction > 0.0))
                return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT,
                                   "element_positions: adaptive methods need the elements listed in order along the "
                                   "array (x strictly increasing or decreasing; elements %zu and %zu are not)", e - 1, e);
    }
    switch (prm->method) {
    case USBEAM_ADAPTIVE_CF:
    case USBEAM_ADAPTIVE_DMAS:
        break;
    case USBEAM_ADAPTIVE_GCF:
        if (2 * prm->gcf_m0 >= n_el)
            return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "gcf_m0 (%zu) must be < n_elements / 2 (%zu elements)", prm->gcf_m0, n_el);
        break;
    case USBEAM_ADAPTIVE_PDAS:
        if (!(prm->p >= 1.0) || !isfinite(prm->p))
            return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "p must be a finite number >= 1 (got %g)", prm->p);
        break;
    case USBEAM_ADAPTIVE_FDMAS:
        if (prm->fdmas_half_taps < 1 || prm->fdmas_half_taps > 4096)
            return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "fdmas_half_taps must be in [1, 4096] (got %zu)", prm->fdmas_half_taps);
        if (!(prm->fdmas_low > 0.0) || !(prm->fdmas_high > prm->fdmas_low) || !isfinite(prm->fdmas_high))
            return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "fdmas_low/fdmas_high must satisfy 0 < low < high < inf (got %g, %g)",
                               prm->fdmas_low, prm->fdmas_high);
        break;
    case USBEAM_ADAPTIVE_MV:
        if (prm->subarray_fraction != 0.0) {
            if (!(prm->subarray_fraction > 0.0 && prm->subarray_fraction <= 1.0))
                return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "subarray_fraction must be in (0, 1] (got %g)", prm->subarray_fraction);
        } else if (prm->subarray_length < 1 || prm->subarray_length > n_el) {
            return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT,
                               "subarray_length (%zu) must be in [1, n_elements]: the aperture has %zu elements",
                               prm->subarray_length, n_el);
        }
        if (!(prm->diagonal_loading >= 0.0) || !isfinite(prm->diagonal_loading))
            return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "diagonal_loading must be finite and >= 0 (got %g)", prm->diagonal_loading);
        if (prm->temporal_averaging > 4096)
            return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "temporal_averaging must be <= 4096 samples (got %zu)", prm->temporal_averaging);
        break;
    default:
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "method: unknown value %d", (int)prm->method);
    }
    if (n_el > 65536) return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "n_elements must be <= 65536 for adaptive methods");
    return USBEAM_OK;
}

void usbeam_adaptive_plan_destroy(usbeam_adaptive_plan *plan)
{
    if (!plan) return;
    usbeam_adaptive_cuda_destroy(plan->cuda);
    usbeam_das_plan_destroy(plan->das);
    usbeam_free(plan->fir_design);
    usbeam_free(plan->fir_re);
    usbeam_free(plan->fir_im);
    usbeam_free(plan->scratch);
    usbeam_das_entry_table_free(&plan->entries);
    usbeam_free(plan->thread_tap);
    usbeam_free(plan->thread_weight);
    usbeam_free(plan);
}

const double *usbeam_adaptive_fdmas_taps(const usbeam_adaptive_plan *plan, size_t *n_taps)
{
    if (n_taps) *n_taps = plan && plan->fir_design ? (size_t)plan->n_offsets : 0;
    return plan ? plan->fir_design : NULL;
}

usbeam_cuda_exec *usbeam_adaptive_plan_cuda(usbeam_adaptive_plan *plan)
{
    return plan && plan->cuda ? usbeam_adaptive_cuda_exec(plan->cuda) : NULL;
}

usbeam_status usbeam_adaptive_plan_create(const usbeam_adaptive_params *params, usbeam_backend backend,
                                          usbeam_adaptive_plan **plan_out)
{
    usbeam_status st;
    if (!params || !plan_out) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "params and plan must not be NULL");
    *plan_out = NULL;
    if (backend != USBEAM_BACKEND_CPU && backend != USBEAM_BACKEND_CUDA)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "backend: unknown value %d", (int)backend);
    if ((st = validate(params)) != USBEAM_OK) return st;
    usbeam_adaptive_plan *plan = usbeam_alloc(sizeof *plan);
    if (!plan) return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "adaptive plan");
    plan->params = *params;
    plan->params.das.element_positions = NULL;
    plan->params.das.element_normals = NULL;
    plan->params.das.transmits = NULL;
    plan->params.das.points = NULL;
    usbeam_das_params das = params->das;
    das.n_frames = 1; /* the DAS plan serves geometry and entries only */
    das.max_table_bytes = 1; /* its receive table (DAS execute's) would go unused */
    if ((st = usbeam_das_plan_create(&das, USBEAM_BACKEND_CPU, &plan->das)) != USBEAM_OK) goto fail;
    const usbeam_das_plan *d = plan->das;
    if ((st = check_contiguous_apertures(d)) != USBEAM_OK) goto fail;
    if ((st = usbeam_das_entry_table_create(d, params->das.max_table_bytes, &plan->entries)) != USBEAM_OK) goto fail;
    const int has_table = plan->entries.tap != NULL;
    plan->is_iq = d->is_iq;
    plan->kind = das.input_dtype == USBEAM_DTYPE_INT16 ? USBEAM_ADAPTIVE_INT16
                 : das.input_dtype == USBEAM_DTYPE_FLOAT32 ? USBEAM_ADAPTIVE_FLOAT32 : USBEAM_ADAPTIVE_COMPLEX64;
    const size_t half = params->method == USBEAM_ADAPTIVE_MV ? params->temporal_averaging
                        : params->method == USBEAM_ADAPTIVE_FDMAS ? params->fdmas_half_taps : 0;
    plan->n_offsets = 2 * (int)half + 1;
    plan->centre = (int)half;
    int widest = 0, widest_l = 1;
    for (size_t p = 0; p < das.n_points; ++p) {
        const int count = d->aperture_count[p];
        widest = count > widest ? count : widest;
        const int L = usbeam_adaptive_subarray(&plan->params, count);
        widest_l = L > widest_l ? L : widest_l;
    }
    plan->widest = widest;
    plan->widest_subarray = widest_l;
    if (params->method == USBEAM_ADAPTIVE_FDMAS) {
        if (!(plan->fir_design = usbeam_alloc(2 * (size_t)plan->n_offsets * sizeof(double))) ||
            !(plan->fir_re = usbeam_alloc((size_t)plan->n_offsets * sizeof(double))) ||
            !(plan->fir_im = usbeam_alloc((size_t)plan->n_offsets * sizeof(double)))) {
            st = usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "fdmas filter");
            goto fail;
        }
        if ((st = design_fdmas(plan)) != USBEAM_OK) goto fail;
    }
    /* scratch per thread (complex doubles): v (n_offsets x widest), then MV's R (L x L) and u (L)
     * or GCF's twiddles (widest) */
    plan->thread_values = (size_t)plan->n_offsets * (size_t)(widest > 0 ? widest : 1) +
                          (params->method == USBEAM_ADAPTIVE_MV ? (size_t)widest_l * (size_t)(widest_l + 1)
                           : params->method == USBEAM_ADAPTIVE_GCF ? (size_t)(widest > 0 ? widest : 1) : 0);
    if (plan->thread_values > ((size_t)1 << 28)) {
        st = usbeam_fail(USBEAM_ERR_SIZE_OVERFLOW, "temporal_averaging/fdmas_half_taps x aperture is too large");
        goto fail;
    }
    if (backend == USBEAM_BACKEND_CUDA) {
        if (!has_table) {
            st = usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT,
                             "max_table_bytes: the CUDA adaptive plan needs the delay table (%zu entries), which exceeds the budget",
                             plan->entries.n_entries);
            goto fail;
        }
        const usbeam_adaptive_tables tables = {&plan->params, plan->kind, plan->is_iq, d->taps,
                                               plan->n_offsets, plan->centre, plan->widest, plan->widest_subarray,
                                               d->aperture_first, d->aperture_count, plan->entries.offset,
                                               plan->entries.n_entries, plan->entries.tap, plan->entries.weight,
                                               plan->fir_re, plan->fir_im};
        if ((st = usbeam_adaptive_cuda_create(&tables, &plan->cuda)) != USBEAM_OK) goto fail;
        usbeam_das_plan_destroy(plan->das); /* the twin has its copies */
        plan->das = NULL;
        usbeam_das_entry_table_free(&plan->entries);
        *plan_out = plan;
        return USBEAM_OK;
    }
#ifdef _OPENMP
    plan->n_threads = omp_get_max_threads();
#else
    plan->n_threads = 1;
#endif
    if (!(plan->scratch = usbeam_alloc((size_t)plan->n_threads * plan->thread_values * sizeof(usbeam_adaptive_cplx)))) {
        st = usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "adaptive scratch");
        goto fail;
    }
    if (!has_table) {
        const size_t per = d->max_point_entries ? d->max_point_entries : 1;
        if (!(plan->thread_tap = usbeam_alloc((size_t)plan->n_threads * per * sizeof(int32_t))) ||
            !(plan->thread_weight = usbeam_alloc((size_t)plan->n_threads * per * (size_t)d->weight_stride * sizeof(float)))) {
            st = usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "per-thread delays");
            goto fail;
        }
    }
    *plan_out = plan;
    return USBEAM_OK;
fail:
    usbeam_adaptive_plan_destroy(plan);
    return st;
}

usbeam_status usbeam_adaptive_execute(usbeam_adaptive_plan *plan, size_t n_frames, const void *in, void *out)
{
    if (!plan || !in || !out) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "plan, in and out must not be NULL");
    const usbeam_das_params *das = &plan->params.das;
    if (n_frames < 1 || n_frames > das->n_frames)
        return usbeam_fail(USBEAM_ERR_INVALID_SHAPE, "n_frames (%zu) must be in [1, %zu] (the plan's capacity)", n_frames, das->n_frames);
    if (plan->cuda) return usbeam_adaptive_cuda_execute(plan->cuda, n_frames, in, out);
    const usbeam_das_plan *d = plan->das;
    const size_t frame_values = das->n_transmits * das->n_elements * das->n_samples;
    if (plan->kind != USBEAM_ADAPTIVE_INT16 &&
        usbeam_count_nonfinite(in, das->input_dtype, n_frames * frame_values) != 0)
        return usbeam_fail_nonfinite("data", "adaptive beamforming");
    const size_t sample_bytes = plan->kind == USBEAM_ADAPTIVE_INT16 ? 2 : (plan->kind == USBEAM_ADAPTIVE_FLOAT32 ? 4 : 8);
    const ptrdiff_t n_points = (ptrdiff_t)das->n_points;
    const size_t per = d->max_point_entries ? d->max_point_entries : 1;
    /* Ctrl-C between points (common/interrupt.h): a point of MV costs microseconds to
     * milliseconds, so a poll per point is cheap and a long image stops within one point */
    usbeam_interrupt interrupt;
    usbeam_interrupt_begin(&interrupt);
    /* a team no larger than the plan's: the scratch holds plan->n_threads threads' parts, and a
     * caller with a higher limit than the thread that made the plan had (usbeam_set_thread_limit)
     * would otherwise run threads past them */
#pragma omp parallel num_threads(usbeam_team_size(plan->n_threads))
    {
#ifdef _OPENMP
        const int thread = omp_get_thread_num();
#else
        const int thread = 0;
#endif
        usbeam_adaptive_cplx *scratch = plan->scratch + (size_t)thread * plan->thread_values;
        int32_t *tap_buf = plan->thread_tap ? plan->thread_tap + (size_t)thread * per : NULL;
        float *weight_buf = plan->thread_weight ? plan->thread_weight + (size_t)thread * per * (size_t)d->weight_stride : NULL;
#pragma omp for schedule(dynamic, 16)
        for (ptrdiff_t p = 0; p < n_points; ++p) {
            if (usbeam_interrupt_poll(&interrupt)) continue;
            const int32_t *tap;
            const float *weight;
            if (plan->entries.tap) {
                tap = plan->entries.tap + plan->entries.offset[p];
                weight = plan->entries.weight + plan->entries.offset[p] * (size_t)d->weight_stride;
            } else {
                usbeam_das_point_entries(d, (size_t)p, tap_buf, weight_buf);
                tap = tap_buf;
                weight = weight_buf;
            }
            for (size_t f = 0; f < n_frames; ++f) {
                const void *frame = (const char *)in + f * frame_values * sample_bytes;
                const usbeam_adaptive_cplx y =
                    usbeam_adaptive_point(&plan->params, plan->kind, plan->is_iq, d->taps, plan->n_offsets, plan->centre,
                                          d->aperture_first[p], d->aperture_count[p], tap, weight, frame, plan->fir_re,
                                          plan->fir_im, scratch);
                const size_t i = f * (size_t)n_points + (size_t)p;
                if (plan->is_iq) {
                    ((float *)out)[2 * i] = (float)y.re;
                    ((float *)out)[2 * i + 1] = (float)y.im;
                } else {
                    ((float *)out)[i] = (float)y.re;
                }
            }
        }
    }
    usbeam_status st = usbeam_interrupt_end(&interrupt);
    if (st != USBEAM_OK) usbeam_fill_nan(out, n_frames * (size_t)n_points * (plan->is_iq ? 2 : 1)); /* no partial image */
    return st;
}
