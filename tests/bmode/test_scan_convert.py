"""Scan conversion (usbeam.scan_convert / ScanConvertPlan) against scipy.ndimage.map_coordinates
(order 1) at the same polar coordinates (tests/reference/scan_convert.py), on float32 (dB,
Doppler maps) and uint8 B-mode images; the sector mask; the plot extent; bad input."""
import math

import numpy as np
import pytest

import usbeam
from reference import scan_convert as ref
from tolerances import TOLERANCES
from usbeam.grids import image_extent

ndimage = pytest.importorskip("scipy.ndimage")


def convex_sector(rng):
    """A sector with its apex behind the array (a convex array's centre of curvature)."""
    apex = (rng.uniform(-1e-3, 1e-3), -rng.uniform(0.02, 0.05))
    r0 = -apex[1] + rng.uniform(0, 2e-3)
    radii = np.linspace(r0, r0 + rng.uniform(0.04, 0.08), int(rng.integers(40, 90)))
    half = rng.uniform(0.3, 0.7)
    angles = np.linspace(-half, half * rng.uniform(0.8, 1.0), int(rng.integers(30, 70)))
    return usbeam.PolarGrid(radii, angles, apex)


def peer(image, polar, grid):
    """map_coordinates(order=1) of each image at the reference coordinates; and the mask."""
    r, a = polar.radii, polar.angles
    pts = grid.coordinates()[:, [0, 2]]
    u, v = ref.polar_indices(pts, r[0], (r[-1] - r[0]) / (r.size - 1), a[0], (a[-1] - a[0]) / (a.size - 1),
                             polar.apex)
    mask = ref.inside(u, v, r.size, a.size)
    flat = image.reshape((-1,) + polar.shape).astype(np.float64)
    values = np.stack([ndimage.map_coordinates(f, np.stack([u, v]), order=1, mode="nearest") for f in flat])
    return values.reshape(image.shape[:-2] + grid.shape), mask.reshape(grid.shape)


@pytest.mark.parametrize("leading", [(), (3,), (2, 2)])
def test_float_matches_map_coordinates(rng, leading):
    polar = convex_sector(rng)
    grid = polar.cartesian_grid(nx=120, nz=90)
    image = rng.uniform(-60, 0, leading + polar.shape).astype(np.float32)  # dB
    got = usbeam.scan_convert(image, polar, grid, fill=-100.0)
    want, mask = peer(image, polar, grid)
    assert got.shape == leading + grid.shape and got.dtype == np.float32
    assert 0.3 < mask.mean() < 0.95
    np.testing.assert_array_equal(got[..., ~mask], -100.0)
    err = np.abs(got[..., mask] - want[..., mask]).max()
    assert err <= TOLERANCES["scan_convert_rel"] * np.abs(image).max()


def test_uint8_bmode_matches_map_coordinates(rng):
    polar = convex_sector(rng)
    grid = polar.cartesian_grid(spacing=3e-4)
    image = rng.integers(0, 256, (2,) + polar.shape).astype(np.uint8)
    plan = usbeam.ScanConvertPlan(polar, grid, image.shape, np.uint8, fill=7)
    got = plan(image)
    want, mask = peer(image, polar, grid)
    assert got.dtype == np.uint8
    np.testing.assert_array_equal(plan.mask, mask)
    np.testing.assert_array_equal(got[..., ~mask], 7)
    diff = np.abs(got[..., mask].astype(int) - np.floor(want[..., mask] + 0.5).astype(int))
    assert diff.max() <= TOLERANCES["scan_convert_uint8_max_levels"]
    assert np.mean(diff > 0) <= TOLERANCES["scan_convert_uint8_fraction_off"]


def test_phased_doppler_map(rng):
    """A phased-array sector (apex on the array) and a signed Doppler velocity map."""
    polar = usbeam.PolarGrid(np.linspace(0.0, 0.1, 64), np.linspace(-math.pi / 4, math.pi / 4, 48))
    grid = polar.cartesian_grid(nx=100, nz=80)
    velocity = rng.uniform(-0.3, 0.3, polar.shape).astype(np.float32)
    plan = usbeam.ScanConvertPlan(polar, grid)
    out = np.full(grid.shape, np.nan, np.float32)
    assert plan(velocity, out=out) is out
    want, mask = peer(velocity, polar, grid)
    assert np.all(np.isfinite(out))
    assert np.abs(out[mask] - want[mask]).max() <= TOLERANCES["scan_convert_rel"] * 0.3
    x0, x1, z0, z1 = polar.bounds()
    assert x0 == pytest.approx(-0.1 * math.sin(math.pi / 4)) and z1 == pytest.approx(0.1)


def test_exact_on_the_polar_samples(rng):
    """A Cartesian point on an inner polar sample gets that sample (fractions 0 or 1; the
    outer ones may fall a rounding outside the sector)."""
    polar = usbeam.PolarGrid(np.linspace(0.01, 0.05, 5), np.linspace(-0.4, 0.4, 5), apex=(0.0, -0.01))
    pts = polar.coordinates()
    image = rng.uniform(0, 1, polar.shape).astype(np.float32)
    grid = usbeam.Grid(x=np.unique(np.round(pts[:, 0], 12)), z=np.unique(np.round(pts[:, 2], 12)))
    got = usbeam.scan_convert(image, polar, grid, fill=-1.0)
    inner = np.zeros(polar.shape, bool)
    inner[1:-1, 1:-1] = True
    for (x, _, z), value in zip(pts[inner.ravel()], image[inner]):
        i, j = np.argmin(np.abs(grid.z - z)), np.argmin(np.abs(grid.x - x))
        assert got[i, j] == pytest.approx(value, abs=1e-5)


def test_extent():
    grid = usbeam.Grid(x=np.linspace(-0.01, 0.01, 21), z=np.linspace(0.0, 0.02, 11))
    assert image_extent(grid) == pytest.approx((-0.0105, 0.0105, 0.021, -0.001))
    polar = usbeam.PolarGrid(np.linspace(0.01, 0.05, 5), np.linspace(-0.4, 0.4, 5))
    plan = usbeam.ScanConvertPlan(polar, grid)
    assert plan.extent == image_extent(grid)
    # imshow spreads equal pixels over the extent: a grid with steps that vary cannot be shown so
    with pytest.raises(ValueError, match="grid.z is not uniformly spaced"):
        image_extent(usbeam.Grid(x=np.linspace(-0.01, 0.01, 21), z=np.geomspace(0.001, 0.02, 11)))
    with pytest.raises(ValueError, match="grid.x is not uniformly spaced"):
        image_extent(usbeam.Grid(x=[0.0, 1e-3, 3e-3], z=[0.01]))
    # spacing that differs by rounding only (arange, linspace) is uniform
    assert image_extent(usbeam.Grid(x=np.arange(-64, 64) * 0.1e-3 + 1e-18, z=[0.01]))[0] == pytest.approx(-6.45e-3)


def test_inputs_unchanged_and_nan_refused(rng):
    polar = usbeam.PolarGrid(np.linspace(0.01, 0.05, 8), np.linspace(-0.4, 0.4, 9))
    grid = polar.cartesian_grid(nx=20, nz=20)
    image = rng.uniform(0, 1, polar.shape).astype(np.float32)
    keep = image.copy()
    usbeam.scan_convert(image, polar, grid)
    np.testing.assert_array_equal(image, keep)
    image[3, 4] = np.nan
    out = np.full(grid.shape, 5.0, np.float32)
    with pytest.raises(ValueError, match="image contains NaN"):
        usbeam.scan_convert(image, polar, grid, out=out)
    np.testing.assert_array_equal(out, 5.0)


@pytest.mark.parametrize("make, exc, word", [
    (lambda p, g: usbeam.scan_convert(np.zeros((8, 9), np.complex64), p, g), TypeError, "image"),
    (lambda p, g: usbeam.scan_convert(np.zeros((8, 8), np.float32), p, g), ValueError, "shape"),
    (lambda p, g: usbeam.scan_convert(np.zeros((8, 9), np.uint8), p, g, fill=300), ValueError, "fill"),
    (lambda p, g: usbeam.scan_convert(np.zeros((8, 9), np.uint8), p, g, fill=1.5), ValueError, "fill"),
    (lambda p, g: usbeam.scan_convert(np.zeros(9, np.float32), p, g), ValueError, "image"),
    (lambda p, g: usbeam.scan_convert(np.zeros((8, 9)), "polar", g), TypeError, "polar_grid"),
    (lambda p, g: usbeam.scan_convert(np.zeros((8, 9)), p, usbeam.Grid(x=[0.0], z=[0.01], y=[0.0])), TypeError,
     "cartesian_grid"),
    (lambda p, g: usbeam.scan_convert(np.zeros((3, 9)), usbeam.PolarGrid([0.01, 0.02, 0.04], p.angles), g),
     ValueError, "equally spaced"),
    (lambda p, g: usbeam.ScanConvertPlan(p, g, (2, 8, 9), np.uint8)(np.zeros((2, 8, 9), np.float32)), TypeError,
     "uint8"),
])
def test_bad_input(make, exc, word):
    polar = usbeam.PolarGrid(np.linspace(0.01, 0.05, 8), np.linspace(-0.4, 0.4, 9))
    grid = polar.cartesian_grid(nx=20, nz=20)
    with pytest.raises(exc, match=word):
        make(polar, grid)


@pytest.mark.parametrize("make, word", [
    (lambda: usbeam.PolarGrid([0.01, 0.02], [-0.1, 0.1], apex=(0.0, 0.005)), "apex"),
    (lambda: usbeam.PolarGrid([0.01, 0.02], [-2.0, 0.1]), "angles"),
    (lambda: usbeam.PolarGrid([0.02, 0.01], [-0.1, 0.1]), "radii"),
    (lambda: usbeam.PolarGrid([-0.01, 0.01], [-0.1, 0.1]), "radii"),
    (lambda: usbeam.SphericalGrid([0.01, 0.02], [0.0], [0.0], apex=(0.0, 0.0, 0.01)), "apex"),
    (lambda: usbeam.SphericalGrid([0.01, 0.02], [0.0], [1.7]), "elevations"),
])
def test_bad_grids(make, word):
    with pytest.raises(ValueError, match=word):
        make()


def test_grid_beside_the_sector_refused_naming_cartesian_grid(rng):
    """A Cartesian grid in mm beside a polar grid in m holds no point of the sector: refused,
    naming cartesian_grid and the likely cause; min_coverage=0 builds it, and the image is
    then all fill, as map_coordinates' mask says."""
    polar = convex_sector(rng)
    in_m = polar.cartesian_grid(nx=40, nz=40)
    in_mm = usbeam.Grid(x=in_m.x * 1e3, z=in_m.z * 1e3)
    image = rng.uniform(-60, 0, polar.shape).astype(np.float32)
    with pytest.raises(ValueError, match=r"cartesian_grid: only 0\.0 %.*mm instead of m.*min_coverage=0"):
        usbeam.scan_convert(image, polar, in_mm)
    with pytest.raises(ValueError, match="min_coverage"):
        usbeam.ScanConvertPlan(polar, in_m, min_coverage=1.5)
    got = usbeam.scan_convert(image, polar, in_mm, fill=-99.0, min_coverage=0)
    _, mask = peer(image, polar, in_mm)
    assert not mask.any()
    np.testing.assert_array_equal(got, -99.0)


@pytest.mark.parametrize("min_coverage", [0.2, 0.6])
def test_min_coverage_against_the_reference_mask(rng, min_coverage):
    """The refusal follows the fraction of the grid inside the sector (the reference's mask):
    a sector's own bounding grid holds 40-70 % of it, a grid twice as wide and deep about a
    quarter of that."""
    polar = convex_sector(rng)
    box = polar.cartesian_grid(nx=64, nz=64)
    wide = usbeam.Grid(x=np.linspace(box.x[0] - (box.x[-1] - box.x[0]), box.x[-1], 64),
                       z=np.linspace(box.z[0], box.z[-1] + (box.z[-1] - box.z[0]), 64))
    for grid in (box, wide):
        _, mask = peer(np.zeros(polar.shape, np.float32), polar, grid)
        fraction = mask.mean()
        assert 0.05 < fraction < 0.8
        if abs(fraction - min_coverage) < 0.02:
            continue  # the plan tests a stride of 4096 points, the reference every point
        if fraction < min_coverage:
            with pytest.raises(ValueError, match="cartesian_grid"):
                usbeam.ScanConvertPlan(polar, grid, min_coverage=min_coverage)
        else:
            plan = usbeam.ScanConvertPlan(polar, grid, min_coverage=min_coverage)
            np.testing.assert_array_equal(plan.mask, mask)
