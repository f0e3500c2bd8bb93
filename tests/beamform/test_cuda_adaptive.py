"""Adaptive beamformers' CUDA twin (cuda/adaptive.cu) against the CPU backend: every method and
input dtype, f-number apertures, a convex array (cone apertures from element normals), several frame counts, poisoned outputs (every pixel written),
non-finite input reported as ValueError (flagged on the device), and the table budget it
needs.  Marked cuda: runs on a GPU or the CPU emulator (make test-emu)."""
import numpy as np
import pytest

import usbeam
from tolerances import TOLERANCES
from usbeam import device
from das_checks import random_data

FS, FC, C, T0 = 25e6, 5e6, 1540.0, 1e-6
N_SAMPLES = 360
METHODS = [("cf", {}), ("gcf", {"gcf_m0": 1}), ("dmas", {}), ("fdmas", {"fdmas_half_taps": 5}), ("pdas", {"p": 3.0}),
           ("mv", {"subarray_fraction": 0.5, "temporal_averaging": 1})]


def convex_setup():
    """A 24-element convex array (radius 15 mm), two diverging waves, a sector of points in
    front of the arc, some at its sides outside every element's cone."""
    probe = usbeam.ConvexArray(24, 4e-4, 15e-3)
    h = probe.apothem
    seq = [usbeam.DivergingWave((-1e-3, -h + 2e-3)), usbeam.DivergingWave((1e-3, -h + 3e-3))]
    r, th = np.meshgrid(probe.radius + np.linspace(3e-3, 7e-3, 5), np.linspace(-0.5, 0.5, 7), indexing="ij")
    points = np.stack([(r * np.sin(th)).ravel(), np.zeros(r.size), (r * np.cos(th) - h).ravel()], axis=1)
    return probe, seq, usbeam.Grid.points(points)


def pair(rng, method, options, dtype, n_frames, f_number=1.0, convex=False):
    if convex:
        probe, seq, grid = convex_setup()
    else:
        probe = usbeam.LinearArray(12, 3e-4)
        seq = [usbeam.PlaneWave(-0.05), usbeam.PlaneWave(0.1)]
        grid = usbeam.Grid(x=np.linspace(-1.5e-3, 1.5e-3, 7), z=np.linspace(4e-3, 8e-3, 5))
    common = dict(fs=FS, fc=FC, c=C, t0=T0, n_samples=N_SAMPLES, dtype=dtype, n_frames=n_frames, f_number=f_number,
                  method=method, **options)
    gpu = usbeam.Beamformer(probe, seq, grid, backend="cuda", **common)
    cpu = usbeam.Beamformer(probe, seq, grid, **common)
    data = random_data(rng, (n_frames, len(seq), probe.n_elements, N_SAMPLES), dtype)
    out = device.from_numpy(np.full((n_frames,) + grid.shape, np.nan, gpu.out_dtype))
    assert gpu(device.from_numpy(data), out=out) is out
    return out.to_numpy(), cpu(data), data, gpu


@pytest.mark.cuda
@pytest.mark.parametrize("method, options", METHODS, ids=[m for m, _ in METHODS])
@pytest.mark.parametrize("dtype", [np.float32, np.complex64, np.int16], ids=["rf", "iq", "int16"])
def test_matches_cpu(rng, method, options, dtype):
    got, want, _, _ = pair(rng, method, options, dtype, 2)
    assert np.all(np.isfinite(got)), "poison left: some pixels were not written"
    assert np.linalg.norm(got - want) <= TOLERANCES["adaptive_cuda_rel_l2"] * np.linalg.norm(want)


@pytest.mark.cuda
@pytest.mark.parametrize("method, options", METHODS, ids=[m for m, _ in METHODS])
@pytest.mark.parametrize("dtype", [np.float32, np.complex64], ids=["rf", "iq"])
def test_convex_matches_cpu(rng, method, options, dtype):
    got, want, _, _ = pair(rng, method, options, dtype, 2, convex=True)
    assert np.all(np.isfinite(got)), "poison left: some pixels were not written"
    assert np.any(want == 0) and np.count_nonzero(want) > 0.5 * want.size  # cone apertures, some empty
    assert np.linalg.norm(got - want) <= TOLERANCES["adaptive_cuda_rel_l2"] * np.linalg.norm(want)


@pytest.mark.cuda
@pytest.mark.parametrize("n_frames", [1, 3])
def test_frame_counts_and_full_aperture(rng, n_frames):
    got, want, _, _ = pair(rng, "mv", {"subarray_length": 4}, np.complex64, n_frames, f_number=0.0)
    assert np.linalg.norm(got - want) <= TOLERANCES["adaptive_cuda_rel_l2"] * np.linalg.norm(want)


@pytest.mark.cuda
def test_non_finite_input_is_a_value_error(rng):
    got, want, data, gpu = pair(rng, "dmas", {}, np.complex64, 2)
    bad = data.copy()
    bad[1, 0, 5, 150:200] = np.nan  # inside the delays every point reads
    with pytest.raises(ValueError, match="data contains NaN or infinite"):
        gpu(bad)
    gpu.cuda.synchronize()
    np.testing.assert_array_equal(gpu(data), got)  # a clean call runs as before


@pytest.mark.cuda
def test_the_twin_needs_the_table():
    probe = usbeam.LinearArray(12, 3e-4)
    grid = usbeam.Grid(x=np.linspace(-1.5e-3, 1.5e-3, 7), z=np.linspace(4e-3, 8e-3, 5))
    with pytest.raises(ValueError, match="max_table_bytes"):
        usbeam.Beamformer(probe, usbeam.PlaneWave(0.0), grid, fs=FS, fc=FC, n_samples=N_SAMPLES, backend="cuda",
                          method="cf", max_table_bytes=64)
