/*
 * dq_accum.h - where the fp32 dQ accumulator of the atomic backward path keeps element
 * (row, col) of a head, written once for the dK/dV kernel that adds into it and the
 * kernel that converts it. Included after fa_device.h.
 *
 * The accumulator is [heads][total_q][head_dim]. Each block of FA_MMA_M whole rows of a
 * sequence (rows row_block .. row_block + FA_MMA_M - 1, row_block a multiple of
 * FA_MMA_M) stays at the same place, FA_MMA_M * head_dim floats, but is kept in fragment
 * order: the FA_MMA_M x FA_MMA_N tile at column col_block comes at offset
 * col_block * FA_MMA_M, and inside it lane l's accumulator registers r = 0 ..
 * FA_ACC_REGS - 1 (element (fa_acc_row(l, r), fa_acc_col(l, r))) at l * FA_ACC_REGS + r.
 * A warp's atomics then cover one contiguous stretch of memory per MMA tile instead of
 * FA_MMA_M rows of it: the row-major layout made every atomic touch eight cache lines,
 * and the global-memory queue set the pace (bench/NOTES.md, b3). A sequence's last,
 * partial row block, and every block of a head dim that is not a multiple of FA_MMA_N,
 * stay row-major.
 */
#ifndef FA_DQ_ACCUM_H
#define FA_DQ_ACCUM_H

/* Whether the row block starting at sequence row row_block is in fragment order. */
FA_DEVICE int fa_dq_accum_fragment_order(int row_block, int seqlen_q, int head_dim)
{
    return row_block + FA_MMA_M <= seqlen_q && head_dim % FA_MMA_N == 0;
}

/* Offset of the MMA tile (row_block, col_block) of a fragment-ordered block from the
 * head's start, with seq_row0 the sequence's first row in the [total_q] rows. */
FA_DEVICE long long fa_dq_accum_tile(long long seq_row0, int row_block, int col_block, int head_dim)
{
    return (seq_row0 + row_block) * head_dim + (long long)col_block * FA_MMA_M;
}

#endif /* FA_DQ_ACCUM_H */
