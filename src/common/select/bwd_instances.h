/*
 * bwd_instances.h - the lists of compiled GPU backward instances (src/common/
 * attn_bwd.h), expanded by the CUDA and HIP translation units and launch tables and by
 * dispatch.c's registries.
 *
 * B(head_dim, tile_m, tile_n, warps, stages): built for fp16 and bf16; tile_n keys stay
 * resident in the dK/dV kernel (query rows in the dQ kernel), tile_m rows stream per step.
 * Shapes follow FlashAttention-2's sm80 backward (bench/NOTES.md, b2): 128 keys x 64
 * queries with 8 warps, two stages, 161 KiB of shared memory at d128 (fits sm_80's 163
 * KiB and sm_90); 64x64 with 4 warps and one stage (81 KiB) where only 99 KiB exist (sm_86/89)
 * at d128; d192/d256 as 64x64 with 8 warps: two stages where 161/209 KiB fit (sm_90,
 * measured 4-10% faster than one), one stage (113/145 KiB) for sm_80; sm_86/89 have no
 * d192/d256 tile and the dispatcher says so. d64 also has 128x128 (FlashAttention-2's
 * d64 shape; 162 KiB fits sm_80 and sm_90), measured 4-6% faster than 64x128 (10-15% in
 * deterministic mode) on the H200 although both its kernels spill (sm_90: 212 and 60
 * bytes; b3); sm_80 takes it by the same rule, unmeasured there. 64x128 stays for
 * sm_86/89. d32 and d96 stay 64x64 with 4 warps: their
 * warp grids must split the head dim into n-tile pairs (attn_bwd.h's FA_GRID_FITS).
 * Measured on the H200 in bench/NOTES.md; among tiles that fit, the dispatcher's rules
 * prefer the larger (the larger measured faster at d64 and d128).
 */
#ifndef FA_BWD_INSTANCES_H
#define FA_BWD_INSTANCES_H

#include "select/fwd_instances.h"

#define FA_CUDA_BWD_INSTANCES(B) \
    B(32, 64, 64, 4, 2)          \
    B(64, 64, 128, 8, 2)         \
    B(64, 128, 128, 8, 2)        \
    B(96, 64, 64, 4, 2)          \
    B(128, 64, 64, 4, 1)         \
    B(128, 64, 128, 8, 2)        \
    B(192, 64, 64, 8, 1)         \
    B(192, 64, 64, 8, 2)         \
    B(256, 64, 64, 8, 1)         \
    B(256, 64, 64, 8, 2)

/* A(head_dim, tile_m, tile_n, waves, stages): the AMD instances (their own letter, so
 * cmake/ can tell the lists apart), fp16 and bf16. One stage: HIP's copies are synchronous
 * (src/hip/fa_device.h), so a second buffer would overlap nothing and only cost LDS. Sized
 * for the 64 KiB of LDS per workgroup of gfx90a, gfx942 and RDNA: 64x64 with 4 waves at
 * d32 and d64 (37 and 49 KiB); d96 keeps 32 keys with 2 waves (64x64 would need 69 KiB);
 * d128 runs 32x32 with two waves; d32 also has 32x32 with two waves for RDNA (below).
 * Chosen by these rules, not measured: no AMD GPU was available. */
#define FA_HIP_BWD_INSTANCES(A) \
    A(32, 64, 64, 4, 1)         \
    A(32, 32, 32, 2, 1)         \
    A(64, 64, 64, 4, 1)         \
    A(96, 64, 32, 2, 1)         \
    A(128, 32, 32, 2, 1)

/* W(...): the entries wave32 (RDNA) targets build and may run, a subset of the A list.
 * Their dK/dV kernels have no atomic dQ phase (FA_BWD_ATOMIC_DQ in src/hip/fa_device.h):
 * dQ always has its own pass there. A wave32 lane holds twice a wave64 lane's share of
 * each accumulator tile and 16-element fragments; even without the phase, only d32 at
 * 32x32 stays within RDNA's 256 VGPRs (64x64 d32 and every d64+ entry spill: clang 19,
 * bench/AMD_RESOURCES.md). Larger RDNA backward calls return FA_ERR_UNSUPPORTED. */
#define FA_HIP_WAVE32_BWD_INSTANCES(W) W(32, 32, 32, 2, 1)

/* Warps that share one 16-row group of the dQ kernel's resident tile (attn_bwd.h). */
#define FA_BWD_SPLIT(warps, tile_n) ((warps) * 16 / (tile_n))

/* Shared memory of the two kernels of attn_bwd.h. dQ kernel: Q and dO (tile_n rows)
 * resident, `stages` pairs of K/V tiles of tile_m rows. dK/dV kernel: K and V (tile_n
 * rows) resident, `stages` pairs of Q/dO tiles of tile_m rows and their LSE and D (fp32),
 * and the [tile_n][tile_m] tiles of Pᵀ and dSᵀ. A launch passes the larger,
 * FA_BWD_SMEM_BYTES; compile-time-sized LDS (AMD) takes each. */
#define FA_BWD_DQ_SMEM_BYTES(head_dim, tile_m, tile_n, stages) \
    (2 * (2 * (tile_n) + 2 * (stages) * (tile_m)) * FA_FWD_SMEM_PITCH(head_dim))
#define FA_BWD_DKDV_SMEM_BYTES(head_dim, tile_m, tile_n, stages)                         \
    (FA_BWD_DQ_SMEM_BYTES(head_dim, tile_m, tile_n, stages) + 4 * 2 * (stages) * (tile_m) + \
     2 * 2 * (tile_n) * FA_FWD_SMEM_PITCH(tile_m))
#define FA_BWD_SMEM_BYTES(head_dim, tile_m, tile_n, stages) \
    FA_BWD_DKDV_SMEM_BYTES(head_dim, tile_m, tile_n, stages)

#endif /* FA_BWD_INSTANCES_H */
