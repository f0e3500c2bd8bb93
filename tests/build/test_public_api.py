"""The public names, pinned: a name leaves (or moves) only when this list changes with it.

``usbeam.__all__`` and the ``__all__`` of the public subpackages are compared with the
lists below; every listed name must resolve.  The old homes kept for one release
(``usbeam.serve``, ClutterFilter in ``usbeam.doppler``) must still give the same objects.
The import graph of the package must have no cycle (a module-level import of ``a.b.c`` runs
the ``__init__`` of ``a`` and ``a.b`` first, so it counts as importing those too).
"""
import ast
import importlib
from pathlib import Path

import pytest

import usbeam

PUBLIC = {
    "usbeam": [
        "BModePlan", "Beamformer", "ClutterFilter", "ColorDopplerPlan", "ComponentsPlan", "ConvexArray", "Delays",
        "DetectPlan", "ElementArray", "MatrixArray",
        "DeviceArray", "DivergingWave", "DopplerDisplay", "EnvelopePlan", "DopplerMaps", "DopplerPipeline", "Focused", "Grid",
        "HadamardDecodePlan", "LinearArray", "ModelInputPlan", "MustRecording", "Pipeline", "PlaneWave",
        "PolarGrid", "PowerDopplerPlan", "RCABeamformer", "RCAGrid", "RCA_METHODS", "RF2IQPlan", "RowColumnArray",
        "ScanConvertPlan", "ScanLineBeamformer", "SphericalGrid", "SyntheticAperture", "UsbeamError", "VolumeGrid", "auto_f_number", "backends", "bmode", "build_info", "clutter_filter",
        "color_doppler", "cuda_available", "cuda_devices", "cyst_phantom", "das", "datasets",
        "detect_postprocess", "device", "envelope", "fill_holes", "float16_to_float32", "float32_to_float16", "hadamard",
        "hadamard_decode", "hadamard_orders", "io", "label", "largest_component", "live", "load_must", "metrics",
        "model_input", "nms", "nyquist_velocity", "plane_wave_angle", "plane_wave_sequence", "power_doppler",
        "rca_beamform", "rca_cross_planes", "rca_decode", "regionprops_basic", "scan_convert", "regionprops_basic_device",
        "release_memory",
        "remove_small_components", "rf2iq", "segment_argmax", "segment_threshold", "simulate", "simulate_rca",
        "simulate_rf", "tobe_unflip",
    ],
    "usbeam.device": ["CudaExecution", "DeviceArray", "asarray", "empty", "from_numpy", "to_numpy"],
    "usbeam.clutter": ["ClutterFilter", "clutter_filter"],
    "usbeam.doppler": ["ColorDopplerPlan", "DopplerDisplay", "PowerDopplerPlan", "color_doppler",
                       "nyquist_velocity", "power_doppler"],
    "usbeam.pipelines": ["DopplerMaps", "DopplerPipeline", "Pipeline"],
    "usbeam.io": ["MustRecording", "Recording", "VantageAcquisition", "VantageProbe", "VantageTransmit", "VantageWorkspace",
                  "load_must", "load_uff", "load_vantage", "plane_wave_angle", "save_uff", "vantage_to_recording"],
    "usbeam.metrics": ["annulus", "circle", "cnr", "contrast", "envelope", "fwhm", "gcnr", "rectangle",
                       "speckle_snr"],
    # needs the batch extra (dask, zarr): requirements-dev.txt installs it
    "usbeam.batch": ["FrameSource", "HDF5Source", "OutputStore", "RawSource", "RawWriter", "Recipe", "RunReport",
                     "VantageFrameSource", "ZarrSource", "clear_plans", "default_chunk_frames", "iir_pole_radius",
                     "open_source", "plan_builds", "plan_for", "read_raw_header", "reconstruct", "write_raw"],
    "usbeam.simulate": ["cyst_phantom", "gaussian_pulse", "pulse_sigma", "simulate_rca", "simulate_rf"],
    "usbeam.live": ["CallablePipeline", "ChannelMap", "FrameDropped", "FrameFailed", "Result", "Session",
                    "SessionStopped", "ShmClient", "SimulatedScanner", "as_pipeline", "channel_map_from_vantage",
                    "from_vantage", "simulate_plane_wave_rf", "to_rcvdata"],
}


@pytest.mark.parametrize("module", sorted(PUBLIC))
def test_public_names_are_pinned(module):
    mod = importlib.import_module(module)
    assert sorted(mod.__all__) == sorted(PUBLIC[module])
    assert len(set(mod.__all__)) == len(mod.__all__)
    for name in mod.__all__:
        assert getattr(mod, name) is not None


def test_names_kept_at_their_old_homes():
    from usbeam import doppler, serve
    from usbeam.live import serve as live_serve

    for name in ("Server", "main", "passthrough", "normalize_params", "load_factory", "DevicePassthrough"):
        assert getattr(serve, name) is getattr(live_serve, name)
    assert doppler.ClutterFilter is usbeam.ClutterFilter and doppler.clutter_filter is usbeam.clutter_filter
    # the names public in usbeam (functions shadow their modules as before)
    assert callable(usbeam.bmode) and callable(usbeam.rf2iq) and callable(usbeam.simulate_rca)


def _module_imports(path, name, is_package):
    """Modules of usbeam imported at module level (not inside functions) by the file."""
    package = name if is_package else name.rpartition(".")[0]
    found = set()
    for node in ast.parse(path.read_text()).body:
        nodes = [node]
        if isinstance(node, ast.Try):  # the extension's import guard in usbeam/__init__.py
            nodes = node.body + [n for h in node.handlers for n in h.body]
        for item in nodes:
            if isinstance(item, ast.Import):
                found.update(a.name for a in item.names)
            elif isinstance(item, ast.ImportFrom):
                base = item.module or ""
                if item.level:
                    parts = package.split(".")
                    parent = ".".join(parts[:len(parts) - item.level + 1])
                    base = f"{parent}.{base}" if base else parent
                found.add(base)
                found.update(f"{base}.{a.name}" for a in item.names)  # `from . import x`: a submodule
    return found


def import_graph():
    """{module: modules of usbeam it imports at module level}, with the implied parents."""
    root = Path(usbeam.__file__).parent
    modules = {}
    for path in root.rglob("*.py"):
        parts = path.relative_to(root.parent).with_suffix("").parts
        is_package = parts[-1] == "__init__"
        modules[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    graph = {}
    for name, (path, is_package) in modules.items():
        edges = set()
        for target in _module_imports(path, name, is_package):
            # importing a.b.c runs a/__init__ and a/b/__init__ first
            pieces = target.split(".")
            edges.update(".".join(pieces[:i]) for i in range(1, len(pieces) + 1))
        # a package's own parents are imported before it, not by it
        graph[name] = {t for t in edges if t in modules and t != name and not name.startswith(t + ".")}
    return graph


def test_no_import_cycle():
    graph = import_graph()
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for target in sorted(graph[node]):
            if state.get(target) == "open":
                cycle = stack[stack.index(target):] + [target]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if target not in state:
                visit(target)
        stack.pop()
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node)
