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
