"""Receive apertures and virtual-source transmit times of the sector geometries (convex,
phased, matrix arrays), as the plan finds them quickly (csrc/beamform/das_setup.c: the
cone scan in blocks from both ends; das_delays.c: the blocks of virtual sources searched
with distance bounds), against float64 NumPy written from the math:

- the element set: with one-hot channel data (frame f holds 1 on element f only, RF), pixel p
  of frame f is non-zero exactly when element f's acceptance cone holds p, the predicate of
  usbeam_math.h (axial > 0 and |lateral| <= axial / 2F) evaluated here in the same operation
  order; points beside the array, behind it, on the face, at the sector's edge rays and an
  apex behind the array included;
- the images: tests/reference/das.py (das_general, MUST's spline virtual sources by scipy's
  interp1d) with the linear-array tolerance das_rel_l2, for MUST delay laws (Delays:
  unsteered, diverging, steered, a sub-aperture), several transmits at once;
- frames per call: a 16-frame call equals 16 one-frame calls to das_rel_l2."""
import math

import numpy as np
import pytest

import usbeam
from reference import das as ref
from tolerances import TOLERANCES

FS, FC, C, T0 = 4e6, 1e6, 1540.0, -20e-6  # T0 < 0: every pixel's echo lies in the record
N_SAMPLES = 520


def convex():
    return usbeam.ConvexArray(48, 5e-4, 0.02, element_width=4.5e-4)


def phased():
    return usbeam.LinearArray(32, 2e-4, width=1.8e-4)


def edge_points(probe, grid):
    """The grid's points, plus points beside the array (both sides, at and behind the face
    level), behind it, on the face, and on rays a hair inside and outside the grid's edges."""
    pts = [grid.coordinates()]
    x_end = np.abs(probe.positions[:, 0]).max()
    z_face = probe.positions[:, 2].min()
    for x in (-1, 1):
        for dz in (-3e-3, -1e-3, 0.0, 1e-3, 5e-3):
            for dx in (0.5e-3, 2e-3, 6e-3):
                pts.append([[x * (x_end + dx), 0.0, z_face + dz]])
    pts.append(probe.positions + 1e-9 * probe.normals)  # on the face
    pts.append(probe.positions - 1e-3 * probe.normals)  # behind it
    apex = np.array([grid.apex[0], 0.0, grid.apex[1]])
    for a in (grid.angles[0], grid.angles[-1]):
        for da in (-1e-6, 0.0, 1e-6):
            d = np.array([math.sin(a + da), 0.0, math.cos(a + da)])
            pts.append(apex + np.outer(np.linspace(grid.radii[0], grid.radii[-1], 7), d))
    return np.concatenate(pts)


def cone_predicate(probe, points, f_number):
    """(n_elements, n_points) bools: the point in the element's cone, computed in the C
    predicate's order (usbeam_element_in_aperture) from the same element frame, plus a mask
    of the pairs within rounding of the cone's edge (where the two may legitimately differ)."""
    surface = bool(getattr(probe, "two_dimensional", False))
    frames = ref.frames_of(probe.normals, surface)
    inside = np.zeros((probe.n_elements, len(points)), bool)
    near = np.zeros_like(inside)
    for e, (t1, t2, n) in enumerate(frames):
        dx, dy, dz = (points[:, k] - probe.positions[e, k] for k in range(3))
        axial = dx * n[0] + dy * n[1] + dz * n[2]
        half = axial / (2.0 * f_number)
        l1 = dx * t1[0] + dy * t1[1] + dz * t1[2]
        l2 = dx * t2[0] + dy * t2[1] + dz * t2[2]
        inside[e] = (axial > 0) & (np.abs(l1) <= half) & (~surface | (np.abs(l2) <= half))
        scale = 1e-12 * (np.abs(dx) + np.abs(dy) + np.abs(dz))  # far above a frame's last-bit difference
        near[e] = (np.abs(axial) <= scale) | (np.abs(np.abs(l1) - half) <= scale)
        if surface:
            near[e] |= np.abs(np.abs(l2) - half) <= scale
    return inside, near


def one_hot_image(probe, seq, points, f_number):
    n = probe.n_elements
    data = np.zeros((n, n, N_SAMPLES), np.float32)  # (frame, element, sample): frame f lights element f
    data[np.arange(n), np.arange(n)] = 1.0
    bf = usbeam.Beamformer(probe, seq, usbeam.Grid.points(points), fs=FS, fc=FC, c=C, t0=T0, n_samples=N_SAMPLES,
                           f_number=f_number, window="rect", interpolation="linear", dtype=np.float32, n_frames=n,
                           min_coverage=0)
    return bf(data)  # (element, point)


def zigzag():
    """A row of elements whose normals tilt +-0.3 rad in turn: a point's accepted elements are
    no run of neighbours (the plan must scan, not step from a neighbour's aperture)."""
    lin = phased()
    tilt = np.where(np.arange(lin.n_elements) % 2 == 0, 0.3, -0.3)
    return usbeam.ElementArray(lin.positions, np.column_stack([np.sin(tilt), np.zeros_like(tilt), np.cos(tilt)]),
                               width=lin.width)


@pytest.mark.parametrize("name", ["convex", "convex-reversed", "convex-matrix", "phased-elements", "tilted-line",
                                  "zigzag"])
@pytest.mark.parametrize("f_number", [0.6, 1.73, 3.0])
def test_aperture_element_sets(name, f_number):
    """Every pixel's contributing elements are exactly those whose cone holds it.  A row of
    elements on an arc or a line (convex, reversed, tilted) has each point's elements in one
    run, which the plan finds from its neighbour's (das_setup.c, apertures_are_runs); the
    zigzag's are not, and the plan scans."""
    if name == "convex":
        probe = convex()
        grid = usbeam.PolarGrid.for_probe(probe, 0.03, 24, 40)
    elif name == "convex-reversed":  # listed right to left, as data
        probe = usbeam.ElementArray(convex().positions[::-1], convex().normals[::-1], width=convex().width)
        grid = usbeam.PolarGrid.for_probe(convex(), 0.03, 24, 40)
    elif name == "tilted-line":  # a linear array turned by 0.2 rad about y
        lin, a = phased(), 0.2
        pos = lin.positions @ np.array([[math.cos(a), 0.0, -math.sin(a)], [0.0, 1.0, 0.0], [math.sin(a), 0.0, math.cos(a)]])
        probe = usbeam.ElementArray(pos, np.tile([math.sin(a), 0.0, math.cos(a)], (lin.n_elements, 1)), width=lin.width)
        grid = usbeam.PolarGrid(np.linspace(5.5e-3, 0.04, 24), np.linspace(-0.5, 0.9, 40), apex=(0.0, -5e-3))
    elif name == "zigzag":
        probe = zigzag()
        grid = usbeam.PolarGrid(np.linspace(5.5e-3, 0.04, 24), np.linspace(-0.7, 0.7, 40), apex=(0.0, -5e-3))
    elif name == "convex-matrix":  # a 2-D face: the scan with both lateral directions
        probe = usbeam.MatrixArray(6, 7, 3e-4, 3.5e-4, missing_rows=(3,), element_width=2.7e-4, element_height=3e-4)
        grid = usbeam.PolarGrid(np.linspace(1e-3, 0.02, 20), np.linspace(-0.6, 0.6, 25), apex=(0.0, 0.0))
    else:  # a phased array given as elements listed right to left: the general (cone) path
        lin = phased()
        probe = usbeam.ElementArray(lin.positions[::-1], width=lin.width)
        grid = usbeam.PolarGrid(np.linspace(5.5e-3, 0.04, 24), np.linspace(-0.7, 0.7, 40), apex=(0.0, -5e-3))
    points = edge_points(probe, grid)
    if name == "convex-matrix":
        points = np.concatenate([points, points + [0.0, 1e-3, 0.0], points - [0.0, 4e-3, 0.0]])
    got = one_hot_image(probe, usbeam.DivergingWave((0.0, 0.0, -0.01)), points, f_number) != 0
    want, near = cone_predicate(probe, points, f_number)
    assert want.any(axis=0).mean() > 0.25  # many points see some element (the edge points need not)
    assert near.mean() < 0.02  # ties: mostly points level with a flat face (axial = 0)
    assert np.array_equal(got[~near], want[~near])
    # the plan's aperture sizes (what Beamformer's grid check reads): first to last element whose
    # cone holds the point, 0 when none does
    bf = usbeam.Beamformer(probe, usbeam.DivergingWave((0.0, 0.0, -0.01)), usbeam.Grid.points(points), fs=FS, fc=FC,
                           c=C, t0=T0, n_samples=N_SAMPLES, f_number=f_number, min_coverage=0)
    counts = usbeam._core.das_aperture_counts(bf._plan)
    any_in = want.any(axis=0)
    first, last = want.argmax(axis=0), want.shape[0] - 1 - want[::-1].argmax(axis=0)
    clear = ~near.any(axis=0)
    assert np.array_equal(counts[clear], np.where(any_in, last - first + 1, 0)[clear])


@pytest.mark.parametrize("n_points", [1, 5, 8, 11, 260])
def test_aperture_sizes_for_any_number_of_points(rng, n_points):
    """The plan scans the apertures 8 points at a time (lanes past the last point repeat it),
    in chunks of 256 points: partly filled groups and a chunk remainder, against the cone
    predicate, on a convex array and a matrix array's 2-D face."""
    for probe in (convex(), usbeam.MatrixArray(6, 7, 3e-4, 3.5e-4, element_width=2.7e-4, element_height=3e-4)):
        points = np.column_stack([rng.uniform(-0.02, 0.02, n_points), rng.uniform(-2e-3, 2e-3, n_points),
                                  rng.uniform(2e-3, 0.04, n_points)])
        bf = usbeam.Beamformer(probe, usbeam.DivergingWave((0.0, 0.0, -0.01)), usbeam.Grid.points(points), fs=FS,
                               fc=FC, c=C, t0=T0, n_samples=N_SAMPLES, f_number=1.0, min_coverage=0)
        counts = usbeam._core.das_aperture_counts(bf._plan)
        want, near = cone_predicate(probe, points, 1.0)
        first, last = want.argmax(axis=0), want.shape[0] - 1 - want[::-1].argmax(axis=0)
        clear = ~near.any(axis=0)
        assert clear.mean() > 0.9
        assert np.array_equal(counts[clear], np.where(want.any(axis=0), last - first + 1, 0)[clear])
        assert n_points < 8 or np.count_nonzero(counts) > 0  # not a test of empty apertures only


def delay_laws(n, rng):
    x = np.linspace(-1, 1, n)
    sub = rng.uniform(0, 3e-7, n)
    sub[: n // 5] = np.nan
    return {"unsteered": np.zeros(n), "diverging": 1.5e-6 * (1 - np.sqrt(1 - 0.8 * x ** 2)),
            "steered": 2e-6 * (x + 1), "sub-aperture": sub}


@pytest.mark.parametrize("name", ["convex", "phased"])
def test_transmit_times_of_steep_and_rough_laws(rng, name):
    """The plan's transmit times (MUST's min over the virtual sources, found with the blocks'
    chord bounds) equal the NumPy model for laws whose offsets rise faster than the distance
    along the array (|slope| > 1: the bound's minimum at a block's end), with a kink, random,
    and at points off the array's plane (y != 0)."""
    probe = convex() if name == "convex" else phased()
    x = np.linspace(-1, 1, probe.n_elements)
    span = np.ptp(probe.positions[:, 0]) / C  # s: a delay difference of one path length
    laws = {"steep": 1.5 * span * (x + 1) / 2, "kink": 1.5 * span * np.abs(x), "random": rng.uniform(0, span, x.size),
            "converging": -0.3 * span * (1 - np.sqrt(1 - 0.8 * x ** 2))}
    n = 2000
    points = np.column_stack([rng.uniform(-0.03, 0.03, n), rng.uniform(-0.01, 0.01, n), rng.uniform(-0.002, 0.04, n)])
    points[: n // 2, 1] = 0.0  # half in the plane (the bound's h without a square root)
    for law, d in laws.items():
        seq = usbeam.Delays(d)
        bf = usbeam.Beamformer(probe, seq, usbeam.Grid.points(points), fs=FS, fc=FC, c=C, t0=T0, n_samples=N_SAMPLES,
                               f_number=1.0, min_coverage=0)
        got = bf._plan_transmit_times(np.arange(n))[:, 0]
        np.testing.assert_allclose(got, seq.transmit_time(points, probe, C), rtol=1e-13, atol=0, err_msg=law)


@pytest.mark.parametrize("name", ["convex", "phased"])
def test_delays_images_match_reference(rng, name):
    """MUST delay laws (virtual sources) on convex and phased sectors with the edge points."""
    probe = convex() if name == "convex" else phased()
    grid = (usbeam.PolarGrid.for_probe(probe, 0.03, 10, 14) if name == "convex"
            else usbeam.PolarGrid(np.linspace(5.5e-3, 0.04, 10), np.linspace(-0.7, 0.7, 14), apex=(0.0, -5e-3)))
    laws = delay_laws(probe.n_elements, rng)
    seq = [usbeam.Delays(d) for d in laws.values()]
    tuples = [("delays", d) for d in laws.values()]
    points = edge_points(probe, grid)
    data = (rng.standard_normal((2, len(seq), probe.n_elements, N_SAMPLES))
            + 1j * rng.standard_normal((2, len(seq), probe.n_elements, N_SAMPLES))).astype(np.complex64)
    for f_number in (0.0, 1.73):
        got = usbeam.Beamformer(probe, seq, usbeam.Grid.points(points), fs=FS, fc=FC, c=C, t0=T0,
                                n_samples=N_SAMPLES, f_number=f_number, interpolation="linear", n_frames=2,
                                min_coverage=0)(data)
        want = ref.das_general(data, probe.positions, probe.normals, tuples, points, fs=FS, fc=FC, c=C, t0=T0,
                               f_number=f_number, interpolation="linear")
        assert np.count_nonzero(want) > 0.3 * want.size
        assert np.linalg.norm(got - want) <= TOLERANCES["das_rel_l2"] * np.linalg.norm(want)


def test_frames_per_call(rng):
    """A 16-frame call and 16 one-frame calls of the same plan give the same images."""
    probe = convex()
    seq = usbeam.Delays(delay_laws(probe.n_elements, rng)["diverging"])
    bf = usbeam.Beamformer(probe, seq, usbeam.PolarGrid.for_probe(probe, 0.03, 20, 24), fs=FS, fc=FC, c=C, t0=T0,
                           n_samples=N_SAMPLES, f_number=1.73, n_frames=16)
    data = (rng.standard_normal((16, probe.n_elements, N_SAMPLES))
            + 1j * rng.standard_normal((16, probe.n_elements, N_SAMPLES))).astype(np.complex64)
    whole = bf(data)
    single = np.concatenate([bf(data[i:i + 1]) for i in range(16)])
    for k in range(16):
        assert np.linalg.norm(whole[k] - single[k]) <= TOLERANCES["das_rel_l2"] * np.linalg.norm(single[k])


def test_coverage_from_the_plan_transmit_times(rng):
    """The Beamformer's coverage check reads the C plan's transmit times of its sample of
    points: the same fraction as evaluating the transmit model in NumPy (Delays: MUST's min
    over the virtual sources), and the plan's times equal that model to rounding."""
    probe = convex()
    grid = usbeam.PolarGrid.for_probe(probe, 0.03, 40, 36)
    seq = [usbeam.Delays(d) for d in delay_laws(probe.n_elements, rng).values()]
    for n_samples in (N_SAMPLES, 200, 120):
        kw = dict(fs=FS, c=C, t0=T0, n_samples=n_samples)
        bf = usbeam.Beamformer(probe, seq, grid, fc=FC, f_number=1.73, min_coverage=0, **kw)
        points = grid.coordinates()
        rows = np.arange(0, grid.n_points, 7)
        times = bf._plan_transmit_times(rows)
        want = np.stack([s.transmit_time(points[rows], probe, C) for s in seq], axis=1)
        np.testing.assert_allclose(times, want, rtol=1e-13, atol=0)
        from_plan = usbeam.beamformer.grid_coverage(probe, seq, grid, points=points,
                                                    transmit_times=bf._plan_transmit_times, **kw)
        from_model = usbeam.beamformer.grid_coverage(probe, seq, grid, **kw)
        assert from_plan == from_model
        # the plan's own test of a sample (usbeam_das_coverage), row by row against NumPy
        t0, t_end = T0, T0 + (n_samples - 1) / FS
        tx_sel = np.array([0, len(seq) - 1])
        rx = np.linalg.norm(points[rows][:, None, :] - probe.positions[None, :, :], axis=2) / C  # (rows, elements)
        tau = want[:, tx_sel][:, :, None] + rx[:, None, :]                                       # (rows, tx, elements)
        hits = ((tau >= t0) & (tau <= t_end)).any(axis=(1, 2))
        assert 0 < hits.mean() < 1 or n_samples == N_SAMPLES
        assert np.array_equal(bf._plan_covered(rows, tx_sel, t0, t_end), hits)
        from_c = usbeam.beamformer.grid_coverage(probe, seq, grid, points=points, covered=bf._plan_covered, **kw)
        assert from_c == from_model
    with pytest.raises(IndexError, match="rows"):
        bf._plan_transmit_times([grid.n_points])
    with pytest.raises(ValueError, match="row"):
        bf._plan_covered([grid.n_points], [0], 0.0, 1.0)
    with pytest.raises(ValueError, match="transmit"):
        bf._plan_covered([0], [len(seq)], 0.0, 1.0)


@pytest.mark.parametrize("f_number", [0.7, 1.0, 2.5])
def test_linear_aperture_sizes(rng, f_number):
    """The linear array's apertures (MUST's predicate |x_p - x_e| <= z_p / 2F), which the plan
    finds by stepping from the neighbouring point's or by binary search: a polar grid (each
    point's neighbour close), scattered points (mostly searched) and points placed on the
    predicate's ties (x_p at an element, z_p / 2F a whole number of pitches), against the
    predicate evaluated element by element in the same operations."""
    probe = usbeam.LinearArray(64, 3e-4, width=2.7e-4)
    x_e = probe.positions[:, 0]
    polar = usbeam.PolarGrid(np.linspace(5e-3, 0.05, 60), np.linspace(-0.7, 0.7, 45)).coordinates()
    scattered = np.column_stack([rng.uniform(-0.03, 0.03, 2000), np.zeros(2000), rng.uniform(1e-4, 0.05, 2000)])
    ties = np.column_stack([np.repeat(x_e, 12), np.zeros(64 * 12), np.tile(np.arange(1, 13) * 3e-4 * 2 * f_number, 64)])
    points = np.concatenate([polar, scattered, ties])
    bf = usbeam.Beamformer(probe, usbeam.PlaneWave(0.0), usbeam.Grid.points(points), fs=FS, fc=FC, c=C, t0=T0,
                           n_samples=N_SAMPLES, f_number=f_number, min_coverage=0)
    counts = usbeam._core.das_aperture_counts(bf._plan)
    inside = np.abs(points[:, :1] - x_e[None, :]) <= (points[:, 2] / (2.0 * f_number))[:, None]
    assert np.array_equal(counts, inside.sum(axis=1))
    assert (counts == 0).any() and (counts > 0).mean() > 0.5
