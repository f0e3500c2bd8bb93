"""AI model hand-off benchmark (issue #6): the time usbeam adds around a model, on the GPU.

GPU part (needs a CUDA device, a CUDA build of usbeam and PyTorch; skipped otherwise):
  chain  B-mode frame (uint8, already on the device: usbeam's B-mode has no CUDA kernel yet)
         -> usbeam.ModelInputPlan (resize to 512 x 512, normalise, NCHW, into the models' input)
         -> a small segmentation CNN and a small YOLO-style detector (PyTorch, untrained weights;
            with onnxruntime-gpu also exported to ONNX and run with IO binding on the same
            device buffers and usbeam's stream, via the CUDA EP's user_compute_stream)
         -> usbeam threshold, largest component, fill holes, region properties, detection
            post-processing.  Only the final detections are copied to the host.
  Every stage runs on one CUDA stream (PyTorch's current stream, handed to usbeam), so nothing
  synchronises the host inside a frame.  Timed with CUDA events, median and p95 of repeats:
  added time = chain - models alone (target <= 0.1 ms per frame);
  NMS of 16,128 boxes: usbeam's detection plan vs torchvision.ops.batched_nms (target >= 5x);
  labelling of 512 x 512 masks: usbeam vs cupyx.scipy.ndimage.label (target >= 3x).
CPU part (always): the CPU kernels at the same sizes against scipy / the NumPy reference.

Every result is validated before it is timed.  Run:
  .venv/bin/python benchmarks/bench_ai.py [--no-record] [--repeat N]
"""
import argparse
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [os.environ.get("USBEAM_IMPORT_ROOT", str(ROOT)), str(ROOT / "tests"), str(ROOT / "benchmarks")]

import usbeam  # noqa: E402
from harness import measure, record, validated  # noqa: E402
from reference import ai_detect as ref_detect  # noqa: E402

MODEL_SIZE = 512
N_ANCHORS = 16128  # YOLOv5 at 512 x 512: 3 anchors x (64^2 + 32^2 + 16^2)


def synthetic_bmode(rng, shape=(251, 251)):
    """A speckle B-mode frame with two anechoic cysts (usbeam.bmode of simulated IQ)."""
    from scipy import ndimage

    z, x = np.mgrid[: shape[0], : shape[1]]
    echo = np.ones(shape)
    echo[(z - 80) ** 2 + (x - 90) ** 2 < 30 ** 2] = 0.03
    echo[(z - 170) ** 2 + (x - 160) ** 2 < 40 ** 2] = 0.03
    scatter = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)) * echo
    psf = np.outer(np.hanning(9), np.hanning(5))
    iq = ndimage.convolve(scatter.real, psf) + 1j * ndimage.convolve(scatter.imag, psf)
    return usbeam.bmode(iq.astype(np.complex64), 40)


def random_head(rng, batch=1):
    raw = np.empty((batch, N_ANCHORS, 7), np.float32)
    raw[..., 0:2] = rng.uniform(0, MODEL_SIZE, (batch, N_ANCHORS, 2))
    raw[..., 2:4] = rng.uniform(4, 120, (batch, N_ANCHORS, 2))
    raw[..., 4:] = rng.random((batch, N_ANCHORS, 3))
    return raw


# ---------------------------------------------------------------- CPU part

def cpu_rows(rng, repeat):
    from scipy import ndimage

    rows = []
    frame = synthetic_bmode(rng)
    plan = usbeam.ModelInputPlan(frame.shape, MODEL_SIZE, mean=0.5, std=0.25)
    out = validated("model_input", plan(frame), lambda r: r.shape == (1, 1, 512, 512) and np.isfinite(r).all())
    t = measure(lambda: plan(frame, out=out), repeat=repeat)
    rows.append(["CPU model_input 251x251 uint8 -> 1x1x512x512 float32", str(t), ""])

    raw = random_head(rng)
    det_plan = usbeam.DetectPlan(raw.shape, conf=0.25, iou=0.45, max_det=300)
    want = ref_detect.detect(raw, 0.25, 0.45, 300)[0]
    validated("detect", det_plan(raw), lambda r: np.array_equal(r[0][0, : len(want)], want))
    t = measure(lambda: det_plan(raw), repeat=repeat)
    rows.append([f"CPU detect_postprocess [1, {N_ANCHORS}, 7], conf 0.25", str(t), f"{len(want)} kept"])

    boxes = np.concatenate([raw[0, :, :2] - raw[0, :, 2:4] / 2, raw[0, :, :2] + raw[0, :, 2:4] / 2], axis=1)
    scores = raw[0, :, 4]
    classes = rng.integers(0, 2, N_ANCHORS)
    keep = validated("nms", usbeam.nms(boxes, scores, 0.5, classes=classes, max_keep=300),
                     lambda r: np.array_equal(r, ref_detect.batched_nms(boxes, scores, classes, 0.5)[:300]))
    t = measure(lambda: usbeam.nms(boxes, scores, 0.5, classes=classes, max_keep=300), repeat=repeat)
    t_ref = measure(lambda: ref_detect.batched_nms(boxes, scores, classes, 0.5), repeat=3)
    rows.append([f"CPU nms {N_ANCHORS} boxes, 2 classes, max_keep 300", str(t),
                 f"{len(keep)} kept; NumPy reference (all kept) {t_ref.median * 1e3:.1f} ms"])

    mask = ndimage.gaussian_filter(rng.standard_normal((512, 512)), 2) > 0.0
    comps = usbeam.ComponentsPlan(mask.shape, 8)
    labels_out, counts = np.empty(mask.shape, np.int32), np.empty(1, np.int32)
    structure = np.ones((3, 3), bool)
    validated("label", comps.label(mask, out=labels_out, counts=counts),
              lambda r: np.array_equal(r[0], ndimage.label(mask, structure)[0]))
    t = measure(lambda: comps.label(mask, out=labels_out, counts=counts), repeat=repeat)
    t_scipy = measure(lambda: ndimage.label(mask, structure), repeat=repeat)
    rows.append(["CPU label 512x512, 8-connectivity", str(t),
                 f"{int(counts[0])} components; scipy.ndimage.label {t_scipy.median * 1e3:.3f} ms "
                 f"({t_scipy.median / t.median:.1f}x)"])
    filled = np.empty(mask.shape, bool)
    validated("fill_holes", comps.fill_holes(mask, out=filled),
              lambda r: np.array_equal(r, ndimage.binary_fill_holes(mask, structure)))
    t = measure(lambda: comps.fill_holes(mask, out=filled), repeat=repeat)
    t_scipy = measure(lambda: ndimage.binary_fill_holes(mask, structure), repeat=repeat)
    rows.append(["CPU fill_holes 512x512", str(t),
                 f"scipy.ndimage.binary_fill_holes {t_scipy.median * 1e3:.3f} ms ({t_scipy.median / t.median:.1f}x)"])
    return rows


# ---------------------------------------------------------------- GPU part

def gpu_available():
    if not usbeam.cuda_available():
        return "no CUDA device or usbeam built without CUDA"
    try:
        import torch  # noqa: F401
    except ImportError:
        return "PyTorch is not installed"
    return None


def build_models(torch):
    nn = torch.nn

    class SegmentationCNN(nn.Module):
        """A small encoder-decoder: 512 x 512 x 1 -> 1 logit per pixel."""

        def __init__(self):
            super().__init__()
            self.encode = nn.Sequential(nn.Conv2d(1, 16, 3, 2, 1), nn.ReLU(), nn.Conv2d(16, 32, 3, 2, 1), nn.ReLU(),
                                        nn.Conv2d(32, 32, 3, 1, 1), nn.ReLU())
            self.decode = nn.Sequential(nn.Upsample(scale_factor=4, mode="bilinear"), nn.Conv2d(32, 1, 3, 1, 1))

        def forward(self, x):
            return self.decode(self.encode(x))

    class TinyYolo(nn.Module):
        """Three heads (strides 8, 16, 32) of 3 anchors, decoded as YOLOv5 exports: [1, 16128, 7]."""

        def __init__(self, n_classes=2):
            super().__init__()
            self.n_out = 5 + n_classes
            self.stem = nn.Sequential(nn.Conv2d(1, 16, 3, 2, 1), nn.SiLU(), nn.Conv2d(16, 32, 3, 2, 1), nn.SiLU(),
                                      nn.Conv2d(32, 32, 3, 2, 1), nn.SiLU())
            self.down16 = nn.Sequential(nn.Conv2d(32, 64, 3, 2, 1), nn.SiLU())
            self.down32 = nn.Sequential(nn.Conv2d(64, 64, 3, 2, 1), nn.SiLU())
            self.heads = nn.ModuleList(nn.Conv2d(c, 3 * self.n_out, 1) for c in (32, 64, 64))
            anchors = torch.tensor([[10, 13, 16, 30, 33, 23], [30, 61, 62, 45, 59, 119],
                                    [116, 90, 156, 198, 373, 326]], dtype=torch.float32).view(3, 1, 3, 1, 1, 2)
            self.register_buffer("anchors", anchors)

        def forward(self, x):
            p8 = self.stem(x)
            p16 = self.down16(p8)
            p32 = self.down32(p16)
            outputs = []
            for level, (feature, stride) in enumerate(zip((p8, p16, p32), (8, 16, 32))):
                y = self.heads[level](feature)
                b, _, h, w = y.shape
                y = y.view(b, 3, self.n_out, h, w).permute(0, 1, 3, 4, 2).sigmoid()
                gy, gx = torch.meshgrid(torch.arange(h, device=x.device), torch.arange(w, device=x.device),
                                        indexing="ij")
                grid = torch.stack((gx, gy), -1).view(1, 1, h, w, 2).float()
                xy = (y[..., :2] * 2 - 0.5 + grid) * stride
                wh = (y[..., 2:4] * 2) ** 2 * self.anchors[level].view(1, 3, 1, 1, 2)
                outputs.append(torch.cat((xy, wh, y[..., 4:]), -1).view(b, -1, self.n_out))
            return torch.cat(outputs, 1)

    return SegmentationCNN().cuda().eval(), TinyYolo().cuda().eval()


def time_events(torch, fn, repeat, warmup=5):
    """Median and p95 (ms) of fn() timed with CUDA events on the current stream."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(repeat):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        samples.append(start.elapsed_time(stop))
    return float(np.median(samples)), float(np.percentile(samples, 95))


def fmt(stat):
    return f"median {stat[0]:.4f} ms, p95 {stat[1]:.4f} ms"


def gpu_rows(rng, repeat):
    import torch

    rows = []
    torch.backends.cudnn.benchmark = True
    stream = torch.cuda.Stream()
    torch.cuda.set_stream(stream)

    def sid():  # usbeam runs on whatever stream PyTorch is using now (graph capture included)
        return torch.cuda.current_stream().cuda_stream

    seg_model, det_model = build_models(torch)

    frame = torch.from_numpy(synthetic_bmode(rng)).cuda()
    prep = usbeam.ModelInputPlan(tuple(frame.shape), MODEL_SIZE, mean=0.5, std=0.25, backend="cuda")
    model_in = torch.empty(prep.shape, device="cuda")
    components = usbeam.ComponentsPlan((MODEL_SIZE, MODEL_SIZE), 8, backend="cuda")
    det_plan = usbeam.DetectPlan((1, N_ANCHORS, 7), conf=0.25, iou=0.45, max_det=300, backend="cuda")
    mask = torch.empty((MODEL_SIZE, MODEL_SIZE), dtype=torch.bool, device="cuda")
    largest = torch.empty_like(mask)
    filled = torch.empty_like(mask)
    labels = torch.empty((MODEL_SIZE, MODEL_SIZE), dtype=torch.int32, device="cuda")
    n_labels = torch.empty((1,), dtype=torch.int32, device="cuda")
    props = (torch.empty((1,), dtype=torch.int32, device="cuda"), torch.empty((1, 4), dtype=torch.int32, device="cuda"),
             torch.empty((1, 2), dtype=torch.float64, device="cuda"))
    detections = torch.empty((1, 300, 6), device="cuda")
    counts = torch.empty((1,), dtype=torch.int32, device="cuda")

    def models_alone():
        with torch.no_grad():
            return seg_model(model_in), det_model(model_in)

    def usbeam_after(logits, raw):
        usbeam.segment_threshold(logits.view(MODEL_SIZE, MODEL_SIZE), 0.0, out=mask, stream=sid())
        components.largest_component(mask, out=largest, stream=sid())
        components.fill_holes(largest, out=filled, stream=sid())
        components.label(filled, out=labels, counts=n_labels, stream=sid())
        usbeam.regionprops_basic_device(labels, 1, props, stream=sid())
        det_plan(raw, out=(detections, counts), stream=sid())

    def chain():
        prep(frame, out=model_in, stream=sid())
        logits, raw = models_alone()
        usbeam_after(logits, raw)

    # validate the GPU chain against the CPU backend before timing
    chain()
    torch.cuda.synchronize()
    want_in = usbeam.ModelInputPlan(tuple(frame.shape), MODEL_SIZE, mean=0.5, std=0.25)(frame.cpu().numpy())
    validated("model_input (cuda)", model_in.cpu().numpy(), lambda r: np.array_equal(r, want_in))
    logits, raw = models_alone()
    usbeam_after(logits, raw)
    torch.cuda.synchronize()
    want_det = usbeam.detect_postprocess(raw.cpu().numpy(), 0.25, 0.45, 300)
    validated("detect (cuda)", (detections.cpu().numpy(), counts.cpu().numpy()),
              lambda r: np.array_equal(r[0], want_det[0]) and np.array_equal(r[1], want_det[1]))
    want_largest = usbeam.largest_component(logits.cpu().numpy().reshape(MODEL_SIZE, MODEL_SIZE) > 0, 8)
    validated("largest (cuda)", largest.cpu().numpy(), lambda r: np.array_equal(r, want_largest))

    t_models = time_events(torch, models_alone, repeat)
    t_chain = time_events(torch, chain, repeat)
    # the same two as CUDA graphs: usbeam queues no host synchronisation, so the chain captures
    # (a plan joins a capture on its own stream: given the capture stream before capture begins,
    # as Pipeline(capture_graph=True) does, its calls add no wait on outside work to the graph)
    capture = torch.cuda.Stream()
    for plan in (prep, components, det_plan):
        plan.cuda.set_stream(capture.cuda_stream)
    # warm-up on the capture stream first, as PyTorch's CUDA-graph notes ask: cuDNN (benchmark
    # mode) sets up its per-stream state and picks algorithms at a stream's first call, which may
    # not happen inside a capture (CUDNN_STATUS_INTERNAL_ERROR on an H100, 2026-11-25)
    capture.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(capture):
        for _ in range(3):
            models_alone()
            chain()
    capture.synchronize()
    graphs = {}
    for name, fn in (("models", models_alone), ("chain", chain)):
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=capture):
            fn()
        graphs[name] = graph
    t_models_graph = time_events(torch, graphs["models"].replay, repeat)
    t_chain_graph = time_events(torch, graphs["chain"].replay, repeat)
    logits, raw = models_alone()
    t_usbeam_pre = time_events(torch, lambda: prep(frame, out=model_in, stream=sid()), repeat)
    t_usbeam_post = time_events(torch, lambda: usbeam_after(logits, raw), repeat)
    rows.append(["GPU models alone (PyTorch fp32, seg CNN + tiny YOLO)", fmt(t_models), ""])
    rows.append(["GPU whole chain", fmt(t_chain),
                 f"added {t_chain[0] - t_models[0]:.4f} ms per frame (target <= 0.1 ms)"])
    rows.append(["GPU models alone, CUDA graph", fmt(t_models_graph), ""])
    rows.append(["GPU whole chain, CUDA graph", fmt(t_chain_graph),
                 f"added {t_chain_graph[0] - t_models_graph[0]:.4f} ms per frame (target <= 0.1 ms)"])
    rows.append(["GPU usbeam pre-processing alone", fmt(t_usbeam_pre), ""])
    rows.append(["GPU usbeam post-processing alone (seg + det)", fmt(t_usbeam_post), ""])

    # NMS of 16,128 boxes: usbeam detection plan (every box a candidate) vs torchvision.batched_nms
    try:
        import torchvision

        head = torch.from_numpy(random_head(rng)).cuda()
        head[..., 5] = 1.0  # class 0 score 1, class 1 score the random value
        # conf 0 keeps every box: rng.random's scores are > 0 (conf < 0 is refused)
        all_plan = usbeam.DetectPlan((1, N_ANCHORS, 7), conf=0.0, iou=0.5, max_det=N_ANCHORS, backend="cuda")
        all_out = (torch.empty((1, N_ANCHORS, 6), device="cuda"), torch.empty((1,), dtype=torch.int32, device="cuda"))
        cls_scores, cls = head[0, :, 5:].max(1)
        scores = head[0, :, 4] * cls_scores
        xy, half = head[0, :, :2], head[0, :, 2:4] / 2
        boxes = torch.cat((xy - half, xy + half), 1)

        def tv():
            return torchvision.ops.batched_nms(boxes, scores, cls, 0.5)

        def ours():
            all_plan(head, out=all_out, stream=sid())

        ours()
        keep = tv()
        torch.cuda.synchronize()
        validated("nms vs torchvision", int(all_out[1][0]), lambda r: r == len(keep))
        t_tv = time_events(torch, tv, repeat)
        t_ours = time_events(torch, ours, repeat)
        rows.append([f"GPU NMS {N_ANCHORS} boxes, 2 classes: usbeam detect plan", fmt(t_ours),
                     f"torchvision.ops.batched_nms {fmt(t_tv)}; speed-up {t_tv[0] / t_ours[0]:.1f}x (target >= 5x)"])
    except ImportError:
        rows.append(["GPU NMS vs torchvision", "not run", "torchvision is not installed"])

    # labelling 512 x 512: usbeam vs cupyx.scipy.ndimage.label
    from scipy import ndimage

    host_mask = ndimage.gaussian_filter(rng.standard_normal((MODEL_SIZE, MODEL_SIZE)), 2) > 0.0
    d_mask = torch.from_numpy(host_mask).cuda()
    t_ours = time_events(torch, lambda: components.label(d_mask, out=labels, counts=n_labels, stream=sid()), repeat)
    validated("label (cuda)", labels.cpu().numpy(),
              lambda r: np.array_equal(r, ndimage.label(host_mask, np.ones((3, 3)))[0]))
    try:
        import cupy
        import cupyx.scipy.ndimage as cnd

        c_mask = cupy.asarray(host_mask)
        with cupy.cuda.ExternalStream(sid()):
            t_cupy = time_events(torch, lambda: cnd.label(c_mask, structure=cupy.ones((3, 3))), repeat)
        rows.append(["GPU label 512x512 8-connectivity: usbeam", fmt(t_ours),
                     f"cupyx.scipy.ndimage.label {fmt(t_cupy)}; speed-up {t_cupy[0] / t_ours[0]:.1f}x (target >= 3x)"])
    except ImportError:
        rows.append(["GPU label 512x512 8-connectivity: usbeam", fmt(t_ours), "cupy not installed: no comparison"])

    rows += onnx_rows(torch, seg_model, det_model, model_in, sid(), repeat)
    return rows


def onnx_rows(torch, seg_model, det_model, model_in, sid, repeat):
    """The same models through ONNX Runtime (CUDA EP on usbeam's stream) with IO binding."""
    try:
        import onnxruntime as ort
    except ImportError:
        return [["ONNX Runtime IO binding", "not run", "onnxruntime is not installed"]]
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        return [["ONNX Runtime IO binding", "not run", "onnxruntime has no CUDA execution provider"]]
    import io

    rows = []
    for name, model in (("segmentation", seg_model), ("detector", det_model)):
        buffer = io.BytesIO()
        torch.onnx.export(model, model_in, buffer, input_names=["x"], output_names=["y"], opset_version=17)
        session = ort.InferenceSession(buffer.getvalue(), providers=[
            ("CUDAExecutionProvider", {"user_compute_stream": str(sid)})])
        with torch.no_grad():
            expected = model(model_in)
        output = torch.empty_like(expected)
        binding = session.io_binding()
        binding.bind_input("x", "cuda", 0, np.float32, tuple(model_in.shape), model_in.data_ptr())
        binding.bind_output("y", "cuda", 0, np.float32, tuple(output.shape), output.data_ptr())
        session.run_with_iobinding(binding)
        torch.cuda.synchronize()
        err = float((output - expected).abs().max())
        t = time_events(torch, lambda: session.run_with_iobinding(binding), repeat)
        rows.append([f"ONNX Runtime {name}, IO binding on usbeam's buffers and stream", fmt(t),
                     f"max |ORT - PyTorch| = {err:.2e}"])
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--no-record", action="store_true", help="print only, do not append to RESULTS.md")
    parser.add_argument("--repeat", type=int, default=50)
    args = parser.parse_args()
    rng = np.random.default_rng()
    rows = cpu_rows(rng, args.repeat)
    reason = gpu_available()
    notes = None
    if reason is None:
        rows += gpu_rows(rng, args.repeat)
    else:
        notes = f"GPU part skipped: {reason}."
        print(notes)
    header = ["case", "time", "notes"]
    if args.no_record:
        from harness import markdown_table

        print(markdown_table(header, rows))
    else:
        record("AI model hand-off (issue #6)", header, rows, notes=notes)


if __name__ == "__main__":
    main()
