"""Probe, transmit and grid geometry for linear arrays (frozen, validated dataclasses).

Conventions (SI units, those of MUST/PyMUST so results compare with theirs):

* x along the array, x = 0 at its centre; y elevation; z depth (> 0 in the medium).
* Element e of a ``LinearArray`` sits at ``x_e = (e - (N-1)/2) * pitch``, y = z = 0.
* Time t = 0 is when the FIRST element fires (MUST ``txdelay``: delays shifted so their
  minimum is 0).  Received sample n is at time ``t0 + n/fs``.
* A transmit gives the transmit time ``tau_tx(p)`` of a point p:

  ``PlaneWave(angle)``           ((x - x_first) sin a + z cos a) / c, x_first the
                                 first-firing element (x_min for a > 0, x_max for a < 0)
  ``DivergingWave(source)``      (|p - v| - min_e |e - v|) / c, v = (xv, zv), zv < 0
  ``Focused(focus)``             (max_e |e - f| + sign(z - zf) |p - f|) / c, zf > 0
                                 (virtual-source model: before the focus the wave
                                 converges, after it diverges from f)
  ``SyntheticAperture(element)`` |p - e_k| / c, element k fires alone
  ``Delays(delays)``             MUST ``dasmtx``'s model of an arbitrary delay law (s per
                                 element, NaN = off): min_i (c d_i + |p - s_i|) / c over
                                 4 n_active virtual sources s_i on the array, positions and
                                 delays interpolated by not-a-knot cubic splines of the
                                 element index (as PyMUST ``interp1(..., 'cubic')``)

* A sequence is a list (or tuple) of transmits; the beamformer sums them coherently.
* ``Grid(x=..., z=...)`` gives images ``(nz, nx)``; with ``y=`` too, volumes
  ``(ny, nz, nx)``; ``Grid.points(p)`` an arbitrary list of points ``(n_points,)``.
"""
from dataclasses import dataclass, field
import math
import numbers

import numpy as np

from . import _validate

__all__ = ["LinearArray", "PlaneWave", "DivergingWave", "Focused", "SyntheticAperture", "Delays", "Grid",
           "plane_wave_sequence", "as_sequence"]


def _optional_positive(name, value):
    return None if value is None else _validate.positive(name, value)


def _point2(name, value):
    """An (x, z) pair of finite floats."""
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a pair (x, z) of numbers (got {value!r})") from None
    if arr.shape != (2,):
        raise ValueError(f"{name} must be a pair (x, z) in m (got shape {arr.shape})")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite (got {tuple(arr)})")
    return (float(arr[0]), float(arr[1]))


@dataclass(frozen=True)
class LinearArray:
    """A linear array of ``n_elements`` elements at ``pitch`` (m), centred on x = 0.

    ``width`` (element width, m) and ``kerf`` (gap, m) satisfy pitch = width + kerf; give
    either (the other is derived) or both (they must agree).  ``fc`` (Hz) and
    ``bandwidth`` (fractional -6 dB pulse-echo bandwidth, e.g. 0.75 for 75 %) are optional
    defaults for the beamformer's automatic f-number and for the simulator.
    """
    n_elements: int
    pitch: float
    width: float = None
    kerf: float = None
    fc: float = None
    bandwidth: float = None

    def __post_init__(self):
        n = _validate.integer("n_elements", self.n_elements, minimum=1, maximum=1 << 20)
        pitch = _validate.positive("pitch", self.pitch)
        width = _optional_positive("width", self.width)
        kerf = None if self.kerf is None else _validate.nonnegative("kerf", self.kerf)
        if width is None and kerf is not None:
            width = pitch - kerf
            if not width > 0:
                raise ValueError(f"kerf ({kerf}) must be smaller than pitch ({pitch})")
        elif width is not None and kerf is None:
            kerf = pitch - width
        elif width is not None and kerf is not None and abs(width + kerf - pitch) > 1e-9 * pitch:
            raise ValueError(f"width + kerf must equal pitch (got {width} + {kerf} != {pitch})")
        if width is not None and width > pitch * (1 + 1e-12):
            raise ValueError(f"width ({width}) must be <= pitch ({pitch})")
        if kerf is not None and kerf < 0:
            kerf = 0.0
        fc = _optional_positive("fc", self.fc)
        bandwidth = _optional_positive("bandwidth", self.bandwidth)
        if bandwidth is not None and not bandwidth < 2:
            raise ValueError(f"bandwidth is a fraction in (0, 2) (got {bandwidth}; MUST's % / 100)")
        for name, value in (("n_elements", n), ("pitch", pitch), ("width", width), ("kerf", kerf),
                            ("fc", fc), ("bandwidth", bandwidth)):
            object.__setattr__(self, name, value)

    @property
    def x(self):
        """Element x positions (m), float64 ``(n_elements,)``."""
        return (np.arange(self.n_elements) - (self.n_elements - 1) / 2) * self.pitch

    @property
    def positions(self):
        """Element positions (m), float64 ``(n_elements, 3)`` as (x, y, z)."""
        pos = np.zeros((self.n_elements, 3))
        pos[:, 0] = self.x
        return pos

    @property
    def aperture(self):
        """Distance between the centres of the outer elements (m)."""
        return (self.n_elements - 1) * self.pitch


@dataclass(frozen=True)
class PlaneWave:
    """Plane wave steered by ``angle`` (rad, |angle| < pi/2, > 0 toward +x)."""
    angle: float = 0.0

    def __post_init__(self):
        angle = _validate.real_scalar("angle", self.angle)
        if not abs(angle) < math.pi / 2:
            raise ValueError(f"angle must satisfy |angle| < pi/2 rad (got {angle})")
        object.__setattr__(self, "angle", angle)

    def check(self, probe):
        return self

    def transmit_time(self, points, probe, c):
        """tau_tx (s) of ``points`` (n, 3)."""
        xe = probe.x
        x_first = xe.min() if self.angle >= 0 else xe.max()
        p = np.asarray(points, dtype=np.float64)
        return ((p[:, 0] - x_first) * math.sin(self.angle) + p[:, 2] * math.cos(self.angle)) / c


@dataclass(frozen=True)
class DivergingWave:
    """Diverging wave from a virtual source ``source = (xv, zv)`` (m) behind the array (zv < 0)."""
    source: tuple = (0.0, -0.01)

    def __post_init__(self):
        xv, zv = _point2("source", self.source)
        if not zv < 0:
            raise ValueError(f"source must be behind the array: its z must be < 0 (got {zv})")
        object.__setattr__(self, "source", (xv, zv))

    def check(self, probe):
        return self

    def transmit_time(self, points, probe, c):
        xv, zv = self.source
        p = np.asarray(points, dtype=np.float64)
        first = np.min(np.hypot(probe.x - xv, zv))
        r = np.sqrt((p[:, 0] - xv) ** 2 + p[:, 1] ** 2 + (p[:, 2] - zv) ** 2)
        return (r - first) / c


@dataclass(frozen=True)
class Focused:
    """Focused wave through ``focus = (xf, zf)`` (m), zf > 0 (virtual-source model)."""
    focus: tuple = (0.0, 0.03)

    def __post_init__(self):
        xf, zf = _point2("focus", self.focus)
        if not zf > 0:
            raise ValueError(f"focus must be in front of the array: its z must be > 0 (got {zf})")
        object.__setattr__(self, "focus", (xf, zf))

    def check(self, probe):
        return self

    def transmit_time(self, points, probe, c):
        xf, zf = self.focus
        p = np.asarray(points, dtype=np.float64)
        farthest = np.max(np.hypot(probe.x - xf, zf))
        r = np.sqrt((p[:, 0] - xf) ** 2 + p[:, 1] ** 2 + (p[:, 2] - zf) ** 2)
        return (farthest + np.sign(p[:, 2] - zf) * r) / c


@dataclass(frozen=True)
class SyntheticAperture:
    """Element ``element`` (0-based) fires alone at t = 0."""
    element: int = 0

    def __post_init__(self):
        object.__setattr__(self, "element", _validate.integer("element", self.element, minimum=0))

    def check(self, probe):
        if self.element >= probe.n_elements:
            raise ValueError(f"element index {self.element} is out of range for a probe of "
                             f"{probe.n_elements} elements")
        return self

    def transmit_time(self, points, probe, c):
        p = np.asarray(points, dtype=np.float64)
        xk = probe.x[self.element]
        return np.sqrt((p[:, 0] - xk) ** 2 + p[:, 1] ** 2 + p[:, 2] ** 2) / c


def _not_a_knot_spline(values, t):
    """Cubic spline through (k, values[k]), k = 0..n-1, with not-a-knot ends, at t.
    Fewer than 4 knots: the interpolating polynomial (the not-a-knot limit)."""
    y = np.asarray(values, dtype=np.float64)
    n = y.size
    if n < 4:
        return np.polyval(np.polyfit(np.arange(n), y, n - 1), t) if n > 1 else np.full_like(t, y[0])
    # Second derivatives m: m[i-1] + 4 m[i] + m[i+1] = r[i] = 6 (y[i+1] - 2 y[i] + y[i-1])
    # inside; not-a-knot (third derivative continuous at knots 1 and n-2) gives
    # m[0] = 2 m[1] - m[2], so the row of knot 1 reads 6 m[1] = r[1] (likewise at n-2),
    # and the rows between form a tridiagonal system, solved by elimination (Thomas).
    r = 6.0 * (y[2:] - 2.0 * y[1:-1] + y[:-2])  # rows 1 .. n-2
    m = np.zeros(n)
    m[1], m[n - 2] = r[0] / 6.0, r[-1] / 6.0
    inner = n - 4  # unknowns m[2] .. m[n-3]
    if inner > 0:
        rhs = r[1:-1].copy()
        rhs[0] -= m[1]
        rhs[-1] -= m[n - 2]
        diag = np.full(inner, 4.0)
        for i in range(1, inner):  # forward elimination, sub- and super-diagonals are 1
            factor = 1.0 / diag[i - 1]
            diag[i] -= factor
            rhs[i] -= factor * rhs[i - 1]
        sol = np.empty(inner)
        sol[-1] = rhs[-1] / diag[-1]
        for i in range(inner - 2, -1, -1):
            sol[i] = (rhs[i] - sol[i + 1]) / diag[i]
        m[2:n - 2] = sol
    m[0] = 2.0 * m[1] - m[2]
    m[n - 1] = 2.0 * m[n - 2] - m[n - 3]
    k = np.clip(np.floor(t).astype(int), 0, n - 2)
    u = t - k
    return ((1 - u) * y[k] + u * y[k + 1]
            + ((1 - u) ** 3 - (1 - u)) * m[k] / 6.0 + (u ** 3 - u) * m[k + 1] / 6.0)


@dataclass(frozen=True, eq=False, repr=False)
class Delays:
    """A transmit given by its per-element delays (s), NaN for elements that do not fire.

    Beamformed with MUST ``dasmtx``'s model (needed to reproduce MUST results exactly):
    the active elements and their delays are interpolated on 4 n_active points by
    not-a-knot cubic splines of the element index, and the transmit time of p is
    ``min_i (d_i + |p - s_i| / c)``.  Delays are shifted so the first firing is at t = 0.
    """
    delays: np.ndarray = None

    def __post_init__(self):
        if isinstance(self.delays, (str, bytes)):
            raise TypeError(f"delays must be numbers in s (got {type(self.delays).__name__})")
        try:
            d = np.array(self.delays, dtype=np.float64).reshape(-1)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"delays must be numbers in s ({exc})") from None
        if d.size == 0:
            raise ValueError("delays is empty")
        active = ~np.isnan(d)
        if not active.any():
            raise ValueError("delays: no element fires (all NaN)")
        if not np.all(np.isfinite(d[active])):
            raise ValueError("delays must be finite (NaN marks an element that does not fire)")
        on = np.flatnonzero(active)
        if on[-1] - on[0] + 1 != on.size:
            raise ValueError("delays: the firing elements must be one contiguous sub-aperture")
        d = d - d[active].min()
        d.flags.writeable = False
        object.__setattr__(self, "delays", d)

    def __repr__(self):
        active = ~np.isnan(self.delays)
        return (f"Delays({self.delays.size} elements, {int(active.sum())} firing, "
                f"span {np.ptp(self.delays[active]) * 1e6:.4g} us)")

    def check(self, probe):
        if self.delays.size != probe.n_elements:
            raise ValueError(f"delays has {self.delays.size} entries for a probe of {probe.n_elements} elements")
        return self

    def sources(self, probe, c):
        """Virtual sources (3, n) as rows x (m), z (m), path offset c * delay (m)."""
        active = ~np.isnan(self.delays)
        xe, de = probe.x[active], self.delays[active]
        n = xe.size
        if n == 1:
            return np.array([[xe[0]], [0.0], [c * de[0]]])
        t = np.linspace(0, n - 1, 4 * n)
        return np.stack([_not_a_knot_spline(xe, t), np.zeros(t.size), c * _not_a_knot_spline(de, t)])

    def transmit_time(self, points, probe, c):
        src = self.sources(probe, c)
        p = np.asarray(points, dtype=np.float64)
        best = np.full(p.shape[0], np.inf)
        for i in range(src.shape[1]):  # a loop keeps the memory at O(n_points)
            r = np.sqrt((p[:, 0] - src[0, i]) ** 2 + p[:, 1] ** 2 + (p[:, 2] - src[1, i]) ** 2)
            np.minimum(best, src[2, i] + r, out=best)
        return best / c


TRANSMIT_TYPES = (PlaneWave, DivergingWave, Focused, SyntheticAperture, Delays)


def plane_wave_sequence(angles):
    """A tuple of ``PlaneWave`` for each angle (rad) of ``angles``."""
    angles = _validate.finite_array("angles", angles).reshape(-1)
    if angles.size == 0:
        raise ValueError("angles is empty")
    return tuple(PlaneWave(float(a)) for a in angles)


def as_sequence(sequence, probe=None):
    """A tuple of transmits from one transmit or a list of them (checked against probe)."""
    if probe is not None and not isinstance(probe, LinearArray):
        raise TypeError(f"probe must be a usbeam.LinearArray (got {type(probe).__name__})")
    if isinstance(sequence, TRANSMIT_TYPES):
        sequence = (sequence,)
    if not isinstance(sequence, (list, tuple)):
        raise TypeError(f"sequence must be a transmit or a list of transmits (got {type(sequence).__name__})")
    if len(sequence) == 0:
        raise ValueError("sequence is empty")
    for k, tx in enumerate(sequence):
        if not isinstance(tx, TRANSMIT_TYPES):
            raise TypeError(f"sequence[{k}] must be a PlaneWave, DivergingWave, Focused, "
                            f"SyntheticAperture or Delays (got {type(tx).__name__})")
        if probe is not None:
            tx.check(probe)
    return tuple(sequence)


def _coordinate_vector(name, value, required=True):
    if value is None:
        if required:
            raise ValueError(f"{name} is required")
        return None
    arr = _validate.finite_array(name, value)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a 1-D coordinate vector (got shape {arr.shape})")
    if arr.size == 0:
        raise ValueError(f"{name} is empty")
    arr = arr.copy()
    arr.flags.writeable = False
    return arr


@dataclass(frozen=True, eq=False)
class Grid:
    """Image points.  ``Grid(x=..., z=...)``: 1-D vectors (m), images ``(nz, nx)``, x fastest.
    ``Grid(x=..., z=..., y=...)``: volumes ``(ny, nz, nx)``.  ``Grid.points(p)``: arbitrary
    points ``p`` (n_points, 3) as (x, y, z), output ``(n_points,)``."""
    x: np.ndarray = None
    z: np.ndarray = None
    y: np.ndarray = None
    _points: np.ndarray = field(default=None, repr=False)

    def __post_init__(self):
        if self._points is not None:
            return
        object.__setattr__(self, "x", _coordinate_vector("x", self.x))
        object.__setattr__(self, "z", _coordinate_vector("z", self.z))
        object.__setattr__(self, "y", _coordinate_vector("y", self.y, required=False))

    @classmethod
    def points(cls, points):
        """A grid of arbitrary points: ``points`` (n_points, 3) as (x, y, z) in m."""
        p = _validate.finite_array("points", points)
        if p.ndim != 2 or p.shape[1] != 3:
            raise ValueError(f"points must have shape (n_points, 3) (got {p.shape})")
        if p.shape[0] == 0:
            raise ValueError("points is empty")
        p = p.copy()
        p.flags.writeable = False
        grid = cls.__new__(cls)
        for name, value in (("x", None), ("z", None), ("y", None), ("_points", p)):
            object.__setattr__(grid, name, value)
        return grid

    @property
    def shape(self):
        """Spatial shape of one beamformed frame."""
        if self._points is not None:
            return (self._points.shape[0],)
        if self.y is None:
            return (self.z.size, self.x.size)
        return (self.y.size, self.z.size, self.x.size)

    @property
    def n_points(self):
        return int(np.prod(self.shape))

    def __repr__(self):
        """The axes by range and count (in mm), never every coordinate."""
        if self._points is not None:
            return f"Grid.points({self._points.shape[0]} points)"

        def axis(name, v):
            step = f", step {1e3 * (v[-1] - v[0]) / (v.size - 1):.4g} mm" if v.size > 1 else ""
            return f"{name}={1e3 * v[0]:.4g}..{1e3 * v[-1]:.4g} mm ({v.size}{step})"
        axes = [axis("x", self.x), axis("z", self.z)] + ([axis("y", self.y)] if self.y is not None else [])
        return f"Grid({', '.join(axes)}, shape {self.shape})"

    def coordinates(self):
        """All points (n_points, 3) as (x, y, z) in m, in output (C) order."""
        if self._points is not None:
            return np.array(self._points)
        if self.y is None:
            zz, xx = np.meshgrid(self.z, self.x, indexing="ij")
            yy = np.zeros_like(xx)
        else:
            yy, zz, xx = np.meshgrid(self.y, self.z, self.x, indexing="ij")
        return np.stack([xx.ravel(), yy.ravel(), zz.ravel()], axis=1)
