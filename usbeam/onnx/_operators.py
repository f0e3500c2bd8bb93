"""The linear operators of a pipeline's stages, as arrays for an ONNX graph's initializers.

Every operator is read from usbeam's own plans, built in double at plan time, so the graph
computes the C backend's math rather than a re-derivation of it:

* demodulation: rf2iq is linear in the RF line (mixing, a zero-phase Butterworth filtfilt
  with odd extension and steady-state initial conditions, or a FIR, then decimation), so a
  plan of the same parameters applied to the identity (float64 RF, one impulse per line)
  gives its matrix D, ``iq[n] = sum_m rf[m] D[m, n]`` of shape (n_samples, n_out);
* DAS: the CSR operator of the sparse formulation (csrc/beamform/das_sparse.c), exactly the
  delays, interpolation taps, window and IQ rotation of the gather plan;
* clutter 'mean' / 'poly': projections along slow time, H (n_frames, n_frames) with
  ``y[t] = sum_u H[t, u] x[u]``, from the plan applied to the identity ensemble;
* color Doppler smoothing: the separable window with mirrored edges (csrc/doppler/doppler.c)
  as two matrices, ``R_smooth = S_z R S_x^T``;
* model input resize (compose): the bilinear taps of csrc/ai/preprocess.c as two matrices.
"""
import numpy as np

from ..clutter import ClutterFilter
from ..rf2iq import RF2IQPlan


def demodulation_matrix(plan):
    """(n_samples, n_out) complex64 D of an RF2IQPlan: ``iq = rf @ D`` per line."""
    n = plan.shape[-1]
    kwargs = dict(fs=plan.fs, fc=plan.fc, t0=plan.t0, decimation=plan.decimation)
    if plan.filter == "butter":
        kwargs.update(filter="butter", order=plan.order)
        if plan.bandwidth is not None:
            kwargs["bandwidth"] = plan.bandwidth
        else:
            kwargs["cutoff"] = plan.wn * plan.fs / 2.0
    else:  # kaiser (its designed taps) or user taps: the same FIR
        kwargs["filter"] = plan.taps
    identity = RF2IQPlan((n, n), np.float64, **kwargs)
    return identity(np.eye(n))


def das_operator(beamformer):
    """The DAS operator of a Beamformer as a scipy.sparse CSR array (n_points, n_columns)."""
    return beamformer.sparse_operator().tocsr()


def clutter_matrix(clutter, n_frames):
    """(n_frames, n_frames) float64 H of a stateless clutter filter ('mean' or 'poly')."""
    probe = ClutterFilter((n_frames, 1, n_frames), clutter.method,
                          **({"order": clutter.order} if clutter.method == "poly" else {}))
    identity = np.eye(n_frames, dtype=np.complex64).reshape(n_frames, 1, n_frames)
    h = probe(identity).reshape(n_frames, n_frames)
    return h.real.astype(np.float64)


def _mirror(i, n):
    period = 2 * n
    i %= period
    return i if i < n else period - 1 - i


def smoothing_matrix(n, m, window):
    """(n, n) matrix of the 1-D window of m taps with scipy-'symmetric' edges (doppler.c)."""
    j = np.arange(m)
    h = 0.54 - 0.46 * np.cos(2 * np.pi * j / (m - 1)) if (window == "hamming" and m > 1) else np.ones(m)
    s = np.zeros((n, n))
    for i in range(n):
        for k in range(m):
            s[i, _mirror(i - m // 2 + k, n)] += h[k]
    return s


def resize_matrix(n_in, n_out, align_corners):
    """(n_out, n_in) bilinear interpolation matrix of csrc/ai/preprocess.c's resize_taps."""
    r = np.zeros((n_out, n_in))
    last = n_in - 1
    for i in range(n_out):
        if align_corners:
            source = i * last / (n_out - 1) if n_out > 1 else 0.0
        else:
            source = (i + 0.5) * n_in / n_out - 0.5
        source = min(max(source, 0.0), float(last))
        first = np.floor(source)
        second = first + 1 if first < last else first
        w = np.float32(source - first)
        r[i, int(first)] += 1.0 - w
        r[i, int(second)] += w
    return r
