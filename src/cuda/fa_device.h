/*
 * fa_device.h (NVIDIA) - the device vocabulary the common kernels in src/common are
 * written against, mapped to sm_80+ instructions: mma.sync m16n8k16 (fp16/bf16 in, fp32
 * accumulate), ldmatrix (.trans for V), cp.async with zero-fill, ex2.approx, tanh.approx
 * and warp shuffles. Nothing algorithmic lives here.
 *
 * Fragment contract (what src/common relies on):
 *   - An MMA tile is FA_MMA_M x FA_MMA_N x FA_MMA_K = 16 x 8 x 16.
 *   - An accumulator holds FA_ACC_REGS floats per lane; register r of lane l is element
 *     (fa_acc_row(l, r), fa_acc_col(l, r)) of the 16x8 tile. They form FA_ACC_ROWS row
 *     groups of consecutive registers, one row each; registers r, r + 1 (r even) are
 *     columns FA_ACC_PAIR_STRIDE apart, stored together by fa_store_pair.
 *   - Lanes that share an accumulator row are combined by fa_row_max / fa_row_sum;
 *     fa_row_leader picks one lane per row.
 *   - fa_acc_to_a(a, acc_row, ks) builds the A operand of k-step ks of the next product
 *     from one m-tile's accumulators (here two adjacent n-tiles, 16x16 of P), without
 *     going through shared memory.
 *   - fa_atomic_add_acc adds a lane's accumulator registers to consecutive global fp32
 *     values, fa_atomic_add one value.
 */
#ifndef FA_DEVICE_CUDA_H
#define FA_DEVICE_CUDA_H

#include <stdint.h>

#include "fa_nv_layouts.h"

#define FA_WARP_SIZE 32
#define FA_MMA_M 16
#define FA_MMA_N 8
#define FA_MMA_K 16
#define FA_ACC_REGS 4
#define FA_A_REGS 4
#define FA_B_REGS 2
#define FA_ACC_ROWS 2
#define FA_ACC_PAIR_STRIDE 1
#include "gpu_kernels/device_common.h"

/* Copies land in shared memory without passing through the thread (cp.async): nothing
 * for a kernel to hold between a copy's load and its store (attn_tile.h). */
#define FA_SYNC_COPIES 0

/* The forward kernels' attributes beyond their block size: none (ptxas sizes registers
 * from __launch_bounds__ alone). */
#define FA_FWD_KERNEL_ATTRS

/* The warpgroup vocabulary (wgmma, TMA, mbarriers, setmaxnreg) for the warpgroup
 * forward's units only (FA_INST_WARPGROUP, ws_instances.txt), which the build compiles
 * for sm_90a alone; fa_hopper.h refuses any other device pass. */
#if defined(FA_INST_WARPGROUP) && FA_INST_WARPGROUP
#include "fa_hopper.h"
#define FA_HAVE_WARPGROUP_MMA 1
#endif

/* Accumulator ownership of mma.sync m16n8k16 (fa_nv_layouts.h). */
FA_DEVICE int fa_acc_row(int lane, int reg) { return fa_nv_acc_row(lane, reg); }
FA_DEVICE int fa_acc_col(int lane, int reg) { return fa_nv_acc_col(lane, reg); }
FA_DEVICE int fa_row_leader(int lane) { return (lane & 3) == 0; }

/* Warp-uniform "does any lane say yes". */
FA_DEVICE int fa_warp_any(int predicate) { return __any_sync(0xffffffffu, predicate); }

/* x of lane (this lane ^ mask); every lane of the warp takes part. */
FA_DEVICE float fa_lane_xor(float x, int mask) { return __shfl_xor_sync(0xffffffffu, x, mask); }
/* x of lane `src` of the warp; every lane of the warp takes part. */
FA_DEVICE float fa_lane_read(float x, int src) { return __shfl_sync(0xffffffffu, x, src); }

/* The four lanes lane&~3 .. lane|3 hold one accumulator row. */
FA_DEVICE float fa_row_max(float x)
{
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
    return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
FA_DEVICE float fa_row_sum(float x)
{
    x += __shfl_xor_sync(0xffffffffu, x, 1);
    return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

FA_DEVICE float fa_exp2(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}
FA_DEVICE float fa_tanh(float x)
{
    float y;
    asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}
FA_DEVICE float fa_log(float x) { return __logf(x); }

FA_DEVICE uint32_t fa_smem_addr(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

/* 16-byte global->shared copy; src_valid 0 writes zeros (cp.async's src-size operand). */
FA_DEVICE void fa_async_copy16(void *smem_dst, const void *gmem_src, int src_valid)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(fa_smem_addr(smem_dst)),
                 "l"(gmem_src), "r"(src_valid ? 16 : 0));
}
/* 4-byte global->shared copy (cp.async.ca: the .cg form moves 16 bytes only), for fp32
 * per-row values whose rows need not be 16-byte aligned. */
FA_DEVICE void fa_async_copy4(void *smem_dst, const void *gmem_src, int src_valid)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(fa_smem_addr(smem_dst)),
                 "l"(gmem_src), "r"(src_valid ? 4 : 0));
}
FA_DEVICE void fa_async_commit(void) { asm volatile("cp.async.commit_group;\n" ::); }

/* Programmatic dependent launch (PTX ISA, griddepcontrol; sm_90+): a kernel that the host
 * launched to overlap the previous kernel of its stream (the runtime table's launch with
 * `overlap`) waits in fa_wait_prior_grid until that kernel has finished and its writes
 * are visible (for a plain launch it returns at once); fa_allow_next_grid lets the next
 * kernel's blocks be scheduled before this one ends. */
FA_DEVICE void fa_wait_prior_grid(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
FA_DEVICE void fa_allow_next_grid(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}
/* Wait until at most n committed groups are pending (n is a compile-time constant). */
#define fa_async_wait(n) asm volatile("cp.async.wait_group %0;\n" ::"n"(n))

/* ldmatrix x4: lane l supplies the shared address of row (l % 8) of matrix (l / 8). */
FA_DEVICE void fa_ldmatrix_x4(uint32_t r[4], uint32_t smem_row)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_row));
}
FA_DEVICE void fa_ldmatrix_x4_trans(uint32_t r[4], uint32_t smem_row)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_row));
}

/* Fragment loads from a shared tile of 16-bit elements with `pitch` elements per row,
 * laid out by tile_layout.h; each lane's role and address come from fa_nv_layouts.h. */
FA_DEVICE uint32_t fa_frag_addr(const void *tile, int lane_offset, int pitch, int row0, int kc)
{
    return fa_nv_frag_addr(fa_smem_addr(tile), lane_offset, pitch, row0, kc);
}
#define fa_lane_frag_addr(tile, pitch, role, lane, row0, kc)                                \
    fa_frag_addr((tile), fa_tile_offset((pitch), fa_nv_##role##_row(lane),                 \
                                        fa_nv_##role##_chunk(lane)),                        \
                 (pitch), (row0), (kc))

/* A operand (16x16, row-major tile[row][k]) at (row0, k0). */
#define fa_load_a(a, tile, pitch, row0, k0) \
    fa_ldmatrix_x4((a), fa_lane_frag_addr((tile), (pitch), lda, fa_lane(), (row0), (k0) >> 3))

/* The B operands of two adjacent n-tiles (b[0], b[1]) from one ldmatrix .x4. */
FA_DEVICE void fa_ldmatrix_pair(uint32_t (*b)[FA_B_REGS], uint32_t smem_row, int trans)
{
    uint32_t r[4];
    if (trans)
        fa_ldmatrix_x4_trans(r, smem_row);
    else
        fa_ldmatrix_x4(r, smem_row);
    b[0][0] = r[0];
    b[0][1] = r[1];
    b[1][0] = r[2];
    b[1][1] = r[3];
}

/* B operands of two adjacent n-tiles for B = tileᵀ (K stored [n][k]): b[0] covers rows
 * n0..n0+7 of the tile, b[1] rows n0+8..n0+15, both over k0..k0+15. */
#define fa_load_bt_pair(b, tile, pitch, n0, k0) \
    fa_ldmatrix_pair((b), fa_lane_frag_addr((tile), (pitch), ldbt, fa_lane(), (n0), (k0) >> 3), 0)

/* B operands of two adjacent n-tiles for B = tile (V stored [k][n]): b[0] covers columns
 * n0..n0+7, b[1] columns n0+8..n0+15, both over rows k0..k0+15. */
#define fa_load_b_pair(b, tile, pitch, k0, n0) \
    fa_ldmatrix_pair((b), fa_lane_frag_addr((tile), (pitch), ldb, fa_lane(), (k0), (n0) >> 3), 1)

/* A operand (16x16) at (row0, k0) of A = tileᵀ, the tile stored [k][row]: the four
 * 8x8 pieces a0..a3 (rows 0-7 / 8-15 x k 0-7 / 8-15) come transposed from stored rows
 * k0 + 0..7 (a0, a1) and k0 + 8..15 (a2, a3). */
#define fa_load_at(a, tile, pitch, row0, k0) \
    fa_ldmatrix_x4_trans((a), fa_lane_frag_addr((tile), (pitch), ldbt, fa_lane(), (k0), (row0) >> 3))

/* The backward's dK/dV kernel adds dQ with atomics (attn_bwd.h phase 3). */
#define FA_BWD_ATOMIC_DQ 1

/* dst[r] += acc[r] for one lane's accumulator registers in global memory, no result
 * returned (dst 16-byte aligned). sm_90 adds all four with one vector reduction (PTX
 * ISA, red: vector types need sm_90). */
FA_DEVICE void fa_atomic_add_acc(float *dst, const float acc[FA_ACC_REGS])
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(dst), "f"(acc[0]), "f"(acc[1]),
                 "f"(acc[2]), "f"(acc[3])
                 : "memory");
#else
#pragma unroll
    for (int r = 0; r < FA_ACC_REGS; ++r)
        atomicAdd(dst + r, acc[r]);
#endif
}
/* *dst += x in global memory, no result returned. */
FA_DEVICE void fa_atomic_add(float *dst, float x) { atomicAdd(dst, x); }

#include <cuda_bf16.h>
#include <cuda_fp16.h>
FA_DEVICE uint32_t fa_pack2_bf16(float lo, float hi)
{
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *(uint32_t *)&v;
}
FA_DEVICE uint32_t fa_pack2_f16(float lo, float hi)
{
    __half2 v = __floats2half2_rn(lo, hi);
    return *(uint32_t *)&v;
}

FA_DEVICE float2 fa_unpack2_bf16(uint32_t v)
{
    return __bfloat1622float2(*(__nv_bfloat162 *)&v);
}
FA_DEVICE float2 fa_unpack2_f16(uint32_t v) { return __half22float2(*(__half2 *)&v); }

/* The instance's element type: FA_INST_BF16 defined -> bf16, else fp16. */
#if defined(FA_INST_BF16)
#define fa_pack2 fa_pack2_bf16
#define FA_MMA_TYPE "bf16"
#else
#define fa_pack2 fa_pack2_f16
#define FA_MMA_TYPE "f16"
#endif

/* Dynamic shared memory of a kernel, 128-byte aligned: the async copies need 16 bytes and
 * fa_nv_frag_addr's swizzled tiles whole 128-byte groups. The size is
 * the launch's (cudaLaunchKernel), so the kernel's statement of it (for vendors whose LDS
 * is sized at compile time) is not needed here. */
#define FA_DYNAMIC_SMEM(name, bytes) extern __shared__ __align__(128) unsigned char name[]
/* The block's static shared memory as an object of one type (the combine's). */
#define FA_SHARED_OBJECT(type, name) __shared__ type name

/* c += a * b on one 16x8x16 tile. */
FA_DEVICE void fa_mma(float c[4], const uint32_t a[4], const uint32_t b[2])
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." FA_MMA_TYPE "." FA_MMA_TYPE
                 ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/* The accumulator layout of two adjacent 16x8 tiles is the A layout of one 16x16 tile
 * (PTX ISA fragment tables), so P feeds P·V straight from registers. */
FA_DEVICE void fa_acc_pair_to_a(uint32_t a[4], const float c0[4], const float c1[4])
{
    a[0] = fa_pack2(c0[0], c0[1]);
    a[1] = fa_pack2(c0[2], c0[3]);
    a[2] = fa_pack2(c1[0], c1[1]);
    a[3] = fa_pack2(c1[2], c1[3]);
}
#define fa_acc_to_a(a, acc_row, ks) fa_acc_pair_to_a((a), (acc_row)[2 * (ks)], (acc_row)[2 * (ks) + 1])

/* Store two adjacent output elements (an accumulator register pair) to global memory. */
FA_DEVICE void fa_store2(void *dst, float lo, float hi) { *(uint32_t *)dst = fa_pack2(lo, hi); }
#define fa_store_pair fa_store2

#endif /* FA_DEVICE_CUDA_H */
