"""Convex, phased and matrix arrays against PyMUST on data PyMUST simulates itself
(pymust.simus / simus3, MUST's own transmit delays): a C5-2v convex array with a diverging
wave (speckle, point targets and a 10 mm anechoic cyst), a P4-2v phased array with a
diverging wave and with steered focused transmits, and a 3-D matrix-array volume (dasmtx3).
usbeam reads the geometry back from a MUST file (load_must) and beamforms PyMUST's IQ; PyMUST
beamforms with dasmtx / dasmtx3 (M @ IQ).  Criteria (tests/tolerances.py, sector_*): dB
images correlate at rho >= 0.99, point targets land within lambda/2, the cyst's contrast
agrees with PyMUST's within 1 dB and is dark.  The simulations are cached per session."""
import math

import numpy as np
import pytest

import usbeam
from tolerances import TOLERANCES

pymust = pytest.importorskip("pymust")
scipy_io = pytest.importorskip("scipy.io")

CYST = (0.0, 0.045, 0.005)  # x, z, radius (m): a 10 mm anechoic cyst
CONVEX_POINTS = [(-0.012, 0.032), (0.011, 0.055)]
PHASED_POINTS = [(0.0, 0.04), (-0.012, 0.055)]


@pytest.fixture(scope="session")
def sim_cache(tmp_path_factory):
    return {"dir": tmp_path_factory.mktemp("pymust_sector")}


def must_file(path, rf, param, delays):
    """A MUST .mat file as MUST writes it (RF (n_samples, n_elements), the param struct)."""
    fields = {k: param[k] for k in ("fs", "fc", "c", "pitch", "Nelements", "radius", "width", "kerf", "bandwidth")
              if k in param}
    fields["TXdelay"] = np.asarray(delays, dtype=np.float64).reshape(1, -1)
    fields["t0"] = 0.0
    scipy_io.savemat(path, {"RF": rf, "param": fields})
    return usbeam.load_must(path)


def convex_scene(rng):
    n = 2600
    x, z = rng.uniform(-0.02, 0.02, n), rng.uniform(0.028, 0.062, n)
    keep = np.hypot(x - CYST[0], z - CYST[1]) > CYST[2]
    x, z = x[keep], z[keep]
    rc = rng.standard_normal(x.size)
    px, pz = np.array(CONVEX_POINTS).T
    return np.r_[x, px], np.r_[z, pz], np.r_[rc, np.full(px.size, 25.0)]


def simulate(cache, key, make):
    if key not in cache:
        cache[key] = make()
    return cache[key]


def convex_case(sim_cache):
    def make():
        rng = np.random.default_rng(16)
        param = pymust.getparam("C5-2v")
        param.fs = 4 * param.fc
        param.c = 1540.0
        x, z, rc = convex_scene(rng)
        delays = pymust.txdelay(0.0, -0.01, param)  # a virtual source 10 mm behind the chord: diverging
        rf, _ = pymust.simus(x, z, rc, delays, param)
        iq = pymust.rf2iq(rf, param)
        rec = must_file(sim_cache["dir"] / "convex.mat", rf, dict(param), delays)
        return param, delays, iq, rec
    return simulate(sim_cache, "convex", make)


def pymust_image(iq, x, z, param, delays, fnumber):
    p = param.copy() if hasattr(param, "copy") else param
    p.fnumber = fnumber
    p.TXdelay = np.asarray(delays).reshape(1, -1)
    m = pymust.dasmtx(iq, x, z, p, "linear")
    return np.asarray(m @ iq.flatten(order="F")).reshape(x.shape, order="F")


def db(image):
    a = np.abs(image)
    return 20 * np.log10(np.maximum(a / a.max(), 1e-3))


def assert_db_correlated(got, want):
    rho = np.corrcoef(db(got).ravel(), db(want).ravel())[0, 1]
    assert rho >= TOLERANCES["sector_db_rho"], rho


def point_error(image_of, points, wavelength):
    """Largest distance (in wavelengths) between each target and the envelope peak of a
    +-1.5 mm patch around it on a lambda/20 grid."""
    worst = 0.0
    for px, pz in points:
        step = wavelength / 20
        grid = usbeam.Grid(x=px + np.arange(-1.5e-3, 1.5e-3, step), z=pz + np.arange(-1.5e-3, 1.5e-3, step))
        env = np.abs(image_of(grid)).reshape(grid.shape)  # one frame, with or without its axis
        iz, ix = np.unravel_index(np.argmax(env), env.shape)
        worst = max(worst, math.hypot(grid.x[ix] - px, grid.z[iz] - pz) / wavelength)
    return worst


def test_convex_c5_2v_diverging(sim_cache):
    """C5-2v (128 elements, R = 49.6 mm), one diverging wave: the sector image against PyMUST
    dasmtx (automatic f-number from the element width), the two point targets, the cyst.
    Measured: rho > 0.9999, cyst contrast -8.05 dB against PyMUST's -8.05 dB."""
    param, delays, iq, rec = convex_case(sim_cache)
    probe = rec.probe
    assert isinstance(probe, usbeam.ConvexArray) and probe.radius == pytest.approx(param.radius)
    polar = usbeam.PolarGrid.for_probe(probe, 0.045, 160, 96)
    data = np.ascontiguousarray(iq.T).astype(np.complex64)  # (n_elements, n_samples)
    kw = dict(fs=rec.fs, fc=rec.fc, c=rec.c, t0=rec.t0, f_number="auto", bandwidth=rec.bandwidth)
    got = usbeam.das(data, probe, rec.sequence, polar, **kw)
    pts = polar.coordinates()
    want = pymust_image(iq, pts[:, 0].reshape(polar.shape), pts[:, 2].reshape(polar.shape), param, delays, None)
    assert_db_correlated(got, want)
    wavelength = rec.c / rec.fc
    err = point_error(lambda g: usbeam.das(data, probe, rec.sequence, g, **kw), CONVEX_POINTS, wavelength)
    assert err <= TOLERANCES["sector_point_position_wavelengths"], err
    # the cyst: mean power inside r < 3.5 mm against the ring 6.5 .. 9 mm around it
    grid = usbeam.Grid(x=CYST[0] + np.linspace(-9e-3, 9e-3, 61), z=CYST[1] + np.linspace(-9e-3, 9e-3, 61))
    cart = usbeam.das(data, probe, rec.sequence, grid, **kw)
    gp = grid.coordinates()
    ref = pymust_image(iq, gp[:, 0].reshape(grid.shape), gp[:, 2].reshape(grid.shape), param, delays, None)
    r = np.hypot(gp[:, 0] - CYST[0], gp[:, 2] - CYST[1]).reshape(grid.shape)
    inside, ring = r < 3.5e-3, (r > 6.5e-3) & (r < 9e-3)

    def contrast(img):
        p = np.abs(img) ** 2
        return 10 * np.log10(p[inside].mean() / p[ring].mean())

    # measured -8.05 dB for both (one unfocused wave: its side lobes fill the cyst); the
    # expected contrast is PyMUST's own on the same data, and the cyst must be clearly dark
    assert contrast(cart) < -6.0, contrast(cart)
    assert abs(contrast(cart) - contrast(ref)) <= TOLERANCES["sector_cyst_contrast_db"]


def phased_case(sim_cache):
    def make():
        rng = np.random.default_rng(61)
        param = pymust.getparam("P4-2v")
        param.fs = 4 * param.fc
        param.c = 1540.0
        n = 1200
        r, th = rng.uniform(0.03, 0.07, n), rng.uniform(-0.6, 0.6, n)
        px, pz = np.array(PHASED_POINTS).T
        x, z = np.r_[r * np.sin(th), px], np.r_[r * np.cos(th), pz]
        rc = np.r_[rng.standard_normal(n), np.full(px.size, 25.0)]
        diverging = pymust.txdelay(param, 0.0, math.pi / 3)
        focused = [pymust.txdelay(0.05 * math.sin(a), 0.05 * math.cos(a), param) for a in (-0.3, 0.0, 0.3)]
        laws = [diverging] + focused
        iqs = []
        for k, d in enumerate(laws):
            rf, _ = pymust.simus(x, z, rc, d, param)
            iqs.append(pymust.rf2iq(rf, param))
            if k == 0:
                rec = must_file(sim_cache["dir"] / "phased.mat", rf, dict(param), d)
        n_s = min(q.shape[0] for q in iqs)
        return param, laws, [q[:n_s] for q in iqs], rec
    return simulate(sim_cache, "phased", make)


@pytest.mark.parametrize("mode", ["diverging", "focused"])
def test_phased_p4_2v_sector(sim_cache, mode):
    """P4-2v (64 x 0.3 mm), a 60-degree diverging wave, or three focused transmits steered at
    -0.3, 0, 0.3 rad (compounded): the sector image against PyMUST and the point targets."""
    param, laws, iqs, rec = phased_case(sim_cache)
    probe = rec.probe
    assert isinstance(probe, usbeam.LinearArray) and probe.n_elements == 64
    chosen = [0] if mode == "diverging" else [1, 2, 3]
    seq = [usbeam.Delays(laws[k].ravel()) for k in chosen]
    data = np.stack([iqs[k].T for k in chosen]).astype(np.complex64)
    polar = usbeam.PolarGrid(np.linspace(0.025, 0.075, 150), np.linspace(-0.6, 0.6, 91))
    kw = dict(fs=rec.fs, fc=rec.fc, c=rec.c, t0=0.0, f_number=1.5)
    got = usbeam.das(data[None], probe, seq, polar, **kw)[0]  # (frames, transmits, ...): one frame
    pts = polar.coordinates()
    xs, zs = pts[:, 0].reshape(polar.shape), pts[:, 2].reshape(polar.shape)
    want = sum(pymust_image(iqs[k], xs, zs, param, laws[k], 1.5) for k in chosen)
    assert_db_correlated(got, want)
    wavelength = rec.c / rec.fc
    err = point_error(lambda g: usbeam.das(data, probe, seq, g, **kw), PHASED_POINTS, wavelength)
    assert err <= TOLERANCES["sector_point_position_wavelengths"], err
    # scan conversion of the dB sector: the Cartesian image agrees with beamforming there
    cart = polar.cartesian_grid(spacing=5e-4)
    converted = usbeam.scan_convert(db(got).astype(np.float32), polar, cart, fill=-60.0)
    assert converted.shape == cart.shape and converted.min() >= -60.0 - 1e-4  # float32 mix rounding


def test_matrix_volume_dasmtx3(sim_cache):
    """A 16 x 16 matrix array at 3 MHz (PyMUST simus3), one unsteered plane wave; the volume
    against PyMUST dasmtx3 (f-number 1 in x and y: the box aperture) and the point targets."""
    def make():
        param = pymust.utils.Param()
        param.fc, param.bandwidth, param.c = 3e6, 70.0, 1540.0
        param.width = param.height = 0.27e-3
        probe = usbeam.MatrixArray(16, 16, 0.3e-3, 0.3e-3, element_width=0.27e-3, element_height=0.27e-3)
        param.elements = probe.positions[:, :2].T.copy()
        param.fs = 4 * param.fc
        pts = np.array([[0.0, 0.0, 0.02], [2e-3, -1.5e-3, 0.026]])
        delays = np.zeros((1, probe.n_elements))
        rf, _ = pymust.simus3(pts[:, 0], pts[:, 1], pts[:, 2], np.ones(len(pts)), delays, param)
        iq = pymust.rf2iq(rf, param.fs, param.fc)
        return param, probe, pts, delays, iq
    param, probe, targets, delays, iq = simulate(sim_cache, "matrix", make)
    grid = usbeam.VolumeGrid(x=np.linspace(-4e-3, 4e-3, 21), y=np.linspace(-4e-3, 4e-3, 21),
                             z=np.linspace(0.016, 0.03, 36))
    data = np.ascontiguousarray(iq.T).astype(np.complex64)
    seq = usbeam.Delays(delays.ravel())
    kw = dict(fs=param.fs, fc=param.fc, c=param.c, t0=0.0, f_number=1.0)
    got = usbeam.das(data, probe, seq, grid, **kw)
    p = param
    p.fnumber = np.array([1.0, 1.0])
    p.TXdelay = delays
    pts = grid.coordinates()
    m = pymust.dasmtx3(iq, pts[:, 0], pts[:, 1], pts[:, 2], p, "linear")
    want = np.asarray(m @ iq.flatten(order="F")).reshape(grid.shape)
    assert got.shape == grid.shape
    assert_db_correlated(got, want)
    wavelength = param.c / param.fc
    for tx, ty, tz in targets:
        step = wavelength / 20
        patch = usbeam.VolumeGrid(x=tx + np.arange(-1e-3, 1e-3, step), y=np.array([ty]),
                                  z=tz + np.arange(-1e-3, 1e-3, step))
        env = np.abs(usbeam.das(data, probe, seq, patch, **kw))[:, 0, :]
        iz, ix = np.unravel_index(np.argmax(env), env.shape)
        err = math.hypot(patch.x[ix] - tx, patch.z[iz] - tz) / wavelength
        assert err <= TOLERANCES["sector_point_position_wavelengths"], err
