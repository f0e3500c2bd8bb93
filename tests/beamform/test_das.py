"""Delay-and-sum (usbeam.das / Beamformer) against the float64 reference
(tests/reference/das.py), analytic cases and the project's simulator."""
import math

import numpy as np
import pytest

import usbeam
from reference import das as ref
from tolerances import TOLERANCES
from das_checks import random_data, assert_matches_reference

FS, FC, C, T0 = 20e6, 5e6, 1540.0, 1.5e-6
N_SAMPLES = 320


def small_probe():
    return usbeam.LinearArray(16, 3e-4, width=2.5e-4)


def mixed_sequence(rng, probe):
    """Every transmit kind once, with random parameters; and the reference's tuples."""
    angle = rng.uniform(-0.3, 0.3)
    source = (rng.uniform(-1e-3, 1e-3), -rng.uniform(5e-3, 2e-2))
    focus = (rng.uniform(-1e-3, 1e-3), rng.uniform(4e-3, 8e-3))
    element = int(rng.integers(probe.n_elements))
    delays = rng.uniform(0, 2e-7, probe.n_elements)
    delays[:2] = np.nan  # a sub-aperture
    seq = [usbeam.PlaneWave(angle), usbeam.PlaneWave(-angle / 2), usbeam.DivergingWave(source),
           usbeam.Focused(focus), usbeam.SyntheticAperture(element), usbeam.Delays(delays)]
    tuples = [("plane", angle), ("plane", -angle / 2), ("diverging",) + source, ("focused",) + focus,
              ("synthetic", element), ("delays", delays)]
    return seq, tuples


def random_grid(rng):
    x = np.sort(rng.uniform(-3e-3, 3e-3, 11))
    z = np.sort(rng.uniform(1e-3, 1.1e-2, 13))
    return usbeam.Grid(x=x, z=z)


@pytest.mark.parametrize("interpolation", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("window", ["rect", "hann", "tukey"])
@pytest.mark.parametrize("dtype", [np.complex64, np.float32, np.int16])
def test_matches_reference(rng, interpolation, window, dtype):
    probe = small_probe()
    seq, tuples = mixed_sequence(rng, probe)
    grid = random_grid(rng)
    data = random_data(rng, (3, len(seq), probe.n_elements, N_SAMPLES), dtype)
    f_number = float(rng.uniform(0.8, 2.0))
    alpha = float(rng.uniform(0.2, 0.8))
    copy = data.copy()
    bf = usbeam.Beamformer(probe, seq, grid, fs=FS, fc=FC, c=C, t0=T0, n_samples=N_SAMPLES, f_number=f_number,
                           window=window, tukey_alpha=alpha, interpolation=interpolation, dtype=dtype, n_frames=3)
    out_dtype = np.complex64 if dtype == np.complex64 else np.float32
    out = np.full((3,) + grid.shape, np.nan, out_dtype)  # poison: every pixel must be written
    assert bf(data, out=out) is out
    assert np.isfinite(out).all()
    np.testing.assert_array_equal(data, copy)
    want = ref.das(data, probe.x, tuples, grid.coordinates(), fs=FS, fc=FC, c=C, t0=T0, f_number=f_number,
                   window_kind=window, tukey_alpha=alpha, interpolation=interpolation)
    assert_matches_reference(out, want, interpolation)


@pytest.mark.parametrize("n_frames", [1, 5, 8, 11, 43])
@pytest.mark.parametrize("interpolation", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("dtype", [np.complex64, np.float32])
@pytest.mark.parametrize("lanes", ["default", "off"])
def test_frame_blocks(rng, monkeypatch, n_frames, interpolation, dtype, lanes):
    # the kernels take frames in blocks of 32, then 8, then a last partial block of 8 lanes;
    # a single frame has its own kernel: 1, 5, 8, 11 = 8 + 3 and 43 = 32 + 8 + 3 cover them.
    # On AVX-512 a few frames (5 here) take das_lanes.c by default: "off" (USBEAM_DAS_LANES=0)
    # keeps them on the multi-frame kernels' partial block
    if lanes == "off":
        monkeypatch.setenv("USBEAM_DAS_LANES", "0")
    probe = small_probe()
    seq, tuples = mixed_sequence(rng, probe)
    seq, tuples = seq[::2], tuples[::2]
    grid = usbeam.Grid(x=np.linspace(-2e-3, 2e-3, 5), z=np.linspace(2e-3, 9e-3, 6))
    data = random_data(rng, (n_frames, len(seq), probe.n_elements, N_SAMPLES), dtype)
    got = usbeam.das(data, probe, seq, grid, fs=FS, fc=FC, c=C, t0=T0, f_number=1.1, window="hann",
                     interpolation=interpolation)
    want = ref.das(data, probe.x, tuples, grid.coordinates(), fs=FS, fc=FC, c=C, t0=T0, f_number=1.1,
                   window_kind="hann", interpolation=interpolation)
    assert_matches_reference(got, want, interpolation)


@pytest.mark.parametrize("dtype", [np.complex64, np.float32])
@pytest.mark.parametrize("offset_floats", [0, 1, 2, 5, 15])
def test_out_at_any_alignment(rng, dtype, offset_floats):
    # tiles of whole 8-point blocks leave through non-temporal stores of whole 64-byte lines
    # (das_kernels.h, write_tile; 200 points: three tiles of 64 and one of 8), the partial lines
    # at the ends of each frame's run by ordinary stores: an out starting anywhere in a line,
    # 19 frames (two blocks of 8 and a partial one), against the float64 reference, and nothing
    # written outside out
    probe = small_probe()
    seq, tuples = mixed_sequence(rng, probe)
    seq, tuples = seq[:3], tuples[:3]
    grid = usbeam.Grid(x=np.linspace(-2e-3, 2e-3, 10), z=np.linspace(2e-3, 9e-3, 20))
    n_frames = 19
    data = random_data(rng, (n_frames, len(seq), probe.n_elements, N_SAMPLES), dtype)
    bf = usbeam.Beamformer(probe, seq, grid, fs=FS, fc=FC, c=C, t0=T0, n_samples=N_SAMPLES, f_number=1.1,
                           n_frames=n_frames, dtype=dtype)
    floats = n_frames * grid.n_points * (2 if dtype == np.complex64 else 1)
    buffer = np.full(floats + 32, np.nan, np.float32)
    view = buffer[offset_floats:offset_floats + floats]
    out = (view.view(np.complex64) if dtype == np.complex64 else view).reshape((n_frames,) + grid.shape)
    assert np.shares_memory(out, buffer)
    bf(data, out=out)
    want = ref.das(data, probe.x, tuples, grid.coordinates(), fs=FS, fc=FC, c=C, t0=T0, f_number=1.1)
    assert_matches_reference(out, want, "linear")
    assert np.isnan(buffer[:offset_floats]).all() and np.isnan(buffer[offset_floats + floats:]).all()
    np.testing.assert_array_equal(out, bf(data))  # the same bits as into a fresh array


@pytest.mark.parametrize("interpolation", ["nearest", "linear", "cubic"])
def test_full_aperture_points_and_on_the_fly_delays(rng, interpolation):
    # f_number=0 (window across the whole array), arbitrary 3-D points (y != 0), and a
    # table budget of 1 byte so execute recomputes the delays per call: same numbers.
    probe = small_probe()
    seq, tuples = mixed_sequence(rng, probe)
    pts = np.column_stack([rng.uniform(-4e-3, 4e-3, 200), rng.uniform(-1e-3, 1e-3, 200), rng.uniform(5e-4, 1e-2, 200)])
    grid = usbeam.Grid.points(pts)
    data = random_data(rng, (2, len(seq), probe.n_elements, N_SAMPLES), np.complex64)
    want = ref.das(data, probe.x, tuples, pts, fs=FS, fc=FC, c=C, t0=T0, f_number=0, window_kind="hann",
                   interpolation=interpolation)
    for budget in (None, 1):
        bf = usbeam.Beamformer(probe, seq, grid, fs=FS, fc=FC, c=C, t0=T0, n_samples=N_SAMPLES, f_number=0,
                               window="hann", interpolation=interpolation, n_frames=2, max_table_bytes=budget)
        assert (bf.table_bytes() > 0) == (budget is None)
        got = bf(data)
        assert got.shape == (2, 200)
        assert_matches_reference(got, want, interpolation)


def test_volume_grid_layout(rng):
    probe = small_probe()
    grid = usbeam.Grid(x=np.linspace(-2e-3, 2e-3, 5), z=np.linspace(3e-3, 8e-3, 4), y=[-5e-4, 0.0, 5e-4])
    data = random_data(rng, (1, 1, probe.n_elements, N_SAMPLES), np.complex64)
    got = usbeam.das(data, probe, usbeam.PlaneWave(0.1), grid, fs=FS, fc=FC, c=C, t0=T0, f_number=1.0)
    assert got.shape == (1, 3, 4, 5)
    # the shape rule (README "Shapes"): leading axes as given.  One frame stays a batch of one
    # ((1, n_elements, n_samples) is load_must's layout), without a leading axis there is none
    kw = dict(fs=FS, fc=FC, c=C, t0=T0)
    assert usbeam.das(data[0], probe, usbeam.PlaneWave(0.1), grid, **kw).shape == (1, 3, 4, 5)
    assert usbeam.das(data[0, 0], probe, usbeam.PlaneWave(0.1), grid, **kw).shape == (3, 4, 5)
    assert usbeam.das(data[None], probe, usbeam.PlaneWave(0.1), grid, **kw).shape == (1, 1, 3, 4, 5)
    pts = grid.coordinates()
    assert np.allclose(pts.reshape(3, 4, 5, 3)[1, 2, 3], [grid.x[3], grid.y[1], grid.z[2]])
    want = ref.das(data, probe.x, [("plane", 0.1)], pts, fs=FS, fc=FC, c=C, t0=T0, f_number=1.0)
    np.testing.assert_allclose(got.reshape(1, -1), want, rtol=0, atol=1e-5 * np.abs(want).max())


# ---- analytic cases -----------------------------------------------------------------

def one_element_setup(sample_index):
    """A one-element array and the on-axis depth whose two-way delay is sample_index samples
    after t0 (synthetic aperture: tau = 2 z / c)."""
    probe = usbeam.LinearArray(1, 3e-4)
    z = (T0 + sample_index / FS) * C / 2
    return probe, usbeam.Grid.points([[0.0, 0.0, z]]), z


@pytest.mark.parametrize("interpolation", ["nearest", "linear", "cubic"])
def test_integer_delay_picks_the_sample(rng, interpolation):
    probe, grid, z = one_element_setup(37)
    rf = random_data(rng, (4, 1, 1, N_SAMPLES), np.float32)
    got = usbeam.das(rf, probe, usbeam.SyntheticAperture(0), grid, fs=FS, fc=FC, c=C, t0=T0, f_number=0,
                     interpolation=interpolation)
    np.testing.assert_allclose(got[:, 0], rf[:, 0, 0, 37], rtol=TOLERANCES["das_analytic_rel"], atol=1e-6)
    # IQ: the same sample, rotated by exp(+j 2 pi fc tau)
    iq = random_data(rng, (4, 1, 1, N_SAMPLES), np.complex64)
    got = usbeam.das(iq, probe, usbeam.SyntheticAperture(0), grid, fs=FS, fc=FC, c=C, t0=T0, f_number=0,
                     interpolation=interpolation)
    want = iq[:, 0, 0, 37] * np.exp(2j * np.pi * FC * 2 * z / C)
    np.testing.assert_allclose(got[:, 0], want, rtol=TOLERANCES["das_analytic_rel"], atol=1e-5)


def test_half_sample_delay(rng):
    probe, grid, _ = one_element_setup(37.5)
    rf = random_data(rng, (4, 1, 1, N_SAMPLES), np.float32).astype(np.float64)
    kw = dict(fs=FS, fc=FC, c=C, t0=T0, f_number=0)
    got = usbeam.das(rf.astype(np.float32), probe, usbeam.SyntheticAperture(0), grid, interpolation="linear", **kw)
    x = rf[:, 0, 0]
    np.testing.assert_allclose(got[:, 0], (x[:, 37] + x[:, 38]) / 2, rtol=TOLERANCES["das_analytic_rel"], atol=1e-6)
    got = usbeam.das(rf.astype(np.float32), probe, usbeam.SyntheticAperture(0), grid, interpolation="cubic", **kw)
    catmull_rom = (-x[:, 36] + 9 * x[:, 37] + 9 * x[:, 38] - x[:, 39]) / 16
    np.testing.assert_allclose(got[:, 0], catmull_rom, rtol=TOLERANCES["das_analytic_rel"], atol=1e-6)


def test_out_of_record_contributes_nothing(rng):
    # delays before sample 0 or past the last sample (per method's valid range) give 0
    rf = random_data(rng, (1, 1, 1, N_SAMPLES), np.float32)
    for index, method in ((-0.4, "nearest"), (N_SAMPLES - 1.5, "linear"), (0.5, "cubic"), (N_SAMPLES - 2.5, "cubic")):
        probe, grid, _ = one_element_setup(index)
        got = usbeam.das(rf, probe, usbeam.SyntheticAperture(0), grid, fs=FS, fc=FC, c=C, t0=T0, f_number=0,
                         interpolation=method, min_coverage=0)  # the one point outside the record on purpose
        assert got[0, 0] == 0.0


def test_das_is_linear(rng):
    probe = small_probe()
    seq, _ = mixed_sequence(rng, probe)
    grid = random_grid(rng)
    bf = usbeam.Beamformer(probe, seq, grid, fs=FS, fc=FC, c=C, t0=T0, n_samples=N_SAMPLES, f_number=1.2,
                           interpolation="cubic", window="tukey", n_frames=2)
    a = random_data(rng, (2, len(seq), probe.n_elements, N_SAMPLES), np.complex64)
    b = random_data(rng, a.shape, np.complex64)
    alpha, beta = 0.7 - 0.2j, -1.3
    lhs = bf((alpha * a + beta * b).astype(np.complex64))
    rhs = alpha * bf(a) + beta * bf(b)
    assert np.linalg.norm(lhs - rhs) <= 10 * TOLERANCES["das_rel_l2"] * np.linalg.norm(rhs)


def test_frames_are_independent_and_batch_equals_single(rng):
    probe = small_probe()
    grid = random_grid(rng)
    data = random_data(rng, (5, 1, probe.n_elements, N_SAMPLES), np.complex64)
    kw = dict(fs=FS, fc=FC, c=C, t0=T0, f_number=1.0, interpolation="linear")
    batch = usbeam.das(data, probe, usbeam.PlaneWave(0.05), grid, **kw)
    for f in range(5):
        single = usbeam.das(data[f, 0], probe, usbeam.PlaneWave(0.05), grid, **kw)  # (n_elements, n_samples)
        np.testing.assert_allclose(batch[f], single, rtol=0, atol=1e-6 * np.abs(single).max())
    # the 3-D single-transmit layout (n_frames, n_elements, n_samples) means frames
    np.testing.assert_array_equal(usbeam.das(data[:, 0], probe, usbeam.PlaneWave(0.05), grid, **kw), batch)


def test_plan_reuse_and_other_frame_counts(rng):
    probe = small_probe()
    grid = random_grid(rng)
    bf = usbeam.Beamformer(probe, [usbeam.PlaneWave(0.0)], grid, fs=FS, fc=FC, c=C, t0=T0, n_samples=N_SAMPLES,
                           n_frames=2)
    for n_frames in (2, 3, 2):
        data = random_data(rng, (n_frames, 1, probe.n_elements, N_SAMPLES), np.complex64)
        want = ref.das(data, probe.x, [("plane", 0.0)], grid.coordinates(), fs=FS, fc=FC, c=C, t0=T0, f_number=1.0)
        assert_matches_reference(bf(data), want, "linear")


# ---- the simulator's point scatterer is imaged where it is ------------------------

def envelope_peak(image, x, z):
    """Peak of |image| (nz, nx): the grid maximum, refined by the stationary point of the
    quadratic surface fitted to its 3 x 3 neighbourhood (the PSF of a steered transmit is
    oblique, so the two axes are refined together)."""
    env = np.abs(image).astype(np.float64)
    iz, ix = np.unravel_index(np.argmax(env), env.shape)
    assert 0 < iz < len(z) - 1 and 0 < ix < len(x) - 1, "peak on the grid border"
    dz, dx = np.meshgrid([-1.0, 0.0, 1.0], [-1.0, 0.0, 1.0], indexing="ij")
    dz, dx = dz.ravel(), dx.ravel()
    design = np.column_stack([np.ones(9), dx, dz, dx * dx, dx * dz, dz * dz])
    c0, cx, cz, cxx, cxz, czz = np.linalg.lstsq(design, env[iz - 1:iz + 2, ix - 1:ix + 2].ravel(), rcond=None)[0]
    hessian = np.array([[2 * cxx, cxz], [cxz, 2 * czz]])
    shift = np.linalg.solve(hessian, -np.array([cx, cz]))
    shift = np.clip(shift, -1, 1)  # stay inside the neighbourhood
    return x[ix] + shift[0] * (x[1] - x[0]), z[iz] + shift[1] * (z[1] - z[0])


@pytest.mark.parametrize("transmit", [usbeam.PlaneWave(0.0), usbeam.PlaneWave(0.2), usbeam.PlaneWave(-0.15),
                                      usbeam.DivergingWave((1e-3, -8e-3)), usbeam.Focused((0.0, 1.2e-2)),
                                      usbeam.SyntheticAperture(40),
                                      usbeam.Delays(np.linspace(0, 3e-7, 64))])
def test_point_scatterer_imaged_at_its_position(rng, transmit):
    from scipy.signal import hilbert

    probe = usbeam.LinearArray(64, 3e-4, width=2.7e-4)
    fs, fc, c, t0, n_samples = 40e6, 5e6, 1540.0, 2e-6, 1400
    wavelength = c / fc
    target = np.array([rng.uniform(-2e-3, 2e-3), 0.0, rng.uniform(1.4e-2, 1.8e-2)])
    rf = usbeam.simulate_rf(target[None, :], [1.0], probe, transmit, fs=fs, fc=fc, c=c, t0=t0,
                            n_samples=n_samples, bandwidth=0.6)
    t = t0 + np.arange(n_samples) / fs
    iq = (hilbert(rf.astype(np.float64), axis=-1) * np.exp(-2j * np.pi * fc * t)).astype(np.complex64)
    step = wavelength / 20
    x = target[0] + np.arange(-30, 31) * step
    z = target[2] + np.arange(-30, 31) * step
    # Hann: elements enter the aperture with zero weight, so the envelope is smooth around
    # the peak (with rect, an edge element switching in between grid points dents it)
    # simulate_rf's (n_transmits=1, n_elements, n_samples) is read as one frame: (1, nz, nx)
    image = usbeam.das(iq, probe, transmit, usbeam.Grid(x=x, z=z), fs=fs, fc=fc, c=c, t0=t0, f_number=1.5,
                       window="hann", interpolation="cubic")[0]
    px, pz = envelope_peak(image, x, z)
    limit = TOLERANCES["das_point_position_wavelengths"] * wavelength
    assert abs(px - target[0]) <= limit and abs(pz - target[2]) <= limit, (px - target[0], pz - target[2])


def test_simulator_matches_the_pulse_model(rng):
    # one scatterer, one element: rf[n] = pulse(t0 + n/fs - tau) exactly
    probe = usbeam.LinearArray(8, 3e-4)
    p = np.array([[rng.uniform(-1e-3, 1e-3), 0.0, rng.uniform(5e-3, 1e-2)]])
    tx = usbeam.PlaneWave(0.1)
    fs, fc, c, t0 = 30e6, 4e6, 1500.0, 1e-6
    rf = usbeam.simulate_rf(p, [2.0], probe, tx, fs=fs, fc=fc, c=c, t0=t0, n_samples=600, bandwidth=0.5)
    tau_tx = ref.transmit_time(("plane", 0.1), p, probe.x, c)[0]
    sigma = math.sqrt(2 * math.log(2)) / (math.pi * 0.5 * fc)
    t = t0 + np.arange(600) / fs
    for e in (0, 5):
        tau = tau_tx + np.hypot(p[0, 0] - probe.x[e], p[0, 2]) / c
        want = 2.0 * np.exp(-0.5 * ((t - tau) / sigma) ** 2) * np.cos(2 * np.pi * fc * (t - tau))
        np.testing.assert_allclose(rf[0, e], want, atol=1e-6 * 2)


def test_points_without_aperture_are_zero(rng):
    # with an f-number, a point at z <= 0 has no receive element (|dx| <= z/2F is empty
    # for z < 0; only an element exactly below it for z = 0): its value is exactly 0
    probe = small_probe()
    pts = np.array([[0.0, 0.0, -1e-3], [1.234e-4, 0.0, 0.0], [0.0, 0.0, 5e-3]])
    data = random_data(rng, (2, 1, probe.n_elements, N_SAMPLES), np.complex64)
    bf = usbeam.Beamformer(probe, usbeam.PlaneWave(0.0), usbeam.Grid.points(pts), fs=FS, fc=FC, c=C, t0=T0,
                           n_samples=N_SAMPLES, f_number=1.0, n_frames=2)
    out = np.full((2, 3), np.nan, np.complex64)
    bf(data, out=out)
    assert np.all(out[:, :2] == 0) and np.all(out[:, 2] != 0)
    # the only-empty-apertures plan has an empty table and still runs
    bf = usbeam.Beamformer(probe, usbeam.PlaneWave(0.0), usbeam.Grid.points(pts[:1]), fs=FS, fc=FC, c=C, t0=T0,
                           n_samples=N_SAMPLES, f_number=1.0, n_frames=2, min_coverage=0)  # empty on purpose
    assert np.all(bf(data) == 0)


def test_virtual_sources_search_is_exact(rng):
    # the C search of min_i (o_i + |p - s_i|) prunes sources by a bound: unsorted sources
    # off the array plane, random offsets, points off-plane (y != 0), against brute force
    probe = small_probe()
    n_src = 300
    sources = np.stack([rng.uniform(-3e-3, 3e-3, n_src), rng.uniform(-2e-3, 1e-3, n_src),
                        rng.uniform(-1e-3, 2e-3, n_src)])
    pts = np.column_stack([rng.uniform(-5e-3, 5e-3, 400), rng.uniform(-2e-3, 2e-3, 400), rng.uniform(-2e-3, 1.2e-2, 400)])
    data = random_data(rng, (2, 1, probe.n_elements, N_SAMPLES), np.float32)
    plan = usbeam._core.das_plan(probe.positions, [(4, 0.0, 0.0, 0.0, 0, sources)], pts, 2, N_SAMPLES, FS, FC, C,
                                 T0, 0.0, "rect", 0.5, "linear", "float32")
    out = np.full((2, 400), np.nan, np.float32)
    usbeam._core.das_execute(plan, data, out)
    want = ref.das(data, probe.x, [("sources", sources)], pts, fs=FS, fc=FC, c=C, t0=T0, f_number=0,
                   interpolation="linear")
    assert_matches_reference(out, want, "linear")


@pytest.mark.parametrize("n_points", [1, 3, 8, 9, 263])
def test_virtual_sources_transmit_times_for_any_number_of_points(rng, n_points):
    # the plan takes 8 points at a time (the lanes past the last point repeat it) in chunks of
    # 256: counts that fill no lane group, one, and leave a remainder, against brute force
    t = np.linspace(-1.0, 1.0, 200)
    sources = np.stack([0.02 * np.sin(t), -0.02 * (1 - np.cos(t)), rng.uniform(0.0, 1e-3, t.size)])
    pts = np.column_stack([rng.uniform(-5e-3, 5e-3, n_points), rng.uniform(-2e-3, 2e-3, n_points),
                           rng.uniform(1e-3, 1.2e-2, n_points)])
    plan = usbeam._core.das_plan(small_probe().positions, [(4, 0.0, 0.0, 0.0, 0, sources)], pts, 1, N_SAMPLES, FS,
                                 FC, C, T0, 0.0, "rect", 0.5, "linear", "float32")
    got = usbeam._core.das_transmit_times(plan, np.arange(n_points, dtype=np.int64))[:, 0]
    x, z, offset = sources
    dx, dz = pts[:, 0, None] - x, pts[:, 2, None] - z
    want = np.min(offset + np.sqrt(dx * dx + pts[:, 1, None] * pts[:, 1, None] + dz * dz), axis=1)
    np.testing.assert_array_equal(got, want / C)


@pytest.mark.parametrize("n_sources", [1, 15, 17, 63, 65, 130, 300, 517, 700])
@pytest.mark.parametrize("layout", ["arc", "scattered"])
def test_virtual_sources_transmit_times_are_the_brute_force_minimum(rng, n_sources, layout):
    # the search bounds groups of 4 blocks of 16 sources, then blocks, and evaluates only what
    # could hold the minimum: the plan's transmit times must be min_i (o_i + |p - s_i|) / c bit
    # for bit (same double expression, no contraction), whatever the counts left over in the
    # last block and group; sources on an arc (a convex array's law) and scattered, points in
    # grid order (the hint carried from neighbour to neighbour) and random, some off-plane
    if layout == "arc":
        t = np.linspace(-1.0, 1.0, n_sources)
        sources = np.stack([0.02 * np.sin(t), -0.02 * (1 - np.cos(t)) + rng.uniform(-1e-4, 1e-4, n_sources),
                            rng.uniform(0.0, 1e-3, n_sources)])
    else:
        sources = np.stack([rng.uniform(-3e-3, 3e-3, n_sources), rng.uniform(-2e-3, 1e-3, n_sources),
                            rng.uniform(-1e-3, 2e-3, n_sources)])
    gx, gz = np.meshgrid(np.linspace(-0.02, 0.02, 23), np.linspace(0.001, 0.05, 31))
    scattered = np.column_stack([rng.uniform(-5e-3, 5e-3, 300),
                                 rng.uniform(-2e-3, 2e-3, 300) * (rng.random(300) < 0.5), rng.uniform(-2e-3, 1.2e-2, 300)])
    pts = np.concatenate([np.column_stack([gx.ravel(), np.zeros(gx.size), gz.ravel()]), scattered])
    plan = usbeam._core.das_plan(small_probe().positions, [(4, 0.0, 0.0, 0.0, 0, sources)], pts, 1, N_SAMPLES, FS,
                                 FC, C, T0, 0.0, "rect", 0.5, "linear", "float32")
    got = usbeam._core.das_transmit_times(plan, np.arange(len(pts), dtype=np.int64))[:, 0]
    x, z, offset = sources
    want = np.full(len(pts), np.inf)
    for i in range(x.size):
        dx, dz = pts[:, 0] - x[i], pts[:, 2] - z[i]
        want = np.minimum(want, offset[i] + np.sqrt(dx * dx + pts[:, 1] * pts[:, 1] + dz * dz))
    np.testing.assert_array_equal(got, want / C)


def test_thread_limit_of_the_calling_thread_caps_a_plan_made_before(rng):
    """usbeam_set_thread_limit (a live session's compute thread uses it) caps the team of a plan
    created with more threads; per-point sums do not depend on the team, so the images agree
    bit for bit, and the limit stays on the thread that set it."""
    import threading

    probe = usbeam.LinearArray(24, 3e-4)
    grid = usbeam.Grid(x=np.linspace(-3e-3, 3e-3, 33), z=np.linspace(2e-3, 9e-3, 41))
    bf = usbeam.Beamformer(probe, [usbeam.PlaneWave(0.0), usbeam.PlaneWave(0.1)], grid, fs=20e6, fc=5e6,
                           c=1540.0, n_samples=400, n_frames=3, dtype=np.complex64)
    iq = (rng.standard_normal((3, 2, 24, 400)) + 1j * rng.standard_normal((3, 2, 24, 400))).astype(np.complex64)
    want = bf(iq)
    before = usbeam.build_info()["cpu_threads"]
    got = {}

    def limited():
        usbeam._core.set_thread_limit(1)
        got["image"] = bf(iq)

    t = threading.Thread(target=limited)
    t.start()
    t.join()
    np.testing.assert_array_equal(got["image"], want)
    assert usbeam.build_info()["cpu_threads"] == before  # this thread's limit is untouched
    with pytest.raises(ValueError, match="threads"):
        usbeam._core.set_thread_limit(0)
