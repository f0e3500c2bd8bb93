"""reconstruct(): a recording, chunk by chunk, through a recipe, into a Zarr output, on Dask.

The input is a frame-chunked dask array (sources.py).  Each chunk of ``chunk_frames`` frames
(plus, for the 'iir' clutter filter, its warm-up history) becomes one block; ``map_blocks``
maps every block onto the worker's cached plan (recipes.plan_for: built once per worker
thread, reused for every block), and the same task writes the block's output into its own
Zarr chunks and then the chunk's completion marker (store.py).  Only chunks not already
complete are put in the graph, so an interrupted run resumes where it stopped.

Schedulers (``scheduler=``):
- None or 'threads': dask's local threaded scheduler (``n_workers`` threads; no set-up);
  'synchronous' for debugging; 'processes' is refused (no plan reuse across its processes'
  short lives) in favour of 'local'.
- 'local': a dask.distributed LocalCluster of ``n_workers`` worker processes, one thread
  each, started and closed here (``memory_limit`` per worker).
- an address ('tcp://host:8786', 'host:8786'): an existing cluster's scheduler; an
  unreachable one raises ConnectionError naming ``scheduler`` within ``connect_timeout``
  seconds, before anything is written.
- a ``distributed.Client``: used as it is.
- 'cuda': dask-cuda's LocalCUDACluster (one worker per GPU, CUDA_VISIBLE_DEVICES set per
  worker) and the recipe's plans built with backend='cuda'.  Needs dask-cuda and a GPU.
"""
import os
import time
from dataclasses import dataclass

import numpy as np

from .. import _validate
from ._deps import require
from .recipes import Recipe, plan_for
from .sources import FrameSource, open_source
from .store import OutputStore, write_chunk


@dataclass
class RunReport:
    output: str
    n_chunks: int
    computed: int          # chunks computed by this run
    skipped: int           # chunks found complete (resume)
    frames: tuple          # (a, b) input frames reconstructed
    seconds: float
    frames_per_second: float


def parse_frames(text, n_frames):
    """'a:b' (either end optional, Python slice semantics without step) -> (a, b)."""
    if text is None:
        return 0, n_frames
    if isinstance(text, (tuple, list)):
        a, b = text
    else:
        parts = str(text).split(":")
        if len(parts) != 2:
            raise ValueError(f"frames must be 'a:b' (got {text!r})")
        try:
            a, b = (int(p) if p.strip() else None for p in parts)
        except ValueError:
            raise ValueError(f"frames must be 'a:b' with integers (got {text!r})") from None
    a, b, step = slice(a, b).indices(n_frames)
    if b <= a:
        raise ValueError(f"frames {text!r} selects no frame of the {n_frames} in the input")
    return a, b


def check_source(source, recipe):
    """TypeError / ValueError naming the input when its frames do not fit the recipe."""
    if source.frame_shape != recipe.frame_shape:
        raise ValueError(f"input: frames of shape {source.frame_shape}, but the pipeline takes frames of shape "
                         f"{recipe.frame_shape} (n_transmits, n_elements, n_samples)")
    allowed = {recipe.input_dtype}
    if recipe.kind == "rca" and recipe.input_dtype != np.complex64:
        allowed |= {np.dtype(np.int16), np.dtype(np.float32)}
    if source.dtype not in allowed:
        raise TypeError(f"input: dtype {source.dtype}, but the pipeline takes "
                        f"{' or '.join(sorted(str(d) for d in allowed))}")


def layout(source, recipe, frames, chunk_frames):
    a, b = parse_frames(frames, source.n_frames)
    fpc = recipe.frames_per_call
    noun = "ensemble" if recipe.kind == "doppler" else "call"
    chunk_frames = _validate.integer("chunk_frames", chunk_frames, minimum=1)
    if chunk_frames % fpc:
        raise ValueError(f"chunk_frames: {chunk_frames} frames would split {'an' if noun == 'ensemble' else 'a'} {noun} of {fpc} frames "
                         f"(use a multiple of {fpc})")
    n_used = (b - a) // fpc * fpc
    if n_used == 0:
        raise ValueError(f"frames: {b - a} frames hold no whole {noun} of {fpc} frames")
    if recipe.kind != "doppler" and n_used != b - a:
        raise ValueError(f"frames: {b - a} frames are not a whole number of calls of frames_per_call={fpc}")
    n_chunks = -(-n_used // chunk_frames)
    return {"frames": (a, a + n_used), "chunk_frames": chunk_frames, "n_chunks": n_chunks,
            "chunk_outputs": chunk_frames // recipe.frames_per_output, "n_outputs": recipe.n_outputs(n_used),
            "warmup_frames": recipe.warmup_frames,
            "input": {**source.describe(), "shape": list(source.shape), "dtype": str(source.dtype)}}


def default_chunk_frames(recipe, target_bytes=64 << 20):
    """About ``target_bytes`` of input per chunk, in whole calls / ensembles (at least one)."""
    frame_bytes = int(np.prod(recipe.frame_shape)) * recipe.input_dtype.itemsize
    calls = max(1, target_bytes // (frame_bytes * recipe.frames_per_call))
    return int(calls * recipe.frames_per_call)


# ---- the task -------------------------------------------------------------------------

def _chunk_task(frames, *, recipe, path, chunk_ids, warmups, regions, block_info=None):
    """One block = one chunk: reconstruct with this worker's plan, write, mark complete."""
    i = block_info[0]["chunk-location"][0]
    k = chunk_ids[i]
    result = recipe.run(plan_for(recipe), frames, warmups[i])
    write_chunk(path, k, regions[i], result, list(recipe.outputs))
    return np.array([k], dtype=np.int64)


def build_graph(source, recipe, store, pending):
    """The per-chunk delayed tasks of chunks ``pending``: dask array blocks mapped onto
    _chunk_task.  Without warm-up, the input's own blocks (one per chunk): the read and the
    reconstruction are one blockwise map, which Dask fuses into one task per chunk (no
    transfer of RF between workers), and chunks not pending are culled.  With the IIR
    warm-up, each pending chunk is a block of its own, its frames preceded by the warm-up."""
    da = require("dask.array")
    lay = store.layout
    a, b = lay["frames"]
    c = lay["chunk_frames"]
    rf = source.to_dask(c, start=a, stop=b)
    drop = list(range(1, rf.ndim))
    if recipe.warmup_frames == 0:
        n = lay["n_chunks"]
        done = da.map_blocks(_chunk_task, rf, recipe=recipe, path=store.path, chunk_ids=list(range(n)),
                             warmups=[0] * n, regions=[store.region(k) for k in range(n)], chunks=((1,) * n,),
                             drop_axis=drop, dtype=np.int64, meta=np.empty((0,), np.int64),
                             token="usbeam-chunk-" + recipe.key)
        blocks = done.to_delayed().ravel()
        return [blocks[k] for k in pending]
    pieces, warmups, regions = [], [], []
    for k in pending:
        start, stop = k * c, min((k + 1) * c, b - a)
        first = max(0, start - recipe.warmup_frames)
        pieces.append(rf[first:stop].rechunk({0: stop - first}))
        warmups.append(start - first)
        regions.append(store.region(k))
    stacked = pieces[0] if len(pieces) == 1 else da.concatenate(pieces, axis=0)
    done = da.map_blocks(_chunk_task, stacked, recipe=recipe, path=store.path, chunk_ids=list(pending),
                         chunks=((1,) * len(pending),), warmups=warmups, regions=regions, drop_axis=drop,
                         dtype=np.int64, meta=np.empty((0,), np.int64), token="usbeam-chunk-" + recipe.key)
    return done.to_delayed().ravel().tolist()


# ---- schedulers -------------------------------------------------------------------------

def local_cluster(n_workers, memory_limit=None):
    """The LocalCluster of ``scheduler='local'``: ``n_workers`` processes of one thread each,
    tuned for long compute tasks: without the workers' statistical profiler (it samples every
    thread's stack every 10 ms) and without the MALLOC_TRIM_THRESHOLD_ the nanny sets by default
    (it turns off glibc's adaptive mmap threshold, so every chunk-sized array is a fresh mmap,
    page-faulted and zeroed again: ~3 % more CPU in bench_batch.py); OMP_NUM_THREADS=1 kept."""
    dask, distributed = require("dask", "distributed")
    with dask.config.set({"distributed.worker.profile.enabled": False,
                          "distributed.nanny.pre-spawn-environ": {"OMP_NUM_THREADS": 1, "MKL_NUM_THREADS": 1,
                                                                 "OPENBLAS_NUM_THREADS": 1}}):
        return distributed.LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                                        memory_limit=memory_limit or "auto", dashboard_address=None)


class _Scheduler:
    """Where the graph runs: the local scheduler, or a distributed client (closed at the end
    when started here)."""

    def __init__(self, scheduler, n_workers, connect_timeout, memory_limit):
        self.client, self.cluster, self.local = None, None, None
        self.cuda = False
        if scheduler is None or scheduler == "threads":
            self.local, self.n_workers = "threads", n_workers or os.cpu_count()
            return
        if scheduler == "synchronous":
            self.local, self.n_workers = "synchronous", 1
            return
        if scheduler == "processes":
            raise ValueError("scheduler: 'processes' rebuilds plans for every task; use 'local' (a LocalCluster "
                             "of worker processes that keep their plans)")
        distributed = require("distributed")
        if isinstance(scheduler, distributed.Client):
            self.client = scheduler
            return
        if scheduler == "local":
            self.cluster = local_cluster(n_workers or 1, memory_limit)
        elif scheduler == "cuda":
            try:
                from dask_cuda import LocalCUDACluster
            except ImportError as exc:
                raise ImportError("scheduler: 'cuda' needs the dask-cuda package (pip install dask-cuda) "
                                  "and a GPU") from exc
            from .._backend import cuda_available
            if not cuda_available():
                raise ValueError("scheduler: 'cuda' needs usbeam's CUDA backend here "
                                 "(usbeam.build_info()['cuda_error'] says why it is absent)")
            self.cluster = LocalCUDACluster(n_workers=n_workers, threads_per_worker=1, dashboard_address=None)
            self.cuda = True
        elif isinstance(scheduler, str):
            address = scheduler
            try:
                self.client = distributed.Client(address, timeout=connect_timeout)
            except (OSError, TimeoutError) as exc:
                raise ConnectionError(f"scheduler: no Dask scheduler answered at {address!r} within "
                                      f"{connect_timeout} s ({type(exc).__name__}: {exc})") from None
            return
        else:
            raise TypeError(f"scheduler must be None, 'threads', 'synchronous', 'local', 'cuda', an address or a "
                            f"distributed.Client (got {type(scheduler).__name__})")
        self.client = distributed.Client(self.cluster)

    def run(self, tasks, progress):
        """Compute the delayed tasks, calling progress(k) as each chunk completes."""
        if self.client is not None:
            distributed = require("distributed")
            futures = self.client.compute(tasks)
            try:
                for future in distributed.as_completed(futures):
                    progress(int(future.result()[0]))
            except BaseException:
                self.client.cancel(futures)
                raise
            return
        dask = require("dask")
        from dask.callbacks import Callback
        names = {t.key for t in tasks}

        class _Progress(Callback):
            def _posttask(self, key, result, dsk, state, worker_id):
                if key in names:
                    progress(int(np.asarray(result)[0]))

        with _Progress():
            dask.compute(*tasks, scheduler=self.local, num_workers=self.n_workers)

    def close(self):
        if self.cluster is not None:
            if self.client is not None:
                self.client.close()
            self.cluster.close()


def reconstruct(input, output, recipe, *, chunk_frames=None, frames=None, scheduler=None, n_workers=None,
                overwrite=False, progress=True, connect_timeout=10.0, memory_limit=None):
    """Reconstruct ``input`` (a path or a FrameSource) with ``recipe`` into the Zarr group
    ``output``, chunk by chunk on Dask; resumes an interrupted run of the same reconstruction.

    chunk_frames : input frames per chunk (a whole number of calls / ensembles; default about
        64 MB of input).  frames : 'a:b' or (a, b), the input frames to reconstruct.
    scheduler, n_workers, connect_timeout, memory_limit : see the module docstring.
    progress : a tqdm bar over chunks (True), nothing (False), or a callable(k) per chunk.
    Returns a RunReport.
    """
    if not isinstance(recipe, Recipe):
        raise TypeError(f"recipe must be a usbeam.batch.Recipe (got {type(recipe).__name__})")
    source = input if isinstance(input, FrameSource) else open_source(input)
    check_source(source, recipe)
    if chunk_frames is None:
        chunk_frames = default_chunk_frames(recipe)
    lay = layout(source, recipe, frames, chunk_frames)
    connect_timeout = _validate.positive("connect_timeout", connect_timeout)
    runner = _Scheduler(scheduler, n_workers, connect_timeout, memory_limit)  # before the output is touched
    try:
        if runner.cuda:
            recipe = recipe.with_options(backend="cuda")
        store = OutputStore(output, recipe, lay, overwrite=overwrite)
        pending = store.pending()
        t0 = time.perf_counter()
        bar, tick = _progress(progress, lay["n_chunks"], lay["n_chunks"] - len(pending))
        try:
            if pending:
                runner.run(build_graph(source, recipe, store, pending), tick)
        finally:
            if bar is not None:
                bar.close()
        seconds = time.perf_counter() - t0
        done = set(store.done())
        missing = [k for k in range(lay["n_chunks"]) if k not in done]
        if missing:
            raise RuntimeError(f"output: chunks {missing[:8]} have no completion marker after the run")
        store.group.attrs["complete"] = True
    finally:
        runner.close()
    a, b = lay["frames"]
    computed_frames = sum(min((k + 1) * lay["chunk_frames"], b - a) - k * lay["chunk_frames"] for k in pending)
    return RunReport(store.path, lay["n_chunks"], len(pending), lay["n_chunks"] - len(pending), (a, b), seconds,
                     computed_frames / seconds if seconds > 0 else float("nan"))


def _progress(progress, total, already):
    if callable(progress):
        return None, progress
    if not progress:
        return None, lambda k: None
    from tqdm import tqdm
    bar = tqdm(total=total, initial=already, unit="chunk", desc="reconstruct", smoothing=0.1)
    return bar, lambda k: bar.update(1)
