"""Shared fixtures: the ../shared/datasets folder (skip with a message when absent),
fresh random generators, the CUDA skip marker, and the seed of a random-order run."""
import os
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
# Tests live in a folder per stage (tests/<stage>/); what they share sits here: this folder
# (conftest, tolerances, reference/) and tests/helpers (live backends and pipelines, ...).
for _shared in (Path(__file__).resolve().parent, Path(__file__).resolve().parent / "helpers"):
    if str(_shared) not in sys.path:
        sys.path.append(str(_shared))
# USBEAM_DATA may list several folders (os.pathsep), as usbeam.datasets reads it.
SHARED_DATASETS = ([Path(folder) for folder in os.environ.get("USBEAM_DATA", "").split(os.pathsep) if folder]
                   or [ROOT.parent / "shared" / "datasets"])


def package_root():
    """The folder holding the usbeam package this run imports: what a subprocess (a notebook
    kernel, the CLI) must import too, so both compute with one build (the Makefile's clang and
    emulator builds run the suite from copies elsewhere, which round differently)."""
    import usbeam

    return Path(usbeam.__file__).resolve().parents[1]


def shared_dataset(name):
    """Path of a file in USBEAM_DATA's folders, else ../shared/datasets; skips the test with
    a message when it is missing."""
    for folder in SHARED_DATASETS:
        if (folder / name).exists():
            return folder / name
    pytest.skip(f"real-data test needs {name} in {os.pathsep.join(map(str, SHARED_DATASETS))} "
                "(../shared/datasets is absent on this machine)")


@pytest.fixture
def rng(request):
    """A fresh generator per test (seeded from the test name so failures reproduce)."""
    # crc32, not hash(): str hashes are salted per process, so failures would not reproduce.
    seed = zlib.crc32(request.node.nodeid.encode())
    return np.random.default_rng(seed)


_SUMMARY_LINES = []


@pytest.fixture
def summary_line():
    """``summary_line(text)`` prints text at the end of the run, after the results (figures
    a CI log should show even with -q, e.g. the Octave Vantage session's frames and latency)."""
    return _SUMMARY_LINES.append


def pytest_addoption(parser):
    parser.addoption("--packaging", action="store_true",
                     help="run the tests marked packaging (sdist, wheels, fresh venvs: make test-package)")


def pytest_collection_modifyitems(config, items):
    import usbeam

    if not config.getoption("--packaging"):
        skip_packaging = pytest.mark.skip(reason="packaging test: run with --packaging (make test-package)")
        for item in items:
            if item.get_closest_marker("packaging") is not None:
                item.add_marker(skip_packaging)
    if usbeam.cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device (none visible on this machine)")
    for item in items:
        # the marker itself: item.keywords also holds directory names (a checkout in .../cuda)
        if item.get_closest_marker("cuda") is not None:
            item.add_marker(skip)


def pytest_terminal_summary(terminalreporter, config):
    """pytest-randomly (requirements-dev.txt) shuffles the tests; its seed is in the header,
    which -q hides, so say it at the end too: the order of a failed run replays exactly."""
    for line in _SUMMARY_LINES:
        terminalreporter.write_line(line)
    seed = getattr(config.option, "randomly_seed", None)   # absent with -p no:randomly
    if isinstance(seed, int):
        terminalreporter.write_line(f"random order: rerun it with --randomly-seed={seed} (-p no:randomly: file order)")
