/*
 * usbeam/doppler.h - stage 3b, ensembles -> flow: clutter filters, color and power Doppler, the Doppler display.
 *
 * RF -> acquire -> demod -> beamform -> bmode | [doppler] -> ai
 */
#ifndef USBEAM_DOPPLER_H
#define USBEAM_DOPPLER_H

#include "usbeam/core.h"
#include "usbeam/device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Ensembles of beamformed IQ frames: complex64 [n_frames][n_pixels], slow time on the
 * leading axis (n_pixels = the product of the spatial axes, e.g. nz*nx).  Velocities in m/s,
 * frequencies as fractions of the PRF unless named *_hz.  Algorithms: csrc/clutter.c (with
 * clutter_svd.c and clutter_iir.c), csrc/doppler.c, csrc/doppler_display.c. */

/* -- clutter (wall) filter along slow time -- */
typedef enum usbeam_clutter_method {
    USBEAM_CLUTTER_MEAN = 0,  /* subtract the slow-time mean (= POLY of order 0) */
    USBEAM_CLUTTER_POLY = 1,  /* project out Legendre polynomials of degree 0..poly_order */
    USBEAM_CLUTTER_SVD = 2,   /* keep singular components [svd_low, svd_high] of the Casorati matrix */
    USBEAM_CLUTTER_IIR = 3    /* Butterworth high-pass, state carried across executes */
} usbeam_clutter_method;

typedef enum usbeam_iir_init {
    USBEAM_IIR_INIT_ZERO = 0,       /* filter starts at rest (a transient follows) */
    USBEAM_IIR_INIT_PROJECTION = 1  /* initial state chosen to minimise output energy over the
                                       first iir_init_frames frames (Chornoboy 1990) */
} usbeam_iir_init;

/* How the CUDA backend applies the 'mean' / 'poly' projection y = x - Q Q^T x. */
typedef enum usbeam_clutter_algorithm {
    USBEAM_CLUTTER_KERNEL = 0, /* fused kernel: one pass, double accumulation in the CPU's order */
    USBEAM_CLUTTER_GEMM = 1    /* CUDA backend only: two cuBLAS SGEMMs (full FP32, never TF32)
                                  through a plan-owned scratch (cuda/clutter.cu) */
} usbeam_clutter_algorithm;

typedef struct usbeam_clutter_params {
    size_t n_frames;              /* slow-time samples per execute (>= 2) */
    size_t n_pixels;              /* spatial samples per frame (>= 1) */
    usbeam_clutter_method method;
    int poly_order;               /* POLY: >= 0; n_frames >= poly_order + 2 */
    int svd_low;                  /* SVD: first kept component (0 = largest singular value);
                                     -1 = automatic (mean Doppler frequency criterion) */
    int svd_high;                 /* SVD: last kept component, <= n_frames-1; -1 = n_frames-1 */
    double svd_auto_frequency;    /* SVD automatic low cut-off: components are tissue while the mean
                                     Doppler frequency of their temporal singular vector is below
                                     this, as a fraction of the PRF, in (0, 0.5) */
    int iir_order;                /* IIR: Butterworth order, 1..10 */
    double iir_cutoff;            /* IIR: -3 dB cut-off as a fraction of the PRF, in (0, 0.5) */
    usbeam_iir_init iir_init;
    size_t iir_init_frames;       /* IIR projection window after a reset: 0 = n_frames; otherwise
                                     iir_order < iir_init_frames <= n_frames */
    usbeam_clutter_algorithm algorithm; /* MEAN / POLY: KERNEL (0) or GEMM (CUDA only) */
} usbeam_clutter_params;

typedef struct usbeam_clutter_plan usbeam_clutter_plan;
usbeam_status usbeam_clutter_plan_create(const usbeam_clutter_params *params, usbeam_backend backend,
                                         usbeam_clutter_plan **plan);
/* in, out: complex64[n_frames][n_pixels]; out may be in (in-place). */
usbeam_status usbeam_clutter_execute(usbeam_clutter_plan *plan, const void *in, void *out);
/* IIR: forget the filter state, so that the next execute starts a new record. */
usbeam_status usbeam_clutter_reset(usbeam_clutter_plan *plan);
/* SVD: singular values of the last execute (double[n_frames], descending) and the cut-offs
 * used (low may be n_frames when every component was judged tissue). */
usbeam_status usbeam_clutter_svd_info(const usbeam_clutter_plan *plan, double *singular_values,
                                      int *low, int *high);
void usbeam_clutter_plan_destroy(usbeam_clutter_plan *plan);

/* -- color Doppler (Kasai lag-k autocorrelation) -- */
typedef enum usbeam_doppler_window {
    USBEAM_WINDOW_BOXCAR = 0,
    USBEAM_WINDOW_HAMMING = 1   /* symmetric Hamming, as PyMUST iq2doppler */
} usbeam_doppler_window;

typedef struct usbeam_color_params {
    size_t n_frames;           /* ensemble length, > lag */
    size_t n_images;           /* independent images per frame (n_pixels = n_images*nz*nx) */
    size_t nz, nx;             /* image rows (depth) and columns */
    double fc;                 /* Hz, > 0: demodulation (centre) frequency */
    double prf;                /* Hz, > 0 */
    double c;                  /* m/s, > 0 */
    int lag;                   /* >= 1 */
    int window_z, window_x;    /* spatial averaging of R(lag) and R(0): window_z x window_x pixels
                                  (1 x 1 = none), edges mirrored as scipy boundary='symmetric' */
    usbeam_doppler_window window;
    int axial_correction;      /* 1: Loupas 2-D autocorrelator: velocity scaled by fc / f_mean,
                                  f_mean estimated from the axial lag-1 autocorrelation */
    double dz;                 /* m, > 0 when axial_correction: axial pixel spacing */
} usbeam_color_params;

typedef struct usbeam_color_plan usbeam_color_plan;
usbeam_status usbeam_color_plan_create(const usbeam_color_params *params, usbeam_backend backend,
                                       usbeam_color_plan **plan);
/* in: complex64[n_frames][n_images][nz][nx]; velocity, variance: float32[n_images][nz][nx];
 * variance or power (mean |IQ|^2 over the ensemble) may be NULL. */
usbeam_status usbeam_color_execute(usbeam_color_plan *plan, const void *in, float *velocity,
                                   float *variance, float *power);
void usbeam_color_plan_destroy(usbeam_color_plan *plan);

/* -- power Doppler: P = mean over the ensemble of |IQ|^2 (= R(0)/n_frames) -- */
typedef struct usbeam_power_params {
    size_t n_frames, n_pixels;
    int output_db;             /* 0: linear P; 1: 10 log10(P / reference) */
    double reference;          /* dB: > 0 fixed power reference; 0 = max P of the execute */
    double noise_floor;        /* >= 0, linear power: P below it is set to it (0 = no floor) */
} usbeam_power_params;

typedef struct usbeam_power_plan usbeam_power_plan;
usbeam_status usbeam_power_plan_create(const usbeam_power_params *params, usbeam_backend backend,
                                       usbeam_power_plan **plan);
/* in: complex64[n_frames][n_pixels]; out: float32[n_pixels] */
usbeam_status usbeam_power_execute(usbeam_power_plan *plan, const void *in, float *out);
void usbeam_power_plan_destroy(usbeam_power_plan *plan);
/* The CUDA execution state of a color / power Doppler plan; NULL for a CPU plan.  A CUDA plan's
 * execute takes device pointers, queues its kernels and returns without waiting. */
usbeam_cuda_exec *usbeam_color_plan_cuda(usbeam_color_plan *plan);
usbeam_cuda_exec *usbeam_power_plan_cuda(usbeam_power_plan *plan);
/* The clutter filter's CUDA state ('mean' and 'poly' only on CUDA); NULL for a CPU plan. */
usbeam_cuda_exec *usbeam_clutter_plan_cuda(usbeam_clutter_plan *plan);

/* -- display post-processing of successive Doppler outputs -- */
typedef struct usbeam_doppler_display_params {
    size_t n_images, nz, nx;   /* each execute takes n_images successive images of nz x nx */
    int median;                /* 1: 3x3 median of velocity and power (edges replicated) */
    double persistence;        /* in [0, 1): out = p * previous + (1 - p) * current */
    double power_threshold;    /* finite: pixels with power below it are masked */
    double velocity_threshold; /* >= 0, m/s: pixels with |v| below it are masked */
} usbeam_doppler_display_params;

typedef struct usbeam_doppler_display_plan usbeam_doppler_display_plan;
usbeam_status usbeam_doppler_display_plan_create(const usbeam_doppler_display_params *params,
                                                 usbeam_backend backend,
                                                 usbeam_doppler_display_plan **plan);
/* velocity, power: float32[n_images][nz][nx] (either may be NULL, not both; a NULL input skips
 * its test and its output); out_velocity / out_power: same shape (masked velocity is 0,
 * masked power keeps its value); mask: uint8, 1 = shown (may be NULL). */
usbeam_status usbeam_doppler_display_execute(usbeam_doppler_display_plan *plan, const float *velocity,
                                             const float *power, float *out_velocity,
                                             float *out_power, uint8_t *mask);
/* Forget the persistence history. */
usbeam_status usbeam_doppler_display_reset(usbeam_doppler_display_plan *plan);
void usbeam_doppler_display_plan_destroy(usbeam_doppler_display_plan *plan);
/* The CUDA execution state of a display plan; NULL for a CPU plan.  A CUDA plan's execute takes
 * device pointers, queues one kernel and returns without waiting; its kernel flags non-finite
 * input (usbeam_cuda_exec_take_input_faults) where the CPU's caller refuses it. */
usbeam_cuda_exec *usbeam_doppler_display_plan_cuda(usbeam_doppler_display_plan *plan);

#ifdef __cplusplus
}
#endif
#endif /* USBEAM_DOPPLER_H */
