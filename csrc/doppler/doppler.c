/*
 * doppler.c - color Doppler (Kasai autocorrelator) and power Doppler, CPU backend.
 *
 * Layout: in complex64[n_frames][n_images][nz][nx] (slow time leading), outputs
 *         float32[n_images][nz][nx].  Power Doppler takes [n_frames][n_pixels].
 * Units:  fc, prf in Hz, c in m/s, dz in m; velocity in m/s, variance in (m/s)^2.
 *
 * Color Doppler (Kasai et al., IEEE SU 1985; Loupas et al., IEEE UFFC 1995), with the sign,
 * scaling and variance of PyMUST/MUST iq2doppler (D. Garcia):
 *   R(k) = sum_{t=0}^{N-1-k} x[t] conj(x[t+k])      lag-k slow-time autocorrelation
 *   P    = sum_{t=0}^{N-1} |x[t]|^2                 (all N frames, as PyMUST)
 *   both optionally averaged over a window_z x window_x neighbourhood (boxcar or symmetric
 *   Hamming, the product of two 1-D windows; edges mirrored like scipy convolve2d
 *   boundary='symmetric', mode 'same': out[i] = sum_j h[j] in[i - M/2 + j]),
 *   VN = c PRF / (4 fc k)                            Nyquist velocity at lag k
 *   v  = -VN arg(R(k)) / pi                          in (-VN, VN]
 *   var = 2 (VN/pi)^2 (1 - |R(k)| / P)               (Jensen 1996, eq. 7.48; PyMUST)
 * A positive velocity is a positive Doppler shift: with the IQ convention of README.md
 * (down-mixing by exp(-j 2 pi fc t)) that is motion toward the probe.
 * Axial correction (Loupas 2-D autocorrelator): the mean RF frequency f_mean replaces fc in
 * the velocity scaling, v_corrected = v * fc / f_mean.  It is estimated from the axial lag-1
 * autocorrelation over the ensemble, Rz = sum_t x[t][z+1] conj(x[t][z]) (averaged with the
 * same window): beamformed IQ in the usbeam/PyMUST convention carries the RF phase along
 * depth, 4 pi f dz / c per row, so f_mean = fc + wrap(arg Rz - 4 pi fc dz / c) c / (4 pi dz),
 * unambiguous for |f_mean - fc| < c / (4 dz).  The variance is not rescaled.
 *
 * Power Doppler (Rubin et al., Radiology 1994): P = (1/N) sum_t |x[t]|^2 per pixel after
 * the clutter filter; linear, or 10 log10(P / ref) dB with ref the max (or a fixed value),
 * with values below a noise floor raised to it.
 *
 * NaN or inf input is refused (USBEAM_ERR_INVALID_ARGUMENT): both estimators already sum
 * |x[t]|^2 over the ensemble in double, which is finite exactly when every sample of the pixel
 * is (float32 squares cannot overflow a double), so testing that sum per pixel is the whole
 * check.  A refused call fills its outputs with NaN (no partial map).
 *
 * backend CUDA: create validates and builds the windows here exactly as for the CPU, then
 * hands them to the twin in cuda/doppler.cu (no host accumulators); execute forwards.
 */
#include "common/interrupt.h"
#include "common/usbeam_internal.h"

#include <float.h>
#include <math.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#define DOPPLER_PI 3.14159265358979323846
#define PIXEL_BLOCK 256
#define MAX_WINDOW 129

struct usbeam_color_plan {
    usbeam_color_params params;
    size_t n_pixels;
    double nyquist;        /* m/s at the plan's lag */
    double window_z[MAX_WINDOW], window_x[MAX_WINDOW];
    int smooth;
    /* accumulators, double[n_pixels] each: R(lag) re/im, P, axial Rz re/im */
    double *acc[5];
    double *tmp;           /* double[n_acc][nz * nx]: separable smoothing scratch */
    usbeam_color_cuda *cuda; /* backend CUDA: the twin, which owns the device buffers */
};

static void make_window(double *w, int m, usbeam_doppler_window kind)
{
    for (int j = 0; j < m; ++j)
        w[j] = (kind == USBEAM_WINDOW_HAMMING && m > 1) ? 0.54 - 0.46 * cos(2.0 * DOPPLER_PI * j / (m - 1)) : 1.0;
}

usbeam_status usbeam_color_plan_create(const usbeam_color_params *params, usbeam_backend backend,
                                       usbeam_color_plan **plan)
{
    usbeam_status st;
    if (!params || !plan) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "params and plan must not be NULL");
    *plan = NULL;
    if (backend != USBEAM_BACKEND_CPU && backend != USBEAM_BACKEND_CUDA)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "backend: unknown backend %d", (int)backend);
    if ((st = usbeam_check_positive("fc", params->fc)) != USBEAM_OK) return st;
    if ((st = usbeam_check_positive("prf", params->prf)) != USBEAM_OK) return st;
    if ((st = usbeam_check_positive("c", params->c)) != USBEAM_OK) return st;
    if (params->lag < 1) return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "lag must be >= 1 (got %d)", params->lag);
    if (params->n_frames <= (size_t)params->lag)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT,
                           "lag %d needs an ensemble longer than the lag (n_frames = %zu)", params->lag,
                           params->n_frames);
    if (params->n_images == 0 || params->nz == 0 || params->nx == 0)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "image: is empty (%zu images of %zu x %zu)",
                           params->n_images, params->nz, params->nx);
    if (params->window_z < 1 || params->window_x < 1 || params->window_z > MAX_WINDOW ||
        params->window_x > MAX_WINDOW)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "window must be 1..%d pixels on each axis (got %d x %d)",
                           MAX_WINDOW, params->window_z, params->window_x);
    if (params->window != USBEAM_WINDOW_BOXCAR && params->window != USBEAM_WINDOW_HAMMING)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "window: unknown kind %d", (int)params->window);
    if (params->axial_correction) {
        if ((st = usbeam_check_positive("dz", params->dz)) != USBEAM_OK) return st;
        if (params->nz < 2)
            return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "axial_correction needs nz >= 2 (got %zu)", params->nz);
    }
    size_t n_pixels, image_size, bytes;
    if (usbeam_mul_size3(params->n_images, params->nz, params->nx, &n_pixels) != 0 ||
        usbeam_mul_size(n_pixels, sizeof(double), &bytes) != 0 || bytes > USBEAM_MAX_ALLOCATION)
        return usbeam_fail(USBEAM_ERR_SIZE_OVERFLOW, "image: %zu x %zu x %zu pixels is too large", params->n_images,
                           params->nz, params->nx);
    image_size = params->nz * params->nx;

    usbeam_color_plan *p = usbeam_alloc(sizeof *p);
    if (!p) return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "color plan");
    p->params = *params;
    p->n_pixels = n_pixels;
    p->nyquist = params->c * params->prf / (4.0 * params->fc * params->lag);
    p->smooth = params->window_z > 1 || params->window_x > 1;
    make_window(p->window_z, params->window_z, params->window);
    make_window(p->window_x, params->window_x, params->window);
    if (backend == USBEAM_BACKEND_CUDA) {
        st = usbeam_color_cuda_create(params, p->window_z, p->window_x, p->nyquist, &p->cuda);
        if (st != USBEAM_OK) {
            usbeam_color_plan_destroy(p);
            return st;
        }
        *plan = p;
        return USBEAM_OK;
    }
    int failed = 0;
    int n_acc = params->axial_correction ? 5 : 3;
    for (int a = 0; a < n_acc; ++a)
        if (!(p->acc[a] = usbeam_alloc(bytes))) failed = 1;
    if (p->smooth && !(p->tmp = usbeam_alloc((size_t)n_acc * image_size * sizeof(double)))) failed = 1;
    if (failed) {
        usbeam_color_plan_destroy(p);
        return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "color plan: accumulators for %zu pixels", n_pixels);
    }
    *plan = p;
    return USBEAM_OK;
}

void usbeam_color_plan_destroy(usbeam_color_plan *plan)
{
    if (!plan) return;
    usbeam_color_cuda_destroy(plan->cuda);
    for (int a = 0; a < 5; ++a) usbeam_free(plan->acc[a]);
    usbeam_free(plan->tmp);
    usbeam_free(plan);
}

usbeam_cuda_exec *usbeam_color_plan_cuda(usbeam_color_plan *plan)
{
    return plan && plan->cuda ? usbeam_color_cuda_exec(plan->cuda) : NULL;
}

/* Mirror an index into [0, n) the way scipy's boundary='symmetric' does (edge repeated). */
static inline ptrdiff_t mirror(ptrdiff_t i, ptrdiff_t n)
{
    ptrdiff_t period = 2 * n;
    i %= period;
    if (i < 0) i += period;
    return i < n ? i : period - 1 - i;
}

/* Separable window over one nz x nx image of each of the n_acc accumulators, in place
 * (scratch tmp: n_acc images).  One parallel region, rows of all accumulators shared out
 * together, so a small image does not pay for many fork/join barriers. */
static void smooth_images(double *const *acc, int n_acc, size_t offset, double *tmp, size_t nz, size_t nx,
                          const double *wz, int mz, const double *wx, int mx)
{
    const ptrdiff_t NZ = (ptrdiff_t)nz, NX = (ptrdiff_t)nx, rows = (ptrdiff_t)n_acc * NZ;
#pragma omp parallel
    {
#pragma omp for schedule(static)
        for (ptrdiff_t r = 0; r < rows; ++r) {
            const ptrdiff_t a = r / NZ, z = r % NZ;
            const double *row = acc[a] + offset + z * NX;
            double *dst = tmp + (a * NZ + z) * NX;
            for (ptrdiff_t x = 0; x < NX; ++x) {
                double sum = 0.0;
                for (int j = 0; j < mx; ++j) sum += wx[j] * row[mirror(x - mx / 2 + j, NX)];
                dst[x] = sum;
            }
        }
#pragma omp for schedule(static)
        for (ptrdiff_t r = 0; r < rows; ++r) {
            const ptrdiff_t a = r / NZ, z = r % NZ;
            double *dst = acc[a] + offset + z * NX;
            for (ptrdiff_t x = 0; x < NX; ++x) dst[x] = 0.0;
            for (int j = 0; j < mz; ++j) {
                const double *src = tmp + (a * NZ + mirror(z - mz / 2 + j, NZ)) * NX;
                const double w = wz[j];
                for (ptrdiff_t x = 0; x < NX; ++x) dst[x] += w * src[x];
            }
        }
    }
}

/* Kasai sums over slow time for one block of `count` pixels, in double (products of two
 * float32 values are exact in double): sr + j si = sum_t x[t] conj(x[t+lag]), sp = sum_t |x[t]|^2.
 * Built twice on x86-64 Linux with GCC, baseline and x86-64-v3 (AVX2 + FMA), the loader
 * picking the one the CPU runs; the baseline only elsewhere and under the sanitizers. */
#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_ADDRESS__)
__attribute__((target_clones("arch=x86-64-v3", "default")))
#endif
static void accumulate_block(const float *iq, size_t n_frames, size_t n_pixels, size_t lag, size_t first,
                             size_t count, double *sr, double *si, double *sp)
{
    for (size_t i = 0; i < count; ++i) sr[i] = si[i] = sp[i] = 0.0;
    for (size_t t = 0; t < n_frames; ++t) {
        const float *a = iq + 2 * (t * n_pixels + first);
        for (size_t i = 0; i < count; ++i) sp[i] += (double)a[2 * i] * a[2 * i] + (double)a[2 * i + 1] * a[2 * i + 1];
        if (t + lag < n_frames) {
            const float *b = iq + 2 * ((t + lag) * n_pixels + first);
            for (size_t i = 0; i < count; ++i) { /* a * conj(b) */
                double ar = a[2 * i], ai = a[2 * i + 1], br = b[2 * i], bi = b[2 * i + 1];
                sr[i] += ar * br + ai * bi;
                si[i] += ai * br - ar * bi;
            }
        }
    }
}

usbeam_status usbeam_color_execute(usbeam_color_plan *plan, const void *in, float *velocity, float *variance,
                                   float *power)
{
    if (!plan || !in || !velocity)
        return usbeam_fail(USBEAM_ERR_NULL_POINTER, "plan, in and velocity must not be NULL");
    if (plan->cuda) return usbeam_color_cuda_execute(plan->cuda, in, velocity, variance, power);
    const usbeam_color_params *prm = &plan->params;
    const float *iq = in;
    const size_t n_frames = prm->n_frames, n_pixels = plan->n_pixels, lag = (size_t)prm->lag;
    const size_t nz = prm->nz, nx = prm->nx, image_size = nz * nx;
    const int axial = prm->axial_correction;
    double *r_re = plan->acc[0], *r_im = plan->acc[1], *pw = plan->acc[2];
    double *az_re = plan->acc[3], *az_im = plan->acc[4];
    const ptrdiff_t n_blocks = (ptrdiff_t)((n_pixels + PIXEL_BLOCK - 1) / PIXEL_BLOCK);
    int bad = 0;
    usbeam_interrupt interrupt; /* Ctrl-C between pixel blocks (common/interrupt.h) */
    usbeam_interrupt_begin(&interrupt);

#pragma omp parallel for schedule(static) reduction(| : bad)
    for (ptrdiff_t blk = 0; blk < n_blocks; ++blk) {
        if (usbeam_interrupt_poll(&interrupt)) continue;
        const size_t first = (size_t)blk * PIXEL_BLOCK;
        const size_t count = n_pixels - first < PIXEL_BLOCK ? n_pixels - first : PIXEL_BLOCK;
        accumulate_block(iq, n_frames, n_pixels, lag, first, count, r_re + first, r_im + first, pw + first);
        int nonfinite = 0;
        for (size_t i = 0; i < count; ++i) nonfinite |= !(pw[first + i] <= DBL_MAX);
        bad |= nonfinite;
        if (power) /* mean power over the ensemble, before any spatial averaging */
            for (size_t i = 0; i < count; ++i) power[first + i] = (float)(pw[first + i] / (double)n_frames);
        if (axial) {
            /* Rz at row z pairs rows z and z+1; the last row of an image reuses the pair above */
            for (size_t i = 0; i < count; ++i) {
                size_t q = first + i, z = (q % image_size) / nx;
                size_t q0 = z + 1 < nz ? q : q - nx;
                double zr = 0.0, zi = 0.0;
                for (size_t t = 0; t < n_frames; ++t) {
                    const float *lo = iq + 2 * (t * n_pixels + q0), *hi = lo + 2 * nx;
                    zr += (double)hi[0] * lo[0] + (double)hi[1] * lo[1];
                    zi += (double)hi[1] * lo[0] - (double)hi[0] * lo[1];
                }
                az_re[q] = zr;
                az_im[q] = zi;
            }
        }
    }

    const usbeam_status interrupted = usbeam_interrupt_end(&interrupt);
    if (bad || interrupted != USBEAM_OK) {
        usbeam_fill_nan(velocity, n_pixels);
        if (variance) usbeam_fill_nan(variance, n_pixels);
        if (power) usbeam_fill_nan(power, n_pixels);
        if (interrupted != USBEAM_OK) return interrupted;
        return usbeam_fail_nonfinite("iq", "color Doppler refuses them; its outputs are filled with NaN");
    }

    if (plan->smooth) {
        int n_acc = axial ? 5 : 3;
        for (size_t img = 0; img < prm->n_images; ++img)
            smooth_images(plan->acc, n_acc, img * image_size, plan->tmp, nz, nx, plan->window_z, prm->window_z,
                          plan->window_x, prm->window_x);
    }

    const double vn = plan->nyquist;
    const double axial_scale = axial ? prm->c / (4.0 * DOPPLER_PI * prm->dz) : 0.0; /* Hz per rad */
    const double carrier_phase = axial ? prm->fc / axial_scale : 0.0;              /* rad per row */
    const ptrdiff_t count = (ptrdiff_t)n_pixels;
#pragma omp parallel for schedule(static)
    for (ptrdiff_t q = 0; q < count; ++q) {
        double v = -vn * atan2(r_im[q], r_re[q]) / DOPPLER_PI;
        if (axial) {
            double dev = atan2(az_im[q], az_re[q]) - carrier_phase;
            dev -= 2.0 * DOPPLER_PI * floor(dev / (2.0 * DOPPLER_PI) + 0.5);
            double f_mean = prm->fc + dev * axial_scale;
            /* a mean frequency <= 0 means no usable echo: keep the fc scaling */
            if (f_mean > 0.0) v *= prm->fc / f_mean;
        }
        velocity[q] = (float)v;
        if (variance) {
            double ratio = pw[q] > 0.0 ? hypot(r_re[q], r_im[q]) / pw[q] : 1.0;
            variance[q] = (float)(2.0 * (vn / DOPPLER_PI) * (vn / DOPPLER_PI) * (1.0 - ratio));
        }
    }
    return USBEAM_OK;
}

/* ---- power Doppler ------------------------------------------------------------------------ */

struct usbeam_power_plan {
    usbeam_power_params params;
    usbeam_power_cuda *cuda; /* backend CUDA: the twin */
};

usbeam_status usbeam_power_plan_create(const usbeam_power_params *params, usbeam_backend backend,
                                       usbeam_power_plan **plan)
{
    usbeam_status st;
    if (!params || !plan) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "params and plan must not be NULL");
    *plan = NULL;
    if (backend != USBEAM_BACKEND_CPU && backend != USBEAM_BACKEND_CUDA)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "backend: unknown backend %d", (int)backend);
    if (params->n_frames < 1) return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "n_frames: the ensemble is empty");
    if (params->n_pixels < 1) return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "n_pixels: the frames are empty");
    if ((st = usbeam_check_nonnegative("reference", params->reference)) != USBEAM_OK) return st;
    if ((st = usbeam_check_nonnegative("noise_floor", params->noise_floor)) != USBEAM_OK) return st;
    usbeam_power_plan *p = usbeam_alloc(sizeof *p);
    if (!p) return usbeam_fail(USBEAM_ERR_OUT_OF_MEMORY, "power plan");
    p->params = *params;
    if (backend == USBEAM_BACKEND_CUDA && (st = usbeam_power_cuda_create(params, &p->cuda)) != USBEAM_OK) {
        usbeam_free(p);
        return st;
    }
    *plan = p;
    return USBEAM_OK;
}

void usbeam_power_plan_destroy(usbeam_power_plan *plan)
{
    if (plan) usbeam_power_cuda_destroy(plan->cuda);
    usbeam_free(plan);
}

usbeam_cuda_exec *usbeam_power_plan_cuda(usbeam_power_plan *plan)
{
    return plan && plan->cuda ? usbeam_power_cuda_exec(plan->cuda) : NULL;
}

usbeam_status usbeam_power_execute(usbeam_power_plan *plan, const void *in, float *out)
{
    if (!plan || !in || !out) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "plan, in and out must not be NULL");
    if (plan->cuda) return usbeam_power_cuda_execute(plan->cuda, in, out);
    const usbeam_power_params *prm = &plan->params;
    const float *iq = in;
    const size_t n_frames = prm->n_frames, n_pixels = prm->n_pixels;
    const double floor_power = prm->noise_floor;
    const ptrdiff_t n_blocks = (ptrdiff_t)((n_pixels + PIXEL_BLOCK - 1) / PIXEL_BLOCK);
    double max_power = 0.0;
    int bad = 0;
    usbeam_interrupt interrupt;
    usbeam_interrupt_begin(&interrupt);
#pragma omp parallel for schedule(static) reduction(max : max_power) reduction(| : bad)
    for (ptrdiff_t blk = 0; blk < n_blocks; ++blk) {
        if (usbeam_interrupt_poll(&interrupt)) continue;
        const size_t first = (size_t)blk * PIXEL_BLOCK;
        const size_t count = n_pixels - first < PIXEL_BLOCK ? n_pixels - first : PIXEL_BLOCK;
        double sp[PIXEL_BLOCK] = {0};
        for (size_t t = 0; t < n_frames; ++t) {
            const float *a = iq + 2 * (t * n_pixels + first);
            for (size_t i = 0; i < count; ++i) sp[i] += (double)a[2 * i] * a[2 * i] + (double)a[2 * i + 1] * a[2 * i + 1];
        }
        int nonfinite = 0;
        for (size_t i = 0; i < count; ++i) {
            nonfinite |= !(sp[i] <= DBL_MAX);
            double pw = sp[i] / (double)n_frames;
            if (pw < floor_power) pw = floor_power;
            /* the max is taken over the stored float32 values, so the brightest pixel is exactly 0 dB */
            const float stored = (float)pw;
            if (stored > max_power) max_power = stored;
            out[first + i] = stored;
        }
        bad |= nonfinite;
    }
    const usbeam_status interrupted = usbeam_interrupt_end(&interrupt);
    if (bad || interrupted != USBEAM_OK) {
        usbeam_fill_nan(out, n_pixels);
        if (interrupted != USBEAM_OK) return interrupted;
        return usbeam_fail_nonfinite("iq", "power Doppler refuses them; out is filled with NaN");
    }
    if (prm->output_db) {
        double ref = prm->reference > 0.0 ? prm->reference : max_power;
        /* an all-zero ensemble has no scale: every pixel is -inf dB, as 10 log10(0) */
        const double ref_db = ref > 0.0 ? 10.0 * log10(ref) : 0.0;
        const ptrdiff_t count = (ptrdiff_t)n_pixels;
        /* the float32 linear power is re-read: log10 of a float is within 1e-6 dB of the double */
#pragma omp parallel for schedule(static)
        for (ptrdiff_t q = 0; q < count; ++q) out[q] = (float)(10.0 * log10((double)out[q]) - ref_db);
    }
    return USBEAM_OK;
}
