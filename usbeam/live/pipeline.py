"""The pipeline contract a live session runs, and an adapter for plain callables.

A pipeline is any object with ``input_shape``, ``input_dtype`` (NumPy dtype),
``output_shape``, ``output_dtype`` and ``__call__(frame, out=None) -> ndarray`` that writes
``out`` when given; an optional ``timings`` dict (stage name -> seconds of the last call)
is reported per stage by ``Session.stats()``.  A plain callable plus explicit shapes is
accepted too (wrapped in :class:`CallablePipeline`).
"""
import inspect

import numpy as np

_CONTRACT = ("input_shape", "input_dtype", "output_shape", "output_dtype")


def _shape(name, value):
    try:
        shape = tuple(int(s) for s in value)
    except TypeError:
        raise TypeError(f"{name} must be a sequence of integers (got {value!r})") from None
    if not shape or any(s <= 0 for s in shape):
        raise ValueError(f"{name} must be a non-empty shape of positive sizes (got {shape})")
    return shape


def _dtype(name, value):
    try:
        return np.dtype(value)
    except TypeError:
        raise TypeError(f"{name} must be a NumPy dtype (got {value!r})") from None


class CallablePipeline:
    """Wrap ``fn(frame) -> image`` (or ``fn(frame, out=...)``) with explicit shapes."""

    def __init__(self, fn, input_shape, input_dtype, output_shape, output_dtype):
        if not callable(fn):
            raise TypeError(f"pipeline must be callable (got {type(fn).__name__})")
        self.fn = fn
        self.input_shape = _shape("input_shape", input_shape)
        self.input_dtype = _dtype("input_dtype", input_dtype)
        self.output_shape = _shape("output_shape", output_shape)
        self.output_dtype = _dtype("output_dtype", output_dtype)
        try:
            self._takes_out = "out" in inspect.signature(fn).parameters
        except (TypeError, ValueError):
            self._takes_out = False

    @property
    def timings(self):
        return getattr(self.fn, "timings", None)

    def __call__(self, frame, out=None):
        if out is not None and self._takes_out:
            result = self.fn(frame, out=out)
            if result is None or result is out:
                return out
        else:
            result = self.fn(frame)
        result = np.asarray(result)
        if result.shape != self.output_shape or result.dtype != self.output_dtype:
            raise ValueError(f"pipeline returned {result.dtype} {result.shape}, declared "
                             f"{self.output_dtype} {self.output_shape}")
        if out is None:
            return result
        np.copyto(out, result)
        return out


def as_pipeline(pipeline, input_shape=None, input_dtype=None, output_shape=None, output_dtype=None):
    """The pipeline as an object honouring the contract (explicit shapes must agree)."""
    explicit = dict(input_shape=input_shape, input_dtype=input_dtype, output_shape=output_shape,
                    output_dtype=output_dtype)
    if all(hasattr(pipeline, attr) for attr in _CONTRACT) and callable(pipeline):
        for name, value in explicit.items():
            if value is None:
                continue
            have = getattr(pipeline, name)
            same = (_shape(name, value) == _shape(name, have) if name.endswith("shape")
                    else np.dtype(value) == np.dtype(have))
            if not same:
                raise ValueError(f"{name}={value!r} contradicts the pipeline's {name} {have!r}")
        # validate what the pipeline declares
        _shape("pipeline.input_shape", pipeline.input_shape)
        _shape("pipeline.output_shape", pipeline.output_shape)
        _dtype("pipeline.input_dtype", pipeline.input_dtype)
        _dtype("pipeline.output_dtype", pipeline.output_dtype)
        return pipeline
    if not callable(pipeline):
        raise TypeError(f"pipeline must be callable (got {type(pipeline).__name__})")
    missing = [name for name, value in explicit.items() if value is None]
    if missing:
        raise TypeError(f"pipeline is a plain callable: give {', '.join(missing)} explicitly "
                        f"(or pass an object with {', '.join(_CONTRACT)})")
    return CallablePipeline(pipeline, input_shape, input_dtype, output_shape, output_dtype)


def describe(pipeline):
    """(input_shape, input_dtype, output_shape, output_dtype) of a contract object."""
    return (_shape("input_shape", pipeline.input_shape), np.dtype(pipeline.input_dtype),
            _shape("output_shape", pipeline.output_shape), np.dtype(pipeline.output_dtype))
