/*
 * rca.c - delay-and-sum beamforming for row-column (RCA) and TOBE arrays, CPU backend.
 *
 * Methods (usbeam.h, usbeam_rca_method) and their paths (csrc/usbeam_math.h, section
 * "row-column arrays", with references):
 *   FORCES / uFORCES   tx: |p - (u_k, 0, 0)|            rx: strip path sqrt((u - u_c)^2 + z^2)
 *   HERCULES / uHERC.  tx: wave model in (u_tx, z)      rx: |p - (u_c, v_r, 0)|, r = acquisition
 *   VLS / TPW / Flash  tx: wave model per acquisition   rx: strip path
 * sample index s = ((tx + rx) / c - t0) * fs; IQ data is rotated by exp(+j 2 pi fc tau).
 *
 * Layouts: in  [n_frames][n_acquisitions][n_channels][n_samples] float32 RF or complex64 IQ
 *          out [n_frames or 1][n_k][n_j][n_i], voxel (i, j, k) at world V (i, j, k, 1),
 *          array coordinates W V (i, j, k, 1) (V = voxel_to_world, W = world_to_array).
 * Units: m, s, Hz.
 * Data holding NaN or inf is refused (one pass over it before beamforming), as das does.
 *
 * Receive apodization: window(kind, lateral / (z / (2 F#))), the lateral distance to the
 * receive element along the strip axis (line elements) or in the array plane (HERCULES);
 * for Hann this is cos^2(pi F# lateral / z), the dynamic-aperture weight of ogl_beamforming.
 * Coherence factor (Mallart & Fink, JASA 96(6) 1994): CF = |sum v|^2 / (N sum |v|^2) over
 * the N apodized contributions v of a voxel (all frames when sum_frames).
 *
 * Per voxel the transmit delays (one per acquisition) and the receive delays and weights
 * (one per channel) are computed once in double, so the inner loop over (acquisition,
 * channel) is an add, an interpolation and a multiply-add; only HERCULES needs a square
 * root per pair (its receive element depends on both), and reads its radial window from a
 * table made by plan_create (RADIAL_TABLE).  Threads take tiles of VOXEL_TILE
 * consecutive voxels; for real RF with strip receive the pair loop is outside the voxel
 * loop, so each record is read once per tile (the records of one frame, 128 x 128 x 2816
 * float32 in the paper's configuration, are far larger than the caches).
 * A volume can take seconds: the tile loop polls the caller's interrupt check
 * (common/interrupt.h); an interrupted call fills out with NaN.
 */
#include "common/interrupt.h"
#include "common/usbeam_internal.h"
#include "common/usbeam_math.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

struct usbeam_rca_plan {
    usbeam_rca_params params;    /* pointers cleared */
    double voxel_to_array[12];   /* 3x4 affine, W V */
    double *rx_u;                /* [n_channels] receive strip positions along the rx axis */
    double *tx_u;                /* [n_tx_strips] positions of the transmit orientation */
    size_t n_tx_strips;
    double *acq_position;        /* [n_acq]: FORCES u_k of the transmit element; HERCULES v_r */
    float *radial_window;        /* HERCULES: window at u = sqrt(q), q = 0 .. 1 in RADIAL_TABLE steps */
    usbeam_tx_model *waves;      /* [n_acq] (VLS/TPW/Flash) or [1] (HERCULES) */
    int n_threads;
    size_t scratch_doubles;      /* per thread */
    double *scratch;             /* CPU plans only */
    usbeam_rca_cuda *cuda;       /* USBEAM_BACKEND_CUDA: the twin in cuda/rca.cu */
};

/* Voxels handled together by one thread: the strip path visits each record once per tile
 * for all of them, so a record is read from memory once and reused from cache. */
#define VOXEL_TILE 16

/* HERCULES weighs each (acquisition, channel) pair by the window of its radial distance in
 * the array plane; a table over the squared normalised radius q = (r / half-width)^2
 * replaces a square root and a cosine per pair.  The window is a smooth function of q
 * (cos(pi sqrt(q)) is a power series in q), so linear interpolation on 4096 steps is
 * within ~1e-7 of the exact weight. */
#define RADIAL_TABLE 4096

/* Per-voxel block of thread scratch (doubles): tau_tx and dv2 [n_acq]; tau_rx, weight and
 * du2 [n_channels]; acc [out_frames][4] = (re, im, power, count); then z and the channel
 * range [c_lo, c_hi) of nonzero weight. */
typedef struct voxel_block {
    double *tau_tx, *dv2, *tau_rx, *weight, *du2, *acc;
    double z;
    size_t c_lo, c_hi;
} voxel_block;

static size_t block_doubles(const usbeam_rca_params *p)
{
    return 2 * p->n_acquisitions + 3 * p->n_channels + 4 * (p->sum_frames ? 1 : p->n_frames);
}

void usbeam_rca_plan_destroy(usbeam_rca_plan *plan)
{
    if (!plan) return;
    usbeam_rca_cuda_destroy(plan->cuda);
    usbeam_free(plan->rx_u);
    usbeam_free(plan->tx_u);
    usbeam_free(plan->acq_position);
    usbeam_free(plan->radial_window);
    usbeam_free(plan->waves);
    usbeam_free(plan->scratch);
    usbeam_free(plan);
}

static int is_forces(usbeam_rca_method m) { return m == USBEAM_RCA_FORCES || m == USBEAM_RCA_UFORCES; }
static int is_hercules(usbeam_rca_method m) { return m == USBEAM_RCA_HERCULES || m == USBEAM_RCA_UHERCULES; }
static int is_sparse(usbeam_rca_method m) { return m == USBEAM_RCA_UFORCES || m == USBEAM_RCA_UHERCULES; }

static double *strip_positions(size_t n, double pitch)
{
    double *u = usbeam_alloc(n * sizeof *u);
    if (u)
        for (size_t e = 0; e < n; ++e) u[e] = ((double)e - 0.5 * (double)(n - 1)) * pitch;
    return u;
}

static usbeam_status check_affine(const char *name, const double *m, int need_invertible)
{
    for (int i = 0; i < 16; ++i)
        if (!isfinite(m[i]))
            return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "%s must be finite (entry %d is %g)", name, i, m[i]);
    if (m[12] != 0.0 || m[13] != 0.0 || m[14] != 0.0 || m[15] != 1.0)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "%s must be affine: last row 0 0 0 1", name);
    if (need_invertible) {
        const double det = m[0] * (m[5] * m[10] - m[6] * m[9]) - m[1] * (m[4] * m[10] - m[6] * m[8]) +
                           m[2] * (m[4] * m[9] - m[5] * m[8]);
        double scale = 0.0;
        for (int r = 0; r < 3; ++r)
            for (int c = 0; c < 3; ++c) scale = fmax(scale, fabs(m[4 * r + c]));
        if (!(fabs(det) > 1e-12 * scale * scale * scale))
            return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "%s is singular (determinant %g)", name, det);
    }
    return USBEAM_OK;
}

static usbeam_status validate(const usbeam_rca_params *p)
{
    usbeam_status st;
    if (p->method < USBEAM_RCA_FORCES || p->method > USBEAM_RCA_FLASH)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "method: unknown value %d", (int)p->method);
    if (p->n_columns < 1 || p->n_columns > USBEAM_RCA_MAX_ELEMENTS || p->n_rows < 1 ||
        p->n_rows > USBEAM_RCA_MAX_ELEMENTS)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "n_columns and n_rows must be in 1..%d (got %zu, %zu)",
                           USBEAM_RCA_MAX_ELEMENTS, p->n_columns, p->n_rows);
    if ((st = usbeam_check_positive("pitch_x", p->pitch_x)) != USBEAM_OK) return st;
    if ((st = usbeam_check_positive("pitch_y", p->pitch_y)) != USBEAM_OK) return st;
    if ((st = check_affine("transform", p->world_to_array, 1)) != USBEAM_OK) return st;
    if ((st = check_affine("voxel_transform", p->voxel_to_world, 0)) != USBEAM_OK) return st;
    if ((st = usbeam_check_positive("fs", p->fs)) != USBEAM_OK) return st;
    if ((st = usbeam_check_positive("c", p->c)) != USBEAM_OK) return st;
    if ((st = usbeam_check_finite("t0", p->t0)) != USBEAM_OK) return st;
    if (p->data_complex ? (st = usbeam_check_positive("fc", p->fc)) != USBEAM_OK
                        : (st = usbeam_check_nonnegative("fc", p->fc)) != USBEAM_OK)
        return st;
    if ((st = usbeam_check_nonnegative("f_number", p->f_number)) != USBEAM_OK) return st;
    if (p->window < USBEAM_WINDOW_RECT || p->window > USBEAM_WINDOW_TUKEY)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "window: unknown value %d", p->window);
    if (!(p->tukey_alpha >= 0.0 && p->tukey_alpha <= 1.0))
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "tukey_alpha must be in [0, 1] (got %g)", p->tukey_alpha);
    if (usbeam_interp_taps(p->interpolation) == 0)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "interpolation: unknown value %d", p->interpolation);
    if (p->n_frames < 1 || p->n_acquisitions < 1 || p->n_samples < 1 || p->n_i < 1 || p->n_j < 1 || p->n_k < 1)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT,
                           "n_frames, n_acquisitions, n_samples and the output shape must be >= 1");
    if (p->n_samples > (size_t)INT32_MAX - 8)
        return usbeam_fail(USBEAM_ERR_SIZE_OVERFLOW, "n_samples (%zu) is too large", p->n_samples);
    const size_t rx_strips = p->rx_rows ? p->n_rows : p->n_columns;
    const size_t other_strips = p->rx_rows ? p->n_columns : p->n_rows;
    if (p->n_channels != rx_strips)
        return usbeam_fail(USBEAM_ERR_INVALID_SHAPE,
                           "data has %zu channels but the receive orientation (%s) has %zu strips",
                           p->n_channels, p->rx_rows ? "rows" : "columns", rx_strips);
    size_t expected = 0;
    if (p->method == USBEAM_RCA_FORCES) expected = rx_strips;
    if (p->method == USBEAM_RCA_HERCULES) expected = other_strips;
    if (expected && p->n_acquisitions != expected)
        return usbeam_fail(USBEAM_ERR_INVALID_SHAPE,
                           "n_acquisitions (%zu) must equal the %zu decoded %s strips of %s",
                           p->n_acquisitions, expected,
                           (p->method == USBEAM_RCA_FORCES) == (p->rx_rows != 0) ? "row" : "column",
                           p->method == USBEAM_RCA_FORCES ? "FORCES" : "HERCULES");
    if (is_sparse(p->method)) {
        if (!p->sparse_elements)
            return usbeam_fail(USBEAM_ERR_NULL_POINTER, "sparse_elements must be given for uFORCES/uHERCULES");
        const size_t limit = p->method == USBEAM_RCA_UFORCES ? rx_strips : other_strips;
        for (size_t a = 0; a < p->n_acquisitions; ++a)
            if (p->sparse_elements[a] < 0 || (size_t)p->sparse_elements[a] >= limit)
                return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT,
                                   "sparse_elements[%zu] = %d is out of range 0..%zu", a,
                                   (int)p->sparse_elements[a], limit - 1);
    }
    const size_t n_waves = is_hercules(p->method) ? 1 : is_forces(p->method) ? 0 : p->n_acquisitions;
    if (n_waves) {
        if (!p->angles || !p->focal_depths)
            return usbeam_fail(USBEAM_ERR_NULL_POINTER, "angles and focal_depths must be given");
        for (size_t a = 0; a < n_waves; ++a) {
            const double angle = p->angles[a], depth = p->focal_depths[a];
            if (!(fabs(angle) < 0.5 * USBEAM_PI))
                return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "angles[%zu] must be finite and within "
                                   "(-pi/2, pi/2) rad (got %g)", a, angle);
            if (isnan(depth) || depth == 0.0)
                return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT,
                                   "focal_depths[%zu] must be non-zero (inf for a plane wave; got %g)", a, depth);
            if (p->method == USBEAM_RCA_TPW && !isinf(depth))
                return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT,
                                   "focal_depths[%zu] must be infinite for TPW (got %g)", a, depth);
            if (p->method == USBEAM_RCA_VLS && isinf(depth))
                return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT,
                                   "focal_depths[%zu] must be finite for VLS (got %g)", a, depth);
            if (p->method == USBEAM_RCA_FLASH && (!isinf(depth) || angle != 0.0))
                return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT,
                                   "Flash transmits are unsteered plane waves (acquisition %zu has angle %g, "
                                   "focal depth %g)", a, angle, depth);
        }
    }
    return USBEAM_OK;
}

usbeam_status usbeam_rca_plan_create(const usbeam_rca_params *params, usbeam_backend backend,
                                     usbeam_rca_plan **plan)
{
    if (!params || !plan) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "params and plan must not be NULL");
    *plan = NULL;
    if (backend != USBEAM_BACKEND_CPU && backend != USBEAM_BACKEND_CUDA)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "backend: unknown value %d", (int)backend);
    usbeam_status st = validate(params);
    if (st != USBEAM_OK) return st;
    const usbeam_rca_params *p = params;
    size_t in_count, points, tmp;
    if (usbeam_mul_size3(p->n_frames, p->n_acquisitions, p->n_channels, &tmp) != 0 ||
        usbeam_mul_size3(tmp, p->n_samples, p->data_complex ? 8 : 4, &in_count) != 0 ||
        in_count > USBEAM_MAX_ALLOCATION || usbeam_mul_size3(p->n_i, p->n_j, p->n_k, &points) != 0 ||
        usbeam_mul_size3(points, p->sum_frames ? 1 : p->n_frames, 8, &tmp) != 0 || tmp > USBEAM_MAX_ALLOCATION)
        return usbeam_fail(USBEAM_ERR_SIZE_OVERFLOW, "data or output size is too large");

    usbeam_rca_plan *pl = usbeam_alloc(sizeof *pl);
    if (!pl) return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "rca plan");
    pl->params = *p;
    pl->params.angles = pl->params.focal_depths = NULL;
    pl->params.sparse_elements = NULL;

    /* voxel -> array = W V, rows 0..2 */
    const double *W = p->world_to_array, *V = p->voxel_to_world;
    for (int r = 0; r < 3; ++r)
        for (int c = 0; c < 4; ++c) {
            double sum = 0.0;
            for (int k = 0; k < 4; ++k) sum += W[4 * r + k] * V[4 * k + c];
            pl->voxel_to_array[4 * r + c] = sum;
        }

    const size_t n_acq = p->n_acquisitions;
    const int tx_rows = is_forces(p->method) ? p->rx_rows : p->tx_rows;
    pl->params.tx_rows = tx_rows;
    pl->n_tx_strips = tx_rows ? p->n_rows : p->n_columns;
    pl->rx_u = strip_positions(p->n_channels, p->rx_rows ? p->pitch_y : p->pitch_x);
    pl->tx_u = strip_positions(pl->n_tx_strips, tx_rows ? p->pitch_y : p->pitch_x);
    pl->acq_position = usbeam_alloc(n_acq * sizeof(double));
    const size_t n_waves = is_hercules(p->method) ? 1 : is_forces(p->method) ? 0 : n_acq;
    pl->waves = usbeam_alloc((n_waves ? n_waves : 1) * sizeof(usbeam_tx_model));
#ifdef _OPENMP
    pl->n_threads = omp_get_max_threads();
#else
    pl->n_threads = 1;
#endif
    if (pl->n_threads < 1) pl->n_threads = 1;
    /* per thread: one voxel_block per voxel of a tile */
    pl->scratch_doubles = VOXEL_TILE * block_doubles(p);
    if (!pl->rx_u || !pl->tx_u || !pl->acq_position || !pl->waves ||
        (backend == USBEAM_BACKEND_CPU && /* a CUDA plan has no host scratch */
         (usbeam_mul_size3(pl->scratch_doubles, (size_t)pl->n_threads, sizeof(double), &tmp) != 0 ||
          !(pl->scratch = usbeam_alloc(tmp))))) {
        usbeam_rca_plan_destroy(pl);
        return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "rca plan tables");
    }

    if (is_forces(p->method)) {
        for (size_t a = 0; a < n_acq; ++a) {
            size_t k = is_sparse(p->method) ? (size_t)p->sparse_elements[a] : a;
            pl->acq_position[a] = pl->tx_u[k];
        }
    } else if (is_hercules(p->method)) {
        const size_t n_other = p->rx_rows ? p->n_columns : p->n_rows;
        double *other = strip_positions(n_other, p->rx_rows ? p->pitch_x : p->pitch_y);
        if (!other) {
            usbeam_rca_plan_destroy(pl);
            return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "rca plan tables");
        }
        for (size_t a = 0; a < n_acq; ++a)
            pl->acq_position[a] = other[is_sparse(p->method) ? (size_t)p->sparse_elements[a] : a];
        usbeam_free(other);
    }
    for (size_t a = 0; a < n_waves; ++a)
        pl->waves[a] = usbeam_rca_wave_model(p->angles[a], p->focal_depths[a], pl->tx_u, (int)pl->n_tx_strips);
    if (is_hercules(p->method)) {
        pl->radial_window = usbeam_alloc((RADIAL_TABLE + 2) * sizeof(float));
        if (!pl->radial_window) {
            usbeam_rca_plan_destroy(pl);
            return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "rca plan tables");
        }
        for (int q = 0; q <= RADIAL_TABLE; ++q)
            pl->radial_window[q] = (float)usbeam_window(p->window, sqrt((double)q / RADIAL_TABLE), p->tukey_alpha);
        pl->radial_window[RADIAL_TABLE + 1] = pl->radial_window[RADIAL_TABLE]; /* interpolation guard */
    }
    if (backend == USBEAM_BACKEND_CUDA) {
        const usbeam_rca_tables tables = {&pl->params, pl->voxel_to_array, pl->rx_u, pl->acq_position, pl->waves,
                                          n_waves, pl->radial_window, RADIAL_TABLE};
        st = usbeam_rca_cuda_create(&tables, &pl->cuda);
        if (st != USBEAM_OK) {
            usbeam_rca_plan_destroy(pl);
            return st;
        }
    }
    *plan = pl;
    return USBEAM_OK;
}

/* Apodization weight of a lateral distance at depth z. */
static inline double receive_weight(const usbeam_rca_params *p, double lateral, double z)
{
    if (p->f_number == 0.0) return 1.0;
    if (!(z > 0.0)) return 0.0;
    return usbeam_window(p->window, lateral * 2.0 * p->f_number / z, p->tukey_alpha);
}

static voxel_block block_at(const usbeam_rca_params *p, double *base)
{
    voxel_block b;
    b.tau_tx = base;
    b.dv2 = b.tau_tx + p->n_acquisitions;
    b.tau_rx = b.dv2 + p->n_acquisitions;
    b.weight = b.tau_rx + p->n_channels;
    b.du2 = b.weight + p->n_channels;
    b.acc = b.du2 + p->n_channels;
    b.z = 0.0;
    b.c_lo = b.c_hi = 0;
    return b;
}

/* Geometry of one voxel: transmit and receive delays (s), receive weights, zeroed sums. */
static void voxel_geometry(const usbeam_rca_plan *pl, size_t voxel, voxel_block *b)
{
    const usbeam_rca_params *p = &pl->params;
    const size_t n_acq = p->n_acquisitions, n_ch = p->n_channels;
    const size_t i = voxel % p->n_i, j = (voxel / p->n_i) % p->n_j, k = voxel / (p->n_i * p->n_j);
    const double *M = pl->voxel_to_array;
    const double x = M[0] * (double)i + M[1] * (double)j + M[2] * (double)k + M[3];
    const double y = M[4] * (double)i + M[5] * (double)j + M[6] * (double)k + M[7];
    const double z = M[8] * (double)i + M[9] * (double)j + M[10] * (double)k + M[11];
    const double u_rx = p->rx_rows ? y : x, v_rx = p->rx_rows ? x : y;
    const double u_tx = p->tx_rows ? y : x;
    const double inv_c = 1.0 / p->c;
    b->z = z;
    for (size_t a = 0; a < n_acq; ++a) {
        if (is_forces(p->method)) {
            b->tau_tx[a] = usbeam_rca_forces_tx_path(u_rx, v_rx, z, pl->acq_position[a]) * inv_c;
        } else if (is_hercules(p->method)) {
            const double dv = v_rx - pl->acq_position[a];
            b->dv2[a] = dv * dv;
            b->tau_tx[a] = usbeam_tx_path(&pl->waves[0], u_tx, 0.0, z) * inv_c;
        } else {
            b->tau_tx[a] = usbeam_tx_path(&pl->waves[a], u_tx, 0.0, z) * inv_c;
        }
    }
    for (size_t c = 0; c < n_ch; ++c) {
        const double du = u_rx - pl->rx_u[c];
        b->du2[c] = du * du;
        b->tau_rx[c] = usbeam_rca_strip_path(u_rx, z, pl->rx_u[c]) * inv_c;
        b->weight[c] = receive_weight(p, fabs(du), z);
    }
    /* the strip aperture is contiguous: the window is symmetric and the strips sorted */
    size_t lo = 0, hi = n_ch;
    while (lo < n_ch && b->weight[lo] == 0.0) ++lo;
    while (hi > lo && b->weight[hi - 1] == 0.0) --hi;
    b->c_lo = lo;
    b->c_hi = hi;
    const size_t out_frames = p->sum_frames ? 1 : p->n_frames;
    for (size_t f = 0; f < 4 * out_frames; ++f) b->acc[f] = 0.0;
}

static inline float catmull_rom_at(const float *r, float t)
{
    float w[4];
    usbeam_catmull_rom_weights(t, w);
    return w[0] * r[-1] + w[1] * r[0] + w[2] * r[1] + w[3] * r[2];
}

/*
 * Real RF data with strip receive (every method but HERCULES), a tile of voxels: delays
 * in samples, tau_tx <- (tau_tx - t0) fs and tau_rx <- tau_rx fs, added per pair; only the
 * channels inside a voxel's aperture count.  One loop per interpolation kind so that each
 * body is straight-line code.
 */
#define STRIP_TILE_LOOP(VALID, TAP0, VALUE)                                                     \
    for (size_t a = 0; a < n_acq; ++a) {                                                        \
        const float *records = frame_data + a * n_ch * ns;                                      \
        for (size_t c = c_lo; c < c_hi; ++c) {                                                  \
            const float *record = records + c * ns;                                             \
            for (size_t v = 0; v < n_tile; ++v) {                                               \
                const double w = tile[v].weight[c];                                             \
                const double s = tile[v].tau_tx[a] + tile[v].tau_rx[c];                         \
                if (w == 0.0 || !(VALID)) continue;                                             \
                const double whole = TAP0;                                                      \
                const float t = (float)(s - whole);                                             \
                const float *r = record + (ptrdiff_t)whole;                                     \
                (void)t;                                                                        \
                const double value = w * (double)(VALUE);                                       \
                double *sum = tile[v].acc + acc_offset;                                         \
                sum[0] += value;                                                                \
                sum[2] += value * value;                                                        \
                sum[3] += 1.0;                                                                  \
            }                                                                                   \
        }                                                                                       \
    }

static void accumulate_strips_real(const usbeam_rca_params *p, const float *in, voxel_block *tile, size_t n_tile)
{
    const size_t n_acq = p->n_acquisitions, n_ch = p->n_channels, ns = p->n_samples;
    size_t c_lo = n_ch, c_hi = 0;
    for (size_t v = 0; v < n_tile; ++v) {
        for (size_t a = 0; a < n_acq; ++a) tile[v].tau_tx[a] = (tile[v].tau_tx[a] - p->t0) * p->fs;
        for (size_t c = 0; c < n_ch; ++c) tile[v].tau_rx[c] *= p->fs;
        if (tile[v].c_hi > tile[v].c_lo) {
            c_lo = tile[v].c_lo < c_lo ? tile[v].c_lo : c_lo;
            c_hi = tile[v].c_hi > c_hi ? tile[v].c_hi : c_hi;
        }
    }
    const double last = (double)ns;
    for (size_t frame = 0; frame < p->n_frames; ++frame) {
        const float *frame_data = in + frame * n_acq * n_ch * ns;
        const size_t acc_offset = 4 * (p->sum_frames ? 0 : frame);
        if (p->interpolation == USBEAM_INTERP_CUBIC) {
            /* s >= 1 here, so truncation is floor (and avoids a libm call without SSE4.1) */
            STRIP_TILE_LOOP(s >= 1.0 && s <= last - 3.0, (double)(int64_t)s, catmull_rom_at(r, t))
        } else if (p->interpolation == USBEAM_INTERP_LINEAR) {
            STRIP_TILE_LOOP(s >= 0.0 && s <= last - 2.0, (double)(int64_t)s, (1.0f - t) * r[0] + t * r[1])
        } else {
            STRIP_TILE_LOOP(s >= 0.0 && s <= last - 1.0, rint(s), r[0])
        }
    }
}
#undef STRIP_TILE_LOOP

/* Complex IQ data or HERCULES (receive element per pair): one voxel at a time. */
static void accumulate_general(const usbeam_rca_plan *pl, const void *in, voxel_block *b)
{
    const usbeam_rca_params *p = &pl->params;
    const size_t n_acq = p->n_acquisitions, n_ch = p->n_channels, ns = p->n_samples;
    const int kind = p->interpolation, taps = usbeam_interp_taps(kind), hercules = is_hercules(p->method);
    const double inv_c = 1.0 / p->c, z = b->z;
    /* squared radius of the receive aperture, z / (2 F#); unbounded without f-number,
     * empty (-1) for voxels not in front of the array (z <= 0) */
    double aperture2 = INFINITY, inv_aperture2 = 0.0;
    if (p->f_number > 0.0) {
        const double half_width = z / (2.0 * p->f_number);
        aperture2 = z > 0.0 ? half_width * half_width : -1.0;
        inv_aperture2 = z > 0.0 ? 1.0 / aperture2 : 0.0;
    }
    for (size_t frame = 0; frame < p->n_frames; ++frame) {
        double *sum = b->acc + 4 * (p->sum_frames ? 0 : frame);
        for (size_t a = 0; a < n_acq; ++a) {
            const size_t record0 = (frame * n_acq + a) * n_ch;
            for (size_t c = 0; c < n_ch; ++c) {
                double w = b->weight[c], tau;
                if (hercules) {
                    const double lateral2 = b->du2[c] + b->dv2[a];
                    if (lateral2 > aperture2) continue; /* outside the f-number disc: weight 0 */
                    if (p->f_number > 0.0) {
                        const double q = lateral2 * inv_aperture2 * RADIAL_TABLE;
                        const int k = (int)q;
                        const double frac = q - k;
                        w = (1.0 - frac) * pl->radial_window[k] + frac * pl->radial_window[k + 1];
                    } else {
                        w = 1.0;
                    }
                    if (w == 0.0) continue;
                    tau = b->tau_tx[a] + sqrt(lateral2 + z * z) * inv_c;
                } else {
                    tau = b->tau_tx[a] + b->tau_rx[c];
                }
                if (w == 0.0) continue;
                const double s = (tau - p->t0) * p->fs;
                int first;
                float tw[USBEAM_INTERP_MAX_TAPS];
                if (!usbeam_interp_weights(kind, s, (int)ns, &first, tw)) continue;
                const size_t base = (record0 + c) * ns + (size_t)first;
                if (p->data_complex) {
                    const usbeam_cf32 *rec = (const usbeam_cf32 *)in + base;
                    float re = 0.0f, im = 0.0f;
                    for (int t = 0; t < taps; ++t) {
                        re += tw[t] * rec[t].re;
                        im += tw[t] * rec[t].im;
                    }
                    const usbeam_cf32 rot = usbeam_phase_rotation(p->fc, tau);
                    const double vr = w * ((double)re * rot.re - (double)im * rot.im);
                    const double vi = w * ((double)re * rot.im + (double)im * rot.re);
                    sum[0] += vr;
                    sum[1] += vi;
                    sum[2] += vr * vr + vi * vi;
                } else {
                    const float *rec = (const float *)in + base;
                    float value = 0.0f;
                    for (int t = 0; t < taps; ++t) value += tw[t] * rec[t];
                    const double v = w * (double)value;
                    sum[0] += v;
                    sum[2] += v * v;
                }
                sum[3] += 1.0;
            }
        }
    }
}

/* The coherence factor, then the output values of one voxel. */
static void write_voxel(const usbeam_rca_params *p, const voxel_block *b, void *out, size_t voxel, size_t n_voxels)
{
    const size_t out_frames = p->sum_frames ? 1 : p->n_frames;
    for (size_t f = 0; f < out_frames; ++f) {
        const double *sum = b->acc + 4 * f;
        double scale = 1.0;
        if (p->coherence_factor) {
            const double coherent = sum[0] * sum[0] + sum[1] * sum[1];
            scale = sum[2] > 0.0 ? coherent / (sum[3] * sum[2]) : 0.0;
        }
        const size_t at = f * n_voxels + voxel;
        if (p->data_complex) {
            float *dst = (float *)out + 2 * at;
            dst[0] = (float)(scale * sum[0]);
            dst[1] = (float)(scale * sum[1]);
        } else {
            ((float *)out)[at] = (float)(scale * sum[0]);
        }
    }
}

usbeam_status usbeam_rca_execute(usbeam_rca_plan *plan, const void *in, void *out)
{
    if (!plan || !in || !out) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "plan, in and out must not be NULL");
    if (plan->cuda) return usbeam_rca_cuda_execute(plan->cuda, in, out); /* device pointers, queued */
    const usbeam_rca_params *p = &plan->params;
    {   /* NaN or inf would reach every voxel that reads it: refuse it, as das does (the CUDA
         * twin flags what it reads instead).  x - x is 0 only for finite x. */
        const ptrdiff_t n_values = (ptrdiff_t)(p->n_frames * p->n_acquisitions * p->n_channels * p->n_samples *
                                               (p->data_complex ? 2 : 1));
        const float *x = in;
        size_t bad = 0;
#pragma omp parallel for schedule(static) reduction(+ : bad) num_threads(usbeam_team_size(plan->n_threads))
        for (ptrdiff_t i = 0; i < n_values; ++i) bad += !(x[i] - x[i] == 0.0f);
        if (bad)
            return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "data contains NaN or infinite values (%zu of %zu values)",
                               bad, (size_t)n_values);
    }
    const size_t n_voxels = p->n_i * p->n_j * p->n_k, stride = block_doubles(p);
    const ptrdiff_t n_tiles = (ptrdiff_t)((n_voxels + VOXEL_TILE - 1) / VOXEL_TILE);
    const int strips_real = !p->data_complex && !is_hercules(p->method);
    usbeam_interrupt interrupt;
    usbeam_interrupt_begin(&interrupt);
#pragma omp parallel for schedule(dynamic, 4) num_threads(usbeam_team_size(plan->n_threads))
    for (ptrdiff_t t = 0; t < n_tiles; ++t) {
        if (usbeam_interrupt_poll(&interrupt)) continue; /* Ctrl-C: the other tiles are skipped */
        int thread = 0;
#ifdef _OPENMP
        thread = omp_get_thread_num();
#endif
        double *scratch = plan->scratch + (size_t)thread * plan->scratch_doubles;
        const size_t first = (size_t)t * VOXEL_TILE;
        const size_t n_tile = n_voxels - first < VOXEL_TILE ? n_voxels - first : VOXEL_TILE;
        voxel_block tile[VOXEL_TILE];
        for (size_t v = 0; v < n_tile; ++v) {
            tile[v] = block_at(p, scratch + v * stride);
            voxel_geometry(plan, first + v, &tile[v]);
        }
        if (strips_real)
            accumulate_strips_real(p, in, tile, n_tile);
        else
            for (size_t v = 0; v < n_tile; ++v) accumulate_general(plan, in, &tile[v]);
        for (size_t v = 0; v < n_tile; ++v) write_voxel(p, &tile[v], out, first + v, n_voxels);
    }
    usbeam_status st = usbeam_interrupt_end(&interrupt);
    if (st != USBEAM_OK) /* no partial volume survives */
        usbeam_fill_nan(out, n_voxels * (p->sum_frames ? 1 : p->n_frames) * (p->data_complex ? 2 : 1));
    return st;
}

usbeam_cuda_exec *usbeam_rca_plan_cuda(usbeam_rca_plan *plan)
{
    return plan && plan->cuda ? usbeam_rca_cuda_exec(plan->cuda) : NULL;
}
