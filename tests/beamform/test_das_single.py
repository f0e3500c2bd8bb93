"""The 1-frame CPU DAS path (issue 21, csrc/beamform/das_single.c transmit_sum_single, its AVX2
copy sum_single_ymm and the AVX-512 tile_single_zmm, which sums a tile of points with every
transmit of a point in the same accumulators): a frame's entries formed and summed in one loop
over the aperture, 8 elements a step with masked lanes past the aperture's end.  Checked against the
float64 reference (tests/reference/das.py) with apertures of every length 1..~40 (not multiples
of 8) and points beside and past the array's ends; against the multi-frame path on the same
frame (a different sum order: float rounding only); and for determinism: the same bits for the
same inputs and plan whatever the number of OpenMP threads (1 and 2, each in a process of its
own: the team size is read when the process starts), for every instruction-set copy.  On an
AVX-512 machine the best copy's 1-frame plans take das_lanes.c instead: its lane table, or
without a table (max_table_bytes=1) its rows formed at execute, so both are held to the same,
on a grid centred on the array too (groups taking their mirror groups' rows)."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import usbeam
from reference import das as ref
from tolerances import TOLERANCES
from das_checks import assert_matches_reference

CHILD = r"""
import sys
import numpy as np
sys.path[:0] = [sys.argv[1]]
import usbeam
from das_single_case import case
probe, seq, grids, datasets, kw = case()
out = {}
for dtype, data in datasets.items():
    for interpolation in ("nearest", "linear", "cubic"):
        for budget in (None, 1):
            for k, grid in enumerate(grids):
                bf = usbeam.Beamformer(probe, seq, grid, n_samples=data.shape[-1], interpolation=interpolation,
                                       n_frames=1, max_table_bytes=budget, dtype=data.dtype, **kw)
                if budget == 1 and k == 1 and usbeam._core.das_lane_rows(bf._plan):  # the lanes (AVX-512)
                    assert usbeam._core.das_lane_mirrored(bf._plan) > 0, "no group mirrored"
                first = bf(data)
                again = bf(data)
                assert np.array_equal(first, again, equal_nan=False), "a repeated call changed bits"
                out[f"{dtype}-{interpolation}-{budget}-{k}"] = first
np.savez(sys.argv[2], **out)
"""

CASE = r'''
import numpy as np
import usbeam

FS, FC, C, T0 = 20e6, 5e6, 1540.0, 1.5e-6
ANGLE = 0.12
SOURCE = (1e-3, -6e-3)


def case():
    rng = np.random.default_rng(2121)
    probe = usbeam.LinearArray(48, 3e-4, width=2.5e-4)
    seq = [usbeam.PlaneWave(ANGLE), usbeam.DivergingWave(SOURCE)]
    # x past both ends of the array (+-7 mm), z from 0.3 mm (apertures of 1 element) to 14 mm;
    # and a grid centred on the array, rows of 8 groups of 16 points, whose groups mirror each
    # other (das_lanes.c usbeam_das_lanes_mirrors: without a table one of each pair takes the
    # other's rows, in the tile paired with its own or in its own, whichever thread runs it)
    grids = [usbeam.Grid(x=np.linspace(-9e-3, 9.5e-3, 23), z=np.linspace(3e-4, 1.4e-2, 19)),
             usbeam.Grid(x=np.linspace(-8e-3, 8e-3, 128), z=np.linspace(3e-4, 1.4e-2, 19))]
    shape = (1, len(seq), probe.n_elements, 700)
    datasets = {"complex64": (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64),
                "float32": rng.standard_normal(shape).astype(np.float32),
                "int16": rng.integers(-3000, 3000, shape).astype(np.int16)}
    kw = dict(fs=FS, fc=FC, c=C, t0=T0, f_number=1.3, window="hann")
    return probe, seq, grids, datasets, kw
'''


@pytest.fixture(scope="module")
def case_module(tmp_path_factory):
    folder = tmp_path_factory.mktemp("das_single")
    (folder / "das_single_case.py").write_text(CASE)
    sys.path.insert(0, str(folder))
    import das_single_case
    yield folder, das_single_case
    sys.path.remove(str(folder))


def run_child(folder, isa, threads):
    root = Path(usbeam.__file__).resolve().parent.parent
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), PYTHONPATH=str(folder))
    if isa is not None:
        env["USBEAM_DAS_ISA"] = isa
    target = folder / f"isa{isa}-threads{threads}.npz"
    out = subprocess.run([sys.executable, "-c", CHILD, str(root), str(target)], capture_output=True, text=True,
                         env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    with np.load(target) as images:
        return dict(images)


@pytest.mark.parametrize("isa", [None, "1", "0"])  # the machine's best copy, AVX2 + FMA, baseline
def test_single_frame_is_deterministic_and_matches_the_reference(case_module, isa):
    folder, mod = case_module
    one = run_child(folder, isa, 1)
    two = run_child(folder, isa, 2)
    assert one.keys() == two.keys()
    for key in one:
        np.testing.assert_array_equal(one[key], two[key], err_msg=f"{key}: 1 and 2 threads differ")
    probe, seq, grids, datasets, kw = mod.case()
    tuples = [("plane", mod.ANGLE), ("diverging",) + mod.SOURCE]
    for key, got in one.items():
        dtype, interpolation, _, k = key.split("-")
        want = ref.das(datasets[dtype], probe.x, tuples, grids[int(k)].coordinates(), fs=kw["fs"], fc=kw["fc"], c=kw["c"],
                       t0=kw["t0"], f_number=kw["f_number"], window_kind="hann", interpolation=interpolation)
        assert np.count_nonzero(want) > 0.5 * want.size
        assert_matches_reference(got, want, interpolation)


@pytest.mark.parametrize("interpolation", ["nearest", "linear", "cubic"])
def test_single_frame_agrees_with_the_multi_frame_path(case_module, interpolation):
    # frame f of a 3-frame call (the multi-frame kernels) and the same frame alone (the 1-frame
    # loop): the same entries summed in another order, so float32 rounding apart
    _, mod = case_module
    probe, seq, grids, datasets, kw = mod.case()
    grid = grids[0]
    rng = np.random.default_rng(7)
    frames = np.concatenate([datasets["complex64"], (rng.standard_normal((2,) + datasets["complex64"].shape[1:])
                                                     * (1 + 1j)).astype(np.complex64)])
    n_samples = frames.shape[-1]
    multi = usbeam.Beamformer(probe, seq, grid, n_samples=n_samples, interpolation=interpolation, n_frames=3, **kw)
    single = usbeam.Beamformer(probe, seq, grid, n_samples=n_samples, interpolation=interpolation, n_frames=1, **kw)
    batch = multi(frames)
    for f in range(3):
        alone = single(frames[f:f + 1])[0]
        assert np.linalg.norm(alone - batch[f]) <= TOLERANCES["das_rel_l2"] * np.linalg.norm(batch[f])


@pytest.mark.parametrize("n_frames, budget", [(1, None), (1, 1), (4, None), (4, 1)])
def test_receive_phase_error_is_bounded_deep_and_at_high_frequency(n_frames, budget):
    """The receive rotation exp(j 2 pi fc |p - e| / c) is formed with the whole turns removed
    in double and the rest in float (csrc/beamform/das_delays.c chunk_receive): its error must
    stay within das_receive_phase_rad wherever the point, here up to ~3900 turns deep (20 cm at
    15 MHz).  Data of ones in one element's channel (zeros in the other) make each output one
    term, window x exp(j 2 pi fc tau), so its angle against the float64 reference is the phase
    error of the whole path (receive and transmit rotation, interpolation weights)."""
    fs, fc, c = 60e6, 15e6, 1540.0
    probe = usbeam.LinearArray(2, 3e-4, width=2.5e-4)
    grid = usbeam.Grid(x=np.linspace(-2e-3, 2e-3, 9), z=np.linspace(2e-3, 0.2, 64))
    n_samples = 16000
    data = np.zeros((n_frames, 1, 2, n_samples), np.complex64)
    data[:, :, 0, :] = 1.0
    bf = usbeam.Beamformer(probe, [usbeam.PlaneWave(0.05)], grid, fs=fs, fc=fc, c=c, n_samples=n_samples,
                           f_number=0.0, interpolation="linear", n_frames=n_frames, max_table_bytes=budget)
    got = bf(data).reshape(n_frames, -1)
    want = ref.das(data, probe.x, [("plane", 0.05)], grid.coordinates(), fs=fs, fc=fc, c=c, t0=0.0, f_number=0.0)
    assert np.all(np.abs(want) > 0.5)
    phase_error = np.abs(np.angle(got / want))
    assert phase_error.max() <= TOLERANCES["das_receive_phase_rad"], phase_error.max()
    np.testing.assert_allclose(np.abs(got), np.abs(want), rtol=1e-6)
