"""Fault tolerance and memory of usbeam.batch.

- a worker process killed in the middle of a distributed run: the run completes and every
  chunk equals the in-memory reconstruction (Dask recomputes the lost tasks);
- ``python -m usbeam reconstruct`` interrupted with SIGINT, then run again: the Zarr content
  equals an uninterrupted run's;
- a chunk whose data no longer matches its marker (a torn write), or data without marker:
  recomputed on resume, never taken as complete;
- a recording 4x larger than the memory budget set for a child process (RLIMIT_DATA)
  completes; its peak RSS is printed.
"""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

pytest.importorskip("dask")
distributed = pytest.importorskip("distributed")
zarr = pytest.importorskip("zarr")

import batch_data as data  # noqa: E402
from batch_slow import SlowRawSource  # noqa: E402
from conftest import package_root  # noqa: E402
from usbeam import batch  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGE_ROOT = str(package_root())  # the subprocess imports the usbeam this process tests


def test_killed_worker_run_completes_with_every_chunk_correct(tmp_path):
    rf = data.linear_frames(96, seed=21)
    batch.write_raw(tmp_path / "rec.usr", rf)
    recipe = data.doppler_recipe("svd", {"low": 1})
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    try:
        with distributed.Client(cluster) as client:
            pids = client.run(os.getpid)
            victim = sorted(pids.values())[0]
            address = next(a for a, pid in pids.items() if pid == victim)
            seen, busy = [], []

            def progress(k):
                seen.append(k)
                if len(seen) == 2:  # mid-run: 2 of 12 chunks written
                    busy.extend(client.processing()[address])  # what the victim is working on
                    os.kill(victim, signal.SIGKILL)

            # each read sleeps 0.15 s, so the run is surely still going when the worker dies
            source = SlowRawSource(str(tmp_path / "rec.usr"), 0.15)
            report = batch.reconstruct(source, str(tmp_path / "out.zarr"), recipe, chunk_frames=8,
                                       scheduler=client, progress=progress)
            assert busy, "the killed worker had no task in flight"
            assert report.computed == 12 and sorted(seen) == list(range(12))
            assert victim not in client.run(os.getpid).values()  # the nanny started a new worker
    finally:
        cluster.close()
    group = zarr.open_group(str(tmp_path / "out.zarr"), mode="r")
    expected = data.doppler_whole_record(rf, "svd", {"low": 1})
    for name in expected:
        np.testing.assert_array_equal(group[name][:], expected[name], err_msg=name)


def _cli(args, **kwargs):
    env = dict(os.environ, OMP_NUM_THREADS="1",
               PYTHONPATH=PACKAGE_ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.Popen([sys.executable, "-m", "usbeam", "reconstruct", *args], cwd=PACKAGE_ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)


def _markers(path):
    try:
        return np.asarray(zarr.open_group(path, mode="r")["usbeam_chunks"][:]).any(axis=(1, 2))
    except Exception:
        return np.zeros(0, bool)


def _contents(path):
    group = zarr.open_group(path, mode="r")
    return {name: np.asarray(group[name][:]) for name in ("velocity", "variance", "power", "usbeam_chunks")}


def test_sigint_then_resume_equals_uninterrupted(tmp_path):
    # 250 chunks of one ensemble, ~10-20 ms each on a 128 x 128 grid: a run of several seconds,
    # so that the 3 markers are seen and the signal sent while it runs (with 80 chunks a CI run
    # once finished, in 1.5 s, before this loop had read 3 markers from the store being written)
    rf = data.linear_frames(2000, seed=22)
    batch.write_raw(tmp_path / "rec.usr", rf)
    recipe = data.doppler_recipe("svd", {"low": 1}, nx=128, nz=128)
    spec = recipe.save(tmp_path / "spec.json")
    out = str(tmp_path / "out.zarr")
    args = [str(tmp_path / "rec.usr"), out, "--pipeline", str(spec), "--chunk-frames", "8", "--workers", "1"]
    proc = _cli(args)
    deadline = time.monotonic() + 60
    while _markers(out).sum() < 3 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted; run the same command again to resume" in err
    done_before = int(_markers(out).sum())
    assert 3 <= done_before < 250
    resumed = _cli(args)
    stdout, err = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, err
    assert f"{done_before} already complete" in stdout or f"{done_before + 1} already complete" in stdout, stdout
    assert "reconstruct: 100%" in err  # the progress bar (tqdm writes to stderr)
    batch.reconstruct(str(tmp_path / "rec.usr"), str(tmp_path / "whole.zarr"), recipe, chunk_frames=8,
                      progress=False)
    resumed_content, whole = _contents(out), _contents(str(tmp_path / "whole.zarr"))
    for name in whole:
        np.testing.assert_array_equal(resumed_content[name], whole[name], err_msg=name)


def test_torn_chunk_and_markerless_chunk_are_recomputed(tmp_path):
    rf = data.linear_frames(32, seed=23)
    batch.write_raw(tmp_path / "rec.usr", rf)
    recipe = data.doppler_recipe("svd")
    out = str(tmp_path / "out.zarr")
    batch.reconstruct(str(tmp_path / "rec.usr"), out, recipe, chunk_frames=8, progress=False)
    good = _contents(out)
    group = zarr.open_group(out, mode="r+")
    group["power"][1] = 0.0                      # chunk 1: data changed after its marker (a torn write)
    group["usbeam_chunks"][2] = 0                # chunk 2: data written, marker not
    group.attrs["complete"] = False
    report = batch.reconstruct(str(tmp_path / "rec.usr"), out, recipe, chunk_frames=8, progress=False)
    assert (report.computed, report.skipped) == (2, 2)
    again = _contents(out)
    for name in good:
        np.testing.assert_array_equal(again[name], good[name], err_msg=name)
    assert zarr.open_group(out, mode="r").attrs["complete"] is True


MEMORY_CHILD = textwrap.dedent("""
    import json, resource, sys
    sys.path[:0] = [{tests!r}, {helpers!r}]
    import numpy as np
    import usbeam
    from usbeam import batch

    def status(field):
        for line in open("/proc/self/status"):
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024

    def vm_data():
        return status("VmData")

    probe = usbeam.LinearArray(64, 3e-4, fc=5e6)
    grid = usbeam.Grid(x=np.linspace(-4e-3, 4e-3, 8), z=np.linspace(5e-3, 20e-3, 8))
    recipe = batch.Recipe.bmode(probe, usbeam.PlaneWave(0.0), grid, n_samples=1024, fs=20e6, fc=5e6,
                                frames_per_call=4, output="db", dynamic_range=50.0)
    # warm up: the thread pool and the plan exist before the budget is set
    batch.reconstruct({small!r}, {small_out!r}, recipe, chunk_frames=16, n_workers=1, progress=False)
    budget = {budget}
    baseline = status("VmRSS")
    resource.setrlimit(resource.RLIMIT_DATA, (vm_data() + budget, resource.RLIM_INFINITY))
    report = batch.reconstruct({big!r}, {big_out!r}, recipe, chunk_frames=16, n_workers=1, progress=False)
    # VmHWM, not getrusage's ru_maxrss: the latter survives exec and would report the peak of
    # the pytest process this child was forked from
    print(json.dumps({{"chunks": report.n_chunks, "maxrss": status("VmHWM"), "baseline": baseline, "budget": budget}}))
""")


def test_recording_four_times_the_memory_budget(tmp_path, capsys):
    frame = (1, 64, 1024)
    frame_bytes = int(np.prod(frame)) * 2
    budget = 48 << 20
    n_frames = 4 * budget // frame_bytes + 16  # the recording: > 4x the budget
    rng = np.random.default_rng(24)
    with batch.RawWriter(tmp_path / "big.usr", frame) as w:  # written in blocks, never whole
        for start in range(0, n_frames, 64):
            w.write(rng.integers(-3000, 3000, (min(64, n_frames - start),) + frame, dtype=np.int16))
    batch.write_raw(tmp_path / "small.usr", rng.integers(-3000, 3000, (32,) + frame, dtype=np.int16))
    size = os.path.getsize(tmp_path / "big.usr")
    assert size > 4 * budget
    code = MEMORY_CHILD.format(tests=os.path.join(ROOT, "tests"), helpers=os.path.join(ROOT, "tests", "helpers"),
                               small=str(tmp_path / "small.usr"), small_out=str(tmp_path / "small.zarr"),
                               big=str(tmp_path / "big.usr"), big_out=str(tmp_path / "big.zarr"), budget=budget)
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    group = zarr.open_group(str(tmp_path / "big.zarr"), mode="r")
    assert group.attrs["complete"] is True and group["bmode"].shape[0] == n_frames
    with capsys.disabled():
        print(f"\n[batch memory] recording {size / 2**20:.0f} MiB, RLIMIT_DATA budget {budget / 2**20:.0f} MiB "
              f"above the warmed-up process (RSS {result['baseline'] / 2**20:.0f} MiB), peak RSS "
              f"{result['maxrss'] / 2**20:.0f} MiB")
    assert result["maxrss"] - result["baseline"] < budget
