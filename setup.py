"""Build of usbeam._core: the C core (csrc/*.c) and, when nvcc is available, cuda/*.cu.

Environment:
  USBEAM_CUDA=auto|0|1   auto (default): build the CUDA backend when nvcc is found;
                         0: CPU only; 1: CUDA required (fail without nvcc);
                         emu: the CUDA sources compiled by the host C++ compiler
                         against the CPU emulator in tests/cuda_emu (needs the CUDA
                         headers, not a GPU or a driver): `make test-emu` runs the CUDA
                         tests with it.
  USBEAM_CUDA_ARCH       nvcc -gencode list, default "sm_90 + compute_90 PTX"
                         (H100/H200 native, PTX JIT for newer GPUs), e.g.
                         "-gencode=arch=compute_80,code=sm_80".
  USBEAM_SANITIZE=1      build with -fsanitize=address,undefined (see `make asan`).
  USBEAM_NATIVE=1        add -march=native (local benchmarking only; not portable).
  CI=true                warnings are errors (-Werror).
"""
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from glob import glob
from pathlib import Path

import numpy
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
CUDA_MODE = os.environ.get("USBEAM_CUDA", "auto").strip().lower()
DEFAULT_CUDA_ARCH = "-gencode=arch=compute_90,code=sm_90 -gencode=arch=compute_90,code=compute_90"


def log(msg):
    print(f"usbeam build: {msg}", file=sys.stderr, flush=True)


def compiler_accepts(compiler, flags):
    """True when the C compiler compiles and links a trivial program with flags."""
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp, "probe.c")
        src.write_text("#include <omp.h>\nint main(void){return omp_get_max_threads() < 0;}\n"
                       if "-fopenmp" in flags else "int main(void){return 0;}\n")
        cmd = compiler + [str(src), "-o", str(Path(tmp, "probe"))] + flags
        return subprocess.run(cmd, capture_output=True).returncode == 0


def find_nvcc():
    nvcc = shutil.which("nvcc")
    if nvcc:
        return Path(nvcc)
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home and Path(home, "bin", "nvcc").exists():
            return Path(home, "bin", "nvcc")
    return None


class UsbeamBuildExt(build_ext):
    def build_extensions(self):
        ext = self.extensions[0]
        cc = self.compiler.compiler_so[:1]
        cflags = ["-std=c11", "-O3", "-Wall", "-Wextra", "-Wshadow", "-Wno-unused-parameter",
                  "-fno-math-errno", "-fvisibility=hidden"]
        ldflags = []
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            cflags.append("-Werror")
        if os.environ.get("USBEAM_NATIVE") == "1":
            cflags.append("-march=native")
        if compiler_accepts(cc, ["-fopenmp"]):
            cflags.append("-fopenmp")
            ldflags.append("-fopenmp")
            log("OpenMP: yes")
        else:
            log("OpenMP: no (the CPU backend runs single-threaded)")
        if os.environ.get("USBEAM_SANITIZE") == "1":
            san = ["-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-g", "-O1"]
            cflags = [f for f in cflags if f != "-O3"] + san
            ldflags += ["-fsanitize=address,undefined"]
            log("sanitizers: address, undefined")
        ext.extra_compile_args = cflags
        ext.extra_link_args = ldflags
        self._configure_cuda(ext)
        self._force_if_configuration_changed(ext)
        super().build_extensions()

    def _compile_object(self, obj, src, cmd, label, extra_inputs=()):
        """Run cmd to build obj from src unless the object is current; returns its path."""
        if not self._object_is_current(obj, src, cmd, extra_inputs):
            log(f"{label} {Path(src).name}")
            subprocess.run(cmd, check=True)
            obj.with_suffix(".cmd").write_text(" ".join(cmd))
        return str(obj)

    @staticmethod
    def _link_objects(ext, objects):
        ext.extra_objects += objects
        ext.depends += objects  # relink when an object changed (setuptools looks at depends only)

    def _object_is_current(self, obj, src, cmd, extra_inputs=()):
        """An object built by the same command, newer than its source and every header."""
        if self.force or not obj.exists() or not obj.with_suffix(".cmd").exists():
            return False
        if obj.with_suffix(".cmd").read_text() != " ".join(cmd):
            return False
        inputs = [Path(src)] + [Path(p) for p in glob(str(ROOT / "csrc" / "*.h"))] + \
                 [Path(p) for p in glob(str(ROOT / "cuda" / "*.cuh"))] + [Path(p) for p in glob(str(ROOT / "cuda" / "*.h"))] + \
                 [Path(p) for p in extra_inputs if Path(p).is_file()]
        return obj.stat().st_mtime > max(p.stat().st_mtime for p in inputs)

    def _force_if_configuration_changed(self, ext):
        """Rebuild everything when the flags or the CUDA choice differ from the last build:
        setuptools only compares file times, so a CPU-only build would otherwise survive a
        later CUDA build (or a sanitizer build a normal one)."""
        signature = repr((ext.extra_compile_args, ext.extra_link_args, ext.define_macros, ext.libraries,
                          sorted(ext.extra_objects)))
        stamp = Path(self.build_temp, "usbeam-build-configuration")
        if not stamp.exists() or stamp.read_text() != signature:
            self.force = True
            stamp.parent.mkdir(parents=True, exist_ok=True)
            stamp.write_text(signature)

    def _configure_cuda(self, ext):
        if CUDA_MODE not in ("auto", "0", "1", "emu"):
            raise SystemExit(f"USBEAM_CUDA must be auto, 0, 1 or emu (got {CUDA_MODE!r})")
        if CUDA_MODE == "emu":
            return self._configure_cuda_emulator(ext)
        if CUDA_MODE == "0":
            log("CUDA: disabled (USBEAM_CUDA=0); building the CPU backend only")
            return
        nvcc = find_nvcc()
        if nvcc is None:
            if CUDA_MODE == "1":
                raise SystemExit("USBEAM_CUDA=1 but nvcc was not found (set CUDA_HOME or PATH)")
            log("CUDA: nvcc not found; building the CPU backend only")
            return
        cuda_home = nvcc.parent.parent
        lib_dirs = [d for d in (cuda_home / "lib64", cuda_home / "lib", cuda_home / "targets/x86_64-linux/lib")
                    if d.exists()]
        arch = os.environ.get("USBEAM_CUDA_ARCH", DEFAULT_CUDA_ARCH).split()
        sources = sorted(glob(str(ROOT / "cuda" / "*.cu")))
        build_dir = Path(self.build_temp, "cuda")
        build_dir.mkdir(parents=True, exist_ok=True)
        werror = ["-Werror", "all-warnings"] if os.environ.get("CI", "").lower() in ("1", "true", "yes") else []
        objects = []
        for src in sources:
            obj = build_dir / (Path(src).stem + ".o")
            cmd = [str(nvcc), "-c", src, "-o", str(obj), "-O3", "-std=c++17", "--compiler-options",
                   "-fPIC,-fvisibility=hidden,-Wall", "-DUSBEAM_HAVE_CUDA", "-lineinfo",
                   "-I", str(ROOT / "csrc")] + arch + werror
            objects.append(self._compile_object(obj, src, cmd, "nvcc"))
        self._link_objects(ext, objects)
        ext.define_macros.append(("USBEAM_HAVE_CUDA", "1"))
        ext.library_dirs += [str(d) for d in lib_dirs]
        ext.runtime_library_dirs += [str(d) for d in lib_dirs]
        # Static CUDA runtime: importing usbeam works on machines without a driver.
        ext.libraries += ["cudart_static", "cublas", "rt", "pthread", "dl", "stdc++"]
        log(f"CUDA: building {len(objects)} CUDA source(s) with {nvcc} ({' '.join(arch)})")

    def _configure_cuda_emulator(self, ext):
        """cuda/*.cu rewritten by tests/cuda_emu/translate.py (launch syntax only) and compiled
        by the host C++ compiler with the emulator's header forced in; linked with the
        emulated runtime, cuBLAS and CUB instead of cudart and cuBLAS."""
        nvcc = find_nvcc()
        cuda_home = Path(os.environ.get("CUDA_HOME", nvcc.parent.parent if nvcc else "/usr/local/cuda"))
        cuda_include = cuda_home / "include"
        if not (cuda_include / "cuda_runtime.h").exists():
            raise SystemExit(f"USBEAM_CUDA=emu needs the CUDA headers ({cuda_include}/cuda_runtime.h not found)")
        emu = ROOT / "tests" / "cuda_emu"
        cxx = os.environ.get("CXX", "g++")
        build_dir = Path(self.build_temp, "cuda_emu")
        build_dir.mkdir(parents=True, exist_ok=True)
        flags = ["-std=c++17", "-O1", "-g", "-fPIC", "-fvisibility=hidden", "-ffp-contract=off", "-Wall",
                 "-Wno-unused-function", "-Wno-unused-variable", "-Wno-unused-but-set-variable", "-Wno-subobject-linkage", "-Wno-unknown-pragmas",
                 "-include", str(emu / "cuda_emu.h"), "-I", str(emu / "include"), "-I", str(ROOT / "cuda"),
                 "-I", str(ROOT / "csrc"), "-I", str(cuda_include), "-DUSBEAM_HAVE_CUDA", "-DUSBEAM_CUDA_EMULATED"]
        if os.environ.get("USBEAM_SANITIZE") == "1":  # kernels and host code under ASan + UBSan
            flags += ["-fsanitize=address,undefined", "-fno-omit-frame-pointer"]
        sources = [(src, True) for src in sorted(glob(str(ROOT / "cuda" / "*.cu")))]
        sources += [(str(emu / "runtime.cpp"), False), (str(emu / "cublas.cpp"), False)]
        objects = []
        for src, translate in sources:
            stem = Path(src).stem
            cpp = build_dir / (stem + ".cpp")
            if translate:
                subprocess.run([sys.executable, str(emu / "translate.py"), src, str(cpp)], check=True)
            else:
                cpp = Path(src)
            obj = build_dir / (stem + ".o")
            cmd = [cxx, "-c", str(cpp), "-o", str(obj)] + flags
            objects.append(self._compile_object(obj, src, cmd, "c++ (CUDA emulator)",
                                                glob(str(emu / "**" / "*"), recursive=True)))
        self._link_objects(ext, objects)
        ext.define_macros += [("USBEAM_HAVE_CUDA", "1"), ("USBEAM_CUDA_EMULATED", "1")]
        ext.libraries += ["stdc++", "dl", "pthread", "rt"]
        log(f"CUDA: EMULATED on the CPU ({len(sources) - 2} CUDA sources with {cxx}); "
            "for testing only: no GPU is used")


core = Extension(
    "usbeam._core",
    sources=sorted(str(Path(p).relative_to(ROOT)) for p in glob(str(ROOT / "csrc" / "*.c"))),
    include_dirs=[numpy.get_include(), "csrc"],
    depends=glob("csrc/*.h"),
    # shm_open / process-shared semaphores (live family): in libc since glibc 2.34, librt before
    libraries=["rt", "pthread"],
)

setup(ext_modules=[core], cmdclass={"build_ext": UsbeamBuildExt})
