/*
 * ai_math.h - per-element math of the AI hand-off family shared by the C kernels (csrc/)
 * and their CUDA twins (cuda/): FP16 <-> FP32 bit conversion, the sort key of a score,
 * and torchvision's box IoU test.  Everything is static inline and marked AI_HD
 * (__host__ __device__ under nvcc) so both backends compute bit-identical results.
 *
 * FP16 (IEEE binary16): round to nearest, ties to even, with subnormals, infinities and
 * NaN handled as numpy's npy_floatbits_to_halfbits / npy_halfbits_to_floatbits do: an
 * overflow becomes inf, a NaN keeps the top 10 bits of its payload (and stays a NaN).
 * IoU: torchvision/csrc/ops/cpu/nms_kernel.cpp semantics - float32 arithmetic in the order
 * area_i + area_j - inter, widths without +1, std::max/std::min comparisons, the result
 * compared with a double threshold.  The CUDA side uses explicit _rn intrinsics so nvcc
 * cannot contract a*b+c into an FMA and change a rounding.
 */
#ifndef USBEAM_AI_MATH_H
#define USBEAM_AI_MATH_H

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define AI_HD __host__ __device__
#else
#define AI_HD
#endif

#if defined(__CUDA_ARCH__)
#define AI_FMUL(a, b) __fmul_rn((a), (b))
#define AI_FADD(a, b) __fadd_rn((a), (b))
#define AI_FSUB(a, b) __fsub_rn((a), (b))
#define AI_FDIV(a, b) __fdiv_rn((a), (b))
#else
#define AI_FMUL(a, b) ((a) * (b))
#define AI_FADD(a, b) ((a) + (b))
#define AI_FSUB(a, b) ((a) - (b))
#define AI_FDIV(a, b) ((a) / (b))
#endif

static inline AI_HD uint32_t ai_float_bits(float value)
{
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    return bits;
}

static inline AI_HD float ai_bits_float(uint32_t bits)
{
    float value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

static inline AI_HD uint16_t ai_float_to_half_bits(float value)
{
    const uint32_t f = ai_float_bits(value);
    const uint16_t sign = (uint16_t)((f >> 16) & 0x8000u);
    const uint32_t magnitude = f & 0x7fffffffu;
    if (magnitude >= 0x7f800000u) {
        if (magnitude == 0x7f800000u) return (uint16_t)(sign | 0x7c00u);
        uint32_t payload = (magnitude & 0x007fffffu) >> 13;
        return (uint16_t)(sign | 0x7c00u | (payload ? payload : 1u));
    }
    /* 65520 is halfway between the largest half (65504) and 2^16: ties to even go up to inf */
    if (magnitude >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);
    if (magnitude >= 0x38800000u) { /* normal half: rebias the exponent from 127 to 15 */
        uint32_t half = (magnitude - 0x38000000u) >> 13;
        uint32_t dropped = magnitude & 0x1fffu;
        if (dropped > 0x1000u || (dropped == 0x1000u && (half & 1u))) half += 1u;
        return (uint16_t)(sign | half);
    }
    if (magnitude <= 0x33000000u) return sign; /* <= 2^-25: ties to even round to zero */
    /* subnormal half: count units of 2^-24 */
    const uint32_t exponent = magnitude >> 23;
    const uint32_t significand = (magnitude & 0x007fffffu) | 0x00800000u;
    const uint32_t shift = 126u - exponent; /* 14 .. 24 */
    uint32_t half = significand >> shift;
    const uint32_t dropped = significand & ((1u << shift) - 1u);
    const uint32_t halfway = 1u << (shift - 1u);
    if (dropped > halfway || (dropped == halfway && (half & 1u))) half += 1u;
    return (uint16_t)(sign | half);
}

static inline AI_HD float ai_half_bits_to_float(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t exponent = (h >> 10) & 0x1fu;
    uint32_t mantissa = h & 0x3ffu;
    if (exponent == 0x1fu) return ai_bits_float(sign | 0x7f800000u | (mantissa << 13));
    if (exponent != 0) return ai_bits_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
    if (mantissa == 0) return ai_bits_float(sign);
    uint32_t float_exponent = 113u; /* a half subnormal is mantissa * 2^-24 = 0.m * 2^-14 */
    while (!(mantissa & 0x400u)) {
        mantissa <<= 1;
        --float_exponent;
    }
    return ai_bits_float(sign | (float_exponent << 23) | ((mantissa & 0x3ffu) << 13));
}

/* A key whose ascending unsigned order is descending score order (-0 and +0 tie, as they
 * compare equal).  Used by the stable radix sorts: equal keys keep index order. */
static inline AI_HD uint32_t ai_score_descending_key(float score)
{
    uint32_t bits = ai_float_bits(score + 0.0f);
    uint32_t ascending = (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
    return ~ascending;
}

/* std::max / std::min exactly (their NaN and signed-zero behaviour included). */
static inline AI_HD float ai_std_max(float a, float b) { return (a < b) ? b : a; }
static inline AI_HD float ai_std_min(float a, float b) { return (b < a) ? b : a; }

static inline AI_HD float ai_box_area(const float *box)
{
    return AI_FMUL(AI_FSUB(box[2], box[0]), AI_FSUB(box[3], box[1]));
}

/* torchvision's "IoU > threshold" with a double threshold, evaluated in float: threshold_f
 * is (float)threshold and inclusive says whether (double)threshold_f > threshold, in which
 * case IoU > threshold <=> IoU >= threshold_f. */
typedef struct ai_iou_threshold {
    float value;
    int inclusive;
} ai_iou_threshold;

static inline ai_iou_threshold ai_make_iou_threshold(double threshold)
{
    ai_iou_threshold t;
    t.value = (float)threshold;
    t.inclusive = (double)t.value > threshold;
    return t;
}

static inline AI_HD int ai_iou_exceeds(const float *kept, float kept_area, const float *other,
                                       float other_area, ai_iou_threshold threshold)
{
    float xx1 = ai_std_max(kept[0], other[0]);
    float yy1 = ai_std_max(kept[1], other[1]);
    float xx2 = ai_std_min(kept[2], other[2]);
    float yy2 = ai_std_min(kept[3], other[3]);
    float w = ai_std_max(0.0f, AI_FSUB(xx2, xx1));
    float h = ai_std_max(0.0f, AI_FSUB(yy2, yy1));
    float inter = AI_FMUL(w, h);
    float iou = AI_FDIV(inter, AI_FSUB(AI_FADD(kept_area, other_area), inter));
    return threshold.inclusive ? iou >= threshold.value : iou > threshold.value;
}

#endif
