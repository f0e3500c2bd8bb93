"""Build and backend reporting, and the status table shared by C and Python."""
import pytest

import usbeam


def test_backends_report_the_machine():
    info = usbeam.build_info()
    assert set(info) >= {"cuda", "openmp", "cpu_threads", "version"}
    assert usbeam.backends()[0] == "cpu"
    assert ("cuda" in usbeam.backends()) == usbeam.cuda_available()
    if not info["cuda"]:
        assert not usbeam.cuda_available()
        assert usbeam.cuda_devices() == []


def test_cuda_backend_refused_cleanly_without_gpu():
    if usbeam.cuda_available():
        pytest.skip("a GPU is present")
    with pytest.raises(usbeam.UsbeamError, match="cuda"):
        usbeam.BModePlan((4, 4), 30, backend="cuda")


def test_status_table_is_the_single_source():
    table = usbeam._core.status_table()
    assert table[0] == ("USBEAM_OK", "success")
    names = [name for name, _ in table.values()]
    assert len(names) == len(set(names))
    assert all(message for _, message in table.values())


@pytest.mark.cuda
def test_device_query_on_gpu():
    devices = usbeam.cuda_devices()
    assert devices and devices[0]["total_memory_bytes"] > 0


def copy_package(tmp_path, keep):
    """A copy of the usbeam package in tmp_path holding the Python files and the extension
    modules whose name starts with one of `keep` (to import it as a machine without them would)."""
    import shutil
    from pathlib import Path

    source = Path(usbeam.__file__).parent
    target = tmp_path / "usbeam"
    shutil.copytree(source, target, ignore=lambda d, names: [
        n for n in names if n == "__pycache__" or (n.endswith(".so") and not n.startswith(keep))])
    return tmp_path


def run_in(root, code):
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True,
                            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(root), "HOME": str(root)})
    return result


def test_import_of_an_unbuilt_tree_says_how_to_build(tmp_path):
    root = copy_package(tmp_path, keep=())
    result = run_in(root, "import usbeam")
    assert result.returncode != 0
    assert "usbeam._core) is not built" in result.stderr and "make build" in result.stderr
    assert "circular import" not in result.stderr.splitlines()[-1]


CPU_WORK_WITHOUT_CUDA = """
import numpy as np, usbeam
info = usbeam.build_info()
assert info["cuda"] is False and not usbeam.cuda_available() and usbeam.backends() == ["cpu"], info
print("REASON", info["cuda_error"])
image = np.exp(1j * np.linspace(0, 3, 12, dtype=np.float32)).reshape(3, 4).astype(np.complex64)
assert usbeam.bmode(image, 30).dtype == np.uint8
for attempt in (lambda: usbeam.BModePlan((3, 4), 30, backend="cuda"),
                lambda: usbeam.device.from_numpy(np.zeros(4, np.float32))):
    try:
        attempt()
    except usbeam.UsbeamError as exc:
        assert info["cuda_error"] in str(exc), str(exc)
    else:
        raise AssertionError("a CUDA request succeeded without the CUDA backend")
"""


def test_without_the_cuda_module_the_cpu_works_and_cuda_says_why(tmp_path):
    root = copy_package(tmp_path, keep=("_core",))
    (root / "usbeam" / "_cuda_build.py").unlink(missing_ok=True)
    result = run_in(root, CPU_WORK_WITHOUT_CUDA)
    assert result.returncode == 0, result.stderr
    assert "REASON usbeam was built without CUDA" in result.stdout


def test_a_missing_cuda_library_leaves_the_cpu_working_and_is_named(tmp_path):
    root = copy_package(tmp_path, keep=("_core", "_cuda"))
    if not list((root / "usbeam").glob("_cuda*.so")) or usbeam.build_info()["cuda_emulated"]:
        pytest.skip("this build has no usbeam._cuda linked with cuBLAS")
    # the module is there but the library it needs is not to be found anywhere
    (root / "usbeam" / "_cuda_build.py").write_text(
        "CUDA_MAJOR = 99\nLIBRARIES = ('libcublas_absent.so.99',)\nARCHITECTURES = 'sm_90'\nEMULATED = False\n")
    result = run_in(root, CPU_WORK_WITHOUT_CUDA)
    assert result.returncode == 0, result.stderr
    reason = result.stdout.split("REASON ", 1)[1].strip()
    assert "libcublas_absent.so.99 not found" in reason and "usbeam[cuda]" in reason
