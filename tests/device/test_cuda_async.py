"""CUDA plan calls queue their work and return (DEVELOPING.md, "CUDA twins"): a foreign input
(CUDA array interface, DLPack) keeps its producer alive until the queued kernels finish instead
of making the call wait; results are allocated and freed in stream order (no host wait when one
is dropped); an out-of-memory request is still a MemoryError; a device array without .shape is
accepted; a failing driver query is reported, not taken for "no GPU".

Every result is compared with the CPU backend on fresh random input written into poisoned
outputs.  "Still queued" is asserted on the emulator only (cuda/emu runs nothing until the
host asks, so it is deterministic there; a GPU may simply have finished).  Marked cuda."""
import json
import os
import subprocess
import sys
import weakref

import numpy as np
import pytest

import usbeam
from tolerances import TOLERANCES
from usbeam import _core, device

pytestmark = pytest.mark.cuda

FS, FC, C, N_SAMPLES, N_FRAMES = 20e6, 5e6, 1540.0, 256, 2
EMULATED = bool(usbeam.build_info()["cuda_emulated"])


class CAIProducer:
    """A foreign producer speaking only the CUDA array interface (as Numba or older CuPy)."""

    def __init__(self, array):
        self.array = array
        self.shape, self.ndim = array.shape, array.ndim
        self.__cuda_array_interface__ = array.__cuda_array_interface__


class DLPackProducer:
    """A foreign producer speaking only DLPack, with no .shape / .ndim (a minimal array)."""

    def __init__(self, array):
        self.array = array

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)


def plans(rng):
    probe = usbeam.LinearArray(16, 3e-4, width=2.5e-4)
    seq = [usbeam.PlaneWave(rng.uniform(-0.2, 0.2))]
    grid = usbeam.Grid(x=np.linspace(-2e-3, 2e-3, 23), z=np.linspace(4e-3, 1.2e-2, 31))
    common = dict(fs=FS, fc=FC, c=C, n_samples=N_SAMPLES, dtype=np.float32, n_frames=N_FRAMES)
    gpu = usbeam.Beamformer(probe, seq, grid, backend="cuda", **common)
    cpu = usbeam.Beamformer(probe, seq, grid, **common)
    data = rng.standard_normal((N_FRAMES, 1, probe.n_elements, N_SAMPLES)).astype(np.float32)
    return gpu, cpu, data


def assert_matches_cpu(got, want):
    assert np.all(np.isfinite(got)), "poison left: some pixels were not written"
    assert np.linalg.norm(got - want) <= TOLERANCES["das_cuda_rel_l2"] * np.linalg.norm(want)


def poisoned_out(gpu):
    return device.from_numpy(np.full((N_FRAMES,) + gpu.grid.shape, np.nan, np.float32))


def test_cuda_array_interface_input_is_kept_alive_not_waited_for(rng):
    gpu, cpu, data = plans(rng)
    d, out = device.from_numpy(data), poisoned_out(gpu)
    _core.device_release_pending(True)
    producer = CAIProducer(d)
    alive = weakref.ref(producer)
    assert gpu(producer, out=out) is out
    del producer
    # the call released its view of the producer with the kernels queued: on the emulator (which
    # runs nothing until the host synchronises) the view still holds the producer; a GPU may
    # already have finished such a small problem, and then the producer is rightly let go
    if EMULATED:
        assert alive() is not None
        assert not gpu.cuda.idle(), "the call waited for its kernels"
    gpu.cuda.synchronize()  # the work is done: the producer is let go here at the latest
    assert alive() is None
    assert _core.device_release_pending() == 0
    assert_matches_cpu(out.to_numpy(), cpu(data))


def test_dlpack_input_without_shape_is_released_after_its_work(rng):
    gpu, cpu, data = plans(rng)
    d, out = device.from_numpy(data), poisoned_out(gpu)
    _core.device_release_pending(True)
    assert gpu(DLPackProducer(d), out=out) is out
    if EMULATED:
        # the imported tensor's release waits, parked, for the queued kernels (not the host)
        assert _core.device_release_pending() == 1
    gpu.cuda.synchronize()
    assert _core.device_release_pending() == 0
    assert_matches_cpu(out.to_numpy(), cpu(data))


def test_results_are_allocated_and_dropped_without_waiting(rng):
    gpu, cpu, _ = plans(rng)
    inputs = [rng.standard_normal((N_FRAMES, 1, 16, N_SAMPLES)).astype(np.float32) for _ in range(4)]
    kept = []
    for data in inputs:  # each result's memory comes in the plan's stream order
        result = gpu(device.from_numpy(data))
        assert isinstance(result, device.DeviceArray) and result.stream == gpu.cuda.stream
        dropped = gpu(device.from_numpy(data))  # freed in stream order after its kernels
        del dropped
        if EMULATED:
            assert not gpu.cuda.idle(), "dropping a result waited for the device"
        kept.append(result)
    for data, result in zip(inputs, kept):
        assert_matches_cpu(result.to_numpy(), cpu(data))


def test_host_input_and_output_still_match(rng):
    gpu, cpu, data = plans(rng)
    out = np.full((N_FRAMES,) + gpu.grid.shape, np.nan, np.float32)
    assert gpu(data, out=out) is out
    assert_matches_cpu(out, cpu(data))


@pytest.mark.parametrize("with_stream", [False, True])
def test_device_memory_that_cannot_fit_is_a_memory_error(rng, with_stream):
    gpu, _, data = plans(rng)
    gpu(device.from_numpy(data))  # the plan (and its stream) is made at the first call
    stream = gpu.cuda.stream if with_stream else None
    with pytest.raises(MemoryError, match="out of device memory"):
        device.empty((1 << 37,), np.float32, stream=stream)  # 512 GiB
    small = device.empty((4,), np.float32, stream=stream)  # the pool still serves
    small.copy_from_host(np.arange(4, dtype=np.float32))
    np.testing.assert_array_equal(small.to_numpy(), np.arange(4, dtype=np.float32))


def run_isolated(env_extra):
    code = ("import json, usbeam\n"
            "info = usbeam.build_info()\n"
            "try:\n    devices = len(usbeam.cuda_devices())\nexcept usbeam.UsbeamError as e:\n    devices = str(e)\n"
            "print(json.dumps([info['cuda_error'], usbeam.cuda_available(), devices]))\n")
    env = dict(os.environ, USBEAM_EMU_QUIET="1", **env_extra)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not EMULATED, reason="the emulator is what can make the driver query fail")
def test_a_failing_device_query_is_reported_not_taken_for_no_gpu():
    error, available, devices = run_isolated({"USBEAM_EMU_DEVICE_QUERY_FAILS": "1"})
    assert "cudaErrorSystemNotReady" in error and available is False
    assert "cudaErrorSystemNotReady" in devices  # cuda_devices() raised UsbeamError naming it
    assert run_isolated({"USBEAM_EMU_NO_DEVICE": "1"}) == [None, False, 0]  # no GPU: not an error


def test_color_doppler_foreign_input_is_kept_alive_not_waited_for(rng):
    """ColorDopplerPlan's CUDA path imports its ensemble as PlanRunner does: the same release."""
    shape, fc, prf, c = (8, 21, 13), 5e6, 4e3, 1540.0
    iq = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)
    gpu = usbeam.ColorDopplerPlan(shape, fc=fc, prf=prf, c=c, average=3, backend="cuda")
    velocity, variance = (device.from_numpy(np.full(shape[1:], np.nan, np.float32)) for _ in range(2))
    gpu(device.from_numpy(iq), velocity=velocity, variance=variance)  # creates the plan's CUDA state
    gpu.cuda.synchronize()
    velocity.copy_from_host(np.full(shape[1:], np.nan, np.float32))
    _core.device_release_pending(True)
    producer = CAIProducer(device.from_numpy(iq))
    alive = weakref.ref(producer)
    gpu(producer, velocity=velocity, variance=variance)
    del producer
    if EMULATED:  # a GPU may have finished already (see the test above)
        assert alive() is not None
        assert not gpu.cuda.idle(), "the call waited for its kernels"
    gpu.cuda.synchronize()
    assert alive() is None
    want_v, _ = usbeam.ColorDopplerPlan(shape, fc=fc, prf=prf, c=c, average=3)(iq)
    got_v = velocity.to_numpy()
    assert np.all(np.isfinite(got_v)), "poison left"
    assert np.max(np.abs(got_v - want_v)) <= TOLERANCES["doppler_cuda_velocity_vn"] * gpu.nyquist_velocity
