"""``python -m usbeam reconstruct INPUT OUTPUT --pipeline SPEC [options]``.

INPUT: a usbeam raw recording, ``file.h5[:dataset]``, ``store.zarr[:array]``, or Vantage
RcvData frames (one file, several, or a glob) with ``--vantage-workspace``.
OUTPUT: the Zarr group written (resumed when it holds the same, interrupted, reconstruction).
--pipeline: a JSON spec file (``usbeam.batch.Recipe.save``), ``input`` (the spec stored in the
input's metadata under "usbeam_spec"), or ``module:function`` / ``path/to/file.py:function``
called as ``function(source) -> usbeam.batch.Recipe``.
--set key=value: replace a recipe parameter (value read as JSON, else as a string), e.g.
``--set clutter='"iir"'`` or ``--set clutter=iir``.

Exit status: 0 done, 2 bad arguments or input (the message names the parameter), 1 a failure
while running, 130 interrupted (Ctrl-C); run the same command again to resume.
"""
import argparse
import importlib
import importlib.util
import json
import os
import sys


def _parser():
    p = argparse.ArgumentParser(prog="python -m usbeam reconstruct",
                                description="Reconstruct a recording chunk by chunk on Dask into a Zarr store.")
    p.add_argument("input")
    p.add_argument("output")
    p.add_argument("--pipeline", required=True,
                   help="JSON spec file, 'input' (spec in the input's metadata), or module:function / file.py:function")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="replace a recipe parameter")
    p.add_argument("--scheduler", default=None,
                   help="'threads' (default), 'local' (LocalCluster of --workers processes), 'cuda' "
                        "(dask-cuda), or a scheduler address (tcp://host:8786)")
    p.add_argument("--workers", type=int, default=None, help="threads or worker processes")
    p.add_argument("--frames", default=None, help="input frames a:b")
    p.add_argument("--chunk-frames", type=int, default=None, help="input frames per chunk")
    p.add_argument("--connect-timeout", type=float, default=10.0, help="seconds to reach --scheduler")
    p.add_argument("--memory-limit", default=None, help="per worker process ('local'), e.g. 2GB")
    p.add_argument("--overwrite", action="store_true", help="replace an OUTPUT holding another reconstruction")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--vantage-workspace", default=None, help="saved Vantage workspace (.mat) giving the frame layout")
    return p


def _load_factory(text):
    target, _, name = text.rpartition(":")
    if target.endswith(".py") or os.path.sep in target:
        spec = importlib.util.spec_from_file_location("usbeam_batch_pipeline", target)
        if spec is None or not os.path.exists(target):
            raise ValueError(f"pipeline: no such file {target!r}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    else:
        module = importlib.import_module(target)
    if not hasattr(module, name):
        raise ValueError(f"pipeline: {target!r} has no function {name!r}")
    return getattr(module, name)


def recipe_from_argument(text, source):
    from .recipes import Recipe
    if text == "input":
        spec = source.meta.get("usbeam_spec")
        if spec is None:
            raise ValueError("pipeline: the input's metadata holds no usbeam_spec")
        return Recipe.from_spec(json.loads(spec) if isinstance(spec, str) else spec)
    if os.path.isfile(text):
        with open(text) as f:
            return Recipe.from_json(f.read())
    if ":" in text:
        recipe = _load_factory(text)(source)
        if not isinstance(recipe, Recipe):
            raise TypeError(f"pipeline: {text} returned {type(recipe).__name__}, not a usbeam.batch.Recipe")
        return recipe
    raise ValueError(f"pipeline: {text!r} is neither a spec file, 'input', nor module:function")


def _options(pairs):
    options = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"set: expected KEY=VALUE (got {pair!r})")
        try:
            options[key] = json.loads(value)
        except json.JSONDecodeError:
            options[key] = value
    return options


def main(argv=None):
    args = _parser().parse_args(argv)
    try:
        from . import reconstruct
        from .sources import VantageFrameSource, open_source
        if args.vantage_workspace:
            from ..io import load_vantage
            workspace = load_vantage(args.vantage_workspace, load_data=False)
            paths = args.input.split(",") if "," in args.input else args.input
            source = VantageFrameSource.from_workspace(paths, workspace)
        else:
            source = open_source(args.input)
        recipe = recipe_from_argument(args.pipeline, source)
        if args.set:
            recipe = recipe.with_options(**_options(args.set))
        report = reconstruct(source, args.output, recipe, chunk_frames=args.chunk_frames, frames=args.frames,
                             scheduler=args.scheduler, n_workers=args.workers, overwrite=args.overwrite,
                             progress=not args.no_progress, connect_timeout=args.connect_timeout,
                             memory_limit=args.memory_limit)
    except KeyboardInterrupt:
        print("usbeam reconstruct: interrupted; run the same command again to resume", file=sys.stderr)
        return 130
    except (ValueError, TypeError, FileNotFoundError, ConnectionError, ImportError) as exc:
        print(f"usbeam reconstruct: error: {exc}", file=sys.stderr)
        return 2
    print(f"usbeam reconstruct: {report.output}: {report.n_chunks} chunks ({report.computed} computed, "
          f"{report.skipped} already complete), frames {report.frames[0]}:{report.frames[1]}, "
          f"{report.seconds:.1f} s, {report.frames_per_second:.1f} frames/s")
    return 0
