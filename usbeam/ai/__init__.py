"""AI model hand-off (stage 4): model input pre-processing, FP16 conversion, detection and
segmentation post-processing.

Modules: :mod:`usbeam.ai.preprocess` (``ModelInputPlan``, ``model_input``, the FP16
conversions), :mod:`usbeam.ai.detect` (``DetectPlan``, ``detect_postprocess``, ``nms``),
:mod:`usbeam.ai.segment` (threshold, argmax, ``ComponentsPlan`` and its functions, region
properties).  C kernels: csrc/ai/preprocess.c, detect.c, segment.c; CUDA twins:
cuda/preprocess.cu, detect.cu, segment.cu.

Every function takes NumPy arrays, or any host DLPack producer (a CPU torch tensor, a JAX
array), viewed without a copy.  With ``backend='cuda'`` (and in the device paths of the
one-shot functions) they take device arrays without copying: any DLPack producer on a CUDA
device (PyTorch, CuPy, JAX, a ``usbeam.DeviceArray``) or anything with
``__cuda_array_interface__`` (Numba), imported through :func:`usbeam.device.asarray`, with
caller-provided outputs, never synchronising the host.  A call queues on ``stream`` (an
integer ``cudaStream_t``, or an object with ``cuda_stream`` or ``ptr``); without it, a plan's
call queues on the stream given to ``plan.cuda.set_stream`` if any, and every other device
path on the legacy default stream.  The import orders the producer's pending writes before
the call (DLPack's stream argument, the CUDA array interface's v3 stream, a ``DeviceArray``'s
pending stream), with an event, not a host wait; the ``DeviceArray`` arguments then record a
stream the call's work is ordered before, so ``to_numpy()`` and later consumers wait for it.
Device masks are bool (``torch.bool``) or uint8; no output may share memory with another
argument.

A CUDA plan has ``plan.cuda``, its :class:`usbeam.device.CudaExecution`, as every usbeam plan:
``stage_times()``, ``set_stream()``, ``synchronize()``, ``device_bytes``, and the fault report
of the plans whose kernels read floats (``ModelInputPlan``, ``DetectPlan``): a NaN or inf they
read raises ValueError on ``synchronize()`` or at the plan's next call (the CPU refuses such
input at once).  A plan's calls are ordered one after the other whatever their streams.

Conventions (the C file headers give the detail and the references):

* images are ``(H, W)``, ``(N, H, W)`` or ``(N, H, W, C)``; model inputs are NCHW or NHWC;
* bilinear resize, ``align_corners=False``: pixel centres at ``i + 0.5`` (PyTorch
  ``F.interpolate(..., align_corners=False)``, OpenCV ``INTER_LINEAR``, no antialiasing);
  ``align_corners=True``: the corner pixel centres coincide;
* detection rows are ``[x1, y1, x2, y2, score, class]``, NMS as ``torchvision.ops.nms``,
  class-aware by ``batched_nms``'s coordinate offset;
* components are numbered as ``scipy.ndimage.label`` numbers them.
"""
from ._common import device_pointer as _device_pointer
from ._common import host_array as _host_array
from ._common import is_device_array as _is_device_array
from .detect import DetectPlan, detect_postprocess, nms
from .preprocess import ModelInputPlan, float16_to_float32, float32_to_float16, model_input
from .segment import (ComponentsPlan, fill_holes, label, largest_component, regionprops_basic,
                      regionprops_basic_device, remove_small_components, segment_argmax, segment_threshold)

__all__ = ["ModelInputPlan", "model_input", "float32_to_float16", "float16_to_float32", "DetectPlan",
           "detect_postprocess", "nms", "segment_threshold", "segment_argmax", "ComponentsPlan", "label",
           "fill_holes", "largest_component", "remove_small_components", "regionprops_basic",
           "regionprops_basic_device"]
