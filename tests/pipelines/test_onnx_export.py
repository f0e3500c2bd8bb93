"""usbeam.onnx.export: every pipeline x formulation x precision run in ONNX Runtime (CPU)
against usbeam's C backend, on the project's simulated phantom (small shapes) and on PWI_disk
(full size, marked slow); the "cnn" operator set; options a graph cannot express; the
export's own bad input.  Bounds: tests/tolerances.py (onnx_*)."""
import functools

import numpy as np
import pytest

import usbeam
from conftest import shared_dataset
from tolerances import TOLERANCES

onnx = pytest.importorskip("onnx", reason="usbeam.onnx needs the onnx extra")
ort = pytest.importorskip("onnxruntime", reason="the checks run the graphs in ONNX Runtime")
import usbeam.onnx as uonnx  # noqa: E402
from usbeam.onnx import _graph  # noqa: E402

FS, FC, PRF = 20e6, 5e6, 5000.0
N_SAMPLES = 440
COMBOS = [(f, p) for f in ("gather", "sparse-dense", "cnn") for p in ("fp32", "fp16")]


def small_probe():
    return usbeam.LinearArray(32, 3e-4, width=2.5e-4)


def small_grid():
    return usbeam.Grid(x=np.linspace(-4e-3, 4e-3, 40), z=np.linspace(5e-3, 15e-3, 48))


def as_int16(rf):
    return np.round(rf / np.abs(rf).max() * 20000).astype(np.int16)


@functools.lru_cache(maxsize=None)
def phantom_bmode_rf():
    """Point scatterers seen by three steered plane waves, 4 frames, int16."""
    rng = np.random.default_rng(1702)
    pos = np.c_[rng.uniform(-4e-3, 4e-3, 300), np.zeros(300), rng.uniform(5e-3, 15e-3, 300)]
    seq = [usbeam.PlaneWave(a) for a in (-0.1, 0.0, 0.1)]
    rf = usbeam.simulate.simulate_rf(pos, rng.standard_normal(300), small_probe(), seq, fs=FS, fc=FC,
                                     n_samples=N_SAMPLES, n_frames=4, noise=0.01, seed=1702)
    return seq, as_int16(rf)


@functools.lru_cache(maxsize=None)
def phantom_doppler_rf(n_frames=12):
    """A band of scatterers moving axially at 5 cm/s among static ones, one plane wave."""
    rng = np.random.default_rng(1703)
    pos0 = np.c_[rng.uniform(-4e-3, 4e-3, 300), np.zeros(300), rng.uniform(5e-3, 15e-3, 300)]
    speed = np.where(np.abs(pos0[:, 2] - 1e-2) < 2e-3, 0.05, 0.0)
    pos = np.stack([pos0 + np.c_[np.zeros((300, 2)), speed * k / PRF] for k in range(n_frames)])
    rf = usbeam.simulate.simulate_rf(pos, rng.standard_normal(300), small_probe(), usbeam.PlaneWave(0.0), fs=FS,
                                     fc=FC, n_samples=N_SAMPLES, noise=0.01, seed=1703)
    return as_int16(rf.reshape(n_frames, 1, 32, N_SAMPLES))


def run(model, rf):
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, {"rf": rf})


def bmode_pipeline(output, rf_shape=None, seq=None, probe=None, grid=None, **kw):
    if seq is None:
        seq, rf = phantom_bmode_rf()
        rf_shape = rf.shape
    return usbeam.Pipeline(probe or small_probe(), seq, grid or small_grid(), fs=kw.pop("fs", FS),
                           fc=kw.pop("fc", FC), n_samples=rf_shape[-1], n_frames=rf_shape[0], bmode_output=output,
                           **kw)


def assert_bmode_close(got, want, output, precision):
    if output == "db":
        rho = np.corrcoef(got.ravel(), want.ravel())[0, 1]
        assert rho >= TOLERANCES["onnx_bmode_db_rho" if precision == "fp32" else "onnx_fp16_bmode_db_rho"]
    else:
        assert got.dtype == np.uint8
        diff = np.abs(got.astype(int) - want.astype(int))
        assert diff.max() <= TOLERANCES["onnx_bmode_uint8_levels" if precision == "fp32"
                                        else "onnx_fp16_bmode_uint8_levels"]
        if precision == "fp16":
            assert np.mean(diff > 0) <= TOLERANCES["onnx_fp16_bmode_uint8_fraction_off"]


@pytest.mark.parametrize("formulation,precision", COMBOS)
@pytest.mark.parametrize("output", ["uint8", "db"])
def test_bmode_graph_matches_c(formulation, precision, output):
    seq, rf = phantom_bmode_rf()
    pipe = bmode_pipeline(output, f_number=1.0, interpolation="linear")
    copy = rf.copy()
    model = uonnx.export(pipe, formulation=formulation, precision=precision)
    (got,) = run(model, rf)
    np.testing.assert_array_equal(rf, copy)
    assert got.shape == pipe.output_shape
    assert_bmode_close(got, pipe(rf), output, precision)
    assert model.opset_import[0].version == _graph.OPSET
    (rf_input,) = model.graph.input
    assert rf_input.type.tensor_type.elem_type == onnx.TensorProto.INT16
    assert [d.dim_value for d in rf_input.type.tensor_type.shape.dim] == list(rf.shape)
    assert model.graph.initializer, "geometry and filters are initializers"


def doppler_pipeline(outputs, rf_shape, clutter="poly", probe=None, grid=None, seq=None, **kw):
    return usbeam.DopplerPipeline(probe or small_probe(), seq or usbeam.PlaneWave(0.0), grid or small_grid(),
                                  n_frames=rf_shape[0], n_samples=rf_shape[-1], fs=kw.pop("fs", FS),
                                  fc=kw.pop("fc", FC), prf=kw.pop("prf", PRF), clutter=clutter, outputs=outputs,
                                  **kw)


def assert_doppler_close(maps, want, nyquist, precision, signal_db=-30.0):
    names = {"fp32": "onnx_", "fp16": "onnx_fp16_"}[precision]
    velocity, variance, power = maps
    signal = want.power > signal_db  # dB re the max: pixels with signal
    assert signal.mean() > 0.05
    # wrapped difference, in fractions of the Nyquist velocity
    dv = np.angle(np.exp(1j * np.pi * (velocity - want.velocity) / nyquist)) / np.pi
    assert np.median(np.abs(dv[signal])) <= TOLERANCES[names + "velocity_median_nyquist"]
    scale = 2 * (nyquist / np.pi) ** 2  # the variance's range
    assert np.abs(variance - want.variance)[signal].max() <= TOLERANCES[names + "variance_rel"] * scale
    assert np.abs(power - want.power)[signal].max() <= TOLERANCES[names + "power_db"]


@pytest.mark.parametrize("formulation,precision", COMBOS)
def test_doppler_graph_matches_c(formulation, precision):
    rf = phantom_doppler_rf()
    pipe = doppler_pipeline(("color", "power"), rf.shape, clutter_options={"order": 1}, average=(3, 3))
    model = uonnx.export(pipe, formulation=formulation, precision=precision)
    assert [o.name for o in model.graph.output] == ["velocity", "variance", "power"]
    maps = run(model, rf)
    assert_doppler_close(maps, pipe(rf), pipe.nyquist_velocity, precision)


@pytest.mark.parametrize("outputs,names", [(("color",), ["velocity", "variance"]), (("power",), ["power"])])
def test_doppler_and_power_doppler_alone(outputs, names):
    """RF2IQ_DAS_DOPPLER and RF2IQ_DAS_POWERDOPPLER as separate graphs ('mean' clutter filter,
    boxcar smoothing, linear power with a noise floor)."""
    rf = phantom_doppler_rf()
    kw = {"average": (5, 3), "window": "boxcar"} if outputs == ("color",) else {"power_db": False,
                                                                                 "noise_floor": 1.0}
    pipe = doppler_pipeline(outputs, rf.shape, clutter="mean", **kw)
    model = uonnx.export(pipe, formulation="sparse-dense")
    assert [o.name for o in model.graph.output] == names
    got = run(model, rf)
    want = pipe(rf)
    if outputs == ("color",):
        power_db = 10 * np.log10(np.mean(np.abs(pipe._filtered) ** 2, axis=0))
        signal = power_db > power_db.max() - 30
        dv = np.angle(np.exp(1j * np.pi * (got[0] - want.velocity) / pipe.nyquist_velocity)) / np.pi
        assert np.median(np.abs(dv[signal])) <= TOLERANCES["onnx_velocity_median_nyquist"]
    else:
        ratio_db = 10 * np.log10(got[0] / want.power)
        assert np.abs(ratio_db).max() <= TOLERANCES["onnx_power_db"]


def test_cnn_graph_has_no_dynamic_indexing():
    seq, rf = phantom_bmode_rf()
    for pipe in (bmode_pipeline("uint8", interpolation="cubic"),
                 doppler_pipeline(("color", "power"), phantom_doppler_rf().shape, average=(3, 3))):
        ops = {n.op_type for n in uonnx.export(pipe, formulation="cnn").graph.node}
        assert ops <= _graph.CNN_OPERATORS, sorted(ops - _graph.CNN_OPERATORS)
        assert not ops & {"Gather", "GatherElements", "GatherND", "ScatterND", "ScatterElements", "Resize", "Loop",
                          "If", "Scan"}
    pipe = bmode_pipeline("uint8")
    assert "Gather" in {n.op_type for n in uonnx.export(pipe, formulation="gather").graph.node}
    assert "ScatterND" in {n.op_type for n in uonnx.export(pipe, formulation="sparse-dense").graph.node}


def test_cnn_weight_memory_is_reported_and_bounded():
    pipe = bmode_pipeline("uint8")
    needed = uonnx.cnn_weight_bytes(pipe)
    model = uonnx.export(pipe, formulation="cnn")
    tiles = sum(t.ByteSize() for t in model.graph.initializer if t.name.startswith("das_tile"))
    assert needed <= tiles <= needed * 1.01 + 65536  # the tiles' float32 matrices, plus protobuf framing
    assert uonnx.cnn_weight_bytes(pipe, "fp16") == needed // 2
    with pytest.raises(MemoryError, match="formulation='cnn'.*max_weight_bytes"):
        uonnx.export(pipe, formulation="cnn", max_weight_bytes=needed // 2)


def test_saved_graph_runs_from_its_file(tmp_path):
    seq, rf = phantom_bmode_rf()
    pipe = bmode_pipeline("uint8")
    path = tmp_path / "bmode.onnx"
    uonnx.export(pipe, path, formulation="gather", precision="fp16")
    onnx.checker.check_model(str(path), full_check=True)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert_bmode_close(session.run(None, {"rf": rf})[0], pipe(rf), "uint8", "fp16")
    with pytest.raises(Exception, match="(?i)invalid|rank|dimension|shape"):  # fixed shapes: ORT refuses another
        session.run(None, {"rf": rf[:2]})


def test_options_a_graph_cannot_express_are_named():
    shape = phantom_doppler_rf().shape
    with pytest.raises(ValueError, match="clutter='svd'"):
        uonnx.export(doppler_pipeline(("color",), shape, clutter="svd"))
    with pytest.raises(ValueError, match="clutter='iir'"):
        uonnx.export(doppler_pipeline(("color",), shape, clutter="iir"), formulation="cnn")
    with pytest.raises(ValueError, match="formulation"):
        uonnx.export(bmode_pipeline("uint8"), formulation="dense")
    with pytest.raises(ValueError, match="precision"):
        uonnx.export(bmode_pipeline("uint8"), precision="int8")
    with pytest.raises(TypeError, match="pipeline"):
        uonnx.export(usbeam.BModePlan((2, 4, 4)))


# ---- PWI_disk, full size (MUST's grid: 251 x 251, 0.1 mm), slow --------------------------

@functools.lru_cache(maxsize=None)
def pwi_disk():
    rec = usbeam.io.load_must(shared_dataset("PWI_disk.mat"))
    rf = np.ascontiguousarray(rec.data.reshape(rec.data.shape[0], 1, *rec.data.shape[1:]))
    grid = usbeam.Grid(x=np.linspace(-12.5e-3, 12.5e-3, 251), z=np.linspace(10e-3, 35e-3, 251))
    return rec, rf, grid


@pytest.mark.slow
@pytest.mark.parametrize("formulation", ["gather", "sparse-dense", "cnn"])
def test_pwi_disk_bmode(formulation):
    rec, rf, grid = pwi_disk()
    common = dict(probe=rec.probe, grid=grid, fs=rec.fs, fc=rec.fc, c=rec.c, t0=rec.t0, bandwidth=rec.bandwidth,
                  f_number="auto")
    for output in ("uint8", "db"):
        pipe = bmode_pipeline(output, rf.shape, rec.sequence, **common)
        (got,) = run(uonnx.export(pipe, formulation=formulation), rf)
        assert_bmode_close(got, pipe(rf), output, "fp32")


@pytest.mark.slow
@pytest.mark.parametrize("formulation", ["gather", "sparse-dense", "cnn"])
def test_pwi_disk_doppler(formulation):
    rec, rf, grid = pwi_disk()
    pipe = doppler_pipeline(("color", "power"), rf.shape, probe=rec.probe, grid=grid, seq=rec.sequence, fs=rec.fs,
                            fc=rec.fc, prf=rec.prf, c=rec.c, t0=rec.t0, bandwidth=rec.bandwidth, f_number="auto",
                            average=(5, 5))
    maps = run(uonnx.export(pipe, formulation=formulation), rf)
    assert_doppler_close(maps, pipe(rf), pipe.nyquist_velocity, "fp32")


# ---- ONNX Runtime's GPU execution providers, where installed (onnxruntime-gpu) -------------

@pytest.mark.parametrize("provider", ["CUDAExecutionProvider", "TensorrtExecutionProvider"])
@pytest.mark.parametrize("formulation", ["gather", "sparse-dense", "cnn"])
def test_gpu_execution_providers(provider, formulation):
    """The same checks through ORT's CUDA / TensorRT providers (skipped where the installed
    onnxruntime has none, as on a CPU-only machine)."""
    if provider not in ort.get_available_providers():
        pytest.skip(f"{provider} is not in this onnxruntime ({ort.get_available_providers()})")
    seq, rf = phantom_bmode_rf()
    pipe = bmode_pipeline("uint8")
    session = ort.InferenceSession(uonnx.export(pipe, formulation=formulation).SerializeToString(),
                                   providers=[provider, "CPUExecutionProvider"])
    assert_bmode_close(session.run(None, {"rf": rf})[0], pipe(rf), "uint8", "fp32")
    drf = phantom_doppler_rf()
    dpipe = doppler_pipeline(("color", "power"), drf.shape, average=(3, 3))
    session = ort.InferenceSession(uonnx.export(dpipe, formulation=formulation).SerializeToString(),
                                   providers=[provider, "CPUExecutionProvider"])
    assert_doppler_close(session.run(None, {"rf": drf}), dpipe(drf), dpipe.nyquist_velocity, "fp32")


@pytest.mark.parametrize("normalize", ["frame", 3e5])
def test_bmode_other_references(normalize):
    """Per-frame maxima and a fixed amplitude reference (below the image's max, ~6.8e5), uint8
    and dB; the images are not trivial (a spread of levels, most pixels above the floor)."""
    seq, rf = phantom_bmode_rf()
    for output in ("uint8", "db"):
        pipe = bmode_pipeline(output, normalize=normalize, dynamic_range=50.0)
        want = pipe(rf)
        assert np.ptp(want.astype(np.float64)) > 20 and np.median(want) > (50 if output == "uint8" else -40)
        (got,) = run(uonnx.export(pipe, formulation="sparse-dense"), rf)
        assert_bmode_close(got, want, output, "fp32")
