"""The CPU DAS execute of issue 21 (csrc/beamform/das*.c): the factored weights (receive part
per point and element, transmit part per point and transmit, multiplied out in float32) on
their own error budget against the float64 reference, one element at a time (no sum to hide
an error in); and every instruction-set copy of the kernels (AVX-512, AVX2 + FMA, baseline),
each run in a process of its own capped with USBEAM_DAS_ISA, against the reference, for a
linear array and for the general geometry (a convex array, tests/reference/das.py das_general)."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import usbeam
from reference import das as ref
from tolerances import TOLERANCES

FS, FC, C, T0 = 20e6, 5e6, 1540.0, 1.5e-6
N_SAMPLES = 4096


@pytest.mark.parametrize("transmit", ["plane", "diverging", "focused"])
@pytest.mark.parametrize("interpolation", ["nearest", "linear", "cubic"])
def test_factored_weight_error_budget(rng, transmit, interpolation):
    # One element, one transmit, points from 0.2 mm to 60 mm deep and 40 mm to the side: the
    # output of a point is sum_k w_k x[i + k], so its error against the float64 reference,
    # over sum_k |x[i + k]|, bounds the error of one weight.
    probe = usbeam.LinearArray(1, 3e-4, width=2.5e-4)
    angle = float(rng.uniform(-0.3, 0.3))
    seq, tup = {"plane": (usbeam.PlaneWave(angle), ("plane", angle)),
                "diverging": (usbeam.DivergingWave((1e-3, -8e-3)), ("diverging", 1e-3, -8e-3)),
                "focused": (usbeam.Focused((-2e-3, 20e-3)), ("focused", -2e-3, 20e-3))}[transmit]
    n = 3000
    pts = np.column_stack([rng.uniform(-40e-3, 40e-3, n), np.zeros(n), rng.uniform(0.2e-3, 60e-3, n)])
    data = (rng.standard_normal((1, 1, 1, N_SAMPLES)) + 1j * rng.standard_normal((1, 1, 1, N_SAMPLES))).astype(np.complex64)
    bf = usbeam.Beamformer(probe, seq, usbeam.Grid.points(pts), fs=FS, fc=FC, c=C, t0=T0, n_samples=N_SAMPLES,
                           f_number=0, interpolation=interpolation, n_frames=1)
    got = bf(data)[0]
    want = ref.das(data, probe.x, [tup], pts, fs=FS, fc=FC, c=C, t0=T0, f_number=0, interpolation=interpolation)[0]
    scale = np.abs(data[0, 0, 0]).astype(np.float64)
    local = np.convolve(scale, np.ones(4), mode="full")[3:3 + N_SAMPLES]  # sum of |x| over 4 taps from i
    tau = ref.transmit_time(tup, pts, probe.x, C) + np.hypot(pts[:, 0] - probe.x[0], pts[:, 2]) / C
    s = (tau - T0) * FS
    inside = (s > 2) & (s < N_SAMPLES - 4)
    base = np.clip(np.floor(s).astype(int) - 1, 0, N_SAMPLES - 1)
    err = np.abs(got - want)[inside] / local[base[inside]]
    if interpolation == "nearest":  # a delay within ~1e-12 sample of a tie may round the other way
        err = err[err < 0.5]
    assert err.max() <= TOLERANCES["das_factored_weight_rel"], err.max()


CHILD = r"""
import sys, numpy as np
sys.path[:0] = sys.argv[1:3]
import usbeam
from reference import das as ref
from tolerances import TOLERANCES
rng = np.random.default_rng(int(sys.argv[3]))
probe = usbeam.LinearArray(16, 3e-4, width=2.5e-4)
angle = 0.2
seq = [usbeam.PlaneWave(angle), usbeam.PlaneWave(-angle), usbeam.DivergingWave((0.0, -1e-2))]
tuples = [("plane", angle), ("plane", -angle), ("diverging", 0.0, -1e-2)]
grid = usbeam.Grid(x=np.linspace(-2e-3, 2e-3, 9), z=np.linspace(2e-3, 9e-3, 7))
worst = 0.0
for dtype in (np.complex64, np.float32):
    for interpolation in ("nearest", "linear", "cubic"):
        for n_frames in (1, 8, 16, 43):  # single; 8-frame pairs (contiguous); 16; 32 + 8 + 3
            shape = (n_frames, 3, 16, 320)
            if dtype == np.complex64:
                data = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
            else:
                data = rng.standard_normal(shape).astype(dtype)
            for budget in ((None,) if dtype == np.complex64 else (1,)):  # table / receive part per call
                bf = usbeam.Beamformer(probe, seq, grid, fs=20e6, fc=5e6, c=1540.0, t0=1.5e-6, n_samples=320,
                                       f_number=1.2, window="hann", interpolation=interpolation, dtype=dtype,
                                       n_frames=n_frames, max_table_bytes=budget)
                got = bf(data).reshape(n_frames, -1)
                want = ref.das(data, probe.x, tuples, grid.coordinates(), fs=20e6, fc=5e6, c=1540.0, t0=1.5e-6,
                               f_number=1.2, window_kind="hann", interpolation=interpolation)
                err = np.abs(got - want)
                if interpolation == "nearest":
                    off = err > TOLERANCES["das_nearest_pixel_rel"] * np.abs(want).max()
                    assert np.mean(off) <= TOLERANCES["das_nearest_fraction_off"]
                    got, want = got[~off], want[~off]
                worst = max(worst, np.linalg.norm(got - want) / np.linalg.norm(want))
# the general geometry (a convex array: each element's cone and normal) through the same copies
probe = usbeam.ConvexArray(n_elements=24, pitch=3e-4, radius=0.012, element_width=2.6e-4)
h = probe.apothem
seq = [usbeam.PlaneWave(0.1), usbeam.DivergingWave((0.5e-3, -h - 1e-3))]
tuples = [("plane", 0.1, 0.0), ("diverging", (0.5e-3, 0.0, -h - 1e-3))]
r, th = np.meshgrid(np.linspace(probe.radius + 1e-3, probe.radius + 9e-3, 8), np.linspace(-0.7, 0.7, 9), indexing="ij")
pts = np.column_stack([(r * np.sin(th)).ravel(), np.zeros(r.size), (r * np.cos(th) - h).ravel()])
for interpolation in ("linear", "cubic"):
    for n_frames in (1, 8, 19):
        shape = (n_frames, 2, 24, 400)
        data = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)
        want = ref.das_general(data, probe.positions, probe.normals, tuples, pts, fs=20e6, fc=5e6, c=1540.0,
                               t0=1e-6, f_number=1.2, window_kind="hann", interpolation=interpolation)
        assert np.count_nonzero(want) > 0.3 * want.size
        for budget in (None, 1):
            bf = usbeam.Beamformer(probe, seq, usbeam.Grid.points(pts), fs=20e6, fc=5e6, c=1540.0, t0=1e-6,
                                   n_samples=400, f_number=1.2, window="hann", interpolation=interpolation,
                                   n_frames=n_frames, max_table_bytes=budget)
            got = bf(data).reshape(want.shape)
            worst = max(worst, np.linalg.norm(got - want) / np.linalg.norm(want))
assert worst <= TOLERANCES["das_rel_l2"], worst
print("ok", worst)
"""


def run_child_with_isa(code, isa, rng):
    """Run a child's code in a process of its own with USBEAM_DAS_ISA=isa (the copy is chosen
    once per process) and 2 threads; it prints "ok ..." when its checks pass."""
    tests = Path(__file__).resolve().parent.parent
    root = Path(usbeam.__file__).resolve().parent.parent
    env = dict(os.environ, USBEAM_DAS_ISA=isa, OMP_NUM_THREADS="2")
    out = subprocess.run([sys.executable, "-c", code, str(root), str(tests), str(int(rng.integers(1 << 30)))],
                         capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.startswith("ok")


@pytest.mark.parametrize("isa", ["0", "1"])
def test_every_instruction_set_copy(rng, isa):
    # USBEAM_DAS_ISA caps the copy das_delays.c picks (0 baseline, 1 AVX2 + FMA, 2 AVX-512,
    # the one the other tests run where the machine has it); on a machine without the
    # instruction set the cap changes nothing.  The choice is made once per process: one
    # process per copy.
    run_child_with_isa(CHILD, isa, rng)


@pytest.mark.parametrize("method", ["cf", "mv"])
def test_whole_entries_of_the_adaptive_plan(rng, method):
    # The adaptive plans read whole (point, transmit, element) entries, formed at plan time from
    # the receive and transmit parts (usbeam_das_point_entries): tabulated within
    # max_table_bytes, else formed per point at execute.  Both give the float64 reference.
    from reference import adaptive as ref_adaptive
    probe = usbeam.LinearArray(16, 3e-4)
    angles = (-0.08, 0.05)
    grid = usbeam.Grid(x=np.linspace(-2e-3, 2.5e-3, 5), z=np.linspace(5e-3, 9e-3, 6))
    data = (rng.standard_normal((2, 2, 16, 400)) + 1j * rng.standard_normal((2, 2, 16, 400))).astype(np.complex64)
    options = {"subarray_length": 6, "diagonal_loading": 0.05} if method == "mv" else {}
    want = ref_adaptive.beamform(method, data, probe.x, [("plane", a) for a in angles], grid.coordinates(), fs=25e6,
                                 fc=5e6, c=1540.0, t0=1e-6, f_number=1.2, window_kind="hann", interpolation="cubic",
                                 **options)
    images = []
    for budget in (None, 1):
        bf = usbeam.Beamformer(probe, [usbeam.PlaneWave(a) for a in angles], grid, fs=25e6, fc=5e6, c=1540.0, t0=1e-6,
                               n_samples=400, f_number=1.2, window="hann", interpolation="cubic", n_frames=2,
                               method=method, max_table_bytes=budget, **options)
        images.append(bf(data).reshape(2, -1))
        assert np.linalg.norm(images[-1] - want) <= TOLERANCES["adaptive_rel_l2"] * np.linalg.norm(want)
    np.testing.assert_array_equal(images[0], images[1])  # the same entries, tabulated or not


def test_sparse_operator_of_a_convex_array(rng):
    # The sparse plan's operator from whole entries in the general geometry (each element's cone).
    probe = usbeam.ConvexArray(n_elements=24, pitch=3e-4, radius=0.012, element_width=2.6e-4)
    h = probe.apothem
    seq = [usbeam.PlaneWave(0.1), usbeam.DivergingWave((0.5e-3, -h - 1e-3))]
    tuples = [("plane", 0.1, 0.0), ("diverging", (0.5e-3, 0.0, -h - 1e-3))]
    r, th = np.meshgrid(np.linspace(probe.radius + 1e-3, probe.radius + 9e-3, 8), np.linspace(-0.7, 0.7, 9),
                        indexing="ij")
    pts = np.column_stack([(r * np.sin(th)).ravel(), np.zeros(r.size), (r * np.cos(th) - h).ravel()])
    data = (rng.standard_normal((2, 2, 24, 400)) + 1j * rng.standard_normal((2, 2, 24, 400))).astype(np.complex64)
    want = ref.das_general(data, probe.positions, probe.normals, tuples, pts, fs=20e6, fc=5e6, c=1540.0, t0=1e-6,
                           f_number=1.2, window_kind="tukey", tukey_alpha=0.5, interpolation="cubic")
    assert np.count_nonzero(want) > 0.3 * want.size
    bf = usbeam.Beamformer(probe, seq, usbeam.Grid.points(pts), fs=20e6, fc=5e6, c=1540.0, t0=1e-6, n_samples=400,
                           f_number=1.2, window="tukey", tukey_alpha=0.5, interpolation="cubic", n_frames=2,
                           formulation="sparse")
    got = bf(data).reshape(want.shape)
    assert np.linalg.norm(got - want) <= TOLERANCES["das_rel_l2"] * np.linalg.norm(want)


CHUNKS_CHILD = r"""
import sys, numpy as np
sys.path[:0] = sys.argv[1:3]
import usbeam
rng = np.random.default_rng(int(sys.argv[3]))
# Odd and even aperture counts (f-number, nearest = 1 tap), both signs of steering, 43 frames
# cut at every block boundary of the kernels (32 / 16 / 8 frames and the partial block).
probe = usbeam.LinearArray(19, 3e-4, width=2.5e-4)
seq = [usbeam.PlaneWave(0.15), usbeam.DivergingWave((0.0, -1e-2))]
grid = usbeam.Grid(x=np.linspace(-3e-3, 3e-3, 11), z=np.linspace(2e-3, 9e-3, 9))
cuts = (0, 1, 3, 8, 11, 27, 43)
for dtype in (np.complex64, np.float32, np.int16):
    shape = (43, 2, 19, 300)
    if dtype == np.complex64:
        data = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    else:
        data = (1000 * rng.standard_normal(shape)).astype(dtype)
    for interpolation in ("nearest", "linear", "cubic"):
        for budget in (None, 1):  # receive table / receive part per call
            bf = usbeam.Beamformer(probe, seq, grid, fs=20e6, fc=5e6, c=1540.0, t0=1.5e-6, n_samples=300,
                                   f_number=1.3, window="hann", interpolation=interpolation, dtype=dtype,
                                   n_frames=43, max_table_bytes=budget)
            whole = bf(data)
            for split in (cuts, tuple(range(0, 44, 2)) + (43,), (0, 16, 32, 40, 43), (0, 2, 10, 26, 43)):
                parts = np.concatenate([bf(data[a:b]) for a, b in zip(split[:-1], split[1:]) if b - a >= 2])
                frames = [f for a, b in zip(split[:-1], split[1:]) if b - a >= 2 for f in range(a, b)]
                assert np.array_equal(parts, whole[frames]), (dtype, interpolation, budget, split)
print("ok")
"""


@pytest.mark.parametrize("isa", ["0", "1", "2"])
def test_frames_per_call_do_not_change_a_frame(rng, isa):
    # usbeam.batch cuts a record into chunks and promises the whole-record result bit for bit:
    # every multi-frame kernel sums a frame in one order (csrc/beamform/das.c), whatever the
    # number of frames in the call and the blocks (32 / 16 / 8 / partial) they fall in.  Calls
    # of one frame take the fused 1-frame path, equal only to float rounding, and are left out.
    run_child_with_isa(CHUNKS_CHILD, isa, rng)
