"""DAS CUDA twin (cuda/das.cu) on convex, phased and matrix arrays against the CPU backend
(element normals: each element's cone aperture and window in double on both; 3-D transmit
models; 4-row source laws), with the tolerances of the linear-array twin tests."""
import numpy as np
import pytest

import usbeam
from tolerances import TOLERANCES
from usbeam import device
from das_checks import random_data

FS, FC, C, T0 = 20e6, 5e6, 1540.0, 1e-6
N_SAMPLES = 300


def assert_close_to_cpu(got, want):
    assert np.linalg.norm(got - want) <= TOLERANCES["das_cuda_rel_l2"] * np.linalg.norm(want)


def run_both(rng, probe, seq, grid, dtype, n_frames, **kw):
    data = random_data(rng, (n_frames, len(seq), probe.n_elements, N_SAMPLES), dtype)
    args = dict(fs=FS, fc=FC, c=C, t0=T0, n_samples=N_SAMPLES, dtype=dtype, n_frames=n_frames, **kw)
    cpu = usbeam.Beamformer(probe, seq, grid, **args)(data)
    bf = usbeam.Beamformer(probe, seq, grid, backend="cuda", **args)
    out = device.from_numpy(np.full(cpu.shape, np.nan, cpu.dtype))
    assert bf(device.from_numpy(data), out=out) is out
    return out.to_numpy(), cpu


@pytest.mark.cuda
@pytest.mark.parametrize("dtype, n_frames, window", [(np.complex64, 1, "hann"), (np.complex64, 5, "tukey"),
                                                      (np.float32, 3, "rect"), (np.int16, 2, "hann")])
@pytest.mark.parametrize("f_number", [0.0, 1.0])
def test_convex_matches_cpu(rng, dtype, n_frames, window, f_number):
    probe = usbeam.ConvexArray(n_elements=32, pitch=3e-4, radius=0.015, element_width=2.7e-4)
    h = probe.apothem
    delays = rng.uniform(0, 1e-7, 32)
    seq = [usbeam.DivergingWave((0.0, -h)), usbeam.PlaneWave(0.15), usbeam.Focused.steered(-0.2, 8e-3),
           usbeam.SyntheticAperture(5), usbeam.Delays(delays)]
    polar = usbeam.PolarGrid.for_probe(probe, 10e-3, 17, 13)
    got, cpu = run_both(rng, probe, seq, polar, dtype, n_frames, f_number=f_number, window=window,
                        interpolation="linear")
    assert np.count_nonzero(cpu) > 0.5 * cpu.size
    assert_close_to_cpu(got, cpu)


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [np.complex64, np.float32])
def test_matrix_matches_cpu(rng, dtype):
    probe = usbeam.MatrixArray(6, 7, 3e-4, 3e-4, missing_rows=(2,))
    delays = rng.uniform(0, 1e-7, probe.n_elements)
    seq = [usbeam.PlaneWave(0.1, 0.2), usbeam.Focused((0.0, 0.5e-3, 5e-3), origin=(0.0, 0.0, 0.0)),
           usbeam.Delays(delays)]
    grid = usbeam.SphericalGrid(np.linspace(2e-3, 7e-3, 6), np.linspace(-0.4, 0.4, 5), np.linspace(-0.3, 0.3, 4))
    got, cpu = run_both(rng, probe, seq, grid, dtype, 2, f_number=1.0, window="hann", interpolation="cubic")
    assert cpu.shape == (2, 6, 4, 5)
    assert np.count_nonzero(cpu) > 0.5 * cpu.size
    assert_close_to_cpu(got, cpu)


@pytest.mark.cuda
def test_phased_sector_matches_cpu(rng):
    probe = usbeam.LinearArray(32, 1.5e-4, width=1.3e-4)
    seq = [usbeam.DivergingWave((0.0, -3e-3)), usbeam.Focused.steered(0.3, 10e-3)]
    polar = usbeam.PolarGrid(np.linspace(1e-3, 15e-3, 20), np.linspace(-0.7, 0.7, 15))
    got, cpu = run_both(rng, probe, seq, polar, np.complex64, 4, f_number=1.2, window="rect",
                        interpolation="linear")
    assert_close_to_cpu(got, cpu)
