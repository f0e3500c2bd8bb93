"""Detection post-processing and NMS against the NumPy reference of torchvision's semantics
(tests/reference/ai_detect.py), and against torchvision itself where it is installed."""
import numpy as np
import pytest

import usbeam
from reference import ai_detect as ref


def random_head(rng, batch, anchors, classes, size=512.0, quantize=None):
    raw = np.empty((batch, anchors, 5 + classes), np.float32)
    raw[..., 0:2] = rng.uniform(0, size, (batch, anchors, 2))
    raw[..., 2:4] = rng.uniform(2, size / 5, (batch, anchors, 2))
    raw[..., 4:] = rng.random((batch, anchors, 1 + classes))
    if quantize:  # few distinct values: many exact ties of scores and of boxes
        raw = np.round(raw * quantize) / quantize
    return raw.astype(np.float32)


def assert_matches_reference(raw, detections, counts, conf, iou, max_det, **kwargs):
    want = ref.detect(raw, conf, iou, max_det, **kwargs)
    assert detections.shape == (raw.shape[0], max_det, 6) and detections.dtype == np.float32
    for image, rows in enumerate(want):
        assert counts[image] == len(rows)
        np.testing.assert_array_equal(detections[image, : len(rows)], rows)
        assert not np.any(detections[image, len(rows):])


@pytest.mark.parametrize("batch, anchors, classes", [(1, 300, 1), (3, 500, 4), (2, 64, 80)])
def test_random_heads_exact(rng, batch, anchors, classes):
    raw = random_head(rng, batch, anchors, classes)
    det, counts = usbeam.detect_postprocess(raw, conf=0.3, iou=0.45, max_det=100)
    assert_matches_reference(raw, det, counts, 0.3, 0.45, 100)


def test_yolov5_head_512(rng):
    raw = random_head(rng, 1, 16128, 2)
    raw[..., 4] **= 4  # objectness mostly low, as in a real head
    det, counts = usbeam.detect_postprocess(raw, conf=0.25, iou=0.45, max_det=300)
    assert 0 < counts[0] <= 300
    assert_matches_reference(raw, det, counts, 0.25, 0.45, 300)


@pytest.mark.parametrize("class_agnostic", [False, True])
def test_ties_and_duplicates(rng, class_agnostic):
    raw = random_head(rng, 2, 400, 3, size=64.0, quantize=4)
    raw[:, 200:] = raw[:, :200]  # exact duplicate rows: the lower anchor must win
    det, counts = usbeam.detect_postprocess(raw, conf=0.1, iou=0.5, max_det=400, class_agnostic=class_agnostic)
    assert_matches_reference(raw, det, counts, 0.1, 0.5, 400, class_agnostic=class_agnostic)


def test_zero_area_boxes_are_never_suppressed(rng):
    raw = random_head(rng, 1, 200, 2)
    raw[0, ::2, 2] = 0  # zero width: IoU is 0/0 = NaN, which never exceeds the threshold
    raw[0, 1::4, 3] = 0
    raw[0, :, 0:2] = 10.0  # all centred on one point
    det, counts = usbeam.detect_postprocess(raw, conf=0.0, iou=0.1, max_det=200)
    assert_matches_reference(raw, det, counts, 0.0, 0.1, 200)
    assert counts[0] >= 100


def test_all_below_threshold(rng):
    raw = random_head(rng, 2, 100, 3)
    out = (np.full((2, 10, 6), np.nan, np.float32), np.full(2, -7, np.int32))
    det, counts = usbeam.detect_postprocess(raw, conf=1.0, max_det=10, out=out)
    assert det is out[0] and counts is out[1]
    np.testing.assert_array_equal(counts, 0)
    np.testing.assert_array_equal(det, 0)


def test_max_det_overflow_and_max_candidates(rng):
    raw = np.zeros((1, 1000, 6), np.float32)
    grid = np.arange(1000)
    raw[0, :, 0] = (grid % 40) * 20 + 5  # disjoint 10 x 10 boxes
    raw[0, :, 1] = (grid // 40) * 20 + 5
    raw[0, :, 2:4] = 10
    raw[0, :, 4] = rng.random(1000).astype(np.float32)
    raw[0, :, 5] = 1
    det, counts = usbeam.detect_postprocess(raw, conf=0.0, iou=0.5, max_det=37)
    assert counts[0] == 37
    assert_matches_reference(raw, det, counts, 0.0, 0.5, 37)
    np.testing.assert_array_equal(det[0, :, 4], np.sort(raw[0, :, 4])[::-1][:37])
    det, counts = usbeam.detect_postprocess(raw, conf=0.0, iou=0.5, max_det=500, max_candidates=20)
    assert counts[0] == 20
    assert_matches_reference(raw, det, counts, 0.0, 0.5, 500, max_candidates=20)


def test_float16_head(rng):
    raw = random_head(rng, 2, 300, 3).astype(np.float16)
    det, counts = usbeam.detect_postprocess(raw, conf=0.2, iou=0.6, max_det=50)
    assert_matches_reference(raw, det, counts, 0.2, 0.6, 50)


def test_plan_reuse_and_input_untouched(rng):
    plan = usbeam.DetectPlan((2, 250, 8), conf=0.3, iou=0.4, max_det=30)
    for _ in range(3):
        raw = random_head(rng, 2, 250, 3)
        copy = raw.copy()
        det, counts = plan(raw)
        np.testing.assert_array_equal(raw, copy)
        assert_matches_reference(raw, det, counts, 0.3, 0.4, 30)


def test_nan_rows_are_refused_on_the_cpu(rng):
    """A NaN class score would make its row's score NaN and drop it (torch.max semantics, which
    the CUDA twin keeps); the CPU refuses the head instead (tests/inputs/test_finite_input.py)."""
    raw = random_head(rng, 1, 50, 3)
    raw[0, 3, 6] = np.nan
    with pytest.raises(ValueError, match="raw contains NaN"):
        usbeam.detect_postprocess(raw, conf=0.0, iou=0.5, max_det=50)


# ---------------------------------------------------------------- plain NMS

def random_boxes(rng, n, size=100.0):
    xy = rng.uniform(0, size, (n, 2))
    wh = rng.uniform(0, size / 4, (n, 2))
    return np.concatenate([xy, xy + wh], axis=1).astype(np.float32)


@pytest.mark.parametrize("iou", [0.0, 0.3, 0.5, 0.7, 1.0])
def test_nms_matches_reference(rng, iou):
    boxes = random_boxes(rng, 700)
    scores = rng.random(700).astype(np.float32)
    np.testing.assert_array_equal(usbeam.nms(boxes, scores, iou), ref.nms(boxes, scores, iou))
    classes = rng.integers(0, 5, 700)
    np.testing.assert_array_equal(usbeam.nms(boxes, scores, iou, classes=classes),
                                  ref.batched_nms(boxes, scores, classes, iou))


def test_nms_ties_duplicates_zero_area(rng):
    boxes = np.round(random_boxes(rng, 300, size=20.0))
    boxes[::7, 2] = boxes[::7, 0]  # zero width
    scores = np.round(rng.random(300) * 3).astype(np.float32) / 3
    boxes[150:] = boxes[:150]
    keep = usbeam.nms(boxes, scores, 0.5)
    np.testing.assert_array_equal(keep, ref.nms(boxes, scores, 0.5))
    assert keep.dtype == np.int64


def test_nms_threshold_is_compared_in_double():
    # IoU of these two is float32(1/3) = 0.33333334 > 1/3 (double): suppressed, as in torchvision
    boxes = np.array([[0, 0, 2, 1], [1, 0, 3, 1]], np.float32)
    scores = np.array([0.9, 0.8], np.float32)
    np.testing.assert_array_equal(usbeam.nms(boxes, scores, 1 / 3), [0])
    # IoU exactly 0.5 does not exceed 0.5: both kept; the lower index wins a score tie
    boxes = np.array([[0, 0, 1, 1], [0, 0, 2, 1]], np.float32)
    np.testing.assert_array_equal(usbeam.nms(boxes, np.array([0.5, 0.5], np.float32), 0.5), [0, 1])
    np.testing.assert_array_equal(usbeam.nms(boxes, np.array([0.5, 0.5], np.float32), 0.49), [0])


def test_nms_max_keep_and_empty(rng):
    boxes = random_boxes(rng, 100)
    scores = rng.random(100).astype(np.float32)
    np.testing.assert_array_equal(usbeam.nms(boxes, scores, 0.5, max_keep=5), ref.nms(boxes, scores, 0.5)[:5])
    assert usbeam.nms(np.zeros((0, 4)), np.zeros(0), 0.5).shape == (0,)


def test_against_torchvision(rng):
    torch = pytest.importorskip("torch")
    torchvision = pytest.importorskip("torchvision")
    boxes = random_boxes(rng, 3000, size=300.0)
    scores = rng.random(3000).astype(np.float32)
    classes = rng.integers(0, 3, 3000)
    want = torchvision.ops.nms(torch.from_numpy(boxes), torch.from_numpy(scores), 0.5).numpy()
    np.testing.assert_array_equal(usbeam.nms(boxes, scores, 0.5), want)
    # batched_nms takes the coordinate trick below 4000 boxes on the CPU, the same as usbeam
    want = torchvision.ops.batched_nms(torch.from_numpy(boxes[:900]), torch.from_numpy(scores[:900]),
                                       torch.from_numpy(classes[:900]), 0.5).numpy()
    np.testing.assert_array_equal(usbeam.nms(boxes[:900], scores[:900], 0.5, classes=classes[:900]), want)


# ---------------------------------------------------------------- bad input

def test_bad_input(rng):
    raw = random_head(rng, 1, 20, 2)
    with pytest.raises(ValueError, match="last dimension"):
        usbeam.detect_postprocess(raw[..., :5])
    with pytest.raises(ValueError, match="raw"):
        usbeam.detect_postprocess(raw[None])
    with pytest.raises(ValueError, match="iou"):
        usbeam.detect_postprocess(raw, iou=1.5)
    with pytest.raises(ValueError, match="iou"):
        usbeam.detect_postprocess(raw, iou=-0.1)
    with pytest.raises(ValueError, match="conf"):
        usbeam.detect_postprocess(raw, conf=np.nan)
    for conf in (-0.1, 1.5, 25.0):  # scores are probabilities: a percentage or a negative is a slip
        with pytest.raises(ValueError, match=r"conf must be in \[0, 1\]"):
            usbeam.detect_postprocess(raw, conf=conf)
    with pytest.raises(ValueError, match="max_det"):
        usbeam.detect_postprocess(raw, max_det=0)
    with pytest.raises(TypeError, match="raw"):
        usbeam.detect_postprocess(raw.astype(np.int32))
    with pytest.raises(TypeError, match="detections"):
        usbeam.detect_postprocess(raw, max_det=5, out=(np.zeros((1, 5, 6)), np.zeros(1, np.int32)))
    with pytest.raises(ValueError, match="detections"):
        usbeam.detect_postprocess(raw, max_det=5, out=(np.zeros((1, 6, 6), np.float32), np.zeros(1, np.int32)))
    with pytest.raises(TypeError, match="counts"):
        usbeam.detect_postprocess(raw, max_det=5, out=(np.zeros((1, 5, 6), np.float32), np.zeros(1, np.int64)))
    boxes = random_boxes(rng, 10)
    scores = rng.random(10)
    with pytest.raises(ValueError, match="boxes"):
        usbeam.nms(boxes[:, :3], scores)
    with pytest.raises(ValueError, match="boxes"):
        usbeam.nms(boxes.reshape(2, 5, 4), scores)
    with pytest.raises(ValueError, match="scores"):
        usbeam.nms(boxes, scores[:9])
    with pytest.raises(ValueError, match="iou"):
        usbeam.nms(boxes, scores, 2.0)
    with pytest.raises(ValueError, match="boxes"):
        usbeam.nms(np.where(np.eye(10, 4) > 0, np.nan, boxes), scores)
    with pytest.raises(ValueError, match="classes"):
        usbeam.nms(boxes, scores, classes=np.arange(9))
    with pytest.raises(TypeError, match="classes"):
        usbeam.nms(boxes, scores, classes=np.ones(10))
    # [cx, cy, w, h] rows passed as corners: x2 = w < x1 = cx for boxes away from the origin
    centres = np.concatenate([(boxes[:, :2] + boxes[:, 2:]) / 2 + 30, boxes[:, 2:] - boxes[:, :2]], axis=1)
    with pytest.raises(ValueError, match=r"boxes must be corners .* 10 of 10 are not \(first: row 0"):
        usbeam.nms(centres, scores)
    flipped = boxes.copy()
    flipped[3, [1, 3]] = flipped[3, [3, 1]] + [1.0, 0.0]
    with pytest.raises(ValueError, match=r"1 of 10 are not \(first: row 3"):
        usbeam.nms(flipped, scores)
    degenerate = boxes.copy()
    degenerate[:, 2] = degenerate[:, 0]  # zero width is allowed, as torchvision's: IoU 0
    assert usbeam.nms(degenerate, scores).size == 10


def test_binding_checks_buffers():
    plan = usbeam._core.detect_plan(1, 10, 2, "float32", 0.5, 0.5, 10, 5)
    with pytest.raises(ValueError, match="raw"):
        usbeam._core.detect_execute(plan, np.zeros(69, np.float32), np.zeros(30, np.float32), np.zeros(1, np.int32))
    with pytest.raises(ValueError, match="iou"):
        usbeam._core.detect_plan(1, 10, 2, "float32", 0.5, 1.01, 10, 5)
    with pytest.raises(ValueError, match="max_candidates"):
        usbeam._core.detect_plan(1, 10, 2, "float32", 0.5, 0.5, 11, 5)
