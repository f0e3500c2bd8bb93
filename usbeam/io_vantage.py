"""Read saved Verasonics Vantage workspaces (MATLAB .mat: v5/v7, and v7.3 through h5py).

Maps the Vantage structures to SI units:

- ``Resource.Parameters.speedOfSound`` -> c (m/s); the Vantage wavelength is
  lambda = c / (Trans.frequency * 1e6), the spatial unit of TX, Receive and (when
  ``Trans.units == 'wavelengths'``) of Trans.
- ``Trans``: frequency (MHz -> Hz), ElementPos (N x >=3, 'mm' or wavelengths -> m),
  elementWidth, spacingMm, lensCorrection (one-way wavelengths -> round-trip s),
  Connector (1-based channel of each element -> 0-based ``element_channel``).
- ``TX(i)``: Delay (wavelengths -> s, i.e. / fc), Apod, Steer (rad), Origin and focus
  (wavelengths -> m).  ``TW(i)``: Parameters [MHz, duty, half cycles, polarity].
- ``Receive(i)`` of frame 1, by acqNum: startSample/endSample (1-based RcvBuffer rows ->
  0-based start row and sample count), decimSampleRate (MHz -> fs in Hz; else 4 samples
  per wavelength for NS200BW), startDepth (wavelengths -> t0 = 2 startDepth / fc, the
  round-trip time of the first sample, lens correction not included), demodFrequency.
- ``Resource.RcvBuffer``: rowsPerFrame x colsPerFrame int16 per frame; ``RcvData{1}``
  (rows x channels x frames, column-major) becomes a zero-copy NumPy view
  (n_frames, n_rows, n_channels) whose frames are Fortran-ordered, as MATLAB holds them.

MATLAB v7.3 (HDF5) workspaces, which large RcvData needs, are read through h5py with the
same result (structs, struct arrays, cells, char, numeric arrays in MATLAB order).  That
path is tested against files written in the v7.3 layout by the tests, not yet against a
file saved by MATLAB itself.
Reference: Verasonics Vantage Sequence Programming Manual (structure fields and units);
MATLAB MAT-file v7.3 = HDF5 with MATLAB_class attributes and object references.
"""
from dataclasses import dataclass, field

import numpy as np


@dataclass
class VantageProbe:
    name: str
    n_elements: int
    element_positions: np.ndarray     # (n_elements, 3) m: x lateral, y elevation, z depth
    pitch: float                      # m
    element_width: float              # m (nan when absent)
    fc: float                         # Hz (Trans.frequency)
    lens_correction_s: float          # round-trip time through the lens, s
    connector: np.ndarray             # (n_elements,) 1-based channel, as Trans.Connector


@dataclass
class VantageTransmit:
    delays_s: np.ndarray              # (n_elements,) s
    apodization: np.ndarray           # (n_elements,)
    steer_rad: np.ndarray             # (2,) [azimuth, elevation]
    origin_m: np.ndarray              # (3,)
    focus_m: float                    # m (0: plane wave)
    waveform: int                     # 0-based index into VantageWorkspace.waveforms


@dataclass
class VantageAcquisition:
    transmit: int                     # 0-based index into VantageWorkspace.transmits
    start_row: int                    # 0-based first RcvBuffer row
    n_samples: int
    fs: float                         # Hz
    t0: float                         # s, time of the first sample
    demod_frequency: float            # Hz
    acq_num: int


@dataclass
class VantageWorkspace:
    c: float
    probe: VantageProbe
    transmits: list
    acquisitions: list                # of frame 1, in acqNum order
    waveforms: list                   # dicts: frequency (Hz), duty, half_cycles, polarity
    n_rows: int                       # RcvBuffer rows per frame
    n_channels: int                   # RcvBuffer columns (receive channels)
    n_frames: int
    rcvdata: np.ndarray = None        # (n_frames, n_rows, n_channels) int16 view, or None
    raw: dict = field(default_factory=dict, repr=False)

    @property
    def element_channel(self):
        """0-based raw channel of each element (Trans.Connector - 1)."""
        return self.probe.connector.astype(np.int64) - 1

    @property
    def rf_layout(self):
        """The raw frame layout: shape (rows, channels), int16, column-major."""
        return {"shape": (self.n_rows, self.n_channels), "dtype": np.dtype(np.int16), "order": "F"}

    @property
    def fs(self):
        return self.acquisitions[0].fs

    @property
    def t0(self):
        return self.acquisitions[0].t0

    @property
    def n_samples(self):
        counts = {a.n_samples for a in self.acquisitions}
        if len(counts) != 1:
            raise ValueError(f"Receive: acquisitions of one frame have different sample counts {sorted(counts)}")
        return counts.pop()

    def channel_map(self):
        """The usbeam.live.ChannelMap from a raw RcvData frame to (acquisitions, elements, samples)."""
        from .live.channel_map import ChannelMap
        return ChannelMap((self.n_rows, self.n_channels), self.element_channel,
                          [a.start_row for a in self.acquisitions], self.n_samples, np.int16)


# ---- MATLAB struct helpers ------------------------------------------------------------

def _field(struct, name, default=None, required=True, where=""):
    if hasattr(struct, name):
        return getattr(struct, name)
    if isinstance(struct, np.void) and struct.dtype.names and name in struct.dtype.names:
        return struct[name]
    if required and default is None:
        raise ValueError(f"{where}.{name} is missing from the Vantage workspace")
    return default


def _scalar(value, name):
    arr = np.asarray(value, dtype=np.float64).ravel()
    if arr.size != 1 or not np.isfinite(arr[0]):
        raise ValueError(f"{name} must be one finite number (got {value!r})")
    return float(arr[0])


def _vector(value, name, n=None):
    arr = np.asarray(value, dtype=np.float64).ravel()
    if n is not None and arr.size != n:
        raise ValueError(f"{name} must have {n} values (got {arr.size})")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite")
    return arr


def _string(value):
    if isinstance(value, str):
        return value
    arr = np.asarray(value)
    return str(arr.item()) if arr.size == 1 else "".join(map(str, arr.ravel()))


def _struct_list(value):
    """A MATLAB struct or struct array as a list of structs."""
    if isinstance(value, np.ndarray):
        return list(value.ravel())
    return [value]


def _unwrap_cell(value):
    while isinstance(value, np.ndarray) and value.dtype == object:
        if value.size < 1:
            return None
        value = value.ravel()[0]
    return value


# ---- MATLAB v7.3 (HDF5) -----------------------------------------------------------------

class _MatStruct:
    """A MATLAB struct read from a v7.3 file (fields as attributes, like scipy's mat_struct)."""

    def __init__(self, fields):
        self._fieldnames = list(fields)
        self.__dict__.update(fields)


def _h5_squeeze(arr):
    arr = np.squeeze(arr)
    return arr[()] if arr.ndim == 0 else arr


def _h5_value(h5file, obj):
    """Convert a v7.3 group/dataset to what loadmat(squeeze_me=True, struct_as_record=False)
    would give: numeric arrays in MATLAB order (a transposed view, column-major), strings,
    _MatStruct objects, object arrays for struct arrays and cells."""
    import h5py
    cls = obj.attrs.get("MATLAB_class", b"")
    cls = cls.decode() if isinstance(cls, bytes) else str(cls)
    if isinstance(obj, h5py.Group):
        fields = {name: obj[name] for name in obj.keys() if not name.startswith("#")}
        refs = {n: d for n, d in fields.items()
                if isinstance(d, h5py.Dataset) and d.dtype == h5py.ref_dtype and "MATLAB_class" not in d.attrs}
        if fields and len(refs) == len(fields):  # struct array: per field, one reference per element
            n = next(iter(refs.values())).size
            items = np.empty(n, dtype=object)
            for i in range(n):
                items[i] = _MatStruct({name: _h5_value(h5file, h5file[d[()].T.ravel()[i]]) for name, d in refs.items()})
            return items[0] if n == 1 else items
        return _MatStruct({name: _h5_value(h5file, value) for name, value in fields.items()})
    if obj.attrs.get("MATLAB_empty", 0):
        return np.zeros(0)
    data = obj[()]
    if cls == "char":
        return "".join(chr(c) for c in np.asarray(data).T.ravel())
    if cls == "cell":
        refs = np.asarray(data).T                  # MATLAB order
        cells = np.empty(refs.shape, dtype=object)
        for index in np.ndindex(refs.shape):
            cells[index] = _h5_value(h5file, h5file[refs[index]])
        return _h5_squeeze(cells) if cells.size != 1 else cells.reshape(1)
    arr = np.asarray(data).T                       # HDF5 holds MATLAB's column-major data reversed
    if cls == "logical":
        arr = arr.astype(bool)
    return _h5_squeeze(arr)


def _load_v73(path):
    import h5py
    with h5py.File(path, "r") as f:
        return {name: _h5_value(f, f[name]) for name in f.keys() if not name.startswith("#")}


def _load_mat(path):
    from scipy.io import loadmat
    try:
        import h5py
    except ImportError:
        h5py = None
    if h5py is not None and h5py.is_hdf5(path):  # v7.3
        return _load_v73(path)
    try:
        return loadmat(path, squeeze_me=True, struct_as_record=False)
    except NotImplementedError as exc:  # v7.3 without h5py
        raise ValueError(f"{path}: a MATLAB v7.3 (HDF5) workspace needs h5py (pip install h5py), "
                         f"or re-save it with save(..., '-v7')") from exc


# ---- the loader ---------------------------------------------------------------------

def load_vantage(path, load_data=True):
    """Read a saved Vantage workspace: probe, transmits, receives, channel map, RF layout.

    Returns a :class:`VantageWorkspace`; ``ws.channel_map()`` builds the live channel
    map and ``ws.rcvdata[k]`` is frame k as MATLAB holds it (rows x channels,
    column-major).  Raises ValueError naming the missing or inconsistent field.
    """
    mat = _load_mat(path)
    for name in ("Trans", "Resource", "TX", "Receive"):
        if name not in mat:
            raise ValueError(f"{path}: the Vantage structure {name} is missing")
    resource, trans = mat["Resource"], mat["Trans"]
    params = _field(resource, "Parameters", where="Resource")
    c = _scalar(_field(params, "speedOfSound", 1540.0, required=False, where="Resource.Parameters"),
                "Resource.Parameters.speedOfSound")
    if c <= 0:
        raise ValueError(f"Resource.Parameters.speedOfSound must be > 0 (got {c})")

    fc = _scalar(_field(trans, "frequency", where="Trans"), "Trans.frequency") * 1e6
    if fc <= 0:
        raise ValueError("Trans.frequency must be > 0")
    wavelength = c / fc
    units = _string(_field(trans, "units", "mm", required=False)).strip().lower()
    if units not in ("mm", "wavelengths"):
        raise ValueError(f"Trans.units must be 'mm' or 'wavelengths' (got {units!r})")
    trans_scale = 1e-3 if units == "mm" else wavelength
    n_elements = int(_scalar(_field(trans, "numelements", where="Trans"), "Trans.numelements"))
    pos = np.asarray(_field(trans, "ElementPos", where="Trans"), dtype=np.float64).reshape(n_elements, -1)
    if pos.shape[1] < 3:
        raise ValueError("Trans.ElementPos must have >= 3 columns (x, y, z)")
    positions = pos[:, :3] * trans_scale
    spacing_mm = _field(trans, "spacingMm", None, required=False)
    pitch = (_scalar(spacing_mm, "Trans.spacingMm") * 1e-3 if spacing_mm is not None
             else float(np.median(np.diff(positions[:, 0]))) if n_elements > 1 else float("nan"))
    width = _field(trans, "elementWidth", None, required=False)
    width = _scalar(width, "Trans.elementWidth") * trans_scale if width is not None else float("nan")
    lens = _field(trans, "lensCorrection", 0.0, required=False)
    connector = np.asarray(_field(trans, "Connector", np.arange(1, n_elements + 1), required=False)).ravel()
    connector = connector.astype(np.int64)
    if connector.size != n_elements:
        raise ValueError(f"Trans.Connector must have {n_elements} entries (got {connector.size})")
    probe = VantageProbe(_string(_field(trans, "name", "unknown", required=False)), n_elements, positions, pitch,
                         width, fc, 2 * _scalar(lens, "Trans.lensCorrection") / fc, connector)

    waveforms = []
    for i, tw in enumerate(_struct_list(mat.get("TW", []))):
        p = _vector(_field(tw, "Parameters", [fc / 1e6, 0.67, 2, 1], required=False), f"TW({i + 1}).Parameters")
        waveforms.append({"frequency": p[0] * 1e6, "duty": p[1] if p.size > 1 else np.nan,
                          "half_cycles": p[2] if p.size > 2 else np.nan, "polarity": p[3] if p.size > 3 else 1.0})

    transmits = []
    for i, tx in enumerate(_struct_list(mat["TX"])):
        where = f"TX({i + 1})"
        delay = _vector(_field(tx, "Delay", np.zeros(n_elements), required=False), f"{where}.Delay", n_elements)
        apod = _vector(_field(tx, "Apod", np.ones(n_elements), required=False), f"{where}.Apod", n_elements)
        steer = _vector(_field(tx, "Steer", [0.0, 0.0], required=False), f"{where}.Steer")
        origin = _vector(_field(tx, "Origin", [0.0, 0.0, 0.0], required=False), f"{where}.Origin")
        focus = _scalar(_field(tx, "focus", 0.0, required=False), f"{where}.focus")
        waveform = int(_scalar(_field(tx, "waveform", 1, required=False), f"{where}.waveform")) - 1
        transmits.append(VantageTransmit(delay / fc, apod, np.resize(steer, 2), np.resize(origin, 3) * wavelength,
                                         focus * wavelength, waveform))

    rcv_buffer = _struct_list(_field(resource, "RcvBuffer", where="Resource"))[0]
    n_rows = int(_scalar(_field(rcv_buffer, "rowsPerFrame", where="Resource.RcvBuffer"), "RcvBuffer.rowsPerFrame"))
    n_channels = int(_scalar(_field(rcv_buffer, "colsPerFrame", where="Resource.RcvBuffer"),
                             "RcvBuffer.colsPerFrame"))
    n_frames = int(_scalar(_field(rcv_buffer, "numFrames", 1, required=False), "RcvBuffer.numFrames"))
    datatype = _string(_field(rcv_buffer, "datatype", "int16", required=False))
    if datatype != "int16":
        raise ValueError(f"Resource.RcvBuffer.datatype must be 'int16' (got {datatype!r})")
    if connector.max() > n_channels or connector.min() < 1:
        raise ValueError(f"Trans.Connector values must be in 1..{n_channels} (RcvBuffer.colsPerFrame)")

    acquisitions = []
    for i, rx in enumerate(_struct_list(mat["Receive"])):
        where = f"Receive({i + 1})"
        if int(_scalar(_field(rx, "framenum", 1, required=False), f"{where}.framenum")) != 1:
            continue
        start = int(_scalar(_field(rx, "startSample", where=where), f"{where}.startSample"))
        end = int(_scalar(_field(rx, "endSample", where=where), f"{where}.endSample"))
        if not 1 <= start <= end <= n_rows:
            raise ValueError(f"{where}: startSample {start} .. endSample {end} must lie in 1..{n_rows}")
        decim = _field(rx, "decimSampleRate", None, required=False)
        fs = _scalar(decim, f"{where}.decimSampleRate") * 1e6 if decim is not None else 4 * fc
        start_depth = _scalar(_field(rx, "startDepth", 0.0, required=False), f"{where}.startDepth")
        demod = _field(rx, "demodFrequency", None, required=False)
        acq_num = int(_scalar(_field(rx, "acqNum", i + 1, required=False), f"{where}.acqNum"))
        acquisitions.append(VantageAcquisition(
            transmit=acq_num - 1 if acq_num - 1 < len(transmits) else 0, start_row=start - 1,
            n_samples=end - start + 1, fs=fs, t0=2 * start_depth / fc,
            demod_frequency=_scalar(demod, f"{where}.demodFrequency") * 1e6 if demod is not None else fc,
            acq_num=acq_num))
    if not acquisitions:
        raise ValueError("Receive: no acquisition belongs to frame 1")
    acquisitions.sort(key=lambda a: a.acq_num)

    rcvdata = None
    if load_data and "RcvData" in mat:
        data = _unwrap_cell(mat["RcvData"])
        if data is not None:
            data = np.asarray(data)
            if data.dtype != np.int16:
                raise ValueError(f"RcvData{{1}} must be int16 (got {data.dtype})")
            if data.ndim == 2:
                data = data[:, :, None]
            if data.shape[:2] != (n_rows, n_channels):
                raise ValueError(f"RcvData{{1}} has shape {data.shape[:2]} per frame, RcvBuffer says "
                                 f"({n_rows}, {n_channels})")
            rcvdata = np.moveaxis(data, 2, 0)  # (frames, rows, channels), frames column-major
            n_frames = rcvdata.shape[0]
    return VantageWorkspace(c, probe, transmits, acquisitions, waveforms, n_rows, n_channels, n_frames, rcvdata,
                            raw={k: v for k, v in mat.items() if not k.startswith("__") and k != "RcvData"})
