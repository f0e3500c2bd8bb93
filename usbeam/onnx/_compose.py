"""usbeam.onnx.compose: usbeam's exported graph followed by usbeam.ai.model_input's
pre-processing and a user's ONNX model, as one graph (RF -> the model's outputs)."""
import numpy as np
import onnx
from onnx import helper, version_converter

from .. import _validate
from ..ai.preprocess import _per_channel, _size_pair
from . import _graph, _operators

_ELEM_TYPES = {onnx.TensorProto.FLOAT: np.dtype(np.float32), onnx.TensorProto.FLOAT16: np.dtype(np.float16)}


def _load(model, what):
    if isinstance(model, onnx.ModelProto):
        return model
    try:
        return onnx.load(model)
    except Exception as exc:  # a path that is no ONNX file
        raise ValueError(f"{what}: cannot read an ONNX model from {model!r} ({exc})") from None


def _dims(value_info):
    return tuple(d.dim_value if d.HasField("dim_value") else d.dim_param for d in
                 value_info.type.tensor_type.shape.dim)


def compose(usbeam_graph, model, *, size=None, image_output=None, model_input=None, channels=None,
            layout="nchw", dtype=None, scale=None, offset=0.0, mean=0.0, std=1.0, align_corners=False,
            prefix="model/"):
    """One graph: ``usbeam_graph`` (an exported B-mode graph, proto or path), then
    ``usbeam.ai.model_input``'s pre-processing, then ``model`` (proto or path).

    The B-mode output ``image_output`` (default: the graph's first output), (N, H, W) uint8 or
    float32 dB, becomes ``(pixel * scale + offset - mean) / std`` per channel after a bilinear
    resize to ``size`` (default: the model input's H, W), with ``channels`` (default: the
    model's), ``layout`` 'nchw' | 'nhwc' and ``dtype`` (default: the model input's elem type),
    exactly the arguments of ``usbeam.ai.model_input``.  The model's input ``model_input``
    (default: its only graph input) must then have that shape and dtype, or ValueError says
    which differs.  The user model's names get ``prefix``; its opset is converted to usbeam's
    when they differ.  Returns the composed ``onnx.ModelProto`` (onnx.checker clean); its
    inputs are usbeam's (``rf``), its outputs the model's.
    """
    base = _load(usbeam_graph, "usbeam_graph")
    user = _load(model, "model")
    outputs = {o.name: o for o in base.graph.output}
    image_output = image_output or base.graph.output[0].name
    if image_output not in outputs:
        raise ValueError(f"image_output: the usbeam graph has no output {image_output!r} (it has {list(outputs)})")
    image = outputs[image_output]
    image_dims = _dims(image)
    image_type = image.type.tensor_type.elem_type
    if len(image_dims) != 3 or image_type not in (onnx.TensorProto.UINT8, onnx.TensorProto.FLOAT):
        raise ValueError(f"image_output {image_output!r} must be an (N, H, W) uint8 or float32 image "
                         f"(got shape {image_dims}, elem type {onnx.TensorProto.DataType.Name(image_type)})")
    n, h, w = image_dims
    initialized = {i.name for i in user.graph.initializer}
    model_inputs = [i for i in user.graph.input if i.name not in initialized]
    if model_input is None:
        if len(model_inputs) != 1:
            raise ValueError(f"model has {len(model_inputs)} inputs ({[i.name for i in model_inputs]}): name the "
                             f"image input with model_input=")
        target = model_inputs[0]
    else:
        found = [i for i in model_inputs if i.name == model_input]
        if not found:
            raise ValueError(f"model_input: the model has no input {model_input!r} ({[i.name for i in model_inputs]})")
        target = found[0]
    target_dims = _dims(target)
    target_type = target.type.tensor_type.elem_type
    layout = _validate.choice("layout", layout, ("nchw", "nhwc"))
    if len(target_dims) != 4:
        raise ValueError(f"model input {target.name!r} must be 4-D (N, C, H, W) or (N, H, W, C) (got {target_dims})")
    if size is None:
        size = target_dims[2:4] if layout == "nchw" else target_dims[1:3]
        if not all(isinstance(s, int) and s > 0 for s in size):
            raise ValueError(f"size: the model input {target.name!r} has no fixed H, W ({target_dims}); give size=")
    out_h, out_w = _size_pair(size)
    if channels is None:
        c = target_dims[1] if layout == "nchw" else target_dims[3]
        channels = c if c in (1, 3) else 1
    channels = _validate.choice("channels", channels, (1, 3))
    if dtype is None:
        out_dtype = _ELEM_TYPES.get(target_type, np.dtype(np.float32))
    else:
        out_dtype = np.dtype(dtype)
        if out_dtype not in (np.dtype(np.float32), np.dtype(np.float16)):
            raise TypeError(f"dtype must be 'float32' or 'float16' (got {dtype!r})")
    produced = (n, channels, out_h, out_w) if layout == "nchw" else (n, out_h, out_w, channels)
    if tuple(target_dims) != produced:
        raise ValueError(f"model input {target.name!r} has shape {tuple(target_dims)} but the pre-processed "
                         f"B-mode is {produced} (N = the graph's frames, {layout}, size {out_h}x{out_w}, "
                         f"{channels} channel(s))")
    if _ELEM_TYPES.get(target_type) != out_dtype:
        raise ValueError(f"model input {target.name!r} has dtype {onnx.TensorProto.DataType.Name(target_type)} but "
                         f"the pre-processed B-mode is {out_dtype.name}: give dtype= to match")
    if scale is None:
        scale = 1.0 / 255.0 if image_type == onnx.TensorProto.UINT8 else 1.0
    a = _per_channel("scale", scale, channels) / _per_channel("std", std, channels)
    b = (_per_channel("offset", offset, channels) - _per_channel("mean", mean, channels)) / _per_channel(
        "std", std, channels)

    g = _graph.GraphBuilder(np.float32, prefix="model_input/")
    x = g.cast(image_output, np.float32)
    ry = g.const("resize_rows", _operators.resize_matrix(h, out_h, align_corners))
    rx = g.const("resize_cols", _operators.resize_matrix(w, out_w, align_corners).T)
    x = g.op("MatMul", [g.op("MatMul", [ry, x]), rx])  # (N, out_h, out_w)
    x = g.op("Unsqueeze", [x, g.shape("axis", [1])])  # (N, 1, out_h, out_w)
    x = g.op("Add", [g.op("Mul", [x, g.const("norm_a", a.reshape(1, channels, 1, 1))]),
                     g.const("norm_b", b.reshape(1, channels, 1, 1))])  # broadcasts grey to channels
    if layout == "nhwc":
        x = g.op("Transpose", [x], perm=[0, 2, 3, 1])
    if out_dtype == np.float16:
        x = g.cast(x, np.float16)

    if user.opset_import and base.opset_import:
        user_opset = max((o.version for o in user.opset_import if o.domain in ("", "ai.onnx")), default=_graph.OPSET)
        if user_opset != _graph.OPSET:
            user = version_converter.convert_version(user, _graph.OPSET)
    user = onnx.compose.add_prefix(user, prefix)
    renamed_input = prefix + target.name
    nodes = list(base.graph.node) + g.nodes + [helper.make_node("Identity", [x], [renamed_input])] + list(
        user.graph.node)
    initializers = list(base.graph.initializer) + g.initializers + list(user.graph.initializer)
    inputs = list(base.graph.input) + [i for i in user.graph.input
                                       if i.name != renamed_input and i.name not in {t.name for t in user.graph.initializer}]
    graph = helper.make_graph(nodes, base.graph.name + "+" + (user.graph.name or "model"), inputs,
                              list(user.graph.output), initializer=initializers,
                              value_info=list(user.graph.value_info))
    opsets = {o.domain: o.version for o in base.opset_import}
    for o in user.opset_import:
        opsets[o.domain] = max(opsets.get(o.domain, 0), o.version)
    composed = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets.items()],
                                 producer_name="usbeam", doc_string=base.doc_string + " -> model_input -> user model")
    composed.ir_version = max(base.ir_version, user.ir_version)
    onnx.checker.check_model(composed, full_check=True)
    return composed
