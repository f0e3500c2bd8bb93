"""B-mode reference: PyMUST bmode semantics in float64."""
import numpy as np


def bmode_db(iq, reference=None):
    """20*log10(|IQ| / reference), reference = max |IQ| over the whole array by default."""
    envelope = np.abs(np.asarray(iq, dtype=np.complex128))
    if reference is None:
        reference = envelope.max()
    with np.errstate(divide="ignore"):
        return 20.0 * np.log10(envelope / reference)


def bmode_uint8(iq, dynamic_range, reference=None):
    """255*(dB + DR)/DR clipped to [0, 255] and truncated to uint8, as PyMUST bmode."""
    level = 255.0 * (bmode_db(iq, reference) + dynamic_range) / dynamic_range
    return np.clip(level, 0, 255).astype(np.uint8)
