"""``python -m usbeam reconstruct`` and the ways into usbeam.batch: a spec file, a factory
function, the spec stored in the input, --frames, --set, the 'local' scheduler, HDF5 / Zarr /
Vantage-frame inputs end to end, and the scheduler choices that cannot run here."""
import os
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("dask")
pytest.importorskip("distributed")
zarr = pytest.importorskip("zarr")
h5py = pytest.importorskip("h5py")

import batch_data as data  # noqa: E402
from conftest import package_root  # noqa: E402
from usbeam import batch  # noqa: E402
from usbeam.__main__ import main  # noqa: E402
from usbeam.batch.store import _create_array  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGE_ROOT = str(package_root())  # the subprocess imports the usbeam this process tests


def _run_cli(*args):
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join(
        [PACKAGE_ROOT, os.path.join(ROOT, "tests", "helpers"), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-m", "usbeam", "reconstruct", *map(str, args)], cwd=PACKAGE_ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def test_factory_frames_and_set(tmp_path):
    rf = data.linear_frames(48, seed=31)
    batch.write_raw(tmp_path / "rec.usr", rf)
    factory = tmp_path / "make_recipe.py"
    factory.write_text("import batch_data\n\ndef recipe(source):\n"
                       "    assert source.n_frames == 48\n"
                       "    return batch_data.doppler_recipe('svd')\n")
    done = _run_cli(tmp_path / "rec.usr", tmp_path / "out.zarr", "--pipeline", f"{factory}:recipe",
                    "--frames", "8:40", "--chunk-frames", "8", "--set", 'clutter_options={"low": 1}', "--no-progress")
    assert done.returncode == 0, done.stderr
    assert "4 chunks (4 computed, 0 already complete), frames 8:40" in done.stdout
    group = zarr.open_group(str(tmp_path / "out.zarr"), mode="r")
    expected = data.doppler_whole_record(rf[8:40], "svd", {"low": 1})
    np.testing.assert_array_equal(group["power"][:], expected["power"])
    assert group.attrs["frames"] == [8, 40]


def test_spec_in_the_input_and_local_cluster(tmp_path):
    rf = data.linear_frames(24, seed=32, blood=False)
    recipe = data.bmode_recipe()
    batch.write_raw(tmp_path / "rec.usr", rf, meta={"usbeam_spec": recipe.json})
    assert main(["reconstruct", str(tmp_path / "rec.usr"), str(tmp_path / "out.zarr"), "--pipeline", "input",
                 "--chunk-frames", "8", "--scheduler", "local", "--workers", "1", "--no-progress"]) == 0
    np.testing.assert_array_equal(zarr.open_group(str(tmp_path / "out.zarr"), mode="r")["bmode"][:],
                                  data.bmode_record(rf))


def test_cli_errors_exit_2_naming_the_parameter(tmp_path, capsys):
    rf = data.linear_frames(16, seed=33)
    batch.write_raw(tmp_path / "rec.usr", rf)
    spec = data.doppler_recipe("svd").save(tmp_path / "spec.json")
    cases = [
        (["--pipeline", str(spec), "--chunk-frames", "12"], "chunk_frames: 12 frames would split an ensemble"),
        (["--pipeline", str(spec), "--scheduler", "tcp://127.0.0.1:9", "--connect-timeout", "1"],
         "scheduler: no Dask scheduler answered"),
        (["--pipeline", "nothing-like-a-spec"], "pipeline: 'nothing-like-a-spec' is neither"),
        (["--pipeline", "input"], "pipeline: the input's metadata holds no usbeam_spec"),
        (["--pipeline", str(spec), "--set", "novalue"], "set: expected KEY=VALUE"),
        (["--pipeline", str(spec), "--frames", "3"], "frames must be 'a:b'"),
    ]
    for extra, message in cases:
        rc = main(["reconstruct", str(tmp_path / "rec.usr"), str(tmp_path / "out.zarr"), "--no-progress", *extra])
        err = capsys.readouterr().err
        assert rc == 2 and message in err, (extra, err)
    assert not (tmp_path / "out.zarr").exists()
    rc = main(["reconstruct", str(tmp_path / "missing.usr"), str(tmp_path / "out.zarr"), "--pipeline", str(spec)])
    assert rc == 2 and "input: no such file" in capsys.readouterr().err


def test_hdf5_zarr_and_vantage_inputs_end_to_end(tmp_path):
    rf = data.linear_frames(16, seed=34, blood=False)
    expected = data.bmode_record(rf)
    recipe = data.bmode_recipe()
    with h5py.File(tmp_path / "rec.h5", "w") as f:
        f.create_dataset("rf", data=rf, chunks=(4,) + rf.shape[1:])
    store = zarr.open_group(str(tmp_path / "rec.zarr"), mode="w")
    _create_array(store, "rf", rf.shape, (4,) + rf.shape[1:], rf.dtype)[:] = rf  # zarr 2 or 3
    # Vantage: 16 elements on channels 16..31 of 32, one acquisition starting at row 10 of 300
    rcv = np.zeros((16, 300, 32), np.int16)
    rcv[:, 10:10 + data.N_SAMPLES, 16:] = rf[:, 0].transpose(0, 2, 1)
    with open(tmp_path / "frames.bin", "wb") as f:
        for frame in rcv:
            f.write(frame.tobytes(order="F"))
    vantage = batch.VantageFrameSource(tmp_path / "frames.bin", n_rows=300, n_channels=32,
                                       element_channel=np.arange(16, 32), acquisition_row=[10],
                                       n_samples=data.N_SAMPLES)
    for i, source in enumerate([f"{tmp_path / 'rec.h5'}:rf", f"{tmp_path / 'rec.zarr'}:rf", vantage]):
        batch.reconstruct(source, str(tmp_path / f"out{i}.zarr"), recipe, chunk_frames=4, progress=False)
        np.testing.assert_array_equal(zarr.open_group(str(tmp_path / f"out{i}.zarr"), mode="r")["bmode"][:],
                                      expected, err_msg=str(source))


def test_schedulers_that_cannot_run_here_say_why(tmp_path):
    batch.write_raw(tmp_path / "rec.usr", data.linear_frames(8, seed=35, blood=False))
    recipe = data.bmode_recipe()
    with pytest.raises(ValueError, match="scheduler: 'processes' rebuilds plans"):
        batch.reconstruct(str(tmp_path / "rec.usr"), str(tmp_path / "o.zarr"), recipe, scheduler="processes")
    try:
        import dask_cuda  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="scheduler: 'cuda' needs the dask-cuda package"):
            batch.reconstruct(str(tmp_path / "rec.usr"), str(tmp_path / "o.zarr"), recipe, scheduler="cuda")
    else:  # dask-cuda present: without usbeam's CUDA backend the error names it
        import usbeam
        if not usbeam.cuda_available():
            with pytest.raises(ValueError, match="scheduler: 'cuda' needs usbeam's CUDA backend"):
                batch.reconstruct(str(tmp_path / "rec.usr"), str(tmp_path / "o.zarr"), recipe, scheduler="cuda")
    with pytest.raises(TypeError, match="scheduler must be"):
        batch.reconstruct(str(tmp_path / "rec.usr"), str(tmp_path / "o.zarr"), recipe, scheduler=3)
    assert not (tmp_path / "o.zarr").exists()


def test_recipe_spec_round_trip():
    for recipe in (data.bmode_recipe(), data.doppler_recipe("iir", {"order": 2, "cutoff": 0.1}), data.rca_recipe()):
        again = batch.Recipe.from_json(recipe.json)
        assert again.key == recipe.key and again.outputs == recipe.outputs
        assert again.frame_shape == recipe.frame_shape and again.warmup_frames == recipe.warmup_frames


def test_vantage_workspace_frames_through_the_command(tmp_path):
    """RcvData saved frame by frame (MATLAB's fwrite of RcvData{1}(:,:,f)) plus the workspace's
    layout (--vantage-workspace): the command's B-mode equals the in-memory pipeline on the
    frames mapped by the simulator's own truth."""
    pytest.importorskip("scipy")
    import usbeam
    from usbeam.io import load_vantage
    from usbeam.live.vantage import save_simulated_workspace
    ws_path = tmp_path / "ws.mat"
    truth = save_simulated_workspace(ws_path, n_elements=24, n_channels=48, n_acquisitions=3, n_samples=200,
                                     n_frames=4, c=1480.0, fc_mhz=5.0, pitch_mm=0.3, angles_deg=[-4, 0, 4])
    ws = load_vantage(ws_path)
    with open(tmp_path / "frames.bin", "wb") as f:
        for k in range(ws.n_frames):
            f.write(np.asarray(ws.rcvdata[k]).tobytes(order="F"))
    probe = usbeam.LinearArray(24, 0.3e-3, fc=5e6)
    sequence = [usbeam.PlaneWave(np.deg2rad(a)) for a in (-4, 0, 4)]
    grid = usbeam.Grid(x=np.linspace(-3e-3, 3e-3, 10), z=np.linspace(1e-3, 6e-3, 12))
    recipe = batch.Recipe.bmode(probe, sequence, grid, n_samples=200, fs=20e6, fc=5e6, c=1480.0, t0=ws.t0,
                                frames_per_call=2, output="db")
    spec = recipe.save(tmp_path / "spec.json")
    assert main(["reconstruct", str(tmp_path / "frames.bin"), str(tmp_path / "out.zarr"), "--pipeline", str(spec),
                 "--vantage-workspace", str(ws_path), "--chunk-frames", "2", "--no-progress"]) == 0
    pipe = usbeam.Pipeline(probe, sequence, grid, fs=20e6, fc=5e6, c=1480.0, t0=ws.t0, n_samples=200, n_frames=4,
                           bmode_output="db", normalize="frame", dynamic_range=60.0)
    expected = pipe(np.ascontiguousarray(truth["mapped"]).astype(np.int16))
    np.testing.assert_array_equal(zarr.open_group(str(tmp_path / "out.zarr"), mode="r")["bmode"][:], expected)
