"""B-mode kernel against the float64 reference (tests/reference/bmode.py)."""
import numpy as np
import pytest

import usbeam
from reference import bmode as ref
from tolerances import TOLERANCES


def assert_uint8_close(got, want):
    diff = np.abs(got.astype(int) - want.astype(int))
    assert diff.max() <= TOLERANCES["bmode_uint8_max_levels"]
    assert np.mean(diff > 0) <= TOLERANCES["bmode_uint8_fraction_off"]


def random_iq(rng, shape):
    # Log-uniform amplitudes so the whole dynamic range is exercised, random phases.
    amplitude = 10 ** rng.uniform(-4, 0, shape)
    return (amplitude * np.exp(2j * np.pi * rng.random(shape))).astype(np.complex64)


@pytest.mark.parametrize("dynamic_range", [20.0, 30.0, 60.0])
def test_uint8_matches_reference(rng, dynamic_range):
    iq = random_iq(rng, (3, 40, 50))
    got = usbeam.bmode(iq, dynamic_range)
    assert got.dtype == np.uint8 and got.shape == iq.shape
    assert_uint8_close(got, ref.bmode_uint8(iq, dynamic_range))


def test_db_output_and_floor(rng):
    iq = random_iq(rng, (2, 30, 30))
    got = usbeam.bmode(iq, 40.0, output="db")
    want = np.maximum(ref.bmode_db(iq), -40.0)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, atol=TOLERANCES["bmode_db_abs"], rtol=0)


def test_per_frame_and_fixed_reference(rng):
    iq = random_iq(rng, (4, 16, 16))
    iq[2] *= 100  # one bright frame must not darken the others with per-frame normalisation
    got = usbeam.bmode(iq, 40.0, output="db", normalize="frame")
    for k in range(4):
        np.testing.assert_allclose(got[k], np.maximum(ref.bmode_db(iq[k]), -40),
                                   atol=TOLERANCES["bmode_db_abs"])
    fixed = usbeam.bmode(iq, 40.0, output="db", normalize=2.0)
    np.testing.assert_allclose(fixed, np.maximum(ref.bmode_db(iq, 2.0), -40), atol=TOLERANCES["bmode_db_abs"])


def test_analytic_levels():
    iq = np.array([1.0, 0.1, 0.0], dtype=np.complex64)
    np.testing.assert_array_equal(usbeam.bmode(iq, 40.0), [255, 127, 0])


def test_plan_reuse_and_out(rng):
    plan = usbeam.BModePlan((5, 6), 30.0)
    out = np.full((5, 6), 77, np.uint8)
    for _ in range(2):
        iq = random_iq(rng, (5, 6))
        assert plan(iq, out=out) is out
        assert_uint8_close(out, ref.bmode_uint8(iq, 30.0))


def test_input_not_modified(rng):
    iq = random_iq(rng, (8, 8))
    copy = iq.copy()
    usbeam.bmode(iq, 30)
    np.testing.assert_array_equal(iq, copy)


@pytest.mark.parametrize("bad, exc, word", [
    (dict(dynamic_range=0), ValueError, "dynamic_range"),
    (dict(dynamic_range=float("nan")), ValueError, "dynamic_range"),
    (dict(dynamic_range=float("inf")), ValueError, "dynamic_range"),
    (dict(output="png"), ValueError, "output"),
    (dict(normalize="both"), ValueError, "normalize"),
    (dict(normalize=-1.0), ValueError, "normalize"),
])
def test_bad_parameters(rng, bad, exc, word):
    kwargs = dict(dynamic_range=30.0)
    kwargs.update(bad)
    with pytest.raises(exc, match=word):
        usbeam.bmode(random_iq(rng, (4, 4)), **kwargs)


def test_bad_arrays(rng):
    with pytest.raises(TypeError, match="image"):  # float RF is taken (its envelope), integers are not
        usbeam.bmode(np.ones((4, 4), np.int16))
    with pytest.raises(TypeError, match="data='rf'"):
        usbeam.BModePlan((4, 4))(np.ones((4, 4), np.float32))
    with pytest.raises(ValueError, match="empty"):
        usbeam.bmode(np.ones((0, 4), np.complex64))
    iq = random_iq(rng, (4, 4))
    with pytest.raises(TypeError, match="out"):
        usbeam.bmode(iq, out=np.empty((4, 4), np.float32))
    with pytest.raises(ValueError, match="out"):
        usbeam.bmode(iq, out=np.empty((4, 5), np.uint8))
    read_only = np.empty((4, 4), np.uint8)
    read_only.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        usbeam.bmode(iq, out=read_only)
    with pytest.raises(ValueError, match="contiguous"):
        usbeam.bmode(iq, out=np.empty((4, 8), np.uint8)[:, ::2])


def test_binding_rejects_bad_buffers_without_crashing(rng):
    # The C binding checks arrays itself, so a bug in the Python layer cannot crash it.
    plan = usbeam._core.bmode_plan(16, 1, 30.0)
    with pytest.raises(TypeError, match="image"):
        usbeam._core.bmode_execute(plan, np.zeros(16, np.float32), np.zeros(16, np.uint8))
    with pytest.raises(ValueError, match="out"):
        usbeam._core.bmode_execute(plan, np.zeros(16, np.complex64), np.zeros(15, np.uint8))
    with pytest.raises(TypeError, match="plan"):
        usbeam._core.bmode_execute(object(), np.zeros(16, np.complex64), np.zeros(16, np.uint8))
