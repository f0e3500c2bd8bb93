"""Adaptive beamformers for line arrays (linear, phased and convex): coherence factors, DMAS /
F-DMAS, p-DAS, minimum variance (C kernel: csrc/beamform/adaptive.c, per-point math
csrc/beamform/adaptive_math.h, CUDA twin cuda/adaptive.cu).

Use them through the DAS plan: ``usbeam.Beamformer(..., method="cf" | "gcf" | "dmas" |
"fdmas" | "pdas" | "mv", <method options>)``.  Delays, receive apertures (f-number), windows
and interpolation are exactly DAS's (``usbeam.beamformer``); for each point the delayed
element signals ``s_e`` (the window folded in, IQ rotated by ``exp(+j 2 pi fc tau)``) are first
compounded over the transmits, then combined across the N elements of the point's receive
aperture by the method instead of summed:

- ``"cf"``: ``CF * sum_e s_e``, ``CF = |sum s|^2 / (N sum |s|^2)`` -- Mallart & Fink, "Adaptive
  focusing in scattering media through sound-speed inhomogeneities: the van Cittert Zernike
  approach and focusing criterion", JASA 96(6) 1994; Hollman, Rigby, O'Donnell, IEEE Ultrasonics
  Symposium 1999.
- ``"gcf"``: ``GCF * sum_e s_e``, ``GCF = sum_{|k| <= M0} |S(k)|^2 / (N sum |s|^2)`` with ``S`` the
  N-point DFT of ``s`` across the aperture (``gcf_m0`` = M0, default 2; M0 = 0 is CF) -- Li &
  Li, "Adaptive imaging using the generalized coherence factor", IEEE UFFC 50(2) 2003.
- ``"dmas"``: ``sum_{i<j} q_i q_j`` with the signed square root ``q = sign(s) sqrt|s|`` (RF) --
  Matrone, Savoia, Caliano, Magenes, "The delay multiply and sum beamforming algorithm in
  ultrasound B-mode medical imaging", IEEE TMI 34(4) 2015.  On IQ the signed root keeps the
  phase, ``q = |s|^(1/2) e^{j arg s}`` (the analytic form of the same products): the output's
  phase turns at twice the carrier (its envelope is what B-mode shows).
- ``"fdmas"``: DMAS evaluated at the 2K + 1 sample offsets ``-K..K / fs`` around each point's
  delays and filtered along that time axis by a band-pass FIR around 2 fc (Matrone et al.'s
  filtered DMAS): Hann-windowed sinc of 2K + 1 taps (``fdmas_half_taps`` = K, default
  ``max(4, ceil(2 fs / fc))``), pass band ``fdmas_band`` = (low, high) Hz (default (fc, 3 fc);
  on RF the upper edge is capped at fs/2 and fs >= 4 fc is required; on IQ the band is shifted
  down by 2 fc to baseband), unit gain at 2 fc.  Pixel-based, so it needs no axial grid
  sampling finer than the 2 fc content.
- ``"pdas"``: ``r = sum_e |s_e|^(1/p) e^{j arg s_e}``, output ``|r|^p e^{j arg r}`` (sign for RF),
  ``p`` >= 1 (default 2) -- Polichetti, Varray, Bera, Cachard, D'hooge, "A nonlinear beamformer
  based on p-th root compression -- application to plane wave ultrasound imaging", Appl. Sci.
  8(4) 2018.
- ``"mv"``: minimum variance (Capon) -- Synnevag, Austeng, Holm, "Adaptive beamforming applied
  to medical ultrasound imaging", IEEE UFFC 54(8) 2007, and "Benefits of minimum-variance
  beamforming in medical ultrasound imaging", IEEE UFFC 56(9) 2009: subarrays of length L
  (``subarray_length``, an element count, or ``subarray_fraction`` of each point's aperture,
  default 0.5), ``R = sum over 2K + 1 time samples (temporal_averaging = K, default 0) and the
  N - L + 1 subarrays of x x^H``, diagonal loading ``R + delta trace(R) / L I``
  (``diagonal_loading`` = delta, default 0.01), ``w = R^-1 a / (a^H R^-1 a)`` with a = 1, output
  ``(1 / (N - L + 1)) sum_l w^H x_l`` at the point's own sample.  Where the loaded R is
  singular (delta = 0 with fewer snapshots than L) the weights fall back to uniform ones.
  A point whose aperture has fewer than L elements uses all of them as one subarray.

Probes: the methods take a point's receive aperture as a row of neighbouring elements (CF's
N, GCF's DFT across it, MV's subarrays sliding along it).  ``LinearArray`` (phased arrays
included) and ``ConvexArray`` qualify, as does a one-dimensional ``ElementArray`` listed in
order along x (the Vantage reader's convex probes).  On a convex array the aperture of a point
is the set of elements whose cone around their normal holds it (``|lateral| <= axial /
(2F)``, usbeam.beamformer), which is a contiguous run of elements: seen from the centre of
curvature, an element at angle d from the point has the margin ``r cos d - R - 2F r |sin d|``
(r the point's radius, R the array's), which falls as |d| grows.  The plan checks this for
every point and refuses a geometry where an element inside the run does not see the point
(ValueError naming element_normals: it would enter CF/GCF/MV as a zero signal), elements out
of order along x (ValueError), and 2-D apertures, ``MatrixArray`` or a two-dimensional
``ElementArray`` (TypeError: they have no such row).  Samples a delay puts outside the record
are zeros inside the aperture, on every geometry, as in DAS.

Scales: CF, GCF and p-DAS have DAS's (an unnormalised sum), DMAS that of the pairwise sum,
MV that of one element (weights summing to 1).  The per-point math runs in double on the
float32 delayed samples; outputs are float32 (RF) or complex64 (IQ) as DAS's.
"""
import math

import numpy as np

from . import _validate

__all__ = ["METHODS", "method_arguments"]

METHODS = ("das", "cf", "gcf", "dmas", "fdmas", "pdas", "mv")
# which options apply to which method
_OPTIONS = {"p": ("pdas",), "gcf_m0": ("gcf",), "subarray_length": ("mv",), "subarray_fraction": ("mv",),
            "diagonal_loading": ("mv",), "temporal_averaging": ("mv",), "fdmas_band": ("fdmas",),
            "fdmas_half_taps": ("fdmas",)}


def method_arguments(method, options, *, n_elements, fs, fc):
    """The validated method options, ``_core.adaptive_plan``'s ``method_options``:
    (method, p, gcf_m0, subarray_length, subarray_fraction, diagonal_loading,
    temporal_averaging, fdmas_low, fdmas_high, fdmas_half_taps).  ValueError/TypeError name
    the option."""
    method = _validate.choice("method", method, METHODS)
    for name, value in options.items():
        if value is not None and method not in _OPTIONS[name]:
            raise ValueError(f"{name} applies to method {' / '.join(repr(m) for m in _OPTIONS[name])} only "
                             f"(method is {method!r})")
    opt = {k: v for k, v in options.items() if v is not None}
    p = gcf_m0 = subarray_length = temporal = half_taps = 0
    fraction = loading = low = high = 0.0
    if method == "pdas":
        p = _validate.real_scalar("p", opt.get("p", 2.0))
        if not (math.isfinite(p) and p >= 1):
            raise ValueError(f"p must be a finite number >= 1 (got {p})")
    elif method == "gcf":
        gcf_m0 = _validate.integer("gcf_m0", opt.get("gcf_m0", 2), minimum=0)
        if 2 * gcf_m0 >= n_elements:
            raise ValueError(f"gcf_m0 ({gcf_m0}) must be < n_elements / 2 ({n_elements} elements)")
    elif method == "mv":
        if "subarray_length" in opt and "subarray_fraction" in opt:
            raise ValueError("give subarray_length or subarray_fraction, not both")
        if "subarray_length" in opt:
            subarray_length = _validate.integer("subarray_length", opt["subarray_length"], minimum=1)
            if subarray_length > n_elements:
                raise ValueError(f"subarray_length ({subarray_length}) is larger than the aperture "
                                 f"({n_elements} elements)")
        else:
            fraction = _validate.real_scalar("subarray_fraction", opt.get("subarray_fraction", 0.5))
            if not 0 < fraction <= 1:
                raise ValueError(f"subarray_fraction must be in (0, 1] (got {fraction})")
        loading = _validate.real_scalar("diagonal_loading", opt.get("diagonal_loading", 0.01))
        if not (math.isfinite(loading) and loading >= 0):
            raise ValueError(f"diagonal_loading must be finite and >= 0 (got {loading})")
        temporal = _validate.integer("temporal_averaging", opt.get("temporal_averaging", 0), minimum=0, maximum=4096)
    elif method == "fdmas":
        band = opt.get("fdmas_band", (fc, 3 * fc))
        try:
            low, high = (float(b) for b in band)
        except (TypeError, ValueError):
            raise TypeError(f"fdmas_band must be a pair (low, high) of frequencies in Hz (got {band!r})") from None
        if not (0 < low < high < math.inf):
            raise ValueError(f"fdmas_band must satisfy 0 < low < high < inf, Hz (got {band!r})")
        half_taps = _validate.integer("fdmas_half_taps", opt.get("fdmas_half_taps", max(4, math.ceil(2 * fs / fc))),
                                      minimum=1, maximum=4096)
    return (method, float(p), int(gcf_m0), int(subarray_length), float(fraction), float(loading), int(temporal),
            float(low), float(high), int(half_taps))


def fdmas_taps(plan):
    """The F-DMAS filter taps g[k], k = -K..K, of a plan made by ``_core.adaptive_plan``."""
    from . import _core

    return np.array(_core.adaptive_fdmas_taps(plan), dtype=np.complex128)
