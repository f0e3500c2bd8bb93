"""UFF in and out (usbeam.io.uff) against files written by pyuff_ustb's own objects (an
independent writer) and read back by them: fields, layouts, USTB's time conventions (checked by
beamforming the loaded recording against a float64 delay-and-sum written from USTB's own
transmit-delay formulas), errors naming the missing field or the probe usbeam cannot model, and
beamformed_data written for USTB.  No real UFF recording exists in ../shared/datasets."""
import math

import h5py
import numpy as np
import pytest

import usbeam
from tolerances import TOLERANCES

pyuff = pytest.importorskip("pyuff_ustb", reason="pyuff_ustb (the independent UFF writer) is not installed")

FS, C, FC = 20e6, 1540.0, 5e6
N_EL, PITCH, N_SAMPLES = 16, 3e-4, 420


def write_channel_data(path, waves, data, *, probe=None, modulation=0.0, initial_time=2e-6, pulse=True, prf=500.0):
    probe = probe or pyuff.LinearArray(N=N_EL, pitch=PITCH, element_width=2.7e-4, element_height=5e-3)
    if probe.origin is None:
        probe.origin = pyuff.Point(distance=0.0, azimuth=0.0, elevation=0.0)
    kw = dict(sampling_frequency=FS, initial_time=initial_time, sound_speed=C, modulation_frequency=modulation,
              sequence=waves if len(waves) > 1 else waves[0], probe=probe, data=data, PRF=prf)
    if pulse:
        kw["pulse"] = pyuff.Pulse(center_frequency=FC, fractional_bandwidth=0.6, phase=0.0)
    # the waves' apodization objects (transmit apodization) are not part of this test: left out
    pyuff.ChannelData(**kw).write(str(path), "channel_data", ignore_missing_compulsory_fields=True)


def plane(a, delay=0.0):
    return pyuff.Wave(wavefront=pyuff.Wavefront.plane, source=pyuff.Point(distance=np.inf, azimuth=a, elevation=0.0),
                      delay=delay, sound_speed=C)


def spherical(x, z, delay=0.0):
    return pyuff.Wave(wavefront=pyuff.Wavefront.spherical,
                      source=pyuff.Point(distance=math.hypot(x, z), azimuth=math.atan2(x, z), elevation=0.0),
                      delay=delay, sound_speed=C)


def element_x():
    return (np.arange(N_EL) - (N_EL - 1) / 2) * PITCH


def ustb_das(uff_data, waves_xz, points, initial_time, modulation):
    """Float64 DAS from USTB's midprocess.das formulas: per wave, the transmit distance (plane:
    x sin a + z cos a; spherical: sign * |p - s| -+ |s|), / c - wave.delay; receive |p - e| / c;
    linear interpolation on initial_time + k / fs; IQ rotated by exp(j 2 pi f tau).  uff_data is
    MATLAB's [time x channel x wave] (one frame)."""
    xe = element_x()
    x, z = points[:, 0], points[:, 2]
    out = np.zeros(len(points), complex)
    t_axis = initial_time + np.arange(uff_data.shape[0]) / FS
    for n, (kind, a_or_s, delay) in enumerate(waves_xz):
        if kind == "plane":
            tx = z * math.cos(a_or_s) + x * math.sin(a_or_s)
        else:
            xs, zs = a_or_s
            r = np.hypot(x - xs, z - zs)
            d = math.hypot(xs, zs)
            tx = np.where(z < zs, -r, r) + (-d if zs < -1e-3 else d)
        tx = tx / C - delay
        for e in range(N_EL):
            tau = tx + np.hypot(x - xe[e], z) / C
            sample = np.interp(tau, t_axis, uff_data[:, e, n].real, left=0, right=0)
            if np.iscomplexobj(uff_data):
                sample = sample + 1j * np.interp(tau, t_axis, uff_data[:, e, n].imag, left=0, right=0)
                sample = sample * np.exp(2j * np.pi * modulation * tau)
            out += sample
    return out


GRID = usbeam.Grid(x=np.linspace(-1.5e-3, 1.5e-3, 5), z=np.linspace(5e-3, 9e-3, 6))


def check_beamforming(rec, uff_data, waves_xz, initial_time, modulation):
    bf = usbeam.Beamformer(rec.probe, rec.sequence, GRID, fs=rec.fs, fc=rec.fc, c=rec.c, t0=rec.t0,
                           n_samples=rec.n_samples, f_number=0.0, interpolation="linear", dtype=rec.data.dtype,
                           n_frames=rec.n_frames)
    got = bf(rec.data)[0].ravel()
    want = ustb_das(uff_data[..., 0], waves_xz, GRID.coordinates(), initial_time, modulation)
    if not np.iscomplexobj(got):
        want = want.real
    assert np.linalg.norm(got - want) <= TOLERANCES["uff_das_rel_l2"] * np.linalg.norm(want)


def test_plane_waves_rf(tmp_path, rng):
    angles = (-0.1, 0.0, 0.15)
    x_first = [element_x().max() if a < 0 else element_x().min() for a in angles]
    D = 3e-7  # a common usbeam time origin: wave.delay = x_first sin a / c + D
    waves = [plane(a, xf * math.sin(a) / C + D) for a, xf in zip(angles, x_first)]
    data = rng.standard_normal((N_SAMPLES, N_EL, 3, 2)).astype(np.float32)  # [time x channel x wave x frame]
    write_channel_data(tmp_path / "pw.uff", waves, data)
    rec = usbeam.io.load_uff(tmp_path / "pw.uff")
    assert isinstance(rec, usbeam.io.Recording)
    assert rec.data.shape == (2, 3, N_EL, N_SAMPLES) and rec.data.dtype == np.float32
    np.testing.assert_array_equal(rec.data, data.T)
    assert isinstance(rec.probe, usbeam.LinearArray)
    assert (rec.probe.n_elements, rec.probe.pitch, rec.probe.width) == (N_EL, PITCH, 2.7e-4)
    assert [t.angle for t in rec.sequence] == list(angles)
    assert all(isinstance(t, usbeam.PlaneWave) for t in rec.sequence)
    assert rec.t0 == pytest.approx(2e-6 + D, abs=1e-15)
    assert (rec.fs, rec.c, rec.fc, rec.prf, rec.bandwidth, rec.modulation_frequency) == (FS, C, FC, 500.0, 0.6, 0.0)
    check_beamforming(rec, data, [("plane", a, w.delay) for a, w in zip(angles, waves)], 2e-6, 0.0)


@pytest.mark.parametrize("kind", ["diverging", "focused", "synthetic"])
def test_spherical_waves_iq(tmp_path, rng, kind):
    xe = element_x()
    if kind == "diverging":
        sources = [(-1e-3, -8e-3), (1.5e-3, -6e-3)]
        shifts = [(math.hypot(*s) - np.hypot(xe - s[0], s[1]).min()) / C for s in sources]
    elif kind == "focused":
        sources = [(0.0, 20e-3), (1e-3, 25e-3)]
        shifts = [(np.hypot(xe - s[0], s[1]).max() - math.hypot(*s)) / C for s in sources]
    else:
        sources = [(xe[2], 0.0), (xe[11], 0.0)]
        shifts = [-abs(s[0]) / C for s in sources]
    D = 1e-7
    waves = [spherical(*s, delay=D - sh) for s, sh in zip(sources, shifts)]
    data = (rng.standard_normal((N_SAMPLES, N_EL, 2, 1)) + 1j * rng.standard_normal((N_SAMPLES, N_EL, 2, 1)))
    write_channel_data(tmp_path / "sw.uff", waves, data, modulation=FC, pulse=False)
    rec = usbeam.io.load_uff(tmp_path / "sw.uff")
    expected_type = {"diverging": usbeam.DivergingWave, "focused": usbeam.Focused,
                     "synthetic": usbeam.SyntheticAperture}[kind]
    assert all(isinstance(t, expected_type) for t in rec.sequence)
    if kind == "synthetic":
        assert [t.element for t in rec.sequence] == [2, 11]
    assert rec.data.dtype == np.complex64 and rec.fc == FC and rec.modulation_frequency == FC
    assert rec.t0 == pytest.approx(2e-6 + D, abs=1e-15)
    # usbeam's IQ convention: the constant phase of the clock shift
    np.testing.assert_allclose(rec.data, (data.T * np.exp(-2j * np.pi * FC * D)).astype(np.complex64), rtol=1e-6)
    check_beamforming(rec, data, [("spherical", s, w.delay) for s, w in zip(sources, waves)], 2e-6, FC)


def test_probe_from_bare_geometry(tmp_path, rng):
    geometry = np.zeros((7, N_EL))
    geometry[0] = element_x()
    geometry[5] = 2.5e-4
    probe = pyuff.Probe(geometry=geometry)
    write_channel_data(tmp_path / "p.uff", [plane(0.0)], rng.standard_normal((N_SAMPLES, N_EL, 1, 1)), probe=probe)
    rec = usbeam.io.load_uff(tmp_path / "p.uff")
    assert (rec.probe.n_elements, rec.probe.pitch, rec.probe.width) == (N_EL, pytest.approx(PITCH), 2.5e-4)


def test_convex_probe_maps_to_convex_array(tmp_path):
    if not hasattr(usbeam.geometry, "ConvexArray"):
        pytest.skip("usbeam.geometry.ConvexArray is not in this build yet (issue 16 adds it)")
    probe = pyuff.CurvilinearArray(N=N_EL, pitch=PITCH, radius=40e-3, element_width=2.7e-4, element_height=5e-3,
                                   origin=pyuff.Point(distance=0.0, azimuth=0.0, elevation=0.0))
    probe.write(str(tmp_path / "cv.uff"), "probe", ignore_missing_compulsory_fields=True)
    with h5py.File(tmp_path / "cv.uff", "r") as f:
        mapped = usbeam.io.uff._probe(f["probe"])
    assert isinstance(mapped, usbeam.geometry.ConvexArray)
    assert (mapped.n_elements, mapped.pitch, mapped.radius) == (N_EL, PITCH, 40e-3)


def test_matrix_probe_maps_to_matrix_array(tmp_path, rng):
    if not hasattr(usbeam.geometry, "MatrixArray"):
        pytest.skip("usbeam.geometry.MatrixArray is not in this build yet (issue 16 adds it)")
    with h5py.File(tmp_path / "m.uff", "w") as f:
        g = f.create_group("probe")
        g.attrs["class"] = "uff.matrix_array"
        for k, v in (("N_x", 8), ("N_y", 4), ("pitch_x", 3e-4), ("pitch_y", 4e-4)):
            g.create_dataset(k, data=np.array([[v]], float))
        probe = usbeam.io.uff._probe(f["probe"])
    assert isinstance(probe, usbeam.geometry.MatrixArray)


def test_probes_usbeam_cannot_model_are_named(tmp_path, rng):
    write_channel_data(tmp_path / "cm.uff", [plane(0.0)], rng.standard_normal((N_SAMPLES, N_EL, 1, 1)))
    with h5py.File(tmp_path / "cm.uff", "a") as f:  # a probe class usbeam has no model of
        f["channel_data/probe"].attrs["class"] = "uff.curvilinear_matrix_array"
    with pytest.raises(ValueError, match="channel_data.probe: probe class 'uff.curvilinear_matrix_array'"):
        usbeam.io.load_uff(tmp_path / "cm.uff")
    geometry = np.zeros((7, N_EL))
    geometry[0] = element_x() ** 2  # not evenly spaced
    write_channel_data(tmp_path / "g.uff", [plane(0.0)], rng.standard_normal((N_SAMPLES, N_EL, 1, 1)),
                       probe=pyuff.Probe(geometry=geometry))
    with pytest.raises(ValueError, match="usbeam cannot model this geometry"):
        usbeam.io.load_uff(tmp_path / "g.uff")


@pytest.mark.parametrize("field", ["sampling_frequency", "initial_time", "sound_speed", "modulation_frequency",
                                   "sequence", "probe", "data"])
def test_missing_required_field_is_named(tmp_path, rng, field):
    write_channel_data(tmp_path / "x.uff", [plane(0.0)], rng.standard_normal((N_SAMPLES, N_EL, 1, 1)))
    with h5py.File(tmp_path / "x.uff", "a") as f:
        del f["channel_data"][field]
    with pytest.raises(ValueError, match=f"channel_data.{field}: required UFF field is missing"):
        usbeam.io.load_uff(tmp_path / "x.uff")


def test_other_bad_files(tmp_path, rng):
    # RF without the pulse's centre frequency: fc unknown
    write_channel_data(tmp_path / "a.uff", [plane(0.0)], rng.standard_normal((N_SAMPLES, N_EL, 1, 1)), pulse=False)
    with pytest.raises(ValueError, match="pulse.center_frequency"):
        usbeam.io.load_uff(tmp_path / "a.uff")
    # waves whose time origins disagree (delay 0 for two steered plane waves)
    write_channel_data(tmp_path / "b.uff", [plane(0.0), plane(0.1)], rng.standard_normal((N_SAMPLES, N_EL, 2, 1)))
    with pytest.raises(ValueError, match=r"sequence\[1\].delay"):
        usbeam.io.load_uff(tmp_path / "b.uff")
    # no channel data at all, or a wrong name
    with h5py.File(tmp_path / "c.uff", "w") as f:
        f.create_group("something")
    with pytest.raises(ValueError, match="no uff.channel_data"):
        usbeam.io.load_uff(tmp_path / "c.uff")
    with pytest.raises(ValueError, match="name: no object 'nope'"):
        usbeam.io.load_uff(tmp_path / "a.uff", name="nope")


def test_beamformed_data_round_trip_through_pyuff(tmp_path, rng):
    image = (rng.standard_normal((2,) + GRID.shape) + 1j * rng.standard_normal((2,) + GRID.shape)).astype(np.complex64)
    usbeam.io.save_uff(tmp_path / "bf.uff", image, GRID)
    from pyuff_ustb.readers.base import H5Reader

    bf = pyuff.BeamformedData(H5Reader(str(tmp_path / "bf.uff"), "beamformed_data"))
    scan = bf.scan
    assert type(scan).__name__ == "LinearScan"
    np.testing.assert_array_equal(np.ravel(scan.x_axis), GRID.x)
    np.testing.assert_array_equal(np.ravel(scan.z_axis), GRID.z)
    data = bf.data  # HDF5 (frame, wave, channel, pixel) = MATLAB [pixel x channel x wave x frame]
    assert data.shape == (2, 1, 1, GRID.n_points)
    # every pixel holds the image value at its (x, z), in USTB's order (depth fastest)
    ix = np.searchsorted(GRID.x, scan.x)
    iz = np.searchsorted(GRID.z, scan.z)
    np.testing.assert_array_equal(data[:, 0, 0, :], image[:, iz, ix])
    with pytest.raises(ValueError, match="already exists"):
        usbeam.io.save_uff(tmp_path / "bf.uff", image, GRID)
    usbeam.io.save_uff(tmp_path / "bf.uff", image[0].real, GRID, overwrite=True)
    assert pyuff.BeamformedData(H5Reader(str(tmp_path / "bf.uff"), "beamformed_data")).data.shape == (1, 1, 1, 30)


def test_sector_scan_round_trip_through_pyuff(tmp_path, rng):
    azimuth, depth = np.linspace(-0.5, 0.5, 9), np.linspace(1e-3, 30e-3, 12)
    image = rng.standard_normal((12, 9)).astype(np.float32)
    usbeam.io.save_uff(tmp_path / "s.uff", image, sector=(azimuth, depth, (0.0, 0.0)))
    from pyuff_ustb.readers.base import H5Reader

    bf = pyuff.BeamformedData(H5Reader(str(tmp_path / "s.uff"), "beamformed_data"))
    scan = bf.scan
    assert type(scan).__name__ == "SectorScan"
    np.testing.assert_array_equal(np.ravel(scan.azimuth_axis), azimuth)
    np.testing.assert_array_equal(np.ravel(scan.depth_axis), depth)
    assert (scan.origin.x, scan.origin.z) == (0.0, 0.0)
    # USTB's sector_scan.m orders pixels depth fastest ([theta, rho] = meshgrid(azimuth, depth);
    # theta(:)); pyuff_ustb's own SectorScan.x/z enumerate them azimuth fastest, so the layout is
    # checked against USTB's order here, not against pyuff's computed coordinates
    pixels = bf.data[0, 0, 0].reshape(azimuth.size, depth.size)  # [azimuth][depth]
    np.testing.assert_array_equal(pixels.T, image)


def test_save_bad_input(tmp_path):
    with pytest.raises(ValueError, match="must be"):
        usbeam.io.save_uff(tmp_path / "z.uff", np.zeros((3, 3)), GRID)
    with pytest.raises(ValueError, match="exactly one"):
        usbeam.io.save_uff(tmp_path / "z.uff", np.zeros(GRID.shape))
    bad = np.zeros(GRID.shape)
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        usbeam.io.save_uff(tmp_path / "z.uff", bad, GRID)


@pytest.mark.parametrize("shape", [(N_SAMPLES, N_EL), (N_SAMPLES, N_EL, 1)], ids=["2-D", "3-D"])
def test_fewer_dimensions_and_int16(tmp_path, rng, shape):
    # MATLAB drops trailing singleton dimensions: [time x channel] or [time x channel x wave]
    data = rng.integers(-2000, 2000, shape).astype(np.int16)
    write_channel_data(tmp_path / "d.uff", [plane(0.0)], data)
    rec = usbeam.io.load_uff(tmp_path / "d.uff")
    assert rec.data.shape == (1, 1, N_EL, N_SAMPLES) and rec.data.dtype == np.int16
    np.testing.assert_array_equal(rec.data[0, 0], data.reshape(N_SAMPLES, N_EL).T)
