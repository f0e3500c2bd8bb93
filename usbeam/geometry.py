"""Transmit and grid geometry for any probe (frozen, validated dataclasses); probes are in
``usbeam.probes`` (LinearArray, ConvexArray, MatrixArray, ElementArray).

Conventions (SI units, those of MUST/PyMUST so results compare with theirs):

* x along the array, x = 0 at its centre; y elevation; z depth (> 0 in the medium).
* Element e of a ``LinearArray`` sits at ``x_e = (e - (N-1)/2) * pitch``, y = z = 0; a
  ``ConvexArray`` follows MUST's convention for curved arrays (usbeam.probes).  Element
  positions e are 3-D throughout below.
* Time t = 0 is when the FIRST element fires (MUST ``txdelay``: delays shifted so their
  minimum is 0).  Received sample n is at time ``t0 + n/fs``.
* A transmit gives the transmit time ``tau_tx(p)`` of a point p:

  ``PlaneWave(angle, angle_y=0)`` (p - e_first) . d / c, d = (sin a cos b, sin b, cos a cos b),
                                 e_first the first-firing element (min e . d; on a linear
                                 array x_min for a > 0, x_max for a < 0)
  ``DivergingWave(source)``      (|p - v| - min_e |e - v|) / c, v = (xv, [yv,] zv), zv < 0
  ``Focused(focus, origin)``     (max_e |e - f| + side |p - f|) / c, zf > 0, side the sign
                                 of (p - f) . axis (axis +z, or from origin to f)
                                 (virtual-source model: before the focus the wave
                                 converges, after it diverges from f)
  ``SyntheticAperture(element)`` |p - e_k| / c, element k fires alone
  ``Delays(delays)``             MUST ``dasmtx``'s model of an arbitrary delay law (s per
                                 element, NaN = off): min_i (c d_i + |p - s_i|) / c over
                                 4 n_active virtual sources s_i on the array, positions and
                                 delays interpolated by not-a-knot cubic splines of the
                                 element index (as PyMUST ``interp1(..., 'cubic')``); on a
                                 matrix array the elements themselves (PyMUST ``dasmtx3``)

* A sequence is a list (or tuple) of transmits; the beamformer sums them coherently.
* ``Grid(x=..., z=...)`` gives images ``(nz, nx)``; with ``y=`` too, volumes
  ``(ny, nz, nx)``; ``Grid.points(p)`` an arbitrary list of points ``(n_points,)``.
  Sector and volume grids (``PolarGrid``, ``VolumeGrid``, ``SphericalGrid``) are in
  ``usbeam.grids``.
"""
from dataclasses import dataclass, field
import math
import numbers

import numpy as np

from . import _validate
from .probes import ConvexArray, ElementArray, LinearArray, MatrixArray, check_probe

__all__ = ["LinearArray", "ConvexArray", "MatrixArray", "ElementArray", "PlaneWave", "DivergingWave", "Focused", "SyntheticAperture", "Delays", "Grid",
           "plane_wave_sequence", "as_sequence"]


def _point(name, value):
    """An (x, z) pair or an (x, y, z) triple of finite floats, as (x, y, z)."""
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a pair (x, z) or a triple (x, y, z) of numbers (got {value!r})") from None
    if arr.shape not in ((2,), (3,)):
        raise ValueError(f"{name} must be a pair (x, z) or a triple (x, y, z) in m (got shape {arr.shape})")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite (got {tuple(arr)})")
    if arr.size == 2:
        return (float(arr[0]), 0.0, float(arr[1])), (float(arr[0]), float(arr[1]))
    return (float(arr[0]), float(arr[1]), float(arr[2])), tuple(float(v) for v in arr)


def _positions(probe):
    return np.asarray(probe.positions, dtype=np.float64)


@dataclass(frozen=True)
class PlaneWave:
    """Plane wave steered by ``angle`` (rad, |angle| < pi/2, > 0 toward +x) and, for matrix
    arrays, ``angle_y`` (rad, toward +y): direction (sin a cos b, sin b, cos a cos b).  t = 0
    when the first element fires: the element e minimising e . d (MUST txdelay, also for
    convex arrays, where the wavefront is the tangent plane)."""
    angle: float = 0.0
    angle_y: float = 0.0

    def __post_init__(self):
        angle = _validate.real_scalar("angle", self.angle)
        if not abs(angle) < math.pi / 2:
            raise ValueError(f"angle must satisfy |angle| < pi/2 rad (got {angle})")
        angle_y = _validate.real_scalar("angle_y", self.angle_y)
        if not abs(angle_y) < math.pi / 2:
            raise ValueError(f"angle_y must satisfy |angle_y| < pi/2 rad (got {angle_y})")
        object.__setattr__(self, "angle", angle)
        object.__setattr__(self, "angle_y", angle_y)

    def check(self, probe):
        return self

    @property
    def direction(self):
        a, b = self.angle, self.angle_y
        return np.array([math.sin(a) * math.cos(b), math.sin(b), math.cos(a) * math.cos(b)])

    def first_element(self, probe):
        """Position (x, y, z) of the first-firing element."""
        pos = _positions(probe)
        if self.angle_y == 0.0 and np.all(pos[:, 1:] == 0):  # a line on the x axis: x_min or x_max
            return pos[np.argmin(pos[:, 0]) if self.angle >= 0 else np.argmax(pos[:, 0])]
        return pos[np.argmin(pos @ self.direction)]

    def transmit_time(self, points, probe, c):
        """tau_tx (s) of ``points`` (n, 3)."""
        first = self.first_element(probe)
        d = self.direction
        p = np.asarray(points, dtype=np.float64)
        return ((p[:, 0] - first[0]) * d[0] + (p[:, 2] - first[2]) * d[2] + (p[:, 1] - first[1]) * d[1]) / c


@dataclass(frozen=True)
class DivergingWave:
    """Diverging wave from a virtual source ``source`` = (xv, zv) or (xv, yv, zv) (m) behind
    the array (zv < 0; for a convex array its centre of curvature, ``probe.center_of_curvature``,
    gives MUST's circular wave).  tau_tx = (|p - v| - min_e |e - v|) / c."""
    source: tuple = (0.0, -0.01)

    def __post_init__(self):
        xyz, given = _point("source", self.source)
        if not xyz[2] < 0:
            raise ValueError(f"source must be behind the array: its z must be < 0 (got {xyz[2]})")
        object.__setattr__(self, "source", given)

    @property
    def point(self):
        """The source as (x, y, z), m."""
        return _point("source", self.source)[0]

    def check(self, probe):
        return self

    def transmit_time(self, points, probe, c):
        v = np.array(self.point)
        p = np.asarray(points, dtype=np.float64)
        first = np.min(np.linalg.norm(_positions(probe) - v, axis=1))
        r = np.sqrt((p[:, 0] - v[0]) ** 2 + (p[:, 1] - v[1]) ** 2 + (p[:, 2] - v[2]) ** 2)
        return (r - first) / c


@dataclass(frozen=True)
class Focused:
    """Focused wave through ``focus`` = (xf, zf) or (xf, yf, zf) (m), zf > 0 (virtual-source
    model): tau_tx = (max_e |e - f| + side |p - f|) / c, side = sign((p - f) . axis), -1
    before the focus and +1 past it.  ``origin`` (a point of the array, (x, z) or (x, y, z))
    sets the beam axis, from origin to focus; None: the axis is +z (a beam straight down, as
    line-by-line imaging with a linear array).  ``Focused.steered(angle, depth)`` builds a
    phased array's steered beam from the array centre."""
    focus: tuple = (0.0, 0.03)
    origin: tuple = None

    def __post_init__(self):
        xyz, given = _point("focus", self.focus)
        if not xyz[2] > 0:
            raise ValueError(f"focus must be in front of the array: its z must be > 0 (got {xyz[2]})")
        object.__setattr__(self, "focus", given)
        if self.origin is not None:
            o, o_given = _point("origin", self.origin)
            if np.linalg.norm(np.subtract(xyz, o)) == 0:
                raise ValueError("origin must differ from focus (it sets the beam axis)")
            object.__setattr__(self, "origin", o_given)

    @classmethod
    def steered(cls, angle, depth, origin=(0.0, 0.0)):
        """Focus at ``depth`` (m) along the direction ``angle`` (rad from +z toward +x) from
        ``origin`` ((x, z) m, default the array centre)."""
        angle = _validate.real_scalar("angle", angle)
        if not abs(angle) < math.pi / 2:
            raise ValueError(f"angle must satisfy |angle| < pi/2 rad (got {angle})")
        depth = _validate.positive("depth", depth)
        (ox, oy, oz), _ = _point("origin", origin)
        return cls((ox + depth * math.sin(angle), oy, oz + depth * math.cos(angle)), origin=(ox, oy, oz))

    @property
    def point(self):
        return _point("focus", self.focus)[0]

    @property
    def axis(self):
        """Unit vector of the beam axis (x, y, z)."""
        if self.origin is None:
            return (0.0, 0.0, 1.0)
        d = np.subtract(self.point, _point("origin", self.origin)[0])
        return tuple(float(v) for v in d / np.linalg.norm(d))

    def check(self, probe):
        return self

    def transmit_time(self, points, probe, c):
        f = np.array(self.point)
        ax = self.axis
        p = np.asarray(points, dtype=np.float64)
        farthest = np.max(np.linalg.norm(_positions(probe) - f, axis=1))
        r = np.sqrt((p[:, 0] - f[0]) ** 2 + (p[:, 1] - f[1]) ** 2 + (p[:, 2] - f[2]) ** 2)
        along = (ax[0] * (p[:, 0] - f[0]) + ax[1] * (p[:, 1] - f[1])) + ax[2] * (p[:, 2] - f[2])
        return (farthest + np.sign(along) * r) / c


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
        e = _positions(probe)[self.element]
        return np.sqrt((p[:, 0] - e[0]) ** 2 + (p[:, 1] - e[1]) ** 2 + (p[:, 2] - e[2]) ** 2) / c


_SPLINE_INVERSES = {}  # size -> inverse of the (1, 4, 1) tridiagonal matrix, read-only
_SPLINE_INVERSE_MAX = 512  # above: the elimination itself (an inverse of 2 MiB and more)


def _solve_141(rhs):
    """x with (1, 4, 1) x = rhs along axis 0 (rhs (size,) or (size, k), overwritten): the
    elimination of the spline's rows (Thomas), sub- and super-diagonals 1."""
    size = rhs.shape[0]
    diag = np.full(size, 4.0)
    for i in range(1, size):
        factor = 1.0 / diag[i - 1]
        diag[i] -= factor
        rhs[i] -= factor * rhs[i - 1]
    x = np.empty_like(rhs)
    x[-1] = rhs[-1] / diag[-1]
    for i in range(size - 2, -1, -1):
        x[i] = (rhs[i] - x[i + 1]) / diag[i]
    return x


def _tridiagonal_141_inverse(size):
    """The inverse of the (1, 4, 1) tridiagonal matrix of a size, cached: a Delays transmit's
    plan solves three splines of the same size (x, z, delays), by elimination a Python loop of
    2 size steps (0.13 ms at 128 elements), with it one product for the three."""
    inverse = _SPLINE_INVERSES.get(size)
    if inverse is None:
        inverse = _solve_141(np.eye(size))
        inverse.flags.writeable = False
        if len(_SPLINE_INVERSES) < 32:
            _SPLINE_INVERSES[size] = inverse
    return inverse


def _not_a_knot_spline(values, t):
    """Cubic splines through (k, values[..., k]), k = 0..n-1, with not-a-knot ends, at t: one
    spline per row of a 2-D ``values`` (they share the knots, so one solve serves them all),
    (rows, len(t)); a 1-D ``values`` gives one, (len(t),).  Fewer than 4 knots: the
    interpolating polynomial (the not-a-knot limit)."""
    y = np.asarray(values, dtype=np.float64)
    one = y.ndim == 1
    y = np.atleast_2d(y)
    n = y.shape[1]
    if n < 4:
        out = (np.stack([np.polyval(np.polyfit(np.arange(n), row, n - 1), t) for row in y]) if n > 1
               else np.repeat(y[:, :1], np.size(t), axis=1).astype(np.float64))
        return out[0] if one else out
    # Second derivatives m: m[i-1] + 4 m[i] + m[i+1] = r[i] = 6 (y[i+1] - 2 y[i] + y[i-1])
    # inside; not-a-knot (third derivative continuous at knots 1 and n-2) gives
    # m[0] = 2 m[1] - m[2], so the row of knot 1 reads 6 m[1] = r[1] (likewise at n-2),
    # and the rows between form a tridiagonal system (1, 4, 1).
    r = 6.0 * (y[:, 2:] - 2.0 * y[:, 1:-1] + y[:, :-2])  # rows 1 .. n-2
    m = np.zeros(y.shape)
    m[:, 1], m[:, n - 2] = r[:, 0] / 6.0, r[:, -1] / 6.0
    inner = n - 4  # unknowns m[2] .. m[n-3]
    if inner > 0:
        rhs = r[:, 1:-1].copy()
        rhs[:, 0] -= m[:, 1]
        rhs[:, -1] -= m[:, n - 2]
        if inner <= _SPLINE_INVERSE_MAX:
            # einsum's own loops, not a matrix product: BLAS would wake its threads (see
            # grids._dot3)
            m[:, 2:n - 2] = np.einsum("ij,kj->ki", _tridiagonal_141_inverse(inner), rhs)
        else:
            m[:, 2:n - 2] = _solve_141(rhs.T.copy()).T
    m[:, 0] = 2.0 * m[:, 1] - m[:, 2]
    m[:, n - 1] = 2.0 * m[:, n - 2] - m[:, n - 3]
    k = np.clip(np.floor(t).astype(int), 0, n - 2)
    u = t - k
    out = ((1 - u) * y[:, k] + u * y[:, k + 1]
           + ((1 - u) ** 3 - (1 - u)) * m[:, k] / 6.0 + (u ** 3 - u) * m[:, k + 1] / 6.0)
    return out[0] if one else out


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
        d = d - d[active].min()
        d.flags.writeable = False
        object.__setattr__(self, "delays", d)
        object.__setattr__(self, "_sources", {})  # (probe, c) -> sources: a plan rebuilt for a new grid reuses them

    def __repr__(self):
        active = ~np.isnan(self.delays)
        return (f"Delays({self.delays.size} elements, {int(active.sum())} firing, "
                f"span {np.ptp(self.delays[active]) * 1e6:.4g} us)")

    def check(self, probe):
        if self.delays.size != probe.n_elements:
            raise ValueError(f"delays has {self.delays.size} entries for a probe of {probe.n_elements} elements")
        on = np.flatnonzero(~np.isnan(self.delays))
        if not getattr(probe, "two_dimensional", False) and on[-1] - on[0] + 1 != on.size:
            raise ValueError("delays: the firing elements must be one contiguous sub-aperture")
        return self

    def sources(self, probe, c):
        """Virtual sources as rows.  Line arrays (linear, convex): (3, 4 n_active) rows x (m),
        z (m), path offset c * delay (m), positions and delays interpolated by not-a-knot
        splines of the element index (PyMUST dasmtx; z is 0 for a linear array).  Matrix
        arrays: (4, n_active) rows x, y, z, offset, the elements themselves (PyMUST dasmtx3)."""
        try:
            key = (probe, float(c))
            cached = self._sources.get(key)
        except TypeError:  # a probe given as arrays (ElementArray) has no hash
            key = cached = None
        if cached is not None:
            return cached.copy()
        src = self._compute_sources(probe, c)
        if key is not None and len(self._sources) < 8:
            self._sources[key] = src.copy()
        return src

    def _compute_sources(self, probe, c):
        active = ~np.isnan(self.delays)
        pos, de = _positions(probe)[active], self.delays[active]
        if getattr(probe, "two_dimensional", False):
            return np.stack([pos[:, 0], pos[:, 1], pos[:, 2], c * de])
        n = de.size
        if n == 1:
            return np.array([[pos[0, 0]], [pos[0, 2]], [c * de[0]]])
        t = np.linspace(0, n - 1, 4 * n)
        if np.all(pos[:, 2] == 0):  # a linear array: z stays 0
            x, offset = _not_a_knot_spline(np.stack([pos[:, 0], de]), t)
            return np.stack([x, np.zeros(t.size), c * offset])
        x, z, offset = _not_a_knot_spline(np.stack([pos[:, 0], pos[:, 2], de]), t)
        return np.stack([x, z, c * offset])

    def transmit_time(self, points, probe, c):
        src = self.sources(probe, c)
        p = np.asarray(points, dtype=np.float64)
        best = np.full(p.shape[0], np.inf)
        if src.shape[0] == 4:
            xs, ys, zs, offset = src
        else:
            xs, zs, offset = src
            ys = np.zeros_like(xs)
        # (points x block) arrays of at most ~2^20 entries keep the memory at O(n_points)
        block = max(1, (1 << 20) // max(1, p.shape[0]))
        px, py, pz = p[:, :1], p[:, 1:2], p[:, 2:3]
        for i0 in range(0, src.shape[1], block):
            sl = slice(i0, i0 + block)
            r = np.sqrt((px - xs[sl]) ** 2 + (py - ys[sl]) ** 2 + (pz - zs[sl]) ** 2)
            np.minimum(best, (offset[sl] + r).min(axis=1), out=best)
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
    if probe is not None:
        check_probe(probe)
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
    # An image axis in any other order has no extent to plot and no profile to measure along
    # (image_extent, metrics.fwhm would be silently wrong): flip the image, not the axis.
    steps = np.diff(arr)
    if not np.all(steps > 0):
        i = int(np.argmax(~(steps > 0))) + 1
        raise ValueError(f"{name} must be strictly increasing (got {arr[i]:.6g} after {arr[i - 1]:.6g} at index {i})")
    arr = arr.copy()
    arr.flags.writeable = False
    return arr


@dataclass(frozen=True, eq=False)
class Grid:
    """Image points.  ``Grid(x=..., z=...)``: 1-D strictly increasing vectors (m), images
    ``(nz, nx)``, x fastest.
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
