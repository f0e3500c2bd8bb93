"""Python client of ``usbeam serve`` through ctypes on libusbeam_client.so.

The same library MATLAB loads with loadlibrary (``make client`` builds
build/libusbeam_client.so; set USBEAM_CLIENT_LIB to use another copy).  Frames are
NumPy arrays sent as their raw bytes (a Vantage RcvData frame: int16 (rows, channels),
column-major, i.e. ``np.asfortranarray``); results come back with dtype and shape.
"""
import ctypes
import json
import os
from pathlib import Path

import numpy as np

from .._core import UsbeamError
from .session import FrameDropped, FrameFailed

ROOT = Path(__file__).resolve().parent.parent.parent

OK, ERR_ARGUMENT, ERR_SYSTEM, ERR_LAYOUT, ERR_TIMEOUT, ERR_DROPPED, ERR_REJECTED, ERR_FAILED, ERR_EVICTED, \
    ERR_SERVER_GONE, ERR_TOO_LARGE, ERR_ABANDONED = range(12)

# usbeam_dtype codes (csrc/include/usbeam/core.h) -> NumPy
_DTYPES = {0: np.int16, 1: np.float32, 2: np.complex64, 3: np.uint8, 4: np.float16, 5: np.int32, 6: np.float64}


class ServerGone(UsbeamError):
    """No usbeam server serves the region any more."""


class FrameAbandoned(FrameDropped):
    """The frame's writer died mid-push or was still writing after the server's write
    timeout: the server gave the frame up (a FrameDropped, so overload handlers see it)."""


class _Result(ctypes.Structure):
    _fields_ = [("frame_id", ctypes.c_ulonglong), ("bytes", ctypes.c_ulonglong), ("status", ctypes.c_int),
                ("dtype", ctypes.c_int), ("ndim", ctypes.c_int), ("reserved", ctypes.c_int),
                ("shape", ctypes.c_ulonglong * 4), ("latency_s", ctypes.c_double), ("message", ctypes.c_char * 256)]


class _Info(ctypes.Structure):
    _fields_ = [("layout_version", ctypes.c_uint), ("n_slots", ctypes.c_uint), ("n_results", ctypes.c_uint),
                ("policy", ctypes.c_uint), ("slot_capacity", ctypes.c_ulonglong),
                ("result_capacity", ctypes.c_ulonglong), ("server_pid", ctypes.c_int),
                ("server_running", ctypes.c_int)] + [
        (name, ctypes.c_ulonglong) for name in ("pushed", "dropped", "rejected", "abandoned", "processed", "failed",
                                                "stalled", "discarded")]


def find_client_library():
    """Path of libusbeam_client.so: $USBEAM_CLIENT_LIB, else build/ of the source tree."""
    for candidate in (os.environ.get("USBEAM_CLIENT_LIB"), ROOT / "build" / "libusbeam_client.so",
                      Path(__file__).resolve().parent.parent / "libusbeam_client.so"):
        if candidate and Path(candidate).exists():
            return Path(candidate)
    raise FileNotFoundError("libusbeam_client.so not found: run `make client` in the usbeam source tree "
                            "or set USBEAM_CLIENT_LIB")


_LIB = None


def load_library(path=None):
    global _LIB
    if _LIB is not None and path is None:
        return _LIB
    lib = ctypes.CDLL(str(path or find_client_library()))
    vp, ull, pull = ctypes.c_void_p, ctypes.c_ulonglong, ctypes.POINTER(ctypes.c_ulonglong)
    sig = {
        "usbeam_client_open": (vp, [ctypes.c_char_p, ctypes.c_int]),
        "usbeam_client_close": (ctypes.c_int, [vp]),
        "usbeam_client_last_error": (ctypes.c_char_p, []),
        "usbeam_client_info_get": (ctypes.c_int, [vp, ctypes.POINTER(_Info)]),
        "usbeam_client_set_params": (ctypes.c_int, [vp, ctypes.c_char_p]),
        "usbeam_client_push": (ctypes.c_int, [vp, vp, ull, ctypes.c_int, pull]),
        "usbeam_client_push_begin": (ctypes.c_int, [vp, ctypes.c_int, ctypes.POINTER(vp), pull, pull]),
        "usbeam_client_push_commit": (ctypes.c_int, [vp, ull, ull]),
        "usbeam_client_push_abort": (ctypes.c_int, [vp, ull]),
        "usbeam_client_get_result": (ctypes.c_int, [vp, ull, vp, ull, ctypes.c_int, ctypes.POINTER(_Result)]),
        "usbeam_client_latest": (ctypes.c_int, [vp, ull, vp, ull, ctypes.c_int, ctypes.POINTER(_Result)]),
    }
    for name, (restype, argtypes) in sig.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, argtypes
    if path is None:
        _LIB = lib
    return lib


def _timeout_ms(timeout):
    return -1 if timeout is None else max(0, int(round(float(timeout) * 1000)))


class ShmClient:
    """Attach to a ``usbeam serve`` region: set_params, push, get, latest, info.

    One ShmClient is for one thread at a time (the C handle is not shared).
    """

    def __init__(self, name="/usbeam", timeout=5.0, library=None):
        self._lib = load_library(library)
        self.name = name
        self._handle = self._lib.usbeam_client_open(name.encode(), _timeout_ms(timeout))
        if not self._handle:
            raise self._error(ERR_SYSTEM, "open")
        info = self.info()
        self.result_capacity = info["result_capacity"]
        self._buffer = np.empty(self.result_capacity, np.uint8)

    def _error(self, status, what):
        message = f"{what}: {self._lib.usbeam_client_last_error().decode(errors='replace')}"
        if status == ERR_TIMEOUT:
            return TimeoutError(message)
        if status == ERR_ABANDONED:
            return FrameAbandoned(message)
        if status == ERR_DROPPED:
            return FrameDropped(message)
        if status in (ERR_FAILED,):
            return FrameFailed(message)
        if status == ERR_REJECTED or status == ERR_TOO_LARGE or status == ERR_ARGUMENT:
            return ValueError(message)
        if status == ERR_EVICTED:
            return KeyError(message)
        if status == ERR_SERVER_GONE:
            return ServerGone(message)
        return UsbeamError(message)

    def _check(self, status, what):
        if status != OK:
            raise self._error(status, what)

    def close(self):
        if self._handle:
            self._lib.usbeam_client_close(self._handle)
            self._handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def info(self):
        info = _Info()
        self._check(self._lib.usbeam_client_info_get(self._handle, ctypes.byref(info)), "info")
        return {name: getattr(info, name) for name, _ in _Info._fields_}

    def set_params(self, params):
        """Publish parameters (a dict, sent as JSON, or JSON text)."""
        text = params if isinstance(params, str) else json.dumps(params)
        self._check(self._lib.usbeam_client_set_params(self._handle, text.encode()), "set_params")

    def push(self, frame, timeout=1.0):
        """Send the frame's bytes in its memory order (C or Fortran contiguous); returns its id."""
        frame = np.asarray(frame)
        if not (frame.flags.c_contiguous or frame.flags.f_contiguous):
            raise ValueError("frame must be contiguous (C or Fortran order)")
        frame_id = ctypes.c_ulonglong(0)
        status = self._lib.usbeam_client_push(self._handle, frame.ctypes.data, frame.nbytes, _timeout_ms(timeout),
                                              ctypes.byref(frame_id))
        self._check(status, "push")
        return frame_id.value

    def _image(self, result):
        dtype = np.dtype(_DTYPES[result.dtype])
        shape = tuple(int(result.shape[d]) for d in range(result.ndim))
        image = self._buffer[:result.bytes].view(dtype).reshape(shape).copy()
        return image

    def get(self, frame_id, timeout=1.0):
        """(image, info) of frame_id; raises FrameDropped (FrameAbandoned when its writer
        died or stalled), ValueError (rejected), FrameFailed, TimeoutError, KeyError
        (evicted) or ServerGone."""
        result = _Result()
        status = self._lib.usbeam_client_get_result(self._handle, frame_id, self._buffer.ctypes.data,
                                                    self._buffer.nbytes, _timeout_ms(timeout), ctypes.byref(result))
        self._check(status, "get")
        return self._image(result), {"frame_id": result.frame_id, "latency_s": result.latency_s}

    def latest(self, after_id=0, timeout=0.0):
        result = _Result()
        status = self._lib.usbeam_client_latest(self._handle, after_id, self._buffer.ctypes.data, self._buffer.nbytes,
                                                _timeout_ms(timeout), ctypes.byref(result))
        self._check(status, "latest")
        return self._image(result), {"frame_id": result.frame_id, "latency_s": result.latency_s}
