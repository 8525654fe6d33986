/*
 * bwd_instances.h - the lists of compiled GPU backward instances (src/common/
 * attn_bwd.h), expanded by the CUDA and HIP translation units and launch tables and by
 * dispatch.c's registries.
 *
 * B(head_dim, tile_m, tile_n, warps, stages): built for fp16 and bf16. Square 64x64
 * tiles, 16 rows per warp, two Q/dO (or K/V) stages. Shared memory: K and V (or Q and
 * dO) resident plus `stages` streamed pairs plus two fp32 rows per stage; at d128 that
 * is 97 KiB, inside sm_86/89's 99 KiB. Head dims above 128 would need the dK/dV
 * accumulators split across warps (255 registers hold 2 x 16 x 128 fp32 and no more):
 * not built yet, so the dispatcher reports them unsupported on GPUs.
 */
#ifndef FA_BWD_INSTANCES_H
#define FA_BWD_INSTANCES_H

#include "fwd_instances.h"

#define FA_CUDA_BWD_INSTANCES(B) \
    B(32, 64, 64, 4, 2)          \
    B(64, 64, 64, 4, 2)          \
    B(96, 64, 64, 4, 2)          \
    B(128, 64, 64, 4, 2)

/* A(head_dim, tile_m, tile_n, waves, stages): the AMD instances (their own letter, so
 * cmake/ can tell the lists apart), fp16 and bf16, 16 rows per wave as above. One stage:
 * HIP's copies are synchronous (src/hip/fa_device.h), so a second buffer would overlap
 * nothing and only cost LDS. Sized for the 64 KiB of LDS per workgroup (and per CU) of
 * gfx90a, gfx942 and RDNA: 64x64 tiles take 21, 33 and 53 KiB at d32, d64, d96, while
 * d128 needs 64.25 KiB at 64x64 (K, V, Q, dO at 16 KiB each plus LSE and D), so it runs
 * 32x32 with two waves (33 KiB). d32 also has 32x32 for RDNA. Chosen by these rules, not
 * measured: no AMD GPU was available.
 *
 * W(...): the entries wave32 (RDNA) targets build and may run, a subset of the A list.
 * A wave32 lane holds twice a wave64 lane's share of each accumulator tile, and the dK/dV
 * kernel keeps two head-dim-wide accumulators plus P and dP: every other entry, and d64
 * at 32x32 in bf16, needs more than RDNA's 256 VGPRs and spills (scratch > 0), so RDNA
 * runs the backward up to d32 only (bench/AMD_RESOURCES.md). */
#define FA_HIP_BWD_INSTANCES(A) \
    A(32, 64, 64, 4, 1)         \
    A(32, 32, 32, 2, 1)         \
    A(64, 64, 64, 4, 1)         \
    A(96, 64, 64, 4, 1)         \
    A(128, 32, 32, 2, 1)

#define FA_HIP_WAVE32_BWD_INSTANCES(W) W(32, 32, 32, 2, 1)

/* Shared memory of the two kernels of attn_bwd.h: both hold 2 + 2 * stages tiles of
 * tile_n rows; the dK/dV kernel adds LSE and D (fp32) of each stage's query rows. A
 * launch passes the larger, FA_BWD_SMEM_BYTES; compile-time-sized LDS (AMD) takes each. */
#define FA_BWD_DQ_SMEM_BYTES(head_dim, tile_n, stages) \
    (2 * (2 + 2 * (stages)) * (tile_n) * FA_FWD_SMEM_PITCH(head_dim))
#define FA_BWD_DKDV_SMEM_BYTES(head_dim, tile_n, stages) \
    (FA_BWD_DQ_SMEM_BYTES(head_dim, tile_n, stages) + 4 * 2 * (stages) * (tile_n))
#define FA_BWD_SMEM_BYTES(head_dim, tile_m, tile_n, stages) \
    FA_BWD_DKDV_SMEM_BYTES(head_dim, tile_n, stages)

#endif /* FA_BWD_INSTANCES_H */
