/*
 * fa_device.h (AMD) - the device vocabulary of src/common's kernels for HIP: MFMA
 * 16x16x16 on CDNA (gfx90a, gfx942; wave64), and 32x32x8 for the forward that keeps Q in
 * registers; WMMA 16x16x16 on RDNA3 (gfx1100) and RDNA4 (gfx1201; wave32). Same fragment contract as src/cuda/fa_device.h; which element each
 * lane holds is defined once in fa_amd_layouts.h and computed from there. Nothing
 * algorithmic lives here.
 *
 * Differences from NVIDIA, all inside this file:
 *  - An MMA tile is 16 x 16 x 16 (FA_MMA_N = 16; 32 x 32 x 8 in FA_AMD_SHAPE's case),
 *    and fa_mma computes Cᵀ = Bᵀ·Aᵀ, so one accumulator row group per lane
 *    (FA_ACC_ROWS = 1) and P feeds P·V from registers.
 *  - No asynchronous global->LDS copy: fa_async_copy16 (copy4) loads 16 (4) bytes and
 *    stores them to LDS at once, so commit/wait are empty; the kernel's barriers still
 *    order every LDS write before the reads of other waves (__syncthreads waits for LDS
 *    stores).
 *  - LDS is declared with the size each kernel states (FA_DYNAMIC_SMEM's second
 *    argument; NVIDIA sizes it at launch instead), so the code object's
 *    group_segment_fixed_size is the kernel's LDS (checked by the resource test).
 *  - No ldmatrix: A and Kᵀ fragments are 8/16-byte LDS reads (consecutive k); V
 *    fragments are gathered element by element (no transposing LDS read before gfx950).
 * The instructions themselves (and the target selection) are named in fa_amd_isa.h; this
 * file uses only those names.
 */
#ifndef FA_DEVICE_HIP_H
#define FA_DEVICE_HIP_H

#include <hip/hip_runtime.h>
#include <stdint.h>

#include "fa_amd_isa.h"
#include "fa_amd_layouts.h"

/* The matrix shape of this unit's kernels: the target's primitive, except that on CDNA
 * the forward that keeps Q in registers (FA_INST_Q_IN_REGS, qreg_instances.txt) runs on
 * 32 x 32 x 8: one query row per lane pair (l, l ^ 32), so a row reduction is one
 * exchange, P of a 32-key tile is P·V's A operand without moving, and each 8-byte
 * operand read feeds twice the FLOPs of 16 x 16 x 16 (docs/research/issue19_cdna3.md). */
#if FA_AMD_PRIM == FA_AMD_MFMA16 && defined(FA_INST_Q_IN_REGS)
#define FA_AMD_SHAPE FA_AMD_MFMA32
#else
#define FA_AMD_SHAPE FA_AMD_PRIM
#endif

/* Compile-time per target (array sizes need them); fa_amd_layouts.h says the same at run
 * time and the layout test checks the two agree. */
#define FA_WARP_SIZE FA_AMD_WAVE_SIZE
#if FA_AMD_SHAPE == FA_AMD_MFMA32
#define FA_FRAG_ELEMS 4
#define FA_ACC_REGS 16
#define FA_ACC_PAIR_STRIDE 1
#elif FA_AMD_SHAPE == FA_AMD_MFMA16
#define FA_FRAG_ELEMS 4
#define FA_ACC_REGS 4
#define FA_ACC_PAIR_STRIDE 1
#elif FA_AMD_SHAPE == FA_AMD_WMMA_GFX11
#define FA_FRAG_ELEMS 16
#define FA_ACC_REGS 8
#define FA_ACC_PAIR_STRIDE 2
#else
#define FA_FRAG_ELEMS 8
#define FA_ACC_REGS 8
#define FA_ACC_PAIR_STRIDE 1
#endif

#if FA_AMD_SHAPE == FA_AMD_MFMA32
#define FA_MMA_M 32
#define FA_MMA_N 32
#define FA_MMA_K 8
#else
#define FA_MMA_M 16
#define FA_MMA_N 16
#define FA_MMA_K 16
#endif
#define FA_ACC_ROWS 1
#define FA_A_REGS (FA_FRAG_ELEMS / 2) /* packed pairs of 16-bit elements */
#define FA_B_REGS (FA_FRAG_ELEMS / 2)
/* Consecutive elements one LDS read fetches: at most one 16-byte chunk of a tile row. */
#define FA_FRAG_PIECE (FA_FRAG_ELEMS < 8 ? FA_FRAG_ELEMS : 8)
#include "gpu_kernels/device_common.h"

/* The forward kernels' attributes (src/common/gpu_kernels/attn_fwd.h): accumulators in
 * VGPRs on CDNA (fa_amd_isa.h) for the prefill family up to head dim 128, which then
 * still hold two or more waves per SIMD. The others need more than the 256 registers it
 * leaves a lane: the d256 decode kernel spilled 244-252 bytes and the d128 16x64 one
 * 44-52, the d128 16x32 one with its held K/V tiles 116, and every decode instance of 16
 * x 64 keys or more, and the d192 forward, stayed at one wave per SIMD anyway (the
 * code-object check, bench/AMD_RESOURCES.md). */
#if defined(FA_INST_D) && FA_INST_D <= 128 && !FA_INST_PACK_GQA
#define FA_FWD_KERNEL_ATTRS FA_AMD_ACC_IN_VGPRS
#else
#define FA_FWD_KERNEL_ATTRS
#endif

/* The row of A (and column of B, and row of C) a lane's fragments hold, and the first k
 * of its FA_FRAG_ELEMS consecutive ones: fa_amd_layouts.h's maps for this shape. */
#if FA_AMD_SHAPE == FA_AMD_MFMA32
FA_DEVICE int fa_frag_row(int lane) { return fa_amd_mfma32_row(lane); }
#else
FA_DEVICE int fa_frag_row(int lane) { return fa_amd_a_row(lane); }
#endif
FA_DEVICE int fa_frag_k(int lane) { return fa_amd_frag_k(FA_AMD_SHAPE, lane, 0); }

FA_DEVICE int fa_acc_row(int lane, int reg) { return (void)reg, fa_frag_row(lane); }
FA_DEVICE int fa_acc_col(int lane, int reg) { return fa_amd_acc_col(FA_AMD_SHAPE, lane, reg); }
FA_DEVICE int fa_row_leader(int lane) { return lane < FA_MMA_M; }

/* Wave-uniform "does any lane say yes". */
FA_DEVICE int fa_warp_any(int predicate) { return fa_isa_ballot(predicate != 0) != 0; }

/* x, which every lane of the wave holds alike, as a wave-uniform (scalar) value: a branch
 * on it is a branch of the wave, not a masked region. */
FA_DEVICE int fa_wave_uniform(int x) { return fa_isa_readfirstlane(x); }

/* The phases of the Q-in-registers forward's ping-pong (attn_fwd.h FA_PING_PONG). A
 * phase ends at a workgroup barrier nothing is scheduled across (s_barrier alone is no
 * scheduling boundary: the softmax's VALU work could drift into the matrix phase, or
 * MFMAs into the softmax). A matrix phase runs at a raised priority, so on each SIMD
 * the wave of the group in its matrix phase issues first and the other group's softmax
 * fills the cycles its MFMAs leave; its `mfmas` matrix instructions alternate with
 * fragment reads from LDS two ahead (two reads, then one MFMA and one read), so each read
 * is in flight under the MFMA before the one that uses it rather than all of them ahead
 * of the first MFMA, which would hold every fragment in registers at once. */
FA_DEVICE void fa_phase_barrier(void)
{
    fa_isa_sched_barrier(0);
    __syncthreads();
    fa_isa_sched_barrier(0);
}
#define fa_matrix_phase_begin() fa_isa_setprio(1)
#define fa_matrix_phase_end(mfmas)                                  \
    do {                                                            \
        fa_isa_sched_group(0x100, 2, 0);                            \
        _Pragma("unroll") for (int m_ = 2; m_ < (mfmas); ++m_) {    \
            fa_isa_sched_group(0x008, 1, 0);                        \
            fa_isa_sched_group(0x100, 1, 0);                        \
        }                                                           \
        fa_isa_sched_group(0x008, 2, 0);                            \
        fa_isa_setprio(0);                                          \
    } while (0)

/* x of lane (this lane ^ mask): ds_bpermute takes a byte address of the source lane. */
FA_DEVICE float fa_lane_xor(float x, int mask)
{
    return __int_as_float(fa_isa_bpermute((fa_lane() ^ mask) << 2, __float_as_int(x)));
}
/* x of lane `src` of the wave. */
FA_DEVICE float fa_lane_read(float x, int src)
{
    return __int_as_float(fa_isa_bpermute(src << 2, __float_as_int(x)));
}

/* Lanes l, l ^ 16 (and l ^ 32, l ^ 48 on wave64) hold one accumulator row; on 32 x 32 x 8
 * lanes l and l ^ 32. */
FA_DEVICE float fa_row_max(float x)
{
#if FA_MMA_M == 16
    x = fmaxf(x, fa_lane_xor(x, 16));
#endif
#if FA_WARP_SIZE == 64
    x = fmaxf(x, fa_lane_xor(x, 32));
#endif
    return x;
}
FA_DEVICE float fa_row_sum(float x)
{
#if FA_MMA_M == 16
    x += fa_lane_xor(x, 16);
#endif
#if FA_WARP_SIZE == 64
    x += fa_lane_xor(x, 32);
#endif
    return x;
}

FA_DEVICE float fa_exp2(float x) { return fa_isa_exp2(x); }
FA_DEVICE float fa_tanh(float x) { return tanhf(x); }
FA_DEVICE float fa_log(float x) { return __logf(x); }

typedef unsigned int fa_u32x2 __attribute__((ext_vector_type(2)));
typedef unsigned int fa_u32x4 __attribute__((ext_vector_type(4)));

/* Copies go through registers (no global->LDS copy engine): a kernel may hold a copy's
 * 16 bytes (fa_chunk) between the global load and the LDS store, so the load is in
 * flight while the LDS it replaces is still read (attn_fwd.h, FA_HELD_COPIES). The load
 * is unconditional (a branch around it would end at a join where the compiler waits for
 * it); a copy of nothing loads a valid address and stores fa_chunk_zero instead. */
#define FA_SYNC_COPIES 1
typedef fa_u32x4 fa_chunk;
FA_DEVICE fa_chunk fa_chunk_load(const void *gmem_src) { return *(const fa_chunk *)gmem_src; }
FA_DEVICE fa_chunk fa_chunk_zero(void)
{
    fa_chunk v = {0u, 0u, 0u, 0u};
    return v;
}
FA_DEVICE void fa_chunk_store(void *smem_dst, fa_chunk v) { *(fa_chunk *)smem_dst = v; }
/* The chunk's 8 elements down a column: element e to smem_dst[e * pitch] (ds_write_b16
 * and ds_write_b16_d16_hi, the low and high halves of each register). */
FA_DEVICE void fa_chunk_store_column(unsigned short *smem_dst, int pitch, fa_chunk v)
{
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int e = 0; e < 8; ++e)
        smem_dst[e * pitch] = (unsigned short)(w[e / 2] >> (16 * (e % 2)));
}

/* 16-byte global->LDS copy, synchronous (see the header); src_valid 0 stores zeros. */
FA_DEVICE void fa_async_copy16(void *smem_dst, const void *gmem_src, int src_valid)
{
    fa_chunk v = fa_chunk_zero();
    if (src_valid)
        v = fa_chunk_load(gmem_src);
    fa_chunk_store(smem_dst, v);
}
/* 4-byte variant for fp32 per-row values, same contract. */
FA_DEVICE void fa_async_copy4(void *smem_dst, const void *gmem_src, int src_valid)
{
    uint32_t v = 0u;
    if (src_valid)
        v = *(const uint32_t *)gmem_src;
    *(uint32_t *)smem_dst = v;
}
FA_DEVICE void fa_async_commit(void) {}

/* HIP has no programmatic dependent launch: kernels of a stream run one after another,
 * so there is nothing to wait for or to release early. */
FA_DEVICE void fa_wait_prior_grid(void) {}
FA_DEVICE void fa_allow_next_grid(void) {}
#define fa_async_wait(n) ((void)(n))

/* One A fragment's FA_FRAG_ELEMS consecutive 16-bit elements from global memory, one
 * load (the Q-in-registers forward's Q; src aligned to the fragment's size). */
FA_DEVICE void fa_load_frag_global(uint32_t regs[FA_A_REGS], const void *src)
{
#if FA_A_REGS == 2
    fa_u32x2 v = *(const fa_u32x2 *)src;
    regs[0] = v.x;
    regs[1] = v.y;
#else
    __builtin_memcpy(regs, src, 4 * FA_A_REGS);
#endif
}

/* FA_FRAG_PIECE consecutive 16-bit elements from LDS into packed registers. */
FA_DEVICE void fa_read_piece(uint32_t *regs, const unsigned short *src)
{
#if FA_FRAG_PIECE == 4
    fa_u32x2 v = *(const fa_u32x2 *)src;
    regs[0] = v.x;
    regs[1] = v.y;
#else
    fa_u32x4 v = *(const fa_u32x4 *)src;
    regs[0] = v.x;
    regs[1] = v.y;
    regs[2] = v.z;
    regs[3] = v.w;
#endif
}

/* Fragment loads from a shared tile of 16-bit elements. The tile has `pitch`
 * elements per row, laid out by the common fa_tile_offset. */

/* The fragment of one lane from tile row `row`, elements k .. k + FA_FRAG_ELEMS - 1. */
#define fa_load_row_frag(regs, tile, pitch, row, k)                                      \
    do {                                                                                  \
        _Pragma("unroll") for (int p_ = 0; p_ < FA_FRAG_ELEMS; p_ += FA_FRAG_PIECE)         \
            fa_read_piece(&(regs)[p_ / 2], (tile) + fa_tile_offset((pitch), (row), ((k) + p_) >> 3) + \
                                               (((k) + p_) & 7));                         \
    } while (0)

/* A operand (FA_MMA_M x FA_MMA_K, row-major tile[row][k]) at (row0, k0). */
#define fa_load_a(a, tile, pitch, row0, k0) \
    fa_load_row_frag((a), (tile), pitch, (row0) + fa_frag_row(fa_lane()), (k0) + fa_frag_k(fa_lane()))

/* B operands of two adjacent n-tiles for B = tileᵀ (K stored [n][k]). */
#define fa_load_bt_pair(b, tile, pitch, n0, k0)                                               \
    do {                                                                                       \
        const int k_ = (k0) + fa_frag_k(fa_lane());                                            \
        fa_load_row_frag((b)[0], (tile), pitch, (n0) + fa_frag_row(fa_lane()), k_);            \
        fa_load_row_frag((b)[1], (tile), pitch, (n0) + FA_MMA_N + fa_frag_row(fa_lane()), k_); \
    } while (0)

/* B operands of two adjacent n-tiles for B = Vᵀᵀ from a Vᵀ tile ([d][key], tile_layout.h's
 * fa_vt_offset): a lane's FA_FRAG_ELEMS keys are whole 4-key groups, one piece each (the
 * Q-in-registers family is CDNA's: pieces of 4 elements). */
#if FA_FRAG_PIECE == 4
#define fa_load_vt_pair(b, tile, pitch, n0, k0)                                                      \
    do {                                                                                              \
        const int k_ = (k0) + fa_frag_k(fa_lane());                                                   \
        _Pragma("unroll") for (int j_ = 0; j_ < 2; ++j_)                                              \
            _Pragma("unroll") for (int p_ = 0; p_ < FA_FRAG_ELEMS; p_ += 4)                           \
                fa_read_piece(&(b)[j_][p_ / 2],                                                       \
                              (tile) + fa_vt_offset((pitch), (n0) + FA_MMA_N * j_ + fa_frag_row(fa_lane()), \
                                                    k_ + p_));                                         \
    } while (0)
#endif

#if FA_AMD_SHAPE == FA_AMD_MFMA32
/* 32 x 32 x 8: the B operand of one 32-key n-tile per load (attn_fwd.h FA_B_LOAD_TILES),
 * so a wave's key tile may be 32 keys (aiter's 256 x 32 at d128). */
#define FA_B_LOAD_TILES 1
#define fa_load_bt_tiles(b, tile, pitch, n0, k0) \
    fa_load_row_frag((b)[0], (tile), pitch, (n0) + fa_frag_row(fa_lane()), (k0) + fa_frag_k(fa_lane()))
#endif

/* One element of a tile stored [k][n]. */
#define fa_tile_elem(tile, pitch, k, n) (tile)[fa_tile_offset((pitch), (k), (n) >> 3) + ((n) & 7)]

/* B operands of two adjacent n-tiles for B = tile (V stored [k][n]): a column per lane,
 * gathered element by element. */
#define fa_load_b_pair(b, tile, pitch, k0, n0)                                           \
    do {                                                                                  \
        const int l_ = fa_lane();                                                         \
        _Pragma("unroll") for (int j_ = 0; j_ < 2; ++j_)                                  \
            _Pragma("unroll") for (int i_ = 0; i_ < FA_FRAG_ELEMS; i_ += 2) {             \
                int n_ = (n0) + FA_MMA_N * j_ + fa_frag_row(l_);                          \
                uint32_t lo_ = fa_tile_elem((tile), pitch, (k0) + fa_amd_frag_k(FA_AMD_SHAPE, l_, i_), n_);   \
                uint32_t hi_ = fa_tile_elem((tile), pitch, (k0) + fa_amd_frag_k(FA_AMD_SHAPE, l_, i_ + 1), n_); \
                (b)[j_][i_ / 2] = lo_ | (hi_ << 16);                                      \
            }                                                                             \
    } while (0)

/* A operand (16x16) at (row0, k0) of A = tileᵀ, the tile stored [k][row]: a row of A per
 * lane, gathered element by element as fa_load_b_pair does. */
#define fa_load_at(a, tile, pitch, row0, k0)                                             \
    do {                                                                                  \
        const int l_ = fa_lane();                                                         \
        const int m_ = (row0) + fa_frag_row(l_);                                          \
        _Pragma("unroll") for (int i_ = 0; i_ < FA_FRAG_ELEMS; i_ += 2) {                 \
            uint32_t lo_ = fa_tile_elem((tile), pitch, (k0) + fa_amd_frag_k(FA_AMD_SHAPE, l_, i_), m_);       \
            uint32_t hi_ = fa_tile_elem((tile), pitch, (k0) + fa_amd_frag_k(FA_AMD_SHAPE, l_, i_ + 1), m_);   \
            (a)[i_ / 2] = lo_ | (hi_ << 16);                                              \
        }                                                                                 \
    } while (0)

/* Whether the backward's dK/dV kernel also adds dQ with atomics (attn_bwd.h phase 3).
 * Not at wave32: a wave32 lane holds 16-element fragments, gathered element by element
 * for the transposed dS operand, and with the phase even d32 needs more than RDNA's 256
 * VGPRs (gfx1100: 560 bytes of scratch). dispatch.c's HIP configs say the same. */
#define FA_BWD_ATOMIC_DQ (FA_WARP_SIZE == 64)

/* *dst += x, and dst[r] += acc[r] for one lane's accumulator registers, in global memory. */
FA_DEVICE void fa_atomic_add(float *dst, float x) { fa_isa_global_atomic_add_f32(dst, x); }
FA_DEVICE void fa_atomic_add_acc(float *dst, const float acc[FA_ACC_REGS])
{
#pragma unroll
    for (int r = 0; r < FA_ACC_REGS; ++r)
        fa_isa_global_atomic_add_f32(dst + r, acc[r]);
}

/* fp32 -> fp16 (round to nearest even: the conversion instruction's default). */
FA_DEVICE uint32_t fa_f16_bits(float x)
{
    _Float16 h = (_Float16)x;
    unsigned short bits;
    __builtin_memcpy(&bits, &h, sizeof bits);
    return bits;
}
/* fp32 -> bf16, round to nearest even, NaN not handled: for P, where a NaN score makes
 * the row's fp32 sum NaN and so its output and LSE, whatever P's bits become (a NaN whose
 * rounding carries into the sign would read as -0 here); two VALU per value fewer on P·V's
 * operand than fa_bf16_bits. */
FA_DEVICE uint32_t fa_bf16_bits_rounded(float x)
{
    uint32_t u = __float_as_uint(x);
    return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}
/* fp32 -> bf16, round to nearest even, NaN kept quiet (no conversion instruction before
 * gfx950). */
FA_DEVICE uint32_t fa_bf16_bits(float x)
{
    uint32_t u = __float_as_uint(x);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (u >> 16) | 0x40u;
    return fa_bf16_bits_rounded(x);
}
FA_DEVICE uint32_t fa_pack2_bf16(float lo, float hi) { return fa_bf16_bits(lo) | (fa_bf16_bits(hi) << 16); }
FA_DEVICE uint32_t fa_pack2_p_bf16(float lo, float hi)
{
    return fa_bf16_bits_rounded(lo) | (fa_bf16_bits_rounded(hi) << 16);
}
FA_DEVICE uint32_t fa_pack2_f16(float lo, float hi) { return fa_f16_bits(lo) | (fa_f16_bits(hi) << 16); }

/* Two packed 16-bit elements (low half first) to fp32, both conversions exact. */
FA_DEVICE float2 fa_unpack2_bf16(uint32_t v)
{
    return make_float2(__uint_as_float(v << 16), __uint_as_float(v & 0xffff0000u));
}
FA_DEVICE float2 fa_unpack2_f16(uint32_t v)
{
    _Float16 h[2];
    __builtin_memcpy(h, &v, sizeof h);
    return make_float2((float)h[0], (float)h[1]);
}

/* The instance's element type: FA_INST_BF16 defined -> bf16, else fp16. */
#if defined(FA_INST_BF16)
#define fa_pack2 fa_pack2_bf16
#define fa_pack2_p fa_pack2_p_bf16
typedef short fa_mma_elem;
#else
#define fa_pack2 fa_pack2_f16
#define fa_pack2_p fa_pack2_f16
typedef _Float16 fa_mma_elem;
#endif

/* The kernel's LDS as a static allocation of the size the kernel states (its layout's
 * *_SMEM_BYTES in src/common/gpu_kernels/smem_bytes.h): see the header. */
#define FA_DYNAMIC_SMEM(name, bytes) FA_AMD_LDS_ARRAY(name, bytes)
/* The block's shared memory as an object of one type (the combine's). */
#define FA_SHARED_OBJECT(type, name) FA_AMD_LDS_OBJECT(type, name)

typedef fa_mma_elem fa_frag_vec __attribute__((ext_vector_type(FA_FRAG_ELEMS)));
typedef float fa_acc_vec __attribute__((ext_vector_type(FA_ACC_REGS)));

FA_DEVICE fa_frag_vec fa_as_frag(const uint32_t regs[FA_A_REGS])
{
    fa_frag_vec v;
    __builtin_memcpy(&v, regs, sizeof v);
    return v;
}

/* c += a * b on one FA_MMA_M x FA_MMA_N x FA_MMA_K tile, issued as cᵀ += bᵀ·aᵀ (fa_amd_layouts.h): b is the
 * instruction's first source. */
FA_DEVICE void fa_mma(float c[FA_ACC_REGS], const uint32_t a[FA_A_REGS], const uint32_t b[FA_B_REGS])
{
#if FA_AMD_DEVICE_PASS
    fa_acc_vec acc;
    __builtin_memcpy(&acc, c, sizeof acc);
#if FA_AMD_SHAPE == FA_AMD_MFMA32 && defined(FA_INST_BF16)
    acc = fa_isa_mfma32_bf16(fa_as_frag(b), fa_as_frag(a), acc);
#elif FA_AMD_SHAPE == FA_AMD_MFMA32
    acc = fa_isa_mfma32_f16(fa_as_frag(b), fa_as_frag(a), acc);
#elif FA_AMD_SHAPE == FA_AMD_MFMA16 && defined(FA_INST_BF16)
    acc = fa_isa_mfma16_bf16(fa_as_frag(b), fa_as_frag(a), acc);
#elif FA_AMD_SHAPE == FA_AMD_MFMA16
    acc = fa_isa_mfma16_f16(fa_as_frag(b), fa_as_frag(a), acc);
#elif FA_AMD_PRIM == FA_AMD_WMMA_GFX11 && defined(FA_INST_BF16)
    acc = fa_isa_wmma11_bf16(fa_as_frag(b), fa_as_frag(a), acc);
#elif FA_AMD_PRIM == FA_AMD_WMMA_GFX11
    acc = fa_isa_wmma11_f16(fa_as_frag(b), fa_as_frag(a), acc);
#elif defined(FA_INST_BF16)
    acc = fa_isa_wmma12_bf16(fa_as_frag(b), fa_as_frag(a), acc);
#else
    acc = fa_isa_wmma12_f16(fa_as_frag(b), fa_as_frag(a), acc);
#endif
    __builtin_memcpy(c, &acc, sizeof acc);
#else
    (void)c, (void)a, (void)b;
#endif
}

#if FA_AMD_SHAPE == FA_AMD_MFMA32
/* 32 x 32 x 8: k-step ks is registers 4 (ks % 4) .. + 3 of the lane's own accumulator tile
 * ks / 4 (fa_amd_layouts.h), packed in place. */
FA_DEVICE void fa_acc_regs_to_a(uint32_t a[FA_A_REGS], const float c[FA_ACC_REGS], int ks)
{
    const int r0 = 4 * (ks % 4);
    a[0] = fa_pack2_p(c[r0], c[r0 + 1]);
    a[1] = fa_pack2_p(c[r0 + 2], c[r0 + 3]);
}
#define fa_acc_to_a(a, acc_row, ks) fa_acc_regs_to_a((a), (acc_row)[(ks) / 4], (ks))
#else
/* The A operand of P·V from one 16x16 accumulator tile of P (FA_MMA_N == FA_MMA_K: n-tile
 * ks is k-step ks). Element i comes from fa_amd_p_src_lane/_reg: this lane or lane ^ 16
 * (the exchange is dead code, and removed, where every source is this lane). */
FA_DEVICE void fa_acc_tile_to_a(uint32_t a[FA_A_REGS], const float c[FA_ACC_REGS])
{
    const int lane = fa_lane();
    float elem[FA_FRAG_ELEMS];
#pragma unroll
    for (int i = 0; i < FA_FRAG_ELEMS; ++i) {
        float mine = c[fa_amd_p_src_reg(FA_AMD_PRIM, i)];
        float theirs = fa_lane_xor(mine, 16);
        elem[i] = fa_amd_p_src_lane(FA_AMD_PRIM, lane, i) == lane ? mine : theirs;
    }
#pragma unroll
    for (int i = 0; i < FA_FRAG_ELEMS; i += 2)
        a[i / 2] = fa_pack2(elem[i], elem[i + 1]);
}
#define fa_acc_to_a(a, acc_row, ks) fa_acc_tile_to_a((a), (acc_row)[(ks)])
#endif

/* Store accumulator registers r, r + 1 (columns FA_ACC_PAIR_STRIDE apart) of one row. */
FA_DEVICE void fa_store_pair(void *dst, float lo, float hi)
{
    uint32_t v = fa_pack2(lo, hi);
#if FA_ACC_PAIR_STRIDE == 1
    *(uint32_t *)dst = v;
#else
    ((unsigned short *)dst)[0] = (unsigned short)v;
    ((unsigned short *)dst)[FA_ACC_PAIR_STRIDE] = (unsigned short)(v >> 16);
#endif
}

#endif /* FA_DEVICE_HIP_H */
