/*
 * usbeam/demod.h - stage 1, RF -> IQ: down-mixing, low-pass filtering and decimation.
 *
 * RF -> acquire -> [demod] -> beamform -> bmode | doppler -> ai
 */
#ifndef USBEAM_DEMOD_H
#define USBEAM_DEMOD_H

#include "usbeam/core.h"
#include "usbeam/device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* RF -> IQ demodulation (csrc/rf2iq.c, filter design in csrc/filter_design.c).
 * in : RF, (n_lines, n_samples) C-order, samples last; int16, float32 or float64.
 * out: complex64 IQ, (n_lines, n_out), n_out = ceil(n_samples / decimation).
 * IQ[n] = 2 * lowpass(RF[m] * exp(-2j*pi*fc*(t0 + m/fs)))[n*decimation]
 * (the factor 2 preserves the envelope).  No assumption fs > 2*fc: undersampled band-pass
 * RF demodulates as long as fc is given. */
typedef enum usbeam_rf2iq_filter {
    USBEAM_RF2IQ_BUTTER = 0,  /* Butterworth, zero-phase filtfilt as scipy.signal.filtfilt (MUST rf2iq) */
    USBEAM_RF2IQ_KAISER = 1,  /* linear-phase FIR, Kaiser window designed from cutoff / width / attenuation */
    USBEAM_RF2IQ_TAPS = 2     /* user FIR taps (real or complex), applied centred */
} usbeam_rf2iq_filter;

typedef struct usbeam_rf2iq_params {
    size_t n_lines;            /* number of RF lines (product of the leading axes), >= 1 */
    size_t n_samples;          /* samples per line, >= 1 (butter: > 3*(order+1), as filtfilt) */
    usbeam_dtype input_dtype;  /* USBEAM_DTYPE_INT16, _FLOAT32 or _FLOAT64 */
    double fs;                 /* sampling frequency of the RF, Hz, > 0 */
    double fc;                 /* demodulation (carrier) frequency, Hz, > 0 */
    double t0;                 /* time of the first sample, s, finite */
    usbeam_rf2iq_filter filter;
    /* butter */
    int order;                 /* filter order, 1..USBEAM_RF2IQ_MAX_ORDER (the (b, a) recursion is
                                  ill-conditioned for high orders at low wn, as in scipy) */
    double wn;                 /* normalised cutoff in (0, 1), 1 = fs/2 (scipy.signal.butter's Wn) */
    /* kaiser */
    double cutoff;             /* cutoff frequency of the baseband low-pass, Hz, in (0, fs/2) */
    double transition_width;   /* width of the transition band, Hz, > 0 */
    double attenuation;        /* stop-band attenuation, dB, >= 8 (Kaiser's formulas) */
    /* taps: copied at plan creation */
    const double *taps_re;     /* n_taps real parts */
    const double *taps_im;     /* n_taps imaginary parts, or NULL for real taps */
    size_t n_taps;             /* >= 1 */
    size_t decimation;         /* keep every decimation-th filtered sample, >= 1 */
} usbeam_rf2iq_params;

#define USBEAM_RF2IQ_MAX_ORDER 16
#define USBEAM_RF2IQ_MAX_TAPS ((size_t)1 << 20)

typedef struct usbeam_rf2iq_plan usbeam_rf2iq_plan;
usbeam_status usbeam_rf2iq_plan_create(const usbeam_rf2iq_params *params, usbeam_backend backend,
                                       usbeam_rf2iq_plan **plan);
/* in: RF[n_lines][n_samples] of input_dtype; out: complex64 [n_lines][n_out] */
usbeam_status usbeam_rf2iq_execute(usbeam_rf2iq_plan *plan, const void *in, void *out);
void usbeam_rf2iq_plan_destroy(usbeam_rf2iq_plan *plan);
/* Output samples per line: ceil(n_samples / decimation). */
size_t usbeam_rf2iq_n_out(const usbeam_rf2iq_plan *plan);
/* The plan's FIR taps (kaiser or user, NULL im for real taps); *n_taps = 0 for butter. */
void usbeam_rf2iq_plan_taps(const usbeam_rf2iq_plan *plan, const double **taps_re,
                            const double **taps_im, size_t *n_taps);

/* Digital Butterworth low-pass, equal to scipy.signal.butter(order, wn): b and a hold
 * order+1 coefficients each, a[0] = 1. */
usbeam_status usbeam_butter_lowpass(int order, double wn, double *b, double *a);
/* Kaiser-window FIR low-pass (scipy.signal.kaiserord + firwin, length made odd, unit DC
 * gain).  Call with taps NULL to get *n_taps; then with capacity >= *n_taps. */
usbeam_status usbeam_kaiser_lowpass(double fs, double cutoff, double transition_width,
                                    double attenuation, double *taps, size_t capacity,
                                    size_t *n_taps);

/* The CUDA execution state of a plan (NULL for a CPU plan): usbeam/device.h. */
struct usbeam_rf2iq_plan;
usbeam_cuda_exec *usbeam_rf2iq_plan_cuda(struct usbeam_rf2iq_plan *plan);

#ifdef __cplusplus
}
#endif
#endif /* USBEAM_DEMOD_H */
