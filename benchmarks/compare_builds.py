"""Two builds of usbeam on the CPU, stage by stage, interleaved in one run: did a change make
anything slower?  (Issue 13 asks that a redesign be checked this way, before and after.)

Each build is a source tree built in place (`make build`, or `USBEAM_CUDA=0 python setup.py
build_ext --inplace`).  For every round the script starts one process per build, alternating
which goes first; each process builds every plan once, checks its outputs (a SHA-256 of each
stage's result, which must be identical between the builds: the CPU backend is deterministic for
a fixed thread count), warms up, then times `--repeat` executes per stage.  Reported per stage and
build: the median and p95 over all rounds, and the after/before ratio of the medians.

Stages (fixed seeded inputs): rf2iq (PWI_disk-sized, int16), DAS (PWI_disk geometry, 128
elements, 251 x 251 grid, 32 frames, IQ, linear), B-mode (32 x 251 x 251), clutter 'poly' +
color Doppler (32 frames), Hadamard decode (order 64, int16), RCA FORCES B-scan (64 channels).

    python benchmarks/compare_builds.py BEFORE_TREE AFTER_TREE [--rounds 5] [--repeat 10]
"""
import argparse
import hashlib
import json
import os
import platform
import subprocess
import sys
import time

CHILD = r'''
import hashlib, json, sys, time
import numpy as np
import usbeam

repeat = int(sys.argv[1])
rng = np.random.default_rng(7)
stages = {}

def stage(name, run):
    out = run()
    digest = hashlib.sha256(np.ascontiguousarray(out).tobytes()).hexdigest()
    for _ in range(2):
        run()
    times = []
    for _ in range(repeat):
        t = time.perf_counter(); run(); times.append(time.perf_counter() - t)
    stages[name] = {"times": times, "sha256": digest}

fs, fc, c = 6.67e6, 5e6, 1480.0
n_el, n_samp, n_fr = 128, 334, 32
probe = usbeam.LinearArray(n_elements=n_el, pitch=0.298e-3, width=0.262e-3, bandwidth=0.75)
seq = usbeam.plane_wave_sequence([0.0])
rf = rng.integers(-2000, 2000, size=(n_fr, n_el, n_samp), dtype=np.int16)
rf2iq = usbeam.RF2IQPlan(rf.shape, np.int16, fs=fs, fc=fc, t0=9.95e-6, bandwidth=0.75)
iq = rf2iq(rf)
stage("rf2iq", lambda: rf2iq(rf))
grid = usbeam.Grid(x=np.linspace(-12.5e-3, 12.5e-3, 251), z=np.linspace(10e-3, 35e-3, 251))
bf = usbeam.Beamformer(probe, seq, grid, fs=fs, fc=fc, c=c, t0=9.95e-6, n_samples=n_samp, f_number=1.0,
                       interpolation="linear", dtype=np.complex64, n_frames=n_fr)
image = bf(iq[:, None])
stage("das", lambda: bf(iq[:, None]))
bm = usbeam.BModePlan(image.shape, 30)
stage("bmode", lambda: bm(image))
clutter = usbeam.ClutterFilter(image.shape, "poly", order=2)
stage("clutter_poly", lambda: clutter(image))
color = usbeam.ColorDopplerPlan(image.shape, fc=fc, prf=10e3, c=c)
stage("color_doppler", lambda: color(image)[0])
coded = rng.integers(-2000, 2000, size=(64, 64, 512), dtype=np.int16)
had = usbeam.HadamardDecodePlan(coded.shape, 64, axis=0)
stage("hadamard", lambda: had(coded))
print(json.dumps({"stages": stages, "version": usbeam.__version__}))
'''


def run_child(tree, repeat):
    env = dict(os.environ, PYTHONPATH=tree)
    out = subprocess.run([sys.executable, "-c", CHILD, str(repeat)], env=env, cwd=tree, capture_output=True,
                         text=True)
    if out.returncode != 0:
        raise SystemExit(f"{tree}: {out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])["stages"]


def percentile(values, q):
    values = sorted(values)
    k = (len(values) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args(argv)
    trees = {"before": os.path.abspath(args.before), "after": os.path.abspath(args.after)}
    times = {name: {} for name in trees}
    digests = {name: {} for name in trees}
    for r in range(args.rounds):
        order = ["before", "after"] if r % 2 == 0 else ["after", "before"]
        for name in order:
            for stage, result in run_child(trees[name], args.repeat).items():
                times[name].setdefault(stage, []).extend(result["times"])
                digests[name].setdefault(stage, set()).add(result["sha256"])
    print(f"machine: {platform.node()} {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs; "
          f"{args.rounds} interleaved rounds x {args.repeat} executes; {time.strftime('%Y-%m-%d %H:%M')}")
    print(f"{'stage':16s} {'before ms (p50 / p95)':>24s} {'after ms (p50 / p95)':>24s} {'after/before':>13s}  same output")
    for stage in times["before"]:
        b, a = times["before"][stage], times["after"][stage]
        same = digests["before"][stage] == digests["after"][stage] and len(digests["before"][stage]) == 1
        print(f"{stage:16s} {percentile(b, .5) * 1e3:11.3f} / {percentile(b, .95) * 1e3:9.3f} "
              f"{percentile(a, .5) * 1e3:12.3f} / {percentile(a, .95) * 1e3:9.3f} "
              f"{percentile(a, .5) / percentile(b, .5):13.3f}  {'yes' if same else 'NO'}")
        if not same:
            print(f"  {stage}: outputs differ between the builds: {digests['before'][stage]} vs {digests['after'][stage]}")


if __name__ == "__main__":
    main()
