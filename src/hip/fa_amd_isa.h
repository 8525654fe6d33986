/*
 * fa_amd_isa.h - the AMD instructions under src/hip/fa_device.h, each behind one thin
 * name: the target selection (FA_AMD_PRIM, FA_AMD_WAVE_SIZE, FA_AMD_DEVICE_PASS), the
 * matrix instructions, ds_bpermute, readfirstlane, ballot, v_exp_f32, the issue-order
 * hints (s_setprio, sched_barrier, sched_group_barrier), the fp32 global atomic add and
 * the LDS declaration. Each name is the compiler builtin it stands for, nothing more, so
 * the code objects are those of the builtins written out.
 *
 * Why a layer: fa_device.h and everything above it (lane maps, reductions, LDS layouts,
 * the kernels) is the code that ships and the code to test. The emulated AMD device of
 * issue 15 (docs/research/issue15_emulator.md, 3.1) compiles that code for the host with
 * its own header of these same names in place of this one, found first on the include
 * path, and executes them on the CPU. The other words of the kernels (__syncthreads,
 * __syncthreads_or, atomicCAS, __threadfence_system, __logf, threadIdx, float2, ...) are
 * HIP's own and come from <hip/hip_runtime.h>, which the emulator replaces by a shim.
 */
#ifndef FA_AMD_ISA_H
#define FA_AMD_ISA_H

#include <hip/hip_runtime.h>

#include "fa_amd_layouts.h"

/* 1 in a pass that generates AMD device code. The host pass parses the kernels but
 * generates no device code: any primitive does. */
#if defined(__HIP_DEVICE_COMPILE__)
#define FA_AMD_DEVICE_PASS 1
#else
#define FA_AMD_DEVICE_PASS 0
#endif

#if !FA_AMD_DEVICE_PASS
#define FA_AMD_PRIM FA_AMD_MFMA16
#elif defined(__gfx90a__) || defined(__gfx942__) || defined(__gfx950__)
#define FA_AMD_PRIM FA_AMD_MFMA16
#elif defined(__GFX11__)
#define FA_AMD_PRIM FA_AMD_WMMA_GFX11
#elif defined(__GFX12__)
#define FA_AMD_PRIM FA_AMD_WMMA_GFX12
#else
#error "flashattn: no matrix primitive for this AMD target (CDNA2+, RDNA3, RDNA4 only)"
#endif

/* Compile-time (ballots and array sizes need it); fa_amd_wave_size says the same. */
#if FA_AMD_PRIM == FA_AMD_MFMA16
#define FA_AMD_WAVE_SIZE 64
#else
#define FA_AMD_WAVE_SIZE 32
#endif
#if FA_AMD_DEVICE_PASS && defined(__AMDGCN_WAVEFRONT_SIZE) && __AMDGCN_WAVEFRONT_SIZE != FA_AMD_WAVE_SIZE
#error "flashattn: build AMD targets in their native wave size (wave64 CDNA, wave32 RDNA)"
#endif

/* d = a·b + c on 16x16x16 (mfma32: 32x32x8), a and b the instruction's src0 and src1
 * (vectors of 16-bit elements), c and d fp32 vectors. Builtins: clang's BuiltinsAMDGPU.def
 * (mfma_f32_16x16x16f16 / _16x16x16bf16_1k and mfma_f32_32x32x8f16 / _32x32x8bf16_1k:
 * "mai-insts"; wmma_*_w32: gfx11 "wmma-256b-insts"; wmma_*_w32_gfx12: gfx12
 * "wmma-128b-insts"); MFMA's cbsz, abid and blgp are 0 (no broadcast, no swizzle). */
#define fa_isa_mfma16_f16(a, b, c) __builtin_amdgcn_mfma_f32_16x16x16f16((a), (b), (c), 0, 0, 0)
#define fa_isa_mfma16_bf16(a, b, c) __builtin_amdgcn_mfma_f32_16x16x16bf16_1k((a), (b), (c), 0, 0, 0)
#define fa_isa_mfma32_f16(a, b, c) __builtin_amdgcn_mfma_f32_32x32x8f16((a), (b), (c), 0, 0, 0)
#define fa_isa_mfma32_bf16(a, b, c) __builtin_amdgcn_mfma_f32_32x32x8bf16_1k((a), (b), (c), 0, 0, 0)
#define fa_isa_wmma11_f16(a, b, c) __builtin_amdgcn_wmma_f32_16x16x16_f16_w32((a), (b), (c))
#define fa_isa_wmma11_bf16(a, b, c) __builtin_amdgcn_wmma_f32_16x16x16_bf16_w32((a), (b), (c))
#define fa_isa_wmma12_f16(a, b, c) __builtin_amdgcn_wmma_f32_16x16x16_f16_w32_gfx12((a), (b), (c))
#define fa_isa_wmma12_bf16(a, b, c) __builtin_amdgcn_wmma_f32_16x16x16_bf16_w32_gfx12((a), (b), (c))

/* The attribute of a kernel whose matrix accumulators are to live in VGPRs: at least two
 * waves per SIMD, so at most 256 registers per lane, under which the compiler gives
 * gfx90a / gfx942's MFMA VGPR operands instead of AGPRs, and rescaling O needs no
 * v_accvgpr_read / v_accvgpr_write round trip (the d128 forward's loop: 120 of its 613
 * VALU instructions; its VGPRs 168 + 40 AGPRs -> 176 + 0, still two waves per SIMD,
 * bench/AMD_RESOURCES.md). RDNA's WMMA has no AGPRs. */
#if FA_AMD_PRIM == FA_AMD_MFMA16
#define FA_AMD_ACC_IN_VGPRS __attribute__((amdgpu_waves_per_eu(2)))
#else
#define FA_AMD_ACC_IN_VGPRS
#endif

/* ds_bpermute_b32: the 32-bit v of the lane whose byte address (lane * 4) this lane gives. */
#define fa_isa_bpermute(addr, v) __builtin_amdgcn_ds_bpermute((addr), (v))

/* v_readfirstlane_b32: the first active lane's v, in a scalar register: a value every
 * lane of the wave holds alike, made known as wave-uniform to the compiler. */
#define fa_isa_readfirstlane(v) __builtin_amdgcn_readfirstlane(v)

/* The wave's lanes whose predicate is true, one bit each (64-bit on wave64). */
#if FA_AMD_WAVE_SIZE == 64
#define fa_isa_ballot(pred) __builtin_amdgcn_ballot_w64(pred)
#else
#define fa_isa_ballot(pred) __builtin_amdgcn_ballot_w32(pred)
#endif

/* v_exp_f32 (exp2, one instruction, exp2(-inf) = 0) where the compiler names it. */
#if __has_builtin(__builtin_amdgcn_exp2f)
#define fa_isa_exp2(x) __builtin_amdgcn_exp2f(x)
#else
#define fa_isa_exp2(x) exp2f(x)
#endif

/* Issue order hints (the Q-in-registers forward's ping-pong, attn_fwd.h FA_PING_PONG).
 * s_setprio: the wave's priority (0-3) when the SIMD's arbiter picks which wave issues
 * next; a wave in its matrix burst raised above the other group's wave on its SIMD keeps
 * the matrix unit fed while that wave's exp fills the VALU slots it leaves. sched_barrier
 * (mask 0: nothing crosses) and sched_group_barrier (mask, count, sync id: the next
 * `count` instructions of class `mask` in this scheduling region, in the order of the
 * calls; classes in LLVM's AMDGPUUsage: 0x8 MFMA, 0x20 VMEM read, 0x100 DS read, 0x200 DS
 * write) steer the compiler's scheduler only; neither changes what the code computes. */
#define fa_isa_setprio(prio) __builtin_amdgcn_s_setprio(prio)
#define fa_isa_sched_barrier(mask) __builtin_amdgcn_sched_barrier(mask)
#define fa_isa_sched_group(mask, count, sync_id) __builtin_amdgcn_sched_group_barrier((mask), (count), (sync_id))

/* *dst += x in global memory, fp32. unsafeAtomicAdd: plain atomicAdd on float compiles
 * to a compare-and-swap loop on gfx90a (global_atomic_cmpswap, checked in the code
 * object); the hardware fp32 add is exact for the coarse-grained hipMalloc memory the
 * workspace lives in. */
#define fa_isa_global_atomic_add_f32(dst, x) unsafeAtomicAdd((dst), (x))

/* A static LDS array of `bytes` bytes, 16-byte aligned: the group segment of the kernel. */
#define FA_AMD_LDS_ARRAY(name, bytes) __shared__ __attribute__((aligned(16))) unsigned char name[bytes]
/* A static LDS object of one type (the combine's struct), in the same group segment. */
#define FA_AMD_LDS_OBJECT(type, name) __shared__ type name

#endif /* FA_AMD_ISA_H */
