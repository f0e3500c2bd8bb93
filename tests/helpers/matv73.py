"""Write MAT-file v7.3 (HDF5) the way MATLAB lays it out, for reader tests without MATLAB:
a 512-byte user block whose first 128 bytes are the MAT header (version 0x0200), one
HDF5 object per variable with a MATLAB_class attribute, numeric arrays stored with their
dimensions reversed (MATLAB is column-major), char as uint16, structs as groups, struct
arrays and cells as datasets of object references into the "#refs#" group.
Input: the dict scipy.io.savemat takes (dicts = structs, record arrays = struct arrays,
object arrays = cells)."""
import h5py
import numpy as np

_CLASSES = {np.dtype(np.float64): "double", np.dtype(np.float32): "single", np.dtype(np.int16): "int16",
            np.dtype(np.int32): "int32", np.dtype(np.uint8): "uint8", np.dtype(np.uint16): "uint16",
            np.dtype(np.int64): "int64", np.dtype(bool): "logical"}


def write_v73(path, variables):
    counter = [0]
    with h5py.File(path, "w", userblock_size=512) as f:
        refs = f.create_group("#refs#")

        def reference(value):
            name = f"r{counter[0]}"
            counter[0] += 1
            write(refs, name, value)
            return refs[name].ref

        def write(group, name, value):
            if isinstance(value, dict):
                g = group.create_group(name)
                g.attrs["MATLAB_class"] = np.bytes_("struct")
                for key, item in value.items():
                    write(g, key, item)
            elif isinstance(value, np.ndarray) and value.dtype.names:          # struct array
                g = group.create_group(name)
                g.attrs["MATLAB_class"] = np.bytes_("struct")
                items = value.ravel()
                for field in value.dtype.names:
                    data = np.array([[reference(item[field])] for item in items], dtype=h5py.ref_dtype)
                    g.create_dataset(field, data=data)                          # MATLAB 1xN, reversed
            elif isinstance(value, np.ndarray) and value.dtype == object:      # cell
                cells = np.empty(value.shape, dtype=h5py.ref_dtype)
                for index in np.ndindex(value.shape):
                    cells[index] = reference(value[index])
                ds = group.create_dataset(name, data=cells.T)
                ds.attrs["MATLAB_class"] = np.bytes_("cell")
            elif isinstance(value, str):
                ds = group.create_dataset(name, data=np.array([[ord(c)] for c in value], np.uint16))
                ds.attrs["MATLAB_class"] = np.bytes_("char")
            else:
                arr = np.asarray(value)
                arr = arr.reshape(1, -1) if arr.ndim < 2 else arr                # MATLAB has >= 2 dims
                ds = group.create_dataset(name, data=np.ascontiguousarray(arr.T))
                ds.attrs["MATLAB_class"] = np.bytes_(_CLASSES[arr.dtype])

        for name, value in variables.items():
            write(f, name, value)
    header = b"MATLAB 7.3 MAT-file, Platform: GLNXA64, Created on: Sat Nov 21 00:00:00 2026 HDF5 schema 1.00 ."
    header = header.ljust(116, b" ") + b"\0" * 8 + b"\x00\x02" + b"IM"
    with open(path, "r+b") as fh:
        fh.write(header)
