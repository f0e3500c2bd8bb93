"""Delay-and-sum on convex, phased and matrix arrays (element normals, 3-D element positions)
against the float64 reference (tests/reference/das.py, das_general), with the tolerances of
the linear-array tests (das_rel_l2, das_nearest_*), and the linear array through the general
code path (an ElementArray whose elements are listed right to left)."""
import math

import numpy as np
import pytest

import usbeam
from reference import das as ref
from tolerances import TOLERANCES
from das_checks import random_data, assert_matches_reference

FS, FC, C, T0 = 20e6, 5e6, 1540.0, 1.0e-6
N_SAMPLES = 400


def convex_probe():
    return usbeam.ConvexArray(n_elements=24, pitch=3e-4, radius=0.012, element_width=2.6e-4)


def convex_sequence(rng, probe):
    """Every transmit kind on a curved array; with the reference's tuples."""
    angle = rng.uniform(-0.3, 0.3)
    h = probe.apothem
    source = (rng.uniform(-1e-3, 1e-3), -h + rng.uniform(-1e-3, 1e-3))
    steer = rng.uniform(-0.4, 0.4)
    focused = usbeam.Focused.steered(steer, rng.uniform(5e-3, 8e-3))
    element = int(rng.integers(probe.n_elements))
    delays = rng.uniform(0, 2e-7, probe.n_elements)
    delays[:3] = np.nan
    seq = [usbeam.PlaneWave(angle), usbeam.DivergingWave(source), usbeam.Focused((0.5e-3, 6e-3)), focused,
           usbeam.SyntheticAperture(element), usbeam.Delays(delays)]
    tuples = [("plane", angle, 0.0), ("diverging", (source[0], 0.0, source[1])), ("focused", (0.5e-3, 0.0, 6e-3), None),
              ("focused", focused.point, focused.axis), ("synthetic", element), ("delays", delays)]
    return seq, tuples


def sector_points(rng, probe, n_r=9, n_theta=11):
    """Points of a sector in front of the convex face (some outside every element's cone)."""
    h = probe.apothem
    r = np.sort(rng.uniform(probe.radius + 1e-3, probe.radius + 10e-3, n_r))
    th = np.sort(rng.uniform(-0.7, 0.7, n_theta))
    rr, tt = np.meshgrid(r, th, indexing="ij")
    pts = np.zeros((rr.size, 3))
    pts[:, 0], pts[:, 2] = (rr * np.sin(tt)).ravel(), (rr * np.cos(tt) - h).ravel()
    return pts


@pytest.mark.parametrize("interpolation", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("window", ["rect", "hann", "tukey"])
@pytest.mark.parametrize("f_number", [0.0, 1.2])
def test_convex_matches_reference(rng, interpolation, window, f_number):
    probe = convex_probe()
    seq, tuples = convex_sequence(rng, probe)
    pts = sector_points(rng, probe)
    data = random_data(rng, (2, len(seq), probe.n_elements, N_SAMPLES), np.complex64)
    got = usbeam.das(data, probe, seq, usbeam.Grid.points(pts), fs=FS, fc=FC, c=C, t0=T0, f_number=f_number,
                     window=window, tukey_alpha=0.4, interpolation=interpolation)
    want = ref.das_general(data, probe.positions, probe.normals, tuples, pts, fs=FS, fc=FC, c=C, t0=T0,
                           f_number=f_number, window_kind=window, tukey_alpha=0.4, interpolation=interpolation)
    assert np.count_nonzero(want) > 0.3 * want.size  # points outside every cone are 0
    assert_matches_reference(got, want, interpolation)


@pytest.mark.parametrize("dtype", [np.int16, np.float32])
def test_convex_rf_matches_reference(rng, dtype):
    probe = convex_probe()
    seq, tuples = convex_sequence(rng, probe)
    pts = sector_points(rng, probe)
    data = random_data(rng, (len(seq), probe.n_elements, N_SAMPLES), dtype)
    got = usbeam.das(data, probe, seq, usbeam.Grid.points(pts), fs=FS, fc=FC, c=C, t0=T0, f_number=1.0,
                     window="hann", interpolation="linear")
    want = ref.das_general(data[None], probe.positions, probe.normals, tuples, pts, fs=FS, fc=FC, c=C, t0=T0,
                           f_number=1.0, window_kind="hann", interpolation="linear")[0]
    assert_matches_reference(got, want, "linear")


@pytest.mark.parametrize("no_table", [False, True])
def test_matrix_matches_reference(rng, no_table):
    probe = usbeam.MatrixArray(nx=6, ny=7, pitch_x=3e-4, pitch_y=3.5e-4, missing_rows=(3,))
    n = probe.n_elements
    delays = rng.uniform(0, 1e-7, n)
    delays[rng.choice(n, 5, replace=False)] = np.nan  # any set may fire on a matrix array
    seq = [usbeam.PlaneWave(0.2, -0.15), usbeam.DivergingWave((1e-3, 0.5e-3, -4e-3)),
           usbeam.Focused((0.5e-3, -0.5e-3, 5e-3), origin=(0.0, 0.0, 0.0)), usbeam.SyntheticAperture(7),
           usbeam.Delays(delays)]
    f = seq[2]
    tuples = [("plane", 0.2, -0.15), ("diverging", (1e-3, 0.5e-3, -4e-3)), ("focused", f.point, f.axis),
              ("synthetic", 7), ("delays", delays)]
    grid = usbeam.Grid(x=np.linspace(-2e-3, 2e-3, 5), z=np.linspace(2e-3, 6e-3, 6), y=np.linspace(-1.5e-3, 1.5e-3, 4))
    pts = grid.coordinates()
    data = random_data(rng, (1, len(seq), n, N_SAMPLES), np.complex64)
    for f_number, window in ((1.0, "tukey"), (0.0, "hann")):
        bf = usbeam.Beamformer(probe, seq, grid, fs=FS, fc=FC, c=C, t0=T0, n_samples=N_SAMPLES, f_number=f_number,
                               window=window, tukey_alpha=0.5, interpolation="cubic",
                               max_table_bytes=1 if no_table else None)
        assert (bf.table_bytes() == 0) == no_table
        got = bf(data)
        want = ref.das_general(data, probe.positions, probe.normals, tuples, pts, fs=FS, fc=FC, c=C, t0=T0,
                               f_number=f_number, window_kind=window, tukey_alpha=0.5, interpolation="cubic",
                               surface=True)
        assert got.shape == (1,) + grid.shape
        assert np.count_nonzero(want) > 0.5 * want.size
        assert_matches_reference(got, want, "cubic")


def test_linear_array_through_the_general_path(rng):
    """A linear array given as data with its elements listed right to left takes the general
    aperture model; the image equals the LinearArray's (the same math, other code)."""
    probe = usbeam.LinearArray(16, 3e-4, width=2.5e-4)
    flipped = usbeam.ElementArray(probe.positions[::-1], width=probe.width)
    seq = [usbeam.PlaneWave(0.1), usbeam.DivergingWave((0.0, -5e-3)), usbeam.Focused((1e-3, 5e-3))]
    grid = usbeam.Grid(x=np.linspace(-2e-3, 2e-3, 9), z=np.linspace(2e-3, 8e-3, 7))
    data = random_data(rng, (len(seq), 16, N_SAMPLES), np.complex64)
    kw = dict(fs=FS, fc=FC, c=C, t0=T0, f_number=1.1, window="hann", interpolation="linear")
    want = usbeam.das(data, probe, seq, grid, **kw)
    got = usbeam.das(data[:, ::-1], flipped, seq, grid, **kw)
    assert np.linalg.norm(got - want) <= TOLERANCES["das_rel_l2"] * np.linalg.norm(want)


def test_phased_steered_focus_side(rng):
    """Focused.steered: the side of the focus follows the beam axis (the reference's sign of
    (p - f) . axis), on a phased array (LinearArray with a small pitch)."""
    probe = usbeam.LinearArray(32, 1.5e-4, width=1.3e-4)
    beam = usbeam.Focused.steered(0.5, 8e-3)
    pts = np.array([[r * math.sin(0.5), 0.0, r * math.cos(0.5)] for r in (4e-3, 8e-3 - 1e-9, 12e-3)])
    tau = beam.transmit_time(pts, probe, C)
    want = ref.transmit_path_general(("focused", beam.point, beam.axis), pts, probe.positions, C) / C
    np.testing.assert_allclose(tau, want, rtol=1e-14)
    assert tau[0] < tau[1] < tau[2]


def test_polar_and_volume_grids(rng):
    """Images come out in the grid's shape: PolarGrid (n_r, n_theta), VolumeGrid (nz, ny, nx),
    SphericalGrid (n_r, n_elevation, n_azimuth); values are those of the same points as a list."""
    convex = convex_probe()
    polar = usbeam.PolarGrid.for_probe(convex, 8e-3, 7, 9)
    assert polar.apex == pytest.approx((0.0, -convex.apothem))
    seq = usbeam.DivergingWave((0.0, -convex.apothem))
    data = random_data(rng, (convex.n_elements, N_SAMPLES), np.complex64)
    kw = dict(fs=FS, fc=FC, c=C, t0=T0, f_number=1.0)
    img = usbeam.das(data, convex, seq, polar, **kw)
    assert img.shape == (7, 9)
    flat = usbeam.das(data, convex, seq, usbeam.Grid.points(polar.coordinates()), **kw)
    np.testing.assert_array_equal(img.ravel(), flat)
    # the grid keeps its points for the plans built on it: each call still hands out a new,
    # writable array, which the caller may change without changing the grid's
    pts = polar.coordinates()
    r, th = np.meshgrid(polar.radii, polar.angles, indexing="ij")
    want = np.column_stack([(r * np.sin(th)).ravel(), np.zeros(r.size), (polar.apex[1] + r * np.cos(th)).ravel()])
    np.testing.assert_allclose(pts, want, rtol=0, atol=1e-15)
    pts[:] = 0.0
    np.testing.assert_allclose(polar.coordinates(), want, rtol=0, atol=1e-15)
    np.testing.assert_array_equal(usbeam.das(data, convex, seq, polar, **kw), img)
    matrix = usbeam.MatrixArray(4, 4, 3e-4, 3e-4)
    mdata = random_data(rng, (16, N_SAMPLES), np.complex64)
    for grid, shape in ((usbeam.VolumeGrid(x=[-1e-3, 0, 1e-3], y=[0.0, 1e-3], z=[3e-3, 4e-3, 5e-3, 6e-3]), (4, 2, 3)),
                        (usbeam.SphericalGrid([3e-3, 5e-3], [-0.3, 0.0, 0.3], [-0.2, 0.2]), (2, 2, 3))):
        vol = usbeam.das(mdata, matrix, usbeam.PlaneWave(0.0), grid, **kw)
        assert vol.shape == shape
        np.testing.assert_array_equal(vol.ravel(), usbeam.das(mdata, matrix, usbeam.PlaneWave(0.0),
                                                              usbeam.Grid.points(grid.coordinates()), **kw))


@pytest.mark.parametrize("grid, word", [
    (usbeam.PolarGrid(np.linspace(0.005, 0.02, 5), np.linspace(-1.5, 1.5, 7), apex=(0.0, -0.011)), "angles"),
    (usbeam.PolarGrid(np.linspace(0.002, 0.02, 5), np.linspace(-0.3, 0.3, 7), apex=(0.0, -0.011)), "radii"),
])
def test_grid_beyond_reach(grid, word):
    """A polar grid reaching behind every element's face is refused, naming what to change."""
    probe = convex_probe()  # radius 12 mm, apothem ~11 mm
    with pytest.raises(ValueError, match=word):
        usbeam.Beamformer(probe, usbeam.PlaneWave(0.0), grid, fs=FS, fc=FC, n_samples=64)


@pytest.mark.parametrize("kind", ["convex", "phased"])
def test_blind_rays_from_the_plan_apertures_as_from_the_cones(kind):
    """Beamformer checks a sector's rays with the C plan's apertures (a ray none of whose points
    any element holds is re-tested by the grid with the cones in NumPy): it refuses exactly the
    grids that the grid's own check refuses, over angle spans and f-numbers across the limit."""
    probe = convex_probe() if kind == "convex" else usbeam.LinearArray(16, 2e-4, width=1.8e-4)
    apex = (0.0, -probe.apothem) if kind == "convex" else (0.0, 0.0)
    refused = {True: 0, False: 0}
    for f_number in (0.5, 1.0, 3.0):
        for span in np.linspace(0.2, 1.5, 14):
            first = probe.apothem + 5e-4 if kind == "convex" else 5e-4
            grid = usbeam.PolarGrid(np.linspace(first, first + 0.01, 6), np.linspace(-span, span, 9), apex=apex)
            try:
                grid.check_probe(probe, f_number)
                want = None
            except ValueError as exc:
                want = str(exc)
            try:
                usbeam.Beamformer(probe, usbeam.PlaneWave(0.0), grid, fs=FS, fc=FC, n_samples=400, f_number=f_number,
                                  min_coverage=0)
                got = None
            except ValueError as exc:
                got = str(exc)
            assert got == want, (f_number, span)
            refused[want is not None] += 1
    assert refused[True] > 3 and refused[False] > 3  # both outcomes exercised
