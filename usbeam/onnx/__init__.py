"""usbeam pipelines as ONNX graphs (the formulations of the seed-002 study), and one graph from
RF to a user's model output.

``export(pipeline, path, formulation=..., precision=...)`` writes the graph of

* ``usbeam.Pipeline`` (RF2IQ_DAS_BMODE): raw RF -> uint8 or dB B-mode ``(n_frames, nz, nx)``;
* ``usbeam.DopplerPipeline`` with outputs ('color',) (RF2IQ_DAS_DOPPLER: lag-k autocorrelation
  with spatial smoothing) -> ``velocity``, ``variance`` ``(nz, nx)``; with ('power',)
  (RF2IQ_DAS_POWERDOPPLER: power accumulation, log scaling) -> ``power``; or both.

The input is one RF ensemble per forward pass, ``rf`` of the pipeline's fixed shape
``(n_frames, n_transmits, n_elements, n_samples)`` and dtype (int16 as scanners deliver it, or
float32).  Opset 18, fixed shapes, ``onnx.checker`` clean (full check), every operator built
from usbeam's own plans (``usbeam/onnx/_operators.py``: demodulation matrix, DAS operator,
clutter projection, smoothing windows) and stored as initializers; the graph computes the C
backend's math.  Stages, every formulation:

* demodulation: rf2iq is linear in each RF line (mixing, zero-phase filtfilt or FIR,
  decimation), so it is one MatMul per part with its (n_samples, n_out) matrix (re, im):
  8 n_samples n_out bytes in float32 (PWI_disk: 0.9 MB);
* DAS: see the formulations below;
* clutter filter 'mean' / 'poly': a (n_frames, n_frames) MatMul along slow time;
* color Doppler: lag products, ReduceSum over slow time, the smoothing window as two small
  MatMuls (mirrored edges), ``atan2`` from Atan and selects (ONNX has none);
* power Doppler and B-mode: ReduceSum / ReduceMax, Log, Clip, Floor, Cast.

Formulations of DAS (``formulation=``), each with n_points P, frames F, non-zeros nnz of the
DAS operator (P x transmits x aperture x interpolation taps) and columns C = T E n_iq:

* ``"gather"`` (dynamic indexing): the operator as padded rows (ELL: K = the widest row);
  per block of pixels, ``Gather`` of K samples per pixel, weights, ``ReduceSum``.  Weights
  P K (index int64 + two float) ~ 16 P K bytes; the gathered block is bounded
  (``_graph.BLOCK_ELEMENTS`` = 4 M values per tensor) and reused from block to block.
* ``"sparse-dense"`` (sparse matrix x dense data): the operator as COO; per block of rows,
  ``Gather`` of the non-zeros' columns of the (C, F) data, weights, ``ScatterND`` with
  reduction 'add' into the rows: ~24 nnz bytes of initializers (row and column int64, two
  float), the same per-block bound.
* ``"cnn"`` (no dynamic indexing: only Conv/ConvTranspose/MatMul/Gemm, pointwise and
  reduction operators, plus static layout operators - Reshape, Transpose, Concat and Slice
  with constant bounds; ``_graph.CNN_OPERATORS`` - so it runs unmodified on accelerators
  without gathers).  The fractional delays become fixed matrix products: the grid is cut
  into tiles of tz rows x tx columns; the pixels of one tile read, from every transmit, only
  a static window of elements [e0, e1) and samples [s0, s1) (the union of their apertures
  and of their delays +- the interpolation taps), which a ``Slice`` with constant bounds
  cuts out; the tile's pixels are then one dense MatMul per part with the tile's
  interpolation matrix (T (e1 - e0)(s1 - s0)) x (tz tx), holding the taps, window and IQ
  rotation of each pixel at its own rows and zeros elsewhere.  The tiling is chosen to
  minimise the weights (``_graph.cnn_tiles``, at most 256 tiles).
  Memory: 2 x 4 bytes (fp32) per pixel x transmit x window, i.e. ~8 P T W E_t, with W the
  sample span of a tile (its depth extent in samples plus the spread of delays across the
  aperture, (sqrt(z^2 + a^2) - z) fs / c for a half-aperture a) and E_t its element span.
  Where it stops scaling: the weights grow with pixels x channels x window, not with the
  non-zeros: the zeros of each tile's matrix are stored and multiplied (the density is taps /
  W per channel).  A 48 x 40 grid of a 32-element probe with 3 steered plane waves (tests)
  takes 32 MiB (8 MiB for 'sparse-dense'); PWI_disk's full 251 x 251 grid (128 elements,
  F/# 1.12, 0.1 mm pixels, fs = 6.7 MHz, 334 samples) takes 584 MiB against 185 MiB for
  'sparse-dense' (8.1 M non-zeros x 24 bytes): 3.2x the sparse operator,
  though ONNX Runtime runs those dense MatMuls far faster than the gathers on a CPU
  (benchmarks/RESULTS.md).  ``cnn_weight_bytes`` computes it before anything is built; above
  ``max_weight_bytes`` (default 1 GiB, a parameter) the export refuses with a MemoryError
  naming the formulation, and above 2 GB protobuf needs the external-data format (used
  automatically when saving).
  Finer grids, more elements or steered / diverging transmits (wider windows) grow it
  further; 'sparse-dense' or 'gather' are then the formulations to use, or a device with
  gathers.

Precision (``precision=``): "fp32", or "fp16": the linear path (demodulation matrix, DAS
weights, their inputs and products) in float16, the RF scaled by 2^-15 first (int16 input)
so sums of up to ~2000 terms stay far below float16's 65504; the clutter filter, powers,
logs and angles in float32 (float16 would overflow the power sums and step the dB scale).
Outputs keep their dtypes.  Bounds: ``tests/tolerances.py`` (onnx_fp16_*).

Options no graph can express raise ValueError naming them: clutter 'svd' (its subspace is
computed from each ensemble's data: no fixed operator, and ONNX has no eigen-decomposition),
clutter 'iir' (its state carries from one ensemble to the next; a stateless graph would
equal only the first call after a reset), color Doppler axial_correction.

``compose(usbeam_graph, model, ...)`` joins an exported B-mode graph to a user's ONNX model,
with ``usbeam.ai.model_input``'s pre-processing in the graph (bilinear resize as two fixed
matrix products, the affine normalisation, grey -> 3 channels, NCHW / NHWC, FP16), so one
engine runs RF -> the model's outputs.

Needs the ``onnx`` extra (``pip install usbeam[onnx]``: onnx; onnxruntime to run the graphs)
and scipy (the ``io`` extra) for the DAS operator.
"""
try:
    import onnx  # noqa: F401
except ImportError as exc:  # pragma: no cover - the extra is optional
    raise ImportError("usbeam.onnx needs the 'onnx' package: pip install usbeam[onnx]") from exc

from ._compose import compose
from ._export import FORMULATIONS, PRECISIONS, cnn_weight_bytes, export

__all__ = ["export", "compose", "cnn_weight_bytes", "FORMULATIONS", "PRECISIONS"]
