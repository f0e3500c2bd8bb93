"""Bad input to usbeam.batch: a clear exception naming the parameter, before anything is
written, and an output already on disk left byte for byte as it was."""
import hashlib
import os
import time

import numpy as np
import pytest

pytest.importorskip("dask")
pytest.importorskip("distributed")
zarr = pytest.importorskip("zarr")

import batch_data as data  # noqa: E402
from usbeam import batch  # noqa: E402


def tree_digest(root):
    """SHA-256 over every file's relative path and bytes under root."""
    h = hashlib.sha256()
    for folder, _, files in sorted(os.walk(root)):
        for name in sorted(files):
            path = os.path.join(folder, name)
            h.update(os.path.relpath(path, root).encode())
            with open(path, "rb") as f:
                h.update(f.read())
    return h.hexdigest()


@pytest.fixture
def written(tmp_path):
    """A complete Doppler output and its input; returns (input path, output path, digest)."""
    rf = data.linear_frames(32, seed=11)
    batch.write_raw(tmp_path / "rec.usr", rf)
    out = tmp_path / "out.zarr"
    batch.reconstruct(str(tmp_path / "rec.usr"), str(out), data.doppler_recipe("svd"), chunk_frames=8,
                      progress=False, n_workers=1)
    return str(tmp_path / "rec.usr"), str(out), tree_digest(out)


def test_shape_mismatch_names_input(tmp_path, written):
    path, out, digest = written
    wrong = tmp_path / "wrong.usr"
    batch.write_raw(wrong, np.zeros((16, 1, 16, data.N_SAMPLES - 1), np.int16))
    with pytest.raises(ValueError, match=r"input: frames of shape \(1, 16, 255\), but the pipeline takes frames "
                                         r"of shape \(1, 16, 256\)"):
        batch.reconstruct(str(wrong), out, data.doppler_recipe("svd"), chunk_frames=8, progress=False)
    assert tree_digest(out) == digest


def test_dtype_mismatch_names_input(tmp_path, written):
    path, out, digest = written
    wrong = tmp_path / "float.usr"
    batch.write_raw(wrong, np.zeros((16, 1, 16, data.N_SAMPLES), np.float32))
    with pytest.raises(TypeError, match="input: dtype float32, but the pipeline takes int16"):
        batch.reconstruct(str(wrong), out, data.doppler_recipe("svd"), chunk_frames=8, progress=False)
    assert tree_digest(out) == digest


def test_missing_file_names_input(tmp_path, written):
    _, out, digest = written
    with pytest.raises(FileNotFoundError, match="input: no such file"):
        batch.reconstruct(str(tmp_path / "nope.usr"), out, data.doppler_recipe("svd"), chunk_frames=8,
                          progress=False)
    assert tree_digest(out) == digest


def test_unreachable_scheduler_names_scheduler_quickly(written):
    path, out, digest = written
    t = time.perf_counter()
    with pytest.raises(ConnectionError, match=r"scheduler: no Dask scheduler answered at 'tcp://127.0.0.1:9' "
                                              r"within 1.0 s"):
        batch.reconstruct(path, out, data.doppler_recipe("svd"), chunk_frames=8, progress=False,
                          scheduler="tcp://127.0.0.1:9", connect_timeout=1.0)
    assert time.perf_counter() - t < 15
    assert tree_digest(out) == digest


def test_chunk_that_splits_an_ensemble_names_chunk_frames(written):
    path, out, digest = written
    with pytest.raises(ValueError, match="chunk_frames: 12 frames would split an ensemble of 8 frames"):
        batch.reconstruct(path, out, data.doppler_recipe("svd"), chunk_frames=12, progress=False)
    assert tree_digest(out) == digest


def test_other_reconstruction_in_output_is_not_touched(written):
    path, out, digest = written
    with pytest.raises(ValueError, match="output: .* holds another reconstruction"):
        batch.reconstruct(path, out, data.doppler_recipe("svd", {"low": 2}), chunk_frames=8, progress=False)
    with pytest.raises(ValueError, match="output: .* holds another reconstruction"):
        batch.reconstruct(path, out, data.doppler_recipe("svd"), chunk_frames=16, progress=False)
    assert tree_digest(out) == digest


def test_output_that_is_not_a_batch_store_is_refused(tmp_path, written):
    path, _, _ = written
    folder = tmp_path / "precious"
    folder.mkdir()
    (folder / "notes.txt").write_text("keep me")
    for overwrite in (False, True):
        with pytest.raises(ValueError, match="output: .* not a usbeam batch output"):
            batch.reconstruct(path, str(folder), data.doppler_recipe("svd"), chunk_frames=8, progress=False,
                              overwrite=overwrite)
    assert (folder / "notes.txt").read_text() == "keep me"


def test_frames_and_recipe_errors_name_the_parameter(written):
    path, out, digest = written
    with pytest.raises(ValueError, match="frames must be 'a:b'"):
        batch.reconstruct(path, out, data.doppler_recipe("svd"), frames="x", chunk_frames=8, progress=False)
    with pytest.raises(ValueError, match="frames '40:50' selects no frame"):
        batch.reconstruct(path, out, data.doppler_recipe("svd"), frames="40:50", chunk_frames=8, progress=False)
    with pytest.raises(ValueError, match="frames: 5 frames hold no whole ensemble of 8 frames"):
        batch.reconstruct(path, out, data.doppler_recipe("svd"), frames="0:5", chunk_frames=8, progress=False)
    with pytest.raises(ValueError, match="normalize: 'global'"):
        data.bmode_recipe(normalize="global")
    with pytest.raises(TypeError, match="recipe must be a usbeam.batch.Recipe"):
        batch.reconstruct(path, out, object(), progress=False)
    assert tree_digest(out) == digest


def test_usbeam_imports_without_the_extra_and_batch_names_it():
    """With dask hidden, ``import usbeam`` works and ``import usbeam.batch`` / the command
    raise an ImportError naming the ``batch`` extra."""
    import subprocess
    import sys
    code = (
        "import sys, importlib.abc\n"
        "class Hide(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name.split('.')[0] in ('dask', 'distributed', 'zarr'):\n"
        "            raise ImportError(f'No module named {name!r}')\n"
        "sys.meta_path.insert(0, Hide())\n"
        "import usbeam\n"
        "assert usbeam.Pipeline\n"
        "try:\n"
        "    import usbeam.batch\n"
        "except ImportError as exc:\n"
        "    print('ERR', exc)\n"
        "from usbeam.__main__ import main\n"
        "print('RC', main(['reconstruct', 'a', 'b', '--pipeline', 'x']))\n")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "ERR usbeam.batch needs the 'dask' package" in done.stdout
    assert "pip install 'usbeam[batch]'" in done.stdout
    assert "RC 2" in done.stdout and "usbeam[batch]" in done.stderr


def test_output_that_is_a_file_is_refused(tmp_path, written):
    path, _, _ = written
    target = tmp_path / "file.zarr"
    target.write_text("not a store")
    with pytest.raises(ValueError, match="output: .* is a file"):
        batch.reconstruct(path, str(target), data.doppler_recipe("svd"), chunk_frames=8, progress=False,
                          overwrite=True)
    assert target.read_text() == "not a store"
