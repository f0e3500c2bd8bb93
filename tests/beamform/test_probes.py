"""Probe geometry as data: positions and normals of linear, convex and matrix arrays, the
generic ElementArray, and their input checks.  Convex arrays against PyMUST's own element
positions (getparam(...).getElementPositions: MUST's convention for curved arrays)."""
import math

import numpy as np
import pytest

import usbeam
from usbeam.probes import ElementArray

pymust = pytest.importorskip("pymust")


@pytest.mark.parametrize("name", ["C5-2v", "P4-2v", "L11-5v"])
def test_positions_match_pymust(name):
    param = pymust.getparam(name)
    xe, ze, the, _ = param.getElementPositions()
    n, pitch, radius = param.Nelements, param.pitch, param.radius
    if math.isinf(radius):
        probe = usbeam.LinearArray(n, pitch, width=param.width)
    else:
        probe = usbeam.ConvexArray(n_elements=n, pitch=pitch, radius=radius, element_width=param.width)
    pos, nrm = probe.positions, probe.normals
    np.testing.assert_allclose(pos[:, 0], xe.ravel(), rtol=0, atol=1e-15)
    np.testing.assert_allclose(pos[:, 2], ze.ravel(), rtol=0, atol=1e-15)
    np.testing.assert_array_equal(pos[:, 1], 0.0)
    np.testing.assert_allclose(nrm[:, 0], np.sin(the.ravel()), rtol=0, atol=1e-15)
    np.testing.assert_allclose(nrm[:, 2], np.cos(the.ravel()), rtol=0, atol=1e-15)
    np.testing.assert_allclose(np.linalg.norm(nrm, axis=1), 1.0, rtol=0, atol=1e-15)


def test_convex_convention():
    """MUST's convention: outer elements at z = 0, the centre element bulges to z = R - h,
    neighbours pitch apart along the arc, normals through the centre of curvature (0, 0, -h)."""
    probe = usbeam.ConvexArray(n_elements=129, pitch=0.5e-3, radius=0.05)
    pos, nrm = probe.positions, probe.normals
    h = probe.apothem
    assert abs(pos[0, 2]) < 1e-15 and abs(pos[-1, 2]) < 1e-15
    assert pos[64, 2] == pytest.approx(0.05 - h, abs=1e-15) and pos[64, 0] == pytest.approx(0.0, abs=1e-15)
    chord = np.linalg.norm(np.diff(pos, axis=0), axis=1)
    np.testing.assert_allclose(chord, 2 * 0.05 * math.sin(math.asin(0.5e-3 / 0.1)), rtol=1e-12)
    centre = np.array(probe.center_of_curvature)
    np.testing.assert_allclose(np.linalg.norm(pos - centre, axis=1), 0.05, rtol=1e-14)
    np.testing.assert_allclose(nrm, (pos - centre) / 0.05, atol=1e-14)


def test_matrix_array_rows():
    probe = usbeam.MatrixArray(nx=32, ny=35, pitch_x=0.3e-3, pitch_y=0.3e-3, missing_rows=(8, 17, 26))
    assert probe.n_elements == 1024 and probe.two_dimensional
    pos = probe.positions
    assert pos.shape == (1024, 3)
    ys = np.unique(np.round(pos[:, 1] / 0.3e-3 + 17, 9))
    assert len(ys) == 32 and not set(ys) & {8.0, 17.0, 26.0}
    np.testing.assert_allclose(pos[:32, 0], (np.arange(32) - 15.5) * 0.3e-3)  # x fastest
    np.testing.assert_array_equal(probe.normals, np.tile([0.0, 0.0, 1.0], (1024, 1)))


def test_element_array_from_data():
    convex = usbeam.ConvexArray(n_elements=64, pitch=0.5e-3, radius=0.04, element_width=0.45e-3)
    generic = ElementArray(convex.positions, convex.normals * 3.0, width=convex.width)
    np.testing.assert_allclose(generic.normals, convex.normals, atol=1e-15)
    assert not generic.two_dimensional and generic.n_elements == 64
    matrix = usbeam.MatrixArray(4, 4, 3e-4, 3e-4)
    assert ElementArray(matrix.positions).two_dimensional


@pytest.mark.parametrize("make, exc, word", [
    (lambda: usbeam.ConvexArray(64, 3e-4, 0.0), ValueError, "radius"),
    (lambda: usbeam.ConvexArray(64, 3e-4, -0.01), ValueError, "radius"),
    (lambda: usbeam.ConvexArray(64, 3e-4, float("inf")), ValueError, "radius"),
    (lambda: usbeam.ConvexArray(128, 5e-4, 0.005), ValueError, "radius"),  # more than half a circle
    (lambda: usbeam.ConvexArray(64, 3e-4, 0.04, element_width=4e-4), ValueError, "element_width"),
    (lambda: usbeam.MatrixArray(8, 8, 3e-4, 3e-4, element_height=5e-4), ValueError, "element_height"),
    (lambda: usbeam.MatrixArray(8, 8, 3e-4, 3e-4, missing_rows=(8,)), ValueError, "missing_rows"),
    (lambda: usbeam.MatrixArray(8, 2, 3e-4, 3e-4, missing_rows=(0, 1)), ValueError, "missing_rows"),
    (lambda: usbeam.MatrixArray(8, 8, 0.0, 3e-4), ValueError, "pitch_x"),
    (lambda: usbeam.LinearArray(8, 3e-4, width=4e-4), ValueError, "overlap"),
    (lambda: ElementArray(np.zeros((2, 3))), ValueError, "coincide"),
    (lambda: ElementArray([[0, 0, 0], [2e-4, 0, 0]], width=3e-4), ValueError, "overlap"),
    (lambda: ElementArray([[0, 0, 0], [2e-4, 0, 0]], normals=[[0, 0, 1], [0, 0, -1]]), ValueError, "normals"),
    (lambda: ElementArray([[0, 0, 0], [2e-4, 0, 0]], normals=[[0, 0, 1], [0, 0, 0]]), ValueError, "normals"),
    (lambda: ElementArray(np.zeros((2, 2))), ValueError, "positions"),
    (lambda: ElementArray([[0, 0, float("nan")]]), ValueError, "positions"),
])
def test_bad_probes(make, exc, word):
    with pytest.raises(exc, match=word):
        make()


def test_matrix_element_count_must_match_data():
    probe = usbeam.MatrixArray(4, 5, 3e-4, 3e-4, missing_rows=(2,))
    grid = usbeam.Grid(x=[0.0], z=[5e-3])
    bf = usbeam.Beamformer(probe, usbeam.PlaneWave(0.0), grid, fs=20e6, fc=5e6, n_samples=200)
    with pytest.raises(ValueError, match="probe has 16"):
        bf(np.zeros((20, 200), np.complex64))


@pytest.mark.parametrize("n", [4, 5, 17, 128, 600])
def test_delays_splines_match_scipy_not_a_knot(n):
    """Delays.sources interpolates positions and delays on 4 n points by not-a-knot cubic
    splines of the element index (PyMUST dasmtx); its splines of several rows at once (one
    solve shared by x, z and the delays; 600 knots take the elimination, not the cached
    inverse) against scipy's CubicSpline, row by row and as a 1-D call."""
    from scipy.interpolate import CubicSpline
    from usbeam.geometry import _not_a_knot_spline
    rng = np.random.default_rng(n)
    values, t = rng.standard_normal((3, n)), np.linspace(0, n - 1, 4 * n)
    expected = CubicSpline(np.arange(n), values, axis=1, bc_type="not-a-knot")(t)
    np.testing.assert_allclose(_not_a_knot_spline(values, t), expected, rtol=0, atol=1e-12)
    np.testing.assert_allclose(_not_a_knot_spline(values[1], t), expected[1], rtol=0, atol=1e-12)


def test_convex_delays_sources_follow_the_arc():
    """A convex probe's Delays: the spline sources (x, z, c * delay) pass through every
    element's position and c times its delay (knots at the element indices)."""
    probe = usbeam.ConvexArray(64, 3e-4, 0.02)
    delays = np.linspace(0.0, 2e-6, 64) ** 1.5 * 1e3
    src = usbeam.Delays(delays).sources(probe, 1540.0)
    assert src.shape == (3, 4 * 64)
    knots = np.round(np.linspace(0, 63, 4 * 64), 9)
    at = np.flatnonzero(knots == np.round(knots))  # the samples that fall on an element
    e = knots[at].astype(int)
    np.testing.assert_allclose(src[0, at], probe.positions[e, 0], rtol=0, atol=1e-12)
    np.testing.assert_allclose(src[1, at], probe.positions[e, 2], rtol=0, atol=1e-12)
    np.testing.assert_allclose(src[2, at], 1540.0 * (delays[e] - delays.min()), rtol=0, atol=1e-12)


def test_delay_sources_are_reused_per_probe_and_speed():
    """A Delays keeps its sources per (probe, c) for the next plan: the same values every call,
    a caller's edit of a returned array changes no later one, another c or an equal-but-distinct
    probe gives its own, and a probe given as arrays (no hash) is computed every time."""
    probe = usbeam.ConvexArray(64, 3e-4, 0.02)
    seq = usbeam.Delays(np.linspace(0.0, 2e-6, 64))
    first = seq.sources(probe, 1540.0)
    first[:] = 0.0
    again = seq.sources(probe, 1540.0)
    np.testing.assert_array_equal(again, seq._compute_sources(probe, 1540.0))
    assert np.any(again != 0.0)
    np.testing.assert_array_equal(seq.sources(usbeam.ConvexArray(64, 3e-4, 0.02), 1540.0), again)
    np.testing.assert_allclose(seq.sources(probe, 1480.0)[2], again[2] * 1480.0 / 1540.0, rtol=1e-14, atol=0)
    other = usbeam.ConvexArray(64, 3e-4, 0.03)
    assert not np.array_equal(seq.sources(other, 1540.0), again)
    as_arrays = usbeam.ElementArray(probe.positions, probe.normals)
    np.testing.assert_allclose(seq.sources(as_arrays, 1540.0), again, rtol=0, atol=1e-15)
