/*
 * wg_stage.h - the warpgroup kernels' shared tiles outside their products, in the layout a
 * TMA load writes and a TMA store reads (fa_wg_tile_offset: 64-column blocks of 128-byte
 * rows, 128-byte swizzled): the epilogue staging (attn_fwd_ws.h's O, attn_bwd_ws.h's dK
 * and dV: a warp's fp32 accumulator tiles, scaled and packed to 16-bit pairs, from where
 * one thread stores the whole tile), and the rows of a loaded tile that lie past a
 * sequence's end set to zero. Written once against the warpgroup vocabulary.
 */
#ifndef FA_WG_STAGE_H
#define FA_WG_STAGE_H

#include "fa_device.h"
#include "gpu_kernels/attn_tile.h" /* FA_ACC_COLS */

/* `ntiles` accumulator tiles of 8 columns from col0 over the warp's 16 rows from row0,
 * of a tile of `rows` rows at shared address `tile`; the registers of row group g times
 * scale[g]. 4-byte stores: the 8 rows of one instruction fall in 8 different 16-byte
 * chunks (the swizzle), so no two lanes of it share a bank. */
FA_DEVICE void fa_wg_stage_acc(uint32_t tile, int rows, int row0, int col0, const float (*acc)[FA_ACC_REGS],
                               int ntiles, const float scale[FA_ACC_ROWS])
{
    const int lane = fa_lane();
#pragma unroll
    for (int nf = 0; nf < ntiles; ++nf)
#pragma unroll
        for (int r = 0; r < FA_ACC_REGS; r += 2) {
            const float s = scale[r / FA_ACC_COLS];
            fa_store_shared_u32(tile + fa_wg_tile_offset(rows, row0 + fa_acc_row(lane, r),
                                                         col0 + nf * FA_MMA_N + fa_acc_col(lane, r)),
                                fa_pack2(acc[nf][r] * s, acc[nf][r + 1] * s));
        }
}

/* Rows `from` .. rows - 1 of a tile of `rows` rows and `col_blocks` 64-column blocks at
 * `tile` set to zero in 16-byte chunks, by threads thread, thread + threads, ... (whole
 * 128-byte rows: the swizzle only permutes chunks within a row). TMA loads rows past a
 * map's end as zeros; a varlen map's rows after a sequence are the next one's, and
 * seqused_k's are unused cache, which may hold anything, Inf included: zeroed, their
 * products with masked (zero) probabilities stay 0, never 0 x Inf. */
FA_DEVICE void fa_wg_zero_rows(unsigned char *tile, int rows, int from, int col_blocks, int thread, int threads)
{
    const int chunks = (rows - from) * 8; /* per column block */
    for (int i = thread; i < chunks * col_blocks; i += threads) {
        const int block = i / chunks, rest = i % chunks;
        *(uint4 *)(tile + block * 128 * rows + (from + rest / 8) * 128 + (rest % 8) * 16) =
            make_uint4(0u, 0u, 0u, 0u);
    }
}

#endif /* FA_WG_STAGE_H */
