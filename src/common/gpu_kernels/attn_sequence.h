/*
 * attn_sequence.h - which (head, batch) pair a block works on (launch_grid.h) and where
 * that batch entry's sequence lives (varlen offsets, seqused_k), and whether the device
 * check found it bad, for every GPU kernel of both vendors.
 */
#ifndef FA_ATTN_SEQUENCE_H
#define FA_ATTN_SEQUENCE_H

#include "fa_device.h" /* the vendor's, by the include path */
#include "gpu_kernels/attn_args.h"
#include "gpu_kernels/launch_grid.h"

/* This block's pair of the launch's inner x outer pairs (launch_grid.h); *o == outer for
 * a block of a folded grid past the last pair. Kernels test for that together with their
 * own test for an empty block, after fa_find_sequence: an exit of its own ahead of
 * everything moves the forward kernel's per-block scalars off the uniform datapath
 * (ptxas, sm_90) and spills in its main loop. */
FA_DEVICE void fa_block_pair(unsigned inner, unsigned outer, unsigned *i, unsigned *o)
{
    fa_grid_pair(blockIdx.y, blockIdx.z, gridDim.y, inner, outer, i, o);
}

/* One sequence of the batch: its batch entry, where its rows start and its lengths
 * (varlen offsets, seqused_k), found once per block. */
typedef struct fa_sequence {
    int batch;
    long long q_row0, k_row0; /* first row in the q / k operands (fa_row_at): the varlen  */
                              /* offset, 0 for fixed-length (apart by the batch stride)   */
    int seqlen_q, seqlen_k;
} fa_sequence;

/* seqused_k's entry within 0 .. the sequence's keys: equal to it when the device check
 * passes it, and keeping every read in the operands when the read comes first. */
FA_DEVICE int fa_clamp_keys(int used, int keys) { return used < 0 ? 0 : used > keys ? keys : used; }

/* Batch entry `batch` (< args->batch) of the launch. */
FA_DEVICE fa_sequence fa_sequence_of(const fa_fwd_args *args, int batch)
{
    fa_sequence seq;
    seq.batch = batch;
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
    if (args->seqused_k) /* clamped: read before the device check when args->checked_late */
        seq.seqlen_k = fa_clamp_keys(args->seqused_k[batch], seq.seqlen_k);
    return seq;
}

/* 1 when the device check found batch entry `batch` (< args->batch) bad: a kernel
 * exits before it reads or writes anything of that sequence, whose indices may point
 * anywhere. Each kernel tests it with its own exit, after the lengths are read: folding
 * it into the lengths costs the d256 forward spills (ptxas, sm_90). */
FA_DEVICE int fa_sequence_bad(const fa_fwd_args *args, int batch)
{
    return args->seq_ok != NULL && !args->seq_ok[batch];
}

/* The sequence of a block whose pair may lie past the last one (batch == args->batch,
 * then left in seq.batch for the block's exit test): such a block reads entry 0's
 * lengths, nothing outside the arrays, with a select (min(batch, args->batch - 1) spills
 * in the d256 forward, ptxas sm_90). Kernels that exit first take fa_sequence_of. */
FA_DEVICE fa_sequence fa_find_sequence(const fa_fwd_args *args, int batch)
{
    fa_sequence seq = fa_sequence_of(args, batch < args->batch ? batch : 0);
    seq.batch = batch;
    return seq;
}

/* The rows batch entry `batch` has in the k and v operands, seqused_k not applied: the
 * backward writes dK and dV for every one of them (zero past seqused_k). Entry 0's for a
 * block past the last pair, as fa_find_sequence. */
FA_DEVICE int fa_key_rows(const fa_fwd_args *args, int batch)
{
    const int b = batch < args->batch ? batch : 0;
    return args->cu_seqlens_q ? args->cu_seqlens_k[b + 1] - args->cu_seqlens_k[b] : args->seqlen_k;
}

/* The first query row of batch entry `batch` (q_row0: its fa_sequence's) among the
 * batch's total_q rows, which the fp32 [heads][total_q] arrays and the split-KV partials
 * count (attn_args.h). Derived where it is used rather than kept in fa_sequence: the
 * forward needs it only after its main loop, and a 64-bit value carried through the
 * loop costs it registers. */
FA_DEVICE long long fa_global_q_row0(const fa_fwd_args *args, int batch, long long q_row0)
{
    return args->cu_seqlens_q ? q_row0 : (long long)batch * args->seqlen_q;
}

#endif /* FA_ATTN_SEQUENCE_H */
