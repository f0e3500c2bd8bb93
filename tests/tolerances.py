"""The one table of numerical tolerances, with the reason for each entry.

Every comparison of usbeam against a reference uses an entry from here.  Loosening an
entry needs a recorded reason in this file.
"""

TOLERANCES = {

    # ---- adaptive beamformers (tests/beamform/test_adaptive.py) ----
    # C (float32 table weights, double per-point math) vs the float64 reference, relative L2:
    # the delayed samples carry DAS's float32 weight rounding (~6e-8 relative per term); the
    # nonlinear steps (square / p-th roots, products) keep that relative size, and MV's solve
    # multiplies it by at most the loaded covariance's condition number (diagonal loading
    # >= 0.01).  Measured <= 5.2e-8 over every method and dtype of test_adaptive.py; 1e-6
    # leaves room for worse-conditioned MV points.
    "adaptive_rel_l2": 1e-6,
    # CUDA twin vs the CPU backend, relative L2: the same per-point double code
    # (adaptive_math.h) on the same float32 table; nvcc may contract into FMAs and the device's
    # pow/sqrt/sin/cos may differ from glibc's in the last bits, ~1e-15 relative before the
    # float32 cast of the output (2^-24 ~ 6e-8).  Not yet measured on a GPU; on the emulator
    # (g++, no FMA) the outputs are identical.
    "adaptive_cuda_rel_l2": 1e-6,
    # usbeam's adaptive beamformers vs ultraspy 1.2.7's CPU kernels (numba, fastmath), relative
    # L2 on the same data and geometry: usbeam's float32 table weights (~6e-8) and ultraspy's
    # fastmath reassociation in double; 1e-5 leaves room for MV's solve (its own Cholesky).
    "adaptive_ultraspy_rel": 1e-5,
    # UFF read: usbeam's DAS of the loaded recording vs a float64 DAS from USTB's own transmit
    # formulas on the file's clock (tests/acquire/test_uff.py), relative L2: DAS's float32 weights
    # (das_rel_l2) plus the clock shift folded into t0 in double (< 1e-15 s).
    "uff_das_rel_l2": 1e-5,
    # ---- usbeam.metrics (tests/bmode/test_metrics.py) ----
    # Hand-computed cases (constant regions, a few listed values, piecewise-linear profiles
    # whose half-maximum crossings lie on linear segments): exact up to double rounding.
    "metrics_exact_abs": 1e-12,
    # Synthetic images with a known answer drawn from a fixed seed: speckle SNR of 200 000
    # Rayleigh samples (standard error of mu/sigma ~ 0.0027, 5 sigma), gCNR of two Gaussian
    # populations of 200 000 samples against 1 - 2 Phi(-d / 2 sigma) (sampling ~0.002 plus the
    # 256-bin histogram's discretisation of min(p, q) ~ 0.005 measured at this spacing).
    "metrics_speckle_snr_abs": 0.015,
    "metrics_gcnr_abs": 0.01,
    # FWHM of a sampled Gaussian point spread: the half-maximum crossing is interpolated
    # linearly between samples 1/8 of sigma apart, which misplaces it by at most
    # h^2/8 |f''|/|f'| ~ 1.3e-3 sigma per side; 3e-3 sigma on the width.
    "metrics_fwhm_gaussian_rel": 3e-3 / 2.3548,
    # ---- usbeam.batch ----
    # Chunked Doppler with the streaming 'iir' clutter filter vs the whole record through one
    # pipeline: chunks after the first restart the filter (projection initialisation) a
    # warm-up of W frames before their first ensemble, chosen so that the largest pole radius
    # r of the filter gives r^W <= 1e-7 (usbeam/batch/recipes.py).  What is left is the
    # filter's memory of frames before the warm-up, scaled by r^W, relative to the clutter
    # (40 dB above the blood in tests/helpers/batch_data.py): ~1e-5 of the blood signal,
    # ~1e-5 dB of power; measured 1.9e-6 dB and 1.9e-7 of the Nyquist velocity (tests/batch,
    # the float32 rounding of the outputs); 50x margin.
    "batch_iir_power_db_abs": 1e-4,
    "batch_iir_velocity_nyquist_fraction": 1e-5,

    # B-mode uint8: the C kernel computes the dB value in double from float32 IQ; the
    # float64 reference uses float64 |IQ|.  A level within ~1e-6 of an integer boundary may
    # truncate to the neighbouring grey level, so allow 1 grey level on a tiny fraction.
    "bmode_uint8_max_levels": 1,
    "bmode_uint8_fraction_off": 1e-3,
    # B-mode dB: float32 input, log10 computed in double; relative error of |IQ| in float32
    # is ~1e-7, i.e. ~1e-6 dB; 1e-4 dB leaves room for the float32 cast of the output.
    "bmode_db_abs": 1e-4,
    # Scan conversion (float32) against scipy.ndimage.map_coordinates(order=1) in float64 at
    # the same (u, v): the plan stores the fractions in float32 (rounding 2^-25 relative) and
    # mixes in float32 (a few roundings of 2^-24), so |error| <= ~1e-6 of the image's largest
    # magnitude; 1e-5 leaves room.  uint8: rounding half up of the same mix, so a level may
    # differ by 1 where the exact value lies within ~1e-4 of a half level.
    "scan_convert_rel": 1e-5,
    "scan_convert_uint8_max_levels": 1,
    "scan_convert_uint8_fraction_off": 1e-3,
    # Envelope (csrc/bmode/envelope.c) vs the float64 DFT reference and scipy.signal.hilbert,
    # max|got - want| / max|want|: the kernel is the exact circulant form of the same operator,
    # summed in double from float32 input, so only the float32 rounding of the input (already
    # the reference's input) and of the output (2^-24 ~ 6e-8) remain; measured ~4e-8.  No edge
    # allowance: the method has no FIR transient (the whole line is one DFT period, as scipy).
    "envelope_rel": 1e-6,
    # A Gaussian-windowed cosine (sigma 20 samples, 0.1 cycle/sample): its analytic envelope is
    # the Gaussian up to the negative-frequency tail of the spectrum, exp(-(f/sigma_f)^2 / 2)
    # ~ 1e-34 here, and the window's values at the ends of the line (13 sigma: ~1e-37); what is
    # left is the float32 rounding of input and output.
    "envelope_gaussian_rel": 1e-6,
    # B-mode of real RF (data='rf': analytic signal, then the dB compression) vs the dB of the
    # float64 reference envelope: the analytic signal is float32 (~1e-7 relative, ~1e-6 dB)
    # before the compression's own float32 cast; as bmode_db_abs.
    "envelope_bmode_db_abs": 1e-4,
    # bmode(das(rf)) vs bmode(das(rf2iq(rf))) on the project's simulated cyst phantom (usbeam.demo,
    # 3 plane waves, 5 MHz, fs 20 MHz, dB images over 40 dB): the two are different estimators of
    # the same echo amplitude (the RF path keeps the whole band and its noise, rf2iq low-passes it
    # and beamforms the baseband), so speckle valleys and the cyst's noise floor differ by a few
    # dB while the structure agrees; measured correlation 0.919, median |difference| 0.21 dB.
    "envelope_rf_vs_iq_bmode_rho": 0.9,
    "envelope_rf_vs_iq_median_db": 0.5,
    # CUDA envelope vs the CPU backend, max|gpu - cpu| / max|cpu|: the same double products of
    # the same double kernel table, summed in the same order (over the line, sample by sample),
    # so the only difference is FMA contraction on the device (~1e-16 relative before the
    # float32 cast).  Measured on the CUDA emulator only (no GPU in the session that wrote it).
    "envelope_cuda_rel": 1e-6,

    # ---- family cuda ----
    # CUDA B-mode vs the CPU backend.  uint8: no entry, the levels are compared for equality:
    # both backends compare the exact double |IQ|^2 with the same thresholds (reference power x
    # host-computed factors, cuda/bmode.cu), so no log10 rounding decides a level.  dB: CUDA's
    # log10 and glibc's may differ in the last ulp, ~1e-15 dB before the float32 cast.
    # Not yet measured on a GPU (none in the sessions that wrote them).
    "bmode_cuda_db_abs": 1e-5,
    # CUDA rf2iq vs the CPU backend, max|gpu - cpu| / max|cpu|: the Butterworth recursion runs
    # the same double operations (no FMA) and should agree to float32 rounding of the output;
    # the FIR sums run in another order than the CPU's vectorised sums (double, ~1e-16
    # relative), so outputs can land on the neighbouring float32: 2^-24 ~ 6e-8 relative.
    # Not yet measured on a GPU; 1e-6 as for the CPU against the reference.
    "rf2iq_cuda_rel": 1e-6,
    # CUDA rf2iq Butterworth through the chunked scan (cuda/rf2iq.cu) vs the CPU backend, the
    # same measure: chunks after the first add the zero-input response of a propagated state,
    # so the double results differ from the serial recursion by rounding.  The plan keeps a
    # chunk length only where a probe line agrees with the serial recursion to 1e-9 of its
    # maximum in double (else it runs the serial recursion: the CPU's operations), so what is
    # left is the float32 rounding of the output, a neighbouring float at most: 2^-24 ~ 6e-8
    # relative.  Measured on the CUDA emulator (no FMA): 0 for order 5 at Wn 0.15 (66 and 627
    # chunks), <= 1.7e-8 over orders 1-16; not yet on a GPU.  The bound of rf2iq_cuda_rel.
    "rf2iq_cuda_chunked_rel": 1e-6,
    # CUDA DAS vs the CPU backend, ||gpu - cpu|| / ||cpu||: float32 sums in another order, and
    # the interpolation weights and phase rotation rounded to float separately (usbeam_math.h)
    # where the CPU folds them in double: a few 1e-7 relative per term.  The same bound as the
    # CPU against its float64 reference (das_rel_l2).  Not yet measured on a GPU.
    "das_cuda_rel_l2": 1e-5,
    # nearest: a delay within ~1e-12 samples of a half-sample tie may round to the other
    # sample on either backend (delays formed in double with or without FMA): such pixels are
    # counted, as for the CPU against the reference (das_nearest_*).
    "das_cuda_nearest_pixel_rel": 1e-4,
    "das_cuda_nearest_fraction_off": 1e-3,
    # The CUDA twin's float32 delay math (cuda/das.cu): a double reference per point and
    # transmit, then per (point, element) the receive distance relative to it in float32 with
    # one Newton step on error-free FMA residuals.  A new approximation, so its own budget,
    # checked on one element (no sum to hide an error in) against the float64 reference and the
    # CPU, from 0.2 mm to 60 mm deep and 40 mm to the side, on and off the array axis
    # (tests/test_cuda_das.py test_delay_error_budget*).  Delay, samples: 6e-8 from the float
    # difference x - x_e, 1.2e-7 from the rounding of the fraction (the integer part is split
    # off first), the Newton step's own ~1e-14 r; measured <= 1.9e-7 on the emulator.
    # Rotation, rad: the fraction of fc tau in float (6e-8 cycle = 3.8e-7 rad) plus 2 pi fc/fs
    # times the delay error and the float polynomial (< 1e-7); measured <= 5.3e-7.  About twice
    # the worst measured, for the GPU's FMA contraction and rsqrtf (the Newton step absorbs the
    # latter).  Not yet measured on a GPU.  das_cuda_rel_l2 is unchanged: these errors are the
    # size of the float32 weights' rounding (measured 1e-7..5e-7 relative L2 against the CPU).
    "das_cuda_delay_samples": 4e-7,
    "das_cuda_phase_rad": 1e-6,
    # PWI_disk, GPU chain vs CPU chain at the uint8 display: the images agree to ~1e-6
    # relative, so a grey level can move by one at a truncation edge.
    "das_cuda_bmode_max_levels": 1,
    # CUDA color / power Doppler vs the CPU backend: the same double sums over the ensemble in
    # the same frame and tap order; nvcc may contract products into FMAs and the device
    # atan2/hypot/log10 may differ from glibc's by an ulp, so results agree to the float32
    # rounding of the output (~6e-8 relative).  The bounds of the CPU against the float64
    # reference (doppler_velocity_vn, doppler_variance_rel, doppler_power_*).  Not yet measured
    # on a GPU (none in the session that wrote them).
    "doppler_cuda_velocity_vn": 1e-6,
    "doppler_cuda_rel": 1e-6,
    "doppler_cuda_power_db_abs": 1e-5,
    # CUDA 'mean'/'poly' clutter filter vs the CPU backend, max|gpu - cpu| / max|input|: the same
    # double projection in the same order (FMA contraction aside); the output is float32, so a
    # sample can land on the neighbouring float: 2^-24 relative to the input it was formed from.
    # The IIR twin runs the CPU's section recursion in double in the same order, so the same
    # bound holds for it block after block (FMA contraction only).
    "doppler_cuda_clutter_rel": 1e-6,
    # CUDA 'mean'/'poly' with algorithm='gemm' vs the CPU backend and the float64 reference,
    # max|gpu - want| / max|input|: two cuBLAS SGEMMs (PEDANTIC, no TF32) on a float32 basis sum
    # n_frames products in float32 where the kernel sums in double, and the clutter is removed
    # only after that rounding, so the error scales with the clutter amplitude (the input), not
    # with the output: coefficients |c_k| <= sqrt(n_frames) max|x| rounded over n_frames terms,
    # worst case ~ n_frames^1.5 * 2^-24 ~ 2e-5 at the 48 frames the tests use at most (random
    # rounding gives ~ sqrt(n_frames) * 2^-24 ~ 4e-7).  40 dB of clutter over the blood signal
    # then leaves at most 0.2 % of the signal amplitude.  Measured on the CUDA emulator
    # (sequential float32 sums, orders 0..4): 2.6e-7 at 16 frames, 4.4e-7 at 48; not yet on a GPU.
    "doppler_cuda_clutter_gemm_rel": 2e-5,
    # CUDA 'svd' clutter filter vs the CPU backend, max|gpu - cpu| / max|input|.  Gram matrix
    # (double, cublasZgemmStridedBatched over pixel slices on exactly widened input, summed in a
    # fixed order: cuda/clutter_svd.cu) and Jacobi (double; round-robin order on
    # the GPU, cyclic on the CPU, so eigenvectors differ by ~eps ||G|| / eigenvalue gap, ~1e-11
    # for the tissue/blood/noise gaps of these tests) match the CPU to ~1e-11, but the
    # projection C P runs in float32 (cublasCgemm, pedantic, P rounded to float32) where the CPU
    # projects in double: n_frames products per sample, |P column| <= 1, so the rounding walk is
    # ~n_frames eps_f max|C| (1.9e-6 at 32 frames, 7.6e-6 at 128; the worst case n^1.5 eps_f is
    # 8.6e-5).  Not yet measured on a GPU.
    "doppler_cuda_clutter_svd_rel": 2e-5,
    # GPU chains vs CPU chains (tests/pipelines/test_cuda_pipeline.py), median over the image: dB of
    # images that agree to ~1e-6 relative differ by ~1e-5 dB, so 1e-3 dB only fails on a real
    # difference; a velocity is an angle that moves with the last bits where |R(1)| is tiny,
    # hence a median, in units of the Nyquist velocity.  Not yet measured on a GPU.
    "pipeline_cuda_db_median_abs": 1e-3,
    "pipeline_cuda_velocity_median_vn": 1e-3,
    # CUDA Hadamard decode vs the CPU backend: 'direct' and 'fast' accumulate in the CPU's
    # types (int32 / int64 / double) in the CPU's order and scale identically, and 'gemm' on
    # int16 sums integers below 2^23, exact in FP32: all bit-exact (assert_array_equal, no
    # entry).  'gemm' on float32 data sums n terms in FP32 (PEDANTIC, no TF32) where the CPU
    # sums in double.  Worst case n eps max|data| after the 1/n scaling (n <= 256, eps =
    # 2^-24: 1.5e-5); for the tests' random normal data the roundings add like a random walk,
    # about eps max|data| (~1e-7): bound 1e-6 of max|data|.  Not yet measured on a GPU.
    "hadamard_cuda_gemm_float32_abs": 1e-6,
    # CUDA row-column DAS vs the CPU backend, ||gpu - cpu|| / ||cpu||: float32 sums where the
    # CPU sums in double, the apodization folded into float interpolation weights, and the
    # transmit delays kept as int32 fixed-point differences from the tile's first voxel
    # (steps of ~1e-7 sample): a few 1e-7 relative per term, as for linear-array DAS
    # (das_cuda_rel_l2).  Not yet measured on a GPU.
    "rca_cuda_rel_l2": 1e-5,
    # nearest: a delay within ~1e-6 sample of a half-sample tie may round to the other sample
    # (the delay is formed differently from the CPU's): such voxels are counted.
    "rca_cuda_nearest_voxel_rel": 1e-4,
    "rca_cuda_nearest_fraction_off": 1e-2,

    # ---- family rf2iq ----
    # C vs the float64 reference, max|got - want| / max|want|: the output is complex64, so each
    # value carries float32 rounding (2^-24 ~ 6e-8 relative); mixing and filtering run in
    # double.  Measured <= 8e-8 over every filter kind, dtype, t0 and decimation tested.
    "rf2iq_rel": 1e-6,
    # Same measure against PyMUST rf2iq (float64 throughout): float32 output rounding only.
    # Measured 5e-8 on PWI_disk (32 frames) and 4e-8 on RFsignal@20MHz.
    "rf2iq_pymust_rel": 1e-6,
    # Butterworth of high order at a low cutoff (order 10, Wn 0.05) in (b, a) form is
    # ill-conditioned: coefficients that differ by one ulp (two correct double designs) move
    # the output by ~6e-6; scipy's own filtfilt(b, a) and sosfiltfilt differ by 5e-6 there.
    "rf2iq_butter_illcond_rel": 3e-5,
    # Filter design vs scipy.signal.butter / kaiserord + firwin, relative to the largest
    # coefficient: both are double, differing in the order of rounding (measured 9e-16).
    "rf2iq_design_rel": 1e-13,
    # Analytic tone at fc + df, interior samples, against A * (pass-band gain at df): what is
    # left is the image at -(2 fc + df) leaking through the stop band (Kaiser 60 dB: <= 1e-3
    # of A; Butterworth: less) and float32 rounding.  Measured <= 2.2e-4 (amplitude, relative
    # to A) and 2.2e-4 rad.
    "rf2iq_tone_amplitude_rel": 2e-3,
    "rf2iq_tone_phase_rad": 2e-3,

    # ---- family das ----
    # C (float32 data and weights, float32 accumulation over up to ~10^3 terms) vs the
    # float64 reference, relative L2 over the whole output: float32 rounding of the
    # weights (~6e-8) and of the sums (~sqrt(terms) * 6e-8) gives ~1e-6; 1e-5 leaves room.
    "das_rel_l2": 1e-5,
    # The receive rotation of the CPU gather paths: whole turns removed in double (exact), the
    # remaining fraction rounded to float (<= 3e-8 turn = 1.9e-7 rad) and its sine and cosine
    # from float polynomials on |r| <= pi/4 (truncation < 2e-9, rounding ~1e-7), plus the
    # float transmit rotation (~6e-8): ~4e-7 rad at worst, whatever the depth (a float phase
    # of thousands of turns would be off by ~1e-3 rad).  Checked 20 cm deep at 15 MHz.  The
    # 1-frame lane path (das_lanes.c) holds s_rx in fixed point, 2^-bits sample with bits =
    # 24 + ceil(log2(fc / fs)): its rounding is at most 2^-25 turn (1.9e-7 rad), its turns are
    # formed in integers (exact mod 1 to ~1e-9 turn), the rest from 32nds of a turn (sine
    # truncated after r^3: 7.6e-8); measured 2.8e-7 rad at fs / fc from 0.27 to 6.7
    # (tests/beamform/test_das_lanes.py), 1.9e-7 with the table in double.  Without a table
    # the lane path's distances are roots corrected once from a 14-bit reciprocal square root
    # (das_lanes.c newton_sqrt, the series of (1 + delta)^(-1/2) to delta^2, |delta| < 2^-13):
    # relative error <= 5/16 * 2^-39 (~5.7e-13, measured 5.4e-13), so a phase error <= 2 pi *
    # turns * 5.7e-13 (1.4e-8 rad at ~4000 turns) and a fraction error <= 1.2e-9 sample for
    # records up to 2048 samples; where the elements are evenly spaced d^2 is stepped from row
    # to row by additions, whose rounding moves a root by at most 1e-9 sample (form_rows checks
    # it per group), plus 2e-9 for elements up to 1e-9 sample off even spacing: far inside
    # this bound.
    # Those roots then go to the sums in the fixed table's units where a group's rows fit
    # (linear arrays), rounded to nearest as the table is: the same 2^-25 turn at most.  A
    # group that mirrors another about the array's centre takes that group's rows (das_lanes.c
    # usbeam_das_lanes_mirrors), whose points and elements mirror its own to 1e-9 sample in x:
    # its distances move by at most 2e-9 sample, as for uneven elements above.
    "das_receive_phase_rad": 1e-6,
    # Nearest: the tap index is round(s) with s in double in both; a point whose s lies
    # within ~1e-12 of a .5 boundary may round the other way (the sqrt of C and NumPy can
    # differ in the last bit).  Pixels whose error exceeds das_nearest_pixel_rel (relative
    # to the image max) must be at most this fraction; the rest meet das_rel_l2.
    "das_nearest_fraction_off": 1e-3,
    "das_nearest_pixel_rel": 1e-4,
    # Analytic single-sample cases: the weights are float32, so 1 - t is exact to ~6e-8;
    # integer delays computed from geometry land within ~1e-9 sample of the integer.
    "das_analytic_rel": 1e-5,
    # Simulated point scatterer: the envelope peak on a lambda/20 grid, refined by a 3x3
    # quadratic fit, must be within lambda/4 of the true position (the brief's requirement;
    # measured: < 0.01 lambda with a Hann window over 28 random cases).
    "das_point_position_wavelengths": 0.25,
    # PWI_disk against the golden MUST B-mode (uint8, 30 dB): the brief's acceptance
    # figures.  Nearest: the same pipeline as MUST; 1 grey level of truncation noise from
    # float32 vs float64 at level boundaries, so 2 levels max.  Linear: a different
    # interpolator than the golden image, only correlation is asked.
    "das_pwi_rho_nearest": 0.999,
    "das_pwi_max_levels_nearest": 2,
    "das_pwi_rho_linear": 0.995,
    # The CPU execute's factored weights (issue 21, csrc/beamform/das_delays.c): per (point,
    # element) c_rx = window x exp(+j 2 pi fc |p - e| / c) and per (point, transmit) rot_tx =
    # exp(+j 2 pi fc tau_tx), each computed in double and rounded to float32 (6e-8 each), then
    # multiplied in float32 (complex product ~1.2e-7) and by the interpolation weights of the
    # fraction (itself rounded to float: 6e-8 of a sample) in float32 (6e-8): a few 1e-7 of
    # the samples' size per weight, where the table of whole weights rounded once had 6e-8.
    # Checked one element at a time against the float64 reference, points 0.2 to 60 mm deep
    # and 40 mm to the side (tests/beamform/test_das_factored.py): |error| / sum of |x| over
    # the taps; measured <= 1.3e-7 (nearest 9.4e-8, linear 1.1e-7, cubic 1.3e-7, 36 cases);
    # bounded at about 4x that.  das_rel_l2 is unchanged (sums of ~10^3 such terms).
    "das_factored_weight_rel": 5e-7,
    # Against PyMUST's own M @ IQ on the same IQ (complex64 vs complex128 data).
    "das_pymust_rel_l2": 1e-5,
    # Convex, phased and matrix arrays against PyMUST on data PyMUST simulates (simus /
    # simus3), the criteria: dB images (floored at -60 dB) correlate at rho >= 0.99;
    # point targets (envelope peak on a lambda/20 grid) within lambda/2 of the truth; the
    # 10 mm anechoic cyst's contrast within 1 dB of PyMUST's own image.  The images use the
    # same IQ and delay model, so the residual is float32 data and weight rounding (~1e-6
    # relative): measured rho > 0.9999 (recorded in the tests' docstrings).
    "sector_db_rho": 0.99,
    "sector_point_position_wavelengths": 0.5,
    "sector_cyst_contrast_db": 1.0,
    # Automatic f-number: the same Brent iterates in double as scipy's fminbound.
    "das_auto_f_number_abs": 1e-12,
    # Delays transmit: our not-a-knot spline (dense solve) vs scipy interp1d 'cubic'.
    "das_spline_abs_m": 1e-12,

    # ---- family doppler ----
    # Clutter filters: C accumulates in double from the same float32 input as the float64
    # reference; the only loss is the float32 output (~6e-8 relative) and, for SVD, the
    # Gram-matrix route (squared condition number, still ~1e-12 in double).  Error is taken
    # relative to max |input|, so 40 dB clutter does not inflate it.
    "doppler_clutter_rel": 1e-6,
    # IIR block streaming: same per-pixel arithmetic in C whichever the block size, so the
    # difference is float32 rounding at most (relative to max |input|).
    "doppler_iir_stream_rel": 1e-6,
    # Kasai: same input, double accumulation on both sides; the float32 cast of the output
    # dominates: velocity error as a fraction of the Nyquist velocity, variance as a fraction
    # of its maximum 2 (VN/pi)^2.
    "doppler_velocity_vn": 1e-6,
    "doppler_variance_rel": 1e-6,
    # Power: float32 output of a double sum (relative); dB via log10 of the float32 power.
    "doppler_power_rel": 1e-6,
    "doppler_power_db_abs": 1e-5,
    # Display: persistence runs in float32 in C, float64 in the reference.
    "doppler_display_abs": 1e-5,
    # Estimation accuracy on synthetic moving scatterers (issue #3): |v| <= 0.8 VN within 5 %.
    "doppler_velocity_estimate_rel": 0.05,
    # After removing 40 dB static clutter: mean velocity within 5 %, as without clutter.
    # Simulated chain with the Loupas axial correction: measured within 0.2 % of the true
    # velocity over 8 scatterer realisations (f-number 1.5); 2 % leaves margin for others.
    "doppler_loupas_estimate_rel": 0.02,
    # Aliasing beyond VN: the median velocity equals the wrapped phase at the measured effective
    # frequency (measured within 0.003 VN); 0.02 VN is the estimator noise margin.
    "doppler_alias_abs_vn": 0.02,
    # Real data (issue #3): usbeam vs PyMUST iq2doppler on PyMUST's beamformed IQ of
    # PWI_disk, median |difference| over pixels with signal, as a fraction of VN.
    "doppler_pymust_median_vn": 0.01,

    # ---- family hadamard ----
    # float32 output of integer data is the correctly rounded exact quotient (tests compare
    # it exactly); against the float64 reference it differs by float32 rounding only.
    "hadamard_float32_rel": 2 ** -23,
    # float32 input: products with +-1 accumulated in double, one float32 rounding of the
    # output (relative to max|input|, the scale of the sums).
    "hadamard_float32_abs": 1e-6,

    # ---- family rca ----
    # Times of flight: the C kernel forms s = ((tx + rx)/c - t0) fs in double like the
    # reference; the ramp test reads s back through float32 linear interpolation
    # (n0 + t in float32, n0 < 1000: one ulp is 6e-5 samples), so 2e-4 samples (about
    # 15 nm of path at 20 MHz) bounds the float32 readback, not the geometry.
    "rca_tof_samples": 2e-4,
    # DAS against the float64 reference: float32 data, float32 interpolation weights and
    # taps, products and sums in double, float32 output; relative to max |image|.
    "rca_das_rel": 2e-5,
    # IQ data: the phase exp(j 2 pi fc tau) is rounded to float32 (1e-7) and fc tau reaches
    # ~100 cycles, formed in double: same budget as RF plus the float32 phasor.
    "rca_das_iq_rel": 5e-5,
    # Sum of receive weights (constant records): HERCULES reads its radial window from a
    # 4096-step table over q = (r / half-width)^2, linear in q; the window is smooth in q,
    # so each weight is within ~1e-7 of the exact one, summed over <= 64 pairs.
    "rca_window_abs": 1e-5,
    # Point localisation: the requirement, a fraction of the wavelength.
    "rca_position_wavelengths": 0.5,

    # ---- family ai ----
    # Pre-processing: the C kernel blends in float32 with float32 weights (computed in double);
    # the reference is float64.  Three blends and one scale/offset, each ~0.5 ulp relative to
    # the largest value involved: 1e-5 of the value range is ~20 ulp of float32.
    "ai_resize_rel": 1e-5,
    # FP16 model input: the kernel rounds its float32 value to half, the reference rounds its
    # float64 value; they can fall on either side of a half rounding boundary: 1 half ulp.
    "ai_resize_fp16_ulps": 1,
    # Centroids: integer index sums (exact in double) divided by the area, vs NumPy's mean.
    "ai_centroid_abs": 1e-9,

    # ---- usbeam.onnx (exported graphs in ONNX Runtime, CPU, vs the C backend) ----
    # The bounds for float32 graphs: B-mode dB images rho >= 0.999, uint8 within 1
    # grey level (a float32 log10 next to a level boundary may floor to the neighbour);
    # velocity median |difference| <= 1 % of the Nyquist velocity over pixels with signal
    # (power within 30 dB of the max); power within 0.1 dB there.  Measured on the phantom:
    # rho 1 - 1e-13, uint8 1 level off at 0.01 % of pixels, velocity median 2e-8 of Nyquist,
    # power 1.3e-5 dB (5e-4 dB over all pixels): the graphs sum in float32 where C sums in
    # double, nothing else differs.  Variance (not bounded by the issue): its range is
    # 2 (v_N / pi)^2; 1e-3 of it, measured 8e-7.
    "onnx_bmode_db_rho": 0.999,
    "onnx_bmode_uint8_levels": 1,
    "onnx_velocity_median_nyquist": 0.01,
    "onnx_power_db": 0.1,
    "onnx_variance_rel": 1e-3,
    # precision='fp16': the RF (scaled by 2^-15), demodulation matrix, DAS weights and their
    # products in float16 (10-bit mantissa: 4.9e-4 relative per rounding, int16 RF rounded
    # to 11 bits), the rest in float32.  Errors are those of the float16 signal, about 1e-3
    # relative: in dB 20 log10(1 + 1e-3) ~ 0.01 dB at bright pixels, growing where the pixel
    # is dark (the absolute error is set by the bright ones).  Measured on the phantom
    # (small shapes): dB rho 1 - 2.6e-7, uint8 at most 1 level off at < 2 % of the pixels,
    # velocity median 2.3e-5 of Nyquist, power 0.2-0.7 dB max over all pixels but < 0.014 dB
    # over pixels with signal, variance 8e-4 of its range.  Bounds: the float32 ones where
    # they hold with room (levels, power dB), else ~2.5-40x the measured value.
    "onnx_fp16_bmode_db_rho": 0.9999,
    "onnx_fp16_bmode_uint8_levels": 1,
    "onnx_fp16_bmode_uint8_fraction_off": 0.05,
    "onnx_fp16_velocity_median_nyquist": 1e-3,
    "onnx_fp16_power_db": 0.1,
    "onnx_fp16_variance_rel": 5e-3,

    # ---- family live ----
    # (no entry: live-session outputs are compared bit for bit with the offline pipeline's)
    # Vantage point targets (tests/helpers/vantage_l11.py): the brightest pixel near a target
    # lies on the PData grid (x every pitch = 0.3 mm, z every lambda/2 = 0.123 mm), so it can
    # be half a step off the true position in each axis; the DAS of a Gaussian-windowed pulse
    # adds <~ lambda/8 of axial shift from the interpolation.  One grid step each way.
    "vantage_target_x_steps": 1,
    "vantage_target_z_steps": 1,
    # BS-mode quadrature pairs -> IQ against the analytic baseband of a sampled Gaussian pulse:
    # the pair approximates the analytic signal to the pulse envelope's change over a quarter
    # period: max |envelope slope| = sqrt(2/e) / sigma of the peak, times T/4, is 0.054 of the
    # peak for sigma = 4 periods (the test's pulse); 0.08 of the peak amplitude.
    "vantage_bs_pair_rel": 0.08,
}
