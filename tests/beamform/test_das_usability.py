"""A researcher's first hour (issue 15), beamforming: no silent wrong images, one shape rule,
plans built from a recording, defaults and string options, reprs.

Each case of the issue is reproduced on PWI_disk (skipped when ../shared/datasets is absent)
and on synthetic data from usbeam.simulate_rf, and must now give the right image or a
ValueError naming the likely cause.
"""
import math

import numpy as np
import pytest

import usbeam
from conftest import shared_dataset
from tolerances import TOLERANCES

X_GRID = np.linspace(-12.5e-3, 12.5e-3, 251)
Z_GRID = np.linspace(10e-3, 35e-3, 251)
FS, FC, C = 20e6, 5e6, 1540.0


@pytest.fixture(scope="module")
def disk():
    rec = usbeam.load_must(shared_dataset("PWI_disk.mat"))
    return rec


@pytest.fixture(scope="module")
def golden():
    import scipy.io

    return scipy.io.loadmat(shared_dataset("bmode_PWI_disk.mat"))["I"].transpose(2, 0, 1)  # (frame, z, x)


@pytest.fixture(scope="module")
def synthetic():
    """Three point scatterers under a 64-element probe, 0-degree plane wave, 2 frames:
    RF (2, 64, 700) float32 in usbeam's layout and its grid."""
    probe = usbeam.LinearArray(64, 3e-4, width=2.7e-4)
    points = np.array([[-2e-3, 0.0, 8e-3], [0.0, 0.0, 12e-3], [2e-3, 0.0, 16e-3]])
    rf = usbeam.simulate_rf(np.stack([points, points]), np.ones(3), probe, usbeam.PlaneWave(0.0), fs=FS, fc=FC,
                            c=C, n_samples=700)[:, 0].astype(np.float32)
    grid = usbeam.Grid(x=np.linspace(-4e-3, 4e-3, 41), z=np.linspace(5e-3, 20e-3, 61))
    return probe, rf, grid


def rho(a, b):
    return np.corrcoef(a.ravel().astype(float), b.ravel().astype(float))[0, 1]


# ---- silent wrong images are now errors ------------------------------------------------------

def test_matlab_layout_rf_is_refused_pwi_disk(disk):
    # scipy.io.loadmat(...)["RF"] is (334 samples, 128 elements, 32 frames): it used to give a
    # (334, 251, 251) image, 97 % exact zeros, without a word
    import scipy.io

    raw = scipy.io.loadmat(shared_dataset("PWI_disk.mat"))["RF"]
    assert raw.shape == (334, 128, 32)
    grid = usbeam.Grid(x=X_GRID, z=Z_GRID)
    kw = dict(fs=disk.fs, fc=disk.fc, c=disk.c, t0=disk.t0)
    with pytest.raises(ValueError, match=r"MATLAB layout \(samples, elements, frames\): pass data\.T"):
        usbeam.das(raw, disk.probe, disk.sequence, grid, **kw)
    # through rf2iq first (IQ may legitimately be short): the grid check refuses the empty image
    iq = usbeam.rf2iq(raw, fs=disk.fs, fc=disk.fc, t0=disk.t0)
    with pytest.raises(ValueError, match=r"only \d+ % of the grid's pixels.*MATLAB layout.*pass rf\.T"):
        usbeam.das(iq, disk.probe, disk.sequence, grid, **kw)
    # a plan built for the recording, given the MATLAB array: the shape does not fit, and the
    # message says why
    bf = usbeam.Beamformer.from_recording(disk, grid)
    with pytest.raises(ValueError, match=r"MATLAB layout.*pass data\.T"):
        bf(raw)
    # what the message says to do gives the recording's image
    np.testing.assert_array_equal(bf(raw.T), bf(disk.data))


def test_matlab_layout_synthetic(synthetic):
    probe, rf, grid = synthetic
    kw = dict(fs=FS, fc=FC, c=C)
    good = usbeam.das(rf, probe, usbeam.PlaneWave(0.0), grid, **kw)
    assert good.shape == (2,) + grid.shape
    iz, ix = np.unravel_index(np.argmax(np.abs(good[0])), grid.shape)   # the brightest pixel is a scatterer
    assert min(np.hypot(grid.x[ix] - px, grid.z[iz] - pz) for px, pz in ((-2e-3, 8e-3), (0, 12e-3), (2e-3, 16e-3))) \
        < 0.5e-3
    with pytest.raises(ValueError, match=r"700 samples|MATLAB layout"):
        usbeam.das(rf.T, probe, usbeam.PlaneWave(0.0), grid, **kw)
    bf = usbeam.Beamformer(probe, usbeam.PlaneWave(0.0), grid, n_samples=700, dtype=np.float32, n_frames=2, **kw)
    with pytest.raises(ValueError, match=r"MATLAB layout \(samples, elements, frames\): pass data\.T"):
        bf(np.ascontiguousarray(rf.T))
    with pytest.raises(ValueError, match=r"MATLAB layout"):
        bf(np.ascontiguousarray(rf[0].T))  # one frame, (samples, elements)


@pytest.mark.parametrize("name", ["fs", "fc"])
def test_frequencies_in_mhz_are_refused(disk, name):
    # fs=6.67, fc=5 (MHz by mistake) used to be accepted
    grid = usbeam.Grid(x=X_GRID, z=Z_GRID)
    wrong = {"fs": 6.67, "fc": 5.0}[name]
    pattern = rf"{name} = {wrong:g} Hz is below 1 kHz: frequencies are in Hz \(SI\), not MHz"
    with pytest.raises(ValueError, match=pattern):
        usbeam.Beamformer.from_recording(disk, grid, **{name: wrong})
    kw = dict(fs=disk.fs, fc=disk.fc, t0=disk.t0, c=disk.c, n_samples=334, n_frames=32)
    kw[name] = wrong
    for build in (lambda: usbeam.Pipeline(disk.probe, disk.sequence, grid, **kw),
                  lambda: usbeam.DopplerPipeline(disk.probe, disk.sequence, grid, prf=1e4, **kw),
                  lambda: usbeam.rf2iq(disk.data, fs=kw["fs"], fc=kw["fc"], t0=disk.t0)):
        with pytest.raises(ValueError, match=pattern):
            build()
    # 1 kHz exactly is the limit, not an error (nothing real is sampled slower)
    assert usbeam._validate.frequency("fs", 1e3) == 1e3


def test_grid_in_mm_is_refused(disk, synthetic):
    # a grid given in millimetres gave an all-zero image
    mm = usbeam.Grid(x=X_GRID * 1e3, z=Z_GRID * 1e3)
    with pytest.raises(ValueError, match=r"grid x reaches 12\.5 m from the array: grid coordinates are in "
                                         r"metres \(SI\), not mm"):
        usbeam.Beamformer.from_recording(disk, mm)
    probe, rf, grid = synthetic
    with pytest.raises(ValueError, match="not mm"):
        usbeam.das(rf, probe, usbeam.PlaneWave(0.0), usbeam.Grid(x=grid.x, z=grid.z * 1e3), fs=FS, fc=FC)
    with pytest.raises(ValueError, match="grid points reaches"):
        usbeam.das(rf, probe, usbeam.PlaneWave(0.0), usbeam.Grid.points([[0.0, 0.0, 12.0]]), fs=FS, fc=FC)
    with pytest.raises(ValueError, match=r"probe reaches .* element positions \(pitch\) are in metres"):
        usbeam.das(rf, usbeam.LinearArray(64, 0.3), usbeam.PlaneWave(0.0), grid, fs=FS, fc=FC)
    with pytest.raises(ValueError, match="c = 1.54 m/s is not a speed of sound"):
        usbeam.das(rf, probe, usbeam.PlaneWave(0.0), grid, fs=FS, fc=FC, c=1.54)


def test_mostly_empty_image_is_refused_and_can_be_allowed(synthetic):
    probe, rf, grid = synthetic
    # a record too short for the grid (t0 wrong by 10 us): almost no pixel receives a sample
    bf_kw = dict(fs=FS, fc=FC, c=C, n_samples=700, dtype=np.float32, n_frames=2)
    with pytest.raises(ValueError, match=r"only \d+ % of the grid's pixels \(of \d+ checked\) receive any "
                                         r"recorded sample.*min_coverage=0"):
        usbeam.Beamformer(probe, usbeam.PlaneWave(0.0), grid, t0=30e-6, **bf_kw)
    # min_coverage=0: the documented exception (a display grid deeper than a short record)
    bf = usbeam.Beamformer(probe, usbeam.PlaneWave(0.0), grid, t0=30e-6, min_coverage=0, **bf_kw)
    assert bf.coverage is None and not bf(rf).any()
    # the fraction is the record's reach: half the depth range covered -> about half the pixels
    n = int(round((2 * 12.5e-3 / C) * FS))  # samples reaching z = 12.5 mm, the grid's middle depth
    frac, _, _ = usbeam.beamformer.grid_coverage(probe, (usbeam.PlaneWave(0.0),), grid, fs=FS, c=C, t0=0.0,
                                                 n_samples=n)
    assert 0.45 <= frac <= 0.6
    assert usbeam.Beamformer(probe, usbeam.PlaneWave(0.0), grid, **bf_kw).coverage == 1.0


# ---- one shape rule ---------------------------------------------------------------------------

def test_shape_rule_leading_axes_kept(synthetic):
    probe, rf, grid = synthetic
    iq = usbeam.rf2iq(rf, fs=FS, fc=FC)
    bf = usbeam.Beamformer(probe, usbeam.PlaneWave(0.0), grid, fs=FS, fc=FC, c=C, n_samples=700, n_frames=2)
    both = bf(iq)
    assert both.shape == (2,) + grid.shape
    # bf(iq[:1]) used to return (nz, nx) while bf(iq[:2]) returned (2, nz, nx)
    assert bf(iq[:1]).shape == (1,) + grid.shape
    tol = dict(rtol=0, atol=1e-5 * np.abs(both).max())  # another batch size may sum in another order
    np.testing.assert_allclose(bf(iq[:1])[0], both[0], **tol)
    assert bf(iq[0]).shape == grid.shape                                 # (elements, samples): no axis
    assert bf(iq[:, None]).shape == (2,) + grid.shape                    # explicit transmit axis
    assert bf(iq[None, :, None]).shape == (1, 2) + grid.shape            # more leading axes
    np.testing.assert_allclose(bf(iq[None, :, None])[0], both, **tol)
    batches = np.stack([iq, iq])[:, :, None]   # (2, 2, 1, el, samples): 4-D and longer name the transmit axis
    np.testing.assert_allclose(bf(batches)[1], both, **tol)
    with pytest.raises(ValueError, match=r"has 2 transmits .*\(\.\.\., 1, n_elements, n_samples\)"):
        bf(np.stack([iq, iq]))
    out = np.empty((1, 2) + grid.shape, np.complex64)
    assert bf(iq[None, :, None], out=out) is out
    with pytest.raises(ValueError, match="out must have shape"):
        bf(iq[None, :, None], out=np.empty((2,) + grid.shape, np.complex64))
    # with several transmits the transmit axis is required and summed away
    seq = [usbeam.PlaneWave(0.0), usbeam.PlaneWave(0.0)]
    bf2 = usbeam.Beamformer(probe, seq, grid, fs=FS, fc=FC, c=C, n_samples=700, n_frames=2)
    two = np.stack([iq, iq], axis=1)                                     # (2 frames, 2 transmits, ...)
    assert bf2(two).shape == (2,) + grid.shape and bf2(two[0]).shape == grid.shape
    np.testing.assert_allclose(bf2(two), 2 * both, rtol=1e-5, atol=1e-5 * np.abs(both).max())
    with pytest.raises(ValueError, match="has 2 transmits .* but the sequence has 1"):
        bf(two)


def test_rca_keeps_the_frame_axis():
    array = usbeam.RowColumnArray(16, 16, 3e-4)
    grid = usbeam.RCAGrid.bscan(np.linspace(-2e-3, 2e-3, 9), np.linspace(4e-3, 8e-3, 7))
    plan = usbeam.RCABeamformer(array, "forces", grid, n_samples=300, fs=FS)
    data = np.random.default_rng(0).standard_normal((1, 16, 16, 300)).astype(np.float32)
    assert plan(data).shape == (1, 7, 9) and plan(data[0]).shape == (7, 9)


# ---- from a recording --------------------------------------------------------------------------

def test_from_recording_reproduces_the_golden_image(disk, golden):
    # no acquisition parameter by hand: fs, fc, c, t0, bandwidth, geometry, the auto f-number
    grid = usbeam.Grid(x=X_GRID, z=Z_GRID)
    pipeline = usbeam.Pipeline.from_recording(disk, grid, dynamic_range=30, interpolation="nearest")
    image = pipeline(disk.data)
    assert image.shape == golden.shape
    r = [rho(image[k], golden[k]) for k in range(32)]
    assert min(r) >= TOLERANCES["das_pwi_rho_nearest"]
    assert np.abs(image.astype(int) - golden.astype(int)).max() <= TOLERANCES["das_pwi_max_levels_nearest"]
    # the defaults (linear interpolation) at the linear figure of test_das_real
    image = usbeam.Pipeline.from_recording(disk, grid, dynamic_range=30)(disk.data)
    assert min(rho(image[k], golden[k]) for k in range(32)) >= TOLERANCES["das_pwi_rho_linear"]
    # Beamformer.from_recording on the recording's IQ: the same image
    bf = usbeam.Beamformer.from_recording(disk, grid, dtype=np.complex64, interpolation="nearest")
    assert (bf.fs, bf.fc, bf.c, bf.t0, bf.n_samples, bf.n_frames) == (disk.fs, disk.fc, disk.c, disk.t0, 334, 32)
    assert bf.f_number == pytest.approx(1.1248, abs=1e-4)
    iq = usbeam.rf2iq(disk.data, fs=disk.fs, fc=disk.fc, t0=disk.t0, bandwidth=disk.bandwidth)
    image = usbeam.bmode(bf(iq), 30)
    assert min(rho(image[k], golden[k]) for k in range(32)) >= TOLERANCES["das_pwi_rho_nearest"]


def test_forgetting_t0_or_c_is_what_from_recording_prevents(disk, golden):
    # The measurement, kept as the reason for from_recording (t0 and c keep their
    # defaults, documented in Beamformer's docstring): a plan built by hand without t0 or c
    # gives a wrong image that no check can tell from a right one.
    grid = usbeam.Grid(x=X_GRID, z=Z_GRID)
    iq = usbeam.rf2iq(disk.data[:4], fs=disk.fs, fc=disk.fc, t0=disk.t0, bandwidth=disk.bandwidth)
    hand = dict(fs=disk.fs, fc=disk.fc, n_samples=334, f_number="auto", interpolation="nearest", n_frames=4)
    no_t0 = usbeam.bmode(usbeam.Beamformer(disk.probe, disk.sequence, grid, c=disk.c, **hand)(iq), 30)
    no_c = usbeam.bmode(usbeam.Beamformer(disk.probe, disk.sequence, grid, t0=disk.t0, **hand)(iq), 30)
    assert rho(no_t0[0], golden[0]) < 0.3 and rho(no_c[0], golden[0]) < 0.9
    right = usbeam.bmode(usbeam.Beamformer.from_recording(disk, grid, dtype=np.complex64, n_frames=4,
                                                           interpolation="nearest")(iq), 30)
    assert rho(right[0], golden[0]) >= TOLERANCES["das_pwi_rho_nearest"]


def test_from_recording_takes_to_recording_objects(synthetic):
    probe, rf, grid = synthetic
    rec = usbeam.io.Recording(data=rf, probe=probe, sequence=(usbeam.PlaneWave(0.0),), fs=FS, fc=FC, c=1500.0,
                              t0=1e-7, prf=5e3)

    class Workspace:  # what a reader's own object (a Vantage workspace) offers
        def to_recording(self):
            return rec

    bf = usbeam.Beamformer.from_recording(Workspace(), grid)
    assert (bf.dtype, bf.n_frames, bf.c, bf.t0, bf.f_number) == (np.float32, 2, 1500.0, 1e-7, bf.f_number)
    assert bf.f_number == pytest.approx(usbeam.auto_f_number(probe.width, FC, 0.75, 1500.0))
    want = usbeam.das(rf, probe, usbeam.PlaneWave(0.0), grid, fs=FS, fc=FC, c=1500.0, t0=1e-7, f_number="auto")
    np.testing.assert_array_equal(bf(rf), want)
    assert usbeam.Beamformer.from_recording(rec, grid, f_number=0).f_number == 0  # overrides win
    with pytest.raises(TypeError, match="to_recording"):
        usbeam.Beamformer.from_recording({"data": rf}, grid)


# ---- defaults and options ----------------------------------------------------------------------

def test_f_number_none_means_auto_and_options_ignore_case(synthetic):
    probe, rf, grid = synthetic
    kw = dict(fs=FS, fc=FC, c=C, n_samples=700, dtype=np.float32)
    auto = usbeam.Beamformer(probe, usbeam.PlaneWave(0.0), grid, f_number="auto", **kw)
    assert usbeam.Beamformer(probe, usbeam.PlaneWave(0.0), grid, f_number=None, **kw).f_number == auto.f_number
    assert usbeam.Beamformer(probe, usbeam.PlaneWave(0.0), grid, f_number="AUTO", **kw).f_number == auto.f_number
    mixed = usbeam.Beamformer(probe, usbeam.PlaneWave(0.0), grid, window="Hann", interpolation="Cubic",
                              backend="CPU", **kw)
    assert (mixed.window, mixed.interpolation, mixed.backend) == ("hann", "cubic", "cpu")
    lower = usbeam.Beamformer(probe, usbeam.PlaneWave(0.0), grid, window="hann", interpolation="cubic", **kw)
    np.testing.assert_array_equal(mixed(rf), lower(rf))
    with pytest.raises(ValueError, match="window must be one of 'rect', 'hann', 'tukey'"):
        usbeam.Beamformer(probe, usbeam.PlaneWave(0.0), grid, window="hanning", **kw)
    with pytest.raises(TypeError, match=r"'auto'"):
        usbeam.Beamformer(probe, usbeam.PlaneWave(0.0), grid, f_number=[1.0], **kw)
    # RCA has no automatic f-number: None is refused naming 'auto'
    array = usbeam.RowColumnArray(16, 16, 3e-4)
    rca_grid = usbeam.RCAGrid.bscan(np.linspace(-2e-3, 2e-3, 9), np.linspace(4e-3, 8e-3, 7))
    with pytest.raises(TypeError, match="no 'auto' f-number"):
        usbeam.RCABeamformer(array, "forces", rca_grid, n_samples=300, fs=FS, f_number=None)
    plan = usbeam.RCABeamformer(array, "FORCES", rca_grid, n_samples=300, fs=FS, window="Rect",
                                interpolation="Linear")
    assert (plan.method, plan.window, plan.interpolation) == ("forces", "rect", "linear")
    # other families' options
    assert usbeam.ModelInputPlan((64, 64), 32, layout="NCHW").layout == "nchw"
    assert usbeam.ClutterFilter((8, 10), "SVD").method == "svd"
    assert usbeam.BModePlan((3, 4), 40, output="dB", normalize="Frame").output == "db"
    assert usbeam.ModelInputPlan((8, 8), 4, dtype="Float16", layout="NHWC", channels=3).dtype == np.float16
    np.testing.assert_array_equal(usbeam.RCAGrid.bscan([0, 1e-3], [1e-3, 2e-3], plane="YZ").voxel_transform,
                                  usbeam.RCAGrid.bscan([0, 1e-3], [1e-3, 2e-3], plane="yz").voxel_transform)
    assert usbeam.live.SimulatedScanner(lambda f: 0, 10.0, np.zeros((2, 3, 4)), layout="Mapped").layout == "mapped"


def test_defaults_per_family_are_documented():
    # one reason per family, written where the defaults are (README "Using it" points here)
    import inspect

    bf = inspect.signature(usbeam.Beamformer).parameters
    rca = inspect.signature(usbeam.RCABeamformer).parameters
    assert (bf["interpolation"].default, bf["window"].default) == ("linear", "rect")
    assert (rca["interpolation"].default, rca["window"].default) == ("cubic", "hann")
    assert "dasmtx" in usbeam.Beamformer.__doc__ and "RCABeamformer" in usbeam.Beamformer.__doc__
    assert "loses amplitude" in usbeam.RCABeamformer.__doc__


def test_linear_interpolation_loses_rf_amplitude_as_documented():
    # the RCA default's reason, measured: a carrier at 4 samples per period read halfway between
    # samples keeps cos(pi/4) = 0.71 of its amplitude with linear and 0.88 with Catmull-Rom cubic
    probe = usbeam.LinearArray(1, 3e-4)
    fs, fc, c = 20e6, 5e6, 1540.0
    n = np.arange(400)
    rf = np.cos(2 * np.pi * fc * n / fs).astype(np.float32)[None, None]       # (1 frame, 1 element, n)
    t = 200.5 / fs                                                           # halfway between samples
    grid = usbeam.Grid.points([[0.0, 0.0, c * t / 2]])
    peaks = {}
    for method in ("linear", "cubic"):
        values = []
        for phase in np.linspace(0, 2 * np.pi, 16, endpoint=False):
            data = np.cos(2 * np.pi * fc * n / fs + phase).astype(np.float32)[None, None]
            values.append(usbeam.das(data, probe, usbeam.SyntheticAperture(0), grid, fs=fs, fc=fc, c=c, f_number=0,
                                     interpolation=method)[0, 0])
        peaks[method] = max(np.abs(values))
    assert rf.shape == (1, 1, 400)
    assert peaks["linear"] == pytest.approx(math.cos(math.pi / 4), abs=0.02)
    assert peaks["cubic"] == pytest.approx(0.884, abs=0.02)


# ---- Jupyter -----------------------------------------------------------------------------------

def test_reprs_name_parameters_not_addresses(disk):
    grid = usbeam.Grid(x=X_GRID, z=Z_GRID)
    texts = [repr(usbeam.Beamformer.from_recording(disk, grid)), repr(disk), disk._repr_html_(),
             repr(usbeam.RCABeamformer(usbeam.RowColumnArray(16, 16, 3e-4), "forces",
                                       usbeam.RCAGrid.bscan(np.linspace(-2e-3, 2e-3, 9),
                                                            np.linspace(4e-3, 8e-3, 7)), n_samples=300, fs=FS)),
             repr(usbeam.RF2IQPlan(disk.data.shape, np.int16, fs=disk.fs, fc=disk.fc)),
             repr(usbeam.BModePlan((2, 3), 40)), repr(usbeam.ClutterFilter((8, 10))),
             repr(usbeam.ColorDopplerPlan((8, 10), fc=FC, prf=1e3, c=C)), repr(usbeam.PowerDopplerPlan((8, 10))),
             repr(usbeam.DopplerDisplay((8, 10))), repr(usbeam.HadamardDecodePlan((8, 2, 3), 8, axis=0)),
             repr(usbeam.ModelInputPlan((64, 64), 32)), repr(usbeam.DetectPlan((1, 10, 7))),
             repr(usbeam.ComponentsPlan((4, 4)))]
    for text in texts:
        assert "object at 0x" not in text and (len(text) < 600 or text.startswith("<table>")), text
    assert "int16(32, 128, 334)" in repr(disk) and "t0=9.95 us" in repr(disk)     # data by shape, never values
    assert "t0=9.95 us" in texts[0] and "c=1480 m/s" in texts[0] and "f_number=1.125" in texts[0]
    assert "<table>" in texts[2] and "6.66667 MHz" in texts[2]


def test_rca_plausibility_checks():
    array = usbeam.RowColumnArray(32, 32, 3e-4)
    grid = usbeam.RCAGrid.bscan(np.linspace(-3e-3, 3e-3, 13), np.linspace(5e-3, 15e-3, 21))
    kw = dict(n_samples=600, fs=FS)
    assert usbeam.RCABeamformer(array, "forces", grid, **kw).n_samples == 600
    with pytest.raises(ValueError, match="fs = 20 Hz is below 1 kHz"):
        usbeam.RCABeamformer(array, "forces", grid, n_samples=600, fs=20.0)
    with pytest.raises(ValueError, match="fc = 5 Hz is below 1 kHz"):
        usbeam.RCABeamformer(array, "forces", grid, data="iq", fc=5.0, **kw)
    mm = usbeam.RCAGrid.bscan(np.linspace(-3, 3, 13), np.linspace(5, 15, 21))
    with pytest.raises(ValueError, match="grid reaches 15 m from the array.*not mm"):
        usbeam.RCABeamformer(array, "forces", mm, **kw)
    with pytest.raises(ValueError, match=r"16 samples per channel, fewer than its 32 elements.*MATLAB layout"):
        usbeam.RCABeamformer(array, "forces", grid, n_samples=16, fs=FS)
    # the record reaches 2 z / c <= 299 / fs: z <= 11.5 mm, about 2/3 of the depths (accepted);
    # a t0 of 30 us starts the record after (almost) every echo of the grid (the bound on the
    # latest echo is generous: 11 % of the voxels stay "covered")
    with pytest.raises(ValueError, match=r"only \d+ % of the grid's pixels"):
        usbeam.RCABeamformer(array, "forces", grid, n_samples=300, fs=FS, t0=30e-6)
    assert usbeam.RCABeamformer(array, "forces", grid, n_samples=300, fs=FS, t0=30e-6, min_coverage=0)
    assert usbeam.RCABeamformer(array, "forces", grid, n_samples=300, fs=FS)
    with pytest.raises(ValueError, match="c = 1.54 m/s"):
        usbeam.RCABeamformer(array, "forces", grid, c=1.54, **kw)
