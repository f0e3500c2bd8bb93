"""A simulated scanner: frames at a set frame rate, on its own thread.

Sources: ``'simulator'`` (plane-wave RF of moving point scatterers from
usbeam.simulate.simulate_rf; see :func:`simulate_plane_wave_rf`), an array of frames
``(n_frames, ...)`` cycled in order, or a MATLAB file holding ``RF`` (MATLAB
``samples x elements x frames``), by path or by dataset name (``'PWI_disk.mat'``,
located by usbeam.datasets).  ``layout='vantage'`` hands frames on as Vantage RcvData
frames (:func:`to_rcvdata`: (rows, channels), column-major, the elements scattered over
channels by a connector map, acquisitions at rows padded to a multiple of 128, unused
channels holding noise), with ``scanner.channel_map`` the ChannelMap that undoes it, so the
channel mapping path is exercised exactly as with the hardware.

The scanner keeps its own clock (an absolute schedule, as hardware does): frame k is due
at start + k / frame_rate.  A push that blocks (policy 'block') makes later frames late;
they are then pushed at once, and counted in ``late``.
"""
import os
import threading
import time
import warnings

import numpy as np

from .. import _validate, datasets
from ..geometry import LinearArray, PlaneWave
from ..simulate import simulate_rf
from .channel_map import ChannelMap


def simulate_plane_wave_rf(n_frames=8, n_elements=64, n_samples=1024, *, fs=20e6, fc=5e6, c=1540.0,
                           pitch=0.3e-3, n_scatterers=20, velocity=0.05, prf=1000.0, seed=0):
    """RF of a 0-degree plane wave on a linear array, point scatterers moving axially.

    The scanner's frames, made by usbeam.simulate.simulate_rf (its pulse, bandwidth 0.6):
    ``n_scatterers`` random points (seeded by ``seed``) across the aperture at 15-85 % of the
    depth the record reaches, moving away from the probe at ``velocity`` (m/s) between
    frames ``1 / prf`` (s) apart.  Each frame is scaled to a 12-bit peak of 2000, as an ADC
    would hold it.  Returns int16 (n_frames, n_elements, n_samples), samples from t = 0 at fs.
    """
    rng = np.random.default_rng(seed)
    probe = LinearArray(n_elements, pitch)
    depth = c * (n_samples - 1) / fs / 2
    x = rng.uniform(probe.x[0], probe.x[-1], n_scatterers)
    z0 = rng.uniform(0.15 * depth, 0.85 * depth, n_scatterers)
    amplitudes = rng.uniform(0.3, 1.0, n_scatterers)
    positions = np.zeros((n_frames, n_scatterers, 3))
    positions[..., 0] = x
    positions[..., 2] = z0 + velocity * np.arange(n_frames)[:, None] / prf
    rf = simulate_rf(positions, amplitudes, probe, PlaneWave(0.0), fs=fs, fc=fc, c=c,
                     n_samples=n_samples)[:, 0]                      # one transmit
    peak = np.maximum(np.abs(rf).max(axis=(1, 2), keepdims=True), 1e-12)
    return np.round(rf / peak * 2000).astype(np.int16)


def to_rcvdata(frames, element_channel, n_channels, rows_per_acquisition=None):
    """Lay mapped frames out as Vantage RcvData frames.

    frames : (n_frames, n_acquisitions, n_elements, n_samples) or (n_frames, n_elements,
        n_samples) for one acquisition.
    element_channel : (n_elements,) 0-based channel of each element (Trans.Connector - 1).
    Returns int16 (n_frames, n_rows, n_channels) whose every frame is column-major
    (Fortran order), as MATLAB holds RcvData{1}(:, :, k); acquisition a occupies rows
    a * rows_per_acquisition + [0, n_samples).  Unused channels hold noise.
    """
    frames = np.asarray(frames)
    if frames.ndim == 3:
        frames = frames[:, None]
    n_frames, n_acq, n_el, n_samples = frames.shape
    rows = rows_per_acquisition or n_samples
    if rows < n_samples:
        raise ValueError("rows_per_acquisition must be >= n_samples")
    rng = np.random.default_rng(1)
    # (frames, channels, rows) C order == (frames, rows, channels) with column-major frames
    data = rng.integers(-3, 4, (n_frames, n_channels, n_acq * rows)).astype(frames.dtype)
    for a in range(n_acq):
        data[:, np.asarray(element_channel), a * rows:a * rows + n_samples] = frames[:, a]
    return data.transpose(0, 2, 1)


class SimulatedScanner:
    """Push frames into ``target`` at ``frame_rate`` frames/s on a background thread.

    target : a Session (its push is used) or any callable ``push(frame[, meta]) -> frame_id``
        (meta is passed only when ``meta=True``).
    source : 'simulator', an array (n_frames, ...), a list of frame arrays (used as they are),
        a .mat path with variable ``RF``, or a dataset name (usbeam.datasets, e.g. 'PWI_disk.mat').
    n_frames : stop after this many pushes (None: until stop()).
    meta : True to pass ``{'index': k, 'due': t}`` as each frame's meta.
    layout : 'mapped' (frames as the source holds them) or 'vantage': the source's frames,
        (n_frames, n_elements, n_samples) or (n_frames, n_acquisitions, n_elements,
        n_samples), are pushed as Vantage RcvData frames (see to_rcvdata); then
        ``self.channel_map`` maps them back (give it to the Session) and ``n_channels``
        (default: n_elements rounded up to 64), ``element_channel`` (default: a fixed
        shuffled connector) and ``rows_per_acquisition`` (default: n_samples rounded up to
        128, as the Vantage pads) set the layout.
    """

    def __init__(self, target, frame_rate, source="simulator", *, n_frames=None, meta=False, layout="mapped",
                 n_channels=None, element_channel=None, rows_per_acquisition=None, **simulator):
        self._push = target.push if hasattr(target, "push") else target
        if not callable(self._push):
            raise TypeError("target must be a Session or a callable push(frame[, meta])")
        self.frame_rate = _validate.positive("frame_rate", frame_rate)
        self.n_frames = None if n_frames is None else _validate.integer("n_frames", n_frames, minimum=1)
        self.layout = layout = _validate.choice("layout", layout, ("mapped", "vantage"))
        if layout == "mapped" and not (n_channels is None and element_channel is None and rows_per_acquisition is None):
            raise TypeError("n_channels, element_channel and rows_per_acquisition apply to layout='vantage' only")
        self.frames = self._load(source, simulator)
        self.channel_map = None
        if layout == "vantage":
            self.frames, self.channel_map = self._vantage(self.frames, n_channels, element_channel,
                                                          rows_per_acquisition)
        self._check_frames(target)
        self.meta = bool(meta)
        self._stop = threading.Event()
        self._thread = None
        self.sent = 0
        self.late = 0
        self.errors = []
        self.frame_ids = []
        self.elapsed_s = 0.0

    def _check_frames(self, target):
        """A target that tells its frame shape (a Session's frame_shape) is checked now: frames
        that it would refuse are a ValueError here, with both shapes, instead of pushes that
        all fail on the scanner's thread (see also ``errors``)."""
        want = getattr(target, "frame_shape", None)
        if want is None:
            return
        have = np.shape(self.frames[0])
        want = tuple(want)
        if have != want and tuple(s for s in have if s != 1) != tuple(s for s in want if s != 1):
            hint = ""
            if len(have) >= 2 and tuple(have[:2]) == tuple(want[:-3:-1]):
                hint = "; they look like MATLAB layout (samples, elements): pass the frames transposed"
            raise ValueError(f"source frames have shape {have} but the target takes frames of shape {want}"
                             f"{hint}")

    def __repr__(self):
        n = len(self.frames)
        shape = np.shape(self.frames[0])
        state = "running" if self._thread is not None and self._thread.is_alive() else "stopped"
        return (f"SimulatedScanner({n} frames of {shape}, {self.frame_rate:g} frames/s, layout={self.layout!r}, "
                f"{state}, sent={self.sent}, late={self.late}, errors={len(self.errors)})")

    @staticmethod
    def _load(source, simulator):
        if isinstance(source, str) and source == "simulator":
            return simulate_plane_wave_rf(**simulator)
        if isinstance(source, str) and not os.path.exists(source):
            source = datasets.locate(source)  # a dataset name from usbeam/data/manifest.json
        if isinstance(source, (str, bytes)) or hasattr(source, "__fspath__"):
            from scipy.io import loadmat
            rf = loadmat(source)["RF"]
            return np.ascontiguousarray(np.moveaxis(rf, -1, 0).transpose(0, 2, 1))  # (frames, elements, samples)
        if isinstance(source, (list, tuple)) and source and all(isinstance(f, np.ndarray) for f in source):
            return list(source)  # frames kept as given (e.g. column-major Vantage frames)
        frames = _validate.ndarray("source", source)
        if frames.ndim < 2 or frames.shape[0] == 0:
            raise ValueError(f"source must be an array of frames (n_frames, ...) (got shape {frames.shape})")
        return frames

    @staticmethod
    def _vantage(frames, n_channels, element_channel, rows_per_acquisition):
        mapped = np.stack(frames) if isinstance(frames, list) else frames
        if mapped.ndim == 3:
            mapped = mapped[:, None]
        if mapped.ndim != 4:
            raise ValueError("layout='vantage' needs source frames (n_frames, [n_acquisitions,] n_elements, "
                             f"n_samples) (got shape {mapped.shape})")
        _, n_acq, n_el, n_s = mapped.shape
        n_channels = (-(-n_el // 64) * 64 if n_channels is None
                      else _validate.integer("n_channels", n_channels, minimum=n_el))
        rows = (-(-n_s // 128) * 128 if rows_per_acquisition is None
                else _validate.integer("rows_per_acquisition", rows_per_acquisition, minimum=n_s))
        if element_channel is None:
            element_channel = np.random.default_rng(0).permutation(n_channels)[:n_el]
        element_channel = np.asarray(element_channel)
        if (element_channel.shape != (n_el,) or element_channel.dtype.kind not in "iu"
                or len(set(element_channel.tolist())) != n_el
                or element_channel.min() < 0 or element_channel.max() >= n_channels):
            raise ValueError(f"element_channel must hold {n_el} distinct channels in 0..{n_channels - 1}")
        raw = to_rcvdata(mapped, element_channel, n_channels, rows)
        frames = [np.asfortranarray(f) for f in raw]   # column-major, as MATLAB holds RcvData
        cmap = ChannelMap(frames[0].shape, element_channel, np.arange(n_acq) * rows, n_s, mapped.dtype)
        return frames, cmap

    def start(self):
        if self._thread is not None and self._thread.is_alive():
            return self
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="usbeam-simulated-scanner", daemon=True)
        self._thread.start()
        return self

    def _run(self):
        period = 1.0 / self.frame_rate
        start = time.perf_counter()
        k = 0
        while not self._stop.is_set() and (self.n_frames is None or k < self.n_frames):
            due = start + k * period
            wait = due - time.perf_counter()
            if wait > 0:
                if self._stop.wait(wait):
                    break
            elif wait < -period:
                self.late += 1
            frame = self.frames[k % len(self.frames)]
            try:
                frame_id = self._push(frame, {"index": k, "due": due}) if self.meta else self._push(frame)
                self.frame_ids.append(frame_id)
            except Exception as exc:  # e.g. SessionStopped: stop pushing
                if not self.errors and type(exc).__name__ != "SessionStopped":
                    # said once, not silently: the scanner's thread has no caller to raise to
                    warnings.warn(f"SimulatedScanner: push of frame {k} failed ({type(exc).__name__}: {exc}); "
                                  f"the failures are kept in scanner.errors", RuntimeWarning, stacklevel=1)
                self.errors.append(exc)
                if len(self.errors) > 100 or type(exc).__name__ == "SessionStopped":
                    break
            k += 1
            self.sent = k
        self.elapsed_s = time.perf_counter() - start

    def join(self, timeout=None):
        if self._thread is not None:
            self._thread.join(timeout)
            return not self._thread.is_alive()
        return True

    def stop(self, timeout=5.0):
        self._stop.set()
        ok = self.join(timeout)
        self._thread = None
        return ok

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
