/*
 * fa_emu_isa.cpp - the semantics of the emulated AMD instructions: which element of A,
 * B, C and D each lane's registers hold in the 16x16x16 matrix instructions and CDNA's
 * 32x32x8, the arithmetic, and the cross-lane gather and vote.
 *
 * The operand and result layouts are those of docs/research/issue15_emulator.md section
 * 2 (2.1 MFMA, 2.2 RDNA3 WMMA, 2.3 RDNA4 WMMA), read from AMD's Matrix Instruction
 * Calculator ([CALC] there), and deliberately not from src/hip/fa_amd_layouts.h: a
 * wrong map there must not agree with itself here. Element e of a lane is half (e % 2)
 * of its VGPR e / 2 (section 2's notation). tests/emu/calc holds the calculator's own
 * tables; the ISA tests check these equations against them.
 */
#include "fa_emu_isa.h"

#include <math.h>
#include <string.h>

#include "fa_emu.h"

/* One lane's operands of a matrix instruction, widest shapes (RDNA3: 16 elements; MFMA
 * 32x32x8: 16 accumulators). */
struct mma_lane_in {
    uint16_t a[16], b[16];
    float c[16];
};
struct mma_lane_out {
    float d[16];
};

/* A matrix instruction's layout: D (dim x dim) = A (dim x kdim) · B (kdim x dim) + C. The
 * A row and the B and D column of a lane are lane % dim on all of them (2.1-2.3, and
 * [CALC]'s equations for 32x32x8); k of element e and the D row of register r differ. */
struct mma_shape {
    const char *name;
    int target;     /* the one emulated target that has it (942, 1100, 1201) */
    int dim, kdim;  /* 16 x 16 x 16, or MFMA's 32 x 32 x 8 */
    int elems;      /* 16-bit elements of A (and of B) per lane */
    int regs;       /* fp32 registers of C/D per lane */
    int bf16;       /* else fp16 */
    int replicated; /* RDNA3: lanes l and l + 16 each hold the whole row l % 16 (2.2) */
    int (*k_of)(int lane, int e);
    int (*d_row)(int lane, int r);
};

/* 2.1 MFMA 16x16x16: A k = 4 * floor(lane / 16) + element; D i = 4 * floor(lane / 16) + r. */
static int mfma16_k(int lane, int e) { return 4 * (lane / 16) + e; }
static int mfma16_d_row(int lane, int r) { return 4 * (lane / 16) + r; }
/* MFMA 32x32x8 ([CALC], v_mfma_f32_32x32x8_f16 / _bf16 on CDNA3): A k = 4 * floor(lane /
 * 32) + element; D i = 8 * floor(r / 4) + 4 * floor(lane / 32) + r % 4. */
static int mfma32_k(int lane, int e) { return 4 * (lane / 32) + e; }
static int mfma32_d_row(int lane, int r) { return 8 * (r / 4) + 4 * (lane / 32) + r % 4; }
/* 2.2 RDNA3 WMMA: A k = element (both copies); D i = 2 * r + floor(lane / 16). */
static int wmma11_k(int lane, int e) { return (void)lane, e; }
static int wmma11_d_row(int lane, int r) { return 2 * r + lane / 16; }
/* 2.3 RDNA4 WMMA: A k = 8 * floor(e / 4) + 4 * floor(lane / 16) + e % 4 (k groups of four
 * interleaved between the half-waves); D i = 8 * floor(lane / 16) + r. */
static int wmma12_k(int lane, int e) { return 8 * (e / 4) + 4 * (lane / 16) + e % 4; }
static int wmma12_d_row(int lane, int r) { return 8 * (lane / 16) + r; }

static double elem_value(uint16_t bits, int bf16)
{
    if (bf16) {
        uint32_t u = (uint32_t)bits << 16;
        float f;
        memcpy(&f, &u, sizeof f);
        return f;
    }
    _Float16 h;
    memcpy(&h, &bits, sizeof h);
    return (double)h;
}

/* RDNA3's two copies of a row must agree bit for bit: [CALC] names both lanes as holders
 * and does not say which one the hardware reads (2.2, 3.4). */
static const uint16_t *operand(const struct mma_lane_in *in, int is_b) { return is_b ? in->b : in->a; }

static int copies_agree(const struct mma_shape *s, const struct mma_lane_in *const *in)
{
    for (int is_b = 0; is_b < 2; ++is_b)
        for (int l = 16; l < 32; ++l)
            for (int e = 0; e < s->elems; ++e) {
                const uint16_t hi = operand(in[l], is_b)[e], lo = operand(in[l - 16], is_b)[e];
                if (hi != lo) {
                    fa_emu_fail(FA_EMU_ERR_WMMA_COPIES, "%s: %s element %d is 0x%04x in lane %d, 0x%04x in lane %d",
                                s->name, is_b ? "B" : "A", e, hi, l, lo, l - 16);
                    return 0;
                }
            }
    return 1;
}

/* D = A·B + C with each D[i][j] summed in double from the exact products and C, rounded
 * once to fp32 (2.4: at least as accurate as the hardware, and order-independent). */
static void mma_exec(const struct mma_shape *s, int wave_size, const void *const *in_v, void *const *out_v)
{
    const struct mma_lane_in *const *in = (const struct mma_lane_in *const *)in_v;
    if (fa_emu_target() != s->target) {
        fa_emu_fail(FA_EMU_ERR_WRONG_TARGET, "%s is no gfx%d instruction", s->name, fa_emu_target());
        return;
    }
    if (s->replicated && !copies_agree(s, in))
        return;
    /* NaN first: an element no lane holds (a hole in a layout) poisons its sums. */
    double a[32][32], b[32][32], c[32][32];
    for (int i = 0; i < 32 * 32; ++i)
        a[i / 32][i % 32] = b[i / 32][i % 32] = c[i / 32][i % 32] = NAN;
    for (int l = 0; l < wave_size; ++l) {
        const int col = l % s->dim;
        for (int e = 0; e < s->elems; ++e) {
            a[col][s->k_of(l, e)] = elem_value(in[l]->a[e], s->bf16);
            b[s->k_of(l, e)][col] = elem_value(in[l]->b[e], s->bf16);
        }
        for (int r = 0; r < s->regs; ++r)
            c[s->d_row(l, r)][col] = in[l]->c[r];
    }
    for (int l = 0; l < wave_size; ++l)
        for (int r = 0; r < s->regs; ++r) {
            const int i = s->d_row(l, r), j = l % s->dim;
            double sum = c[i][j];
            for (int k = 0; k < s->kdim; ++k)
                sum += a[i][k] * b[k][j];
            ((struct mma_lane_out *)out_v[l])->d[r] = (float)sum;
        }
}

#define FA_EMU_MMA(fn, inst, target, dim, kdim, elems, regs, bf16, repl, k_of, d_row)                    \
    static const struct mma_shape fn##_shape = {inst, target, dim, kdim, elems, regs, bf16, repl, k_of, d_row}; \
    static void fn##_exec(int ws, const void *const *in, void *const *out) { mma_exec(&fn##_shape, ws, in, out); } \
    static const struct fa_emu_wave_op fn##_op = {inst, fn##_exec};

FA_EMU_MMA(mfma16_f16, "v_mfma_f32_16x16x16_f16", 942, 16, 16, 4, 4, 0, 0, mfma16_k, mfma16_d_row)
FA_EMU_MMA(mfma16_bf16, "v_mfma_f32_16x16x16_bf16", 942, 16, 16, 4, 4, 1, 0, mfma16_k, mfma16_d_row)
FA_EMU_MMA(mfma32_f16, "v_mfma_f32_32x32x8_f16", 942, 32, 8, 4, 16, 0, 0, mfma32_k, mfma32_d_row)
FA_EMU_MMA(mfma32_bf16, "v_mfma_f32_32x32x8_bf16", 942, 32, 8, 4, 16, 1, 0, mfma32_k, mfma32_d_row)
FA_EMU_MMA(wmma11_f16, "v_wmma_f32_16x16x16_f16 (gfx11)", 1100, 16, 16, 16, 8, 0, 1, wmma11_k, wmma11_d_row)
FA_EMU_MMA(wmma11_bf16, "v_wmma_f32_16x16x16_bf16 (gfx11)", 1100, 16, 16, 16, 8, 1, 1, wmma11_k, wmma11_d_row)
FA_EMU_MMA(wmma12_f16, "v_wmma_f32_16x16x16_f16 (gfx12)", 1201, 16, 16, 8, 8, 0, 0, wmma12_k, wmma12_d_row)
FA_EMU_MMA(wmma12_bf16, "v_wmma_f32_16x16x16_bf16 (gfx12)", 1201, 16, 16, 8, 8, 1, 0, wmma12_k, wmma12_d_row)

/* One lane's part of an MMA: its operands' bits in, its accumulators out. */
static void mma_issue(const struct fa_emu_wave_op *op, const void *a, const void *b, size_t elem_bytes,
                      const void *c, void *d, size_t acc_bytes)
{
    struct mma_lane_in in;
    struct mma_lane_out out;
    memset(&in, 0, sizeof in);
    memcpy(in.a, a, elem_bytes);
    memcpy(in.b, b, elem_bytes);
    memcpy(in.c, c, acc_bytes);
    fa_emu_wave_collective(op, &in, &out);
    memcpy(d, out.d, acc_bytes);
}

#define FA_EMU_MMA_FN(fn, acc_t, elem_t)                                            \
    acc_t fa_emu_##fn(elem_t a, elem_t b, acc_t c)                                  \
    {                                                                                \
        acc_t d;                                                                     \
        mma_issue(&fn##_op, &a, &b, sizeof a, &c, &d, sizeof d);                     \
        return d;                                                                    \
    }

FA_EMU_MMA_FN(mfma16_f16, fa_emu_f32x4, fa_emu_f16x4)
FA_EMU_MMA_FN(mfma16_bf16, fa_emu_f32x4, fa_emu_i16x4)
FA_EMU_MMA_FN(mfma32_f16, fa_emu_f32x16, fa_emu_f16x4)
FA_EMU_MMA_FN(mfma32_bf16, fa_emu_f32x16, fa_emu_i16x4)
FA_EMU_MMA_FN(wmma11_f16, fa_emu_f32x8, fa_emu_f16x16)
FA_EMU_MMA_FN(wmma11_bf16, fa_emu_f32x8, fa_emu_i16x16)
FA_EMU_MMA_FN(wmma12_f16, fa_emu_f32x8, fa_emu_f16x8)
FA_EMU_MMA_FN(wmma12_bf16, fa_emu_f32x8, fa_emu_i16x8)

/* ---- ds_bpermute_b32 (2.4) ---- */

struct bpermute_in {
    int addr, v;
};

/* Lane l gets v of lane addr[l] / 4. Address wrapping is not modelled (the ISA guide's DS
 * chapter was not read): an unaligned address or one past the wave is an error. */
static void bpermute_exec(int ws, const void *const *in_v, void *const *out_v)
{
    const struct bpermute_in *const *in = (const struct bpermute_in *const *)in_v;
    for (int l = 0; l < ws; ++l) {
        const int a = in[l]->addr;
        if (a < 0 || a % 4 != 0 || a / 4 >= ws) {
            fa_emu_fail(FA_EMU_ERR_BPERMUTE_ADDR, "lane %d gives byte address %d (a multiple of 4 below %d)", l, a,
                        4 * ws);
            return;
        }
    }
    for (int l = 0; l < ws; ++l)
        *(int *)out_v[l] = in[in[l]->addr / 4]->v;
}
static const struct fa_emu_wave_op bpermute_op = {"ds_bpermute_b32", bpermute_exec};

int fa_emu_bpermute(int addr, int v)
{
    struct bpermute_in in = {addr, v};
    int out;
    fa_emu_wave_collective(&bpermute_op, &in, &out);
    return out;
}

/* ---- ballot (2.4) ---- */

static void ballot_exec(int ws, const void *const *in, void *const *out)
{
    uint64_t mask = 0;
    for (int l = 0; l < ws; ++l)
        mask |= (uint64_t)(*(const int *)in[l] != 0) << l;
    for (int l = 0; l < ws; ++l)
        *(uint64_t *)out[l] = mask;
}
static const struct fa_emu_wave_op ballot_op = {"ballot", ballot_exec};

uint64_t fa_emu_ballot(int predicate)
{
    uint64_t out;
    fa_emu_wave_collective(&ballot_op, &predicate, &out);
    return out;
}
