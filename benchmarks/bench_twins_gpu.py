"""GPU benchmark of the first CUDA twins: RF -> IQ (Butterworth filtfilt, Kaiser FIR),
B-mode, the Doppler display (median, persistence, masks) and the 'poly' clutter projection
(fused kernel vs algorithm='gemm', cuBLAS), device-resident (DeviceArray in,
DeviceArray out), against the CPU backend in the same run.

Each case is validated against the CPU backend before it is timed.  Device time is the sum
of the plan's per-stage CUDA event times (plan.cuda.stage_times()); wall time covers the call
and a stream synchronisation.  Host <-> device copies are not included (they are explicit in
usbeam; the "copy in" column gives their cost for the input once).
Without a GPU it prints why and exits 0.
Run: .venv/bin/python benchmarks/bench_twins_gpu.py [--no-record] [--repeat N]
"""
import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [os.environ.get("USBEAM_IMPORT_ROOT", str(ROOT)), str(ROOT / "benchmarks")]

import usbeam  # noqa: E402
from harness import Timing, machine, measure, record, validated  # noqa: E402
from usbeam import device  # noqa: E402


def relative_error(got, want):
    return float(np.max(np.abs(got.astype(np.complex128) - want)) / np.max(np.abs(want)))


def time_on_device(plan, d_in, d_out, repeat):
    """(device Timing from CUDA events, wall Timing with synchronisation)."""
    device_samples = []

    def call():
        plan(d_in, out=d_out)
        plan.cuda.synchronize()
        device_samples.append(sum(plan.cuda.stage_times().values()))

    wall = measure(call, repeat=repeat)
    return Timing(device_samples[-len(wall.samples):]), wall


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--no-record", action="store_true", help="print only, do not append to RESULTS.md")
    parser.add_argument("--repeat", type=int, default=50)
    args = parser.parse_args()
    if not usbeam.cuda_available():
        reason = usbeam.build_info()["cuda_error"] or "no CUDA device is visible"
        print(f"bench_twins_gpu: skipped, {reason}")
        return
    rng = np.random.default_rng()
    rows = []

    shape, fs, fc = (16, 128, 2048), 20e6, 5e6
    rf = rng.integers(-8000, 8000, shape).astype(np.int16)
    for name, kwargs in [("butter 5, bandwidth 0.6", dict(bandwidth=0.6)),
                         ("kaiser 60 dB", dict(filter="kaiser")),
                         ("kaiser 60 dB, decimation 4", dict(filter="kaiser", decimation=4))]:
        gpu = usbeam.RF2IQPlan(shape, rf.dtype, fs=fs, fc=fc, backend="cuda", strict=True, **kwargs)
        cpu = usbeam.RF2IQPlan(shape, rf.dtype, fs=fs, fc=fc, **kwargs)
        t = time.perf_counter()
        d_rf = device.from_numpy(rf)
        copy_in = time.perf_counter() - t
        d_iq = device.empty(gpu.out_shape, np.complex64)
        want = cpu(rf)
        validated(name, gpu(d_rf, out=d_iq).to_numpy(), lambda got: relative_error(got, want) < 1e-6)
        on_device, wall = time_on_device(gpu, d_rf, d_iq, args.repeat)
        t_cpu = measure(lambda: cpu(rf, out=want), repeat=max(3, args.repeat // 10))
        rows.append([f"rf2iq 16x128x2048 int16, {name}", f"{on_device.median * 1e3:.3f}",
                     f"{on_device.p95 * 1e3:.3f}", f"{wall.median * 1e3:.3f}",
                     f"{rf.size / on_device.median / 1e9:.2f}", f"{copy_in * 1e3:.1f}",
                     f"{t_cpu.median * 1e3:.2f}", f"{t_cpu.median / on_device.median:.0f}x"])

    images = (32, 512, 512)
    iq = (10 ** rng.uniform(-4, 0, images) * np.exp(2j * np.pi * rng.random(images))).astype(np.complex64)
    for normalize in ("global", "frame"):
        gpu = usbeam.BModePlan(images, 60.0, normalize=normalize, backend="cuda", strict=True)
        cpu = usbeam.BModePlan(images, 60.0, normalize=normalize)
        d_iq = device.from_numpy(iq)
        d_out = device.empty(images, np.uint8)
        want = cpu(iq)
        validated(normalize, gpu(d_iq, out=d_out).to_numpy(),
                  lambda got: int(np.max(np.abs(got.astype(int) - want))) <= 1)
        on_device, wall = time_on_device(gpu, d_iq, d_out, args.repeat)
        t_cpu = measure(lambda: cpu(iq, out=want), repeat=max(3, args.repeat // 10))
        rows.append([f"bmode 32x512x512 complex64 -> uint8, normalize={normalize}", f"{on_device.median * 1e3:.3f}",
                     f"{on_device.p95 * 1e3:.3f}", f"{wall.median * 1e3:.3f}",
                     f"{iq.size / on_device.median / 1e9:.2f}", "-", f"{t_cpu.median * 1e3:.2f}",
                     f"{t_cpu.median / on_device.median:.0f}x"])

    shape = (16, 256, 256)  # a batch of successive velocity / power images
    velocity = rng.standard_normal(shape).astype(np.float32)
    power = rng.standard_normal(shape).astype(np.float32)
    kwargs = dict(median=True, persistence=0.5, power_threshold=0.0, velocity_threshold=0.1)
    gpu = usbeam.DopplerDisplay(shape, backend="cuda", strict=True, **kwargs)
    cpu = usbeam.DopplerDisplay(shape, **kwargs)
    d_in = (device.from_numpy(velocity), device.from_numpy(power))
    d_out = (device.empty(shape, np.float32), device.empty(shape, np.float32), device.empty(shape, np.uint8))
    want = cpu(velocity, power)
    got = gpu(*d_in, out_velocity=d_out[0], out_power=d_out[1], mask=d_out[2])
    validated("display", [g.to_numpy() for g in got],
              lambda g: all(np.array_equal(a, b) for a, b in zip(g, want)))  # the twin is bit-exact
    display_samples = []

    def display_call():
        gpu(*d_in, out_velocity=d_out[0], out_power=d_out[1], mask=d_out[2])
        gpu.cuda.synchronize()
        display_samples.append(sum(gpu.cuda.stage_times().values()))

    wall = measure(display_call, repeat=args.repeat)
    on_device = Timing(display_samples[-len(wall.samples):])
    t_cpu = measure(lambda: cpu(velocity, power), repeat=max(3, args.repeat // 10))
    rows.append(["doppler display 16x256x256 velocity + power, median, persistence",
                 f"{on_device.median * 1e3:.3f}", f"{on_device.p95 * 1e3:.3f}", f"{wall.median * 1e3:.3f}",
                 f"{2 * velocity.size / on_device.median / 1e9:.2f}", "-", f"{t_cpu.median * 1e3:.2f}",
                 f"{t_cpu.median / on_device.median:.0f}x"])

    # The 'poly' clutter projection (order 2 on a 64-frame ensemble, 40 dB of slow clutter), both
    # CUDA paths under the same stage "clutter.project": the fused kernel (one pass, double sums)
    # and algorithm='gemm' (two cuBLAS SGEMMs, float32 sums), each validated against the CPU.
    shape = (64, 256, 256)
    t = np.linspace(-1, 1, shape[0])[:, None, None]
    tissue = 100.0 * np.exp(2j * np.pi * rng.random(shape[1:]))
    noise = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
    ensemble = (tissue * (1 + 0.3 * t) + noise / np.sqrt(2)).astype(np.complex64)
    cpu = usbeam.ClutterFilter(shape, "poly", order=2)
    want = cpu(ensemble)
    scale = float(np.max(np.abs(ensemble)))
    t_cpu = measure(lambda: cpu(ensemble, out=want), repeat=max(3, args.repeat // 10))
    # bounds relative to the clutter amplitude: tests/tolerances.py doppler_cuda_clutter_rel and
    # doppler_cuda_clutter_gemm_rel (float32 sums round at the clutter, before it is removed)
    for algorithm, bound in (("kernel", 1e-6), ("gemm", 2e-5)):
        gpu = usbeam.ClutterFilter(shape, "poly", order=2, backend="cuda", strict=True, algorithm=algorithm)
        d_in = device.from_numpy(ensemble)
        d_out = device.empty(shape, np.complex64)
        validated(f"clutter {algorithm}", gpu(d_in, out=d_out).to_numpy(),
                  lambda got: float(np.max(np.abs(got - want))) <= bound * scale)
        on_device, wall = time_on_device(gpu, d_in, d_out, args.repeat)
        rows.append([f"clutter poly 2, 64x256x256 complex64, algorithm={algorithm}", f"{on_device.median * 1e3:.3f}",
                     f"{on_device.p95 * 1e3:.3f}", f"{wall.median * 1e3:.3f}",
                     f"{ensemble.size / on_device.median / 1e9:.2f}", "-", f"{t_cpu.median * 1e3:.2f}",
                     f"{t_cpu.median / on_device.median:.0f}x"])

    header = ["case", "device median ms", "device p95 ms", "wall median ms", "Gsamples/s (device)",
              "copy in ms", "CPU backend ms", "speed-up (device vs CPU)"]
    if args.no_record:
        print(f"Machine: {machine()}")
        for row in rows:
            print(" | ".join(row))
    else:
        record("CUDA twins: rf2iq, bmode, Doppler display and clutter projection (device-resident)", header, rows,
               notes="Device time: sum of the plan's CUDA-event stage times; inputs and outputs stay on the GPU.")


if __name__ == "__main__":
    main()
