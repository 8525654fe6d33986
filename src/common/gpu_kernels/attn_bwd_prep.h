/*
 * attn_bwd_prep.h - the backward's preprocess kernel, written once for every vendor:
 * per query row and head, D = rowsum(dO ∘ O) and the LSE in log2 units (+inf for rows
 * that saw no key, so their recomputed P is exactly 0), both fp32 in [heads][total_q],
 * and the row of the fp32 dQ accumulator zeroed when dQ is summed by atomics (and its
 * order count when those adds are ordered); and the step after the dK/dV pass that
 * turns that accumulator (dq_accum.h's layout) into dQ. Both are memory-bound: a block
 * takes FA_PREP_ROWS rows with FA_PREP_THREADS threads, consecutive threads on
 * consecutive 16-byte chunks of a row, so every load and store is coalesced. The
 * element type is a run-time flag (one instance serves both). Included once by the
 * vendor's shared-kernels translation unit.
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

#if FA_PREP_THREADS % FA_PREP_ROWS != 0 || FA_MAX_HEAD_DIM % 8 != 0
#error "a preprocess block's threads cover its rows evenly; rows are whole 8-element chunks"
#endif
#if FA_MMA_M * FA_MMA_N != FA_WARP_SIZE * FA_ACC_REGS
#error "fa_stage_dq_block scatters an MMA tile as its lanes' accumulator registers"
#endif
/* Shared-memory row pitches, one bank (4 floats for the staged dQ, which float4 reads
 * need aligned) past the row's length, so that a row's thread summing its chunks and
 * the scatter of accumulator registers into rows do not hit one bank from every row. */
#define FA_PREP_CHUNK_PITCH (FA_MAX_HEAD_DIM / 8 + 1)
#define FA_PREP_STAGE_PITCH(head_dim) ((head_dim) + 4)

/* The preprocess's per-chunk dot products, and the conversion's staged row block. */
typedef struct fa_prep_partials {
    float dot[FA_PREP_ROWS * FA_PREP_CHUNK_PITCH];
} fa_prep_partials;
typedef struct fa_dq_stage {
    float4 v[FA_MMA_M * FA_PREP_STAGE_PITCH(FA_MAX_HEAD_DIM) / 4];
} fa_dq_stage;

/* Σ a[i] · b[i] over one 8-element chunk of two fp16/bf16 rows. */
FA_DEVICE float fa_dot_chunk(const unsigned short *a, const unsigned short *b, int bf16)
{
    const uint4 x = *(const uint4 *)a, y = *(const uint4 *)b;
    const uint32_t xs[4] = {x.x, x.y, x.z, x.w}, ys[4] = {y.x, y.y, y.z, y.w};
    float sum = 0.f;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        float2 u = bf16 ? fa_unpack2_bf16(xs[i]) : fa_unpack2_f16(xs[i]);
        float2 v = bf16 ? fa_unpack2_bf16(ys[i]) : fa_unpack2_f16(ys[i]);
        sum = fmaf(u.x, v.x, fmaf(u.y, v.y, sum));
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

/* D of the block's rows: each thread takes chunks (row-major over the block's rows, so a
 * warp reads whole stretches of rows), the chunks' dot products land in shared memory,
 * and each row's thread sums its chunks in order (the same D on every run). */
extern "C" FA_GLOBAL void FA_CAT(FA_KERNEL_PREFIX, bwd_preprocess)(fa_bwd_args args)
{
    FA_SHARED_OBJECT(fa_prep_partials, partial);
    const fa_fwd_args *f = &args.fwd;
    const fa_prep_rows rows = fa_block_rows(f);
    if (rows.count <= 0)
        return;
    const int batch = rows.batch, head = rows.head, chunks = f->head_dim / 8;
    const fa_sequence seq = rows.seq;
    /* The block's dQ accumulator rows are contiguous: zero them with coalesced stores. */
    if (args.dq_accum) {
        float4 *acc = (float4 *)(args.dq_accum + rows.slot0 * f->head_dim);
        for (int i = threadIdx.x; i < rows.count * f->head_dim / 4; i += FA_PREP_THREADS)
            acc[i] = make_float4(0.f, 0.f, 0.f, 0.f);
    }
    const unsigned short *o = (const unsigned short *)f->out + fa_row_at(&f->out_layout, batch, seq.q_row0, head);
    const unsigned short *d_o =
        (const unsigned short *)args.dout + fa_row_at(&args.dout_layout, batch, seq.q_row0, head);
    for (int i = threadIdx.x; i < rows.count * chunks; i += FA_PREP_THREADS) {
        const int r = i / chunks, c = i - r * chunks;
        const long long row = rows.row0 + r;
        partial.dot[r * FA_PREP_CHUNK_PITCH + c] =
            fa_dot_chunk(o + row * f->out_layout.row + 8 * c, d_o + row * args.dout_layout.row + 8 * c, args.out_bf16);
    }
    fa_barrier();
    const int r = threadIdx.x;
    if (r >= rows.count)
        return;
    float sum = 0.f;
    for (int c = 0; c < chunks; ++c)
        sum += partial.dot[r * FA_PREP_CHUNK_PITCH + c];
    args.delta[rows.slot0 + r] = sum;
    if (args.dq_order)
        args.dq_order[rows.slot0 + r] = 0;
    float lse = f->lse[fa_lse_at(&f->lse_layout, batch, head, seq.q_row0 + rows.row0 + r)];
    args.lse_log2[rows.slot0 + r] = lse == -INFINITY ? INFINITY : lse * 1.4426950408889634f;
}

FA_DEVICE uint32_t fa_pack2_dq(float lo, float hi, int bf16)
{
    return bf16 ? fa_pack2_bf16(lo, hi) : fa_pack2_f16(lo, hi);
}

/* One row block of the accumulator (FA_MMA_M rows from the head's `acc`), `rows` of them
 * valid, row-major into `staged` (FA_MMA_M rows of FA_PREP_STAGE_PITCH): a
 * fragment-ordered block by one
 * lane's registers of one MMA tile per thread (contiguous reads), each register to
 * where fa_acc_row / fa_acc_col put it (in the transposed order, dq_accum.h, the tile's
 * FA_MMA_N rows and FA_MMA_M columns the other way round); a row-major one as it is. */
FA_DEVICE void fa_stage_dq_block(float *staged, const float *acc, int fragments, int transposed, int rows,
                                 int head_dim)
{
    const int pitch = FA_PREP_STAGE_PITCH(head_dim), row_chunks = head_dim / 4;
    if (!fragments) {
        for (int i = threadIdx.x; i < rows * row_chunks; i += FA_PREP_THREADS) {
            const int r = i / row_chunks, c = i - r * row_chunks;
            ((float4 *)staged)[(r * pitch) / 4 + c] = ((const float4 *)acc)[i];
        }
        return;
    }
    for (int i = threadIdx.x; i < head_dim / FA_MMA_N * FA_WARP_SIZE; i += FA_PREP_THREADS) {
        const int tile = i / FA_WARP_SIZE, lane = i % FA_WARP_SIZE;
        const float *v = acc + (long long)tile * FA_MMA_M * FA_MMA_N + lane * FA_ACC_REGS;
        /* Transposed: tile `halves` e + h holds rows h * FA_MMA_N .. and columns
         * e * FA_MMA_M .. (dq_accum.h's order). */
        const int halves = FA_MMA_M / FA_MMA_N;
        const int row0 = transposed ? FA_MMA_N * (tile % halves) : 0;
        const int col0 = transposed ? FA_MMA_M * (tile / halves) : FA_MMA_N * tile;
#pragma unroll
        for (int r = 0; r < FA_ACC_REGS; ++r) {
            const int row = transposed ? fa_acc_col(lane, r) : fa_acc_row(lane, r);
            const int col = transposed ? fa_acc_row(lane, r) : fa_acc_col(lane, r);
            staged[(row0 + row) * pitch + col0 + col] = v[r];
        }
    }
}

/* dQ = scale · accumulator, as fp16/bf16 rows (same grid as the preprocess), row block
 * by row block: staged row-major in shared memory (fa_stage_dq_block), then written a
 * 16-byte chunk of a row per thread, consecutive threads along the row. */
extern "C" FA_GLOBAL void FA_CAT(FA_KERNEL_PREFIX, bwd_convert_dq)(fa_bwd_args args)
{
    FA_SHARED_OBJECT(fa_dq_stage, stage);
    float4 *staged4 = stage.v;
    float *staged = (float *)stage.v;
    const fa_fwd_args *f = &args.fwd;
    const fa_prep_rows rows = fa_block_rows(f);
    const fa_sequence seq = rows.seq;
    const float *head_acc = args.dq_accum + fa_dq_accum_head(f, rows.head);
    unsigned short *dq =
        (unsigned short *)args.dq + fa_row_at(&args.dq_layout, rows.batch, seq.q_row0, rows.head);
    const long long dq_row = args.dq_layout.row;
    const int chunks = f->head_dim / 8, pitch4 = FA_PREP_STAGE_PITCH(f->head_dim) / 4;
    const float s = args.scale;
    /* Counted from the block's first row: rb itself would step past 2^31 - 1 after the
     * last row block of a sequence of nearly 2^31 rows. */
    for (int i = 0; i < rows.count; i += FA_MMA_M) {
        const int rb = rows.row0 + i, valid = min(FA_MMA_M, rows.count - i);
        const int fragments = args.dq_transposed
                                  ? fa_dq_accum_fragment_order_t(rb, seq.seqlen_q, f->head_dim, FA_MMA_M)
                                  : fa_dq_accum_fragment_order(rb, seq.seqlen_q, f->head_dim, FA_MMA_M, FA_MMA_N);
        fa_stage_dq_block(staged, head_acc + (rows.q_global_row0 + rb) * f->head_dim, fragments, args.dq_transposed,
                          valid, f->head_dim);
        fa_barrier();
        for (int j = threadIdx.x; j < valid * chunks; j += FA_PREP_THREADS) {
            const int r = j / chunks, c = j - r * chunks;
            const float4 lo = staged4[r * pitch4 + 2 * c], hi = staged4[r * pitch4 + 2 * c + 1];
            uint4 packed;
            packed.x = fa_pack2_dq(lo.x * s, lo.y * s, args.out_bf16);
            packed.y = fa_pack2_dq(lo.z * s, lo.w * s, args.out_bf16);
            packed.z = fa_pack2_dq(hi.x * s, hi.y * s, args.out_bf16);
            packed.w = fa_pack2_dq(hi.z * s, hi.w * s, args.out_bf16);
            *((uint4 *)(dq + (rb + r) * dq_row) + c) = packed;
        }
        fa_barrier(); /* the stage is read before the next block overwrites it */
    }
}

#endif /* FA_ATTN_BWD_PREP_H */
