"""Color and power Doppler CUDA twins (cuda/doppler.cu) and the display twin
(cuda/doppler_display.cu) against the CPU backend and the float64 reference
(tests/reference/doppler.py).

Needs a GPU (marked cuda: skipped without one), except the last tests, which check that
asking for the CUDA backend without a GPU is a clean error.  Outputs are poisoned (NaN)
before each run: a finite result means every pixel was written."""
import numpy as np
import pytest

import usbeam
from reference import doppler as ref
from tolerances import TOLERANCES
from usbeam import device

FC, PRF, C = 5e6, 4e3, 1540.0


def random_ensemble(rng, shape, drift=0.3):
    """Noise plus a moving scatterer field: a slow-time phase ramp of random slope per pixel,
    so the velocities cover the Nyquist range and R(lag) is far from zero."""
    n_frames, spatial = shape[0], shape[1:]
    slope = rng.uniform(-np.pi, np.pi, spatial) * drift
    amplitude = 10 ** rng.uniform(-2, 0, spatial)
    t = np.arange(n_frames).reshape((-1,) + (1,) * len(spatial))
    signal = amplitude * np.exp(1j * (slope * t + rng.uniform(0, 2 * np.pi, spatial)))
    noise = 0.05 * (rng.standard_normal(shape) + 1j * rng.standard_normal(shape))
    return (signal + noise * amplitude).astype(np.complex64)


def poisoned(shape):
    return device.from_numpy(np.full(shape, np.nan, np.float32))


def check_written(*arrays):
    for a in arrays:
        assert np.all(np.isfinite(a)), "poison left: some pixels were not written"


@pytest.mark.cuda
@pytest.mark.parametrize("lag", [1, 3])
@pytest.mark.parametrize("average, window", [(1, "hamming"), ((3, 5), "hamming"), ((4, 2), "boxcar")])
@pytest.mark.parametrize("axial", [False, True])
def test_color_matches_cpu(rng, lag, average, window, axial):
    shape = (16, 2, 45, 37)
    iq = random_ensemble(rng, shape)
    kwargs = dict(fc=FC, prf=PRF, c=C, lag=lag, average=average, window=window, axial_correction=axial,
                  dz=C / FC / 4 if axial else None)
    cpu = usbeam.ColorDopplerPlan(shape, **kwargs)
    gpu = usbeam.ColorDopplerPlan(shape, backend="cuda", **kwargs)
    outs = [poisoned(shape[1:]) for _ in range(3)]
    got = gpu(device.from_numpy(iq), velocity=outs[0], variance=outs[1], power=outs[2])
    assert all(g is o for g, o in zip(got, outs))
    velocity, variance, power = (o.to_numpy() for o in outs)
    check_written(velocity, variance, power)
    want_v, want_var, want_p = cpu(iq, return_power=True)
    vn = cpu.nyquist_velocity
    assert np.max(np.abs(velocity - want_v)) <= TOLERANCES["doppler_cuda_velocity_vn"] * vn
    assert np.max(np.abs(variance - want_var)) <= TOLERANCES["doppler_cuda_rel"] * np.max(np.abs(want_var))
    np.testing.assert_allclose(power, want_p, rtol=TOLERANCES["doppler_cuda_rel"], atol=0)
    if axial:
        # With the Loupas correction, noise-dominated pixels of this ensemble divide by a mean
        # frequency near zero: the CPU backend itself is 1e-6..1e-3 VN from the float64
        # reference there (measured over 20 seeds under the CUDA emulator's first run).  The
        # GPU == CPU check above covers this case; CPU vs reference on well-conditioned data is
        # test_doppler.py::test_axial_correction_matches_reference_and_rescales.
        return
    mz, mx = (average, average) if np.ndim(average) == 0 else average
    ref_v, _ = ref.kasai(iq, FC, PRF, C, lag, mz, mx, window, dz=kwargs["dz"])
    assert np.max(np.abs(velocity - ref_v)) <= TOLERANCES["doppler_velocity_vn"] * vn


@pytest.mark.cuda
def test_color_host_input_round_trip_and_strict(rng):
    shape = (8, 33, 20)
    iq = random_ensemble(rng, shape)
    gpu = usbeam.ColorDopplerPlan(shape, fc=FC, prf=PRF, c=C, average=3, backend="cuda")
    velocity, variance = gpu(iq)  # host in: copied in, results copied out
    assert isinstance(velocity, np.ndarray) and isinstance(variance, np.ndarray)
    want_v, want_var = usbeam.ColorDopplerPlan(shape, fc=FC, prf=PRF, c=C, average=3)(iq)
    assert np.max(np.abs(velocity - want_v)) <= TOLERANCES["doppler_cuda_velocity_vn"] * gpu.nyquist_velocity
    host_out = np.full(shape[1:], np.nan, np.float32)
    gpu(iq, velocity=host_out)
    check_written(host_out)
    strict = usbeam.ColorDopplerPlan(shape, fc=FC, prf=PRF, c=C, backend="cuda", strict=True)
    with pytest.raises(TypeError, match="iq"):
        strict(iq)
    with pytest.raises(ValueError, match="velocity"):
        gpu(device.from_numpy(iq), velocity=poisoned((3, 3)))
    names = list(gpu.cuda.stage_times())
    assert names == ["color.autocorr", "color.smooth", "color.estimate"]


@pytest.mark.cuda
@pytest.mark.parametrize("db, reference, noise_floor", [(False, None, 0.0), (False, None, 0.05), (True, None, 0.0),
                                                        (True, 2.0, 1e-3)])
def test_power_matches_cpu_and_reference(rng, db, reference, noise_floor):
    shape = (24, 3, 50, 41)
    iq = random_ensemble(rng, shape)
    kwargs = dict(db=db, reference=reference, noise_floor=noise_floor)
    gpu = usbeam.PowerDopplerPlan(shape, backend="cuda", **kwargs)
    out = poisoned(shape[1:])
    assert gpu(device.from_numpy(iq), out=out) is out
    got = out.to_numpy()
    check_written(got)
    want = usbeam.PowerDopplerPlan(shape, **kwargs)(iq)
    want_ref = ref.power(iq, db=db, reference=reference, noise_floor=noise_floor)
    if db:
        np.testing.assert_allclose(got, want, atol=TOLERANCES["doppler_cuda_power_db_abs"], rtol=0)
        np.testing.assert_allclose(got, want_ref, atol=TOLERANCES["doppler_power_db_abs"], rtol=0)
        if reference is None:
            assert got.max() == 0.0  # the brightest stored pixel is exactly the reference
    else:
        np.testing.assert_allclose(got, want, rtol=TOLERANCES["doppler_cuda_rel"], atol=0)
        np.testing.assert_allclose(got, want_ref, rtol=TOLERANCES["doppler_power_rel"], atol=0)


@pytest.mark.cuda
def test_power_all_zero_ensemble_is_minus_inf_db():
    gpu = usbeam.PowerDopplerPlan((4, 9, 7), db=True, backend="cuda")
    got = gpu(np.zeros((4, 9, 7), np.complex64))
    assert np.all(got == -np.inf)


@pytest.mark.cuda
def test_power_stage_times(rng):
    shape = (6, 17, 19)
    gpu = usbeam.PowerDopplerPlan(shape, db=True, backend="cuda")
    gpu(device.from_numpy(random_ensemble(rng, shape)))
    assert list(gpu.cuda.stage_times()) == ["power.mean", "power.db"]


@pytest.mark.cuda
@pytest.mark.parametrize("method, order", [("mean", None), ("poly", 1), ("poly", 4)])
def test_clutter_projection_matches_cpu_and_reference(rng, method, order):
    shape = (32, 2, 40, 29)
    tissue = 30.0 * np.exp(1j * rng.uniform(0, 2 * np.pi, shape[1:]))  # strong, slowly varying clutter
    t = np.linspace(-1, 1, shape[0]).reshape(-1, 1, 1, 1)
    iq = (tissue * (1 + 0.2 * t + 0.1 * t ** 2) + random_ensemble(rng, shape)).astype(np.complex64)
    kwargs = dict(method=method) if order is None else dict(method=method, order=order)
    gpu = usbeam.ClutterFilter(shape, backend="cuda", **kwargs)
    out = device.from_numpy(np.full(shape, np.nan + 1j * np.nan, np.complex64))
    assert gpu(device.from_numpy(iq), out=out) is out
    got = out.to_numpy()
    assert np.all(np.isfinite(got)), "poison left: some samples were not written"
    want = usbeam.ClutterFilter(shape, **kwargs)(iq)
    scale = np.max(np.abs(iq))  # errors scale with the input, which the filter removes
    assert np.max(np.abs(got - want)) <= TOLERANCES["doppler_cuda_clutter_rel"] * scale
    want_ref = ref.mean_filter(iq) if method == "mean" else ref.poly_filter(iq, order)
    assert np.max(np.abs(got - want_ref)) <= TOLERANCES["doppler_clutter_rel"] * scale
    d = device.from_numpy(iq)  # in place: out is the input
    assert gpu(d, out=d) is d
    np.testing.assert_array_equal(d.to_numpy(), got)
    assert list(gpu.cuda.stage_times()) == ["clutter.project"]


def clutter_40db(rng, shape):
    """Fresh ensemble: slow clutter 40 dB over the moving signal (amplitude 100 vs <= 1)."""
    tissue = 100.0 * np.exp(1j * rng.uniform(0, 2 * np.pi, shape[1:]))
    t = np.linspace(-1, 1, shape[0]).reshape((-1,) + (1,) * (len(shape) - 1))
    return (tissue * (1 + 0.3 * t - 0.2 * t ** 2 + 0.1 * t ** 3) + random_ensemble(rng, shape)).astype(np.complex64)


@pytest.mark.cuda
@pytest.mark.parametrize("method, order", [("mean", None)] + [("poly", k) for k in range(5)])
@pytest.mark.parametrize("n_frames", [16, 48])
def test_clutter_gemm_matches_cpu_kernel_and_reference(rng, method, order, n_frames):
    shape = (n_frames, 13, 21)
    iq = clutter_40db(rng, shape)
    kwargs = dict(method=method) if order is None else dict(method=method, order=order)
    gemm = usbeam.ClutterFilter(shape, backend="cuda", algorithm="gemm", **kwargs)
    assert gemm.algorithm == "gemm"
    d_in = device.from_numpy(iq)
    out = device.from_numpy(np.full(shape, np.nan + 1j * np.nan, np.complex64))
    assert gemm(d_in, out=out) is out
    got = out.to_numpy()
    assert np.all(np.isfinite(got)), "poison left: some samples were not written"
    np.testing.assert_array_equal(d_in.to_numpy(), iq)  # the input is not modified
    scale = np.max(np.abs(iq))  # float32 sums round at the clutter amplitude, before removal
    tol = TOLERANCES["doppler_cuda_clutter_gemm_rel"] * scale
    want_cpu = usbeam.ClutterFilter(shape, **kwargs)(iq)
    assert np.max(np.abs(got - want_cpu)) <= tol
    want_ref = ref.mean_filter(iq) if method == "mean" else ref.poly_filter(iq, order)
    assert np.max(np.abs(got - want_ref)) <= tol
    assert np.max(np.abs(want_ref)) > 100 * tol  # the signal left is far above the bound
    kernel = usbeam.ClutterFilter(shape, backend="cuda", **kwargs)(device.from_numpy(iq)).to_numpy()
    assert np.max(np.abs(got - kernel)) <= tol
    d = device.from_numpy(iq)  # in place: out is the input
    assert gemm(d, out=d) is d
    assert np.max(np.abs(d.to_numpy() - want_ref)) <= tol
    assert list(gemm.cuda.stage_times()) == ["clutter.project"]  # comparable with the kernel's


@pytest.mark.cuda
def test_clutter_gemm_host_round_trip(rng):
    shape = (20, 6, 9)
    iq = clutter_40db(rng, shape)
    got = usbeam.ClutterFilter(shape, "poly", order=2, backend="cuda", algorithm="gemm")(iq)
    got = got.to_numpy() if hasattr(got, "to_numpy") else np.asarray(got)
    tol = TOLERANCES["doppler_cuda_clutter_gemm_rel"] * np.max(np.abs(iq))
    assert np.max(np.abs(got - ref.poly_filter(iq, 2))) <= tol


@pytest.mark.cuda
@pytest.mark.parametrize("init, order", [("projection", 4), ("zero", 3), ("projection", 1)])
def test_clutter_iir_stream_matches_cpu(rng, init, order):
    """Three blocks of a stream, the state carried on the device, then a reset and a fresh
    record: every block equals the CPU backend's (same sections, same order of operations)."""
    shape = (24, 31, 27)
    kwargs = dict(method="iir", order=order, cutoff=0.08, init=init)
    gpu = usbeam.ClutterFilter(shape, backend="cuda", **kwargs)
    cpu = usbeam.ClutterFilter(shape, **kwargs)
    for block in range(4):
        if block == 3:
            gpu.reset()
            cpu.reset()
        iq = (20.0 + random_ensemble(rng, shape)).astype(np.complex64)  # a DC clutter term
        out = device.from_numpy(np.full(shape, np.nan + 1j * np.nan, np.complex64))
        got = gpu(device.from_numpy(iq), out=out).to_numpy()
        assert np.all(np.isfinite(got)), "poison left: some samples were not written"
        want = cpu(iq)
        assert np.max(np.abs(got - want)) <= TOLERANCES["doppler_cuda_clutter_rel"] * np.max(np.abs(iq))
    assert list(gpu.cuda.stage_times()) == ["clutter.iir"]


@pytest.mark.cuda
@pytest.mark.parametrize("init", ["projection", "zero"])
@pytest.mark.parametrize("refused_block", [0, 1])
@pytest.mark.parametrize("value", [np.nan, -np.inf])
def test_clutter_iir_refused_block_leaves_device_state(rng, init, refused_block, value):
    """A block with one NaN / inf sample, sent before the clean one: the twin (which does not
    report it, README) keeps the state and, for block 0, the projection initialisation as they
    were, so the stream goes on exactly as the CPU's, which refused the block before touching
    its state.  The bad block's own output is non-finite where the sample reaches (its pixel)."""
    shape = (16, 13, 11)
    kwargs = dict(method="iir", order=4, cutoff=0.08, init=init)
    gpu = usbeam.ClutterFilter(shape, backend="cuda", **kwargs)
    cpu = usbeam.ClutterFilter(shape, **kwargs)
    for block in range(3):
        iq = (20.0 + random_ensemble(rng, shape)).astype(np.complex64)
        if block == refused_block:
            bad = iq.copy()
            z, x = rng.integers(13), rng.integers(11)
            bad[rng.integers(16), z, x] = value
            poisoned_out = gpu(device.from_numpy(bad)).to_numpy()
            gpu.cuda.synchronize()  # not reported
            assert not np.all(np.isfinite(poisoned_out[:, z, x]))
            with pytest.raises(ValueError, match="iq contains NaN or infinite values"):
                cpu(bad)
        got = gpu(device.from_numpy(iq)).to_numpy()
        gpu.cuda.synchronize()  # clean block: no report
        want = cpu(iq)
        assert np.max(np.abs(got - want)) <= TOLERANCES["doppler_cuda_clutter_rel"] * np.max(np.abs(iq))


def tissue_blood_ensemble(rng, shape):
    """Strong tissue (40 dB above the blood) drifting slowly in amplitude and phase, plus the
    moving blood and noise of random_ensemble: the leading singular components are the tissue."""
    n_frames, spatial = shape[0], shape[1:]
    t = np.linspace(-1, 1, n_frames).reshape((-1,) + (1,) * len(spatial))
    tissue = 100.0 * np.exp(1j * rng.uniform(0, 2 * np.pi, spatial)) * (1 + 0.1 * t) * np.exp(0.05j * np.pi * t)
    return (tissue + random_ensemble(rng, shape)).astype(np.complex64)


def check_svd_against_cpu(gpu, cpu, iq, full_rank=True):
    out = device.from_numpy(np.full(iq.shape, np.nan + 1j * np.nan, np.complex64))
    assert gpu(device.from_numpy(iq), out=out) is out
    got = out.to_numpy()
    assert np.all(np.isfinite(got)), "poison left: some samples were not written"
    want = cpu(iq)
    assert np.max(np.abs(got - want)) <= TOLERANCES["doppler_cuda_clutter_svd_rel"] * np.max(np.abs(iq))
    values, low, high = gpu.svd_info()
    want_values, want_low, want_high = cpu.svd_info()
    assert (low, high) == (want_low, want_high)
    # both Gram matrices are double sums of exact float products and both Jacobi orderings
    # (CPU cyclic, GPU round-robin) are backward stable in double: the CPU test's bound against
    # LAPACK (tests/doppler/test_doppler.py) holds for both.  A rank-deficient ensemble's null
    # eigenvalues are rounding noise (~eps lambda_max), whose square roots only bound each other.
    rank = len(values) if full_rank else min(iq.shape[0], iq[0].size)
    lapack = np.linalg.svd(iq.reshape(iq.shape[0], -1).T.astype(np.complex128), compute_uv=False)
    for v in (values, want_values):
        np.testing.assert_allclose(v[:rank], lapack[:rank], rtol=1e-9, atol=1e-9 * lapack[0])
        assert np.all(v[rank:] <= 1e-6 * lapack[0])
    return got, low


@pytest.mark.cuda
@pytest.mark.parametrize("shape", [(32, 40, 29), (128, 12, 11), (16, 200, 200)])  # last: > 1 Gram chunk
@pytest.mark.parametrize("low, high", [(1, None), (2, 20), (0, 0)])
def test_clutter_svd_fixed_cutoffs_match_cpu(rng, shape, low, high):
    iq = tissue_blood_ensemble(rng, shape)
    high = None if high is None else min(high, shape[0] - 1)
    kwargs = dict(method="svd", low=low) if high is None else dict(method="svd", low=low, high=high)
    gpu = usbeam.ClutterFilter(shape, backend="cuda", **kwargs)
    got, _ = check_svd_against_cpu(gpu, usbeam.ClutterFilter(shape, **kwargs), iq)
    d = device.from_numpy(iq)  # in place: out is the input
    assert gpu(d, out=d) is d
    np.testing.assert_array_equal(d.to_numpy(), got)
    assert list(gpu.cuda.stage_times()) == ["clutter.svd.gram", "clutter.svd.eigen", "clutter.svd.apply"]


@pytest.mark.cuda
@pytest.mark.parametrize("shape", [(32, 40, 29), (64, 20, 30)])
def test_clutter_svd_automatic_cutoff_matches_cpu(rng, shape):
    iq = tissue_blood_ensemble(rng, shape)
    gpu = usbeam.ClutterFilter(shape, method="svd", low="auto", auto_frequency=0.05, backend="cuda")
    cpu = usbeam.ClutterFilter(shape, method="svd", low="auto", auto_frequency=0.05)
    _, low = check_svd_against_cpu(gpu, cpu, iq)
    assert low >= 1  # the tissue component was found and removed
    # a second, fresh ensemble through the same plan: the cut-off is recomputed on the device
    check_svd_against_cpu(gpu, cpu, tissue_blood_ensemble(rng, shape))


@pytest.mark.cuda
@pytest.mark.parametrize("n_frames", [2, 3, 17, 33, 69, 70, 127])
def test_clutter_svd_frame_counts_match_cpu(rng, n_frames):
    """Odd counts run the round-robin Jacobi with a dummy index; 69 is the largest whose Jacobi
    matrices fit in shared memory on sm_90, 70 the smallest that keeps them in global memory."""
    shape = (n_frames, 23, 19)
    iq = tissue_blood_ensemble(rng, shape)
    for low, high in [(1, None), (0, n_frames // 2)]:
        kwargs = dict(method="svd", low=low) if high is None else dict(method="svd", low=low, high=high)
        gpu = usbeam.ClutterFilter(shape, backend="cuda", **kwargs)
        check_svd_against_cpu(gpu, usbeam.ClutterFilter(shape, **kwargs), iq)
    gpu = usbeam.ClutterFilter(shape, method="svd", low="auto", auto_frequency=0.05, backend="cuda")
    cpu = usbeam.ClutterFilter(shape, method="svd", low="auto", auto_frequency=0.05)
    check_svd_against_cpu(gpu, cpu, iq)


@pytest.mark.cuda
@pytest.mark.parametrize("shape", [(48, 5, 6), (33, 2, 7)])
def test_clutter_svd_rank_deficient_matches_cpu(rng, shape):
    """More frames than pixels: a cluster of (numerically) zero eigenvalues, which the two Jacobi
    orderings resolve into different bases; the cut-offs below go through that cluster, whose
    components carry nothing of the ensemble, so the outputs still agree."""
    iq = tissue_blood_ensemble(rng, shape)
    for low, high in [(1, None), (2, shape[0] - 3)]:
        kwargs = dict(method="svd", low=low, high=high)
        gpu = usbeam.ClutterFilter(shape, backend="cuda", **kwargs)
        check_svd_against_cpu(gpu, usbeam.ClutterFilter(shape, **kwargs), iq, full_rank=False)


@pytest.mark.cuda
@pytest.mark.parametrize("low", ["auto", 1])
def test_clutter_svd_non_finite_input_gives_nan(rng, low):
    """One NaN sample makes the Gram matrix NaN: the device skips the rotations and writes a NaN
    projector, so the whole output is NaN (no crash, no projection on an unrotated basis)."""
    shape = (16, 9, 7)
    iq = tissue_blood_ensemble(rng, shape)
    iq[3, 4, 2] = np.nan
    gpu = usbeam.ClutterFilter(shape, method="svd", low=low, backend="cuda")
    out = device.from_numpy(np.zeros(shape, np.complex64))
    assert np.all(np.isnan(gpu(device.from_numpy(iq), out=out).to_numpy()))


@pytest.mark.cuda
def test_clutter_svd_on_cuda_refuses_more_than_128_frames():
    with pytest.raises(ValueError, match="shape"):
        usbeam.ClutterFilter((129, 8, 8), method="svd", backend="cuda")


# ---- display (cuda/doppler_display.cu) ------------------------------------------------------

VN = C * PRF / (4 * FC)


def display_inputs(rng, shape):
    """Fresh velocity (about +-VN/3) and power (dB-like, around the threshold) images."""
    v = (rng.standard_normal(shape) * VN / 3).astype(np.float32)
    p = (rng.standard_normal(shape) * 3.0).astype(np.float32)
    return v, p


def run_display_poisoned(plan, v, p, poison, mask_poison):
    """One call of a CUDA display plan on device inputs into poisoned device outputs given as
    out_velocity / out_power / mask; host copies back."""
    d_v = None if v is None else device.from_numpy(v)
    d_p = None if p is None else device.from_numpy(p)
    outs = [None if x is None else device.from_numpy(np.full(plan.shape, poison, np.float32)) for x in (v, p)]
    mask = device.from_numpy(np.full(plan.shape, mask_poison, np.uint8))
    got = plan(d_v, d_p, out_velocity=outs[0], out_power=outs[1], mask=mask)
    assert all(g is o for g, o in zip(got, (*outs, mask)))  # the caller's buffers, returned
    return tuple(None if o is None else o.to_numpy() for o in (*outs, mask))


DISPLAY_CASES = [(True, 0.0), (False, 0.7), (True, 0.5), (True, 0.9)]


@pytest.mark.cuda
@pytest.mark.parametrize("median, persistence", DISPLAY_CASES)
@pytest.mark.parametrize("given", ["both", "velocity", "power"])
def test_display_matches_cpu_bit_exact(rng, median, persistence, given):
    # Same float32 arithmetic (no FMA contraction on either side), same median network: equal,
    # not close.  Several calls of several images each: persistence carries across calls.
    shape = (3, 41, 29)
    kwargs = dict(median=median, persistence=persistence, power_threshold=0.5, velocity_threshold=0.05 * VN)
    cpu = usbeam.DopplerDisplay(shape, **kwargs)
    # two GPU plans fed the same data with different poisons: equal results mean every pixel written
    gpus = [usbeam.DopplerDisplay(shape, backend="cuda", **kwargs) for _ in range(2)]
    history_v, history_p = [], []
    for call in range(4):
        v, p = display_inputs(rng, shape)
        v = v if given in ("both", "velocity") else None
        p = p if given in ("both", "power") else None
        want = cpu(v, p)
        first = run_display_poisoned(gpus[0], v, p, np.nan, 0xAB)
        second = run_display_poisoned(gpus[1], v, p, -7.0, 0x54)
        for w, a, b in zip(want, first, second):
            if w is None:
                assert a is None and b is None
                continue
            np.testing.assert_array_equal(a, w)
            np.testing.assert_array_equal(b, w)
        assert set(np.unique(first[2])) <= {0, 1}
        history_v.append(v)
        history_p.append(p)
    if given == "both":
        # and against the float64 reference over the whole sequence (the CPU test's tolerance)
        rv, rp, _ = ref.display(np.concatenate(history_v), np.concatenate(history_p), median, persistence,
                                0.5, 0.05 * VN)
        np.testing.assert_allclose(first[1], rp[-shape[0]:], atol=TOLERANCES["doppler_display_abs"])


@pytest.mark.cuda
@pytest.mark.parametrize("shape", [(1, 1), (1, 7), (6, 1), (2, 2), (3, 130, 3)])
def test_display_edges_match_cpu(rng, shape):
    # replicated edges on degenerate images (one row, one column, one pixel)
    kwargs = dict(median=True, persistence=0.3, power_threshold=-1.0, velocity_threshold=0.01 * VN)
    cpu = usbeam.DopplerDisplay(shape, **kwargs)
    gpu = usbeam.DopplerDisplay(shape, backend="cuda", **kwargs)
    for _ in range(3):
        v, p = display_inputs(rng, shape)
        for w, g in zip(cpu(v, p), run_display_poisoned(gpu, v, p, np.nan, 0xAB)):
            np.testing.assert_array_equal(g, w)


@pytest.mark.cuda
def test_display_device_in_device_out_reset_and_stream(rng):
    shape = (2, 33, 20)
    kwargs = dict(median=True, persistence=0.6, power_threshold=0.0, velocity_threshold=0.02 * VN)
    cpu = usbeam.DopplerDisplay(shape, **kwargs)
    gpu = usbeam.DopplerDisplay(shape, backend="cuda", strict=True, **kwargs)
    for call in range(3):
        if call == 2:  # reset: the next call starts a fresh history on both
            cpu.reset()
            gpu.reset()
        v, p = display_inputs(rng, shape)
        got = gpu(device.from_numpy(v), device.from_numpy(p))
        assert all(isinstance(g, device.DeviceArray) for g in got)
        assert got[2].dtype == np.uint8 and got[0].shape == shape
        for w, g in zip(cpu(v, p), got):
            np.testing.assert_array_equal(g.to_numpy(), w)
    assert set(gpu.cuda.stage_times()) == {"display.filter"}
    # strict: host arrays refused, naming the parameter
    with pytest.raises(TypeError, match="velocity.*strict"):
        gpu(v, device.from_numpy(p))
    with pytest.raises(TypeError, match="power.*strict"):
        gpu(None, p)
    with pytest.raises(TypeError, match="float32"):
        gpu(device.from_numpy(v.astype(np.float64)))
    with pytest.raises(ValueError, match="shape"):
        gpu(device.from_numpy(v[:1]))


@pytest.mark.cuda
def test_display_host_input_round_trip(rng):
    shape = (17, 23)
    cpu = usbeam.DopplerDisplay(shape, persistence=0.4, power_threshold=0.2)
    gpu = usbeam.DopplerDisplay(shape, persistence=0.4, power_threshold=0.2, backend="cuda")
    for _ in range(3):
        v, p = display_inputs(rng, shape)
        got = gpu(v, p)  # host in: validated as on the CPU, copied in, results copied out
        assert all(isinstance(g, np.ndarray) for g in got)
        for w, g in zip(cpu(v, p), got):
            np.testing.assert_array_equal(g, w)
    out_v, out_p, mask = gpu(velocity=v)  # velocity only: the power history waits on both backends
    assert out_p is None
    want_v, _, want_mask = cpu(velocity=v)
    np.testing.assert_array_equal(out_v, want_v)
    np.testing.assert_array_equal(mask, want_mask)
    # host output buffers: filled by a copy and returned
    v, p = display_inputs(rng, shape)
    bufs = (np.full(shape, np.nan, np.float32), np.full(shape, np.nan, np.float32), np.full(shape, 7, np.uint8))
    got = gpu(v, p, out_velocity=bufs[0], out_power=bufs[1], mask=bufs[2])
    assert all(g is b for g, b in zip(got, bufs))
    for w, g in zip(cpu(v, p), got):
        np.testing.assert_array_equal(g, w)


@pytest.mark.cuda
def test_display_output_buffers_are_checked(rng):
    shape = (9, 11)
    gpu = usbeam.DopplerDisplay(shape, backend="cuda")
    v, p = display_inputs(rng, shape)
    d_v, d_p = device.from_numpy(v), device.from_numpy(p)
    with pytest.raises(ValueError, match="out_velocity must not share memory"):
        gpu(d_v, d_p, out_velocity=d_v)  # in place would race: a pixel's output is its neighbours' input
    with pytest.raises(ValueError, match="out_power is given without power"):
        gpu(d_v, out_power=device.from_numpy(p))
    with pytest.raises(TypeError, match="mask must have dtype uint8"):
        gpu(d_v, mask=device.from_numpy(np.zeros(shape, np.float32)))
    with pytest.raises(ValueError, match="out_velocity must have shape"):
        gpu(d_v, out_velocity=device.from_numpy(np.zeros((9, 10), np.float32)))
    strict = usbeam.DopplerDisplay(shape, backend="cuda", strict=True)
    with pytest.raises(TypeError, match="mask is in host memory.*strict"):
        strict(d_v, mask=np.zeros(shape, np.uint8))


@pytest.mark.cuda
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_display_non_finite_input_is_refused_as_on_cpu(rng, bad):
    shape = (2, 9, 8)
    v, p = display_inputs(rng, shape)
    p[1, 4, 0] = bad
    cpu = usbeam.DopplerDisplay(shape)
    gpu = usbeam.DopplerDisplay(shape, backend="cuda")
    with pytest.raises(ValueError, match="power must contain only finite"):
        cpu(v, p)
    # host input: refused before anything runs, with the CPU's message
    with pytest.raises(ValueError, match="power must contain only finite"):
        gpu(v, p)
    # device input: the kernel flags it; reported once the work has finished ...
    gpu(device.from_numpy(v), device.from_numpy(p))
    with pytest.raises(ValueError, match="velocity or power contains NaN or infinite"):
        gpu.cuda.synchronize()
    # ... or at the plan's next call, naming the earlier one
    gpu(device.from_numpy(p), None)
    usbeam._core.stream_synchronize(gpu.cuda.stream)  # finished, not checked
    with pytest.raises(ValueError, match="earlier call's velocity or power"):
        gpu(device.from_numpy(v), None)
    # a finite call afterwards is clean and matches a fresh CPU plan after reset
    gpu.reset()
    got = gpu(device.from_numpy(v), None)
    np.testing.assert_array_equal(got[0].to_numpy(), usbeam.DopplerDisplay(shape)(v)[0])


def test_cuda_backend_refused_cleanly_without_gpu():
    if usbeam.cuda_available():
        pytest.skip("a GPU is visible: the tests above run the CUDA twins")
    with pytest.raises(usbeam.UsbeamError, match="cuda"):
        usbeam.ColorDopplerPlan((4, 8, 8), fc=FC, prf=PRF, c=C, backend="cuda")
    with pytest.raises(usbeam.UsbeamError, match="cuda"):
        usbeam.PowerDopplerPlan((4, 8, 8), backend="cuda")
    with pytest.raises(usbeam.UsbeamError, match="cuda"):
        usbeam.ClutterFilter((4, 8, 8), backend="cuda")
    with pytest.raises(usbeam.UsbeamError, match="cuda"):
        usbeam.DopplerDisplay((8, 8), backend="cuda")
