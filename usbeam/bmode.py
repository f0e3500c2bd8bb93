"""B-mode display: envelope and log compression (C kernels: csrc/bmode/bmode.c, envelope.c).

uint8 output matches PyMUST ``bmode``: 255*(20*log10(|IQ|/max|IQ|) + DR)/DR clipped to
[0, 255] and truncated, the max taken over the whole array.  ``output='db'`` gives float32
decibels relative to the same reference, floored at -DR.

Real RF images (``das`` on RF, ``RCABeamformer(data='rf')``) have no phase: their envelope is
the magnitude of the analytic signal along depth, ``envelope(image, axis=-2)``, the one of
``scipy.signal.hilbert`` (whole-line DFT, computed as a circular convolution in double; equal
to scipy's to float32 rounding, edges included).  ``bmode`` takes such images directly and
compresses their analytic signal, so ``bmode(das(rf))`` and ``bmode(das(rf2iq(rf)))`` show the
same image.
"""
import numpy as np

from . import _core, _validate
from ._backend import check_backend
from .device import PlanRunner, empty


def _line_layout(shape, axis):
    """(n_outer, n_axis, n_inner) of a C-order array of ``shape`` whose lines run along axis."""
    if len(shape) == 0:
        raise ValueError("image must have at least one axis (got a scalar)")
    axis = _validate.integer("axis", axis)
    if not -len(shape) <= axis < len(shape):
        raise ValueError(f"axis {axis} is out of range for an image of shape {tuple(shape)} "
                         "(axis=-2 is depth of (..., nz, nx); use axis=-1 for single RF lines)")
    axis %= len(shape)
    return int(np.prod(shape[:axis])), int(shape[axis]), int(np.prod(shape[axis + 1:])), axis


def _host_real(name, image, shape):
    image = _validate.ndarray(name, image)
    if np.iscomplexobj(image):
        raise TypeError(f"{name} must be real RF (float32); complex IQ already has its envelope, abs(iq)")
    if image.dtype.kind not in "fiu" or image.dtype == np.bool_:
        raise TypeError(f"{name} must be real RF (float32), got dtype {image.dtype}")
    if image.shape != shape:
        raise ValueError(f"{name} must have shape {shape} (got {image.shape})")
    if image.dtype != np.float32 or not image.flags.c_contiguous:
        image = np.ascontiguousarray(image, dtype=np.float32)
    return image


class EnvelopePlan:
    """The envelope (or analytic signal) of real RF images of a fixed shape along one axis.

    Parameters
    ----------
    shape : tuple
        Shape of the float32 input, e.g. ``(n_frames, nz, nx)``.
    axis : int
        The axis the lines run along: -2 (default) is depth of images ``(..., nz, nx)``; -1 for
        RF lines ``(..., n_samples)``.
    output : {'magnitude', 'analytic'}
        'magnitude': float32 |x + j H x| (the envelope); 'analytic': complex64 x + j H x.
    backend : {'cpu', 'cuda'}
        'cuda': cuda/envelope.cu, device arrays in and out (NumPy copied unless ``strict``).

    The analytic signal is scipy.signal.hilbert's (one DFT period per line, so the first and
    last samples see the other end of the line, as there), applied as an exact circulant
    matrix: cost O(n_axis^2) per line (benchmarks/RESULTS.md: ~120 ms for (8, 600, 256) on one
    core, 5x scipy's FFT; 60x at 2000 samples per line), fine for images of a few hundred depth
    samples; deep RF lines are better demodulated (rf2iq).  Long calls stop on Ctrl-C.
    """

    def __init__(self, shape, axis=-2, *, output="magnitude", backend="cpu", strict=False):
        self.shape = _validate.shape("shape", shape)
        if len(self.shape) == 0 or any(s <= 0 for s in self.shape):
            raise ValueError(f"image shape must be non-empty (got {self.shape})")
        n_outer, n_axis, n_inner, self.axis = _line_layout(self.shape, axis)
        self.output = _validate.choice("output", output, ("magnitude", "analytic"))
        self.backend = check_backend(backend)
        self.out_dtype = np.dtype(np.float32 if output == "magnitude" else np.complex64)
        _validate.check_allocation("image", self.shape, self.out_dtype.itemsize)
        self._plan = _core.envelope_plan(n_outer, n_axis, n_inner, output=output, backend=backend)
        self.cuda = None
        if self.backend == "cuda":
            self._runner = PlanRunner(_core.envelope_cuda_exec(self._plan), strict)
            self.cuda = self._runner.execution  # stream, stage_times(), set_stream()

    def __repr__(self):
        return (f"EnvelopePlan(shape={self.shape}, axis={self.axis}, output={self.output!r}, "
                f"backend={self.backend!r})")

    def __call__(self, image, out=None):
        """Envelope of ``image`` (float32 RF of the plan's shape); NaN or inf: ValueError."""
        if self.cuda is not None:
            return self._runner(lambda i, o: _core.envelope_execute(self._plan, i, o), "image", image, self.shape,
                                np.float32, lambda x: _host_real("image", x, self.shape), out, self.shape,
                                self.out_dtype, no_overlap=True)
        given, image = image, _host_real("image", image, self.shape)
        if out is None:
            out = np.empty(self.shape, self.out_dtype)
        else:
            _validate.out_array("out", out, self.shape, self.out_dtype)
            _validate.no_overlap("out", out, "image", given, image)
        _core.envelope_execute(self._plan, image, out)
        return out


def envelope(image, axis=-2, *, output="magnitude", out=None):
    """Envelope of real RF ``image`` along ``axis`` (default -2, depth of ``(..., nz, nx)``):
    the magnitude of the analytic signal, as ``abs(scipy.signal.hilbert(image, axis=axis))``.
    ``output='analytic'`` returns the complex64 analytic signal instead."""
    image = _validate.ndarray("image", image)
    if image.size == 0:
        raise ValueError("image is empty")
    return EnvelopePlan(image.shape, axis, output=output)(image, out=out)


class BModePlan:
    """A B-mode plan for images of a fixed shape.

    Parameters
    ----------
    shape : tuple
        Shape of the complex64 input, e.g. ``(n_frames, nz, nx)``.
    dynamic_range : float
        Displayed dynamic range in dB (> 0).
    output : {'uint8', 'db'}
    normalize : {'global', 'frame'} or float
        'global': one reference, the max over the whole array (PyMUST).  'frame': each
        image along the leading axis has its own max.  A float: fixed amplitude reference
        (live display, so a frame does not depend on others).

    data : {'iq', 'rf'}
        'iq' (default): complex beamformed IQ.  'rf': real (float32) beamformed RF, whose
        analytic signal along ``axis`` (EnvelopePlan) is compressed: the B-mode of its envelope.
    axis : int
        With data='rf', the axis of depth (default -2: images ``(..., nz, nx)``).
    backend : {'cpu', 'cuda'}
        'cuda': the plan runs on the GPU (cuda/bmode.cu) and takes device arrays
        (usbeam.DeviceArray or any CUDA DLPack / CUDA-array-interface array) without a copy,
        returning a DeviceArray; NumPy input is copied in and the result out.
    strict : bool
        With backend='cuda', refuse NumPy (host) arrays instead of copying them (TypeError).
    """

    def __init__(self, shape, dynamic_range=40.0, *, output="uint8", normalize="global", data="iq", axis=-2,
                 backend="cpu", strict=False):
        self.shape = _validate.shape("shape", shape)
        if len(self.shape) == 0 or any(s <= 0 for s in self.shape):
            raise ValueError(f"image shape must be non-empty (got {self.shape})")
        self.data = _validate.choice("data", data, ("iq", "rf"))
        self._analytic = None
        if self.data == "rf":  # the analytic signal first, into a buffer of the plan
            self._analytic = EnvelopePlan(self.shape, axis, output="analytic", backend=backend, strict=strict)
        self.dynamic_range = _validate.positive("dynamic_range", dynamic_range)
        self.output = _validate.choice("output", output, ("uint8", "db"))
        self.backend = check_backend(backend)
        n_values = int(np.prod(self.shape))
        per_image, reference = 0, 0.0
        n_images = 1
        if isinstance(normalize, str):
            normalize = _validate.choice("normalize", normalize, ("global", "frame"))
            if normalize == "frame":
                per_image, n_images = 1, (self.shape[0] if len(self.shape) > 2 else 1)
        else:
            reference = _validate.positive("normalize", normalize)
        self.normalize = normalize
        self.out_dtype = np.dtype(np.uint8 if self.output == "uint8" else np.float32)
        self._plan = _core.bmode_plan(n_values, n_images, self.dynamic_range, output=self.output,
                                      per_image=per_image, reference=reference, backend=self.backend)
        self.cuda = None
        self._buffer = None
        if self.backend == "cuda":
            self._runner = PlanRunner(_core.bmode_cuda_exec(self._plan), strict)
            self.cuda = self._runner.execution  # stream, stage_times(), set_stream()
        if self.data == "rf":
            if self.cuda is None:
                self._buffer = np.empty(self.shape, np.complex64)
            else:
                self._buffer = empty(self.shape, np.complex64, device=f"cuda:{self.cuda.device}",
                                     stream=self.cuda.stream, _owner=self.cuda)

    def __repr__(self):
        from ._repr import attrs_repr

        return attrs_repr(self, ('shape', 'dynamic_range', 'output', 'normalize', 'backend'))

    def __call__(self, image, out=None):
        if self.cuda is not None:
            if self.data == "rf":
                return self._runner(self._run_rf_cuda, "image", image, self.shape, np.float32,
                                    lambda x: _host_real("image", x, self.shape), out, self.shape, self.out_dtype)
            return self._runner(lambda i, o: _core.bmode_execute(self._plan, i, o), "image", image, self.shape,
                                np.complex64, self._host_image, out, self.shape, self.out_dtype)
        if self.data == "rf":
            given, image = image, _host_real("image", image, self.shape)
        else:
            given, image = image, self._host_image(image)
        if out is None:
            out = np.empty(self.shape, self.out_dtype)
        else:
            _validate.out_array("out", out, self.shape, self.out_dtype)
            _validate.no_overlap("out", out, "image", given, image)
        if self.data == "rf":
            try:
                _core.envelope_execute(self._analytic._plan, image, self._buffer)
            except ValueError:  # NaN / inf: out as a refused B-mode leaves it (0, or NaN dB)
                out[...] = 0 if self.output == "uint8" else np.nan
                raise
            image = self._buffer
        _core.bmode_execute(self._plan, image, out)
        return out

    def _run_rf_cuda(self, d_in, d_out):
        # both plans queue on the B-mode plan's stream (whichever the caller set), so the
        # compression is ordered after the analytic signal it reads
        stream = self.cuda.stream
        if self._analytic.cuda.stream != stream:
            self._analytic.cuda.set_stream(stream)
        _core.envelope_execute(self._analytic._plan, d_in, self._buffer)
        _core.bmode_execute(self._plan, self._buffer, d_out)

    def _host_image(self, image):
        image = _validate.ndarray("image", image)
        if not np.iscomplexobj(image):
            raise TypeError(f"image must be complex (beamformed IQ), got dtype {image.dtype}; for real "
                            "beamformed RF make the plan with data='rf' (B-mode of its envelope)")
        if image.shape != self.shape:
            raise ValueError(f"image must have shape {self.shape} (got {image.shape})")
        if image.dtype != np.complex64 or not image.flags.c_contiguous:
            image = np.ascontiguousarray(image, dtype=np.complex64)
        return image


def bmode(image, dynamic_range=40.0, *, output="uint8", normalize="global", axis=-2, out=None):
    """Log-compressed B-mode of a beamformed ``image``, any shape: complex IQ, or real RF
    (float), whose envelope along ``axis`` (default -2, depth of ``(..., nz, nx)``) is taken
    first (``envelope``; data='rf' of BModePlan).

    Returns uint8 (PyMUST-compatible) or float32 dB (``output='db'``), same shape.
    """
    image = _validate.ndarray("image", image)
    if image.size == 0:
        raise ValueError("image is empty")
    if np.iscomplexobj(image):
        data = "iq"
    elif image.dtype.kind == "f":
        data = "rf"
    else:
        raise TypeError(f"image must be complex (beamformed IQ) or float (beamformed RF), got dtype {image.dtype}")
    return BModePlan(image.shape, dynamic_range, output=output, normalize=normalize, data=data,
                     axis=axis)(image, out=out)
