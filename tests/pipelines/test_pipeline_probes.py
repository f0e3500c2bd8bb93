"""Pipeline, DopplerPipeline and the live session with the new probes and grids: a convex array
on a PolarGrid, a phased array's sector, a matrix array's volume, on the CPU (against the
stages run one by one) and on CUDA (against the CPU; marked cuda, run on the emulator), and
bad input that names the parameter."""

import numpy as np
import pytest

import usbeam
from tolerances import TOLERANCES
from usbeam import device

FS, FC, C, PRF = 20e6, 4e6, 1540.0, 3e3
N_SAMPLES = 1024
CONVEX = usbeam.ConvexArray(n_elements=48, pitch=4e-4, radius=0.025, element_width=3.6e-4, fc=FC, bandwidth=0.6)
POLAR = usbeam.PolarGrid.for_probe(CONVEX, 0.012, 40, 32)
SEQUENCE = [usbeam.DivergingWave((x, -CONVEX.apothem)) for x in (-2e-3, 0.0, 2e-3)]


def convex_rf(rng, n_frames):
    pts = np.zeros((60, 3))
    r, th = rng.uniform(0.027, 0.036, 60), rng.uniform(-0.35, 0.35, 60)
    pts[:, 0], pts[:, 2] = r * np.sin(th), r * np.cos(th) - CONVEX.apothem
    rf = usbeam.simulate_rf(pts, rng.standard_normal(60), CONVEX, SEQUENCE, fs=FS, fc=FC, c=C, n_samples=N_SAMPLES,
                            n_frames=n_frames, noise=0.05, seed=1)
    return np.round(rf / np.abs(rf).max() * 2000).astype(np.int16)


def test_convex_pipeline_equals_its_stages(rng):
    rf = convex_rf(rng, 2)
    kw = dict(fs=FS, fc=FC, c=C, n_samples=N_SAMPLES, n_frames=2, f_number=1.0, bmode_output="db",
              dynamic_range=50.0)
    pipe = usbeam.Pipeline(CONVEX, SEQUENCE, POLAR, **kw)
    out = pipe(rf)
    assert out.shape == (2,) + POLAR.shape
    iq = usbeam.rf2iq(rf, fs=FS, fc=FC, bandwidth=pipe.rf2iq.bandwidth if hasattr(pipe, "rf2iq") else None)
    image = usbeam.das(iq, CONVEX, SEQUENCE, POLAR, fs=FS, fc=FC, c=C, f_number=1.0)
    np.testing.assert_allclose(pipe.image, image, rtol=0, atol=TOLERANCES["das_rel_l2"] * np.abs(image).max())
    want = usbeam.bmode(image, 50.0, output="db")
    assert np.median(np.abs(out - want)) <= 1e-3
    cart = POLAR.cartesian_grid(spacing=2e-4)
    shown = usbeam.scan_convert(out, POLAR, cart, fill=-50.0)
    assert shown.shape == (2,) + cart.shape


def test_phased_doppler_pipeline_on_a_sector(rng):
    probe = usbeam.LinearArray(32, 2e-4, width=1.8e-4, fc=FC, bandwidth=0.6)
    polar = usbeam.PolarGrid(np.linspace(5e-3, 15e-3, 30), np.linspace(-0.5, 0.5, 21))
    seq = usbeam.DivergingWave((0.0, -4e-3))
    n_frames = 8
    pos = np.zeros((n_frames, 40, 3))
    base = np.c_[rng.uniform(-4e-3, 4e-3, 40), np.zeros(40), rng.uniform(6e-3, 14e-3, 40)]
    for f in range(n_frames):  # moving toward the probe at 0.1 m/s
        pos[f] = base - [0.0, 0.0, 0.1 * f / PRF]
    rf = usbeam.simulate_rf(pos, rng.standard_normal(40), probe, seq, fs=FS, fc=FC, c=C, n_samples=N_SAMPLES)
    pipe = usbeam.DopplerPipeline(probe, seq, polar, n_frames=n_frames, n_samples=N_SAMPLES, fs=FS, fc=FC, prf=PRF,
                                  rf_dtype=np.float32, f_number=1.0, clutter="mean")
    maps = pipe(rf)
    assert maps.velocity.shape == polar.shape and maps.power.shape == polar.shape
    assert np.all(np.isfinite(maps.velocity))


def test_matrix_volume_pipeline(rng):
    probe = usbeam.MatrixArray(8, 8, 3e-4, 3e-4, fc=FC, bandwidth=0.6)
    grid = usbeam.SphericalGrid(np.linspace(4e-3, 8e-3, 10), np.linspace(-0.3, 0.3, 7), np.linspace(-0.3, 0.3, 5))
    rf = rng.integers(-500, 500, (1, 1, 64, 512)).astype(np.int16)
    pipe = usbeam.Pipeline(probe, usbeam.PlaneWave(0.0), grid, fs=FS, fc=FC, n_samples=512, f_number=1.0)
    assert pipe(rf).shape == (1,) + grid.shape
    with pytest.raises(ValueError, match="rf has 63 elements"):
        pipe(rng.integers(-500, 500, (1, 1, 63, 512)).astype(np.int16))


def test_live_session_with_a_convex_pipeline(rng):
    rf = convex_rf(rng, 3)
    pipe = usbeam.Pipeline(CONVEX, SEQUENCE, POLAR, fs=FS, fc=FC, c=C, n_samples=N_SAMPLES, f_number=1.0)
    offline = [usbeam.Pipeline(CONVEX, SEQUENCE, POLAR, fs=FS, fc=FC, c=C, n_samples=N_SAMPLES, f_number=1.0)(f[None])
               for f in rf]
    session = usbeam.live.Session(pipe, slots=4, policy="block")
    try:
        ids = [session.push(f[None]) for f in rf]
        for frame_id, want in zip(ids, offline):
            np.testing.assert_array_equal(session.get(frame_id, timeout=30).image, want)
    finally:
        session.stop()


@pytest.mark.parametrize("make, word", [
    (lambda: usbeam.Pipeline(CONVEX, SEQUENCE, usbeam.PolarGrid(np.linspace(0.005, 0.02, 5), np.linspace(-0.3, 0.3, 5),
                                                                apex=(0.0, -CONVEX.apothem)),
                             fs=FS, fc=FC, n_samples=64), "radii"),
    (lambda: usbeam.Pipeline(CONVEX, SEQUENCE, usbeam.PolarGrid(np.linspace(0.03, 0.04, 5), np.linspace(-1.5, 1.5, 9),
                                                                apex=(0.0, -CONVEX.apothem)),
                             fs=FS, fc=FC, n_samples=64), "angles"),
    (lambda: usbeam.PolarGrid([0.03, 0.04], [-0.1, 0.1], apex=(0.0, 0.002)), "apex"),
    (lambda: usbeam.ConvexArray(48, 4e-4, -0.025), "radius"),
    (lambda: usbeam.Pipeline(CONVEX, usbeam.Delays(np.zeros(47)), POLAR, fs=FS, fc=FC, n_samples=64), "delays"),
])
def test_bad_geometry_named(make, word):
    with pytest.raises(ValueError, match=word):
        make()


@pytest.mark.cuda
def test_convex_pipeline_cuda_matches_cpu(rng):
    rf = convex_rf(rng, 2)
    kw = dict(fs=FS, fc=FC, c=C, n_samples=N_SAMPLES, n_frames=2, f_number=1.0, bmode_output="db",
              dynamic_range=50.0)
    cpu = usbeam.Pipeline(CONVEX, SEQUENCE, POLAR, **kw)
    gpu = usbeam.Pipeline(CONVEX, SEQUENCE, POLAR, backend="cuda", **kw)
    want = cpu(rf)
    out = device.from_numpy(np.full(gpu.output_shape, np.nan, np.float32))
    assert gpu(device.from_numpy(rf), out=out) is out
    got = out.to_numpy()
    img = gpu.image.to_numpy()
    assert np.linalg.norm(img - cpu.image) <= TOLERANCES["das_cuda_rel_l2"] * np.linalg.norm(cpu.image)
    assert np.median(np.abs(got - want)) <= TOLERANCES["pipeline_cuda_db_median_abs"]


@pytest.mark.cuda
def test_phased_doppler_pipeline_cuda_matches_cpu(rng):
    """The checks of tests/pipelines/test_cuda_pipeline.py's Doppler chain, on a phased sector."""
    probe = usbeam.LinearArray(32, 2e-4, width=1.8e-4, fc=FC, bandwidth=0.6)
    polar = usbeam.PolarGrid(np.linspace(5e-3, 12e-3, 16), np.linspace(-0.4, 0.4, 11))
    seq = usbeam.DivergingWave((0.0, -4e-3))
    rf = rng.integers(-2000, 2000, (8, 1, 32, 512), dtype=np.int16)
    kw = dict(n_frames=8, n_samples=512, fs=FS, fc=FC, c=C, prf=PRF, f_number=1.0, clutter="poly",
              clutter_options=dict(order=1))
    cpu = usbeam.DopplerPipeline(probe, seq, polar, **kw)
    gpu = usbeam.DopplerPipeline(probe, seq, polar, backend="cuda", **kw)
    want = cpu(rf)
    maps = gpu(device.from_numpy(rf))
    filtered = gpu._filtered.to_numpy()
    assert np.linalg.norm(filtered - cpu._filtered) <= TOLERANCES["das_cuda_rel_l2"] * np.linalg.norm(cpu._filtered)
    power = maps.power.to_numpy()
    assert power.shape == polar.shape and np.all(np.isfinite(power))
    assert np.median(np.abs(power - want.power)) <= TOLERANCES["pipeline_cuda_db_median_abs"]
    velocity = maps.velocity.to_numpy()
    assert np.median(np.abs(velocity - want.velocity)) <= (TOLERANCES["pipeline_cuda_velocity_median_vn"]
                                                          * gpu.nyquist_velocity)
