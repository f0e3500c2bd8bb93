"""Old home of ``usbeam serve``, kept for one release: the server is :mod:`usbeam.live.serve`.

``--pipeline usbeam.serve:passthrough`` and ``from usbeam.serve import Server`` keep working
through the names below; new code imports ``usbeam.live.serve``.
"""
from .live.serve import (STATUS_ABANDONED, STATUS_DROPPED, STATUS_FAILED, STATUS_OK,  # noqa: F401
                         STATUS_REJECTED, DevicePassthrough, Server, load_factory, main, normalize_params,
                         passthrough)
