"""Doppler kernels (clutter filters, Kasai color Doppler, power Doppler, display) against the
float64 reference (tests/reference/doppler.py), PyMUST iq2doppler, and analytic ensembles."""
import numpy as np
import pytest

import usbeam
from reference import doppler as ref
from tolerances import TOLERANCES

FC, PRF, C = 5e6, 4e3, 1540.0
VN = C * PRF / (4 * FC)


def complex_noise(rng, shape, scale=1.0):
    return (scale * (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)) / np.sqrt(2)).astype(np.complex64)


def blood(rng, n_frames, spatial, velocity, lag_vn=VN, snr_db=30.0, amplitude=1.0):
    """Moving scatterers seen by one pixel grid: random speckle per pixel with a slow-time phase
    advance of pi*velocity/VN per frame (positive velocity = positive Doppler shift), plus noise."""
    t = np.arange(n_frames).reshape((-1,) + (1,) * len(spatial))
    speckle = complex_noise(rng, spatial, amplitude)
    signal = speckle * np.exp(1j * np.pi * velocity / lag_vn * t)
    noise = complex_noise(rng, (n_frames,) + tuple(spatial), amplitude * 10 ** (-snr_db / 20))
    return (signal + noise).astype(np.complex64)


def static_clutter(rng, n_frames, spatial, level_db):
    """Stationary tissue: a speckle pattern constant in slow time, level_db above unit blood."""
    tissue = complex_noise(rng, spatial, 10 ** (level_db / 20))
    return np.broadcast_to(tissue, (n_frames,) + tuple(spatial)).astype(np.complex64)


def assert_clutter_close(got, want, x):
    scale = np.abs(x).max()
    err = np.abs(got - want).max() / scale
    assert err <= TOLERANCES["doppler_clutter_rel"], f"relative error {err:.2e}"


def wrapped_difference(a, b, vn):
    return (np.asarray(a, np.float64) - b + vn) % (2 * vn) - vn


# ---- clutter filters against the reference ---------------------------------------------

@pytest.fixture
def ensemble(rng):
    """Blood + 40 dB static clutter with a slow drift + noise, (20, 17, 13)."""
    x = blood(rng, 20, (17, 13), 0.3 * VN) + static_clutter(rng, 20, (17, 13), 40.0)
    drift = (1 + 0.02 * np.arange(20))[:, None, None]
    return (x * drift).astype(np.complex64)


def test_mean_filter(ensemble):
    got = usbeam.clutter_filter(ensemble, "mean")
    assert got.dtype == np.complex64 and got.shape == ensemble.shape
    assert_clutter_close(got, ref.mean_filter(ensemble), ensemble)


@pytest.mark.parametrize("order", [0, 1, 2, 5])
def test_poly_filter(ensemble, order):
    assert_clutter_close(usbeam.clutter_filter(ensemble, "poly", order=order), ref.poly_filter(ensemble, order),
                         ensemble)


@pytest.mark.parametrize("low, high", [(1, None), (2, 15), (0, 0), (3, 3), (0, 19)])
def test_svd_filter_fixed_cutoffs(ensemble, low, high):
    f = usbeam.ClutterFilter(ensemble.shape, "svd", low=low, high=high)
    assert_clutter_close(f(ensemble), ref.svd_filter(ensemble, low, high), ensemble)
    values, used_low, used_high = f.svd_info()
    want = np.linalg.svd(ensemble.reshape(20, -1).T.astype(np.complex128), compute_uv=False)
    np.testing.assert_allclose(values, want, rtol=1e-9, atol=1e-9 * want[0])
    assert (used_low, used_high) == (low, 19 if high is None else high)


def test_svd_filter_automatic_cutoff(ensemble):
    f = usbeam.ClutterFilter(ensemble.shape, "svd", low="auto", auto_frequency=0.05)
    got = f(ensemble)
    _, low, high = f.svd_info()
    assert low == ref.svd_auto_low(ensemble, 0.05)
    assert low >= 1  # the static tissue component is found
    assert_clutter_close(got, ref.svd_filter(ensemble, low, high), ensemble)


def test_svd_with_more_frames_than_pixels(rng):
    x = complex_noise(rng, (12, 5))
    assert_clutter_close(usbeam.clutter_filter(x, "svd", low=1, high=3), ref.svd_filter(x, 1, 3), x)


@pytest.mark.parametrize("order", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("init", ["zero", "projection"])
def test_iir_filter(ensemble, order, init):
    got = usbeam.clutter_filter(ensemble, "iir", order=order, cutoff=0.08, init=init)
    assert_clutter_close(got, ref.iir_filter(ensemble, order, 0.08, init), ensemble)


def test_iir_projection_window(ensemble):
    got = usbeam.clutter_filter(ensemble, "iir", order=3, cutoff=0.1, init_frames=8)
    assert_clutter_close(got, ref.iir_filter(ensemble, 3, 0.1, "projection", init_frames=8), ensemble)


@pytest.mark.parametrize("init", ["zero", "projection"])
def test_iir_streaming_blocks_equal_whole_record(rng, init):
    record = blood(rng, 64, (9, 11), 0.4 * VN) + static_clutter(rng, 64, (9, 11), 40.0)
    whole = usbeam.ClutterFilter(record.shape, "iir", order=4, cutoff=0.05, init=init, init_frames=8)(record)
    stream = usbeam.ClutterFilter((8, 9, 11), "iir", order=4, cutoff=0.05, init=init)
    out = np.full(record.shape, np.nan, np.complex64)
    for start in range(0, 64, 8):
        out[start:start + 8] = stream(record[start:start + 8])
    err = np.abs(out - whole).max() / np.abs(record).max()
    assert err <= TOLERANCES["doppler_iir_stream_rel"]
    assert_clutter_close(whole, ref.iir_filter(record, 4, 0.05, init, init_frames=8), record)
    # reset starts a new record: the first block comes out as it did the first time
    stream.reset()
    np.testing.assert_array_equal(stream(record[:8]), out[:8])


def test_butterworth_frequency_response(rng):
    # The C design is checked through its response: a sinusoid at the cut-off comes out at
    # -3 dB, one at Nyquist/2 passes, DC is removed (steady state, zero initial state).
    n = 4000
    for freq, want in ((0.05, 10 ** (-3.0103 / 20)), (0.25, 1.0), (0.0, 0.0)):
        x = np.exp(2j * np.pi * freq * np.arange(n)).astype(np.complex64)[:, None]
        y = usbeam.clutter_filter(x, "iir", order=4, cutoff=0.05, init="zero")
        assert abs(np.abs(y[-200:]).mean() - want) < 2e-3


# ---- color Doppler ----------------------------------------------------------------------

@pytest.mark.parametrize("lag", [1, 2])
@pytest.mark.parametrize("average, window", [(1, "hamming"), ((3, 3), "hamming"), ((4, 5), "boxcar"),
                                             ((2, 1), "hamming"), ((5, 2), "boxcar")])
def test_color_doppler_matches_reference(rng, lag, average, window):
    x = blood(rng, 16, (19, 14), 0.5 * VN, snr_db=5.0)
    v, var = usbeam.color_doppler(x, fc=FC, prf=PRF, c=C, lag=lag, average=average, window=window)
    assert v.dtype == np.float32 and v.shape == (19, 14) and var.shape == (19, 14)
    mz, mx = (average, average) if np.ndim(average) == 0 else average
    rv, rvar = ref.kasai(x, FC, PRF, C, lag, mz, mx, window)
    vn = VN / lag
    assert np.abs(wrapped_difference(v, rv, vn)).max() <= TOLERANCES["doppler_velocity_vn"] * vn
    assert np.abs(var - rvar).max() <= TOLERANCES["doppler_variance_rel"] * 2 * (vn / np.pi) ** 2


@pytest.mark.parametrize("lag, average", [(1, 1), (1, (3, 3)), (2, (4, 5)), (3, (2, 3))])
def test_color_doppler_matches_pymust(rng, lag, average):
    pymust = pytest.importorskip("pymust")
    x = blood(rng, 12, (15, 16), -0.6 * VN, snr_db=10.0)
    param = pymust.utils.Param()
    param.fc, param.PRF, param.c = FC, PRF, C
    m = np.array(average if np.ndim(average) else (average, average))
    pv, pvar = pymust.iq2doppler(np.moveaxis(x.astype(np.complex128), 0, -1), param, m, lag)
    v, var = usbeam.color_doppler(x, fc=FC, prf=PRF, c=C, lag=lag, average=average)
    vn = VN / lag
    assert np.abs(wrapped_difference(v, pv, vn)).max() <= TOLERANCES["doppler_velocity_vn"] * vn
    assert np.abs(var - pvar).max() <= TOLERANCES["doppler_variance_rel"] * 2 * (vn / np.pi) ** 2


def test_color_doppler_batch_of_images(rng):
    x = blood(rng, 10, (3, 8, 9), 0.2 * VN, snr_db=0.0)
    v, var = usbeam.color_doppler(x, fc=FC, prf=PRF, c=C, average=3)
    for k in range(3):
        rv, rvar = ref.kasai(x[:, k], FC, PRF, C, 1, 3, 3, "hamming")
        assert np.abs(wrapped_difference(v[k], rv, VN)).max() <= TOLERANCES["doppler_velocity_vn"] * VN


@pytest.mark.parametrize("fraction", [-0.8, -0.5, -0.1, 0.05, 0.3, 0.8])
@pytest.mark.parametrize("lag", [1, 2])
def test_velocity_estimate_within_nyquist(rng, fraction, lag):
    vn = VN / lag
    x = blood(rng, 16, (24, 24), fraction * vn, lag_vn=VN, snr_db=20.0)
    v, _ = usbeam.color_doppler(x, fc=FC, prf=PRF, c=C, lag=lag)
    assert abs(np.median(v) - fraction * vn) <= TOLERANCES["doppler_velocity_estimate_rel"] * abs(fraction * vn)
    assert np.all(np.abs(v) <= vn * (1 + 1e-6))


@pytest.mark.parametrize("fraction", [1.2, 1.5, -1.3, 2.6])
def test_velocity_beyond_nyquist_aliases_as_phase_wrap(rng, fraction):
    x = blood(rng, 16, (20, 20), fraction * VN, snr_db=30.0)
    v, _ = usbeam.color_doppler(x, fc=FC, prf=PRF, c=C)
    aliased = (fraction + 1) % 2 - 1  # the phase advance pi*fraction wrapped into (-pi, pi]
    assert abs(np.median(v) / VN - aliased) <= 0.01


def test_velocity_sign_matches_doppler_shift():
    # x[t] = exp(+j w t): a positive Doppler shift gives a positive velocity (PyMUST convention)
    x = np.exp(1j * 0.5 * np.arange(8)).astype(np.complex64)[:, None, None] * np.ones((1, 2, 2), np.complex64)
    v, var = usbeam.color_doppler(x, fc=FC, prf=PRF, c=C)
    np.testing.assert_allclose(v, VN * 0.5 / np.pi, rtol=1e-6)
    # a pure tone is perfectly coherent: variance 2 (VN/pi)^2 (1 - (N-1)/N)
    np.testing.assert_allclose(var, 2 * (VN / np.pi) ** 2 / 8, rtol=1e-5)
    assert usbeam.nyquist_velocity(fc=FC, prf=PRF, c=C) == pytest.approx(VN)


def test_axial_correction_matches_reference_and_rescales(rng):
    dz = C / FC / 8  # lambda/8 rows
    f0 = 4.5e6       # echoes centred below fc: the fc scaling would underestimate the speed
    t = np.arange(16)[:, None, None]
    z = np.arange(32)[None, :, None]
    speckle = complex_noise(rng, (1, 1, 24)) + 3
    phase = 4 * np.pi * f0 * dz / C * z + np.pi * 0.4 * t * (f0 / FC)   # true v = 0.4 VN (at fc)
    x = (speckle * np.exp(1j * phase) + complex_noise(rng, (16, 32, 24), 0.01)).astype(np.complex64)
    plan = usbeam.ColorDopplerPlan(x.shape, fc=FC, prf=PRF, c=C, average=3, axial_correction=True, dz=dz)
    v, _ = plan(x)
    rv, _ = ref.kasai(x, FC, PRF, C, 1, 3, 3, "hamming", dz=dz)
    assert np.abs(v - rv).max() <= TOLERANCES["doppler_velocity_vn"] * VN
    # Doppler shift 2 v f0 / c: with the f0 correction the true velocity comes back
    v_plain, _ = usbeam.color_doppler(x, fc=FC, prf=PRF, c=C, average=3)
    assert abs(np.median(v) - 0.4 * VN) < 0.01 * VN
    assert abs(np.median(v_plain) - 0.4 * VN * f0 / FC) < 0.01 * VN


def test_color_plan_outputs_and_power(rng):
    x = blood(rng, 10, (6, 7), 0.1 * VN)
    plan = usbeam.ColorDopplerPlan(x.shape, fc=FC, prf=PRF, c=C, average=(3, 1))
    assert plan.nyquist_velocity == pytest.approx(VN)
    v_out = np.full((6, 7), np.nan, np.float32)
    var_out = np.full((6, 7), np.nan, np.float32)
    p_out = np.full((6, 7), np.nan, np.float32)
    v, var, p = plan(x, velocity=v_out, variance=var_out, power=p_out)
    assert v is v_out and var is var_out and p is p_out
    assert np.all(np.isfinite(v_out)) and np.all(np.isfinite(var_out))
    np.testing.assert_allclose(p, ref.power(x), rtol=TOLERANCES["doppler_power_rel"])


# ---- clutter + velocity: 40 dB static tissue removed by each filter -----------------------

@pytest.mark.parametrize("method, kwargs", [("mean", {}), ("poly", {"order": 2}), ("svd", {"low": 1}),
                                            ("svd", {}), ("iir", {"order": 4, "cutoff": 0.05})])
def test_clutter_40db_removed_and_velocity_recovered(rng, method, kwargs):
    true_v = 0.4 * VN
    flow = blood(rng, 32, (24, 24), true_v, snr_db=25.0)
    x = flow + static_clutter(rng, 32, (24, 24), 40.0)
    raw, _ = usbeam.color_doppler(x, fc=FC, prf=PRF, c=C)
    assert abs(np.median(raw)) < 0.05 * VN  # the clutter dominates before filtering
    filtered = usbeam.clutter_filter(x, method, **kwargs)
    residual_db = 10 * np.log10(ref.power(filtered).mean() / ref.power(flow).mean())
    assert residual_db < 1.0  # what is left is the flow (its low-frequency part may be cut)
    v, _ = usbeam.color_doppler(filtered, fc=FC, prf=PRF, c=C)
    assert abs(np.median(v) - true_v) <= TOLERANCES["doppler_velocity_estimate_rel"] * true_v


# ---- power Doppler --------------------------------------------------------------------------

def test_power_doppler_linear_and_db(rng):
    x = blood(rng, 12, (10, 11), 0.2 * VN) * np.linspace(0.01, 1, 11).astype(np.float32)
    out = np.full((10, 11), np.nan, np.float32)
    plan = usbeam.PowerDopplerPlan(x.shape)
    assert plan(x, out=out) is out
    np.testing.assert_allclose(out, ref.power(x), rtol=TOLERANCES["doppler_power_rel"])
    db = usbeam.power_doppler(x, db=True)
    assert db.max() == 0.0
    np.testing.assert_allclose(db, ref.power(x, db=True), atol=TOLERANCES["doppler_power_db_abs"])
    floor = float(np.median(ref.power(x)))
    np.testing.assert_allclose(usbeam.power_doppler(x, db=True, reference=2.0, noise_floor=floor),
                               ref.power(x, True, 2.0, floor), atol=TOLERANCES["doppler_power_db_abs"])
    np.testing.assert_allclose(usbeam.power_doppler(x, noise_floor=floor), ref.power(x, noise_floor=floor),
                               rtol=TOLERANCES["doppler_power_rel"])


def test_power_doppler_analytic():
    x = np.array([[3 + 4j], [0], [0], [5j]], np.complex64)  # |x|^2 = 25, 0, 0, 25 -> mean 12.5
    assert usbeam.power_doppler(x)[0] == pytest.approx(12.5)


# ---- display -------------------------------------------------------------------------------

@pytest.mark.parametrize("median, persistence", [(True, 0.0), (False, 0.7), (True, 0.5)])
def test_display_matches_reference(rng, median, persistence):
    v = (rng.standard_normal((5, 12, 10)) * VN / 3).astype(np.float32)
    p = rng.standard_normal((5, 12, 10)).astype(np.float32)
    disp = usbeam.DopplerDisplay((12, 10), median=median, persistence=persistence, power_threshold=0.1,
                                 velocity_threshold=0.05 * VN)
    got = [disp(v[k], p[k]) for k in range(5)]
    rv, rp, rm = ref.display(v, p, median, persistence, 0.1, 0.05 * VN)
    got_v, got_p, got_m = (np.array([g[i] for g in got]) for i in range(3))
    tol = TOLERANCES["doppler_display_abs"]
    np.testing.assert_allclose(got_p, rp, atol=tol)
    # a pixel within rounding of a threshold may go either way; every other one must agree
    near = (np.abs(rp - 0.1) < tol) | (np.abs(np.abs(np.where(rm, rv, 1)) - 0.05 * VN) < tol)
    assert np.all((got_m == rm) | near)
    np.testing.assert_allclose(np.where(near, 0, got_v), np.where(near, 0, rv), atol=tol)
    # the same sequence in one batched call gives the same result
    batch = usbeam.DopplerDisplay((5, 12, 10), median=median, persistence=persistence, power_threshold=0.1,
                                  velocity_threshold=0.05 * VN)
    bv, bp, bm = batch(v, p)
    np.testing.assert_array_equal(bv, got_v)
    np.testing.assert_array_equal(bm, got_m)
    batch.reset()
    np.testing.assert_array_equal(batch(v, p)[0], bv)


def test_display_output_buffers(rng):
    shape = (2, 12, 10)
    v = (rng.standard_normal(shape) * VN / 3).astype(np.float32)
    p = rng.standard_normal(shape).astype(np.float32)
    kwargs = dict(median=True, persistence=0.5, power_threshold=0.1, velocity_threshold=0.05 * VN)
    want = usbeam.DopplerDisplay(shape, **kwargs)(v, p)
    bufs = (np.full(shape, np.nan, np.float32), np.full(shape, np.nan, np.float32), np.full(shape, 7, np.uint8))
    got = usbeam.DopplerDisplay(shape, **kwargs)(v, p, out_velocity=bufs[0], out_power=bufs[1], mask=bufs[2])
    assert all(g is b for g, b in zip(got, bufs))  # the caller's buffers, every element overwritten
    for w, g in zip(want, got):
        np.testing.assert_array_equal(g, w)
    disp = usbeam.DopplerDisplay(shape)
    with pytest.raises(ValueError, match="out_velocity must not share memory"):
        disp(v, out_velocity=v)
    with pytest.raises(ValueError, match="out_power is given without power"):
        disp(v, out_power=bufs[1])
    with pytest.raises(TypeError, match="mask must have dtype uint8"):
        disp(v, mask=bufs[0])
    with pytest.raises(ValueError, match="out_velocity must have shape"):
        disp(v, out_velocity=bufs[0][0])


def test_display_median_removes_outlier():
    v = np.zeros((5, 5), np.float32)
    v[2, 2] = 1.0
    out_v, out_p, mask = usbeam.DopplerDisplay((5, 5), median=True)(velocity=v)
    assert out_p is None and np.all(out_v == 0) and mask.dtype == np.uint8


# ---- plans, buffers, inputs ------------------------------------------------------------------

def test_clutter_out_buffer_and_in_place(rng, ensemble):
    f = usbeam.ClutterFilter(ensemble.shape, "poly", order=1)
    out = np.full(ensemble.shape, np.nan + 1j * np.nan, np.complex64)
    assert f(ensemble, out=out) is out
    assert np.all(np.isfinite(out))
    inplace = ensemble.copy()
    f(inplace, out=inplace)
    np.testing.assert_array_equal(inplace, out)


def test_inputs_not_modified(rng, ensemble):
    copy = ensemble.copy()
    for method in ("mean", "poly", "svd", "iir"):
        usbeam.clutter_filter(ensemble, method)
    usbeam.color_doppler(ensemble, fc=FC, prf=PRF, c=C, average=3, axial_correction=True, dz=1e-4)
    usbeam.power_doppler(ensemble, db=True)
    np.testing.assert_array_equal(ensemble, copy)


def test_complex128_and_non_contiguous_input(rng):
    x = blood(rng, 10, (8, 12), 0.3 * VN).astype(np.complex128)[:, :, ::2]
    v, _ = usbeam.color_doppler(x, fc=FC, prf=PRF, c=C)
    rv, _ = ref.kasai(x.astype(np.complex64), FC, PRF, C)
    assert np.abs(wrapped_difference(v, rv, VN)).max() <= TOLERANCES["doppler_velocity_vn"] * VN


@pytest.mark.parametrize("call, exc, word", [
    (lambda x: usbeam.clutter_filter(x[:3], "poly", order=2), ValueError, "order"),
    (lambda x: usbeam.clutter_filter(x, "poly", order=-1), ValueError, "order"),
    (lambda x: usbeam.clutter_filter(x, "svd", low=5, high=3), ValueError, "low"),
    (lambda x: usbeam.clutter_filter(x, "svd", low=0, high=10), ValueError, "high"),
    (lambda x: usbeam.clutter_filter(x, "svd", low=-2), ValueError, "low"),
    (lambda x: usbeam.clutter_filter(x, "svd", auto_frequency=0.7), ValueError, "auto_frequency"),
    (lambda x: usbeam.clutter_filter(x, "iir", cutoff=0.5), ValueError, "cutoff"),
    (lambda x: usbeam.clutter_filter(x, "iir", cutoff=float("nan")), ValueError, "cutoff"),
    (lambda x: usbeam.clutter_filter(x, "iir", order=11), ValueError, "order"),
    (lambda x: usbeam.clutter_filter(x, "iir", order=8), ValueError, "init_frames"),
    (lambda x: usbeam.clutter_filter(x, "iir", init="step"), ValueError, "init"),
    (lambda x: usbeam.clutter_filter(x, "wavelet"), ValueError, "method"),
    (lambda x: usbeam.clutter_filter(x.real, "mean"), TypeError, "complex"),
    (lambda x: usbeam.clutter_filter(x[0, 0], "mean"), ValueError, "iq"),
    (lambda x: usbeam.color_doppler(x, fc=FC, prf=0, c=C), ValueError, "prf"),
    (lambda x: usbeam.color_doppler(x, fc=FC, prf=-1.0, c=C), ValueError, "prf"),
    # units: a PRF in kHz (5 for 5 kHz) and a pixel spacing in mm (0.1 for 0.1 mm)
    (lambda x: usbeam.color_doppler(x, fc=FC, prf=5.0, c=C), ValueError, r"prf = 5 Hz is below 20 Hz: prf is in Hz"),
    (lambda x: usbeam.nyquist_velocity(fc=FC, prf=5.0, c=C), ValueError, "not kHz"),
    (lambda x: usbeam.color_doppler(x, fc=FC, prf=PRF, c=C, axial_correction=True, dz=0.1), ValueError,
     r"dz = 0.1 m is over 10 mm between pixels: dz is in m"),
    (lambda x: usbeam.color_doppler(x, fc=float("inf"), prf=PRF, c=C), ValueError, "fc"),
    (lambda x: usbeam.color_doppler(x, fc=FC, prf=PRF, c=C, lag=8), ValueError, "lag"),
    (lambda x: usbeam.color_doppler(x, fc=FC, prf=PRF, c=C, lag=0), ValueError, "lag"),
    (lambda x: usbeam.color_doppler(x, fc=FC, prf=PRF, c=C, average=0), ValueError, "average"),
    (lambda x: usbeam.color_doppler(x, fc=FC, prf=PRF, c=C, window="gauss"), ValueError, "window"),
    (lambda x: usbeam.color_doppler(x, fc=FC, prf=PRF, c=C, axial_correction=True), TypeError, "needs dz, the axial pixel"),
    (lambda x: usbeam.color_doppler(x.real, fc=FC, prf=PRF, c=C), TypeError, "complex"),
    (lambda x: usbeam.color_doppler(np.zeros(x.shape, np.int16), fc=FC, prf=PRF, c=C), TypeError, "complex"),
    (lambda x: usbeam.color_doppler(x, fc=FC, prf="fast", c=C), TypeError, "prf"),
    (lambda x: usbeam.power_doppler(x, noise_floor=-1), ValueError, "noise_floor"),
    (lambda x: usbeam.power_doppler(x, db=True, reference=0), ValueError, "reference"),
    (lambda x: usbeam.power_doppler(x.real), TypeError, "complex"),
    (lambda x: usbeam.DopplerDisplay((4, 4), persistence=1.0), ValueError, "persistence"),
    (lambda x: usbeam.DopplerDisplay((4, 4), velocity_threshold=-1), ValueError, "velocity_threshold"),
    (lambda x: usbeam.DopplerDisplay((4, 4))(np.full((4, 4), np.nan)), ValueError, "velocity"),
    (lambda x: usbeam.DopplerDisplay((4, 4))(), ValueError, "velocity"),
])
def test_bad_input(rng, call, exc, word):
    x = complex_noise(rng, (8, 5, 6))
    with pytest.raises(exc, match=word):
        call(x)


def test_bad_out_buffers(rng):
    x = complex_noise(rng, (8, 5, 6))
    f = usbeam.ClutterFilter(x.shape, "mean")
    with pytest.raises(TypeError, match="out"):
        f(x, out=np.empty(x.shape, np.complex128))
    with pytest.raises(ValueError, match="out"):
        f(x, out=np.empty((8, 5, 5), np.complex64))
    read_only = np.empty(x.shape, np.complex64)
    read_only.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        f(x, out=read_only)
    with pytest.raises(ValueError, match="iq"):
        f(x[:, :4])
    plan = usbeam.ColorDopplerPlan(x.shape, fc=FC, prf=PRF, c=C)
    with pytest.raises(ValueError, match="contiguous"):
        plan(x, velocity=np.empty((5, 12), np.float32)[:, ::2])
    with pytest.raises(TypeError, match="variance"):
        plan(x, variance=np.empty((5, 6), np.float64))
    with pytest.raises(ValueError, match="svd_info"):
        f.svd_info()
    with pytest.raises(MemoryError, match="iq"):
        usbeam.ClutterFilter((64, 2**26, 2**14), "mean")


def test_binding_rejects_bad_buffers_without_crashing(rng):
    core = usbeam._core
    plan = core.clutter_plan(8, 30, method="mean")
    good = np.zeros(240, np.complex64)
    with pytest.raises(TypeError, match="iq"):
        core.clutter_execute(plan, np.zeros(240, np.float32), good.copy())
    with pytest.raises(ValueError, match="out"):
        core.clutter_execute(plan, good, np.zeros(239, np.complex64))
    with pytest.raises(TypeError, match="plan"):
        core.clutter_execute(object(), good, good.copy())
    color = core.color_plan(8, 1, 5, 6, FC, PRF)
    with pytest.raises(TypeError, match="plan"):
        core.clutter_execute(color, good, good.copy())
    with pytest.raises(ValueError, match="velocity"):
        core.color_execute(color, good, np.zeros(29, np.float32))
    with pytest.raises(ValueError, match="lag"):
        core.color_plan(4, 1, 5, 6, FC, PRF, lag=4)
    with pytest.raises(ValueError, match="svd_high"):
        core.clutter_plan(8, 30, method="svd", svd_high=8)
    with pytest.raises(ValueError, match="not executed"):
        core.clutter_svd_info(core.clutter_plan(8, 30, method="svd"))
    display = core.doppler_display_plan(1, 5, 6)
    with pytest.raises(ValueError, match="velocity"):
        core.doppler_display_execute(display, None, None, None, None, None)


def test_one_plan_shared_by_threads(rng):
    # Plans hold scratch: the binding serialises executes on one plan, so concurrent calls from
    # threads give the same answers as sequential ones.
    from concurrent.futures import ThreadPoolExecutor

    inputs = [blood(rng, 12, (20, 24), 0.2 * VN) + static_clutter(rng, 12, (20, 24), 30.0) for _ in range(6)]
    svd = usbeam.ClutterFilter(inputs[0].shape, "svd", low=1)
    color = usbeam.ColorDopplerPlan(inputs[0].shape, fc=FC, prf=PRF, c=C, average=3)
    sequential = [color(svd(x))[0] for x in inputs]
    with ThreadPoolExecutor(max_workers=4) as pool:
        threaded = list(pool.map(lambda x: color(svd(x))[0], inputs))
    for a, b in zip(sequential, threaded):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
@pytest.mark.parametrize("cutoff", [dict(low=1), dict(low="auto")])
def test_svd_refuses_non_finite_ensemble(rng, bad, cutoff):
    """One bad sample would leave garbage eigenvectors (and, with the automatic cut-off, the
    input passing through unfiltered): the SVD filter refuses it, names iq, writes nothing."""
    iq = (rng.standard_normal((12, 6, 5)) + 1j * rng.standard_normal((12, 6, 5))).astype(np.complex64)
    iq[7, 2, 3] = bad
    plan = usbeam.ClutterFilter(iq.shape, method="svd", **cutoff)
    out = np.full(iq.shape, 5 + 5j, np.complex64)
    with pytest.raises(ValueError, match="iq.*NaN or inf"):
        plan(iq, out=out)
    assert np.all(out == 5 + 5j)
    iq[7, 2, 3] = 0
    plan(iq, out=out)  # the plan still works
    assert np.all(np.isfinite(out))


def test_clutter_algorithm_gemm_refused_off_cuda_and_bad_names():
    shape = (16, 5, 4)
    with pytest.raises(ValueError, match="algorithm='gemm'.*backend='cuda'"):
        usbeam.ClutterFilter(shape, "poly", algorithm="gemm")
    with pytest.raises(ValueError, match="algorithm"):
        usbeam.ClutterFilter(shape, "poly", algorithm="fast")
    with pytest.raises(ValueError, match="method"):
        usbeam.ClutterFilter(shape, "svd", algorithm="gemm", backend="cuda")
    with pytest.raises(ValueError, match="method"):
        usbeam.ClutterFilter(shape, "iir", algorithm="gemm", backend="cuda")
    # the C library refuses it too, whoever calls it
    with pytest.raises(NotImplementedError, match="algorithm .gemm."):
        usbeam._core.clutter_plan(16, 20, method="poly", algorithm="gemm", backend="cpu")
    with pytest.raises(ValueError, match="algorithm must be"):
        usbeam._core.clutter_plan(16, 20, method="poly", algorithm="GEMM")
    assert usbeam.ClutterFilter(shape, "mean").algorithm == "kernel"


@pytest.mark.parametrize("method, options, name", [
    ("svd", {"cutoff": 0.2}, "cutoff"),        # an 'iir' option: the SVD filter kept every component
    ("svd", {"order": 3}, "order"),
    ("mean", {"order": 2}, "order"),
    ("poly", {"low": 1}, "low"),
    ("iir", {"high": 2}, "high"),
    ("poly", {"init": "zero"}, "init"),
    ("mean", {"init_frames": 4}, "init_frames"),
    ("iir", {"auto_frequency": 0.1}, "auto_frequency"),
    ("svd", {"low": 1, "auto_frequency": 0.1}, "auto_frequency"),
])
def test_clutter_refuses_an_option_its_method_would_ignore(method, options, name):
    with pytest.raises(ValueError, match=f"^{name} "):
        usbeam.ClutterFilter((16, 5, 4), method, **options)


def test_clutter_options_at_their_defaults_are_accepted_by_every_method(rng):
    """Passing an option at its default (as a wrapper forwarding every keyword does) is no
    error, and changes nothing: the output equals the method's own defaults."""
    iq = (rng.standard_normal((16, 5, 4)) + 1j * rng.standard_normal((16, 5, 4))).astype(np.complex64)
    defaults = dict(low="auto", high=None, auto_frequency=0.05, cutoff=0.05, init="projection", init_frames=None)
    for method in ("poly", "mean", "svd", "iir"):
        np.testing.assert_array_equal(usbeam.clutter_filter(iq, method, **defaults), usbeam.clutter_filter(iq, method))
