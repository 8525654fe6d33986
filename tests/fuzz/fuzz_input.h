/*
 * fuzz_input.h - the input encoding both libFuzzer targets (fuzz_api.c, fuzz_paged.c) read
 * their requests in: bytes taken one at a time (0 past the end), raw little-endian
 * integers, and the one-byte INT (fuzz_api.c's header) over each target's own table of
 * special values. Header only; each target includes it once.
 */
#ifndef FA_FUZZ_INPUT_H
#define FA_FUZZ_INPUT_H

#include <stddef.h>
#include <stdint.h>

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

#endif /* FA_FUZZ_INPUT_H */
