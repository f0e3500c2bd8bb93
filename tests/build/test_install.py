"""What a user gets: the install routes of the README, each into a fresh virtual environment and
imported from a directory outside the checkout (issue: "A real package").

1. `pip install <clone>` of a clean clone of the repository (what CI tests is what is committed);
2. `python -m build` of that clone (the sdist, then a wheel built from the sdist) and
   `pip install` of that wheel; the two installs hold the same files and, in every extension
   module, the same exported symbols;
3. the wheel's package imported and running DAS + B-mode on the CPU with the CUDA toolkit's
   folder hidden (a private mount namespace: `unshare -m`, or `unshare -rm` without root), where
   `usbeam.build_info()` must say in one line why CUDA is absent and a CUDA plan must fail with
   that reason.

Slow (two builds of the C core and, where nvcc is, of the CUDA backend for one architecture:
USBEAM_CUDA_ARCH narrows it, as for development builds), so it runs only with --packaging
(`make test-package`, part of `make test`).
"""
import json
import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.packaging

# The small end-to-end job run by each installed copy: simulate a point target, beamform it on
# the CPU, make a B-mode image, and check the target lands where it was put (the DAS is
# validated against the float64 reference elsewhere; this proves the installed copy works).
SMOKE = textwrap.dedent("""
    import json, sys
    import numpy as np
    import usbeam, usbeam.live
    from usbeam.live import shm_client
    probe = usbeam.LinearArray(n_elements=64, pitch=0.3e-3, width=0.27e-3, bandwidth=0.6)
    seq = usbeam.plane_wave_sequence([0.0])
    fs, fc, c = 20e6, 5e6, 1540.0
    rf = usbeam.simulate_rf(np.array([[0.0, 0.0, 15e-3]]), np.array([1.0]), probe, seq, fs=fs, fc=fc,
                            c=c, n_samples=512, n_frames=1)
    grid = usbeam.Grid(x=np.linspace(-3e-3, 3e-3, 61), z=np.linspace(12e-3, 18e-3, 61))
    iq = usbeam.rf2iq(rf, fs=fs, fc=fc)
    image = usbeam.das(iq, probe, seq, grid, fs=fs, fc=fc, c=c)
    display = usbeam.bmode(image, 40)
    iz, ix = np.unravel_index(np.argmax(np.abs(image[0])), image.shape[-2:])
    cuda_plan_error = None
    try:
        usbeam.Beamformer(probe, seq, grid, fs=fs, fc=fc, c=c, n_samples=iq.shape[-1], backend="cuda")
    except usbeam.UsbeamError as exc:
        cuda_plan_error = str(exc)
    print(json.dumps({
        "file": usbeam.__file__, "live": usbeam.live.__file__,
        "build_info": {k: v for k, v in usbeam.build_info().items() if k != "version"},
        "peak_mm": [float(grid.z[iz] * 1e3), float(grid.x[ix] * 1e3)],
        "bmode": [str(display.dtype), int(display.max())],
        "manifest": sorted(usbeam.datasets.manifest()),
        "client_library": str(shm_client.find_client_library()),
        "cuda_plan_error": cuda_plan_error,
    }))
""")


def run(cmd, **kwargs):
    result = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    assert result.returncode == 0, f"{' '.join(map(str, cmd))} failed:\n{result.stdout[-3000:]}\n{result.stderr[-6000:]}"
    return result


def build_env():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env.setdefault("USBEAM_CUDA_ARCH", "90")  # one architecture: the build is tested, not the GPUs
    return env


def fresh_venv(path):
    run([sys.executable, "-m", "venv", str(path)])
    return path / "bin" / "python"


def smoke(python, cwd, prefix=()):
    result = run(list(prefix) + [str(python), "-c", SMOKE], cwd=cwd, env=build_env())
    return json.loads(result.stdout.strip().splitlines()[-1])


def installed_tree(python):
    """{relative path: exported symbols (for a shared object) or None} of the installed package."""
    site = run([str(python), "-c", "import usbeam, pathlib; print(pathlib.Path(usbeam.__file__).parent)"],
               cwd="/", env=build_env()).stdout.strip()
    tree = {}
    for path in sorted(Path(site).rglob("*")):
        if path.is_dir() or "__pycache__" in path.parts:
            continue
        symbols = None
        if path.suffix == ".so":
            out = run(["nm", "-D", "--defined-only", str(path)]).stdout.split()
            symbols = sorted(word for word in out if word.startswith(("usbeam_", "PyInit_")))
        tree[str(path.relative_to(site))] = symbols
    return tree


@pytest.fixture(scope="module")
def routes(tmp_path_factory):
    work = tmp_path_factory.mktemp("install")
    clone = work / "clone"
    run(["git", "clone", "-q", str(ROOT), str(clone)])
    # route 1: pip install of a clone
    clone_python = fresh_venv(work / "venv-clone")
    run([str(clone_python), "-m", "pip", "install", "-q", str(clone)], env=build_env())
    # route 2: the sdist, then a wheel built from it (python -m build), then pip install
    dist = work / "dist"
    run([sys.executable, "-m", "build", "--outdir", str(dist), str(clone)], env=build_env())
    sdists, wheels = sorted(dist.glob("*.tar.gz")), sorted(dist.glob("*.whl"))
    assert len(sdists) == 1 and len(wheels) == 1, list(dist.iterdir())
    wheel_python = fresh_venv(work / "venv-wheel")
    run([str(wheel_python), "-m", "pip", "install", "-q", str(wheels[0])], env=build_env())
    outside = work / "elsewhere"
    outside.mkdir()
    return dict(work=work, sdist=sdists[0], wheel=wheels[0], clone_python=clone_python,
                wheel_python=wheel_python, outside=outside)


def test_sdist_holds_every_source_the_build_needs(routes):
    import tarfile

    with tarfile.open(routes["sdist"]) as tar:
        names = {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}
    tracked = run(["git", "ls-files", "csrc", "cuda", "usbeam"], cwd=ROOT).stdout.split()
    needed = {n for n in tracked if not n.endswith((".md",))} | {"LICENSE", "setup.py", "pyproject.toml"}
    assert sorted(needed - names) == []
    assert not any(n.endswith((".so", ".o")) for n in names)


def test_wheel_holds_every_subpackage_and_the_package_data(routes):
    with zipfile.ZipFile(routes["wheel"]) as whl:
        names = set(whl.namelist())
    for needed in ("usbeam/__init__.py", "usbeam/live/__init__.py", "usbeam/data/manifest.json",
                   "usbeam/libusbeam_client.so", "usbeam/include/usbeam_client.h"):
        assert needed in names, needed
    assert any(n.startswith("usbeam/_core.") and n.endswith(".so") for n in names)
    assert any(n.endswith("LICENSE") for n in names)
    if shutil.which("nvcc"):
        assert any(n.startswith("usbeam/_cuda.") and n.endswith(".so") for n in names)
        assert "usbeam/_cuda_build.py" in names


def test_clone_and_sdist_routes_install_the_same_package(routes):
    from_clone = installed_tree(routes["clone_python"])
    from_sdist = installed_tree(routes["wheel_python"])
    assert sorted(from_clone) == sorted(from_sdist)
    assert from_clone == from_sdist  # same exported symbols in every shared object


def test_core_module_links_no_cuda_library(routes):
    site = Path(run([str(routes["wheel_python"]), "-c", "import usbeam, pathlib; print(pathlib.Path(usbeam.__file__).parent)"],
                    cwd=routes["outside"]).stdout.strip())
    core = next(site.glob("_core*.so"))
    needed = run(["readelf", "-d", str(core)]).stdout
    assert "cublas" not in needed and "cudart" not in needed and "libcuda" not in needed
    for module in site.glob("_cuda*.so"):  # no RUNPATH into the build machine's toolkit
        dynamic = run(["readelf", "-d", str(module)]).stdout
        assert "/usr/local/cuda" not in dynamic and "cuda-1" not in dynamic, dynamic


@pytest.mark.parametrize("route", ["clone_python", "wheel_python"])
def test_installed_package_runs_das_and_bmode_outside_the_checkout(routes, route):
    report = smoke(routes[route], routes["outside"])
    assert not report["file"].startswith(str(ROOT)) and not report["live"].startswith(str(ROOT))
    z_mm, x_mm = report["peak_mm"]
    assert abs(z_mm - 15.0) <= 0.2 and abs(x_mm) <= 0.2  # the point target, within two pixels
    assert report["bmode"] == ["uint8", 255]
    assert "PWI_disk.mat" in report["manifest"]
    assert report["client_library"].startswith(str(Path(report["file"]).parent))
    if not report["build_info"]["cuda_module"]:
        assert "built without CUDA" in report["build_info"]["cuda_error"]


def hidden_toolkit_prefix():
    """A command prefix running its argument with the CUDA toolkit's folder hidden behind an empty
    tmpfs, or None when neither a mount namespace as root nor a user namespace is available."""
    nvcc = shutil.which("nvcc")
    toolkit = Path(nvcc).resolve().parent.parent if nvcc else Path("/usr/local/cuda").resolve()
    if not toolkit.is_dir() or not shutil.which("unshare"):
        return None, toolkit
    for flags in (["-m"], ["-rm"]):
        probe = subprocess.run(["unshare", *flags, "sh", "-c", f"mount -t tmpfs none {toolkit} && ls {toolkit}"],
                               capture_output=True, text=True)
        if probe.returncode == 0 and probe.stdout.strip() == "":
            script = f'mount -t tmpfs none {toolkit} && exec "$@"'
            return ["unshare", *flags, "sh", "-c", script, "hide-cuda"], toolkit
    return None, toolkit


def test_cpu_work_with_the_cuda_toolkit_hidden(routes):
    prefix, toolkit = hidden_toolkit_prefix()
    if prefix is None:
        pytest.skip(f"cannot hide {toolkit}: no mount namespace (unshare -m) or user namespace (unshare -rm) here")
    report = smoke(routes["wheel_python"], routes["outside"], prefix)
    z_mm, x_mm = report["peak_mm"]
    assert abs(z_mm - 15.0) <= 0.2 and abs(x_mm) <= 0.2
    info = report["build_info"]
    assert info["cuda"] is False and info["cuda_error"]
    assert "\n" not in info["cuda_error"]
    if info["cuda_module"]:  # the module is there but its cuBLAS is not: the reason says so
        assert "libcublas" in info["cuda_error"], info["cuda_error"]
    assert report["cuda_plan_error"] and info["cuda_error"] in report["cuda_plan_error"]


def test_cuda_extras_name_the_nvidia_cublas_wheels(routes):
    with zipfile.ZipFile(routes["wheel"]) as whl:
        metadata = whl.read(next(n for n in whl.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    for extra, requirement in (("cuda", "nvidia-cublas"), ("cuda13", "nvidia-cublas"), ("cuda12", "nvidia-cublas-cu12")):
        assert f"Provides-Extra: {extra}" in metadata
        assert any(line.startswith(f"Requires-Dist: {requirement}") and f'extra == "{extra}"' in line
                   for line in metadata.splitlines()), (extra, metadata)
    assert "License-Expression: BSD-3-Clause" in metadata and "License-File: LICENSE" in metadata


def test_build_without_nvcc_gives_a_cpu_package(routes):
    """python -m build on a machine without the CUDA toolkit (hidden as above): a wheel without
    usbeam._cuda whose package runs on the CPU and says it was built without CUDA."""
    prefix, toolkit = hidden_toolkit_prefix()
    if prefix is None:
        pytest.skip(f"cannot hide {toolkit}: no mount namespace (unshare -m) or user namespace (unshare -rm) here")
    dist = routes["work"] / "dist-without-nvcc"
    env = build_env()
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if not Path(p, "nvcc").exists())
    env.pop("CUDA_HOME", None), env.pop("CUDA_PATH", None)
    run(prefix + [sys.executable, "-m", "build", "--wheel", "--outdir", str(dist), str(routes["work"] / "clone")],
        env=env)
    wheel = next(dist.glob("*.whl"))
    with zipfile.ZipFile(wheel) as whl:
        names = whl.namelist()
    assert not any(n.startswith("usbeam/_cuda") for n in names)
    assert any(n.startswith("usbeam/_core.") for n in names) and "usbeam/live/__init__.py" in names
    python = fresh_venv(routes["work"] / "venv-without-nvcc")
    run([str(python), "-m", "pip", "install", "-q", str(wheel)], env=build_env())
    report = smoke(python, routes["outside"])
    assert report["build_info"]["cuda_module"] is False
    assert "built without CUDA" in report["build_info"]["cuda_error"]
    assert report["cuda_plan_error"] and "built without CUDA" in report["cuda_plan_error"]
