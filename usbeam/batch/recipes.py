"""What to reconstruct: a picklable recipe for a pipeline, and the per-worker plan cache.

A recipe holds the constructor arguments of one usbeam pipeline, never a plan (plans own C
memory and cannot be pickled).  Each worker builds the plan from the recipe on its first
chunk and keeps it (``plan_for``): one plan per recipe and per worker thread, reused for
every later chunk (a plan's calls run one at a time, so threads of one worker each get
their own plan to run in parallel; the C execute releases the GIL).  ``plan_builds()``
counts the builds in this process.

Recipes
-------
``Recipe.bmode(probe, sequence, grid, **Pipeline kwargs)`` -- usbeam.Pipeline, RF -> B-mode.
    ``frames_per_call`` frames per pipeline call; ``output``: 'uint8' or 'db' (the B-mode, with
    ``normalize`` 'frame' or a fixed reference: 'global' would take the max of each call, not
    of the record) or 'iq' (the beamformed complex64 image).  Output array "bmode" / "iq",
    ``(n_frames, *grid.shape)``.
``Recipe.doppler(probe, sequence, grid, n_frames=ensemble, prf=..., **DopplerPipeline kwargs)``
    -- usbeam.DopplerPipeline over consecutive, non-overlapping ensembles of ``n_frames``
    frames.  Output arrays "velocity", "variance" (color) and "power", ``(n_ensembles,
    *grid.shape)`` float32.  Chunks hold whole ensembles.  clutter='iir': see IIR below.
``Recipe.rca(array, method, grid, **RCABeamformer kwargs)`` -- usbeam.RCABeamformer, RF
    (float32; int16 is converted chunk by chunk, the plan takes float32) -> volumes or
    B-scans.  Output array "volume", ``(n_frames, *grid.image_shape)``.

IIR clutter filter and "equal to the whole record"
--------------------------------------------------
The 'iir' filter carries its state from one ensemble to the next: the whole-record result is
one DopplerPipeline fed every ensemble in order from the record's start (projection
initialisation on the first ensemble).  A chunk starting at ensemble k > 0 cannot have that
state without filtering everything before it, so it starts ``warmup`` ensembles earlier:
it resets the filter, filters those ensembles (projection initialisation on the first, as
at the record's start) and throws their maps away, then filters its own.  The first chunk
starts at the record's start and equals the whole record bit for bit.  Later chunks differ
from the whole record only by the filter's memory of frames before the warm-up, which
decays like r^W (r: the largest pole radius of the Butterworth high-pass, W: warm-up
frames).  ``warmup='auto'`` picks the fewest whole ensembles with r^W <= ``iir_tolerance``
(default 1e-7, below float32 resolution relative to the filter's input); the cost is W
extra frames beamformed per chunk.  tests/batch/test_equivalence.py measures the
difference.
"""
import collections
import dataclasses
import hashlib
import json
import math
import threading

import numpy as np

from .. import _validate
from .. import geometry, rca as _rca

SPEC_VERSION = 1
_CLASSES = {cls.__name__: cls for cls in (geometry.LinearArray, geometry.PlaneWave, geometry.DivergingWave,
                                          geometry.Focused, geometry.SyntheticAperture, geometry.Delays,
                                          geometry.Grid, _rca.RowColumnArray, _rca.RCAGrid)}


# ---- JSON spec of a recipe ----------------------------------------------------------------

def encode(value):
    """JSON-able form of recipe parameters (geometry dataclasses, arrays, dtypes, numbers)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        name = type(value).__name__
        if name not in _CLASSES:
            raise TypeError(f"recipe parameter of type {name} cannot be stored in a batch spec")
        return {"__class__": name, **{f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value)
                                      if f.init}}
    if isinstance(value, np.ndarray):
        return {"__ndarray__": value.tolist(), "dtype": value.dtype.str}
    if isinstance(value, np.dtype) or (isinstance(value, type) and issubclass(value, np.generic)):
        return {"__dtype__": np.dtype(value).str}
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (list, tuple)):
        return [encode(v) for v in value]
    if isinstance(value, dict):
        return {str(k): encode(v) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"recipe parameter {value!r} ({type(value).__name__}) cannot be stored in a batch spec")


def decode(value):
    if isinstance(value, dict):
        if "__class__" in value:
            fields = {k: decode(v) for k, v in value.items() if k != "__class__"}
            return _CLASSES[value["__class__"]](**fields)
        if "__ndarray__" in value:
            return np.array(value["__ndarray__"], dtype=np.dtype(value["dtype"]))
        if "__dtype__" in value:
            return np.dtype(value["__dtype__"])
        return {k: decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [decode(v) for v in value]
    return value


# ---- recipes ------------------------------------------------------------------------------

KINDS = ("bmode", "doppler", "rca")


class Recipe:
    """A pipeline to run on every chunk (see the module docstring).  Build with
    ``Recipe.bmode``, ``Recipe.doppler``, ``Recipe.rca`` or ``Recipe.from_json``."""

    def __init__(self, kind, params):
        self.kind = _validate.choice("pipeline", kind, KINDS)
        self.params = dict(params)
        self.spec = {"usbeam_batch_spec": SPEC_VERSION, "pipeline": self.kind, "params": encode(self.params)}
        self.json = json.dumps(self.spec, sort_keys=True)
        self.key = hashlib.sha256(self.json.encode()).hexdigest()[:16]
        self._describe()

    # constructors ----------------------------------------------------------------------
    @classmethod
    def bmode(cls, probe, sequence, grid, *, n_samples, fs, fc, frames_per_call=8, output="uint8",
              normalize="frame", **pipeline_options):
        params = dict(probe=probe, sequence=list(geometry.as_sequence(sequence, probe)), grid=grid,
                      n_samples=n_samples, fs=fs, fc=fc, frames_per_call=frames_per_call, output=output,
                      normalize=normalize, **pipeline_options)
        return cls("bmode", params)

    @classmethod
    def doppler(cls, probe, sequence, grid, *, n_frames, n_samples, fs, fc, prf, warmup="auto",
                iir_tolerance=1e-7, **pipeline_options):
        params = dict(probe=probe, sequence=list(geometry.as_sequence(sequence, probe)), grid=grid,
                      n_frames=n_frames, n_samples=n_samples, fs=fs, fc=fc, prf=prf, warmup=warmup,
                      iir_tolerance=iir_tolerance, **pipeline_options)
        return cls("doppler", params)

    @classmethod
    def rca(cls, array, method, grid, *, n_samples, fs, frames_per_call=1, rf_dtype=np.float32,
            **beamformer_options):
        params = dict(array=array, method=method, grid=grid, n_samples=n_samples, fs=fs,
                      frames_per_call=frames_per_call, rf_dtype=rf_dtype, **beamformer_options)
        return cls("rca", params)

    @classmethod
    def from_spec(cls, spec):
        if not isinstance(spec, dict) or spec.get("usbeam_batch_spec") != SPEC_VERSION:
            raise ValueError(f"pipeline: not a usbeam batch spec of version {SPEC_VERSION}")
        return cls(spec["pipeline"], decode(spec["params"]))

    @classmethod
    def from_json(cls, text):
        try:
            spec = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"pipeline: the spec is not valid JSON ({exc})") from None
        return cls.from_spec(spec)

    def save(self, path):
        """Write the spec as JSON (``python -m usbeam reconstruct --pipeline path``)."""
        with open(path, "w") as f:
            f.write(json.dumps(self.spec, indent=1, sort_keys=True))
        return path

    def with_options(self, **options):
        """A copy with some parameters replaced (``--set`` on the command line)."""
        return Recipe(self.kind, {**self.params, **options})

    # what it takes and gives ------------------------------------------------------------
    def _describe(self):
        """Checks the parameters by building the plan once here (so a bad recipe fails in the
        caller, not in a worker) and records shapes."""
        p = self.params
        self.backend = p.get("backend", "cpu")
        if self.kind == "bmode":
            self.frames_per_call = _validate.integer("frames_per_call", p["frames_per_call"], minimum=1)
            self.frames_per_output = 1
            out = _validate.choice("output", p["output"], ("uint8", "db", "iq"))
            if isinstance(p["normalize"], str) and p["normalize"] == "global" and out != "iq":
                raise ValueError("normalize: 'global' takes the max over each call's frames, so chunks would not "
                                 "equal the whole record; use 'frame' or a fixed reference (a float)")
            self.warmup_frames = 0
        elif self.kind == "doppler":
            self.frames_per_call = _validate.integer("n_frames", p["n_frames"], minimum=2)
            self.frames_per_output = self.frames_per_call
            self.warmup_frames = 0
        else:
            self.frames_per_call = _validate.integer("frames_per_call", p["frames_per_call"], minimum=1)
            self.frames_per_output = 1
            self.warmup_frames = 0
        plan = self.build(backend="cpu")  # the shapes; a CUDA recipe may be described on a host without GPU
        if self.kind == "bmode":
            self.frame_shape = plan.input_shape[1:]
            self.input_dtype = plan.input_dtype
            name = "iq" if p["output"] == "iq" else "bmode"
            dtype = np.complex64 if name == "iq" else plan.output_dtype
            self.outputs = {name: (tuple(plan.output_shape[1:]), np.dtype(dtype))}
        elif self.kind == "doppler":
            self.frame_shape = plan.rf_shape[1:]
            self.input_dtype = plan.rf_dtype
            names = (["velocity", "variance"] if plan.color is not None else []) + \
                (["power"] if plan.power is not None else [])
            self.outputs = {n: (plan.image_shape, np.dtype(np.float32)) for n in names}
            if plan.clutter is not None and plan.clutter.method == "iir":
                self.warmup_frames = self._iir_warmup(plan)
        else:
            self.frame_shape = plan.data_shape[1:]
            self.input_dtype = np.dtype(p["rf_dtype"])
            if self.input_dtype not in (np.dtype(np.int16), np.dtype(np.float32)) and plan.data == "rf":
                raise TypeError(f"rf_dtype must be int16 or float32 (got {self.input_dtype})")
            if plan.data == "iq":
                self.input_dtype = np.dtype(np.complex64)
            self.outputs = {"volume": (tuple(plan.grid.image_shape), plan.dtype)}
        self.frame_shape = tuple(int(s) for s in self.frame_shape)

    def _iir_warmup(self, plan):
        """Frames of history each chunk re-filters before its own (module docstring)."""
        p = self.params
        ensemble = self.frames_per_call
        warmup = p.get("warmup", "auto")
        if warmup == "auto":
            tolerance = _validate.positive("iir_tolerance", p.get("iir_tolerance", 1e-7))
            r = iir_pole_radius(plan.clutter.order, plan.clutter.cutoff)
            frames = math.ceil(math.log(tolerance) / math.log(r))
            return int(math.ceil(frames / ensemble)) * ensemble
        return _validate.integer("warmup", warmup, minimum=0) * ensemble

    def build(self, backend=None):
        """The plan (a pipeline object) for this recipe: built once per worker thread."""
        p = dict(self.params)
        if backend is not None:
            p["backend"] = backend
        if self.kind == "bmode":
            from ..pipelines import Pipeline
            output, fpc = p.pop("output"), p.pop("frames_per_call")
            p.pop("warmup", None)
            return Pipeline(p.pop("probe"), p.pop("sequence"), p.pop("grid"), n_frames=fpc,
                            bmode_output="uint8" if output == "iq" else output, **p)
        if self.kind == "doppler":
            from ..pipelines import DopplerPipeline
            for name in ("warmup", "iir_tolerance"):
                p.pop(name, None)
            return DopplerPipeline(p.pop("probe"), p.pop("sequence"), p.pop("grid"), **p)
        fpc = p.pop("frames_per_call")
        p.pop("rf_dtype")
        return _rca.RCABeamformer(p.pop("array"), p.pop("method"), p.pop("grid"), n_frames=fpc, **p)

    def n_outputs(self, n_frames):
        """Output frames (B-mode, volumes) or ensembles (Doppler) of ``n_frames`` input frames."""
        return n_frames // self.frames_per_output

    # one chunk -------------------------------------------------------------------------
    def run(self, plan, frames, warmup=0):
        """Reconstruct ``frames`` (n, *frame_shape); the first ``warmup`` frames are history
        for the IIR filter (their output is dropped).  Returns {output name: array}."""
        n = frames.shape[0] - warmup
        fpc = self.frames_per_call
        if n % fpc or warmup % fpc:
            raise ValueError(f"chunk: {n} frames (+{warmup} warm-up) is not a whole number of "
                             f"{'ensembles' if self.kind == 'doppler' else 'calls'} of {fpc} frames")
        result = {name: np.empty((n // fpc * (fpc // self.frames_per_output),) + shape, dtype)
                  for name, (shape, dtype) in self.outputs.items()}
        if self.kind == "doppler" and plan.clutter is not None and plan.clutter.method == "iir":
            plan.clutter.reset()  # this chunk's stream starts here (the record, or its warm-up)
        for k in range(warmup // fpc):
            plan(frames[k * fpc:(k + 1) * fpc])
        for k in range(n // fpc):
            block = frames[warmup + k * fpc:warmup + (k + 1) * fpc]
            if self.kind == "bmode":
                if "iq" in result:
                    plan(block)
                    result["iq"][k * fpc:(k + 1) * fpc] = _host(plan.image)
                else:
                    plan(block, out=result["bmode"][k * fpc:(k + 1) * fpc])
            elif self.kind == "doppler":
                maps = plan(block)
                for name in result:
                    result[name][k] = _host(getattr(maps, name))
            else:
                data = block if block.dtype == plan.dtype else block.astype(plan.dtype)
                out = plan(data)
                result["volume"][k * fpc:(k + 1) * fpc] = _host(out).reshape((fpc,) + self.outputs["volume"][0])
        return result

    def __repr__(self):
        return f"Recipe({self.kind!r}, key={self.key})"

    # pickling (to workers) keeps the checked attributes: no plan is built to unpickle


def _host(array):
    return array.to_numpy() if hasattr(array, "to_numpy") else array


def iir_pole_radius(order, cutoff):
    """Largest pole radius of the 'iir' clutter filter (Butterworth high-pass by the bilinear
    transform with pre-warping, as csrc/doppler/clutter_iir.c designs it)."""
    warped = math.tan(math.pi * cutoff)
    radius = 0.0
    for k in range(order):
        proto = np.exp(1j * math.pi * (2 * k + order + 1) / (2 * order))
        analog = warped / proto
        radius = max(radius, abs((1 + analog) / (1 - analog)))
    return radius


# ---- per-worker plan cache ----------------------------------------------------------------

_PLANS = collections.OrderedDict()   # (recipe key, thread id) -> plan
_BUILDS = collections.Counter()      # recipe key -> plans built in this process
_LOCK = threading.Lock()
MAX_RECIPES = 4                      # plans of older recipes are let go past this many


def plan_for(recipe):
    """This thread's plan for ``recipe``, built on first use and reused afterwards."""
    key = (recipe.key, threading.get_ident())
    with _LOCK:
        plan = _PLANS.get(key)
        if plan is not None:
            _PLANS.move_to_end(key)
            return plan
    plan = recipe.build()
    with _LOCK:
        _PLANS[key] = plan
        _BUILDS[recipe.key] += 1
        keys = list(dict.fromkeys(k for k, _ in _PLANS))
        for old in keys[:-MAX_RECIPES]:
            for k in [k for k in _PLANS if k[0] == old]:
                del _PLANS[k]
    return plan


def plan_builds(recipe=None):
    """Plans built in this process (for ``recipe``, or all)."""
    with _LOCK:
        return _BUILDS[recipe.key] if recipe is not None else sum(_BUILDS.values())


def clear_plans():
    """Let every cached plan go (and reset the counter)."""
    with _LOCK:
        _PLANS.clear()
        _BUILDS.clear()
