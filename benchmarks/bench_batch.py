"""usbeam.batch scaling: frames/s of a chunked B-mode reconstruction on Dask, 1 and 2 worker
processes, and the overhead of Dask against a plain loop over the same chunks.

Every mode does the same work per chunk: read the chunk's frames from a usbeam raw file,
run the recipe on a plan built once, write the chunk and its completion marker into a Zarr
store (usbeam.batch.store.write_chunk).  Modes, interleaved round by round:
- loop: a Python loop over the chunks in this process (no Dask);
- threads-1 / threads-2: reconstruct() on dask's local threaded scheduler, 1 / 2 threads (one
  plan per thread; the C execute releases the GIL);
- local-1 / local-2: reconstruct() on the LocalCluster of scheduler='local' (1 / 2 worker
  processes, one thread each; usbeam.batch.run.local_cluster), started before timing, plans
  built in a warm-up run.
OMP_NUM_THREADS=1 everywhere, so a worker is one core.  Chunks are sized to about
``--chunk-seconds`` of work (measured first).  The result is validated (bit-identical to the
loop's output) before timing.

    python benchmarks/bench_batch.py [--rounds 5] [--chunks 6] [--chunk-seconds 1.0] [--no-record]
"""
import argparse
import os
import resource
import shutil
import sys
import tempfile
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import harness  # noqa: E402  (puts this checkout on sys.path)
import usbeam  # noqa: E402
from usbeam import batch  # noqa: E402
from usbeam.batch.store import OutputStore, write_chunk  # noqa: E402
from usbeam.batch.run import layout, local_cluster  # noqa: E402


def recipe():
    probe = usbeam.LinearArray(64, 3e-4, fc=5e6, bandwidth=0.6)
    grid = usbeam.Grid(x=np.linspace(-9e-3, 9e-3, 96), z=np.linspace(5e-3, 30e-3, 128))
    return batch.Recipe.bmode(probe, usbeam.PlaneWave(0.0), grid, n_samples=1024, fs=20e6, fc=5e6,
                              frames_per_call=4, output="db", dynamic_range=60.0)


def cpu_seconds():
    """User + system CPU time of this process (all its threads), s."""
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


def plain_loop(source, rec, out, chunk_frames):
    lay = layout(source, rec, None, chunk_frames)
    store = OutputStore(out, rec, lay, overwrite=True)
    plan = batch.plan_for(rec)
    for k in range(lay["n_chunks"]):
        frames = source[k * chunk_frames:(k + 1) * chunk_frames]
        write_chunk(store.path, k, store.region(k), rec.run(plan, frames), list(rec.outputs))
    store.group.attrs["complete"] = True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--chunks", type=int, default=6)
    ap.add_argument("--chunk-seconds", type=float, default=1.0)
    ap.add_argument("--no-record", action="store_true", help="print only; do not append to RESULTS.md")
    args = ap.parse_args()
    import distributed
    import zarr

    rec = recipe()
    plan = batch.plan_for(rec)
    rng = np.random.default_rng(0)
    probe_frames = rng.integers(-3000, 3000, (4,) + rec.frame_shape, dtype=np.int16)
    rec.run(plan, probe_frames)
    t = time.process_time()  # CPU time, which the other jobs' load does not inflate (one thread: OMP 1)
    for _ in range(5):
        rec.run(plan, probe_frames)
    per_frame = (time.process_time() - t) / 20
    chunk_frames = max(4, int(round(args.chunk_seconds / per_frame / 4)) * 4)
    n_frames = chunk_frames * args.chunks
    work = tempfile.mkdtemp(prefix="bench_batch_")
    try:
        with batch.RawWriter(os.path.join(work, "rec.usr"), rec.frame_shape) as w:
            for start in range(0, n_frames, 64):
                w.write(rng.integers(-3000, 3000, (min(64, n_frames - start),) + rec.frame_shape, dtype=np.int16))
        source = batch.RawSource(os.path.join(work, "rec.usr"))
        clusters = {n: local_cluster(n) for n in (1, 2)}  # what scheduler='local' starts
        clients = {n: distributed.Client(c) for n, c in clusters.items()}

        def workers_cpu(mode):
            if not mode.startswith("local"):
                return 0.0
            return sum(clients[int(mode[-1])].run(cpu_seconds).values())

        def run(mode):
            out = os.path.join(work, f"{mode}.zarr")
            shutil.rmtree(out, ignore_errors=True)
            cpu0 = cpu_seconds() + workers_cpu(mode)
            t = time.perf_counter()
            if mode == "loop":
                plain_loop(source, rec, out, chunk_frames)
            elif mode.startswith("threads"):
                batch.reconstruct(source, out, rec, chunk_frames=chunk_frames, n_workers=int(mode[-1]),
                                  progress=False)
            else:
                batch.reconstruct(source, out, rec, chunk_frames=chunk_frames, progress=False,
                                  scheduler=clients[int(mode[-1])])
            wall = time.perf_counter() - t
            cpu[mode].append(cpu_seconds() + workers_cpu(mode) - cpu0)
            return wall, out

        modes = ["loop", "threads-1", "threads-2", "local-1", "local-2"]
        cpu = {m: [] for m in modes}
        # validate and warm up (plans built in every worker): every mode's output equals the loop's
        outputs = {m: run(m)[1] for m in modes}
        reference = zarr.open_group(outputs["loop"], mode="r")["bmode"][:]
        for m in modes[1:]:
            harness.validated(m, zarr.open_group(outputs[m], mode="r")["bmode"][:],
                              lambda r: np.array_equal(r, reference))
        times = {m: [] for m in modes}
        cpu = {m: [] for m in modes}  # the warm-up's CPU times dropped
        for r in range(args.rounds):
            order = modes if r % 2 == 0 else modes[::-1]  # interleaved, alternating order
            for m in order:
                times[m].append(run(m)[0])
        for c in clients.values():
            c.close()
        for c in clusters.values():
            c.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)

    rows = []
    for m in modes:
        wall, used = np.array(times[m]), np.array(cpu[m])
        fps = n_frames / wall
        paired = wall / np.array(times["loop"]) - 1          # round by round, same moment's load
        cpu_over = used / np.array(cpu["loop"]) - 1
        rows.append([m, f"{np.median(wall):.2f} / {np.percentile(wall, 95):.2f}",
                     f"{np.median(fps):.1f} / {np.percentile(fps, 5):.1f}",
                     "-" if m == "loop" else f"{np.median(paired) * 100:+.1f} % / {np.percentile(paired, 95) * 100:+.1f} %",
                     f"{np.median(used):.2f} / {np.percentile(used, 95):.2f}",
                     "-" if m == "loop" else f"{np.median(cpu_over) * 100:+.1f} % / {np.percentile(cpu_over, 95) * 100:+.1f} %"])
    header = ["mode", "wall s (median / p95)", "frames/s (median / p5)", "wall vs loop, paired (median / p95)",
              "CPU s (median / p95)", "CPU vs loop, paired (median / p95)"]
    print(f"{n_frames} frames in {args.chunks} chunks of {chunk_frames} frames (~{chunk_frames * per_frame:.2f} s "
          f"of work each); {args.rounds} interleaved rounds")
    print(harness.markdown_table(header, rows))
    if not args.no_record:
        notes = (f"B-mode (64 elements x 1024 samples int16 -> 96 x 128 grid, dB), {n_frames} frames in "
                 f"{args.chunks} chunks of {chunk_frames} frames (~{chunk_frames * per_frame:.2f} s of CPU work each), "
                 f"{args.rounds} rounds interleaved (order alternating); each run writes the Zarr output and its "
                 f"markers; output checked equal to the plain loop's before timing.  OMP_NUM_THREADS=1 (one core "
                 f"per worker).  CPU s: user + system time of the driver process (its threads, the threaded "
                 f"scheduler, the LocalCluster scheduler) plus the worker processes (not the nannies), which "
                 f"the other jobs' load does not inflate as it does wall time; 'paired' ratios compare each "
                 f"round's run with the same round's loop.  The machine was shared with other helpers' jobs while this ran (2 cores), so "
                 f"2-worker figures in particular are noisy.")
        harness.record("usbeam.batch scaling (bench_batch.py)", header, rows, notes=notes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
