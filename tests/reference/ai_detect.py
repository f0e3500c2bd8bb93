"""NumPy reference of detection post-processing and NMS with torchvision's semantics, written
from torchvision's documented behaviour (ops.nms, ops.batched_nms, csrc/ops/cpu/nms_kernel.cpp)
and YOLOv5's head layout; independent of usbeam.

All box arithmetic is float32 (NumPy float32 operations round like the C++ float ones):
  areas = (x2 - x1) * (y2 - y1); for a kept i and later j: xx1 = max(x1_i, x1_j) ... (std::max:
  (a < b) ? b : a), w = max(0, xx2 - xx1), inter = w * h, IoU = inter / (area_i + area_j - inter),
  suppressed when IoU (as double) > threshold.  Order: score descending, stable.
  batched_nms (coordinate trick): boxes + class * (boxes.max() + 1), in float32.
"""
import numpy as np

f32 = np.float32


def _std_max(a, b):
    return np.where(a < b, b, a)


def _std_min(a, b):
    return np.where(b < a, b, a)


def nms(boxes, scores, iou_threshold):
    """torchvision.ops.nms: kept indices (int64) by decreasing score."""
    boxes = np.asarray(boxes, f32)
    scores = np.asarray(scores, f32)
    order = np.argsort(-scores, kind="stable")
    x1, y1, x2, y2 = (boxes[:, k] for k in range(4))
    areas = (x2 - x1) * (y2 - y1)
    suppressed = np.zeros(len(boxes), bool)
    keep = []
    for position, i in enumerate(order):
        if suppressed[i]:
            continue
        keep.append(i)
        rest = order[position + 1:]
        xx1 = _std_max(x1[i], x1[rest])
        yy1 = _std_max(y1[i], y1[rest])
        xx2 = _std_min(x2[i], x2[rest])
        yy2 = _std_min(y2[i], y2[rest])
        w = _std_max(f32(0), xx2 - xx1)
        h = _std_max(f32(0), yy2 - yy1)
        inter = w * h
        with np.errstate(invalid="ignore", divide="ignore"):
            ovr = inter / (areas[i] + areas[rest] - inter)
        suppressed[rest[ovr.astype(np.float64) > iou_threshold]] = True
    return np.asarray(keep, np.int64)


def batched_nms(boxes, scores, classes, iou_threshold):
    """torchvision.ops.batched_nms by the coordinate trick, in float32."""
    boxes = np.asarray(boxes, f32)
    if len(boxes) == 0:
        return np.empty(0, np.int64)
    max_coordinate = boxes.max()
    offsets = np.asarray(classes).astype(f32) * (max_coordinate + f32(1))
    return nms(boxes + offsets[:, None], scores, iou_threshold)


def detect(raw, conf, iou, max_det, max_candidates=None, class_agnostic=False):
    """raw (B, A, 5 + C) -> list per image of (rows (k, 6) float32 [x1, y1, x2, y2, score, class])."""
    raw = np.asarray(raw).astype(f32)
    results = []
    for rows in raw:
        cls_scores = rows[:, 5:]
        best = np.argmax(cls_scores, axis=1)  # lower index on ties, first NaN wins
        score = rows[:, 4] * cls_scores[np.arange(len(rows)), best]
        with np.errstate(invalid="ignore"):
            candidates = np.nonzero(score > f32(conf))[0]
        order = candidates[np.argsort(-score[candidates], kind="stable")]
        if max_candidates is not None:
            order = order[:max_candidates]
        cx, cy, w, h = (rows[order, k] for k in range(4))
        boxes = np.stack([cx - w / f32(2), cy - h / f32(2), cx + w / f32(2), cy + h / f32(2)], axis=1)
        sub_scores = score[order]
        classes = best[order]
        if len(order) == 0:
            keep = np.empty(0, np.int64)
        elif class_agnostic:
            keep = nms(boxes, sub_scores, iou)
        else:
            keep = batched_nms(boxes, sub_scores, classes, iou)
        keep = keep[:max_det]
        out = np.concatenate([boxes[keep], sub_scores[keep, None], classes[keep, None].astype(f32)], axis=1)
        results.append(out.astype(f32))
    return results
