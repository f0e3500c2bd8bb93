"""Sparse-matrix DAS (Beamformer(formulation='sparse'), csrc/beamform/das_sparse.c) against the
float64 reference (tests/reference/das.py), the gather formulation and scipy.sparse."""
import numpy as np
import pytest

import usbeam
from reference import das as ref
from test_das import N_SAMPLES, C, FC, FS, T0, assert_matches_reference, mixed_sequence, random_data, random_grid, small_probe
from tolerances import TOLERANCES


@pytest.mark.parametrize("interpolation", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("dtype", [np.complex64, np.float32, np.int16])
def test_sparse_matches_reference(rng, interpolation, dtype):
    probe = small_probe()
    seq, tuples = mixed_sequence(rng, probe)
    grid = random_grid(rng)
    data = random_data(rng, (3, len(seq), probe.n_elements, N_SAMPLES), dtype)
    f_number = float(rng.uniform(0.8, 2.0))
    window = ("rect", "hann", "tukey")[int(rng.integers(3))]
    copy = data.copy()
    bf = usbeam.Beamformer(probe, seq, grid, fs=FS, fc=FC, c=C, t0=T0, n_samples=N_SAMPLES, f_number=f_number,
                           window=window, interpolation=interpolation, dtype=dtype, n_frames=3, formulation="sparse")
    out_dtype = np.complex64 if dtype == np.complex64 else np.float32
    out = np.full((3,) + grid.shape, np.nan, out_dtype)  # poison: every pixel must be written
    assert bf(data, out=out) is out
    assert np.isfinite(out).all()
    np.testing.assert_array_equal(data, copy)
    want = ref.das(data, probe.x, tuples, grid.coordinates(), fs=FS, fc=FC, c=C, t0=T0, f_number=f_number,
                   window_kind=window, interpolation=interpolation)
    assert_matches_reference(out, want, interpolation)
    # fewer frames than the capacity reuse the plan
    one = bf(data[:1])
    assert_matches_reference(one, want[:1], interpolation)


def test_sparse_equals_gather_and_scipy(rng):
    """The same entries as the gather plan: equal images; the exported CSR applied by
    scipy.sparse gives the image too; its memory is what sparse_bytes says."""
    probe = small_probe()
    seq, _ = mixed_sequence(rng, probe)
    grid = random_grid(rng)
    data = random_data(rng, (2, len(seq), probe.n_elements, N_SAMPLES), np.complex64)
    kw = dict(fs=FS, fc=FC, c=C, t0=T0, n_samples=N_SAMPLES, f_number=1.2, window="hann", interpolation="cubic",
              n_frames=2)
    gather = usbeam.Beamformer(probe, seq, grid, **kw)(data)
    bf = usbeam.Beamformer(probe, seq, grid, formulation="sparse", **kw)
    sparse = bf(data)
    assert np.linalg.norm(sparse - gather) <= TOLERANCES["das_rel_l2"] * np.linalg.norm(gather)
    a = bf.sparse_operator()
    assert a.shape == (grid.n_points, len(seq) * probe.n_elements * N_SAMPLES)
    assert a.dtype == np.complex64
    by_scipy = np.stack([a.astype(np.complex128) @ frame.ravel().astype(np.complex128) for frame in data])
    assert np.linalg.norm(sparse.reshape(2, -1) - by_scipy) <= TOLERANCES["das_rel_l2"] * np.linalg.norm(by_scipy)
    assert bf.sparse_bytes == (grid.n_points + 1) * 4 + a.nnz * (4 + 8)
    assert bf.table_bytes() == 0
    # at most taps x transmits x elements non-zeros per row, and columns ascending in each row
    assert np.diff(a.indptr).max() <= 4 * len(seq) * probe.n_elements
    assert all(np.all(np.diff(a.indices[a.indptr[p]:a.indptr[p + 1]]) > 0) for p in range(grid.n_points))


def test_sparse_operator_of_a_convex_gather_plan(rng):
    """sparse_operator() of a gather plan builds its own CPU sparse plan: with the probe's
    element normals (cone apertures), so it is the operator of the gather plan's image."""
    probe = usbeam.ConvexArray(24, 4e-4, 15e-3)
    seq = usbeam.DivergingWave((0.0, -probe.apothem))
    grid = usbeam.Grid(x=np.linspace(-3e-3, 3e-3, 9), z=np.linspace(5e-3, 9e-3, 5))
    bf = usbeam.Beamformer(probe, seq, grid, fs=FS, fc=FC, c=C, t0=T0, n_samples=N_SAMPLES, f_number=1.0)
    data = random_data(rng, (1, probe.n_elements, N_SAMPLES), np.complex64)
    gather = bf(data).ravel()
    by_scipy = bf.sparse_operator().astype(np.complex128) @ data.ravel().astype(np.complex128)
    assert np.linalg.norm(gather - by_scipy) <= TOLERANCES["das_rel_l2"] * np.linalg.norm(by_scipy)


def test_sparse_bad_input(rng):
    probe = small_probe()
    grid = random_grid(rng)
    with pytest.raises(ValueError, match="formulation"):
        usbeam.Beamformer(probe, usbeam.PlaneWave(0.0), grid, fs=FS, fc=FC, n_samples=N_SAMPLES,
                          formulation="dense")
    for dtype in (np.float32, np.complex64):
        bf = usbeam.Beamformer(probe, usbeam.PlaneWave(0.0), grid, fs=FS, fc=FC, n_samples=N_SAMPLES, dtype=dtype,
                               formulation="sparse")
        for value in (np.nan, np.inf, -np.inf):
            data = random_data(rng, (probe.n_elements, N_SAMPLES), dtype)
            data[int(rng.integers(probe.n_elements)), int(rng.integers(N_SAMPLES))] = value
            copy = data.copy()
            with pytest.raises(ValueError, match="NaN or infinite"):
                bf(data)
            np.testing.assert_array_equal(data, copy)
    with pytest.raises(ValueError, match="elements"):
        bf(np.zeros((probe.n_elements + 1, N_SAMPLES), np.complex64))
