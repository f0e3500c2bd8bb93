"""In-process bridge between a Verasonics Vantage sequence (MATLAB) and a usbeam session.

MATLAB calls these functions through its Python interface (see vantage_inprocess.m):

    py.vantage_bridge.start(workspace_path)            % once, after VSX set-up
    py.vantage_bridge.push(RData)                      % in the external-function callback
    img = uint8(py.vantage_bridge.latest())            % newest image (or [] if none yet)
    py.vantage_bridge.stop()

``push`` takes one RcvData frame exactly as MATLAB holds it: int16, rows x channels,
column-major (MATLAB passes it to NumPy without a transpose); the session maps channels
while copying it into a slot, so the callback returns at once.  The pipeline here is a
stand-in (compound of the acquisitions + B-mode of sample pairs); a real set-up passes
a beamforming pipeline built from the workspace (``make_pipeline(workspace)``).
tests/test_live_vantage.py calls these same functions with Vantage-laid-out arrays.
"""
import numpy as np

import usbeam
from usbeam.io import load_vantage
from usbeam.live import from_vantage

_session = None


class _CompoundBMode:
    """Stand-in pipeline: (acquisitions, elements, samples) int16 -> uint8 (elements, samples/2)."""

    def __init__(self, workspace):
        n_acq, n_el, n_s = workspace.channel_map().output_shape
        self.input_shape, self.input_dtype = (n_acq, n_el, n_s), np.dtype(np.int16)
        self.output_shape, self.output_dtype = (n_el, n_s // 2), np.dtype(np.uint8)
        self._bmode = usbeam.BModePlan(self.output_shape, 40.0, normalize=2000.0 * n_acq)

    def __call__(self, frame, out=None):
        rf = frame.sum(axis=0, dtype=np.float32)
        iq = (rf[:, 0::2][:, :self.output_shape[1]] + 1j * rf[:, 1::2][:, :self.output_shape[1]]).astype(np.complex64)
        return self._bmode(iq, out=out)


def start(workspace_path, slots=3, policy="drop_oldest", make_pipeline=None, buffer=1):
    """Open a session for the frames of RcvBuffer ``buffer`` (1-based, as the Process's
    srcbufnum); call again to restart with new settings."""
    global _session
    stop()
    workspace = load_vantage(str(workspace_path), load_data=False, buffer=int(buffer))
    _session = from_vantage(workspace, make_pipeline=make_pipeline or _CompoundBMode, slots=int(slots),
                            policy=str(policy))
    return _session.frame_shape


def push(rcv_frame):
    """Queue one RcvData frame (rows x channels int16); returns its frame id."""
    return _session.push(np.asarray(rcv_frame))


def latest():
    """The newest image as a uint8 array (empty when nothing is processed yet)."""
    result = _session.latest()
    return np.zeros((0, 0), np.uint8) if result is None else result.image


def get(frame_id, timeout=1.0):
    return _session.get(int(frame_id), timeout=float(timeout)).image


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
