"""GPU DAS on the PWI_disk geometry: usbeam's CUDA beamformer in points/s, against the CPU
backend and, when its wheel is importable, mach (mach-beamform) in the same run.

Geometry: PWI_disk (128 elements, 32 frames, 0-degree plane wave), IQ from usbeam.rf2iq,
251 x 251 grid, f-number auto, linear interpolation.  points/s = pixels x elements x
frames / time (the figure mach publishes).  usbeam's time is the plan's CUDA-event stage
time (device only, data already on the GPU); wall time adds the launch and a stream
synchronisation.  mach is timed the same way with CuPy events on CuPy arrays (its
zero-copy input) when CuPy is importable, else on NumPy arrays (its copies included, said
in the table).  Every result is validated before it is timed: usbeam GPU against usbeam
CPU (tests/tolerances.py das_cuda_rel_l2), mach against usbeam by the correlation of the
power images (mach models the plane wave as z/c and its own window; no exact agreement is
expected).  It prints the ratio of usbeam's points/s to mach's (both device times) and the
verdict against the target usbeam >= 1.5x mach; with mach timed on NumPy arrays (no CuPy) the
ratio is printed but gives no verdict (mach's host copies are in its time).  Without a GPU it
prints why and exits 0.  All 32 PWI_disk frames are beamformed in one call.

    python benchmarks/bench_beamform_gpu.py [--repeat 50] [--no-record]
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


def relative_l2(got, want):
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


def usbeam_gpu_timing(beamformer, d_iq, d_out, repeat):
    device_samples = []

    def call():
        beamformer(d_iq, out=d_out)
        beamformer.cuda.synchronize()
        device_samples.append(beamformer.cuda.stage_times()["das.beamform"])

    wall = harness.measure(call, repeat=repeat)
    return harness.Timing(device_samples[-len(wall.samples):]), wall


def mach_rows(rec, grid, iq, usbeam_image, f_number, points, repeat):
    """(rows, note, mach points/s on the device or None when not comparable) for mach; no rows
    and a note saying why when mach is not importable."""
    try:
        from mach.kernel import beamform as mach_beamform
    except ImportError:
        return [], "mach (mach-beamform) is not importable here: no comparison in this run.", None
    try:
        import cupy as cp
    except ImportError:
        cp = None
    n_frames = iq.shape[0]
    coords = grid.coordinates().astype(np.float32)                            # (n_points, 3)
    channel = np.ascontiguousarray(np.transpose(iq, (1, 2, 0)))              # (element, sample, frame)
    arrivals = (coords[:, 2] / rec.c).astype(np.float32)                     # 0-degree plane wave
    elements = np.ascontiguousarray(rec.probe.positions, dtype=np.float32)
    xp = cp if cp is not None else np
    args = dict(channel_data=xp.asarray(channel), rx_coords_m=xp.asarray(elements), scan_coords_m=xp.asarray(coords),
                tx_wave_arrivals_s=xp.asarray(arrivals), f_number=float(f_number), rx_start_s=float(rec.t0),
                sampling_freq_hz=float(rec.fs), sound_speed_m_s=float(rec.c), modulation_freq_hz=float(rec.fc),
                tukey_alpha=0.0)
    out = xp.empty((coords.shape[0], n_frames), dtype=xp.complex64)

    def run():
        mach_beamform(out=out, **args)

    run()
    result = cp.asnumpy(out) if cp is not None else out
    ours = np.abs(usbeam_image.reshape(n_frames, -1).T) ** 2
    theirs = np.abs(result) ** 2
    rho = float(np.corrcoef(ours.sum(axis=1), theirs.sum(axis=1))[0, 1])
    harness.validated("mach", rho, lambda r: r >= 0.99)
    if cp is not None:
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        samples = []

        def timed():
            start.record()
            run()
            stop.record()
            stop.synchronize()
            samples.append(cp.cuda.get_elapsed_time(start, stop) * 1e-3)

        wall = harness.measure(timed, repeat=repeat)
        on_device = harness.Timing(samples[-len(wall.samples):])
        where = "CuPy arrays on the GPU"
    else:
        wall = harness.measure(run, repeat=repeat)
        on_device = wall
        where = "NumPy arrays (host copies included)"
    return ([["mach beamform", f"{on_device.median * 1e3:.3f}", f"{on_device.p95 * 1e3:.3f}",
              f"{wall.median * 1e3:.3f}", f"{points / on_device.median:.3g}", where]],
            f"mach power image vs usbeam: correlation {rho:.5f}.",
            points / on_device.median if cp is not None else None)


TARGET_RATIO = 1.5  # the target: usbeam >= 1.5x mach in points/s on the same GPU


def verdict(usbeam_pps, mach_pps, mach_rows_given):
    """One line: the usbeam/mach points/s ratio and whether it meets TARGET_RATIO."""
    if not mach_rows_given:
        return f"usbeam/mach points/s: not measured (mach not importable); target >= {TARGET_RATIO}x"
    if mach_pps is None:
        return (f"usbeam/mach points/s: no verdict (mach ran on NumPy arrays without CuPy, its host copies "
                f"timed); target >= {TARGET_RATIO}x needs CuPy")
    ratio = usbeam_pps / mach_pps
    status = "PASS" if ratio >= TARGET_RATIO else "FAIL"
    return f"usbeam/mach points/s: {ratio:.2f}x (target >= {TARGET_RATIO}x): {status}"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--no-record", action="store_true", help="print only, do not append to RESULTS.md")
    args = parser.parse_args(argv)
    if not usbeam.cuda_available():
        reason = usbeam.build_info()["cuda_error"] or "no CUDA device is visible"
        print(f"bench_beamform_gpu: skipped, {reason}")
        return 0
    rec = usbeam.io.load_must(usbeam.datasets.locate("PWI_disk.mat"))
    iq = usbeam.rf2iq(rec.data, fs=rec.fs, fc=rec.fc, t0=rec.t0, bandwidth=rec.bandwidth)  # (32, 128, n)
    n_frames, n_el, n_s = iq.shape
    grid = usbeam.Grid(x=np.linspace(-12.5e-3, 12.5e-3, 251), z=np.linspace(10e-3, 35e-3, 251))
    common = dict(fs=rec.fs, fc=rec.fc, c=rec.c, t0=rec.t0, n_samples=n_s, f_number="auto",
                  bandwidth=rec.bandwidth, interpolation="linear", dtype=np.complex64, n_frames=n_frames)
    gpu = usbeam.Beamformer(rec.probe, rec.sequence, grid, backend="cuda", strict=True, **common)
    cpu = usbeam.Beamformer(rec.probe, rec.sequence, grid, **common)
    data = iq[:, None]
    want = cpu(data)
    d_iq = device.from_numpy(data)
    d_out = device.empty(want.shape, np.complex64)
    gpu(d_iq, out=d_out)
    from tolerances import TOLERANCES

    got = d_out.to_numpy()
    harness.validated("usbeam GPU", got, lambda g: relative_l2(g, want) <= TOLERANCES["das_cuda_rel_l2"])
    points = grid.n_points * n_el * n_frames
    on_device, wall = usbeam_gpu_timing(gpu, d_iq, d_out, args.repeat)
    t_cpu = harness.measure(lambda: cpu(data, out=want), repeat=max(3, args.repeat // 10))
    rows = [["usbeam CUDA Beamformer", f"{on_device.median * 1e3:.3f}", f"{on_device.p95 * 1e3:.3f}",
             f"{wall.median * 1e3:.3f}", f"{points / on_device.median:.3g}", "DeviceArray on the GPU"],
            ["usbeam CPU Beamformer", f"{t_cpu.median * 1e3:.2f}", f"{t_cpu.p95 * 1e3:.2f}",
             f"{t_cpu.median * 1e3:.2f}", f"{points / t_cpu.median:.3g}", "NumPy"]]
    extra, note, mach_pps = mach_rows(rec, grid, iq, got, gpu.f_number, points, args.repeat)
    rows += extra
    line = verdict(points / on_device.median, mach_pps, bool(extra))
    print(line)
    note += " " + line + "."
    header = ["beamformer", "device median ms", "device p95 ms", "wall median ms", "points/s (device)", "data"]
    notes = (f"PWI_disk: {n_frames} frames x {n_el} elements x {n_s} IQ samples, 251 x 251 grid, f-number auto "
             f"({gpu.f_number:.4f}), linear interpolation, rect window; points = pixels x elements x frames. "
             f"usbeam GPU vs CPU relative L2 {relative_l2(got, want):.2e}. " + note)
    if args.no_record:
        print(notes)
        print(harness.markdown_table(header, rows))
    else:
        harness.record("DAS on the GPU (PWI_disk geometry)", header, rows, command="python benchmarks/bench_beamform_gpu.py",
                       notes=notes)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
