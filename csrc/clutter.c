/*
 * clutter.c - clutter (wall) filters along slow time for Doppler imaging, CPU backend.
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
 */
#include "usbeam_internal.h"

#include <complex.h>
#include <math.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#define CLUTTER_PI 3.14159265358979323846
#define PIXEL_BLOCK 64         /* pixels per inner block: fits the per-thread scratch in L1/L2 */
#define IIR_MAX_ORDER 10
#define JACOBI_MAX_SWEEPS 60

typedef double complex zdouble;

/* Complex product without the C99 Annex G inf/NaN recovery (__muldc3): the operands here are
 * finite by construction, and the library call dominated the Jacobi sweeps. */
static inline zdouble zmul(zdouble a, zdouble b)
{
    return CMPLX(creal(a) * creal(b) - cimag(a) * cimag(b), creal(a) * cimag(b) + cimag(a) * creal(b));
}

struct usbeam_clutter_plan {
    usbeam_clutter_params params;
    int n_threads;
    /* projection filters (MEAN, POLY, SVD): basis (n_frames x n_basis, column-major by
     * component: basis[k*n_frames + t]) and whether the output keeps (0) or removes (1) it */
    zdouble *basis;
    int n_basis;
    int subtract;
    zdouble *coef;            /* per thread: n_frames * PIXEL_BLOCK */
    /* SVD */
    zdouble *gram;            /* n_frames^2 */
    zdouble *gram_partial;    /* per thread: (n_frames rounded up to even)^2 */
    double *block_re, *block_im; /* per thread: (n_frames rounded up to even) * PIXEL_BLOCK */
    zdouble *eigvec;          /* n_frames^2, column k = eigenvector k */
    double *eigval;           /* n_frames */
    double *singular_values;  /* n_frames, descending */
    int *order;               /* n_frames: eigen indices by descending eigenvalue */
    int last_low, last_high;
    /* IIR */
    int n_sections;
    int section_order[IIR_MAX_ORDER];   /* 1 or 2 */
    double sos_b[IIR_MAX_ORDER][3], sos_a[IIR_MAX_ORDER][3];
    int n_state;              /* = iir_order */
    double *state;            /* [n_state][2 (re, im)][n_pixels] */
    size_t init_frames;       /* L */
    double *natural_q;        /* L x n_state: orthonormal basis of the natural responses */
    double *state_gain;       /* n_state x L: state correction per unit of zero-state output */
    double *y0;               /* per thread: [2][L][PIXEL_BLOCK] */
    int started;              /* 0 until the first execute after create/reset */
};

static int max_threads(void)
{
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

static int thread_id(void)
{
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

/* ---- polynomial basis -------------------------------------------------------------- */

/* Modified Gram-Schmidt on the columns of a (n x m, column-major), run twice for
 * orthogonality to machine precision.  Returns -1 when a column is numerically dependent. */
static int orthonormalise(double *a, size_t n, int m)
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
    if (orthonormalise(legendre, n, m) != 0) {
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

/* ---- projection: out = in - C B B^H (subtract) or C B B^H (keep) ------------------------- */

/* B has n_basis orthonormal columns; for each pixel: coef_k = sum_t x_t B[t,k],
 * y_t = sum_k coef_k conj(B[t,k]), i.e. the Casorati row times B B^H. */
static void apply_projection(usbeam_clutter_plan *p, const float *in, float *out)
{
    const size_t n_frames = p->params.n_frames, n_pixels = p->params.n_pixels;
    const int n_basis = p->n_basis, subtract = p->subtract;
    const zdouble *basis = p->basis;
    const ptrdiff_t n_blocks = (ptrdiff_t)((n_pixels + PIXEL_BLOCK - 1) / PIXEL_BLOCK);
#pragma omp parallel num_threads(p->n_threads)
    {
        double *coef = (double *)(p->coef + (size_t)thread_id() * n_frames * PIXEL_BLOCK);
#pragma omp for schedule(static)
        for (ptrdiff_t blk = 0; blk < n_blocks; ++blk) {
            size_t first = (size_t)blk * PIXEL_BLOCK;
            size_t count = n_pixels - first < PIXEL_BLOCK ? n_pixels - first : PIXEL_BLOCK;
            /* coefficients (re, im interleaved per pixel), accumulated in double */
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
            /* all coefficients are read before any output row is written: in-place is safe */
            for (size_t t = 0; t < n_frames; ++t) {
                const float *x = in + 2 * (t * n_pixels + first);
                float *y = out + 2 * (t * n_pixels + first);
                for (size_t i = 0; i < count; ++i) {
                    double sr = 0.0, si = 0.0;
                    for (int k = 0; k < n_basis; ++k) {
                        const double br = creal(basis[(size_t)k * n_frames + t]);
                        const double bi = -cimag(basis[(size_t)k * n_frames + t]); /* conj */
                        const double *ck = coef + (size_t)k * 2 * PIXEL_BLOCK;
                        sr += ck[2 * i] * br - ck[2 * i + 1] * bi;
                        si += ck[2 * i] * bi + ck[2 * i + 1] * br;
                    }
                    if (subtract) {
                        y[2 * i] = (float)(x[2 * i] - sr);
                        y[2 * i + 1] = (float)(x[2 * i + 1] - si);
                    } else {
                        y[2 * i] = (float)sr;
                        y[2 * i + 1] = (float)si;
                    }
                }
            }
        }
    }
}

/* ---- SVD: Gram matrix and Hermitian Jacobi ------------------------------------------- */

/* G = C^H C in double.  Pixels are taken in blocks of PIXEL_BLOCK, de-interleaved into
 * per-thread double rows (n_frames rounded up to even, the extra row zero), and the upper
 * triangle is accumulated 2 x 2 entries at a time so each loaded row feeds two products. */
static void compute_gram(usbeam_clutter_plan *p, const float *in)
{
    const size_t n = p->params.n_frames, n_pixels = p->params.n_pixels;
    const size_t n2 = (n + 1) & ~(size_t)1, g_stride = n2;
    const ptrdiff_t n_blocks = (ptrdiff_t)((n_pixels + PIXEL_BLOCK - 1) / PIXEL_BLOCK);
    const int n_threads = p->n_threads;
    memset(p->gram_partial, 0, (size_t)n_threads * n2 * n2 * sizeof(zdouble));
#pragma omp parallel num_threads(n_threads)
    {
        int tid = thread_id();
        double *g = (double *)(p->gram_partial + (size_t)tid * n2 * n2);
        double *re = p->block_re + (size_t)tid * n2 * PIXEL_BLOCK;
        double *im = p->block_im + (size_t)tid * n2 * PIXEL_BLOCK;
        for (size_t i = 0; i < (n2 - n) * PIXEL_BLOCK; ++i) re[n * PIXEL_BLOCK + i] = im[n * PIXEL_BLOCK + i] = 0.0;
#pragma omp for schedule(static)
        for (ptrdiff_t blk = 0; blk < n_blocks; ++blk) {
            size_t first = (size_t)blk * PIXEL_BLOCK;
            size_t count = n_pixels - first < PIXEL_BLOCK ? n_pixels - first : PIXEL_BLOCK;
            for (size_t t = 0; t < n; ++t) {
                const float *x = in + 2 * (t * n_pixels + first);
                for (size_t i = 0; i < count; ++i) {
                    re[t * PIXEL_BLOCK + i] = x[2 * i];
                    im[t * PIXEL_BLOCK + i] = x[2 * i + 1];
                }
            }
            /* G[a][b] += sum_i conj(x_a[i]) x_b[i] for a <= b (pairs of rows a, a+1 and b, b+1) */
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
                    double *g0 = g + 2 * (a * g_stride + b), *g1 = g0 + 2 * g_stride;
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
    }
    for (size_t a = 0; a < n; ++a) {
        for (size_t b = a; b < n; ++b) {
            zdouble sum = 0.0;
            for (int t = 0; t < n_threads; ++t) sum += p->gram_partial[(size_t)t * n2 * n2 + a * g_stride + b];
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

static void svd_filter(usbeam_clutter_plan *p, const float *in, float *out)
{
    const size_t n = p->params.n_frames;
    compute_gram(p, in);
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
    apply_projection(p, in, out);
}

/* ---- IIR Butterworth high-pass ---------------------------------------------------------- */

static void design_butterworth_highpass(usbeam_clutter_plan *p)
{
    const int order = p->params.iir_order;
    /* bilinear transform s = (z - 1)/(z + 1): analog cut-off pre-warped to tan(pi fc/PRF) */
    const double warped = tan(CLUTTER_PI * p->params.iir_cutoff);
    p->n_sections = 0;
    for (int k = 0; k < order / 2; ++k) {
        /* analog low-pass prototype pole in the upper-left quadrant; its conjugate pairs with it */
        zdouble proto = cexp(I * CLUTTER_PI * (2.0 * k + order + 1.0) / (2.0 * order));
        zdouble analog_hp = warped / proto;           /* low-pass -> high-pass: s -> wc / s */
        zdouble zpole = (1.0 + analog_hp) / (1.0 - analog_hp);
        int s = p->n_sections++;
        double a1 = -2.0 * creal(zpole), a2 = creal(zpole * conj(zpole));
        double gain = (1.0 - a1 + a2) / 4.0;          /* unit gain at z = -1 (Nyquist) */
        p->section_order[s] = 2;
        p->sos_b[s][0] = gain;
        p->sos_b[s][1] = -2.0 * gain;                 /* both zeros at z = 1 (DC) */
        p->sos_b[s][2] = gain;
        p->sos_a[s][0] = 1.0;
        p->sos_a[s][1] = a1;
        p->sos_a[s][2] = a2;
    }
    if (order % 2) {
        double analog_hp = -warped;                   /* real prototype pole at s = -1 */
        double zpole = (1.0 + analog_hp) / (1.0 - analog_hp);
        int s = p->n_sections++;
        double gain = (1.0 + zpole) / 2.0;
        p->section_order[s] = 1;
        p->sos_b[s][0] = gain;
        p->sos_b[s][1] = -gain;
        p->sos_b[s][2] = 0.0;
        p->sos_a[s][0] = 1.0;
        p->sos_a[s][1] = -zpole;
        p->sos_a[s][2] = 0.0;
    }
}

/* One sample through the cascade for one scalar signal; state z[2 per section]. */
static double cascade_step(const usbeam_clutter_plan *p, double x, double *z)
{
    for (int s = 0; s < p->n_sections; ++s) {
        const double *b = p->sos_b[s], *a = p->sos_a[s];
        double y = b[0] * x + z[2 * s];
        z[2 * s] = b[1] * x - a[1] * y + z[2 * s + 1];
        z[2 * s + 1] = b[2] * x - a[2] * y;
        x = y;
    }
    return x;
}

/* state index j (0..order-1) -> slot in the per-section state vector of cascade_step */
static int state_slot(const usbeam_clutter_plan *p, int j)
{
    for (int s = 0; s < p->n_sections; ++s) {
        if (j < p->section_order[s]) return 2 * s + j;
        j -= p->section_order[s];
    }
    return -1;
}

static usbeam_status prepare_projection_init(usbeam_clutter_plan *p)
{
    const size_t L = p->init_frames;
    const int m = p->n_state;
    double z[2 * IIR_MAX_ORDER];
    double *transition = usbeam_alloc((size_t)m * (size_t)m * sizeof(double)); /* final state per unit state */
    double *r = usbeam_alloc((size_t)m * (size_t)m * sizeof(double));
    if (!transition || !r) {
        usbeam_free(transition);
        usbeam_free(r);
        return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "clutter plan: IIR initialisation");
    }
    /* natural responses: zero input from each unit state, over L frames */
    for (int j = 0; j < m; ++j) {
        memset(z, 0, sizeof z);
        z[state_slot(p, j)] = 1.0;
        for (size_t t = 0; t < L; ++t) p->natural_q[(size_t)j * L + t] = cascade_step(p, 0.0, z);
        for (int i = 0; i < m; ++i) transition[i * m + j] = z[state_slot(p, i)];
    }
    /* QR by modified Gram-Schmidt (twice), keeping R, so that for a zero-state output y0
     * the optimal initial state is s = -R^{-1} Q^T y0 and the output is y0 - Q Q^T y0. */
    memset(r, 0, (size_t)m * (size_t)m * sizeof(double));
    double *q = p->natural_q;
    for (int pass = 0; pass < 2; ++pass) {
        for (int k = 0; k < m; ++k) {
            double *col = q + (size_t)k * L;
            for (int j = 0; j < k; ++j) {
                double dot = 0.0;
                for (size_t t = 0; t < L; ++t) dot += q[(size_t)j * L + t] * col[t];
                for (size_t t = 0; t < L; ++t) col[t] -= dot * q[(size_t)j * L + t];
                r[j * m + k] += dot;
            }
            double norm = 0.0;
            for (size_t t = 0; t < L; ++t) norm += col[t] * col[t];
            norm = sqrt(norm);
            if (!(norm > 1e-300)) {
                usbeam_free(transition);
                usbeam_free(r);
                return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT,
                                   "iir_init_frames: natural responses are degenerate over %zu frames", L);
            }
            if (pass == 0) {
                r[k * m + k] = norm;
            } else {
                /* second pass: R <- R2 R1 with R2 ~ identity; fold its diagonal in */
                for (int j = k; j < m; ++j) r[k * m + j] *= norm;
            }
            for (size_t t = 0; t < L; ++t) col[t] /= norm;
        }
    }
    /* state_gain = -T R^{-1} Q^T (m x L): state after frame L changes by state_gain * y0 */
    for (size_t t = 0; t < L; ++t) {
        double w[IIR_MAX_ORDER];
        for (int k = m - 1; k >= 0; --k) { /* w = R^{-1} (Q^T e_t) by back substitution */
            double v = q[(size_t)k * L + t];
            for (int j = k + 1; j < m; ++j) v -= r[k * m + j] * w[j];
            w[k] = v / r[k * m + k];
        }
        for (int i = 0; i < m; ++i) {
            double v = 0.0;
            for (int j = 0; j < m; ++j) v += transition[i * m + j] * w[j];
            p->state_gain[(size_t)i * L + t] = -v;
        }
    }
    usbeam_free(transition);
    usbeam_free(r);
    return USBEAM_OK;
}

static void iir_filter(usbeam_clutter_plan *p, const float *in, float *out)
{
    const size_t n_frames = p->params.n_frames, n_pixels = p->params.n_pixels;
    const ptrdiff_t n_blocks = (ptrdiff_t)((n_pixels + PIXEL_BLOCK - 1) / PIXEL_BLOCK);
    const int project = !p->started && p->params.iir_init == USBEAM_IIR_INIT_PROJECTION;
    const size_t L = project ? p->init_frames : 0;
    const int m = p->n_state;
#pragma omp parallel num_threads(p->n_threads)
    {
        double *y0 = p->y0 + (size_t)thread_id() * 2 * p->init_frames * PIXEL_BLOCK;
#pragma omp for schedule(static)
        for (ptrdiff_t blk = 0; blk < n_blocks; ++blk) {
            size_t first = (size_t)blk * PIXEL_BLOCK;
            size_t count = n_pixels - first < PIXEL_BLOCK ? n_pixels - first : PIXEL_BLOCK;
            for (size_t t = 0; t < n_frames; ++t) {
                const float *x = in + 2 * (t * n_pixels + first);
                float *y = out + 2 * (t * n_pixels + first);
                for (int part = 0; part < 2; ++part) {
                    double buf[PIXEL_BLOCK];
                    for (size_t i = 0; i < count; ++i) buf[i] = x[2 * i + part];
                    int slot = 0;
                    for (int s = 0; s < p->n_sections; ++s) {
                        const double *b = p->sos_b[s], *a = p->sos_a[s];
                        double *z1 = p->state + ((size_t)(slot * 2 + part)) * n_pixels + first;
                        if (p->section_order[s] == 2) {
                            double *z2 = p->state + ((size_t)((slot + 1) * 2 + part)) * n_pixels + first;
#pragma omp simd
                            for (size_t i = 0; i < count; ++i) {
                                double v = buf[i], w = b[0] * v + z1[i];
                                z1[i] = b[1] * v - a[1] * w + z2[i];
                                z2[i] = b[2] * v - a[2] * w;
                                buf[i] = w;
                            }
                        } else {
#pragma omp simd
                            for (size_t i = 0; i < count; ++i) {
                                double v = buf[i], w = b[0] * v + z1[i];
                                z1[i] = b[1] * v - a[1] * w;
                                buf[i] = w;
                            }
                        }
                        slot += p->section_order[s];
                    }
                    if (t < L) {
                        double *dst = y0 + ((size_t)part * L + t) * PIXEL_BLOCK;
                        for (size_t i = 0; i < count; ++i) dst[i] = buf[i];
                    } else {
                        for (size_t i = 0; i < count; ++i) y[2 * i + part] = (float)buf[i];
                    }
                }
                if (L && t + 1 == L) {
                    /* projection initialisation: move the state as if the filter had started
                     * from the optimal state (this uses the uncorrected y0, so it comes first),
                     * then remove the natural-response part of the first L outputs */
                    for (int part = 0; part < 2; ++part) {
                        double *y0p = y0 + (size_t)part * L * PIXEL_BLOCK;
                        for (int j = 0; j < m; ++j) {
                            const double *g = p->state_gain + (size_t)j * L;
                            double *z = p->state + ((size_t)(j * 2 + part)) * n_pixels + first;
                            for (size_t u = 0; u < L; ++u)
                                for (size_t i = 0; i < count; ++i) z[i] += g[u] * y0p[u * PIXEL_BLOCK + i];
                        }
                        for (int k = 0; k < m; ++k) {
                            const double *qk = p->natural_q + (size_t)k * L;
                            double coef[PIXEL_BLOCK];
                            for (size_t i = 0; i < count; ++i) coef[i] = 0.0;
                            for (size_t u = 0; u < L; ++u)
                                for (size_t i = 0; i < count; ++i) coef[i] += qk[u] * y0p[u * PIXEL_BLOCK + i];
                            for (size_t u = 0; u < L; ++u)
                                for (size_t i = 0; i < count; ++i) y0p[u * PIXEL_BLOCK + i] -= qk[u] * coef[i];
                        }
                        for (size_t u = 0; u < L; ++u) {
                            float *yu = out + 2 * (u * n_pixels + first);
                            for (size_t i = 0; i < count; ++i) yu[2 * i + part] = (float)y0p[u * PIXEL_BLOCK + i];
                        }
                    }
                }
            }
        }
    }
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

usbeam_status usbeam_clutter_plan_create(const usbeam_clutter_params *params, usbeam_backend backend,
                                         usbeam_clutter_plan **plan)
{
    usbeam_status st;
    if (!params || !plan) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "params and plan must not be NULL");
    *plan = NULL;
    if (backend != USBEAM_BACKEND_CPU)
        return usbeam_fail(USBEAM_ERR_NO_BACKEND, "backend: the clutter filter has no CUDA path in this build");
    if ((st = validate_params(params)) != USBEAM_OK) return st;

    usbeam_clutter_plan *p = usbeam_alloc(sizeof *p);
    if (!p) return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "clutter plan");
    p->params = *params;
    p->n_threads = max_threads() > 0 ? max_threads() : 1;
    const size_t n = params->n_frames, nt = (size_t)p->n_threads;
    int failed = 0;
    p->basis = checked_alloc(n, n, sizeof(zdouble), &failed);
    p->coef = checked_alloc(nt * n, PIXEL_BLOCK, sizeof(zdouble), &failed);
    switch (params->method) {
    case USBEAM_CLUTTER_MEAN:
    case USBEAM_CLUTTER_POLY:
        if (failed) break;
        st = build_poly_basis(p, params->method == USBEAM_CLUTTER_MEAN ? 0 : params->poly_order);
        if (st != USBEAM_OK) {
            usbeam_clutter_plan_destroy(p);
            return st;
        }
        break;
    case USBEAM_CLUTTER_SVD:
        p->gram = checked_alloc(n, n, sizeof(zdouble), &failed);
        p->gram_partial = checked_alloc(nt * (n + 1), n + 1, sizeof(zdouble), &failed);
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
        p->state = checked_alloc((size_t)p->n_state * 2, params->n_pixels, sizeof(double), &failed);
        p->y0 = checked_alloc(nt * 2 * p->init_frames, PIXEL_BLOCK, sizeof(double), &failed);
        p->natural_q = checked_alloc(p->init_frames, (size_t)p->n_state, sizeof(double), &failed);
        p->state_gain = checked_alloc(p->init_frames, (size_t)p->n_state, sizeof(double), &failed);
        if (failed) break;
        design_butterworth_highpass(p);
        if (params->iir_init == USBEAM_IIR_INIT_PROJECTION && (st = prepare_projection_init(p)) != USBEAM_OK) {
            usbeam_clutter_plan_destroy(p);
            return st;
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
    switch (plan->params.method) {
    case USBEAM_CLUTTER_MEAN:
    case USBEAM_CLUTTER_POLY:
        apply_projection(plan, in, out);
        break;
    case USBEAM_CLUTTER_SVD:
        svd_filter(plan, in, out);
        break;
    case USBEAM_CLUTTER_IIR:
        iir_filter(plan, in, out);
        plan->started = 1;
        break;
    }
    return USBEAM_OK;
}

usbeam_status usbeam_clutter_reset(usbeam_clutter_plan *plan)
{
    if (!plan) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "plan must not be NULL");
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
    if (plan->last_low < 0) return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "plan: not executed yet");
    if (singular_values) memcpy(singular_values, plan->singular_values, plan->params.n_frames * sizeof(double));
    if (low) *low = plan->last_low;
    if (high) *high = plan->last_high;
    return USBEAM_OK;
}

void usbeam_clutter_plan_destroy(usbeam_clutter_plan *plan)
{
    if (!plan) return;
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
    usbeam_free(plan->natural_q);
    usbeam_free(plan->state_gain);
    usbeam_free(plan->y0);
    usbeam_free(plan);
}
