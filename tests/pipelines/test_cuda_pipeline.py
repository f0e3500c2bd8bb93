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
@pytest.mark.parametrize("clutter, options", [("poly", dict(order=1)), ("poly", dict(order=1, algorithm="gemm")),
                                              ("svd", dict(low=1)), ("svd", {})])
def test_doppler_pipeline_graph_replays_the_eager_chain(rng, clutter, options):
    """DopplerPipeline(capture_graph=True): the first call captures, later calls replay the new
    RF (host or device) and equal the eager chain bit for bit (same kernels and cuBLAS calls;
    algorithm='gemm' checks that the cuBLAS projection allocates nothing inside the capture);
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


@pytest.mark.cuda
@pytest.mark.parametrize("capture_graph", [False, True])
def test_bmode_pipeline_strict_refuses_host_arrays(rng, capture_graph):
    kwargs = dict(fs=FS, fc=FC, c=C, n_samples=N_SAMPLES, n_frames=2, bmode_output="db", dynamic_range=50.0,
                  backend="cuda", capture_graph=capture_graph)
    strict = usbeam.Pipeline(PROBE, SEQUENCE, GRID, strict=True, **kwargs)
    loose = usbeam.Pipeline(PROBE, SEQUENCE, GRID, **kwargs)
    assert all(plan._runner.strict for plan in (strict.rf2iq, strict.bmode)) and strict.beamformer.strict
    rf = random_rf(rng, 2)
    with pytest.raises(TypeError, match="rf is in host memory.*strict=True"):
        strict(rf)
    d_rf = device.from_numpy(rf)
    with pytest.raises(TypeError, match="out is in host memory.*strict=True"):
        strict(d_rf, out=np.empty(strict.output_shape, strict.output_dtype))
    got = strict(d_rf)  # device in, device out: runs, and equals the copying pipeline's result
    assert isinstance(got, device.DeviceArray)
    np.testing.assert_array_equal(got.to_numpy(), loose(rf))


@pytest.mark.cuda
@pytest.mark.parametrize("capture_graph", [False, True])
def test_doppler_pipeline_strict_refuses_host_rf(rng, capture_graph):
    kwargs = dict(n_frames=8, n_samples=N_SAMPLES, fs=FS, fc=FC, c=C, prf=PRF, clutter="poly",
                  clutter_options=dict(order=1), average=3, backend="cuda", capture_graph=capture_graph)
    strict = usbeam.DopplerPipeline(PROBE, SEQUENCE, GRID, strict=True, **kwargs)
    loose = usbeam.DopplerPipeline(PROBE, SEQUENCE, GRID, **kwargs)
    assert all(plan._runner.strict for plan in (strict.rf2iq, strict.clutter, strict.power))
    assert strict.beamformer.strict and strict.color._strict
    rf = random_rf(rng, 8)
    with pytest.raises(TypeError, match="rf is in host memory.*strict=True"):
        strict(rf)
    if not capture_graph:
        with pytest.raises(TypeError, match="rf is in host memory.*strict=True"):
            strict.beamform(rf)
    got = strict(device.from_numpy(rf))
    want = loose(rf)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.to_numpy(), w.to_numpy())


def test_pipelines_strict_is_ignored_on_the_cpu(rng):
    # as by the plans: a CPU pipeline takes host arrays whatever strict says
    kwargs = dict(fs=FS, fc=FC, c=C, n_samples=N_SAMPLES, n_frames=1, bmode_output="db", dynamic_range=50.0)
    rf = random_rf(rng, 1)
    np.testing.assert_array_equal(usbeam.Pipeline(PROBE, SEQUENCE, GRID, strict=True, **kwargs)(rf),
                                  usbeam.Pipeline(PROBE, SEQUENCE, GRID, **kwargs)(rf))
    doppler = usbeam.DopplerPipeline(PROBE, SEQUENCE, GRID, n_frames=4, n_samples=N_SAMPLES, fs=FS, fc=FC,
                                     prf=PRF, clutter="mean", strict=True)
    assert np.all(np.isfinite(doppler(random_rf(rng, 4)).velocity))


# ---- RF -> decode -> IQ -> row-column DAS -> B-mode, device arrays only ---------------------

RCA_N, RCA_SAMPLES = 16, 384


@pytest.mark.cuda
def test_rca_chain_decode_rf2iq_das_bmode_on_device_matches_cpu(rng):
    """The issue's data flow on the GPU: Hadamard-encoded FORCES RF -> HadamardDecodePlan ->
    RF2IQPlan -> RCABeamformer -> BModePlan, every plan strict=True (a host copy anywhere
    would raise), each stage reading the previous stage's DeviceArray directly; compared with
    the same chain on the CPU at each stage."""
    array = usbeam.RowColumnArray(RCA_N, RCA_N, 0.3e-3, fc=FC, bandwidth=0.7, tobe=False)
    points = np.column_stack([rng.uniform(-1.5e-3, 1.5e-3, 3), np.zeros(3), rng.uniform(4e-3, 7e-3, 3)])
    raw = usbeam.simulate_rca(points, rng.uniform(0.5, 1.0, 3), array, "forces", fs=FS, fc=FC,
                              n_samples=RCA_SAMPLES, encode=True, n_frames=2)
    raw += (1e-3 * np.abs(raw).max() * rng.standard_normal(raw.shape)).astype(np.float32)
    lam = C / FC
    grid = usbeam.RCAGrid.bscan(np.arange(-2.5e-3, 2.5e-3, lam / 3), np.arange(3.5e-3, 7.5e-3, lam / 3), "xz", 0.0)

    def plans(backend):
        extra = dict(backend=backend, strict=True) if backend == "cuda" else {}
        decode = usbeam.HadamardDecodePlan(raw.shape, RCA_N, axis=1, dtype=np.float32, **extra)
        rf2iq = usbeam.RF2IQPlan(decode.out_shape, np.float32, fs=FS, fc=FC, **extra)
        das = usbeam.RCABeamformer(array, "forces", grid, n_samples=rf2iq.n_out, fs=rf2iq.fs_out, fc=FC, c=C,
                                   data="iq", n_frames=2, interpolation="linear", **extra)
        bmode = usbeam.BModePlan((2,) + grid.image_shape, 40.0, **extra)
        return decode, rf2iq, das, bmode

    stages_cpu, stages_gpu = [], []
    x = raw
    for plan in plans("cpu"):
        x = plan(x)
        stages_cpu.append(x)
    x = device.from_numpy(raw)  # the only host -> device copy
    for plan in plans("cuda"):
        x = plan(x)
        assert isinstance(x, device.DeviceArray)  # strict plans: nothing went through the host
        stages_gpu.append(x)
    decoded, iq, image, display = (d.to_numpy() for d in stages_gpu)  # host copies only at the end
    np.testing.assert_array_equal(decoded, stages_cpu[0])  # 'direct' decode: bit-exact (hadamard family)
    assert np.max(np.abs(iq - stages_cpu[1])) <= TOLERANCES["rf2iq_cuda_rel"] * np.max(np.abs(stages_cpu[1]))
    assert rel_l2(image, stages_cpu[2]) <= TOLERANCES["rca_cuda_rel_l2"]
    diff = np.abs(display.astype(int) - stages_cpu[3].astype(int))
    assert diff.max() <= TOLERANCES["bmode_uint8_max_levels"]
    assert np.mean(diff > 0) <= TOLERANCES["bmode_uint8_fraction_off"]
    assert display.max() == 255 and display.min() < 128  # a real image, not a constant


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
