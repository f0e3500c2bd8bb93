"""Staging round a ring (csrc/beamform/das.c): a record of several frames over 12 MiB, on a grid
whose points come in order of depth, is copied into the staged planes a window of samples at a
time, round a ring of rows that stays in cache.  USBEAM_DAS_STAGE_AT_ONCE_BYTES lowers the
threshold so that small records here take that path.  The ring must change no value: images
against the float64 reference (tests/reference/das.py, das_general) and bit for bit against the
whole-record staging, for every interpolation, input type, several frame counts (the 8-frame
pair kernels and the partial frame blocks) and transmits, with the receive table and without
(IQ of 5 to 8 frames is staged whole whatever the threshold); and a NaN or an infinity in any
window is refused.  Records staged whole and far larger than the caches have their staged lines
prefetched (USBEAM_DAS_PREFETCH_STAGED_BYTES lowers that threshold here): IQ in rows of 8
frames (5 to 8) the lines a subtile's entries of the next transmit read, the rest each block of
entries formed one block ahead with its rows.  That must change no value either.  On AVX-512 a plan of a few frames (IQ up to 5; RF up to 12)
takes the lanes instead (das_lanes.c, each frame staged as one: test_das_lanes.py), so the
plans here are built with USBEAM_DAS_LANES=0, which keeps them on das.c's multi-frame staging and kernels."""
import numpy as np
import pytest

import usbeam
from reference import das as ref
from test_das_sector_aperture import cone_predicate
from das_checks import assert_matches_reference, random_data

FS, FC, C, T0 = 20e6, 5e6, 1540.0, 1.0e-6
N_SAMPLES = 700
RING = "USBEAM_DAS_STAGE_AT_ONCE_BYTES"
PREFETCH = "USBEAM_DAS_PREFETCH_STAGED_BYTES"


@pytest.fixture(autouse=True)
def multi_frame_kernels(monkeypatch):
    monkeypatch.setenv("USBEAM_DAS_LANES", "0")


def setup(n_frames, dtype=np.complex64, interpolation="linear", n_transmits=1, table=True):
    """A convex sector (radii in order, 17.5 mm deep) and compounded transmits: diverging waves
    from two virtual sources and user delays.  (Transmits as different as a focus inside the
    sector and a diverging wave need rows far apart at once: those records are staged whole.)
    table=False: a plan over its table budget, which computes its receive parts per call."""
    probe = usbeam.ConvexArray(n_elements=48, pitch=3e-4, radius=0.012, element_width=2.6e-4)
    h = probe.apothem
    delays = np.linspace(0.0, 1e-7, probe.n_elements)
    laws = [usbeam.DivergingWave((0.0, -h)), usbeam.DivergingWave((1e-3, -h - 2e-3)), usbeam.Delays(delays)]
    tuples = [("diverging", (0.0, 0.0, -h)), ("diverging", (1e-3, 0.0, -h - 2e-3)), ("delays", delays)]
    grid = usbeam.PolarGrid(np.linspace(probe.radius + 1e-3, probe.radius + 17.5e-3, 96), np.linspace(-0.5, 0.5, 40),
                            apex=(0.0, -h))
    bf = usbeam.Beamformer(probe, laws[:n_transmits], grid, fs=FS, fc=FC, c=C, t0=T0, n_samples=N_SAMPLES,
                           f_number=1.0, window="hann", interpolation=interpolation, n_frames=n_frames, dtype=dtype,
                           max_table_bytes=None if table else 1)
    assert (usbeam._core.das_table_bytes(bf._plan) > 0) == table
    return bf, tuples[:n_transmits]


def rings(dtype, n_frames):
    """Whether a record over the threshold goes round a ring: not IQ of 5 to 8 frames (rows of 8
    frames, the pair kernels), which measured faster staged whole (das.c plan_stage_windows)."""
    return not (dtype == np.complex64 and 5 <= n_frames <= 8)


def staging(bf, n_frames):
    return usbeam._core.das_staging(bf._plan, n_frames)[:2]


def run(bf, data, monkeypatch, ring):
    monkeypatch.setenv(RING, "0" if ring else str(1 << 60))
    windows, ring_rows = staging(bf, data.shape[0])
    if ring and rings(data.dtype, data.shape[0]):
        assert windows >= 3 and 0 < ring_rows < N_SAMPLES // 2, (windows, ring_rows)
    else:
        assert (windows, ring_rows) == (1, 0)
    return bf(data)


def same_bits_prefetched(bf, data, monkeypatch):
    """The image of a record staged whole, without the prefetch and with it (every record past 0
    bytes): asserted bit for bit equal; returns it."""
    monkeypatch.setenv(PREFETCH, str(1 << 60))
    plain = run(bf, data, monkeypatch, ring=False)
    monkeypatch.setenv(PREFETCH, "0")
    np.testing.assert_array_equal(run(bf, data, monkeypatch, ring=False), plain)
    return plain


@pytest.mark.parametrize("n_transmits", [1, 3])
@pytest.mark.parametrize("table", [True, False])
def test_tile_bounds_hold_every_tap(n_transmits, table):
    """Every in-range tap (floor(s) - 1 .. floor(s) + 2, cubic's run, which holds nearest's and
    linear's) of every (point, transmit, element in the point's cone) lies in its tile's
    [first, end), with s = ((tau_tx + |p - e| / c) - t0) fs from tests/reference/das.py; with
    the receive table and without it."""
    bf, tuples = setup(2, n_transmits=n_transmits, table=table)
    bounds = usbeam._core.das_tile_samples(bf._plan)
    points = bf.grid.coordinates()
    inside, near = cone_predicate(bf.probe, points, 1.0)
    receive = np.linalg.norm(points[None, :, :] - bf.probe.positions[:, None, :], axis=2)  # (element, point)
    tiles = np.arange(len(points)) // 64
    assert bounds.shape == (tiles[-1] + 1, 2)
    checked = 0
    for transmit in tuples:
        s = ((ref.transmit_path_general(transmit, points, bf.probe.positions, C)[None, :] + receive) / C - T0) * FS
        base = np.floor(s)
        used = inside & ~near & (s >= 0) & (s <= N_SAMPLES - 1)
        first, end = bounds[tiles, 0][None, :], bounds[tiles, 1][None, :]
        in_range = (base - 1 >= first) | (base - 1 < 0)  # a tap before the record is out of range
        in_range &= (base + 2 < end) | (base + 2 >= N_SAMPLES)
        assert np.all(in_range[used]), np.argwhere(used & ~in_range)[:5]
        checked += np.count_nonzero(used)
    assert checked > 0.3 * len(points) * n_transmits * 10  # about a cone of elements per point
    spans = bounds[:, 1] - bounds[:, 0]
    assert np.median(spans) < N_SAMPLES / 8  # tight enough for a ring


@pytest.mark.parametrize("interpolation", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("dtype", [np.complex64, np.int16])
def test_ring_matches_reference(rng, monkeypatch, interpolation, dtype):
    bf, tuples = setup(3, dtype, interpolation, n_transmits=3)
    data = random_data(rng, (3, 3, 48, N_SAMPLES), dtype)
    got = run(bf, data, monkeypatch, ring=True)
    want = ref.das_general(data, bf.probe.positions, bf.probe.normals, tuples, bf.grid.coordinates(), fs=FS,
                           fc=FC if dtype == np.complex64 else 0.0, c=C, t0=T0, f_number=1.0, window_kind="hann",
                           interpolation=interpolation).reshape(got.shape)
    assert np.count_nonzero(want) > 0.5 * want.size
    assert_matches_reference(got, want, interpolation)


@pytest.mark.parametrize("interpolation", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("dtype", [np.complex64, np.float32, np.int16])
@pytest.mark.parametrize("n_frames, capacity", [(2, 2), (8, 8), (11, 16), (16, 16)])
@pytest.mark.parametrize("table", [True, False])
def test_ring_changes_no_value(rng, monkeypatch, interpolation, dtype, n_frames, capacity, table):
    """The ring against the whole record, bit for bit, with the receive table and without it
    (whose tile bounds are computed at plan creation and dropped: das_setup.c)."""
    n_transmits = 3 if n_frames == 2 else 1
    bf, _ = setup(capacity, dtype, interpolation, n_transmits, table)
    data = random_data(rng, (n_frames, n_transmits, 48, N_SAMPLES), dtype)
    before = data.copy()
    whole = run(bf, data, monkeypatch, ring=False)
    ringed = run(bf, data, monkeypatch, ring=True)
    np.testing.assert_array_equal(ringed, whole)
    np.testing.assert_array_equal(data, before)
    assert np.count_nonzero(whole) > 0.5 * whole.size


@pytest.mark.parametrize("table", [True, False])
@pytest.mark.parametrize("n_frames", [6, 8])
def test_frame_bits_do_not_depend_on_the_call(rng, monkeypatch, table, n_frames):
    """Linear IQ of 5 to 8 frames is staged in rows of 8 frames, whose entries hold their
    weights in runs of 16 (das_delays.c linear_iq_entries_avx512, das.c iq_pair8_soa_2, on
    AVX-512); 2 to 4 frames in rows of their own, the weights interleaved (iq_pair_2), round a
    ring here.  Every frame must come out with the same bits whichever call holds it (das.c:
    one summation order for every frame), with the table or without, with points of more than
    16 elements (whole runs and a partial last one), and match the float64 reference."""
    bf, tuples = setup(n_frames, n_transmits=3, table=table)
    data = random_data(rng, (n_frames, 3, 48, N_SAMPLES), np.complex64)
    monkeypatch.setenv(RING, "0")
    assert staging(bf, n_frames) == (1, 0)  # rows of 8 frames: staged whole
    whole = bf(data)
    half = n_frames // 2
    parts = np.concatenate([run(bf, data[:half], monkeypatch, ring=True), run(bf, data[half:], monkeypatch, ring=True)])
    np.testing.assert_array_equal(whole, parts)
    singles = np.concatenate([run(bf, data[f:f + 2], monkeypatch, ring=True) for f in range(0, n_frames, 2)])
    np.testing.assert_array_equal(whole, singles)
    assert usbeam._core.das_aperture_counts(bf._plan).max() > 16
    want = ref.das_general(data, bf.probe.positions, bf.probe.normals, tuples, bf.grid.coordinates(), fs=FS, fc=FC,
                           c=C, t0=T0, f_number=1.0, window_kind="hann", interpolation="linear").reshape(whole.shape)
    assert np.count_nonzero(want) > 0.5 * want.size
    assert_matches_reference(whole, want, "linear")


@pytest.mark.parametrize("n_frames", [1, 4])
def test_whole_record_staged_up_to_the_last_tap(rng, n_frames):
    """A record staged whole stages each channel's samples up to the last that any tile reads
    (usbeam_das_tile_samples); the rest are only checked for NaN and inf.  What lies there
    changes no bit of the image, a NaN there is still refused, and the image matches the
    float64 reference."""
    bf, tuples = setup(n_frames)
    windows, ring_rows, staged = usbeam._core.das_staging(bf._plan, n_frames)
    assert (windows, ring_rows) == (1, 0)
    assert staged == usbeam._core.das_tile_samples(bf._plan)[:, 1].max() < N_SAMPLES - 100
    data = random_data(rng, (n_frames, 1, 48, N_SAMPLES), np.complex64)
    got = bf(data)
    want = ref.das_general(data, bf.probe.positions, bf.probe.normals, tuples, bf.grid.coordinates(), fs=FS, fc=FC,
                           c=C, t0=T0, f_number=1.0, window_kind="hann", interpolation="linear").reshape(got.shape)
    assert np.count_nonzero(want) > 0.5 * want.size
    assert_matches_reference(got, want, "linear")
    loud = data.copy()
    loud[..., staged:] = 1e30
    np.testing.assert_array_equal(bf(loud), got)
    loud[-1, 0, 47, N_SAMPLES - 1] = np.inf
    with pytest.raises(ValueError, match="NaN or infinite"):
        bf(loud)


def test_whole_record_where_no_ring_helps(monkeypatch):
    bf, _ = setup(4)
    monkeypatch.setenv(RING, "0")
    assert staging(bf, 1) == (1, 0)  # one frame: das_single.c reads rows = samples
    assert staging(bf, 4)[1] > 0
    monkeypatch.delenv(RING)
    assert staging(bf, 4) == (1, 0)  # 48 x 700 x 4 complex64 samples: 1 MB, under the 12 MiB threshold
    with pytest.raises(ValueError, match="n_frames"):
        staging(bf, 5)


@pytest.mark.parametrize("sample", [0, 3, 350, 699])
def test_bad_sample_in_any_window_is_refused(rng, monkeypatch, sample):
    bf, _ = setup(4)
    data = random_data(rng, (4, 1, 48, N_SAMPLES), np.complex64)
    monkeypatch.setenv(RING, "0")
    good = bf(data)
    data[2, 0, 17, sample] = np.nan
    out = np.full_like(good, 7.0)
    with pytest.raises(ValueError, match=r"NaN or infinite values \(in 1 of 48 channels\)"):
        bf(data, out=out)
    assert np.all(np.isnan(out))  # no partial image, whichever window held it
    data[2, 0, 17, sample] = 0.5
    np.testing.assert_array_equal(bf(data)[[0, 1, 3]], good[[0, 1, 3]])  # and the ring recovers


@pytest.mark.parametrize("interpolation", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("dtype", [np.complex64, np.float32, np.int16])
@pytest.mark.parametrize("n_frames", [2, 5, 8])
def test_prefetch_changes_no_value(rng, monkeypatch, interpolation, dtype, n_frames):
    """The staged lines prefetched (das.c beamform_points: 5 and 8 frames of IQ a transmit's lines
    ahead, the rest entries formed a block ahead with their rows), on a record staged whole:
    the same bits as without."""
    n_transmits = 3 if n_frames == 2 else 1
    bf, _ = setup(n_frames, dtype, interpolation, n_transmits)
    data = random_data(rng, (n_frames, n_transmits, 48, N_SAMPLES), dtype)
    plain = same_bits_prefetched(bf, data, monkeypatch)
    assert np.count_nonzero(plain) > 0.5 * plain.size


@pytest.mark.parametrize("n_frames", [8, 16])
@pytest.mark.parametrize("interpolation", ["linear", "cubic"])
def test_prefetch_of_apertures_wider_than_a_block(rng, monkeypatch, interpolation, n_frames):
    """A point's entries go in blocks of at most 512 (das.c beamform_points, which with the
    prefetch of 16 frames forms each block while the previous one is summed): a 24 x 24 matrix
    array at f-number 0, 576 elements a point, so every point takes a block of 512 and one of
    64 (8 frames: the lines of 576 elements, prefetch_transmit_lines).  The same bits with and
    without the prefetch, and the float64 reference."""
    probe = usbeam.MatrixArray(nx=24, ny=24, pitch_x=3e-4, pitch_y=3e-4)
    seq = [usbeam.PlaneWave(0.1, -0.05), usbeam.DivergingWave((0.5e-3, 0.0, -4e-3))]
    tuples = [("plane", 0.1, -0.05), ("diverging", (0.5e-3, 0.0, -4e-3))]
    grid = usbeam.Grid(x=np.linspace(-1e-3, 1e-3, 3), z=np.linspace(4e-3, 6e-3, 3), y=np.linspace(-0.5e-3, 0.5e-3, 2))
    bf = usbeam.Beamformer(probe, seq, grid, fs=FS, fc=FC, c=C, t0=T0, n_samples=N_SAMPLES, f_number=0.0,
                           window="hann", interpolation=interpolation, n_frames=n_frames)
    data = random_data(rng, (n_frames, len(seq), probe.n_elements, N_SAMPLES), np.complex64)
    plain = same_bits_prefetched(bf, data, monkeypatch)
    want = ref.das_general(data, probe.positions, probe.normals, tuples, grid.coordinates(), fs=FS, fc=FC, c=C, t0=T0,
                           f_number=0.0, window_kind="hann", interpolation=interpolation, surface=True).reshape(plain.shape)
    assert np.count_nonzero(want) > 0.9 * want.size
    assert_matches_reference(plain, want, interpolation)


@pytest.mark.parametrize("interpolation", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("table", [True, False])
def test_prefetch_of_a_transmits_lines_on_a_grid(rng, monkeypatch, interpolation, table):
    """IQ of 8 frames on a linear array and a grid, x fastest (das.c prefetch_transmit_lines: each
    subtile a grid row's points, steered plane waves whose first taps move along the row): the
    same bits with the lines prefetched and without, and the float64 reference."""
    probe = usbeam.LinearArray(n_elements=64, pitch=3e-4, width=2.7e-4)
    angles = np.deg2rad([-10.0, 0.0, 10.0])
    seq = [usbeam.PlaneWave(a) for a in angles]
    tuples = [("plane", a, 0.0) for a in angles]
    grid = usbeam.Grid(x=np.linspace(-9e-3, 9e-3, 70), z=np.linspace(4e-3, 16e-3, 6))
    n_frames = 8
    bf = usbeam.Beamformer(probe, seq, grid, fs=FS, fc=FC, c=C, t0=T0, n_samples=N_SAMPLES, f_number=1.5,
                           window="hann", interpolation=interpolation, n_frames=n_frames,
                           max_table_bytes=None if table else 1)
    assert (usbeam._core.das_table_bytes(bf._plan) > 0) == table
    data = random_data(rng, (n_frames, len(seq), probe.n_elements, N_SAMPLES), np.complex64)
    plain = same_bits_prefetched(bf, data, monkeypatch)
    want = ref.das_general(data, probe.positions, probe.normals, tuples, grid.coordinates(), fs=FS, fc=FC, c=C, t0=T0,
                           f_number=1.5, window_kind="hann", interpolation=interpolation).reshape(plain.shape)
    assert np.count_nonzero(want) > 0.9 * want.size
    assert_matches_reference(plain, want, interpolation)


@pytest.mark.parametrize("dtype", [np.complex64, np.float32, np.int16])
@pytest.mark.parametrize("n_frames", [1, 3])
def test_few_frames_staged_and_checked(rng, dtype, n_frames):
    """Fewer than 8 frames are staged 8 samples of a frame at a time (700 samples: 87 whole
    blocks and 4 left one at a time): the image against the float64 reference, and a NaN or an
    infinity refused wherever it lies, in a block or in the last samples."""
    bf, tuples = setup(n_frames, dtype)
    data = random_data(rng, (n_frames, 1, 48, N_SAMPLES), dtype)
    got = bf(data)
    want = ref.das_general(data, bf.probe.positions, bf.probe.normals, tuples, bf.grid.coordinates(), fs=FS,
                           fc=FC if dtype == np.complex64 else 0.0, c=C, t0=T0, f_number=1.0, window_kind="hann",
                           interpolation="linear").reshape(got.shape)
    assert np.count_nonzero(want) > 0.5 * want.size
    assert_matches_reference(got, want, "linear")
    if dtype == np.int16:
        return  # every int16 is finite
    for sample, bad in ((8, np.nan), (345, np.inf), (N_SAMPLES - 1, np.nan)):
        spoilt = data.copy()
        spoilt[n_frames - 1, 0, 30, sample] = bad
        with pytest.raises(ValueError, match="NaN or infinite"):
            bf(spoilt)
