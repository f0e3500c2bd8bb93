"""Segmentation post-processing: logits threshold, class argmax, connected components numbered
as scipy.ndimage.label (label, fill holes, largest component, small-component removal), and
per-label area, bounding box and centroid.

C: csrc/ai/segment.c; CUDA: cuda/segment.cu.  Layouts: masks ``(H, W)`` or ``(N, H, W)`` bool
(uint8 on the device), labels int32 of the same shape, scores ``(C, H, W)`` or ``(N, C, H, W)``.
Units: pixels (areas are pixel counts, centroids mean row / column indices).
"""
import threading

import numpy as np

from .. import _core, _validate
from .. import device as _device
from .._backend import check_backend
from ._common import (check_out, check_view, contiguous, device_argument, device_view, host_array, is_device_array,
                      mark_used, plan_call, refuse_aliasing, require_device, stream_handle)


def _float_shape_dtype(name, view):
    if view.dtype not in (np.dtype(np.float32), np.dtype(np.float16)):
        raise TypeError(f"{name} must be float32 or float16 (got {view.dtype})")
    return tuple(int(s) for s in view.shape), view.dtype


def segment_threshold(logits, threshold=0.0, *, out=None, stream=None):
    """Binary mask ``logits > threshold`` (bool); ``threshold=0`` is ``sigmoid(logits) > 0.5``.

    For a probability threshold p use ``threshold = log(p / (1 - p))``.  A device array
    (DLPack or ``__cuda_array_interface__``, float32/float16) is thresholded on the GPU into ``out`` (bool).
    """
    if is_device_array(logits):
        threshold = _validate.real_scalar("threshold", threshold)
        if out is None:
            raise ValueError("out is required for a device array (a bool device array)")
        check_backend("cuda")
        handle = stream_handle(stream)
        d_logits = device_view("logits", logits, handle)
        shape, dtype = _float_shape_dtype("logits", d_logits)
        d_out = device_argument("out", out, handle, shape, np.bool_, writable=True)
        refuse_aliasing([("logits", d_logits, False), ("out", d_out, True)])
        _core.mask_device("threshold", d_logits.ptr, dtype.name, 1, 1, int(np.prod(shape)), threshold, d_out.ptr,
                          handle)
        mark_used((d_logits, d_out), handle)
        return out
    given = logits = host_array("logits", logits)
    if logits.dtype not in (np.dtype(np.float32), np.dtype(np.float16)):
        if not np.issubdtype(logits.dtype, np.floating):
            raise TypeError(f"logits must be float32 or float16 (got {logits.dtype})")
        logits = logits.astype(np.float32)
    threshold = _validate.real_scalar("threshold", threshold)
    logits = contiguous(logits)
    out = check_out("out", out, logits.shape, np.bool_, (("logits", given), ("logits", logits)))
    _core.mask_threshold(logits, threshold, out)
    return out


def segment_argmax(scores, *, out=None, stream=None):
    """Class map (int32) of per-class scores ``(C, H, W)`` or ``(N, C, H, W)``: argmax over C,
    ties to the lower class, NaN as ``numpy.argmax``.  Device arrays: on the GPU into ``out``."""
    if is_device_array(scores):
        if out is None:
            raise ValueError("out is required for a device array (an int32 device array)")
        check_backend("cuda")
        handle = stream_handle(stream)
        d_scores = device_view("scores", scores, handle)
        shape, dtype = _float_shape_dtype("scores", d_scores)
        if len(shape) not in (3, 4):
            raise ValueError(f"scores must be (C, H, W) or (N, C, H, W) (got shape {shape})")
        n, c = (1, shape[0]) if len(shape) == 3 else shape[:2]
        out_shape = shape[1:] if len(shape) == 3 else (shape[0],) + shape[2:]
        d_out = device_argument("out", out, handle, out_shape, np.int32, writable=True)
        refuse_aliasing([("scores", d_scores, False), ("out", d_out, True)])
        _core.mask_device("argmax", d_scores.ptr, dtype.name, n, c, shape[-1] * shape[-2], 0.0, d_out.ptr, handle)
        mark_used((d_scores, d_out), handle)
        return out
    given = scores = host_array("scores", scores)
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
    out = check_out("out", out, shape if batched else shape[1:], np.int32, (("scores", given), ("scores", scores)))
    _core.mask_argmax(np.ascontiguousarray(s4), s4.shape[0], s4.shape[1], out)
    return out


def _mask2d(mask):
    mask = host_array("mask", mask)
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
    ``label``, ``fill_holes``, ``largest_component``, ``remove_small``.

    ``backend='cuda'``: the plan runs cuda/segment.cu on bool/uint8 device arrays (any CUDA
    DLPack producer or ``__cuda_array_interface__`` object, no copy), ``out`` required, and
    ``plan.cuda`` is its :class:`usbeam.device.CudaExecution`: ``stage_times()``
    ("components.union_find", then "components.number", "components.fill" or
    "components.select"), ``set_stream``, ``synchronize``.  Methods take ``stream=`` as
    :class:`usbeam.ModelInputPlan` calls do.
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
        self.cuda = None
        if self.backend == "cuda":
            # device arrays only (strict); label's two outputs are imported by _label_cuda itself
            self._runner = _device.PlanRunner(_core.components_cuda_exec(self._plan), strict=True)
            self.cuda = self._runner.execution  # stream, stage_times(), set_stream()
            self._own_stream = self.cuda.stream
            self._lock = threading.Lock()

    def __repr__(self):
        from .._repr import attrs_repr

        return attrs_repr(self, ('shape', 'connectivity', 'backend'))

    def _mask(self, mask):
        mask = host_array("mask", mask)
        if mask.shape != self.shape:
            raise ValueError(f"mask must have shape {self.shape} (got {mask.shape})")
        return np.ascontiguousarray(mask != 0)

    def _mask_cuda(self, execute, mask, out, stream):
        """A mask -> mask operation on the device: ``execute(plan, mask, out, stream)``."""
        if out is None:
            raise ValueError("out is required on a CUDA plan (a device array)")
        require_device("mask", mask)
        require_device("out", out)
        with plan_call(self.cuda, self._own_stream, self._lock, stream) as back:
            d_mask = device_view("mask", mask, self.cuda.stream)  # bool or uint8: the runner checks which
            mask_dtype = np.bool_ if d_mask.dtype == np.bool_ else np.uint8
            self._runner(lambda m, o: execute(self._plan, m, o, back), "mask", d_mask, self.shape, mask_dtype,
                         None, out, self.shape, np.bool_, no_overlap=True)
        return out

    def _label_cuda(self, mask, out, counts, stream):
        if out is None:
            raise ValueError("out is required on a CUDA plan (a device array)")
        if counts is None:
            raise ValueError("counts is required on a CUDA plan (an int32 device array)")
        cuda = self.cuda
        cuda.check_input(earlier=True)  # masks are bytes: nothing is ever flagged, but the order is PlanRunner's
        with plan_call(cuda, self._own_stream, self._lock, stream) as back:
            call_stream = cuda.stream
            d_mask = device_view("mask", mask, call_stream)
            check_view("mask", d_mask, self.shape, np.bool_ if d_mask.dtype == np.bool_ else np.uint8)
            d_out = device_argument("out", out, call_stream, self.shape, np.int32, writable=True)
            d_counts = device_argument("counts", counts, call_stream, (self._n_images,), np.int32, writable=True)
            refuse_aliasing([("mask", d_mask, False), ("out", d_out, True), ("counts", d_counts, True)])
            _core.label_execute(self._plan, d_mask, d_out, d_counts, back)
            mark_used((d_mask, d_out, d_counts), call_stream, cuda)
        return out, counts

    def label(self, mask, out=None, *, counts=None, stream=None):
        """(labels int32, counts int32 per image) - as scipy.ndimage.label per image."""
        if self.cuda is not None:
            return self._label_cuda(mask, out, counts, stream)
        mask = self._mask(mask)
        out = check_out("out", out, self.shape, np.int32)
        counts = check_out("counts", counts, (self._n_images,), np.int32, (("out", out),))
        _core.label_execute(self._plan, mask, out, counts)
        return out, counts

    def fill_holes(self, mask, out=None, *, stream=None):
        if self.cuda is not None:
            return self._mask_cuda(_core.fill_holes_execute, mask, out, stream)
        out = check_out("out", out, self.shape, np.bool_)
        _core.fill_holes_execute(self._plan, self._mask(mask), out)
        return out

    def largest_component(self, mask, out=None, *, stream=None):
        if self.cuda is not None:
            return self._mask_cuda(_core.largest_component_execute, mask, out, stream)
        out = check_out("out", out, self.shape, np.bool_)
        _core.largest_component_execute(self._plan, self._mask(mask), out)
        return out

    def remove_small(self, mask, min_area, out=None, *, stream=None):
        min_area = _validate.integer("min_area", min_area, minimum=0, maximum=_validate.SSIZE_MAX)
        if self.cuda is not None:
            return self._mask_cuda(lambda plan, m, o, s: _core.remove_small_execute(plan, m, min_area, o, s), mask,
                                   out, stream)
        out = check_out("out", out, self.shape, np.bool_)
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
    handle = stream_handle(stream)
    d_labels = device_view("labels", labels, handle)
    shape = tuple(d_labels.shape)
    if len(shape) != 2:
        raise ValueError(f"labels must be 2-D (got shape {shape})")
    check_view("labels", d_labels, shape, np.int32)
    n_labels = _validate.integer("n_labels", n_labels, minimum=0)
    if not isinstance(out, tuple) or len(out) != 3:
        raise TypeError("out must be a tuple (area, bbox, centroid) of device arrays")
    area = device_argument("area", out[0], handle, (n_labels,), np.int32, writable=True)
    bbox = device_argument("bbox", out[1], handle, (n_labels, 4), np.int32, writable=True)
    centroid = device_argument("centroid", out[2], handle, (n_labels, 2), np.float64, writable=True)
    refuse_aliasing([("labels", d_labels, False), ("area", area, True), ("bbox", bbox, True),
                     ("centroid", centroid, True)])
    _core.regionprops_basic_device(d_labels.ptr, shape[0], shape[1], n_labels, area.ptr, bbox.ptr, centroid.ptr,
                                   handle)
    mark_used((d_labels, area, bbox, centroid), handle)
    return out


def regionprops_basic(labels, n_labels=None):
    """Per label 1..n_labels of a 2-D int label image: ``{'area', 'bbox', 'centroid'}``.

    area int32 (n,) pixel counts; bbox int32 (n, 4) ``[min_row, min_col, max_row + 1, max_col + 1]``
    (skimage.measure.regionprops); centroid float64 (n, 2) ``[row, col]``.  Labels absent from
    the image get area 0, bbox 0 and a NaN centroid.  ``n_labels`` defaults to ``labels.max()``.
    """
    labels = host_array("labels", labels)
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
