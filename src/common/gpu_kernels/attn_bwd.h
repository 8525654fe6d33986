/*
 * attn_bwd.h - the backward attention kernels, written once for every vendor against the
 * device vocabulary of fa_device.h. One translation unit includes it once after defining
 * the instance: FA_INST_D, FA_INST_M, FA_INST_N, FA_INST_WARPS, FA_INST_STAGES,
 * FA_INST_BF16, FA_INST_NAME. Both kernels hold one tile of rows in shared memory for the
 * whole block and stream tiles of the other side past it: FA_INST_N is the resident
 * side's rows (FA_RESIDENT_ROWS), FA_INST_M the streamed side's rows per step
 * (FA_STREAMED_ROWS), FA_INST_STAGES the streamed buffers (1 = load, wait, compute).
 * It defines two kernels:
 *
 *   FA_INST_NAME##_dkdv: one block per (resident key tile, kv head, batch); K and V stay
 *     in shared memory while Q, dO, LSE and D = rowsum(dO∘O) tiles of streamed query rows
 *     of every query head of the GQA group pass. Each step, in three phases:
 *       1. Sᵀ = K·Qᵀ, Pᵀ = exp2(Sᵀ - LSE), dPᵀ = V·dOᵀ, dSᵀ = Pᵀ∘(dPᵀ - D); Pᵀ and dSᵀ
 *          go to shared memory as fp16/bf16 [resident][streamed] tiles;
 *       2. dV += Pᵀ·dO, dK += dSᵀ·Q, accumulated in registers over the whole GQA group
 *          and written once;
 *       3. unless the caller asked for determinism, dQ += dS·K for the step's query rows,
 *          added to an fp32 buffer with atomics (FlashAttention-2's five products), which
 *          a small kernel converts afterwards. Vocabularies that cannot afford it
 *          (FA_BWD_ATOMIC_DQ 0) always leave dQ to the dQ kernel.
 *     Every phase spreads its output tile over the warps as a 2-D grid of warp tiles of
 *     32 rows where the shapes allow (FA_WARP_GRID_ROWS): a 16-row warp tile re-reads its
 *     whole B operand from shared memory for every 16 rows, and shared-memory bandwidth,
 *     not the tensor cores, then sets the pace.
 *   FA_INST_NAME##_dq (deterministic mode): one block per (resident query tile, head,
 *     batch); Q and dO stay, tiles of streamed K/V rows pass: S = Q·Kᵀ, P, dP = dO·Vᵀ,
 *     dS, dQ += dS·K, written once. Two extra products (S and dP again), no atomics:
 *     bitwise reproducible by construction. Each warp owns 16 query rows; when the warps
 *     outnumber the 16-row groups (FA_BWD_SPLIT > 1) the warps of a group split the keys
 *     and sum their parts in a fixed order at the end.
 *
 * Both take their (head, batch) pair from grid y and z as launch_grid.h lays them out.
 */
#ifdef FA_ATTN_BWD_INCLUDED
#error "attn_bwd.h instantiates one kernel pair per translation unit"
#endif
#define FA_ATTN_BWD_INCLUDED

#include "fa_device.h"
#include "gpu_kernels/attn_bwd_parts.h"
#include "gpu_kernels/attn_tile.h"
#include "gpu_kernels/smem_bytes.h"

/* The instance's two tile sizes by role; below, only these names. */
#define FA_RESIDENT_ROWS FA_INST_N /* rows held for the whole block  */
#define FA_STREAMED_ROWS FA_INST_M /* rows streamed past them a step */
#define FA_BD (FA_INST_D / FA_MMA_N) /* n-tiles across the head dim */
#define FA_RESIDENT_TILE (FA_RESIDENT_ROWS * FA_PITCH)
#define FA_STREAMED_TILE (FA_STREAMED_ROWS * FA_PITCH)
#define FA_SCORE_PITCH FA_FWD_SMEM_PITCH(FA_STREAMED_ROWS)
#define FA_SCORE_TILE (FA_RESIDENT_ROWS * FA_SCORE_PITCH)

/* Every 16-bit tile of both kernels starts 128-byte aligned (the fp32 rows come last). */
#if !FA_TILE_KEEPS_ALIGNMENT(FA_RESIDENT_ROWS, FA_PITCH) || \
    !FA_TILE_KEEPS_ALIGNMENT(FA_STREAMED_ROWS, FA_PITCH) || \
    !FA_TILE_KEEPS_ALIGNMENT(FA_RESIDENT_ROWS, FA_SCORE_PITCH)
#error "backward shared tiles must keep 128-byte alignment"
#endif

/* Warp grids of the dK/dV kernel's phases: `wr` warps along the rows of a rows x cols
 * output, FA_INST_WARPS / wr along the columns. A grid fits when the warp tile has whole
 * 16-row MMA tiles and an even number of n-tiles (the B loads come in pairs). Preferred:
 * 32-row warp tiles, then 16, then 64. */
#define FA_GRID_FITS(rows, cols, wr)                                                      \
    ((wr) >= 1 && FA_INST_WARPS % (wr) == 0 && (rows) % ((wr) * FA_MMA_M) == 0 &&        \
     (cols) % ((FA_INST_WARPS / (wr)) * 2 * FA_MMA_N) == 0)
#define FA_WARP_GRID_ROWS(rows, cols)                                                     \
    (FA_GRID_FITS(rows, cols, (rows) / 32)   ? (rows) / 32                                \
     : FA_GRID_FITS(rows, cols, (rows) / 16) ? (rows) / 16                                \
     : FA_GRID_FITS(rows, cols, (rows) / 64) ? (rows) / 64                                \
                                             : 0)
/* Phase 1: scores [resident keys][streamed queries]; phase 2: dK/dV [resident][D];
 * phase 3: dQ [streamed][D]. */
#define FA_P1_WR FA_WARP_GRID_ROWS(FA_RESIDENT_ROWS, FA_STREAMED_ROWS)
#define FA_P2_WR FA_WARP_GRID_ROWS(FA_RESIDENT_ROWS, FA_INST_D)
#define FA_P3_WR FA_WARP_GRID_ROWS(FA_STREAMED_ROWS, FA_INST_D)
#if FA_P1_WR == 0 || FA_P2_WR == 0 || FA_P3_WR == 0
#error "no warp grid fits this backward instance (see FA_GRID_FITS)"
#endif
#define FA_P1_MF (FA_RESIDENT_ROWS / FA_P1_WR / FA_MMA_M)
#define FA_P1_NF (FA_STREAMED_ROWS / (FA_INST_WARPS / FA_P1_WR) / FA_MMA_N)
#define FA_P2_MF (FA_RESIDENT_ROWS / FA_P2_WR / FA_MMA_M)
#define FA_P2_NF (FA_INST_D / (FA_INST_WARPS / FA_P2_WR) / FA_MMA_N)
#define FA_P3_MF (FA_STREAMED_ROWS / FA_P3_WR / FA_MMA_M)
#define FA_P3_NF (FA_INST_D / (FA_INST_WARPS / FA_P3_WR) / FA_MMA_N)

/* The dQ kernel: 16 query rows per warp, FA_SPLIT warps per 16-row group. */
#define FA_ROW_GROUPS (FA_RESIDENT_ROWS / FA_MMA_M)
#define FA_SPLIT FA_BWD_SPLIT(FA_INST_WARPS, FA_RESIDENT_ROWS)
#define FA_PART_COLS (FA_STREAMED_ROWS / FA_SPLIT) /* keys of one warp per step */
#define FA_ST (FA_PART_COLS / FA_MMA_N)
#define FA_SK (FA_PART_COLS / FA_MMA_K)
#if FA_INST_WARPS % FA_ROW_GROUPS != 0 || FA_PART_COLS % (2 * FA_MMA_N) != 0
#error "dQ kernel: warps must cover whole 16-row groups and split the keys into n-tile pairs"
#endif
/* fa_bwd_load_rows: one thread per streamed row. */
#if FA_THREADS < FA_STREAMED_ROWS
#error "backward instances need at least as many threads as streamed rows per step"
#endif


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

/* Layout of the [resident][streamed] tiles of Pᵀ and dSᵀ: the head-dim tiles' rule. */
FA_DEVICE int fa_score_offset(int row, int chunk) { return fa_tile_offset(FA_SCORE_PITCH, row, chunk); }

/* Operand registers the two product helpers keep per k-step, sized for their largest
 * caller: B of every n-tile (scores in the dK/dV kernel, or the dQ kernel's S and dP),
 * A of every m-tile (dK/dV or dQ in the dK/dV kernel). */
#define FA_NT_MAX_NF (FA_P1_NF > FA_ST ? FA_P1_NF : FA_ST)
#define FA_NN_MAX_MF (FA_P3_MF > FA_P2_MF ? FA_P3_MF : FA_P2_MF)

/* acc[mf * nf_count + nf] (mf_count x nf_count MMA tiles) = A[a_row0 ..][:] · B[b_row0 ..][:]ᵀ
 * over the head dim, A and B stored [row][head dim] in shared memory. The counts are
 * compile-time constants at every call. */
FA_DEVICE void fa_bwd_product_nt(float (*acc)[FA_ACC_REGS], int mf_count, int nf_count,
                                 const fa_elem *a_tile, int a_row0, const fa_elem *b_tile, int b_row0)
{
    fa_bwd_zero(acc, mf_count * nf_count);
#pragma unroll
    for (int k0 = 0; k0 < FA_INST_D; k0 += FA_MMA_K) {
        uint32_t b[FA_NT_MAX_NF][FA_B_REGS];
#pragma unroll
        for (int nf = 0; nf < nf_count; nf += 2)
            fa_load_bt_pair(&b[nf], b_tile, FA_PITCH, b_row0 + nf * FA_MMA_N, k0);
#pragma unroll
        for (int mf = 0; mf < mf_count; ++mf) {
            uint32_t a[FA_A_REGS];
            fa_load_a(a, a_tile, FA_PITCH, a_row0 + mf * FA_MMA_M, k0);
#pragma unroll
            for (int nf = 0; nf < nf_count; ++nf)
                fa_mma(acc[mf * nf_count + nf], a, b[nf]);
        }
    }
}

/* acc[mf * nf_count + nf] += A[a_row0 ..][0 .. k_count) · B[0 .. k_count)[b_col0 ..], A
 * a [resident][streamed] score tile (or its transpose when a_transposed: A = dS from the dSᵀ tile) and
 * B a [row][head dim] tile, both in shared memory. */
FA_DEVICE void fa_bwd_product_nn(float (*acc)[FA_ACC_REGS], int mf_count, int nf_count,
                                 const fa_elem *a_tile, int a_transposed, int a_row0,
                                 const fa_elem *b_tile, int b_col0, int k_count)
{
#pragma unroll
    for (int k0 = 0; k0 < k_count; k0 += FA_MMA_K) {
        uint32_t a[FA_NN_MAX_MF][FA_A_REGS];
#pragma unroll
        for (int mf = 0; mf < mf_count; ++mf) {
            if (a_transposed)
                fa_load_at(a[mf], a_tile, FA_SCORE_PITCH, a_row0 + mf * FA_MMA_M, k0);
            else
                fa_load_a(a[mf], a_tile, FA_SCORE_PITCH, a_row0 + mf * FA_MMA_M, k0);
        }
#pragma unroll
        for (int nf = 0; nf < nf_count; nf += 2) {
            uint32_t b[2][FA_B_REGS];
            fa_load_b_pair(b, b_tile, FA_PITCH, k0, b_col0 + nf * FA_MMA_N);
#pragma unroll
            for (int mf = 0; mf < mf_count; ++mf) {
                fa_mma(acc[mf * nf_count + nf], a[mf], b[0]);
                fa_mma(acc[mf * nf_count + nf + 1], a[mf], b[1]);
            }
        }
    }
}

/* acc (16 rows x head dim) += P · B[k_row0 .. k_row0 + FA_PART_COLS)[:], P given as packed
 * A operands over FA_PART_COLS columns (the dQ kernel's dS), B stored [row][head dim]. */
FA_DEVICE void fa_bwd_accumulate(float acc[FA_BD][FA_ACC_REGS], const uint32_t p[FA_SK][FA_A_REGS],
                                 const fa_elem *b_tile, int k_row0)
{
#pragma unroll
    for (int ks = 0; ks < FA_SK; ++ks)
#pragma unroll
        for (int df = 0; df < FA_BD; df += 2) {
            uint32_t b[2][FA_B_REGS];
            fa_load_b_pair(b, b_tile, FA_PITCH, k_row0 + ks * FA_MMA_K, df * FA_MMA_N);
            fa_mma(acc[df], p[ks], b[0]);
            fa_mma(acc[df + 1], p[ks], b[1]);
        }
}

/* A warp's 16-row slice (ntiles n-tiles from column col0) into a [resident][streamed]
 * score tile as fp16/bf16. */
FA_DEVICE void fa_bwd_store_scores(fa_elem *tile, int row0, int col0, const float (*acc)[FA_ACC_REGS],
                                   int ntiles)
{
    const int lane = fa_lane();
#pragma unroll
    for (int nf = 0; nf < ntiles; ++nf)
#pragma unroll
        for (int r = 0; r < FA_ACC_REGS; r += 2) {
            int row = row0 + fa_acc_row(lane, r);
            int col = col0 + nf * FA_MMA_N + fa_acc_col(lane, r);
#if FA_ACC_PAIR_STRIDE == 1
            fa_store_pair(tile + fa_score_offset(row, col >> 3) + (col & 7), acc[nf][r], acc[nf][r + 1]);
#else
            uint32_t v = fa_pack2(acc[nf][r], acc[nf][r + 1]);
            int col2 = col + FA_ACC_PAIR_STRIDE;
            tile[fa_score_offset(row, col >> 3) + (col & 7)] = (fa_elem)v;
            tile[fa_score_offset(row, col2 >> 3) + (col2 & 7)] = (fa_elem)(v >> 16);
#endif
        }
}

/* Per-row fp32 values (LSE, D) of the step's streamed query rows into shared memory. */
FA_DEVICE void fa_bwd_load_rows(float *smem, const float *gmem, int rows_valid)
{
    if (threadIdx.x < FA_STREAMED_ROWS) {
        int valid = (int)threadIdx.x < rows_valid;
        fa_async_copy4(smem + threadIdx.x, valid ? gmem + threadIdx.x : gmem, valid);
    }
}

/* Phase 3: dQ[m0 + ..] += dS · K for this warp's tile of the step's streamed x D block, dS read
 * transposed from the dSᵀ tile, K the resident tile; added to the head's fp32
 * accumulator with atomics. */
FA_DEVICE void fa_bwd_dq_atomic(float *dq_head, long long seq_row0, int m0, int seqlen_q, int head_dim,
                                const fa_elem *ds_tile, const fa_elem *k_tile)
{
    const int row0 = (fa_warp() % FA_P3_WR) * FA_P3_MF * FA_MMA_M;
    const int d0 = (fa_warp() / FA_P3_WR) * FA_P3_NF * FA_MMA_N;
    if (m0 + row0 >= seqlen_q || d0 >= head_dim)
        return;
    float acc[FA_P3_MF * FA_P3_NF][FA_ACC_REGS];
    fa_bwd_zero(acc, FA_P3_MF * FA_P3_NF);
    fa_bwd_product_nn(acc, FA_P3_MF, FA_P3_NF, ds_tile, 1, row0, k_tile, d0, FA_RESIDENT_ROWS);
    if (m0 <= seqlen_q - FA_STREAMED_ROWS && head_dim == FA_INST_D)
        fa_bwd_dq_add(dq_head, seq_row0, m0, row0, d0, 1, seqlen_q, head_dim, acc, FA_P3_MF, FA_P3_NF);
    else
        fa_bwd_dq_add(dq_head, seq_row0, m0, row0, d0, 0, seqlen_q, head_dim, acc, FA_P3_MF, FA_P3_NF);
}

extern "C" FA_GLOBAL void __launch_bounds__(FA_THREADS)
    FA_CAT(FA_INST_NAME, _dkdv)(fa_bwd_args args)
{
    FA_DYNAMIC_SMEM(fa_smem,
                    FA_BWD_DKDV_SMEM_BYTES(FA_INST_D, FA_STREAMED_ROWS, FA_RESIDENT_ROWS, FA_INST_STAGES));
    fa_elem *smem_k = (fa_elem *)fa_smem;
    fa_elem *smem_v = smem_k + FA_RESIDENT_TILE;
    fa_elem *smem_q = smem_v + FA_RESIDENT_TILE;                      /* [stages] tiles */
    fa_elem *smem_do = smem_q + FA_INST_STAGES * FA_STREAMED_TILE;    /* [stages] tiles */
    fa_elem *smem_p = smem_do + FA_INST_STAGES * FA_STREAMED_TILE;    /* Pᵀ score tile  */
    fa_elem *smem_ds = smem_p + FA_SCORE_TILE;                        /* dSᵀ score tile */
    float *smem_lse = (float *)(smem_ds + FA_SCORE_TILE);             /* [stages] rows  */
    float *smem_delta = smem_lse + FA_INST_STAGES * FA_STREAMED_ROWS; /* [stages] rows  */

    const fa_fwd_args *f = &args.fwd;
    unsigned kv_head_u, batch_u;
    fa_block_pair(f->heads_k, f->batch, &kv_head_u, &batch_u);
    const int batch = (int)batch_u, kv_head = (int)kv_head_u, n0 = blockIdx.x * FA_RESIDENT_ROWS;
    const fa_sequence seq = fa_find_sequence(f, batch);
    const int key_rows = fa_key_rows(f, batch);
    if (n0 >= key_rows || batch == f->batch || fa_sequence_bad(f, batch)) /* no rows, past the */
        return;                                                             /* last pair, or bad */
    /* Keys of the block that count: seq.seqlen_k has seqused_k applied, and a block past
     * it has none but still writes its rows of dK and dV (zeros, below). */
    const int keys_valid = max(min(FA_RESIDENT_ROWS, seq.seqlen_k - n0), 0);
    const int group = f->heads / f->heads_k;
    const long long q_global_row0 = fa_global_q_row0(f, batch, seq.q_row0);
    /* This warp's tiles: scores rows/columns (phase 1), dK/dV rows/columns (phase 2). */
    const int s_row0 = (fa_warp() % FA_P1_WR) * FA_P1_MF * FA_MMA_M;
    const int s_col0 = (fa_warp() / FA_P1_WR) * FA_P1_NF * FA_MMA_N;
    const int kv_row0 = (fa_warp() % FA_P2_WR) * FA_P2_MF * FA_MMA_M;
    const int kv_col0 = (fa_warp() / FA_P2_WR) * FA_P2_NF * FA_MMA_N;

    const fa_bwd_key_block kb =
        fa_bwd_key_block_at(f, &seq, n0, keys_valid, FA_RESIDENT_ROWS, FA_STREAMED_ROWS);
    const int m_first = kb.m_first, m_tiles = kb.m_tiles, full_lo = kb.full_lo, full_hi = kb.full_hi;
    const int steps = group * m_tiles;

    const fa_elem *k = (const fa_elem *)f->k + fa_row_at(&f->k_layout, batch, seq.k_row0 + n0, kv_head);
    const fa_elem *v = (const fa_elem *)f->v + fa_row_at(&f->v_layout, batch, seq.k_row0 + n0, kv_head);
    /* A block no query sees (or with no key that counts) writes zero dK/dV and loads
     * nothing (one stage would leave the copies uncommitted at exit). */
    if (steps > 0) {
        fa_load_tile(smem_k, k, f->k_layout.row, keys_valid, f->head_dim, FA_RESIDENT_ROWS);
        fa_load_tile(smem_v, v, f->v_layout.row, keys_valid, f->head_dim, FA_RESIDENT_ROWS);
    }

    /* Step i covers query head kv_head * group + i / m_tiles, query tile m_first + i %
     * m_tiles. Two cursors walk that order without divisions: one for the loads (running
     * stages - 1 steps ahead), one for the computation. */
    fa_bwd_cursor load_at = {kv_head * group, m_first, fa_head_row(f, kv_head * group, 0)}, step_at = load_at;
#define FA_LOAD_STEP(i)                                                                            \
    do {                                                                                           \
        const int h_ = load_at.head, m0_ = load_at.tile * FA_STREAMED_ROWS;                        \
        const int buf_ = (i) % FA_INST_STAGES;                                                     \
        const int rows_ = seq.seqlen_q - m0_;                                                      \
        fa_load_tile(smem_q + buf_ * FA_STREAMED_TILE,                                             \
                     (const fa_elem *)f->q + fa_row_at(&f->q_layout, batch, seq.q_row0 + m0_, h_), \
                     f->q_layout.row, rows_, f->head_dim, FA_STREAMED_ROWS);                       \
        fa_load_tile(smem_do + buf_ * FA_STREAMED_TILE,                                            \
                     (const fa_elem *)args.dout +                                                  \
                         fa_row_at(&args.dout_layout, batch, seq.q_row0 + m0_, h_),                \
                     args.dout_layout.row, rows_, f->head_dim, FA_STREAMED_ROWS);                  \
        fa_bwd_load_rows(smem_lse + buf_ * FA_STREAMED_ROWS,                                       \
                         args.lse_log2 + load_at.head_row + q_global_row0 + m0_, rows_);           \
        fa_bwd_load_rows(smem_delta + buf_ * FA_STREAMED_ROWS,                                     \
                         args.delta + load_at.head_row + q_global_row0 + m0_, rows_);              \
        fa_bwd_cursor_next(&load_at, m_first, m_first + m_tiles, f->total_q);                      \
    } while (0)

    /* Copies complete in commit order: K, V and step 0 form the first group (committed in
     * FA_BWD_ADVANCE when there is one stage). */
#pragma unroll
    for (int i = 0; i < FA_INST_STAGES - 1; ++i) {
        if (i < steps)
            FA_LOAD_STEP(i);
        fa_async_commit();
    }

    float acc_dk[FA_P2_MF * FA_P2_NF][FA_ACC_REGS], acc_dv[FA_P2_MF * FA_P2_NF][FA_ACC_REGS];
    fa_bwd_zero(acc_dk, FA_P2_MF * FA_P2_NF);
    fa_bwd_zero(acc_dv, FA_P2_MF * FA_P2_NF);

    for (int i = 0; i < steps; ++i) {
        FA_BWD_ADVANCE(FA_LOAD_STEP, i, steps);

        const int buf = i % FA_INST_STAGES, head = step_at.head, m0 = step_at.tile * FA_STREAMED_ROWS;
        const fa_elem *q_tile = smem_q + buf * FA_STREAMED_TILE;
        const fa_elem *do_tile = smem_do + buf * FA_STREAMED_TILE;
        const float *lse_cols = smem_lse + buf * FA_STREAMED_ROWS + s_col0;
        const float *delta_cols = smem_delta + buf * FA_STREAMED_ROWS + s_col0;
        fa_bwd_tile t;
        t.col0 = m0 + s_col0;
        t.seqlen_q = seq.seqlen_q;
        t.seqlen_k = seq.seqlen_k;
        t.keys_are_rows = 1;
        t.masked = m0 < full_lo || m0 > full_hi - FA_STREAMED_ROWS;
        float alibi_log2 = f->alibi_slopes ? f->alibi_slopes[batch * f->alibi_batch + head] * FA_LOG2E : 0.f;

        /* Phase 1: Pᵀ and dSᵀ of this warp's tile, to shared memory. */
        {
            float p[FA_P1_MF * FA_P1_NF][FA_ACC_REGS], dp[FA_P1_MF * FA_P1_NF][FA_ACC_REGS];
            fa_bwd_product_nt(p, FA_P1_MF, FA_P1_NF, smem_k, s_row0, q_tile, s_col0);  /* Sᵀ   */
            fa_bwd_product_nt(dp, FA_P1_MF, FA_P1_NF, smem_v, s_row0, do_tile, s_col0); /* dPᵀ */
            t.row0 = n0 + s_row0;
            fa_bwd_grad_scores(p, dp, FA_P1_MF, FA_P1_NF, &t, f, alibi_log2, NULL, lse_cols, NULL,
                               delta_cols);
#pragma unroll
            for (int mf = 0; mf < FA_P1_MF; ++mf) {
                fa_bwd_store_scores(smem_p, s_row0 + mf * FA_MMA_M, s_col0, &p[mf * FA_P1_NF], FA_P1_NF);
                fa_bwd_store_scores(smem_ds, s_row0 + mf * FA_MMA_M, s_col0, &dp[mf * FA_P1_NF], FA_P1_NF);
            }
        }
        fa_barrier();
        /* Phase 2: dV += Pᵀ·dO, dK += dSᵀ·Q. */
        fa_bwd_product_nn(acc_dv, FA_P2_MF, FA_P2_NF, smem_p, 0, kv_row0, do_tile, kv_col0, FA_STREAMED_ROWS);
        fa_bwd_product_nn(acc_dk, FA_P2_MF, FA_P2_NF, smem_ds, 0, kv_row0, q_tile, kv_col0, FA_STREAMED_ROWS);
        /* Phase 3: dQ += dS·K, by atomics (where the vocabulary affords it), after both
         * products: issued between them, the atomics compete with the dK products' issue. */
#if FA_BWD_ATOMIC_DQ
        if (args.dq_accum)
            fa_bwd_dq_atomic(args.dq_accum + step_at.head_row * f->head_dim, q_global_row0, m0,
                             seq.seqlen_q, f->head_dim, smem_ds, smem_k);
#endif
        /* The cursor moves on last: phase 3 (wave64 and CUDA) addresses dQ by this step's head row. */
        fa_bwd_cursor_next(&step_at, m_first, m_first + m_tiles, f->total_q);
    }
#undef FA_LOAD_STEP
    fa_async_wait(0);

    /* Every row of the operands gets dK and dV (include/flashattn.h): rows_out, not
     * keys_valid. Rows keys_valid .. rows_out - 1 (past seqused_k) hold zeros: their K and
     * V rows were zero-filled and every tile of a partial block is masked, so their P and
     * dS are 0. */
    const int rows_out = min(FA_RESIDENT_ROWS, key_rows - n0);
    fa_elem *dk = (fa_elem *)args.dk + fa_row_at(&args.dk_layout, batch, seq.k_row0 + n0, kv_head);
    fa_elem *dv = (fa_elem *)args.dv + fa_row_at(&args.dv_layout, batch, seq.k_row0 + n0, kv_head);
#pragma unroll
    for (int mf = 0; mf < FA_P2_MF; ++mf) {
        fa_bwd_store_rows(dk, args.dk_layout.row, kv_row0 + mf * FA_MMA_M, rows_out, f->head_dim,
                          &acc_dk[mf * FA_P2_NF], FA_P2_NF, kv_col0, args.scale);
        fa_bwd_store_rows(dv, args.dv_layout.row, kv_row0 + mf * FA_MMA_M, rows_out, f->head_dim,
                          &acc_dv[mf * FA_P2_NF], FA_P2_NF, kv_col0, 1.f);
    }
}

/* The dQ kernel's parts (FA_SPLIT > 1) sum their accumulators through the then idle K/V
 * buffers, lane-major so that a warp's accesses hit distinct banks. */
#if (FA_SPLIT - 1) * FA_RESIDENT_ROWS * FA_INST_D * 4 > 2 * 2 * FA_INST_STAGES * FA_STREAMED_TILE
#error "the dQ parts' exchange must fit the streamed K/V buffers"
#endif

extern "C" FA_GLOBAL void __launch_bounds__(FA_THREADS)
    FA_CAT(FA_INST_NAME, _dq)(fa_bwd_args args)
{
    FA_DYNAMIC_SMEM(fa_smem,
                    FA_BWD_DQ_SMEM_BYTES(FA_INST_D, FA_STREAMED_ROWS, FA_RESIDENT_ROWS, FA_INST_STAGES));
    fa_elem *smem_q = (fa_elem *)fa_smem;
    fa_elem *smem_do = smem_q + FA_RESIDENT_TILE;
    fa_elem *smem_k = smem_do + FA_RESIDENT_TILE;                     /* [stages] tiles */
    fa_elem *smem_v = smem_k + FA_INST_STAGES * FA_STREAMED_TILE;     /* [stages] tiles */

    const fa_fwd_args *f = &args.fwd;
    unsigned head_u, batch_u;
    fa_block_pair(f->heads, f->batch, &head_u, &batch_u);
    const int batch = (int)batch_u, head = (int)head_u;
    const int m0 = (int)(gridDim.x - 1 - blockIdx.x) * FA_RESIDENT_ROWS;
    const fa_sequence seq = fa_find_sequence(f, batch);
    if (m0 >= seq.seqlen_q || batch == f->batch || fa_sequence_bad(f, batch)) /* no rows, past the */
        return;                                                                 /* last pair, or bad */
    const int rows_valid = min(FA_RESIDENT_ROWS, seq.seqlen_q - m0);
    const int kv_head = head / (f->heads / f->heads_k);
    const int lane = fa_lane(), warp_row0 = (fa_warp() % FA_ROW_GROUPS) * FA_MMA_M;
    const int part = fa_warp() / FA_ROW_GROUPS, col0 = part * FA_PART_COLS;
    const long long q_global_row0 = fa_global_q_row0(f, batch, seq.q_row0);

    fa_window w = {f->window_left, f->window_right};
    const long long key_lo = fa_first_visible_key(m0, seq.seqlen_q, seq.seqlen_k, w);
    const long long key_hi = fa_end_visible_key(m0 + rows_valid - 1, seq.seqlen_q, seq.seqlen_k, w);
    const int tile_lo = (int)(key_lo / FA_STREAMED_ROWS);
    const int n_tiles =
        key_hi > key_lo ? (int)((key_hi + FA_STREAMED_ROWS - 1) / FA_STREAMED_ROWS) - tile_lo : 0;
    /* Key tiles within [full_lo, full_hi) are visible to every query row of the block and
     * need no mask. Keys past the end are masked (see fa_bwd_key_block_at; n0 > full_hi - S
     * for the same reason); query rows past the end need none: their rows of dS never mix
     * with valid ones and are not stored. */
    const int full_lo = (int)min(fa_first_visible_key(m0 + rows_valid - 1, seq.seqlen_q, seq.seqlen_k, w),
                                 (long long)seq.seqlen_k);
    const int full_hi = (int)max(fa_end_visible_key(m0, seq.seqlen_q, seq.seqlen_k, w), 0ll);

    const long long q_off = fa_row_at(&f->q_layout, batch, seq.q_row0 + m0, head);
    if (n_tiles > 0) { /* as in the dK/dV kernel: no key, no load, dQ = 0 */
        fa_load_tile(smem_q, (const fa_elem *)f->q + q_off, f->q_layout.row, rows_valid, f->head_dim,
                     FA_RESIDENT_ROWS);
        fa_load_tile(smem_do,
                     (const fa_elem *)args.dout + fa_row_at(&args.dout_layout, batch, seq.q_row0 + m0, head),
                     args.dout_layout.row, rows_valid, f->head_dim, FA_RESIDENT_ROWS);
    }
    /* The key loop takes the K/V row strides from locals: read through f inside it, they
     * cost the loop's mask arithmetic common subexpressions (nvcc 13.0, sm_90). */
    const long long k_row = f->k_layout.row, v_row = f->v_layout.row;
    const fa_elem *k = (const fa_elem *)f->k + fa_row_at(&f->k_layout, batch, seq.k_row0, kv_head);
    const fa_elem *v = (const fa_elem *)f->v + fa_row_at(&f->v_layout, batch, seq.k_row0, kv_head);
#define FA_LOAD_KV(i)                                                                     \
    do {                                                                                  \
        const int n0_ = (tile_lo + (i)) * FA_STREAMED_ROWS, buf_ = (i) % FA_INST_STAGES;  \
        fa_load_tile(smem_k + buf_ * FA_STREAMED_TILE, k + (long long)n0_ * k_row, k_row, \
                     seq.seqlen_k - n0_, f->head_dim, FA_STREAMED_ROWS);                  \
        fa_load_tile(smem_v + buf_ * FA_STREAMED_TILE, v + (long long)n0_ * v_row, v_row, \
                     seq.seqlen_k - n0_, f->head_dim, FA_STREAMED_ROWS);                  \
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
        lse_rows[g] = args.lse_log2[fa_head_row(f, head, q_global_row0 + row)];
        delta_rows[g] = args.delta[fa_head_row(f, head, q_global_row0 + row)];
    }
    float alibi_log2 = f->alibi_slopes ? f->alibi_slopes[batch * f->alibi_batch + head] * FA_LOG2E : 0.f;

    float acc_dq[FA_BD][FA_ACC_REGS];
    fa_bwd_zero(acc_dq, FA_BD);

    for (int i = 0; i < n_tiles; ++i) {
        FA_BWD_ADVANCE(FA_LOAD_KV, i, n_tiles);

        const int buf = i % FA_INST_STAGES, n0 = (tile_lo + i) * FA_STREAMED_ROWS;
        const fa_elem *k_tile = smem_k + buf * FA_STREAMED_TILE;
        const fa_elem *v_tile = smem_v + buf * FA_STREAMED_TILE;
        fa_bwd_tile t;
        t.row0 = m0 + warp_row0;
        t.col0 = n0 + col0;
        t.seqlen_q = seq.seqlen_q;
        t.seqlen_k = seq.seqlen_k;
        t.keys_are_rows = 0;
        t.masked = n0 < full_lo || n0 > full_hi - FA_STREAMED_ROWS;
        float p[FA_ST][FA_ACC_REGS], dp[FA_ST][FA_ACC_REGS];
        uint32_t packed[FA_SK][FA_A_REGS];
        fa_bwd_product_nt(p, 1, FA_ST, smem_q, warp_row0, k_tile, col0);   /* S          */
        fa_bwd_product_nt(dp, 1, FA_ST, smem_do, warp_row0, v_tile, col0); /* dP = dO·Vᵀ */
        fa_bwd_grad_scores(p, dp, 1, FA_ST, &t, f, alibi_log2, lse_rows, NULL, delta_rows, NULL);
#pragma unroll
        for (int ks = 0; ks < FA_SK; ++ks)
            fa_acc_to_a(packed[ks], dp, ks);
        fa_bwd_accumulate(acc_dq, packed, k_tile, col0); /* dQ += dS·K */
    }
#undef FA_LOAD_KV
    fa_async_wait(0);
#if FA_SPLIT > 1
    {
        float *exchange = (float *)smem_k;
        const int slot = ((part - 1) * FA_ROW_GROUPS + fa_warp() % FA_ROW_GROUPS) * FA_BD * FA_ACC_REGS;
        fa_barrier(); /* every warp is done with the K/V buffers */
        if (part > 0)
#pragma unroll
            for (int df = 0; df < FA_BD; ++df)
#pragma unroll
                for (int r = 0; r < FA_ACC_REGS; ++r)
                    exchange[(slot + df * FA_ACC_REGS + r) * FA_WARP_SIZE + lane] = acc_dq[df][r];
        fa_barrier();
        if (part > 0)
            return;
#pragma unroll 1
        for (int from = 1; from < FA_SPLIT; ++from) {
            const int src = ((from - 1) * FA_ROW_GROUPS + fa_warp()) * FA_BD * FA_ACC_REGS;
#pragma unroll
            for (int df = 0; df < FA_BD; ++df)
#pragma unroll
                for (int r = 0; r < FA_ACC_REGS; ++r)
                    acc_dq[df][r] += exchange[(src + df * FA_ACC_REGS + r) * FA_WARP_SIZE + lane];
        }
    }
#endif
    fa_elem *dq = (fa_elem *)args.dq + fa_row_at(&args.dq_layout, batch, seq.q_row0 + m0, head);
    fa_bwd_store_rows(dq, args.dq_layout.row, warp_row0, rows_valid, f->head_dim, acc_dq, FA_BD, 0,
                      args.scale);
}
