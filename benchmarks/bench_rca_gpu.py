"""GPU row-column DAS (cuda/rca.cu) in the performance-table configuration of Palamar et al.
("An Open Source Realtime GPU Beamformer for Row-Column and TOBE Arrays"), in ns per output
point beside the paper's RTX 4090 / RX 9070 XT figures (target on an H100: FORCES B-scan
<= 15 ns/point).

Configuration (as benchmarks/bench_rca.py): 128 x 128 array, pitch 0.3 mm, 2816 samples, 128
channels, 128 emissions, fs 50 MHz, cubic interpolation, float32 RF, f-number 1 Hann;
B-scans 1024 x 1024 and volumes 256^3 (the paper's grids; --bscan / --volume to change).
Device time = the plan's CUDA-event stage time, data already on the GPU.  Each case is first
validated on the plan it times: the GPU image of the timed grid, taken every `stride` voxels
along each axis (a strided subset of about --check points a side for B-scans, --check / 4 for
volumes, default 48), against the CPU backend on the grid of exactly those voxels (the timed
grid's voxel transform with its steps times the stride; tests/tolerances.py rca_cuda_rel_l2).
Without a GPU it prints why and exits 0.

    python benchmarks/bench_rca_gpu.py [--bscan 1024] [--volume 256] [--check 48] [--repeat 10]
                                 [--no-record]
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
from usbeam import device  # noqa: E402

from bench_rca import FS, C, N_CHANNELS, N_EMISSIONS, N_SAMPLES, PAPER, beamforming_cases  # noqa: E402


def relative_l2(got, want):
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


def strided(grid, stride):
    """The voxels (i, j, k) = stride * (i', j', k') of `grid` as a grid of their own, and the
    slices that pick them out of the image of `grid` (image axes: (k,) j, i)."""
    transform = grid.voxel_transform.copy()
    transform[:3, :3] *= stride
    shape = tuple(-(-n // stride) for n in grid.shape)
    picks = tuple(slice(None, None, stride) for _ in grid.image_shape)
    return usbeam.RCAGrid(transform, shape), picks


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bscan", type=int, default=1024)
    parser.add_argument("--volume", type=int, default=256)
    parser.add_argument("--check", type=int, default=48,
                        help="points a side of the strided subset validated against the CPU (volumes: a quarter)")
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--no-record", action="store_true", help="print only, do not append to RESULTS.md")
    args = parser.parse_args(argv)
    if not usbeam.cuda_available():
        reason = usbeam.build_info()["cuda_error"] or "no CUDA device is visible"
        print(f"bench_rca_gpu: skipped, {reason}")
        return 0
    from tolerances import TOLERANCES

    array, cases = beamforming_cases(args.bscan, args.volume)
    rng = np.random.default_rng(1)
    data = rng.standard_normal((N_EMISSIONS, N_CHANNELS, N_SAMPLES)).astype(np.float32)
    d_data = device.from_numpy(data)
    common = dict(n_samples=N_SAMPLES, fs=FS, c=C, interpolation="cubic", f_number=1.0)
    rows = []
    for name, method, grid, kwargs in cases:
        gpu = usbeam.RCABeamformer(array, method, grid, backend="cuda", strict=True, **common, **kwargs)
        d_out = gpu(d_data)
        side = args.check if grid.shape[0] == 1 else max(8, args.check // 4)
        small, picks = strided(grid, max(1, -(-max(grid.shape) // side)))
        want = usbeam.RCABeamformer(array, method, small, **common, **kwargs)(data)
        got = d_out.to_numpy()[picks]
        error = relative_l2(got, want)
        harness.validated(name, error, lambda e: e <= TOLERANCES["rca_cuda_rel_l2"])
        samples = []

        def call():
            gpu(d_data, out=d_out)
            gpu.cuda.synchronize()
            samples.append(gpu.cuda.stage_times()["rca.beamform"])

        wall = harness.measure(call, warmup=2, repeat=args.repeat)
        on_device = harness.Timing(samples[-len(wall.samples):])
        points = int(np.prod(grid.shape))
        rows.append([name, "x".join(str(s) for s in grid.image_shape), f"{on_device.median / points * 1e9:.2f}",
                     f"{on_device.p95 / points * 1e9:.2f}", f"{wall.median / points * 1e9:.2f}",
                     f"{PAPER[name][0]} / {PAPER[name][1]}", f"{error:.1e}"])
        print(name, rows[-1], flush=True)
    forces = float(rows[0][2])
    verdict = f"FORCES B-scan {forces:.2f} ns/point (H100 target <= 15: {'met' if forces <= 15 else 'NOT met'})."
    header = ["case", "grid", "device ns/point median", "device ns/point p95", "wall ns/point median",
              "paper ns/point (RTX 4090 / RX 9070 XT)", "GPU vs CPU rel. L2 (check grid)"]
    notes = (f"{N_SAMPLES} samples, {N_CHANNELS} channels, {N_EMISSIONS} emissions, fs {FS / 1e6:.0f} MHz, cubic "
             f"interpolation, float32 RF, f-number 1 Hann, one frame. " + verdict)
    if args.no_record:
        print(notes)
        print(harness.markdown_table(header, rows))
    else:
        harness.record("RCA beamforming on the GPU (paper configuration)", header, rows,
                       command="python benchmarks/bench_rca_gpu.py", notes=notes)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
