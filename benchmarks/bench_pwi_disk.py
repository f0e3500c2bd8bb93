"""PWI_disk on the CPU: the foundation benchmark, usbeam against PyMUST in the same run.

Pipeline: rf2iq (MUST Butterworth) -> DAS (251 x 251 grid, 128 elements, 32 frames) ->
bmode(30 dB).  For each interpolation (nearest, linear) it reports, after validating
usbeam's B-mode against PyMUST's:

- validation first: usbeam's B-mode against the golden image (and, once PyMUST has run,
  against PyMUST's);
- per stage: median and p95 (ms);
- DAS in points/s (pixels x elements x frames per second, the figure mach publishes),
  frames/s and MB/s of RF input for the whole pipeline;
- plan creation: usbeam.Beamformer versus pymust.dasmtx (targets: >= 50x faster);
- execute: usbeam.Beamformer versus PyMUST's prebuilt sparse product M @ IQ, with M in
  CSR (scipy's fastest sparse-matrix product; target: >= 10x faster), and, for reference,
  with M in the COO format dasmtx returns.

    python benchmarks/bench_pwi_disk.py [--repeat 20] [--no-record]
"""
import argparse
import sys
import time
from pathlib import Path

import numpy as np
import scipy.io

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402

import usbeam  # noqa: E402


def load():
    rec = usbeam.io.load_must(usbeam.datasets.locate("PWI_disk.mat"))
    return rec


def pymust_param(rec):
    import pymust

    raw = scipy.io.loadmat(usbeam.datasets.locate("PWI_disk.mat"))["param"][0, 0]
    param = pymust.utils.Param()
    for name in raw.dtype.names:
        value = raw[name]
        param[name] = value.item() if value.size == 1 else value.squeeze().astype(float)
    param.t0 = np.array([param.t0])   # PyMUST dasmtx expects an array
    param.fnumber = None              # automatic f-number from the element directivity
    return param


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--no-record", action="store_true", help="print only, do not append to RESULTS.md")
    args = parser.parse_args(argv)
    import pymust

    rec = load()
    rf = np.ascontiguousarray(rec.data)                  # (32, 128, 334) int16, RF.T
    n_frames, n_elements, n_samples = rf.shape
    grid = usbeam.Grid(x=np.linspace(-12.5e-3, 12.5e-3, 251), z=np.linspace(10e-3, 35e-3, 251))
    param = pymust_param(rec)
    rf_matlab = np.asarray(scipy.io.loadmat(usbeam.datasets.locate("PWI_disk.mat"))["RF"], dtype=np.float64)
    x, z = np.meshgrid(grid.x, grid.z)
    golden = scipy.io.loadmat(usbeam.datasets.locate("bmode_PWI_disk.mat"))["I"].transpose(2, 0, 1)

    rows, notes = [], []
    for interpolation in ("nearest", "linear"):
        # usbeam: plans built once.
        rf2iq_plan = usbeam.RF2IQPlan(rf.shape, rf.dtype, fs=rec.fs, fc=rec.fc, t0=rec.t0, bandwidth=rec.bandwidth)
        beamformer = usbeam.Beamformer(rec.probe, rec.sequence, grid, fs=rec.fs, fc=rec.fc, c=rec.c, t0=rec.t0,
                                       n_samples=n_samples, f_number="auto", bandwidth=rec.bandwidth,
                                       interpolation=interpolation, dtype=np.complex64, n_frames=n_frames)
        iq = rf2iq_plan(rf)
        image = beamformer(iq)
        bmode_plan = usbeam.BModePlan(image.shape, 30.0)
        display = bmode_plan(image)

        # Validate against the golden image before timing anything.
        def check_golden(_):
            rho = min(np.corrcoef(display[k].ravel().astype(float), golden[k].ravel().astype(float))[0, 1]
                      for k in range(n_frames))
            diff = np.abs(display.astype(int) - golden.astype(int)).max()
            notes.append(f"{interpolation}: usbeam vs golden B-mode min rho {rho:.5f}, max |diff| {diff} grey levels")
            return rho >= (0.999 if interpolation == "nearest" else 0.995)

        harness.validated(f"PWI_disk {interpolation}", display, check_golden)

        # usbeam is timed before PyMUST allocates its matrices, so each runs in its own state.
        def build():
            return usbeam.Beamformer(rec.probe, rec.sequence, grid, fs=rec.fs, fc=rec.fc, c=rec.c, t0=rec.t0,
                                     n_samples=n_samples, f_number="auto", bandwidth=rec.bandwidth,
                                     interpolation=interpolation, dtype=np.complex64, n_frames=n_frames)

        t_plan = harness.measure(build, warmup=1, repeat=max(5, args.repeat // 2))
        t_rf2iq = harness.measure(lambda: rf2iq_plan(rf, out=iq), repeat=args.repeat)
        t_das = harness.measure(lambda: beamformer(iq, out=image), repeat=args.repeat)
        t_bmode = harness.measure(lambda: bmode_plan(image, out=display), repeat=args.repeat)

        # PyMUST, same pipeline.
        t = time.perf_counter()
        M = pymust.dasmtx(1j * np.array(rf_matlab.shape[:2]), x, z, param, interpolation)
        pymust_build = time.perf_counter() - t
        param.fnumber = None
        M_coo = M
        M = M.tocsr()
        IQ = pymust.rf2iq(rf_matlab, param)
        IQ_columns = IQ.reshape(-1, n_frames, order="F")
        pm_image = (M @ IQ_columns).reshape(grid.shape[0], grid.shape[1], n_frames, order="F")
        pm_display = pymust.bmode(pm_image, 30).transpose(2, 0, 1)
        rho_pm = min(np.corrcoef(display[k].ravel().astype(float), pm_display[k].ravel().astype(float))[0, 1]
                     for k in range(n_frames))
        notes.append(f"{interpolation}: usbeam vs PyMUST B-mode min rho {rho_pm:.5f}, max |diff| "
                     f"{np.abs(display.astype(int) - pm_display.astype(int)).max()} grey levels")
        t_product = harness.measure(lambda: M @ IQ_columns, warmup=1, repeat=max(5, args.repeat // 2))
        t_product_coo = harness.measure(lambda: M_coo @ IQ_columns, warmup=1, repeat=5)
        t_pm_rf2iq = harness.measure(lambda: pymust.rf2iq(rf_matlab, param), warmup=1, repeat=5)

        total = t_rf2iq.median + t_das.median + t_bmode.median
        points = grid.n_points * n_elements * n_frames
        rows += [
            [interpolation, "usbeam rf2iq", f"{t_rf2iq.median*1e3:.2f}", f"{t_rf2iq.p95*1e3:.2f}", ""],
            [interpolation, "usbeam DAS execute", f"{t_das.median*1e3:.2f}", f"{t_das.p95*1e3:.2f}",
             f"{points / t_das.median:.3g} points/s"],
            [interpolation, "usbeam bmode", f"{t_bmode.median*1e3:.2f}", f"{t_bmode.p95*1e3:.2f}", ""],
            [interpolation, "usbeam pipeline total", f"{total*1e3:.2f}", "",
             f"{n_frames / total:.0f} frames/s, {rf.nbytes / total / 1e6:.0f} MB/s RF in"],
            [interpolation, "usbeam Beamformer plan creation", f"{t_plan.median*1e3:.2f}", f"{t_plan.p95*1e3:.2f}", ""],
            [interpolation, "PyMUST rf2iq", f"{t_pm_rf2iq.median*1e3:.2f}", f"{t_pm_rf2iq.p95*1e3:.2f}", ""],
            [interpolation, "PyMUST dasmtx (build M)", f"{pymust_build*1e3:.0f}", "", "one run"],
            [interpolation, "PyMUST M @ IQ (CSR)", f"{t_product.median*1e3:.2f}", f"{t_product.p95*1e3:.2f}",
             f"{points / t_product.median:.3g} points/s"],
            [interpolation, "PyMUST M @ IQ (COO, as dasmtx returns M)", f"{t_product_coo.median*1e3:.2f}",
             f"{t_product_coo.p95*1e3:.2f}", f"{points / t_product_coo.median:.3g} points/s"],
            [interpolation, "speed-up: execute vs M @ IQ (CSR)", "", "", f"{t_product.median / t_das.median:.1f}x (target >= 10x)"],
            [interpolation, "speed-up: execute vs M @ IQ (COO)", "", "", f"{t_product_coo.median / t_das.median:.1f}x"],
            [interpolation, "speed-up: plan vs dasmtx", "", "", f"{pymust_build / t_plan.median:.0f}x (target >= 50x)"],
        ]
    header = ["interpolation", "stage", "median ms", "p95 ms", "figure"]
    notes_text = ("PWI_disk.mat: 32 frames x 128 elements x 334 int16 samples (undersampled RF), "
                  "251 x 251 grid (63,001 points), f-number auto (1.1248), rect window. "
                  "Validated before timing: " + "; ".join(notes) + ".")
    if args.no_record:
        print(notes_text)
        print(harness.markdown_table(header, rows))
    else:
        harness.record("PWI_disk pipeline on the CPU, usbeam vs PyMUST", header, rows,
                       command="python benchmarks/bench_pwi_disk.py", notes=notes_text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
