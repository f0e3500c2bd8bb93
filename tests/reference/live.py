"""Live-session references in float64/plain NumPy (never imports usbeam).

gather: the channel mapping of a raw Vantage-layout frame, straight from its definition
out[a, e, k] = raw[acquisition_row[a] + k, element_channel[e]].
"""
import numpy as np


def gather(raw, element_channel, acquisition_row, n_samples):
    raw = np.asarray(raw)
    out = np.empty((len(acquisition_row), len(element_channel), n_samples), raw.dtype)
    for a, row in enumerate(acquisition_row):
        for e, channel in enumerate(element_channel):
            for k in range(n_samples):
                out[a, e, k] = raw[row + k, channel]
    return out
