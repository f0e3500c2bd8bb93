"""Row-column / TOBE benchmarks: the performance-table configuration of Palamar et al.
("An Open Source Realtime GPU Beamformer for Row-Column and TOBE Arrays") on the CPU, and
Hadamard decoding for orders up to 256.

Beamforming: 2816 samples, 128 channels, 128 emissions, cubic interpolation, a 128 x 128
array; FORCES, HERCULES and TPW B-scans (paper: 1024 x 1024 points) and HERCULES and VLS
volumes (paper: 256^3).  The CPU reference cannot do the paper's grids in reasonable time
on a small machine, so by default the grids are reduced (--bscan 64 --volume 24: the cost
per point does not depend on the grid size); the table says which grid was used.
Reported in ns per output point, beside the paper's GPU figures.

Decode: int16 (n_transmits, 128 channels, 1024 samples) -> float32, direct and fast, in ns
per decoded sample and GB/s (input + output bytes over time).

Each figure is validated first: beamforming against the float64 reference of
tests/reference/rca.py on a few voxels; decoding exactly against the integer product.

Usage: python benchmarks/bench_rca.py [--bscan N] [--volume N] [--orders 16,32,...] [--no-record]
"""
import argparse
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import usbeam  # noqa: E402
from benchmarks.harness import measure, record, validated  # noqa: E402
from reference import rca as ref  # noqa: E402

PAPER = {  # ns/point, RTX 4090 / RX 9070 XT (Palamar et al., performance table)
    "FORCES B-scan": (61.9, 29.7),
    "HERCULES B-scan": (66.9, 42.1),
    "TPW B-scan": (64.1, 34.6),
    "HERCULES volume": (62.4, 59.7),
    "VLS volume": (60.1, 59.6),
}
N_SAMPLES, N_CHANNELS, N_EMISSIONS = 2816, 128, 128
FS, FC, C = 50e6, 5e6, 1540.0
PITCH = 0.3e-3


def cpu_seconds(fn, calls=3):
    """CPU time (all threads) of one call: unlike wall time it is not inflated by other jobs
    taking turns on the cores, so on an idle machine wall ~ cpu / threads."""
    start = time.process_time()
    for _ in range(calls):
        fn()
    return (time.process_time() - start) / calls


def load_note():
    """The machine's load average: figures from a shared machine are only comparable with it."""
    try:
        one, five, _ = os.getloadavg()
    except OSError:
        return ""
    return (f"Load average when recorded: {one:.1f} (1 min), {five:.1f} (5 min) on {os.cpu_count()} cores; "
            "other jobs shared the CPUs, so 'best' is the least disturbed figure.")


def beamforming_cases(bscan, volume):
    array = usbeam.RowColumnArray(N_CHANNELS, N_CHANNELS, PITCH)
    half = 0.5 * N_CHANNELS * PITCH
    lateral = np.linspace(-half, half, bscan)
    depth = np.linspace(5e-3, 40e-3, bscan)
    b_grid = usbeam.RCAGrid.bscan(lateral, depth)
    v_axis = np.linspace(-half, half, volume)
    v_grid = usbeam.RCAGrid.volume(v_axis, v_axis, np.linspace(5e-3, 40e-3, volume))
    angles = np.radians(np.linspace(-15, 15, N_EMISSIONS))
    return array, [
        ("FORCES B-scan", "forces", b_grid, dict()),
        ("HERCULES B-scan", "hercules", b_grid, dict(tx="columns", angles=[0.0])),
        ("TPW B-scan", "tpw", b_grid, dict(tx="rows", angles=angles)),
        ("HERCULES volume", "hercules", v_grid, dict(tx="columns", angles=[0.0])),
        ("VLS volume", "vls", v_grid, dict(tx="rows", angles=angles, focal_depths=np.full(N_EMISSIONS, -20e-3))),
    ]


def check_against_reference(array, method, grid, kwargs, data, image, n_check=12, seed=0):
    rng = np.random.default_rng(seed)
    pick = rng.choice(image.size, size=min(n_check, image.size), replace=False)
    points = grid.points().reshape(-1, 3)[pick]
    tx, rx, lateral = ref.geometry(ref.to_array(points, array.transform), method=method,
                                   n_columns=array.n_columns, n_rows=array.n_rows, pitch_x=array.pitch_x,
                                   pitch_y=array.pitch_y, tx=kwargs.get("tx", "columns"),
                                   angles=kwargs.get("angles", [0.0]),
                                   focal_depths=kwargs.get("focal_depths", [math.inf] * len(kwargs.get("angles", [0]))))
    weights = ref.apodization(lateral, points[:, 2][None, None, :], 1.0, "hann")
    want = ref.das(data[None], tx, rx, weights, fs=FS, c=C, interpolation="cubic")[0]
    got = image.reshape(-1)[pick]
    scale = np.abs(want).max()
    return bool(np.all(np.abs(got - want) <= 5e-5 * scale))


def bench_beamforming(bscan, volume):
    array, cases = beamforming_cases(bscan, volume)
    rng = np.random.default_rng(1)
    data = rng.standard_normal((N_EMISSIONS, N_CHANNELS, N_SAMPLES)).astype(np.float32)
    rows = []
    for name, method, grid, kwargs in cases:
        plan = usbeam.RCABeamformer(array, method, grid, n_samples=N_SAMPLES, fs=FS, c=C,
                                    interpolation="cubic", f_number=1.0, **kwargs)
        image = validated(name, plan(data), lambda img: check_against_reference(array, method, grid, kwargs,
                                                                                data, img))
        timing = measure(lambda: plan(data, out=image), warmup=1, repeat=5, max_seconds=60)
        cpu = cpu_seconds(lambda: plan(data, out=image))
        points = int(np.prod(grid.shape))
        ns_point = timing.median / points * 1e9
        rows.append([name, "x".join(str(s) for s in grid.image_shape), f"{ns_point:.0f}",
                     f"{timing.p95 / points * 1e9:.0f}", f"{timing.best / points * 1e9:.0f}",
                     f"{cpu / points * 1e9:.0f}", f"{PAPER[name][0]} / {PAPER[name][1]}"])
        print(name, rows[-1], flush=True)
    return rows


def bench_decode(orders):
    rng = np.random.default_rng(2)
    rows = []
    for n in orders:
        x = rng.integers(-32767 // n, 32767 // n + 1, size=(n, N_CHANNELS, 1024), dtype=np.int16)
        h = usbeam.hadamard(n).astype(np.int64)
        encoded = np.einsum("te,ecs->tcs", h, x).astype(np.int16)
        for algorithm in ("direct", "fast"):
            plan = usbeam.HadamardDecodePlan(encoded.shape, n, algorithm=algorithm)
            out = validated(f"decode {n} {algorithm}", plan(encoded),
                            lambda got: bool(np.array_equal(got, x.astype(np.float32))))
            timing = measure(lambda: plan(encoded, out=out), warmup=2, repeat=10, max_seconds=20)
            cpu = cpu_seconds(lambda: plan(encoded, out=out))
            values = encoded.size
            bytes_moved = values * (2 + 4)
            rows.append([n, algorithm, f"{timing.median / values * 1e9:.2f}", f"{timing.best / values * 1e9:.2f}",
                         f"{cpu / values * 1e9:.2f}", f"{bytes_moved / timing.best / 1e9:.2f}",
                         f"{timing.median * 1e3:.1f}"])
            print("decode", rows[-1], flush=True)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bscan", type=int, default=64, help="B-scan grid side (paper: 1024)")
    parser.add_argument("--volume", type=int, default=24, help="volume grid side (paper: 256)")
    parser.add_argument("--orders", default="12,16,20,32,64,128,160,192,256")
    parser.add_argument("--no-record", action="store_true", help="print only; do not append RESULTS.md")
    parser.add_argument("--skip-beamforming", action="store_true")
    args = parser.parse_args()
    orders = [int(o) for o in args.orders.split(",") if o]
    if not args.skip_beamforming:
        rows = bench_beamforming(args.bscan, args.volume)
        if not args.no_record:
            record("RCA beamforming, CPU (paper configuration, reduced grids)",
                   ["case", "grid", "ns/point median", "ns/point p95", "ns/point best",
                    "CPU-time ns/point (all threads)", "paper GPU ns/point (RTX 4090 / RX 9070 XT)"],
                   rows, notes=f"{N_SAMPLES} samples, {N_CHANNELS} channels, {N_EMISSIONS} emissions, cubic "
                               f"interpolation, float32 RF, f-number 1 Hann. Grids reduced from the paper's "
                               f"1024x1024 / 256^3 to {args.bscan}x{args.bscan} / {args.volume}^3; ns/point "
                               "does not depend on the grid size. Validated against tests/reference/rca.py. "
                               + load_note())
    rows = bench_decode(orders)
    if not args.no_record:
        record("Hadamard decode, CPU (int16 -> float32, 128 channels x 1024 samples per transmit)",
               ["order", "algorithm", "ns per decoded sample (median)", "ns per decoded sample (best)",
                "CPU-time ns per sample (all threads)", "GB/s (in + out, best)", "ms per call (median)"], rows,
               notes="Validated exactly against decode(encode(x)) == x before timing. " + load_note())


if __name__ == "__main__":
    main()
