"""Small deterministic pipelines for the live-session tests (and `usbeam serve` in them).

CompoundBMode: mapped RF (acquisitions, elements, samples) int16 -> sum over acquisitions
(float32, element-wise, so the result cannot depend on memory alignment) -> pairs of
samples as IQ -> usbeam.BModePlan with a fixed reference -> uint8 (elements, samples/2).
Deterministic: the same frame gives the same bytes in a session and offline.
Stamp: [first, min, max, checksum] of a frame, for torn-slot checks.
OnDevice: any of these (or a CallablePipeline) as a backend='cuda' pipeline, so one test body
runs on every session backend (tests/helpers/live_backends.py).
"""
import time

import numpy as np

import usbeam


class CompoundBMode:
    def __init__(self, input_shape, gain=1.0, delay_s=0.0):
        self.input_shape = tuple(input_shape)
        self.input_dtype = np.dtype(np.int16)
        n_acq, n_el, n_s = self.input_shape
        self.output_shape = (n_el, n_s // 2)
        self.output_dtype = np.dtype(np.uint8)
        self.gain = np.float32(gain)
        self.delay_s = delay_s
        self._bmode = usbeam.BModePlan(self.output_shape, 40.0, normalize=2000.0 * n_acq)
        self.timings = {}

    def __call__(self, frame, out=None):
        t0 = time.perf_counter()
        rf = frame[0].astype(np.float32)
        for a in range(1, frame.shape[0]):
            rf += frame[a]
        rf *= self.gain
        iq = np.empty(self.output_shape, np.complex64)
        iq.real = rf[:, 0:2 * self.output_shape[1]:2]
        iq.imag = rf[:, 1:2 * self.output_shape[1]:2]
        t1 = time.perf_counter()
        if self.delay_s:
            time.sleep(self.delay_s)
        out = self._bmode(iq, out=out)
        self.timings = {"compound": t1 - t0, "bmode": time.perf_counter() - t1}
        return out


class Stamp:
    """Output [first value, min, max, sum mod 2^31] of the frame: a torn frame (partly
    overwritten) has min != max when every frame is filled with one value."""

    def __init__(self, input_shape, delay_s=0.0):
        self.input_shape = tuple(input_shape)
        self.input_dtype = np.dtype(np.int32)
        self.output_shape = (4,)
        self.output_dtype = np.dtype(np.int32)      # a dtype DeviceArrays hold too (OnDevice)
        self.delay_s = delay_s
        self.timings = {}

    def __call__(self, frame, out=None):
        t0 = time.perf_counter()
        first = int(frame.flat[0])
        if self.delay_s:
            time.sleep(self.delay_s)
        lo, hi = int(frame.min()), int(frame.max())
        result = np.array([first, lo, hi, int(frame.sum(dtype=np.int64)) % (2 ** 31)], np.int32)
        self.timings = {"stamp": time.perf_counter() - t0}
        if out is None:
            return result
        out[...] = result
        return out


def make_pipeline(params):
    """Factory for `usbeam serve --pipeline tests/helpers/live_pipelines.py:make_pipeline`."""
    cmap = params["channel_map"]
    shape = (len(cmap["acquisition_row"]), len(cmap["element_channel"]), int(cmap["n_samples"]))
    return CompoundBMode(shape, gain=params.get("gain", 1.0), delay_s=params.get("delay_s", 0.0))


class OnDevice:
    """A host pipeline as a backend='cuda' pipeline: takes the slot as a usbeam DeviceArray,
    reads it back with an explicit copy ordered on the array's pending stream (so a frame
    computed before its upload completed, or torn by a later one, shows in the host
    pipeline's output), runs the host pipeline and copies its image into the DeviceArray
    out=.  The same test pipeline then gives the same bytes on every session backend."""

    backend = "cuda"

    def __init__(self, host_pipeline):
        self.host_pipeline = host_pipeline
        self.input_shape = tuple(host_pipeline.input_shape)
        self.input_dtype = np.dtype(host_pipeline.input_dtype)
        self.output_shape = tuple(host_pipeline.output_shape)
        self.output_dtype = np.dtype(host_pipeline.output_dtype)

    @property
    def timings(self):
        return getattr(self.host_pipeline, "timings", None)

    def __call__(self, frame, out):
        image = self.host_pipeline(frame.to_numpy())
        out.copy_from_host(np.ascontiguousarray(image, self.output_dtype))
        return out
