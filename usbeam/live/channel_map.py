"""Channel mapping applied while a raw frame is copied into a session slot.

Raw frame: MATLAB shape ``(n_rows, n_channels)`` (a Vantage RcvData frame: int16,
rows = samples x acquisitions, column-major), any memory order; the C kernel
(csrc/acquire/gather.c) reads it through its strides, so neither layout costs a transpose.
Mapped frame: ``(n_acquisitions, n_elements, n_samples)`` C order, samples last, i.e.
``out[a, e, k] = raw[acquisition_row[a] + k, element_channel[e]]``.  Only the channels
of used elements travel.
"""
import numpy as np

from .. import _core, _validate

_DTYPES = {np.dtype(np.int16): "int16", np.dtype(np.float32): "float32", np.dtype(np.float64): "float64"}


class ChannelMap:
    """Element -> channel and acquisition -> first-row mapping of raw frames.

    Parameters
    ----------
    raw_shape : (n_rows, n_channels)
    element_channel : int array (n_elements,), 0-based raw channel of each element
        (Vantage: ``Trans.Connector - 1``).
    acquisition_row : int array (n_acquisitions,), 0-based first raw row of each
        acquisition (Vantage: ``Receive(i).startSample - 1``).
    n_samples : samples per acquisition (Vantage: ``endSample - startSample + 1``).
    dtype : int16 (default), float32 or float64; the mapped frame keeps it.
    """

    def __init__(self, raw_shape, element_channel, acquisition_row, n_samples, dtype=np.int16):
        raw_shape = _validate.shape("raw_shape", raw_shape)
        if len(raw_shape) != 2 or min(raw_shape) <= 0:
            raise ValueError(f"raw_shape must be (n_rows, n_channels) > 0 (got {raw_shape})")
        self.dtype = np.dtype(dtype)
        if self.dtype not in _DTYPES:
            raise TypeError(f"dtype must be int16, float32 or float64 (got {self.dtype})")
        self.element_channel = self._indices("element_channel", element_channel, np.int32)
        self.acquisition_row = self._indices("acquisition_row", acquisition_row, np.int64)
        self.n_samples = _validate.integer("n_samples", n_samples, minimum=1)
        self.raw_shape = raw_shape
        self.output_shape = (self.acquisition_row.size, self.element_channel.size, self.n_samples)
        self.last_copy_s = 0.0  # duration of the last copy in C (GIL released), seconds
        self._plan = _core.live_gather_plan(raw_shape[0], raw_shape[1], self.element_channel,
                                            self.acquisition_row, self.n_samples, _DTYPES[self.dtype])

    @staticmethod
    def _indices(name, value, dtype):
        arr = np.asarray(value)
        if arr.ndim != 1 or arr.size == 0:
            raise ValueError(f"{name} must be a non-empty 1-D sequence (got shape {arr.shape})")
        if not np.issubdtype(arr.dtype, np.integer):
            if not np.issubdtype(arr.dtype, np.number) or np.iscomplexobj(arr):
                raise TypeError(f"{name} must hold integers (got dtype {arr.dtype})")
            if not np.all(np.isfinite(arr)) or not np.all(arr == np.round(arr)):
                raise ValueError(f"{name} must hold integers")
        # range-checked before the cast, which would wrap (2**32 + 3 -> 3) or saturate silently
        top = np.iinfo(dtype).max
        low, high = arr.min(), arr.max()
        if low < 0 or high > top:
            bad = low if low < 0 else high
            raise ValueError(f"{name} must hold 0-based indices in [0, {top}] (got {bad:.17g})"
                             if np.issubdtype(arr.dtype, np.floating) else
                             f"{name} must hold 0-based indices in [0, {top}] (got {int(bad)})")
        return np.ascontiguousarray(arr, dtype=dtype)

    @property
    def raw_nbytes(self):
        return self.raw_shape[0] * self.raw_shape[1] * self.dtype.itemsize

    @property
    def nbytes(self):
        return int(np.prod(self.output_shape)) * self.dtype.itemsize

    def check(self, frame, name="frame"):
        """The frame as an ndarray, or TypeError/ValueError naming what is wrong."""
        if not isinstance(frame, np.ndarray):
            frame = _validate.ndarray(name, frame)
        if frame.dtype != self.dtype:
            raise TypeError(f"{name} must have dtype {self.dtype} (got {frame.dtype})")
        if frame.shape != self.raw_shape:
            raise ValueError(f"{name} must have shape {self.raw_shape} (rows, channels) (got {frame.shape})")
        return frame

    def __call__(self, frame, out=None):
        frame = self.check(frame)
        if out is None:
            out = np.empty(self.output_shape, self.dtype)
        else:
            _validate.out_array("out", out, self.output_shape, self.dtype)
            _validate.no_overlap("out", out, "frame", frame)
        self.last_copy_s = _core.live_gather(self._plan, frame, out)
        return out

    def __repr__(self):
        return (f"ChannelMap(raw_shape={self.raw_shape}, n_elements={self.element_channel.size}, "
                f"n_acquisitions={self.acquisition_row.size}, n_samples={self.n_samples}, dtype={self.dtype})")
