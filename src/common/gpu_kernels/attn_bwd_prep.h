/*
 * attn_bwd_prep.h - the backward's preprocess kernel, written once for every vendor:
 * per query row and head, D = rowsum(dO ∘ O) and the LSE in log2 units (+inf for rows
 * that saw no key, so their recomputed P is exactly 0), both fp32 in [heads][total_q],
 * and the row of the fp32 dQ accumulator zeroed when dQ is summed by atomics (and its
 * order count when those adds are ordered); and the
 * step after the dK/dV pass that turns that accumulator (dq_accum.h's layout) into dQ.
 * The preprocess takes one thread per row; the element type is a run-time flag (one
 * instance serves both). Included once by the vendor's shared-kernels translation unit.
 */
#ifndef FA_ATTN_BWD_PREP_H
#define FA_ATTN_BWD_PREP_H

#include "fa_device.h"
#include "gpu_kernels/attn_args.h"
#include "gpu_kernels/attn_sequence.h"
#include "gpu_kernels/dq_accum.h"

#if FA_PREP_ROWS % FA_MMA_M != 0
#error "a preprocess block must hold whole row blocks of the dQ accumulator"
#endif

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

/* The block's FA_PREP_ROWS query rows of one (head, batch) (the pairs as launch_grid.h
 * lays them out): how many exist (none in a folded grid's blocks past the last pair, nor
 * in a sequence the device check found bad), and
 * where they start in the [heads][total_q] row arrays. */
typedef struct fa_prep_rows {
    int head, batch;          /* batch: seq.batch too; the kernels read this copy     */
    int row0, count;          /* the block's first row of the sequence, rows it has      */
    fa_sequence seq;
    long long q_global_row0;  /* the sequence's first row in [total_q] (fa_global_q_row0) */
    long long slot0;          /* the block's first row in [heads][total_q]                */
} fa_prep_rows;

FA_DEVICE fa_prep_rows fa_block_rows(const fa_fwd_args *f)
{
    fa_prep_rows r = {};
    unsigned head, batch;
    fa_block_pair(f->heads, f->batch, &head, &batch);
    if (batch == (unsigned)f->batch) /* past the last pair */
        return r;
    r.head = (int)head;
    r.batch = (int)batch;
    r.seq = fa_find_sequence(f, r.batch);
    r.q_global_row0 = fa_global_q_row0(f, r.batch, r.seq.q_row0);
    r.row0 = blockIdx.x * FA_PREP_ROWS;
    r.count = fa_sequence_bad(f, r.batch) ? 0 : min(FA_PREP_ROWS, r.seq.seqlen_q - r.row0);
    r.slot0 = fa_head_row(f, r.head, r.q_global_row0 + r.row0);
    return r;
}

extern "C" FA_GLOBAL void FA_CAT(FA_KERNEL_PREFIX, bwd_preprocess)(fa_bwd_args args)
{
    const fa_fwd_args *f = &args.fwd;
    const fa_prep_rows rows = fa_block_rows(f);
    if (rows.count <= 0)
        return;
    const int batch = rows.batch, head = rows.head;
    const fa_sequence seq = rows.seq;
    /* The block's dQ accumulator rows are contiguous: zero them with coalesced stores. */
    if (args.dq_accum) {
        float4 *acc = (float4 *)(args.dq_accum + rows.slot0 * f->head_dim);
        for (int i = threadIdx.x; i < rows.count * f->head_dim / 4; i += FA_PREP_ROWS)
            acc[i] = make_float4(0.f, 0.f, 0.f, 0.f);
    }
    if ((int)threadIdx.x >= rows.count)
        return;
    const int row = rows.row0 + threadIdx.x;
    const unsigned short *o =
        (const unsigned short *)f->out + fa_row_at(&f->out_layout, batch, seq.q_row0 + row, head);
    const unsigned short *d_o =
        (const unsigned short *)args.dout + fa_row_at(&args.dout_layout, batch, seq.q_row0 + row, head);
    args.delta[rows.slot0 + threadIdx.x] = fa_dot_row(o, d_o, f->head_dim, args.out_bf16);
    if (args.dq_order)
        args.dq_order[rows.slot0 + threadIdx.x] = 0;
    float lse = f->lse[fa_lse_at(&f->lse_layout, batch, head, seq.q_row0 + row)];
    args.lse_log2[rows.slot0 + threadIdx.x] = lse == -INFINITY ? INFINITY : lse * 1.4426950408889634f;
}

FA_DEVICE uint32_t fa_pack2_dq(float lo, float hi, int bf16)
{
    return bf16 ? fa_pack2_bf16(lo, hi) : fa_pack2_f16(lo, hi);
}

/* `count` rows of a row-major part of the accumulator (acc_rows: the first one) -> dQ
 * rows (dq_rows: the first one). A thread converts 8 consecutive
 * elements; consecutive threads take consecutive chunks of a row, then the next row, so
 * reads and writes are coalesced. */
FA_DEVICE void fa_convert_rows(unsigned short *dq_rows, long long dq_row, const float *acc_rows, int count,
                               int head_dim, float s, int bf16)
{
    const int chunks = head_dim / 8;
    for (int i = threadIdx.x; i < count * chunks; i += FA_PREP_ROWS) {
        const int r = i / chunks, c = i % chunks;
        const float4 *acc = (const float4 *)(acc_rows + (long long)r * head_dim) + 2 * c;
        const float4 lo = acc[0], hi = acc[1];
        uint4 packed;
        packed.x = fa_pack2_dq(lo.x * s, lo.y * s, bf16);
        packed.y = fa_pack2_dq(lo.z * s, lo.w * s, bf16);
        packed.z = fa_pack2_dq(hi.x * s, hi.y * s, bf16);
        packed.w = fa_pack2_dq(hi.z * s, hi.w * s, bf16);
        *((uint4 *)(dq_rows + r * dq_row) + c) = packed;
    }
}

/* A fragment-ordered row block (dq_accum.h) -> its FA_MMA_M dQ rows: a thread takes one
 * lane's registers of one MMA tile (contiguous, so reads are coalesced) and stores them
 * where fa_acc_row / fa_acc_col put them, register pairs together. */
FA_DEVICE void fa_convert_fragments(unsigned short *dq_rows, long long dq_row, const float *block, int head_dim,
                                    float s, int bf16)
{
    for (int i = threadIdx.x; i < head_dim / FA_MMA_N * FA_WARP_SIZE; i += FA_PREP_ROWS) {
        const int tile = i / FA_WARP_SIZE, lane = i % FA_WARP_SIZE;
        const float *v = block + (long long)tile * FA_MMA_M * FA_MMA_N + lane * FA_ACC_REGS;
#pragma unroll
        for (int r = 0; r < FA_ACC_REGS; r += 2) {
            unsigned short *dst = dq_rows + fa_acc_row(lane, r) * dq_row + tile * FA_MMA_N + fa_acc_col(lane, r);
            const uint32_t pair = fa_pack2_dq(v[r] * s, v[r + 1] * s, bf16);
#if FA_ACC_PAIR_STRIDE == 1
            *(uint32_t *)dst = pair;
#else
            dst[0] = (unsigned short)pair;
            dst[FA_ACC_PAIR_STRIDE] = (unsigned short)(pair >> 16);
#endif
        }
    }
}

/* dQ = scale · accumulator, as fp16/bf16 rows (same grid as the preprocess), row block
 * by row block in the accumulator's layout. */
extern "C" FA_GLOBAL void FA_CAT(FA_KERNEL_PREFIX, bwd_convert_dq)(fa_bwd_args args)
{
    const fa_fwd_args *f = &args.fwd;
    const fa_prep_rows rows = fa_block_rows(f);
    const fa_sequence seq = rows.seq;
    const float *head_acc = args.dq_accum + fa_dq_accum_head(f, rows.head);
    unsigned short *dq =
        (unsigned short *)args.dq + fa_row_at(&args.dq_layout, rows.batch, seq.q_row0, rows.head);
    const long long dq_row = args.dq_layout.row;
    /* Counted from the block's first row: rb itself would step past 2^31 - 1 after the
     * last row block of a sequence of nearly 2^31 rows. */
    for (int i = 0; i < rows.count; i += FA_MMA_M) {
        const int rb = rows.row0 + i;
        const float *acc = head_acc + (rows.q_global_row0 + rb) * f->head_dim;
        if (fa_dq_accum_fragment_order(rb, seq.seqlen_q, f->head_dim, FA_MMA_M, FA_MMA_N))
            fa_convert_fragments(dq + rb * dq_row, dq_row, acc, f->head_dim, args.scale, args.out_bf16);
        else
            fa_convert_rows(dq + rb * dq_row, dq_row, acc, min(FA_MMA_M, seq.seqlen_q - rb), f->head_dim,
                            args.scale, args.out_bf16);
    }
}

#endif /* FA_ATTN_BWD_PREP_H */
