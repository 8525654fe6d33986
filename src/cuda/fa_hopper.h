/*
 * fa_hopper.h (NVIDIA, sm_90a only) - the warpgroup vocabulary of the Hopper forward
 * (issue 13, docs/research/issue13_hopper.md) and backward (issue 14, bench/NOTES.md):
 * wgmma.mma_async with its fences and commit groups, the shared-memory matrix descriptor
 * of the 128-byte-swizzled tiles it reads, mbarriers, the TMA tile loads completed on
 * them, bulk reductions to global memory, the async-proxy fence, setmaxnreg, and named
 * barriers. Each wrapper is one PTX instruction (or a try-wait
 * loop); the comment on it names its PTX ISA section: wgmma by number (9.7.15,
 * "Asynchronous Warpgroup Level Matrix Multiply-Accumulate Instructions", as numbered in
 * the PTX ISA of CUDA 12.x/13.0), the others by the anchor of their section in the PTX
 * ISA document (#parallel-synchronization-and-communication-instructions-..., whose
 * numbers move between versions). The wgmma shapes' operand lists are generated
 * (fa_wgmma_shapes.h, by gen_wgmma_shapes.py). Nothing algorithmic lives here.
 *
 * Contract the common warpgroup code relies on (checked on a device by
 * tests/gpu/test_cuda_hopper_primitives.cpp):
 *   - A warpgroup is 4 consecutive warps, 128 threads, the first warp's id a multiple
 *     of 4. wgmma m64nNk16 computes a 64 x N tile per warpgroup; accumulator register i
 *     (0 <= i < N/2) of thread t of the warpgroup is element (fa_wg_acc_row(t, i),
 *     fa_wg_acc_col(t, i)) (fa_nv_layouts.h).
 *   - Operands in shared memory are 128-byte-swizzled tiles (fa_sw128_offset,
 *     fa_nv_layouts.h): rows of 64 16-bit elements, chunk c of row r at c ^ (r % 8),
 *     whole 8-row atoms of 1024 bytes, each tile 1024-byte aligned; wider operands are
 *     several such column blocks one after the other. This is also exactly what a TMA
 *     load with CU_TENSOR_MAP_SWIZZLE_128B and a 64-element inner box writes.
 *   - A from registers (the _rs forms) takes the mma.sync m16n8k16 A layout per warp
 *     (warp w of the warpgroup holds rows 16w .. 16w + 15), so P goes from the S
 *     accumulators to A operands as fa_acc_pair_to_a does (PTX ISA 9.7.15.5.1.1.1).
 *
 * Only sm_90a device code may include it: wgmma and setmaxnreg do not exist on sm_90
 * without the "a" features, and ptxas rejects them there.
 */
#ifndef FA_HOPPER_H
#define FA_HOPPER_H

#include <stdint.h>

#include "fa_nv_layouts.h" /* and, through it, api/fa_hd.h's FA_CAT */
#include "fa_wgmma_shapes.h"

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "fa_hopper.h is sm_90a vocabulary: compile with -gencode=arch=compute_90a,code=sm_90a"
#endif

#ifndef FA_DEVICE
#define FA_DEVICE __device__ __forceinline__
#endif

#define FA_WARPGROUP_THREADS 128

/* The warpgroup of this thread, as a warp-uniform value (the shuffle tells the compiler
 * every lane agrees, so role branches stay uniform). */
FA_DEVICE int fa_warpgroup(void) { return __shfl_sync(0xffffffffu, (int)(threadIdx.x / FA_WARPGROUP_THREADS), 0); }
FA_DEVICE int fa_warpgroup_thread(void) { return (int)(threadIdx.x % FA_WARPGROUP_THREADS); }

FA_DEVICE uint32_t fa_hopper_smem_addr(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

/* ---- wgmma ordering (PTX ISA 9.7.15.7, "Asynchronous wgmma Proxy Operations") ------- */

/* wgmma.fence (9.7.15.7.1): orders this warpgroup's earlier accesses to accumulator and
 * A-fragment registers before the next wgmma.mma_async; needed before the first one and
 * whenever such registers were touched by other instructions since (shared-memory
 * operands written by ordinary stores need fa_fence_async_smem instead). */
FA_DEVICE void fa_wg_fence(void) { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
/* wgmma.commit_group (9.7.15.7.2): closes the wgmma.mma_async issued since the last one
 * into a group. */
FA_DEVICE void fa_wg_commit(void) { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
/* wgmma.wait_group N (9.7.15.7.3): waits until at most N groups are pending; only then
 * may the accumulators (and A registers) of the completed groups be read or written. */
#define fa_wg_wait(n) asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(n) : "memory")
/* fa_wg_wait(0) kept where the source puts it. ptxas hoists a plain wait above the
 * straight-line code before it when that code leaves the accumulators alone: the
 * forward's softmax of tile t then ran after P·V(t-1) had finished instead of under it
 * (bench/NOTES.md, issue 13 ws7). A branch on `keep`, any warp-uniform value the compiler
 * cannot know, ends the basic block there; both sides wait, and they differ (a move of
 * `reg` onto itself) so that the compiler does not merge them back into one. */
FA_DEVICE void fa_wg_wait_all_here(float keep, uint32_t *reg)
{
    if (keep == keep)
        fa_wg_wait(0);
    else
        asm volatile("wgmma.wait_group.sync.aligned 0;\n\tmov.u32 %0, %0;" : "+r"(*reg)::"memory");
}

/* Keeps the compiler from moving reads or writes of accumulator registers across a
 * wgmma fence or wait: the asm outputs them unchanged (the hardware writes them
 * asynchronously, which the compiler cannot see). */
#define fa_wg_pin(regs, count)                                    \
    do {                                                          \
        for (int fa_pin_i = 0; fa_pin_i < (count); ++fa_pin_i)    \
            asm volatile("" : "+f"((regs)[fa_pin_i])::"memory"); \
    } while (0)

/* An int the compiler must treat as changed here (it emits nothing): what it derives from
 * the value is derived again after this point instead of being hoisted above it, where it
 * would hold a register through a loop. */
#define fa_opaque_int(x) asm volatile("" : "+r"(x))

/* The same for A-fragment registers (P), which an RS wgmma reads asynchronously. */
#define fa_wg_pin_u32(regs, count)                                \
    do {                                                          \
        for (int fa_pin_i = 0; fa_pin_i < (count); ++fa_pin_i)    \
            asm volatile("" : "+r"((regs)[fa_pin_i])::"memory"); \
    } while (0)

/* ---- the shared-memory matrix descriptor (PTX ISA 9.7.15.5.1.2.2) ------------------ */

/* Bits 13-0 start address, 29-16 leading-dimension byte offset, 45-32 stride-dimension
 * byte offset (each (x & 0x3FFFF) >> 4), 51-49 base offset (0: the tile's swizzle
 * pattern starts on a 1024-byte boundary), 63-62 swizzle mode (1 = 128-byte). For the
 * 128-byte-swizzled K-major tiles here the stride byte offset is the 1024 bytes from one
 * 8-row atom to the next and the leading byte offset is unused (1 by convention); for an
 * MN-major operand (V as B of P·V: N = head dim contiguous) the stride offset is again
 * the 1024 bytes between 8-row (8-key) atoms and the leading offset the distance between
 * 64-column blocks of N. A k-step of 16 elements moves the start by 32 bytes (K-major,
 * inside the 128-byte row: the swizzle is applied to the address bits by the hardware)
 * or 16 rows = 2048 bytes (MN-major). */
FA_DEVICE uint64_t fa_wg_desc_sw128(uint32_t smem_addr, uint32_t leading_bytes, uint32_t stride_bytes)
{
    return (uint64_t)((smem_addr & 0x3FFFFu) >> 4) | ((uint64_t)((leading_bytes & 0x3FFFFu) >> 4) << 16) |
           ((uint64_t)((stride_bytes & 0x3FFFFu) >> 4) << 32) | (1ull << 62);
}
/* Byte offset of 16-bit element (row, col) in a tile of `rows` rows stored as the
 * descriptors above read it: 64-column blocks of rows x 128 bytes, each 128-byte-swizzled
 * (fa_sw128_offset). */
FA_DEVICE unsigned fa_wg_tile_offset(int rows, int row, int col)
{
    return (unsigned)(col >> 6) * 128u * (unsigned)rows + fa_sw128_offset(row, col & 63);
}
/* The descriptor of the same operand `bytes` further on (a k-step): the start address is
 * the low field and never carries out of it inside one tile (< 256 KiB). */
FA_DEVICE uint64_t fa_wg_desc_advance(uint64_t desc, uint32_t bytes) { return desc + (uint64_t)(bytes >> 4); }
/* The descriptor of the k-step `bytes` past a tile's start `addr`, whose own descriptor is
 * `first`: `stepped` from it (one add), or built again from the address (the same value;
 * which one a kernel takes is its own measured choice). */
FA_DEVICE uint64_t fa_wg_desc_step(int stepped, uint64_t first, uint32_t addr, uint32_t bytes,
                                   uint32_t leading_bytes)
{
    return stepped ? fa_wg_desc_advance(first, bytes) : fa_wg_desc_sw128(addr + bytes, leading_bytes, 1024);
}

/* ---- wgmma.mma_async (PTX ISA 9.7.15.5.2) -------------------------------------------- */

/* D (+)= A·B, 64 x N x 16, fp32 accumulators (9.7.15.5.2). SS: A and B from shared
 * memory through descriptors; RS: A from registers (four .b32 of two 16-bit elements per
 * thread, no imm-trans-a). scale_d 0 overwrites D (the first k-step), 1 accumulates;
 * imm-scale-a/b 1 (no negation); imm-trans-a TRANSA: 0 A K-major, 1 A MN-major (the
 * backward's dS read from its transpose, stored [key][query]); imm-trans-b TRANSB: 0 B
 * K-major (K stored [key][d] for S = Q·Kᵀ), 1 B MN-major (V stored [key][d] for O = P·V;
 * transposes are for 16-bit types only). The N/2 accumulator operands and the numbers of the operands after
 * them come from fa_wgmma_shapes.h (generated: the preprocessor cannot count them). */
#define FA_WG_REGS(N) FA_WG_REGS_##N
#define FA_WG_ACC(N, d) FA_WG_ACC_##N(d)
#define FA_WG_OP(N, k) FA_WG_OP_##N##_##k
#define FA_WGMMA_SS(N, TYPE, TRANSA, TRANSB, d, desc_a, desc_b, scale_d)                                  \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " FA_WG_OP(N, 2) ", 0;\n"                            \
                 "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TYPE "." TYPE " " FA_WG_REGS(N) ", "   \
                 FA_WG_OP(N, 0) ", " FA_WG_OP(N, 1) ", p, 1, 1, " #TRANSA ", " #TRANSB ";\n}\n"               \
                 : FA_WG_ACC(N, d)                                                                        \
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d))
#define FA_WGMMA_RS(N, TYPE, TRANSB, d, a, desc_b, scale_d)                                               \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " FA_WG_OP(N, 5) ", 0;\n"                            \
                 "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TYPE "." TYPE " " FA_WG_REGS(N) ", {"  \
                 FA_WG_OP(N, 0) ", " FA_WG_OP(N, 1) ", " FA_WG_OP(N, 2) ", " FA_WG_OP(N, 3) "}, "            \
                 FA_WG_OP(N, 4) ", p, 1, 1, " #TRANSB ";\n}\n"                                              \
                 : FA_WG_ACC(N, d)                                                                        \
                 : "r"((a)[0]), "r"((a)[1]), "r"((a)[2]), "r"((a)[3]), "l"(desc_b), "r"(scale_d))

/* The named forms, fa_wgmma_m64n<N>_<A source><B major>_<type>: kmaj = B K-major
 * (S = Q·Kᵀ), nmaj = B MN-major (O = P·V with V as stored), mnmaj = A and B MN-major
 * (the backward's dQ = dS·K), mkmaj = A MN-major and B K-major (the backward's
 * dQᵀ = Kᵀ·dSᵀ); A K-major unless named; d holds N/2 floats. */
#define FA_WG_DEFINE(N, type, TYPE)                                                                     \
    FA_DEVICE void fa_wgmma_m64n##N##_ss_kmaj_##type(float *d, uint64_t a, uint64_t b, int scale_d)      \
    {                                                                                                   \
        FA_WGMMA_SS(N, TYPE, 0, 0, d, a, b, scale_d);                                                   \
    }                                                                                                   \
    FA_DEVICE void fa_wgmma_m64n##N##_ss_nmaj_##type(float *d, uint64_t a, uint64_t b, int scale_d)      \
    {                                                                                                   \
        FA_WGMMA_SS(N, TYPE, 0, 1, d, a, b, scale_d);                                                   \
    }                                                                                                   \
    FA_DEVICE void fa_wgmma_m64n##N##_ss_mnmaj_##type(float *d, uint64_t a, uint64_t b, int scale_d)     \
    {                                                                                                   \
        FA_WGMMA_SS(N, TYPE, 1, 1, d, a, b, scale_d);                                                   \
    }                                                                                                   \
    FA_DEVICE void fa_wgmma_m64n##N##_ss_mkmaj_##type(float *d, uint64_t a, uint64_t b, int scale_d)     \
    {                                                                                                   \
        FA_WGMMA_SS(N, TYPE, 1, 0, d, a, b, scale_d);                                                   \
    }                                                                                                   \
    FA_DEVICE void fa_wgmma_m64n##N##_rs_nmaj_##type(float *d, const uint32_t a[4], uint64_t b, int scale_d) \
    {                                                                                                   \
        FA_WGMMA_RS(N, TYPE, 1, d, a, b, scale_d);                                                      \
    }
#define FA_WG_DEFINE_TYPES(N) FA_WG_DEFINE(N, f16, "f16") FA_WG_DEFINE(N, bf16, "bf16")
/* Every N of fa_wgmma_shapes.h (gen_wgmma_shapes.py's SHAPES). */
FA_WG_DEFINE_TYPES(32)
FA_WG_DEFINE_TYPES(64)
FA_WG_DEFINE_TYPES(80)
FA_WG_DEFINE_TYPES(96)
FA_WG_DEFINE_TYPES(112)
FA_WG_DEFINE_TYPES(128)
FA_WG_DEFINE_TYPES(144)
FA_WG_DEFINE_TYPES(176)
FA_WG_DEFINE_TYPES(192)
FA_WG_DEFINE_TYPES(256)
#undef FA_WG_DEFINE_TYPES
#undef FA_WG_DEFINE
#undef FA_WG_DEFINE

/* ---- the two products of the warpgroup forward, on the tiles as TMA lands them ---------- */

/* fa_wgmma_m64n<N>_<form>_<type> for macro arguments (N and the type expand first). */
#define FA_WG_MMA(N, form, type) FA_CAT(FA_CAT(FA_CAT(fa_wgmma_m64n, N), _##form##_), type)

/* S = Q·Kᵀ: one warpgroup's 64 query rows (at shared address q_addr, inside a Q tile whose
 * 64-column blocks lie q_block_bytes apart) against the N keys of a K tile at k_addr (its
 * blocks N x 128 bytes apart), over head dim D: D / 16 k-steps, 32 bytes each inside a
 * 128-byte row, then the next column block, their descriptors `stepped` or not
 * (fa_wg_desc_step). acc holds N / 2 floats; the first step overwrites them. Issued, not
 * waited for (fa_wg_commit / fa_wg_wait). */
#define FA_WG_QK(N, D, type, acc, q_addr, q_block_bytes, k_addr, stepped) \
    FA_WG_QK_SLICE(N, D, type, acc, q_addr, q_block_bytes, k_addr, (N) * 128u, stepped)
/* The same with the N rows of B a slice of a taller tile, whose 64-column blocks lie
 * k_block_bytes apart (the d256 backward's half of a step's queries). */
#define FA_WG_QK_SLICE(N, D, type, acc, q_addr, q_block_bytes, k_addr, k_block_bytes, stepped)        \
    do {                                                                                              \
        const uint64_t fa_qd = fa_wg_desc_sw128((q_addr), 16, 1024);                                   \
        const uint64_t fa_kd = fa_wg_desc_sw128((k_addr), 16, 1024);                                   \
        _Pragma("unroll") for (int fa_ks = 0; fa_ks < (D) / 16; ++fa_ks)                              \
        {                                                                                             \
            const uint32_t fa_in_row = 32u * (uint32_t)(fa_ks % 4), fa_block = (uint32_t)(fa_ks / 4);  \
            FA_WG_MMA(N, ss_kmaj, type)                                                               \
            ((acc), fa_wg_desc_step((stepped), fa_qd, (q_addr), fa_block * (q_block_bytes) + fa_in_row, 16), \
             fa_wg_desc_step((stepped), fa_kd, (k_addr), fa_block * (k_block_bytes) + fa_in_row, 16), fa_ks > 0); \
        }                                                                                             \
    } while (0)

/* O += P·V: P of the warpgroup's 64 rows from registers (p[ks]: the A operand of keys
 * 16 ks .. 16 ks + 15), V as stored ([key][d], MN-major B) in a tile of N keys at v_addr
 * whose 64-column blocks of d lie N x 128 bytes apart (the leading byte offset); a k-step
 * of 16 keys is 16 rows = 2048 bytes, its descriptor `stepped` or not. acc holds D / 2
 * floats. Issued, not waited for. */
#define FA_WG_PV(N, D, type, acc, p, v_addr, stepped)                                                 \
    do {                                                                                              \
        const uint64_t fa_vd = fa_wg_desc_sw128((v_addr), (N) * 128u, 1024);                           \
        _Pragma("unroll") for (int fa_ks = 0; fa_ks < (N) / 16; ++fa_ks)                              \
            FA_WG_MMA(D, rs_nmaj, type)                                                               \
            ((acc), (p)[fa_ks], fa_wg_desc_step((stepped), fa_vd, (v_addr), 2048u * (uint32_t)fa_ks, (N) * 128u), 1); \
    } while (0)

/* dQ = dS·K (the backward): dS of the warpgroup's 64 query rows over KEYS keys, read from
 * a dSᵀ tile stored [key][query] (MN-major A) at ds_addr, whose 64-column blocks of queries
 * lie ds_block_bytes apart (the descriptor's leading offset, which an M of 64, one block,
 * never uses); K as stored ([key][d], MN-major B) in a tile of KEYS rows, N of
 * its head-dim columns from the column block at k_addr (blocks KEYS x 128 bytes apart). A
 * k-step of 16 keys is 16 rows = 2048 bytes in both. acc holds N / 2 floats; the first
 * step overwrites them. Issued, not waited for. */
#define FA_WG_DSK(N, KEYS, type, acc, ds_addr, ds_block_bytes, k_addr)                                 \
    do {                                                                                              \
        _Pragma("unroll") for (int fa_ks = 0; fa_ks < (KEYS) / 16; ++fa_ks)                           \
            FA_WG_MMA(N, ss_mnmaj, type)                                                              \
            ((acc), fa_wg_desc_sw128((ds_addr) + 2048u * (uint32_t)fa_ks, (ds_block_bytes), 1024),      \
             fa_wg_desc_sw128((k_addr) + 2048u * (uint32_t)fa_ks, (KEYS) * 128u, 1024), fa_ks > 0);       \
    } while (0)

/* dQᵀ = Kᵀ·dSᵀ (the backward with a step of N queries that is not whole 64-row blocks, which
 * wgmma's M of 64 cannot hold: FlashAttention-3's dQ_swapAB): 64 head-dim columns of K as A,
 * read through their transpose from the column block at k_addr of a tile of KEYS rows
 * stored [key][d] (MN-major A, as FA_WG_DSK reads dS; its leading offset, the next
 * 64-column block, an M of 64 never uses), against dS stored [query][key] at ds_addr
 * (K-major B: 64-key column blocks of N rows x 128 bytes, ds_block_bytes apart; a k-step
 * of 16 keys is 32 bytes inside the 128-byte row). acc holds N / 2 floats, element (d,
 * query); the first step overwrites them. Issued, not waited for. */
#define FA_WG_KTDS(N, KEYS, type, acc, k_addr, ds_addr, ds_block_bytes)                               \
    do {                                                                                              \
        _Pragma("unroll") for (int fa_ks = 0; fa_ks < (KEYS) / 16; ++fa_ks)                           \
            FA_WG_MMA(N, ss_mkmaj, type)                                                              \
            ((acc), fa_wg_desc_sw128((k_addr) + 2048u * (uint32_t)fa_ks, (KEYS) * 128u, 1024),          \
             fa_wg_desc_sw128((ds_addr) + (uint32_t)(fa_ks / 4) * (ds_block_bytes) + 32u * (uint32_t)(fa_ks % 4), \
                              16, 1024),                                                              \
             fa_ks > 0);                                                                              \
    } while (0)

/* dV += Pᵀ·dO and dK += dSᵀ·Q with the scores from shared memory (the d192 and d256 backward,
 * where both consumers need every query's scores): the A operand a [key][query] tile of
 * one 64-column block at t_addr (K-major, QUERIES <= 64: a k-step of 16 queries is 32
 * bytes inside the 128-byte row), B as stored ([query][d], MN-major) from the column
 * block at rows_addr, its 64-column blocks of d rows_block_bytes apart (the leading
 * offset), a k-step 16 rows = 2048 bytes. acc holds N / 2 floats and accumulates. Issued,
 * not waited for. */
#define FA_WG_TROWS(N, QUERIES, type, acc, t_addr, rows_addr, rows_block_bytes)                        \
    do {                                                                                              \
        _Pragma("unroll") for (int fa_ks = 0; fa_ks < (QUERIES) / 16; ++fa_ks)                        \
            FA_WG_MMA(N, ss_nmaj, type)                                                               \
            ((acc), fa_wg_desc_sw128((t_addr) + 32u * (uint32_t)fa_ks, 16, 1024),                      \
             fa_wg_desc_sw128((rows_addr) + 2048u * (uint32_t)fa_ks, (rows_block_bytes), 1024), 1);     \
    } while (0)

/* ---- mbarriers (PTX ISA #parallel-synchronization-and-communication-instructions-mbarrier) */

/* mbarrier.init (...-mbarrier-init): `count` arrivals complete a phase. One thread inits;
 * fa_mbar_init_fence then a block barrier publish it. */
FA_DEVICE void fa_mbar_init(uint64_t *bar, unsigned count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(fa_hopper_smem_addr(bar)), "r"(count) : "memory");
}
/* fence.mbarrier_init (...-membar, membar/fence): makes the init visible to the async proxy
 * (TMA's complete_tx) before the first copy signals the barrier. */
FA_DEVICE void fa_mbar_init_fence(void) { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }
/* mbarrier.arrive.expect_tx (...-mbarrier-arrive, with .expect_tx as in
 * ...-mbarrier-expect-tx): one arrival, and the phase also waits for
 * `bytes` of transactions (the TMA copies' complete_tx) to land. */
FA_DEVICE void fa_mbar_arrive_expect_tx(uint64_t *bar, unsigned bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(fa_hopper_smem_addr(bar)), "r"(bytes)
                 : "memory");
}
/* mbarrier.expect_tx (...-mbarrier-expect-tx): the current phase also waits for `bytes`
 * of transactions, without an arrival (the arrival comes later, after other stores). */
FA_DEVICE void fa_mbar_expect_tx(uint64_t *bar, unsigned bytes)
{
    asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" ::"r"(fa_hopper_smem_addr(bar)), "r"(bytes)
                 : "memory");
}
/* mbarrier.arrive (...-mbarrier-arrive): one arrival (a consumer releasing a stage). */
FA_DEVICE void fa_mbar_arrive(uint64_t *bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(fa_hopper_smem_addr(bar)) : "memory");
}
/* mbarrier.try_wait.parity (...-mbarrier-test-wait-try-wait): 1 once the phase of parity `phase` (0, 1, 0,
 * ...: the phase count's low bit) has completed; may wait a while in hardware first. */
FA_DEVICE int fa_mbar_try_wait(uint64_t *bar, unsigned phase)
{
    unsigned done;
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done)
                 : "r"(fa_hopper_smem_addr(bar)), "r"(phase)
                 : "memory");
    return (int)done;
}
FA_DEVICE void fa_mbar_wait(uint64_t *bar, unsigned phase)
{
    while (!fa_mbar_try_wait(bar, phase)) {
    }
}

/* ---- proxies, TMA ---------------------------------------------------------------------- */

/* fence.proxy.async.shared::cta (PTX ISA
 * #parallel-synchronization-and-communication-instructions-membar, and 9.7.15.4 "Async
 * Proxy" for wgmma's side): this thread's generic-proxy shared-memory
 * writes (st.shared, zero fills) become visible to the async proxy (wgmma operand
 * reads, TMA stores) that a later barrier orders after it. */
FA_DEVICE void fa_fence_async_smem(void) { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

/* prefetch.tensormap (PTX ISA #data-movement-and-conversion-instructions-prefetch-prefetchu):
 * brings a tensor map (a __grid_constant__
 * parameter's address) into the cache ahead of the first copy. */
FA_DEVICE void fa_tma_prefetch_map(const void *map) { asm volatile("prefetch.tensormap [%0];\n" ::"l"(map) : "memory"); }

/* cp.async.bulk.tensor, tiled mode (PTX ISA
 * #data-movement-and-conversion-instructions-cp-async-bulk-tensor): the box of the tensor map `map` (the
 * address of a __grid_constant__ CUtensorMap parameter) at element coordinates
 * (c0 innermost, c1, ...) into shared memory at `dst` (1024-byte aligned for the 128-byte
 * swizzle), completing `bar`'s transactions with the box's bytes; elements outside the
 * tensor arrive as zeros and still count. Issued by one thread. */
FA_DEVICE void fa_tma_load_2d(void *dst, const void *map, int c0, int c1, uint64_t *bar)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(
                     fa_hopper_smem_addr(dst)),
                 "l"(map), "r"(c0), "r"(c1), "r"(fa_hopper_smem_addr(bar))
                 : "memory");
}
FA_DEVICE void fa_tma_load_3d(void *dst, const void *map, int c0, int c1, int c2, uint64_t *bar)
{
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(
            fa_hopper_smem_addr(dst)),
        "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(fa_hopper_smem_addr(bar))
        : "memory");
}
/* 4D: BSHD operands as (head dim, head, row, batch), one map per operand. */
FA_DEVICE void fa_tma_load_4d(void *dst, const void *map, int c0, int c1, int c2, int c3, uint64_t *bar)
{
    asm volatile(
        "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], "
        "[%6];\n" ::"r"(fa_hopper_smem_addr(dst)),
        "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(fa_hopper_smem_addr(bar))
        : "memory");
}

/* The store direction (PTX ISA #data-movement-and-conversion-instructions-cp-async-bulk-tensor,
 * .global.shared::cta.bulk_group): the box at `src` (laid out as a load of the same map
 * writes it, 1024-byte aligned) to the tensor at element coordinates (c0 innermost, ...);
 * elements outside the tensor are not written. In this thread's current bulk async-group
 * (fa_bulk_commit, fa_bulk_wait_reads below). Issued by one thread, after the writers'
 * fa_fence_async_smem and a barrier. */
FA_DEVICE void fa_tma_store_4d(const void *map, const void *src, int c0, int c1, int c2, int c3)
{
    asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%1, %2, %3, %4}], [%5];\n" ::"l"(map),
                 "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(fa_hopper_smem_addr(src))
                 : "memory");
}

/* cp.reduce.async.bulk, .add.f32 (PTX ISA
 * #data-movement-and-conversion-instructions-cp-reduce-async-bulk): adds `bytes` (a
 * multiple of 16) of fp32 values at shared `src` to global `dst` element by element, as
 * atomics would, by the copy engine (both 16-byte aligned); in this thread's current bulk
 * async-group. Issued by one thread. */
FA_DEVICE void fa_bulk_reduce_add_f32(float *dst, const void *src, unsigned bytes)
{
    asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n" ::"l"(dst),
                 "r"(fa_hopper_smem_addr(src)), "r"(bytes)
                 : "memory");
}
/* cp.async.bulk.commit_group / wait_group (PTX ISA
 * #data-movement-and-conversion-instructions-cp-async-bulk-commit-group, -wait-group):
 * close this thread's bulk operations into a group; wait until none is pending, either
 * for their reads of shared memory (.read: the buffer may be written again) or whole. */
FA_DEVICE void fa_bulk_commit(void) { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
FA_DEVICE void fa_bulk_wait_reads(void) { asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory"); }
FA_DEVICE void fa_bulk_wait_all(void) { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }

/* A flag in global memory that orders bulk operations of different blocks (the
 * deterministic backward's dQ adds). ld.acquire.gpu / st.release.gpu (PTX ISA
 * #data-movement-and-conversion-instructions-ld, -st; memory consistency model, "release
 * and acquire patterns") order this thread's generic accesses; fence.proxy.async.global
 * (#parallel-synchronization-and-communication-instructions-membar) extends that order
 * to its async-proxy (bulk) accesses of global memory: after the acquire for the bulk
 * operations that follow, before the release for those that completed (fa_flag_release_bulk
 * waits for them whole). */
FA_DEVICE void fa_flag_wait_acquire(const int *flag, int value)
{
    int seen;
    do {
        asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(seen) : "l"(flag) : "memory");
    } while (seen != value);
    asm volatile("fence.proxy.async.global;\n" ::: "memory");
}
/* Waits until this thread's bulk operations are complete, then sets `flag` to `value` with
 * release semantics (fence.acq_rel.gpu, then a relaxed store: the release pattern). Before
 * the wait it loads `look` once (relaxed; NULL: nothing) and returns what it saw: the
 * load's latency runs under the bulk operations' completion, and the fence after it makes
 * it an acquire (the acquire pattern). Where it saw the value the caller waits for,
 * fa_flag_seen stands in for fa_flag_wait_acquire. */
FA_DEVICE int fa_flag_release_bulk(int *flag, int value, const int *look)
{
    int seen = 0;
    if (look)
        asm volatile("ld.relaxed.gpu.global.b32 %0, [%1];\n" : "=r"(seen) : "l"(look) : "memory");
    asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
    asm volatile("fence.proxy.async.global;\n" ::: "memory");
    asm volatile("fence.acq_rel.gpu;\n" ::: "memory");
    asm volatile("st.relaxed.gpu.global.b32 [%0], %1;\n" ::"l"(flag), "r"(value) : "memory");
    return seen;
}
FA_DEVICE void fa_flag_seen(void) { asm volatile("fence.proxy.async.global;\n" ::: "memory"); }

/* The next ticket of a counter in global memory that a call's blocks share (the forward
 * walk's drawn work tiles): atom.relaxed.gpu.global.add.u32 (PTX ISA
 * #parallel-synchronization-and-communication-instructions-atom). Relaxed: a ticket
 * names work, it publishes nothing. */
FA_DEVICE unsigned fa_ticket_draw(unsigned *counter)
{
    unsigned ticket;
    asm volatile("atom.relaxed.gpu.global.add.u32 %0, [%1], 1;\n" : "=r"(ticket) : "l"(counter) : "memory");
    return ticket;
}

/* st.shared.b32 / .f32 / .v4.f32: 32 bits (two packed 16-bit values), or one or four
 * consecutive fp32 values, at a shared-memory address (16-byte aligned for four), given
 * as the 32-bit address the descriptors use. */
FA_DEVICE void fa_store_shared_u32(uint32_t addr, uint32_t v)
{
    asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
}
FA_DEVICE void fa_store_shared_f32(uint32_t addr, float v)
{
    asm volatile("st.shared.f32 [%0], %1;\n" ::"r"(addr), "f"(v) : "memory");
}
FA_DEVICE void fa_store_shared_f32x4(uint32_t addr, const float v[4])
{
    asm volatile("st.shared.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "f"(v[0]), "f"(v[1]), "f"(v[2]), "f"(v[3])
                 : "memory");
}

/* stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 (PTX ISA
 * #warp-level-matrix-instructions-stmatrix): four 8 x 8 matrices of 16-bit pairs from the
 * warp's registers, each stored transposed. Register j of lane l holds matrix j's row l / 4,
 * columns 2 (l % 4) and 2 (l % 4) + 1 (the mma accumulator's layout); lane 8j + r gives the
 * address of row r of the stored matrix j, which is column r of the held one (16 bytes,
 * 16-byte aligned). */
FA_DEVICE void fa_stmatrix_x4_trans(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3)
{
    asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(r0),
                 "r"(r1), "r"(r2), "r"(r3)
                 : "memory");
}

/* ---- registers and barriers of warp specialisation ---------------------------------- */

/* setmaxnreg (PTX ISA #miscellaneous-instructions-setmaxnreg): every warp of a warpgroup moves its
 * per-thread register limit to n (24 ... 256, a multiple of 8): .dec gives registers back
 * to the block's pool (the producer), .inc waits until the pool has them (consumers).
 * The kernel must be compiled with a per-thread limit (__launch_bounds__ or maxrregcount)
 * that the warpgroups' sum fits. */
#define fa_regs_shrink(n) asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(n) : "memory")
#define fa_regs_grow(n) asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(n) : "memory")

/* bar.sync / bar.arrive with a barrier id and a thread count (PTX ISA
 * #parallel-synchronization-and-communication-instructions-bar-barrier; ids 0..15):
 * `threads` (a multiple of 32) threads take part; arrive does not wait. Id 0 is
 * __syncthreads'; the warp-specialised kernel numbers its own from 1
 * (docs/research/issue13_hopper.md lists them). */
FA_DEVICE void fa_named_sync(int id, int threads)
{
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
/* The same without .aligned (barrier.sync, PTX ISA
 * #parallel-synchronization-and-communication-instructions-bar): for warps that reach the
 * barrier from different instructions (bar.sync is barrier.sync.aligned, which requires
 * one instruction for every participating thread; compute-sanitizer's synccheck reports
 * a divergent barrier otherwise). */
FA_DEVICE void fa_named_sync_apart(int id, int threads)
{
    asm volatile("barrier.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
FA_DEVICE void fa_named_arrive(int id, int threads)
{
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

#endif /* FA_HOPPER_H */
