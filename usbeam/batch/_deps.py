"""The optional packages usbeam.batch needs (the ``batch`` extra: dask, distributed, zarr, tqdm).

``import usbeam`` never imports them; ``import usbeam.batch`` does, and fails with an
ImportError that names the extra when one is missing.
"""
import importlib

EXTRA = "batch"
REQUIRED = ("dask", "zarr")


def require(*names):
    """Import and return the named modules, or raise ImportError naming the ``batch`` extra."""
    modules = []
    for name in names or REQUIRED:
        try:
            modules.append(importlib.import_module(name))
        except ImportError as exc:
            top = name.split(".")[0]
            raise ImportError(
                f"usbeam.batch needs the '{top}' package, which is not installed: "
                f"pip install 'usbeam[{EXTRA}]' (installs dask, distributed, zarr and tqdm)") from exc
    return modules[0] if len(modules) == 1 else modules

