"""RF -> IQ reference in float64, written from the math (must not import usbeam).

x[m] = rf[m] exp(-2j pi fc (t0 + m/fs)); IQ = 2 * lowpass(x), kept every `decimation` samples.
The low-pass is scipy.signal.butter + filtfilt (defaults) or a centred FIR convolution with
zero padding (numpy.convolve 'same' semantics for any tap count); Kaiser taps come from
scipy.signal.kaiserord + firwin, the length made odd.
"""
import numpy as np
import scipy.signal


def mix(rf, fs, fc, t0):
    """Down-mixed baseband x (complex128), fast time last."""
    t = t0 + np.arange(rf.shape[-1]) / fs
    return np.asarray(rf, dtype=np.float64) * np.exp(-2j * np.pi * fc * t)


def butter_wn(fs, fc, bandwidth=None, cutoff=None):
    """Normalised Butterworth cutoff (1 = Nyquist) as MUST rf2iq; bandwidth is a fraction."""
    if bandwidth is not None:
        return bandwidth * fc / fs
    if cutoff is not None:
        return 2.0 * cutoff / fs
    return min(2.0 * fc / fs, 0.5)


def rf2iq_butter(rf, fs, fc, t0=0.0, wn=None, order=5, decimation=1):
    if wn is None:
        wn = butter_wn(fs, fc)
    b, a = scipy.signal.butter(order, wn)
    iq = 2.0 * scipy.signal.filtfilt(b, a, mix(rf, fs, fc, t0), axis=-1)
    return iq[..., ::decimation]


def kaiser_taps(fs, cutoff, transition_width, attenuation):
    numtaps, beta = scipy.signal.kaiserord(attenuation, transition_width / (fs / 2.0))
    numtaps += 1 - numtaps % 2
    return scipy.signal.firwin(numtaps, cutoff, window=("kaiser", beta), fs=fs)


def centred_fir(x, taps):
    """sum_k h[k] x[m + (K-1)//2 - k] along the last axis, x = 0 outside the line."""
    n, centre = x.shape[-1], (len(taps) - 1) // 2
    lines = x.reshape(-1, n)
    out = np.empty(lines.shape, np.complex128)
    for i, line in enumerate(lines):
        out[i] = np.convolve(line, taps)[centre:centre + n]
    return out.reshape(x.shape)


def rf2iq_fir(rf, fs, fc, taps, t0=0.0, decimation=1):
    return 2.0 * centred_fir(mix(rf, fs, fc, t0), np.asarray(taps))[..., ::decimation]


def spectral_centroid(rf, fs):
    """Carrier estimate of MUST rf2iq when fc is not given: power-spectrum-weighted mean frequency."""
    spectrum = np.abs(np.fft.rfft(np.asarray(rf, dtype=np.float64), axis=-1))
    power = np.sqrt(np.sum(spectrum.reshape(-1, spectrum.shape[-1]) ** 2, axis=0))
    freqs = np.fft.rfftfreq(rf.shape[-1], 1.0 / fs)
    return float(np.sum(freqs * power) / np.sum(power))
