"""How plans, pipelines, sessions and recordings print in a terminal and in Jupyter: one
line of their parameters for ``repr`` (never ``<object at 0x...>``, never the data) and a
small two-column table for ``_repr_html_``."""
import html

import numpy as np


def short(value):
    """A value as a short string: arrays by shape and dtype, never their contents."""
    if isinstance(value, np.ndarray):
        return f"array{value.shape} {value.dtype}"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, np.dtype):
        return value.name
    return repr(value) if isinstance(value, str) else str(value)


def plan_repr(name, fields):
    """``Name(key=value, ...)`` with values shortened by ``short``."""
    return f"{name}(" + ", ".join(f"{k}={short(v)}" for k, v in fields.items()) + ")"


def html_table(title, rows):
    """A titled two-column HTML table of ``rows`` ({name: value})."""
    body = "".join(f"<tr><th style='text-align:left'>{html.escape(str(k))}</th>"
                   f"<td style='text-align:left'>{html.escape(short(v) if not isinstance(v, str) else v)}</td></tr>"
                   for k, v in rows.items())
    return f"<table><caption style='text-align:left'><b>{html.escape(title)}</b></caption>{body}</table>"


def attrs_repr(obj, names):
    """``Class(name=value, ...)`` of the attributes ``names`` that ``obj`` has and that are not
    None; frequencies and times are shown as numbers in SI units, arrays by shape."""
    fields = {}
    for name in names:
        value = getattr(obj, name, None)
        if value is not None:
            fields[name] = value
    return plan_repr(type(obj).__name__, fields)
