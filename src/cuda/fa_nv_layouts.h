/*
 * fa_nv_layouts.h - which element of a tile each lane holds or addresses, for the NVIDIA
 * primitives exactly as src/cuda/fa_device.h uses them, and the shared-memory address
 * arithmetic of its fragment loads. Plain C, host and device: fa_device.h is written with
 * these functions and tests/test_nv_layouts.cpp checks them on the CPU.
 *
 *   - mma.sync m16n8k16, fp32 accumulators (PTX ISA, "Matrix Fragments for mma.m16n8k16"):
 *     registers c0, c1 of lane l in row l/4, c2, c3 in row l/4 + 8, columns 2 (l % 4) + 0/1.
 *   - ldmatrix .x4: lane l supplies the row address of row l % 8 of matrix l / 8. Each
 *     loader gives its lanes a (row, chunk) of the 16-row x 2-chunk block it reads, the
 *     four 8x8 matrices ordered as the MMA operand registers expect them.
 *   - wgmma m64nNk16, fp32 accumulators (PTX ISA 9.7.15.5.1.1.1, "Matrix Fragments for
 *     wgmma.mma_async.m64nNk16", accumulator D): thread t of the warpgroup, warp w = t/32,
 *     lane l: register i in row 16w + l/4 + 8 ((i/2) % 2), column 8 (i/4) + 2 (l % 4) + i % 2.
 *   - The 128-byte swizzle of wgmma operands and TMA boxes (PTX ISA 9.7.15.5.1.2, "Shared
 *     Memory Matrix Layout", 128B swizzling mode; CUDA driver API, CUtensorMapSwizzle):
 *     rows of 128 bytes, the 16-byte chunk c of row r at chunk c ^ (r % 8).
 */
#ifndef FA_NV_LAYOUTS_H
#define FA_NV_LAYOUTS_H

#include "gpu_kernels/tile_layout.h"

FA_HD int fa_nv_acc_row(int lane, int reg) { return (lane >> 2) + 8 * (reg >> 1); }
FA_HD int fa_nv_acc_col(int lane, int reg) { return 2 * (lane & 3) + (reg & 1); }

/* A operand of tile[row][k]: matrices rows 0-7 / 8-15 at k-chunk 0, then at k-chunk 1. */
FA_HD int fa_nv_lda_row(int lane) { return lane & 15; }
FA_HD int fa_nv_lda_chunk(int lane) { return lane >> 4; }
/* Two B operands of K stored [n][k] (B = Kᵀ): n 0-7 at k-chunks 0, 1, then n 8-15. The
 * A operand of Aᵀ stored [k][m] (.trans) gives its lanes the same roles: k 0-7 at
 * m-chunks 0, 1, then k 8-15. */
FA_HD int fa_nv_ldbt_row(int lane) { return (lane & 7) + ((lane >> 4) << 3); }
FA_HD int fa_nv_ldbt_chunk(int lane) { return (lane >> 3) & 1; }
/* Two B operands of V stored [k][n] (.trans): k 0-7, 8-15 at n-chunk 0, then n-chunk 1. */
FA_HD int fa_nv_ldb_row(int lane) { return (lane & 7) + (((lane >> 3) & 1) << 3); }
FA_HD int fa_nv_ldb_chunk(int lane) { return lane >> 4; }

/* Shared byte address of chunk kc + lane_chunk of row row0 + lane_row of a tile at
 * `tile` with tile_layout.h's layout, given the lane's part lane_offset =
 * fa_tile_offset(pitch, lane_row, lane_chunk), where row0 is a multiple of 8 (a whole
 * swizzle period), kc is even and lane_chunk is 0 or 1. The lane's part is then the same
 * at every call of a kernel and the call's part is constant: in a swizzled tile moving
 * to chunk kc flips the address's chunk bits (4-6) by kc & 7 and adds whole 128-byte
 * groups, which holds when the tile starts 128-byte aligned (FA_TILE_KEEPS_ALIGNMENT); a
 * padded tile just adds kc chunks. Recomputing row * pitch and the XOR per load cost as
 * many integer instructions per step as the MMAs (bench/NOTES.md, b3a). */
FA_HD unsigned fa_nv_frag_addr(unsigned tile, int lane_offset, int pitch, int row0, int kc)
{
    const unsigned row = tile + 2u * (unsigned)(lane_offset + row0 * pitch);
    if (!FA_TILE_SWIZZLED(pitch))
        return row + 16u * (unsigned)kc;
    return (row ^ ((unsigned)(kc & 7) << 4)) + ((unsigned)(kc >> 3) << 7);
}

/* wgmma m64nNk16 accumulator register `reg` of thread `t` (0..127) of a warpgroup. */
FA_HD int fa_wg_acc_row(int t, int reg) { return 16 * (t >> 5) + ((t & 31) >> 2) + 8 * ((reg >> 1) & 1); }
FA_HD int fa_wg_acc_col(int t, int reg) { return 8 * (reg >> 2) + 2 * (t & 3) + (reg & 1); }

/* Byte offset of 16-bit element (row, col) of a 128-byte-swizzled tile of 64-element rows
 * (col < 64; wider operands are several such tiles, each rows * 128 bytes). The tile's
 * start must be 1024-byte aligned for the hardware's pattern to match this one. */
FA_HD unsigned fa_sw128_offset(int row, int col)
{
    return 128u * (unsigned)row + 16u * (unsigned)((col >> 3) ^ (row & 7)) + 2u * (unsigned)(col & 7);
}

#endif /* FA_NV_LAYOUTS_H */
