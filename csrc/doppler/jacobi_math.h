/*
 * jacobi_math.h - Hermitian Jacobi eigen-decomposition in the parallel (round-robin) ordering,
 * shared by the CUDA SVD clutter filter (cuda/clutter_svd.cu: one thread group per pair of a
 * step) and the host (usbeam_jacobi_round_robin, checked by tests/c/test_jacobi.c against the
 * CPU backend's cyclic Jacobi in csrc/clutter_svd.c).  Header-only, `static inline USBEAM_HD`:
 * gcc and nvcc compile the same per-pair code.
 *
 * Layout: a, b, v complex double [n][n] row-major (a(r, c) at a[r * n + c]), n <= USBEAM_JACOBI_MAX_N.
 *   a: the Hermitian matrix, destroyed: on return its diagonal holds the eigenvalues (unsorted)
 *   b: scratch of the same size (the half-rotated matrix A U between the two phases of a step)
 *   v: the eigenvectors, column k for eigenvalue a(k, k)
 *
 * Algorithm: one sweep = m - 1 steps, m = n rounded up to even (an odd n gets a dummy index n
 * that is never touched).  The steps follow the round-robin (circle) tournament: index m - 1
 * stays, the others turn, so each step pairs the indices into m / 2 disjoint (p, q) and each pair
 * meets once per sweep.  In a step every rotation U_pq is computed from the same A (disjoint
 * pairs read disjoint 2 x 2 blocks), then
 *   column phase: B = A U and V <- V U    (pair k writes columns p_k, q_k only)
 *   row phase:    A = U^H B               (pair k writes rows p_k, q_k only)
 * so the pairs of a step are independent within a phase and a step costs two barriers on the
 * GPU (B double-buffers A: the rotations of the next step read A while nothing writes it).
 * The rotation is the CPU's: a phase e^{i phi} = a_pq / |a_pq| makes the pair real, then the
 * real Jacobi rotation with the stable tangent t = sign(theta) / (|theta| + sqrt(theta^2 + 1)),
 * theta = (a_qq - a_pp) / (2 |a_pq|) (Golub & Van Loan, Matrix Computations, 4th ed., 8.5;
 * parallel ordering: Brent & Luk, SIAM J. Sci. Stat. Comput. 6 (1985) 69-84).  a_pq, a_qp are
 * then set to zero and the diagonal to its real part, as the CPU does.  A pair whose |a_pq|^2
 * is below USBEAM_JACOBI_NEGLIGIBLE ||A||_F^2 is left alone; sweeps stop when the upper
 * off-diagonal energy is at most USBEAM_JACOBI_TOLERANCE ||A||_F^2 (the CPU's thresholds).
 */
#ifndef USBEAM_JACOBI_MATH_H
#define USBEAM_JACOBI_MATH_H

#include "common/usbeam_math.h"

#define USBEAM_JACOBI_MAX_N 128
#define USBEAM_JACOBI_MAX_SWEEPS 60
#define USBEAM_JACOBI_TOLERANCE 1e-30
#define USBEAM_JACOBI_NEGLIGIBLE 1e-34

/* complex double, layout-compatible with double complex, double2 and cuDoubleComplex */
typedef struct usbeam_zd {
    double re, im;
} usbeam_zd;

typedef struct usbeam_jacobi_rotation {
    double c, s;     /* real rotation */
    usbeam_zd phase; /* a_pq / |a_pq| */
    int active;      /* 0: the pair is left as it is (dummy index, negligible a_pq) */
} usbeam_jacobi_rotation;

static inline USBEAM_HD usbeam_zd usbeam_zd_make(double re, double im)
{
    usbeam_zd r = {re, im};
    return r;
}

static inline USBEAM_HD usbeam_zd usbeam_zd_mul(usbeam_zd x, usbeam_zd y)
{
    usbeam_zd r = {x.re * y.re - x.im * y.im, x.re * y.im + x.im * y.re};
    return r;
}

static inline USBEAM_HD double usbeam_zd_norm2(usbeam_zd x) { return x.re * x.re + x.im * x.im; }

/* Steps per sweep and pairs per step for an n x n matrix. */
static inline USBEAM_HD int usbeam_jacobi_steps(int n) { return n + (n & 1) - 1; }
static inline USBEAM_HD int usbeam_jacobi_pairs(int n) { return (n + 1) / 2; }

/* Pair `slot` (0 <= slot < pairs) of step `step` (0 <= step < steps): p < q; q == n is the
 * dummy index of an odd n. */
static inline USBEAM_HD void usbeam_jacobi_pair(int n, int step, int slot, int *p, int *q)
{
    const int turning = n + (n & 1) - 1; /* indices 0 .. turning-1 turn, index `turning` stays */
    int x = step, y = turning;
    if (slot > 0) {
        x = (step + slot) % turning;
        y = (step - slot + turning) % turning;
    }
    *p = x < y ? x : y;
    *q = x < y ? y : x;
}

/* The rotation that zeroes a(p, q), from a(p, p), a(q, q), a(p, q); total = ||A||_F^2. */
static inline USBEAM_HD usbeam_jacobi_rotation usbeam_jacobi_rotation_for(const usbeam_zd *a, int n, int p, int q,
                                                                          double total)
{
    usbeam_jacobi_rotation u = {1.0, 0.0, {1.0, 0.0}, 0};
    if (q >= n) return u;
    const usbeam_zd apq = a[p * n + q];
    const double h = sqrt(usbeam_zd_norm2(apq));
    if (h <= 1e-300 || h * h <= USBEAM_JACOBI_NEGLIGIBLE * total) return u;
    const double theta = (a[q * n + q].re - a[p * n + p].re) / (2.0 * h);
    const double t = (theta >= 0 ? 1.0 : -1.0) / (fabs(theta) + sqrt(theta * theta + 1.0));
    u.c = 1.0 / sqrt(t * t + 1.0);
    u.s = t * u.c;
    u.phase.re = apq.re / h;
    u.phase.im = apq.im / h;
    u.active = 1;
    return u;
}

/* Column phase of pair (p, q) for rows first, first + stride, ... < n:
 * B(r, p) = c A(r, p) - s e^{-i phi} A(r, q),  B(r, q) = s A(r, p) + c e^{-i phi} A(r, q), and V alike
 * in place.  An inactive pair (or a dummy partner) copies its columns of A into B. */
static inline USBEAM_HD void usbeam_jacobi_columns(const usbeam_zd *a, usbeam_zd *b, usbeam_zd *v, int n, int p,
                                                   int q, const usbeam_jacobi_rotation *u, int first, int stride)
{
    if (!u->active) {
        for (int r = first; r < n; r += stride) {
            b[r * n + p] = a[r * n + p];
            if (q < n) b[r * n + q] = a[r * n + q];
        }
        return;
    }
    const usbeam_zd w = {u->phase.re, -u->phase.im};
    const usbeam_zd sw = {u->s * w.re, u->s * w.im}, cw = {u->c * w.re, u->c * w.im};
    for (int r = first; r < n; r += stride) {
        const usbeam_zd arp = a[r * n + p], arq = a[r * n + q];
        const usbeam_zd x = usbeam_zd_mul(sw, arq), y = usbeam_zd_mul(cw, arq);
        b[r * n + p] = usbeam_zd_make(u->c * arp.re - x.re, u->c * arp.im - x.im);
        b[r * n + q] = usbeam_zd_make(u->s * arp.re + y.re, u->s * arp.im + y.im);
        const usbeam_zd vrp = v[r * n + p], vrq = v[r * n + q];
        const usbeam_zd vx = usbeam_zd_mul(sw, vrq), vy = usbeam_zd_mul(cw, vrq);
        v[r * n + p] = usbeam_zd_make(u->c * vrp.re - vx.re, u->c * vrp.im - vx.im);
        v[r * n + q] = usbeam_zd_make(u->s * vrp.re + vy.re, u->s * vrp.im + vy.im);
    }
}

/* Row phase of pair (p, q) for columns first, first + stride, ... < n:
 * A(p, k) = c B(p, k) - s e^{i phi} B(q, k),  A(q, k) = s B(p, k) + c e^{i phi} B(q, k); the
 * rotated pair's off-diagonal entries are set to zero and its diagonal to its real part (exact
 * in exact arithmetic; this keeps rounding from leaving residue there). */
static inline USBEAM_HD void usbeam_jacobi_rows(const usbeam_zd *b, usbeam_zd *a, int n, int p, int q,
                                                const usbeam_jacobi_rotation *u, int first, int stride)
{
    if (!u->active) {
        for (int k = first; k < n; k += stride) {
            a[p * n + k] = b[p * n + k];
            if (q < n) a[q * n + k] = b[q * n + k];
        }
        return;
    }
    const usbeam_zd sph = {u->s * u->phase.re, u->s * u->phase.im}, cph = {u->c * u->phase.re, u->c * u->phase.im};
    for (int k = first; k < n; k += stride) {
        const usbeam_zd bpk = b[p * n + k], bqk = b[q * n + k];
        const usbeam_zd x = usbeam_zd_mul(sph, bqk), y = usbeam_zd_mul(cph, bqk);
        usbeam_zd apk = {u->c * bpk.re - x.re, u->c * bpk.im - x.im};
        usbeam_zd aqk = {u->s * bpk.re + y.re, u->s * bpk.im + y.im};
        if (k == p) {
            apk.im = 0.0;
            aqk.re = aqk.im = 0.0;
        } else if (k == q) {
            apk.re = apk.im = 0.0;
            aqk.im = 0.0;
        }
        a[p * n + k] = apk;
        a[q * n + k] = aqk;
    }
}

/* Upper off-diagonal energy sum_{r < c} |a(r, c)|^2. */
static inline USBEAM_HD double usbeam_jacobi_off(const usbeam_zd *a, int n)
{
    double off = 0.0;
    for (int r = 0; r < n; ++r)
        for (int c = r + 1; c < n; ++c) off += usbeam_zd_norm2(a[r * n + c]);
    return off;
}

/* The whole solver on the host, the schedule the CUDA kernel runs (pairs one after another
 * inside a phase, which gives the same numbers as running them at once: they write disjoint
 * entries).  Returns the sweeps that rotated (USBEAM_JACOBI_MAX_SWEEPS: not converged), or -1
 * when n is outside 1 .. USBEAM_JACOBI_MAX_N. */
static inline int usbeam_jacobi_round_robin(usbeam_zd *a, usbeam_zd *b, usbeam_zd *v, int n)
{
    if (n < 1 || n > USBEAM_JACOBI_MAX_N) return -1;
    usbeam_jacobi_rotation rot[USBEAM_JACOBI_MAX_N / 2];
    double total = 0.0;
    for (int i = 0; i < n * n; ++i) {
        total += usbeam_zd_norm2(a[i]);
        v[i] = usbeam_zd_make(i / n == i % n ? 1.0 : 0.0, 0.0);
    }
    const int steps = usbeam_jacobi_steps(n), pairs = usbeam_jacobi_pairs(n);
    int sweep = 0;
    for (; total > 0.0 && sweep < USBEAM_JACOBI_MAX_SWEEPS; ++sweep) {
        if (usbeam_jacobi_off(a, n) <= USBEAM_JACOBI_TOLERANCE * total) break;
        for (int step = 0; step < steps; ++step) {
            for (int k = 0; k < pairs; ++k) {
                int p, q;
                usbeam_jacobi_pair(n, step, k, &p, &q);
                rot[k] = usbeam_jacobi_rotation_for(a, n, p, q, total);
                usbeam_jacobi_columns(a, b, v, n, p, q, &rot[k], 0, 1);
            }
            for (int k = 0; k < pairs; ++k) {
                int p, q;
                usbeam_jacobi_pair(n, step, k, &p, &q);
                usbeam_jacobi_rows(b, a, n, p, q, &rot[k], 0, 1);
            }
        }
    }
    return sweep;
}

#endif
