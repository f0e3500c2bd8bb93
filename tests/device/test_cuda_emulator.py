"""The CUDA emulator (cuda/emu) catches what it promises to catch, and covers what cuda/ calls.

Every CUDA test that runs without a GPU runs on this emulator, so its strictness is part of what
those tests prove: cuda/emu/selftest.cu holds one valid or deliberately wrong CUDA program
per scenario, built here with the emulator (translate.py + g++ + runtime.cpp) and run one
scenario per process.  A wrong program must fail the way DEVELOPING.md says (an error code, a
fault, stale or poisoned data); a valid one must give the right answer.  Needs g++ and the
CUDA headers (no GPU); skipped without them.

The API-coverage tests at the end freeze the emulator's scope (cuda/emu/README.md): every
cuda*, cublas* and cub:: call, device intrinsic and interpreted attribute that the CUDA backend
(cuda/*.cu, cuda/runtime/*) uses must be one the emulator defines, and the README's list must
be exactly what it defines.  They read source text only (no compiler, no CUDA headers, no GPU),
so a twin that starts using a call the emulator lacks fails on every machine, with the file and
line, before anyone builds the emulator.
"""
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
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
    # a query is forbidden to a capturing thread (it invalidates the capture) unless the thread
    # switched to relaxed mode, as usbeam_event_query does (cuda/runtime/memory.cu)
    ("capture_query", "capture_query: relaxed cudaSuccess, end cudaSuccess; plain cudaErrorStreamCaptureUnsupported, "
                      "end cudaErrorStreamCaptureInvalidated"),
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


def test_a_graph_naming_a_destroyed_event_is_refused(selftest):
    """An event-record node names its event without owning it: on a GPU a graph whose event
    was destroyed during the capture crashed at instantiation (H200, 2026-11-29, an array
    imported for one call inside the capture); the emulator refuses it instead."""
    code, out, err = run(selftest, "destroyed_event_node")
    assert (code, out) == (0, "destroyed_event_node: end cudaSuccess, instantiate "
                              "cudaErrorInvalidResourceHandle"), err


def test_stream_ordered_free_after_an_event_is_clean(selftest):
    code, out, err = run(selftest, "free_async_ordered")
    assert (code, out) == (0, "free_async_ordered: cudaSuccess 2"), err


def test_barriers_that_cannot_all_release_are_reported(selftest):
    """Half a warp at __syncthreads, the other half at __syncwarp: a hang on a GPU, a report
    and an abort here.  (Threads at different __syncthreads calls release each other, as on a
    GPU, where they share barrier 0; exited threads count as arrived, as on Volta and later.)"""
    code, out, err = run(selftest, "divergent_barrier")
    assert code == -signal.SIGABRT and "divergent" in err, out + err


# ---- API coverage: what cuda/ uses against what cuda/emu defines ------------------------------

BACKEND_SOURCES = sorted(list((ROOT / "cuda").glob("*.cu")) +
                         [p for p in (ROOT / "cuda" / "runtime").iterdir() if p.suffix in (".cu", ".cuh", ".c")])
EMULATOR_SOURCES = [EMU / "runtime.cpp", EMU / "cublas.cpp", EMU / "cusparse.cpp", EMU / "cuda_emu.h"]
CUB_HEADER = EMU / "include" / "cub" / "cub.cuh"

# Comments and string literals go first: a call named in a comment or a message is no use.
_COMMENT_OR_STRING = re.compile(r"//[^\n]*|/\*.*?\*/|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'", re.S)
# Host runtime, cuBLAS and cuSPARSE calls; a trailing _t is a type in a cast, not a call.
_API_CALL = re.compile(r"\b((?:cuda|cublas|cusparse)[A-Z]\w*)\s*\(")
# Device intrinsics.  Names ending in __ are CUDA qualifiers (__launch_bounds__, __align__), and
# __builtin_*, __atomic_*, __sync_* are the host compiler's own builtins, there for g++ too.
_INTRINSIC_CALL = re.compile(r"\b(__[a-z]\w*|atomic[A-Z]\w*)\s*\(")
_HOST_BUILTIN = re.compile(r"^__(builtin|atomic|sync)_|__$")
_CUB_NAME = re.compile(r"\bcub\s*::\s*([A-Za-z_]\w*)(?:\s*::\s*([A-Za-z_]\w*))?")
# Enumerators the emulator answers by value (a switch with an error for the rest), so a new one
# needs emulator work as a new call does: device, function and memory-pool attributes.
_INTERPRETED_VALUE = re.compile(r"\b(cudaDevAttr\w+|cudaFuncAttribute\w+|cudaMemPoolAttr\w+|cudaMemPoolReuse\w+)\b")


def _code(text):
    """Source text without comments and string literals; newlines kept, so lines still count."""
    return _COMMENT_OR_STRING.sub(lambda m: "\n" * m.group(0).count("\n") if m.group(0)[0] == "/" else '""', text)


def _uses(sources):
    """{category: {name: "file:line" of its first use}} over CUDA sources: paths, or (label,
    text) pairs for source that is not in a file."""
    found = {"call": {}, "intrinsic": {}, "cub": {}, "value": {}}
    for path in sources:
        text = _code(path.read_text()) if isinstance(path, Path) else _code(path[1])
        label = path.relative_to(ROOT) if isinstance(path, Path) else path[0]

        def note(category, name, offset):
            found[category].setdefault(name, f"{label}:{text.count(chr(10), 0, offset) + 1}")

        for m in _API_CALL.finditer(text):
            if not m.group(1).endswith("_t"):
                note("call", m.group(1), m.start())
        for m in _INTRINSIC_CALL.finditer(text):
            if not _HOST_BUILTIN.search(m.group(1)):
                note("intrinsic", m.group(1), m.start())
        for m in _CUB_NAME.finditer(text):
            note("cub", "cub::" + "::".join(n for n in m.groups() if n), m.start())
        for m in _INTERPRETED_VALUE.finditer(text):
            note("value", m.group(1), m.start())
    return found


def _definitions(text, pattern):
    """Names matching pattern that text defines: the name, its balanced parameter list, then a
    body ({), which a declaration (;) or a call (followed by ; , ) or an operator) never has."""
    names = set()
    for m in re.finditer(r"\b(%s)\s*\(" % pattern, text):
        depth, i = 0, m.end() - 1
        while i < len(text):
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
            if depth == 0:
                break
        if text[i:].lstrip().startswith("{"):
            names.add(m.group(1))
    return names


def _emulated():
    """{category: names} the emulator defines."""
    code = "\n".join(_code(p.read_text()) for p in EMULATOR_SOURCES)
    cub = set()
    struct = None
    for line in _code(CUB_HEADER.read_text()).splitlines():
        if m := re.match(r"struct (\w+)", line):  # the algorithms: structs at the top of namespace cub
            struct = m.group(1)
            cub.add("cub::" + struct)
        elif struct and (m := re.match(r"\s+static cudaError_t (\w+)\s*\(", line)):
            cub.add(f"cub::{struct}::{m.group(1)}")
    return {"call": _definitions(code, r"(?:cuda|cublas|cusparse)[A-Z]\w*"),
            "intrinsic": _definitions(code, r"__[a-z]\w*|atomic[A-Z]\w*"),
            "cub": cub,
            "value": set(_INTERPRETED_VALUE.findall(code))}


def _missing(uses, emulated):
    return sorted(f"{name} ({where})" for category, names in uses.items()
                  for name, where in names.items() if name not in emulated[category])


def test_every_cuda_call_the_backend_makes_is_emulated():
    uses = _uses(BACKEND_SOURCES)
    assert uses["call"] and uses["intrinsic"] and uses["cub"], "the scan of cuda/ found nothing: is the path right?"
    missing = _missing(uses, _emulated())
    assert not missing, ("cuda/ uses what the CPU emulator does not define; add it to cuda/emu (and its "
                         "README list) or do without it:\n  " + "\n  ".join(missing))


def test_the_coverage_check_catches_a_call_the_emulator_lacks():
    """A twin that starts using calls the emulator lacks (here made-up ones, beside real ones)
    is reported with its place; names in comments and strings are not calls."""
    twin = ("cuda/new_twin.cu", """
        // cudaInCommentOnly(x) is not a call
        cudaError_t e = cudaMemcpyAsync(d, h, n, cudaMemcpyHostToDevice, s);
        e = cudaFakeGraphNodeCall(graph, "cudaInStringOnly(x)");
        cublasFakeGemm(handle, 1, 2);
        __global__ void k(float *p) { p[0] = __fake_intrinsic(p[1]); __syncthreads(); }
        cub::DeviceFakeSort::SortPairs(NULL, bytes, keys, values, n);
        cudaDeviceGetAttribute(&v, cudaDevAttrFakeAttribute, 0);
    """)
    missing = _missing(_uses([twin]), _emulated())
    assert missing == ["__fake_intrinsic (cuda/new_twin.cu:6)", "cub::DeviceFakeSort::SortPairs (cuda/new_twin.cu:7)",
                       "cublasFakeGemm (cuda/new_twin.cu:5)", "cudaDevAttrFakeAttribute (cuda/new_twin.cu:8)",
                       "cudaFakeGraphNodeCall (cuda/new_twin.cu:4)"]


def test_the_readme_lists_exactly_what_the_emulator_defines():
    """cuda/emu/README.md's "Supported API" section is the emulator's contract: a call added to
    the emulator is added there, and the list never names what the emulator lacks."""
    text = (EMU / "README.md").read_text()
    section = text.split("## Supported API", 1)[1].split("\n## ", 1)[0]
    # API names only: the section may quote other things (qualifiers such as `__global__`, paths)
    listed = {name for name in re.findall(r"`([^`]+)`", section)
              if re.fullmatch(r"(?:cuda|cublas|cusparse)[A-Z]\w*|cub::[\w:]+|atomic[A-Z]\w*|__[a-z]\w*", name)
              and not name.endswith("__")}
    emulated = set().union(*_emulated().values())
    assert sorted(emulated - listed) == [], "emulated but not in cuda/emu/README.md"
    assert sorted(listed - emulated) == [], "in cuda/emu/README.md but not emulated"


# ---- issue 14: checks the emulator could not make before (cuda/emu/MODES.md)

def run_with(exe, scenario, **env):
    """run() in an environment without the emulator's mode variables, plus `env`: the result must
    not depend on a USBEAM_EMU_SEED / _STRESS / _ORDER the developer happens to have set."""
    base = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD" and not k.startswith("USBEAM_EMU_")}
    result = subprocess.run([str(exe), scenario], capture_output=True, text=True, timeout=120, env={**base, **env})
    return result.returncode, result.stdout.strip(), result.stderr


def test_legacy_stream_memset_is_not_ordered_before_a_non_blocking_stream(selftest):
    """cudaMemset on device memory is asynchronous to the host: a non-blocking stream that reads
    the buffer without an event sees what was there before (5), not the zeros."""
    code, out, err = run_with(selftest, "legacy_memset_unordered")
    assert (code, out) == (0, "legacy_memset_unordered: 5"), err


def test_pageable_upload_lands_in_legacy_stream_order(selftest):
    """A pageable cudaMemcpy host-to-device returns once the source is staged; the write lands in
    legacy-stream order, so a non-blocking stream with no order on the legacy stream reads the
    old contents (the zeros of the memset before it, which the copy's own synchronisation of
    the legacy stream completed), not the 7s."""
    code, out, err = run_with(selftest, "legacy_upload_unordered")
    assert (code, out) == (0, "legacy_upload_unordered: 0"), err


def test_pageable_upload_is_ordered_by_what_orders_the_legacy_stream(selftest):
    """...and every correct order still sees it: a blocking stream, cudaStreamSynchronize(legacy),
    cudaDeviceSynchronize, an event recorded on the legacy stream, a later pageable cudaMemcpy
    (which synchronises the legacy stream first) and a device-to-host cudaMemcpy."""
    code, out, err = run_with(selftest, "legacy_upload_ordered")
    assert (code, out) == (0, "legacy_upload_ordered: 1 2 3 4 5 6"), err


def _blocks_that_saw(out):
    # "block_order: N of 63 blocks saw block 0's value"
    return int(out.split(": ")[1].split(" of ")[0])


@pytest.mark.parametrize("seed", ["0", "1", "12345"])
def test_blocks_run_in_a_shuffled_order(selftest, seed):
    """Block 0 publishes a value the other 63 blocks read: right only if block 0 runs first, which
    no GPU promises.  In index order (USBEAM_EMU_ORDER=forward, the emulator before issue 14)
    every block sees it; in the shuffled order some do not, the same ones for the same seed."""
    code, out, err = run_with(selftest, "block_order", USBEAM_EMU_SEED=seed)
    assert code == 0, err
    assert _blocks_that_saw(out) < 63, out
    assert run_with(selftest, "block_order", USBEAM_EMU_SEED=seed)[1] == out  # reproducible
    code, out, err = run_with(selftest, "block_order", USBEAM_EMU_SEED=seed, USBEAM_EMU_ORDER="forward")
    assert (code, out) == (0, "block_order: 63 of 63 blocks saw block 0's value"), err


def test_misaligned_pointer_argument_is_a_sticky_error(selftest):
    """A float2 pointer 4 bytes into a float buffer (a complex64 view at an odd float offset)
    passed to a kernel: a GPU's 8-byte loads fault with cudaErrorMisalignedAddress, which kills
    the context, so every later call fails too.  x86 loads it happily: the check is the
    emulator's, at the launch, from the kernel's parameter types."""
    code, out, err = run_with(selftest, "misaligned_argument")
    assert (code, out) == (0, "misaligned_argument: cudaErrorMisalignedAddress, cudaErrorMisalignedAddress, "
                              "later cudaErrorMisalignedAddress"), err
    assert "kernel real_parts, argument 0" in err and "const float2*" in err, err


def test_misaligned_load_through_ldg_is_a_sticky_error(selftest):
    """A misaligned float2 __ldg inside the kernel (a pointer the kernel derives itself): the
    launch succeeds, the synchronisation reports the fault, as on a GPU."""
    code, out, err = run_with(selftest, "misaligned_load")
    assert (code, out) == (0, "misaligned_load: cudaSuccess, cudaErrorMisalignedAddress"), err
    assert "kernel shifted_complex_load" in err and "__ldg" in err, err


def test_stress_mode_interleaves_threads_between_barriers(selftest):
    """Threads that use one __shared__ slot as private scratch (write, read back, no barrier):
    run to the next barrier one at a time, every thread reads its own value; in the stress mode
    (USBEAM_EMU_STRESS=1) threads switch between statements, and other threads' writes come in
    between, as they may on a GPU."""
    code, out, err = run_with(selftest, "shared_race")
    assert (code, out) == (0, "shared_race: 0 of 1024 wrong"), err
    for seed in ("0", "1"):
        code, out, err = run_with(selftest, "shared_race", USBEAM_EMU_STRESS="1", USBEAM_EMU_SEED=seed)
        assert code == 0, err
        assert int(out.split(": ")[1].split(" of ")[0]) > 0, f"not caught with seed {seed}: {out}"


def test_stress_mode_keeps_correct_kernels_correct(selftest):
    """Barriers, shuffles and atomics still work when threads switch between statements, and a
    barrier that can never release is still reported."""
    code, out, err = run_with(selftest, "reduction", USBEAM_EMU_STRESS="1")
    assert (code, out) == (0, "reduction: %g" % sum(i % 7 for i in range(1000))), err
    code, out, err = run_with(selftest, "divergent_barrier", USBEAM_EMU_STRESS="1")
    assert code == -signal.SIGABRT and "divergent" in err, out + err


def test_a_fault_in_a_kernel_names_the_kernel_and_the_seed(selftest):
    code, out, err = run_with(selftest, "out_of_bounds", USBEAM_EMU_SEED="7")
    assert code == -signal.SIGSEGV, out
    assert "kernel write_at, block (0,0,0), thread (0,0,0)" in err and "USBEAM_EMU_SEED=7" in err, err


def test_translate_puts_switch_points_only_where_they_keep_the_meaning():
    """The stress mode's switch points: after statements and at loop back-edges of device code,
    never before an else or a do-while's while, in a struct body, a for header's first two
    clauses, a comment, a string, a preprocessor line or host code."""
    sys.path.insert(0, str(EMU))
    try:
        import translate
    finally:
        sys.path.remove(str(EMU))
    source = "\n".join([
        '#define STEP(x) do { x; } while (0)',
        'void host(int *p) { p[0] = 1; }',
        '__device__ int helper(int a) {',
        '    struct Pair { int x; int y; };',
        '    if (a) a = 1; else a = 2;',
        '    do a--; while (a > 0);',
        '    for (int i = 0; i < 2; ++i) a += i; // a; comment',
        '    for (;;) break;',
        '    while (a < 3) a++;',
        '    const char *s = "x; y";',
        '    return a;',
        '}',
        '__global__ void kernel(int *out);',
    ])
    P = "USBEAM_EMU_POINT()"
    assert translate.stress_points(source).split("\n") == [
        '#define STEP(x) do { x; } while (0)',
        'void host(int *p) { p[0] = 1; }',
        '__device__ int helper(int a) {',
        f'    struct Pair {{ int x; int y; }}; {P};',
        f'    if (a) a = 1; else a = 2; {P};',
        f'    do a--; while ({P}, a > 0); {P};',
        f'    for (int i = 0; i < 2; {P}, ++i) a += i; {P}; // a; comment',
        f'    for (;; {P}) break; {P};',
        f'    while ({P}, a < 3) a++; {P};',
        f'    const char *s = "x; y"; {P};',
        f'    return a; {P};',
        '}',
        '__global__ void kernel(int *out);',
    ]
