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


# ---- any probe: element positions and normals (convex, phased, matrix arrays) ----------------
# Element e at position e (3-D), unit normal n_e into the medium.  Line arrays (linear, convex):
# the lateral direction t1 = (n_z, 0, -n_x) / |.|, in the x-z plane; surfaces (matrix arrays):
# t1 = x projected on the element plane, t2 = n x t1.  For d = p - e, axial a = d . n,
# lateral l = d . t1 (and d . t2): the f-number aperture is a > 0 and |l| <= a / (2F) (both
# lateral directions on a surface), the window w(l 2F / a) (times w(l2 2F / a)) - PyMUST
# dasmtx's |asin(dx / r) - theta_e| <= atan(1 / 2F) for convex arrays, dasmtx3's box for
# matrix arrays.  Full aperture: w((x_e - x_c) / half x extent) (times the same along y on a
# surface).  Transmits (MUST txdelay's t = 0, elements in 3-D):
#   ('plane', a, b)            (p - e_first) . d, d = (sin a cos b, sin b, cos a cos b), e_first
#                              the element of least e . d
#   ('diverging', v)           |p - v| - min_e |e - v|
#   ('focused', f, axis)       max_e |e - f| + sign((p - f) . axis) |p - f| (axis None: +z)
#   ('synthetic', k)           |p - e_k|
#   ('delays', d)              line arrays: MUST dasmtx's sources, x and z of the active elements
#                              and d interpolated by interp1d 'cubic' on 4 n points;
#                              surfaces: min_e (c d_e + |p - e|) (PyMUST dasmtx3)
# (paths in m; tau_tx = path / c).


def frames_of(normals, surface):
    frames = []
    for n in np.asarray(normals, dtype=np.float64):
        if not surface:
            t1 = np.array([n[2], 0.0, -n[0]]) / np.hypot(n[0], n[2])
            t2 = np.zeros(3)
        else:
            t1 = np.array([1.0, 0.0, 0.0]) - n[0] * n
            if np.linalg.norm(t1) < 1e-6:
                t1 = np.array([0.0, 1.0, 0.0]) - n[1] * n
            t1 = t1 / np.linalg.norm(t1)
            t2 = np.cross(n, t1)
        frames.append((t1, t2, n))
    return frames


def transmit_path_general(transmit, points, positions, c, surface=False):
    p = np.asarray(points, dtype=np.float64)
    pos = np.asarray(positions, dtype=np.float64)
    kind = transmit[0]
    if kind == "plane":
        a, b = transmit[1], transmit[2]
        d = np.array([np.sin(a) * np.cos(b), np.sin(b), np.cos(a) * np.cos(b)])
        first = pos[np.argmin(pos @ d)]
        return (p - first) @ d
    if kind == "diverging":
        v = np.asarray(transmit[1], dtype=np.float64)
        return np.linalg.norm(p - v, axis=1) - np.min(np.linalg.norm(pos - v, axis=1))
    if kind == "focused":
        f = np.asarray(transmit[1], dtype=np.float64)
        axis = np.array([0.0, 0.0, 1.0]) if transmit[2] is None else np.asarray(transmit[2], dtype=np.float64)
        side = np.sign((p - f) @ axis)
        return np.max(np.linalg.norm(pos - f, axis=1)) + side * np.linalg.norm(p - f, axis=1)
    if kind == "synthetic":
        return np.linalg.norm(p - pos[transmit[1]], axis=1)
    if kind == "delays":
        from scipy.interpolate import interp1d

        d = np.asarray(transmit[1], dtype=np.float64)
        active = ~np.isnan(d)
        pa, da = pos[active], d[active] - np.nanmin(d)
        if surface or pa.shape[0] == 1:
            src = np.c_[pa, c * da]
        else:
            t = np.linspace(0, pa.shape[0] - 1, 4 * pa.shape[0])
            k = np.arange(pa.shape[0])
            src = np.c_[interp1d(k, pa[:, 0], kind="cubic")(t), np.zeros(t.size),
                        interp1d(k, pa[:, 2], kind="cubic")(t), c * interp1d(k, da, kind="cubic")(t)]
        r = np.linalg.norm(p[:, None, :] - src[None, :, :3], axis=2)
        return np.min(src[None, :, 3] + r, axis=1)
    raise ValueError(kind)


def das_general(data, positions, normals, transmits, points, *, fs, fc, c, t0, f_number, window_kind="rect",
                tukey_alpha=0.5, interpolation="linear", surface=False):
    """DAS of data (n_frames, n_transmits, n_elements, n_samples) for any probe (see above)."""
    data = np.asarray(data)
    iq = np.iscomplexobj(data)
    data = data.astype(np.complex128 if iq else np.float64)
    p = np.asarray(points, dtype=np.float64)
    pos = np.asarray(positions, dtype=np.float64)
    frames = frames_of(normals, surface)
    xc, xh = (pos[:, 0].max() + pos[:, 0].min()) / 2, (pos[:, 0].max() - pos[:, 0].min()) / 2
    yc, yh = (pos[:, 1].max() + pos[:, 1].min()) / 2, (pos[:, 1].max() - pos[:, 1].min()) / 2
    result = np.zeros((data.shape[0], len(p)), dtype=data.dtype)
    for k, tx in enumerate(transmits):
        tau_tx = transmit_path_general(tx, p, pos, c, surface) / c
        for e in range(pos.shape[0]):
            d = p - pos[e]
            tau = tau_tx + np.linalg.norm(d, axis=1) / c
            if f_number > 0:
                t1, t2, n = frames[e]
                axial = d @ n
                with np.errstate(divide="ignore", invalid="ignore"):
                    scale = np.where(axial > 0, 2 * f_number / np.where(axial > 0, axial, 1), 0.0)
                u1 = (d @ t1) * scale
                inside = (axial > 0) & (np.abs(d @ t1) <= axial / (2 * f_number))
                weight = window(window_kind, u1, tukey_alpha)
                if surface:
                    inside &= np.abs(d @ t2) <= axial / (2 * f_number)
                    weight = weight * window(window_kind, (d @ t2) * scale, tukey_alpha)
                weight = np.where(inside, weight, 0.0)
            else:
                w = window(window_kind, np.array([(pos[e, 0] - xc) / xh if xh > 0 else 0.0]), tukey_alpha)[0]
                if surface:
                    w *= window(window_kind, np.array([(pos[e, 1] - yc) / yh if yh > 0 else 0.0]), tukey_alpha)[0]
                weight = np.full(len(p), w)
            sample = interpolate(data[:, k, e], (tau - t0) * fs, interpolation)
            if iq:
                sample = sample * np.exp(2j * np.pi * fc * tau)
            result += weight * sample
    return result
