"""Row-column / TOBE beamforming against the float64 reference (tests/reference/rca.py):
times of flight of every method, DAS on random data, apodization, coherence factor,
frame sums, grids and transforms, bad input."""
import math

import numpy as np
import pytest

import usbeam
from reference import rca as ref
from tolerances import TOLERANCES

FS, C = 20e6, 1540.0
N_COLUMNS, N_ROWS, PITCH_X, PITCH_Y = 8, 6, 0.3e-3, 0.25e-3

# method -> beamformer keyword arguments (small array, every kind of transmit)
METHODS = {
    "forces": dict(),
    "uforces": dict(sparse_elements=[0, 3, 7]),
    "hercules": dict(tx="rows", angles=[0.05], focal_depths=[-8e-3]),
    "uhercules": dict(tx="columns", angles=[-0.1], focal_depths=[math.inf], sparse_elements=[5, 0, 2]),
    "vls": dict(tx="rows", angles=[-0.2, 0.0, 0.3], focal_depths=[-5e-3, 12e-3, -20e-3]),
    "tpw": dict(tx="rows", angles=[-0.15, 0.0, 0.2], focal_depths=[math.inf] * 3),
    "flash": dict(tx="columns", angles=[0.0, 0.0], focal_depths=[math.inf, math.inf]),
}


def small_array(transform=None):
    return usbeam.RowColumnArray(N_COLUMNS, N_ROWS, PITCH_X, PITCH_Y, transform=transform)


def random_grid(rng, shape=(2, 3, 4)):
    """Voxels at a random affine transform (rotated, sheared, translated) of the indices."""
    m = np.eye(4)
    m[:3, :3] = rng.normal(0, 0.6e-3, (3, 3))
    m[:3, 3] = (rng.uniform(-1e-3, 1e-3), rng.uniform(-1e-3, 1e-3), 5e-3)
    m[2, :3] = np.abs(m[2, :3])  # keep every voxel in front of the array
    return usbeam.RCAGrid(m, shape)


def random_transform(rng):
    """A proper rigid world -> array transform."""
    q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    q *= np.sign(np.linalg.det(q))
    t = np.eye(4)
    t[:3, :3] = q
    t[:3, 3] = rng.uniform(-2e-3, 2e-3, 3)
    return t


def reference_geometry(array, grid, method, kwargs):
    points = ref.to_array(grid.points().reshape(-1, 3), array.transform)
    rx = kwargs.get("rx", "columns")
    return ref.geometry(points, method=method, n_columns=array.n_columns, n_rows=array.n_rows,
                        pitch_x=array.pitch_x, pitch_y=array.pitch_y, tx=kwargs.get("tx", "columns"), rx=rx,
                        angles=kwargs.get("angles", [0.0]), focal_depths=kwargs.get("focal_depths", [math.inf]),
                        sparse=kwargs.get("sparse_elements")), points


@pytest.mark.parametrize("rx", ["columns", "rows"])
@pytest.mark.parametrize("method", list(METHODS))
def test_time_of_flight_of_every_method(rng, method, rx):
    """A ramp record x[n] = n on one (acquisition, channel) pair, linear interpolation and no
    apodization: each voxel's output is the sample index s = ((tx + rx)/c - t0) fs of that
    pair, compared with the reference path of the method."""
    kwargs = dict(METHODS[method], rx=rx)
    if method in ("uforces", "uhercules"):
        n_sparse_limit = N_ROWS if rx == "rows" else N_COLUMNS
        if method == "uhercules":
            n_sparse_limit = N_COLUMNS if rx == "rows" else N_ROWS
        kwargs["sparse_elements"] = [e % n_sparse_limit for e in kwargs["sparse_elements"]]
    array = small_array(random_transform(rng))
    grid = random_grid(rng)
    t0 = -3e-6  # negative: paths of tilted waves may be negative before the array
    n_samples = 600
    plan = usbeam.RCABeamformer(array, method, grid, n_samples=n_samples, fs=FS, c=C, t0=t0,
                                interpolation="linear", f_number=0.0, **kwargs)
    (tx, rxp, _), _ = reference_geometry(array, grid, method, kwargs)
    want_s = ((tx[:, None, :] + rxp) / C - t0) * FS  # (A, C, P)
    assert want_s.shape[:2] == (plan.n_acquisitions, plan.n_channels)
    assert (want_s > 0).all() and (want_s < n_samples - 2).all()
    ramp = np.arange(n_samples, dtype=np.float32)
    pairs = {(0, 0), (plan.n_acquisitions - 1, plan.n_channels - 1)}
    while len(pairs) < 5:
        pairs.add((int(rng.integers(plan.n_acquisitions)), int(rng.integers(plan.n_channels))))
    for a, ch in sorted(pairs):
        data = np.zeros(plan.data_shape[1:], np.float32)
        data[a, ch] = ramp
        got = plan(data).reshape(-1)
        np.testing.assert_allclose(got, want_s[a, ch], rtol=0, atol=TOLERANCES["rca_tof_samples"])


def _random_data(rng, plan, complex_data):
    shape = plan.data_shape
    data = rng.standard_normal(shape)
    if complex_data:
        data = data + 1j * rng.standard_normal(shape)
    return data.astype(plan.dtype)


@pytest.mark.parametrize("interpolation", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("method", list(METHODS))
def test_das_matches_reference_rf(rng, method, interpolation):
    kwargs = METHODS[method]
    array = small_array(random_transform(rng))
    grid = random_grid(rng, (3, 4, 5))
    plan = usbeam.RCABeamformer(array, method, grid, n_samples=500, fs=FS, c=C, t0=0.5e-6, n_frames=2,
                                interpolation=interpolation, f_number=0.7, window="hann", **kwargs)
    data = _random_data(rng, plan, False)
    out = np.full((2,) + grid.image_shape, np.nan, np.float32)
    got = plan(data, out=out)
    (tx, rxp, lateral), points = reference_geometry(array, grid, method, kwargs)
    weights = ref.apodization(lateral, points[:, 2][None, None, :], 0.7, "hann")
    want = ref.das(data, tx, rxp, weights, fs=FS, c=C, t0=0.5e-6, interpolation=interpolation)
    want = want.reshape(got.shape)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, want, rtol=0, atol=TOLERANCES["rca_das_rel"] * np.abs(want).max())


@pytest.mark.parametrize("method", ["forces", "hercules", "tpw"])
def test_das_iq_coherence_factor_and_frame_sum(rng, method):
    kwargs = METHODS[method]
    fc = 5e6
    array = small_array()
    grid = random_grid(rng)
    for cf in (False, True):
        for sum_frames in (False, True):
            plan = usbeam.RCABeamformer(array, method, grid, n_samples=400, fs=FS, c=C, fc=fc, data="iq",
                                        n_frames=3, f_number=1.2, window="tukey", tukey_alpha=0.4,
                                        coherence_factor=cf, sum_frames=sum_frames, **kwargs)
            data = _random_data(rng, plan, True)
            got = plan(data)
            (tx, rxp, lateral), points = reference_geometry(array, grid, method, kwargs)
            weights = ref.apodization(lateral, points[:, 2][None, None, :], 1.2, "tukey", 0.4)
            want = ref.das(data, tx, rxp, weights, fs=FS, c=C, fc=fc, coherence_factor=cf,
                           sum_frames=sum_frames).reshape(got.shape)
            np.testing.assert_allclose(got, want, rtol=0,
                                       atol=TOLERANCES["rca_das_iq_rel"] * np.abs(want).max())
    # the coherent frame sum is the sum of the per-frame images
    plan_frames = usbeam.RCABeamformer(array, method, grid, n_samples=400, fs=FS, fc=fc, data="iq", n_frames=3,
                                       **kwargs)
    plan_sum = usbeam.RCABeamformer(array, method, grid, n_samples=400, fs=FS, fc=fc, data="iq", n_frames=3,
                                    sum_frames=True, **kwargs)
    data = _random_data(rng, plan_frames, True)
    frames = plan_frames(data)
    np.testing.assert_allclose(plan_sum(data), frames.sum(axis=0), rtol=0,
                               atol=TOLERANCES["rca_das_iq_rel"] * np.abs(frames).sum(axis=0).max())


@pytest.mark.parametrize("method", ["tpw", "hercules"])
def test_apodization_window_shapes(rng, method):
    """Constant records: the output is the sum of the receive weights, so it checks the
    f-number aperture and every window against the reference (strips: per channel;
    HERCULES: radial in the array plane, from the plan's window table)."""
    array = small_array()
    # voxels behind the array (z < 0) and on it (z = 0) get no weight
    grid = usbeam.RCAGrid.bscan(np.linspace(-2e-3, 2e-3, 9), np.linspace(-1e-3, 6e-3, 8))
    kwargs = METHODS[method]
    (tx, rxp, lateral), points = reference_geometry(array, grid, method, kwargs)
    for window, alpha in (("rect", 0.5), ("hann", 0.5), ("tukey", 0.25), ("tukey", 1.0)):
        plan = usbeam.RCABeamformer(array, method, grid, n_samples=400, fs=FS, c=C, t0=-5e-6, f_number=1.5,
                                    window=window, tukey_alpha=alpha, interpolation="nearest", **kwargs)
        got = plan(np.ones(plan.data_shape[1:], np.float32))
        weights = ref.apodization(lateral, points[:, 2][None, None, :], 1.5, window, alpha)
        want = weights.sum(axis=(0, 1)).reshape(got.shape)
        np.testing.assert_allclose(got, want, rtol=0, atol=TOLERANCES["rca_window_abs"])
        assert np.all(got[points[:, 2].reshape(got.shape) <= 0] == 0)


def test_grids_and_cross_planes():
    x = np.linspace(-3e-3, 3e-3, 7)
    y = np.linspace(-2e-3, 2e-3, 5)
    z = np.linspace(4e-3, 8e-3, 9)
    volume = usbeam.RCAGrid.volume(x, y, z)
    assert volume.image_shape == (5, 9, 7)
    pts = volume.points()
    np.testing.assert_allclose(pts[2, 3, 4], [x[4], y[2], z[3]], atol=1e-15)
    xz, yz = usbeam.RCAGrid.cross_planes(x, y, z, x0=1e-3, y0=-1e-3)
    assert xz.image_shape == (9, 7) and yz.image_shape == (9, 5)
    np.testing.assert_allclose(xz.points()[0, 2, 5], [x[5], -1e-3, z[2]], atol=1e-15)
    np.testing.assert_allclose(yz.points()[0, 2, 3], [1e-3, y[3], z[2]], atol=1e-15)
    tilted = usbeam.RCAGrid.plane([0, 0, 5e-3], [1e-4, 1e-4, 0], [0, 0, 2e-4], 4, 3)
    np.testing.assert_allclose(tilted.points()[0, 2, 3], [3e-4, 3e-4, 5.4e-3], atol=1e-15)
    # the xz B-scan equals the matching slice of a volume
    array = small_array()
    rng = np.random.default_rng(7)
    kw = METHODS["hercules"]
    data = rng.standard_normal((N_ROWS, N_COLUMNS, 400)).astype(np.float32)
    vol = usbeam.rca_beamform(data, array, "hercules", usbeam.RCAGrid.volume(x, y[1:2], z), fs=FS, **kw)
    scan = usbeam.rca_beamform(data, array, "hercules", usbeam.RCAGrid.bscan(x, z, "xz", y[1]), fs=FS, **kw)
    assert vol.shape == scan.shape == (9, 7)  # a one-slice volume drops its k axis too
    np.testing.assert_allclose(scan, vol, rtol=1e-6, atol=1e-6 * np.abs(vol).max())


def test_plan_reuse_input_untouched_and_out(rng):
    array = small_array()
    grid = random_grid(rng)
    plan = usbeam.RCABeamformer(array, "forces", grid, n_samples=300, fs=FS)
    out = np.full(grid.image_shape, np.nan, np.float32)
    for _ in range(2):
        data = rng.standard_normal(plan.data_shape[1:]).astype(np.float32)
        copy = data.copy()
        assert plan(data, out=out) is out
        np.testing.assert_array_equal(data, copy)
        assert np.isfinite(out).all()


# ---- bad input -------------------------------------------------------------------------

def test_bad_geometry():
    with pytest.raises(ValueError, match="singular"):
        usbeam.RowColumnArray(8, 8, 3e-4, transform=np.diag([1.0, 0.0, 1.0, 1.0]))
    with pytest.raises(ValueError, match="affine"):
        usbeam.RowColumnArray(8, 8, 3e-4, transform=np.ones((4, 4)))
    with pytest.raises(ValueError, match="transform"):
        usbeam.RowColumnArray(8, 8, 3e-4, transform=np.eye(3))
    with pytest.raises(ValueError, match="pitch_x"):
        usbeam.RowColumnArray(8, 8, -3e-4)
    with pytest.raises(ValueError, match="pitch_y"):
        usbeam.RowColumnArray(8, 8, 3e-4, float("nan"))
    with pytest.raises(ValueError, match="n_rows"):
        usbeam.RowColumnArray(8, 0, 3e-4)
    with pytest.raises(ValueError, match="uniformly"):
        usbeam.RCAGrid.bscan([0, 1e-3, 3e-3], [1e-3, 2e-3])
    with pytest.raises(ValueError, match="plane"):
        usbeam.RCAGrid.bscan([0, 1e-3], [1e-3, 2e-3], plane="xy")


def test_bad_acquisition_parameters(rng):
    array = small_array()
    grid = random_grid(rng)
    base = dict(n_samples=300, fs=FS)
    with pytest.raises(ValueError, match="method"):
        usbeam.RCABeamformer(array, "stark", grid, **base)
    with pytest.raises(ValueError, match="sparse_elements.*out of range"):
        usbeam.RCABeamformer(array, "uforces", grid, sparse_elements=[0, 8], **base)
    with pytest.raises(ValueError, match="sparse_elements.*out of range"):
        usbeam.RCABeamformer(array, "uhercules", grid, sparse_elements=[-1], **base)
    with pytest.raises(ValueError, match="sparse_elements"):
        usbeam.RCABeamformer(array, "uforces", grid, **base)
    with pytest.raises(ValueError, match="focal_depths.*infinite"):
        usbeam.RCABeamformer(array, "tpw", grid, angles=[0.0], focal_depths=[5e-3], **base)
    with pytest.raises(ValueError, match="focal_depths.*finite"):
        usbeam.RCABeamformer(array, "vls", grid, angles=[0.0], **base)
    with pytest.raises(ValueError, match="one angle"):
        usbeam.RCABeamformer(array, "hercules", grid, angles=[0.0, 0.1], **base)
    with pytest.raises(ValueError, match="fs"):
        usbeam.RCABeamformer(array, "forces", grid, n_samples=300, fs=float("nan"))
    with pytest.raises(ValueError, match="fc"):
        usbeam.RCABeamformer(array, "forces", grid, n_samples=300, fs=FS, data="iq")
    with pytest.raises(ValueError, match="interpolation"):
        usbeam.RCABeamformer(array, "forces", grid, interpolation="sinc", **base)
    with pytest.raises(ValueError, match="f_number"):
        usbeam.RCABeamformer(array, "forces", grid, f_number=-1, **base)
    with pytest.raises(TypeError, match="grid"):
        usbeam.RCABeamformer(array, "forces", np.eye(4), **base)


def test_bad_data(rng):
    array = small_array()
    grid = random_grid(rng)
    plan = usbeam.RCABeamformer(array, "forces", grid, n_samples=300, fs=FS)
    with pytest.raises(ValueError, match="shape"):
        plan(np.zeros((7, 8, 300), np.float32))  # 7 transmits for an 8-strip FORCES
    with pytest.raises(TypeError, match="real RF"):
        plan(np.zeros((8, 8, 300), np.complex64))
    with pytest.raises(TypeError, match="out"):
        plan(np.zeros((8, 8, 300), np.float32), out=np.zeros(grid.image_shape, np.float64))
    read_only = np.zeros(grid.image_shape, np.float32)
    read_only.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        plan(np.zeros((8, 8, 300), np.float32), out=read_only)
    for bad_value in (np.nan, np.inf, -np.inf):  # refused whole, as das does, input untouched
        data = rng.standard_normal((8, 8, 300)).astype(np.float32)
        data[int(rng.integers(8)), int(rng.integers(8)), int(rng.integers(300))] = bad_value
        keep = data.copy()
        with pytest.raises(ValueError, match="NaN or infinite"):
            plan(data)
        np.testing.assert_array_equal(data, keep)
    iq_plan = usbeam.RCABeamformer(array, "forces", grid, n_samples=300, fs=FS, fc=5e6, data="iq")
    iq = np.zeros((8, 8, 300), np.complex64)
    iq[3, 2, 100] = complex(0, np.nan)
    with pytest.raises(ValueError, match="NaN or infinite"):
        iq_plan(iq)
    # rca_decode: order without a Hadamard matrix, transmit count not matching the order
    with pytest.raises(ValueError, match="order"):
        usbeam.rca_decode(np.zeros((6, 8, 10), np.int16), array, "forces")
    with pytest.raises(ValueError, match="transmits"):
        usbeam.rca_decode(np.zeros((8, 8, 10), np.int16), array, "forces", 16)


def test_binding_checks_without_crashing(rng):
    """The C layer refuses what the Python layer would: n_acquisitions not matching FORCES,
    a singular transform, sparse indices out of range, wrong buffers."""
    eye = np.eye(4)
    common = dict(method=0, n_columns=8, n_rows=6, pitch_x=3e-4, pitch_y=3e-4, world_to_array=eye,
                  voxel_to_world=eye, output_shape=(1, 1, 2), tx_rows=0, rx_rows=0, n_frames=1,
                  n_acquisitions=8, n_channels=8, n_samples=100, data_complex=False, fs=FS, fc=0.0, c=C,
                  t0=0.0, interpolation=2, angles=np.zeros(1), focal_depths=np.zeros(1), sparse_elements=None,
                  f_number=1.0, window=1, tukey_alpha=0.5, coherence_factor=False, sum_frames=False)
    plan = usbeam._core.rca_plan(**common)
    with pytest.raises(ValueError, match="n_acquisitions"):
        usbeam._core.rca_plan(**dict(common, n_acquisitions=7))
    with pytest.raises(ValueError, match="channels"):
        usbeam._core.rca_plan(**dict(common, n_channels=6))
    with pytest.raises(ValueError, match="singular"):
        usbeam._core.rca_plan(**dict(common, world_to_array=np.diag([1.0, 1.0, 0.0, 1.0])))
    with pytest.raises(ValueError, match="sparse_elements"):
        usbeam._core.rca_plan(**dict(common, method=1, n_acquisitions=2,
                                     sparse_elements=np.array([1, 9], np.int32)))
    with pytest.raises(ValueError, match="focal_depths"):
        usbeam._core.rca_plan(**dict(common, method=4, n_acquisitions=1, focal_depths=np.array([np.nan])))
    with pytest.raises(TypeError, match="data"):
        usbeam._core.rca_execute(plan, np.zeros(8 * 8 * 100, np.float64), np.zeros(2, np.float32))
    with pytest.raises(ValueError, match="out"):
        usbeam._core.rca_execute(plan, np.zeros(8 * 8 * 100, np.float32), np.zeros(3, np.float32))
    with pytest.raises(TypeError, match="plan"):
        usbeam._core.rca_execute(object(), np.zeros(8 * 8 * 100, np.float32), np.zeros(2, np.float32))
