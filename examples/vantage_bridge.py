"""In-process bridge between a Verasonics Vantage sequence (MATLAB) and a usbeam session.

MATLAB calls these functions through its Python interface (see vantage_inprocess.m):

    py.vantage_bridge.start(workspace_path)            % once, after VSX set-up
    py.vantage_bridge.push(RData)                      % in the external-function callback
    img = uint8(py.vantage_bridge.latest())            % newest image (or [] if none yet)
    py.vantage_bridge.stop()

``push`` takes one RcvData frame exactly as MATLAB holds it: int16, rows x channels,
column-major (MATLAB passes it to NumPy without a transpose); the session maps channels
while copying it into a slot, so the callback returns at once.  The pipeline is the
workspace's own beamformer, ``usbeam.Pipeline.from_vantage(workspace)`` (probe, transmits,
t0 with the lens correction, the PData grid; BS sample modes converted from their
quadrature pairs), or ``make_pipeline(workspace)`` when given.
tests/live/test_live_vantage.py calls these same functions with Vantage-laid-out arrays.
"""
import numpy as np

import usbeam
from usbeam.io import load_vantage
from usbeam.live import from_vantage

_session = None


def _workspace_pipeline(workspace):
    return usbeam.Pipeline.from_vantage(workspace)


def start(workspace_path, slots=3, policy="drop_oldest", make_pipeline=None, buffer=1):
    """Open a session for the frames of RcvBuffer ``buffer`` (1-based, as the Process's
    srcbufnum); call again to restart with new settings."""
    global _session
    stop()
    workspace = load_vantage(str(workspace_path), load_data=False, buffer=int(buffer))
    _session = from_vantage(workspace, make_pipeline=make_pipeline or _workspace_pipeline, slots=int(slots),
                            policy=str(policy))
    return _session.frame_shape


def push(rcv_frame):
    """Queue one RcvData frame (rows x channels int16); returns its frame id."""
    return _session.push(np.asarray(rcv_frame))


def latest():
    """The newest image as a 2-D uint8 array nz x nx (empty when nothing is processed yet)."""
    result = _session.latest()
    return np.zeros((0, 0), np.uint8) if result is None else _image2d(result.image)


def _image2d(image):
    """(1, nz, nx) -> (nz, nx): the batch axis of one frame dropped for display."""
    image = np.asarray(image)
    return image[0] if image.ndim == 3 and image.shape[0] == 1 else image


def get(frame_id, timeout=1.0):
    return _image2d(_session.get(int(frame_id), timeout=float(timeout)).image)


def stats(wait=0.0):
    """Session counters and timings, after waiting up to ``wait`` s for pending frames."""
    if wait:
        _session.wait_idle(timeout=float(wait))
    return _session.stats()


def stop():
    global _session
    if _session is not None:
        _session.stop(drain=False)
        _session = None
