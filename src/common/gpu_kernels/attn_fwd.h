/*
 * attn_fwd.h - the forward attention kernel, written once for every vendor against the
 * device vocabulary of fa_device.h (src/cuda or src/hip). One translation unit includes
 * it once, after defining the instance:
 *   FA_INST_D (head dim), FA_INST_M x FA_INST_N (query x key tile), FA_INST_WARPS,
 *   FA_INST_STAGES (K/V buffers), FA_INST_BF16 (else fp16), FA_INST_NAME (kernel name).
 *
 * Algorithm (FlashAttention-2): the Q tile stays in shared memory; K/V tiles stream
 * through FA_INST_STAGES shared buffers with asynchronous copies; each warp owns
 * FA_INST_M / FA_INST_WARPS query rows; S = Q·Kᵀ on the matrix units; masking only on
 * tiles that straddle a mask edge (fully masked tiles are never visited); online softmax
 * in the exp2 domain with the scale folded in; P stays in registers for O += P·V; O and
 * LSE are written once (or, with split-KV, fp32 partials for the combine kernel).
 * Blocks: query tiles along grid x, (head, batch * splits + split) pairs laid over y and
 * z by launch_grid.h.
 */
#ifdef FA_ATTN_FWD_INCLUDED
#error "attn_fwd.h instantiates one kernel per translation unit"
#endif
#define FA_ATTN_FWD_INCLUDED

#include "fa_device.h"
#include "gpu_kernels/attn_args.h"
#include "gpu_kernels/attn_sequence.h"
#include "gpu_kernels/attn_tile.h"
#include "api/mask.h"

#define FA_WARP_ROWS (FA_INST_M / FA_INST_WARPS)
#define FA_MF (FA_WARP_ROWS / FA_MMA_M)       /* m-tiles per warp                       */
#define FA_NF (FA_INST_N / FA_MMA_N)          /* n-tiles of S per warp                  */
#define FA_DF (FA_INST_D / FA_MMA_N)          /* n-tiles of O per warp                  */
#define FA_KS (FA_INST_N / FA_MMA_K)          /* k-steps of P·V (A operands of P)       */
/* Small head dims compute a tile too quickly to hide a whole K+V tile load behind one
 * tile of work, so they (and single-buffer instances) wait for K and V separately;
 * larger ones load K and V as one group with one barrier per tile (measured:
 * bench/NOTES.md). */
#define FA_JOINT_KV_TILES (FA_INST_STAGES >= 2 && FA_INST_D > 64)
#define FA_RESCALE_SLACK 8.f

#if FA_WARP_ROWS % FA_MMA_M != 0 || FA_INST_N % (2 * FA_MMA_N) != 0 || \
    FA_INST_D % (2 * FA_MMA_N) != 0 || FA_INST_N % FA_MMA_K != 0 || FA_INST_D % FA_MMA_K != 0
#error "instance tile does not divide into matrix-unit tiles"
#endif

/* Every shared tile starts 128-byte aligned. */
#if !FA_TILE_KEEPS_ALIGNMENT(FA_INST_M, FA_PITCH) || !FA_TILE_KEEPS_ALIGNMENT(FA_INST_N, FA_PITCH)
#error "forward shared tiles must keep 128-byte alignment"
#endif

/* Where one block works: its sequence, rows, and the range of key tiles it visits. The
 * block has nothing to do when rows_valid <= 0 or batch == the args' batch (past the
 * last pair of a folded grid). */
typedef struct fa_block_span {
    int batch, head, split;
    long long q_row0, k_row0;  /* first row of this sequence in q / k                   */
    int seqlen_q, seqlen_k;
    int m0, rows_valid;        /* first query row of the tile, rows inside the sequence */
    int tile_lo, tile_hi;      /* key tiles [tile_lo, tile_hi) of this split           */
    int full_lo, full_hi;      /* key tiles inside [full_lo, full_hi) need no mask      */
} fa_block_span;

FA_DEVICE fa_block_span fa_find_span(const fa_fwd_args *args)
{
    fa_block_span s;
    unsigned head, batch_split;
    /* The host keeps batch * splits (at most the grid's pairs) below 2^32. */
    fa_block_pair(args->heads, (unsigned)args->batch * args->num_splits, &head, &batch_split);
    s.batch = (int)(batch_split / args->num_splits);
    s.split = (int)(batch_split % args->num_splits);
    s.head = (int)head;
    fa_sequence seq = fa_find_sequence(args, s.batch);
    s.q_row0 = seq.q_row0;
    s.k_row0 = seq.k_row0;
    s.seqlen_q = seq.seqlen_q;
    s.seqlen_k = seq.seqlen_k;
    /* Heavy (late, causal) query tiles first: they start while the light ones fill in. */
    s.m0 = (int)(gridDim.x - 1 - blockIdx.x) * FA_INST_M;
    s.rows_valid = min(FA_INST_M, s.seqlen_q - s.m0);

    fa_window w = {args->window_left, args->window_right};
    long long key_lo = fa_first_visible_key(s.m0, s.seqlen_q, s.seqlen_k, w);
    long long key_hi = fa_end_visible_key(s.m0 + s.rows_valid - 1, s.seqlen_q, s.seqlen_k, w);
    int first = (int)(key_lo / FA_INST_N);
    int count = key_hi > key_lo ? (int)((key_hi + FA_INST_N - 1) / FA_INST_N) - first : 0;
    int per_split = (count + args->num_splits - 1) / args->num_splits;
    s.tile_lo = first + s.split * per_split;
    s.tile_hi = min(first + count, s.tile_lo + per_split);
    if (s.tile_hi < s.tile_lo)
        s.tile_hi = s.tile_lo;
    /* Keys every row of the tile sees (the last row's first, the first row's end), within
     * the sequence: both fit int, and full_hi >= 0 keeps full_hi - N from wrapping. */
    s.full_lo = (int)min(fa_first_visible_key(s.m0 + s.rows_valid - 1, s.seqlen_q, s.seqlen_k, w),
                         (long long)s.seqlen_k);
    s.full_hi = (int)max(fa_end_visible_key(s.m0, s.seqlen_q, s.seqlen_k, w), 0ll);
    return s;
}

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
    if (masked) {
        fa_window w = {args->window_left, args->window_right};
#pragma unroll
        for (int mf = 0; mf < FA_MF; ++mf)
#pragma unroll
            for (int g = 0; g < FA_ACC_ROWS; ++g) {
                int row = s->m0 + warp_row0 + mf * FA_MMA_M + fa_acc_row(lane, g * FA_ACC_COLS);
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

/* Online softmax step: new running max (kept in log2 units), P = exp2(x * logit_scale -
 * max) in place, running sums (per lane; reduced across the row's lanes only at the end)
 * and the O rescale. */
FA_DEVICE void fa_online_softmax(float acc_s[FA_MF][FA_NF][FA_ACC_REGS],
                                 float acc_o[FA_MF][FA_DF][FA_ACC_REGS],
                                 float row_max[FA_MF][FA_ACC_ROWS], float row_sum[FA_MF][FA_ACC_ROWS],
                                 float logit_scale)
{
    float correction[FA_MF][FA_ACC_ROWS];
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
    if (!fa_warp_any(rescale))
        return;
#pragma unroll
    for (int mf = 0; mf < FA_MF; ++mf)
#pragma unroll
        for (int df = 0; df < FA_DF; ++df)
#pragma unroll
            for (int r = 0; r < FA_ACC_REGS; ++r)
                acc_o[mf][df][r] *= correction[mf][r / FA_ACC_COLS];
}

/* Both products run over the instance's full head dim: the padded columns are zeros, and
 * a run-time exit inside these unrolled loops would stop the compiler from issuing the
 * next fragment loads ahead of the current matrix instructions. */
FA_DEVICE void fa_qk(float acc_s[FA_MF][FA_NF][FA_ACC_REGS], const fa_elem *smem_q,
                     const fa_elem *smem_k, int warp_row0)
{
#pragma unroll
    for (int mf = 0; mf < FA_MF; ++mf)
#pragma unroll
        for (int nf = 0; nf < FA_NF; ++nf)
#pragma unroll
            for (int r = 0; r < FA_ACC_REGS; ++r)
                acc_s[mf][nf][r] = 0.f;
#pragma unroll
    for (int k0 = 0; k0 < FA_INST_D; k0 += FA_MMA_K) {
        uint32_t a[FA_MF][FA_A_REGS];
#pragma unroll
        for (int mf = 0; mf < FA_MF; ++mf)
            fa_load_a(a[mf], smem_q, FA_PITCH, warp_row0 + mf * FA_MMA_M, k0);
#pragma unroll
        for (int nf = 0; nf < FA_NF; nf += 2) {
            uint32_t b[2][FA_B_REGS];
            fa_load_bt_pair(b, smem_k, FA_PITCH, nf * FA_MMA_N, k0);
#pragma unroll
            for (int mf = 0; mf < FA_MF; ++mf) {
                fa_mma(acc_s[mf][nf], a[mf], b[0]);
                fa_mma(acc_s[mf][nf + 1], a[mf], b[1]);
            }
        }
    }
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

FA_DEVICE void fa_pv(float acc_o[FA_MF][FA_DF][FA_ACC_REGS], uint32_t p[FA_MF][FA_KS][FA_A_REGS],
                     const fa_elem *smem_v)
{
#pragma unroll
    for (int ks = 0; ks < FA_KS; ++ks)
#pragma unroll
        for (int df = 0; df < FA_DF; df += 2) {
            uint32_t b[2][FA_B_REGS];
            fa_load_b_pair(b, smem_v, FA_PITCH, ks * FA_MMA_K, df * FA_MMA_N);
#pragma unroll
            for (int mf = 0; mf < FA_MF; ++mf) {
                fa_mma(acc_o[mf][df], p[mf][ks], b[0]);
                fa_mma(acc_o[mf][df + 1], p[mf][ks], b[1]);
            }
        }
}

/* Normalise and write O and LSE once (or the split's fp32 partials). */
FA_DEVICE void fa_write_output(const fa_fwd_args *args, const fa_block_span *s, int warp_row0,
                               float acc_o[FA_MF][FA_DF][FA_ACC_REGS],
                               float row_max[FA_MF][FA_ACC_ROWS], float row_sum[FA_MF][FA_ACC_ROWS])
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
            if (row >= s->seqlen_q)
                continue;
            /* Registers r, r + 1 (r even) hold columns col0 and col0 + FA_ACC_PAIR_STRIDE,
             * inside one group of 8 columns: head_dim, a multiple of 8, never splits a pair. */
            if (args->num_splits == 1) {
                fa_elem *out = (fa_elem *)args->out +
                               fa_row_at(&args->out_layout, s->batch, s->q_row0 + row, s->head);
#pragma unroll
                for (int r = g * FA_ACC_COLS; r < (g + 1) * FA_ACC_COLS; r += 2) {
                    int col0 = fa_acc_col(lane, r);
#pragma unroll
                    for (int df = 0; df < FA_DF; ++df) {
                        int col = df * FA_MMA_N + col0;
                        if (col < args->head_dim)
                            fa_store_pair(out + col, acc_o[mf][df][r] * inv, acc_o[mf][df][r + 1] * inv);
                    }
                }
                if (args->lse && fa_row_leader(lane))
                    args->lse[fa_lse_at(&args->lse_layout, s->batch, s->head, s->q_row0 + row)] = lse;
            } else {
                long long grow = seq_base + row;
                float *part = args->partial_out + fa_partial_out_offset(args, s->split, grow, s->head);
#pragma unroll
                for (int r = g * FA_ACC_COLS; r < (g + 1) * FA_ACC_COLS; r += 2) {
                    int col0 = fa_acc_col(lane, r);
#pragma unroll
                    for (int df = 0; df < FA_DF; ++df) {
                        int col = df * FA_MMA_N + col0;
                        if (col < args->head_dim) {
                            part[col] = acc_o[mf][df][r] * inv;
                            part[col + FA_ACC_PAIR_STRIDE] = acc_o[mf][df][r + 1] * inv;
                        }
                    }
                }
                if (fa_row_leader(lane))
                    args->partial_lse[fa_partial_lse_offset(args, s->split, s->head, grow)] = lse;
            }
        }
}

extern "C" FA_GLOBAL void __launch_bounds__(FA_THREADS) FA_INST_NAME(fa_fwd_args args)
{
    FA_DYNAMIC_SMEM(fa_smem, FA_FWD_SMEM_BYTES(FA_INST_D, FA_INST_M, FA_INST_N, FA_INST_STAGES));
    fa_elem *smem_q = (fa_elem *)fa_smem;
    fa_elem *smem_k = smem_q + FA_INST_M * FA_PITCH;
    fa_elem *smem_v = smem_k + FA_INST_STAGES * FA_INST_N * FA_PITCH;

    const fa_block_span s = fa_find_span(&args);
    if (s.rows_valid <= 0 || s.batch == args.batch || fa_sequence_bad(&args, s.batch))
        return;
    const int warp_row0 = fa_warp() * FA_WARP_ROWS;
    const int kv_head = s.head / (args.heads / args.heads_k);
    const fa_elem *q = (const fa_elem *)args.q + fa_row_at(&args.q_layout, s.batch, s.q_row0 + s.m0, s.head);
    const fa_elem *k = (const fa_elem *)args.k + fa_row_at(&args.k_layout, s.batch, s.k_row0, kv_head);
    const fa_elem *v = (const fa_elem *)args.v + fa_row_at(&args.v_layout, s.batch, s.k_row0, kv_head);
    float alibi_log2 = 0.f;
    if (args.alibi_slopes)
        alibi_log2 = args.alibi_slopes[s.batch * args.alibi_batch + s.head] * FA_LOG2E;

    const int n_tiles = s.tile_hi - s.tile_lo;
    /* Tiles are visited from the last one down, so the tiles that straddle the causal
     * diagonal (the masked ones) come first. */
#define FA_TILE_N0(t) ((s.tile_hi - 1 - (t)) * FA_INST_N)
#define FA_LOAD_K(t)                                                                  \
    fa_load_tile(smem_k + ((t) % FA_INST_STAGES) * FA_INST_N * FA_PITCH,              \
                 k + (long long)FA_TILE_N0(t) * args.k_layout.row, args.k_layout.row, \
                 s.seqlen_k - FA_TILE_N0(t), args.head_dim, FA_INST_N)
#define FA_LOAD_V(t)                                                                  \
    fa_load_tile(smem_v + ((t) % FA_INST_STAGES) * FA_INST_N * FA_PITCH,              \
                 v + (long long)FA_TILE_N0(t) * args.v_layout.row, args.v_layout.row, \
                 s.seqlen_k - FA_TILE_N0(t), args.head_dim, FA_INST_N)

    float acc_o[FA_MF][FA_DF][FA_ACC_REGS];
    float row_max[FA_MF][FA_ACC_ROWS], row_sum[FA_MF][FA_ACC_ROWS];
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
#define FA_K_BUF(t) (smem_k + ((t) % FA_INST_STAGES) * FA_INST_N * FA_PITCH)
#define FA_V_BUF(t) (smem_v + ((t) % FA_INST_STAGES) * FA_INST_N * FA_PITCH)
#define FA_SOFTMAX_STEP(t)                                                                 \
    float acc_s[FA_MF][FA_NF][FA_ACC_REGS];                                                \
    uint32_t p[FA_MF][FA_KS][FA_A_REGS];                                                   \
    fa_qk(acc_s, smem_q, FA_K_BUF(t), warp_row0);                                          \
    {                                                                                      \
        const int n0 = FA_TILE_N0(t);                                                      \
        float logit_scale = fa_prepare_logits(acc_s, &s, &args, warp_row0, n0,             \
                                              fa_tile_needs_mask(&s, n0), alibi_log2);     \
        fa_online_softmax(acc_s, acc_o, row_max, row_sum, logit_scale);                    \
        fa_pack_p(p, acc_s);                                                               \
    }

    /* Copies complete in commit order, so "tile t has landed" is a fixed count of commit
     * groups still allowed in flight; every slot commits a group (empty past the last
     * tile) to keep that count exact. */
    fa_load_tile(smem_q, q, args.q_layout.row, s.rows_valid, args.head_dim, FA_INST_M);
#if FA_JOINT_KV_TILES
    /* One group per K/V tile; tiles t+1 .. t+S-1 are in flight while tile t computes.
     * The barrier at the top of an iteration both publishes tile t and tells that every
     * warp is done with tile t-1, whose buffer is then refilled: one barrier per tile. */
#pragma unroll
    for (int t = 0; t < FA_INST_STAGES - 1; ++t) {
        if (t < n_tiles) {
            FA_LOAD_K(t);
            FA_LOAD_V(t);
        }
        fa_async_commit();
    }
    for (int t = 0; t < n_tiles; ++t) {
        fa_async_wait(FA_INST_STAGES - 2);
        fa_barrier();
        if (t + FA_INST_STAGES - 1 < n_tiles) {
            FA_LOAD_K(t + FA_INST_STAGES - 1);
            FA_LOAD_V(t + FA_INST_STAGES - 1);
        }
        fa_async_commit();
        FA_SOFTMAX_STEP(t);
        fa_pv(acc_o, p, FA_V_BUF(t));
    }
#else
    /* K and V waited for separately (FlashAttention-2's schedule, generalised to S
     * buffers): V_t still loads during Q·K_tᵀ and K_{t+S} during the softmax and P·V_t.
     * Groups go out as Q+K_0, V_0, K_1, V_1, ..., so K_t has landed when 2S-2 groups are
     * left in flight and V_t when 2S-1 are. */
    if (n_tiles > 0)
        FA_LOAD_K(0);
    fa_async_commit();
#pragma unroll
    for (int t = 1; t < FA_INST_STAGES; ++t) {
        if (t - 1 < n_tiles)
            FA_LOAD_V(t - 1);
        fa_async_commit();
        if (t < n_tiles)
            FA_LOAD_K(t);
        fa_async_commit();
    }
    for (int t = 0; t < n_tiles; ++t) {
        fa_async_wait(2 * FA_INST_STAGES - 2); /* K_t */
        fa_barrier(); /* ... for every thread, and P·V_{t-1} is done: its V buffer is free */
        if (t + FA_INST_STAGES - 1 < n_tiles)
            FA_LOAD_V(t + FA_INST_STAGES - 1);
        fa_async_commit();
        FA_SOFTMAX_STEP(t);
        fa_barrier(); /* every warp is done with K_t */
        if (t + FA_INST_STAGES < n_tiles)
            FA_LOAD_K(t + FA_INST_STAGES);
        fa_async_commit();
        fa_async_wait(2 * FA_INST_STAGES - 1); /* V_t */
        fa_barrier();
        fa_pv(acc_o, p, FA_V_BUF(t));
    }
#endif
#undef FA_K_BUF
#undef FA_V_BUF
#undef FA_SOFTMAX_STEP
#undef FA_TILE_N0
#undef FA_LOAD_K
#undef FA_LOAD_V
    fa_async_wait(0); /* with no key tile, the Q copy is still in flight */
    fa_write_output(&args, &s, warp_row0, acc_o, row_max, row_sum);
}
