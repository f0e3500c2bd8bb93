"""Chunked reconstruction on Dask equals one in-memory call over the whole record.

For B-mode, color + power Doppler with the SVD and the IIR clutter filters, and an RCA
volume, on recordings of 4 chunks, with 1 and 2 worker threads and 2 worker processes
(a dask.distributed LocalCluster).  The reference is the same usbeam pipeline called once
(B-mode, RCA) or fed every ensemble in order (Doppler) in this process.

Bit-identical except the IIR filter: its chunks past the first restart the filter a warm-up
before their first ensemble (usbeam/batch/recipes.py), so they match the whole record to
the filter's decayed memory (tolerances.py, batch_iir_*).
"""
import numpy as np
import pytest

pytest.importorskip("dask")
pytest.importorskip("distributed")
zarr = pytest.importorskip("zarr")

import batch_data as data  # noqa: E402
from tolerances import TOLERANCES  # noqa: E402
from usbeam import batch  # noqa: E402

WORKERS = ["threads-1", "threads-2", "processes-2"]


@pytest.fixture(scope="module")
def client():
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    with distributed.Client(cluster) as c:
        yield c
    cluster.close()


def _run(tmp_path, rf, recipe, chunk_frames, workers, client, name="out.zarr"):
    path = tmp_path / "rec.usr"
    batch.write_raw(path, rf)
    kind, n = workers.split("-")
    scheduler = client if kind == "processes" else "threads"
    report = batch.reconstruct(str(path), str(tmp_path / name), recipe, chunk_frames=chunk_frames,
                               scheduler=scheduler, n_workers=int(n), progress=False)
    assert report.n_chunks >= 3 and report.computed == report.n_chunks
    group = zarr.open_group(str(tmp_path / name), mode="r")
    assert group.attrs["complete"] is True
    return group


@pytest.mark.parametrize("workers", WORKERS)
def test_bmode_bit_identical(tmp_path, client, workers):
    rf = data.linear_frames(32, seed=1, blood=False)
    group = _run(tmp_path, rf, data.bmode_recipe(frames_per_call=4), 8, workers, client)
    expected = data.bmode_record(rf)  # the whole record call after call, in memory
    np.testing.assert_array_equal(group["bmode"][:], expected)
    assert group.attrs["pipeline"] == "bmode" and group.attrs["usbeam_version"]
    np.testing.assert_array_equal(group.attrs["grid"]["x"], data.grid().x)


@pytest.mark.parametrize("workers", WORKERS)
def test_color_power_doppler_svd_bit_identical(tmp_path, client, workers):
    rf = data.linear_frames(64, seed=2)  # 8 ensembles of 8, chunks of 2 ensembles
    recipe = data.doppler_recipe("svd", {"low": 1})
    group = _run(tmp_path, rf, recipe, 16, workers, client)
    expected = data.doppler_whole_record(rf, "svd", {"low": 1})
    for name in ("velocity", "variance", "power"):
        np.testing.assert_array_equal(group[name][:], expected[name], err_msg=name)


@pytest.mark.parametrize("workers", WORKERS)
def test_doppler_iir_matches_whole_record(tmp_path, client, workers):
    options = {"order": 2, "cutoff": 0.1}
    rf = data.linear_frames(96, seed=3)  # 6 chunks: the last 3 start past their warm-up's reach of frame 0
    recipe = data.doppler_recipe("iir", options)
    assert recipe.warmup_frames == 40  # r = 0.642 for order 2, cut-off 0.1: r^37 <= 1e-7, 5 ensembles
    group = _run(tmp_path, rf, recipe, 16, workers, client)
    expected = data.doppler_whole_record(rf, "iir", options)
    # the first chunk starts with the record: bit-identical
    for name in expected:
        np.testing.assert_array_equal(group[name][:2], expected[name][:2], err_msg=name)
    assert np.isfinite(expected["power"]).all()
    # later chunks: within the filter's decayed memory of frames before their warm-up
    power = group["power"][:]
    assert np.abs(power - expected["power"]).max() <= TOLERANCES["batch_iir_power_db_abs"]
    velocity = group["velocity"][:]
    nyquist = data.DOPPLER["c"] * data.PRF / (4 * data.FC)
    wrapped = np.angle(np.exp(1j * np.pi * (velocity - expected["velocity"]) / nyquist)) / np.pi
    strong = expected["power"] > -20  # where the flow signal is, as Doppler comparisons are masked
    assert strong.mean() > 0.2
    assert np.abs(wrapped[strong]).max() <= TOLERANCES["batch_iir_velocity_nyquist_fraction"]


def test_doppler_iir_without_warmup_differs(tmp_path):
    """The warm-up is what makes later chunks match: without it (warmup=0) they start the
    filter cold and differ visibly from the whole record."""
    options = {"order": 2, "cutoff": 0.1}
    rf = data.linear_frames(96, seed=3)
    group = _run(tmp_path, rf, data.doppler_recipe("iir", options, warmup=0), 16, "threads-1", None)
    expected = data.doppler_whole_record(rf, "iir", options)
    assert np.abs(group["power"][2:] - expected["power"][2:]).max() > 10 * TOLERANCES["batch_iir_power_db_abs"]


@pytest.mark.parametrize("workers", WORKERS)
def test_rca_volume_bit_identical(tmp_path, client, workers):
    rf = data.rca_frames(16, seed=4)
    group = _run(tmp_path, rf, data.rca_recipe(frames_per_call=2), 4, workers, client)
    expected = data.rca_beamformer(16)(rf)
    assert group["volume"].shape == (16,) + data.rca_grid().image_shape
    np.testing.assert_array_equal(group["volume"][:], expected)


def test_plans_built_once_per_worker_thread(tmp_path):
    """12 chunks on 1 thread: one plan built, reused for every block."""
    batch.clear_plans()
    rf = data.linear_frames(48, seed=5, blood=False)
    recipe = data.bmode_recipe(frames_per_call=4)
    _run(tmp_path, rf, recipe, 4, "threads-1", None)
    assert batch.plan_builds(recipe) == 1
    # two threads: at most one plan each, never one per block
    batch.clear_plans()
    _run(tmp_path, rf, recipe, 4, "threads-2", None, name="out2.zarr")
    assert 1 <= batch.plan_builds(recipe) <= 2


def test_plans_built_once_per_worker_process(tmp_path, client):
    client.run(batch.clear_plans)
    rf = data.linear_frames(48, seed=6, blood=False)
    recipe = data.bmode_recipe(frames_per_call=4)
    _run(tmp_path, rf, recipe, 4, "processes-2", client)  # 12 chunks
    builds = client.run(batch.plan_builds, recipe)
    assert sum(builds.values()) <= 2 and all(b <= 1 for b in builds.values()), builds
