"""Quadrature pairs -> IQ -> DAS -> B-mode: the pipeline of a Vantage workspace acquired in a
BS sample mode ('BS100BW', 'BS67BW', 'BS50BW'), built by ``usbeam.Pipeline.from_vantage``.

The BS modes store two samples a quarter period of the demodulation frequency f_d apart
(rows 2k, 2k+1) every 1, 1.5 or 2 periods, so the rows are not uniformly spaced in time and
``usbeam.rf2iq`` does not apply.  Each pair is the analytic signal at its first sample,
``s0 - j s1``, brought to baseband by ``exp(-2 pi j f_d t_k)`` (t_k = t0 + k P in usbeam
time, the ``rf2iq`` convention); derivation in ``usbeam/io/vantage_recording.py``.

Layouts:
  input   (n_frames, n_transmits, n_elements, n_rows)   int16 pairs (n_rows even)
  iq      (n_frames, n_transmits, n_elements, n_rows/2) complex64, sample k at t0 + k P
  output  (n_frames, *grid.shape)                       uint8 B-mode (or float32 dB)

The pair conversion runs on the host (NumPy, into a buffer allocated once; the rotation
table is computed once in double); the beamformer and B-mode are usbeam's plans, which with
``backend='cuda'`` copy the host IQ to the device (a live CUDA session, which hands
DeviceArrays, is not supported by this pipeline: use the CPU backend).
"""
import threading
import time

import numpy as np

from .. import _validate
from ..beamformer import Beamformer
from ..bmode import BModePlan
from ..geometry import as_sequence
from ..io.vantage_recording import BS_PERIODS_PER_PAIR, _bs_rotation

__all__ = ["QuadraturePairPipeline"]


class QuadraturePairPipeline:
    """BS-mode quadrature pairs to B-mode with plans and buffers built once.

    probe, sequence, grid : the geometry; fs : pair rate (Hz) = f_d / periods per pair;
    fc : the demodulation frequency f_d (Hz); c (m/s); t0 : time of the first pair (s);
    n_rows : rows per channel (2 per pair); sample_mode : 'BS100BW', 'BS67BW' or 'BS50BW'.
    f_number, window, interpolation, das_options go to usbeam.Beamformer; dynamic_range,
    normalize, bmode_output to usbeam.BModePlan.
    """

    STAGES = ("pairs2iq", "das", "bmode")

    def __init__(self, probe, sequence, grid, *, fs, fc, c=1540.0, t0=0.0, n_rows, sample_mode, n_frames=1,
                 f_number=1.0, window="rect", interpolation="linear", dynamic_range=60.0, normalize="global",
                 bmode_output="uint8", backend="cpu", das_options=None, bandwidth=None, strict=False):
        if backend != "cpu":
            raise ValueError(f"backend={backend!r}: the BS-mode (quadrature pair) pipeline runs on the CPU only")
        self.sample_mode = _validate.choice("sample_mode", sample_mode, tuple(BS_PERIODS_PER_PAIR))
        self.sequence = as_sequence(sequence, probe)
        n_frames = _validate.integer("n_frames", n_frames, minimum=1)
        n_rows = _validate.integer("n_rows", n_rows, minimum=2)
        if n_rows % 2:
            raise ValueError(f"n_rows must be even: {sample_mode} stores quadrature pairs (got {n_rows})")
        self.fc = _validate.frequency("fc", fc)
        self.fs = _validate.frequency("fs", fs)
        expected = self.fc / BS_PERIODS_PER_PAIR[self.sample_mode]
        if abs(self.fs - expected) > 1e-9 * expected:
            raise ValueError(f"fs must be the pair rate of {sample_mode}, fc / {BS_PERIODS_PER_PAIR[sample_mode]:g} "
                             f"= {expected:g} Hz (got {fs})")
        self.t0 = _validate.real_scalar("t0", t0)
        self.input_shape = (n_frames, len(self.sequence), probe.n_elements, n_rows)
        self.input_dtype = np.dtype(np.int16)
        self.iq_shape = self.input_shape[:-1] + (n_rows // 2,)
        _validate.check_allocation("pipeline buffers", self.iq_shape, 8)
        self.beamformer = Beamformer(probe, self.sequence, grid, fs=self.fs, fc=self.fc, c=c, t0=self.t0,
                                     n_samples=n_rows // 2, f_number=f_number, window=window,
                                     interpolation=interpolation, dtype=np.complex64, bandwidth=bandwidth,
                                     n_frames=n_frames, **(das_options or {}))
        self.output_shape = (n_frames,) + tuple(grid.shape)
        _validate.check_allocation("pipeline image", self.output_shape, 8)
        self.bmode = BModePlan(self.output_shape, dynamic_range, output=bmode_output, normalize=normalize)
        self.output_dtype = self.bmode.out_dtype
        self.backend = "cpu"
        self._rotation = _bs_rotation(n_rows // 2, self.t0, self.fc, self.sample_mode)
        self.iq = np.empty(self.iq_shape, np.complex64)
        self.image = np.empty(self.output_shape, np.complex64)
        self._lock = threading.Lock()
        self._timings = dict.fromkeys(self.STAGES, 0.0)

    @property
    def timings(self):
        """Wall-clock seconds per stage of the last call."""
        return dict(self._timings)

    def __call__(self, rf, out=None):
        """Pairs (input_shape, int16) -> B-mode (output_shape).  Calls run one at a time."""
        rf = _validate.ndarray("rf", rf)
        if rf.dtype != self.input_dtype:
            raise TypeError(f"rf must be int16 quadrature pairs (got {rf.dtype})")
        if rf.shape != self.input_shape:
            raise ValueError(f"rf must have shape {self.input_shape} (got {rf.shape})")
        if out is None:
            out = np.empty(self.output_shape, self.output_dtype)
        else:
            _validate.out_array("out", out, self.output_shape, self.output_dtype)
            _validate.no_overlap("out", out, "rf", rf)
        with self._lock:
            t = time.perf_counter()
            np.copyto(self.iq.real, rf[..., 0::2], casting="unsafe")
            np.copyto(self.iq.imag, rf[..., 1::2], casting="unsafe")
            np.negative(self.iq.imag, out=self.iq.imag)
            np.multiply(self.iq, self._rotation, out=self.iq)
            t1 = time.perf_counter()
            self.beamformer(self.iq, out=self.image)
            t2 = time.perf_counter()
            self.bmode(self.image, out=out)
            t3 = time.perf_counter()
            self._timings = {"pairs2iq": t1 - t, "das": t2 - t1, "bmode": t3 - t2}
        return out
