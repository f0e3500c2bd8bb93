"""Doppler on simulated moving scatterers (usbeam.simulate_rf) through the whole chain
RF -> IQ -> DAS -> clutter filter -> color / power Doppler (usbeam.DopplerPipeline).

Blood: a cloud of point scatterers moving axially at a set velocity (toward the probe is
positive: a positive Doppler shift); tissue: static scatterers 40 dB brighter in the same
region.  The velocity is read as the median over an interior window of the cloud, which the
scatterers fill for the whole ensemble.

The Doppler equation v = c f_D / (2 f) holds at the echoes' effective centre frequency f,
which is not fc here: with a plane wave and a wide receive aperture the echoes arrive
obliquely (f drops about 5 % below fc at f-number 1.5, 2.6 % at 4, none at 10 in this set-up),
and each speckle realisation shifts the local spectrum by a few % more.  So the plain Kasai
estimate (scaled with fc) is checked against the Doppler equation at the effective frequency
measured from the axial phase of the beamformed ensemble (NumPy, in this file), and usbeam's
own Loupas axial correction, which estimates that frequency per pixel, against the true
velocity directly.
"""
import numpy as np
import pytest

import usbeam
from reference import doppler as ref
from tolerances import TOLERANCES

pytest.importorskip("usbeam.beamformer", reason="needs the DAS family (usbeam.Beamformer)")

FC, FS, C, PRF = 5e6, 20e6, 1540.0, 4e3
VN = C * PRF / (4 * FC)
N_FRAMES, N_SAMPLES = 16, 640
PROBE = usbeam.LinearArray(n_elements=32, pitch=3e-4, width=2.7e-4, fc=FC, bandwidth=0.6)
SEQUENCE = usbeam.PlaneWave(0.0)
GRID = usbeam.Grid(x=np.arange(-4e-3, 4e-3 + 1e-9, 1e-4), z=np.arange(14.5e-3, 17.5e-3 + 1e-9, 7.7e-5))


def simulate(rng, velocity, *, tissue_db=None, n_blood=1400):
    """RF (N_FRAMES, 1, 32, N_SAMPLES) float32 of blood moving at `velocity` (m/s, + toward the
    probe) and, optionally, static tissue `tissue_db` above the blood (amplitude ratio)."""
    blood = np.column_stack([rng.uniform(-6e-3, 6e-3, n_blood), np.zeros(n_blood),
                             rng.uniform(12e-3, 21e-3, n_blood)])
    step = np.array([0.0, 0.0, -velocity / PRF])
    positions = blood[None] + np.arange(N_FRAMES)[:, None, None] * step
    amplitudes = rng.standard_normal(n_blood)
    if tissue_db is not None:
        n_tissue = n_blood
        tissue = np.column_stack([rng.uniform(-6e-3, 6e-3, n_tissue), np.zeros(n_tissue),
                                  rng.uniform(12e-3, 21e-3, n_tissue)])
        positions = np.concatenate([positions, np.broadcast_to(tissue, (N_FRAMES,) + tissue.shape)], axis=1)
        amplitudes = np.concatenate([amplitudes, 10 ** (tissue_db / 20) * rng.standard_normal(n_tissue)])
    rf = usbeam.simulate_rf(positions, amplitudes, PROBE, SEQUENCE, fs=FS, fc=FC, c=C, n_samples=N_SAMPLES,
                            noise=1e-3 if tissue_db is None else 1e-5, seed=int(rng.integers(1 << 31)))
    return np.ascontiguousarray(rf.reshape(N_FRAMES, 1, PROBE.n_elements, N_SAMPLES), dtype=np.float32)


def pipeline(clutter=None, f_number=1.5, **kwargs):
    options = kwargs.pop("clutter_options", None)
    return usbeam.DopplerPipeline(PROBE, SEQUENCE, GRID, n_frames=N_FRAMES, n_samples=N_SAMPLES, fs=FS, fc=FC,
                                  c=C, prf=PRF, rf_dtype=np.float32, bandwidth=0.6, f_number=f_number,
                                  clutter=clutter, clutter_options=options, **kwargs)


def effective_frequency(beamformed):
    """Mean frequency the Doppler sees, from the axial lag-1 autocorrelation of the beamformed
    ensemble (its phase per row is 4 pi f dz / c in the usbeam IQ convention), in NumPy."""
    dz = GRID.z[1] - GRID.z[0]
    rz = np.sum(beamformed[:, 1:, :] * np.conj(beamformed[:, :-1, :]))
    deviation = np.angle(rz * np.exp(-4j * np.pi * FC * dz / C))
    return FC + deviation * C / (4 * np.pi * dz)


@pytest.mark.parametrize("fraction", [-0.8, -0.5, 0.3, 0.8])
def test_simulated_velocity_within_nyquist(rng, fraction):
    true_v = fraction * VN
    pipe = pipeline()
    maps = pipe(simulate(rng, true_v))
    # Kasai with fc, brought to the Doppler equation at the measured effective frequency
    calibrated = np.median(maps.velocity) * FC / effective_frequency(pipe._beamformed)
    assert abs(calibrated - true_v) <= TOLERANCES["doppler_velocity_estimate_rel"] * abs(true_v)
    # the Loupas axial correction (usbeam's option) finds that frequency per pixel itself
    corrected, _ = usbeam.color_doppler(pipe._beamformed, fc=FC, prf=PRF, c=C, average=5, axial_correction=True,
                                        dz=GRID.z[1] - GRID.z[0])
    assert abs(np.median(corrected) - true_v) <= TOLERANCES["doppler_loupas_estimate_rel"] * abs(true_v)


@pytest.mark.parametrize("fraction", [1.3, -1.4, 1.8])
def test_simulated_velocity_beyond_nyquist_aliases(rng, fraction):
    pipe = pipeline()
    maps = pipe(simulate(rng, fraction * VN))
    # phase advance per frame at the effective frequency, wrapped into (-pi, pi]
    phase = np.pi * fraction * effective_frequency(pipe._beamformed) / FC
    aliased = VN * np.angle(np.exp(1j * phase)) / np.pi
    assert abs(fraction) > 1 and abs(aliased) < VN
    assert abs(np.median(maps.velocity) - aliased) <= TOLERANCES["doppler_alias_abs_vn"] * VN


@pytest.mark.parametrize("clutter, options", [("mean", {}), ("poly", {"order": 2}), ("svd", {"low": 1}),
                                              ("svd", {}), ("iir", {"order": 4, "cutoff": 0.05})])
def test_simulated_tissue_40db_removed(rng, clutter, options):
    true_v = 0.5 * VN
    rf = simulate(rng, true_v, tissue_db=40.0)
    unfiltered = pipeline(outputs=("color",))(rf).velocity
    assert abs(np.median(unfiltered)) < 0.1 * VN   # tissue dominates: no flow seen
    pipe = pipeline(clutter, clutter_options=options)
    maps = pipe(rf)
    # the filtered ensemble is the flow: its effective frequency scales the Doppler equation
    calibrated = np.median(maps.velocity) * FC / effective_frequency(pipe._filtered)
    assert abs(calibrated - true_v) <= TOLERANCES["doppler_velocity_estimate_rel"] * true_v


def test_pipeline_equals_its_stages(rng):
    rf = simulate(rng, 0.4 * VN)
    pipe = pipeline("svd", clutter_options={"low": 1}, power_db=False)
    maps = pipe(rf)
    # the same chain by hand, through the public one-shot functions and the float64 reference
    iq = usbeam.rf2iq(rf, fs=FS, fc=FC, bandwidth=0.6)
    bf = usbeam.Beamformer(PROBE, SEQUENCE, GRID, fs=FS, fc=FC, c=C, n_samples=N_SAMPLES, f_number=1.5,
                           n_frames=N_FRAMES)
    beamformed = bf(iq)
    np.testing.assert_allclose(pipe._beamformed, beamformed, rtol=0, atol=1e-6 * np.abs(beamformed).max())
    filtered = ref.svd_filter(beamformed, 1)
    v, var = ref.kasai(filtered, FC, PRF, C)
    diff = (maps.velocity - v + VN) % (2 * VN) - VN
    assert np.median(np.abs(diff)) <= 1e-4 * VN
    np.testing.assert_allclose(maps.power, ref.power(filtered), rtol=1e-4)
    # on the CPU each call returns its own arrays (copied out of the reused buffers under the
    # pipeline's lock, so calls from several threads cannot overwrite each other's maps)
    kept = maps.velocity.copy()
    again = pipe(rf)
    assert again.velocity is not maps.velocity and again.power is not maps.power
    np.testing.assert_array_equal(maps.velocity, kept)
    assert pipe.input_bytes == rf.nbytes and pipe.nyquist_velocity == pytest.approx(VN)


def test_pipeline_bad_input(rng):
    with pytest.raises(ValueError, match="outputs"):
        pipeline(outputs=("bmode",))
    with pytest.raises(ValueError, match="prf"):
        usbeam.DopplerPipeline(PROBE, SEQUENCE, GRID, n_frames=N_FRAMES, n_samples=N_SAMPLES, fs=FS, fc=FC,
                               prf=-1.0)
    with pytest.raises(ValueError, match="order"):
        pipeline("poly", clutter_options={"order": N_FRAMES})
    pipe = pipeline()
    with pytest.raises(ValueError, match="rf"):
        pipe(np.zeros((N_FRAMES, 1, PROBE.n_elements, N_SAMPLES + 1), np.float32))
    with pytest.raises(TypeError, match="rf"):
        pipe(np.zeros((N_FRAMES, 1, PROBE.n_elements, N_SAMPLES), np.int16))
