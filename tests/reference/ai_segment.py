"""Reference of segmentation post-processing written from the definitions, independent of
usbeam (and of scipy, which the tests use as a second, peer reference).

label: breadth-first flood fill in raster order; components numbered 1..N in the raster
order of their first pixel (scipy.ndimage.label's numbering).  fill_holes: background pixels
not reachable from outside the image through background.  Region properties from np.nonzero.
"""
from collections import deque

import numpy as np

_OFFSETS = {
    4: [(-1, 0), (1, 0), (0, -1), (0, 1)],
    8: [(dy, dx) for dy in (-1, 0, 1) for dx in (-1, 0, 1) if (dy, dx) != (0, 0)],
}


def label(mask, connectivity=4):
    mask = np.asarray(mask) != 0
    h, w = mask.shape
    labels = np.zeros((h, w), np.int32)
    count = 0
    for y0 in range(h):
        for x0 in range(w):
            if not mask[y0, x0] or labels[y0, x0]:
                continue
            count += 1
            labels[y0, x0] = count
            queue = deque([(y0, x0)])
            while queue:
                y, x = queue.popleft()
                for dy, dx in _OFFSETS[connectivity]:
                    v, u = y + dy, x + dx
                    if 0 <= v < h and 0 <= u < w and mask[v, u] and not labels[v, u]:
                        labels[v, u] = count
                        queue.append((v, u))
    return labels, count


def fill_holes(mask, connectivity=4):
    mask = np.asarray(mask) != 0
    background, _ = label(~mask, connectivity)
    border = np.concatenate([background[0], background[-1], background[:, 0], background[:, -1]])
    outside = np.isin(background, np.unique(border[border > 0]))
    return ~outside


def regionprops(labels, n_labels):
    area = np.zeros(n_labels, np.int64)
    bbox = np.zeros((n_labels, 4), np.int64)
    centroid = np.full((n_labels, 2), np.nan)
    for k in range(1, n_labels + 1):
        rows, cols = np.nonzero(labels == k)
        if rows.size:
            area[k - 1] = rows.size
            bbox[k - 1] = [rows.min(), cols.min(), rows.max() + 1, cols.max() + 1]
            centroid[k - 1] = [rows.mean(), cols.mean()]
    return area, bbox, centroid
