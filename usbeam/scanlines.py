"""Focused line-by-line imaging: each focused transmit reconstructs only its own scan lines.

``ScanLineBeamformer(probe, transmits, grid, ...)``: ``transmits`` is a list of ``Focused``
beams (one per scan line, or fewer, each serving the lines nearest to it), ``grid`` a
``PolarGrid`` (scan lines = its angles: phased and convex sectors) or a 2-D ``Grid`` (scan
lines = its x columns: linear arrays).  Each grid line goes to the transmit whose beam is
nearest: for a PolarGrid the beam axis angle (from ``Focused.origin`` to the focus; +z when no
origin) closest to the line's angle, for a Grid the focus x closest to the column's x
(``lines=`` gives the assignment explicitly: one transmit index per line).  One delay-and-sum
plan per transmit (``usbeam.Beamformer`` on that transmit's points, a one-transmit sequence)
is built once; a call beamforms ``data`` ``(n_frames, n_transmits, n_elements, n_samples)``
(or without the frame axis) transmit by transmit into ``(n_frames,) + grid.shape``.  The
conventions (time zero, apertures, windows, interpolation) are the Beamformer's; what
differs from a compounded ``Beamformer`` is only which transmit each point sums: its own.
Channel data of one transmit across frames is not contiguous in that layout, so with several
frames each call stages a copy per transmit (one frame: views, no copy).
"""
import numpy as np

from . import _validate
from .beamformer import Beamformer
from .geometry import Focused, Grid
from .grids import PolarGrid

__all__ = ["ScanLineBeamformer"]


def _beam_angle(tx):
    ax = tx.axis
    return float(np.arctan2(ax[0], ax[2]))


class ScanLineBeamformer:
    """Line-by-line reconstruction of focused transmits (see the module doc).  Keywords are
    the Beamformer's (fs, fc, c, t0, n_samples, f_number, window, interpolation, dtype,
    n_frames, bandwidth, backend)."""

    def __init__(self, probe, transmits, grid, *, lines=None, **kwargs):
        if isinstance(transmits, Focused):
            transmits = [transmits]
        transmits = list(transmits)
        if not transmits:
            raise ValueError("transmits is empty")
        for k, tx in enumerate(transmits):
            if not isinstance(tx, Focused):
                raise TypeError(f"transmits[{k}] must be a usbeam.Focused beam (got {type(tx).__name__})")
        if isinstance(grid, PolarGrid):
            line_pos = grid.angles
            beam_pos = np.array([_beam_angle(tx) for tx in transmits])
            n_lines = grid.angles.size
        elif isinstance(grid, Grid) and grid.x is not None and grid.y is None:
            line_pos = grid.x
            beam_pos = np.array([tx.point[0] for tx in transmits])
            n_lines = grid.x.size
        else:
            raise TypeError("grid must be a usbeam.PolarGrid or a 2-D usbeam.Grid(x=..., z=...)")
        if lines is None:
            lines = np.argmin(np.abs(line_pos[:, None] - beam_pos[None, :]), axis=1)
        else:
            lines = np.asarray(lines)
            if lines.shape != (n_lines,) or lines.dtype.kind not in "iu":
                raise ValueError(f"lines must hold one transmit index per scan line ({n_lines} integers)")
            if lines.min() < 0 or lines.max() >= len(transmits):
                raise ValueError(f"lines: transmit indices must be in [0, {len(transmits) - 1}]")
        self.probe, self.transmits, self.grid, self.lines = probe, tuple(transmits), grid, lines
        coords = grid.coordinates().reshape(grid.shape + (3,))
        self._columns, self._plans = [], []
        for k, tx in enumerate(transmits):
            cols = np.flatnonzero(lines == k)
            self._columns.append(cols)
            if cols.size == 0:
                self._plans.append(None)
                continue
            pts = coords[:, cols, :].reshape(-1, 3)
            self._plans.append(Beamformer(probe, tx, Grid.points(pts), **kwargs))
        used = [p for p in self._plans if p is not None]
        self.out_dtype = used[0].out_dtype
        self.n_samples = used[0].n_samples

    @property
    def n_transmits(self):
        return len(self.transmits)

    def __call__(self, data, out=None):
        data = _validate.ndarray("data", data)
        n_tx, n_el = self.n_transmits, self.probe.n_elements
        framed = data.ndim == 4
        if data.ndim not in (3, 4) or data.shape[-3:] != (n_tx, n_el, self.n_samples):
            raise ValueError(f"data must have shape (n_frames, {n_tx}, {n_el}, {self.n_samples}) or "
                             f"({n_tx}, {n_el}, {self.n_samples}) (got {data.shape})")
        frames = data if framed else data[None]
        shape = (frames.shape[0],) + self.grid.shape
        if out is None:
            out = np.empty(shape if framed else self.grid.shape, self.out_dtype)
        else:
            _validate.out_array("out", out, shape if framed else self.grid.shape, self.out_dtype)
            _validate.no_overlap("out", out, "data", data)
        view = out if framed else out[None]
        n_r = self.grid.shape[0]
        for k, plan in enumerate(self._plans):
            if plan is None:
                continue
            cols = self._columns[k]
            image = plan(frames[:, k][:, None])  # (n_frames, n_points of this transmit)
            view[:, :, cols] = image.reshape(frames.shape[0], n_r, cols.size)
        return out
