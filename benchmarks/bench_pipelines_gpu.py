"""End-to-end GPU pipelines: RF2IQ_DAS_BMODE, RF2IQ_DAS_DOPPLER and RF2IQ_DAS_POWERDOPPLER.

Standard Doppler configuration (issue #5): 128 elements, 1024 samples, 3 plane waves
(-5, 0, 5 degrees) compounded, a 64-frame ensemble, a 256 x 256 grid; int16 RF as scanners
deliver it, already on the GPU (the chain reads it in place: no host copy is timed).
Stages: usbeam.Pipeline (rf2iq -> DAS -> B-mode, 64 frames per call) and
usbeam.DopplerPipeline (rf2iq -> DAS -> 'poly' clutter filter (order 2) -> color and/or power
Doppler), backend='cuda'.

Per pipeline, in separate phases so that no measurement disturbs another:
  1. timing: median / p95 wall ms per call (launch + a synchronisation of the last stage's
     stream), nothing else in the timed function; GPU ms from the plans' CUDA events;
  2. sustained input: a batch of back-to-back calls with one synchronisation at the end, RF
     bytes x calls / elapsed, in GB/s; FPS from the same batch (frames per call x calls / s);
  3. energy: the NVML total-energy counter (libnvidia-ml.so.1 through ctypes) read before and
     after a batch of calls, minus the idle baseline measured in the same run just before
     (counter over an idle interval: idle W x batch time), per call;
  4. memory: what the pipeline holds (plan device buffers + intermediate arrays, usbeam's
     device_bytes) and the peak device memory in use (NVML, sampled every millisecond by a
     thread during a batch of calls) above the level before the pipeline was built.
The verdict line compares the sustained input rate of each Doppler pipeline with the target
>= 25 GB/s; it is given only for the standard configuration (the defaults below), otherwise
it says the configuration is not the standard one.
Every pipeline is validated first against the same chain on the CPU backend
(tests/tolerances.py pipeline_cuda_*), so a wrong answer is never timed.  Without a GPU it
prints why and exits 0; without NVML the energy and peak columns are "n/a".

    python benchmarks/bench_pipelines_gpu.py [--repeat 30] [--frames 64] [--grid 256] [--no-record]
"""
import argparse
import ctypes
import os
import sys
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [os.environ.get("USBEAM_IMPORT_ROOT", str(ROOT)), str(ROOT / "benchmarks"), str(ROOT / "tests")]

import harness  # noqa: E402
import usbeam  # noqa: E402
from tolerances import TOLERANCES  # noqa: E402
from usbeam import device  # noqa: E402

FC, FS, C = 5e6, 20e6, 1540.0


class Nvml:
    """The few NVML calls needed, through ctypes; `available` is False when the library or the
    energy counter is missing (then every reading is None)."""

    class _Memory(ctypes.Structure):
        _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]

    def __init__(self, index=0):
        self.available, self.reason = False, ""
        try:
            self._lib = ctypes.CDLL("libnvidia-ml.so.1")
        except OSError as exc:
            self.reason = f"libnvidia-ml.so.1 not loadable ({exc})"
            return
        if self._lib.nvmlInit_v2() != 0:
            self.reason = "nvmlInit_v2 failed"
            return
        self._handle = ctypes.c_void_p()
        if self._lib.nvmlDeviceGetHandleByIndex_v2(ctypes.c_uint(index), ctypes.byref(self._handle)) != 0:
            self.reason = f"no NVML handle for GPU {index}"
            return
        self.available = self.energy_mj() is not None
        if not self.available:
            self.reason = "nvmlDeviceGetTotalEnergyConsumption is not supported on this GPU"

    def energy_mj(self):
        value = ctypes.c_ulonglong()
        if self._lib.nvmlDeviceGetTotalEnergyConsumption(self._handle, ctypes.byref(value)) != 0:
            return None
        return int(value.value)

    def used_bytes(self):
        if not hasattr(self, "_handle"):
            return None
        info = self._Memory()
        if self._lib.nvmlDeviceGetMemoryInfo(self._handle, ctypes.byref(info)) != 0:
            return None
        return int(info.used)


TARGET_GBPS = 25.0  # the target: sustained RF input on the standard Doppler configuration
STANDARD = dict(frames=64, elements=128, samples=1024, angles=3, grid=256)


def energy_per_run(nvml, fn, runs, idle_seconds=2.0):
    """(joules per run above idle, idle watts); None without NVML.  The counter is read only
    around the batch (never inside `fn`), the idle baseline just before it in the same run."""
    if not nvml.available:
        return None, None
    e0, t0 = nvml.energy_mj(), time.perf_counter()
    time.sleep(idle_seconds)
    idle_w = (nvml.energy_mj() - e0) * 1e-3 / (time.perf_counter() - t0)
    e0, t0 = nvml.energy_mj(), time.perf_counter()
    for _ in range(runs):
        fn()
    elapsed = time.perf_counter() - t0
    joules = (nvml.energy_mj() - e0) * 1e-3 - idle_w * elapsed
    return joules / runs, idle_w


def sustained(launch, wait, runs):
    """Seconds per call over `runs` back-to-back calls with one wait at the end."""
    launch()
    wait()
    t0 = time.perf_counter()
    for _ in range(runs):
        launch()
    wait()
    return (time.perf_counter() - t0) / runs


def peak_used_bytes(nvml, fn, runs, period=1e-3):
    """Peak NVML device memory in use while `fn` runs `runs` times, sampled by a thread every
    `period` s (and once before and after); None without NVML.  Kept out of the timed and
    energy phases: the sampling costs CPU time and NVML calls."""
    if nvml.used_bytes() is None:
        return None
    peak, stop = [nvml.used_bytes()], threading.Event()

    def sample():
        while not stop.is_set():
            used = nvml.used_bytes()
            if used is not None:
                peak[0] = max(peak[0], used)
            time.sleep(period)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        for _ in range(runs):
            fn()
    finally:
        stop.set()
        sampler.join()
    return max(peak[0], nvml.used_bytes() or 0)


def verdict(doppler_rates, standard):
    """One line: each Doppler pipeline's sustained input rate against TARGET_GBPS."""
    if not doppler_rates:
        return "Verdict: no Doppler pipeline in this run."
    rates = ", ".join(f"{kind} {gbps:.2f} GB/s" for kind, gbps in doppler_rates)
    if not standard:
        return (f"Verdict: none (not the standard Doppler configuration {STANDARD}); sustained input: {rates}; "
                f"target >= {TARGET_GBPS:.0f} GB/s.")
    ok = all(gbps >= TARGET_GBPS for _, gbps in doppler_rates)
    return f"Verdict: sustained input {rates}; target >= {TARGET_GBPS:.0f} GB/s: {'PASS' if ok else 'FAIL'}."


def geometry(n_elements, n_angles, grid_n, n_samples):
    probe = usbeam.LinearArray(n_elements=n_elements, pitch=3e-4, width=2.7e-4, fc=FC, bandwidth=0.6)
    half = 0.5 * (n_elements - 1) * 3e-4
    angles = np.deg2rad(np.linspace(-5, 5, n_angles)) if n_angles > 1 else [0.0]
    sequence = [usbeam.PlaneWave(float(a)) for a in angles]
    # 5..35 mm, or as deep as the record reaches (a short smoke-run record): a deeper grid would
    # be mostly empty, which Beamformer refuses (its min_coverage check)
    z_max = min(35e-3, 0.9 * C * (n_samples - 1) / FS / 2)
    grid = usbeam.Grid(x=np.linspace(-half, half, grid_n), z=np.linspace(min(5e-3, z_max / 4), z_max, grid_n))
    return probe, sequence, grid


def held_bytes(plans, arrays):
    total = sum(p.cuda.device_bytes for p in plans if p is not None and p.cuda is not None)
    return total + sum(a.nbytes for a in arrays if a is not None)


def median_abs(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    finite = np.isfinite(a) & np.isfinite(b)
    return float(np.median(np.abs(a[finite] - b[finite])))


def build(kind, probe, sequence, grid, n_frames, n_samples, backend):
    common = dict(fs=FS, fc=FC, c=C, n_samples=n_samples, n_frames=n_frames)
    if kind == "RF2IQ_DAS_BMODE":
        return usbeam.Pipeline(probe, sequence, grid, bmode_output="db", dynamic_range=60.0, backend=backend,
                               **common)
    outputs = ("color",) if kind == "RF2IQ_DAS_DOPPLER" else ("power",)
    return usbeam.DopplerPipeline(probe, sequence, grid, prf=4e3, clutter="poly", clutter_options=dict(order=2),
                                  outputs=outputs, backend=backend, **common)


def last_stage(pipeline):
    if isinstance(pipeline, usbeam.Pipeline):
        return pipeline.bmode
    return pipeline.color if pipeline.color is not None else pipeline.power


def validate(kind, gpu, cpu, rf_host, d_rf):
    """The GPU chain against the CPU chain on the same RF; raises on a wrong answer."""
    got = gpu(d_rf)
    want = cpu(rf_host)
    if kind == "RF2IQ_DAS_BMODE":
        err = median_abs(got.to_numpy(), want)
        ok = err <= TOLERANCES["pipeline_cuda_db_median_abs"]
    elif kind == "RF2IQ_DAS_DOPPLER":
        err = median_abs(got.velocity.to_numpy(), want.velocity) / gpu.nyquist_velocity
        ok = err <= TOLERANCES["pipeline_cuda_velocity_median_vn"]
    else:
        err = median_abs(got.power.to_numpy(), want.power)
        ok = err <= TOLERANCES["pipeline_cuda_db_median_abs"]
    harness.validated(kind, ok, lambda r: r)
    return err


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--frames", type=int, default=64)
    parser.add_argument("--elements", type=int, default=128)
    parser.add_argument("--samples", type=int, default=1024)
    parser.add_argument("--angles", type=int, default=3)
    parser.add_argument("--grid", type=int, default=256)
    parser.add_argument("--only", choices=["RF2IQ_DAS_BMODE", "RF2IQ_DAS_DOPPLER", "RF2IQ_DAS_POWERDOPPLER"])
    parser.add_argument("--no-record", action="store_true", help="print only; do not append to RESULTS.md")
    args = parser.parse_args()
    if not usbeam.cuda_available():
        reason = usbeam.build_info()["cuda_error"] or "no CUDA device is visible"
        print(f"bench_pipelines_gpu: skipped: {reason}.")
        return 0
    nvml = Nvml()
    probe, sequence, grid = geometry(args.elements, args.angles, args.grid, args.samples)
    rng = np.random.default_rng(0)
    rf = rng.integers(-4000, 4000, (args.frames, len(sequence), args.elements, args.samples), dtype=np.int16)
    input_bytes = rf.nbytes
    d_rf = device.from_numpy(rf)
    kinds = [args.only] if args.only else ["RF2IQ_DAS_BMODE", "RF2IQ_DAS_DOPPLER", "RF2IQ_DAS_POWERDOPPLER"]
    rows, doppler_rates = [], []
    for kind in kinds:
        used_before = nvml.used_bytes()
        gpu = build(kind, probe, sequence, grid, args.frames, args.samples, "cuda")
        cpu = build(kind, probe, sequence, grid, args.frames, args.samples, "cpu")
        err = validate(kind, gpu, cpu, rf, d_rf)
        del cpu
        stage = last_stage(gpu)

        def run():
            gpu(d_rf)
            stage.cuda.synchronize()

        wall = harness.measure(run, repeat=args.repeat)
        gpu_ms = 1e3 * sum(gpu.timings.values())
        batch = max(args.repeat, 10)
        per_call = sustained(lambda: gpu(d_rf), stage.cuda.synchronize, batch)
        gbps = input_bytes / per_call / 1e9
        if kind != "RF2IQ_DAS_BMODE":
            doppler_rates.append((kind, gbps))
        joules, idle_w = energy_per_run(nvml, run, batch)
        peak = peak_used_bytes(nvml, run, batch)
        if isinstance(gpu, usbeam.Pipeline):
            plans = (gpu.rf2iq, gpu.beamformer, gpu.bmode)
            arrays = (gpu.iq, gpu.image, gpu._device_rf, gpu._device_out)
        else:
            plans = (gpu.rf2iq, gpu.beamformer, gpu.clutter, gpu.color, gpu.power)
            arrays = (gpu._iq, gpu._beamformed, gpu._filtered, gpu._velocity, gpu._variance, gpu._power,
                      gpu._device_rf)
        held = held_bytes(plans, arrays)
        peak_mib = "n/a" if peak is None or used_before is None else f"{(peak - used_before) / 2**20:.0f}"
        rows.append([kind, f"{wall.median * 1e3:.2f}", f"{wall.p95 * 1e3:.2f}", f"{gpu_ms:.2f}",
                     f"{args.frames / per_call:.0f}", f"{gbps:.2f}",
                     "n/a" if joules is None else f"{joules:.3f}",
                     "n/a" if idle_w is None else f"{idle_w:.0f}", f"{held / 2**20:.0f}", peak_mib,
                     f"{err:.2e}"])
        del gpu
    header = ["pipeline", "ms (median)", "ms (p95)", "GPU ms (events)", "FPS (sustained)",
              "input GB/s (sustained)", "J/run", "idle W", "device MiB held", "peak MiB (NVML, sampled)",
              "max err vs CPU (median)"]
    line = verdict(doppler_rates, {k: getattr(args, k) for k in STANDARD} == STANDARD)
    print(line)
    notes = (f"{args.elements} elements x {args.samples} samples x {args.angles} angles int16, "
             f"{args.frames} frames per call, {args.grid} x {args.grid} grid; RF already on the GPU. "
             f"Sustained = back-to-back calls, one synchronisation at the end; FPS = frames per second. "
             + line + " " + ("" if nvml.available else f"Energy and peak memory not measured: {nvml.reason}."))
    if args.no_record:
        print(harness.markdown_table(header, rows))
        print(notes)
    else:
        harness.record("End-to-end GPU pipelines", header, rows, command="python benchmarks/bench_pipelines_gpu.py",
                       notes=notes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
