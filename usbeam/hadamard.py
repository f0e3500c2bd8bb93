"""Hadamard aperture encoding: the matrices and decoding along the transmit axis
(C kernel: csrc/acquire/hadamard.c).

``hadamard(n)`` is the contract between scanner and decoder.  For n = 2^k * m, m in
{1, 12, 20}, n <= 256, it is ``S (x) B``: S the natural-order Sylvester matrix of order 2^k
(``S_2p = [[S_p, S_p], [S_p, -S_p]]``) and B = [1] or the Paley I matrix of q = m - 1
(11 or 19): ``B = I + [[0, 1...1], [-1...-1, Q]]``, ``Q[i, j] = chi(j - i)`` with chi the
quadratic character mod q.  Entries are +1/-1 (int8), ``H @ H.T == n * I``, row t is the
polarity pattern of transmit t over the elements.

Decoding: ``out[e] = (1/n) * sum_t H[t, e] * data[t]`` along ``axis``.  Integer input (int16,
int32) is accumulated exactly in integers, then scaled once; float32 output is the correctly
rounded quotient, int32 output the quotient rounded to nearest (exact for encoded integer
data).  ``algorithm='direct'`` is the dense product (n^2 per sample); ``'fast'`` factorises
H into butterflies over the Sylvester factor (the fast Walsh-Hadamard transform, n log2 n
for n = 2^k).

``backend='cuda'`` (cuda/hadamard.cu) decodes device arrays with the same results: 'direct'
and 'fast' bit for bit, and a third path, ``algorithm='gemm'``: cuBLAS SGEMM on a float32
copy, in full FP32 (never TF32), exact for int16 data, refused for int32.
"""
import numpy as np

from . import _core, _validate
from ._backend import check_backend
from .device import PlanRunner

MAX_ORDER = 256
_IN_DTYPES = (np.dtype(np.int16), np.dtype(np.int32), np.dtype(np.float32), np.dtype(np.complex64))


def hadamard_orders():
    """Every order usbeam has a matrix for, ascending."""
    return [n for n in range(1, MAX_ORDER + 1) if _supported(n)]


def _supported(n):
    while n % 2 == 0 and n not in (12, 20):
        n //= 2
    return n in (1, 12, 20)


def hadamard(n):
    """usbeam's Hadamard matrix of order n as int8 (n, n); row = transmit, column = element.

    Raises ValueError for an order without a matrix (orders are 2^k, 12*2^k and 20*2^k up
    to 256).
    """
    n = _validate.integer("order", n, minimum=1)
    if n > MAX_ORDER or not _supported(n):
        raise ValueError(f"order {n} has no Hadamard matrix in usbeam "
                         f"(orders are 2^k, 12*2^k and 20*2^k up to {MAX_ORDER})")
    return _core.hadamard_matrix(n)


def _matrix_argument(order_or_matrix):
    """(order, user matrix as C-contiguous int8 or None)."""
    if isinstance(order_or_matrix, (int, np.integer)) and not isinstance(order_or_matrix, (bool, np.bool_)):
        order = int(order_or_matrix)
        hadamard(order)  # validates the order
        return order, None
    matrix = _validate.ndarray("order_or_matrix", order_or_matrix)
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1] or matrix.shape[0] == 0:
        raise ValueError(f"order_or_matrix must be an order or a square matrix (got shape {matrix.shape})")
    if matrix.shape[0] > MAX_ORDER:
        raise ValueError(f"order_or_matrix: order must be <= {MAX_ORDER} (got {matrix.shape[0]})")
    if not np.all((matrix == 1) | (matrix == -1)):
        raise ValueError("order_or_matrix: matrix entries must be +1 or -1")
    return matrix.shape[0], np.ascontiguousarray(matrix, dtype=np.int8)


class HadamardDecodePlan:
    """Decode Hadamard-encoded data of a fixed shape along one (transmit) axis.

    Parameters
    ----------
    shape : tuple
        Shape of the encoded data; ``shape[axis]`` must equal the order.
    order_or_matrix : int or (n, n) array
        An order (usbeam's matrix, ``hadamard(n)``) or a +-1 Hadamard matrix of your own.
    axis : int
        The transmit axis (default 0 for (n_transmits, n_channels, n_samples) data).
    dtype : int16, int32, float32 or complex64
        Input dtype; integer input is decoded without a float copy, exactly.  complex64
        (IQ) is decoded as its interleaved float32 (re, im) pairs, without a copy.
    output : 'float32' or 'int32'
        int32 only for integer input; complex64 input gives complex64.
    algorithm : 'direct', 'fast' or 'gemm'
        'fast' only for usbeam's own matrices; 'gemm' (cuBLAS, FP32) only with backend='cuda'
        and int16 or float32 data.
    transmit_last : bool
        False: output shape = input shape.  True: the decoded axis is moved last, so the
        n decoded values of one sample are contiguous (``np.moveaxis(out, axis, -1)``).
    backend : 'cpu' or 'cuda'
        'cuda' takes and returns device arrays (a NumPy input is copied in and the result
        copied back, unless ``strict=True``, which refuses host arrays); no complex64.
    """

    def __init__(self, shape, order_or_matrix, *, axis=0, dtype=np.int16, output="float32",
                 algorithm="direct", transmit_last=False, backend="cpu", strict=False):
        self.shape = _validate.shape("shape", shape, minimum=1)
        if not self.shape:
            raise ValueError("data must have at least one dimension")
        self.axis = _validate.integer("axis", axis, minimum=-len(self.shape), maximum=len(self.shape) - 1)
        self.axis %= len(self.shape)
        self.order, matrix = _matrix_argument(order_or_matrix)
        if self.shape[self.axis] != self.order:
            raise ValueError(f"data has {self.shape[self.axis]} transmits along axis {self.axis}, "
                             f"which does not match the Hadamard order {self.order}")
        self.dtype = np.dtype(dtype)
        if self.dtype not in _IN_DTYPES:
            raise TypeError(f"data dtype must be int16, int32, float32 or complex64 (got {self.dtype})")
        self.output = _validate.choice("output", output, ("float32", "int32"))
        if self.output == "int32" and self.dtype.kind in "fc":
            raise TypeError(f"output='int32' needs integer data (got {self.dtype})")
        self.complex = self.dtype.kind == "c"
        if self.complex and transmit_last:
            raise ValueError("transmit_last is not available for complex64 data (its (re, im) pairs stay last)")
        self.algorithm = _validate.choice("algorithm", algorithm, ("direct", "fast", "gemm"))
        self.transmit_last = bool(transmit_last)
        backend = backend.lower() if isinstance(backend, str) else backend  # case-insensitive options
        if backend == "cuda" and self.complex:
            raise TypeError("data: complex64 is decoded on backend='cpu' only (decode its float32 view on CUDA)")
        if self.algorithm == "gemm" and backend != "cuda":
            raise ValueError("algorithm='gemm' (cuBLAS) needs backend='cuda'")
        if self.algorithm == "gemm" and self.dtype == np.int32:
            raise TypeError("algorithm='gemm' takes int16 or float32 data (int32 is inexact in float32)")
        self.backend = check_backend(backend)
        self.out_dtype = np.dtype(np.complex64 if self.complex else self.output)
        out_shape = list(self.shape)
        if self.transmit_last:
            out_shape.append(out_shape.pop(self.axis))
        self.out_shape = tuple(out_shape)
        _validate.check_allocation("out", self.out_shape, self.out_dtype.itemsize)
        n_outer = int(np.prod(self.shape[:self.axis], dtype=np.int64))
        n_inner = int(np.prod(self.shape[self.axis + 1:], dtype=np.int64))
        # complex64 is float32 data with a trailing (re, im) axis, part of the inner block
        self._float_shape = self.shape + (2,) if self.complex else None
        kernel_dtype = "float32" if self.complex else self.dtype.name
        self._plan = _core.hadamard_plan(self.order, n_outer, n_inner * (2 if self.complex else 1), kernel_dtype,
                                         self.output, self.algorithm, int(self.transmit_last), matrix, self.backend)
        self.cuda = None
        if self.backend == "cuda":
            self._runner = PlanRunner(_core.hadamard_cuda_exec(self._plan), strict)
            self.cuda = self._runner.execution  # stream, stage_times(), set_stream()

    def __repr__(self):
        from ._repr import attrs_repr

        return attrs_repr(self, ('shape', 'axis', 'dtype', 'algorithm', 'out_shape', 'backend'))

    def __call__(self, data, out=None):
        if self.cuda is not None:
            return self._runner(lambda d, o: _core.hadamard_execute(self._plan, d, o), "data", data, self.shape,
                                self.dtype, self._host_data, out, self.out_shape, self.out_dtype, no_overlap=True)
        given, data = data, self._host_data(data)
        if out is None:
            out = np.empty(self.out_shape, self.out_dtype)
        else:
            _validate.out_array("out", out, self.out_shape, self.out_dtype)
            _validate.no_overlap("out", out, "data", given, data)
        if self.complex:
            _core.hadamard_execute(self._plan, data.view(np.float32).reshape(self._float_shape),
                                   out.view(np.float32).reshape(self._float_shape))
        else:
            _core.hadamard_execute(self._plan, data, out)
        return out

    def _host_data(self, data):
        data = _validate.ndarray("data", data)
        if data.dtype.newbyteorder("=") != self.dtype:  # the other byte order is converted (README Errors)
            raise TypeError(f"data must have dtype {self.dtype} (got {data.dtype})")
        if data.shape != self.shape:
            raise ValueError(f"data must have shape {self.shape} (got {data.shape})")
        return np.ascontiguousarray(data, dtype=self.dtype)


def hadamard_decode(data, order_or_matrix, axis=0, *, output="float32", algorithm="direct",
                    transmit_last=False, out=None):
    """Decode Hadamard-encoded ``data`` along ``axis``: ``(1/n) H^T data``.

    ``order_or_matrix`` is an order (usbeam's matrix ``hadamard(n)``) or a +-1 matrix.
    int16/int32 data is decoded exactly without a float copy; complex64 (IQ) data gives
    complex64; see HadamardDecodePlan.
    """
    data = _validate.ndarray("data", data)
    if data.ndim == 0 or data.size == 0:
        raise ValueError(f"data must be a non-empty array (got shape {data.shape})")
    if data.dtype.newbyteorder("=") not in _IN_DTYPES:
        raise TypeError(f"data dtype must be int16, int32, float32 or complex64 (got {data.dtype})")
    native = data.dtype.newbyteorder("=")
    plan = HadamardDecodePlan(data.shape, order_or_matrix, axis=axis, dtype=native, output=output,
                              algorithm=algorithm, transmit_last=transmit_last)
    return plan(data, out=out)
