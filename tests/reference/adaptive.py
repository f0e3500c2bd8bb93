"""Adaptive beamformers, float64 NumPy references written from each paper's formula (never
importing usbeam).  Delays, apertures, windows and interpolation: tests/reference/das.py.

Per point p (receive aperture of N elements, |x - x_e| <= z / (2F), all when F = 0) and
sample offset o (integer, in samples):

    s_e(o) = sum_tx w(u_e) interp(data[tx, e], (tau_tx,e - t0) fs + o)  [* exp(+j 2 pi fc tau_tx,e) for IQ]

(the rotation is that of the delay itself).  Then, with s = s(0):

- CF   (Mallart & Fink 1994):  |sum s|^2 / (N sum |s|^2) * sum s
- GCF  (Li & Li 2003):         sum_{|k| <= M0} |FFT_N(s)[k]|^2 / (N sum |s|^2) * sum s  (1 when 2 M0 + 1 >= N)
- DMAS (Matrone et al. 2015):  sum_{i<j} q_i q_j,  q = sign(s) sqrt|s|  (IQ: sqrt|s| e^{j arg s})
- F-DMAS: y(o) = DMAS of s(o) for o = -K..K;  out = sum_k g[-k] y(k) with g the Hann-windowed
  sinc band-pass of the pass band (RF: [low, min(high, fs/2)], real; IQ: [low - 2fc, high - 2fc]
  clipped to +-fs/2, complex), normalised to |G(2 fc)| = 1 (IQ: |G(0)| = 1):
      h[k] = hann[k] * 2 B / fs * sinc(2 B k / fs),  hann[k] = (1 + cos(pi k / (K + 1))) / 2
      RF: g[k] = 2 h[k] cos(2 pi f_mid k / fs);  IQ: g[k] = h[k] exp(+j 2 pi f_mid k / fs)
  with B the half width and f_mid the centre of the band.
- p-DAS (Polichetti et al. 2018): r = sum |s|^(1/p) e^{j arg s}; |r|^p e^{j arg r}
- MV (Synnevag et al. 2007/2009): L subarray length (min(L, N), or round(fraction N) >= 1),
  R = sum_{o=-K..K} sum_{l=0}^{N-L} x_l(o) x_l(o)^H, R += delta trace(R) / L I,
  w = R^-1 1 / (1^T R^-1 1), out = mean_l w^H x_l(0).
Layouts: data (n_frames, n_transmits, n_elements, n_samples); result (n_frames, n_points).

Probes with element normals (convex arrays; beamform_general): the delays, cone apertures and
windows of tests/reference/das.py's das_general (element e sees p when (p - e) . n_e > 0 and
|(p - e) . t_e| <= (p - e) . n_e / (2F), window w(lateral 2F / axial); full aperture:
w((x_e - x_c) / half x extent)).  The aperture of a point is the set of elements whose cone
holds it, in element order, and the methods above combine it as a row of neighbours (GCF's
DFT and MV's subarrays run along the element index).
"""
import numpy as np

from reference import das as ref_das


def element_signals(data, xe, transmits, points, *, fs, fc, c, t0, f_number, window_kind="rect", tukey_alpha=0.5,
                    interpolation="linear", offsets=(0,)):
    """s (n_frames, n_points, n_offsets, n_elements) (zero outside each point's aperture) and
    the aperture mask (n_points, n_elements)."""
    data = np.asarray(data)
    iq = np.iscomplexobj(data)
    data = data.astype(np.complex128 if iq else np.float64)
    points = np.asarray(points, dtype=np.float64)
    x, y, z = points[:, 0], points[:, 1], points[:, 2]
    n_frames = data.shape[0]
    s = np.zeros((n_frames, len(points), len(offsets), len(xe)), np.complex128)
    mask = np.zeros((len(points), len(xe)), bool)
    for k, tx in enumerate(transmits):
        tau_tx = ref_das.transmit_time(tx, points, xe, c)
        for e, x_e in enumerate(xe):
            tau = tau_tx + np.sqrt((x - x_e) ** 2 + y**2 + z**2) / c
            if f_number > 0:
                half = z / (2 * f_number)
                inside = np.abs(x - x_e) <= half
                with np.errstate(divide="ignore", invalid="ignore"):
                    u = np.where(half > 0, (x_e - x) / np.where(half > 0, half, 1), 0.0)
            else:
                inside = np.ones_like(x, dtype=bool)
                half_array = (xe.max() - xe.min()) / 2
                u = np.full_like(x, (x_e - (xe.max() + xe.min()) / 2) / half_array)
            mask[:, e] |= inside
            weight = np.where(inside, ref_das.window(window_kind, u, tukey_alpha), 0.0)
            for j, o in enumerate(offsets):
                sample = ref_das.interpolate(data[:, k, e], (tau - t0) * fs + o, interpolation)
                if iq:
                    sample = sample * np.exp(2j * np.pi * fc * tau)
                s[:, :, j, e] += weight * sample
    return s, mask


def element_signals_general(data, positions, normals, transmits, points, *, fs, fc, c, t0, f_number,
                             window_kind="rect", tukey_alpha=0.5, interpolation="linear", offsets=(0,)):
    """element_signals for any line array given by element positions and normals (reference
    das.das_general's geometry; transmits as its tuples): s (n_frames, n_points, n_offsets,
    n_elements), zero outside each point's aperture, and the aperture mask (n_points, n_elements)."""
    data = np.asarray(data)
    iq = np.iscomplexobj(data)
    data = data.astype(np.complex128 if iq else np.float64)
    p = np.asarray(points, dtype=np.float64)
    pos = np.asarray(positions, dtype=np.float64)
    frames = ref_das.frames_of(normals, False)
    xc, xh = (pos[:, 0].max() + pos[:, 0].min()) / 2, (pos[:, 0].max() - pos[:, 0].min()) / 2
    s = np.zeros((data.shape[0], len(p), len(offsets), len(pos)), np.complex128)
    mask = np.zeros((len(p), len(pos)), bool)
    for k, tx in enumerate(transmits):
        tau_tx = ref_das.transmit_path_general(tx, p, pos, c) / c
        for e in range(len(pos)):
            d = p - pos[e]
            tau = tau_tx + np.linalg.norm(d, axis=1) / c
            if f_number > 0:
                t1, _, n = frames[e]
                axial, lateral = d @ n, d @ t1
                inside = (axial > 0) & (np.abs(lateral) <= axial / (2 * f_number))
                with np.errstate(divide="ignore", invalid="ignore"):
                    u = np.where(inside, lateral * 2 * f_number / np.where(axial > 0, axial, 1), 0.0)
                weight = np.where(inside, ref_das.window(window_kind, u, tukey_alpha), 0.0)
            else:
                inside = np.ones(len(p), bool)
                u = np.array([(pos[e, 0] - xc) / xh if xh > 0 else 0.0])
                weight = np.full(len(p), ref_das.window(window_kind, u, tukey_alpha)[0])
            mask[:, e] |= inside
            for j, o in enumerate(offsets):
                sample = ref_das.interpolate(data[:, k, e], (tau - t0) * fs + o, interpolation)
                if iq:
                    sample = sample * np.exp(2j * np.pi * fc * tau)
                s[:, :, j, e] += weight * sample
    return s, mask


def signed_power(s, power):
    m = np.abs(s)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(m > 0, m**power * s / np.where(m > 0, m, 1), 0)


def cf(s):
    n = s.size
    energy = np.sum(np.abs(s) ** 2)
    return 0.0 if energy == 0 else abs(s.sum()) ** 2 / (n * energy)


def gcf(s, m0):
    n = s.size
    energy = np.sum(np.abs(s) ** 2)
    if energy == 0:
        return 0.0
    if 2 * m0 + 1 >= n:
        return 1.0
    spectrum = np.fft.fft(s)
    low = spectrum[np.arange(-m0, m0 + 1) % n]
    return np.sum(np.abs(low) ** 2) / (n * energy)


def dmas(s):
    q = signed_power(s, 0.5)
    return sum(q[i] * q[j] for i in range(q.size) for j in range(i + 1, q.size))


def pdas(s, p):
    return signed_power(signed_power(s, 1 / p).sum(), p)


def fdmas_taps(K, fs, fc, low, high, iq):
    nyquist = fs / 2
    if iq:
        lo, hi, ref = max(low - 2 * fc, -nyquist), min(high - 2 * fc, nyquist), 0.0
    else:
        lo, hi, ref = low, min(high, nyquist), 2 * fc
    mid, half = (lo + hi) / 2, (hi - lo) / 2
    k = np.arange(-K, K + 1)
    h = 0.5 * (1 + np.cos(np.pi * k / (K + 1))) * 2 * half / fs * np.sinc(2 * half * k / fs)
    g = h * np.exp(2j * np.pi * mid * k / fs) if iq else 2 * h * np.cos(2 * np.pi * mid * k / fs)
    gain = abs(np.sum(g * np.exp(-2j * np.pi * ref * k / fs)))
    return g / gain


def mv(s_offsets, centre, L, delta):
    """s_offsets (n_offsets, N) of the aperture's elements."""
    n_off, n = s_offsets.shape
    n_sub = n - L + 1
    R = np.zeros((L, L), np.complex128)
    for o in range(n_off):
        for l in range(n_sub):
            x = s_offsets[o, l:l + L]
            R += np.outer(x, x.conj())
    R += delta * np.trace(R).real / L * np.eye(L)
    a = np.ones(L)
    u = np.linalg.solve(R, a)
    w = u / (a @ u)
    x0 = s_offsets[centre]
    return np.mean([w.conj() @ x0[l:l + L] for l in range(n_sub)])


def _half_length(method, fs, fc, temporal_averaging, fdmas_half_taps):
    if fdmas_half_taps is None:  # usbeam's documented default
        fdmas_half_taps = max(4, int(np.ceil(2 * fs / fc)))
    return temporal_averaging if method == "mv" else (fdmas_half_taps if method == "fdmas" else 0)


def beamform(method, data, xe, transmits, points, *, fs, fc, c, t0, f_number, window_kind="rect",
             tukey_alpha=0.5, interpolation="linear", p=2.0, gcf_m0=2, subarray_length=None,
             subarray_fraction=None, diagonal_loading=0.01, temporal_averaging=0, fdmas_band=None,
             fdmas_half_taps=None):
    """A linear array at x = xe (z = 0, normals +z); transmits as das.transmit_time's."""
    K = _half_length(method, fs, fc, temporal_averaging, fdmas_half_taps)
    s, mask = element_signals(data, xe, transmits, points, fs=fs, fc=fc, c=c, t0=t0, f_number=f_number,
                              window_kind=window_kind, tukey_alpha=tukey_alpha, interpolation=interpolation,
                              offsets=tuple(range(-K, K + 1)))
    return combine(method, s, mask, np.iscomplexobj(data), K, fs=fs, fc=fc, p=p, gcf_m0=gcf_m0,
                   subarray_length=subarray_length, subarray_fraction=subarray_fraction,
                   diagonal_loading=diagonal_loading, fdmas_band=fdmas_band)


def beamform_general(method, data, positions, normals, transmits, points, *, fs, fc, c, t0, f_number,
                     window_kind="rect", tukey_alpha=0.5, interpolation="linear", p=2.0, gcf_m0=2,
                     subarray_length=None, subarray_fraction=None, diagonal_loading=0.01, temporal_averaging=0,
                     fdmas_band=None, fdmas_half_taps=None):
    """Any line array by element positions and normals (convex arrays); transmits as
    das.transmit_path_general's tuples."""
    K = _half_length(method, fs, fc, temporal_averaging, fdmas_half_taps)
    s, mask = element_signals_general(data, positions, normals, transmits, points, fs=fs, fc=fc, c=c, t0=t0,
                                      f_number=f_number, window_kind=window_kind, tukey_alpha=tukey_alpha,
                                      interpolation=interpolation, offsets=tuple(range(-K, K + 1)))
    return combine(method, s, mask, np.iscomplexobj(data), K, fs=fs, fc=fc, p=p, gcf_m0=gcf_m0,
                   subarray_length=subarray_length, subarray_fraction=subarray_fraction,
                   diagonal_loading=diagonal_loading, fdmas_band=fdmas_band)


def combine(method, s, mask, iq, K, *, fs, fc, p, gcf_m0, subarray_length, subarray_fraction, diagonal_loading,
            fdmas_band):
    """The method applied to element signals s (n_frames, n_points, 2K + 1, n_elements) over
    each point's aperture mask (n_points, n_elements): (n_frames, n_points)."""
    offsets = tuple(range(-K, K + 1))
    n_frames, n_points = s.shape[:2]
    out = np.zeros((n_frames, n_points), np.complex128)
    if method == "fdmas":
        low, high = fdmas_band if fdmas_band is not None else (fc, 3 * fc)
        g = fdmas_taps(K, fs, fc, low, high, iq)
    for f in range(n_frames):
        for i in range(n_points):
            sa = s[f, i][:, mask[i]]  # (n_offsets, N)
            if sa.shape[1] == 0:
                continue
            s0 = sa[K]
            if method == "cf":
                out[f, i] = cf(s0) * s0.sum()
            elif method == "gcf":
                out[f, i] = gcf(s0, gcf_m0) * s0.sum()
            elif method == "dmas":
                out[f, i] = dmas(s0)
            elif method == "pdas":
                out[f, i] = pdas(s0, p)
            elif method == "fdmas":
                y = np.array([dmas(sa[j]) for j in range(len(offsets))])
                out[f, i] = np.sum(g[::-1] * y)  # g[-k] y(k)
            elif method == "mv":
                n = sa.shape[1]
                L = (min(max(1, int(np.floor(subarray_fraction * n + 0.5))), n) if subarray_fraction
                     else min(subarray_length, n))
                out[f, i] = mv(sa, K, L, diagonal_loading)
            else:
                raise ValueError(method)
    return out if iq else out.real
