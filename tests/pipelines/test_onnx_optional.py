"""usbeam imports and runs without the optional onnx extra; usbeam.onnx then says which extra."""
import subprocess
import sys

CODE = """
import sys
sys.modules['onnx'] = None  # as if not installed
import usbeam
assert 'usbeam.onnx' not in sys.modules
try:
    import usbeam.onnx
except ImportError as exc:
    print(exc)
"""


def test_without_onnx_the_error_names_the_extra():
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, check=True).stdout
    assert "pip install usbeam[onnx]" in out
