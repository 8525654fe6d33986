/*
 * attn_bwd_prep.h - the backward's preprocess kernel, written once for every vendor:
 * per query row and head, D = rowsum(dO ∘ O) and the LSE in log2 units (+inf for rows
 * that saw no key, so their recomputed P is exactly 0), both fp32 in [heads][total_q],
 * and the row of the fp32 dQ accumulator zeroed when dQ is summed by atomics; and the
 * step after the dK/dV pass that turns that accumulator into dQ. One thread per row; the
 * element type is a run-time flag (one instance serves both). Included once by the
 * vendor translation unit after fa_device.h.
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
    if (args.dq_accum) {
        float4 *acc = (float4 *)(args.dq_accum + slot * f->head_dim);
        for (int c = 0; c < f->head_dim / 4; ++c)
            acc[c] = make_float4(0.f, 0.f, 0.f, 0.f);
    }
}

/* dQ = scale · accumulator, as fp16/bf16 rows (same grid as the preprocess). */
extern "C" FA_GLOBAL void fa_bwd_convert_dq(fa_bwd_args args)
{
    const fa_fwd_args *f = &args.fwd;
    const int batch = blockIdx.z, head = blockIdx.y;
    const int row = blockIdx.x * FA_PREP_ROWS + threadIdx.x;
    const fa_sequence seq = fa_find_sequence(f, batch);
    if (row >= seq.seqlen_q)
        return;
    const long long q_base = f->cu_seqlens_q ? seq.q_row0 : (long long)batch * f->seqlen_q;
    const float4 *acc = (const float4 *)(args.dq_accum + ((long long)head * f->total_q + q_base + row) * f->head_dim);
    uint4 *dq = (uint4 *)((unsigned short *)args.dq + batch * args.dq_batch + (seq.q_row0 + row) * args.dq_row +
                          head * args.dq_head);
    for (int c = 0; c < f->head_dim / 8; ++c) {
        float4 lo = acc[2 * c], hi = acc[2 * c + 1];
        const float s = args.scale;
        uint4 packed;
        if (args.out_bf16) {
            packed.x = fa_pack2_bf16(lo.x * s, lo.y * s); packed.y = fa_pack2_bf16(lo.z * s, lo.w * s);
            packed.z = fa_pack2_bf16(hi.x * s, hi.y * s); packed.w = fa_pack2_bf16(hi.z * s, hi.w * s);
        } else {
            packed.x = fa_pack2_f16(lo.x * s, lo.y * s); packed.y = fa_pack2_f16(lo.z * s, lo.w * s);
            packed.z = fa_pack2_f16(hi.x * s, hi.y * s); packed.w = fa_pack2_f16(hi.z * s, hi.w * s);
        }
        dq[c] = packed;
    }
}

#endif /* FA_ATTN_BWD_PREP_H */
