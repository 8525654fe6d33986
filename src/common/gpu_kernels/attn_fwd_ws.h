/*
 * attn_fwd_ws.h - the warpgroup forward kernel (warp-specialised, FlashAttention-3's
 * schedule; docs/research/issue13_hopper.md), written once against a warpgroup
 * vocabulary that src/cuda/fa_hopper.h provides for sm_90a (wgmma, TMA, mbarriers,
 * setmaxnreg, named barriers). One translation unit includes it once, after defining the
 * instance (ws_instances.txt): FA_INST_D, FA_INST_M x FA_INST_N (query x key tile),
 * FA_INST_WARPS (4 per warpgroup, the producer's included), FA_INST_STAGES (K/V ring
 * depth), FA_INST_BF16, FA_INST_NAME, FA_INST_WARPGROUP 1.
 *
 * Roles. Warpgroup 0 is the producer: one thread issues every TMA copy (per work tile the
 * Q tile, then K and V tiles into a ring of FA_INST_STAGES stages, each with a "full"
 * mbarrier the copies complete and an "empty" one the consumers release), and the
 * warpgroup gives its registers to the others. Warpgroups 1 .. FA_WS_CONSUMERS each own
 * 64 query rows of the tile and compute S = Q·Kᵀ and O += P·V with wgmma, P staying in
 * registers; they take turns issuing them (ping-pong). Up to d128 (FA_WS_PERSISTENT) the
 * blocks walk work tiles (fa_ws_span) along x: persistent ones (one per SM, the producer
 * running ahead into the next tile), each tile handed to the roles by a scheduler thread
 * (fa_ws_schedule), statically or drawn from a counter; above d128, a block per query
 * tile on the mma.sync kernels' grid.
 *
 * Overlap inside a consumer: S of tile t is issued before P·V of tile t-1, and the softmax
 * of tile t runs while that P·V is still in the tensor cores; O is rescaled once it is
 * done. V therefore trails K by one tile, in the producer's order as in the consumers'.
 *
 * Everything that does not depend on how the products are issued (the block's rows and
 * key tiles, masks, softcap, ALiBi, the online softmax, the write of LSE and split
 * partials, and of O where TMA does not store it: fa_ws_store_o) is attn_fwd_parts.h,
 * shared with the mma.sync kernel: a wgmma m64nN accumulator is, per warp, N / 8
 * mma.sync accumulator tiles side by side.
 *
 * Keys past a sequence's end: a fixed-length K/V map ends with the sequence, so TMA
 * zero-fills those rows. With varlen or seqused_k the rows after the end are another
 * sequence's (or unused cache) and may hold anything, Inf included; their scores are
 * masked to -inf, and before P·V of such a tile the consumers zero those V rows in shared
 * memory, so that 0 · Inf cannot reach O.
 */
#ifdef FA_ATTN_FWD_INCLUDED
#error "attn_fwd_ws.h instantiates one kernel per translation unit"
#endif
#define FA_ATTN_FWD_INCLUDED
#define FA_INST_PACK_GQA 0

#include "fa_device.h"
#if !FA_HAVE_WARPGROUP_MMA
#error "attn_fwd_ws.h needs the warpgroup vocabulary (FA_INST_WARPGROUP units, sm_90a)"
#endif

#define FA_WS_CONSUMERS (FA_INST_M / 64)
#define FA_WS_CONSUMER_THREADS (FA_WS_CONSUMERS * FA_WARPGROUP_THREADS)
/* Per warp of a consumer: 16 rows, the tile's keys in N / 8 accumulator tiles. */
#define FA_MF 1
#define FA_NF (FA_INST_N / FA_MMA_N)
#define FA_DF (FA_INST_D / FA_MMA_N)
#define FA_KS (FA_INST_N / FA_MMA_K)
#if FA_INST_BF16
#define FA_WS_TYPE bf16
#else
#define FA_WS_TYPE f16
#endif

#include "gpu_kernels/attn_fwd_parts.h"
#include "gpu_kernels/wg_stage.h"

/* The products' descriptors stepped from the first k-step's (fa_wg_desc_step) at d128,
 * where that measured 1-3% faster; built per k-step at the others (stepped, d256 spilled
 * 24 bytes and d64 ran no faster; bench/NOTES.md ws7b). */
#define FA_WS_STEPPED_DESCRIPTORS (FA_INST_D == 128)

#if FA_INST_M % 64 != 0 || FA_WS_CONSUMERS < 1 || FA_INST_WARPS != 4 * (FA_WS_CONSUMERS + 1)
#error "a warpgroup instance has 64 query rows per consumer warpgroup and one producer warpgroup"
#endif
#if FA_INST_D % 64 != 0 || FA_INST_N % 16 != 0 || FA_INST_N > 256 || FA_INST_M > 256
#error "warpgroup tiles are whole 64-element column blocks and TMA boxes of at most 256 rows"
#endif

/* Register budgets of the roles (setmaxnreg): the producer keeps what issuing copies
 * and walking the work needs, the consumers share the rest (FA3's counts: 24 / 240 for
 * two consumers, 32 / 160 for three). The walk's producer, which takes its tiles from
 * the mailbox, spilled 24 bytes in 24 at d128 (ptxas); 40 / 232 spills nothing. */
#if FA_WS_CONSUMERS == 2 && FA_WS_PERSISTENT(FA_INST_D)
#define FA_WS_PRODUCER_REGS 40
#define FA_WS_CONSUMER_REGS 232
#elif FA_WS_CONSUMERS == 2
#define FA_WS_PRODUCER_REGS 24
#define FA_WS_CONSUMER_REGS 240
#elif FA_WS_CONSUMERS == 3
#define FA_WS_PRODUCER_REGS 32
#define FA_WS_CONSUMER_REGS 160
#else
#error "warpgroup instances have two or three consumer warpgroups"
#endif
/* setmaxnreg moves registers within the block's allocation at launch: ptxas gives each
 * thread the most the launch bound allows (65536 / threads, in steps of 8), and a .inc
 * past what the others gave back waits for ever. 24 + 2 x 240 and 40 + 2 x 232 (x 128)
 * are 384 threads at 168; 32 + 3 x 160 is 512 at 128. */
#if FA_WARPGROUP_THREADS * (FA_WS_PRODUCER_REGS + FA_WS_CONSUMERS * FA_WS_CONSUMER_REGS) > \
    FA_THREADS * FA_WS_REGS_PER_THREAD(FA_THREADS)
#error "the roles' register budgets exceed the block's registers at launch"
#endif

/* Bytes of one 64-column block of a tile of `rows` rows, and of whole tiles. */
#define FA_WS_BLOCK(rows) ((rows) * 128)
#define FA_WS_Q_BYTES (FA_INST_D / 64 * FA_WS_BLOCK(FA_INST_M))
#define FA_WS_KV_BYTES (FA_INST_D / 64 * FA_WS_BLOCK(FA_INST_N))
/* Named barriers (ids from 1: 0 is __syncthreads'): the consumers together, each
 * consumer's turn to issue its products (FA_WS_BAR_TURN + consumer), and each consumer's
 * own warps around its O staging tile (FA_WS_BAR_O + consumer). */
#define FA_WS_BAR_TAIL 1
#define FA_WS_BAR_TURN 2
#define FA_WS_BAR_O (FA_WS_BAR_TURN + FA_WS_CONSUMERS)

/* The ring's barriers (and the Q tile's). Full: one arrival (the producer's expect_tx)
 * plus the bytes; empty: one arrival per consumer warp, once its products are done with
 * the stage. */
typedef struct fa_ws_ring {
    uint64_t q_full, q_empty;
    uint64_t k_full[FA_INST_STAGES], v_full[FA_INST_STAGES];
    uint64_t k_empty[FA_INST_STAGES], v_empty[FA_INST_STAGES];
    /* The walk's mailbox (FA_WS_PERSISTENT): the block's next work tile (past the walk:
     * the end); walk_full once the scheduler put it there, walk_empty once every consumer
     * thread has read it (each its own arrival: racecheck reported the reads of lanes
     * behind a warp's one arrival as hazards) and the producer has issued its copies. */
    uint64_t walk_full, walk_empty;
    unsigned walk_tile;
} fa_ws_ring;

/* Stage and phase parity of the g-th K/V tile through the ring (counted over all the
 * work tiles of the block: the ring runs on from one to the next). */
FA_DEVICE unsigned fa_ws_stage(unsigned g) { return g % FA_INST_STAGES; }
FA_DEVICE unsigned fa_ws_parity(unsigned g) { return (g / FA_INST_STAGES) & 1u; }

/* The block's work: a persistent grid (at most one block per SM) walks the work tiles
 * of x_blocks * pairs, each block its blockIdx.x-th first, then (fa_ws_schedule) every
 * gridDim.x-th, or in a call with args->walk_tickets the one its draw names: the block
 * that finishes first takes the next tile in this order. They are ordered in sections
 * of a few pairs whose K/V fit in L2 together (FA_WS_L2_SECTION_BYTES), and within a
 * section by the query tile, the last (heaviest when causal) first, then the pair: the
 * blocks running at a time read the K/V of one section, and without a mask each round
 * of gridDim.x tiles costs about the same in every block. Measured on the H200
 * (bench/NOTES.md, ws3): pairs fastest over all pairs lost 15% at d128 (132 K/V streams
 * at once, no L2 reuse); query tiles fastest lost up to 45% when causal (with gridDim.x
 * a multiple of x_blocks each block always drew the same query tile). Causal tiles
 * still differ within a round, and a static walk gave some blocks the heavier tile of
 * each round (5-15% slower than a block per tile at 4k-16k keys): drawn, the heaviest go
 * first wherever a block is free (bench/NOTES.md, issue 13 session 14). The producer
 * starts loading a work tile while the consumers finish the one before. */
#define FA_WS_L2_SECTION_BYTES (24ll << 20)

/* All computed from args at each use, not kept, and in 32 bits (the dispatcher keeps
 * the warpgroup family below FA_WS_WALK_TILES work tiles): a consumer has no registers to
 * spare across the walk (ptxas spilled at d128 with 64-bit state kept live). */
FA_DEVICE unsigned fa_ws_x_blocks(const fa_fwd_args *args) { return (unsigned)(args->seqlen_q + FA_INST_M - 1) / FA_INST_M; }
FA_DEVICE unsigned fa_ws_pairs(const fa_fwd_args *args)
{
    return (unsigned)args->heads * (unsigned)args->batch * (unsigned)args->num_splits;
}
FA_DEVICE unsigned fa_ws_total(const fa_fwd_args *args) { return fa_ws_pairs(args) * fa_ws_x_blocks(args); }

FA_DEVICE fa_block_span fa_ws_span(const fa_fwd_args *args, unsigned w)
{
    const long long kv_bytes = 4ll * FA_INST_D * (args->seqlen_k > 0 ? args->seqlen_k : 1); /* K and V, 16-bit */
    const unsigned pairs = fa_ws_pairs(args), x_blocks = fa_ws_x_blocks(args);
    const long long fit = FA_WS_L2_SECTION_BYTES / kv_bytes;
    const unsigned section = fit < 1 ? 1u : fit > pairs ? pairs : (unsigned)fit;
    const unsigned first_pair = w / (section * x_blocks) * section, in_section = w % (section * x_blocks);
    const unsigned pairs_here = pairs - first_pair < section ? pairs - first_pair : section;
    const unsigned from_last = in_section / pairs_here, pair = first_pair + in_section % pairs_here;
    return fa_span_at(args, (int)(x_blocks - 1 - from_last) * FA_INST_M, pair % (unsigned)args->heads,
                      pair / (unsigned)args->heads);
}

/* One tile of `rows` rows at (row, head, batch) of an operand's map, as D / 64 boxes of
 * 64 columns into consecutive column blocks, on one barrier. */
FA_DEVICE void fa_ws_load(unsigned char *dst, const void *map, int rows, int head, long long row, int batch,
                          uint64_t *bar)
{
#pragma unroll
    for (int b = 0; b < FA_INST_D / 64; ++b)
        fa_tma_load_4d(dst + b * FA_WS_BLOCK(rows), map, 64 * b, head, (int)row, batch, bar);
}

/* The producer's one thread, for one work tile: Q (once the consumers released the
 * previous one: q_loads tiles so far), then K(0), and per step K(t) ahead of V(t-1),
 * each into its stage once the consumers released the stage's previous tile (kv tiles
 * through the ring so far). */
FA_DEVICE void fa_ws_produce(const fa_fwd_args *args, const fa_tma_maps *maps, const fa_block_span *s,
                             fa_ws_ring *ring, unsigned char *smem_q, unsigned char *smem_k, unsigned char *smem_v,
                             unsigned kv, unsigned q_loads)
{
    const int n_tiles = s->tile_hi - s->tile_lo;
    const int kv_head = s->head / (args->heads / args->heads_k);
    const int batch = args->cu_seqlens_q ? 0 : s->batch; /* varlen maps have one batch entry */
    if (q_loads > 0)
        fa_mbar_wait(&ring->q_empty, (q_loads - 1) & 1u);
    fa_mbar_arrive_expect_tx(&ring->q_full, FA_WS_Q_BYTES);
    fa_ws_load(smem_q, maps->q, FA_INST_M, s->head, s->q_row0 + s->m0, batch, &ring->q_full);
    for (int t = 0; t <= n_tiles; ++t) {
        if (t < n_tiles) {
            const unsigned g = kv + t, st = fa_ws_stage(g);
            if (g >= FA_INST_STAGES)
                fa_mbar_wait(&ring->k_empty[st], fa_ws_parity(g) ^ 1u);
            fa_mbar_arrive_expect_tx(&ring->k_full[st], FA_WS_KV_BYTES);
            fa_ws_load(smem_k + st * FA_WS_KV_BYTES, maps->k, FA_INST_N, kv_head,
                       s->k_row0 + (long long)(s->tile_hi - 1 - t) * FA_INST_N, batch, &ring->k_full[st]);
        }
        if (t >= 1) {
            const unsigned g = kv + t - 1, st = fa_ws_stage(g);
            if (g >= FA_INST_STAGES)
                fa_mbar_wait(&ring->v_empty[st], fa_ws_parity(g) ^ 1u);
            fa_mbar_arrive_expect_tx(&ring->v_full[st], FA_WS_KV_BYTES);
            fa_ws_load(smem_v + st * FA_WS_KV_BYTES, maps->v, FA_INST_N, kv_head,
                       s->k_row0 + (long long)(s->tile_hi - t) * FA_INST_N, batch, &ring->v_full[st]);
        }
    }
}

/* A consumer warp is done reading a stage: its lane 0 arrives (the warpgroup's wgmma
 * wait, which every lane passed, covers the reads). */
FA_DEVICE void fa_ws_release(uint64_t *empty)
{
    __syncwarp();
    if (fa_lane() == 0)
        fa_mbar_arrive(empty);
}

/* Ping-pong (FA3's warp scheduling): the consumers issue their products in turns, in a
 * cycle, so that one's softmax runs while the tensor cores work on another's products.
 * A turn is a named barrier of the waiting consumer and the one before it, which arrives
 * once it has issued. The last consumer opens the cycle and consumer 0 takes the last
 * pass at the end, so that no arrival is left over. */
FA_DEVICE void fa_ws_turn_wait(int consumer) { fa_named_sync(FA_WS_BAR_TURN + consumer, 2 * FA_WARPGROUP_THREADS); }
FA_DEVICE void fa_ws_turn_pass(int consumer)
{
    fa_named_arrive(FA_WS_BAR_TURN + (consumer + 1) % FA_WS_CONSUMERS, 2 * FA_WARPGROUP_THREADS);
}

/* V rows valid .. N-1 of a stage set to zero by the consumers together (whole 128-byte
 * rows of every column block), made visible to wgmma's reads, and waited for by all. */
FA_DEVICE void fa_ws_zero_tail(unsigned char *v_stage, int valid)
{
    fa_wg_zero_rows(v_stage, FA_INST_N, valid, FA_INST_D / 64, (int)threadIdx.x - FA_WARPGROUP_THREADS,
                    FA_WS_CONSUMER_THREADS);
    fa_fence_async_smem();
    fa_named_sync(FA_WS_BAR_TAIL, FA_WS_CONSUMER_THREADS);
}

/* Masks, softcap and ALiBi on S of key tile n0, then the softmax rows. Returns whether
 * O needs the rescale by `correction` (fa_rescale_o). P is packed later, by the caller:
 * the P·V still in flight reads the previous P from the same registers. */
FA_DEVICE int fa_ws_softmax(float acc_s[FA_MF][FA_NF][FA_ACC_REGS], const fa_fwd_args *args,
                            const fa_block_span *s, int warp_row0, int n0, float alibi_log2,
                            float row_max[FA_MF][FA_ACC_ROWS], float row_sum[FA_MF][FA_ACC_ROWS],
                            float correction[FA_MF][FA_ACC_ROWS])
{
    const float logit_scale =
        fa_prepare_logits(acc_s, s, args, warp_row0, n0, fa_tile_needs_mask(s, n0), alibi_log2);
    return fa_softmax_rows(acc_s, row_max, row_sum, logit_scale, correction);
}

/* A block with nothing to do: no rows, past the last pair of a folded grid, or a
 * sequence the device check found bad. */
FA_DEVICE int fa_ws_block_idle(const fa_fwd_args *args, const fa_block_span *s)
{
    return s->rows_valid <= 0 || s->batch == args->batch || fa_sequence_bad(args, s->batch);
}

/* The consumer's 64 rows of O by TMA (args->out_by_tma), unless a varlen tile ends
 * inside them (the map runs on into the next sequence's rows; a fixed-length map ends
 * with the sequence, and TMA drops the rows past it). The warps write normalised O into
 * the consumer's rows of the staging tile `o_tile` (Q's layout: fa_wg_stage_acc), then
 * one thread stores a box per 64 columns and goes
 * on: the copy engine finishes them while the consumer starts its next work tile. The
 * direct stores (4 bytes per lane over 8 rows per instruction) cost up to 20-30% at
 * s 512 (bench/NOTES.md, issue 13 ws5). Before writing, the thread that issued the
 * previous store waits until it has read the tile. Returns whether O was stored. */
FA_DEVICE int fa_ws_store_o(const fa_fwd_args *args, const fa_tma_maps *maps, const fa_block_span *s,
                            int consumer, unsigned char *o_tile, float acc_o[FA_MF][FA_DF][FA_ACC_REGS],
                            float row_sum[FA_MF][FA_ACC_ROWS])
{
    if (!args->out_by_tma || (args->cu_seqlens_q && s->rows_valid < FA_WS_O_BOX_ROWS * (consumer + 1)))
        return 0;
    const int row0 = FA_WS_O_BOX_ROWS * consumer + FA_MMA_M * (fa_warp() % 4);
    const int issuer = fa_warpgroup_thread() == 0;
    float inv[FA_ACC_ROWS];
#pragma unroll
    for (int g = 0; g < FA_ACC_ROWS; ++g) {
        const float sum = fa_row_sum(row_sum[0][g]);
        inv[g] = sum > 0.f ? 1.f / sum : 0.f;
    }
    if (issuer)
        fa_bulk_wait_reads();
    fa_named_sync(FA_WS_BAR_O + consumer, FA_WARPGROUP_THREADS);
    fa_wg_stage_acc(fa_smem_addr(o_tile), FA_INST_M, row0, 0, acc_o[0], FA_DF, inv);
    fa_fence_async_smem();
    fa_named_sync(FA_WS_BAR_O + consumer, FA_WARPGROUP_THREADS);
    if (issuer) {
        const int batch = args->cu_seqlens_q ? 0 : s->batch; /* varlen maps have one batch entry */
        const int row = (int)(s->q_row0 + s->m0) + FA_WS_O_BOX_ROWS * consumer;
#pragma unroll
        for (int b = 0; b < FA_INST_D / 64; ++b)
            fa_tma_store_4d(maps->out, o_tile + b * FA_WS_BLOCK(FA_INST_M) + FA_WS_BLOCK(FA_WS_O_BOX_ROWS) * consumer,
                            64 * b, s->head, row, batch);
        fa_bulk_commit();
    }
    return 1;
}

/* One consumer warpgroup's work tile: S(t) issued before P·V(t-1), the softmax of t under
 * that product, O rescaled once it is done; then O (fa_ws_store_o, or directly) and LSE
 * (or the split's partials) written. kv and q_loads as for fa_ws_produce. */
FA_DEVICE void fa_ws_consume(const fa_fwd_args *args, const fa_tma_maps *maps, const fa_block_span *s,
                             fa_ws_ring *ring, unsigned char *smem_q, unsigned char *smem_k, unsigned char *smem_v,
                             unsigned char *smem_o, int consumer, unsigned kv, unsigned q_loads)
{
    const int warp_row0 = 64 * consumer + FA_MMA_M * (fa_warp() % 4);
    const int n_tiles = s->tile_hi - s->tile_lo;
    const float alibi_log2 =
        args->alibi_slopes ? args->alibi_slopes[s->batch * args->alibi_batch + s->head] * FA_LOG2E : 0.f;
    const uint32_t q_addr = fa_smem_addr(smem_q) + FA_WS_BLOCK(64) * consumer;
    const uint32_t k_addr = fa_smem_addr(smem_k), v_addr = fa_smem_addr(smem_v);
#define FA_TILE_N0(t) ((s->tile_hi - 1 - (t)) * FA_INST_N)

    float acc_o[FA_MF][FA_DF][FA_ACC_REGS];
    float row_max[FA_MF][FA_ACC_ROWS], row_sum[FA_MF][FA_ACC_ROWS], correction[FA_MF][FA_ACC_ROWS];
#pragma unroll
    for (int df = 0; df < FA_DF; ++df)
#pragma unroll
        for (int r = 0; r < FA_ACC_REGS; ++r)
            acc_o[0][df][r] = 0.f;
#pragma unroll
    for (int g = 0; g < FA_ACC_ROWS; ++g) {
        row_max[0][g] = -INFINITY;
        row_sum[0][g] = 0.f;
    }
    float acc_s[FA_MF][FA_NF][FA_ACC_REGS];
    uint32_t p[FA_MF][FA_KS][FA_A_REGS];

/* Before a batch of products is issued: every register it reads or writes (S, O, P) was
 * last touched by ordinary instructions; pinned first, so that none of those moves past
 * the fence, then the fence that orders them before the wgmma (PTX ISA 9.7.15.7.1). */
#define FA_WS_FENCE_OPERANDS()                                                                        \
    do {                                                                                              \
        fa_wg_pin(&acc_s[0][0][0], FA_NF * FA_ACC_REGS);                                              \
        fa_wg_pin(&acc_o[0][0][0], FA_DF * FA_ACC_REGS);                                              \
        fa_wg_pin_u32(&p[0][0][0], FA_KS * FA_A_REGS);                                                \
        fa_wg_fence();                                                                                \
    } while (0)
/* S of tile t issued and committed as one group (K(t) has landed: FA_WS_WAIT_K). */
#define FA_WS_WAIT_K(t) fa_mbar_wait(&ring->k_full[fa_ws_stage(kv + (t))], fa_ws_parity(kv + (t)))
#define FA_WS_ISSUE_S(t)                                                                              \
    do {                                                                                              \
        FA_WG_QK(FA_INST_N, FA_INST_D, FA_WS_TYPE, &acc_s[0][0][0], q_addr, FA_WS_BLOCK(FA_INST_M),    \
                 k_addr + fa_ws_stage(kv + (t)) * FA_WS_KV_BYTES, FA_WS_STEPPED_DESCRIPTORS);         \
        fa_wg_commit();                                                                               \
    } while (0)
/* P·V of tile t issued and committed (V(t) has landed: FA_WS_WAIT_V). */
#define FA_WS_WAIT_V(t) fa_mbar_wait(&ring->v_full[fa_ws_stage(kv + (t))], fa_ws_parity(kv + (t)))
#define FA_WS_ISSUE_PV(t)                                                                             \
    do {                                                                                              \
        FA_WG_PV(FA_INST_N, FA_INST_D, FA_WS_TYPE, &acc_o[0][0][0], p[0],                             \
                 v_addr + fa_ws_stage(kv + (t)) * FA_WS_KV_BYTES, FA_WS_STEPPED_DESCRIPTORS);         \
        fa_wg_commit();                                                                               \
    } while (0)

    if (n_tiles > 0) {
        fa_mbar_wait(&ring->q_full, q_loads & 1u);
        /* The one tile whose keys run past the sequence's end into rows of other data,
         * zeroed outside the turns: every consumer takes part. */
        if ((args->cu_seqlens_q || args->seqused_k) && (long long)s->tile_hi * FA_INST_N > s->seqlen_k) {
            FA_WS_WAIT_V(0);
            fa_ws_zero_tail(smem_v + fa_ws_stage(kv) * FA_WS_KV_BYTES, s->seqlen_k - FA_TILE_N0(0));
        }
        FA_WS_WAIT_K(0);
        fa_ws_turn_wait(consumer);
        FA_WS_FENCE_OPERANDS();
        FA_WS_ISSUE_S(0);
        fa_ws_turn_pass(consumer);
        fa_wg_wait(0);
        fa_wg_pin(&acc_s[0][0][0], FA_NF * FA_ACC_REGS);
        fa_ws_release(&ring->k_empty[fa_ws_stage(kv)]);
        if (n_tiles == 1)
            fa_ws_release(&ring->q_empty);
        fa_ws_softmax(acc_s, args, s, warp_row0, FA_TILE_N0(0), alibi_log2, row_max, row_sum, correction);
        fa_pack_p(p, acc_s); /* O is still zero: nothing to rescale */
        for (int t = 1; t < n_tiles; ++t) {
            FA_WS_WAIT_K(t);
            FA_WS_WAIT_V(t - 1);
            fa_ws_turn_wait(consumer);
            FA_WS_FENCE_OPERANDS();
            FA_WS_ISSUE_S(t);
            FA_WS_ISSUE_PV(t - 1);
            fa_ws_turn_pass(consumer);
            /* S(t) is done; P·V(t-1) still runs under the softmax. Not at d64: its short
             * P·V, waited for before the exponentials anyway (the compiler hoists the wait
             * below, ws7a), is waited for with S, which frees P's registers through the
             * softmax: what lets the 192 x 128 tile compile without spills (ws10). */
            if (FA_INST_D == 64)
                fa_wg_wait(0);
            else
                fa_wg_wait(1);
            fa_wg_pin(&acc_s[0][0][0], FA_NF * FA_ACC_REGS);
            fa_ws_release(&ring->k_empty[fa_ws_stage(kv + t)]);
            if (t == n_tiles - 1)
                fa_ws_release(&ring->q_empty); /* the last S read of this Q */
            const int rescale = fa_ws_softmax(acc_s, args, s, warp_row0, FA_TILE_N0(t), alibi_log2, row_max,
                                              row_sum, correction);
            /* P·V(t-1) ran under the softmax: at d128 and d256 the wait stays here (1-3%
             * faster); at d64, whose P·V is short, the hoisted one measured 1% faster, and
             * d192 was not measured (bench/NOTES.md ws7a). */
            if (FA_INST_D == 128 || FA_INST_D == 256)
                fa_wg_wait_all_here(args->scale_log2, &p[0][0][0]);
            else
                fa_wg_wait(0);
            fa_wg_pin(&acc_o[0][0][0], FA_DF * FA_ACC_REGS);
            fa_ws_release(&ring->v_empty[fa_ws_stage(kv + t - 1)]);
            fa_rescale_o(acc_o, correction, rescale);
            fa_pack_p(p, acc_s);
        }
        FA_WS_WAIT_V(n_tiles - 1);
        fa_ws_turn_wait(consumer);
        FA_WS_FENCE_OPERANDS();
        FA_WS_ISSUE_PV(n_tiles - 1);
        fa_ws_turn_pass(consumer);
        fa_wg_wait(0);
        fa_wg_pin(&acc_o[0][0][0], FA_DF * FA_ACC_REGS);
        fa_ws_release(&ring->v_empty[fa_ws_stage(kv + n_tiles - 1)]);
    }
#undef FA_WS_FENCE_OPERANDS
#undef FA_WS_WAIT_K
#undef FA_WS_WAIT_V
#undef FA_WS_ISSUE_S
#undef FA_WS_ISSUE_PV
#undef FA_TILE_N0
    const int o_stored = fa_ws_store_o(args, maps, s, consumer, smem_o, acc_o, row_sum);
    fa_write_output(args, s, warp_row0, 0, acc_o, row_max, row_sum, o_stored);
}

#if FA_WS_PERSISTENT(FA_INST_D)
/* The reader's `taken`-th work tile (counted from 0) from the mailbox; past the walk at
 * its end. A consumer thread arrives on walk_empty once it has read it, the producer once
 * it has issued the tile's copies. */
FA_DEVICE unsigned fa_ws_take_tile(fa_ws_ring *ring, unsigned taken)
{
    fa_mbar_wait(&ring->walk_full, taken & 1u);
    return *(volatile unsigned *)&ring->walk_tile;
}

/* The scheduler (one thread): puts the block's work tiles in the mailbox one at a time,
 * the next once every reader is done with the last. The producer's arrival comes once it
 * has issued the tile's copies, so that a drawn tile is drawn as late as the ring lets
 * the producer start it. */
FA_DEVICE void fa_ws_schedule(const fa_fwd_args *args, fa_ws_ring *ring)
{
    unsigned w = blockIdx.x;
    for (unsigned j = 0;; ++j) {
        *(volatile unsigned *)&ring->walk_tile = w;
        fa_mbar_arrive(&ring->walk_full);
        if (w >= fa_ws_total(args))
            return;
        fa_mbar_wait(&ring->walk_empty, j & 1u);
        w = args->walk_tickets ? gridDim.x + fa_ticket_draw(args->walk_tickets) : w + gridDim.x;
    }
}
/* Every work tile of the block, each as its span `s`: the mailbox's (FA_WS_PERSISTENT
 * instances, whatever their grid), or the block's own query tile (d192, d256). */
#define FA_WS_FOR_EACH_WORK_TILE(s)                                                            \
    for (unsigned taken = 0, w = fa_ws_take_tile(&ring, 0); w < fa_ws_total(&args);              \
         w = fa_ws_take_tile(&ring, ++taken))                                                    \
        for (fa_block_span s = fa_ws_span(&args, w), *once = &s; once; once = NULL)
#else
#define FA_WS_FOR_EACH_WORK_TILE(s) \
    for (fa_block_span s = fa_find_span(&args), *once = &s; once; once = NULL)
#endif

extern "C" FA_GLOBAL void __launch_bounds__(FA_THREADS, 1)
    FA_INST_NAME(fa_fwd_args args, const __grid_constant__ fa_tma_maps maps)
{
    FA_DYNAMIC_SMEM(fa_smem, FA_WS_SMEM_BYTES(FA_INST_D, FA_INST_M, FA_INST_N, FA_INST_STAGES));
    __shared__ fa_ws_ring ring;
    /* The swizzle's 1024-byte period: tiles start on it (the descriptors' base offset 0). */
    unsigned char *smem_q = fa_smem + ((1024u - (fa_smem_addr(fa_smem) & 1023u)) & 1023u);
    unsigned char *smem_k = smem_q + FA_WS_Q_BYTES;
    unsigned char *smem_v = smem_k + FA_INST_STAGES * FA_WS_KV_BYTES;
    /* O's staging tile (smem_bytes.h): its own after the ring where the block walks work
     * tiles (the producer loads the next Q meanwhile), else the Q tile, whose rows each
     * consumer alone reads and is done with once its last S is. */
    unsigned char *smem_o = FA_WS_PERSISTENT(FA_INST_D) ? smem_v + FA_INST_STAGES * FA_WS_KV_BYTES : smem_q;

    /* The barriers, then the roles. Each role walks the work after taking its registers:
     * nothing computed before setmaxnreg may stay live across it (the producer's few
     * registers would force it into local memory). */
    if (threadIdx.x == 0) {
        fa_mbar_init(&ring.q_full, 1);
        fa_mbar_init(&ring.q_empty, FA_WS_CONSUMERS * 4);
        for (int i = 0; i < FA_INST_STAGES; ++i) {
            fa_mbar_init(&ring.k_full[i], 1);
            fa_mbar_init(&ring.v_full[i], 1);
            fa_mbar_init(&ring.k_empty[i], FA_WS_CONSUMERS * 4);
            fa_mbar_init(&ring.v_empty[i], FA_WS_CONSUMERS * 4);
        }
        fa_mbar_init(&ring.walk_full, 1);
        fa_mbar_init(&ring.walk_empty, FA_WS_CONSUMER_THREADS + 1);
        fa_mbar_init_fence();
    }
    __syncthreads();
    fa_wait_prior_grid(); /* the device check before this kernel wrote seq_ok */
    fa_allow_next_grid(); /* the combine may be scheduled; it waits for this grid's end */

    unsigned kv = 0, q_loads = 0; /* K/V tiles through the ring, Q tiles loaded */
    if (fa_warpgroup() == 0) {
        fa_regs_shrink(FA_WS_PRODUCER_REGS);
#if FA_WS_PERSISTENT(FA_INST_D)
        if (threadIdx.x == FA_WARP_SIZE)
            fa_ws_schedule(&args, &ring);
#endif
        if (threadIdx.x != 0)
            return;
        fa_tma_prefetch_map(maps.q);
        fa_tma_prefetch_map(maps.k);
        fa_tma_prefetch_map(maps.v);
        FA_WS_FOR_EACH_WORK_TILE(s) {
            if (!fa_ws_block_idle(&args, &s) && s.tile_hi > s.tile_lo) {
                fa_ws_produce(&args, &maps, &s, &ring, smem_q, smem_k, smem_v, kv, q_loads);
                kv += s.tile_hi - s.tile_lo;
                ++q_loads;
            }
            fa_mbar_arrive(&ring.walk_empty); /* its copies issued */
        }
        return;
    }
    fa_regs_grow(FA_WS_CONSUMER_REGS);
    const int consumer = fa_warpgroup() - 1;
    /* The first turn is consumer 0's: the last one passes it before its own first. */
    if (consumer == FA_WS_CONSUMERS - 1)
        fa_named_arrive(FA_WS_BAR_TURN + 0, 2 * FA_WARPGROUP_THREADS);
    FA_WS_FOR_EACH_WORK_TILE(s) {
        fa_mbar_arrive(&ring.walk_empty); /* read */
        if (fa_ws_block_idle(&args, &s))
            continue;
        fa_ws_consume(&args, &maps, &s, &ring, smem_q, smem_k, smem_v, smem_o, consumer, kv, q_loads);
        if (s.tile_hi > s.tile_lo) {
            kv += s.tile_hi - s.tile_lo;
            ++q_loads;
        }
    }
    /* The last consumer's last pass (or, with no products at all, the first one). */
    if (consumer == 0)
        fa_ws_turn_wait(0);
    /* The staging tile stays the block's until its last store has read it. */
    if (fa_warpgroup_thread() == 0)
        fa_bulk_wait_reads();
}
