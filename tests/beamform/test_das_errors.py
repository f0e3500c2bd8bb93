"""Bad input to the geometry, the beamformer and the binding: the right exception, naming
the parameter; never a crash or a silent wrong answer."""
import math

import numpy as np
import pytest

import usbeam

NAN, INF = float("nan"), float("inf")


def setup():
    probe = usbeam.LinearArray(8, 3e-4, width=2.5e-4)
    grid = usbeam.Grid(x=np.linspace(-1e-3, 1e-3, 4), z=np.linspace(2e-3, 5e-3, 3))
    kw = dict(fs=20e6, fc=5e6, c=1540.0, t0=0.0, n_samples=100)
    return probe, grid, kw


@pytest.mark.parametrize("make, exc, word", [
    (lambda: usbeam.LinearArray(0, 3e-4), ValueError, "n_elements"),
    (lambda: usbeam.LinearArray(2.5, 3e-4), TypeError, "n_elements"),
    (lambda: usbeam.LinearArray(8, 0.0), ValueError, "pitch"),
    (lambda: usbeam.LinearArray(8, NAN), ValueError, "pitch"),
    (lambda: usbeam.LinearArray(8, 3e-4, width=4e-4), ValueError, "width"),
    (lambda: usbeam.LinearArray(8, 3e-4, width=-1e-4), ValueError, "width"),
    (lambda: usbeam.LinearArray(8, 3e-4, kerf=3e-4), ValueError, "kerf"),
    (lambda: usbeam.LinearArray(8, 3e-4, width=2e-4, kerf=2e-4), ValueError, "width"),
    (lambda: usbeam.LinearArray(8, 3e-4, fc=INF), ValueError, "fc"),
    (lambda: usbeam.LinearArray(8, 3e-4, bandwidth=75), ValueError, "bandwidth"),
    (lambda: usbeam.PlaneWave(math.pi / 2), ValueError, "angle"),
    (lambda: usbeam.PlaneWave(NAN), ValueError, "angle"),
    (lambda: usbeam.PlaneWave("0"), TypeError, "angle"),
    (lambda: usbeam.DivergingWave((0.0, 0.01)), ValueError, "source"),
    (lambda: usbeam.DivergingWave((NAN, -0.01)), ValueError, "source"),
    (lambda: usbeam.DivergingWave((0.0, -0.01, 1.0)), ValueError, "source"),
    (lambda: usbeam.Focused((0.0, -0.01)), ValueError, "focus"),
    (lambda: usbeam.Focused((0.0, 0.0)), ValueError, "focus"),
    (lambda: usbeam.SyntheticAperture(-1), ValueError, "element"),
    (lambda: usbeam.Delays([]), ValueError, "delays"),
    (lambda: usbeam.Delays([NAN, NAN]), ValueError, "delays"),
    (lambda: usbeam.Delays([0.0, INF]), ValueError, "delays"),
    # the firing elements of a line array form one sub-aperture (a matrix array may fire any set)
    (lambda: usbeam.Delays([0.0, NAN, 0.0]).check(usbeam.LinearArray(3, 3e-4)), ValueError, "delays"),
    (lambda: usbeam.Grid(x=[], z=[1e-3]), ValueError, "x"),
    (lambda: usbeam.Grid(x=[0.0], z=[NAN]), ValueError, "z"),
    (lambda: usbeam.Grid(x=np.zeros((2, 2)), z=[1e-3]), ValueError, "x"),
    (lambda: usbeam.Grid(x=[0.0], z=None), ValueError, "z"),
    (lambda: usbeam.Grid(x=[0.0, -1e-3, 1e-3], z=[1e-3]), ValueError, "x must be strictly increasing"),
    (lambda: usbeam.Grid(x=[0.0], z=[2e-3, 1e-3]), ValueError, "z must be strictly increasing"),
    (lambda: usbeam.Grid(x=[0.0], z=[1e-3, 1e-3]), ValueError, "z must be strictly increasing"),
    (lambda: usbeam.Grid(x=[0.0], z=[1e-3], y=[1e-3, 0.0]), ValueError, "y must be strictly increasing"),
    (lambda: usbeam.VolumeGrid(x=[0.0, 1e-3], y=[1e-3, 0.0], z=[1e-3]), ValueError, "y must be strictly increasing"),
    (lambda: usbeam.Grid.points(np.zeros((4, 2))), ValueError, "points"),
    (lambda: usbeam.Grid.points(np.zeros((0, 3))), ValueError, "points"),
    (lambda: usbeam.Grid.points([[0, 0, INF]]), ValueError, "points"),
    (lambda: usbeam.plane_wave_sequence([]), ValueError, "angles"),
])
def test_bad_geometry(make, exc, word):
    with pytest.raises(exc, match=word):
        make()


@pytest.mark.parametrize("bad, exc, word", [
    (dict(fs=0.0), ValueError, "fs"),
    (dict(fs=NAN), ValueError, "fs"),
    (dict(fc=-5e6), ValueError, "fc"),
    (dict(fc=INF), ValueError, "fc"),
    (dict(c=0.0), ValueError, "c"),
    (dict(c=NAN), ValueError, "c"),
    (dict(t0=NAN), ValueError, "t0"),
    (dict(n_samples=0), ValueError, "n_samples"),
    (dict(n_samples=10.5), TypeError, "n_samples"),
    (dict(f_number=-1.0), ValueError, "f_number"),
    (dict(f_number=NAN), ValueError, "f_number"),
    (dict(f_number="best"), ValueError, "f_number"),
    (dict(window="kaiser"), ValueError, "window"),
    (dict(tukey_alpha=1.5), ValueError, "tukey_alpha"),
    (dict(tukey_alpha=NAN), ValueError, "tukey_alpha"),
    (dict(interpolation="sinc"), ValueError, "interpolation"),
    (dict(dtype=np.float64), TypeError, "dtype"),
    (dict(dtype="uint8"), TypeError, "dtype"),
    (dict(n_frames=0), ValueError, "n_frames"),
    (dict(backend="gpu"), ValueError, "backend"),
    (dict(max_table_bytes=-1), ValueError, "max_table_bytes"),
])
def test_bad_beamformer_parameters(bad, exc, word):
    probe, grid, kw = setup()
    kw.update(bad)
    with pytest.raises(exc, match=word):
        usbeam.Beamformer(probe, usbeam.PlaneWave(0.0), grid, **kw)


def test_bad_objects():
    probe, grid, kw = setup()
    with pytest.raises(TypeError, match="probe"):
        usbeam.Beamformer("L11-4v", usbeam.PlaneWave(0.0), grid, **kw)
    with pytest.raises(TypeError, match="grid"):
        usbeam.Beamformer(probe, usbeam.PlaneWave(0.0), np.zeros((3, 3)), **kw)
    with pytest.raises(TypeError, match="sequence"):
        usbeam.Beamformer(probe, 0.1, grid, **kw)
    with pytest.raises(TypeError, match=r"sequence\[1\]"):
        usbeam.Beamformer(probe, [usbeam.PlaneWave(0.0), 0.1], grid, **kw)
    with pytest.raises(ValueError, match="sequence"):
        usbeam.Beamformer(probe, [], grid, **kw)
    with pytest.raises(ValueError, match="element"):
        usbeam.Beamformer(probe, usbeam.SyntheticAperture(8), grid, **kw)
    with pytest.raises(ValueError, match="delays"):
        usbeam.Beamformer(probe, usbeam.Delays(np.zeros(7)), grid, **kw)
    with pytest.raises(ValueError, match="width"):
        usbeam.Beamformer(usbeam.LinearArray(8, 3e-4), usbeam.PlaneWave(0.0), grid, f_number="auto",
                          **{k: v for k, v in kw.items()})


def test_sizes_too_large_for_memory():
    probe, _, kw = setup()
    huge = usbeam.Grid(x=np.linspace(-1e-2, 1e-2, 200_000), z=np.linspace(1e-3, 4e-2, 200_000))
    with pytest.raises(MemoryError, match="grid"):
        usbeam.Beamformer(probe, usbeam.PlaneWave(0.0), huge, **kw)
    _, grid, _ = setup()
    with pytest.raises(MemoryError, match="data"):
        usbeam.Beamformer(probe, usbeam.PlaneWave(0.0), grid, n_frames=10**12, **kw)


def test_bad_data(rng):
    probe, grid, kw = setup()
    bf = usbeam.Beamformer(probe, [usbeam.PlaneWave(0.0), usbeam.PlaneWave(0.1)], grid, n_frames=2, **kw)
    good = (rng.standard_normal((2, 2, 8, 100)) + 0j).astype(np.complex64)
    with pytest.raises(ValueError, match="elements"):
        bf(good[:, :, :7])
    with pytest.raises(ValueError, match="transmits"):
        bf(good[:, :1])
    with pytest.raises(ValueError, match="n_samples|trailing"):
        bf(good[..., :99])
    with pytest.raises(ValueError, match="data"):
        bf(good[0, 0, 0])
    with pytest.raises(TypeError, match="data"):
        bf(good.real.copy())
    with pytest.raises(TypeError, match="data"):
        bf("not data")
    bad = good.copy()
    bad[1, 0, 3, 50] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        bf(bad)
    rf = rng.standard_normal((8, 100)).astype(np.float32)
    rf[5, 99] = np.inf
    out = np.full(grid.shape, 7.0, np.float32)
    with pytest.raises(ValueError, match="infinite"):
        usbeam.Beamformer(probe, usbeam.PlaneWave(0.0), grid, dtype=np.float32, **kw)(rf, out=out)
    assert np.all(np.isnan(out))  # no partial image (as after Ctrl-C)
    with pytest.raises(ValueError, match="empty"):
        usbeam.das(np.zeros((0, 8, 100), np.complex64), probe, usbeam.PlaneWave(0.0), grid, fs=20e6, fc=5e6)
    rf_plan = usbeam.Beamformer(probe, usbeam.PlaneWave(0.0), grid, dtype=np.int16, **kw)
    with pytest.raises(TypeError, match="int16"):
        rf_plan(np.zeros((8, 100), np.float32))
    # a non-contiguous view is accepted (copied), and gives the same result as a copy
    strided = np.zeros((2, 2, 8, 200), np.complex64)[..., ::2]
    strided[...] = good
    np.testing.assert_array_equal(bf(strided), bf(good))


def test_bad_out(rng):
    probe, grid, kw = setup()
    bf = usbeam.Beamformer(probe, usbeam.PlaneWave(0.0), grid, **kw)
    data = (rng.standard_normal((8, 100)) + 0j).astype(np.complex64)
    with pytest.raises(TypeError, match="out"):
        bf(data, out=np.empty(grid.shape, np.float32))
    with pytest.raises(ValueError, match="out"):
        bf(data, out=np.empty((4, 3), np.complex64))
    read_only = np.empty(grid.shape, np.complex64)
    read_only.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        bf(data, out=read_only)
    with pytest.raises(ValueError, match="contiguous"):
        bf(data, out=np.empty((3, 8), np.complex64)[:, ::2])


def test_binding_checks_without_crashing():
    core = usbeam._core
    pos = np.zeros((4, 3))
    pos[:, 0] = np.arange(4) * 3e-4
    pts = np.array([[0.0, 0.0, 3e-3]])
    args = dict(element_positions=pos, transmits=[(0, 0.0, 0.0, 0.0, 0)], points=pts, n_frames=1, n_samples=50,
                fs=20e6, fc=5e6, c=1540.0, t0=0.0, f_number=1.0, window="rect", tukey_alpha=0.5,
                interpolation="linear", dtype="complex64")
    plan = core.das_plan(**args)
    with pytest.raises(TypeError, match="data"):
        core.das_execute(plan, np.zeros(200, np.float32), np.zeros(1, np.complex64))
    with pytest.raises(ValueError, match="data"):
        core.das_execute(plan, np.zeros(199, np.complex64), np.zeros(1, np.complex64))
    with pytest.raises(ValueError, match="out"):
        core.das_execute(plan, np.zeros(200, np.complex64), np.zeros(2, np.complex64))
    with pytest.raises(TypeError, match="plan"):
        core.das_execute(object(), np.zeros(200, np.complex64), np.zeros(1, np.complex64))
    with pytest.raises(ValueError, match="n_frames"):
        core.das_execute(plan, np.zeros(400, np.complex64), np.zeros(2, np.complex64), 2)
    with pytest.raises(ValueError, match="n_frames"):
        core.das_execute(plan, np.zeros(200, np.complex64), np.zeros(1, np.complex64), 0)
    for key, value, exc, word in [
        ("points", np.array([[0.0, NAN, 3e-3]]), ValueError, "points"),
        ("points", np.zeros((2, 2)), ValueError, "points"),
        # elements in any order are a geometry (the general aperture model); bad normals are not
        ("element_normals", np.zeros((4, 3)), ValueError, "element_normals"),
        ("element_normals", np.tile([0.0, 0.0, -1.0], (4, 1)), ValueError, "element_normals"),
        ("element_normals", np.zeros((3, 3)), ValueError, "element_normals"),
        ("surface", 2, ValueError, "surface"),
        ("transmits", [(0, 0.0, 0.0, 0.0, 0, None, 0.0, 2.0)], ValueError, "angle_y"),
        ("transmits", [(2, 0.0, 0.0, 0.01, 0, None, 0.0, 0.0, 0.0, 0.0, 2.0)], ValueError, "axis"),
        ("transmits", [(4, 0.0, 0.0, 0.0, 0, np.zeros((5, 2)))], ValueError, "sources"),
        ("transmits", [(9, 0.0, 0.0, 0.0, 0)], ValueError, "kind"),
        ("transmits", [(0, 2.0, 0.0, 0.0, 0)], ValueError, "angle"),
        ("transmits", [(1, 0.0, 0.0, 0.01, 0)], ValueError, "source"),
        ("transmits", [(2, 0.0, 0.0, -0.01, 0)], ValueError, "focus"),
        ("transmits", [(3, 0.0, 0.0, 0.0, 4)], ValueError, "element"),
        ("transmits", [(4, 0.0, 0.0, 0.0, 0, np.zeros((3, 0)))], ValueError, "n_sources"),
        ("transmits", [(4, 0.0, 0.0, 0.0, 0, np.full((3, 2), NAN))], ValueError, "sources"),
        ("transmits", [(4, 0.0, 0.0, 0.0, 0, np.zeros((2, 2)))], ValueError, "sources"),
        ("transmits", [], ValueError, "transmits"),
        ("transmits", ["plane"], TypeError, "transmits"),
        ("fs", -1.0, ValueError, "fs"),
        ("f_number", -1.0, ValueError, "f_number"),
        ("tukey_alpha", 2.0, ValueError, "tukey_alpha"),
        ("window", "kaiser", ValueError, "window"),
        ("dtype", "float64", TypeError, "dtype"),
    ]:
        bad = dict(args)
        bad[key] = value
        with pytest.raises(exc, match=word):
            core.das_plan(**bad)
    with pytest.raises(ValueError, match="fc"):
        core.das_plan(**dict(args, fc=0.0))  # IQ needs the demodulation frequency
    core.das_plan(**dict(args, fc=0.0, dtype="float32"))  # RF does not


@pytest.mark.parametrize("dtype", [np.complex64, np.float32])
@pytest.mark.parametrize("n_frames", [8, 11, 16])
def test_one_bad_sample_anywhere_is_found(rng, dtype, n_frames):
    # The staging copy checks every sample on its way (das_kernels.h stage_channel): blocks of
    # 8 frames x 8 samples in vector registers, the frames and samples past them one at a time.
    # One NaN or inf in each region (first and last block, the frame and sample remainders; the
    # real or the imaginary part) is refused, and out= holds NaN: no partial image (records
    # staged in windows are checked while the image is formed, das.c).
    probe, grid, kw = setup()
    bf = usbeam.Beamformer(probe, usbeam.PlaneWave(0.0), grid, n_frames=n_frames, dtype=dtype, **kw)
    shape = (n_frames, 1, 8, 100)  # 100 samples: 12 whole blocks of 8 and 4 left over
    good = rng.standard_normal(shape).astype(np.float32)
    if dtype == np.complex64:
        good = (good + 1j * rng.standard_normal(shape)).astype(dtype)
    out = np.full((n_frames,) + grid.shape, 7.0, bf.out_dtype)
    bf(good, out=out)
    assert np.all(np.isfinite(out))
    for frame, sample in [(0, 0), (7, 95), (n_frames - 1, 99), (n_frames - 1, 3), (4, 97)]:
        for value in (NAN, INF, -INF, 1j * INF if dtype == np.complex64 else NAN):
            bad = good.copy()
            bad[frame, 0, int(rng.integers(8)), sample] = value
            out[...] = 7.0
            with pytest.raises(ValueError, match="NaN or infinite"):
                bf(bad, out=out)
            assert np.all(np.isnan(out))
