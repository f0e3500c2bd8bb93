"""What only the CUDA live session has (usbeam.live.Session(..., backend='cuda'),
usbeam/live/cuda_session.py).  The behaviour it shares with the CPU session (order, drops,
block, bad frames, results, stats, plan swap, stop and restart) is tested once for every
backend in test_live.py.

Here: refusals without a GPU, the pipeline and device checks, the slot ring itself
(cuda/runtime/slot_ring.cu: events, pinned-slot reuse, the done query, bandwidth), results as
device arrays and the upload statistics, two frames in flight (the next frame queued before
the previous one is waited for, order and bytes under block and drop_oldest, stop),
usbeam.Pipeline(backend='cuda') with a channel map, and `usbeam serve --backend cuda`.  Tests taking the `ring` fixture run twice: on a GPU with the real ring
(marked cuda, skipped without one, run under the CUDA emulator) and on live_cuda_standin, a
host-memory stand-in of the ring that keeps its protocol and asynchrony.  The real pipeline
tests compare bit for bit with the same pipeline offline (same kernels, same launch shapes:
no tolerance).
"""
import gc
import threading
import time

import numpy as np
import pytest

import live_cuda_standin
import usbeam
from live_backends import KDLCPU, KDLCUDA, settle
from live_pipelines import CompoundBMode, OnDevice, Stamp
from usbeam import device
from usbeam.live import ChannelMap, FrameDropped, Session


@pytest.fixture(params=[pytest.param("gpu", marks=pytest.mark.cuda), "standin"])
def ring(request, monkeypatch):
    if request.param == "standin":
        live_cuda_standin.install(monkeypatch)
    yield request.param
    if request.param == "standin":
        assert not live_cuda_standin.protocol_errors, "the session broke the slot-ring protocol"


def stamped_frames(n, shape):
    """Frame k is filled with the value k + 1."""
    return [np.full(shape, k + 1, np.int32) for k in range(n)]


# ---- refusals ---------------------------------------------------------------------------

def test_cuda_session_refused_cleanly_without_gpu():
    if usbeam.cuda_available():
        pytest.skip("a GPU is present")
    with pytest.raises(usbeam.UsbeamError, match="CUDA device"):
        Session(OnDevice(Stamp((8,))), backend="cuda")


def test_pipeline_and_parameters_checked(ring):
    shapes = dict(input_shape=(4,), input_dtype=np.int32, output_shape=(4,), output_dtype=np.int32)
    with pytest.raises(TypeError, match="DeviceArrays"):
        Session(lambda x: x, backend="cuda", **shapes)

    class CpuStamp(OnDevice):
        backend = "cpu"

    with pytest.raises(ValueError, match="backend='cuda'"):
        Session(CpuStamp(Stamp((8,))), backend="cuda")
    with pytest.raises(ValueError, match="slots"):
        Session(OnDevice(Stamp((8,))), slots=1, backend="cuda")
    with pytest.raises(ValueError, match="policy"):
        Session(OnDevice(Stamp((8,))), policy="newest", backend="cuda")
    with pytest.raises(ValueError, match="device"):
        Session(OnDevice(Stamp((8,))), device=99, backend="cuda")


# ---- the ring itself (cuda/runtime/slot_ring.cu through its bindings) ---------------------

def test_cuda_bandwidth_probe_refused_cleanly_without_gpu():
    if usbeam.cuda_available():
        pytest.skip("a GPU is present")
    with pytest.raises(usbeam.UsbeamError, match="CUDA|device"):
        usbeam._core.live_cuda_h2d_bandwidth(1 << 20)
    with pytest.raises(ValueError, match="bytes"):
        usbeam._core.live_cuda_h2d_bandwidth(0)


@pytest.mark.cuda
def test_cuda_pinned_h2d_bandwidth_is_measured():
    gbps = usbeam._core.live_cuda_h2d_bandwidth(64 << 20, 10)
    assert gbps > 1.0


def test_ring_refused_cleanly_without_gpu():
    if usbeam.cuda_available():
        pytest.skip("a GPU is present")
    with pytest.raises(usbeam.UsbeamError, match="CUDA|device"):
        usbeam._core.live_cuda_ring_create(0, 3, 1 << 16)
    with pytest.raises(ValueError, match="slot_bytes"):
        usbeam._core.live_cuda_ring_create(0, 3, 0)
    assert usbeam._core.live_cuda_ring_count() == 0


@pytest.mark.cuda
def test_ring_protocol_round_trip_and_bad_arguments(rng):
    """host_slot -> upload -> acquire -> (read on the compute stream) -> release, twice around
    a 3-slot ring: each device slot holds what was written into its pinned slot; done() (the
    query the session asks before launching the next frame) refuses a slot never released
    and is True once seconds() has waited for the release; a pinned
    slot rewritten after host_slot() cannot alter the upload before it; an upload cannot
    overwrite a device slot before compute released it; the event times are positive; bad
    slots and sizes are refused naming the argument."""
    core = usbeam._core
    n_slots, nbytes = 3, 1 << 20
    settle()                                           # rings earlier tests left uncollected
    before = core.live_cuda_ring_count()
    ring = core.live_cuda_ring_create(0, n_slots, nbytes)
    assert core.live_cuda_ring_count() == before + 1
    for lap in range(2):
        patterns = [rng.integers(0, 255, nbytes, dtype=np.uint8) for _ in range(n_slots)]
        for k in range(n_slots):
            pinned = core.live_cuda_ring_host_slot(ring, k)
            assert pinned.nbytes == nbytes and pinned.flags.writeable
            pinned[:] = patterns[k]
            core.live_cuda_ring_upload(ring, k, nbytes)
        for k in range(n_slots):
            ptr, stream = core.live_cuda_ring_acquire(ring, k)
            if lap == 0:
                with pytest.raises(ValueError, match="released"):     # nothing recorded to query yet
                    core.live_cuda_ring_done(ring, k)
            slot = core.device_wrap(ptr, (nbytes,), np.uint8, True, ring, "slot")
            slot._mark_used(stream)                    # the copy back is ordered on the compute stream
            np.testing.assert_array_equal(slot.to_numpy(), patterns[k])
            core.live_cuda_ring_release(ring, k)
            assert core.live_cuda_ring_done(ring, k) in (True, False)     # a query: it never waits
            upload_s, compute_s = core.live_cuda_ring_seconds(ring, k)
            assert upload_s > 0 and compute_s >= 0
            assert core.live_cuda_ring_done(ring, k) is True               # waited for just before
    # a pinned slot handed out again waits for its upload: rewriting it then cannot change
    # what the upload delivers (under the emulator the copy is deferred until that wait)
    first, second = (rng.integers(0, 255, nbytes, dtype=np.uint8) for _ in range(2))
    core.live_cuda_ring_host_slot(ring, 0)[:] = first
    core.live_cuda_ring_upload(ring, 0, nbytes)
    core.live_cuda_ring_host_slot(ring, 0)[:] = second
    ptr, stream = core.live_cuda_ring_acquire(ring, 0)
    slot = core.device_wrap(ptr, (nbytes,), np.uint8, True, ring, "slot")
    slot._mark_used(stream)
    np.testing.assert_array_equal(slot.to_numpy(), first)
    # the next upload into a device slot waits until compute released it: a read queued on
    # the compute stream before release() sees the old frame even when the host then waits
    # for the new upload first
    seen = device.empty((nbytes,), np.uint8)
    core.device_copy(seen.ptr, ptr, nbytes, stream)
    seen._mark_used(stream)
    core.live_cuda_ring_release(ring, 0)
    core.live_cuda_ring_upload(ring, 0, nbytes)                       # uploads `second`
    core.live_cuda_ring_host_slot(ring, 0)                            # host waits for that upload
    np.testing.assert_array_equal(seen.to_numpy(), first)
    with pytest.raises(ValueError, match="slot"):
        core.live_cuda_ring_host_slot(ring, n_slots)
    with pytest.raises(ValueError, match="slot"):
        core.live_cuda_ring_done(ring, n_slots)
    with pytest.raises(ValueError, match="bytes"):
        core.live_cuda_ring_upload(ring, 0, nbytes + 1)
    with pytest.raises(ValueError, match="slots"):
        core.live_cuda_ring_create(0, 1, nbytes)
    core.live_cuda_ring_synchronize(ring)
    del ring, slot, pinned                             # the pinned views keep the ring alive too
    gc.collect()
    assert core.live_cuda_ring_count() == before


# ---- device results, upload statistics -----------------------------------------------------

def test_results_are_device_arrays_and_stats_time_the_upload(ring):
    """Callbacks and get(copy=False) receive the output ring's DeviceArray, get() a host copy
    of it; stats() adds the GPU seconds of each frame's upload and compute, and reports the
    host copy into pinned memory as copy_bytes/copy_gbps.  (Leases, eviction, latest(),
    latency and byte counts common to all backends: test_live.py.)"""
    shape = (8, 64)
    seen = []

    def callback(result):
        seen.append((type(result.image), result.image.__dlpack_device__()[0]))

    session = Session(OnDevice(Stamp(shape)), policy="block", results=4, backend="cuda", callback=callback)
    frames = stamped_frames(6, shape)
    ids = [session.push(f) for f in frames]
    assert session.wait_idle(timeout=10)
    device_type = KDLCUDA if ring == "gpu" else KDLCPU
    assert seen == [(device.DeviceArray, device_type)] * 6

    leased = session.get(ids[-1], copy=False)                     # zero copy: the output buffer
    assert isinstance(leased.image, device.DeviceArray)
    np.testing.assert_array_equal(leased.image.to_numpy(), [6, 6, 6, 6 * frames[0].size])
    copy = session.get(ids[-1])                                   # host copy
    assert isinstance(copy.image, np.ndarray)
    np.testing.assert_array_equal(copy.image, leased.image.to_numpy())
    leased.release()

    stats = session.stats()
    session.stop()
    assert {"upload", "gpu_compute"} <= set(stats["stage_s"])
    assert stats["stage_s"]["upload"] > 0 and stats["stage_s"]["gpu_compute"] > 0
    assert stats["copy_bytes"] == 6 * frames[0].nbytes and stats["copy_gbps"] > 0


# ---- two frames in flight (CUDA review, finding 14) ------------------------------------------

def log_ring_calls(monkeypatch, session_box, names=("acquire", "release", "seconds")):
    """Wrap the ring bindings the session calls (the real ones, or the stand-in's once the
    `ring` fixture installed it) so that each call is logged, in call order, as (name, frame
    id of the slot); ``session_box[0]`` is the session, looked up at call time."""
    core = usbeam._core
    log = []

    def logged(name, fn):
        def call(ring, k, *args):
            log.append((name, session_box[0]._slots[k].frame_id))
            return fn(ring, k, *args)
        return call

    for name in names:
        attr = f"live_cuda_ring_{name}"
        monkeypatch.setattr(core, attr, logged(name, getattr(core, attr)))
    return log


def max_in_flight(log):
    """Most frames launched (acquired) and not yet waited for (seconds) at once."""
    depth = most = 0
    for name, _ in log:
        depth += {"acquire": 1, "seconds": -1}.get(name, 0)
        most = max(most, depth)
    return most


@pytest.mark.parametrize("in_flight", [2, 1])
def test_next_frame_is_queued_before_the_previous_one_is_waited_for(ring, monkeypatch, in_flight):
    """The compute thread queues frame k+1's chain (acquire, pipeline, release) before it waits
    for frame k (seconds: cudaEventSynchronize on consumed[k]), so the GPU is never left idle
    while Python launches the next chain.  Frame 1's pipeline call is held until frames 2 and 3
    are uploaded, so the order of the ring calls is decided, not raced: with two frames in
    flight frame 2 is launched before frame 1 is waited for, and frame 3 once frame 1 is done.
    in_flight=1 limits the session to the old design (wait, then launch): the same log then
    shows every wait before the next launch, so this test tells the two designs apart."""
    from usbeam.live.cuda_session import CudaSession
    from usbeam.live.ring import UPLOADED

    monkeypatch.setattr(CudaSession, "_IN_FLIGHT", in_flight)
    box = [None]
    log = log_ring_calls(monkeypatch, box)
    started, gate = threading.Event(), threading.Event()

    class Held(Stamp):
        def __call__(self, frame, out=None):
            if frame.flat[0] == 1:                       # frame 1 (frames are stamped k + 1)
                started.set()
                assert gate.wait(10)
            return super().__call__(frame, out)

    shape = (8, 16)
    session = box[0] = Session(OnDevice(Held(shape)), slots=3, policy="block", results=8, backend="cuda")
    frames = stamped_frames(3, shape)
    ids = [session.push(f) for f in frames]
    assert started.wait(10)
    deadline = time.monotonic() + 10
    while sum(s.state == UPLOADED for s in session._slots) < 2 and time.monotonic() < deadline:
        time.sleep(0.001)                            # frames 2 and 3 queued for upload
    gate.set()
    assert session.wait_idle(timeout=10)
    session.stop()
    assert [session.get(i).image[0] for i in ids] == [1, 2, 3]
    if in_flight == 2:
        assert log == [("acquire", 1), ("release", 1), ("acquire", 2), ("release", 2), ("seconds", 1),
                       ("acquire", 3), ("release", 3), ("seconds", 2), ("seconds", 3)]
    else:
        assert log == [("acquire", 1), ("release", 1), ("seconds", 1), ("acquire", 2), ("release", 2),
                       ("seconds", 2), ("acquire", 3), ("release", 3), ("seconds", 3)]


@pytest.mark.parametrize("policy", ["block", "drop_oldest"])
def test_two_frames_in_flight_in_order_bit_identical(ring, monkeypatch, rng, policy):
    """Back-to-back pushes (drop_oldest: an overloaded producer) with two frames in flight:
    every processed frame comes out in push order, equal bit for bit to the same pipeline
    offline on that frame, through a callback reading the leased output buffer while the next
    frame's chain is already queued.  results=2 keeps the output ring small, so a frame in
    flight writing the buffer a callback holds would show as another frame's image.  The
    accounting holds (drop_oldest drops only frames not started) and two frames were in
    flight (the ring calls' log)."""
    box = [None]
    log = log_ring_calls(monkeypatch, box)
    shape = (2, 16, 64)
    mapped = [rng.integers(-2000, 2000, shape).astype(np.int16) for _ in range(5)]
    offline = [CompoundBMode(shape)(m) for m in mapped]
    results, drops = [], []
    session = box[0] = Session(OnDevice(CompoundBMode(shape, delay_s=0.002)), slots=3, policy=policy, results=2,
                               backend="cuda", on_drop=lambda frame_id, meta: drops.append(frame_id),
                               callback=lambda r: results.append((r.frame_id, r.meta, r.image.to_numpy())))
    n = 40 if policy == "block" else 80
    ids = {session.push(mapped[k % 5], meta=k % 5): k for k in range(n)}
    assert session.wait_idle(timeout=60)
    stats = session.stats()
    session.stop()
    assert stats["pushed"] == n == stats["processed"] + stats["dropped"] and stats["failed"] == 0
    if policy == "block":
        assert stats["dropped"] == 0
    else:
        assert stats["dropped"] > 0                      # it was overloaded
    assert sorted(drops + [frame_id for frame_id, _, _ in results]) == sorted(ids)
    assert [frame_id for frame_id, _, _ in results] == sorted(frame_id for frame_id, _, _ in results)
    for frame_id, index, image in results:
        np.testing.assert_array_equal(image, offline[index])
    assert max_in_flight(log) == 2
    assert {"launch", "gpu_compute", "upload", "compute"} <= set(stats["stage_s"])
    assert {"compound", "bmode"} <= set(stats["stage_s"])     # sampled, at least on the last frame


def test_stop_finishes_the_frames_in_flight(ring, monkeypatch):
    """stop(drain=False) while frame 1 is in flight and frame 2's chain is being queued: both
    are finished and published (their chains are queued: processed, not dropped), frame 3,
    uploaded but not launched, is dropped, nothing is left in flight, and a restart runs
    normally.  Frame 1's call waits until frames 2 and 3 are uploaded, frame 2's until stop()
    has signalled, so the order is decided, not raced."""
    from usbeam.live.ring import UPLOADED

    box = [None]
    log = log_ring_calls(monkeypatch, box)
    uploaded, started, gate = threading.Event(), threading.Event(), threading.Event()

    class Held(Stamp):
        def __call__(self, frame, out=None):
            if frame.flat[0] == 1:
                assert uploaded.wait(10)
            elif frame.flat[0] == 2:
                started.set()
                assert gate.wait(10)
            return super().__call__(frame, out)

    shape = (8, 16)
    session = box[0] = Session(OnDevice(Held(shape)), slots=3, policy="block", results=8, backend="cuda")
    frames = stamped_frames(4, shape)
    ids = [session.push(f) for f in frames[:3]]
    deadline = time.monotonic() + 10
    while sum(s.state == UPLOADED for s in session._slots) < 2 and time.monotonic() < deadline:
        time.sleep(0.001)
    uploaded.set()
    assert started.wait(10)
    stopper = threading.Thread(target=session.stop, kwargs={"drain": False})
    stopper.start()
    deadline = time.monotonic() + 10
    while session.running and time.monotonic() < deadline:   # stop() has signalled
        time.sleep(0.001)
    gate.set()
    stopper.join(10)
    assert not stopper.is_alive()
    stats = session.stats()
    assert (stats["processed"], stats["dropped"], stats["pending"]) == (2, 1, 0)
    assert [session.get(i).image[0] for i in ids[:2]] == [1, 2]
    with pytest.raises(FrameDropped):
        session.get(ids[2])
    assert log == [("acquire", 1), ("release", 1), ("acquire", 2), ("release", 2), ("seconds", 1), ("seconds", 2)]
    session.start()
    assert session.get(session.push(frames[3]), timeout=10).image[0] == 4
    session.close()


# ---- the real GPU pipeline --------------------------------------------------------------------

FC, FS, C = 5e6, 20e6, 1540.0
N_SAMPLES = 512


def small_pipeline():
    probe = usbeam.LinearArray(n_elements=32, pitch=3e-4, width=2.7e-4, fc=FC, bandwidth=0.6)
    grid = usbeam.Grid(x=np.arange(-3e-3, 3e-3 + 1e-9, 1.5e-4), z=np.arange(10e-3, 14e-3 + 1e-9, 1e-4))
    sequence = [usbeam.PlaneWave(a) for a in (-0.1, 0.0, 0.1)]
    return usbeam.Pipeline(probe, sequence, grid, fs=FS, fc=FC, c=C, n_samples=N_SAMPLES, n_frames=1,
                           backend="cuda")


def raw_frames(rng, n, n_rows, n_channels):
    """Vantage-like raw frames: column-major int16 (rows = samples x acquisitions)."""
    return [np.asfortranarray(rng.integers(-2000, 2000, (n_rows, n_channels), dtype=np.int16)) for _ in range(n)]


@pytest.mark.cuda
@pytest.mark.parametrize("policy", ["block", "drop_oldest", "overload"])
def test_pipeline_frames_in_order_bit_identical_to_offline_cuda(rng, monkeypatch, policy):
    """usbeam.Pipeline(backend='cuda') through the CUDA session with a channel map (only the 32
    used of 64 channels travel): every frame comes out, in order, equal bit for bit to the same
    pipeline run offline on the mapped frame.  'block' pushes back to back (two frames in
    flight: the real chain's plans, on their own streams, run frame k+1 queued behind frame k);
    'drop_oldest' at a sustainable rate (3x the measured processing time) and must drop
    nothing; 'overload' is drop_oldest pushed back to back: frames are dropped, never started
    ones, and each processed frame is its own offline image, with two frames in flight."""
    box = [None]
    log = log_ring_calls(monkeypatch, box)
    n_channels, n_acq = 64, 3
    n_rows = n_acq * N_SAMPLES + 40
    cmap = ChannelMap((n_rows, n_channels), rng.permutation(n_channels)[:32], [0, N_SAMPLES + 10, 2 * N_SAMPLES + 20],
                      N_SAMPLES)
    offline = small_pipeline()
    frames = raw_frames(rng, 24, n_rows, n_channels)
    expected = [offline(cmap(raw)[None]).copy() for raw in frames]
    results = []
    session = box[0] = Session(small_pipeline(), channel_map=cmap, results=64, backend="cuda",
                               policy="block" if policy == "block" else "drop_oldest",
                               callback=lambda r: results.append((r.frame_id, r.meta, r.image.to_numpy())))
    session.get(session.push(frames[0]), timeout=30)                  # warm-up: lazy plan set-up
    period = 3 * session.get(session.push(frames[1]), timeout=30).latency_s
    assert session.wait_idle(timeout=30)                               # their callbacks have returned
    results.clear()
    log.clear()
    n_frames = 2 * len(frames) if policy == "overload" else len(frames)
    for k in range(n_frames):
        session.push(frames[k % len(frames)], meta=k % len(frames))
        if policy == "drop_oldest":
            time.sleep(period)
    assert session.wait_idle(timeout=120)
    stats = session.stats()
    session.stop()
    assert stats["processed"] + stats["dropped"] == n_frames + 2 and stats["failed"] == 0
    ids = [frame_id for frame_id, _, _ in results]
    if policy == "overload":
        assert stats["dropped"] > 0 and ids == sorted(ids)
    else:
        assert stats["dropped"] == 0 and ids == list(range(3, n_frames + 3))
    for _, index, image in results:
        np.testing.assert_array_equal(image, expected[index])
    if policy != "drop_oldest":
        assert max_in_flight(log) == 2
    assert {"rf2iq", "das", "bmode", "upload", "gpu_compute", "launch"} <= set(stats["stage_s"])
    assert {frame_id for name, frame_id in log if name == "acquire"} == set(ids)   # no started frame dropped
    assert stats["upload_bytes"] == stats["processed"] * cmap.nbytes


# ---- usbeam serve --backend cuda ----------------------------------------------------------------

def test_serve_cuda_backend_refused_cleanly_without_gpu(capsys):
    if usbeam.cuda_available():
        pytest.skip("a GPU is present")
    from pathlib import Path

    from usbeam import serve

    name = f"/usbeam_pytest_cuda_{threading.get_ident()}"
    assert serve.main(["--name", name, "--backend", "cuda"]) == 2
    assert "CUDA device" in capsys.readouterr().err
    assert not Path("/dev/shm" + name).exists()                  # refused before the region is made


@pytest.fixture(scope="module")
def client_library():
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    result = subprocess.run(["make", "-s", "client"], cwd=root, capture_output=True, text=True)
    if result.returncode != 0:
        pytest.fail(f"make client failed:\n{result.stdout}\n{result.stderr}")
    return root / "build" / "libusbeam_client.so"     # explicit: `make test-emu` runs from a package copy


def test_serve_cuda_backend_round_trip(ring, client_library, rng):
    """`usbeam serve --backend cuda` (the Server in this process, the ctypes client beside it):
    Vantage frames pushed through the region come back channel-mapped (the default
    passthrough pipeline, on the device), in order and bit-identical."""
    from usbeam.live import to_rcvdata
    from usbeam.live.shm_client import ShmClient
    from usbeam.serve import Server

    n_frames, n_acq, n_el, n_ch, n_s, rows = 6, 2, 16, 32, 96, 128
    element_channel = rng.permutation(n_ch)[:n_el]
    mapped = rng.integers(-2000, 2000, (n_frames, n_acq, n_el, n_s)).astype(np.int16)
    raw = to_rcvdata(mapped, element_channel, n_ch, rows)
    params = {"frame": {"shape": list(raw.shape[1:]), "dtype": "int16", "order": "F"},
              "channel_map": {"element_channel": element_channel.tolist(),
                              "acquisition_row": [a * rows for a in range(n_acq)], "n_samples": n_s}}
    name = f"/usbeam_pytest_cuda_{ring}_{threading.get_ident()}"
    server = Server(name, policy="block", slot_bytes=1 << 20, result_bytes=1 << 18, backend="cuda",
                    log=lambda msg: None)
    thread = threading.Thread(target=server.serve, daemon=True)
    thread.start()
    try:
        client = ShmClient(name, timeout=10, library=client_library)
        client.set_params(params)
        ids = []
        for k in range(n_frames):
            frame_id = client.push(np.asfortranarray(raw[k]), timeout=5)
            image, info = client.get(frame_id, timeout=10)
            ids.append(frame_id)
            np.testing.assert_array_equal(image, mapped[k])
        assert ids == sorted(ids)
        assert server.session_stats()["backend"] == "cuda"
        client.close()
    finally:
        server.stop()
        thread.join(10)
    assert not thread.is_alive()
