"""Scan conversion CUDA twin (cuda/scan_convert.cu) against the CPU backend: the same table
and the same float32 mix (usbeam_math.h), so the results are identical."""
import numpy as np
import pytest

import usbeam
from usbeam import device


def sector():
    return usbeam.PolarGrid(np.linspace(0.04, 0.1, 50), np.linspace(-0.6, 0.55, 41), apex=(0.0, -0.04))


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_matches_cpu(rng, dtype):
    polar = sector()
    grid = polar.cartesian_grid(nx=64, nz=48)
    shape = (3,) + polar.shape
    image = (rng.integers(0, 256, shape) if dtype == np.uint8 else rng.uniform(-60, 0, shape)).astype(dtype)
    fill = 3 if dtype == np.uint8 else -80.0
    cpu = usbeam.ScanConvertPlan(polar, grid, shape, dtype, fill=fill)(image)
    plan = usbeam.ScanConvertPlan(polar, grid, shape, dtype, fill=fill, backend="cuda")
    out = device.from_numpy(np.full(cpu.shape, 77, dtype))  # poisoned
    assert plan(device.from_numpy(image), out=out) is out
    np.testing.assert_array_equal(out.to_numpy(), cpu)
    np.testing.assert_array_equal(plan(image), cpu)  # host in, host out


@pytest.mark.cuda
def test_nonfinite_flagged():
    polar = sector()
    grid = polar.cartesian_grid(nx=32, nz=32)
    image = np.zeros(polar.shape, np.float32)
    image[20, 20] = np.inf
    plan = usbeam.ScanConvertPlan(polar, grid, backend="cuda")
    with pytest.raises(ValueError, match="image"):
        plan(image)
