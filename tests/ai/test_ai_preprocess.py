"""Model-input pre-processing and FP16 conversion against the NumPy references."""
import numpy as np
import pytest

import usbeam
from reference import ai_preprocess as ref
from tolerances import TOLERANCES


def assert_close_rel(got, want):
    scale = max(1.0, float(np.max(np.abs(want))))
    np.testing.assert_allclose(got, want, rtol=0, atol=TOLERANCES["ai_resize_rel"] * scale)


def assert_half_close(got, want):
    """got float16 vs the float64 reference: within n half ulps of the reference rounded to half."""
    want16 = want.astype(np.float16)
    ulp = np.spacing(np.abs(want16)).astype(np.float64)
    diff = np.abs(got.astype(np.float64) - want16.astype(np.float64))
    # near zero the float32 arithmetic error (relative to the whole range) dominates a half ulp
    float32_error = TOLERANCES["ai_resize_rel"] * max(1.0, float(np.max(np.abs(want))))
    assert np.all(diff <= np.maximum(TOLERANCES["ai_resize_fp16_ulps"] * ulp, float32_error))


@pytest.mark.parametrize("in_shape, size", [((37, 53), (64, 64)), ((120, 90), (32, 48)), ((5, 7), (5, 7)),
                                            ((1, 9), (4, 3)), ((64, 64), (1, 1))])
@pytest.mark.parametrize("align_corners", [False, True])
def test_resize_uint8_matches_reference(rng, in_shape, size, align_corners):
    image = rng.integers(0, 256, in_shape, dtype=np.uint8)
    got = usbeam.model_input(image, size, align_corners=align_corners)
    want = ref.model_input(image[None, :, :, None], *size, 1 / 255, 0, 0, 1, 1, align_corners=align_corners)
    assert got.shape == (1, 1) + size and got.dtype == np.float32
    assert_close_rel(got, want)


@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_batch_channels_layout_dtype(rng, layout, dtype):
    images = rng.standard_normal((3, 41, 29, 3)).astype(np.float32) * 50
    mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
    got = usbeam.model_input(images, (24, 40), mean=mean, std=std, scale=0.01, offset=0.5, layout=layout,
                             dtype=dtype)
    want = ref.model_input(images, 24, 40, 0.01, 0.5, mean, std, 3, layout=layout)
    assert got.shape == want.shape and got.dtype == np.dtype(dtype)
    if dtype == "float32":
        assert_close_rel(got, want)
    else:
        assert_half_close(got, want)


def test_grey_to_three_channels_and_float16_input(rng):
    image = (rng.random((2, 30, 31)) * 4).astype(np.float16)
    got = usbeam.model_input(image, 16, channels=3, mean=[1, 2, 3], std=[0.5, 1, 2])
    want = ref.model_input(image.astype(np.float64)[..., None], 16, 16, 1, 0, [1, 2, 3], [0.5, 1, 2], 3)
    assert got.shape == (2, 3, 16, 16)
    assert_close_rel(got, want)


def test_analytic_cases():
    # a linear ramp is reproduced exactly by bilinear interpolation with align_corners=True
    ramp = np.tile(np.arange(11, dtype=np.float32) * 3, (5, 1))
    got = usbeam.model_input(ramp, (5, 21), align_corners=True)[0, 0]
    np.testing.assert_allclose(got, np.tile(np.arange(21) * 1.5, (5, 1)), atol=1e-5)
    # upsampling 2x with pixel centres: output pixel 0 sits at source -0.25 -> clamped to pixel 0,
    # output pixel 1 at 0.25 -> 0.75 * p0 + 0.25 * p1
    row = np.array([[0.0, 4.0]], np.float32)
    np.testing.assert_allclose(usbeam.model_input(row, (1, 4))[0, 0, 0], [0, 1, 3, 4])
    # constant image stays constant whatever the size; scale/offset applied
    flat = np.full((13, 17), 200, np.uint8)
    np.testing.assert_allclose(usbeam.model_input(flat, (31, 7), scale=1.0, offset=-100), 100.0)


def test_bmode_output_to_model_input(rng):
    iq = (rng.standard_normal((2, 60, 40)) + 1j * rng.standard_normal((2, 60, 40))).astype(np.complex64)
    bmode = usbeam.bmode(iq, 40)
    got = usbeam.model_input(bmode, 32, std=0.5, mean=0.5)
    want = ref.model_input(bmode[..., None], 32, 32, 1 / 255, 0, 0.5, 0.5, 1)
    assert_close_rel(got, want)


def test_plan_reuse_out_poison_and_input_untouched(rng):
    plan = usbeam.ModelInputPlan((2, 33, 45), (20, 30), image_dtype=np.uint8, dtype="float16", layout="nhwc")
    out = np.full(plan.shape, np.nan, np.float16)
    for _ in range(2):
        image = rng.integers(0, 256, (2, 33, 45), dtype=np.uint8)
        copy = image.copy()
        assert plan(image, out=out) is out
        assert not np.any(np.isnan(out))
        np.testing.assert_array_equal(image, copy)
        assert_half_close(out, ref.model_input(image[..., None], 20, 30, 1 / 255, 0, 0, 1, 1, layout="nhwc"))


def test_bad_input(rng):
    image = rng.integers(0, 256, (8, 8), dtype=np.uint8)
    with pytest.raises(ValueError, match="std"):
        usbeam.model_input(image, 4, std=0)
    with pytest.raises(ValueError, match="mean"):
        usbeam.model_input(image, 4, mean=[1, 2])
    with pytest.raises(ValueError, match="mean"):
        usbeam.model_input(image, 4, mean=np.nan)
    with pytest.raises(ValueError, match="layout"):
        usbeam.model_input(image, 4, layout="chw")
    with pytest.raises(TypeError, match="dtype"):
        usbeam.model_input(image, 4, dtype="int8")
    with pytest.raises(ValueError, match="size"):
        usbeam.model_input(image, 0)
    with pytest.raises(TypeError, match="size"):
        usbeam.model_input(image, "big")
    with pytest.raises(TypeError, match="image"):
        usbeam.model_input(image.astype(np.int16), 4)
    with pytest.raises(ValueError, match="image"):
        usbeam.model_input(np.zeros((1, 2, 3, 4, 5), np.uint8), 4)
    with pytest.raises(ValueError, match="channels"):
        usbeam.model_input(np.zeros((1, 4, 4, 3), np.uint8), 4, channels=1)
    with pytest.raises(TypeError, match="out"):
        usbeam.model_input(image, 4, out=np.empty((1, 1, 4, 4), np.float64))
    with pytest.raises(ValueError, match="out"):
        usbeam.model_input(image, 4, out=np.empty((1, 1, 4, 5), np.float32))
    read_only = np.empty((1, 1, 4, 4), np.float32)
    read_only.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        usbeam.model_input(image, 4, out=read_only)
    with pytest.raises(ValueError, match="contiguous"):
        usbeam.model_input(image, 4, out=np.empty((1, 1, 4, 8), np.float32)[..., ::2])


def test_binding_checks_buffers():
    plan = usbeam._core.preprocess_plan(1, 4, 4, 1, "uint8", 2, 2, 1, "nchw", "float32", False, (1, 1, 1),
                                        (0, 0, 0))
    with pytest.raises(TypeError, match="image"):
        usbeam._core.preprocess_execute(plan, np.zeros(16, np.float32), np.zeros(4, np.float32))
    with pytest.raises(ValueError, match="out"):
        usbeam._core.preprocess_execute(plan, np.zeros(16, np.uint8), np.zeros(5, np.float32))
    with pytest.raises(ValueError, match="in_channels"):
        usbeam._core.preprocess_plan(1, 4, 4, 2, "uint8", 2, 2, 1, "nchw", "float32", False, (1, 1, 1), (0, 0, 0))


# ---------------------------------------------------------------- FP16

def test_all_halves_to_float32_bit_exact():
    halves = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16)
    got = usbeam.float16_to_float32(halves)
    np.testing.assert_array_equal(got.view(np.uint32), halves.astype(np.float32).view(np.uint32))


def test_all_halves_round_trip_bit_exact():
    halves = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16)
    as_float = halves.astype(np.float32)
    got = usbeam.float32_to_float16(as_float)
    np.testing.assert_array_equal(got.view(np.uint16), as_float.astype(np.float16).view(np.uint16))
    np.testing.assert_array_equal(got.view(np.uint16), halves.view(np.uint16))


def test_random_float32_to_float16_bit_exact(rng):
    bits = rng.integers(0, 2**32, 2_000_000, dtype=np.uint64).astype(np.uint32)
    values = bits.view(np.float32)
    # and values concentrated where halves live, including ties and the subnormal range
    near = (rng.standard_normal(1_000_000) * 10.0 ** rng.uniform(-9, 5, 1_000_000)).astype(np.float32)
    halves = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16)
    h32 = halves[np.isfinite(halves)].astype(np.float32)
    ties = ((h32[:-1].astype(np.float64) + h32[1:]) / 2).astype(np.float32)  # exact midpoints
    for x in (values, near, ties, np.nextafter(ties, np.float32(np.inf)), np.nextafter(ties, np.float32(-np.inf))):
        with np.errstate(over="ignore", invalid="ignore"):
            want = x.astype(np.float16)
        np.testing.assert_array_equal(usbeam.float32_to_float16(x).view(np.uint16), want.view(np.uint16))


def test_float16_conversion_bad_input():
    with pytest.raises(TypeError, match="x"):
        usbeam.float32_to_float16(np.zeros(3, np.float64))
    with pytest.raises(TypeError, match="x"):
        usbeam.float16_to_float32(np.zeros(3, np.float32))
    with pytest.raises(ValueError, match="out"):
        usbeam.float32_to_float16(np.zeros(3, np.float32), out=np.zeros(4, np.float16))


def test_cuda_plan_refused_without_gpu():
    if usbeam.cuda_available():
        pytest.skip("a GPU is present")
    with pytest.raises(usbeam.UsbeamError, match="cuda"):
        usbeam.ModelInputPlan((8, 8), 4, backend="cuda")


@pytest.mark.parametrize("align_corners", [False, True])
def test_against_pytorch_interpolate(rng, align_corners):
    torch = pytest.importorskip("torch")
    image = rng.random((2, 3, 37, 61)).astype(np.float32)
    want = torch.nn.functional.interpolate(torch.from_numpy(image), size=(64, 45), mode="bilinear",
                                           align_corners=align_corners, antialias=False).numpy()
    got = usbeam.model_input(np.moveaxis(image, 1, -1), (64, 45), align_corners=align_corners)
    assert_close_rel(got, want)
