"""notebooks/pwi_disk.ipynb runs top to bottom: it beamforms PWI_disk and asserts its own
comparison with the golden B-mode (rho >= 0.999, max |difference| <= 2 grey levels)."""
import os
from pathlib import Path

import pytest

from conftest import ROOT, package_root, shared_dataset

NOTEBOOK = ROOT / "notebooks" / "pwi_disk.ipynb"


@pytest.mark.slow
def test_pwi_disk_notebook_runs(monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    shared_dataset("PWI_disk.mat")
    shared_dataset("bmode_PWI_disk.mat")
    # The kernel is a fresh process: give it this checkout's usbeam and datasets.
    monkeypatch.setenv("PYTHONPATH", str(package_root()) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    monkeypatch.setenv("USBEAM_DATA", str(Path(shared_dataset("PWI_disk.mat")).parent))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    nbclient.NotebookClient(notebook, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()
    outputs = "".join(o.get("text", "") for c in notebook.cells if c.cell_type == "code" for o in c.outputs)
    assert "Pearson rho" in outputs and "points/s" in outputs
