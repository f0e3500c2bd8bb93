"""Adaptive beamformers (usbeam.adaptive via Beamformer(method=...)) against the float64
references of tests/reference/adaptive.py, written from each paper's formula, on fresh random
channel data; bad input named."""
import numpy as np
import pytest

import usbeam
from reference import adaptive as ref
from tolerances import TOLERANCES

FC, FS, C = 5e6, 25e6, 1540.0
N_EL, PITCH = 16, 0.3e-3
ANGLES = (-0.08, 0.05)
N_SAMPLES = 400


def setup(rng, dtype, n_frames=2):
    probe = usbeam.LinearArray(N_EL, PITCH)
    grid = usbeam.Grid(x=np.linspace(-2e-3, 2.5e-3, 5), z=np.linspace(5e-3, 9e-3, 6))
    shape = (n_frames, len(ANGLES), N_EL, N_SAMPLES)
    if dtype == np.int16:
        data = rng.integers(-3000, 3000, shape).astype(np.int16)
    elif dtype == np.complex64:
        data = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)
    else:
        data = rng.standard_normal(shape).astype(np.float32)
    return probe, grid, data


def run(method, rng, dtype, *, f_number=0.0, window="rect", interpolation="linear", **options):
    probe, grid, data = setup(rng, dtype)
    t0 = 1e-6
    bf = usbeam.Beamformer(probe, [usbeam.PlaneWave(a) for a in ANGLES], grid, fs=FS, fc=FC, c=C, t0=t0,
                           n_samples=N_SAMPLES, f_number=f_number, window=window, interpolation=interpolation,
                           dtype=dtype, n_frames=data.shape[0], method=method, **options)
    before = data.copy()
    got = bf(data)
    assert np.array_equal(data, before)  # input untouched
    expected = ref.beamform(method, data, probe.x, [("plane", a) for a in ANGLES], grid.coordinates(), fs=FS, fc=FC,
                            c=C, t0=t0, f_number=f_number, window_kind=window, interpolation=interpolation,
                            **options)
    return got.reshape(data.shape[0], -1), expected


def rel_l2(got, expected):
    return np.linalg.norm(got - expected) / np.linalg.norm(expected)


CASES = [
    ("cf", {}), ("gcf", {"gcf_m0": 2}), ("gcf", {"gcf_m0": 0}), ("dmas", {}), ("pdas", {"p": 2.0}),
    ("pdas", {"p": 3.5}), ("fdmas", {"fdmas_half_taps": 6}), ("fdmas", {"fdmas_band": (4e6, 16e6), "fdmas_half_taps": 3}),
    ("mv", {"subarray_length": 6, "diagonal_loading": 0.05}),
    ("mv", {"subarray_fraction": 0.5, "diagonal_loading": 0.01, "temporal_averaging": 2}),
]


@pytest.mark.parametrize("method, options", CASES, ids=[f"{m}-{i}" for i, (m, _) in enumerate(CASES)])
@pytest.mark.parametrize("dtype", [np.float32, np.complex64, np.int16], ids=["rf", "iq", "int16"])
def test_against_reference(method, options, dtype, rng):
    got, expected = run(method, rng, dtype, **options)
    assert got.dtype == (np.complex64 if dtype == np.complex64 else np.float32)
    assert rel_l2(got, expected) < TOLERANCES["adaptive_rel_l2"]


@pytest.mark.parametrize("method, options", [("cf", {}), ("dmas", {}), ("mv", {"subarray_fraction": 0.5}),
                                             ("fdmas", {}), ("gcf", {"gcf_m0": 1})])
def test_f_number_window_and_cubic(method, options, rng):
    # apertures differ per point (f-number 1.2), Hann window folded into the element signals
    got, expected = run(method, rng, np.complex64, f_number=1.2, window="hann", interpolation="cubic", **options)
    assert rel_l2(got, expected) < TOLERANCES["adaptive_rel_l2"]


def test_pdas_p1_and_gcf_wide_are_das(rng):
    probe, grid, data = setup(rng, np.complex64)
    kw = dict(fs=FS, fc=FC, c=C, t0=1e-6, n_samples=N_SAMPLES, f_number=0.0, dtype=np.complex64, n_frames=2)
    seq = [usbeam.PlaneWave(a) for a in ANGLES]
    das = usbeam.Beamformer(probe, seq, grid, **kw)(data)
    pdas1 = usbeam.Beamformer(probe, seq, grid, method="pdas", p=1.0, **kw)(data)
    assert rel_l2(pdas1, das) < TOLERANCES["adaptive_rel_l2"]


def test_mv_of_a_single_coherent_wave_is_its_amplitude():
    # identical signals on every element (a wave from the focus): R = |s|^2 1 1^T (+ loading),
    # w = 1 / L whatever the loading, and MV returns s itself (its distortionless constraint)
    probe = usbeam.LinearArray(N_EL, PITCH)
    grid = usbeam.Grid.points([[0.0, 0.0, 6e-3]])
    tau = (6e-3 + np.hypot(probe.x, 6e-3)) / C  # plane wave at 0 + receive path
    # a constant baseband record per element whose phase the IQ rotation exp(+j 2 pi fc tau_e)
    # undoes: every delayed sample is 1 (interpolating a constant is exact)
    data = np.repeat(np.exp(-2j * np.pi * FC * tau)[None, None, :, None], N_SAMPLES, axis=-1).astype(np.complex64)
    kw = dict(fs=FS, fc=FC, c=C, t0=0.0, n_samples=N_SAMPLES, f_number=0.0, dtype=np.complex64)
    mv = usbeam.Beamformer(probe, usbeam.PlaneWave(0.0), grid, method="mv", subarray_length=5, **kw)(data)
    das = usbeam.Beamformer(probe, usbeam.PlaneWave(0.0), grid, **kw)(data)
    assert abs(mv[0] - das[0] / N_EL) < TOLERANCES["adaptive_rel_l2"] * abs(das[0] / N_EL)
    cf = usbeam.Beamformer(probe, usbeam.PlaneWave(0.0), grid, method="cf", **kw)(data)
    assert abs(cf[0] - das[0]) < TOLERANCES["adaptive_rel_l2"] * abs(das[0])  # CF = 1 for equal signals


def test_fdmas_taps_match_the_reference_design():
    probe = usbeam.LinearArray(N_EL, PITCH)
    grid = usbeam.Grid.points([[0.0, 0.0, 6e-3]])
    for dtype, iq in ((np.float32, False), (np.complex64, True)):
        bf = usbeam.Beamformer(probe, usbeam.PlaneWave(0.0), grid, fs=FS, fc=FC, c=C, n_samples=N_SAMPLES,
                               dtype=dtype, method="fdmas", fdmas_half_taps=7)
        taps = usbeam.adaptive.fdmas_taps(bf._plan)
        expected = ref.fdmas_taps(7, FS, FC, FC, 3 * FC, iq)
        np.testing.assert_allclose(taps, expected, rtol=0, atol=1e-14)
        k = np.arange(-7, 8)
        ref_f = 0.0 if iq else 2 * FC  # unit gain at 2 fc (baseband 0 for IQ) ...
        assert abs(np.sum(taps * np.exp(-2j * np.pi * ref_f * k / FS))) == pytest.approx(1.0, abs=1e-12)
        if not iq:  # ... and DC removed on RF (the DMAS products' baseband term)
            assert abs(np.sum(taps)) < 0.05


def test_nan_refused_and_out_untouched(rng):
    probe, grid, data = setup(rng, np.float32)
    data[1, 0, 3, 17] = np.nan
    bf = usbeam.Beamformer(probe, [usbeam.PlaneWave(a) for a in ANGLES], grid, fs=FS, fc=FC, c=C,
                           n_samples=N_SAMPLES, dtype=np.float32, n_frames=2, method="mv", subarray_length=4)
    out = np.full((2,) + grid.shape, 7.0, np.float32)
    with pytest.raises(ValueError, match="data contains NaN"):
        bf(data, out=out)
    assert np.all(out == 7.0)


@pytest.mark.parametrize("kwargs, error, match", [
    ({"method": "mv", "subarray_length": 17}, ValueError, r"subarray_length \(17\) is larger than the aperture \(16"),
    ({"method": "mv", "subarray_length": 0}, ValueError, "subarray_length"),
    ({"method": "mv", "subarray_fraction": 1.5}, ValueError, "subarray_fraction"),
    ({"method": "mv", "subarray_length": 4, "subarray_fraction": 0.5}, ValueError, "not both"),
    ({"method": "mv", "diagonal_loading": -1.0}, ValueError, "diagonal_loading"),
    ({"method": "mv", "temporal_averaging": -1}, ValueError, "temporal_averaging"),
    ({"method": "pdas", "p": 0.5}, ValueError, "p must be"),
    ({"method": "gcf", "gcf_m0": 8}, ValueError, "gcf_m0"),
    ({"method": "fdmas", "fdmas_band": (3e6, 1e6)}, ValueError, "fdmas_band"),
    ({"method": "fdmas", "fdmas_band": "wide"}, TypeError, "fdmas_band"),
    ({"method": "cf", "p": 2.0}, ValueError, "p applies to method 'pdas' only"),
    ({"method": "das", "subarray_length": 4}, ValueError, "subarray_length applies"),
    ({"method": "capon"}, ValueError, "method"),
])
def test_bad_options_are_named(kwargs, error, match):
    probe = usbeam.LinearArray(N_EL, PITCH)
    grid = usbeam.Grid.points([[0.0, 0.0, 6e-3]])
    with pytest.raises(error, match=match):
        usbeam.Beamformer(probe, usbeam.PlaneWave(0.0), grid, fs=FS, fc=FC, c=C, n_samples=N_SAMPLES,
                          dtype=np.float32, **kwargs)


def test_fdmas_on_undersampled_rf_is_refused():
    probe = usbeam.LinearArray(N_EL, PITCH)
    grid = usbeam.Grid.points([[0.0, 0.0, 6e-3]])
    with pytest.raises(ValueError, match="fs >= 4 fc"):
        usbeam.Beamformer(probe, usbeam.PlaneWave(0.0), grid, fs=15e6, fc=FC, c=C, n_samples=N_SAMPLES,
                          dtype=np.float32, method="fdmas")


def test_a_plan_made_under_a_thread_limit_runs_in_a_larger_team(rng):
    """A plan made on an OS thread limited to one thread (usbeam_set_thread_limit, as a live
    session's compute thread) holds scratch for one thread; executed from a thread allowed
    eight, its team stays at the plan's size (it ran eight threads past that scratch before)
    and the image is the one thread's, bit for bit, and the float64 reference's."""
    import threading

    probe, grid, data = setup(rng, np.complex64)
    made, images = {}, {}

    def run_with_limit(threads, key):
        usbeam._core.set_thread_limit(threads)
        if "bf" not in made:
            made["bf"] = usbeam.Beamformer(probe, [usbeam.PlaneWave(a) for a in ANGLES], grid, fs=FS, fc=FC, c=C,
                                           t0=1e-6, n_samples=N_SAMPLES, f_number=0.0, window="rect",
                                           interpolation="linear", dtype=np.complex64, n_frames=data.shape[0],
                                           method="mv", subarray_fraction=0.5, diagonal_loading=0.05)
        images[key] = made["bf"](data)

    for threads, key in ((1, "one"), (8, "eight")):
        worker = threading.Thread(target=run_with_limit, args=(threads, key))
        worker.start()
        worker.join()
    np.testing.assert_array_equal(images["eight"], images["one"])
    expected = ref.beamform("mv", data, probe.x, [("plane", a) for a in ANGLES], grid.coordinates(), fs=FS, fc=FC, c=C,
                            t0=1e-6, f_number=0.0, window_kind="rect", interpolation="linear", subarray_fraction=0.5,
                            diagonal_loading=0.05)
    assert rel_l2(images["one"].reshape(data.shape[0], -1), expected) < TOLERANCES["adaptive_rel_l2"]
