/*
 * attn_combine.h - the split-KV combine kernel, written once for every vendor: merges
 * the fp32 partial outputs and LSEs of each split into the final O (fp16/bf16) and LSE.
 * One block per (query row, head, batch), (head, batch) laid over grid y and z by
 * launch_grid.h; threads stride over the head dim.
 * Included once by the vendor's shared-kernels translation unit.
 */
#ifndef FA_ATTN_COMBINE_H
#define FA_ATTN_COMBINE_H

#include "fa_device.h"
#include "gpu_kernels/attn_args.h"
#include "gpu_kernels/attn_sequence.h"

/* out_bf16 selects the output element type at run time: one combine kernel serves both
 * dtypes, since it is memory-bound and tiny next to the main kernel. */
extern "C" FA_GLOBAL void FA_CAT(FA_KERNEL_PREFIX, fwd_combine)(fa_fwd_args args, int out_bf16)
{
    unsigned head_u, batch_u;
    fa_block_pair(args.heads, args.batch, &head_u, &batch_u);
    if (batch_u == (unsigned)args.batch) /* past the last pair */
        return;
    const int row = blockIdx.x, head = (int)head_u;
    const fa_sequence seq = fa_sequence_of(&args, (int)batch_u);
    if (row >= seq.seqlen_q || fa_sequence_bad(&args, seq.batch))
        return;
    const long long grow = fa_global_q_row0(&args, seq.batch, seq.q_row0) + row;

    /* Split sp's values lie sp whole splits (the offsets of split 1's first ones) past
     * split 0's: pointers stepped by those instead of 64-bit products per split. */
    const float *lse0 = args.partial_lse + fa_partial_lse_offset(&args, 0, head, grow);
    const float *part0 = args.partial_out + fa_partial_out_offset(&args, 0, grow, head);
    const long long lse_split = fa_partial_lse_offset(&args, 1, 0, 0);
    const long long part_split = fa_partial_out_offset(&args, 1, 0, 0);
    float lse_max = -INFINITY;
    const float *lse_sp = lse0;
    for (int sp = 0; sp < args.num_splits; ++sp, lse_sp += lse_split)
        lse_max = fmaxf(lse_max, *lse_sp);
    float sum = 0.f;
    lse_sp = lse0;
    if (lse_max != -INFINITY)
        for (int sp = 0; sp < args.num_splits; ++sp, lse_sp += lse_split)
            sum += expf(*lse_sp - lse_max);
    const float lse = sum > 0.f ? lse_max + logf(sum) : -INFINITY;

    unsigned short *out =
        (unsigned short *)args.out + fa_row_at(&args.out_layout, seq.batch, seq.q_row0 + row, head);
    for (int col = 2 * threadIdx.x; col < args.head_dim; col += 2 * blockDim.x) {
        float lo = 0.f, hi = 0.f;
        lse_sp = lse0;
        const float *part = part0;
        for (int sp = 0; sp < args.num_splits && sum > 0.f; ++sp, lse_sp += lse_split, part += part_split) {
            float weight = expf(*lse_sp - lse);
            lo += weight * part[col];
            hi += weight * part[col + 1];
        }
        *(uint32_t *)(out + col) = out_bf16 ? fa_pack2_bf16(lo, hi) : fa_pack2_f16(lo, hi);
    }
    if (args.lse && threadIdx.x == 0)
        args.lse[fa_lse_at(&args.lse_layout, seq.batch, head, seq.q_row0 + row)] = lse;
}

#endif /* FA_ATTN_COMBINE_H */
