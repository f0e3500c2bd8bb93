"""Adaptive beamformers against ultraspy's CPU kernels (ultraspy 1.2.7, numba) on the same
synthetic-aperture data: RF DMAS, p-DAS (RF and IQ) and MV with diagonal loading.

ultraspy's geometry is set to usbeam's exactly: one element fires per transmit (its transmit
time min_e(delay_e c + |p - e|) / c with every other element's delay huge is |p - e_k| / c, as
usbeam's SyntheticAperture), full aperture (f-number 0), rectangular window, linear
interpolation, delays well inside the record (ultraspy's validity test differs at the ends).
Conventions that differ, and how they are matched:
- MV: ultraspy runs Capon per transmit and sums (one transmit here), loads R with
  trace(R) / (delta_l L) (delta = 1 / delta_l), takes L = int(l_prop N) and scales its output by
  (N - L + 1) / sqrt(L) relative to usbeam's (steering vector 1/sqrt(L), mean over the L
  weighted subarray sums): compared after that fixed rescaling.
- DMAS on IQ: ultraspy's baseband DMAS (Shen 2019) squares the sum of the phase-kept roots,
  keeping the i = j terms; not compared (usbeam's sums pairs i < j, Matrone's definition).
ultraspy's kernels use numba fastmath, so they agree to ~1e-6 relative, not to the last bit.
Marked slow: numba compiles each ultraspy kernel per dtype on first use (~5 s of CPU each; four
compilations here, a minute or more of wall time on a loaded machine).
"""
import numpy as np
import pytest

import usbeam
from tolerances import TOLERANCES

pytestmark = pytest.mark.slow

numba_cores = pytest.importorskip("ultraspy.cpu.kernels.numba_cores", reason="ultraspy (test peer) is not installed")
from ultraspy.cpu.kernels.numba_cores import capon as us_capon, fdmas as us_fdmas, pdas as us_pdas  # noqa: E402

FC, FS, C, T0 = 5e6, 25e6, 1540.0, 0.0
N_EL, PITCH, N_SAMPLES = 16, 0.3e-3, 500
FIRING = (3, 12)


def scene(rng, iq, n_tx=len(FIRING)):
    probe = usbeam.LinearArray(N_EL, PITCH)
    grid = usbeam.Grid(x=np.linspace(-2e-3, 2e-3, 5), z=np.linspace(6e-3, 10e-3, 4))
    shape = (n_tx, N_EL, N_SAMPLES)
    data = rng.standard_normal(shape) + (1j * rng.standard_normal(shape) if iq else 0)
    data = data.astype(np.complex64 if iq else np.float32)
    # ultraspy's arrays: probes (3, n_tx, n_el), thetas (n_tx, n_el), delays (n_tx, n_el) s
    pos = np.zeros((3, n_tx, N_EL))
    pos[0] = probe.x
    thetas = np.zeros((n_tx, N_EL))
    delays = np.full((n_tx, N_EL), 1.0)  # 1 s: never the minimum
    for t in range(n_tx):
        delays[t, FIRING[t]] = 0.0
    pts = grid.coordinates()
    common = (data.astype(np.complex128 if iq else np.float64), iq, pos, pos, thetas, thetas, delays, FS, FC, T0, C,
              np.zeros(2), np.ascontiguousarray(pts[:, 0]), np.ascontiguousarray(pts[:, 1]),
              np.ascontiguousarray(pts[:, 2]))
    return probe, grid, data, common


def usbeam_image(probe, grid, data, method, **options):
    seq = [usbeam.SyntheticAperture(FIRING[t]) for t in range(data.shape[0])]
    bf = usbeam.Beamformer(probe, seq, grid, fs=FS, fc=FC, c=C, t0=T0, n_samples=N_SAMPLES, f_number=0.0,
                           dtype=data.dtype, method=method, **options)
    return bf(data).ravel()


def rel(got, want):
    return np.linalg.norm(got - want) / np.linalg.norm(want)


def test_dmas_rf_matches_ultraspy(rng):
    probe, grid, data, common = scene(rng, iq=False)
    # interpolation 1 (linear), reduction 0 (sum), rect window, no transmit aperture, reduce, compound, same probe
    theirs = us_fdmas.delay_multiply_and_sum(*common, 1, 0, 0, 0.0, 0, 1, 1, 1)[0, 0].real
    assert rel(usbeam_image(probe, grid, data, "dmas"), theirs) < TOLERANCES["adaptive_ultraspy_rel"]


@pytest.mark.parametrize("iq", [False, True], ids=["rf", "iq"])
def test_pdas_matches_ultraspy(rng, iq):
    probe, grid, data, common = scene(rng, iq=iq)
    theirs = us_pdas.p_delay_and_sum(*common, 2.5, False, 1, 0, 0, 0.0, 0, 1, 1, 1)[0, 0]
    ours = usbeam_image(probe, grid, data, "pdas", p=2.5)
    assert rel(ours, theirs if iq else theirs.real) < TOLERANCES["adaptive_ultraspy_rel"]


def test_mv_matches_ultraspy(rng):
    # IQ: the Hermitian (complex) covariance; RF is its real special case in the same code
    iq = True
    probe, grid, data, common = scene(rng, iq=iq, n_tx=1)
    l_prop, delta_l = 0.5, 20.0
    L = int(l_prop * N_EL)
    theirs = us_capon.capon(*common, True, l_prop, delta_l, 1, 0, 0, 0.0, 0, 1, 1, 1)[0, 0]
    ours = usbeam_image(probe, grid, data, "mv", subarray_length=L, diagonal_loading=1 / delta_l)
    ours = ours * (N_EL - L + 1) / np.sqrt(L)
    assert rel(ours, theirs if iq else theirs.real) < TOLERANCES["adaptive_ultraspy_rel"]
