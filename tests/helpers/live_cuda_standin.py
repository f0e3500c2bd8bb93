"""A host-memory stand-in for the CUDA slot ring of cuda/runtime/slot_ring.cu, so that the
CUDA live session's host side (usbeam/live/cuda_session.py: states, upload thread, ordering,
drops, stop, restart, results) runs and is checked on machines without a GPU.

Why it is kept beside the CUDA emulator (cuda/emu), which runs the real ring under the
'cuda' cases (the architecture review asked for one live-ring stand-in, not two): the two do
not check the same thing, and the emulator cannot reach what this one is for.
- It needs no CUDA build.  The emulator needs the CUDA headers to build (make test runs it
  only where they are), and make asan and any other USBEAM_CUDA=0 build have no
  usbeam._cuda at all; there, without this stand-in, no line of cuda_session.py would run.
  It replaces only the ring's bindings and the device checks: the session code under test
  is the real one.
- It runs the upload truly alongside the session.  The emulator runs device work only when
  the host synchronises, on the synchronising thread, under one lock, so an upload never
  overlaps the session's compute thread and a rewrite of a pinned slot is never caught
  half-way.  Here the "upload stream" is its own thread copying slowly, so those
  interleavings happen and a protocol slip shows as a torn frame.
- It checks the ring protocol itself (protocol_errors, asserted after each test by the
  fixtures of test_live.py and test_live_cuda.py): upload of a slot that compute holds,
  release of a slot never acquired, a query or wait on a slot never released, and a slot
  acquired again before its last compute was waited for (its events would be re-recorded
  before they were read).
What it cannot show is what the ring's CUDA code does (events, pinned memory, stream waits):
that is the emulator's job, and a GPU's.

It keeps the ring's protocol, with the asynchrony that makes it matter: upload(k) queues
the copy of pinned slot k on an "upload stream" worker thread, which first waits for
consumed[k] and copies slowly (in chunks with pauses), so a session that rewrote a pinned
slot before its upload finished, or computed a slot before its upload completed, would
produce torn frames.  host_slot(k) waits for uploaded[k] (as cudaEventSynchronize);
acquire(k) waits for it too (a host wait standing in for cudaStreamWaitEvent); release(k)
queues consumed[k] on a "compute stream" thread, which sets it a little later (the GPU still
busy when the launch returns), so done(k) (cudaEventQuery) can answer False and seconds(k)
(cudaEventSynchronize) really waits: the session's two frames in flight meet both.  "Device"
buffers are host DeviceArrays, so the pipeline and the result paths (DLPack, to_numpy) run
unchanged.  The real ring is tested by the 'cuda' cases of test_live.py and by
test_live_cuda.py's GPU parametrisation (on a GPU and on the emulator).
"""
import queue
import threading
import time
import weakref

import numpy as np

import usbeam
from usbeam import device

_alive = [0]
_alive_lock = threading.Lock()
# Protocol slips of every ring since the last install(): session threads append, the test's
# fixture asserts the list is empty once the test is over.
protocol_errors = []


class StandInRing:
    def __init__(self, n_slots, slot_bytes, copy_pause_s, compute_pause_s):
        self.n_slots, self.slot_bytes = n_slots, slot_bytes
        self.host = [np.zeros(slot_bytes, np.uint8) for _ in range(n_slots)]
        self.dev = [device.empty((slot_bytes,), np.uint8, device="cpu") for _ in range(n_slots)]
        self.dev_np = [np.from_dlpack(d) for d in self.dev]
        self.uploaded = [threading.Event() for _ in range(n_slots)]
        self.consumed = [threading.Event() for _ in range(n_slots)]
        for e in self.uploaded + self.consumed:
            e.set()
        self.upload_s = [0.0] * n_slots
        self.acquired = [False] * n_slots
        self.released = [False] * n_slots    # released since the last acquire
        self.collected = [True] * n_slots    # its last compute waited for (seconds) since
        self.protocol_errors = protocol_errors
        self.queue = queue.Queue()
        self.compute = queue.Queue()
        args = (self.queue, self.host, self.dev_np, self.uploaded, self.consumed, self.upload_s, copy_pause_s)
        threading.Thread(target=_upload_stream, args=args, daemon=True, name="standin-upload").start()
        threading.Thread(target=_compute_stream, args=(self.compute, self.consumed, compute_pause_s), daemon=True,
                         name="standin-compute").start()
        with _alive_lock:
            _alive[0] += 1
        weakref.finalize(self, _finalize, self.queue, self.compute)


def _finalize(*queues):
    for q in queues:
        q.put(None)
    with _alive_lock:
        _alive[0] -= 1


def _compute_stream(q, consumed, pause_s):
    """consumed[k] completes some time after release(k) queued it, in release order."""
    while True:
        k = q.get()
        if k is None:
            return
        if pause_s:
            time.sleep(pause_s)
        consumed[k].set()
        q.task_done()


def _upload_stream(q, host, dev, uploaded, consumed, upload_s, pause_s):
    while True:
        item = q.get()
        if item is None:
            return
        k, nbytes = item
        consumed[k].wait()
        t0 = time.perf_counter()
        step = max(1, nbytes // 4)
        for start in range(0, nbytes, step):   # a slow DMA: a rewrite meanwhile would tear it
            dev[k][start:start + step] = host[k][start:start + step]
            if pause_s:
                time.sleep(pause_s)
        upload_s[k] = max(time.perf_counter() - t0, 1e-9)
        uploaded[k].set()
        q.task_done()


def install(monkeypatch, copy_pause_s=0.0005, compute_pause_s=0.0005):
    """Replace the ring bindings (and the GPU checks) by the stand-in for one test."""
    from usbeam import _core

    protocol_errors.clear()
    from usbeam.live import cuda_session

    def create(dev, n_slots, slot_bytes):
        return StandInRing(n_slots, slot_bytes, copy_pause_s, compute_pause_s)

    def host_slot(ring, k):
        ring.uploaded[k].wait()
        return ring.host[k]

    def upload(ring, k, nbytes):
        if ring.acquired[k]:
            ring.protocol_errors.append(f"upload of slot {k} while acquired")
        ring.uploaded[k].clear()
        ring.queue.put((k, nbytes))

    def acquire(ring, k):
        if not ring.collected[k]:
            ring.protocol_errors.append(f"acquire of slot {k} before its last compute was waited for")
        ring.uploaded[k].wait()
        ring.consumed[k].clear()
        ring.acquired[k], ring.released[k] = True, False
        return ring.dev[k].ptr, 7

    def release(ring, k):
        if not ring.acquired[k]:
            ring.protocol_errors.append(f"release of slot {k} not acquired")
        ring.acquired[k], ring.released[k], ring.collected[k] = False, True, False
        ring.compute.put(k)

    def done(ring, k):
        if not ring.released[k]:
            ring.protocol_errors.append(f"query of slot {k} not released")
        return ring.consumed[k].is_set()

    def seconds(ring, k):
        if not ring.released[k]:
            ring.protocol_errors.append(f"seconds of slot {k} not released")
        ring.uploaded[k].wait()
        ring.consumed[k].wait()
        ring.collected[k] = True
        return ring.upload_s[k], 1e-6

    def synchronize(ring):
        ring.queue.join()
        ring.compute.join()

    def device_wrap(ptr, shape, dtype, readonly, owner, name):
        if isinstance(owner, StandInRing):
            k = [d.ptr for d in owner.dev].index(ptr)
            nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
            return device.asarray(owner.dev_np[k][:nbytes].view(dtype).reshape(shape))
        return owner  # an output buffer: the stand-in does not make a read-only alias

    for name, fn in dict(live_cuda_ring_create=create, live_cuda_ring_host_slot=host_slot,
                         live_cuda_ring_upload=upload, live_cuda_ring_acquire=acquire,
                         live_cuda_ring_release=release, live_cuda_ring_done=done, live_cuda_ring_seconds=seconds,
                         live_cuda_ring_synchronize=synchronize, live_cuda_ring_count=lambda: _alive[0],
                         device_wrap=device_wrap, cuda_device_count=lambda: 1).items():
        monkeypatch.setattr(_core, name, fn)
    monkeypatch.setattr(cuda_session, "cuda_available", lambda: True)
    # usbeam serve checks too (check_backend); a CPU-only build (USBEAM_CUDA=0, make asan) has
    # no device to count
    from usbeam import _backend

    monkeypatch.setattr(_backend, "cuda_available", lambda: True)
    monkeypatch.setattr(cuda_session.CudaSession, "_allocate_output",
                        staticmethod(lambda shape, dtype: device.empty(shape, dtype, device="cpu")))
    return usbeam
