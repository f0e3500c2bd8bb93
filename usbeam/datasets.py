"""Locate (and, on request, download) the reference recordings listed in datasets/manifest.json,
verifying each file's SHA-256 checksum.  Synthetic data comes from usbeam.simulate instead."""
import hashlib
import json
import os
import urllib.request
from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent
_MANIFEST = _PACKAGE_DIR.parent / "datasets" / "manifest.json"
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "usbeam"


def manifest():
    """{name: {sha256, bytes, what, source, url}} for every known dataset."""
    if not _MANIFEST.exists():
        raise FileNotFoundError(f"dataset manifest not found at {_MANIFEST} (source checkout needed)")
    return json.loads(_MANIFEST.read_text())


def sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def candidates(name):
    """Places searched for a dataset, in order."""
    places = []
    if os.environ.get("USBEAM_DATA"):
        places.append(Path(os.environ["USBEAM_DATA"]) / name)
    places.append(_PACKAGE_DIR.parent.parent / "shared" / "datasets" / name)
    places.append(CACHE / name)
    return places


def locate(name, *, verify=True):
    """Path of dataset `name`; FileNotFoundError listing the places searched when absent,
    ValueError when a file is found but its checksum differs from the manifest."""
    entry = manifest().get(name)
    if entry is None:
        raise ValueError(f"name: unknown dataset {name!r}; known: {', '.join(sorted(manifest()))}")
    for path in candidates(name):
        if path.exists():
            if verify and sha256(path) != entry["sha256"]:
                raise ValueError(f"{path}: SHA-256 differs from datasets/manifest.json (corrupt or different file)")
            return path
    raise FileNotFoundError(f"dataset {name!r} not found in: " + ", ".join(str(p) for p in candidates(name))
                            + (f"; usbeam.datasets.fetch({name!r}) can download it" if entry.get("url") else ""))


def fetch(name):
    """Download dataset `name` into the cache (~/.cache/usbeam) and verify its checksum."""
    entry = manifest().get(name)
    if entry is None:
        raise ValueError(f"name: unknown dataset {name!r}")
    if not entry.get("url"):
        raise ValueError(f"dataset {name!r} has no download URL; see datasets/manifest.json for its source")
    CACHE.mkdir(parents=True, exist_ok=True)
    target = CACHE / name
    partial = target.with_suffix(target.suffix + ".part")
    urllib.request.urlretrieve(entry["url"], partial)
    if sha256(partial) != entry["sha256"]:
        partial.unlink()
        raise ValueError(f"download of {name!r} has the wrong SHA-256; not kept")
    partial.replace(target)
    return target
