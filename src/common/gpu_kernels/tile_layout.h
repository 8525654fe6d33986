/*
 * tile_layout.h - the row layout of the GPU kernels' shared tiles of 16-bit elements
 * (XOR swizzle or padding), written once: attn_tile.h and the vendors' fragment loaders
 * use it, and the CPU tests check the NVIDIA loaders' address arithmetic against it
 * (tests/test_nv_layouts.cpp). Plain C, host and device.
 */
#ifndef FA_TILE_LAYOUT_H
#define FA_TILE_LAYOUT_H

#include "api/fa_hd.h"

/* Element offset of chunk `chunk` (8 elements, 16 bytes) of row `row` in a shared tile of
 * `pitch` elements per row. Pitches of a multiple of 64 elements (whole groups of 8
 * chunks, 128 bytes) are XOR-swizzled: chunk c of row r sits at c ^ (r & 7) in its group.
 * Other rows (their widths are multiples of 16 elements in every instance) carry one chunk
 * of padding (FA_FWD_SMEM_PITCH), which makes the pitch an odd number of chunks. Either
 * way the 8 rows one ldmatrix phase reads fall in 8 distinct 16-byte bank groups. */
#define FA_TILE_SWIZZLED(pitch) ((pitch) % 64 == 0)
/* A tile of `rows` rows keeps the next one 128-byte aligned, which the vendors' fragment
 * address arithmetic may rely on (src/cuda/fa_nv_layouts.h, fa_nv_frag_addr). */
#define FA_TILE_KEEPS_ALIGNMENT(rows, pitch) (((rows) * (pitch) * 2) % 128 == 0)
FA_HD int fa_tile_offset(int pitch, int row, int chunk)
{
    return row * pitch + (FA_TILE_SWIZZLED(pitch) ? (chunk ^ (row & 7)) : chunk) * 8;
}

/* Element offset of key `key` of row `row` (a head-dim index) in a Vᵀ tile ([d][key], the
 * Q-in-registers forward's; FA_VT_PITCH). Keys go in groups of 4, which a B fragment
 * reads as one 8-byte piece; within each 32 keys a group sits at g ^ ((row / 8) & 7).
 * A store instruction's lanes write 8-row blocks (one head-dim chunk each) at one or two
 * keys, so unswizzled, all its blocks would start in one or two banks; XOR-ed, eight
 * blocks start in eight different banks (bank analysis: tests/test_amd_layouts.cpp). */
FA_HD int fa_vt_offset(int pitch, int row, int key)
{
    return row * pitch + (key & ~31) + ((((key >> 2) & 7) ^ ((row >> 3) & 7)) << 2) + (key & 3);
}

#endif /* FA_TILE_LAYOUT_H */
