"""Row-column / TOBE reference in float64 NumPy (never imports usbeam), from the math:

* strips: column c at x_c = (c - (Nc-1)/2) px (a line along y), row r at y_r likewise;
  an orientation's axis u is x (columns) or y (rows), v the other in-plane axis.
* receive on strip u_c: sqrt((u - u_c)^2 + z^2) (the nearest point of a long strip).
* FORCES transmit from strip k: |p - (u_k, 0, 0)| (source at the strip centre).
* HERCULES receive element (u_c, v_r): |p - (u_c, v_r, 0)|.
* plane wave at angle a: (u - u_first) sin a + z cos a, u_first the first strip to fire.
* virtual line source at F = f (sin a, cos a) in the (u, z) plane: focused (f > 0)
  max_e |E_e - F| + sign(z - F_z) |Q - F|; diverging (f < 0) |Q - F| - min_e |E_e - F|.
* DAS: sum over acquisitions and channels of w * x(tau) (* exp(j 2 pi fc tau) for IQ),
  x interpolated at s = (tau - t0) fs (nearest / linear / Catmull-Rom cubic, the sample
  ranges where every tap exists), w = window(lateral / (z / (2 F#))).
* coherence factor |sum v|^2 / (N sum |v|^2).
"""
import math

import numpy as np


def strips(n, pitch):
    return (np.arange(n) - (n - 1) / 2.0) * pitch


def to_array(points, transform):
    p = np.asarray(points, dtype=np.float64)
    t = np.asarray(transform, dtype=np.float64)
    return p @ t[:3, :3].T + t[:3, 3]


def wave_path(u, z, angle, focal_depth, tx_strips):
    if math.isinf(focal_depth):
        first = tx_strips.min() if angle >= 0 else tx_strips.max()
        return (u - first) * math.sin(angle) + z * math.cos(angle)
    fu, fz = focal_depth * math.sin(angle), focal_depth * math.cos(angle)
    q = np.hypot(u - fu, z - fz)
    e = np.hypot(tx_strips - fu, 0.0 - fz)
    if focal_depth > 0:
        return e.max() + np.sign(z - fz) * q
    return q - e.min()


def geometry(points, *, method, n_columns, n_rows, pitch_x, pitch_y, tx="columns", rx="columns",
             angles=(0.0,), focal_depths=(math.inf,), sparse=None):
    """Paths (m) for array-coordinate points (P, 3).

    Returns tx (n_acq, P), rx (n_acq, n_ch, P) and lateral (n_acq, n_ch, P), the lateral
    distance used by the receive apodization."""
    p = np.asarray(points, dtype=np.float64)
    x, y, z = p[:, 0], p[:, 1], p[:, 2]
    cols, rows = strips(n_columns, pitch_x), strips(n_rows, pitch_y)
    if method in ("forces", "uforces"):
        tx = rx
    u_rx, v_rx = (y, x) if rx == "rows" else (x, y)
    u_tx = y if tx == "rows" else x
    rx_s = rows if rx == "rows" else cols
    other_s = cols if rx == "rows" else rows
    tx_s = rows if tx == "rows" else cols
    du = u_rx[None, :] - rx_s[:, None]                       # (n_ch, P)
    strip_rx = np.sqrt(du ** 2 + z[None, :] ** 2)
    if method in ("forces", "uforces"):
        k = np.arange(len(rx_s)) if method == "forces" else np.asarray(sparse)
        tx_path = np.sqrt((u_rx[None, :] - rx_s[k][:, None]) ** 2 + v_rx[None, :] ** 2 + z[None, :] ** 2)
        n_acq = len(k)
        return tx_path, np.broadcast_to(strip_rx, (n_acq,) + strip_rx.shape), \
            np.broadcast_to(np.abs(du), (n_acq,) + du.shape)
    if method in ("hercules", "uhercules"):
        r = np.arange(len(other_s)) if method == "hercules" else np.asarray(sparse)
        v_r = other_s[r]
        one = wave_path(u_tx, z, angles[0], focal_depths[0], tx_s)
        tx_path = np.broadcast_to(one, (len(r), one.size))
        dv = v_rx[None, None, :] - v_r[:, None, None]            # (n_acq, 1, P)
        lateral = np.sqrt(du[None] ** 2 + dv ** 2)
        rx_path = np.sqrt(lateral ** 2 + z[None, None, :] ** 2)
        return tx_path, rx_path, lateral
    tx_path = np.stack([wave_path(u_tx, z, a, f, tx_s) for a, f in zip(angles, focal_depths)])
    n_acq = tx_path.shape[0]
    return tx_path, np.broadcast_to(strip_rx, (n_acq,) + strip_rx.shape), \
        np.broadcast_to(np.abs(du), (n_acq,) + du.shape)


def window(kind, u, tukey_alpha=0.5):
    a = np.abs(u)
    inside = a <= 1.0
    if kind == "rect":
        w = np.ones_like(a)
    elif kind == "hann":
        w = 0.5 * (1.0 + np.cos(np.pi * np.minimum(a, 1.0)))
    else:
        flat = 1.0 - tukey_alpha
        with np.errstate(invalid="ignore", divide="ignore"):
            taper = 0.5 * (1.0 + np.cos(np.pi * (a - flat) / tukey_alpha))
        w = np.where(a <= flat, 1.0, taper)
    return np.where(inside, w, 0.0)


def apodization(lateral, z, f_number, kind="hann", tukey_alpha=0.5):
    if f_number == 0:
        return np.ones_like(lateral)
    z = np.broadcast_to(z, lateral.shape)
    with np.errstate(divide="ignore", invalid="ignore"):  # z <= 0: no aperture
        u = np.where(z > 0, lateral * 2.0 * f_number / np.where(z > 0, z, 1.0), np.inf)
    return np.where(z > 0, window(kind, u, tukey_alpha), 0.0)


def interpolate(record, s, kind):
    """record (..., n) at fractional indices s (...): value and validity (same shape as s)."""
    n = record.shape[-1]
    s = np.asarray(s, dtype=np.float64)
    if kind == "nearest":
        valid = (s >= 0) & (s <= n - 1)
        idx = np.clip(np.round(s), 0, n - 1).astype(np.int64)
        value = np.take_along_axis(record, idx, axis=-1)
        return np.where(valid, value, 0), valid
    base = np.floor(s)
    t = s - base
    base = base.astype(np.int64)
    if kind == "linear":
        valid = (s >= 0) & (s <= n - 2)
        i0 = np.clip(base, 0, n - 2)
        v = (1 - t) * np.take_along_axis(record, i0, -1) + t * np.take_along_axis(record, i0 + 1, -1)
        return np.where(valid, v, 0), valid
    valid = (s >= 1) & (s <= n - 3)
    i0 = np.clip(base, 1, n - 3)
    p = [np.take_along_axis(record, i0 + k, -1) for k in (-1, 0, 1, 2)]
    # Catmull-Rom: cubic Hermite with tangents (p[k+1] - p[k-1]) / 2
    m1, m2 = 0.5 * (p[2] - p[0]), 0.5 * (p[3] - p[1])
    t2, t3 = t * t, t * t * t
    v = (2 * t3 - 3 * t2 + 1) * p[1] + (t3 - 2 * t2 + t) * m1 + (-2 * t3 + 3 * t2) * p[2] + (t3 - t2) * m2
    return np.where(valid, v, 0), valid


def das(data, tx_path, rx_path, weights, *, fs, c, t0=0.0, fc=0.0, interpolation="cubic",
        coherence_factor=False, sum_frames=False):
    """data (F, A, C, N) real or complex; paths and weights (A, C, P).  Returns (F or 1, P)."""
    data = np.asarray(data)
    complex_data = np.iscomplexobj(data)
    tau = (tx_path[:, None, :] if tx_path.ndim == 2 else tx_path) + rx_path
    tau = np.broadcast_to(tau, weights.shape) / c
    s = (tau - t0) * fs
    frames = []
    for f in range(data.shape[0]):
        rec = data[f].astype(np.complex128 if complex_data else np.float64)  # (A, C, N)
        value, valid = interpolate(rec, s, interpolation)
        if complex_data:
            value = value * np.exp(2j * np.pi * fc * tau)
        contribution = np.where(valid & (weights != 0), weights * value, 0)
        count = np.sum(valid & (weights != 0), axis=(0, 1))
        frames.append((contribution.sum(axis=(0, 1)), (np.abs(contribution) ** 2).sum(axis=(0, 1)), count))
    if sum_frames:
        frames = [tuple(sum(fr[k] for fr in frames) for k in range(3))]
    out = []
    for total, power, count in frames:
        if coherence_factor:
            with np.errstate(invalid="ignore", divide="ignore"):
                cf = np.where(power > 0, np.abs(total) ** 2 / (count * power), 0.0)
            total = total * cf
        out.append(total)
    return np.stack(out)
