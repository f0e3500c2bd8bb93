"""The one recording object every reader returns (MUST, Vantage, UFF): channel data plus every
acquisition parameter a plan needs, in SI units, so nothing can be forgotten when a beamformer
or a pipeline is built from it (``Beamformer.from_recording`` and friends).

Layout: ``data`` is ``(n_frames, n_transmits, n_elements, n_samples)`` or, for one transmit,
``(n_frames, n_elements, n_samples)``; int16/float32 RF or complex IQ (``modulation_frequency``
> 0 says IQ demodulated at that frequency).  Time origin: t = 0 when the first element fires;
sample n is at ``t0 + n / fs`` (README, "Conventions").
"""
from dataclasses import dataclass, field
import math

import numpy as np

__all__ = ["Recording"]


@dataclass(frozen=True)
class Recording:
    data: np.ndarray = field(repr=False)  # channel data, layout above (may be None: geometry only)
    probe: object                          # a usbeam.geometry probe (element positions, normals)
    sequence: tuple                        # transmits, one per data transmit axis entry
    fs: float                              # Hz, sampling frequency of data
    fc: float                              # Hz, centre frequency of the transmitted pulse
    c: float                               # m/s
    t0: float                              # s, time of sample 0 (usbeam time origin)
    prf: float = math.nan                  # Hz, frame (slow-time) rate; nan when unknown
    bandwidth: float = math.nan            # fractional bandwidth; nan when unknown
    modulation_frequency: float = 0.0      # Hz; > 0: data is IQ demodulated at this frequency
    source: str = ""                       # where it came from (file name, format)
    meta: dict = field(default_factory=dict, repr=False)  # format-specific fields, as read

    @property
    def n_samples(self):
        return None if self.data is None else int(np.shape(self.data)[-1])

    @property
    def n_frames(self):
        return None if self.data is None else int(np.shape(self.data)[0])

    @property
    def is_iq(self):
        return self.data is not None and np.iscomplexobj(self.data)
