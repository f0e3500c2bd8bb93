"""Vantage adapter: usbeam.io.load_vantage unit conversions against the numbers written into
a SIMULATED Vantage-layout workspace (no hardware recording is used), the channel map of
its RcvData frames against the reference gather, from_vantage sessions, and the in-process
MATLAB bridge (examples/vantage_bridge.py) driven with arrays laid out as the Vantage lays
them out (int16, rows x channels, column-major)."""
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.io import savemat

from live_pipelines import CompoundBMode
from reference import live as ref
from usbeam.io import load_vantage
from usbeam.live import from_vantage
from usbeam.live.vantage import save_simulated_workspace

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.fixture
def workspace(tmp_path):
    path = tmp_path / "sim_vantage.mat"
    truth = save_simulated_workspace(path, n_elements=24, n_channels=48, n_acquisitions=3, n_samples=200,
                                     n_frames=3, c=1480.0, fc_mhz=5.0, pitch_mm=0.3, angles_deg=[-4, 0, 4])
    return path, truth


def test_load_vantage_converts_units(workspace):
    path, truth = workspace
    ws = load_vantage(path)
    assert ws.c == 1480.0
    assert ws.probe.fc == 5e6 and ws.probe.n_elements == 24
    wavelength = 1480.0 / 5e6
    np.testing.assert_allclose(ws.probe.element_positions[:, 0], (np.arange(24) - 11.5) * 0.3e-3, rtol=0, atol=1e-12)
    np.testing.assert_allclose(ws.probe.pitch, 0.3e-3)
    np.testing.assert_allclose(ws.probe.element_width, 0.27e-3)
    np.testing.assert_allclose(ws.probe.lens_correction_s, 2 * 0.5 / 5e6)          # one-way wavelengths
    np.testing.assert_array_equal(ws.element_channel, truth["element_channel"])   # Connector - 1
    assert ws.fs == 20e6 and ws.n_samples == 200
    np.testing.assert_allclose(ws.t0, 2 * 2.0 / 5e6)                               # startDepth 2 wavelengths
    assert [a.start_row for a in ws.acquisitions] == [0, 256, 512]
    assert (ws.n_rows, ws.n_channels, ws.n_frames) == (768, 48, 3)
    # TX delays: wavelengths -> seconds; a steered plane wave has x sin(theta) / c, shifted to >= 0
    for tx, theta in zip(ws.transmits, np.deg2rad([-4, 0, 4])):
        x = ws.probe.element_positions[:, 0]
        want = x * np.sin(theta) / 1480.0
        np.testing.assert_allclose(tx.delays_s, want - want.min(), rtol=0, atol=1e-15)
        np.testing.assert_allclose(tx.steer_rad[0], theta)
    assert ws.waveforms[0]["frequency"] == 5e6
    assert ws.rf_layout == {"shape": (768, 48), "dtype": np.dtype(np.int16), "order": "F"}
    assert wavelength > 0


def test_rcvdata_frames_map_exactly(workspace):
    path, truth = workspace
    ws = load_vantage(path)
    cmap = ws.channel_map()
    for k in range(ws.n_frames):
        frame = ws.rcvdata[k]
        assert frame.flags.f_contiguous and frame.shape == (768, 48)                # as MATLAB holds it
        got = cmap(frame)
        np.testing.assert_array_equal(got, truth["mapped"][k])
        np.testing.assert_array_equal(got, ref.gather(frame, truth["element_channel"], [0, 256, 512], 200))


def test_from_vantage_session_matches_offline(workspace):
    path, truth = workspace
    ws = load_vantage(path)
    session = from_vantage(ws, make_pipeline=lambda w: CompoundBMode(w.channel_map().output_shape), policy="block")
    offline = CompoundBMode((3, 24, 200))
    for k in range(ws.n_frames):
        frame_id = session.push(ws.rcvdata[k])
        np.testing.assert_array_equal(session.get(frame_id, timeout=2).image, offline(truth["mapped"][k]))
    session.stop()
    with pytest.raises(TypeError, match="exactly one"):
        from_vantage(ws)


def test_wavelength_units_and_missing_fields(tmp_path):
    c, f_mhz = 1540.0, 7.7
    wavelength = c / (f_mhz * 1e6)
    trans = {"units": "wavelengths", "frequency": f_mhz, "numelements": 4.0,
             "ElementPos": np.array([[-1.5, 0, 0, 0, 0], [-0.5, 0, 0, 0, 0], [0.5, 0, 0, 0, 0], [1.5, 0, 0, 0, 0]]),
             "Connector": np.array([[4.0], [3.0], [2.0], [1.0]])}
    resource = {"Parameters": {"speedOfSound": c},
                "RcvBuffer": {"datatype": "int16", "rowsPerFrame": 128.0, "colsPerFrame": 4.0, "numFrames": 1.0}}
    tx = {"Delay": np.zeros(4), "Apod": np.ones(4), "focus": 100.0, "Origin": np.array([0.0, 0.0, 0.0])}
    receive = {"startSample": 1.0, "endSample": 100.0, "startDepth": 5.0, "framenum": 1.0, "acqNum": 1.0}
    path = tmp_path / "wl.mat"
    savemat(path, {"Trans": trans, "Resource": resource, "TX": tx, "Receive": receive})
    ws = load_vantage(path)
    np.testing.assert_allclose(ws.probe.element_positions[:, 0], np.array([-1.5, -0.5, 0.5, 1.5]) * wavelength)
    np.testing.assert_allclose(ws.probe.pitch, wavelength)
    np.testing.assert_allclose(ws.transmits[0].focus_m, 100 * wavelength)
    assert ws.fs == 4 * 7.7e6                                   # 4 samples per wavelength by default
    np.testing.assert_array_equal(ws.element_channel, [3, 2, 1, 0])
    assert ws.rcvdata is None

    savemat(path, {"Trans": trans, "Resource": resource, "TX": tx})
    with pytest.raises(ValueError, match="Receive"):
        load_vantage(path)
    bad = dict(receive, endSample=200.0)
    savemat(path, {"Trans": trans, "Resource": resource, "TX": tx, "Receive": bad})
    with pytest.raises(ValueError, match=r"Receive\(1\).*endSample"):
        load_vantage(path)
    savemat(path, {"Trans": dict(trans, Connector=np.array([[9.0], [3.0], [2.0], [1.0]])), "Resource": resource,
                   "TX": tx, "Receive": receive})
    with pytest.raises(ValueError, match="Trans.Connector"):
        load_vantage(path)


def test_matlab_inprocess_bridge_with_vantage_layout(workspace, monkeypatch):
    path, truth = workspace
    monkeypatch.syspath_prepend(str(EXAMPLES))
    import vantage_bridge
    assert vantage_bridge.start(str(path), 3, "block") == (768, 48)
    ws = load_vantage(path)
    # MATLAB hands RcvData{1}(:,:,k) over as a column-major int16 rows x channels matrix
    ids = [vantage_bridge.push(np.asfortranarray(ws.rcvdata[k])) for k in range(3)]
    for frame_id, k in zip(ids, range(3)):
        image = vantage_bridge.get(frame_id)
        assert image.dtype == np.uint8 and image.shape == (24, 100)
        np.testing.assert_array_equal(image, vantage_bridge._CompoundBMode(ws)(truth["mapped"][k]))
    assert vantage_bridge.latest().shape == (24, 100)
    assert vantage_bridge.stats(wait=1.0)["processed"] == 3
    vantage_bridge.stop()
    sys.modules.pop("vantage_bridge", None)


def test_v73_hdf5_workspace_reads_like_v7(tmp_path):
    from matv73 import write_v73
    from usbeam.live.vantage import simulated_workspace
    variables, truth = simulated_workspace(n_elements=16, n_channels=32, n_acquisitions=2, n_samples=130,
                                           n_frames=2, c=1500.0, fc_mhz=6.25)
    v7, v73 = tmp_path / "ws7.mat", tmp_path / "ws73.mat"
    savemat(v7, variables)
    write_v73(v73, variables)
    a, b = load_vantage(v7), load_vantage(v73)
    assert (b.c, b.probe.fc, b.fs, b.t0, b.n_rows, b.n_channels, b.n_frames) == \
           (a.c, a.probe.fc, a.fs, a.t0, a.n_rows, a.n_channels, a.n_frames)
    assert b.probe.name == "SimLinear"
    np.testing.assert_array_equal(b.probe.element_positions, a.probe.element_positions)
    np.testing.assert_array_equal(b.element_channel, truth["element_channel"])
    assert [x.start_row for x in b.acquisitions] == [x.start_row for x in a.acquisitions] == [0, 256]
    for ta, tb in zip(a.transmits, b.transmits):
        np.testing.assert_array_equal(tb.delays_s, ta.delays_s)
    assert b.rcvdata.shape == (2, 512, 32) and b.rcvdata[0].flags.f_contiguous
    cmap = b.channel_map()
    for k in range(2):
        np.testing.assert_array_equal(cmap(b.rcvdata[k]), truth["mapped"][k])
