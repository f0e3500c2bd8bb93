"""Row-column (RCA) and TOBE arrays: geometry, output grids, decoding and delay-and-sum
(C kernel: csrc/beamform/rca.c; times of flight in csrc/common/usbeam_math.h, section "row-column arrays").

Conventions (SI units):

* Array coordinates: the array lies in z = 0, centred on the origin.  Column c is a strip
  along y at ``x_c = (c - (n_columns-1)/2) * pitch_x``; row r is a strip along x at
  ``y_r = (r - (n_rows-1)/2) * pitch_y``.  ``RowColumnArray.transform`` maps world points
  to array coordinates (4x4 affine), so several arrays can share one world.
* Time t = 0 when the first element fires; sample n is at ``t0 + n/fs``.
* Data: ``(n_frames, n_acquisitions, n_channels, n_samples)`` (frame axis optional),
  float32 RF or complex64 IQ, already decoded (``rca_decode``).  Channels are the strips of
  the receive orientation.
* Methods and their acquisitions:

  ``forces``     acquisition k = decoded transmit of strip k of the receive orientation
                 (source at the strip centre, elevation-focused; Ceroici et al. 2017)
  ``uforces``    acquisition a = strip ``sparse_elements[a]`` (Sobhani et al. 2022)
  ``hercules``   one plane/cylindrical transmit (``angles[0]``, ``focal_depths[0]``),
                 acquisition r = decoded strip r of the orientation orthogonal to receive:
                 a 2-D receive aperture (HERCULES, arXiv 2506.11443)
  ``uhercules``  acquisition a = orthogonal strip ``sparse_elements[a]``
  ``vls``        acquisition a = virtual line source at ``focal_depths[a]`` along ``angles[a]``
                 (> 0 focused, < 0 diverging)
  ``tpw``        acquisition a = plane wave tilted by ``angles[a]`` in the transmit plane
  ``flash``      unsteered plane waves

* Output: an ``RCAGrid`` maps voxel indices (i, j, k) to world points by a 4x4 transform;
  images are ``(n_k, n_j, n_i)`` with singleton axes dropped for B-scans ((nz, nx)).

Example (a TOBE array running FORCES; ``raw`` int16 (128 transmits, 128 channels, n)):

    array = usbeam.RowColumnArray(128, 128, 0.3e-3, tobe=True)
    data = usbeam.rca_decode(raw, array, "forces", algorithm="fast")   # float32, exact sums
    grid = usbeam.RCAGrid.bscan(np.linspace(-20e-3, 20e-3, 401), np.linspace(5e-3, 40e-3, 351))
    plan = usbeam.RCABeamformer(array, "forces", grid, n_samples=data.shape[-1], fs=fs,
                                interpolation="cubic", f_number=1.0)
    image = plan(data)                                                 # (351, 401) float32
"""
from dataclasses import dataclass, field

import numpy as np

from . import _core, _validate
from ._backend import check_backend
from .device import PlanRunner
from .hadamard import hadamard, hadamard_decode

__all__ = ["RowColumnArray", "RCAGrid", "RCABeamformer", "rca_beamform", "rca_cross_planes", "rca_decode",
           "tobe_unflip", "RCA_METHODS"]

RCA_METHODS = ("forces", "uforces", "hercules", "uhercules", "vls", "tpw", "flash")
_METHOD_CODE = {name: i for i, name in enumerate(RCA_METHODS)}
_INTERP = {"nearest": 0, "linear": 1, "cubic": 2}
_WINDOW = {"rect": 0, "hann": 1, "tukey": 2}


def _affine(name, matrix, invertible):
    try:
        m = np.array(matrix, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a 4x4 array of numbers") from None
    if m.shape != (4, 4):
        raise ValueError(f"{name} must have shape (4, 4) (got {m.shape})")
    if not np.all(np.isfinite(m)):
        raise ValueError(f"{name} must be finite")
    if not np.array_equal(m[3], [0.0, 0.0, 0.0, 1.0]):
        raise ValueError(f"{name} must be affine: its last row must be 0 0 0 1 (got {m[3]})")
    if invertible:
        det = np.linalg.det(m[:3, :3])
        scale = np.abs(m[:3, :3]).max()
        if not abs(det) > 1e-12 * scale ** 3:
            raise ValueError(f"{name} is singular (determinant {det:g})")
    m.setflags(write=False)
    return m


@dataclass(frozen=True)
class RowColumnArray:
    """A row-column (or TOBE) array of ``n_columns`` x ``n_rows`` strips.

    ``pitch_x`` spaces the columns (along x), ``pitch_y`` the rows (default ``pitch_x``).
    ``transform`` is the 4x4 affine map from world to array coordinates (default identity).
    ``tobe``: the array is bias-switchable (Top-Orthogonal-to-Bottom Electrode): the signal
    through a strip is multiplied by the polarity of its bias (see ``tobe_unflip``).
    """
    n_columns: int
    n_rows: int
    pitch_x: float
    pitch_y: float = None
    transform: np.ndarray = field(default=None, compare=False)
    fc: float = None
    bandwidth: float = None
    tobe: bool = False

    def __post_init__(self):
        _validate.integer("n_columns", self.n_columns, minimum=1, maximum=4096)
        _validate.integer("n_rows", self.n_rows, minimum=1, maximum=4096)
        object.__setattr__(self, "pitch_x", _validate.positive("pitch_x", self.pitch_x))
        pitch_y = self.pitch_x if self.pitch_y is None else self.pitch_y
        object.__setattr__(self, "pitch_y", _validate.positive("pitch_y", pitch_y))
        transform = np.eye(4) if self.transform is None else self.transform
        object.__setattr__(self, "transform", _affine("transform", transform, invertible=True))
        if self.fc is not None:
            object.__setattr__(self, "fc", _validate.positive("fc", self.fc))
        if self.bandwidth is not None:
            object.__setattr__(self, "bandwidth", _validate.positive("bandwidth", self.bandwidth))

    @property
    def column_x(self):
        return (np.arange(self.n_columns) - (self.n_columns - 1) / 2) * self.pitch_x

    @property
    def row_y(self):
        return (np.arange(self.n_rows) - (self.n_rows - 1) / 2) * self.pitch_y

    def strips(self, orientation):
        """Positions of the strips of 'rows' (y) or 'columns' (x)."""
        orientation = _validate.choice("orientation", orientation, ("rows", "columns"))
        return self.row_y if orientation == "rows" else self.column_x

    def n_strips(self, orientation):
        orientation = _validate.choice("orientation", orientation, ("rows", "columns"))
        return self.n_rows if orientation == "rows" else self.n_columns

    def to_array(self, points):
        """World points (..., 3) in array coordinates."""
        p = np.asarray(points, dtype=np.float64)
        return p @ self.transform[:3, :3].T + self.transform[:3, 3]

    def to_world(self, points):
        inverse = np.linalg.inv(self.transform)
        p = np.asarray(points, dtype=np.float64)
        return p @ inverse[:3, :3].T + inverse[:3, 3]


def _uniform_axis(name, values):
    v = _validate.finite_array(name, values).ravel()
    if v.size == 0:
        raise ValueError(f"{name} must not be empty")
    if v.size == 1:
        return float(v[0]), 0.0, 1
    step = (v[-1] - v[0]) / (v.size - 1)
    if not step > 0 or not np.allclose(np.diff(v), step, rtol=1e-6, atol=1e-12):
        raise ValueError(f"{name} must be increasing and uniformly spaced")
    return float(v[0]), float(step), int(v.size)


@dataclass(frozen=True)
class RCAGrid:
    """Output voxels: ``voxel_transform`` (4x4) maps (i, j, k, 1) to world points;
    ``shape`` = (n_k, n_j, n_i); ``image_shape`` drops singleton k (B-scans: (nz, nx))."""
    voxel_transform: np.ndarray
    shape: tuple

    def __post_init__(self):
        object.__setattr__(self, "voxel_transform", _affine("voxel_transform", self.voxel_transform, False))
        shape = _validate.shape("shape", self.shape, minimum=1)
        if len(shape) != 3:
            raise ValueError(f"shape must be (n_k, n_j, n_i) (got {shape})")
        object.__setattr__(self, "shape", shape)

    @property
    def image_shape(self):
        return self.shape[1:] if self.shape[0] == 1 else self.shape

    def points(self):
        """World points of every voxel, (n_k, n_j, n_i, 3)."""
        k, j, i = np.meshgrid(*(np.arange(n, dtype=np.float64) for n in self.shape), indexing="ij")
        ijk = np.stack([i, j, k, np.ones_like(i)], axis=-1)
        return (ijk @ self.voxel_transform.T)[..., :3]

    @classmethod
    def volume(cls, x, y, z):
        """Volume on uniform axes: image (ny, nz, nx); i -> x, j -> z, k -> y."""
        (x0, dx, nx), (y0, dy, ny), (z0, dz, nz) = (_uniform_axis(n, a) for n, a in (("x", x), ("y", y), ("z", z)))
        m = np.zeros((4, 4))
        m[0, 0], m[2, 1], m[1, 2] = dx, dz, dy
        m[:3, 3] = (x0, y0, z0)
        m[3, 3] = 1.0
        return cls(m, (ny, nz, nx))

    @classmethod
    def bscan(cls, lateral, z, plane="xz", offset=0.0):
        """B-scan (nz, n_lateral) in the plane 'xz' (lateral = x, at y = offset) or 'yz'
        (lateral = y, at x = offset)."""
        plane = _validate.choice("plane", plane, ("xz", "yz"))
        offset = _validate.real_scalar("offset", offset)
        (l0, dl, nl), (z0, dz, nz) = _uniform_axis("lateral", lateral), _uniform_axis("z", z)
        m = np.eye(4)
        m[:3, :3] = 0.0
        lateral_axis, other = (0, 1) if plane == "xz" else (1, 0)
        m[lateral_axis, 0] = dl
        m[2, 1] = dz
        m[other, 2] = 1.0  # k would step out of the plane; n_k = 1
        m[lateral_axis, 3], m[2, 3], m[other, 3] = l0, z0, offset
        return cls(m, (1, nz, nl))

    @classmethod
    def plane(cls, origin, u_step, v_step, n_u, n_v):
        """B-scan in any plane: voxel (i, j) at origin + i u_step + j v_step (world, m)."""
        m = np.eye(4)
        for column, name, value in ((0, "u_step", u_step), (1, "v_step", v_step), (3, "origin", origin)):
            vector = _validate.finite_array(name, value)
            if vector.shape != (3,):
                raise ValueError(f"{name} must be a 3-vector (x, y, z) in m (got shape {vector.shape})")
            m[:3, column] = vector
        m[:3, 2] = np.cross(m[:3, 0], m[:3, 1])
        return cls(m, (1, _validate.integer("n_v", n_v, minimum=1), _validate.integer("n_u", n_u, minimum=1)))

    @classmethod
    def cross_planes(cls, x, y, z, x0=0.0, y0=0.0):
        """The cross-plane pair: (xz B-scan at y = y0, yz B-scan at x = x0)."""
        return cls.bscan(x, z, "xz", y0), cls.bscan(y, z, "yz", x0)


def _orientation(name, value):
    return _validate.choice(name, value, ("rows", "columns"))


def _acquisition_count(array, method, rx, angles, sparse):
    other = "rows" if rx == "columns" else "columns"
    if method == "forces":
        return array.n_strips(rx)
    if method == "hercules":
        return array.n_strips(other)
    if method in ("uforces", "uhercules"):
        return len(sparse)
    return len(angles)


def _rca_sample_points(grid, per_axis=12):
    """World points of a few voxels spread over the grid (up to per_axis per axis)."""
    idx = [np.unique(np.linspace(0, n - 1, min(n, per_axis)).round()) for n in grid.shape]
    k, j, i = np.meshgrid(*idx, indexing="ij")
    ijk = np.stack([i.ravel(), j.ravel(), k.ravel(), np.ones(i.size)], axis=1)
    return (ijk @ grid.voxel_transform.T)[:, :3]


def _check_rca_plausible(array, grid, n_samples, n_channels, data, fs, c, t0, min_coverage):
    """The plausibility checks of Beamformer for row-column arrays: grid and array within 1 m
    (mm given for m), RF with fewer samples than channels (MATLAB layout), and a grid most of
    whose voxels lie deeper than the record reaches."""
    points = _rca_sample_points(grid)
    _validate.distances("grid", points, "grid coordinates")
    _validate.distances("array", [array.column_x.max(), array.row_y.max()], "strip positions (pitch)")
    if data == "rf":
        _validate.samples_vs_elements("data", n_samples, n_channels)
    if not 0 <= min_coverage <= 1:
        raise ValueError(f"min_coverage must be in [0, 1] (got {min_coverage})")
    if min_coverage > 0:
        local = array.to_array(points)
        depth = np.abs(local[:, 2])
        # bounds of the round trip, whatever the method: at least down and back, 2 z / c; at
        # most twice the distance to the farthest array corner plus a transmit delay spread of
        # at most the aperture's diagonal
        half = np.array([array.column_x.max() if array.n_columns > 1 else 0.0,
                         array.row_y.max() if array.n_rows > 1 else 0.0])
        far = np.hypot(np.abs(local[:, 0]) + half[0] + array.pitch_x, np.abs(local[:, 1]) + half[1] + array.pitch_y)
        farthest = np.hypot(far, depth)
        t_end = t0 + (n_samples - 1) / fs
        latest = (2 * farthest + 2 * np.hypot(*half)) / c
        covered = int(np.count_nonzero((2 * depth / c <= t_end) & (latest >= t0)))
        if covered < min_coverage * len(points):
            raise ValueError(_validate.coverage_error("grid", covered, len(points), (t0, t_end), min_coverage))


class RCABeamformer:
    """Delay-and-sum plan for one RCA acquisition scheme and one output grid.

    Parameters
    ----------
    array : RowColumnArray
    method : one of RCA_METHODS
    grid : RCAGrid
    n_samples, fs : samples per record and sampling frequency (Hz)
    c : speed of sound (m/s);  t0 : time of sample 0 (s)
    fc : centre frequency (Hz), needed for IQ data (phase rotation)
    data : 'rf' (float32) or 'iq' (complex64)
    n_frames : frames per call
    tx, rx : 'rows' or 'columns' (FORCES/uFORCES transmit on the receive orientation)
    angles, focal_depths : per acquisition for vls/tpw/flash, one value for hercules
        (radians; m, inf = plane wave).  Defaults: 0 and inf (plane wave).
    sparse_elements : strip indices of uforces / uhercules acquisitions
    interpolation : 'nearest', 'linear' or 'cubic' (cubic Hermite / Catmull-Rom)
    f_number, window, tukey_alpha : receive apodization (f_number 0 = none; a number: there
        is no 'auto' for row-column arrays, whose strips have no element directivity model)
        String options are case-insensitive.  Defaults differ from ``Beamformer``'s ('linear',
        'rect') for two reasons of this family: its default input is RF (``data='rf'``),
        where linear interpolation of the carrier between samples loses amplitude (at 4
        samples per period up to 29 % halfway between samples, where cubic (Catmull-Rom)
        loses 12 %), while ``Beamformer``'s default input is baseband IQ; and a long strip's receive aperture ends abruptly,
        whose edge waves a Hann taper suppresses (Rasmussen et al., IEEE TUFFC 2015).
    min_coverage : least fraction of voxels (a sample of them) that a record can reach: the
        round trip, between ``2 z / c`` (z the depth below the array) and twice the distance to
        the farthest array corner plus the aperture's diagonal over c, must overlap the record
        ``[t0, t0 + (n_samples - 1) / fs]`` (default 0.5; 0 to skip): below it ValueError naming the likely causes (MATLAB layout,
        mm, t0), as ``Beamformer``'s check.
    coherence_factor : weight by |sum|^2 / (N sum |v|^2)
    sum_frames : one output, the coherent sum over frames
    backend : 'cpu' or 'cuda' (cuda/rca.cu): 'cuda' takes and returns device arrays; NumPy
        input is copied in and the image copied back unless ``strict=True``
    """

    def __init__(self, array, method, grid, *, n_samples, fs, c=1540.0, t0=0.0, fc=None, data="rf",
                 n_frames=1, tx="columns", rx="columns", angles=None, focal_depths=None,
                 sparse_elements=None, interpolation="cubic", f_number=1.0, window="hann", tukey_alpha=0.5,
                 coherence_factor=False, sum_frames=False, backend="cpu", strict=False, min_coverage=0.5):
        if not isinstance(array, RowColumnArray):
            raise TypeError(f"array must be a RowColumnArray (got {type(array).__name__})")
        if not isinstance(grid, RCAGrid):
            raise TypeError(f"grid must be an RCAGrid (got {type(grid).__name__})")
        self.array, self.grid = array, grid
        self.method = _validate.choice("method", method, RCA_METHODS)
        self.data = _validate.choice("data", data, ("rf", "iq"))
        self.tx, self.rx = _orientation("tx", tx), _orientation("rx", rx)
        if self.method in ("forces", "uforces"):
            self.tx = self.rx
        self.n_samples = _validate.integer("n_samples", n_samples, minimum=1)
        self.n_frames = _validate.integer("n_frames", n_frames, minimum=1)
        fs = _validate.frequency("fs", fs)
        c = _validate.speed_of_sound("c", c)
        t0 = _validate.real_scalar("t0", t0)
        if fc is None:
            fc = array.fc
        if self.data == "iq" and fc is None:
            raise ValueError("fc is needed for IQ data (the phase rotation exp(j 2 pi fc tau))")
        fc = 0.0 if fc is None else _validate.frequency("fc", fc)
        self.fs, self.fc, self.c, self.t0 = fs, fc, c, t0
        self.interpolation = _validate.choice("interpolation", interpolation, tuple(_INTERP))
        if f_number is None or isinstance(f_number, str):
            raise TypeError(f"f_number must be a number >= 0 (0: no receive apodization); RCABeamformer has "
                            f"no 'auto' f-number (got {f_number!r})")
        f_number = _validate.nonnegative("f_number", f_number)
        self.f_number = f_number
        self.window = window = _validate.choice("window", window, tuple(_WINDOW))
        tukey_alpha = _validate.real_scalar("tukey_alpha", tukey_alpha)
        if not 0 <= tukey_alpha <= 1:
            raise ValueError(f"tukey_alpha must be in [0, 1] (got {tukey_alpha})")
        self.backend = check_backend(backend)

        sparse = None
        if self.method in ("uforces", "uhercules"):
            if sparse_elements is None:
                raise ValueError(f"sparse_elements must be given for {self.method}")
            raw = np.asarray(sparse_elements)
            if raw.ndim != 1 or raw.size == 0 or raw.dtype.kind not in "iu":
                raise TypeError("sparse_elements must be a non-empty 1-D array of integers")
            limit = array.n_strips(self.rx if self.method == "uforces" else
                                   ("rows" if self.rx == "columns" else "columns"))
            bad = (raw < 0) | (raw >= limit)
            if bad.any():
                raise ValueError(f"sparse_elements: index {int(raw[bad][0])} is out of range 0..{limit - 1}")
            sparse = np.ascontiguousarray(raw, dtype=np.int32)
        elif sparse_elements is not None:
            raise ValueError(f"sparse_elements is only for uforces and uhercules (method is {self.method})")

        waves = None
        if self.method in ("hercules", "uhercules", "vls", "tpw", "flash"):
            angles = np.atleast_1d(_validate.finite_array("angles", 0.0 if angles is None else angles)).ravel()
            if focal_depths is None:
                focal_depths = np.full(angles.shape, np.inf)
            depths = np.atleast_1d(np.asarray(focal_depths, dtype=np.float64)).ravel()
            if np.isnan(depths).any():
                raise ValueError("focal_depths must not be NaN")
            if depths.shape != angles.shape:
                raise ValueError(f"focal_depths ({depths.size}) and angles ({angles.size}) must have the same length")
            if self.method in ("hercules", "uhercules") and angles.size != 1:
                raise ValueError(f"{self.method} has one transmit: give one angle and focal depth (got {angles.size})")
            if self.method == "tpw" and np.isfinite(depths).any():
                raise ValueError("focal_depths must be infinite for tpw (plane waves)")
            if self.method == "vls" and not np.isfinite(depths).all():
                raise ValueError("focal_depths must be finite for vls (virtual line sources)")
            if self.method == "flash" and (np.isfinite(depths).any() or np.any(angles != 0)):
                raise ValueError("flash transmits are unsteered plane waves (angle 0, focal depth inf)")
            waves = (np.ascontiguousarray(angles), np.ascontiguousarray(depths))
        elif angles is not None or focal_depths is not None:
            raise ValueError(f"angles and focal_depths do not apply to {self.method}")

        _check_rca_plausible(array, grid, self.n_samples, array.n_strips(self.rx), self.data, fs, c, t0,
                             _validate.real_scalar("min_coverage", min_coverage))
        self.n_acquisitions = _acquisition_count(array, self.method, self.rx, None if waves is None else waves[0],
                                                 sparse)
        self.n_channels = array.n_strips(self.rx)
        self.sum_frames = bool(sum_frames)
        self.dtype = np.dtype(np.float32 if self.data == "rf" else np.complex64)
        self.data_shape = (self.n_frames, self.n_acquisitions, self.n_channels, self.n_samples)
        self.out_frames = 1 if self.sum_frames else self.n_frames
        _validate.check_allocation("data", self.data_shape, self.dtype.itemsize)
        _validate.check_allocation("image", (self.out_frames,) + grid.shape, self.dtype.itemsize)
        empty = np.zeros(1)
        self._plan = _core.rca_plan(
            _METHOD_CODE[self.method], array.n_columns, array.n_rows, array.pitch_x, array.pitch_y,
            np.ascontiguousarray(array.transform), np.ascontiguousarray(grid.voxel_transform), grid.shape,
            int(self.tx == "rows"), int(self.rx == "rows"), self.n_frames, self.n_acquisitions, self.n_channels,
            self.n_samples, self.data == "iq", fs, fc, c, t0, _INTERP[self.interpolation],
            empty if waves is None else waves[0], empty if waves is None else waves[1],
            sparse, f_number, _WINDOW[window], tukey_alpha, bool(coherence_factor), self.sum_frames, self.backend)
        self.cuda = None
        if self.backend == "cuda":
            self._runner = PlanRunner(_core.rca_cuda_exec(self._plan), strict)
            self.cuda = self._runner.execution  # stream, stage_times(), set_stream()

    def __repr__(self):
        return (f"RCABeamformer({self.method!r}, {self.array.n_columns}x{self.array.n_rows} strips, "
                f"grid {self.grid.image_shape}, data={self.data!r}, n_acquisitions={self.n_acquisitions}, "
                f"n_samples={self.n_samples}, fs={self.fs / 1e6:.4g} MHz, c={self.c:g} m/s, "
                f"t0={self.t0 * 1e6:.4g} us, {self.interpolation}, {self.window}, f_number={self.f_number:g}, "
                f"n_frames={self.n_frames}, backend={self.backend!r})")

    def __call__(self, data, out=None):
        """Beamform ``data`` (n_frames, n_acquisitions, n_channels, n_samples), or without the
        frame axis when n_frames == 1.  Returns (n_frames,) + image_shape, or image_shape when
        the input had no frame axis or sum_frames.  NaN or infinite samples: ValueError (on CUDA,
        for the samples the kernel reads, once the host meets the result: see
        usbeam.device.CudaExecution.check_input)."""
        if self.cuda is not None:
            framed = getattr(data, "ndim", 4) == 4
            shape = self.data_shape if framed or self.n_frames != 1 else self.data_shape[1:]
            out_shape = self.grid.image_shape
            if framed and not self.sum_frames:
                out_shape = (self.n_frames,) + out_shape
            return self._runner(lambda d, o: _core.rca_execute(self._plan, d, o), "data", data, shape, self.dtype,
                                self._host_data, out, out_shape, self.dtype, no_overlap=True)
        given, data = data, self._host_data(data)
        framed = data.ndim == 4
        shape = self.grid.image_shape
        if framed and not self.sum_frames:
            shape = (self.n_frames,) + shape
        if out is None:
            out = np.empty(shape, self.dtype)
        else:
            _validate.out_array("out", out, shape, self.dtype)
            _validate.no_overlap("out", out, "data", given, data)
        _core.rca_execute(self._plan, data, out)
        return out

    def _host_data(self, data):
        data = _validate.ndarray("data", data)
        if data.dtype != self.dtype:
            if (self.data == "rf" and np.iscomplexobj(data)) or (self.data == "iq" and not np.iscomplexobj(data)):
                raise TypeError(f"data must be {'real RF' if self.data == 'rf' else 'complex IQ'} "
                                f"(got dtype {data.dtype})")
            if data.dtype.kind not in "fc":
                raise TypeError(f"data must be float32 RF or complex64 IQ (got dtype {data.dtype})")
        if data.shape != self.data_shape and not (self.n_frames == 1 and data.shape == self.data_shape[1:]):
            raise ValueError(f"data must have shape {self.data_shape} (n_frames, n_acquisitions, n_channels, "
                             f"n_samples) (got {data.shape})")
        return np.ascontiguousarray(data, dtype=self.dtype)


def rca_beamform(data, array, method, grid, **kwargs):
    """One-shot ``RCABeamformer(array, method, grid, n_samples=..., n_frames=...)(data)``;
    n_samples, n_frames and the data kind come from ``data``."""
    data = _validate.ndarray("data", data)
    if data.ndim not in (3, 4):
        raise ValueError(f"data must be (n_frames,) n_acquisitions x n_channels x n_samples (got shape {data.shape})")
    kwargs.setdefault("data", "iq" if np.iscomplexobj(data) else "rf")
    n_frames = data.shape[0] if data.ndim == 4 else 1
    return RCABeamformer(array, method, grid, n_samples=data.shape[-1], n_frames=n_frames, **kwargs)(data)


def rca_cross_planes(data, array, method, x, y, z, *, x0=0.0, y0=0.0, **kwargs):
    """The cross-plane pair of B-scans of one acquisition: (xz image at y = y0, yz image at
    x = x0), each (nz, n_lateral) (with a leading frame axis for framed data)."""
    xz, yz = RCAGrid.cross_planes(x, y, z, x0=x0, y0=y0)
    return rca_beamform(data, array, method, xz, **kwargs), rca_beamform(data, array, method, yz, **kwargs)


def _axis(name, axis, ndim):
    """An axis index in [-ndim, ndim - 1], as its non-negative value (out of range: ValueError,
    not a silent wrap-around)."""
    return _validate.integer(name, axis, minimum=-ndim, maximum=ndim - 1) % ndim


def tobe_unflip(data, matrix, axis=-3, channel_axis=-2):
    """Undo the receive bias polarity of a TOBE FORCES acquisition.

    In FORCES on a TOBE array the transmit is coded by the bias pattern H[t, :] on the
    strips that also receive, and a strip's signal is multiplied by its bias polarity, so
    channel c of transmit t carries an extra factor H[t, c].  Multiplying by it again
    (H[t, c]^2 = 1) leaves the plain Hadamard encoding, ready for ``hadamard_decode``.
    Integer data is widened to int32 so that -32768 * -1 stays exact.
    """
    data = _validate.ndarray("data", data)
    if data.ndim < 2:
        raise ValueError(f"data must have a transmit and a channel axis (got shape {data.shape})")
    axis = _axis("axis", axis, data.ndim)
    channel_axis = _axis("channel_axis", channel_axis, data.ndim)
    if axis == channel_axis:
        raise ValueError(f"axis and channel_axis must be different axes (both are {axis})")
    h = _validate.ndarray("matrix", matrix)
    if h.ndim != 2:
        raise ValueError(f"matrix must be 2-D (transmits, channels) (got shape {h.shape})")
    n, n_ch = data.shape[axis], data.shape[channel_axis]
    if h.shape[0] != n or h.shape[1] < n_ch:
        raise ValueError(f"matrix {h.shape} does not fit {n} transmits x {n_ch} channels")
    h = h[:, :n_ch]
    # the signs are cast to int8: anything but +-1 (0.5, NaN) would silently become 0
    if not (h.dtype.kind in "iuf" and np.all((h == 1) | (h == -1))):
        raise ValueError("matrix entries must be +1 or -1 (bias polarities)")
    signs = h.astype(np.int8)
    shape = [1] * data.ndim
    shape[axis], shape[channel_axis] = n, n_ch
    if axis > channel_axis:
        signs = signs.T
    dtype = np.int32 if data.dtype.kind in "iu" else data.dtype
    return np.multiply(data, signs.reshape(shape), dtype=dtype)


def rca_decode(raw, array, method, order_or_matrix=None, *, algorithm="direct", axis=-3):
    """Decode Hadamard-encoded FORCES or HERCULES data along the transmit axis.

    For a TOBE array running FORCES, the receive polarity flips are undone first
    (``tobe_unflip``).  ``order_or_matrix`` defaults to the order given by the data.
    Returns float32 (RF) or complex64 (IQ) data ready for ``RCABeamformer``.
    """
    if not isinstance(array, RowColumnArray):
        raise TypeError(f"array must be a RowColumnArray (got {type(array).__name__})")
    method = _validate.choice("method", method, ("forces", "hercules"))
    raw = _validate.ndarray("raw", raw)
    if raw.ndim < 3:
        raise ValueError(f"raw must be (..., n_transmits, n_channels, n_samples) (got shape {raw.shape})")
    axis = _axis("axis", axis, raw.ndim)
    if method == "forces" and array.tobe and axis == raw.ndim - 1:
        raise ValueError(f"axis: a TOBE FORCES acquisition needs the channel axis right after the transmit axis "
                         f"(got axis {axis} of {raw.ndim}-D raw)")
    n = raw.shape[axis]
    matrix = hadamard(n) if order_or_matrix is None else order_or_matrix
    if isinstance(matrix, (int, np.integer)):
        matrix = hadamard(int(matrix))
    matrix = np.asarray(matrix)
    if matrix.shape != (n, n):
        raise ValueError(f"raw has {n} transmits, which does not match the Hadamard order {matrix.shape[0]}")
    if method == "forces" and array.tobe:
        raw = tobe_unflip(raw, matrix, axis=axis, channel_axis=axis + 1)
    if raw.dtype not in (np.int16, np.int32, np.float32, np.complex64):
        raw = raw.astype(np.complex64 if np.iscomplexobj(raw) else np.float32)
    return hadamard_decode(raw, matrix, axis=axis, algorithm=algorithm)
