"""RF -> IQ demodulation: down-mixing, zero-phase low-pass, optional decimation (C: csrc/demod/rf2iq.c).

Layout: ``rf`` is ``(..., n_samples)`` C-order with fast time last (MATLAB's
``RF(n_samples, n_elements, n_frames)`` is ``RF.T`` here, without a copy), dtype int16,
float32 or float64 (all read natively by the C kernel, which computes in double).
The result is complex64 ``(..., n_out)`` with ``n_out = ceil(n_samples / decimation)``.

Math (SI units: Hz, s)::

    x[m]  = rf[m] * exp(-2j*pi*fc*(t0 + m/fs))      t0 = time of the first sample
    IQ[n] = 2 * lowpass(x)[n * decimation]           the 2 keeps the envelope amplitude

Low-pass filters:

* ``filter='butter'`` (default): MUST / PyMUST ``rf2iq``.  Butterworth of ``order`` (5) with
  normalised cutoff ``Wn = bandwidth*fc/fs`` when a fractional ``bandwidth`` is given (a
  FRACTION: 0.15 for MUST's 15 %), ``Wn = 2*cutoff/fs`` when ``cutoff`` (Hz) is given, else
  ``Wn = min(2*fc/fs, 0.5)``; ``Wn`` must lie in (0, 1).  Run forward and backward exactly as
  ``scipy.signal.filtfilt`` with its defaults (odd extension of ``3*(order+1)`` samples,
  steady-state initial conditions), in double.  Needs ``n_samples > 3*(order+1)``.
  Like scipy's ``(b, a)`` form, high orders at low cutoffs are ill-conditioned (order 10 at
  Wn = 0.05 already differs from a second-order-sections filter by ~1e-6 relative).
  Undersampled band-pass RF (fs < 2 fc) is fine as long as ``fc`` is the true carrier.
* ``filter='kaiser'``: linear-phase FIR low-pass, windowed sinc with a Kaiser window whose
  length and shape follow Kaiser's formulas from ``transition_width`` (Hz, default
  ``cutoff/2``) and ``attenuation`` (dB, default 60), as ``scipy.signal.kaiserord`` +
  ``firwin`` (length made odd, unit gain at DC).  ``cutoff`` (Hz, < fs/2) defaults to the
  Butterworth's: ``bandwidth*fc/2`` or ``min(fc, fs/4)``.
* ``filter=<1-D array>``: user FIR taps, real or complex (e.g. a matched filter, the
  conjugated time-reversed baseband pulse), applied as given (no normalisation).

FIR filters are applied centred, ``lowpass(x)[m] = sum_k h[k] x[m + (K-1)//2 - k]`` with
``x = 0`` outside the line (``numpy.convolve(x, h, 'same')``): odd-length linear-phase taps
have no delay.  With decimation only the kept outputs are computed.  The output sampling
rate is ``fs / decimation`` (``fs_out``); the first output sample is still at ``t0``.
"""
import numbers

import numpy as np

from . import _core, _validate
from ._backend import check_backend
from .device import PlanRunner

_DTYPES = {np.dtype(np.int16): "int16", np.dtype(np.float32): "float32", np.dtype(np.float64): "float64"}
MAX_ORDER = 16


def _rf_dtype(dtype):
    try:
        dtype = np.dtype(dtype)
    except TypeError as exc:
        raise TypeError(f"rf dtype must be int16, float32 or float64 (got {dtype!r})") from exc
    name = _DTYPES.get(dtype.newbyteorder("="))
    if name is None:
        raise TypeError(f"rf must have dtype int16, float32 or float64 (got {dtype})")
    return name


def _taps_array(filter):
    taps = np.asarray(filter)
    if taps.dtype.kind not in "iufc" or taps.dtype == np.bool_:
        raise TypeError(f"filter taps must be a real or complex numeric array (got dtype {taps.dtype})")
    if taps.ndim != 1:
        raise ValueError(f"filter taps must be a 1-D array (got shape {taps.shape})")
    if taps.size == 0:
        raise ValueError("filter taps are empty")
    if not np.all(np.isfinite(taps)):
        raise ValueError("filter taps must be finite (NaN or inf found)")
    return taps


class RF2IQPlan:
    """An RF -> IQ plan for RF arrays of one shape and dtype (module docstring: the math).

    Parameters
    ----------
    shape : tuple
        Shape of ``rf``, ``(..., n_samples)``, fast time last.
    dtype : int16, float32 or float64
    fs, fc : float
        Sampling frequency of the RF and demodulation frequency, Hz (> 0).
    t0 : float
        Time of the first sample, s.
    bandwidth : float or None
        Fractional bandwidth as a fraction in (0, 2) (0.15 for 15 %).
    filter : 'butter', 'kaiser' or 1-D array of FIR taps
    order : int
        Butterworth order, 1..16 (default 5, as MUST).
    cutoff, transition_width : float or None
        Low-pass cutoff and Kaiser transition width, Hz.
    attenuation : float
        Kaiser stop-band attenuation, dB (>= 8).
    decimation : int
        Keep every ``decimation``-th filtered sample (>= 1).
    backend : {'cpu', 'cuda'}
        'cuda': cuda/rf2iq.cu; takes device arrays (DeviceArray, any CUDA DLPack array) without
        a copy and returns a DeviceArray; NumPy input is copied in and the result out.
    strict : bool
        With backend='cuda', refuse host arrays instead of copying them (TypeError).

    Attributes: ``shape``, ``out_shape``, ``n_out``, ``fs_out``, ``wn`` (butter, else None),
    ``taps`` (the FIR taps, None for butter), ``cuda`` (usbeam.device.CudaExecution: stream,
    stage_times(); None on the CPU).
    """

    def __init__(self, shape, dtype, *, fs, fc, t0=0.0, bandwidth=None, filter="butter", order=5,
                 cutoff=None, transition_width=None, attenuation=60.0, decimation=1, backend="cpu",
                 strict=False):
        self.shape = _validate.shape("shape", shape)
        if len(self.shape) == 0:
            raise ValueError("rf must have at least 1 dimension (fast time last)")
        if any(s == 0 for s in self.shape):
            raise ValueError(f"rf is empty (shape {self.shape})")
        self.dtype = np.dtype(_rf_dtype(dtype))
        self.fs = _validate.frequency("fs", fs)
        self.fc = _validate.frequency("fc", fc)
        self.t0 = _validate.real_scalar("t0", t0)
        self.decimation = _validate.integer("decimation", decimation, minimum=1,
                                             maximum=_validate.SSIZE_MAX)
        self.backend = check_backend(backend)
        if bandwidth is not None:
            bandwidth = _validate.real_scalar("bandwidth", bandwidth)
            if not 0 < bandwidth < 2:
                raise ValueError(f"bandwidth is a fraction of fc (0.15 for 15 %) and must be in (0, 2) "
                                 f"(got {bandwidth!r})")
        if cutoff is not None:
            cutoff = _validate.positive("cutoff", cutoff)
        if transition_width is not None:
            transition_width = _validate.positive("transition_width", transition_width)
        if bandwidth is not None and cutoff is not None:
            raise ValueError("give bandwidth or cutoff, not both")
        self.bandwidth = bandwidth
        n_samples = self.shape[-1]
        n_lines = int(np.prod(self.shape[:-1], dtype=np.int64)) if len(self.shape) > 1 else 1
        self.n_out = (n_samples - 1) // self.decimation + 1
        self.out_shape = self.shape[:-1] + (self.n_out,)
        self.fs_out = self.fs / self.decimation
        _validate.check_allocation("out", self.out_shape, 8)

        kwargs = dict(t0=self.t0, decimation=self.decimation, backend=self.backend)
        self.wn = None
        if isinstance(filter, str):
            filter = _validate.choice("filter", filter, ("butter", "kaiser"))
            if filter == "butter":
                self.order = _validate.integer("order", order, minimum=1, maximum=MAX_ORDER)
                if transition_width is not None:
                    raise ValueError("transition_width applies to filter='kaiser' only")
                if bandwidth is not None:
                    wn, source = bandwidth * self.fc / self.fs, "bandwidth"
                elif cutoff is not None:
                    wn, source = 2.0 * cutoff / self.fs, "cutoff"
                else:
                    wn, source = min(2.0 * self.fc / self.fs, 0.5), "fc"
                if not wn < 1.0:
                    what = {"bandwidth": "bandwidth*fc/fs", "cutoff": "2*cutoff/fs"}[source]
                    raise ValueError(f"{source}: the normalised cutoff Wn = {what} = {wn:.6g} must be < 1 "
                                     f"(1 = fs/2)")
                if n_samples <= 3 * (self.order + 1):
                    raise ValueError(f"n_samples ({n_samples}) must exceed 3*(order+1) = "
                                     f"{3 * (self.order + 1)} for filter='butter' (filtfilt edge padding)")
                self.wn = wn
                kwargs.update(filter="butter", order=self.order, wn=wn)
            else:
                source = "cutoff"
                if cutoff is None and bandwidth is not None:
                    cutoff, source = bandwidth * self.fc / 2.0, "bandwidth: the cutoff bandwidth*fc/2"
                elif cutoff is None:
                    cutoff = min(self.fc, self.fs / 4.0)
                if not cutoff < self.fs / 2.0:
                    raise ValueError(f"{source} ({cutoff:.6g} Hz) must be below fs/2 ({self.fs / 2:.6g} Hz)")
                if transition_width is None:
                    transition_width = cutoff / 2.0
                attenuation = _validate.real_scalar("attenuation", attenuation)
                if attenuation < 8:
                    raise ValueError(f"attenuation must be >= 8 dB for Kaiser's formulas (got {attenuation!r})")
                kwargs.update(filter="kaiser", cutoff=cutoff, transition_width=transition_width,
                              attenuation=attenuation)
            self.filter = filter
        else:
            if isinstance(filter, numbers.Number) or filter is None:
                raise TypeError(f"filter must be 'butter', 'kaiser' or an array of taps "
                                f"(got {type(filter).__name__})")
            if bandwidth is not None or cutoff is not None or transition_width is not None:
                raise ValueError("bandwidth, cutoff and transition_width do not apply to user taps")
            taps = _taps_array(filter)
            kwargs.update(filter="taps", taps_re=np.ascontiguousarray(taps.real, dtype=np.float64))
            if np.iscomplexobj(taps):
                kwargs["taps_im"] = np.ascontiguousarray(taps.imag, dtype=np.float64)
            self.filter = "taps"
        self.cutoff, self.transition_width = cutoff, transition_width
        self._plan = _core.rf2iq_plan(n_lines, n_samples, _rf_dtype(self.dtype), self.fs, self.fc, **kwargs)
        self.taps = _core.rf2iq_plan_taps(self._plan)
        self.cuda = None
        if self.backend == "cuda":  # cuda/rf2iq.cu; device arrays in and out (see usbeam.device)
            self._runner = PlanRunner(_core.rf2iq_cuda_exec(self._plan), strict)
            self.cuda = self._runner.execution

    def __repr__(self):
        from ._repr import attrs_repr

        return attrs_repr(self, ('shape', 'dtype', 'fs', 'fc', 'filter', 'decimation', 'out_shape', 'backend'))

    def __call__(self, rf, out=None):
        """Demodulate ``rf`` (shape and dtype of the plan); returns complex64 ``out_shape``."""
        if self.cuda is not None:
            return self._runner(lambda i, o: _core.rf2iq_execute(self._plan, i, o), "rf", rf, self.shape,
                                self.dtype, self._host_rf, out, self.out_shape, np.complex64, no_overlap=True)
        given, rf = rf, self._host_rf(rf)
        if out is None:
            out = np.empty(self.out_shape, np.complex64)
        else:
            _validate.out_array("out", out, self.out_shape, np.complex64)
            _validate.no_overlap("out", out, "rf", given, rf)
        _core.rf2iq_execute(self._plan, rf, out)
        return out

    def _host_rf(self, rf):
        rf = _validate.ndarray("rf", rf)
        if rf.dtype.newbyteorder("=") != self.dtype:
            raise TypeError(f"rf must have dtype {self.dtype} (got {rf.dtype})")
        if rf.shape != self.shape:
            raise ValueError(f"rf must have shape {self.shape} (got {rf.shape})")
        if not (rf.flags.c_contiguous and rf.flags.aligned and rf.dtype.isnative):
            rf = np.ascontiguousarray(rf, dtype=self.dtype)
        return rf


def rf2iq(rf, *, fs, fc, t0=0.0, bandwidth=None, filter="butter", order=5, cutoff=None,
          transition_width=None, attenuation=60.0, decimation=1, out=None):
    """I/Q demodulation of RF signals ``rf`` (``(..., n_samples)``, fast time last).

    With the defaults this is MUST / PyMUST ``rf2iq(RF, param)`` on ``RF.T`` (pass
    ``bandwidth=param.bandwidth/100``).  See the module docstring for the math and
    :class:`RF2IQPlan` for the parameters.  Returns complex64 ``(..., ceil(n_samples/decimation))``.
    """
    rf = _validate.ndarray("rf", rf)
    if rf.ndim == 0:
        raise ValueError("rf must have at least 1 dimension (fast time last)")
    if rf.size == 0:
        raise ValueError(f"rf is empty (shape {rf.shape})")
    plan = RF2IQPlan(rf.shape, rf.dtype, fs=fs, fc=fc, t0=t0, bandwidth=bandwidth, filter=filter,
                     order=order, cutoff=cutoff, transition_width=transition_width,
                     attenuation=attenuation, decimation=decimation)
    return plan(rf, out=out)
