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

    # ---- family ai ----

    # ---- family live ----
}
