"""The dataset locator finds the shared recordings and checks their checksums."""
import pytest

from conftest import shared_dataset
from usbeam import datasets


def test_manifest_checksums_match_shared_files():
    for name, entry in datasets.manifest().items():
        path = shared_dataset(name)
        assert path.stat().st_size == entry["bytes"]
        assert datasets.sha256(path) == entry["sha256"]
        assert datasets.locate(name).samefile(path)


def test_corrupt_file_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("USBEAM_DATA", str(tmp_path))
    (tmp_path / "PWI_disk.mat").write_bytes(b"not the recording")
    with pytest.raises(ValueError, match="SHA-256"):
        datasets.locate("PWI_disk.mat")


def test_unknown_name():
    with pytest.raises(ValueError, match="unknown dataset"):
        datasets.locate("nope.mat")
