"""Zero-copy exchange of host memory (kDLCPU) through DLPack, without a GPU.

The DLPack structs are transcribed with ctypes (tests/helpers/dlpack_ctypes.py), independently
of csrc/python/device/dlpack.h, so the tests read the capsules usbeam exports field by field and build foreign producers (byte
offsets, strides, other versions and devices) that NumPy cannot make.  NumPy is the peer:
``np.from_dlpack`` consumes usbeam's capsules and NumPy arrays are imported by usbeam.
"""
import ctypes
import gc
import threading

import numpy as np
import pytest

import usbeam
from usbeam import device

from dlpack_ctypes import (c_int64_p, DLDevice, DLDataType, DLTensor, DLManagedTensor, LEGACY_DELETER, DLPackVersion, DLManagedTensorVersioned, VERSIONED_DELETER, READ_ONLY, IS_COPIED, KDLCPU, KDLCUDA, KDLOPENCL, CODES, _api, VERSIONED_NAME, LEGACY_NAME, USED_VERSIONED_NAME, capsule_name, capsule_struct, data_pointer, DTYPES, random_array, CtypesProducer, LegacyOnly)  # noqa: F401


# ---- NumPy -> usbeam -> NumPy ------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_round_trip_is_zero_copy(rng, dtype):
    a = random_array(rng, (3, 5, 7), dtype)
    expected = a.copy()
    d = device.asarray(a)
    assert isinstance(d, usbeam.DeviceArray)
    assert d.ptr == data_pointer(a) and d.shape == a.shape and d.dtype == a.dtype
    assert d.device == "cpu" and d.__dlpack_device__() == (KDLCPU, 0)
    b = np.from_dlpack(d)
    assert data_pointer(b) == data_pointer(a)
    np.testing.assert_array_equal(b, expected)
    # the memory is shared, not copied: a write through NumPy shows through usbeam
    b.reshape(-1)[4] = b.reshape(-1)[0]
    np.testing.assert_array_equal(d.to_numpy(), a)


def test_views_keep_memory_alive(rng):
    a = random_array(rng, (64, 33), np.float32)
    expected = a.copy()
    d = device.asarray(a)
    b = np.from_dlpack(d)
    del a, d
    gc.collect()
    np.testing.assert_array_equal(b, expected)


def test_usbeam_owned_memory_exports(rng):
    src = random_array(rng, (6, 40), np.complex64)
    d = device.from_numpy(src, device="cpu")
    assert d.ptr != data_pointer(src) and d.ptr % 256 == 0  # a copy, aligned as DLPack recommends
    b = np.from_dlpack(d)
    assert data_pointer(b) == d.ptr
    del d
    gc.collect()
    np.testing.assert_array_equal(b, src)


def test_to_numpy_copies(rng):
    a = random_array(rng, (4, 9), np.int16)
    d = device.asarray(a)
    host = d.to_numpy()
    assert data_pointer(host) != data_pointer(a)
    np.testing.assert_array_equal(host, a)
    out = np.full((4, 9), -1, np.int16)
    assert d.to_numpy(out=out) is out
    np.testing.assert_array_equal(out, a)
    with pytest.raises(ValueError, match="out"):
        d.to_numpy(out=np.empty((9, 4), np.int16))
    with pytest.raises(TypeError, match="out"):
        d.to_numpy(out=np.empty((4, 9), np.float32))


@pytest.mark.parametrize("shape", [(), (0,), (3, 0, 2)])
def test_empty_and_zero_dim(rng, shape):
    a = random_array(rng, shape, np.float64)
    d = device.asarray(a)
    assert d.shape == shape and d.size == a.size
    np.testing.assert_array_equal(np.from_dlpack(d), a)


# ---- the capsules usbeam exports ------------------------------------------------------------

def test_versioned_capsule_fields(rng):
    a = random_array(rng, (2, 3, 4), np.complex64)
    d = device.asarray(a)
    capsule = d.__dlpack__(max_version=(1, 0))
    assert capsule_name(capsule) == "dltensor_versioned"
    m = capsule_struct(capsule, DLManagedTensorVersioned)
    assert m.version.major == 1 and m.flags == 0
    t = m.dl_tensor
    assert (t.device.device_type, t.device.device_id) == (KDLCPU, 0)
    assert (t.dtype.code, t.dtype.bits, t.dtype.lanes) == (5, 64, 1)
    assert [t.shape[i] for i in range(t.ndim)] == [2, 3, 4]
    assert not t.strides  # compact
    assert t.data + t.byte_offset == data_pointer(a)


def test_legacy_capsule_without_max_version(rng):
    a = random_array(rng, (5,), np.int16)
    capsule = device.asarray(a).__dlpack__()
    assert capsule_name(capsule) == "dltensor"
    t = capsule_struct(capsule, DLManagedTensor).dl_tensor
    assert (t.dtype.code, t.dtype.bits) == (0, 16) and t.ndim == 1 and t.shape[0] == 5
    assert t.data + t.byte_offset == data_pointer(a)
    assert capsule_name(device.asarray(a).__dlpack__(max_version=(0, 8))) == "dltensor"


def test_view_exports_its_first_element_as_data(rng):
    """A view exports data = its first element and byte_offset 0: consumers that ignore
    byte_offset (PyTorch before late 2025) then read the right rows (cuda-first-contact A5)."""
    a = random_array(rng, (10, 6), np.float32)
    d = device.asarray(a)
    view = d[3:7]
    assert view.shape == (4, 6) and view.ptr == data_pointer(a) + 3 * 6 * 4
    for capsule, struct in ((view.__dlpack__(max_version=(1, 0)), DLManagedTensorVersioned),
                            (view.__dlpack__(), DLManagedTensor)):
        t = capsule_struct(capsule, struct).dl_tensor
        assert t.data == data_pointer(a) + 3 * 6 * 4 and t.byte_offset == 0
    b = np.from_dlpack(view)
    assert data_pointer(b) == data_pointer(a) + 72
    np.testing.assert_array_equal(b, a[3:7])
    np.testing.assert_array_equal(np.from_dlpack(d[-1]), a[-1])
    np.testing.assert_array_equal(np.from_dlpack(d.reshape((60,))), a.reshape(-1))
    with pytest.raises(IndexError, match="step"):
        d[::2]


def test_copy_request_sets_is_copied(rng):
    a = random_array(rng, (3, 4), np.float64)
    d = device.asarray(a)
    capsule = d.__dlpack__(max_version=(1, 0), copy=True)
    m = capsule_struct(capsule, DLManagedTensorVersioned)
    assert m.flags & IS_COPIED
    assert m.dl_tensor.data + m.dl_tensor.byte_offset != data_pointer(a)
    b = np.from_dlpack(d, copy=True)
    assert data_pointer(b) != data_pointer(a)
    np.testing.assert_array_equal(b, a)
    assert not capsule_struct(d.__dlpack__(max_version=(1, 0), copy=False), DLManagedTensorVersioned).flags


def test_export_refusals(rng):
    d = device.asarray(random_array(rng, (3,), np.float32))
    with pytest.raises(BufferError, match="stream"):
        d.__dlpack__(stream=5)
    with pytest.raises(BufferError, match="copy=False"):
        d.__dlpack__(max_version=(1, 0), dl_device=(KDLCUDA, 0), copy=False)
    with pytest.raises(BufferError, match="dl_device"):
        d.__dlpack__(max_version=(1, 0), dl_device=(KDLOPENCL, 0))
    with pytest.raises(TypeError, match="max_version"):
        d.__dlpack__(max_version=1)
    assert not hasattr(d, "__cuda_array_interface__")  # host memory has no CUDA interface


def test_read_only_arrays(rng):
    a = random_array(rng, (4, 4), np.float32)
    a.flags.writeable = False
    d = device.asarray(a)  # NumPy sets READ_ONLY in the versioned capsule
    assert d.readonly
    m = capsule_struct(d.__dlpack__(max_version=(1, 0)), DLManagedTensorVersioned)
    assert m.flags & READ_ONLY
    with pytest.raises(BufferError, match="read-only"):
        d.__dlpack__()  # the legacy capsule cannot say so
    b = np.from_dlpack(d)
    assert not b.flags.writeable and data_pointer(b) == data_pointer(a)
    with pytest.raises(ValueError, match="read-only"):
        d.copy_from_host(np.zeros((4, 4), np.float32))


# ---- what usbeam imports -----------------------------------------------------------------------

def test_numpy_capsule_is_consumed(rng):
    a = random_array(rng, (8,), np.float32)

    class Spy:
        def __dlpack_device__(self):
            return a.__dlpack_device__()

        def __dlpack__(self, **kwargs):
            self.kwargs = kwargs
            self.capsule = a.__dlpack__(**kwargs)
            return self.capsule

    spy = Spy()
    d = device.asarray(spy)
    assert spy.kwargs == {"stream": None, "max_version": (1, 0)}  # CPU: the consumer stream is None
    assert capsule_name(spy.capsule) == "used_dltensor_versioned"
    assert d.ptr == data_pointer(a)


def test_legacy_producer_fallback(rng):
    a = random_array(rng, (3, 7), np.float64)
    producer = LegacyOnly(a)
    d = device.asarray(producer)
    assert capsule_name(producer.capsule) == "used_dltensor"
    assert d.ptr == data_pointer(a)
    np.testing.assert_array_equal(d.to_numpy(), a)


@pytest.mark.parametrize("legacy", [False, True])
def test_foreign_byte_offset_and_deleter(rng, legacy):
    memory = random_array(rng, (40,), np.float32)
    producer = CtypesProducer(memory, (3, 4), np.float32, byte_offset=5 * 4, legacy=legacy)
    d = device.asarray(producer)
    assert d.ptr == data_pointer(memory) + 20
    np.testing.assert_array_equal(d.to_numpy(), memory[5:17].reshape(3, 4))
    # the deleter runs once, when the last user (here a NumPy array viewing it) is gone
    b = np.from_dlpack(d)
    del d
    gc.collect()
    assert producer.deleted == 0
    np.testing.assert_array_equal(b, memory[5:17].reshape(3, 4))
    del b
    gc.collect()
    assert producer.deleted == 1


def test_foreign_compact_strides_accepted(rng):
    memory = random_array(rng, (12,), np.int32)
    producer = CtypesProducer(memory, (3, 1, 4), np.int32, strides=(4, 99, 1))  # size-1 axis: any stride
    np.testing.assert_array_equal(device.asarray(producer).to_numpy(), memory.reshape(3, 1, 4))


def test_unconsumed_export_frees_on_drop(rng):
    memory = random_array(rng, (6,), np.float32)
    producer = CtypesProducer(memory, (6,), np.float32)
    d = device.asarray(producer)
    capsule = d.__dlpack__(max_version=(1, 0))
    del d
    gc.collect()
    assert producer.deleted == 0  # the capsule still holds the memory
    del capsule  # never consumed: its destructor calls usbeam's deleter
    gc.collect()
    assert producer.deleted == 1


def test_deleter_runs_without_the_gil_on_another_thread(rng):
    memory = random_array(rng, (16,), np.float32)
    producer = CtypesProducer(memory, (16,), np.float32)
    d = device.asarray(producer)
    capsule = d.__dlpack__(max_version=(1, 0))
    m = capsule_struct(capsule, DLManagedTensorVersioned)
    assert _api.PyCapsule_SetName(capsule, USED_VERSIONED_NAME) == 0  # consumed by "C code"
    deleter = ctypes.cast(m.deleter, ctypes.CFUNCTYPE(None, ctypes.c_void_p))  # CFUNCTYPE: GIL released
    address = ctypes.addressof(m)
    thread = threading.Thread(target=deleter, args=(address,))
    thread.start()
    thread.join()
    assert producer.deleted == 0  # d still holds the memory
    np.testing.assert_array_equal(d.to_numpy(), memory)
    del d, capsule
    gc.collect()
    assert producer.deleted == 1


def test_refuses_non_contiguous(rng):
    a = random_array(rng, (6, 8), np.float32)
    with pytest.raises(ValueError, match=r"rf must be C-contiguous"):
        device.asarray(a[:, ::2], name="rf")
    with pytest.raises(ValueError, match=r"rf must be C-contiguous"):
        device.asarray(a.T, name="rf")
    producer = CtypesProducer(a, (6, 4), np.float32, strides=(8, 2))
    with pytest.raises(ValueError, match="C-contiguous"):
        device.asarray(producer)
    assert producer.deleted == 0 and capsule_name(producer.capsule) == "dltensor_versioned"
    del producer.capsule  # refused, so not consumed: the capsule's owner still frees it


@pytest.mark.parametrize("dtype", [np.int64, np.uint16, np.complex128, np.int8])
def test_refuses_unsupported_dtypes(rng, dtype):
    a = np.zeros((3, 3), dtype)
    with pytest.raises(TypeError, match=r"image: DLPack dtype .* not supported"):
        device.asarray(a, name="image")


def test_refuses_vector_lanes_devices_and_versions(rng):
    memory = random_array(rng, (8,), np.float32)
    with pytest.raises(TypeError, match="lanes"):
        device.asarray(CtypesProducer(memory, (4,), np.float32, lanes=2))
    with pytest.raises(TypeError, match="device type 4"):
        device.asarray(CtypesProducer(memory, (8,), np.float32, device_type=KDLOPENCL))
    future = CtypesProducer(memory, (8,), np.float32, version=(2, 0))
    with pytest.raises(BufferError, match="version 2.0"):
        device.asarray(future)
    assert capsule_name(future.capsule) == "dltensor_versioned"  # left for its owner to free
    with pytest.raises(TypeError, match="DLPack"):
        device.asarray([1.0, 2.0])


def test_cuda_memory_without_a_cuda_build_is_refused(rng):
    if usbeam.build_info()["cuda"]:
        pytest.skip("this build has CUDA: a CUDA tensor is accepted as a device view")
    memory = random_array(rng, (8,), np.float32)
    with pytest.raises(TypeError, match="built without CUDA"):
        device.asarray(CtypesProducer(memory, (8,), np.float32, device_type=KDLCUDA))


def test_cuda_tensor_view_and_export_without_touching_memory(rng):
    """A CUDA build imports a kDLCUDA tensor as a view and re-exports it (DLPack and the CUDA
    array interface) without any CUDA call, so this runs without a GPU: no data is read."""
    if not usbeam.build_info()["cuda"]:
        pytest.skip("needs a build with CUDA")
    memory = random_array(rng, (32,), np.float32)  # stands in for device memory, never dereferenced
    producer = CtypesProducer(memory, (4, 8), np.float32, device_type=KDLCUDA, byte_offset=0)
    seen = {}
    original = producer.__dlpack__

    def spy(**kwargs):
        seen.update(kwargs)
        return original(**kwargs)

    producer.__dlpack__ = spy
    d = device.asarray(producer)
    assert seen["stream"] == 1  # None from the caller = the legacy default stream, array API
    assert d.device == "cuda:0" and d.ptr == data_pointer(memory) and d.stream is None
    cai = d.__cuda_array_interface__
    assert cai["shape"] == (4, 8) and cai["typestr"] == "<f4" and cai["version"] == 3
    assert cai["data"] == (data_pointer(memory), False) and cai["strides"] is None and cai["stream"] is None
    capsule = d.__dlpack__(stream=-1, max_version=(1, 0))
    t = capsule_struct(capsule, DLManagedTensorVersioned).dl_tensor
    assert (t.device.device_type, t.data) == (KDLCUDA, data_pointer(memory))
    assert d.__dlpack_device__() == (KDLCUDA, 0)
    with pytest.raises(ValueError, match="ambiguous"):
        d.__dlpack__(stream=0)
    with pytest.raises(ValueError, match="ambiguous"):
        device.asarray(CtypesProducer(memory, (8,), np.float32, device_type=KDLCUDA), stream=0)
    del d, capsule
    gc.collect()
    assert producer.deleted == 1


def test_device_empty_and_errors():
    d = device.empty((2, 3), np.uint8, device="cpu")
    assert d.shape == (2, 3) and d.dtype == np.uint8 and d.nbytes == 6 and d.ptr % 256 == 0
    with pytest.raises(TypeError, match="dtype"):
        device.empty((2,), np.int64, device="cpu")
    with pytest.raises(ValueError, match="device"):
        device.empty((2,), np.float32, device="gpu")
    with pytest.raises(ValueError, match="shape entry must be >= 0"):
        device.empty((2, -1), np.float32, device="cpu")
    for bad in (3.5, (2, 1.5), "ab"):          # int() would truncate 3.5 to 3
        with pytest.raises(TypeError, match="shape"):
            device.empty(bad, np.float32, device="cpu")
    with pytest.raises(MemoryError, match="shape"):
        device.empty((1 << 40, 1 << 20), np.float32, device="cpu")
    if not usbeam.cuda_available():
        with pytest.raises(usbeam.UsbeamError, match="CUDA"):
            device.empty((2,), np.float32, device="cuda")
