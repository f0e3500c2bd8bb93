"""Sector and volume grids: ``PolarGrid`` (convex and phased sectors), ``VolumeGrid`` (3-D
Cartesian) and ``SphericalGrid`` (3-D sectors of matrix arrays).  Every grid gives the
beamformer ``coordinates()`` (n_points, 3) as (x, y, z) in m, in output (C) order, and its
``shape``; images come out as ``(..., *grid.shape)``:

* ``PolarGrid(radii, angles, apex=(0, 0))``: ``(n_r, n_theta)``; point (i, j) at
  apex + radii[i] (sin angles[j], 0, cos angles[j]) - angles from +z toward +x.  For a
  convex array the apex is its centre of curvature, ``(0, -h)``, behind the array (MUST's
  impolgrid); for a phased array the array centre.  The apex may not lie in the medium
  (z > 0).
* ``VolumeGrid(x, y, z)``: ``(nz, ny, nx)``, x fastest.
* ``SphericalGrid(radii, azimuths, elevations, apex=(0, 0, 0))``: ``(n_r, n_elevation,
  n_azimuth)``; direction (sin a cos e, sin e, cos a cos e) (as ``PlaneWave(angle, angle_y)``).

``grid.check_probe(probe, f_number)`` of the sector grids (the Beamformer calls it) refuses
points no element can receive from (outside every element's acceptance cone: behind its
face, or beyond axial / 2F sideways with an f-number F > 0), naming ``angles`` when whole
rays are unreachable, else ``radii``.  ``image_extent(grid)`` gives matplotlib's
``imshow(..., extent=)`` of a Cartesian ``Grid`` (pixel edges, depth down).
"""
from dataclasses import dataclass
import math

import numpy as np

from . import _validate
from .geometry import Grid, _coordinate_vector

__all__ = ["PolarGrid", "VolumeGrid", "SphericalGrid", "image_extent"]


def _angles(name, values):
    v = _coordinate_vector(name, values)  # finite, 1-D, strictly increasing
    if not np.all(np.abs(v) < math.pi / 2):
        raise ValueError(f"{name} must lie within (-pi/2, pi/2) rad (got {v.min():.4g} to {v.max():.4g}): "
                         f"beyond that the rays leave the medium")
    return v


def _radii(values):
    v = _coordinate_vector("radii", values)
    if not np.all(v >= 0):
        raise ValueError(f"radii must be >= 0 (got {v.min():.4g})")
    return v


def _apex(value, size):
    try:
        a = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"apex must be {size} numbers (got {value!r})") from None
    if a.shape != (size,) or not np.all(np.isfinite(a)):
        raise ValueError(f"apex must be {size} finite numbers in m (got {value!r})")
    if a[-1] > 0:
        raise ValueError(f"apex must not lie inside the medium: its z must be <= 0 (got {a[-1]})")
    return tuple(float(v) for v in a)


def _dot3(points, vectors):
    """(P, V) dot products of points (P, 3) with vectors (V, 3), summed in NumPy rather than by a
    matrix product: BLAS would run these small products on its own threads, which then spin
    beside the C plan that is built right after (measured: a convex plan took 40 ms instead of
    16 ms with OMP_NUM_THREADS=2, OpenBLAS's idle threads holding the second core)."""
    out = points[:, 0:1] * vectors[:, 0]
    out += points[:, 1:2] * vectors[:, 1]
    out += points[:, 2:3] * vectors[:, 2]
    return out


def _seen(points, probe, f_number=0.0):
    """For each point: inside some element's acceptance cone, the beamformer's aperture
    (usbeam_math.h): (p - e) . n_e >= 0 and, with an f-number F > 0, |lateral| <= axial / 2F
    (both lateral directions on a matrix array); F = 0 accepts the whole half-space."""
    pos, nrm = np.asarray(probe.positions), np.asarray(probe.normals)
    surface = bool(getattr(probe, "two_dimensional", False))
    if surface:
        t1 = np.array([1.0, 0.0, 0.0])[None, :] - nrm[:, :1] * nrm
        t1 /= np.linalg.norm(t1, axis=1, keepdims=True)
        t2 = np.cross(nrm, t1)
    else:
        t1 = np.stack([nrm[:, 2], np.zeros(len(nrm)), -nrm[:, 0]], axis=1)
        t1 /= np.linalg.norm(t1, axis=1, keepdims=True)
    seen = np.zeros(points.shape[0], dtype=bool)
    block = max(1, (1 << 22) // max(1, points.shape[0]))  # (points x block) arrays of ~32 MiB
    for i0 in range(0, pos.shape[0], block):
        sl = slice(i0, i0 + block)
        # (p - e) . v = p . v - e . v for each element's unit vectors, no (P, E, 3)
        axial = _dot3(points, nrm[sl]) - np.sum(pos[sl] * nrm[sl], axis=1)
        ok = axial >= -1e-12  # on the face counts (a phased sector's apex)
        if f_number > 0:
            half = axial / (2 * f_number) + 1e-12
            ok &= np.abs(_dot3(points, t1[sl]) - np.sum(pos[sl] * t1[sl], axis=1)) <= half
            if surface:
                ok &= np.abs(_dot3(points, t2[sl]) - np.sum(pos[sl] * t2[sl], axis=1)) <= half
        seen |= ok.any(axis=1)
    return seen


def _check_visible(points, probe, apex, directions, what, f_number=0.0, seen=None):
    """ValueError naming what to change when the grid asks for what the probe cannot give.
    With an f-number F > 0: a ray (points are n_radii x n_rays, radius slowest) none of whose
    points lies in any element's receive cone (near the face some points always fall between
    the cones: normal).  Then, at F = 0: a ray with a point behind every element's face.  Such
    a ray names ``what`` (the angles) when it stays unreachable far away, else ``radii`` (the
    first radius is too small for the apex).  ``seen``: optional, per point, whether the
    beamformer's own aperture at F holds it (a CPU plan's aperture counts > 0); its cones are
    those of _seen without the 1e-12 margins, so a ray it sees needs no test here, and only the
    rays it finds blind are tested (a convex plan's check took 2 ms of its 11 ms)."""
    n_rays = directions.shape[0]
    span = np.ptp(np.asarray(probe.positions), axis=0).max() + np.abs(np.asarray(apex)).max() + 1.0
    far = np.asarray(apex)[None, :] + 100.0 * span * directions  # each ray, far away
    rays = points.reshape(-1, n_rays, 3)  # (radius, ray, xyz)
    for f in ((f_number, 0.0) if f_number > 0 else (0.0,)):
        if f > 0:  # blind: no point of the ray in any cone; a few radii first, all only where needed
            if seen is not None:
                blind_rays = ~np.asarray(seen, dtype=bool).reshape(-1, n_rays).any(axis=0)
            else:
                sample = np.unique(np.linspace(0, rays.shape[0] - 1, min(rays.shape[0], 16)).round().astype(int))
                blind_rays = ~_seen(rays[sample].reshape(-1, 3), probe, f).reshape(sample.size, n_rays).any(axis=0)
            if blind_rays.any():
                todo = np.flatnonzero(blind_rays)
                blind_rays[todo] = ~_seen(rays[:, todo].reshape(-1, 3), probe, f).reshape(-1, todo.size).any(axis=0)
        else:  # behind every face: along a ray from the apex (behind or on the face) the first radius decides;
            # a first point in the plan's aperture at F > 0 is in front of that element's face
            blind_rays = (np.ones(n_rays, dtype=bool) if seen is None or not f_number > 0
                          else ~np.asarray(seen, dtype=bool).reshape(-1, n_rays)[0])
            todo = np.flatnonzero(blind_rays)
            if todo.size:
                blind_rays[todo] = ~_seen(rays[0, todo], probe, f)
        if not blind_rays.any():
            continue
        if not _seen(far[blind_rays], probe, f).all():
            cone = f"every element's receive cone at f-number {f:.3g}" if f > 0 else "every element's face"
            raise ValueError(f"{what}: {int(blind_rays.sum())} ray(s) lie outside {cone}, beyond what the probe "
                             f"can reach; narrow the {what}")
        raise ValueError("radii: some points lie behind the probe's face (the first radius is too small for "
                         "this apex)")


@dataclass(frozen=True, eq=False)
class PolarGrid:
    """A sector: ``radii`` (m, from the apex, increasing), ``angles`` (rad from +z toward +x,
    increasing, |angle| < pi/2), ``apex`` (x, z) in m with z <= 0.  Images ``(n_r, n_theta)``."""
    radii: np.ndarray
    angles: np.ndarray
    apex: tuple = (0.0, 0.0)

    def __post_init__(self):
        object.__setattr__(self, "radii", _radii(self.radii))
        object.__setattr__(self, "angles", _angles("angles", self.angles))
        object.__setattr__(self, "apex", _apex(self.apex, 2))

    @classmethod
    def for_probe(cls, probe, depth, n_r, n_theta, *, sector=None, start=None):
        """A sector in front of ``probe`` down to ``depth`` (m) below its face: for a convex
        array the apex is its centre of curvature and the angles span its elements' normals
        (MUST impolgrid); otherwise the apex is the array centre and the angles span
        ``sector`` (rad, default pi/2: +-45 degrees).  ``start``: first radius (default the
        face: R for a convex array, 0 otherwise, plus a tenth of a millimetre)."""
        depth = _validate.positive("depth", depth)
        n_r = _validate.integer("n_r", n_r, minimum=2)
        n_theta = _validate.integer("n_theta", n_theta, minimum=2)
        centre = getattr(probe, "center_of_curvature", None)
        if centre is not None:
            apex = (centre[0], centre[2])
            theta = np.asarray(probe.angles)
            angles = np.linspace(theta.min(), theta.max(), n_theta)
            r0 = probe.radius + 1e-4 if start is None else _validate.nonnegative("start", start)
        else:
            apex = (0.0, 0.0)
            sector = math.pi / 2 if sector is None else _validate.positive("sector", sector)
            if not sector < math.pi:
                raise ValueError(f"sector must be < pi rad (got {sector})")
            angles = np.linspace(-sector / 2, sector / 2, n_theta)
            r0 = 1e-4 if start is None else _validate.nonnegative("start", start)
        return cls(np.linspace(r0, r0 + depth, n_r), angles, apex)

    @property
    def shape(self):
        return (self.radii.size, self.angles.size)

    @property
    def n_points(self):
        return self.radii.size * self.angles.size

    def coordinates(self):
        """All points (n_points, 3) as (x, y, z) in m, radius slowest (a new array)."""
        return self._kept_coordinates().copy()

    def _kept_coordinates(self):
        """coordinates(), computed once and kept read-only: what a Beamformer reads (and the C
        plan copies) each time a plan is built on this grid."""
        kept = self.__dict__.get("_coordinates")
        if kept is None:
            pts = np.zeros((self.radii.size, self.angles.size, 3))
            pts[..., 0] = self.apex[0] + self.radii[:, None] * np.sin(self.angles)
            pts[..., 2] = self.apex[1] + self.radii[:, None] * np.cos(self.angles)
            kept = pts.reshape(-1, 3)
            kept.flags.writeable = False
            object.__setattr__(self, "_coordinates", kept)
        return kept

    def check_probe(self, probe, f_number=0.0, points=None, seen=None):
        """Refuse angles or radii the probe cannot see (``points``: this grid's coordinates(),
        when the caller has them already; ``seen``: the points a beamformer's aperture holds,
        as _check_visible)."""
        dirs = np.stack([np.sin(self.angles), np.zeros(self.angles.size), np.cos(self.angles)], axis=1)
        _check_visible(self.coordinates() if points is None else points, probe, (self.apex[0], 0.0, self.apex[1]),
                       dirs, "angles", f_number, seen)
        return self

    def is_uniform(self):
        """Radii and angles equally spaced (to 1e-9 of their step): what scan conversion needs."""
        return all(v.size < 3 or np.max(np.abs(np.diff(v, 2))) <= 1e-9 * abs(v[1] - v[0])
                   for v in (self.radii, self.angles))

    def bounds(self):
        """(x_min, x_max, z_min, z_max) of the sector (m): the arcs and the edge rays."""
        r = np.array([self.radii[0], self.radii[-1]])
        th = list(self.angles[[0, -1]]) + ([0.0] if self.angles[0] < 0 < self.angles[-1] else [])
        th = np.array(th)
        x = self.apex[0] + r[:, None] * np.sin(th)[None, :]
        z = self.apex[1] + r[:, None] * np.cos(th)[None, :]
        return float(x.min()), float(x.max()), float(z.min()), float(z.max())

    def cartesian_grid(self, nx=None, nz=None, spacing=None):
        """A Cartesian ``Grid`` over the sector's bounding box: ``spacing`` (m) or ``nx`` / ``nz``
        points (default: spacing = the radial step)."""
        x0, x1, z0, z1 = self.bounds()
        if spacing is None and nx is None and nz is None:
            spacing = float(self.radii[1] - self.radii[0]) if self.radii.size > 1 else (z1 - z0) / 100
        if spacing is not None:
            spacing = _validate.positive("spacing", spacing)
            nx = max(2, int(math.ceil((x1 - x0) / spacing)) + 1)
            nz = max(2, int(math.ceil((z1 - z0) / spacing)) + 1)
        nx = _validate.integer("nx", nx if nx is not None else nz, minimum=2)
        nz = _validate.integer("nz", nz if nz is not None else nx, minimum=2)
        return Grid(x=np.linspace(x0, x1, nx), z=np.linspace(z0, z1, nz))


@dataclass(frozen=True, eq=False)
class VolumeGrid:
    """A 3-D Cartesian grid: ``x``, ``y``, ``z`` strictly increasing vectors (m).  Volumes
    ``(nz, ny, nx)``, x fastest."""
    x: np.ndarray
    y: np.ndarray
    z: np.ndarray

    def __post_init__(self):
        for name in ("x", "y", "z"):
            object.__setattr__(self, name, _coordinate_vector(name, getattr(self, name)))

    @property
    def shape(self):
        return (self.z.size, self.y.size, self.x.size)

    @property
    def n_points(self):
        return self.x.size * self.y.size * self.z.size

    def coordinates(self):
        zz, yy, xx = np.meshgrid(self.z, self.y, self.x, indexing="ij")
        return np.stack([xx.ravel(), yy.ravel(), zz.ravel()], axis=1)


@dataclass(frozen=True, eq=False)
class SphericalGrid:
    """A 3-D sector: ``radii`` (m), ``azimuths`` (rad, toward +x in the x-z plane), ``elevations``
    (rad, toward +y), ``apex`` (x, y, z) with z <= 0.  Volumes ``(n_r, n_elevation, n_azimuth)``;
    point (i, k, j) at apex + radii[i] (sin a_j cos e_k, sin e_k, cos a_j cos e_k)."""
    radii: np.ndarray
    azimuths: np.ndarray
    elevations: np.ndarray
    apex: tuple = (0.0, 0.0, 0.0)

    def __post_init__(self):
        object.__setattr__(self, "radii", _radii(self.radii))
        object.__setattr__(self, "azimuths", _angles("azimuths", self.azimuths))
        object.__setattr__(self, "elevations", _angles("elevations", self.elevations))
        object.__setattr__(self, "apex", _apex(self.apex, 3))

    @property
    def shape(self):
        return (self.radii.size, self.elevations.size, self.azimuths.size)

    @property
    def n_points(self):
        return int(np.prod(self.shape))

    def coordinates(self):
        rr, ee, aa = np.meshgrid(self.radii, self.elevations, self.azimuths, indexing="ij")
        d = np.stack([np.sin(aa) * np.cos(ee), np.sin(ee), np.cos(aa) * np.cos(ee)], axis=-1)
        return (np.asarray(self.apex) + rr[..., None] * d).reshape(-1, 3)

    def check_probe(self, probe, f_number=0.0, points=None, seen=None):
        """As PolarGrid.check_probe."""
        ee, aa = np.meshgrid(self.elevations, self.azimuths, indexing="ij")
        dirs = np.stack([np.sin(aa) * np.cos(ee), np.sin(ee), np.cos(aa) * np.cos(ee)], axis=-1).reshape(-1, 3)
        _check_visible(self.coordinates() if points is None else points, probe, self.apex, dirs,
                       "azimuths and elevations", f_number, seen)
        return self


def _uniform_step(name, axis):
    """The spacing of a uniform axis (0 for one point).  imshow draws equal pixels between the
    extent's edges, so an axis whose spacing varies by more than 0.1 % (a pixel in a thousand)
    would be drawn at the wrong places: ValueError naming it."""
    if axis.size < 2:
        return 0.0
    steps = np.diff(axis)
    step = float(np.median(steps))
    if np.max(np.abs(steps - step)) > 1e-3 * step:
        raise ValueError(f"{name} is not uniformly spaced (steps {steps.min():.6g} to {steps.max():.6g} m): an "
                         f"image extent cannot place its pixels (resample the image onto a uniform Grid)")
    return float(axis[1] - axis[0])


def image_extent(grid):
    """matplotlib ``extent`` (left, right, bottom, top) of a 2-D Cartesian ``Grid`` image shown
    with depth down (``imshow(image, extent=image_extent(grid))``): pixel edges in m
    (``usbeam.plot.extent`` gives the same edges in mm, for its figures)."""
    if not isinstance(grid, Grid) or grid.x is None or grid.y is not None:
        raise TypeError("grid must be a 2-D usbeam.Grid(x=..., z=...)")
    dx, dz = _uniform_step("grid.x", grid.x), _uniform_step("grid.z", grid.z)
    return (float(grid.x[0] - dx / 2), float(grid.x[-1] + dx / 2), float(grid.z[-1] + dz / 2),
            float(grid.z[0] - dz / 2))
