"""Detection post-processing: decode an anchor head, threshold, top-K and class-aware greedy NMS
with torchvision's semantics, and plain NMS.

C: csrc/ai/detect.c; CUDA: cuda/detect.cu (the DetectPlan; bit-exact with the CPU).  Layouts:
raw heads ``(batch, n_anchors, 5 + n_classes)`` rows ``[cx, cy, w, h, objectness, classes...]``
(YOLOv5 export), detections ``(batch, max_det, 6)`` rows ``[x1, y1, x2, y2, score, class]``.
Units: pixels of the model input, probabilities.  Reference: torchvision.ops.nms / batched_nms.
"""
import threading

import numpy as np

from .. import _core, _validate
from .. import device as _device
from .._backend import check_backend
from ._common import check_out, device_argument, host_array, mark_used, plan_call, refuse_aliasing


def _iou_threshold(iou):
    iou = _validate.real_scalar("iou", iou)
    if not 0.0 <= iou <= 1.0:
        raise ValueError(f"iou must be in [0, 1] (got {iou!r})")
    return iou


class DetectPlan:
    """Detection post-processing of a raw anchor head ``(batch, n_anchors, 5 + n_classes)``.

    Rows are ``[cx, cy, w, h, objectness, class scores...]`` (YOLOv5 export, already decoded).
    ``score = objectness * max class score`` (float32), kept when ``score > conf`` (conf in [0, 1]); boxes to
    ``xyxy``; the ``max_candidates`` best (stable: ties to the lower anchor) go through greedy NMS
    with torchvision semantics (IoU > ``iou`` suppresses), class-aware unless ``class_agnostic``;
    at most ``max_det`` detections per image.  Calling the plan returns ``(detections, counts)``:
    float32 ``(batch, max_det, 6)`` rows ``[x1, y1, x2, y2, score, class]`` (zero past the
    count) and int32 ``(batch,)``.

    ``backend='cuda'``: the plan runs cuda/detect.cu (bit-exact with the CPU) on device arrays
    only, ``out=(detections, counts)`` required, and ``plan.cuda`` is its
    :class:`usbeam.device.CudaExecution`: ``stage_times()`` ("detect.decode", "detect.sort",
    "detect.overlap", "detect.nms"), ``set_stream``, and the fault report: where the CPU refuses
    a head with NaN or inf, the CUDA plan keeps torchvision's NaN rules and flags what its
    kernels read (scores, candidate boxes), raised as ValueError by ``plan.cuda.synchronize()``
    or at the plan's next call.  Calls take ``stream=`` as :class:`usbeam.ModelInputPlan`.
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
        if not 0.0 <= self.conf <= 1.0:  # as ultralytics' NMS: scores are probabilities (decoded head)
            raise ValueError(f"conf must be in [0, 1], a score threshold on objectness x class probability "
                             f"(got {self.conf:g}): above 1 nothing is kept, below 0 every anchor is")
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
        self.cuda = None
        if self.backend == "cuda":
            # two outputs: the call imports and records them itself (PlanRunner takes one)
            self.cuda = _device.CudaExecution(_core.detect_cuda_exec(self._plan))
            self._own_stream = self.cuda.stream
            self._lock = threading.Lock()

    def __repr__(self):
        from .._repr import attrs_repr

        return attrs_repr(self, ('raw_shape', 'dtype', 'conf', 'iou', 'max_det', 'shape', 'backend'))

    def __call__(self, raw, out=None, *, stream=None):
        if out is not None and (not isinstance(out, tuple) or len(out) != 2):
            raise TypeError("out must be a tuple (detections, counts)")
        if self.cuda is not None:
            if out is None:
                raise ValueError("out=(detections, counts) device arrays are required on a CUDA plan")
            return self._call_cuda(raw, out, stream)
        given = raw = host_array("raw", raw)
        if raw.shape != self.raw_shape:
            raise ValueError(f"raw must have shape {self.raw_shape} (got {raw.shape})")
        if raw.dtype != self.dtype:
            raise TypeError(f"raw must have dtype {self.dtype} (got {raw.dtype})")
        raw = np.ascontiguousarray(raw)
        inputs = (("raw", given), ("raw", raw))
        detections = check_out("detections", None if out is None else out[0], self.shape, np.float32, inputs)
        counts = check_out("counts", None if out is None else out[1], self.shape[:1], np.int32,
                           inputs + (("detections", detections),))
        _core.detect_execute(self._plan, raw, detections, counts)
        return detections, counts

    def _call_cuda(self, raw, out, stream):
        """Queue the plan on device arrays; faults of earlier calls raise first (as PlanRunner does)."""
        cuda = self.cuda
        cuda.check_input(earlier=True)
        cuda.input_name = "raw"
        with plan_call(cuda, self._own_stream, self._lock, stream) as back:
            call_stream = cuda.stream
            d_raw = device_argument("raw", raw, call_stream, self.raw_shape, self.dtype)
            detections = device_argument("detections", out[0], call_stream, self.shape, np.float32, writable=True)
            counts = device_argument("counts", out[1], call_stream, self.shape[:1], np.int32, writable=True)
            refuse_aliasing([("raw", d_raw, False), ("detections", detections, True), ("counts", counts, True)])
            _core.detect_execute(self._plan, d_raw, detections, counts, back)
            mark_used((d_raw, detections, counts), call_stream, cuda)
        return out


def detect_postprocess(raw, conf=0.25, iou=0.45, max_det=300, *, max_candidates=None, class_agnostic=False,
                       out=None):
    """Detections ``(batch, max_det, 6)`` and counts ``(batch,)`` from a raw head; see :class:`DetectPlan`.

    ``raw`` may be ``(n_anchors, 5 + n_classes)`` for one image (the batch axis is then added).
    """
    raw = host_array("raw", raw)
    if raw.ndim == 2:
        raw = raw[None]
    if raw.dtype == np.float64:
        raw = raw.astype(np.float32)
    plan = DetectPlan(raw.shape, dtype=raw.dtype, conf=conf, iou=iou, max_det=max_det,
                      max_candidates=max_candidates, class_agnostic=class_agnostic)
    return plan(raw, out=out)


def nms(boxes, scores, iou=0.5, *, classes=None, max_keep=None):
    """Greedy NMS, ``torchvision.ops.nms`` semantics (``batched_nms`` when ``classes`` is given).

    boxes : (N, 4) ``[x1, y1, x2, y2]`` with x1 <= x2, y1 <= y2 (others: ValueError); scores :
    (N,); classes : (N,) integers or None.
    Returns the int64 indices of the kept boxes by decreasing score (ties: lower index first),
    at most ``max_keep``.  Computed in float32 (boxes and scores are cast).
    """
    boxes = host_array("boxes", boxes)
    scores = host_array("scores", scores)
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
    # corners out of order: most often [cx, cy, w, h] rows, whose IoUs would be meaningless
    inverted = (boxes[:, 2] < boxes[:, 0]) | (boxes[:, 3] < boxes[:, 1])
    if inverted.any():
        first = int(np.argmax(inverted))
        raise ValueError(f"boxes must be corners [x1, y1, x2, y2] with x1 <= x2 and y1 <= y2: {int(inverted.sum())} "
                         f"of {n} are not (first: row {first}, {boxes[first].tolist()}); convert [cx, cy, w, h] "
                         f"boxes to corners first")
    if classes is not None:
        classes = host_array("classes", classes)
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
