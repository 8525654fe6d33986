/*
 * attn_bwd.h - the backward attention kernels, written once for every vendor against the
 * device vocabulary of fa_device.h. One translation unit includes it once after defining
 * the instance: FA_INST_D, FA_INST_M (query rows per step) = FA_INST_N (key rows per
 * block), FA_INST_WARPS (each warp owns FA_MMA_M = 16 rows, whatever its lane count: one
 * MMA tile's rows), FA_INST_STAGES (streamed buffers; 1 = load, wait, compute),
 * FA_INST_BF16, FA_INST_NAME. It defines two kernels:
 *
 *   FA_INST_NAME##_dkdv: one block per (key tile, kv head, batch); K and V stay in shared
 *     memory while Q, dO, LSE and D = rowsum(dO∘O) tiles of every query head of the GQA
 *     group stream past. In the transposed orientation (rows = keys) every product is a
 *     "row tile x column tile" one, as in the forward: Sᵀ = K·Qᵀ, Pᵀ = exp2(Sᵀ - LSE),
 *     dV += Pᵀ·dO, dPᵀ = V·dOᵀ, dSᵀ = Pᵀ∘(dPᵀ - D), dK += dSᵀ·Q, with Pᵀ and dSᵀ fed
 *     from registers. dK and dV are summed over the group in registers and written once.
 *   FA_INST_NAME##_dq: one block per (query tile, head, batch); Q and dO stay, K/V stream:
 *     S = Q·Kᵀ, P, dP = dO·Vᵀ, dS, dQ += dS·K, written once.
 *
 * Computing dQ in its own pass recomputes S and dP once more (7 products instead of
 * FlashAttention-2's 5) but needs no atomics: results are bitwise reproducible by
 * construction, deterministic mode or not.
 */
#ifdef FA_ATTN_BWD_INCLUDED
#error "attn_bwd.h instantiates one kernel pair per translation unit"
#endif
#define FA_ATTN_BWD_INCLUDED

#include "attn_args.h"
#include "attn_sequence.h"
#include "attn_tile.h"
#include "bwd_instances.h"
#include "mask.h"

#if FA_INST_M != FA_INST_N || FA_INST_N != FA_INST_WARPS * FA_MMA_M
#error "backward instances use square tiles of 16 rows per warp"
#endif
/* The products take n-tiles in pairs (fa_load_bt_pair, fa_load_b_pair). */
#if FA_INST_N % (2 * FA_MMA_N) != 0 || FA_INST_D % (2 * FA_MMA_N) != 0
#error "backward tiles and head dims must span an even number of MMA n-tiles"
#endif

#define FA_CAT_(a, b) a##b
#define FA_CAT(a, b) FA_CAT_(a, b)
#define FA_BT (FA_INST_N / FA_MMA_N) /* n-tiles across a row/column tile                 */
#define FA_BK (FA_INST_N / FA_MMA_K) /* k-steps across it (A operands of P, dS)          */
#define FA_BD (FA_INST_D / FA_MMA_N) /* n-tiles across the head dim                      */
#define FA_TILE_ELEMS (FA_INST_N * FA_PITCH)

/* Top of pipeline step i of `count` (the loops below): afterwards step i's tiles are in
 * shared memory for every warp, and step i + stages - 1 is on its way. */
#if FA_INST_STAGES == 1
/* One buffer: every warp must be done with step i - 1 before step i overwrites it, and the
 * copy must land before anyone reads it. Two barriers per step. */
#define FA_BWD_ADVANCE(load, i, count)                                                   \
    do {                                                                                  \
        fa_barrier();                                                                     \
        load(i);                                                                          \
        fa_async_commit();                                                                \
        fa_async_wait(0);                                                                 \
        fa_barrier();                                                                     \
    } while (0)
#else
/* The barrier both publishes step i and tells that every warp is done with step i - 1,
 * whose buffer is refilled at once. */
#define FA_BWD_ADVANCE(load, i, count)                                                   \
    do {                                                                                  \
        fa_async_wait(FA_INST_STAGES - 2);                                                \
        fa_barrier();                                                                     \
        if ((i) + FA_INST_STAGES - 1 < (count))                                           \
            load((i) + FA_INST_STAGES - 1);                                               \
        fa_async_commit();                                                                \
    } while (0)
#endif

/* acc (16 rows x FA_INST_N columns of this warp) = A[row0..row0+15][:] · B[0..N-1][:]ᵀ,
 * both tiles stored [row][head dim] in shared memory. */
FA_DEVICE void fa_bwd_rows_by_cols(float acc[FA_BT][FA_ACC_REGS], const fa_elem *a_tile, int row0,
                                   const fa_elem *b_tile)
{
#pragma unroll
    for (int nf = 0; nf < FA_BT; ++nf)
#pragma unroll
        for (int r = 0; r < FA_ACC_REGS; ++r)
            acc[nf][r] = 0.f;
#pragma unroll
    for (int k0 = 0; k0 < FA_INST_D; k0 += FA_MMA_K) {
        uint32_t a[FA_A_REGS];
        fa_load_a(a, a_tile, fa_smem_offset, row0, k0);
#pragma unroll
        for (int nf = 0; nf < FA_BT; nf += 2) {
            uint32_t b[2][FA_B_REGS];
            fa_load_bt_pair(b, b_tile, fa_smem_offset, nf * FA_MMA_N, k0);
            fa_mma(acc[nf], a, b[0]);
            fa_mma(acc[nf + 1], a, b[1]);
        }
    }
}

/* acc (16 rows x head dim) += P · B, P given as packed A operands over FA_INST_N columns
 * and B stored [FA_INST_N rows][head dim] in shared memory. */
FA_DEVICE void fa_bwd_accumulate(float acc[FA_BD][FA_ACC_REGS],
                                 const uint32_t p[FA_BK][FA_A_REGS], const fa_elem *b_tile)
{
#pragma unroll
    for (int ks = 0; ks < FA_BK; ++ks)
#pragma unroll
        for (int df = 0; df < FA_BD; df += 2) {
            uint32_t b[2][FA_B_REGS];
            fa_load_b_pair(b, b_tile, fa_smem_offset, ks * FA_MMA_K, df * FA_MMA_N);
            fa_mma(acc[df], p[ks], b[0]);
            fa_mma(acc[df + 1], p[ks], b[1]);
        }
}

FA_DEVICE void fa_bwd_pack(uint32_t p[FA_BK][FA_A_REGS], float acc[FA_BT][FA_ACC_REGS])
{
#pragma unroll
    for (int ks = 0; ks < FA_BK; ++ks)
        fa_acc_to_a(p[ks], acc, ks);
}

/* Visibility of element (query, key); rows are queries when keys_are_rows is 0. */
typedef struct fa_bwd_tile {
    int row0, col0;            /* first row / column of this warp's 16 x N block        */
    int seqlen_q, seqlen_k;
    int masked;                /* some element of the tile is invisible                 */
    int keys_are_rows;
} fa_bwd_tile;

/* Scores of a warp block -> P = exp2(score·scale_log2 + bias - lse_log2) in place, with
 * lse_log2 per query (rows or columns). Masked elements get P = 0. */
FA_DEVICE void fa_bwd_probabilities(float s[FA_BT][FA_ACC_REGS], const fa_bwd_tile *t,
                                    const fa_fwd_args *args, float alibi_log2,
                                    const float *lse_rows, const float *lse_cols)
{
    const int lane = fa_lane();
    fa_window w = {args->window_left, args->window_right};
#pragma unroll
    for (int nf = 0; nf < FA_BT; ++nf)
#pragma unroll
        for (int r = 0; r < FA_ACC_REGS; ++r) {
            int row = t->row0 + fa_acc_row(lane, r);
            int col = t->col0 + nf * FA_MMA_N + fa_acc_col(lane, r);
            int query = t->keys_are_rows ? col : row;
            int key = t->keys_are_rows ? row : col;
            float lse = t->keys_are_rows ? lse_cols[nf * FA_MMA_N + fa_acc_col(lane, r)]
                                         : lse_rows[r / FA_ACC_COLS];
            float x = s[nf][r] * args->scale_log2;
            if (alibi_log2 != 0.f)
                x -= alibi_log2 * fa_alibi_distance(query, key, t->seqlen_q, t->seqlen_k);
            if (t->masked && (query >= t->seqlen_q ||
                              !fa_key_visible(query, key, t->seqlen_q, t->seqlen_k, w)))
                x = -INFINITY;
            s[nf][r] = fa_exp2(x - lse);
        }
}

/* dS = P ∘ (dP - D), in place over dP, D per query (rows or columns). */
FA_DEVICE void fa_bwd_dscores(float dp[FA_BT][FA_ACC_REGS], const float p[FA_BT][FA_ACC_REGS],
                              int keys_are_rows, const float *delta_rows, const float *delta_cols)
{
    const int lane = fa_lane();
#pragma unroll
    for (int nf = 0; nf < FA_BT; ++nf)
#pragma unroll
        for (int r = 0; r < FA_ACC_REGS; ++r) {
            float d = keys_are_rows ? delta_cols[nf * FA_MMA_N + fa_acc_col(lane, r)]
                                    : delta_rows[r / FA_ACC_COLS];
            dp[nf][r] = p[nf][r] * (dp[nf][r] - d);
        }
}

/* Store a warp's 16 x head-dim fp32 accumulator (times `scale`) as fp16/bf16 rows.
 * Registers r, r + 1 (r even) of a row group hold columns col and col +
 * FA_ACC_PAIR_STRIDE of one group of 8: head_dim, a multiple of 8, never splits them. */
FA_DEVICE void fa_bwd_store_rows(fa_elem *base, long long row_stride, int row0, int rows_valid,
                                 int head_dim, float acc[FA_BD][FA_ACC_REGS], float scale)
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
            for (int df = 0; df < FA_BD; ++df) {
                int col = df * FA_MMA_N + fa_acc_col(lane, r);
                if (col < head_dim)
                    fa_store_pair(base + row * row_stride + col, acc[df][r] * scale, acc[df][r + 1] * scale);
            }
    }
}

/* Per-row fp32 values (LSE, D) of query rows [m0, m0 + N) into shared memory. */
FA_DEVICE void fa_bwd_load_rows(float *smem, const float *gmem, int rows_valid)
{
    if (threadIdx.x < FA_INST_N) {
        int valid = (int)threadIdx.x < rows_valid;
        fa_async_copy4(smem + threadIdx.x, valid ? gmem + threadIdx.x : gmem, valid);
    }
}

extern "C" FA_GLOBAL void __launch_bounds__(FA_THREADS) FA_CAT(FA_INST_NAME, _dkdv)(fa_bwd_args args)
{
    FA_DYNAMIC_SMEM(fa_smem, FA_BWD_DKDV_SMEM_BYTES(FA_INST_D, FA_INST_N, FA_INST_STAGES));
    fa_elem *smem_k = (fa_elem *)fa_smem;
    fa_elem *smem_v = smem_k + FA_TILE_ELEMS;
    fa_elem *smem_q = smem_v + FA_TILE_ELEMS;                     /* [stages] tiles */
    fa_elem *smem_do = smem_q + FA_INST_STAGES * FA_TILE_ELEMS;   /* [stages] tiles */
    float *smem_lse = (float *)(smem_do + FA_INST_STAGES * FA_TILE_ELEMS); /* [stages][N] */
    float *smem_delta = smem_lse + FA_INST_STAGES * FA_INST_N;             /* [stages][N] */

    const fa_fwd_args *f = &args.fwd;
    const int batch = blockIdx.z, kv_head = blockIdx.y, n0 = blockIdx.x * FA_INST_N;
    const fa_sequence seq = fa_find_sequence(f, batch);
    if (n0 >= seq.seqlen_k)
        return;
    const int keys_valid = min(FA_INST_N, seq.seqlen_k - n0);
    const int group = f->heads / f->heads_k;
    const int warp_key0 = fa_warp() * FA_MMA_M;
    const long long q_base = f->cu_seqlens_q ? seq.q_row0 : (long long)batch * f->seqlen_q;

    fa_window w = {f->window_left, f->window_right};
    const long long q_lo = fa_first_query_seeing(n0, seq.seqlen_q, seq.seqlen_k, w);
    const long long q_hi = fa_end_query_seeing(n0 + keys_valid - 1, seq.seqlen_q, seq.seqlen_k, w);
    const int m_first = (int)(q_lo / FA_INST_M);
    const int m_tiles = q_hi > q_lo ? (int)((q_hi + FA_INST_M - 1) / FA_INST_M) - m_first : 0;
    const int steps = group * m_tiles;

    const fa_elem *k = (const fa_elem *)f->k + batch * f->k_batch + (seq.k_row0 + n0) * f->k_row +
                       kv_head * f->k_head;
    const fa_elem *v = (const fa_elem *)f->v + batch * f->v_batch + (seq.k_row0 + n0) * f->v_row +
                       kv_head * f->v_head;
    fa_load_tile(smem_k, k, f->k_row, keys_valid, f->head_dim, FA_INST_N);
    fa_load_tile(smem_v, v, f->v_row, keys_valid, f->head_dim, FA_INST_N);

    /* Step i covers query head kv_head * group + i / m_tiles, query tile i % m_tiles. */
#define FA_STEP_HEAD(i) (kv_head * group + (i) / m_tiles)
#define FA_STEP_M0(i) ((m_first + (i) % m_tiles) * FA_INST_M)
#define FA_LOAD_STEP(i)                                                                         \
    do {                                                                                        \
        const int h_ = FA_STEP_HEAD(i), m0_ = FA_STEP_M0(i), buf_ = (i) % FA_INST_STAGES;       \
        const int rows_ = seq.seqlen_q - m0_;                                                   \
        fa_load_tile(smem_q + buf_ * FA_TILE_ELEMS,                                             \
                     (const fa_elem *)f->q + batch * f->q_batch + (seq.q_row0 + m0_) * f->q_row + \
                         h_ * f->q_head,                                                        \
                     f->q_row, rows_, f->head_dim, FA_INST_M);                                  \
        fa_load_tile(smem_do + buf_ * FA_TILE_ELEMS,                                            \
                     (const fa_elem *)args.dout + batch * args.do_batch +                       \
                         (seq.q_row0 + m0_) * args.do_row + h_ * args.do_head,                  \
                     args.do_row, rows_, f->head_dim, FA_INST_M);                               \
        fa_bwd_load_rows(smem_lse + buf_ * FA_INST_N,                                           \
                         args.lse_log2 + (long long)h_ * f->total_q + q_base + m0_, rows_);     \
        fa_bwd_load_rows(smem_delta + buf_ * FA_INST_N,                                         \
                         args.delta + (long long)h_ * f->total_q + q_base + m0_, rows_);        \
    } while (0)

    /* Copies complete in commit order: K, V and step 0 form the first group (committed in
     * FA_BWD_ADVANCE when there is one stage). */
#pragma unroll
    for (int i = 0; i < FA_INST_STAGES - 1; ++i) {
        if (i < steps)
            FA_LOAD_STEP(i);
        fa_async_commit();
    }

    float acc_dk[FA_BD][FA_ACC_REGS], acc_dv[FA_BD][FA_ACC_REGS];
#pragma unroll
    for (int df = 0; df < FA_BD; ++df)
#pragma unroll
        for (int r = 0; r < FA_ACC_REGS; ++r)
            acc_dk[df][r] = acc_dv[df][r] = 0.f;

    for (int i = 0; i < steps; ++i) {
        FA_BWD_ADVANCE(FA_LOAD_STEP, i, steps);

        const int buf = i % FA_INST_STAGES, head = FA_STEP_HEAD(i), m0 = FA_STEP_M0(i);
        const fa_elem *q_tile = smem_q + buf * FA_TILE_ELEMS;
        const fa_elem *do_tile = smem_do + buf * FA_TILE_ELEMS;
        fa_bwd_tile t;
        t.row0 = n0 + warp_key0;
        t.col0 = m0;
        t.seqlen_q = seq.seqlen_q;
        t.seqlen_k = seq.seqlen_k;
        t.keys_are_rows = 1;
        t.masked = m0 + FA_INST_M > seq.seqlen_q ||
                   m0 < fa_first_query_seeing(n0 + keys_valid - 1, seq.seqlen_q, seq.seqlen_k, w) ||
                   m0 + FA_INST_M > fa_end_query_seeing(n0, seq.seqlen_q, seq.seqlen_k, w);
        float alibi_log2 = f->alibi_slopes ? f->alibi_slopes[batch * f->alibi_batch + head] * FA_LOG2E : 0.f;

        float p[FA_BT][FA_ACC_REGS], dp[FA_BT][FA_ACC_REGS];
        uint32_t packed[FA_BK][FA_A_REGS];
        fa_bwd_rows_by_cols(p, smem_k, warp_key0, q_tile); /* Sᵀ */
        fa_bwd_probabilities(p, &t, f, alibi_log2, NULL, smem_lse + buf * FA_INST_N);
        fa_bwd_pack(packed, p);
        fa_bwd_accumulate(acc_dv, packed, do_tile); /* dV += Pᵀ·dO */
        fa_bwd_rows_by_cols(dp, smem_v, warp_key0, do_tile); /* dPᵀ = V·dOᵀ */
        fa_bwd_dscores(dp, p, 1, NULL, smem_delta + buf * FA_INST_N);
        fa_bwd_pack(packed, dp);
        fa_bwd_accumulate(acc_dk, packed, q_tile); /* dK += dSᵀ·Q */
    }
#undef FA_STEP_HEAD
#undef FA_STEP_M0
#undef FA_LOAD_STEP
    fa_async_wait(0);

    fa_elem *dk = (fa_elem *)args.dk + batch * args.dk_batch + (seq.k_row0 + n0) * args.dk_row +
                  kv_head * args.dk_head;
    fa_elem *dv = (fa_elem *)args.dv + batch * args.dv_batch + (seq.k_row0 + n0) * args.dv_row +
                  kv_head * args.dv_head;
    fa_bwd_store_rows(dk, args.dk_row, warp_key0, keys_valid, f->head_dim, acc_dk, args.scale);
    fa_bwd_store_rows(dv, args.dv_row, warp_key0, keys_valid, f->head_dim, acc_dv, 1.f);
}

extern "C" FA_GLOBAL void __launch_bounds__(FA_THREADS) FA_CAT(FA_INST_NAME, _dq)(fa_bwd_args args)
{
    FA_DYNAMIC_SMEM(fa_smem, FA_BWD_DQ_SMEM_BYTES(FA_INST_D, FA_INST_N, FA_INST_STAGES));
    fa_elem *smem_q = (fa_elem *)fa_smem;
    fa_elem *smem_do = smem_q + FA_TILE_ELEMS;
    fa_elem *smem_k = smem_do + FA_TILE_ELEMS;                   /* [stages] tiles */
    fa_elem *smem_v = smem_k + FA_INST_STAGES * FA_TILE_ELEMS;   /* [stages] tiles */

    const fa_fwd_args *f = &args.fwd;
    const int batch = blockIdx.z, head = blockIdx.y;
    const int m0 = (int)(gridDim.x - 1 - blockIdx.x) * FA_INST_M;
    const fa_sequence seq = fa_find_sequence(f, batch);
    if (m0 >= seq.seqlen_q)
        return;
    const int rows_valid = min(FA_INST_M, seq.seqlen_q - m0);
    const int kv_head = head / (f->heads / f->heads_k);
    const int lane = fa_lane(), warp_row0 = fa_warp() * FA_MMA_M;
    const long long q_base = f->cu_seqlens_q ? seq.q_row0 : (long long)batch * f->seqlen_q;

    fa_window w = {f->window_left, f->window_right};
    const long long key_lo = fa_first_visible_key(m0, seq.seqlen_q, seq.seqlen_k, w);
    const long long key_hi = fa_end_visible_key(m0 + rows_valid - 1, seq.seqlen_q, seq.seqlen_k, w);
    const int tile_lo = (int)(key_lo / FA_INST_N);
    const int n_tiles = key_hi > key_lo ? (int)((key_hi + FA_INST_N - 1) / FA_INST_N) - tile_lo : 0;

    const long long q_off = batch * f->q_batch + (seq.q_row0 + m0) * f->q_row + head * f->q_head;
    fa_load_tile(smem_q, (const fa_elem *)f->q + q_off, f->q_row, rows_valid, f->head_dim, FA_INST_M);
    fa_load_tile(smem_do,
                 (const fa_elem *)args.dout + batch * args.do_batch + (seq.q_row0 + m0) * args.do_row +
                     head * args.do_head,
                 args.do_row, rows_valid, f->head_dim, FA_INST_M);
    const fa_elem *k = (const fa_elem *)f->k + batch * f->k_batch + seq.k_row0 * f->k_row + kv_head * f->k_head;
    const fa_elem *v = (const fa_elem *)f->v + batch * f->v_batch + seq.k_row0 * f->v_row + kv_head * f->v_head;
#define FA_LOAD_KV(i)                                                                            \
    do {                                                                                         \
        const int n0_ = (tile_lo + (i)) * FA_INST_N, buf_ = (i) % FA_INST_STAGES;                \
        fa_load_tile(smem_k + buf_ * FA_TILE_ELEMS, k + (long long)n0_ * f->k_row, f->k_row,     \
                     seq.seqlen_k - n0_, f->head_dim, FA_INST_N);                                \
        fa_load_tile(smem_v + buf_ * FA_TILE_ELEMS, v + (long long)n0_ * f->v_row, f->v_row,     \
                     seq.seqlen_k - n0_, f->head_dim, FA_INST_N);                                \
    } while (0)
#pragma unroll
    for (int i = 0; i < FA_INST_STAGES - 1; ++i) {
        if (i < n_tiles)
            FA_LOAD_KV(i);
        fa_async_commit();
    }

    /* This lane's query rows: their LSE (log2 units) and D. */
    float lse_rows[FA_ACC_ROWS], delta_rows[FA_ACC_ROWS];
#pragma unroll
    for (int g = 0; g < FA_ACC_ROWS; ++g) {
        int row = min(m0 + warp_row0 + fa_acc_row(lane, g * FA_ACC_COLS), seq.seqlen_q - 1);
        lse_rows[g] = args.lse_log2[(long long)head * f->total_q + q_base + row];
        delta_rows[g] = args.delta[(long long)head * f->total_q + q_base + row];
    }
    float alibi_log2 = f->alibi_slopes ? f->alibi_slopes[batch * f->alibi_batch + head] * FA_LOG2E : 0.f;

    float acc_dq[FA_BD][FA_ACC_REGS];
#pragma unroll
    for (int df = 0; df < FA_BD; ++df)
#pragma unroll
        for (int r = 0; r < FA_ACC_REGS; ++r)
            acc_dq[df][r] = 0.f;

    for (int i = 0; i < n_tiles; ++i) {
        FA_BWD_ADVANCE(FA_LOAD_KV, i, n_tiles);

        const int buf = i % FA_INST_STAGES, n0 = (tile_lo + i) * FA_INST_N;
        const fa_elem *k_tile = smem_k + buf * FA_TILE_ELEMS;
        const fa_elem *v_tile = smem_v + buf * FA_TILE_ELEMS;
        fa_bwd_tile t;
        t.row0 = m0 + warp_row0;
        t.col0 = n0;
        t.seqlen_q = seq.seqlen_q;
        t.seqlen_k = seq.seqlen_k;
        t.keys_are_rows = 0;
        /* Keys past the end need no mask here: their K rows are zero, so dS·K adds 0. */
        t.masked = n0 < fa_first_visible_key(m0 + rows_valid - 1, seq.seqlen_q, seq.seqlen_k, w) ||
                   n0 + FA_INST_N > fa_end_visible_key(m0, seq.seqlen_q, seq.seqlen_k, w);

        float p[FA_BT][FA_ACC_REGS], dp[FA_BT][FA_ACC_REGS];
        uint32_t packed[FA_BK][FA_A_REGS];
        fa_bwd_rows_by_cols(p, smem_q, warp_row0, k_tile); /* S */
        fa_bwd_probabilities(p, &t, f, alibi_log2, lse_rows, NULL);
        fa_bwd_rows_by_cols(dp, smem_do, warp_row0, v_tile); /* dP = dO·Vᵀ */
        fa_bwd_dscores(dp, p, 0, delta_rows, NULL);
        fa_bwd_pack(packed, dp);
        fa_bwd_accumulate(acc_dq, packed, k_tile); /* dQ += dS·K */
    }
#undef FA_LOAD_KV
    fa_async_wait(0);
    fa_elem *dq = (fa_elem *)args.dq + batch * args.dq_batch + (seq.q_row0 + m0) * args.dq_row +
                  head * args.dq_head;
    fa_bwd_store_rows(dq, args.dq_row, warp_row0, rows_valid, f->head_dim, acc_dq, args.scale);
}
