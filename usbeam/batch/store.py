"""The chunked Zarr output of a batch reconstruction, with completion markers for resuming.

Layout of OUTPUT (a Zarr group, v3 with zarr 3, v2 with zarr 2 on Python 3.10):
- one array per output of the recipe ("bmode" or "iq", "velocity"/"variance"/"power",
  "volume"), ``(n_outputs, *image_shape)``, chunked along axis 0 exactly as the run's chunks,
  so each task writes whole Zarr chunks and no two tasks write the same one;
- group attributes: ``usbeam_version``, ``pipeline``, ``usbeam_spec`` (the recipe as JSON:
  every parameter, geometry included), ``grid`` (axes in m), ``input`` (the source, its
  shape and dtype, the frames read), ``chunk_frames``, ``warmup_frames``, ``n_chunks``,
  ``complete`` (True once every chunk is verified);
- ``usbeam_chunks``: the completion markers, a uint8 array ``(n_chunks, n_arrays, 32)`` in
  chunks of one row: row k holds the SHA-256 of each output array's chunk k (in the order
  of ``outputs``), written by the task after the chunk's data, as a Zarr chunk of its own
  (the stores write a chunk atomically: a temporary file renamed into place).  A row of
  zeros (the fill value) means "not done".  A chunk counts as done only when its row is set
  and the data read back has those checksums, so an interrupted write (data without
  marker, a torn chunk, a chunk changed afterwards) is recomputed on resume and never
  looks complete.

The output must be on a file system every worker sees (local, or shared for a cluster).
"""
import hashlib
import json
import os
import shutil
import time

import numpy as np

from ._deps import require

MARKERS = "usbeam_chunks"


def _checksum(array):
    a = np.ascontiguousarray(array)
    return hashlib.sha256(a.view(np.uint8).reshape(-1) if a.size else b"").hexdigest()


def _create_array(group, name, shape, chunks, dtype):
    if hasattr(group, "create_array"):  # zarr 3
        return group.create_array(name, shape=shape, chunks=chunks, dtype=dtype, fill_value=0,
                                  overwrite=True)
    return group.create_dataset(name, shape=shape, chunks=chunks, dtype=dtype, fill_value=0,
                                overwrite=True)


def grid_attrs(grid):
    """The grid's axes (m) as JSON for the attributes."""
    out = {"kind": type(grid).__name__}
    for axis in ("x", "y", "z"):
        values = getattr(grid, axis, None)
        if isinstance(values, np.ndarray):
            out[axis] = values.tolist()
    if hasattr(grid, "voxel_transform"):
        out["voxel_transform"] = np.asarray(grid.voxel_transform).tolist()
        out["shape"] = list(grid.shape)
    return out


class OutputStore:
    """Creates (or reopens, to resume) the output of one reconstruction.

    ``layout``: {"frames": (a, b), "chunk_frames", "chunk_outputs", "n_chunks", "n_outputs",
    "warmup_frames", "input": {...}}.  An existing OUTPUT is reused only when it holds this
    very reconstruction (same spec, input and chunking); otherwise ValueError naming output,
    and nothing in it is touched (``overwrite=True`` replaces it)."""

    def __init__(self, path, recipe, layout, *, overwrite=False):
        self.zarr = require("zarr")
        self.path = os.path.abspath(os.fspath(path))
        self.recipe, self.layout = recipe, layout
        from .. import __version__
        self.identity = {"usbeam_spec": recipe.json, "input": layout["input"], "frames": list(layout["frames"]),
                         "chunk_frames": layout["chunk_frames"], "warmup_frames": layout["warmup_frames"]}
        self.attrs = {"usbeam_version": __version__, "pipeline": recipe.kind, "grid": grid_attrs(recipe.params["grid"]),
                      "n_chunks": layout["n_chunks"], "chunk_outputs": layout["chunk_outputs"],
                      "outputs": {k: [list(s), np.dtype(d).str] for k, (s, d) in recipe.outputs.items()},
                      **self.identity}
        self.resumed = False
        if os.path.exists(self.path) and not os.path.isdir(self.path):
            raise ValueError(f"output: {self.path!r} is a file, not a Zarr store; not touching it")
        if os.path.exists(self.path):
            if overwrite:
                self._check_removable()
                shutil.rmtree(self.path)
            else:
                self._reopen()
                return
        self._create()

    def _check_removable(self):
        if os.path.isdir(self.path) and os.listdir(self.path) and not self._is_batch_store():
            raise ValueError(f"output: {self.path!r} exists and is not a usbeam batch output; "
                             f"not removing it (remove it yourself)")

    def _is_batch_store(self):
        try:
            group = self.zarr.open_group(self.path, mode="r")
            return "usbeam_spec" in dict(group.attrs)
        except Exception:
            return False

    def _reopen(self):
        if not self._is_batch_store():
            raise ValueError(f"output: {self.path!r} exists and is not a usbeam batch output "
                             f"(choose another path, or overwrite=True / --overwrite)")
        group = self.zarr.open_group(self.path, mode="r+")
        stored = dict(group.attrs)
        for key, value in self.identity.items():
            if json.loads(json.dumps(stored.get(key))) != json.loads(json.dumps(value)):
                raise ValueError(f"output: {self.path!r} holds another reconstruction (its {key} differs); "
                                 f"it is left as it is (choose another path, or overwrite=True / --overwrite)")
        self.group = group
        self.arrays = {name: group[name] for name in self.recipe.outputs}
        self.resumed = True

    def _create(self):
        group = self.zarr.open_group(self.path, mode="w")
        self.arrays = {}
        for name, (shape, dtype) in self.recipe.outputs.items():
            full = (self.layout["n_outputs"],) + tuple(shape)
            chunks = (max(1, self.layout["chunk_outputs"]),) + tuple(shape)
            self.arrays[name] = _create_array(group, name, full, chunks, dtype)
        group.attrs.update({**self.attrs, "complete": False, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                                     time.gmtime())})
        _create_array(group, MARKERS, (self.layout["n_chunks"], len(self.arrays), 32),
                      (1, len(self.arrays), 32), np.uint8)
        self.group = group

    # ---- chunks -------------------------------------------------------------------------

    def region(self, k):
        n = self.layout["chunk_outputs"]
        return k * n, min((k + 1) * n, self.layout["n_outputs"])

    def markers(self):
        """(n_chunks, n_arrays, 32) uint8: the SHA-256 rows, zeros where not done."""
        return np.asarray(self.group[MARKERS][:])

    def done(self):
        """Chunks with a completion marker (not verified against the data)."""
        return [k for k, row in enumerate(self.markers()) if row.any()]

    def verify(self, k, markers=None):
        """True when chunk k is complete: its marker is set and the stored data matches it."""
        row = (self.markers() if markers is None else markers)[k]
        if not row.any():
            return False
        o0, o1 = self.region(k)
        return all(bytes(row[i]).hex() == _checksum(array[o0:o1])
                   for i, array in enumerate(self.arrays.values()))

    def pending(self):
        """Chunks to compute: all of a new output; those not verified on resume."""
        n = self.layout["n_chunks"]
        if not self.resumed:
            return list(range(n))
        markers = self.markers()
        return [k for k in range(n) if not self.verify(k, markers)]


def write_chunk(path, k, region, result, names):
    """In a worker: write chunk k of each output array, then its completion marker.  Returns
    the checksums.  Opened by path in the worker: Zarr handles are not shipped."""
    zarr = require("zarr")
    group = zarr.open_group(path, mode="r+")
    o0, o1 = region
    row = np.zeros((1, len(names), 32), np.uint8)
    for i, name in enumerate(names):
        data = result[name]
        group[name][o0:o1] = data
        row[0, i] = np.frombuffer(bytes.fromhex(_checksum(data)), np.uint8)
    group[MARKERS][k:k + 1] = row  # after the data: a marker only ever follows its chunk
    return row
