"""CUDA half of the AI hand-off family: every GPU kernel against the CPU backend (bit-exact:
both use the same float32 operation order, see csrc/ai_math.h) and against the peers, with
PyTorch tensors as device arrays (__cuda_array_interface__), and stream handling.

All tests need a CUDA device and PyTorch; they are skipped otherwise."""
import numpy as np
import pytest
from scipy import ndimage

import usbeam
from reference import ai_detect as ref_detect

pytestmark = pytest.mark.cuda
torch = pytest.importorskip("torch")


def dev(array):
    return torch.from_numpy(np.ascontiguousarray(array)).cuda()


def host(tensor):
    torch.cuda.synchronize()
    return tensor.cpu().numpy()


def empty(shape, dtype):
    return torch.empty(shape, dtype=dtype, device="cuda")


@pytest.mark.parametrize("dtype, layout, channels", [("float32", "nchw", 1), ("float16", "nhwc", 3),
                                                     ("float32", "nhwc", 3)])
@pytest.mark.parametrize("align_corners", [False, True])
def test_model_input_matches_cpu_bit_exact(rng, dtype, layout, channels, align_corners):
    image = rng.integers(0, 256, (2, 251, 251), dtype=np.uint8)
    kwargs = dict(image_dtype=np.uint8, channels=channels, layout=layout, dtype=dtype, mean=0.45, std=0.22,
                  align_corners=align_corners)
    want = usbeam.ModelInputPlan(image.shape, 512, **kwargs)(image)
    plan = usbeam.ModelInputPlan(image.shape, 512, backend="cuda", **kwargs)
    out = empty(plan.shape, getattr(torch, dtype))
    plan(dev(image), out=out)
    np.testing.assert_array_equal(host(out).view(np.uint8), want.view(np.uint8))


def test_fp16_conversion_on_device_bit_exact(rng):
    halves = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16)
    out = empty(halves.shape, torch.float32)
    usbeam.float16_to_float32(dev(halves), out=out)
    np.testing.assert_array_equal(host(out).view(np.uint32), halves.astype(np.float32).view(np.uint32))
    values = rng.integers(0, 2**32, 1_000_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    out16 = empty(values.shape, torch.float16)
    usbeam.float32_to_float16(dev(values), out=out16)
    with np.errstate(over="ignore", invalid="ignore"):
        want = values.astype(np.float16)
    np.testing.assert_array_equal(host(out16).view(np.uint16), want.view(np.uint16))


def random_head(rng, batch, anchors, classes, quantize=None):
    raw = np.empty((batch, anchors, 5 + classes), np.float32)
    raw[..., 0:2] = rng.uniform(0, 512, (batch, anchors, 2))
    raw[..., 2:4] = rng.uniform(2, 100, (batch, anchors, 2))
    raw[..., 4:] = rng.random((batch, anchors, 1 + classes))
    if quantize:
        raw = np.round(raw * quantize) / quantize
    return raw.astype(np.float32)


@pytest.mark.parametrize("batch, anchors, classes, quantize, dtype", [
    (1, 16128, 2, None, np.float32), (4, 16128, 2, None, np.float16), (3, 2000, 5, 4, np.float32),
    (2, 100, 80, None, np.float32)])
def test_detect_matches_cpu_exact(rng, batch, anchors, classes, quantize, dtype):
    raw = random_head(rng, batch, anchors, classes, quantize).astype(dtype)
    kwargs = dict(dtype=dtype, conf=0.2, iou=0.45, max_det=300)
    want_det, want_counts = usbeam.DetectPlan(raw.shape, **kwargs)(raw)
    plan = usbeam.DetectPlan(raw.shape, backend="cuda", **kwargs)
    out = (torch.full((batch, 300, 6), float("nan"), device="cuda"), torch.full((batch,), -1, dtype=torch.int32,
                                                                                  device="cuda"))
    plan(dev(raw), out=out)
    np.testing.assert_array_equal(host(out[1]), want_counts)
    np.testing.assert_array_equal(host(out[0]), want_det)
    for b, rows in enumerate(ref_detect.detect(raw, 0.2, 0.45, 300)):
        np.testing.assert_array_equal(host(out[0])[b, : len(rows)], rows)


def test_detect_all_below_threshold_on_device(rng):
    raw = random_head(rng, 2, 500, 3)
    plan = usbeam.DetectPlan(raw.shape, conf=1.0, max_det=10, backend="cuda")
    out = (torch.full((2, 10, 6), 5.0, device="cuda"), torch.full((2,), 9, dtype=torch.int32, device="cuda"))
    plan(dev(raw), out=out)
    assert not host(out[0]).any() and not host(out[1]).any()


def test_detect_against_torchvision_on_device(rng):
    torchvision = pytest.importorskip("torchvision")
    raw = random_head(rng, 1, 16128, 1)
    raw[..., 5] = 1.0  # score = objectness: the boxes and scores torchvision sees
    plan = usbeam.DetectPlan(raw.shape, conf=-1.0, iou=0.5, max_det=16128, backend="cuda")
    out = (empty((1, 16128, 6), torch.float32), empty((1,), torch.int32))
    plan(dev(raw), out=out)
    det, count = host(out[0]), int(host(out[1])[0])
    cx, cy, w, h = (torch.from_numpy(raw[0, :, k]).cuda() for k in range(4))
    boxes = torch.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], dim=1)
    keep = torchvision.ops.nms(boxes, torch.from_numpy(raw[0, :, 4]).cuda(), 0.5).cpu().numpy()
    assert count == len(keep)
    np.testing.assert_array_equal(det[0, :count, 4], raw[0, keep, 4])


@pytest.mark.parametrize("connectivity", [4, 8])
def test_components_match_scipy_on_device(rng, connectivity):
    structure = ndimage.generate_binary_structure(2, 1) if connectivity == 4 else np.ones((3, 3), bool)
    masks = np.stack([rng.random((512, 512)) < 0.45,
                      ndimage.gaussian_filter(rng.standard_normal((512, 512)), 4) > 0.02,
                      (np.add.outer(np.arange(512), np.arange(512)) % 2).astype(bool)])
    plan = usbeam.ComponentsPlan(masks.shape, connectivity, backend="cuda")
    d_masks = dev(masks)
    labels, counts = empty(masks.shape, torch.int32), empty((3,), torch.int32)
    plan.label(d_masks, out=labels, counts=counts)
    filled, largest, kept = (empty(masks.shape, torch.bool) for _ in range(3))
    plan.fill_holes(d_masks, out=filled)
    plan.largest_component(d_masks, out=largest)
    plan.remove_small(d_masks, 5, out=kept)
    labels, counts = host(labels), host(counts)
    for k in range(3):
        want, n = ndimage.label(masks[k], structure)
        assert counts[k] == n
        np.testing.assert_array_equal(labels[k], want)
        np.testing.assert_array_equal(host(filled)[k], ndimage.binary_fill_holes(masks[k], structure))
        np.testing.assert_array_equal(host(largest)[k], usbeam.largest_component(masks[k], connectivity))
        np.testing.assert_array_equal(host(kept)[k], usbeam.remove_small_components(masks[k], 5, connectivity))


def test_regionprops_threshold_argmax_on_device(rng):
    mask = ndimage.gaussian_filter(rng.standard_normal((300, 200)), 3) > 0.05
    labels, n = usbeam.label(mask, 8)
    want = usbeam.regionprops_basic(labels, n)
    out = (empty((n,), torch.int32), empty((n, 4), torch.int32), empty((n, 2), torch.float64))
    usbeam.regionprops_basic_device(dev(labels), n, out)
    np.testing.assert_array_equal(host(out[0]), want["area"])
    np.testing.assert_array_equal(host(out[1]), want["bbox"])
    np.testing.assert_array_equal(host(out[2]), want["centroid"])
    logits = rng.standard_normal((2, 3, 64, 80)).astype(np.float32)
    binary = empty(logits.shape, torch.bool)
    usbeam.segment_threshold(dev(logits), 0.25, out=binary)
    np.testing.assert_array_equal(host(binary), logits > 0.25)
    classes = empty((2, 64, 80), torch.int32)
    usbeam.segment_argmax(dev(np.round(logits)), out=classes)
    np.testing.assert_array_equal(host(classes), np.argmax(np.round(logits), axis=1))


def test_stream_handling():
    """usbeam work queued on a caller's stream is ordered after the producer on that stream and
    before the consumer; on a second stream it is ordered by an event, with no host sync."""
    producer = torch.cuda.Stream()
    other = torch.cuda.Stream()
    plan = usbeam.ModelInputPlan((1, 2048, 2048), 512, image_dtype=np.float32, backend="cuda")
    image = torch.zeros((1, 2048, 2048), device="cuda")
    torch.cuda.synchronize()
    out = empty(plan.shape, torch.float32)
    with torch.cuda.stream(producer):
        torch.cuda._sleep(50_000_000)  # keep the stream busy so a missing dependency would show
        image.fill_(3.0)
        plan(image, out=out, stream=producer)  # same stream: ordered after fill_
        total = out.sum()
    producer.synchronize()
    assert float(total) == pytest.approx(3.0 * 512 * 512)
    # another stream: wait on an event recorded after the producer's write
    out2 = empty(plan.shape, torch.float32)
    with torch.cuda.stream(producer):
        torch.cuda._sleep(50_000_000)
        image.fill_(5.0)
        ready = torch.cuda.Event()
        ready.record(producer)
    other.wait_event(ready)
    plan(image, out=out2, stream=other)
    other.synchronize()
    assert float(out2.min()) == 5.0 and float(out2.max()) == 5.0


def test_cuda_plans_reject_host_arrays():
    plan = usbeam.ModelInputPlan((8, 8), 4, backend="cuda")
    with pytest.raises(TypeError, match="image"):
        plan(np.zeros((8, 8), np.uint8), out=empty(plan.shape, torch.float32))
    with pytest.raises(ValueError, match="out"):
        plan(dev(np.zeros((8, 8), np.uint8)))
    with pytest.raises(TypeError, match="out"):
        plan(dev(np.zeros((8, 8), np.uint8)), out=empty(plan.shape, torch.float16))
