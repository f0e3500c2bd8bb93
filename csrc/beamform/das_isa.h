/*
 * das_isa.h - what the CPU DAS sources share to build their loops once per instruction set
 * (csrc/beamform/das_delays.c: the geometry of a point; das_single.c: the 1-frame sums):
 * the copy macros and the one sine/cosine of a number of turns every path uses.  CPU only
 * (the CUDA twin has its own math in cuda/das.cu).
 * Units: turns (whole cycles); the results are plain sines and cosines.
 */
#ifndef USBEAM_DAS_ISA_H
#define USBEAM_DAS_ISA_H

#include "beamform/das_internal.h"

#include <math.h>

/* The vectorised loops are inlined into one copy per instruction set (AVX-512, AVX2 + FMA,
 * baseline), chosen at run time by usbeam_das_isa() (see das.c for why not target_clones). */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
#define USBEAM_DAS_MULTI_ISA 1
#include <immintrin.h>
#define INLINE_BODY static inline __attribute__((always_inline))
#define TARGET_AVX2 __attribute__((target("avx2,fma,bmi,bmi2,popcnt,lzcnt,f16c,movbe")))
#define TARGET_AVX512 __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx512cd,avx2,fma,bmi,bmi2,popcnt,lzcnt,f16c,movbe")))
#else
#define USBEAM_DAS_MULTI_ISA 0
#define INLINE_BODY static inline
#endif

/* In a void function: call NAME##_avx512 or NAME##_avx2 (the copies of NAME, with the same
 * arguments) and return when the machine runs that instruction set; otherwise fall through to
 * the baseline call that follows. */
#if USBEAM_DAS_MULTI_ISA
#define USBEAM_DAS_DISPATCH(NAME, ...)                                                                 \
    do {                                                                                               \
        switch (usbeam_das_isa()) {                                                                    \
        case 2: NAME##_avx512(__VA_ARGS__); return;                                                    \
        case 1: NAME##_avx2(__VA_ARGS__); return;                                                      \
        default: break;                                                                                \
        }                                                                                              \
    } while (0)
#else
#define USBEAM_DAS_DISPATCH(NAME, ...) ((void)0)
#endif

/* sin and cos of 2 pi turns for any finite turns.  The whole turns are removed first
 * (exact in double for |turns| < 2^52), then a quarter turn q in {-2..2}, leaving
 * |r| <= pi/4 where Taylor polynomials of degree 11 and 12 are accurate to < 1e-11. */
INLINE_BODY void sincos_turns(double turns, double *sin_out, double *cos_out)
{
    const double frac = turns - rint(turns);  /* [-1/2, 1/2] */
    const double q = rint(4.0 * frac);        /* quarter turns, -2..2 */
    const double r = 2.0 * USBEAM_PI * (frac - 0.25 * q);
    const double r2 = r * r;
    const double s = r * (1.0 + r2 * (-1.0 / 6 + r2 * (1.0 / 120 + r2 * (-1.0 / 5040 + r2 * (1.0 / 362880 + r2 * (-1.0 / 39916800))))));
    const double c = 1.0 + r2 * (-0.5 + r2 * (1.0 / 24 + r2 * (-1.0 / 720 + r2 * (1.0 / 40320 + r2 * (-1.0 / 3628800 + r2 * (1.0 / 479001600))))));
    /* q = +-1: angle r +- pi/2 (sin = q c, cos = -q s); q = 0, +-2: sign 1 - |q|.  As
     * arithmetic (odd = |q| (2 - |q|) is 1 for |q| = 1, else 0) so loops stay branch-free. */
    const double a = fabs(q), odd = a * (2.0 - a);
    *sin_out = odd * q * c + (1.0 - a) * s;
    *cos_out = (1.0 - a) * c - odd * q * s;
}


/* An entry's cubic (Catmull-Rom, usbeam_math.h) interpolation: s = S_TX + S_RX in double, its
 * validity (1 <= s <= last - 2), base = floor(s) (1 outside: a harmless row start), and the
 * float weights w0 .. w3 of the taps base - 1 .. base + 2 (0 outside), as the entry and 1-frame
 * loops use them. */
#define USBEAM_DAS_CUBIC_ENTRY(S_TX, S_RX, LAST)                                                       \
    const double s = (S_TX) + (S_RX);                                                                  \
    const int valid = (s >= 1.0) & (s <= (LAST) - 2.0);                                                \
    const double base = floor(valid ? s : 1.0);                                                        \
    const float t = (float)(s - base), g = valid ? 0.5f : 0.0f;                                        \
    const float t2 = t * t, t3 = t2 * t;                                                               \
    const float w0 = g * (-t3 + 2.0f * t2 - t), w1 = g * (3.0f * t3 - 5.0f * t2 + 2.0f);               \
    const float w2 = g * (-3.0f * t3 + 4.0f * t2 + t), w3 = g * (t3 - t2)

#endif
