"""Build of usbeam: the C core usbeam._core (csrc/*.c, never linked with a CUDA library), the
optional CUDA backend usbeam._cuda (cuda/*.cu, when nvcc is available), and the standalone
shared-memory client library libusbeam_client.so with its header (package data).

Environment:
  USBEAM_CUDA=auto|0|1|emu  auto (default): build usbeam._cuda when nvcc is found; 0: CPU only;
                         1: CUDA required (fail without nvcc); emu: the CUDA sources compiled by
                         the host C++ compiler against the CPU emulator in cuda/emu (needs
                         the CUDA headers, not a GPU or a driver): `make test-emu` runs the CUDA
                         tests with it.
  USBEAM_CUDA_ARCH       the GPUs to compile for.  Default: native code for sm_80, 86, 89, 90,
                         100 and 120 (Ampere, Ada, Hopper, Blackwell) plus PTX for the newest,
                         which later GPUs JIT-compile.  Narrow it for development builds with a
                         list ("90" or "86,90": native code for each, PTX for the last) or give
                         raw nvcc flags ("-gencode=arch=compute_90,code=sm_90").
  USBEAM_SANITIZE=1      build with -fsanitize=address,undefined (see `make asan`).
  USBEAM_NATIVE=1        add -march=native (local benchmarking only; not portable).
  CI=true                warnings are errors (-Werror).
"""
import concurrent.futures
import os
import re
import shutil
import subprocess
import sys
import tempfile
from glob import glob
from pathlib import Path

import numpy
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
CUDA_MODE = os.environ.get("USBEAM_CUDA", "auto").strip().lower()
DEFAULT_CUDA_ARCHITECTURES = ["80", "86", "89", "90", "100", "120"]
# cuBLAS from the NVIDIA wheels (pip install usbeam[cuda]): the CUDA 13 wheels put every library
# in nvidia/cu13/lib, the CUDA 12 ones in nvidia/cublas/lib; usbeam/ sits beside nvidia/.
WHEEL_LIBRARY_DIRS = {13: ["$ORIGIN/../nvidia/cu13/lib"], 12: ["$ORIGIN/../nvidia/cublas/lib"]}


def log(msg):
    print(f"usbeam build: {msg}", file=sys.stderr, flush=True)


def ci():
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


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


def nvcc_major(nvcc):
    """The CUDA major version nvcc belongs to (its cuBLAS soname: libcublas.so.<major>)."""
    out = subprocess.run([str(nvcc), "--version"], capture_output=True, text=True, check=True).stdout
    match = re.search(r"release (\d+)\.(\d+)", out)
    if not match:
        raise SystemExit(f"cannot read the CUDA version from `{nvcc} --version`")
    return int(match.group(1))


def cuda_architecture_flags():
    """(nvcc -gencode flags, a one-line description) from USBEAM_CUDA_ARCH."""
    raw = os.environ.get("USBEAM_CUDA_ARCH", "").strip()
    if "arch=" in raw or "-gencode" in raw:
        return raw.split(), raw
    archs = [a.replace("sm_", "").replace("compute_", "") for a in re.split(r"[,; ]+", raw) if a] \
        or DEFAULT_CUDA_ARCHITECTURES
    if not all(a.isdigit() for a in archs):
        raise SystemExit(f"USBEAM_CUDA_ARCH: expected compute capabilities such as '90' or '86,90' (got {raw!r})")
    newest = max(archs, key=int)
    flags = [f"-gencode=arch=compute_{a},code=sm_{a}" for a in archs]
    flags.append(f"-gencode=arch=compute_{newest},code=compute_{newest}")
    return flags, " ".join(f"sm_{a}" for a in archs) + f" + compute_{newest} PTX"


class UsbeamBuildExt(build_ext):
    def run(self):
        mode = CUDA_MODE
        if mode not in ("auto", "0", "1", "emu"):
            raise SystemExit(f"USBEAM_CUDA must be auto, 0, 1 or emu (got {mode!r})")
        self.nvcc = find_nvcc() if mode in ("auto", "1") else None
        if mode == "1" and self.nvcc is None:
            raise SystemExit("USBEAM_CUDA=1 but nvcc was not found (set CUDA_HOME or PATH)")
        self.with_cuda = mode == "emu" or self.nvcc is not None
        if not self.with_cuda:
            log("CUDA: " + ("disabled (USBEAM_CUDA=0)" if mode == "0" else "nvcc not found") +
                "; building the CPU backend only (usbeam._cuda is not built)")
            self.extensions = [e for e in self.extensions if e.name != "usbeam._cuda"]
            self._remove_stale_cuda_module()
        super().run()
        if self.with_cuda:
            self._write_cuda_build_info()
        self._build_client_library()

    def build_extensions(self):
        cc = self.compiler.compiler_so[:1]
        cflags = ["-O3", "-Wall", "-Wextra", "-Wshadow", "-Wno-unused-parameter", "-fno-math-errno",
                  "-fvisibility=hidden"]
        ldflags = []
        if ci():
            cflags.append("-Werror")
        if compiler_accepts(cc, ["-Werror", "-Wno-pass-failed"]) and not compiler_accepts(cc, ["-Werror", "-Wno-no-such-warning-xyz"]):
            # clang reports an `omp simd` loop it could not vectorise as a warning (the pragma
            # is a hint; GCC vectorises them): not an error under -Werror
            cflags.append("-Wno-pass-failed")
        if os.environ.get("USBEAM_NATIVE") == "1":
            cflags.append("-march=native")
        if compiler_accepts(cc, ["-fopenmp"]):
            openmp = ["-fopenmp"]
            log("OpenMP: yes")
        else:
            openmp = []
            log("OpenMP: no (the CPU backend runs single-threaded)")
        if os.environ.get("USBEAM_SANITIZE") == "1":
            cflags = [f for f in cflags if f != "-O3"] + ["-fsanitize=address,undefined", "-fno-omit-frame-pointer",
                                                          "-g", "-O1"]
            ldflags += ["-fsanitize=address,undefined"]
            log("sanitizers: address, undefined")
        self.sanitize = os.environ.get("USBEAM_SANITIZE") == "1"
        for ext in self.extensions:
            ext.extra_compile_args = ["-std=c11"] + cflags + (openmp if ext.name == "usbeam._core" else [])
            ext.extra_link_args = ldflags + (openmp if ext.name == "usbeam._core" else [])
            if ext.name == "usbeam._cuda":
                if CUDA_MODE == "emu":
                    self._configure_cuda_emulator(ext)
                else:
                    self._configure_cuda(ext)
        self._force_if_configuration_changed()
        super().build_extensions()

    # ---- helpers ---------------------------------------------------------------------------
    def _remove_stale_cuda_module(self):
        """A CPU-only build must not ship a usbeam._cuda left in build/ (or in place) by an
        earlier build with nvcc: it would be stale, and the wheel would claim a CUDA backend."""
        places = {Path(self.build_lib, "usbeam"), self._package_dir()}
        if self.inplace:
            places.add(ROOT / "usbeam")
        for place in places:
            for stale in list(place.glob("_cuda*.so")) + list(place.glob("_cuda_build.py")):
                log(f"removing {stale} (an earlier build's CUDA backend)")
                stale.unlink()

    def _package_dir(self):
        return Path(self.get_ext_fullpath("usbeam._core")).parent

    def _compile_objects(self, jobs, label):
        """Build each (obj, src, cmd, extra_inputs) whose object is not current, in parallel."""
        stale = [job for job in jobs if not self._object_is_current(*job)]
        for obj, src, cmd, extra in stale:
            log(f"{label} {Path(src).name}")

        def run(job):
            obj, src, cmd, extra = job
            subprocess.run(cmd, check=True)
            obj.with_suffix(".cmd").write_text(" ".join(cmd))

        workers = max(1, min(len(stale), os.cpu_count() or 1))
        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            list(pool.map(run, stale))
        return [str(job[0]) for job in jobs]

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
        inputs = [Path(src)] + [Path(p) for p in glob(str(ROOT / "csrc" / "**" / "*.h"), recursive=True)] + \
                 [Path(p) for p in glob(str(ROOT / "cuda" / "**" / "*.cuh"), recursive=True)] + \
                 [Path(p) for p in extra_inputs if Path(p).is_file()]
        return obj.stat().st_mtime > max(p.stat().st_mtime for p in inputs)

    def _force_if_configuration_changed(self):
        """Rebuild everything when the flags or the CUDA choice differ from the last build:
        setuptools only compares file times, so a CPU-only build would otherwise survive a
        later CUDA build (or a sanitizer build a normal one)."""
        signature = repr([(e.name, e.extra_compile_args, e.extra_link_args, e.define_macros, e.libraries,
                           e.runtime_library_dirs, sorted(e.extra_objects)) for e in self.extensions])
        stamp = Path(self.build_temp, "usbeam-build-configuration")
        if not stamp.exists() or stamp.read_text() != signature:
            self.force = True
            stamp.parent.mkdir(parents=True, exist_ok=True)
            stamp.write_text(signature)

    # ---- the CUDA backend ------------------------------------------------------------------
    def _configure_cuda(self, ext):
        nvcc = self.nvcc
        cuda_home = nvcc.parent.parent
        major = nvcc_major(nvcc)
        lib_dirs = [d for d in (cuda_home / "lib64", cuda_home / "lib", cuda_home / "targets/x86_64-linux/lib")
                    if d.exists()]
        arch, arch_text = cuda_architecture_flags()
        build_dir = Path(self.build_temp, "cuda")
        build_dir.mkdir(parents=True, exist_ok=True)
        werror = ["-Werror", "all-warnings"] if ci() else []
        jobs = []
        for src in cuda_sources():
            obj = build_dir / (Path(src).stem + ".o")
            cmd = [str(nvcc), "-c", src, "-o", str(obj), "-O3", "-std=c++17", "--compiler-options",
                   "-fPIC,-fvisibility=hidden,-Wall", "-DUSBEAM_HAVE_CUDA", "-lineinfo",
                   "-I", str(ROOT / "csrc"), "-I", str(ROOT / "csrc" / "include"), "-I", str(ROOT / "cuda")] + arch + werror
            jobs.append((obj, src, cmd, ()))
        self._link_objects(ext, self._compile_objects(jobs, "nvcc"))
        ext.include_dirs += [str(cuda_home / "include")]
        ext.define_macros += [("USBEAM_HAVE_CUDA", "1"), ("USBEAM_CUDA_ARCHITECTURES", f'"{arch_text}"')]
        ext.library_dirs += [str(d) for d in lib_dirs]
        # No RUNPATH into this machine's toolkit: usbeam._backend.load_cuda finds cuBLAS (the
        # toolkit's, the NVIDIA wheels', or one already loaded by PyTorch/CuPy) before import.
        ext.runtime_library_dirs += WHEEL_LIBRARY_DIRS.get(major, [])
        # Static CUDA runtime: the module needs only the driver's libcuda.so.1 and cuBLAS.
        ext.libraries += ["cudart_static", "cublas", "cusparse", "rt", "pthread", "dl", "stdc++"]
        self.cuda_libraries = [f"libcublasLt.so.{major}", f"libcublas.so.{major}"] + cusparse_libraries(lib_dirs, major)
        self.cuda_major, self.cuda_arch_text, self.cuda_emulated = major, arch_text, False
        log(f"CUDA {major}: usbeam._cuda from {len(jobs)} CUDA source(s) with {nvcc} ({arch_text})")

    def _configure_cuda_emulator(self, ext):
        """The CUDA sources rewritten by cuda/emu/translate.py (launch syntax only) and compiled
        by the host C++ compiler with the emulator's header forced in; linked with the
        emulated runtime, cuBLAS and CUB instead of cudart and cuBLAS."""
        nvcc = find_nvcc()
        cuda_home = Path(os.environ.get("CUDA_HOME", nvcc.parent.parent if nvcc else "/usr/local/cuda"))
        cuda_include = cuda_home / "include"
        if not (cuda_include / "cuda_runtime.h").exists():
            raise SystemExit(f"USBEAM_CUDA=emu needs the CUDA headers ({cuda_include}/cuda_runtime.h not found)")
        emu = ROOT / "cuda" / "emu"
        cxx = os.environ.get("CXX", "g++")
        build_dir = Path(self.build_temp, "cuda_emu")
        build_dir.mkdir(parents=True, exist_ok=True)
        flags = ["-std=c++17", "-O1", "-g", "-fPIC", "-fvisibility=hidden", "-ffp-contract=off", "-Wall",
                 "-Wno-unused-function", "-Wno-unused-variable", "-Wno-unused-but-set-variable",
                 "-Wno-subobject-linkage", "-Wno-unknown-pragmas",
                 "-include", str(emu / "cuda_emu.h"), "-I", str(emu / "include"), "-I", str(ROOT / "cuda"),
                 "-I", str(ROOT / "csrc"), "-I", str(ROOT / "csrc" / "include"), "-I", str(cuda_include), "-DUSBEAM_HAVE_CUDA", "-DUSBEAM_CUDA_EMULATED"]
        if self.sanitize:  # kernels and host code under ASan + UBSan
            flags += ["-fsanitize=address,undefined", "-fno-omit-frame-pointer"]
        sources = [(src, True) for src in cuda_sources()]
        sources += [(str(emu / "runtime.cpp"), False), (str(emu / "cublas.cpp"), False),
                    (str(emu / "cusparse.cpp"), False)]
        emulator_files = glob(str(emu / "**" / "*"), recursive=True)
        jobs = []
        for src, translate in sources:
            stem = Path(src).stem
            cpp = build_dir / (stem + ".cpp")
            if translate:
                subprocess.run([sys.executable, str(emu / "translate.py"), src, str(cpp)], check=True)
            else:
                cpp = Path(src)
            obj = build_dir / (stem + ".o")
            jobs.append((obj, src, [cxx, "-c", str(cpp), "-o", str(obj)] + flags, emulator_files))
        self._link_objects(ext, self._compile_objects(jobs, "c++ (CUDA emulator)"))
        ext.include_dirs += [str(cuda_include)]
        ext.define_macros += [("USBEAM_HAVE_CUDA", "1"), ("USBEAM_CUDA_EMULATED", "1"),
                              ("USBEAM_CUDA_ARCHITECTURES", '"emulated"')]
        ext.libraries += ["stdc++", "dl", "pthread", "rt"]
        self.cuda_libraries, self.cuda_major, self.cuda_arch_text, self.cuda_emulated = [], 0, "emulated", True
        log(f"CUDA: EMULATED on the CPU ({len(sources) - 3} CUDA sources with {cxx}); "
            "for testing only: no GPU is used")

    def _write_cuda_build_info(self):
        """usbeam/_cuda_build.py: what usbeam._cuda needs at run time, read before importing it."""
        text = ('"""Written by setup.py: the CUDA libraries usbeam._cuda links and what it was built for."""\n'
                f"CUDA_MAJOR = {self.cuda_major}\n"
                f"LIBRARIES = {tuple(self.cuda_libraries)!r}\n"
                f"ARCHITECTURES = {self.cuda_arch_text!r}\n"
                f"EMULATED = {self.cuda_emulated!r}\n")
        (self._package_dir() / "_cuda_build.py").write_text(text)

    # ---- the shared-memory client (libc only; MATLAB loadlibrary, ctypes, C) ----------------
    def _build_client_library(self):
        package = self._package_dir()
        package.mkdir(parents=True, exist_ok=True)
        flags = ["-std=c11", "-O2", "-fPIC", "-Wall", "-Wextra", "-Wshadow", "-Wno-unused-parameter"] + \
                (["-Werror"] if ci() else [])
        objects = self.compiler.compile([str(ROOT / "csrc" / "shm" / "client.c")], output_dir=self.build_temp,
                                        include_dirs=[str(ROOT / "csrc")], extra_postargs=flags)
        self.compiler.link_shared_object(objects, str(package / "libusbeam_client.so"), libraries=["rt", "pthread"])
        include = package / "include"
        include.mkdir(exist_ok=True)
        shutil.copy2(ROOT / "csrc" / "shm" / "usbeam_client.h", include / "usbeam_client.h")


def cusparse_libraries(lib_dirs, major):
    """The cuSPARSE soname the module links and the nvJitLink it needs, in load order.  cuSPARSE's
    soname major is not the toolkit's (CUDA 13.0 ships libcusparse.so.12), so it is read from
    the toolkit's libcusparse.so link; its dependency libnvJitLink.so.<major> is preloaded first."""
    for d in lib_dirs:
        link = Path(d, "libcusparse.so")
        if link.exists():
            names = [f"libnvJitLink.so.{major}"] if Path(d, f"libnvJitLink.so.{major}").exists() else []
            found = re.match(r"libcusparse\.so\.\d+", link.resolve().name)
            return names + [found.group(0) if found else f"libcusparse.so.{major}"]
    return [f"libcusparse.so.{major}"]


def relative_sources(pattern, exclude=()):
    return sorted(str(Path(p).relative_to(ROOT)) for p in glob(str(ROOT / pattern), recursive=True)
                  if Path(p).name not in exclude)


def cuda_sources():
    """The CUDA twins (cuda/*.cu) and the runtime they share (cuda/runtime/*.cu)."""
    return sorted(glob(str(ROOT / "cuda" / "*.cu"))) + sorted(glob(str(ROOT / "cuda" / "runtime" / "*.cu")))


core = Extension(
    "usbeam._core",
    # client.c is the standalone client library (libusbeam_client.so), not part of the module
    sources=relative_sources("csrc/**/*.c", exclude=("client.c",)),
    include_dirs=[numpy.get_include(), "csrc", "csrc/include"],
    # the oldest NumPy the module runs with, whichever NumPy builds it (pyproject: numpy>=1.25)
    define_macros=[("NPY_TARGET_VERSION", "NPY_1_25_API_VERSION")],
    depends=glob("csrc/**/*.h", recursive=True),
    # shm_open / process-shared semaphores (live family): in libc since glibc 2.34, librt before
    libraries=["rt", "pthread"],
)

cuda = Extension(
    "usbeam._cuda",
    sources=["cuda/runtime/cuda_module.c"],
    include_dirs=["csrc", "csrc/include"],
    depends=glob("csrc/**/*.h", recursive=True) + glob("cuda/**/*.cuh", recursive=True),
)

setup(ext_modules=[core, cuda], cmdclass={"build_ext": UsbeamBuildExt})
