"""Readers of recorded channel data: the first stage of the flow (acquire) from files.

- :mod:`usbeam.io.recording`: ``Recording``, the object every reader returns (data plus every
  acquisition parameter, SI units).
- :mod:`usbeam.io.must`: MUST / PyMUST ``.mat`` recordings (``load_must`` -> ``MustRecording``,
  ``plane_wave_angle``), SI units, data ``(n_frames, n_elements, n_samples)``.
- :mod:`usbeam.io.uff`: UFF (USTB, HDF5) channel data -> ``Recording`` (``load_uff``), beamformed
  images -> ``uff.beamformed_data`` (``save_uff``); needs h5py (extra ``uff``).
- :mod:`usbeam.io.vantage`: saved Verasonics Vantage workspaces (``load_vantage`` ->
  ``VantageWorkspace``), the structures of the Vantage Sequence Programming Manual mapped to SI
  units, RcvData as ``(n_frames, n_rows, n_channels)`` column-major frames.

Each module's docstring states its conventions and references.  The checksummed example
recordings are located by :mod:`usbeam.datasets`.
"""
from .recording import Recording
from .must import MustRecording, load_must, plane_wave_angle
from .uff import load_uff, save_uff
from .vantage import VantageAcquisition, VantageProbe, VantageTransmit, VantageWorkspace, load_vantage
from .vantage_recording import to_recording as vantage_to_recording

__all__ = ["Recording", "MustRecording", "load_must", "plane_wave_angle",
           "load_uff", "save_uff",
           "VantageAcquisition", "VantageProbe", "VantageTransmit", "VantageWorkspace", "load_vantage",
           "vantage_to_recording"]
