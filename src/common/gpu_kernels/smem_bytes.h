/*
 * smem_bytes.h - the shared memory of each GPU kernel's tiles as a function of its
 * instance (head dim, tile sizes, stages): the kernels size their buffers with it and the
 * generated registry (src/common/select/registry.h) records it, so what the dispatcher
 * checks against a device's limits is what the kernel allocates. Plain C macros.
 */
#ifndef FA_SMEM_BYTES_H
#define FA_SMEM_BYTES_H

#include "gpu_kernels/launch_grid.h"

/* Row pitch in elements of a shared tile: rows of a multiple of 64 elements are XOR-
 * swizzled, others padded by 8 elements (tile_layout.h). */
#define FA_FWD_SMEM_PITCH(head_dim) ((head_dim) % 64 == 0 ? (head_dim) : (head_dim) + 8)

/* Forward: the Q tile (tile_m rows) and `stages` pairs of K/V tiles (tile_n rows). */
#define FA_FWD_SMEM_BYTES(head_dim, tile_m, tile_n, stages) \
    (2 * ((tile_m) + 2 * (stages) * (tile_n)) * FA_FWD_SMEM_PITCH(head_dim))

/* The Q-in-registers forward (attn_fwd.h, FA_INST_Q_IN_REGS): `stages` K tiles and as
 * many Vᵀ tiles (head_dim rows of tile_n keys, padded to FA_VT_PITCH, laid out by
 * tile_layout.h's fa_vt_offset), no Q tile. 8 keys of padding: rows 20 banks apart, so a
 * fragment read's 16 rows (two 8-row blocks, XOR-ed apart) meet no bank twice. */
#define FA_VT_PITCH(tile_n) ((tile_n) + 8)
/* Its registers per thread as the registry records them: src/hip bounds the family to
 * two waves per SIMD (FA_AMD_ACC_IN_VGPRS, at most 256 of a lane's 512), which is what the
 * dispatcher's occupancy must see (one 8-wave workgroup per CU); LDS alone would allow three. */
#define FA_QREG_REGS_PER_THREAD(threads) 256
#define FA_QREG_SMEM_BYTES(head_dim, tile_m, tile_n, stages) \
    (2 * (stages) * ((tile_n) * FA_FWD_SMEM_PITCH(head_dim) + (head_dim) * FA_VT_PITCH(tile_n)))

/* The warpgroup forward (attn_fwd_ws.h): the Q tile and `stages` K and V tiles, each
 * head_dim / 64 column blocks of rows x 128 bytes (TMA's 128-byte-swizzled boxes), for
 * the persistent instances (launch_grid.h's FA_WS_PERSISTENT) an O tile of Q's size in
 * which O waits for its TMA store while the next work tile runs (the others stage O in
 * their Q tile), plus 1024 bytes to start the first tile on a 1024-byte boundary (the
 * swizzle's period). The ring's mbarriers are static shared memory (under 1 KiB). */
#define FA_WS_SMEM_BYTES(head_dim, tile_m, tile_n, stages)                                              \
    (2 * (head_dim) * ((FA_WS_PERSISTENT(head_dim) ? 2 : 1) * (tile_m) + 2 * (stages) * (tile_n)) + 1024)
/* Its registers per thread at launch: one block per SM (__launch_bounds__(threads, 1))
 * takes the whole 64K register file, as many per thread as fit in steps of 8 (ptxas),
 * which setmaxnreg then moves between the roles. The registry records it, so the
 * dispatcher's occupancy sees one block per SM. */
#define FA_WS_REGS_PER_THREAD(threads) (65536 / (threads) / 8 * 8)

/* Warps that share one 16-row group of the dQ kernel's resident tile (attn_bwd.h). */
#define FA_BWD_SPLIT(warps, resident) ((warps) * 16 / (resident))

/* Backward (attn_bwd.h), `streamed` and `resident` rows as in bwd_instances.txt. dQ
 * kernel: Q and dO resident, `stages` pairs of K/V tiles streamed. dK/dV kernel: K and V
 * resident, `stages` pairs of Q/dO tiles streamed with their LSE and D (fp32), and the
 * [resident][streamed] tiles of Pᵀ and dSᵀ. A launch passes the larger,
 * FA_BWD_SMEM_BYTES; compile-time-sized LDS (AMD) takes each. */
#define FA_BWD_DQ_SMEM_BYTES(head_dim, streamed, resident, stages) \
    (2 * (2 * (resident) + 2 * (stages) * (streamed)) * FA_FWD_SMEM_PITCH(head_dim))
#define FA_BWD_DKDV_SMEM_BYTES(head_dim, streamed, resident, stages)                          \
    (FA_BWD_DQ_SMEM_BYTES(head_dim, streamed, resident, stages) + 4 * 2 * (stages) * (streamed) + \
     2 * 2 * (resident) * FA_FWD_SMEM_PITCH(streamed))
#define FA_BWD_SMEM_BYTES(head_dim, streamed, resident, stages) \
    FA_BWD_DKDV_SMEM_BYTES(head_dim, streamed, resident, stages)

/* The warpgroup backward's dK/dV kernel (attn_bwd_ws.h), streamed and resident rows as
 * above: K and V resident, `stages` pairs of Q/dO tiles (128-byte-swizzled column blocks
 * as in the forward), two dSᵀ tiles [resident][streamed] (one per step in turn), the
 * stages' LSE and D rows (fp32), and 1024 bytes to align the first tile; above d128 (the
 * head-dim split) two Pᵀ tiles; up to d192 a step's dQ tile (fp32) for the bulk
 * reduction (d192's 226 KiB with it; at d256 it would not fit, and the tile is staged in
 * the step's Q/dO stage instead). The dSᵀ tiles are dS, [streamed][resident], where the
 * streamed rows are not whole 64-row blocks (FA_BWS_DQ_TRANSPOSED): the same bytes. */
#define FA_BWS_UNSPLIT_MAX_D 128
#define FA_BWS_DQ_STAGED_MAX_D 192
#define FA_BWS_SMEM_BYTES(head_dim, streamed, resident, stages)                                   \
    (2 * (head_dim) * (2 * (resident) + 2 * (stages) * (streamed)) + 2 * 2 * (resident) * (streamed) + \
     4 * 2 * (stages) * (streamed) + ((head_dim) > FA_BWS_UNSPLIT_MAX_D ? 2 * 2 * (resident) * (streamed) : 0) + \
     ((head_dim) <= FA_BWS_DQ_STAGED_MAX_D ? 4 * (streamed) * (head_dim) : 0) + 1024)

/* A warpgroup backward whose steps of `streamed` query rows are not whole 64-row blocks
 * (wgmma's M) computes dQᵀ and sums it in dq_accum.h's transposed order (attn_bwd_ws.h,
 * FA_BWS_DQ_T); the host tells the conversion kernel so (gpu_args.c). */
#define FA_BWS_DQ_TRANSPOSED(streamed) ((streamed) % 64 != 0)

#endif /* FA_SMEM_BYTES_H */
