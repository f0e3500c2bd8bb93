"""The dataset locator: the manifest inside the package, the lookup order (USBEAM_DATA,
the checkout's ../shared/datasets, the per-user cache), the not-found message, and
fetch's checksum, atomic rename and network errors.  Nothing here touches the internet:
downloads come from file:// URLs or a closed local port."""
import hashlib
import json
import os
import socket
from importlib import resources
from pathlib import Path

import pytest

from conftest import ROOT, shared_dataset
from usbeam import datasets

PAYLOAD = b"a small stand-in recording\n"


@pytest.fixture
def isolated(tmp_path, monkeypatch):
    """No USBEAM_DATA, a cache in tmp_path, and the package seen as installed (no
    ../shared/datasets), so only what a test puts in place can be found."""
    monkeypatch.delenv("USBEAM_DATA", raising=False)
    monkeypatch.setenv("USBEAM_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(datasets, "_PACKAGE_DIR", tmp_path / "site-packages" / "usbeam")
    return tmp_path / "cache"


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """A manifest with one small dataset 'fake.bin' served from a file:// URL; returns
    (its entry, the source file)."""
    source = tmp_path / "server" / "fake.bin"
    source.parent.mkdir()
    source.write_bytes(PAYLOAD)
    entry = {"sha256": hashlib.sha256(PAYLOAD).hexdigest(), "bytes": len(PAYLOAD),
             "what": "test payload", "source": "this test", "url": source.as_uri()}
    monkeypatch.setattr(datasets, "manifest", lambda: {"fake.bin": entry})
    return entry, source


def put(folder, data=PAYLOAD, name="fake.bin"):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(data)
    return folder / name


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


def test_manifest_is_package_data():
    resource = resources.files("usbeam").joinpath("data").joinpath("manifest.json")
    assert resource.is_file()
    assert json.loads(resource.read_text(encoding="utf-8")) == datasets.manifest()
    assert not (ROOT / "datasets" / "manifest.json").exists()  # one copy, the packaged one


def test_every_dataset_has_a_source():
    for name, entry in datasets.manifest().items():
        assert len(entry["sha256"]) == 64 and entry["bytes"] > 0, name
        assert entry["source"], name
        assert (entry.get("url") or "").startswith("https://") or entry.get("regenerate"), name


def test_cache_dir_from_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("USBEAM_CACHE", str(tmp_path / "mine"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert datasets.cache_dir() == tmp_path / "mine"
    monkeypatch.delenv("USBEAM_CACHE")
    assert datasets.cache_dir() == tmp_path / "xdg" / "usbeam"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")  # the XDG spec: relative is invalid
    assert datasets.cache_dir() == Path.home() / ".cache" / "usbeam"


def test_lookup_order(tmp_path, monkeypatch):
    monkeypatch.setenv("USBEAM_DATA", os.pathsep.join([str(tmp_path / "a"), "", str(tmp_path / "b")]))
    monkeypatch.setenv("USBEAM_CACHE", str(tmp_path / "cache"))
    # In this source checkout, ../shared/datasets sits between USBEAM_DATA and the cache.
    assert datasets.candidates("x.mat") == [tmp_path / "a" / "x.mat", tmp_path / "b" / "x.mat",
                                            ROOT.parent / "shared" / "datasets" / "x.mat",
                                            tmp_path / "cache" / "x.mat"]


def test_installed_package_skips_the_checkout_folder(isolated, tmp_path):
    assert datasets.candidates("x.mat") == [isolated / "x.mat"]


def test_usbeam_data_with_two_folders_then_cache(isolated, tmp_path, monkeypatch, fake):
    first, second = tmp_path / "first", tmp_path / "second"
    monkeypatch.setenv("USBEAM_DATA", first.as_posix() + os.pathsep + second.as_posix())
    cached = put(isolated)
    assert datasets.locate("fake.bin") == cached
    in_second = put(second)
    assert datasets.locate("fake.bin") == in_second
    in_first = put(first)
    assert datasets.locate("fake.bin") == in_first


def test_not_found_says_where_to_put_it(isolated):
    entry = datasets.manifest()["PWI_disk.mat"]
    with pytest.raises(FileNotFoundError) as info:
        datasets.locate("PWI_disk.mat")
    message = str(info.value)
    assert str(isolated / "PWI_disk.mat") in message
    assert entry["url"] in message
    assert "USBEAM_DATA" in message and entry["sha256"] in message


def test_not_found_without_url_gives_the_regeneration_command(isolated, monkeypatch):
    entry = {"sha256": "0" * 64, "bytes": 1, "what": "", "source": "", "url": None,
             "regenerate": "python datasets/make_it.py out.mat"}
    monkeypatch.setattr(datasets, "manifest", lambda: {"made.mat": entry})
    with pytest.raises(FileNotFoundError, match="python datasets/make_it.py"):
        datasets.locate("made.mat")
    with pytest.raises(ValueError, match="no download URL.*python datasets/make_it.py"):
        datasets.fetch("made.mat")


def test_fetch_keeps_a_good_download(isolated, fake):
    path = datasets.fetch("fake.bin")
    assert path == isolated / "fake.bin"
    assert path.read_bytes() == PAYLOAD
    assert os.listdir(isolated) == ["fake.bin"]  # no temporary file left
    assert datasets.locate("fake.bin") == path


def test_locate_downloads_only_when_asked(isolated, fake):
    with pytest.raises(FileNotFoundError):
        datasets.locate("fake.bin")
    assert not isolated.exists() or not os.listdir(isolated)
    assert datasets.locate("fake.bin", download=True) == isolated / "fake.bin"


def test_fetch_refuses_a_bad_checksum(isolated, fake):
    entry, _ = fake
    entry["sha256"] = "0" * 64
    with pytest.raises(ValueError, match="not kept"):
        datasets.fetch("fake.bin")
    assert os.listdir(isolated) == []  # neither the final name nor a temporary file


def test_fetch_refuses_a_larger_file(isolated, fake):
    _, source = fake
    source.write_bytes(PAYLOAD * 3)
    with pytest.raises(ValueError, match="larger"):
        datasets.fetch("fake.bin")
    assert os.listdir(isolated) == []


def test_fetch_network_failure_names_url_and_target(isolated, fake):
    entry, _ = fake
    # A port bound but not listening refuses connections, and holding it stops anyone
    # else from taking it during the test.
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        entry["url"] = f"http://127.0.0.1:{closed.getsockname()[1]}/fake.bin"
        with pytest.raises(ConnectionError) as info:
            datasets.fetch("fake.bin")
    assert entry["url"] in str(info.value) and str(isolated / "fake.bin") in str(info.value)
    assert os.listdir(isolated) == []


def test_fetch_times_out(isolated, fake):
    entry, _ = fake
    # Listening but never answering: the kernel accepts the connection, the read waits.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        entry["url"] = f"http://127.0.0.1:{silent.getsockname()[1]}/fake.bin"
        with pytest.raises(ConnectionError, match="timed out"):
            datasets.fetch("fake.bin", timeout=0.2)
    assert os.listdir(isolated) == []


def test_missing_file_url_is_a_clear_error(isolated, fake):
    _, source = fake
    source.unlink()
    with pytest.raises(ConnectionError, match="could not download"):
        datasets.fetch("fake.bin")
