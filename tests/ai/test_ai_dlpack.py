"""The AI hand-off functions take any DLPack producer without a copy (issue #6 leftover).

Host side, without a GPU: a host DLPack producer that is not an ndarray (what a CPU torch
tensor or a JAX array looks like to usbeam) gives the same numbers as the ndarray it views,
through a zero-copy view; device producers are recognised by ``__dlpack_device__`` and, on a
build with CUDA, imported through ``usbeam.device.asarray`` as views whose pointer, shape,
dtype and contiguity are checked without touching the memory (the foreign producer of
tests/device/test_dlpack.py stands in for torch/CuPy/JAX).  The GPU runs are in tests/ai/test_ai_cuda.py.
"""
import numpy as np
import pytest
from scipy import ndimage

import usbeam
from usbeam import ai, device
from dlpack_ctypes import READ_ONLY, CtypesProducer, data_pointer
from usbeam.device import KDLCUDA


class HostProducer:
    """Only the DLPack protocol of a host array: no __array__, not an ndarray."""

    def __init__(self, array):
        self._array = array

    def __dlpack__(self, **kwargs):
        return self._array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()


class CaiOnly:
    def __init__(self, shape):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": "<f4", "data": (0, False), "version": 3}


def test_host_producer_is_viewed_without_copy(rng):
    a = rng.standard_normal((3, 5)).astype(np.float32)
    view = ai._host_array("x", HostProducer(a))
    assert isinstance(view, np.ndarray) and np.shares_memory(view, a)
    with pytest.raises(TypeError, match="x"):
        ai._host_array("x", object())


def test_host_producers_match_ndarrays(rng):
    logits = rng.standard_normal((2, 37, 41)).astype(np.float32)
    want = usbeam.segment_threshold(logits, 0.3)
    np.testing.assert_array_equal(usbeam.segment_threshold(HostProducer(logits), 0.3), want)
    np.testing.assert_array_equal(want, logits > np.float32(0.3))

    scores = rng.standard_normal((2, 4, 9, 11)).astype(np.float32)
    np.testing.assert_array_equal(usbeam.segment_argmax(HostProducer(scores)), np.argmax(scores, axis=1))

    values = rng.standard_normal(1000).astype(np.float32) * 100
    np.testing.assert_array_equal(usbeam.float32_to_float16(HostProducer(values)).view(np.uint16),
                                  values.astype(np.float16).view(np.uint16))

    mask = rng.random((31, 29)) > 0.6
    labels, counts = usbeam.label(HostProducer(mask))
    want_labels, want_n = ndimage.label(mask)
    np.testing.assert_array_equal(labels, want_labels)
    assert int(np.ravel(counts)[0]) == want_n


def test_device_arrays_are_recognised():
    memory = np.zeros(8, np.float32)
    assert not ai._is_device_array(memory)
    assert not ai._is_device_array(HostProducer(memory))
    assert not ai._is_device_array(device.from_numpy(memory, device="cpu"))
    assert ai._is_device_array(CtypesProducer(memory, (8,), np.float32, device_type=KDLCUDA))
    assert ai._is_device_array(CaiOnly((8,)))


@pytest.fixture
def cuda_build():
    if not usbeam.build_info()["cuda"]:
        pytest.skip("needs a build with CUDA (device views are made without a GPU)")


def test_device_producer_pointer_checks(rng, cuda_build):
    """A kDLCUDA producer is imported as a view: its pointer comes back, a wrong shape, dtype,
    layout or a read-only output is refused naming the parameter; no memory is touched."""
    memory = rng.standard_normal(24).astype(np.float32)  # stands in for device memory
    make = lambda shape, **kw: CtypesProducer(memory, shape, np.float32, device_type=KDLCUDA, **kw)  # noqa: E731
    assert ai._device_pointer("logits", make((4, 6)), (4, 6), np.float32) == data_pointer(memory)
    with pytest.raises(ValueError, match="logits must have shape"):
        ai._device_pointer("logits", make((4, 6)), (6, 4), np.float32)
    with pytest.raises(TypeError, match="logits must have dtype"):
        ai._device_pointer("logits", make((4, 6)), (4, 6), np.float16)
    with pytest.raises(ValueError, match="logits"):
        ai._device_pointer("logits", make((4, 6), strides=(1, 4)), (4, 6), np.float32)
    with pytest.raises(TypeError, match="out must be a device array"):
        ai._device_pointer("out", memory, (24,), np.float32)
    readonly = make((24,), flags=READ_ONLY)
    with pytest.raises(ValueError, match="out is read-only"):
        ai._device_pointer("out", readonly, (24,), np.float32, writable=True)


@pytest.mark.parametrize("stream, seen", [(None, 1), (0, 1), (7, 7)])
def test_consumer_stream_reaches_the_producer(cuda_build, stream, seen):
    """The caller's cudaStream_t goes to __dlpack__ (array API: 0 = legacy default = 1), so the
    producer orders its pending writes before the kernels usbeam queues there."""
    memory = np.zeros(8, np.float32)
    producer = CtypesProducer(memory, (8,), np.float32, device_type=KDLCUDA)
    got = {}
    original = producer.__dlpack__

    def spy(**kwargs):
        got.update(kwargs)
        return original(**kwargs)

    producer.__dlpack__ = spy
    ai._device_pointer("x", producer, (8,), np.float32, stream=stream)
    assert got["stream"] == seen


def test_device_producer_without_gpu_is_an_error_not_a_crash(cuda_build):
    if usbeam.cuda_available():
        pytest.skip("a GPU is visible: tests/ai/test_ai_cuda.py runs the device paths")
    memory = np.zeros((4, 6), np.float32)
    producer = CtypesProducer(memory, (4, 6), np.float32, device_type=KDLCUDA)
    out = CtypesProducer(np.zeros((4, 6), np.uint8), (4, 6), np.uint8, device_type=KDLCUDA)
    with pytest.raises(usbeam.UsbeamError, match="cuda"):
        usbeam.segment_threshold(producer, out=out)
