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


@dataclass(frozen=True, repr=False)  # __repr__ below: the data by shape, never its values
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

    def _summary(self):
        """{field: short text}: the data by shape and dtype (never its values), SI values in
        the units people read them in."""
        data = "none" if self.data is None else f"{np.dtype(self.data.dtype).name}{tuple(np.shape(self.data))}"
        probe = self.probe
        n_el = getattr(probe, "n_elements", None)
        pitch = getattr(probe, "pitch", None)
        probe_text = type(probe).__name__ + (f"({n_el} elements" if n_el is not None else "(")
        probe_text += f", pitch {pitch * 1e3:.4g} mm)" if pitch is not None else ")"
        kinds = sorted({type(tx).__name__ for tx in self.sequence})
        rows = {"data": data + (" IQ" if self.is_iq else " RF"), "probe": probe_text,
                "sequence": f"{len(self.sequence)} x {'/'.join(kinds)}", "fs": f"{self.fs / 1e6:.6g} MHz",
                "fc": f"{self.fc / 1e6:.6g} MHz", "c": f"{self.c:g} m/s", "t0": f"{self.t0 * 1e6:.6g} us"}
        if math.isfinite(self.prf):
            rows["prf"] = f"{self.prf:g} Hz"
        if math.isfinite(self.bandwidth):
            rows["bandwidth"] = f"{self.bandwidth:g}"
        if self.modulation_frequency:
            rows["modulation_frequency"] = f"{self.modulation_frequency / 1e6:.6g} MHz"
        if self.source:
            rows["source"] = self.source
        return rows

    def __repr__(self):
        return f"{type(self).__name__}(" + ", ".join(f"{k}={v}" for k, v in self._summary().items()) + ")"

    def _repr_html_(self):
        from .._repr import html_table

        return html_table(type(self).__name__, self._summary())
