"""usbeam.Pipeline (RF -> IQ -> DAS -> B-mode with buffers allocated once) against the same
stages called one by one, and `make demo`'s entry point end to end."""
import numpy as np
import pytest

import usbeam


def small_setup(rng, n_frames=2):
    probe = usbeam.LinearArray(n_elements=32, pitch=0.3e-3, width=0.27e-3, bandwidth=0.6)
    sequence = usbeam.plane_wave_sequence(np.deg2rad([-5.0, 5.0]))
    acq = dict(fs=20e6, fc=5e6, c=1540.0, t0=1e-6, n_samples=400)
    grid = usbeam.Grid(x=np.linspace(-4e-3, 4e-3, 21), z=np.linspace(5e-3, 12e-3, 31))
    rf = rng.integers(-3000, 3000, (n_frames, 2, 32, 400)).astype(np.int16)
    return probe, sequence, acq, grid, rf


def test_pipeline_equals_the_stages_called_one_by_one(rng):
    probe, sequence, acq, grid, rf = small_setup(rng)
    pipe = usbeam.Pipeline(probe, sequence, grid, **acq, n_frames=2, rf_dtype=np.int16, bandwidth=0.6,
                           f_number=1.2, window="hann", interpolation="cubic", dynamic_range=40.0)
    rf_copy = rf.copy()
    out = np.full(pipe.output_shape, 7, np.uint8)
    assert pipe(rf, out=out) is out
    np.testing.assert_array_equal(rf, rf_copy)

    iq = usbeam.rf2iq(rf, fs=acq["fs"], fc=acq["fc"], t0=acq["t0"], bandwidth=0.6)
    image = usbeam.das(iq, probe, sequence, grid, fs=acq["fs"], fc=acq["fc"], c=acq["c"], t0=acq["t0"],
                       f_number=1.2, window="hann", interpolation="cubic")
    np.testing.assert_array_equal(pipe.iq, iq)
    np.testing.assert_array_equal(pipe.image, image)
    np.testing.assert_array_equal(out, usbeam.bmode(image, 40.0))
    assert set(pipe.timings) == {"rf2iq", "das", "bmode"} and all(t > 0 for t in pipe.timings.values())
    assert pipe.input_shape == rf.shape and pipe.output_shape == (2, 31, 21)


def test_pipeline_decimation_feeds_the_beamformer(rng):
    probe, sequence, acq, grid, rf = small_setup(rng, n_frames=1)
    pipe = usbeam.Pipeline(probe, sequence, grid, **acq, n_frames=1, filter="kaiser", decimation=2,
                           bandwidth=0.6, interpolation="linear", bmode_output="db", dynamic_range=50.0)
    got = pipe(rf)
    iq = usbeam.rf2iq(rf, fs=acq["fs"], fc=acq["fc"], t0=acq["t0"], bandwidth=0.6, filter="kaiser", decimation=2)
    image = usbeam.das(iq, probe, sequence, grid, fs=acq["fs"] / 2, fc=acq["fc"], c=acq["c"], t0=acq["t0"],
                       f_number=1.0, interpolation="linear")
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, usbeam.bmode(image, 50.0, output="db"))


def test_pipeline_bad_input(rng):
    probe, sequence, acq, grid, rf = small_setup(rng)
    pipe = usbeam.Pipeline(probe, sequence, grid, **acq, n_frames=2)
    with pytest.raises(TypeError, match="rf"):
        pipe(rf.astype(np.float32))
    with pytest.raises(ValueError, match="rf"):
        pipe(rf[:1])
    with pytest.raises(TypeError, match="out"):
        pipe(rf, out=np.empty(pipe.output_shape, np.float32))
    with pytest.raises(ValueError, match="n_frames"):
        usbeam.Pipeline(probe, sequence, grid, **acq, n_frames=0)
    with pytest.raises(ValueError, match="fs"):
        usbeam.Pipeline(probe, sequence, grid, **{**acq, "fs": -1.0})


@pytest.mark.slow
def test_demo_runs_end_to_end(tmp_path, capsys):
    from usbeam import demo

    png = tmp_path / "demo.png"
    assert demo.main(["--out", str(png), "--repeat", "2"]) == 0
    assert png.stat().st_size > 10_000 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    printed = capsys.readouterr().out
    for stage in ("rf2iq", "das", "bmode", "total"):
        assert stage in printed
