"""DLPack 1.1 structs transcribed with ctypes, independently of csrc/python/device/dlpack.h, and
foreign producers built on them (byte offsets, strides, other versions and devices that NumPy
cannot make): shared by the DLPack tests of the device layer (tests/device/test_dlpack.py) and
of the AI hand-off (tests/ai/test_ai_dlpack.py).  Spec: DLPack 1.1, dlpack.h."""
import ctypes

import numpy as np

c_int64_p = ctypes.POINTER(ctypes.c_int64)


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", c_int64_p), ("strides", c_int64_p),
                ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    pass


LEGACY_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                            ("deleter", LEGACY_DELETER)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    pass


VERSIONED_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensorVersioned))
DLManagedTensorVersioned._fields_ = [("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p),
                                     ("deleter", VERSIONED_DELETER), ("flags", ctypes.c_uint64),
                                     ("dl_tensor", DLTensor)]

READ_ONLY, IS_COPIED = 1, 2
KDLCPU, KDLCUDA, KDLOPENCL = 1, 2, 4
CODES = {"i": 0, "u": 1, "f": 2, "c": 5, "b": 6}

_api = ctypes.pythonapi
_api.PyCapsule_GetName.restype = ctypes.c_char_p
_api.PyCapsule_GetName.argtypes = [ctypes.py_object]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_api.PyCapsule_SetName.restype = ctypes.c_int
_api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
VERSIONED_NAME, LEGACY_NAME = b"dltensor_versioned", b"dltensor"
USED_VERSIONED_NAME = b"used_dltensor_versioned"  # kept alive: capsules keep a pointer to it


def capsule_name(capsule):
    return _api.PyCapsule_GetName(capsule).decode()


def capsule_struct(capsule, cls):
    name = _api.PyCapsule_GetName(capsule)
    return cls.from_address(_api.PyCapsule_GetPointer(capsule, name))


def data_pointer(array):
    return array.__array_interface__["data"][0]


DTYPES = [np.int16, np.float32, np.complex64, np.uint8, np.float16, np.int32, np.float64, np.bool_]


def random_array(rng, shape, dtype):
    dtype = np.dtype(dtype)
    if dtype.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    if dtype.kind == "b":  # masks (torch.bool): DLPack kDLBool
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, shape, endpoint=True).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


class CtypesProducer:
    """A foreign DLPack producer over the memory of a NumPy array ``owner``, with any
    version, device, byte offset or strides; counts calls of its deleter."""

    def __init__(self, owner, shape, dtype, *, byte_offset=0, strides=None, device_type=KDLCPU,
                 version=(1, 1), legacy=False, flags=0, lanes=1):
        self.owner = owner
        self.deleted = 0
        self.legacy = legacy
        self.device = (device_type, 0)
        dtype = np.dtype(dtype)
        self._shape = (ctypes.c_int64 * len(shape))(*shape)
        self._strides = (ctypes.c_int64 * len(shape))(*strides) if strides is not None else None
        tensor = DLTensor(data=data_pointer(owner), device=DLDevice(device_type, 0), ndim=len(shape),
                          dtype=DLDataType(CODES[dtype.kind], dtype.itemsize * 8, lanes),
                          shape=ctypes.cast(self._shape, c_int64_p),
                          strides=ctypes.cast(self._strides, c_int64_p) if self._strides else None,
                          byte_offset=byte_offset)
        if legacy:
            self._deleter = LEGACY_DELETER(self._on_delete)
            self.managed = DLManagedTensor(dl_tensor=tensor, deleter=self._deleter)
        else:
            self._deleter = VERSIONED_DELETER(self._on_delete)
            self.managed = DLManagedTensorVersioned(version=DLPackVersion(*version), deleter=self._deleter,
                                                    flags=flags, dl_tensor=tensor)
        self.capsule = None

    def _on_delete(self, _):
        self.deleted += 1

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if self.legacy and max_version is not None:
            raise TypeError("__dlpack__() got an unexpected keyword argument 'max_version'")
        self.capsule = _api.PyCapsule_New(ctypes.addressof(self.managed),
                                          LEGACY_NAME if self.legacy else VERSIONED_NAME, None)
        return self.capsule


class LegacyOnly:
    """A pre-1.0 producer: rejects max_version, returns NumPy's legacy capsule."""

    def __init__(self, array):
        self.array = array
        self.capsule = None

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()

    def __dlpack__(self, *, stream=None):
        self.capsule = self.array.__dlpack__(stream=stream)
        return self.capsule
