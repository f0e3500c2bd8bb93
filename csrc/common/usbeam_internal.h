/*
 * usbeam_internal.h - what the C kernels (csrc/) and the CUDA kernels (cuda/)
 * share beyond the public header: error reporting, checked allocation and size
 * arithmetic.  It includes no Python or NumPy header, so nvcc can include it.
 */
#ifndef USBEAM_INTERNAL_H
#define USBEAM_INTERNAL_H

#include "usbeam.h"

#include <stddef.h>
#include <stdint.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* Threads for a parallel region of a plan created with plan_threads: at most the calling
 * thread's limit (usbeam_set_thread_limit), so a plan honours a limit set after it was made.
 * The regions use worksharing loops and per-thread scratch indexed below plan_threads, so a
 * smaller team is always correct. */
static inline int usbeam_team_size(int plan_threads)
{
#ifdef _OPENMP
    int limit = omp_get_max_threads();
    return limit < plan_threads ? limit : plan_threads;
#else
    (void)plan_threads;
    return 1;
#endif
}

/* Floats or 32-bit ints per thread in an array of per-thread parts (64-byte aligned, as
 * usbeam_alloc returns): n rounded up to whole 64-byte cache lines, so that values one thread
 * writes at every step never share a line with another thread's (the line would go back and
 * forth between the cores: with one frame, the sparse execute took 2.4x as long). */
static inline size_t usbeam_thread_words(size_t n)
{
    return (n + 15) / 16 * 16;
}

#ifdef __cplusplus
extern "C" {
#endif

/* Record a detailed, printf-formatted message for the calling thread and return status.
 * Usage: return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "fs must be > 0 (got %g)", fs); */
usbeam_status usbeam_fail(usbeam_status status, const char *format, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* 64-byte aligned, zeroed allocation; NULL on failure or when bytes overflows. */
void *usbeam_alloc(size_t bytes);
void usbeam_free(void *ptr);
/* A plan's large block (plan_memory.c): 64-byte aligned, not zeroed; from 1 MiB on 2 MiB-aligned
 * and advised for huge pages, and kept when freed for the next plan (within a bound);
 * freed with usbeam_block_free alone. */
void *usbeam_block_alloc(size_t bytes);
void usbeam_block_free(void *ptr);

/* a*b (and a*b*c) with overflow detection: returns 0 and sets *out, or -1 on overflow.  Inline
 * here so that the C library and the CUDA module share one definition. */
static inline int usbeam_mul_size(size_t a, size_t b, size_t *out)
{
    if (a != 0 && b > SIZE_MAX / a) return -1;
    *out = a * b;
    return 0;
}
static inline int usbeam_mul_size3(size_t a, size_t b, size_t c, size_t *out)
{
    size_t ab;
    if (usbeam_mul_size(a, b, &ab) != 0) return -1;
    return usbeam_mul_size(ab, c, out);
}

/* Largest buffer a plan may request, in bytes (guards against absurd sizes before the
 * allocator sees them; larger requests fail with USBEAM_ERR_SIZE_OVERFLOW). */
#define USBEAM_MAX_ALLOCATION ((size_t)1 << 40)

/* Parameter checks that set a message naming the parameter. */
usbeam_status usbeam_check_positive(const char *name, double value);      /* finite and > 0 */
usbeam_status usbeam_check_nonnegative(const char *name, double value);   /* finite and >= 0 */
usbeam_status usbeam_check_finite(const char *name, double value);

/* Non-finite input data (csrc/finite.c).  The CPU kernels refuse NaN and inf samples with
 * USBEAM_ERR_INVALID_ARGUMENT; most find them in the pass that reads each sample anyway
 * (x - x is 0 only for finite x; a double sum of float squares or of +-x is non-finite exactly
 * when one of its terms is), the others call usbeam_count_nonfinite before they run.
 * usbeam_fail_nonfinite records "<name> contains NaN or infinite values (<where>)". */
usbeam_status usbeam_fail_nonfinite(const char *name, const char *where);
/* Number of NaN or inf values among n values of dtype (FLOAT32, FLOAT64, FLOAT16 as IEEE bits;
 * COMPLEX64 counts re and im, n complex values); 0 for other dtypes.  OpenMP, vectorised. */
size_t usbeam_count_nonfinite(const void *data, usbeam_dtype dtype, size_t n);
/* A refused call that had started writing its output leaves no partial result: n floats of
 * NaN (float32 and complex64 outputs; n counts floats). */
void usbeam_fill_nan(float *out, size_t n);

/* ---- CUDA twins of the kernel families (cuda/<family>.cu) ------------------------------
 * csrc/<family>.c validates the parameters and builds its tables in double as for the CPU,
 * then, for USBEAM_BACKEND_CUDA, hands them to usbeam_<family>_cuda_create, which copies
 * them to the device; execute and destroy forward to the twin.  In a build without CUDA
 * (csrc/cuda_seam.h: usbeam._cuda not loaded) create fails with USBEAM_ERR_NO_BACKEND. */
/* scan conversion: the CPU plan's table (each output point's first neighbour and fractions),
 * read during create only. */
typedef struct usbeam_scan_convert_tables {
    const usbeam_scan_convert_params *params; /* validated; its points pointer is NULL */
    const int32_t *first;                 /* [n_points] first neighbour (row * n_theta + column), -1 outside */
    const float *fraction;                /* [n_points][2] (fr, ft) */
    float fill;                           /* the fill value in the output's type (uint8: integral) */
} usbeam_scan_convert_tables;
typedef struct usbeam_scan_convert_cuda usbeam_scan_convert_cuda;
usbeam_status usbeam_scan_convert_cuda_create(const usbeam_scan_convert_tables *tables, usbeam_scan_convert_cuda **plan);
usbeam_status usbeam_scan_convert_cuda_execute(usbeam_scan_convert_cuda *plan, const void *in, void *out);
void usbeam_scan_convert_cuda_destroy(usbeam_scan_convert_cuda *plan);
usbeam_cuda_exec *usbeam_scan_convert_cuda_exec(usbeam_scan_convert_cuda *plan);

typedef struct usbeam_bmode_cuda usbeam_bmode_cuda;
usbeam_status usbeam_bmode_cuda_create(const usbeam_bmode_params *params, usbeam_bmode_cuda **plan);
usbeam_status usbeam_bmode_cuda_execute(usbeam_bmode_cuda *plan, const void *in, void *out);
void usbeam_bmode_cuda_destroy(usbeam_bmode_cuda *plan);
usbeam_cuda_exec *usbeam_bmode_cuda_exec(usbeam_bmode_cuda *plan);

/* envelope (cuda/envelope.cu): the validated params and the Hilbert kernel envelope.c
 * computed in double, kernel[n_axis] (usbeam_hilbert_kernel), read during create only. */
typedef struct usbeam_envelope_cuda usbeam_envelope_cuda;
usbeam_status usbeam_envelope_cuda_create(const usbeam_envelope_params *params, const double *kernel,
                                          usbeam_envelope_cuda **plan);
usbeam_status usbeam_envelope_cuda_execute(usbeam_envelope_cuda *plan, const void *in, void *out);
void usbeam_envelope_cuda_destroy(usbeam_envelope_cuda *plan);
usbeam_cuda_exec *usbeam_envelope_cuda_exec(usbeam_envelope_cuda *plan);

/* doppler (cuda/doppler.cu): color Doppler gets the windows and the Nyquist velocity doppler.c
 * computed in double; the CPU plan has checked every size. */
typedef struct usbeam_color_cuda usbeam_color_cuda;
usbeam_status usbeam_color_cuda_create(const usbeam_color_params *params, const double *window_z,
                                       const double *window_x, double nyquist, usbeam_color_cuda **plan);
usbeam_status usbeam_color_cuda_execute(usbeam_color_cuda *plan, const void *in, float *velocity, float *variance,
                                        float *power);
void usbeam_color_cuda_destroy(usbeam_color_cuda *plan);
usbeam_cuda_exec *usbeam_color_cuda_exec(usbeam_color_cuda *plan);
typedef struct usbeam_power_cuda usbeam_power_cuda;
usbeam_status usbeam_power_cuda_create(const usbeam_power_params *params, usbeam_power_cuda **plan);
usbeam_status usbeam_power_cuda_execute(usbeam_power_cuda *plan, const void *in, float *out);
void usbeam_power_cuda_destroy(usbeam_power_cuda *plan);
usbeam_cuda_exec *usbeam_power_cuda_exec(usbeam_power_cuda *plan);
/* doppler display (cuda/doppler_display.cu): the CPU plan has checked every parameter and size. */
typedef struct usbeam_doppler_display_cuda usbeam_doppler_display_cuda;
usbeam_status usbeam_doppler_display_cuda_create(const usbeam_doppler_display_params *params,
                                                 usbeam_doppler_display_cuda **plan);
usbeam_status usbeam_doppler_display_cuda_execute(usbeam_doppler_display_cuda *plan, const float *velocity,
                                                  const float *power, float *out_velocity, float *out_power,
                                                  uint8_t *mask);
usbeam_status usbeam_doppler_display_cuda_reset(usbeam_doppler_display_cuda *plan);
void usbeam_doppler_display_cuda_destroy(usbeam_doppler_display_cuda *plan);
usbeam_cuda_exec *usbeam_doppler_display_cuda_exec(usbeam_doppler_display_cuda *plan);
/* clutter (cuda/clutter.cu): the projection filters only; basis double[n_basis][n_frames]. */
typedef struct usbeam_clutter_cuda usbeam_clutter_cuda;
usbeam_status usbeam_clutter_cuda_create(const usbeam_clutter_params *params, const double *basis, int n_basis,
                                         usbeam_clutter_cuda **plan);
usbeam_status usbeam_clutter_cuda_execute(usbeam_clutter_cuda *plan, const void *in, void *out);
void usbeam_clutter_cuda_destroy(usbeam_clutter_cuda *plan);
usbeam_cuda_exec *usbeam_clutter_cuda_exec(usbeam_clutter_cuda *plan);
/* IIR: sections sos_b, sos_a double[n_sections][3]; init_frames L > 0 with the projection tables
 * natural_q, state_gain double[n_state][L] (clutter_iir.c), 0 for a zero-state start. */
usbeam_status usbeam_clutter_cuda_create_iir(const usbeam_clutter_params *params, int n_sections,
                                             const int *section_order, const double *sos_b, const double *sos_a,
                                             int n_state, size_t init_frames, const double *natural_q,
                                             const double *state_gain, usbeam_clutter_cuda **plan);
usbeam_status usbeam_clutter_cuda_reset(usbeam_clutter_cuda *plan);
/* SVD (cuda/clutter_svd.cu): n_frames <= 128; info waits for the plan's stream. */
typedef struct usbeam_clutter_svd_cuda usbeam_clutter_svd_cuda;
usbeam_status usbeam_clutter_svd_cuda_create(const usbeam_clutter_params *params, usbeam_clutter_svd_cuda **plan);
usbeam_status usbeam_clutter_svd_cuda_execute(usbeam_clutter_svd_cuda *plan, const void *in, void *out);
usbeam_status usbeam_clutter_svd_cuda_info(usbeam_clutter_svd_cuda *plan, double *singular_values, int *low,
                                           int *high);
void usbeam_clutter_svd_cuda_destroy(usbeam_clutter_svd_cuda *plan);
usbeam_cuda_exec *usbeam_clutter_svd_cuda_exec(usbeam_clutter_svd_cuda *plan);

/* What rf2iq.c computed at plan time (host arrays, read during create only). */
typedef struct usbeam_rf2iq_tables {
    const double *phasor_re, *phasor_im;        /* [n_samples] exp(-2j pi fc t) */
    size_t n_out;
    /* butter */
    const double *b, *a, *step_state;           /* [order+1], [order+1], [order] */
    size_t padlen;                              /* odd-extension length at each end */
    /* FIR (kaiser / taps): reversed, modulated taps q[j] and the zeros before the line */
    const double *modulated_re, *modulated_im;  /* [n_taps] */
    size_t n_taps, lead;
} usbeam_rf2iq_tables;
typedef struct usbeam_rf2iq_cuda usbeam_rf2iq_cuda;
usbeam_status usbeam_rf2iq_cuda_create(const usbeam_rf2iq_params *params, const usbeam_rf2iq_tables *tables,
                                       usbeam_rf2iq_cuda **plan);
usbeam_status usbeam_rf2iq_cuda_execute(usbeam_rf2iq_cuda *plan, const void *in, void *out);
void usbeam_rf2iq_cuda_destroy(usbeam_rf2iq_cuda *plan);
usbeam_cuda_exec *usbeam_rf2iq_cuda_exec(usbeam_rf2iq_cuda *plan);

/* das: the CPU plan's geometry (csrc/beamform/das_setup.c), read during create only.  The
 * twin computes its delays from it on the device, so no delay table crosses the seam. */
typedef struct usbeam_das_tables {
    const usbeam_das_params *params;      /* validated; its pointers are NULL (the copies are below) */
    const double *element_x, *element_y, *element_z; /* [n_elements] */
    const double *points;                 /* [n_points][3] (x, y, z) */
    const struct usbeam_tx_model *tx;     /* [n_transmits]; SOURCES models point into tx_sources */
    const double *tx_sources;             /* virtual sources of every SOURCES transmit, concatenated */
    size_t n_source_values;               /* doubles in tx_sources (3 or 4 per source) */
    const int32_t *aperture_first, *aperture_count; /* [n_points]: each point's receive elements */
    double window_center, window_half_width; /* full-aperture (f_number = 0) window mapping, m */
    int is_iq;                            /* complex64 IQ input (else RF) */
    int general;                          /* 1: apertures and windows from element normals */
    const double *element_frame;          /* general: [9][n_elements] t1, t2, n (usbeam_math.h) */
    const double *element_window;         /* general: [n_elements] full-aperture window weights */
} usbeam_das_tables;
typedef struct usbeam_das_cuda usbeam_das_cuda;
usbeam_status usbeam_das_cuda_create(const usbeam_das_tables *tables, usbeam_das_cuda **plan);
usbeam_status usbeam_das_cuda_execute(usbeam_das_cuda *plan, const void *in, void *out);
void usbeam_das_cuda_destroy(usbeam_das_cuda *plan);
usbeam_cuda_exec *usbeam_das_cuda_exec(usbeam_das_cuda *plan);

/* adaptive: the CPU plan's entry table and apertures (csrc/beamform/adaptive.c), read during
 * create only; the twin uploads them (it needs the table: no per-call delays on the device). */
typedef struct usbeam_adaptive_tables {
    const usbeam_adaptive_params *params; /* validated; das pointers NULL */
    int kind, is_iq, taps;                /* USBEAM_ADAPTIVE_INT16/FLOAT32/COMPLEX64, IQ, interpolation taps */
    int n_offsets, centre;                /* sample offsets -centre..centre */
    int widest, widest_subarray;          /* largest aperture, largest MV subarray */
    const int32_t *aperture_first, *aperture_count; /* [n_points] */
    const size_t *entry_offset;           /* [n_points + 1] */
    size_t n_entries;
    const int32_t *table_tap;             /* [n_entries] */
    const float *table_weight;            /* [n_entries][taps or 2 taps] */
    const double *fir_re, *fir_im;        /* F-DMAS [n_offsets] (reversed), else NULL */
} usbeam_adaptive_tables;
typedef struct usbeam_adaptive_cuda usbeam_adaptive_cuda;
usbeam_status usbeam_adaptive_cuda_create(const usbeam_adaptive_tables *tables, usbeam_adaptive_cuda **plan);
usbeam_status usbeam_adaptive_cuda_execute(usbeam_adaptive_cuda *plan, size_t n_frames, const void *in, void *out);
void usbeam_adaptive_cuda_destroy(usbeam_adaptive_cuda *plan);
usbeam_cuda_exec *usbeam_adaptive_cuda_exec(usbeam_adaptive_cuda *plan);
/* das sparse: the CSR operator built by csrc/beamform/das_sparse.c, uploaded by the twin
 * (cuda/das_sparse.cu) at create; the host copy is freed afterwards. */
typedef struct usbeam_das_sparse_cuda usbeam_das_sparse_cuda;
usbeam_status usbeam_das_sparse_cuda_create(const usbeam_das_params *params, const usbeam_das_sparse_view *csr,
                                            usbeam_das_sparse_cuda **plan);
usbeam_status usbeam_das_sparse_cuda_execute(usbeam_das_sparse_cuda *plan, const void *in, void *out);
void usbeam_das_sparse_cuda_destroy(usbeam_das_sparse_cuda *plan);
usbeam_cuda_exec *usbeam_das_sparse_cuda_exec(usbeam_das_sparse_cuda *plan);

/* hadamard: the validated params, the +-1 matrix (row = transmit) and the Paley base order
 * m of FAST (n = 2^k m), read during create only. */
typedef struct usbeam_hadamard_cuda usbeam_hadamard_cuda;
usbeam_status usbeam_hadamard_cuda_create(const usbeam_hadamard_params *params, const int8_t *matrix,
                                          size_t base_order, usbeam_hadamard_cuda **plan);
usbeam_status usbeam_hadamard_cuda_execute(usbeam_hadamard_cuda *plan, const void *in, void *out);
void usbeam_hadamard_cuda_destroy(usbeam_hadamard_cuda *plan);
usbeam_cuda_exec *usbeam_hadamard_cuda_exec(usbeam_hadamard_cuda *plan);

/* rca: the CPU plan's tables (csrc/rca.c), read during create only. */
typedef struct usbeam_rca_tables {
    const usbeam_rca_params *params;      /* validated; tx_rows = the transmit orientation in use */
    const double *voxel_to_array;         /* 3 x 4 row-major: (i, j, k, 1) -> array (x, y, z) */
    const double *rx_u;                   /* [n_channels] receive strip positions */
    const double *acq_position;           /* [n_acquisitions] FORCES u_k / HERCULES v_r */
    const struct usbeam_tx_model *waves;  /* [n_waves] */
    size_t n_waves;                       /* n_acquisitions (VLS/TPW/Flash), 1 (HERCULES), 0 (FORCES) */
    const float *radial_window;           /* HERCULES: [radial_steps + 2], else NULL */
    int radial_steps;
} usbeam_rca_tables;
typedef struct usbeam_rca_cuda usbeam_rca_cuda;
usbeam_status usbeam_rca_cuda_create(const usbeam_rca_tables *tables, usbeam_rca_cuda **plan);
usbeam_status usbeam_rca_cuda_execute(usbeam_rca_cuda *plan, const void *in, void *out);
void usbeam_rca_cuda_destroy(usbeam_rca_cuda *plan);
usbeam_cuda_exec *usbeam_rca_cuda_exec(usbeam_rca_cuda *plan);

/* AI hand-off (cuda/preprocess.cu, detect.cu, segment.cu).
 * preprocess: the bilinear taps of each axis and the per-channel affine that
 * csrc/ai/preprocess.c computed (taps in double, then rounded to the float32 the blend runs
 * in), read during create only. */
typedef struct usbeam_resize_tap {
    int32_t first, second; /* source pixel indices along one axis (second = first at the edge) */
    float weight;          /* weight of second, in [0, 1] */
} usbeam_resize_tap;
typedef struct usbeam_preprocess_tables {
    const usbeam_resize_tap *rows; /* [out_height] */
    const usbeam_resize_tap *cols; /* [out_width] */
    const float *scale, *offset;   /* [3], per output channel: value = blend * scale + offset */
} usbeam_preprocess_tables;
typedef struct usbeam_preprocess_cuda usbeam_preprocess_cuda;
usbeam_status usbeam_preprocess_cuda_create(const usbeam_preprocess_params *params,
                                            const usbeam_preprocess_tables *tables, usbeam_preprocess_cuda **plan);
usbeam_status usbeam_preprocess_cuda_execute(usbeam_preprocess_cuda *plan, const void *in, void *out);
void usbeam_preprocess_cuda_destroy(usbeam_preprocess_cuda *plan);
usbeam_cuda_exec *usbeam_preprocess_cuda_exec(usbeam_preprocess_cuda *plan);
/* detect: the validated params; the twin rounds the thresholds to float32 as detect.c does. */
typedef struct usbeam_detect_cuda usbeam_detect_cuda;
usbeam_status usbeam_detect_cuda_create(const usbeam_detect_params *params, usbeam_detect_cuda **plan);
usbeam_status usbeam_detect_cuda_execute(usbeam_detect_cuda *plan, const void *raw, void *detections, void *counts);
void usbeam_detect_cuda_destroy(usbeam_detect_cuda *plan);
usbeam_cuda_exec *usbeam_detect_cuda_exec(usbeam_detect_cuda *plan);
/* components: the validated params.  One execute entry for the four mask operations, which share
 * the union-find pass; out is int32 labels (with counts) for LABEL, else a uint8 0/1 mask. */
typedef enum usbeam_components_operation {
    USBEAM_COMPONENTS_LABEL = 0,
    USBEAM_COMPONENTS_FILL_HOLES = 1,
    USBEAM_COMPONENTS_LARGEST = 2,
    USBEAM_COMPONENTS_REMOVE_SMALL = 3 /* keeps the components of >= min_area pixels */
} usbeam_components_operation;
typedef struct usbeam_components_cuda usbeam_components_cuda;
usbeam_status usbeam_components_cuda_create(const usbeam_components_params *params, usbeam_components_cuda **plan);
usbeam_status usbeam_components_cuda_execute(usbeam_components_cuda *plan, usbeam_components_operation operation,
                                             const uint8_t *mask, void *out, int32_t *counts, size_t min_area);
void usbeam_components_cuda_destroy(usbeam_components_cuda *plan);
usbeam_cuda_exec *usbeam_components_cuda_exec(usbeam_components_cuda *plan);

#ifdef __cplusplus
}
#endif
#endif /* USBEAM_INTERNAL_H */
