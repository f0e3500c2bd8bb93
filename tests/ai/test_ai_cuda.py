"""CUDA half of the AI hand-off family: every GPU kernel (cuda/preprocess.cu, detect.cu,
segment.cu) against the CPU backend (bit-exact: both use the same float32 operation order,
see csrc/ai_math.h) and against independent peers (scipy.ndimage, tests/reference/ai_detect.py,
NumPy casts), with usbeam's own device arrays (usbeam.device), so no PyTorch is needed: the
tests run on a GPU and on the CUDA emulator (make test-emu).

Outputs are poisoned before each run (NaN, out-of-range integers, mask bytes that are neither
0 nor 1) and every element is checked.  Stream ordering: device arrays produced on one stream
and consumed on another, with no host synchronisation in between.  The tests that exchange
with PyTorch / torchvision skip without them."""
import gc
import weakref
from types import SimpleNamespace

import numpy as np
import pytest
from scipy import ndimage

import usbeam
from usbeam import device
from reference import ai_detect as ref_detect

pytestmark = pytest.mark.cuda

MASK_POISON = 0xA5  # a mask byte no kernel writes: an unwritten element shows


def dev(array):
    return device.from_numpy(np.ascontiguousarray(array))


def poisoned(shape, dtype):
    """A device array whose every element is a value the kernel under test never writes."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return dev(np.full(shape, MASK_POISON, np.uint8).view(np.bool_))
    if dtype.kind == "f":
        return dev(np.full(shape, np.nan, dtype))
    return dev(np.full(shape, np.iinfo(dtype).min, dtype))


def mask_bytes(array):
    """A bool device array's bytes on the host: 0/1 where written, MASK_POISON where not."""
    return array.to_numpy().view(np.uint8)


def torch_cuda():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch without CUDA")
    return torch


# ---------------------------------------------------------------- pre-processing


@pytest.mark.parametrize("image_dtype, image_shape, dtype, layout, channels", [
    (np.uint8, (2, 251, 251), "float32", "nchw", 1), (np.uint8, (2, 251, 251), "float16", "nhwc", 3),
    (np.uint8, (2, 251, 251), "float32", "nhwc", 3), (np.float32, (97, 130), "float16", "nchw", 3),
    (np.float16, (2, 61, 83, 3), "float32", "nhwc", 3)])
@pytest.mark.parametrize("align_corners", [False, True])
def test_model_input_matches_cpu_bit_exact(rng, image_dtype, image_shape, dtype, layout, channels, align_corners):
    if image_dtype == np.uint8:
        image = rng.integers(0, 256, image_shape, dtype=np.uint8)
    else:
        image = rng.standard_normal(image_shape).astype(image_dtype)
    kwargs = dict(image_dtype=image_dtype, channels=channels, layout=layout, dtype=dtype,
                  mean=[0.45, 0.4, 0.5][:channels], std=0.22, align_corners=align_corners)
    size = (200, 300) if image_dtype == np.uint8 else (128, 96)
    want = usbeam.ModelInputPlan(image.shape, size, **kwargs)(image)
    plan = usbeam.ModelInputPlan(image.shape, size, backend="cuda", **kwargs)
    out = poisoned(plan.shape, dtype)
    assert plan(dev(image), out=out) is out
    got = out.to_numpy()
    assert np.isfinite(got).all()  # every element written (the poison is NaN)
    np.testing.assert_array_equal(got.view(np.uint16 if dtype == "float16" else np.uint32),
                                  want.view(np.uint16 if dtype == "float16" else np.uint32))


def test_fp16_conversion_on_device_bit_exact(rng):
    halves = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16)  # every half, NaNs too
    out = dev(np.full(halves.shape, 0x7FBADBAD, np.uint32).view(np.float32))  # a NaN no conversion makes
    assert usbeam.float16_to_float32(dev(halves), out=out) is out
    np.testing.assert_array_equal(out.to_numpy().view(np.uint32), halves.astype(np.float32).view(np.uint32))
    values = rng.integers(0, 2**32, 200_003, dtype=np.uint64).astype(np.uint32).view(np.float32)  # any bits
    values[:4] = [65504.0, 65520.0, 2.0**-25, -(2.0**-24) * 1.5]  # largest half, overflow, ties to even
    out16 = dev(np.full(values.shape, 0x7DAD, np.uint16).view(np.float16))
    usbeam.float32_to_float16(dev(values), out=out16)
    with np.errstate(over="ignore", invalid="ignore"):
        want = values.astype(np.float16)
    np.testing.assert_array_equal(out16.to_numpy().view(np.uint16), want.view(np.uint16))


# ---------------------------------------------------------------- detection


def random_head(rng, batch, anchors, classes, quantize=None):
    raw = np.empty((batch, anchors, 5 + classes), np.float32)
    raw[..., 0:2] = rng.uniform(0, 512, (batch, anchors, 2))
    raw[..., 2:4] = rng.uniform(2, 100, (batch, anchors, 2))
    raw[..., 4:] = rng.random((batch, anchors, 1 + classes))
    if quantize:  # many equal scores: the tie order (lower anchor first) is exercised
        raw = np.round(raw * quantize) / quantize
    return raw.astype(np.float32)


@pytest.mark.parametrize("batch, anchors, classes, quantize, dtype, agnostic", [
    (1, 16128, 2, None, np.float32, False), (4, 6000, 2, None, np.float16, False),
    (3, 2000, 5, 4, np.float32, False), (2, 100, 80, None, np.float32, False), (2, 3000, 3, 8, np.float32, True)])
def test_detect_matches_cpu_exact(rng, batch, anchors, classes, quantize, dtype, agnostic):
    raw = random_head(rng, batch, anchors, classes, quantize).astype(dtype)
    kwargs = dict(dtype=dtype, conf=0.2, iou=0.45, max_det=300, class_agnostic=agnostic)
    want_det, want_counts = usbeam.DetectPlan(raw.shape, **kwargs)(raw)
    plan = usbeam.DetectPlan(raw.shape, backend="cuda", **kwargs)
    out = (poisoned((batch, 300, 6), np.float32), poisoned((batch,), np.int32))
    assert plan(dev(raw), out=out) is out
    det, counts = out[0].to_numpy(), out[1].to_numpy()
    np.testing.assert_array_equal(counts, want_counts)
    np.testing.assert_array_equal(det, want_det)  # NaN poison left anywhere fails here
    if agnostic:
        return  # the reference below is torchvision's batched_nms, i.e. class-aware
    for b, rows in enumerate(ref_detect.detect(raw, 0.2, 0.45, 300)):
        assert counts[b] == len(rows)
        np.testing.assert_array_equal(det[b, : len(rows)], rows)
        assert not det[b, len(rows):].any()


def test_detect_max_candidates_and_max_det_on_device(rng):
    """The top-K cut (K not a multiple of 64) and an early stop of the walk at max_det."""
    raw = random_head(rng, 2, 4000, 3)
    for max_candidates, max_det in [(1000, 300), (4000, 7), (65, 65)]:
        kwargs = dict(conf=0.1, iou=0.3, max_det=max_det, max_candidates=max_candidates)
        want_det, want_counts = usbeam.DetectPlan(raw.shape, **kwargs)(raw)
        out = (poisoned((2, max_det, 6), np.float32), poisoned((2,), np.int32))
        usbeam.DetectPlan(raw.shape, backend="cuda", **kwargs)(dev(raw), out=out)
        np.testing.assert_array_equal(out[1].to_numpy(), want_counts)
        np.testing.assert_array_equal(out[0].to_numpy(), want_det)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("agnostic", [False, True])
def test_detect_non_finite_heads_match_reference(rng, dtype, agnostic):
    """NaN / inf coordinates and scores (a diverged model): the CUDA twin keeps torchvision's
    semantics (the CPU refuses such a head), i.e. the rows of the reference, NaN boxes and the
    NaN-propagating class offset included."""
    raw = random_head(rng, 2, 700, 3)
    raw[0, ::37, 0] = np.nan
    raw[1, ::41, 6] = np.nan
    raw[1, ::43, 2] = np.inf
    raw[0, ::51, 4] = np.nan
    raw = raw.astype(dtype)
    kwargs = dict(dtype=dtype, conf=0.1, iou=0.5, max_det=100, class_agnostic=agnostic)
    out = (dev(np.full((2, 100, 6), 0x7FBADBAD, np.uint32).view(np.float32)), poisoned((2,), np.int32))
    usbeam.DetectPlan(raw.shape, backend="cuda", **kwargs)(dev(raw), out=out)
    det, counts = out[0].to_numpy(), out[1].to_numpy()
    with np.errstate(invalid="ignore", over="ignore"):  # inf boxes: inf - inf, 0 * inf in the reference
        want = ref_detect.detect(raw, 0.1, 0.5, 100, class_agnostic=agnostic)
    for b, rows in enumerate(want):
        assert counts[b] == len(rows)
        np.testing.assert_array_equal(det[b, : len(rows)], rows)  # NaN where the reference has NaN
        assert not det[b, len(rows):].any()


def test_detect_all_below_threshold_on_device(rng):
    raw = random_head(rng, 2, 500, 3)
    plan = usbeam.DetectPlan(raw.shape, conf=1.0, max_det=10, backend="cuda")
    out = (dev(np.full((2, 10, 6), 5.0, np.float32)), dev(np.full((2,), 9, np.int32)))
    plan(dev(raw), out=out)
    assert not out[0].to_numpy().any() and not out[1].to_numpy().any()


def test_detect_against_torchvision_on_device(rng):
    torch = torch_cuda()
    torchvision = pytest.importorskip("torchvision")
    raw = random_head(rng, 1, 16128, 1)
    raw[..., 5] = 1.0  # score = objectness: the boxes and scores torchvision sees
    # conf 0 keeps every anchor: rng.random's scores are > 0 (conf < 0 is refused)
    plan = usbeam.DetectPlan(raw.shape, conf=0.0, iou=0.5, max_det=16128, backend="cuda")
    out = (torch.empty((1, 16128, 6), dtype=torch.float32, device="cuda"),
           torch.empty((1,), dtype=torch.int32, device="cuda"))
    plan(torch.from_numpy(raw).cuda(), out=out)
    torch.cuda.synchronize()
    det, count = out[0].cpu().numpy(), int(out[1].cpu().numpy()[0])
    cx, cy, w, h = (torch.from_numpy(raw[0, :, k]).cuda() for k in range(4))
    boxes = torch.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], dim=1)
    keep = torchvision.ops.nms(boxes, torch.from_numpy(raw[0, :, 4]).cuda(), 0.5).cpu().numpy()
    assert count == len(keep)
    np.testing.assert_array_equal(det[0, :count, 4], raw[0, keep, 4])


# ---------------------------------------------------------------- segmentation


def random_masks(rng, n=512):
    return np.stack([rng.random((n, n)) < 0.45,  # percolation-like: many components, long chains
                     ndimage.gaussian_filter(rng.standard_normal((n, n)), 4) > 0.02,  # blobs with holes
                     (np.add.outer(np.arange(n), np.arange(n)) % 2).astype(bool)])  # checkerboard


@pytest.mark.parametrize("mask_dtype", [np.bool_, np.uint8])
@pytest.mark.parametrize("connectivity", [4, 8])
def test_components_match_scipy_on_device(rng, connectivity, mask_dtype):
    structure = ndimage.generate_binary_structure(2, 1) if connectivity == 4 else np.ones((3, 3), bool)
    masks = random_masks(rng)
    plan = usbeam.ComponentsPlan(masks.shape, connectivity, backend="cuda")
    host_masks = masks if mask_dtype == np.bool_ else masks.astype(np.uint8) * 7  # any non-zero byte is set
    d_masks = dev(host_masks)
    labels, counts = poisoned(masks.shape, np.int32), poisoned((3,), np.int32)
    assert plan.label(d_masks, out=labels, counts=counts) == (labels, counts)
    filled, largest, kept = (poisoned(masks.shape, np.bool_) for _ in range(3))
    plan.fill_holes(d_masks, out=filled)
    plan.largest_component(d_masks, out=largest)
    plan.remove_small(d_masks, 5, out=kept)
    labels, counts = labels.to_numpy(), counts.to_numpy()
    filled, largest, kept = mask_bytes(filled), mask_bytes(largest), mask_bytes(kept)
    for k in range(3):
        want, n = ndimage.label(masks[k], structure)
        assert counts[k] == n
        np.testing.assert_array_equal(labels[k], want)
        np.testing.assert_array_equal(filled[k], ndimage.binary_fill_holes(masks[k], structure))
        sizes = np.bincount(want.ravel())
        sizes[0] = 0
        np.testing.assert_array_equal(largest[k], want == np.argmax(sizes))  # ties: the lower label
        np.testing.assert_array_equal(kept[k], (sizes >= 5)[want])
        np.testing.assert_array_equal(largest[k], usbeam.largest_component(masks[k], connectivity))
    np.testing.assert_array_equal(d_masks.to_numpy(), host_masks)  # the input is not modified


def test_components_single_image_and_empty_mask(rng):
    """(H, W) plans; an all-background image (no component: count 0, nothing largest) and an
    all-foreground one (one component touching every border)."""
    for mask in (np.zeros((37, 53), bool), np.ones((37, 53), bool), rng.random((37, 53)) < 0.6):
        plan = usbeam.ComponentsPlan(mask.shape, 8, backend="cuda")
        labels, counts = poisoned(mask.shape, np.int32), poisoned((1,), np.int32)
        plan.label(dev(mask), out=labels, counts=counts)
        want, n = ndimage.label(mask, np.ones((3, 3), bool))
        np.testing.assert_array_equal(labels.to_numpy(), want)
        assert counts.to_numpy()[0] == n
        largest, filled = poisoned(mask.shape, np.bool_), poisoned(mask.shape, np.bool_)
        plan.largest_component(dev(mask), out=largest)
        plan.fill_holes(dev(mask), out=filled)
        np.testing.assert_array_equal(mask_bytes(largest), usbeam.largest_component(mask, 8))
        np.testing.assert_array_equal(mask_bytes(filled), ndimage.binary_fill_holes(mask, np.ones((3, 3), bool)))


@pytest.mark.parametrize("shape", [(1, 50), (50, 1), (1, 1), (3, 1, 7), (2, 2, 2)])
@pytest.mark.parametrize("connectivity", [4, 8])
def test_components_of_thin_images_on_device(rng, shape, connectivity):
    """Images one pixel high or wide (every pixel on the border) and batches of them."""
    masks = rng.random(shape) < 0.5
    n_images = shape[0] if len(shape) == 3 else 1
    plan = usbeam.ComponentsPlan(shape, connectivity, backend="cuda")
    cpu = usbeam.ComponentsPlan(shape, connectivity)
    d_masks = dev(masks)
    labels, counts = poisoned(shape, np.int32), poisoned((n_images,), np.int32)
    plan.label(d_masks, out=labels, counts=counts)
    want_labels, want_counts = cpu.label(masks)
    np.testing.assert_array_equal(labels.to_numpy(), want_labels)
    np.testing.assert_array_equal(counts.to_numpy(), want_counts)
    for operation, args in (("fill_holes", ()), ("largest_component", ()), ("remove_small", (2,))):
        out = poisoned(shape, np.bool_)
        getattr(plan, operation)(d_masks, *args, out=out)
        np.testing.assert_array_equal(mask_bytes(out), getattr(cpu, operation)(masks, *args), err_msg=operation)


def test_regionprops_on_device(rng):
    mask = ndimage.gaussian_filter(rng.standard_normal((300, 200)), 3) > 0.05
    labels, n = usbeam.label(mask, 8)
    n_labels = n + 2  # two absent labels: area 0, bbox 0, NaN centroid
    want = usbeam.regionprops_basic(labels, n_labels)
    out = (poisoned((n_labels,), np.int32), poisoned((n_labels, 4), np.int32), poisoned((n_labels, 2), np.float64))
    assert usbeam.regionprops_basic_device(dev(labels), n_labels, out) is out
    area, bbox, centroid = (a.to_numpy() for a in out)
    np.testing.assert_array_equal(area, want["area"])
    np.testing.assert_array_equal(bbox, want["bbox"])
    np.testing.assert_array_equal(centroid, want["centroid"])
    assert np.isnan(centroid[n:]).all() and not area[n:].any() and not bbox[n:].any()
    for k in range(n):  # independent of usbeam's CPU code
        rows, cols = np.nonzero(labels == k + 1)
        assert area[k] == rows.size
        np.testing.assert_array_equal(bbox[k], [rows.min(), cols.min(), rows.max() + 1, cols.max() + 1])
        np.testing.assert_allclose(centroid[k], [rows.mean(), cols.mean()], rtol=1e-13)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_threshold_and_argmax_on_device(rng, dtype):
    logits = rng.standard_normal((2, 3, 64, 80)).astype(dtype)
    logits.flat[::97] = 0.25  # exactly at the threshold: not set (strictly greater)
    binary = poisoned(logits.shape, np.bool_)
    assert usbeam.segment_threshold(dev(logits), 0.25, out=binary) is binary
    np.testing.assert_array_equal(mask_bytes(binary), logits.astype(np.float64) > 0.25)
    scores = np.round(logits * 2)  # ties: the lower class wins
    scores[0, 1, 5, :7] = np.nan  # numpy.argmax: the first NaN
    scores[1, :, 9, 3] = np.nan
    classes = poisoned((2, 64, 80), np.int32)
    assert usbeam.segment_argmax(dev(scores), out=classes) is classes
    np.testing.assert_array_equal(classes.to_numpy(), np.argmax(scores, axis=1))
    single = poisoned((64, 80), np.int32)
    usbeam.segment_argmax(dev(scores[1]), out=single)
    np.testing.assert_array_equal(single.to_numpy(), np.argmax(scores[1], axis=0))


# ---------------------------------------------------------------- streams


def test_stream_ordering_without_torch(rng):
    """Device arrays handed between streams with no host synchronisation: a B-mode plan's
    output (pending on the plan's own non-blocking stream) is pre-processed on the legacy
    default stream, then on a third stream (another plan's) into a model input that is
    thresholded on the per-thread default stream and read back.  Each hand-over must be
    ordered by the library (events), or a stale / unwritten buffer shows."""
    iq = (rng.standard_normal((1, 160, 128)) + 1j * rng.standard_normal((1, 160, 128))).astype(np.complex64)
    bmode = usbeam.BModePlan(iq.shape, 40.0, output="db", backend="cuda")
    other = usbeam.BModePlan((8, 8), 40.0, backend="cuda")  # only for its own stream
    assert bmode.cuda.stream != other.cuda.stream
    d_iq = dev(iq)  # kept alive: freeing it would wait for the plan (a host synchronisation)
    image = bmode(d_iq)
    assert image.stream == bmode.cuda.stream  # its writes are still pending there
    prep_kwargs = dict(image_dtype=np.float32, mean=-20.0, std=10.0)
    prep = usbeam.ModelInputPlan(image.shape, (96, 64), backend="cuda", **prep_kwargs)
    want_image = usbeam.BModePlan(iq.shape, 40.0, output="db")(iq)
    want_input = usbeam.ModelInputPlan(image.shape, (96, 64), **prep_kwargs)(want_image)

    first = poisoned(prep.shape, np.float32)
    prep(image, out=first)  # stream=None: the legacy default stream
    second = poisoned(prep.shape, np.float32)
    prep(image, out=second, stream=SimpleNamespace(ptr=other.cuda.stream))  # a CuPy-like stream object
    mask = poisoned(prep.shape, np.bool_)
    usbeam.segment_threshold(second, 0.0, out=mask, stream=2)
    np.testing.assert_array_equal(mask_bytes(mask), want_input > 0)
    np.testing.assert_array_equal(first.to_numpy(), want_input)
    np.testing.assert_array_equal(second.to_numpy(), want_input)

    # a device array rewritten on one stream and read on another: the reader waits for the write
    halves = dev(np.zeros(prep.shape, np.float16))
    usbeam.float32_to_float16(second, out=halves, stream=other.cuda.stream)
    back = poisoned(prep.shape, np.float32)
    usbeam.float16_to_float32(halves, out=back, stream=bmode.cuda.stream)
    np.testing.assert_array_equal(back.to_numpy(), want_input.astype(np.float16).astype(np.float32))


class Alias:
    """The memory of a device array through the CUDA array interface with some of its fields
    changed; by default without its pending stream: reading it orders nothing, so it shows what
    has run so far."""

    def __init__(self, array, **changes):
        self.owner = array
        self.__cuda_array_interface__ = dict(array.__cuda_array_interface__, stream=None, **changes)


def test_plan_reused_on_another_stream_waits_for_its_previous_execute(rng):
    """A components or detection plan's device scratch serves one execute at a time: executing it
    on a second stream orders that execute after the first one (an event), so once the second
    stream has finished, the first execute has too."""
    keep_alive = [usbeam.BModePlan((8, 8), 40.0, backend="cuda") for _ in range(2)]
    first_stream, second_stream = (p.cuda.stream for p in keep_alive)
    masks = rng.random((2, 2, 64, 48)) < 0.5
    plan = usbeam.ComponentsPlan(masks.shape[1:], 8, backend="cuda")
    outs = [(poisoned(masks.shape[1:], np.int32), poisoned((2,), np.int32)) for _ in range(2)]
    d_masks = [dev(m) for m in masks]
    plan.label(d_masks[0], out=outs[0][0], counts=outs[0][1], stream=first_stream)
    plan.label(d_masks[1], out=outs[1][0], counts=outs[1][1], stream=second_stream)
    usbeam._core.stream_synchronize(second_stream)
    for mask, (labels, counts) in zip(masks, outs):
        got = device.asarray(Alias(labels)).to_numpy()
        for k in range(2):
            np.testing.assert_array_equal(got[k], ndimage.label(mask[k], np.ones((3, 3), bool))[0])

    raw = random_head(rng, 2, 3000, 2)
    detect = usbeam.DetectPlan(raw.shape, conf=0.3, max_det=50, backend="cuda")
    want = usbeam.DetectPlan(raw.shape, conf=0.3, max_det=50)(raw)[0]
    d_raw = dev(raw)
    outs = [(poisoned((2, 50, 6), np.float32), poisoned((2,), np.int32)) for _ in range(2)]
    detect(d_raw, out=outs[0], stream=first_stream)
    detect(d_raw, out=outs[1], stream=second_stream)
    usbeam._core.stream_synchronize(second_stream)
    for detections, _ in outs:
        np.testing.assert_array_equal(device.asarray(Alias(detections)).to_numpy(), want)


def test_stream_handling_with_torch():
    """usbeam work queued on a caller's torch stream is ordered after the producer on that stream
    and before the consumer; on a second stream it is ordered by an event, with no host sync."""
    torch = torch_cuda()
    producer = torch.cuda.Stream()
    other = torch.cuda.Stream()
    plan = usbeam.ModelInputPlan((1, 2048, 2048), 512, image_dtype=np.float32, backend="cuda")
    image = torch.zeros((1, 2048, 2048), device="cuda")
    torch.cuda.synchronize()
    out = torch.empty(plan.shape, dtype=torch.float32, device="cuda")
    with torch.cuda.stream(producer):
        torch.cuda._sleep(50_000_000)  # keep the stream busy so a missing dependency would show
        image.fill_(3.0)
        plan(image, out=out, stream=producer)  # same stream: ordered after fill_
        total = out.sum()
    producer.synchronize()
    assert float(total) == pytest.approx(3.0 * 512 * 512)
    out2 = torch.empty(plan.shape, dtype=torch.float32, device="cuda")
    with torch.cuda.stream(producer):
        torch.cuda._sleep(50_000_000)
        image.fill_(5.0)
        ready = torch.cuda.Event()
        ready.record(producer)
    other.wait_event(ready)
    plan(image, out=out2, stream=other)
    other.synchronize()
    assert float(out2.min()) == 5.0 and float(out2.max()) == 5.0


def test_torch_bool_masks_on_device(rng):
    """torch.bool masks in and out (DLPack kDLBool), as a segmentation model's output is."""
    torch = torch_cuda()
    mask = rng.random((2, 64, 64)) < 0.5
    plan = usbeam.ComponentsPlan(mask.shape, 4, backend="cuda")
    out = torch.empty(mask.shape, dtype=torch.bool, device="cuda")
    plan.fill_holes(torch.from_numpy(mask).cuda(), out=out)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(out.cpu().numpy(), np.stack([ndimage.binary_fill_holes(m) for m in mask]))


# ---------------------------------------------------------------- bad input


def test_cuda_plans_reject_bad_device_arguments():
    plan = usbeam.ModelInputPlan((8, 8), 4, backend="cuda")
    with pytest.raises(TypeError, match="image"):
        plan(np.zeros((8, 8), np.uint8), out=device.empty(plan.shape, np.float32))
    with pytest.raises(ValueError, match="out"):
        plan(dev(np.zeros((8, 8), np.uint8)))
    with pytest.raises(TypeError, match="out"):
        plan(dev(np.zeros((8, 8), np.uint8)), out=device.empty(plan.shape, np.float16))
    with pytest.raises(ValueError, match="image"):
        plan(dev(np.zeros((8, 9), np.uint8)), out=device.empty(plan.shape, np.float32))
    components = usbeam.ComponentsPlan((8, 8), backend="cuda")
    with pytest.raises(TypeError, match="out"):
        components.fill_holes(dev(np.zeros((8, 8), bool)), out=device.empty((8, 8), np.int32))
    with pytest.raises(TypeError, match="mask"):
        components.fill_holes(dev(np.zeros((8, 8), np.float32)), out=device.empty((8, 8), bool))
    with pytest.raises(ValueError, match="counts"):
        components.label(dev(np.zeros((8, 8), bool)), out=device.empty((8, 8), np.int32))
    with pytest.raises(TypeError, match="logits"):
        usbeam.segment_threshold(dev(np.zeros((4, 4), np.int32)), out=device.empty((4, 4), bool))
    read_only = device.empty((4,), np.float32)
    with pytest.raises(ValueError, match="out is read-only"):
        usbeam.float16_to_float32(dev(np.zeros(4, np.float16)), out=Alias(read_only, data=(read_only.ptr, True)))


def test_outputs_sharing_memory_with_another_argument_are_refused():
    """The kernels read their inputs while other threads write the outputs: no aliasing."""
    logits = dev(np.zeros((4, 8), np.float32))
    with pytest.raises(ValueError, match="out must not share memory with logits"):
        usbeam.segment_threshold(logits, out=Alias(logits, typestr="|b1"))
    plan = usbeam.ComponentsPlan((2, 8, 8), backend="cuda")
    labels = device.empty((2, 8, 8), np.int32)
    with pytest.raises(ValueError, match="counts must not share memory with out"):
        plan.label(dev(np.ones((2, 8, 8), bool)), out=labels, counts=Alias(labels, shape=(2,)))
    mask = dev(np.ones((2, 8, 8), np.uint8))
    with pytest.raises(ValueError, match="out must not share memory with mask"):
        plan.fill_holes(mask, out=Alias(mask, typestr="|b1"))
    halves = dev(np.zeros(16, np.float16))
    with pytest.raises(ValueError, match="out must not share memory with x"):
        usbeam.float16_to_float32(halves[:8], out=Alias(halves, typestr="<f4", shape=(8,)))


# ---------------------------------------------------------------- plan.cuda (the common seam)


def small_inputs(rng):
    """One input per AI plan, with its CPU result: (plan, call, want) triples."""
    image = rng.standard_normal((2, 40, 50)).astype(np.float32)
    prep = usbeam.ModelInputPlan(image.shape, (24, 32), image_dtype=np.float32, backend="cuda")
    want_input = usbeam.ModelInputPlan(image.shape, (24, 32), image_dtype=np.float32)(image)
    raw = random_head(rng, 2, 300, 3)
    detect = usbeam.DetectPlan(raw.shape, conf=0.2, max_det=20, backend="cuda")
    want_det = usbeam.DetectPlan(raw.shape, conf=0.2, max_det=20)(raw)
    return dev(image), prep, want_input, dev(raw), detect, want_det


def test_ai_plans_expose_their_cuda_state(rng):
    """Every AI plan has plan.cuda as the other families do: None on the CPU; on CUDA its
    device, its own stream, the device memory it holds, and the stage times of its last call,
    one named stage per step of the twin (only those the operation ran)."""
    assert usbeam.ModelInputPlan((8, 8), 4).cuda is None
    assert usbeam.DetectPlan((1, 10, 7)).cuda is None
    assert usbeam.ComponentsPlan((8, 8)).cuda is None
    d_image, prep, want_input, d_raw, detect, want_det = small_inputs(rng)
    components = usbeam.ComponentsPlan((2, 24, 32), 8, backend="cuda")
    for plan in (prep, detect, components):
        assert isinstance(plan.cuda, device.CudaExecution)
        assert plan.cuda.device == 0 and plan.cuda.device_bytes > 0
        assert plan.cuda.stage_times() == {}  # nothing ran yet
    assert prep.cuda.stream not in (detect.cuda.stream, components.cuda.stream)  # each has its own

    model_input = poisoned(prep.shape, np.float32)
    prep(d_image, out=model_input)
    assert set(prep.cuda.stage_times()) == {"preprocess.resize"}
    np.testing.assert_array_equal(model_input.to_numpy(), want_input)

    out = (poisoned((2, 20, 6), np.float32), poisoned((2,), np.int32))
    detect(d_raw, out=out)
    times = detect.cuda.stage_times()
    assert list(times) == ["detect.decode", "detect.sort", "detect.overlap", "detect.nms"]
    assert all(t >= 0.0 for t in times.values())
    np.testing.assert_array_equal(out[0].to_numpy(), want_det[0])

    mask = dev(want_input[:, 0] > 0)
    labels, counts = poisoned((2, 24, 32), np.int32), poisoned((2,), np.int32)
    components.label(mask, out=labels, counts=counts)
    assert list(components.cuda.stage_times()) == ["components.union_find", "components.number"]
    components.fill_holes(mask, out=poisoned((2, 24, 32), np.bool_))
    assert list(components.cuda.stage_times()) == ["components.union_find", "components.fill"]
    for operation, args in (("largest_component", ()), ("remove_small", (3,))):
        getattr(components, operation)(mask, *args, out=poisoned((2, 24, 32), np.bool_))
        assert list(components.cuda.stage_times()) == ["components.union_find", "components.select"]
    cpu = usbeam.ComponentsPlan((2, 24, 32), 8)
    np.testing.assert_array_equal(labels.to_numpy(), cpu.label(want_input[:, 0] > 0)[0])


def test_set_stream_is_the_stream_of_calls_without_stream(rng):
    """plan.cuda.set_stream(s) makes s the stream of the calls that give no stream= (the
    DeviceArrays they use then record s); set_stream(None) returns to the documented default,
    the legacy default stream; a per-call stream= is for that call only."""
    d_image, prep, want_input, d_raw, detect, want_det = small_inputs(rng)
    keep = usbeam.BModePlan((8, 8), 40.0, backend="cuda")  # a stream that outlives the calls
    own = prep.cuda.stream
    prep.cuda.set_stream(keep.cuda.stream)
    assert prep.cuda.stream == keep.cuda.stream
    out = poisoned(prep.shape, np.float32)
    prep(d_image, out=out)
    assert out.stream == keep.cuda.stream
    usbeam._core.stream_synchronize(keep.cuda.stream)
    np.testing.assert_array_equal(device.asarray(Alias(out)).to_numpy(), want_input)
    other = poisoned(prep.shape, np.float32)
    prep(d_image, out=other, stream=2)  # the per-thread default stream, for this call only
    assert prep.cuda.stream == keep.cuda.stream and other.stream == 2
    prep.cuda.set_stream(None)
    assert prep.cuda.stream == own
    np.testing.assert_array_equal(other.to_numpy(), want_input)

    detect.cuda.set_stream(keep.cuda.stream)
    out = (poisoned((2, 20, 6), np.float32), poisoned((2,), np.int32))
    detect(d_raw, out=out)
    assert out[0].stream == keep.cuda.stream
    usbeam._core.stream_synchronize(keep.cuda.stream)
    np.testing.assert_array_equal(device.asarray(Alias(out[0])).to_numpy(), want_det[0])
    detect.cuda.set_stream(None)


def test_a_call_keeps_no_reference_to_its_stream(rng):
    """A stream given to one call may be destroyed after it (with the arrays that recorded it),
    as before the plans had a stream: the plan switches back to its own after the call (which
    waits for it), so neither its next call nor its destruction touches the destroyed stream."""
    d_image, prep, want_input, d_raw, detect, want_det = small_inputs(rng)
    components = usbeam.ComponentsPlan((24, 32), 4, backend="cuda")
    mask = want_input[0, 0] > 0
    owns = [plan.cuda.stream for plan in (prep, detect, components)]
    temporary = usbeam.BModePlan((8, 8), 40.0, backend="cuda")
    stream = temporary.cuda.stream
    used = [dev(d_image.to_numpy()), poisoned(prep.shape, np.float32), dev(d_raw.to_numpy()),
            poisoned((2, 20, 6), np.float32), poisoned((2,), np.int32), dev(mask), poisoned((24, 32), np.bool_)]
    prep(used[0], out=used[1], stream=stream)
    detect(used[2], out=(used[3], used[4]), stream=stream)
    components.fill_holes(used[5], out=used[6], stream=stream)
    assert [plan.cuda.stream for plan in (prep, detect, components)] == owns
    assert all(array.stream == stream for array in used)  # what the call's stream orders
    del temporary, used  # destroys the stream (after finishing what was queued there)
    gc.collect()
    out = poisoned(prep.shape, np.float32)
    prep(d_image, out=out)
    np.testing.assert_array_equal(out.to_numpy(), want_input)
    filled = poisoned((24, 32), np.bool_)
    components.fill_holes(dev(mask), out=filled)
    np.testing.assert_array_equal(mask_bytes(filled), ndimage.binary_fill_holes(mask))
    del prep, detect, components
    gc.collect()


def test_non_finite_input_reported_by_the_plan(rng):
    """The CPU refuses NaN / inf in a model input image or a raw head; the CUDA plans flag what
    their kernels read and raise the same ValueError when the host meets the result: on
    synchronize() (reported once) or at the plan's next call (naming the earlier call).  The
    outputs follow the kernels' rules (detections: torchvision's)."""
    image = rng.standard_normal((1, 32, 32)).astype(np.float32)
    bad = image.copy()
    bad[0, 9, 13] = np.nan
    with pytest.raises(ValueError, match="image contains NaN or infinite"):
        usbeam.model_input(bad, 16)
    plan = usbeam.ModelInputPlan(image.shape, 16, image_dtype=np.float32, backend="cuda")
    out = poisoned(plan.shape, np.float32)
    plan(dev(bad), out=out)
    with pytest.raises(ValueError, match="^image contains NaN or infinite"):
        plan.cuda.synchronize()
    plan.cuda.synchronize()  # reported once
    plan(dev(bad), out=out)
    plan.cuda.stage_times()  # waits for the work without checking
    with pytest.raises(ValueError, match="^an earlier call's image contains NaN"):
        plan(dev(image), out=out)
    plan(dev(image), out=out)
    np.testing.assert_array_equal(out.to_numpy(), usbeam.model_input(image, 16))
    plan.cuda.synchronize()  # the clean call reports nothing

    raw = random_head(rng, 1, 200, 2)
    raw[0, 17, 5] = np.inf
    detect = usbeam.DetectPlan(raw.shape, conf=0.1, max_det=20, backend="cuda")
    out = (poisoned((1, 20, 6), np.float32), poisoned((1,), np.int32))
    detect(dev(raw), out=out)
    with pytest.raises(ValueError, match="^raw contains NaN or infinite"):
        detect.cuda.synchronize()


def test_pixels_a_shrinking_resize_skips_are_not_read(rng):
    """A resize that shrinks by 4 reads two of every four columns: a NaN in a column no output
    reads changes nothing and is not reported (the CPU, which checks every pixel, refuses it)."""
    image = rng.standard_normal((1, 8, 8)).astype(np.float32)
    bad = image.copy()
    bad[0, 0, 0] = np.nan  # taps of 8 -> 2: sources 1.5 and 5.5, pixels 1, 2, 5, 6
    plan = usbeam.ModelInputPlan(image.shape, 2, image_dtype=np.float32, backend="cuda")
    out = poisoned(plan.shape, np.float32)
    plan(dev(bad), out=out)
    plan.cuda.synchronize()
    np.testing.assert_array_equal(out.to_numpy(), usbeam.model_input(image, 2))


def test_plan_call_captured_in_a_graph(rng):
    """Calls of a plan whose stream is being captured are recorded into the graph, stage events
    included, and the replay writes what the CPU computes.  As for usbeam.Pipeline, the plan is
    given the capturing stream before the capture begins and its arrays name that stream: a
    capture may not wait on work outside it, so a call that would switch the plan into the
    capture is refused, naming the way out."""
    image = rng.integers(0, 256, (2, 40, 50), dtype=np.uint8)
    plan = usbeam.ModelInputPlan(image.shape, (24, 32), backend="cuda")
    want = usbeam.ModelInputPlan(image.shape, (24, 32))(image)
    keep = usbeam.BModePlan((8, 8), 40.0, backend="cuda")
    stream = keep.cuda.stream
    d_image, d_zero, captured = dev(image), dev(np.zeros_like(image)), poisoned(plan.shape, np.float32)
    plan(d_image, out=captured, stream=stream)  # every array now names the capture stream
    plan(d_zero, out=captured, stream=stream)  # captured holds another image's input
    usbeam._core.stream_synchronize(stream)
    plan.cuda.synchronize()

    usbeam._core.graph_capture_begin(stream)  # the plan is on its own stream: refused
    with pytest.raises(usbeam.UsbeamError, match="plan.cuda.set_stream"):
        plan(d_image, out=captured, stream=stream)
    usbeam._core.graph_capture_abort(stream)
    assert plan.cuda.stream != stream

    plan.cuda.set_stream(stream)
    usbeam._core.graph_capture_begin(stream)
    try:
        plan(d_image, out=captured)  # on the plan's stream, the capturing one
    except BaseException:
        usbeam._core.graph_capture_abort(stream)
        raise
    graph = usbeam._core.graph_capture_end(stream, (plan,))
    zero_input = usbeam.ModelInputPlan(image.shape, (24, 32))(np.zeros_like(image))
    np.testing.assert_array_equal(device.asarray(Alias(captured)).to_numpy(), zero_input)  # nothing ran yet
    usbeam._core.graph_launch(graph, stream)
    usbeam._core.stream_synchronize(stream)
    np.testing.assert_array_equal(device.asarray(Alias(captured)).to_numpy(), want)
    assert set(plan.cuda.stage_times()) == {"preprocess.resize"}
    plan.cuda.set_stream(None)  # before keep (and its stream) goes
    # the graph's event-record nodes name the plan's stage events: the graph keeps the plan
    # alive, and lets go of it after the executable graph is destroyed
    alive = weakref.ref(plan)
    del plan
    gc.collect()
    assert alive() is not None
    del graph
    gc.collect()
    assert alive() is None


def test_invalidated_capture_leaves_later_calls_working(rng):
    """A capture broken by a forbidden call (here a synchronisation of the capturing stream,
    as a plan's destroy run by the collector inside the window would make) ends with an error
    naming cudaStreamEndCapture, and the error does not stay behind as the runtime's last
    error: the next plan call on that stream works and gives what the CPU computes."""
    image = rng.integers(0, 256, (2, 40, 50), dtype=np.uint8)
    keep = usbeam.BModePlan((8, 8), 40.0, backend="cuda")
    stream = keep.cuda.stream
    plan = usbeam.ModelInputPlan(image.shape, (24, 32), backend="cuda")
    plan.cuda.set_stream(stream)
    d_image, out = dev(image), poisoned(plan.shape, np.float32)
    usbeam._core.graph_capture_begin(stream)
    try:
        with pytest.raises(usbeam.UsbeamError):
            usbeam._core.stream_synchronize(stream)  # forbidden inside the capture
    except BaseException:
        usbeam._core.graph_capture_abort(stream)
        raise
    with pytest.raises(usbeam.UsbeamError, match="cudaStreamEndCapture"):
        usbeam._core.graph_capture_end(stream)
    plan(d_image, out=out)
    usbeam._core.stream_synchronize(stream)
    np.testing.assert_array_equal(device.asarray(Alias(out)).to_numpy(),
                                  usbeam.ModelInputPlan(image.shape, (24, 32))(image))
    plan.cuda.set_stream(None)  # before keep (and its stream) goes


def test_post_processing_chain_captured_with_imported_arrays(rng):
    """The post-processing around a model (benchmarks/bench_ai.py's chain: threshold, largest
    component, fill holes, label, region properties, detection) captured into one graph with
    every array imported per call, as PyTorch tensors are: no call may synchronise or query
    inside the capture, and the replay gives what the CPU computes."""
    size, n_anchors = 64, 500
    logits = ndimage.gaussian_filter(rng.standard_normal((1, 1, size, size)), (0, 0, 3, 3)).astype(np.float32)
    raw = random_head(rng, 1, n_anchors, 2)
    keep = usbeam.BModePlan((8, 8), 40.0, backend="cuda")
    stream = keep.cuda.stream
    components = usbeam.ComponentsPlan((size, size), 8, backend="cuda")
    detect = usbeam.DetectPlan((1, n_anchors, 7), conf=0.25, iou=0.45, max_det=50, backend="cuda")
    for plan in (components, detect):
        plan.cuda.set_stream(stream)
    mask, largest, filled = (poisoned((size, size), np.bool_) for _ in range(3))
    labels, n_labels = poisoned((size, size), np.int32), poisoned((1,), np.int32)
    props = (poisoned((1,), np.int32), poisoned((1, 4), np.int32), poisoned((1, 2), np.float64))
    detections, counts = poisoned((1, 50, 6), np.float32), poisoned((1,), np.int32)

    def chain(d_logits, d_raw):
        usbeam.segment_threshold(Alias(d_logits, shape=(size, size), strides=None), 0.0, out=Alias(mask), stream=stream)
        components.largest_component(Alias(mask), out=Alias(largest))
        components.fill_holes(Alias(largest), out=Alias(filled))
        components.label(Alias(filled), out=Alias(labels), counts=Alias(n_labels))
        usbeam.regionprops_basic_device(Alias(labels), 1, tuple(Alias(a) for a in props), stream=stream)
        detect(Alias(d_raw), out=(Alias(detections), Alias(counts)))

    chain(dev(np.zeros_like(logits)), dev(np.zeros_like(raw)))  # before the capture, other inputs
    usbeam._core.stream_synchronize(stream)
    d_logits, d_raw = dev(logits), dev(raw)
    # what earlier tests left to the collector (a plan in a reference cycle, whose destroy
    # synchronises and frees) is collected before the capture, as torch.cuda.graph and
    # Pipeline's capture do: the collection inside it then meets this chain's own garbage only
    gc.collect()
    usbeam._core.graph_capture_begin(stream)
    try:
        chain(d_logits, d_raw)
        gc.collect()
    except BaseException:
        usbeam._core.graph_capture_abort(stream)
        raise
    graph = usbeam._core.graph_capture_end(stream, (keep, components, detect))
    usbeam._core.graph_launch(graph, stream)
    usbeam._core.stream_synchronize(stream)

    want_largest = usbeam.largest_component(logits[0, 0] > 0, 8)
    want_filled = usbeam.fill_holes(want_largest, 8)
    want_labels, want_n = usbeam.label(want_filled, 8)
    np.testing.assert_array_equal(mask_bytes(largest), want_largest)
    np.testing.assert_array_equal(mask_bytes(filled), want_filled)
    np.testing.assert_array_equal(labels.to_numpy(), want_labels)
    assert n_labels.to_numpy()[0] == want_n
    want_props = usbeam.regionprops_basic(want_labels, 1)
    np.testing.assert_array_equal(props[0].to_numpy(), want_props["area"])
    np.testing.assert_array_equal(props[1].to_numpy(), want_props["bbox"])
    want_det, want_counts = usbeam.detect_postprocess(raw, 0.25, 0.45, 50)
    np.testing.assert_array_equal(counts.to_numpy(), want_counts)
    np.testing.assert_array_equal(detections.to_numpy()[0, :want_counts[0]], want_det[0, :want_counts[0]])
    for plan in (components, detect):
        plan.cuda.set_stream(None)


def test_plan_call_captured_with_imported_arrays(rng):
    """Arrays of another library (here through __cuda_array_interface__; a PyTorch tensor through
    DLPack in benchmarks/bench_ai.py) are imported for one call and let go at its end.  Letting
    go asks whether the work queued on them before is done, and a query is one of the calls
    CUDA forbids a thread that is capturing: unless it is asked in relaxed mode it invalidates
    the capture (on an H200 the next captured call, a convolution inside torch.cuda.graph,
    failed).  The capture holds, and the replay writes what the CPU computes."""
    image = rng.integers(0, 256, (2, 40, 50), dtype=np.uint8)
    plan = usbeam.ModelInputPlan(image.shape, (24, 32), backend="cuda")
    want = usbeam.ModelInputPlan(image.shape, (24, 32))(image)
    zero_input = usbeam.ModelInputPlan(image.shape, (24, 32))(np.zeros_like(image))
    keep = usbeam.BModePlan((8, 8), 40.0, backend="cuda")
    stream = keep.cuda.stream
    d_image, d_zero, captured = dev(image), dev(np.zeros_like(image)), poisoned(plan.shape, np.float32)
    plan.cuda.set_stream(stream)
    plan(Alias(d_zero), out=Alias(captured))  # before the capture: the imports' events recorded
    usbeam._core.stream_synchronize(stream)

    gc.collect()  # earlier tests' garbage before the capture (the test above)
    usbeam._core.graph_capture_begin(stream)
    try:
        plan(Alias(d_image), out=Alias(captured))  # imports let go inside the capture
        gc.collect()
    except BaseException:
        usbeam._core.graph_capture_abort(stream)
        raise
    graph = usbeam._core.graph_capture_end(stream, (plan,))
    np.testing.assert_array_equal(device.asarray(Alias(captured)).to_numpy(), zero_input)  # nothing ran yet
    usbeam._core.graph_launch(graph, stream)
    usbeam._core.stream_synchronize(stream)
    np.testing.assert_array_equal(device.asarray(Alias(captured)).to_numpy(), want)
    plan.cuda.set_stream(None)
