"""A live Vantage session end to end in GNU Octave: the MEX client (examples/usbeam_mex.c, built
here with ``mkoctfile --mex``), ``examples/vantage_shm.m`` called once per frame as VSX calls
an External process function, and ``python -m usbeam serve --vantage`` serving the workspace's
own beamformer.  This is docs/live.md's "Vantage in 5 steps".

The workspace is hand-written from the Vantage conventions (tests/helpers/vantage_l11.py:
an L11-4v-like probe with a 128-channel connector map, 3 steered plane waves, PData, point
targets simulated in plain NumPy into the RcvBuffer layout), not with usbeam's own writer.
Checked: every frame arrives, in order; the images equal the offline
``usbeam.Pipeline.from_vantage`` result bit for bit; the point targets are where the phantom
put them; bad input at the boundary (wrong frame class or size, no server, a server
restarted under a connected client, HVMux, an unsupported sample mode) is an Octave error
naming the problem while the server keeps serving other clients.

Octave comes from the Debian packages: ``make test`` installs it (``make octave``) where it is
absent; where it cannot be installed the tests skip with the reason (build/octave-unavailable.txt).
"""
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from scipy.io import loadmat

import vantage_l11
from tolerances import TOLERANCES

ROOT = Path(__file__).resolve().parents[2]
OCTAVE, MKOCTFILE = shutil.which("octave"), shutil.which("mkoctfile")


def _unavailable():
    note = ROOT / "build" / "octave-unavailable.txt"
    reason = note.read_text().strip() if note.exists() else "run `make octave` (apt-get install octave liboctave-dev)"
    return f"GNU Octave (octave + mkoctfile) is not installed: {reason}"


pytestmark = pytest.mark.skipif(OCTAVE is None or MKOCTFILE is None, reason=_unavailable())

OCTAVE_ARGS = ["--no-gui", "--no-window-system", "--norc", "--no-history", "--quiet"]
N_FRAMES = 8


@pytest.fixture(scope="module")
def mex_dir(tmp_path_factory):
    """usbeam_mex built with mkoctfile --mex (as `make mex` does), warnings as errors."""
    out = tmp_path_factory.mktemp("mex")
    # USBEAM_MEX_CFLAGS adds flags (e.g. -fsanitize=address,undefined with libasan preloaded)
    env = dict(os.environ, CFLAGS="-std=gnu11 -O2 -Wall -Wextra -Wshadow -Wno-unused-parameter -Werror " +
               os.environ.get("USBEAM_MEX_CFLAGS", ""))
    proc = subprocess.run([MKOCTFILE, "--mex", f"-I{ROOT / 'csrc'}", str(ROOT / "examples" / "usbeam_mex.c"),
                           str(ROOT / "csrc" / "shm" / "client.c"), "-lrt", "-lpthread",
                           *os.environ.get("USBEAM_MEX_CFLAGS", "").split(), "-o", str(out / "usbeam_mex.mex")],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    path = tmp_path_factory.mktemp("vantage") / "L11_4v_setup.mat"
    truth = vantage_l11.save(path, n_frames=N_FRAMES)
    return path, truth


@pytest.fixture(scope="module")
def workspace_bs(tmp_path_factory):
    """The same set-up acquired in BS100BW (quadrature pairs, one per period)."""
    path = tmp_path_factory.mktemp("vantage_bs") / "L11_4v_setup_bs100.mat"
    truth = vantage_l11.save(path, n_frames=N_FRAMES, sample_mode="BS100BW")
    return path, truth


def _region_name():
    return f"/usbeam_oct_{os.getpid()}_{time.monotonic_ns() % 10**9}"


def _env():
    return dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))


def _start_server(path, name, *extra):
    proc = subprocess.Popen([sys.executable, "-m", "usbeam", "serve", "--vantage", str(path), "--name", name,
                             "--policy", "block", "--slot-bytes", str(1 << 20), "--result-bytes", str(1 << 20),
                             *extra], env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 60
    while not Path("/dev/shm" + name).exists():
        if proc.poll() is not None:
            raise AssertionError(f"usbeam serve exited ({proc.returncode}): {proc.stdout.read()}")
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError("usbeam serve did not publish its region within 60 s")
        time.sleep(0.02)
    return proc


def _stop_server(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.stdout.read()


def _octave(script, cwd, timeout=120):
    return subprocess.run([OCTAVE, *OCTAVE_ARGS, "--eval", script], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=_env())


def _paths(mex_dir):
    return f"addpath('{mex_dir}'); addpath('{ROOT / 'examples'}');"


@pytest.mark.parametrize("mode", ["NS200BW", "BS100BW"])
def test_vantage_shm_in_octave_end_to_end(mode, mex_dir, request, tmp_path, summary_line):
    """Docs, "Vantage in 5 steps": serve the workspace, run vantage_shm once per frame."""
    path, truth = request.getfixturevalue("workspace" if mode == "NS200BW" else "workspace_bs")
    name = _region_name()
    out = tmp_path / "octave_out.mat"
    server = _start_server(path, name)
    try:
        script = f"""{_paths(mex_dir)}
load('{path}');                                  % Trans TX TW Receive Event Resource PData RcvData
vantage_shm('start', Trans, Receive, Resource, '{name}');
n = size(RcvData{{1}}, 3);
ids = zeros(1, n); latency = zeros(1, n); round_trip = zeros(1, n); imgs = [];
for k = 1:n
    RData = RcvData{{1}}(:, :, k);               % what VSX hands the External function
    t = tic;
    [img, info] = vantage_shm(RData);
    round_trip(k) = toc(t);
    if isempty(imgs), imgs = zeros([size(img), n], class(img)); end
    imgs(:, :, k) = img; ids(k) = info.frame_id; latency(k) = info.latency_s;
end
h = usbeam_mex('open', '{name}', 1000); counters = usbeam_mex('info', h);
[latest, latest_info] = usbeam_mex('latest', h, 0, 1000);        % the newest image, from another handle
usbeam_mex('close', h);
vantage_shm('stop');
save('-v7', '{out}', 'imgs', 'ids', 'latency', 'round_trip', 'counters', 'latest', 'latest_info');
"""
        t = time.monotonic()
        proc = _octave(script, tmp_path)
        octave_s = time.monotonic() - t
        assert proc.returncode == 0, proc.stdout + proc.stderr
    finally:
        log = _stop_server(server)
    res = loadmat(out, squeeze_me=True, struct_as_record=False)
    ids = np.atleast_1d(res["ids"]).astype(int)
    # every frame arrived, in order: one id per call, consecutive from the server's first
    assert ids.tolist() == list(range(1, N_FRAMES + 1)), ids
    counters = res["counters"]
    assert (counters.pushed, counters.processed, counters.dropped, counters.rejected, counters.failed) == \
        (N_FRAMES, N_FRAMES, 0, 0, 0), log

    assert res["latest_info"].frame_id == N_FRAMES and res["latest_info"].status_text == "success"
    np.testing.assert_array_equal(res["latest"], res["imgs"][:, :, -1])
    # bit for bit against the offline pipeline of the same workspace
    import usbeam
    from usbeam.io import load_vantage
    ws = load_vantage(path)
    pipeline = usbeam.Pipeline.from_vantage(ws)
    cmap = ws.channel_map()
    grid = ws.grid()
    imgs = res["imgs"]                                   # MATLAB order: nx x nz x frames
    assert imgs.dtype == np.uint8 and imgs.shape == (grid.x.size, grid.z.size, N_FRAMES)
    equal = 0
    for k in range(N_FRAMES):
        offline = pipeline(cmap(ws.rcvdata[k])[None])[0]
        np.testing.assert_array_equal(imgs[:, :, k].T, offline)
        equal += 1
        # the point targets are where the phantom put them
        dx, dz = grid.x[1] - grid.x[0], grid.z[1] - grid.z[0]
        for (px, pz, _) in truth["targets"]:
            near_x, near_z = np.abs(grid.x - px) < 2e-3, np.abs(grid.z - pz) < 2e-3
            window = offline[np.ix_(near_z, near_x)]
            iz, ix = np.unravel_index(np.argmax(window), window.shape)
            assert abs(grid.x[near_x][ix] - px) <= TOLERANCES["vantage_target_x_steps"] * dx + 1e-9
            assert abs(grid.z[near_z][iz] - pz) <= TOLERANCES["vantage_target_z_steps"] * dz + 1e-9
            assert window.max() >= 200                    # a target, not speckle (noise is ~ -60 dB)
    latency = np.atleast_1d(res["latency"]) * 1e3
    round_trip = np.atleast_1d(res["round_trip"]) * 1e3
    summary_line(f"Octave + usbeam_mex + usbeam serve --vantage ({mode}): frames pushed {int(counters.pushed)}, received "
          f"{ids.size}, images equal to the offline Pipeline.from_vantage {equal}/{N_FRAMES}; latency "
          f"push->posted p50 {np.percentile(latency, 50):.2f} ms p99 {np.percentile(latency, 99):.2f} ms; "
          f"round trip push+result through the MEX p50 {np.percentile(round_trip, 50):.2f} ms p99 "
          f"{np.percentile(round_trip, 99):.2f} ms; Octave run {octave_s:.1f} s")


def test_bad_input_at_the_boundary_is_an_octave_error(mex_dir, workspace, tmp_path):
    """Wrong class / size, a second client served meanwhile, a frame the server refuses, HVMux,
    an unsupported sample mode, a server restarted under a connected client, no server."""
    path, _ = workspace
    name = _region_name()
    out = tmp_path / "errors.mat"
    ready, restarted = tmp_path / "ready_for_restart", tmp_path / "restarted"
    ready_stop, stopped = tmp_path / "ready_for_stop", tmp_path / "stopped"
    server = _start_server(path, name)
    script = f"""{_paths(mex_dir)}
load('{path}');
ids = {{}}; msgs = {{}}; ok = [];
function [ids, msgs] = expect_error(ids, msgs, f)
  try
    f(); ids{{end+1}} = 'none'; msgs{{end+1}} = 'no error';
  catch err
    ids{{end+1}} = err.identifier; msgs{{end+1}} = err.message;
  end
end
frame = RcvData{{1}}(:, :, 1);
vantage_shm('start', Trans, Receive, Resource, '{name}');
[img0, info] = vantage_shm(frame); ok(end+1) = info.frame_id;
[ids, msgs] = expect_error(ids, msgs, @() vantage_shm(double(frame)));               % 1 class
[ids, msgs] = expect_error(ids, msgs, @() vantage_shm(frame(1:100, :)));             % 2 size
h2 = usbeam_mex('open', '{name}', 1000);                                            % another client
id = usbeam_mex('push', h2, frame, 1000); [img2, info2] = usbeam_mex('result', h2, id, 5000); ok(end+1) = id;
id = usbeam_mex('push', h2, frame(1:100, :), 1000);                                 % unchecked size:
[ids, msgs] = expect_error(ids, msgs, @() usbeam_mex('result', h2, id, 5000));       % 3 the server refuses
id = usbeam_mex('push', h2, frame, 1000); [img3, info3] = usbeam_mex('result', h2, id, 5000); ok(end+1) = id;
usbeam_mex('close', h2);
T2 = Trans; T2.HVMux = struct('highVoltageRails', 100);
[ids, msgs] = expect_error(ids, msgs, @() vantage_shm('start', T2, Receive, Resource, '{name}'));  % 4 HVMux
R2 = Receive; [R2.sampleMode] = deal('NS200BWI');
[ids, msgs] = expect_error(ids, msgs, @() vantage_shm('start', Trans, R2, Resource, '{name}'));    % 5 sample mode
[img4, info] = vantage_shm(frame); ok(end+1) = info.frame_id;                       % still served
fclose(fopen('{ready}', 'w'));
t = tic; while ~exist('{restarted}', 'file') && toc(t) < 60, pause(0.05); end
[ids, msgs] = expect_error(ids, msgs, @() vantage_shm(frame));                       % 6 restarted
vantage_shm('start', Trans, Receive, Resource, '{name}');
[img5, info] = vantage_shm(frame); ok(end+1) = info.frame_id;                       % the new server
fclose(fopen('{ready_stop}', 'w'));
t = tic; while ~exist('{stopped}', 'file') && toc(t) < 60, pause(0.05); end
[ids, msgs] = expect_error(ids, msgs, @() vantage_shm(frame));                       % 7 stopped, none new
vantage_shm('stop');
[ids, msgs] = expect_error(ids, msgs, @() vantage_shm('start', Trans, Receive, Resource, '/usbeam_none_h19', 200)); % 8
[ids, msgs] = expect_error(ids, msgs, @() vantage_shm(frame));                       % 9 not started
same = isequal(img0, img2, img3, img4, img5);
save('-v7', '{out}', 'ids', 'msgs', 'ok', 'same');
"""
    octave = subprocess.Popen([OCTAVE, *OCTAVE_ARGS, "--eval", script], cwd=tmp_path, env=_env(),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output = []
    reader = threading.Thread(target=lambda: output.append(octave.stdout.read()), daemon=True)
    reader.start()
    new_server = None
    try:
        deadline = time.monotonic() + 90
        while not ready.exists():
            if octave.poll() is not None:
                reader.join(timeout=5)
                raise AssertionError("Octave ended before the restart step: " + "".join(output))
            assert time.monotonic() < deadline, "Octave did not reach the restart step"
            time.sleep(0.05)
        first_log = _stop_server(server)
        new_server = _start_server(path, name)
        restarted.touch()
        while not ready_stop.exists():
            if octave.poll() is not None:
                reader.join(timeout=5)
                raise AssertionError("Octave ended before the stop step: " + "".join(output))
            assert time.monotonic() < deadline, "Octave did not reach the stop step"
            time.sleep(0.05)
        _stop_server(new_server)
        stopped.touch()
        octave.wait(timeout=120)
        reader.join(timeout=5)
        assert octave.returncode == 0, "".join(output)
    finally:
        if octave.poll() is None:
            octave.kill()
        _stop_server(server)
        if new_server is not None:
            _stop_server(new_server)
    res = loadmat(out, squeeze_me=False, struct_as_record=False)
    ids = [str(np.ravel(v)[0]) for v in np.ravel(res["ids"])]
    msgs = [str(np.ravel(v)[0]) for v in np.ravel(res["msgs"])]
    got = dict(zip(["class", "size", "refused", "hvmux", "mode", "restart", "gone", "none", "unstarted"],
                   zip(ids, msgs)))
    print("\n" + "\n".join(f"  {case}: {ident}: {msg}" for case, (ident, msg) in got.items()))
    assert got["class"][0] == "usbeam:frameType" and "int16" in got["class"][1] and "double" in got["class"][1]
    assert got["size"][0] == "usbeam:frameSize" and "100 x 128" in got["size"][1] and "2304 x 128" in got["size"][1]
    assert got["refused"][0] == "usbeam:rejected" and "25600 bytes" in got["refused"][1], got["refused"]
    assert got["hvmux"][0] == "usbeam:hvmux" and "Trans.HVMux" in got["hvmux"][1]
    assert got["mode"][0] == "usbeam:sampleMode" and "NS200BWI" in got["mode"][1]
    assert got["restart"][0] == "usbeam:serverRestarted" and "restarted" in got["restart"][1], got["restart"]
    assert got["gone"][0] == "usbeam:serverGone" and "stopped or died" in got["gone"][1], got["gone"]
    assert got["none"][0] == "usbeam:noServer" and "/usbeam_none_h19" in got["none"][1]
    assert got["unstarted"][0] == "usbeam:notStarted"
    # the good frames around the bad ones were all served, by both servers, with one image
    ok = np.ravel(res["ok"]).astype(int)
    assert ok.size == 5 and np.all(ok > 0)
    assert bool(np.ravel(res["same"])[0])
    assert "usbeam serve: stopped" in first_log


def test_in_process_route_needs_a_python_bridge(tmp_path):
    """examples/vantage_inprocess.m calls usbeam through MATLAB's Python interface (py.*).
    GNU Octave has none in Debian's packages (the 'pythonic' Octave package is not packaged;
    python3-octave-kernel is the other direction), so this runs only where Octave has py."""
    proc = _octave("disp(exist('py'))", ROOT)
    if proc.stdout.strip().splitlines()[-1:] == ["0"]:
        pytest.skip("Octave has no Python bridge (py.*): the 'pythonic' package is not in Debian's packages, "
                    "so examples/vantage_inprocess.m (MATLAB's Python interface) cannot run in Octave here; "
                    "its Python side (examples/vantage_bridge.py) is tested in test_live_vantage.py")
    path = tmp_path / "L11_4v_setup.mat"
    vantage_l11.save(path, n_frames=2)
    proc = _octave(f"addpath('{ROOT / 'examples'}'); load('{path}'); vantage_inprocess('start', '{path}'); "
                   f"for k = 1:2, vantage_inprocess(RcvData{{1}}(:, :, k)); end", tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
