"""NaN and infinite input data, CPU backend: every entry point that takes floating-point data
refuses it with a ValueError naming the parameter (README 'Errors'), leaves its input as it
was, leaves a caller's out= in the documented state (filled with NaN, 0 for uint8 B-mode, by
the kernels that check in the pass that writes; untouched by those that check first: the SVD
clutter filter, detect_postprocess), and
the streaming IIR clutter filter keeps the state it had before the refused block (checked
against the float64 reference tests/reference/doppler.py).

Each case plants one bad value (NaN, +inf or -inf; in the real or the imaginary part of
complex data) at a random position of fresh random data."""
import numpy as np
import pytest

import usbeam
from reference import doppler as ref_doppler
from tolerances import TOLERANCES

BAD_VALUES = [np.nan, np.inf, -np.inf]


def complex_noise(rng, shape):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)


def plant(rng, x, value):
    """A copy of x with value at one random position (real or imaginary part at random)."""
    bad = x.copy()
    flat = bad.reshape(-1)
    i = int(rng.integers(flat.size))
    if np.iscomplexobj(bad) and rng.integers(2):
        flat[i] = complex(flat[i].real, value)
    elif np.iscomplexobj(bad):
        flat[i] = complex(value, flat[i].imag)
    else:
        flat[i] = value
    return bad


def assert_refused(call, bad, name):
    """call(bad) raises ValueError naming name, and bad is unchanged (bit for bit)."""
    before = bad.copy()
    with pytest.raises(ValueError, match=rf"^{name} contains NaN or infinite values"):
        call(bad)
    np.testing.assert_array_equal(bad.view(np.uint8), before.view(np.uint8))


# ---- B-mode ------------------------------------------------------------------------------

@pytest.mark.parametrize("value", BAD_VALUES)
@pytest.mark.parametrize("normalize", ["global", "frame", 2.0])
@pytest.mark.parametrize("output", ["uint8", "db"])
def test_bmode_refuses(rng, value, normalize, output):
    iq = complex_noise(rng, (3, 21, 17))
    bad = plant(rng, iq, value)
    plan = usbeam.BModePlan(iq.shape, 40.0, output=output, normalize=normalize)
    out = np.full(iq.shape, 7, plan.out_dtype)  # poison: neither 0 nor NaN
    assert_refused(lambda x: plan(x, out=out), bad, "image")
    if output == "uint8":
        assert np.all(out == 0)
    else:
        assert np.all(np.isnan(out))
    with pytest.raises(ValueError, match="image"):
        usbeam.bmode(bad, 40.0, output=output, normalize=normalize)
    # the plan is not left in a bad state: the clean image afterwards is what a new plan gives
    np.testing.assert_array_equal(plan(iq), usbeam.BModePlan(iq.shape, 40.0, output=output,
                                                             normalize=normalize)(iq))


@pytest.mark.parametrize("value", BAD_VALUES)
@pytest.mark.parametrize("output", ["magnitude", "analytic"])
def test_envelope_refuses(rng, value, output):
    rf = rng.standard_normal((2, 33, 7)).astype(np.float32)
    bad = plant(rng, rf, value)
    plan = usbeam.EnvelopePlan(rf.shape, output=output)
    out = np.full(rf.shape, 7, plan.out_dtype)
    assert_refused(lambda x: plan(x, out=out), bad, "image")
    assert np.all(np.isnan(out))
    with pytest.raises(ValueError, match="^image contains NaN"):
        usbeam.envelope(bad, output=output)
    np.testing.assert_array_equal(plan(rf), usbeam.EnvelopePlan(rf.shape, output=output)(rf))


@pytest.mark.parametrize("value", BAD_VALUES)
@pytest.mark.parametrize("output", ["uint8", "db"])
def test_bmode_of_rf_refuses(rng, value, output):
    rf = rng.standard_normal((2, 33, 7)).astype(np.float32)
    bad = plant(rng, rf, value)
    plan = usbeam.BModePlan(rf.shape, 40.0, output=output, data="rf")
    out = np.full(rf.shape, 7, plan.out_dtype)
    assert_refused(lambda x: plan(x, out=out), bad, "image")
    assert np.all(out == 0) if output == "uint8" else np.all(np.isnan(out))
    np.testing.assert_array_equal(plan(rf), usbeam.BModePlan(rf.shape, 40.0, output=output, data="rf")(rf))


# ---- RF -> IQ ----------------------------------------------------------------------------

@pytest.mark.parametrize("value", BAD_VALUES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kwargs", [dict(bandwidth=0.6), dict(filter="kaiser", cutoff=2e6, transition_width=1e6),
                                    dict(bandwidth=0.6, decimation=3)])
def test_rf2iq_refuses(rng, value, dtype, kwargs):
    rf = rng.standard_normal((5, 7, 160)).astype(dtype)  # 35 lines: the Butterworth path's groups of 4
    bad = plant(rng, rf, value)
    plan = usbeam.RF2IQPlan(rf.shape, dtype, fs=20e6, fc=5e6, **kwargs)
    out = np.full(plan.out_shape, 3 + 3j, np.complex64)
    assert_refused(lambda x: plan(x, out=out), bad, "rf")
    assert np.all(np.isnan(out.view(np.float32)))
    with pytest.raises(ValueError, match="rf"):
        usbeam.rf2iq(bad, fs=20e6, fc=5e6, **kwargs)


def test_rf2iq_int16_has_no_check_to_fail(rng):
    rf = rng.integers(-32768, 32767, (4, 64), dtype=np.int16, endpoint=True)
    assert np.all(np.isfinite(usbeam.rf2iq(rf, fs=20e6, fc=5e6, bandwidth=0.6)))


# ---- clutter filters ---------------------------------------------------------------------

@pytest.mark.parametrize("value", BAD_VALUES)
@pytest.mark.parametrize("method, kwargs", [("mean", {}), ("poly", {"order": 2}), ("svd", {}),
                                            ("iir", {"order": 4, "cutoff": 0.05, "init": "zero"}),
                                            ("iir", {"order": 3, "cutoff": 0.1, "init": "projection"})])
def test_clutter_filter_refuses(rng, value, method, kwargs):
    iq = complex_noise(rng, (12, 70, 3))  # 210 pixels: several pixel blocks
    bad = plant(rng, iq, value)
    f = usbeam.ClutterFilter(iq.shape, method, **kwargs)
    out = np.full(iq.shape, 5 + 5j, np.complex64)
    assert_refused(lambda x: f(x, out=out), bad, "iq")
    if method == "svd":  # checked before anything is written
        assert np.all(out == 5 + 5j)
    else:
        assert np.all(np.isnan(out.view(np.float32)))
    with pytest.raises(ValueError, match="iq"):
        usbeam.clutter_filter(bad, method, **kwargs)


@pytest.mark.parametrize("value", BAD_VALUES)
def test_clutter_in_place_refused_leaves_nan(rng, value):
    """out = iq: the caller's buffer is the output, so after a refusal it holds NaN, not a mix."""
    bad = plant(rng, complex_noise(rng, (10, 9, 8)), value)
    with pytest.raises(ValueError, match="iq"):
        usbeam.ClutterFilter(bad.shape, "poly")(bad, out=bad)
    assert np.all(np.isnan(bad.view(np.float32)))


@pytest.mark.parametrize("value", BAD_VALUES)
@pytest.mark.parametrize("init", ["zero", "projection"])
@pytest.mark.parametrize("refused_block", [0, 1])
def test_iir_refused_block_leaves_state(rng, value, init, refused_block):
    """A stream of 8-frame blocks with one poisoned copy of block `refused_block` sent (and
    refused) before the clean one: the outputs equal the float64 reference on the clean record,
    i.e. the refused block changed neither the state nor (block 0) the start-up initialisation."""
    record = complex_noise(rng, (24, 9, 11))
    stream = usbeam.ClutterFilter((8, 9, 11), "iir", order=4, cutoff=0.05, init=init)
    out = np.full(record.shape, np.nan, np.complex64)
    for k in range(3):
        block = record[8 * k: 8 * k + 8]
        if k == refused_block:
            assert_refused(stream, plant(rng, block, value), "iq")
        out[8 * k: 8 * k + 8] = stream(block)
    want = ref_doppler.iir_filter(record, 4, 0.05, init, init_frames=8)
    err = np.abs(out - want).max() / np.abs(record).max()
    assert err <= TOLERANCES["doppler_clutter_rel"], f"relative error {err:.2e}"


# ---- color and power Doppler -------------------------------------------------------------

@pytest.mark.parametrize("value", BAD_VALUES)
@pytest.mark.parametrize("kwargs", [{}, {"average": (3, 5), "axial_correction": True, "dz": 1e-4}])
def test_color_doppler_refuses(rng, value, kwargs):
    iq = complex_noise(rng, (10, 23, 19))
    bad = plant(rng, iq, value)
    plan = usbeam.ColorDopplerPlan(iq.shape, fc=5e6, prf=4e3, c=1540.0, **kwargs)
    outs = [np.full(iq.shape[1:], 9.0, np.float32) for _ in range(3)]
    assert_refused(lambda x: plan(x, velocity=outs[0], variance=outs[1], power=outs[2]), bad, "iq")
    assert all(np.all(np.isnan(o)) for o in outs)
    with pytest.raises(ValueError, match="iq"):
        usbeam.color_doppler(bad, fc=5e6, prf=4e3, c=1540.0, **kwargs)


@pytest.mark.parametrize("value", BAD_VALUES)
@pytest.mark.parametrize("db", [False, True])
def test_power_doppler_refuses(rng, value, db):
    iq = complex_noise(rng, (10, 23, 19))
    bad = plant(rng, iq, value)
    plan = usbeam.PowerDopplerPlan(iq.shape, db=db)
    out = np.full(iq.shape[1:], 9.0, np.float32)
    assert_refused(lambda x: plan(x, out=out), bad, "iq")
    assert np.all(np.isnan(out))
    with pytest.raises(ValueError, match="iq"):
        usbeam.power_doppler(bad, db=db)


# ---- Hadamard decoding -------------------------------------------------------------------

@pytest.mark.parametrize("value", BAD_VALUES)
@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
@pytest.mark.parametrize("order, algorithm, axis", [(16, "fast", 0), (12, "direct", 1), (24, "fast", 1)])
def test_hadamard_decode_refuses(rng, value, dtype, order, algorithm, axis):
    shape = [3, 50]
    shape.insert(axis, order)
    data = rng.standard_normal(shape).astype(np.float32)
    if dtype == np.complex64:
        data = (data + 1j * rng.standard_normal(shape)).astype(np.complex64)
    bad = plant(rng, data, value)
    plan = usbeam.HadamardDecodePlan(data.shape, order, axis=axis, dtype=dtype, algorithm=algorithm)
    out = np.full(plan.out_shape, 4, plan.out_dtype)
    assert_refused(lambda x: plan(x, out=out), bad, "data")
    assert np.all(np.isnan(out.view(np.float32)))
    with pytest.raises(ValueError, match="data"):
        usbeam.hadamard_decode(bad, order, axis=axis, algorithm=algorithm)


# ---- AI hand-off -------------------------------------------------------------------------

@pytest.mark.parametrize("value", BAD_VALUES)
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("size", [(16, 16), (7, 5), (55, 41)])  # (7, 5): most pixels are never blended
@pytest.mark.parametrize("out_dtype", ["float32", "float16"])
def test_model_input_refuses(rng, value, dtype, size, out_dtype):
    image = rng.random((2, 40, 30, 3)).astype(dtype)
    bad = plant(rng, image, value)
    plan = usbeam.ModelInputPlan(image.shape, size, image_dtype=dtype, dtype=out_dtype)
    out = np.full(plan.shape, 6.0, out_dtype)
    assert_refused(lambda x: plan(x, out=out), bad, "image")
    assert np.all(np.isnan(out))
    with pytest.raises(ValueError, match="image"):
        usbeam.model_input(bad, size)


@pytest.mark.parametrize("value", BAD_VALUES)
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("column", [0, 2, 4, 6])  # a coordinate, a size, objectness, a class score
def test_detect_postprocess_refuses(rng, value, dtype, column):
    raw = rng.random((2, 300, 8)).astype(dtype)
    bad = raw.copy()
    bad[rng.integers(2), rng.integers(300), column] = value
    plan = usbeam.DetectPlan(raw.shape, dtype=dtype, conf=0.2)
    out = (np.full(plan.shape, 8.0, np.float32), np.full(2, 8, np.int32))
    assert_refused(lambda x: plan(x, out=out), bad, "raw")
    assert np.all(out[0] == 8.0) and np.all(out[1] == 8)  # checked before anything is written
    with pytest.raises(ValueError, match="raw"):
        usbeam.detect_postprocess(bad)
