"""CUDA live session: ``usbeam.live.Session(pipeline, backend='cuda')`` builds one of these
(the class registers itself as the session of backend 'cuda': ``Session(..., backend="cuda")``
below; session.py never imports this module, usbeam/live/__init__.py does).

Same API, policies and accounting as the CPU session (session.py); what travels differs:

  push() thread(s)              upload thread              compute thread
  wait uploaded[k] (pinned k    oldest READY slot ->       launch: oldest UPLOADED slot ->
  free again), copy + map  -->  upload stream: wait   -->  compute stream: wait uploaded[k],
  channels into pinned k        consumed[k], H2D copy,     pipeline(DeviceArray slot k,
  READY                         record uploaded[k]         out=device output buffer),
                                UPLOADED                   record consumed[k]  (no wait)
                                                           finish (one launch later): wait for
                                                           consumed[k], publish, callback, FREE

Ring (cuda/runtime/slot_ring.cu): ``slots`` pinned host buffers and as many device buffers, each holding
one mapped frame (``pipeline.input_shape``, ``input_dtype``); only the channels the map
uses travel.  Events give the three guarantees: a device slot is never overwritten while
compute still reads it (upload waits for consumed[k]); compute never reads a slot before
its upload completed (compute waits for uploaded[k]); a pinned slot is not rewritten before
its upload finished (push waits for uploaded[k] on the host).  Slot states: FREE -> WRITING
-> READY -> UPLOADING -> UPLOADED -> COMPUTING -> FREE; drop_oldest displaces the oldest
READY or UPLOADED frame (never one whose copy is being queued or computed).

Two frames in flight (review cuda-first-contact, finding 14 / D6).  Waiting on the host for
frame k before queueing frame k+1 left the GPU idle for the whole Python launch of the chain
(throughput 1 / (GPU time + launch time)).  The compute thread therefore *launches* a frame
(acquire, pipeline call, release: queued work only) and *finishes* it (waits for consumed[k]
with the GIL released, reads its event times, publishes it, runs the callback) one step
later: while another frame is ready to launch and fewer than ``_max_in_flight()`` frames are
launched and unfinished, it launches; otherwise it finishes the oldest.  Under load the
order is launch k+1, finish k, launch k+2, finish k+1, ...: the GPU computes frame k+1 while
the host publishes frame k and queues frame k+2, so throughput is 1 / max(GPU time, host
time per frame).  What still holds, and why:
- frames in order: launches take the oldest pending frame, finishes take the oldest launched;
- a slot stays COMPUTING until its frame is finished (its consumed[k] waited for), so it is
  neither rewritten nor re-acquired while in flight, and its per-slot events (compute_start,
  consumed) are read before they are recorded again;
- at most min(2, slots - 1) frames are in flight: one slot always stays for the producers, so
  drop_oldest still finds a frame to displace instead of making a lone producer wait (with
  slots=2 the session runs one frame at a time, as before);
- each in-flight frame holds its output buffer (the compute thread's lease) until it is
  published; the output ring has ``results + in-flight - 1`` buffers, so get() still finds
  the last ``results`` frames while the next ones run; a callback's buffer is leased for the
  call, and a frame launched during it writes another buffer;
- stop() (drain or not) finishes the frames in flight (their work is queued: they count as
  processed) before the compute thread ends; callbacks and on_error run on the compute thread,
  in frame order; a pipeline error is reported for its frame when that frame is finished.

The pipeline takes a usbeam DeviceArray (read-only, in the slot's device memory) and writes
a DeviceArray ``out=`` (``usbeam.Pipeline(..., backend='cuda')`` does, its plans on their own
streams: the session orders them after the upload and the release after them by events
through the arrays' pending-write streams, never the host).  Successive frames run one after
the other on the GPU (frame k+1's chain waits for consumed[k] through the compute stream),
so the pipeline's buffers are shared safely.

Timings: the pipeline's own stage times (CUDA events, re-recorded by each call) belong to
frame k only until frame k+1 is launched.  Before that launch the compute thread asks,
without waiting (live_cuda_ring_done), whether frame k has finished; if so it reads them,
otherwise frame k goes without them: under sustained load stage_s's pipeline stages are the
mean over the frames that had them (always the last one before the pipeline idles).
'gpu_compute' (compute_start[k] -> consumed[k], on the GPU) and 'upload' are read for every
frame; 'launch' is the host time to queue the chain; 'compute' is the host time the compute
thread spent on the frame (its launch plus its wait).  Latency is push() entry to the moment
the compute thread has seen the frame finished and publishes it (host clock, just before
get() can return it): with two frames in flight it includes the time a finished frame waits
while the next frame is being launched.

Results: the output ring holds device buffers.  ``get()``/``latest()`` return a host NumPy
copy (``copy=True``) or a leased, read-only DeviceArray (``copy=False``; DLPack and the CUDA
array interface, no copy; finish using it, on any stream, before ``release()``); callbacks
receive the leased DeviceArray, valid during the call.  ``stats()`` adds the GPU seconds of
the upload and of the compute per frame (events), the pipeline's own stage times, and
``upload_gbps``: bytes uploaded over the GPU time of the copies (the host copy into pinned
memory is ``copy_gbps``).

STATUS: written on a machine without a GPU; its tests (tests/live/test_live.py on every backend,
tests/live/test_live_cuda.py) pass on the ring stand-in and, GPU tests included, under the CUDA
emulator (make test-emu); not yet run on a real device.
"""
import collections
import threading
import time
import weakref

import numpy as np

from .. import _core
from .. import device as _device  # CudaSession takes a parameter named device
from .._backend import cuda_available, no_cuda_reason
from .._core import UsbeamError
from .pipeline import CallablePipeline
from .ring import FREE, READY, UPLOADED, UPLOADING, WRITING, Result
from ._threads import EXIT, run_weakly
from .session import Session


def _device_empty(shape, dtype):
    return _device.empty(shape, dtype)


_FINISH = object()   # a compute-thread work item: finish the oldest frame in flight


class _InFlight:
    """A frame whose chain the compute thread has queued and not yet finished."""

    __slots__ = ("slot", "gen", "entry", "error", "released", "launch_s", "timings", "timings_gone")

    def __init__(self, slot, gen, entry):
        self.slot, self.gen, self.entry = slot, gen, entry
        self.error = None
        self.released = False      # consumed[k] recorded: finishing waits for it
        self.launch_s = 0.0
        self.timings = None        # the pipeline's stage times, once read
        self.timings_gone = False  # a later call of the same pipeline re-recorded them


class CudaSession(Session, backend="cuda"):
    """A live session on a CUDA device (see the module docstring and Session).

    Extra parameter: ``device`` (int, default 0), the CUDA device of the ring and the
    pipeline.  ``close()`` stops and frees the pinned and device buffers (``start()``
    allocates them again); ``stop()`` keeps them for a quick restart.
    """

    _TAKE_STATE = UPLOADED
    _DISPLACEABLE = (READY, UPLOADED)
    _IN_FLIGHT = 2     # frames launched and not yet finished, at most (and at most slots - 1)
    _allocate_slot = None                     # pinned and device memory live in the ring
    _allocate_output = staticmethod(_device_empty)

    def __init__(self, pipeline, slots=3, policy="drop_oldest", *, device=0, backend="cuda", **kwargs):
        if not cuda_available():
            raise UsbeamError(f"backend='cuda': a CUDA live session needs a CUDA device: {no_cuda_reason()}")
        if isinstance(device, bool) or not isinstance(device, (int, np.integer)):
            raise TypeError(f"device must be an integer CUDA device index (got {type(device).__name__})")
        self.device = int(device)
        if not 0 <= self.device < _core.cuda_device_count():
            raise ValueError(f"device must be in 0..{_core.cuda_device_count() - 1} (got {self.device})")
        self._ring = None
        self._uploader = None
        self._device_slots = []
        self._h2d_bytes = 0
        self._h2d_seconds = 0.0
        self._in_flight = collections.deque()   # _InFlight, launch order; the compute thread's own
        super().__init__(pipeline, slots, policy, backend=backend, **kwargs)

    # ---- backend hooks -----------------------------------------------------------------

    def _check_pipeline(self, pipeline):
        if isinstance(pipeline, CallablePipeline):
            raise TypeError("pipeline: backend='cuda' needs a pipeline object that takes usbeam DeviceArrays "
                            "and writes out= (e.g. usbeam.Pipeline(..., backend='cuda')); plain callables "
                            "run on backend='cpu'")
        backend = getattr(pipeline, "backend", "cuda")
        if backend != "cuda":
            raise ValueError(f"pipeline: a backend='cuda' session needs a pipeline built with backend='cuda' "
                             f"(got backend={backend!r})")
        return pipeline

    def _prepare_backend(self):
        self._open_ring()

    def _open_ring(self):
        self._ring = _core.live_cuda_ring_create(self.device, self.n_slots, self._slot_nbytes)
        self._device_slots = [None] * self.n_slots

    def _device_slot(self, index, ptr):
        """Slot index's device buffer as a read-only DeviceArray of the pipeline's input shape
        (made once per ring; it keeps the ring alive)."""
        array = self._device_slots[index]
        if array is None:
            array = _core.device_wrap(ptr, self._slot_shape, self._slot_dtype, True, self._ring, "frame")
            self._device_slots[index] = array
        return array

    def _fill_slot(self, slot, frame, gen):
        # waits (GIL released) until the previous upload out of this pinned buffer is done
        host = _core.live_cuda_ring_host_slot(self._ring, slot.index)
        view = host[:self._slot_nbytes].view(self._slot_dtype)
        if gen.channel_map is not None:
            return _core.live_gather(gen.channel_map._plan, frame, view.reshape(gen.channel_map.output_shape))
        np.copyto(view.reshape(self._slot_shape), frame, casting="no")
        return None

    def _max_in_flight(self):
        """Frames launched and not finished, at most: two, leaving one slot to the producers
        (slots=2: one, as without overlap)."""
        return max(1, min(self._IN_FLIGHT, self.n_slots - 1))

    def _output_ring_size(self):
        return self.n_results + self._max_in_flight() - 1

    # ---- compute thread: launch a frame, finish it one step later ---------------------------

    def _compute_take_locked(self):
        """Launch the next frame while fewer than _max_in_flight() are in flight; otherwise, or
        with nothing to launch, finish the oldest in flight (a wait for the GPU, GIL released);
        None to wait; EXIT only once nothing is in flight.  stop(drain=False) launches nothing
        more but still finishes the frames in flight (their work is queued)."""
        if self._in_flight:
            slot = self._next_slot_locked()
            if (slot is None or len(self._in_flight) >= self._max_in_flight()
                    or (self._stopping and not self._drain)):
                return _FINISH
        return super()._compute_take_locked()       # (slot, gen, entry) to launch, None or EXIT

    def _compute_run(self, item):
        if item is _FINISH:
            self._finish()
        else:
            self._launch(*item)

    def _launch(self, slot, gen, entry):
        """Queue slot's frame: the compute stream waits for its upload, the pipeline's chain is
        queued on the frame, the release (consumed[k]) after every stream that read the slot or
        wrote the output.  No host wait for the GPU; an error is kept for the frame's finish."""
        self._collect_timings_before_call(gen.pipeline)
        ring, k = self._ring, slot.index
        record = _InFlight(slot, gen, entry)
        t0 = time.perf_counter()
        try:
            ptr, stream = _core.live_cuda_ring_acquire(ring, k)    # compute stream waits for uploaded[k]
            frame = None
            try:
                frame = self._device_slot(k, ptr)
                _device.mark_used(frame, stream)   # a plan on another stream orders itself after the compute stream
                gen.pipeline(frame, out=entry.array)
            finally:
                for array in (frame, entry.array):
                    producer = None if array is None else array.stream
                    if producer is not None and producer != stream:
                        _core.stream_wait(stream, producer)
                _core.live_cuda_ring_release(ring, k)
                record.released = True
        except Exception as exc:  # reported for this frame, in order, when it is finished
            record.error = exc
        record.launch_s = time.perf_counter() - t0
        self._in_flight.append(record)

    def _collect_timings_before_call(self, pipeline):
        """The call about to be made re-records the pipeline's stage events: a frame in flight
        on the same pipeline reads them now if it has finished (a query, never a wait), and
        otherwise goes without them."""
        for record in self._in_flight:
            if record.gen.pipeline is not pipeline or record.timings is not None or record.timings_gone:
                continue
            record.timings_gone = True
            if record.error is None and record.released:
                try:
                    finished = _core.live_cuda_ring_done(self._ring, record.slot.index)
                except (UsbeamError, ValueError):   # the finish's wait meets the error and reports it
                    finished = False
                if finished:
                    record.timings = self._pipeline_timings(record.gen)

    @staticmethod
    def _pipeline_timings(gen):
        """The pipeline's stage times as a dict, or None.  Reading them must not end the compute
        thread: a pipeline whose ``timings`` raises only loses the stage times of the frame
        (its image and its failures are reported as usual)."""
        try:
            timings = getattr(gen.pipeline, "timings", None)
        except Exception:
            return None
        return dict(timings) if isinstance(timings, dict) else None

    def _finish(self):
        """The oldest frame in flight: wait (GIL released) for its consumed[k], read its event
        times, then publish it (slot FREE, result, callback) as the CPU session does."""
        record = self._in_flight[0]
        slot, gen, entry = record.slot, record.gen, record.entry
        t0 = time.perf_counter()
        upload_s = gpu_s = None
        if record.released:
            try:
                upload_s, gpu_s = _core.live_cuda_ring_seconds(self._ring, slot.index)  # waits for consumed[k]
            except Exception as exc:
                if record.error is None:
                    record.error = exc
        done_ns = time.perf_counter_ns()
        host_s = record.launch_s + (time.perf_counter() - t0)
        timings = None
        if record.error is None:
            timings = record.timings
            if timings is None and not record.timings_gone:
                timings = self._pipeline_timings(gen)
            timings = dict(timings or {}, upload=upload_s, gpu_compute=gpu_s, launch=record.launch_s)
            with self._lock:
                self._h2d_bytes += self._slot_nbytes
                self._h2d_seconds += upload_s
        self._in_flight.popleft()
        self._publish(slot, gen, entry, record.error, host_s, timings, done_ns)

    def _result_view(self, entry):
        array = entry.array
        return _core.device_wrap(array.ptr, array.shape, array.dtype, True, array, "result")

    def _has_work_locked(self, slot):
        return slot is not None or any(s.state in (READY, UPLOADING, UPLOADED) for s in self._slots)

    # ---- upload thread -------------------------------------------------------------------

    def _next_upload_locked(self):
        """The oldest slot not yet uploaded if its copy is complete (uploads keep push order).
        Once stopping, frames still being copied are discarded by their push(), so they no
        longer hold the others back."""
        states = (READY,) if self._stopping else (WRITING, READY)
        pending = [s for s in self._slots if s.state in states]
        if not pending:
            return None
        oldest = min(pending, key=lambda s: s.frame_id)
        return oldest if oldest.state == READY else None

    def _upload_begin(self):
        pass

    def _upload_take_locked(self):
        """The next slot to upload, None to wait, or EXIT (see _threads.run_weakly)."""
        slot = self._next_upload_locked()
        self._worker_turn_locked(slot is None)      # this thread takes the READY slots
        if self._stopping and (not self._drain or slot is None):
            return EXIT
        if slot is None:
            return None
        slot.state = UPLOADING
        return slot

    def _upload_exit_locked(self):
        if self._uploader is threading.current_thread():
            self._uploader = None
        self._worker_turn_locked(False)
        self._slot_freed.notify_all()

    def _upload_run(self, slot):
        with self._lock:
            frame_id, meta = slot.frame_id, slot.meta
        error = None
        try:
            _core.live_cuda_ring_upload(self._ring, slot.index, self._slot_nbytes)
        except Exception as exc:
            error = exc
        with self._lock:
            if error is not None:
                slot.state, slot.meta, slot.generation = FREE, None, None
                self._counts["failed"] += 1
                self._failed_ids[frame_id] = f"upload: {type(error).__name__}: {error}"
                while len(self._failed_ids) > self._history:
                    self._failed_ids.popitem(last=False)
            else:
                # (stopping without draining: UPLOADED too, and discarded with the frames behind
                # it by _discard_pending_locked, which waits for this upload: on_drop in push order)
                slot.state = UPLOADED
            self._work.notify_all()
            self._slot_freed.notify_all()
            self._results_cv.notify_all()
        if error is not None and self._on_error is not None:
            self._safe_call(self._on_error, frame_id, meta, error)

    def _discard_pending_locked(self):
        """As Session's, once an upload in flight has finished (up to 10 s; not on the upload
        thread itself): that frame is then discarded with the frames pushed after it, in push
        order, where the upload thread used to drop it on its own after them."""
        deadline = time.monotonic() + 10.0
        while (self._uploader is not None and self._uploader is not threading.current_thread()
               and any(s.state == UPLOADING for s in self._slots)):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            self._slot_freed.wait(remaining)
        super()._discard_pending_locked()

    # ---- lifecycle -------------------------------------------------------------------------

    def start(self):
        """Start (or restart after stop/close) the upload and compute threads (an upload
        thread still finishing after a stop() from a callback is joined first)."""
        with self._lock:
            if self._running and not self._stopping:
                return self
            uploader = self._uploader
        if uploader is not None and uploader is not threading.current_thread():
            uploader.join(10.0)
            if uploader.is_alive():
                raise UsbeamError("start: the previous upload thread did not finish within 10 s")
        if self._ring is None:
            self._open_ring()
        super().start()
        with self._lock:
            if self._uploader is None:
                self._uploader = threading.Thread(target=run_weakly, args=(weakref.ref(self), self._work, "upload"),
                                                  name="usbeam-live-upload", daemon=True)
                self._uploader.start()
        return self

    def _on_worker_thread(self):
        return threading.current_thread() in (self._thread, self._uploader)

    def stop(self, drain=True, timeout=10.0):
        """As Session.stop; also joins the upload thread and waits for both CUDA streams.
        From a callback (on a worker thread) it only signals, as Session.stop."""
        if self._on_worker_thread():
            super().stop(drain, timeout)
            return
        super().stop(drain, timeout)
        with self._lock:
            uploader = self._uploader
        if uploader is not None:
            uploader.join(timeout)
            if uploader.is_alive():
                raise UsbeamError(f"stop: the upload thread did not finish within {timeout} s")
        with self._lock:
            if self._uploader is uploader:
                self._uploader = None
            self._discard_pending_locked()   # uploaded but not computed when not draining
        if self._ring is not None:
            _core.live_cuda_ring_synchronize(self._ring)

    def close(self):
        """Stop without draining and free the pinned and device buffers (the output ring's
        device buffers go when no result holds them).  Not from a callback (UsbeamError):
        the session's threads still use the ring there; stop() may be called there."""
        if self._on_worker_thread():
            raise UsbeamError("close: called from a callback on the session's own thread; call stop() there "
                              "and close() from another thread")
        self.stop(drain=False)
        with self._lock:
            self._device_slots = []
            self._ring = None

    # ---- results ---------------------------------------------------------------------------

    @staticmethod
    def _to_host(result):
        try:
            image = result.image.to_numpy()
        finally:
            result.release()
        return Result(result.frame_id, image, result.meta, result.latency_s, result.timings, result.generation)

    def get(self, frame_id, timeout=None, copy=True):
        """As Session.get: copy=True gives a host NumPy copy (made outside the session's lock),
        copy=False a leased read-only DeviceArray (release it when done)."""
        result = super().get(frame_id, timeout, copy=False)
        return self._to_host(result) if copy else result

    def latest(self, copy=True):
        result = super().latest(copy=False)
        if result is None or not copy:
            return result
        return self._to_host(result)

    def stats(self):
        """As Session.stats; upload_gbps is the host-to-device rate (bytes of processed
        frames over their copies' GPU time), copy_gbps the host copy into pinned memory;
        stage_s adds 'upload' and 'gpu_compute' (GPU seconds from events) to the
        pipeline's stages."""
        stats = super().stats()
        with self._lock:
            h2d_bytes, h2d_s = self._h2d_bytes, self._h2d_seconds
        stats["copy_gbps"] = stats["upload_gbps"]
        stats["copy_bytes"] = stats["upload_bytes"]
        stats["upload_gbps"] = h2d_bytes / h2d_s / 1e9 if h2d_s > 0 else 0.0
        stats["upload_bytes"] = h2d_bytes
        stats["device"] = self.device
        return stats
