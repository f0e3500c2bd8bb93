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
one stream, captures the chain into a CUDA graph (cuda/runtime/graph.cu) and from then on replays it
with one launch per call.  The graph reads the pipeline's own RF buffer and writes its own
output buffer (kernel arguments are frozen at capture), so the RF is copied into that buffer
first (host RF as always; device RF by an asynchronous device copy) and a caller's `out=` is
filled by a copy.  Stage times still come from the captured CUDA events; NVTX ranges mark the
capture only.

Layouts (the shape rule of README "Shapes": leading axes kept as given):
  input   (n_frames, n_transmits, n_elements, n_samples)  int16 / float32 RF; any layout of the
          rule whose leading axes hold n_frames frames, e.g. (n_frames, n_elements, n_samples)
          for one transmit (what load_must returns); the output then has those leading axes
  iq      (n_frames, n_transmits, n_elements, n_iq)       complex64, n_iq = n_samples after decimation
  image   (n_frames, *grid.shape)                          complex64 beamformed IQ
  output  (n_frames, *grid.shape)                          uint8 B-mode (or float32 dB)

Live sessions (usbeam.live) and the demo use this object; its contract is input_shape,
input_dtype, output_shape, output_dtype, __call__(frame, out=None) and timings.  The call
lock, RF ingest, timings, fault report and graph capture are the chain's (_chain.py).
"""
import time

import numpy as np

from .. import _core, _validate, device
from ..beamformer import Beamformer, as_recording, recording_parameters
from ..bmode import BModePlan
from ..geometry import as_sequence
from ..rf2iq import RF2IQPlan
from ._chain import Chain


class Pipeline(Chain):
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
        _validate.frequency("fs", fs)
        _validate.frequency("fc", fc)
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
        self._init_chain(self.input_shape, self.input_dtype, capture_graph=capture_graph)
        empty = device.empty if self.backend == "cuda" else np.empty
        self.iq = empty(self.rf2iq.out_shape, np.complex64)
        self.image = empty(self.output_shape, np.complex64)
        self._device_out = device.empty(self.output_shape, self.output_dtype) if self.backend == "cuda" else None

    @classmethod
    def from_vantage(cls, workspace, *, grid=None, pdata=1, buffer=1, **overrides):
        """The pipeline of a Verasonics Vantage workspace (usbeam.io.VantageWorkspace or the path
        of a saved one): probe, transmits, fs, t0 (lens included) and the grid (PData(pdata))
        from the workspace; its input is one channel-mapped RcvData frame (1, n_acquisitions,
        n_elements, rows) int16.  BS sample modes give a
        usbeam.pipelines.vantage.QuadraturePairPipeline.  Other keywords: as Pipeline
        (f_number, window, dynamic_range, normalize, backend, ...).  See
        usbeam/io/vantage_recording.py for the mapping."""
        from ..io.vantage_recording import pipeline_from_vantage
        return pipeline_from_vantage(workspace, grid=grid, pdata=pdata, buffer=buffer, **overrides)

    @classmethod
    def from_recording(cls, recording, grid, **overrides):
        """The chain for ``recording``'s RF on ``grid``, every acquisition parameter taken from
        the recording: probe, sequence, fs, fc, c, t0, bandwidth (rf2iq's low-pass and the
        automatic f-number), n_samples, n_frames and rf_dtype; ``f_number='auto'`` when the
        element width is known (MUST's choice).  ``recording``: a ``usbeam.io.Recording`` or an
        object with ``to_recording()``.  ``overrides``: any constructor keyword
        (``interpolation='nearest'``, ``dynamic_range=30``, ``n_frames=1`` for a live chain...).
        ``Pipeline.from_recording(rec, grid)(rec.data)`` is MUST's B-mode of the recording."""
        rec = as_recording(recording)
        if rec.is_iq:
            raise ValueError("recording holds IQ: Pipeline takes RF (beamform IQ with Beamformer.from_recording)")
        kwargs = recording_parameters(rec)
        n_tx = kwargs.pop("n_transmits")
        leading, _ = _validate.leading_axes("recording.data", np.shape(rec.data), n_tx, rec.probe.n_elements,
                                            rec.n_samples)
        kwargs["n_frames"] = max(1, int(np.prod(leading)))
        kwargs["rf_dtype"] = np.int16 if np.dtype(rec.data.dtype).newbyteorder("=") == np.int16 else np.float32
        if getattr(rec.probe, "width", None) is not None:
            kwargs["f_number"] = "auto"
        kwargs.update(overrides)
        return cls(rec.probe, rec.sequence, grid, **kwargs)

    def _describe(self):
        bf = self.beamformer
        return {"input": f"{self.input_dtype.name}{self.input_shape}",
                "output": f"{self.output_dtype.name}{self.output_shape}",
                "fs": f"{self.rf2iq.fs / 1e6:.4g} MHz", "fc": f"{bf.fc / 1e6:.4g} MHz", "c": f"{bf.c:g} m/s",
                "t0": f"{bf.t0 * 1e6:.4g} us", "f_number": f"{bf.f_number:.4g}",
                "interpolation": bf.interpolation, "dynamic_range": f"{self.bmode.dynamic_range:g} dB",
                "backend": self.backend}

    # ---- the chain's hooks (_chain.py) --------------------------------------------------

    def _plans(self):
        return (self.rf2iq, self.beamformer, self.bmode)

    def _stage_plans(self):
        return {"rf2iq": (self.rf2iq,), "das": (self.beamformer,), "bmode": (self.bmode,)}

    def _run_stages_cuda(self):
        self._stages_cuda(self._device_rf, self._device_out)

    def _buffers(self):
        return (self._device_rf, self.iq, self.image, self._device_out)

    # ---- calls --------------------------------------------------------------------------

    def __call__(self, rf, out=None):
        """Run RF -> IQ -> DAS -> B-mode on `rf` (input_dtype; input_shape or another layout of
        the shape rule holding n_frames frames); returns the B-mode ``(*leading, *grid.shape)``,
        the leading axes of rf as given.  Safe to call from several threads: calls run one at a
        time."""
        leading = self._leading_of(rf)
        shape = leading + tuple(self.beamformer.grid.shape)
        if shape == self.output_shape:
            return self._locked_call(self._call, rf, out)
        if out is not None:  # the caller's out in the caller's layout, written through a view
            if isinstance(out, np.ndarray):
                _validate.out_array("out", out, shape, self.output_dtype)
            elif tuple(getattr(out, "shape", ())) != shape:
                raise ValueError(f"out must have shape {shape} (got {getattr(out, 'shape', None)})")
            self._locked_call(self._call, rf, out.reshape(self.output_shape))
            return out
        return self._locked_call(self._call, rf, None).reshape(shape)

    def _call(self, rf, out):
        if self.backend == "cuda":
            self._check_rf(earlier=True)  # runs finished since the last check
            result = self._call_cuda(rf, out)
            if isinstance(result, np.ndarray):  # copied to the host: the chain has finished
                self._check_rf()
            return result
        rf = self._host_rf(rf)
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

    def _stages_cuda(self, rf, out):
        self.rf2iq(rf, out=self.iq)
        self.beamformer(self.iq, out=self.image)
        return self.bmode(self.image, out=out)

    def _call_cuda(self, rf, out):
        if self.strict:  # host rf or a host out= is a TypeError naming it, before anything runs
            for name, array in (("rf", rf), ("out", out)):
                if array is not None and device.in_host_memory(array):
                    raise device.host_refused(name)
        if self.capture_graph:
            return self._call_graph(rf, out)
        rf, host_rf = self._rf_on_device(rf, in_place=True)
        host_out = out is not None and device.in_host_memory(out)
        if host_out:
            _validate.out_array("out", out, self.output_shape, self.output_dtype)
        if out is None or host_out:
            result = self._stages_cuda(rf, self._device_out)
            if host_out:
                return result.to_numpy(out=out)
            return result.to_numpy() if host_rf else result
        return self._stages_cuda(rf, out)

    def _call_graph(self, rf, out):
        """capture_graph=True: one graph launch into the pipeline's output buffer (_chain.py),
        then a caller's out= filled by a copy."""
        host_rf = self._replay(rf)
        if out is None:
            return self._device_out.to_numpy() if host_rf else self._device_out
        if device.in_host_memory(out):
            _validate.out_array("out", out, self.output_shape, self.output_dtype)
            return self._device_out.to_numpy(out=out)
        stream = self.rf2iq.cuda.stream
        d_out = device.asarray(out, stream=stream, name="out")
        if d_out.dtype != self.output_dtype or d_out.shape != self.output_shape or d_out.readonly:
            raise ValueError(f"out must be a writable {self.output_dtype} array of shape {self.output_shape}")
        _core.device_copy(d_out.ptr, self._device_out.ptr, d_out.nbytes, stream)
        device.mark_used(d_out, stream, self.rf2iq)
        return out
