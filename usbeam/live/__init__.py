"""Live acquisition sessions: frames in from a scanner (in-process or through shared
memory), images out, at the scanner's rate.

- :class:`Session`: in-process ring of slots, channel mapping during the copy, compute
  thread, output ring, drop/block policies, plan swap without stopping, stats;
  ``backend='cuda'`` gives a CudaSession (cuda_session.py: pinned slots, upload and
  compute streams ordered by events, device output ring).
- :class:`ChannelMap`: the raw (rows, channels) -> (acquisitions, elements, samples) copy.
- :class:`SimulatedScanner`: frames at a set rate on a thread (simulator or dataset).
- :func:`from_vantage`: a session from a Verasonics Vantage workspace.
- :class:`ShmClient`: the ctypes client of ``usbeam serve`` (libusbeam_client.so).
"""
from .channel_map import ChannelMap
from .pipeline import CallablePipeline, as_pipeline
from .scanner import SimulatedScanner, simulate_plane_wave_rf, to_rcvdata
from .session import FrameDropped, FrameFailed, Result, Session, SessionStopped
from . import cuda_session  # noqa: F401  (registers Session(..., backend='cuda'))
from .vantage import channel_map_from_vantage, from_vantage

__all__ = ["Session", "Result", "SessionStopped", "FrameDropped", "FrameFailed", "ChannelMap",
           "CallablePipeline", "as_pipeline", "SimulatedScanner", "simulate_plane_wave_rf", "to_rcvdata",
           "from_vantage", "channel_map_from_vantage", "ShmClient"]


def __getattr__(name):
    if name == "ShmClient":  # ctypes and the shared library load on first use only
        from .shm_client import ShmClient
        return ShmClient
    raise AttributeError(name)
