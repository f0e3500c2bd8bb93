"""usbeam.onnx.compose: RF -> B-mode -> model input -> a small segmentation model (built here:
two convolutions with fixed weights) as one ONNX graph, against usbeam's separate stages (the
C pipeline, usbeam.ai.model_input, the model alone in ONNX Runtime); mismatched model inputs."""
import numpy as np
import pytest

import usbeam
from test_onnx_export import bmode_pipeline, phantom_bmode_rf, run

onnx = pytest.importorskip("onnx", reason="usbeam.onnx needs the onnx extra")
ort = pytest.importorskip("onnxruntime", reason="the checks run the graphs in ONNX Runtime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import usbeam.onnx as uonnx  # noqa: E402


def segmentation_model(shape, dtype=np.float32, opset=13, layout="nchw"):
    """Conv 3x3 (C -> 4) + ReLU + Conv 1x1 (4 -> 2): logits (N, 2, H, W); fixed weights."""
    rng = np.random.default_rng(17)
    channels = shape[1] if layout == "nchw" else shape[3]
    w1 = rng.uniform(-0.5, 0.5, (4, channels, 3, 3)).astype(dtype)
    b1 = rng.uniform(-0.1, 0.1, 4).astype(dtype)
    w2 = rng.uniform(-0.5, 0.5, (2, 4, 1, 1)).astype(dtype)
    elem = TensorProto.FLOAT16 if dtype == np.float16 else TensorProto.FLOAT
    nodes = []
    x = "image"
    if layout == "nhwc":
        nodes.append(helper.make_node("Transpose", ["image"], ["image_nchw"], perm=[0, 3, 1, 2]))
        x = "image_nchw"
    nodes += [helper.make_node("Conv", [x, "w1", "b1"], ["h"], pads=[1, 1, 1, 1]),
              helper.make_node("Relu", ["h"], ["r"]),
              helper.make_node("Conv", ["r", "w2"], ["logits"])]
    out_shape = [shape[0], 2] + (list(shape[2:]) if layout == "nchw" else list(shape[1:3]))
    graph = helper.make_graph(nodes, "tiny_segmenter", [helper.make_tensor_value_info("image", elem, list(shape))],
                              [helper.make_tensor_value_info("logits", elem, out_shape)],
                              initializer=[numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(b1, "b1"),
                                           numpy_helper.from_array(w2, "w2")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model, (w1, w2)


def run_model(model, x):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: x})[0]


def test_composed_graph_equals_the_separate_stages():
    seq, rf = phantom_bmode_rf()
    pipe = bmode_pipeline("uint8", f_number=1.0)
    graph = uonnx.export(pipe, formulation="sparse-dense")
    size, mean, std = (32, 24), 0.2, 0.3
    model, (w1, w2) = segmentation_model((rf.shape[0], 1) + size)
    composed = uonnx.compose(graph, model, mean=mean, std=std)
    assert [i.name for i in composed.graph.input] == ["rf"]
    (logits,) = run(composed, rf)
    assert logits.shape == (rf.shape[0], 2) + size
    # the same stages one by one: usbeam's graph, usbeam.ai.model_input, the model alone
    bmode_graph = run(graph, rf)[0]
    staged = run_model(model, usbeam.ai.model_input(bmode_graph, size, mean=mean, std=std))
    np.testing.assert_allclose(logits, staged, rtol=1e-5, atol=1e-5)
    # and from the C pipeline's B-mode, which may differ by one grey level at a few pixels:
    # a conv-ReLU-conv moves its outputs by at most sum|w2| sum|w1| times the input change
    c_stages = run_model(model, usbeam.ai.model_input(pipe(rf), size, mean=mean, std=std))
    bound = (1 / 255 / std) * np.abs(w1).sum(axis=(1, 2, 3)).max() * np.abs(w2).sum(axis=(1, 2, 3)).max()
    assert np.abs(logits - c_stages).max() <= bound + 1e-5
    assert np.mean(logits.argmax(1) == c_stages.argmax(1)) >= 0.99


def test_nhwc_three_channels_fp16():
    """Grey repeated to 3 channels, NHWC, float16, align_corners, a model at another opset."""
    seq, rf = phantom_bmode_rf()
    pipe = bmode_pipeline("uint8")
    graph = uonnx.export(pipe, formulation="gather")
    shape = (rf.shape[0], 20, 30, 3)
    model, _ = segmentation_model(shape, np.float16, opset=17, layout="nhwc")
    composed = uonnx.compose(graph, model, layout="nhwc", mean=[0.1, 0.2, 0.3], std=[0.5, 0.4, 0.3],
                             align_corners=True)
    (logits,) = run(composed, rf)
    assert logits.dtype == np.float16
    x = usbeam.ai.model_input(run(graph, rf)[0], (20, 30), channels=3, layout="nhwc", dtype="float16",
                              mean=[0.1, 0.2, 0.3], std=[0.5, 0.4, 0.3], align_corners=True)
    staged = run_model(model, x)
    np.testing.assert_allclose(logits.astype(np.float32), staged.astype(np.float32), rtol=2e-3, atol=2e-3)


def test_mismatched_model_input_says_so(tmp_path):
    seq, rf = phantom_bmode_rf()
    graph = uonnx.export(bmode_pipeline("uint8"), formulation="gather")
    n = rf.shape[0]
    model, _ = segmentation_model((n, 1, 32, 32))
    with pytest.raises(ValueError, match=r"has shape \(4, 1, 32, 32\).*\(4, 1, 16, 16\)"):
        uonnx.compose(graph, model, size=16)
    with pytest.raises(ValueError, match=r"has shape \(3, 1, 32, 32\)"):
        uonnx.compose(graph, segmentation_model((n - 1, 1, 32, 32))[0])
    with pytest.raises(ValueError, match="dtype FLOAT16 but the pre-processed B-mode is float32"):
        uonnx.compose(graph, segmentation_model((n, 1, 32, 32), np.float16)[0], dtype="float32")
    with pytest.raises(ValueError, match="image_output"):
        uonnx.compose(graph, model, image_output="velocity")
    with pytest.raises(ValueError, match="cannot read an ONNX model"):
        uonnx.compose(graph, str(tmp_path / "missing.onnx"))
    path = tmp_path / "model.onnx"
    onnx.save_model(model, str(path))  # a path works as well as a proto
    assert uonnx.compose(graph, str(path)).graph.output[0].name == "model/logits"
