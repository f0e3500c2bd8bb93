"""Delay-and-sum (DAS) beamforming for any probe: linear, phased, convex and matrix arrays
(C kernel: csrc/beamform/das_setup.c, das_delays.c, das.c).

Conventions are those of MUST/PyMUST (see ``usbeam.geometry``): x along the array (0 at
its centre), z depth; t = 0 when the first element fires; received sample n is at
``t0 + n/fs``.  For point p, transmit k and element e:

    tau = tau_tx_k(p) + |p - e| / c,   sample index s = (tau - t0) * fs

and the beamformed value is ``sum_k sum_e w(u_e) * data[k, e](s)`` (no normalisation, as
MUST's ``M @ IQ``), with IQ data rotated by ``exp(+j 2 pi fc tau)`` (tau absolute, matching
an ``rf2iq`` down-mix that used the same t0).  RF input (int16/float32) gives float32
output; IQ input (complex64) gives complex64.

Receive aperture: element e contributes when ``|x_p - x_e| <= z_p / (2 F)`` (F the
f-number; ``f_number=0`` is the full aperture; ``'auto'`` is PyMUST ``dasmtx``'s choice from
the element directivity).  The window ``w`` is evaluated at ``u = (x_e - x_p) / (z_p/(2F))``
(``u = x_e / half-length of the array`` for the full aperture): rect, Hann or Tukey.
Probes with element normals (``ConvexArray``) or a 2-D face (``MatrixArray``): each element
accepts the points in its cone around its normal, ``|lateral| <= axial / (2F)`` with
``axial = (p - e) . n_e`` and ``lateral`` the in-plane component (both lateral directions on
a matrix array), the window at ``u = lateral 2F / axial`` (PyMUST dasmtx for convex arrays,
dasmtx3 for matrix arrays; on a linear array this is the rule above).

Interpolation of the channel samples at s (MUST's validity ranges; outside them a sample
contributes nothing): 'nearest' (round half to even, 0 <= s <= n-1), 'linear'
(0 <= s <= n-2), 'cubic' (Catmull-Rom, 1 <= s <= n-3).

Shapes (the one rule of README "Shapes"): channel data is ``(*leading, n_transmits,
n_elements, n_samples)`` and the image ``(*leading, *grid.shape)``: leading axes are kept
exactly as given (a batch of one frame stays a batch, ``(1, nz, nx)``).  A one-transmit
sequence may leave its transmit axis out: ``(n_frames, n_elements, n_samples)`` (what
``usbeam.io.load_must`` returns) and ``(n_elements, n_samples)``; with one transmit a 4-D
shape has its transmit axis (of 1) third from last.

Plausibility (errors rather than a silently wrong image; README, "Errors"): ``fs``/``fc`` below
1 kHz (MHz given for Hz), a grid or probe beyond 1 m (mm given for m), ``c`` outside
100..20000 m/s, data in MATLAB layout ``(samples, elements, frames)`` (at the call: a shape
that does not fit and whose first axes are (n_samples, n_elements); in ``das``, which takes
n_samples from the data: RF with fewer samples than elements), and a grid most of whose
pixels receive no recorded sample (``min_coverage``) raise ValueError naming the likely
cause ("pass rf.T").
"""
import math

import numpy as np

from . import _core, _validate, adaptive, device
from ._backend import check_backend
from .geometry import Delays, DivergingWave, Focused, Grid, PlaneWave, SyntheticAperture, as_sequence
from .probes import check_probe

__all__ = ["Beamformer", "das", "auto_f_number"]

_DTYPES = {"int16": np.int16, "float32": np.float32, "complex64": np.complex64}
_DEFAULT_TABLE_FRACTION = 4  # the delay table may take at most 1/4 of physical memory (and 1 GiB)


def auto_f_number(width, fc, bandwidth, c):
    """PyMUST ``dasmtx``'s automatic f-number (``param.fnumber = None``).

    ``lambda_min = c / (fc (1 + bandwidth/2))`` (``bandwidth`` as a fraction, e.g. 0.75);
    alpha minimises ``|cos(th) sinc(width/lambda_min sin th) - 0.71|`` on [0, pi/2] by
    Brent's bounded method with xtol = pi/100 (the iterates of scipy's ``fminbound``);
    returns ``1 / (2 tan alpha)``.
    """
    width = _validate.positive("width", width)
    fc = _validate.frequency("fc", fc)
    c = _validate.speed_of_sound("c", c)
    bandwidth = _validate.positive("bandwidth", bandwidth)
    if not bandwidth < 2:
        raise ValueError(f"bandwidth is a fraction in (0, 2) (got {bandwidth})")
    return _core.das_auto_f_number(width, fc, bandwidth, c)


def _transmit_tuple(tx, probe, c):
    """(kind, angle, x, z, element, sources, y, angle_y, axis_x, axis_y, axis_z) as
    csrc/include/usbeam/beamform.h's usbeam_transmit."""
    if isinstance(tx, PlaneWave):
        return (0, tx.angle, 0.0, 0.0, 0, None, 0.0, tx.angle_y, 0.0, 0.0, 0.0)
    if isinstance(tx, DivergingWave):
        x, y, z = tx.point
        return (1, 0.0, x, z, 0, None, y, 0.0, 0.0, 0.0, 0.0)
    if isinstance(tx, Focused):
        x, y, z = tx.point
        axis = tx.axis if tx.origin is not None else (0.0, 0.0, 0.0)
        return (2, 0.0, x, z, 0, None, y, 0.0) + tuple(axis)
    if isinstance(tx, SyntheticAperture):
        return (3, 0.0, 0.0, 0.0, tx.element)
    if isinstance(tx, Delays):
        return (4, 0.0, 0.0, 0.0, 0, np.ascontiguousarray(tx.sources(probe, c)))
    raise TypeError(f"unsupported transmit {type(tx).__name__}")


def probe_geometry(probe):
    """(positions, normals or None, surface) for the C plan: normals None for a probe whose
    normals are all +z (the linear-array case)."""
    pos = np.ascontiguousarray(probe.positions, dtype=np.float64)
    nrm = np.ascontiguousarray(probe.normals, dtype=np.float64)
    surface = int(bool(getattr(probe, "two_dimensional", False)))
    if np.all(nrm == (0.0, 0.0, 1.0)):
        nrm = None
    return pos, nrm, surface


_COVERAGE_POINTS = 1024     # grid points sampled by the coverage check (32 x 32 for an image)
_COVERAGE_TRANSMITS = 8     # transmits sampled by it (first, last and evenly between)


def _sample_indices(n, k):
    """Up to k indices spread evenly over range(n), first and last included."""
    idx = np.linspace(0, n - 1, min(n, k)).round().astype(np.int64)  # non-decreasing
    return idx[np.concatenate(([True], idx[1:] != idx[:-1]))] if idx.size else idx  # np.unique, without hashing


def _coverage_points(grid, points=None):
    """A few points spread over the grid, (n, 3) as (x, y, z) (points: grid.coordinates(), when
    the caller has them)."""
    if not isinstance(grid, Grid):  # PolarGrid, VolumeGrid, SphericalGrid: a sample of its points
        pts = grid.coordinates() if points is None else points
        return pts[_sample_indices(len(pts), _COVERAGE_POINTS)]
    if grid._points is not None:
        pts = grid._points
        return pts[_sample_indices(len(pts), _COVERAGE_POINTS)]
    axes = [a for a in (grid.y, grid.z, grid.x) if a is not None]
    per_axis = max(2, int(round(_COVERAGE_POINTS ** (1 / len(axes)))))
    sub = Grid(x=grid.x[_sample_indices(grid.x.size, per_axis)], z=grid.z[_sample_indices(grid.z.size, per_axis)],
               y=None if grid.y is None else grid.y[_sample_indices(grid.y.size, per_axis)])
    return sub.coordinates()


def grid_coverage(probe, sequence, grid, *, fs, c, t0, n_samples, points=None, transmit_times=None, covered=None):
    """Fraction of the grid's pixels (a sample of up to 1024 of them and 8 transmits) for
    which some element's round-trip time ``tau = tau_tx + |p - e| / c`` falls inside the
    record, ``t0 <= tau <= t0 + (n_samples - 1) / fs``: the pixels that receive any recorded
    sample (the receive aperture is ignored: the estimate errs towards "covered").  Returns
    (fraction, number of pixels checked, (first, last) time of the record).  ``points``: the
    grid's coordinates() when the caller has them (saves computing them again);
    ``transmit_times``: with them, a function of point rows giving their transmit times,
    (len(rows), n_transmits) in s, e.g. the C plan's (the same model; saves evaluating it
    again, such as MUST's min over 4 n virtual sources per point); ``covered``: with them, a
    function of (point rows, transmit indices, t0, t_end) giving this test's answer per row,
    or None, e.g. the C plan's (usbeam_das_coverage: the same double expressions, ~10x faster
    than the (points x elements) arrays below)."""
    t_end = t0 + (n_samples - 1) / fs
    sequence = tuple(sequence)
    transmits = _sample_indices(len(sequence), _COVERAGE_TRANSMITS)
    rows = None  # the point rows _coverage_points takes, when the caller's points are the grid's own
    if points is not None and (not isinstance(grid, Grid) or grid._points is not None):
        rows = _sample_indices(len(points), _COVERAGE_POINTS)
    hits = covered(rows, transmits, t0, t_end) if covered is not None and rows is not None else None
    if hits is not None:
        return float(hits.mean()), len(rows), (t0, t_end)
    sampled = transmit_times(rows) if transmit_times is not None and rows is not None else None
    points = points[rows] if sampled is not None else _coverage_points(grid, points)
    elements = np.asarray(probe.positions, dtype=np.float64)
    hits = np.zeros(len(points), bool)
    for k in transmits:
        tx = (sequence[k].transmit_time(points, probe, c) if sampled is None
              else sampled[:, k])                                               # (n_points,)
        rx = np.sqrt((points[:, :1] - elements[:, 0]) ** 2 + (points[:, 1:2] - elements[:, 1]) ** 2
                     + (points[:, 2:] - elements[:, 2]) ** 2) / c  # (n_points, n_el)
        tau = tx[:, None] + rx
        hits |= ((tau >= t0) & (tau <= t_end)).any(axis=1)
    return float(hits.mean()), len(points), (t0, t_end)


def _check_geometry(probe, grid, c, points=None):
    """Plausibility of units: grid and probe within 1 m, c a speed of sound in m/s (points: the
    grid's coordinates(), when the caller has them)."""
    _validate.speed_of_sound("c", c)
    if not isinstance(grid, Grid):  # sector and volume grids: their points
        _validate.distances("grid points", grid.coordinates() if points is None else points, "grid coordinates")
    for axis in ("x", "y", "z") if isinstance(grid, Grid) else ():
        values = getattr(grid, axis)
        if values is not None:
            _validate.distances(f"grid {axis}", values, "grid coordinates")
    if isinstance(grid, Grid) and grid._points is not None:
        _validate.distances("grid points", grid._points, "grid coordinates")
    _validate.distances("probe", probe.positions, "element positions (pitch)")


def _dtype_name(dtype):
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"dtype must be int16, float32 or complex64 (got {dtype!r})") from None
    for name, value in _DTYPES.items():
        if dt == np.dtype(value):
            return name
    raise TypeError(f"dtype must be int16, float32 (RF) or complex64 (IQ) (got {dt})")


class Beamformer:
    """A delay-and-sum plan: geometry, delays and weights computed once, applied to many
    batches of frames.

    Parameters
    ----------
    probe : LinearArray, ConvexArray, MatrixArray or ElementArray
    sequence : a transmit or a list of transmits (summed coherently)
    grid : Grid, or a PolarGrid / VolumeGrid / SphericalGrid (usbeam.grids)
    fs, fc : sampling and centre (demodulation) frequencies, Hz
    c : speed of sound, m/s;  t0 : time of sample 0, s
    n_samples : samples per channel
    f_number : float >= 0 (0 = full aperture) or 'auto' (PyMUST, needs ``probe.width``);
        None means 'auto', as PyMUST's ``param.fnumber = None``
    window : 'rect' | 'hann' | 'tukey';  tukey_alpha : Tukey taper fraction in [0, 1]
    interpolation : 'nearest' | 'linear' | 'cubic'
        (string options are case-insensitive).  Defaults 'linear' and 'rect' are PyMUST
        ``dasmtx``'s (its default method, an unweighted receive aperture), so a default plan
        gives MUST's image; the default input is IQ, a slowly varying baseband signal that
        linear interpolation follows closely.  (``RCABeamformer`` defaults to 'cubic' and
        'hann' for its reasons: RF input, where linear interpolation of the carrier loses
        amplitude, and strip edge waves; see its docstring.)
    dtype : input dtype: complex64 (IQ, default), float32 or int16 (RF)
    n_frames : frames per call the plan is built for (fewer reuse it; more rebuild it)
    bandwidth : fractional bandwidth for 'auto' (default ``probe.bandwidth``, else MUST's 0.75)
    backend : 'cpu' or 'cuda' (cuda/das.cu: device arrays in and out without copies, delays
        computed on the GPU per call, nothing tabulated; see usbeam.device)
    strict : with backend='cuda', refuse host (NumPy) data instead of copying it (TypeError)
    max_table_bytes : budget of the precomputed receive table (per point and aperture element:
        the receive delay and the window x IQ rotation, 16 bytes, shared by every transmit and
        frame; default: 1 GiB or a quarter of the memory); beyond it they are recomputed on
        every call (measured within ~15 % of the table path on several frames,
        benchmarks/bench_das.py).  A 1-frame plan (n_frames=1) on an AVX-512 CPU, or one of a
        few frames (IQ up to 5, 7 of one transmit at fs = 4 fc or of 8 and more; RF up to 12;
        each frame then beamformed as a 1-frame plan would, the same values), holds a lane
        table instead: the receive delay alone (4 bytes in fixed point, 8 where 16 neighbouring
        points lie too far apart, plus a window weight for 'hann' and 'tukey') for each point
        and element of 16 neighbouring points' apertures, and sums those 16 points together
        (csrc/beamform/das_lanes.c); over the budget it forms those rows per group at each
        call, ~1.2-1.3x the lane table's time with several transmits (benchmarks/RESULTS.md,
        live-3tx), ~1.8x with one transmit of IQ at fs = 4 fc, whose table holds each point's
        first tap and fraction of a sample per element (live-1tx, session 26).  On a grid
        centred on a linear array, a group whose points mirror another's about the array's
        centre takes that group's rows in reverse instead of forming its own (half the groups
        where the grid's width is a multiple of 16 points): live-3tx ~1.2x, live-1tx ~1.4x
        (session 29).
    min_coverage : the least fraction of the grid's pixels that must receive a recorded
        sample (``grid_coverage``; default 0.5): below it the plan is refused with a
        ValueError naming the likely causes (MATLAB layout, mm, a wrong t0), since the image
        would be mostly empty.  An error, not a warning: a plan is built once, before any
        frame, so the error costs nothing and a warning in a loop would be missed.  The
        legitimate exception, a display grid deliberately deeper or wider than a short record
        (a live display that keeps its grid while the depth changes), passes
        ``min_coverage=0``.
    method : 'das' (default) or an adaptive beamformer, 'cf' | 'gcf' | 'dmas' | 'fdmas' |
        'pdas' | 'mv' (usbeam.adaptive: formulas, references, defaults), with its options
        p (pdas), gcf_m0 (gcf), subarray_length or subarray_fraction, diagonal_loading,
        temporal_averaging (mv), fdmas_band = (low, high) Hz and fdmas_half_taps (fdmas).
        An option of another method is refused (ValueError).  Adaptive methods take line
        arrays (linear, phased, convex: the receive aperture as a row of neighbouring
        elements); a 2-D aperture (MatrixArray) is refused (TypeError).  An adaptive method
        tabulates whole per-(point, transmit, element) delay/weight entries (4 + 4 x weights
        bytes each) within max_table_bytes, else recomputes them per point; its CUDA twin
        needs that table.
    formulation : 'gather' (default: per-point delay/weight entries, csrc/beamform/das.c) or
        'sparse': the same operator built once as a CSR matrix (pixels x element-samples,
        csrc/beamform/das_sparse.c) and applied as a sparse x dense product over the frames
        (OpenMP on the CPU, cuSPARSE on CUDA).  Same image; its memory is ``sparse_bytes``
        and ``sparse_operator()`` returns the matrix (CPU plans).

    ``bf(data, out=None)`` beamforms ``data`` (see module doc for shapes).

    Defaults of ``c`` (1540 m/s) and ``t0`` (0 s): kept, because both are exact for most data
    that is not a recording (simulations, ``SimulatedScanner``, scanners that start recording
    at the transmit), and every caller since the first release relies on them.  They are the
    silent way to a wrong image with a recording (PWI_disk without its t0 of 9.95 us
    correlates at 0.115 with MUST's image, without its c of 1480 m/s at 0.72): build plans
    for recordings with ``Beamformer.from_recording(rec, grid)``, which takes fs, fc, c, t0,
    bandwidth and the geometry from the recording, so none can be forgotten.
    """

    def __init__(self, probe, sequence, grid, *, fs, fc, c=1540.0, t0=0.0, n_samples, f_number=1.0,
                 window="rect", tukey_alpha=0.5, interpolation="linear", dtype=np.complex64, n_frames=1,
                 bandwidth=None, backend="cpu", max_table_bytes=None, strict=False, min_coverage=0.5,
                 method="das", p=None, gcf_m0=None, subarray_length=None, subarray_fraction=None,
                 diagonal_loading=None, temporal_averaging=None, fdmas_band=None, fdmas_half_taps=None,
                 formulation="gather"):
        check_probe(probe)
        if not (isinstance(grid, Grid) or hasattr(grid, "coordinates") and hasattr(grid, "shape")
                and hasattr(grid, "n_points")):
            raise TypeError(f"grid must be a usbeam.Grid, PolarGrid, VolumeGrid or SphericalGrid "
                            f"(got {type(grid).__name__})")
        self.probe = probe
        self.sequence = as_sequence(sequence, probe)
        self.grid = grid
        self.fs = _validate.frequency("fs", fs)
        self.fc = _validate.frequency("fc", fc)
        self.c = _validate.speed_of_sound("c", c)
        self.t0 = _validate.real_scalar("t0", t0)
        self.n_samples = _validate.integer("n_samples", n_samples, minimum=1, maximum=2**30)
        # the grid's points, computed once: the checks below, the coverage and the C plan read them
        _validate.check_allocation("grid", (grid.n_points, 3), 8 * 3)  # points, their copy and apertures
        kept = getattr(grid, "_kept_coordinates", None)  # a sector grid's own, read-only (no copy)
        self._points = np.ascontiguousarray(kept() if kept is not None else grid.coordinates(), dtype=np.float64)
        _check_geometry(probe, grid, self.c, self._points)
        self.window = _validate.choice("window", window, ("rect", "hann", "tukey"))
        self.tukey_alpha = _validate.real_scalar("tukey_alpha", tukey_alpha)
        if not 0 <= self.tukey_alpha <= 1:
            raise ValueError(f"tukey_alpha must be in [0, 1] (got {self.tukey_alpha})")
        self.interpolation = _validate.choice("interpolation", interpolation, ("nearest", "linear", "cubic"))
        self.dtype = np.dtype(_DTYPES[_dtype_name(dtype)])
        self.backend = check_backend(backend)
        if f_number is None:  # PyMUST's param.fnumber = None: the automatic f-number
            f_number = "auto"
        if isinstance(f_number, str):
            f_number = _validate.choice("f_number", f_number, ("auto",))
            if probe.width is None:
                raise ValueError("f_number='auto' needs the element width: give LinearArray(width=...) or kerf=, "
                                 "ConvexArray(element_width=...), MatrixArray(element_width=...)")
            if bandwidth is None:
                bandwidth = probe.bandwidth if probe.bandwidth is not None else 0.75
            self.f_number = auto_f_number(probe.width, self.fc, bandwidth, self.c)
        else:
            if not isinstance(f_number, (int, float, np.integer, np.floating)) or isinstance(f_number, bool):
                raise TypeError(f"f_number must be a number >= 0 or 'auto' (or None, meaning 'auto'; "
                                f"got {type(f_number).__name__})")
            self.f_number = _validate.nonnegative("f_number", f_number)
        self.bandwidth = bandwidth
        self.min_coverage = _validate.real_scalar("min_coverage", min_coverage)
        if not 0 <= self.min_coverage <= 1:
            raise ValueError(f"min_coverage must be in [0, 1] (got {self.min_coverage})")
        self._method_args = adaptive.method_arguments(
            method, {"p": p, "gcf_m0": gcf_m0, "subarray_length": subarray_length,
                     "subarray_fraction": subarray_fraction, "diagonal_loading": diagonal_loading,
                     "temporal_averaging": temporal_averaging, "fdmas_band": fdmas_band,
                     "fdmas_half_taps": fdmas_half_taps},
            n_elements=probe.n_elements, fs=self.fs, fc=self.fc)
        self.method = self._method_args[0]
        if self.method != "das" and probe.two_dimensional:
            raise TypeError(f"method={self.method!r} (an adaptive beamformer) takes a line array (LinearArray, "
                            f"ConvexArray, a one-dimensional ElementArray): {type(probe).__name__} has a 2-D "
                            f"aperture, which is no row of neighbouring elements for the coherence factors' "
                            f"count and spatial spectrum or MV's subarrays; use method='das'")
        self.out_dtype = np.dtype(np.complex64 if self.dtype == np.complex64 else np.float32)
        if max_table_bytes is None:
            max_table_bytes = min(1 << 30, _validate._memory_limit() // _DEFAULT_TABLE_FRACTION)
        self.max_table_bytes = _validate.integer("max_table_bytes", max_table_bytes, minimum=0,
                                                   maximum=_validate.SSIZE_MAX)
        self._plan = None
        self._capacity = 0
        self.strict = bool(strict)
        self.formulation = _validate.choice("formulation", formulation, ("gather", "sparse"))
        if self.formulation == "sparse" and self.method != "das":
            raise ValueError(f"formulation='sparse' is a delay-and-sum operator: it takes method='das' (got method={self.method!r})")
        self._runner = None  # backend='cuda': the usbeam.device.PlanRunner of the current plan
        self.cuda = None     # backend='cuda': CUDA state (stream, stage_times) of the current plan
        self._ensure_capacity(_validate.integer("n_frames", n_frames, minimum=1))
        if hasattr(grid, "check_probe"):  # sector grids: every ray within some element's cone
            grid.check_probe(probe, self.f_number, points=self._points, seen=self._plan_seen())
        # after the size checks (MemoryError first), before any frame
        if self.min_coverage > 0:
            fraction, n_checked, window = grid_coverage(probe, self.sequence, grid, fs=self.fs, c=self.c,
                                                        t0=self.t0, n_samples=self.n_samples, points=self._points,
                                                        transmit_times=self._plan_transmit_times,
                                                        covered=self._plan_covered)
            if fraction < self.min_coverage:
                raise ValueError(_validate.coverage_error("grid", round(fraction * n_checked), n_checked, window,
                                                          self.min_coverage))
            self.coverage = fraction
        else:
            self.coverage = None

    def _host_gather_plan(self):
        """The C plan when it is a CPU delay-and-sum gather plan (the one with host transmit
        times and apertures), else None."""
        if self.method != "das" or self.formulation != "gather" or self.backend == "cuda":
            return None
        return self._plan

    def _plan_covered(self, rows, transmits, t0, t_end):
        """The CPU gather plan's coverage test of the points rows (grid_coverage), or None."""
        plan = self._host_gather_plan()
        if plan is None:
            return None
        return _core.das_coverage(plan, np.asarray(rows, dtype=np.int64), np.asarray(transmits, dtype=np.int64),
                                  float(t0), float(t_end))

    def _plan_seen(self):
        """Per point, whether the CPU gather plan's receive aperture holds it, or None (other
        plans: the grid's check then tests the cones itself)."""
        plan = self._host_gather_plan()
        counts = None if plan is None else _core.das_aperture_counts(plan)
        return None if counts is None else counts > 0

    def _plan_transmit_times(self, rows):
        """The CPU gather plan's transmit times of the points rows, (len(rows), n_transmits) in s,
        or None (other plans)."""
        plan = self._host_gather_plan()
        return None if plan is None else _core.das_transmit_times(plan, np.asarray(rows, dtype=np.int64))

    @property
    def n_transmits(self):
        return len(self.sequence)

    @property
    def n_frames(self):
        """Frames one call can take without building a new plan (the plan's capacity)."""
        return self._capacity

    def _ensure_capacity(self, n_frames):
        """A C plan for at least n_frames frames (smaller batches reuse it)."""
        if n_frames <= self._capacity:
            return self._plan
        n_points = self.grid.n_points
        _validate.check_allocation("grid", (n_points, 3), 8 * 3)  # points, their copy and apertures
        if self.backend != "cuda":  # a CUDA plan stages nothing on the host
            _validate.check_allocation("data (staged as float32)",
                                       (n_frames, self.n_transmits, self.probe.n_elements, self.n_samples), 8)
        _validate.check_allocation("beamformed output", (n_frames, n_points), self.out_dtype.itemsize)
        if self._points is None:
            self._points = np.ascontiguousarray(self.grid.coordinates(), dtype=np.float64)
        self._plan, self._capacity = None, 0  # free the old plan's table and staging first
        self._runner = None
        positions, normals, surface = probe_geometry(self.probe)
        args = (positions, [_transmit_tuple(t, self.probe, self.c) for t in self.sequence], self._points,
                n_frames, self.n_samples, self.fs, self.fc, self.c, self.t0, self.f_number, self.window,
                self.tukey_alpha, self.interpolation, self.dtype.name, self.max_table_bytes, self.backend)
        if self.method == "das":
            make_plan = _core.das_sparse_plan if self.formulation == "sparse" else _core.das_plan
            self._plan = make_plan(*args, element_normals=normals, surface=surface)
        else:  # usbeam.adaptive: the same geometry (line arrays), then the method's options
            self._plan = _core.adaptive_plan(*args, element_normals=normals, surface=surface,
                                              method_options=self._method_args)
        self._capacity = n_frames
        return self._plan

    def table_bytes(self):
        """Bytes of the precomputed receive table (0 when the receive delays are recomputed on
        every call because the table would exceed max_table_bytes)."""
        if self.method != "das" or self.formulation == "sparse":
            return 0
        return _core.das_table_bytes(self._plan)

    def _execute(self, plan, data, out, n_frames):
        if self.method != "das":
            return _core.adaptive_execute(plan, data, out, n_frames)
        if self.formulation == "sparse":
            return _core.das_sparse_execute(plan, data, out, n_frames)
        return _core.das_execute(plan, data, out, n_frames)

    @property
    def sparse_bytes(self):
        """formulation='sparse': bytes of the CSR operator (row offsets, int32 columns and
        float32 / complex64 values), on the host or the device; 0 for 'gather'."""
        return _core.das_sparse_bytes(self._plan) if self.formulation == "sparse" else 0

    def sparse_operator(self):
        """The DAS operator as a ``scipy.sparse.csr_array`` of shape (n_points, n_transmits *
        n_elements * n_samples), columns in the input's order: ``out[f] = A @ data[f].ravel()``
        (complex64 values for IQ, float32 for RF; the window and the IQ rotation folded in).
        Built by a CPU sparse plan of the same parameters (this one when it is one)."""
        try:
            import scipy.sparse
        except ImportError:  # pragma: no cover - scipy is the `io` extra
            raise ImportError("Beamformer.sparse_operator needs scipy (pip install usbeam[io])") from None
        plan = self._plan
        if self.formulation != "sparse" or self.backend == "cuda":
            positions, normals, surface = probe_geometry(self.probe)
            plan = _core.das_sparse_plan(
                positions, [_transmit_tuple(t, self.probe, self.c) for t in self.sequence],
                self._points, 1, self.n_samples, self.fs, self.fc, self.c, self.t0, self.f_number,
                self.window, self.tukey_alpha, self.interpolation, self.dtype.name, self.max_table_bytes, "cpu",
                element_normals=normals, surface=surface)
        offsets, columns, values, shape = _core.das_sparse_csr(plan)
        return scipy.sparse.csr_array((values, columns, offsets), shape=shape)

    def _layout(self, data):
        """(n_frames, leading axes) of data by the shape rule (module doc), checking its shape
        against the plan; n_frames is the product of the leading axes."""
        leading, _ = _validate.leading_axes("data", data.shape, self.n_transmits, self.probe.n_elements,
                                            self.n_samples)
        return math.prod(leading), leading

    def __call__(self, data, out=None):
        """Beamform ``data`` into ``out`` (allocated when None) and return it.

        Complex input must come to a complex64 plan, real to a float32 plan (float64 and
        integers are converted), int16 to an int16 plan.  Any number of frames up to the
        plan's ``n_frames`` reuses it; more builds a larger one.  NaN or infinite samples:
        ValueError, with ``out`` filled with NaN (no partial image: a large record of several
        frames is checked while it is beamformed).
        """
        if self.backend == "cuda":
            return self._call_cuda(data, out)
        given, data = data, self._host_data(data)
        n_frames, leading = self._layout(data)
        plan = self._ensure_capacity(n_frames)
        shape = leading + self.grid.shape
        if out is None:
            out = np.empty(shape, self.out_dtype)
        else:
            _validate.out_array("out", out, shape, self.out_dtype)
            _validate.no_overlap("out", out, "data", given, data)
        # the kernel sees (n_frames, n_transmits, n_elements, n_samples) and (n_frames, n_points):
        # C-contiguous reshapes, views of the same memory
        flat_data = data.reshape((n_frames, self.n_transmits, self.probe.n_elements, self.n_samples))
        self._execute(plan, flat_data, out.reshape((n_frames,) + self.grid.shape), n_frames)  # ValueError for NaN or inf data (checked while staging)
        return out

    def _call_cuda(self, data, out):
        """backend='cuda': data on the device is used in place (any DLPack / CUDA-array-interface
        array); host data is copied in unless strict.  NaN / inf samples the kernel reads are
        flagged on the device and raise ValueError when the host next meets the result: after
        the copy of a host result, on ``self.cuda.synchronize()``, or at the next call
        (usbeam.device.CudaExecution.check_input).  The CUDA twin runs whole batches of its
        plan's capacity: another frame count rebuilds the plan (cheap: the twin tabulates
        nothing)."""
        if device.in_host_memory(data):
            if not hasattr(data, "shape"):
                data = _validate.ndarray("data", data)
        elif not (hasattr(data, "shape") and hasattr(data, "ndim")):
            # a device array that only speaks DLPack / the CUDA array interface: its shape from
            # a view taken with no stream order (stream=-1), dropped at once; PlanRunner imports
            # it again in the plan's stream order
            data = _DeviceShape(device.asarray(data, stream=-1, name="data").shape, data)
        n_frames, leading = self._layout(data)
        if n_frames != self._capacity:
            if self._runner is not None:  # the old plan's finished calls, before it goes
                self._runner.execution.check_input("data", earlier=True)
            self._capacity = 0
        plan = self._ensure_capacity(n_frames)
        if self._runner is None:
            if self.method != "das":
                exec_of = _core.adaptive_cuda_exec
            else:
                exec_of = _core.das_sparse_cuda_exec if self.formulation == "sparse" else _core.das_cuda_exec
            self._runner = device.PlanRunner(exec_of(plan), self.strict)
        self.cuda = self._runner.execution
        shape = leading + self.grid.shape
        data_shape = tuple(data.shape)
        if isinstance(data, _DeviceShape):
            data = data.array
        return self._runner(lambda i, o: self._execute(plan, i, o, n_frames), "data", data, data_shape,
                            self.dtype, self._host_data, out, shape, self.out_dtype)

    @classmethod
    def from_recording(cls, recording, grid, **overrides):
        """A plan for ``recording``'s data on ``grid``, every acquisition parameter taken
        from the recording (so none can be forgotten): probe, sequence, fs, fc, c, t0,
        bandwidth, n_samples, n_frames and the data kind (int16 / float32 RF, complex64 for IQ).

        ``recording`` is a ``usbeam.io.Recording`` (``load_must``'s ``MustRecording``, the
        Vantage and UFF readers' results) or any object with a ``to_recording()`` method.
        Defaults that differ from the constructor's: ``f_number='auto'`` when the probe's
        element width is known (MUST's own choice for its recordings).  ``overrides`` are any
        constructor keyword (``interpolation='nearest'``, ``dtype=np.complex64`` to beamform the
        recording's IQ after ``rf2iq`` without decimation, ``backend='cuda'``...).
        """
        rec = as_recording(recording)
        kwargs = recording_parameters(rec)
        kwargs["dtype"] = _recording_dtype(rec)
        kwargs["n_frames"] = _recording_frames(rec, kwargs.pop("n_transmits"))
        if getattr(rec.probe, "width", None) is not None:
            kwargs["f_number"] = "auto"
        kwargs.update(overrides)
        return cls(rec.probe, rec.sequence, grid, **kwargs)

    def __repr__(self):
        f_number = f"{self.f_number:.4g}"
        return (f"Beamformer({self.probe.n_elements} elements, {self.n_transmits} transmit"
                f"{'s' if self.n_transmits != 1 else ''}, grid {self.grid.shape}, "
                f"{self.dtype.name} -> {self.out_dtype.name}, n_samples={self.n_samples}, "
                f"fs={self.fs / 1e6:.4g} MHz, fc={self.fc / 1e6:.4g} MHz, c={self.c:g} m/s, "
                f"t0={self.t0 * 1e6:.4g} us, f_number={f_number}, {self.interpolation}, {self.window}, "
                f"n_frames={self._capacity}, backend={self.backend!r})")

    def _host_data(self, data):
        """Host data checked against the plan's dtype and made C-contiguous in it."""
        data = _validate.ndarray("data", data)
        if self.dtype == np.complex64:
            if not np.iscomplexobj(data):
                raise TypeError(f"data must be complex IQ for this plan (dtype complex64), got {data.dtype}")
        elif self.dtype == np.float32:
            if data.dtype.kind not in "fiu":
                raise TypeError(f"data must be real RF for this plan (dtype float32), got {data.dtype}")
        elif data.dtype.newbyteorder("=") != np.int16:  # big-endian int16 is converted (README Errors)
            raise TypeError(f"data must have dtype int16 for this plan, got {data.dtype}")
        if data.dtype != self.dtype or not data.flags.c_contiguous or not data.flags.aligned:
            data = np.ascontiguousarray(data, dtype=self.dtype)
        return data


def as_recording(recording):
    """A ``usbeam.io.Recording`` from ``recording``: itself, or ``recording.to_recording()``
    (a Vantage workspace, a reader's own object); TypeError for anything else."""
    from .io.recording import Recording

    if isinstance(recording, Recording):
        return recording
    convert = getattr(recording, "to_recording", None)
    if callable(convert):
        rec = convert()
        if isinstance(rec, Recording):
            return rec
        raise TypeError(f"recording.to_recording() returned {type(rec).__name__}, not a usbeam.io.Recording")
    raise TypeError(f"recording must be a usbeam.io.Recording (load_must, the Vantage and UFF readers) or have "
                    f"a to_recording() method (got {type(recording).__name__})")


def recording_parameters(rec):
    """The acquisition keywords every plan takes from a Recording: fs, fc, c, t0, bandwidth
    (None when the recording does not know it), n_samples, and n_transmits."""
    if rec.data is None:
        raise ValueError("recording has no channel data (data is None): its n_samples is unknown")
    if getattr(rec, "modulation_frequency", 0.0) and abs(rec.modulation_frequency - rec.fc) > 1e-6 * rec.fc:
        raise ValueError(f"recording holds IQ demodulated at {rec.modulation_frequency:g} Hz, not at its fc "
                         f"{rec.fc:g} Hz: usbeam's IQ convention demodulates at fc")
    bandwidth = rec.bandwidth if rec.bandwidth is not None and math.isfinite(rec.bandwidth) else None
    return dict(fs=rec.fs, fc=rec.fc, c=rec.c, t0=rec.t0, bandwidth=bandwidth, n_samples=rec.n_samples,
                n_transmits=len(rec.sequence))


def _recording_dtype(rec):
    data = rec.data
    if np.iscomplexobj(data):
        return np.complex64
    return np.int16 if np.dtype(data.dtype).newbyteorder("=") == np.int16 else np.float32


def _recording_frames(rec, n_transmits):
    leading, _ = _validate.leading_axes("recording.data", np.shape(rec.data), n_transmits,
                                        rec.probe.n_elements, rec.n_samples)
    return max(1, math.prod(leading))


class _DeviceShape:
    """The shape of a device array that has no .shape (for Beamformer._layout), and the array."""

    def __init__(self, shape, array):
        self.shape, self.ndim, self.array = tuple(shape), len(shape), array


def das(data, probe, sequence, grid, *, fs, fc, c=1540.0, t0=0.0, f_number=1.0, window="rect",
        tukey_alpha=0.5, interpolation="linear", bandwidth=None, out=None, backend="cpu", min_coverage=0.5):
    """One-shot delay-and-sum of ``data`` (see ``Beamformer`` and the module doc).

    Returns ``(*leading, *grid.shape)`` (e.g. ``(n_frames, nz, nx)``): the leading axes of
    ``data`` as given (README, "Shapes"); complex64 for IQ input, float32 for RF.  The same
    plausibility checks as ``Beamformer`` (RF in MATLAB layout, MHz, mm, an empty image).
    """
    data = _validate.ndarray("data", data)
    if data.ndim < 2:
        raise ValueError(f"data must have at least 2 dimensions (n_elements, n_samples) (got {data.shape})")
    if data.size == 0:
        raise ValueError(f"data is empty (shape {data.shape})")
    if np.iscomplexobj(data):
        dtype = np.complex64
    elif data.dtype.newbyteorder("=") == np.int16:  # either byte order: an int16 plan, exact
        dtype = np.int16
    elif data.dtype.kind in "fiu":
        dtype = np.float32
    else:
        raise TypeError(f"data must be int16, float or complex (got {data.dtype})")
    n_tx = len(as_sequence(sequence))
    n_el = getattr(probe, "n_elements", None)
    # n_samples comes from the data here: RF shorter than the probe is MATLAB layout
    if dtype != np.complex64 and n_el is not None and data.shape[-2] == n_el and min_coverage > 0:
        _validate.samples_vs_elements("data", data.shape[-1], n_el)
    if n_el is not None:
        leading, _ = _validate.leading_axes("data", data.shape, n_tx, n_el, data.shape[-1])
        n_frames = max(1, math.prod(leading))
    else:
        n_frames = 1
    bf = Beamformer(probe, sequence, grid, fs=fs, fc=fc, c=c, t0=t0, n_samples=data.shape[-1], f_number=f_number,
                    window=window, tukey_alpha=tukey_alpha, interpolation=interpolation, dtype=dtype,
                    n_frames=n_frames, bandwidth=bandwidth, backend=backend, min_coverage=min_coverage)
    return bf(data, out=out)
