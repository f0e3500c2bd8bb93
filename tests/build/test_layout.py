"""The layout keeps its promises (issue 13): no dependency loop between the C files, no include
loop, cuda/ reads from csrc/ only the shared headers, and no scaffolding markers are left.

C files depend on one another through the functions they call, so the check compiles each
csrc/ file to an object and reads its symbol table (`nm`): file A depends on file B when A uses
a function B defines.  A loop (A -> B -> ... -> A) means the two cannot be understood, built or
tested one above the other — the review found module.c <-> py_device_array.c and
clutter.c <-> clutter_svd.c.
"""
import re
import shutil
import subprocess
import sys
import sysconfig
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
for parent in Path(__file__).resolve().parents:
    if (parent / "setup.py").exists() and (parent / "csrc").is_dir():
        ROOT = parent
        break


def find_cycle(graph):
    """One cycle of the directed graph {node: set(nodes)} as a list, or None."""
    state, stack = {}, []

    def visit(node):
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_find_cycle_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


@pytest.fixture(scope="module")
def objects(tmp_path_factory):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None or shutil.which("nm") is None:
        pytest.skip("needs a C compiler and nm")
    out = tmp_path_factory.mktemp("layout")
    sources = sorted((ROOT / "csrc").rglob("*.c"))
    includes = ["-I", str(ROOT / "csrc"), "-I", str(ROOT / "csrc" / "include"), "-I", np.get_include(),
                "-I", sysconfig.get_paths()["include"]]

    def compile_one(src):
        obj = out / (str(src.relative_to(ROOT / "csrc")).replace("/", "__") + ".o")
        subprocess.run([cc, "-std=c11", "-O0", "-fopenmp", "-c", str(src), "-o", str(obj)] + includes,
                       check=True, capture_output=True)
        return src, obj

    with ThreadPoolExecutor(4) as pool:
        return list(pool.map(compile_one, sources))


def symbols(obj, defined):
    flag = "--defined-only" if defined else "--undefined-only"
    out = subprocess.run(["nm", "-g", flag, str(obj)], capture_output=True, text=True, check=True).stdout
    return {line.split()[-1] for line in out.splitlines() if line.strip()}


def test_no_call_loop_between_c_files(objects):
    defined_by = {}
    for src, obj in objects:
        for name in symbols(obj, True):
            defined_by.setdefault(name, src)
    graph = {}
    for src, obj in objects:
        graph[src] = {defined_by[name] for name in symbols(obj, False)
                      if name in defined_by and defined_by[name] != src}
    cycle = find_cycle({str(k.relative_to(ROOT)): {str(v.relative_to(ROOT)) for v in vs} for k, vs in graph.items()})
    assert cycle is None, "C files call each other in a loop: " + " -> ".join(cycle)


def include_graph(files):
    graph = {}
    for f in files:
        text = f.read_text(errors="replace")
        targets = set()
        for inc in re.findall(r'#include "([^"]+)"', text):
            for base in (f.parent, ROOT / "csrc", ROOT / "csrc" / "include", ROOT / "cuda"):
                if (base / inc).exists():
                    targets.add(str((base / inc).resolve().relative_to(ROOT)))
                    break
        graph[str(f.resolve().relative_to(ROOT))] = targets
    return graph


def test_no_include_loop():
    files = [p for p in list((ROOT / "csrc").rglob("*.[ch]")) + list((ROOT / "cuda").rglob("*.cu*"))
             if "emu" not in p.parts]
    cycle = find_cycle(include_graph(files))
    assert cycle is None, "headers include each other in a loop: " + " -> ".join(cycle)


def test_cuda_reads_only_the_shared_headers_of_csrc():
    """The CUDA backend sees the C library through the seam and the shared per-sample math, never a
    CPU plan's private struct (cuda/das.cu once read csrc/das_internal.h)."""
    allowed = re.compile(r"^(common/|backend/|usbeam\.h$|usbeam/|ai/ai_math\.h$|ai/ai_internal\.h$|doppler/jacobi_math\.h$|beamform/adaptive_math\.h$|runtime/)")
    offenders = []
    for f in list((ROOT / "cuda").glob("*.cu")) + list((ROOT / "cuda" / "runtime").glob("*")):
        for inc in re.findall(r'#include "([^"]+)"', f.read_text()):
            if not allowed.match(inc):
                offenders.append(f"{f.relative_to(ROOT)}: {inc}")
    assert offenders == []


def test_no_scaffolding_markers():
    pattern = re.compile(r"extend here|extend `__all__`|declarations of the \w+ family go below|^[ \t]*(#|/\*)[ \t]*family:?[ \t]+\w+[ \t]*:", re.M)
    hits = []
    for f in list((ROOT / "csrc").rglob("*.[ch]")) + list((ROOT / "usbeam").rglob("*.py")):
        for match in pattern.finditer(f.read_text()):
            line = f.read_text()[:match.start()].count("\n") + 1
            hits.append(f"{f.relative_to(ROOT)}:{line}")
    assert hits == []


def test_build_never_reads_the_test_tree():
    setup = (ROOT / "setup.py").read_text()
    assert '"tests"' not in setup and "tests/" not in setup.split('"""', 2)[2]
    assert sys.modules.get("usbeam") is None or "tests" not in Path(sys.modules["usbeam"].__file__).parts
