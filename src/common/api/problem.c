/*
 * problem.c - per-sequence lengths and first rows of a validated fa_problem, read from
 * host-memory cu_seqlens / seqused_k (the CPU backend's view of varlen batches).
 */
#include "api/problem.h"

int64_t fa_problem_seqlen_q(const fa_problem *p, int b)
{
    if (!p->varlen)
        return p->seqlen_q;
    return (int64_t)p->cu_seqlens_q[b + 1] - p->cu_seqlens_q[b];
}

int64_t fa_problem_seqlen_k(const fa_problem *p, int b)
{
    int64_t len = p->varlen ? (int64_t)p->cu_seqlens_k[b + 1] - p->cu_seqlens_k[b]
                            : p->seqlen_k;
    if (p->seqused_k && p->seqused_k[b] < len)
        return p->seqused_k[b];
    return len;
}

int64_t fa_problem_row0_q(const fa_problem *p, int b)
{
    return p->varlen ? p->cu_seqlens_q[b] : 0;
}

int64_t fa_problem_row0_k(const fa_problem *p, int b)
{
    return p->varlen && p->block_table == NULL ? p->cu_seqlens_k[b] : 0;
}
