"""Benchmark harness shared by every usbeam benchmark (after llm.c's per-kernel harness
and FFTW's bench):

1. validate the result first (a benchmark of a wrong answer is worthless),
2. warm up,
3. time repeated calls (device events on the GPU, perf_counter on the CPU),
4. report the median and the 95th percentile,
5. name the machine, and append the figures to benchmarks/RESULTS.md with the command
   that produced them (older rows are kept, so history stays visible).
"""
import datetime
import os
import platform
import resource
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
# Benchmarks run from a source checkout: import this checkout's usbeam (built in place), or
# the one in USBEAM_IMPORT_ROOT (make bench-emu: the CUDA emulator build in build/emu/pkg).
_ROOT = os.environ.get("USBEAM_IMPORT_ROOT", str(Path(__file__).resolve().parent.parent))
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)


@dataclass
class Timing:
    """Wall-clock statistics of repeated calls, in seconds."""
    samples: list = field(repr=False)

    @property
    def median(self):
        return float(np.median(self.samples))

    @property
    def p95(self):
        return float(np.percentile(self.samples, 95))

    @property
    def best(self):
        return float(np.min(self.samples))

    def __str__(self):
        return f"median {self.median * 1e3:.3f} ms, p95 {self.p95 * 1e3:.3f} ms (n={len(self.samples)})"


def measure(fn, *, warmup=3, repeat=20, max_seconds=60.0, rotate=None):
    """Time fn() after `warmup` untimed calls.

    rotate: optional list of argument tuples cycled through on successive calls, so that
    inputs that would otherwise sit in cache are rotated (fn(*rotate[i % len(rotate)])).
    Stops early (keeping at least 3 samples) when max_seconds of timed calls have elapsed.
    """
    args = rotate or [()]
    for i in range(warmup):
        fn(*args[i % len(args)])
    samples = []
    started = time.perf_counter()
    for i in range(repeat):
        t = time.perf_counter()
        fn(*args[i % len(args)])
        samples.append(time.perf_counter() - t)
        if len(samples) >= 3 and time.perf_counter() - started > max_seconds:
            break
    return Timing(samples)


def validated(name, result, check):
    """Run check(result) (which raises or returns False on a wrong answer) before timing."""
    ok = check(result)
    if ok is False:
        raise AssertionError(f"{name}: result failed validation; not timing a wrong answer")
    return result


def peak_rss_mib():
    """Peak resident set size of this process so far, MiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _cpu_model():
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine():
    """A one-line description of the machine and the build that ran the benchmark."""
    import usbeam

    info = usbeam.build_info()
    try:
        mem_gib = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 2**30
    except (ValueError, OSError):
        mem_gib = float("nan")
    gpus = ", ".join(d["name"] for d in usbeam.cuda_devices()) or "no GPU"
    # the DAS kernels' instruction-set copy capped (csrc/beamform/das_delays.c): what a machine
    # without AVX-512 (1: AVX2 + FMA) or without AVX2 (0: the baseline) runs
    isa = os.environ.get("USBEAM_DAS_ISA")
    capped = f"; DAS kernels capped at USBEAM_DAS_ISA={isa} (0 baseline, 1 AVX2 + FMA)" if isa in ("0", "1") else ""
    return (f"{_cpu_model()}, {os.cpu_count()} cores ({info['cpu_threads']} OpenMP threads), "
            f"{mem_gib:.0f} GiB; {gpus}; usbeam {'.'.join(map(str, info['version']))} "
            f"(CUDA {'built' if info['cuda'] else 'not built'}), numpy {np.__version__}, "
            f"Python {platform.python_version()}{capped}")


def git_revision():
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=Path(__file__).parent, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def markdown_table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def publish(title, header, rows, *, no_record, notes=None):
    """The table of a run: printed with the machine (--no-record), else appended to RESULTS.md."""
    if no_record:
        print(machine())
        print(markdown_table(header, rows))
    else:
        record(title, header, rows, notes=notes)


def record(title, header, rows, *, command=None, notes=None, path=RESULTS):
    """Append a dated section with a table to RESULTS.md (never rewrites older sections)."""
    import usbeam

    if usbeam.build_info().get("cuda_emulated"):
        print("not recorded: this usbeam runs CUDA on the CPU emulator (a smoke run; its times mean nothing)")
        return
    command = command or "python " + " ".join(sys.argv)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    text = [f"\n### {title} ({stamp}, commit {git_revision()})\n",
            f"Machine: {machine()}\n", f"Command: `{command}`\n"]
    if notes:
        text.append(notes.strip() + "\n")
    text.append(markdown_table(header, rows) + "\n")
    block = "\n".join(text)
    if not path.exists():
        path.write_text("# Benchmark results\n\nEach section is appended by a benchmark script; "
                        "older sections are kept so the history stays visible.\n")
    with path.open("a") as fh:
        fh.write(block)
    print(block)
