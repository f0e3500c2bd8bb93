"""The one table of numerical tolerances, with the reason for each entry.

Every comparison of usbeam against a reference uses an entry from here.  Loosening an
entry needs a recorded reason in this file.
"""

TOLERANCES = {
    # B-mode uint8: the C kernel computes the dB value in double from float32 IQ; the
    # float64 reference uses float64 |IQ|.  A level within ~1e-6 of an integer boundary may
    # truncate to the neighbouring grey level, so allow 1 grey level on a tiny fraction.
    "bmode_uint8_max_levels": 1,
    "bmode_uint8_fraction_off": 1e-3,
    # B-mode dB: float32 input, log10 computed in double; relative error of |IQ| in float32
    # is ~1e-7, i.e. ~1e-6 dB; 1e-4 dB leaves room for the float32 cast of the output.
    "bmode_db_abs": 1e-4,

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

    # ---- family doppler ----

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

    # ---- family live ----
}
