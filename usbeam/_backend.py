"""What this build and this machine offer: backends, CUDA devices, build flags; and the loading
of the optional CUDA backend.

usbeam._core (the C library, CPU backend) never links a CUDA library.  The CUDA backend is the
extension module usbeam._cuda, loaded on first use (a plan with backend="cuda", a device array,
cuda_available()): its cuBLAS is found first among the libraries already in the process (one
copy with PyTorch or CuPy), then in the CUDA toolkit (CUDA_HOME, CUDA_PATH, nvcc's, or
/usr/local/cuda), then in the NVIDIA wheels (pip install usbeam[cuda]), then on the system's
library path.  If it cannot be loaded, everything on the CPU works as before and
build_info()["cuda_error"] says why in one line.
"""
import ctypes
import importlib.util
import os
import shutil
import sys
import threading
from pathlib import Path

from . import _core

_load_lock = threading.Lock()
_load_state = None  # None: not tried; "" loaded; else the reason it is absent


def _toolkit_library_dirs():
    homes = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")]
    nvcc = shutil.which("nvcc")
    if nvcc:
        homes.append(str(Path(nvcc).resolve().parent.parent))
    homes.append("/usr/local/cuda")
    dirs = []
    for home in filter(None, homes):
        for sub in ("lib64", "lib", "targets/x86_64-linux/lib", "targets/sbsa-linux/lib"):
            d = Path(home, sub)
            if d.is_dir() and d not in dirs:
                dirs.append(d)
    return dirs


def _wheel_library_dirs(major):
    """Where the NVIDIA wheels put cuBLAS: nvidia/cu13/lib (CUDA 13), nvidia/cublas/lib (CUDA 12)."""
    subdirs = [Path("nvidia", f"cu{major}", "lib"), Path("nvidia", "cublas", "lib"), Path("nvidia", "cusparse", "lib"),
               Path("nvidia", "nvjitlink", "lib")]
    dirs = []
    for entry in sys.path:
        for sub in subdirs:
            d = Path(entry or ".", sub)
            if d.is_dir() and d not in dirs:
                dirs.append(d)
    return dirs


def _preload(soname, major):
    """Load soname with RTLD_GLOBAL so that usbeam._cuda's dependency on it resolves to this
    copy; returns where it came from, or raises OSError with every place tried."""
    try:  # already in the process (PyTorch, CuPy): share that copy rather than load a second
        ctypes.CDLL(soname, mode=os.RTLD_NOLOAD | ctypes.RTLD_GLOBAL)
        return "already loaded"
    except OSError:
        pass
    tried = []
    for d in _toolkit_library_dirs() + _wheel_library_dirs(major):
        path = d / soname
        if path.exists():
            try:
                ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
                return str(path)
            except OSError as exc:
                tried.append(f"{path} ({exc})")
    try:  # LD_LIBRARY_PATH, ld.so.conf
        ctypes.CDLL(soname, mode=ctypes.RTLD_GLOBAL)
        return "the system library path"
    except OSError:
        tried.append("the system library path")
    raise OSError(f"{soname} not found (looked in the CUDA toolkit, the NVIDIA wheels and "
                  f"{', '.join(tried)}): install the CUDA {major} toolkit or `pip install usbeam[cuda]`")


def load_cuda():
    """Load the CUDA backend once; returns None when loaded, else the one-line reason it is not
    (also given by build_info()["cuda_error"] and by every CUDA entry point)."""
    global _load_state
    if _load_state is not None:
        return _load_state or None
    with _load_lock:
        if _load_state is None:
            _load_state = _try_load()
            if _load_state:
                _core._set_cuda_unavailable(_load_state)
    return _load_state or None


def _try_load():
    if importlib.util.find_spec(f"{__package__}._cuda") is None:
        return "usbeam was built without CUDA (no nvcc at build time; usbeam._cuda is absent)"
    try:
        from . import _cuda_build
    except ImportError:
        return "usbeam._cuda is present but usbeam/_cuda_build.py is missing: rebuild usbeam"
    try:
        for soname in _cuda_build.LIBRARIES:
            _preload(soname, _cuda_build.CUDA_MAJOR)
        from . import _cuda
        _core._install_cuda(_cuda.api)
    except (OSError, ImportError, _core.UsbeamError) as exc:
        return f"the CUDA backend could not be loaded: {' '.join(str(exc).split())}"
    return ""


def cuda_loaded():
    """True when the CUDA backend's module is loaded (it may still see no GPU)."""
    return load_cuda() is None


def build_info():
    """Build configuration: {'cuda': bool (the CUDA backend is built and loaded here),
    'cuda_module': bool (usbeam._cuda is installed), 'cuda_emulated': bool (it runs on the CPU
    emulator of cuda/emu, a test build), 'cuda_runtime_version' (CUDART_VERSION it was
    compiled with, e.g. 13000), 'cuda_architectures', 'cuda_error': None, or one line saying why
    the backend cannot run (not built, a library missing, the driver's device query failing; no
    GPU or no driver at all is not an error), 'openmp', 'cpu_threads', 'version'}."""
    reason = load_cuda()
    info = dict(_core.build_info())
    info["cuda"] = bool(info["cuda"])
    info["cuda_emulated"] = bool(info["cuda_emulated"])
    info["cuda_module"] = importlib.util.find_spec(f"{__package__}._cuda") is not None
    if reason:
        info["cuda_error"] = reason
    return info


def release_memory():
    """Give back to the system the large blocks that CPU plans destroyed earlier left for the
    next plan (receive tables, staging buffers: up to 256 MiB in all, kept so that a plan
    rebuilt after another was let go, as a live session does on every geometry change, does not
    fault its pages in again, ~0.1-0.2 ms per 2 MiB).  Returns the bytes released; the memory
    plans in use hold is not touched."""
    return _core.release_cached_memory()


def cuda_devices():
    """Properties of every usable CUDA device (an empty list without CUDA, a GPU or a driver);
    raises UsbeamError naming the driver's error when the device query fails otherwise."""
    if load_cuda():
        return []
    return [_core.cuda_device_info(i) for i in range(_core.cuda_device_count())]


def cuda_available():
    """True when the CUDA backend is built, loads here, and the machine has a usable GPU
    (False otherwise: build_info()['cuda_error'] says why when it is not simply 'no GPU')."""
    if load_cuda():
        return False
    try:
        return _core.cuda_device_count() > 0
    except _core.UsbeamError:
        return False


def no_cuda_reason():
    """Why the CUDA backend cannot run here, in words (for error messages)."""
    reason = load_cuda()
    if reason:
        return reason
    info = _core.build_info()
    if info["cuda_error"]:
        return info["cuda_error"]
    return "no CUDA device is visible"


def backends():
    """Backends usable on this machine, in order of preference for the caller: ['cpu'] or ['cpu', 'cuda']."""
    return ["cpu", "cuda"] if cuda_available() else ["cpu"]


def check_backend(backend):
    """Validate a backend name against what this machine offers; returns it."""
    if isinstance(backend, str) and backend.lower() in ("cpu", "cuda"):
        backend = backend.lower()  # string options are case-insensitive (README, "Conventions")
    if backend not in ("cpu", "cuda"):
        raise ValueError(f"backend must be 'cpu' or 'cuda' (got {backend!r})")
    if backend == "cuda" and not cuda_available():
        raise _core.UsbeamError(f"backend='cuda' needs a CUDA device: {no_cuda_reason()}")
    return backend
