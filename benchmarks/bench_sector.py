"""Benchmark of sector and volume delay-and-sum (usbeam.Beamformer, CPU backend): convex and
phased arrays against PyMUST dasmtx + its sparse product in the same run, and a 3-D matrix
array volume in ns per point.

Cases (IQ from pymust.simus of 200 random scatterers, one diverging wave, repeated over the
frames with fresh noise; grids from usbeam.PolarGrid.for_probe):
  convex  C5-2v (128 elements, R = 49.6 mm), 256 radii x 128 angles (32,768 points), 16 frames
  phased  P4-2v (64 elements), 256 radii x 128 angles over +-45 degrees, 16 frames
  matrix  32 x 35 Vermon-type (1024 elements, rows 8, 17, 26 missing), SphericalGrid 64 x 32 x 32
          (65,536 points), 1 frame; no peer (a dense dasmtx3 of this size needs tens of GB)
Each usbeam result is validated against PyMUST's M @ IQ (rel. L2 <= 1e-5) before timing.
Timed, interleaved (usbeam, PyMUST, usbeam, PyMUST, ...) so machine load hits both alike:
plan creation (Beamformer vs dasmtx, at least PLAN_SAMPLES of each) and beamforming the
frames (execute into a preallocated output vs M @ IQ with M as CSR, and as COO: the faster is
the reference).
With --cuda (a machine with a GPU; benchmarks/gpu_session.sh runs it) the same convex, phased
and matrix cases on backend="cuda", device-resident (DeviceArray in and out), each validated
against the CPU backend first (rel. L2 <= 1e-5), timed by the plan's CUDA events and by the wall
clock around a call and a synchronisation; plus the CUDA scan conversion of the sector B-mode.
Run: .venv/bin/python benchmarks/bench_sector.py [--no-record] [--repeat N] [--cuda]
"""
import argparse
import math
import os
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
from harness import Timing, machine, markdown_table, publish, record, validated  # noqa: E402

N_FRAMES = 16
PLAN_SAMPLES = 10  # plans timed per case at least (3 gave medians that moved by a third between runs)


def interleaved(fns, repeat, warmup=1):
    """Time the callables in turn (A, B, A, B, ...); a Timing per callable."""
    for _ in range(warmup):
        for fn in fns:
            fn()
    samples = [[] for _ in fns]
    for _ in range(repeat):
        for k, fn in enumerate(fns):
            t = time.perf_counter()
            fn()
            samples[k].append(time.perf_counter() - t)
    return [Timing(s) for s in samples]


def simulated_iq(pymust, param, delays, rng):
    n = 200
    r, th = rng.uniform(0.02, 0.08, n), rng.uniform(-0.6, 0.6, n)
    z0 = -math.sqrt(param.radius ** 2 - (2 * param.radius * math.sin(
        math.asin(param.pitch / 2 / param.radius) * (param.Nelements - 1))) ** 2 / 4) if math.isfinite(param.radius) else 0
    rf, _ = pymust.simus(r * np.sin(th), r * np.cos(th) + z0, rng.standard_normal(n), delays, param)
    iq = pymust.rf2iq(rf, param)                                   # (samples, elements)
    frames = iq[:, :, None] + 1e-3 * np.abs(iq).max() * (rng.standard_normal(iq.shape + (N_FRAMES,))
                                                          + 1j * rng.standard_normal(iq.shape + (N_FRAMES,)))
    return frames                                                  # (samples, elements, frames), MATLAB order


def sector_case(pymust, name, probe, grid, param, delays, repeat, rng):
    frames = simulated_iq(pymust, param, delays, rng)
    iq = np.ascontiguousarray(np.moveaxis(frames, -1, 0).transpose(0, 2, 1)).astype(np.complex64)
    columns = np.asfortranarray(frames.reshape(-1, N_FRAMES, order="F"))
    pts = grid.coordinates()
    xs, zs = pts[:, 0].reshape(grid.shape), pts[:, 2].reshape(grid.shape)
    seq = usbeam.Delays(delays.ravel())
    bandwidth = param.bandwidth / 100

    def dasmtx():
        param.fnumber = None  # PyMUST's automatic f-number (param.width)
        param.TXdelay = delays.reshape(1, -1)
        return pymust.dasmtx(1j * np.array(frames.shape[:2]), xs, zs, param, "linear")

    def make_plan():
        return usbeam.Beamformer(probe, seq, grid, fs=param.fs, fc=param.fc, c=param.c, t0=0.0,
                                 n_samples=iq.shape[-1], f_number="auto", bandwidth=bandwidth,
                                 interpolation="linear", n_frames=N_FRAMES)

    m = dasmtx().tocsr()
    m_coo = m.tocoo()
    want = np.moveaxis((m @ columns).reshape(grid.shape + (N_FRAMES,), order="F"), -1, 0)
    bf = make_plan()
    out = np.empty((N_FRAMES,) + grid.shape, np.complex64)
    validated(name, bf(iq, out=out), lambda r: np.linalg.norm(r - want) <= 1e-5 * np.linalg.norm(want))
    t_plan, t_dasmtx = interleaved([make_plan, dasmtx], max(PLAN_SAMPLES, repeat // 4))
    t_exec, t_csr, t_coo = interleaved([lambda: bf(iq, out=out), lambda: m @ columns, lambda: m_coo @ columns],
                                       repeat)
    sparse = t_csr if t_csr.median <= t_coo.median else t_coo
    return [name, f"{t_plan.median * 1e3:.1f} (p95 {t_plan.p95 * 1e3:.1f})",
            f"{t_dasmtx.median * 1e3:.0f} (p95 {t_dasmtx.p95 * 1e3:.0f})", f"{t_dasmtx.median / t_plan.median:.0f}x",
            f"{t_exec.median * 1e3:.2f} (p95 {t_exec.p95 * 1e3:.2f})",
            f"{t_csr.median * 1e3:.1f} / {t_coo.median * 1e3:.1f}", f"{sparse.median / t_exec.median:.1f}x",
            f"{t_exec.median / (grid.n_points * N_FRAMES) * 1e9:.1f}"]


def matrix_case(repeat, rng):
    probe = usbeam.MatrixArray(32, 35, 0.3e-3, 0.3e-3, missing_rows=(8, 17, 26), element_width=0.27e-3,
                               element_height=0.27e-3)
    grid = usbeam.SphericalGrid(np.linspace(0.01, 0.06, 64), np.linspace(-0.5, 0.5, 32), np.linspace(-0.5, 0.5, 32))
    fs, fc, n_s = 12e6, 3e6, 1000
    iq = (rng.standard_normal((probe.n_elements, n_s)) + 1j * rng.standard_normal((probe.n_elements, n_s))).astype(
        np.complex64)
    seq = usbeam.DivergingWave((0.0, 0.0, -0.01))

    def make_plan():
        return usbeam.Beamformer(probe, seq, grid, fs=fs, fc=fc, n_samples=n_s, f_number=1.0, interpolation="linear")

    bf = make_plan()
    out = np.empty(grid.shape, np.complex64)
    validated("matrix volume", bf(iq, out=out), lambda r: np.all(np.isfinite(r)) and np.count_nonzero(r) > 0.5 * r.size)
    t_plan, = interleaved([make_plan], max(PLAN_SAMPLES, repeat // 4))
    t_exec, = interleaved([lambda: bf(iq, out=out)], repeat)
    return ["matrix 32x35 (1024 el), SphericalGrid 64x32x32, 1 frame, F=1",
            f"{t_plan.median * 1e3:.0f} (p95 {t_plan.p95 * 1e3:.0f})", f"{t_exec.median * 1e3:.1f} (p95 "
            f"{t_exec.p95 * 1e3:.1f})", f"{t_exec.median / grid.n_points * 1e9:.0f}",
            f"{bf.table_bytes() / 2**20:.0f}"]


def time_cuda(plan, d_in, d_out, repeat):
    """(device Timing from the plan's CUDA events, wall Timing of a call and a synchronisation)."""
    device_s, wall = [], []
    for k in range(repeat + 3):  # three warm-up calls
        t = time.perf_counter()
        plan(d_in, out=d_out)
        plan.cuda.synchronize()
        if k >= 3:
            wall.append(time.perf_counter() - t)
            device_s.append(sum(plan.cuda.stage_times().values()))  # seconds
    return Timing(device_s), Timing(wall)


def relative_l2(got, want):
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


def cuda_rows(pymust, repeat, rng, small=False):
    """The sector, volume and scan-conversion rows on backend='cuda' (issue 16's CUDA rows);
    ``small``: tiny grids, for a run on the CPU emulator (make bench-emu)."""
    from usbeam import device

    n_r, n_theta, n_cart, vol = (32, 16, 48, (8, 4, 4)) if small else (256, 128, 512, (64, 32, 32))

    rows = []

    def das_row(name, probe, seq, grid, iq, n_points_frames, **kwargs):
        cpu = usbeam.Beamformer(probe, seq, grid, **kwargs)
        t = time.perf_counter()
        gpu = usbeam.Beamformer(probe, seq, grid, backend="cuda", **kwargs)
        want = cpu(iq)
        d_iq = device.from_numpy(iq)
        d_out = device.from_numpy(np.full(want.shape, np.nan, want.dtype))
        gpu(d_iq, out=d_out)
        gpu.cuda.synchronize()
        first_call = time.perf_counter() - t  # plan + the first call (CUDA state, tables)
        err = relative_l2(d_out.to_numpy(), want)
        validated(name, err, lambda e: e <= 1e-5)
        t_dev, t_wall = time_cuda(gpu, d_iq, d_out, repeat)
        t_cpu, = interleaved([lambda: cpu(iq, out=np.empty_like(want))], max(3, repeat // 4))
        rows.append([name, f"{t_dev.median * 1e3:.3f} (p95 {t_dev.p95 * 1e3:.3f})",
                     f"{t_wall.median * 1e3:.3f}", f"{t_dev.median / n_points_frames * 1e9:.3f}",
                     f"{t_cpu.median * 1e3:.2f}", f"{t_cpu.median / t_dev.median:.1f}x",
                     f"{first_call * 1e3:.0f}", f"{err:.1e}"])
        return want

    for label, param_name in (("convex C5-2v", "C5-2v"), ("phased P4-2v", "P4-2v")):
        param = pymust.getparam(param_name)
        param.fs, param.c = 4 * param.fc, 1540.0
        if param_name == "C5-2v":
            probe = usbeam.ConvexArray(param.Nelements, param.pitch, param.radius, element_width=param.width)
            delays = pymust.txdelay(0.0, -0.01, param)
            grid = usbeam.PolarGrid.for_probe(probe, 0.08, n_r, n_theta)
        else:
            probe = usbeam.LinearArray(param.Nelements, param.pitch, width=param.width)
            delays = pymust.txdelay(param, 0.0, math.pi / 3)
            grid = usbeam.PolarGrid(np.linspace(0.005, 0.1, n_r), np.linspace(-math.pi / 4, math.pi / 4, n_theta))
        frames = simulated_iq(pymust, param, delays, rng)
        iq = np.ascontiguousarray(np.moveaxis(frames, -1, 0).transpose(0, 2, 1)).astype(np.complex64)
        image = das_row(f"{label}, {n_r}x{n_theta} polar, {N_FRAMES} frames", probe, usbeam.Delays(delays.ravel()), grid, iq,
                        grid.n_points * N_FRAMES, fs=param.fs, fc=param.fc, c=param.c, t0=0.0,
                        n_samples=iq.shape[-1], f_number="auto", bandwidth=param.bandwidth / 100,
                        interpolation="linear", n_frames=N_FRAMES)
        if param_name == "C5-2v":
            bmode = usbeam.BModePlan(image.shape, 60.0)(image)
            cart = grid.cartesian_grid(nx=n_cart, nz=n_cart)
            cpu = usbeam.ScanConvertPlan(grid, cart, bmode.shape, bmode.dtype)
            gpu = usbeam.ScanConvertPlan(grid, cart, bmode.shape, bmode.dtype, backend="cuda")
            want = cpu(bmode)
            d_in, d_out = device.from_numpy(bmode), device.from_numpy(np.zeros(want.shape, want.dtype))
            gpu(d_in, out=d_out)
            validated("scan conversion", d_out.to_numpy(), lambda got: np.array_equal(got, want))
            t_dev, t_wall = time_cuda(gpu, d_in, d_out, repeat)
            t_cpu, = interleaved([lambda: cpu(bmode)], max(3, repeat // 4))
            rows.append([f"scan conversion of the convex B-mode (uint8), {N_FRAMES} x {n_r}x{n_theta} -> "
                         f"{n_cart}x{n_cart}",
                         f"{t_dev.median * 1e3:.3f} (p95 {t_dev.p95 * 1e3:.3f})", f"{t_wall.median * 1e3:.3f}",
                         f"{t_dev.median / (want.size) * 1e9:.3f}", f"{t_cpu.median * 1e3:.2f}",
                         f"{t_cpu.median / t_dev.median:.1f}x", "-", "bit-identical"])

    probe = usbeam.MatrixArray(32, 35, 0.3e-3, 0.3e-3, missing_rows=(8, 17, 26), element_width=0.27e-3,
                               element_height=0.27e-3)
    grid = usbeam.SphericalGrid(np.linspace(0.01, 0.06, vol[0]), np.linspace(-0.5, 0.5, vol[1]),
                                np.linspace(-0.5, 0.5, vol[2]))
    n_s = 1000
    iq = (rng.standard_normal((probe.n_elements, n_s)) + 1j * rng.standard_normal((probe.n_elements, n_s))).astype(
        np.complex64)
    das_row(f"matrix 32x35 (1024 el), SphericalGrid {vol[0]}x{vol[1]}x{vol[2]}, 1 frame, F=1", probe,
            usbeam.DivergingWave((0.0, 0.0, -0.01)), grid, iq, grid.n_points, fs=12e6, fc=3e6, n_samples=n_s,
            f_number=1.0, interpolation="linear")
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--no-record", action="store_true", help="print only, do not append to RESULTS.md")
    parser.add_argument("--repeat", type=int, default=12)
    parser.add_argument("--cuda", action="store_true", help="the CUDA rows (needs a GPU)")
    parser.add_argument("--small", action="store_true", help="with --cuda: tiny sizes (the CPU emulator)")
    args = parser.parse_args()
    import pymust

    global N_FRAMES
    if args.small:
        N_FRAMES = 2

    if args.cuda:
        if not usbeam.cuda_available():
            print(f"bench_sector --cuda: skipped, {usbeam.build_info()['cuda_error'] or 'no CUDA device is visible'}")
            return
        rows = cuda_rows(pymust, args.repeat, np.random.default_rng(16), small=args.small)
        header = ["case", "CUDA execute ms, device (events)", "CUDA wall ms (call + sync)", "device ns/point/frame",
                  "CPU execute ms (same machine)", "GPU vs CPU", "plan + first call ms", "rel. L2 vs CPU"]
        notes = ("backend='cuda', DeviceArray in and out; device time = the plan's CUDA events, median (p95) "
                 "after 3 warm-up calls; CPU = the CPU backend on this machine's cores in the same run.  "
                 "Validated against the CPU backend before timing.")
        publish("Sector and volume DAS on the GPU (usbeam.Beamformer, backend='cuda')", header, rows,
                no_record=args.no_record, notes=notes)
        return

    rng = np.random.default_rng(16)
    rows = []
    convex = pymust.getparam("C5-2v")
    convex.fs, convex.c = 4 * convex.fc, 1540.0
    probe = usbeam.ConvexArray(convex.Nelements, convex.pitch, convex.radius, element_width=convex.width)
    delays = pymust.txdelay(0.0, -0.01, convex)
    rows.append(sector_case(pymust, "convex C5-2v, 256x128 polar, 16 frames", probe,
                            usbeam.PolarGrid.for_probe(probe, 0.08, 256, 128), convex, delays, args.repeat, rng))
    phased = pymust.getparam("P4-2v")
    phased.fs, phased.c = 4 * phased.fc, 1540.0
    probe = usbeam.LinearArray(phased.Nelements, phased.pitch, width=phased.width)
    delays = pymust.txdelay(phased, 0.0, math.pi / 3)
    rows.append(sector_case(pymust, "phased P4-2v, 256x128 polar, 16 frames", probe,
                            usbeam.PolarGrid(np.linspace(0.005, 0.1, 256), np.linspace(-math.pi / 4, math.pi / 4, 128)),
                            phased, delays, args.repeat, rng))
    header = ["case", "usbeam plan ms", "pymust.dasmtx ms", "plan speed-up", "usbeam execute ms",
              "M @ IQ ms (CSR / COO)", "execute speed-up", "execute ns/point/frame"]
    notes = ("Interleaved timing (usbeam, PyMUST, usbeam, ...); medians (p95).  Plan = Beamformer(...) "
             "(delays, weights, table) vs pymust.dasmtx (the sparse matrix); execute = the 16 frames into a "
             "preallocated output vs the faster of CSR and COO M @ IQ.  Automatic f-number, linear interpolation, "
             "MUST's delay model (Delays) on both sides.")
    mrow = matrix_case(args.repeat, rng)
    mheader = ["case", "usbeam plan ms", "usbeam execute ms", "execute ns/point", "table MiB"]
    if args.no_record:
        print(machine())
        print(markdown_table(header, rows))
        print(markdown_table(mheader, [mrow]))
    else:
        record("Sector DAS: convex and phased arrays (usbeam.Beamformer vs PyMUST dasmtx)", header, rows, notes=notes)
        record("Volume DAS: matrix array (usbeam.Beamformer)", mheader, [mrow],
               notes="One diverging wave from (0, 0, -10 mm), f-number 1 (box aperture), linear interpolation; "
                     "ns/point = execute median / points.  No peer: PyMUST dasmtx3 builds dense "
                     "points x elements arrays (tens of GB here).")


if __name__ == "__main__":
    main()
