"""What the DAS tests share: random input of each dtype, and the comparison of an image with
its float64 reference (tests/reference/das.py) at the tolerances of tests/tolerances.py."""
import numpy as np

from tolerances import TOLERANCES


def random_data(rng, shape, dtype):
    """Standard normal complex64 or float32, or int16 in [-3000, 3000)."""
    if dtype == np.complex64:
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)
    if dtype == np.int16:
        return rng.integers(-3000, 3000, shape).astype(np.int16)
    return rng.standard_normal(shape).astype(np.float32)


def assert_matches_reference(got, want, interpolation):
    """Relative L2 within das_rel_l2; with nearest interpolation, a fraction of pixels up to
    das_nearest_fraction_off may be off (a delay at a half-sample tie rounds either way)."""
    got = got.reshape(want.shape)
    err = np.abs(got - want)
    if interpolation == "nearest":
        off = err > TOLERANCES["das_nearest_pixel_rel"] * np.abs(want).max()
        assert np.mean(off) <= TOLERANCES["das_nearest_fraction_off"]
        got, want = got[~off], want[~off]
    assert np.linalg.norm(got - want) <= TOLERANCES["das_rel_l2"] * np.linalg.norm(want)
