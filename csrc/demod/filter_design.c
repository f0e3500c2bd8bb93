/*
 * filter_design.c - low-pass filter design for RF -> IQ demodulation (rf2iq.c), in double.
 *
 * usbeam_butter_lowpass(order, wn, b[order+1], a[order+1])
 *   Digital Butterworth low-pass in transfer-function form, equal (to rounding) to
 *   scipy.signal.butter(order, wn).  Frequencies are normalised to the Nyquist frequency
 *   (wn = 1 is fs/2).  Steps: analog prototype poles p_k = -exp(j*pi*m/(2N)),
 *   m = -N+1, -N+3, ..., N-1 (unit cutoff); pre-warping of the cutoff for a sampling rate of
 *   2 (warped = 4 tan(pi*wn/2)); scaling of poles and gain; bilinear transform
 *   z = (4 + s)/(4 - s), which maps the N zeros at infinity to z = -1; expansion of the
 *   zeros and poles into polynomials.  Reference: A. V. Oppenheim, R. W. Schafer,
 *   Discrete-Time Signal Processing, 3rd ed., sec. 7.2 (bilinear transformation of an
 *   analog Butterworth filter).
 *
 * usbeam_kaiser_lowpass(fs, cutoff, transition_width, attenuation, taps, capacity, n_taps)
 *   Windowed-sinc FIR low-pass with a Kaiser window.  Length and shape parameter from
 *   Kaiser's empirical formulas (J. F. Kaiser, "Nonrecursive digital filter design using
 *   the I0-sinh window function", ISCAS 1974; Oppenheim & Schafer sec. 7.5.3):
 *     beta = 0.1102 (A - 8.7)                       A > 50
 *          = 0.5842 (A - 21)^0.4 + 0.07886 (A - 21) 21 < A <= 50
 *          = 0                                      A <= 21
 *     numtaps = ceil((A - 7.95) / (2.285 * pi * width / (fs/2)) + 1), made odd,
 *   as scipy.signal.kaiserord documents.  Taps h[k] = 2 (fcut/fs) sinc(2 (fcut/fs) m) w[k],
 *   m = k - (numtaps-1)/2, scaled to unit gain at DC (scipy.signal.firwin's scale=True).
 *   Units: Hz and dB.
 */
#include "common/usbeam_internal.h"

#include <complex.h>
#include <math.h>

/* pi to double precision (M_PI is not in strict C11) */
#define PI_DOUBLE 3.14159265358979323846

usbeam_status usbeam_butter_lowpass(int order, double wn, double *b, double *a)
{
    if (!b || !a) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "b and a must not be NULL");
    if (order < 1 || order > USBEAM_RF2IQ_MAX_ORDER)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "order must be in 1..%d (got %d)",
                           USBEAM_RF2IQ_MAX_ORDER, order);
    if (!(wn > 0.0 && wn < 1.0))
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT,
                           "Wn (normalised cutoff, 1 = Nyquist) must be in (0, 1) (got %g)", wn);

    const double bilinear_k = 4.0; /* 2 * fs with the normalised sampling rate fs = 2 */
    const double warped = bilinear_k * tan(PI_DOUBLE * wn / 2.0);
    double complex poly[USBEAM_RF2IQ_MAX_ORDER + 1];
    double complex denominator_gain = 1.0;
    poly[0] = 1.0;
    for (int i = 0; i < order; ++i) {
        int m = -order + 1 + 2 * i;
        double complex analog_pole = -warped * cexp(I * PI_DOUBLE * m / (2.0 * order));
        double complex digital_pole = (bilinear_k + analog_pole) / (bilinear_k - analog_pole);
        denominator_gain *= bilinear_k - analog_pole;
        /* multiply the polynomial by (z - digital_pole), coefficients highest power first */
        poly[i + 1] = -digital_pole * poly[i];
        for (int k = i; k >= 1; --k) poly[k] = poly[k] - digital_pole * poly[k - 1];
    }
    /* The poles come in conjugate pairs (plus -1 for odd order): the polynomials are real. */
    double gain = pow(warped, order) * creal(1.0 / denominator_gain);
    double binomial = 1.0;
    for (int k = 0; k <= order; ++k) {
        a[k] = creal(poly[k]);
        b[k] = gain * binomial; /* (z + 1)^order */
        binomial = binomial * (order - k) / (k + 1);
    }
    return USBEAM_OK;
}

/* Modified Bessel function of the first kind, order 0, by its power series (converges for
 * every x; beta stays below ~40 for any attenuation a float32 result can show). */
static double bessel_i0(double x)
{
    double term = 1.0, sum = 1.0, half = x / 2.0;
    for (int k = 1; k < 500; ++k) {
        term *= (half / k) * (half / k);
        sum += term;
        if (term < 1e-17 * sum) break;
    }
    return sum;
}

static double kaiser_beta(double attenuation)
{
    if (attenuation > 50.0) return 0.1102 * (attenuation - 8.7);
    if (attenuation > 21.0) return 0.5842 * pow(attenuation - 21.0, 0.4) + 0.07886 * (attenuation - 21.0);
    return 0.0;
}

usbeam_status usbeam_kaiser_lowpass(double fs, double cutoff, double transition_width,
                                    double attenuation, double *taps, size_t capacity,
                                    size_t *n_taps)
{
    usbeam_status st;
    if (!n_taps) return usbeam_fail(USBEAM_ERR_NULL_POINTER, "n_taps must not be NULL");
    *n_taps = 0;
    if ((st = usbeam_check_positive("fs", fs)) != USBEAM_OK) return st;
    if ((st = usbeam_check_positive("cutoff", cutoff)) != USBEAM_OK) return st;
    if ((st = usbeam_check_positive("transition_width", transition_width)) != USBEAM_OK) return st;
    if ((st = usbeam_check_finite("attenuation", attenuation)) != USBEAM_OK) return st;
    if (!(cutoff < fs / 2.0))
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "cutoff (%g Hz) must be below fs/2 (%g Hz)",
                           cutoff, fs / 2.0);
    if (!(attenuation >= 8.0))
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT,
                           "attenuation must be >= 8 dB for Kaiser's formulas (got %g)", attenuation);

    double width = transition_width / (fs / 2.0);
    double length = (attenuation - 7.95) / (2.285 * PI_DOUBLE * width) + 1.0;
    if (!(length <= (double)USBEAM_RF2IQ_MAX_TAPS))
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT,
                           "transition_width (%g Hz) is too narrow: the filter would need %.3g taps "
                           "(at most %zu)", transition_width, length, USBEAM_RF2IQ_MAX_TAPS);
    size_t count = (size_t)ceil(length);
    if (count % 2 == 0) ++count; /* odd: the centre tap sits on a sample, no half-sample delay */
    *n_taps = count;
    if (!taps) return USBEAM_OK;
    if (capacity < count)
        return usbeam_fail(USBEAM_ERR_INVALID_ARGUMENT, "taps: capacity %zu < %zu taps", capacity, count);

    const double beta = kaiser_beta(attenuation);
    const double i0_beta = bessel_i0(beta);
    const double band = 2.0 * cutoff / fs; /* cutoff relative to Nyquist */
    const double centre = (double)(count - 1) / 2.0;
    double sum = 0.0;
    for (size_t k = 0; k < count; ++k) {
        double m = (double)k - centre;
        double x = band * m;
        double sinc = x == 0.0 ? 1.0 : sin(PI_DOUBLE * x) / (PI_DOUBLE * x);
        double r = count > 1 ? m / centre : 0.0;
        double window = bessel_i0(beta * sqrt(fmax(0.0, 1.0 - r * r))) / i0_beta;
        taps[k] = band * sinc * window;
        sum += taps[k];
    }
    for (size_t k = 0; k < count; ++k) taps[k] /= sum;
    return USBEAM_OK;
}
