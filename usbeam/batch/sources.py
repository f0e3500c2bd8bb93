"""Recordings larger than memory, read lazily frame by frame (and as frame-chunked dask arrays).

Every source is a small picklable object: ``shape`` = ``(n_frames, *frame_shape)``, ``dtype``,
``source[i:j]`` reads frames i..j-1 (and only those) into a NumPy array, ``to_dask(frames)``
gives a dask array chunked along frames.  File handles are opened on first read in each
process (a dask worker) and never pickled, so a source can be shipped to a cluster.

Formats
-------
``RawSource`` -- usbeam raw recording (``*.usr``), this layout, all little-endian::

    offset 0    8 bytes   magic b"USBEAMRF"
    offset 8    uint32    format version (1)
    offset 12   uint32    H, the header length in bytes (a multiple of 4096): frames start at H
    offset 16   H - 16    UTF-8 JSON, padded with spaces:
                          {"dtype": "<i2" | "<f4", "frame_shape": [n_transmits, n_elements, n_samples],
                           "n_frames": N | null, "meta": {...}}
    offset H    frames    N frames, each prod(frame_shape) samples, C order (samples last)

  ``n_frames`` null means "as many whole frames as the file holds" (a recording still being
  appended to); a file whose frame bytes are not a whole number of frames is refused.
  ``meta`` is free-form (acquisition parameters; ``RawWriter(meta=...)``); a usbeam batch
  spec may be stored there under "usbeam_spec".  ``RawWriter`` writes it frame block by
  frame block (never the whole recording in memory).

``VantageFrameSource`` -- Verasonics Vantage ``RcvData`` saved frame by frame: each frame is
  the MATLAB ``RcvData{buffer}(:, :, f)``, int16 ``(n_rows, n_channels)`` column-major, as
  ``fwrite(fid, RcvData{1}(:,:,f), 'int16')`` writes it; either all frames one after another
  in one file or one file per frame.  Frames are mapped to ``(n_acquisitions, n_elements,
  n_samples)`` through ``usbeam.live.ChannelMap`` (Trans.Connector, Receive.startSample),
  as a live session does; ``VantageFrameSource.from_workspace`` takes the layout from a saved
  workspace (``usbeam.io.load_vantage(path, load_data=False)``).

``HDF5Source`` -- a dataset of an HDF5 file (h5py), frames on axis 0.
``ZarrSource`` -- a Zarr array (v2 or v3 store), frames on axis 0.
"""
import glob
import json
import mmap
import os
import struct
import threading

import numpy as np

from .. import _validate

MAGIC = b"USBEAMRF"
VERSION = 1
HEADER_ALIGN = 4096
_RAW_DTYPES = {"<i2": np.dtype("<i2"), "<f4": np.dtype("<f4")}


class FrameSource:
    """Base: ``shape``, ``dtype``, ``frame_shape``, ``n_frames``, ``meta``, slicing along frames."""

    shape = ()
    dtype = None
    meta = {}

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def n_frames(self):
        return self.shape[0]

    @property
    def frame_shape(self):
        return tuple(self.shape[1:])

    @property
    def frame_bytes(self):
        return int(np.prod(self.frame_shape, dtype=np.int64)) * self.dtype.itemsize

    def __len__(self):
        return self.shape[0]

    def __getitem__(self, key):
        """Frames ``key`` (an int, a slice, or a tuple whose first entry is one of them)."""
        rest = ()
        if isinstance(key, tuple):
            key, rest = (key[0], key[1:]) if key else (slice(None), ())
        if isinstance(key, (int, np.integer)):
            i = int(key) + (self.n_frames if key < 0 else 0)
            if not 0 <= i < self.n_frames:
                raise IndexError(f"frame {key} is out of range 0..{self.n_frames - 1}")
            return self._read(i, i + 1)[0][rest]
        if not isinstance(key, slice):
            raise TypeError(f"frames are read with an int or a slice (got {type(key).__name__})")
        start, stop, step = key.indices(self.n_frames)
        if step != 1:
            return self._read(start, stop)[::step][(slice(None),) + rest] if stop > start else \
                np.empty((0,) + self.frame_shape, self.dtype)
        if stop <= start:
            return np.empty((0,) + self.frame_shape, self.dtype)[(slice(None),) + rest]
        return self._read(start, stop)[(slice(None),) + rest]

    def _read(self, start, stop):  # pragma: no cover - every source defines it
        raise NotImplementedError

    def to_dask(self, frames_per_chunk, start=0, stop=None):
        """A dask array of frames [start, stop) chunked by ``frames_per_chunk`` along axis 0
        (whole frames in each chunk, the first chunk starting at ``start``); reading happens
        in the tasks, chunk by chunk."""
        import dask.array as da
        from dask.base import tokenize
        frames_per_chunk = _validate.integer("frames_per_chunk", frames_per_chunk, minimum=1)
        stop = self.n_frames if stop is None else stop
        window = self if (start, stop) == (0, self.n_frames) else FrameWindow(self, start, stop)
        name = "usbeam-source-" + tokenize(window.describe(), window.shape, str(window.dtype))
        return da.from_array(window, chunks=(frames_per_chunk,) + window.frame_shape, name=name, lock=False,
                             asarray=True, fancy=False, meta=np.empty((0,) * window.ndim, window.dtype))

    def describe(self):
        """JSON-able description (kind, path, ...) stored in the output's attributes."""
        return {"kind": type(self).__name__}

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_handle"] = None
        state.pop("_lock", None)
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def __repr__(self):
        return f"{type(self).__name__}({self.describe()!r}, shape={self.shape}, dtype={self.dtype})"


class FrameWindow(FrameSource):
    """Frames [start, stop) of another source, as a source of its own (``--frames a:b``)."""

    def __init__(self, source, start, stop):
        if not 0 <= start < stop <= source.n_frames:
            raise ValueError(f"frames {start}:{stop} is outside the input's 0:{source.n_frames}")
        self.source, self.start, self.stop = source, int(start), int(stop)
        self.shape = (self.stop - self.start,) + source.frame_shape
        self.dtype, self.meta = source.dtype, source.meta
        self._lock = threading.Lock()

    def _read(self, start, stop):
        return self.source._read(self.start + start, self.start + stop)

    def describe(self):
        return {**self.source.describe(), "frames": [self.start, self.stop]}


def _drop_pages(memmap, offset, length):
    """Let the pages of a read-only file map that were just copied go from this process's
    resident set (they stay in the page cache): without it, a reconstruction touching every
    frame would keep the whole file resident and its RSS would grow to the recording's size."""
    m = getattr(memmap, "_mmap", None)
    if m is None or not hasattr(m, "madvise") or not hasattr(mmap, "MADV_DONTNEED"):
        return
    page = mmap.ALLOCATIONGRANULARITY
    # the numpy map may start past the file start (offset rounded down to a page by numpy)
    base = memmap.offset - memmap.offset % page
    start = (offset - base) // page * page
    end = min(len(m), offset - base + length)
    if end > start:
        m.madvise(mmap.MADV_DONTNEED, start, end - start)


def _existing(name, path):
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{name}: no such file or directory: {path!r}")
    return path


# ---- usbeam raw recordings -------------------------------------------------------------

def read_raw_header(path):
    """(header length, header dict) of a usbeam raw recording; ValueError naming the file when
    it is not one."""
    path = _existing("input", path)
    with open(path, "rb") as f:
        head = f.read(16)
        if len(head) < 16 or head[:8] != MAGIC:
            raise ValueError(f"input: {path!r} is not a usbeam raw recording (no {MAGIC!r} magic)")
        version, header_len = struct.unpack("<II", head[8:16])
        if version != VERSION:
            raise ValueError(f"input: {path!r} has raw format version {version} (this usbeam reads {VERSION})")
        if header_len < 16 or header_len % HEADER_ALIGN:
            raise ValueError(f"input: {path!r} has a corrupt header length {header_len}")
        text = f.read(header_len - 16)
    try:
        header = json.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"input: {path!r} has a corrupt JSON header ({exc})") from None
    return header_len, header


class RawSource(FrameSource):
    """A usbeam raw recording (layout in the module docstring), memory-mapped per process."""

    def __init__(self, path):
        self.path = os.path.abspath(_existing("input", path))
        self.header_len, header = read_raw_header(self.path)
        dtype = header.get("dtype")
        if dtype not in _RAW_DTYPES:
            raise TypeError(f"input: {self.path!r} has dtype {dtype!r}; raw recordings hold '<i2' or '<f4'")
        self.dtype = _RAW_DTYPES[dtype].newbyteorder("=")
        frame_shape = _validate.shape("frame_shape", header.get("frame_shape", ()), minimum=1)
        if not frame_shape:
            raise ValueError(f"input: {self.path!r} has an empty frame_shape")
        self.meta = header.get("meta") or {}
        size = os.path.getsize(self.path) - self.header_len
        frame_bytes = int(np.prod(frame_shape)) * self.dtype.itemsize
        n_frames = header.get("n_frames")
        if n_frames is None:
            if size % frame_bytes:
                raise ValueError(f"input: {self.path!r} holds {size} bytes of frames, not a whole number of "
                                 f"{frame_bytes}-byte frames of shape {frame_shape}")
            n_frames = size // frame_bytes
        elif size < n_frames * frame_bytes:
            raise ValueError(f"input: {self.path!r} is truncated: its header says {n_frames} frames "
                             f"({n_frames * frame_bytes} bytes) but it holds {size} bytes")
        self.shape = (int(n_frames),) + frame_shape
        self._handle = None
        self._lock = threading.Lock()

    def _map(self):
        with self._lock:
            if self._handle is None:
                self._handle = np.memmap(self.path, dtype=self.dtype, mode="r", offset=self.header_len,
                                         shape=self.shape)
            return self._handle

    def _read(self, start, stop):
        handle = self._map()
        frames = np.array(handle[start:stop])  # a copy: the map is read-only and stays private
        _drop_pages(handle, self.header_len + start * self.frame_bytes, (stop - start) * self.frame_bytes)
        return frames

    def describe(self):
        return {"kind": "raw", "path": self.path}


class RawWriter:
    """Write a usbeam raw recording block by block: ``with RawWriter(path, frame_shape) as w:
    w.write(frames)``.  The header's n_frames is set when it closes; an interrupted write
    leaves n_frames null and only whole frames count (a torn last frame is refused on read)."""

    def __init__(self, path, frame_shape, dtype=np.int16, meta=None):
        self.path = os.fspath(path)
        self.frame_shape = _validate.shape("frame_shape", frame_shape, minimum=1)
        self.dtype = np.dtype(dtype)
        code = self.dtype.newbyteorder("<").str
        if code not in _RAW_DTYPES:
            raise TypeError(f"dtype must be int16 or float32 (got {self.dtype})")
        self._code = code
        self.meta = dict(meta or {})
        self.n_frames = 0
        body = self._json(None)
        self.header_len = (16 + len(body) + 64 + HEADER_ALIGN - 1) // HEADER_ALIGN * HEADER_ALIGN
        self._file = open(self.path, "wb")
        self._write_header(None)
        self._file.seek(self.header_len)

    def _json(self, n_frames):
        return json.dumps({"dtype": self._code, "frame_shape": list(self.frame_shape), "n_frames": n_frames,
                           "meta": self.meta}).encode()

    def _write_header(self, n_frames):
        body = self._json(n_frames)
        if 16 + len(body) > self.header_len:
            raise ValueError("meta: the header grew past its reserved length")
        self._file.seek(0)
        self._file.write(MAGIC + struct.pack("<II", VERSION, self.header_len))
        self._file.write(body + b" " * (self.header_len - 16 - len(body)))

    def write(self, frames):
        frames = _validate.ndarray("frames", frames)
        if frames.shape[1:] != self.frame_shape:
            raise ValueError(f"frames must have shape (n, *{self.frame_shape}) (got {frames.shape})")
        if frames.dtype != self.dtype:
            raise TypeError(f"frames must have dtype {self.dtype} (got {frames.dtype})")
        self._file.write(np.ascontiguousarray(frames, dtype=self._code).tobytes())
        self.n_frames += frames.shape[0]

    def close(self):
        if self._file is not None and not self._file.closed:
            self._write_header(self.n_frames)
            self._file.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def write_raw(path, frames, meta=None):
    """Write an in-memory array ``(n_frames, *frame_shape)`` as a usbeam raw recording."""
    frames = _validate.ndarray("frames", frames)
    with RawWriter(path, frames.shape[1:], frames.dtype, meta) as writer:
        writer.write(frames)
    return path


# ---- Vantage RcvData frame by frame ------------------------------------------------------

class VantageFrameSource(FrameSource):
    """Vantage RcvData frames saved one by one (module docstring), mapped to
    ``(n_acquisitions, n_elements, n_samples)`` int16.

    Parameters
    ----------
    path : one file holding the frames back to back, a list of files (one frame each, in
        order) or a glob pattern (sorted).
    n_rows, n_channels : RcvBuffer rows and channels per frame (Resource.RcvBuffer).
    element_channel : 0-based channel of each element (Trans.Connector - 1).
    acquisition_row : 0-based first row of each acquisition (Receive.startSample - 1).
    n_samples : samples per acquisition.
    """

    def __init__(self, path, *, n_rows, n_channels, element_channel, acquisition_row, n_samples, meta=None):
        self.n_rows = _validate.integer("n_rows", n_rows, minimum=1)
        self.n_channels = _validate.integer("n_channels", n_channels, minimum=1)
        self.element_channel = [int(c) for c in np.asarray(element_channel).ravel()]
        self.acquisition_row = [int(r) for r in np.asarray(acquisition_row).ravel()]
        self.n_samples = _validate.integer("n_samples", n_samples, minimum=1)
        self.dtype = np.dtype(np.int16)
        frame_bytes_raw = self.n_rows * self.n_channels * 2
        if isinstance(path, (list, tuple)):
            self.paths = [os.path.abspath(_existing("input", p)) for p in path]
        elif any(ch in os.fspath(path) for ch in "*?["):
            self.paths = sorted(os.path.abspath(p) for p in glob.glob(os.fspath(path)))
            if not self.paths:
                raise FileNotFoundError(f"input: no file matches {os.fspath(path)!r}")
        else:
            self.paths = [os.path.abspath(_existing("input", path))]
        if len(self.paths) == 1:
            size = os.path.getsize(self.paths[0])
            if size % frame_bytes_raw or size == 0:
                raise ValueError(f"input: {self.paths[0]!r} holds {size} bytes, not a whole number of "
                                 f"{self.n_rows} x {self.n_channels} int16 RcvData frames")
            n_frames, self.per_file = size // frame_bytes_raw, False
        else:
            for p in self.paths:
                if os.path.getsize(p) != frame_bytes_raw:
                    raise ValueError(f"input: {p!r} is not one {self.n_rows} x {self.n_channels} int16 "
                                     f"RcvData frame ({os.path.getsize(p)} bytes, expected {frame_bytes_raw})")
            n_frames, self.per_file = len(self.paths), True
        self.shape = (int(n_frames), len(self.acquisition_row), len(self.element_channel), self.n_samples)
        self.meta = dict(meta or {})
        self._handle = None
        self._lock = threading.Lock()
        self._channel_map()  # checks the layout now, in the caller's process

    @classmethod
    def from_workspace(cls, path, workspace, meta=None):
        """Layout from a ``usbeam.io.vantage.VantageWorkspace`` (``load_vantage(..., load_data=False)``)."""
        return cls(path, n_rows=workspace.n_rows, n_channels=workspace.n_channels,
                   element_channel=workspace.element_channel,
                   acquisition_row=[a.start_row for a in workspace.acquisitions],
                   n_samples=workspace.n_samples, meta=meta)

    def _channel_map(self):
        from ..live.channel_map import ChannelMap
        return ChannelMap((self.n_rows, self.n_channels), np.array(self.element_channel),
                          np.array(self.acquisition_row), self.n_samples, np.int16)

    def _raw_frames(self, start, stop):
        if self.per_file:
            return np.stack([np.fromfile(p, dtype="<i2").reshape(self.n_channels, self.n_rows)
                             for p in self.paths[start:stop]])
        with self._lock:
            if self._handle is None:
                self._handle = np.memmap(self.paths[0], dtype="<i2", mode="r",
                                         shape=(self.n_frames, self.n_channels, self.n_rows))
            handle = self._handle
        return handle[start:stop]

    def _read(self, start, stop):
        channel_map = self._channel_map()
        raw = self._raw_frames(start, stop)
        out = np.empty((stop - start,) + self.frame_shape, np.int16)
        for i in range(stop - start):
            # a C-order (channels, rows) frame is MATLAB's column-major (rows, channels): .T is
            # that view without a copy, and the gather reads it through its strides
            channel_map(np.asarray(raw[i]).T, out=out[i])
        if not self.per_file:
            raw_bytes = self.n_rows * self.n_channels * 2
            _drop_pages(self._handle, start * raw_bytes, (stop - start) * raw_bytes)
        return out

    def describe(self):
        return {"kind": "vantage-frames", "paths": self.paths if len(self.paths) <= 4 else
                [self.paths[0], "...", self.paths[-1]], "n_rows": self.n_rows, "n_channels": self.n_channels}


# ---- HDF5 and Zarr -----------------------------------------------------------------------

class HDF5Source(FrameSource):
    """Dataset ``dataset`` of an HDF5 file, frames on axis 0 (read with h5py, per process)."""

    def __init__(self, path, dataset=None):
        from ._deps import require
        h5py = require("h5py")
        self.path = os.path.abspath(_existing("input", path))
        with h5py.File(self.path, "r") as f:
            if dataset is None:
                names = []
                f.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
                if len(names) != 1:
                    raise ValueError(f"input: {self.path!r} holds {len(names)} datasets {names[:8]}; name one "
                                     f"(path.h5:dataset)")
                dataset = names[0]
            if dataset not in f or not isinstance(f[dataset], h5py.Dataset):
                raise ValueError(f"input: {self.path!r} has no dataset {dataset!r}")
            ds = f[dataset]
            self.shape, self.dtype = tuple(ds.shape), np.dtype(ds.dtype)
            self.meta = {k: _json_attr(v) for k, v in ds.attrs.items()}
        self.dataset = dataset
        if len(self.shape) < 2:
            raise ValueError(f"input: dataset {dataset!r} has shape {self.shape}; frames must be on axis 0")
        self._handle = None
        self._lock = threading.Lock()

    def _read(self, start, stop):
        import h5py
        with self._lock:
            if self._handle is None:
                self._handle = h5py.File(self.path, "r")
            return np.asarray(self._handle[self.dataset][start:stop]).astype(self.dtype.newbyteorder("="),
                                                                            copy=False)

    def describe(self):
        return {"kind": "hdf5", "path": self.path, "dataset": self.dataset}


class ZarrSource(FrameSource):
    """A Zarr array (path of the array, or of a group and ``array``), frames on axis 0."""

    def __init__(self, path, array=None):
        from ._deps import require
        zarr = require("zarr")
        self.path = os.path.abspath(_existing("input", path))
        self.array = array
        z = self._open(zarr)
        self.shape, self.dtype = tuple(z.shape), np.dtype(z.dtype)
        self.meta = {k: _json_attr(v) for k, v in dict(z.attrs).items()}
        if len(self.shape) < 2:
            raise ValueError(f"input: Zarr array has shape {self.shape}; frames must be on axis 0")
        self._handle = None
        self._lock = threading.Lock()

    def _open(self, zarr):
        try:
            node = zarr.open(self.path, mode="r")
        except Exception as exc:  # zarr raises several types for "not a store"
            raise ValueError(f"input: {self.path!r} is not a Zarr store ({exc})") from None
        if self.array is not None:
            try:
                node = node[self.array]
            except KeyError:
                raise ValueError(f"input: Zarr store {self.path!r} has no array {self.array!r}") from None
        if not hasattr(node, "dtype"):
            raise ValueError(f"input: {self.path!r} is a Zarr group; name its array (path.zarr:array)")
        return node

    def _read(self, start, stop):
        import zarr
        with self._lock:
            if self._handle is None:
                self._handle = self._open(zarr)
            handle = self._handle
        return np.asarray(handle[start:stop]).astype(self.dtype.newbyteorder("="), copy=False)

    def describe(self):
        return {"kind": "zarr", "path": self.path, "array": self.array}


def _json_attr(value):
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


def open_source(spec, **vantage_layout):
    """A FrameSource from a path: ``*.h5``/``*.hdf5`` (``path:dataset``), a Zarr store
    (``path.zarr`` or ``path.zarr:array``), a usbeam raw recording (by its magic), or with
    ``vantage_layout`` (VantageFrameSource's keywords) Vantage RcvData frames.  A FrameSource
    is returned as it is."""
    if isinstance(spec, FrameSource):
        return spec
    if vantage_layout:
        return VantageFrameSource(spec, **vantage_layout)
    text = os.fspath(spec)
    path, inner = text, None
    if not os.path.exists(text) and ":" in text:
        path, inner = text.rsplit(":", 1)
    _existing("input", path)
    lower = path.lower().rstrip("/")
    if lower.endswith((".h5", ".hdf5", ".hdf", ".mat")):
        return HDF5Source(path, inner)
    if os.path.isdir(path) or lower.endswith(".zarr"):
        return ZarrSource(path, inner)
    with open(path, "rb") as f:
        magic = f.read(8)
    if magic == MAGIC:
        return RawSource(path)
    if magic[:4] == b"\x89HDF":
        return HDF5Source(path, inner)
    raise ValueError(f"input: cannot tell the format of {path!r} (not a usbeam raw recording, HDF5 or Zarr; "
                     f"Vantage frames need their layout: --vantage-workspace)")
