/*
 * fa_emu_isa.h - the emulated AMD instructions as host functions (test-only, issue 15),
 * independent of the emulated target: the vector types of the compiler builtins they
 * stand for, the matrix instructions of gfx942 (MFMA 16x16x16 and 32x32x8), gfx1100
 * (RDNA3 WMMA) and gfx1201 (RDNA4 WMMA), ds_bpermute_b32 and ballot. fa_amd_isa.h maps
 * src/hip's thin names onto these; fa_emu_isa.cpp holds their semantics.
 */
#ifndef FA_EMU_ISA_H
#define FA_EMU_ISA_H

#include <stdint.h>

/* The builtins' operand types: 16-bit elements (bf16 carried as its bits in a short, as
 * the bf16 builtins take it) and fp32 accumulators. */
typedef _Float16 fa_emu_f16x4 __attribute__((ext_vector_type(4)));
typedef _Float16 fa_emu_f16x8 __attribute__((ext_vector_type(8)));
typedef _Float16 fa_emu_f16x16 __attribute__((ext_vector_type(16)));
typedef short fa_emu_i16x4 __attribute__((ext_vector_type(4)));
typedef short fa_emu_i16x8 __attribute__((ext_vector_type(8)));
typedef short fa_emu_i16x16 __attribute__((ext_vector_type(16)));
typedef float fa_emu_f32x4 __attribute__((ext_vector_type(4)));
typedef float fa_emu_f32x8 __attribute__((ext_vector_type(8)));
typedef float fa_emu_f32x16 __attribute__((ext_vector_type(16)));

/* d = a·b + c on 16x16x16, a the instruction's src0 and b its src1. Wave ops: every lane
 * of the wave calls them together. */
fa_emu_f32x4 fa_emu_mfma16_f16(fa_emu_f16x4 a, fa_emu_f16x4 b, fa_emu_f32x4 c);
fa_emu_f32x4 fa_emu_mfma16_bf16(fa_emu_i16x4 a, fa_emu_i16x4 b, fa_emu_f32x4 c);
/* d = a·b + c on 32x32x8 (gfx942's v_mfma_f32_32x32x8_f16 / _bf16). */
fa_emu_f32x16 fa_emu_mfma32_f16(fa_emu_f16x4 a, fa_emu_f16x4 b, fa_emu_f32x16 c);
fa_emu_f32x16 fa_emu_mfma32_bf16(fa_emu_i16x4 a, fa_emu_i16x4 b, fa_emu_f32x16 c);
fa_emu_f32x8 fa_emu_wmma11_f16(fa_emu_f16x16 a, fa_emu_f16x16 b, fa_emu_f32x8 c);
fa_emu_f32x8 fa_emu_wmma11_bf16(fa_emu_i16x16 a, fa_emu_i16x16 b, fa_emu_f32x8 c);
fa_emu_f32x8 fa_emu_wmma12_f16(fa_emu_f16x8 a, fa_emu_f16x8 b, fa_emu_f32x8 c);
fa_emu_f32x8 fa_emu_wmma12_bf16(fa_emu_i16x8 a, fa_emu_i16x8 b, fa_emu_f32x8 c);

/* ds_bpermute_b32: v of the lane at byte address addr (lane * 4). */
int fa_emu_bpermute(int addr, int v);
/* Bit l set iff lane l of the wave has a true predicate. */
uint64_t fa_emu_ballot(int predicate);

#endif /* FA_EMU_ISA_H */
