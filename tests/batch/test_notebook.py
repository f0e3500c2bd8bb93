"""notebooks/batch_power_doppler.ipynb runs top to bottom on a scaled-down recording (a few
seconds instead of the hour; USBEAM_NB_DURATION_S): it generates the recording chunk by
chunk, reconstructs it with usbeam.batch behind a progress bar and reads the Zarr store back.
The test also checks that the notebook's first image equals the same ensemble run through
DopplerPipeline in memory."""
import os

import numpy as np
import pytest

from conftest import ROOT, package_root

NOTEBOOK = ROOT / "notebooks" / "batch_power_doppler.ipynb"


def test_batch_power_doppler_notebook_runs(tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("dask")
    zarr = pytest.importorskip("zarr")
    monkeypatch.setenv("PYTHONPATH", str(package_root()) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("USBEAM_NB_DURATION_S", "3")
    output = tmp_path / "fus.zarr"
    monkeypatch.setenv("USBEAM_NB_OUTPUT", str(output))
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    nbclient.NotebookClient(notebook, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    text = "".join(o.get("text", "") for c in notebook.cells if c.cell_type == "code" for o in c.outputs)
    assert "600 frames, 6 Doppler images" in text and "frames/s" in text
    assert "reconstruct: 100%" in text  # the progress bar (tqdm's stderr stream)
    store = zarr.open_group(str(output), mode="r")
    assert store.attrs["complete"] is True and store["power"].shape == (6, 56, 48)

    # the first image, independently: the notebook's source class and one in-memory pipeline
    import usbeam
    namespace = {}
    setup = [c.source for c in notebook.cells if c.cell_type == "code"][:2]
    os.environ["USBEAM_NB_DURATION_S"] = "3"
    exec(compile(setup[0] + "\n" + setup[1], "notebook", "exec"), namespace)
    source = namespace["source"]
    pipe = usbeam.DopplerPipeline(namespace["probe"], namespace["transmit"], namespace["grid"], n_frames=100,
                                  n_samples=384, fs=30e6, fc=7.5e6, prf=200.0, c=1540.0, clutter="svd",
                                  clutter_options={"low": 2}, outputs=("power",), power_db=False)
    np.testing.assert_array_equal(store["power"][0], pipe(source[0:100]).power)
