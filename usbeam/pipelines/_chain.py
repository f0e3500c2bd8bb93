"""What the pipelines share: a chain of plans over buffers allocated once, fed with RF.

``usbeam.Pipeline`` (bmode.py) and ``usbeam.DopplerPipeline`` (doppler.py) differ in their
stages; everything that does not depend on the stages is here, written once:

- **the call lock**: the stages share the chain's intermediate buffers, so two calls must not
  interleave (each plan's own lock covers one stage only); the plans' locks are taken inside
  it, always in the same order, so it cannot deadlock with them;
- **RF ingest**: the chain's input is RF, ``(n_frames, n_transmits, n_elements, n_samples)``
  int16 or float32.  Host RF is checked as the CPU backend checks it and, with
  ``backend='cuda'``, copied into the chain's own device buffer (refused when ``strict``).
  Device RF (any DLPack / CUDA-array-interface producer) is read in place, or, for a graph,
  copied into that buffer on the graph's stream;
- **timings**: seconds per stage of the last call, wall clock on the CPU, the sum of the
  stage's plans' CUDA events on the GPU (reading them waits for the call to finish);
- **the fault report**: a CUDA kernel that reads NaN or inf flags it in mapped host memory
  (usbeam.device.CudaExecution.check_input).  The chain's only input is rf, so a flag in any
  stage came from it: the chain takes every stage's flag and reports rf once;
- **graph capture and replay** (cuda/runtime/graph.cu): the first call runs the chain eagerly, puts
  every plan on the first plan's stream, captures the chain there and from then on replays
  it with one launch per call.  Kernel arguments are frozen at capture, so the graph always
  reads the chain's RF buffer and writes its own output buffers.

A subclass builds its plans (``self.rf2iq`` first: its stream carries the graph) and calls
``_init_chain``; it provides ``_plans()`` (chain order), ``_stage_plans()`` ({stage: plans}
for the timings), ``_run_stages_cuda()`` (queue every stage from the RF buffer into the
chain's buffers) and ``_buffers()`` (every device buffer of the chain).
"""
import gc
import math
import threading
import weakref

import numpy as np

from .. import _core, _validate, device


class Chain:
    """Base of usbeam.Pipeline and usbeam.DopplerPipeline (see the module docstring)."""

    STAGES = ()

    def _init_chain(self, rf_shape, rf_dtype, *, capture_graph):
        """After the plans exist (``self.backend``, ``self.strict`` and ``self.rf2iq`` set)."""
        self._rf_shape, self._rf_dtype = tuple(rf_shape), np.dtype(rf_dtype)
        self._call_lock = threading.Lock()
        self._in_call = False  # set while _locked_call runs the stages (see _FaultReport)
        self._timings = dict.fromkeys(self.STAGES, 0.0)
        self.capture_graph = bool(capture_graph)
        if self.capture_graph and self.backend != "cuda":
            raise ValueError("capture_graph: CUDA graphs need backend='cuda'")
        self._graph = None
        self._device_rf = device.empty(self._rf_shape, self._rf_dtype) if self.backend == "cuda" else None

    # ---- timings ------------------------------------------------------------------------

    @property
    def timings(self):
        """Seconds per stage of the last call: wall clock on the CPU, CUDA events on the GPU."""
        if self.backend != "cuda":
            return dict(self._timings)
        return {stage: sum((sum(plan.cuda.stage_times().values()) for plan in plans
                            if plan is not None and plan.cuda is not None), 0.0)
                for stage, plans in self._stage_plans().items()}

    # ---- calls --------------------------------------------------------------------------

    def _locked_call(self, call, *args):
        """``call(*args)`` holding the call lock; on CUDA the stages report faults through the
        chain afterwards (see _adopt_faults)."""
        with self._call_lock:
            self._in_call = True
            try:
                return call(*args)
            finally:
                self._in_call = False
                if self.backend == "cuda":
                    self._adopt_faults()

    def _rf_leading(self, shape):
        """The leading axes of rf by the shape rule (README, "Shapes"): ``(*leading,
        n_transmits, n_elements, n_samples)``, the transmit axis optional with one transmit
        (``load_must``'s ``(n_frames, n_elements, n_samples)``); the leading axes must hold the
        chain's n_frames frames.  The chain's output keeps them: ``(*leading, *grid.shape)``."""
        n_frames, n_tx, n_el, n_s = self._rf_shape
        leading, _ = _validate.leading_axes("rf", shape, n_tx, n_el, n_s)
        if math.prod(leading) != n_frames:
            raise ValueError(f"rf has {math.prod(leading)} frames (shape {tuple(shape)}) but the pipeline was "
                             f"built for n_frames={n_frames} (rf shape {self._rf_shape})")
        return leading

    def _leading_of(self, rf):
        shape = getattr(rf, "shape", None)
        if shape is None:  # a device array that speaks only DLPack / the CUDA array interface
            shape = device.asarray(rf, stream=-1, name="rf").shape
        return self._rf_leading(tuple(shape))

    def _host_rf(self, rf):
        """rf as the CPU backend takes it: an ndarray of the chain's dtype, in the chain's
        shape (a reshaped view of a layout the shape rule accepts)."""
        rf = _validate.ndarray("rf", rf)
        self._check_rf_layout(rf)
        return rf.reshape(self._rf_shape) if rf.shape != self._rf_shape else rf

    def _check_rf_layout(self, rf):
        if rf.dtype != self._rf_dtype:
            raise TypeError(f"rf must have dtype {self._rf_dtype} (got {rf.dtype})")
        if tuple(rf.shape) != self._rf_shape:
            self._rf_leading(tuple(rf.shape))

    def _as_chain_shape(self, rf):
        """Device rf in the chain's shape: a reshaped view when its layout differs."""
        if tuple(rf.shape) == self._rf_shape:
            return rf
        self._check_rf_layout(rf)
        return rf.reshape(self._rf_shape)

    # ---- Jupyter --------------------------------------------------------------------------

    def _describe(self):
        """{name: value} shown by repr and _repr_html_ (the subclass adds its own)."""
        return {}

    def __repr__(self):
        fields = ", ".join(f"{k}={v}" for k, v in self._describe().items())
        return f"{type(self).__name__}({fields})"

    def _repr_html_(self):
        from .._repr import html_table

        rows = dict(self._describe())
        timings = self.timings if self.backend != "cuda" else None
        if timings and any(timings.values()):
            rows["last call"] = ", ".join(f"{k} {v * 1e3:.2f} ms" for k, v in timings.items())
        return html_table(type(self).__name__, rows)

    def _rf_on_device(self, rf, *, in_place):
        """backend='cuda': the RF the stages read, and whether it came from the host.

        Host RF (a TypeError when strict) is checked and copied into the chain's buffer (the
        copy is complete on return).  Device RF is read in place when ``in_place``; otherwise
        (a graph) it is copied into the buffer on the first plan's stream, asynchronously."""
        if device.in_host_memory(rf):
            if self.strict:
                raise device.host_refused("rf")
            self._device_rf.copy_from_host(np.ascontiguousarray(self._host_rf(rf)))
            return self._device_rf, True
        if in_place:
            if hasattr(rf, "shape") and hasattr(rf, "reshape"):
                return self._as_chain_shape(rf), False
            return self._as_chain_shape(device.asarray(rf, stream=self.rf2iq.cuda.stream, name="rf")), False
        stream = self.rf2iq.cuda.stream
        given = device.asarray(rf, stream=stream, name="rf")
        self._check_rf_layout(given)
        _core.device_copy(self._device_rf.ptr, given.ptr, given.nbytes, stream)
        device.mark_used(given, stream, self.rf2iq)
        return self._device_rf, False

    # ---- fault report -------------------------------------------------------------------

    def _executions(self):
        return [plan.cuda for plan in self._plans() if plan is not None and plan.cuda is not None]

    def _adopt_faults(self):
        """backend='cuda': every stage's check_input reports through _check_rf.  Runs after
        every call: a plan may create its CUDA execution at its first call (the beamformer)."""
        for execution in self._executions():
            if execution.fault_report is None:
                execution.fault_report = _FaultReport(self)

    def _check_rf(self, earlier=False):
        """backend='cuda': ValueError naming rf if any stage read NaN or inf in the runs
        finished since the last check (the device flags it, the host reads the flags with no
        CUDA call).  Every stage's flag is taken, so one bad rf raises once, not again at the
        next call as "an earlier call's <intermediate>".  On a fault (only then) the host
        waits for every stage, whose kernels may still be reading the same bad data, and
        takes the flags again."""
        executions = self._executions()
        if not any([execution.take_input_faults() for execution in executions]):  # a list: take them all
            return
        for execution in executions:  # error path only
            _core.stream_synchronize(execution.stream)
        for execution in executions:
            execution.take_input_faults()
        raise device.non_finite_error("rf", earlier)

    # ---- graph --------------------------------------------------------------------------

    def _replay(self, rf):
        """capture_graph=True: rf into the chain's buffer, then one graph launch (the graph is
        captured at the first call).  Returns whether rf came from the host."""
        rf_buffer, host_rf = self._rf_on_device(rf, in_place=False)
        stream = self.rf2iq.cuda.stream  # the first plan's own stream carries the whole graph
        if self._graph is None:
            self._capture(stream)
        _core.graph_launch(self._graph, stream)
        # Every buffer the graph reads or writes, the RF buffer too: the next host copy into
        # it runs on the stream the buffer names, and must wait for this launch to finish
        # reading it (review of the CUDA backend, A4); and a buffer let go must be freed after
        # the launch, which no event recorded inside the capture says (memory.cu)
        buffers = self._buffers()
        for buffer in (buffers if any(b is rf_buffer for b in buffers) else (rf_buffer, *buffers)):
            device.mark_used(buffer, stream, self.rf2iq)
        return host_rf

    def _capture(self, stream):
        # run once eagerly (it builds the plans created at their first call), wait for every
        # plan, then put all of them on one stream and capture the chain there
        self._run_stages_cuda()
        executions = self._executions()
        for execution in executions:
            _core.stream_synchronize(execution.stream)
        # a bad first rf is reported as this call's rf, and nothing is left flagged to be met
        # while the capture runs (no waiting allowed there)
        self._adopt_faults()
        self._check_rf()
        for execution in executions[1:]:
            execution.set_stream(stream)
            # a plan's destroy synchronises the stream it runs on: the stream's owner must
            # outlive it, whatever order the chain's attributes are let go in
            execution.stream_owner = self.rf2iq
        # Every plan has finished: the chain's buffers now belong to the capture stream.  A
        # buffer still naming another plan's stream would make the capture wait on an event
        # recorded outside it, which breaks the capture's isolation.
        for buffer in self._buffers():
            device.mark_used(buffer, stream, self.rf2iq)
        # A finalizer run by the garbage collector on this thread inside the capture window
        # (a plan's destroy, a DeviceArray's free) makes capture-unsafe CUDA calls, which
        # invalidate the capture: collect now and hold the collector off until it ends
        # (review of the CUDA backend, A7).  A collector the caller had disabled stays so.
        gc.collect()
        collecting = gc.isenabled()
        gc.disable()
        try:
            _core.graph_capture_begin(stream)
            try:
                self._run_stages_cuda()
            except BaseException:
                _core.graph_capture_abort(stream)
                raise
            # the graph holds the plans: their stage events are its nodes (py_cuda.c)
            self._graph = _core.graph_capture_end(stream, tuple(self._plans()))
        finally:
            if collecting:
                gc.enable()


class _FaultReport:
    """A stage's CudaExecution.fault_report: the chain's _check_rf, through a weak reference
    (the plans must not keep the chain alive); a stage outliving its chain reports its own
    flag, still as rf."""

    def __init__(self, chain):
        self._chain = weakref.ref(chain)

    def __call__(self, execution, earlier):
        chain = self._chain()
        if chain is not None:
            # Inside a chain call a stage's own "earlier calls" check is not one: the chain
            # checked its earlier calls as it began, and a flag set since then by a stage
            # upstream belongs to this call's rf (on a GPU the beamformer has often flagged it
            # before the host reaches B-mode's call).  The chain's check after the call reports it.
            if earlier and chain._in_call:
                return
            chain._check_rf(earlier=earlier)
        elif execution.take_input_faults():
            raise device.non_finite_error("rf", earlier)
