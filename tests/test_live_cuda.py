"""The CUDA live session (usbeam.live.Session(..., backend='cuda'), usbeam/live/cuda_session.py).

Each session test runs twice: on a GPU with the real ring (cuda/live.cu; marked cuda, skipped
without one) and on live_cuda_standin, a host-memory stand-in of the ring that keeps its
protocol and asynchrony (slow "DMA" on its own thread), so the session's host side runs
everywhere.  Stamped frames (frame k filled with k + 1) show torn, reordered or early-read
slots: the pipeline reads its DeviceArray input back and reports [first, min, max, sum].
The real usbeam.Pipeline(backend='cuda') tests run on a GPU only and compare bit for bit with
the same pipeline offline (same kernels, same launch shapes: no tolerance).
"""
import gc
import threading
import time

import numpy as np
import pytest

import live_cuda_standin
import usbeam
from live_pipelines import DeviceStamp
from usbeam import device
from usbeam.live import ChannelMap, FrameDropped, Session, SessionStopped

KDLCUDA = 2


@pytest.fixture(params=[pytest.param("gpu", marks=pytest.mark.cuda), "standin"])
def ring(request, monkeypatch):
    if request.param == "standin":
        live_cuda_standin.install(monkeypatch)
    return request.param


def stamped_frames(n, shape):
    """Frame k is filled with the value k + 1: any torn frame shows two values."""
    return [np.full(shape, k + 1, np.int32) for k in range(n)]


def host(image):
    return image.to_numpy() if isinstance(image, device.DeviceArray) else np.asarray(image)


# ---- refusals ---------------------------------------------------------------------------

def test_cuda_session_refused_cleanly_without_gpu():
    if usbeam.cuda_available():
        pytest.skip("a GPU is present")
    with pytest.raises(usbeam.UsbeamError, match="CUDA device"):
        Session(DeviceStamp((8,)), backend="cuda")


def test_pipeline_and_parameters_checked(ring):
    shapes = dict(input_shape=(4,), input_dtype=np.int32, output_shape=(4,), output_dtype=np.int32)
    with pytest.raises(TypeError, match="DeviceArrays"):
        Session(lambda x: x, backend="cuda", **shapes)

    class CpuStamp(DeviceStamp):
        backend = "cpu"

    with pytest.raises(ValueError, match="backend='cuda'"):
        Session(CpuStamp((8,)), backend="cuda")
    with pytest.raises(ValueError, match="slots"):
        Session(DeviceStamp((8,)), slots=1, backend="cuda")
    with pytest.raises(ValueError, match="policy"):
        Session(DeviceStamp((8,)), policy="newest", backend="cuda")
    with pytest.raises(ValueError, match="device"):
        Session(DeviceStamp((8,)), device=99, backend="cuda")


# ---- the ring itself (cuda/live.cu through its bindings) ----------------------------------

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
    a 3-slot ring: each device slot holds what was written into its pinned slot; a pinned
    slot rewritten after host_slot() cannot alter the upload before it; an upload cannot
    overwrite a device slot before compute released it; the event times are positive; bad
    slots and sizes are refused naming the argument."""
    core = usbeam._core
    n_slots, nbytes = 3, 1 << 20
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
            slot = core.device_wrap(ptr, (nbytes,), np.uint8, True, ring, "slot")
            slot._mark_used(stream)                    # the copy back is ordered on the compute stream
            np.testing.assert_array_equal(slot.to_numpy(), patterns[k])
            core.live_cuda_ring_release(ring, k)
            upload_s, compute_s = core.live_cuda_ring_seconds(ring, k)
            assert upload_s > 0 and compute_s >= 0
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
    with pytest.raises(ValueError, match="bytes"):
        core.live_cuda_ring_upload(ring, 0, nbytes + 1)
    with pytest.raises(ValueError, match="slots"):
        core.live_cuda_ring_create(0, 1, nbytes)
    core.live_cuda_ring_synchronize(ring)
    del ring, slot, pinned                             # the pinned views keep the ring alive too
    gc.collect()
    assert core.live_cuda_ring_count() == before


# ---- order, overload, policies ----------------------------------------------------------

def test_every_frame_in_order_and_intact(ring):
    shape = (32, 128)
    results = []
    session = Session(DeviceStamp(shape), slots=3, policy="block", results=8, backend="cuda",
                      callback=lambda r: results.append((r.frame_id, r.meta, host(r.image))))
    assert session.backend == "cuda"
    frames = stamped_frames(60, shape)
    ids = [session.push(f, meta=k) for k, f in enumerate(frames)]
    assert session.wait_idle(timeout=30)
    stats = session.stats()
    session.stop()
    assert ids == list(range(1, 61))
    assert stats["pushed"] == stats["processed"] == 60 and stats["dropped"] == 0
    assert [r[0] for r in results] == ids
    for frame_id, k, (first, lo, hi, checksum) in results:
        assert first == lo == hi == k + 1
        assert checksum == (k + 1) * frames[k].size % 2 ** 31


def test_drop_oldest_accounting_and_no_torn_slot(ring):
    shape = (64, 256)
    results, drops = [], []
    session = Session(DeviceStamp(shape, delay_s=0.002), slots=3, policy="drop_oldest", results=4,
                      backend="cuda", callback=lambda r: results.append((r.frame_id, r.meta, host(r.image))),
                      on_drop=lambda frame_id, meta: drops.append(frame_id))
    frames = stamped_frames(200, shape)
    ids = {}

    def produce(offset):  # two producers: push() is thread-safe
        for k in range(offset, 200, 2):
            ids[session.push(frames[k], meta=k)] = k

    producers = [threading.Thread(target=produce, args=(i,)) for i in range(2)]
    for t in producers:
        t.start()
    for t in producers:
        t.join(30)
    assert session.wait_idle(timeout=30)
    stats = session.stats()
    session.stop()
    assert stats["pushed"] == 200
    assert stats["dropped"] > 0 and stats["processed"] > 0                 # it was overloaded
    assert stats["dropped"] + stats["processed"] == stats["pushed"]
    assert sorted(drops + [r[0] for r in results]) == sorted(ids)
    for frame_id, k, (first, lo, hi, checksum) in results:
        assert ids[frame_id] == k
        assert first == lo == hi == k + 1                                   # not partly overwritten
        assert checksum == (k + 1) * frames[k].size % 2 ** 31
    processed_ids = [r[0] for r in results]
    assert processed_ids == sorted(processed_ids)                           # still in order
    with pytest.raises(FrameDropped):
        session.get(drops[0])


def test_block_policy_waits_and_drops_nothing(ring):
    shape = (32, 32)
    session = Session(DeviceStamp(shape, delay_s=0.003), slots=2, policy="block", results=64, backend="cuda")
    frames = stamped_frames(40, shape)
    t0 = time.perf_counter()
    ids = [session.push(f, meta=k) for k, f in enumerate(frames)]
    push_time = time.perf_counter() - t0
    assert session.wait_idle(timeout=30)
    stats = session.stats()
    assert stats["dropped"] == 0 and stats["processed"] == 40
    assert push_time > 30 * 0.003                                           # the producer waited
    for frame_id, k in zip(ids[-8:], range(32, 40)):
        result = session.get(frame_id, timeout=1)
        assert isinstance(result.image, np.ndarray) and result.image[0] == k + 1
    slow = Session(DeviceStamp(shape, delay_s=0.2), slots=2, policy="block", backend="cuda")
    slow.push(frames[0]), slow.push(frames[1]), slow.push(frames[2])
    with pytest.raises(TimeoutError, match="no free slot"):
        slow.push(frames[3], timeout=0.01)
    slow.stop(drain=False)
    session.stop()


# ---- bad input, results, stats -----------------------------------------------------------

def test_bad_frames_get_clear_errors_and_session_keeps_running(ring):
    shape = (16, 16)
    session = Session(DeviceStamp(shape), backend="cuda")
    with pytest.raises(TypeError, match="frame"):
        session.push(np.zeros(shape, np.float32))
    with pytest.raises(ValueError, match="frame"):
        session.push(np.zeros((16, 15), np.int32))
    frame_id = session.push(np.full(shape, 5, np.int32))
    assert list(session.get(frame_id, timeout=10).image) == [5, 5, 5, 5 * 256]
    stats = session.stats()
    session.stop()
    assert stats["rejected"] == 2 and stats["processed"] == 1


def test_results_device_arrays_host_copies_latest_and_stats(ring):
    shape = (8, 64)
    seen = []

    def callback(result):
        seen.append((type(result.image), result.image.__dlpack_device__()[0]))

    session = Session(DeviceStamp(shape), policy="block", results=4, backend="cuda", callback=callback)
    frames = stamped_frames(6, shape)
    ids = [session.push(f) for f in frames]
    assert session.wait_idle(timeout=10)
    device_type = KDLCUDA if ring == "gpu" else 1
    assert seen == [(device.DeviceArray, device_type)] * 6

    leased = session.get(ids[-1], copy=False)                     # zero copy: the output buffer
    assert isinstance(leased.image, device.DeviceArray)
    assert leased.__dlpack_device__() == (device_type, 0)
    if ring == "gpu":
        assert leased.image.readonly
        assert "data" in leased.__cuda_array_interface__
    np.testing.assert_array_equal(leased.image.to_numpy(), [6, 6, 6, 6 * frames[0].size])
    copy = session.get(ids[-1])                                   # host copy
    assert isinstance(copy.image, np.ndarray)
    np.testing.assert_array_equal(copy.image, leased.image.to_numpy())
    leased.release()
    latest = session.latest()
    assert latest.frame_id == ids[-1] and isinstance(latest.image, np.ndarray)
    with pytest.raises(KeyError):                                 # evicted from the 4-result ring
        session.get(ids[0])

    stats = session.stats()
    session.stop()
    assert stats["backend"] == "cuda" and stats["processed"] == 6
    assert {"copy", "upload", "gpu_compute", "stamp"} <= set(stats["stage_s"])
    assert stats["stage_s"]["upload"] > 0 and stats["stage_s"]["gpu_compute"] > 0
    assert stats["upload_bytes"] == 6 * frames[0].nbytes and stats["upload_gbps"] > 0
    assert stats["copy_bytes"] == 6 * frames[0].nbytes and stats["copy_gbps"] > 0
    assert stats["latency_s"]["count"] == 6 and stats["latency_s"]["p99"] > 0


def test_update_swaps_the_plan_between_frames(ring):
    shape = (8, 8)

    class Doubled(DeviceStamp):
        def __call__(self, frame, out):
            super().__call__(frame, out)
            out.copy_from_host(out.to_numpy() * 2)
            return out

    session = Session(DeviceStamp(shape), policy="block", results=64, backend="cuda")
    first = [session.push(f) for f in stamped_frames(5, shape)]
    assert session.update(Doubled(shape)) == 2
    second = [session.push(f) for f in stamped_frames(5, shape)]
    assert session.wait_idle(timeout=10)
    for k, frame_id in enumerate(first):
        result = session.get(frame_id)
        assert result.generation == 1 and result.image[0] == k + 1
    for k, frame_id in enumerate(second):
        result = session.get(frame_id)
        assert result.generation == 2 and result.image[0] == 2 * (k + 1)
    with pytest.raises(ValueError, match="input"):
        session.update(DeviceStamp((8, 9)))
    session.stop()


# ---- lifecycle --------------------------------------------------------------------------------

def test_stop_during_push_neither_hangs_nor_crashes(ring):
    shape = (256, 256)
    session = Session(DeviceStamp(shape, delay_s=0.01), slots=2, policy="block", backend="cuda")
    frame = stamped_frames(1, shape)[0]
    outcomes = []

    def produce():
        try:
            while True:
                session.push(frame)
        except SessionStopped:
            outcomes.append("stopped")
        except Exception as exc:  # anything else is a bug
            outcomes.append(exc)

    producers = [threading.Thread(target=produce) for _ in range(4)]
    for t in producers:
        t.start()
    time.sleep(0.1)
    t0 = time.perf_counter()
    session.stop(drain=False)
    for t in producers:
        t.join(5)
    assert time.perf_counter() - t0 < 5
    assert not any(t.is_alive() for t in producers)
    assert outcomes == ["stopped"] * 4
    stats = session.stats()
    assert stats["pushed"] == stats["processed"] + stats["dropped"] + stats["failed"]
    assert stats["pending"] == 0


def test_clean_start_stop_restart_close_without_leaks(ring):
    gc.collect()
    threads_before = threading.active_count()
    rings_before = usbeam._core.live_cuda_ring_count()
    session = Session(DeviceStamp((8,)), policy="block", backend="cuda")
    assert usbeam._core.live_cuda_ring_count() == rings_before + 1
    standin_threads = 1 if ring == "standin" else 0                  # the stand-in's "upload stream"
    assert threading.active_count() == threads_before + 2 + standin_threads   # compute + upload
    frame_id = session.push(np.arange(8, dtype=np.int32))
    session.stop()
    assert threading.active_count() == threads_before + standin_threads
    assert list(session.get(frame_id).image) == [0, 0, 7, 28]                  # drained before stopping
    with pytest.raises(SessionStopped):
        session.push(np.zeros(8, np.int32))
    session.stop()                                                             # idempotent
    for _ in range(3):
        session.start()
        frame_id = session.push(np.full(8, 7, np.int32))
        assert session.get(frame_id, timeout=5).image[0] == 7
        session.stop()
    session.close()                                                            # frees the ring
    gc.collect()
    assert usbeam._core.live_cuda_ring_count() == rings_before
    session.start()                                                            # allocates it again
    frame_id = session.push(np.full(8, 3, np.int32))
    assert session.get(frame_id, timeout=5).image[0] == 3
    session.close()
    del session
    gc.collect()
    time.sleep(0.05)
    assert usbeam._core.live_cuda_ring_count() == rings_before
    assert threading.active_count() == threads_before


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
@pytest.mark.parametrize("policy", ["block", "drop_oldest"])
def test_pipeline_frames_in_order_bit_identical_to_offline_cuda(rng, policy):
    """usbeam.Pipeline(backend='cuda') through the CUDA session with a channel map (only the 32
    used of 64 channels travel): every frame comes out, in order, equal bit for bit to the same
    pipeline run offline on the mapped frame.  'block' pushes back to back; 'drop_oldest' at
    a sustainable rate (3x the measured processing time) and must drop nothing."""
    n_channels, n_acq = 64, 3
    n_rows = n_acq * N_SAMPLES + 40
    cmap = ChannelMap((n_rows, n_channels), rng.permutation(n_channels)[:32], [0, N_SAMPLES + 10, 2 * N_SAMPLES + 20],
                      N_SAMPLES)
    offline = small_pipeline()
    frames = raw_frames(rng, 24, n_rows, n_channels)
    expected = [offline(cmap(raw)[None]).copy() for raw in frames]
    results = []
    session = Session(small_pipeline(), channel_map=cmap, policy=policy, results=64, backend="cuda",
                      callback=lambda r: results.append((r.frame_id, r.image.to_numpy())))
    session.get(session.push(frames[0]), timeout=30)                  # warm-up: lazy plan set-up
    period = 3 * session.get(session.push(frames[1]), timeout=30).latency_s
    assert session.wait_idle(timeout=30)                               # their callbacks have returned
    results.clear()
    for raw in frames:
        session.push(raw)
        if policy == "drop_oldest":
            time.sleep(period)
    assert session.wait_idle(timeout=60)
    stats = session.stats()
    session.stop()
    assert stats["dropped"] == 0 and stats["processed"] == len(frames) + 2
    assert [frame_id for frame_id, _ in results] == list(range(3, len(frames) + 3))
    for (_, image), want in zip(results, expected):
        np.testing.assert_array_equal(image, want)
    assert {"rf2iq", "das", "bmode", "upload", "gpu_compute"} <= set(stats["stage_s"])
    assert stats["upload_bytes"] == (len(frames) + 2) * cmap.nbytes


@pytest.mark.cuda
def test_real_pipeline_frames_bit_identical_to_offline_cuda():
    """PWI_disk frames through the CUDA session, equal bit for bit to the CUDA pipeline offline."""
    from conftest import shared_dataset

    rec = usbeam.io.load_must(shared_dataset("PWI_disk.mat"))
    rf = np.ascontiguousarray(rec.data)                                    # (32, 128, 334) int16
    grid = usbeam.Grid(x=np.linspace(-12.5e-3, 12.5e-3, 101), z=np.linspace(10e-3, 35e-3, 101))

    def make():
        return usbeam.Pipeline(rec.probe, rec.sequence, grid, fs=rec.fs, fc=rec.fc, c=rec.c, t0=rec.t0,
                               n_samples=rf.shape[-1], n_frames=1, rf_dtype=np.int16, bandwidth=rec.bandwidth,
                               f_number="auto", interpolation="linear", dynamic_range=30.0, backend="cuda")

    offline = make()
    expected = [offline(frame[None, None]).copy() for frame in rf]
    results = []
    session = Session(make(), policy="block", results=64, backend="cuda",
                      callback=lambda r: results.append((r.frame_id, r.image.to_numpy())))
    for frame in rf:
        session.push(frame[None, None])
    assert session.wait_idle(timeout=60)
    stats = session.stats()
    session.stop()
    assert stats["pushed"] == stats["processed"] == rf.shape[0] and stats["dropped"] == 0
    assert [frame_id for frame_id, _ in results] == list(range(1, rf.shape[0] + 1))
    for (_, image), want in zip(results, expected):
        np.testing.assert_array_equal(image, want)


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

    root = Path(__file__).resolve().parent.parent
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
