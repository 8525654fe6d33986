/*
 * attn_fwd_parts.h - the parts of the forward that do not depend on how the matrix
 * products are issued, shared by the mma.sync kernel (attn_fwd.h) and the warpgroup
 * kernel (attn_fwd_ws.h): which rows and key tiles a block works on (fa_find_span), the
 * masks, softcap and ALiBi on the score fragment, the online softmax, P as A operands,
 * and the write of O and LSE (or split-KV partials). Both kernels hold scores and O in
 * the same fragment layout: per warp FA_MF groups of 16 rows by FA_NF (scores) or FA_DF
 * (O) accumulator tiles of fa_device.h's contract (a wgmma m64nN accumulator is, per
 * warp, exactly N / 8 such tiles side by side: fa_nv_layouts.h). The includer defines
 * FA_MF, FA_NF, FA_DF, FA_KS and the instance macros first.
 */
#ifndef FA_ATTN_FWD_PARTS_H
#define FA_ATTN_FWD_PARTS_H

#include "fa_device.h"
#include "gpu_kernels/attn_args.h"
#include "gpu_kernels/attn_sequence.h"
#include "gpu_kernels/attn_tile.h"
#include "api/mask.h"

#define FA_RESCALE_SLACK 8.f

/* Where one block works: its sequence, rows, and the range of key tiles it visits. The
 * block has nothing to do when rows_valid <= 0 or batch == the args' batch (past the
 * last pair of a folded grid). */
typedef struct fa_block_span {
    int batch, head, split;    /* head: the query head, or the KV head when packed      */
    int group;                 /* packed query heads per row position (1: not packed)   */
    long long q_row0, k_row0;  /* first row of this sequence in q / k                   */
    int seqlen_q, seqlen_k;
    int m0, rows_valid;        /* first (packed) row of the tile, rows inside the sequence */
    int tile_lo, tile_hi;      /* key tiles [tile_lo, tile_hi) of this split           */
    int full_lo, full_hi;      /* key tiles inside [full_lo, full_hi) need no mask      */
} fa_block_span;

/* The span of the query tile that starts at (packed) row m0 of pair (head, batch_split);
 * batch_split == batch * splits marks a pair past the last one. */
FA_DEVICE fa_block_span fa_span_at(const fa_fwd_args *args, int m0, unsigned head, unsigned batch_split)
{
    fa_block_span s;
#if FA_INST_PACK_GQA
    s.group = args->heads / args->heads_k;
#else
    s.group = 1;
#endif
    s.batch = (int)(batch_split / args->num_splits);
    s.split = (int)(batch_split % args->num_splits);
    s.head = (int)head;
    fa_sequence seq = fa_find_sequence(args, s.batch);
    s.q_row0 = seq.q_row0;
    s.k_row0 = seq.k_row0;
    s.seqlen_q = seq.seqlen_q;
    s.seqlen_k = seq.seqlen_k;
    s.m0 = m0;
#if FA_INST_PACK_GQA
    /* The host keeps G * s_q below 2^31 (gpu_args.c, fa_fwd_limits). */
    s.rows_valid = min(FA_INST_M, s.seqlen_q * s.group - s.m0);
    const int first_pos = s.m0 / s.group, last_pos = (s.m0 + s.rows_valid - 1) / s.group;
#else
    s.rows_valid = min(FA_INST_M, s.seqlen_q - s.m0);
    const int first_pos = s.m0, last_pos = s.m0 + s.rows_valid - 1;
#endif

    fa_window w = {args->window_left, args->window_right};
    long long key_lo = fa_first_visible_key(first_pos, s.seqlen_q, s.seqlen_k, w);
    long long key_hi = fa_end_visible_key(last_pos, s.seqlen_q, s.seqlen_k, w);
    int first = (int)(key_lo / FA_INST_N);
    int count = key_hi > key_lo ? (int)((key_hi + FA_INST_N - 1) / FA_INST_N) - first : 0;
    int per_split = (count + args->num_splits - 1) / args->num_splits;
    s.tile_lo = first + s.split * per_split;
    s.tile_hi = min(first + count, s.tile_lo + per_split);
    if (s.tile_hi < s.tile_lo)
        s.tile_hi = s.tile_lo;
    /* Keys every row of the tile sees (the last row's first, the first row's end), within
     * the sequence: both fit int, and full_hi >= 0 keeps full_hi - N from wrapping. */
    s.full_lo = (int)min(fa_first_visible_key(last_pos, s.seqlen_q, s.seqlen_k, w),
                         (long long)s.seqlen_k);
    s.full_hi = (int)max(fa_end_visible_key(first_pos, s.seqlen_q, s.seqlen_k, w), 0ll);
    return s;
}

/* This block's span in a grid of query tiles by pairs (launch_grid.h). Heavy (late,
 * causal) query tiles first: they start while the light ones fill in. */
FA_DEVICE fa_block_span fa_find_span(const fa_fwd_args *args)
{
    unsigned head, batch_split;
    /* The host keeps batch * splits (at most the grid's pairs) below 2^32. */
#if FA_INST_PACK_GQA
    fa_block_pair(args->heads_k, (unsigned)args->batch * args->num_splits, &head, &batch_split);
#else
    fa_block_pair(args->heads, (unsigned)args->batch * args->num_splits, &head, &batch_split);
#endif
    return fa_span_at(args, (int)(gridDim.x - 1 - blockIdx.x) * FA_INST_M, head, batch_split);
}

#if FA_INST_PACK_GQA
/* Packed row r of a span (counted from the sequence's first packed row): query position
 * r / G of query head kv * G + r % G. */
FA_DEVICE int fa_packed_position(const fa_block_span *s, int r) { return r / s->group; }
FA_DEVICE int fa_packed_head(const fa_block_span *s, int r) { return s->head * s->group + r % s->group; }
#endif

/* Does key tile n0 .. n0+N-1 need per-element masking for query rows of this span (keys
 * past the sequence's end included)? The tile's end is compared as n0 > full_hi - N: the
 * last tile of nearly 2^31 keys starts at 2^31 - N, where n0 + N wraps. */
FA_DEVICE int fa_tile_needs_mask(const fa_block_span *s, int n0)
{
    return n0 < s->full_lo || n0 > s->full_hi - FA_INST_N;
}

/* Per-element work is the cost to avoid here: with no softcap and no ALiBi the scores
 * stay raw and the scale is folded into the exp2 argument (one FFMA per element, see
 * fa_online_softmax); the optional transforms and the mask are separate uniform
 * branches. Returns the factor that turns the values left in acc_s into log2 logits. */
FA_DEVICE float fa_prepare_logits(float acc_s[FA_MF][FA_NF][FA_ACC_REGS], const fa_block_span *s,
                                  const fa_fwd_args *args, int warp_row0, int n0, int masked,
                                  float alibi_log2)
{
    const int lane = fa_lane();
    float logit_scale = args->scale_log2;
    if (args->softcap_log2 > 0.f) {
#pragma unroll
        for (int mf = 0; mf < FA_MF; ++mf)
#pragma unroll
            for (int nf = 0; nf < FA_NF; ++nf)
#pragma unroll
                for (int r = 0; r < FA_ACC_REGS; ++r)
                    acc_s[mf][nf][r] = args->softcap_log2 * fa_tanh(acc_s[mf][nf][r] * args->softcap_inv_scale);
        logit_scale = 1.f;
    }
#if FA_INST_PACK_GQA
    /* Packed rows differ in head, so each row group has its own slope and position. */
    if (args->alibi_slopes) {
#pragma unroll
        for (int mf = 0; mf < FA_MF; ++mf)
#pragma unroll
            for (int g = 0; g < FA_ACC_ROWS; ++g) {
                int row = s->m0 + warp_row0 + mf * FA_MMA_M + fa_acc_row(lane, g * FA_ACC_COLS);
                int pos = fa_packed_position(s, row), head = fa_packed_head(s, row);
                float slope = args->alibi_slopes[s->batch * args->alibi_batch + head] * FA_LOG2E;
                const int diag0 = (pos - n0) + (s->seqlen_k - s->seqlen_q);
#pragma unroll
                for (int nf = 0; nf < FA_NF; ++nf)
#pragma unroll
                    for (int r = g * FA_ACC_COLS; r < (g + 1) * FA_ACC_COLS; ++r) {
                        int dist = diag0 - nf * FA_MMA_N - fa_acc_col(lane, r);
                        acc_s[mf][nf][r] = acc_s[mf][nf][r] * logit_scale - slope * (float)abs(dist);
                    }
            }
        logit_scale = 1.f;
    }
    (void)alibi_log2;
#else
    if (alibi_log2 != 0.f) {
        /* Grouped so that no partial sum wraps (m0 + seqlen_k can pass 2^31). */
        const int diag0 = (s->m0 + warp_row0 - n0) + (s->seqlen_k - s->seqlen_q);
#pragma unroll
        for (int mf = 0; mf < FA_MF; ++mf)
#pragma unroll
            for (int nf = 0; nf < FA_NF; ++nf)
#pragma unroll
                for (int r = 0; r < FA_ACC_REGS; ++r) {
                    int dist = diag0 + mf * FA_MMA_M + fa_acc_row(lane, r) - nf * FA_MMA_N - fa_acc_col(lane, r);
                    acc_s[mf][nf][r] = acc_s[mf][nf][r] * logit_scale - alibi_log2 * (float)abs(dist);
                }
        logit_scale = 1.f;
    }
#endif
    if (masked) {
        fa_window w = {args->window_left, args->window_right};
#pragma unroll
        for (int mf = 0; mf < FA_MF; ++mf)
#pragma unroll
            for (int g = 0; g < FA_ACC_ROWS; ++g) {
                int row = s->m0 + warp_row0 + mf * FA_MMA_M + fa_acc_row(lane, g * FA_ACC_COLS);
#if FA_INST_PACK_GQA
                row = fa_packed_position(s, row);
#endif
                int lo = (int)fa_first_visible_key(row, s->seqlen_q, s->seqlen_k, w) - n0;
                int hi = (int)fa_end_visible_key(row, s->seqlen_q, s->seqlen_k, w) - n0;
#pragma unroll
                for (int nf = 0; nf < FA_NF; ++nf)
#pragma unroll
                    for (int r = g * FA_ACC_COLS; r < (g + 1) * FA_ACC_COLS; ++r) {
                        int col = nf * FA_MMA_N + fa_acc_col(lane, r);
                        if (col < lo || col >= hi)
                            acc_s[mf][nf][r] = -INFINITY;
                    }
            }
    }
    return logit_scale;
}

/* Largest of the registers of row group g of one accumulator tile. */
FA_DEVICE float fa_group_max(const float acc[FA_ACC_REGS], int g)
{
    float mx = acc[g * FA_ACC_COLS];
#pragma unroll
    for (int r = g * FA_ACC_COLS + 1; r < (g + 1) * FA_ACC_COLS; ++r)
        mx = fmaxf(mx, acc[r]);
    return mx;
}

/* Online softmax step of the rows: new running max (kept in log2 units), P =
 * exp2(x * logit_scale - max) in place, running sums (per lane; reduced across the row's
 * lanes only at the end). Returns whether any row of the warp moved its max, with each
 * row's factor for O in `correction` (fa_rescale_o): a separate step, because the
 * warpgroup kernel rescales O only once the product still adding into it is done. */
FA_DEVICE int fa_softmax_rows(float acc_s[FA_MF][FA_NF][FA_ACC_REGS], float row_max[FA_MF][FA_ACC_ROWS],
                              float row_sum[FA_MF][FA_ACC_ROWS], float logit_scale,
                              float correction[FA_MF][FA_ACC_ROWS])
{
    int rescale = 0;
#pragma unroll
    for (int mf = 0; mf < FA_MF; ++mf)
#pragma unroll
        for (int g = 0; g < FA_ACC_ROWS; ++g) {
            float mx = -INFINITY;
#pragma unroll
            for (int nf = 0; nf < FA_NF; ++nf)
                mx = fmaxf(mx, fa_group_max(acc_s[mf][nf], g));
            mx = fa_row_max(mx) * logit_scale;
            /* The running max only moves when the tile's max passes it by more than
             * FA_RESCALE_SLACK (log2 units): exact, because O and the sum share the stale
             * max and the final division cancels it, while P <= 2^slack stays far inside
             * fp16/bf16 range. Rows then rarely move after their first tiles, and the O
             * rescale below is skipped for the whole warp. */
            int moves = mx > row_max[mf][g] + FA_RESCALE_SLACK;
            mx = moves ? mx : row_max[mf][g];
            /* A row that has seen only masked keys keeps max -inf; exponentiate against 0
             * so its P is exactly 0 instead of exp2(-inf + inf) = NaN. */
            float base = mx == -INFINITY ? 0.f : mx;
            correction[mf][g] = moves ? fa_exp2(row_max[mf][g] - base) : 1.f;
            rescale |= moves;
            row_max[mf][g] = mx;
            float sum = row_sum[mf][g] * correction[mf][g];
#pragma unroll
            for (int nf = 0; nf < FA_NF; ++nf)
#pragma unroll
                for (int r = g * FA_ACC_COLS; r < (g + 1) * FA_ACC_COLS; ++r) {
                    float p = fa_exp2(fmaf(acc_s[mf][nf][r], logit_scale, -base));
                    acc_s[mf][nf][r] = p;
                    sum += p;
                }
            row_sum[mf][g] = sum;
        }
    return fa_warp_any(rescale);
}

/* O scaled by the rows' factors from fa_softmax_rows, skipped for the whole warp when no
 * row of it moved (`rescale` 0). */
FA_DEVICE void fa_rescale_o(float acc_o[FA_MF][FA_DF][FA_ACC_REGS], const float correction[FA_MF][FA_ACC_ROWS],
                            int rescale)
{
    if (!rescale)
        return;
#pragma unroll
    for (int mf = 0; mf < FA_MF; ++mf)
#pragma unroll
        for (int df = 0; df < FA_DF; ++df)
#pragma unroll
            for (int r = 0; r < FA_ACC_REGS; ++r)
                acc_o[mf][df][r] *= correction[mf][r / FA_ACC_COLS];
}

/* The whole step for a kernel whose O is not in flight: the rows, then O. */
FA_DEVICE void fa_online_softmax(float acc_s[FA_MF][FA_NF][FA_ACC_REGS], float acc_o[FA_MF][FA_DF][FA_ACC_REGS],
                                 float row_max[FA_MF][FA_ACC_ROWS], float row_sum[FA_MF][FA_ACC_ROWS],
                                 float logit_scale)
{
    float correction[FA_MF][FA_ACC_ROWS];
    const int rescale = fa_softmax_rows(acc_s, row_max, row_sum, logit_scale, correction);
    fa_rescale_o(acc_o, correction, rescale);
}

/* P as A operands for P·V (one per k-step of the key tile; which accumulators form one
 * is the vendor's fa_acc_to_a), converted in one go so the fp32 scores die before the
 * product (the fp32 S tile and O accumulators together are this kernel's register peak). */
FA_DEVICE void fa_pack_p(uint32_t p[FA_MF][FA_KS][FA_A_REGS],
                         float acc_s[FA_MF][FA_NF][FA_ACC_REGS])
{
#pragma unroll
    for (int mf = 0; mf < FA_MF; ++mf)
#pragma unroll
        for (int ks = 0; ks < FA_KS; ++ks)
            fa_acc_to_a(p[mf][ks], acc_s[mf], ks);
}

/* An empty softmax state: O 0, running max -inf, sum 0. */
FA_DEVICE void fa_clear_state(float acc_o[FA_MF][FA_DF][FA_ACC_REGS], float row_max[FA_MF][FA_ACC_ROWS],
                              float row_sum[FA_MF][FA_ACC_ROWS])
{
#pragma unroll
    for (int mf = 0; mf < FA_MF; ++mf) {
#pragma unroll
        for (int df = 0; df < FA_DF; ++df)
#pragma unroll
            for (int r = 0; r < FA_ACC_REGS; ++r)
                acc_o[mf][df][r] = 0.f;
#pragma unroll
        for (int g = 0; g < FA_ACC_ROWS; ++g) {
            row_max[mf][g] = -INFINITY;
            row_sum[mf][g] = 0.f;
        }
    }
}

/* The rows' softmax sums set to 0, so fa_write_output writes them as rows that saw no
 * key: LSE -inf (and O times 0, never read by the combine: its weight is 0). */
FA_DEVICE void fa_forget_rows(float row_sum[FA_MF][FA_ACC_ROWS])
{
#pragma unroll
    for (int mf = 0; mf < FA_MF; ++mf)
#pragma unroll
        for (int g = 0; g < FA_ACC_ROWS; ++g)
            row_sum[mf][g] = 0.f;
}

/* Normalise and write O and LSE once (or the split's fp32 partials). acc_o holds
 * FA_DF_OUT of the row's n-tiles of O from n-tile df0 on (the decode family's key warps
 * each write a share: attn_fwd.h); the warp with the first share writes the LSE. With
 * o_stored, O went out another way (the warpgroup kernel's TMA store) and only the LSE
 * is written here. */
#ifndef FA_DF_OUT
#define FA_DF_OUT FA_DF
#endif
FA_DEVICE void fa_write_output(const fa_fwd_args *args, const fa_block_span *s, int warp_row0, int df0,
                               float acc_o[FA_MF][FA_DF_OUT][FA_ACC_REGS],
                               float row_max[FA_MF][FA_ACC_ROWS], float row_sum[FA_MF][FA_ACC_ROWS], int o_stored)
{
    const int lane = fa_lane();
    const long long seq_base = fa_global_q_row0(args, s->batch, s->q_row0);
#pragma unroll
    for (int mf = 0; mf < FA_MF; ++mf)
#pragma unroll
        for (int g = 0; g < FA_ACC_ROWS; ++g) {
            float sum = fa_row_sum(row_sum[mf][g]);
            float inv = sum > 0.f ? 1.f / sum : 0.f;
            float lse = sum > 0.f ? row_max[mf][g] * FA_LN2 + fa_log(sum) : -INFINITY;
            int row = s->m0 + warp_row0 + mf * FA_MMA_M + fa_acc_row(lane, g * FA_ACC_COLS);
#if FA_INST_PACK_GQA
            if (row >= s->m0 + s->rows_valid)
                continue;
            const int head = fa_packed_head(s, row);
            row = fa_packed_position(s, row);
#else
            if (row >= s->seqlen_q)
                continue;
            const int head = s->head;
#endif
            /* Registers r, r + 1 (r even) hold columns col0 and col0 + FA_ACC_PAIR_STRIDE,
             * inside one group of 8 columns: head_dim, a multiple of 8, never splits a pair. */
            if (args->num_splits == 1) {
                fa_elem *out = (fa_elem *)args->out +
                               fa_row_at(&args->out_layout, s->batch, s->q_row0 + row, head);
#pragma unroll
                for (int r = g * FA_ACC_COLS; r < (g + 1) * FA_ACC_COLS && !o_stored; r += 2) {
                    int col0 = fa_acc_col(lane, r);
#pragma unroll
                    for (int df = 0; df < FA_DF_OUT; ++df) {
                        int col = (df0 + df) * FA_MMA_N + col0;
                        if (col < args->head_dim)
                            fa_store_pair(out + col, acc_o[mf][df][r] * inv, acc_o[mf][df][r + 1] * inv);
                    }
                }
                if (args->lse && df0 == 0 && fa_row_leader(lane))
                    args->lse[fa_lse_at(&args->lse_layout, s->batch, head, s->q_row0 + row)] = lse;
            } else {
                long long grow = seq_base + row;
                float *part = args->partial_out + fa_partial_out_offset(args, s->split, grow, head);
#pragma unroll
                for (int r = g * FA_ACC_COLS; r < (g + 1) * FA_ACC_COLS; r += 2) {
                    int col0 = fa_acc_col(lane, r);
#pragma unroll
                    for (int df = 0; df < FA_DF_OUT; ++df) {
                        int col = (df0 + df) * FA_MMA_N + col0;
                        if (col < args->head_dim) {
                            part[col] = acc_o[mf][df][r] * inv;
                            part[col + FA_ACC_PAIR_STRIDE] = acc_o[mf][df][r + 1] * inv;
                        }
                    }
                }
                if (df0 == 0 && fa_row_leader(lane))
                    args->partial_lse[fa_partial_lse_offset(args, s->split, head, grow)] = lse;
            }
        }
}

#endif /* FA_ATTN_FWD_PARTS_H */
