"""Locate (and, on request, download) the reference recordings listed in the package's
manifest (usbeam/data/manifest.json), verifying each file's size and SHA-256 checksum.

usbeam ships no recordings, only their manifest.  ``locate(name)`` looks, in order, in
every folder of ``$USBEAM_DATA`` (separated by ``os.pathsep``), in ``../shared/datasets``
next to a source checkout, then in the per-user cache (``cache_dir()``).  ``fetch(name)``
downloads into that cache; nothing is downloaded unless asked.  Synthetic data comes from
usbeam.simulate instead.
"""
import hashlib
import http.client
import json
import os
import tempfile
import urllib.error
import urllib.request
from importlib import resources
from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent
# Said in error messages, so a user can find the manifest inside an installed package too.
MANIFEST_RESOURCE = "usbeam/data/manifest.json"
# Seconds a download may wait on the server (per connect or read, urllib's meaning): long
# enough for a slow link, short enough that a blocked network fails rather than hangs.
TIMEOUT = 60
_CHUNK = 1 << 20


def manifest():
    """{name: {sha256, bytes, what, source, url[, regenerate]}} for every known dataset.

    Read through importlib.resources so it works from a source checkout, an installed
    wheel or a zip alike."""
    text = resources.files(__package__).joinpath("data").joinpath("manifest.json").read_text(encoding="utf-8")
    return json.loads(text)


def _entry(name):
    known = manifest()
    if name not in known:
        raise ValueError(f"name: unknown dataset {name!r}; known: {', '.join(sorted(known))}")
    return known[name]


def sha256(path):
    """Hex SHA-256 of a file, read in blocks so a large recording is not held in memory."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(_CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def cache_dir():
    """The per-user download cache: $USBEAM_CACHE, else $XDG_CACHE_HOME/usbeam, else
    ~/.cache/usbeam.  Read on every call so a changed environment takes effect."""
    if os.environ.get("USBEAM_CACHE"):
        return Path(os.environ["USBEAM_CACHE"]).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    # The XDG spec says a relative value is invalid and must be ignored.
    base = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "usbeam"


def _checkout_datasets():
    """../shared/datasets beside a source checkout (where the project's CI keeps the
    recordings), or None for an installed package: site-packages has no setup.py, and
    its parent's shared/ folder is nobody's data."""
    root = _PACKAGE_DIR.parent
    if (root / "setup.py").is_file() and (root / "pyproject.toml").is_file():
        return root.parent / "shared" / "datasets"
    return None


def candidates(name):
    """Places searched for a dataset, in order."""
    places = [Path(folder).expanduser() / name
              for folder in os.environ.get("USBEAM_DATA", "").split(os.pathsep) if folder]
    checkout = _checkout_datasets()
    if checkout is not None:
        places.append(checkout / name)
    places.append(cache_dir() / name)
    return places


def _check(path, entry):
    """ValueError unless the file at path has the manifest's size and SHA-256."""
    size = path.stat().st_size
    # The size first: it is free, and a truncated copy is the usual way a file goes wrong.
    if size != entry["bytes"] or sha256(path) != entry["sha256"]:
        raise ValueError(f"{path}: not the file the manifest ({MANIFEST_RESOURCE}) describes: {size} bytes, "
                         f"expected {entry['bytes']} bytes with SHA-256 {entry['sha256']} "
                         "(corrupt, truncated or different file); delete or replace it")


def _where_to_get(entry):
    """How to obtain a file by hand: its URL, or the command that regenerates it."""
    if entry.get("url"):
        return f"download it from {entry['url']}"
    if entry.get("regenerate"):
        return f"regenerate it with `{entry['regenerate']}`"
    return f"obtain it from its source ({entry.get('source', 'see the manifest')})"


def locate(name, *, verify=True, download=False):
    """Path of dataset `name`.

    Searches candidates(name) in order.  When absent: with download=True, fetch(name);
    otherwise FileNotFoundError saying where to put the file and where to get it.
    ValueError when a file is found but its size or checksum differs from the manifest
    (the search does not go on: a wrong file where one was put is better reported than
    skipped)."""
    entry = _entry(name)
    places = candidates(name)
    for path in places:
        if path.is_file():
            if verify:
                _check(path, entry)
            return path
    if download:
        return fetch(name)
    target = cache_dir() / name
    raise FileNotFoundError(
        f"dataset {name!r} not found; searched: {', '.join(str(p) for p in places)}. "
        f"To provide it, {_where_to_get(entry)} and save it as {target} "
        f"(or in a folder listed in USBEAM_DATA, folders separated by {os.pathsep!r}); "
        f"expected {entry['bytes']} bytes, SHA-256 {entry['sha256']}."
        + (f" With network access, usbeam.datasets.fetch({name!r}) downloads and checks it." if entry.get("url")
           else ""))


# URLError covers HTTP errors, refused connections and DNS failures; OSError timeouts and
# resets mid-transfer; HTTPException a truncated or malformed HTTP answer.
_NETWORK_ERRORS = (urllib.error.URLError, OSError, http.client.HTTPException)


def _unreachable(name, url, target, exc):
    """The ConnectionError for a failed download: what, from where, to where, and the way
    round it (no network is the normal case on CI machines)."""
    if isinstance(exc, urllib.error.HTTPError):
        reason = f"HTTP {exc.code} {exc.reason}"
    else:
        reason = getattr(exc, "reason", None) or exc
    return ConnectionError(f"could not download dataset {name!r} from {url} to {target}: {reason}. "
                           f"Without network access, download it on another machine and save it as {target} "
                           "(or in a folder listed in USBEAM_DATA).")


def fetch(name, *, timeout=TIMEOUT):
    """Download dataset `name` into cache_dir() and return its path.

    The bytes go to a temporary file in the cache folder, which is renamed to the final
    name only once its size and SHA-256 match the manifest, so an interrupted or wrong
    download never sits under the real name.  ConnectionError (naming the URL and the
    target) when the server cannot be reached; ValueError when what arrives is not the
    file the manifest describes."""
    entry = _entry(name)
    url = entry.get("url")
    folder = cache_dir()
    target = folder / name
    if not url:
        raise ValueError(f"dataset {name!r} has no download URL; {_where_to_get(entry)} "
                         f"and save it as {target}")
    folder.mkdir(parents=True, exist_ok=True)
    # Same folder as the target, so the final os.replace is an atomic rename, never a copy.
    fd, partial = tempfile.mkstemp(prefix=f".{name}.", suffix=".part", dir=folder)
    try:
        digest = hashlib.sha256()
        size = 0
        with os.fdopen(fd, "wb") as out:
            # Only the network calls sit in these try blocks: a full disk (an OSError from
            # out.write) must not be reported as a network failure.
            try:
                response = urllib.request.urlopen(url, timeout=timeout)
            except _NETWORK_ERRORS as exc:
                raise _unreachable(name, url, target, exc) from exc
            with response:
                while True:
                    try:
                        block = response.read(_CHUNK)
                    except _NETWORK_ERRORS as exc:
                        raise _unreachable(name, url, target, exc) from exc
                    if not block:
                        break
                    size += len(block)
                    # Stop early rather than fill the disk with a wrong (e.g. HTML) answer.
                    if size > entry["bytes"]:
                        raise ValueError(f"download of {name!r} from {url} is larger than the "
                                         f"{entry['bytes']} bytes the manifest says; not kept")
                    digest.update(block)
                    out.write(block)
        if size != entry["bytes"] or digest.hexdigest() != entry["sha256"]:
            raise ValueError(f"download of {name!r} from {url}: {size} bytes, SHA-256 {digest.hexdigest()}; "
                             f"the manifest says {entry['bytes']} bytes, SHA-256 {entry['sha256']}; not kept")
        # mkstemp makes the file private (0600); a public recording may be read by all.
        os.chmod(partial, 0o644)
        os.replace(partial, target)
    except BaseException:
        # Includes KeyboardInterrupt: no half-written temporary file is left behind.
        try:
            os.unlink(partial)
        except FileNotFoundError:
            pass
        raise
    return target
