"""Live sessions from Verasonics Vantage structures, and a simulated Vantage workspace.

``from_vantage`` builds the channel map (Trans.Connector, Receive(i).startSample /
endSample) from a workspace read by :func:`usbeam.io.load_vantage` (or the same
structures), so that each RcvData frame pushed as MATLAB holds it (int16, rows x
channels, column-major) is mapped to (acquisitions, elements, samples) during the copy.

``save_simulated_workspace`` writes a .mat laid out as the Vantage saves its workspace
(Trans, TX, TW, Receive, Event, Resource, PData, RcvData), with RF from this package's plane-wave
simulator.  It is SIMULATED data for tests and demos, not a hardware recording.
"""
import numpy as np

from ..io.vantage import VantageWorkspace, load_vantage
from .scanner import simulate_plane_wave_rf, to_rcvdata
from .session import Session


def channel_map_from_vantage(workspace, buffer=1):
    """The ChannelMap of a VantageWorkspace (or a path to a saved workspace, whose RcvBuffer
    ``buffer`` is read)."""
    if not isinstance(workspace, VantageWorkspace):
        workspace = load_vantage(workspace, load_data=False, buffer=buffer)
    return workspace.channel_map()


def from_vantage(workspace, pipeline=None, *, make_pipeline=None, buffer=1, **session_kwargs):
    """A Session that takes Vantage RcvData frames.

    workspace : VantageWorkspace or path of a saved workspace (then ``buffer`` picks the
        RcvBuffer whose frames are pushed, 1-based as Receive.bufnum).
    pipeline : a pipeline whose input is (n_acquisitions, n_elements, n_samples) int16, or
        a plain callable (then give output_shape and output_dtype).
    make_pipeline : alternatively, ``make_pipeline(workspace) -> pipeline`` (it receives the
        probe, transmits, c, fs, t0, ... to build a beamformer).
    Other keywords go to Session (slots, policy, results, callback, ...).
    """
    if not isinstance(workspace, VantageWorkspace):
        workspace = load_vantage(workspace, load_data=False, buffer=buffer)
    if (pipeline is None) == (make_pipeline is None):
        raise TypeError("give exactly one of pipeline and make_pipeline")
    if make_pipeline is not None:
        pipeline = make_pipeline(workspace)
    cmap = workspace.channel_map()
    session_kwargs.setdefault("input_shape", None)
    if not hasattr(pipeline, "input_shape"):  # plain callable: it takes the mapped frame
        session_kwargs["input_shape"] = cmap.output_shape
        session_kwargs.setdefault("input_dtype", np.int16)
    return Session(pipeline, channel_map=cmap, **session_kwargs)


class VantageFactory:
    """The pipeline factory of ``usbeam serve --vantage``: the workspace's beamformer
    (``usbeam.Pipeline.from_vantage``), built once at start-up (so a workspace it cannot
    serve, HVMux or an unsupported sample mode, stops the server before any client
    connects) and reused for every parameter set.

    ``complete_params`` fills in the frame layout and channel map of the workspace where the
    client's parameters leave them out, and refuses parameters that contradict it (the
    message names the field), so a client whose Trans/Receive differ from the served
    workspace gets its frames REJECTED with the reason instead of a wrong image."""

    def __init__(self, workspace, *, pdata=1, buffer=1, backend="cpu", **overrides):
        from ..pipelines.bmode import Pipeline
        if not isinstance(workspace, VantageWorkspace):
            workspace = load_vantage(str(workspace), load_data=False, buffer=buffer)
        self.workspace = workspace
        self.pdata = pdata
        self.overrides = dict(overrides)
        self._pipelines = {backend: Pipeline.from_vantage(workspace, pdata=pdata, backend=backend, **self.overrides)}
        cmap = workspace.channel_map()
        self._frame = {"shape": [workspace.n_rows, workspace.n_channels], "dtype": "int16", "order": "F"}
        self._cmap = {"element_channel": [int(v) for v in workspace.element_channel],
                      "acquisition_row": [int(a.start_row) for a in workspace.acquisitions],
                      "n_samples": int(cmap.output_shape[-1])}

    def complete_params(self, params):
        params = dict(params)
        frame = params.get("frame")
        if frame is None:
            params["frame"] = dict(self._frame)
        else:
            got = [int(v) for v in np.atleast_1d(frame.get("shape", []))]
            if got != self._frame["shape"]:
                raise ValueError(f"frame.shape {got} differs from the workspace's RcvBuffer: rowsPerFrame x "
                                 f"colsPerFrame = {self._frame['shape']}")
            if str(frame.get("dtype", "int16")) != "int16" or str(frame.get("order", "F")).upper() != "F":
                raise ValueError(f"frame must be int16 in column-major order, as RcvData (got dtype "
                                 f"{frame.get('dtype')!r}, order {frame.get('order')!r})")
        cmap = params.get("channel_map")
        if cmap is None:
            params["channel_map"] = dict(self._cmap)
        else:
            for key, want in self._cmap.items():
                got = cmap.get(key)
                got = [int(v) for v in np.atleast_1d(got)] if isinstance(want, list) else got
                if got != want:
                    raise ValueError(f"channel_map.{key} = {got} differs from the workspace's {want} "
                                     f"(Trans.Connector / Receive.startSample, endSample)")
        return params

    def __call__(self, params):
        backend = params.get("backend", "cpu")
        if backend not in self._pipelines:
            from ..pipelines.bmode import Pipeline
            self._pipelines[backend] = Pipeline.from_vantage(self.workspace, pdata=self.pdata, backend=backend,
                                                             **self.overrides)
        return self._pipelines[backend]


def _struct_array(records):
    """A list of dicts with the same keys -> a numpy record array (a MATLAB struct array)."""
    keys = list(records[0])
    arr = np.empty((1, len(records)), dtype=[(k, object) for k in keys])
    for i, rec in enumerate(records):
        for k in keys:
            arr[0, i][k] = rec[k]
    return arr


def save_simulated_workspace(path, **options):
    """Write a SIMULATED Vantage-layout workspace (.mat v5, scipy.io.savemat); returns the
    ground truth of :func:`simulated_workspace` (options as there)."""
    from scipy.io import savemat
    variables, truth = simulated_workspace(**options)
    savemat(path, variables, do_compression=False)
    return truth


def simulated_workspace(*, n_elements=32, n_channels=64, n_acquisitions=3, n_samples=256, n_frames=4, c=1480.0,
                        fc_mhz=5.0, samples_per_wave=4, pitch_mm=0.3, angles_deg=None, seed=0):
    """The variables of a SIMULATED Vantage workspace, as savemat takes them, and the truth.

    Elements are wired to channels by a shuffled Trans.Connector; acquisition a occupies
    rows a*rows_per_acq + 1 .. + n_samples (rows_per_acq = n_samples rounded up to 128,
    as the Vantage pads).  Returns dict(mapped=(n_frames, n_acquisitions, n_elements,
    n_samples) int16, element_channel, start_rows, rows_per_acq, c, fc, fs, t0, ...).
    """
    rng = np.random.default_rng(seed)
    fc = fc_mhz * 1e6
    wavelength = c / fc
    fs = samples_per_wave * fc
    angles = np.deg2rad(np.linspace(-5, 5, n_acquisitions) if angles_deg is None else np.asarray(angles_deg))
    rows_per_acq = int(np.ceil(n_samples / 128) * 128)
    n_rows = rows_per_acq * n_acquisitions
    element_channel = rng.permutation(n_channels)[:n_elements]
    x_mm = (np.arange(n_elements) - (n_elements - 1) / 2) * pitch_mm
    start_depth_wl = 2.0
    mapped = np.stack([simulate_plane_wave_rf(n_frames, n_elements, n_samples, fs=fs, fc=fc, c=c,
                                              pitch=pitch_mm * 1e-3, seed=seed + a) for a in range(n_acquisitions)],
                      axis=1)                                   # (frames, acq, elements, samples)
    raw = to_rcvdata(mapped, element_channel, n_channels, rows_per_acq)   # (frames, rows, channels), F frames
    rcv = np.asfortranarray(np.moveaxis(raw, 0, 2))               # MATLAB rows x channels x frames
    rcvdata = np.empty((1, 1), dtype=object)
    rcvdata[0, 0] = rcv

    trans = {"name": "SimLinear", "units": "mm", "frequency": fc_mhz, "numelements": float(n_elements),
             "ElementPos": np.column_stack([x_mm, np.zeros((n_elements, 4))]), "spacingMm": pitch_mm,
             "elementWidth": 0.9 * pitch_mm, "lensCorrection": 0.5,        # mm (Trans.units), one way
             "Connector": (element_channel + 1).astype(np.float64).reshape(-1, 1)}
    tx = [{"waveform": 1.0, "Origin": np.zeros(3), "focus": 0.0, "Steer": np.array([a, 0.0]),
           "Apod": np.ones(n_elements),
           "Delay": (x_mm * 1e-3 * np.sin(a) / wavelength) - (x_mm * 1e-3 * np.sin(a) / wavelength).min()}
          for a in angles]
    receive = [{"Apod": np.ones(n_elements), "startDepth": start_depth_wl, "endDepth": 200.0, "TGC": 1.0,
                "bufnum": 1.0, "framenum": float(f + 1), "acqNum": float(a + 1), "sampleMode": "NS200BW",
                "demodFrequency": fc_mhz, "decimSampleRate": fs / 1e6, "mode": 0.0,
                "startSample": float(a * rows_per_acq + 1), "endSample": float(a * rows_per_acq + n_samples)}
               for f in range(n_frames) for a in range(n_acquisitions)]
    resource = {"Parameters": {"numTransmit": float(n_channels), "numRcvChannels": float(n_channels),
                               "speedOfSound": c, "connector": 1.0, "simulateMode": 1.0},
                "RcvBuffer": {"datatype": "int16", "rowsPerFrame": float(n_rows), "colsPerFrame": float(n_channels),
                              "numFrames": float(n_frames)}}
    tw = {"type": "parametric", "Parameters": np.array([fc_mhz, 0.67, 2.0, 1.0]), "peak": 1.5}
    # one acquisition event per Receive (TX(a) for acquisition a), as a frame loop of a sequence
    event = [{"info": f"frame {f + 1} acq {a + 1}", "tx": float(a + 1), "rcv": float(f * n_acquisitions + a + 1),
              "recon": 0.0, "process": 0.0, "seqControl": 0.0}
             for f in range(n_frames) for a in range(n_acquisitions)]
    # the image grid (wavelengths): x every pitch from the first element, z from startDepth to
    # the last sample's depth every half wavelength (samples_per_wave samples per wavelength of
    # round trip = half a wavelength of depth)
    pitch_wl = pitch_mm * 1e-3 / wavelength
    depth_wl = n_samples / samples_per_wave / 2
    pdata = {"PDelta": np.array([pitch_wl, 0.0, 0.5]), "Size": np.array([float(int(depth_wl / 0.5)),
                                                                        float(n_elements), 1.0]),
             "Origin": np.array([x_mm[0] * 1e-3 / wavelength, 0.0, start_depth_wl])}
    variables = {"Trans": trans, "TX": _struct_array(tx), "TW": tw, "Receive": _struct_array(receive),
                 "Resource": resource, "RcvData": rcvdata, "Event": _struct_array(event), "PData": pdata}
    return variables, dict(mapped=mapped, element_channel=element_channel, start_rows=np.arange(n_acquisitions) * rows_per_acq,
                rows_per_acq=rows_per_acq, n_rows=n_rows, c=c, fc=fc, fs=fs, t0=2 * start_depth_wl / fc,
                angles=angles, x_m=x_mm * 1e-3, wavelength=wavelength, lens_s=2 * 0.5e-3 / c)
