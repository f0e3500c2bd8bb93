"""The 1-frame CPU DAS path with the points in the vector lanes (issue 21,
csrc/beamform/das_lanes.c): a 1-frame plan on an AVX-512 machine sums 16 consecutive points at
a time from its lane table (s_rx per lane and element of the group's apertures, the receive
rotation formed per row, each row's taps from two loads and a permutation of the staged row,
or a gather where the lanes' taps spread wider than the window).  Checked against the float64
references (tests/reference/das.py, das and das_general) for every interpolation, input type,
window, several transmits (more than the 4 a vector block once held), grids whose last group is
partial, points outside every aperture, lanes spread too wide for the window, and a convex
probe; and against das_single.c (USBEAM_DAS_LANES=0) on the same plan, which differs in the
order of float operations only.  Each also without a table (max_table_bytes=1): the rows of
a group are then formed at execute from the geometry (form_rows: linear, convex and matrix
arrays, every window; a linear array's in the fixed table's units where its group's rows fit
them, in double where not, as in the gather and deep-phase tests), and must match the
references and the table path alike; on a grid centred on the array half the groups take their
mirror groups' rows instead (usbeam_das_lanes_mirrors): the same checks and the deep phase.  One transmit of IQ at fs = 4 fc takes its input staged
in quarter turns (sample n times j^n) and rotates each lane by its sample's fraction alone:
checked against the reference and the general path.  Plans of a few frames (IQ up to 5, 7 of
one transmit at fs = 4 fc or of 8 and more; RF up to 12) take this path frame by frame, in
blocks of frames (one from a table, several where the rows are formed): checked against the
reference and bit for bit against 1-frame plans, with bad data in one frame only.  Determinism
across thread counts: test_das_single.py (its children build 1-frame plans, which take this
path on AVX-512, with and without a table)."""
import numpy as np
import pytest

import usbeam
from reference import das as ref
from tolerances import TOLERANCES
from das_checks import random_data, assert_matches_reference

FS, FC, C, T0 = 20e6, 5e6, 1540.0, 1.2e-6
N_SAMPLES = 900


def lane_rows(bf):
    return usbeam._core.das_lane_rows(bf._plan)


def needs_lanes(bf):
    if lane_rows(bf) == 0:
        pytest.skip("the lane path needs AVX-512 (this machine's DAS takes das_single.c)")


LAWS = [usbeam.PlaneWave(0.1), usbeam.DivergingWave((2e-3, -5e-3)), usbeam.PlaneWave(-0.2), usbeam.PlaneWave(0.0),
        usbeam.DivergingWave((-3e-3, -8e-3))]
TUPLES = [("plane", 0.1), ("diverging", 2e-3, -5e-3), ("plane", -0.2), ("plane", 0.0), ("diverging", -3e-3, -8e-3)]


def needs_lanes_of(bf, budget):
    needs_lanes(bf)
    assert (bf.table_bytes() == 0) == (budget == 1)  # budget 1: the rows formed at execute


@pytest.mark.parametrize("interpolation", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("dtype", [np.complex64, np.float32, np.int16])
@pytest.mark.parametrize("window", ["rect", "hann", "tukey"])
@pytest.mark.parametrize("budget", [None, 1])
def test_lanes_match_the_reference(rng, interpolation, dtype, window, budget):
    probe = usbeam.LinearArray(40, 3e-4, width=2.5e-4)
    # 17 x 23 = 391 points: the last group of 16 holds 7; x past the array's ends, z from 0.4 mm
    grid = usbeam.Grid(x=np.linspace(-8e-3, 8.5e-3, 17), z=np.linspace(4e-4, 1.6e-2, 23))
    n_tx = 5
    bf = usbeam.Beamformer(probe, LAWS[:n_tx], grid, fs=FS, fc=FC, c=C, t0=T0, n_samples=N_SAMPLES, f_number=1.2,
                           window=window, tukey_alpha=0.4, interpolation=interpolation, dtype=dtype, n_frames=1,
                           max_table_bytes=budget)
    needs_lanes_of(bf, budget)
    data = random_data(rng, (1, n_tx, probe.n_elements, N_SAMPLES), dtype)
    before = data.copy()
    got = bf(data)
    np.testing.assert_array_equal(data, before)
    want = ref.das(data, probe.x, TUPLES[:n_tx], grid.coordinates(), fs=FS, fc=FC if dtype == np.complex64 else 0.0, c=C,
                   t0=T0, f_number=1.2, window_kind=window, tukey_alpha=0.4, interpolation=interpolation)
    assert np.count_nonzero(want) > 0.5 * want.size
    assert_matches_reference(got, want, interpolation)


@pytest.mark.parametrize("interpolation", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("budget", [None, 1])
@pytest.mark.parametrize("half_width, table", [(16e-3, "double"), (5e-3, "fixed")])
def test_lanes_too_far_apart_for_the_window_take_the_gather(rng, interpolation, budget, half_width, table):
    """16 lanes 2 mm (or 0.6 mm) apart at 2-6 mm depth: an element's taps for the group span
    more than the 32-sample window, so those rows are gathered; the image still matches the
    reference.  At 2 mm an element's row spans ~400 samples (~100 wavelengths), more than the
    fixed-point table's offsets hold, so the table is in double (16 x 8 bytes a row and more);
    at 0.6 mm it is in fixed point (16 x 4 bytes a row and a base, das_lanes.c)."""
    probe = usbeam.LinearArray(64, 3e-4, width=2.5e-4)
    grid = usbeam.Grid(x=np.linspace(-half_width, half_width, 17), z=np.linspace(2e-3, 6e-3, 5))
    bf = usbeam.Beamformer(probe, [usbeam.PlaneWave(0.05)], grid, fs=FS, fc=FC, c=C, t0=0.0, n_samples=N_SAMPLES,
                           f_number=0.0, interpolation=interpolation, n_frames=1, max_table_bytes=budget)
    needs_lanes_of(bf, budget)
    if budget is None:
        assert (usbeam._core.das_lane_fixed_bits(bf._plan) > 0) == (table == "fixed")
        # one transmit at fs = 4 fc: the fixed table's rows hold each lane's first tap (gathered
        # from its row's least) and fraction (lane_direct, 2); the double table's do not (1)
        assert usbeam._core.das_lane_quarter(bf._plan) == (2 if table == "fixed" else 1)
    pts = grid.coordinates()
    spread = np.ptp(np.linalg.norm(pts[:16, None, :] - probe.positions[None, :, :], axis=2), axis=0) * FS / C
    assert spread.min() > 32  # every element's row: lanes > 32 samples apart
    data = random_data(rng, (1, 1, probe.n_elements, N_SAMPLES), np.complex64)
    want = ref.das(data, probe.x, [("plane", 0.05)], pts, fs=FS, fc=FC, c=C, t0=0.0, f_number=0.0,
                   interpolation=interpolation)
    assert_matches_reference(bf(data), want, interpolation)


def test_lanes_match_the_per_point_path(rng, monkeypatch):
    """The same plan built with USBEAM_DAS_LANES=0 takes das_single.c: the same weights, summed
    in another order (float rounding only)."""
    probe = usbeam.LinearArray(128, 3e-4, width=2.7e-4)
    grid = usbeam.Grid(x=np.linspace(-19e-3, 19e-3, 96), z=np.linspace(5e-3, 40e-3, 80))
    kw = dict(fs=FS, fc=FC, c=C, t0=0.0, n_samples=2048, f_number=1.7, n_frames=1)
    data = random_data(rng, (1, 3, 128, 2048), np.complex64)
    laws = [usbeam.PlaneWave(a) for a in (-0.087, 0.0, 0.087)]
    lanes = usbeam.Beamformer(probe, laws, grid, **kw)
    needs_lanes(lanes)
    monkeypatch.setenv("USBEAM_DAS_LANES", "0")
    single = usbeam.Beamformer(probe, laws, grid, **kw)
    assert lane_rows(single) == 0
    a, b = lanes(data), single(data)
    assert not np.array_equal(a, b)  # two paths ran
    assert np.linalg.norm(a - b) <= TOLERANCES["das_rel_l2"] * np.linalg.norm(b)
    # the lane table: 4 bytes a (point, element) pair (s_rx) where the receive table holds 16,
    # plus the groups' union apertures and their transmit parts
    assert lanes.table_bytes() < single.table_bytes()


@pytest.mark.parametrize("interpolation", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("window", ["rect", "hann"])
@pytest.mark.parametrize("budget", [None, 1])
@pytest.mark.parametrize("law", [0, 1])
def test_one_transmit_at_fs_4fc_sums_input_staged_in_quarter_turns(rng, interpolation, window, budget, law):
    """One transmit at fs = 4 fc (live imaging's usual case): sample n is staged times j^n, which
    is exact, and each lane is rotated by its sample's fraction alone (das_lanes.c QUARTER).
    Against the float64 reference, with t0 != 0 (its phase enters the one rotation left over),
    a plane and a diverging wave, the table (whose rows then hold each lane's first tap and
    fraction: lane_direct) and the rows formed at execute; and against the general path of the
    same geometry at fs (1 + 2^-50), not a quarter-turn rate, which differs in float rounding
    only."""
    probe = usbeam.LinearArray(40, 3e-4, width=2.5e-4)
    grid = usbeam.Grid(x=np.linspace(-8e-3, 8.5e-3, 17), z=np.linspace(4e-4, 1.6e-2, 23))
    kw = dict(fc=FC, c=C, t0=T0, n_samples=N_SAMPLES, f_number=1.2, window=window, interpolation=interpolation,
              n_frames=1, max_table_bytes=budget)
    bf = usbeam.Beamformer(probe, LAWS[law:law + 1], grid, fs=FS, **kw)
    needs_lanes_of(bf, budget)
    # 2: the table's rows hold each lane's first tap and fraction (lane_direct)
    assert usbeam._core.das_lane_quarter(bf._plan) == (2 if budget is None else 1)
    data = random_data(rng, (1, 1, probe.n_elements, N_SAMPLES), np.complex64)
    before = data.copy()
    got = bf(data)
    np.testing.assert_array_equal(data, before)
    want = ref.das(data, probe.x, TUPLES[law:law + 1], grid.coordinates(), fs=FS, fc=FC, c=C, t0=T0, f_number=1.2,
                   window_kind=window, interpolation=interpolation)
    assert np.count_nonzero(want) > 0.5 * want.size
    assert_matches_reference(got, want, interpolation)
    general = usbeam.Beamformer(probe, LAWS[law:law + 1], grid, fs=FS * (1 + 2.0**-50), **kw)
    assert usbeam._core.das_lane_quarter(general._plan) == 0
    assert_matches_reference(got, general(data), interpolation)


def test_quarter_turns_only_for_one_transmit_of_iq_at_fs_4fc():
    """The quarter-turn staging needs all three: IQ (RF has no rotation), one transmit (several
    share each row's receive rotation instead) and fs = 4 fc exactly (else j^n is not the turn
    of a whole sample)."""
    probe = usbeam.LinearArray(16, 3e-4, width=2.5e-4)
    grid = usbeam.Grid(x=np.linspace(-2e-3, 2e-3, 8), z=np.linspace(2e-3, 6e-3, 8))

    def quarter(laws, fs, dtype):
        bf = usbeam.Beamformer(probe, laws, grid, fs=fs, fc=FC, c=C, n_samples=N_SAMPLES, dtype=dtype, n_frames=1)
        needs_lanes(bf)
        return usbeam._core.das_lane_quarter(bf._plan)

    assert quarter(LAWS[:1], FS, np.complex64) == 2
    assert quarter(LAWS[:2], FS, np.complex64) == 0
    assert quarter(LAWS[:1], FS, np.float32) == 0
    assert quarter(LAWS[:1], 3 * FC, np.complex64) == 0
    assert quarter(LAWS[:1], FS * (1 + 2.0**-50), np.complex64) == 0


def convex_sector():
    """A 48-element convex probe, a sector 17.5 mm deep (half the record) and two diverging waves,
    with the reference's transmit tuples."""
    probe = usbeam.ConvexArray(n_elements=48, pitch=3e-4, radius=0.012, element_width=2.6e-4)
    h = probe.apothem
    grid = usbeam.PolarGrid(np.linspace(probe.radius + 1e-3, probe.radius + 17.5e-3, 37), np.linspace(-0.5, 0.5, 29),
                            apex=(0.0, -h))
    laws = [usbeam.DivergingWave((0.0, -h)), usbeam.DivergingWave((1e-3, -h - 2e-3))]
    tuples = [("diverging", (0.0, 0.0, -h)), ("diverging", (1e-3, 0.0, -h - 2e-3))]
    return probe, grid, laws, tuples


@pytest.mark.parametrize("f_number, window", [(1.0, "hann"), (1.0, "rect"), (0.8, "tukey"), (0.0, "hann")])
@pytest.mark.parametrize("budget", [None, 1])
def test_lanes_on_a_convex_sector(rng, f_number, window, budget):
    probe, grid, laws, tuples = convex_sector()
    bf = usbeam.Beamformer(probe, laws, grid, fs=FS, fc=FC, c=C, t0=T0, n_samples=N_SAMPLES, f_number=f_number,
                           window=window, tukey_alpha=0.5, interpolation="linear", n_frames=1, max_table_bytes=budget)
    needs_lanes_of(bf, budget)
    data = random_data(rng, (1, 2, 48, N_SAMPLES), np.complex64)
    want = ref.das_general(data, probe.positions, probe.normals, tuples, grid.coordinates(), fs=FS, fc=FC, c=C, t0=T0,
                           f_number=f_number, window_kind=window, tukey_alpha=0.5,
                           interpolation="linear").reshape(grid.shape)
    assert np.count_nonzero(want) > 0.5 * want.size
    assert_matches_reference(bf(data)[0], want, "linear")


@pytest.mark.parametrize("budget", [None, 1])
@pytest.mark.parametrize("n_frames, bad_frame, bad", [(1, 0, np.inf), (3, 2, np.nan)])
def test_lanes_refuse_bad_data_and_leave_no_partial_image(rng, budget, n_frames, bad_frame, bad):
    """One frame, and a plan of a few frames with the bad sample in its last frame only (staged
    a block of frames at a time, so that the first blocks have run when it is found): refused,
    every output value NaN; the good frames of a call that
    leaves the bad one out are those of the whole call once repaired."""
    probe = usbeam.LinearArray(32, 3e-4, width=2.5e-4)
    grid = usbeam.Grid(x=np.linspace(-4e-3, 4e-3, 20), z=np.linspace(2e-3, 1.2e-2, 20))
    bf = usbeam.Beamformer(probe, [usbeam.PlaneWave(0.0)], grid, fs=FS, fc=FC, c=C, n_samples=N_SAMPLES, n_frames=n_frames,
                           max_table_bytes=budget)
    needs_lanes_of(bf, budget)
    data = random_data(rng, (n_frames, 1, 32, N_SAMPLES), np.complex64)
    data[bad_frame, 0, 5, 300] = bad
    out = np.zeros((n_frames,) + grid.shape, np.complex64)
    with pytest.raises(ValueError, match="NaN or infinite"):
        bf(data, out=out)
    assert np.all(np.isnan(out))
    if n_frames > 1:
        good = bf(data[:bad_frame])
        data[bad_frame, 0, 5, 300] = 0.0
        np.testing.assert_array_equal(bf(data)[:bad_frame], good)


@pytest.mark.parametrize("window", ["rect", "hann"])
@pytest.mark.parametrize("probe_kind", ["linear", "convex", "matrix"])
def test_rows_formed_at_execute_match_the_table(rng, window, probe_kind):
    """The same plan with its lane table and without (max_table_bytes=1): the rows formed per
    group at execute hold the table's s_rx (the same double geometry) and its window weights
    (formed in float there, rounded from double here), so the images agree to float rounding."""
    if probe_kind == "linear":
        probe = usbeam.LinearArray(64, 3e-4, width=2.5e-4)
        grid = usbeam.Grid(x=np.linspace(-10e-3, 10e-3, 45), z=np.linspace(3e-3, 25e-3, 37))
        laws = [usbeam.PlaneWave(a) for a in (-0.1, 0.0, 0.12)]
    elif probe_kind == "convex":
        probe = usbeam.ConvexArray(n_elements=64, pitch=3e-4, radius=0.015, element_width=2.6e-4)
        grid = usbeam.PolarGrid(np.linspace(probe.radius + 2e-3, probe.radius + 25e-3, 41), np.linspace(-0.6, 0.6, 33),
                                apex=(0.0, -probe.apothem))
        laws = [usbeam.DivergingWave((0.0, -probe.apothem)), usbeam.DivergingWave((2e-3, -probe.apothem - 3e-3))]
    else:
        probe = usbeam.MatrixArray(nx=8, ny=6, pitch_x=3e-4, pitch_y=3e-4)
        grid = usbeam.Grid(x=np.linspace(-2e-3, 2e-3, 9), z=np.linspace(2e-3, 8e-3, 11), y=np.linspace(-1e-3, 1e-3, 5))
        laws = [usbeam.PlaneWave(0.1, -0.05), usbeam.DivergingWave((0.5e-3, 0.0, -4e-3))]
    kw = dict(fs=FS, fc=FC, c=C, t0=T0, n_samples=N_SAMPLES, f_number=1.0, window=window, n_frames=1)
    table = usbeam.Beamformer(probe, laws, grid, **kw)
    formed = usbeam.Beamformer(probe, laws, grid, max_table_bytes=1, **kw)
    needs_lanes_of(table, None)
    needs_lanes_of(formed, 1)
    assert lane_rows(formed) == lane_rows(table)
    data = random_data(rng, (1, len(laws), probe.n_elements, N_SAMPLES), np.complex64)
    a, b = formed(data), table(data)
    assert np.count_nonzero(b) > 0.5 * b.size
    assert np.linalg.norm(a - b) <= TOLERANCES["das_rel_l2"] * np.linalg.norm(b)


def one_term_phase_deep(fs, budget, n_elements=2, n_x=9):
    """The last element's channel of ones, 20 cm deep at 15 MHz (~3900 turns), the others
    zero: each output is one term, whose phase against the float64 reference must stay within
    das_receive_phase_rad and its magnitude within float rounding.  Returns the plan."""
    fc = 15e6
    probe = usbeam.LinearArray(n_elements, 3e-4, width=2.5e-4)
    grid = usbeam.Grid(x=np.linspace(-2e-3, 2e-3, n_x), z=np.linspace(2e-3, 0.2, 256))
    n_samples = int(0.42 / C * fs) + 8
    data = np.zeros((1, 1, n_elements, n_samples), np.complex64)
    data[:, :, -1, :] = 1.0
    bf = usbeam.Beamformer(probe, [usbeam.PlaneWave(0.05)], grid, fs=fs, fc=fc, c=C, n_samples=n_samples,
                           f_number=0.0, interpolation="linear", n_frames=1, max_table_bytes=budget)
    needs_lanes_of(bf, budget)
    got = bf(data).ravel()
    want = ref.das(data, probe.x, [("plane", 0.05)], grid.coordinates(), fs=fs, fc=fc, c=C, t0=0.0,
                   f_number=0.0).ravel()
    assert np.all(np.abs(want) > 0.5)
    phase_error = np.abs(np.angle(got / want))
    assert phase_error.max() <= TOLERANCES["das_receive_phase_rad"], phase_error.max()
    np.testing.assert_allclose(np.abs(got), np.abs(want), rtol=1e-6)
    return bf


@pytest.mark.parametrize("fs", [100e6, 60e6, 15e6, 7.5e6, 4e6])
def test_fixed_point_table_phase_whatever_the_sampling_rate(fs):
    """The fixed-point lane table's unit follows fc / fs (2^-bits sample, at most 2^-24 turn of
    the receive rotation, das_lanes.c fixed_bits), and its turns are formed in integers (from
    64-bit products at 100 MHz; from one 32-bit product where fc / fs is a dyadic fraction, at
    60, 15, 7.5 and 4 MHz; at 60 MHz, 4 fc, each lane's rotation comes from its sample's fraction
    alone, the whole samples' quarter turns staged with the input): the phase of a one-term
    output stays within das_receive_phase_rad from fs = 6.7 fc (RF-like) to fs < fc (decimated
    IQ), 20 cm deep (one_term_phase_deep)."""
    bf = one_term_phase_deep(fs, None)
    assert usbeam._core.das_lane_fixed_bits(bf._plan) == 24 + int(np.ceil(np.log2(15e6 / fs)))  # the fixed-point table
    assert usbeam._core.das_lane_quarter(bf._plan) == (2 if fs == 60e6 else 0)  # 4 fc: staged in quarter turns


@pytest.mark.parametrize("fs", [100e6, 60e6, 15e6, 4e6])
@pytest.mark.parametrize("n_elements", [2, 64])
def test_formed_rows_phase_deep_whatever_the_sampling_rate(fs, n_elements):
    """Without a table the rows' distances are roots by Newton steps from a 14-bit estimate
    (das_lanes.c newton_sqrt, relative error < 6e-13), summed in the fixed table's units where
    a group's rows fit them (at fs = 4 MHz, 2^-26 sample: 8 samples, some do not): the same
    phase bound, 20 cm deep, from fs = 6.7 fc to fs < fc (one_term_phase_deep).  With 64
    evenly spaced elements, d^2 is stepped from row to row (form_rows) and the one term is the
    64th row of every group: the steps' rounding, piled up over 63 rows, within the bound."""
    one_term_phase_deep(fs, 1, n_elements)


@pytest.mark.parametrize("fs", [100e6, 60e6, 15e6])
def test_mirrored_rows_phase_deep(fs):
    """The same bound where half the groups take their mirror group's rows (a grid of 32
    columns centred on 64 elements: das_lanes.c usbeam_das_lanes_mirrors): the one term, from the
    last element, is then the first row of the source's, formed for the mirror point and element."""
    bf = one_term_phase_deep(fs, 1, 64, n_x=32)
    assert usbeam._core.das_lane_mirrored(bf._plan) == 256


@pytest.mark.parametrize("layout", ["uneven", "at the face"])
def test_formed_rows_where_d2_cannot_be_stepped(rng, layout):
    """form_rows steps each row's d^2 from the last where the elements are evenly spaced
    (das_lanes.c lane_pitch) and the points are not at the array's face; here each row's d^2
    is formed as it is: elements moved up to 20 um off their even spacing (an ElementArray on
    the x axis), or a grid whose first depths are 0 and 0.1 um.  Without a table the image
    matches the reference and the table path."""
    lin = usbeam.LinearArray(48, 3e-4, width=2.4e-4)
    z = np.linspace(2e-3, 1.5e-2, 21)
    if layout == "uneven":
        positions = lin.positions.copy()
        positions[:, 0] += rng.uniform(-2e-5, 2e-5, lin.n_elements)
        probe = usbeam.ElementArray(positions, width=lin.width)
    else:
        probe = lin
        z = np.concatenate([[0.0, 1e-7], z])
    grid = usbeam.Grid(x=np.linspace(-8e-3, 8e-3, 33), z=z)
    kw = dict(fs=FS, fc=FC, c=C, t0=T0, n_samples=N_SAMPLES, f_number=0.0, interpolation="linear", n_frames=1)
    formed = usbeam.Beamformer(probe, [usbeam.PlaneWave(0.1)], grid, max_table_bytes=1, **kw)
    table = usbeam.Beamformer(probe, [usbeam.PlaneWave(0.1)], grid, **kw)
    needs_lanes_of(formed, 1)
    data = random_data(rng, (1, 1, probe.n_elements, N_SAMPLES), np.complex64)
    got = formed(data)
    want = ref.das(data, probe.positions[:, 0], [("plane", 0.1)], grid.coordinates(), fs=FS, fc=FC, c=C, t0=T0,
                   f_number=0.0, interpolation="linear")
    assert np.count_nonzero(want) > 0.5 * want.size
    assert_matches_reference(got, want, "linear")
    b = table(data)
    assert np.linalg.norm(got - b) <= TOLERANCES["das_rel_l2"] * np.linalg.norm(b)


@pytest.mark.parametrize("interpolation", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("dtype", [np.complex64, np.float32])
@pytest.mark.parametrize("window", ["rect", "hann"])
@pytest.mark.parametrize("n_x, n_tx, n_frames, fs", [(64, 1, 1, FS), (128, 3, 1, FS), (48, 2, 3, 25e6)])
def test_groups_mirrored_about_the_array_take_their_sources_rows(rng, interpolation, dtype, window, n_x, n_tx, n_frames,
                                                                 fs):
    """A grid centred on the array, without a table: a group of 16 points that mirrors an
    earlier group about the array's centre takes that group's formed rows, in reverse row and
    lane order, instead of forming its own (das_lanes.c usbeam_das_lanes_mirrors).  Rows of 4
    groups (source and mirror in one tile; at fs = 4 fc the quarter-turn sums), of 8 (a tile
    and the tile paired with it), and of 3 over 3 frames (tiles across rows of points, some of
    whose pairs lie in unpaired tiles and form their own).  The image matches the float64
    reference and the table path."""
    probe = usbeam.LinearArray(48, 3e-4, width=2.5e-4)
    n_z = 21
    grid = usbeam.Grid(x=np.linspace(-7e-3, 7e-3, n_x), z=np.linspace(1e-3, 1.6e-2, n_z))
    kw = dict(fs=fs, fc=FC, c=C, t0=T0, n_samples=N_SAMPLES, f_number=1.2, window=window, interpolation=interpolation,
              dtype=dtype, n_frames=n_frames)
    formed = usbeam.Beamformer(probe, LAWS[:n_tx], grid, max_table_bytes=1, **kw)
    table = usbeam.Beamformer(probe, LAWS[:n_tx], grid, **kw)
    needs_lanes_of(formed, 1)
    mirrored = usbeam._core.das_lane_mirrored(formed._plan)
    assert 0 < mirrored <= n_z * (n_x // 16 // 2), mirrored
    assert usbeam._core.das_lane_mirrored(table._plan) == 0
    data = random_data(rng, (n_frames, n_tx, probe.n_elements, N_SAMPLES), dtype)
    got = formed(data)
    want = ref.das(data, probe.x, TUPLES[:n_tx], grid.coordinates(), fs=fs, fc=FC if dtype == np.complex64 else 0.0,
                   c=C, t0=T0, f_number=1.2, window_kind=window, interpolation=interpolation)
    assert np.count_nonzero(want) > 0.5 * want.size
    assert_matches_reference(got.reshape(want.shape), want, interpolation)
    b = table(data)
    assert np.linalg.norm(got - b) <= TOLERANCES["das_rel_l2"] * np.linalg.norm(b)


@pytest.mark.parametrize("interpolation", ["nearest", "linear", "cubic"])
def test_samples_past_the_deepest_tap_are_checked_not_staged(rng, interpolation):
    """A 1-frame call from the lane table stages each channel up to the last sample a valid
    lane reads (lane_reach) and only checks the rest for NaN and inf (das.c, the tail): every
    in-range tap of every (point, transmit, element in the point's cone), s = ((tau_tx +
    |p - e| / c) - t0) fs from tests/reference/das.py, lies below the staged count, which stops
    short of the record on a sector shallower than it; a NaN or an infinity past it is still
    refused; and the image matches the float64 reference."""
    from test_das_sector_aperture import cone_predicate

    probe, grid, laws, tuples = convex_sector()
    bf = usbeam.Beamformer(probe, laws, grid, fs=FS, fc=FC, c=C, t0=T0, n_samples=N_SAMPLES, f_number=1.0,
                           window="hann", interpolation=interpolation, n_frames=1)
    needs_lanes(bf)
    staged = usbeam._core.das_staging(bf._plan, 1)[2]
    points = grid.coordinates()
    inside, near = cone_predicate(probe, points, 1.0)
    receive = np.linalg.norm(points[None, :, :] - probe.positions[:, None, :], axis=2)  # (element, point)
    last_tap = {"nearest": lambda s: np.floor(s + 0.5), "linear": lambda s: np.floor(s) + 1,
                "cubic": lambda s: np.floor(s) + 2}[interpolation]
    lo, hi = {"nearest": (0, N_SAMPLES - 1), "linear": (0, N_SAMPLES - 2), "cubic": (1, N_SAMPLES - 3)}[interpolation]
    deepest, checked = -1, 0
    for transmit in tuples:
        s = ((ref.transmit_path_general(transmit, points, probe.positions, C)[None, :] + receive) / C - T0) * FS
        used = inside & ~near & (s >= lo) & (s <= hi)
        deepest = max(deepest, int(last_tap(s[used]).max()))
        checked += np.count_nonzero(used)
    assert checked > 0.3 * len(points) * len(tuples) * 10  # about a cone of elements per point
    assert deepest < staged <= deepest + 2, (deepest, staged)  # every tap read; ~a third of the record is not
    assert staged < 0.7 * N_SAMPLES
    data = random_data(rng, (1, 2, 48, N_SAMPLES), np.complex64)
    got = bf(data)
    want = ref.das_general(data, probe.positions, probe.normals, tuples, points, fs=FS, fc=FC, c=C, t0=T0,
                           f_number=1.0, window_kind="hann", interpolation=interpolation).reshape(got.shape)
    assert np.count_nonzero(want) > 0.5 * want.size
    assert_matches_reference(got, want, interpolation)
    for sample, bad in ((staged, np.nan), (N_SAMPLES - 1, np.inf)):
        spoilt = data.copy()
        spoilt[0, 1, 7, sample] = bad
        out = np.zeros_like(got)
        with pytest.raises(ValueError, match=r"NaN or infinite values \(in 1 of 96 channels\)"):
            bf(spoilt, out=out)
        assert np.all(np.isnan(out))


@pytest.mark.parametrize("interpolation", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("dtype", [np.complex64, np.int16])
@pytest.mark.parametrize("budget", [None, 1])
@pytest.mark.parametrize("n_tx, fs, frames_iq, frames_rf",
                         [(3, FS, 4, 4), (1, 4 * FC, 7, 7), (1, 17e6, 5, 12), (5, FS, 5, 9)])
def test_few_frames_take_the_lanes_frame_by_frame(rng, interpolation, dtype, budget, n_tx, fs, frames_iq, frames_rf):
    """A plan of a few frames (IQ up to 5, 7 of one transmit at fs = 4 fc or of 8 and more; RF
    up to 12) holds the lane table too and beamforms each frame as a 1-frame plan would, a
    block of frames staged at a time (from a
    table one frame, a 1-frame call; with rows formed at execute up to 16 frames x transmits,
    a group's frames summed one after the other from the rows formed once): against the float64
    reference, and bit for bit against 1-frame plans of each frame; a call of fewer frames than
    the plan's gives the same frames.  Several transmits (the receive rotation kept for the
    next frames of a block), one transmit at fs = 4 fc (quarter turns: every frame staged so),
    one at another rate (one transmit: the rotation kept for a block's frames alone), and 5
    transmits of 5 IQ or 9 RF frames (formed rows: blocks of 3 frames, the last partial)."""
    n_frames = frames_iq if dtype == np.complex64 else frames_rf
    probe = usbeam.LinearArray(40, 3e-4, width=2.5e-4)
    grid = usbeam.Grid(x=np.linspace(-8e-3, 8.5e-3, 17), z=np.linspace(4e-4, 1.6e-2, 23))
    kw = dict(fs=fs, fc=FC, c=C, t0=T0, n_samples=N_SAMPLES, f_number=1.2, interpolation=interpolation, dtype=dtype,
              max_table_bytes=budget)
    bf = usbeam.Beamformer(probe, LAWS[:n_tx], grid, n_frames=n_frames, **kw)
    needs_lanes_of(bf, budget)
    data = random_data(rng, (n_frames, n_tx, probe.n_elements, N_SAMPLES), dtype)
    before = data.copy()
    got = bf(data)
    np.testing.assert_array_equal(data, before)
    want = ref.das(data, probe.x, TUPLES[:n_tx], grid.coordinates(), fs=fs, fc=FC if dtype == np.complex64 else 0.0, c=C,
                   t0=T0, f_number=1.2, interpolation=interpolation)
    assert np.count_nonzero(want) > 0.5 * want.size
    assert_matches_reference(got, want, interpolation)
    one = usbeam.Beamformer(probe, LAWS[:n_tx], grid, n_frames=1, **kw)
    for f in range(n_frames):
        np.testing.assert_array_equal(got[f], one(data[f:f + 1])[0])
    np.testing.assert_array_equal(bf(data[:2]), got[:2])


def test_lanes_for_few_frames_only():
    """Where the frames fill more of a multi-frame kernel's vector (IQ: 6 and more, 8 of one
    transmit at fs = 4 fc or of 8 transmits and more; RF: 13 and more) the plan keeps das.c's
    multi-frame kernels (measured faster there: das_lanes.c LANES_MAX_FRAMES_IQ); below, the
    lanes."""
    probe = usbeam.LinearArray(16, 3e-4, width=2.5e-4)
    grid = usbeam.Grid(x=np.linspace(-2e-3, 2e-3, 8), z=np.linspace(2e-3, 6e-3, 8))

    def rows(n_frames, n_tx, fs=FS, dtype=np.complex64):
        laws = [usbeam.PlaneWave(a) for a in np.linspace(-0.1, 0.1, n_tx)]
        return lane_rows(usbeam.Beamformer(probe, laws, grid, fs=fs, fc=FC, c=C, n_samples=400, n_frames=n_frames,
                                           dtype=dtype))

    if rows(1, 1) == 0:
        pytest.skip("the lane path needs AVX-512 (this machine's DAS takes das_single.c)")
    assert rows(5, 7) > 0 and rows(2, 20) > 0 and rows(1, 64) > 0 and rows(5, 11) > 0
    assert rows(6, 2) == 0 and rows(6, 7) == 0
    assert rows(7, 8) > 0 and rows(7, 14) > 0 and rows(8, 14) == 0  # IQ of many transmits
    assert rows(7, 1) > 0 and rows(8, 1) == 0  # one transmit at fs = 4 fc (quarter turns)
    assert rows(5, 1, fs=17e6) > 0 and rows(6, 1, fs=17e6) == 0
    assert rows(12, 3, dtype=np.float32) > 0 and rows(13, 3, dtype=np.int16) == 0  # RF

