"""A hand-written Verasonics Vantage workspace of an L11-4v-like linear probe with a point
phantom, written from the Vantage conventions (Sequence Programming Manual, computeTrans,
computeTXDelays) and NOT with usbeam's own writer (usbeam.live.vantage.save_simulated_workspace),
so that usbeam's reading of it is checked against an independent description.

Set-up (what a VSX SetUp script for plane-wave compounding holds):
- Trans: 128 elements at 0.3 mm, 6.25 MHz, Trans.units = 'wavelengths' (ElementPos,
  elementWidth and lensCorrection in wavelengths of 1540 m/s at 6.25 MHz, as computeTrans
  converts them), lensCorrection 1.4785 mm one way (computeTrans' L11-4v value), a 128-channel
  Connector map (element e -> a shuffled channel, hand-written below).
- TX(1..3): plane waves steered -0.1, 0, 0.1 rad, Delay = x sin(theta) / lambda shifted to
  min 0 (computeTXDelays), full Apod.
- Receive(1..3 x frames): NS200BW (4 samples per wavelength, decimSampleRate 25 MHz),
  startDepth 5, endDepth 100 wavelengths -> 760 samples rounded up to 768 rows per
  acquisition (the Vantage pads to 128), acquisitions stacked in RcvBuffer rows.
- Event: per frame 3 acquisition events (tx = a, rcv = (f-1)*3 + a) and a process event
  (tx = rcv = 0) calling the External function.
- PData: x from the first element every pitch, z from startDepth every lambda/2.
- RcvData{1}: int16, rows x channels x frames, the echo of each point target: a
  Gaussian-windowed 6.25 MHz cosine at the round-trip time (plane-wave arrival from the
  first-firing element + return path + the lens both ways), written in plain NumPy here.
"""
import numpy as np

C = 1540.0
FC_MHZ = 6.25
N_ELEMENTS = 128
PITCH_MM = 0.3
LENS_MM = 1.4785
ANGLES = (-0.1, 0.0, 0.1)
START_DEPTH_WL, END_DEPTH_WL = 5.0, 100.0
ROWS_PER_ACQ = 768
N_SAMPLES = 760
# (x, z) in m of the point targets, and their amplitudes
TARGETS = ((-4.0e-3, 9.0e-3, 1.0), (0.0, 14.0e-3, 1.0), (5.0e-3, 19.0e-3, 0.8))


def connector():
    """Trans.Connector: 1-based channel of each element (a 128-channel map: the two halves of
    the array swapped and the odd elements of each half reversed)."""
    ch = np.empty(N_ELEMENTS, dtype=np.int64)
    half = N_ELEMENTS // 2
    for e in range(N_ELEMENTS):
        g, k = divmod(e, half)
        if k % 2:
            k = half - k            # odd positions reversed inside the half (1 <-> 63, ...)
        ch[e] = (1 - g) * half + k + 1
    assert sorted(ch) == list(range(1, N_ELEMENTS + 1))
    return ch


def _struct_array(records):
    keys = list(records[0])
    arr = np.empty((1, len(records)), dtype=[(k, object) for k in keys])
    for i, rec in enumerate(records):
        for k in keys:
            arr[0, i][k] = rec[k]
    return arr


def workspace(n_frames=8, sample_mode="NS200BW", seed=0, hvmux=False, noise=3.0):
    """(variables for scipy.io.savemat, truth dict)."""
    fc = FC_MHZ * 1e6
    wl = C / fc
    pitch_wl = PITCH_MM * 1e-3 / wl
    x_wl = (np.arange(N_ELEMENTS) - (N_ELEMENTS - 1) / 2) * pitch_wl
    lens_wl = LENS_MM * 1e-3 / wl
    trans = {"name": "L11-4v", "units": "wavelengths", "frequency": FC_MHZ, "type": 0.0,
             "numelements": float(N_ELEMENTS), "spacingMm": PITCH_MM, "spacing": pitch_wl,
             "elementWidth": 0.27e-3 / wl, "lensCorrection": lens_wl, "Bandwidth": np.array([4.0, 11.0]),
             "ElementPos": np.column_stack([x_wl, np.zeros((N_ELEMENTS, 4))]),
             "Connector": connector().astype(np.float64).reshape(-1, 1), "maxHighVoltage": 50.0}
    if hvmux:
        trans["HVMux"] = {"highVoltageRails": 100.0, "Aperture": np.ones((N_ELEMENTS, 1))}
    tx = []
    for a in ANGLES:
        d = x_wl * np.sin(a)
        tx.append({"waveform": 1.0, "Origin": np.zeros(3), "focus": 0.0, "Steer": np.array([a, 0.0]),
                   "Apod": np.ones(N_ELEMENTS), "Delay": d - d.min()})
    n_acq = len(ANGLES)
    decim = 4 * FC_MHZ     # the A/D rate after decimation: 4 samples per period (for the BS modes too)
    receive = [{"Apod": np.ones(N_ELEMENTS), "startDepth": START_DEPTH_WL, "endDepth": END_DEPTH_WL,
                "TGC": 1.0, "bufnum": 1.0, "framenum": float(f + 1), "acqNum": float(a + 1),
                "sampleMode": sample_mode, "demodFrequency": FC_MHZ, "decimSampleRate": decim, "mode": 0.0,
                "startSample": float(a * ROWS_PER_ACQ + 1), "endSample": float(a * ROWS_PER_ACQ + N_SAMPLES),
                "callMediaFunc": 0.0}
               for f in range(n_frames) for a in range(n_acq)]
    event = []
    for f in range(n_frames):
        for a in range(n_acq):
            event.append({"info": f"acquire frame {f + 1} angle {a + 1}", "tx": float(a + 1),
                          "rcv": float(f * n_acq + a + 1), "recon": 0.0, "process": 0.0, "seqControl": 1.0})
        event.append({"info": "External processing", "tx": 0.0, "rcv": 0.0, "recon": 0.0, "process": 1.0,
                      "seqControl": 2.0})
    n_rows = ROWS_PER_ACQ * n_acq
    resource = {"Parameters": {"numTransmit": 128.0, "numRcvChannels": 128.0, "speedOfSound": C,
                               "connector": 1.0, "simulateMode": 0.0},
                "RcvBuffer": {"datatype": "int16", "rowsPerFrame": float(n_rows), "colsPerFrame": 128.0,
                              "numFrames": float(n_frames)}}
    pdata = {"PDelta": np.array([pitch_wl, 0.0, 0.5]),
             "Size": np.array([190.0, float(N_ELEMENTS), 1.0]),
             "Origin": np.array([x_wl[0], 0.0, START_DEPTH_WL])}
    tw = {"type": "parametric", "Parameters": np.array([FC_MHZ, 0.67, 2.0, 1.0])}

    # ---- the echoes, in the Vantage's own time (t = 0 at the transmit trigger) -----------
    rng = np.random.default_rng(seed)
    x_m = x_wl * wl
    t_sample = 2 * START_DEPTH_WL / fc + np.arange(N_SAMPLES) / (4 * fc)    # NS200BW: 4 fc
    if sample_mode != "NS200BW":   # quadrature pairs: two samples a quarter period apart per pair period
        periods = {"BS100BW": 1.0, "BS67BW": 1.5, "BS50BW": 2.0}[sample_mode]
        k = np.arange(N_SAMPLES // 2)
        t_pair = 2 * START_DEPTH_WL / fc + k * periods / fc
        t_sample = np.stack([t_pair, t_pair + 0.25 / fc], axis=1).ravel()
    lens_s = 2 * LENS_MM * 1e-3 / C
    sigma = 0.6 / fc
    rf = np.zeros((n_acq, N_ELEMENTS, N_SAMPLES))
    for a, theta in enumerate(ANGLES):
        x_first = x_m.min() if theta >= 0 else x_m.max()
        for (px, pz, amp) in TARGETS:
            t_tx = ((px - x_first) * np.sin(theta) + pz * np.cos(theta)) / C
            t_rx = np.hypot(px - x_m, pz) / C
            tau = t_tx + t_rx + lens_s                                    # (elements,)
            dt = t_sample[None, :] - tau[:, None]
            rf[a] += amp * np.cos(2 * np.pi * fc * dt) * np.exp(-(dt / sigma) ** 2)
    frames = np.empty((n_frames, n_acq, N_ELEMENTS, N_SAMPLES), np.int16)
    for f in range(n_frames):
        frames[f] = np.round(2000.0 * rf * (1 + 0.05 * f) + noise * rng.standard_normal(rf.shape)).astype(np.int16)
    channel = connector() - 1
    rcv = np.zeros((n_rows, 128, n_frames), dtype=np.int16, order="F")
    for f in range(n_frames):
        for a in range(n_acq):
            rcv[a * ROWS_PER_ACQ:a * ROWS_PER_ACQ + N_SAMPLES, channel, f] = frames[f, a].T
    rcvdata = np.empty((1, 1), dtype=object)
    rcvdata[0, 0] = rcv
    variables = {"Trans": trans, "TX": _struct_array(tx), "TW": tw, "Receive": _struct_array(receive),
                 "Event": _struct_array(event), "Resource": resource, "PData": pdata, "RcvData": rcvdata}
    truth = {"frames": frames, "channel": channel, "n_rows": n_rows, "targets": TARGETS, "fc": fc, "wl": wl,
             "lens_s": lens_s, "t0_vantage": 2 * START_DEPTH_WL / fc, "x_m": x_m, "pitch": PITCH_MM * 1e-3,
             "z_grid": (START_DEPTH_WL + 0.5 * np.arange(190)) * wl, "x_grid": x_m}
    return variables, truth


def save(path, **options):
    from scipy.io import savemat
    variables, truth = workspace(**options)
    savemat(str(path), variables, do_compression=False)
    return truth
