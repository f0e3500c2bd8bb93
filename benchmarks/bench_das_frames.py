"""CPU delay-and-sum of a few frames (issue 21: "few frames (1 to 8) and many transmits"): the
default plan, which on AVX-512 beamforms a plan of a few frames (IQ up to 5, 7 of one transmit
at fs = 4 fc or of 8 and more; RF up to 12) frame by frame through the lanes (csrc/beamform/das_lanes.c),
against the same plan built with USBEAM_DAS_LANES=0, which takes das.c's multi-frame kernels
(8 frames a vector: fewer leave lanes idle).

Acquisition: bench_das.py's (128 elements, 2048 samples at 20 MHz, fc 5 MHz, linear, f-number
1.7, 256 x 256 grid) with 1 (0 deg), 3 (-5, 0, 5 deg) or 11 (-10..10 deg) plane waves; IQ, or
with --rf the real part of the same record as RF (float32).  For each
(transmits, frames) the two plans' images are checked first (relative L2 within das_rel_l2:
different summation orders), then both are timed interleaved, round by round: median and p95 (ms),
points/s (pixel x transmit x aperture element x frame) and the speed-up of the default.

    python benchmarks/bench_das_frames.py [--rounds 3] [--repeat 5] [--rf] [--no-record]
"""
import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [os.environ.get("USBEAM_IMPORT_ROOT", str(ROOT)), str(ROOT / "benchmarks"), str(ROOT / "tests")]

import usbeam  # noqa: E402
import bench_das  # noqa: E402
import harness  # noqa: E402
from tolerances import TOLERANCES  # noqa: E402

ANGLES = {1: [0.0], 3: [-5.0, 0.0, 5.0], 11: list(np.linspace(-10, 10, 11))}


def plans(cfg, dtype):
    default = bench_das.beamformer(cfg, dtype=dtype)
    old = os.environ.get("USBEAM_DAS_LANES")
    os.environ["USBEAM_DAS_LANES"] = "0"  # read at plan creation
    try:
        multi = bench_das.beamformer(cfg, dtype=dtype)
    finally:
        if old is None:
            del os.environ["USBEAM_DAS_LANES"]
        else:
            os.environ["USBEAM_DAS_LANES"] = old
    return default, multi


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-record", action="store_true")
    parser.add_argument("--rf", action="store_true", help="the real part of the record as RF (float32)")
    parser.add_argument("--transmits", type=int, action="append", choices=sorted(ANGLES))
    parser.add_argument("--frames", type=int, action="append")
    args = parser.parse_args()
    rows = []
    for n_tx in args.transmits or [1, 3, 11]:
        for n_frames in args.frames or ([1, 2, 4, 8, 12, 16] if args.rf else [1, 2, 3, 4, 5, 6, 7, 8]):
            cfg = bench_das.synthetic(f"{n_tx}tx", 256, np.array(ANGLES[n_tx]), n_frames, np.random.default_rng(21))
            default, multi = plans(cfg, np.float32 if args.rf else np.complex64)
            iq = np.ascontiguousarray(cfg["iq"].real) if args.rf else cfg["iq"]
            lanes = usbeam._core.das_lane_rows(default._plan) > 0
            a, b = default(iq), multi(iq)
            err = float(np.linalg.norm(a - b) / np.linalg.norm(b))
            harness.validated(f"{n_tx} tx x {n_frames} frames", err, lambda e: e <= TOLERANCES["das_rel_l2"])
            times = {"default": [], "multi": []}
            out = np.empty_like(a)
            for _ in range(args.rounds):
                for name, bf in (("default", default), ("multi", multi)):
                    times[name] += harness.measure(lambda: bf(iq, out=out), warmup=1, repeat=args.repeat).samples
            t_def, t_multi = harness.Timing(times["default"]), harness.Timing(times["multi"])
            n_points = bench_das.entries(default, cfg) * n_frames
            rows.append([f"{n_tx} tx" + (" RF" if args.rf else ""), n_frames, "lanes" if lanes else "multi-frame",
                         f"{t_def.median * 1e3:.2f}", f"{t_def.p95 * 1e3:.2f}", f"{n_points / t_def.median:.2e}",
                         f"{t_multi.median * 1e3:.2f}", f"{t_multi.p95 * 1e3:.2f}", f"{t_multi.median / t_def.median:.2f}x",
                         f"{err:.1e}"])
            print(rows[-1], flush=True)
    header = ["acquisition", "frames", "default path", "default median ms", "p95 ms", "points/s",
              "multi-frame kernels median ms", "p95 ms", "speed-up", "rel L2 between"]
    notes = (f"256 x 256 grid, 128 elements, 2048 samples, {'RF' if args.rf else 'IQ'}, linear; "
             "points = pixel x transmit x aperture "
             "element x frame.  \"multi-frame kernels\": the same plan built with "
             "USBEAM_DAS_LANES=0 (das.c), timed interleaved with the default round by round.")
    title = f"CPU DAS, few frames{' (RF)' if args.rf else ''}: lanes frame by frame vs the multi-frame kernels"
    harness.publish(title, header, rows,
                    no_record=args.no_record, notes=notes)


if __name__ == "__main__":
    main()
