"""Why `import usbeam` failed when its C extension would not import: in a source tree that was
never built, the bare ImportError reads "most likely due to a circular import", which sends a
newcomer the wrong way; this says the extension is not built and how to build it."""
from pathlib import Path


def explain_import_error(exc):
    package = Path(__file__).resolve().parent
    built = sorted(p.name for p in package.glob("_core*.so")) + sorted(p.name for p in package.glob("_core*.pyd"))
    if not built:
        return ImportError(
            f"usbeam's C extension (usbeam._core) is not built in {package}. In a source checkout run "
            "`make build` (or `pip install .` to install it; `python setup.py build_ext --inplace` to build "
            "in place); see README.md, Install.")
    return ImportError(f"usbeam's C extension {built[0]} in {package} could not be loaded ({exc}); "
                       "rebuild it with `make build` or reinstall usbeam")
