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
    test_non_finite_pixel_reported (both refuse them)."""
    iq = random_iq(rng, (2, 31, 37))
    peak = np.abs(iq).max() if normalize == "global" else 0.5
    for k in (1, 17, 128, 254):  # |IQ|^2 = ref^2 10^((k - 255) DR / 2550), rounded to float
        iq[0, k % 31, k % 37] = np.float32(peak * 10 ** ((k - 255) * 45.0 / 5100.0))
    iq[0, 0, :2] = [0, 1e-44]
    cuda = usbeam.BModePlan(iq.shape, 45.0, normalize=normalize, backend="cuda")
    cpu = usbeam.BModePlan(iq.shape, 45.0, normalize=normalize)
    np.testing.assert_array_equal(run_on_device(cuda, iq, 0xAB), cpu(iq))


def with_bad_pixel(rng, iq, bad):
    """A copy of iq with one pixel at a random position made non-finite (its real or imaginary
    part); returns it and the position."""
    where = tuple(int(rng.integers(n)) for n in iq.shape)
    data = iq.copy()
    data[where] = complex(bad, data[where].imag) if rng.random() < 0.5 else complex(data[where].real, bad)
    return data, where


def assert_matches_cpu(got, iq, plan_args, output):
    want = usbeam.BModePlan(iq.shape, *plan_args[0], **plan_args[1])(iq)
    if output == "uint8":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, atol=TOLERANCES["bmode_cuda_db_abs"], rtol=0)


@pytest.mark.cuda
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("output", ["uint8", "db"])
@pytest.mark.parametrize("normalize", NORMALIZE)
def test_non_finite_pixel_reported(rng, bad, output, normalize):
    """The CPU refuses NaN / inf (ValueError naming image); the twin flags it in the pass that
    reads every pixel and raises the same ValueError when the host meets the result: on
    synchronize(), after a host copy, or at the next call (naming the earlier call).  The
    flag is cleared by the report: the next clean call succeeds and equals the CPU."""
    iq = random_iq(rng, (2, 31, 37))
    data, where = with_bad_pixel(rng, iq, bad)
    args = ((45.0,), dict(output=output, normalize=normalize))
    with pytest.raises(ValueError, match="image contains NaN or infinite"):
        usbeam.BModePlan(iq.shape, *args[0], **args[1])(data)  # the CPU's name for it
    plan = usbeam.BModePlan(iq.shape, *args[0], **args[1], backend="cuda")
    # device in, device out: nothing waits, synchronize() reports it
    plan(device.from_numpy(data), out=device.from_numpy(np.zeros(iq.shape, plan.out_dtype)))
    with pytest.raises(ValueError, match="^image contains NaN or infinite"):
        plan.cuda.synchronize()
    plan.cuda.synchronize()  # reported once
    assert_matches_cpu(run_on_device(plan, iq, 0xAB if output == "uint8" else np.nan), iq, args, output)
    # host in, host out: the copy waited for the kernels, the call itself raises
    with pytest.raises(ValueError, match="^image contains NaN or infinite"):
        plan(data)
    assert_matches_cpu(plan(iq), iq, args, output)
    # device result left unchecked: the next call names the earlier one, then runs clean
    plan(device.from_numpy(data))
    plan.cuda.stage_times()  # waits for the work without checking
    with pytest.raises(ValueError, match="^an earlier call's image contains NaN"):
        plan(device.from_numpy(iq))
    assert_matches_cpu(plan(iq), iq, args, output)


@pytest.mark.cuda
def test_non_finite_pixels_leave_the_others_unchanged(rng):
    """With a fixed reference the other pixels do not depend on the bad ones: they equal the
    CPU's image of the same data with the bad pixels zeroed (the flag changes no output; the
    bad pixels keep the threshold definition, NaN -> 0 and inf -> 255, unspecified)."""
    iq = random_iq(rng, (2, 31, 37))
    bad = iq.copy()
    bad[0, 0, :3] = [np.nan, complex(np.nan, 1), complex(1, np.nan)]
    bad[1, 0, :2] = [np.inf, complex(1, -np.inf)]
    plan = usbeam.BModePlan(iq.shape, 45.0, normalize=0.5, backend="cuda")
    got = run_on_device(plan, bad, 0xAB)
    with pytest.raises(ValueError, match="image contains NaN"):
        plan.cuda.synchronize()
    zeroed = bad.copy()
    zeroed[~np.isfinite(zeroed)] = 0
    want = usbeam.BModePlan(iq.shape, 45.0, normalize=0.5)(zeroed)
    keep = np.isfinite(bad)
    np.testing.assert_array_equal(got[keep], want[keep])


PIPE_FS, PIPE_FC, PIPE_C, PIPE_SAMPLES = 20e6, 5e6, 1540.0, 320


def small_pipeline(rng, capture_graph, **kwargs):
    probe = usbeam.LinearArray(16, 3e-4, width=2.5e-4, fc=PIPE_FC, bandwidth=0.6)
    grid = usbeam.Grid(x=np.sort(rng.uniform(-3e-3, 3e-3, 12)), z=np.sort(rng.uniform(1e-3, 1.1e-2, 40)))
    args = (probe, [usbeam.PlaneWave(0.0)], grid)
    kw = dict(fs=PIPE_FS, fc=PIPE_FC, c=PIPE_C, n_samples=PIPE_SAMPLES, rf_dtype=np.float32, **kwargs)
    return usbeam.Pipeline(*args, backend="cuda", capture_graph=capture_graph, **kw), usbeam.Pipeline(*args, **kw)


class SynchronisedStage:
    """A pipeline stage that waits for its kernels before it returns (without reading their
    fault flags).  The emulator runs nothing until the host synchronises; this gives it the
    order a GPU often has, where the beamformer has already flagged bad rf when the host
    reaches B-mode's call (seen on an H100: B-mode's "earlier calls" check took the flag and
    the bad call's error named "an earlier call's rf")."""

    def __init__(self, plan):
        self._plan = plan

    def __getattr__(self, name):
        return getattr(self._plan, name)

    def __call__(self, *args, **kwargs):
        result = self._plan(*args, **kwargs)
        usbeam._core.stream_synchronize(self._plan.cuda.stream)
        return result


@pytest.mark.cuda
def test_pipeline_names_this_call_when_a_stage_flagged_before_the_next_began(rng):
    pipe, _ = small_pipeline(rng, False, bmode_output="db", dynamic_range=50.0)
    rf = rng.standard_normal(pipe.input_shape).astype(np.float32)
    clean = pipe(rf)
    pipe.rf2iq, pipe.beamformer = SynchronisedStage(pipe.rf2iq), SynchronisedStage(pipe.beamformer)
    bad = rf.copy()
    bad[0, 0, 3, :] = np.nan
    with pytest.raises(ValueError, match="^rf contains NaN or infinite"):
        pipe(bad)
    np.testing.assert_array_equal(pipe(rf), clean)  # reported once: the next call is clean


@pytest.mark.cuda
@pytest.mark.parametrize("capture_graph", [False, True])
def test_pipeline_reports_non_finite_rf_once(rng, capture_graph):
    """NaN rf reaches DAS and (through it) B-mode, which both flag it; the pipeline takes every
    stage's flag and reports rf once: the next clean call is clean (no "an earlier call's
    image") and gives the clean image again (the chain is deterministic), which matches the CPU
    pipeline (tolerance of tests/pipelines/test_cuda_pipeline.py)."""
    pipe, cpu = small_pipeline(rng, capture_graph, bmode_output="db", dynamic_range=50.0)
    rf = rng.standard_normal(pipe.input_shape).astype(np.float32)
    clean = pipe(rf)  # (with a graph: captured here)
    assert np.median(np.abs(clean - cpu(rf))) <= TOLERANCES["pipeline_cuda_db_median_abs"]
    bad = rf.copy()
    bad[0, 0, int(rng.integers(16)), :] = [np.nan, np.inf, -np.inf][int(rng.integers(3))]
    with pytest.raises(ValueError, match="^rf contains NaN or infinite"):
        pipe(bad)  # host rf: the host copy waited for the chain
    np.testing.assert_array_equal(pipe(rf), clean)
    # device rf and device out: reported at the next call, once
    out = device.from_numpy(np.full(pipe.output_shape, np.nan, pipe.output_dtype))
    pipe(device.from_numpy(bad), out=out)
    for plan in (pipe.rf2iq, pipe.beamformer, pipe.bmode):
        plan.cuda.stage_times()  # every stage finished, unchecked
    with pytest.raises(ValueError, match="^an earlier call's rf contains NaN"):
        pipe(device.from_numpy(rf), out=out)
    out = device.from_numpy(np.full(pipe.output_shape, np.nan, pipe.output_dtype))
    pipe(device.from_numpy(rf), out=out)
    for plan in (pipe.rf2iq, pipe.beamformer, pipe.bmode):
        plan.cuda.synchronize()  # a stage's own check goes through the pipeline: nothing left
    np.testing.assert_array_equal(out.to_numpy(), clean)


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
