"""DeviceArray in CUDA memory: explicit copies through the pinned staging buffers, DLPack and
CUDA-array-interface exchange of device memory, peers (CuPy, PyTorch) when installed.
Needs a GPU: every test is marked cuda and skipped without one."""
import gc

import numpy as np
import pytest

import usbeam
from usbeam import device

pytestmark = pytest.mark.cuda

KDLCPU, KDLCUDA = 1, 2


def random_array(rng, shape, dtype):
    dtype = np.dtype(dtype)
    if dtype.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, shape, endpoint=True).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("dtype", [np.int16, np.float32, np.complex64, np.uint8, np.float16, np.int32,
                                   np.float64, np.bool_])
def test_copies_round_trip(rng, dtype):
    host = random_array(rng, (5, 7, 11), dtype)
    d = device.from_numpy(host)
    assert d.device == "cuda:0" and d.shape == host.shape and d.dtype == host.dtype
    back = d.to_numpy()
    assert back.ctypes.data != host.ctypes.data
    np.testing.assert_array_equal(back, host)


def test_copy_spans_several_staging_chunks(rng):
    host = random_array(rng, (6_000_001,), np.float32)  # 24 MB: three 8 MiB chunks and a tail
    d = device.from_numpy(host)
    out = np.full_like(host, np.nan)
    d.to_numpy(out=out)
    np.testing.assert_array_equal(out, host)


class Spy:
    """A producer that forwards to another DLPack object and records the consumer's arguments."""

    def __init__(self, inner):
        self.inner = inner
        self.kwargs = None

    def __dlpack_device__(self):
        return self.inner.__dlpack_device__()

    def __dlpack__(self, **kwargs):
        self.kwargs = kwargs
        return self.inner.__dlpack__(**kwargs)


def test_dlpack_of_device_memory_is_zero_copy(rng):
    host = random_array(rng, (12, 10), np.complex64)
    d = device.from_numpy(host)
    spy = Spy(d[2:5])
    view = device.asarray(spy, stream=2)
    assert spy.kwargs == {"stream": 2, "max_version": (1, 0)}
    assert view.ptr == d.ptr + 2 * 10 * 8 and view.device == "cuda:0"
    del d
    gc.collect()
    np.testing.assert_array_equal(view.to_numpy(), host[2:5])


def test_numpy_asks_for_a_host_copy(rng):
    host = random_array(rng, (3, 4), np.float32)
    d = device.from_numpy(host)
    try:
        got = np.from_dlpack(d, device="cpu")  # dl_device=(kDLCPU, 0): usbeam copies, IS_COPIED
    except TypeError:
        pytest.skip("this NumPy has no device= in from_dlpack")
    np.testing.assert_array_equal(got, host)
    with pytest.raises(BufferError, match="copy=False"):
        d.__dlpack__(max_version=(1, 0), dl_device=(KDLCPU, 0), copy=False)


def test_cuda_array_interface_both_ways(rng):
    host = random_array(rng, (4, 6), np.int16)
    d = device.from_numpy(host)
    cai = d.__cuda_array_interface__
    assert cai["data"][0] == d.ptr and cai["shape"] == (4, 6) and cai["typestr"] == "<i2"

    class Exporter:
        def __init__(self, interface, owner):
            self.__cuda_array_interface__ = interface
            self.owner = owner

    exporter = Exporter(dict(cai), d)
    view = device.asarray(exporter)
    assert view.ptr == d.ptr
    del d, exporter
    gc.collect()
    np.testing.assert_array_equal(view.to_numpy(), host)  # the view keeps the exporter alive
    strided = Exporter(dict(cai, strides=(2, 8)), view)
    with pytest.raises(ValueError, match="C-contiguous"):
        device.asarray(strided)


def test_cuda_array_interface_refuses_a_misaligned_pointer(rng):
    """A complex64 view 4 bytes into an allocation (legal for a CAI producer reinterpreting a
    buffer) would make the kernels' 8-byte float2 loads fault and kill the CUDA context."""
    d = device.from_numpy(random_array(rng, (9, 8), np.float32))

    class Exporter:
        def __init__(self, interface):
            self.__cuda_array_interface__ = interface

    shifted = dict(d.__cuda_array_interface__, data=(d.ptr + 4, False), shape=(8, 4), typestr="<c8")
    with pytest.raises(ValueError, match="not aligned to its 8-byte complex64"):
        device.asarray(Exporter(shifted), name="iq")
    aligned = dict(shifted, data=(d.ptr + 8, False))
    assert device.asarray(Exporter(aligned)).ptr == d.ptr + 8


def test_plan_output_stream_is_ordered_for_consumers(rng):
    iq = (rng.standard_normal((64, 64)) + 1j * rng.standard_normal((64, 64))).astype(np.complex64)
    plan = usbeam.BModePlan(iq.shape, 40.0, output="db", backend="cuda")
    out = plan(device.from_numpy(iq))
    assert out.stream == plan.cuda.stream  # pending writes on the plan's stream
    assert out.__cuda_array_interface__["stream"] == plan.cuda.stream
    consumer = Spy(out)
    view = device.asarray(consumer, stream=1)  # the legacy stream waits for the plan's
    np.testing.assert_allclose(view.to_numpy(), usbeam.BModePlan(iq.shape, 40.0, output="db")(iq),
                               atol=1e-5)


def test_cupy_peer(rng):
    cupy = pytest.importorskip("cupy")
    host = random_array(rng, (8, 9), np.float32)
    d = device.from_numpy(host)
    c = cupy.from_dlpack(d)
    assert c.data.ptr == d.ptr
    back = device.asarray(c)
    assert back.ptr == d.ptr
    np.testing.assert_array_equal(cupy.asnumpy(c), host)
    row = cupy.from_dlpack(d[1])  # a view: its own first element, not row 0
    assert row.data.ptr == d.ptr + 9 * 4
    np.testing.assert_array_equal(cupy.asnumpy(row), host[1])


def test_torch_peer(rng):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch without CUDA")
    host = random_array(rng, (8, 9), np.complex64)
    t = torch.from_dlpack(device.from_numpy(host))
    assert t.is_cuda and t.shape == (8, 9)
    back = device.asarray(t)
    assert back.ptr == t.data_ptr()
    got = usbeam.BModePlan((8, 9), 40.0, backend="cuda")(t)  # a torch tensor straight into a plan
    assert isinstance(got, usbeam.DeviceArray)
    np.testing.assert_array_equal(got.to_numpy(), usbeam.BModePlan((8, 9), 40.0)(host))
    d = device.from_numpy(host)
    for view, want in ((d[1], host[1]), (d[2:5], host[2:5])):  # views of a DeviceArray
        tv = torch.from_dlpack(view)
        assert tv.data_ptr() == view.ptr
        np.testing.assert_array_equal(tv.cpu().numpy(), want)
