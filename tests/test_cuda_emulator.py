"""The CUDA emulator (cuda/emu) catches what it promises to catch.

Every CUDA test that runs without a GPU runs on this emulator, so its strictness is part of what
those tests prove: cuda/emu/selftest.cu holds one valid or deliberately wrong CUDA program
per scenario, built here with the emulator (translate.py + g++ + runtime.cpp) and run one
scenario per process.  A wrong program must fail the way DEVELOPING.md says (an error code, a
fault, stale or poisoned data); a valid one must give the right answer.  Needs g++ and the
CUDA headers (no GPU); skipped without them.
"""
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EMU = ROOT / "cuda" / "emu"


def _cuda_include():
    nvcc = shutil.which("nvcc")
    for home in (os.environ.get("CUDA_HOME"), str(Path(nvcc).parent.parent) if nvcc else None, "/usr/local/cuda"):
        if home and Path(home, "include", "cuda_runtime.h").exists():
            return Path(home, "include")
    return None


@pytest.fixture(scope="module")
def selftest(tmp_path_factory):
    include, cxx = _cuda_include(), shutil.which(os.environ.get("CXX", "g++"))
    if include is None or cxx is None:
        pytest.skip("the CUDA emulator needs g++ and the CUDA headers (cuda_runtime.h)")
    work = tmp_path_factory.mktemp("cuda_emu")
    source = work / "selftest.cpp"
    subprocess.run([sys.executable, str(EMU / "translate.py"), str(EMU / "selftest.cu"), str(source)], check=True)
    exe = work / "selftest"
    subprocess.run([cxx, "-std=c++17", "-O1", "-g", "-ffp-contract=off", "-include", str(EMU / "cuda_emu.h"),
                    "-I", str(EMU / "include"), "-I", str(include), str(source), str(EMU / "runtime.cpp"),
                    str(EMU / "cublas.cpp"), "-o", str(exe), "-ldl", "-lpthread"], check=True)
    return exe


def run(exe, scenario):
    # The selftest is not built with sanitizers: under `make asan` the suite runs with libasan
    # preloaded, whose SIGSEGV handler would turn the faults these tests expect into exit code 1.
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    result = subprocess.run([str(exe), scenario], capture_output=True, text=True, timeout=60, env=env)
    return result.returncode, result.stdout.strip(), result.stderr


def test_valid_kernel_with_barriers_shuffles_and_atomics(selftest):
    code, out, err = run(selftest, "reduction")
    assert code == 0, out + err
    assert out == "reduction: %g" % sum(i % 7 for i in range(1000))


def test_unwritten_device_memory_reads_as_poison(selftest):
    code, out, _ = run(selftest, "poison")
    assert (code, out) == (0, "poison: ffffffff")


# A kernel reading out of bounds or a host pointer, and stream-ordered memory used before its
# allocation or after its free (cudaMallocAsync / cudaFreeAsync out of order), fault.
@pytest.mark.parametrize("scenario", ["out_of_bounds", "host_dereference", "free_async_early",
                                      "alloc_async_unordered"])
def test_bad_memory_access_faults(selftest, scenario):
    code, out, _ = run(selftest, scenario)
    assert code == -signal.SIGSEGV, f"{scenario} was not caught: {out!r}"


def test_reading_before_the_stream_ran_sees_stale_data(selftest):
    code, out, _ = run(selftest, "missing_sync")
    assert (code, out) == (0, "missing_sync: before -1 after 3")


def test_streams_are_ordered_only_by_events(selftest):
    code, out, _ = run(selftest, "cross_stream")
    assert (code, out) == (0, "cross_stream: without event -nan, with event 4")  # 0xffffffff: a negative NaN


@pytest.mark.parametrize("scenario, want", [
    ("shared_limit", "shared_limit: cudaErrorInvalidValue then cudaSuccess"),
    ("launch_bounds", "launch_bounds: cudaErrorLaunchOutOfResources"),
    ("host_pointer_argument", "host_pointer_argument: cudaErrorIllegalAddress"),
    ("copy_overrun", "copy_overrun: cudaErrorInvalidValue"),
    ("capture_allocation", "capture_allocation: cudaErrorStreamCaptureUnsupported, end cudaErrorStreamCaptureInvalidated"),
])
def test_invalid_calls_fail_as_on_a_gpu(selftest, scenario, want):
    code, out, err = run(selftest, scenario)
    assert (code, out) == (0, want), err


def test_graph_replays_its_captured_work(selftest):
    code, out, _ = run(selftest, "graph_replay")
    assert (code, out) == (0, "graph_replay: 5")


def test_events_recorded_in_a_capture(selftest):
    """A plain record inside a capture adds no node and leaves the event unusable outside it
    (cudaErrorCapturedEvent); a record with cudaEventRecordExternal is a node each launch records."""
    code, out, err = run(selftest, "captured_event")
    assert (code, out) == (0, "captured_event: plain cudaErrorCapturedEvent, external cudaSuccess"), err


def test_stream_ordered_free_after_an_event_is_clean(selftest):
    code, out, err = run(selftest, "free_async_ordered")
    assert (code, out) == (0, "free_async_ordered: cudaSuccess 2"), err


def test_barriers_that_cannot_all_release_are_reported(selftest):
    """Half a warp at __syncthreads, the other half at __syncwarp: a hang on a GPU, a report
    and an abort here.  (Threads at different __syncthreads calls release each other, as on a
    GPU, where they share barrier 0; exited threads count as arrived, as on Volta and later.)"""
    code, out, err = run(selftest, "divergent_barrier")
    assert code == -signal.SIGABRT and "divergent" in err, out + err
