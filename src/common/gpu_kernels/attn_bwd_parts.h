/*
 * attn_bwd_parts.h - the parts of the backward that do not depend on how its products are
 * issued, shared by the mma.sync kernels (attn_bwd.h) and the warpgroup dK/dV kernel
 * (attn_bwd_ws.h): the query tiles a key block visits, the walk over them, P and dS from
 * the scores element by element (masks, softcap, ALiBi), the dQ atomics into the
 * accumulator's layout (dq_accum.h) and the stores of dK, dV and dQ. Written against
 * fa_device.h's accumulator vocabulary: a tile is FA_MMA_M x FA_MMA_N, lane l's register
 * r holds element (fa_acc_row(l, r), fa_acc_col(l, r)); a wgmma m64nN accumulator is, per
 * warp, N / 8 such tiles side by side. Included once per translation unit, after the
 * instance's defines.
 */
#ifndef FA_ATTN_BWD_PARTS_H
#define FA_ATTN_BWD_PARTS_H

#include "fa_device.h"
#include "gpu_kernels/attn_args.h"
#include "gpu_kernels/attn_sequence.h"
#include "gpu_kernels/attn_tile.h"
#include "gpu_kernels/dq_accum.h"
#include "api/mask.h"

FA_DEVICE void fa_bwd_zero(float (*acc)[FA_ACC_REGS], int tiles)
{
#pragma unroll
    for (int t = 0; t < tiles; ++t)
#pragma unroll
        for (int r = 0; r < FA_ACC_REGS; ++r)
            acc[t][r] = 0.f;
}

/* The query tiles of `streamed` rows that a block of the dK/dV pass visits, its keys
 * n0 .. n0 + keys_valid - 1 of `resident` rows: tiles m_first .. m_first + m_tiles - 1 see
 * some of them. Query tiles within [full_lo, full_hi) (rows) see every key of the block
 * and need no mask. Padding keys (rows past keys_valid) are masked too: their zero K and
 * V rows give P = exp2(-lse) and dS = -P·D, which fp16 can overflow, and inf times their
 * zero K row in dQ would be NaN. A tile's end is compared as m0 > full_hi - S, S the
 * streamed rows (and the dQ atomics' whole-tile test as m0 <= seqlen_q - S): the last
 * tile of nearly 2^31 rows starts at 2^31 - S, where m0 + S wraps. */
typedef struct fa_bwd_key_block {
    int m_first, m_tiles;
    int full_lo, full_hi;
} fa_bwd_key_block;

FA_DEVICE fa_bwd_key_block fa_bwd_key_block_at(const fa_fwd_args *f, const fa_sequence *seq, int n0,
                                               int keys_valid, int resident, int streamed)
{
    const fa_window w = {f->window_left, f->window_right};
    const long long q_lo = fa_first_query_seeing(n0, seq->seqlen_q, seq->seqlen_k, w);
    const long long q_hi = fa_end_query_seeing(n0 + keys_valid - 1, seq->seqlen_q, seq->seqlen_k, w);
    fa_bwd_key_block b;
    b.m_first = (int)(q_lo / streamed);
    b.m_tiles = keys_valid > 0 && q_hi > q_lo ? (int)((q_hi + streamed - 1) / streamed) - b.m_first : 0;
    b.full_lo = (int)min(fa_first_query_seeing(n0 + keys_valid - 1, seq->seqlen_q, seq->seqlen_k, w),
                         (long long)seq->seqlen_q);
    b.full_hi = keys_valid < resident ? 0 : (int)max(fa_end_query_seeing(n0, seq->seqlen_q, seq->seqlen_k, w), 0ll);
    return b;
}

/* A (query head, query tile) position in the dK/dV kernel's walk over its steps: the tiles
 * of a head, then the next head. head_row = head * total_q, the head's first row in the
 * [heads][total_q] arrays, moves with the head: a 64-bit add per head instead of 64-bit
 * products per step (total_q can pass 2^31). */
typedef struct fa_bwd_cursor {
    int head, tile;
    long long head_row;
} fa_bwd_cursor;

FA_DEVICE void fa_bwd_cursor_next(fa_bwd_cursor *c, int tile_first, int tile_end, long long total_q)
{
    if (++c->tile == tile_end) {
        c->tile = tile_first;
        ++c->head;
        c->head_row += total_q;
    }
}

/* Where a warp's score tile lies, for visibility; rows are queries when keys_are_rows
 * is 0. */
typedef struct fa_bwd_tile {
    int row0, col0;            /* first row / column of the warp tile                     */
    int seqlen_q, seqlen_k;
    int masked;                /* some element of the block's step is invisible, padding   */
                               /* rows and columns past the sequence ends included          */
    int keys_are_rows;
} fa_bwd_tile;

/* P and dS of one element, the general case: P = exp2(logit - lse_log2) with the logit
 * score·scale_log2, or softcap_log2·tanh(score·scale / softcap) with softcap, minus the
 * ALiBi term (fa_bwd_logit; masked elements get P = 0). dS = P ∘ (dP - D) ∘ (1 - tanh²)
 * with softcap: tanh is kept from the forward direction of the same element. */
FA_DEVICE float fa_bwd_logit(float score, int query, int key, const fa_bwd_tile *t, const fa_fwd_args *args,
                             float alibi_log2, float *th)
{
    const int softcap = args->softcap_log2 > 0.f;
    *th = softcap ? fa_tanh(score * args->softcap_inv_scale) : 0.f;
    float x = softcap ? args->softcap_log2 * *th : score * args->scale_log2;
    if (alibi_log2 != 0.f)
        x -= alibi_log2 * fa_alibi_distance(query, key, t->seqlen_q, t->seqlen_k);
    if (t->masked) {
        fa_window w = {args->window_left, args->window_right};
        if (query >= t->seqlen_q || !fa_key_visible(query, key, t->seqlen_q, t->seqlen_k, w))
            x = -INFINITY;
    }
    return x;
}

FA_DEVICE void fa_bwd_grad_element(float *p, float *dp, int query, int key, float lse, float delta,
                                   const fa_bwd_tile *t, const fa_fwd_args *args, float alibi_log2)
{
    float th;
    const float prob = fa_exp2(fa_bwd_logit(*p, query, key, t, args, alibi_log2, &th) - lse);
    const float ds = prob * (*dp - delta);
    *p = prob;
    *dp = args->softcap_log2 > 0.f ? ds * (1.f - th * th) : ds;
}

/* The lean path of fa_bwd_grad_scores below (no ALiBi, no softcap): per-column values
 * loaded once per tile, and on a masked tile (the diagonal tiles of a causal call, a
 * window's edges) mask.h's 32-bit band test (`masked`, a constant where it is called, so
 * each variant compiles without the other's instructions). fa_bwd_probs (the warpgroup
 * kernel at d128) cannot afford the band test (in every form tried its consumers spilled
 * 16-48 bytes, bench/NOTES.md issue 14 b8): without a left window side its masked tiles
 * take one limit per lane for the diagonal (fa_bwd_clear_above, b12) and for the
 * sequences' ends (fa_bwd_clear_past_ends, b15), a window's edges the 64-bit rule. */
FA_DEVICE void fa_bwd_grad_scores_lean(float (*p)[FA_ACC_REGS], float (*dp)[FA_ACC_REGS], int mf_count,
                                       int nf_count, const fa_bwd_tile *t, const fa_fwd_args *args,
                                       const float *lse_rows, const float *lse_cols, const float *delta_rows,
                                       const float *delta_cols, int masked)
{
    const int lane = fa_lane();
    const fa_window w = {args->window_left, args->window_right};
    const fa_band band = fa_band_of(t->seqlen_q, t->seqlen_k, w);
#pragma unroll
    for (int nf = 0; nf < nf_count; ++nf)
#pragma unroll
        for (int r = 0; r < FA_ACC_REGS; ++r) {
            const int c = nf * FA_MMA_N + fa_acc_col(lane, r);
            const float lse = t->keys_are_rows ? lse_cols[c] : lse_rows[r / FA_ACC_COLS];
            const float delta = t->keys_are_rows ? delta_cols[c] : delta_rows[r / FA_ACC_COLS];
#pragma unroll
            for (int mf = 0; mf < mf_count; ++mf) {
                float *pe = &p[mf * nf_count + nf][r], *dpe = &dp[mf * nf_count + nf][r];
                *pe = fa_exp2(*pe * args->scale_log2 - lse);
                if (masked) {
                    const int row = t->row0 + mf * FA_MMA_M + fa_acc_row(lane, r), col = t->col0 + c;
                    if (!fa_band_visible(&band, t->keys_are_rows ? col : row, t->keys_are_rows ? row : col))
                        *pe = 0.f;
                }
                *dpe = *pe * (*dpe - delta);
            }
        }
}

/* Scores S and dP of a warp tile (mf_count 16-row slices of nf_count n-tiles, the first
 * slice at t->row0 / t->col0) -> P and dS in place. LSE (log2 units) and D are per query:
 * per row group (lse_rows, delta_rows) when queries are rows, per column (lse_cols,
 * delta_cols, indexed from t->col0) when keys are. Tiles without ALiBi or softcap, the
 * bulk of any long sequence, take the lean path: per-element branches and index
 * arithmetic otherwise cost as many instructions as the MMAs (and spill out of the
 * instruction cache). */
FA_DEVICE void fa_bwd_grad_scores(float (*p)[FA_ACC_REGS], float (*dp)[FA_ACC_REGS], int mf_count,
                                  int nf_count, const fa_bwd_tile *t, const fa_fwd_args *args,
                                  float alibi_log2, const float *lse_rows, const float *lse_cols,
                                  const float *delta_rows, const float *delta_cols)
{
    const int lane = fa_lane();
    if (alibi_log2 == 0.f && args->softcap_log2 <= 0.f) {
        if (t->masked)
            fa_bwd_grad_scores_lean(p, dp, mf_count, nf_count, t, args, lse_rows, lse_cols, delta_rows, delta_cols,
                                    1);
        else
            fa_bwd_grad_scores_lean(p, dp, mf_count, nf_count, t, args, lse_rows, lse_cols, delta_rows, delta_cols,
                                    0);
        return;
    }
#pragma unroll
    for (int mf = 0; mf < mf_count; ++mf)
#pragma unroll
        for (int nf = 0; nf < nf_count; ++nf)
#pragma unroll
            for (int r = 0; r < FA_ACC_REGS; ++r) {
                const int c = nf * FA_MMA_N + fa_acc_col(lane, r);
                const int row = t->row0 + mf * FA_MMA_M + fa_acc_row(lane, r), col = t->col0 + c;
                fa_bwd_grad_element(&p[mf * nf_count + nf][r], &dp[mf * nf_count + nf][r],
                                    t->keys_are_rows ? col : row, t->keys_are_rows ? row : col,
                                    t->keys_are_rows ? lse_cols[c] : lse_rows[r / FA_ACC_COLS],
                                    t->keys_are_rows ? delta_cols[c] : delta_rows[r / FA_ACC_COLS],
                                    t, args, alibi_log2);
            }
}

/* In a warp tile whose rows are keys: key - query at the lane's first register, and a
 * register's own key - query less that one, a constant where the loops over nf and r
 * unroll (fa_bwd_clear_above, fa_bwd_alibi_scores). */
FA_DEVICE long long fa_bwd_lane_offset(const fa_bwd_tile *t, int lane)
{
    return (long long)t->row0 + fa_acc_row(lane, 0) - t->col0 - fa_acc_col(lane, 0);
}
FA_DEVICE int fa_bwd_register_offset(int lane, int nf, int r)
{
    return (fa_acc_row(lane, r) - fa_acc_row(lane, 0)) - (nf * FA_MMA_N + fa_acc_col(lane, r) - fa_acc_col(lane, 0));
}

/* P = 0 past the band's upper side, in a warp tile whose rows are keys: the limit taken
 * once per lane from its first register's key and query (mask.h fa_band_upper_limit), each
 * register's key - query offset from it a constant. */
FA_DEVICE void fa_bwd_clear_above(float (*p)[FA_ACC_REGS], int nf_count, const fa_bwd_tile *t,
                                  const fa_fwd_args *args)
{
    const int lane = fa_lane();
    const fa_window w = {args->window_left, args->window_right};
    const int lim = fa_band_upper_limit(t->seqlen_q, t->seqlen_k, w, fa_bwd_lane_offset(t, lane));
#pragma unroll
    for (int nf = 0; nf < nf_count; ++nf)
#pragma unroll
        for (int r = 0; r < FA_ACC_REGS; ++r)
            if (fa_bwd_register_offset(lane, nf, r) > lim)
                p[nf][r] = 0.f;
}

/* P = 0 for keys and queries past their sequence's end, in a warp tile whose rows are
 * keys: one limit per lane each way, each register's key and query offsets from the
 * lane's first constants. Their scores are products with zero rows (tails zeroed or
 * filled with zeros by TMA, LSE and D copied as 0), so P is finite or, past the keys,
 * exp2(-lse); the general path's element-wise mask made every step of a key block that
 * ends inside its tile cost about two plain ones, and in a deterministic call every other
 * block of the head waits for that one at each query tile (varlen with unequal lengths,
 * bench/NOTES.md issue 14 b15). */
FA_DEVICE void fa_bwd_clear_past_ends(float (*p)[FA_ACC_REGS], int nf_count, const fa_bwd_tile *t)
{
    const int lane = fa_lane();
    const int keys_left = t->seqlen_k - t->row0 - fa_acc_row(lane, 0);
    const int queries_left = t->seqlen_q - t->col0 - fa_acc_col(lane, 0);
#pragma unroll
    for (int nf = 0; nf < nf_count; ++nf)
#pragma unroll
        for (int r = 0; r < FA_ACC_REGS; ++r)
            if (fa_acc_row(lane, r) - fa_acc_row(lane, 0) >= keys_left ||
                nf * FA_MMA_N + fa_acc_col(lane, r) - fa_acc_col(lane, 0) >= queries_left)
                p[nf][r] = 0.f;
}

/* Whether a warp tile whose rows are keys holds a key or a query past its sequence's end. */
FA_DEVICE int fa_bwd_past_ends(const fa_bwd_tile *t, int nf_count)
{
    return t->row0 > t->seqlen_k - FA_MMA_M || t->col0 > t->seqlen_q - nf_count * FA_MMA_N;
}

/* Whether the ALiBi offset key - query - (seqlen_k - seqlen_q) at a warp tile's corner
 * (rows are keys) lies inside +-2^30, so that every element's, within a hundred of it,
 * fits the int of fa_bwd_alibi_scores; and slope / scale_log2 below 2^96, so that the
 * slope in score units is finite (a subnormal softmax scale would make it inf, and inf x 0
 * NaN at distance 0) and so is its product with any such distance. */
FA_DEVICE int fa_bwd_alibi_near(const fa_bwd_tile *t, const fa_fwd_args *args, float alibi_log2)
{
    const long long offset = (long long)t->row0 - t->col0 - ((long long)t->seqlen_k - t->seqlen_q);
    return fabsf(alibi_log2) < 0x1p96f * args->scale_log2 && offset > -(1 << 30) && offset < (1 << 30);
}

/* ALiBi on the raw scores of a warp tile whose rows are keys, in the units the lean path
 * scales by scale_log2: score - slope / scale_log2 * distance. As in fa_bwd_clear_above,
 * a register's key - query is the lane's offset plus a constant: one add, abs, convert
 * and FMA per register, where the general path took the 64-bit distance per element. */
FA_DEVICE void fa_bwd_alibi_scores(float (*p)[FA_ACC_REGS], int nf_count, const fa_bwd_tile *t,
                                   const fa_fwd_args *args, float alibi_log2)
{
    const int lane = fa_lane();
    const int offset = (int)(fa_bwd_lane_offset(t, lane) - ((long long)t->seqlen_k - t->seqlen_q));
    const float slope = alibi_log2 / args->scale_log2;
#pragma unroll
    for (int nf = 0; nf < nf_count; ++nf)
#pragma unroll
        for (int r = 0; r < FA_ACC_REGS; ++r)
            p[nf][r] -= slope * (float)abs(fa_bwd_register_offset(lane, nf, r) + offset);
}

/* fa_bwd_grad_scores in two passes, for a warp's 16-row slice of nf_count n-tiles whose
 * rows are keys (the warpgroup kernel), without softcap (its dS needs tanh of the score,
 * which P overwrites): P first, so that dV += Pᵀ·dO can run while dS is computed. Masked
 * tiles without a left window side take the lean path and clear what the diagonal and
 * the sequences' ends hide afterwards; a window's left side goes element by element. */
FA_DEVICE void fa_bwd_probs(float (*p)[FA_ACC_REGS], int nf_count, const fa_bwd_tile *t, const fa_fwd_args *args,
                            float alibi_log2, const float *lse_cols)
{
    const int lane = fa_lane();
    if ((alibi_log2 == 0.f || fa_bwd_alibi_near(t, args, alibi_log2)) && (!t->masked || args->window_left < 0)) {
        if (alibi_log2 != 0.f)
            fa_bwd_alibi_scores(p, nf_count, t, args, alibi_log2);
#pragma unroll
        for (int nf = 0; nf < nf_count; ++nf)
#pragma unroll
            for (int r = 0; r < FA_ACC_REGS; ++r)
                p[nf][r] = fa_exp2(p[nf][r] * args->scale_log2 - lse_cols[nf * FA_MMA_N + fa_acc_col(lane, r)]);
        if (t->masked && args->window_right >= 0)
            fa_bwd_clear_above(p, nf_count, t, args);
        if (t->masked && fa_bwd_past_ends(t, nf_count))
            fa_bwd_clear_past_ends(p, nf_count, t);
        return;
    }
#pragma unroll
    for (int nf = 0; nf < nf_count; ++nf)
#pragma unroll
        for (int r = 0; r < FA_ACC_REGS; ++r) {
            const int c = nf * FA_MMA_N + fa_acc_col(lane, r);
            float th;
            const float x =
                fa_bwd_logit(p[nf][r], t->col0 + c, t->row0 + fa_acc_row(lane, r), t, args, alibi_log2, &th);
            p[nf][r] = fa_exp2(x - lse_cols[c]);
        }
}

/* dS = P ∘ (dP - D) in place of dP, D per column (query). */
FA_DEVICE void fa_bwd_dscores(const float (*p)[FA_ACC_REGS], float (*dp)[FA_ACC_REGS], int nf_count,
                              const float *delta_cols)
{
    const int lane = fa_lane();
#pragma unroll
    for (int nf = 0; nf < nf_count; ++nf)
#pragma unroll
        for (int r = 0; r < FA_ACC_REGS; ++r)
            dp[nf][r] = p[nf][r] * (dp[nf][r] - delta_cols[nf * FA_MMA_N + fa_acc_col(lane, r)]);
}

/* Store a warp's 16-row slice (ntiles n-tiles from column d0) of an fp32 accumulator
 * (times `scale`) as fp16/bf16 rows. Registers r, r + 1 (r even) of a row group hold
 * columns col and col + FA_ACC_PAIR_STRIDE of one group of 8: head_dim, a multiple of 8,
 * never splits them. */
FA_DEVICE void fa_bwd_store_rows(fa_elem *base, long long row_stride, int row0, int rows_valid,
                                 int head_dim, const float (*acc)[FA_ACC_REGS], int ntiles, int d0,
                                 float scale)
{
    const int lane = fa_lane();
#pragma unroll
    for (int g = 0; g < FA_ACC_ROWS; ++g) {
        int row = row0 + fa_acc_row(lane, g * FA_ACC_COLS);
        if (row >= rows_valid)
            continue;
#pragma unroll
        for (int r = g * FA_ACC_COLS; r < (g + 1) * FA_ACC_COLS; r += 2)
#pragma unroll
            for (int df = 0; df < ntiles; ++df) {
                int col = d0 + df * FA_MMA_N + fa_acc_col(lane, r);
                if (col < head_dim)
                    fa_store_pair(base + row * row_stride + col, acc[df][r] * scale, acc[df][r + 1] * scale);
            }
    }
}

/* Adds a warp's tile of dQ (mf_count x nf_count MMA tiles at step rows row0..,
 * columns d0..) into the head's accumulator (dq_accum.h's layout); the step's first row
 * is sequence row m0, the sequence's first row seq_row0. When `whole`, every tile is in
 * the sequence and fragment-ordered: constant offsets, one vector atomic per tile and no
 * checks; otherwise each tile is checked, and those past the ends go element by element. */
FA_DEVICE void fa_bwd_dq_add(float *dq_head, long long seq_row0, int m0, int row0, int d0, int whole,
                             int seqlen_q, int head_dim, const float (*acc)[FA_ACC_REGS], int mf_count,
                             int nf_count)
{
    const int lane = fa_lane();
    const int stride = whole ? FA_INST_D : head_dim;
#pragma unroll
    for (int mf = 0; mf < mf_count; ++mf)
#pragma unroll
        for (int nf = 0; nf < nf_count; ++nf) {
            const int row_block = m0 + row0 + mf * FA_MMA_M, col_block = d0 + nf * FA_MMA_N;
            const float *tile = acc[mf * nf_count + nf];
            if (whole || fa_dq_accum_fragment_order(row_block, seqlen_q, head_dim, FA_MMA_M, FA_MMA_N)) {
                if (whole || col_block < head_dim)
                    fa_atomic_add_acc(dq_head + fa_dq_accum_tile(seq_row0, row_block, col_block, stride,
                                                                 FA_MMA_M) +
                                          lane * FA_ACC_REGS,
                                      tile);
                continue;
            }
#pragma unroll
            for (int r = 0; r < FA_ACC_REGS; ++r) {
                const int row = row_block + fa_acc_row(lane, r), col = col_block + fa_acc_col(lane, r);
                if (row < seqlen_q && col < head_dim)
                    fa_atomic_add(dq_head + (seq_row0 + row) * head_dim + col, tile[r]);
            }
        }
}

#endif /* FA_ATTN_BWD_PARTS_H */
