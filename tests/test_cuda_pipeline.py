"""The GPU chains (usbeam.Pipeline and usbeam.DopplerPipeline with backend='cuda') against the
same chains on the CPU backend, on fresh random RF.

Needs a GPU (marked cuda: skipped without one), except the last test, which checks that a
CUDA pipeline without a GPU is a clean error.  Tolerances: each stage's CUDA twin has its
own entry (family cuda); through the chain the relative errors add, so the chain is held to
the loosest of them (das_cuda_rel_l2) on the intermediate IQ and to the display tolerances
at the end."""
import numpy as np
import pytest

import usbeam
from tolerances import TOLERANCES
from usbeam import device

FC, FS, C, PRF = 5e6, 20e6, 1540.0, 4e3
PROBE = usbeam.LinearArray(n_elements=32, pitch=3e-4, width=2.7e-4, fc=FC, bandwidth=0.6)
GRID = usbeam.Grid(x=np.arange(-3e-3, 3e-3 + 1e-9, 1.5e-4), z=np.arange(10e-3, 14e-3 + 1e-9, 1e-4))
N_SAMPLES = 512
SEQUENCE = [usbeam.PlaneWave(a) for a in (-0.1, 0.0, 0.1)]


def random_rf(rng, n_frames):
    return rng.integers(-2000, 2000, (n_frames, len(SEQUENCE), PROBE.n_elements, N_SAMPLES), dtype=np.int16)


def rel_l2(got, want):
    return np.linalg.norm(got - want) / np.linalg.norm(want)


@pytest.mark.cuda
def test_bmode_pipeline_matches_cpu(rng):
    kwargs = dict(fs=FS, fc=FC, c=C, n_samples=N_SAMPLES, n_frames=2, bmode_output="db", dynamic_range=50.0)
    gpu = usbeam.Pipeline(PROBE, SEQUENCE, GRID, backend="cuda", **kwargs)
    cpu = usbeam.Pipeline(PROBE, SEQUENCE, GRID, **kwargs)
    rf = random_rf(rng, 2)
    out = device.from_numpy(np.full(gpu.output_shape, np.nan, np.float32))
    assert gpu(device.from_numpy(rf), out=out) is out
    got = out.to_numpy()
    assert np.all(np.isfinite(got)), "poison left: some pixels were not written"
    want = cpu(rf)
    assert rel_l2(gpu.image.to_numpy(), cpu.image) <= TOLERANCES["das_cuda_rel_l2"]
    assert np.median(np.abs(got - want)) <= TOLERANCES["pipeline_cuda_db_median_abs"]
    host = gpu(rf)  # host RF: copied into the preallocated device buffer, result on the host
    assert isinstance(host, np.ndarray)
    np.testing.assert_array_equal(host, got)
    timings = gpu.timings
    assert set(timings) == {"rf2iq", "das", "bmode"} and all(t > 0 for t in timings.values())


@pytest.mark.cuda
def test_doppler_pipeline_matches_cpu(rng):
    kwargs = dict(n_frames=8, n_samples=N_SAMPLES, fs=FS, fc=FC, c=C, prf=PRF, clutter="poly",
                  clutter_options=dict(order=1), average=3)
    gpu = usbeam.DopplerPipeline(PROBE, SEQUENCE, GRID, backend="cuda", **kwargs)
    cpu = usbeam.DopplerPipeline(PROBE, SEQUENCE, GRID, **kwargs)
    rf = random_rf(rng, 8)
    maps = gpu(device.from_numpy(rf))
    want = cpu(rf)
    assert rel_l2(gpu._filtered.to_numpy(), cpu._filtered) <= TOLERANCES["das_cuda_rel_l2"]
    power = maps.power.to_numpy()
    assert np.all(np.isfinite(power))
    assert np.median(np.abs(power - want.power)) <= TOLERANCES["pipeline_cuda_db_median_abs"]
    velocity = maps.velocity.to_numpy()
    vn = gpu.nyquist_velocity
    assert np.median(np.abs(velocity - want.velocity)) <= TOLERANCES["pipeline_cuda_velocity_median_vn"] * vn
    assert set(gpu.timings) == {"rf2iq", "das", "clutter", "doppler"}


@pytest.mark.cuda
def test_bmode_pipeline_graph_replays_the_eager_chain(rng):
    """capture_graph=True: the first call captures, later calls replay; each replay reads the
    new RF copied into the pipeline's buffer (host or device RF), and the output equals the
    eager chain's bit for bit (same kernels, same launch shapes)."""
    kwargs = dict(fs=FS, fc=FC, c=C, n_samples=N_SAMPLES, n_frames=2, bmode_output="db", dynamic_range=50.0)
    eager = usbeam.Pipeline(PROBE, SEQUENCE, GRID, backend="cuda", **kwargs)
    graph = usbeam.Pipeline(PROBE, SEQUENCE, GRID, backend="cuda", capture_graph=True, **kwargs)
    for call in range(3):
        rf = random_rf(rng, 2)
        want = eager(rf)
        got = graph(rf) if call != 1 else graph(device.from_numpy(rf)).to_numpy()
        np.testing.assert_array_equal(got, want)
    out = device.from_numpy(np.full(graph.output_shape, np.nan, np.float32))
    rf = random_rf(rng, 2)
    assert graph(device.from_numpy(rf), out=out) is out
    np.testing.assert_array_equal(out.to_numpy(), eager(rf))
    timings = graph.timings
    assert set(timings) == {"rf2iq", "das", "bmode"} and all(t > 0 for t in timings.values())


@pytest.mark.cuda
@pytest.mark.parametrize("clutter, options", [("poly", dict(order=1)), ("svd", dict(low=1)), ("svd", {})])
def test_doppler_pipeline_graph_replays_the_eager_chain(rng, clutter, options):
    """DopplerPipeline(capture_graph=True): the first call captures, later calls replay the new
    RF (host or device) and equal the eager chain bit for bit (same kernels and cuBLAS calls);
    the maps are poisoned before each replay, so every pixel is rewritten."""
    kwargs = dict(n_frames=8, n_samples=N_SAMPLES, fs=FS, fc=FC, c=C, prf=PRF, clutter=clutter,
                  clutter_options=options, average=3)
    eager = usbeam.DopplerPipeline(PROBE, SEQUENCE, GRID, backend="cuda", **kwargs)
    graph = usbeam.DopplerPipeline(PROBE, SEQUENCE, GRID, backend="cuda", capture_graph=True, **kwargs)
    poison = np.full(graph.image_shape, np.nan, np.float32)
    for call in range(3):
        rf = random_rf(rng, 8)
        want = eager(rf)
        if call:
            for buffer in (graph._velocity, graph._variance, graph._power):
                buffer.copy_from_host(poison)
        got = graph(rf if call != 1 else device.from_numpy(rf))
        for name in ("velocity", "variance", "power"):
            np.testing.assert_array_equal(getattr(got, name).to_numpy(), getattr(want, name).to_numpy())
    assert set(graph.timings) == {"rf2iq", "das", "clutter", "doppler"}


@pytest.mark.cuda
def test_doppler_pipeline_graph_refuses_iir():
    with pytest.raises(ValueError, match="capture_graph"):
        usbeam.DopplerPipeline(PROBE, SEQUENCE, GRID, n_frames=8, n_samples=N_SAMPLES, fs=FS, fc=FC, prf=PRF,
                               clutter="iir", backend="cuda", capture_graph=True)


def test_doppler_capture_graph_needs_cuda():
    with pytest.raises(ValueError, match="capture_graph"):
        usbeam.DopplerPipeline(PROBE, SEQUENCE, GRID, n_frames=4, n_samples=N_SAMPLES, fs=FS, fc=FC, prf=PRF,
                               capture_graph=True)


def test_capture_graph_needs_cuda():
    with pytest.raises((ValueError, usbeam.UsbeamError), match="capture_graph|cuda"):
        usbeam.Pipeline(PROBE, SEQUENCE, GRID, fs=FS, fc=FC, n_samples=N_SAMPLES, capture_graph=True)


def test_cuda_pipeline_refused_cleanly_without_gpu():
    if usbeam.cuda_available():
        pytest.skip("a GPU is visible: the tests above run the GPU chains")
    with pytest.raises(usbeam.UsbeamError, match="cuda"):
        usbeam.Pipeline(PROBE, SEQUENCE, GRID, fs=FS, fc=FC, n_samples=N_SAMPLES, backend="cuda")
    with pytest.raises(usbeam.UsbeamError, match="cuda"):
        usbeam.DopplerPipeline(PROBE, SEQUENCE, GRID, n_frames=4, n_samples=N_SAMPLES, fs=FS, fc=FC, prf=PRF,
                               clutter="poly", backend="cuda")
