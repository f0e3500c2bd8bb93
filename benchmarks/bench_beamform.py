"""Benchmark of delay-and-sum (usbeam.Beamformer, CPU backend) against PyMUST dasmtx.

Case: PWI_disk (MUST example: 128 elements, 32 frames, 334 IQ samples from PyMUST rf2iq)
on the 251 x 251 grid (63,001 points) of the golden B-mode, f-number from the element
directivity, nearest and linear interpolation.  Each result is validated against
PyMUST's M @ IQ before timing.  Timed: plan creation (usbeam.Beamformer vs pymust.dasmtx)
and beamforming of the 32 frames (usbeam execute vs the prebuilt sparse product M @ IQ,
with M as dasmtx returns it (COO) and converted to CSR; the faster of the two is the
reference).  Run: .venv/bin/python benchmarks/bench_beamform.py [--no-record]
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
from harness import measure, publish, validated  # noqa: E402


def find_dataset(name):
    for folder in (ROOT.parent / "shared" / "datasets", Path("/work/shared/datasets")):
        if (folder / name).exists():
            return folder / name
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--no-record", action="store_true", help="print only, do not append to RESULTS.md")
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    path = find_dataset("PWI_disk.mat")
    if path is None:
        print("PWI_disk.mat not found (../shared/datasets); nothing to benchmark")
        return
    import scipy.io
    import pymust

    rec = usbeam.load_must(path)
    raw = scipy.io.loadmat(path)
    param = pymust.utils.Param()
    param.fs, param.fc, param.c, param.t0 = rec.fs, rec.fc, rec.c, np.array([rec.t0])
    param.bandwidth, param.pitch, param.width, param.Nelements = rec.bandwidth * 100, rec.probe.pitch, rec.probe.width, 128
    param.TXdelay = np.zeros((1, 128))
    iq_matlab = pymust.rf2iq(raw["RF"].astype(np.float64), param)          # (samples, elements, frames)
    iq = np.ascontiguousarray(iq_matlab.T).astype(np.complex64)             # (frames, elements, samples)
    iq_columns = np.asfortranarray(iq_matlab.reshape(-1, 32, order="F"))
    x = np.linspace(-12.5e-3, 12.5e-3, 251)
    z = np.linspace(10e-3, 35e-3, 251)
    X, Z = np.meshgrid(x, z)
    grid = usbeam.Grid(x=x, z=z)

    rows = []
    for method in ("nearest", "linear"):
        param.fnumber = None
        started = time.perf_counter()
        M = pymust.dasmtx(1j * np.array(iq_matlab.shape[:2]), X, Z, param, method)
        t_dasmtx = time.perf_counter() - started
        M_csr = M.tocsr()
        want = np.moveaxis((M_csr @ iq_columns).reshape(251, 251, 32, order="F"), -1, 0)

        def make_plan():
            return usbeam.Beamformer(rec.probe, rec.sequence, grid, fs=rec.fs, fc=rec.fc, c=rec.c, t0=rec.t0,
                                     n_samples=iq.shape[-1], f_number="auto", interpolation=method, n_frames=32)

        bf = make_plan()
        out = np.empty((32,) + grid.shape, np.complex64)
        validated(f"das {method}", bf(iq, out=out),
                  lambda r: np.linalg.norm(r - want) <= 1e-5 * np.linalg.norm(want))
        t_plan = measure(make_plan, warmup=1, repeat=max(3, args.repeat // 4))
        t_exec = measure(lambda: bf(iq, out=out), repeat=args.repeat)
        t_coo = measure(lambda: M @ iq_columns, warmup=1, repeat=max(3, args.repeat // 4))
        t_csr = measure(lambda: M_csr @ iq_columns, warmup=1, repeat=max(3, args.repeat // 4))
        t_sparse = min(t_coo.median, t_csr.median)
        rows.append([f"PWI_disk 251x251, 32 frames, {method}",
                     f"{t_plan.median * 1e3:.1f} (p95 {t_plan.p95 * 1e3:.1f})", f"{t_dasmtx * 1e3:.0f}",
                     f"{t_dasmtx / t_plan.median:.0f}x",
                     f"{t_exec.median * 1e3:.2f} (p95 {t_exec.p95 * 1e3:.2f})",
                     f"{t_coo.median * 1e3:.1f} / {t_csr.median * 1e3:.1f}",
                     f"{t_sparse / t_exec.median:.1f}x", f"{bf.table_bytes() / 2**20:.0f}"])
    header = ["case", "usbeam plan ms", "pymust.dasmtx ms (1 run)", "plan speed-up", "usbeam execute ms",
              "M @ IQ ms (COO / CSR)", "execute speed-up", "table MiB"]
    notes = ("Plan = Beamformer(...) (delays, weights, table); execute = beamforming the 32 frames "
             "into a preallocated output.  Speed-ups use medians; the sparse reference is the faster "
             "of COO and CSR.")
    publish("DAS (usbeam.Beamformer vs PyMUST dasmtx)", header, rows, no_record=args.no_record, notes=notes)


if __name__ == "__main__":
    main()
