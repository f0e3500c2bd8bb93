"""Delay-and-sum reference for linear arrays, float64 NumPy, written from the math.

Conventions (MUST/PyMUST): element e at x_e = (e - (N-1)/2) pitch, z = 0; t = 0 when
the first element fires; sample n at t0 + n/fs.  For point p = (x, y, z):

    tau = tau_tx(p) + |p - e| / c,   s = (tau - t0) fs
    value = sum_tx sum_e  w(u) * interp(data[tx, e], s) * (exp(+j 2 pi fc tau) if IQ)

over elements with |x - x_e| <= z / (2F) (all elements when F = 0).  Transmits are tuples
('plane', angle) | ('diverging', xv, zv) | ('focused', xf, zf) | ('synthetic', k) |
('sources', (3, n) array of x, z, path offset in m): min_i (o_i + |p - s_i|) / c;
('delays', delays): MUST dasmtx's model of a delay law (s per element, NaN = off): the
active element positions and delays are interpolated on 4 n points by scipy interp1d
'cubic' (as PyMUST) and tau_tx = min_i (d_i + |p - s_i| / c), delays shifted to min 0.
Layouts: data (n_frames, n_transmits, n_elements, n_samples), points (n_points, 3),
result (n_frames, n_points) complex128 (IQ) or float64 (RF).
"""
import numpy as np


def element_x(n_elements, pitch):
    return (np.arange(n_elements) - (n_elements - 1) / 2) * pitch


def transmit_time(transmit, points, xe, c):
    """tau_tx (s) of each point for one transmit (MUST txdelay conventions)."""
    x, y, z = points[:, 0], points[:, 1], points[:, 2]
    kind = transmit[0]
    if kind == "plane":
        a = transmit[1]
        x_first = xe.min() if a >= 0 else xe.max()
        return ((x - x_first) * np.sin(a) + z * np.cos(a)) / c
    if kind == "diverging":
        xv, zv = transmit[1], transmit[2]
        r = np.sqrt((x - xv) ** 2 + y ** 2 + (z - zv) ** 2)
        return (r - np.min(np.hypot(xe - xv, zv))) / c
    if kind == "focused":
        xf, zf = transmit[1], transmit[2]
        r = np.sqrt((x - xf) ** 2 + y ** 2 + (z - zf) ** 2)
        return (np.max(np.hypot(xe - xf, zf)) + np.sign(z - zf) * r) / c
    if kind == "delays":
        from scipy.interpolate import interp1d

        d = np.asarray(transmit[1], dtype=np.float64)
        active = ~np.isnan(d)
        xa, da = xe[active], d[active] - np.nanmin(d)
        if xa.size == 1:
            xs, ds = xa, da
        else:
            t = np.linspace(0, xa.size - 1, 4 * xa.size)
            k = np.arange(xa.size)
            xs, ds = interp1d(k, xa, kind="cubic")(t), interp1d(k, da, kind="cubic")(t)
        r = np.sqrt((x[:, None] - xs[None, :]) ** 2 + y[:, None] ** 2 + z[:, None] ** 2)
        return np.min(ds[None, :] + r / c, axis=1)
    if kind == "sources":  # explicit virtual sources (3, n): rows x, z, path offset (m)
        src = np.asarray(transmit[1], dtype=np.float64)
        r = np.sqrt((x[:, None] - src[0][None, :]) ** 2 + y[:, None] ** 2 + (z[:, None] - src[1][None, :]) ** 2)
        return np.min(src[2][None, :] + r, axis=1) / c
    if kind == "synthetic":
        xk = xe[transmit[1]]
        return np.sqrt((x - xk) ** 2 + y ** 2 + z ** 2) / c
    raise ValueError(kind)


def window(kind, u, alpha=0.5):
    """rect / Hann / Tukey(alpha) on u in [-1, 1], 0 outside."""
    a = np.abs(u)
    inside = a <= 1
    if kind == "rect":
        w = np.ones_like(a)
    elif kind == "hann":
        w = 0.5 * (1 + np.cos(np.pi * u))
    elif kind == "tukey":
        if alpha == 0:
            w = np.ones_like(a)
        else:
            taper = 0.5 * (1 + np.cos(np.pi * (a - (1 - alpha)) / alpha))
            w = np.where(a <= 1 - alpha, 1.0, taper)
    else:
        raise ValueError(kind)
    return np.where(inside, w, 0.0)


def interpolate(signal, s, method):
    """signal (n_frames, n_samples) at fractional indices s (n_points,) ->
    (n_frames, n_points), zero where s is outside the method's valid range."""
    n = signal.shape[-1]

    def at(i):  # taps of an invalid s are masked below; clipping keeps a short record indexable
        return signal[:, np.clip(i, 0, n - 1)]

    if method == "nearest":
        valid = (s >= 0) & (s <= n - 1)
        idx = np.where(valid, np.round(np.where(valid, s, 0)), 0).astype(int)  # half to even
        return np.where(valid, signal[:, idx], 0)
    if method == "linear":
        valid = (s >= 0) & (s <= n - 2)
        s0 = np.where(valid, s, 0)
        i = np.floor(s0).astype(int)
        t = s0 - i
        return np.where(valid, (1 - t) * at(i) + t * at(i + 1), 0)
    if method == "cubic":
        valid = (s >= 1) & (s <= n - 3)
        s0 = np.where(valid, s, 1)
        i = np.floor(s0).astype(int)
        t = s0 - i
        # Catmull-Rom: p(t) through x[i] and x[i+1] with slopes (x[i+1]-x[i-1])/2, (x[i+2]-x[i])/2
        xm, x0, x1, x2 = at(i - 1), at(i), at(i + 1), at(i + 2)
        m0, m1 = (x1 - xm) / 2, (x2 - x0) / 2
        h00, h10, h01, h11 = 2 * t**3 - 3 * t**2 + 1, t**3 - 2 * t**2 + t, -2 * t**3 + 3 * t**2, t**3 - t**2
        return np.where(valid, h00 * x0 + h10 * m0 + h01 * x1 + h11 * m1, 0)
    raise ValueError(method)


def das(data, xe, transmits, points, *, fs, fc, c, t0, f_number, window_kind="rect", tukey_alpha=0.5,
        interpolation="linear"):
    data = np.asarray(data)
    iq = np.iscomplexobj(data)
    data = data.astype(np.complex128 if iq else np.float64)
    points = np.asarray(points, dtype=np.float64)
    x, y, z = points[:, 0], points[:, 1], points[:, 2]
    n_frames = data.shape[0]
    result = np.zeros((n_frames, len(points)), dtype=data.dtype)
    for k, tx in enumerate(transmits):
        tau_tx = transmit_time(tx, points, xe, c)
        for e, x_e in enumerate(xe):
            tau = tau_tx + np.sqrt((x - x_e) ** 2 + y ** 2 + z ** 2) / c
            if f_number > 0:
                half = z / (2 * f_number)
                in_aperture = np.abs(x - x_e) <= half
                with np.errstate(divide="ignore", invalid="ignore"):
                    u = np.where(half > 0, (x_e - x) / np.where(half > 0, half, 1), 0.0)
            else:
                in_aperture = np.ones_like(x, dtype=bool)
                half_array = (xe.max() - xe.min()) / 2
                u = np.full_like(x, (x_e - (xe.max() + xe.min()) / 2) / half_array if half_array > 0 else 0.0)
            weight = np.where(in_aperture, window(window_kind, u, tukey_alpha), 0.0)
            sample = interpolate(data[:, k, e], (tau - t0) * fs, interpolation)
            if iq:
                sample = sample * np.exp(2j * np.pi * fc * tau)
            result += weight * sample
    return result
