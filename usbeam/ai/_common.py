"""What the three AI hand-off modules share: host arrays viewed without a copy, the caller's
outputs, and the device side of a call.

Host side: any DLPack producer in host memory (a CPU torch tensor, a JAX array) is viewed as an
ndarray without a copy; outputs are new arrays or the caller's, refused when they share memory
with an input.

Device side, on top of :mod:`usbeam.device` (the one device-call layer): every device argument
is imported with :func:`usbeam.device.asarray` (DLPack or the CUDA array interface, no copy,
its producer's pending writes ordered before the consumer stream with an event), checked
(shape, dtype, writable, no aliasing between an output and another argument), and recorded
afterwards with the stream the work was queued on, so ``to_numpy()`` and later consumers wait
for it and its memory outlives the kernels.  A plan call runs through the plan's
:class:`usbeam.device.CudaExecution` (``plan.cuda``); see :func:`plan_call` for its streams.
"""
import contextlib
import numbers

import numpy as np

from .. import _core, _validate
from .. import device as _device
from ..device import KDLCUDA, KDLCUDAMANAGED, DeviceArray

# cudaStreamLegacy (0x1, driver_types.h), the array API's 1: where a device path without
# stream= queues (the documented default of usbeam.ai since its first release).
LEGACY_STREAM = 1


# ---------------------------------------------------------------- host side

def host_array(name, value):
    """A host argument as an ndarray without copying: NumPy, array-likes, or a host DLPack
    producer (``numpy.from_dlpack`` views its memory)."""
    if not isinstance(value, np.ndarray) and hasattr(value, "__dlpack__") and hasattr(value, "__dlpack_device__"):
        try:
            return np.from_dlpack(value)
        except (BufferError, TypeError, ValueError, RuntimeError) as exc:
            raise TypeError(f"{name}: cannot view this DLPack producer on the host ({exc})") from None
    return _validate.ndarray(name, value)


def contiguous(x):
    """x as a C-contiguous aligned array, keeping a 0-d shape (np.ascontiguousarray makes it (1,))."""
    return x if x.flags.c_contiguous and x.flags.aligned else np.array(x, order="C")


def check_out(name, out, shape, dtype, against=()):
    """A new output, or the caller's `out` checked, and refused when it shares memory with any
    (input name, array) of `against` (the input as given and as converted, other outputs)."""
    if out is None:
        return np.empty(shape, dtype)
    _validate.out_array(name, out, shape, dtype)
    for input_name, arr in against:
        _validate.no_overlap(name, out, input_name, arr)
    return out


# ---------------------------------------------------------------- device side

def is_device_array(obj):
    """True for an array in CUDA memory: a CUDA DeviceArray, a DLPack producer whose
    ``__dlpack_device__`` is a CUDA device, or anything with ``__cuda_array_interface__``."""
    if isinstance(obj, np.ndarray):
        return False
    if isinstance(obj, DeviceArray):
        return obj.device != "cpu"
    if hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__"):
        try:
            device_type = int(obj.__dlpack_device__()[0])
        except Exception:  # a producer that cannot say where it lives is not taken as a device array
            return False
        return device_type in (KDLCUDA, KDLCUDAMANAGED)
    return hasattr(obj, "__cuda_array_interface__")


def stream_handle(stream):
    """A ``stream=`` argument as a CUDA stream handle: an int, a CuPy stream (``.ptr``) or a
    PyTorch stream (``.cuda_stream``); None and 0 are the legacy default stream (1, the array
    API's name for it, as CUDA's cudaStreamLegacy)."""
    if stream is None:
        return LEGACY_STREAM
    for attribute in ("cuda_stream", "ptr"):
        if hasattr(stream, attribute):
            stream = getattr(stream, attribute)
            break
    if isinstance(stream, (bool, np.bool_)) or not isinstance(stream, numbers.Integral) or stream < 0:
        raise TypeError(f"stream must be a cudaStream_t as int, or a CuPy / PyTorch stream (got {stream!r})")
    return int(stream) or LEGACY_STREAM


def require_device(name, obj, where="on a CUDA plan"):
    """TypeError unless ``obj`` is in CUDA memory: a CUDA path copies nothing to the device."""
    if not is_device_array(obj):
        raise TypeError(f"{name} must be a device array (a DLPack producer on a CUDA device, or an object "
                        f"with __cuda_array_interface__) {where} (got {type(obj).__name__})")


def device_view(name, obj, stream):
    """A device argument as a usbeam DeviceArray viewing its memory (no copy; the import refuses
    a non-contiguous array), its producer's pending writes ordered before ``stream``."""
    require_device(name, obj)
    return _device.asarray(obj, stream=stream, name=name)


def device_argument(name, obj, stream, shape, dtype, writable=False):
    """:func:`device_view` of an argument whose dtype and shape the call fixes (and, for an
    output, that it may be written), checked."""
    return check_view(name, device_view(name, obj, stream), shape, dtype, writable)


def check_view(name, view, shape, dtype, writable=False):
    """``view`` once its dtype, shape and (for an output) writability are checked."""
    if view.dtype != np.dtype(dtype):
        raise TypeError(f"{name} must have dtype {np.dtype(dtype)} (got {view.dtype})")
    if tuple(view.shape) != tuple(shape):
        raise ValueError(f"{name} must have shape {tuple(shape)} (got {tuple(view.shape)})")
    if writable and view.readonly:
        raise ValueError(f"{name} is read-only")
    return view


def refuse_aliasing(arguments):
    """ValueError when an output shares memory with another argument: the kernels read their
    inputs while other threads write the outputs.  ``arguments``: (name, DeviceArray, written)
    in call order; the message names the output first."""
    for k, (name, view, written) in enumerate(arguments):
        for other, other_view, other_written in arguments[:k]:
            if not (written or other_written):
                continue
            if view.ptr < other_view.ptr + other_view.nbytes and other_view.ptr < view.ptr + view.nbytes:
                first, second = (name, other) if written else (other, name)
                raise ValueError(f"{first} must not share memory with {second}")


def mark_used(arrays, stream, owner=None):
    """Record that the work queued on ``stream`` uses ``arrays`` (later readers order after it,
    and the memory outlives it); ``owner``, the plan's CudaExecution, keeps its stream alive as
    long as the arrays name it."""
    for array in arrays:
        _device.mark_used(array, stream, owner)


def device_pointer(name, obj, shape, dtype, writable=False, stream=None):
    """Data pointer of a device argument checked as :func:`device_argument` does, its producer's
    pending writes ordered before ``stream`` (a ``stream=`` argument)."""
    return int(device_argument(name, obj, stream_handle(stream), shape, dtype, writable).ptr)


@contextlib.contextmanager
def plan_call(cuda, own_stream, lock, stream):
    """One call of a CUDA AI plan; yields the stream the binding returns the plan to (0: none).

    The call is queued on ``stream`` when given; without it on the stream set with
    ``plan.cuda.set_stream`` if any, else on the legacy default stream (as usbeam.ai always
    did).  When that is not the plan's stream the plan switches to it here, before the
    arguments are imported, so they are imported and recorded on the call's stream, and the
    binding switches it back once the work is queued (csrc/ai/ai_internal.h, ai_return_to: the
    plan's stream then waits for the call, so the plan keeps no reference to a stream its
    caller may drop).  To capture calls into a CUDA graph, the capturing stream must be the
    plan's stream before the capture begins (``plan.cuda.set_stream``): switching into it would
    make the capture wait on work outside it.  ``lock`` keeps the switch, the imports and the
    execute of one call together."""
    with lock:
        current = cuda.stream
        if stream is not None:
            target = stream_handle(stream)
        else:
            target = current if current != own_stream else LEGACY_STREAM
        back = 0
        if target != current:
            try:
                cuda.set_stream(target)  # target waits for the plan's earlier work: its scratch is shared
            except _core.UsbeamError as exc:
                if "Capture" not in str(exc):
                    raise
                raise _core.UsbeamError(f"stream {target} is being captured into a CUDA graph and this plan runs on "
                                        f"another one: a capture may not wait on work outside it, so give the "
                                        f"plan the capturing stream before the capture begins "
                                        f"(plan.cuda.set_stream), as usbeam.Pipeline does") from exc
            back = current
        try:
            yield back
        except BaseException:
            if back and cuda.stream == target:  # the binding did not switch back: it failed before
                try:
                    cuda.set_stream(back)
                except _core.UsbeamError:
                    pass  # the call's own error is the one to report
            raise
