"""Doppler imaging after the clutter filter (usbeam.clutter): color Doppler (Kasai), power
Doppler and display post-processing.  C kernels: csrc/doppler/doppler.c,
csrc/doppler/doppler_display.c; CUDA twins cuda/doppler.cu, cuda/doppler_display.cu.

Input is an ensemble of beamformed (clutter-filtered) IQ frames, complex, shaped
``(n_frames, *spatial)`` with slow time on the leading axis, e.g. ``(n_frames, nz, nx)``.
Outputs have the spatial shape: velocity in m/s, variance in (m/s)^2, power linear or in dB.

Conventions (as PyMUST ``iq2doppler``): ``R(k) = sum_t x[t] conj(x[t+k])``,
``v = -VN * angle(R(k)) / pi`` with the Nyquist velocity ``VN = c*prf/(4*fc*k)``, so a
positive velocity is a positive Doppler shift (motion toward the probe with the IQ
convention of README.md); variance ``2*(VN/pi)**2 * (1 - |R(k)|/R(0))``.
"""
import numpy as np

from . import _core, _validate, device
from ._backend import check_backend
from .clutter import ClutterFilter, clutter_filter  # noqa: F401  (here before usbeam.clutter; kept importable)

_NO_POWER_THRESHOLD = -float(np.finfo(np.float32).max)


def _image_layout(spatial):
    """(n_images, nz, nx) of a spatial shape: the last two axes are the image, a 1-D shape is a column."""
    if len(spatial) == 1:
        return 1, spatial[0], 1
    return int(np.prod(spatial[:-2], dtype=np.int64)), spatial[-2], spatial[-1]


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
        self.shape = _validate.plan_shape("shape", shape, 2)
        self.fc = _validate.frequency("fc", fc)
        self.prf = _validate.pulse_repetition_frequency("prf", prf)
        self.c = _validate.speed_of_sound("c", c)
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
        if self.axial_correction and dz is None:
            raise TypeError("dz: axial_correction=True needs dz, the axial pixel spacing in m")
        self.dz = _validate.pixel_spacing("dz", dz) if axial_correction else 0.0
        self.backend = check_backend(backend)
        self.spatial = self.shape[1:]
        n_images, nz, nx = _image_layout(self.spatial)
        if self.axial_correction and nz < 2:
            raise ValueError("axial_correction needs at least 2 rows (z) per image")
        _validate.check_allocation("iq", self.shape, 8)
        self._plan = _core.color_plan(self.shape[0], n_images, nz, nx, self.fc, self.prf, c=self.c, lag=self.lag,
                                      window_z=self.average[0], window_x=self.average[1], window=window,
                                      axial_correction=self.axial_correction, dz=self.dz, backend=self.backend)
        self.cuda = None
        if self.backend == "cuda":
            self.cuda = device.CudaExecution(_core.color_cuda_exec(self._plan))  # stream, stage_times()
            self._strict = bool(strict)

    def __repr__(self):
        from ._repr import attrs_repr

        return attrs_repr(self, ('shape', 'fc', 'prf', 'c', 'lag', 'average', 'window', 'backend'))

    @property
    def nyquist_velocity(self):
        """c*prf/(4*fc*lag), m/s: velocities beyond it alias."""
        return self.c * self.prf / (4.0 * self.fc * self.lag)

    def __call__(self, iq, *, velocity=None, variance=None, power=None, return_power=False):
        """(velocity, variance) in m/s and (m/s)^2, float32 with the spatial shape; with
        ``return_power=True`` also the mean power over the ensemble (before averaging)."""
        if self.cuda is not None:
            return self._call_cuda(iq, velocity, variance, power, return_power or power is not None)
        given, iq = iq, _validate.complex64("iq", iq, self.shape)
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
                                         host_prepare=lambda x: _validate.complex64("iq", x, self.shape))
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
    iq = _validate.ensemble("iq", iq)
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
        self.shape = _validate.plan_shape("shape", shape, 2)
        self.db = bool(db)
        self.reference = 0.0 if reference is None else _validate.positive("reference", reference)
        self.noise_floor = _validate.nonnegative("noise_floor", noise_floor)
        self.backend = check_backend(backend)
        self.spatial = self.shape[1:]
        _validate.check_allocation("iq", self.shape, 8)
        n_pixels = int(np.prod(self.spatial, dtype=np.int64))
        self._plan = _core.power_plan(self.shape[0], n_pixels, output_db=self.db, reference=self.reference,
                                      noise_floor=self.noise_floor, backend=self.backend)
        self.cuda = None
        if self.backend == "cuda":
            self._runner = device.PlanRunner(_core.power_cuda_exec(self._plan), strict)
            self.cuda = self._runner.execution  # stream, stage_times(), set_stream()

    def __repr__(self):
        from ._repr import attrs_repr

        return attrs_repr(self, ('shape', 'db', 'noise_floor', 'backend'))

    def __call__(self, iq, out=None):
        if self.cuda is not None:
            return self._runner(lambda i, o: _core.power_execute(self._plan, i, o), "iq", iq, self.shape,
                                np.complex64, lambda x: _validate.complex64("iq", x, self.shape), out, self.spatial,
                                np.float32)
        given, iq = iq, _validate.complex64("iq", iq, self.shape)
        if out is None:
            out = np.empty(self.spatial, np.float32)
        else:
            _validate.out_array("out", out, self.spatial, np.float32)
            _validate.no_overlap("out", out, "iq", given, iq)
        _core.power_execute(self._plan, iq, out)
        return out


def power_doppler(iq, *, db=False, reference=None, noise_floor=0.0):
    """Power Doppler of a (clutter-filtered) ensemble ``iq``: float32 with the spatial shape."""
    iq = _validate.ensemble("iq", iq, min_frames=1)
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
        self.shape = _validate.plan_shape("shape", shape, 2)
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
                                                velocity_threshold=self.velocity_threshold, backend=self.backend)
        self.cuda = None
        self._strict = bool(strict)
        if self.backend == "cuda":
            self.cuda = device.CudaExecution(_core.doppler_display_cuda_exec(self._plan))  # stream, stage_times()
            self.cuda.input_name = "velocity or power"

    def __repr__(self):
        from ._repr import attrs_repr

        return attrs_repr(self, ('shape', 'persistence', 'power_threshold', 'velocity_threshold', 'backend'))

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
    return _validate.speed_of_sound("c", c) * _validate.pulse_repetition_frequency("prf", prf) / (
        4.0 * _validate.frequency("fc", fc) * _validate.integer("lag", lag, minimum=1))


__all__ = ["ColorDopplerPlan", "color_doppler", "PowerDopplerPlan", "power_doppler", "DopplerDisplay",
           "nyquist_velocity"]
