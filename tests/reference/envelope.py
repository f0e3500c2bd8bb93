"""float64 reference of the envelope (usbeam.envelope, csrc/bmode/envelope.c), from the math:
the discrete analytic signal of each whole line (Marple, IEEE TSP 47(9) 1999), the definition
scipy.signal.hilbert implements: X = DFT(x); keep DC (and n/2 for even n), double the positive
bins, zero the negative ones; z = IDFT.  The envelope is |z|.  Never imports usbeam."""
import numpy as np


def analytic_signal(x, axis=-2):
    x = np.asarray(x, dtype=np.float64)
    n = x.shape[axis]
    spectrum = np.fft.fft(x, axis=axis)
    gain = np.zeros(n)
    gain[0] = 1.0
    if n % 2 == 0:
        gain[n // 2] = 1.0
        gain[1:n // 2] = 2.0
    else:
        gain[1:(n + 1) // 2] = 2.0
    shape = [1] * x.ndim
    shape[axis] = n
    return np.fft.ifft(spectrum * gain.reshape(shape), axis=axis)


def envelope(x, axis=-2):
    return np.abs(analytic_signal(x, axis))
