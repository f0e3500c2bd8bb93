"""What Ctrl-C costs a long execute (issue 15): the interrupt checks of csrc/common/interrupt.h
(a flag read per tile on every thread, a clock read per tile and the Python check every 50 ms on
the caller's thread, which takes the GIL back for a moment) against a build without them.

Two source trees, each built in place: BEFORE (without the checks) and AFTER.  Each round starts
one process per tree, alternating which goes first; each builds the plans once, checks the
outputs (a SHA-256, identical between the trees: the checks change no arithmetic), warms up and
times `--repeat` executes of each case, called from the main thread, so the AFTER build runs its
Python check (the path a Ctrl-C takes) on every call longer than 50 ms.  Reported per case and
build: median and p95 over all rounds of the wall time and of the calling thread's CPU time
(time.thread_time: with OMP_NUM_THREADS=1 the caller is the whole team, and the time other jobs
of a shared machine take the core is left out), and the after/before ratio of the medians.

Cases: RCA FORCES volume (64 x 64 strips, 48^3 voxels, RF, linear) and DAS (128 elements, 3 plane
waves, 600 x 400 grid, 8 frames, IQ, linear), each a few hundred ms on one core.

    python benchmarks/bench_interrupt_overhead.py BEFORE_TREE AFTER_TREE [--rounds 6] [--repeat 5]

On a shared machine the two processes of a round see different loads; `--in-process TREE` is the
tighter check of the same cost: one process of one build alternates calls of each case from the
main thread (the check registered and run every 50 ms) and from a second thread (CPython runs
signal handlers on the main thread only, so no check is registered there; the loops' flag test
remains), call by call, and reports both and their ratio: wall time, and the CPU time of the
calling thread (time.thread_time; with OMP_NUM_THREADS=1 the caller is the whole team), which
leaves out the time other jobs of a shared machine take the core.
"""
import argparse
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
rng = np.random.default_rng(11)
cases = {}

def case(name, run):
    out = run()
    digest = hashlib.sha256(np.ascontiguousarray(out).tobytes()).hexdigest()
    run()
    times, cpu = [], []
    for _ in range(repeat):
        t, c = time.perf_counter(), time.thread_time()
        run()
        cpu.append(time.thread_time() - c)
        times.append(time.perf_counter() - t)
    cases[name] = {"times": times, "cpu": cpu, "sha256": digest}

array = usbeam.RowColumnArray(64, 64, 0.2e-3, 0.2e-3)
axis = np.linspace(-5e-3, 5e-3, 48)
grid = usbeam.RCAGrid.volume(axis, axis, np.linspace(5e-3, 15e-3, 48))
rca = usbeam.RCABeamformer(array, "forces", grid, n_samples=600, fs=20e6, c=1540.0, interpolation="linear",
                           f_number=0.0)
data = rng.standard_normal(rca.data_shape, dtype=np.float32)
case("rca_volume", lambda: rca(data))

probe = usbeam.LinearArray(n_elements=128, pitch=0.3e-3, width=0.27e-3, bandwidth=0.6)
seq = usbeam.plane_wave_sequence(np.deg2rad([-8.0, 0.0, 8.0]))
das_grid = usbeam.Grid(x=np.linspace(-12e-3, 12e-3, 400), z=np.linspace(8e-3, 36e-3, 600))
bf = usbeam.Beamformer(probe, seq, das_grid, fs=5e6, fc=5e6, c=1540.0, t0=0.0, n_samples=300, f_number=1.5,
                       interpolation="linear", dtype=np.complex64, n_frames=8)
iq = (rng.standard_normal((8, 3, 128, 300)) + 1j * rng.standard_normal((8, 3, 128, 300))).astype(np.complex64)
case("das_iq", lambda: bf(iq))
print(json.dumps(cases))
'''


IN_PROCESS = r'''
import json, sys, threading, time
import numpy as np
import usbeam
exec(compile(sys.argv[2], "cases", "exec"))  # defines make_cases() -> {name: run}
repeat = int(sys.argv[1])
result = {}
for name, run in make_cases().items():
    run(); run()
    times = {"main": [], "thread": [], "main_cpu": [], "thread_cpu": []}
    def timed(where):
        t, c = time.perf_counter(), time.thread_time()
        run()
        times[where + "_cpu"].append(time.thread_time() - c)
        times[where].append(time.perf_counter() - t)
    for i in range(repeat):
        for where in (("main", "thread") if i % 2 == 0 else ("thread", "main")):
            if where == "main":
                timed("main")
            else:
                worker = threading.Thread(target=timed, args=("thread",))
                worker.start(); worker.join()
    result[name] = times
print(json.dumps(result))
'''

CASES = r'''
def make_cases():
    rng = np.random.default_rng(11)
    array = usbeam.RowColumnArray(64, 64, 0.2e-3, 0.2e-3)
    axis = np.linspace(-5e-3, 5e-3, 48)
    grid = usbeam.RCAGrid.volume(axis, axis, np.linspace(5e-3, 15e-3, 48))
    rca = usbeam.RCABeamformer(array, "forces", grid, n_samples=600, fs=20e6, c=1540.0, interpolation="linear",
                               f_number=0.0)
    data = rng.standard_normal(rca.data_shape, dtype=np.float32)
    probe = usbeam.LinearArray(n_elements=128, pitch=0.3e-3, width=0.27e-3, bandwidth=0.6)
    seq = usbeam.plane_wave_sequence(np.deg2rad([-8.0, 0.0, 8.0]))
    das_grid = usbeam.Grid(x=np.linspace(-12e-3, 12e-3, 400), z=np.linspace(8e-3, 36e-3, 600))
    bf = usbeam.Beamformer(probe, seq, das_grid, fs=5e6, fc=5e6, c=1540.0, t0=0.0, n_samples=300, f_number=1.5,
                           interpolation="linear", dtype=np.complex64, n_frames=8)
    iq = (rng.standard_normal((8, 3, 128, 300)) + 1j * rng.standard_normal((8, 3, 128, 300))).astype(np.complex64)
    return {"rca_volume": lambda: rca(data), "das_iq": lambda: bf(iq)}
'''


def in_process(tree, repeat):
    env = dict(os.environ, PYTHONPATH=os.path.abspath(tree))
    out = subprocess.run([sys.executable, "-c", IN_PROCESS, str(repeat), CASES], cwd=os.path.abspath(tree), env=env,
                         capture_output=True, text=True, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"machine: {platform.machine()} {os.cpu_count()} CPUs, OMP_NUM_THREADS="
          f"{os.environ.get('OMP_NUM_THREADS', 'unset')}; {repeat} alternating calls per side; "
          f"{time.strftime('%Y-%m-%d %H:%M')}")
    print(f"{'case':<20} {'checks on ms (p50 / p95)':>26} {'checks off ms (p50 / p95)':>27} {'on/off':>8}")
    for name, entry in result.items():
        for clock, suffix in (("wall", ""), ("thread CPU", "_cpu")):
            on, off = entry["main" + suffix], entry["thread" + suffix]
            print(f"{name + ' ' + clock:<20} {percentile(on, 0.5) * 1e3:>11.2f} / {percentile(on, 0.95) * 1e3:>10.2f}  "
                  f"{percentile(off, 0.5) * 1e3:>12.2f} / {percentile(off, 0.95) * 1e3:>10.2f}  "
                  f"{percentile(on, 0.5) / percentile(off, 0.5):>8.4f}")


def run_child(tree, repeat):
    env = dict(os.environ, PYTHONPATH=os.path.abspath(tree))
    out = subprocess.run([sys.executable, "-c", CHILD, str(repeat)], cwd=os.path.abspath(tree), env=env,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def percentile(values, q):
    values = sorted(values)
    k = (len(values) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", nargs="?")
    parser.add_argument("after", nargs="?")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--in-process", metavar="TREE", help="checks on (main thread) vs off (other thread)")
    args = parser.parse_args()
    if args.in_process:
        in_process(args.in_process, args.repeat)
        return
    if not (args.before and args.after):
        parser.error("give BEFORE_TREE and AFTER_TREE, or --in-process TREE")
    times = {"before": {}, "after": {}}
    cpu = {"before": {}, "after": {}}
    digests = {"before": {}, "after": {}}
    for r in range(args.rounds):
        order = ("before", "after") if r % 2 == 0 else ("after", "before")
        for which in order:
            result = run_child(getattr(args, which), args.repeat)
            for name, entry in result.items():
                times[which].setdefault(name, []).extend(entry["times"])
                cpu[which].setdefault(name, []).extend(entry["cpu"])
                digests[which][name] = entry["sha256"]
    print(f"machine: {platform.machine()} {os.cpu_count()} CPUs, OMP_NUM_THREADS="
          f"{os.environ.get('OMP_NUM_THREADS', 'unset')}; {args.rounds} interleaved rounds x {args.repeat} executes; "
          f"{time.strftime('%Y-%m-%d %H:%M')}")
    print(f"{'case':<20} {'before ms (p50 / p95)':>24} {'after ms (p50 / p95)':>24} {'after/before':>13}  same output")
    for name in times["before"]:
        same = "yes" if digests["before"][name] == digests["after"][name] else "NO"
        for clock, table in (("wall", times), ("thread CPU", cpu)):
            b, a = table["before"][name], table["after"][name]
            b50, a50 = percentile(b, 0.5), percentile(a, 0.5)
            print(f"{name + ' ' + clock:<20} {b50 * 1e3:>10.2f} / {percentile(b, 0.95) * 1e3:>10.2f}  "
                  f"{a50 * 1e3:>10.2f} / {percentile(a, 0.95) * 1e3:>10.2f}  {a50 / b50:>12.4f}  {same}")


if __name__ == "__main__":
    main()
