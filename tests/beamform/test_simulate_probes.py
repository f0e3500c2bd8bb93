"""The one simulator (usbeam.simulate_rf) on any probe geometry: convex and matrix arrays give
point targets where they are (beamformed by usbeam.das); the obliquity option silences echoes
from behind an element's face; the sampling routine shared with the row-column simulator
(pulse.echo_traces) is echo_trace channel by channel."""
import math

import numpy as np

import usbeam
from tolerances import TOLERANCES
from usbeam.simulate.pulse import echo_trace, echo_traces

FS, FC, C = 20e6, 4e6, 1540.0


def peak_error(probe, seq, target, rf, t0=0.0):
    wl = C / FC
    step = wl / 20
    grid = usbeam.Grid(x=target[0] + np.arange(-1e-3, 1e-3, step), z=target[2] + np.arange(-1e-3, 1e-3, step),
                       y=np.array([target[1]]))
    iq = usbeam.rf2iq(rf, fs=FS, fc=FC, t0=t0, bandwidth=0.6)
    env = np.abs(usbeam.das(iq, probe, seq, grid, fs=FS, fc=FC, c=C, t0=t0, f_number=1.0)).reshape(grid.shape)[0]
    iz, ix = np.unravel_index(np.argmax(env), env.shape)
    return math.hypot(grid.x[ix] - target[0], grid.z[iz] - target[2]) / wl


def test_convex_point_target():
    probe = usbeam.ConvexArray(n_elements=64, pitch=4e-4, radius=0.03, element_width=3.5e-4)
    seq = usbeam.DivergingWave((0.0, -probe.apothem))
    target = np.array([4e-3, 0.0, 25e-3])
    rf = usbeam.simulate_rf(target[None], [1.0], probe, seq, fs=FS, fc=FC, c=C, n_samples=1500, directivity=True)
    assert peak_error(probe, seq, target, rf) <= TOLERANCES["das_point_position_wavelengths"]


def test_matrix_point_target():
    probe = usbeam.MatrixArray(12, 12, 3e-4, 3e-4, missing_rows=(5,))
    seq = usbeam.PlaneWave(0.0)
    target = np.array([-1e-3, 6e-4, 12e-3])
    rf = usbeam.simulate_rf(target[None], [1.0], probe, seq, fs=FS, fc=FC, c=C, n_samples=800)
    assert rf.shape == (1, 132, 800)
    assert peak_error(probe, seq, target, rf) <= TOLERANCES["das_point_position_wavelengths"]


def test_obliquity_silences_echoes_behind_the_face():
    """An element of a convex array whose face points away from the scatterer hears nothing
    with directivity=True; without it every element hears the echo."""
    probe = usbeam.ConvexArray(n_elements=20, pitch=1.5e-3, radius=0.012)  # a wide arc (+-68 degrees)
    target = np.array([[0.02, 0.0, 0.002]])  # off to the right: behind the left elements' faces
    kw = dict(fs=FS, fc=FC, c=C, n_samples=600)
    with_obliquity = usbeam.simulate_rf(target, [1.0], probe, usbeam.SyntheticAperture(19), directivity=True, **kw)
    plain = usbeam.simulate_rf(target, [1.0], probe, usbeam.SyntheticAperture(19), **kw)
    axial = np.einsum("ek,ek->e", target - probe.positions, probe.normals)
    behind = axial <= 0
    assert behind.any() and (~behind).any()
    assert np.all(with_obliquity[0, behind] == 0) and np.all(np.abs(plain[0, behind]).max(axis=1) > 0.1)
    np.testing.assert_allclose(np.abs(with_obliquity[0, ~behind]).max(axis=1) > 0, True)


def test_echo_traces_is_echo_trace_per_channel(rng):
    tau = rng.uniform(1e-6, 9e-6, (5, 30))
    amp = rng.standard_normal((5, 30))
    kw = dict(fs=FS, fc=FC, bandwidth=0.7, t0=0.5e-6, n_samples=256)
    got = echo_traces(tau, amp, **kw)
    want = np.stack([echo_trace(tau[k], amp[k], **kw) for k in range(5)])
    np.testing.assert_array_equal(got, want)
    shared = echo_traces(tau, amp[0], **kw)
    np.testing.assert_array_equal(shared[3], echo_trace(tau[3], amp[0], **kw))
