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
    # Point localisation: the requirement, a fraction of the wavelength.
    "rca_position_wavelengths": 0.5,

    # ---- family ai ----

    # ---- family live ----
}
