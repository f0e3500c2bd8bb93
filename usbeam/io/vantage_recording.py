"""A Verasonics Vantage workspace as a usbeam Recording, its PData grid, and the pipeline it
implies (``usbeam.Pipeline.from_vantage``, ``python -m usbeam serve --vantage``).

Input: a :class:`usbeam.io.vantage.VantageWorkspace` (``load_vantage``), whose structures are
already in SI units.  Mapping (Vantage Sequence Programming Manual conventions):

- Probe: ``Trans.ElementPos`` x positions must be a uniform linear array centred on x = 0
  (usbeam's ``LinearArray``; pitch ``Trans.spacingMm``, width ``Trans.elementWidth``, fc
  ``Trans.frequency``, fractional bandwidth from ``Trans.Bandwidth`` [low high] MHz).  A
  curved probe (``Trans.radius`` / ``Trans.radiusMm`` > 0) needs ``usbeam.geometry.ConvexArray``.
- Transmits (``TX(i)``, lengths in wavelengths, Delay in periods of Trans.frequency):
  focus == 0 -> ``PlaneWave(Steer(1))``; focus > 0 -> ``Focused`` at
  Origin + focus (sin Steer, cos Steer); focus < 0 -> ``DivergingWave`` from the virtual
  source Origin + focus (sin Steer, cos Steer) (behind the array).  The geometric transmit
  is used only when ``TX.Delay`` is the delay law it implies (within 1e-3 period over the
  firing elements) and every element fires; anything else (a partial aperture, a user delay
  law) becomes ``Delays(TX.Delay)`` with NaN where ``TX.Apod`` is 0.
- Time: Vantage time zero is the transmit trigger; usbeam's is the first firing element.
  The first sample of an acquisition was taken 2 startDepth / fc after the trigger, and it
  includes the round trip through the lens (Trans.lensCorrection), so
  ``t0 = 2 startDepth / fc - lens_correction_s - min(TX.Delay of the firing elements)``.
- Sample modes: 'NS200BW' and 'custom' are RF at decimSampleRate; the BS modes
  ('BS100BW', 'BS67BW', 'BS50BW') store quadrature pairs: rows 2k, 2k+1 are samples a quarter
  period of ``demodFrequency`` (f_d) apart, one pair every 1, 1.5 or 2 periods.  They are
  converted to IQ (``bs_pairs_to_iq``): with s0 = rf(t_k), s1 = rf(t_k + 1/(4 f_d)), the
  analytic signal at t_k is s0 - j s1 (rf = Re z, rf(t + T/4) = Re(j z) = -Im z), and
  ``iq_k = (s0 - j s1) exp(-2 pi j f_d t_k)``, t_k = t0 + k P (usbeam time, P the pair period),
  the demodulation convention of ``usbeam.rf2iq`` (IQ = analytic signal shifted to baseband),
  so the result is complex IQ at fs = 1 / P with modulation frequency f_d.
- Grid (``PData(p)``, wavelengths): x = Origin(1) + (0 : Size(2)-1) PDelta(1),
  z = Origin(3) + (0 : Size(1)-1) PDelta(3), and with Size(3) > 1 the elevation
  y = Origin(2) + (0 : Size(3)-1) PDelta(2).
- Channel map: ``Trans.Connector`` and each acquisition's first RcvBuffer row
  (``VantageWorkspace.channel_map``); the Recording's data are the mapped frames
  ``(n_frames, n_acquisitions, n_elements, n_samples)``.

Not supported (ValueError naming the field): HVMux (refused by load_vantage), the interleaved
mode 'NS200BWI' (one line sampled over two acquisitions), acquisitions of one frame with
different sample modes, rates, sample counts or start times.
"""
import math

import numpy as np

from .recording import Recording

__all__ = ["to_recording", "vantage_grid", "vantage_probe", "vantage_sequence", "bs_pairs_to_iq",
           "pipeline_from_vantage", "BS_PERIODS_PER_PAIR"]

# BS sample modes: periods of demodFrequency between consecutive quadrature pairs
BS_PERIODS_PER_PAIR = {"BS100BW": 1.0, "BS67BW": 1.5, "BS50BW": 2.0}
_RF_MODES = ("NS200BW", "custom")  # uniformly sampled RF at decimSampleRate
_DELAY_MATCH_PERIODS = 1e-3  # TX.Delay agrees with a geometric transmit within this fraction of a period


def _field(struct, name, default=None):
    if hasattr(struct, name):
        return getattr(struct, name)
    if isinstance(struct, np.void) and struct.dtype.names and name in struct.dtype.names:
        return struct[name]
    return default


def _empty(value):
    return value is None or (isinstance(value, np.ndarray) and value.size == 0)


def _struct_list(value):
    if isinstance(value, np.ndarray) and value.dtype == object:
        return list(value.ravel())
    if isinstance(value, np.ndarray) and value.dtype.names:
        return list(value.ravel())
    return [value]


def vantage_probe(ws):
    """The usbeam probe of ``ws.probe`` (LinearArray; ConvexArray for a curved Trans)."""
    from .. import geometry
    trans = ws.raw.get("Trans")
    radius = None
    for name, scale in (("radiusMm", 1e-3), ("radius", None)):
        value = None if trans is None else _field(trans, name)
        if not _empty(value):
            r = float(np.asarray(value, dtype=np.float64).ravel()[0])
            if r > 0:
                if scale is None:   # Trans.radius is in wavelengths (Trans.units does not apply)
                    scale = ws.c / ws.probe.fc
                radius = r * scale
                break
    n, pitch = ws.probe.n_elements, ws.probe.pitch
    width = ws.probe.element_width
    width = float(width) if np.isfinite(width) and 0 < width <= pitch else None
    bandwidth = None
    band = None if trans is None else _field(trans, "Bandwidth")
    if not _empty(band):
        band = np.asarray(band, dtype=np.float64).ravel()
        if band.size == 2 and np.all(np.isfinite(band)) and band[1] > band[0] > 0:
            frac = (band[1] - band[0]) * 1e6 / ws.probe.fc
            bandwidth = frac if 0 < frac < 2 else None
    if radius is not None:
        convex = getattr(geometry, "ConvexArray", None)
        if convex is None:
            raise ValueError(f"Trans.radius: a convex probe (radius {radius * 1e3:.4g} mm) needs "
                             f"usbeam.geometry.ConvexArray, which this usbeam does not have")
        return convex(n_elements=n, pitch=pitch, radius=radius, element_width=width)
    if not np.isfinite(pitch) or pitch <= 0:
        raise ValueError(f"Trans.spacingMm / Trans.ElementPos: the pitch must be > 0 (got {pitch})")
    pos = ws.probe.element_positions
    expected = (np.arange(n) - (n - 1) / 2) * pitch
    if np.max(np.abs(pos[:, 0] - expected)) > 1e-3 * pitch or np.max(np.abs(pos[:, 1:3])) > 1e-3 * pitch:
        raise ValueError("Trans.ElementPos is not a uniform linear array centred on x = 0 with y = z = 0 "
                         f"(pitch {pitch * 1e3:.4g} mm): usbeam.LinearArray cannot describe it")
    return geometry.LinearArray(n_elements=n, pitch=pitch, width=width, fc=ws.probe.fc, bandwidth=bandwidth)


def _tx_has_delay(ws, index):
    tx = ws.raw.get("TX")
    if tx is None:
        return True
    items = _struct_list(tx)
    return index < len(items) and not _empty(_field(items[index], "Delay"))


def _vantage_transmit(ws, index):
    """(usbeam transmit, first firing delay in s) of TX(index + 1)."""
    from ..geometry import Delays, DivergingWave, Focused, PlaneWave
    tx = ws.transmits[index]
    where = f"TX({index + 1})"
    fc, c = ws.probe.fc, ws.c
    active = tx.apodization != 0
    if not active.any():
        raise ValueError(f"{where}.Apod is all zero: no element fires")
    d_first = float(tx.delays_s[active].min())
    delays = np.where(active, tx.delays_s - d_first, np.nan)
    theta = float(tx.steer_rad[0])
    # the element positions as Trans gives them (z = 0 on a linear array, the arc on a convex one)
    x, z = ws.probe.element_positions[:, 0], ws.probe.element_positions[:, 2]
    ox, oz = float(tx.origin_m[0]), float(tx.origin_m[2])
    geometric = None
    try:
        if tx.focus_m == 0:
            geometric = PlaneWave(theta)
            arrival = x * math.sin(theta) + z * math.cos(theta)   # first firing: the element reached first
            law = (arrival - arrival.min()) / c
        else:
            px, pz = ox + tx.focus_m * math.sin(theta), oz + tx.focus_m * math.cos(theta)
            r = np.hypot(x - px, z - pz)
            if tx.focus_m > 0:
                geometric, law = Focused((px, pz)), (r.max() - r) / c
            else:
                geometric, law = DivergingWave((px, pz)), (r - r.min()) / c
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None
    if not _tx_has_delay(ws, index):   # no Delay saved: the geometry is all there is
        return geometric, 0.0
    if active.all() and np.max(np.abs(delays - law)) <= _DELAY_MATCH_PERIODS / fc:
        return geometric, d_first
    try:
        return Delays(delays), d_first
    except ValueError as exc:
        raise ValueError(f"{where}.Delay / {where}.Apod: {exc}") from None


def vantage_sequence(ws, probe=None):
    """(transmits of the acquisitions in acqNum order, first firing delay of each, s)."""
    probe = vantage_probe(ws) if probe is None else probe
    cache = {}
    out, firsts = [], []
    for acq in ws.acquisitions:
        if acq.transmit not in cache:
            tx, first = _vantage_transmit(ws, acq.transmit)
            cache[acq.transmit] = (tx.check(probe), first)
        tx, first = cache[acq.transmit]
        out.append(tx)
        firsts.append(first)
    return tuple(out), firsts


def vantage_grid(ws, pdata=1):
    """The usbeam.Grid of ``PData(pdata)`` (1-based), in m."""
    from ..geometry import Grid
    if isinstance(pdata, (bool, np.bool_)) or not isinstance(pdata, (int, np.integer)) or pdata < 1:
        raise ValueError(f"pdata must be a 1-based PData index (got {pdata!r})")
    if "PData" not in ws.raw or _empty(ws.raw["PData"]):
        raise ValueError("PData is missing from the Vantage workspace: give grid= explicitly")
    items = _struct_list(ws.raw["PData"])
    if pdata > len(items):
        raise ValueError(f"pdata={pdata}: the workspace has {len(items)} PData")
    p = items[pdata - 1]
    where = f"PData({pdata})"
    wavelength = ws.c / ws.probe.fc
    values = {}
    for name, n in (("Origin", 3), ("PDelta", 3), ("Size", None)):
        v = _field(p, name)
        if _empty(v):
            raise ValueError(f"{where}.{name} is missing from the Vantage workspace")
        v = np.asarray(v, dtype=np.float64).ravel()
        if not np.all(np.isfinite(v)):
            raise ValueError(f"{where}.{name} must be finite")
        if n is not None and v.size != n:
            raise ValueError(f"{where}.{name} must have {n} values (got {v.size})")
        values[name] = v
    size = values["Size"]
    if size.size not in (2, 3) or np.any(size < 1) or np.any(size != np.round(size)):
        raise ValueError(f"{where}.Size must be 2 or 3 positive integers [rows cols sections] (got {size})")
    size = np.concatenate([size, [1.0]])[:3].astype(int)
    origin, delta = values["Origin"] * wavelength, values["PDelta"] * wavelength
    if (size[1] > 1 and delta[0] <= 0) or (size[0] > 1 and delta[2] <= 0) or (size[2] > 1 and delta[1] <= 0):
        raise ValueError(f"{where}.PDelta must be > 0 along each axis with more than one point (got {values['PDelta']})")
    x = origin[0] + np.arange(size[1]) * delta[0]
    z = origin[2] + np.arange(size[0]) * delta[2]
    if size[2] > 1:
        return Grid(x=x, z=z, y=origin[1] + np.arange(size[2]) * delta[1])
    return Grid(x=x, z=z)


def _common(ws, name, values, fmt=str):
    first = values[0]
    for acq, v in zip(ws.acquisitions, values):
        if v != first:
            raise ValueError(f"Receive({acq.receive + 1}).{name} = {fmt(v)} differs from "
                             f"Receive({ws.acquisitions[0].receive + 1}).{name} = {fmt(first)}: the acquisitions "
                             f"of one frame must share it to form one recording")
    return first


def _acquisition_timing(ws, first_delays):
    """Sample mode, rate (Hz), samples per channel, modulation frequency (Hz) and usbeam t0 (s)."""
    mode = _common(ws, "sampleMode", [a.sample_mode for a in ws.acquisitions])
    demod = _common(ws, "demodFrequency", [a.demod_frequency for a in ws.acquisitions], lambda v: f"{v / 1e6:g} MHz")
    rows = _common(ws, "endSample - startSample + 1", [a.n_samples for a in ws.acquisitions])
    t0s = [a.t0 - ws.probe.lens_correction_s - d for a, d in zip(ws.acquisitions, first_delays)]
    if max(t0s) - min(t0s) > 1e-3 / ws.probe.fc:
        raise ValueError(f"Receive.startDepth / TX.Delay: the acquisitions' first samples are at different times "
                         f"({', '.join(f'{t * 1e6:.4g}' for t in t0s)} us after their first firing); "
                         f"one recording needs one t0")
    t0 = t0s[0]
    if mode in BS_PERIODS_PER_PAIR:
        periods = BS_PERIODS_PER_PAIR[mode]
        where = f"Receive({ws.acquisitions[0].receive + 1})"
        # decimSampleRate of a BS mode is the A/D rate of the pair (4 f_d) or the mean row rate
        fs_rows = ws.acquisitions[0].fs
        if not (math.isclose(fs_rows, 4 * demod, rel_tol=1e-6) or math.isclose(fs_rows, 2 * demod / periods,
                                                                                   rel_tol=1e-6)):
            raise ValueError(f"{where}.decimSampleRate = {fs_rows / 1e6:g} MHz does not fit sampleMode {mode!r} "
                             f"at demodFrequency {demod / 1e6:g} MHz (expected {4 * demod / 1e6:g} or "
                             f"{2 * demod / periods / 1e6:g} MHz)")
        if rows % 2:
            raise ValueError(f"{where}: sampleMode {mode!r} stores quadrature pairs, so endSample - startSample + 1 "
                             f"must be even (got {rows})")
        return mode, demod / periods, rows // 2, demod, t0
    if mode not in _RF_MODES:
        raise ValueError(f"Receive({ws.acquisitions[0].receive + 1}).sampleMode = {mode!r} is not supported by "
                         f"usbeam's pipeline (RF: {', '.join(_RF_MODES)}; quadrature pairs: "
                         f"{', '.join(BS_PERIODS_PER_PAIR)}); interleaved modes sample one line over two "
                         f"acquisitions")
    fs = _common(ws, "decimSampleRate", [a.fs for a in ws.acquisitions], lambda v: f"{v / 1e6:g} MHz")
    return mode, fs, rows, 0.0, t0


def bs_pairs_to_iq(pairs, *, t0, demod_frequency, sample_mode, out=None):
    """Quadrature pairs of a BS sample mode -> complex64 IQ (see the module doc).

    pairs : (..., 2 n) int16 or float rows of one acquisition, pair k in rows 2k, 2k+1.
    Returns (..., n) complex64, sample k at t0 + k P, P = periods / demod_frequency."""
    if sample_mode not in BS_PERIODS_PER_PAIR:
        raise ValueError(f"sample_mode must be one of {sorted(BS_PERIODS_PER_PAIR)} (got {sample_mode!r})")
    pairs = np.asarray(pairs)
    if pairs.shape[-1] % 2:
        raise ValueError(f"pairs must have an even number of rows along the last axis (got {pairs.shape[-1]})")
    n = pairs.shape[-1] // 2
    rotation = _bs_rotation(n, t0, demod_frequency, sample_mode)
    if out is None:
        out = np.empty(pairs.shape[:-1] + (n,), np.complex64)
    np.copyto(out.real, pairs[..., 0::2], casting="unsafe")
    np.copyto(out.imag, pairs[..., 1::2], casting="unsafe")
    np.negative(out.imag, out=out.imag)
    np.multiply(out, rotation, out=out)
    return out


def _bs_rotation(n, t0, demod_frequency, sample_mode):
    period = BS_PERIODS_PER_PAIR[sample_mode] / demod_frequency
    t = t0 + np.arange(n) * period
    return np.exp(-2j * np.pi * demod_frequency * t).astype(np.complex64)   # computed in double


def to_recording(ws, *, pdata=1, load_data=True):
    """The :class:`usbeam.io.Recording` of a VantageWorkspace (see the module doc).

    ``data`` is ``(n_frames, n_acquisitions, n_elements, n_samples)``: int16 RF for the
    NS200BW / decimSampleRate modes, complex64 IQ (``modulation_frequency`` = demodFrequency)
    for the BS modes; None when the workspace holds no RcvData (or ``load_data=False``).
    ``meta`` holds the channel map, the PData grid (``meta['grid']``, None without PData),
    the sample mode and the Vantage indices."""
    probe = vantage_probe(ws)
    sequence, first_delays = vantage_sequence(ws, probe)
    mode, fs, n_samples, modulation, t0 = _acquisition_timing(ws, first_delays)
    grid = vantage_grid(ws, pdata) if "PData" in ws.raw and not _empty(ws.raw["PData"]) else None
    data = None
    if load_data and ws.rcvdata is not None:
        cmap = ws.channel_map()
        mapped = np.stack([cmap(ws.rcvdata[k]) for k in range(ws.rcvdata.shape[0])])
        if mode in BS_PERIODS_PER_PAIR:
            data = bs_pairs_to_iq(mapped, t0=t0, demod_frequency=modulation, sample_mode=mode)
        else:
            data = mapped
    trans = ws.raw.get("Trans")
    meta = {"sample_mode": mode, "element_channel": ws.element_channel,
            "start_rows": [a.start_row for a in ws.acquisitions], "rows_per_acquisition": ws.n_samples,
            "rcv_buffer": ws.buffer, "rf_layout": ws.rf_layout, "grid": grid,
            "receive": [a.receive + 1 for a in ws.acquisitions], "tx": [a.transmit + 1 for a in ws.acquisitions],
            "acq_num": [a.acq_num for a in ws.acquisitions], "lens_correction_s": ws.probe.lens_correction_s,
            "demod_frequency": ws.acquisitions[0].demod_frequency, "probe_name": ws.probe.name,
            "trans_units": None if trans is None else _field(trans, "units")}
    return Recording(data=data, probe=probe, sequence=sequence, fs=fs, fc=ws.probe.fc, c=ws.c, t0=t0,
                     bandwidth=probe.bandwidth if getattr(probe, "bandwidth", None) else math.nan,
                     modulation_frequency=modulation, source="Verasonics Vantage workspace", meta=meta)


def pipeline_from_vantage(workspace, *, grid=None, pdata=1, buffer=1, **overrides):
    """The B-mode pipeline of a Vantage workspace (VantageWorkspace or path): its input is
    one channel-mapped RcvData frame ``(1, n_acquisitions, n_elements, rows)`` int16, as
    ``VantageWorkspace.channel_map()`` (and a live session) gives it.

    RF modes give a :class:`usbeam.Pipeline` (RF -> IQ -> DAS -> B-mode, demodulated at
    Trans.frequency); BS modes a :class:`usbeam.pipelines.vantage.QuadraturePairPipeline`
    (pairs -> IQ -> DAS -> B-mode).  ``grid`` defaults to PData(pdata); other keywords go
    to the pipeline (f_number, window, dynamic_range, normalize, backend, ...)."""
    from .vantage import VantageWorkspace, load_vantage
    if not isinstance(workspace, VantageWorkspace):
        workspace = load_vantage(str(workspace), load_data=False, buffer=buffer)
    rec = to_recording(workspace, pdata=pdata, load_data=False)
    if grid is None:
        grid = rec.meta["grid"]
        if grid is None:
            raise ValueError("PData is missing from the Vantage workspace: give grid= explicitly")
    for name in ("probe", "sequence", "fs", "fc", "c", "t0", "n_samples", "rf_dtype"):
        if name in overrides:
            raise TypeError(f"{name} comes from the Vantage workspace; it cannot be overridden")
    rows = workspace.n_samples
    if rec.meta["sample_mode"] in BS_PERIODS_PER_PAIR:
        from ..pipelines.vantage import QuadraturePairPipeline
        return QuadraturePairPipeline(rec.probe, rec.sequence, grid, fs=rec.fs, fc=rec.modulation_frequency,
                                      c=rec.c, t0=rec.t0, n_rows=rows, sample_mode=rec.meta["sample_mode"],
                                      **overrides)
    from ..pipelines.bmode import Pipeline
    return Pipeline(rec.probe, rec.sequence, grid, fs=rec.fs, fc=rec.fc, c=rec.c, t0=rec.t0, n_samples=rows,
                    rf_dtype=np.int16, **overrides)
