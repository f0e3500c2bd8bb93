"""usbeam.metrics against hand-computed cases and synthetic images with a known answer
(formulas in usbeam/metrics.py's docstring)."""
import math

import numpy as np
import pytest

import usbeam
from usbeam import metrics
from tolerances import TOLERANCES

EXACT = TOLERANCES["metrics_exact_abs"]


def grid(nx=41, nz=61, dx=1e-4, dz=1e-4, z0=10e-3):
    return usbeam.Grid(x=(np.arange(nx) - (nx - 1) / 2) * dx, z=z0 + np.arange(nz) * dz)


def test_circle_rectangle_annulus_count_the_points_by_hand():
    g = grid()
    # radius 2.5 pixels around an on-grid centre: (i, j) with i^2 + j^2 <= 6.25 -> 21 points
    m = metrics.circle(g, (0.0, 13e-3), 2.5e-4)
    assert m.shape == g.shape and m.sum() == 21
    r = metrics.rectangle(g, x=(-2e-4, 1e-4), z=(11e-3, 11.5e-3))  # 4 columns x 6 rows
    assert r.sum() == 24
    a = metrics.annulus(g, (0.0, 13e-3), 1.5e-4, 2.5e-4)  # 21 minus the 9 within 1.5 px (<= 2.25)
    assert a.sum() == 21 - 9


@pytest.mark.parametrize("call, name", [
    (lambda g: metrics.circle(g, (1.9e-3, 13e-3), 2e-4), "center/radius"),
    (lambda g: metrics.circle(g, (0.0, 9.9e-3), 1e-4), "center/radius"),
    (lambda g: metrics.rectangle(g, x=(-1e-3, 3e-3), z=(11e-3, 12e-3)), "x/z"),
    (lambda g: metrics.annulus(g, (0.0, 15.5e-3), 1e-4, 1e-3), "center/outer_radius"),
    # fwhm's search disc names fwhm's own parameters (it named circle's before)
    (lambda g: metrics.fwhm(np.ones(g.shape), g, (0.0, 13.0), search_radius=1e-4), "point/search_radius"),
])
def test_regions_outside_the_grid_are_refused(call, name):
    with pytest.raises(ValueError, match=f"{name}: .*outside the grid"):
        call(grid())


def test_region_bad_input():
    g = grid()
    with pytest.raises(ValueError, match="search_radius must be > 0"):
        metrics.fwhm(np.ones(g.shape), g, (0.0, 13e-3), search_radius=0.0)
    with pytest.raises(ValueError, match="point must be finite"):
        metrics.fwhm(np.ones(g.shape), g, (0.0, np.nan))
    with pytest.raises(ValueError, match="radius"):
        metrics.circle(g, (0, 13e-3), -1e-4)
    with pytest.raises(ValueError, match="center"):
        metrics.circle(g, (np.nan, 13e-3), 1e-4)
    with pytest.raises(TypeError, match="center"):
        metrics.circle(g, 0.0, 1e-4)
    with pytest.raises(ValueError, match="no grid point"):
        metrics.circle(g, (0.5e-4, 13.05e-3), 1e-5)
    with pytest.raises(ValueError, match="2-D"):
        metrics.circle(usbeam.Grid.points(np.zeros((3, 3))), (0, 0), 1e-3)
    with pytest.raises(TypeError, match="grid"):
        metrics.circle("grid", (0, 0), 1e-3)
    img = np.ones(g.shape)
    with pytest.raises(TypeError, match="inside"):
        metrics.contrast(img, np.ones(g.shape), np.ones(g.shape, bool))
    with pytest.raises(ValueError, match="outside"):
        metrics.contrast(img, np.ones(g.shape, bool), np.ones((2, 2), bool))
    bad = img.copy()
    bad[3, 3] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        metrics.speckle_snr(bad, np.ones(g.shape, bool))


def hand_image():
    """Inside: the values 1, 3 (mean 2, variance 1); outside: 4, 6 (mean 5, variance 1)."""
    img = np.zeros((4, 4), complex)
    inside = np.zeros((4, 4), bool)
    outside = np.zeros((4, 4), bool)
    inside[0, :] = True
    outside[2, :] = True
    img[0, :] = [1, 3, -1j, 3j]   # envelopes 1, 3, 1, 3 (the metrics take |image|)
    img[2, :] = [4, 6, -4, 6]
    img[1] = img[3] = 100         # outside both regions: never read
    return img, inside, outside


def test_contrast_cnr_by_hand():
    img, inside, outside = hand_image()
    assert metrics.contrast(img, inside, outside) == pytest.approx(20 * math.log10(2 / 5), abs=EXACT)
    assert metrics.cnr(img, inside, outside) == pytest.approx(3 / math.sqrt(2), abs=EXACT)
    assert metrics.cnr(img, inside, outside, definition="picmus") == pytest.approx(20 * math.log10(3), abs=EXACT)
    # speckle SNR of {1, 3}: mean 2 / std 1
    assert metrics.speckle_snr(img, inside) == pytest.approx(2.0, abs=EXACT)
    # the histograms of {1, 3} and {4, 6} do not overlap: gCNR 1; of a region with itself: 0
    assert metrics.gcnr(img, inside, outside) == pytest.approx(1.0, abs=EXACT)
    assert metrics.gcnr(img, inside, inside) == pytest.approx(0.0, abs=EXACT)


def test_gcnr_by_hand_partial_overlap():
    # 2 bins over [0, 2]: inside {0, 0, 0, 2} -> (3/4, 1/4), outside {0, 2, 2, 2} -> (1/4, 3/4);
    # overlap 1/4 + 1/4 = 1/2, gCNR 1/2
    img = np.array([[0.0, 0, 0, 2], [0, 2, 2, 2]])
    inside = np.array([[True] * 4, [False] * 4])
    assert metrics.gcnr(img, inside, ~inside, bins=2) == pytest.approx(0.5, abs=EXACT)


def test_speckle_snr_of_rayleigh_speckle_is_1_91():
    rng = np.random.default_rng(1)
    img = rng.standard_normal((400, 500)) + 1j * rng.standard_normal((400, 500))
    expected = math.sqrt(math.pi / (4 - math.pi))  # Rayleigh mean / std
    snr = metrics.speckle_snr(img, np.ones(img.shape, bool))
    assert snr == pytest.approx(expected, abs=TOLERANCES["metrics_speckle_snr_abs"])


def test_gcnr_of_two_gaussian_populations():
    rng = np.random.default_rng(2)
    d, sigma = 1.5, 1.0
    img = np.empty((2, 200_000))
    img[0] = 10 + sigma * rng.standard_normal(200_000)
    img[1] = 10 + d + sigma * rng.standard_normal(200_000)
    inside = np.zeros(img.shape, bool)
    inside[0] = True
    expected = 1 - 2 * 0.5 * math.erfc(d / (2 * sigma) / math.sqrt(2))  # 1 - 2 Phi(-d / 2 sigma)
    assert metrics.gcnr(img, inside, ~inside) == pytest.approx(expected, abs=TOLERANCES["metrics_gcnr_abs"])


def test_cyst_contrast_of_a_synthetic_image():
    # background envelope 1, cyst envelope 0.1: contrast -20 dB; CNR with no variance inside a
    # region is refused only when both are constant, so add a known spread outside
    g = grid(81, 81)
    cyst = metrics.circle(g, (0.0, 14e-3), 1e-3)
    ring = metrics.annulus(g, (0.0, 14e-3), 1.5e-3, 3e-3)
    img = np.ones(g.shape)
    img[cyst] = 0.1
    assert metrics.contrast(img, cyst, ring) == pytest.approx(-20.0, abs=EXACT)
    with pytest.raises(ValueError, match="constant"):
        metrics.cnr(img, cyst, ring)
    img[ring] = np.where(np.arange(ring.sum()) % 2 == 0, 0.5, 1.5)  # mean 1, std 0.5
    n = ring.sum()
    mean_o = (0.5 * ((n + 1) // 2) + 1.5 * (n // 2)) / n
    var_o = (0.25 * ((n + 1) // 2) + 2.25 * (n // 2)) / n - mean_o**2
    assert metrics.cnr(img, cyst, ring) == pytest.approx(abs(0.1 - mean_o) / math.sqrt(var_o), abs=EXACT)


def triangle(u, width):
    return np.clip(1 - np.abs(u) / width, 0, None)


@pytest.mark.parametrize("x0, z0", [(0.0, 13e-3), (-3e-4, 12.5e-3), (5e-4, 14.1e-3)])
def test_fwhm_of_a_piecewise_linear_target_is_exact(x0, z0):
    # triangle profiles with the apex on a sample (the log-parabola through the apex and its
    # two equal neighbours has its vertex at the apex, so the peak is the sample): the
    # half-maximum crossings lie on straight segments between samples, off the grid points, and the linear sub-pixel interpolation finds them exactly: FWHM = the
    # half-width at the base (axial 0.8 mm base half-width -> 0.8 mm; lateral 0.5 mm -> 0.5 mm)
    g = grid(81, 81, z0=11e-3)
    zz, xx = np.meshgrid(g.z, g.x, indexing="ij")
    img = 7.0 * triangle(zz - z0, 0.83e-3) * triangle(xx - x0, 0.47e-3)
    axial, lateral = metrics.fwhm(img, g, (x0, z0), search_radius=3e-4)
    assert axial == pytest.approx(0.83e-3, abs=EXACT)
    assert lateral == pytest.approx(0.47e-3, abs=EXACT)


def test_fwhm_of_a_gaussian_point_spread():
    sigma_x, sigma_z = 0.3e-3, 0.15e-3
    g = usbeam.Grid(x=np.arange(-3e-3, 3e-3 + 1e-9, sigma_x / 8), z=10e-3 + np.arange(0, 4e-3, sigma_z / 8))
    x0, z0 = 0.123e-3, 12.01e-3
    zz, xx = np.meshgrid(g.z, g.x, indexing="ij")
    img = np.exp(-(xx - x0) ** 2 / (2 * sigma_x**2) - (zz - z0) ** 2 / (2 * sigma_z**2))
    axial, lateral = metrics.fwhm(img, g, (0.1e-3, 12e-3))
    k = 2 * math.sqrt(2 * math.log(2))
    assert axial == pytest.approx(k * sigma_z, rel=TOLERANCES["metrics_fwhm_gaussian_rel"])
    assert lateral == pytest.approx(k * sigma_x, rel=TOLERANCES["metrics_fwhm_gaussian_rel"])


def test_fwhm_at_the_edge_is_nan_and_shapes_are_checked():
    g = grid()
    zz, xx = np.meshgrid(g.z, g.x, indexing="ij")
    img = triangle(zz - g.z[0], 0.8e-3) * triangle(xx, 0.5e-3)  # peak on the first row
    axial, lateral = metrics.fwhm(img, g, (0.0, g.z[0] + 1e-4), search_radius=1e-4)
    assert math.isnan(axial) and lateral == pytest.approx(0.5e-3, abs=EXACT)
    with pytest.raises(ValueError, match="grid's shape"):
        metrics.fwhm(img[:-1], g, (0.0, 12e-3))
    with pytest.raises(ValueError, match="no target"):
        metrics.fwhm(np.zeros(g.shape), g, (0.0, 12e-3))
