"""Hadamard decode CUDA twin (cuda/hadamard.cu) against the CPU backend: the three CUDA paths
('direct': registers for orders <= 32, shared-memory tiles above; 'fast': butterflies;
'gemm': cuBLAS FP32), every input dtype each path takes, both output layouts, int32 output,
orders 2^k, 12*2^k and 20*2^k, and a user matrix.  Outputs are poisoned before the run and
must be fully written.  Needs a GPU (marked cuda: skipped without one), except the last test."""
import numpy as np
import pytest

import usbeam
from tolerances import TOLERANCES
from usbeam import _core, device


def encoded(rng, shape, dtype, axis, order):
    """H x of random integers (int input) or random floats, moved to the transmit axis."""
    if dtype == np.float32:
        return rng.standard_normal(shape).astype(np.float32)
    values = rng.integers(-60, 61, shape)
    h = usbeam.hadamard(order).astype(np.int64)
    enc = np.moveaxis(np.tensordot(h, np.moveaxis(values, axis, 0), axes=1), 0, axis)
    return enc.astype(dtype)


def run_poisoned(plan, data):
    """Decode on the device into a poisoned output, twice with two poisons: every element must
    be written (the two results are equal and hold no poison)."""
    results = []
    for poison in (0, 1):
        if plan.out_dtype == np.float32:
            fill = np.nan if poison == 0 else np.inf
        else:
            fill = np.iinfo(np.int32).min if poison == 0 else np.iinfo(np.int32).max
        out = device.from_numpy(np.full(plan.out_shape, fill, plan.out_dtype))
        assert plan(device.from_numpy(data), out=out) is out
        results.append(out.to_numpy())
    np.testing.assert_array_equal(results[0], results[1])
    if plan.out_dtype == np.float32:
        assert np.all(np.isfinite(results[0])), "poison left: some outputs were not written"
    return results[0]


def compare(rng, order, dtype, algorithm, output="float32", transmit_last=False, shape=None, axis=1, matrix=None):
    shape = shape or (3, order, 77)
    data = encoded(rng, shape, dtype, axis, order)
    key = order if matrix is None else matrix
    cpu_algorithm = "direct" if algorithm == "gemm" else algorithm
    kw = dict(axis=axis, dtype=dtype, output=output, transmit_last=transmit_last)
    gpu = usbeam.HadamardDecodePlan(shape, key, algorithm=algorithm, backend="cuda", **kw)
    cpu = usbeam.HadamardDecodePlan(shape, key, algorithm=cpu_algorithm, **kw)
    got, want = run_poisoned(gpu, data), cpu(data)
    if algorithm == "gemm" and dtype == np.float32:  # FP32 sums where the CPU sums in double
        scale = np.abs(data).max(axis=axis, keepdims=True).max()
        np.testing.assert_allclose(got, want, rtol=0, atol=TOLERANCES["hadamard_cuda_gemm_float32_abs"] * scale)
    else:
        np.testing.assert_array_equal(got, want)  # bit-exact
    return gpu


ORDERS = [1, 2, 8, 12, 20, 32, 40, 64, 96, 128, 256]


@pytest.mark.cuda
@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("dtype", [np.int16, np.int32, np.float32])
@pytest.mark.parametrize("algorithm", ["direct", "fast"])
def test_direct_and_fast_bit_exact(rng, order, dtype, algorithm):
    compare(rng, order, dtype, algorithm)


@pytest.mark.cuda
@pytest.mark.parametrize("order", [8, 12, 128])
@pytest.mark.parametrize("dtype", [np.int16, np.float32])
def test_gemm(rng, order, dtype):
    gpu = compare(rng, order, dtype, "gemm")
    assert set(gpu.cuda.stage_times()) == {"hadamard.convert", "hadamard.decode", "hadamard.scale"}


@pytest.mark.cuda
@pytest.mark.parametrize("algorithm", ["direct", "fast", "gemm"])
@pytest.mark.parametrize("order", [16, 64])
def test_int32_output_and_transmit_last(rng, algorithm, order):
    compare(rng, order, np.int16, algorithm, output="int32", transmit_last=True)
    compare(rng, order, np.int16, algorithm, transmit_last=True, shape=(order, 5, 33), axis=0)


@pytest.mark.cuda
def test_transmit_axis_last_and_user_matrix(rng):
    compare(rng, 24, np.int32, "direct", shape=(7, 9, 24), axis=2)  # inner = 1: strided columns
    h = usbeam.hadamard(48)[rng.permutation(48)] * rng.choice([-1, 1], 48)[:, None].astype(np.int8)
    compare(rng, 48, np.int16, "direct", matrix=np.ascontiguousarray(h, dtype=np.int8))
    compare(rng, 48, np.int16, "gemm", matrix=np.ascontiguousarray(h, dtype=np.int8))


@pytest.mark.cuda
def test_host_arrays_strict_and_refusals(rng):
    data = encoded(rng, (16, 40), np.int16, 0, 16)
    gpu = usbeam.HadamardDecodePlan(data.shape, 16, dtype=np.int16, backend="cuda")
    np.testing.assert_array_equal(gpu(data), usbeam.hadamard_decode(data, 16))
    strict = usbeam.HadamardDecodePlan(data.shape, 16, dtype=np.int16, backend="cuda", strict=True)
    with pytest.raises(TypeError, match="strict"):
        strict(data)
    with pytest.raises(TypeError, match="int16"):
        gpu(device.from_numpy(data.astype(np.float32)))
    with pytest.raises(TypeError, match="gemm"):
        usbeam.HadamardDecodePlan(data.shape, 16, dtype=np.int32, algorithm="gemm", backend="cuda")


@pytest.mark.cuda
def test_copy_bandwidth_probe():
    """The benchmark's yardstick: a D2D copy moves 2 bytes per byte copied; any current GPU is
    between 100 GB/s and 20 TB/s, and a larger copy is not slower per byte by much."""
    if usbeam.build_info()["cuda_emulated"]:
        pytest.skip("a bandwidth of a real GPU: the CUDA emulator copies with the CPU")
    small, large = _core.cuda_d2d_bandwidth(1 << 24, 5), _core.cuda_d2d_bandwidth(1 << 28, 5)
    assert 100.0 < large < 20000.0
    assert small > 0.2 * large


def test_gemm_needs_cuda_and_cuda_refused_cleanly_without_gpu():
    with pytest.raises(ValueError, match="gemm"):
        usbeam.HadamardDecodePlan((8, 4), 8, algorithm="gemm")
    if usbeam.cuda_available():
        pytest.skip("a GPU is available")
    with pytest.raises(usbeam.UsbeamError, match="cuda"):
        usbeam.HadamardDecodePlan((8, 4), 8, backend="cuda")
    with pytest.raises(usbeam.UsbeamError):
        _core.cuda_d2d_bandwidth(1024)
