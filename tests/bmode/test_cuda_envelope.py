"""Envelope CUDA twin (cuda/envelope.cu) against the CPU backend and the float64 reference, and
B-mode of real RF on CUDA (BModePlan(data='rf', backend='cuda'): analytic signal then
compression, both on the plan's stream).  Marked cuda: skipped without a GPU; `make test-emu`
runs them on the CUDA emulator."""
import numpy as np
import pytest

import usbeam
from reference import envelope as ref
from tolerances import TOLERANCES
from usbeam import device


def rel_error(got, want):
    return float(np.abs(np.asarray(got, np.complex128) - want).max() / np.abs(want).max())


@pytest.mark.cuda
@pytest.mark.parametrize("shape, axis", [((2, 97, 33), -2), ((3, 40), -1), ((21, 2, 3), 0)])
@pytest.mark.parametrize("output", ["magnitude", "analytic"])
def test_matches_cpu_and_reference(rng, shape, axis, output):
    image = rng.standard_normal(shape).astype(np.float32)
    cuda = usbeam.EnvelopePlan(shape, axis, output=output, backend="cuda")
    cpu = usbeam.EnvelopePlan(shape, axis, output=output)
    results = []
    for poison in (np.nan, 7.0):  # two poisons: equal results only if every value was written
        out = device.from_numpy(np.full(shape, poison, cuda.out_dtype))
        assert cuda(device.from_numpy(image), out=out) is out
        results.append(out.to_numpy())
    np.testing.assert_array_equal(results[0], results[1])
    assert rel_error(results[0], cpu(image)) <= TOLERANCES["envelope_cuda_rel"]
    want = ref.analytic_signal(image, axis)
    assert rel_error(results[0], want if output == "analytic" else np.abs(want)) <= TOLERANCES["envelope_rel"]
    # NumPy in, NumPy out (copied both ways)
    host = cuda(image)
    assert isinstance(host, np.ndarray)
    np.testing.assert_array_equal(host, results[0])


@pytest.mark.cuda
def test_bmode_of_rf_matches_cpu(rng):
    image = rng.standard_normal((2, 64, 20)).astype(np.float32)
    cuda = usbeam.BModePlan(image.shape, 40, output="db", data="rf", backend="cuda", strict=True)
    cpu = usbeam.BModePlan(image.shape, 40, output="db", data="rf")
    got = cuda(device.from_numpy(image)).to_numpy()
    np.testing.assert_allclose(got, cpu(image), rtol=0, atol=TOLERANCES["envelope_bmode_db_abs"])
    # a stream of the caller's: both stages follow it
    cuda.cuda.set_stream(None)
    again = cuda(device.from_numpy(image)).to_numpy()
    np.testing.assert_array_equal(again, got)


@pytest.mark.cuda
def test_non_finite_input_is_reported(rng):
    image = rng.standard_normal((16, 5)).astype(np.float32)
    image[3, 1] = np.inf
    plan = usbeam.EnvelopePlan(image.shape, backend="cuda")
    with pytest.raises(ValueError, match="image contains NaN or infinite"):
        plan(image)
