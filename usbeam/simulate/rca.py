"""Point-scatterer RF simulator for row-column and TOBE arrays (pure NumPy, exact in time).

Each scatterer (array-coordinate position p, amplitude a) adds ``a * pulse(t - tau)`` to
acquisition k, channel c, with ``pulse`` the Gaussian-windowed sinusoid of pulse.py (the
one of ``usbeam.simulate.simulate_rf`` too) and ``tau = (transmit path + receive path) / c``; the paths are those of
``usbeam.rca`` (see csrc/common/usbeam_math.h, section "row-column arrays"), sampled by the
one routine of every usbeam simulator (``pulse.echo_traces``):

  receive on a strip at u_c           sqrt((u - u_c)^2 + z^2)        (long element)
  HERCULES receive element (u_c, v_r)  |p - (u_c, v_r, 0)|           (decoded read-out)
  FORCES transmit from strip k         |p - (u_k, 0, 0)|             (elevation-focused)
  plane wave, angle a                  (u - u_first) sin a + z cos a
  virtual line source f (sin a, cos a) max_e |e - f| + sign(z - f_z) |q - f|  (f > 0)
                                       |q - f| - min_e |e - f|                 (f < 0)

with q = (u, z) the point in the transmit plane.  This is a geometry test bench: no
element directivity, no diffraction of the finite strips, no attenuation.

Encoded acquisitions (``encode=True``):
  FORCES:   transmit t fires all strips with polarities H[t, k]:
            raw[t, c] = sum_k H[t, k] d[k, c]; on a TOBE array the receiving strips carry
            the same bias pattern, which multiplies channel c by H[t, c] as well.
  HERCULES: the orthogonal strips are biased with H[t, r] during read-out:
            raw[t, c] = sum_r H[t, r] d[r, c]  (the bias is the encoding; no further flip).
``rca_decode`` undoes both.  Output float32 (n_acquisitions, n_channels, n_samples), or with
a leading frame axis for ``n_frames``.
"""
import math

import numpy as np

from .. import _validate
from .._progress import progress_bar
from ..hadamard import hadamard
from ..rca import RCA_METHODS, RowColumnArray
from .pulse import check_echoes_recorded, echo_traces

__all__ = ["simulate_rca", "rca_transmit_path"]


def rca_transmit_path(u, z, angle, focal_depth, strips):
    """Path (m) of a plane wave (focal_depth inf) or virtual line source in the (u, z) plane."""
    u = np.asarray(u, dtype=np.float64)
    z = np.asarray(z, dtype=np.float64)
    if math.isinf(focal_depth):
        u_first = strips.min() if angle >= 0 else strips.max()
        return (u - u_first) * math.sin(angle) + z * math.cos(angle)
    fu, fz = focal_depth * math.sin(angle), focal_depth * math.cos(angle)
    to_focus = np.hypot(u - fu, z - fz)
    from_strips = np.hypot(strips - fu, fz)
    if focal_depth > 0:
        return from_strips.max() + np.sign(z - fz) * to_focus
    return to_focus - from_strips.min()


def _paths(points, array, method, tx, rx, angles, depths, sparse):
    """Transmit paths (n_acq, n_points) and receive paths (n_acq or 1, n_channels, n_points)."""
    x, y, z = points[:, 0], points[:, 1], points[:, 2]
    u_rx, v_rx = (y, x) if rx == "rows" else (x, y)
    rx_strips = array.strips(rx)
    other = "columns" if rx == "rows" else "rows"
    strip_rx = np.sqrt((u_rx[None, :] - rx_strips[:, None]) ** 2 + z[None, :] ** 2)[None]
    if method in ("forces", "uforces"):
        k = np.arange(len(rx_strips)) if method == "forces" else sparse
        tx_paths = np.sqrt((u_rx[None, :] - rx_strips[k][:, None]) ** 2 + v_rx[None, :] ** 2 + z[None, :] ** 2)
        return tx_paths, strip_rx
    u_tx = y if tx == "rows" else x
    tx_strips = array.strips(tx)
    if method in ("hercules", "uhercules"):
        r = np.arange(array.n_strips(other)) if method == "hercules" else sparse
        v_r = array.strips(other)[r]
        one = rca_transmit_path(u_tx, z, angles[0], depths[0], tx_strips)
        tx_paths = np.broadcast_to(one, (len(v_r), one.size))
        rx_paths = np.sqrt((u_rx[None, None, :] - rx_strips[None, :, None]) ** 2
                           + (v_rx[None, None, :] - v_r[:, None, None]) ** 2 + z[None, None, :] ** 2)
        return tx_paths, rx_paths
    tx_paths = np.stack([rca_transmit_path(u_tx, z, a, f, tx_strips) for a, f in zip(angles, depths)])
    return tx_paths, strip_rx


def simulate_rca(positions, amplitudes, array, method, *, fs, fc, n_samples, c=1540.0, t0=0.0,
                 bandwidth=None, tx="columns", rx="columns", angles=None, focal_depths=None,
                 sparse_elements=None, encode=False, n_frames=None, progress=None):
    """RF data of point scatterers for an RCA/TOBE acquisition (see the module docstring).

    positions : (n, 3) world points (m), mapped by ``array.transform``; amplitudes (n,).
    angles / focal_depths / sparse_elements as for ``RCABeamformer``.
    encode : Hadamard-encode FORCES or HERCULES acquisitions (with the TOBE flips when
        ``array.tobe``); the transmit count must then be a Hadamard order.
    progress : a tqdm bar over the acquisitions (None: in a terminal or notebook after 0.5 s;
        True: always; False: never; needs tqdm, the ``progress`` extra).
    Returns float32 (n_acquisitions, n_channels, n_samples) or (n_frames, ...).
    """
    if not isinstance(array, RowColumnArray):
        raise TypeError(f"array must be a RowColumnArray (got {type(array).__name__})")
    method = _validate.choice("method", method, RCA_METHODS)
    tx = _validate.choice("tx", tx, ("rows", "columns"))
    rx = _validate.choice("rx", rx, ("rows", "columns"))
    fs, fc = _validate.frequency("fs", fs), _validate.frequency("fc", fc)
    c = _validate.speed_of_sound("c", c)
    t0 = _validate.real_scalar("t0", t0)
    n_samples = _validate.integer("n_samples", n_samples, minimum=1)
    bandwidth = _validate.positive("bandwidth", bandwidth if bandwidth is not None else (array.bandwidth or 0.6))
    pos = _validate.finite_array("positions", positions)
    amp = _validate.finite_array("amplitudes", amplitudes)
    if pos.ndim != 2 or pos.shape[1] != 3:
        raise ValueError(f"positions must have shape (n, 3) (got {pos.shape})")
    if amp.shape != (pos.shape[0],):
        raise ValueError(f"amplitudes must have shape ({pos.shape[0]},) (got {amp.shape})")
    _validate.distances("positions", pos, "scatterer positions")
    sparse = None if sparse_elements is None else np.asarray(sparse_elements, dtype=np.int64)
    if method in ("uforces", "uhercules"):
        limit = array.n_strips(rx if method == "uforces" else ("rows" if rx == "columns" else "columns"))
        if sparse is None or sparse.ndim != 1 or sparse.size == 0 or (sparse < 0).any() or (sparse >= limit).any():
            raise ValueError(f"sparse_elements must be indices in 0..{limit - 1}")
    angles = np.atleast_1d(np.asarray(0.0 if angles is None else angles, dtype=np.float64))
    depths = (np.full(angles.shape, np.inf) if focal_depths is None
              else np.atleast_1d(np.asarray(focal_depths, dtype=np.float64)))
    if encode and method not in ("forces", "hercules"):
        raise ValueError(f"encode applies to forces and hercules (method is {method})")

    points = array.to_array(pos)
    tx_paths, rx_paths = _paths(points, array, method, tx, rx, angles, depths, sparse)
    n_acq, n_ch = tx_paths.shape[0], rx_paths.shape[1]
    _validate.check_allocation("simulated RF", (n_acq, n_ch, n_samples), 8)
    rf = np.zeros((n_acq, n_ch, n_samples))
    with progress_bar(n_acq, "simulate_rca", progress) as bar:
        for a in range(n_acq):  # the sampling is the linear simulator's (pulse.echo_traces)
            rx_a = rx_paths[a if rx_paths.shape[0] > 1 else 0]
            rf[a] = echo_traces((tx_paths[a][None, :] + rx_a) / c, amp, fs=fs, fc=fc, bandwidth=bandwidth,
                                t0=t0, n_samples=n_samples)
            bar.update(1)
    check_echoes_recorded(rf, amp, t0, n_samples, fs)
    if encode:
        h = hadamard(n_acq).astype(np.float64)
        rf = np.einsum("te,ecs->tcs", h, rf)
        if method == "forces" and array.tobe:
            rf *= h[:, :n_ch, None]
    rf = rf.astype(np.float32)
    if n_frames is not None:
        n_frames = _validate.integer("n_frames", n_frames, minimum=1)
        rf = np.broadcast_to(rf, (n_frames,) + rf.shape).copy()
    return rf
