/*
 * clutter_project.c - the projection kernel of the clutter filters, CPU backend: out = in - C B B^H
 * (remove the span of B) or C B B^H (keep it), for the polynomial filters ('mean', 'poly') and
 * the SVD filter, plus the two helpers the plan needs to set it up (orthonormal basis, thread
 * count).  It lives apart from clutter.c so that the plan (clutter.c) only calls down into
 * clutter_project.c, clutter_svd.c and clutter_iir.c and nothing calls back up into it.
 * Layout and method: see clutter.c.
 */
#include "doppler/clutter_internal.h"

#include <math.h>

/* ---- set-up helpers ---------------------------------------------------------------------- */

/* OpenMP's team size sizes the plan's per-thread scratch (coef, Gram partial sums, y0). */
int clutter_max_threads(void)
{
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

/* Modified Gram-Schmidt on the columns of a (n x m, column-major), run twice for
 * orthogonality to machine precision.  Returns -1 when a column is numerically dependent. */
int clutter_orthonormalise(double *a, size_t n, int m)
{
    for (int pass = 0; pass < 2; ++pass) {
        for (int k = 0; k < m; ++k) {
            double *col = a + (size_t)k * n;
            for (int j = 0; j < k; ++j) {
                const double *prev = a + (size_t)j * n;
                double dot = 0.0;
                for (size_t t = 0; t < n; ++t) dot += prev[t] * col[t];
                for (size_t t = 0; t < n; ++t) col[t] -= dot * prev[t];
            }
            double norm = 0.0;
            for (size_t t = 0; t < n; ++t) norm += col[t] * col[t];
            norm = sqrt(norm);
            if (!(norm > 1e-12)) return -1;
            for (size_t t = 0; t < n; ++t) col[t] /= norm;
        }
    }
    return 0;
}

/* ---- projection: out = in - C B B^H (subtract) or C B B^H (keep) ------------------------- */

/* B has n_basis orthonormal columns; for each pixel: coef_k = sum_t x_t B[t,k],
 * y_t = sum_k coef_k conj(B[t,k]), i.e. the Casorati row times B B^H. */
/* One block of `count` pixels: coef_k = sum_t x_t B[t,k] (double, interleaved re/im per
 * pixel), then y_t = x_t - sum_k coef_k conj(B[t,k]) (or + without x_t), loops over pixels
 * innermost so they vectorise.  Built for x86-64-v3 beside the baseline (CLUTTER_CLONES).
 * Returns 1, writing nothing, when a coefficient of component 0 is NaN or inf: for the
 * polynomial bases (column 0 constant and non-zero) exactly when a sample is. */
CLUTTER_CLONES
static int project_block(const zdouble *basis, int n_basis, int subtract, size_t n_frames, size_t n_pixels,
                          const float *in, float *out, size_t first, size_t count, double *coef)
{
    for (int k = 0; k < n_basis; ++k) {
        double *ck = coef + (size_t)k * 2 * PIXEL_BLOCK;
        for (size_t i = 0; i < 2 * count; ++i) ck[i] = 0.0;
        for (size_t t = 0; t < n_frames; ++t) {
            const double br = creal(basis[(size_t)k * n_frames + t]);
            const double bi = cimag(basis[(size_t)k * n_frames + t]);
            const float *x = in + 2 * (t * n_pixels + first);
            for (size_t i = 0; i < count; ++i) {
                double xr = x[2 * i], xi = x[2 * i + 1];
                ck[2 * i] += xr * br - xi * bi;
                ck[2 * i + 1] += xr * bi + xi * br;
            }
        }
    }
    int nonfinite = 0;
    if (n_basis > 0)
        for (size_t i = 0; i < 2 * count; ++i) nonfinite |= !(coef[i] - coef[i] == 0.0);
    if (nonfinite) return 1;
    /* all coefficients are read before any output row is written: in-place is safe */
    double acc[2 * PIXEL_BLOCK];
    for (size_t t = 0; t < n_frames; ++t) {
        const float *x = in + 2 * (t * n_pixels + first);
        float *y = out + 2 * (t * n_pixels + first);
        for (size_t i = 0; i < 2 * count; ++i) acc[i] = 0.0;
        for (int k = 0; k < n_basis; ++k) {
            const double br = creal(basis[(size_t)k * n_frames + t]);
            const double bi = -cimag(basis[(size_t)k * n_frames + t]); /* conj */
            const double *ck = coef + (size_t)k * 2 * PIXEL_BLOCK;
            for (size_t i = 0; i < count; ++i) {
                acc[2 * i] += ck[2 * i] * br - ck[2 * i + 1] * bi;
                acc[2 * i + 1] += ck[2 * i] * bi + ck[2 * i + 1] * br;
            }
        }
        if (subtract) {
            for (size_t i = 0; i < 2 * count; ++i) y[i] = (float)(x[i] - acc[i]);
        } else {
            for (size_t i = 0; i < 2 * count; ++i) y[i] = (float)acc[i];
        }
    }
    return 0;
}

int clutter_apply_projection(usbeam_clutter_plan *p, const float *in, float *out, usbeam_interrupt *interrupt)
{
    const size_t n_frames = p->params.n_frames, n_pixels = p->params.n_pixels;
    const ptrdiff_t n_blocks = (ptrdiff_t)((n_pixels + PIXEL_BLOCK - 1) / PIXEL_BLOCK);
    int bad = 0;
#pragma omp parallel num_threads(usbeam_team_size(p->n_threads)) reduction(| : bad)
    {
        double *coef = (double *)(p->coef + (size_t)clutter_thread_id() * n_frames * PIXEL_BLOCK);
#pragma omp for schedule(static)
        for (ptrdiff_t blk = 0; blk < n_blocks; ++blk) {
            if (usbeam_interrupt_poll(interrupt)) continue;
            size_t first = (size_t)blk * PIXEL_BLOCK;
            size_t count = n_pixels - first < PIXEL_BLOCK ? n_pixels - first : PIXEL_BLOCK;
            bad |= project_block(p->basis, p->n_basis, p->subtract, n_frames, n_pixels, in, out, first, count, coef);
        }
    }
    return bad;
}
