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

    # ---- family rca ----

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

    # ---- family live ----
}
