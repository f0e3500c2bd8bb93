"""In-process live session: frames pushed from any thread, images back in order.

CPU backend (threads instead of streams):

  push() thread(s)                    compute thread                  consumers
  validate, claim a slot,    READY    oldest frame (by id) ->         get(id) / latest()
  copy + channel map into  -------->  pipeline(slot, out=ring[j])  -> callback(result)
  the slot (GIL released)             slot FREE, ring[j] holds id

Input ring: ``slots`` preallocated page-aligned buffers, each FREE -> WRITING -> READY ->
COMPUTING -> FREE.  Invariants (the ones the GPU design keeps with events): a slot is
never overwritten while COMPUTING (the producer only claims FREE slots, or with
``drop_oldest`` the oldest READY one), and never read while WRITING (the compute thread
takes a slot only once it is READY, and processes ids in order, waiting for an older
frame still being written).  Output ring: ``results`` buffers per pipeline generation;
a reader holding a zero-copy view leases its buffer, which is then not reused.

Accounting at rest: pushed == processed + dropped + failed (frames discarded by
stop(drain=False) or by a push that finished its copy after stop() count as dropped).

Threads: the worker threads (compute; CUDA: upload) hold the session weakly between frames
(_threads.run_weakly), so an unreferenced running session is collected; a worker's state is
ended by its own loop, so stop() from a callback only signals and start() joins the old worker.
Under overload a push yields to a woken worker (fair hand-off, see push()).
"""
import collections
import threading
import time
import weakref

import numpy as np

from .. import _core, _validate
from .._core import UsbeamError
from .channel_map import ChannelMap
from .pipeline import as_pipeline, describe
from ._threads import EXIT, run_weakly
from .ring import (COMPUTING, FREE, READY, WRITING, FrameDropped, FrameFailed, Result,  # noqa: F401
                   SessionStopped, _aligned_empty, _Generation, _Slot)

_POLICIES = ("drop_oldest", "block")
_HANDOFF_S = 0.02     # longest a displacing push waits for the worker's turn (see push)


# backend name -> Session class: the base registers 'cpu' below, a backend module registers
# its subclass by naming it (class CudaSession(Session, backend="cuda")), so this module
# never imports a backend
_BACKENDS = {}


class _BackendLookup(type):
    """Session's metaclass: ``Session(pipeline, backend=name)`` builds the session class
    registered for ``name``; a subclass called by its own name builds itself."""

    def __call__(cls, *args, **kwargs):
        if isinstance(kwargs.get("backend"), str):  # string options are case-insensitive
            kwargs["backend"] = kwargs["backend"].lower()
        if cls is Session:
            cls = _BACKENDS.get(kwargs.get("backend", "cpu"), cls)
        return super().__call__(*args, **kwargs)


def _without_ones(shape):
    """Shape without any axis of 1: two shapes equal this way hold the same elements in the
    same C order, so one is a reshaped view of the other (the shape rule of README "Shapes":
    a frame (n_elements, n_samples) from load_must fills a slot (1, 1, n_elements, n_samples))."""
    return tuple(s for s in shape if s != 1)


def _strip_ones(shape):
    """Shape without leading 1s: a map to (acq, el, samples) feeds a pipeline taking a batch
    of one frame, (1, acq, el, samples), through a reshaped view of the same slot."""
    shape = tuple(shape)
    while len(shape) > 1 and shape[0] == 1:
        shape = shape[1:]
    return shape


class Session(metaclass=_BackendLookup):
    """A live session running ``pipeline`` on frames pushed from any thread.

    Parameters
    ----------
    pipeline : pipeline object (see usbeam.live.pipeline) or callable with explicit shapes
    slots : int >= 2
        Input ring size (3: one being written, one computed, one waiting).
    policy : 'drop_oldest' or 'block'
        With no free slot, 'drop_oldest' displaces the oldest frame not yet started and
        'block' makes push() wait.
    channel_map : ChannelMap, optional
        Raw frames (n_rows, n_channels) are mapped while copied; the pipeline's
        input_shape must be the map's output_shape, possibly with leading 1s (a batch of
        one frame, as usbeam.Pipeline(n_frames=1) takes).
    results : int >= 2
        Output ring size: get(frame_id) finds the last ``results`` frames.
    callback : callable(Result), optional
        Called on the compute thread with a zero-copy Result valid during the call.
    on_drop : callable(frame_id, meta), optional;  on_error : callable(frame_id, meta, exc)
    backend : 'cpu' or 'cuda' (usbeam.live.cuda_session.CudaSession: pinned slots, an upload
        stream and a compute stream; the pipeline takes and writes usbeam DeviceArrays)
    history : int
        Recent frames whose latency, drop and failure records are kept (bounded memory).
    compute_threads : int, optional
        CPU threads of the pipeline's work on the compute thread (CPU backend).  Default: all
        cores but one, which is left to the threads that copy frames in: an OpenMP team that
        shares a core with them waits for its slowest thread at every barrier, the latency
        jitter a live session must not have.  Measured on 2 cores (benchmarks/RESULTS.md, live
        sessions, 2026-11-21): no drops at 50 and 80 % load in 9 of 9 cases (2 of 6 dropped
        frames at 80 % with the full team), p99/p50 at 80 % load 1.2-2.9, median 1.5 (full
        team: 1.4-2.9, median 2.1).
    """

    # what the backends differ in (cuda_session.CudaSession overrides them)
    _BACKEND = "cpu"
    _TAKE_STATE = READY            # the state in which the compute thread takes a slot
    _DISPLACEABLE = (READY,)       # states drop_oldest may displace (not started yet)

    def __init_subclass__(cls, backend=None, **kwargs):
        """``class X(Session, backend=name)`` registers X as the session of ``backend=name``."""
        super().__init_subclass__(**kwargs)
        if backend is not None:
            cls._BACKEND = backend
            _BACKENDS[backend] = cls

    def __init__(self, pipeline, slots=3, policy="drop_oldest", *, channel_map=None, input_shape=None,
                 input_dtype=None, output_shape=None, output_dtype=None, results=8, callback=None,
                 on_drop=None, on_error=None, backend="cpu", history=4096, start=True, compute_threads=None):
        _validate.choice("backend", backend, tuple(_BACKENDS))
        cores = _core.build_info()["cpu_threads"]
        self.compute_threads = (max(1, cores - 1) if compute_threads is None
                                else _validate.integer("compute_threads", compute_threads, minimum=1, maximum=4096))
        if backend != self._BACKEND:
            raise ValueError(f"backend={backend!r}: this is a {self._BACKEND} session")
        self.backend = backend
        self.policy = _validate.choice("policy", policy, _POLICIES)
        self.n_slots = _validate.integer("slots", slots, minimum=2, maximum=64)
        self.n_results = _validate.integer("results", results, minimum=2, maximum=1024)
        for name, fn in (("callback", callback), ("on_drop", on_drop), ("on_error", on_error)):
            if fn is not None and not callable(fn):
                raise TypeError(f"{name} must be callable (got {type(fn).__name__})")
        self._callback, self._on_drop, self._on_error = callback, on_drop, on_error
        pipeline = self._check_pipeline(as_pipeline(pipeline, input_shape, input_dtype, output_shape, output_dtype))
        self._check_map(pipeline, channel_map)
        self._slot_shape, self._slot_dtype = describe(pipeline)[:2]
        _validate.check_allocation("slots", (self.n_slots,) + self._slot_shape, self._slot_dtype.itemsize)
        self._slot_nbytes = int(np.prod(self._slot_shape)) * self._slot_dtype.itemsize
        self._prepare_backend()
        gen = _Generation(1, pipeline, channel_map, self._output_ring_size(), self._allocate_output)
        self._generation = gen
        self._slots = [_Slot(i, gen.input_shape, gen.input_dtype, self._allocate_slot)
                       for i in range(self.n_slots)]

        self._lock = threading.Lock()
        self._slot_freed = threading.Condition(self._lock)
        self._work = threading.Condition(self._lock)
        self._results_cv = threading.Condition(self._lock)
        self._handed = threading.Condition(self._lock)   # a woken worker had its turn (push)
        self._handoff = False        # a push made a frame READY for a waiting worker
        self._taker_waiting = False  # the worker taking READY slots is waiting for one
        self._thread = None
        self._running = False
        self._stopping = False
        self._drain = True
        self._writers = 0
        self._delivering = 0     # callbacks running
        self._next_id = 1
        self._done = collections.OrderedDict()  # frame_id -> (generation, entry), processing order
        self._dropped_ids = collections.OrderedDict()  # recent dropped ids (bounded)
        self._failed_ids = collections.OrderedDict()   # recent failures: id -> message
        self._latest_id = 0
        self._write_counter = 0
        self._counts = dict(pushed=0, processed=0, dropped=0, failed=0, rejected=0, callback_errors=0)
        self._history = _validate.integer("history", history, minimum=16)
        self._latencies = collections.deque(maxlen=self._history)
        self._stage_sums = collections.defaultdict(float)
        self._stage_counts = collections.defaultdict(int)
        self._copy_bytes = 0
        self._copy_seconds = 0.0    # the copies themselves (C timing with a channel map)
        self._push_seconds = 0.0    # wall time of the copy step in push(), GIL waits included
        self.last_callback_error = None
        if start:
            self.start()

    # ---- backend hooks (CPU: threads and page-aligned host buffers) ---------------------

    _allocate_slot = staticmethod(_aligned_empty)
    _allocate_output = staticmethod(_aligned_empty)

    def _prepare_backend(self):
        pass

    def _check_pipeline(self, pipeline):
        return pipeline

    def _fill_slot(self, slot, frame, gen):
        """Copy (and map) frame into the slot; the copy's own seconds, or None (then the
        caller's wall time is used).  Runs without the session lock."""
        if gen.channel_map is not None:
            return _core.live_gather(gen.channel_map._plan, frame, slot.buffer.reshape(gen.channel_map.output_shape))
        np.copyto(slot.buffer, frame, casting="no")
        return None

    def _compute(self, slot, gen, entry):
        """Run the pipeline on the slot into entry.array; extra stage seconds or None."""
        gen.pipeline(slot.buffer, out=entry.array)
        return None

    def _result_view(self, entry):
        """A read-only zero-copy view of an output buffer."""
        view = entry.array.view()
        view.flags.writeable = False
        return view

    def _has_work_locked(self, slot):
        """While draining at stop: whether the compute thread still has frames to wait for."""
        return slot is not None

    def _output_ring_size(self):
        """Output buffers per generation: ``results``, plus one for each frame beyond the first
        that the compute thread may hold unfinished (CUDA: two in flight), so that get() finds
        the last ``results`` frames while the next ones are computed, as with one."""
        return self.n_results

    # ---- configuration ---------------------------------------------------------------

    @staticmethod
    def _check_map(pipeline, channel_map):
        if channel_map is None:
            return
        if not isinstance(channel_map, ChannelMap):
            raise TypeError(f"channel_map must be a usbeam.live.ChannelMap (got {type(channel_map).__name__})")
        in_shape, in_dtype, _, _ = describe(pipeline)
        if _strip_ones(channel_map.output_shape) != _strip_ones(in_shape) or channel_map.dtype != in_dtype:
            raise ValueError(f"channel_map maps to {channel_map.dtype} {channel_map.output_shape} but the "
                             f"pipeline's input is {in_dtype} {in_shape}")

    @property
    def pipeline(self):
        return self._generation.pipeline

    @property
    def channel_map(self):
        return self._generation.channel_map

    @property
    def frame_shape(self):
        """Shape a pushed frame must have (raw shape with a channel map)."""
        gen = self._generation
        return gen.channel_map.raw_shape if gen.channel_map is not None else gen.input_shape

    @property
    def running(self):
        """True from start() until stop() (even while a compute thread stopped from a
        callback still finishes its frames)."""
        return self._running and not self._stopping

    def update(self, pipeline, channel_map=None, **shapes):
        """Swap in a new pipeline (and channel map) between frames, without stopping.

        The new generation (pipeline, map, output ring) is built aside, then swapped in
        atomically: frames pushed before this call finish with the old pipeline, frames
        pushed after it use the new one.  The mapped input shape and dtype must stay the
        same (the input slots are kept); output shape and dtype may change.  Returns the
        new generation number.
        """
        pipeline = self._check_pipeline(as_pipeline(pipeline, **shapes))
        self._check_map(pipeline, channel_map)
        in_shape, in_dtype, _, _ = describe(pipeline)
        if in_shape != self._slot_shape or in_dtype != self._slot_dtype:
            raise ValueError(f"update: the new pipeline's input {in_dtype} {in_shape} differs from the "
                             f"session's slots {self._slot_dtype} {self._slot_shape}; start a new Session")
        new = _Generation(self._generation.number + 1, pipeline, channel_map, self._output_ring_size(),
                          self._allocate_output)
        with self._lock:
            new.number = self._generation.number + 1
            self._generation = new
        return new.number

    # ---- lifecycle ---------------------------------------------------------------------

    def start(self):
        """Start (or restart after stop) the compute thread.  A compute thread still
        finishing (stop() was called from a callback, on that thread) is joined first;
        start() on the compute thread itself while it stops raises UsbeamError."""
        with self._lock:
            if self._running and not self._stopping:
                return self
            old = self._thread
        if old is not None:
            if old is threading.current_thread():
                raise UsbeamError("start: called on the session's compute thread (from a callback) while the "
                                  "session stops; restart it from another thread")
            old.join(10.0)
            if old.is_alive():
                raise UsbeamError("start: the previous compute thread did not finish within 10 s "
                                  "(a pipeline call or a callback is still running)")
        with self._lock:
            if self._running and not self._stopping:
                return self                         # another thread's start() won
            if self._thread is not None and self._thread.is_alive():
                raise UsbeamError("start: the session is being started or stopped by another thread")
            self._wait_for_writers_locked(5.0)
            for slot in self._slots:
                if slot.state != FREE:              # pushed but never computed: a drop, so that
                    self._record_drop_locked(slot.frame_id)   # pushed == processed + dropped + failed
                slot.state, slot.meta, slot.generation = FREE, None, None
            self._stopping = False
            self._handoff = self._taker_waiting = False
            self._running = True
            self._thread = threading.Thread(target=run_weakly, args=(weakref.ref(self), self._work, "compute"),
                                            name="usbeam-live-compute", daemon=True)
            self._thread.start()
        return self

    def _on_worker_thread(self):
        return threading.current_thread() is self._thread

    def stop(self, drain=True, timeout=10.0):
        """Stop the session.  drain=True processes frames already pushed first; pushes
        waiting for a slot, or finishing their copy, raise SessionStopped.  Idempotent.

        Called from a callback (on the compute thread; CUDA: or the upload thread) it only
        signals: the worker finishes (draining, with drain=True) after the callback returns,
        and a later start() waits for it."""
        timeout = _validate.nonnegative("timeout", timeout)
        with self._lock:
            thread = self._thread
            if not self._running and thread is None:
                return
            self._stopping = True
            self._drain = bool(drain)
            self._slot_freed.notify_all()
            self._work.notify_all()
            self._results_cv.notify_all()
            self._handed.notify_all()
        if self._on_worker_thread():   # a callback on a worker: joining it would deadlock
            return
        if thread is not None:
            thread.join(timeout)
            if thread.is_alive():
                raise UsbeamError(f"stop: the compute thread did not finish within {timeout} s "
                                  f"(a pipeline call is still running)")
        with self._lock:
            self._wait_for_writers_locked(timeout)
            if self._thread is thread:
                self._thread = None
            if self._thread is None:
                self._running = False
            self._results_cv.notify_all()

    close = stop

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop(drain=exc[0] is None)

    def __del__(self):
        # Nobody references the session: its worker threads hold it only weakly (see
        # run_weakly) and end by themselves; wake them.  Never block here: this may run on
        # a worker that holds the lock (then it sees the reference gone at its next look).
        try:
            lock = self._lock
        except AttributeError:          # __init__ failed before the lock existed
            return
        if lock.acquire(blocking=False):
            try:
                self._stopping, self._drain = True, False
                for cv in (self._work, self._slot_freed, self._results_cv, self._handed):
                    cv.notify_all()
            finally:
                lock.release()

    def _wait_for_writers_locked(self, timeout):
        deadline = time.monotonic() + timeout
        while self._writers:
            left = deadline - time.monotonic()
            if left <= 0:
                raise UsbeamError("a push() is still copying after the timeout")
            self._slot_freed.wait(left)

    # ---- producer side -----------------------------------------------------------------

    def _validate_frame(self, frame, gen):
        if gen.channel_map is not None:
            return gen.channel_map.check(frame)
        if not isinstance(frame, np.ndarray):
            frame = _validate.ndarray("frame", frame)
        if frame.dtype != gen.input_dtype:
            raise TypeError(f"frame must have dtype {gen.input_dtype} (got {frame.dtype})")
        if frame.shape != gen.input_shape:
            if _without_ones(frame.shape) == _without_ones(gen.input_shape):
                return frame.reshape(gen.input_shape)
            hint = ""
            if len(frame.shape) >= 2 and tuple(frame.shape[:2]) == tuple(gen.input_shape[:-3:-1]):
                hint = ": it looks like MATLAB layout (samples, elements[, frames]): pass frame.T"
            raise ValueError(f"frame must have shape {gen.input_shape} (or that shape without its axes of 1, "
                             f"e.g. {_without_ones(gen.input_shape)}) (got {frame.shape}){hint}")
        return frame

    def push(self, frame, meta=None, timeout=None):
        """Copy ``frame`` (mapping channels) into a free slot and queue it; thread-safe.

        Returns the frame id (increasing from 1).  Raises TypeError/ValueError for a
        wrong dtype/shape (the session keeps running), SessionStopped when stopped,
        TimeoutError when policy='block' and no slot frees up within ``timeout`` s.
        """
        timeout = _validate.timeout("timeout", timeout)
        push_ns = time.perf_counter_ns()
        gen = self._generation
        try:
            frame = self._validate_frame(frame, gen)
        except (TypeError, ValueError):
            with self._lock:
                self._counts["rejected"] += 1
            raise
        dropped = None
        with self._lock:
            deadline = None if timeout is None else time.monotonic() + float(timeout)
            while True:
                if self._stopping or not self._running:
                    raise SessionStopped("push: the session is stopped")
                if self._generation is not gen:  # update() swapped plans while we waited
                    gen = self._generation
                    try:
                        frame = self._validate_frame(frame, gen)
                    except (TypeError, ValueError):
                        self._counts["rejected"] += 1
                        raise
                slot = self._claim_locked()
                if slot is not None and slot.state != FREE and self._handoff:
                    # Fair hand-off.  threading.Lock is not fair and the GIL favours the
                    # running thread: a producer pushing again at once re-takes the lock before
                    # the worker it woke can, and holds the GIL while the worker, back from its
                    # kernel, waits up to the switch interval for it (measured: 36 of 196,394
                    # frames computed in 2 s at 1 ms per frame, drop_oldest).  So a push that
                    # would displace a frame while the worker has not had the lock since the
                    # last push woke it, or since the last displacement, first waits (GIL
                    # released, at most _HANDOFF_S) for the worker's turn.  Only under
                    # overload: a push that finds a free slot never waits here.
                    if not self._handed.wait(_HANDOFF_S):
                        self._handoff = False
                    continue
                if slot is not None:
                    break
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise TimeoutError(f"push: no free slot within {timeout} s (policy 'block')")
                self._slot_freed.wait(left)
            if slot.state != FREE:  # displaced under drop_oldest
                dropped = (slot.frame_id, slot.meta)
                self._record_drop_locked(slot.frame_id)
                self._handoff = True   # overload: the next push yields to the worker's next take
            frame_id = self._next_id
            self._next_id += 1
            slot.state, slot.frame_id, slot.meta, slot.push_ns, slot.generation = (
                WRITING, frame_id, meta, push_ns, gen)
            self._counts["pushed"] += 1
            self._writers += 1
        if dropped is not None and self._on_drop is not None:
            self._safe_call(self._on_drop, *dropped)
        t0 = time.perf_counter()
        copied = discarded = False
        copy_s = None
        try:
            copy_s = self._fill_slot(slot, frame, gen)
            copied = True
        finally:
            seconds = time.perf_counter() - t0
            with self._lock:
                self._writers -= 1
                self._copy_seconds += seconds if copy_s is None else copy_s
                self._push_seconds += seconds
                self._copy_bytes += self._slot_nbytes
                if copied and not self._stopping:
                    slot.state = READY
                    if self._taker_waiting:
                        self._handoff = True
                    self._work.notify_all()
                else:  # copy failed, or stop() began meanwhile: the frame is discarded
                    slot.state, slot.meta, slot.generation = FREE, None, None
                    self._record_drop_locked(frame_id)
                    discarded = True
                self._slot_freed.notify_all()
        if discarded:
            if self._on_drop is not None:
                self._safe_call(self._on_drop, frame_id, meta)
            raise SessionStopped(f"push: the session stopped while frame {frame_id} was being copied; "
                                 f"it was discarded")
        return frame_id

    def _claim_locked(self):
        for slot in self._slots:
            if slot.state == FREE:
                return slot
        if self.policy == "drop_oldest":
            ready = [s for s in self._slots if s.state in self._DISPLACEABLE]
            if ready:
                return min(ready, key=lambda s: s.frame_id)
        return None

    def _record_drop_locked(self, frame_id):
        self._counts["dropped"] += 1
        self._dropped_ids[frame_id] = True
        while len(self._dropped_ids) > self._history:
            self._dropped_ids.popitem(last=False)
        self._results_cv.notify_all()

    # ---- compute side ------------------------------------------------------------------

    def _next_slot_locked(self):
        """The oldest pending slot if it is ready to compute; None while it is still being
        written (or uploaded)."""
        oldest = None   # a plain loop: this runs under the lock for every frame
        for slot in self._slots:
            if slot.state != FREE and slot.state != COMPUTING and (oldest is None or slot.frame_id < oldest.frame_id):
                oldest = slot
        return oldest if oldest is not None and oldest.state == self._TAKE_STATE else None

    def _output_entry_locked(self, gen):
        """Least recently written output buffer that no reader holds.  When readers hold
        every buffer, the ring grows by one rather than making the compute thread wait on
        them (it is bounded by the number of leases held)."""
        entry = None
        for e in gen.ring:
            if e.readers == 0 and (entry is None or e.written_at < entry.written_at):
                entry = e
        if entry is None:
            gen.ring.append(gen.new_entry())
            return gen.ring[-1]
        if entry.frame_id in self._done:
            del self._done[entry.frame_id]
        entry.frame_id = 0
        return entry

    def _worker_turn_locked(self, waiting):
        """The worker that takes READY slots has the lock: a push yielding to it (the fair
        hand-off in push) may go on; ``waiting``: it found nothing and waits."""
        if self._handoff:
            self._handoff = False
            self._handed.notify_all()
        self._taker_waiting = waiting

    def _compute_begin(self):
        _core.set_thread_limit(self.compute_threads)  # this OS thread's executes (see compute_threads)

    def _compute_take_locked(self):
        """The next frame to compute as (slot, generation, output entry), None to wait, or
        EXIT when stopping (frames still being copied are discarded by their push())."""
        slot = self._next_slot_locked()
        if self._TAKE_STATE == READY:
            self._worker_turn_locked(slot is None)
        if self._stopping and (not self._drain or not self._has_work_locked(slot)):
            return EXIT
        if slot is None:
            return None
        slot.state = COMPUTING
        gen = slot.generation
        entry = self._output_entry_locked(gen)
        entry.readers += 1   # the compute thread's own lease while it writes
        return slot, gen, entry

    def _compute_exit_locked(self):
        self._discard_pending_locked()
        if self._thread is threading.current_thread():
            self._thread = None
            self._running = False
        self._worker_turn_locked(False)
        self._results_cv.notify_all()
        self._slot_freed.notify_all()

    def _compute_run(self, item):
        slot, gen, entry = item
        error = None
        t0 = time.perf_counter()
        extra = None
        try:
            extra = self._compute(slot, gen, entry)
        except Exception as exc:  # reported per frame; the session keeps running
            error = exc
        compute_s = time.perf_counter() - t0
        done_ns = time.perf_counter_ns()
        timings = getattr(gen.pipeline, "timings", None) if error is None else None
        timings = dict(timings) if isinstance(timings, dict) else None
        if extra:
            timings = dict(timings or {}, **extra)
        self._publish(slot, gen, entry, error, compute_s, timings, done_ns)

    def _publish(self, slot, gen, entry, error, compute_s, timings, done_ns):
        """A computed frame's outcome, on the compute thread: the slot goes FREE, the result
        (latency: push() entry to ``done_ns``) or the failure is recorded, then the callback or
        on_error runs (the callback with a zero-copy view leased for the call)."""
        with self._lock:
            frame_id, meta, push_ns = slot.frame_id, slot.meta, slot.push_ns
            slot.state, slot.meta, slot.generation = FREE, None, None
            self._slot_freed.notify_all()
            entry.readers -= 1
            if error is None:
                self._write_counter += 1
                entry.frame_id, entry.meta = frame_id, meta
                entry.written_at = self._write_counter
                entry.latency_s = (done_ns - push_ns) * 1e-9
                entry.timings = timings
                self._done[frame_id] = (gen, entry)
                self._evict_locked()
                self._latest_id = max(self._latest_id, frame_id)
                self._counts["processed"] += 1
                self._latencies.append(entry.latency_s)
                self._stage_sums["compute"] += compute_s
                self._stage_counts["compute"] += 1
                for stage, seconds in (timings or {}).items():
                    self._stage_sums[stage] += float(seconds)
                    self._stage_counts[stage] += 1
                if self._callback is not None:
                    entry.readers += 1  # lease for the callback
                    self._delivering += 1
            else:
                self._counts["failed"] += 1
                self._failed_ids[frame_id] = f"{type(error).__name__}: {error}"
                if self._on_error is not None:
                    self._delivering += 1
                while len(self._failed_ids) > self._history:
                    self._failed_ids.popitem(last=False)
            self._results_cv.notify_all()
        if error is not None:
            if self._on_error is not None:
                try:
                    self._safe_call(self._on_error, frame_id, meta, error)
                finally:
                    with self._lock:
                        self._delivering -= 1
                        self._slot_freed.notify_all()
            return
        if self._callback is not None:
            result = Result(frame_id, self._result_view(entry), meta, entry.latency_s, timings, gen.number)
            try:
                self._callback(result)
            except Exception as exc:
                with self._lock:
                    self._counts["callback_errors"] += 1
                self.last_callback_error = exc
            finally:
                with self._lock:
                    entry.readers -= 1
                    self._delivering -= 1
                    self._results_cv.notify_all()
                    self._slot_freed.notify_all()

    def _evict_locked(self):
        """Keep the newest n_results unleased results, plus any a reader holds (older
        generations' rings are freed once none of their results is kept)."""
        if len(self._done) <= self.n_results:
            return
        leased = sum(1 for _, entry in self._done.values() if entry.readers)
        while len(self._done) > self.n_results + leased:
            for frame_id, (_, entry) in self._done.items():
                if entry.readers == 0:
                    del self._done[frame_id]
                    break
            else:
                return

    def _discard_pending_locked(self):
        discarded = []
        for slot in self._slots:
            if slot.state in self._DISPLACEABLE:
                discarded.append((slot.frame_id, slot.meta))
                slot.state, slot.meta, slot.generation = FREE, None, None
                self._record_drop_locked(slot.frame_id)
        self._slot_freed.notify_all()
        discarded.sort(key=lambda pair: pair[0])   # push order (slots go round a ring)
        if discarded and self._on_drop is not None:
            self._lock.release()
            try:
                for frame_id, meta in discarded:
                    self._safe_call(self._on_drop, frame_id, meta)
            finally:
                self._lock.acquire()

    def _safe_call(self, fn, *args):
        try:
            fn(*args)
        except Exception as exc:
            with self._lock:
                self._counts["callback_errors"] += 1
            self.last_callback_error = exc

    # ---- consumer side -----------------------------------------------------------------

    def _result_locked(self, frame_id, copy):
        gen, entry = self._done[frame_id]
        if copy:
            image = entry.array.copy()
            return Result(frame_id, image, entry.meta, entry.latency_s, entry.timings, gen.number)
        entry.readers += 1
        view = self._result_view(entry)

        def release():
            with self._lock:
                entry.readers -= 1
                self._results_cv.notify_all()

        return Result(frame_id, view, entry.meta, entry.latency_s, entry.timings, gen.number, release)

    def get(self, frame_id, timeout=None, copy=True):
        """Wait for ``frame_id``'s image.  copy=False: zero-copy leased view (release it).

        Raises FrameDropped, FrameFailed, TimeoutError, KeyError (evicted from the output
        ring, or never pushed) or SessionStopped (stopped before it was processed).
        """
        timeout = _validate.timeout("timeout", timeout)
        frame_id = _validate.integer("frame_id", frame_id, minimum=1)
        deadline = None if timeout is None else time.monotonic() + float(timeout)
        with self._lock:
            if frame_id >= self._next_id:
                raise KeyError(f"frame {frame_id} was never pushed")
            while True:
                if frame_id in self._done:
                    return self._result_locked(frame_id, copy)
                if frame_id in self._dropped_ids:
                    raise FrameDropped(f"frame {frame_id} was dropped (policy '{self.policy}' or stop)")
                if frame_id in self._failed_ids:
                    raise FrameFailed(f"frame {frame_id}: pipeline failed: {self._failed_ids[frame_id]}")
                pending = any(s.frame_id == frame_id and s.state != FREE for s in self._slots)
                if not pending:
                    raise KeyError(f"frame {frame_id} is no longer in the output ring "
                                   f"({self.n_results} results kept)")
                if not self._running:
                    raise SessionStopped(f"frame {frame_id}: the session is stopped")
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise TimeoutError(f"frame {frame_id}: no result within {timeout} s")
                self._results_cv.wait(left)

    def latest(self, copy=True):
        """The newest processed frame's Result, or None when nothing is processed yet."""
        with self._lock:
            if self._latest_id == 0 or self._latest_id not in self._done:
                return None
            return self._result_locked(self._latest_id, copy)

    def wait_idle(self, timeout=None):
        """Block until every pushed frame is processed (its callback returned), dropped or
        failed; True if so, False on timeout."""
        timeout = _validate.timeout("timeout", timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while any(s.state != FREE for s in self._slots) or self._writers or self._delivering:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._slot_freed.wait(left if left is not None else 0.1)
            return True

    def __repr__(self):
        gen = self._generation
        state = "running" if self._running else "stopped"
        return (f"{type(self).__name__}({type(gen.pipeline).__name__}, frame {gen.input_dtype.name}"
                f"{tuple(self.frame_shape)}, slots={self.n_slots}, policy={self.policy!r}, "
                f"backend={self.backend!r}, {state}, pushed={self._counts['pushed']})")

    def _repr_html_(self):
        from .._repr import html_table

        stats = self.stats()
        latency = stats["latency_s"]
        rows = {"pipeline": type(self._generation.pipeline).__name__,
                "frame": f"{self._generation.input_dtype.name}{tuple(self.frame_shape)}",
                "backend": self.backend, "policy": self.policy, "slots": self.n_slots,
                "running": stats["running"]}
        for key in ("pushed", "processed", "dropped", "failed", "rejected"):
            if key in stats:
                rows[key] = stats[key]
        if latency.get("count"):
            rows["latency p50 / p99"] = f"{latency['p50'] * 1e3:.2f} / {latency['p99'] * 1e3:.2f} ms"
        return html_table(type(self).__name__, rows)

    def stats(self):
        """Counters, push-to-result latency (s) over the last frames, mean stage times (s),
        achieved copy ("upload") bandwidth in GB/s: bytes written into slots over the time
        of the copies themselves (stage 'copy'); 'push_copy_wall' adds the waits for the
        GIL around them."""
        with self._lock:
            counts = dict(self._counts)
            latencies = np.array(self._latencies, dtype=np.float64)
            stages = {k: self._stage_sums[k] / self._stage_counts[k] for k in self._stage_sums}
            copy_bytes, copy_s, push_s = self._copy_bytes, self._copy_seconds, self._push_seconds
            counts["pending"] = sum(s.state != FREE for s in self._slots)
            generation = self._generation.number
        if copy_bytes:
            stages["copy"] = copy_s / max(counts["pushed"], 1)
            stages["push_copy_wall"] = push_s / max(counts["pushed"], 1)
        latency = {"count": int(latencies.size)}
        if latencies.size:
            latency.update(p50=float(np.percentile(latencies, 50)), p99=float(np.percentile(latencies, 99)),
                           max=float(latencies.max()), mean=float(latencies.mean()))
        return dict(counts, latency_s=latency, stage_s=stages,
                    upload_gbps=(copy_bytes / copy_s / 1e9) if copy_s > 0 else 0.0,
                    upload_bytes=copy_bytes, backend=self.backend, policy=self.policy, slots=self.n_slots,
                    generation=generation, running=self._running)


_BACKENDS[Session._BACKEND] = Session
