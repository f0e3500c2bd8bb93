"""Float64 NumPy reference of model-input pre-processing (bilinear resize + normalisation),
written from the definitions in csrc/preprocess.c's header, independent of usbeam.

Bilinear, no antialiasing.  align_corners=False: source = (dst + 0.5) * n_in / n_out - 0.5
(PyTorch F.interpolate align_corners=False, OpenCV INTER_LINEAR), clamped to [0, n_in - 1];
align_corners=True: source = dst * (n_in - 1) / (n_out - 1).
"""
import numpy as np


def source_coordinates(n_in, n_out, align_corners):
    dst = np.arange(n_out, dtype=np.float64)
    if align_corners:
        src = dst * (n_in - 1) / (n_out - 1) if n_out > 1 else np.zeros(n_out)
    else:
        src = (dst + 0.5) * n_in / n_out - 0.5
    return np.clip(src, 0.0, n_in - 1)


def bilinear_resize(image, out_h, out_w, align_corners=False):
    """image (..., H, W) float64 -> (..., out_h, out_w)."""
    image = np.asarray(image, dtype=np.float64)
    h, w = image.shape[-2:]
    ys = source_coordinates(h, out_h, align_corners)
    xs = source_coordinates(w, out_w, align_corners)
    y0 = np.floor(ys).astype(int)
    x0 = np.floor(xs).astype(int)
    y1 = np.minimum(y0 + 1, h - 1)
    x1 = np.minimum(x0 + 1, w - 1)
    wy = (ys - y0)[:, None]
    wx = (xs - x0)[None, :]
    top = image[..., y0, :]
    bottom = image[..., y1, :]
    rows = top * (1 - wy) + bottom * wy
    return rows[..., x0] * (1 - wx) + rows[..., x1] * wx


def model_input(images, out_h, out_w, scale, offset, mean, std, channels, layout="nchw", align_corners=False):
    """images (N, H, W, C) -> float64 (N, channels, out_h, out_w) or NHWC.

    value = (pixel * scale + offset - mean) / std per output channel."""
    images = np.asarray(images, dtype=np.float64)
    planes = np.moveaxis(images, -1, 1)  # (N, C, H, W)
    if planes.shape[1] == 1 and channels == 3:
        planes = np.repeat(planes, 3, axis=1)
    resized = bilinear_resize(planes, out_h, out_w, align_corners)
    per_channel = lambda v: np.broadcast_to(np.asarray(v, np.float64), (channels,))[None, :, None, None]  # noqa
    out = (resized * per_channel(scale) + per_channel(offset) - per_channel(mean)) / per_channel(std)
    return out if layout == "nchw" else np.moveaxis(out, 1, -1)
