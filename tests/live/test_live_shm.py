"""Out-of-process sessions: `python -m usbeam serve` and the C client library
(build/libusbeam_client.so, the one MATLAB loads) driven through ctypes with Vantage-laid-out
frames.  Checks: frames round-trip in order and bit-identical to the offline pipeline;
parameter changes between frames; wrong-size frames rejected with a message while serving
goes on; drop_oldest overload accounting with intact outputs; a client killed mid-push
leaves the server serving the next client and its frame's waiter learns ABANDONED at once;
a live client slower than --write-timeout-ms keeps its slot quarantined, so its late
write never reaches another client's frame; each frame is processed with the parameters
of its own generation (older or newer than the server's current ones) and refused when
that generation left the ring; scalar index lists (MATLAB's jsonencode of one element)
are one-element lists; a second server refuses the region; a stale region needs
--replace-stale; a layout-version mismatch is refused with a message."""
import ctypes
import mmap
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import usbeam
from live_pipelines import CompoundBMode
from usbeam.live import FrameDropped, to_rcvdata
from usbeam.live.shm_client import FrameAbandoned, ServerGone, ShmClient, load_library
from usbeam.serve import normalize_params

ROOT = Path(__file__).resolve().parents[2]
PIPELINE = str(ROOT / "tests" / "helpers" / "live_pipelines.py") + ":make_pipeline"


@pytest.fixture(scope="module")
def client_library():
    result = subprocess.run(["make", "-s", "client"], cwd=ROOT, capture_output=True, text=True)
    if result.returncode != 0:
        pytest.fail(f"make client failed:\n{result.stdout}\n{result.stderr}")
    path = ROOT / "build" / "libusbeam_client.so"
    assert path.exists()
    return path


_counter = [0]


def start_server(*args, name=None, pipeline=PIPELINE):
    _counter[0] += 1
    name = name or f"/usbeam_pytest_{os.getpid()}_{_counter[0]}"
    cmd = [sys.executable, "-m", "usbeam", "serve", "--name", name, "--slot-bytes", str(1 << 20),
           "--result-bytes", str(1 << 18), "--pipeline", pipeline, *args]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return name, proc


def stop_server(proc, name):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if Path("/dev/shm" + name).exists():
        os.unlink("/dev/shm" + name)


@pytest.fixture
def server(client_library):
    name, proc = start_server("--policy", "block")
    yield name, proc
    stop_server(proc, name)


def vantage_frames(rng, n_frames=5, n_acq=2, n_el=16, n_ch=32, n_s=96, rows=128):
    element_channel = rng.permutation(n_ch)[:n_el]
    mapped = rng.integers(-2000, 2000, (n_frames, n_acq, n_el, n_s)).astype(np.int16)
    raw = to_rcvdata(mapped, element_channel, n_ch, rows)               # column-major frames
    params = {"frame": {"shape": list(raw.shape[1:]), "dtype": "int16", "order": "F"},
              "channel_map": {"element_channel": element_channel.tolist(),
                              "acquisition_row": [a * rows for a in range(n_acq)], "n_samples": n_s}}
    return mapped, raw, params


def test_round_trip_in_order_bit_identical_and_parameter_change(server, rng):
    name, _ = server
    mapped, raw, params = vantage_frames(rng)
    client = ShmClient(name, timeout=10)
    client.set_params(params)
    offline = CompoundBMode(mapped.shape[1:])
    ids = []
    for k in range(len(raw)):
        frame_id = client.push(np.asfortranarray(raw[k]))           # the bytes MATLAB sends
        image, info = client.get(frame_id, timeout=5)
        ids.append(frame_id)
        assert image.dtype == np.uint8 and image.shape == offline.output_shape
        np.testing.assert_array_equal(image, offline(mapped[k]))
        assert info["latency_s"] > 0
    assert ids == sorted(ids)
    # new parameters between frames: the server builds the plan aside and swaps it in
    client.set_params(dict(params, gain=0.25))
    frame_id = client.push(np.asfortranarray(raw[0]))
    image, _ = client.get(frame_id, timeout=5)
    np.testing.assert_array_equal(image, CompoundBMode(mapped.shape[1:], gain=0.25)(mapped[0]))
    latest, info = client.latest()
    assert info["frame_id"] == frame_id
    client.close()


def test_rejected_frames_and_missing_parameters(server, rng):
    name, _ = server
    mapped, raw, params = vantage_frames(rng, n_frames=1)
    client = ShmClient(name, timeout=10)
    frame_id = client.push(np.asfortranarray(raw[0]))
    with pytest.raises(ValueError, match="no parameters set"):
        client.get(frame_id, timeout=5)
    client.set_params(params)
    frame_id = client.push(np.asfortranarray(raw[0, :100]))
    with pytest.raises(ValueError, match="frame has 6400 bytes"):
        client.get(frame_id, timeout=5)
    frame_id = client.push(np.asfortranarray(raw[0]))                 # still serving
    np.testing.assert_array_equal(client.get(frame_id, timeout=5)[0], CompoundBMode(mapped.shape[1:])(mapped[0]))
    client.set_params({"frame": {"shape": [0]}})
    frame_id = client.push(np.asfortranarray(raw[0]))
    with pytest.raises(ValueError, match="parameters .* invalid"):
        client.get(frame_id, timeout=5)
    with pytest.raises(ValueError, match="exceeds the slot capacity"):
        client.push(np.zeros(1 << 20, np.int16))
    client.close()


def test_drop_oldest_overload_accounting(client_library, rng):
    name, proc = start_server("--policy", "drop_oldest", "--slots", "3", "--results", "64")
    try:
        mapped, raw, params = vantage_frames(rng, n_frames=4)
        client = ShmClient(name, timeout=10)
        client.set_params(dict(params, delay_s=0.01))                 # compute 10 ms per frame
        ids = [client.push(np.asfortranarray(raw[k % 4])) for k in range(40)]   # burst, far faster
        offline = CompoundBMode(mapped.shape[1:])
        outcomes = []
        for k, frame_id in enumerate(ids):
            try:
                image, _ = client.get(frame_id, timeout=5)
                np.testing.assert_array_equal(image, offline(mapped[k % 4]))   # never a torn slot
                outcomes.append("ok")
            except FrameDropped:
                outcomes.append("dropped")
        info = client.info()
        assert outcomes.count("dropped") > 0 and outcomes.count("ok") > 0
        assert info["pushed"] == 40 == info["processed"] + info["dropped"]
        assert info["dropped"] == outcomes.count("dropped")
        client.close()
    finally:
        stop_server(proc, name)


KILLER = r"""
import ctypes, os, signal, sys
lib = ctypes.CDLL(sys.argv[1])
lib.usbeam_client_open.restype = ctypes.c_void_p
lib.usbeam_client_open.argtypes = [ctypes.c_char_p, ctypes.c_int]
lib.usbeam_client_push_begin.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_void_p),
                                         ctypes.POINTER(ctypes.c_ulonglong), ctypes.POINTER(ctypes.c_ulonglong)]
client = lib.usbeam_client_open(sys.argv[2].encode(), 5000)
data, cap, fid = ctypes.c_void_p(), ctypes.c_ulonglong(), ctypes.c_ulonglong()
assert lib.usbeam_client_push_begin(client, 1000, ctypes.byref(data), ctypes.byref(cap), ctypes.byref(fid)) == 0
ctypes.memset(data, 0x7f, 1000)        # half a frame...
print(fid.value, flush=True)
os.kill(os.getpid(), signal.SIGKILL)   # ...and the client dies mid-push
"""


def test_client_killed_mid_push_leaves_server_serving(server, client_library, rng):
    name, proc = server
    killer = subprocess.run([sys.executable, "-c", KILLER, str(client_library), name], capture_output=True,
                            text=True)
    assert killer.returncode == -signal.SIGKILL
    dead_id = int(killer.stdout)
    mapped, raw, params = vantage_frames(rng, n_frames=2)
    client = ShmClient(name, timeout=10)
    t0 = time.monotonic()
    with pytest.raises(FrameAbandoned, match="abandoned mid-push: writer pid [0-9]+ died"):      # at once, not after the timeout
        client.get(dead_id, timeout=20)
    assert time.monotonic() - t0 < 5
    client.set_params(params)
    for k in range(2):
        frame_id = client.push(np.asfortranarray(raw[k]), timeout=5)
        np.testing.assert_array_equal(client.get(frame_id, timeout=5)[0], CompoundBMode(mapped.shape[1:])(mapped[k]))
    deadline = time.monotonic() + 5
    while client.info()["abandoned"] < 1 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert client.info()["abandoned"] == 1
    assert proc.poll() is None
    client.close()


def test_second_server_refused_and_stale_region(client_library):
    name, first = start_server()
    try:
        ShmClient(name, timeout=10).close()                          # first server is up
        second = subprocess.run([sys.executable, "-m", "usbeam", "serve", "--name", name], cwd=ROOT,
                                capture_output=True, text=True, timeout=60)
        assert second.returncode == 2
        assert f"already served by a running usbeam server (pid {first.pid})" in second.stderr
        client = ShmClient(name, timeout=10)
        first.kill()                                                 # dies without cleaning up
        first.wait()
        with pytest.raises(ServerGone):
            client.push(np.zeros(4, np.int16))
        client.close()
        stale = subprocess.run([sys.executable, "-m", "usbeam", "serve", "--name", name], cwd=ROOT,
                               capture_output=True, text=True, timeout=60)
        assert stale.returncode == 2 and "--replace-stale" in stale.stderr
        name2, replacement = start_server("--replace-stale", name=name)
        try:
            ShmClient(name, timeout=10).close()
        finally:
            stop_server(replacement, name2)
    finally:
        stop_server(first, name)


def test_layout_version_mismatch_refused(server):
    name, _ = server
    ShmClient(name, timeout=10).close()
    with open("/dev/shm" + name, "r+b") as f, mmap.mmap(f.fileno(), 4096) as header:
        version = header[8:12]
        header[8:12] = (99).to_bytes(4, "little")
        try:
            with pytest.raises(usbeam.UsbeamError, match="layout version 99 but this client speaks version 2"):
                ShmClient(name, timeout=0)
        finally:
            header[8:12] = version
    ShmClient(name, timeout=1).close()
    assert ctypes.sizeof(ctypes.c_int) == 4


def test_plain_c_client_example(client_library, tmp_path):
    exe = tmp_path / "shm_client"
    build = subprocess.run(["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-I", str(ROOT / "csrc" / "shm"),
                            str(ROOT / "examples" / "shm_client.c"), str(client_library), f"-Wl,-rpath,{client_library.parent}",
                            "-o", str(exe)], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    name, proc = start_server("--policy", "block", pipeline="usbeam.serve:passthrough")
    try:
        run = subprocess.run([str(exe), name, "12"], capture_output=True, text=True, timeout=60)
        assert run.returncode == 0, run.stdout + run.stderr
        assert "12 frames, 0 wrong samples" in run.stdout
    finally:
        stop_server(proc, name)


def test_region_too_large_for_shared_memory_is_refused(client_library):
    fs = os.statvfs("/dev/shm")
    too_big = fs.f_blocks * fs.f_frsize + (1 << 30)   # beyond the whole tmpfs: refused up front
    name = f"/usbeam_pytest_big_{os.getpid()}"
    with pytest.raises(MemoryError, match="does not fit in shared memory"):
        usbeam._core.shm_server_create(name, 1, 1, too_big, 4096)
    assert not Path("/dev/shm" + name).exists()


def _push_begin(lib, client):
    """Reserve a slot (zero-copy push): (data pointer, frame id)."""
    data, cap, fid = ctypes.c_void_p(), ctypes.c_ulonglong(), ctypes.c_ulonglong()
    assert lib.usbeam_client_push_begin(client._handle, 1000, ctypes.byref(data), ctypes.byref(cap),
                                        ctypes.byref(fid)) == 0
    return data, fid.value


def test_slow_live_writer_never_corrupts_the_next_clients_frame(client_library, rng):
    name, proc = start_server("--policy", "block", "--slots", "1", "--write-timeout-ms", "200",
                              pipeline="usbeam.serve:passthrough")
    try:
        lib = load_library(client_library)
        a, b = ShmClient(name, timeout=10), ShmClient(name, timeout=10)
        b.set_params({"frame": {"shape": [1024], "dtype": "int16", "order": "C"}})
        data_a, fid_a = _push_begin(lib, a)                   # A is alive but slow
        time.sleep(0.5)
        t0 = time.monotonic()
        with pytest.raises(FrameAbandoned, match="write timeout"):
            a.get(fid_a, timeout=20)                          # the waiter learns at once
        assert time.monotonic() - t0 < 5
        frame_b = rng.integers(-30000, 30000, 1024).astype(np.int16)
        with pytest.raises(TimeoutError):                     # the quarantined slot is not handed out
            b.push(frame_b, timeout=0.3)
        ctypes.memset(data_a, 0x55, 2048)                     # A's late write: into its own slot only
        assert lib.usbeam_client_push_commit(a._handle, fid_a, 2048) == 11      # ABANDONED, refused
        assert b"write timeout" in lib.usbeam_client_last_error()
        fid_b = b.push(frame_b, timeout=5)                    # now B gets the slot
        image, _ = b.get(fid_b, timeout=10)
        np.testing.assert_array_equal(image, frame_b)
        info = b.info()
        assert (info["abandoned"], info["stalled"], info["discarded"], info["processed"]) == (1, 1, 1, 1)
        a.close()
        b.close()
    finally:
        stop_server(proc, name)


def test_frames_use_their_own_parameter_generation(client_library, rng):
    name, proc = start_server("--policy", "block", pipeline="usbeam.serve:passthrough")
    try:
        lib = load_library(client_library)
        c = ShmClient(name, timeout=10)

        def spec(rows):
            return {"frame": {"shape": [rows, 8], "dtype": "int16", "order": "F"}}

        def frame(rows):
            return np.asfortranarray(rng.integers(-2000, 2000, (rows, 8)).astype(np.int16))

        c.set_params(spec(64))                                            # generation 1
        f1 = frame(64)
        np.testing.assert_array_equal(c.get(c.push(f1), timeout=10)[0], f1)
        c.set_params(spec(128))                                           # generation 2
        data, fid_a = _push_begin(lib, c)                                 # A belongs to generation 2
        c.set_params(spec(32))                                            # generation 3, before A is taken
        fb = frame(32)
        fid_b = c.push(fb)
        np.testing.assert_array_equal(c.get(fid_b, timeout=10)[0], fb)    # server now at generation 3
        fa = frame(128)
        ctypes.memmove(data, fa.ctypes.data, fa.nbytes)
        assert lib.usbeam_client_push_commit(c._handle, fid_a, fa.nbytes) == 0
        image, _ = c.get(fid_a, timeout=10)                               # judged by generation 2
        assert image.shape == (128, 8)
        np.testing.assert_array_equal(image, fa)
        # a generation overwritten in the ring (8 kept) is refused, not replaced by a newer one
        data, fid_old = _push_begin(lib, c)                               # generation 3
        for rows in range(40, 48):                                        # generations 4..11
            c.set_params(spec(rows))
        ctypes.memmove(data, fb.ctypes.data, fb.nbytes)
        assert lib.usbeam_client_push_commit(c._handle, fid_old, fb.nbytes) == 0
        with pytest.raises(ValueError, match="generation 3 are no longer available"):
            c.get(fid_old, timeout=10)
        f11 = frame(47)
        np.testing.assert_array_equal(c.get(c.push(f11), timeout=10)[0], f11)   # serving goes on
        c.close()
    finally:
        stop_server(proc, name)


def test_scalar_index_lists_are_one_element_lists(client_library, rng):
    raw = np.asfortranarray(rng.integers(-2000, 2000, (256, 8)).astype(np.int16))
    params = {"frame": {"shape": [256, 8], "dtype": "int16", "order": "F"},
              "channel_map": {"element_channel": [3, 1, 2], "acquisition_row": 0, "n_samples": 100}}
    normalized = normalize_params(params)
    assert normalized["channel_map"]["acquisition_row"] == [0]
    assert params["channel_map"]["acquisition_row"] == 0                 # the caller's dict is untouched
    name, proc = start_server("--policy", "block", pipeline="usbeam.serve:passthrough")
    try:
        c = ShmClient(name, timeout=10)
        c.set_params(params)                                             # what jsonencode([0]) sends
        image, _ = c.get(c.push(raw), timeout=10)
        np.testing.assert_array_equal(image, raw[0:100, [3, 1, 2]].T[None])
        c.set_params({"frame": {"shape": [256, 8], "dtype": "int16", "order": "F"},
                      "channel_map": {"element_channel": 4, "acquisition_row": [0, 128], "n_samples": 100}})
        image, _ = c.get(c.push(raw), timeout=10)
        np.testing.assert_array_equal(image, np.stack([raw[a:a + 100, [4]].T for a in (0, 128)]))
        c.close()
    finally:
        stop_server(proc, name)
