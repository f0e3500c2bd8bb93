"""The pieces of a live session's rings (see session.py): slot and output-buffer records,
the pipeline generation swapped in by update(), results and the session's exceptions.

Slot states: FREE -> WRITING (a push() copies into it) -> READY -> COMPUTING -> FREE; the
CUDA session (cuda_session.py) adds READY -> UPLOADING (its upload thread queues the
host-to-device copy) -> UPLOADED -> COMPUTING.
Buffers are page aligned (the CPU stand-in for pinned host memory).
"""
import numpy as np

from .._core import UsbeamError
from .pipeline import describe

FREE, WRITING, READY, COMPUTING, UPLOADING, UPLOADED = range(6)
_PAGE = 4096


class SessionStopped(UsbeamError):
    """The session is stopped (or stopping): the frame was not accepted."""


class FrameDropped(UsbeamError):
    """The requested frame was dropped under overload (policy 'drop_oldest') or at stop."""


class FrameFailed(UsbeamError):
    """The pipeline raised on the requested frame."""


def _aligned_empty(shape, dtype, alignment=_PAGE):
    """An uninitialised C-contiguous array whose data start on a page boundary (the CPU
    stand-in for a pinned host buffer: whole pages, never shared with another object)."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape)) * dtype.itemsize
    raw = np.empty(nbytes + alignment, np.uint8)
    offset = (-raw.ctypes.data) % alignment
    return raw[offset:offset + nbytes].view(dtype).reshape(shape)


class Result:
    """One processed frame.

    ``image`` is a host copy, or (``copy=False``, callbacks) a read-only zero-copy view of
    the output ring, valid until :meth:`release` (or the end of a ``with`` block); numpy
    arrays export DLPack, so ``np.from_dlpack(result)`` or any DLPack consumer works.  In a
    CUDA session the view is a usbeam DeviceArray (DLPack and the CUDA array interface).
    """

    __slots__ = ("frame_id", "image", "meta", "latency_s", "timings", "generation", "_lease")

    def __init__(self, frame_id, image, meta, latency_s, timings, generation, lease=None):
        self.frame_id = frame_id
        self.image = image
        self.meta = meta
        self.latency_s = latency_s
        self.timings = timings
        self.generation = generation
        self._lease = lease

    def release(self):
        """End a zero-copy lease (no-op for copies)."""
        lease, self._lease = self._lease, None
        if lease is not None:
            lease()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()

    def __dlpack__(self, **kwargs):
        return self.image.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.image.__dlpack_device__()

    @property
    def __cuda_array_interface__(self):
        """The image's CUDA array interface (a CUDA session's DeviceArray; AttributeError
        for a host image, so hasattr() tells)."""
        return self.image.__cuda_array_interface__

    def __del__(self):
        try:
            self.release()
        except Exception:  # interpreter shutdown
            pass

    def __array__(self, dtype=None, copy=None):
        """``np.asarray(result)`` is the image (a host image; a CUDA session's image is on the
        device: TypeError naming ``result.image.to_numpy()``, the explicit copy)."""
        if not isinstance(self.image, np.ndarray):
            raise TypeError("this Result's image is on the device: copy it with result.image.to_numpy()")
        if copy:
            return np.array(self.image, dtype=dtype, copy=True)
        return self.image if dtype is None else self.image.astype(dtype, copy=False)

    def __repr__(self):
        return (f"Result(frame_id={self.frame_id}, shape={self.image.shape}, dtype={self.image.dtype}, "
                f"latency_s={self.latency_s:.6f})")


class _Slot:
    __slots__ = ("index", "buffer", "state", "frame_id", "meta", "push_ns", "generation")

    def __init__(self, index, shape, dtype, allocate=_aligned_empty):
        self.index = index
        self.buffer = allocate(shape, dtype) if allocate is not None else None
        self.state = FREE
        self.frame_id = 0
        self.meta = None
        self.push_ns = 0
        self.generation = None


class _OutputEntry:
    __slots__ = ("array", "frame_id", "readers", "written_at", "meta", "latency_s", "timings")

    def __init__(self, shape, dtype, allocate=_aligned_empty):
        self.array = allocate(shape, dtype)
        self.frame_id = 0
        self.readers = 0
        self.written_at = 0
        self.meta = None
        self.latency_s = 0.0
        self.timings = None


class _Generation:
    """A pipeline with its channel map and output ring: swapped in whole by update()."""

    def __init__(self, number, pipeline, channel_map, n_results, allocate=_aligned_empty):
        self.number = number
        self.pipeline = pipeline
        self.channel_map = channel_map
        self.allocate = allocate  # output buffers: page-aligned host arrays, or DeviceArrays
        self.input_shape, self.input_dtype, self.output_shape, self.output_dtype = describe(pipeline)
        self.ring = [self.new_entry() for _ in range(n_results)]

    def new_entry(self):
        return _OutputEntry(self.output_shape, self.output_dtype, self.allocate)
