"""Point-scatterer RF simulators: channel data with exact arrival times, for tests and demos.

- :mod:`usbeam.simulate.linear`: any probe geometry from its element positions and normals
  (``simulate_rf``: linear, phased, convex, matrix arrays, ``ElementArray``) and a speckle /
  cyst / point phantom (``cyst_phantom``);
- :mod:`usbeam.simulate.rca`: row-column and TOBE arrays (``simulate_rca``), Hadamard-encoded
  FORCES and HERCULES acquisitions;
- :mod:`usbeam.simulate.pulse`: the one pulse model both use (``gaussian_pulse``, a
  Gaussian-windowed sinusoid of fractional -6 dB bandwidth), sampled at exact arrival times by
  the one routine both call (``echo_traces``: every channel of a transmit at once).

Geometry conventions: ``usbeam.geometry`` (linear arrays) and ``usbeam.rca`` (row-column).
Positions in m, times in s, frequencies in Hz; RF is float32 ``(n_transmits, n_elements,
n_samples)`` (RCA: ``(n_acquisitions, n_channels, n_samples)``), with a leading frame axis
when asked.  These are geometry test benches (no directivity, attenuation or diffraction),
not physics simulators (PyMUST ``simus`` is).
"""
from .pulse import gaussian_pulse, pulse_sigma
from .linear import cyst_phantom, simulate_rf
from .rca import simulate_rca

__all__ = ["simulate_rf", "cyst_phantom", "simulate_rca", "gaussian_pulse", "pulse_sigma"]
