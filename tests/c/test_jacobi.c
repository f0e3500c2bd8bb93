/*
 * test_jacobi.c - the round-robin (parallel-ordering) Hermitian Jacobi of csrc/jacobi_math.h,
 * which the CUDA SVD clutter filter runs one thread group per pair, checked on the host:
 *   - the schedule: every pair p < q < n once per sweep, the pairs of a step disjoint (n = 1..128);
 *   - random Hermitian matrices (n = 1..40, 47, 63..65, 96, 127, 128): V^H V = I and
 *     A V = V Lambda to 16 n eps ||A||_F, convergence well inside the sweep cap;
 *   - known spectra A = Q diag(lambda) Q^H (Q a random unitary) with repeated eigenvalues,
 *     a zero block, a rank-one matrix and a diagonal one: eigenvalues against lambda;
 *   - against the CPU backend's cyclic Jacobi (csrc/clutter_svd.c, through the public SVD
 *     clutter filter): the singular values of random ensembles (odd and even n_frames), and the
 *     filtered ensemble C V_K V_K^H rebuilt from the round-robin eigenvectors.
 * Built by `make ctest` and `make asan`.  Prints "N passed, N failed".
 */
#include "doppler/jacobi_math.h"
#include "usbeam.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

#define MAXN USBEAM_JACOBI_MAX_N
#define EPS 2.220446049250313e-16
/* Random spectra converge in <= 9 sweeps at n = 128; repeated and graded (120 dB) spectra take
 * ~20, as the CPU's cyclic ordering does on the same matrices (both stop at the same relative
 * off-diagonal threshold, which rounding noise of ~eps ||A|| per entry only just allows). */
#define MAX_SWEEPS_EXPECTED 30

static uint64_t rng_state = 0x9e3779b97f4a7c15u;

/* splitmix64 -> uniform in [-1, 1) */
static double uniform(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    z ^= z >> 31;
    return (double)(z >> 11) * (2.0 / 9007199254740992.0) - 1.0;
}

static usbeam_zd zconj(usbeam_zd x) { return usbeam_zd_make(x.re, -x.im); }
static double zabs(usbeam_zd x) { return sqrt(usbeam_zd_norm2(x)); }

static void random_hermitian(usbeam_zd *a, int n)
{
    for (int r = 0; r < n; ++r) {
        a[r * n + r] = usbeam_zd_make(uniform(), 0.0);
        for (int c = r + 1; c < n; ++c) {
            a[r * n + c] = usbeam_zd_make(uniform(), uniform());
            a[c * n + r] = zconj(a[r * n + c]);
        }
    }
}

/* q: random unitary [n][n] (modified Gram-Schmidt on the columns of a random complex matrix) */
static void random_unitary(usbeam_zd *q, int n)
{
    for (int i = 0; i < n * n; ++i) q[i] = usbeam_zd_make(uniform(), uniform());
    for (int k = 0; k < n; ++k) {
        for (int j = 0; j < k; ++j) {
            usbeam_zd dot = {0.0, 0.0}; /* q_j^H q_k */
            for (int r = 0; r < n; ++r) {
                usbeam_zd t = usbeam_zd_mul(zconj(q[r * n + j]), q[r * n + k]);
                dot.re += t.re;
                dot.im += t.im;
            }
            for (int r = 0; r < n; ++r) {
                usbeam_zd t = usbeam_zd_mul(dot, q[r * n + j]);
                q[r * n + k].re -= t.re;
                q[r * n + k].im -= t.im;
            }
        }
        double norm = 0.0;
        for (int r = 0; r < n; ++r) norm += usbeam_zd_norm2(q[r * n + k]);
        norm = sqrt(norm);
        for (int r = 0; r < n; ++r) q[r * n + k] = usbeam_zd_make(q[r * n + k].re / norm, q[r * n + k].im / norm);
    }
}

static double frobenius(const usbeam_zd *a, int n)
{
    double s = 0.0;
    for (int i = 0; i < n * n; ++i) s += usbeam_zd_norm2(a[i]);
    return sqrt(s);
}

/* max |V^H V - I| and max |A V - V diag(lambda)| / ||A||_F for the original a0 */
static void residuals(const usbeam_zd *a0, const usbeam_zd *v, const double *lambda, int n, double *orth,
                      double *res)
{
    const double norm = frobenius(a0, n);
    *orth = *res = 0.0;
    for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j) {
            usbeam_zd g = {0.0, 0.0}, av = {0.0, 0.0};
            for (int r = 0; r < n; ++r) {
                usbeam_zd t = usbeam_zd_mul(zconj(v[r * n + i]), v[r * n + j]);
                g.re += t.re;
                g.im += t.im;
                t = usbeam_zd_mul(a0[i * n + r], v[r * n + j]);
                av.re += t.re;
                av.im += t.im;
            }
            g.re -= i == j ? 1.0 : 0.0;
            *orth = fmax(*orth, zabs(g));
            av.re -= v[i * n + j].re * lambda[j];
            av.im -= v[i * n + j].im * lambda[j];
            *res = fmax(*res, zabs(av) / (norm > 0.0 ? norm : 1.0));
        }
}

static int cmp_descending(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a < b) - (a > b);
}

static usbeam_zd a[MAXN * MAXN], a0[MAXN * MAXN], b[MAXN * MAXN], v[MAXN * MAXN], q[MAXN * MAXN];
static double lambda[MAXN];

static void test_schedule(void)
{
    static unsigned char met[MAXN + 1][MAXN + 1];
    int ok = 1;
    for (int n = 1; n <= MAXN; ++n) {
        memset(met, 0, sizeof met);
        for (int step = 0; step < usbeam_jacobi_steps(n); ++step) {
            unsigned char used[MAXN + 1] = {0};
            for (int k = 0; k < usbeam_jacobi_pairs(n); ++k) {
                int p, qq;
                usbeam_jacobi_pair(n, step, k, &p, &qq);
                ok &= 0 <= p && p < qq && qq <= n && (qq < n || (n & 1)) && !used[p] && !used[qq];
                used[p] = used[qq] = 1;
                if (qq < n) met[p][qq]++;
            }
        }
        for (int p = 0; p < n; ++p)
            for (int qq = p + 1; qq < n; ++qq) ok &= met[p][qq] == 1;
    }
    CHECK(ok);
}

static void test_random_hermitian(void)
{
    int sizes[60], n_sizes = 0;
    for (int n = 1; n <= 40; ++n) sizes[n_sizes++] = n;
    const int more[] = {47, 63, 64, 65, 96, 127, 128};
    for (size_t i = 0; i < sizeof more / sizeof more[0]; ++i) sizes[n_sizes++] = more[i];
    int worst_sweeps = 0;
    double worst_orth = 0.0, worst_res = 0.0;
    for (int s = 0; s < n_sizes; ++s) {
        const int n = sizes[s];
        random_hermitian(a, n);
        memcpy(a0, a, sizeof(usbeam_zd) * (size_t)n * n);
        const int sweeps = usbeam_jacobi_round_robin(a, b, v, n);
        for (int k = 0; k < n; ++k) lambda[k] = a[k * n + k].re;
        double orth, res;
        residuals(a0, v, lambda, n, &orth, &res);
        const int ok = sweeps >= 0 && sweeps < MAX_SWEEPS_EXPECTED && orth <= 16.0 * n * EPS && res <= 16.0 * n * EPS;
        if (!ok) fprintf(stderr, "n = %d: %d sweeps, orthonormality %.3g, residual %.3g\n", n, sweeps, orth, res);
        CHECK(ok);
        worst_sweeps = sweeps > worst_sweeps ? sweeps : worst_sweeps;
        worst_orth = fmax(worst_orth, orth);
        worst_res = fmax(worst_res, res);
    }
    printf("random Hermitian n <= %d: at most %d sweeps, max|V^H V - I| %.2g, max|AV - V Lambda|/||A||_F %.2g\n",
           MAXN, worst_sweeps, worst_orth, worst_res);
}

/* A = Q diag(want) Q^H: eigenvalues against want (sorted descending, in place) */
static void check_spectrum(int n, double *want, int rotate, const char *what)
{
    if (rotate) {
        random_unitary(q, n);
        for (int r = 0; r < n; ++r)
            for (int c = 0; c < n; ++c) {
                usbeam_zd sum = {0.0, 0.0};
                for (int k = 0; k < n; ++k) {
                    usbeam_zd t = usbeam_zd_mul(q[r * n + k], zconj(q[c * n + k]));
                    sum.re += want[k] * t.re;
                    sum.im += want[k] * t.im;
                }
                a[r * n + c] = sum;
            }
        for (int r = 0; r < n; ++r) { /* exactly Hermitian, as a Gram matrix is */
            a[r * n + r].im = 0.0;
            for (int c = r + 1; c < n; ++c) a[c * n + r] = zconj(a[r * n + c]);
        }
    } else {
        for (int i = 0; i < n * n; ++i) a[i] = usbeam_zd_make(i / n == i % n ? want[i / n] : 0.0, 0.0);
    }
    memcpy(a0, a, sizeof(usbeam_zd) * (size_t)n * n);
    const int sweeps = usbeam_jacobi_round_robin(a, b, v, n);
    for (int k = 0; k < n; ++k) lambda[k] = a[k * n + k].re;
    double orth, res;
    residuals(a0, v, lambda, n, &orth, &res);
    qsort(want, (size_t)n, sizeof(double), cmp_descending);
    double got[MAXN], scale = 0.0, err = 0.0;
    memcpy(got, lambda, sizeof(double) * (size_t)n);
    qsort(got, (size_t)n, sizeof(double), cmp_descending);
    for (int k = 0; k < n; ++k) {
        scale = fmax(scale, fabs(want[k]));
        err = fmax(err, fabs(got[k] - want[k]));
    }
    const int ok = sweeps >= 0 && sweeps < MAX_SWEEPS_EXPECTED && orth <= 16.0 * n * EPS && res <= 16.0 * n * EPS &&
                   err <= 64.0 * n * EPS * (scale > 0.0 ? scale : 1.0);
    if (!ok)
        fprintf(stderr, "%s, n = %d: %d sweeps, eigenvalue error %.3g (scale %.3g), orth %.3g, residual %.3g\n", what,
                n, sweeps, err, scale, orth, res);
    CHECK(ok);
}

static void test_known_spectra(void)
{
    double want[MAXN];
    const int sizes[] = {2, 3, 5, 8, 16, 17, 32, 33, 64, 127, 128};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; ++s) {
        const int n = sizes[s];
        for (int k = 0; k < n; ++k) want[k] = (double)(k % 3) - 0.5; /* three eigenvalues, each repeated */
        check_spectrum(n, want, 1, "three repeated eigenvalues");
        for (int k = 0; k < n; ++k) want[k] = k < n / 2 ? 0.0 : 1e3 * uniform(); /* a zero block */
        check_spectrum(n, want, 1, "half zero");
        for (int k = 0; k < n; ++k) want[k] = k == 0 ? 7.5 : 0.0;
        check_spectrum(n, want, 1, "rank one");
        for (int k = 0; k < n; ++k) want[k] = 1.0 + 1e-9 * k; /* a tight cluster */
        check_spectrum(n, want, 1, "cluster");
        for (int k = 0; k < n; ++k) want[k] = uniform();
        check_spectrum(n, want, 0, "diagonal");
        for (int k = 0; k < n; ++k) want[k] = pow(10.0, -12.0 * k / n); /* 120 dB of dynamic range */
        check_spectrum(n, want, 1, "graded");
    }
    for (int k = 0; k < 4; ++k) want[k] = 0.0;
    check_spectrum(4, want, 0, "zero matrix");
}

/* The CPU backend's SVD clutter filter on a random ensemble; the same Gram matrix in double
 * through the round-robin Jacobi: singular values and the filtered ensemble agree. */
static void test_against_cpu_backend(int n_frames, int low)
{
    enum { N_PIXELS = 300 };
    static float iq[2 * MAXN * N_PIXELS], out[2 * MAXN * N_PIXELS];
    const int n = n_frames;
    for (int t = 0; t < n; ++t)
        for (int i = 0; i < N_PIXELS; ++i) { /* a strong, slowly varying component plus noise */
            const double tissue = 50.0 * (1.0 + 0.2 * sin(0.05 * t + i));
            iq[2 * (t * N_PIXELS + i)] = (float)(tissue * cos(0.3 * i) + uniform());
            iq[2 * (t * N_PIXELS + i) + 1] = (float)(tissue * sin(0.3 * i) + uniform());
        }
    usbeam_clutter_params prm = {.n_frames = (size_t)n, .n_pixels = N_PIXELS, .method = USBEAM_CLUTTER_SVD,
                                 .svd_low = low, .svd_high = -1};
    usbeam_clutter_plan *plan = NULL;
    CHECK(usbeam_clutter_plan_create(&prm, USBEAM_BACKEND_CPU, &plan) == USBEAM_OK);
    if (!plan) return;
    for (size_t i = 0; i < 2 * (size_t)n * N_PIXELS; ++i) out[i] = NAN;
    CHECK(usbeam_clutter_execute(plan, iq, out) == USBEAM_OK);
    double sv[MAXN];
    int got_low = -1, got_high = -1;
    CHECK(usbeam_clutter_svd_info(plan, sv, &got_low, &got_high) == USBEAM_OK);
    usbeam_clutter_plan_destroy(plan);

    for (int r = 0; r < n; ++r) /* G(r, c) = sum_i conj(x_r[i]) x_c[i], exact float products in double */
        for (int c = 0; c < n; ++c) {
            usbeam_zd sum = {0.0, 0.0};
            for (int i = 0; i < N_PIXELS; ++i) {
                const usbeam_zd xr = {iq[2 * (r * N_PIXELS + i)], iq[2 * (r * N_PIXELS + i) + 1]};
                const usbeam_zd xc = {iq[2 * (c * N_PIXELS + i)], iq[2 * (c * N_PIXELS + i) + 1]};
                const usbeam_zd t = usbeam_zd_mul(zconj(xr), xc);
                sum.re += t.re;
                sum.im += t.im;
            }
            a[r * n + c] = sum;
        }
    const int sweeps = usbeam_jacobi_round_robin(a, b, v, n);
    CHECK(sweeps >= 0 && sweeps < USBEAM_JACOBI_MAX_SWEEPS);
    printf("ensemble n_frames = %d: %d sweeps\n", n, sweeps);
    int order[MAXN];
    for (int k = 0; k < n; ++k) order[k] = k;
    for (int i = 1; i < n; ++i) { /* stable, descending */
        const int key = order[i];
        int j = i;
        while (j > 0 && a[order[j - 1] * n + order[j - 1]].re < a[key * n + key].re) {
            order[j] = order[j - 1];
            --j;
        }
        order[j] = key;
    }
    double sv_err = 0.0;
    for (int k = 0; k < n; ++k) {
        const double lam = a[order[k] * n + order[k]].re;
        sv_err = fmax(sv_err, fabs((lam > 0.0 ? sqrt(lam) : 0.0) - sv[k]));
    }
    CHECK(sv_err <= 1e-10 * sv[0]);
    CHECK(got_low == low && got_high == n - 1);

    /* C V_K V_K^H with C(i, s) = x(s, i): out(t, i) = sum_{k >= low} conj(v_k(t)) sum_s v_k(s) x(s, i) */
    double worst = 0.0, scale = 0.0;
    for (int i = 0; i < N_PIXELS; ++i) {
        usbeam_zd coef[MAXN];
        for (int k = low; k < n; ++k) {
            usbeam_zd sum = {0.0, 0.0};
            for (int s = 0; s < n; ++s) {
                const usbeam_zd x = {iq[2 * (s * N_PIXELS + i)], iq[2 * (s * N_PIXELS + i) + 1]};
                const usbeam_zd t = usbeam_zd_mul(v[s * n + order[k]], x);
                sum.re += t.re;
                sum.im += t.im;
            }
            coef[k] = sum;
        }
        for (int t = 0; t < n; ++t) {
            usbeam_zd y = {0.0, 0.0};
            for (int k = low; k < n; ++k) {
                const usbeam_zd z = usbeam_zd_mul(zconj(v[t * n + order[k]]), coef[k]);
                y.re += z.re;
                y.im += z.im;
            }
            const size_t o = 2 * ((size_t)t * N_PIXELS + (size_t)i);
            worst = fmax(worst, isnan(out[o]) ? INFINITY : fmax(fabs(out[o] - y.re), fabs(out[o + 1] - y.im)));
            scale = fmax(scale, fmax(fabs(iq[o]), fabs(iq[o + 1])));
        }
    }
    /* float32 output of a double projection: a few float ulps of the input scale */
    const int ok = worst <= 1e-6 * scale;
    if (!ok) fprintf(stderr, "n_frames = %d, low = %d: filtered ensemble off by %.3g (scale %.3g)\n", n, low, worst, scale);
    CHECK(ok);
}

int main(void)
{
    test_schedule();
    test_random_hermitian();
    test_known_spectra();
    const int frames[] = {2, 3, 8, 15, 16, 32, 33, 64, 127, 128};
    for (size_t i = 0; i < sizeof frames / sizeof frames[0]; ++i) test_against_cpu_backend(frames[i], 1);
    test_against_cpu_backend(17, 3);
    return check_summary();
}
