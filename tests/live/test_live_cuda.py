"""What only the CUDA live session has (usbeam.live.Session(..., backend='cuda'),
usbeam/live/cuda_session.py).  The behaviour it shares with the CPU session (order, drops,
block, bad frames, results, stats, plan swap, stop and restart) is tested once for every
backend in test_live.py.

Here: refusals without a GPU, the pipeline and device checks, the slot ring itself
(cuda/runtime/slot_ring.cu: events, pinned-slot reuse, bandwidth), results as device arrays
and the upload statistics, usbeam.Pipeline(backend='cuda') with a channel map, and `usbeam serve
--backend cuda`.  Tests taking the `ring` fixture run twice: on a GPU with the real ring
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
from live_pipelines import OnDevice, Stamp
from usbeam import device
from usbeam.live import ChannelMap, Session


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
    a 3-slot ring: each device slot holds what was written into its pinned slot; a pinned
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
