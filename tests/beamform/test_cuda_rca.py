"""Row-column / TOBE DAS CUDA twin (cuda/rca.cu) against the CPU backend: every method
(FORCES, uFORCES, HERCULES, uHERCULES, VLS, TPW, Flash), both receive orientations, every
interpolation and window, RF and IQ, coherence factor, frame sums and several frame counts,
on volumes, B-scans and grids at random affine transforms, grids whose sizes are not
multiples of the thread tile, acquisition counts across the kernel's chunks of 16, long records
and deep delays (its fixed-point sample index and phase), voxels exactly on aperture edges (the
same pairs as the CPU), and non-finite input (a ValueError, flagged on the device).
Outputs are poisoned (NaN) before each run and must be fully written.  Needs a GPU (marked cuda: skipped without one),
except the last test."""
import math

import numpy as np
import pytest

import usbeam
from tolerances import TOLERANCES
from usbeam import device

FS, FC, C, T0 = 20e6, 5e6, 1540.0, -1e-6
N_COLUMNS, N_ROWS, PITCH_X, PITCH_Y = 12, 10, 0.3e-3, 0.25e-3
N_SAMPLES = 500

METHODS = {
    "forces": dict(),
    "uforces": dict(sparse_elements=[0, 3, 7, 9]),
    "hercules": dict(tx="rows", angles=[0.05], focal_depths=[-8e-3]),
    "uhercules": dict(tx="columns", angles=[-0.1], focal_depths=[math.inf], sparse_elements=[5, 0, 2]),
    "vls": dict(tx="rows", angles=[-0.2, 0.0, 0.3], focal_depths=[-5e-3, 12e-3, -20e-3]),
    "tpw": dict(tx="rows", angles=[-0.15, 0.0, 0.2], focal_depths=[math.inf] * 3),
    "flash": dict(tx="columns", angles=[0.0, 0.0], focal_depths=[math.inf, math.inf]),
}


def random_grid(rng, shape):
    m = np.eye(4)
    m[:3, :3] = rng.normal(0, 0.4e-3, (3, 3))
    m[:3, 3] = (rng.uniform(-1e-3, 1e-3), rng.uniform(-1e-3, 1e-3), 4e-3)
    m[2, :3] = np.abs(m[2, :3])  # every voxel in front of the array
    return usbeam.RCAGrid(m, shape)


def random_data(rng, shape, iq):
    if iq:
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)
    return rng.standard_normal(shape).astype(np.float32)


def assert_close_to_cpu(got, want, interpolation):
    assert np.all(np.isfinite(got)), "poison left: some voxels were not written"
    if interpolation == "nearest":  # a delay at a half-sample tie may round either way
        off = np.abs(got - want) > TOLERANCES["rca_cuda_nearest_voxel_rel"] * np.abs(want).max()
        assert np.mean(off) <= TOLERANCES["rca_cuda_nearest_fraction_off"]
        got, want = got[~off], want[~off]
    assert np.linalg.norm(got - want) <= TOLERANCES["rca_cuda_rel_l2"] * np.linalg.norm(want)


def pair(rng, method, *, rx="columns", shape=(9, 5, 13), n_frames=2, iq=False, grid=None, array=None,
         n_samples=N_SAMPLES, fs=FS, fc=FC, t0=T0, **kwargs):
    kw = dict(METHODS[method], rx=rx)
    if method in ("uforces", "uhercules"):
        limit = {"uforces": N_ROWS if rx == "rows" else N_COLUMNS,
                 "uhercules": N_COLUMNS if rx == "rows" else N_ROWS}[method]
        kw["sparse_elements"] = [e % limit for e in kw["sparse_elements"]]
    kw.update(kwargs)
    array = usbeam.RowColumnArray(N_COLUMNS, N_ROWS, PITCH_X, PITCH_Y) if array is None else array
    grid = random_grid(rng, shape) if grid is None else grid
    common = dict(n_samples=n_samples, fs=fs, fc=fc, c=C, t0=t0, n_frames=n_frames, data="iq" if iq else "rf", **kw)
    gpu = usbeam.RCABeamformer(array, method, grid, backend="cuda", **common)
    cpu = usbeam.RCABeamformer(array, method, grid, **common)
    data = random_data(rng, gpu.data_shape, iq)
    want = cpu(data)
    out = device.from_numpy(np.full(want.shape, np.nan, want.dtype))
    assert gpu(device.from_numpy(data), out=out) is out
    return out.to_numpy(), want, data, gpu


@pytest.mark.cuda
@pytest.mark.parametrize("rx", ["columns", "rows"])
@pytest.mark.parametrize("method", list(METHODS))
@pytest.mark.parametrize("iq", [False, True])
def test_every_method_matches_cpu(rng, method, rx, iq):
    got, want, _, gpu = pair(rng, method, rx=rx, iq=iq, interpolation="cubic", f_number=1.2, window="hann")
    assert_close_to_cpu(got, want, "cubic")
    assert set(gpu.cuda.stage_times()) == {"rca.beamform"}


@pytest.mark.cuda
@pytest.mark.parametrize("interpolation", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("window", ["rect", "hann", "tukey"])
@pytest.mark.parametrize("method", ["forces", "hercules", "tpw"])
def test_interpolations_and_windows(rng, interpolation, window, method):
    got, want, _, _ = pair(rng, method, interpolation=interpolation, window=window,
                           f_number=float(rng.uniform(0.5, 2.0)), tukey_alpha=float(rng.uniform(0.2, 0.8)))
    assert_close_to_cpu(got, want, interpolation)


@pytest.mark.cuda
@pytest.mark.parametrize("method", ["forces", "hercules", "vls"])
@pytest.mark.parametrize("iq", [False, True])
def test_coherence_factor_frame_sum_and_full_aperture(rng, method, iq):
    for kwargs in (dict(coherence_factor=True), dict(sum_frames=True), dict(coherence_factor=True, sum_frames=True),
                   dict(f_number=0.0)):
        got, want, _, _ = pair(rng, method, iq=iq, n_frames=3, interpolation="linear", **kwargs)
        assert_close_to_cpu(got, want, "linear")


@pytest.mark.cuda
@pytest.mark.parametrize("shape", [(40, 1, 33), (1, 17, 20), (7, 6, 1), (1, 1, 1)])
@pytest.mark.parametrize("n_frames", [1, 9])
def test_bscans_and_frame_counts(rng, shape, n_frames):
    got, want, _, _ = pair(rng, "forces", shape=shape, n_frames=n_frames, interpolation="linear")
    assert_close_to_cpu(got, want, "linear")


def grid_with_depth_along(rng, shape, depth_axis):
    """Voxel axis depth_axis (0: i, 1: j, 2: k) steps mostly in z, the others laterally: the
    kernel puts its 32-voxel warps down that axis (cuda/rca.cu)."""
    m = np.eye(4)
    step = rng.normal(0, 0.03e-3, (3, 3))
    lateral = [a for a in range(3) if a != depth_axis]
    step[2, depth_axis] = 0.15e-3
    step[0, lateral[0]] += 0.25e-3
    step[1, lateral[1]] += 0.25e-3
    m[:3, :3] = step
    m[2, :3] = np.abs(m[2, :3])
    m[:3, 3] = (-1.2e-3, -1e-3, 3e-3)
    return usbeam.RCAGrid(m, shape)


@pytest.mark.cuda
@pytest.mark.parametrize("shape, depth_axis", [((3, 11, 37), 0), ((5, 33, 7), 1), ((45, 2, 9), 2),
                                               ((1, 7, 70), 0), ((20, 1, 1), 2), ((2, 9, 10), 1)])
@pytest.mark.parametrize("method", ["forces", "hercules", "tpw"])
def test_tiles_at_grid_edges(rng, shape, depth_axis, method):
    """Depth axes longer than a warp and not a multiple of 32, lateral sizes not multiples of
    the tile width, thin depth axes (< 16: the longest axes are tiled instead): every voxel
    written (NaN poison), as the CPU, with an aperture that varies along the warp."""
    grid = grid_with_depth_along(rng, shape, depth_axis)
    got, want, _, _ = pair(rng, method, grid=grid, iq=True, interpolation="linear", f_number=1.0, window="hann")
    assert_close_to_cpu(got, want, "linear")


CHUNK = 16  # acquisitions per chunk in cuda/rca.cu


def chunk_case(rng, method, n_acq):
    """An array and keyword arguments giving `method` n_acq acquisitions (receive on columns)."""
    columns, rows, kw = N_COLUMNS, N_ROWS, {}
    if method == "forces":
        columns = n_acq  # one decoded transmit per receive strip
    elif method == "hercules":
        rows = n_acq  # one decoded row per acquisition
    elif method == "uforces":
        kw["sparse_elements"] = [int(e) for e in rng.integers(0, N_COLUMNS, n_acq)]
    elif method == "uhercules":
        kw["sparse_elements"] = [int(e) for e in rng.integers(0, N_ROWS, n_acq)]
    elif method == "vls":
        kw["angles"] = list(rng.uniform(-0.3, 0.3, n_acq))
        kw["focal_depths"] = list(rng.choice([-1, 1], n_acq) * rng.uniform(5e-3, 20e-3, n_acq))
    elif method == "tpw":
        kw["angles"], kw["focal_depths"] = list(rng.uniform(-0.3, 0.3, n_acq)), [math.inf] * n_acq
    else:  # flash
        kw["angles"], kw["focal_depths"] = [0.0] * n_acq, [math.inf] * n_acq
    return usbeam.RowColumnArray(columns, rows, PITCH_X, PITCH_Y), kw


@pytest.mark.cuda
@pytest.mark.parametrize("n_acq", [1, CHUNK + 1, 2 * CHUNK + 8])
@pytest.mark.parametrize("method", list(METHODS))
@pytest.mark.parametrize("iq", [False, True])
def test_acquisitions_across_chunks(rng, method, iq, n_acq):
    """cuda/rca.cu takes acquisitions in chunks of 16 (a thread's transmit terms in shared
    memory, its receive terms recomputed per chunk): one acquisition (a chunk of one), 17 (a
    full chunk and one of one) and 40 (three chunks, the last partial), for every method, RF
    and IQ, with one frame (the plain register sum), output frames kept apart (sums in shared
    memory) and summed with the coherence factor (sums in registers, pairs counted across
    chunks)."""
    array, kw = chunk_case(rng, method, n_acq)
    for frames in (dict(n_frames=1), dict(n_frames=2), dict(n_frames=3, sum_frames=True, coherence_factor=True)):
        got, want, _, gpu = pair(rng, method, iq=iq, array=array, interpolation="cubic", f_number=1.2,
                                 window="hann", **frames, **kw)
        assert gpu.n_acquisitions == n_acq
        assert_close_to_cpu(got, want, "cubic")


@pytest.mark.cuda
@pytest.mark.parametrize("method", ["forces", "hercules", "vls"])
@pytest.mark.parametrize("iq", [False, True])
def test_long_records_and_deep_delays(rng, method, iq):
    """Sample indices in the thousands on full-band noise (fs 50 MHz, 4096 samples, depths to
    28 mm, 24 strips of 0.3 mm): a float32 index would be off by ~5e-5 sample there and the
    image by ~1e-4 (cubic interpolation of white noise moves ~1.5x its RMS per sample), ten
    times rca_cuda_rel_l2; the kernel's 32.32 fixed-point index, HERCULES' float-float receive
    path and the IQ phase summed modulo one cycle must keep to it.  IQ: fc/fs = 1.3 (decimated
    IQ: the fixed-point phase's whole-cycle part of the fraction x fc/fs), phases of ~3000
    cycles, t0 > 0."""
    array = usbeam.RowColumnArray(24, 24, 0.3e-3, 0.3e-3)
    m = np.eye(4)
    m[:3, :3] = np.diag([0.6e-3, 0.5e-3, 1.5e-3]) + rng.normal(0, 0.05e-3, (3, 3))
    m[:3, 3] = (-3e-3, -2e-3, 8e-3)
    grid = usbeam.RCAGrid(m, (3, 5, 14))
    kw = dict(METHODS[method])
    if method == "vls":
        kw.update(angles=[-0.1, 0.05, 0.2], focal_depths=[-10e-3, 30e-3, -25e-3])
    fs = 50e6 if not iq else 10e6
    got, want, _, _ = pair(rng, method, iq=iq, array=array, grid=grid, n_samples=4096 if not iq else 1024,
                           fs=fs, fc=13e6 if iq else 5e6, t0=2e-6, n_frames=1, interpolation="cubic",
                           f_number=1.0, window="tukey", tukey_alpha=0.3, **kw)
    assert_close_to_cpu(got, want, "cubic")


def lattice_grid(shape, origin):
    """Voxels on a binary lattice (steps of 2^-13 m) over an array of pitch 2^-12 m: every
    coordinate, strip position and lateral distance is exact, so some receive elements lie
    exactly on the aperture edge |du| 2 F# = z (strips) or du^2 + dv^2 = (z / 2 F#)^2
    (HERCULES: Pythagorean triples of lattice steps)."""
    m = np.eye(4)
    m[:3, :3] = np.eye(3) * 2.0 ** -13
    m[:3, 3] = np.asarray(origin, float) * 2.0 ** -13
    return usbeam.RCAGrid(m, shape)


@pytest.mark.cuda
@pytest.mark.parametrize("window", ["rect", "hann", "tukey"])
@pytest.mark.parametrize("method", ["forces", "tpw", "hercules", "uhercules"])
@pytest.mark.parametrize("iq", [False, True])
def test_voxels_on_aperture_edges(rng, method, window, iq):
    """Pairs exactly on the aperture edge count as on the CPU: with rect they weigh 1, with
    hann and tukey 0 and are skipped (uncounted).  The kernel decides them with the CPU's own
    double arithmetic (strip window within 1e-3 of the edge; HERCULES disc and radial table
    within two table steps), so the coherence factor, which divides by the number of pairs,
    agrees; one pair more or less would move a voxel by ~1 % (one in ~100 terms)."""
    pitch = 2.0 ** -12
    array = usbeam.RowColumnArray(N_COLUMNS, N_ROWS, pitch, pitch)
    grid = lattice_grid((7, 9, 17), (-8, -3, 3))
    for f_number in (0.5, 1.0):
        got, want, _, _ = pair(rng, method, iq=iq, array=array, grid=grid, n_frames=1, interpolation="linear",
                               f_number=f_number, window=window, tukey_alpha=0.5, coherence_factor=True)
        assert_close_to_cpu(got, want, "linear")


@pytest.mark.cuda
def test_hercules_records_beyond_its_fixed_point_range_are_refused():
    """HERCULES' float-float receive path holds r < 2^19 samples (cuda/rca.cu): a plan whose
    record reaches 2^18 samples after the transmit is refused at creation, not beamformed
    wrongly."""
    array = usbeam.RowColumnArray(N_COLUMNS, N_ROWS, PITCH_X, PITCH_Y)
    grid = usbeam.RCAGrid(np.diag([1e-3, 1e-3, 1e-3, 1.0]), (1, 1, 1))
    kw = dict(METHODS["hercules"], n_samples=2 ** 18 + 1, fs=FS, backend="cuda")
    with pytest.raises(NotImplementedError, match="2\\^18 samples"):
        usbeam.RCABeamformer(array, "hercules", grid, **kw)
    kw["n_samples"] = 2 ** 17
    usbeam.RCABeamformer(array, "hercules", grid, **kw)  # within range: accepted


@pytest.mark.cuda
@pytest.mark.parametrize("iq", [False, True])
def test_non_finite_input_is_a_value_error(rng, iq):
    """NaN / inf the kernel reads is flagged on the device and raised when the host next meets
    the result (cuda/rca.cu, usbeam.device.CudaExecution.check_input); the CPU refuses it."""
    got, want, data, gpu = pair(rng, "forces", iq=iq, n_frames=2, f_number=0.0, interpolation="linear")
    bad = data.copy()
    bad[1, 2, 4, :] = np.nan if iq else np.inf  # a whole record: every voxel reads it
    with pytest.raises(ValueError, match="data contains NaN or infinite"):
        gpu(bad)
    cpu = usbeam.RCABeamformer(gpu.array, "forces", gpu.grid, n_samples=N_SAMPLES, fs=FS, fc=FC, c=C, t0=T0,
                               n_frames=2, data="iq" if iq else "rf", f_number=0.0)
    with pytest.raises(ValueError, match="NaN or infinite"):
        cpu(bad)
    gpu(device.from_numpy(bad))
    with pytest.raises(ValueError, match="data contains NaN"):
        gpu.cuda.synchronize()
    np.testing.assert_array_equal(gpu(data), got)  # cleared: clean calls run as before


@pytest.mark.cuda
def test_host_arrays_and_strict(rng):
    got, want, data, gpu = pair(rng, "tpw", n_frames=1)
    np.testing.assert_array_equal(gpu(data), got)  # NumPy in, NumPy out
    np.testing.assert_array_equal(gpu(device.from_numpy(data[0])).to_numpy(), got[0])  # no frame axis
    strict = usbeam.RCABeamformer(gpu.array, "tpw", gpu.grid, n_samples=N_SAMPLES, fs=FS, fc=FC, c=C, t0=T0,
                                  backend="cuda", strict=True, **METHODS["tpw"])
    with pytest.raises(TypeError, match="strict"):
        strict(data)
    with pytest.raises(TypeError, match="float32"):
        gpu(device.from_numpy(data.astype(np.complex64)))


def test_cuda_backend_refused_cleanly_without_gpu():
    if usbeam.cuda_available():
        pytest.skip("a GPU is available")
    array = usbeam.RowColumnArray(4, 4, 3e-4, 3e-4)
    with pytest.raises(usbeam.UsbeamError, match="cuda"):
        usbeam.RCABeamformer(array, "forces", usbeam.RCAGrid(np.diag([1e-3, 1e-3, 1e-3, 1.0]), (1, 1, 1)), n_samples=64, fs=FS,
                             backend="cuda")
