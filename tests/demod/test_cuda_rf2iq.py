"""RF -> IQ CUDA twin (cuda/rf2iq.cu) against the CPU backend and the float64 reference.

Needs a GPU (marked cuda: skipped without one), except the last test."""
import numpy as np
import pytest

import usbeam
from reference import rf2iq as ref
from tolerances import TOLERANCES
from usbeam import device

NAN_C64 = np.complex64(complex(np.nan, np.nan))


def random_rf(rng, shape, dtype):
    if dtype == np.int16:
        return rng.integers(-20000, 20000, shape).astype(np.int16)
    return (1000 * rng.standard_normal(shape)).astype(dtype)


def relative_error(got, want):
    assert got.shape == want.shape
    assert np.all(np.isfinite(got)), "poison left: some outputs were not written"
    return np.max(np.abs(got.astype(np.complex128) - want)) / np.max(np.abs(want))


def run_pair(rng, shape, dtype, **kwargs):
    """The same plan on both backends, fresh RF, poisoned device output: (gpu, cpu, rf, plan)."""
    rf = random_rf(rng, shape, dtype)
    cuda = usbeam.RF2IQPlan(shape, dtype, backend="cuda", **kwargs)
    cpu = usbeam.RF2IQPlan(shape, dtype, **kwargs)
    out = device.from_numpy(np.full(cuda.out_shape, NAN_C64, np.complex64))
    assert cuda(device.from_numpy(rf), out=out) is out
    return out.to_numpy(), cpu(rf), rf, cuda


DTYPES = [np.int16, np.float32, np.float64]


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("decimation", [1, 3])
@pytest.mark.parametrize("t0", [0.0, -1.7e-6])
def test_butter_matches_cpu(rng, dtype, decimation, t0):
    # 37 x 3 lines: not a multiple of the 32-line transpose tiles
    got, want, rf, plan = run_pair(rng, (37, 3, 515), dtype, fs=20e6, fc=5e6, t0=t0, bandwidth=0.6,
                                   decimation=decimation)
    assert relative_error(got, want) <= TOLERANCES["rf2iq_cuda_rel"]
    reference = ref.rf2iq_butter(rf, 20e6, 5e6, t0, 0.6 * 5e6 / 20e6, 5, decimation)
    assert relative_error(got, reference) <= TOLERANCES["rf2iq_rel"]
    assert set(plan.cuda.stage_times()) == {"rf2iq.mix", "rf2iq.filtfilt", "rf2iq.decimate"}


@pytest.mark.cuda
@pytest.mark.parametrize("order, wn", [(1, 0.3), (3, 0.9), (8, 0.1), (16, 0.5)])
def test_butter_orders(rng, order, wn):
    got, want, _, _ = run_pair(rng, (5, 400), np.float32, fs=10e6, fc=2.5e6, order=order, cutoff=wn * 5e6)
    assert relative_error(got, want) <= TOLERANCES["rf2iq_cuda_rel"]


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("decimation", [1, 2, 7])
def test_kaiser_matches_cpu(rng, dtype, decimation):
    # 300 kept outputs at D = 1: three FIR blocks, the last one partial
    got, want, rf, plan = run_pair(rng, (6, 300), dtype, fs=20e6, fc=4e6, t0=2.1e-6, filter="kaiser",
                                   cutoff=2e6, transition_width=1e6, attenuation=70.0, decimation=decimation)
    assert relative_error(got, want) <= TOLERANCES["rf2iq_cuda_rel"]
    reference = ref.rf2iq_fir(rf, 20e6, 4e6, plan.taps, 2.1e-6, decimation)
    assert relative_error(got, reference) <= TOLERANCES["rf2iq_rel"]
    assert set(plan.cuda.stage_times()) == {"rf2iq.fir"}


@pytest.mark.cuda
@pytest.mark.parametrize("n_taps", [1, 16, 513, 1500])  # 513 and 1500 taps span several staged chunks
def test_user_taps_matches_cpu(rng, n_taps):
    taps = rng.standard_normal(n_taps) + 1j * rng.standard_normal(n_taps)
    got, want, rf, _ = run_pair(rng, (3, 700), np.float32, fs=25e6, fc=6e6, filter=taps, decimation=3)
    assert relative_error(got, want) <= TOLERANCES["rf2iq_cuda_rel"]
    assert relative_error(got, ref.rf2iq_fir(rf, 25e6, 6e6, taps, 0.0, 3)) <= TOLERANCES["rf2iq_rel"]


# ---- the Butterworth filtfilt as a chunked scan (cuda/rf2iq.cu): a zero-state recursion per
# (line, chunk), a per-line scan of the chunk start states, a zero-input correction per chunk,
# in both directions.  The plan picks the chunk length C (32 and up, at least 4 chunks) with
# a probe line, or the serial recursion where no C is accurate enough.  Which one a filter
# gets is deterministic; the cases below name the one each takes (cuda/rf2iq.cu header).


def butter_pair(rng, shape, dtype, fs, fc, order, wn, decimation=1, t0=0.0):
    got, want, rf, plan = run_pair(rng, shape, dtype, fs=fs, fc=fc, t0=t0, order=order, cutoff=wn * fs / 2,
                                   decimation=decimation)
    reference = ref.rf2iq_butter(rf, fs, fc, t0, wn, order, decimation)
    return got, want, reference, plan


def filtfilt_chunks(plan, order):
    """Chunks per line of the plan's filtfilt, 0 for the serial recursion, from the device
    memory it holds: phasor [n] and scratch [n + 2 padlen][lines] (complex128), plus, when
    chunked, F^C [order][order] (float64) and the states [chunks][order][lines] (complex128).
    A chunked path that the plan's own probe finds wrong falls back to the serial one, with
    the right result: only this count shows it."""
    lines, n = int(np.prod(plan.shape[:-1])), plan.shape[-1]
    extra = plan.cuda.device_bytes - 16 * n - 16 * (n + 6 * (order + 1)) * lines
    if extra == 0:
        return 0
    states = extra - 8 * order * order
    assert states > 0 and states % (16 * order * lines) == 0, plan.cuda.device_bytes
    return states // (16 * order * lines)


@pytest.mark.cuda
@pytest.mark.parametrize("shape, dtype, decimation, chunks", [
    ((3, 5000), np.float32, 1, 158),      # C = 32
    ((37, 2, 1503), np.int16, 4, 49),     # 74 lines (not a multiple of 32), 49 chunks, the last of 3
    ((2, 12001), np.float64, 7, 377),     # kept samples every 7th, across chunk boundaries
])
def test_butter_long_lines_many_chunks(rng, shape, dtype, decimation, chunks):
    got, want, reference, plan = butter_pair(rng, shape, dtype, 20e6, 5e6, 5, 0.15, decimation, t0=1.3e-6)
    assert filtfilt_chunks(plan, 5) == chunks
    assert relative_error(got, want) <= TOLERANCES["rf2iq_cuda_chunked_rel"]
    assert relative_error(got, reference) <= TOLERANCES["rf2iq_rel"]


@pytest.mark.cuda
@pytest.mark.parametrize("order, wn, n, chunks", [
    (5, 0.02, 3000, 6),      # low cutoff: the probe rejects C = 32 .. 256, takes C = 512
    (8, 0.2, 6000, 190),     # order 8: C = 32
    (16, 0.5, 3000, 97),     # order 16 (the NB = 16 kernels): C = 32
    (4, 0.05, 40000, 1251),  # NB = 4
    (3, 0.4, 3000, 95),
])
def test_butter_chunked_orders(rng, order, wn, n, chunks):
    got, want, reference, plan = butter_pair(rng, (4, n), np.float32, 10e6, 2.5e6, order, wn, decimation=2)
    assert filtfilt_chunks(plan, order) == chunks
    assert relative_error(got, want) <= TOLERANCES["rf2iq_cuda_chunked_rel"]
    assert relative_error(got, reference) <= TOLERANCES["rf2iq_rel"]


@pytest.mark.cuda
@pytest.mark.parametrize("order, wn, n", [
    (10, 0.05, 3000),   # ill-conditioned in (b, a) form: no chunk length passes -> serial
    (8, 0.05, 3000),
    (5, 0.15, 19),      # 19 samples + 2 x 18 of extension: under 4 chunks of 32 -> serial
])
def test_butter_serial_fallback(rng, order, wn, n):
    """The serial recursion (one thread per line) where the chunked scan is not accurate or
    the line too short: the CPU's operations, so the CPU's result to float32 rounding."""
    got, want, reference, plan = butter_pair(rng, (33, n), np.float32, 10e6, 2.5e6, order, wn, decimation=3)
    assert filtfilt_chunks(plan, order) == 0
    assert relative_error(got, want) <= TOLERANCES["rf2iq_cuda_rel"]
    tolerance = TOLERANCES["rf2iq_butter_illcond_rel"] if order >= 8 else TOLERANCES["rf2iq_rel"]
    assert relative_error(got, reference) <= tolerance


@pytest.mark.cuda
@pytest.mark.parametrize("n", [19, 25, 37, 40])
def test_butter_short_lines_overlapping_extension(rng, n):
    """n barely above padlen = 18 (order 5): the odd reflections at the head (of samples
    1..18) and at the tail (of samples n-19..n-2) come from overlapping sample ranges, both
    written by the mixing kernel; 130 lines, filtered serially (under 4 chunks of 32)."""
    got, want, reference, plan = butter_pair(rng, (130, n), np.int16, 20e6, 5e6, 5, 0.3)
    assert filtfilt_chunks(plan, 5) == 0
    assert relative_error(got, want) <= TOLERANCES["rf2iq_cuda_chunked_rel"]
    assert relative_error(got, reference) <= TOLERANCES["rf2iq_rel"]


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("decimation", [4, 33, 200])
def test_fir_polyphase_tile_decimations(rng, dtype, decimation):
    """The FIR tile stored by phase (sample t at (t mod D) Q + t / D): decimations with more
    phases than taps per output block, taps over two staged chunks, a partial last block."""
    taps = rng.standard_normal(700)
    shape = (3, 128 * decimation + 5 * decimation + 3)  # two FIR blocks, the second partial
    got, want, rf, _ = run_pair(rng, shape, dtype, fs=25e6, fc=6e6, filter=taps, decimation=decimation)
    assert relative_error(got, want) <= TOLERANCES["rf2iq_cuda_rel"]
    assert relative_error(got, ref.rf2iq_fir(rf, 25e6, 6e6, taps, 0.0, decimation)) <= TOLERANCES["rf2iq_rel"]


@pytest.mark.cuda
def test_host_path_strict_and_checks(rng):
    rf = random_rf(rng, (4, 200), np.int16)
    plan = usbeam.RF2IQPlan(rf.shape, np.int16, fs=20e6, fc=5e6, backend="cuda")
    host = plan(rf)  # NumPy in, NumPy out
    assert isinstance(host, np.ndarray)
    np.testing.assert_array_equal(host, plan(device.from_numpy(rf)).to_numpy())
    with pytest.raises(TypeError, match="int16"):
        plan(device.from_numpy(rf.astype(np.float32)))
    with pytest.raises(ValueError, match="shape"):
        plan(device.from_numpy(rf[:2]))
    strict = usbeam.RF2IQPlan(rf.shape, np.int16, fs=20e6, fc=5e6, backend="cuda", strict=True)
    with pytest.raises(TypeError, match="strict"):
        strict(rf)


def test_cuda_backend_refused_cleanly_without_gpu():
    if usbeam.cuda_available():
        pytest.skip("a GPU is available")
    with pytest.raises(usbeam.UsbeamError, match="cuda"):
        usbeam.RF2IQPlan((4, 64), np.float32, fs=20e6, fc=5e6, backend="cuda")
