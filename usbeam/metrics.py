"""Image-quality metrics as the field measures them (PICMUS, CUBDL), in NumPy.

Every metric works on the *envelope* (amplitude) of a beamformed image: the functions take
``|image|``, so pass complex IQ images (or an envelope you computed) -- a raw real RF image
must be envelope-detected first (``abs`` of RF is not its envelope).  Regions are boolean
masks of the image's shape, made on a 2-D :class:`usbeam.Grid` with :func:`circle`,
:func:`rectangle` and :func:`annulus` (x lateral, z depth, metres; images ``(nz, nx)``).

Formulas (``a`` the envelope, ``mu``/``sigma`` its mean and standard deviation over a region,
``i`` inside a target such as a cyst, ``o`` outside, the background):

- contrast, dB: ``20 log10(mu_i / mu_o)`` (negative for an anechoic cyst) -- PICMUS, Liebgott
  et al., "Plane-wave imaging challenge in medical ultrasound", IEEE IUS 2016.
- CNR: ``|mu_i - mu_o| / sqrt(sigma_i^2 + sigma_o^2)`` (linear; Rindal et al., "The dark region
  artifact in adaptive ultrasound beamforming", IEEE IUS 2017; the form Rodriguez-Molares et
  al. 2020 discuss).  ``definition="picmus"`` gives PICMUS's
  ``20 log10(|mu_i - mu_o| / sqrt((sigma_i^2 + sigma_o^2) / 2))`` in dB.
- gCNR: ``1 - OVL``, ``OVL = sum_k min(p_i(k), p_o(k))`` with ``p`` the histograms of the two
  regions' envelopes on the same ``bins`` (256 by default) equal-width bins spanning both,
  each normalised to sum 1 -- Rodriguez-Molares et al., "The generalized contrast-to-noise
  ratio: a formal definition for lesion detectability", IEEE TUFFC 67(4) 2020, as CUBDL
  (Hyun et al., IEEE TUFFC 68(12) 2021) computes it.  0: indistinguishable, 1: separable.
- speckle SNR: ``mu / sigma`` of the envelope in a region (1.91 for fully developed speckle,
  Wagner et al., "Statistics of speckle in ultrasound B-scans", IEEE TSU 30(3) 1983).
- FWHM: the full width at half maximum (-6 dB of the envelope, ``a = max/2``) of the axial
  (along z, through the peak's column) and lateral (along x, through the peak's row) profiles
  of a point target; the maximum is refined between samples by a parabola through the
  logarithms of the three samples around the peak (exact for a Gaussian main lobe), and each
  crossing of half of it is located by linear interpolation between the two grid samples
  around it (sub-pixel), PICMUS's resolution measure.
"""
import numpy as np

from .geometry import Grid

__all__ = ["contrast", "cnr", "gcnr", "speckle_snr", "fwhm", "circle", "rectangle", "annulus", "envelope"]


def _grid_2d(grid):
    if not isinstance(grid, Grid):
        raise TypeError(f"grid must be a usbeam.Grid (got {type(grid).__name__})")
    if grid.x is None or grid.y is not None:
        raise ValueError("grid must be a 2-D usbeam.Grid(x=..., z=...) (regions and FWHM need image axes)")
    return np.asarray(grid.x, float), np.asarray(grid.z, float)


def _finite_scalar(name, value):
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a real number (got {value!r})") from None
    if not np.isfinite(v):
        raise ValueError(f"{name} must be finite (got {v})")
    return v


def _pair(name, value):
    try:
        a, b = (_finite_scalar(name, v) for v in value)
    except TypeError:
        raise TypeError(f"{name} must be a pair of numbers (got {value!r})") from None
    except ValueError as exc:
        if "finite" in str(exc):
            raise
        raise TypeError(f"{name} must be a pair of numbers (got {value!r})") from None
    return a, b


def _inside_grid(name, grid, x_range, z_range):
    """ValueError naming ``name`` when [x_range] x [z_range] leaves the grid's extent."""
    x, z = _grid_2d(grid)
    tol = 1e-9 * max(np.ptp(x), np.ptp(z), 1e-3)
    if (x_range[0] < x.min() - tol or x_range[1] > x.max() + tol or
            z_range[0] < z.min() - tol or z_range[1] > z.max() + tol):
        raise ValueError(f"{name}: the region x in [{x_range[0]:.6g}, {x_range[1]:.6g}] m, z in "
                         f"[{z_range[0]:.6g}, {z_range[1]:.6g}] m reaches outside the grid (x in "
                         f"[{x.min():.6g}, {x.max():.6g}] m, z in [{z.min():.6g}, {z.max():.6g}] m)")
    return x, z


def _nonempty(name, mask):
    if not mask.any():
        raise ValueError(f"{name}: the region holds no grid point (smaller than the grid spacing)")
    return mask


def circle(grid, center, radius):
    """Boolean mask ``grid.shape`` of the points with ``(x - xc)^2 + (z - zc)^2 <= radius^2``.

    ``center`` = (x, z) in m.  The whole disc must lie inside the grid (ValueError otherwise)."""
    return _disc(grid, center, radius, "center", "radius")


def _disc(grid, center, radius, center_name, radius_name):
    """circle's mask, its errors naming the caller's parameters (fwhm: point, search_radius)."""
    xc, zc = _pair(center_name, center)
    r = _finite_scalar(radius_name, radius)
    if not r > 0:
        raise ValueError(f"{radius_name} must be > 0 (got {r})")
    x, z = _inside_grid(f"{center_name}/{radius_name}", grid, (xc - r, xc + r), (zc - r, zc + r))
    zz, xx = np.meshgrid(z, x, indexing="ij")
    return _nonempty("circle", (xx - xc) ** 2 + (zz - zc) ** 2 <= r * r)


def annulus(grid, center, inner_radius, outer_radius):
    """Boolean mask of ``inner_radius < distance <= outer_radius`` from ``center`` (x, z), m:
    the background ring around a cyst.  The outer disc must lie inside the grid."""
    xc, zc = _pair("center", center)
    r0 = _finite_scalar("inner_radius", inner_radius)
    r1 = _finite_scalar("outer_radius", outer_radius)
    if not 0 <= r0 < r1:
        raise ValueError(f"need 0 <= inner_radius < outer_radius (got {r0}, {r1})")
    x, z = _inside_grid("center/outer_radius", grid, (xc - r1, xc + r1), (zc - r1, zc + r1))
    zz, xx = np.meshgrid(z, x, indexing="ij")
    d2 = (xx - xc) ** 2 + (zz - zc) ** 2
    return _nonempty("annulus", (d2 > r0 * r0) & (d2 <= r1 * r1))


def rectangle(grid, x, z):
    """Boolean mask of the points with ``x[0] <= x <= x[1]`` and ``z[0] <= z <= z[1]`` (m).
    The rectangle must lie inside the grid."""
    x0, x1 = _pair("x", x)
    z0, z1 = _pair("z", z)
    if not (x0 < x1 and z0 < z1):
        raise ValueError(f"rectangle needs x[0] < x[1] and z[0] < z[1] (got x={x}, z={z})")
    gx, gz = _inside_grid("x/z", grid, (x0, x1), (z0, z1))
    zz, xx = np.meshgrid(gz, gx, indexing="ij")
    return _nonempty("rectangle", (xx >= x0) & (xx <= x1) & (zz >= z0) & (zz <= z1))


def envelope(image):
    """``|image|`` as float64, refusing NaN/inf (ValueError) and non-numeric data (TypeError)."""
    a = np.asarray(image)
    if a.dtype.kind not in "biufc":
        raise TypeError(f"image must be a numeric array (got {a.dtype})")
    a = np.abs(a).astype(np.float64)
    if not np.isfinite(a).all():
        raise ValueError("image contains NaN or infinite values")
    return a


def _region_values(name, a, mask):
    m = np.asarray(mask)
    if m.dtype != bool:
        raise TypeError(f"{name} must be a boolean mask (got {m.dtype})")
    if m.shape != a.shape:
        raise ValueError(f"{name} must have the image's shape {a.shape} (got {m.shape})")
    values = a[m]
    if values.size < 2:
        raise ValueError(f"{name} must select at least 2 pixels (got {values.size})")
    return values


def contrast(image, inside, outside):
    """``20 log10(mu_inside / mu_outside)`` of the envelope, dB (module doc)."""
    a = envelope(image)
    vi, vo = _region_values("inside", a, inside), _region_values("outside", a, outside)
    mo = vo.mean()
    if not mo > 0:
        raise ValueError("outside: the envelope is zero there (contrast undefined)")
    mi = vi.mean()
    return float(20 * np.log10(mi / mo)) if mi > 0 else float("-inf")


def cnr(image, inside, outside, definition="rindal"):
    """Contrast-to-noise ratio of the envelope between two regions.

    ``definition="rindal"`` (default): ``|mu_i - mu_o| / sqrt(sigma_i^2 + sigma_o^2)``, linear;
    ``"picmus"``: ``20 log10(|mu_i - mu_o| / sqrt((sigma_i^2 + sigma_o^2) / 2))``, dB.
    Standard deviations are the population ones (``ddof=0``)."""
    if definition not in ("rindal", "picmus"):
        raise ValueError(f"definition must be 'rindal' or 'picmus' (got {definition!r})")
    a = envelope(image)
    vi, vo = _region_values("inside", a, inside), _region_values("outside", a, outside)
    diff = abs(vi.mean() - vo.mean())
    spread = vi.var() + vo.var()
    if definition == "picmus":
        spread /= 2
    if np.ptp(vi) == 0 and np.ptp(vo) == 0:
        raise ValueError("inside/outside: both regions are constant (CNR undefined)")
    ratio = diff / np.sqrt(spread)
    return float(20 * np.log10(ratio)) if definition == "picmus" else float(ratio)


def gcnr(image, inside, outside, bins=256):
    """Generalised CNR, ``1 - sum_k min(p_i(k), p_o(k))`` (module doc; CUBDL's definition)."""
    bins = int(bins)
    if bins < 2:
        raise ValueError(f"bins must be >= 2 (got {bins})")
    a = envelope(image)
    vi, vo = _region_values("inside", a, inside), _region_values("outside", a, outside)
    lo, hi = min(vi.min(), vo.min()), max(vi.max(), vo.max())
    if hi == lo:
        return 0.0
    edges = np.linspace(lo, hi, bins + 1)
    hi_count = np.histogram(vi, edges)[0] / vi.size
    ho_count = np.histogram(vo, edges)[0] / vo.size
    return float(1.0 - np.minimum(hi_count, ho_count).sum())


def speckle_snr(image, region):
    """``mu / sigma`` of the envelope over ``region`` (1.91 for Rayleigh speckle)."""
    v = _region_values("region", envelope(image), region)
    s = v.std()
    if np.ptp(v) == 0:
        raise ValueError("region: the envelope is constant there (speckle SNR undefined)")
    return float(v.mean() / s)


def _peak_value(profile, peak):
    """The profile's maximum between samples: the vertex of the parabola through the logarithms
    of the three samples around ``peak`` (exact for a Gaussian main lobe); the sample itself at
    an edge or where those three are not strictly concave."""
    if peak == 0 or peak == profile.size - 1 or min(profile[peak - 1], profile[peak + 1]) <= 0:
        return profile[peak]
    lm, l0, lp = np.log(profile[peak - 1:peak + 2])
    curvature = lp - 2 * l0 + lm
    if not curvature < 0:
        return profile[peak]
    return float(np.exp(l0 - (lp - lm) ** 2 / (8 * curvature)))


def _half_max_width(coords, profile, peak):
    """Width between the half-maximum crossings either side of index ``peak`` (linear
    interpolation between the samples around each crossing; the maximum itself from
    ``_peak_value``); nan when the profile does not fall below half its maximum on both sides."""
    half = _peak_value(profile, peak) / 2
    below = np.nonzero(profile[:peak] < half)[0]
    if below.size == 0:
        return float("nan")
    i = below[-1]  # profile[i] < half <= profile[i + 1]
    left = coords[i] + (half - profile[i]) / (profile[i + 1] - profile[i]) * (coords[i + 1] - coords[i])
    below = np.nonzero(profile[peak + 1:] < half)[0]
    if below.size == 0:
        return float("nan")
    j = peak + 1 + below[0]  # profile[j - 1] >= half > profile[j]
    right = coords[j - 1] + (profile[j - 1] - half) / (profile[j - 1] - profile[j]) * (coords[j] - coords[j - 1])
    return float(right - left)


def fwhm(image, grid, point, search_radius=1e-3):
    """Axial and lateral FWHM (m) of the point target nearest ``point`` = (x, z) (m).

    The peak is the envelope maximum within ``search_radius`` (m) of ``point``; the axial
    profile is the peak's column, the lateral profile its row, each over the whole image.
    Returns ``(axial, lateral)``; a width is nan when its profile never falls to half the peak
    on one side (a target at the grid's edge).  The search disc must lie inside the grid."""
    a = envelope(image)
    gx, gz = _grid_2d(grid)
    if a.shape != (gz.size, gx.size):
        raise ValueError(f"image must have the grid's shape {(gz.size, gx.size)} (got {a.shape})")
    region = _disc(grid, point, search_radius, "point", "search_radius")
    masked = np.where(region, a, -np.inf)
    iz, ix = np.unravel_index(int(np.argmax(masked)), a.shape)
    if not a[iz, ix] > 0:
        raise ValueError("point: the envelope is zero around it (no target)")
    return _half_max_width(gz, a[:, ix], iz), _half_max_width(gx, a[iz, :], ix)
