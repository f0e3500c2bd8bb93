"""End-to-end row-column / TOBE imaging of simulated point scatterers: encoded acquisition
(Hadamard transmit for FORCES, Hadamard read-out for HERCULES, TOBE polarity flips),
decoding, beamforming; every method puts the point at its true position within lambda/2;
FORCES has a narrower lateral main lobe than VLS."""
import math

import numpy as np
import pytest
from scipy.signal import hilbert

import usbeam
from tolerances import TOLERANCES

FC, FS, C = 5e6, 20e6, 1540.0
LAMBDA = C / FC
N = 32
PITCH = 0.3e-3                      # aperture half-width 4.65 mm
N_SAMPLES = 520


def make_array(transform=None, tobe=True):
    return usbeam.RowColumnArray(N, N, PITCH, transform=transform, fc=FC, bandwidth=0.7, tobe=tobe)


def to_iq(rf, t0=0.0):
    """Baseband IQ of RF records (samples last): analytic signal times exp(-j 2 pi fc t)."""
    t = t0 + np.arange(rf.shape[-1]) / FS
    return (hilbert(rf.astype(np.float64), axis=-1) * np.exp(-2j * np.pi * FC * t)).astype(np.complex64)


# method -> (simulation/beamforming keywords, 3-D localisation or B-scan in the point's xz plane)
SCHEMES = {
    "forces": (dict(), False),
    "uforces": (dict(sparse_elements=list(range(0, N, 3))), False),
    "hercules": (dict(tx="columns", angles=[0.0]), True),
    "uhercules": (dict(tx="columns", angles=[0.0], sparse_elements=list(range(1, N, 2))), True),
    "vls": (dict(tx="rows", angles=np.radians([-12, -6, 0, 6, 12]), focal_depths=[-6e-3] * 5), True),
    "tpw": (dict(tx="rows", angles=np.radians([-12, -6, 0, 6, 12]), focal_depths=[math.inf] * 5), True),
    "flash": (dict(tx="rows", angles=[0.0]), False),
}


def acquire(array, method, point, kwargs):
    """Simulated acquisition, encoded when the method is (FORCES, HERCULES), then decoded,
    then IQ."""
    encode = method in ("forces", "hercules")
    raw = usbeam.simulate_rca(np.asarray([point]), [1.0], array, method, fs=FS, fc=FC, n_samples=N_SAMPLES,
                              encode=encode, **kwargs)
    if encode:
        raw = usbeam.rca_decode(raw, array, method)
    return to_iq(raw)


def peak(image, grid):
    env = np.abs(image).reshape(grid.shape)
    idx = np.unravel_index(np.argmax(env), env.shape)
    return grid.points()[idx]


def locate(array, method, data, kwargs, guess, three_d):
    """Coarse search (lambda/2) over +-2.5 mm around the guess, then fine (lambda/16)."""
    def grid_around(center, half, step):
        axes = [np.arange(c - half, c + half + step / 2, step) for c in center]
        if three_d:
            return usbeam.RCAGrid.volume(axes[0], axes[1], axes[2])
        return usbeam.RCAGrid.bscan(axes[0], axes[2], "xz", center[1])

    def image(grid):
        return usbeam.rca_beamform(data, array, method, grid, fs=FS, fc=FC, f_number=1.0, **kwargs)

    center = np.asarray(guess, dtype=np.float64)
    coarse = grid_around(center, 2.5e-3, LAMBDA / 2)
    best = peak(image(coarse), coarse)
    fine = grid_around(best, LAMBDA, LAMBDA / 16)
    return peak(image(fine), fine)


@pytest.mark.parametrize("method", list(SCHEMES))
def test_point_imaged_at_true_position(method):
    kwargs, three_d = SCHEMES[method]
    array = make_array()
    points = [(0.0, 0.0, 8e-3), (2.1e-3, 0.0 if not three_d else -1.4e-3, 11e-3)]
    if method in ("forces", "uforces"):
        points.append((6.5e-3, 0.0, 9e-3))   # beyond the aperture's shadow (|x| > 4.65 mm)
    for point in points:
        data = acquire(array, method, point, kwargs)
        guess = np.asarray(point) + np.array([0.6e-3, 0.0 if not three_d else -0.5e-3, 0.7e-3])
        found = locate(array, method, data, kwargs, guess, three_d)
        error = np.linalg.norm(found - np.asarray(point))
        assert error <= TOLERANCES["rca_position_wavelengths"] * LAMBDA, (method, point, found, error / LAMBDA)


@pytest.mark.parametrize("method", ["hercules", "forces"])
def test_transformed_arrays_share_one_world(method):
    """Two arrays at different poses image the same world point at its world position."""
    kwargs, three_d = SCHEMES[method]
    point = np.array([1.0e-3, 0.5e-3 if three_d else 0.0, 14e-3])
    for angle, shift in ((0.0, (0.0, 0.0, 0.0)), (math.radians(20), (-2e-3, 0.0, 4e-3))):
        # array frame rotated about the world y axis (stays in the xz plane for FORCES) and moved
        world_to_array = np.eye(4)
        rot = np.array([[math.cos(angle), 0, -math.sin(angle)], [0, 1, 0], [math.sin(angle), 0, math.cos(angle)]])
        world_to_array[:3, :3] = rot
        world_to_array[:3, 3] = -rot @ np.asarray(shift)
        array = make_array(world_to_array)
        data = acquire(array, method, point, kwargs)
        # search in the array's own frame (where its images are in focus), report in world
        local = array.to_array(point)
        axes = [np.arange(c - LAMBDA, c + LAMBDA + 1e-9, LAMBDA / 16) for c in local]
        to_world = np.linalg.inv(world_to_array)
        if three_d:
            grid_local = usbeam.RCAGrid.volume(axes[0], axes[1], axes[2])
        else:
            grid_local = usbeam.RCAGrid.bscan(axes[0], axes[2], "xz", local[1])
        grid = usbeam.RCAGrid(to_world @ grid_local.voxel_transform, grid_local.shape)
        img = usbeam.rca_beamform(data, array, method, grid, fs=FS, fc=FC, **kwargs)
        found = peak(img, grid)
        assert np.linalg.norm(found - point) <= TOLERANCES["rca_position_wavelengths"] * LAMBDA


def lateral_width_6db(array, method, kwargs, point):
    data = acquire(array, method, point, kwargs)
    x = np.arange(point[0] - 3e-3, point[0] + 3e-3, LAMBDA / 20)
    z = np.arange(point[2] - LAMBDA, point[2] + LAMBDA, LAMBDA / 10)
    grid = usbeam.RCAGrid.bscan(x, z, "xz", point[1])
    env = np.abs(usbeam.rca_beamform(data, array, method, grid, fs=FS, fc=FC, f_number=1.0, **kwargs))
    profile = env.max(axis=0)            # lateral profile through the peak depth band
    profile = profile / profile.max()
    above = np.flatnonzero(profile >= 0.5)
    assert above[0] > 0 and above[-1] < len(profile) - 1, "main lobe wider than the search window"
    return (above[-1] - above[0] + 1) * (x[1] - x[0])


def test_forces_main_lobe_narrower_than_vls():
    """FORCES focuses laterally on transmit (synthetic) and receive; VLS transmits from the
    rows, so the x resolution comes from the receive columns only."""
    array = make_array()
    point = (0.5e-3, 0.0, 10e-3)
    forces = lateral_width_6db(array, "forces", SCHEMES["forces"][0], point)
    vls = lateral_width_6db(array, "vls", SCHEMES["vls"][0], point)
    print(f"-6 dB lateral main lobe at z = 10 mm: FORCES {forces * 1e3:.3f} mm, VLS {vls * 1e3:.3f} mm")
    assert forces < 0.85 * vls


def test_tobe_forces_decode_recovers_unencoded_data():
    """Encoded TOBE FORCES data (transmit code and receive polarity flips), decoded, equals the
    per-element acquisition; quantised to int16 it decodes exactly to the integer reference."""
    array = make_array()
    pts = np.array([[0.0, 0.0, 6e-3], [2e-3, 0.0, 9e-3]])
    plain = usbeam.simulate_rca(pts, [1.0, -0.5], array, "forces", fs=FS, fc=FC, n_samples=N_SAMPLES)
    raw = usbeam.simulate_rca(pts, [1.0, -0.5], array, "forces", fs=FS, fc=FC, n_samples=N_SAMPLES, encode=True)
    h = usbeam.hadamard(N).astype(np.float64)
    # the flips are present: the raw data is not the plain Hadamard encoding
    assert not np.allclose(raw, np.einsum("te,ecs->tcs", h, plain), atol=1e-3)
    decoded = usbeam.rca_decode(raw, array, "forces")
    np.testing.assert_allclose(decoded, plain, rtol=0, atol=1e-5 * np.abs(plain).max())
    # int16 scanner data: integer decode is exact
    scale = 30000 / np.abs(raw).max()
    raw16 = np.round(raw * scale).astype(np.int16)
    decoded16 = usbeam.rca_decode(raw16, array, "forces")
    exact = np.einsum("te,tcs->ecs", h, raw16 * h[:, :N, None]) / N
    np.testing.assert_array_equal(decoded16, exact.astype(np.float32))
    # a non-TOBE array applies no flips
    plain_array = make_array(tobe=False)
    raw_plain = usbeam.simulate_rca(pts, [1.0, -0.5], plain_array, "forces", fs=FS, fc=FC, n_samples=N_SAMPLES,
                                    encode=True)
    np.testing.assert_allclose(raw_plain, np.einsum("te,ecs->tcs", h, plain), rtol=0, atol=1e-4)
    np.testing.assert_allclose(usbeam.rca_decode(raw_plain, plain_array, "forces"), plain, rtol=0,
                               atol=1e-5 * np.abs(plain).max())


def test_hercules_decode_recovers_2d_receive_aperture():
    array = make_array()
    kw = SCHEMES["hercules"][0]
    pts = np.array([[1e-3, -1e-3, 7e-3]])
    plain = usbeam.simulate_rca(pts, [1.0], array, "hercules", fs=FS, fc=FC, n_samples=N_SAMPLES, **kw)
    raw = usbeam.simulate_rca(pts, [1.0], array, "hercules", fs=FS, fc=FC, n_samples=N_SAMPLES, encode=True, **kw)
    for algorithm in ("direct", "fast"):
        decoded = usbeam.rca_decode(raw, array, "hercules", algorithm=algorithm)
        np.testing.assert_allclose(decoded, plain, rtol=0, atol=1e-5 * np.abs(plain).max())


def test_cross_plane_pair_finds_the_point_in_both_planes():
    """HERCULES (a 2-D receive aperture) focuses in x and y: the xz and yz B-scans through the
    point both peak at it."""
    array = make_array()
    kw = SCHEMES["hercules"][0]
    point = np.array([0.9e-3, -0.6e-3, 9e-3])
    data = acquire(array, "hercules", point, kw)
    step = LAMBDA / 16
    x = np.arange(point[0] - LAMBDA, point[0] + LAMBDA, step)
    y = np.arange(point[1] - LAMBDA, point[1] + LAMBDA, step)
    z = np.arange(point[2] - LAMBDA, point[2] + LAMBDA, step)
    xz, yz = usbeam.rca_cross_planes(data, array, "hercules", x, y, z, x0=point[0], y0=point[1], fs=FS, fc=FC, **kw)
    assert xz.shape == (z.size, x.size) and yz.shape == (z.size, y.size)
    iz, ix = np.unravel_index(np.argmax(np.abs(xz)), xz.shape)
    jz, jy = np.unravel_index(np.argmax(np.abs(yz)), yz.shape)
    tol = TOLERANCES["rca_position_wavelengths"] * LAMBDA
    assert np.hypot(x[ix] - point[0], z[iz] - point[2]) <= tol
    assert np.hypot(y[jy] - point[1], z[jz] - point[2]) <= tol


def test_decoding_iq_equals_iq_of_decoded_rf():
    """Decoding is linear along the transmit axis, demodulation along the sample axis: they
    commute, so encoded IQ (complex64) decodes to the IQ of the decoded RF."""
    array = make_array()
    kw = SCHEMES["hercules"][0]
    pts = np.array([[1e-3, 0.5e-3, 7e-3], [-2e-3, -1e-3, 10e-3]])
    raw = usbeam.simulate_rca(pts, [1.0, 0.7], array, "hercules", fs=FS, fc=FC, n_samples=N_SAMPLES, encode=True,
                              **kw)
    want = to_iq(usbeam.rca_decode(raw, array, "hercules"))
    got = usbeam.rca_decode(to_iq(raw), array, "hercules", algorithm="fast")
    assert got.dtype == np.complex64
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * np.abs(want).max())
