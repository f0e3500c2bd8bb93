"""What this build and this machine offer: backends, CUDA devices, build flags."""
from . import _core


def build_info():
    """Build configuration: {'cuda': bool (compiled in), 'cuda_emulated': bool (the CUDA backend
    runs on the CPU emulator of tests/cuda_emu, a test build), 'openmp', 'cpu_threads', 'version'}."""
    info = dict(_core.build_info())
    info["cuda"] = bool(info["cuda"])
    info["cuda_emulated"] = bool(info["cuda_emulated"])
    return info


def cuda_devices():
    """Properties of every usable CUDA device (an empty list without CUDA or a GPU)."""
    return [_core.cuda_device_info(i) for i in range(_core.cuda_device_count())]


def cuda_available():
    """True when this build has the CUDA backend and the running machine has a usable GPU."""
    return bool(_core.build_info()["cuda"]) and _core.cuda_device_count() > 0


def backends():
    """Backends usable on this machine, in order of preference for the caller: ['cpu'] or ['cpu', 'cuda']."""
    return ["cpu", "cuda"] if cuda_available() else ["cpu"]


def check_backend(backend):
    """Validate a backend name against what this machine offers; returns it."""
    if backend not in ("cpu", "cuda"):
        raise ValueError(f"backend must be 'cpu' or 'cuda' (got {backend!r})")
    if backend == "cuda" and not cuda_available():
        reason = ("usbeam was built without CUDA" if not _core.build_info()["cuda"]
                  else "no CUDA device is visible")
        raise _core.UsbeamError(f"backend='cuda' needs a CUDA device: {reason}")
    return backend
