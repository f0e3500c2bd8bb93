/*
 * usbeam/bmode.h - stage 3a, image -> display: envelope and log compression, scan conversion.
 *
 * RF -> acquire -> demod -> beamform -> [bmode] | doppler -> ai
 */
#ifndef USBEAM_BMODE_H
#define USBEAM_BMODE_H

#include "usbeam/core.h"
#include "usbeam/device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* B-mode: envelope and log compression                                      */
/* in : complex64 beamformed IQ, n_values (any spatial/frame layout)         */
/* out: uint8, as PyMUST bmode: 255*(20 log10(|IQ|/ref) + DR)/DR clipped to */
/*      [0, 255] and truncated; or float32 dB: 20 log10(|IQ|/ref) floored at  */
/*      -DR.  ref is the max |IQ| (global or per image) or a fixed value.     */
/* ------------------------------------------------------------------------ */
typedef enum usbeam_bmode_output {
    USBEAM_BMODE_UINT8 = 0,   /* display image, PyMUST-compatible */
    USBEAM_BMODE_DB = 1       /* float32 decibels relative to the reference */
} usbeam_bmode_output;

typedef struct usbeam_bmode_params {
    size_t n_values;           /* number of complex samples per execute */
    size_t n_images;           /* n_values is n_images blocks; reference per block if per_image */
    double dynamic_range_db;   /* > 0, dB */
    usbeam_bmode_output output;
    int per_image;             /* 0: one reference (the max) over the whole array, as PyMUST;
                                  1: each of the n_images blocks is normalised by its own max */
    double reference;          /* > 0: fixed amplitude reference instead of the max (live display);
                                  0: use the max */
} usbeam_bmode_params;

typedef struct usbeam_bmode_plan usbeam_bmode_plan;
usbeam_status usbeam_bmode_plan_create(const usbeam_bmode_params *params, usbeam_backend backend,
                                       usbeam_bmode_plan **plan);
/* in: complex64[n_values]; out: uint8 or float32 [n_values] */
usbeam_status usbeam_bmode_execute(usbeam_bmode_plan *plan, const void *in, void *out);
void usbeam_bmode_plan_destroy(usbeam_bmode_plan *plan);

/* The CUDA execution state of a plan (NULL for a CPU plan): usbeam/device.h. */
struct usbeam_bmode_plan;
usbeam_cuda_exec *usbeam_bmode_plan_cuda(struct usbeam_bmode_plan *plan);

/* ------------------------------------------------------------------------ */
/* Scan conversion: a sector image sampled on a polar grid (radius r from    */
/* an apex, angle theta from +z toward +x) -> Cartesian points, bilinear in  */
/* (r, theta) (csrc/bmode/scan_convert.c, cuda/scan_convert.cu).             */
/* in : (n_images, n_r, n_theta) uint8 or float32, theta fastest;           */
/*      row i at r0 + i dr, column j at theta0 + j dtheta.                    */
/* out: (n_images, n_points) of the same dtype; point (x, z) maps to         */
/*      r = |(x, z) - apex|, theta = atan2(x - apex_x, z - apex_z); outside   */
/*      0 <= (r - r0)/dr <= n_r - 1, 0 <= (theta - theta0)/dtheta <= n_theta-1 */
/*      it is `fill`.  uint8 output rounds half up (values stay in [0, 255]). */
/* ------------------------------------------------------------------------ */
typedef struct usbeam_scan_convert_params {
    size_t n_images;          /* images per execute, >= 1 */
    size_t n_r, n_theta;      /* polar samples per image, >= 2 each */
    double r0, dr;            /* radius of row 0 (>= 0) and the row spacing (> 0), m */
    double theta0, dtheta;    /* angle of column 0 and the column spacing (> 0), rad; the sector
                                 lies within (-pi, pi) */
    double apex_x, apex_z;    /* apex of the sector, m */
    size_t n_points;          /* output points per image, >= 1 */
    const double *points;     /* (n_points, 2) as (x, z), m, in output order */
    usbeam_dtype dtype;       /* USBEAM_DTYPE_UINT8 or USBEAM_DTYPE_FLOAT32 (in and out) */
    double fill;              /* value outside the sector (uint8: an integer in [0, 255]) */
} usbeam_scan_convert_params;

typedef struct usbeam_scan_convert_plan usbeam_scan_convert_plan;
usbeam_status usbeam_scan_convert_plan_create(const usbeam_scan_convert_params *params, usbeam_backend backend,
                                              usbeam_scan_convert_plan **plan);
/* in: (n_images, n_r, n_theta); out: (n_images, n_points); NaN or inf in float input: refused */
usbeam_status usbeam_scan_convert_execute(usbeam_scan_convert_plan *plan, const void *in, void *out);
void usbeam_scan_convert_plan_destroy(usbeam_scan_convert_plan *plan);
struct usbeam_scan_convert_plan;
usbeam_cuda_exec *usbeam_scan_convert_plan_cuda(struct usbeam_scan_convert_plan *plan);
/* Envelope: the analytic signal of real RF lines (csrc/bmode/envelope.c)    */
/* in : float32 [n_outer][n_axis][n_inner], the lines run along the middle   */
/*      axis (depth of an RF image (..., nz, nx): n_axis = nz, n_inner = nx) */
/* out: float32 envelope |x + j H x|, or complex64 analytic signal x + j H x,*/
/*      same layout.  H is scipy.signal.hilbert's discrete Hilbert transform */
/*      of the whole line (one DFT period: exact, no FIR edge transient).    */
/* ------------------------------------------------------------------------ */
typedef enum usbeam_envelope_output {
    USBEAM_ENVELOPE_MAGNITUDE = 0, /* float32 |x + j H x| */
    USBEAM_ENVELOPE_ANALYTIC = 1   /* complex64 x + j H x */
} usbeam_envelope_output;

typedef struct usbeam_envelope_params {
    size_t n_outer;                 /* lines' leading count (frames, ...), >= 1 */
    size_t n_axis;                  /* samples per line (the transformed axis), >= 1 */
    size_t n_inner;                 /* stride of the axis in elements (trailing count), >= 1 */
    usbeam_envelope_output output;
} usbeam_envelope_params;

typedef struct usbeam_envelope_plan usbeam_envelope_plan;
usbeam_status usbeam_envelope_plan_create(const usbeam_envelope_params *params, usbeam_backend backend,
                                          usbeam_envelope_plan **plan);
/* in: float32[n_outer * n_axis * n_inner]; out: float32 or complex64, same count */
usbeam_status usbeam_envelope_execute(usbeam_envelope_plan *plan, const void *in, void *out);
void usbeam_envelope_plan_destroy(usbeam_envelope_plan *plan);
struct usbeam_envelope_plan;
usbeam_cuda_exec *usbeam_envelope_plan_cuda(struct usbeam_envelope_plan *plan);

#ifdef __cplusplus
}
#endif
#endif /* USBEAM_BMODE_H */
