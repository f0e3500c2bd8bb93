"""DAS CUDA twin (cuda/das.cu) against the CPU backend: every transmit kind, interpolation,
window and input dtype, several frame counts (frames ride in registers, in passes of 16-byte
vectors per lane: counts that fill no whole vector or pass included),
full aperture, grids whose sizes are not multiples of the 2-D thread tile and point lists
(1-D fallback), non-finite input reported as ValueError (flagged on the device), and
PWI_disk through the whole GPU chain (rf2iq -> DAS -> B-mode).
Needs a GPU (marked cuda: skipped without one), except the last test."""
import numpy as np
import pytest

import usbeam
from conftest import shared_dataset
from tolerances import TOLERANCES
from usbeam import device
from das_checks import random_data

FS, FC, C, T0 = 20e6, 5e6, 1540.0, 1.5e-6
N_SAMPLES = 320


def sequence(rng, probe):
    angle = rng.uniform(-0.3, 0.3)
    delays = rng.uniform(0, 2e-7, probe.n_elements)
    delays[:2] = np.nan  # a sub-aperture
    return [usbeam.PlaneWave(angle), usbeam.DivergingWave((rng.uniform(-1e-3, 1e-3), -rng.uniform(5e-3, 2e-2))),
            usbeam.Focused((rng.uniform(-1e-3, 1e-3), rng.uniform(4e-3, 8e-3))),
            usbeam.SyntheticAperture(int(rng.integers(probe.n_elements))), usbeam.Delays(delays)]


def assert_close_to_cpu(got, want, interpolation):
    assert np.all(np.isfinite(got)), "poison left: some pixels were not written"
    if interpolation == "nearest":  # a tie of round() may land on the other sample
        off = np.abs(got - want) > TOLERANCES["das_cuda_nearest_pixel_rel"] * np.abs(want).max()
        assert np.mean(off) <= TOLERANCES["das_cuda_nearest_fraction_off"]
        got, want = got[~off], want[~off]
    assert np.linalg.norm(got - want) <= TOLERANCES["das_cuda_rel_l2"] * np.linalg.norm(want)


def pair(rng, dtype, n_frames, grid=None, **kwargs):
    probe = usbeam.LinearArray(16, 3e-4, width=2.5e-4)
    seq = sequence(rng, probe)
    if grid is None:
        grid = usbeam.Grid(x=np.sort(rng.uniform(-3e-3, 3e-3, 37)), z=np.sort(rng.uniform(1e-3, 1.1e-2, 29)))
    common = dict(fs=FS, fc=FC, c=C, t0=T0, n_samples=N_SAMPLES, dtype=dtype, n_frames=n_frames, **kwargs)
    gpu = usbeam.Beamformer(probe, seq, grid, backend="cuda", **common)
    cpu = usbeam.Beamformer(probe, seq, grid, **common)
    data = random_data(rng, (n_frames, len(seq), probe.n_elements, N_SAMPLES), dtype)
    out = device.from_numpy(np.full((n_frames,) + grid.shape, np.nan, gpu.out_dtype))
    assert gpu(device.from_numpy(data), out=out) is out
    return out.to_numpy(), cpu(data), data, gpu


@pytest.mark.cuda
@pytest.mark.parametrize("interpolation", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("window", ["rect", "hann", "tukey"])
@pytest.mark.parametrize("dtype", [np.complex64, np.float32, np.int16])
def test_matches_cpu(rng, interpolation, window, dtype):
    got, want, _, gpu = pair(rng, dtype, 3, f_number=float(rng.uniform(0.8, 2.0)), window=window,
                             tukey_alpha=float(rng.uniform(0.2, 0.8)), interpolation=interpolation)
    assert_close_to_cpu(got, want, interpolation)
    assert set(gpu.cuda.stage_times()) == {"das.beamform"}
    assert gpu.table_bytes() == 0  # nothing tabulated: delays are computed on the device


@pytest.mark.cuda
@pytest.mark.parametrize("n_frames", [1, 17, 70])  # 70 IQ frames: 32 lanes per point
def test_frame_counts_and_full_aperture(rng, n_frames):
    got, want, _, _ = pair(rng, np.complex64, n_frames, f_number=0.0, window="hann")
    assert_close_to_cpu(got, want, "linear")


@pytest.mark.cuda
def test_a_later_plan_does_not_lower_an_earlier_plans_shared_memory(rng):
    """The dynamic shared memory limit belongs to the kernel: a second plan that needs less
    (but more than 48 KiB) must not lower it under the first (found by the CUDA emulator,
    which enforces the limit as a GPU does)."""
    probe = usbeam.LinearArray(n_elements=32, pitch=3e-4)
    seq = [usbeam.PlaneWave(0.0)]
    grid = usbeam.Grid(x=np.linspace(-4e-3, 4e-3, 19), z=np.linspace(6e-3, 12e-3, 41))
    common = dict(fs=FS, fc=FC, c=C, t0=T0, n_samples=N_SAMPLES, dtype=np.complex64)
    big = usbeam.Beamformer(probe, seq, grid, n_frames=70, backend="cuda", **common)
    usbeam.Beamformer(probe, seq, grid, n_frames=50, backend="cuda", **common)
    data = random_data(rng, (70, 1, 32, N_SAMPLES), np.complex64)
    got = big(device.from_numpy(data)).to_numpy()
    want = usbeam.Beamformer(probe, seq, grid, n_frames=70, **common)(data)
    assert_close_to_cpu(got, want, "linear")


def grid_of_shape(rng, nz, nx, ny=None):
    """A Grid whose sizes are not multiples of the 32 x 8 tile (cuda/das.cu)."""
    x = np.sort(rng.uniform(-3e-3, 3e-3, nx))
    z = np.sort(rng.uniform(1e-3, 1.1e-2, nz))
    y = None if ny is None else np.sort(rng.uniform(-1e-3, 1e-3, ny))
    return usbeam.Grid(x=x, z=z, y=y)


@pytest.mark.cuda
@pytest.mark.parametrize("nz, nx, ny", [(33, 9, None), (31, 17, None), (65, 1, None), (1, 70, None),
                                        (1, 1, None), (37, 5, 3), (2, 3, 2)])
@pytest.mark.parametrize("dtype", [np.complex64, np.float32])
def test_tiles_at_grid_edges(rng, nz, nx, ny, dtype):
    """Lattices (2-D tiles, partial at every edge; a y slice per grid z) and degenerate grids
    (a row, a column, one point: the 1-D fallback): every pixel written (NaN poison), as the
    CPU."""
    got, want, _, _ = pair(rng, dtype, 2, grid=grid_of_shape(rng, nz, nx, ny), f_number=1.5, window="tukey",
                           tukey_alpha=0.5, interpolation="cubic")
    assert got.shape == want.shape == (2,) + ((nz, nx) if ny is None else (ny, nz, nx))
    assert_close_to_cpu(got, want, "cubic")


@pytest.mark.cuda
def test_thousands_of_frames_run_in_passes(rng):
    """The per-frame sums are registers, not shared memory (which once capped a call at a few
    hundred IQ frames): 4000 IQ frames run in 32 passes of 125 frames over the same delays."""
    probe = usbeam.LinearArray(4, 3e-4)
    seq, grid = [usbeam.PlaneWave(0.0)], usbeam.Grid(x=[-1e-4, 0.0, 2e-4], z=[1e-3, 1.1e-3])
    common = dict(fs=FS, fc=FC, c=C, t0=0.0, n_samples=64, dtype=np.complex64, n_frames=4000)
    data = random_data(rng, (4000, 1, 4, 64), np.complex64)
    out = device.from_numpy(np.full((4000,) + grid.shape, np.nan, np.complex64))
    usbeam.Beamformer(probe, seq, grid, backend="cuda", **common)(device.from_numpy(data), out=out)
    want = usbeam.Beamformer(probe, seq, grid, **common)(data)
    assert np.all(want != 0)  # every point reads samples (delays ~ 26-30 samples of 64)
    assert_close_to_cpu(out.to_numpy(), want, "linear")


@pytest.mark.cuda
def test_point_lists_run_in_one_dimension(rng):
    """Arbitrary points (not a lattice: shuffled, or a lattice whose rows do not share a
    depth) take the 1-D blocks; the result must not depend on the order of the points."""
    lattice = grid_of_shape(rng, 29, 23).coordinates()
    order = rng.permutation(len(lattice))
    got, want, data, _ = pair(rng, np.complex64, 3, grid=usbeam.Grid.points(lattice[order]), f_number=1.0)
    assert_close_to_cpu(got, want, "linear")
    skewed = lattice.copy()
    skewed[:, 2] += 1e-6 * np.arange(len(skewed))  # no two points at one depth
    got, want, _, _ = pair(rng, np.float32, 1, grid=usbeam.Grid.points(skewed), f_number=1.0)
    assert_close_to_cpu(got, want, "linear")


def nan_in_a_record(data, value):
    """Every sample of element 3's record in transmit 0 of the last frame set to value: with a
    full aperture every point reads that record somewhere."""
    bad = data.copy()
    bad[-1, 0, 3, :] = value
    return bad


@pytest.mark.cuda
@pytest.mark.parametrize("value", [np.nan, np.inf, complex(0, -np.inf)])
def test_non_finite_input_is_a_value_error(rng, value):
    """The kernel flags NaN / inf it reads (cuda/das.cu); the host learns it without a round trip
    per call: after the copy of a host result, on synchronize(), or at the next call."""
    got, want, data, gpu = pair(rng, np.complex64, 2, f_number=0.0)
    assert_close_to_cpu(got, want, "linear")
    bad = nan_in_a_record(data, value)
    with pytest.raises(ValueError, match="data contains NaN or infinite"):
        gpu(bad)  # NumPy in and out: the copy waits, then the flag is read
    with pytest.raises(ValueError, match="data"):  # the CPU refuses it too
        usbeam.Beamformer(gpu.probe, gpu.sequence, gpu.grid, fs=FS, fc=FC, c=C, t0=T0, n_samples=N_SAMPLES,
                          dtype=np.complex64, n_frames=2)(bad)
    result = gpu(device.from_numpy(bad))  # device in and out: queued, nothing raised yet
    with pytest.raises(ValueError, match="data contains NaN"):
        gpu.cuda.synchronize()
    assert not np.all(np.isfinite(result.to_numpy()))
    gpu.cuda.synchronize()  # read and cleared: a later check is clean
    np.testing.assert_array_equal(gpu(data), got)  # and a clean call runs as before
    gpu(device.from_numpy(bad))
    usbeam._core.stream_synchronize(gpu.cuda.stream)  # finished, not checked
    with pytest.raises(ValueError, match="an earlier call's data"):
        gpu(device.from_numpy(data))
    gpu.cuda.synchronize()


@pytest.mark.cuda
def test_non_finite_outside_every_aperture_is_not_read(rng):
    """Only samples the beamformer reads count: NaN in the last 100 samples, which no delay of
    this shallow grid reaches (every path < 2 cm, i.e. < 13 us + the 0.2 us delay law: sample
    < 230 of 320), is not flagged; the CPU, which checks the whole record, refuses it."""
    grid = usbeam.Grid(x=np.linspace(-2e-3, 2e-3, 21), z=np.linspace(1e-3, 3e-3, 35))
    got, want, data, gpu = pair(rng, np.float32, 1, grid=grid, f_number=1.0)
    assert_close_to_cpu(got, want, "linear")
    late = data.copy()
    late[..., -100:] = np.nan
    np.testing.assert_array_equal(gpu(late), got)
    with pytest.raises(ValueError, match="NaN"):
        usbeam.Beamformer(gpu.probe, gpu.sequence, grid, fs=FS, fc=FC, c=C, t0=T0, n_samples=N_SAMPLES,
                          dtype=np.float32, n_frames=1)(late)


@pytest.mark.cuda
def test_pipeline_reports_non_finite_rf(rng):
    """Pipeline: NaN RF goes through rf2iq into the beamformer, which flags it; the pipeline
    names its own input."""
    probe = usbeam.LinearArray(16, 3e-4, width=2.5e-4, fc=FC, bandwidth=0.6)
    grid = grid_of_shape(rng, 40, 12)
    kwargs = dict(fs=FS, fc=FC, c=C, n_samples=N_SAMPLES, rf_dtype=np.float32, f_number=0.0)
    for capture_graph in (False, True):
        pipe = usbeam.Pipeline(probe, [usbeam.PlaneWave(0.0)], grid, backend="cuda", capture_graph=capture_graph,
                               **kwargs)
        rf = rng.standard_normal(pipe.input_shape).astype(np.float32)
        clean = pipe(rf)
        rf[0, 0, 5, :] = np.nan
        with pytest.raises(ValueError, match="rf contains NaN"):
            pipe(rf)
        rf[0, 0, 5, :] = 0.0
        assert pipe(rf).shape == clean.shape


@pytest.mark.cuda
def test_host_path_strict_and_other_frame_counts(rng):
    got, want, data, gpu = pair(rng, np.float32, 2)
    host = gpu(data)  # NumPy in, NumPy out
    assert isinstance(host, np.ndarray)
    np.testing.assert_array_equal(host, got)
    single = gpu(device.from_numpy(data[0]))  # (n_tx, n_el, n_s): another plan, one frame
    np.testing.assert_allclose(single.to_numpy(), got[0], rtol=0, atol=1e-6 * np.abs(got).max())
    strict = usbeam.Beamformer(gpu.probe, gpu.sequence, gpu.grid, fs=FS, fc=FC, c=C, t0=T0, n_samples=N_SAMPLES,
                               dtype=np.float32, n_frames=2, backend="cuda", strict=True)
    with pytest.raises(TypeError, match="strict"):
        strict(data)
    with pytest.raises(TypeError, match="float32"):
        gpu(device.from_numpy(data.astype(np.complex64)))


# ---- the frame layout, the float32 delay math and the transmit table (cuda/das.cu) --------

@pytest.mark.cuda
@pytest.mark.parametrize("n_frames", [1, 7, 33])  # read in place; and rows that fill no whole vector or pass
@pytest.mark.parametrize("interpolation", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("dtype", [np.complex64, np.float32, np.int16])
def test_frame_counts_off_the_chunk(rng, n_frames, interpolation, dtype):
    """Frames go in 16-byte vectors (2 IQ, 4 float32, 8 int16 frames), split over the lanes of
    a point: 7 and 33 frames leave part of a vector and of a lane group idle (int16 7: one lane
    per point; 33 IQ: 16 lanes).  Every transmit kind, an f-number aperture, poisoned outputs."""
    got, want, _, _ = pair(rng, dtype, n_frames, f_number=float(rng.uniform(0.8, 2.0)), window="hann",
                           interpolation=interpolation)
    assert_close_to_cpu(got, want, interpolation)


@pytest.mark.cuda
@pytest.mark.parametrize("dtype, interpolation", [(np.float32, "cubic"), (np.int16, "nearest")])
def test_rf_frames_in_two_passes(rng, dtype, interpolation):
    """300 RF frames are more than 32 lanes hold (256 float32 or int16 frames per pass): the
    element walk runs twice, the second pass partly idle."""
    grid = grid_of_shape(rng, 11, 6)
    got, want, _, _ = pair(rng, dtype, 300, grid=grid, f_number=1.2, interpolation=interpolation)
    assert_close_to_cpu(got, want, interpolation)


class OffAxisArray(usbeam.LinearArray):
    """Elements off the x axis (elevation offsets and a curved face): the twin's general
    geometry, N = |p - e|^2 - (y^2 + z^2) with the e_y and e_z terms (planar arrays skip them)."""

    @property
    def positions(self):
        pos = super().positions
        pos[:, 1] = 2e-4 * np.sin(np.arange(self.n_elements))
        pos[:, 2] = -0.5 * pos[:, 0] ** 2 / 0.02  # a 20 mm radius of curvature
        return pos


@pytest.mark.cuda
@pytest.mark.parametrize("dtype, interpolation", [(np.complex64, "linear"), (np.float32, "cubic")])
def test_elements_off_the_axis(rng, dtype, interpolation):
    probe = OffAxisArray(16, 3e-4, width=2.5e-4)
    seq = [usbeam.PlaneWave(0.1), usbeam.SyntheticAperture(5)]
    grid = usbeam.Grid(x=np.linspace(-3e-3, 3e-3, 23), z=np.linspace(1e-3, 1.1e-2, 31), y=[-3e-4, 4e-4])
    common = dict(fs=FS, fc=FC, c=C, t0=T0, n_samples=N_SAMPLES, dtype=dtype, n_frames=3, f_number=0.0,
                  window="tukey", tukey_alpha=0.4, interpolation=interpolation)
    data = random_data(rng, (3, 2, 16, N_SAMPLES), dtype)
    gpu = usbeam.Beamformer(probe, seq, grid, backend="cuda", **common)
    out = device.from_numpy(np.full((3,) + grid.shape, np.nan, gpu.out_dtype))
    gpu(device.from_numpy(data), out=out)
    assert_close_to_cpu(out.to_numpy(), usbeam.Beamformer(probe, seq, grid, **common)(data), interpolation)


@pytest.mark.cuda
@pytest.mark.parametrize("nz, nx, ny", [(33, 9, None), (65, 1, None), (1, 70, None), (37, 5, 3), (2, 3, 2)])
def test_tiles_at_grid_edges_with_lane_groups(rng, nz, nx, ny):
    """33 IQ frames: 16 lanes per point, 2 points per warp, so the tiles (2 depths x 4 columns,
    fewer columns in a narrow grid) and the stage of the stores are cut at every edge too."""
    got, want, _, _ = pair(rng, np.complex64, 33, grid=grid_of_shape(rng, nz, nx, ny), f_number=1.5,
                           window="tukey", tukey_alpha=0.5, interpolation="linear")
    assert_close_to_cpu(got, want, "linear")


@pytest.mark.cuda
def test_virtual_sources_without_the_transmit_table(rng):
    """Virtual-source transmits (Delays) get their paths tabulated at plan creation; a budget too
    small for the table makes the kernel take the min over the sources itself, as correctly."""
    got, want, _, _ = pair(rng, np.complex64, 2, f_number=1.0, max_table_bytes=64)
    assert_close_to_cpu(got, want, "linear")


def budget_case(dtype, fs, fc, n_samples, probe=None):
    """One element (a single delay per point, no sum to hide an error in) under a wide, shallow
    and deep grid: RF data 0, 1, 0, 1, ... read linearly is the triangle wave of s (slope +-1), so
    the output's error is the delay error in samples; IQ data 1 + 0j gives exp(+j 2 pi fc tau), so
    the output's phase error is the rotation's."""
    probe = probe or usbeam.LinearArray(1, 3e-4)
    seq = [usbeam.SyntheticAperture(0)]
    grid = usbeam.Grid(x=np.linspace(-40e-3, 40e-3, 81), z=np.linspace(0.2e-3, 60e-3, 97))
    common = dict(fs=fs, fc=fc, c=C, t0=0.0, n_samples=n_samples, dtype=dtype, n_frames=1, f_number=0.0)
    if dtype == np.complex64:
        data = np.ones((1, 1, 1, n_samples), np.complex64)
    else:
        data = (np.arange(n_samples) % 2).astype(np.float32)[None, None, None, :]
    got = usbeam.Beamformer(probe, seq, grid, backend="cuda", **common)(device.from_numpy(data)).to_numpy().ravel()
    cpu = usbeam.Beamformer(probe, seq, grid, **common)(data).ravel()
    return got, cpu, data, grid


def budget_errors(got, want, iq):
    inside = np.abs(want) > 0.5 if iq else want != 0  # samples in the record
    if iq:
        return np.abs(np.angle(got[inside] * np.conj(want[inside])))
    return np.abs(got[inside] - want[inside])


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [np.complex64, np.float32])
@pytest.mark.parametrize("fs, fc", [(40e6, 7e6), (20e6 / 3, 5e6)])
def test_delay_error_budget(dtype, fs, fc):
    """The float32 delay math's budget (cuda/das.cu): against the float64 reference
    (tests/reference/das.py) and the CPU backend, delays within das_cuda_delay_samples and the
    rotation within das_cuda_phase_rad, from points 0.2 mm deep up to 40 mm to the side (the
    receive distance 1000 samples off its per-point reference) to 60 mm deep."""
    from reference import das as ref
    iq = dtype == np.complex64
    n_samples = int(2 * 0.075 / C * fs) + 8
    got, cpu, data, grid = budget_case(dtype, fs, fc, n_samples)
    want = ref.das(data.astype(np.complex128 if iq else np.float64), np.zeros(1), [("synthetic", 0)],
                   grid.coordinates(), fs=fs, fc=fc, c=C, t0=0.0, f_number=0.0)[0]
    limit = TOLERANCES["das_cuda_phase_rad" if iq else "das_cuda_delay_samples"]
    assert np.count_nonzero(np.abs(want) > 0) > 0.9 * want.size
    assert budget_errors(got, want, iq).max() <= limit
    assert budget_errors(got, cpu, iq).max() <= limit
    assert budget_errors(cpu, want, iq).max() <= limit / 4  # the CPU's own error is far smaller


class OneElementOffAxis(usbeam.LinearArray):
    @property
    def positions(self):
        return np.array([[0.0, 2e-4, -1e-4]])


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [np.complex64, np.float32])
def test_delay_error_budget_off_the_axis(dtype):
    """The same budget with the element off the x axis (the general geometry: 0.2 mm in
    elevation, 0.1 mm behind the face), against the CPU (the float64 reference places elements
    on the axis)."""
    probe = OneElementOffAxis(1, 3e-4)
    fs, fc = 40e6, 7e6
    got, cpu, _, _ = budget_case(dtype, fs, fc, int(2 * 0.075 / C * fs) + 8, probe)
    iq = dtype == np.complex64
    assert budget_errors(got, cpu, iq).max() <= TOLERANCES["das_cuda_phase_rad" if iq else "das_cuda_delay_samples"]


X_GRID = np.linspace(-12.5e-3, 12.5e-3, 251)
Z_GRID = np.linspace(10e-3, 35e-3, 251)


@pytest.mark.cuda
@pytest.mark.slow
def test_pwi_disk_gpu_chain_matches_cpu():
    rec = usbeam.load_must(shared_dataset("PWI_disk.mat"))
    rf = device.from_numpy(rec.data)
    kw = dict(fs=rec.fs, fc=rec.fc, t0=rec.t0, bandwidth=rec.bandwidth)
    iq_gpu = usbeam.RF2IQPlan(rec.data.shape, rec.data.dtype, backend="cuda", strict=True, **kw)(rf)
    iq_cpu = usbeam.rf2iq(rec.data, **kw)
    grid = usbeam.Grid(x=X_GRID, z=Z_GRID)
    bf_kw = dict(fs=rec.fs, fc=rec.fc, c=rec.c, t0=rec.t0, n_samples=iq_cpu.shape[-1], f_number="auto",
                 interpolation="linear", n_frames=32)
    image_gpu = usbeam.Beamformer(rec.probe, rec.sequence, grid, backend="cuda", strict=True, **bf_kw)(
        iq_gpu.reshape((32, 1, 128, iq_cpu.shape[-1])))
    image_cpu = usbeam.Beamformer(rec.probe, rec.sequence, grid, **bf_kw)(iq_cpu[:, None])
    assert_close_to_cpu(image_gpu.to_numpy(), image_cpu, "linear")
    display = usbeam.BModePlan(image_cpu.shape, 30.0, backend="cuda", strict=True)(image_gpu).to_numpy()
    diff = np.abs(display.astype(int) - usbeam.bmode(image_cpu, 30.0).astype(int))
    assert diff.max() <= TOLERANCES["das_cuda_bmode_max_levels"]


def test_cuda_backend_refused_cleanly_without_gpu():
    if usbeam.cuda_available():
        pytest.skip("a GPU is available")
    probe = usbeam.LinearArray(8, 3e-4)
    with pytest.raises(usbeam.UsbeamError, match="cuda"):
        usbeam.Beamformer(probe, [usbeam.PlaneWave(0.0)], usbeam.Grid(x=[0.0], z=[5e-3]), fs=FS, fc=FC,
                          n_samples=64, backend="cuda")
