"""Point-scatterer RF simulators: channel data with exact arrival times, for tests and demos.

- :mod:`usbeam.simulate.linear`: linear arrays (``simulate_rf``) and a speckle / cyst / point
  phantom (``cyst_phantom``);
- :mod:`usbeam.simulate.rca`: row-column and TOBE arrays (``simulate_rca``), Hadamard-encoded
  FORCES and HERCULES acquisitions.

Both use the same pulse (``gaussian_pulse``) and the geometry conventions of
``usbeam.geometry`` / ``usbeam.rca``.  They are geometry test benches (no directivity,
attenuation or diffraction), not physics simulators (PyMUST ``simus`` is).
"""
from .linear import cyst_phantom, gaussian_pulse, simulate_rf
from .rca import simulate_rca

__all__ = ["simulate_rf", "cyst_phantom", "gaussian_pulse", "simulate_rca"]
