/*
 * launch_grid.h - how every GPU launch numbers its blocks along grid y and z, written
 * once for the host (gpu_args.c) and the kernels. A kernel's blocks are x (query or key
 * tiles, rows) by `inner` x `outer` pairs, inner fastest: (head, batch), or in the
 * forward (head, batch * splits + split). The pairs are numbered pair = outer * inner +
 * i and laid over y and z as pair = z * gridDim.y + y. When inner and outer both fit a
 * grid dimension (at most FA_GRID_YZ_MAX, the y and z limit of CUDA and HIP) that is
 * y = inner, z = outer; otherwise (more than 65535 sequences, say) the pairs are folded
 * over z rows of y blocks, and the last row's few blocks past the last pair have nothing
 * to do. Blocks start in the pairs' order either way. Plain C, host and device, so that
 * tests/test_gpu_args.cpp can replay it on the CPU.
 */
#ifndef FA_LAUNCH_GRID_H
#define FA_LAUNCH_GRID_H

#include "api/fa_hd.h"

#define FA_GRID_YZ_MAX 65535

/* The warpgroup forward (attn_fwd_ws.h) runs a persistent grid (gridDim.x = at most one
 * block per SM, walking every query tile of every pair in x) for head dims up to 128;
 * above, its consumers have no registers left for the walk's state (ptxas spills it:
 * 36-84 bytes at d192/d256), and those instances take the grid above, a block per tile. */
#define FA_WS_PERSISTENT(head_dim) ((head_dim) <= 128)
/* Its walk counts work tiles (query tiles x heads x batch x splits) in 32 bits, and a
 * launch of a block per work tile puts them all along x (below 2^31). */
#define FA_WS_WALK_TILES (1ll << 31)

/* Blocks along y and z for inner x outer pairs (both >= 0). *z passes FA_GRID_YZ_MAX
 * exactly when the pairs exceed FA_GRID_YZ_MAX^2, which the host then refuses; every
 * other grid keeps y * z - pairs < z, and y * z < 2^32. */
FA_HD void fa_grid_fold(long long inner, long long outer, unsigned *y, unsigned *z)
{
    const long long cap = (long long)FA_GRID_YZ_MAX * FA_GRID_YZ_MAX;
    long long pairs, rows;
    if (inner <= FA_GRID_YZ_MAX && outer <= FA_GRID_YZ_MAX) {
        *y = (unsigned)inner;
        *z = (unsigned)outer;
        return;
    }
    if (inner == 0 || outer == 0) {
        *y = *z = 0;
        return;
    }
    pairs = outer > cap / inner ? cap + 1 : inner * outer; /* saturated: no wrap */
    rows = (pairs + FA_GRID_YZ_MAX - 1) / FA_GRID_YZ_MAX;
    *z = (unsigned)rows;
    *y = (unsigned)((pairs + rows - 1) / rows);
}

/* The pair (*i, *o) of block (y, z) in a grid of y_blocks blocks along y; *o == outer
 * for a block past the last pair (clamped there, so that callers can keep it in int and
 * test it with their own bounds). 32-bit unsigned throughout, which the host's limit
 * (pairs <= FA_GRID_YZ_MAX^2 < 2^32) keeps exact. */
FA_HD void fa_grid_pair(unsigned y, unsigned z, unsigned y_blocks, unsigned inner, unsigned outer,
                        unsigned *i, unsigned *o)
{
    const unsigned pair = z * y_blocks + y;
    const unsigned q = pair / inner;
    *i = pair - q * inner;
    *o = q < outer ? q : outer;
}

/* The warpgroup backward's order of its blocks (attn_bwd_ws.h, a block per key block and
 * pair): block `linear` (x fastest, then y, then z) of a grid of key_blocks x pairs takes
 * key block index *k of pair *pair. The pairs go in sections of `per` pairs
 * (fa_bws_section_pairs); inside a section, the first key block of every pair, then the
 * second, and so on. The order decides no result. */
FA_HD void fa_bws_block_order(unsigned long long linear, unsigned key_blocks, unsigned pairs, unsigned per,
                              unsigned *k, unsigned *pair)
{
    const unsigned long long section_blocks = (unsigned long long)per * key_blocks;
    const unsigned section = (unsigned)(linear / section_blocks);
    const unsigned first = section * per;
    const unsigned size = pairs - first < per ? pairs - first : per;
    const unsigned r = (unsigned)(linear - section * section_blocks);
    *k = r / size;
    *pair = first + r % size;
}

/* Pairs per section. One, pair by pair, when every key block does the same work (no mask)
 * and the call is not deterministic: a pair's key blocks run together and share its
 * query tiles in L2 (sections measured 1-4% slower there, bench/NOTES.md b7). Otherwise
 * about two waves of blocks (FA_BWS_SECTION_BLOCKS), which helps twice: under a causal
 * mask the first key blocks visit the most query tiles, so the blocks left at the end
 * are short ones (pair by pair ended 7% after the ideal at s 1k-4k in a greedy simulation
 * of 132 SMs, sections 0-2%, bench/bwd_order_sim.py; measured +1-3% at d128); and in a deterministic call a key
 * block's predecessor in the dQ order (the block above) started a section's width
 * earlier instead of beside it, so it rarely waits (+12-17% at d64 without a mask). */
#define FA_BWS_SECTION_BLOCKS 256u
FA_HD unsigned fa_bws_section_pairs(unsigned key_blocks, int sectioned)
{
    return !sectioned || key_blocks >= FA_BWS_SECTION_BLOCKS ? 1u : FA_BWS_SECTION_BLOCKS / key_blocks;
}

#endif /* FA_LAUNCH_GRID_H */
