"""The SVD clutter filter gives the same bits whatever the OpenMP team size: its Gram matrix is
summed in a fixed number of partial sums (csrc/doppler/clutter_svd.c, GRAM_SLOTS), so a batch
worker with a thread limit and a whole-record call agree exactly (usbeam.batch's resume test
compares them bit for bit)."""
import threading

import numpy as np

import usbeam
from usbeam import _core


def _filtered_with_threads(iq, threads):
    result = {}

    def run():
        # the limit holds for the calling OS thread only: a fresh thread per team size
        _core.set_thread_limit(threads)
        result["out"] = usbeam.clutter_filter(iq, "svd", low=2)

    worker = threading.Thread(target=run)
    worker.start()
    worker.join()
    return result["out"]


def test_svd_filter_is_independent_of_the_team_size():
    rng = np.random.default_rng(7)
    n_frames, nz, nx = 24, 96, 80  # 7680 pixels: 120 blocks of 64 over 32 slots, uneven on purpose
    tissue = rng.normal(size=(1, nz, nx)) + 1j * rng.normal(size=(1, nz, nx))
    iq = (50 * tissue * np.exp(2j * np.pi * 0.01 * np.arange(n_frames))[:, None, None]
          + rng.normal(size=(n_frames, nz, nx)) + 1j * rng.normal(size=(n_frames, nz, nx))).astype(np.complex64)
    one = _filtered_with_threads(iq, 1)
    two = _filtered_with_threads(iq, 2)
    four = _filtered_with_threads(iq, 4)
    np.testing.assert_array_equal(one, two)
    np.testing.assert_array_equal(one, four)
    # and the filter did its job: the tissue (rank one, 50x the noise) is gone
    assert np.mean(np.abs(one) ** 2) < 4.0
