"""Probe geometry as data: element positions, element normals and widths.

Every probe exposes ``positions`` (n_elements, 3) as (x, y, z) in m and ``normals``
(n_elements, 3), unit vectors pointing into the medium, and ``width`` (element width along
the array, m, or None).  The beamformer, the simulator and the readers use nothing else, so
any geometry works; the classes below build the common ones.

Coordinates (MUST/PyMUST): x along the array, y elevation, z depth (> 0 in the medium).

* ``LinearArray(n_elements, pitch)``: x_e = (e - (N-1)/2) pitch, y = z = 0, normals +z.
  A phased array is a LinearArray with a small pitch (P4-2v: 64 x 0.3 mm).
* ``ConvexArray(n_elements, pitch, radius)``: MUST ``getparam``/``dasmtx``'s convention for
  curved arrays.  The elements lie on an arc of radius R, ``pitch`` apart along the arc
  (angular step 2 asin(pitch / 2R)); the origin is the centre of the CHORD joining the two
  outer elements, which sit at z = 0; the centre element bulges into the medium at
  z = R - h, h = sqrt(R^2 - chord^2 / 4) the apothem; the centre of curvature is (0, 0, -h).
  Element e: theta_e (angle of its normal to the z axis, linearly spaced from
  atan2(-chord/2, h) to atan2(chord/2, h)), x = R sin theta_e, z = R cos theta_e - h,
  normal (sin theta_e, 0, cos theta_e).
* ``MatrixArray(nx, ny, pitch_x, pitch_y, missing_rows=())``: a planar 2-D array, element
  (row j, column i) at x = (i - (nx-1)/2) pitch_x, y = (j - (ny-1)/2) pitch_y, z = 0,
  normals +z; rows listed in ``missing_rows`` carry no element (Vermon 32 x 35: rows 8, 17
  and 26 are missing, 1024 elements).  Element order: row by row, x fastest.
* ``ElementArray(positions, normals=None, width=None)``: any geometry given as data (what the
  file readers build); ``two_dimensional`` says whether the aperture is a surface (the
  receive aperture and window then act on both tangent directions) or a line.

``two_dimensional`` is False for linear and convex arrays (the f-number aperture and the
window act in the (x, z) plane of each element, as PyMUST dasmtx), True for matrix arrays
(a box aperture |lateral_1|, |lateral_2| <= axial / (2F), as PyMUST dasmtx3).
"""
from dataclasses import dataclass
import math

import numpy as np

from . import _validate

__all__ = ["LinearArray", "ConvexArray", "MatrixArray", "ElementArray", "PROBE_TYPES", "check_probe"]

_MAX_ELEMENTS = 1 << 20


def _optional_positive(name, value):
    return None if value is None else _validate.positive(name, value)


def _check_bandwidth(name, value):
    value = _optional_positive(name, value)
    if value is not None and not value < 2:
        raise ValueError(f"{name} is a fraction in (0, 2) (got {value}; MUST's % / 100)")
    return value


def _frozen(array):
    array = np.ascontiguousarray(array, dtype=np.float64)
    array.flags.writeable = False
    return array


class _Probe:
    """What every probe shares (positions, normals, width, fc, bandwidth are set by each)."""

    @property
    def x(self):
        """Element x positions (m), float64 ``(n_elements,)``."""
        return np.array(self.positions[:, 0])

    @property
    def aperture(self):
        """Largest distance between element centres along x (m)."""
        x = self.positions[:, 0]
        return float(x.max() - x.min())

    @property
    def is_planar_line(self):
        """A line of elements in z = 0 along x (y = 0, normals +z): where plane waves and the
        classic linear-array transmit conventions apply unchanged."""
        pos, nrm = self.positions, self.normals
        return (not self.two_dimensional and bool(np.all(pos[:, 1:] == 0.0))
                and bool(np.all(nrm == (0.0, 0.0, 1.0))))


@dataclass(frozen=True)
class LinearArray(_Probe):
    """A linear array of ``n_elements`` elements at ``pitch`` (m), centred on x = 0.

    ``width`` (element width, m) and ``kerf`` (gap, m) satisfy pitch = width + kerf; give
    either (the other is derived) or both (they must agree).  ``fc`` (Hz) and
    ``bandwidth`` (fractional -6 dB pulse-echo bandwidth, e.g. 0.75 for 75 %) are optional
    defaults for the beamformer's automatic f-number and for the simulator.  A phased array
    is a LinearArray with a small pitch (about half a wavelength).
    """
    n_elements: int
    pitch: float
    width: float = None
    kerf: float = None
    fc: float = None
    bandwidth: float = None

    two_dimensional = False

    def __post_init__(self):
        n = _validate.integer("n_elements", self.n_elements, minimum=1, maximum=_MAX_ELEMENTS)
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
            raise ValueError(f"width ({width}) must be <= pitch ({pitch}): the elements would overlap")
        if kerf is not None and kerf < 0:
            kerf = 0.0
        fc = _optional_positive("fc", self.fc)
        bandwidth = _check_bandwidth("bandwidth", self.bandwidth)
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
    def normals(self):
        """Element normals (unit, into the medium), float64 ``(n_elements, 3)``: +z."""
        nrm = np.zeros((self.n_elements, 3))
        nrm[:, 2] = 1.0
        return nrm

    @property
    def aperture(self):
        """Distance between the centres of the outer elements (m)."""
        return (self.n_elements - 1) * self.pitch


@dataclass(frozen=True)
class ConvexArray(_Probe):
    """A convex (curved) array: ``n_elements`` elements ``pitch`` (m) apart along an arc of
    radius ``radius`` (m), in MUST's coordinates (module doc: the outer elements at z = 0,
    the centre element at z = R - h > 0, the centre of curvature at (0, 0, -h)).

    ``element_width`` (m, <= pitch) is needed for the automatic f-number; ``fc`` (Hz) and
    ``bandwidth`` (fraction) are optional defaults as for LinearArray.  The arc may span at
    most half a circle.  C5-2v: ``ConvexArray(128, 0.508e-3, 49.57e-3, element_width=0.46e-3)``.
    """
    n_elements: int
    pitch: float
    radius: float
    element_width: float = None
    fc: float = None
    bandwidth: float = None

    two_dimensional = False

    def __post_init__(self):
        n = _validate.integer("n_elements", self.n_elements, minimum=1, maximum=_MAX_ELEMENTS)
        pitch = _validate.positive("pitch", self.pitch)
        radius = _validate.real_scalar("radius", self.radius)
        if not radius > 0:
            raise ValueError(f"radius must be > 0 (got {radius}; a linear array is LinearArray)")
        if not pitch < 2 * radius:
            raise ValueError(f"pitch ({pitch}) must be smaller than 2 radius ({2 * radius})")
        half_span = (n - 1) * math.asin(pitch / (2 * radius))
        if half_span > math.pi / 2 + 1e-12:
            raise ValueError(f"radius ({radius}) is too small for {n} elements at pitch {pitch}: the arc "
                             f"would span {math.degrees(2 * half_span):.1f} degrees (at most 180)")
        width = _optional_positive("element_width", self.element_width)
        if width is not None and width > pitch * (1 + 1e-12):
            raise ValueError(f"element_width ({width}) must be <= pitch ({pitch}): the elements would overlap")
        fc = _optional_positive("fc", self.fc)
        bandwidth = _check_bandwidth("bandwidth", self.bandwidth)
        for name, value in (("n_elements", n), ("pitch", pitch), ("radius", radius), ("element_width", width),
                            ("fc", fc), ("bandwidth", bandwidth)):
            object.__setattr__(self, name, value)

    @property
    def width(self):
        """Element width (m), alias of ``element_width``."""
        return self.element_width

    @property
    def apothem(self):
        """Distance h (m) from the centre of curvature to the chord of the outer elements."""
        half_span = (self.n_elements - 1) * math.asin(self.pitch / (2 * self.radius))
        return self.radius * math.cos(half_span)

    @property
    def angles(self):
        """Angle of each element's normal to the z axis (rad), ``(n_elements,)`` (MUST's THe)."""
        half_span = (self.n_elements - 1) * math.asin(self.pitch / (2 * self.radius))
        chord = 2 * self.radius * math.sin(half_span)
        h = math.sqrt(max(self.radius ** 2 - chord ** 2 / 4, 0.0))
        return np.linspace(math.atan2(-chord / 2, h), math.atan2(chord / 2, h), self.n_elements)

    @property
    def positions(self):
        """Element positions (m), float64 ``(n_elements, 3)`` as (x, y, z) (MUST's)."""
        theta = self.angles
        pos = np.zeros((self.n_elements, 3))
        pos[:, 0] = self.radius * np.sin(theta)
        pos[:, 2] = self.radius * np.cos(theta) - self.apothem
        return pos

    @property
    def normals(self):
        """Element normals (unit, into the medium): (sin theta_e, 0, cos theta_e)."""
        theta = self.angles
        nrm = np.zeros((self.n_elements, 3))
        nrm[:, 0], nrm[:, 2] = np.sin(theta), np.cos(theta)
        return nrm

    @property
    def center_of_curvature(self):
        """(x, y, z) of the centre of the arc (m): (0, 0, -h)."""
        return (0.0, 0.0, -self.apothem)


@dataclass(frozen=True)
class MatrixArray(_Probe):
    """A planar matrix array of ``nx`` columns (along x, ``pitch_x`` m) by ``ny`` rows (along
    y, ``pitch_y`` m), centred on the origin, normals +z; rows in ``missing_rows`` (0-based)
    hold no element.  Element order: row by row, x fastest.  Vermon 32 x 35 (3 MHz):
    ``MatrixArray(32, 35, 0.3e-3, 0.3e-3, missing_rows=(8, 17, 26))``.
    ``element_width`` (along x) and ``element_height`` (along y), m, must fit the pitches."""
    nx: int
    ny: int
    pitch_x: float
    pitch_y: float
    missing_rows: tuple = ()
    element_width: float = None
    element_height: float = None
    fc: float = None
    bandwidth: float = None

    two_dimensional = True

    def __post_init__(self):
        nx = _validate.integer("nx", self.nx, minimum=1, maximum=4096)
        ny = _validate.integer("ny", self.ny, minimum=1, maximum=4096)
        px = _validate.positive("pitch_x", self.pitch_x)
        py = _validate.positive("pitch_y", self.pitch_y)
        if isinstance(self.missing_rows, (str, bytes)):
            raise TypeError("missing_rows must be a sequence of row indices")
        try:
            rows = tuple(sorted({_validate.integer("missing_rows entry", r, minimum=0, maximum=ny - 1)
                                 for r in self.missing_rows}))
        except TypeError as exc:
            if "missing_rows" in str(exc):
                raise
            raise TypeError(f"missing_rows must be a sequence of row indices ({exc})") from None
        if len(rows) >= ny:
            raise ValueError("missing_rows removes every row")
        width = _optional_positive("element_width", self.element_width)
        height = _optional_positive("element_height", self.element_height)
        if width is not None and width > px * (1 + 1e-12):
            raise ValueError(f"element_width ({width}) must be <= pitch_x ({px}): the elements would overlap")
        if height is not None and height > py * (1 + 1e-12):
            raise ValueError(f"element_height ({height}) must be <= pitch_y ({py}): the elements would overlap")
        for name, value in (("nx", nx), ("ny", ny), ("pitch_x", px), ("pitch_y", py), ("missing_rows", rows),
                            ("element_width", width), ("element_height", height),
                            ("fc", _optional_positive("fc", self.fc)),
                            ("bandwidth", _check_bandwidth("bandwidth", self.bandwidth))):
            object.__setattr__(self, name, value)

    @property
    def rows(self):
        """Indices of the rows that hold elements."""
        return np.array([j for j in range(self.ny) if j not in self.missing_rows])

    @property
    def n_elements(self):
        return self.nx * len(self.rows)

    @property
    def width(self):
        return self.element_width

    @property
    def positions(self):
        """Element positions (m), float64 ``(n_elements, 3)``, row by row, x fastest."""
        xs = (np.arange(self.nx) - (self.nx - 1) / 2) * self.pitch_x
        ys = (self.rows - (self.ny - 1) / 2) * self.pitch_y
        yy, xx = np.meshgrid(ys, xs, indexing="ij")
        pos = np.zeros((xx.size, 3))
        pos[:, 0], pos[:, 1] = xx.ravel(), yy.ravel()
        return pos

    @property
    def normals(self):
        nrm = np.zeros((self.n_elements, 3))
        nrm[:, 2] = 1.0
        return nrm


@dataclass(frozen=True, eq=False, repr=False)
class ElementArray(_Probe):
    """Any probe given as data: ``positions`` (n_elements, 3) in m, ``normals`` (n_elements, 3)
    (normalised here; default +z for every element), ``width`` (element width, m, optional:
    needed for the automatic f-number; neighbours closer than it overlap and are refused),
    ``two_dimensional`` (None: True when the elements do not all lie on y = 0 with normals in
    the (x, z) plane).  No two elements may share a position."""
    positions: np.ndarray
    normals: np.ndarray = None
    width: float = None
    fc: float = None
    bandwidth: float = None
    two_dimensional: bool = None

    def __post_init__(self):
        pos = _validate.finite_array("positions", self.positions)
        if pos.ndim != 2 or pos.shape[1] != 3 or pos.shape[0] < 1:
            raise ValueError(f"positions must have shape (n_elements, 3) with n_elements >= 1 (got {pos.shape})")
        if pos.shape[0] > _MAX_ELEMENTS:
            raise ValueError(f"positions: at most {_MAX_ELEMENTS} elements (got {pos.shape[0]})")
        if self.normals is None:
            nrm = np.zeros_like(pos)
            nrm[:, 2] = 1.0
        else:
            nrm = _validate.finite_array("normals", self.normals)
            if nrm.shape != pos.shape:
                raise ValueError(f"normals must have the shape of positions {pos.shape} (got {nrm.shape})")
            length = np.linalg.norm(nrm, axis=1)
            if not np.all(length > 1e-12):
                raise ValueError(f"normals: element {int(np.argmin(length))} has a zero normal")
            nrm = nrm / length[:, None]
            if np.any(nrm[:, 2] <= 0):
                raise ValueError(f"normals must point into the medium (z component > 0); element "
                                 f"{int(np.argmax(nrm[:, 2] <= 0))} does not")
        width = _optional_positive("width", self.width)
        _check_spacing(pos, width)
        two_d = self.two_dimensional
        if two_d is None:
            two_d = not (np.all(pos[:, 1] == 0) and np.all(nrm[:, 1] == 0))
        for name, value in (("positions", _frozen(pos)), ("normals", _frozen(nrm)), ("width", width),
                            ("fc", _optional_positive("fc", self.fc)),
                            ("bandwidth", _check_bandwidth("bandwidth", self.bandwidth)),
                            ("two_dimensional", bool(two_d))):
            object.__setattr__(self, name, value)

    @property
    def n_elements(self):
        return self.positions.shape[0]

    def __repr__(self):
        kind = "2-D" if self.two_dimensional else "1-D"
        return (f"ElementArray({self.n_elements} elements, {kind}, x span {self.aperture * 1e3:.4g} mm"
                + (f", width {self.width * 1e3:.4g} mm" if self.width else "") + ")")


def _check_spacing(pos, width):
    """Refuse coincident elements and, with a width, neighbours closer than it (overlap)."""
    n = pos.shape[0]
    nearest = np.inf
    where = (0, 0)
    block = max(1, (1 << 22) // max(n, 1))
    for i0 in range(0, n, block):  # blocks keep the memory at O(n * block)
        d = np.linalg.norm(pos[i0:i0 + block, None, :] - pos[None, :, :], axis=2)
        rows = np.arange(d.shape[0])
        d[rows, i0 + rows] = np.inf
        k = np.unravel_index(np.argmin(d), d.shape)
        if d[k] < nearest:
            nearest, where = float(d[k]), (i0 + int(k[0]), int(k[1]))
    if n > 1 and not nearest > 0:
        raise ValueError(f"positions: elements {where[0]} and {where[1]} coincide")
    if width is not None and n > 1 and nearest < width * (1 - 1e-9):
        raise ValueError(f"positions: elements {where[0]} and {where[1]} are {nearest:.4g} m apart, closer than "
                         f"the element width {width:.4g} m: the elements would overlap")


PROBE_TYPES = (LinearArray, ConvexArray, MatrixArray, ElementArray)


def check_probe(probe, name="probe"):
    """The probe itself, or TypeError naming ``name``."""
    if not isinstance(probe, PROBE_TYPES):
        raise TypeError(f"{name} must be a LinearArray, ConvexArray, MatrixArray or ElementArray "
                        f"(got {type(probe).__name__})")
    return probe
