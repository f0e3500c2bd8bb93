"""usbeam.batch: offline reconstruction of recordings larger than memory, on Dask.

Needs the ``batch`` extra (dask, distributed, zarr, tqdm): ``pip install 'usbeam[batch]'``;
``import usbeam`` works without it, ``import usbeam.batch`` then raises an ImportError that
names the extra.

- sources.py: recordings read lazily as frame-chunked arrays (usbeam raw files, Vantage
  RcvData frame by frame, HDF5, Zarr), ``open_source``, ``RawWriter``;
- recipes.py: ``Recipe.bmode`` / ``.doppler`` / ``.rca``: which pipeline, picklable, and the
  per-worker plan cache (plans built once per worker thread, reused for every chunk);
- store.py: the chunked Zarr output, its attributes and completion markers;
- run.py: ``reconstruct(input, output, recipe, ...)`` on the local scheduler, a
  dask.distributed cluster, or dask-cuda's LocalCUDACluster;
- cli.py: ``python -m usbeam reconstruct INPUT OUTPUT --pipeline ...``.
"""
from ._deps import require as _require

_require("dask", "dask.array", "zarr")

from .recipes import Recipe, clear_plans, iir_pole_radius, plan_builds, plan_for  # noqa: E402
from .run import RunReport, default_chunk_frames, reconstruct  # noqa: E402
from .sources import (FrameSource, HDF5Source, RawSource, RawWriter, VantageFrameSource, ZarrSource,  # noqa: E402
                      open_source, read_raw_header, write_raw)
from .store import OutputStore  # noqa: E402

__all__ = ["Recipe", "reconstruct", "RunReport", "default_chunk_frames", "plan_for", "plan_builds", "clear_plans",
           "iir_pole_radius", "FrameSource", "RawSource", "RawWriter", "write_raw", "read_raw_header",
           "VantageFrameSource", "HDF5Source", "ZarrSource", "open_source", "OutputStore"]
