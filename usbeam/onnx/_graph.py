"""Building blocks of usbeam's ONNX graphs: a small graph builder on the onnx helper API and
one function per stage (demodulation, the three DAS formulations, clutter filter, color and
power Doppler, B-mode).  Tensors: complex values travel as two real tensors (re, im); images
as (n_frames, n_points) until the final reshape to (n_frames, nz, nx).  See usbeam/onnx/__init__.py
for the formulations, their memory and where they stop scaling.
"""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 18
# the operators the "cnn" formulation may use: convolutions / matrix products, pointwise and
# reduction operators, and static layout operators (constant shapes and slice bounds)
CNN_OPERATORS = frozenset({
    "Conv", "ConvTranspose", "MatMul", "Gemm",
    "Add", "Sub", "Mul", "Div", "Neg", "Abs", "Sqrt", "Log", "Exp", "Atan", "Floor", "Max", "Min", "Clip",
    "Where", "Equal", "Less", "Greater", "And", "Not", "Cast",
    "ReduceSum", "ReduceMax", "ReduceMean",
    "Reshape", "Transpose", "Slice", "Concat", "Unsqueeze", "Squeeze", "Identity", "Constant",
})
# elements of a gathered intermediate per pixel block (gather / sparse-dense): ORT reuses the
# block's buffers for the next block, so this bounds the peak memory of DAS
BLOCK_ELEMENTS = 1 << 22

_ONNX_TYPES = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.float16): TensorProto.FLOAT16,
               np.dtype(np.int16): TensorProto.INT16, np.dtype(np.uint8): TensorProto.UINT8,
               np.dtype(np.int64): TensorProto.INT64}


def onnx_type(dtype):
    return _ONNX_TYPES[np.dtype(dtype)]


class GraphBuilder:
    """Nodes and initializers with unique names; `compute` is the dtype of the linear path."""

    def __init__(self, compute=np.float32, prefix=""):
        self.nodes, self.initializers, self._count = [], [], 0
        self.compute = np.dtype(compute)
        self.prefix = prefix  # keeps the names apart from another graph's (compose)

    def name(self, hint):
        self._count += 1
        return f"{self.prefix}{hint}_{self._count}"

    def const(self, hint, array, dtype=None):
        """An initializer; float arrays become `dtype` (default: the compute dtype)."""
        array = np.asarray(array)
        if array.dtype.kind == "f" or array.dtype.kind == "c":
            array = array.astype(dtype or self.compute)
        name = self.name(hint)
        self.initializers.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def shape(self, hint, dims):
        return self.const(hint, np.asarray(dims, np.int64))

    def op(self, op_type, inputs, hint=None, **attrs):
        out = self.name(hint or op_type.lower())
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], **attrs))
        return out

    def reshape(self, x, dims):
        return self.op("Reshape", [x, self.shape("shape", dims)])

    def slice(self, x, starts, ends, axes):
        return self.op("Slice", [x, self.shape("starts", starts), self.shape("ends", ends), self.shape("axes", axes)])

    def cast(self, x, dtype):
        return self.op("Cast", [x], to=onnx_type(dtype))

    def reduce(self, kind, x, axes, keepdims=0):
        return self.op(kind, [x, self.shape("axes", axes)], keepdims=keepdims)

    def model(self, inputs, outputs, name, doc):
        """inputs / outputs: (name, dtype, shape) triples."""
        graph = helper.make_graph(
            self.nodes, name,
            [helper.make_tensor_value_info(n, onnx_type(d), list(s)) for n, d, s in inputs],
            [helper.make_tensor_value_info(n, onnx_type(d), list(s)) for n, d, s in outputs],
            initializer=self.initializers)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                                  producer_name="usbeam", doc_string=doc)
        model.ir_version = 10
        return model


# ---- demodulation -----------------------------------------------------------------------

def demodulate(g, rf, rf_shape, demod, scale):
    """rf (F, T, E, N) int16/float32 -> (re, im), each (F, T * E * n_out) in the compute dtype:
    one MatMul per part with the demodulation matrix (the RF multiplied by `scale` first)."""
    f, t, e, n = rf_shape
    x = g.cast(rf, g.compute)
    if scale != 1.0:
        x = g.op("Mul", [x, g.const("rf_scale", np.array(scale))])
    lines = g.reshape(x, (f * t * e, n))
    n_out = demod.shape[1]
    re = g.op("MatMul", [lines, g.const("demod_re", demod.real)], "iq_re")
    im = g.op("MatMul", [lines, g.const("demod_im", demod.imag)], "iq_im")
    return g.reshape(re, (f, t * e * n_out)), g.reshape(im, (f, t * e * n_out))


def complex_product(g, ar, ai, br, bi):
    """(ar + j ai)(br + j bi) as (re, im), pointwise with broadcasting."""
    re = g.op("Sub", [g.op("Mul", [ar, br]), g.op("Mul", [ai, bi])])
    im = g.op("Add", [g.op("Mul", [ar, bi]), g.op("Mul", [ai, br])])
    return re, im


# ---- DAS --------------------------------------------------------------------------------

def das_gather(g, xr, xi, a, n_frames):
    """ELL (padded rows) formulation: per pixel block, Gather the K samples of every pixel,
    weight them and ReduceSum over K.  a: scipy CSR (P, C) complex."""
    p_total = a.shape[0]
    lengths = np.diff(a.indptr)
    k = max(int(lengths.max()), 1)
    block = max(1, min(p_total, BLOCK_ELEMENTS // (n_frames * k)))
    outs_r, outs_i = [], []
    for p0 in range(0, p_total, block):
        p1 = min(p_total, p0 + block)
        idx = np.zeros((p1 - p0, k), np.int64)
        w = np.zeros((p1 - p0, k), np.complex128)
        for i, p in enumerate(range(p0, p1)):
            s, e = a.indptr[p], a.indptr[p + 1]
            idx[i, :e - s] = a.indices[s:e]
            w[i, :e - s] = a.data[s:e]
        ind = g.const("das_index", idx)
        gr = g.op("Gather", [xr, ind], axis=1)
        gi = g.op("Gather", [xi, ind], axis=1)
        yr, yi = complex_product(g, gr, gi, g.const("das_w_re", w.real), g.const("das_w_im", w.imag))
        outs_r.append(g.reduce("ReduceSum", yr, [2]))
        outs_i.append(g.reduce("ReduceSum", yi, [2]))
    return _concat(g, outs_r, 1), _concat(g, outs_i, 1)


def das_sparse_dense(g, xr, xi, a, n_frames):
    """COO formulation (sparse x dense): per row block, Gather the non-zeros' columns of the
    (C, F) data, weight them and scatter-add them into their rows (ScatterND, reduction add)."""
    xr_t = g.op("Transpose", [xr], perm=[1, 0])
    xi_t = g.op("Transpose", [xi], perm=[1, 0])
    p_total = a.shape[0]
    rows = np.repeat(np.arange(p_total), np.diff(a.indptr))
    nnz_block = max(1, BLOCK_ELEMENTS // n_frames)
    outs_r, outs_i = [], []
    p0 = 0
    while p0 < p_total:  # whole rows per block, about nnz_block non-zeros each
        p1 = int(np.searchsorted(a.indptr, a.indptr[p0] + nnz_block, side="right")) - 1
        p1 = min(p_total, max(p1, p0 + 1))
        s, e = a.indptr[p0], a.indptr[p1]
        cols = g.const("das_columns", a.indices[s:e].astype(np.int64))
        local = g.const("das_rows", (rows[s:e] - p0).astype(np.int64).reshape(-1, 1))
        vr = g.const("das_v_re", a.data[s:e].real.reshape(-1, 1))
        vi = g.const("das_v_im", a.data[s:e].imag.reshape(-1, 1))
        gr = g.op("Gather", [xr_t, cols], axis=0)
        gi = g.op("Gather", [xi_t, cols], axis=0)
        ur, ui = complex_product(g, gr, gi, vr, vi)
        if g.compute != np.float32:  # ORT's CPU ScatterND adds float32 only (and sums are safer so)
            ur, ui = g.cast(ur, np.float32), g.cast(ui, np.float32)
        zeros = g.const("das_zeros", np.zeros((p1 - p0, n_frames)), np.float32)
        outs_r.append(g.op("ScatterND", [zeros, local, ur], reduction="add"))
        outs_i.append(g.op("ScatterND", [zeros, local, ui], reduction="add"))
        p0 = p1
    yr = g.op("Transpose", [_concat(g, outs_r, 0)], perm=[1, 0])
    yi = g.op("Transpose", [_concat(g, outs_i, 0)], perm=[1, 0])
    return yr, yi  # float32 (the scatter-add's dtype)


def cnn_tiles(a, rf_shape_iq, grid_shape, max_tiles=256):
    """The tiling of the "cnn" formulation with the least weight memory: tiles of tz rows x tx
    columns of the grid, each reading a static window [e0, e1) x [s0, s1) of every transmit's
    channels.  Returns (tz, tx, tiles, floats) with tiles a list of
    (z0, z1, x0, x1, e0, e1, s0, s1) and floats the weight count (re + im)."""
    n_tx, n_el, n_s = rf_shape_iq
    nz, nx = grid_shape
    rows = np.repeat(np.arange(a.shape[0]), np.diff(a.indptr))
    element = (a.indices // n_s) % n_el
    sample = a.indices % n_s
    big = np.iinfo(np.int64).max
    # per-pixel ranges (pixels without non-zeros keep an empty range)
    e_lo = np.full(a.shape[0], big); e_hi = np.full(a.shape[0], -1)
    s_lo = np.full(a.shape[0], big); s_hi = np.full(a.shape[0], -1)
    np.minimum.at(e_lo, rows, element); np.maximum.at(e_hi, rows, element)
    np.minimum.at(s_lo, rows, sample); np.maximum.at(s_hi, rows, sample)
    grids = [m.reshape(nz, nx) for m in (e_lo, e_hi, s_lo, s_hi)]
    best = None
    for tz in sorted({1, 2, 4, 8, 16, 32, max(1, -(-nz // 64)), max(1, -(-nz // 16))}):
        for tx in sorted({nx, -(-nx // 2), -(-nx // 4), -(-nx // 8), -(-nx // 16)}):
            n_tiles = -(-nz // tz) * -(-nx // tx)
            if n_tiles > max_tiles:
                continue
            tiles, floats = [], 0
            for z0 in range(0, nz, tz):
                for x0 in range(0, nx, tx):
                    z1, x1 = min(nz, z0 + tz), min(nx, x0 + tx)
                    el, eh, sl, sh = (m[z0:z1, x0:x1] for m in grids)
                    if eh.max() < 0:  # no pixel of the tile sees any sample
                        tiles.append((z0, z1, x0, x1, 0, 1, 0, 1))
                        floats += 2 * (z1 - z0) * (x1 - x0) * n_tx
                        continue
                    e0, e1, s0, s1 = int(el.min()), int(eh.max()) + 1, int(sl.min()), int(sh.max()) + 1
                    tiles.append((z0, z1, x0, x1, e0, e1, s0, s1))
                    floats += 2 * (z1 - z0) * (x1 - x0) * n_tx * (e1 - e0) * (s1 - s0)
            if best is None or floats < best[3]:
                best = (tz, tx, tiles, floats)
    return best


def das_cnn(g, xr, xi, a, n_frames, rf_shape_iq, grid_shape, tiling):
    """Gather-free formulation: per tile, a static Slice of the channels' sample window and
    two dense MatMuls per part with the tile's interpolation matrices (the fractional delays,
    taps, window and IQ rotation of the tile's pixels, zero elsewhere)."""
    n_tx, n_el, n_s = rf_shape_iq
    nz, nx = grid_shape
    _, tx, tiles, _ = tiling
    x4r = g.reshape(xr, (n_frames, n_tx, n_el, n_s))
    x4i = g.reshape(xi, (n_frames, n_tx, n_el, n_s))
    bands_r, bands_i, row_r, row_i, current = [], [], [], [], None
    for z0, z1, x0, x1, e0, e1, s0, s1 in tiles:
        if current is not None and z0 != current:
            bands_r.append(_concat(g, row_r, 2)); bands_i.append(_concat(g, row_i, 2))
            row_r, row_i = [], []
        current = z0
        pix = (np.arange(z0, z1)[:, None] * nx + np.arange(x0, x1)[None, :]).ravel()
        sub = a[pix].tocoo()
        t = sub.col // (n_el * n_s)
        e = (sub.col // n_s) % n_el - e0
        s = sub.col % n_s - s0
        we, ws = e1 - e0, s1 - s0
        dense = np.zeros((n_tx * we * ws, len(pix)), np.complex128)
        dense[(t * we + e) * ws + s, sub.row] = sub.data
        k = n_tx * we * ws
        cr = g.reshape(g.slice(x4r, [e0, s0], [e1, s1], [2, 3]), (n_frames, k))
        ci = g.reshape(g.slice(x4i, [e0, s0], [e1, s1], [2, 3]), (n_frames, k))
        mr, mi = g.const("das_tile_re", dense.real), g.const("das_tile_im", dense.imag)
        yr = g.op("Sub", [g.op("MatMul", [cr, mr]), g.op("MatMul", [ci, mi])])
        yi = g.op("Add", [g.op("MatMul", [cr, mi]), g.op("MatMul", [ci, mr])])
        row_r.append(g.reshape(yr, (n_frames, z1 - z0, x1 - x0)))
        row_i.append(g.reshape(yi, (n_frames, z1 - z0, x1 - x0)))
    bands_r.append(_concat(g, row_r, 2)); bands_i.append(_concat(g, row_i, 2))
    yr = g.reshape(_concat(g, bands_r, 1), (n_frames, nz * nx))
    yi = g.reshape(_concat(g, bands_i, 1), (n_frames, nz * nx))
    return yr, yi


def _concat(g, parts, axis):
    return parts[0] if len(parts) == 1 else g.op("Concat", parts, axis=axis)


# ---- Doppler and B-mode (float32) ----------------------------------------------------------

def clutter(g, yr, yi, h):
    """y = H x along slow time (frames first): one MatMul per part."""
    m = g.const("clutter", h, np.float32)
    return g.op("MatMul", [m, yr]), g.op("MatMul", [m, yi])


def atan2(g, y, x):
    """atan2(y, x) from Atan and selects (ONNX has no Atan2): atan(y/x) corrected by +-pi in
    the left half-plane, +-pi/2 on the imaginary axis, 0 at the origin (C's atan2 conventions:
    atan2(+0, -x) = pi)."""
    zero = g.const("zero", np.array(0.0), np.float32)
    one = g.const("one", np.array(1.0), np.float32)
    pi = g.const("pi", np.array(np.pi), np.float32)
    half_pi = g.const("half_pi", np.array(np.pi / 2), np.float32)
    x_zero = g.op("Equal", [x, zero])
    safe_x = g.op("Where", [x_zero, one, x])
    base = g.op("Atan", [g.op("Div", [y, safe_x])])
    y_neg = g.op("Less", [y, zero])
    shift = g.op("Where", [y_neg, g.op("Neg", [pi]), pi])
    left = g.op("Where", [g.op("Less", [x, zero]), g.op("Add", [base, shift]), base])
    axis = g.op("Where", [y_neg, g.op("Neg", [half_pi]),
                          g.op("Where", [g.op("Equal", [y, zero]), zero, half_pi])])
    return g.op("Where", [x_zero, axis, left])


def color_doppler(g, yr, yi, n_frames, lag, grid_shape, smoothing, nyquist):
    """Kasai lag-`lag` autocorrelation (PyMUST iq2doppler), optional separable smoothing of R
    and P: (velocity, variance), each (nz, nx) float32."""
    nz, nx = grid_shape
    ar, ai = g.slice(yr, [0], [n_frames - lag], [0]), g.slice(yi, [0], [n_frames - lag], [0])
    br, bi = g.slice(yr, [lag], [n_frames], [0]), g.slice(yi, [lag], [n_frames], [0])
    # x[t] conj(x[t + lag]) = (ar br + ai bi) + j (ai br - ar bi)
    r_re = g.reduce("ReduceSum", g.op("Add", [g.op("Mul", [ar, br]), g.op("Mul", [ai, bi])]), [0])
    r_im = g.reduce("ReduceSum", g.op("Sub", [g.op("Mul", [ai, br]), g.op("Mul", [ar, bi])]), [0])
    power = g.reduce("ReduceSum", g.op("Add", [g.op("Mul", [yr, yr]), g.op("Mul", [yi, yi])]), [0])
    maps = [g.reshape(m, (nz, nx)) for m in (r_re, r_im, power)]
    if smoothing is not None:
        sz, sx_t = g.const("smooth_z", smoothing[0], np.float32), g.const("smooth_x", smoothing[1].T, np.float32)
        maps = [g.op("MatMul", [g.op("MatMul", [sz, m]), sx_t]) for m in maps]
    r_re, r_im, power = maps
    velocity = g.op("Mul", [atan2(g, r_im, r_re), g.const("v_scale", np.array(-nyquist / np.pi), np.float32)])
    modulus = g.op("Sqrt", [g.op("Add", [g.op("Mul", [r_re, r_re]), g.op("Mul", [r_im, r_im])])])
    zero = g.const("zero", np.array(0.0), np.float32)
    positive = g.op("Greater", [power, zero])
    ratio = g.op("Where", [positive, g.op("Div", [modulus, g.op("Where", [positive, power,
                                                                          g.const("one", np.array(1.0), np.float32)])]),
                           g.const("one", np.array(1.0), np.float32)])
    coefficient = 2.0 * (nyquist / np.pi) ** 2
    variance = g.op("Mul", [g.op("Sub", [g.const("one", np.array(1.0), np.float32), ratio]),
                            g.const("var_scale", np.array(coefficient), np.float32)])
    return velocity, variance


def log10(g, x):
    return g.op("Mul", [g.op("Log", [x]), g.const("inv_ln10", np.array(1.0 / np.log(10.0)), np.float32)])


def power_doppler(g, yr, yi, n_frames, grid_shape, db, reference, noise_floor):
    """Mean |x|^2 over the ensemble, raised to the noise floor, optionally dB re its max (or a
    fixed reference): (nz, nx) float32."""
    nz, nx = grid_shape
    power = g.reduce("ReduceSum", g.op("Add", [g.op("Mul", [yr, yr]), g.op("Mul", [yi, yi])]), [0])
    power = g.op("Mul", [power, g.const("inv_frames", np.array(1.0 / n_frames), np.float32)])
    if noise_floor > 0:
        power = g.op("Max", [power, g.const("noise_floor", np.array(noise_floor), np.float32)])
    power = g.reshape(power, (nz, nx))
    if not db:
        return power
    ref = g.const("reference", np.array(reference), np.float32) if reference > 0 else g.reduce(
        "ReduceMax", power, [0, 1], keepdims=1)
    ref = g.op("Max", [ref, g.const("tiny", np.array(np.finfo(np.float32).tiny), np.float32)])
    return g.op("Mul", [g.op("Sub", [log10(g, power), log10(g, ref)]), g.const("ten", np.array(10.0), np.float32)])


def bmode(g, yr, yi, n_frames, grid_shape, dynamic_range, output, normalize):
    """Log compression (PyMUST bmode): uint8 grey levels floor(255 + (2550/DR) log10(p/ref))
    clipped to [0, 255], or dB 10 log10(p/ref) floored at -DR; ref the max power over the whole
    ensemble ('global'), each frame ('frame') or a fixed amplitude's square."""
    nz, nx = grid_shape
    power = g.op("Add", [g.op("Mul", [yr, yr]), g.op("Mul", [yi, yi])])  # (F, P)
    if isinstance(normalize, str):
        ref = g.reduce("ReduceMax", power, [0, 1] if normalize == "global" else [1], keepdims=1)
    else:
        ref = g.const("reference", np.array(float(normalize) ** 2), np.float32)
    ref = g.op("Max", [ref, g.const("tiny", np.array(np.finfo(np.float32).tiny), np.float32)])
    ratio = g.op("Div", [power, ref])
    if output == "uint8":
        level = g.op("Add", [g.const("top", np.array(255.0), np.float32),
                             g.op("Mul", [log10(g, ratio), g.const("slope", np.array(2550.0 / dynamic_range), np.float32)])])
        level = g.op("Floor", [g.op("Clip", [level, g.const("lo", np.array(0.0), np.float32),
                                              g.const("hi", np.array(255.0), np.float32)])])
        image = g.cast(level, np.uint8)
    else:
        db = g.op("Mul", [log10(g, ratio), g.const("ten", np.array(10.0), np.float32)])
        image = g.op("Max", [db, g.const("floor", np.array(-dynamic_range), np.float32)])
    return g.reshape(image, (n_frames, nz, nx))


def check(model):
    """onnx.checker (full check, with shape inference)."""
    onnx.checker.check_model(model, full_check=True)
    return model
