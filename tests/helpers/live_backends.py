"""The session backends one live-session test body runs on (tests/live/test_live.py).

  'cpu'           usbeam.live.Session(..., backend='cpu'): threads, host slots
  'cuda-standin'  backend='cuda' with the ring replaced by tests/helpers/live_cuda_standin.py (host
                  memory, slow "DMA" on its own thread): the CUDA session's host side, everywhere
  'cuda'          backend='cuda' on the real ring (cuda/runtime/slot_ring.cu), marked cuda:
                  on a GPU and under the CUDA emulator (make test-emu)

A test writes its pipeline once, for the host (CompoundBMode, Stamp, a plain callable with
shapes); on the CUDA backends it runs inside live_pipelines.OnDevice, which takes the slot as
a DeviceArray and writes the image into a DeviceArray, so every backend must give the same
bytes.  What differs between backends and is not the behaviour under test (thread counts,
rings, DLPack device, how a leased image is read) is stated here.

settle() is for tests that count live objects (threads, rings): it collects what earlier
tests left behind first, so that a count taken then does not change under a later collection.
"""
import gc
import threading
import time

import numpy as np
import pytest

from live_pipelines import OnDevice
from usbeam import device
from usbeam.live import Session
from usbeam.live.pipeline import CallablePipeline

BACKENDS = ["cpu", "cuda-standin", pytest.param("cuda", marks=pytest.mark.cuda)]
_SHAPES = ("input_shape", "input_dtype", "output_shape", "output_dtype")
KDLCPU, KDLCUDA = 1, 2


class LiveBackend:
    def __init__(self, name):
        self.name = name
        self.backend = "cpu" if name == "cpu" else "cuda"
        self.on_gpu = name == "cuda"
        self.dlpack_device_type = KDLCUDA if self.on_gpu else KDLCPU
        # threads a running session adds (compute; CUDA: + upload) and a ring adds while it
        # lives (the stand-in's "upload stream" and "compute stream"); rings a session holds
        self.session_threads = 1 if self.backend == "cpu" else 2
        self.ring_threads = 2 if name == "cuda-standin" else 0
        self.rings = 0 if self.backend == "cpu" else 1

    def pipeline(self, pipeline, **shapes):
        """The test's host pipeline as this backend runs it."""
        if self.backend == "cpu":
            return pipeline
        if not all(hasattr(pipeline, name) for name in _SHAPES):
            pipeline = CallablePipeline(pipeline, **shapes)
        return OnDevice(pipeline)

    def session(self, pipeline, **kwargs):
        """Session(pipeline, ...) on this backend; explicit shapes still reach the Session,
        which checks them against the pipeline as it would on the CPU."""
        shapes = {name: kwargs[name] for name in _SHAPES if kwargs.get(name) is not None}
        return Session(self.pipeline(pipeline, **shapes), backend=self.backend, **kwargs)

    @staticmethod
    def host(image):
        """An owned host copy of a result image (a callback's view is valid during the call)."""
        return image.to_numpy() if isinstance(image, device.DeviceArray) else np.array(image)

    def __repr__(self):
        return self.name


def worker_threads():
    """The threads of live sessions (compute; CUDA: upload) and of stand-in rings."""
    return [t for t in threading.enumerate() if t.name.startswith(("usbeam-live-", "standin-"))]


def settle(keep=(), timeout=5.0):
    """Collect the sessions, rings and slot views earlier tests left unreferenced and wait for
    their threads to end, so that thread and ring counts taken now do not change under a later
    collection.  A session is collected while running (its threads hold it weakly), but a
    worker holding it for one frame when gc.collect() runs keeps it, and its ring, until the
    next collection: so collect again until those threads are gone, then once more."""
    deadline = time.monotonic() + timeout
    gc.collect()
    while set(worker_threads()) - set(keep) and time.monotonic() < deadline:
        time.sleep(0.01)
        gc.collect()
    gc.collect()
