"""Image quality of DAS and the adaptive beamformers, as PICMUS and CUBDL score it.

Data (no outside download; usbeam.simulate's point-scatterer RF, PICMUS-like):
  - resolution phantom: isolated point targets on a speckle-free background at 15, 20, 25,
    30 and 35 mm (x = 0) and at x = -4, +4 mm (25 mm);
  - contrast / speckle phantom: random scatterers (~30 per mm^2) with an anechoic cyst of 3 mm
    radius at (0, 25) mm;
  - PWI_disk (real, ../shared/datasets or USBEAM_DATA): 0-degree plane waves of a rotating disk,
    imaged for the figure and timed (no ground-truth regions are known: no metrics).
Probe: 128 elements, 0.3 mm pitch, 5.2 MHz, 67 % bandwidth; 7 plane waves -8..8 deg; RF at
4 fc, demodulated to IQ by usbeam.rf2iq; every method beamforms the IQ with the same delays,
f-number 1.5, rect window, linear interpolation.  Methods and options: usbeam.adaptive.

Metrics (usbeam.metrics): axial and lateral FWHM (mean over the targets), contrast, CNR
(Rindal), gCNR (CUBDL) between the cyst (radius - 0.5 mm) and a ring around it (r + 1 mm ..
r + 3 mm), speckle SNR in that ring.  Time per frame: median and p95 of repeated calls on the
contrast phantom's grid (CPU backend), after a check that the image is finite.

Also times minimum variance alone on the CPU (ns per image point) against the subarray length
L (one plane wave, full aperture of 64 elements), interleaved rounds (L1, L2, ..., L1, ...).

Writes docs/image_quality.png (B-mode of each method, 50 dB) and appends the tables to
benchmarks/RESULTS.md.  Usage: python benchmarks/image_quality.py [--quick] [--no-record]
"""
import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

from harness import machine, measure, record

import usbeam
from usbeam import metrics

ROOT = Path(__file__).resolve().parent.parent
FC, BW, C = 5.2e6, 0.67, 1540.0
FS = 4 * FC
ANGLES = np.deg2rad(np.linspace(-8, 8, 7))
F_NUMBER = 1.5
METHODS = [("das", {}), ("cf", {}), ("gcf", {"gcf_m0": 2}), ("dmas", {}), ("fdmas", {}), ("pdas", {"p": 2.0}),
           ("mv", {"subarray_fraction": 0.5, "diagonal_loading": 0.01, "temporal_averaging": 1})]
RESOLUTION_TARGETS = [(0.0, z * 1e-3) for z in (15, 20, 25, 30, 35)] + [(-4e-3, 25e-3), (4e-3, 25e-3)]
CYST = (0.0, 25e-3)
CYST_RADIUS = 3e-3


def probe():
    return usbeam.LinearArray(128, 0.3e-3, width=0.27e-3, fc=FC, bandwidth=BW)


def simulate(positions, amplitudes, n_samples):
    seq = [usbeam.PlaneWave(a) for a in ANGLES]
    rf = usbeam.simulate_rf(positions, amplitudes, probe(), seq, fs=FS, fc=FC, n_samples=n_samples, c=C,
                            bandwidth=BW, n_frames=1)
    iq = usbeam.rf2iq(rf, fs=FS, fc=FC, t0=0.0, bandwidth=BW)
    return seq, iq


def beamformer(seq, grid, method, options, n_samples):
    return usbeam.Beamformer(probe(), seq, grid, fs=FS, fc=FC, c=C, t0=0.0, n_samples=n_samples, f_number=F_NUMBER,
                             window="rect", interpolation="linear", dtype=np.complex64, n_frames=1, method=method,
                             **options)


def resolution_phantom(quick):
    pts = np.array([[x, 0.0, z] for x, z in RESOLUTION_TARGETS])
    n_samples = 1500
    seq, iq = simulate(pts, np.ones(len(pts)), n_samples)
    dz = 0.04e-3 if not quick else 0.08e-3
    grid = usbeam.Grid(x=np.arange(-6e-3, 6e-3 + 1e-9, 0.05e-3 if not quick else 0.1e-3),
                       z=np.arange(13e-3, 37e-3 + 1e-9, dz))
    return seq, iq, grid, n_samples


def contrast_phantom(quick):
    n = 10000 if not quick else 2500
    pos, amp = usbeam.cyst_phantom(x_range=(-8e-3, 8e-3), z_range=(15e-3, 35e-3), n_scatterers=n,
                                   cyst_center=CYST, cyst_radius=CYST_RADIUS, points=(), seed=7)
    n_samples = 1500
    seq, iq = simulate(pos, amp, n_samples)
    step = 0.1e-3 if not quick else 0.2e-3
    grid = usbeam.Grid(x=np.arange(-7e-3, 7e-3 + 1e-9, step), z=np.arange(17e-3, 33e-3 + 1e-9, step))
    return seq, iq, grid, n_samples


def resolution_metrics(image, grid):
    widths = np.array([metrics.fwhm(image, grid, t, search_radius=0.6e-3) for t in RESOLUTION_TARGETS])
    return np.nanmean(widths[:, 0]), np.nanmean(widths[:, 1])


def contrast_metrics(image, grid):
    inside = metrics.circle(grid, CYST, CYST_RADIUS - 0.5e-3)
    ring = metrics.annulus(grid, CYST, CYST_RADIUS + 1e-3, CYST_RADIUS + 3e-3)
    return (metrics.contrast(image, inside, ring), metrics.cnr(image, inside, ring), metrics.gcnr(image, inside, ring),
            metrics.speckle_snr(image, ring))


def bmode_db(image):
    env = np.abs(image)
    return 20 * np.log10(env / env.max() + 1e-12)


def pwi_disk():
    path = None
    for folder in [p for p in os.environ.get("USBEAM_DATA", "").split(os.pathsep) if p] + [str(ROOT.parent / "shared" / "datasets")]:
        if (Path(folder) / "PWI_disk.mat").exists():
            path = Path(folder) / "PWI_disk.mat"
            break
    if path is None:
        return None
    rec = usbeam.io.load_must(path)
    iq = usbeam.rf2iq(rec.data[:1], fs=rec.fs, fc=rec.fc, t0=rec.t0, bandwidth=rec.bandwidth)
    grid = usbeam.Grid(x=np.linspace(-12.5e-3, 12.5e-3, 126), z=np.linspace(10e-3, 35e-3, 126))
    return rec, iq, grid


def mv_scaling(quick, rounds):
    """(L, ns/point median, p95) for MV on a 64-element full aperture, one plane wave."""
    p64 = usbeam.LinearArray(64, 0.3e-3)
    pos, amp = usbeam.cyst_phantom(x_range=(-8e-3, 8e-3), z_range=(15e-3, 35e-3), n_scatterers=1500, points=(),
                                   seed=3)
    rf = usbeam.simulate_rf(pos, amp, p64, usbeam.PlaneWave(0.0), fs=FS, fc=FC, n_samples=1500, c=C, bandwidth=BW,
                            n_frames=1)
    iq = usbeam.rf2iq(rf, fs=FS, fc=FC, t0=0.0, bandwidth=BW)
    grid = usbeam.Grid(x=np.linspace(-4e-3, 4e-3, 20 if quick else 50), z=np.linspace(20e-3, 30e-3, 20 if quick else 50))
    lengths = (8, 16, 32) if quick else (8, 16, 24, 32, 48)
    plans = {L: usbeam.Beamformer(p64, usbeam.PlaneWave(0.0), grid, fs=FS, fc=FC, c=C, n_samples=1500, f_number=0.0,
                                  dtype=np.complex64, method="mv", subarray_length=L) for L in lengths}
    das = usbeam.Beamformer(p64, usbeam.PlaneWave(0.0), grid, fs=FS, fc=FC, c=C, n_samples=1500, f_number=0.0,
                            dtype=np.complex64)
    for L, bf in plans.items():  # validate: finite, and the same envelope scale as DAS / N
        out = bf(iq)
        assert np.all(np.isfinite(out)), L
    samples = {L: [] for L in lengths}
    samples["das"] = []
    for _ in range(rounds):  # interleaved: L1, L2, ..., DAS, L1, ...
        for L, bf in plans.items():
            t = time.perf_counter()
            bf(iq)
            samples[L].append(time.perf_counter() - t)
        t = time.perf_counter()
        das(iq)
        samples["das"].append(time.perf_counter() - t)
    n = grid.n_points
    rows = []
    for key in list(lengths) + ["das"]:
        s = np.array(samples[key]) / n * 1e9
        rows.append(("DAS (reference)" if key == "das" else key, np.median(s), np.percentile(s, 95)))
    return rows, n


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="coarser grids and fewer scatterers (a smoke run)")
    ap.add_argument("--no-record", action="store_true", help="print only, do not append to RESULTS.md")
    args = ap.parse_args()
    repeat = 2 if args.quick else 3

    t_start = time.perf_counter()
    print("simulating the resolution phantom ...", flush=True)
    res_seq, res_iq, res_grid, res_ns = resolution_phantom(args.quick)
    print("simulating the contrast phantom ...", flush=True)
    con_seq, con_iq, con_grid, con_ns = contrast_phantom(args.quick)
    disk = pwi_disk()

    rows, images = [], {}
    for method, options in METHODS:
        label = method + ("" if not options else " (" + ", ".join(f"{k}={v}" for k, v in options.items()) + ")")
        res_img = beamformer(res_seq, res_grid, method, options, res_ns)(res_iq)[0]
        bf = beamformer(con_seq, con_grid, method, options, con_ns)
        con_img = bf(con_iq)[0]
        assert np.all(np.isfinite(res_img)) and np.all(np.isfinite(con_img)), method
        axial, lateral = resolution_metrics(res_img, res_grid)
        contrast, cnr, gcnr, snr = contrast_metrics(con_img, con_grid)
        timing = measure(lambda: bf(con_iq), warmup=1, repeat=repeat, max_seconds=120)
        disk_img = None
        if disk is not None:
            rec, iq, grid = disk
            dbf = usbeam.Beamformer(rec.probe, rec.sequence, grid, fs=rec.fs, fc=rec.fc, c=rec.c, t0=rec.t0,
                                    n_samples=iq.shape[-1], f_number=F_NUMBER, dtype=np.complex64, n_frames=1,
                                    method=method, **options)
            disk_img = dbf(iq).reshape(grid.shape)  # one frame of one transmit
        images[method] = (res_img, con_img, disk_img)
        rows.append((label, f"{axial * 1e3:.3f}", f"{lateral * 1e3:.3f}", f"{contrast:.2f}", f"{cnr:.3f}",
                     f"{gcnr:.3f}", f"{snr:.3f}", f"{timing.median * 1e3:.1f}", f"{timing.p95 * 1e3:.1f}"))
        print(" | ".join(rows[-1]), flush=True)

    header = ("method", "axial FWHM (mm)", "lateral FWHM (mm)", "contrast (dB)", "CNR", "gCNR", "speckle SNR",
              "time/frame median (ms)", "p95 (ms)")
    das_row = rows[0]
    checks = []
    for label, *vals in rows[1:]:
        name = label.split()[0]
        lat, das_lat = float(vals[1]), float(das_row[2])
        con, das_con = float(vals[2]), float(das_row[3])
        checks.append(f"{name}: lateral FWHM {'narrower' if lat < das_lat else 'NOT narrower'} than DAS "
                      f"({lat:.3f} vs {das_lat:.3f} mm), contrast {'higher' if con < das_con else 'NOT higher'} "
                      f"({con:.2f} vs {das_con:.2f} dB)")
    print("\n".join(checks))

    mv_rows, mv_points = mv_scaling(args.quick, 3 if args.quick else 7)
    for r in mv_rows:
        print(f"MV L={r[0]}: {r[1]:.0f} ns/point median, {r[2]:.0f} p95")

    # figure: one column per method; rows: resolution, contrast, PWI_disk
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n_rows = 3 if disk is not None else 2
    fig, axes = plt.subplots(n_rows, len(METHODS), figsize=(2.2 * len(METHODS), 2.6 * n_rows), squeeze=False)
    for j, (method, _) in enumerate(METHODS):
        for i, (img, grid) in enumerate(zip(images[method], (res_grid, con_grid, disk[2] if disk else None))):
            if i >= n_rows:
                break
            ax = axes[i, j]
            ax.imshow(bmode_db(img), cmap="gray", vmin=-50, vmax=0, aspect="equal",
                      extent=(grid.x[0] * 1e3, grid.x[-1] * 1e3, grid.z[-1] * 1e3, grid.z[0] * 1e3))
            ax.set_title(method if i == 0 else "", fontsize=9)
            ax.tick_params(labelsize=6)
    for i, name in enumerate(("resolution", "contrast", "PWI_disk")[:n_rows]):
        axes[i, 0].set_ylabel(f"{name}\nz (mm)", fontsize=8)
    fig.tight_layout()
    out = ROOT / "docs" / "image_quality.png"
    out.parent.mkdir(exist_ok=True)
    fig.savefig(out, dpi=110)
    try:  # grey levels only: store as an 8-bit greyscale PNG (about half the RGBA file)
        from PIL import Image

        Image.open(out).convert("L").save(out, optimize=True)
    except ImportError:
        pass
    print(f"figure: {out}")

    notes = (f"Simulated PICMUS-like phantoms (usbeam.simulate, 7 plane waves -8..8 deg, 128 elements, 5.2 MHz, "
             f"IQ at fs = 4 fc), f-number {F_NUMBER}, rect window, linear interpolation; resolution grid "
             f"{res_grid.shape}, contrast grid {con_grid.shape} (timed, one frame, CPU backend, "
             f"{usbeam.build_info()['cpu_threads']} OpenMP threads).  Machine shared with other jobs (2 cores, "
             f"several sessions): times are noisy.  Direction checks against DAS: " + "; ".join(checks) +
             f".  Figure: docs/image_quality.png.  Total run {time.perf_counter() - t_start:.0f} s.")
    mv_notes = (f"MV alone, CPU, 64-element full aperture, one plane wave, IQ, {mv_points} points, "
                "diagonal loading 0.01, no temporal averaging; rounds interleaved (each L, then DAS, repeated); "
                "ns per image point per frame.  Machine shared.")
    if not args.no_record:
        record("Image quality: DAS and adaptive beamformers (benchmarks/image_quality.py)", header, rows,
               command="python " + " ".join(["benchmarks/image_quality.py"] + sys.argv[1:]), notes=notes)
        record("Minimum variance on the CPU vs subarray length (benchmarks/image_quality.py)",
               ("subarray length L", "ns/point median", "ns/point p95"),
               [(str(L), f"{m:.0f}", f"{p:.0f}") for L, m, p in mv_rows],
               command="python " + " ".join(["benchmarks/image_quality.py"] + sys.argv[1:]), notes=mv_notes)
    print(machine())


if __name__ == "__main__":
    main()
