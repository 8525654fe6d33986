/*
 * mask.h - the visibility rules of the semantics contract (causal, sliding window,
 * ALiBi distance), written once for the CPU backend and the GPU kernels alike.
 * Plain C, usable from host and device code (FA_HD marks functions for both).
 */
#ifndef FA_MASK_H
#define FA_MASK_H

#include "api/fa_hd.h"

#include <limits.h>

/* Window bounds after resolving causal: -1 means unbounded on that side. */
typedef struct fa_window {
    int left;
    int right;
} fa_window;

/* Query row i is aligned with key column i + s_k - s_q (bottom-right alignment). */
FA_HD long long fa_diagonal(long long row, long long seqlen_q, long long seqlen_k)
{
    return row + seqlen_k - seqlen_q;
}

/* First visible key of query row `row` (may be >= seqlen_k: nothing visible). */
FA_HD long long fa_first_visible_key(long long row, long long seqlen_q, long long seqlen_k,
                                     fa_window w)
{
    long long lo = w.left < 0 ? 0 : fa_diagonal(row, seqlen_q, seqlen_k) - w.left;
    return lo < 0 ? 0 : lo;
}

/* One past the last visible key of query row `row` (may be <= 0: nothing visible). */
FA_HD long long fa_end_visible_key(long long row, long long seqlen_q, long long seqlen_k,
                                   fa_window w)
{
    long long hi = w.right < 0 ? seqlen_k : fa_diagonal(row, seqlen_q, seqlen_k) + w.right + 1;
    return hi > seqlen_k ? seqlen_k : hi;
}

FA_HD int fa_key_visible(long long row, long long col, long long seqlen_q, long long seqlen_k,
                         fa_window w)
{
    return col >= fa_first_visible_key(row, seqlen_q, seqlen_k, w) &&
           col < fa_end_visible_key(row, seqlen_q, seqlen_k, w);
}

/* fa_key_visible in 32-bit arithmetic, for a kernel's per-element test (the rule above
 * takes 64-bit positions, about twenty GPU instructions an element), with rows past
 * seqlen_q (padding) seeing nothing: key col is visible to query row when row < seqlen_q,
 * col < seqlen_k and lo <= col - row <= hi, the window's sides shifted by the
 * bottom-right alignment and clamped to int (INT_MIN / INT_MAX where a side is
 * unbounded). Positions and lengths are below 2^31. */
typedef struct fa_band {
    int seqlen_q, seqlen_k, lo, hi;
} fa_band;

FA_HD fa_band fa_band_of(int seqlen_q, int seqlen_k, fa_window w)
{
    const long long shift = (long long)seqlen_k - seqlen_q;
    fa_band b;
    b.seqlen_q = seqlen_q;
    b.seqlen_k = seqlen_k;
    b.lo = w.left < 0 ? INT_MIN : (int)(shift - w.left < INT_MIN ? INT_MIN : shift - w.left);
    b.hi = w.right < 0 ? INT_MAX : (int)(shift + w.right > INT_MAX ? INT_MAX : shift + w.right);
    return b;
}

FA_HD int fa_band_visible(const fa_band *b, int row, int col)
{
    const int rel = col - row;
    return row < b->seqlen_q && col < b->seqlen_k && rel >= b->lo && rel <= b->hi;
}

/* The band's upper side in a tile without a left window side (w.left < 0,
 * w.right >= 0): with key0 and query0 one element of the tile, key0 + dk is hidden from
 * query0 + dq by that side exactly when dk - dq > the limit returned: one comparison per
 * element with a constant where a kernel unrolls dk and dq (attn_bwd_parts.h
 * fa_bwd_clear_above). Keys and queries past their sequence's end are hidden too; a
 * tile that holds some clears them on its own (fa_bwd_clear_past_ends). The limit is
 * clamped to +-2^20, far beyond any offset inside a tile. */
FA_HD int fa_band_upper_limit(int seqlen_q, int seqlen_k, fa_window w, long long key0_minus_query0)
{
    const long long limit = (long long)seqlen_k - seqlen_q + w.right - key0_minus_query0;
    return (int)(limit < -(1 << 20) ? -(1 << 20) : limit > (1 << 20) ? (1 << 20) : limit);
}

/* The same visibility seen from a key: query rows [first, end) see key `col`. */
FA_HD long long fa_first_query_seeing(long long col, long long seqlen_q, long long seqlen_k,
                                      fa_window w)
{
    long long lo = w.right < 0 ? 0 : col - (seqlen_k - seqlen_q) - w.right;
    return lo < 0 ? 0 : lo;
}

FA_HD long long fa_end_query_seeing(long long col, long long seqlen_q, long long seqlen_k,
                                    fa_window w)
{
    long long hi = w.left < 0 ? seqlen_q : col - (seqlen_k - seqlen_q) + w.left + 1;
    return hi > seqlen_q ? seqlen_q : hi;
}

/* ALiBi distance |i + s_k - s_q - j|; the bias is -slope * distance. */
FA_HD float fa_alibi_distance(long long row, long long col, long long seqlen_q,
                              long long seqlen_k)
{
    long long dist = fa_diagonal(row, seqlen_q, seqlen_k) - col;
    return (float)(dist < 0 ? -dist : dist);
}

#endif /* FA_MASK_H */
