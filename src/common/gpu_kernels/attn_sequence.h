/*
 * attn_sequence.h - which (head, batch) pair a block works on (launch_grid.h) and where
 * that batch entry's sequence lives (varlen offsets, seqused_k), for every GPU kernel of
 * both vendors. Included after fa_device.h.
 */
#ifndef FA_ATTN_SEQUENCE_H
#define FA_ATTN_SEQUENCE_H

#include "gpu_kernels/attn_args.h"
#include "gpu_kernels/launch_grid.h"

/* This block's pair of the launch's inner x outer pairs (launch_grid.h); *o == outer for
 * a block of a folded grid past the last pair. Kernels test for that together with their
 * own test for an empty block, after fa_find_sequence: an exit of its own ahead of
 * everything moved the forward kernel's per-block scalars off the uniform datapath
 * (ptxas, sm_90), with spills in its main loop. */
FA_DEVICE void fa_block_pair(unsigned inner, unsigned outer, unsigned *i, unsigned *o)
{
    fa_grid_pair(blockIdx.y, blockIdx.z, gridDim.y, inner, outer, i, o);
}

/* One sequence of the batch: where its rows start in q and k, and its lengths
 * (varlen offsets, seqused_k). */
typedef struct fa_sequence {
    long long q_row0, k_row0;
    int seqlen_q, seqlen_k;
} fa_sequence;

/* batch == args->batch (a block past the last pair, which exits) reads entry 0's, nothing
 * outside the arrays. (A select: min(batch, args->batch - 1) cost the d256 forward 20
 * bytes of spills, ptxas sm_90.) */
FA_DEVICE fa_sequence fa_find_sequence(const fa_fwd_args *args, int batch)
{
    fa_sequence seq;
    batch = batch < args->batch ? batch : 0;
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
