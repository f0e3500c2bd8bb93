/*
 * clutter.c - clutter (wall) filters along slow time for Doppler imaging, CPU backend: the plan
 * (parameters, scratch, the polynomial bases) and the dispatch of execute.  The filters sit
 * below it and never call back: the projection kernel shared by the polynomial and SVD filters
 * in clutter_project.c, the SVD filter in clutter_svd.c, the IIR filter in clutter_iir.c.
 *
 * Layout: in, out complex64[n_frames][n_pixels]: an ensemble of n_frames beamformed IQ frames
 *         (slow time) of n_pixels spatial samples each; out may alias in.
 * Units:  IIR cut-off and the SVD automatic criterion are fractions of the PRF.
 *
 * Methods
 * - MEAN / POLY: least-squares polynomial regression filter (Hoeks et al. 1991; Kadi &
 *   Loupas 1995): each pixel's slow-time signal x (length N) is projected onto the orthogonal
 *   complement of the polynomials of degree 0..p,  y = x - Q Q^T x,  with Q (N x (p+1)) an
 *   orthonormal basis built in double from Legendre polynomials on t in [-1, 1] and
 *   re-orthonormalised by modified Gram-Schmidt (run twice) on the discrete grid.
 * - SVD (Demené et al., IEEE TMI 2015): Casorati matrix C (n_pixels x n_frames) = U S V^H.
 *   Rather than a thin SVD of the tall C we form the n_frames x n_frames Gram matrix
 *   G = C^H C in double (one pass over the data, OpenMP partial sums per thread), and
 *   diagonalise it with cyclic complex Jacobi rotations (Hermitian, double): G = V S^2 V^H.
 *   This is the standard CPU/GPU-friendly route: the data are read twice (Gram, then
 *   projection) and the eigenproblem is tiny.  The filtered ensemble is C V_K V_K^H with K
 *   the kept components [low, high]; it is applied as x - C V_R V_R^H with R the removed
 *   ones when that is cheaper.  Squaring C squares its condition number, which double
 *   precision absorbs for float32 input (eigenvalues below ~1e-16 of the largest are noise
 *   either way).
 *   Automatic low cut-off: the Doppler-frequency criterion of Yu & Lovstakken (IEEE UFFC
 *   2010, eigen-based clutter filters), also used by Baranger et al. (IEEE TMI 2018):
 *   component k is tissue while the mean Doppler frequency of its temporal singular vector,
 *   |arg sum_t v[t+1] conj(v[t])| / 2 pi (fraction of the PRF), is below svd_auto_frequency;
 *   low is the first component, in descending singular value, that is not tissue.
 * - IIR: Butterworth high-pass of order n and cut-off fc/PRF, designed in double by the
 *   bilinear transform (pre-warped) and run as a cascade of second-order sections in
 *   transposed direct form II with double state per pixel, which carries across executes
 *   so a live stream filtered block by block equals the whole record.  After a reset the
 *   state starts at zero, or (projection initialisation, Chornoboy, IEEE TSP 1990; Kadi &
 *   Loupas 1995) at the state that minimises the output energy over the first L frames:
 *   y = y0 - P y0 with y0 the zero-state output and P the projector onto the natural
 *   responses (the zero-input outputs from each unit state); the state after frame L is
 *   advanced consistently, so the stream continues from the optimal initial state.
 *
 * NaN or inf input is refused (USBEAM_ERR_INVALID_ARGUMENT), found in a pass the filter makes
 * anyway: 'mean'/'poly' test the degree-0 coefficient of each pixel (its basis column is the
 * constant 1/sqrt(N), so the coefficient, a double sum of every frame's sample, is finite
 * exactly when they all are); 'iir' tests each pixel's state after the block (clutter_iir.c
 * says why that suffices) and writes the new state to a second buffer, swapped in only when
 * the whole block was finite (a refused block leaves the state as it was); 'svd' tests the
 * Gram diagonal before it writes anything.
 * A refused 'mean'/'poly'/'iir' call fills out with NaN (no partial result; with out = in
 * that is the caller's buffer); 'svd' leaves out untouched.
 *
 * backend CUDA: 'mean', 'poly' and 'iir': the basis (or the IIR sections and projection
 * tables) are built here in double, then the twin in cuda/clutter.cu gets them and execute and
 * reset forward ('iir' state lives on the device).  'svd' on CUDA: cuda/clutter_svd.cu does
 * all of it on the device (Gram, eigen-decomposition, cut-offs, projection; no host scratch
 * here; n_frames <= 128).  algorithm GEMM ('mean'/'poly', CUDA only: the CPU refuses it with
 * USBEAM_ERR_UNSUPPORTED) makes the twin project through cuBLAS instead of its fused kernel.
 */
#include "doppler/clutter_internal.h"

#include <string.h>

/* ---- polynomial basis -------------------------------------------------------------- */

static usbeam_status build_poly_basis(usbeam_clutter_plan *p, int order)
{
    size_t n = p->params.n_frames;
    int m = order + 1;
    double *legendre = usbeam_alloc(n * (size_t)m * sizeof *legendre);
    if (!legendre) return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "clutter plan: polynomial basis");
    for (size_t t = 0; t < n; ++t) {
        double x = n > 1 ? -1.0 + 2.0 * (double)t / (double)(n - 1) : 0.0;
        /* Bonnet's recurrence: (k+1) P_{k+1} = (2k+1) x P_k - k P_{k-1} */
        double prev = 1.0, cur = x;
        legendre[t] = 1.0;
        if (m > 1) legendre[n + t] = x;
        for (int k = 1; k + 1 < m; ++k) {
            double next = ((2.0 * k + 1.0) * x * cur - k * prev) / (k + 1.0);
            legendre[(size_t)(k + 1) * n + t] = next;
            prev = cur;
            cur = next;
        }
    }
    if (clutter_orthonormalise(legendre, n, m) != 0) {
        usbeam_free(legendre);
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT,
                           "poly_order %d: the polynomial basis is degenerate for %zu frames", order, n);
    }
    for (size_t i = 0; i < n * (size_t)m; ++i) p->basis[i] = legendre[i];
    p->n_basis = m;
    p->subtract = 1;
    usbeam_free(legendre);
    return USBEAM_OK;
}


/* ---- plan ------------------------------------------------------------------------------ */

static usbeam_status validate_params(const usbeam_clutter_params *prm)
{
    usbeam_status st;
    if (prm->n_frames < 2)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "n_frames: the ensemble needs >= 2 frames (got %zu)",
                           prm->n_frames);
    if (prm->n_pixels == 0) return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "n_pixels: the frames are empty");
    if (prm->n_frames > 4096)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "n_frames: at most 4096 frames per ensemble (got %zu)",
                           prm->n_frames);
    switch (prm->method) {
    case USBEAM_CLUTTER_MEAN:
        break;
    case USBEAM_CLUTTER_POLY:
        if (prm->poly_order < 0)
            return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "poly_order must be >= 0 (got %d)", prm->poly_order);
        if (prm->n_frames < (size_t)prm->poly_order + 2)
            return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT,
                               "poly_order %d needs an ensemble of at least %d frames (n_frames = %zu)",
                               prm->poly_order, prm->poly_order + 2, prm->n_frames);
        break;
    case USBEAM_CLUTTER_SVD: {
        long n = (long)prm->n_frames;
        if (n > 1024)
            return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT,
                               "n_frames: the SVD filter takes at most 1024 frames per ensemble (got %ld)", n);
        long high = prm->svd_high < 0 ? n - 1 : prm->svd_high;
        if (prm->svd_high < -1 || high > n - 1)
            return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT,
                               "svd_high must be in [0, n_frames-1 = %ld] or -1 for all (got %d)", n - 1,
                               prm->svd_high);
        if (prm->svd_low < -1 || prm->svd_low > high)
            return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT,
                               "svd_low must be in [0, svd_high = %ld] or -1 for automatic (got %d)", high,
                               prm->svd_low);
        if (prm->svd_low < 0) {
            if ((st = usbeam_check_positive("svd_auto_frequency", prm->svd_auto_frequency)) != USBEAM_OK) return st;
            if (prm->svd_auto_frequency >= 0.5)
                return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT,
                                   "svd_auto_frequency must be < 0.5 (fraction of the PRF; got %g)",
                                   prm->svd_auto_frequency);
        }
        break;
    }
    case USBEAM_CLUTTER_IIR:
        if (prm->iir_order < 1 || prm->iir_order > IIR_MAX_ORDER)
            return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "iir_order must be in [1, %d] (got %d)", IIR_MAX_ORDER,
                               prm->iir_order);
        if ((st = usbeam_check_positive("iir_cutoff", prm->iir_cutoff)) != USBEAM_OK) return st;
        if (prm->iir_cutoff >= 0.5)
            return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT,
                               "iir_cutoff must be < 0.5 (fraction of the PRF; got %g)", prm->iir_cutoff);
        if (prm->iir_init != USBEAM_IIR_INIT_ZERO && prm->iir_init != USBEAM_IIR_INIT_PROJECTION)
            return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "iir_init: unknown kind %d", (int)prm->iir_init);
        if (prm->iir_init == USBEAM_IIR_INIT_PROJECTION) {
            size_t L = prm->iir_init_frames ? prm->iir_init_frames : prm->n_frames;
            if (L > prm->n_frames || L <= (size_t)prm->iir_order)
                return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT,
                                   "iir_init_frames: projection initialisation needs iir_order (%d) < frames "
                                   "(%zu) <= n_frames (%zu)",
                                   prm->iir_order, L, prm->n_frames);
        }
        break;
    default:
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "method: unknown clutter filter %d", (int)prm->method);
    }
    if (prm->algorithm != USBEAM_CLUTTER_KERNEL && prm->algorithm != USBEAM_CLUTTER_GEMM)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "algorithm: unknown clutter algorithm %d", (int)prm->algorithm);
    if (prm->algorithm == USBEAM_CLUTTER_GEMM && prm->method != USBEAM_CLUTTER_MEAN &&
        prm->method != USBEAM_CLUTTER_POLY)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "algorithm 'gemm' is for methods 'mean' and 'poly' only");
    return USBEAM_OK;
}

static void *checked_alloc(size_t a, size_t b, size_t c, int *failed)
{
    size_t bytes;
    if (*failed || usbeam_mul_size3(a, b, c, &bytes) != 0 || bytes > USBEAM_MAX_ALLOCATION) {
        *failed = 1;
        return NULL;
    }
    void *ptr = usbeam_alloc(bytes);
    if (!ptr) *failed = 1;
    return ptr;
}

/* The polynomial basis is real (Legendre): the twin gets its real parts, component by component. */
static usbeam_status create_cuda_twin(usbeam_clutter_plan *p)
{
    const size_t n = p->params.n_frames, values = n * (size_t)p->n_basis;
    double *real_basis = usbeam_alloc(values * sizeof *real_basis);
    if (!real_basis) return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "clutter plan: basis for CUDA");
    for (size_t i = 0; i < values; ++i) real_basis[i] = creal(p->basis[i]);
    usbeam_status st = usbeam_clutter_cuda_create(&p->params, real_basis, p->n_basis, &p->cuda);
    usbeam_free(real_basis);
    return st;
}

usbeam_status usbeam_clutter_plan_create(const usbeam_clutter_params *params, usbeam_backend backend,
                                         usbeam_clutter_plan **plan)
{
    usbeam_status st;
    if (!params || !plan) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "params and plan must not be NULL");
    *plan = NULL;
    if (backend != USBEAM_BACKEND_CPU && backend != USBEAM_BACKEND_CUDA)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "backend: unknown backend %d", (int)backend);
    if ((st = validate_params(params)) != USBEAM_OK) return st;
    if (backend == USBEAM_BACKEND_CPU && params->algorithm == USBEAM_CLUTTER_GEMM)
        return usbeam_fail(USBEAM_ERR_UNSUPPORTED, "algorithm 'gemm' (cuBLAS) needs the CUDA backend");
    if (backend == USBEAM_BACKEND_CUDA && params->method == USBEAM_CLUTTER_SVD) {
        /* everything of the SVD filter happens on the device: no host scratch */
        usbeam_clutter_plan *p = usbeam_alloc(sizeof *p);
        if (!p) return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "clutter plan");
        p->params = *params;
        p->last_low = p->last_high = -1;
        if ((st = usbeam_clutter_svd_cuda_create(params, &p->svd_cuda)) != USBEAM_OK) {
            usbeam_clutter_plan_destroy(p);
            return st;
        }
        *plan = p;
        return USBEAM_OK;
    }

    usbeam_clutter_plan *p = usbeam_alloc(sizeof *p);
    if (!p) return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "clutter plan");
    p->params = *params;
    p->n_threads = clutter_max_threads() > 0 ? clutter_max_threads() : 1;
    const size_t n = params->n_frames, nt = (size_t)p->n_threads;
    const int cpu = backend == USBEAM_BACKEND_CPU; /* a CUDA plan keeps only what its twin uploads */
    int failed = 0;
    if (cpu || params->method != USBEAM_CLUTTER_IIR) p->basis = checked_alloc(n, n, sizeof(zdouble), &failed);
    if (cpu) p->coef = checked_alloc(nt * n, PIXEL_BLOCK, sizeof(zdouble), &failed);
    switch (params->method) {
    case USBEAM_CLUTTER_MEAN:
    case USBEAM_CLUTTER_POLY:
        if (failed) break;
        st = build_poly_basis(p, params->method == USBEAM_CLUTTER_MEAN ? 0 : params->poly_order);
        if (st == USBEAM_OK && backend == USBEAM_BACKEND_CUDA) st = create_cuda_twin(p);
        if (st != USBEAM_OK) {
            usbeam_clutter_plan_destroy(p);
            return st;
        }
        break;
    case USBEAM_CLUTTER_SVD:
        p->gram = checked_alloc(n, n, sizeof(zdouble), &failed);
        p->gram_partial = checked_alloc((size_t)GRAM_SLOTS * (n + 1), n + 1, sizeof(zdouble), &failed);
        p->block_re = checked_alloc(nt * (n + 1), PIXEL_BLOCK, sizeof(double), &failed);
        p->block_im = checked_alloc(nt * (n + 1), PIXEL_BLOCK, sizeof(double), &failed);
        p->eigvec = checked_alloc(n, n, sizeof(zdouble), &failed);
        p->eigval = checked_alloc(n, 1, sizeof(double), &failed);
        p->singular_values = checked_alloc(n, 1, sizeof(double), &failed);
        p->order = checked_alloc(n, 1, sizeof(int), &failed);
        p->last_low = p->last_high = -1;
        break;
    case USBEAM_CLUTTER_IIR:
        p->n_state = params->iir_order;
        p->init_frames = params->iir_init_frames ? params->iir_init_frames : n;
        if (cpu) { /* on CUDA the state lives on the device (cuda/clutter.cu) */
            p->state = checked_alloc((size_t)p->n_state * 2, params->n_pixels, sizeof(double), &failed);
            p->state_next = checked_alloc((size_t)p->n_state * 2, params->n_pixels, sizeof(double), &failed);
            p->y0 = checked_alloc(nt * 2 * p->init_frames, PIXEL_BLOCK, sizeof(double), &failed);
        }
        p->natural_q = checked_alloc(p->init_frames, (size_t)p->n_state, sizeof(double), &failed);
        p->state_gain = checked_alloc(p->init_frames, (size_t)p->n_state, sizeof(double), &failed);
        if (failed) break;
        clutter_iir_design(p);
        if (params->iir_init == USBEAM_IIR_INIT_PROJECTION && (st = clutter_iir_prepare_projection(p)) != USBEAM_OK) {
            usbeam_clutter_plan_destroy(p);
            return st;
        }
        if (backend == USBEAM_BACKEND_CUDA) {
            const int projection = params->iir_init == USBEAM_IIR_INIT_PROJECTION;
            st = usbeam_clutter_cuda_create_iir(params, p->n_sections, p->section_order, &p->sos_b[0][0],
                                                &p->sos_a[0][0], p->n_state, projection ? p->init_frames : 0,
                                                p->natural_q, p->state_gain, &p->cuda);
            if (st != USBEAM_OK) {
                usbeam_clutter_plan_destroy(p);
                return st;
            }
        }
        break;
    }
    if (failed) {
        usbeam_clutter_plan_destroy(p);
        return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "clutter plan: scratch for %zu frames x %zu pixels", n,
                           params->n_pixels);
    }
    *plan = p;
    return USBEAM_OK;
}

usbeam_status usbeam_clutter_execute(usbeam_clutter_plan *plan, const void *in, void *out)
{
    if (!plan || !in || !out) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "plan, in and out must not be NULL");
    if (plan->cuda) return usbeam_clutter_cuda_execute(plan->cuda, in, out);
    if (plan->svd_cuda) return usbeam_clutter_svd_cuda_execute(plan->svd_cuda, in, out);
    int bad = 0;
    usbeam_interrupt interrupt; /* Ctrl-C between pixel blocks (common/interrupt.h) */
    usbeam_interrupt_begin(&interrupt);
    usbeam_status st = USBEAM_OK;
    switch (plan->params.method) {
    case USBEAM_CLUTTER_MEAN:
    case USBEAM_CLUTTER_POLY:
        bad = clutter_apply_projection(plan, in, out, &interrupt);
        break;
    case USBEAM_CLUTTER_SVD:
        st = clutter_svd_filter(plan, in, out, &interrupt);
        if (st != USBEAM_OK) return st;
        break;
    case USBEAM_CLUTTER_IIR:
        bad = clutter_iir_filter(plan, in, out, &interrupt);
        if (!bad && usbeam_interrupt_end(&interrupt) == USBEAM_OK) { /* the block was finite: its state becomes the filter's */
            double *swap = plan->state;
            plan->state = plan->state_next;
            plan->state_next = swap;
            plan->started = 1;
        }
        break;
    }
    if ((st = usbeam_interrupt_end(&interrupt)) != USBEAM_OK) { /* no partial block; IIR state as it was */
        usbeam_fill_nan(out, 2 * plan->params.n_frames * plan->params.n_pixels);
        return st;
    }
    if (bad) {
        usbeam_fill_nan(out, 2 * plan->params.n_frames * plan->params.n_pixels);
        return usbeam_fail_nonfinite("iq", plan->params.method == USBEAM_CLUTTER_IIR
                                               ? "the clutter filter refuses them; out is filled with NaN and the "
                                                 "IIR state is left as it was"
                                               : "the clutter filter refuses them; out is filled with NaN");
    }
    return USBEAM_OK;
}

usbeam_status usbeam_clutter_reset(usbeam_clutter_plan *plan)
{
    if (!plan) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "plan must not be NULL");
    if (plan->cuda) return usbeam_clutter_cuda_reset(plan->cuda);
    if (plan->state) memset(plan->state, 0, (size_t)plan->n_state * 2 * plan->params.n_pixels * sizeof(double));
    plan->started = 0;
    return USBEAM_OK;
}

usbeam_status usbeam_clutter_svd_info(const usbeam_clutter_plan *plan, double *singular_values, int *low,
                                      int *high)
{
    if (!plan) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "plan must not be NULL");
    if (plan->params.method != USBEAM_CLUTTER_SVD)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "plan: not an SVD clutter filter");
    if (plan->svd_cuda) return usbeam_clutter_svd_cuda_info(plan->svd_cuda, singular_values, low, high);
    if (plan->last_low < 0) return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "plan: not executed yet");
    if (singular_values) memcpy(singular_values, plan->singular_values, plan->params.n_frames * sizeof(double));
    if (low) *low = plan->last_low;
    if (high) *high = plan->last_high;
    return USBEAM_OK;
}

usbeam_cuda_exec *usbeam_clutter_plan_cuda(usbeam_clutter_plan *plan)
{
    if (plan && plan->svd_cuda) return usbeam_clutter_svd_cuda_exec(plan->svd_cuda);
    return plan && plan->cuda ? usbeam_clutter_cuda_exec(plan->cuda) : NULL;
}

void usbeam_clutter_plan_destroy(usbeam_clutter_plan *plan)
{
    if (!plan) return;
    usbeam_clutter_cuda_destroy(plan->cuda);
    usbeam_clutter_svd_cuda_destroy(plan->svd_cuda);
    usbeam_free(plan->basis);
    usbeam_free(plan->coef);
    usbeam_free(plan->gram);
    usbeam_free(plan->gram_partial);
    usbeam_free(plan->block_re);
    usbeam_free(plan->block_im);
    usbeam_free(plan->eigvec);
    usbeam_free(plan->eigval);
    usbeam_free(plan->singular_values);
    usbeam_free(plan->order);
    usbeam_free(plan->state);
    usbeam_free(plan->state_next);
    usbeam_free(plan->natural_q);
    usbeam_free(plan->state_gain);
    usbeam_free(plan->y0);
    usbeam_free(plan);
}

