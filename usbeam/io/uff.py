"""UFF (USTB's ultrasound file format, HDF5) in and out: channel data -> ``Recording``,
beamformed images -> ``uff.beamformed_data``.  Needs h5py (optional extra ``uff``).

The layout is USTB's (``+uff`` classes; read in Python by pyuff_ustb): every object is an
HDF5 group with a ``class`` attribute (``uff.channel_data``, ``uff.linear_array``, ...), arrays
are stored as MATLAB writes them (dimensions reversed: the MATLAB ``[time x channel x wave x
frame]`` channel data is the HDF5 ``(frame, wave, channel, time)``, usbeam's own layout), complex
arrays as a group with ``real`` and ``imag`` datasets, a list of objects as a group whose
``size`` attribute is ``[1, n]`` holding the items in name order.  Read directly with h5py so
that every missing field is named in the error (Rodriguez-Molares et al., "The UltraSound
ToolBox", IEEE IUS 2017; USTB's ``uff.channel_data``, ``uff.wave``, ``uff.beamformed_data``).

Read (``load_uff``): ``channel_data`` fields ``sampling_frequency``, ``initial_time``,
``sound_speed``, ``modulation_frequency``, ``sequence`` (waves), ``probe``, ``data`` are
required; ``PRF``, ``pulse`` (``center_frequency``, ``fractional_bandwidth``) optional.
Probes: ``uff.linear_array`` -> ``usbeam.LinearArray``; ``uff.curvilinear_array`` ->
``usbeam.geometry.ConvexArray``; ``uff.matrix_array`` -> ``usbeam.geometry.MatrixArray``; a
bare ``uff.probe`` whose geometry is a centred, evenly spaced line on x -> ``LinearArray``;
anything else is refused naming it.

Time origin.  UFF's reference time is the instant a wave passes the origin (0, 0, 0); wave n's
samples are at ``initial_time + k / fs + wave.delay`` on that clock, and USTB's transmit times
are: plane wave ``(x sin a + z cos a) / c``; diverging (source z < -1 mm) ``(|p - s| - |s|) / c``;
focused or on the array (otherwise) ``(+-|p - s| + |s|) / c`` (+ past the source).  usbeam's
origin is the first firing (README, "Conventions"), so each wave maps to a usbeam transmit and
a shift ``D_n`` (usbeam time = UFF acquisition time + D_n):

    plane wave a        -> PlaneWave(a),          D = delay - x_first sin(a) / c
    diverging source s  -> DivergingWave(s),      D = delay + (|s| - min_e |e - s|) / c
    focused source f    -> Focused(f),            D = delay + (max_e |e - f| - |f|) / c
    source on element k -> SyntheticAperture(k),  D = delay - |e_k| / c

(``x_first`` the first element to fire).  A ``Recording`` has one ``t0 = initial_time + D``, so
the waves' shifts must agree (to 1e-3 sample); a sequence whose shifts differ is refused,
naming the wave.  IQ data (``modulation_frequency`` > 0) is converted to usbeam's convention,
``IQ(t) = LPF[RF(t) exp(-j 2 pi f t)]`` on usbeam's clock, by the constant phase
``exp(-j 2 pi f D)``, and the recording's ``fc`` is then the modulation frequency (the
frequency the beamformer rotates with); the pulse's centre frequency stays in ``meta``.

Write (``save_uff``): a beamformed image ``(n_frames, nz, nx)`` on a 2-D ``usbeam.Grid`` as
``uff.beamformed_data`` with a ``uff.linear_scan`` (``x_axis``, ``z_axis``), or on a sector as
``uff.sector_scan`` (``azimuth_axis``, ``depth_axis``, ``apex``); pixels in USTB's order (depth
fastest), data ``[pixel x channel x wave x frame]`` with one channel and one wave.
"""
import math
import os

import numpy as np

from .recording import Recording

__all__ = ["load_uff", "save_uff", "UFF_PROBES"]

UFF_PROBES = ("uff.linear_array", "uff.curvilinear_array", "uff.matrix_array", "uff.probe")


def _h5py():
    try:
        import h5py
    except ImportError:
        raise ImportError("UFF files need h5py: pip install 'usbeam[uff]' (or pip install h5py)") from None
    return h5py


def _cls(obj):
    value = obj.attrs.get("class", b"")
    if isinstance(value, np.ndarray):
        value = value.reshape(-1)[0] if value.size else b""
    return value.decode() if isinstance(value, bytes) else str(value)


def _need(group, field, where):
    if field not in group:
        raise ValueError(f"{where}.{field}: required UFF field is missing")
    return group[field]


def _array(obj, where):
    h5py = _h5py()
    if isinstance(obj, h5py.Group):
        if "real" not in obj or "imag" not in obj:
            raise ValueError(f"{where}: a complex UFF array needs 'real' and 'imag' datasets")
        return obj["real"][()] + 1j * obj["imag"][()]
    return obj[()]


def _scalar(group, field, where, default=None):
    if field not in group:
        if default is None:
            raise ValueError(f"{where}.{field}: required UFF field is missing")
        return default
    value = np.asarray(_array(group[field], f"{where}.{field}")).reshape(-1)
    if value.size != 1:
        raise ValueError(f"{where}.{field}: expected one number (got {value.size})")
    value = value[0]
    if np.iscomplexobj(value) or not np.isfinite(value) and not np.isinf(value):
        raise ValueError(f"{where}.{field}: expected a real number (got {value})")
    return float(value)


def _items(group):
    """The objects of a UFF list (size [1, n], n > 1), in name order; else the group itself."""
    size = np.asarray(group.attrs.get("size", [1, 1])).reshape(-1)
    if size.size and int(size.max()) > 1:
        return [group[k] for k in sorted(group.keys())]
    return [group]


def _point(group, where):
    d = _scalar(group, "distance", where, 0.0)
    az = _scalar(group, "azimuth", where, 0.0)
    el = _scalar(group, "elevation", where, 0.0)
    return d, az, el


def _probe(group):
    """usbeam probe of a UFF probe group (see the module doc)."""
    from .. import geometry

    cls = _cls(group)
    where = "channel_data.probe"
    if cls == "uff.linear_array":
        n = int(_scalar(group, "N", where))
        pitch = _scalar(group, "pitch", where)
        width = _scalar(group, "element_width", where, math.nan)
        return geometry.LinearArray(n, pitch, width=None if math.isnan(width) or width <= 0 else min(width, pitch))
    if cls == "uff.curvilinear_array":
        if not hasattr(geometry, "ConvexArray"):
            raise ValueError(f"{where}: uff.curvilinear_array needs usbeam.geometry.ConvexArray, absent in this build")
        width = _scalar(group, "element_width", where, math.nan)
        return geometry.ConvexArray(n_elements=int(_scalar(group, "N", where)), pitch=_scalar(group, "pitch", where),
                                    radius=_scalar(group, "radius", where),
                                    element_width=None if math.isnan(width) else width)
    if cls == "uff.matrix_array":
        if not hasattr(geometry, "MatrixArray"):
            raise ValueError(f"{where}: uff.matrix_array needs usbeam.geometry.MatrixArray, absent in this build")
        return geometry.MatrixArray(nx=int(_scalar(group, "N_x", where)), ny=int(_scalar(group, "N_y", where)),
                                    pitch_x=_scalar(group, "pitch_x", where), pitch_y=_scalar(group, "pitch_y", where))
    if cls == "uff.probe":
        geo = np.asarray(_array(_need(group, "geometry", where), f"{where}.geometry"), float)
        if geo.ndim != 2 or 7 not in geo.shape:
            raise ValueError(f"{where}.geometry: expected (N, 7) element rows (got shape {geo.shape})")
        geo = geo if geo.shape[1] == 7 else geo.T  # MATLAB's [7 x N] or [N x 7]
        x, y, z = geo[:, 0], geo[:, 1], geo[:, 2]
        n = x.size
        pitch = (x[-1] - x[0]) / (n - 1) if n > 1 else 0.0
        line = (n > 1 and pitch > 0 and np.allclose(y, 0, atol=1e-9) and np.allclose(z, 0, atol=1e-9)
                and np.allclose(x, (np.arange(n) - (n - 1) / 2) * pitch, atol=1e-6 * pitch))
        if not line:
            raise ValueError(f"{where}: a uff.probe whose elements are not a centred, evenly spaced line on x "
                             "(usbeam cannot model this geometry)")
        width = float(geo[0, 5]) if geo[0, 5] > 0 else None
        return geometry.LinearArray(n, pitch, width=None if width is None else min(width, pitch))
    raise ValueError(f"{where}: probe class {cls!r} is not one usbeam can model (supported: {', '.join(UFF_PROBES)})")


def _element_positions(probe):
    pos = np.asarray(probe.positions, float)
    return pos


def _wave(group, n, probe, c, fs):
    """(usbeam transmit, shift D in s) of UFF wave n (module doc)."""
    from .. import geometry

    where = f"channel_data.sequence[{n}]"
    wavefront = int(_scalar(group, "wavefront", where, 1.0))  # USTB default: spherical
    delay = _scalar(group, "delay", where, 0.0)
    source = _need(group, "source", where)
    d, az, el = _point(source, f"{where}.source")
    if el != 0.0:
        raise ValueError(f"{where}.source.elevation: {el} rad; usbeam's linear-array transmits lie in the x-z plane")
    pos = _element_positions(probe)
    if wavefront == 0:  # plane
        if not isinstance(probe, geometry.LinearArray):
            raise ValueError(f"{where}: plane waves from a {type(probe).__name__} are not mapped yet")
        x_first = pos[:, 0].min() if az >= 0 else pos[:, 0].max()
        return geometry.PlaneWave(az), delay - x_first * math.sin(az) / c
    if wavefront != 1:
        raise ValueError(f"{where}.wavefront: {wavefront} (photoacoustic or unknown) is not a transmit usbeam models")
    if not math.isfinite(d):
        raise ValueError(f"{where}.source.distance: a spherical wave from infinity (write it as a plane wave)")
    xs, zs = d * math.sin(az), d * math.cos(az)
    dist = np.hypot(pos[:, 0] - xs, pos[:, 2] - zs)
    if zs < -1e-3:
        return geometry.DivergingWave((xs, zs)), delay + (abs(d) - dist.min()) / c
    k = int(np.argmin(dist))
    if abs(zs) <= 1e-3:
        if dist[k] > 1e-6:
            raise ValueError(f"{where}.source: a virtual source on the array plane ({xs:.6g}, {zs:.6g}) m that is not "
                             "an element (usbeam cannot model it)")
        return geometry.SyntheticAperture(k), delay - abs(d) / c
    return geometry.Focused((xs, zs)), delay + (dist.max() - abs(d)) / c


def _channel_data_group(f, name):
    if name is not None:
        if name not in f:
            raise ValueError(f"name: no object {name!r} in the file (top level: {sorted(f.keys())})")
        group = f[name]
        if _cls(group) != "uff.channel_data":
            raise ValueError(f"name: {name!r} is a {_cls(group) or 'plain group'}, not uff.channel_data")
        return group, name
    found = [k for k in f.keys() if _cls(f[k]) == "uff.channel_data"]
    if not found:
        raise ValueError("no uff.channel_data object at the top level of the file")
    if len(found) > 1:
        raise ValueError(f"name: several uff.channel_data objects ({found}); give name=")
    return f[found[0]], found[0]


def load_uff(path, name=None):
    """Read UFF channel data into a :class:`usbeam.io.Recording` (conventions: module doc).

    ``name``: the channel_data object's location in the file (default: the only one at its top
    level).  ``data`` is ``(n_frames, n_waves, n_elements, n_samples)`` (float32 RF, int16 kept,
    complex64 IQ).  ValueError names any missing field, a probe usbeam cannot model, or waves
    whose time origins disagree."""
    h5py = _h5py()
    path = os.fspath(path)
    with h5py.File(path, "r") as f:
        group, location = _channel_data_group(f, name)
        where = "channel_data"
        fs = _scalar(group, "sampling_frequency", where)
        t_initial = _scalar(group, "initial_time", where)
        c = _scalar(group, "sound_speed", where)
        f_mod = _scalar(group, "modulation_frequency", where)
        probe = _probe(_need(group, "probe", where))
        waves = _items(_need(group, "sequence", where))
        raw = _array(_need(group, "data", where), "channel_data.data")
        prf = _scalar(group, "PRF", where, math.nan)
        fc_pulse, bandwidth = math.nan, math.nan
        if "pulse" in group:
            fc_pulse = _scalar(group["pulse"], "center_frequency", "channel_data.pulse", math.nan)
            bw = _scalar(group["pulse"], "fractional_bandwidth", "channel_data.pulse", math.nan)
            bandwidth = bw if 0 < bw < 2 else math.nan
        for field, value in (("sampling_frequency", fs), ("sound_speed", c)):
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"channel_data.{field}: must be a positive number (got {value})")
        if not math.isfinite(t_initial):
            raise ValueError(f"channel_data.initial_time: must be finite (got {t_initial})")
        transmits, shifts = zip(*(_wave(w, n, probe, c, fs) for n, w in enumerate(waves)))
    for n, shift in enumerate(shifts):
        if abs(shift - shifts[0]) * fs > 1e-3:
            raise ValueError(f"channel_data.sequence[{n}].delay: this wave's time origin differs from wave 0's by "
                             f"{(shift - shifts[0]) * 1e9:.4g} ns after mapping to usbeam's convention (first firing "
                             "at t = 0); a Recording has one t0 for all waves")
    shift = float(shifts[0])
    data = np.asarray(raw)
    while data.ndim < 4:
        data = data[None]
    if data.ndim != 4:
        raise ValueError(f"channel_data.data: expected [time x channel x wave x frame] (got {data.ndim} dimensions)")
    n_el = probe.n_elements
    if data.shape[2] != n_el or data.shape[1] != len(transmits):
        raise ValueError(f"channel_data.data: HDF5 shape {data.shape} does not match (frames, {len(transmits)} waves, "
                         f"{n_el} elements, samples)")
    if np.iscomplexobj(data):
        if not f_mod > 0:
            raise ValueError("channel_data.modulation_frequency: complex (IQ) data needs a modulation frequency > 0")
        data = (data * np.exp(-2j * np.pi * f_mod * shift)).astype(np.complex64)
        fc = f_mod
    else:
        if f_mod > 0:
            raise ValueError("channel_data.modulation_frequency: > 0 but the data is real (IQ must be complex)")
        data = data if data.dtype == np.int16 else data.astype(np.float32)
        fc = fc_pulse
        if not (math.isfinite(fc) and fc > 0):
            raise ValueError("channel_data.pulse.center_frequency: RF data needs the pulse's centre frequency (fc)")
    meta = {"uff_initial_time": t_initial, "uff_time_shift": shift, "pulse_center_frequency": fc_pulse,
            "uff_location": location}
    return Recording(data=np.ascontiguousarray(data), probe=probe, sequence=tuple(transmits), fs=fs, fc=fc, c=c,
                     t0=t_initial + shift, prf=prf, bandwidth=bandwidth, modulation_frequency=max(f_mod, 0.0),
                     source=f"{os.path.basename(path)} (UFF {location})", meta=meta)


def _write_array(h5group, name, value):
    value = np.asarray(value)
    if np.iscomplexobj(value):
        g = h5group.create_group(name)
        g.attrs.update({"class": "single", "name": name, "complex": np.array([1]), "imaginary": np.array([0])})
        for part, data, imag in (("real", value.real, 0), ("imag", value.imag, 1)):
            d = g.create_dataset(part, data=data)
            d.attrs.update({"class": "single", "name": name, "imaginary": np.array([imag])})
    else:
        d = h5group.create_dataset(name, data=value)
        d.attrs.update({"class": "single", "name": name, "complex": np.array([0]), "imaginary": np.array([0])})


def _object(h5group, name, cls):
    g = h5group.create_group(name)
    g.attrs.update({"class": cls, "name": name, "array": np.array([0]), "size": np.array([1, 1])})
    return g


def save_uff(path, image, grid=None, *, sector=None, name="beamformed_data", overwrite=False):
    """Write a beamformed image as UFF ``uff.beamformed_data`` (module doc) for USTB.

    ``image``: ``(nz, nx)`` or ``(n_frames, nz, nx)`` (complex IQ or real); with ``grid`` a 2-D
    ``usbeam.Grid`` (``uff.linear_scan``), or ``sector=(azimuth_axis, depth_axis, apex)`` (rad,
    m, the (x, z) apex in m; ``uff.sector_scan``) with the image ``(n_depths, n_azimuths)``.
    ``overwrite``: replace an object of the same name in an existing file."""
    from ..geometry import Grid

    h5py = _h5py()
    img = np.asarray(image)
    if img.dtype.kind not in "fc" and img.dtype.kind not in "iu":
        raise TypeError(f"image must be numeric (got {img.dtype})")
    if img.ndim == 2:
        img = img[None]
    if img.ndim != 3:
        raise ValueError(f"image must be (nz, nx) or (n_frames, nz, nx) (got shape {np.shape(image)})")
    if not np.all(np.isfinite(img)):
        raise ValueError("image contains NaN or infinite values")
    if (grid is None) == (sector is None):
        raise ValueError("give exactly one of grid (a 2-D usbeam.Grid) and sector=(azimuth_axis, depth_axis, apex)")
    if grid is not None:
        if not isinstance(grid, Grid) or grid.x is None or grid.y is not None:
            raise TypeError("grid must be a 2-D usbeam.Grid(x=..., z=...)")
        axes = {"x_axis": np.asarray(grid.x, float), "z_axis": np.asarray(grid.z, float)}
        cls, n_slow, n_fast = "uff.linear_scan", grid.x.size, grid.z.size
    else:
        try:
            azimuth, depth, apex = sector
        except (TypeError, ValueError):
            raise TypeError("sector must be (azimuth_axis, depth_axis, apex)") from None
        azimuth, depth = np.asarray(azimuth, float).reshape(-1), np.asarray(depth, float).reshape(-1)
        apex = np.asarray(apex, float).reshape(-1)
        if apex.size != 2 or not np.all(np.isfinite(apex)) or not (np.all(np.isfinite(azimuth)) and np.all(np.isfinite(depth))):
            raise ValueError("sector: azimuth_axis and depth_axis finite, apex a finite (x, z) pair in m")
        axes = {"azimuth_axis": azimuth, "depth_axis": depth}
        cls, n_slow, n_fast = "uff.sector_scan", azimuth.size, depth.size
    if img.shape[1:] != (n_fast, n_slow):
        raise ValueError(f"image: each frame must be ({n_fast}, {n_slow}) for this scan (got {img.shape[1:]})")
    # USTB pixel order: depth fastest -> (frames, slow, fast); HDF5 shape (frame, wave, channel, pixel)
    pixels = np.ascontiguousarray(np.swapaxes(img, 1, 2)).reshape(img.shape[0], 1, 1, n_slow * n_fast)
    with h5py.File(os.fspath(path), "a") as f:
        if name in f:
            if not overwrite:
                raise ValueError(f"name: {name!r} already exists in {path} (overwrite=True replaces it)")
            del f[name]
        bf = _object(f, name, "uff.beamformed_data")
        scan = _object(bf, "scan", cls)
        for key, value in axes.items():
            _write_array(scan, key, value[None, :])  # MATLAB column vector (N x 1)
        if sector is not None:
            p = _object(scan, "apex", "uff.point")
            _write_array(p, "distance", np.array([[math.hypot(apex[0], apex[1])]]))
            _write_array(p, "azimuth", np.array([[math.atan2(apex[0], apex[1]) if apex.any() else 0.0]]))
            _write_array(p, "elevation", np.array([[0.0]]))
        # the image in single precision, as USTB stores beamformed data; the axes in double
        _write_array(bf, "data", pixels.astype(np.complex64 if np.iscomplexobj(pixels) else np.float32))
