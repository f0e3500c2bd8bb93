"""Vantage adapter: usbeam.io.load_vantage unit conversions against the numbers written into
a SIMULATED Vantage-layout workspace (no hardware recording is used), the channel map of
its RcvData frames against the reference gather, from_vantage sessions, and the in-process
MATLAB bridge (examples/vantage_bridge.py) driven with arrays laid out as the Vantage lays
them out (int16, rows x channels, column-major).  Independently of the package's own
writer, hand-written Vantage structures (below) with SI values worked out by hand from the
Vantage conventions check geometry, lens correction, RcvBuffer selection, Receive -> TX
pairing through Event, sample rates per sampleMode, Connector / ConnectorES, and the
refusals (HVMux, ambiguous pairing, unknown rate)."""
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.io import savemat

import usbeam

from live_pipelines import CompoundBMode
from reference import live as ref
from usbeam.io import load_vantage
from usbeam.live import from_vantage
from usbeam.live.vantage import save_simulated_workspace

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


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
    # Trans.lensCorrection 0.5 in Trans.units = mm, one way at c: 2 * 0.5 mm / 1480 m/s
    np.testing.assert_allclose(ws.probe.lens_correction_s, 2 * 0.5e-3 / 1480.0)
    np.testing.assert_array_equal(ws.element_channel, truth["element_channel"])   # Connector - 1
    assert ws.fs == 20e6 and ws.n_samples == 200
    np.testing.assert_allclose(ws.t0, 2 * 2.0 / 5e6)                               # startDepth 2 wavelengths
    assert [a.start_row for a in ws.acquisitions] == [0, 256, 512]
    assert [a.transmit for a in ws.acquisitions] == [0, 1, 2]                       # Event(j).tx of Receive(j)
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
    assert ws.fs == 4 * 7.7e6                                   # no sampleMode: NS200BW, 4 per wavelength
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
    # the workspace's own beamformer (Pipeline.from_vantage on its PData grid), not a stand-in
    offline = usbeam.Pipeline.from_vantage(ws)
    grid = ws.grid()
    assert grid.shape == (50, 24)
    for frame_id, k in zip(ids, range(3)):
        image = vantage_bridge.get(frame_id)
        assert image.dtype == np.uint8 and image.shape == grid.shape
        np.testing.assert_array_equal(image, offline(truth["mapped"][k][None])[0])
    assert vantage_bridge.latest().shape == grid.shape
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


# ---- hand-written Vantage structures ------------------------------------------------------
# Plain dicts and MATLAB struct arrays (NumPy record arrays of objects), as scipy.io.savemat
# stores them, with the values a Vantage SetUp script holds.  The expected SI values are
# worked out by hand from the Vantage conventions, not from usbeam or its simulator:
#   c = 1540 m/s, Trans.frequency = 6.25 MHz  ->  wavelength = 1540 / 6.25e6 = 246.4 um
#   TX.Delay, Origin, focus, Receive.startDepth in wavelengths; Trans in Trans.units;
#   Receive.startSample/endSample 1-based rows of RcvData{bufnum}(:, :, frame);
#   Trans.Connector(e) = 1-based RcvData column of element e.

def _structs(records):
    """A 1 x N MATLAB struct array from dicts with the same keys."""
    arr = np.empty((1, len(records)), dtype=[(k, object) for k in records[0]])
    for i, rec in enumerate(records):
        for k, v in rec.items():
            arr[0, i][k] = v
    return arr


def _hand_workspace():
    trans = {"name": "HandL4", "units": "mm", "frequency": 6.25, "numelements": 4.0,
             # x, y, z in mm; columns 4-5 are angles (rad)
             "ElementPos": np.array([[-0.45, 0, 0.02, 0, 0], [-0.15, 0, 0, 0, 0],
                                     [0.15, 0, 0, 0, 0], [0.45, 0, 0.02, 0, 0]]),
             "spacingMm": 0.3, "elementWidth": 0.25, "lensCorrection": 1.4785,
             "Connector": np.array([[5.0], [2.0], [6.0], [1.0]])}
    tx = _structs([
        # focused: delays 0 / 0.25 wavelength, focus 40 wavelengths, origin 0.5 wavelength
        {"waveform": 1.0, "Origin": np.array([0.5, 0.0, 0.0]), "focus": 40.0, "Steer": np.zeros(2),
         "Apod": np.ones(4), "Delay": np.array([0.0, 0.25, 0.25, 0.0])},
        # plane wave: one wavelength more per element
        {"waveform": 1.0, "Origin": np.zeros(3), "focus": 0.0, "Steer": np.array([0.1, 0.0]),
         "Apod": np.array([0.5, 1.0, 1.0, 0.5]), "Delay": np.array([0.0, 1.0, 2.0, 3.0])}])
    rx = {"Apod": np.ones(4), "startDepth": 5.0, "endDepth": 100.0, "mode": 0.0, "sampleMode": "NS200BW",
          "demodFrequency": 6.25}
    receive = _structs([
        dict(rx, bufnum=1.0, framenum=1.0, acqNum=1.0, startSample=1.0, endSample=100.0),
        dict(rx, bufnum=1.0, framenum=1.0, acqNum=2.0, startSample=129.0, endSample=228.0),
        dict(rx, bufnum=1.0, framenum=2.0, acqNum=1.0, startSample=257.0, endSample=356.0),
        dict(rx, bufnum=1.0, framenum=2.0, acqNum=2.0, startSample=385.0, endSample=484.0),
        # a second buffer (a Doppler-like ensemble), frame 1 too: 64 rows, startDepth 2
        dict(rx, bufnum=2.0, framenum=1.0, acqNum=1.0, startSample=1.0, endSample=64.0, startDepth=2.0,
             sampleMode="BS100BW")])
    # the sequence: Receive 1 after TX 2, Receive 2 after TX 1 (the order acqNum does not say),
    # then a processing event with neither
    event = _structs([{"info": "acq 1", "tx": 2.0, "rcv": 1.0, "recon": 0.0, "process": 0.0, "seqControl": 0.0},
                      {"info": "acq 2", "tx": 1.0, "rcv": 2.0, "recon": 0.0, "process": 0.0, "seqControl": 0.0},
                      {"info": "acq 1", "tx": 2.0, "rcv": 3.0, "recon": 0.0, "process": 0.0, "seqControl": 0.0},
                      {"info": "acq 2", "tx": 1.0, "rcv": 4.0, "recon": 0.0, "process": 0.0, "seqControl": 0.0},
                      {"info": "doppler", "tx": 1.0, "rcv": 5.0, "recon": 0.0, "process": 0.0, "seqControl": 0.0},
                      {"info": "show", "tx": 0.0, "rcv": 0.0, "recon": 1.0, "process": 1.0, "seqControl": 0.0}])
    resource = {"Parameters": {"speedOfSound": 1540.0, "numTransmit": 6.0, "numRcvChannels": 6.0},
                "RcvBuffer": _structs([
                    {"datatype": "int16", "rowsPerFrame": 256.0, "colsPerFrame": 6.0, "numFrames": 2.0},
                    {"datatype": "int16", "rowsPerFrame": 64.0, "colsPerFrame": 6.0, "numFrames": 1.0}])}
    # RcvData{1}(row, col, frame) = 10000 (frame-1) + 1000 (col-1) + (row-1): every sample names its place
    rows, cols, frames = np.meshgrid(np.arange(256), np.arange(6), np.arange(2), indexing="ij")
    buf1 = np.asfortranarray((10000 * frames + 1000 * cols + rows).astype(np.int16))
    rows, cols = np.meshgrid(np.arange(64), np.arange(6), indexing="ij")
    buf2 = np.asfortranarray((20000 + 1000 * cols + rows).astype(np.int16))
    rcvdata = np.empty((1, 2), dtype=object)
    rcvdata[0, 0], rcvdata[0, 1] = buf1, buf2
    return {"Trans": trans, "TX": tx, "Receive": receive, "Event": event, "Resource": resource,
            "TW": {"type": "parametric", "Parameters": np.array([6.25, 0.67, 2.0, 1.0])}, "RcvData": rcvdata}


def _save(path, variables, layout="v7"):
    if layout == "v73":
        from matv73 import write_v73
        write_v73(path, variables)
    else:
        savemat(path, variables)
    return path


@pytest.mark.parametrize("layout", ["v7", "v73"])
def test_hand_written_workspace_geometry(tmp_path, layout):
    ws = load_vantage(_save(tmp_path / "hand.mat", _hand_workspace(), layout))
    assert ws.c == 1540.0 and ws.probe.fc == 6.25e6 and ws.buffer == 1
    # ElementPos in mm -> m (x, y, z)
    np.testing.assert_allclose(ws.probe.element_positions,
                               [[-4.5e-4, 0, 2e-5], [-1.5e-4, 0, 0], [1.5e-4, 0, 0], [4.5e-4, 0, 2e-5]],
                               rtol=1e-12, atol=0)
    np.testing.assert_allclose([ws.probe.pitch, ws.probe.element_width], [3.0e-4, 2.5e-4], rtol=1e-12)
    # lensCorrection 1.4785 mm one way at 1540 m/s: 2 * 1.4785e-3 / 1540 = 1.92013e-6 s
    assert abs(ws.probe.lens_correction_s - 1.92013e-6) < 1e-11
    np.testing.assert_array_equal(ws.element_channel, [4, 1, 5, 0])
    # TX(1): 0.25 wavelength = 0.25 / 6.25e6 = 40 ns; focus 40 * 246.4 um = 9.856 mm; origin 123.2 um
    np.testing.assert_allclose(ws.transmits[0].delays_s, [0, 40e-9, 40e-9, 0], rtol=1e-12, atol=0)
    np.testing.assert_allclose(ws.transmits[0].focus_m, 9.856e-3, rtol=1e-12)
    np.testing.assert_allclose(ws.transmits[0].origin_m, [1.232e-4, 0, 0], rtol=1e-12, atol=0)
    # TX(2): 1 wavelength per element = 160 ns per element
    np.testing.assert_allclose(ws.transmits[1].delays_s, [0, 160e-9, 320e-9, 480e-9], rtol=1e-12, atol=0)
    assert ws.transmits[1].focus_m == 0 and ws.transmits[1].steer_rad[0] == 0.1
    np.testing.assert_array_equal(ws.transmits[1].apodization, [0.5, 1, 1, 0.5])
    # frame 1 of buffer 1: acquisitions 1 and 2, after TX 2 and TX 1 (Event)
    assert [(a.acq_num, a.transmit, a.start_row, a.n_samples) for a in ws.acquisitions] == \
        [(1, 1, 0, 100), (2, 0, 128, 100)]
    assert ws.fs == 25e6                                  # NS200BW: 4 x 6.25 MHz
    np.testing.assert_allclose(ws.t0, 1.6e-6, rtol=1e-12)  # 2 x 5 wavelengths / 6.25 MHz
    assert (ws.n_rows, ws.n_channels, ws.n_frames) == (256, 6, 2)
    # channel map: element e of acquisition a, sample s of frame k sits at row start_a + s,
    # column Connector(e) - 1, i.e. holds 10000 k + 1000 (Connector(e) - 1) + start_a + s
    cmap = ws.channel_map()
    s = np.arange(100)
    for k in range(2):
        want = np.array([[10000 * k + 1000 * ch + start + s for ch in (4, 1, 5, 0)] for start in (0, 128)])
        assert ws.rcvdata[k].flags.f_contiguous
        np.testing.assert_array_equal(cmap(ws.rcvdata[k]), want)

    # buffer 2: its one receive (TX 1, BS100BW rows 1..64), its own RcvBuffer and RcvData{2}
    ws2 = load_vantage(tmp_path / "hand.mat", buffer=2)
    assert [(a.acq_num, a.transmit, a.start_row, a.n_samples, a.sample_mode) for a in ws2.acquisitions] == \
        [(1, 0, 0, 64, "BS100BW")]
    assert (ws2.n_rows, ws2.n_channels, ws2.n_frames, ws2.buffer) == (64, 6, 1, 2)
    assert ws2.fs == 12.5e6                               # BS100BW: one I/Q pair per wavelength
    np.testing.assert_allclose(ws2.t0, 0.64e-6, rtol=1e-12)
    want = np.array([[20000 + 1000 * ch + np.arange(64) for ch in (4, 1, 5, 0)]])
    np.testing.assert_array_equal(ws2.channel_map()(ws2.rcvdata[0]), want)
    with pytest.raises(ValueError, match="buffer=3"):
        load_vantage(tmp_path / "hand.mat", buffer=3)
    with pytest.raises(TypeError, match="buffer"):
        load_vantage(tmp_path / "hand.mat", buffer=1.0)


def test_second_receive_buffer_is_not_mixed_into_frame_one(tmp_path):
    # the audit's case: a buffer-2 receive with acqNum 1 and another length, also framenum 1
    v = _hand_workspace()
    ws = load_vantage(_save(tmp_path / "b.mat", v))
    assert ws.n_samples == 100 and len(ws.acquisitions) == 2
    # no receive of buffer 1 at all: refused, naming bufnum
    rx = v["Receive"]
    for r in rx.ravel():
        r["bufnum"] = 2.0
    with pytest.raises(ValueError, match=r"RcvBuffer 1 .*bufnum values present: \[2\]"):
        load_vantage(_save(tmp_path / "b.mat", v))


def test_lens_correction_follows_trans_units(tmp_path):
    # L11-4v (computeTrans: lensCorrection 1.4785 mm) at 6.25 MHz, c = 1540 m/s:
    # 2 x 1.4785 mm / 1540 m/s = 1.92 us.  In wavelengths computeTrans stores
    # 1.4785 x 6.25 / 1.540 = 6.0004 wavelengths, the same time 2 x 6.0004 / 6.25 MHz.
    v = _hand_workspace()
    ws = load_vantage(_save(tmp_path / "l.mat", v))
    assert abs(ws.probe.lens_correction_s - 1.92013e-6) < 1e-11
    scale = 6.25 / 1.540                                  # mm -> wavelengths, as computeTrans
    v["Trans"] = dict(v["Trans"], units="wavelengths", ElementPos=v["Trans"]["ElementPos"] * scale,
                      elementWidth=0.25 * scale, lensCorrection=1.4785 * scale)
    wl = load_vantage(_save(tmp_path / "l.mat", v))
    np.testing.assert_allclose(wl.probe.lens_correction_s, ws.probe.lens_correction_s, rtol=1e-12)
    np.testing.assert_allclose(wl.probe.element_positions, ws.probe.element_positions, rtol=1e-12, atol=1e-18)


def test_receive_tx_pairing(tmp_path):
    v = _hand_workspace()
    # without Event, 2 TX for acquisitions 1, 2 of frame 1 in buffer 1: one TX per acqNum
    del v["Event"]
    ws = load_vantage(_save(tmp_path / "p.mat", v))
    assert [a.transmit for a in ws.acquisitions] == [0, 1]
    # the audit's case: 2 TX, 3 acquisitions and no Event -> refused as ambiguous, not TX 0
    rx = [dict(zip(v["Receive"].dtype.names, r)) for r in v["Receive"].ravel()]
    v["Receive"] = _structs(rx[:2] + [dict(rx[0], acqNum=3.0, startSample=129.0 + 64, endSample=228.0 + 64)])
    v["Resource"]["RcvBuffer"][0, 0]["rowsPerFrame"] = 512.0
    del v["RcvData"]
    with pytest.raises(ValueError, match="ambiguous.*Event"):
        load_vantage(_save(tmp_path / "p.mat", v))
    # one TX: every acquisition follows it
    tx = [dict(zip(v["TX"].dtype.names, t)) for t in v["TX"].ravel()]
    ws = load_vantage(_save(tmp_path / "p.mat", dict(v, TX=_structs(tx[1:]))))
    assert [a.transmit for a in ws.acquisitions] == [0, 0, 0]

    base = _hand_workspace()
    events = [dict(zip(base["Event"].dtype.names, e)) for e in base["Event"].ravel()]
    # Receive 1 after TX 2 in one event and TX 1 in another: ambiguous
    bad = dict(base, Event=_structs(events + [dict(events[0], tx=1.0)]))
    with pytest.raises(ValueError, match=r"Receive\(1\).*ambiguous"):
        load_vantage(_save(tmp_path / "p.mat", bad))
    # Receive 2 used by no event
    bad = dict(base, Event=_structs([e for e in events if e["rcv"] != 2.0]))
    with pytest.raises(ValueError, match=r"Receive\(2\) is used by no Event"):
        load_vantage(_save(tmp_path / "p.mat", bad))
    # receive-only event, and a TX index past the TX array
    bad = dict(base, Event=_structs([dict(e, tx=0.0) if e["rcv"] == 1.0 else e for e in events]))
    with pytest.raises(ValueError, match=r"Event\(1\)\.tx = 0"):
        load_vantage(_save(tmp_path / "p.mat", bad))
    bad = dict(base, Event=_structs([dict(e, tx=3.0) if e["rcv"] == 2.0 else e for e in events]))
    with pytest.raises(ValueError, match=r"Event\(2\)\.tx = 3"):
        load_vantage(_save(tmp_path / "p.mat", bad))


@pytest.mark.parametrize("mode, per_wave", [("NS200BW", 4.0), ("BS100BW", 2.0), ("BS67BW", 4.0 / 3.0),
                                            ("BS50BW", 1.0)])
def test_sample_rate_from_sample_mode(tmp_path, mode, per_wave):
    # no decimSampleRate: the mean rate is 2 x (bandwidth of the mode) x demodFrequency;
    # demodFrequency 5 MHz here differs from Trans.frequency 6.25 MHz on purpose
    v = _hand_workspace()
    for r in v["Receive"].ravel():
        r["sampleMode"], r["demodFrequency"] = mode, 5.0
    ws = load_vantage(_save(tmp_path / "s.mat", v))
    np.testing.assert_allclose(ws.fs, per_wave * 5e6, rtol=1e-15)
    assert ws.acquisitions[0].demod_frequency == 5e6 and ws.acquisitions[0].sample_mode == mode
    # decimSampleRate, when saved, is the rate
    rx = [dict(zip(v["Receive"].dtype.names, r), decimSampleRate=12.5) for r in v["Receive"].ravel()]
    assert load_vantage(_save(tmp_path / "s.mat", dict(v, Receive=_structs(rx)))).fs == 12.5e6


@pytest.mark.parametrize("mode", ["custom", "NS200BWI", "XS300"])
def test_sample_mode_without_rate_is_refused(tmp_path, mode):
    v = _hand_workspace()
    for r in v["Receive"].ravel():
        r["sampleMode"] = mode
    with pytest.raises(ValueError, match=rf"Receive\(1\)\.sampleMode = '{mode}'.*decimSampleRate"):
        load_vantage(_save(tmp_path / "m.mat", v))


def test_connector_es_and_hvmux(tmp_path):
    v = _hand_workspace()
    # newer Vantage software names the wiring ConnectorES
    trans = dict(v["Trans"])
    trans["ConnectorES"] = trans.pop("Connector")
    ws = load_vantage(_save(tmp_path / "c.mat", dict(v, Trans=trans)))
    np.testing.assert_array_equal(ws.element_channel, [4, 1, 5, 0])
    # both, equal: fine; different: refused
    same = dict(trans, Connector=trans["ConnectorES"])
    np.testing.assert_array_equal(load_vantage(_save(tmp_path / "c.mat", dict(v, Trans=same))).element_channel,
                                  [4, 1, 5, 0])
    differ = dict(trans, Connector=np.array([[1.0], [2.0], [3.0], [4.0]]))
    with pytest.raises(ValueError, match="Connector and Trans.ConnectorES differ"):
        load_vantage(_save(tmp_path / "c.mat", dict(v, Trans=differ)))
    with pytest.raises(ValueError, match="Trans.ConnectorES values must be in 1..6"):
        load_vantage(_save(tmp_path / "c.mat", dict(v, Trans=dict(trans, ConnectorES=trans["ConnectorES"] + 2))))
    # HVMux probes and switched apertures: refused, not mis-mapped
    hv = dict(v["Trans"], HVMux={"highVoltageRails": 100.0, "Aperture": np.ones((4, 2))})
    with pytest.raises(ValueError, match="Trans.HVMux"):
        load_vantage(_save(tmp_path / "c.mat", dict(v, Trans=hv)))
    rx = [dict(zip(v["Receive"].dtype.names, r), aperture=1.0) for r in v["Receive"].ravel()]
    assert len(load_vantage(_save(tmp_path / "c.mat", dict(v, Receive=_structs(rx)))).acquisitions) == 2
    rx[1]["aperture"] = 33.0
    with pytest.raises(ValueError, match=r"Receive\(2\)\.aperture = 33.*not supported"):
        load_vantage(_save(tmp_path / "c.mat", dict(v, Receive=_structs(rx))))
