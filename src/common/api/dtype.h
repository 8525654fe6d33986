/*
 * dtype.h - host conversions between fp16 / bf16 bit patterns and fp32, and one element
 * of a tensor of any fa_dtype read as / written from fp32.
 * Narrowing rounds to nearest, ties to even; inf, NaN (kept quiet) and subnormals are
 * handled. The widening functions are branch-free so loops over them vectorize.
 */
#ifndef FA_DTYPE_H
#define FA_DTYPE_H

#include <stdint.h>
#include <string.h>

#include "flashattn.h"

static inline float fa_bits_to_f32(uint32_t bits)
{
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static inline uint32_t fa_f32_to_bits(float f)
{
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    return bits;
}

/* Shifting the 15 magnitude bits into fp32 position and multiplying by 2^112 rebiases the
 * exponent (15 -> 127) exactly, subnormals included; only inf/NaN need their exponent
 * forced to 255 because 31 + 112 is not 255. */
static inline float fa_f16_to_f32(uint16_t h)
{
    uint32_t magnitude = (uint32_t)(h & 0x7fffu) << 13;
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    float value = fa_bits_to_f32(magnitude) * 0x1p112f;
    uint32_t bits = (h & 0x7c00u) == 0x7c00u ? (magnitude | 0x7f800000u) : fa_f32_to_bits(value);
    return fa_bits_to_f32(bits | sign);
}

static inline float fa_bf16_to_f32(uint16_t h)
{
    return fa_bits_to_f32((uint32_t)h << 16);
}

/* Drops `shift` low bits of `mantissa`, rounding to nearest even. */
static inline uint32_t fa_round_shift_rne(uint32_t mantissa, int shift)
{
    uint32_t kept = mantissa >> shift;
    uint32_t rest = mantissa & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1);
    return kept + (rest > half || (rest == half && (kept & 1u)));
}

static inline uint16_t fa_f32_to_f16(float f)
{
    uint32_t x = fa_f32_to_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t magnitude = x & 0x7fffffffu;
    uint32_t exponent = magnitude >> 23;

    if (magnitude > 0x7f800000u) /* NaN: keep it quiet */
        return (uint16_t)(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu));
    if (magnitude >= 0x477ff000u) /* >= 65520 rounds past the largest half (65504) */
        return (uint16_t)(sign | 0x7c00u);
    if (exponent >= 113) /* normal half: rebias 127 -> 15, carry may bump the exponent */
        return (uint16_t)(sign | fa_round_shift_rne(magnitude - (112u << 23), 13));
    if (exponent < 102) /* below half the smallest subnormal (2^-25): rounds to zero */
        return sign;
    /* Subnormal half: units of 2^-24 from the implicit-one mantissa. */
    return (uint16_t)(sign |
                      fa_round_shift_rne((magnitude & 0x7fffffu) | 0x800000u, 126 - (int)exponent));
}

static inline uint16_t fa_f32_to_bf16(float f)
{
    uint32_t x = fa_f32_to_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40u);
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

/* The element of a tensor of `dtype` (f32, f16 or bf16) at `at` (any alignment), as fp32. */
static inline float fa_load_as_f32(const void *at, fa_dtype dtype)
{
    uint16_t bits;
    float f;
    if (dtype == FA_DTYPE_F32) {
        memcpy(&f, at, sizeof f);
        return f;
    }
    memcpy(&bits, at, sizeof bits);
    return dtype == FA_DTYPE_F16 ? fa_f16_to_f32(bits) : fa_bf16_to_f32(bits);
}

/* value stored as an element of `dtype` at `at`, rounded as the functions above round. */
static inline void fa_store_from_f32(void *at, fa_dtype dtype, float value)
{
    uint16_t bits;
    if (dtype == FA_DTYPE_F32) {
        memcpy(at, &value, sizeof value);
        return;
    }
    bits = dtype == FA_DTYPE_F16 ? fa_f32_to_f16(value) : fa_f32_to_bf16(value);
    memcpy(at, &bits, sizeof bits);
}

#endif /* FA_DTYPE_H */
