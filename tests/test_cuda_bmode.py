"""B-mode CUDA twin (cuda/bmode.cu) against the CPU backend and the float64 reference.

Needs a GPU (marked cuda: skipped without one), except the last test, which checks that
asking for the CUDA backend without a GPU is a clean error."""
import numpy as np
import pytest

import usbeam
from reference import bmode as ref
from tolerances import TOLERANCES
from usbeam import device


def random_iq(rng, shape):
    amplitude = 10 ** rng.uniform(-4, 0, shape)  # log-uniform: the whole dynamic range is used
    return (amplitude * np.exp(2j * np.pi * rng.random(shape))).astype(np.complex64)


def assert_uint8_close(got, want, prefix="bmode_cuda"):
    diff = np.abs(got.astype(int) - want.astype(int))
    assert diff.max() <= TOLERANCES[f"{prefix}_uint8_max_levels"]
    assert np.mean(diff > 0) <= TOLERANCES[f"{prefix}_uint8_fraction_off"]


def run_on_device(plan, iq, poison):
    """Run with the output poisoned; returns the host copy of the output."""
    out = device.from_numpy(np.full(plan.shape, poison, plan.out_dtype))
    result = plan(device.from_numpy(iq), out=out)
    assert result is out
    return out.to_numpy()


NORMALIZE = ["global", "frame", 0.5]


@pytest.mark.cuda
@pytest.mark.parametrize("dynamic_range", [20.0, 40.0, 60.0])
@pytest.mark.parametrize("normalize", NORMALIZE)
def test_uint8_matches_cpu(rng, dynamic_range, normalize):
    iq = random_iq(rng, (3, 97, 130))
    cuda = usbeam.BModePlan(iq.shape, dynamic_range, normalize=normalize, backend="cuda")
    cpu = usbeam.BModePlan(iq.shape, dynamic_range, normalize=normalize)
    # two different poisons give the same image only if every pixel was written
    first, second = run_on_device(cuda, iq, 0xAB), run_on_device(cuda, iq, 0x54)
    np.testing.assert_array_equal(first, second)
    np.testing.assert_array_equal(first, cpu(iq))  # the same thresholds: equal, not close
    if normalize == "global":
        assert_uint8_close(first, ref.bmode_uint8(iq, dynamic_range), "bmode")


@pytest.mark.cuda
@pytest.mark.parametrize("normalize", ["global", 0.5])
def test_uint8_edge_values_match_cpu(rng, normalize):
    """Zeros, denormals and pixels exactly at a grey-level threshold land where the CPU puts
    them (threshold definition: a threshold power -> its level).  NaN / inf: see
    test_non_finite_pixels_propagate_unreported (the CPU refuses them)."""
    iq = random_iq(rng, (2, 31, 37))
    peak = np.abs(iq).max() if normalize == "global" else 0.5
    for k in (1, 17, 128, 254):  # |IQ|^2 = ref^2 10^((k - 255) DR / 2550), rounded to float
        iq[0, k % 31, k % 37] = np.float32(peak * 10 ** ((k - 255) * 45.0 / 5100.0))
    iq[0, 0, :2] = [0, 1e-44]
    cuda = usbeam.BModePlan(iq.shape, 45.0, normalize=normalize, backend="cuda")
    cpu = usbeam.BModePlan(iq.shape, 45.0, normalize=normalize)
    np.testing.assert_array_equal(run_on_device(cuda, iq, 0xAB), cpu(iq))


@pytest.mark.cuda
def test_non_finite_pixels_propagate_unreported(rng):
    """The CPU refuses NaN / inf; the twin does not report them (README) and keeps the threshold
    definition: NaN passes no threshold (level 0), inf passes all (255).  With a fixed
    reference the other pixels do not depend on them: they equal the CPU's image of the same
    data with the bad pixels zeroed."""
    iq = random_iq(rng, (2, 31, 37))
    bad = iq.copy()
    bad[0, 0, :3] = [np.nan, complex(np.nan, 1), complex(1, np.nan)]
    bad[1, 0, :2] = [np.inf, complex(1, -np.inf)]
    plan = usbeam.BModePlan(iq.shape, 45.0, normalize=0.5, backend="cuda")
    got = run_on_device(plan, bad, 0xAB)
    plan.cuda.synchronize()  # no report
    assert np.all(got[0, 0, :3] == 0) and np.all(got[1, 0, :2] == 255)
    zeroed = bad.copy()
    zeroed[~np.isfinite(zeroed)] = 0
    want = usbeam.BModePlan(iq.shape, 45.0, normalize=0.5)(zeroed)
    keep = np.isfinite(bad)
    np.testing.assert_array_equal(got[keep], want[keep])


@pytest.mark.cuda
@pytest.mark.parametrize("normalize", NORMALIZE)
def test_db_matches_cpu(rng, normalize):
    iq = random_iq(rng, (4, 64, 33))
    cuda = usbeam.BModePlan(iq.shape, 50.0, output="db", normalize=normalize, backend="cuda")
    cpu = usbeam.BModePlan(iq.shape, 50.0, output="db", normalize=normalize)
    got = run_on_device(cuda, iq, np.nan)
    assert np.all(np.isfinite(got)), "poison left: some pixels were not written"
    np.testing.assert_allclose(got, cpu(iq), atol=TOLERANCES["bmode_cuda_db_abs"], rtol=0)


@pytest.mark.cuda
def test_large_image_and_zero_image(rng):
    iq = random_iq(rng, (2, 1024, 1031))  # several grid-stride passes per thread
    iq[1] = 0  # an all-zero frame has no scale: everything at the bottom
    got = usbeam.BModePlan(iq.shape, 40.0, normalize="frame", backend="cuda")(iq)
    assert isinstance(got, np.ndarray)  # NumPy in, NumPy out (copied, strict=False)
    assert np.all(got[1] == 0)
    assert_uint8_close(got[0], ref.bmode_uint8(iq[0], 40.0), "bmode")


@pytest.mark.cuda
def test_host_and_device_paths_agree_and_input_untouched(rng):
    iq = random_iq(rng, (2, 40, 50))
    keep = iq.copy()
    plan = usbeam.BModePlan(iq.shape, 30.0, backend="cuda")
    d_iq = device.from_numpy(iq)
    on_device = plan(d_iq)
    assert isinstance(on_device, usbeam.DeviceArray) and on_device.device.startswith("cuda")
    np.testing.assert_array_equal(on_device.to_numpy(), plan(iq))
    np.testing.assert_array_equal(d_iq.to_numpy(), keep)
    np.testing.assert_array_equal(iq, keep)
    times = plan.cuda.stage_times()
    assert set(times) == {"bmode.max", "bmode.compress"} and all(t >= 0 for t in times.values())
    assert plan.cuda.device_bytes > 0


@pytest.mark.cuda
def test_strict_refuses_host_arrays(rng):
    iq = random_iq(rng, (8, 8))
    plan = usbeam.BModePlan(iq.shape, 30.0, backend="cuda", strict=True)
    with pytest.raises(TypeError, match="strict"):
        plan(iq)
    with pytest.raises(TypeError, match="strict"):
        plan(device.from_numpy(iq), out=np.empty((8, 8), np.uint8))
    assert plan(device.from_numpy(iq)).shape == (8, 8)


@pytest.mark.cuda
def test_device_input_checks(rng):
    plan = usbeam.BModePlan((8, 8), 30.0, backend="cuda")
    with pytest.raises(TypeError, match="complex64"):
        plan(device.from_numpy(np.zeros((8, 8), np.float32)))
    with pytest.raises(ValueError, match="shape"):
        plan(device.from_numpy(np.zeros((4, 16), np.complex64)))
    with pytest.raises(TypeError, match="uint8"):
        plan(device.from_numpy(random_iq(rng, (8, 8))), out=device.empty((8, 8), np.float32))


@pytest.mark.cuda
def test_callers_stream(rng):
    iq = random_iq(rng, (16, 16))
    plan = usbeam.BModePlan(iq.shape, 30.0, backend="cuda")
    own = plan.cuda.stream
    plan.cuda.set_stream(2)  # the per-thread default stream
    assert plan.cuda.stream == 2
    got = plan(device.from_numpy(iq))
    assert got.stream == 2
    np.testing.assert_array_equal(got.to_numpy(), usbeam.BModePlan(iq.shape, 30.0)(iq))
    plan.cuda.set_stream(None)
    assert plan.cuda.stream == own


def test_cuda_backend_refused_cleanly_without_gpu():
    if usbeam.cuda_available():
        pytest.skip("a GPU is available")
    with pytest.raises(usbeam.UsbeamError, match="cuda"):
        usbeam.BModePlan((4, 4), 30.0, backend="cuda", strict=True)
