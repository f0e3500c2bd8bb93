"""Model input: image -> tensor in one pass (bilinear resize, normalisation, channels, NCHW/NHWC,
FP32/FP16), and FP16 <-> FP32 conversion bit-exact with NumPy.

C: csrc/ai/preprocess.c; CUDA: cuda/preprocess.cu (bit-identical to the CPU: the same float32
operation order).  Layouts: images ``(H, W)``, ``(N, H, W)`` or ``(N, H, W, C)`` with C = 1 or 3,
uint8 / float16 / float32; model inputs ``(N, C, H, W)`` or ``(N, H, W, C)``.  Units: pixels.
Resize: PyTorch ``F.interpolate(mode="bilinear")`` / OpenCV ``INTER_LINEAR``, no antialiasing.
"""
import numbers
import threading

import numpy as np

from .. import _core, _validate
from .. import device as _device
from .._backend import check_backend
from ._common import (check_out, check_view, contiguous, device_argument, device_view, host_array, is_device_array,
                      mark_used, plan_call, refuse_aliasing, require_device, stream_handle)

_IMAGE_DTYPES = (np.dtype(np.uint8), np.dtype(np.float16), np.dtype(np.float32))
_MODEL_DTYPES = {"float32": np.dtype(np.float32), "float16": np.dtype(np.float16)}


def _image_geometry(shape):
    """(n_images, height, width, channels) of an image shape (H, W), (N, H, W) or (N, H, W, C)."""
    shape = _validate.shape("image_shape", shape)
    if len(shape) == 2:
        geometry = (1, shape[0], shape[1], 1)
    elif len(shape) == 3:
        geometry = (shape[0], shape[1], shape[2], 1)
    elif len(shape) == 4:
        geometry = shape
    else:
        raise ValueError(f"image must be (H, W), (N, H, W) or (N, H, W, C) (got shape {shape})")
    if any(s <= 0 for s in geometry):
        raise ValueError(f"image is empty (shape {shape})")
    if geometry[3] not in (1, 3):
        raise ValueError(f"image must have 1 or 3 channels in its last axis (got {geometry[3]})")
    return geometry


def _per_channel(name, value, channels):
    values = np.atleast_1d(_validate.finite_array(name, value))
    if values.ndim != 1 or values.size not in (1, channels):
        raise ValueError(f"{name} must be a scalar or {channels} values (got {np.shape(value)})")
    return np.broadcast_to(values, (channels,)).astype(np.float64)


def _size_pair(size):
    if isinstance(size, (numbers.Integral, np.integer)) and not isinstance(size, (bool, np.bool_)):
        size = (size, size)
    if not isinstance(size, (tuple, list)) or len(size) != 2:
        raise TypeError(f"size must be an int or (height, width) (got {size!r})")
    return tuple(_validate.integer("size", s, minimum=1, maximum=2**31 - 1) for s in size)


class ModelInputPlan:
    """Image -> model input: bilinear resize, normalisation, channels, layout and dtype in one kernel.

    ``value = (pixel * scale + offset - mean) / std`` per output channel, with ``pixel`` the
    bilinearly interpolated input grey level (uint8 0..255 or float) and ``scale`` 1/255 for
    uint8 images and 1 otherwise unless given.

    Parameters
    ----------
    image_shape : tuple
        ``(H, W)``, ``(N, H, W)`` or ``(N, H, W, C)`` with C = 1 or 3.
    size : int or (height, width)
        The model input size.
    image_dtype : uint8, float16 or float32
    channels : 1 or 3, optional
        Output channels (default: the input's); 3 from a grey input repeats it.
    layout : {'nchw', 'nhwc'}
    dtype : {'float32', 'float16'}
    align_corners : bool
    backend : {'cpu', 'cuda'}
        'cuda': the plan runs cuda/preprocess.cu and takes device arrays only (any CUDA DLPack
        producer or ``__cuda_array_interface__`` object, no copy), with ``out`` required;
        ``plan.cuda`` is its :class:`usbeam.device.CudaExecution` (``stage_times()``: the
        "preprocess.resize" stage; ``set_stream``; ``synchronize`` / ``check_input``: a NaN or
        inf pixel the resize read, from float16/float32 images, raises ValueError there or at
        the plan's next call, where the CPU refuses the image at once).

    Calls take ``stream=`` on a CUDA plan: the call queues there; without it, on the stream
    given to ``plan.cuda.set_stream`` if any, else on the legacy default stream.  The plan's
    calls are ordered one after the other whatever their streams.
    """

    def __init__(self, image_shape, size, *, image_dtype=np.uint8, channels=None, layout="nchw",
                 dtype="float32", scale=None, offset=0.0, mean=0.0, std=1.0, align_corners=False,
                 backend="cpu"):
        n, h, w, c = _image_geometry(image_shape)
        self.image_shape = _validate.shape("image_shape", image_shape)
        self.image_dtype = np.dtype(image_dtype)
        if self.image_dtype not in _IMAGE_DTYPES:
            raise TypeError(f"image must be uint8, float16 or float32 (got {self.image_dtype})")
        out_h, out_w = _size_pair(size)
        channels = c if channels is None else _validate.integer("channels", channels)
        _validate.choice("channels", channels, (1, 3))
        if c == 3 and channels == 1:
            raise ValueError("channels: a 3-channel image needs channels=3 (no colour conversion)")
        self.layout = _validate.choice("layout", layout, ("nchw", "nhwc"))
        self.dtype = _MODEL_DTYPES.get(str(np.dtype(dtype)) if not isinstance(dtype, str) else dtype.lower())
        if self.dtype is None:
            raise TypeError(f"dtype must be 'float32' or 'float16' (got {dtype!r})")
        if scale is None:
            scale = 1.0 / 255.0 if self.image_dtype == np.uint8 else 1.0
        scale = _per_channel("scale", scale, channels)
        offset = _per_channel("offset", offset, channels)
        mean = _per_channel("mean", mean, channels)
        std = _per_channel("std", std, channels)
        if np.any(std <= 0):
            raise ValueError(f"std must be > 0 (got {std.tolist()})")
        a, b = scale / std, (offset - mean) / std
        self.backend = check_backend(backend)
        self.shape = (n, channels, out_h, out_w) if self.layout == "nchw" else (n, out_h, out_w, channels)
        _validate.check_allocation("model input", self.shape, self.dtype.itemsize)
        pad = lambda v: tuple(float(x) for x in np.resize(v, 3))  # noqa: E731
        self._plan = _core.preprocess_plan(n, h, w, c, self.image_dtype.name, out_h, out_w, channels,
                                           self.layout, self.dtype.name, bool(align_corners), pad(a), pad(b),
                                           backend=self.backend)
        self.cuda = None
        if self.backend == "cuda":
            # device arrays only (strict): a host image is refused before the runner sees it
            self._runner = _device.PlanRunner(_core.preprocess_cuda_exec(self._plan), strict=True)
            self.cuda = self._runner.execution  # stream, stage_times(), set_stream(), check_input()
            self._own_stream = self.cuda.stream
            self._lock = threading.Lock()

    def __repr__(self):
        from .._repr import attrs_repr

        return attrs_repr(self, ('image_shape', 'image_dtype', 'shape', 'layout', 'dtype', 'backend'))

    def __call__(self, image, out=None, *, stream=None):
        """The model input for ``image``; written into ``out`` (e.g. a bound model input) when given."""
        if self.cuda is not None:
            if out is None:
                raise ValueError("out is required on a CUDA plan (a device array, e.g. the model's bound input)")
            require_device("image", image)
            require_device("out", out)
            with plan_call(self.cuda, self._own_stream, self._lock, stream) as back:
                return self._runner(lambda i, o: _core.preprocess_execute(self._plan, i, o, back), "image", image,
                                    self.image_shape, self.image_dtype, None, out, self.shape, self.dtype,
                                    no_overlap=True)
        given = image = host_array("image", image)
        if image.dtype != self.image_dtype:
            raise TypeError(f"image must have dtype {self.image_dtype} (got {image.dtype})")
        if image.shape != self.image_shape:
            raise ValueError(f"image must have shape {self.image_shape} (got {image.shape})")
        image = np.ascontiguousarray(image)
        out = check_out("out", out, self.shape, self.dtype, (("image", given), ("image", image)))
        _core.preprocess_execute(self._plan, image, out)
        return out


def model_input(image, size, *, channels=None, layout="nchw", dtype="float32", scale=None, offset=0.0,
                mean=0.0, std=1.0, align_corners=False, out=None):
    """One image or a batch (uint8 B-mode or float) as a model input tensor (4-D, NCHW or NHWC).

    See :class:`ModelInputPlan`.  Float64 images are accepted and read as float32.
    """
    image = host_array("image", image)
    if image.dtype == np.float64:
        image = image.astype(np.float32)
    if image.dtype == np.bool_:
        image = image.astype(np.uint8)
    plan = ModelInputPlan(image.shape, size, image_dtype=image.dtype, channels=channels, layout=layout,
                          dtype=dtype, scale=scale, offset=offset, mean=mean, std=std,
                          align_corners=align_corners)
    return plan(image, out=out)


def _convert_device(x, out, to_dtype, stream):
    """x converted on the GPU into out, queued on ``stream`` (plan-less: the stream is the call's)."""
    if out is None:
        raise ValueError("out is required for a device array x (a device array of the same shape)")
    check_backend("cuda")
    handle = stream_handle(stream)
    d_x = device_view("x", x, handle)
    shape = tuple(d_x.shape)
    check_view("x", d_x, shape, np.float32 if to_dtype == np.float16 else np.float16)
    d_out = device_argument("out", out, handle, shape, to_dtype, writable=True)
    refuse_aliasing([("x", d_x, False), ("out", d_out, True)])
    _core.convert_device(np.dtype(to_dtype).name, d_x.ptr, d_out.ptr, int(np.prod(shape)), handle)
    mark_used((d_x, d_out), handle)
    return out


def float32_to_float16(x, out=None, *, stream=None):
    """float32 -> float16, round to nearest even, bit-exact with ``x.astype(np.float16)``: as
    there (IEEE 754), a value beyond float16's range (|x| > 65504) becomes +-inf, so scale
    data such as raw RF before converting (``model_input``'s scale, mean and std do).

    A device array ``x`` (DLPack or ``__cuda_array_interface__``) is converted on the GPU into ``out``."""
    if is_device_array(x):
        return _convert_device(x, out, np.float16, stream)
    given = x = host_array("x", x)
    if x.dtype != np.float32:
        raise TypeError(f"x must have dtype float32 (got {x.dtype})")
    x = contiguous(x)
    out = check_out("out", out, x.shape, np.float16, (("x", given), ("x", x)))
    _core.float32_to_float16(x, out)
    return out


def float16_to_float32(x, out=None, *, stream=None):
    """float16 -> float32 (exact), bit-exact with ``x.astype(np.float32)``; device arrays as above."""
    if is_device_array(x):
        return _convert_device(x, out, np.float32, stream)
    given = x = host_array("x", x)
    if x.dtype != np.float16:
        raise TypeError(f"x must have dtype float16 (got {x.dtype})")
    x = contiguous(x)
    out = check_out("out", out, x.shape, np.float32, (("x", given), ("x", x)))
    _core.float16_to_float32(x, out)
    return out
