"""A researcher's first hour (issue 15), chains and live sessions: Pipeline, DopplerPipeline and
live.Session take the (frames, elements, samples) layout load_must returns and keep leading
axes as given; from_recording builds them with no acquisition parameter by hand;
SimulatedScanner frames of a wrong shape get a message; Result converts with np.asarray;
reprs for Jupyter."""
import warnings

import numpy as np
import pytest

import usbeam
from conftest import shared_dataset
from tolerances import TOLERANCES
from usbeam.live import Session, SimulatedScanner

X_GRID = np.linspace(-12.5e-3, 12.5e-3, 126)
Z_GRID = np.linspace(10e-3, 35e-3, 126)


@pytest.fixture(scope="module")
def disk():
    return usbeam.load_must(shared_dataset("PWI_disk.mat"))


@pytest.fixture(scope="module")
def grid():
    return usbeam.Grid(x=X_GRID, z=Z_GRID)


def test_pipeline_takes_load_must_layout_and_keeps_leading_axes(disk, grid):
    # Pipeline used to refuse load_must's (frames, elements, samples) that Beamformer accepts
    pipeline = usbeam.Pipeline.from_recording(disk, grid, n_frames=4)
    assert pipeline.input_shape == (4, 1, 128, 334)
    four = pipeline(disk.data[:4])                                  # (4, 128, 334): load_must's layout
    assert four.shape == (4,) + grid.shape
    np.testing.assert_array_equal(pipeline(disk.data[:4, None]), four)  # (4, 1, 128, 334): input_shape
    out = np.empty((2, 2) + grid.shape, np.uint8)
    assert pipeline(disk.data[:4].reshape(2, 2, 128, 334)[:, :, None], out=out) is out  # leading (2, 2)
    np.testing.assert_array_equal(out.reshape(four.shape), four)
    with pytest.raises(ValueError, match=r"rf has 3 frames .* n_frames=4"):
        pipeline(disk.data[:3])
    with pytest.raises(ValueError, match=r"MATLAB layout.*pass rf\.T"):
        pipeline(np.ascontiguousarray(disk.data[:4].T))
    # a 1-frame chain: a batch of one stays a batch, a bare frame gives a bare image
    one = usbeam.Pipeline.from_recording(disk, grid, n_frames=1)
    assert one(disk.data[:1]).shape == (1,) + grid.shape
    assert one(disk.data[0]).shape == grid.shape
    np.testing.assert_array_equal(one(disk.data[0]), one(disk.data[:1])[0])


def test_doppler_pipeline_from_recording_and_layout(disk):
    grid = usbeam.Grid(x=np.linspace(-12.5e-3, 12.5e-3, 51), z=np.linspace(10e-3, 35e-3, 51))
    doppler = usbeam.DopplerPipeline.from_recording(disk, grid)
    assert (doppler.n_frames, doppler.prf, doppler.clutter.method) == (32, 1e4, "poly")
    maps = doppler(disk.data)                                      # (32, 128, 334), as load_must returns
    np.testing.assert_array_equal(doppler(disk.data[:, None]).velocity, maps.velocity)
    # the same maps as the stages run by hand with the recording's parameters
    iq = usbeam.rf2iq(disk.data, fs=disk.fs, fc=disk.fc, t0=disk.t0, bandwidth=disk.bandwidth)
    bf = usbeam.Beamformer.from_recording(disk, grid, dtype=np.complex64)
    filtered = usbeam.clutter_filter(bf(iq), "poly")
    velocity, _ = usbeam.color_doppler(filtered, fc=disk.fc, prf=disk.prf, c=disk.c)
    np.testing.assert_allclose(maps.velocity, velocity, rtol=0, atol=1e-6 * usbeam.nyquist_velocity(
        fc=disk.fc, prf=disk.prf, c=disk.c))
    rec = usbeam.io.Recording(data=disk.data, probe=disk.probe, sequence=disk.sequence, fs=disk.fs, fc=disk.fc,
                              c=disk.c, t0=disk.t0)                 # no prf: the error names it
    with pytest.raises(ValueError, match="prf"):
        usbeam.DopplerPipeline.from_recording(rec, grid)
    assert usbeam.DopplerPipeline.from_recording(rec, grid, prf=5e3, clutter="SVD").clutter.method == "svd"


def test_pipeline_reprs(disk, grid):
    pipeline = usbeam.Pipeline.from_recording(disk, grid, n_frames=2)
    text = repr(pipeline)
    assert text.startswith("Pipeline(input=int16(2, 1, 128, 334)") and "t0=9.95 us" in text
    pipeline(disk.data[:2])
    html = pipeline._repr_html_()
    assert "<table>" in html and "last call" in html and "rf2iq" in html
    doppler = usbeam.DopplerPipeline.from_recording(disk, usbeam.Grid(x=X_GRID[::5], z=Z_GRID[::5]))
    assert "clutter=poly" in repr(doppler) and "prf=10000 Hz" in repr(doppler)
    maps = doppler(disk.data)
    assert repr(maps) == "DopplerMaps(velocity=float32(26, 26), variance=float32(26, 26), power=float32(26, 26))"
    assert repr(grid) == "Grid(x=-12.5..12.5 mm (126, step 0.2 mm), z=10..35 mm (126, step 0.2 mm), shape (126, 126))"
    for obj in (pipeline, doppler):
        assert "object at 0x" not in repr(obj)


def test_session_takes_load_must_frames_and_result_converts(disk, grid):
    # live.Session used to refuse load_must frames; Result's np.asarray was a 0-d object array
    pipeline = usbeam.Pipeline.from_recording(disk, grid, n_frames=1)
    offline = pipeline(disk.data[:1])
    with Session(pipeline, policy="block") as session:
        assert "Session(Pipeline" in repr(session) and "running" in repr(session)
        frame_id = session.push(disk.data[0])                      # (128, 334): one load_must frame
        result = session.get(frame_id, timeout=30)
        image = np.asarray(result)
        assert image.dtype == np.uint8 and image.shape == pipeline.output_shape
        np.testing.assert_array_equal(image, offline)
        assert np.asarray(result, dtype=np.float32).dtype == np.float32
        with pytest.raises(ValueError, match=r"MATLAB layout.*pass frame\.T"):
            session.push(np.ascontiguousarray(disk.data[0].T))
        with pytest.raises(ValueError, match=r"frame must have shape \(1, 1, 128, 334\)"):
            session.push(disk.data[0, :, :300])
        assert "<table>" in session._repr_html_()


def test_simulated_scanner_wrong_frames_get_a_message(disk, grid):
    # SimulatedScanner frames of shape (128, 334) used to be rejected one by one, silently;
    # now they fit (the shape rule), and frames that do not are an error at construction
    pipeline = usbeam.Pipeline.from_recording(disk, grid, n_frames=1)
    with Session(pipeline, policy="block") as session:
        scanner = SimulatedScanner(session, 1000.0, disk.data[:3], n_frames=3)
        assert "SimulatedScanner(3 frames of (128, 334)" in repr(scanner)
        scanner.start()
        assert scanner.join(30)
        assert scanner.sent == 3 and scanner.errors == []
        session.wait_idle(30)
        assert session.stats()["processed"] == 3
        with pytest.raises(ValueError, match=r"source frames have shape \(334, 128\) .* \(1, 1, 128, 334\).*"
                                             r"MATLAB layout"):
            SimulatedScanner(session, 1000.0, np.ascontiguousarray(disk.data[:3].transpose(0, 2, 1)))
    # a target without a frame shape: the first failed push is a warning, not silence
    def refuse(frame):
        raise ValueError("frame must have shape (1, 2, 3)")

    scanner = SimulatedScanner(refuse, 1000.0, np.zeros((2, 4, 5), np.int16), n_frames=2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        scanner.start()
        assert scanner.join(30)
    assert len(scanner.errors) == 2
    assert any("push of frame 0 failed" in str(w.message) for w in caught)


@pytest.mark.cuda
def test_cuda_chains_follow_the_shape_rule(disk):
    # the same rule on the device: load_must's layout, host or device, and leading axes kept
    from usbeam import device

    grid = usbeam.Grid(x=X_GRID[::3], z=Z_GRID[::3])
    cpu = usbeam.Pipeline.from_recording(disk, grid, n_frames=2)(disk.data[:2])
    pipeline = usbeam.Pipeline.from_recording(disk, grid, n_frames=2, backend="cuda")
    host = pipeline(disk.data[:2])                                                # host (2, 128, 334)
    assert host.shape == cpu.shape
    assert np.abs(host.astype(int) - cpu).max() <= TOLERANCES["das_cuda_bmode_max_levels"]
    on_device = pipeline(device.from_numpy(np.ascontiguousarray(disk.data[:2])))  # device (2, 128, 334)
    np.testing.assert_array_equal(on_device.to_numpy(), host)
    one = usbeam.Pipeline.from_recording(disk, grid, n_frames=1, backend="cuda")
    assert one(disk.data[0]).shape == grid.shape and one(disk.data[:1]).shape == (1,) + grid.shape
    bf = usbeam.Beamformer.from_recording(disk, grid, n_frames=2, backend="cuda")
    assert bf(disk.data[:1]).shape == (1,) + grid.shape and bf(disk.data[0]).shape == grid.shape
    doppler = usbeam.DopplerPipeline.from_recording(disk, grid, backend="cuda")
    maps = doppler(device.from_numpy(np.ascontiguousarray(disk.data)))
    want = usbeam.DopplerPipeline.from_recording(disk, grid)(disk.data)
    np.testing.assert_allclose(maps.power.to_numpy(), want.power, rtol=0, atol=1e-3)
