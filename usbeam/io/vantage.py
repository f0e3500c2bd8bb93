"""Read saved Verasonics Vantage workspaces (MATLAB .mat: v5/v7, and v7.3 through h5py).

Maps the Vantage structures to SI units:

- ``Resource.Parameters.speedOfSound`` -> c (m/s); the Vantage wavelength is
  lambda = c / (Trans.frequency * 1e6), the spatial unit of TX, Receive and (when
  ``Trans.units == 'wavelengths'``) of Trans.
- ``Trans``: frequency (MHz -> Hz), ElementPos (N x >=3, 'mm' or wavelengths -> m),
  elementWidth, spacingMm, lensCorrection, Connector (1-based channel of each element ->
  0-based ``element_channel``; the newer name ConnectorES is read when Connector is absent).
- Lens correction convention: Trans.lensCorrection is the one-way extra path through lens
  and matching layers, expressed as a distance at the medium's speed of sound, in
  Trans.units.  Verasonics' computeTrans sets it in mm for every known probe (e.g. 1.4785
  for L11-4v) and multiplies it by frequency / speedOfSound only when Trans.units is
  'wavelengths', so it is converted with the same scale as ElementPos, and
  ``lens_correction_s = 2 * lensCorrection * scale / c`` (round trip, s): L11-4v at
  6.25 MHz and 1540 m/s gives 1.92 us.
- ``TX(i)``: Delay (wavelengths -> s, i.e. / fc), Apod, Steer (rad), Origin and focus
  (wavelengths -> m).  ``TW(i)``: Parameters [MHz, duty, half cycles, polarity].
- ``Receive(i)`` of RcvBuffer ``buffer`` (Receive.bufnum, default 1) and frame 1, by
  acqNum: startSample/endSample (1-based RcvBuffer rows -> 0-based start row and sample
  count), decimSampleRate (MHz -> fs in Hz; without it, from sampleMode, see
  _SAMPLES_PER_WAVE), startDepth (wavelengths -> t0 = 2 startDepth / fc, the round-trip
  time of the first sample, lens correction not included), demodFrequency.
- Receive -> TX: ``Event(j).rcv`` / ``Event(j).tx`` (1-based, the sequence's own pairing)
  when the workspace has Event; without it, only a single TX, or one TX per acquisition
  numbered like acqNum, is accepted; anything else is refused as ambiguous.
- ``Resource.RcvBuffer(buffer)``: rowsPerFrame x colsPerFrame int16 per frame;
  ``RcvData{buffer}`` (rows x channels x frames, column-major) becomes a zero-copy NumPy
  view (n_frames, n_rows, n_channels) whose frames are Fortran-ordered, as MATLAB holds them.
- Not supported (refused with a ValueError): HVMux / switched apertures (Trans.HVMux,
  Receive.aperture other than 1), whose element -> channel wiring changes per acquisition;
  receive-only events (Event.tx = 0).

MATLAB v7.3 (HDF5) workspaces, which large RcvData needs, are read through h5py with the
same result (structs, struct arrays, cells, char, numeric arrays in MATLAB order).  That
path is tested against files written in the v7.3 layout by the tests, not yet against a
file saved by MATLAB itself.
Reference: Verasonics Vantage Sequence Programming Manual (structure fields and units;
Receive.sampleMode); Verasonics computeTrans.m (Trans.units and lensCorrection);
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
    radius: float = float("inf")      # m, Trans.radiusMm (or Trans.radius): curved arrays; inf flat
    normals: np.ndarray = None        # (n_elements, 3) unit: (sin a, 0, cos a), a = Trans.ElementPos(:, 4)

    def to_probe(self):
        """A usbeam probe with these element positions and normals (Verasonics coordinates: a
        convex array's centre element at z = 0, the others at z < 0, which is not MUST's
        ConvexArray convention; the positions are kept as recorded, so times stay consistent):
        LinearArray for a flat line of elements along x with normals +z, else ElementArray."""
        from ..probes import ElementArray, LinearArray

        width = self.element_width if np.isfinite(self.element_width) else None
        pos = np.asarray(self.element_positions, dtype=np.float64)
        nrm = self.normals
        flat = nrm is None or np.all(nrm == (0.0, 0.0, 1.0))
        if flat and self.n_elements > 1 and np.all(pos[:, 1:] == 0) and np.isfinite(self.pitch):
            x = (np.arange(self.n_elements) - (self.n_elements - 1) / 2) * self.pitch
            if np.allclose(pos[:, 0], x, rtol=0, atol=1e-9):
                return LinearArray(self.n_elements, self.pitch, width=width, fc=self.fc)
        return ElementArray(pos, nrm, width=width, fc=self.fc)


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
    receive: int = -1                 # 0-based index into the Receive struct array
    sample_mode: str = "NS200BW"      # Receive.sampleMode; BS* modes hold quadrature sample pairs


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
    buffer: int = 1                   # the RcvBuffer read (1-based, as Receive.bufnum)

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

    def to_recording(self, pdata=1, load_data=True):
        """This workspace as a usbeam.io.Recording (usbeam.io.vantage_recording.to_recording)."""
        return to_recording(self, pdata=pdata, load_data=load_data)

    def grid(self, pdata=1):
        """The usbeam.Grid of PData(pdata) (1-based), in m."""
        return vantage_grid(self, pdata)

    def channel_map(self):
        """The usbeam.live.ChannelMap from a raw RcvData frame to (acquisitions, elements, samples)."""
        # imported here, not at the top: usbeam.live (its __init__ imports live/vantage.py)
        # reads workspaces with this module, so a module-level import would be a loop
        from ..live.channel_map import ChannelMap
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

# Receive.sampleMode -> mean samples per wavelength of Receive.demodFrequency, used only when
# the workspace does not carry decimSampleRate.  The manual names each mode by the bandwidth
# it keeps around demodFrequency (NS200BW: Nyquist sampling of a 200 % band; BS100BW,
# BS67BW, BS50BW: 100 %, 67 %, 50 % band sampling); a band of B * f needs 2 B f samples
# per second, hence 4, 2, 4/3 and 1 per wavelength.  The BS modes store quadrature pairs
# (2 samples a quarter period apart, one pair per 1, 1.5 or 2 wavelengths), so their rows
# are not uniformly spaced in time: ``fs`` is then the mean rate.  'NS200BWI' (interleaved
# over 2 acquisitions) and 'custom' have no fixed rate here: they need decimSampleRate.
_SAMPLES_PER_WAVE = {"NS200BW": 4.0, "BS100BW": 2.0, "BS67BW": 4.0 / 3.0, "BS50BW": 1.0}


def _rcv_buffer_data(rcvdata, buffer):
    """RcvData{buffer} from what the loaders give for the RcvData cell (None when absent)."""
    if isinstance(rcvdata, np.ndarray) and rcvdata.dtype == object:
        cells = rcvdata.ravel()
        if buffer > cells.size:
            raise ValueError(f"buffer={buffer}: RcvData holds {cells.size} buffer(s)")
        return _unwrap_cell(cells[buffer - 1])
    if buffer != 1:  # a 1x1 cell squeezed to its content: buffer 1 only
        raise ValueError(f"buffer={buffer}: RcvData holds 1 buffer")
    return rcvdata


def _empty(value):
    return value is None or (isinstance(value, np.ndarray) and value.size == 0)


def _transmit_of_receives(mat, receives, n_transmits):
    """0-based TX index of each selected Receive (list of (index, acq_num)).

    Event(j).rcv / Event(j).tx are the sequence's own pairing.  Without Event the pairing
    is read from the acqNum only where no other reading is possible (one TX, or as many TX
    as acquisitions with acqNum 1..n); otherwise it is ambiguous and refused."""
    events = _struct_list(mat["Event"]) if "Event" in mat and not _empty(mat["Event"]) else []
    if events:
        pairs = {}
        for j, ev in enumerate(events):
            where = f"Event({j + 1})"
            rcv = _field(ev, "rcv", 0, required=False)
            rcv = 0 if _empty(rcv) else int(_scalar(rcv, f"{where}.rcv"))
            tx = _field(ev, "tx", 0, required=False)
            tx = 0 if _empty(tx) else int(_scalar(tx, f"{where}.tx"))
            if rcv > 0:
                pairs.setdefault(rcv, {}).setdefault(tx, j + 1)
        out = []
        for index, _ in receives:
            txs = pairs.get(index + 1)
            if not txs:
                raise ValueError(f"Receive({index + 1}) is used by no Event (Event.rcv): its transmit is unknown")
            if len(txs) > 1:
                detail = ", ".join(f"Event({j}).tx = {t}" for t, j in sorted(txs.items()))
                raise ValueError(f"Receive({index + 1}) is paired with several transmits ({detail}): "
                                 f"the Receive -> TX pairing is ambiguous")
            (tx, j), = txs.items()
            if tx == 0:
                raise ValueError(f"Event({j}).tx = 0: Receive({index + 1}) is a receive-only acquisition, "
                                 f"which load_vantage does not support")
            if tx > n_transmits:
                raise ValueError(f"Event({j}).tx = {tx} but the workspace has {n_transmits} TX")
            out.append(tx - 1)
        return out
    acq_nums = sorted(a for _, a in receives)
    if n_transmits == 1:
        return [0] * len(receives)
    if acq_nums == list(range(1, n_transmits + 1)):
        return [a - 1 for _, a in receives]
    raise ValueError(f"the Receive -> TX pairing is ambiguous: {n_transmits} TX for acquisitions with acqNum "
                     f"{acq_nums} and no Event structure (Event(j).tx / Event(j).rcv) in the workspace; "
                     f"save Event with the workspace")


def load_vantage(path, load_data=True, buffer=1):
    """Read a saved Vantage workspace: probe, transmits, receives, channel map, RF layout.

    ``buffer`` is the receive buffer to read (1-based, as Receive.bufnum and RcvData{buffer});
    its frame-1 receives are the acquisitions.  Returns a :class:`VantageWorkspace`;
    ``ws.channel_map()`` builds the live channel map and ``ws.rcvdata[k]`` is frame k as
    MATLAB holds it (rows x channels, column-major).  Raises ValueError naming the missing
    or inconsistent field.
    """
    if isinstance(buffer, (bool, np.bool_)) or not isinstance(buffer, (int, np.integer)):
        raise TypeError(f"buffer must be an integer (got {type(buffer).__name__})")
    if buffer < 1:
        raise ValueError(f"buffer must be >= 1, a 1-based RcvBuffer number (got {buffer})")
    buffer = int(buffer)
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
    # one-way distance in Trans.units at speed c (see the header) -> round-trip time
    lens = _field(trans, "lensCorrection", None, required=False)
    lens_s = 0.0 if _empty(lens) else 2 * _scalar(lens, "Trans.lensCorrection") * trans_scale / c
    if not _empty(_field(trans, "HVMux", None, required=False)):
        raise ValueError("Trans.HVMux: probes with a high-voltage multiplexer (switched apertures) are not "
                         "supported: their element -> channel wiring depends on Receive.aperture")
    connector = _field(trans, "Connector", None, required=False)
    connector_es = _field(trans, "ConnectorES", None, required=False)
    connector_name = "Trans.Connector"
    if _empty(connector) and not _empty(connector_es):
        connector, connector_name = connector_es, "Trans.ConnectorES"
    elif not _empty(connector) and not _empty(connector_es) and \
            not np.array_equal(np.ravel(connector), np.ravel(connector_es)):
        raise ValueError("Trans.Connector and Trans.ConnectorES differ: which wiring to use is ambiguous")
    if _empty(connector):
        connector = np.arange(1, n_elements + 1)
    connector = np.asarray(connector, dtype=np.float64).ravel()
    if connector.size != n_elements:
        raise ValueError(f"{connector_name} must have {n_elements} entries (got {connector.size})")
    if not np.all(connector == np.round(connector)):
        raise ValueError(f"{connector_name} must hold integer channel numbers")
    connector = connector.astype(np.int64)
    radius_mm = _field(trans, "radiusMm", None, required=False)
    radius_wl = _field(trans, "radius", None, required=False)
    radius = (_scalar(radius_mm, "Trans.radiusMm") * 1e-3 if not _empty(radius_mm)
              else _scalar(radius_wl, "Trans.radius") * wavelength if not _empty(radius_wl) else float("inf"))
    if not radius > 0:
        raise ValueError(f"Trans.radius must be > 0 (or inf for a flat array) (got {radius})")
    normals = None
    if pos.shape[1] >= 4 and np.any(pos[:, 3] != 0):  # Trans.ElementPos(:, 4): the normal's angle, rad
        normals = np.stack([np.sin(pos[:, 3]), np.zeros(n_elements), np.cos(pos[:, 3])], axis=1)
    probe = VantageProbe(_string(_field(trans, "name", "unknown", required=False)), n_elements, positions, pitch,
                         width, fc, lens_s, connector, radius if np.isfinite(radius) else float("inf"), normals)

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

    rcv_buffers = _struct_list(_field(resource, "RcvBuffer", where="Resource"))
    if buffer > len(rcv_buffers):
        raise ValueError(f"buffer={buffer}: Resource.RcvBuffer has {len(rcv_buffers)} buffer(s)")
    rcv_buffer = rcv_buffers[buffer - 1]
    where_buf = f"Resource.RcvBuffer({buffer})"
    n_rows = int(_scalar(_field(rcv_buffer, "rowsPerFrame", where=where_buf), f"{where_buf}.rowsPerFrame"))
    n_channels = int(_scalar(_field(rcv_buffer, "colsPerFrame", where=where_buf), f"{where_buf}.colsPerFrame"))
    n_frames = int(_scalar(_field(rcv_buffer, "numFrames", 1, required=False), f"{where_buf}.numFrames"))
    datatype = _string(_field(rcv_buffer, "datatype", "int16", required=False))
    if datatype != "int16":
        raise ValueError(f"{where_buf}.datatype must be 'int16' (got {datatype!r})")
    if connector.max() > n_channels or connector.min() < 1:
        raise ValueError(f"{connector_name} values must be in 1..{n_channels} ({where_buf}.colsPerFrame)")

    acquisitions, bufnums = [], set()
    for i, rx in enumerate(_struct_list(mat["Receive"])):
        where = f"Receive({i + 1})"
        bufnum = int(_scalar(_field(rx, "bufnum", 1, required=False), f"{where}.bufnum"))
        bufnums.add(bufnum)
        if bufnum != buffer or int(_scalar(_field(rx, "framenum", 1, required=False), f"{where}.framenum")) != 1:
            continue
        aperture = _field(rx, "aperture", None, required=False)
        if not _empty(aperture) and _scalar(aperture, f"{where}.aperture") != 1:
            raise ValueError(f"{where}.aperture = {_scalar(aperture, f'{where}.aperture'):g}: switched (HVMux) "
                             f"apertures are not supported; the element -> channel wiring depends on it")
        start = int(_scalar(_field(rx, "startSample", where=where), f"{where}.startSample"))
        end = int(_scalar(_field(rx, "endSample", where=where), f"{where}.endSample"))
        if not 1 <= start <= end <= n_rows:
            raise ValueError(f"{where}: startSample {start} .. endSample {end} must lie in 1..{n_rows}")
        demod = _field(rx, "demodFrequency", None, required=False)
        demod = _scalar(demod, f"{where}.demodFrequency") * 1e6 if not _empty(demod) else fc
        mode = _field(rx, "sampleMode", None, required=False)
        mode = "NS200BW" if _empty(mode) else _string(mode).strip()
        decim = _field(rx, "decimSampleRate", None, required=False)
        if not _empty(decim):
            fs = _scalar(decim, f"{where}.decimSampleRate") * 1e6
        elif mode in _SAMPLES_PER_WAVE:
            fs = _SAMPLES_PER_WAVE[mode] * demod
        else:
            raise ValueError(f"{where}.sampleMode = {mode!r} has no sample rate known to usbeam and "
                             f"{where}.decimSampleRate is absent: save the workspace with decimSampleRate")
        start_depth = _scalar(_field(rx, "startDepth", 0.0, required=False), f"{where}.startDepth")
        acq_num = int(_scalar(_field(rx, "acqNum", i + 1, required=False), f"{where}.acqNum"))
        acquisitions.append(VantageAcquisition(
            transmit=-1, start_row=start - 1, n_samples=end - start + 1, fs=fs, t0=2 * start_depth / fc,
            demod_frequency=demod, acq_num=acq_num, receive=i, sample_mode=mode))
    if not acquisitions:
        raise ValueError(f"Receive: no acquisition of frame 1 writes to RcvBuffer {buffer} "
                         f"(Receive.bufnum values present: {sorted(bufnums)})")
    acquisitions.sort(key=lambda a: a.acq_num)
    acq_nums = [a.acq_num for a in acquisitions]
    if len(set(acq_nums)) != len(acq_nums):
        raise ValueError(f"Receive: frame 1 of RcvBuffer {buffer} has repeated acqNum {acq_nums}")
    for a, tx in zip(acquisitions, _transmit_of_receives(mat, [(a.receive, a.acq_num) for a in acquisitions],
                                                         len(transmits))):
        a.transmit = tx

    rcvdata = None
    if load_data and "RcvData" in mat:
        data = _rcv_buffer_data(mat["RcvData"], buffer)
        if data is not None:
            data = np.asarray(data)
            if data.dtype != np.int16:
                raise ValueError(f"RcvData{{{buffer}}} must be int16 (got {data.dtype})")
            if data.ndim == 2:
                data = data[:, :, None]
            if data.shape[:2] != (n_rows, n_channels):
                raise ValueError(f"RcvData{{{buffer}}} has shape {data.shape[:2]} per frame, {where_buf} says "
                                 f"({n_rows}, {n_channels})")
            rcvdata = np.moveaxis(data, 2, 0)  # (frames, rows, channels), frames column-major
            n_frames = rcvdata.shape[0]
    return VantageWorkspace(c, probe, transmits, acquisitions, waveforms, n_rows, n_channels, n_frames, rcvdata,
                            raw={k: v for k, v in mat.items() if not k.startswith("__") and k != "RcvData"},
                            buffer=buffer)


# the workspace -> recording / grid / pipeline mapping (its own module; imported last because
# it reads the classes above)
from .vantage_recording import to_recording, vantage_grid  # noqa: E402
