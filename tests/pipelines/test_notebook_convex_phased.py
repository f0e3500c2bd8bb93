"""notebooks/convex_phased.ipynb runs top to bottom: it simulates a convex and a phased-array
acquisition, beamforms them on polar grids, scan converts them, and asserts its own checks
(the 10 mm cyst at least 10 dB below its surroundings, the cardiac-style cavity likewise).
Needs no outside data."""
import os

import pytest

from conftest import ROOT, package_root

NOTEBOOK = ROOT / "notebooks" / "convex_phased.ipynb"


@pytest.mark.slow
def test_convex_phased_notebook_runs(monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    monkeypatch.setenv("PYTHONPATH", str(package_root()) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    nbclient.NotebookClient(notebook, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()
    outputs = "".join(o.get("text", "") for c in notebook.cells if c.cell_type == "code" for o in c.outputs)
    assert "cyst contrast" in outputs and "cavity vs wall" in outputs and "wavelengths away" in outputs
