"""CPU delay-and-sum at the machine's limit (issue 21): usbeam.Beamformer against PyMUST's
prebuilt sparse product ``M @ IQ`` on three configurations, with a roofline.

Configurations (all IQ, linear interpolation, rect window):

- ``large``: 128 elements (pitch 0.3 mm), 2048 samples at 20 MHz (fc 5 MHz), 11 plane waves (as
  their delay laws, usbeam.Delays: the transmit model PyMUST beamforms them with)
  -10..10 deg, 8 frames, 512 x 512 grid (x +-19.05 mm, z 5..50 mm), f-number 1.7.  PyMUST's
  matrix for it holds ~2.9e8 complex128 non-zeros (~6 GB as CSR, more while dasmtx builds it:
  the issue measured 73 s and 13.2 GB); on a shared 24 GiB machine the default is the same
  acquisition on a 256 x 256 grid (``large-256``, a quarter of the points); ``--full`` runs
  512 x 512 against PyMUST too.
- ``pwi_disk``: PyMUST's PWI_disk example (128 elements, 1 transmit, 32 frames, IQ from
  pymust.rf2iq), 251 x 251 grid, automatic f-number (skipped without ../shared/datasets).
- ``live``: the acquisition of ``large`` with 3 plane waves (-5, 0, 5 deg) or 1 (0 deg),
  1 frame, 256 x 256 grid.

For each: usbeam's image is checked against PyMUST's first (complex correlation rho >= 0.998;
measured ~1 - 1e-12), then usbeam execute (the default plan: receive table within the
budget; and with ``max_table_bytes=1``: delays recomputed per call) and PyMUST's product
(M in CSR, scipy, the faster of its formats) are timed interleaved, round by round.  Figures:
median and p95 (ms), points/s (pixel x transmit x aperture element x frame per second: each
is one interpolated, weighted sample), speed-up, and the roofline: flops and DRAM bytes per
point of the chosen path, the machine's float32 FMA peak and read bandwidth measured in the
same run (benchmarks/roofline.c, built here), the bound min(peak, intensity x bandwidth) and
the fraction of it reached.  Peak RSS is measured in a child process per configuration.

    python benchmarks/bench_das.py [--rounds 5] [--repeat 5] [--full] [--no-record] [--only NAME]
    python benchmarks/bench_das.py --thread-check [--rounds 5] [--repeat 5]

``--thread-check`` times the 1-frame configurations' default plan with 1 and 2 OpenMP threads,
the latter with OMP_WAIT_POLICY=PASSIVE and with libgomp's default spinning wait, each in a
process of its own, interleaved (README, "CPU threads").
"""
import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

# OpenBLAS's worker threads spin for a while after any BLAS call (an image check, a rho) and
# take cores from the OpenMP team being timed (live-1tx p95: 5.4 ms with them, 2.9 ms
# without); neither usbeam's DAS nor PyMUST's sparse product uses BLAS threads.  Set before
# NumPy loads OpenBLAS.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [os.environ.get("USBEAM_IMPORT_ROOT", str(ROOT)), str(ROOT / "benchmarks")]

import usbeam  # noqa: E402
import harness  # noqa: E402

FS, FC, C = 20e6, 5e6, 1540.0


def roofline_binary():
    exe = ROOT / "build" / "roofline"
    src = ROOT / "benchmarks" / "roofline.c"
    if not exe.exists() or exe.stat().st_mtime < src.stat().st_mtime:
        exe.parent.mkdir(exist_ok=True)
        subprocess.run([os.environ.get("CC", "cc"), "-O2", "-fopenmp", str(src), "-o", str(exe)], check=True)
    return exe


def measure_ceilings(reps=1):
    out = subprocess.run([str(roofline_binary()), str(reps)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


# ---- configurations -----------------------------------------------------------------------------

def synthetic(name, n_grid, angles_deg, n_frames, rng):
    probe = usbeam.LinearArray(n_elements=128, pitch=0.3e-3, width=0.27e-3)
    # The plane waves as their delay laws (usbeam.Delays: MUST dasmtx's virtual-source model of
    # a delay law, the model PyMUST beamforms txdelay's plane waves with; an analytic PlaneWave
    # differs from it beside the insonified zone, rho ~0.97 at 5 degrees).  Same execute cost:
    # the transmit times are tabulated at plan creation whatever the model.
    delays = [(probe.x - (probe.x.min() if a >= 0 else probe.x.max())) * np.sin(a) / C for a in np.deg2rad(angles_deg)]
    seq = [usbeam.Delays(d) for d in delays]
    grid = usbeam.Grid(x=np.linspace(-19.05e-3, 19.05e-3, n_grid), z=np.linspace(5e-3, 50e-3, n_grid))
    shape = (n_frames, len(angles_deg), 128, 2048)
    iq = (rng.standard_normal(shape, np.float32) + 1j * rng.standard_normal(shape, np.float32)).astype(np.complex64)
    return dict(name=name, probe=probe, sequence=seq, grid=grid, iq=iq, fs=FS, fc=FC, c=C, t0=0.0, f_number=1.7,
                angles=np.deg2rad(angles_deg), bandwidth=None)


def pwi_disk():
    import scipy.io
    import pymust

    path = usbeam.datasets.locate("PWI_disk.mat")
    rec = usbeam.io.load_must(path)
    raw = scipy.io.loadmat(path)
    param = pymust.utils.Param()
    param.fs, param.fc, param.c, param.t0 = rec.fs, rec.fc, rec.c, rec.t0
    param.bandwidth, param.pitch, param.width, param.Nelements = rec.bandwidth * 100, rec.probe.pitch, rec.probe.width, 128
    param.TXdelay = np.zeros((1, 128))
    iq_matlab = pymust.rf2iq(raw["RF"].astype(np.float64), param)   # (samples, elements, frames)
    iq = np.ascontiguousarray(iq_matlab.T).astype(np.complex64)[:, None]  # (frames, 1, elements, samples)
    grid = usbeam.Grid(x=np.linspace(-12.5e-3, 12.5e-3, 251), z=np.linspace(10e-3, 35e-3, 251))
    return dict(name="pwi_disk", probe=rec.probe, sequence=rec.sequence, grid=grid, iq=iq, fs=rec.fs, fc=rec.fc,
                c=rec.c, t0=rec.t0, f_number="auto", angles=None, bandwidth=rec.bandwidth, param=param)


def make_config(name, full):
    rng = np.random.default_rng(21)
    if name == "large":
        n = 512 if full else 256
        return synthetic("large" if full else "large-256", n, np.linspace(-10, 10, 11), 8, rng)
    if name == "live3":
        return synthetic("live-3tx", 256, np.array([-5.0, 0.0, 5.0]), 1, rng)
    if name == "live1":
        return synthetic("live-1tx", 256, np.array([0.0]), 1, rng)
    if name == "pwi_disk":
        return pwi_disk()
    raise ValueError(name)


def beamformer(cfg, max_table_bytes=None, dtype=np.complex64):
    return usbeam.Beamformer(cfg["probe"], cfg["sequence"], cfg["grid"], fs=cfg["fs"], fc=cfg["fc"], c=cfg["c"],
                             t0=cfg["t0"], n_samples=cfg["iq"].shape[-1], f_number=cfg["f_number"],
                             bandwidth=cfg["bandwidth"], interpolation="linear", dtype=dtype,
                             n_frames=cfg["iq"].shape[0], max_table_bytes=max_table_bytes)


def pymust_matrix(cfg):
    """(M in CSR, IQ as PyMUST's columns (samples x elements x transmits, frames))."""
    import pymust

    iq = cfg["iq"]
    n_frames, n_tx, n_el, n_s = iq.shape
    x, z = np.meshgrid(cfg["grid"].x, cfg["grid"].z)
    if cfg["name"] == "pwi_disk":
        param = cfg["param"]
        param.t0 = np.array([cfg["t0"]])
        param.fnumber = None
        matrices = [pymust.dasmtx(1j * np.array((n_s, n_el)), x, z, param, "linear")]
    else:
        matrices = []
        for angle in cfg["angles"]:
            param = pymust.utils.Param()
            param.fs, param.fc, param.c = cfg["fs"], cfg["fc"], cfg["c"]
            param.pitch, param.width, param.Nelements = cfg["probe"].pitch, cfg["probe"].width, n_el
            param.fnumber = cfg["f_number"]
            param.TXdelay = pymust.txdelay(param, angle)
            param.t0 = np.array([cfg["t0"]])
            matrices.append(pymust.dasmtx(1j * np.array((n_s, n_el)), x, z, param, "linear").tocsr())
    import scipy.sparse

    M = scipy.sparse.hstack(matrices, format="csr") if len(matrices) > 1 else matrices[0].tocsr()
    # (frames, tx, el, samples) -> rows (samples fastest, then elements, then transmits), columns frames
    columns = np.ascontiguousarray(iq.astype(np.complex128).reshape(n_frames, -1).T)
    return M, columns


def rho(a, b):
    a, b = a.ravel().astype(np.complex128), b.ravel().astype(np.complex128)
    return float(abs(np.vdot(a, b)) / (np.linalg.norm(a) * np.linalg.norm(b)))


# ---- roofline ------------------------------------------------------------------------------------

def roofline(cfg, bf, n_points_sum):
    """(flops, DRAM bytes) per point of the path usbeam runs (das.c, das_delays.c)."""
    n_frames, n_tx, n_el, n_s = cfg["iq"].shape
    taps = 2
    lanes = usbeam._core.das_lane_rows(bf._plan) > 0
    quarter = usbeam._core.das_lane_quarter(bf._plan) if lanes else 0
    if quarter:  # one transmit at fs = 4 fc, the input staged in quarter turns (das_lanes.c QUARTER):
        # the fraction (1) and its angle (2), the taps interpolated (2 x (add + FMA) = 6), the
        # rotation's polynomials (16: small_rotation), the complex product into the sum (8);
        # from formed rows (no table) s = s_tx + s_rx, first tap and fraction too (3)
        flops = 33.0 + (3.0 if quarter == 1 else 0.0)
    elif lanes:  # 1 frame, points in the lanes (das_lanes.c):
        # s = s_tx + s_rx, floor, fraction (3), the taps interpolated (2 x (sub + FMA) = 8), the
        # complex product into the sum (8); the receive rotation per (point, element), shared
        # by the transmits: turns, reduction, sin/cos polynomials (~40)
        flops = 19.0 + 40.0 / n_tx
    else:
        # per point: taps x (4 FMA = 8 flops) on (re, im) of one frame
        flops = 8.0 * taps
        # per entry (point, transmit, element), shared by the frames: s = s_tx + s_rx, floor,
        # fraction, rotation product (4 mul/FMA), 4 weight products: ~14 flops
        flops += 14.0 / n_frames
    if bf.table_bytes() == 0:  # receive part per (point, element), shared by transmits and frames:
        if lanes:  # form_rows on the x axis: d^2 stepped (2), the root (~10), rounded to lane_fixed (1), bounds (~1),
            # by the groups that do not take a mirror group's rows (das_lanes.c usbeam_das_lanes_mirrors)
            n_groups = -(-cfg["grid"].n_points // 16)
            formed = 1.0 - usbeam._core.das_lane_mirrored(bf._plan) / n_groups
            flops += 14.0 * formed / (n_tx * n_frames)  # (its rotation is the table path's, counted above)
        else:
            flops += 60.0 / (n_tx * n_frames)  # distance (6 + sqrt), window, sin/cos polynomials (~45)
    input_bytes = cfg["iq"].nbytes
    # DRAM per call: the input read and staged (written, then read back at least once), the
    # receive table (if any) and the output written
    out_bytes = n_frames * cfg["grid"].n_points * 8
    total = 3.0 * input_bytes + bf.table_bytes() + out_bytes
    return flops, total / n_points_sum


def entries(bf, cfg):
    """pixel x transmit x aperture element: from the plan's receive table size, or from the
    apertures computed as das_setup.c does (|x_p - x_e| <= z_p / (2 F))."""
    x, z = np.meshgrid(cfg["grid"].x, cfg["grid"].z)
    f = bf.f_number
    xe = cfg["probe"].x
    half = z.ravel()[:, None] / (2 * f) if f > 0 else np.inf
    count = (np.abs(x.ravel()[:, None] - xe[None, :]) <= half).sum()
    return int(count) * len(cfg["sequence"])


# ---- one configuration ---------------------------------------------------------------------------

def run_config(name, args, ceilings):
    cfg = make_config(name, args.full)
    iq = cfg["iq"]
    n_frames = iq.shape[0]
    started = time.perf_counter()
    bf = beamformer(cfg)
    plan_s = time.perf_counter() - started
    bf_nt = beamformer(cfg, max_table_bytes=1)
    out = np.empty((n_frames,) + cfg["grid"].shape, np.complex64)
    out_nt = np.empty_like(out)
    started = time.perf_counter()
    M, columns = pymust_matrix(cfg)
    dasmtx_s = time.perf_counter() - started
    want = (M @ columns).T.reshape((n_frames,) + cfg["grid"].shape[::-1]).transpose(0, 2, 1)  # MUST: column-major image
    got = bf(iq, out=out)
    got_nt = bf_nt(iq, out=out_nt)
    r, r_nt = rho(got, want), rho(got_nt, want)
    harness.validated(f"{cfg['name']} vs PyMUST", got, lambda _: r >= 0.998 and r_nt >= 0.998)
    rel = float(np.linalg.norm(got - want) / np.linalg.norm(want))
    times = {"table": [], "no table": [], "pymust": []}
    cpu = {"table": [], "no table": [], "pymust": []}
    runs = {"table": lambda: bf(iq, out=out), "no table": lambda: bf_nt(iq, out=out_nt),
            "pymust": lambda: M @ columns}
    for fn in runs.values():
        fn()  # warm-up
    for rnd in range(args.rounds):
        order = list(runs) if rnd % 2 == 0 else list(runs)[::-1]
        for key in order:
            for _ in range(args.repeat if key != "pymust" else max(1, args.repeat // 2)):
                t, c = time.perf_counter(), time.process_time()
                runs[key]()
                times[key].append(time.perf_counter() - t)
                cpu[key].append(time.process_time() - c)
    n_ent = entries(bf, cfg)
    points = n_ent * n_frames
    med = {k: float(np.median(v)) for k, v in times.items()}
    p95 = {k: float(np.percentile(v, 95)) for k, v in times.items()}
    # the mean, not the median: process_time adds the other threads' CPU time in lumps (at their
    # scheduler ticks), so the median of a 1-2 ms call counts one thread (live-1tx: median 1.7 ms
    # against a mean of 3.0 ms for 1.5 ms of wall clock on two threads)
    cpu_mean = {k: float(np.mean(v)) for k, v in cpu.items()}
    rows = []
    peak = max(ceilings["fma_gflops_zmm"], ceilings["fma_gflops_ymm"])
    bw = ceilings["read_gbs"]
    for key, plan in (("table", bf), ("no table", bf_nt)):
        flops, nbytes = roofline(cfg, plan, points)
        bound = min(peak, flops / nbytes * bw)
        achieved = flops * points / med[key] / 1e9
        rows.append([cfg["name"], f"usbeam, {key}" + (f" ({plan.table_bytes() / 2**20:.0f} MiB)" if key == "table" else ""),
                     f"{med[key] * 1e3:.2f}", f"{p95[key] * 1e3:.2f}", f"{points / med[key]:.3g}",
                     f"{med['pymust'] / med[key]:.1f}x", f"{cpu_mean[key] * 1e3:.2f}",
                     f"{cpu_mean['pymust'] / cpu_mean[key]:.1f}x", f"{flops:.1f}", f"{nbytes:.2f}",
                     f"{achieved:.0f}", f"{bound:.0f} ({'FMA' if bound == peak else 'memory'})",
                     f"{achieved / bound * 100:.0f}%"])
    rows.append([cfg["name"], "PyMUST M @ IQ (CSR, prebuilt)", f"{med['pymust'] * 1e3:.2f}", f"{p95['pymust'] * 1e3:.2f}",
                 f"{points / med['pymust']:.3g}", "1x", f"{cpu_mean['pymust'] * 1e3:.2f}", "1x", "", "", "", "", ""])
    note = (f"{cfg['name']}: {cfg['grid'].n_points} pixels, {len(cfg['sequence'])} transmits, {n_frames} frames, "
            f"{n_ent / cfg['grid'].n_points / len(cfg['sequence']):.1f} aperture elements per pixel on average; "
            f"usbeam vs PyMUST rho {r:.9f} (no table {r_nt:.9f}), relative L2 {rel:.1e}; "
            f"usbeam plan {plan_s:.2f} s, pymust.dasmtx {dasmtx_s:.1f} s ({M.nnz} non-zeros); "
            f"no-table / table time {med['no table'] / med['table']:.2f}")
    return rows, note


CHILD = r'''
import sys, json, resource, numpy as np
sys.path[:0] = [sys.argv[1], sys.argv[1] + "/benchmarks"]
import bench_das
cfg = bench_das.make_config(sys.argv[2], sys.argv[3] == "1")
budget = None if sys.argv[4] == "none" else int(sys.argv[4])
bf = bench_das.beamformer(cfg, max_table_bytes=budget)
out = bf(cfg["iq"])
for _ in range(2):
    bf(cfg["iq"], out=out)
print(json.dumps({"peak_rss_mib": [int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM")][0] / 1024,
                  "input_mib": cfg["iq"].nbytes / 2**20}))
'''


def peak_rss(name, full, budget):
    out = subprocess.run([sys.executable, "-c", CHILD, str(ROOT), name, "1" if full else "0", budget],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


THREADS_CHILD = r'''
import json, os, sys, time
# libgomp reads OMP_WAIT_POLICY once, when it is loaded: set before usbeam (and libgomp) load
if sys.argv[3] == "spin":  # libgomp's own default (spin, then sleep)
    os.environ.pop("OMP_WAIT_POLICY", None)
else:
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
sys.path[:0] = [sys.argv[1], sys.argv[1] + "/benchmarks"]
import numpy as np
import bench_das
out = {}
for name in sys.argv[2].split(","):
    cfg = bench_das.make_config(name, False)
    bf = bench_das.beamformer(cfg)
    image = bf(cfg["iq"])
    times = []
    for _ in range(int(sys.argv[4]) + 2):
        t = time.perf_counter()
        bf(cfg["iq"], out=image)
        times.append(time.perf_counter() - t)
    out[cfg["name"]] = times[2:]
print(json.dumps(out))
'''


def thread_check(args):
    """1 thread against 2 (OMP_WAIT_POLICY=PASSIVE, and libgomp's default spinning wait),
    each in a process of its own (the team and the wait policy are fixed when the process
    starts), interleaved round by round: the default plan (receive table) of the 1-frame
    configurations.  Prints a table; the load average is printed beside it."""
    settings = [("1 thread", "1", "passive"), ("2 threads, OMP_WAIT_POLICY=PASSIVE", "2", "passive"),
                ("2 threads, libgomp's spinning wait", "2", "spin")]
    times = {s[0]: {} for s in settings}
    load = [os.getloadavg()[0]]
    for rnd in range(args.rounds):
        for label, threads, policy in (settings if rnd % 2 == 0 else settings[::-1]):
            env = dict(os.environ, OMP_NUM_THREADS=threads)
            out = subprocess.run([sys.executable, "-c", THREADS_CHILD, str(ROOT), "live1,live3", policy,
                                  str(4 * args.repeat)], capture_output=True, text=True, check=True, env=env)
            for name, t in json.loads(out.stdout.strip().splitlines()[-1]).items():
                times[label].setdefault(name, []).extend(t)
        load.append(os.getloadavg()[0])
    header = ["config", "threads, wait", "median ms", "p95 ms", "vs 1 thread (median)"]
    rows = []
    for name in times[settings[0][0]]:
        one = float(np.median(times[settings[0][0]][name]))
        for label, _, _ in settings:
            t = np.asarray(times[label][name])
            rows.append([name, label, f"{np.median(t) * 1e3:.2f}", f"{np.percentile(t, 95) * 1e3:.2f}",
                         f"{one / np.median(t):.2f}x"])
    print(f"load average (1 min) during the check: {min(load):.1f} .. {max(load):.1f}")
    print(harness.markdown_table(header, rows))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--full", action="store_true", help="the large configuration at 512 x 512 against PyMUST")
    parser.add_argument("--only", action="append", choices=["large", "pwi_disk", "live3", "live1"])
    parser.add_argument("--no-record", action="store_true")
    parser.add_argument("--thread-check", action="store_true",
                        help="only: 1 against 2 threads (passive and spinning OpenMP waits) on the 1-frame configurations")
    args = parser.parse_args(argv)
    if args.thread_check:
        thread_check(args)
        return
    names = args.only or ["large", "pwi_disk", "live3", "live1"]
    ceilings = [measure_ceilings(1) for _ in range(3)]
    rows, notes = [], []
    for name in names:
        if name == "pwi_disk":
            try:
                usbeam.datasets.locate("PWI_disk.mat")
            except Exception as exc:  # noqa: BLE001 - any reason the dataset is absent
                notes.append(f"pwi_disk skipped: {exc}")
                continue
        r, note = run_config(name, args, {k: max(c[k] for c in ceilings) for k in ceilings[0]})
        ceilings.append(measure_ceilings(1))  # interleaved with the configurations
        rss = peak_rss(name, args.full, "none")
        rss_nt = peak_rss(name, args.full, "1")
        note += (f"; peak RSS of a process that builds the plan and runs it (input {rss['input_mib']:.0f} MiB): "
                 f"{rss['peak_rss_mib']:.0f} MiB with the table, {rss_nt['peak_rss_mib']:.0f} MiB without")
        rows += r
        notes.append(note)
        print(note, flush=True)
    c = {k: max(x[k] for x in ceilings) for k in ceilings[0]}
    header = ["config", "path", "median ms", "p95 ms", "points/s", "vs PyMUST", "CPU ms (mean)", "vs PyMUST (CPU)",
              "flops/point", "DRAM B/point",
              "GFLOP/s", "bound GFLOP/s", "of bound"]
    text = (f"Ceilings measured in this run (benchmarks/roofline.c, best of {len(ceilings)}, {c['threads']} threads): "
            f"float32 FMA peak {c['fma_gflops_zmm']:.0f} GFLOP/s (AVX-512; AVX2 {c['fma_gflops_ymm']:.0f}), "
            f"read {c['read_gbs']:.1f} GB/s (copy {c['copy_gbs']:.1f}, triad {c['triad_gbs']:.1f}).  "
"A point = pixel x transmit x aperture element x frame.  Wall-clock medians and p95 are the "
            "goal's figures; the mean CPU time per call (all threads, process_time) is shown beside them because "
            "on a shared machine a thread that is not scheduled stretches the wall clock of an OpenMP call "
            "(GFLOP/s and the fraction of the bound use the wall-clock median).  " + " ".join(n + "." for n in notes))
    if args.no_record:
        print(text)
        print(harness.markdown_table(header, rows))
    else:
        harness.record("CPU DAS at the machine's limit (issue 21): usbeam vs PyMUST M @ IQ, roofline", header, rows,
                       notes=text, command="python benchmarks/bench_das.py " + " ".join(argv or sys.argv[1:]))


if __name__ == "__main__":
    main()
