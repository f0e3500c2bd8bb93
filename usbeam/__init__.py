"""usbeam: ultrasound channel data to images, fast enough for live imaging.

A thin Python layer over a C11 core (the CPU reference backend, OpenMP) and CUDA kernels.
Every stage has a plan object (built once from SI-unit parameters, executed many times)
and a one-shot function.  Arrays are NumPy on the CPU and usbeam.DeviceArray (or any
DLPack / CUDA-array-interface array) on the GPU; conventions are in README.md.

The names below are grouped in the order the data flows:

  acquire    Hadamard-encoded transmits decoded        hadamard.py
  demod      RF -> IQ                                  rf2iq.py
  beamform   IQ -> image: linear, convex, phased,      probes.py, geometry.py, grids.py,
             matrix and row-column arrays              beamformer.py, rca.py
  bmode      image -> display; the chain RF -> B-mode  bmode.py, pipelines/
  doppler    ensemble -> clutter filter -> maps        clutter.py, doppler.py, pipelines/
  ai         model input, detection, segmentation      ai
  live       sessions at the scanner's rate, serve     live/
  data       recordings, datasets, simulators          io/, datasets.py, simulate/
  quality    image-quality metrics (PICMUS, CUBDL)     metrics.py
"""
try:
    from . import _core
except ImportError as _exc:
    from ._extension import explain_import_error

    raise explain_import_error(_exc) from _exc

# errors, builds and backends, device arrays (every stage)
from ._core import UsbeamError
from ._backend import backends, build_info, cuda_available, cuda_devices, release_memory
from . import device
from .device import DeviceArray

# acquire
from .hadamard import HadamardDecodePlan, hadamard, hadamard_decode, hadamard_orders

# demod
from .rf2iq import RF2IQPlan, rf2iq

# beamform
from .probes import ConvexArray, ElementArray, LinearArray, MatrixArray
from .geometry import (Delays, DivergingWave, Focused, Grid, PlaneWave, SyntheticAperture,
                       plane_wave_sequence)
from .grids import PolarGrid, SphericalGrid, VolumeGrid
from .beamformer import Beamformer, auto_f_number, das
from .scanlines import ScanLineBeamformer
from .rca import (RCA_METHODS, RCABeamformer, RCAGrid, RowColumnArray, rca_beamform, rca_cross_planes,
                  rca_decode, tobe_unflip)

# bmode
from .bmode import BModePlan, EnvelopePlan, bmode, envelope
from .scan_convert import ScanConvertPlan, scan_convert
from .pipelines import Pipeline

# doppler
from .clutter import ClutterFilter, clutter_filter
from .doppler import (ColorDopplerPlan, DopplerDisplay, PowerDopplerPlan, color_doppler, nyquist_velocity,
                      power_doppler)
from .pipelines import DopplerMaps, DopplerPipeline

# ai
from .ai import (ComponentsPlan, DetectPlan, ModelInputPlan, detect_postprocess, fill_holes,
                 float16_to_float32, float32_to_float16, label, largest_component, model_input, nms,
                 regionprops_basic, regionprops_basic_device, remove_small_components, segment_argmax,
                 segment_threshold)

# live
from . import live

# data and simulation
from . import datasets, io, metrics, simulate
from .io import MustRecording, load_must, plane_wave_angle
from .simulate import cyst_phantom, simulate_rca, simulate_rf

__version__ = "0.1.0"

__all__ = [
    # errors, builds and backends, device arrays
    "UsbeamError", "backends", "build_info", "cuda_available", "cuda_devices", "release_memory", "device",
    "DeviceArray",
    # acquire
    "HadamardDecodePlan", "hadamard", "hadamard_decode", "hadamard_orders",
    # demod
    "RF2IQPlan", "rf2iq",
    # beamform
    "LinearArray", "ConvexArray", "MatrixArray", "ElementArray", "PlaneWave", "DivergingWave", "Focused", "SyntheticAperture", "Delays", "Grid",
    "PolarGrid", "VolumeGrid", "SphericalGrid", "plane_wave_sequence", "Beamformer", "ScanLineBeamformer", "das", "auto_f_number",
    "RowColumnArray", "RCAGrid", "RCABeamformer", "RCA_METHODS", "rca_beamform", "rca_cross_planes",
    "rca_decode", "tobe_unflip",
    # bmode
    "BModePlan", "EnvelopePlan", "bmode", "envelope", "ScanConvertPlan", "scan_convert", "Pipeline",
    # doppler
    "ClutterFilter", "clutter_filter", "ColorDopplerPlan", "color_doppler", "PowerDopplerPlan",
    "power_doppler", "DopplerDisplay", "nyquist_velocity", "DopplerPipeline", "DopplerMaps",
    # ai
    "ModelInputPlan", "model_input", "float32_to_float16", "float16_to_float32", "DetectPlan",
    "detect_postprocess", "nms", "segment_threshold", "segment_argmax", "ComponentsPlan", "label",
    "fill_holes", "largest_component", "remove_small_components", "regionprops_basic",
    "regionprops_basic_device",
    # live
    "live",
    # data and simulation
    "io", "MustRecording", "load_must", "plane_wave_angle", "datasets", "simulate", "simulate_rf",
    "cyst_phantom", "simulate_rca", "metrics",
]
