"""Segmentation post-processing against scipy.ndimage (peer) and tests/reference/ai_segment.py
(written from the definitions): labelling numbered exactly as scipy.ndimage.label, hole
filling, component selection, region properties, threshold and argmax."""
import numpy as np
import pytest
from scipy import ndimage

import usbeam
from conftest import shared_dataset
from reference import ai_segment as ref
from tolerances import TOLERANCES

STRUCTURE = {4: ndimage.generate_binary_structure(2, 1), 8: np.ones((3, 3), bool)}


def canonical(labels):
    """Labels renumbered 1..N by the raster order of each component's first pixel."""
    values, first = np.unique(labels.ravel(), return_index=True)
    foreground = values != 0
    order = values[foreground][np.argsort(first[foreground])]
    mapping = np.zeros(int(values.max()) + 1, np.int64)
    mapping[order] = np.arange(1, order.size + 1)
    return mapping[labels]


def random_masks(rng):
    """Sparse, dense, blobby, striped and single-pixel masks of awkward sizes."""
    yield rng.random((37, 53)) < 0.5
    yield rng.random((64, 64)) < 0.2
    yield rng.random((1, 97)) < 0.5
    yield rng.random((80, 1)) < 0.5
    yield ndimage.gaussian_filter(rng.standard_normal((120, 90)), 3) > 0.05
    checker = (np.add.outer(np.arange(30), np.arange(31)) % 2).astype(bool)  # worst case for 4-connectivity
    yield checker
    yield np.ones((9, 11), bool)
    yield np.zeros((9, 11), bool)


def simulated_bmode_mask(rng, shape=(160, 128)):
    """A speckle B-mode of a phantom with anechoic cysts (simulated IQ -> usbeam.bmode), thresholded."""
    z, x = np.mgrid[: shape[0], : shape[1]]
    echogenicity = np.ones(shape)
    for cz, cx, r in [(40, 40, 15), (100, 80, 25), (130, 30, 10)]:
        echogenicity[(z - cz) ** 2 + (x - cx) ** 2 < r ** 2] = 0.05
    scatterers = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)) * echogenicity
    psf = np.outer(np.hanning(7), np.hanning(5))
    iq = ndimage.convolve(scatterers.real, psf) + 1j * ndimage.convolve(scatterers.imag, psf)
    image = usbeam.bmode(iq.astype(np.complex64), 40)
    smooth = ndimage.uniform_filter(image.astype(np.float32), 5)
    return smooth < np.percentile(smooth, 25)  # dark regions: cysts and speckle holes


@pytest.mark.parametrize("connectivity", [4, 8])
def test_label_exact_against_scipy_and_reference(rng, connectivity):
    for mask in random_masks(rng):
        got, n = usbeam.label(mask, connectivity)
        want, n_want = ndimage.label(mask, STRUCTURE[connectivity])
        assert got.dtype == np.int32 and n == n_want
        np.testing.assert_array_equal(got, want)
        mine, n_mine = ref.label(mask, connectivity)
        assert n_mine == n
        np.testing.assert_array_equal(got, mine)


@pytest.mark.parametrize("connectivity", [4, 8])
def test_label_canonical_partition_on_simulated_bmode(rng, connectivity):
    mask = simulated_bmode_mask(rng)
    got, n = usbeam.label(mask, connectivity)
    want, n_want = ndimage.label(mask, STRUCTURE[connectivity])
    assert n == n_want > 3
    # the same partition (after canonical relabelling), and already the same numbers
    np.testing.assert_array_equal(canonical(got), canonical(want))
    np.testing.assert_array_equal(got, want)


def test_real_bmode_masks():
    scipy_io = pytest.importorskip("scipy.io")
    frames = scipy_io.loadmat(shared_dataset("bmode_PWI_disk.mat"))["I"]
    for k in (0, 15, 31):
        image = np.ascontiguousarray(frames[:, :, k])
        mask = ndimage.uniform_filter(image.astype(np.float32), 3) > 128
        for connectivity in (4, 8):
            got, n = usbeam.label(mask, connectivity)
            want, n_want = ndimage.label(mask, STRUCTURE[connectivity])
            assert n == n_want
            np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(usbeam.fill_holes(mask), ndimage.binary_fill_holes(mask))


@pytest.mark.parametrize("connectivity", [4, 8])
def test_fill_holes_against_scipy(rng, connectivity):
    masks = list(random_masks(rng)) + [simulated_bmode_mask(rng)]
    ring = np.zeros((12, 12), bool)
    ring[2:9, 2:9] = True
    ring[4:7, 4:7] = False
    ring[5, 2] = False  # a notch that does not open the hole with 4-connectivity
    masks.append(ring)
    for mask in masks:
        got = usbeam.fill_holes(mask, connectivity)
        assert got.dtype == np.bool_
        np.testing.assert_array_equal(got, ndimage.binary_fill_holes(mask, STRUCTURE[connectivity]))
        np.testing.assert_array_equal(got, ref.fill_holes(mask, connectivity))


@pytest.mark.parametrize("connectivity", [4, 8])
def test_largest_and_remove_small(rng, connectivity):
    for mask in list(random_masks(rng)) + [simulated_bmode_mask(rng)]:
        labels, n = ndimage.label(mask, STRUCTURE[connectivity])
        areas = np.bincount(labels.ravel(), minlength=n + 1)
        got = usbeam.largest_component(mask, connectivity)
        if n == 0:
            assert not got.any()
        else:
            areas_fg = areas.copy()
            areas_fg[0] = -1
            np.testing.assert_array_equal(got, labels == np.argmax(areas_fg))  # argmax: first of equal
        for min_area in (0, 1, 3, 10):
            want = (labels > 0) & (areas[labels] >= min_area)
            np.testing.assert_array_equal(usbeam.remove_small_components(mask, min_area, connectivity), want)


def test_largest_component_tie_goes_to_first():
    mask = np.zeros((6, 9), bool)
    mask[1:3, 5:7] = True  # first in raster order
    mask[3:5, 1:3] = True
    np.testing.assert_array_equal(usbeam.largest_component(mask), mask & (np.arange(6)[:, None] < 3))


def test_regionprops_against_reference(rng):
    mask = simulated_bmode_mask(rng)
    labels, n = usbeam.label(mask, 8)
    props = usbeam.regionprops_basic(labels)
    area, bbox, centroid = ref.regionprops(labels, n)
    np.testing.assert_array_equal(props["area"], area)
    np.testing.assert_array_equal(props["bbox"], bbox)
    np.testing.assert_allclose(props["centroid"], centroid, atol=TOLERANCES["ai_centroid_abs"], rtol=0)
    # scipy peers: center_of_mass and find_objects
    np.testing.assert_allclose(props["centroid"], ndimage.center_of_mass(mask, labels, range(1, n + 1)),
                               atol=TOLERANCES["ai_centroid_abs"], rtol=0)
    slices = ndimage.find_objects(labels)
    np.testing.assert_array_equal(props["bbox"], [[s[0].start, s[1].start, s[0].stop, s[1].stop] for s in slices])


def test_regionprops_absent_labels_and_analytic():
    labels = np.zeros((5, 6), np.int32)
    labels[1:3, 2:5] = 2
    props = usbeam.regionprops_basic(labels, n_labels=3)
    np.testing.assert_array_equal(props["area"], [0, 6, 0])
    np.testing.assert_array_equal(props["bbox"], [[0, 0, 0, 0], [1, 2, 3, 5], [0, 0, 0, 0]])
    np.testing.assert_array_equal(props["centroid"][1], [1.5, 3.0])
    assert np.isnan(props["centroid"][[0, 2]]).all()


def test_threshold_and_argmax(rng):
    logits = rng.standard_normal((2, 50, 60)).astype(np.float32)
    logits[0, 0, :5] = [0.0, -0.0, 1e-45, -1e-45, np.nan]
    np.testing.assert_array_equal(usbeam.segment_threshold(logits), logits > 0)
    np.testing.assert_array_equal(usbeam.segment_threshold(logits, 0.7), logits > 0.7)
    half = logits.astype(np.float16)
    np.testing.assert_array_equal(usbeam.segment_threshold(half, -0.3), half.astype(np.float64) > -0.3)
    # sigmoid(x) > 0.5 <=> x > 0
    probability = 1 / (1 + np.exp(-logits.astype(np.float64)))
    resolved = np.abs(logits) > 1e-12  # below, sigmoid rounds to exactly 0.5 in float64
    np.testing.assert_array_equal(usbeam.segment_threshold(logits)[resolved], (probability > 0.5)[resolved])
    scores = np.round(rng.standard_normal((3, 4, 20, 30)) * 2).astype(np.float32)  # many ties
    scores[0, 2, 0, 0] = np.nan
    got = usbeam.segment_argmax(scores)
    assert got.dtype == np.int32 and got.shape == (3, 20, 30)
    np.testing.assert_array_equal(got, np.argmax(scores, axis=1))
    np.testing.assert_array_equal(usbeam.segment_argmax(scores[1].astype(np.float16)),
                                  np.argmax(scores[1].astype(np.float16), axis=0))


def test_components_plan_batch_poison_and_untouched(rng):
    masks = rng.random((3, 40, 30)) < 0.45
    copy = masks.copy()
    plan = usbeam.ComponentsPlan(masks.shape, 8)
    labels = np.full(masks.shape, -5, np.int32)
    counts = np.full(3, -5, np.int32)
    plan.label(masks, out=labels, counts=counts)
    np.testing.assert_array_equal(masks, copy)
    for k in range(3):
        want, n = ndimage.label(masks[k], STRUCTURE[8])
        assert counts[k] == n
        np.testing.assert_array_equal(labels[k], want)
    filled = np.ones(masks.shape, bool)
    plan.fill_holes(masks, out=filled)
    for k in range(3):
        np.testing.assert_array_equal(filled[k], ndimage.binary_fill_holes(masks[k], STRUCTURE[8]))


def test_bad_input(rng):
    mask = rng.random((10, 12)) < 0.5
    for fn in (usbeam.label, usbeam.fill_holes, usbeam.largest_component):
        with pytest.raises(ValueError, match="2-D"):
            fn(mask[None])
        with pytest.raises(ValueError, match="2-D"):
            fn(mask[0])
        with pytest.raises(ValueError, match="connectivity"):
            fn(mask, 6)
    with pytest.raises(ValueError, match="empty"):
        usbeam.label(np.zeros((0, 3)))
    with pytest.raises(TypeError, match="out"):
        usbeam.label(mask, out=np.zeros((10, 12), np.int64))
    with pytest.raises(ValueError, match="out"):
        usbeam.label(mask, out=np.zeros((10, 11), np.int32))
    with pytest.raises(TypeError, match="out"):
        usbeam.fill_holes(mask, out=np.zeros((10, 12), np.uint8))
    with pytest.raises(ValueError, match="min_area"):
        usbeam.remove_small_components(mask, -1)
    with pytest.raises(ValueError, match="labels"):
        usbeam.regionprops_basic(np.zeros((2, 3, 4), np.int32))
    with pytest.raises(ValueError, match="n_labels"):
        usbeam.regionprops_basic(np.full((3, 3), 5), n_labels=2)
    with pytest.raises(TypeError, match="labels"):
        usbeam.regionprops_basic(np.zeros((3, 3), np.float32))
    with pytest.raises(ValueError, match="scores"):
        usbeam.segment_argmax(np.zeros((4, 4), np.float32))
    with pytest.raises(TypeError, match="logits"):
        usbeam.segment_threshold(np.zeros(4, np.int32))
    with pytest.raises(ValueError, match="threshold"):
        usbeam.segment_threshold(np.zeros(4, np.float32), np.nan)


def test_binding_checks_buffers():
    plan = usbeam._core.components_plan(1, 4, 4, 4)
    with pytest.raises(TypeError, match="mask"):
        usbeam._core.label_execute(plan, np.zeros(16, np.float32), np.zeros(16, np.int32), np.zeros(1, np.int32))
    with pytest.raises(ValueError, match="out"):
        usbeam._core.label_execute(plan, np.zeros(16, bool), np.zeros(15, np.int32), np.zeros(1, np.int32))
    with pytest.raises(ValueError, match="labels"):
        usbeam._core.regionprops_basic(np.full((2, 2), 9, np.int32), 3, np.zeros(3, np.int32),
                                       np.zeros(12, np.int32), np.zeros(6))
