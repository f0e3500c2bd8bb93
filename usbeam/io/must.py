"""Reading MUST / PyMUST ``.mat`` recordings (RF or IQ channel data plus ``param``).

``load_must(path)`` returns a ``MustRecording`` (probe: ``LinearArray`` for linear and phased
arrays, ``ConvexArray`` when ``param.radius`` is finite) whose ``data`` is a C-order view
``(n_frames, n_elements, n_samples)`` of MATLAB's column-major ``(n_samples, n_elements,
n_frames)`` array (``RF.T``, no copy), ready for ``usbeam.das`` with a one-transmit sequence.

Units are SI; ``bandwidth`` is a fraction (MUST stores percent).  Time origin: usbeam
counts time from the first element firing (MUST ``txdelay`` shifts delays so their minimum
is 0); if ``param.TXdelay`` has a non-zero minimum d, the returned ``t0`` is MUST's t0 - d so
the same delays result.  Transmit: ``Delays(TXdelay)``, which beamforms with MUST dasmtx's
own transmit model (the envelope of spherical waves from spline-interpolated element
positions and delays), so results match MUST's; ``plane_wave_angle(TXdelay)`` gives the
fitted steering angle for callers who want the analytic ``PlaneWave`` instead (the two
differ by up to ~1e-3 sample at depth: MUST's envelope is built from discrete sources).
"""
from dataclasses import dataclass, field
import math
import os

import numpy as np

from .. import _validate
from .recording import Recording
from ..geometry import Delays, PlaneWave
from ..probes import ConvexArray, LinearArray

__all__ = ["MustRecording", "load_must", "plane_wave_angle"]


@dataclass(frozen=True, repr=False)  # Recording's __repr__
class MustRecording(Recording):
    """A MUST / PyMUST recording: ``data`` (n_frames, n_elements, n_samples), ``probe`` a
    LinearArray (or ConvexArray for a finite param.radius), ``sequence`` (Delays(TXdelay),) or (PlaneWave(0),) without TXdelay, ``prf`` and
    ``bandwidth`` nan when absent; ``param`` is every field of MUST's param, as read."""
    param: dict = field(repr=False, default_factory=dict)


def _scalar(param, name, required=True, default=math.nan):
    if name not in param:
        if required:
            raise ValueError(f"param.{name} is missing from the MUST file")
        return default
    value = np.asarray(param[name], dtype=np.float64).ravel()
    if value.size != 1 or not np.isfinite(value[0]):
        raise ValueError(f"param.{name} must be a finite scalar (got {param[name]!r})")
    return float(value[0])


def _positive(param, name, required=True, default=math.nan):
    """A field that is a rate, a speed or a frequency: > 0 when present."""
    value = _scalar(param, name, required, default)
    if name in param and not value > 0:
        raise ValueError(f"param.{name} must be > 0 (got {value!r})")
    return value


def _param_dict(raw):
    """scipy.io.loadmat's (1, 1) struct array -> {field: value}."""
    if isinstance(raw, dict):
        return dict(raw)
    if not (isinstance(raw, np.ndarray) and raw.dtype.names):
        raise ValueError("the MUST file's param is not a struct")
    item = raw.reshape(-1)[0]
    return {name: item[name] for name in raw.dtype.names}


def plane_wave_angle(delays, pitch, c):
    """Steering angle (rad) of a plane-wave delay law (s per element at ``pitch``), fitted
    by least squares; ValueError when the delays are not linear in x."""
    pitch = _validate.positive("pitch", pitch)
    c = _validate.speed_of_sound("c", c)
    d = np.asarray(delays, dtype=np.float64).ravel()
    if d.size < 1 or not np.all(np.isfinite(d)):
        raise ValueError("delays must be finite (no NaN) for a plane-wave fit")
    if d.size == 1 or np.ptp(d) == 0:
        return 0.0
    x = (np.arange(d.size) - (d.size - 1) / 2) * pitch
    slope, intercept = np.polyfit(x, d, 1)
    if np.max(np.abs(d - (slope * x + intercept))) > 1e-6 * np.ptp(d) or not abs(slope * c) < 1:
        raise ValueError("delays are not a plane-wave delay law (not linear in x)")
    return math.asin(slope * c)


def load_must(path, variable=None):
    """Read a MUST/PyMUST ``.mat`` file with ``RF`` (or ``IQ``) and ``param``.

    ``variable`` names the channel-data variable when it is neither ``RF`` nor ``IQ``.
    """
    import scipy.io
    from scipy.io.matlab import MatReadError

    try:
        mat = scipy.io.loadmat(path)
    except (MatReadError, ValueError, NotImplementedError) as error:  # NotImplementedError: v7.3 (HDF5) files
        raise ValueError(f"path: {path} is not a MAT file scipy.io.loadmat reads ({type(error).__name__}: {error}); "
                         f"MUST saves with save(..., '-v7') or PyMUST with scipy.io.savemat") from error
    names = [variable] if variable else [n for n in ("RF", "IQ") if n in mat]
    if not names or names[0] not in mat:
        raise ValueError(f"{path}: no channel data variable ({variable or 'RF or IQ'}) in the file")
    raw = mat[names[0]]
    if "param" not in mat:
        raise ValueError(f"{path}: no 'param' struct in the file")
    param = _param_dict(mat["param"])
    if raw.ndim == 2:
        raw = raw[:, :, None]
    if raw.ndim != 3:
        raise ValueError(f"{path}: {names[0]} must be (n_samples, n_elements[, n_frames]) (got {raw.shape})")
    data = raw.T  # column-major (samples, elements, frames) -> C-order (frames, elements, samples), a view

    fs = _positive(param, "fs")
    fc = _positive(param, "fc")
    c = _positive(param, "c", required=False, default=1540.0)
    t0 = _scalar(param, "t0", required=False, default=0.0)
    pitch = _positive(param, "pitch")
    n_elements = _scalar(param, "Nelements", required=False, default=data.shape[1])
    if n_elements != round(n_elements):  # int() would truncate 8.5 to 8
        raise ValueError(f"param.Nelements must be an integer (got {n_elements!r})")
    n_elements = int(n_elements)
    if n_elements != data.shape[1]:
        raise ValueError(f"param.Nelements ({n_elements}) disagrees with the data ({data.shape[1]} elements)")
    radius = np.asarray(param.get("radius", math.inf), dtype=np.float64).ravel()
    if radius.size != 1 or np.isnan(radius[0]):
        raise ValueError(f"param.radius must be a scalar (Inf for a linear array) (got {param.get('radius')!r})")
    radius = float(radius[0])
    width = _scalar(param, "width", required=False, default=None) if "width" in param else None
    kerf = _scalar(param, "kerf", required=False, default=None) if "kerf" in param else None
    bandwidth_pct = _scalar(param, "bandwidth", required=False)
    bandwidth = bandwidth_pct / 100.0
    bandwidth = bandwidth if math.isfinite(bandwidth) else None
    if math.isinf(radius):
        probe = LinearArray(n_elements, pitch, width=width, kerf=kerf if width is None else None, fc=fc,
                            bandwidth=bandwidth)
    else:  # a convex array, MUST's coordinates (usbeam.probes); radius <= 0 is refused there
        if width is None and kerf is not None:
            width = pitch - kerf
        try:
            probe = ConvexArray(n_elements, pitch, radius, element_width=width, fc=fc, bandwidth=bandwidth)
        except ValueError as exc:
            raise ValueError(f"param.radius / pitch / width: {exc}") from None
    if "TXdelay" in param:
        delays = np.asarray(param["TXdelay"], dtype=np.float64).ravel()
        if delays.size != n_elements:
            raise ValueError(f"param.TXdelay has {delays.size} entries for {n_elements} elements")
        transmit = Delays(delays)
        first = float(np.nanmin(delays))
    else:
        transmit, first = PlaneWave(0.0), 0.0
    return MustRecording(data=data, probe=probe, sequence=(transmit,), fs=fs, fc=fc, c=c, t0=t0 - first,
                         prf=_positive(param, "PRF", required=False), bandwidth=bandwidth, param=param,
                         source=f"MUST {os.path.basename(str(path))}")

