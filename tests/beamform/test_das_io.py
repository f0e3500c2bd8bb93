"""usbeam.load_must on MUST-style .mat files written here (fresh random contents), the
Delays transmit against the analytic plane wave, and concurrent use of one plan."""
import math
import threading

import numpy as np
import pytest

import usbeam
from reference import das as ref


def write_must(path, rf, **param):
    import scipy.io

    scipy.io.savemat(path, {"RF": rf, "param": param})


def base_param(n_elements=16):
    return dict(fs=20e6, pitch=3e-4, fc=5e6, c=1540.0, t0=2e-6, PRF=4000.0, width=2.5e-4,
                Nelements=float(n_elements), TXdelay=np.zeros((1, n_elements)), bandwidth=60.0)


def test_load_must_roundtrip(tmp_path, rng):
    rf = rng.integers(-1000, 1000, (200, 16, 3)).astype(np.int16)  # MATLAB (samples, elements, frames)
    param = base_param()
    param["TXdelay"] = np.full((1, 16), 1e-6)  # a constant delay: first firing at 1 us
    write_must(tmp_path / "rec.mat", rf, **param)
    rec = usbeam.load_must(tmp_path / "rec.mat")
    assert rec.data.shape == (3, 16, 200)
    np.testing.assert_array_equal(rec.data, rf.T)
    assert rec.fs == 20e6 and rec.fc == 5e6 and rec.c == 1540.0 and rec.prf == 4000.0
    assert rec.bandwidth == pytest.approx(0.6) and rec.probe.bandwidth == pytest.approx(0.6)
    assert rec.probe.width == pytest.approx(2.5e-4) and rec.probe.kerf == pytest.approx(0.5e-4)
    assert rec.t0 == pytest.approx(2e-6 - 1e-6)  # usbeam's time origin is the first firing
    assert isinstance(rec.sequence[0], usbeam.Delays)


def test_load_must_single_frame_and_iq(tmp_path, rng):
    iq = (rng.standard_normal((100, 8)) + 1j * rng.standard_normal((100, 8))).astype(np.complex64)
    import scipy.io

    param = base_param(8)
    del param["TXdelay"]
    scipy.io.savemat(tmp_path / "iq.mat", {"IQ": iq, "param": param})
    rec = usbeam.load_must(tmp_path / "iq.mat")
    assert rec.data.shape == (1, 8, 100) and np.iscomplexobj(rec.data)
    assert rec.sequence == (usbeam.PlaneWave(0.0),)


@pytest.mark.parametrize("change, word", [
    (dict(fs=None), "fs"),
    (dict(pitch=None), "pitch"),
    (dict(fs=float("nan")), "fs"),
    (dict(Nelements=9.0), "Nelements"),
    (dict(Nelements=15.5), "Nelements"),  # was truncated to 15 (or 16.5 to 16, accepted)
    (dict(Nelements=16.5), "Nelements"),
    (dict(fs=0.0), "fs"),
    (dict(fs=-1.0), "fs"),
    (dict(fc=0.0), "fc"),
    (dict(c=0.0), "param.c"),
    (dict(c=-1540.0), "param.c"),
    (dict(PRF=-4000.0), "PRF"),
    (dict(pitch=-3e-4), "pitch"),
    (dict(radius=0.0), "radius"),  # a convex array needs radius > 0 (finite ones are read: test_convex)
    (dict(radius=-0.04), "radius"),
    (dict(radius=0.001), "radius"),  # 16 elements at 0.3 mm do not fit half a 1 mm circle
    (dict(TXdelay=np.zeros((1, 5))), "TXdelay"),
])
def test_load_must_bad_files(tmp_path, rng, change, word):
    param = base_param()
    for key, value in change.items():
        if value is None:
            del param[key]
        else:
            param[key] = value
    write_must(tmp_path / "bad.mat", rng.integers(-9, 9, (50, 16, 2)).astype(np.int16), **param)
    with pytest.raises(ValueError, match=word):
        usbeam.load_must(tmp_path / "bad.mat")


@pytest.mark.parametrize("pitch, c, word", [(0.0, 1540.0, "pitch"), (-3e-4, 1540.0, "pitch"), (3e-4, 0.0, "c"),
                                            (3e-4, -1540.0, "c"), (3e-4, float("nan"), "c"), ("a", 1540.0, "pitch")])
def test_plane_wave_angle_bad_pitch_or_c(pitch, c, word):
    # pitch 0 used to reach a LAPACK error (LinAlgError + stderr), c < 0 a wrong-sign angle
    delays = np.arange(16) * 3e-4 * math.sin(0.1) / 1540.0
    with pytest.raises((ValueError, TypeError), match=word):
        usbeam.io.plane_wave_angle(delays, pitch, c)
    assert usbeam.io.plane_wave_angle(delays, 3e-4, 1540.0) == pytest.approx(0.1, rel=1e-9)


def test_load_must_missing_variables(tmp_path):
    import scipy.io

    scipy.io.savemat(tmp_path / "empty.mat", {"other": np.zeros(3)})
    with pytest.raises(ValueError, match="RF or IQ"):
        usbeam.load_must(tmp_path / "empty.mat")


@pytest.mark.parametrize("content", [b"not a mat file", b"MATLAB 7.3 MAT-file" + bytes(200)])
def test_load_must_unreadable_file_names_the_path(tmp_path, content):
    (tmp_path / "bad.mat").write_bytes(content)
    with pytest.raises(ValueError, match=r"^path: .*bad\.mat is not a MAT file scipy\.io\.loadmat reads"):
        usbeam.load_must(tmp_path / "bad.mat")


def test_delays_of_a_plane_wave_match_the_plane_wave(rng):
    # MUST's envelope of spherical waves from the spline-interpolated elements tends to the
    # plane wave; where the ray through p along the steering direction meets the array
    # (inside its ends) the two transmit times agree to ~dx^2/(2z), dx the source spacing
    probe = usbeam.LinearArray(64, 3e-4)
    angle = rng.uniform(-0.3, 0.3)
    c = 1540.0
    x_first = probe.x.min() if angle >= 0 else probe.x.max()
    delays = (probe.x - x_first) * math.sin(angle) / c
    pts = np.column_stack([rng.uniform(-4e-3, 4e-3, 200), np.zeros(200), rng.uniform(1e-2, 3e-2, 200)])
    foot = pts[:, 0] - pts[:, 2] * math.tan(angle)
    pts = pts[np.abs(foot) < probe.x.max() - 2 * probe.pitch]
    assert len(pts) > 20
    t_delays = usbeam.Delays(delays).transmit_time(pts, probe, c)
    t_plane = ref.transmit_time(("plane", angle), pts, probe.x, c)
    spacing = probe.pitch / 4
    assert np.all(np.abs(t_delays - t_plane) * c <= spacing ** 2 / (2 * 1e-2) * 1.5)


def test_one_plan_from_many_threads(rng):
    # a plan's scratch is guarded by its lock: concurrent calls give the sequential answers
    probe = usbeam.LinearArray(16, 3e-4)
    grid = usbeam.Grid(x=np.linspace(-2e-3, 2e-3, 9), z=np.linspace(3e-3, 9e-3, 11))
    bf = usbeam.Beamformer(probe, usbeam.PlaneWave(0.1), grid, fs=20e6, fc=5e6, c=1540.0, n_samples=300, n_frames=4)
    inputs = [(rng.standard_normal((4, 16, 300)) + 1j * rng.standard_normal((4, 16, 300))).astype(np.complex64)
              for _ in range(6)]
    want = [bf(x) for x in inputs]
    got = [None] * len(inputs)

    def work(k):
        for _ in range(3):
            got[k] = bf(inputs[k])

    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_simulated_cyst_beamforms(rng):
    # end to end on the project's simulator: speckle outside the cyst, darkness inside
    from scipy.signal import hilbert

    probe = usbeam.LinearArray(64, 3e-4, width=2.7e-4, bandwidth=0.6)
    fs, fc, c, t0, n_samples = 20e6, 5e6, 1540.0, 0.0, 900
    pos, amp = usbeam.cyst_phantom(x_range=(-6e-3, 6e-3), z_range=(1e-2, 3e-2), n_scatterers=1500,
                                   cyst_center=(0.0, 2e-2), cyst_radius=3e-3, points=(),
                                   seed=int(rng.integers(1 << 31)))
    assert np.all(np.hypot(pos[:, 0], pos[:, 2] - 2e-2) > 3e-3)
    seq = usbeam.plane_wave_sequence(np.deg2rad([-5, 0, 5]))
    rf = usbeam.simulate_rf(pos, amp, probe, seq, fs=fs, fc=fc, c=c, t0=t0, n_samples=n_samples)
    t = t0 + np.arange(n_samples) / fs
    iq = (hilbert(rf.astype(np.float64), axis=-1) * np.exp(-2j * np.pi * fc * t)).astype(np.complex64)
    x = np.linspace(-5e-3, 5e-3, 41)
    z = np.linspace(1.2e-2, 2.8e-2, 65)
    env = np.abs(usbeam.das(iq, probe, seq, usbeam.Grid(x=x, z=z), fs=fs, fc=fc, c=c, t0=t0, f_number=1.5))
    zz, xx = np.meshgrid(z, x, indexing="ij")
    r = np.hypot(xx, zz - 2e-2)
    inside, outside = env[r < 1.5e-3], env[(r > 4.5e-3) & (zz > 1.4e-2) & (zz < 2.6e-2)]
    contrast_db = 20 * np.log10(np.mean(inside) / np.mean(outside))
    assert contrast_db < -10, contrast_db


def test_load_must_linear_radius_inf(tmp_path, rng):
    param = base_param()
    param["radius"] = np.inf  # MUST's linear-array marker
    write_must(tmp_path / "lin.mat", rng.integers(-9, 9, (50, 16, 2)).astype(np.int16), **param)
    assert usbeam.load_must(tmp_path / "lin.mat").probe.n_elements == 16
