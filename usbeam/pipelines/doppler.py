"""RF -> IQ -> DAS -> clutter filter -> color / power Doppler, with every buffer allocated once.

One call takes one ensemble of RF channel data, ``(n_frames, n_transmits, n_elements,
n_samples)`` (int16 as scanners deliver it, or float32), and returns the Doppler maps of the
grid.  The transmits of a frame are compounded coherently by the beamformer, so ``prf`` is
the slow-time rate of the compounded frames (the pulse repetition frequency divided by the
number of transmits per frame).  Stages: ``usbeam.RF2IQPlan``, ``usbeam.Beamformer``,
``usbeam.ClutterFilter``, ``usbeam.ColorDopplerPlan``, ``usbeam.PowerDopplerPlan``.

backend='cuda' (any clutter filter, or None; 'svd' up to 128 frames): every intermediate array is a
usbeam.DeviceArray allocated once, the stages chain on the GPU without host round trips
(stream-to-stream event waits only), the maps returned are the pipeline's device buffers, and
``timings`` holds each stage's GPU time from CUDA events (reading it waits for the call).

capture_graph=True (backend='cuda', clutter other than 'iir'), as ``usbeam.Pipeline``: the
first call runs the chain once, waits for it, puts every plan on the rf2iq plan's stream and
captures the chain into one CUDA graph (cuda/graph.cu); later calls copy the RF into the
pipeline's own buffer and replay the graph with one launch.  'iir' is refused: its
initialisation on the first block after ``reset()`` is chosen at launch time, which a graph
would freeze.
"""
import threading
import time
from collections import namedtuple

import numpy as np

from .. import _validate
from ..doppler import ClutterFilter, ColorDopplerPlan, PowerDopplerPlan

DopplerMaps = namedtuple("DopplerMaps", ["velocity", "variance", "power"])


class DopplerPipeline:
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
    clutter : {'svd', 'poly', 'mean', 'iir'} or None
        Clutter filter, with ``clutter_options`` passed to ``usbeam.ClutterFilter``.  An
        'iir' filter carries its state from one call to the next (a live stream).
    lag, average, window :
        Color Doppler options (``usbeam.ColorDopplerPlan``).
    outputs : tuple of {'color', 'power'}
    power_db, noise_floor :
        Power Doppler options (``usbeam.PowerDopplerPlan``; dB relative to each call's max).
    decimation :
        rf2iq decimation (the beamformer then reads the decimated IQ).
    capture_graph : bool
        backend='cuda': replay the chain as one CUDA graph after the first call (see above).
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
                 rf_dtype=np.int16, bandwidth=None, f_number=1.0, interpolation="linear", clutter="svd",
                 clutter_options=None, lag=1, average=1, window="hamming", outputs=("color", "power"),
                 power_db=True, noise_floor=0.0, decimation=1, backend="cpu", capture_graph=False,
                 strict=False):
        from ..beamformer import Beamformer
        from ..geometry import as_sequence
        from ..rf2iq import RF2IQPlan

        self.n_frames = _validate.integer("n_frames", n_frames, minimum=2)
        self.prf = _validate.positive("prf", prf)
        outputs = tuple(outputs)
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
                                     backend=backend, strict=self.strict)
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
        self._call_lock = threading.Lock()  # one call at a time: the stages share buffers (as Pipeline)
        if self.backend == "cuda":
            from .. import device

            empty = device.empty
            self._device_rf = empty(self.rf_shape, self.rf_dtype)
        else:
            empty = np.empty
        self._iq = empty(self.rf2iq.out_shape, np.complex64)
        self._beamformed = empty(ensemble_shape, np.complex64)
        self._filtered = empty(ensemble_shape, np.complex64) if self.clutter is not None else self._beamformed
        self._velocity = empty(self.image_shape, np.float32) if self.color else None
        self._variance = empty(self.image_shape, np.float32) if self.color else None
        self._power = empty(self.image_shape, np.float32) if self.power else None
        self._timings = dict.fromkeys(self.STAGES, 0.0)
        self.capture_graph = bool(capture_graph)
        if self.capture_graph and self.backend != "cuda":
            raise ValueError("capture_graph: CUDA graphs need backend='cuda'")
        if self.capture_graph and clutter == "iir":
            raise ValueError("capture_graph: not with clutter='iir' (its reset-time initialisation is chosen "
                             "per launch, which a graph would freeze)")
        self._graph = None

    @property
    def timings(self):
        """Seconds per stage of the last call: wall clock on the CPU, CUDA events on the GPU."""
        if self.backend != "cuda":
            return dict(self._timings)

        def gpu_seconds(*plans):
            return sum(sum(p.cuda.stage_times().values()) for p in plans if p is not None and p.cuda is not None)

        return {"rf2iq": gpu_seconds(self.rf2iq), "das": gpu_seconds(self.beamformer),
                "clutter": gpu_seconds(self.clutter), "doppler": gpu_seconds(self.color, self.power)}

    @property
    def nyquist_velocity(self):
        return self.color.nyquist_velocity if self.color else None

    @property
    def input_bytes(self):
        """Bytes of one RF ensemble."""
        return int(np.prod(self.rf_shape)) * self.rf_dtype.itemsize

    def _check_rf(self):
        """backend='cuda': ValueError if the beamformer read NaN or inf (from rf, through rf2iq) in
        the runs finished since the last check (a flag the device sets in mapped host memory;
        reading it costs no CUDA call).  The maps stay on the device, so this is checked at the
        next call, and by ``self.beamformer.cuda.synchronize()``."""
        if self.backend == "cuda" and self.beamformer.cuda is not None:
            self.beamformer.cuda.check_input("rf", earlier=True)

    def beamform(self, rf):
        """RF -> beamformed IQ ensemble ``(n_frames, nz, nx)`` (the pipeline's buffer, which the
        next call overwrites)."""
        with self._call_lock:
            return self._beamform(rf)

    def _beamform(self, rf):
        if self.backend == "cuda":
            from .. import device

            self._check_rf()

            if not device._in_host_memory(rf):  # already on the device: read in place
                self.rf2iq(rf, out=self._iq)
                self.beamformer(self._iq, out=self._beamformed)
                return self._beamformed
            if self.strict:
                raise device._host_refused("rf")
        rf = _validate.ndarray("rf", rf)
        if rf.dtype != self.rf_dtype:
            raise TypeError(f"rf must have dtype {self.rf_dtype} (got {rf.dtype})")
        if rf.shape != self.rf_shape:
            raise ValueError(f"rf must have shape {self.rf_shape} (got {rf.shape})")
        if self.backend == "cuda":
            self._device_rf.copy_from_host(np.ascontiguousarray(rf))
            rf = self._device_rf
        t0 = time.perf_counter()
        self.rf2iq(rf, out=self._iq)
        t1 = time.perf_counter()
        self.beamformer(self._iq, out=self._beamformed)
        self._timings["rf2iq"], self._timings["das"] = t1 - t0, time.perf_counter() - t1
        return self._beamformed

    def _plans(self):
        return [p for p in (self.rf2iq, self.beamformer, self.clutter, self.color, self.power) if p is not None]

    def _chain_cuda(self):
        self.rf2iq(self._device_rf, out=self._iq)
        self.beamformer(self._iq, out=self._beamformed)
        if self.clutter is not None:
            self.clutter(self._beamformed, out=self._filtered)
        if self.color is not None:
            self.color(self._filtered, velocity=self._velocity, variance=self._variance)
        if self.power is not None:
            self.power(self._filtered, out=self._power)

    def _call_graph(self, rf):
        """capture_graph=True: RF into the pipeline's buffer, then one graph launch."""
        from .. import _core, device

        stream = self.rf2iq.cuda.stream  # the rf2iq plan's own stream carries the whole graph
        if device._in_host_memory(rf):
            if self.strict:
                raise device._host_refused("rf")
            rf = _validate.ndarray("rf", rf)
            if rf.dtype != self.rf_dtype or rf.shape != self.rf_shape:
                raise (TypeError if rf.dtype != self.rf_dtype else ValueError)(
                    f"rf must have dtype {self.rf_dtype} and shape {self.rf_shape} (got {rf.dtype}, {rf.shape})")
            self._device_rf.copy_from_host(np.ascontiguousarray(rf))
        else:
            d = device.asarray(rf, stream=stream, name="rf")
            if d.dtype != self.rf_dtype or d.shape != self.rf_shape:
                raise (TypeError if d.dtype != self.rf_dtype else ValueError)(
                    f"rf must have dtype {self.rf_dtype} and shape {self.rf_shape} (got {d.dtype}, {d.shape})")
            _core.device_copy(self._device_rf.ptr, d.ptr, d.nbytes, stream)
            d._mark_used(stream, self.rf2iq)
        if self._graph is None:
            # run once eagerly, wait for every plan, then put all of them on one stream and
            # capture the chain there
            self._chain_cuda()
            plans = self._plans()
            for plan in plans:
                plan.cuda.synchronize()
            for plan in plans[1:]:
                plan.cuda.set_stream(stream)
            # Every plan has finished: the chain's buffers now belong to the capture stream (a
            # buffer naming another plan's stream would make the capture wait on an event recorded
            # outside it, which breaks the capture's isolation).
            for buffer in (self._device_rf, self._iq, self._beamformed, self._filtered, self._velocity,
                           self._variance, self._power):
                if buffer is not None:
                    buffer._mark_used(stream, self.rf2iq)
            _core.graph_capture_begin(stream)
            try:
                self._chain_cuda()
            except BaseException:
                _core.graph_capture_abort(stream)
                raise
            self._graph = _core.graph_capture_end(stream)
        _core.graph_launch(self._graph, stream)
        # the next host copy into the RF buffer, and readers of the maps, wait for this launch
        for buffer in (self._device_rf, self._velocity, self._variance, self._power):
            if buffer is not None:
                buffer._mark_used(stream, self.rf2iq)
        return DopplerMaps(self._velocity, self._variance, self._power)

    def __call__(self, rf):
        """Run the chain on one RF ensemble; returns DopplerMaps.  backend='cuda': the pipeline's
        device buffers, which the next call overwrites; CPU: new arrays each call.  Safe to
        call from several threads: calls run one at a time (the stages share the buffers)."""
        with self._call_lock:
            if self.backend == "cuda":
                return self._call(rf)
            maps = self._call(rf)
            # copied while the lock is held: the next call overwrites the buffers
            return DopplerMaps(*(None if m is None else m.copy() for m in maps))

    def _call(self, rf):
        if self.capture_graph:
            self._check_rf()
            return self._call_graph(rf)
        beamformed = self._beamform(rf)
        t0 = time.perf_counter()
        if self.clutter is not None:
            self.clutter(beamformed, out=self._filtered)
        t1 = time.perf_counter()
        if self.color is not None:
            self.color(self._filtered, velocity=self._velocity, variance=self._variance)
        if self.power is not None:
            self.power(self._filtered, out=self._power)
        self._timings["clutter"], self._timings["doppler"] = t1 - t0, time.perf_counter() - t1
        return DopplerMaps(self._velocity, self._variance, self._power)
