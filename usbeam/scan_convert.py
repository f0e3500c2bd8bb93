"""Scan conversion: sector images on a ``PolarGrid`` to a Cartesian ``Grid`` (C kernel
csrc/bmode/scan_convert.c, CUDA twin cuda/scan_convert.cu).

``scan_convert(image, polar_grid, cartesian_grid, fill=0)``: ``image`` ``(..., n_r, n_theta)``
(uint8 B-mode, float32 dB or Doppler maps; float64 and integers are converted to float32)
gives ``(..., nz, nx)`` of the same dtype.  Each Cartesian point (x, z) maps to
r = |(x, z) - apex|, theta = atan2(x - apex_x, z - apex_z), the fractional indices
u = (r - r_0) / dr, v = (theta - theta_0) / dtheta, and is the bilinear mix of its four polar
neighbours (``scipy.ndimage.map_coordinates(image, (u, v), order=1)``); points outside the
sector (u outside [0, n_r - 1] or v outside [0, n_theta - 1]) get ``fill``.  uint8 results
round half up.  The polar grid must be uniform (equally spaced radii and angles).
``ScanConvertPlan`` builds the table once (plan creation, in double) for many calls;
``plan.mask`` is True inside the sector; ``usbeam.grids.image_extent(cartesian_grid)`` gives
the plot extent.  NaN or inf in float images: ValueError (CPU; the CUDA twin flags it).
A Cartesian grid with fewer than ``min_coverage`` (default 1 %) of its points inside the
sector is refused (ValueError naming cartesian_grid): such an image is all ``fill``, most
often a grid in mm beside a polar grid in m.  A sector's bounding box is about 50-70 % inside.
"""
import numpy as np

from . import _core, _validate
from ._backend import check_backend
from .device import PlanRunner
from .geometry import Grid
from .grids import PolarGrid

__all__ = ["ScanConvertPlan", "scan_convert"]

_DTYPES = {"uint8": np.uint8, "float32": np.float32}
_COVERAGE_SAMPLES = 4096  # Cartesian points tested for min_coverage (a stride through the grid)


def _sector_coverage(points_xz, polar_grid):
    """(fraction inside the sector, points tested) of a stride of ``points_xz`` (n, 2), by the
    mapping of the module doc."""
    step = max(1, points_xz.shape[0] // _COVERAGE_SAMPLES)
    dx = points_xz[::step, 0] - polar_grid.apex[0]
    dz = points_xz[::step, 1] - polar_grid.apex[1]
    r, theta = np.hypot(dx, dz), np.arctan2(dx, dz)
    radii, angles = polar_grid.radii, polar_grid.angles
    inside = (r >= radii[0]) & (r <= radii[-1]) & (theta >= angles[0]) & (theta <= angles[-1])
    return float(np.mean(inside)), int(inside.size)


def _image_dtype(dtype):
    dt = np.dtype(dtype)
    if dt == np.uint8:
        return np.dtype(np.uint8)
    if dt.kind in "fiu":
        return np.dtype(np.float32)
    raise TypeError(f"image must be uint8 or real (B-mode, dB, Doppler maps), got dtype {dt}")


class ScanConvertPlan:
    """Scan conversion of images ``shape`` = ``(..., n_r, n_theta)`` of ``dtype`` (uint8 or
    float32) from ``polar_grid`` to ``cartesian_grid``; ``fill`` outside the sector; backend
    'cpu' or 'cuda' (device arrays in and out, as every plan; ``strict`` refuses host data)."""

    def __init__(self, polar_grid, cartesian_grid, shape=None, dtype=np.float32, *, fill=0.0, backend="cpu",
                 strict=False, min_coverage=0.01):
        if not isinstance(polar_grid, PolarGrid):
            raise TypeError(f"polar_grid must be a usbeam.PolarGrid (got {type(polar_grid).__name__})")
        if not isinstance(cartesian_grid, Grid) or cartesian_grid.x is None or cartesian_grid.y is not None:
            raise TypeError("cartesian_grid must be a 2-D usbeam.Grid(x=..., z=...)")
        if polar_grid.radii.size < 2 or polar_grid.angles.size < 2:
            raise ValueError(f"polar_grid needs at least 2 radii and 2 angles (got shape {polar_grid.shape})")
        if not polar_grid.is_uniform():
            raise ValueError("polar_grid must have equally spaced radii and angles for scan conversion")
        self.polar_grid, self.cartesian_grid = polar_grid, cartesian_grid
        self.dtype = _image_dtype(dtype)
        self.fill = _validate.real_scalar("fill", fill)
        if self.dtype == np.uint8 and not (0 <= self.fill <= 255 and self.fill == int(self.fill)):
            raise ValueError(f"fill must be an integer in [0, 255] for uint8 images (got {fill})")
        shape = polar_grid.shape if shape is None else _validate.shape("shape", shape, minimum=1)
        if tuple(shape[-2:]) != polar_grid.shape:
            raise ValueError(f"shape must end with the polar grid's {polar_grid.shape} (got {tuple(shape)})")
        self.shape = tuple(shape)
        self.out_shape = self.shape[:-2] + cartesian_grid.shape
        self.backend = check_backend(backend)
        n_images = int(np.prod(self.shape[:-2], dtype=np.int64)) if len(self.shape) > 2 else 1
        _validate.check_allocation("scan converted image", self.out_shape, self.dtype.itemsize)
        pts = cartesian_grid.coordinates()[:, [0, 2]]
        min_coverage = _validate.real_scalar("min_coverage", min_coverage)
        if not 0 <= min_coverage <= 1:
            raise ValueError(f"min_coverage must be in [0, 1] (got {min_coverage})")
        fraction, n_tested = _sector_coverage(pts, polar_grid)
        if fraction < min_coverage:
            x, z = pts[:, 0], pts[:, 1]
            raise ValueError(
                f"cartesian_grid: only {100 * fraction:.1f} % of its points (of {n_tested} tested) lie inside the "
                f"polar grid's sector (radii {polar_grid.radii[0]:.4g} to {polar_grid.radii[-1]:.4g} m, angles "
                f"{polar_grid.angles[0]:.3g} to {polar_grid.angles[-1]:.3g} rad); the grid spans x {x.min():.4g} to "
                f"{x.max():.4g}, z {z.min():.4g} to {z.max():.4g}: the image would be all fill.  Likely causes: a "
                f"grid in mm instead of m, or one beside the sector.  (min_coverage={min_coverage:g}; pass "
                f"min_coverage=0 to build it anyway)")
        r, a = polar_grid.radii, polar_grid.angles
        self._plan = _core.scan_convert_plan(n_images, r.size, a.size, float(r[0]), float((r[-1] - r[0]) / (r.size - 1)),
                                             float(a[0]), float((a[-1] - a[0]) / (a.size - 1)), polar_grid.apex[0],
                                             polar_grid.apex[1], np.ascontiguousarray(pts), dtype=self.dtype.name,
                                             fill=self.fill, backend=self.backend)
        self.cuda = None
        if self.backend == "cuda":
            self._runner = PlanRunner(_core.scan_convert_cuda_exec(self._plan), strict)
            self.cuda = self._runner.execution
        self._mask = None

    @property
    def mask(self):
        """bool ``cartesian_grid.shape``: True inside the sector (where the image is sampled)."""
        if self._mask is None:
            probe = ScanConvertPlan(self.polar_grid, self.cartesian_grid, dtype=np.float32, fill=0.0, min_coverage=0)
            self._mask = probe(np.ones(self.polar_grid.shape, np.float32)) > 0.5
        return self._mask

    @property
    def extent(self):
        from .grids import image_extent

        return image_extent(self.cartesian_grid)

    def _host_image(self, image):
        image = _validate.ndarray("image", image)
        _image_dtype(image.dtype)
        if self.dtype == np.uint8 and image.dtype != np.uint8:
            raise TypeError(f"image must be uint8 for this plan (got {image.dtype})")
        if tuple(image.shape) != self.shape:
            raise ValueError(f"image must have shape {self.shape} (..., n_r, n_theta) (got {image.shape})")
        if image.dtype != self.dtype or not image.flags.c_contiguous or not image.flags.aligned:
            image = np.ascontiguousarray(image, dtype=self.dtype)
        return image

    def __call__(self, image, out=None):
        if self.cuda is not None:
            return self._runner(lambda i, o: _core.scan_convert_execute(self._plan, i, o), "image", image, self.shape,
                                self.dtype, self._host_image, out, self.out_shape, self.dtype)
        given, image = image, self._host_image(image)
        if out is None:
            out = np.empty(self.out_shape, self.dtype)
        else:
            _validate.out_array("out", out, self.out_shape, self.dtype)
            _validate.no_overlap("out", out, "image", given, image)
        _core.scan_convert_execute(self._plan, image, out)
        return out


def scan_convert(image, polar_grid, cartesian_grid, *, fill=0.0, out=None, min_coverage=0.01):
    """One-shot scan conversion of ``image`` ``(..., n_r, n_theta)`` (see the module doc)."""
    image = _validate.ndarray("image", image)
    if image.ndim < 2:
        raise ValueError(f"image must have shape (..., n_r, n_theta) (got {image.shape})")
    if image.size == 0:
        raise ValueError("image is empty")
    return ScanConvertPlan(polar_grid, cartesian_grid, image.shape, _image_dtype(image.dtype), fill=fill,
                           min_coverage=min_coverage)(image, out=out)
