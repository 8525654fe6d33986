/*
 * attn_tile.h - shared-memory tiles for the GPU kernels (forward and backward), written
 * once for every vendor: the head-dim tiles' pitch (laid out by tile_layout.h) and the
 * asynchronous global->shared tile copy. Included by attn_fwd.h and attn_bwd.h, after the
 * instance macros (FA_INST_D, FA_INST_WARPS).
 */
#ifndef FA_ATTN_TILE_H
#define FA_ATTN_TILE_H

#include "fa_device.h"
#include "gpu_kernels/smem_bytes.h"
#include "gpu_kernels/tile_layout.h"

#define FA_CHUNKS (FA_INST_D / 8)            /* 16-byte chunks per row                  */
/* Rows of head-dim tiles; the layout rule is fa_tile_offset's. */
#define FA_PITCH FA_FWD_SMEM_PITCH(FA_INST_D)
#define FA_THREADS (FA_INST_WARPS * FA_WARP_SIZE)
/* A lane's accumulator registers form FA_ACC_ROWS row groups of FA_ACC_COLS registers,
 * each group in one row (fa_device.h's fragment contract). */
#define FA_ACC_COLS (FA_ACC_REGS / FA_ACC_ROWS)

typedef unsigned short fa_elem; /* fp16 / bf16 storage */

FA_DEVICE int fa_smem_offset(int row, int chunk) { return fa_tile_offset(FA_PITCH, row, chunk); }

/* Where copies go through registers (FA_SYNC_COPIES), a thread issues the global loads
 * of FA_COPY_BATCH of its chunks before it stores any of them to shared memory, so that
 * many 16-byte loads per lane are in flight at once. Issued one at a time, each load was
 * waited for before the next (the compiler kept load and store in pairs): one load per
 * lane in flight, about 1 KiB per wave64 (bench/amd_decode_model.py reads it from the code
 * object). 1 (the default): load and store in turn. The decode family sets it where it
 * does not hold whole tiles (attn_fwd.h); the prefill family holds them (fa_fetch_tile). */
#ifndef FA_COPY_BATCH
#define FA_COPY_BATCH 1
#endif
#define FA_BATCHED_COPIES (FA_SYNC_COPIES && FA_COPY_BATCH > 1)

/* This thread's copies of fa_load_tile: chunk `chunk` of rows row0, row0 + step, ... from
 * src onwards. When `checked`, rows >= rows_valid and chunks past the head dim
 * (col_valid 0) are zero-filled from the always valid address gmem instead. */
FA_DEVICE void fa_load_tile_rows(fa_elem *smem, const fa_elem *src, const fa_elem *gmem, long long row_stride,
                                 int row0, int chunk, int step, int tile_rows, int checked, int rows_valid,
                                 int col_valid)
{
#if FA_BATCHED_COPIES
    const int iters = (tile_rows + step - 1) / step;
#pragma unroll
    for (int g = 0; g < iters; g += FA_COPY_BATCH) {
        fa_chunk held[FA_COPY_BATCH];
        unsigned ok = 0;
#pragma unroll
        for (int j = 0; j < FA_COPY_BATCH && g + j < iters; ++j) {
            const int row = row0 + (g + j) * step;
            const int in_tile = tile_rows % step == 0 || row < tile_rows;
            const int valid = in_tile && (!checked || (col_valid && row < rows_valid));
            held[j] = fa_chunk_load(valid ? src + (long long)(g + j) * step * row_stride : gmem);
            ok |= (unsigned)valid << j;
        }
#pragma unroll
        for (int j = 0; j < FA_COPY_BATCH && g + j < iters; ++j) {
            const int row = row0 + (g + j) * step;
            if (tile_rows % step == 0 || row < tile_rows)
                fa_chunk_store(smem + fa_smem_offset(row, chunk), (ok >> j) & 1 ? held[j] : fa_chunk_zero());
        }
    }
#else
#pragma unroll
    for (int i = 0; i < (tile_rows + step - 1) / step; ++i) {
        int row = row0 + i * step;
        /* A test around the body, not an exit: HIP's compiler unrolls the loop only then. */
        if (tile_rows % step == 0 || row < tile_rows) {
            int valid = !checked || (col_valid && row < rows_valid);
            fa_async_copy16(smem + fa_smem_offset(row, chunk), valid ? src : gmem, valid);
        }
        src += step * row_stride;
    }
#endif
}

/* Copy tile_rows x FA_INST_D elements to shared memory; rows >= rows_valid and columns
 * >= head_dim become zeros, so padded rows and columns contribute nothing (and no stale
 * shared memory can turn into 0 * NaN). Each thread keeps one chunk column and steps
 * down by a fixed row count: one pointer and (mostly) compile-time shared offsets
 * instead of a live address per copy (registers are the scarce resource here). A whole
 * tile, the bulk of any long sequence, skips the per-row checks. */
FA_DEVICE void fa_load_tile(fa_elem *smem, const fa_elem *gmem, long long row_stride,
                            int rows_valid, int head_dim, int tile_rows)
{
    const int step = FA_THREADS / FA_CHUNKS;
    const int row0 = threadIdx.x / FA_CHUNKS;
    const int chunk = threadIdx.x % FA_CHUNKS;
    const fa_elem *src = gmem + row0 * row_stride + chunk * 8;
    /* Head dims whose chunk count does not divide the block leave a few threads idle. */
    if (threadIdx.x >= step * FA_CHUNKS)
        return;
    if (rows_valid >= tile_rows && head_dim == FA_INST_D)
        fa_load_tile_rows(smem, src, gmem, row_stride, row0, chunk, step, tile_rows, 0, rows_valid, 1);
    else
        fa_load_tile_rows(smem, src, gmem, row_stride, row0, chunk, step, tile_rows, 1, rows_valid,
                          chunk * 8 < head_dim);
}

#if FA_SYNC_COPIES
/* Chunks of a tile_rows-row tile one thread copies in fa_load_tile. */
#define FA_TILE_CHUNKS(tile_rows) (((tile_rows) + FA_THREADS / FA_CHUNKS - 1) / (FA_THREADS / FA_CHUNKS))

/* A copy fa_fetch_tile began: this thread's chunks of the tile, and which of them hold
 * data (bit i for chunk i; the others store zeros). */
typedef struct {
    fa_chunk chunk[FA_TILE_CHUNKS(FA_INST_N)];
    unsigned valid;
} fa_held_tile;

/* fa_load_tile's global loads alone, into this thread's registers, for vendors whose
 * copies go through registers anyway (FA_SYNC_COPIES): issued before the work on the
 * tile the copy replaces, stored by fa_store_tile after it. The same rows, chunks and
 * zero fill as fa_load_tile; a chunk it does not copy (past the sequence, the head dim or
 * the tile, or of a thread beyond the block's whole rows of chunks) loads the tile's
 * first address, which every thread's first chunk reads anyway, and is zeroed or left
 * out at the store: no load sits behind a branch. */
FA_DEVICE void fa_fetch_tile(fa_held_tile *held, const fa_elem *gmem, long long row_stride, int rows_valid,
                             int head_dim)
{
    const int step = FA_THREADS / FA_CHUNKS;
    const int row0 = threadIdx.x / FA_CHUNKS;
    const int chunk = threadIdx.x % FA_CHUNKS;
    const int col_valid = chunk * 8 < head_dim && threadIdx.x < step * FA_CHUNKS;
    const fa_elem *src = gmem + row0 * row_stride + chunk * 8;
    held->valid = 0;
#pragma unroll
    for (int i = 0; i < FA_TILE_CHUNKS(FA_INST_N); ++i) {
        const int row = row0 + i * step;
        const int valid = col_valid && row < rows_valid && (FA_INST_N % step == 0 || row < FA_INST_N);
        held->chunk[i] = fa_chunk_load(valid ? src : gmem);
        held->valid |= (unsigned)valid << i;
        src += step * row_stride;
    }
}

/* The shared-memory half of a copy fa_fetch_tile began: row r of the tile to row r of
 * `smem` (t_pitch 0), or transposed, to column r of `smem` (head_dim rows of t_pitch
 * elements, fa_vt_offset's layout; each chunk's 8 elements go to the 8 rows of one
 * block, one column, through the vendor's fa_chunk_store_column). The Q-in-registers
 * forward keeps V transposed, so P·V's
 * operand is a contiguous read (attn_fwd.h). t_pitch is a constant at every call. */
FA_DEVICE void fa_store_tile(fa_elem *smem, int t_pitch, const fa_held_tile *held)
{
    const int step = FA_THREADS / FA_CHUNKS;
    const int row0 = threadIdx.x / FA_CHUNKS;
    const int chunk = threadIdx.x % FA_CHUNKS;
    if (threadIdx.x >= step * FA_CHUNKS)
        return;
#pragma unroll
    for (int i = 0; i < FA_TILE_CHUNKS(FA_INST_N); ++i) {
        const int row = row0 + i * step;
        if (FA_INST_N % step != 0 && row >= FA_INST_N)
            continue;
        const fa_chunk v = (held->valid >> i) & 1 ? held->chunk[i] : fa_chunk_zero();
        if (t_pitch)
            fa_chunk_store_column(smem + fa_vt_offset(t_pitch, chunk * 8, row), t_pitch, v);
        else
            fa_chunk_store(smem + fa_smem_offset(row, chunk), v);
    }
}
#endif

#endif /* FA_ATTN_TILE_H */
