"""Progress bars for long Python-level work (simulation, loops over many frames): tqdm when it
is installed (the ``progress`` extra), nothing otherwise.

``progress`` arguments everywhere mean: None (default) shows a bar when someone can see it,
an interactive terminal on stderr or a Jupyter kernel, and only once the work has run for
half a second (tqdm's ``delay``), so quick calls print nothing; True shows it wherever stderr
goes, at once; False never.  Without tqdm every setting is silently no bar: a bar is a
courtesy, not a result.
"""
import sys

__all__ = ["progress_bar"]


class _NoBar:
    def update(self, n=1):
        pass

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _in_notebook():
    shell = sys.modules.get("IPython")
    if shell is None or "ipykernel" not in sys.modules:
        return False
    try:
        return shell.get_ipython() is not None and "IPKernelApp" in shell.get_ipython().config
    except Exception:  # an IPython without a kernel, or a half-initialised one
        return False


def _stderr_is_terminal():
    try:
        return sys.stderr is not None and sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced or closed stderr
        return False


def progress_bar(total, description, progress=None):
    """A context manager with ``update(n)``: a tqdm bar over ``total`` steps or a no-op."""
    if progress is not None and not isinstance(progress, bool):
        raise TypeError(f"progress must be True, False or None (got {type(progress).__name__})")
    if progress is False:
        return _NoBar()
    notebook = _in_notebook()
    if progress is None and not (notebook or _stderr_is_terminal()):
        return _NoBar()
    try:
        if notebook:
            from tqdm.auto import tqdm
        else:
            from tqdm import tqdm
    except ImportError:
        return _NoBar()
    return tqdm(total=total, desc=description, delay=0.0 if progress else 0.5, file=sys.stderr,
                leave=bool(progress), dynamic_ncols=True)
