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

/* H(head_dim, tile_m, tile_n, waves, stages): the AMD instances (a different entry letter,
 * so cmake/ can tell the lists apart), built for fp16 and bf16, four waves each: 256
 * threads on CDNA (wave64), 128 on RDNA (wave32). One stage: no asynchronous copy to
 * overlap (src/hip/fa_device.h). Sized for the 64 KiB of LDS per workgroup of gfx90a,
 * gfx942 and RDNA (arch_table.c) following composable_kernel's FMHA forward, which keeps
 * 3 workgroups per CU for d<=64, 2 for d<=128, 1 above (AMD_NOTES.md): d32 128x64 (20
 * KiB) and d64 128x64 (32 KiB, CK's d64 tile) give each CDNA wave 32 query rows; d96 and
 * d128 take 64x32 (26 and 32 KiB, 2 per CU: CK's 128-row tiles keep Q in registers, this
 * kernel keeps it in LDS); d192 and d256 64x32 (48 and 64 KiB, 1 per CU); d32 and d64
 * also 64x64 (16 rows per wave) for RDNA. Chosen by these rules, not measured: no AMD GPU
 * was available.
 *
 * R(...): the entries wave32 (RDNA) targets build and may run, a subset of the H list. A
 * wave32 lane holds twice a wave64 lane's share of a tile, and the compiled RDNA code
 * spills (scratch > 0) with 32 rows per wave or head dims above 128 (bench/
 * AMD_RESOURCES.md), so RDNA gets 16 rows per wave and head dims up to 128. */
#define FA_HIP_FWD_INSTANCES(H) \
    H(32, 128, 64, 4, 1)        \
    H(32, 64, 64, 4, 1)         \
    H(64, 128, 64, 4, 1)        \
    H(64, 64, 64, 4, 1)         \
    H(96, 64, 32, 4, 1)         \
    H(128, 64, 32, 4, 1)        \
    H(192, 64, 32, 4, 1)        \
    H(256, 64, 32, 4, 1)

#define FA_HIP_WAVE32_FWD_INSTANCES(R) \
    R(32, 64, 64, 4, 1)                \
    R(64, 64, 64, 4, 1)                \
    R(96, 64, 32, 4, 1)                \
    R(128, 64, 32, 4, 1)

/* Row pitch in elements of a shared tile: rows of a multiple of 64 elements are XOR-
 * swizzled, others padded by 8 elements (see attn_fwd.h). */
#define FA_FWD_SMEM_PITCH(head_dim) ((head_dim) % 64 == 0 ? (head_dim) : (head_dim) + 8)
#define FA_FWD_SMEM_BYTES(head_dim, tile_m, tile_n, stages) \
    (2 * ((tile_m) + 2 * (stages) * (tile_n)) * FA_FWD_SMEM_PITCH(head_dim))

#endif /* FA_FWD_INSTANCES_H */
