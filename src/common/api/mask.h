/*
 * mask.h - the visibility rules of the semantics contract (causal, sliding window,
 * ALiBi distance), written once for the CPU backend and the GPU kernels alike.
 * Plain C, usable from host and device code (FA_HD marks functions for both).
 */
#ifndef FA_MASK_H
#define FA_MASK_H

#include "api/fa_hd.h"

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
