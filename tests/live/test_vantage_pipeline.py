"""A Vantage workspace as a usbeam Recording and pipeline (usbeam/io/vantage_recording.py,
``usbeam.Pipeline.from_vantage``, ``usbeam serve --vantage``), checked against numbers worked
out by hand from the Vantage conventions in the hand-written workspace of
tests/helpers/vantage_l11.py (not usbeam's own writer), against the positions of the point
targets its echoes were simulated from (plain NumPy), and, for the BS sample modes, against
the analytic baseband of a sampled pulse."""
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.io import savemat

import usbeam
import vantage_l11
from tolerances import TOLERANCES
from usbeam.geometry import Delays, DivergingWave, Focused, PlaneWave
from usbeam.io import load_vantage
from usbeam.io.vantage_recording import bs_pairs_to_iq

ROOT = Path(__file__).resolve().parents[2]
C, FC = vantage_l11.C, vantage_l11.FC_MHZ * 1e6
WL = C / FC


def _save(tmp_path, variables, name="ws.mat"):
    path = tmp_path / name
    savemat(path, variables, do_compression=False)
    return path


@pytest.fixture(scope="module")
def l11(tmp_path_factory):
    variables, truth = vantage_l11.workspace(n_frames=2)
    return variables, truth


def _load(tmp_path, variables):
    return load_vantage(_save(tmp_path, variables))


def _targets_found(image, grid, truth):
    dx, dz = grid.x[1] - grid.x[0], grid.z[1] - grid.z[0]
    for (px, pz, _) in truth["targets"]:
        near_x, near_z = np.abs(grid.x - px) < 2e-3, np.abs(grid.z - pz) < 2e-3
        window = image[np.ix_(near_z, near_x)]
        iz, ix = np.unravel_index(np.argmax(window), window.shape)
        assert abs(grid.x[near_x][ix] - px) <= TOLERANCES["vantage_target_x_steps"] * dx + 1e-9, (px, pz)
        assert abs(grid.z[near_z][iz] - pz) <= TOLERANCES["vantage_target_z_steps"] * dz + 1e-9, (px, pz)
        assert window.max() >= 200


def test_recording_of_the_l11_workspace(l11, tmp_path):
    variables, truth = l11
    ws = _load(tmp_path, variables)
    rec = ws.to_recording()
    assert isinstance(rec, usbeam.io.Recording)
    # probe: 128 x 0.3 mm, width 0.27 mm, fc 6.25 MHz, Trans.Bandwidth [4 11] MHz -> 7 / 6.25
    assert rec.probe == usbeam.LinearArray(128, 0.3e-3, width=0.27e-3, fc=6.25e6, bandwidth=7 / 6.25)
    assert rec.sequence == (PlaneWave(-0.1), PlaneWave(0.0), PlaneWave(0.1))
    assert rec.fs == 25e6 and rec.fc == 6.25e6 and rec.c == 1540.0 and rec.modulation_frequency == 0.0
    # startDepth 5 wavelengths -> 1.6 us after the trigger, minus the lens 2 x 1.4785 mm / 1540 m/s
    assert rec.t0 == pytest.approx(2 * 5 / 6.25e6 - 2 * 1.4785e-3 / 1540.0, rel=0, abs=1e-15)
    assert rec.data.shape == (2, 3, 128, 760) and rec.data.dtype == np.int16
    np.testing.assert_array_equal(rec.data, truth["frames"])              # through Trans.Connector
    np.testing.assert_array_equal(rec.meta["element_channel"], vantage_l11.connector() - 1)
    assert rec.meta["start_rows"] == [0, 768, 1536] and rec.meta["sample_mode"] == "NS200BW"
    grid = rec.meta["grid"]
    np.testing.assert_allclose(grid.x, truth["x_grid"], rtol=0, atol=1e-12)   # PData: every pitch from element 1
    np.testing.assert_allclose(grid.z, truth["z_grid"], rtol=0, atol=1e-12)   # from startDepth every lambda/2
    assert ws.grid().shape == (190, 128)


def test_from_vantage_finds_the_point_targets(l11, tmp_path):
    variables, truth = l11
    ws = _load(tmp_path, variables)
    pipeline = usbeam.Pipeline.from_vantage(ws)
    assert isinstance(pipeline, usbeam.Pipeline) and pipeline.input_shape == (1, 3, 128, 760)
    image = pipeline(ws.channel_map()(ws.rcvdata[0])[None])[0]
    _targets_found(image, ws.grid(), truth)
    # the same from the path, and keywords reach the pipeline
    again = usbeam.Pipeline.from_vantage(_save(tmp_path, variables, "again.mat"), dynamic_range=40.0)
    assert again.bmode.dynamic_range == 40.0
    with pytest.raises(TypeError, match="t0 comes from the Vantage workspace"):
        usbeam.Pipeline.from_vantage(ws, t0=0.0)


def test_without_lens_correction_the_targets_move(l11, tmp_path):
    """The lens term matters: dropping it from t0 moves the targets 1.48 mm deeper (12 grid rows)."""
    variables, truth = l11
    ws = _load(tmp_path, variables)
    rec = ws.to_recording()
    grid = ws.grid()
    wrong = usbeam.Pipeline(rec.probe, rec.sequence, grid, fs=rec.fs, fc=rec.fc, c=rec.c,
                            t0=rec.t0 + ws.probe.lens_correction_s, n_samples=760)
    image = wrong(rec.data[:1])[0]
    with pytest.raises(AssertionError):
        _targets_found(image, grid, truth)


@pytest.mark.parametrize("mode, pair_rate", [("BS100BW", 6.25e6), ("BS67BW", 6.25e6 / 1.5), ("BS50BW", 3.125e6)])
def test_bs_modes_are_converted_not_refused(mode, pair_rate, tmp_path):
    variables, truth = vantage_l11.workspace(n_frames=1, sample_mode=mode)
    ws = _load(tmp_path, variables)
    rec = ws.to_recording()
    assert rec.fs == pytest.approx(pair_rate) and rec.modulation_frequency == 6.25e6
    assert rec.data.dtype == np.complex64 and rec.data.shape == (1, 3, 128, 380) and rec.is_iq
    pipeline = usbeam.Pipeline.from_vantage(ws)
    image = pipeline(ws.channel_map()(ws.rcvdata[0])[None])[0]
    _targets_found(image, ws.grid(), truth)


def test_bs_pairs_against_the_analytic_baseband():
    """rf = a(t) cos(2 pi f t + phi): the pair (rf(t_k), rf(t_k + T/4)) -> a(t_k) exp(j phi)
    (the baseband of the analytic signal a exp(j (2 pi f t + phi)))."""
    f, t0, periods = 5e6, 0.37e-6, 1.5
    k = np.arange(200)
    t = t0 + k * periods / f
    sigma, centre, phi = 4 / f, t0 + 100 * periods / f, 0.7
    env = lambda tt: np.exp(-((tt - centre) / sigma) ** 2)        # noqa: E731
    rf = lambda tt: env(tt) * np.cos(2 * np.pi * f * tt + phi)     # noqa: E731
    pairs = np.stack([rf(t), rf(t + 0.25 / f)], axis=-1).reshape(-1) * 1000
    iq = bs_pairs_to_iq(pairs.astype(np.float32), t0=t0, demod_frequency=f, sample_mode="BS67BW")
    want = 1000 * env(t) * np.exp(1j * phi)
    assert iq.dtype == np.complex64 and iq.shape == (200,)
    assert np.max(np.abs(iq - want)) <= TOLERANCES["vantage_bs_pair_rel"] * 1000
    with pytest.raises(ValueError, match="sample_mode"):
        bs_pairs_to_iq(pairs, t0=t0, demod_frequency=f, sample_mode="NS200BW")


def _tx(delay_wl, focus=0.0, steer=0.0, apod=None):
    return {"waveform": 1.0, "Origin": np.zeros(3), "focus": focus, "Steer": np.array([steer, 0.0]),
            "Apod": np.ones(128) if apod is None else apod, "Delay": delay_wl}


def test_focused_diverging_and_delay_law_transmits(l11, tmp_path):
    variables, _ = l11
    x = (np.arange(128) - 63.5) * 0.3e-3
    zf, zv = 60 * WL, -20 * WL
    r_f, r_v = np.hypot(x, zf), np.hypot(x, zv)
    focused = (r_f.max() - r_f) / WL                 # computeTXDelays: wavelengths, min 0
    diverging = (r_v - r_v.min()) / WL
    partial = np.zeros(128)
    partial[:40] = 1
    user = np.linspace(0, 3, 128) ** 2                # a law no geometric transmit has
    tx = vantage_l11._struct_array([_tx(focused, focus=60.0), _tx(diverging, focus=-20.0),
                                    _tx(focused, focus=60.0, apod=partial)])
    v = dict(variables, TX=tx)
    rec = _load(tmp_path, v).to_recording(load_data=False)
    assert rec.sequence[0] == Focused((0.0, zf)) and rec.sequence[1] == DivergingWave((0.0, zv))
    d = rec.sequence[2]
    assert isinstance(d, Delays) and np.all(np.isnan(d.delays[40:]))
    np.testing.assert_allclose(d.delays[:40], (focused[:40] - focused[:40].min()) / FC, rtol=0, atol=1e-15)
    v = dict(variables, TX=vantage_l11._struct_array([_tx(user)] * 3))
    seq = _load(tmp_path, v).to_recording(load_data=False).sequence
    assert isinstance(seq[0], Delays)
    np.testing.assert_allclose(seq[0].delays, user / FC, rtol=0, atol=1e-15)


def test_first_firing_delay_moves_t0(l11, tmp_path):
    """Delays that all start 2 periods after the trigger: usbeam's t = 0 is the first firing."""
    variables, _ = l11
    tx = vantage_l11._struct_array([{k: (r[k] + 2.0 if k == "Delay" else r[k]) for k in r.dtype.names}
                                    for r in variables["TX"][0]])
    base = _load(tmp_path, variables).to_recording(load_data=False)
    shifted = _load(tmp_path, dict(variables, TX=tx)).to_recording(load_data=False)
    assert shifted.sequence == base.sequence
    assert shifted.t0 == pytest.approx(base.t0 - 2 / FC, rel=0, abs=1e-15)


def test_refusals_name_the_field(l11, tmp_path):
    variables, _ = l11
    trans = dict(variables["Trans"], ElementPos=variables["Trans"]["ElementPos"] + [[3.0, 0, 0, 0, 0]])
    with pytest.raises(ValueError, match="Trans.ElementPos is not a uniform linear array centred"):
        _load(tmp_path, dict(variables, Trans=trans)).to_recording()
    trans = dict(variables["Trans"], radius=200.0)
    ws = _load(tmp_path, dict(variables, Trans=trans))
    if hasattr(usbeam.geometry, "ConvexArray"):
        assert type(ws.to_recording(load_data=False).probe).__name__ == "ConvexArray"
    else:
        with pytest.raises(ValueError, match="Trans.radius.*ConvexArray"):
            ws.to_recording()
    rcv = variables["Receive"].copy()
    for r in rcv.ravel():
        r["sampleMode"] = "NS200BWI"
    with pytest.raises(ValueError, match=r"sampleMode = 'NS200BWI' is not supported"):
        _load(tmp_path, dict(variables, Receive=rcv)).to_recording()
    rcv = variables["Receive"].copy()
    rcv[0, 1]["startDepth"] = 7.0
    with pytest.raises(ValueError, match="startDepth"):
        _load(tmp_path, dict(variables, Receive=rcv)).to_recording()
    no_pdata = {k: v for k, v in variables.items() if k != "PData"}
    with pytest.raises(ValueError, match="PData is missing"):
        usbeam.Pipeline.from_vantage(_load(tmp_path, no_pdata))
    with pytest.raises(ValueError, match="pdata=2"):
        _load(tmp_path, variables).grid(pdata=2)


def _serve(*args, timeout=60):
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "usbeam", "serve", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=ROOT)


def test_serve_refuses_a_workspace_it_cannot_serve(tmp_path):
    variables, _ = vantage_l11.workspace(n_frames=1, hvmux=True)
    proc = _serve("--vantage", str(_save(tmp_path, variables, "hvmux.mat")), "--name", f"/usbeam_h19_{os.getpid()}")
    assert proc.returncode == 2 and "Trans.HVMux" in proc.stderr
    variables, _ = vantage_l11.workspace(n_frames=1)
    for r in variables["Receive"].ravel():
        r["sampleMode"] = "NS200BWI"
    proc = _serve("--vantage", str(_save(tmp_path, variables, "bwi.mat")), "--name", f"/usbeam_h19_{os.getpid()}")
    assert proc.returncode == 2 and "sampleMode = 'NS200BWI'" in proc.stderr
    proc = _serve("--vantage", "x.mat", "--pipeline", "mypipe.py:make", "--name", f"/usbeam_h19_{os.getpid()}")
    assert proc.returncode == 2 and "not both" in proc.stderr
    proc = _serve("--vantage", str(tmp_path / "absent.mat"), "--name", f"/usbeam_h19_{os.getpid()}")
    assert proc.returncode == 2 and "absent.mat" in proc.stderr


def test_served_vantage_checks_the_client_parameters(l11, tmp_path):
    """serve --vantage fills in the frame and channel map, and refuses a contradicting map
    (REJECTED with the field named) while serving the next client's correct frames."""
    import threading
    from usbeam.live import ShmClient
    from usbeam.live.serve import Server
    variables, truth = l11
    path = _save(tmp_path, variables)
    ws = load_vantage(path)
    name = f"/usbeam_h19_params_{os.getpid()}"
    server = Server(name, vantage=path, slot_bytes=1 << 20, result_bytes=1 << 20, policy="block", log=lambda m: None)
    thread = threading.Thread(target=server.serve, daemon=True)
    thread.start()
    try:
        client = ShmClient(name, timeout=10)
        client.set_params({})                                  # everything from the workspace
        image, _ = client.get(client.push(np.asfortranarray(ws.rcvdata[0])), timeout=10)
        offline = usbeam.Pipeline.from_vantage(ws)(ws.channel_map()(ws.rcvdata[0])[None])
        np.testing.assert_array_equal(image, offline)
        wrong = ws.element_channel[::-1].tolist()
        client.set_params({"frame": {"shape": [2304, 128], "dtype": "int16", "order": "F"},
                           "channel_map": {"element_channel": wrong, "acquisition_row": [0, 768, 1536],
                                           "n_samples": 760}})
        with pytest.raises(ValueError, match="channel_map.element_channel"):
            client.get(client.push(np.asfortranarray(ws.rcvdata[0])), timeout=10)
        client.set_params({"frame": {"shape": [2304, 64], "dtype": "int16", "order": "F"}})
        with pytest.raises(ValueError, match=r"frame.shape \[2304, 64\] differs"):
            client.get(client.push(np.zeros((2304, 64), np.int16, order="F")), timeout=10)
        client.set_params({})
        image, _ = client.get(client.push(np.asfortranarray(ws.rcvdata[1])), timeout=10)
        np.testing.assert_array_equal(image, usbeam.Pipeline.from_vantage(ws)(ws.channel_map()(ws.rcvdata[1])[None]))
        client.close()
    finally:
        server.stop()
        thread.join(timeout=10)
    assert math.isfinite(truth["lens_s"])


@pytest.mark.cuda
def test_from_vantage_on_the_gpu_and_served(l11, tmp_path):
    """backend='cuda': the same pipeline as on the CPU within the chain's CUDA tolerances, and
    ``serve --vantage --backend cuda`` images equal the offline CUDA pipeline's bit for bit."""
    import threading
    from usbeam.live import ShmClient
    from usbeam.live.serve import Server
    variables, truth = l11
    path = _save(tmp_path, variables)
    ws = load_vantage(path)
    frame = ws.channel_map()(ws.rcvdata[0])[None]
    gpu = usbeam.Pipeline.from_vantage(ws, backend="cuda", bmode_output="db")
    cpu = usbeam.Pipeline.from_vantage(ws, bmode_output="db")
    got, want = gpu(frame), cpu(frame)
    iq_gpu, iq_cpu = gpu.image.to_numpy(), cpu.image
    assert np.linalg.norm(iq_gpu - iq_cpu) / np.linalg.norm(iq_cpu) <= TOLERANCES["das_cuda_rel_l2"]
    assert np.median(np.abs(got - want)) <= TOLERANCES["pipeline_cuda_db_median_abs"]
    offline = usbeam.Pipeline.from_vantage(ws, backend="cuda")
    name = f"/usbeam_h19_cuda_{os.getpid()}"
    server = Server(name, vantage=path, backend="cuda", slot_bytes=1 << 20, result_bytes=1 << 20, policy="block",
                    log=lambda m: None)
    thread = threading.Thread(target=server.serve, daemon=True)
    thread.start()
    try:
        client = ShmClient(name, timeout=10)
        client.set_params({})
        for k in range(2):
            image, _ = client.get(client.push(np.asfortranarray(ws.rcvdata[k])), timeout=30)
            np.testing.assert_array_equal(image, offline(ws.channel_map()(ws.rcvdata[k])[None]))
        client.close()
    finally:
        server.stop()
        thread.join(timeout=30)


def test_bs_pipeline_refuses_the_gpu(tmp_path):
    variables, _ = vantage_l11.workspace(n_frames=1, sample_mode="BS100BW")
    with pytest.raises(ValueError, match="runs on the CPU only"):
        usbeam.Pipeline.from_vantage(_load(tmp_path, variables), backend="cuda")
