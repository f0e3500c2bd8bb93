"""Hadamard reference in NumPy (never imports usbeam): the matrices from their textbook
constructions and the decode (1/n) H^T x in float64 / exact Python integers."""
import numpy as np


def quadratic_character(a, q):
    a %= q
    if a == 0:
        return 0
    return 1 if pow(a, (q - 1) // 2, q) == 1 else -1  # Euler's criterion


def paley_one(q):
    """Paley I matrix of order q + 1 for a prime q = 3 mod 4: I + [[0, 1^T], [-1, Q]]."""
    n = q + 1
    core = np.zeros((n, n), dtype=np.int64)
    core[0, 1:] = 1
    core[1:, 0] = -1
    for i in range(q):
        for j in range(q):
            core[1 + i, 1 + j] = quadratic_character(j - i, q)
    return np.eye(n, dtype=np.int64) + core


def sylvester(k):
    s = np.ones((1, 1), dtype=np.int64)
    for _ in range(k):
        s = np.block([[s, s], [s, -s]])
    return s


def hadamard(n):
    """S_{2^k} (x) B_m, n = 2^k m, m in {1, 12, 20}: Kronecker product of the two."""
    m, k = n, 0
    while m % 2 == 0 and m not in (12, 20):
        m //= 2
        k += 1
    base = {1: np.ones((1, 1), dtype=np.int64), 12: paley_one(11), 20: paley_one(19)}[m]
    return np.kron(sylvester(k), base)


def encode(x, matrix, axis=0):
    """y[t] = sum_e H[t, e] x[e] along axis, in int64 (exact)."""
    moved = np.moveaxis(np.asarray(x, dtype=np.int64), axis, -1)
    return np.moveaxis(moved @ np.asarray(matrix, dtype=np.int64).T, -1, axis)


def decode_sum(y, matrix, axis=0):
    """H^T y along axis: exact integers for integer y, float64 otherwise."""
    y = np.asarray(y)
    dtype = np.int64 if y.dtype.kind in "iu" else np.float64
    moved = np.moveaxis(y.astype(dtype), axis, -1)
    return np.moveaxis(moved @ np.asarray(matrix, dtype=dtype), -1, axis)


def decode(y, matrix, axis=0):
    """(1/n) H^T y in float64."""
    return decode_sum(y, matrix, axis).astype(np.float64) / np.asarray(matrix).shape[0]


def round_half_away(sum_, n):
    """Integer sum / n rounded to nearest, ties away from zero (exact integer arithmetic)."""
    s = np.asarray(sum_, dtype=np.int64)
    q = (np.abs(s) + n // 2) // n
    return np.sign(s) * q
