/*
 * das_setup.c - delay-and-sum for any probe (linear, phased, convex, matrix arrays):
 * parameter validation, plan creation (copies of the geometry, element frames from the
 * normals, receive apertures, the receive table) and PyMUST's automatic f-number.  The
 * execute kernel is in das.c; the conventions are in usbeam.h (family das) and usbeam_math.h.
 *
 * Layouts: element_positions, element_normals (n_elements, 3) and points (n_points, 3) as
 * (x, y, z) in m.  Two aperture models: the linear array's (x strictly increasing, normals
 * +z, a line: |x_p - x_e| <= z_p / 2F, MUST's own predicate, a binary search) and the
 * general one (each element's acceptance cone around its normal, usbeam_math.h; the point's
 * aperture is the index range from its first to its last accepted element, the elements in
 * between outside the cone weighing 0).
 * Receive table (das_internal.h): per point, per element of its aperture, the receive
 * delay in samples (double) and the window times the IQ receive rotation (float32), shared
 * by every transmit (das_delays.c, either aperture model); transmit times per (point,
 * transmit).
 * Reference: V. Perrot, M. Polichetti, F. Varray, D. Garcia, "So you think you can DAS?
 * A viewpoint on delay-and-sum beamforming", Ultrasonics 111 (2021) 106309; MUST/PyMUST
 * dasmtx and txdelay for the conventions; Brent, "Algorithms for Minimization without
 * Derivatives" (1973), ch. 5, and Forsythe, Malcolm & Moler's fmin for the bounded
 * minimiser.
 */
#include "beamform/das_internal.h"
#include "beamform/das_isa.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

_Static_assert((int)USBEAM_DAS_NEAREST == USBEAM_INTERP_NEAREST && (int)USBEAM_DAS_LINEAR == USBEAM_INTERP_LINEAR &&
                   (int)USBEAM_DAS_CUBIC == USBEAM_INTERP_CUBIC,
               "interpolation codes of usbeam.h and usbeam_math.h must agree");
_Static_assert((int)USBEAM_DAS_RECT == USBEAM_WINDOW_RECT && (int)USBEAM_DAS_HANN == USBEAM_WINDOW_HANN &&
                   (int)USBEAM_DAS_TUKEY == USBEAM_WINDOW_TUKEY,
               "window codes of usbeam.h and usbeam_math.h must agree");

#define DEFAULT_MAX_TABLE_BYTES ((size_t)1 << 30)

/* ---- automatic f-number (PyMUST dasmtx) ------------------------------------------ */

static double sinc_pi(double x) { return x == 0.0 ? 1.0 : sin(USBEAM_PI * x) / (USBEAM_PI * x); }

/* |directivity(th) - 0.71|, the cost whose minimiser is the half-angle of the aperture. */
static double directivity_cost(double theta, double width_over_lambda)
{
    return fabs(cos(theta) * sinc_pi(width_over_lambda * sin(theta)) - 0.71);
}

static double sign_or_one(double v) { return v > 0.0 ? 1.0 : (v < 0.0 ? -1.0 : 1.0); }

/* Brent's bounded minimiser (golden section with parabolic steps) on [lo, hi], stopping
 * when the bracket is within 2 tol of its midpoint, tol = sqrt_eps |x| + xtol / 3.  The
 * step rules and the constants follow scipy.optimize.fminbound so the coarse xtol gives
 * the same iterate (PyMUST's f-number depends on it). */
static double brent_bounded(double lo, double hi, double xtol, double width_over_lambda)
{
    const double sqrt_eps = sqrt(2.2e-16);
    const double golden = 0.5 * (3.0 - sqrt(5.0));
    double a = lo, b = hi;
    double best = a + golden * (b - a);  /* lowest cost so far */
    double second = best, third = best;  /* the previous two best points */
    double f_best = directivity_cost(best, width_over_lambda);
    double f_second = f_best, f_third = f_best;
    double step = 0.0, prev_step = 0.0;
    double mid = 0.5 * (a + b);
    double tol = sqrt_eps * fabs(best) + xtol / 3.0;
    for (int evaluations = 1; evaluations < 500 && fabs(best - mid) > 2.0 * tol - 0.5 * (b - a); ++evaluations) {
        int use_golden = 1;
        if (fabs(prev_step) > tol) {
            /* parabola through (best, second, third) */
            double r = (best - second) * (f_best - f_third);
            double q = (best - third) * (f_best - f_second);
            double p = (best - third) * q - (best - second) * r;
            q = 2.0 * (q - r);
            if (q > 0.0) p = -p;
            q = fabs(q);
            double older = prev_step;
            prev_step = step;
            if (fabs(p) < fabs(0.5 * q * older) && p > q * (a - best) && p < q * (b - best)) {
                use_golden = 0;
                step = p / q;
                double trial = best + step;
                if (trial - a < 2.0 * tol || b - trial < 2.0 * tol) step = tol * sign_or_one(mid - best);
            }
        }
        if (use_golden) {
            prev_step = best >= mid ? a - best : b - best;
            step = golden * prev_step;
        }
        double x = best + sign_or_one(step) * fmax(fabs(step), tol);
        double fx = directivity_cost(x, width_over_lambda);
        if (fx <= f_best) {
            if (x >= best) a = best;
            else b = best;
            third = second, f_third = f_second;
            second = best, f_second = f_best;
            best = x, f_best = fx;
        } else {
            if (x < best) a = x;
            else b = x;
            if (fx <= f_second || second == best) {
                third = second, f_third = f_second;
                second = x, f_second = fx;
            } else if (fx <= f_third || third == best || third == second) {
                third = x, f_third = fx;
            }
        }
        mid = 0.5 * (a + b);
        tol = sqrt_eps * fabs(best) + xtol / 3.0;
    }
    return best;
}

usbeam_status usbeam_das_auto_f_number(double element_width, double fc, double bandwidth, double c,
                                       double *f_number)
{
    usbeam_status st;
    if (!f_number) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "f_number must not be NULL");
    if ((st = usbeam_check_positive("width", element_width)) != USBEAM_OK) return st;
    if ((st = usbeam_check_positive("fc", fc)) != USBEAM_OK) return st;
    if ((st = usbeam_check_positive("c", c)) != USBEAM_OK) return st;
    if (!(bandwidth > 0.0 && bandwidth < 2.0))
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "bandwidth must be a fraction in (0, 2) (got %g)", bandwidth);
    const double lambda_min = c / (fc * (1.0 + bandwidth / 2.0));
    const double alpha = brent_bounded(0.0, USBEAM_PI / 2.0, USBEAM_PI / 100.0, element_width / lambda_min);
    *f_number = 1.0 / (2.0 * tan(alpha));
    return USBEAM_OK;
}

/* ---- validation ------------------------------------------------------------------ */

static usbeam_status check_finite_array(const char *name, const double *values, size_t n)
{
    for (size_t i = 0; i < n; ++i)
        if (!isfinite(values[i]))
            return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "%s must be finite (entry %zu is %g)", name, i, values[i]);
    return USBEAM_OK;
}

static size_t source_rows(const usbeam_transmit *tx) { return tx->source_rows == 4 ? 4 : 3; }

static usbeam_status check_transmit(const usbeam_transmit *tx, size_t k, size_t n_elements)
{
    if (!isfinite(tx->y))
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "transmits[%zu].y must be finite (got %g)", k, tx->y);
    switch (tx->kind) {
    case USBEAM_TRANSMIT_PLANE_WAVE:
        if (!(fabs(tx->angle) < USBEAM_PI / 2.0))
            return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "transmits[%zu].angle must be finite with |angle| < pi/2 (got %g)", k, tx->angle);
        if (!(fabs(tx->angle_y) < USBEAM_PI / 2.0))
            return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "transmits[%zu].angle_y must be finite with |angle_y| < pi/2 (got %g)", k, tx->angle_y);
        return USBEAM_OK;
    case USBEAM_TRANSMIT_DIVERGING:
        if (!isfinite(tx->x) || !(tx->z < 0.0) || !isfinite(tx->z))
            return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "transmits[%zu] source must be finite and behind the array, z < 0 (got x=%g, z=%g)", k, tx->x, tx->z);
        return USBEAM_OK;
    case USBEAM_TRANSMIT_FOCUSED:
        if (!isfinite(tx->x) || !(tx->z > 0.0) || !isfinite(tx->z))
            return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "transmits[%zu] focus must be finite and in front of the array, z > 0 (got x=%g, z=%g)", k, tx->x, tx->z);
        if (tx->axis[0] != 0.0 || tx->axis[1] != 0.0 || tx->axis[2] != 0.0) {
            const double norm = sqrt(tx->axis[0] * tx->axis[0] + tx->axis[1] * tx->axis[1] + tx->axis[2] * tx->axis[2]);
            if (!(fabs(norm - 1.0) < 1e-9))
                return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "transmits[%zu].axis must be a unit vector (norm %g)", k, norm);
        }
        return USBEAM_OK;
    case USBEAM_TRANSMIT_SOURCES:
        if (tx->n_sources == 0 || tx->n_sources > INT32_MAX / 4)
            return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "transmits[%zu].n_sources must be in [1, %d] (got %zu)", k, INT32_MAX / 4, tx->n_sources);
        if (!tx->sources) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "transmits[%zu].sources is NULL", k);
        if (tx->source_rows != 0 && tx->source_rows != 3 && tx->source_rows != 4)
            return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "transmits[%zu].source_rows must be 3 or 4 (got %d)", k, tx->source_rows);
        for (size_t i = 0; i < source_rows(tx) * tx->n_sources; ++i)
            if (!isfinite(tx->sources[i]))
                return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "transmits[%zu].sources must be finite (entry %zu is %g)", k, i, tx->sources[i]);
        return USBEAM_OK;
    case USBEAM_TRANSMIT_SYNTHETIC:
        if (tx->element >= n_elements)
            return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "transmits[%zu].element %zu is out of range (n_elements = %zu)", k, tx->element, n_elements);
        return USBEAM_OK;
    }
    return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "transmits[%zu].kind: unknown transmit kind %d", k, (int)tx->kind);
}

static usbeam_status validate(const usbeam_das_params *prm)
{
    usbeam_status st;
    if (prm->n_elements == 0 || prm->n_elements > INT32_MAX / 4)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "n_elements must be in [1, %d] (got %zu)", INT32_MAX / 4, prm->n_elements);
    if (!prm->element_positions) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "element_positions is NULL");
    if (prm->n_transmits == 0) return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "n_transmits must be >= 1");
    if (!prm->transmits) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "transmits is NULL");
    if (prm->n_points == 0) return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "points: the grid is empty");
    if (!prm->points) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "points is NULL");
    if (prm->n_frames == 0) return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "n_frames must be >= 1");
    if (prm->n_samples == 0 || prm->n_samples > INT32_MAX / 2)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "n_samples must be in [1, %d] (got %zu)", INT32_MAX / 2, prm->n_samples);
    if ((st = usbeam_check_positive("fs", prm->fs)) != USBEAM_OK) return st;
    if ((st = usbeam_check_positive("c", prm->c)) != USBEAM_OK) return st;
    if ((st = usbeam_check_finite("t0", prm->t0)) != USBEAM_OK) return st;
    if ((st = usbeam_check_nonnegative("f_number", prm->f_number)) != USBEAM_OK) return st;
    if (prm->input_dtype == USBEAM_DTYPE_COMPLEX64) {
        if ((st = usbeam_check_positive("fc", prm->fc)) != USBEAM_OK) return st;
    } else if (prm->input_dtype == USBEAM_DTYPE_FLOAT32 || prm->input_dtype == USBEAM_DTYPE_INT16) {
        if ((st = usbeam_check_nonnegative("fc", prm->fc)) != USBEAM_OK) return st;
    } else {
        return usbeam_fail(USBEAM_ERR_INVALID_DTYPE, "data: dtype must be int16, float32 (RF) or complex64 (IQ) (got code %d)", (int)prm->input_dtype);
    }
    if (prm->window != USBEAM_DAS_RECT && prm->window != USBEAM_DAS_HANN && prm->window != USBEAM_DAS_TUKEY)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "window: unknown window %d", (int)prm->window);
    if (!(prm->tukey_alpha >= 0.0 && prm->tukey_alpha <= 1.0))
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "tukey_alpha must be in [0, 1] (got %g)", prm->tukey_alpha);
    if (usbeam_interp_taps((int)prm->interpolation) == 0)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "interpolation: unknown method %d", (int)prm->interpolation);
    if ((st = check_finite_array("element_positions", prm->element_positions, 3 * prm->n_elements)) != USBEAM_OK) return st;
    if (prm->surface != 0 && prm->surface != 1)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "surface must be 0 (a line array) or 1 (a matrix array) (got %d)", prm->surface);
    if (prm->element_normals) {
        if ((st = check_finite_array("element_normals", prm->element_normals, 3 * prm->n_elements)) != USBEAM_OK) return st;
        for (size_t e = 0; e < prm->n_elements; ++e) {
            const double *nrm = prm->element_normals + 3 * e;
            const double norm = sqrt(nrm[0] * nrm[0] + nrm[1] * nrm[1] + nrm[2] * nrm[2]);
            double frame[9];
            if (!(fabs(norm - 1.0) < 1e-9) || !(nrm[2] > 0.0) || !usbeam_element_frame(nrm[0], nrm[1], nrm[2], prm->surface, frame))
                return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT,
                                   "element_normals: element %zu must have a unit normal into the medium (n_z > 0%s) (got %g, %g, %g)",
                                   e, prm->surface ? "" : ", in the x-z plane", nrm[0], nrm[1], nrm[2]);
        }
    }
    if ((st = check_finite_array("points", prm->points, 3 * prm->n_points)) != USBEAM_OK) return st;
    for (size_t k = 0; k < prm->n_transmits; ++k)
        if ((st = check_transmit(&prm->transmits[k], k, prm->n_elements)) != USBEAM_OK) return st;
    return USBEAM_OK;
}

/* ---- plan ------------------------------------------------------------------------ */

void usbeam_das_plan_destroy(usbeam_das_plan *plan)
{
    if (!plan) return;
    usbeam_das_cuda_destroy(plan->cuda);
    usbeam_block_free(plan->geometry_block);
    usbeam_block_free(plan->table_block);
    usbeam_free(plan->tile_samples);
    usbeam_free(plan->lane_first);
    usbeam_free(plan->lane_offset);
    usbeam_block_free(plan->lane_sample);
    usbeam_block_free(plan->lane_fixed);
    usbeam_free(plan->lane_base);
    usbeam_free(plan->lane_tx_fixed);
    usbeam_free(plan->lane_tx_base);
    usbeam_block_free(plan->lane_window);
    usbeam_free(plan->lane_tx);
    usbeam_free(plan->lane_least);
    usbeam_free(plan->lane_cache);
    usbeam_free(plan->lane_rot);
    usbeam_free(plan->lane_mask);
    usbeam_free(plan->lane_rows);
    usbeam_free(plan->lane_extent);
    usbeam_free(plan->lane_mirror);
    usbeam_free(plan->lane_items);
    usbeam_free(plan->scratch);
    usbeam_free(plan->tile);
    usbeam_block_free(plan->stage);
    usbeam_free(plan);
}

usbeam_cuda_exec *usbeam_das_plan_cuda(usbeam_das_plan *plan)
{
    return plan && plan->cuda ? usbeam_das_cuda_exec(plan->cuda) : NULL;
}

/* Bytes of one row of the lane table: s_rx (double, or lane_fixed's int32 and its base), the
 * window weights (float) if any, per transmit the least first tap (int32) and, with
 * lane_fixed, the valid lanes (lane_mask) */
static size_t lane_row_bytes(int fixed, int windowed, size_t n_transmits)
{
    return 16 * ((fixed ? sizeof(int32_t) : sizeof(double)) + (windowed ? sizeof(float) : 0)) +
           (fixed ? sizeof(int32_t) : 0) + n_transmits * (sizeof(int32_t) + (fixed ? sizeof(uint16_t) : 0));
}

size_t usbeam_das_table_bytes(const usbeam_das_plan *plan)
{
    if (!plan) return 0;
    if (plan->lane_computed) return 0; /* no table: the rows are formed at execute */
    if (plan->lane_sample || plan->lane_fixed) { /* the lane table (das_lanes.c) and its transmit parts */
        const size_t n_groups = (plan->params.n_points + 15) / 16;
        return plan->lane_offset[n_groups] * lane_row_bytes(plan->lane_fixed != NULL, plan->lane_window != NULL,
                                                            plan->params.n_transmits) +
               (plan->lane_fixed ? n_groups * plan->params.n_transmits * 17 * sizeof(int32_t) : 0) +
               n_groups * plan->params.n_transmits * 16 * (sizeof(double) + (plan->lane_rot ? 2 * sizeof(float) : 0)) +
               (plan->lane_cache ? (size_t)plan->n_threads * (size_t)plan->lane_max_rows * 32 * sizeof(float) : 0);
    }
    if (!plan->has_table) return 0;
    return plan->n_receive * (sizeof(double) + (plan->is_iq ? 2 : 1) * sizeof(float));
}

size_t usbeam_das_lane_rows(const usbeam_das_plan *plan)
{
    return plan && (plan->lane_sample || plan->lane_fixed || plan->lane_computed) ? plan->lane_offset[(plan->params.n_points + 15) / 16] : 0;
}

int usbeam_das_lane_fixed_bits(const usbeam_das_plan *plan)
{
    return plan && plan->lane_fixed ? plan->lane_fixed_bits : 0;
}

long usbeam_das_lane_mirrored(const usbeam_das_plan *plan)
{
    long mirrored = 0;
    if (plan && plan->lane_mirror && usbeam_das_lanes_active(plan))
        for (size_t g = 0; g < (plan->params.n_points + 15) / 16; ++g) mirrored += plan->lane_mirror[g] >= 0;
    return mirrored;
}

int usbeam_das_lane_quarter(const usbeam_das_plan *plan)
{
    return plan && usbeam_das_lanes_quarter(plan) ? 1 + plan->lane_direct : 0;
}

const double *usbeam_das_transmit_times(const usbeam_das_plan *plan, size_t *n_points, size_t *n_transmits)
{
    if (n_points) *n_points = plan ? plan->params.n_points : 0;
    if (n_transmits) *n_transmits = plan ? plan->params.n_transmits : 0;
    return plan ? plan->tx_time : NULL;
}

const int32_t *usbeam_das_aperture_counts(const usbeam_das_plan *plan, size_t *n_points)
{
    if (n_points) *n_points = plan ? plan->params.n_points : 0;
    return plan ? plan->aperture_count : NULL;
}

const int32_t *usbeam_das_tile_samples(const usbeam_das_plan *plan, size_t *n_tiles)
{
    const size_t tile = USBEAM_DAS_POINT_TILE;
    if (n_tiles) *n_tiles = plan ? (plan->params.n_points + tile - 1) / tile : 0;
    return plan ? plan->tile_samples : NULL;
}

enum { COVERAGE_CHUNK = 16 }; /* elements per step of usbeam_das_coverage's early exit */

usbeam_status usbeam_das_coverage(const usbeam_das_plan *plan, const int64_t *rows, size_t n_rows,
                                  const int64_t *transmits, size_t n_selected, double t0, double t_end,
                                  uint8_t *covered)
{
    if (!plan || !rows || !transmits || !covered) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "coverage: NULL argument");
    if (!plan->tx_time) return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "coverage: a CUDA plan has no host transmit times");
    const size_t n_points = plan->params.n_points, n_tx = plan->params.n_transmits;
    const int n_el = (int)plan->params.n_elements;
    for (size_t i = 0; i < n_rows; ++i)
        if (rows[i] < 0 || (uint64_t)rows[i] >= n_points)
            return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "coverage: row %lld is out of range", (long long)rows[i]);
    for (size_t k = 0; k < n_selected; ++k)
        if (transmits[k] < 0 || (uint64_t)transmits[k] >= n_tx)
            return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "coverage: transmit %lld is out of range", (long long)transmits[k]);
    const double c = plan->params.c;
#pragma omp parallel for schedule(static)
    for (ptrdiff_t i = 0; i < (ptrdiff_t)n_rows; ++i) {
        const double *pt = plan->points + 3 * (size_t)rows[i];
        int hit = 0;
        for (size_t k = 0; k < n_selected && !hit; ++k) {
            const double tx = plan->tx_time[(size_t)rows[i] * n_tx + (size_t)transmits[k]];
            /* in chunks of elements, stopping at the first chunk that hits (most points are
             * covered: one chunk, not all elements); no early exit inside, so a chunk vectorises */
            for (int e0 = 0; e0 < n_el && !hit; e0 += COVERAGE_CHUNK) {
                const int e1 = e0 + COVERAGE_CHUNK < n_el ? e0 + COVERAGE_CHUNK : n_el;
                for (int e = e0; e < e1; ++e) {
                    const double dx = pt[0] - plan->element_x[e], dy = pt[1] - plan->element_y[e], dz = pt[2] - plan->element_z[e];
                    const double tau = tx + sqrt(dx * dx + dy * dy + dz * dz) / c;
                    hit |= (tau >= t0) & (tau <= t_end);
                }
            }
        }
        covered[i] = (uint8_t)hit;
    }
    return USBEAM_OK;
}

/* Allocate count * size bytes, failing with a message naming `what`. */
static usbeam_status alloc_array(void **ptr, size_t count, size_t size, const char *what)
{
    size_t bytes;
    if (usbeam_mul_size(count, size, &bytes) != 0 || bytes > USBEAM_MAX_ALLOCATION)
        return usbeam_fail(USBEAM_ERR_SIZE_OVERFLOW, "%s: %zu x %zu bytes is too large", what, count, size);
    *ptr = usbeam_alloc(bytes);
    if (!*ptr) return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "%s: cannot allocate %zu bytes", what, bytes);
    return USBEAM_OK;
}

/* Arrays ptrs[k] of counts[k] x sizes[k] bytes in one block (*block; each array 64-byte
 * aligned; zeroed when `zero`), from usbeam_block_alloc (plan_memory.c): from 1 MiB on it is
 * huge-page aligned and advised, and a block a destroyed plan left is reused.  A plan built
 * after other code has returned its memory to the kernel (a benchmark after PyMUST's dasmtx)
 * gets fresh pages, and in a virtual machine each 4 KiB page's first touch costs
 * microseconds: the convex plan's dozen per-point and per-element arrays (1.6 MB) took ~215
 * faults, 17 in one block (convex plans timed after dasmtx 7.1-8.9 -> 6.6 ms). */
static usbeam_status alloc_block(void **block, int n, void **const ptrs[], const size_t counts[], const size_t sizes[],
                                 int zero, const char *what)
{
    size_t bytes = 0, offsets[16];
    if (n > (int)(sizeof offsets / sizeof offsets[0])) return usbeam_fail(USBEAM_ERR_INTERNAL, "%s: too many arrays", what);
    for (int k = 0; k < n; ++k) {
        size_t b;
        if (usbeam_mul_size(counts[k], sizes[k], &b) != 0 || b > USBEAM_MAX_ALLOCATION - bytes - 64)
            return usbeam_fail(USBEAM_ERR_SIZE_OVERFLOW, "%s: %zu x %zu bytes is too large", what, counts[k], sizes[k]);
        offsets[k] = bytes;
        bytes += (b + 63) / 64 * 64;
    }
    char *base = usbeam_block_alloc(bytes);
    if (!base) return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "%s: cannot allocate %zu bytes", what, bytes);
    if (zero) memset(base, 0, bytes);
    for (int k = 0; k < n; ++k) *ptrs[k] = base + offsets[k];
    *block = base;
    return USBEAM_OK;
}

/* The delay/weight tables and the staging buffer: tens to hundreds of MB, every byte written
 * before it is read, so not zeroed (usbeam_alloc would touch it all once more).  Freed with
 * usbeam_block_free. */
static usbeam_status alloc_table(void **ptr, size_t count, size_t size, const char *what)
{
    void **const ptrs[] = {ptr};
    return alloc_block(ptr, 1, ptrs, &count, &size, 0, what);
}

/* Sort virtual sources (3, n) rows x, z, o by x, in place (insertion sort: the sources of
 * a delay law along an array come already sorted, or nearly). */
static void sort_sources_by_x(double *sources, size_t n)
{
    double *x = sources, *z = sources + n, *o = sources + 2 * n;
    for (size_t i = 1; i < n; ++i) {
        const double xi = x[i], zi = z[i], oi = o[i];
        size_t j = i;
        for (; j > 0 && x[j - 1] > xi; --j) {
            x[j] = x[j - 1];
            z[j] = z[j - 1];
            o[j] = o[j - 1];
        }
        x[j] = xi, z[j] = zi, o[j] = oi;
    }
}

/* The chord bound of the virtual sources lo .. hi-1 of a (3, n) x, z, offset array into
 * row[r * stride] (enum usbeam_das_block_row, das_delays.c uses it): the chord from the first
 * source to the last, the sources' extent along it and largest distance from it, and the line
 * beta u + alpha under their offsets (beta: the chord's slope of the offsets). */
static void source_block_chord(const double *sources, size_t n, size_t lo, size_t hi, double *row, size_t stride)
{
    const double *sx = sources, *sz = sources + n, *so = sources + 2 * n;
    const double x0 = sx[lo], z0 = sz[lo], dx = sx[hi - 1] - x0, dz = sz[hi - 1] - z0;
    const double length = sqrt(dx * dx + dz * dz);
    const double ux = length > 0.0 ? dx / length : 1.0, uz = length > 0.0 ? dz / length : 0.0;
    const double beta = length > 0.0 ? (so[hi - 1] - so[lo]) / length : 0.0;
    double u_lo = INFINITY, u_hi = -INFINITY, alpha = INFINITY, dev = 0.0;
    for (size_t i = lo; i < hi; ++i) {
        const double along = (sx[i] - x0) * ux + (sz[i] - z0) * uz, across = (sx[i] - x0) * uz - (sz[i] - z0) * ux;
        u_lo = fmin(u_lo, along), u_hi = fmax(u_hi, along);
        alpha = fmin(alpha, so[i] - beta * along);
        dev = fmax(dev, fabs(across));
    }
    row[USBEAM_DAS_BLOCK_X0 * stride] = x0, row[USBEAM_DAS_BLOCK_Z0 * stride] = z0;
    row[USBEAM_DAS_BLOCK_UX * stride] = ux, row[USBEAM_DAS_BLOCK_UZ * stride] = uz;
    row[USBEAM_DAS_BLOCK_U_LO * stride] = u_lo, row[USBEAM_DAS_BLOCK_U_HI * stride] = u_hi;
    row[USBEAM_DAS_BLOCK_BETA * stride] = beta;
    row[USBEAM_DAS_BLOCK_K * stride] = fabs(beta) < 1.0 ? beta / sqrt(1.0 - beta * beta) : 0.0; /* unused past 1 */
    /* a hair below the least offset line and beyond the largest distance: the bound stays below
     * the block's values whatever the rounding of these sums */
    row[USBEAM_DAS_BLOCK_ALPHA * stride] = alpha - 1e-12 * fabs(alpha) - 1e-15;
    row[USBEAM_DAS_BLOCK_DEV * stride] = dev * (1.0 + 1e-9) + 1e-15;
}

static void build_transmit_models(usbeam_das_plan *plan, const usbeam_transmit *transmits)
{
    const int n = (int)plan->params.n_elements;
    const double *ex = plan->element_x, *ey = plan->element_y, *ez = plan->element_z;
    double *sources = plan->tx_sources;
    size_t block_values = 0; /* doubles of tx_source_blocks filled */
    for (size_t k = 0; k < plan->params.n_transmits; ++k) {
        const usbeam_transmit *tx = &transmits[k];
        const int has_axis = tx->axis[0] != 0.0 || tx->axis[1] != 0.0 || tx->axis[2] != 0.0;
        switch (tx->kind) {
        case USBEAM_TRANSMIT_PLANE_WAVE: plan->tx[k] = usbeam_tx_model_plane3(tx->angle, tx->angle_y, ex, ey, ez, n); break;
        case USBEAM_TRANSMIT_DIVERGING: plan->tx[k] = usbeam_tx_model_diverging3(tx->x, tx->y, tx->z, ex, ey, ez, n); break;
        case USBEAM_TRANSMIT_FOCUSED:
            plan->tx[k] = usbeam_tx_model_focused3(tx->x, tx->y, tx->z, has_axis ? tx->axis : NULL, ex, ey, ez, n);
            break;
        case USBEAM_TRANSMIT_SYNTHETIC:
            plan->tx[k] = usbeam_tx_model_synthetic3(ex[tx->element], ey[tx->element], ez[tx->element]);
            break;
        case USBEAM_TRANSMIT_SOURCES: {
            const size_t n_src = tx->n_sources, rows = source_rows(tx);
            memcpy(sources, tx->sources, rows * n_src * sizeof(double));
            if (rows == 4) { /* a matrix array's law: min over the sources, brute force */
                plan->tx[k] = usbeam_tx_model_sources3(sources, (int)n_src);
                sources += 4 * n_src;
                break;
            }
            sort_sources_by_x(sources, n_src);
            if (plan->tx_source_blocks) { /* the CPU's transmit times only (das_delays.c) */
                const size_t n_blocks = (n_src + USBEAM_DAS_SOURCE_BLOCK - 1) / USBEAM_DAS_SOURCE_BLOCK;
                const size_t group = USBEAM_DAS_SOURCE_GROUP * USBEAM_DAS_SOURCE_BLOCK; /* sources */
                const size_t n_groups = (n_blocks + USBEAM_DAS_SOURCE_GROUP - 1) / USBEAM_DAS_SOURCE_GROUP;
                double *block = plan->tx_source_blocks + block_values;
                double *groups = block + USBEAM_DAS_BLOCK_ROWS * n_blocks;
                plan->tx_block_offset[k] = block_values;
                block_values += usbeam_das_source_bounds(n_src);
                for (size_t b = 0; b < n_blocks; ++b)
                    source_block_chord(sources, n_src, b * USBEAM_DAS_SOURCE_BLOCK,
                                       (b + 1) * USBEAM_DAS_SOURCE_BLOCK < n_src ? (b + 1) * USBEAM_DAS_SOURCE_BLOCK : n_src,
                                       block + b, n_blocks);
                for (size_t g = 0; g < n_groups; ++g)
                    source_block_chord(sources, n_src, g * group, (g + 1) * group < n_src ? (g + 1) * group : n_src,
                                       groups + g, n_groups);
            }
            plan->tx[k] = usbeam_tx_model_sources(sources, (int)n_src);
            sources += 3 * n_src;
            break;
        }
        }
    }
}

/* The general geometry: element frames from the normals, and each element's full-aperture
 * window (f_number = 0): w(u_x) along x over the array's x extent, times w(u_y) along y for
 * a surface (separable, as a matrix array's row and column windows). */
static void build_element_frames(usbeam_das_plan *plan, const double *normals)
{
    const usbeam_das_params *prm = &plan->params;
    const size_t n = prm->n_elements;
    double y_lo = plan->element_y[0], y_hi = plan->element_y[0];
    for (size_t e = 0; e < n; ++e) {
        const double nx = normals ? normals[3 * e] : 0.0, ny = normals ? normals[3 * e + 1] : 0.0;
        const double nz = normals ? normals[3 * e + 2] : 1.0;
        double frame[9] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0};
        (void)usbeam_element_frame(nx, ny, nz, prm->surface, frame); /* validated: never degenerate */
        for (int q = 0; q < 9; ++q) plan->element_frame[(size_t)q * n + e] = frame[q]; /* (9, n): vector loads */
        y_lo = fmin(y_lo, plan->element_y[e]);
        y_hi = fmax(y_hi, plan->element_y[e]);
    }
    const double x_half = plan->window_half_width, y_centre = 0.5 * (y_lo + y_hi), y_half = 0.5 * (y_hi - y_lo);
    for (size_t e = 0; e < n; ++e) {
        const double ux = x_half > 0.0 ? (plan->element_x[e] - plan->window_center) / x_half : 0.0;
        double w = usbeam_window((int)prm->window, ux, prm->tukey_alpha);
        if (prm->surface) w *= usbeam_window((int)prm->window, y_half > 0.0 ? (plan->element_y[e] - y_centre) / y_half : 0.0, prm->tukey_alpha);
        plan->element_window[e] = w;
    }
}

/* ---- receive apertures ------------------------------------------------------------ */

/* The general geometry's aperture of one point: the first and last element whose cone holds
 * it (usbeam_element_in_aperture, the predicate the CUDA twin and the windows use).  The
 * elements are tested in blocks of APERTURE_BLOCK from the front until a block holds an
 * accepted one, then likewise from the back, so a point costs about n - count tests rather
 * than n; a block whose bounds (aperture_block_needed) show that none of its cones can hold
 * the point is skipped without testing its elements.  A block's tests are the predicate's
 * own operations in the same order, written branch-free so they vectorise (this file is
 * compiled without floating-point contraction, -std=c11, so every copy rounds exactly as the
 * scalar predicate: the same element set; tests/beamform/test_das_sector_aperture.py). */
#define APERTURE_BLOCK 16


/* Block bounds: for block b (elements b APERTURE_BLOCK .. + APERTURE_BLOCK - 1) its middle
 * element c's position and frame, and over the block max |e - c| (R), max |n_e - n_c|,
 * max |t1_e - t1_c|, max |t2_e - t2_c|: rows of a (CULL_ROWS, n_blocks) array. */
enum { CULL_X, CULL_Y, CULL_Z, CULL_T1 = 3, CULL_T2 = 6, CULL_N = 9, CULL_R = 12, CULL_DT1, CULL_DT2, CULL_DN, CULL_ROWS };

static void aperture_block_bounds(const usbeam_das_plan *plan, double *cull)
{
    const size_t ne = plan->params.n_elements, nb = (ne + APERTURE_BLOCK - 1) / APERTURE_BLOCK;
    const double *f = plan->element_frame; /* (9, ne): t1, t2, n */
    for (size_t b = 0; b < nb; ++b) {
        const size_t e0 = b * APERTURE_BLOCK, e1 = e0 + APERTURE_BLOCK < ne ? e0 + APERTURE_BLOCK : ne;
        const size_t c = (e0 + e1 - 1) / 2;
        double *row[CULL_ROWS];
        for (int k = 0; k < CULL_ROWS; ++k) row[k] = cull + (size_t)k * nb + b;
        *row[CULL_X] = plan->element_x[c], *row[CULL_Y] = plan->element_y[c], *row[CULL_Z] = plan->element_z[c];
        for (int k = 0; k < 9; ++k) *row[CULL_T1 + k] = f[(size_t)k * ne + c];
        double r = 0.0, d1 = 0.0, d2 = 0.0, dn = 0.0;
        for (size_t e = e0; e < e1; ++e) {
            double v[4][3] = {{plan->element_x[e] - plan->element_x[c], plan->element_y[e] - plan->element_y[c],
                               plan->element_z[e] - plan->element_z[c]}};
            for (int k = 0; k < 3; ++k) {
                v[1][k] = f[(size_t)k * ne + e] - f[(size_t)k * ne + c];
                v[2][k] = f[(size_t)(3 + k) * ne + e] - f[(size_t)(3 + k) * ne + c];
                v[3][k] = f[(size_t)(6 + k) * ne + e] - f[(size_t)(6 + k) * ne + c];
            }
            double len[4];
            for (int q = 0; q < 4; ++q) len[q] = sqrt(v[q][0] * v[q][0] + v[q][1] * v[q][1] + v[q][2] * v[q][2]);
            r = fmax(r, len[0]), d1 = fmax(d1, len[1]), d2 = fmax(d2, len[2]), dn = fmax(dn, len[3]);
        }
        /* a hair larger than the rounded maxima */
        *row[CULL_R] = r * (1.0 + 1e-12), *row[CULL_DT1] = d1 * (1.0 + 1e-12) + 1e-15;
        *row[CULL_DT2] = d2 * (1.0 + 1e-12) + 1e-15, *row[CULL_DN] = dn * (1.0 + 1e-12) + 1e-15;
    }
}

enum { APERTURE_LANES = 8 };
typedef double aperture_lanes[APERTURE_LANES];

/* 1 unless block b is ruled out in every lane with need[k].  No element of block b can hold
 * a point when, with q = p - c (d = |q|), every element's axial = q.n_e + (c - e).n_e is
 * within d |n_e - n_c| + |e - c| of q.n_c, and likewise its lateral offsets, so that even the
 * largest axial and the least |lateral| miss the cone, by a margin (1e-9 of d + R) far above
 * any rounding. */
INLINE_BODY int aperture_block_needed(const double *cull, size_t nb, size_t b, const double *px, const double *py,
                                      const double *pz, double two_f, int surface, const int *need)
{
#define CULL(k) cull[(size_t)(k) * nb + b]
    const double cx = CULL(CULL_X), cy = CULL(CULL_Y), cz = CULL(CULL_Z), r = CULL(CULL_R);
    const double nx = CULL(CULL_N), ny = CULL(CULL_N + 1), nz = CULL(CULL_N + 2), dn = CULL(CULL_DN);
    const double ax = CULL(CULL_T1), ay = CULL(CULL_T1 + 1), az = CULL(CULL_T1 + 2), dt1 = CULL(CULL_DT1);
    const double bx = CULL(CULL_T2), by = CULL(CULL_T2 + 1), bz = CULL(CULL_T2 + 2), dt2 = CULL(CULL_DT2);
#undef CULL
    int kept = 0;
    for (int k = 0; k < APERTURE_LANES; ++k) {
        const double qx = px[k] - cx, qy = py[k] - cy, qz = pz[k] - cz;
        const double d = sqrt(qx * qx + qy * qy + qz * qz), margin = 1e-9 * (d + r);
        const double axial_max = qx * nx + qy * ny + qz * nz + d * dn + r + margin;
        const double half_max = axial_max / two_f + margin;
        const double l1_min = fabs(qx * ax + qy * ay + qz * az) - d * dt1 - r - margin;
        const double l2_min = fabs(qx * bx + qy * by + qz * bz) - d * dt2 - r - margin;
        kept |= need[k] & (axial_max > 0.0) & !(l1_min > half_max) & (!surface | !(l2_min > half_max));
    }
    return kept;
}

/* In every lane, the first and last accepted of elements e0 .. e0 + m - 1 (m <= APERTURE_BLOCK)
 * as offsets from e0 into lo[k] and hi[k] (m and -1 when none is): min and max reductions, so
 * no scan of per-element flags follows the vector loop. */
INLINE_BODY void aperture_block_lanes(const usbeam_das_plan *plan, const double *px, const double *py,
                                      const double *pz, double two_f, int e0, int m, int *lo, int *hi)
{
    const size_t ne = plan->params.n_elements;
    const double *ex = plan->element_x + e0, *ey = plan->element_y + e0, *ez = plan->element_z + e0;
    const double *f = plan->element_frame + e0;
    const double *t1x = f, *t1y = f + ne, *t1z = f + 2 * ne, *t2x = f + 3 * ne, *t2y = f + 4 * ne, *t2z = f + 5 * ne;
    const double *nx = f + 6 * ne, *ny = f + 7 * ne, *nz = f + 8 * ne;
    const int surface = plan->params.surface;
    for (int k = 0; k < APERTURE_LANES; ++k) lo[k] = m, hi[k] = -1;
    for (int i = 0; i < m; ++i) {
        for (int k = 0; k < APERTURE_LANES; ++k) { /* vectorised over the lanes */
            const double dx = px[k] - ex[i], dy = py[k] - ey[i], dz = pz[k] - ez[i];
            const double axial = dx * nx[i] + dy * ny[i] + dz * nz[i];
            const double half = axial / two_f;
            const double l1 = dx * t1x[i] + dy * t1y[i] + dz * t1z[i];
            const double l2 = dx * t2x[i] + dy * t2y[i] + dz * t2z[i];
            const int in = (axial > 0.0) & (fabs(l1) <= half) & (!surface | (fabs(l2) <= half));
            lo[k] = in && i < lo[k] ? i : lo[k];
            hi[k] = in ? i : hi[k];
        }
    }
}

/* 1 when element e's cone holds point (px, py, pz): usbeam_element_in_aperture's operations in
 * its order, from the plan's (9, n) frame rows */
INLINE_BODY int cone_holds(const usbeam_das_plan *plan, int e, double px, double py, double pz, double two_f)
{
    const size_t ne = plan->params.n_elements;
    const double *f = plan->element_frame + e;
    const double dx = px - plan->element_x[e], dy = py - plan->element_y[e], dz = pz - plan->element_z[e];
    const double axial = dx * f[6 * ne] + dy * f[7 * ne] + dz * f[8 * ne];
    const double half = axial / two_f;
    const double l1 = dx * f[0] + dy * f[ne] + dz * f[2 * ne];
    return (axial > 0.0) & (fabs(l1) <= half);
}

/* 1 when every point's accepted elements form one run of consecutive indices, so that an
 * aperture can be found by moving a neighbouring point's ends (hinted_aperture): a row of
 * elements (no 2-D face) in one x-z plane, unit normals in it (the cone test then reads x and z
 * alone), either
 *  - on an arc, e_i = C + R n_i, the normals' angles monotone over at most half a turn (a
 *    convex array in either order): with q = p - C at angle phi and distance rho, element i
 *    holds p when rho cos d - R > 0 and rho |sin d| <= (rho cos d - R) / 2F, d = phi - theta_i,
 *    a condition falling with |d| (on |d| <= pi / 2, beyond which the axial distance is < 0),
 *    so it holds on one interval of theta; or
 *  - on a line along the common tangent with one common normal (a tilted or reversed linear
 *    array), whose elements hold p when |(p - e_0) . t - s_i| <= (p - e_0) . n / 2F: an
 *    interval of s_i, monotone in i.
 * Checked to 1e-9 of the array's size, far below what moves a cone's edge by an element. */
static int apertures_are_runs(const usbeam_das_plan *plan)
{
    const size_t n = plan->params.n_elements;
    if (plan->params.surface || !plan->element_frame || n < 2) return 0;
    const double *f = plan->element_frame, *ex = plan->element_x, *ez = plan->element_z;
#define FRAME(q, e) f[(size_t)(q) * n + (e)]
    for (size_t e = 0; e < n; ++e) {
        const double nx = FRAME(6, e), nz = FRAME(8, e);
        if (FRAME(7, e) != 0.0 || plan->element_y[e] != plan->element_y[0] || fabs(nx * nx + nz * nz - 1.0) > 1e-12)
            return 0;
    }
    const double size = hypot(ex[n - 1] - ex[0], ez[n - 1] - ez[0]), tol = 1e-9 * size;
    if (!(size > 0.0)) return 0;
    int line = 1;
    for (size_t e = 1; e < n && line; ++e) line = FRAME(6, e) == FRAME(6, 0) && FRAME(8, e) == FRAME(8, 0);
    if (line) { /* s_i = (e_i - e_0) . t strictly monotone, (e_i - e_0) . n = 0 */
        const double tx = FRAME(0, 0), tz = FRAME(2, 0), nx = FRAME(6, 0), nz = FRAME(8, 0);
        const double sign = (ex[1] - ex[0]) * tx + (ez[1] - ez[0]) * tz > 0.0 ? 1.0 : -1.0;
        double last = 0.0;
        for (size_t e = 1; e < n; ++e) {
            const double s = sign * ((ex[e] - ex[0]) * tx + (ez[e] - ez[0]) * tz);
            if (!(s > last) || fabs((ex[e] - ex[0]) * nx + (ez[e] - ez[0]) * nz) > tol) return 0;
            last = s;
        }
        return 1;
    }
    /* an arc: e_0 - e_last = R (n_0 - n_last) gives R, then C = e_0 - R n_0 */
    const double dnx = FRAME(6, 0) - FRAME(6, n - 1), dnz = FRAME(8, 0) - FRAME(8, n - 1);
    const double dn2 = dnx * dnx + dnz * dnz;
    const double radius = ((ex[0] - ex[n - 1]) * dnx + (ez[0] - ez[n - 1]) * dnz) / dn2;
    if (!(dn2 > 0.0) || !(radius > 0.0)) return 0;
    const double cx = ex[0] - radius * FRAME(6, 0), cz = ez[0] - radius * FRAME(8, 0);
    const double theta_0 = atan2(FRAME(6, 0), FRAME(8, 0)), theta_1 = atan2(FRAME(6, 1), FRAME(8, 1));
    const double sign = theta_1 > theta_0 ? 1.0 : -1.0;
    double last = -INFINITY;
    for (size_t e = 0; e < n; ++e) {
        const double theta = sign * (atan2(FRAME(6, e), FRAME(8, e)) - theta_0);
        if (!(theta > last) || theta > USBEAM_PI || hypot(ex[e] - cx - radius * FRAME(6, e), ez[e] - cz - radius * FRAME(8, e)) > tol)
            return 0;
        last = theta;
    }
#undef FRAME
    return 1;
}

/* Steps a hinted aperture search takes from the neighbouring point's ends before it leaves the
 * point to the full search (hinted_aperture, linear_apertures) */
#define APERTURE_STEPS 4
/* With apertures_are_runs, one point's aperture from its neighbour's first and last accepted
 * elements: each end moved to where the cone test flips, by APERTURE_STEPS at most where the
 * neighbour's end is outside this point's aperture; 0 when it does not flip within them (no
 * element found, or the aperture moved farther), for the block scan to decide.  The run found
 * is the one the scan finds (convex plan: apertures 1.47 -> 0.30 ms). */
INLINE_BODY int hinted_aperture(const usbeam_das_plan *plan, double px, double py, double pz, double two_f,
                                int hint_first, int hint_last, int *first, int *last)
{
    const int n = (int)plan->params.n_elements;
    int a = hint_first, b = hint_last;
    if (cone_holds(plan, a, px, py, pz, two_f)) {
        while (a > 0 && cone_holds(plan, a - 1, px, py, pz, two_f)) --a;
    } else {
        int s = 0;
        for (; s < APERTURE_STEPS; ++s)
            if (++a >= n) return 0;
            else if (cone_holds(plan, a, px, py, pz, two_f)) break;
        if (s == APERTURE_STEPS) return 0;
    }
    b = b > a ? b : a;
    if (cone_holds(plan, b, px, py, pz, two_f)) {
        while (b + 1 < n && cone_holds(plan, b + 1, px, py, pz, two_f)) ++b;
    } else {
        int s = 0;
        for (; s < APERTURE_STEPS; ++s)
            if (cone_holds(plan, --b, px, py, pz, two_f)) break; /* stops at a at the latest */
        if (s == APERTURE_STEPS) return 0;
    }
    *first = a, *last = b;
    return 1;
}

/* The apertures of points p0 .. p1-1, APERTURE_LANES neighbouring points in step, one per lane
 * (past p1 the lanes repeat the last point): a block is evaluated in every lane when a lane
 * still looking needs it (the other lanes' values from it are right, only not needed), so each
 * lane gets its point's first and last accepted element, as one point at a time would (convex
 * plan 5.55 -> 5.39 ms, in-process A/B; the same apertures). */
INLINE_BODY void general_aperture_points(const usbeam_das_plan *plan, const double *cull, int runs, ptrdiff_t p0,
                                         ptrdiff_t p1)
{
    const int n = (int)plan->params.n_elements, surface = plan->params.surface;
    const size_t nb = ((size_t)n + APERTURE_BLOCK - 1) / APERTURE_BLOCK;
    const double two_f = 2.0 * plan->params.f_number;
    int hint_first = -1, hint_last = -1;
    for (ptrdiff_t q = p0; q < p1; q += APERTURE_LANES) {
        if (runs && hint_first >= 0) {
            int k = 0;
            for (; k < APERTURE_LANES && q + k < p1; ++k) {
                const double *pt = plan->points + 3 * (q + k);
                int f, l;
                if (!hinted_aperture(plan, pt[0], pt[1], pt[2], two_f, hint_first, hint_last, &f, &l)) break;
                plan->aperture_first[q + k] = f;
                plan->aperture_count[q + k] = l - f + 1;
                hint_first = f, hint_last = l;
            }
            if (k == APERTURE_LANES || q + k >= p1) continue;
        }
        aperture_lanes px, py, pz;
        int first[APERTURE_LANES], last[APERTURE_LANES], first_block[APERTURE_LANES], need[APERTURE_LANES];
        int lo[APERTURE_LANES], hi[APERTURE_LANES];
        for (int k = 0; k < APERTURE_LANES; ++k) {
            const double *pt = plan->points + 3 * (q + k < p1 ? q + k : p1 - 1);
            px[k] = pt[0], py[k] = pt[1], pz[k] = pt[2];
            first[k] = -1, last[k] = -1, first_block[k] = 0, need[k] = 1;
        }
        int searching = APERTURE_LANES; /* from the front: lanes without a first element yet */
        for (size_t b = 0; b < nb && searching; ++b) {
            const int e0 = (int)b * APERTURE_BLOCK, m = n - e0 < APERTURE_BLOCK ? n - e0 : APERTURE_BLOCK;
            if (cull && !aperture_block_needed(cull, nb, b, px, py, pz, two_f, surface, need)) continue;
            aperture_block_lanes(plan, px, py, pz, two_f, e0, m, lo, hi);
            for (int k = 0; k < APERTURE_LANES; ++k)
                if (need[k] && lo[k] < m) {
                    first[k] = e0 + lo[k], last[k] = e0 + hi[k], first_block[k] = (int)b;
                    need[k] = 0, --searching;
                }
        }
        /* from the back, down to the block after each lane's first (whose last is known) */
        searching = 0;
        for (int k = 0; k < APERTURE_LANES; ++k) searching += need[k] = first[k] >= 0 && first_block[k] + 1 < (int)nb;
        for (size_t b = nb; searching && b-- > 0;) {
            const int e0 = (int)b * APERTURE_BLOCK, m = n - e0 < APERTURE_BLOCK ? n - e0 : APERTURE_BLOCK;
            for (int k = 0; k < APERTURE_LANES; ++k)
                if (need[k] && (int)b <= first_block[k]) need[k] = 0, --searching;
            if (!searching) break;
            if (cull && !aperture_block_needed(cull, nb, b, px, py, pz, two_f, surface, need)) continue;
            aperture_block_lanes(plan, px, py, pz, two_f, e0, m, lo, hi);
            for (int k = 0; k < APERTURE_LANES; ++k)
                if (need[k] && hi[k] >= 0) last[k] = e0 + hi[k], need[k] = 0, --searching;
        }
        for (int k = 0; k < APERTURE_LANES && q + k < p1; ++k) {
            plan->aperture_first[q + k] = first[k] >= 0 ? first[k] : 0;
            plan->aperture_count[q + k] = first[k] >= 0 ? last[k] - first[k] + 1 : 0;
            hint_first = first[k], hint_last = last[k];
        }
    }
}

#if USBEAM_DAS_MULTI_ISA
TARGET_AVX512 static void general_aperture_points_avx512(const usbeam_das_plan *plan, const double *cull, int runs,
                                                         ptrdiff_t p0, ptrdiff_t p1)
{
    general_aperture_points(plan, cull, runs, p0, p1);
}
TARGET_AVX2 static void general_aperture_points_avx2(const usbeam_das_plan *plan, const double *cull, int runs,
                                                     ptrdiff_t p0, ptrdiff_t p1)
{
    general_aperture_points(plan, cull, runs, p0, p1);
}
#endif

static void general_apertures(const usbeam_das_plan *plan, const double *cull, int runs, ptrdiff_t p0, ptrdiff_t p1)
{
    USBEAM_DAS_DISPATCH(general_aperture_points, plan, cull, runs, p0, p1);
    general_aperture_points(plan, cull, runs, p0, p1);
}

/* A linear array's aperture with its ends trimmed to chunk_distances' |u| <= 1, u = (x_e -
 * centre) inv_half (window_mapping): the elements beyond have weight 0 in every window, and u is
 * monotone in x_e here (x strictly increasing), so what is left holds exactly the elements of
 * weight > 0, which every path then takes without testing u (das_lanes.c's formed rows:
 * 10 vector operations a row fewer).  Each point's table and image are unchanged.  The general
 * geometry tests its own cones. */
static void trim_to_window(const usbeam_das_plan *plan, ptrdiff_t p, int *first, int *count)
{
    if (plan->general) return;
    double centre, inv_half;
    usbeam_das_window_mapping(plan, plan->points + 3 * p, &centre, &inv_half);
    const double *xe = plan->element_x;
    while (*count > 0 && !(fabs((xe[*first] - centre) * inv_half) <= 1.0)) ++*first, --*count;
    while (*count > 0 && !(fabs((xe[*first + *count - 1] - centre) * inv_half) <= 1.0)) --*count;
    if (*count == 0) *first = 0;
}

/* The linear array's apertures of points p0 .. p1-1 (usbeam_aperture_range's, MUST's
 * predicate |x_p - x_e| <= z_p / 2F): its two binary searches find where a predicate monotone
 * in the element index flips; a point's flips are looked for first by stepping from its
 * neighbour's, APERTURE_STEPS at most each way, and the searches run only where they are
 * farther (or the neighbour had none): the same first and last elements (phased P4-2v plan
 * 4.6 -> 4.35 ms, in-process A/B; the searches took 0.43 ms of it). */
static void linear_apertures(usbeam_das_plan *plan, ptrdiff_t p0, ptrdiff_t p1)
{
    const usbeam_das_params *prm = &plan->params;
    const int n = (int)prm->n_elements;
    const double *xe = plan->element_x;
    if (!(prm->f_number > 0.0)) { /* the whole array */
        for (ptrdiff_t p = p0; p < p1; ++p) {
            int first = 0, count = n;
            trim_to_window(plan, p, &first, &count);
            plan->aperture_first[p] = first, plan->aperture_count[p] = count;
        }
        return;
    }
    int begin = -1, past = -1; /* the last point's flips: first element in, first past it */
    for (ptrdiff_t p = p0; p < p1; ++p) {
        const double *pt = plan->points + 3 * p;
        const double xp = pt[0], half_width = pt[2] / (2.0 * prm->f_number);
        /* usbeam_aperture_range's predicates: `before` true below the aperture, `upto` true up
         * to its end (both monotone: true, then false) */
#define BEFORE(i) (xe[i] < xp && !(fabs(xp - xe[i]) <= half_width))
#define UPTO(i) (xe[i] <= xp || fabs(xp - xe[i]) <= half_width)
        int found = 0;
        if (begin >= 0) { /* begin: the first index where BEFORE is false (n if none) */
            int b = begin, e = past, k = 0;
            if (b < n && BEFORE(b)) {
                while (k < APERTURE_STEPS && b < n && BEFORE(b)) ++b, ++k;
            } else {
                while (k < APERTURE_STEPS && b > 0 && !BEFORE(b - 1)) --b, ++k;
            }
            const int b_ok = (b == n || !BEFORE(b)) && (b == 0 || BEFORE(b - 1));
            /* past: the first index >= begin where UPTO is false (n if none) */
            e = e > b ? e : b;
            k = 0;
            if (e < n && UPTO(e)) {
                while (k < APERTURE_STEPS && e < n && UPTO(e)) ++e, ++k;
            } else {
                while (k < APERTURE_STEPS && e > b && !UPTO(e - 1)) --e, ++k;
            }
            const int e_ok = (e == n || !UPTO(e)) && (e == b || UPTO(e - 1));
            if (b_ok && e_ok) {
                found = 1;
                begin = b, past = e;
            }
        }
#undef BEFORE
#undef UPTO
        int first = 0, last = -1, count = 0;
        if (found) {
            if (begin <= past - 1 && fabs(xp - xe[begin]) <= half_width) first = begin, last = past - 1, count = last - first + 1;
        } else {
            count = usbeam_aperture_range(xe, n, xp, half_width, &first, &last);
            /* the searches' flips, for the next point (none when the aperture is empty) */
            begin = count > 0 ? first : -1, past = count > 0 ? last + 1 : -1;
            if (count == 0) first = 0;
        }
        trim_to_window(plan, p, &first, &count);
        plan->aperture_first[p] = first;
        plan->aperture_count[p] = count;
    }
}

/* Receive apertures (one contiguous element range per point) and the receive-table offsets. */
static void build_apertures(usbeam_das_plan *plan)
{
    const usbeam_das_params *prm = &plan->params;
    const int n = (int)prm->n_elements;
    const ptrdiff_t n_points = (ptrdiff_t)prm->n_points;
    if (prm->f_number > 0.0 && plan->general) {
        const ptrdiff_t step = 256;
        /* block bounds (without them, on an allocation failure, every block is scanned) */
        double *cull = usbeam_alloc((size_t)CULL_ROWS * (((size_t)n + APERTURE_BLOCK - 1) / APERTURE_BLOCK) * sizeof(double));
        if (cull) aperture_block_bounds(plan, cull);
        const int runs = apertures_are_runs(plan);
#pragma omp parallel for schedule(dynamic, 1)
        for (ptrdiff_t p0 = 0; p0 < n_points; p0 += step)
            general_apertures(plan, cull, runs, p0, p0 + step < n_points ? p0 + step : n_points);
        usbeam_free(cull);
    } else {
        const ptrdiff_t step = 256;
#pragma omp parallel for schedule(static)
        for (ptrdiff_t p0 = 0; p0 < n_points; p0 += step)
            linear_apertures(plan, p0, p0 + step < n_points ? p0 + step : n_points);
    }
    if (!plan->receive_offset) return; /* a CUDA plan: nothing tabulated on the host */
    size_t offset = 0;
    int widest = 0;
    for (ptrdiff_t p = 0; p < n_points; ++p) {
        plan->receive_offset[p] = offset;
        offset += (size_t)plan->aperture_count[p]; /* <= n_points * n_el, checked */
        widest = plan->aperture_count[p] > widest ? plan->aperture_count[p] : widest;
    }
    plan->receive_offset[n_points] = offset;
    plan->n_receive = offset;
    plan->widest = widest;
    plan->max_point_entries = (size_t)widest * prm->n_transmits; /* <= n_el * n_tx, checked */
}

usbeam_status usbeam_das_plan_create(const usbeam_das_params *params, usbeam_backend backend, usbeam_das_plan **plan_out)
{
    usbeam_status st;
    if (!params || !plan_out) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "params and plan must not be NULL");
    *plan_out = NULL;
    if (backend != USBEAM_BACKEND_CPU && backend != USBEAM_BACKEND_CUDA)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "backend: unknown value %d", (int)backend);
    if ((st = validate(params)) != USBEAM_OK) return st;

    const usbeam_das_params *prm = params;
    size_t max_entries, stage_plane, weight_floats;
    const int is_iq = prm->input_dtype == USBEAM_DTYPE_COMPLEX64;
    /* A record shorter than the interpolation's taps has no sample in range (linear needs
     * 2 samples, cubic 4): every weight is zero, and one tap at sample 0 keeps every read
     * inside its row (the full tap count would read past the staging buffer). */
    const int kind_taps = usbeam_interp_taps((int)prm->interpolation);
    const int taps = prm->n_samples < (size_t)kind_taps ? 1 : kind_taps;
    const int weight_stride = taps * (is_iq ? 2 : 1);
    if (usbeam_mul_size3(prm->n_points, prm->n_elements, prm->n_transmits, &max_entries) != 0 ||
        usbeam_mul_size(max_entries, (size_t)weight_stride, &weight_floats) != 0)
        return usbeam_fail(USBEAM_ERR_SIZE_OVERFLOW, "points x elements x transmits is too large");
    if (usbeam_mul_size3(prm->n_transmits, prm->n_elements, prm->n_samples, &stage_plane) != 0 ||
        usbeam_mul_size(stage_plane, prm->n_frames, &stage_plane) != 0 || stage_plane > USBEAM_MAX_ALLOCATION / 16 ||
        usbeam_mul_size3(prm->n_transmits, prm->n_elements, usbeam_das_channel_floats(prm->n_samples, prm->n_frames),
                         &stage_plane) != 0 ||
        (stage_plane += 32) > USBEAM_MAX_ALLOCATION / 8)
        return usbeam_fail(USBEAM_ERR_SIZE_OVERFLOW, "data: frames x transmits x elements x samples is too large");

    usbeam_das_plan *plan = usbeam_alloc(sizeof *plan);
    if (!plan) return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "das plan");
    plan->params = *prm;
    plan->params.element_positions = NULL;
    plan->params.transmits = NULL;
    plan->params.points = NULL;
    plan->is_iq = is_iq;
    plan->taps = taps;
    plan->weight_stride = weight_stride;
    plan->stage_plane = stage_plane;
#ifdef _OPENMP
    plan->n_threads = omp_get_max_threads();
#else
    plan->n_threads = 1;
#endif
    const size_t n_el = prm->n_elements, n_pts = prm->n_points;
    size_t n_source_values = 0, n_block_values = 0; /* doubles of every transmit's virtual sources, their blocks */
    for (size_t k = 0; k < prm->n_transmits; ++k)
        if (prm->transmits[k].kind == USBEAM_TRANSMIT_SOURCES) {
            n_source_values += source_rows(&prm->transmits[k]) * prm->transmits[k].n_sources;
            if (source_rows(&prm->transmits[k]) == 3)
                n_block_values += usbeam_das_source_bounds(prm->transmits[k].n_sources);
        }
    /* the general aperture model: normals other than +z, a surface, or x not strictly increasing */
    int general = prm->surface;
    for (size_t e = 0; e < n_el && !general; ++e) {
        const double *nrm = prm->element_normals ? prm->element_normals + 3 * e : NULL;
        if (nrm && (nrm[0] != 0.0 || nrm[1] != 0.0 || nrm[2] != 1.0)) general = 1;
        if (e > 0 && !(prm->element_positions[3 * e] > prm->element_positions[3 * (e - 1)])) general = 1;
    }
    plan->general = general;
    /* Geometry, transmit models and apertures (both backends), transmit times and receive
     * offsets (the CPU's) in one block (alloc_block); the staging buffer below. */
    {
        const int cpu = backend == USBEAM_BACKEND_CPU;
        const size_t n_tx = prm->n_transmits, frames = general ? 9 * n_el : 0, windows = general ? n_el : 0;
        void **const ptrs[] = {(void **)&plan->element_x, (void **)&plan->element_y, (void **)&plan->element_z,
                               (void **)&plan->points, (void **)&plan->tx, (void **)&plan->tx_sources,
                               (void **)&plan->element_frame, (void **)&plan->element_window,
                               (void **)&plan->aperture_first, (void **)&plan->aperture_count,
                               (void **)&plan->tx_source_blocks, (void **)&plan->tx_block_offset,
                               (void **)&plan->tx_time, (void **)&plan->receive_offset};
        const size_t counts[] = {n_el, n_el, n_el, 3 * n_pts, n_tx, n_source_values, frames, windows, n_pts, n_pts,
                                 cpu ? n_block_values : 0, cpu ? n_tx : 0, cpu ? n_pts * n_tx : 0, cpu ? n_pts + 1 : 0};
        const size_t sizes[] = {sizeof(double), sizeof(double), sizeof(double), sizeof(double), sizeof(usbeam_tx_model),
                                sizeof(double), sizeof(double), sizeof(double), sizeof(int32_t), sizeof(int32_t),
                                sizeof(double), sizeof(size_t), sizeof(double), sizeof(size_t)};
        if ((st = alloc_block(&plan->geometry_block, (int)(sizeof counts / sizeof counts[0]), ptrs, counts, sizes, 1,
                              "points")))
            goto fail;
        if (!general) plan->element_frame = plan->element_window = NULL;
        if (!cpu) { /* NULL: nothing tabulated on the host */
            plan->tx_source_blocks = plan->tx_time = NULL;
            plan->tx_block_offset = plan->receive_offset = NULL;
        }
    }
    /* The CPU's staging buffer, the largest of all (a CUDA plan reads the data in place): + 8
     * floats, the last frame block may read 7 lanes past the end (das.c).  Huge pages: a point
     * reads rows of ~10^3 channels tens of KiB apart, which with 4 KiB pages would miss the TLB
     * on nearly every row (measured 3.1 vs 2.2 ns per entry).  IQ of several frames is staged
     * with re and im rows interleaved (usbeam_das_staged_row_floats), whose channels may take
     * up to a line more than the two planes' two channels. */
    const size_t row_floats = usbeam_das_staged_row_floats(is_iq, prm->n_frames);
    size_t stage_floats = stage_plane * (is_iq ? 2 : 1);
    if (row_floats != prm->n_frames) {
        const size_t interleaved = prm->n_transmits * prm->n_elements * usbeam_das_channel_floats(prm->n_samples, row_floats) + 32;
        stage_floats = interleaved > stage_floats ? interleaved : stage_floats;
    }
    if (usbeam_das_lanes_wanted(plan)) { /* each frame staged as one (das.c): its planes, frame after frame
                                           (the buffer allocated below, once its frames a block are known) */
        plan->stage_plane = prm->n_transmits * prm->n_elements * usbeam_das_channel_floats(prm->n_samples, 1) + 32;
        plan->lane_frame = plan->stage_plane * (is_iq ? 2 : 1);
    }
    memcpy(plan->points, prm->points, 3 * n_pts * sizeof(double));
    for (size_t e = 0; e < n_el; ++e) {
        plan->element_x[e] = prm->element_positions[3 * e];
        plan->element_y[e] = prm->element_positions[3 * e + 1];
        plan->element_z[e] = prm->element_positions[3 * e + 2];
    }
    plan->window_center = 0.5 * (plan->element_x[0] + plan->element_x[n_el - 1]);
    plan->window_half_width = 0.5 * (plan->element_x[n_el - 1] - plan->element_x[0]);
    int elements_on_x_axis = 1; /* every element at y = z = 0 */
    for (size_t e = 0; e < n_el; ++e) elements_on_x_axis &= plan->element_y[e] == 0.0 && plan->element_z[e] == 0.0;
    if (general) build_element_frames(plan, prm->element_normals);
    build_transmit_models(plan, prm->transmits);
    build_apertures(plan);
    if (backend == USBEAM_BACKEND_CUDA) { /* the twin computes delays on the device: no table */
        const usbeam_das_tables tables = {&plan->params, plan->element_x, plan->element_y, plan->element_z,
                                          plan->points, plan->tx, plan->tx_sources, n_source_values,
                                          plan->aperture_first, plan->aperture_count, plan->window_center,
                                          plan->window_half_width, plan->is_iq, general, plan->element_frame,
                                          plan->element_window};
        if ((st = usbeam_das_cuda_create(&tables, &plan->cuda)) != USBEAM_OK) goto fail;
        /* the twin has its device copies: the host geometry served plan creation only */
        usbeam_block_free(plan->geometry_block);
        plan->geometry_block = NULL;
        plan->element_x = plan->element_y = plan->element_z = plan->points = plan->tx_sources = NULL;
        plan->element_frame = plan->element_window = NULL;
        plan->tx = NULL;
        plan->aperture_first = plan->aperture_count = NULL;
        *plan_out = plan;
        return USBEAM_OK;
    }
    {   /* transmit times: what execute would otherwise recompute per call without a table.  Each
         * thread carries per transmit the block of the last point's least virtual source to
         * its next point (a neighbour in the grid's order): a hint, the values do not depend on it. */
        const ptrdiff_t n_points = (ptrdiff_t)n_pts;
        const size_t n_tx = prm->n_transmits;
        /* hints are written at every point: each thread's on lines of their own (this stage of
         * the convex plan: medians 3.0 -> 2.7 ms, in-process A/B) */
        const size_t hint_stride = usbeam_thread_words(n_tx);
        int *hints = NULL;
        if ((st = alloc_array((void **)&hints, (size_t)plan->n_threads, hint_stride * sizeof(int), "transmit hints"))) goto fail;
#pragma omp parallel num_threads(usbeam_team_size(plan->n_threads))
        {
#ifdef _OPENMP
            int *hint = hints + (size_t)omp_get_thread_num() * hint_stride;
#else
            int *hint = hints;
#endif
            for (size_t t = 0; t < n_tx; ++t) hint[t] = -1;
#pragma omp for schedule(dynamic, 1)
            for (ptrdiff_t p0 = 0; p0 < n_points; p0 += 256)
                usbeam_das_fill_transmit_times(plan, (size_t)p0, (size_t)(p0 + 256 < n_points ? p0 + 256 : n_points), hint);
        }
        usbeam_free(hints);
    }

    if ((st = alloc_array((void **)&plan->tile, (size_t)plan->n_threads * 2 * USBEAM_DAS_POINT_TILE, prm->n_frames * sizeof(float),
                          "output tiles")))
        goto fail;

    /* Per-thread scratch (floats; das_internal.h, usbeam_das_scratch_entries): the receive
     * parts of subtile_points points of the widest aperture (a double and two floats per
     * element, each array rounded up to 16 floats so the next stays 64-byte aligned), their
     * transmit rotations, and two blocks of entries (a ptrdiff_t row and weight_stride floats
     * each; das.c forms one ahead while it sums the other). */
    const size_t widest_floats = usbeam_das_widest_floats(plan);
    size_t subtile = USBEAM_DAS_SUBTILE_MAX;
    while (subtile > 1 && subtile * 4 * (widest_floats + prm->n_transmits) > USBEAM_DAS_SUBTILE_FLOATS) subtile /= 2;
    plan->subtile_points = (int)subtile;
    plan->thread_floats = usbeam_das_scratch_rows_at(subtile, widest_floats, prm->n_transmits) +
                          2 * usbeam_das_entry_block_floats((size_t)weight_stride);
    if ((st = alloc_array((void **)&plan->scratch, (size_t)plan->n_threads * plan->thread_floats, sizeof(float),
                          "per-thread scratch")))
        goto fail;

    /* The receive table: s_rx and c_rx per (point, aperture element), shared by every transmit. */
    const size_t pair_bytes = sizeof(double) + (is_iq ? 2 : 1) * sizeof(float);
    const size_t budget = prm->max_table_bytes ? prm->max_table_bytes : DEFAULT_MAX_TABLE_BYTES;
    plan->has_table = plan->n_receive <= budget / pair_bytes;
    if (usbeam_das_lanes_wanted(plan)) {
        /* few frames: the lane table instead (das_lanes.c), or, over the budget, the lanes' rows
         * formed per group at execute */
        const size_t n_groups = (n_pts + 15) / 16, n_tx = prm->n_transmits;
        if ((st = alloc_array((void **)&plan->lane_first, n_groups, sizeof(int32_t), "points")) ||
            (st = alloc_array((void **)&plan->lane_offset, n_groups + 1, sizeof(size_t), "points")))
            goto fail;
        const size_t rows = usbeam_das_lanes_count_rows(plan);
        const int windowed = usbeam_das_lanes_windowed(plan);
        /* fs = 4 fc: the rotations of one transmit's sums from the fraction of each lane's s,
         * its whole samples' quarter turns staged with the input (das_lanes.c QUARTER); with
         * the fixed table, its rows turned into each lane's first tap and fraction (lane_direct,
         * lane_mask) */
        plan->lane_quarter = usbeam_das_quarter_turns(plan);
        /* the table in lane_fixed's int32 offsets (half the bytes of double, and integer
         * arithmetic: das_lanes.c); in double if a row's lanes lie too far apart for them */
        int table = plan->has_table && rows <= budget / lane_row_bytes(1, windowed, n_tx);
        /* lane_rows: with the fixed table, the fill's rows in double (freed after it); without a
         * table, execute's formed rows (allocated below, once their slots are known) */
        plan->lane_thread_doubles = usbeam_das_lane_formed_doubles(plan->lane_max_rows);
        if ((table && ((st = alloc_array((void **)&plan->lane_rows, (size_t)plan->n_threads,
                                         plan->lane_thread_doubles * sizeof(double), "per-thread scratch")) ||
                       (st = alloc_table((void **)&plan->lane_fixed, rows * 16, sizeof(int32_t), "receive table")) ||
                       (st = alloc_array((void **)&plan->lane_base, rows, sizeof(int32_t), "receive table")) ||
                       (st = alloc_array((void **)&plan->lane_tx_fixed, n_groups * n_tx, 16 * sizeof(int32_t), "transmit times")) ||
                       (st = alloc_array((void **)&plan->lane_tx_base, n_groups, n_tx * sizeof(int32_t), "transmit times")) ||
                       (windowed && (st = alloc_table((void **)&plan->lane_window, rows * 16, sizeof(float), "receive table"))) ||
                       (st = alloc_array((void **)&plan->lane_least, rows, n_tx * sizeof(int32_t), "receive table")) ||
                       (st = alloc_array((void **)&plan->lane_mask, rows, n_tx * sizeof(uint16_t), "receive table")))) ||
            (st = alloc_array((void **)&plan->lane_tx, n_groups * n_tx, 16 * sizeof(double), "transmit times")) ||
            (is_iq && !plan->lane_quarter && (st = alloc_array((void **)&plan->lane_rot, n_groups * n_tx, 32 * sizeof(float),
                                        "transmit rotations"))))
            goto fail;
        plan->lane_computed = !table;
        usbeam_das_lanes_fill(plan);
        if (table && plan->lane_fixed_overflow) { /* the rows in double, or formed at execute */
            usbeam_block_free(plan->lane_fixed);
            usbeam_free(plan->lane_base);
            usbeam_free(plan->lane_tx_fixed);
            usbeam_free(plan->lane_tx_base);
            plan->lane_fixed = NULL, plan->lane_base = NULL, plan->lane_tx_fixed = NULL, plan->lane_tx_base = NULL;
            table = rows <= budget / lane_row_bytes(0, windowed, n_tx);
            if (table && (st = alloc_table((void **)&plan->lane_sample, rows * 16, sizeof(double), "receive table"))) goto fail;
            if (!table) {
                usbeam_block_free(plan->lane_window);
                usbeam_free(plan->lane_least);
                plan->lane_window = NULL, plan->lane_least = NULL;
            }
            plan->lane_computed = !table;
            usbeam_das_lanes_fill(plan);
        }
        usbeam_free(plan->lane_rows); /* the fill's */
        plan->lane_rows = NULL;
        if (!table && !plan->general && elements_on_x_axis) { /* form_rows' bounds */
            if ((st = alloc_array((void **)&plan->lane_extent, n_groups * USBEAM_DAS_LANE_EXTENT_DOUBLES + prm->n_elements,
                                  sizeof(double), "points")) ||
                (st = alloc_array((void **)&plan->lane_tx_fixed, n_groups * n_tx, 16 * sizeof(int32_t), "transmit times")) ||
                (st = alloc_array((void **)&plan->lane_tx_base, n_groups, n_tx * sizeof(int32_t), "transmit times")))
                goto fail;
            if (!usbeam_das_lanes_extents(plan)) { /* the formed rows in double */
                usbeam_free(plan->lane_tx_fixed);
                usbeam_free(plan->lane_tx_base);
                plan->lane_tx_fixed = NULL, plan->lane_tx_base = NULL;
            }
            /* groups that mirror others take their rows (das_lanes.c; lane_thread_doubles: a
             * slot per group of a tile in each thread's lane_rows) */
            if (usbeam_das_lanes_mirrors(plan) < 0) {
                st = usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "points: cannot allocate the groups' mirrors");
                goto fail;
            }
        }
        if (!table) { /* execute's formed rows; with lane_mirror its slots, tagged with no group yet */
            if ((st = alloc_array((void **)&plan->lane_rows, (size_t)plan->n_threads, plan->lane_thread_doubles * sizeof(double),
                                  "per-thread scratch")))
                goto fail;
            const size_t slot = plan->lane_thread_doubles / (USBEAM_DAS_LANE_SLOTS + 1);
            for (size_t k = 0; plan->lane_mirror && k < (size_t)plan->n_threads * (USBEAM_DAS_LANE_SLOTS + 1); ++k) {
                int64_t *tag = (int64_t *)(plan->lane_rows + (k + 1) * slot - USBEAM_DAS_LANE_SLOT_TAG);
                tag[0] = -1, tag[1] = 0, tag[2] = 0;
            }
        }
        if (plan->lane_mask && !plan->lane_fixed) {
            usbeam_free(plan->lane_mask);
            plan->lane_mask = NULL;
        }
        if (plan->lane_quarter) {
            double rot_re, rot_im;
            usbeam_das_rotation(prm->fc * prm->t0 + (prm->interpolation == USBEAM_INTERP_NEAREST ? 0.0 : 0.125), &rot_re, &rot_im);
            plan->lane_quarter_rot[0] = (float)rot_re, plan->lane_quarter_rot[1] = (float)rot_im;
        }
        plan->has_table = 0;
    }
    /* the receive rotations a group forms once and reads back: for its other transmits, or
     * (IQ off the quarter turns) for the other frames of a block */
    if (plan->lane_frame && is_iq &&
        (prm->n_transmits > 1 || (usbeam_das_lanes_frame_block(plan) > 1 && !plan->lane_quarter)) &&
        (st = alloc_array((void **)&plan->lane_cache, (size_t)plan->n_threads * (size_t)plan->lane_max_rows, 32 * sizeof(float),
                          "per-thread scratch")))
        goto fail;
    /* a lane plan stages a block of frames (usbeam_das_lanes_frame_block), not the call's */
    if (plan->lane_frame) stage_floats = plan->lane_frame * usbeam_das_lanes_frame_block(plan);
    if (backend == USBEAM_BACKEND_CPU &&
        (st = alloc_table((void **)&plan->stage, stage_floats + 8, sizeof(float), "data staging buffer")))
        goto fail;
    if (plan->stage) /* finite padding past the planes; execute zeroes the rest of what it reads (stage_input) */
        memset(plan->stage + stage_floats, 0, 8 * sizeof(float));
    if (plan->has_table) {
        void **const ptrs[] = {(void **)&plan->table_sample, (void **)&plan->table_re, (void **)&plan->table_im};
        const size_t counts[] = {plan->n_receive, plan->n_receive, plan->n_receive};
        const size_t sizes[] = {sizeof(double), sizeof(float), sizeof(float)};
        if ((st = alloc_block(&plan->table_block, is_iq ? 3 : 2, ptrs, counts, sizes, 0, "receive table"))) goto fail;
    }
    /* Each tile's sample bounds, which staging relies on to stage no further than the taps reach
     * and to go round a ring (das.c), from its points' receive parts: the table's, computed here
     * (its rows still in cache), or without the table into a tile's scratch and dropped (one
     * pass over the receive parts, which execute computes per call anyway).  Without the table
     * (session 31, in-process A/B, p10): large-256 82.3 -> 81.0 ms (1406 of 2048 samples
     * staged), and round a ring the convex image of 16 frames 6.0 -> 5.0 ms, 1 plane wave of 16
     * frames 19.8 -> 16.8 ms.  A lane plan reads none: its rows are the lane table's, or formed
     * per group. */
    if (backend == USBEAM_BACKEND_CPU && !plan->lane_frame) {
        const size_t tile = USBEAM_DAS_POINT_TILE;
        const ptrdiff_t n_tiles = (ptrdiff_t)((n_pts + tile - 1) / tile);
        if ((st = alloc_array((void **)&plan->tile_samples, 2 * (size_t)n_tiles, sizeof(int32_t), "points"))) goto fail;
        const size_t widest = usbeam_das_widest_floats(plan);
        int missing = 0; /* a thread without its scratch: no bounds (staged whole, all samples) */
#pragma omp parallel
        {
            /* (no table) a tile's s_rx, then one point's c_rx re and im */
            double *own = plan->has_table ? NULL : usbeam_alloc((tile * widest + widest) * sizeof(double));
            if (!plan->has_table && !own) {
#pragma omp atomic write
                missing = 1;
            }
#pragma omp for schedule(dynamic, 4)
            for (ptrdiff_t k = 0; k < n_tiles; ++k) {
                const size_t p0 = (size_t)k * tile, p1 = (size_t)(k + 1) * tile < n_pts ? (size_t)(k + 1) * tile : n_pts;
                if (plan->has_table) {
                    for (size_t p = p0; p < p1; ++p) {
                        const size_t off = plan->receive_offset[p];
                        usbeam_das_point_receive(plan, p, plan->table_sample + off, plan->table_re + off,
                                                 is_iq ? plan->table_im + off : NULL);
                    }
                    usbeam_das_tile_sample_bounds(plan, p0, p1, plan->table_sample + plan->receive_offset[p0],
                                                  plan->tile_samples + 2 * k); /* its table in cache */
                } else if (own) {
                    float *c_rx = (float *)(own + tile * widest);
                    for (size_t p = p0; p < p1; ++p)
                        usbeam_das_point_receive(plan, p, own + (plan->receive_offset[p] - plan->receive_offset[p0]), c_rx,
                                                 is_iq ? c_rx + widest : NULL);
                    usbeam_das_tile_sample_bounds(plan, p0, p1, own, plan->tile_samples + 2 * k);
                }
            }
            usbeam_free(own);
        }
        if (missing) {
            usbeam_free(plan->tile_samples);
            plan->tile_samples = NULL;
        }
        for (ptrdiff_t k = 0; plan->tile_samples && k < n_tiles; ++k)
            plan->tile_reach = (size_t)plan->tile_samples[2 * k + 1] > plan->tile_reach ? (size_t)plan->tile_samples[2 * k + 1]
                                                                                        : plan->tile_reach;
    }
    *plan_out = plan;
    return USBEAM_OK;
fail:
    usbeam_das_plan_destroy(plan);
    return st;
}

void usbeam_das_entry_table_free(usbeam_das_entry_table *table)
{
    if (!table) return;
    usbeam_free(table->offset);
    usbeam_block_free(table->tap);
    usbeam_block_free(table->weight);
    table->offset = NULL;
    table->tap = NULL;
    table->weight = NULL;
    table->n_entries = 0;
}

usbeam_status usbeam_das_entry_table_create(const usbeam_das_plan *plan, size_t budget, usbeam_das_entry_table *table)
{
    usbeam_status st;
    if (!plan || !table || !plan->tx_time) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "entry table: a CPU DAS plan is needed");
    const size_t n_pts = plan->params.n_points, n_tx = plan->params.n_transmits;
    table->offset = NULL;
    table->tap = NULL;
    table->weight = NULL;
    table->n_entries = 0;
    if ((st = alloc_array((void **)&table->offset, n_pts + 1, sizeof(size_t), "points")) != USBEAM_OK) return st;
    size_t offset = 0;
    for (size_t p = 0; p < n_pts; ++p) {
        table->offset[p] = offset;
        offset += (size_t)plan->aperture_count[p] * n_tx; /* <= n_points * n_el * n_tx, checked at plan create */
    }
    table->offset[n_pts] = offset;
    table->n_entries = offset;
    const size_t entry_bytes = sizeof(int32_t) + (size_t)plan->weight_stride * sizeof(float);
    if (budget == 0) budget = DEFAULT_MAX_TABLE_BYTES;
    if (offset > budget / entry_bytes) return USBEAM_OK; /* over budget: entries per point at execute */
    if ((st = alloc_table((void **)&table->tap, offset, sizeof(int32_t), "delay table")) ||
        (st = alloc_table((void **)&table->weight, offset, (size_t)plan->weight_stride * sizeof(float), "weight table"))) {
        usbeam_das_entry_table_free(table);
        return st;
    }
    const ptrdiff_t n_points = (ptrdiff_t)n_pts;
#pragma omp parallel for schedule(dynamic, 256)
    for (ptrdiff_t p = 0; p < n_points; ++p) {
        const size_t off = table->offset[p];
        usbeam_das_point_entries(plan, (size_t)p, table->tap + off, table->weight + off * (size_t)plan->weight_stride);
    }
    return USBEAM_OK;
}
