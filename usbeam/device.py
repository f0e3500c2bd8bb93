"""Device arrays, zero-copy exchange and the CUDA side of plans (C: csrc/python/device/py_dlpack.c).

:class:`DeviceArray` is a C-contiguous array in CUDA device memory (or in host memory, which
is what makes the exchange testable without a GPU).  It speaks both exchange protocols:

- **DLPack** (``__dlpack__`` / ``__dlpack_device__``, DLPack 1.x with a versioned capsule
  when the consumer asks for ``max_version >= (1, 0)``, the legacy capsule otherwise), so
  ``torch.from_dlpack(a)``, ``cupy.from_dlpack(a)``, ``jax.dlpack.from_dlpack(a)`` and, for host
  arrays, ``numpy.from_dlpack(a)`` view its memory without a copy;
- the **CUDA array interface** v3 (``__cuda_array_interface__``, CUDA arrays only), for Numba
  and older CuPy.

:func:`asarray` goes the other way: anything with ``__dlpack__`` or
``__cuda_array_interface__`` becomes a DeviceArray viewing the producer's memory.

Streams follow the array API standard: a consumer passes its stream to ``__dlpack__``; the
producer makes that stream wait (an event, no host wait) for its pending writes.  Integers
are CUDA stream handles, 1 is the legacy default stream, 2 the per-thread default stream.

Host <-> device copies are explicit (:func:`from_numpy`, :meth:`DeviceArray.to_numpy`) and go
through pinned staging buffers.  A plan created with ``backend='cuda'`` accepts device arrays
and returns a DeviceArray; given NumPy arrays it copies them in and the result out, unless it
was created with ``strict=True``, which refuses every implicit host copy with a TypeError.

For usbeam's own modules (not in ``__all__``): :class:`PlanRunner`, the CUDA half of a plan's
call, and the functions every CUDA call path moves data with: :func:`in_host_memory`,
:func:`host_refused`, :func:`ingest` (a plan's input, imported or copied in),
:func:`output_buffer` (a plan's output) and :func:`mark_used` (queued work uses an array).
"""
import numpy as np

from . import _backend, _core, _validate
from ._core import DeviceArray

KDLCPU = 1
KDLCUDA = 2
KDLCUDAMANAGED = 13

SUPPORTED_DTYPES = tuple(np.dtype(t) for t in
                         ("int16", "float32", "complex64", "uint8", "float16", "int32", "float64", "bool"))

__all__ = ["DeviceArray", "CudaExecution", "asarray", "empty", "from_numpy", "to_numpy"]


def _parse_device(device):
    """'cpu', 'cuda', 'cuda:N' or a DLPack (device_type, device_id) tuple -> the tuple."""
    if isinstance(device, tuple) and len(device) == 2:
        return int(device[0]), int(device[1])
    if device == "cpu":
        return KDLCPU, 0
    if isinstance(device, str) and (device == "cuda" or device.startswith("cuda:")):
        index = device[5:] or "0"
        if not index.isdigit():
            raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:N' (got {device!r})")
        return KDLCUDA, int(index)
    raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:N' (got {device!r})")


def _require_cuda(what):
    if not _backend.cuda_available():
        raise _core.UsbeamError(f"{what} needs a CUDA device: {_backend.no_cuda_reason()}")


def _check_dtype(name, dtype):
    dtype = np.dtype(dtype)
    if dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"{name}: dtype {dtype} is not supported; usbeam takes "
                        f"{', '.join(str(d) for d in SUPPORTED_DTYPES)}")
    return dtype


def empty(shape, dtype, *, device="cuda", stream=None, _owner=None):
    """An uninitialised DeviceArray of ``shape`` and ``dtype`` on ``device``.

    CUDA memory comes from CUDA's stream-ordered allocator, and is freed in stream order after
    the last work queued on it, so neither allocating nor dropping an array waits for the
    device.  ``stream`` (a CUDA stream handle, 1 or 2; CUDA only): allocate in that stream's
    order, with no host wait at all; the array names the stream as pending, so other streams
    order after it (``asarray(a, stream=...)``, ``__dlpack__``), and the caller keeps the
    stream alive as long as the array.  None: any stream may use the array at once.
    """
    device_type, device_id = _parse_device(device)
    if device_type == KDLCUDA:
        _require_cuda("empty(device='cuda')")
    elif stream is not None:
        raise ValueError("stream: a host DeviceArray has no stream")
    shape = _validate.shape("shape", shape)  # 3.5 is refused, not truncated to 3
    return _core.device_empty(shape, _check_dtype("dtype", dtype), device_type, device_id, stream, _owner)


def from_numpy(array, *, device="cuda"):
    """Explicit host -> device copy of a NumPy array (through pinned staging buffers).

    ``device='cpu'`` makes a host DeviceArray (a copy in usbeam-owned, 256-byte aligned memory).
    """
    array = np.asarray(array)
    _check_dtype("array", array.dtype)
    if not (array.flags.c_contiguous and array.dtype.isnative):
        array = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("="))
    # allocated in the order of the legacy default stream, where the copy runs: no wait for
    # the allocation, and the copy (complete on return) completes it for every stream
    cuda = _parse_device(device)[0] == KDLCUDA
    out = empty(array.shape, array.dtype, device=device, stream=1 if cuda else None)
    out.copy_from_host(array)
    return out


def to_numpy(array, *, out=None):
    """Explicit device -> host copy of any DLPack / CUDA-array-interface object."""
    return asarray(array).to_numpy(out=out)


def asarray(obj, *, stream=None, name="array"):
    """A DeviceArray viewing ``obj``'s memory, without copying.

    ``obj`` is a DeviceArray, or any object with ``__dlpack__`` (DLPack 1.x or legacy) or
    ``__cuda_array_interface__``.  ``stream`` is the consumer's CUDA stream (array API
    convention: None or 1 = legacy default stream, 2 = per-thread default stream, otherwise a
    handle; -1 = no synchronisation): the producer's pending writes are ordered before it.
    Raises TypeError for an unsupported dtype or device, ValueError for a non-contiguous array.
    """
    if isinstance(obj, DeviceArray):
        if obj.device != "cpu" and obj.stream is not None and stream != -1:
            _core.stream_wait(stream, obj.stream)
        return obj
    if hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__"):
        _backend.load_cuda()  # a CUDA producer needs the backend; a host one does not mind
        return _core.device_from_dlpack(obj, stream, name)
    if hasattr(obj, "__cuda_array_interface__"):
        return _from_cuda_array_interface(obj, stream, name)
    raise TypeError(f"{name} must support DLPack (__dlpack__) or the CUDA array interface "
                    f"(got {type(obj).__name__})")


def _from_cuda_array_interface(obj, stream, name):
    reason = _backend.load_cuda()
    if reason:
        raise TypeError(f"{name} is in CUDA memory but {reason}")
    cai = obj.__cuda_array_interface__
    shape = tuple(int(s) for s in cai["shape"])
    dtype = np.dtype(cai["typestr"])
    if not dtype.isnative:
        raise TypeError(f"{name}: byte order of {cai['typestr']!r} is not native")
    _check_dtype(name, dtype)
    if cai.get("mask") is not None:
        raise ValueError(f"{name}: masked arrays are not supported")
    ptr, readonly = cai["data"]
    # The kernels load whole elements (complex64 as one 8-byte float2): a pointer off that
    # alignment is a misaligned-address fault on a GPU, which kills the process's CUDA context
    # (DLPack imports get the same check in C).
    if ptr and 0 not in shape and int(ptr) % dtype.itemsize:
        raise ValueError(f"{name}: the data pointer 0x{int(ptr):x} is not aligned to its {dtype.itemsize}-byte "
                         f"{dtype} elements")
    strides = cai.get("strides")
    if strides is not None and 0 not in shape:
        expected = dtype.itemsize
        for axis in range(len(shape) - 1, -1, -1):
            if shape[axis] != 1 and strides[axis] != expected:
                raise ValueError(f"{name} must be C-contiguous: axis {axis} has a stride of {strides[axis]} "
                                 f"bytes, a compact array has {expected}")
            expected *= shape[axis]
    producer = cai.get("stream") if cai.get("version", 0) >= 3 else None
    if producer is not None:
        if producer == 0:
            raise ValueError(f"{name}: __cuda_array_interface__ stream 0 is disallowed by the interface")
        if stream != -1:
            _core.stream_wait(stream, producer)
    return _core.device_wrap(int(ptr), shape, dtype, bool(readonly), obj, name)


class CudaExecution:
    """The CUDA state of a plan created with ``backend='cuda'``: device, stream, stage times."""

    def __init__(self, capsule):
        self._capsule = capsule

    @property
    def stream(self):
        """Handle of the CUDA stream the plan queues its work on (its own unless set)."""
        return _core.cuda_exec_info(self._capsule)["stream"]

    @property
    def device(self):
        return _core.cuda_exec_info(self._capsule)["device"]

    @property
    def device_bytes(self):
        """Device memory the plan allocated at creation, bytes."""
        return _core.cuda_exec_info(self._capsule)["device_bytes"]

    def set_stream(self, stream):
        """Queue later executes on the caller's ``stream`` (a handle, 1 or 2); None: the plan's own."""
        _core.cuda_exec_set_stream(self._capsule, stream)

    def stage_times(self):
        """{stage name: seconds} of the last execute, from CUDA events (waits for it to finish)."""
        return _core.cuda_exec_timings(self._capsule)

    def synchronize(self):
        """Wait for the plan's queued work; raises ValueError if it read non-finite input
        (see :meth:`check_input`).  Inputs and outputs released while that work was queued
        (e.g. a PyTorch or CuPy array passed in) are let go here at the latest."""
        _core.stream_synchronize(self.stream)
        self.check_input()

    def idle(self):
        """True when the plan's queued work has finished (cudaStreamQuery; no host wait)."""
        return _core.stream_query(self.stream)

    input_name = "data"  # named by the errors of check_input; PlanRunner sets it per call
    # set by a chain that owns the plan (usbeam.Pipeline): a callable(execution, earlier) that
    # takes the faults of every stage and reports them as the chain's input, so that one bad
    # input gives one report, whichever stage's check meets it first
    fault_report = None

    def take_input_faults(self):
        """Read and clear the plan's fault word: True if its finished executes read NaN or
        infinite input since the last take or check (no CUDA call, no wait, never raises)."""
        return bool(_core.cuda_exec_take_input_faults(self._capsule))

    def check_input(self, name=None, *, earlier=False):
        """Raise ValueError if the plan's finished executes read NaN or infinite input since the
        last check (the kernels flag it in mapped host memory: no CUDA call, no wait here).

        The CPU backend refuses such data before it runs; a CUDA plan runs asynchronously, so it
        reports it at the next point the host meets the result: a host copy of the output, this
        ``synchronize()``, or the plan's next call (``earlier=True``, which names the earlier call).
        Only the beamformers (das, rca), B-mode and the Doppler display flag their input; for
        others this never raises.  A plan owned by a usbeam.Pipeline reports through it
        (``fault_report``): every stage's flag is cleared and the error names the pipeline's rf."""
        if self.fault_report is not None:
            self.fault_report(self, earlier)
        elif self.take_input_faults():
            raise non_finite_error(name or self.input_name, earlier)


def non_finite_error(name, earlier=False):
    """The ValueError of a CUDA plan (or chain) whose kernels read NaN or infinite ``name``."""
    when = "an earlier call's " if earlier else ""
    return ValueError(f"{when}{name} contains NaN or infinite values: the CUDA plan read non-finite "
                      f"samples (the outputs that used them are NaN or inf)")


# ---- the internal API of usbeam's CUDA call paths -----------------------------------------
# The plans, the pipelines and the live sessions move data with these, never with the
# array's private methods: the one place that says what "on the host", "refused" and "used
# by queued work" mean.  Not in __all__: for usbeam's own modules, not a user contract.

def in_host_memory(obj):
    """True when ``obj`` is host data (NumPy, a host DeviceArray or DLPack producer, anything
    NumPy would make an array of), False for CUDA (or CUDA managed) memory."""
    if isinstance(obj, DeviceArray):
        return obj.device == "cpu"
    if isinstance(obj, np.ndarray):
        return True
    if hasattr(obj, "__cuda_array_interface__"):
        return False
    if hasattr(obj, "__dlpack_device__"):
        return obj.__dlpack_device__()[0] not in (KDLCUDA, KDLCUDAMANAGED)
    return True  # lists, scalars: NumPy makes them host arrays


def host_refused(name):
    """The TypeError of a strict CUDA plan (or chain) given host data named ``name``."""
    return TypeError(f"{name} is in host memory and this plan was created with strict=True, which refuses "
                     f"implicit host <-> device copies; copy it explicitly with usbeam.device.from_numpy() "
                     f"(and pass a DeviceArray or any CUDA DLPack array)")


def mark_used(array, stream, owner=None):
    """Record that work queued on ``stream`` uses ``array`` (a DeviceArray): later readers and
    writers on other streams order after it (an event, no host wait), and its memory is not
    freed before that work finishes.  ``owner`` (the plan or chain that owns ``stream``) is
    kept alive as long as the array names the stream.  A no-op for host DeviceArrays."""
    array._mark_used(stream, owner)


def ingest(x, name, *, stream, device, dtype, shape, strict, host_prepare):
    """A plan's input as a DeviceArray on ``device`` ('cuda:N'), and whether it came from the host.

    Device data is viewed without a copy, ordered after its producer on ``stream``, and must
    already have ``dtype`` and ``shape`` (a CUDA plan converts no device data).  Host data is
    refused when ``strict``; otherwise ``host_prepare(x)`` checks and converts it as the CPU
    backend would, and the result is copied to the device."""
    if in_host_memory(x):
        if strict:
            raise host_refused(name)
        if not isinstance(x, np.ndarray) and hasattr(x, "__dlpack__"):
            x = np.from_dlpack(x)
        return from_numpy(host_prepare(x), device=device), True
    d = asarray(x, stream=stream, name=name)
    if d.dtype != np.dtype(dtype):
        raise TypeError(f"{name} must have dtype {np.dtype(dtype)} (got {d.dtype}); a CUDA plan converts no "
                        f"device data")
    if d.shape != tuple(shape):
        raise ValueError(f"{name} must have shape {tuple(shape)} (got {d.shape})")
    return d, False


def output_buffer(out, name, *, stream, device, dtype, shape, strict):
    """Where a plan writes its output ``name``, and the host array to copy it to afterwards.

    ``out`` None: a new DeviceArray.  A host array (refused when ``strict``): checked as on the
    CPU, the plan writes a new DeviceArray and the caller copies it into ``out`` (returned as
    the second item, else None).  Device memory: viewed without a copy, ordered after its
    producer on ``stream``; it must have ``dtype`` and ``shape`` and be writable."""
    if out is None:
        return empty(shape, dtype, device=device), None
    if in_host_memory(out):
        if strict:
            raise host_refused(name)
        return empty(shape, dtype, device=device), _validate.out_array(name, out, shape, dtype)
    d = asarray(out, stream=stream, name=name)
    if d.dtype != np.dtype(dtype):
        raise TypeError(f"{name} must have dtype {np.dtype(dtype)} (got {d.dtype})")
    if d.shape != tuple(shape):
        raise ValueError(f"{name} must have shape {tuple(shape)} (got {d.shape})")
    if d.readonly:
        raise ValueError(f"{name} is read-only")
    return d, None


class PlanRunner:
    """The CUDA half of a plan's ``__call__``: imports the input without a copy (or copies
    a host input in, unless strict), provides the output, queues the plan and records the
    stream on both arrays (their memory outlives the queued kernels).

    Nothing here waits for the device unless a host result is asked for: a temporary view of
    a foreign array (DLPack, CUDA array interface) keeps its producer alive after it is dropped
    until the queued kernels finish (usbeam checks at later calls, ``synchronize()`` and exit),
    and usbeam's own buffers are freed in stream order (cudaFreeAsync)."""

    def __init__(self, exec_capsule, strict):
        self.execution = CudaExecution(exec_capsule)
        self.strict = bool(strict)

    def __call__(self, execute, name, x, shape, dtype, host_prepare, out, out_shape, out_dtype,
                 no_overlap=False):
        """Run the plan; input faults (NaN / inf the kernels read, see CudaExecution.check_input)
        of finished earlier calls raise first, and those of this call once a host result is
        copied out (the copy waited for the kernels)."""
        self.execution.check_input(earlier=True)
        self.execution.input_name = name
        result = self._run(execute, name, x, shape, dtype, host_prepare, out, out_shape, out_dtype, no_overlap)
        if isinstance(result, np.ndarray):
            self.execution.check_input(name)
        return result

    def _run(self, execute, name, x, shape, dtype, host_prepare, out, out_shape, out_dtype, no_overlap):
        stream = self.execution.stream
        device_name = f"cuda:{self.execution.device}"
        d_in, host_input = ingest(x, name, stream=stream, device=device_name, dtype=dtype, shape=shape,
                                  strict=self.strict, host_prepare=host_prepare)
        host_out = None
        if out is None or in_host_memory(out):
            if out is not None:
                if self.strict:
                    raise host_refused("out")
                _validate.out_array("out", out, out_shape, out_dtype)
                host_out = out
            # allocated in the plan's stream order: no host wait, and freed the same way after
            # the kernels that use it (the plan, which owns the stream, lives as long)
            d_out = empty(out_shape, out_dtype, device=device_name, stream=stream, _owner=self.execution)
        else:
            d_out = asarray(out, stream=stream, name="out")
            if d_out.dtype != np.dtype(out_dtype) or d_out.shape != tuple(out_shape):
                raise (TypeError if d_out.dtype != np.dtype(out_dtype) else ValueError)(
                    f"out must have dtype {np.dtype(out_dtype)} and shape {tuple(out_shape)} "
                    f"(got {d_out.dtype}, {d_out.shape})")
            if d_out.readonly:
                raise ValueError("out is read-only")
        if no_overlap and d_in.ptr < d_out.ptr + d_out.nbytes and d_out.ptr < d_in.ptr + d_in.nbytes:
            raise ValueError(f"out must not share memory with {name}")
        execute(d_in, d_out)
        # the arrays name the plan's stream; the plan (which owns it) lives as long as they do
        mark_used(d_in, stream, self.execution)
        mark_used(d_out, stream, self.execution)
        if host_input and out is None:
            return d_out.to_numpy()
        if host_out is not None:
            return d_out.to_numpy(out=host_out)
        return d_out if out is None else out
