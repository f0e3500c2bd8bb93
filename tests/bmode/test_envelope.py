"""usbeam.envelope / EnvelopePlan (csrc/bmode/envelope.c) and B-mode of real RF images:
against the float64 DFT reference (tests/reference/envelope.py), scipy.signal.hilbert (the
peer), an analytic case (a Gaussian-windowed cosine, whose envelope is the Gaussian), a real
RF line (RFsignal@20MHz), and bmode(das(rf)) against bmode(das(rf2iq(rf))) on the project's
simulated phantom; bad input."""
import numpy as np
import pytest
import scipy.io
import scipy.signal

import usbeam
from conftest import shared_dataset
from reference import envelope as ref
from tolerances import TOLERANCES


def rel_error(got, want):
    return float(np.abs(np.asarray(got, np.complex128) - want).max() / np.abs(want).max())


@pytest.mark.parametrize("shape, axis", [((3, 251, 70), -2), ((2, 64, 130), 1), ((5, 33), -1), ((17, 4), 0),
                                         ((1, 1, 8), -1), ((2, 2, 3, 9), -3), ((7,), 0), ((4, 2, 5), -2)])
def test_matches_reference_and_scipy(rng, shape, axis):
    image = rng.standard_normal(shape).astype(np.float32)
    want = ref.analytic_signal(image, axis)
    analytic = usbeam.envelope(image, axis, output="analytic")
    assert analytic.dtype == np.complex64 and analytic.shape == shape
    assert rel_error(analytic, want) <= TOLERANCES["envelope_rel"]
    magnitude = usbeam.envelope(image, axis)
    assert magnitude.dtype == np.float32 and magnitude.shape == shape
    assert rel_error(magnitude, np.abs(want)) <= TOLERANCES["envelope_rel"]
    peer = np.abs(scipy.signal.hilbert(image.astype(np.float64), axis=axis))
    assert rel_error(magnitude, peer) <= TOLERANCES["envelope_rel"]


def test_gaussian_pulse_envelope_is_the_gaussian():
    n, sigma, f = 512, 20.0, 0.1
    t = np.arange(n) - 255.3
    gauss = np.exp(-0.5 * (t / sigma) ** 2)
    lines = np.stack([a * gauss * np.cos(2 * np.pi * f * t + phase) for a, phase in ((1.0, 0.0), (3.0, 1.1))])
    image = np.ascontiguousarray(lines.T.astype(np.float32))  # (depth, 2 lines): along axis -2
    got = usbeam.envelope(image)
    want = np.stack([gauss, 3.0 * gauss]).T
    assert rel_error(got, want) <= TOLERANCES["envelope_gaussian_rel"]
    # analytic: the phase of the cosine (x + j sin) where the envelope is not tiny
    analytic = usbeam.envelope(image, output="analytic")
    big = gauss > 1e-3
    np.testing.assert_allclose(np.angle(analytic[big, 0]), np.angle(np.exp(1j * 2 * np.pi * f * t[big])), atol=1e-4)


def test_real_rf_line():
    rf = scipy.io.loadmat(shared_dataset("RFsignal@20MHz.mat"))["RF"].astype(np.float32)  # (1, 1000)
    got = usbeam.envelope(rf, axis=-1)
    assert rel_error(got, ref.envelope(rf, axis=-1)) <= TOLERANCES["envelope_rel"]
    assert rel_error(got, np.abs(scipy.signal.hilbert(rf.astype(np.float64), axis=-1))) <= TOLERANCES["envelope_rel"]


def test_plan_runs_many_times_and_into_out(rng):
    plan = usbeam.EnvelopePlan((2, 40, 9), axis=-2)
    assert "EnvelopePlan" in repr(plan)
    for _ in range(3):
        image = rng.standard_normal((2, 40, 9)).astype(np.float32)
        out = np.full((2, 40, 9), np.nan, np.float32)
        assert plan(image, out=out) is out
        assert rel_error(out, ref.envelope(image)) <= TOLERANCES["envelope_rel"]
    # float64 and strided input are converted (a copy), never modified
    image = rng.standard_normal((2, 40, 18))[:, :, ::2]
    keep = image.copy()
    assert rel_error(plan(image), ref.envelope(image.astype(np.float32))) <= TOLERANCES["envelope_rel"]
    np.testing.assert_array_equal(image, keep)


def test_bmode_of_rf_is_bmode_of_its_analytic_signal(rng):
    image = rng.standard_normal((2, 50, 12)).astype(np.float32)
    env = ref.envelope(image)
    want_db = np.maximum(20 * np.log10(env / env.max()), -40)
    got = usbeam.bmode(image, 40, output="db")
    np.testing.assert_allclose(got, want_db, rtol=0, atol=TOLERANCES["envelope_bmode_db_abs"])
    plan = usbeam.BModePlan(image.shape, 40, output="db", data="rf")
    np.testing.assert_allclose(plan(image), want_db, rtol=0, atol=TOLERANCES["envelope_bmode_db_abs"])
    # uint8 is the same compression of the same analytic signal
    analytic = usbeam.envelope(image, output="analytic")
    np.testing.assert_array_equal(usbeam.bmode(image, 30), usbeam.bmode(analytic, 30))
    # per-frame normalisation and axis=-1 go through too
    lines = rng.standard_normal((3, 1, 64)).astype(np.float32)  # 3 frames of one line
    env = ref.envelope(lines, axis=-1)
    want = np.maximum(20 * np.log10(env / env.max(axis=-1, keepdims=True)), -40)
    got = usbeam.bmode(lines, 40, output="db", normalize="frame", axis=-1)
    np.testing.assert_allclose(got, want, rtol=0, atol=TOLERANCES["envelope_bmode_db_abs"])


def test_bmode_of_das_rf_matches_bmode_of_das_iq():
    """The project's simulated phantom (usbeam.demo: cyst, points, 3 plane waves, fs = 4 fc):
    DAS on the RF then B-mode through the envelope, against the usual rf2iq -> DAS on IQ ->
    B-mode (PWI_disk cannot serve: its RF is sampled at 6.67 MHz, below the Nyquist rate of its
    5 MHz carrier, which only the IQ path handles)."""
    from usbeam.demo import simulate_acquisition

    probe, sequence, acq, rf = simulate_acquisition()
    rf = rf.astype(np.float32)
    # depth sampled finer than a quarter wavelength (the RF image oscillates at 2 fc / c along z)
    grid = usbeam.Grid(x=np.linspace(-12e-3, 12e-3, 121), z=np.linspace(8e-3, 36e-3, 561))
    common = dict(fs=acq["fs"], fc=acq["fc"], c=acq["c"], t0=acq["t0"], f_number=1.5, interpolation="linear")
    image_rf = usbeam.Beamformer(probe, sequence, grid, n_samples=rf.shape[-1], dtype=np.float32, **common)(rf)
    iq = usbeam.rf2iq(rf, fs=acq["fs"], fc=acq["fc"], t0=acq["t0"], bandwidth=0.6)
    image_iq = usbeam.Beamformer(probe, sequence, grid, n_samples=iq.shape[-1], dtype=np.complex64, **common)(iq)
    assert image_rf.dtype == np.float32 and image_rf.shape[-2:] == (561, 121)
    db_rf = usbeam.bmode(image_rf, 40, output="db")
    db_iq = usbeam.bmode(image_iq, 40, output="db")
    rho = np.corrcoef(db_rf.ravel(), db_iq.ravel())[0, 1]
    print(f"bmode(das(rf)) vs bmode(das(rf2iq(rf))): rho {rho:.4f}, median |diff| "
          f"{np.median(np.abs(db_rf - db_iq)):.3f} dB")
    assert rho >= TOLERANCES["envelope_rf_vs_iq_bmode_rho"]
    assert np.median(np.abs(db_rf - db_iq)) <= TOLERANCES["envelope_rf_vs_iq_median_db"]


def test_bad_input(rng):
    with pytest.raises(TypeError, match="image"):
        usbeam.envelope(np.ones((4, 4), np.complex64))
    with pytest.raises(TypeError, match="image"):
        usbeam.envelope(np.ones((4, 4), np.bool_))
    with pytest.raises(ValueError, match="empty"):
        usbeam.envelope(np.ones((0, 4), np.float32))
    with pytest.raises(ValueError, match="axis"):
        usbeam.envelope(np.ones(8, np.float32))  # a single line: axis=-2 does not exist
    with pytest.raises(ValueError, match="axis"):
        usbeam.EnvelopePlan((4, 4), axis=2)
    with pytest.raises(TypeError, match="axis"):
        usbeam.EnvelopePlan((4, 4), axis=1.0)
    with pytest.raises(ValueError, match="output"):
        usbeam.EnvelopePlan((4, 4), output="phase")
    with pytest.raises(ValueError, match="data"):
        usbeam.BModePlan((4, 4), data="envelope")
    plan = usbeam.EnvelopePlan((6, 5))
    with pytest.raises(ValueError, match="shape"):
        plan(np.ones((5, 6), np.float32))
    with pytest.raises(TypeError, match="out"):
        plan(np.ones((6, 5), np.float32), out=np.empty((6, 5), np.complex64))
    image = rng.standard_normal((6, 5)).astype(np.float32)
    with pytest.raises(ValueError, match="out"):
        plan(image, out=image)
    image[3, 2] = np.nan
    out = np.zeros((6, 5), np.float32)
    with pytest.raises(ValueError, match="image contains NaN"):
        plan(image, out=out)
    assert np.isnan(out).all()  # no partial result
    with pytest.raises(ValueError, match="image contains NaN"):
        usbeam.bmode(image)
