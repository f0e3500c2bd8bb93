"""In-process live sessions (usbeam.live.Session): channel mapping against the reference,
then one body per behaviour run on every session backend (the `live` fixture:
tests/helpers/live_backends.py: 'cpu', 'cuda-standin', and 'cuda' marked cuda, which runs on a GPU
and under the CUDA emulator): in-order bit-identical output against the offline pipeline,
overload with drop_oldest (accounting, no torn slot) and block (no drop), bad frames, pipeline
failures, result access and stats, plan swap without stop, stop/restart/close/stop-during-push;
and CPU-only: parameters of the CPU session, the simulated scanner, a bounded 10,000-frame
soak.  What only the CUDA backend has (the ring's events, device results, serve --backend
cuda) is in test_live_cuda.py."""
import gc
import os
import threading
import time
import tracemalloc

import numpy as np
import pytest

import live_cuda_standin
import usbeam
from live_backends import BACKENDS, LiveBackend, settle, worker_threads
from live_pipelines import CompoundBMode, Stamp
from reference import live as ref
from usbeam.live import (ChannelMap, FrameDropped, FrameFailed, Session, SessionStopped, SimulatedScanner,
                         simulate_plane_wave_rf, to_rcvdata)


@pytest.fixture(params=BACKENDS)
def live(request, monkeypatch):
    """The session backend a shared test runs on (see live_backends)."""
    if request.param == "cuda-standin":
        live_cuda_standin.install(monkeypatch)
    yield LiveBackend(request.param)
    if request.param == "cuda-standin":
        assert not live_cuda_standin.protocol_errors, "the session broke the slot-ring protocol"


def vantage_setup(rng, n_frames=6, n_acq=2, n_el=16, n_ch=24, n_s=64, rows_per_acq=80):
    """Mapped ground-truth frames, their Vantage RcvData layout and the channel map."""
    element_channel = rng.permutation(n_ch)[:n_el]
    mapped = rng.integers(-2000, 2000, (n_frames, n_acq, n_el, n_s)).astype(np.int16)
    raw = to_rcvdata(mapped, element_channel, n_ch, rows_per_acq)
    cmap = ChannelMap(raw.shape[1:], element_channel, np.arange(n_acq) * rows_per_acq, n_s)
    return mapped, raw, cmap


# ---- channel mapping ------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.int16, np.float32, np.float64])
@pytest.mark.parametrize("order", ["F", "C"])
def test_channel_map_matches_reference(rng, dtype, order):
    raw = np.asarray(rng.integers(-30000, 30000, (150, 12)), dtype=dtype, order=order)
    channels, rows = rng.permutation(12)[:7], np.array([0, 37, 90])
    cmap = ChannelMap(raw.shape, channels, rows, 55, dtype)
    out = np.full(cmap.output_shape, 123, dtype)  # poison: every element must be written
    got = cmap(raw, out=out)
    assert got is out
    np.testing.assert_array_equal(got, ref.gather(raw, channels, rows, 55))
    # a strided (non-contiguous) view is read through its strides, without a copy
    big = np.asarray(rng.integers(-9, 9, (300, 24)), dtype=dtype)
    view = big[::2, ::2]
    np.testing.assert_array_equal(cmap(view), ref.gather(view, channels, rows, 55))


def test_channel_map_rejects_bad_tables_and_frames(rng):
    with pytest.raises(ValueError, match="element_channel"):
        ChannelMap((100, 8), [0, 8], [0], 10)
    with pytest.raises(ValueError, match="acquisition_row"):
        ChannelMap((100, 8), [0, 1], [95], 10)
    with pytest.raises(ValueError, match="n_samples"):
        ChannelMap((100, 8), [0, 1], [0], 0)
    with pytest.raises(TypeError, match="dtype"):
        ChannelMap((100, 8), [0, 1], [0], 10, np.complex64)
    cmap = ChannelMap((100, 8), [0, 1], [0], 10)
    with pytest.raises(ValueError, match="frame must have shape"):
        cmap(np.zeros((8, 100), np.int16))
    with pytest.raises(TypeError, match="frame must have dtype"):
        cmap(np.zeros((100, 8), np.float32))
    with pytest.raises(ValueError, match="read-only"):
        out = np.zeros(cmap.output_shape, np.int16)
        out.flags.writeable = False
        cmap(np.zeros((100, 8), np.int16), out=out)


# ---- correctness at a sustainable rate -------------------------------------------------

@pytest.mark.parametrize("policy", ["drop_oldest", "block"])
def test_every_frame_in_order_bit_identical_to_offline(live, rng, policy):
    mapped, raw, cmap = vantage_setup(rng, n_frames=8)
    offline = [CompoundBMode(cmap.output_shape)(m) for m in mapped]   # a separate plan, on the host
    got = []
    # 100 frames/s against ~0.3 ms of compute; 16 slots absorb a 160 ms stall of a loaded machine
    # before drop_oldest would drop a frame (4 slots, 40 ms, were not enough margin for CI)
    session = live.session(CompoundBMode(cmap.output_shape), slots=16, policy=policy, channel_map=cmap, results=4,
                           callback=lambda r: got.append((r.frame_id, r.meta["index"], live.host(r.image))))
    n_frames = 48
    scanner = SimulatedScanner(session, frame_rate=100.0, source=raw, n_frames=n_frames, meta=True).start()
    assert scanner.join(timeout=10)
    assert session.wait_idle(timeout=30)
    stats = session.stats()
    session.stop()
    assert not scanner.errors
    assert stats["pushed"] == stats["processed"] == n_frames and stats["dropped"] == 0
    assert [frame_id for frame_id, _, _ in got] == list(range(1, n_frames + 1))   # in order
    for frame_id, index, image in got:
        np.testing.assert_array_equal(image, offline[index % len(offline)])      # bit-identical
    assert stats["latency_s"]["count"] == n_frames and stats["latency_s"]["p99"] >= stats["latency_s"]["p50"] > 0
    assert {"compute", "compound", "bmode", "copy"} <= set(stats["stage_s"])
    assert stats["upload_gbps"] > 0


def test_every_frame_in_order_and_intact(live):
    """Back-to-back pushes of stamped frames (frame k filled with k + 1) through 3 slots: every
    frame comes out, in push order, neither torn nor read before its copy completed."""
    shape = (32, 128)
    results = []
    session = live.session(Stamp(shape), slots=3, policy="block", results=8,
                           callback=lambda r: results.append((r.frame_id, r.meta, live.host(r.image))))
    assert session.backend == live.backend
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


def test_batch_of_one_pipeline_takes_the_mapped_frame(live, rng):
    # usbeam.Pipeline(n_frames=1) takes (1, transmits, elements, samples): the slot is that
    # shape and the channel map writes a reshaped view of it
    mapped, raw, cmap = vantage_setup(rng, n_frames=2)
    batch_shape = (1,) + cmap.output_shape
    session = live.session(lambda x: x.sum(axis=(0, 1), dtype=np.int32), channel_map=cmap, input_shape=batch_shape,
                           input_dtype=np.int16, output_shape=cmap.output_shape[1:], output_dtype=np.int32,
                           policy="block")
    for k in range(2):
        frame_id = session.push(raw[k])
        np.testing.assert_array_equal(session.get(frame_id, timeout=10).image, mapped[k].sum(axis=0, dtype=np.int32))
    session.stop()
    with pytest.raises(ValueError, match="channel_map maps to"):
        live.session(lambda x: x, channel_map=cmap, input_shape=(2,) + cmap.output_shape, input_dtype=np.int16,
                     output_shape=(1,), output_dtype=np.int16)


def test_real_data_frames_through_a_session(live):
    from conftest import shared_dataset
    from scipy.io import loadmat
    path = shared_dataset("PWI_disk.mat")
    rf = np.ascontiguousarray(loadmat(path)["RF"].transpose(2, 1, 0))     # (frames, elements, samples)
    shape = (1,) + rf.shape[1:]
    results = []
    session = live.session(CompoundBMode(shape), policy="block", results=64,
                           callback=lambda r: results.append((r.frame_id, live.host(r.image))))
    scanner = SimulatedScanner(lambda f: session.push(f[None]), frame_rate=200, source=str(path),
                               n_frames=rf.shape[0])
    assert all(np.array_equal(a, b) for a, b in zip(scanner.frames, rf))  # the scanner read the recording
    scanner.start()
    assert scanner.join(timeout=10) and session.wait_idle(timeout=30)
    offline = CompoundBMode(shape)
    assert [frame_id for frame_id, _ in results] == list(range(1, rf.shape[0] + 1))
    for (_, image), frame in zip(results, rf):
        np.testing.assert_array_equal(image, offline(frame[None]))
    session.stop()


# ---- overload ---------------------------------------------------------------------------

def stamped_frames(n, shape):
    """Frame k is filled with the value k + 1: any torn frame shows two values."""
    return [np.full(shape, k + 1, np.int32) for k in range(n)]


def test_drop_oldest_accounting_and_no_torn_slot(live):
    shape = (64, 256)
    results, drops = [], []
    session = live.session(Stamp(shape, delay_s=0.002), slots=3, policy="drop_oldest", results=4,
                           callback=lambda r: results.append((r.frame_id, r.meta, live.host(r.image))),
                           on_drop=lambda frame_id, meta: drops.append(frame_id))
    frames = stamped_frames(300, shape)
    ids = {}

    def produce(offset):  # two producers: push() is thread-safe
        for k in range(offset, 300, 2):
            ids[session.push(frames[k], meta=k)] = k

    producers = [threading.Thread(target=produce, args=(i,)) for i in range(2)]
    for t in producers:
        t.start()
    for t in producers:
        t.join(30)
    assert session.wait_idle(timeout=30)
    stats = session.stats()
    session.stop()
    assert stats["pushed"] == 300
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


def test_block_policy_waits_and_drops_nothing(live):
    shape = (32, 32)
    session = live.session(Stamp(shape, delay_s=0.003), slots=2, policy="block", results=64)
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
    # a bounded wait raises TimeoutError when no slot frees up in time
    slow = live.session(Stamp(shape, delay_s=0.2), slots=2, policy="block")
    slow.push(frames[0]), slow.push(frames[1]), slow.push(frames[2])
    with pytest.raises(TimeoutError, match="no free slot"):
        slow.push(frames[3], timeout=0.01)
    slow.stop(drain=False)
    session.stop()


# ---- bad input, errors, result access ---------------------------------------------------

@pytest.mark.parametrize("mapping", ["channel_map", "no_map"])
def test_bad_frames_get_clear_errors_and_session_keeps_running(live, rng, mapping):
    mapped, raw, cmap = vantage_setup(rng, n_frames=2)
    if mapping == "channel_map":
        session, frames = live.session(CompoundBMode(cmap.output_shape), channel_map=cmap), raw
    else:
        session, frames = live.session(CompoundBMode(cmap.output_shape)), mapped
    shape = r"\(160, 24\)" if mapping == "channel_map" else r"\(2, 16, 64\)"
    with pytest.raises(ValueError, match=r"frame must have shape " + shape):
        session.push(frames[0].T)
    with pytest.raises(TypeError, match="frame must have dtype int16"):
        session.push(frames[0].astype(np.float32))
    with pytest.raises(TypeError, match="frame"):
        session.push("not a frame")
    frame_id = session.push(frames[1])
    np.testing.assert_array_equal(session.get(frame_id, timeout=10).image,
                                  CompoundBMode(cmap.output_shape)(mapped[1]))
    stats = session.stats()
    session.stop()
    assert stats["rejected"] == 3 and stats["processed"] == 1


def test_pipeline_failure_is_reported_per_frame(live):
    calls = []

    def flaky(frame):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("boom")
        return frame * 2

    errors = []
    session = live.session(flaky, input_shape=(4,), input_dtype=np.float32, output_shape=(4,),
                           output_dtype=np.float32, policy="block", on_error=lambda i, m, e: errors.append((i, str(e))))
    ids = [session.push(np.full(4, k, np.float32)) for k in range(3)]
    assert session.get(ids[0], timeout=10).image[0] == 0
    with pytest.raises(FrameFailed, match="boom"):
        session.get(ids[1], timeout=10)
    assert session.get(ids[2], timeout=10).image[0] == 4
    assert errors == [(ids[1], "boom")]
    stats = session.stats()
    assert stats["failed"] == 1 and stats["processed"] == 2
    session.stop()


def test_result_access_latest_get_views_and_dlpack(live, rng):
    session = live.session(lambda x: x + 1, input_shape=(3, 5), input_dtype=np.float64, output_shape=(3, 5),
                           output_dtype=np.float64, policy="block", results=2)
    assert session.latest() is None
    frames = [rng.standard_normal((3, 5)) for _ in range(4)]
    ids = [session.push(f) for f in frames]
    assert session.wait_idle(timeout=10)
    latest = session.latest()
    assert latest.frame_id == ids[-1] and isinstance(latest.image, np.ndarray)   # a host copy
    np.testing.assert_array_equal(latest.image, frames[-1] + 1)
    with session.get(ids[-1], copy=False) as view:                # zero copy, leased
        assert view.__dlpack_device__() == (live.dlpack_device_type, 0)
        if live.on_gpu:
            assert view.image.readonly and "data" in view.__cuda_array_interface__
            leased = view.image.to_numpy()
        else:
            if live.backend == "cpu":                              # (the stand-in makes no read-only alias)
                assert not view.image.flags.writeable
            leased = np.from_dlpack(view)
        np.testing.assert_array_equal(leased, frames[-1] + 1)
    with pytest.raises(KeyError, match="no longer in the output ring"):
        session.get(ids[0])                                        # results=2: evicted
    with pytest.raises(KeyError, match="never pushed"):
        session.get(99)
    # a leased buffer is not reused while held
    held = session.get(ids[-1], copy=False)
    more = [session.push(f) for f in frames]
    assert session.wait_idle(timeout=10)
    np.testing.assert_array_equal(live.host(held.image), frames[-1] + 1)
    held.release()
    np.testing.assert_array_equal(session.get(more[-1]).image, frames[-1] + 1)
    # readers holding every buffer do not stall the compute thread: the ring grows
    newest = session.push(frames[1])
    leases = [session.get(more[-1], copy=False), session.get(newest, timeout=10, copy=False)]
    frame_id = session.push(frames[0])
    np.testing.assert_array_equal(session.get(frame_id, timeout=10).image, frames[0] + 1)
    for lease in leases:
        lease.release()
    session.stop()


def test_stats_count_frames_latency_stages_and_bytes(live):
    shape = (8, 64)
    session = live.session(Stamp(shape), policy="block", results=4)
    frames = stamped_frames(6, shape)
    for frame in frames:
        session.push(frame)
    assert session.wait_idle(timeout=10)
    stats = session.stats()
    session.stop()
    assert stats["backend"] == live.backend and stats["processed"] == 6 and stats["pushed"] == 6
    assert {"compute", "copy", "stamp"} <= set(stats["stage_s"])       # session and pipeline stages
    assert stats["upload_bytes"] == 6 * frames[0].nbytes and stats["upload_gbps"] > 0
    assert stats["latency_s"]["count"] == 6 and stats["latency_s"]["p99"] >= stats["latency_s"]["p50"] > 0


def test_session_parameters_validated(live):
    shapes = dict(input_shape=(4,), input_dtype=np.float32, output_shape=(4,), output_dtype=np.float32)
    with pytest.raises(ValueError, match="policy"):
        live.session(lambda x: x, policy="newest", **shapes)
    with pytest.raises(ValueError, match="slots"):
        live.session(lambda x: x, slots=1, **shapes)
    with pytest.raises(ValueError, match="input_shape"):
        live.session(CompoundBMode((1, 4, 8)), input_shape=(2, 4, 8))
    with pytest.raises(ValueError, match="channel_map maps to"):
        live.session(CompoundBMode((1, 4, 8)), channel_map=ChannelMap((10, 4), [0, 1, 2, 3], [0], 9))


def test_parameters_validated():
    """What only the CPU session takes: plain callables (with shapes), and the backend name."""
    shapes = dict(input_shape=(4,), input_dtype=np.float32, output_shape=(4,), output_dtype=np.float32)
    with pytest.raises(TypeError, match="input_shape"):
        Session(lambda x: x)
    with pytest.raises(ValueError, match="backend"):
        Session(lambda x: x, backend="gpu", **shapes)
    # backend='cuda' (tests/live/test_live_cuda.py): without a GPU a clean error; with one, a plain
    # callable is refused (the CUDA session hands the pipeline DeviceArrays)
    with pytest.raises(usbeam.UsbeamError if not usbeam.cuda_available() else TypeError, match="cuda"):
        Session(lambda x: x, backend="cuda", **shapes)
    with pytest.raises(ValueError, match="compute_threads"):
        Session(lambda x: x, compute_threads=0, start=False, **shapes)
    cores = usbeam.build_info()["cpu_threads"]
    assert Session(lambda x: x, start=False, **shapes).compute_threads == max(1, cores - 1)
    assert Session(lambda x: x, start=False, compute_threads=3, **shapes).compute_threads == 3


# ---- plan swap, lifecycle ---------------------------------------------------------------

def test_update_swaps_the_plan_between_frames_without_stopping(live, rng):
    mapped, raw, cmap = vantage_setup(rng, n_frames=4)
    a, b = CompoundBMode(cmap.output_shape, gain=1.0), CompoundBMode(cmap.output_shape, gain=0.25)
    results = {}
    session = live.session(a, channel_map=cmap, policy="block", results=64,
                           callback=lambda r: results.__setitem__(r.frame_id, (r.generation, live.host(r.image))))
    before = [session.push(raw[k % 4], meta=k) for k in range(10)]
    generation = session.update(live.pipeline(b), channel_map=cmap)   # no stop; frames already queued keep plan a
    after = [session.push(raw[k % 4], meta=k) for k in range(10)]
    assert session.wait_idle(timeout=30)
    assert session.running and generation == 2
    offline_a = [CompoundBMode(cmap.output_shape, gain=1.0)(m) for m in mapped]
    offline_b = [CompoundBMode(cmap.output_shape, gain=0.25)(m) for m in mapped]
    for plan, offline, ids in ((1, offline_a, before), (2, offline_b, after)):
        for k, frame_id in enumerate(ids):
            assert results[frame_id][0] == plan
            np.testing.assert_array_equal(results[frame_id][1], offline[k % 4])
            result = session.get(frame_id)                          # get() reports the generation too
            assert result.generation == plan
            np.testing.assert_array_equal(result.image, offline[k % 4])
    with pytest.raises(ValueError, match="input"):
        session.update(live.pipeline(CompoundBMode((1, 4, 8))))
    session.stop()


def test_update_under_load_each_frame_uses_one_whole_plan(live, rng):
    mapped, raw, cmap = vantage_setup(rng, n_frames=4)
    gains = [1.0, 0.5, 0.25, 2.0]
    offline = [[CompoundBMode(cmap.output_shape, gain=g)(m) for m in mapped] for g in gains]
    results = []
    session = live.session(CompoundBMode(cmap.output_shape, gain=gains[0]), channel_map=cmap, policy="drop_oldest",
                           slots=3, callback=lambda r: results.append((r.frame_id, r.meta["index"], r.generation,
                                                                       live.host(r.image))))
    scanner = SimulatedScanner(session, frame_rate=300.0, source=raw, meta=True).start()     # until stopped

    def wait_for_frames_of(generation, n=10):           # progress, not a sleep: a loaded machine only waits longer
        deadline = time.monotonic() + 10
        while sum(g == generation for _, _, g, _ in list(results)) < n and time.monotonic() < deadline:
            time.sleep(0.005)

    for generation, gain in enumerate(gains[1:], start=1):    # swaps while frames keep arriving
        wait_for_frames_of(generation)
        session.update(live.pipeline(CompoundBMode(cmap.output_shape, gain=gain)), channel_map=cmap)
    wait_for_frames_of(len(gains))
    assert scanner.stop(timeout=10) and session.wait_idle(timeout=30)
    session.stop()
    assert not scanner.errors and session.stats()["processed"] == len(results) > 0
    generations = [g for _, _, g, _ in results]
    assert generations == sorted(generations) and set(generations) == {1, 2, 3, 4}
    for _, index, generation, image in results:
        np.testing.assert_array_equal(image, offline[generation - 1][index % 4])


def test_clean_start_stop_restart_close_without_leaks(live):
    settle()
    threads_before = threading.active_count()
    rings_before = usbeam._core.live_cuda_ring_count()
    session = live.session(lambda x: x, input_shape=(8,), input_dtype=np.int32, output_shape=(8,),
                           output_dtype=np.int32, policy="block")
    assert usbeam._core.live_cuda_ring_count() == rings_before + live.rings
    assert threading.active_count() == threads_before + live.session_threads + live.ring_threads
    frame_id = session.push(np.arange(8, dtype=np.int32))
    session.stop()
    assert threading.active_count() == threads_before + live.ring_threads
    np.testing.assert_array_equal(session.get(frame_id).image, np.arange(8))  # drained before stopping
    with pytest.raises(SessionStopped):
        session.push(np.zeros(8, np.int32))
    session.stop()                                                    # idempotent
    for _ in range(3):
        session.start()
        frame_id = session.push(np.full(8, 7, np.int32))
        assert session.get(frame_id, timeout=5).image[0] == 7
        session.stop()
    assert threading.active_count() == threads_before + live.ring_threads
    session.close()                                                   # CUDA: frees the ring
    gc.collect()
    assert usbeam._core.live_cuda_ring_count() == rings_before
    session.start()                                                   # CUDA: allocates it again
    frame_id = session.push(np.full(8, 3, np.int32))
    assert session.get(frame_id, timeout=5).image[0] == 3
    session.close()
    del session
    settle()                                      # the stand-in ring's thread ends after its ring
    assert usbeam._core.live_cuda_ring_count() == rings_before
    assert threading.active_count() == threads_before


def test_stop_during_push_neither_hangs_nor_crashes(live):
    shape = (256, 256)
    session = live.session(Stamp(shape, delay_s=0.01), slots=2, policy="block")
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


def test_stop_from_callback_then_restart_keeps_one_worker_and_exact_accounting(live):
    """stop() inside the callback (on the compute thread) only signals: the old loop drains and
    ends after the callback returns; start() from outside waits for it.  Never two compute
    threads, no frame lost: every id gives its image or FrameDropped."""
    settle()
    shape = (16, 16)
    session = None
    restart_errors = []

    stopped = threading.Event()

    def callback(result):
        if result.frame_id == 1:
            session.stop()
            try:
                session.start()             # on the stopping compute thread: refused
            except usbeam.UsbeamError as exc:
                restart_errors.append(str(exc))
            stopped.set()
            time.sleep(0.2)                 # the old loop is still inside the callback

    session = live.session(Stamp(shape, delay_s=0.01), policy="block", results=64, callback=callback)
    frames = stamped_frames(22, shape)
    threads_before = len(worker_threads())
    ids = [session.push(frames[0]), session.push(frames[1])]
    assert stopped.wait(10)
    assert not session.running                       # stopping (the loop itself still finishing)
    with pytest.raises(SessionStopped):
        session.push(frames[2])
    session.start()                                  # joins the old compute thread first
    assert len(worker_threads()) == threads_before
    assert [t.name for t in worker_threads()].count("usbeam-live-compute") == 1
    ids += [session.push(f) for f in frames[2:]]
    assert session.wait_idle(timeout=10)
    time.sleep(0.2)
    assert [t.name for t in worker_threads()].count("usbeam-live-compute") == 1
    stats = session.stats()
    session.stop()
    assert len(restart_errors) == 1 and "compute thread" in restart_errors[0]
    assert stats["pushed"] == 22 == stats["processed"] + stats["dropped"] + stats["failed"]
    assert stats["dropped"] == 0 and stats["pending"] == 0
    for k, frame_id in enumerate(ids):               # drained before the restart: all processed
        np.testing.assert_array_equal(session.get(frame_id).image[:3], [k + 1] * 3)
    assert not worker_threads()[threads_before:]


def test_stop_without_drain_from_callback_then_restart_counts_the_waiting_frames_as_drops():
    """A stop(drain=False) from the callback while frames wait: they are dropped (counted, and
    get() says FrameDropped), not silently reset by the start() that follows."""
    session = None
    drops = []
    all_pushed, stopped = threading.Event(), threading.Event()

    def callback(result):
        if result.frame_id == 1:
            all_pushed.wait(5)
            session.stop(drain=False)
            stopped.set()
            time.sleep(0.1)

    session = Session(lambda x: x + 1, input_shape=(4,), input_dtype=np.float32, output_shape=(4,),
                      output_dtype=np.float32, policy="block", slots=4, results=64, callback=callback,
                      on_drop=lambda frame_id, meta: drops.append(frame_id))
    ids = [session.push(np.full(4, k, np.float32)) for k in range(3)]
    all_pushed.set()
    assert stopped.wait(10)
    session.start()                      # waits for the old loop, which drops frames 2 and 3
    ids += [session.push(np.full(4, k, np.float32)) for k in range(3, 10)]
    assert session.wait_idle(timeout=10)
    stats = session.stats()
    session.stop()
    assert stats["pushed"] == 10 == stats["processed"] + stats["dropped"] + stats["failed"]
    for k, frame_id in enumerate(ids):
        try:
            np.testing.assert_array_equal(session.get(frame_id).image, np.full(4, k + 1))
        except FrameDropped:
            assert frame_id in drops
    assert stats["dropped"] == len(drops) == 2 and drops == ids[1:3]


def test_drop_oldest_overload_keeps_the_compute_thread_fed():
    """Unpaced producers under drop_oldest must not starve the compute thread (an unfair lock
    plus the GIL let them re-take the lock before it: 36 of 196,394 frames in 2 s at 1 ms per
    frame).  The capacity is measured in the same test, just before, with policy 'block' (a
    producer that waits for free slots cannot starve the compute thread), so that a loaded
    machine lowers both."""
    def pipe(frame):
        time.sleep(0.001)                   # a kernel with the GIL released
        return frame

    def run(policy, producers, seconds):
        session = Session(pipe, slots=3, policy=policy, input_shape=(1024,), input_dtype=np.float32,
                          output_shape=(1024,), output_dtype=np.float32)
        stop_at = time.perf_counter() + seconds
        frame = np.ones(1024, np.float32)

        def produce():
            while time.perf_counter() < stop_at:
                session.push(frame)

        threads = [threading.Thread(target=produce) for _ in range(producers)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert session.wait_idle(timeout=10)
        elapsed = time.perf_counter() - t0
        stats = session.stats()
        session.stop()
        assert stats["pushed"] == stats["processed"] + stats["dropped"]
        return stats["processed"] / elapsed, stats

    for producers in (1, 3):
        capacity, stats = run("block", 1, 0.5)
        assert stats["dropped"] == 0
        rate, stats = run("drop_oldest", producers, 0.6)
        assert stats["dropped"] > 0                                  # it was overloaded
        assert rate >= 0.5 * capacity, (producers, rate, capacity)


def test_unreferenced_running_sessions_are_collected(live):
    """Worker threads hold the session weakly between frames: a running session nobody
    references is collected, its threads end and its buffers (CUDA: its ring) are freed."""
    import weakref

    settle()
    threads_before = threading.active_count()
    rings_before = usbeam._core.live_cuda_ring_count()
    refs = []
    for k in range(5):
        session = live.session(lambda x: x + 1, input_shape=(8,), input_dtype=np.int32, output_shape=(8,),
                               output_dtype=np.int32, policy="block")
        assert session.get(session.push(np.full(8, k, np.int32)), timeout=5).image[0] == k + 1
        refs.append(weakref.ref(session))
    assert threading.active_count() > threads_before
    del session
    gc.collect()
    deadline = time.monotonic() + 5
    while threading.active_count() > threads_before and time.monotonic() < deadline:
        time.sleep(0.02)
    assert all(r() is None for r in refs)
    assert threading.active_count() == threads_before
    assert usbeam._core.live_cuda_ring_count() == rings_before


def test_callback_and_on_drop_exceptions_are_counted_and_the_session_keeps_running(live):
    shape = (8, 8)
    seen, drops = [], []

    def callback(result):
        seen.append(result.frame_id)
        if result.frame_id % 3 == 0:
            raise RuntimeError(f"callback {result.frame_id}")

    def on_drop(frame_id, meta):
        drops.append(frame_id)
        raise ValueError(f"on_drop {frame_id}")

    session = live.session(Stamp(shape), policy="block", results=64, callback=callback, on_drop=on_drop)
    frames = stamped_frames(10, shape)
    ids = [session.push(f) for f in frames]
    assert session.wait_idle(timeout=10)
    stats = session.stats()
    assert seen == ids and stats["processed"] == 10
    assert stats["callback_errors"] == 3                             # frames 3, 6, 9
    assert isinstance(session.last_callback_error, RuntimeError) and str(session.last_callback_error) == "callback 9"
    for k, frame_id in enumerate(ids):                               # results intact despite the raises
        assert session.get(frame_id).image[0] == k + 1
    # on_drop raising: frames discarded by stop(drain=False) behind a slow frame (held until
    # stop() has signalled, so that neither a slow start nor a stall decides which frames wait)
    started, gate = threading.Event(), threading.Event()

    class Held(Stamp):
        def __call__(self, frame, out=None):
            started.set()
            assert gate.wait(10)
            return super().__call__(frame, out)

    slow = live.session(Held(shape), slots=3, policy="block", on_drop=on_drop)
    slow_ids = [slow.push(f) for f in frames[:3]]
    assert started.wait(10)                                          # the first is computing
    stopper = threading.Thread(target=slow.stop, kwargs={"drain": False})
    stopper.start()
    deadline = time.monotonic() + 10
    while slow.running and time.monotonic() < deadline:             # stop() has signalled
        time.sleep(0.001)
    gate.set()
    stopper.join(10)
    assert not stopper.is_alive()
    slow_stats = slow.stats()
    assert drops == slow_ids[1:]
    assert slow_stats["dropped"] == 2 and slow_stats["callback_errors"] == 2
    assert slow_stats["pushed"] == slow_stats["processed"] + slow_stats["dropped"]
    assert isinstance(slow.last_callback_error, ValueError) and str(slow.last_callback_error) == f"on_drop {slow_ids[2]}"
    frame_id = session.push(frames[0])                               # the first session still runs
    assert session.get(frame_id, timeout=5).image[0] == 1
    assert session.stats()["callback_errors"] == 3
    session.stop()


# ---- simulated scanner and soak -----------------------------------------------------------

def test_simulated_scanner_keeps_its_rate():
    frames = simulate_plane_wave_rf(n_frames=3, n_elements=8, n_samples=128)
    assert frames.dtype == np.int16 and frames.shape == (3, 8, 128) and np.abs(frames).max() == 2000
    pushed = []                                                    # (push time, due time)
    scanner = SimulatedScanner(lambda f, meta: pushed.append((time.perf_counter(), meta["due"])) or len(pushed),
                               frame_rate=200, source=frames, n_frames=40, meta=True)
    scanner.start()
    assert scanner.join(timeout=5)
    assert scanner.sent == 40 and len(pushed) == 40
    times, due = np.array(pushed).T
    np.testing.assert_allclose(np.diff(due), 1 / 200, rtol=0, atol=1e-6)  # frame k is due at start + k / 200 s
    assert np.all(times > due - 1e-4)                              # never early: no load makes it faster
    # on time: a stall of this shared machine delays the frames due meanwhile, which then
    # follow at once (no drift), so it moves the median only if it lasts half the run
    assert np.median(times - due) < 1 / 200
    with pytest.raises(ValueError, match="frame_rate"):
        SimulatedScanner(lambda f: 0, frame_rate=0)


def test_simulated_scanner_simulator_source_through_a_session():
    """source='simulator' end to end: every simulated frame reaches the pipeline intact, in order
    (the scanner's own simulation is checked against a direct call with the same options)."""
    want = simulate_plane_wave_rf(n_elements=16, n_samples=256, seed=3)          # 8 frames, cycled
    results = []
    session = Session(lambda x: x.sum(axis=1, dtype=np.int32), input_shape=(16, 256), input_dtype=np.int16,
                      output_shape=(16,), output_dtype=np.int32, policy="block", results=32,
                      callback=lambda r: results.append((r.frame_id, r.meta["index"], np.array(r.image))))
    scanner = SimulatedScanner(session, frame_rate=200, source="simulator", n_frames=12, meta=True,
                               n_elements=16, n_samples=256, seed=3)
    scanner.start()
    assert scanner.join(timeout=10) and session.wait_idle(timeout=10)
    session.stop()
    assert not scanner.errors and scanner.sent == 12
    assert [r[0] for r in results] == scanner.frame_ids == list(range(1, 13))
    assert [r[1] for r in results] == list(range(12))
    for _, index, image in results:
        np.testing.assert_array_equal(image, want[index % 8].astype(np.int64).sum(axis=1))


@pytest.mark.parametrize("n_acq", [1, 3])
def test_simulated_scanner_vantage_layout(rng, n_acq):
    """layout='vantage': frames pushed as RcvData (column-major (rows, channels), rows padded to
    128 per acquisition, elements on the connector's channels); scanner.channel_map undoes it,
    so the session's pipeline sees the source frames exactly (checked against the reference
    gather of the raw frame too)."""
    source = rng.integers(-2000, 2000, (3, n_acq, 8, 100)).astype(np.int16)
    source_frames = source[:, 0] if n_acq == 1 else source
    seen = []
    scanner = SimulatedScanner(lambda f: seen.append(f) or len(seen), frame_rate=500, source=source_frames,
                               layout="vantage", n_frames=3)
    cmap = scanner.channel_map
    assert cmap.raw_shape == (128 * n_acq, 64) and cmap.output_shape == (n_acq, 8, 100)
    scanner.start()
    assert scanner.join(timeout=5) and len(seen) == 3
    for k, raw in enumerate(seen):
        assert raw.shape == (128 * n_acq, 64) and raw.flags.f_contiguous and raw.dtype == np.int16
        np.testing.assert_array_equal(ref.gather(raw, cmap.element_channel, cmap.acquisition_row, 100), source[k])
    # explicit layout, through a session with the scanner's map
    got = []
    element_channel = rng.permutation(80)[:8]
    scanner = SimulatedScanner(lambda f: 0, frame_rate=1, source=source_frames, layout="vantage",
                               n_channels=80, element_channel=element_channel, rows_per_acquisition=100)
    assert scanner.channel_map.raw_shape == (100 * n_acq, 80)
    np.testing.assert_array_equal(scanner.channel_map.element_channel, element_channel)
    session = Session(lambda x: x.copy(), channel_map=scanner.channel_map, input_shape=(n_acq, 8, 100),
                      input_dtype=np.int16, output_shape=(n_acq, 8, 100), output_dtype=np.int16, policy="block",
                      callback=lambda r: got.append(np.array(r.image)))
    scanner = SimulatedScanner(session, frame_rate=500, source=source_frames, layout="vantage", n_channels=80,
                               element_channel=element_channel, rows_per_acquisition=100, n_frames=6)
    scanner.start()
    assert scanner.join(timeout=5) and session.wait_idle(timeout=5)
    session.stop()
    assert len(got) == 6
    for k, image in enumerate(got):
        np.testing.assert_array_equal(image, source[k % 3])
    with pytest.raises(ValueError, match="layout"):
        SimulatedScanner(lambda f: 0, frame_rate=1, source=source_frames, layout="rcv")
    with pytest.raises(ValueError, match="element_channel"):
        SimulatedScanner(lambda f: 0, frame_rate=1, source=source_frames, layout="vantage",
                         element_channel=[0] * 8)
    with pytest.raises(TypeError, match="layout='vantage'"):
        SimulatedScanner(lambda f: 0, frame_rate=1, source=source_frames, n_channels=80)


def _rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def test_soak_10000_frames_no_growth_in_memory_or_threads(rng):
    mapped, raw, cmap = vantage_setup(rng, n_frames=4, n_acq=1, n_el=8, n_ch=8, n_s=32, rows_per_acq=32)
    session = Session(lambda x: x[0], channel_map=cmap, input_shape=cmap.output_shape, input_dtype=np.int16,
                      output_shape=cmap.output_shape[1:], output_dtype=np.int16, policy="drop_oldest", results=4,
                      history=256)
    frames = [np.asfortranarray(raw[k]) for k in range(4)]
    tracemalloc.start()
    for k in range(2000):              # warm-up: allocator settles, the bounded histories fill up
        session.push(frames[k % 4])
    session.wait_idle(timeout=5)
    session.update(session.pipeline, channel_map=cmap)
    session.stats()                    # first calls import modules lazily (numpy.ma for percentiles)
    settle(keep=[session._thread])
    rss_before, threads_before = _rss_bytes(), threading.active_count()
    traced_before = tracemalloc.get_traced_memory()[0]
    t0 = time.perf_counter()
    for k in range(10_000):
        session.push(frames[k % 4])
        if k % 1000 == 999:
            session.update(session.pipeline, channel_map=cmap)  # plan swaps do not accumulate either
    assert session.wait_idle(timeout=10)
    elapsed = time.perf_counter() - t0
    gc.collect()
    stats = session.stats()
    assert stats["pushed"] == 12_000 and stats["processed"] + stats["dropped"] == 12_000
    traced_growth = tracemalloc.get_traced_memory()[0] - traced_before
    tracemalloc.stop()
    assert traced_growth < 64 << 10                         # Python + NumPy allocations
    if "asan" not in os.environ.get("LD_PRELOAD", ""):      # ASan's quarantine holds freed memory
        assert _rss_bytes() - rss_before < 4 << 20
    assert threading.active_count() == threads_before
    assert len(session._done) <= session.n_results
    assert elapsed < 30
    session.stop()
    assert threading.active_count() == threads_before - 1


# ---- the real pipeline -------------------------------------------------------------------

@pytest.mark.parametrize("backend", ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
def test_real_pipeline_frames_bit_identical_to_offline(backend):
    """The foundation's usbeam.Pipeline (RF -> IQ -> DAS -> B-mode) on the session's backend
    driven through a session: every PWI_disk frame comes out in order, bit-identical to the
    same pipeline run offline (same kernels, same launch shapes: no tolerance)."""
    from conftest import shared_dataset

    live = LiveBackend(backend)
    rec = usbeam.io.load_must(shared_dataset("PWI_disk.mat"))
    rf = np.ascontiguousarray(rec.data)                                    # (32, 128, 334) int16
    grid = usbeam.Grid(x=np.linspace(-12.5e-3, 12.5e-3, 101), z=np.linspace(10e-3, 35e-3, 101))

    def make():
        return usbeam.Pipeline(rec.probe, rec.sequence, grid, fs=rec.fs, fc=rec.fc, c=rec.c, t0=rec.t0,
                               n_samples=rf.shape[-1], n_frames=1, rf_dtype=np.int16, bandwidth=rec.bandwidth,
                               f_number="auto", interpolation="linear", dynamic_range=30.0, backend=backend)

    offline = make()
    expected = [offline(frame[None, None]).copy() for frame in rf]
    results = []
    session = Session(make(), policy="block", results=64, backend=backend,
                      callback=lambda r: results.append((r.frame_id, live.host(r.image))))
    for frame in rf:
        session.push(frame[None, None])
    assert session.wait_idle(timeout=60)
    stats = session.stats()
    session.stop()
    assert stats["pushed"] == stats["processed"] == rf.shape[0] and stats["dropped"] == 0
    assert [frame_id for frame_id, _ in results] == list(range(1, rf.shape[0] + 1))
    for (_, image), want in zip(results, expected):
        np.testing.assert_array_equal(image, want)
    assert {"rf2iq", "das", "bmode"} <= set(stats["stage_s"])


def test_timeouts_are_validated_by_name():
    """push/get/wait_idle/stop take None (get/push/wait_idle only) or seconds >= 0; anything else
    is refused naming 'timeout', and the session keeps running."""
    def pipe(frame):
        return frame * 2

    session = Session(pipe, input_shape=(4,), input_dtype=np.float32, output_shape=(4,), output_dtype=np.float32)
    try:
        frame = np.arange(4, dtype=np.float32)
        for call in (lambda t: session.push(frame, timeout=t), lambda t: session.get(1, timeout=t),
                     lambda t: session.wait_idle(timeout=t), lambda t: session.stop(timeout=t)):
            with pytest.raises(TypeError, match="timeout"):
                call("a")
            for bad in (float("nan"), float("inf"), -1.0):
                with pytest.raises(ValueError, match="timeout"):
                    call(bad)
        with pytest.raises(TypeError, match="timeout"):
            session.stop(timeout=None)
        assert session.running
        fid = session.push(frame, timeout=1)
        np.testing.assert_array_equal(session.get(fid, timeout=5).image, frame * 2)
        assert session.wait_idle(timeout=5)
    finally:
        session.stop()
