"""Live-session benchmarks (CPU backend; the CUDA session is not built yet).

Measures, in one run:
  - the reference copy bandwidth: single-threaded host memcpy of one raw frame
    (the CPU stand-in for the pinned host-to-device cudaMemcpy of the GPU design);
  - sustained copy+channel-map ("upload") bandwidth into the session's slots while the
    compute thread beamforms, with the producer pushing as fast as policy 'block' allows;
  - push-to-image latency p50 / p99 / max and drops at 50 %, 80 % and 100 % load
    (frame period = compute time / load), policy 'drop_oldest', from a SimulatedScanner.
Frames: Vantage layout, int16 (rows = acquisitions x samples, channels), column-major.

    python benchmarks/live.py [--quick] [--json benchmarks/out/live.json]
"""
import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import usbeam  # noqa: E402
from usbeam.live import ChannelMap, Session, SimulatedScanner, to_rcvdata  # noqa: E402


class CompoundBMode:
    """Stand-in beamformer: sum of acquisitions, sample pairs as IQ, B-mode (C, OpenMP)."""

    def __init__(self, shape):
        self.input_shape, self.input_dtype = shape, np.dtype(np.int16)
        self.output_shape, self.output_dtype = (shape[1], shape[2] // 2), np.dtype(np.uint8)
        self._rf = np.empty(shape[1:], np.float32)
        self._iq = np.empty(self.output_shape, np.complex64)
        self._bmode = usbeam.BModePlan(self.output_shape, 50.0, normalize=6000.0)
        self.timings = {}

    def __call__(self, frame, out=None):
        t0 = time.perf_counter()
        np.sum(frame, axis=0, dtype=np.float32, out=self._rf)
        self._iq.real = self._rf[:, 0::2]
        self._iq.imag = self._rf[:, 1::2]
        t1 = time.perf_counter()
        out = self._bmode(self._iq, out=out)
        self.timings = {"compound": t1 - t0, "bmode": time.perf_counter() - t1}
        return out


def make_frames(n_acq, n_el, n_ch, n_s, n_frames=4):
    rng = np.random.default_rng(0)
    mapped = rng.integers(-2000, 2000, (n_frames, n_acq, n_el, n_s)).astype(np.int16)
    element_channel = rng.permutation(n_ch)[:n_el]
    raw = to_rcvdata(mapped, element_channel, n_ch, n_s)
    frames = [np.asfortranarray(f) for f in raw]
    cmap = ChannelMap(frames[0].shape, element_channel, np.arange(n_acq) * n_s, n_s)
    return frames, cmap


def memcpy_gbps(nbytes, repeats=50):
    src = np.random.default_rng(1).integers(0, 255, nbytes, dtype=np.uint8)
    dst = np.empty_like(src)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        np.copyto(dst, src)
        times.append(time.perf_counter() - t0)
    return nbytes / np.median(times) / 1e9


def compute_time(pipeline, cmap, frames, repeats=30):
    mapped = cmap(frames[0])
    out = np.empty(pipeline.output_shape, pipeline.output_dtype)
    for _ in range(5):
        pipeline(mapped, out=out)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        pipeline(mapped, out=out)
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def sustained_upload(pipeline, cmap, frames, seconds):
    session = Session(pipeline, slots=3, policy="block", channel_map=cmap)
    t0 = time.perf_counter()
    n = 0
    while time.perf_counter() - t0 < seconds:
        session.push(frames[n % len(frames)])
        n += 1
    session.wait_idle(10)
    wall = time.perf_counter() - t0
    stats = session.stats()
    session.stop()
    return {"frames": n, "copy_gbps": stats["upload_gbps"], "raw_gbps": n * frames[0].nbytes / wall / 1e9,
            "mapped_gbps": n * cmap.nbytes / wall / 1e9, "frames_per_s": n / wall,
            "dropped": stats["dropped"], "stage_s": stats["stage_s"]}


def latency_at_load(pipeline, cmap, frames, load, t_compute, n_frames):
    rate = load / t_compute
    session = Session(pipeline, slots=3, policy="drop_oldest", channel_map=cmap, results=4)
    scanner = SimulatedScanner(session, rate, source=frames, n_frames=n_frames)
    scanner.start()
    scanner.join()
    session.wait_idle(10)
    stats = session.stats()
    session.stop()
    lat = stats["latency_s"]
    return {"load": load, "frame_rate": rate, "frames": stats["pushed"], "processed": stats["processed"],
            "dropped": stats["dropped"], "scanner_late": scanner.late, "p50_ms": lat["p50"] * 1e3,
            "p99_ms": lat["p99"] * 1e3, "max_ms": lat["max"] * 1e3, "p99_over_p50": lat["p99"] / lat["p50"]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="shorter runs")
    parser.add_argument("--json", default=str(ROOT / "benchmarks" / "out" / "live.json"))
    args = parser.parse_args()
    n_frames = 150 if args.quick else 400
    seconds = 1.5 if args.quick else 4.0
    machine = {"platform": platform.platform(), "cpu_count": os.cpu_count(), "python": platform.python_version(),
               "numpy": np.__version__, "usbeam": usbeam.build_info(), "cuda_available": usbeam.cuda_available()}
    report = {"machine": machine, "configs": []}
    print(f"machine: {machine['platform']}, {machine['cpu_count']} CPUs, CUDA device: {machine['cuda_available']}")
    for n_acq, n_el, n_ch, n_s in [(3, 128, 256, 1024), (2, 64, 128, 1024)]:
        frames, cmap = make_frames(n_acq, n_el, n_ch, n_s)
        pipeline = CompoundBMode(cmap.output_shape)
        t_alone = compute_time(pipeline, cmap, frames)
        ref = memcpy_gbps(frames[0].nbytes)
        upload = sustained_upload(pipeline, cmap, frames, seconds)
        # load is relative to the compute time measured inside the session (with copies running)
        t_compute = upload["stage_s"]["compute"]
        loads = [latency_at_load(pipeline, cmap, frames, load, t_compute, n_frames) for load in (0.5, 0.8, 1.0)]
        config = {"raw_frame": list(frames[0].shape), "raw_bytes": frames[0].nbytes, "mapped": list(cmap.output_shape),
                  "mapped_bytes": cmap.nbytes, "compute_ms": t_compute * 1e3, "compute_alone_ms": t_alone * 1e3, "memcpy_gbps": ref,
                  "upload": upload, "loads": loads}
        report["configs"].append(config)
        print(f"\nraw frame {frames[0].shape} int16 ({frames[0].nbytes / 1e6:.2f} MB) -> mapped {cmap.output_shape} "
              f"({cmap.nbytes / 1e6:.2f} MB); compute {t_compute * 1e3:.2f} ms in the session "
              f"({t_alone * 1e3:.2f} ms alone)")
        print(f"  reference memcpy (1 thread): {ref:.2f} GB/s")
        print(f"  copy+map into slots while computing: {upload['copy_gbps']:.2f} GB/s during copies "
              f"({upload['copy_gbps'] / ref * 100:.0f} % of memcpy); sustained {upload['frames_per_s']:.0f} frames/s "
              f"= {upload['mapped_gbps']:.2f} GB/s mapped data, dropped {upload['dropped']}")
        print("  load  rate/s  frames  dropped  late  p50 ms  p99 ms  max ms  p99/p50")
        for r in loads:
            print(f"  {r['load']:4.0%}  {r['frame_rate']:6.0f}  {r['frames']:6d}  {r['dropped']:7d}  {r['scanner_late']:4d}"
                  f"  {r['p50_ms']:6.2f}  {r['p99_ms']:6.2f}  {r['max_ms']:6.2f}  {r['p99_over_p50']:7.2f}")
    if not machine["cuda_available"]:
        print("\nGPU figures (upload GB/s vs pinned cudaMemcpy, GPU latency) not measured: the CUDA live "
              "session is not implemented and no GPU is visible.")
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(report, indent=1))
    print(f"\nwrote {args.json}")


if __name__ == "__main__":
    main()
