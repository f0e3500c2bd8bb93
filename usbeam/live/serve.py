"""``usbeam serve``: a beamforming process behind a versioned shared-memory region.

The acquisition process (MATLAB through libusbeam_client.so, Python through
usbeam.live.ShmClient, or C) pushes raw frames into the region; this process maps
channels while copying each frame into a live Session, runs the pipeline and posts the
image back.  Region layout and protocol: csrc/shm/shm_layout.h (the one definition).

Parameters (JSON, ``usbeam_client_set_params``) describe the frames and the pipeline::

    {"frame": {"shape": [n_rows, n_channels], "dtype": "int16", "order": "F"},
     "channel_map": {"element_channel": [...], "acquisition_row": [...], "n_samples": N},
     ...anything the pipeline factory reads...}

``channel_map`` is optional (without it frames reach the pipeline as they are, in C
order of ``frame.shape``).  The pipeline comes from ``--pipeline module:function`` (or
``path/to/file.py:function``), called as ``function(params) -> pipeline`` each time the
parameters change; the new pipeline is built aside and swapped in between frames.  Each
frame carries the parameter generation current when it was pushed and is processed with
that generation's parameters: the region keeps the last 8 generations
(USBEAM_SHM_PARAM_RING), and a frame whose generation has been overwritten since is
REJECTED with a message saying so, never judged against newer parameters.  Index lists
may be scalars (MATLAB's jsonencode writes a one-element array as a number): they are
read as one-element lists.

``--backend cuda`` runs the session on the GPU (usbeam.live.Session(backend='cuda'): pinned
slots, upload and compute streams); the factory then receives ``params["backend"] ==
"cuda"`` and must return a pipeline taking DeviceArrays (e.g. ``usbeam.Pipeline(...,
backend=params["backend"])``); each image is copied back to the host for the region.

Outcome of each frame (result entry): OK with the image, DROPPED (overload), REJECTED
(wrong size, no or invalid parameters: the message says which), FAILED (the pipeline
raised) or ABANDONED (its writer died mid-push, or was still writing after
--write-timeout-ms).  A dead writer's slot is reclaimed at once; a live but slow
writer's slot is quarantined until it commits (refused) or aborts, so its late stores
never land in another client's frame.  The server keeps serving either way.
"""
import argparse
import importlib
import importlib.util
import json
import signal
import sys
import threading
import time

import numpy as np

from .. import _backend, _core, device
from .channel_map import ChannelMap
from .pipeline import CallablePipeline
from .session import Session, SessionStopped

STATUS_OK, STATUS_DROPPED, STATUS_REJECTED, STATUS_FAILED, STATUS_ABANDONED = range(5)
_POLICIES = {"drop_oldest": 0, "block": 1}


class DevicePassthrough:
    """The passthrough of a backend='cuda' session: out = frame, DeviceArray to DeviceArray
    (an asynchronous device copy on the stream the frame is pending on)."""

    backend = "cuda"

    def __init__(self, shape, dtype):
        self.input_shape = self.output_shape = tuple(shape)
        self.input_dtype = self.output_dtype = np.dtype(dtype)

    def __call__(self, frame, out):
        if frame.device == "cpu" or out.device == "cpu":   # host DeviceArrays: a plain copy
            np.copyto(np.from_dlpack(out), np.from_dlpack(frame))
            return out
        stream = frame.stream or 1
        _core.device_copy(out.ptr, frame.ptr, frame.nbytes, stream)
        device.mark_used(out, stream)
        return out


def _as_list(value):
    """A JSON index list, or a scalar standing for a one-element list, as a 1-D list."""
    return np.atleast_1d(np.asarray(value)).tolist()


def normalize_params(params):
    """The parameters with scalar ``frame.shape`` / ``channel_map`` index lists read as
    one-element lists (MATLAB's jsonencode turns ``[x]`` into ``x``); a copy, never the
    caller's dict."""
    if not isinstance(params, dict):
        raise ValueError(f"parameters must be a JSON object (got {type(params).__name__})")
    params = dict(params)
    frame = params.get("frame")
    if isinstance(frame, dict) and "shape" in frame:
        params["frame"] = dict(frame, shape=_as_list(frame["shape"]))
    cmap = params.get("channel_map")
    if isinstance(cmap, dict):
        cmap = dict(cmap)
        for key in ("element_channel", "acquisition_row"):
            if key in cmap:
                cmap[key] = _as_list(cmap[key])
        params["channel_map"] = cmap
    return params


def passthrough(params):
    """Default pipeline factory: returns the (channel-mapped) frame unchanged."""
    params = normalize_params(params)
    frame = params["frame"]
    cmap = params.get("channel_map")
    shape = (tuple(frame["shape"]) if cmap is None else
             (len(cmap["acquisition_row"]), len(cmap["element_channel"]), int(cmap["n_samples"])))
    dtype = np.dtype(frame.get("dtype", "int16"))
    if params.get("backend") == "cuda":
        return DevicePassthrough(shape, dtype)
    return CallablePipeline(lambda x: x, shape, dtype, shape, dtype)


def load_factory(spec):
    """'module:function' or 'path/to/file.py:function' -> the function."""
    if callable(spec):
        return spec
    module_name, sep, attr = str(spec).rpartition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"pipeline must be 'module:function' or 'file.py:function' (got {spec!r})")
    if module_name.endswith(".py"):
        loader = importlib.util.spec_from_file_location("usbeam_serve_pipeline", module_name)
        if loader is None:
            raise ValueError(f"pipeline: cannot load {module_name}")
        module = importlib.util.module_from_spec(loader)
        loader.loader.exec_module(module)
    else:
        module = importlib.import_module(module_name)
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise ValueError(f"pipeline: {spec} is not a callable")
    return factory


class _FrameSpec:
    def __init__(self, params):
        params = normalize_params(params)
        frame = params.get("frame")
        if not isinstance(frame, dict) or "shape" not in frame:
            raise ValueError('parameters need "frame": {"shape": [...], "dtype": ..., "order": "F" or "C"}')
        self.shape = tuple(int(s) for s in frame["shape"])
        if not self.shape or min(self.shape) <= 0:
            raise ValueError(f"frame.shape must be positive (got {self.shape})")
        self.dtype = np.dtype(frame.get("dtype", "int16"))
        self.order = str(frame.get("order", "F")).upper()
        if self.order not in ("C", "F"):
            raise ValueError(f"frame.order must be 'C' or 'F' (got {self.order!r})")
        self.nbytes = int(np.prod(self.shape)) * self.dtype.itemsize
        cmap = params.get("channel_map")
        self.channel_map = None
        if cmap is not None:
            if len(self.shape) != 2:
                raise ValueError("frame.shape must be (n_rows, n_channels) with a channel_map")
            self.channel_map = ChannelMap(self.shape, cmap["element_channel"], cmap["acquisition_row"],
                                          cmap["n_samples"], self.dtype)

    def view(self, raw):
        data = raw.view(self.dtype)
        return data.reshape(self.shape, order=self.order)


class Server:
    """Own a shared-memory region and serve frames until stop() (or max_frames)."""

    def __init__(self, name="/usbeam", *, slots=3, results=8, slot_bytes=64 << 20, result_bytes=16 << 20,
                 policy="drop_oldest", pipeline="usbeam.live.serve:passthrough", write_timeout_ms=1000,
                 replace_stale=False, session_slots=3, log=None, backend="cpu", vantage=None, pdata=1,
                 buffer=1):
        if policy not in _POLICIES:
            raise ValueError(f"policy must be 'drop_oldest' or 'block' (got {policy!r})")
        self.backend = _backend.check_backend(backend)
        if vantage is not None:   # the workspace's own beamformer (usbeam.Pipeline.from_vantage)
            from .vantage import VantageFactory
            self.factory = VantageFactory(vantage, pdata=pdata, buffer=buffer, backend=self.backend)
        else:
            self.factory = load_factory(pipeline)
        self.name = name
        self.session_slots = int(session_slots)
        self._log = log or (lambda msg: print(f"usbeam serve: {msg}", file=sys.stderr, flush=True))
        self._srv = _core.shm_server_create(name, int(slots), int(results), int(slot_bytes), int(result_bytes),
                                            _POLICIES[policy], int(write_timeout_ms), bool(replace_stale))
        self._stop = threading.Event()
        self._session = None
        self._spec = None
        self._generation = 0
        self._param_error = None
        self.frames_taken = 0

    # results posted from the session's compute thread
    def _post(self, frame_id, status, image, push_ns, message=""):
        try:
            _core.shm_server_post(self._srv, frame_id, status, image, push_ns, message[:255])
        except Exception as exc:  # e.g. an image larger than result_bytes
            _core.shm_server_post(self._srv, frame_id, STATUS_FAILED, None, push_ns, str(exc)[:255])

    def _on_result(self, result):
        frame_id, push_ns = result.meta
        image = result.image
        if not isinstance(image, np.ndarray):      # a CUDA session's DeviceArray: to the host
            image = image.to_numpy()
        self._post(frame_id, STATUS_OK, image, push_ns)

    def _on_drop(self, frame_id, meta):
        self._post(meta[0], STATUS_DROPPED, None, meta[1], "dropped")

    def _on_error(self, frame_id, meta, exc):
        self._post(meta[0], STATUS_FAILED, None, meta[1], f"{type(exc).__name__}: {exc}")

    def _apply_params(self, generation):
        """Make `generation` (a frame's own) the current parameters; None or a reason to
        reject the frame when they cannot be had."""
        try:
            _, text = _core.shm_server_params(self._srv, generation)
        except ValueError as exc:            # overwritten in the ring, or never set
            return str(exc)
        self._generation = generation
        self._param_error = None
        try:
            params = normalize_params(json.loads(text))
            params["backend"] = self.backend
            complete = getattr(self.factory, "complete_params", None)
            if complete is not None:       # e.g. --vantage: the workspace fills in / checks the frame
                params = complete(params)
            spec = _FrameSpec(params)
            pipeline = self.factory(params)
            same_slots = (self._session is not None and self._spec is not None and
                          self._session.pipeline.input_shape == tuple(pipeline.input_shape) and
                          np.dtype(self._session.pipeline.input_dtype) == np.dtype(pipeline.input_dtype))
            if same_slots:
                self._session.update(pipeline, channel_map=spec.channel_map)
            else:
                if self._session is not None:
                    self._session.stop(drain=True)
                self._session = Session(pipeline, slots=self.session_slots, policy="block",
                                        channel_map=spec.channel_map, results=4, callback=self._on_result,
                                        on_drop=self._on_drop, on_error=self._on_error, backend=self.backend)
            self._spec = spec
            self._log(f"parameters generation {generation} applied")
        except Exception as exc:
            self._param_error = f"parameters (generation {generation}) are invalid: {type(exc).__name__}: {exc}"
            self._log(self._param_error)
        return None

    def _handle(self, frame_id, generation, push_ns, raw):
        if generation == 0:
            return self._post(frame_id, STATUS_REJECTED, None, push_ns,
                              "no parameters set: call usbeam_client_set_params first")
        if generation != self._generation:   # the frame's own parameters, older or newer
            refused = self._apply_params(generation)
            if refused:
                return self._post(frame_id, STATUS_REJECTED, None, push_ns, refused)
        if self._param_error:
            return self._post(frame_id, STATUS_REJECTED, None, push_ns, self._param_error)
        if self._session is None:
            return self._post(frame_id, STATUS_REJECTED, None, push_ns,
                              "no parameters set: call usbeam_client_set_params first")
        spec = self._spec
        if raw.nbytes != spec.nbytes:
            return self._post(frame_id, STATUS_REJECTED, None, push_ns,
                              f"frame has {raw.nbytes} bytes; the parameters (generation {generation}) say "
                              f"{spec.dtype} {spec.shape} = {spec.nbytes} bytes")
        try:
            self._session.push(spec.view(raw), meta=(frame_id, push_ns))
        except (TypeError, ValueError) as exc:
            self._post(frame_id, STATUS_REJECTED, None, push_ns, str(exc))
        except SessionStopped:
            self._post(frame_id, STATUS_DROPPED, None, push_ns, "server stopping")

    def serve(self, max_frames=None):
        """Serve until stop() (from another thread or a signal) or max_frames frames."""
        self._log(f"serving {self.name} (pid {__import__('os').getpid()})")
        try:
            while not self._stop.is_set() and (max_frames is None or self.frames_taken < max_frames):
                taken = _core.shm_server_next_frame(self._srv, 20)
                if taken is None:
                    continue
                slot, frame_id, generation, push_ns, raw = taken
                self.frames_taken += 1
                try:
                    self._handle(frame_id, generation, push_ns, raw)
                finally:
                    del raw
                    _core.shm_server_release(self._srv, slot)
            if self._session is not None:
                self._session.wait_idle(timeout=5.0)
        finally:
            self.close()

    def stop(self):
        self._stop.set()

    def counters(self):
        return _core.shm_server_counters(self._srv)

    def session_stats(self):
        return None if self._session is None else self._session.stats()

    def close(self):
        if self._session is not None:
            self._session.stop(drain=False)
        _core.shm_server_stop(self._srv)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        self.close()


def main(argv=None):
    parser = argparse.ArgumentParser(prog="usbeam serve", description=__doc__.split("\n\n")[0])
    parser.add_argument("--name", default="/usbeam", help="POSIX shared-memory name (default /usbeam)")
    parser.add_argument("--slots", type=int, default=3, help="frame slots in the region")
    parser.add_argument("--results", type=int, default=8, help="result entries in the region")
    parser.add_argument("--slot-bytes", type=int, default=64 << 20, help="largest frame, bytes")
    parser.add_argument("--result-bytes", type=int, default=16 << 20, help="largest image, bytes")
    parser.add_argument("--policy", choices=sorted(_POLICIES), default="drop_oldest")
    parser.add_argument("--pipeline", default="usbeam.live.serve:passthrough",
                        help="factory module:function or file.py:function, called with the parameters dict")
    parser.add_argument("--write-timeout-ms", type=int, default=1000,
                        help="a frame still being written after this long is abandoned (its slot is freed "
                             "once the writer commits, aborts or dies)")
    parser.add_argument("--replace-stale", action="store_true",
                        help="replace a region left by a server that is no longer running")
    parser.add_argument("--max-frames", type=int, default=None, help="exit after this many frames")
    parser.add_argument("--backend", choices=("cpu", "cuda"), default="cpu",
                        help="run the session on the CPU or on the GPU (pipeline factories get params['backend'])")
    parser.add_argument("--vantage", default=None, metavar="WORKSPACE.mat",
                        help="serve the beamformer of this saved Vantage workspace (usbeam.Pipeline.from_vantage: "
                             "probe, transmits, t0, PData grid); the workspace fills in or checks the client's "
                             "frame layout and channel map (replaces --pipeline)")
    parser.add_argument("--pdata", type=int, default=1, help="--vantage: the PData giving the image grid (1-based)")
    parser.add_argument("--buffer", type=int, default=1,
                        help="--vantage: the RcvBuffer whose frames are pushed (1-based, as Receive.bufnum)")
    args = parser.parse_args(argv)
    if args.vantage is not None and args.pipeline != parser.get_default("pipeline"):
        print("usbeam serve: error: --vantage serves the workspace's own beamformer; give it or --pipeline, "
              "not both", file=sys.stderr)
        return 2
    try:
        server = Server(args.name, slots=args.slots, results=args.results, slot_bytes=args.slot_bytes,
                        result_bytes=args.result_bytes, policy=args.policy, pipeline=args.pipeline,
                        write_timeout_ms=args.write_timeout_ms, replace_stale=args.replace_stale,
                        backend=args.backend, vantage=args.vantage, pdata=args.pdata, buffer=args.buffer)
    except (ValueError, TypeError, MemoryError, ImportError, OSError, _core.UsbeamError) as exc:
        print(f"usbeam serve: error: {exc}", file=sys.stderr)
        return 2
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: server.stop())
    started = time.monotonic()
    server.serve(max_frames=args.max_frames)
    counters = server.counters()
    print(f"usbeam serve: stopped after {time.monotonic() - started:.1f} s: {counters}", file=sys.stderr)
    return 0
