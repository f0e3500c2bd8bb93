"""Chunked inputs: usbeam raw recordings, Vantage RcvData frame by frame, HDF5 and Zarr, read
lazily (only the frames asked for) as frame-chunked dask arrays."""
import json
import os
import pickle
import struct

import numpy as np
import pytest

pytest.importorskip("dask")
zarr = pytest.importorskip("zarr")
h5py = pytest.importorskip("h5py")

from usbeam import batch  # noqa: E402
from usbeam.batch import sources  # noqa: E402
from usbeam.batch.store import _create_array  # noqa: E402


def test_raw_layout_is_as_documented(tmp_path, rng):
    frames = rng.integers(-2000, 2000, (5, 2, 3, 7), dtype=np.int16)
    path = tmp_path / "r.usr"
    batch.write_raw(path, frames, meta={"fs": 20e6})
    raw = path.read_bytes()
    # read back with nothing but the documented layout
    assert raw[:8] == b"USBEAMRF"
    version, header_len = struct.unpack("<II", raw[8:16])
    assert version == 1 and header_len % 4096 == 0
    header = json.loads(raw[16:header_len].decode())
    assert header == {"dtype": "<i2", "frame_shape": [2, 3, 7], "n_frames": 5, "meta": {"fs": 20e6}}
    body = np.frombuffer(raw[header_len:], "<i2").reshape(5, 2, 3, 7)
    np.testing.assert_array_equal(body, frames)
    src = batch.RawSource(path)
    assert src.shape == frames.shape and src.dtype == np.int16 and src.meta == {"fs": 20e6}
    np.testing.assert_array_equal(src[1:4], frames[1:4])
    np.testing.assert_array_equal(src[-1], frames[-1])
    np.testing.assert_array_equal(src.to_dask(2).compute(), frames)
    assert src.to_dask(2).chunks[0] == (2, 2, 1)


def test_raw_writer_blocks_and_unfinished_file(tmp_path, rng):
    frames = rng.integers(-9, 9, (6, 1, 2, 4), dtype=np.int16)
    path = tmp_path / "w.usr"
    writer = batch.RawWriter(path, (1, 2, 4))
    writer.write(frames[:2])
    writer.write(frames[2:5])
    writer._file.flush()
    # not closed yet: n_frames is null, the whole frames written so far count
    assert batch.RawSource(path).n_frames == 5
    writer.write(frames[5:])
    writer.close()
    np.testing.assert_array_equal(batch.RawSource(path)[:], frames)
    with open(path, "ab") as f:  # a torn frame after the declared ones is ignored (header says 6)
        f.write(b"\0\0")
    assert batch.RawSource(path).n_frames == 6


def test_raw_refuses_truncated_and_foreign_files(tmp_path, rng):
    path = tmp_path / "t.usr"
    batch.write_raw(path, rng.integers(-9, 9, (4, 1, 2, 4), dtype=np.int16))
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.truncate(size - 3)
    with pytest.raises(ValueError, match="input: .*truncated"):
        batch.RawSource(path)
    other = tmp_path / "x.bin"
    other.write_bytes(b"not a recording at all")
    with pytest.raises(ValueError, match="input: .*cannot tell the format"):
        batch.open_source(other)
    with pytest.raises(FileNotFoundError, match="input: no such file"):
        batch.open_source(tmp_path / "missing.usr")


def test_sources_read_only_the_frames_asked_for(tmp_path, rng, monkeypatch):
    frames = rng.integers(-9, 9, (12, 1, 2, 4), dtype=np.int16)
    batch.write_raw(tmp_path / "r.usr", frames)
    src = batch.RawSource(tmp_path / "r.usr")
    reads = []
    original = batch.RawSource._read
    monkeypatch.setattr(batch.RawSource, "_read", lambda self, a, b: reads.append((a, b)) or original(self, a, b))
    lazy = src.to_dask(4)
    assert reads == []  # building the dask array reads nothing
    np.testing.assert_array_equal(lazy.blocks[1].compute(scheduler="synchronous"), frames[4:8])
    assert reads == [(4, 8)]


def test_source_pickles_without_its_handle(tmp_path, rng):
    frames = rng.integers(-9, 9, (3, 1, 2, 4), dtype=np.int16)
    batch.write_raw(tmp_path / "r.usr", frames)
    src = batch.RawSource(tmp_path / "r.usr")
    src[0]  # opens the memory map
    blob = pickle.dumps(src)
    assert len(blob) < 2000  # the map's data is not shipped
    np.testing.assert_array_equal(pickle.loads(blob)[:], frames)


def test_hdf5_and_zarr_sources(tmp_path, rng):
    frames = rng.standard_normal((9, 2, 3, 5)).astype(np.float32)
    with h5py.File(tmp_path / "r.h5", "w") as f:
        f.create_dataset("acq/rf", data=frames, chunks=(1, 2, 3, 5))
        f["acq/rf"].attrs["fs"] = 20e6
    src = batch.open_source(f"{tmp_path / 'r.h5'}:acq/rf")
    assert isinstance(src, batch.HDF5Source) and src.meta["fs"] == 20e6
    np.testing.assert_array_equal(src.to_dask(4).compute(), frames)
    assert isinstance(batch.open_source(tmp_path / "r.h5"), batch.HDF5Source)  # its only dataset
    with pytest.raises(ValueError, match="no dataset 'nope'"):
        batch.open_source(f"{tmp_path / 'r.h5'}:nope")

    group = zarr.open_group(str(tmp_path / "r.zarr"), mode="w")
    arr = _create_array(group, "rf", frames.shape, (2, 2, 3, 5), np.float32)  # zarr 2 or 3
    arr[:] = frames
    src = batch.open_source(f"{tmp_path / 'r.zarr'}:rf")
    assert isinstance(src, batch.ZarrSource)
    np.testing.assert_array_equal(src.to_dask(3).compute(), frames)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(src))[7:], frames[7:])
    with pytest.raises(ValueError, match="Zarr group; name its array"):
        batch.open_source(tmp_path / "r.zarr")


def _vantage_layout():
    # 2 acquisitions of 6 samples in rows 0..5 and 8..13 of 16 rows; 4 elements on channels 5, 1, 6, 2
    return dict(n_rows=16, n_channels=8, element_channel=[5, 1, 6, 2], acquisition_row=[0, 8], n_samples=6)


def _expected_vantage(raw_frames, layout):
    """out[f, a, e, k] = RcvData(row0[a] + k, channel[e], f), written out from the definition."""
    n = raw_frames.shape[0]
    out = np.empty((n, 2, 4, 6), np.int16)
    for f in range(n):
        for a, row0 in enumerate(layout["acquisition_row"]):
            for e, ch in enumerate(layout["element_channel"]):
                for k in range(layout["n_samples"]):
                    out[f, a, e, k] = raw_frames[f][row0 + k, ch]
    return out


def test_vantage_frames_one_file_and_one_file_per_frame(tmp_path, rng):
    layout = _vantage_layout()
    rcv = rng.integers(-3000, 3000, (5, 16, 8), dtype=np.int16)  # MATLAB (rows, channels) per frame
    # MATLAB fwrite(fid, RcvData{1}(:,:,f), 'int16') writes column-major: channel by channel
    with open(tmp_path / "frames.bin", "wb") as f:
        for frame in rcv:
            f.write(np.asfortranarray(frame).tobytes(order="F"))
    for f in range(5):
        (tmp_path / f"frame_{f:03d}.bin").write_bytes(np.asfortranarray(rcv[f]).tobytes(order="F"))
    expected = _expected_vantage(rcv, layout)
    one = batch.VantageFrameSource(tmp_path / "frames.bin", **layout)
    many = batch.VantageFrameSource(str(tmp_path / "frame_*.bin"), **layout)
    for src in (one, many):
        assert src.shape == (5, 2, 4, 6) and src.dtype == np.int16
        np.testing.assert_array_equal(src[:], expected)
        np.testing.assert_array_equal(src.to_dask(2).compute(), expected)
    (tmp_path / "frame_999.bin").write_bytes(b"\0" * 10)
    with pytest.raises(ValueError, match="not one 16 x 8 int16 RcvData frame"):
        batch.VantageFrameSource(str(tmp_path / "frame_*.bin"), **layout)


def test_sources_module_documents_the_raw_layout():
    assert "offset H    frames" in sources.__doc__ and "USBEAMRF" in sources.__doc__
