/*
 * fa_amd_layouts.h - which element of a tile each lane's registers hold, for the AMD
 * matrix primitives exactly as src/hip/fa_device.h uses them. Plain C, host and device:
 * the device code computes its fragment addresses from these functions and
 * tests/test_amd_layouts.cpp checks them on the CPU against an instruction model.
 *
 * Primitives (the instruction, its wave size, 16-bit elements per lane per operand):
 *   FA_AMD_MFMA16     v_mfma_f32_16x16x16{f16,bf16_1k}, CDNA2/3 (gfx90a, gfx942), wave64, 4
 *   FA_AMD_WMMA_GFX11 v_wmma_f32_16x16x16_{f16,bf16}, RDNA3 (gfx1100), wave32, 16
 *                     (lanes l and l + 16 hold the same row: duplicated operands)
 *   FA_AMD_WMMA_GFX12 v_wmma_f32_16x16x16_{f16,bf16}, RDNA4 (gfx1201), wave32, 8
 * These three multiply 16x16 by 16x16 into a 16x16 fp32 tile. A fourth, for the forward
 * that keeps Q in registers (qreg_instances.txt):
 *   FA_AMD_MFMA32     v_mfma_f32_32x32x8{f16,bf16_1k}, CDNA2/3, wave64, 4: 32x8 by 8x32
 *                     into a 32x32 tile, 16 accumulators per lane
 * fp16 and bf16 share layouts.
 *
 * The kernels' C = A·B runs as Cᵀ = Bᵀ·Aᵀ: fa_mma passes the B fragment as the
 * instruction's first source and the A fragment as its second. A lane then holds part of
 * one ROW of C (instead of one column), so softmax row reductions need only the lanes
 * with the same lane % 16, and a tile of P in accumulators is already (MFMA16, GFX12) or
 * after one exchange with lane ^ 16 (GFX11) the A operand of P·V.
 */
#ifndef FA_AMD_LAYOUTS_H
#define FA_AMD_LAYOUTS_H

#if defined(__HIP__)
#define FA_LAYOUT_FN static inline __host__ __device__
#else
#define FA_LAYOUT_FN static inline
#endif

#define FA_AMD_MFMA16 0
#define FA_AMD_WMMA_GFX11 1
#define FA_AMD_WMMA_GFX12 2
#define FA_AMD_MFMA32 3

FA_LAYOUT_FN int fa_amd_is_mfma(int prim) { return prim == FA_AMD_MFMA16 || prim == FA_AMD_MFMA32; }
FA_LAYOUT_FN int fa_amd_wave_size(int prim) { return fa_amd_is_mfma(prim) ? 64 : 32; }

/* 16-bit elements of one A or B fragment per lane; they are consecutive in k. */
FA_LAYOUT_FN int fa_amd_frag_elems(int prim)
{
    return fa_amd_is_mfma(prim) ? 4 : prim == FA_AMD_WMMA_GFX11 ? 16 : 8;
}

/* fp32 accumulator registers per lane. */
FA_LAYOUT_FN int fa_amd_acc_regs(int prim) { return prim == FA_AMD_MFMA32 ? 16 : prim == FA_AMD_MFMA16 ? 4 : 8; }

/* A fragment (A is m x k, 16 x 16): lane l, element i holds A[fa_amd_a_row(l)][fa_amd_frag_k(l, i)].
 * B fragment (B is k x n): lane l, element i holds B[fa_amd_frag_k(l, i)][fa_amd_b_col(l)].
 * Both are the instruction's operand layouts read through the swap above: CDNA3 ISA
 * section 7.1 / AMD Matrix Instruction Calculator for v_mfma_f32_16x16x16f16 (lane l
 * holds row l % 16, k = 4 * (l / 16) + 0..3); RDNA3 ISA section 7.9 (every lane holds
 * all 16 k of row l % 16); RDNA4 ISA section 7.9 (lanes 16-31 hold k = 8..15). */
FA_LAYOUT_FN int fa_amd_a_row(int lane) { return lane % 16; }
FA_LAYOUT_FN int fa_amd_b_col(int lane) { return lane % 16; }
FA_LAYOUT_FN int fa_amd_frag_k(int prim, int lane, int i)
{
    if (prim == FA_AMD_WMMA_GFX11) return i;
    if (prim == FA_AMD_MFMA32) return 4 * (lane / 32) + i;
    return fa_amd_frag_elems(prim) * (lane / 16) + i;
}

/* Accumulator register r of lane l holds C[fa_amd_acc_row(l)][fa_amd_acc_col(prim, l, r)]:
 * the instruction's D layout, transposed by the swap (MFMA: D[4 * (l / 16) + r][l % 16];
 * GFX11: D[2 * r + l / 16][l % 16]; GFX12: D[8 * (l / 16) + r][l % 16]). */
FA_LAYOUT_FN int fa_amd_acc_row(int lane) { return lane % 16; }
FA_LAYOUT_FN int fa_amd_acc_col(int prim, int lane, int r)
{
    if (prim == FA_AMD_MFMA16) return 4 * (lane / 16) + r;
    if (prim == FA_AMD_MFMA32) return 8 * (r / 4) + 4 * (lane / 32) + r % 4;
    if (prim == FA_AMD_WMMA_GFX11) return 2 * r + lane / 16;
    return 8 * (lane / 16) + r;
}

/* The 32 x 32 x 8 shape through the same swap (CDNA3 ISA section 7.1 / the calculator's
 * v_mfma_f32_32x32x8f16: A[i][k] and B[k][j] at i, j = l % 32, k = 4 * (l / 32) + e; D[i][j]
 * at j = l % 32, i = 8 * (r / 4) + 4 * (l / 32) + r % 4). A fragment: lane l, element i
 * holds A[fa_amd_mfma32_row(l)][fa_amd_frag_k(FA_AMD_MFMA32, l, i)]; B fragment
 * B[fa_amd_frag_k(...)][fa_amd_mfma32_row(l)]; accumulator r holds
 * C[fa_amd_mfma32_row(l)][fa_amd_acc_col(FA_AMD_MFMA32, l, r)]. One row of C per lane and
 * the lane l ^ 32: a row reduction is one exchange. */
FA_LAYOUT_FN int fa_amd_mfma32_row(int lane) { return lane % 32; }

/* Column distance between accumulator registers r and r + 1 (r even). */
FA_LAYOUT_FN int fa_amd_acc_pair_stride(int prim) { return prim == FA_AMD_WMMA_GFX11 ? 2 : 1; }

/* Turning a 16x16 accumulator tile of P into the A fragment of P·V: element i of lane l
 * is register fa_amd_p_src_reg(prim, i) of lane fa_amd_p_src_lane(prim, l, i). For
 * FA_AMD_MFMA32, k-step s of P·V (keys 8 s .. 8 s + 7 of a 32-key accumulator tile) is
 * registers 4 s + i of the same lane (fa_amd_acc_col at r = 4 s + i): no exchange. */
FA_LAYOUT_FN int fa_amd_p_src_reg(int prim, int i) { return prim == FA_AMD_WMMA_GFX11 ? i / 2 : i; }
FA_LAYOUT_FN int fa_amd_p_src_lane(int prim, int lane, int i)
{
    return prim == FA_AMD_WMMA_GFX11 ? lane % 16 + 16 * (i % 2) : lane;
}

#endif /* FA_AMD_LAYOUTS_H */
