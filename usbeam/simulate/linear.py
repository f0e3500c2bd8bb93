"""Point-scatterer RF simulator for any probe geometry: linear, phased, convex and matrix
arrays, or any ``ElementArray`` (pure NumPy, exact in time).

Each scatterer s (position p_s, amplitude a_s) contributes to element e, transmit k:

    rf[k, e, n] += a_s * g_e(p_s) * pulse(t0 + n/fs - tau_tx_k(p_s) - |p_s - e| / c)

with the conventions of ``usbeam.geometry`` (element positions in 3-D, t = 0 when the first
element fires) and the Gaussian-windowed sinusoid of pulse.py (-6 dB spectral width
``bandwidth * fc``, exact at any delay).  g_e = 1, or with ``directivity=True`` the
obliquity max(0, cos angle) between p_s - e and the element normal n_e (so a curved array
hears nothing from behind an element's face).  No attenuation or spreading loss: this is a
geometry test bench, not a physics simulator (use PyMUST simus for that).  The sampling is
``pulse.echo_traces`` (one weighted histogram per block of elements), shared with the
row-column simulator (rca.py).

Layouts: positions ``(n_scatterers, 3)`` (x, y, z in m) or ``(n_frames, n_scatterers, 3)``
(moving scatterers, one set of positions per frame); amplitudes ``(n_scatterers,)``.
Output float32 ``(n_transmits, n_elements, n_samples)``, or with a leading frame axis
``(n_frames, n_transmits, n_elements, n_samples)`` when ``n_frames`` is given or the
positions have one.
"""
import numpy as np

from .. import _validate
from .._progress import progress_bar
from ..geometry import as_sequence
from ..probes import check_probe
from .pulse import check_echoes_recorded, echo_traces

__all__ = ["simulate_rf", "cyst_phantom"]


def _rf_one_frame(positions, amplitudes, probe, sequence, fs, fc, c, t0, n_samples, bandwidth, directivity, bar):
    pe = np.asarray(probe.positions, dtype=np.float64)
    offset = positions[None, :, :] - pe[:, None, :]          # (elements, scatterers, 3)
    tau_rx = np.sqrt(np.sum(offset ** 2, axis=2)) / c
    gain = amplitudes[None, :]
    if directivity:
        axial = np.einsum("esk,ek->es", offset, np.asarray(probe.normals, dtype=np.float64))
        with np.errstate(invalid="ignore", divide="ignore"):
            gain = gain * np.where(tau_rx > 0, np.maximum(axial / (tau_rx * c), 0.0), 1.0)
    rf = np.zeros((len(sequence), probe.n_elements, n_samples), dtype=np.float64)
    for k, tx in enumerate(sequence):
        tau = tx.transmit_time(positions, probe, c)[None, :] + tau_rx
        rf[k] = echo_traces(tau, gain, fs=fs, fc=fc, bandwidth=bandwidth, t0=t0, n_samples=n_samples)
        bar.update(1)
    return rf


def simulate_rf(positions, amplitudes, probe, sequence, *, fs, fc, n_samples, c=1540.0, t0=0.0,
                bandwidth=None, n_frames=None, noise=0.0, seed=None, directivity=False,
                progress=None):
    """RF channel data of point scatterers.

    Parameters
    ----------
    positions : (n, 3) or (n_frames, n, 3) array, m
    amplitudes : (n,) array (reflectivity, any real values)
    probe : LinearArray, ConvexArray, MatrixArray or ElementArray
    sequence : a transmit or a list of transmits (``usbeam.geometry``)
    fs, fc : sampling and centre frequencies, Hz
    n_samples : samples per channel; sample n is at time t0 + n/fs
    c : speed of sound, m/s;  t0 : time of the first sample, s
    bandwidth : fractional -6 dB bandwidth of the pulse (default probe.bandwidth or 0.6)
    n_frames : repeat static scatterers over this many frames (adds the frame axis)
    noise : standard deviation of white Gaussian noise relative to the RMS of the
        noiseless RF (0: none); ``seed`` seeds its generator.
    directivity : weight each echo by the element's obliquity max(0, cos angle to its normal)
    progress : a tqdm bar over the transmits (of every frame): None shows it in a terminal or
        notebook once the call has run 0.5 s, True always, False never (``usbeam._progress``;
        needs tqdm, the ``progress`` extra, else no bar).

    Returns float32 ``(n_transmits, n_elements, n_samples)`` or
    ``(n_frames, n_transmits, n_elements, n_samples)``.
    """
    check_probe(probe)
    sequence = as_sequence(sequence, probe)
    fs = _validate.frequency("fs", fs)
    fc = _validate.frequency("fc", fc)
    c = _validate.speed_of_sound("c", c)
    t0 = _validate.real_scalar("t0", t0)
    n_samples = _validate.integer("n_samples", n_samples, minimum=1)
    if bandwidth is None:
        bandwidth = probe.bandwidth if probe.bandwidth is not None else 0.6
    bandwidth = _validate.positive("bandwidth", bandwidth)
    noise = _validate.nonnegative("noise", noise)
    pos = _validate.finite_array("positions", positions)
    amp = _validate.finite_array("amplitudes", amplitudes)
    if pos.ndim not in (2, 3) or pos.shape[-1] != 3:
        raise ValueError(f"positions must have shape (n, 3) or (n_frames, n, 3) (got {pos.shape})")
    if amp.shape != (pos.shape[-2],):
        raise ValueError(f"amplitudes must have shape ({pos.shape[-2]},) (got {amp.shape})")
    _validate.distances("positions", pos, "scatterer positions")
    _validate.distances("probe", probe.positions, "element positions (pitch)")
    moving = pos.ndim == 3
    if n_frames is not None:
        n_frames = _validate.integer("n_frames", n_frames, minimum=1)
        if moving and n_frames != pos.shape[0]:
            raise ValueError(f"n_frames ({n_frames}) disagrees with positions ({pos.shape[0]} frames)")
    frames_axis = moving or n_frames is not None
    n_out = pos.shape[0] if moving else (n_frames or 1)
    _validate.check_allocation("simulated RF", (n_out, len(sequence), probe.n_elements, n_samples), 8)

    with progress_bar((n_out if moving else 1) * len(sequence), "simulate_rf", progress) as bar:
        if moving:
            rf = np.stack([_rf_one_frame(pos[f], amp, probe, sequence, fs, fc, c, t0, n_samples, bandwidth,
                                         bool(directivity), bar) for f in range(n_out)])
        else:
            one = _rf_one_frame(pos, amp, probe, sequence, fs, fc, c, t0, n_samples, bandwidth,
                                bool(directivity), bar)
            rf = np.broadcast_to(one, (n_out,) + one.shape).copy()
    check_echoes_recorded(rf, amp, t0, n_samples, fs)
    if noise > 0:
        rms = float(np.sqrt(np.mean(rf ** 2)))
        rf += np.random.default_rng(seed).normal(0.0, noise * rms, rf.shape)
    rf = rf.astype(np.float32)
    return rf if frames_axis else rf[0]


def _pair_in_m(name, value, what):
    """Two finite numbers in m (within 1 m: _validate.distances) as floats."""
    arr = _validate.finite_array(name, value).reshape(-1)
    if arr.size != 2:
        raise ValueError(f"{name} must be two numbers (got {arr.size})")
    return tuple(float(v) for v in _validate.distances(name, arr, what))


def cyst_phantom(*, x_range=(-0.01, 0.01), z_range=(0.01, 0.04), n_scatterers=4000,
                 cyst_center=(0.0, 0.025), cyst_radius=0.004, points=((-0.005, 0.015), (0.005, 0.03)),
                 point_amplitude=10.0, seed=None):
    """Random speckle scatterers with an anechoic cylindrical cyst and bright point targets.

    Returns ``(positions (n, 3), amplitudes (n,))`` in m, in the plane y = 0.  Speckle
    amplitudes are standard normal; the cyst (``cyst_center`` (x, z), ``cyst_radius``)
    holds none; each of ``points`` ((x, z) pairs) is a scatterer of ``point_amplitude``.
    """
    n_scatterers = _validate.integer("n_scatterers", n_scatterers, minimum=0)
    x0, x1 = _pair_in_m("x_range", x_range, "phantom coordinates")
    z0, z1 = _pair_in_m("z_range", z_range, "phantom coordinates")
    if not (x1 > x0 and z1 > z0 and z0 >= 0):
        raise ValueError(f"x_range and z_range must be increasing with z >= 0 (got {x_range}, {z_range})")
    cyst_radius = _validate.nonnegative("cyst_radius", cyst_radius)
    cx, cz = _pair_in_m("cyst_center", cyst_center, "cyst coordinates")
    # a cyst that misses the speckle region would leave no cyst in the phantom, silently (a
    # centre in mm beside ranges in m, for one)
    if cyst_radius > 0 and np.hypot(cx - min(max(cx, x0), x1), cz - min(max(cz, z0), z1)) >= cyst_radius:
        raise ValueError(f"cyst_center {tuple(cyst_center)} with cyst_radius {cyst_radius} m lies outside the "
                         f"phantom (x_range {tuple(x_range)}, z_range {tuple(z_range)}): no speckle would be "
                         f"left out; give both in m, or cyst_radius=0 for no cyst")
    point_amplitude = _validate.real_scalar("point_amplitude", point_amplitude)
    rng = np.random.default_rng(seed)
    x = rng.uniform(x0, x1, n_scatterers)
    z = rng.uniform(z0, z1, n_scatterers)
    outside = np.hypot(x - cx, z - cz) > cyst_radius
    x, z = x[outside], z[outside]
    amp = rng.standard_normal(x.size)
    pts = _validate.finite_array("points", points)
    if pts.size % 2:
        raise ValueError(f"points must be (x, z) pairs (got {pts.size} numbers)")
    pts = _validate.distances("points", pts.reshape(-1, 2), "point target coordinates")
    positions = np.zeros((x.size + len(pts), 3))
    positions[: x.size, 0], positions[: x.size, 2] = x, z
    positions[x.size:, 0], positions[x.size:, 2] = pts[:, 0], pts[:, 1]
    amplitudes = np.concatenate([amp, np.full(len(pts), float(point_amplitude))])
    return positions, amplitudes
