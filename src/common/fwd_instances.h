/*
 * fwd_instances.h - the one list of compiled GPU forward instances. The CUDA (and HIP)
 * translation units expand it into kernels; dispatch.c expands the same list into the
 * registry, so the dispatcher can never pick a kernel that was not built.
 *
 * X(head_dim, tile_m, tile_n, warps, stages): each entry is built for fp16 and bf16.
 * stages = number of K/V tile buffers in shared memory (cp.async pipeline depth).
 * Shared memory per block = 2 bytes * (tile_m + 2 * stages * tile_n) * head_dim.
 * Tiles follow FlashAttention-2's sm80 choices (128x128 for d<=64, 128x64 above, 4 warps
 * up to d128 and 8 warps above) with a second K/V stage where sm_86/89's 99 KiB allows;
 * d256 also has a 64x64 tile (96 KiB) so the 99 KiB parts (sm_86, sm_89) can run it.
 */
#ifndef FA_FWD_INSTANCES_H
#define FA_FWD_INSTANCES_H

#define FA_CUDA_FWD_INSTANCES(X) \
    X(32, 128, 128, 4, 2)        \
    X(64, 128, 128, 4, 1)        \
    X(96, 128, 64, 4, 2)         \
    X(128, 128, 64, 4, 2)        \
    X(192, 128, 64, 8, 1)        \
    X(256, 128, 64, 8, 1)        \
    X(256, 64, 64, 4, 1)

#define FA_FWD_SMEM_BYTES(head_dim, tile_m, tile_n, stages) \
    (2 * ((tile_m) + 2 * (stages) * (tile_n)) * (head_dim))

#endif /* FA_FWD_INSTANCES_H */
