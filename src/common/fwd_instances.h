/*
 * fwd_instances.h - the one list of compiled GPU forward instances. The CUDA (and HIP)
 * translation units expand it into kernels; dispatch.c expands the same list into the
 * registry, so the dispatcher can never pick a kernel that was not built.
 *
 * X(head_dim, tile_m, tile_n, warps, stages): each entry is built for fp16 and bf16.
 * stages = number of K/V tile buffers in shared memory (cp.async pipeline depth).
 * Shared memory per block: FA_FWD_SMEM_BYTES below; every entry fits the 99 KiB of
 * sm_86/sm_89 (the smallest NVIDIA row), so each head dim has one instance on every
 * target. The tiles were chosen on the H200 by timing the alternatives side by side
 * with FlashAttention-2 (bench/NOTES.md, versions v3-v7): 4 warps of 32 query rows each
 * win up to d128 (128x128 keys per tile for d<=64, 128x64 above); d192 keeps 8 warps
 * (the 4-warp tile spills); d256 runs 64x64 with 4 warps of 16 rows, faster than 128x64
 * with 8 warps and than a second K/V stage (which halves its occupancy).
 */
#ifndef FA_FWD_INSTANCES_H
#define FA_FWD_INSTANCES_H

#define FA_CUDA_FWD_INSTANCES(X) \
    X(32, 128, 128, 4, 2)        \
    X(64, 128, 128, 4, 2)        \
    X(96, 128, 64, 4, 2)         \
    X(128, 128, 64, 4, 2)        \
    X(192, 128, 64, 8, 1)        \
    X(256, 64, 64, 4, 1)

/* Row pitch in elements of a shared tile: rows of a multiple of 64 elements are XOR-
 * swizzled, others padded by 8 elements (see attn_fwd.h). */
#define FA_FWD_SMEM_PITCH(head_dim) ((head_dim) % 64 == 0 ? (head_dim) : (head_dim) + 8)
#define FA_FWD_SMEM_BYTES(head_dim, tile_m, tile_n, stages) \
    (2 * ((tile_m) + 2 * (stages) * (tile_n)) * FA_FWD_SMEM_PITCH(head_dim))

#endif /* FA_FWD_INSTANCES_H */
