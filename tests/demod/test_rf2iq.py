"""rf2iq family: C kernel against the float64 reference (tests/reference/rf2iq.py), PyMUST on
real data, analytic tones, filter design against scipy, and bad input."""
import threading

import numpy as np
import pytest
import scipy.io
import scipy.signal

import usbeam
from conftest import shared_dataset
from reference import rf2iq as ref
from tolerances import TOLERANCES

NAN_C64 = np.complex64(complex(np.nan, np.nan))


def assert_close(got, want, key="rf2iq_rel"):
    assert got.shape == want.shape
    assert np.all(np.isfinite(got)), "some outputs were not written (poison left) or are not finite"
    error = np.max(np.abs(got - want)) / np.max(np.abs(want))
    assert error <= TOLERANCES[key], f"relative error {error:.3g} > {TOLERANCES[key]} ({key})"


def random_rf(rng, shape, dtype):
    if dtype == np.int16:
        return rng.integers(-20000, 20000, shape).astype(np.int16)
    return (1000 * rng.standard_normal(shape)).astype(dtype)


def poisoned(shape):
    return np.full(shape, NAN_C64, np.complex64)


# ---- filter design -------------------------------------------------------------------

@pytest.mark.parametrize("order", [1, 2, 3, 4, 5, 6, 8, 10, 16])
@pytest.mark.parametrize("wn", [0.01, 0.1125, 0.25, 0.5, 0.75, 0.99])
def test_butter_coefficients_equal_scipy(order, wn):
    b, a = usbeam._core.butter_lowpass(order, wn)
    want_b, want_a = scipy.signal.butter(order, wn)
    tol = TOLERANCES["rf2iq_design_rel"]
    assert np.max(np.abs(b - want_b)) <= tol * np.max(np.abs(want_b))
    assert np.max(np.abs(a - want_a)) <= tol * np.max(np.abs(want_a))


@pytest.mark.parametrize("cutoff, width, attenuation", [
    (5e6, 2.5e6, 60.0), (1e6, 0.5e6, 80.0), (3e6, 1e6, 30.0), (2e6, 4e6, 8.5), (9e6, 0.3e6, 45.0)])
def test_kaiser_taps_equal_scipy(cutoff, width, attenuation):
    fs = 20e6
    plan = usbeam.RF2IQPlan((64,), np.float32, fs=fs, fc=5e6, filter="kaiser", cutoff=cutoff,
                            transition_width=width, attenuation=attenuation)
    want = ref.kaiser_taps(fs, cutoff, width, attenuation)
    assert len(plan.taps) == len(want) and len(want) % 2 == 1
    assert np.max(np.abs(plan.taps - want)) <= TOLERANCES["rf2iq_design_rel"] * np.max(np.abs(want))


# ---- C against the float64 reference -----------------------------------------------------

DTYPES = [np.int16, np.float32, np.float64]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("t0", [0.0, 3.3e-6, -1.7e-6])
@pytest.mark.parametrize("decimation", [1, 3])
def test_butter_matches_reference(rng, dtype, t0, decimation):
    fs, fc, bandwidth = 20e6, 5e6, 0.6
    rf = random_rf(rng, (2, 3, 257), dtype)
    out = poisoned((2, 3, (257 - 1) // decimation + 1))
    got = usbeam.rf2iq(rf, fs=fs, fc=fc, t0=t0, bandwidth=bandwidth, decimation=decimation, out=out)
    assert got is out
    assert_close(got, ref.rf2iq_butter(rf, fs, fc, t0, bandwidth * fc / fs, 5, decimation))


@pytest.mark.parametrize("order, wn", [(1, 0.3), (2, 0.02), (3, 0.9), (5, 0.5), (8, 0.1)])
def test_butter_orders_and_cutoffs(rng, order, wn):
    fs, fc = 10e6, 2.5e6
    rf = random_rf(rng, (4, 300), np.float32)
    got = usbeam.rf2iq(rf, fs=fs, fc=fc, t0=1e-6, order=order, cutoff=wn * fs / 2)
    assert_close(got, ref.rf2iq_butter(rf, fs, fc, 1e-6, wn, order))


def test_butter_ill_conditioned_case(rng):
    rf = random_rf(rng, (3, 400), np.float64)
    got = usbeam.rf2iq(rf, fs=20e6, fc=5e6, order=10, cutoff=0.05 * 10e6)
    assert_close(got, ref.rf2iq_butter(rf, 20e6, 5e6, 0.0, 0.05, 10), "rf2iq_butter_illcond_rel")


def test_default_cutoff_is_must_default(rng):
    rf = random_rf(rng, (2, 200), np.float32)
    for fs, fc in [(20e6, 5e6), (40e6, 3e6), (6.67e6, 5e6)]:
        plan = usbeam.RF2IQPlan(rf.shape, rf.dtype, fs=fs, fc=fc)
        assert plan.wn == min(2 * fc / fs, 0.5)
        assert_close(plan(rf), ref.rf2iq_butter(rf, fs, fc))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("decimation", [1, 2, 5])
@pytest.mark.parametrize("t0", [0.0, 2.1e-6])
def test_kaiser_matches_reference(rng, dtype, decimation, t0):
    fs, fc = 20e6, 4e6
    rf = random_rf(rng, (3, 2, 181), dtype)
    plan = usbeam.RF2IQPlan(rf.shape, dtype, fs=fs, fc=fc, t0=t0, filter="kaiser", cutoff=2e6,
                            transition_width=1e6, attenuation=70.0, decimation=decimation)
    out = poisoned(plan.out_shape)
    plan(rf, out=out)
    taps = ref.kaiser_taps(fs, 2e6, 1e6, 70.0)
    assert_close(out, ref.rf2iq_fir(rf, fs, fc, taps, t0, decimation))
    assert plan.fs_out == fs / decimation and plan.n_out == (181 - 1) // decimation + 1


def test_kaiser_default_cutoff_follows_bandwidth(rng):
    fs, fc = 20e6, 5e6
    rf = random_rf(rng, (2, 150), np.int16)
    plan = usbeam.RF2IQPlan(rf.shape, rf.dtype, fs=fs, fc=fc, filter="kaiser", bandwidth=0.6)
    assert plan.cutoff == 0.6 * fc / 2 and plan.transition_width == plan.cutoff / 2
    assert_close(plan(rf), ref.rf2iq_fir(rf, fs, fc, ref.kaiser_taps(fs, 1.5e6, 0.75e6, 60.0)))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", ["real_odd", "real_even", "complex_chirp", "single", "longer_than_line"])
@pytest.mark.parametrize("decimation", [1, 4])
def test_user_taps_match_reference(rng, dtype, kind, decimation):
    fs, fc, n = 25e6, 6e6, 97
    if kind == "real_odd":
        taps = rng.standard_normal(21)
    elif kind == "real_even":
        taps = rng.standard_normal(16)
    elif kind == "complex_chirp":
        t = np.arange(40) / fs
        chirp = np.exp(1j * np.pi * 2e6 / t[-1] * (t - t[-1] / 2) ** 2) * np.hanning(40)
        taps = np.conj(chirp[::-1])  # matched filter of the baseband chirp
    elif kind == "single":
        taps = np.array([0.5])
    else:
        taps = rng.standard_normal(131) + 1j * rng.standard_normal(131)
    rf = random_rf(rng, (2, 2, n), dtype)
    out = poisoned((2, 2, (n - 1) // decimation + 1))
    usbeam.rf2iq(rf, fs=fs, fc=fc, t0=0.5e-6, filter=taps, decimation=decimation, out=out)
    assert_close(out, ref.rf2iq_fir(rf, fs, fc, taps, 0.5e-6, decimation))


def test_one_dimensional_and_large_batch(rng):
    rf = random_rf(rng, (500,), np.float32)
    assert_close(usbeam.rf2iq(rf, fs=20e6, fc=5e6), ref.rf2iq_butter(rf, 20e6, 5e6))
    rf = random_rf(rng, (4, 40, 3, 64), np.int16)  # more lines than threads
    assert_close(usbeam.rf2iq(rf, fs=20e6, fc=5e6, filter="kaiser"),
                 ref.rf2iq_fir(rf, 20e6, 5e6, ref.kaiser_taps(20e6, 5e6, 2.5e6, 60.0)))


def test_non_contiguous_and_byteswapped_input(rng):
    base = random_rf(rng, (6, 2, 300), np.float32)
    view = base[::2, :, :]
    assert_close(usbeam.rf2iq(view, fs=20e6, fc=5e6), ref.rf2iq_butter(view, 20e6, 5e6))
    matlab_order = np.asfortranarray(random_rf(rng, (300, 8), np.int16))  # MATLAB RF(n_samples, n_el)
    assert_close(usbeam.rf2iq(matlab_order.T, fs=20e6, fc=5e6), ref.rf2iq_butter(matlab_order.T, 20e6, 5e6))
    swapped = base.astype(base.dtype.newbyteorder(">"))
    assert_close(usbeam.rf2iq(swapped, fs=20e6, fc=5e6), ref.rf2iq_butter(base, 20e6, 5e6))


# ---- analytic ----------------------------------------------------------------------------

@pytest.mark.parametrize("case", [
    dict(fs=40e6, fc=5e6, df=0.3e6, t0=2e-6, filter="butter", decimation=1),
    dict(fs=40e6, fc=5e6, df=-0.4e6, t0=-1e-6, filter="kaiser", decimation=3),
    dict(fs=20e6 / 3, fc=5e6, df=0.2e6, t0=9.95e-6, filter="butter", bandwidth=0.15, decimation=2),
])
def test_tone_demodulates_to_phasor(rng, case):
    """A cos(2 pi (fc+df) t + phi) -> A G(df) exp(j (2 pi df t + phi)), t = t0 + n/fs, where G is
    the zero-phase low-pass gain at df (|H|^2 for filtfilt, H for a centred symmetric FIR)."""
    case = dict(case)
    df, amplitude, phase = case.pop("df"), 1234.5, rng.uniform(-np.pi, np.pi)
    fs, fc, t0 = case["fs"], case["fc"], case["t0"]
    n = 600
    t = t0 + np.arange(n) / fs
    rf = (amplitude * np.cos(2 * np.pi * (fc + df) * t + phase)).astype(np.float32)
    plan = usbeam.RF2IQPlan(rf.shape, rf.dtype, **case)
    iq = plan(rf)
    if plan.filter == "butter":
        _, response = scipy.signal.freqz(*scipy.signal.butter(5, plan.wn), worN=[abs(df)], fs=fs)
        gain = abs(response[0]) ** 2
    else:
        _, response = scipy.signal.freqz(plan.taps, worN=[abs(df)], fs=fs)
        gain = abs(response[0])
    t_out = t0 + np.arange(iq.size) * case["decimation"] / fs
    want = amplitude * gain * np.exp(1j * (2 * np.pi * df * t_out + phase))
    inner = slice(iq.size // 4, 3 * iq.size // 4)  # away from the edge transients
    amp_err = np.max(np.abs(np.abs(iq[inner]) - abs(want[inner]))) / amplitude
    phase_err = np.max(np.abs(np.angle(iq[inner] / want[inner])))
    assert amp_err <= TOLERANCES["rf2iq_tone_amplitude_rel"]
    assert phase_err <= TOLERANCES["rf2iq_tone_phase_rad"]


# ---- real data against PyMUST ------------------------------------------------------------

def _pwi_disk():
    data = scipy.io.loadmat(shared_dataset("PWI_disk.mat"))
    param = data["param"][0, 0]
    value = {k: float(np.asarray(param[k]).ravel()[0].ravel()[0]) for k in ("fs", "fc", "t0", "bandwidth")}
    return data["RF"], value


def test_pwi_disk_matches_pymust():
    pymust = pytest.importorskip("pymust")
    rf_matlab, prm = _pwi_disk()  # int16 (334 samples, 128 elements, 32 frames), fs < 2 fc
    param = pymust.utils.Param()
    for key, value in prm.items():
        setattr(param, key, value)
    want = pymust.rf2iq(rf_matlab.astype(np.float64), param).T  # -> (32, 128, 334)
    rf = rf_matlab.T
    kwargs = dict(fs=prm["fs"], fc=prm["fc"], t0=prm["t0"], bandwidth=prm["bandwidth"] / 100)
    assert_close(usbeam.rf2iq(rf, **kwargs), want, "rf2iq_pymust_rel")
    assert_close(usbeam.rf2iq(rf.astype(np.float32), **kwargs), want, "rf2iq_pymust_rel")
    assert_close(usbeam.rf2iq(rf, **kwargs, decimation=2), want[..., ::2], "rf2iq_pymust_rel")


def test_rfsignal_20mhz_matches_pymust():
    pymust = pytest.importorskip("pymust")
    rf = scipy.io.loadmat(shared_dataset("RFsignal@20MHz.mat"))["RF"]  # (1, 1000) float64
    fs = 20e6
    want = pymust.rf2iq(rf.T.copy(), fs)[:, 0]  # PyMUST estimates fc from the spectrum
    fc = ref.spectral_centroid(rf, fs)
    assert 4e6 < fc < 6e6
    assert_close(usbeam.rf2iq(rf[0], fs=fs, fc=fc), want, "rf2iq_pymust_rel")
    assert_close(usbeam.rf2iq(rf[0].astype(np.float32), fs=fs, fc=fc),
                 ref.rf2iq_butter(rf[0].astype(np.float32), fs, fc))


# ---- plans, buffers, threads ----------------------------------------------------------------

def test_plan_reuse_input_untouched_and_attributes(rng):
    plan = usbeam.RF2IQPlan((3, 128), np.int16, fs=30e6, fc=7e6, t0=1e-6, decimation=4)
    assert plan.n_out == 32 and plan.out_shape == (3, 32) and plan.fs_out == 7.5e6
    assert plan.taps is None and plan.wn == min(2 * 7e6 / 30e6, 0.5)
    out = poisoned(plan.out_shape)
    for _ in range(2):
        rf = random_rf(rng, (3, 128), np.int16)
        copy = rf.copy()
        assert plan(rf, out=out) is out
        np.testing.assert_array_equal(rf, copy)
        assert_close(out, ref.rf2iq_butter(rf, 30e6, 7e6, 1e-6, plan.wn, 5, 4))
        out[...] = NAN_C64


def test_one_plan_from_many_threads(rng):
    plan = usbeam.RF2IQPlan((8, 256), np.float32, fs=20e6, fc=5e6, filter="kaiser")
    inputs = [random_rf(rng, (8, 256), np.float32) for _ in range(6)]
    results = [None] * len(inputs)

    def work(i):
        for _ in range(5):
            results[i] = plan(inputs[i])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for rf, got in zip(inputs, results):
        assert_close(got, ref.rf2iq_fir(rf, 20e6, 5e6, plan.taps))


# ---- bad input ----------------------------------------------------------------------------

GOOD = dict(fs=20e6, fc=5e6)


@pytest.mark.parametrize("bad, exc, word", [
    (dict(fs=0.0), ValueError, "fs"),
    (dict(fs=-1e6), ValueError, "fs"),
    (dict(fs=float("nan")), ValueError, "fs"),
    (dict(fs=float("inf")), ValueError, "fs"),
    (dict(fc=0.0), ValueError, "fc"),
    (dict(fc=float("nan")), ValueError, "fc"),
    (dict(fc=-float("inf")), ValueError, "fc"),
    (dict(fc="5e6"), TypeError, "fc"),
    (dict(t0=float("nan")), ValueError, "t0"),
    (dict(t0=float("inf")), ValueError, "t0"),
    (dict(bandwidth=0.0), ValueError, "bandwidth"),
    (dict(bandwidth=-0.1), ValueError, "bandwidth"),
    (dict(bandwidth=15.0), ValueError, "bandwidth.*fraction"),
    (dict(bandwidth=2.0), ValueError, "bandwidth"),
    (dict(bandwidth=float("nan")), ValueError, "bandwidth"),
    (dict(fs=5e6, fc=5e6, bandwidth=1.5), ValueError, "bandwidth.*Wn"),
    (dict(cutoff=10e6), ValueError, "cutoff.*Wn"),
    (dict(cutoff=-1.0), ValueError, "cutoff"),
    (dict(cutoff=1e6, bandwidth=0.5), ValueError, "bandwidth or cutoff"),
    (dict(order=0), ValueError, "order"),
    (dict(order=17), ValueError, "order"),
    (dict(order=2.5), TypeError, "order"),
    (dict(decimation=0), ValueError, "decimation"),
    (dict(decimation=-2), ValueError, "decimation"),
    (dict(decimation=1.5), TypeError, "decimation"),
    (dict(filter="cheby"), ValueError, "filter"),
    (dict(filter=3.0), TypeError, "filter"),
    (dict(filter="kaiser", cutoff=10e6), ValueError, "cutoff"),
    (dict(filter="kaiser", cutoff=12e6), ValueError, "cutoff"),
    (dict(filter="kaiser", bandwidth=1.9, fs=8e6), ValueError, "bandwidth.*fs/2"),
    (dict(filter="kaiser", bandwidth=0.5, cutoff=1e6), ValueError, "bandwidth or cutoff"),
    (dict(filter="kaiser", transition_width=0.0), ValueError, "transition_width"),
    (dict(filter="kaiser", transition_width=1.0), ValueError, "transition_width"),
    (dict(filter="kaiser", attenuation=5.0), ValueError, "attenuation"),
    (dict(filter="kaiser", attenuation=float("nan")), ValueError, "attenuation"),
    (dict(filter="butter", transition_width=1e6), ValueError, "transition_width"),
    (dict(filter=np.array([])), ValueError, "taps"),
    (dict(filter=np.array([1.0, np.nan])), ValueError, "taps"),
    (dict(filter=np.array([1.0, np.inf * 1j])), ValueError, "taps"),
    (dict(filter=np.ones((2, 3))), ValueError, "taps"),
    (dict(filter=np.array(["a", "b"])), TypeError, "taps"),
    (dict(filter=np.ones(5), cutoff=1e6), ValueError, "cutoff"),
])
def test_bad_parameters(rng, bad, exc, word):
    kwargs = dict(GOOD)
    kwargs.update(bad)
    with pytest.raises(exc, match=word):
        usbeam.rf2iq(random_rf(rng, (2, 100), np.float32), **kwargs)


def test_bad_arrays(rng):
    with pytest.raises(TypeError, match="rf"):
        usbeam.rf2iq(np.ones((2, 100), np.int32), **GOOD)
    with pytest.raises(TypeError, match="rf"):
        usbeam.rf2iq(np.ones((2, 100), np.complex64), **GOOD)
    with pytest.raises(TypeError, match="rf"):
        usbeam.rf2iq(np.ones((2, 100), bool), **GOOD)
    with pytest.raises(TypeError, match="rf"):
        usbeam.rf2iq("not an array", **GOOD)
    with pytest.raises(ValueError, match="dimension"):
        usbeam.rf2iq(np.float32(1.0), **GOOD)
    with pytest.raises(ValueError, match="empty"):
        usbeam.rf2iq(np.ones((0, 100), np.float32), **GOOD)
    with pytest.raises(ValueError, match="empty"):
        usbeam.rf2iq(np.ones((3, 0), np.float32), **GOOD)
    with pytest.raises(ValueError, match="n_samples"):
        usbeam.rf2iq(np.ones((3, 18), np.float32), **GOOD)  # filtfilt pads 18 samples
    rf = random_rf(rng, (2, 100), np.float32)
    with pytest.raises(TypeError, match="out"):
        usbeam.rf2iq(rf, **GOOD, out=np.empty((2, 100), np.complex128))
    with pytest.raises(ValueError, match="out"):
        usbeam.rf2iq(rf, **GOOD, out=np.empty((2, 99), np.complex64))
    with pytest.raises(ValueError, match="out"):
        usbeam.rf2iq(rf, **GOOD, decimation=2, out=np.empty((2, 100), np.complex64))
    read_only = np.empty((2, 100), np.complex64)
    read_only.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        usbeam.rf2iq(rf, **GOOD, out=read_only)
    with pytest.raises(ValueError, match="contiguous"):
        usbeam.rf2iq(rf, **GOOD, out=np.empty((2, 200), np.complex64)[:, ::2])
    with pytest.raises(TypeError, match="out"):
        usbeam.rf2iq(rf, **GOOD, out=[0] * 200)
    plan = usbeam.RF2IQPlan((2, 100), np.float32, **GOOD)
    with pytest.raises(TypeError, match="rf"):
        plan(rf.astype(np.float64))
    with pytest.raises(ValueError, match="rf"):
        plan(rf[:, :50])
    with pytest.raises(TypeError, match="dtype"):
        usbeam.RF2IQPlan((2, 100), np.uint8, **GOOD)


def test_out_sharing_memory_with_rf_is_rejected():
    buffer = np.zeros(2 * 100 * 2, np.float32)
    rf = buffer.view(np.float32)[:200].reshape(2, 100)
    out = buffer.view(np.complex64).reshape(2, 100)
    with pytest.raises(ValueError, match="out"):
        usbeam.RF2IQPlan((2, 100), np.float32, **GOOD)(rf, out=out)


def test_sizes_too_large_for_memory():
    with pytest.raises(MemoryError, match="out"):
        usbeam.RF2IQPlan((10**7, 10**6), np.int16, **GOOD)


def test_binding_rejects_bad_buffers_without_crashing(rng):
    plan = usbeam._core.rf2iq_plan(2, 64, "float32", 20e6, 5e6, wn=0.5)
    rf = random_rf(rng, (2, 64), np.float32)
    with pytest.raises(TypeError, match="rf"):
        usbeam._core.rf2iq_execute(plan, rf.astype(np.float64), np.zeros((2, 64), np.complex64))
    with pytest.raises(ValueError, match="out"):
        usbeam._core.rf2iq_execute(plan, rf, np.zeros((2, 63), np.complex64))
    with pytest.raises(ValueError, match="rf"):
        usbeam._core.rf2iq_execute(plan, rf[:, ::2].copy(), np.zeros((2, 64), np.complex64))
    with pytest.raises(TypeError, match="plan"):
        usbeam._core.rf2iq_execute(object(), rf, np.zeros((2, 64), np.complex64))
    with pytest.raises(ValueError, match="Wn"):
        usbeam._core.rf2iq_plan(2, 64, "float32", 20e6, 5e6, wn=1.0)
    with pytest.raises(ValueError, match="taps"):
        usbeam._core.rf2iq_plan(2, 64, "float32", 20e6, 5e6, filter="taps", taps_re=np.zeros(0))
    with pytest.raises(ValueError, match="fs"):
        usbeam._core.rf2iq_plan(2, 64, "float32", float("nan"), 5e6, wn=0.5)
    with pytest.raises(ValueError, match="decimation"):
        usbeam._core.rf2iq_plan(2, 64, "float32", 20e6, 5e6, wn=0.5, decimation=0)
    with pytest.raises(TypeError, match="dtype"):
        usbeam._core.rf2iq_plan(2, 64, "int8", 20e6, 5e6, wn=0.5)
    with pytest.raises(ValueError, match="order"):
        usbeam._core.butter_lowpass(0, 0.3)
    with pytest.raises(ValueError, match="attenuation"):
        usbeam._core.kaiser_lowpass(20e6, 1e6, 1e6, 3.0)
