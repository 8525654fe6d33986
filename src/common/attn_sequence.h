/*
 * attn_sequence.h - where one batch entry's sequence lives (varlen offsets, seqused_k),
 * for every GPU kernel of both vendors. Included after fa_device.h.
 */
#ifndef FA_ATTN_SEQUENCE_H
#define FA_ATTN_SEQUENCE_H

#include "attn_args.h"

/* One sequence of the batch: where its rows start in q and k, and its lengths
 * (varlen offsets, seqused_k). */
typedef struct fa_sequence {
    long long q_row0, k_row0;
    int seqlen_q, seqlen_k;
} fa_sequence;

FA_DEVICE fa_sequence fa_find_sequence(const fa_fwd_args *args, int batch)
{
    fa_sequence seq;
    seq.q_row0 = 0;
    seq.k_row0 = 0;
    seq.seqlen_q = args->seqlen_q;
    seq.seqlen_k = args->seqlen_k;
    if (args->cu_seqlens_q) {
        seq.q_row0 = args->cu_seqlens_q[batch];
        seq.k_row0 = args->cu_seqlens_k[batch];
        seq.seqlen_q = args->cu_seqlens_q[batch + 1] - (int)seq.q_row0;
        seq.seqlen_k = args->cu_seqlens_k[batch + 1] - (int)seq.k_row0;
    }
    if (args->seqused_k)
        seq.seqlen_k = args->seqused_k[batch];
    return seq;
}

#endif /* FA_ATTN_SEQUENCE_H */
