"""Latency of a live Vantage session through the MEX client in GNU Octave.

What docs/live.md's "Vantage in 5 steps" sets up (tests/live/test_vantage_octave.py runs the
same with 8 frames): `python -m usbeam serve --vantage` on the L11-4v-like workspace of
tests/helpers/vantage_l11.py (3 plane waves, 128 channels, 2304 x 128 int16 frames, a
190 x 128 PData grid), and examples/vantage_shm.m called once per frame in Octave through
examples/usbeam_mex.c, closed loop (push, wait for the image), as an External process function
runs.  Every image is checked against the offline usbeam.Pipeline.from_vantage result of its
frame, bit for bit (validated first: a latency of wrong images is worthless).

Reported: frames pushed / received / equal; latency p50 / p95 / p99 / max of (a) the server's
push-start -> result-posted time (info.latency_s) and (b) the round trip measured in Octave
around `vantage_shm(RData)` (MEX push + wait + result copy into an Octave array); the
offline pipeline's compute time for reference.

    python benchmarks/bench_vantage_octave.py [--frames 1000] [--warmup 20] [--no-record]
"""
import argparse
import os

os.environ.setdefault("OMP_WAIT_POLICY", "passive")   # before usbeam (and its OpenMP) is loaded; as the server
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "helpers"))
import vantage_l11  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    octave, mkoctfile = shutil.which("octave"), shutil.which("mkoctfile")
    if not octave or not mkoctfile:
        sys.exit("GNU Octave (octave, mkoctfile) is needed: make octave")
    from scipy.io import loadmat

    import usbeam
    from usbeam.io import load_vantage

    tmp = Path(tempfile.mkdtemp(prefix="usbeam_bench_vantage_"))
    subprocess.run([mkoctfile, "--mex", f"-I{ROOT / 'csrc'}", str(ROOT / "examples" / "usbeam_mex.c"),
                    str(ROOT / "csrc" / "shm" / "client.c"), "-lrt", "-lpthread", "-o", str(tmp / "usbeam_mex.mex")],
                   check=True, capture_output=True)
    ws_path = tmp / "L11_4v_setup.mat"
    vantage_l11.save(ws_path, n_frames=8)
    ws = load_vantage(ws_path)
    pipeline = usbeam.Pipeline.from_vantage(ws)
    cmap = ws.channel_map()
    offline = [pipeline(cmap(ws.rcvdata[k])[None])[0].copy() for k in range(ws.n_frames)]
    compute = harness.measure(lambda: pipeline(cmap(ws.rcvdata[0])[None]), warmup=3, repeat=50)

    name = f"/usbeam_bench_{os.getpid()}"
    env = dict(os.environ, OMP_WAIT_POLICY="passive", PYTHONPATH=str(ROOT))
    server = subprocess.Popen([sys.executable, "-m", "usbeam", "serve", "--vantage", str(ws_path), "--name", name,
                               "--policy", "block", "--slot-bytes", str(1 << 20), "--result-bytes", str(1 << 20)],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    while not Path("/dev/shm" + name).exists():
        if server.poll() is not None:
            sys.exit(server.stdout.read())
        time.sleep(0.02)
    out = tmp / "out.mat"
    total = args.warmup + args.frames
    script = f"""addpath('{tmp}'); addpath('{ROOT / 'examples'}');
load('{ws_path}');
vantage_shm('start', Trans, Receive, Resource, '{name}');
n = size(RcvData{{1}}, 3); N = {total};
ids = zeros(1, N); src = zeros(1, N); latency = zeros(1, N); round_trip = zeros(1, N); imgs = [];
for k = 1:N
    f = mod(k - 1, n) + 1; RData = RcvData{{1}}(:, :, f);
    t = tic; [img, info] = vantage_shm(RData); round_trip(k) = toc(t);
    if isempty(imgs), imgs = zeros([size(img), N], class(img)); end
    imgs(:, :, k) = img; ids(k) = info.frame_id; src(k) = f; latency(k) = info.latency_s;
end
h = usbeam_mex('open', '{name}', 1000); counters = usbeam_mex('info', h); usbeam_mex('close', h);
vantage_shm('stop');
save('-v7', '{out}', 'imgs', 'ids', 'src', 'latency', 'round_trip', 'counters');
"""
    load_at_start = os.getloadavg()[0]
    try:
        proc = subprocess.run([octave, "--no-gui", "--no-window-system", "--norc", "--no-history", "--quiet",
                               "--eval", script], capture_output=True, text=True, env=env)
        if proc.returncode:
            sys.exit(proc.stdout + proc.stderr)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
    res = loadmat(out, squeeze_me=True, struct_as_record=False)
    ids, src = res["ids"].astype(int), res["src"].astype(int)
    imgs = res["imgs"]
    assert ids.tolist() == list(range(1, total + 1)), "frames missing or out of order"
    equal = sum(np.array_equal(imgs[:, :, k].T, offline[src[k] - 1]) for k in range(total))
    assert equal == total, f"{total - equal} images differ from the offline pipeline"
    c = res["counters"]
    timed = slice(args.warmup, None)
    lat, rt = res["latency"][timed] * 1e3, res["round_trip"][timed] * 1e3

    def stats(x):
        return [f"{np.percentile(x, 50):.2f}", f"{np.percentile(x, 95):.2f}", f"{np.percentile(x, 99):.2f}",
                f"{x.max():.2f}"]

    rows = [["server push -> posted (info.latency_s)", *stats(lat)],
            ["Octave round trip vantage_shm(RData)", *stats(rt)]]
    header = ["latency (ms)", "p50", "p95", "p99", "max"]
    notes = (f"Frames pushed {int(c.pushed)}, received {ids.size}, images equal to the offline "
             f"Pipeline.from_vantage {equal}/{total} (first {args.warmup} are warm-up, not in the figures); "
             f"dropped {int(c.dropped)}, rejected {int(c.rejected)}.  Frame 2304 x 128 int16 (3 plane waves x "
             f"768 rows, 128-channel connector map) -> 190 x 128 uint8 B-mode; offline pipeline compute "
             f"{compute}.  Closed loop (push, wait for the image), {octave_version(octave)}, "
             f"OMP_WAIT_POLICY=passive, --policy block.  Load average {load_at_start:.1f} at start "
             f"(machine shared with other jobs).")
    print(notes)
    print(harness.markdown_table(header, rows))
    if not args.no_record:
        harness.record("Vantage session through the MEX client in GNU Octave (usbeam serve --vantage)", header,
                       rows, notes=notes, command="python benchmarks/bench_vantage_octave.py " +
                       " ".join(sys.argv[1:]))
    shutil.rmtree(tmp, ignore_errors=True)


def octave_version(octave):
    out = subprocess.run([octave, "--version"], capture_output=True, text=True).stdout.splitlines()
    return out[0].strip() if out else "GNU Octave"


if __name__ == "__main__":
    main()
