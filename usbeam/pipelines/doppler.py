"""RF -> IQ -> DAS -> clutter filter -> color / power Doppler, with every buffer allocated once.

One call takes one ensemble of RF channel data, ``(n_frames, n_transmits, n_elements,
n_samples)`` (int16 as scanners deliver it, or float32; any layout of the shape rule of README
"Shapes" holding n_frames frames, e.g. ``load_must``'s ``(n_frames, n_elements, n_samples)``),
and returns the Doppler maps of the grid.  The transmits of a frame are compounded
coherently by the beamformer, so ``prf`` is the slow-time rate of the compounded frames (the pulse repetition frequency divided by the
number of transmits per frame).  Stages: ``usbeam.RF2IQPlan``, ``usbeam.Beamformer``,
``usbeam.ClutterFilter``, ``usbeam.ColorDopplerPlan``, ``usbeam.PowerDopplerPlan``.

backend='cuda' (any clutter filter, or None; 'svd' up to 128 frames): every intermediate array is a
usbeam.DeviceArray allocated once, the stages chain on the GPU without host round trips
(stream-to-stream event waits only), the maps returned are the pipeline's device buffers, and
``timings`` holds each stage's GPU time from CUDA events (reading it waits for the call).

capture_graph=True (backend='cuda', clutter other than 'iir'), as ``usbeam.Pipeline``: the
first call runs the chain once, waits for it, puts every plan on the rf2iq plan's stream and
captures the chain into one CUDA graph (cuda/runtime/graph.cu); later calls copy the RF into the
pipeline's own buffer and replay the graph with one launch.  'iir' is refused: its
initialisation on the first block after ``reset()`` is chosen at launch time, which a graph
would freeze.

The call lock, RF ingest, timings, fault report (NaN / inf rf met by the beamformer is
reported once, as rf, at the next call or ``self.beamformer.cuda.synchronize()``) and graph
capture are the chain's (_chain.py), shared with ``usbeam.Pipeline``.
"""
import time
from collections import namedtuple

import numpy as np

from .. import _validate, device
from ..beamformer import Beamformer, as_recording, recording_parameters
from ..clutter import ClutterFilter
from ..doppler import ColorDopplerPlan, PowerDopplerPlan
from ..geometry import as_sequence
from ..rf2iq import RF2IQPlan
from ._chain import Chain

class DopplerMaps(namedtuple("DopplerMaps", ["velocity", "variance", "power"])):
    """The maps of one call (None for an output not asked for); prints by shape, not values."""
    __slots__ = ()

    def __repr__(self):
        def text(m):
            return "None" if m is None else f"{getattr(m, 'dtype', '')}{tuple(m.shape)}"
        return f"DopplerMaps(velocity={text(self.velocity)}, variance={text(self.variance)}, power={text(self.power)})"


class DopplerPipeline(Chain):
    """The whole Doppler chain for one acquisition geometry.

    Parameters
    ----------
    probe, sequence, grid :
        ``usbeam.LinearArray``, a transmit or list of transmits (compounded), ``usbeam.Grid``.
    n_frames : int
        Ensemble length (slow-time frames per call).
    n_samples, fs, fc, c, t0 :
        RF samples per channel, sampling and centre frequencies (Hz), speed of sound (m/s),
        time of the first sample (s).
    prf : float
        Slow-time rate of the (compounded) frames, Hz.
    rf_dtype : int16 or float32
    bandwidth : float or None
        Fractional bandwidth of the rf2iq low-pass (MUST convention), None for its default.
    f_number, interpolation :
        Beamformer receive f-number (or 'auto') and interpolation.
    clutter : {'poly', 'svd', 'mean', 'iir'} or None
        Clutter filter, with ``clutter_options`` passed to ``usbeam.ClutterFilter``.  An
        'iir' filter carries its state from one call to the next (a live stream).  Default
        'poly' (order 2, ``ClutterFilter``'s own default): it removes stationary and slowly
        moving tissue, whatever dominates the ensemble, on every backend and in a graph.
        The former default, 'svd' with its automatic cut-off, removed nothing on PWI_disk
        (the disk's rotation dominates every singular vector: none has a mean Doppler
        frequency below 0.05 PRF), leaving the maps identical to no filter; 'poly' removes the
        zero-Doppler (stationary) part by 148 dB there while the disk keeps the sign of its
        velocity, and tissue added 30 dB above the disk, moving at 0 / 0.005 / 0.01 / 0.02 of
        the PRF, by 152 / 50 / 32 / 15 dB (tests/doppler/test_doppler_usability.py).  Tissue
        moving faster than about 0.01 PRF (here 1.5 cm/s) needs 'svd' (44 dB at 0.02 PRF, when
        that tissue dominates the ensemble) or a higher 'poly' order.
    lag, average, window :
        Color Doppler options (``usbeam.ColorDopplerPlan``).
    outputs : tuple of {'color', 'power'}
    power_db, noise_floor :
        Power Doppler options (``usbeam.PowerDopplerPlan``; dB relative to each call's max).
    decimation :
        rf2iq decimation (the beamformer then reads the decimated IQ).
    capture_graph : bool
        backend='cuda': replay the chain as one CUDA graph after the first call (see above).
    das_options : dict or None
        More keyword arguments of ``usbeam.Beamformer`` (e.g. ``formulation='sparse'``,
        ``window``), as ``usbeam.Pipeline`` takes them.
    strict : bool
        backend='cuda': refuse host (NumPy) RF with a TypeError instead of copying it to the
        device (passed to every plan too); ignored on the CPU, as by the plans.

    Calling the pipeline returns ``DopplerMaps(velocity, variance, power)`` (None for an
    output not requested): on the CPU new arrays each call (image-sized, so the copy out of
    the pipeline's buffers is cheap, and calls from several threads each get their own); with
    backend='cuda' the pipeline's own device buffers, overwritten by the next call: copy them
    to keep them.  Calls from several threads run one at a time.  ``timings`` holds the
    seconds each stage took in the last call (rf2iq, das, clutter, doppler).
    """

    STAGES = ("rf2iq", "das", "clutter", "doppler")

    def __init__(self, probe, sequence, grid, *, n_frames, n_samples, fs, fc, prf, c=1540.0, t0=0.0,
                 rf_dtype=np.int16, bandwidth=None, f_number=1.0, interpolation="linear", clutter="poly",
                 clutter_options=None, lag=1, average=1, window="hamming", outputs=("color", "power"),
                 power_db=True, noise_floor=0.0, decimation=1, backend="cpu", capture_graph=False,
                 strict=False, das_options=None):
        self.n_frames = _validate.integer("n_frames", n_frames, minimum=2)
        self.prf = _validate.pulse_repetition_frequency("prf", prf)
        _validate.frequency("fs", fs)
        _validate.frequency("fc", fc)
        if clutter is not None:
            clutter = _validate.choice("clutter", clutter, ("poly", "svd", "mean", "iir"))
        if isinstance(outputs, str):
            outputs = (outputs,)
        outputs = tuple(_validate.choice("outputs", name, ("color", "power")) for name in outputs)
        for name in outputs:
            _validate.choice("outputs", name, ("color", "power"))
        if not outputs:
            raise ValueError("outputs: ask for 'color', 'power' or both")
        self.outputs = outputs
        sequence = as_sequence(sequence, probe)
        self.rf_shape = (self.n_frames, len(sequence), probe.n_elements,
                         _validate.integer("n_samples", n_samples, minimum=1))
        self.rf_dtype = np.dtype(rf_dtype)
        self.strict = bool(strict)
        self.rf2iq = RF2IQPlan(self.rf_shape, self.rf_dtype, fs=fs, fc=fc, t0=t0, bandwidth=bandwidth,
                               decimation=decimation, backend=backend, strict=self.strict)
        self.beamformer = Beamformer(probe, sequence, grid, fs=self.rf2iq.fs_out, fc=fc, c=c, t0=t0,
                                     n_samples=self.rf2iq.n_out, f_number=f_number, interpolation=interpolation,
                                     dtype=np.complex64, n_frames=self.n_frames, bandwidth=bandwidth,
                                     backend=backend, strict=self.strict, **(das_options or {}))
        self.image_shape = tuple(grid.shape)
        ensemble_shape = (self.n_frames,) + self.image_shape
        self.clutter = (ClutterFilter(ensemble_shape, clutter, backend=backend, strict=self.strict,
                                      **(clutter_options or {}))
                        if clutter is not None else None)
        self.color = (ColorDopplerPlan(ensemble_shape, fc=fc, prf=prf, c=c, lag=lag, average=average,
                                       window=window, backend=backend, strict=self.strict)
                      if "color" in outputs else None)
        self.power = (PowerDopplerPlan(ensemble_shape, db=power_db, noise_floor=noise_floor, backend=backend,
                                       strict=self.strict)
                      if "power" in outputs else None)
        _validate.check_allocation("iq", self.rf2iq.out_shape, 8)
        self.backend = self.rf2iq.backend
        self._init_chain(self.rf_shape, self.rf_dtype, capture_graph=capture_graph)
        if self.capture_graph and clutter == "iir":
            raise ValueError("capture_graph: not with clutter='iir' (its reset-time initialisation is chosen "
                             "per launch, which a graph would freeze)")
        empty = device.empty if self.backend == "cuda" else np.empty
        self._iq = empty(self.rf2iq.out_shape, np.complex64)
        self._beamformed = empty(ensemble_shape, np.complex64)
        self._filtered = empty(ensemble_shape, np.complex64) if self.clutter is not None else self._beamformed
        self._velocity = empty(self.image_shape, np.float32) if self.color else None
        self._variance = empty(self.image_shape, np.float32) if self.color else None
        self._power = empty(self.image_shape, np.float32) if self.power else None

    @classmethod
    def from_recording(cls, recording, grid, **overrides):
        """The Doppler chain for ``recording``'s RF on ``grid``: probe, sequence, fs, fc, c, t0,
        bandwidth, n_samples, rf_dtype, the ensemble length (the recording's frames) and
        ``prf`` (the recording's frame rate: ValueError naming prf when it does not know it)
        taken from the recording; ``f_number='auto'`` when the element width is known.
        ``recording``: a ``usbeam.io.Recording`` or an object with ``to_recording()``;
        ``overrides``: any constructor keyword (``clutter='svd'``, ``n_frames=16``...)."""
        import math

        rec = as_recording(recording)
        if rec.is_iq:
            raise ValueError("recording holds IQ: DopplerPipeline takes RF")
        kwargs = recording_parameters(rec)
        n_tx = kwargs.pop("n_transmits")
        leading, _ = _validate.leading_axes("recording.data", np.shape(rec.data), n_tx, rec.probe.n_elements,
                                            rec.n_samples)
        kwargs["n_frames"] = max(1, int(np.prod(leading)))
        kwargs["rf_dtype"] = np.int16 if np.dtype(rec.data.dtype).newbyteorder("=") == np.int16 else np.float32
        if "prf" not in overrides:
            if rec.prf is None or not math.isfinite(rec.prf):
                raise ValueError("prf: the recording does not know its frame rate; pass prf=... (Hz)")
            kwargs["prf"] = rec.prf
        if getattr(rec.probe, "width", None) is not None:
            kwargs["f_number"] = "auto"
        kwargs.update(overrides)
        return cls(rec.probe, rec.sequence, grid, **kwargs)

    def _describe(self):
        bf = self.beamformer
        clutter = "none" if self.clutter is None else self.clutter.method
        return {"input": f"{self.rf_dtype.name}{self.rf_shape}", "image": str(self.image_shape),
                "prf": f"{self.prf:g} Hz", "fc": f"{bf.fc / 1e6:.4g} MHz", "c": f"{bf.c:g} m/s",
                "t0": f"{bf.t0 * 1e6:.4g} us", "f_number": f"{bf.f_number:.4g}", "clutter": clutter,
                "outputs": "+".join(self.outputs), "backend": self.backend}

    @property
    def nyquist_velocity(self):
        return self.color.nyquist_velocity if self.color else None

    @property
    def input_bytes(self):
        """Bytes of one RF ensemble."""
        return int(np.prod(self.rf_shape)) * self.rf_dtype.itemsize

    # ---- the chain's hooks (_chain.py) --------------------------------------------------

    def _plans(self):
        return [p for p in (self.rf2iq, self.beamformer, self.clutter, self.color, self.power) if p is not None]

    def _stage_plans(self):
        return {"rf2iq": (self.rf2iq,), "das": (self.beamformer,), "clutter": (self.clutter,),
                "doppler": (self.color, self.power)}

    def _run_stages_cuda(self):
        self.rf2iq(self._device_rf, out=self._iq)
        self.beamformer(self._iq, out=self._beamformed)
        self._doppler_stages()

    def _buffers(self):
        return [b for b in (self._device_rf, self._iq, self._beamformed, self._filtered, self._velocity,
                            self._variance, self._power) if b is not None]

    # ---- calls --------------------------------------------------------------------------

    def beamform(self, rf):
        """RF -> beamformed IQ ensemble ``(n_frames, nz, nx)`` (the pipeline's buffer, which the
        next call overwrites)."""
        return self._locked_call(self._beamform, rf)

    def _beamform(self, rf):
        self._leading_of(rf)  # the shape rule: any layout holding n_frames frames
        if self.backend == "cuda":
            self._check_rf(earlier=True)
            rf, _ = self._rf_on_device(rf, in_place=True)  # device rf: read in place
        else:
            rf = self._host_rf(rf)
        t0 = time.perf_counter()
        self.rf2iq(rf, out=self._iq)
        t1 = time.perf_counter()
        self.beamformer(self._iq, out=self._beamformed)
        self._timings["rf2iq"], self._timings["das"] = t1 - t0, time.perf_counter() - t1
        return self._beamformed

    def _doppler_stages(self):
        """Clutter filter, then color and power Doppler, from the beamformed ensemble."""
        t0 = time.perf_counter()
        if self.clutter is not None:
            self.clutter(self._beamformed, out=self._filtered)
        t1 = time.perf_counter()
        if self.color is not None:
            self.color(self._filtered, velocity=self._velocity, variance=self._variance)
        if self.power is not None:
            self.power(self._filtered, out=self._power)
        self._timings["clutter"], self._timings["doppler"] = t1 - t0, time.perf_counter() - t1

    def __call__(self, rf):
        """Run the chain on one RF ensemble; returns DopplerMaps.  backend='cuda': the pipeline's
        device buffers, which the next call overwrites; CPU: new arrays each call.  Safe to
        call from several threads: calls run one at a time (the stages share the buffers)."""
        return self._locked_call(self._call, rf)

    def _call(self, rf):
        if self.capture_graph:
            self._check_rf(earlier=True)
            self._replay(rf)
        else:
            self._beamform(rf)
            self._doppler_stages()
        maps = DopplerMaps(self._velocity, self._variance, self._power)
        if self.backend == "cuda":
            return maps
        # copied while the lock is held: the next call overwrites the buffers
        return DopplerMaps(*(None if m is None else m.copy() for m in maps))
