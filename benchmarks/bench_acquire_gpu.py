"""GPU Hadamard decode: the three CUDA paths of cuda/hadamard.cu against the device-to-device
copy bandwidth measured in the same run and against each other.

Configuration (issue #5): order 128, 4096 samples, int16 -> float32, data
(128 transmits, CHANNELS, 4096 samples) decoded along the transmit axis.  Achieved GB/s =
(bytes read + bytes written) / device time, the copy bandwidth counted the same way
(usbeam._core.cuda_d2d_bandwidth: cudaMemcpy D2D timed with CUDA events).  Device times are
the plans' CUDA-event stage times (for 'gemm' the sum of convert + SGEMM + scale, the
conversion included).  Targets: the fastest custom path >= 70 % of the copy bandwidth and
>= 5x faster than the cuBLAS path.  Every path is validated bit for bit against the CPU
backend (and decode(encode(x)) == x) before it is timed.  Without a GPU it prints why and
exits 0.

    python benchmarks/bench_acquire_gpu.py [--order 128] [--samples 4096] [--channels 128]
                                      [--repeat 50] [--no-record]
"""
import argparse
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [os.environ.get("USBEAM_IMPORT_ROOT", str(ROOT)), str(ROOT / "benchmarks"), str(ROOT / "tests")]

import harness  # noqa: E402
import usbeam  # noqa: E402
from usbeam import _core, device  # noqa: E402


def device_timing(plan, d_in, d_out, repeat):
    """CUDA-event time of the whole plan (all stages) per call, and the wall time."""
    samples = []

    def call():
        plan(d_in, out=d_out)
        plan.cuda.synchronize()
        samples.append(sum(plan.cuda.stage_times().values()))

    wall = harness.measure(call, repeat=repeat)
    return harness.Timing(samples[-len(wall.samples):]), wall


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--order", type=int, default=128)
    parser.add_argument("--samples", type=int, default=4096)
    parser.add_argument("--channels", type=int, default=128)
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--no-record", action="store_true", help="print only, do not append to RESULTS.md")
    args = parser.parse_args(argv)
    if not usbeam.cuda_available():
        reason = usbeam.build_info()["cuda_error"] or "no CUDA device is visible"
        print(f"bench_acquire_gpu: skipped, {reason}")
        return 0
    n = args.order
    rng = np.random.default_rng(5)
    x = rng.integers(-32767 // n, 32767 // n + 1, size=(n, args.channels, args.samples), dtype=np.int16)
    # float64 BLAS: every sum is an integer below 2^15 here, exact in float64
    encoded = np.tensordot(usbeam.hadamard(n).astype(np.float64), x.astype(np.float64), axes=1).astype(np.int16)
    want = usbeam.hadamard_decode(encoded, n)  # CPU backend
    assert np.array_equal(want, x.astype(np.float32)), "CPU decode(encode(x)) != x"
    d_in = device.from_numpy(encoded)
    d_out = device.empty(encoded.shape, np.float32)
    moved = encoded.nbytes + want.nbytes
    copy_gbps = _core.cuda_d2d_bandwidth(want.nbytes, 50)
    rows, device_times = [], {}
    # the last row: 'fast' with transmit_last (out [channels][samples][n], stores along the elements)
    for algorithm, last in (("direct", False), ("fast", False), ("gemm", False), ("fast", True)):
        label = algorithm + (", transmit_last" if last else "")
        plan = usbeam.HadamardDecodePlan(encoded.shape, n, dtype=np.int16, algorithm=algorithm, backend="cuda",
                                         strict=True, transmit_last=last)
        out = device.empty(plan.out_shape, np.float32) if last else d_out
        expected = np.moveaxis(want, 0, -1) if last else want
        plan(d_in, out=out)
        harness.validated(f"decode {label}", out.to_numpy(), lambda got: bool(np.array_equal(got, expected)))
        on_device, wall = device_timing(plan, d_in, out, args.repeat)
        device_times[label] = on_device.median
        gbps = moved / on_device.median / 1e9
        rows.append([label, f"{on_device.median * 1e3:.3f}", f"{on_device.p95 * 1e3:.3f}",
                     f"{wall.median * 1e3:.3f}", f"{gbps:.0f}", f"{100 * gbps / copy_gbps:.0f} %",
                     " + ".join(f"{k} {v * 1e3:.3f} ms" for k, v in plan.cuda.stage_times().items())])
    best = min(("direct", "fast"), key=device_times.get)
    best_gbps = moved / device_times[best] / 1e9
    speedup = device_times["gemm"] / device_times[best]
    verdict = (f"fastest custom path '{best}': {best_gbps:.0f} GB/s = {100 * best_gbps / copy_gbps:.0f} % of the "
               f"D2D copy ({copy_gbps:.0f} GB/s; target >= 70 %: {'met' if best_gbps >= 0.7 * copy_gbps else 'NOT met'}"
               f"), {speedup:.1f}x faster than the cuBLAS path with its conversion (target >= 5x: "
               f"{'met' if speedup >= 5 else 'NOT met'}).")
    header = ["path", "device median ms", "device p95 ms", "wall median ms", "GB/s (in + out, device)",
              "of D2D copy", "stages (last call)"]
    notes = (f"int16 ({n}, {args.channels}, {args.samples}) -> float32 along axis 0, order {n}; "
             f"{moved / 1e6:.0f} MB moved per call. Validated bit-exact against the CPU backend. " + verdict)
    print(verdict)
    if args.no_record:
        print(notes)
        print(harness.markdown_table(header, rows))
    else:
        harness.record("Hadamard decode on the GPU", header, rows, command="python benchmarks/bench_acquire_gpu.py",
                       notes=notes)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
