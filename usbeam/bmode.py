"""B-mode display: envelope and log compression (C kernel: csrc/bmode/bmode.c).

uint8 output matches PyMUST ``bmode``: 255*(20*log10(|IQ|/max|IQ|) + DR)/DR clipped to
[0, 255] and truncated, the max taken over the whole array.  ``output='db'`` gives float32
decibels relative to the same reference, floored at -DR.
"""
import numpy as np

from . import _core, _validate
from ._backend import check_backend
from .device import PlanRunner


class BModePlan:
    """A B-mode plan for images of a fixed shape.

    Parameters
    ----------
    shape : tuple
        Shape of the complex64 input, e.g. ``(n_frames, nz, nx)``.
    dynamic_range : float
        Displayed dynamic range in dB (> 0).
    output : {'uint8', 'db'}
    normalize : {'global', 'frame'} or float
        'global': one reference, the max over the whole array (PyMUST).  'frame': each
        image along the leading axis has its own max.  A float: fixed amplitude reference
        (live display, so a frame does not depend on others).

    backend : {'cpu', 'cuda'}
        'cuda': the plan runs on the GPU (cuda/bmode.cu) and takes device arrays
        (usbeam.DeviceArray or any CUDA DLPack / CUDA-array-interface array) without a copy,
        returning a DeviceArray; NumPy input is copied in and the result out.
    strict : bool
        With backend='cuda', refuse NumPy (host) arrays instead of copying them (TypeError).
    """

    def __init__(self, shape, dynamic_range=40.0, *, output="uint8", normalize="global", backend="cpu",
                 strict=False):
        self.shape = _validate.shape("shape", shape)
        if len(self.shape) == 0 or any(s <= 0 for s in self.shape):
            raise ValueError(f"image shape must be non-empty (got {self.shape})")
        self.dynamic_range = _validate.positive("dynamic_range", dynamic_range)
        self.output = _validate.choice("output", output, ("uint8", "db"))
        self.backend = check_backend(backend)
        n_values = int(np.prod(self.shape))
        per_image, reference = 0, 0.0
        n_images = 1
        if isinstance(normalize, str):
            normalize = _validate.choice("normalize", normalize, ("global", "frame"))
            if normalize == "frame":
                per_image, n_images = 1, (self.shape[0] if len(self.shape) > 2 else 1)
        else:
            reference = _validate.positive("normalize", normalize)
        self.normalize = normalize
        self.out_dtype = np.dtype(np.uint8 if self.output == "uint8" else np.float32)
        self._plan = _core.bmode_plan(n_values, n_images, self.dynamic_range, output=self.output,
                                      per_image=per_image, reference=reference, backend=self.backend)
        self.cuda = None
        if self.backend == "cuda":
            self._runner = PlanRunner(_core.bmode_cuda_exec(self._plan), strict)
            self.cuda = self._runner.execution  # stream, stage_times(), set_stream()

    def __repr__(self):
        from ._repr import attrs_repr

        return attrs_repr(self, ('shape', 'dynamic_range', 'output', 'normalize', 'backend'))

    def __call__(self, image, out=None):
        if self.cuda is not None:
            return self._runner(lambda i, o: _core.bmode_execute(self._plan, i, o), "image", image, self.shape,
                                np.complex64, self._host_image, out, self.shape, self.out_dtype)
        given, image = image, self._host_image(image)
        if out is None:
            out = np.empty(self.shape, self.out_dtype)
        else:
            _validate.out_array("out", out, self.shape, self.out_dtype)
            _validate.no_overlap("out", out, "image", given, image)
        _core.bmode_execute(self._plan, image, out)
        return out

    def _host_image(self, image):
        image = _validate.ndarray("image", image)
        if not np.iscomplexobj(image):
            raise TypeError(f"image must be complex (beamformed IQ), got dtype {image.dtype}")
        if image.shape != self.shape:
            raise ValueError(f"image must have shape {self.shape} (got {image.shape})")
        if image.dtype != np.complex64 or not image.flags.c_contiguous:
            image = np.ascontiguousarray(image, dtype=np.complex64)
        return image


def bmode(image, dynamic_range=40.0, *, output="uint8", normalize="global", out=None):
    """Log-compressed B-mode of beamformed IQ ``image`` (complex, any shape).

    Returns uint8 (PyMUST-compatible) or float32 dB (``output='db'``), same shape.
    """
    image = _validate.ndarray("image", image)
    if not np.iscomplexobj(image):
        raise TypeError(f"image must be complex (beamformed IQ), got dtype {image.dtype}")
    if image.size == 0:
        raise ValueError("image is empty")
    return BModePlan(image.shape, dynamic_range, output=output, normalize=normalize)(image, out=out)
