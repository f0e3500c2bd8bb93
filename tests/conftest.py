"""Shared fixtures: the ../shared/datasets folder (skip with a message when absent),
fresh random generators, the CUDA skip marker, and the seed of a random-order run."""
import os
import zlib
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATASETS = Path(os.environ.get("USBEAM_DATA", ROOT.parent / "shared" / "datasets"))


def shared_dataset(name):
    """Path of a file in ../shared/datasets; skips the test with a message when it is missing."""
    path = SHARED_DATASETS / name
    if not path.exists():
        pytest.skip(f"real-data test needs {path} (../shared/datasets is absent on this machine)")
    return path


@pytest.fixture
def rng(request):
    """A fresh generator per test (seeded from the test name so failures reproduce)."""
    # crc32, not hash(): str hashes are salted per process, so failures would not reproduce.
    seed = zlib.crc32(request.node.nodeid.encode())
    return np.random.default_rng(seed)


def pytest_collection_modifyitems(config, items):
    import usbeam

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
    seed = getattr(config.option, "randomly_seed", None)   # absent with -p no:randomly
    if isinstance(seed, int):
        terminalreporter.write_line(f"random order: rerun it with --randomly-seed={seed} (-p no:randomly: file order)")
