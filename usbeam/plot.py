"""Plot helpers for notebooks: B-mode and Doppler images on their grid, per-stage timings.

Optional: needs matplotlib (``pip install usbeam[plot]``); importing this module without it
raises ImportError naming the extra.  Every function draws on ``ax`` (default: a new figure's
axes) and returns what it drew, so a test or a caller can read the numbers back.

Images are ``(nz, nx)``, depth down the rows (README, "Conventions"); the axes are in mm.

- ``extent(grid)``: ``imshow``'s extent of a ``usbeam.Grid`` in mm, ``(x_min, x_max, z_max,
  z_min)`` widened by half a pixel on each side, so pixel centres sit at the grid's points;
- ``show_bmode(img, grid)``: uint8 B-mode (or dB, or complex beamformed IQ, shown in dB) in grey;
- ``show_doppler(velocity, power, bmode, grid)``: colour Doppler over B-mode: pixels with
  enough Doppler power are painted with ``DOPPLER_CMAP``, the others show the B-mode;
- ``show_timings(pipeline)``: one horizontal bar per stage of ``pipeline.timings`` (ms).

``DOPPLER_CMAP`` ('usbeam_doppler'), the colour Doppler map: the convention of clinical
scanners, red toward the probe and blue away from it (usbeam's sign: positive velocity is
motion toward the probe, ``usbeam.doppler``), dark at zero velocity and brightening with
speed, to yellow at +Nyquist and to cyan at -Nyquist:

    -v_nyquist  cyan (0, 1, 1) -> blue (0, 0, 1) -> black (0, 0, 0) at 0
                -> red (1, 0, 0) -> yellow (1, 1, 0)  +v_nyquist
"""
try:
    from matplotlib.colors import LinearSegmentedColormap
except ImportError as exc:  # pragma: no cover - exercised in an environment without matplotlib
    raise ImportError("usbeam.plot needs matplotlib: pip install 'usbeam[plot]' (or pip install matplotlib)") \
        from exc

import numpy as np

from . import _validate

__all__ = ["DOPPLER_CMAP", "extent", "show_bmode", "show_doppler", "show_timings"]

DOPPLER_CMAP = LinearSegmentedColormap.from_list(
    "usbeam_doppler",
    [(0.0, (0.0, 1.0, 1.0)), (0.25, (0.0, 0.0, 1.0)), (0.5, (0.0, 0.0, 0.0)), (0.75, (1.0, 0.0, 0.0)),
     (1.0, (1.0, 1.0, 0.0))])


def _axes(ax):
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    return plt.subplots()[1]


def extent(grid):
    """``imshow(..., extent=extent(grid))`` for an image ``(nz, nx)`` on ``grid`` (a 2-D
    ``usbeam.Grid``): ``(left, right, bottom, top)`` in mm, half a pixel beyond the outer
    points so each pixel is centred on its grid point, depth increasing downwards."""
    x, z = getattr(grid, "x", None), getattr(grid, "z", None)
    if x is None or z is None or getattr(grid, "y", None) is not None:
        raise ValueError("grid must be a 2-D usbeam.Grid(x=..., z=...) (a volume or a list of points has no "
                         "image extent)")
    # one definition of the pixel edges (usbeam.grids.image_extent, metres), shown in mm here
    from .grids import image_extent
    return tuple(1e3 * edge for edge in image_extent(grid))


def _image_2d(name, image, grid):
    image = _validate.ndarray(name, image)
    if image.ndim != 2:
        raise ValueError(f"{name} must be one image (nz, nx) (got shape {image.shape}; pick a frame: {name}[k])")
    if grid is not None and tuple(image.shape) != tuple(grid.shape):
        raise ValueError(f"{name} has shape {image.shape} but the grid is {grid.shape} (nz, nx)")
    return image


def _label(ax, grid):
    if grid is not None:
        ax.set_xlabel("x (mm)")
        ax.set_ylabel("z (mm)")


def show_bmode(img, grid=None, *, ax=None, dynamic_range=60.0, title=None, colorbar=False):
    """Show one B-mode image ``(nz, nx)``: uint8 (``usbeam.bmode``) on 0..255, float dB on
    ``[-dynamic_range, 0]``, complex beamformed IQ converted to dB first; grey colour map,
    axes in mm when ``grid`` is given.  Returns the AxesImage."""
    img = _image_2d("img", img, grid)
    if np.iscomplexobj(img):
        magnitude = np.abs(img).astype(np.float64)
        peak = magnitude.max()
        img = 20 * np.log10(np.maximum(magnitude, 1e-30) / (peak if peak > 0 else 1.0))
    if img.dtype == np.uint8:
        vmin, vmax = 0, 255
    else:
        vmin, vmax = -_validate.positive("dynamic_range", dynamic_range), 0.0
    ax = _axes(ax)
    artist = ax.imshow(img, cmap="gray", vmin=vmin, vmax=vmax, interpolation="nearest",
                       extent=None if grid is None else extent(grid), aspect="equal")
    _label(ax, grid)
    if title:
        ax.set_title(title)
    if colorbar:
        ax.figure.colorbar(artist, ax=ax, label="grey level" if img.dtype == np.uint8 else "dB")
    return artist


def show_doppler(velocity, power, bmode, grid=None, *, ax=None, v_nyquist=None, power_threshold=-20.0,
                 title=None, colorbar=True):
    """Colour Doppler over B-mode.  ``velocity`` (m/s) is shown with ``DOPPLER_CMAP`` on
    ``[-v_nyquist, v_nyquist]`` (default: the largest |velocity|) where ``power`` (dB,
    ``usbeam.power_doppler(..., db=True)``; linear power is converted) is at least
    ``power_threshold`` dB; elsewhere the B-mode shows through.  Returns (B-mode AxesImage,
    velocity AxesImage); the velocity image is a masked array (masked: no flow)."""
    velocity = _image_2d("velocity", velocity, grid).astype(np.float64)
    power = _image_2d("power", power, grid).astype(np.float64)
    if velocity.shape != power.shape:
        raise ValueError(f"velocity {velocity.shape} and power {power.shape} must have the same shape")
    if np.nanmin(power) >= 0:  # linear power: to dB relative to its maximum
        peak = np.nanmax(power)
        power = 10 * np.log10(np.maximum(power, 1e-300) / (peak if peak > 0 else 1.0))
    if v_nyquist is None:
        v_nyquist = float(np.nanmax(np.abs(velocity))) or 1.0
    v_nyquist = _validate.positive("v_nyquist", v_nyquist)
    ax = _axes(ax)
    under = show_bmode(bmode, grid, ax=ax)
    flow = np.ma.masked_where(~(power >= power_threshold) | ~np.isfinite(velocity), velocity)
    over = ax.imshow(flow, cmap=DOPPLER_CMAP, vmin=-v_nyquist, vmax=v_nyquist, interpolation="nearest",
                     extent=None if grid is None else extent(grid), aspect="equal")
    if title:
        ax.set_title(title)
    if colorbar:
        ax.figure.colorbar(over, ax=ax, label="velocity (m/s), + toward the probe")
    return under, over


def show_timings(pipeline, *, ax=None, title=None):
    """Horizontal bars of ``pipeline.timings`` (seconds per stage of the last call, as
    ``usbeam.Pipeline`` and ``DopplerPipeline`` keep them), in ms, one bar per stage in the
    chain's order, labelled with its value.  ``pipeline`` may also be the timings dict itself.
    Returns the BarContainer."""
    timings = pipeline if isinstance(pipeline, dict) else getattr(pipeline, "timings", None)
    if not timings:
        raise ValueError("pipeline has no timings yet: call it once first (or pass a {stage: seconds} dict)")
    stages = list(timings)
    ms = [1e3 * float(timings[s]) for s in stages]
    ax = _axes(ax)
    bars = ax.barh(stages, ms, color="tab:blue")
    ax.invert_yaxis()  # first stage on top, as the chain runs
    ax.set_xlim(0, 1.25 * max(max(ms), 1e-6))  # room for the value labels
    ax.set_xlabel("time of the last call (ms)")
    for bar, value in zip(bars, ms):
        ax.annotate(f"{value:.2f} ms", (bar.get_width(), bar.get_y() + bar.get_height() / 2),
                    xytext=(3, 0), textcoords="offset points", va="center")
    ax.set_title(title if title is not None else f"{type(pipeline).__name__}: {sum(ms):.2f} ms in all")
    return bars
