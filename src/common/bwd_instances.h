/*
 * bwd_instances.h - the one list of compiled GPU backward instances (src/common/
 * attn_bwd.h), expanded by the CUDA translation units and by dispatch.c's registry.
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

#define FA_BWD_SMEM_BYTES(head_dim, tile_m, tile_n, stages)                      \
    (2 * (2 + 2 * (stages)) * (tile_n) * FA_FWD_SMEM_PITCH(head_dim) +           \
     4 * 2 * (stages) * (tile_n))

#endif /* FA_BWD_INSTANCES_H */
