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


# ---- the access paths of the tiled kernels (cuda/hadamard.cu header): 16-byte vector loads
# and stores where n_inner allows them, a run of S*n values where the transmit axis or the
# decoded axis is last, scalar accesses otherwise (odd n_inner, misaligned views), the last
# tile partly past the end, tiles that straddle an outer index, n_inner below the tile.


def offset_view(array, shape, fill=None):
    """A device copy of `array` (or of `fill` values) starting one element into its buffer: a
    pointer 2 or 4 bytes off a 16-byte boundary, which the vector paths must not take."""
    flat = np.empty(int(np.prod(shape)) + 1, array.dtype if fill is None else np.dtype(fill[1]))
    flat[0] = 0
    flat[1:] = array.ravel() if fill is None else fill[0]
    return device.from_numpy(flat)[1:].reshape(shape)


def compare_raw(plan, cpu, data, misaligned=(False, False)):
    """Any data (not an encoding), poisoned output, the input and / or the output view
    misaligned; bit-exact against the CPU backend."""
    fill = (np.nan, np.float32) if plan.out_dtype == np.float32 else (np.iinfo(np.int32).min, np.int32)
    d_in = offset_view(data, data.shape) if misaligned[0] else device.from_numpy(data)
    if misaligned[1]:
        out = offset_view(None, plan.out_shape, fill)
    else:
        out = device.from_numpy(np.full(plan.out_shape, fill[0], plan.out_dtype))
    assert plan(d_in, out=out) is out
    got = out.to_numpy()
    np.testing.assert_array_equal(got, cpu(data))
    return got


# (order, dtype, shape, axis): inner % (16 / itemsize) == 0 for the vector loads, several tiles
# with a partial last one, tiles straddling the outer index, n_inner below the tile size
VECTOR_CASES = [
    (128, np.int16, (2, 128, 200), 1),   # S = 64: 7 tiles, the last 16 samples; 200 % 64 != 0
    (128, np.int16, (5, 128, 8), 1),     # n_inner 8 < S: a tile spans 5 outer indices
    (128, np.int16, (3, 128, 36), 1),    # 36 % 8 != 0: scalar loads, 16-byte stores
    (256, np.int16, (3, 256, 56), 1),    # S = 32, two radix-16 passes
    (64, np.int32, (4, 64, 36), 1),      # 8-byte accumulators, 4-value vectors
    (32, np.float32, (3, 32, 100), 1),
    (12, np.int16, (2, 12, 1000), 1),    # Paley base 12: B^T pass only, S = 256 (4 tiles + tail)
    (40, np.float32, (40, 3, 24), 0),    # 20 * 2: B^T + one butterfly stage
    (96, np.int32, (2, 96, 20), 1),
]


@pytest.mark.cuda
@pytest.mark.parametrize("order, dtype, shape, axis", VECTOR_CASES)
@pytest.mark.parametrize("algorithm", ["direct", "fast"])
def test_vector_paths_with_tails(rng, order, dtype, shape, axis, algorithm):
    compare(rng, order, dtype, algorithm, shape=shape, axis=axis)
    compare(rng, order, dtype, algorithm, shape=shape, axis=axis, output="float32" if dtype == np.float32 else "int32")


@pytest.mark.cuda
@pytest.mark.parametrize("order", [1, 2, 8, 12, 20, 32, 48, 64, 128, 160, 192, 256])
@pytest.mark.parametrize("algorithm", ["direct", "fast"])
def test_transmit_last_layouts(rng, order, algorithm):
    """The transmit_last store (lanes along the decoded elements): 4 samples x 32 elements per
    warp for n % 32 == 0, quads for n % 4 == 0, single values for n = 1, 2; sample counts that
    leave the last tile partial and runs whose length is not a multiple of 4 values."""
    compare(rng, order, np.int16, algorithm, transmit_last=True, shape=(3, order, 41))
    compare(rng, order, np.float32, algorithm, transmit_last=True, shape=(2, order, 20))
    compare(rng, order, np.int32, algorithm, transmit_last=True, output="int32", shape=(1, order, 7))


@pytest.mark.cuda
@pytest.mark.parametrize("order", [1, 2, 4, 12, 16, 20, 128])
@pytest.mark.parametrize("dtype", [np.int16, np.int32, np.float32])
@pytest.mark.parametrize("algorithm", ["direct", "fast"])
def test_transmit_axis_last_input(rng, order, dtype, algorithm):
    """n_inner = 1: each tile is one run of S*n input values, read as 16-byte vectors plus a
    scalar tail (37 * n values); the output is a run too, with or without transmit_last."""
    compare(rng, order, dtype, algorithm, shape=(37, order), axis=1)
    compare(rng, order, dtype, algorithm, shape=(5, 3, order), axis=2, transmit_last=True)


@pytest.mark.cuda
@pytest.mark.parametrize("transmit_last", [False, True])
@pytest.mark.parametrize("dtype, output", [(np.int16, "float32"), (np.int16, "int32"), (np.int32, "int32"),
                                           (np.float32, "float32")])
@pytest.mark.parametrize("algorithm", ["direct", "fast"])
def test_misaligned_views(rng, transmit_last, dtype, output, algorithm):
    """Input and / or output views one element into their buffers (DeviceArray a[1:]): the
    shapes would take the vector paths, the pointers send them to the scalar ones."""
    for order, shape in [(64, (2, 64, 48)), (1, (3, 1, 64)), (64, (40, 64)), (12, (3, 12, 16))]:
        data = encoded(rng, shape, dtype, 1, order)
        kw = dict(axis=1, dtype=dtype, output=output, transmit_last=transmit_last)
        gpu = usbeam.HadamardDecodePlan(shape, order, algorithm=algorithm, backend="cuda", **kw)
        cpu = usbeam.HadamardDecodePlan(shape, order, algorithm=algorithm, **kw)
        for misaligned in [(True, False), (False, True), (True, True), (False, False)]:
            compare_raw(gpu, cpu, data, misaligned)


@pytest.mark.cuda
@pytest.mark.parametrize("order", [12, 20, 48, 64, 96, 192, 256])
@pytest.mark.parametrize("dtype", [np.int16, np.int32])
@pytest.mark.parametrize("algorithm", ["direct", "fast"])
def test_int32_rounding_of_any_data(rng, order, dtype, algorithm):
    """int32 output of data that is no encoding: sums / n with remainders and ties (rounded
    half away from zero), divided without a 64-bit division: a shift (n = 2^k), a multiply-high
    (sums below 2^32, all int16 data) or a corrected double estimate (int32 data up to
    n * 2^31, where the quotient may saturate at the int32 limits)."""
    info = np.iinfo(dtype)
    shape = (2, order, 24)
    data = rng.integers(info.min, info.max, shape, endpoint=True, dtype=dtype)
    data[0, :, 0] = info.max  # the largest sums: n * max, and n * min
    data[0, :, 1] = info.min
    kw = dict(axis=1, dtype=dtype, output="int32")
    gpu = usbeam.HadamardDecodePlan(shape, order, algorithm=algorithm, backend="cuda", **kw)
    cpu = usbeam.HadamardDecodePlan(shape, order, algorithm=algorithm, **kw)
    compare_raw(gpu, cpu, data)
    compare_raw(gpu, cpu, data, misaligned=(True, True))


@pytest.mark.cuda
@pytest.mark.parametrize("order", [8, 40, 128, 256])
@pytest.mark.parametrize("algorithm", ["direct", "fast"])
def test_float32_sums_that_round(rng, order, algorithm):
    """float32 data whose double sums round, so that only the CPU's order of additions (t
    ascending; the butterfly stages in the CPU's order, whichever thread or pass runs them)
    gives the same bits: +-2^40 on even transmits, which cancel in some decoded values, and
    ~2^-20 on odd ones, absorbed or kept depending on when they meet the large terms (the
    reversed stage order changes ~10 % of the float32 outputs at n = 128).  Then data over
    2^-60 .. 2^60."""
    shape = (3, order, 40)
    data = np.empty(shape, np.float32)
    data[:, 0::2] = rng.choice([-1.0, 1.0], data[:, 0::2].shape) * 2.0 ** 40
    data[:, 1::2] = rng.standard_normal(data[:, 1::2].shape) * 2.0 ** -20
    wide = (rng.standard_normal(shape) * 2.0 ** rng.integers(-60, 61, shape)).astype(np.float32)
    kw = dict(axis=1, dtype=np.float32)
    gpu = usbeam.HadamardDecodePlan(shape, order, algorithm=algorithm, backend="cuda", **kw)
    cpu = usbeam.HadamardDecodePlan(shape, order, algorithm=algorithm, **kw)
    for x in (data, wide):
        assert np.all(np.isfinite(compare_raw(gpu, cpu, x)))
        compare_raw(gpu, cpu, x, misaligned=(True, True))


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
