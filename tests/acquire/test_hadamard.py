"""Hadamard matrices and decoding against the NumPy reference (tests/reference/hadamard.py)."""
import numpy as np
import pytest

import usbeam
from reference import hadamard as ref
from tolerances import TOLERANCES

ISSUE_ORDERS = [2, 4, 8, 12, 16, 20, 24, 32, 40, 48, 64, 80, 96, 128, 160, 192, 256]
ALGORITHMS = ["direct", "fast"]


def test_orders_are_exactly_the_supported_families():
    assert usbeam.hadamard_orders() == [1] + ISSUE_ORDERS


@pytest.mark.parametrize("n", ISSUE_ORDERS)
def test_matrix_is_the_documented_construction(n):
    h = usbeam.hadamard(n)
    assert h.dtype == np.int8 and h.shape == (n, n)
    np.testing.assert_array_equal(h, ref.hadamard(n))
    h64 = h.astype(np.int64)
    np.testing.assert_array_equal(h64 @ h64.T, n * np.eye(n, dtype=np.int64))


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("n", ISSUE_ORDERS)
def test_roundtrip_full_range_int16_is_exact(rng, n, algorithm):
    # x spans the whole int16 range; its encoding needs int32, which is decoded exactly.
    x = rng.integers(-32768, 32768, size=(3, n, 37), dtype=np.int16)
    encoded = ref.encode(x, usbeam.hadamard(n), axis=1).astype(np.int32)
    out = np.full(x.shape, -7777777, np.int32)
    got = usbeam.hadamard_decode(encoded, n, axis=1, output="int32", algorithm=algorithm, out=out)
    assert got is out
    np.testing.assert_array_equal(got, x)
    got_f = usbeam.hadamard_decode(encoded, n, axis=1, output="float32", algorithm=algorithm)
    np.testing.assert_array_equal(got_f, x.astype(np.float32))


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("n", ISSUE_ORDERS)
def test_roundtrip_int16_encoded_data_is_exact(rng, n, algorithm):
    # The scanner's int16 samples: an encoding that fits int16 (|x| <= 32767 // n).
    limit = 32767 // n
    x = rng.integers(-limit, limit + 1, size=(n, 5, 19), dtype=np.int16)
    encoded = ref.encode(x, usbeam.hadamard(n), axis=0)
    assert np.abs(encoded).max() <= 32767
    encoded = encoded.astype(np.int16)
    for output in ("int32", "float32"):
        got = usbeam.hadamard_decode(encoded, n, axis=0, output=output, algorithm=algorithm)
        np.testing.assert_array_equal(got, x.astype(output))


@pytest.mark.parametrize("n", ISSUE_ORDERS)
def test_direct_and_fast_agree_exactly_and_match_reference(rng, n):
    y = rng.integers(-32768, 32768, size=(2, n, 41), dtype=np.int16)  # not an encoding
    exact = ref.decode_sum(y, usbeam.hadamard(n), axis=1)
    want_f = (exact.astype(np.float64) / n).astype(np.float32)  # correctly rounded quotient
    want_i = ref.round_half_away(exact, n)
    results = {}
    for algorithm in ALGORITHMS:
        f = usbeam.hadamard_decode(y, n, axis=1, algorithm=algorithm)
        i = usbeam.hadamard_decode(y, n, axis=1, output="int32", algorithm=algorithm)
        np.testing.assert_array_equal(f, want_f)
        np.testing.assert_array_equal(i, want_i)
        results[algorithm] = (f, i)
    np.testing.assert_array_equal(results["direct"][0], results["fast"][0])
    np.testing.assert_array_equal(results["direct"][1], results["fast"][1])


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_every_axis_and_transmit_last_layout(rng, axis, algorithm):
    n = 24
    shape = [3, 5, 7]
    shape[axis] = n
    y = rng.integers(-3000, 3000, size=shape, dtype=np.int16)
    want = ref.decode(y, usbeam.hadamard(n), axis=axis)
    got = usbeam.hadamard_decode(y, n, axis=axis, algorithm=algorithm)
    np.testing.assert_allclose(got, want, rtol=TOLERANCES["hadamard_float32_rel"], atol=0)
    out = np.full(np.moveaxis(y, axis, -1).shape, np.nan, np.float32)
    last = usbeam.hadamard_decode(y, n, axis=axis, algorithm=algorithm, transmit_last=True, out=out)
    assert last.shape == np.moveaxis(y, axis, -1).shape
    np.testing.assert_array_equal(last, np.moveaxis(got, axis, -1))


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("n", [12, 64, 160])
def test_float32_input(rng, n, algorithm):
    y = rng.standard_normal((n, 33)).astype(np.float32)
    got = usbeam.hadamard_decode(y, n, algorithm=algorithm)
    np.testing.assert_allclose(got, ref.decode(y, usbeam.hadamard(n)),
                               rtol=0, atol=TOLERANCES["hadamard_float32_abs"] * np.abs(y).max())


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_complex64_iq_input(rng, axis, algorithm):
    n = 20
    shape = [n, 6, 9]
    shape[0], shape[axis] = shape[axis], n
    y = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)
    out = np.full(shape, np.nan, np.complex64)
    got = usbeam.hadamard_decode(y, n, axis=axis, algorithm=algorithm, out=out)
    assert got is out and got.dtype == np.complex64
    h = usbeam.hadamard(n)
    want = ref.decode(y.real, h, axis=axis) + 1j * ref.decode(y.imag, h, axis=axis)
    np.testing.assert_allclose(got, want, rtol=0, atol=TOLERANCES["hadamard_float32_abs"] * np.abs(y).max())
    with pytest.raises(ValueError, match="transmit_last"):
        usbeam.hadamard_decode(y, n, axis=axis, transmit_last=True)
    with pytest.raises(TypeError, match="int32"):
        usbeam.hadamard_decode(y, n, axis=axis, output="int32")


def test_user_matrix_direct(rng):
    # Another valid Hadamard matrix: rows permuted and some columns negated.
    n = 12
    h = usbeam.hadamard(n)[rng.permutation(n)] * np.where(rng.random(n) < 0.5, -1, 1).astype(np.int8)
    x = rng.integers(-2000, 2000, size=(n, 50), dtype=np.int16)
    encoded = ref.encode(x, h).astype(np.int16)
    np.testing.assert_array_equal(usbeam.hadamard_decode(encoded, h, output="int32"), x)
    with pytest.raises(ValueError, match="fast"):
        usbeam.hadamard_decode(encoded, h, algorithm="fast")
    # usbeam's own matrix passed explicitly is accepted by 'fast'
    own = usbeam.hadamard(n)
    np.testing.assert_array_equal(usbeam.hadamard_decode(ref.encode(x, own).astype(np.int16), own,
                                                         algorithm="fast", output="int32"), x)


def test_plan_reuse_and_input_untouched(rng):
    plan = usbeam.HadamardDecodePlan((16, 3, 20), 16, algorithm="fast")
    for _ in range(2):
        x = rng.integers(-100, 100, size=(16, 3, 20), dtype=np.int16)
        y = ref.encode(x, usbeam.hadamard(16)).astype(np.int16)
        copy = y.copy()
        np.testing.assert_array_equal(plan(y), x)
        np.testing.assert_array_equal(y, copy)


def test_non_contiguous_input(rng):
    y = rng.integers(-100, 100, size=(8, 40), dtype=np.int16)[:, ::2]
    np.testing.assert_allclose(usbeam.hadamard_decode(y, 8), ref.decode(y, usbeam.hadamard(8)),
                               rtol=TOLERANCES["hadamard_float32_rel"])


@pytest.mark.parametrize("order", [3, 6, 10, 36, 384, 512, 0, -4])
def test_order_without_matrix(order):
    with pytest.raises(ValueError, match="order"):
        usbeam.hadamard(order)
    with pytest.raises(ValueError, match="order"):
        usbeam.hadamard_decode(np.zeros((max(order, 1), 4), np.int16), order)


def test_bad_input(rng):
    y = np.zeros((16, 10), np.int16)
    with pytest.raises(ValueError, match="transmits.*order 12"):
        usbeam.hadamard_decode(y, 12)
    with pytest.raises(ValueError, match="transmits"):
        usbeam.hadamard_decode(y, 16, axis=1)
    with pytest.raises(ValueError, match="axis"):
        usbeam.hadamard_decode(y, 16, axis=2)
    with pytest.raises(TypeError, match="dtype"):
        usbeam.hadamard_decode(y.astype(np.float64), 16)
    with pytest.raises(TypeError, match="int32"):
        usbeam.hadamard_decode(y.astype(np.float32), 16, output="int32")
    with pytest.raises(ValueError, match="algorithm"):
        usbeam.hadamard_decode(y, 16, algorithm="fft")
    with pytest.raises(ValueError, match="output"):
        usbeam.hadamard_decode(y, 16, output="float64")
    not_hadamard = np.ones((16, 16), np.int8)
    with pytest.raises(ValueError, match="Hadamard"):
        usbeam.hadamard_decode(y, not_hadamard)
    with pytest.raises(ValueError, match="\\+1 or -1"):
        usbeam.hadamard_decode(y, np.zeros((16, 16), np.int8))
    with pytest.raises(ValueError, match="square"):
        usbeam.hadamard_decode(y, np.ones((16, 8), np.int8))
    with pytest.raises(ValueError, match="empty"):
        usbeam.hadamard_decode(np.zeros((0, 4), np.int16), 2)
    with pytest.raises(TypeError, match="out"):
        usbeam.hadamard_decode(y, 16, out=np.empty((16, 10), np.float64))
    with pytest.raises(ValueError, match="out"):
        usbeam.hadamard_decode(y, 16, out=np.empty((16, 11), np.float32))
    read_only = np.empty((16, 10), np.float32)
    read_only.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        usbeam.hadamard_decode(y, 16, out=read_only)


def test_binding_rejects_bad_buffers_without_crashing():
    plan = usbeam._core.hadamard_plan(8, 1, 4, "int16", "float32", "direct", 0)
    with pytest.raises(TypeError, match="data"):
        usbeam._core.hadamard_execute(plan, np.zeros(32, np.float32), np.zeros(32, np.float32))
    with pytest.raises(ValueError, match="out"):
        usbeam._core.hadamard_execute(plan, np.zeros(32, np.int16), np.zeros(31, np.float32))
    with pytest.raises(TypeError, match="plan"):
        usbeam._core.hadamard_execute(object(), np.zeros(32, np.int16), np.zeros(32, np.float32))
    with pytest.raises(ValueError, match="order"):
        usbeam._core.hadamard_plan(6, 1, 4, "int16", "float32", "direct", 0)
    with pytest.raises(ValueError, match="Hadamard"):
        usbeam._core.hadamard_plan(4, 1, 4, "int16", "float32", "direct", 0, np.ones((4, 4), np.int8))
