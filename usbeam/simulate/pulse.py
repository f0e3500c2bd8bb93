"""The one pulse model of usbeam's simulators, sampled at exact arrival times.

The transmit-receive pulse is a Gaussian-windowed sinusoid,

    pulse(t) = exp(-t^2 / (2 sigma^2)) * cos(2 pi fc t),
    sigma = sqrt(2 ln 2) / (pi * bandwidth * fc),

whose -6 dB spectral width is ``bandwidth * fc`` (``bandwidth`` is fractional, MUST's
percent / 100).  Times in s, frequencies in Hz.

A channel is the sum of the echoes of its scatterers, each the pulse delayed by its arrival
time tau and scaled by its amplitude, sampled at t0 + n / fs.  The pulse is evaluated
analytically at each sample time, so any delay (not only whole samples) is exact; samples
further than 8.5 sigma from a pulse centre (envelope < 1e-15) are not evaluated.  The
geometry (what tau is) belongs to each simulator: linear.py, rca.py.
"""
import math

import numpy as np

SUPPORT_SIGMAS = 8.5  # exp(-8.5^2 / 2) < 1e-15: the pulse is zero to double precision beyond


def pulse_sigma(fc, bandwidth):
    """Standard deviation (s) of the Gaussian envelope with -6 dB bandwidth ``bandwidth*fc``."""
    return math.sqrt(2.0 * math.log(2.0)) / (math.pi * bandwidth * fc)


def gaussian_pulse(t, fc, bandwidth):
    """The transmit-receive pulse at times ``t`` (s): Gaussian envelope times cos(2 pi fc t)."""
    sigma = pulse_sigma(fc, bandwidth)
    t = np.asarray(t, dtype=np.float64)
    return np.exp(-0.5 * (t / sigma) ** 2) * np.cos(2.0 * math.pi * fc * t)


def echo_trace(tau, amplitudes, *, fs, fc, bandwidth, t0, n_samples):
    """One channel, float64 ``(n_samples,)``: sum over scatterers s of
    ``amplitudes[s] * pulse(t0 + n / fs - tau[s])``, ``tau`` (s) and ``amplitudes`` of shape
    ``(n_scatterers,)``."""
    half_window = SUPPORT_SIGMAS * pulse_sigma(fc, bandwidth)
    taps = np.arange(int(math.ceil(2 * half_window * fs)) + 2)
    # each echo touches the samples of its pulse's support only: first sample at or after
    # tau - half_window, then as many as the window holds
    first = np.ceil((tau - half_window - t0) * fs).astype(np.int64)
    index = first[:, None] + taps[None, :]
    keep = (index >= 0) & (index < n_samples)
    values = amplitudes[:, None] * gaussian_pulse(t0 + index / fs - tau[:, None], fc, bandwidth)
    return np.bincount(index[keep], weights=values[keep], minlength=n_samples)


def echo_traces(tau, amplitudes, *, fs, fc, bandwidth, t0, n_samples):
    """Many channels, float64 ``(n_channels, n_samples)``: channel k is ``echo_trace`` of
    ``tau[k]`` (s, ``(n_channels, n_scatterers)``) with ``amplitudes[k]`` (or one
    ``(n_scatterers,)`` for every channel).  One histogram per channel: measured faster than
    one over a block of channels, whose intermediate arrays outgrow the caches."""
    tau = np.asarray(tau, dtype=np.float64)
    amplitudes = np.broadcast_to(np.asarray(amplitudes, dtype=np.float64), tau.shape)
    out = np.empty((tau.shape[0], n_samples))
    for k in range(tau.shape[0]):
        out[k] = echo_trace(tau[k], amplitudes[k], fs=fs, fc=fc, bandwidth=bandwidth, t0=t0, n_samples=n_samples)
    return out


def check_echoes_recorded(rf, amplitudes, t0, n_samples, fs):
    """ValueError naming positions when scatterers of non-zero amplitude left no echo in the
    record (all-zero RF: a silent wrong answer otherwise)."""
    if np.any(amplitudes) and not np.any(rf):
        raise ValueError(f"positions: no scatterer's echo falls within the record (t0 = {t0:g} s to t0 + "
                         f"n_samples / fs = {t0 + n_samples / fs:.4g} s); the RF would be all zero.  Likely causes: "
                         f"scatterers deeper than n_samples reach, or a wrong t0")
