"""Focused line-by-line imaging (usbeam.ScanLineBeamformer): each scan line sums only its own
transmit, against the float64 reference (das_general with that one transmit on that line's
points; tolerance das_rel_l2), on a phased sector, a convex sector and a linear array; and a
simulated point target lands on its line."""
import math

import numpy as np
import pytest

import usbeam
from reference import das as ref
from tolerances import TOLERANCES

FS, FC, C, T0 = 20e6, 5e6, 1540.0, 0.5e-6
N_SAMPLES = 500


def check_lines(rng, probe, transmits, grid, n_frames=2):
    data = (rng.standard_normal((n_frames, len(transmits), probe.n_elements, N_SAMPLES))
            + 1j * rng.standard_normal((n_frames, len(transmits), probe.n_elements, N_SAMPLES))).astype(np.complex64)
    kw = dict(fs=FS, fc=FC, c=C, t0=T0, f_number=1.0, window="hann", interpolation="linear")
    slb = usbeam.ScanLineBeamformer(probe, transmits, grid, n_samples=N_SAMPLES, **kw)
    out = np.full((n_frames,) + grid.shape, np.nan, np.complex64)
    assert slb(data, out=out) is out
    coords = grid.coordinates().reshape(grid.shape + (3,))
    want = np.zeros((n_frames,) + grid.shape, complex)
    for j, k in enumerate(slb.lines):
        tx = transmits[k]
        tup = ("focused", tx.point, tx.axis if tx.origin is not None else None)
        want[:, :, j] = ref.das_general(data[:, k:k + 1], probe.positions, probe.normals, [tup], coords[:, j],
                                        fs=FS, fc=FC, c=C, t0=T0, f_number=1.0, window_kind="hann",
                                        interpolation="linear")
    assert np.count_nonzero(want) > 0.5 * want.size
    assert np.linalg.norm(out - want) <= TOLERANCES["das_rel_l2"] * np.linalg.norm(want)
    return slb


def test_phased_sector_one_transmit_per_line(rng):
    probe = usbeam.LinearArray(32, 1.5e-4, width=1.3e-4)
    grid = usbeam.PolarGrid(np.linspace(3e-3, 12e-3, 12), np.linspace(-0.5, 0.5, 9))
    transmits = [usbeam.Focused.steered(a, 8e-3) for a in grid.angles]
    slb = check_lines(rng, probe, transmits, grid)
    np.testing.assert_array_equal(slb.lines, np.arange(9))


def test_convex_sector_fewer_transmits_than_lines(rng):
    probe = usbeam.ConvexArray(n_elements=32, pitch=3e-4, radius=0.015, element_width=2.7e-4)
    h = probe.apothem
    grid = usbeam.PolarGrid.for_probe(probe, 8e-3, 10, 12)
    transmits = [usbeam.Focused.steered(a, probe.radius + 5e-3, origin=(0.0, -h)) for a in np.linspace(-0.25, 0.25, 4)]
    slb = check_lines(rng, probe, transmits, grid)
    assert set(slb.lines) == {0, 1, 2, 3}


def test_linear_array_columns(rng):
    probe = usbeam.LinearArray(24, 3e-4, width=2.5e-4)
    grid = usbeam.Grid(x=np.linspace(-2e-3, 2e-3, 8), z=np.linspace(4e-3, 9e-3, 7))
    transmits = [usbeam.Focused((x, 6e-3)) for x in grid.x]
    check_lines(rng, probe, transmits, grid, n_frames=1)


def test_point_target_on_its_line():
    probe = usbeam.LinearArray(48, 2e-4, width=1.8e-4, fc=4e6, bandwidth=0.6)
    grid = usbeam.PolarGrid(np.linspace(8e-3, 16e-3, 161), np.linspace(-0.4, 0.4, 33))
    transmits = [usbeam.Focused.steered(a, 12e-3) for a in grid.angles]
    target = np.array([[12e-3 * math.sin(0.2), 0.0, 12e-3 * math.cos(0.2)]])
    rf = usbeam.simulate_rf(target, [1.0], probe, transmits, fs=FS, fc=4e6, c=C, n_samples=700)
    iq = usbeam.rf2iq(rf, fs=FS, fc=4e6, bandwidth=0.6)
    slb = usbeam.ScanLineBeamformer(probe, transmits, grid, fs=FS, fc=4e6, c=C, n_samples=700, f_number=1.0)
    env = np.abs(slb(iq))
    i, j = np.unravel_index(np.argmax(env), env.shape)
    assert grid.angles[j] == pytest.approx(0.2, abs=1e-9)
    assert abs(grid.radii[i] - 12e-3) <= 0.25 * C / 4e6


@pytest.mark.parametrize("make, exc, word", [
    (lambda p, g: usbeam.ScanLineBeamformer(p, [usbeam.PlaneWave(0.0)], g, fs=FS, fc=FC, n_samples=64), TypeError,
     "Focused"),
    (lambda p, g: usbeam.ScanLineBeamformer(p, [usbeam.Focused((0.0, 5e-3))], g, lines=np.array([0, 1, 0]), fs=FS,
                                            fc=FC, n_samples=64), ValueError, "lines"),
    (lambda p, g: usbeam.ScanLineBeamformer(p, [usbeam.Focused((0.0, 5e-3))], g, fs=FS, fc=FC,
                                            n_samples=64)(np.zeros((2, 16, 64), np.complex64)), ValueError, "data"),
])
def test_bad_input(make, exc, word):
    probe = usbeam.LinearArray(16, 3e-4)
    grid = usbeam.PolarGrid(np.linspace(3e-3, 6e-3, 4), np.linspace(-0.2, 0.2, 3))
    with pytest.raises(exc, match=word):
        make(probe, grid)
