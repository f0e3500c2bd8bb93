/*
 * clutter_svd.c - SVD clutter filter (Demené et al., IEEE TMI 2015), CPU backend.
 *
 * Layout: in, out complex64[n_frames][n_pixels]; the Casorati matrix C is (n_pixels x
 * n_frames), i.e. the transpose of the input as stored.
 * Route: G = C^H C (n_frames x n_frames, double), Hermitian cyclic Jacobi in double,
 * singular values sqrt(eigenvalues); the filtered ensemble C V_K V_K^H is applied by the
 * projection kernel of clutter.c (on the smaller of the kept and removed sets).  Automatic low
 * cut-off: mean Doppler frequency of the temporal singular vectors (Yu & Lovstakken 2010;
 * Baranger et al. 2018); see clutter.c for the full description.
 */
#include "doppler/clutter_internal.h"

#include <math.h>
#include <string.h>

#define JACOBI_MAX_SWEEPS 60



/* One pixel block: g[a][b] += sum_i conj(x_a[i]) x_b[i] for a <= b (row pairs a, a+1 and
 * b, b+1), rows de-interleaved in re/im (n2 rows of PIXEL_BLOCK), g of stride n2. */
/* The Gram matrix is most of the SVD filter's time: built for x86-64-v3 too. */
CLUTTER_CLONES
static void gram_block(double *g, const double *re, const double *im, size_t n2, size_t count)
{
    for (size_t a = 0; a < n2; a += 2) {
        const double *a0r = re + a * PIXEL_BLOCK, *a0i = im + a * PIXEL_BLOCK;
        const double *a1r = a0r + PIXEL_BLOCK, *a1i = a0i + PIXEL_BLOCK;
        for (size_t b = a; b < n2; b += 2) {
            const double *b0r = re + b * PIXEL_BLOCK, *b0i = im + b * PIXEL_BLOCK;
            const double *b1r = b0r + PIXEL_BLOCK, *b1i = b0i + PIXEL_BLOCK;
            double r00 = 0, i00 = 0, r01 = 0, i01 = 0, r10 = 0, i10 = 0, r11 = 0, i11 = 0;
#pragma omp simd reduction(+ : r00, i00, r01, i01, r10, i10, r11, i11)
            for (size_t i = 0; i < count; ++i) {
                r00 += a0r[i] * b0r[i] + a0i[i] * b0i[i];
                i00 += a0r[i] * b0i[i] - a0i[i] * b0r[i];
                r01 += a0r[i] * b1r[i] + a0i[i] * b1i[i];
                i01 += a0r[i] * b1i[i] - a0i[i] * b1r[i];
                r10 += a1r[i] * b0r[i] + a1i[i] * b0i[i];
                i10 += a1r[i] * b0i[i] - a1i[i] * b0r[i];
                r11 += a1r[i] * b1r[i] + a1i[i] * b1i[i];
                i11 += a1r[i] * b1i[i] - a1i[i] * b1r[i];
            }
            double *g0 = g + 2 * (a * n2 + b), *g1 = g0 + 2 * n2;
            g0[0] += r00;
            g0[1] += i00;
            g0[2] += r01;
            g0[3] += i01;
            g1[0] += r10;
            g1[1] += i10;
            g1[2] += r11;
            g1[3] += i11;
        }
    }
}

/* G = C^H C in double.  Pixels are taken in blocks of PIXEL_BLOCK, de-interleaved into
 * per-thread double rows (n_frames rounded up to even, the extra row zero), and the upper
 * triangle is accumulated 2 x 2 entries at a time so each loaded row feeds two products.
 * Slot s sums the blocks [s B / S, (s + 1) B / S) in order into its own partial (S =
 * GRAM_SLOTS), whichever thread runs it, so G does not depend on the team size. */
static void compute_gram(usbeam_clutter_plan *p, const float *in, usbeam_interrupt *interrupt)
{
    const size_t n = p->params.n_frames, n_pixels = p->params.n_pixels;
    const size_t n2 = (n + 1) & ~(size_t)1, g_stride = n2;
    const size_t n_blocks = (n_pixels + PIXEL_BLOCK - 1) / PIXEL_BLOCK;
    memset(p->gram_partial, 0, (size_t)GRAM_SLOTS * n2 * n2 * sizeof(zdouble));
#pragma omp parallel num_threads(usbeam_team_size(p->n_threads))
    {
        int tid = clutter_thread_id();
        double *re = p->block_re + (size_t)tid * n2 * PIXEL_BLOCK;
        double *im = p->block_im + (size_t)tid * n2 * PIXEL_BLOCK;
        for (size_t i = 0; i < (n2 - n) * PIXEL_BLOCK; ++i) re[n * PIXEL_BLOCK + i] = im[n * PIXEL_BLOCK + i] = 0.0;
#pragma omp for schedule(dynamic, 1)
        for (int slot = 0; slot < GRAM_SLOTS; ++slot) {
            double *g = (double *)(p->gram_partial + (size_t)slot * n2 * n2);
            const size_t blk0 = (size_t)slot * n_blocks / GRAM_SLOTS, blk1 = (size_t)(slot + 1) * n_blocks / GRAM_SLOTS;
            for (size_t blk = blk0; blk < blk1; ++blk) {
                if (usbeam_interrupt_poll(interrupt)) break;
                size_t first = blk * PIXEL_BLOCK;
                size_t count = n_pixels - first < PIXEL_BLOCK ? n_pixels - first : PIXEL_BLOCK;
                for (size_t t = 0; t < n; ++t) {
                    const float *x = in + 2 * (t * n_pixels + first);
                    for (size_t i = 0; i < count; ++i) {
                        re[t * PIXEL_BLOCK + i] = x[2 * i];
                        im[t * PIXEL_BLOCK + i] = x[2 * i + 1];
                    }
                }
                gram_block(g, re, im, n2, count);
            }
        }
    }
    for (size_t a = 0; a < n; ++a) {
        for (size_t b = a; b < n; ++b) {
            zdouble sum = 0.0;
            for (int t = 0; t < GRAM_SLOTS; ++t) sum += p->gram_partial[(size_t)t * n2 * n2 + a * g_stride + b];
            p->gram[a * n + b] = sum;
            p->gram[b * n + a] = conj(sum);
        }
        p->gram[a * n + a] = creal(p->gram[a * n + a]);
    }
}

/* Cyclic Jacobi for the Hermitian matrix a (n x n, row-major, destroyed): on return the
 * diagonal holds the eigenvalues and the columns of v the eigenvectors.  Each rotation
 * first turns a[p][q] real with a phase on column/row q, then applies the real Jacobi
 * rotation (Numerical Recipes' stable tangent formula). */
static void hermitian_jacobi(zdouble *a, zdouble *v, size_t n)
{
    for (size_t i = 0; i < n; ++i)
        for (size_t j = 0; j < n; ++j) v[i * n + j] = (i == j) ? 1.0 : 0.0;
    double total = 0.0;
    for (size_t i = 0; i < n * n; ++i) total += creal(a[i]) * creal(a[i]) + cimag(a[i]) * cimag(a[i]);
    if (total == 0.0) return;
    for (int sweep = 0; sweep < JACOBI_MAX_SWEEPS; ++sweep) {
        double off = 0.0;
        for (size_t i = 0; i < n; ++i)
            for (size_t j = i + 1; j < n; ++j) off += creal(a[i * n + j]) * creal(a[i * n + j]) + cimag(a[i * n + j]) * cimag(a[i * n + j]);
        if (off <= 1e-30 * total) break;
        for (size_t p = 0; p + 1 < n; ++p) {
            for (size_t q = p + 1; q < n; ++q) {
                zdouble apq = a[p * n + q];
                double h = cabs(apq);
                if (h <= 1e-300 || h * h <= 1e-34 * total) continue;
                zdouble phase = apq / h;  /* e^{i phi} */
                double app = creal(a[p * n + p]), aqq = creal(a[q * n + q]);
                double theta = (aqq - app) / (2.0 * h);
                double t = (theta >= 0 ? 1.0 : -1.0) / (fabs(theta) + sqrt(theta * theta + 1.0));
                double c = 1.0 / sqrt(t * t + 1.0), s = t * c;
                /* U = columns u_p = c e_p - s e^{-i phi} e_q,  u_q = s e_p + c e^{-i phi} e_q */
                zdouble w = conj(phase), sw = s * w, cw = c * w, sph = s * phase, cph = c * phase;
                for (size_t r = 0; r < n; ++r) { /* A <- A U (columns) */
                    zdouble arp = a[r * n + p], arq = a[r * n + q];
                    a[r * n + p] = c * arp - zmul(sw, arq);
                    a[r * n + q] = s * arp + zmul(cw, arq);
                }
                for (size_t r = 0; r < n; ++r) { /* A <- U^H A (rows) */
                    zdouble apr = a[p * n + r], aqr = a[q * n + r];
                    a[p * n + r] = c * apr - zmul(sph, aqr);
                    a[q * n + r] = s * apr + zmul(cph, aqr);
                }
                a[p * n + q] = a[q * n + p] = 0.0;
                a[p * n + p] = creal(a[p * n + p]);
                a[q * n + q] = creal(a[q * n + q]);
                for (size_t r = 0; r < n; ++r) { /* V <- V U */
                    zdouble vrp = v[r * n + p], vrq = v[r * n + q];
                    v[r * n + p] = c * vrp - zmul(sw, vrq);
                    v[r * n + q] = s * vrp + zmul(cw, vrq);
                }
            }
        }
    }
}

/* Mean Doppler frequency (fraction of the PRF, in [0, 0.5]) of eigenvector column k. */
static double temporal_frequency(const zdouble *v, size_t n, int k)
{
    zdouble r = 0.0;
    for (size_t t = 0; t + 1 < n; ++t) r += zmul(v[(t + 1) * n + (size_t)k], conj(v[t * n + (size_t)k]));
    return fabs(carg(r)) / (2.0 * CLUTTER_PI);
}

usbeam_status clutter_svd_filter(usbeam_clutter_plan *p, const float *in, float *out, usbeam_interrupt *interrupt)
{
    const size_t n = p->params.n_frames;
    compute_gram(p, in, interrupt);
    if (usbeam_interrupt_poll(interrupt)) return USBEAM_OK; /* a partial Gram matrix: the caller stops */
    /* A NaN or inf sample makes its frame's energy, a diagonal entry, non-finite; the
     * eigenvectors would then be garbage and (automatic cut-off) the input would pass through
     * unfiltered: refuse it instead, at the cost of n checks. */
    for (size_t k = 0; k < n; ++k)
        if (!isfinite(creal(p->gram[k * n + k])))
            return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT,
                               "iq contains NaN or infinite values (frame %zu; the SVD clutter filter "
                               "refuses them; out is untouched)",
                               k);
    hermitian_jacobi(p->gram, p->eigvec, n);
    for (size_t k = 0; k < n; ++k) {
        p->eigval[k] = creal(p->gram[k * n + k]);
        p->order[k] = (int)k;
    }
    /* insertion sort by descending eigenvalue (n is small) */
    for (size_t i = 1; i < n; ++i) {
        int key = p->order[i];
        size_t j = i;
        while (j > 0 && p->eigval[p->order[j - 1]] < p->eigval[key]) {
            p->order[j] = p->order[j - 1];
            --j;
        }
        p->order[j] = key;
    }
    for (size_t k = 0; k < n; ++k) {
        double lambda = p->eigval[p->order[k]];
        p->singular_values[k] = lambda > 0.0 ? sqrt(lambda) : 0.0;
    }
    int high = p->params.svd_high < 0 ? (int)n - 1 : p->params.svd_high;
    int low = p->params.svd_low;
    if (low < 0) {
        low = 0;
        while (low < (int)n && temporal_frequency(p->eigvec, n, p->order[low]) < p->params.svd_auto_frequency)
            ++low;
    }
    p->last_low = low;
    p->last_high = high;
    int n_keep = low <= high ? high - low + 1 : 0;
    int n_remove = (int)n - n_keep;
    /* project on whichever set is smaller */
    p->subtract = n_remove <= n_keep;
    p->n_basis = 0;
    for (int k = 0; k < (int)n; ++k) {
        int kept = k >= low && k <= high;
        if (kept != p->subtract) {
            int col = p->order[k];
            for (size_t t = 0; t < n; ++t) p->basis[(size_t)p->n_basis * n + t] = p->eigvec[t * n + (size_t)col];
            ++p->n_basis;
        }
    }
    (void)clutter_apply_projection(p, in, out, interrupt); /* finite input, checked above */
    return USBEAM_OK;
}

