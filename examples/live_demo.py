"""Live demo on the CPU: a simulated scanner pushes Vantage-layout RF frames into a
session at a set rate; the session maps channels, runs the workspace's own beamformer
(usbeam.Pipeline.from_vantage: 3 plane waves, its PData grid) and reports
latency and throughput.  Uses SIMULATED data (usbeam.live.vantage.save_simulated_workspace).

    python examples/live_demo.py --rate 200 --frames 400
"""
import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
try:
    import usbeam  # noqa: F401
except ImportError:  # run from a source checkout without installing
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import vantage_bridge  # noqa: E402
from usbeam.io import load_vantage  # noqa: E402
from usbeam.live import SimulatedScanner  # noqa: E402
from usbeam.live.vantage import save_simulated_workspace  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=200.0, help="frames per second")
    parser.add_argument("--frames", type=int, default=400)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "simulated_vantage.mat")
        save_simulated_workspace(path, n_elements=64, n_channels=128, n_acquisitions=3, n_samples=512, n_frames=8)
        frames = load_vantage(path).rcvdata
        vantage_bridge.start(path)
        scanner = SimulatedScanner(vantage_bridge.push, args.rate, source=frames, n_frames=args.frames).start()
        scanner.join()
        stats = vantage_bridge.stats(wait=5.0)
        vantage_bridge.stop()
    lat = stats["latency_s"]
    print(f"pushed {stats['pushed']}, processed {stats['processed']}, dropped {stats['dropped']} "
          f"at {args.rate:g} frames/s (scanner late {scanner.late})")
    print(f"push-to-image latency p50 {lat['p50'] * 1e3:.2f} ms, p99 {lat['p99'] * 1e3:.2f} ms, "
          f"max {lat['max'] * 1e3:.2f} ms; copy+map {stats['upload_gbps']:.2f} GB/s")
    print("stage means (ms): " + ", ".join(f"{k} {v * 1e3:.3f}" for k, v in stats["stage_s"].items()))


if __name__ == "__main__":
    main()
