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

/* The block's FA_PREP_ROWS query rows of one (batch, head): how many exist, and where
 * they start in the [heads][total_q] row arrays. */
typedef struct fa_prep_rows {
    int row0, count;
    long long slot0;
} fa_prep_rows;

FA_DEVICE fa_prep_rows fa_block_rows(const fa_fwd_args *f, const fa_sequence *seq)
{
    fa_prep_rows r;
    const long long q_base = f->cu_seqlens_q ? seq->q_row0 : (long long)blockIdx.z * f->seqlen_q;
    r.row0 = blockIdx.x * FA_PREP_ROWS;
    r.count = min(FA_PREP_ROWS, seq->seqlen_q - r.row0);
    r.slot0 = (long long)blockIdx.y * f->total_q + q_base + r.row0;
    return r;
}

extern "C" FA_GLOBAL void fa_bwd_preprocess(fa_bwd_args args)
{
    const fa_fwd_args *f = &args.fwd;
    const int batch = blockIdx.z, head = blockIdx.y;
    const fa_sequence seq = fa_find_sequence(f, batch);
    const fa_prep_rows rows = fa_block_rows(f, &seq);
    if (rows.count <= 0)
        return;
    /* The block's dQ accumulator rows are contiguous: zero them with coalesced stores. */
    if (args.dq_accum) {
        float4 *acc = (float4 *)(args.dq_accum + rows.slot0 * f->head_dim);
        for (int i = threadIdx.x; i < rows.count * f->head_dim / 4; i += FA_PREP_ROWS)
            acc[i] = make_float4(0.f, 0.f, 0.f, 0.f);
    }
    if ((int)threadIdx.x >= rows.count)
        return;
    const int row = rows.row0 + threadIdx.x;
    const unsigned short *o = (const unsigned short *)f->out + batch * f->o_batch +
                              (seq.q_row0 + row) * f->o_row + head * f->o_head;
    const unsigned short *d_o = (const unsigned short *)args.dout + batch * args.do_batch +
                                (seq.q_row0 + row) * args.do_row + head * args.do_head;
    args.delta[rows.slot0 + threadIdx.x] = fa_dot_row(o, d_o, f->head_dim, args.out_bf16);
    float lse = f->lse[batch * f->lse_batch + head * f->lse_head + (seq.q_row0 + row) * f->lse_row];
    args.lse_log2[rows.slot0 + threadIdx.x] = lse == -INFINITY ? INFINITY : lse * 1.4426950408889634f;
}

/* dQ = scale · accumulator, as fp16/bf16 rows (same grid as the preprocess). A thread
 * converts 8 consecutive elements; consecutive threads take consecutive chunks of a row,
 * then the next row, so reads and writes are coalesced. */
extern "C" FA_GLOBAL void fa_bwd_convert_dq(fa_bwd_args args)
{
    const fa_fwd_args *f = &args.fwd;
    const fa_sequence seq = fa_find_sequence(f, blockIdx.z);
    const fa_prep_rows rows = fa_block_rows(f, &seq);
    const int chunks = f->head_dim / 8;
    const float s = args.scale;
    for (int i = threadIdx.x; i < rows.count * chunks; i += FA_PREP_ROWS) {
        const int r = i / chunks, c = i % chunks;
        const float4 *acc = (const float4 *)(args.dq_accum + (rows.slot0 + r) * f->head_dim) + 2 * c;
        const float4 lo = acc[0], hi = acc[1];
        uint4 packed;
        if (args.out_bf16) {
            packed.x = fa_pack2_bf16(lo.x * s, lo.y * s); packed.y = fa_pack2_bf16(lo.z * s, lo.w * s);
            packed.z = fa_pack2_bf16(hi.x * s, hi.y * s); packed.w = fa_pack2_bf16(hi.z * s, hi.w * s);
        } else {
            packed.x = fa_pack2_f16(lo.x * s, lo.y * s); packed.y = fa_pack2_f16(lo.z * s, lo.w * s);
            packed.z = fa_pack2_f16(hi.x * s, hi.y * s); packed.w = fa_pack2_f16(hi.z * s, hi.w * s);
        }
        *((uint4 *)((unsigned short *)args.dq + blockIdx.z * args.dq_batch +
                    (seq.q_row0 + rows.row0 + r) * args.dq_row + blockIdx.y * args.dq_head) + c) = packed;
    }
}

#endif /* FA_ATTN_BWD_PREP_H */
