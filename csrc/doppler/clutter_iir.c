/*
 * clutter_iir.c - IIR Butterworth high-pass clutter filter along slow time, CPU backend.
 *
 * Layout: in, out complex64[n_frames][n_pixels]; state double[order][2 (re, im)][n_pixels],
 * carried from one execute to the next (a stream filtered in blocks equals the whole record).
 * Units: cut-off as a fraction of the PRF.
 * Design: analog Butterworth prototype -> high-pass -> bilinear transform with pre-warping, in
 * double, as second-order sections (transposed direct form II).  Initialisation after a reset:
 * zero state, or projection (Chornoboy, IEEE TSP 1990; Kadi & Loupas, IEEE UFFC 1995): the
 * initial state that minimises the output energy over the first L frames, applied as
 * y = y0 - Q Q^T y0 with Q an orthonormal basis of the natural (zero-input) responses, and the
 * state after frame L moved by -T R^{-1} Q^T y0 so the stream continues from that optimum.
 * NaN or inf: one such sample would poison its pixel's state for every later block, so the
 * filter reads p->state at frame 0 and writes p->state_next (updated in place from then on:
 * the same state traffic as an in-place update); the caller swaps the buffers only when the
 * block was finite.  The test costs two compares per pixel and block: the first section's z1
 * after the last frame.  A non-finite input v makes w = b0 v + z1 (b0 > 0) and then z1 non-finite,
 * and a non-finite z1 stays so (w = b0 v + z1, z1' = b1 v - a1 w + z2: IEEE sums and products
 * of a NaN or an inf with finite values, 0 included, are NaN or inf), while finite samples
 * keep the double state finite (a stable filter of float32 data cannot overflow a double).
 */
#include "doppler/clutter_internal.h"

#include <math.h>
#include <string.h>


void clutter_iir_design(usbeam_clutter_plan *p)
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

usbeam_status clutter_iir_prepare_projection(usbeam_clutter_plan *p)
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

int clutter_iir_filter(usbeam_clutter_plan *p, const float *in, float *out, usbeam_interrupt *interrupt)
{
    const size_t n_frames = p->params.n_frames, n_pixels = p->params.n_pixels;
    const ptrdiff_t n_blocks = (ptrdiff_t)((n_pixels + PIXEL_BLOCK - 1) / PIXEL_BLOCK);
    const int project = !p->started && p->params.iir_init == USBEAM_IIR_INIT_PROJECTION;
    const size_t L = project ? p->init_frames : 0;
    const int m = p->n_state;
    double *const state = p->state_next;
    int bad = 0;
#pragma omp parallel num_threads(usbeam_team_size(p->n_threads)) reduction(| : bad)
    {
        double *y0 = p->y0 + (size_t)clutter_thread_id() * 2 * p->init_frames * PIXEL_BLOCK;
#pragma omp for schedule(static)
        for (ptrdiff_t blk = 0; blk < n_blocks; ++blk) {
            if (usbeam_interrupt_poll(interrupt)) continue;
            size_t first = (size_t)blk * PIXEL_BLOCK;
            size_t count = n_pixels - first < PIXEL_BLOCK ? n_pixels - first : PIXEL_BLOCK;
            int nonfinite = 0;
            for (size_t t = 0; t < n_frames; ++t) {
                const float *x = in + 2 * (t * n_pixels + first);
                float *y = out + 2 * (t * n_pixels + first);
                /* frame 0 reads the committed state and writes state_next; later frames update
                 * state_next in place (every state row is written at every frame) */
                const double *const from = t == 0 ? p->state : state;
                for (int part = 0; part < 2; ++part) {
                    double buf[PIXEL_BLOCK];
                    for (size_t i = 0; i < count; ++i) buf[i] = x[2 * i + part];
                    int slot = 0;
                    for (int s = 0; s < p->n_sections; ++s) {
                        const double *b = p->sos_b[s], *a = p->sos_a[s];
                        const size_t row1 = ((size_t)(slot * 2 + part)) * n_pixels + first;
                        const double *z1_in = from + row1;
                        double *z1 = state + row1;
                        if (p->section_order[s] == 2) {
                            const size_t row2 = ((size_t)((slot + 1) * 2 + part)) * n_pixels + first;
                            const double *z2_in = from + row2;
                            double *z2 = state + row2;
#pragma omp simd
                            for (size_t i = 0; i < count; ++i) {
                                double v = buf[i], w = b[0] * v + z1_in[i];
                                double z2_old = z2_in[i];
                                z1[i] = b[1] * v - a[1] * w + z2_old;
                                z2[i] = b[2] * v - a[2] * w;
                                buf[i] = w;
                            }
                        } else {
#pragma omp simd
                            for (size_t i = 0; i < count; ++i) {
                                double v = buf[i], w = b[0] * v + z1_in[i];
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
                            double *z = state + ((size_t)(j * 2 + part)) * n_pixels + first;
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
            for (int part = 0; part < 2; ++part) { /* z1 of the first section: see the top of the file */
                const double *z1 = state + (size_t)part * n_pixels + first;
                for (size_t i = 0; i < count; ++i) nonfinite |= !(z1[i] - z1[i] == 0.0);
            }
            bad |= nonfinite;
        }
    }
    return bad;
}

