"""usbeam.onnx.export: a Pipeline or DopplerPipeline as one ONNX graph (see usbeam/onnx/__init__.py)."""
import os

import numpy as np
import onnx

from .. import _validate
from ..pipelines import DopplerPipeline, Pipeline
from . import _graph, _operators

FORMULATIONS = ("gather", "cnn", "sparse-dense")
PRECISIONS = ("fp32", "fp16")
_DEFAULT_MAX_WEIGHT_BYTES = 1 << 30
_EXTERNAL_DATA_BYTES = 1_800_000_000  # protobuf's 2 GB limit, with room for the graph


def _iq_shape(pipeline):
    bf = pipeline.beamformer
    return bf.n_transmits, bf.probe.n_elements, bf.n_samples


def cnn_weight_bytes(pipeline, precision="fp32"):
    """Bytes of the "cnn" formulation's DAS weights for this pipeline (the tiling export
    would choose), computed without building the graph."""
    a = _operators.das_operator(pipeline.beamformer)
    tiling = _graph.cnn_tiles(a, _iq_shape(pipeline), pipeline.beamformer.grid.shape)
    return tiling[3] * (2 if precision == "fp16" else 4)


def _check_supported(pipeline):
    if not isinstance(pipeline, (Pipeline, DopplerPipeline)):
        raise TypeError(f"pipeline must be a usbeam.Pipeline or usbeam.DopplerPipeline (got {type(pipeline).__name__})")
    grid = pipeline.beamformer.grid
    if len(grid.shape) != 2:
        raise ValueError(f"pipeline: the grid must be 2-D (nz, nx) for export (got shape {grid.shape})")
    if isinstance(pipeline, DopplerPipeline):
        cf = pipeline.clutter
        if cf is not None and cf.method == "svd":
            raise ValueError("clutter='svd' cannot be exported: its subspace is computed from each ensemble's data "
                             "(no fixed operator; ONNX has no eigen-decomposition); use clutter='poly' or 'mean'")
        if cf is not None and cf.method == "iir":
            raise ValueError("clutter='iir' cannot be exported: its state carries from one ensemble to the next, "
                             "which a stateless graph cannot hold; use clutter='poly' or 'mean'")
        if pipeline.color is not None and pipeline.color.axial_correction:
            raise ValueError("axial_correction (color Doppler) is not exported; use axial_correction=False")


def export(pipeline, path=None, *, formulation="gather", precision="fp32", max_weight_bytes=None):
    """The ONNX graph of ``pipeline`` from raw RF to its outputs; written to ``path`` when given
    (external data beside it above 1.8 GB), and returned as an ``onnx.ModelProto``.

    formulation : 'gather' | 'cnn' | 'sparse-dense' (usbeam/onnx/__init__.py)
    precision : 'fp32' | 'fp16' (the linear path in float16)
    max_weight_bytes : 'cnn' only: refuse (MemoryError) a tiling whose DAS weights exceed it
        (default 1 GiB).
    """
    formulation = _validate.choice("formulation", formulation, FORMULATIONS)
    precision = _validate.choice("precision", precision, PRECISIONS)
    _check_supported(pipeline)
    doppler = isinstance(pipeline, DopplerPipeline)
    rf_shape = pipeline.rf_shape if doppler else pipeline.input_shape
    rf_dtype = pipeline.rf_dtype if doppler else pipeline.input_dtype
    n_frames = rf_shape[0]
    grid_shape = tuple(pipeline.beamformer.grid.shape)
    iq_shape = _iq_shape(pipeline)
    a = _operators.das_operator(pipeline.beamformer)
    tiling = None
    if formulation == "cnn":
        tiling = _graph.cnn_tiles(a, iq_shape, grid_shape)
        weight_bytes = tiling[3] * (2 if precision == "fp16" else 4)
        limit = _DEFAULT_MAX_WEIGHT_BYTES if max_weight_bytes is None else _validate.integer(
            "max_weight_bytes", max_weight_bytes, minimum=1)
        if weight_bytes > limit:
            raise MemoryError(
                f"formulation='cnn': the dense interpolation matrices of this grid ({grid_shape[0]} x {grid_shape[1]} "
                f"pixels, {iq_shape[0]} transmit(s) x {iq_shape[1]} elements) need {weight_bytes / 2**20:.0f} MiB, above "
                f"max_weight_bytes = {limit / 2**20:.0f} MiB: the formulation stops scaling here (its weights grow "
                f"with pixels x channels x sample window); use formulation='sparse-dense' or 'gather', a coarser "
                f"grid, or raise max_weight_bytes")

    compute = np.float16 if precision == "fp16" else np.float32
    g = _graph.GraphBuilder(compute)
    scale = 2.0 ** -15 if (precision == "fp16" and np.dtype(rf_dtype) == np.int16) else 1.0
    demod = _operators.demodulation_matrix(pipeline.rf2iq)
    xr, xi = _graph.demodulate(g, "rf", rf_shape, demod, scale)
    if formulation == "gather":
        yr, yi = _graph.das_gather(g, xr, xi, a, n_frames)
    elif formulation == "sparse-dense":
        yr, yi = _graph.das_sparse_dense(g, xr, xi, a, n_frames)
    else:
        yr, yi = _graph.das_cnn(g, xr, xi, a, n_frames, iq_shape, grid_shape, tiling)
    if compute != np.float32:
        yr, yi = g.cast(yr, np.float32), g.cast(yi, np.float32)

    outputs = []
    if doppler:
        if pipeline.clutter is not None:
            yr, yi = _graph.clutter(g, yr, yi, _operators.clutter_matrix(pipeline.clutter, n_frames))
        if pipeline.color is not None:
            color = pipeline.color
            mz, mx = color.average
            smoothing = None
            if mz > 1 or mx > 1:
                smoothing = (_operators.smoothing_matrix(grid_shape[0], mz, color.window),
                             _operators.smoothing_matrix(grid_shape[1], mx, color.window))
            velocity, variance = _graph.color_doppler(g, yr, yi, n_frames, color.lag, grid_shape, smoothing,
                                                      color.nyquist_velocity)
            g.nodes.append(onnx.helper.make_node("Identity", [velocity], ["velocity"]))
            g.nodes.append(onnx.helper.make_node("Identity", [variance], ["variance"]))
            outputs += [("velocity", np.float32, grid_shape), ("variance", np.float32, grid_shape)]
        if pipeline.power is not None:
            pw = pipeline.power
            power = _graph.power_doppler(g, yr, yi, n_frames, grid_shape, pw.db, pw.reference, pw.noise_floor)
            g.nodes.append(onnx.helper.make_node("Identity", [power], ["power"]))
            outputs.append(("power", np.float32, grid_shape))
        name = "usbeam_rf2iq_das_" + ("doppler" if pipeline.color is not None else "powerdoppler")
    else:
        bm = pipeline.bmode
        image = _graph.bmode(g, yr, yi, n_frames, grid_shape, bm.dynamic_range, bm.output, bm.normalize)
        g.nodes.append(onnx.helper.make_node("Identity", [image], ["bmode"]))
        outputs.append(("bmode", bm.out_dtype, (n_frames,) + grid_shape))
        name = "usbeam_rf2iq_das_bmode"
    doc = (f"usbeam {name}: one RF ensemble rf {tuple(rf_shape)} {np.dtype(rf_dtype).name} "
           f"(frames, transmits, elements, samples) -> {', '.join(o[0] for o in outputs)}; "
           f"formulation={formulation}, precision={precision}")
    model = g.model([("rf", rf_dtype, rf_shape)], outputs, name, doc)
    onnx.helper.set_model_props(model, {"usbeam.formulation": formulation, "usbeam.precision": precision,
                                        "usbeam.pipeline": name})
    large = sum(t.ByteSize() for t in model.graph.initializer) > _EXTERNAL_DATA_BYTES
    if not large:
        _graph.check(model)
    if path is not None:
        path = os.fspath(path)
        if large:
            onnx.save_model(model, path, save_as_external_data=True, all_tensors_to_one_file=True,
                            location=os.path.basename(path) + ".data")
            onnx.checker.check_model(path, full_check=True)
        else:
            onnx.save_model(model, path)
    return model
