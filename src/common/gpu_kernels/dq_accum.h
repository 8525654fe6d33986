/*
 * dq_accum.h - where the fp32 dQ accumulator of the atomic backward path keeps element
 * (row, col) of a head, written once for the dK/dV kernel that adds into it and the
 * kernel that converts it.
 *
 * The accumulator is [heads][total_q][head_dim]. Each block of FA_MMA_M whole rows of a
 * sequence (rows row_block .. row_block + FA_MMA_M - 1, row_block a multiple of
 * FA_MMA_M) stays at the same place, FA_MMA_M * head_dim floats, but is kept in fragment
 * order: the FA_MMA_M x FA_MMA_N tile at column col_block comes at offset
 * col_block * FA_MMA_M, and inside it lane l's accumulator registers r = 0 ..
 * FA_ACC_REGS - 1 (element (fa_acc_row(l, r), fa_acc_col(l, r))) at l * FA_ACC_REGS + r.
 * A warp's atomics then cover one contiguous stretch of memory per MMA tile instead of
 * FA_MMA_M rows of it: in row-major order every atomic touches eight cache lines, and
 * the global-memory queue sets the pace. A sequence's last,
 * partial row block, and every block of a head dim that is not a multiple of FA_MMA_N,
 * stay row-major. Plain C, host and device, with the MMA tile shape as arguments so that
 * tests/test_dq_accum.cpp can replay both kernels' use of it on the CPU for every vendor.
 *
 * The transposed order (a warpgroup backward that computes dQᵀ, attn_bwd_ws.h's
 * FA_BWS_DQ_T; the call says so in fa_bwd_args.dq_transposed): the same row blocks stay
 * in place, but inside a fragment-ordered one the MMA tiles are those of dQᵀ, tile_m
 * columns by tile_n rows: the tile of rows row_block + h * tile_n .. + tile_n - 1 and
 * columns col_block .. col_block + tile_m - 1 (col_block a multiple of tile_m) comes at
 * offset col_block * tile_m + h * tile_m * tile_n, and inside it lane l's register r
 * holds element (row fa_acc_col(l, r), column fa_acc_row(l, r)) of it. Head dims that
 * are multiples of tile_m only.
 */
#ifndef FA_DQ_ACCUM_H
#define FA_DQ_ACCUM_H

#include "api/fa_hd.h"

/* Whether the row block starting at sequence row row_block is in fragment order, for
 * MMA tiles of tile_m x tile_n (FA_MMA_M x FA_MMA_N). The block's end is compared as
 * row_block <= seqlen_q - tile_m: the last block of nearly 2^31 rows starts at
 * 2^31 - tile_m, where row_block + tile_m wraps. */
FA_HD int fa_dq_accum_fragment_order(int row_block, int seqlen_q, int head_dim, int tile_m, int tile_n)
{
    return row_block <= seqlen_q - tile_m && head_dim % tile_n == 0;
}

/* Offset of the MMA tile (row_block, col_block) of a fragment-ordered block from the
 * head's start, with seq_row0 the sequence's first row in the [total_q] rows. */
FA_HD long long fa_dq_accum_tile(long long seq_row0, int row_block, int col_block, int head_dim, int tile_m)
{
    return (seq_row0 + row_block) * head_dim + (long long)col_block * tile_m;
}

/* Whether that row block is fragment-ordered in the transposed order: whole, and the head
 * dim a multiple of tile_m (the dQᵀ tiles' width). */
FA_HD int fa_dq_accum_fragment_order_t(int row_block, int seqlen_q, int head_dim, int tile_m)
{
    return fa_dq_accum_fragment_order(row_block, seqlen_q, head_dim, tile_m, tile_m);
}

/* Offset of the dQᵀ tile (row_block + h * tile_n, col_block) of a fragment-ordered block
 * in the transposed order, as fa_dq_accum_tile. */
FA_HD long long fa_dq_accum_tile_t(long long seq_row0, int row_block, int h, int col_block, int head_dim, int tile_m,
                                   int tile_n)
{
    return (seq_row0 + row_block) * head_dim + (long long)col_block * tile_m + (long long)h * tile_m * tile_n;
}

#endif /* FA_DQ_ACCUM_H */
