/*
 * fast_divide.h - division by a number fixed for a whole launch (the page size of a paged
 * cache) as one multiply and one shift: the host finds the multiplier once
 * (fa_divisor_of), the kernels divide by it (fa_divide, fa_remainder). A 32-bit integer
 * division by a run-time value is a sequence of about 20 instructions on the GPU (I2F,
 * MUFU.RCP, F2I, corrections); the paged decode kernel made 4 per thread per tile, and at
 * b 1 its warps issue few enough other instructions that they showed (bench/NOTES.md
 * dec8). Plain C, for host and device of both vendors.
 */
#ifndef FA_FAST_DIVIDE_H
#define FA_FAST_DIVIDE_H

#include "api/fa_hd.h"

typedef struct fa_divisor {
    int d;        /* the divisor, 1 .. 2^31 - 1 */
    unsigned mul; /* ceil(2^shift / d)          */
    int shift;    /* 31 + ceil(log2(d))         */
} fa_divisor;

/* For 0 < d < 2^31, with l = ceil(log2 d): 2^(31+l) <= mul * d < 2^(31+l) + d <= 2^(31+l) + 2^l,
 * which is the condition under which floor(n * mul / 2^(31+l)) = floor(n / d) for every
 * 0 <= n < 2^31 (T. Granlund and P. Montgomery, "Division by invariant integers using
 * multiplication", PLDI 1994, theorem 4.2, with N = 31). mul < 2^32, so n * mul fits 63
 * bits. */
FA_HD fa_divisor fa_divisor_of(int d)
{
    fa_divisor v;
    int l = 0;
    while ((1LL << l) < d)
        ++l;
    v.d = d;
    v.shift = 31 + l;
    v.mul = (unsigned)(((1ULL << v.shift) + (unsigned long long)d - 1) / (unsigned long long)d);
    return v;
}

/* n / v.d for 0 <= n < 2^31. */
FA_HD int fa_divide(int n, fa_divisor v) { return (int)(((unsigned long long)(unsigned)n * v.mul) >> v.shift); }

/* n % v.d for 0 <= n < 2^31. */
FA_HD int fa_remainder(int n, fa_divisor v) { return n - fa_divide(n, v) * v.d; }

#endif /* FA_FAST_DIVIDE_H */
