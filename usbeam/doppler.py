"""Doppler imaging: clutter (wall) filters, color Doppler (Kasai), power Doppler and display
post-processing (C kernels: csrc/clutter.c, csrc/doppler.c, csrc/doppler_display.c).

Input is an ensemble of beamformed IQ frames, complex, shaped ``(n_frames, *spatial)`` with
slow time on the leading axis, e.g. ``(n_frames, nz, nx)``.  Outputs have the spatial shape.

Conventions (as PyMUST ``iq2doppler``): ``R(k) = sum_t x[t] conj(x[t+k])``,
``v = -VN * angle(R(k)) / pi`` with the Nyquist velocity ``VN = c*prf/(4*fc*k)``, so a
positive velocity is a positive Doppler shift (motion toward the probe with the IQ
convention of README.md); variance ``2*(VN/pi)**2 * (1 - |R(k)|/R(0))``.
"""
import numpy as np

from . import _core, _validate, device
from ._backend import check_backend

_NO_POWER_THRESHOLD = -float(np.finfo(np.float32).max)


def _ensemble(name, iq, min_frames=2):
    iq = _validate.ndarray(name, iq)
    if not np.iscomplexobj(iq):
        raise TypeError(f"{name} must be complex IQ (got dtype {iq.dtype})")
    if iq.ndim < 2:
        raise ValueError(f"{name} must be shaped (n_frames, *spatial) with at least 2 dimensions (got {iq.shape})")
    if iq.size == 0:
        raise ValueError(f"{name} is empty (shape {iq.shape})")
    if iq.shape[0] < min_frames:
        raise ValueError(f"{name}: the ensemble needs at least {min_frames} frames on axis 0 (got {iq.shape[0]})")
    return iq


def _shape(name, shape, min_ndim):
    shape = _validate.shape(name, shape)
    if len(shape) < min_ndim or any(s <= 0 for s in shape):
        raise ValueError(f"{name} must have >= {min_ndim} positive dimensions (got {shape})")
    return shape


def _as_complex64(name, iq, shape):
    iq = _validate.ndarray(name, iq)
    if not np.iscomplexobj(iq):
        raise TypeError(f"{name} must be complex IQ (got dtype {iq.dtype})")
    if iq.shape != shape:
        raise ValueError(f"{name} must have shape {shape} (got {iq.shape})")
    if iq.dtype != np.complex64 or not iq.flags.c_contiguous or not iq.flags.aligned:
        iq = np.ascontiguousarray(iq, dtype=np.complex64)
    return iq


def _image_layout(spatial):
    """(n_images, nz, nx) of a spatial shape: the last two axes are the image, a 1-D shape is a column."""
    if len(spatial) == 1:
        return 1, spatial[0], 1
    return int(np.prod(spatial[:-2], dtype=np.int64)), spatial[-2], spatial[-1]


class ClutterFilter:
    """A clutter (wall) filter along slow time for ensembles of a fixed shape.

    Parameters
    ----------
    shape : tuple
        ``(n_frames, *spatial)`` of the complex input.
    method : {'poly', 'mean', 'svd', 'iir'}
        'mean': subtract the slow-time mean.  'poly': project out the Legendre polynomials
        of degree 0..``order`` (least-squares regression filter).  'svd': keep the singular
        components ``[low, high]`` of the Casorati matrix (Demené et al. 2015).  'iir':
        Butterworth high-pass of ``order`` with ``cutoff`` (fraction of the PRF); its state
        carries across calls, so a stream filtered block by block equals the whole record.
    order : int
        'poly': polynomial degree (default 2, needs n_frames >= order + 2).  'iir': filter
        order, 1..10 (default 4).
    low, high : int or 'auto' / None
        'svd' cut-offs, 0 = largest singular value.  ``low='auto'`` (default) removes the
        leading components whose temporal singular vector has a mean Doppler frequency below
        ``auto_frequency`` (fraction of the PRF; Yu & Lovstakken 2010); ``high=None`` keeps
        through the last component.
    cutoff : float
        'iir' -3 dB cut-off as a fraction of the PRF, in (0, 0.5) (default 0.05).
    init : {'projection', 'zero'}
        'iir' initialisation after creation or ``reset()``: 'projection' (Chornoboy 1990)
        chooses the initial state that minimises the output energy over the first
        ``init_frames`` frames (default: the whole first block), suppressing the transient;
        'zero' starts at rest.
    backend : {'cpu', 'cuda'}
        'cuda' ('mean', 'poly' up to order 31, 'iir', 'svd' up to 128 frames): on the GPU
        (cuda/clutter.cu, cuda/clutter_svd.cu), device arrays in and out without copies (as
        usbeam.BModePlan); 'svd' decomposes on the device (``svd_info()`` then waits for it);
        ``strict=True`` refuses host arrays.  ``out`` may be the input itself.  The 'iir' state
        stays on the device between calls; ``reset()`` is queued on the plan's stream.
    algorithm : {'kernel', 'gemm'}
        How backend 'cuda' applies 'mean' / 'poly' (stage "clutter.project" either way):
        'kernel' (default) is one fused pass over the ensemble accumulating in double in the
        CPU's order; 'gemm' is two cuBLAS SGEMMs (C = X Q, then X - C Q^T; full FP32, never TF32)
        that read the ensemble twice and sum in float32, so it agrees with the CPU to about
        n_frames^1.5 float32 roundings of the clutter amplitude rather than of the output.
    """

    def __init__(self, shape, method="poly", *, order=None, low="auto", high=None, auto_frequency=0.05,
                 cutoff=0.05, init="projection", init_frames=None, backend="cpu", strict=False,
                 algorithm="kernel"):
        self.shape = _shape("shape", shape, 2)
        self.method = _validate.choice("method", method, ("poly", "mean", "svd", "iir"))
        self.algorithm = _validate.choice("algorithm", algorithm, ("kernel", "gemm"))
        if self.algorithm == "gemm" and self.method not in ("poly", "mean"):
            raise ValueError(f"algorithm='gemm' is for method 'poly' or 'mean' (got method='{self.method}')")
        if self.algorithm == "gemm" and backend != "cuda":
            raise ValueError("algorithm='gemm' (cuBLAS) needs backend='cuda'")
        self.backend = check_backend(backend)
        n_frames = self.shape[0]
        n_pixels = int(np.prod(self.shape[1:], dtype=np.int64))
        _validate.check_allocation("iq", self.shape, 8)
        kwargs = dict(method=method, backend=backend, algorithm=self.algorithm)
        if method == "poly":
            self.order = _validate.integer("order", 2 if order is None else order, minimum=0)
            if n_frames < self.order + 2:
                raise ValueError(f"order {self.order}: the polynomial filter needs an ensemble of at least "
                                 f"{self.order + 2} frames (n_frames = {n_frames})")
            kwargs["poly_order"] = self.order
        elif method == "iir":
            self.order = _validate.integer("order", 4 if order is None else order, minimum=1, maximum=10)
            self.cutoff = _validate.positive("cutoff", cutoff)
            if self.cutoff >= 0.5:
                raise ValueError(f"cutoff must be < 0.5 (a fraction of the PRF; got {self.cutoff})")
            self.init = _validate.choice("init", init, ("projection", "zero"))
            frames = 0 if init_frames is None else _validate.integer("init_frames", init_frames, minimum=1)
            if init == "projection" and not (self.order < (frames or n_frames) <= n_frames):
                raise ValueError(f"init_frames: projection initialisation needs order ({self.order}) < "
                                 f"init_frames ({frames or n_frames}) <= n_frames ({n_frames})")
            kwargs.update(iir_order=self.order, iir_cutoff=self.cutoff, iir_init=init, iir_init_frames=frames)
        elif method == "svd":
            if high is None:
                high_i = n_frames - 1
            else:
                high_i = _validate.integer("high", high)
                if not 0 <= high_i <= n_frames - 1:
                    raise ValueError(f"high must be in [0, n_frames-1 = {n_frames - 1}] (got {high_i})")
            if isinstance(low, str):
                _validate.choice("low", low, ("auto",))
                low_i = -1
                self.auto_frequency = _validate.positive("auto_frequency", auto_frequency)
                if self.auto_frequency >= 0.5:
                    raise ValueError(f"auto_frequency must be < 0.5 (a fraction of the PRF; got {auto_frequency})")
            else:
                low_i = _validate.integer("low", low)
                if not 0 <= low_i <= high_i:
                    raise ValueError(f"low must be in [0, high = {high_i}] or 'auto' (got {low_i})")
                self.auto_frequency = 0.05
            self.low, self.high = low, high_i
            kwargs.update(svd_low=low_i, svd_high=high_i, svd_auto_frequency=self.auto_frequency)
        if self.backend == "cuda" and method == "svd" and n_frames > 128:
            raise ValueError(f"shape: method='svd' on backend='cuda' takes at most 128 frames (got {n_frames})")
        self._plan = _core.clutter_plan(n_frames, n_pixels, **kwargs)
        self.cuda = None
        if self.backend == "cuda":
            self._runner = device.PlanRunner(_core.clutter_cuda_exec(self._plan), strict)
            self.cuda = self._runner.execution  # stream, stage_times(), set_stream()

    def __call__(self, iq, out=None):
        """Filter one ensemble (or, for 'iir', the next block of a stream); returns complex64."""
        if self.cuda is not None:
            return self._runner(lambda i, o: _core.clutter_execute(self._plan, i, o), "iq", iq, self.shape,
                                np.complex64, lambda x: _as_complex64("iq", x, self.shape), out, self.shape,
                                np.complex64)
        given, iq = iq, _as_complex64("iq", iq, self.shape)
        if out is None:
            out = np.empty(self.shape, np.complex64)
        else:
            _validate.out_array("out", out, self.shape, np.complex64)
            # every kernel reads a pixel's slow time before writing it: exactly in place is fine
            _validate.no_overlap("out", out, "iq", given, iq, same_ok=True)
        _core.clutter_execute(self._plan, iq, out)
        return out

    def reset(self):
        """'iir': forget the filter state; the next call starts a new record."""
        _core.clutter_reset(self._plan)

    def svd_info(self):
        """'svd': (singular values in descending order, low, high) used by the last call."""
        if self.method != "svd":
            raise ValueError("svd_info: this filter is not method='svd'")
        return _core.clutter_svd_info(self._plan)


def clutter_filter(iq, method="poly", **kwargs):
    """Clutter-filter an ensemble ``iq`` (complex, ``(n_frames, *spatial)``) along slow time.

    See :class:`ClutterFilter` for the methods and their parameters.  Returns complex64.
    """
    iq = _ensemble("iq", iq)
    return ClutterFilter(iq.shape, method, **kwargs)(iq)


class ColorDopplerPlan:
    """Color Doppler (Kasai lag-k autocorrelator) for ensembles of a fixed shape.

    Parameters
    ----------
    shape : tuple
        ``(n_frames, *spatial)``; the last two spatial axes are (z, x) of each image.
    fc, prf, c : float
        Centre (demodulation) frequency in Hz, pulse repetition frequency in Hz, speed of
        sound in m/s.
    lag : int
        Autocorrelation lag (>= 1, < n_frames).  The Nyquist velocity is c*prf/(4*fc*lag).
    average : int or (int, int)
        Spatial averaging of R(lag) and R(0) over an Mz x Mx neighbourhood (PyMUST's M).
    window : {'hamming', 'boxcar'}
        Averaging window (PyMUST uses Hamming).
    axial_correction : bool
        Loupas 2-D autocorrelator: scale the velocity by fc / f_mean, f_mean estimated from
        the axial lag-1 autocorrelation; needs ``dz``, the axial pixel spacing in m.
    backend : {'cpu', 'cuda'}
        'cuda': the plan runs on the GPU (cuda/doppler.cu) and takes device arrays
        (usbeam.DeviceArray or any CUDA DLPack / CUDA-array-interface array) without a copy,
        returning DeviceArrays queued on ``plan.cuda.stream``; NumPy input is copied in and the
        results out.
    strict : bool
        With backend='cuda', refuse NumPy (host) arrays instead of copying them (TypeError).
    """

    def __init__(self, shape, *, fc, prf, c, lag=1, average=1, window="hamming", axial_correction=False,
                 dz=None, backend="cpu", strict=False):
        self.shape = _shape("shape", shape, 2)
        self.fc = _validate.positive("fc", fc)
        self.prf = _validate.positive("prf", prf)
        self.c = _validate.positive("c", c)
        self.lag = _validate.integer("lag", lag, minimum=1)
        if self.shape[0] <= self.lag:
            raise ValueError(f"lag {self.lag} needs an ensemble longer than the lag (n_frames = {self.shape[0]})")
        if np.ndim(average) == 0:
            average = (average, average)
        if len(average) != 2:
            raise ValueError(f"average must be an int or a pair (Mz, Mx) (got {average!r})")
        self.average = tuple(_validate.integer("average", m, minimum=1, maximum=129) for m in average)
        self.window = _validate.choice("window", window, ("hamming", "boxcar"))
        self.axial_correction = bool(axial_correction)
        self.dz = _validate.positive("dz", dz) if axial_correction else 0.0
        self.backend = check_backend(backend)
        self.spatial = self.shape[1:]
        n_images, nz, nx = _image_layout(self.spatial)
        if self.axial_correction and nz < 2:
            raise ValueError("axial_correction needs at least 2 rows (z) per image")
        _validate.check_allocation("iq", self.shape, 8)
        self._plan = _core.color_plan(self.shape[0], n_images, nz, nx, self.fc, self.prf, c=self.c, lag=self.lag,
                                      window_z=self.average[0], window_x=self.average[1], window=window,
                                      axial_correction=self.axial_correction, dz=self.dz, backend=backend)
        self.cuda = None
        if self.backend == "cuda":
            self.cuda = device.CudaExecution(_core.color_cuda_exec(self._plan))  # stream, stage_times()
            self._strict = bool(strict)

    @property
    def nyquist_velocity(self):
        """c*prf/(4*fc*lag), m/s: velocities beyond it alias."""
        return self.c * self.prf / (4.0 * self.fc * self.lag)

    def __call__(self, iq, *, velocity=None, variance=None, power=None, return_power=False):
        """(velocity, variance) in m/s and (m/s)^2, float32 with the spatial shape; with
        ``return_power=True`` also the mean power over the ensemble (before averaging)."""
        if self.cuda is not None:
            return self._call_cuda(iq, velocity, variance, power, return_power or power is not None)
        given, iq = iq, _as_complex64("iq", iq, self.shape)
        outs, names = [], []
        for name, arr, wanted in (("velocity", velocity, True), ("variance", variance, True),
                                  ("power", power, return_power or power is not None)):
            if not wanted:
                outs.append(None)
            elif arr is None:
                outs.append(np.empty(self.spatial, np.float32))
            else:
                outs.append(_validate.out_array(name, arr, self.spatial, np.float32))
                _validate.no_overlap(name, arr, "iq", given, iq)
                for other, earlier in zip(names, outs):
                    _validate.no_overlap(name, arr, other, earlier)
            names.append(name)
        _core.color_execute(self._plan, iq, outs[0], outs[1], outs[2])
        return tuple(outs) if (return_power or power is not None) else (outs[0], outs[1])

    def _call_cuda(self, iq, velocity, variance, power, with_power):
        """The CUDA path: the input imported without a copy (or copied in), one device output
        per estimate (the caller's device arrays, or new ones), nothing synchronised unless a
        host array has to be filled."""
        stream, device_name = self.cuda.stream, f"cuda:{self.cuda.device}"
        d_iq, host_input = device.ingest(iq, "iq", stream=stream, device=device_name, dtype=np.complex64,
                                         shape=self.shape, strict=self._strict,
                                         host_prepare=lambda x: _as_complex64("iq", x, self.shape))
        device_outs, host_targets = [], []
        for name, arr, wanted in (("velocity", velocity, True), ("variance", variance, True),
                                  ("power", power, with_power)):
            d, target = (device.output_buffer(arr, name, stream=stream, device=device_name, dtype=np.float32,
                                              shape=self.spatial, strict=self._strict)
                         if wanted else (None, None))
            device_outs.append(d)
            host_targets.append(target)
        _core.color_execute(self._plan, d_iq, *device_outs)
        for d in (d_iq, *device_outs):
            if d is not None:
                device.mark_used(d, stream, self.cuda)
        results = []
        for given, d, target in zip((velocity, variance, power), device_outs, host_targets):
            if d is None:
                results.append(None)
            elif target is not None:
                results.append(d.to_numpy(out=target))
            elif given is None and host_input:
                results.append(d.to_numpy())
            else:
                results.append(d if given is None else given)
        return tuple(results) if with_power else (results[0], results[1])


def color_doppler(iq, *, fc, prf, c, lag=1, average=1, window="hamming", axial_correction=False, dz=None):
    """Color Doppler of an ensemble ``iq`` (complex, ``(n_frames, *spatial)``, clutter-filtered).

    Returns ``(velocity, variance)``, float32 with the spatial shape (see
    :class:`ColorDopplerPlan`); matches PyMUST ``iq2doppler(IQ, param, M, lag)`` with PyMUST's
    IQ laid out as ``(nz, nx, n_frames)``.
    """
    iq = _ensemble("iq", iq)
    return ColorDopplerPlan(iq.shape, fc=fc, prf=prf, c=c, lag=lag, average=average, window=window,
                            axial_correction=axial_correction, dz=dz)(iq)


class PowerDopplerPlan:
    """Power Doppler: mean |IQ|^2 over the ensemble per pixel (apply after the clutter filter).

    Parameters
    ----------
    shape : tuple
        ``(n_frames, *spatial)``.
    db : bool
        False: linear power.  True: 10*log10(P / reference) in dB.
    reference : float or None
        dB reference power (> 0); None: the maximum of each call.
    noise_floor : float
        Linear power (>= 0) below which P is raised to it, so noise does not reach -inf dB.
    backend : {'cpu', 'cuda'}
        'cuda': on the GPU (cuda/doppler.cu), device arrays in and out without copies (as
        :class:`ColorDopplerPlan`); ``strict=True`` refuses host arrays.
    """

    def __init__(self, shape, *, db=False, reference=None, noise_floor=0.0, backend="cpu", strict=False):
        self.shape = _shape("shape", shape, 2)
        self.db = bool(db)
        self.reference = 0.0 if reference is None else _validate.positive("reference", reference)
        self.noise_floor = _validate.nonnegative("noise_floor", noise_floor)
        self.backend = check_backend(backend)
        self.spatial = self.shape[1:]
        _validate.check_allocation("iq", self.shape, 8)
        n_pixels = int(np.prod(self.spatial, dtype=np.int64))
        self._plan = _core.power_plan(self.shape[0], n_pixels, output_db=self.db, reference=self.reference,
                                      noise_floor=self.noise_floor, backend=backend)
        self.cuda = None
        if self.backend == "cuda":
            self._runner = device.PlanRunner(_core.power_cuda_exec(self._plan), strict)
            self.cuda = self._runner.execution  # stream, stage_times(), set_stream()

    def __call__(self, iq, out=None):
        if self.cuda is not None:
            return self._runner(lambda i, o: _core.power_execute(self._plan, i, o), "iq", iq, self.shape,
                                np.complex64, lambda x: _as_complex64("iq", x, self.shape), out, self.spatial,
                                np.float32)
        given, iq = iq, _as_complex64("iq", iq, self.shape)
        if out is None:
            out = np.empty(self.spatial, np.float32)
        else:
            _validate.out_array("out", out, self.spatial, np.float32)
            _validate.no_overlap("out", out, "iq", given, iq)
        _core.power_execute(self._plan, iq, out)
        return out


def power_doppler(iq, *, db=False, reference=None, noise_floor=0.0):
    """Power Doppler of a (clutter-filtered) ensemble ``iq``: float32 with the spatial shape."""
    iq = _ensemble("iq", iq, min_frames=1)
    return PowerDopplerPlan(iq.shape, db=db, reference=reference, noise_floor=noise_floor)(iq)


class DopplerDisplay:
    """Display post-processing of successive Doppler images: 3x3 median, persistence, masks.

    Parameters
    ----------
    shape : tuple
        ``(nz, nx)`` or ``(n_images, nz, nx)``: the images of one call, in time order.
    median : bool
        3x3 median of velocity and power (edges replicated).
    persistence : float
        In [0, 1): ``out = persistence * previous + (1 - persistence) * current``, carried
        across calls until ``reset()``.
    power_threshold : float or None
        Pixels whose (filtered) power is below it are hidden (same unit as the power given).
    velocity_threshold : float
        Pixels with |v| below it (m/s) are hidden.
    backend : {'cpu', 'cuda'}
        'cuda': the plan runs on the GPU (cuda/doppler_display.cu, the same results bit for bit)
        with its persistence history on the device; it takes device arrays
        (usbeam.DeviceArray or any CUDA DLPack / CUDA-array-interface array) without a copy and
        returns DeviceArrays queued on ``plan.cuda.stream``; NumPy input is checked and copied
        in as on the CPU and the results copied out.  Non-finite device input is reported as
        ValueError once the work has finished (usbeam.device.CudaExecution.check_input): at
        the host copy of a result, ``plan.cuda.synchronize()`` or the plan's next call.
    strict : bool
        With backend='cuda', refuse NumPy (host) arrays instead of copying them (TypeError).
    """

    def __init__(self, shape, *, median=True, persistence=0.0, power_threshold=None, velocity_threshold=0.0,
                 backend="cpu", strict=False):
        self.shape = _shape("shape", shape, 2)
        if len(self.shape) > 3:
            raise ValueError(f"shape must be (nz, nx) or (n_images, nz, nx) (got {self.shape})")
        n_images = self.shape[0] if len(self.shape) == 3 else 1
        self.persistence = _validate.nonnegative("persistence", persistence)
        if self.persistence >= 1:
            raise ValueError(f"persistence must be < 1 (got {self.persistence})")
        self.power_threshold = (None if power_threshold is None
                                else _validate.real_scalar("power_threshold", power_threshold))
        self.velocity_threshold = _validate.nonnegative("velocity_threshold", velocity_threshold)
        self.backend = check_backend(backend)
        threshold = _NO_POWER_THRESHOLD if self.power_threshold is None else self.power_threshold
        self._plan = _core.doppler_display_plan(n_images, self.shape[-2], self.shape[-1], median=bool(median),
                                                persistence=self.persistence, power_threshold=threshold,
                                                velocity_threshold=self.velocity_threshold, backend=backend)
        self.cuda = None
        self._strict = bool(strict)
        if self.backend == "cuda":
            self.cuda = device.CudaExecution(_core.doppler_display_cuda_exec(self._plan))  # stream, stage_times()
            self.cuda.input_name = "velocity or power"

    def _input(self, name, value):
        if value is None:
            return None
        value = _validate.ndarray(name, value)
        if not np.isrealobj(value) or value.dtype.kind not in "fiu":
            raise TypeError(f"{name} must be a real array (got dtype {value.dtype})")
        if value.shape != self.shape:
            raise ValueError(f"{name} must have shape {self.shape} (got {value.shape})")
        value = np.ascontiguousarray(value, dtype=np.float32)
        if not np.all(np.isfinite(value)):
            raise ValueError(f"{name} must contain only finite values")
        return value

    def __call__(self, velocity=None, power=None, *, out_velocity=None, out_power=None, mask=None):
        """Returns (velocity, power, mask): velocity 0 where hidden, mask uint8 (1 = shown);
        an input left as None gives None for its output.  ``out_velocity``, ``out_power`` and
        ``mask`` are optional caller buffers (float32, float32, uint8, the plan's shape; an
        output must not share memory with an input), returned when given.  On CUDA the new
        outputs are DeviceArrays unless an input was a host array; caller buffers may be
        DeviceArrays or (unless strict) host arrays, filled by a copy."""
        for out_name, out, in_name, value in (("out_velocity", out_velocity, "velocity", velocity),
                                              ("out_power", out_power, "power", power)):
            if out is not None and value is None:
                raise ValueError(f"{out_name} is given without {in_name}")
        if self.cuda is not None:
            return self._call_cuda(velocity, power, (out_velocity, out_power, mask))
        originals = {"velocity": velocity, "power": power}
        velocity = self._input("velocity", velocity)
        power = self._input("power", power)
        if velocity is None and power is None:
            raise ValueError("velocity and power: give at least one")
        outs, names = [], []
        for name, out, given, dtype in (("out_velocity", out_velocity, velocity is not None, np.float32),
                                        ("out_power", out_power, power is not None, np.float32),
                                        ("mask", mask, True, np.uint8)):
            if not given:
                outs.append(None)
            elif out is None:
                outs.append(np.empty(self.shape, dtype))
            else:
                _validate.out_array(name, out, self.shape, dtype)
                _validate.no_overlap(name, out, "velocity", originals["velocity"], velocity)
                _validate.no_overlap(name, out, "power", originals["power"], power)
                for other, earlier in zip(names, outs):
                    _validate.no_overlap(name, out, other, earlier)
                outs.append(out)
            names.append(name)
        _core.doppler_display_execute(self._plan, velocity, power, *outs)
        return tuple(outs)

    def _call_cuda(self, velocity, power, given):
        """The CUDA path: device inputs imported without a copy, host inputs validated as on the
        CPU and copied in (unless strict); the caller's device outputs or new ones; nothing
        synchronised unless a host input or a host output asks for host results."""
        self.cuda.check_input(earlier=True)
        stream, device_name = self.cuda.stream, f"cuda:{self.cuda.device}"
        host_input = False
        inputs = []
        for name, value in (("velocity", velocity), ("power", power)):
            if value is None:
                inputs.append(None)
                continue
            d, from_host = device.ingest(value, name, stream=stream, device=device_name, dtype=np.float32,
                                         shape=self.shape, strict=self._strict,
                                         host_prepare=lambda v, name=name: self._input(name, v))
            inputs.append(d)
            host_input = host_input or from_host
        if inputs[0] is None and inputs[1] is None:
            raise ValueError("velocity and power: give at least one")
        outs, host_targets = [], []
        for name, out, wanted, dtype in (("out_velocity", given[0], inputs[0] is not None, np.float32),
                                         ("out_power", given[1], inputs[1] is not None, np.float32),
                                         ("mask", given[2], True, np.uint8)):
            d, target = (device.output_buffer(out, name, stream=stream, device=device_name, dtype=dtype,
                                              shape=self.shape, strict=self._strict)
                         if wanted else (None, None))
            # one thread's output pixel is its neighbours' median input: no aliasing (a new
            # buffer never overlaps; a caller's device buffer may)
            if d is not None and any(x is not None and x.ptr < d.ptr + d.nbytes and d.ptr < x.ptr + x.nbytes
                                     for x in inputs):
                raise ValueError(f"{name} must not share memory with velocity or power")
            outs.append(d)
            host_targets.append(target)
        _core.doppler_display_execute(self._plan, inputs[0], inputs[1], *outs)
        for d in (*inputs, *outs):
            if d is not None:
                device.mark_used(d, stream, self.cuda)
        results, copied = [], False
        for out, d, target in zip(given, outs, host_targets):
            if d is None:
                results.append(None)
            elif target is not None:
                results.append(d.to_numpy(out=target))
                copied = True
            elif out is None and host_input:
                results.append(d.to_numpy())
                copied = True
            else:
                results.append(d if out is None else out)
        if copied:  # a host copy waited for the kernel: report its non-finite input now
            self.cuda.check_input()
        return tuple(results)

    def reset(self):
        """Forget the persistence history."""
        _core.doppler_display_reset(self._plan)


def nyquist_velocity(*, fc, prf, c, lag=1):
    """c*prf/(4*fc*lag) in m/s."""
    return _validate.positive("c", c) * _validate.positive("prf", prf) / (
        4.0 * _validate.positive("fc", fc) * _validate.integer("lag", lag, minimum=1))


__all__ = ["ClutterFilter", "clutter_filter", "ColorDopplerPlan", "color_doppler", "PowerDopplerPlan",
           "power_doppler", "DopplerDisplay", "nyquist_velocity"]
