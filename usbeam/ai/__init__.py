"""AI model hand-off: model input pre-processing, FP16 conversion, detection and segmentation
post-processing (C kernels: csrc/preprocess.c, detect.c, segment.c; CUDA: cuda/*.cu).

Every function takes NumPy arrays, or any host DLPack producer (a CPU torch tensor, a JAX
array), viewed without a copy.  With ``backend='cuda'`` (and in the device paths of the
one-shot functions) they take device arrays without copying: any DLPack producer on a CUDA
device (PyTorch, CuPy, JAX, a ``usbeam.DeviceArray``) or anything with
``__cuda_array_interface__`` (Numba), imported through :func:`usbeam.device.asarray`, with
caller-provided outputs, queued on ``stream`` (an integer ``cudaStream_t``, or an object with
``cuda_stream`` or ``ptr``) and never synchronising the host.  The import orders the
producer's pending writes before ``stream`` (DLPack's stream argument, the CUDA array
interface's v3 stream, a ``DeviceArray``'s pending stream), with an event, not a host wait;
the ``DeviceArray`` arguments then carry ``stream`` as a plan's outputs carry the plan's, so
``to_numpy()`` and later consumers wait for the queued work.  Device masks are bool
(``torch.bool``) or uint8; no output may share memory with another argument.

Conventions (the C file headers give the detail and the references):

* images are ``(H, W)``, ``(N, H, W)`` or ``(N, H, W, C)``; model inputs are NCHW or NHWC;
* bilinear resize, ``align_corners=False``: pixel centres at ``i + 0.5`` (PyTorch
  ``F.interpolate(..., align_corners=False)``, OpenCV ``INTER_LINEAR``, no antialiasing);
  ``align_corners=True``: the corner pixel centres coincide;
* detection rows are ``[x1, y1, x2, y2, score, class]``, NMS as ``torchvision.ops.nms``,
  class-aware by ``batched_nms``'s coordinate offset;
* components are numbered as ``scipy.ndimage.label`` numbers them.
"""
import numbers

import numpy as np

from . import _core, _validate
from . import device as _device
from ._backend import check_backend
from .device import KDLCUDA, KDLCUDAMANAGED, DeviceArray

_IMAGE_DTYPES = (np.dtype(np.uint8), np.dtype(np.float16), np.dtype(np.float32))
_MODEL_DTYPES = {"float32": np.dtype(np.float32), "float16": np.dtype(np.float16)}


# ---------------------------------------------------------------- device arrays

def _is_device_array(obj):
    """True for an array in CUDA memory: a CUDA DeviceArray, a DLPack producer whose
    ``__dlpack_device__`` is a CUDA device, or anything with ``__cuda_array_interface__``."""
    if isinstance(obj, np.ndarray):
        return False
    if isinstance(obj, DeviceArray):
        return obj.device != "cpu"
    if hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__"):
        try:
            device_type = int(obj.__dlpack_device__()[0])
        except Exception:  # a producer that cannot say where it lives is not taken as a device array
            return False
        return device_type in (KDLCUDA, KDLCUDAMANAGED)
    return hasattr(obj, "__cuda_array_interface__")


def _host_array(name, value):
    """A host argument as an ndarray without copying: NumPy, array-likes, or a host DLPack
    producer (``numpy.from_dlpack`` views its memory)."""
    if not isinstance(value, np.ndarray) and hasattr(value, "__dlpack__") and hasattr(value, "__dlpack_device__"):
        try:
            return np.from_dlpack(value)
        except (BufferError, TypeError, ValueError, RuntimeError) as exc:
            raise TypeError(f"{name}: cannot view this DLPack producer on the host ({exc})") from None
    return _validate.ndarray(name, value)


def _stream_handle(stream):
    """An integer cudaStream_t from an int, a CuPy stream (.ptr) or a PyTorch stream (.cuda_stream)."""
    if stream is None:
        return 0
    for attribute in ("cuda_stream", "ptr"):
        if hasattr(stream, attribute):
            stream = getattr(stream, attribute)
            break
    if isinstance(stream, (bool, np.bool_)) or not isinstance(stream, numbers.Integral) or stream < 0:
        raise TypeError(f"stream must be a cudaStream_t as int, or a CuPy / PyTorch stream (got {stream!r})")
    return int(stream)


def _device_view(name, obj, stream=None):
    """A DeviceArray viewing a device argument without copying (DLPack first, then the CUDA array
    interface), with the producer's pending writes ordered before the consumer ``stream``
    (a ``cudaStream_t`` handle, 0 = the legacy default stream)."""
    if not _is_device_array(obj):
        raise TypeError(f"{name} must be a device array (a DLPack producer on a CUDA device, or an object "
                        f"with __cuda_array_interface__) on a CUDA plan (got {type(obj).__name__})")
    handle = _stream_handle(stream)
    # array API convention for the consumer stream: None = legacy default (0 is disallowed there)
    return _device.asarray(obj, stream=None if handle == 0 else handle, name=name)


def _check_view(name, view, shape, dtype, writable=False):
    if view.dtype != np.dtype(dtype):
        raise TypeError(f"{name} must have dtype {np.dtype(dtype)} (got {view.dtype})")
    if tuple(view.shape) != tuple(shape):
        raise ValueError(f"{name} must have shape {tuple(shape)} (got {tuple(view.shape)})")
    if writable and view.readonly:
        raise ValueError(f"{name} is read-only")
    return int(view.ptr)


def _device_pointer(name, obj, shape, dtype, writable=False, stream=None):
    """Data pointer of a device array, after checking its shape, dtype and C-contiguity (a
    non-contiguous array is refused by the import) and ordering its producer's pending writes
    before ``stream`` (a usbeam DeviceArray too: it may still be written by a plan's stream)."""
    return _check_view(name, _device_view(name, obj, stream), shape, dtype, writable)


class _DeviceCall:
    """The device arguments of one queued call, on one stream.

    Each argument is imported once (:func:`_device_view`: the producer's pending writes are
    ordered before the stream, with an event) and checked.  Once the work is queued,
    :meth:`queued` records the stream on the caller's own usbeam DeviceArrays, as a plan does:
    a later copy (``to_numpy``) or consumer on another stream then waits for this work, and
    their memory is not released before it ran.  Views of foreign arrays (PyTorch, CuPy) are
    not marked: the caller orders its own streams, and a marked temporary view would make its
    release wait on the host."""

    def __init__(self, stream):
        self.stream = _stream_handle(stream)
        self._views = []
        self._own = []
        self._ranges = []  # (name, first byte, end, written)

    def view(self, name, obj):
        for seen in self._views:
            if seen is obj:
                return seen
        view = _device_view(name, obj, self.stream)
        self._views.append(view)
        if view is obj:
            self._own.append(view)
        return view

    def pointer(self, name, obj, shape, dtype, writable=False):
        """Checked data pointer; an output (``writable``) shares no memory with another argument
        (the kernels read their inputs while they write, from many threads)."""
        view = self.view(name, obj)
        pointer = _check_view(name, view, shape, dtype, writable)
        end = pointer + view.nbytes
        for other, start, stop, written in self._ranges:
            if (writable or written) and pointer < stop and start < end:
                raise ValueError(f"{name if writable else other} must not share memory with "
                                 f"{other if writable else name}")
        self._ranges.append((name, pointer, end, writable))
        return pointer

    def queued(self):
        stream = None if self.stream == 0 else self.stream  # DeviceArray: None = the legacy default stream
        for array in self._own:
            array._mark_used(stream)


def _device_shape_dtype(name, view):
    if view.dtype not in (np.dtype(np.float32), np.dtype(np.float16)):
        raise TypeError(f"{name} must be float32 or float16 (got {view.dtype})")
    return tuple(int(s) for s in view.shape), view.dtype


def _contiguous(x):
    """x as a C-contiguous aligned array, keeping a 0-d shape (np.ascontiguousarray makes it (1,))."""
    return x if x.flags.c_contiguous and x.flags.aligned else np.array(x, order="C")


def _check_out(name, out, shape, dtype, against=()):
    """A new output, or the caller's `out` checked, and refused when it shares memory with any
    (input name, array) of `against` (the input as given and as converted, other outputs)."""
    if out is None:
        return np.empty(shape, dtype)
    _validate.out_array(name, out, shape, dtype)
    for input_name, arr in against:
        _validate.no_overlap(name, out, input_name, arr)
    return out


# ---------------------------------------------------------------- pre-processing

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
        self.dtype = _MODEL_DTYPES.get(str(np.dtype(dtype)) if not isinstance(dtype, str) else dtype)
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

    def __call__(self, image, out=None, *, stream=None):
        """The model input for ``image``; written into ``out`` (e.g. a bound model input) when given."""
        if self.backend == "cuda":
            if out is None:
                raise ValueError("out is required on a CUDA plan (a device array, e.g. the model's bound input)")
            call = _DeviceCall(stream)
            _core.preprocess_execute_device(self._plan,
                                            call.pointer("image", image, self.image_shape, self.image_dtype),
                                            call.pointer("out", out, self.shape, self.dtype, True), call.stream)
            call.queued()
            return out
        given = image = _host_array("image", image)
        if image.dtype != self.image_dtype:
            raise TypeError(f"image must have dtype {self.image_dtype} (got {image.dtype})")
        if image.shape != self.image_shape:
            raise ValueError(f"image must have shape {self.image_shape} (got {image.shape})")
        image = np.ascontiguousarray(image)
        out = _check_out("out", out, self.shape, self.dtype, (("image", given), ("image", image)))
        _core.preprocess_execute(self._plan, image, out)
        return out


def model_input(image, size, *, channels=None, layout="nchw", dtype="float32", scale=None, offset=0.0,
                mean=0.0, std=1.0, align_corners=False, out=None):
    """One image or a batch (uint8 B-mode or float) as a model input tensor (4-D, NCHW or NHWC).

    See :class:`ModelInputPlan`.  Float64 images are accepted and read as float32.
    """
    image = _host_array("image", image)
    if image.dtype == np.float64:
        image = image.astype(np.float32)
    if image.dtype == np.bool_:
        image = image.astype(np.uint8)
    plan = ModelInputPlan(image.shape, size, image_dtype=image.dtype, channels=channels, layout=layout,
                          dtype=dtype, scale=scale, offset=offset, mean=mean, std=std,
                          align_corners=align_corners)
    return plan(image, out=out)


def _convert_device(x, out, to_dtype, stream):
    if out is None:
        raise ValueError("out is required for a device array x (a device array of the same shape)")
    check_backend("cuda")
    call = _DeviceCall(stream)
    shape = tuple(call.view("x", x).shape)
    from_dtype = np.float32 if to_dtype == np.float16 else np.float16
    _core.convert_device(np.dtype(to_dtype).name, call.pointer("x", x, shape, from_dtype),
                         call.pointer("out", out, shape, to_dtype, writable=True), int(np.prod(shape)), call.stream)
    call.queued()
    return out


def float32_to_float16(x, out=None, *, stream=None):
    """float32 -> float16, round to nearest even, bit-exact with ``x.astype(np.float16)``.

    A device array ``x`` (DLPack or ``__cuda_array_interface__``) is converted on the GPU into ``out``."""
    if _is_device_array(x):
        return _convert_device(x, out, np.float16, stream)
    given = x = _host_array("x", x)
    if x.dtype != np.float32:
        raise TypeError(f"x must have dtype float32 (got {x.dtype})")
    x = _contiguous(x)
    out = _check_out("out", out, x.shape, np.float16, (("x", given), ("x", x)))
    _core.float32_to_float16(x, out)
    return out


def float16_to_float32(x, out=None, *, stream=None):
    """float16 -> float32 (exact), bit-exact with ``x.astype(np.float32)``; device arrays as above."""
    if _is_device_array(x):
        return _convert_device(x, out, np.float32, stream)
    given = x = _host_array("x", x)
    if x.dtype != np.float16:
        raise TypeError(f"x must have dtype float16 (got {x.dtype})")
    x = _contiguous(x)
    out = _check_out("out", out, x.shape, np.float32, (("x", given), ("x", x)))
    _core.float16_to_float32(x, out)
    return out


# ---------------------------------------------------------------- detection

def _iou_threshold(iou):
    iou = _validate.real_scalar("iou", iou)
    if not 0.0 <= iou <= 1.0:
        raise ValueError(f"iou must be in [0, 1] (got {iou!r})")
    return iou


class DetectPlan:
    """Detection post-processing of a raw anchor head ``(batch, n_anchors, 5 + n_classes)``.

    Rows are ``[cx, cy, w, h, objectness, class scores...]`` (YOLOv5 export, already decoded).
    ``score = objectness * max class score`` (float32), kept when ``score > conf``; boxes to
    ``xyxy``; the ``max_candidates`` best (stable: ties to the lower anchor) go through greedy NMS
    with torchvision semantics (IoU > ``iou`` suppresses), class-aware unless ``class_agnostic``;
    at most ``max_det`` detections per image.  Calling the plan returns ``(detections, counts)``:
    float32 ``(batch, max_det, 6)`` rows ``[x1, y1, x2, y2, score, class]`` (zero past the
    count) and int32 ``(batch,)``.
    """

    def __init__(self, raw_shape, *, dtype=np.float32, conf=0.25, iou=0.45, max_det=300, max_candidates=None,
                 class_agnostic=False, backend="cpu"):
        raw_shape = _validate.shape("raw_shape", raw_shape)
        if len(raw_shape) != 3:
            raise ValueError(f"raw must be 3-D (batch, n_anchors, 5 + n_classes) (got shape {raw_shape})")
        batch, n_anchors, row = raw_shape
        if row < 6:
            raise ValueError(f"raw: the last dimension must be 5 + n_classes >= 6 "
                             f"([cx, cy, w, h, objectness, classes...]) (got {row})")
        if batch < 1 or n_anchors < 1:
            raise ValueError(f"raw is empty (shape {raw_shape})")
        self.raw_shape = raw_shape
        self.dtype = np.dtype(dtype)
        if self.dtype not in (np.dtype(np.float32), np.dtype(np.float16)):
            raise TypeError(f"raw must be float32 or float16 (got {self.dtype})")
        self.conf = _validate.real_scalar("conf", conf)
        self.iou = _iou_threshold(iou)
        self.max_det = _validate.integer("max_det", max_det, minimum=1, maximum=2**31 - 1)
        _validate.check_allocation("detections", (batch, self.max_det, 6), 4)
        if max_candidates is None:
            max_candidates = n_anchors
        self.max_candidates = min(_validate.integer("max_candidates", max_candidates, minimum=1), n_anchors)
        self.backend = check_backend(backend)
        self.shape = (batch, self.max_det, 6)
        self._plan = _core.detect_plan(batch, n_anchors, row - 5, self.dtype.name, self.conf, self.iou,
                                       self.max_candidates, self.max_det, bool(class_agnostic),
                                       backend=self.backend)

    def __call__(self, raw, out=None, *, stream=None):
        if out is not None and (not isinstance(out, tuple) or len(out) != 2):
            raise TypeError("out must be a tuple (detections, counts)")
        if self.backend == "cuda":
            if out is None:
                raise ValueError("out=(detections, counts) device arrays are required on a CUDA plan")
            call = _DeviceCall(stream)
            raw_ptr = call.pointer("raw", raw, self.raw_shape, self.dtype)
            detections_ptr = call.pointer("detections", out[0], self.shape, np.float32, True)
            counts_ptr = call.pointer("counts", out[1], self.shape[:1], np.int32, True)
            _core.detect_execute_device(self._plan, raw_ptr, detections_ptr, counts_ptr, call.stream)
            call.queued()
            return out
        given = raw = _host_array("raw", raw)
        if raw.shape != self.raw_shape:
            raise ValueError(f"raw must have shape {self.raw_shape} (got {raw.shape})")
        if raw.dtype != self.dtype:
            raise TypeError(f"raw must have dtype {self.dtype} (got {raw.dtype})")
        raw = np.ascontiguousarray(raw)
        inputs = (("raw", given), ("raw", raw))
        detections = _check_out("detections", None if out is None else out[0], self.shape, np.float32, inputs)
        counts = _check_out("counts", None if out is None else out[1], self.shape[:1], np.int32,
                            inputs + (("detections", detections),))
        _core.detect_execute(self._plan, raw, detections, counts)
        return detections, counts


def detect_postprocess(raw, conf=0.25, iou=0.45, max_det=300, *, max_candidates=None, class_agnostic=False,
                       out=None):
    """Detections ``(batch, max_det, 6)`` and counts ``(batch,)`` from a raw head; see :class:`DetectPlan`.

    ``raw`` may be ``(n_anchors, 5 + n_classes)`` for one image (the batch axis is then added).
    """
    raw = _host_array("raw", raw)
    if raw.ndim == 2:
        raw = raw[None]
    if raw.dtype == np.float64:
        raw = raw.astype(np.float32)
    plan = DetectPlan(raw.shape, dtype=raw.dtype, conf=conf, iou=iou, max_det=max_det,
                      max_candidates=max_candidates, class_agnostic=class_agnostic)
    return plan(raw, out=out)


def nms(boxes, scores, iou=0.5, *, classes=None, max_keep=None):
    """Greedy NMS, ``torchvision.ops.nms`` semantics (``batched_nms`` when ``classes`` is given).

    boxes : (N, 4) ``[x1, y1, x2, y2]``; scores : (N,); classes : (N,) integers or None.
    Returns the int64 indices of the kept boxes by decreasing score (ties: lower index first),
    at most ``max_keep``.  Computed in float32 (boxes and scores are cast).
    """
    boxes = _host_array("boxes", boxes)
    scores = _host_array("scores", scores)
    if boxes.ndim != 2 or boxes.shape[-1] != 4:
        raise ValueError(f"boxes must have shape (N, 4) [x1, y1, x2, y2] (got {boxes.shape})")
    n = boxes.shape[0]
    if scores.shape != (n,):
        raise ValueError(f"scores must have shape ({n},) to match boxes (got {scores.shape})")
    if not (np.issubdtype(boxes.dtype, np.number) and np.issubdtype(scores.dtype, np.number)):
        raise TypeError("boxes and scores must be numeric arrays")
    iou = _iou_threshold(iou)
    if n == 0:
        return np.empty(0, np.int64)
    boxes = np.ascontiguousarray(boxes, dtype=np.float32)
    scores = np.ascontiguousarray(scores, dtype=np.float32)
    if not np.all(np.isfinite(boxes)):
        raise ValueError("boxes must be finite")
    if not np.all(np.isfinite(scores)):
        raise ValueError("scores must be finite")
    if classes is not None:
        classes = _host_array("classes", classes)
        if classes.shape != (n,):
            raise ValueError(f"classes must have shape ({n},) to match boxes (got {classes.shape})")
        if not np.issubdtype(classes.dtype, np.integer):
            raise TypeError(f"classes must be integers (got {classes.dtype})")
        if n and (classes.min() < 0 or classes.max() >= 2**24):
            raise ValueError("classes must be in 0 .. 2^24 - 1 (exact as float32 offsets)")
        classes = np.ascontiguousarray(classes, dtype=np.int32)
    max_keep = n if max_keep is None else min(_validate.integer("max_keep", max_keep, minimum=1), n)
    plan = _core.nms_plan(n, iou, max_keep)
    keep = np.empty(max_keep, np.int32)
    count = np.zeros(1, np.int32)
    _core.nms_execute(plan, boxes, scores, classes, keep, count)
    return keep[: int(count[0])].astype(np.int64)


# ---------------------------------------------------------------- segmentation

def segment_threshold(logits, threshold=0.0, *, out=None, stream=None):
    """Binary mask ``logits > threshold`` (bool); ``threshold=0`` is ``sigmoid(logits) > 0.5``.

    For a probability threshold p use ``threshold = log(p / (1 - p))``.  A device array
    (DLPack or ``__cuda_array_interface__``, float32/float16) is thresholded on the GPU into ``out`` (bool).
    """
    if _is_device_array(logits):
        threshold = _validate.real_scalar("threshold", threshold)
        if out is None:
            raise ValueError("out is required for a device array (a bool device array)")
        check_backend("cuda")
        call = _DeviceCall(stream)
        shape, dtype = _device_shape_dtype("logits", call.view("logits", logits))
        _core.mask_device("threshold", call.pointer("logits", logits, shape, dtype), dtype.name, 1, 1,
                          int(np.prod(shape)), threshold, call.pointer("out", out, shape, np.bool_, True), call.stream)
        call.queued()
        return out
    given = logits = _host_array("logits", logits)
    if logits.dtype not in (np.dtype(np.float32), np.dtype(np.float16)):
        if not np.issubdtype(logits.dtype, np.floating):
            raise TypeError(f"logits must be float32 or float16 (got {logits.dtype})")
        logits = logits.astype(np.float32)
    threshold = _validate.real_scalar("threshold", threshold)
    logits = _contiguous(logits)
    out = _check_out("out", out, logits.shape, np.bool_, (("logits", given), ("logits", logits)))
    _core.mask_threshold(logits, threshold, out)
    return out


def segment_argmax(scores, *, out=None, stream=None):
    """Class map (int32) of per-class scores ``(C, H, W)`` or ``(N, C, H, W)``: argmax over C,
    ties to the lower class, NaN as ``numpy.argmax``.  Device arrays: on the GPU into ``out``."""
    if _is_device_array(scores):
        if out is None:
            raise ValueError("out is required for a device array (an int32 device array)")
        check_backend("cuda")
        call = _DeviceCall(stream)
        shape, dtype = _device_shape_dtype("scores", call.view("scores", scores))
        if len(shape) not in (3, 4):
            raise ValueError(f"scores must be (C, H, W) or (N, C, H, W) (got shape {shape})")
        n, c = (1, shape[0]) if len(shape) == 3 else shape[:2]
        out_shape = shape[1:] if len(shape) == 3 else (shape[0],) + shape[2:]
        _core.mask_device("argmax", call.pointer("scores", scores, shape, dtype), dtype.name, n, c,
                          shape[-1] * shape[-2], 0.0, call.pointer("out", out, out_shape, np.int32, True), call.stream)
        call.queued()
        return out
    given = scores = _host_array("scores", scores)
    if scores.ndim not in (3, 4):
        raise ValueError(f"scores must be (C, H, W) or (N, C, H, W) (got shape {scores.shape})")
    if scores.dtype not in (np.dtype(np.float32), np.dtype(np.float16)):
        if not np.issubdtype(scores.dtype, np.floating):
            raise TypeError(f"scores must be float32 or float16 (got {scores.dtype})")
        scores = scores.astype(np.float32)
    if scores.size == 0:
        raise ValueError(f"scores is empty (shape {scores.shape})")
    batched = scores.ndim == 4
    s4 = scores if batched else scores[None]
    shape = (s4.shape[0],) + s4.shape[2:]
    out = _check_out("out", out, shape if batched else shape[1:], np.int32, (("scores", given), ("scores", scores)))
    _core.mask_argmax(np.ascontiguousarray(s4), s4.shape[0], s4.shape[1], out)
    return out


def _mask2d(mask):
    mask = _host_array("mask", mask)
    if mask.ndim != 2:
        raise ValueError(f"mask must be 2-D (got ndim={mask.ndim}, shape {mask.shape})")
    if mask.size == 0:
        raise ValueError(f"mask is empty (shape {mask.shape})")
    if not (mask.dtype == np.bool_ or np.issubdtype(mask.dtype, np.number)):
        raise TypeError(f"mask must be boolean or numeric (got {mask.dtype})")
    return np.ascontiguousarray(mask != 0)


class ComponentsPlan:
    """Connected components of binary masks of one shape ``(H, W)`` or ``(N, H, W)`` (a batch).

    ``connectivity`` 4 is scipy.ndimage's default cross, 8 the 3 x 3 square.  Methods:
    ``label``, ``fill_holes``, ``largest_component``, ``remove_small``.  On a CUDA plan the
    masks are bool/uint8 device arrays and ``out`` is required.
    """

    def __init__(self, shape, connectivity=4, *, backend="cpu"):
        shape = _validate.shape("shape", shape)
        if len(shape) not in (2, 3) or any(s <= 0 for s in shape):
            raise ValueError(f"mask shape must be (H, W) or (N, H, W), non-empty (got {shape})")
        self.shape = shape
        self.connectivity = _validate.integer("connectivity", connectivity)
        _validate.choice("connectivity", self.connectivity, (4, 8))
        self.backend = check_backend(backend)
        n, h, w = (1,) + shape if len(shape) == 2 else shape
        self._n_images = n
        self._plan = _core.components_plan(n, h, w, self.connectivity, backend=self.backend)

    def _mask(self, mask):
        mask = _host_array("mask", mask)
        if mask.shape != self.shape:
            raise ValueError(f"mask must have shape {self.shape} (got {mask.shape})")
        return np.ascontiguousarray(mask != 0)

    def _device(self, operation, mask, out, out_dtype, counts=None, min_area=0, stream=None):
        if out is None:
            raise ValueError("out is required on a CUDA plan (a device array)")
        call = _DeviceCall(stream)
        mask_dtype = np.bool_ if call.view("mask", mask).dtype == np.bool_ else np.uint8
        mask_ptr = call.pointer("mask", mask, self.shape, mask_dtype)
        out_ptr = call.pointer("out", out, self.shape, out_dtype, True)
        counts_ptr = 0
        if counts is not None:
            counts_ptr = call.pointer("counts", counts, (self._n_images,), np.int32, True)
        _core.components_execute_device(self._plan, operation, mask_ptr, out_ptr, counts_ptr, min_area, call.stream)
        call.queued()

    def label(self, mask, out=None, *, counts=None, stream=None):
        """(labels int32, counts int32 per image) - as scipy.ndimage.label per image."""
        if self.backend == "cuda":
            if counts is None:
                raise ValueError("counts is required on a CUDA plan (an int32 device array)")
            self._device(0, mask, out, np.int32, counts=counts, stream=stream)
            return out, counts
        mask = self._mask(mask)
        out = _check_out("out", out, self.shape, np.int32)
        counts = _check_out("counts", counts, (self._n_images,), np.int32, (("out", out),))
        _core.label_execute(self._plan, mask, out, counts)
        return out, counts

    def fill_holes(self, mask, out=None, *, stream=None):
        if self.backend == "cuda":
            self._device(1, mask, out, np.bool_, stream=stream)
            return out
        out = _check_out("out", out, self.shape, np.bool_)
        _core.fill_holes_execute(self._plan, self._mask(mask), out)
        return out

    def largest_component(self, mask, out=None, *, stream=None):
        if self.backend == "cuda":
            self._device(2, mask, out, np.bool_, stream=stream)
            return out
        out = _check_out("out", out, self.shape, np.bool_)
        _core.largest_component_execute(self._plan, self._mask(mask), out)
        return out

    def remove_small(self, mask, min_area, out=None, *, stream=None):
        min_area = _validate.integer("min_area", min_area, minimum=0, maximum=_validate.SSIZE_MAX)
        if self.backend == "cuda":
            self._device(3, mask, out, np.bool_, min_area=min_area, stream=stream)
            return out
        out = _check_out("out", out, self.shape, np.bool_)
        _core.remove_small_execute(self._plan, self._mask(mask), min_area, out)
        return out


def label(mask, connectivity=4, *, out=None):
    """``(labels, n)`` of a 2-D mask, numbered exactly as ``scipy.ndimage.label``.

    connectivity 4 = scipy's default structure, 8 = ``np.ones((3, 3))``.  labels are int32.
    """
    mask = _mask2d(mask)
    labels, counts = ComponentsPlan(mask.shape, connectivity).label(mask, out=out)
    return labels, int(counts[0])


def fill_holes(mask, connectivity=4, *, out=None):
    """``scipy.ndimage.binary_fill_holes`` of a 2-D mask (bool); ``connectivity`` is that of the
    background flood (4 = scipy's default structure)."""
    mask = _mask2d(mask)
    return ComponentsPlan(mask.shape, connectivity).fill_holes(mask, out=out)


def largest_component(mask, connectivity=4, *, out=None):
    """The largest connected component of a 2-D mask (bool; ties: the first in raster order)."""
    mask = _mask2d(mask)
    return ComponentsPlan(mask.shape, connectivity).largest_component(mask, out=out)


def remove_small_components(mask, min_area, connectivity=4, *, out=None):
    """A 2-D mask without its components of fewer than ``min_area`` pixels (bool)."""
    mask = _mask2d(mask)
    return ComponentsPlan(mask.shape, connectivity).remove_small(mask, min_area, out=out)


def regionprops_basic_device(labels, n_labels, out, *, stream=None):
    """:func:`regionprops_basic` of an int32 device label image into ``out = (area, bbox, centroid)``
    device arrays (int32 (n,), int32 (n, 4), float64 (n, 2)), queued on ``stream``.  Labels
    outside 1..n_labels are ignored (checking them would synchronise the host)."""
    check_backend("cuda")
    call = _DeviceCall(stream)
    shape = tuple(call.view("labels", labels).shape)
    if len(shape) != 2:
        raise ValueError(f"labels must be 2-D (got shape {shape})")
    n_labels = _validate.integer("n_labels", n_labels, minimum=0)
    if not isinstance(out, tuple) or len(out) != 3:
        raise TypeError("out must be a tuple (area, bbox, centroid) of device arrays")
    _core.regionprops_basic_device(call.pointer("labels", labels, shape, np.int32), shape[0], shape[1], n_labels,
                                   call.pointer("area", out[0], (n_labels,), np.int32, True),
                                   call.pointer("bbox", out[1], (n_labels, 4), np.int32, True),
                                   call.pointer("centroid", out[2], (n_labels, 2), np.float64, True), call.stream)
    call.queued()
    return out


def regionprops_basic(labels, n_labels=None):
    """Per label 1..n_labels of a 2-D int label image: ``{'area', 'bbox', 'centroid'}``.

    area int32 (n,) pixel counts; bbox int32 (n, 4) ``[min_row, min_col, max_row + 1, max_col + 1]``
    (skimage.measure.regionprops); centroid float64 (n, 2) ``[row, col]``.  Labels absent from
    the image get area 0, bbox 0 and a NaN centroid.  ``n_labels`` defaults to ``labels.max()``.
    """
    labels = _host_array("labels", labels)
    if labels.ndim != 2:
        raise ValueError(f"labels must be 2-D (got ndim={labels.ndim})")
    if not np.issubdtype(labels.dtype, np.integer):
        raise TypeError(f"labels must be integers (got {labels.dtype})")
    if labels.size == 0:
        raise ValueError("labels is empty")
    if labels.min() < 0 or labels.max() > 2**31 - 1:
        raise ValueError("labels must be in 0 .. 2^31 - 1")
    if n_labels is None:
        n_labels = int(labels.max())
    n_labels = _validate.integer("n_labels", n_labels, minimum=0)
    largest = int(labels.max())
    if largest > n_labels:
        raise ValueError(f"labels: value {largest} is larger than n_labels = {n_labels}")
    # Rows past both the pixel count and the largest label are empty by construction; the
    # bound keeps a 1 x 1 image with n_labels = 2**30 from allocating 36 GiB of them.
    if n_labels > max(labels.size, largest):
        raise ValueError(f"n_labels must be <= max(number of pixels, largest label) = {max(labels.size, largest)} "
                         f"(got {n_labels})")
    _validate.check_allocation("n_labels", (n_labels,), 4 + 16 + 16)  # area, bbox, centroid per label
    labels = np.ascontiguousarray(labels, dtype=np.int32)
    area = np.empty(n_labels, np.int32)
    bbox = np.empty((n_labels, 4), np.int32)
    centroid = np.empty((n_labels, 2), np.float64)
    _core.regionprops_basic(labels, n_labels, area, bbox, centroid)
    return {"area": area, "bbox": bbox, "centroid": centroid}
