"""Clutter (wall) filters along slow time: the first Doppler stage, before color and power
Doppler (usbeam.doppler).  C kernels: csrc/doppler/clutter.c (plan and dispatch),
clutter_svd.c, clutter_iir.c; CUDA twins cuda/clutter.cu, cuda/clutter_svd.cu.

Layout: an ensemble of beamformed IQ frames, complex, ``(n_frames, *spatial)`` with slow
time on axis 0, e.g. ``(n_frames, nz, nx)``; the output has the same shape, complex64.
Frequencies of the 'iir' cut-off and of the SVD's automatic cut-off are fractions of the
slow-time rate (the PRF of the compounded frames).

Methods and references:
- 'mean': subtract the slow-time mean;
- 'poly': least-squares regression filter, the Legendre polynomials of degree 0..order
  projected out (Kadi & Loupas 1995);
- 'svd': singular value thresholding of the Casorati matrix (Demené et al. 2015, IEEE TMI),
  with the automatic low cut-off of Yu & Lovstakken 2010 (mean Doppler frequency of
  each temporal singular vector);
- 'iir': Butterworth high-pass whose state carries across calls, initialised by projection
  (Chornoboy 1990) to suppress the transient.
"""
import inspect

import numpy as np

from . import _core, _validate
from ._backend import check_backend
from .device import PlanRunner


class ClutterFilter:
    """A clutter (wall) filter along slow time for ensembles of a fixed shape.

    Parameters
    ----------
    shape : tuple
        ``(n_frames, *spatial)`` of the complex input.
    method : {'poly', 'mean', 'svd', 'iir'}
        'mean': subtract the slow-time mean.  'poly': project out the Legendre polynomials
        of degree 0..``order`` (least-squares regression filter).  'svd': keep the singular
        components ``[low, high]`` of the Casorati matrix (Demené et al. 2015).  'iir':
        Butterworth high-pass of ``order`` with ``cutoff`` (fraction of the PRF); its state
        carries across calls, so a stream filtered block by block equals the whole record.
    order : int
        'poly': polynomial degree (default 2, needs n_frames >= order + 2).  'iir': filter
        order, 1..10 (default 4).
    low, high : int or 'auto' / None
        'svd' cut-offs, 0 = largest singular value.  ``low='auto'`` (default) removes the
        leading components whose temporal singular vector has a mean Doppler frequency below
        ``auto_frequency`` (fraction of the PRF; Yu & Lovstakken 2010); ``high=None`` keeps
        through the last component.
    cutoff : float
        'iir' -3 dB cut-off as a fraction of the PRF, in (0, 0.5) (default 0.05).
    init : {'projection', 'zero'}
        'iir' initialisation after creation or ``reset()``: 'projection' (Chornoboy 1990)
        chooses the initial state that minimises the output energy over the first
        ``init_frames`` frames (default: the whole first block), suppressing the transient;
        'zero' starts at rest.
    backend : {'cpu', 'cuda'}
        'cuda' ('mean', 'poly' up to order 31, 'iir', 'svd' up to 128 frames): on the GPU
        (cuda/clutter.cu, cuda/clutter_svd.cu), device arrays in and out without copies (as
        usbeam.BModePlan); 'svd' decomposes on the device (``svd_info()`` then waits for it);
        ``strict=True`` refuses host arrays.  ``out`` may be the input itself.  The 'iir' state
        stays on the device between calls; ``reset()`` is queued on the plan's stream.
    algorithm : {'kernel', 'gemm'}
        How backend 'cuda' applies 'mean' / 'poly' (stage "clutter.project" either way):
        'kernel' (default) is one fused pass over the ensemble accumulating in double in the
        CPU's order; 'gemm' is two cuBLAS SGEMMs (C = X Q, then X - C Q^T; full FP32, never TF32)
        that read the ensemble twice and sum in float32, so it agrees with the CPU to about
        n_frames^1.5 float32 roundings of the clutter amplitude rather than of the output.

    An option of another method (``cutoff`` or ``order`` with 'svd', ``low`` with 'poly', ...)
    given a value other than its default is refused (ValueError naming it): it would be ignored.
    """

    def __init__(self, shape, method="poly", *, order=None, low="auto", high=None, auto_frequency=0.05,
                 cutoff=0.05, init="projection", init_frames=None, backend="cpu", strict=False,
                 algorithm="kernel"):
        self.shape = _validate.plan_shape("shape", shape, 2)
        self.method = method = _validate.choice("method", method, ("poly", "mean", "svd", "iir"))
        _refuse_foreign_options(method, order=order, low=low, high=high, auto_frequency=auto_frequency,
                                cutoff=cutoff, init=init, init_frames=init_frames)
        self.algorithm = _validate.choice("algorithm", algorithm, ("kernel", "gemm"))
        backend = backend.lower() if isinstance(backend, str) else backend  # case-insensitive options
        if self.algorithm == "gemm" and self.method not in ("poly", "mean"):
            raise ValueError(f"algorithm='gemm' is for method 'poly' or 'mean' (got method='{self.method}')")
        if self.algorithm == "gemm" and backend != "cuda":
            raise ValueError("algorithm='gemm' (cuBLAS) needs backend='cuda'")
        self.backend = check_backend(backend)
        n_frames = self.shape[0]
        n_pixels = int(np.prod(self.shape[1:], dtype=np.int64))
        _validate.check_allocation("iq", self.shape, 8)
        kwargs = dict(method=method, backend=backend, algorithm=self.algorithm)
        if method == "poly":
            self.order = _validate.integer("order", 2 if order is None else order, minimum=0)
            if n_frames < self.order + 2:
                raise ValueError(f"order {self.order}: the polynomial filter needs an ensemble of at least "
                                 f"{self.order + 2} frames (n_frames = {n_frames})")
            kwargs["poly_order"] = self.order
        elif method == "iir":
            self.order = _validate.integer("order", 4 if order is None else order, minimum=1, maximum=10)
            self.cutoff = _validate.positive("cutoff", cutoff)
            if self.cutoff >= 0.5:
                raise ValueError(f"cutoff must be < 0.5 (a fraction of the PRF; got {self.cutoff})")
            self.init = init = _validate.choice("init", init, ("projection", "zero"))
            frames = 0 if init_frames is None else _validate.integer("init_frames", init_frames, minimum=1)
            if init == "projection" and not (self.order < (frames or n_frames) <= n_frames):
                raise ValueError(f"init_frames: projection initialisation needs order ({self.order}) < "
                                 f"init_frames ({frames or n_frames}) <= n_frames ({n_frames})")
            kwargs.update(iir_order=self.order, iir_cutoff=self.cutoff, iir_init=init, iir_init_frames=frames)
        elif method == "svd":
            if high is None:
                high_i = n_frames - 1
            else:
                high_i = _validate.integer("high", high)
                if not 0 <= high_i <= n_frames - 1:
                    raise ValueError(f"high must be in [0, n_frames-1 = {n_frames - 1}] (got {high_i})")
            if isinstance(low, str):
                low = _validate.choice("low", low, ("auto",))
                low_i = -1
                self.auto_frequency = _validate.positive("auto_frequency", auto_frequency)
                if self.auto_frequency >= 0.5:
                    raise ValueError(f"auto_frequency must be < 0.5 (a fraction of the PRF; got {auto_frequency})")
            else:
                low_i = _validate.integer("low", low)
                if not 0 <= low_i <= high_i:
                    raise ValueError(f"low must be in [0, high = {high_i}] or 'auto' (got {low_i})")
                self.auto_frequency = 0.05
            self.low, self.high = low, high_i
            kwargs.update(svd_low=low_i, svd_high=high_i, svd_auto_frequency=self.auto_frequency)
        if self.backend == "cuda" and method == "svd" and n_frames > 128:
            raise ValueError(f"shape: method='svd' on backend='cuda' takes at most 128 frames (got {n_frames})")
        self._plan = _core.clutter_plan(n_frames, n_pixels, **kwargs)
        self.cuda = None
        if self.backend == "cuda":
            self._runner = PlanRunner(_core.clutter_cuda_exec(self._plan), strict)
            self.cuda = self._runner.execution  # stream, stage_times(), set_stream()

    def __repr__(self):
        from ._repr import attrs_repr

        return attrs_repr(self, ('shape', 'method', 'order', 'low', 'high', 'cutoff', 'backend'))

    def __call__(self, iq, out=None):
        """Filter one ensemble (or, for 'iir', the next block of a stream); returns complex64."""
        if self.cuda is not None:
            return self._runner(lambda i, o: _core.clutter_execute(self._plan, i, o), "iq", iq, self.shape,
                                np.complex64, lambda x: _validate.complex64("iq", x, self.shape), out, self.shape,
                                np.complex64)
        given, iq = iq, _validate.complex64("iq", iq, self.shape)
        if out is None:
            out = np.empty(self.shape, np.complex64)
        else:
            _validate.out_array("out", out, self.shape, np.complex64)
            # every kernel reads a pixel's slow time before writing it: exactly in place is fine
            _validate.no_overlap("out", out, "iq", given, iq, same_ok=True)
        _core.clutter_execute(self._plan, iq, out)
        return out

    def reset(self):
        """'iir': forget the filter state; the next call starts a new record."""
        _core.clutter_reset(self._plan)

    def svd_info(self):
        """'svd': (singular values in descending order, low, high) used by the last call."""
        if self.method != "svd":
            raise ValueError("svd_info: this filter is not method='svd'")
        return _core.clutter_svd_info(self._plan)


# The methods that read each option: given to another method it would be ignored silently
# (clutter_filter(iq, "svd", cutoff=4) once kept every component).  Defaults: the signature's.
_OPTION_OWNERS = {"order": ("poly", "iir"), "low": ("svd",), "high": ("svd",), "auto_frequency": ("svd",),
                  "cutoff": ("iir",), "init": ("iir",), "init_frames": ("iir",)}
_OPTION_DEFAULTS = {name: parameter.default
                    for name, parameter in inspect.signature(ClutterFilter.__init__).parameters.items()
                    if name in _OPTION_OWNERS}


def _differs(value, default):
    if value is None or default is None:
        return value is not default
    try:
        return bool(np.any(np.asarray(value) != np.asarray(default)))
    except (TypeError, ValueError):
        return True


def _refuse_foreign_options(method, **options):
    """ValueError naming an option that ``method`` does not read (one given a value other than
    its default), and the methods that do."""
    for name, value in options.items():
        owners = _OPTION_OWNERS[name]
        if method not in owners and _differs(value, _OPTION_DEFAULTS[name]):
            raise ValueError(f"{name} is an option of method {' / '.join(repr(m) for m in owners)}: "
                             f"method={method!r} would ignore it (got {name}={value!r})")
    if (method == "svd" and not isinstance(options["low"], str)
            and _differs(options["auto_frequency"], _OPTION_DEFAULTS["auto_frequency"])):
        raise ValueError(f"auto_frequency chooses low='auto': with low={options['low']!r} it would be ignored")


def clutter_filter(iq, method="poly", **kwargs):
    """Clutter-filter an ensemble ``iq`` (complex, ``(n_frames, *spatial)``) along slow time.

    See :class:`ClutterFilter` for the methods and their parameters.  Returns complex64.
    """
    iq = _validate.ensemble("iq", iq)
    return ClutterFilter(iq.shape, method, **kwargs)(iq)


__all__ = ["ClutterFilter", "clutter_filter"]
