"""RF -> IQ -> DAS -> B-mode as one object with every buffer allocated once.

A Pipeline owns the three plans (RF2IQPlan, Beamformer, BModePlan) and the intermediate
arrays; calling it runs the stages in order, writes the caller's `out=` when given, and
records the wall-clock time of each stage in `timings` (seconds, last call).

backend='cuda': the intermediate arrays are usbeam.DeviceArrays allocated once, the stages
chain on the GPU without host round trips (each plan's stream waits for the previous stage
with an event, never the host), and `timings` holds the GPU time of each stage from the
plans' CUDA events (seconds; reading it waits for the last call to finish).  RF on the host
is copied into a preallocated device buffer; RF already on the device (any DLPack / CUDA
array interface producer) is read in place.  The result is a host array for host RF (or a
host `out=`), otherwise the device output (the pipeline's buffer unless `out=` is given).
NVTX ranges name every stage (<family>.<stage>) for Nsight Systems.

capture_graph=True (backend='cuda'): the first call runs the chain once, puts every plan on
one stream, captures the chain into a CUDA graph (cuda/graph.cu) and from then on replays it
with one launch per call.  The graph reads the pipeline's own RF buffer and writes its own
output buffer (kernel arguments are frozen at capture), so the RF is copied into that buffer
first (host RF as always; device RF by an asynchronous device copy) and a caller's `out=` is
filled by a copy.  Stage times still come from the captured CUDA events; NVTX ranges mark the
capture only.

Layouts:
  input   (n_frames, n_transmits, n_elements, n_samples)  int16 / float32 RF
  iq      (n_frames, n_transmits, n_elements, n_iq)       complex64, n_iq = n_samples after decimation
  image   (n_frames, *grid.shape)                          complex64 beamformed IQ
  output  (n_frames, *grid.shape)                          uint8 B-mode (or float32 dB)

Live sessions (usbeam.live) and the demo use this object; its contract is input_shape,
input_dtype, output_shape, output_dtype, __call__(frame, out=None) and timings.
"""
import threading
import time
import weakref

import numpy as np

from .. import _validate
from ..beamformer import Beamformer
from ..bmode import BModePlan
from ..geometry import as_sequence
from ..rf2iq import RF2IQPlan


class Pipeline:
    """RF to B-mode with plans and buffers built once.

    Parameters
    ----------
    probe, sequence, grid : the geometry (usbeam.LinearArray, transmits, usbeam.Grid).
    fs, fc, c, t0 : sampling and centre frequency (Hz), speed of sound (m/s), time of the
        first sample (s).
    n_samples : samples per channel in the RF input.
    n_frames : frames per call (the batch).
    rf_dtype : int16 or float32.
    bandwidth, filter, decimation, rf2iq_options : passed to usbeam.RF2IQPlan.
    f_number, window, interpolation, das_options : passed to usbeam.Beamformer.
    dynamic_range, normalize, bmode_output : passed to usbeam.BModePlan.
    strict : backend='cuda': refuse host (NumPy) RF or a host ``out=`` with a TypeError instead
        of copying them (passed to every plan too); ignored on the CPU, as by the plans.
    """

    STAGES = ("rf2iq", "das", "bmode")

    def __init__(self, probe, sequence, grid, *, fs, fc, c=1540.0, t0=0.0, n_samples, n_frames=1,
                 rf_dtype=np.int16, bandwidth=None, filter="butter", decimation=1, f_number=1.0,
                 window="rect", interpolation="linear", dynamic_range=60.0, normalize="global",
                 bmode_output="uint8", backend="cpu", rf2iq_options=None, das_options=None,
                 capture_graph=False, strict=False):
        self.sequence = as_sequence(sequence, probe)
        n_frames = _validate.integer("n_frames", n_frames, minimum=1)
        n_samples = _validate.integer("n_samples", n_samples, minimum=1)
        self.input_shape = (n_frames, len(self.sequence), probe.n_elements, n_samples)
        self.input_dtype = np.dtype(rf_dtype)
        self.strict = bool(strict)
        self.rf2iq = RF2IQPlan(self.input_shape, self.input_dtype, fs=fs, fc=fc, t0=t0,
                               bandwidth=bandwidth, filter=filter, decimation=decimation,
                               backend=backend, strict=self.strict, **(rf2iq_options or {}))
        self.beamformer = Beamformer(probe, self.sequence, grid, fs=self.rf2iq.fs_out, fc=fc, c=c, t0=t0,
                                     n_samples=self.rf2iq.n_out, f_number=f_number, window=window,
                                     interpolation=interpolation, dtype=np.complex64, bandwidth=bandwidth,
                                     n_frames=n_frames, backend=backend, strict=self.strict,
                                     **(das_options or {}))
        self.output_shape = (n_frames,) + tuple(grid.shape)
        _validate.check_allocation("pipeline buffers", self.rf2iq.out_shape, 8)
        _validate.check_allocation("pipeline image", self.output_shape, 8)
        self.bmode = BModePlan(self.output_shape, dynamic_range, output=bmode_output, normalize=normalize,
                               backend=backend, strict=self.strict)
        self.output_dtype = self.bmode.out_dtype
        self.backend = self.bmode.backend
        # held for a whole call: the stages share the iq/image buffers, so two calls must not
        # interleave (each plan's own lock covers one stage only); the plans' locks are taken
        # inside it, always in the same order, so it cannot deadlock with them
        self._call_lock = threading.Lock()
        self.capture_graph = bool(capture_graph)
        if self.capture_graph and self.backend != "cuda":
            raise ValueError("capture_graph: CUDA graphs need backend='cuda'")
        self._graph = None
        if self.backend == "cuda":
            from .. import device

            self.iq = device.empty(self.rf2iq.out_shape, np.complex64)
            self.image = device.empty(self.output_shape, np.complex64)
            self._device_rf = device.empty(self.input_shape, self.input_dtype)
            self._device_out = device.empty(self.output_shape, self.output_dtype)
        else:
            self.iq = np.empty(self.rf2iq.out_shape, np.complex64)
            self.image = np.empty(self.output_shape, np.complex64)
        self._timings = dict.fromkeys(self.STAGES, 0.0)

    @property
    def timings(self):
        """Seconds per stage of the last call: wall clock on the CPU, CUDA events on the GPU."""
        if self.backend != "cuda":
            return dict(self._timings)
        plans = {"rf2iq": self.rf2iq, "das": self.beamformer, "bmode": self.bmode}
        return {stage: (sum(plan.cuda.stage_times().values()) if plan.cuda is not None else 0.0)
                for stage, plan in plans.items()}

    def _plans(self):
        return (self.rf2iq, self.beamformer, self.bmode)

    def _adopt_faults(self):
        """backend='cuda': every stage's check_input reports through _check_rf (the beamformer's
        execution exists only after its first call, so this runs on every call).  A weak
        reference: the plans must not keep the pipeline alive."""
        for plan in self._plans():
            if plan.cuda is not None and plan.cuda.fault_report is None:
                plan.cuda.fault_report = _FaultReport(self)

    def _check_rf(self, earlier=False):
        """backend='cuda': ValueError naming rf if any stage read NaN or inf in the runs finished
        since the last check: the device flags it, the host reads the flags with no CUDA call
        (usbeam.device.CudaExecution.check_input).  The chain's only input is rf, so a fault in
        any stage (the beamformer, or B-mode when rf2iq and DAS carried it through) came from
        it; every stage's flag is taken, so one bad rf raises once, not again at the next call
        as "an earlier call's image".  On a fault (only then) the host waits for the last stage,
        whose kernels may still be reading the same bad data, and takes the flags again."""
        plans = [plan.cuda for plan in self._plans() if plan.cuda is not None]
        if not any([execution.take_input_faults() for execution in plans]):  # a list: take them all
            return
        from .. import _core, device

        _core.stream_synchronize(self.bmode.cuda.stream)  # error path only
        for execution in plans:
            execution.take_input_faults()
        raise device.non_finite_error("rf", earlier)

    def _chain_cuda(self, rf, out):
        self.rf2iq(rf, out=self.iq)
        self.beamformer(self.iq, out=self.image)
        return self.bmode(self.image, out=out)

    def _call_graph(self, rf, out):
        """capture_graph=True: RF into the pipeline's buffer, then one graph launch."""
        from .. import _core, device

        host_rf = device._in_host_memory(rf)
        self._refuse_host(rf, out)
        stream = self.rf2iq.cuda.stream  # the rf2iq plan's own stream carries the whole graph
        if host_rf:
            rf = _validate.ndarray("rf", rf)
            if rf.dtype != self.input_dtype or rf.shape != self.input_shape:
                raise (TypeError if rf.dtype != self.input_dtype else ValueError)(
                    f"rf must have dtype {self.input_dtype} and shape {self.input_shape} (got {rf.dtype}, {rf.shape})")
            self._device_rf.copy_from_host(np.ascontiguousarray(rf))
        else:
            d = device.asarray(rf, stream=stream, name="rf")
            if d.dtype != self.input_dtype or d.shape != self.input_shape:
                raise (TypeError if d.dtype != self.input_dtype else ValueError)(
                    f"rf must have dtype {self.input_dtype} and shape {self.input_shape} (got {d.dtype}, {d.shape})")
            _core.device_copy(self._device_rf.ptr, d.ptr, d.nbytes, stream)
            d._mark_used(stream, self.rf2iq)
        if self._graph is None:
            # run once eagerly (builds the lazily created plans), wait for every plan, then
            # put all of them on one stream and capture the chain there
            self._chain_cuda(self._device_rf, self._device_out)
            for plan in (self.rf2iq, self.beamformer, self.bmode):
                _core.stream_synchronize(plan.cuda.stream)
            # a bad first rf is reported as this call's rf (all stages' flags), and nothing is
            # left flagged to be met while the capture runs (no waiting allowed there)
            self._adopt_faults()
            self._check_rf()
            for plan in (self.beamformer, self.bmode):
                plan.cuda.set_stream(stream)
                # a plan's destroy synchronises the stream it runs on: the stream's owner must
                # outlive it, whatever order the pipeline's attributes are let go in
                plan.cuda.stream_owner = self.rf2iq
            # Every plan has finished: the chain's buffers now belong to the capture stream.  A
            # buffer still naming another plan's stream would make the capture wait on an event
            # recorded outside it, which breaks the capture's isolation.
            for buffer in (self._device_rf, self.iq, self.image, self._device_out):
                buffer._mark_used(stream, self.rf2iq)
            _core.graph_capture_begin(stream)
            try:
                self._chain_cuda(self._device_rf, self._device_out)
            except BaseException:
                _core.graph_capture_abort(stream)
                raise
            self._graph = _core.graph_capture_end(stream)
        _core.graph_launch(self._graph, stream)
        self._device_out._mark_used(stream, self.rf2iq)
        if out is None:
            return self._device_out.to_numpy() if host_rf else self._device_out
        if device._in_host_memory(out):
            _validate.out_array("out", out, self.output_shape, self.output_dtype)
            return self._device_out.to_numpy(out=out)
        d_out = device.asarray(out, stream=stream, name="out")
        if d_out.dtype != self.output_dtype or d_out.shape != self.output_shape or d_out.readonly:
            raise ValueError(f"out must be a writable {self.output_dtype} array of shape {self.output_shape}")
        _core.device_copy(d_out.ptr, self._device_out.ptr, d_out.nbytes, stream)
        d_out._mark_used(stream, self.rf2iq)
        return out

    def _refuse_host(self, rf, out):
        """strict=True: host RF or a host out= is a TypeError naming it, before anything runs."""
        from .. import device

        if not self.strict:
            return
        if device._in_host_memory(rf):
            raise device._host_refused("rf")
        if out is not None and device._in_host_memory(out):
            raise device._host_refused("out")

    def _call_cuda(self, rf, out):
        from .. import device

        if self.capture_graph:
            return self._call_graph(rf, out)
        self._refuse_host(rf, out)
        host_rf = device._in_host_memory(rf)
        if host_rf:
            rf = _validate.ndarray("rf", rf)
            if rf.dtype != self.input_dtype:
                raise TypeError(f"rf must have dtype {self.input_dtype} (got {rf.dtype})")
            if rf.shape != self.input_shape:
                raise ValueError(f"rf must have shape {self.input_shape} (got {rf.shape})")
            self._device_rf.copy_from_host(np.ascontiguousarray(rf))
            rf = self._device_rf
        host_out = out is not None and device._in_host_memory(out)
        if host_out:
            _validate.out_array("out", out, self.output_shape, self.output_dtype)
        self.rf2iq(rf, out=self.iq)
        self.beamformer(self.iq, out=self.image)
        if out is None or host_out:
            result = self.bmode(self.image, out=self._device_out)
            if host_out:
                return result.to_numpy(out=out)
            return result.to_numpy() if host_rf else result
        return self.bmode(self.image, out=out)

    def __call__(self, rf, out=None):
        """Run RF -> IQ -> DAS -> B-mode on `rf` (input_shape, input_dtype); returns the B-mode.
        Safe to call from several threads: calls run one at a time."""
        with self._call_lock:
            try:
                return self._call(rf, out)
            finally:
                if self.backend == "cuda":
                    self._adopt_faults()

    def _call(self, rf, out):
        if self.backend == "cuda":
            self._check_rf(earlier=True)  # runs finished since the last check
            result = self._call_cuda(rf, out)
            if isinstance(result, np.ndarray):  # copied to the host: the chain has finished
                self._check_rf()
            return result
        rf = _validate.ndarray("rf", rf)
        if rf.dtype != self.input_dtype:
            raise TypeError(f"rf must have dtype {self.input_dtype} (got {rf.dtype})")
        if rf.shape != self.input_shape:
            raise ValueError(f"rf must have shape {self.input_shape} (got {rf.shape})")
        if out is None:
            out = np.empty(self.output_shape, self.output_dtype)
        else:
            _validate.out_array("out", out, self.output_shape, self.output_dtype)
            _validate.no_overlap("out", out, "rf", rf)
        t = time.perf_counter()
        self.rf2iq(rf, out=self.iq)
        t1 = time.perf_counter()
        self.beamformer(self.iq, out=self.image)
        t2 = time.perf_counter()
        self.bmode(self.image, out=out)
        t3 = time.perf_counter()
        self._timings = {"rf2iq": t1 - t, "das": t2 - t1, "bmode": t3 - t2}
        return out


class _FaultReport:
    """A stage's CudaExecution.fault_report: the pipeline's _check_rf, through a weak reference
    (the plans must not keep the pipeline alive); a stage outliving its pipeline reports its own
    flag, still as rf."""

    def __init__(self, pipeline):
        self._pipeline = weakref.ref(pipeline)

    def __call__(self, execution, earlier):
        pipeline = self._pipeline()
        if pipeline is not None:
            pipeline._check_rf(earlier=earlier)
        elif execution.take_input_faults():
            from .. import device

            raise device.non_finite_error("rf", earlier)
