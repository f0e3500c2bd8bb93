"""The adaptive beamformers move image quality the way the literature reports, on a simulated
point target and a small anechoic cyst (usbeam.simulate, usbeam.metrics): DMAS and MV narrow the
lateral main lobe (Matrone et al. 2015; Synnevag et al. 2007), CF/GCF/p-DAS darken the cyst
(higher contrast; Mallart & Fink 1994, Li & Li 2003).  Directions only: the sizes depend on
the setup (benchmarks/image_quality.py records them on PICMUS-like phantoms)."""
import numpy as np
import pytest

import usbeam
from usbeam import metrics

FC, FS, C, BW = 5e6, 20e6, 1540.0, 0.6
PROBE = usbeam.LinearArray(64, 0.3e-3)


def beamform(iq, grid, method, **options):
    return usbeam.Beamformer(PROBE, usbeam.PlaneWave(0.0), grid, fs=FS, fc=FC, c=C, n_samples=iq.shape[-1],
                             f_number=1.5, dtype=np.complex64, method=method, **options)(iq).reshape(grid.shape)


@pytest.fixture(scope="module")
def point():
    rf = usbeam.simulate_rf([[0.0, 0.0, 15e-3]], [1.0], PROBE, usbeam.PlaneWave(0.0), fs=FS, fc=FC, n_samples=700,
                            c=C, bandwidth=BW)
    iq = usbeam.rf2iq(rf, fs=FS, fc=FC, bandwidth=BW)
    grid = usbeam.Grid(x=np.arange(-2e-3, 2e-3 + 1e-9, 0.025e-3), z=np.arange(14e-3, 16e-3 + 1e-9, 0.025e-3))
    return iq, grid


@pytest.mark.parametrize("method, options", [("dmas", {}), ("fdmas", {}), ("mv", {"subarray_fraction": 0.5}),
                                             ("cf", {})])
def test_lateral_fwhm_narrower_than_das(point, method, options):
    iq, grid = point
    _, das_lateral = metrics.fwhm(beamform(iq, grid, "das"), grid, (0.0, 15e-3))
    _, lateral = metrics.fwhm(beamform(iq, grid, method, **options), grid, (0.0, 15e-3))
    assert lateral < 0.95 * das_lateral


def test_coherence_weighting_darkens_a_cyst():
    pos, amp = usbeam.cyst_phantom(x_range=(-4e-3, 4e-3), z_range=(12e-3, 20e-3), n_scatterers=1500,
                                   cyst_center=(0.0, 16e-3), cyst_radius=1.5e-3, points=(), seed=11)
    rf = usbeam.simulate_rf(pos, amp, PROBE, usbeam.PlaneWave(0.0), fs=FS, fc=FC, n_samples=800, c=C, bandwidth=BW)
    iq = usbeam.rf2iq(rf, fs=FS, fc=FC, bandwidth=BW)
    grid = usbeam.Grid(x=np.arange(-3.5e-3, 3.5e-3 + 1e-9, 0.1e-3), z=np.arange(12.5e-3, 19.5e-3 + 1e-9, 0.1e-3))
    inside = metrics.circle(grid, (0.0, 16e-3), 1.0e-3)
    ring = metrics.annulus(grid, (0.0, 16e-3), 2e-3, 3.4e-3)
    das = metrics.contrast(beamform(iq, grid, "das"), inside, ring)
    for method, options in (("cf", {}), ("gcf", {"gcf_m0": 1}), ("pdas", {"p": 2.0})):
        assert metrics.contrast(beamform(iq, grid, method, **options), inside, ring) < das - 3.0, method
