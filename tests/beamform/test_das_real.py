"""DAS on real data (PWI_disk, MUST example) against MUST's golden B-mode and PyMUST;
the automatic f-number against scipy; load_must and the Delays transmit."""
import math

import numpy as np
import pytest

import usbeam
from conftest import shared_dataset
from tolerances import TOLERANCES

X_GRID = np.linspace(-12.5e-3, 12.5e-3, 251)
Z_GRID = np.linspace(10e-3, 35e-3, 251)


def scipy_auto_f_number(width, fc, bandwidth, c):
    """PyMUST dasmtx's recipe, with scipy's fminbound (the peer)."""
    from scipy.optimize import fminbound

    lambda_min = c / (fc * (1 + bandwidth / 2))
    cost = lambda th: abs(math.cos(th) * np.sinc(width / lambda_min * math.sin(th)) - 0.71)
    alpha = fminbound(cost, 0, math.pi / 2, xtol=math.pi / 100)
    return 1 / 2 / math.tan(alpha)


def test_auto_f_number_pwi_disk():
    f = usbeam.auto_f_number(0.262e-3, 5e6, 0.15, 1480.0)
    assert abs(f - 1.1248) < 1e-4
    assert abs(f - scipy_auto_f_number(0.262e-3, 5e6, 0.15, 1480.0)) <= TOLERANCES["das_auto_f_number_abs"]


def test_auto_f_number_matches_fminbound(rng):
    for _ in range(50):
        width = rng.uniform(0.05e-3, 0.6e-3)
        fc = rng.uniform(1e6, 15e6)
        bandwidth = rng.uniform(0.05, 1.5)
        c = rng.uniform(1400, 1600)
        assert abs(usbeam.auto_f_number(width, fc, bandwidth, c) - scipy_auto_f_number(width, fc, bandwidth, c)) \
            <= TOLERANCES["das_auto_f_number_abs"]


def test_delays_sources_match_pymust_interpolation(rng):
    # the Delays transmit's spline is an own implementation; scipy interp1d 'cubic' is the peer
    from scipy.interpolate import interp1d

    probe = usbeam.LinearArray(32, 2e-4)
    for n_active, delays in ((32, rng.uniform(0, 1e-6, 32)), (32, np.zeros(32)), (3, None), (5, None)):
        if delays is None:
            delays = np.full(32, np.nan)
            delays[10:10 + n_active] = rng.uniform(0, 1e-6, n_active)
        src = usbeam.Delays(delays).sources(probe, 1540.0)
        active = ~np.isnan(delays)
        t = np.linspace(0, n_active - 1, 4 * n_active)
        k = np.arange(n_active)
        d = delays[active] - np.nanmin(delays)
        if n_active >= 4:
            want_x = interp1d(k, probe.x[active], kind="cubic")(t)
            want_d = interp1d(k, d, kind="cubic")(t)
        else:  # interp1d needs 4 points for 'cubic'; the quadratic through 3 is the limit
            want_x = np.polyval(np.polyfit(k, probe.x[active], n_active - 1), t)
            want_d = np.polyval(np.polyfit(k, d, n_active - 1), t)
        np.testing.assert_allclose(src[0], want_x, rtol=0, atol=TOLERANCES["das_spline_abs_m"])
        np.testing.assert_allclose(src[2], 1540.0 * want_d, rtol=0, atol=TOLERANCES["das_spline_abs_m"])


@pytest.mark.parametrize("n_elements", [128, 600])
def test_delays_sources_of_long_apertures_match_scipy(rng, n_elements):
    """Both ways the spline solves its tridiagonal system (a cached inverse up to 512 unknowns,
    the elimination above) against scipy's interp1d 'cubic', on a convex array (x and z)."""
    from scipy.interpolate import interp1d

    probe = usbeam.ConvexArray(n_elements, 1e-4, 0.04)
    delays = rng.uniform(0, 1e-6, n_elements)
    src = usbeam.Delays(delays).sources(probe, 1540.0)
    t = np.linspace(0, n_elements - 1, 4 * n_elements)
    k = np.arange(n_elements)
    pos = np.asarray(probe.positions)
    for row, values in ((0, pos[:, 0]), (1, pos[:, 2]), (2, 1540.0 * (delays - delays.min()))):
        np.testing.assert_allclose(src[row], interp1d(k, values, kind="cubic")(t), rtol=0,
                                   atol=TOLERANCES["das_spline_abs_m"])


def test_plane_wave_angle_roundtrip():
    pitch, c = 3e-4, 1540.0
    x = (np.arange(64) - 31.5) * pitch
    for angle in (-0.3, 0.0, 0.17):
        delays = (x - (x.min() if angle >= 0 else x.max())) * math.sin(angle) / c
        assert abs(usbeam.plane_wave_angle(delays, pitch, c) - angle) < 1e-12
    with pytest.raises(ValueError, match="plane-wave"):
        usbeam.plane_wave_angle(x ** 2, pitch, c)


def test_load_must_pwi_disk():
    rec = usbeam.load_must(shared_dataset("PWI_disk.mat"))
    assert rec.data.shape == (32, 128, 334) and rec.data.dtype == np.int16
    assert rec.data.flags.c_contiguous and rec.data.base is not None  # RF.T, a view
    assert rec.probe.n_elements == 128 and rec.probe.pitch == pytest.approx(0.298e-3)
    assert rec.probe.width == pytest.approx(0.262e-3)
    assert rec.fs == pytest.approx(6.6667e6, rel=1e-4) and rec.fc == 5e6 and rec.c == 1480
    assert rec.t0 == pytest.approx(9.95e-6) and rec.prf == 10000 and rec.bandwidth == pytest.approx(0.15)
    assert len(rec.sequence) == 1 and isinstance(rec.sequence[0], usbeam.Delays)
    assert np.all(rec.sequence[0].delays == 0)


def pwi_iq_pymust(rec):
    """IQ of PWI_disk by PyMUST rf2iq (the peer), C-order (frames, elements, samples)."""
    import scipy.io
    import pymust

    raw = scipy.io.loadmat(shared_dataset("PWI_disk.mat"))
    param = pymust.utils.Param()
    param.fs, param.fc, param.c = rec.fs, rec.fc, rec.c
    param.t0 = np.array([rec.t0])
    param.bandwidth = rec.bandwidth * 100
    param.pitch, param.width, param.Nelements = rec.probe.pitch, rec.probe.width, 128
    param.TXdelay = np.zeros((1, 128))
    iq = pymust.rf2iq(raw["RF"].astype(np.float64), param)
    return iq, param


@pytest.mark.slow
def test_pwi_disk_matches_pymust_dasmtx():
    # the same IQ through PyMUST's DAS matrix (nearest, f-number from directivity) and ours
    import pymust

    rec = usbeam.load_must(shared_dataset("PWI_disk.mat"))
    iq, param = pwi_iq_pymust(rec)
    X, Z = np.meshgrid(X_GRID, Z_GRID)
    param.fnumber = None
    M = pymust.dasmtx(1j * np.array(iq.shape[:2]), X, Z, param, "nearest")
    want = (M @ iq.reshape(-1, 32, order="F")).reshape(251, 251, 32, order="F")
    got = usbeam.das(np.ascontiguousarray(iq.T).astype(np.complex64), rec.probe, rec.sequence,
                     usbeam.Grid(x=X_GRID, z=Z_GRID), fs=rec.fs, fc=rec.fc, c=rec.c, t0=rec.t0,
                     f_number="auto", interpolation="nearest")
    want = np.moveaxis(want, -1, 0)
    assert np.linalg.norm(got - want) <= TOLERANCES["das_pymust_rel_l2"] * np.linalg.norm(want)


@pytest.mark.slow
@pytest.mark.parametrize("interpolation", ["nearest", "linear"])
def test_pwi_disk_golden_bmode(interpolation):
    # the brief's pipeline: usbeam.rf2iq -> DAS (auto f-number) -> bmode(30 dB) vs MUST's image
    import scipy.io

    if not hasattr(usbeam, "rf2iq"):
        pytest.skip("usbeam.rf2iq (rf2iq branch) is not merged into this build yet")
    rec = usbeam.load_must(shared_dataset("PWI_disk.mat"))
    golden = scipy.io.loadmat(shared_dataset("bmode_PWI_disk.mat"))["I"]  # (z, x, frame)
    iq = usbeam.rf2iq(rec.data, fs=rec.fs, fc=rec.fc, t0=rec.t0, bandwidth=rec.bandwidth)
    bf = usbeam.Beamformer(rec.probe, rec.sequence, usbeam.Grid(x=X_GRID, z=Z_GRID), fs=rec.fs, fc=rec.fc,
                           c=rec.c, t0=rec.t0, n_samples=iq.shape[-1], f_number="auto",
                           interpolation=interpolation, n_frames=32)
    assert bf.f_number == pytest.approx(1.1248, abs=1e-4)
    image = np.moveaxis(usbeam.bmode(bf(iq), 30), 0, -1)
    rho = [np.corrcoef(image[..., k].ravel(), golden[..., k].ravel())[0, 1] for k in range(32)]
    if interpolation == "nearest":
        assert min(rho) >= TOLERANCES["das_pwi_rho_nearest"]
        assert np.abs(image.astype(int) - golden.astype(int)).max() <= TOLERANCES["das_pwi_max_levels_nearest"]
    else:
        assert min(rho) >= TOLERANCES["das_pwi_rho_linear"]


@pytest.mark.cuda
def test_pwi_disk_golden_bmode_cuda():
    """The CPU golden test's chain (rf2iq -> DAS nearest, auto f-number -> bmode 30 dB) on
    the CUDA backend, device arrays only between the stages (strict=True), against MUST's
    golden B-mode with the same acceptance figures (rho >= 0.999, |difference| <= 2 levels), on
    all 32 frames (about 2 s under the CUDA emulator: no subset needed; measured there: min rho
    0.99998, max |difference| 1 level)."""
    import scipy.io

    from usbeam import device

    n_frames = 32
    rec = usbeam.load_must(shared_dataset("PWI_disk.mat"))
    golden = scipy.io.loadmat(shared_dataset("bmode_PWI_disk.mat"))["I"][..., :n_frames]  # (z, x, frame)
    rf = np.ascontiguousarray(rec.data[:n_frames])
    rf2iq = usbeam.RF2IQPlan(rf.shape, rf.dtype, fs=rec.fs, fc=rec.fc, t0=rec.t0, bandwidth=rec.bandwidth,
                             backend="cuda", strict=True)
    iq = rf2iq(device.from_numpy(rf))
    bf = usbeam.Beamformer(rec.probe, rec.sequence, usbeam.Grid(x=X_GRID, z=Z_GRID), fs=rec.fs, fc=rec.fc,
                           c=rec.c, t0=rec.t0, n_samples=rf2iq.n_out, f_number="auto", interpolation="nearest",
                           n_frames=n_frames, backend="cuda", strict=True)
    assert bf.f_number == pytest.approx(1.1248, abs=1e-4)
    image = bf(iq.reshape((n_frames, 1) + tuple(iq.shape[1:])))
    display = usbeam.BModePlan(image.shape, 30, backend="cuda", strict=True)(image)
    got = np.moveaxis(display.to_numpy(), 0, -1)
    rho = [np.corrcoef(got[..., k].ravel(), golden[..., k].ravel())[0, 1] for k in range(n_frames)]
    assert min(rho) >= TOLERANCES["das_pwi_rho_nearest"]
    assert np.abs(got.astype(int) - golden.astype(int)).max() <= TOLERANCES["das_pwi_max_levels_nearest"]
