/*
 * fa_amd_isa.h (emulated) - src/hip/fa_amd_isa.h's thin names for the emulated AMD
 * device of issue 15 (test-only): the same target selection and instruction names, each
 * entering the emulator (fa_emu_isa.h) instead of being a compiler builtin. The target
 * is FA_EMU_TARGET: 942 (gfx942, MFMA, wave64), 1100 (gfx1100, RDNA3 WMMA, wave32) or
 * 1201 (gfx1201, RDNA4 WMMA, wave32).
 *
 * The include guard is src/hip's own, on purpose: fa_device.h includes "fa_amd_isa.h"
 * quoted, which finds src/hip's file next to it whatever the include path says, so the
 * emulated build includes this file first (-include) and the guard makes src/hip's a
 * no-op.
 */
#ifndef FA_AMD_ISA_H
#define FA_AMD_ISA_H

#include <hip/hip_runtime.h>
#include <math.h>

#include "fa_amd_layouts.h"
#include "fa_emu.h"
#include "fa_emu_isa.h"

/* The emulated build is a device pass: fa_device.h issues the instructions. */
#define FA_AMD_DEVICE_PASS 1

#if FA_EMU_TARGET == 942
#define FA_AMD_PRIM FA_AMD_MFMA16
#define FA_AMD_WAVE_SIZE 64
#elif FA_EMU_TARGET == 1100
#define FA_AMD_PRIM FA_AMD_WMMA_GFX11
#define FA_AMD_WAVE_SIZE 32
#elif FA_EMU_TARGET == 1201
#define FA_AMD_PRIM FA_AMD_WMMA_GFX12
#define FA_AMD_WAVE_SIZE 32
#else
#error "flashattn emulator: FA_EMU_TARGET must be 942, 1100 or 1201"
#endif

#define fa_isa_mfma16_f16(a, b, c) fa_emu_mfma16_f16((a), (b), (c))
#define fa_isa_mfma16_bf16(a, b, c) fa_emu_mfma16_bf16((a), (b), (c))
#define fa_isa_mfma32_f16(a, b, c) fa_emu_mfma32_f16((a), (b), (c))
#define fa_isa_mfma32_bf16(a, b, c) fa_emu_mfma32_bf16((a), (b), (c))
#define fa_isa_wmma11_f16(a, b, c) fa_emu_wmma11_f16((a), (b), (c))
#define fa_isa_wmma11_bf16(a, b, c) fa_emu_wmma11_bf16((a), (b), (c))
#define fa_isa_wmma12_f16(a, b, c) fa_emu_wmma12_f16((a), (b), (c))
#define fa_isa_wmma12_bf16(a, b, c) fa_emu_wmma12_bf16((a), (b), (c))

#define fa_isa_bpermute(addr, v) fa_emu_bpermute((addr), (v))

/* Lane 0's v: the first active lane while every lane runs, which is where the kernels
 * call it (read through the emulated ds_bpermute, a wave collective). */
#define fa_isa_readfirstlane(v) fa_emu_bpermute(0, (v))

/* Where the compiler puts accumulators is not modelled: no attribute. */
#define FA_AMD_ACC_IN_VGPRS

/* The builtins' widths: ballot_w64 on wave64, ballot_w32 on wave32. */
#if FA_AMD_WAVE_SIZE == 64
#define fa_isa_ballot(pred) ((uint64_t)fa_emu_ballot(pred))
#else
#define fa_isa_ballot(pred) ((uint32_t)fa_emu_ballot(pred))
#endif

/* v_exp_f32's rounding is not modelled (research note 2.4, 3.8). */
#define fa_isa_exp2(x) exp2f(x)

/* Priorities and the compiler's scheduling hints change when instructions issue, not
 * what they compute; the emulator runs a wave's instructions in program order. */
#define fa_isa_setprio(prio) ((void)0)
#define fa_isa_sched_barrier(mask) ((void)0)
#define fa_isa_sched_group(mask, count, sync_id) ((void)0)

/* One host thread runs every lane, so a plain add is atomic here (note 2.4). */
#define fa_isa_global_atomic_add_f32(dst, x) ((void)(*(dst) += (x)))

/* The workgroup's region for this declaration, from the emulator's exactly sized LDS
 * arena (fa_emu_lds_array): poisoned, counted against the limit, bounded by ASan. */
#define FA_AMD_LDS_ARRAY(name, bytes) unsigned char *const name = (unsigned char *)fa_emu_lds_array(bytes)
/* An object's LDS from the same arena, so it is poisoned, counted and bounded as an
 * array is; name is a reference to it, used as the device's object would be. */
#define FA_AMD_LDS_OBJECT(type, name)                                                         \
    static_assert(alignof(type) <= 16, "LDS regions are 16-byte aligned");                    \
    type &name = *static_cast<type *>(fa_emu_lds_array(sizeof(type)))

#endif /* FA_AMD_ISA_H */
