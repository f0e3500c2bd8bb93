"""Sparse DAS CUDA twin (cuda/das_sparse.cu, cuSPARSE SpMM) against the CPU sparse plan: every
input dtype and interpolation, non-finite input reported as ValueError (flagged on the device).
Needs a GPU or the CUDA emulator (marked cuda)."""
import numpy as np
import pytest

import usbeam
from test_cuda_das import FC, FS, N_SAMPLES, T0, C, random_data, sequence
from tolerances import TOLERANCES
from usbeam import device


def pair(rng, dtype, interpolation, n_frames=3):
    probe = usbeam.LinearArray(16, 3e-4, width=2.5e-4)
    seq = sequence(rng, probe)
    grid = usbeam.Grid(x=np.sort(rng.uniform(-3e-3, 3e-3, 13)), z=np.sort(rng.uniform(1e-3, 1.1e-2, 11)))
    common = dict(fs=FS, fc=FC, c=C, t0=T0, n_samples=N_SAMPLES, dtype=dtype, n_frames=n_frames,
                  interpolation=interpolation, f_number=1.1, window="hann", formulation="sparse")
    gpu = usbeam.Beamformer(probe, seq, grid, backend="cuda", **common)
    cpu = usbeam.Beamformer(probe, seq, grid, **common)
    data = random_data(rng, (n_frames, len(seq), probe.n_elements, N_SAMPLES), dtype)
    return gpu, cpu, data, grid


@pytest.mark.cuda
@pytest.mark.parametrize("interpolation", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("dtype", [np.complex64, np.float32, np.int16])
def test_cuda_sparse_matches_cpu(rng, dtype, interpolation):
    gpu, cpu, data, grid = pair(rng, dtype, interpolation)
    out = device.from_numpy(np.full((3,) + grid.shape, np.nan, gpu.out_dtype))
    assert gpu(device.from_numpy(data), out=out) is out
    got, want = out.to_numpy(), cpu(data)
    assert np.isfinite(got).all(), "poison left: some pixels were not written"
    # the same CSR operator: float32 sums in another order only
    assert np.linalg.norm(got - want) <= TOLERANCES["das_cuda_rel_l2"] * np.linalg.norm(want)
    assert gpu.sparse_bytes == cpu.sparse_bytes > 0
    assert set(gpu.cuda.stage_times()) == {"das_sparse.convert", "das_sparse.spmm"}


@pytest.mark.cuda
def test_cuda_sparse_non_finite_is_reported(rng):
    gpu, _, data, _ = pair(rng, np.float32, "linear")
    data[1, 0, 3, 10] = np.inf
    with pytest.raises(ValueError, match="NaN or infinite"):
        gpu(data)
