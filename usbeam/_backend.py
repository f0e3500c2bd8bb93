"""What this build and this machine offer: backends, CUDA devices, build flags."""
from . import _core


def build_info():
    """Build configuration: {'cuda': bool (compiled in), 'cuda_emulated': bool (the CUDA backend
    runs on the CPU emulator of tests/cuda_emu, a test build), 'cuda_error': None, or why the
    CUDA driver's device query failed (a driver that does not initialise, a device in a bad
    state; no GPU or no driver at all is not an error), 'openmp', 'cpu_threads', 'version'}."""
    info = dict(_core.build_info())
    info["cuda"] = bool(info["cuda"])
    info["cuda_emulated"] = bool(info["cuda_emulated"])
    return info


def cuda_devices():
    """Properties of every usable CUDA device (an empty list without CUDA, a GPU or a driver);
    raises UsbeamError naming the driver's error when the device query fails otherwise."""
    return [_core.cuda_device_info(i) for i in range(_core.cuda_device_count())]


def cuda_available():
    """True when this build has the CUDA backend and the running machine has a usable GPU
    (False when the driver's query fails: build_info()['cuda_error'] says why)."""
    if not _core.build_info()["cuda"]:
        return False
    try:
        return _core.cuda_device_count() > 0
    except _core.UsbeamError:
        return False


def no_cuda_reason():
    """Why the CUDA backend cannot run here, in words (for error messages)."""
    info = _core.build_info()
    if not info["cuda"]:
        return "usbeam was built without CUDA"
    if info["cuda_error"]:
        return info["cuda_error"]
    return "no CUDA device is visible"


def backends():
    """Backends usable on this machine, in order of preference for the caller: ['cpu'] or ['cpu', 'cuda']."""
    return ["cpu", "cuda"] if cuda_available() else ["cpu"]


def check_backend(backend):
    """Validate a backend name against what this machine offers; returns it."""
    if backend not in ("cpu", "cuda"):
        raise ValueError(f"backend must be 'cpu' or 'cuda' (got {backend!r})")
    if backend == "cuda" and not cuda_available():
        raise _core.UsbeamError(f"backend='cuda' needs a CUDA device: {no_cuda_reason()}")
    return backend
