"""Adaptive beamformers on convex arrays (element normals, cone apertures): every method on RF
and IQ against the float64 reference (tests/reference/adaptive.py, beamform_general: the
convex geometry of tests/reference/das.py's das_general), with the linear-array tolerance; a
point target where DMAS and MV narrow the lateral main lobe as on linear arrays; and the
geometries the methods refuse (2-D apertures, elements out of order, apertures that are not a
contiguous run of elements)."""
import numpy as np
import pytest

import usbeam
from reference import adaptive as ref
from tolerances import TOLERANCES
from usbeam import metrics
from das_checks import random_data

FC, FS, C, T0 = 4e6, 20e6, 1540.0, 1e-6
N_SAMPLES = 460


def convex_probe():
    # 40 elements, 0.5 mm pitch on a 40 mm radius: the normals span +-14 degrees
    return usbeam.ConvexArray(40, 0.5e-3, 40e-3, element_width=0.45e-3)


def diverging_sequence(probe):
    """Two diverging waves from virtual sources behind the arc (compounded), with the
    reference's tuples."""
    h = probe.apothem
    sources = [(-1.5e-3, -h + 4e-3), (2e-3, -h + 6e-3)]
    return [usbeam.DivergingWave(s) for s in sources], [("diverging", (x, 0.0, z)) for x, z in sources]


def sector_points(probe):
    """A sector in front of the arc (polar about the centre of curvature), reaching past the
    outer elements' cones at the sides."""
    h = probe.apothem
    r = probe.radius + np.linspace(4e-3, 14e-3, 5)
    th = np.linspace(-0.3, 0.3, 9)
    rr, tt = np.meshgrid(r, th, indexing="ij")
    return np.stack([(rr * np.sin(tt)).ravel(), np.zeros(rr.size), (rr * np.cos(tt) - h).ravel()], axis=1)


def run(method, rng, dtype, *, f_number=1.0, window="hann", interpolation="linear", n_frames=2, **options):
    probe = convex_probe()
    seq, tuples = diverging_sequence(probe)
    pts = sector_points(probe)
    grid = usbeam.Grid.points(pts)
    data = random_data(rng, (n_frames, len(seq), probe.n_elements, N_SAMPLES), dtype)
    before = data.copy()
    bf = usbeam.Beamformer(probe, seq, grid, fs=FS, fc=FC, c=C, t0=T0, n_samples=N_SAMPLES, f_number=f_number,
                           window=window, interpolation=interpolation, dtype=dtype, n_frames=n_frames,
                           method=method, **options)
    got = bf(data)
    assert np.array_equal(data, before)  # input untouched
    want = ref.beamform_general(method, data, probe.positions, probe.normals, tuples, pts, fs=FS, fc=FC, c=C, t0=T0,
                                f_number=f_number, window_kind=window, interpolation=interpolation, **options)
    return got.reshape(want.shape), want


def rel_l2(got, expected):
    return np.linalg.norm(got - expected) / np.linalg.norm(expected)


CASES = [
    ("cf", {}), ("gcf", {"gcf_m0": 2}), ("dmas", {}), ("fdmas", {"fdmas_half_taps": 5}), ("pdas", {"p": 2.5}),
    ("mv", {"subarray_fraction": 0.5, "diagonal_loading": 0.02, "temporal_averaging": 1}),
    ("mv", {"subarray_length": 6, "diagonal_loading": 0.05}),
]


@pytest.mark.parametrize("method, options", CASES, ids=[f"{m}-{i}" for i, (m, _) in enumerate(CASES)])
@pytest.mark.parametrize("dtype", [np.float32, np.complex64], ids=["rf", "iq"])
def test_convex_against_reference(method, options, dtype, rng):
    got, want = run(method, rng, dtype, **options)
    assert got.dtype == (np.complex64 if dtype == np.complex64 else np.float32)
    # cone apertures: the side points see only part of the arc, the outermost ones none of it
    assert np.any(want[0] == 0) and np.count_nonzero(want[0]) > 0.9 * want[0].size
    assert rel_l2(got, want) < TOLERANCES["adaptive_rel_l2"]


@pytest.mark.parametrize("method, options", [("gcf", {"gcf_m0": 1}), ("mv", {"subarray_length": 8}), ("dmas", {})])
def test_convex_full_aperture_int16_cubic(method, options, rng):
    # f_number 0: every element, the full-aperture Hann window over the arc's x extent
    got, want = run(method, rng, np.int16, f_number=0.0, interpolation="cubic", n_frames=1, **options)
    assert rel_l2(got, want) < TOLERANCES["adaptive_rel_l2"]


def test_convex_mv_without_the_delay_table(rng):
    # entries recomputed per point (max_table_bytes=1, usbeam_das_point_entries): the same image
    probe = convex_probe()
    seq, _ = diverging_sequence(probe)
    grid = usbeam.Grid.points(sector_points(probe))
    data = random_data(rng, (1, len(seq), probe.n_elements, N_SAMPLES), np.complex64)
    kw = dict(fs=FS, fc=FC, c=C, t0=T0, n_samples=N_SAMPLES, f_number=1.0, method="mv", subarray_length=10)
    with_table = usbeam.Beamformer(probe, seq, grid, **kw)(data)
    without = usbeam.Beamformer(probe, seq, grid, max_table_bytes=1, **kw)(data)
    np.testing.assert_array_equal(without, with_table)


@pytest.fixture(scope="module")
def convex_point():
    """A point target 30 mm deep, off the axis (its aperture's normals tilted), one diverging
    wave from the centre of curvature, IQ."""
    probe = usbeam.ConvexArray(48, 0.5e-3, 50e-3, element_width=0.45e-3)
    wave = usbeam.DivergingWave((0.0, -probe.apothem))
    target = (4e-3, 30e-3)
    rf = usbeam.simulate_rf([[target[0], 0.0, target[1]]], [1.0], probe, wave, fs=FS, fc=FC, n_samples=1000,
                            c=C, bandwidth=0.6)
    iq = usbeam.rf2iq(rf, fs=FS, fc=FC, bandwidth=0.6)
    grid = usbeam.Grid(x=np.arange(1e-3, 7e-3 + 1e-9, 0.04e-3), z=np.arange(29e-3, 31e-3 + 1e-9, 0.04e-3))
    return probe, wave, iq, grid, target


def _lateral_fwhm(convex_point, method, **options):
    probe, wave, iq, grid, target = convex_point
    image = usbeam.Beamformer(probe, wave, grid, fs=FS, fc=FC, c=C, n_samples=iq.shape[-1], f_number=1.5,
                              method=method, **options)(iq).reshape(grid.shape)
    return metrics.fwhm(image, grid, target)[1]


@pytest.mark.parametrize("method, options", [("dmas", {}), ("mv", {"subarray_fraction": 0.5})])
def test_convex_point_lateral_fwhm_narrower_than_das(convex_point, method, options):
    das = _lateral_fwhm(convex_point, "das")
    adaptive = _lateral_fwhm(convex_point, method, **options)
    assert np.isfinite(das) and adaptive < 0.9 * das, (method, das, adaptive)


def _plan(probe, **kw):
    grid = usbeam.Grid(x=np.linspace(-2e-3, 2e-3, 5), z=np.linspace(8e-3, 12e-3, 5))
    return usbeam.Beamformer(probe, usbeam.PlaneWave(0.0), grid, fs=FS, fc=FC, c=C, n_samples=N_SAMPLES,
                             min_coverage=0, **kw)


def test_two_dimensional_apertures_are_refused():
    with pytest.raises(TypeError, match="2-D aperture"):
        _plan(usbeam.MatrixArray(nx=6, ny=4, pitch_x=3e-4, pitch_y=3e-4), method="cf")
    pos = np.stack([np.tile(np.arange(4) * 3e-4, 3), np.repeat(np.arange(3) * 3e-4, 4), np.zeros(12)], axis=1)
    with pytest.raises(TypeError, match="2-D aperture"):
        _plan(usbeam.ElementArray(pos), method="mv", subarray_length=3)
    _plan(usbeam.MatrixArray(nx=6, ny=4, pitch_x=3e-4, pitch_y=3e-4))  # DAS takes it


def test_line_element_arrays_in_order_are_accepted_else_refused(rng):
    probe = convex_probe()
    seq, tuples = diverging_sequence(probe)
    pts = sector_points(probe)
    data = random_data(rng, (1, len(seq), probe.n_elements, N_SAMPLES), np.complex64)
    kw = dict(fs=FS, fc=FC, c=C, t0=T0, n_samples=N_SAMPLES, f_number=1.0, method="gcf", gcf_m0=1)
    # the convex array given as data (as the Vantage reader builds it), listed right to left
    flipped = usbeam.ElementArray(probe.positions[::-1], probe.normals[::-1])
    got = usbeam.Beamformer(flipped, seq, usbeam.Grid.points(pts), **kw)(data[:, :, ::-1])
    want = ref.beamform_general("gcf", data, probe.positions, probe.normals, tuples, pts, fs=FS, fc=FC, c=C, t0=T0,
                                f_number=1.0, gcf_m0=1)
    assert rel_l2(got.reshape(want.shape), want) < TOLERANCES["adaptive_rel_l2"]
    # listed out of order: CF/GCF/MV would treat non-neighbours as neighbours
    order = rng.permutation(probe.n_elements)
    scrambled = usbeam.ElementArray(probe.positions[order], probe.normals[order])
    with pytest.raises(ValueError, match="in order along the array"):
        usbeam.Beamformer(scrambled, seq, usbeam.Grid.points(pts), **kw)


def test_non_contiguous_cone_apertures_are_refused():
    # x in order, but the middle element faces sideways: points ahead see elements on both
    # sides of it and not it, a gap inside the aperture that CF/GCF/MV would count as zero
    x = np.arange(9) * 0.5e-3 - 2e-3
    pos = np.stack([x, np.zeros(9), np.zeros(9)], axis=1)
    normals = np.tile([0.0, 0.0, 1.0], (9, 1))
    normals[4] = (np.sin(1.2), 0.0, np.cos(1.2))
    probe = usbeam.ElementArray(pos, normals)
    with pytest.raises(ValueError, match="not a contiguous run of elements"):
        _plan(probe, f_number=1.0, method="cf")
    _plan(probe, f_number=1.0)  # DAS sums the zeros harmlessly
