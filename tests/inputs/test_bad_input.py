"""Regression tests for the defects a fuzzing audit of the public API found: edge-case
sizes that read out of bounds, outputs that alias inputs, concurrent pipelines, and bad
parameters that crashed, wrapped around or gave a wrong answer instead of raising an
exception naming the parameter (README "Errors")."""
import numpy as np
import pytest

import usbeam
from reference import das as ref
from tolerances import TOLERANCES

# ---------------------------------------------------------------------------------------
# DAS with records shorter than the interpolation's taps
# ---------------------------------------------------------------------------------------
FS, FC, C = 40e6, 5e6, 1540.0
SHORT_RECORDS = [("nearest", 1), ("linear", 1), ("cubic", 1), ("cubic", 2), ("cubic", 3)]


def random_channels(rng, shape, dtype):
    x = rng.standard_normal(shape)
    if dtype == np.complex64:
        return (x + 1j * rng.standard_normal(shape)).astype(np.complex64)
    if dtype == np.int16:
        return (x * 1000).astype(np.int16)
    return x.astype(np.float32)


@pytest.mark.parametrize("interpolation, n_samples", SHORT_RECORDS)
@pytest.mark.parametrize("dtype", [np.complex64, np.float32, np.int16])
@pytest.mark.parametrize("n_frames", [1, 13, 20001])
def test_das_short_record_reads_in_bounds(rng, interpolation, n_samples, dtype, n_frames):
    # Linear needs 2 samples and cubic 4 for any sample to be in range: the image is all
    # zeros, with no read past the record (it used to read ~3 n_frames floats past the
    # staging buffer: SIGSEGV, or NaN from 0 * garbage).  The reference says the same.
    probe = usbeam.LinearArray(3, 3e-4)
    grid = usbeam.Grid(x=[-3e-4, 0.0, 2e-4], z=[1e-2, 2e-2])
    data = random_channels(rng, (n_frames, 1, 3, n_samples), dtype)
    copy = data.copy()
    bf = usbeam.Beamformer(probe, usbeam.PlaneWave(0), grid, fs=FS, fc=FC, c=C, t0=1e-2 * 2 / C - 0.3 / FS,
                           n_samples=n_samples, f_number=0, interpolation=interpolation, dtype=dtype,
                           n_frames=n_frames, min_coverage=0)  # an empty image on purpose
    out_dtype = np.complex64 if dtype == np.complex64 else np.float32
    out = np.full((n_frames,) + grid.shape, np.nan, out_dtype)
    bf(data, out=out)
    np.testing.assert_array_equal(data, copy)
    want = ref.das(data[:2], probe.x, [("plane", 0.0)], grid.coordinates(), fs=FS, fc=FC, c=C,
                   t0=1e-2 * 2 / C - 0.3 / FS, f_number=0, interpolation=interpolation)
    assert not want.any()  # nearest's one sample is in range only at s == 0 exactly
    assert not out.any()  # all frames, exactly zero (no NaN, no garbage)


def test_das_one_shot_short_record(rng):
    data = random_channels(rng, (2000, 1, 1), np.complex64)
    out = usbeam.das(data, usbeam.LinearArray(1, 3e-4), usbeam.PlaneWave(0), usbeam.Grid(x=[0.0], z=[1e-2]),
                     fs=FS, fc=FC, interpolation="linear", min_coverage=0)  # empty on purpose
    assert out.shape == (2000, 1, 1) and not out.any()


def assert_das_matches(got, want):
    got = got.reshape(want.shape)
    assert np.linalg.norm(got - want) <= TOLERANCES["das_rel_l2"] * np.linalg.norm(want)


@pytest.mark.parametrize("interpolation, n_samples", [("linear", 3), ("linear", 4), ("cubic", 5), ("cubic", 6)])
def test_das_shortest_usable_record(rng, interpolation, n_samples):
    # The shortest records with an interval of samples in range (linear: [0, n - 2], cubic:
    # [1, n - 3]) keep the full taps: points whose delay falls inside match the reference,
    # the others are zero; many frames.  Delays span s = 0.03 .. 3.1 samples.
    probe = usbeam.LinearArray(2, 3e-4)
    z = 1e-2 + np.linspace(0, 6e-5, 16)
    grid = usbeam.Grid(x=[0.0], z=z)
    t0 = 2 * 1e-2 / C
    n_frames = 1001
    data = random_channels(rng, (n_frames, 1, 2, n_samples), np.complex64)
    out = usbeam.das(data, probe, usbeam.PlaneWave(0), grid, fs=FS, fc=FC, c=C, t0=t0, f_number=0,
                     interpolation=interpolation)
    want = ref.das(data, probe.x, [("plane", 0.0)], grid.coordinates(), fs=FS, fc=FC, c=C, t0=t0, f_number=0,
                   interpolation=interpolation)
    assert (np.abs(want) > 0).any(axis=0).sum() >= 1 and (want == 0).all(axis=0).sum() >= 1
    assert_das_matches(out, want)


# ---------------------------------------------------------------------------------------
# Pipelines called from several threads
# ---------------------------------------------------------------------------------------
def run_in_threads(call, inputs, n_calls):
    """Each thread calls `call` n_calls times on its own input; returns every result."""
    import threading

    barrier = threading.Barrier(len(inputs))
    results = [[] for _ in inputs]
    errors = []

    def worker(k):
        try:
            barrier.wait()
            for _ in range(n_calls):
                results[k].append(call(inputs[k]))
        except BaseException as exc:  # reported by the test, not lost in the thread
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in threads), "a pipeline call hung"
    assert not errors, errors
    return results


PIPE_PROBE = usbeam.LinearArray(16, 3e-4)
PIPE_GRID = usbeam.Grid(x=np.linspace(-2e-3, 2e-3, 16), z=np.linspace(3e-3, 1e-2, 24))


def test_pipeline_threads_match_single_threaded(rng):
    # The stages share the pipeline's iq and image buffers: concurrent calls used to
    # interleave (88 of 120 results wrong).  Each thread's results must equal the same
    # input's single-threaded result exactly.
    pipe = usbeam.Pipeline(PIPE_PROBE, usbeam.PlaneWave(0), PIPE_GRID, fs=20e6, fc=5e6, n_samples=256,
                           n_frames=2, bmode_output="db")
    inputs = [rng.integers(-1000, 1000, pipe.input_shape).astype(np.int16) for _ in range(4)]
    want = [pipe(x).copy() for x in inputs]
    for k, got in enumerate(run_in_threads(pipe, inputs, 15)):
        for image in got:
            np.testing.assert_array_equal(image, want[k])


def test_doppler_pipeline_threads_match_single_threaded(rng):
    pipe = usbeam.DopplerPipeline(PIPE_PROBE, usbeam.PlaneWave(0), PIPE_GRID, n_frames=8, n_samples=256,
                                  fs=20e6, fc=5e6, prf=5e3, outputs=("color", "power"))
    inputs = [rng.integers(-1000, 1000, pipe.rf_shape).astype(np.int16) for _ in range(4)]
    want = [tuple(m.copy() for m in pipe(x)) for x in inputs]
    for k, got in enumerate(run_in_threads(pipe, inputs, 6)):
        for maps in got:
            for a, b in zip(maps, want[k]):
                np.testing.assert_array_equal(a, b)
    # the maps a call returns are its own: the next call does not overwrite them
    first = pipe(inputs[0])
    pipe(inputs[1])
    np.testing.assert_array_equal(first.velocity, want[0][0])


# ---------------------------------------------------------------------------------------
# out= overlapping an input (or another output)
# ---------------------------------------------------------------------------------------
def complex_iq(rng, shape):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)


def overlap_cases(rng):
    """(what, call, input arrays that must stay unchanged, parameter named in the message)."""
    iq = complex_iq(rng, (10, 12, 8))
    image = complex_iq(rng, (1000,))
    y = (rng.standard_normal(4000) * 100).astype(np.float32)
    shifted = np.zeros(iq.size + 1, np.complex64)
    shifted[:-1] = iq.ravel()
    color = usbeam.ColorDopplerPlan(iq.shape, fc=5e6, prf=5e3, c=1540.0)
    both = np.empty((12, 8), np.float32)
    both[...] = rng.standard_normal((12, 8))
    display_out = np.empty((12, 8), np.float32)
    raw = rng.integers(-100, 100, (400, 8)).astype(np.int16)
    channel_map = usbeam.live.ChannelMap((400, 8), [2, 3], [0], 200)
    head = rng.random((1, 50, 7)).astype(np.float32)
    detections = np.zeros((1, 300, 6), np.float32)
    rf = rng.integers(-1000, 1000, (4, 2, 256)).astype(np.int16)
    rf_bytes = np.zeros(rf.nbytes + 8 * 2 * 256 * 8, np.uint8)
    rf_in = rf_bytes[: rf.nbytes].view(np.int16).reshape(rf.shape)
    rf_in[...] = rf
    rf2iq = usbeam.RF2IQPlan(rf.shape, np.int16, fs=20e6, fc=5e6)
    power = usbeam.PowerDopplerPlan(iq.shape)
    power_in = np.zeros(2 * iq.size + 96, np.float32)  # iq, then room for a map
    logits = rng.standard_normal((16, 16)).astype(np.float32)
    das_data = complex_iq(rng, (2, 1, 4, 64))
    beamformer = usbeam.Beamformer(usbeam.LinearArray(4, 3e-4), usbeam.PlaneWave(0),
                                   usbeam.Grid(x=[0.0, 1e-4], z=[1e-3, 2e-3]), fs=20e6, fc=5e6, n_samples=64,
                                   n_frames=2)
    hadamard = usbeam.HadamardDecodePlan((8, 4, 32), 8, dtype=np.float32)
    coded = rng.standard_normal((8, 4, 32)).astype(np.float32)
    return [
        ("bmode", lambda: usbeam.bmode(image, 40, out=image.view(np.uint8)[:1000]), [image], "image"),
        ("float32_to_float16", lambda: usbeam.float32_to_float16(y, out=y.view(np.float16)[: y.size]), [y], "x"),
        ("color velocity = variance", lambda: color(iq, velocity=both, variance=both), [iq], "velocity"),
        ("color velocity in iq", lambda: color(iq, velocity=iq.view(np.float32).ravel()[:96].reshape(12, 8)),
         [iq], "iq"),
        ("clutter shifted by one", lambda: usbeam.ClutterFilter(iq.shape, "poly")(
            shifted[:-1].reshape(iq.shape), out=shifted[1:].reshape(iq.shape)), [], "iq"),
        ("power", lambda: power(power_in[: iq.size * 2].view(np.complex64).reshape(iq.shape),
                                out=power_in[iq.size * 2 - 96:iq.size * 2].reshape(12, 8)), [], "iq"),
        ("channel map", lambda: channel_map(raw, out=raw.ravel()[:400].reshape(1, 2, 200)), [raw], "frame"),
        ("detect counts in detections", lambda: usbeam.detect_postprocess(
            head, out=(detections, detections.view(np.int32).ravel()[:1])), [head], "detections"),
        ("detect out in raw", lambda: usbeam.detect_postprocess(
            head, out=(np.zeros((1, 300, 6), np.float32), head.view(np.int32).ravel()[:1])), [head], "raw"),
        ("rf2iq", lambda: rf2iq(rf_in, out=rf_bytes[8:8 + rf2iq.out_shape[0] * 2 * 256 * 8].view(
            np.complex64).reshape(rf2iq.out_shape)), [], "rf"),
        ("das", lambda: beamformer(das_data, out=das_data.ravel()[:8].reshape(2, 2, 2)), [das_data], "data"),
        ("hadamard in place", lambda: hadamard(coded, out=coded), [coded], "data"),
        ("display out_power = out_velocity", lambda: usbeam.DopplerDisplay((12, 8))(
            both, both + 1, out_velocity=display_out, out_power=display_out), [], "out_velocity"),
        ("segment_threshold", lambda: usbeam.segment_threshold(
            logits, out=logits.view(np.bool_).ravel()[:256].reshape(16, 16)),
         [logits], "logits"),
    ]


def test_out_overlapping_an_input_is_refused(rng):
    for what, call, inputs, word in overlap_cases(rng):
        copies = [a.copy() for a in inputs]
        with pytest.raises(ValueError, match=f"must not share memory with {word}") as info:
            call()
        for a, c in zip(inputs, copies):
            np.testing.assert_array_equal(a, c, err_msg=what)


def test_out_exactly_in_place_and_disjoint_views_still_work(rng):
    iq = complex_iq(rng, (10, 12, 8))
    for method in ("mean", "poly", "svd"):
        f = usbeam.ClutterFilter(iq.shape, method)
        want = f(iq)
        inplace = iq.copy()
        assert f(inplace, out=inplace) is inplace
        np.testing.assert_array_equal(inplace, want)
    # outputs side by side in one buffer (adjacent, not overlapping) are accepted
    color = usbeam.ColorDopplerPlan(iq.shape, fc=5e6, prf=5e3, c=1540.0)
    v0, s0 = color(iq)
    maps = np.full((2, 12, 8), np.nan, np.float32)
    color(iq, velocity=maps[0], variance=maps[1])
    np.testing.assert_array_equal(maps[0], v0)
    np.testing.assert_array_equal(maps[1], s0)
    # bmode into the bytes right after the image in one buffer
    buf = np.zeros(1000 * 8 + 1000, np.uint8)
    image = buf[:8000].view(np.complex64)
    image[...] = complex_iq(rng, (1000,))
    want = usbeam.bmode(image.copy(), 40)
    np.testing.assert_array_equal(usbeam.bmode(image, 40, out=buf[8000:]), want)


# ---------------------------------------------------------------------------------------
# TOBE unflip and RCA decode: matrix and axes
# ---------------------------------------------------------------------------------------
def test_tobe_unflip_negative_axes_match_the_math(rng):
    from reference import hadamard as href

    h = href.hadamard(8)
    data = rng.integers(-32768, 32767, (2, 8, 8, 50)).astype(np.int16)
    want = data.astype(np.int64) * h[None, :, :, None]  # channel c of transmit t times H[t, c]
    np.testing.assert_array_equal(usbeam.tobe_unflip(data, h), want)
    np.testing.assert_array_equal(usbeam.tobe_unflip(data, h, axis=1, channel_axis=2), want)
    # channels before transmits: the signs transposed
    swapped = np.ascontiguousarray(np.swapaxes(data, 1, 2))
    np.testing.assert_array_equal(usbeam.tobe_unflip(swapped, h, axis=-2, channel_axis=-3),
                                  np.swapaxes(want, 1, 2))
    # rca_decode of a TOBE FORCES acquisition, transmit axis given negative or positive
    tobe = usbeam.RowColumnArray(8, 8, 3e-4, tobe=True)
    expected = href.decode(want, h, axis=1)
    for axis in (1, -3):
        got = usbeam.rca_decode(data, tobe, "forces", axis=axis)
        np.testing.assert_allclose(got, expected, rtol=TOLERANCES["hadamard_float32_rel"],
                                   atol=TOLERANCES["hadamard_float32_abs"] * np.abs(expected).max())


@pytest.mark.parametrize("call, word", [
    (lambda d, h: usbeam.tobe_unflip(d, h * 0.5), "matrix"),  # would cast to int8 zeros
    (lambda d, h: usbeam.tobe_unflip(d, np.full(h.shape, np.nan)), "matrix"),
    (lambda d, h: usbeam.tobe_unflip(d, h[0]), "matrix"),  # 1-D: was IndexError
    (lambda d, h: usbeam.tobe_unflip(d, np.zeros(h.shape, np.int8)), "matrix"),
    (lambda d, h: usbeam.tobe_unflip(np.array(3, np.int16), h), "data"),  # 0-d: was ZeroDivisionError
    (lambda d, h: usbeam.tobe_unflip(d, h, axis=5), "axis"),
    (lambda d, h: usbeam.tobe_unflip(d, h, channel_axis=-4), "channel_axis"),
    (lambda d, h: usbeam.tobe_unflip(d, h, axis=1, channel_axis=-2), "channel_axis"),
    (lambda d, h: usbeam.rca_decode(d, usbeam.RowColumnArray(8, 8, 3e-4), "forces", axis=5), "axis"),
    (lambda d, h: usbeam.rca_decode(d, usbeam.RowColumnArray(8, 8, 3e-4), "forces", axis=-4), "axis"),
    # TOBE: the channel axis follows the transmit axis; axis=-1 used to wrap it to axis 0
    (lambda d, h: usbeam.rca_decode(d, usbeam.RowColumnArray(8, 8, 3e-4, tobe=True), "forces", axis=-1), "axis"),
])
def test_tobe_and_rca_decode_bad_arguments(rng, call, word):
    data = rng.integers(-100, 100, (8, 8, 8)).astype(np.int16)
    copy = data.copy()
    with pytest.raises(ValueError, match=word):
        call(data, usbeam.hadamard(8))
    np.testing.assert_array_equal(data, copy)


# ---------------------------------------------------------------------------------------
# ChannelMap indices: range-checked before the cast to int32 / int64
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("channels, rows, word", [
    ([2**32 + 3], [0], "element_channel"),  # used to wrap to channel 3
    ([1e10], [0], "element_channel"),  # used to report -2147483648
    ([-1], [0], "element_channel"),
    (np.array([2**31], np.uint64), [0], "element_channel"),
    ([0], np.array([2**63], np.uint64), "acquisition_row"),
    ([0], [1e300], "acquisition_row"),
    ([0.5], [0], "element_channel"),
    (["a"], [0], "element_channel"),
])
def test_channel_map_index_out_of_range(channels, rows, word):
    with pytest.raises((ValueError, TypeError), match=word) as info:
        usbeam.live.ChannelMap((400, 8), channels, rows, 200)
    assert "-2147483648" not in str(info.value)


def test_channel_map_valid_indices_gather(rng):
    raw = rng.integers(-1000, 1000, (400, 8)).astype(np.int16)
    channels, rows = np.array([7, 0, 3], np.uint64), np.array([0.0, 150.0])
    m = usbeam.live.ChannelMap((400, 8), channels, rows, 200)
    out = np.full(m.output_shape, -1, np.int16)
    m(raw, out=out)
    want = np.stack([raw[int(r):int(r) + 200][:, channels.astype(int)].T for r in rows])  # out[a, e, k]
    np.testing.assert_array_equal(out, want)


# ---------------------------------------------------------------------------------------
# regionprops_basic: n_labels bounded
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("n_labels", [2**26, 2**30, 2**62])
def test_regionprops_n_labels_bounded(n_labels):
    # a 1 x 1 image: 2**26 labels allocated 2.4 GB of empty rows, 2**30 would be OOM-killed
    with pytest.raises((ValueError, MemoryError), match="n_labels"):
        usbeam.regionprops_basic(np.ones((1, 1), np.int32), n_labels=n_labels)


def test_regionprops_n_labels_up_to_the_bound():
    labels = np.zeros((2, 3), np.int32)
    labels[1, 2] = 1
    props = usbeam.regionprops_basic(labels, n_labels=6)  # as many labels as pixels: allowed
    np.testing.assert_array_equal(props["area"], [1, 0, 0, 0, 0, 0])
    np.testing.assert_array_equal(props["bbox"][0], [1, 2, 2, 3])
    sparse = np.full((1, 1), 9, np.int32)  # a label id above the pixel count: up to it
    assert usbeam.regionprops_basic(sparse, n_labels=9)["area"][8] == 1


# ---------------------------------------------------------------------------------------
# Parameters: the exception names the parameter (no OverflowError, AttributeError, silent
# truncation of a float shape, or a lost 0-d shape)
# ---------------------------------------------------------------------------------------
def small_geometry():
    return usbeam.LinearArray(4, 3e-4), usbeam.PlaneWave(0), usbeam.Grid(x=[0.0], z=[1e-3])


@pytest.mark.parametrize("make, exc, word", [
    (lambda: usbeam.RF2IQPlan((4, 64), np.int16, fs=20e6, fc=5e6, decimation=2**63), ValueError, "decimation"),
    (lambda: usbeam.Beamformer(*small_geometry(), fs=20e6, fc=5e6, n_samples=64, max_table_bytes=2**63),
     ValueError, "max_table_bytes"),
    (lambda: usbeam.remove_small_components(np.ones((4, 4), bool), 2**63), ValueError, "min_area"),
    (lambda: usbeam.Grid(x="abc", z=[1e-3]), TypeError, "x"),
    (lambda: usbeam.Delays("abc"), TypeError, "delays"),
    (lambda: usbeam.Delays([["a"]]), TypeError, "delays"),
    (lambda: usbeam.model_input(np.zeros((8, 8), np.uint8), 4, offset="a"), TypeError, "offset"),
    (lambda: usbeam.Pipeline("p", usbeam.PlaneWave(0), usbeam.Grid(x=[0.0], z=[1e-3]), fs=20e6, fc=5e6,
                             n_samples=64), TypeError, "probe"),
    (lambda: usbeam.DopplerPipeline("p", usbeam.PlaneWave(0), usbeam.Grid(x=[0.0], z=[1e-3]), n_frames=4,
                                    n_samples=64, fs=20e6, fc=5e6, prf=5e3), TypeError, "probe"),
    (lambda: usbeam.BModePlan("ab"), TypeError, "shape"),
    (lambda: usbeam.ClutterFilter("ab"), TypeError, "shape"),
    (lambda: usbeam.BModePlan((3.5, 4)), TypeError, "shape"),  # was truncated to (3, 4)
    (lambda: usbeam.ClutterFilter((8.5, 4, 4)), TypeError, "shape"),
    (lambda: usbeam.ColorDopplerPlan((8.5, 4, 4), fc=5e6, prf=5e3, c=1540.0), TypeError, "shape"),
    (lambda: usbeam.PowerDopplerPlan((8, 4.5, 4)), TypeError, "shape"),
    (lambda: usbeam.ComponentsPlan((3.5, 4)), TypeError, "shape"),
    (lambda: usbeam.live.ChannelMap((400.5, 8), [0], [0], 200), TypeError, "raw_shape"),
    (lambda: usbeam.RF2IQPlan(5.0, np.int16, fs=20e6, fc=5e6), TypeError, "shape"),
    (lambda: usbeam.HadamardDecodePlan((8, 4.0, 2), 8), TypeError, "shape"),
    (lambda: usbeam.RCAGrid.plane([0, 0, 0], [1e-4, 0], [0, 0, 1e-4], 4, 4), ValueError, "u_step"),
    (lambda: usbeam.RCAGrid.plane([0, 0], [1e-4, 0, 0], [0, 0, 1e-4], 4, 4), ValueError, "origin"),
    (lambda: usbeam.RCAGrid.plane([0, 0, 0], [1e-4, 0, 0], "abc", 4, 4), TypeError, "v_step"),
])
def test_bad_parameter_is_named(make, exc, word):
    with pytest.raises(exc, match=word):
        make()


def scatterer_case(**change):
    """simulate_rf's arguments for one scatterer 20 mm deep under a 128-element array."""
    args = dict(positions=np.array([[0.0, 0.0, 0.02]]), amplitudes=np.ones(1),
                probe=usbeam.LinearArray(128, 3e-4, width=2.7e-4), sequence=usbeam.PlaneWave(0.0), fs=20e6,
                fc=5e6, n_samples=1024)
    args.update(change)
    return args


# Values in the wrong unit, each of which gave a silent wrong answer before: all-zero RF
# (scatterers or probe in mm, a record that ends before any echo), RF at fs = 20 Hz, or
# velocities scaled by 1000 (c in mm/us, fc in MHz).
@pytest.mark.parametrize("make, word", [
    (lambda: usbeam.simulate_rf(**scatterer_case(positions=np.array([[0.0, 0.0, 20.0]]))),
     r"positions reaches 20 m .* not mm"),
    (lambda: usbeam.simulate_rf(**scatterer_case(probe=usbeam.LinearArray(128, 0.3, width=0.27))),
     r"probe reaches 19.05 m .* not mm"),
    (lambda: usbeam.simulate_rf(**scatterer_case(n_samples=200)), r"positions: no scatterer's echo falls within"),
    (lambda: usbeam.simulate_rf(**scatterer_case(t0=1e-3)), r"positions: no scatterer's echo falls within"),
    (lambda: usbeam.simulate_rf(**scatterer_case(fs=20.0, fc=5.0)), r"fs = 20 Hz is below 1 kHz"),
    (lambda: usbeam.simulate_rf(**scatterer_case(c=1.54)), r"c = 1.54 m/s is not a speed of sound"),
    (lambda: usbeam.color_doppler(np.ones((8, 4, 4), np.complex64), fc=5e6, prf=1e3, c=1.54), r"c = 1.54 m/s"),
    (lambda: usbeam.ColorDopplerPlan((8, 4, 4), fc=5.0, prf=1e3, c=1540.0), r"fc = 5 Hz is below 1 kHz"),
    (lambda: usbeam.nyquist_velocity(fc=5e6, prf=1e3, c=1.54), r"c = 1.54 m/s"),
    (lambda: usbeam.auto_f_number(3e-4, 5.0, 0.75, 1540.0), r"fc = 5 Hz"),
    (lambda: usbeam.simulate_rca(np.array([[0.0, 0.0, 0.02]]), np.ones(1), usbeam.RowColumnArray(16, 16, 3e-4), "forces",
                                 fs=20e6, fc=5e6, n_samples=100), r"positions: no scatterer's echo falls within"),
    (lambda: usbeam.simulate_rca(np.array([[0.0, 0.0, 20.0]]), np.ones(1), usbeam.RowColumnArray(16, 16, 3e-4), "forces",
                                 fs=20e6, fc=5e6, n_samples=1000), r"positions reaches 20 m"),
    (lambda: usbeam.simulate_rca(np.array([[0.0, 0.0, 0.02]]), np.ones(1), usbeam.RowColumnArray(16, 16, 3e-4), "forces",
                                 fs=20e6, fc=5e6, n_samples=1000, c=1.54), r"c = 1.54 m/s"),
])
def test_wrong_units_refused_naming_the_parameter(make, word):
    with pytest.raises(ValueError, match=word):
        make()


def test_simulation_limits_accept_what_they_should():
    """The unit checks leave real cases alone: zero amplitudes give zero RF without error, and a
    scatterer whose echo is in the record gives it (its peak at the round trip 2 z / c)."""
    quiet = usbeam.simulate_rf(**scatterer_case(amplitudes=np.zeros(1)))
    assert quiet.shape == (1, 128, 1024) and not quiet.any()
    rf = usbeam.simulate_rf(**scatterer_case())
    centre = np.abs(rf[0, 63:65]).sum(axis=0)
    assert abs(np.argmax(centre) / 20e6 - 2 * 0.02 / 1540.0) < 2 / 5e6  # within two periods


def test_zero_dimensional_inputs_keep_their_shape():
    x = np.array(np.float32(2.5))
    half = usbeam.float32_to_float16(x)
    assert half.shape == () and half == np.float16(2.5)
    back = usbeam.float16_to_float32(half)
    assert back.shape == () and back == np.float32(2.5)
    mask = usbeam.segment_threshold(np.array(np.float32(0.3)))
    assert mask.shape == () and bool(mask)


def test_big_endian_int16_is_converted_consistently(rng):
    # '>i2' (e.g. from a big-endian file) is accepted everywhere as int16, and gives exactly
    # the native int16 result (README "Errors"); Beamformer(dtype=int16) used to refuse it
    native = rng.integers(-1000, 1000, (2, 1, 4, 64)).astype(np.int16)
    swapped = native.astype(">i2")
    probe, tx, grid = small_geometry()
    bf = usbeam.Beamformer(probe, tx, grid, fs=20e6, fc=5e6, n_samples=64, dtype=np.int16, n_frames=2)
    np.testing.assert_array_equal(bf(swapped), bf(native))
    np.testing.assert_array_equal(usbeam.das(swapped, probe, tx, grid, fs=20e6, fc=5e6),
                                  usbeam.das(native, probe, tx, grid, fs=20e6, fc=5e6))
    np.testing.assert_array_equal(usbeam.rf2iq(swapped, fs=20e6, fc=5e6), usbeam.rf2iq(native, fs=20e6, fc=5e6))
    coded = rng.integers(-1000, 1000, (8, 4, 16)).astype(np.int16)
    np.testing.assert_array_equal(usbeam.hadamard_decode(coded.astype(">i2"), 8), usbeam.hadamard_decode(coded, 8))
    assert swapped.dtype == np.dtype(">i2")  # the input is untouched


def test_timeout_helper():
    from usbeam import _validate

    assert _validate.timeout("timeout", None) is None and _validate.timeout("timeout", 2) == 2.0
    for bad, exc in (("x", TypeError), (float("nan"), ValueError), (-1.0, ValueError)):
        with pytest.raises(exc, match="timeout"):
            _validate.timeout("timeout", bad)


def test_distances_helper_refuses_non_finite_positions():
    # max / min of an array holding NaN is NaN, and NaN > 1 m is False: checked on its own
    from usbeam import _validate

    ok = np.array([[0.0, 0.0, 0.02], [-0.01, 0.0, 0.05]])
    assert _validate.distances("positions", ok) is not None
    for value in (np.nan, np.inf, -np.inf):
        bad = ok.copy()
        bad[1, 2] = value
        with pytest.raises(ValueError, match="positions holds NaN or infinite scatterer positions"):
            _validate.distances("positions", bad, "scatterer positions")
    with pytest.raises(ValueError, match="positions reaches 20 m"):
        _validate.distances("positions", ok * 1e3 / 2.5, "scatterer positions")


@pytest.mark.parametrize("interpolation, n_samples", [("linear", 1), ("cubic", 1), ("cubic", 3)])
def test_das_short_record_without_table(rng, interpolation, n_samples):
    # max_table_bytes=1: no precomputed table, the taps are formed per point in execute
    probe = usbeam.LinearArray(3, 3e-4)
    grid = usbeam.Grid(x=[-3e-4, 0.0, 2e-4], z=[1e-2, 2e-2])
    n_frames = 20001
    bf = usbeam.Beamformer(probe, usbeam.PlaneWave(0), grid, fs=FS, fc=FC, c=C, n_samples=n_samples,
                           interpolation=interpolation, n_frames=n_frames, max_table_bytes=1,
                           min_coverage=0)  # an empty image on purpose
    out = np.full((n_frames,) + grid.shape, np.nan, np.complex64)
    bf(random_channels(rng, (n_frames, 1, 3, n_samples), np.complex64), out=out)
    assert not out.any()


@pytest.mark.parametrize("kwargs, pattern", [
    (dict(cyst_center=(0.0, 0.1)), r"cyst_center \(0\.0, 0\.1\) with cyst_radius 0\.004 m lies outside the phantom"),
    (dict(cyst_center=(0.0, 25.0)), r"cyst_center reaches 25 m from the array"),
    (dict(x_range=(-10.0, 10.0), z_range=(10.0, 40.0)), r"x_range reaches 10 m from the array"),
    (dict(x_range=(float("nan"), 0.01)), r"x_range must contain only finite values"),
    (dict(z_range=(0.01, 0.02, 0.03)), r"z_range must be two numbers \(got 3\)"),
    (dict(points=(0.01, 0.02, 0.03)), r"points must be \(x, z\) pairs \(got 3 numbers\)"),
    (dict(points=((0.0, float("inf")),)), r"points must contain only finite values"),
    (dict(point_amplitude=float("inf")), r"point_amplitude must be finite"),
])
def test_cyst_phantom_refuses_what_would_give_another_phantom(kwargs, pattern):
    # a cyst that misses the speckle region used to leave a phantom without a cyst, and
    # ranges in mm a phantom 1000x too large, with no error
    with pytest.raises(ValueError, match=pattern):
        usbeam.cyst_phantom(**kwargs)


def test_cyst_phantom_cyst_at_the_edge_and_no_cyst_still_work():
    # a cyst overlapping the region's edge leaves its part inside empty; radius 0 is no cyst
    # (its centre then does not matter); the scatterers are the ones the same seed gave before
    positions, amplitudes = usbeam.cyst_phantom(cyst_center=(0.0, 0.043), seed=3)
    inside = np.hypot(positions[:-2, 0], positions[:-2, 2] - 0.043) <= 0.004
    assert positions.shape[0] == amplitudes.shape[0] and not inside.any()
    rng = np.random.default_rng(3)
    x, z = rng.uniform(-0.01, 0.01, 4000), rng.uniform(0.01, 0.04, 4000)
    kept = np.hypot(x, z - 0.043) > 0.004
    np.testing.assert_array_equal(positions[:-2, 0], x[kept])
    np.testing.assert_array_equal(positions[:-2, 2], z[kept])
    none, _ = usbeam.cyst_phantom(cyst_center=(0.0, 0.1), cyst_radius=0, seed=3)
    assert none.shape[0] == 4000 + 2
