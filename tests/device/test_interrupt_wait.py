"""Ctrl-C while the host waits for CUDA work (issue 15): on the main thread a copy of a result
out or a synchronize first polls the stream with the GIL released, running the signal handlers
every 50 ms (csrc/python/py_common.c, usbeam_py_wait_stream).  Without a GPU the polling loop is
tested on its stand-in, _core._interruptible_wait_test(seconds), which polls a "stream" that is
idle after `seconds`: SIGINT into a long wait raises KeyboardInterrupt within 0.5 s (measured
from the signal's arrival in a child process to the exception), and a short wait ends on time.  (On the
CUDA emulator the real wait is left to the blocking call: emulated work runs only when the host
synchronises, so a query never sees it finish.)"""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import usbeam
from usbeam import _core

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

CHILD = r"""
import os, signal, threading, time
from usbeam import _core

# the signal's arrival: CPython's C handler writes to the wakeup fd at once (as in
# tests/beamform/test_interrupt.py, so the parent's own scheduling does not count)
read_end, write_end = os.pipe()
os.set_blocking(write_end, False)
signal.set_wakeup_fd(write_end)
arrived = []
watcher = threading.Thread(target=lambda: os.read(read_end, 1) and arrived.append(time.monotonic()), daemon=True)
watcher.start()
print("started", flush=True)
try:
    _core._interruptible_wait_test(60.0)
    print("finished", flush=True)
except KeyboardInterrupt:
    caught = time.monotonic()
    watcher.join(5.0)
    print("interrupted", caught, arrived[0] if arrived else "nan", flush=True)
"""


def test_sigint_interrupts_a_long_wait():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(usbeam.__file__).resolve().parent.parent)]
                                        + [p for p in [env.get("PYTHONPATH")] if p])
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=env)
    try:
        assert child.stdout.readline().split() == ["started"], child.stderr.read()
        time.sleep(0.325)  # mid-way between two 50 ms checks
        signalled = time.monotonic()
        child.send_signal(signal.SIGINT)
        answer = child.stdout.readline().split()
        assert answer and answer[0] == "interrupted", (answer, child.stderr.read())
        assert child.wait(timeout=30) == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    latency = float(answer[1]) - float(answer[2])
    print(f"SIGINT -> KeyboardInterrupt during a host wait: {latency * 1e3:.1f} ms from its arrival")
    assert 0 <= latency < 0.5
    assert float(answer[2]) - signalled < 5.0  # delivery and the parent's scheduling: no hang


def test_a_short_wait_ends_on_time():
    start = time.monotonic()
    _core._interruptible_wait_test(0.2)
    elapsed = time.monotonic() - start
    assert 0.2 <= elapsed < 1.0  # the upper bound only guards against a hang on a loaded machine
    _core._interruptible_wait_test(0.0)
    with pytest.raises(ValueError, match="seconds"):
        _core._interruptible_wait_test(-1.0)
