/*
 * fuzz_common.h - what both libFuzzer targets (fuzz_api.c, fuzz_paged.c) share: the input
 * encoding their requests are read in (bytes one at a time, 0 past the end; raw
 * little-endian integers; the one-byte INT of fuzz_api.c's header over each target's own
 * table of special values), float bit casts, the contract-violation abort, the
 * uninstrumented-loop attribute and the fill generator. Header only; a target defines
 * FUZZ_TARGET_NAME and includes it once.
 */
#ifndef FA_FUZZ_COMMON_H
#define FA_FUZZ_COMMON_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct reader {
    const uint8_t *p;
    size_t n;
} reader;

static uint8_t rd_u8(reader *r)
{
    if (r->n == 0)
        return 0;
    r->n--;
    return *r->p++;
}

static uint64_t rd_raw(reader *r, int bytes)
{
    uint64_t v = 0;
    int i;
    for (i = 0; i < bytes; i++)
        v |= (uint64_t)rd_u8(r) << (8 * i);
    return v;
}

/* An INT: c < 0x80 is c - 16; 0xFE a raw int32, 0xFF a raw int64; else special[(c - 0x80) % n]. */
static int64_t rd_int_in(reader *r, const int64_t *special, int n)
{
    uint8_t c = rd_u8(r);
    if (c < 0x80)
        return (int64_t)c - 16;
    if (c == 0xFE)
        return (int64_t)(int32_t)(uint32_t)rd_raw(r, 4);
    if (c == 0xFF)
        return (int64_t)rd_raw(r, 8);
    return special[(c - 0x80) % n];
}

/* An int field: the INT truncated the way a C conversion to int would (two's complement). */
static int rd_int32_in(reader *r, const int64_t *special, int n)
{
    return (int)(int32_t)(uint32_t)(uint64_t)rd_int_in(r, special, n);
}

static float float_of_bits(uint32_t bits)
{
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static uint32_t bits_of_float(float f)
{
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    return bits;
}

/* Loops over buffers: coverage feedback from them is noise and costs most of the time. */
#define HOT __attribute__((no_sanitize("coverage"), noinline))

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fail(const char *fmt, ...)
{
    va_list args;
    fprintf(stderr, "\n" FUZZ_TARGET_NAME ": CONTRACT VIOLATION: ");
    va_start(args, fmt);
    vfprintf(stderr, fmt, args);
    va_end(args);
    fprintf(stderr, "\n");
    abort();
}

typedef struct rng {
    uint64_t state;
} rng;

static uint32_t rng_next(rng *g)
{
    g->state = g->state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(g->state >> 33);
}

#endif /* FA_FUZZ_COMMON_H */
