"""usbeam: ultrasound channel data to images, fast enough for live imaging.

A thin Python layer over a C11 core (the CPU reference backend, OpenMP) and CUDA kernels.
Every kernel family has a plan object (built once from SI-unit parameters, executed many
times) and a one-shot function.  Arrays are NumPy on the CPU; conventions are in README.md.
"""
try:
    from . import _core
except ImportError as _exc:
    from ._extension import explain_import_error

    raise explain_import_error(_exc) from _exc
from ._core import UsbeamError
from ._backend import backends, build_info, cuda_available, cuda_devices
from . import datasets
from .bmode import BModePlan, bmode

# family cuda:
from . import device
from .device import DeviceArray

# family rf2iq:
from .rf2iq import RF2IQPlan, rf2iq

# family das:
from .geometry import (Delays, DivergingWave, Focused, Grid, LinearArray, PlaneWave, SyntheticAperture,
                       plane_wave_sequence)
from .simulate import cyst_phantom, simulate_rf
from .beamformer import Beamformer, auto_f_number, das
from .io import MustRecording, load_must, plane_wave_angle
from . import io, simulate
from .pipelines import Pipeline

# family doppler:
from .clutter import ClutterFilter, clutter_filter
from .doppler import (ColorDopplerPlan, DopplerDisplay, PowerDopplerPlan, color_doppler, nyquist_velocity,
                      power_doppler)
from .pipelines import DopplerMaps, DopplerPipeline

# family hadamard:
from .hadamard import HadamardDecodePlan, hadamard, hadamard_decode, hadamard_orders

# family rca:
from .rca import (RCA_METHODS, RCABeamformer, RCAGrid, RowColumnArray, rca_beamform, rca_cross_planes,
                  rca_decode, tobe_unflip)
from .simulate import simulate_rca

# family ai:
from .ai import (ComponentsPlan, DetectPlan, ModelInputPlan, detect_postprocess, fill_holes,
                 float16_to_float32, float32_to_float16, label, largest_component, model_input, nms,
                 regionprops_basic, regionprops_basic_device, remove_small_components, segment_argmax,
                 segment_threshold)

# family live:
from . import live

__version__ = "0.1.0"

__all__ = [
    "UsbeamError",
    "backends",
    "build_info",
    "cuda_available",
    "cuda_devices",
    "BModePlan",
    "bmode",
    "Pipeline",
    "datasets",
    "io",
    "simulate",
]

# family cuda (extend __all__ here):
__all__ += ["DeviceArray", "device"]

# family rf2iq (extend __all__ here):
__all__ += ["RF2IQPlan", "rf2iq"]

# family das (extend __all__ here):
__all__ += ["LinearArray", "PlaneWave", "DivergingWave", "Focused", "SyntheticAperture", "Delays", "Grid",
            "plane_wave_sequence", "simulate_rf", "cyst_phantom", "Beamformer", "das", "auto_f_number",
            "MustRecording", "load_must", "plane_wave_angle"]

# family doppler (extend __all__ here):
__all__ += ["ClutterFilter", "clutter_filter", "ColorDopplerPlan", "color_doppler", "PowerDopplerPlan",
            "power_doppler", "DopplerDisplay", "nyquist_velocity", "DopplerMaps", "DopplerPipeline"]

# family hadamard (extend __all__ here):
__all__ += ["HadamardDecodePlan", "hadamard", "hadamard_decode", "hadamard_orders"]

# family rca (extend __all__ here):
__all__ += ["RCA_METHODS", "RCABeamformer", "RCAGrid", "RowColumnArray", "rca_beamform", "rca_cross_planes",
            "rca_decode", "simulate_rca", "tobe_unflip"]

# family ai (extend __all__ here):
__all__ += ["ModelInputPlan", "DetectPlan", "ComponentsPlan", "model_input", "float32_to_float16",
            "float16_to_float32", "detect_postprocess", "nms", "segment_threshold", "segment_argmax",
            "label", "fill_holes", "largest_component", "remove_small_components", "regionprops_basic",
            "regionprops_basic_device"]

# family live (extend __all__ here):
__all__ += ["live"]

