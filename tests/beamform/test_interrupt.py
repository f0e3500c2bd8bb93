"""Ctrl-C during a long CPU execute (issue 15): SIGINT raises KeyboardInterrupt within 0.5 s,
measured from the signal to the exception, and the same plan then gives a correct volume.

The work runs in a child process (a signal to the test process would hit pytest itself): an
RCA volume from a 64 x 64 FORCES acquisition on two threads (the master polls the check, the
worker stops on the flag it sets), its size calibrated in the child so that the call takes
about 3 s on the machine at hand (a 24^3 volume is timed first).  The child says on a pipe that
it is about to call the plan; the parent waits a further 0.3 s, so the call is well inside the
C loop, and sends SIGINT.  The latency runs from the signal's arrival in the child (CPython's
C handler writes to signal.set_wakeup_fd at once; a thread waiting on it takes the time) to the
exception, so that the parent's own scheduling between taking the time and sending does not
count (under a load average of ~10 a parent-side figure of 1.9 s was seen once and not
reproduced; it is printed too, and bounded loosely).  The out= the call was writing must come back all NaN, which
proves the C loop stopped (a call that finished and met the signal afterwards, at a bytecode
boundary, would leave it finite).  The C loops poll the caller's check every 50 ms
(csrc/common/interrupt.h), so the latency is 50 ms plus a tile, far below the issue's 0.5 s.
"""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import usbeam
from reference import rca as ref
from tolerances import TOLERANCES

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

N_STRIPS, PITCH, N_SAMPLES, FS, C = 64, 0.2e-3, 600, 20e6, 1540.0
TARGET_SECONDS = 3.0


def volume_grid(n_voxels):
    axis = np.linspace(-5e-3, 5e-3, n_voxels)
    return usbeam.RCAGrid.volume(axis, axis, np.linspace(5e-3, 15e-3, n_voxels))

CHILD = r"""
import os, signal, sys, threading, time
import numpy as np
import usbeam

# When the signal reaches this process: CPython's C-level handler writes its number to the
# wakeup fd at once, and a thread blocked on the other end takes the time.
read_end, write_end = os.pipe()
os.set_blocking(write_end, False)
signal.set_wakeup_fd(write_end)
arrived = []
watcher = threading.Thread(target=lambda: os.read(read_end, 1) and arrived.append(time.monotonic()), daemon=True)
watcher.start()

out_path, data_path = sys.argv[1], sys.argv[2]
array = usbeam.RowColumnArray({n}, {n}, {pitch!r}, {pitch!r})


def make_plan(n_voxels):
    axis, depth = np.linspace(-5e-3, 5e-3, n_voxels), np.linspace(5e-3, 15e-3, n_voxels)
    grid = usbeam.RCAGrid.volume(axis, axis, depth)
    return usbeam.RCABeamformer(array, "forces", grid, n_samples={ns}, fs={fs!r}, c={c!r},
                                interpolation="linear", f_number=0.0)


data = np.random.default_rng(7).standard_normal((1, {n}, {n}, {ns}), dtype=np.float32)
small = make_plan(24)
small(data)  # warm-up
start = time.monotonic()
small(data)
per_voxel = (time.monotonic() - start) / 24 ** 3
n_voxels = int(min(160, max(24, round(({target} / per_voxel) ** (1 / 3)))))
plan = make_plan(n_voxels)
np.save(data_path, data)
out = np.zeros((plan.n_frames,) + plan.grid.image_shape, np.float32)
print("started", n_voxels, flush=True)
try:
    plan(data, out=out)
    print("finished", flush=True)  # the signal came too late: the parent fails the test
except KeyboardInterrupt:
    # all NaN: the C loop stopped (a finished call would have written the volume, and a signal
    # seen after it, at a bytecode boundary, would leave it finite)
    caught = time.monotonic()
    watcher.join(5.0)
    print("interrupted", caught, arrived[0] if arrived else "nan", int(np.isnan(out).all()), flush=True)
start = time.monotonic()
volume = plan(data)  # the same plan, after the interrupt
print("done", time.monotonic() - start, flush=True)
np.save(out_path, volume)
""".format(n=N_STRIPS, pitch=PITCH, ns=N_SAMPLES, fs=FS, c=C, target=TARGET_SECONDS)


def _child_env():
    env = dict(os.environ)
    # a team of two: the master asks the check, the worker stops on the flag it sets
    env["OMP_NUM_THREADS"] = "2"
    package_root = str(Path(usbeam.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join([package_root] + [p for p in [env.get("PYTHONPATH")] if p])
    return env


def test_sigint_interrupts_a_long_rca_volume_and_the_plan_stays_usable(tmp_path):
    out_path, data_path = tmp_path / "volume.npy", tmp_path / "data.npy"
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(out_path), str(data_path)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=_child_env())
    try:
        started = child.stdout.readline().split()
        assert started and started[0] == "started", child.stderr.read()
        n_voxels = int(started[1])
        time.sleep(0.3)
        signalled = time.monotonic()
        child.send_signal(signal.SIGINT)
        answer = child.stdout.readline().split()
        assert answer and answer[0] == "interrupted", (answer, child.stderr.read())
        caught, arrived, stopped_in_c = float(answer[1]), float(answer[2]), answer[3] == "1"
        latency = caught - arrived  # from the signal's arrival in the child to the exception
        sent_to_caught = caught - signalled
        done = child.stdout.readline().split()
        assert done and done[0] == "done", child.stderr.read()
        full_call = float(done[1])
        assert child.wait(timeout=60) == 0, child.stderr.read()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    print(f"SIGINT -> KeyboardInterrupt: {latency * 1e3:.1f} ms from its arrival ({sent_to_caught * 1e3:.1f} ms from "
          f"the parent's kill); the whole call ({n_voxels}^3 voxels) takes {full_call:.2f} s")
    assert stopped_in_c, "the call finished before the signal: out holds the volume, not NaN"
    # Only the upper bound is the requirement.  The arrival stamp is taken by the watcher thread,
    # which needs the GIL to call time.monotonic(): when the interrupt is prompt, the main thread
    # holds the GIL from the check to the except clause, so the stamp can land after `caught`
    # (measured once: -39 us in a fresh-clone make test).  The stamp is then late, never early.
    assert latency < 0.5, f"KeyboardInterrupt came {latency:.3f} s after SIGINT arrived"
    # the parent's clock includes its own scheduling and the delivery: bounded loosely (no hang)
    assert arrived - signalled < 5.0

    # the plan's next call is a correct volume: a sample of voxels against the float64 reference
    volume = np.load(out_path)
    data = np.load(data_path)
    assert volume.size == n_voxels ** 3 and np.isfinite(volume).all()
    points = volume_grid(n_voxels).points().reshape(-1, 3)
    pick = np.random.default_rng(3).choice(points.shape[0], 64, replace=False)
    tx, rx, _ = ref.geometry(points[pick], method="forces", n_columns=N_STRIPS, n_rows=N_STRIPS, pitch_x=PITCH,
                             pitch_y=PITCH)
    want = ref.das(data.astype(np.float64), tx, rx, np.ones_like(rx), fs=FS, c=C, interpolation="linear")[0]
    got = volume.reshape(-1)[pick]
    np.testing.assert_allclose(got, want, rtol=0, atol=TOLERANCES["rca_das_rel"] * np.abs(want).max())


def test_an_interrupt_check_that_never_fires_changes_nothing(rng):
    """The main thread of this process registers the check on every call: a call longer than
    the 50 ms poll interval runs it (no signal pending: it returns 0) and the result is the
    reference's."""
    n_strips, n_voxels = 32, 40
    array = usbeam.RowColumnArray(n_strips, n_strips, PITCH, PITCH)
    axis = np.linspace(-3e-3, 3e-3, n_voxels)
    grid = usbeam.RCAGrid.volume(axis, axis, np.linspace(5e-3, 11e-3, n_voxels))
    plan = usbeam.RCABeamformer(array, "forces", grid, n_samples=400, fs=FS, c=C, interpolation="linear",
                                f_number=0.0)
    data = rng.standard_normal(plan.data_shape, dtype=np.float32)
    volume = plan(data)
    points = grid.points().reshape(-1, 3)
    pick = rng.choice(points.shape[0], 32, replace=False)
    tx, rx, _ = ref.geometry(points[pick], method="forces", n_columns=n_strips, n_rows=n_strips, pitch_x=PITCH,
                             pitch_y=PITCH)
    want = ref.das(data.astype(np.float64), tx, rx, np.ones_like(rx), fs=FS, c=C, interpolation="linear")[0]
    np.testing.assert_allclose(volume.reshape(-1)[pick], want, rtol=0,
                               atol=TOLERANCES["rca_das_rel"] * np.abs(want).max())
