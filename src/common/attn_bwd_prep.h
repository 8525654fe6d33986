/*
 * attn_bwd_prep.h - the backward's preprocess kernel, written once for every vendor:
 * per query row and head, D = rowsum(dO ∘ O) and the LSE in log2 units (+inf for rows
 * that saw no key, so their recomputed P is exactly 0), both fp32 in [heads][total_q].
 * One thread per row; the element type is a run-time flag (one instance serves both).
 * Included once by the vendor translation unit after fa_device.h.
 */
#ifndef FA_ATTN_BWD_PREP_H
#define FA_ATTN_BWD_PREP_H

#include "attn_args.h"
#include "attn_sequence.h"

FA_DEVICE float fa_dot_row(const unsigned short *a, const unsigned short *b, int head_dim, int bf16)
{
    float sum = 0.f;
    for (int c = 0; c < head_dim; c += 8) {
        uint4 x = *(const uint4 *)(a + c), y = *(const uint4 *)(b + c);
        const uint32_t xs[4] = {x.x, x.y, x.z, x.w}, ys[4] = {y.x, y.y, y.z, y.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            float2 u = bf16 ? fa_unpack2_bf16(xs[i]) : fa_unpack2_f16(xs[i]);
            float2 v = bf16 ? fa_unpack2_bf16(ys[i]) : fa_unpack2_f16(ys[i]);
            sum = fmaf(u.x, v.x, fmaf(u.y, v.y, sum));
        }
    }
    return sum;
}

extern "C" FA_GLOBAL void fa_bwd_preprocess(fa_bwd_args args)
{
    const fa_fwd_args *f = &args.fwd;
    const int batch = blockIdx.z, head = blockIdx.y;
    const int row = blockIdx.x * FA_PREP_ROWS + threadIdx.x;
    const fa_sequence seq = fa_find_sequence(f, batch);
    if (row >= seq.seqlen_q)
        return;
    const long long q_base = f->cu_seqlens_q ? seq.q_row0 : (long long)batch * f->seqlen_q;
    const long long slot = (long long)head * f->total_q + q_base + row;
    const unsigned short *o = (const unsigned short *)f->out + batch * f->o_batch +
                              (seq.q_row0 + row) * f->o_row + head * f->o_head;
    const unsigned short *d_o = (const unsigned short *)args.dout + batch * args.do_batch +
                                (seq.q_row0 + row) * args.do_row + head * args.do_head;
    args.delta[slot] = fa_dot_row(o, d_o, f->head_dim, args.out_bf16);
    float lse = f->lse[batch * f->lse_batch + head * f->lse_head + (seq.q_row0 + row) * f->lse_row];
    args.lse_log2[slot] = lse == -INFINITY ? INFINITY : lse * 1.4426950408889634f;
}

#endif /* FA_ATTN_BWD_PREP_H */
