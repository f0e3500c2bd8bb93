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
