"""The graph replay both pipelines share (usbeam/pipelines/_chain.py): the two findings of the
review of the CUDA backend it fixes, pinned for usbeam.Pipeline and usbeam.DopplerPipeline.

- A4: after a launch the RF buffer names the graph's stream, so the next host copy into it
  (which runs on the stream the buffer names) waits for the replay still reading it;
- A7: the garbage collector is held off while the chain is captured (a finalizer run inside
  the capture window makes capture-unsafe CUDA calls), and left as the caller had it.

Needs a GPU (marked cuda), or the CUDA emulator (make test-emu)."""
import gc

import numpy as np
import pytest

import usbeam
from usbeam import _core, device

FC, FS, C, PRF = 5e6, 20e6, 1540.0, 4e3
PROBE = usbeam.LinearArray(n_elements=16, pitch=3e-4, width=2.7e-4, fc=FC, bandwidth=0.6)
GRID = usbeam.Grid(x=np.linspace(-2e-3, 2e-3, 9), z=np.linspace(8e-3, 10e-3, 11))
N_SAMPLES = 384


def pipelines():
    common = dict(fs=FS, fc=FC, c=C, n_samples=N_SAMPLES, backend="cuda", capture_graph=True)
    return {"bmode": lambda: usbeam.Pipeline(PROBE, [usbeam.PlaneWave(0.0)], GRID, n_frames=2, **common),
            "doppler": lambda: usbeam.DopplerPipeline(PROBE, [usbeam.PlaneWave(0.0)], GRID, n_frames=4, prf=PRF,
                                                      clutter="poly", clutter_options=dict(order=1), **common)}


def rf_for(pipe, rng):
    return rng.integers(-2000, 2000, pipe._rf_shape, dtype=np.int16)


@pytest.mark.cuda
@pytest.mark.parametrize("kind", ["bmode", "doppler"])
def test_replay_leaves_the_rf_buffer_on_the_graph_stream(rng, kind):
    pipe = pipelines()[kind]()
    stream = pipe.rf2iq.cuda.stream
    out = device.empty(pipe.output_shape, pipe.output_dtype) if kind == "bmode" else None
    for call in range(3):  # capture, then replays; host rf (its copy resets the buffer's stream)
        pipe(rf_for(pipe, rng), out=out) if kind == "bmode" else pipe(rf_for(pipe, rng))
        assert pipe._device_rf.stream == stream, f"call {call}"


@pytest.mark.cuda
@pytest.mark.parametrize("kind", ["bmode", "doppler"])
@pytest.mark.parametrize("enabled", [True, False])
def test_capture_holds_the_garbage_collector_off(rng, monkeypatch, kind, enabled):
    seen = []
    begin = _core.graph_capture_begin

    def recording_begin(stream):
        seen.append(gc.isenabled())
        return begin(stream)

    monkeypatch.setattr(_core, "graph_capture_begin", recording_begin)
    pipe = pipelines()[kind]()
    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        pipe(rf_for(pipe, rng))
        pipe(rf_for(pipe, rng))  # a replay: no second capture
        assert seen == [False]
        assert gc.isenabled() == enabled
    finally:
        (gc.enable if was else gc.disable)()
