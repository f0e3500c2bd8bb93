"""Doppler reference in float64, written from the math (never imports usbeam).

Ensembles are (n_frames, *spatial) with slow time on axis 0.
- clutter filters: mean subtraction; polynomial regression as a projection built from a
  QR factorisation of the Vandermonde matrix (a different construction from the C code's
  Legendre + Gram-Schmidt, same subspace); SVD of the Casorati matrix with numpy.linalg.svd;
  IIR Butterworth from scipy.signal.butter run by scipy.signal.lfilter, with the projection
  initialisation solved by least squares over lfilter's own state vector.
- Kasai autocorrelator with PyMUST iq2doppler's sign, scaling and variance; spatial
  averaging by explicit mirrored padding and a windowed sum.
- power Doppler, and the display chain (3x3 median, persistence, masks).
"""
import numpy as np
import scipy.signal


def _pixels(x):
    x = np.asarray(x, dtype=np.complex128)
    return x.reshape(x.shape[0], -1), x.shape


def mean_filter(x):
    x = np.asarray(x, dtype=np.complex128)
    return x - x.mean(axis=0, keepdims=True)


def poly_filter(x, order):
    """x minus its least-squares fit by polynomials of degree <= order in slow time."""
    flat, shape = _pixels(x)
    n = flat.shape[0]
    t = np.linspace(-1.0, 1.0, n)
    q, _ = np.linalg.qr(np.vander(t, order + 1))
    return (flat - q @ (q.T @ flat)).reshape(shape)


def svd_components(x):
    """Casorati SVD: C (n_pixels x n_frames) = U S Vh; returns U, S, Vh."""
    flat, _ = _pixels(x)
    return np.linalg.svd(flat.T, full_matrices=False)


def temporal_frequencies(vh):
    """Mean Doppler frequency (fraction of the PRF) of each temporal singular vector (rows of Vh)."""
    r = np.sum(vh[:, 1:] * np.conj(vh[:, :-1]), axis=1)
    return np.abs(np.angle(r)) / (2 * np.pi)


def svd_auto_low(x, auto_frequency):
    _, _, vh = svd_components(x)
    f = temporal_frequencies(vh)
    low = 0
    while low < len(f) and f[low] < auto_frequency:
        low += 1
    return low


def svd_filter(x, low, high=None):
    """Keep singular components low..high (inclusive, 0 = largest)."""
    flat, shape = _pixels(x)
    u, s, vh = svd_components(x)
    high = len(s) - 1 if high is None else high
    keep = slice(low, high + 1)
    casorati = (u[:, keep] * s[keep]) @ vh[keep, :]
    return casorati.T.reshape(shape)


def butterworth(order, cutoff):
    """High-pass Butterworth (b, a) with the -3 dB point at cutoff * PRF."""
    return scipy.signal.butter(order, 2 * cutoff, btype="highpass")


def iir_filter(x, order, cutoff, init="zero", init_frames=None):
    """Butterworth high-pass along slow time, from rest or with projection initialisation:
    the initial state minimises the output energy over the first init_frames frames."""
    flat, shape = _pixels(x)
    b, a = butterworth(order, cutoff)
    n_state = max(len(a), len(b)) - 1
    zi = np.zeros((n_state, flat.shape[1]), dtype=np.complex128)
    if init == "projection":
        n = init_frames or flat.shape[0]
        y0 = scipy.signal.lfilter(b, a, flat[:n], axis=0)
        natural = np.empty((n, n_state))
        for j in range(n_state):
            unit = np.zeros(n_state)
            unit[j] = 1.0
            natural[:, j] = scipy.signal.lfilter(b, a, np.zeros(n), zi=unit)[0]
        zi = -np.linalg.lstsq(natural, y0, rcond=None)[0]
    y, _ = scipy.signal.lfilter(b, a, flat, axis=0, zi=zi)
    return y.reshape(shape)


def window(m, kind):
    if kind == "hamming" and m > 1:
        j = np.arange(m)
        return 0.54 - 0.46 * np.cos(2 * np.pi * j / (m - 1))
    return np.ones(m)


def average(field, mz, mx, kind):
    """Windowed sum over an mz x mx neighbourhood of each image (last two axes), edges mirrored
    (edge sample repeated), centred as scipy.signal.convolve2d(..., 'same')."""
    field = np.asarray(field)
    if mz == 1 and mx == 1:
        return field
    wz, wx = window(mz, kind), window(mx, kind)
    nz, nx = field.shape[-2:]
    pad = [(0, 0)] * (field.ndim - 2) + [(mz // 2, mz - 1 - mz // 2), (mx // 2, mx - 1 - mx // 2)]
    padded = np.pad(field, pad, mode="symmetric")
    out = np.zeros_like(field)
    for j in range(mz):
        for k in range(mx):
            out = out + wz[j] * wx[k] * padded[..., j:j + nz, k:k + nx]
    return out


def _images(x):
    """(n_frames, *spatial) -> (n_frames, n_images, nz, nx) view and the spatial shape."""
    x = np.asarray(x, dtype=np.complex128)
    spatial = x.shape[1:]
    if len(spatial) == 1:
        return x.reshape(x.shape[0], 1, spatial[0], 1), spatial
    return x.reshape((x.shape[0], -1) + spatial[-2:]), spatial


def kasai(x, fc, prf, c, lag=1, mz=1, mx=1, kind="hamming", dz=None):
    """(velocity, variance) as PyMUST iq2doppler; dz given: Loupas axial frequency correction."""
    xi, spatial = _images(x)
    r = np.sum(xi[:-lag] * np.conj(xi[lag:]), axis=0)
    p = np.sum(np.abs(xi) ** 2, axis=0)
    r_avg, p_avg = average(r, mz, mx, kind), average(p, mz, mx, kind)
    vn = c * prf / (4 * fc * lag)
    velocity = -vn * np.angle(r_avg) / np.pi
    variance = 2 * (vn / np.pi) ** 2 * (1 - np.abs(r_avg) / p_avg)
    if dz is not None:
        rz = np.sum(xi[:, :, 1:, :] * np.conj(xi[:, :, :-1, :]), axis=0)
        rz = np.concatenate([rz, rz[:, -1:, :]], axis=1)   # last row reuses the pair above
        rz = average(rz, mz, mx, kind)
        carrier = 4 * np.pi * fc * dz / c
        deviation = np.angle(rz * np.exp(-1j * carrier))
        f_mean = fc + deviation * c / (4 * np.pi * dz)
        velocity = np.where(f_mean > 0, velocity * fc / np.where(f_mean > 0, f_mean, 1), velocity)
    return velocity.reshape(spatial), variance.reshape(spatial)


def power(x, db=False, reference=None, noise_floor=0.0):
    x = np.asarray(x, dtype=np.complex128)
    p = np.maximum(np.mean(np.abs(x) ** 2, axis=0), noise_floor)
    if not db:
        return p
    ref = p.max() if reference is None else reference
    with np.errstate(divide="ignore"):
        return 10 * np.log10(p / ref)


def median3x3(img):
    img = np.asarray(img, dtype=np.float64)
    nz, nx = img.shape
    padded = np.pad(img, 1, mode="edge")
    stack = [padded[i:i + nz, j:j + nx] for i in range(3) for j in range(3)]
    return np.median(np.stack(stack), axis=0)


def display(velocity, power_images, median=True, persistence=0.0, power_threshold=-np.inf,
            velocity_threshold=0.0):
    """Display chain over successive images (axis 0): median, persistence, masks."""
    v_hist = p_hist = None
    out_v, out_p, masks = [], [], []
    for v, p in zip(velocity, power_images):
        if median:
            v, p = median3x3(v), median3x3(p)
        v_hist = v if v_hist is None else persistence * v_hist + (1 - persistence) * v
        p_hist = p if p_hist is None else persistence * p_hist + (1 - persistence) * p
        shown = (p_hist >= power_threshold) & (np.abs(v_hist) >= velocity_threshold)
        out_v.append(np.where(shown, v_hist, 0.0))
        out_p.append(p_hist)
        masks.append(shown.astype(np.uint8))
    return np.array(out_v), np.array(out_p), np.array(masks)
