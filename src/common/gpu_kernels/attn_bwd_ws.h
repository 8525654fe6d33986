/*
 * attn_bwd_ws.h - the warpgroup backward's dK/dV kernel (issue 14; sm_90a), written once
 * against the warpgroup vocabulary of src/cuda/fa_hopper.h: FlashAttention-3's backward
 * in the roles of the warpgroup forward (attn_fwd_ws.h). One translation unit includes it
 * once, after defining the instance (bws_instances.txt): FA_INST_D, FA_INST_M (query rows
 * streamed per step), FA_INST_N (keys the block keeps), FA_INST_WARPS (4 per warpgroup,
 * the producer's included), FA_INST_STAGES (Q/dO ring depth), FA_INST_BF16,
 * FA_INST_NAME, FA_INST_WARPGROUP 1. It defines FA_INST_NAME##_dkdv, launched like the
 * mma.sync dK/dV kernel (attn_bwd.h): a block per (key tile, KV head, batch).
 *
 * Roles. Warpgroup 0 is the producer: one thread loads the block's K and V tiles once by
 * TMA, then per step the Q and dO tiles of FA_INST_M query rows into a ring of
 * FA_INST_STAGES stages ("full" mbarriers the copies complete, "empty" ones the consumers
 * release), while its warp copies the step's LSE rows beside them and its third warp the
 * D rows; a thread of its second warp (in a deterministic call, one of its second and
 * one of its fourth, in turn) adds each step's dQ tile to the accumulator (below). Warpgroups
 * 1 .. FA_BWS_CONSUMERS each own 64 of the keys. A step is one query tile of one query
 * head of the GQA group (attn_bwd_parts.h's walk); in it each consumer computes
 *   Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ (wgmma, both operands in shared memory);
 *   Pᵀ and dSᵀ element by element (attn_bwd_parts.h: masks, softcap, ALiBi), packed as
 *   A operands in registers; dSᵀ is also stored to a shared [key][query] tile (dS to a
 *   [query][key] one where steps are not whole 64-row blocks, FA_BWS_DQ_T below);
 *   dV += Pᵀ·dO and dK += dSᵀ·Q (A from registers; dK before or after dQ, see Overlap);
 *   once every consumer's part of dSᵀ is stored, its share of the step's dQ = dS·K (dS
 *   read through its transpose: an MN-major A; or its head-dim columns of dQᵀ = Kᵀ·dSᵀ),
 *   staged in shared memory in the fp32
 *   accumulator's order (dq_accum.h: a tile of whole 16-row blocks is one contiguous
 *   stretch, and so is a sequence's last, partial tile, staged as the accumulator lays
 *   it out), which one thread of the producer's second warp adds to it with one bulk
 *   reduction (cp.reduce.async.bulk) while the consumers go on. The dQ conversion kernel
 *   turns the accumulator into dQ.
 * dK and dV stay in registers over every step and are written once, through the K and V
 * tiles: by TMA, or row by row where a key tile runs past its varlen sequence
 * (fa_bws_store_dkdv).
 *
 * Head-dim split (d192, d256; FA_BWS_SPLIT_D). A consumer's dK and dV over 64 keys and
 * the whole head dim would take 2 x 96 or 2 x 128 registers per thread, so both consumers
 * keep all 64 keys and split the head dim instead (FlashAttention-3's dKV_swapAB answers
 * the same limit with the transposed products): each computes Sᵀ and dPᵀ for its half of
 * the step's 64 queries (wgmma N = 32), stores its halves of Pᵀ and dSᵀ to shared tiles
 * (two of each, used in turn), and once both halves are there, its columns (128 each at
 * d256; 128 and 64 at d192, whole 64-column blocks) of dV += Pᵀ·dO, dK += dSᵀ·Q and
 * dQ = dS·K, every operand from shared memory (FA_WG_TROWS, FA_WG_DSK). At d192 the
 * step's dQ tile is staged for the bulk reduction as above (226 KiB of the 227 with it).
 * At d256, K, V, two Q/dO stages and the score tiles fill 226 KiB, which leaves no room
 * for a dQ buffer; the tile is staged in the step's own Q/dO stage instead, which it
 * fits exactly (M x D fp32), once both consumers' products are done with the stage, and
 * the stage goes back to the producer once the bulk reduction has read it
 * (FA_BWS_DQ_BUFFER). Vector atomics from registers, which it replaced, cost d192 a
 * factor 1.35-1.45 (bench/NOTES.md, b16; at d256 b18).
 *
 * Overlap. Inside a consumer, dV += Pᵀ·dO is issued as soon as P is known and runs while
 * dS is computed (where registers allow, FA_BWS_EARLY_DV, and without softcap, whose dS
 * needs tanh of the score), and dK while the consumer waits for the others' dSᵀ (d64) or,
 * issued after dQ, while it stages its dQ share (d128, FA_BWS_DQ_BEFORE_DK). Between
 * consumers, no barrier holds them in step: the dSᵀ tile has two buffers used in turn,
 * each with an mbarrier that opens dQ once every part is stored and one that frees the
 * buffer once every consumer's dQ read it, so one consumer's exponentials can run under
 * another's products.
 *
 * Deterministic calls (args.dq_order set) sum dQ the same way, in a fixed order: each
 * query tile's adds go from the highest key block that visits it down to the lowest. The
 * reducing thread waits, before its add, until the order row of the tile's first row says
 * the key block above has added its tile there (when that block visits the tile), and
 * after the add has completed, sets it to its own key block. Blocks take key
 * blocks from the last one down (fa_bws_block_of), so a block waits only on blocks
 * launched before it (no deadlock whatever the number resident, given that the hardware
 * dispatches blocks in order of their linear index, which CUDA does not promise but
 * FlashAttention-3's deterministic backward relies on too), and under a causal mask or a
 * window, where a higher key block's query tiles start later in the sequence, the block
 * above reaches a shared tile at an earlier step of its walk: the wait is the add's
 * latency, not a step. What a block's order costs is then its own wait for each add's
 * completion before the release; two keepers take the steps in turn, so that one waits
 * while the other reduces (FA_BWS_ORDERED_KEEPERS).
 *
 * Ragged calls (varlen, seqused_k). A fixed-length map ends with the sequence, and TMA
 * loads the rows past it as zeros; a varlen map is the packed tensor, whose rows after a
 * sequence are the next one's, and seqused_k's keys past it are unused cache; either may
 * hold anything, Inf included. The consumers zero those rows of the K and V tiles once per
 * block and of a Q/dO stage whose query tile ends past its sequence (fa_wg_zero_rows), so
 * that their products with masked, zero probabilities stay 0. dK and dV rows past
 * seqused_k are written as zeros (their keys are masked in every step); a key tile that
 * runs past its varlen sequence is stored by the consumers row by row, not by a TMA box
 * that would write the next sequence's rows (fa_bws_store_rows).
 */
#ifdef FA_ATTN_BWD_INCLUDED
#error "attn_bwd_ws.h instantiates one kernel per translation unit"
#endif
#define FA_ATTN_BWD_INCLUDED

#include "fa_device.h"
#if !FA_HAVE_WARPGROUP_MMA
#error "attn_bwd_ws.h needs the warpgroup vocabulary (FA_INST_WARPGROUP units, sm_90a)"
#endif
#include "gpu_kernels/attn_bwd_parts.h"
#include "gpu_kernels/wg_stage.h"

/* The products' descriptors stepped from the first k-step's (fa_wg_desc_step) at d128, as
 * the forward's (here even, the forward 1-3% faster; bench/NOTES.md ws7b); built per
 * k-step at the others. */
#define FA_BWS_STEPPED_DESCRIPTORS (FA_INST_D == 128)

/* Head dims above 128 split the head dim between the consumers (see "Head-dim split"
 * below): a consumer's dK and dV over the whole head dim would not fit its registers. */
#define FA_BWS_SPLIT_D (FA_INST_D > FA_BWS_UNSPLIT_MAX_D) /* smem_bytes.h */
#if FA_BWS_SPLIT_D
/* Literals: fa_hopper.h pastes them into the instructions' names. */
#define FA_BWS_CONSUMERS 2
#define FA_BWS_SCORE_QUERIES 32 /* queries of a consumer's Sᵀ: half of a 64-query step */
/* The consumers' head-dim columns, whole 64-column blocks (a descriptor starts on one):
 * halves at d256; at d192 consumer 0 takes 128 and consumer 1 the last 64, so that
 * consumer 0 holds d256's accumulators (which fit its registers) and neither splits a
 * block. FA_BWS_D_SHARE, the larger, sizes both consumers' accumulators. */
#if FA_INST_D == 256
#define FA_BWS_D_SHARE 128
#define FA_BWS_D_SHARE_LAST 128
#elif FA_INST_D == 192
#define FA_BWS_D_SHARE 128
#define FA_BWS_D_SHARE_LAST 64
#else
#error "the head-dim split is written for d192 and d256 (shares of whole 64-column blocks)"
#endif
#if FA_BWS_D_SHARE + FA_BWS_D_SHARE_LAST != FA_INST_D || FA_BWS_D_SHARE_LAST > FA_BWS_D_SHARE
#error "consumer 0's share is the larger and consumer 1's starts where it ends (d0 = FA_BWS_D_SHARE * consumer)"
#endif
#else
#define FA_BWS_CONSUMERS (FA_INST_N / 64)
#define FA_BWS_SCORE_QUERIES FA_INST_M
#define FA_BWS_D_SHARE FA_INST_D
#define FA_BWS_D_SHARE_LAST FA_INST_D
#endif
/* Where a step's dQ tile is staged for the keeper's bulk reduction: in a buffer of its
 * own where that fits (smem_bytes.h: up to d192), else (d256) in the step's own Q/dO stage
 * once every consumer's products are done with it. A tile of M x D fp32 is the size of the
 * two: its first M/2 rows go where Q was, the rest where dO was, each half one stretch of
 * the accumulator's layout. The stage then goes back to the producer from the keeper,
 * once the reduction has read it. */
#define FA_BWS_DQ_BUFFER (FA_INST_D <= FA_BWS_DQ_STAGED_MAX_D)
/* The dQ keepers of a deterministic call (fa_bws_keep_dq): two, lane 0 of the producer
 * warpgroup's second and fourth warps, so that one keeper's wait for its reduction's
 * completion (the release) runs under the other's reduction. Keeper j takes the steps
 * i = j (mod 2) and waits on its own barriers in consecutive phases only: with the dQ
 * buffer, dq_full[j]; with dQ staged in the stages (d256), its stage's. A default call
 * keeps one: two cost its d256 rows 4-9% (bench/NOTES.md, session 13, d4). */
#define FA_BWS_ORDERED_KEEPERS 2
#if !FA_BWS_DQ_BUFFER && FA_INST_STAGES != FA_BWS_ORDERED_KEEPERS
#error "with dQ staged in the stages, a keeper per stage"
#endif
/* Consumer 1's share differs from consumer 0's (d192): its products name their own N
 * (literals both: fa_hopper.h pastes them into the instructions' names). */
#define FA_BWS_UNEVEN_SHARES (FA_BWS_D_SHARE_LAST != FA_BWS_D_SHARE)
#define FA_BWS_CONSUMER_THREADS (FA_BWS_CONSUMERS * FA_WARPGROUP_THREADS)
#define FA_BWS_QF (FA_BWS_SCORE_QUERIES / FA_MMA_N) /* n-tiles of a warp's Sᵀ row slice (queries) */
#define FA_BWS_QK (FA_BWS_SCORE_QUERIES / FA_MMA_K) /* k-steps over those queries                 */
#define FA_BWS_DF (FA_BWS_D_SHARE / FA_MMA_N)       /* n-tiles of a warp's dK/dV row slice (the larger share's) */
#if FA_INST_BF16
#define FA_BWS_TYPE bf16
#else
#define FA_BWS_TYPE f16
#endif

#if FA_BWS_SPLIT_D
#if FA_INST_N != 64 || FA_INST_M != 64 || FA_INST_WARPS != 12
#error "a head-dim-split instance has 64 keys, 64-query steps and two consumers of whole 64-column blocks"
#endif
#elif FA_INST_N % 64 != 0 || FA_BWS_CONSUMERS < 1 || FA_INST_WARPS != 4 * (FA_BWS_CONSUMERS + 1)
#error "a warpgroup backward instance has 64 keys per consumer warpgroup and one producer warpgroup"
#endif
#if FA_INST_D % 64 != 0 || FA_INST_M % 16 != 0 || FA_INST_M > 256 || FA_INST_N > 256
#error "warpgroup tiles are whole 64-element column blocks, steps of whole 16-query k-steps, TMA boxes of at most 256 rows"
#endif

/* A step of query rows that are not whole 64-row blocks (d128's 80, FlashAttention-3's
 * non-causal d128 tile) does not fit wgmma's M of 64 as the rows of dQ = dS·K, so each
 * consumer computes its 64 head-dim columns of dQᵀ = Kᵀ·dSᵀ instead (FA3's dQ_swapAB):
 * dS is stored [query][key] (FA_WG_KTDS reads it K-major), and the dQ tile is staged and
 * accumulated in dq_accum.h's transposed order. */
#define FA_BWS_DQ_T FA_BWS_DQ_TRANSPOSED(FA_INST_M) /* smem_bytes.h: the host derives it there too */
#if FA_BWS_DQ_T && (FA_BWS_SPLIT_D || FA_INST_D != 128 || FA_INST_N != 128)
#error "steps of query rows that are not whole 64-row blocks are written for d128's 128 keys"
#endif

#if !FA_BWS_SPLIT_D
#if !FA_BWS_DQ_BUFFER
#error "the unsplit consumers stage dQ in a buffer of its own"
#endif
/* The consumers' shares of a step's dQ tile (FA_INST_M x D): 64-row blocks when there
 * are as many as consumers, else (64 query rows) head-dim columns, whole 64-column blocks
 * of K in either case (a descriptor starts on one). */
#if FA_BWS_DQ_T
/* N of the dQᵀ product: the step's queries; the consumers' shares, 64 head-dim columns each. */
#define FA_BWS_DQ_N FA_INST_M
#define FA_BWS_DQ_ROW_BLOCK(c) 0
#define FA_BWS_DQ_COL0(c) ((c) * 64)
#elif FA_INST_M == 64 * FA_BWS_CONSUMERS
#define FA_BWS_DQ_N FA_INST_D
#define FA_BWS_DQ_ROW_BLOCK(c) (c)
#define FA_BWS_DQ_COL0(c) 0
#elif FA_INST_M == 64 && FA_BWS_CONSUMERS == 2 && (FA_INST_D == 128 || FA_INST_D == 256)
/* A literal: fa_hopper.h pastes it into the instruction's name. */
#if FA_INST_D == 128
#define FA_BWS_DQ_N 64
#else
#define FA_BWS_DQ_N 128
#endif
#define FA_BWS_DQ_ROW_BLOCK(c) 0
#define FA_BWS_DQ_COL0(c) ((c) * FA_BWS_DQ_N)
#else
#error "the step's query rows are 64 per consumer, or 64 split by head-dim halves (d128, d256)"
#endif
#if FA_BWS_DQ_N % 64 != 0 && !FA_BWS_DQ_T
#error "a consumer's share of dQ must be whole 64-column blocks"
#endif
#endif /* !FA_BWS_SPLIT_D: the split's shares are its head-dim columns */

/* dV issued before dS is computed (see Overlap above) keeps Sᵀ, dPᵀ, P and both
 * accumulators live at once: 64 + 64 + 32 + 2 x 32 registers at d64's 128 query rows,
 * which spilled 48 bytes and serialized the products (ptxas C7512, nvcc 13.0); d128's 64
 * rows fit, its 80 (with dQᵀ's 40 more) serialized them again. */
#define FA_BWS_EARLY_DV (FA_INST_M == 64)

/* dQ issued before dK and staged while dK runs (FlashAttention-3's order) at d128: 3%
 * faster there. At d64, whose dK spans the step's 128 query rows, dK issued first and run
 * while the consumer waits for the others' dSᵀ measured 3-4% faster (bench/NOTES.md,
 * issue 14 b20). */
#define FA_BWS_DQ_BEFORE_DK (FA_INST_D == 128)

/* The consumers' named barriers (ids as in the forward, from 1): around dK and dV in the
 * K and V tiles (fa_bws_store_dkdv), and after zeroing rows of a tile that lie past a
 * sequence's end (fa_bws_zeroed). */
#define FA_BWS_END_BARRIER 1
#define FA_BWS_TAIL_BARRIER 2

/* The consumers' named barriers: with unequal shares each consumer runs its own inlined
 * copy (fa_bws_roles), so they reach a barrier from different instructions, which the
 * aligned form does not allow (synccheck). */
FA_DEVICE void fa_bws_consumers_sync(int id)
{
    if (FA_BWS_UNEVEN_SHARES)
        fa_named_sync_apart(id, FA_BWS_CONSUMER_THREADS);
    else
        fa_named_sync(id, FA_BWS_CONSUMER_THREADS);
}

/* Register budgets of the roles (setmaxnreg), as in the forward with two consumers. */
#if FA_BWS_CONSUMERS == 2
#define FA_BWS_PRODUCER_REGS 24
#define FA_BWS_CONSUMER_REGS 240
#else
#error "warpgroup backward instances have two consumer warpgroups"
#endif
#if FA_WARPGROUP_THREADS * (FA_BWS_PRODUCER_REGS + FA_BWS_CONSUMERS * FA_BWS_CONSUMER_REGS) > \
    FA_THREADS * FA_WS_REGS_PER_THREAD(FA_THREADS)
#error "the roles' register budgets exceed the block's registers at launch"
#endif

/* Bytes of one 64-column block of a tile of `rows` rows, and of whole tiles. */
#define FA_BWS_BLOCK(rows) ((rows) * 128)
#define FA_BWS_KV_BYTES (FA_INST_D / 64 * FA_BWS_BLOCK(FA_INST_N))
#define FA_BWS_Q_BYTES (FA_INST_D / 64 * FA_BWS_BLOCK(FA_INST_M))
#define FA_BWS_DS_BYTES (2 * FA_INST_M * FA_INST_N)
/* Pᵀ tiles beside the dSᵀ ones: only the head-dim split reads P from shared memory. */
#define FA_BWS_PT_BUFFERS (FA_BWS_SPLIT_D ? 2 : 0)
/* The block's mbarriers. kv: the K and V tiles (one arrival and their bytes); full: the
 * bytes of Q and dO and the 64 arrivals of the producer's two row-copying warps, after
 * their LSE and D stores;
 * empty: one arrival per consumer warp once its products are done with the stage (with
 * dQ staged in the stage, the keeper's one, once the reduction has read it).
 * ds_full / ds_free, per dSᵀ buffer: every consumer thread arrives once its part of dSᵀ
 * is stored, and once its dQ product (which reads every part) is done. dq_full, per
 * keeper (of its steps): every consumer thread, its part of the dQ tile staged; dq_free:
 * the reducing keeper, once the bulk reduction has read the tile (FA_BWS_DQ_BUFFER; the
 * next step is staged only then, so the keepers' arrivals come in step order). With dQ
 * staged in the stage, per stage: drained, one arrival per consumer warp once its
 * products are done with it (the consumers wait for each other's before they write dQ
 * there), and dq_staged as dq_full. */
typedef struct fa_bws_ring {
    uint64_t kv_full;
    uint64_t full[FA_INST_STAGES], empty[FA_INST_STAGES];
    uint64_t ds_full[2], ds_free[2];
    uint64_t dq_full[FA_BWS_ORDERED_KEEPERS], dq_free;
    uint64_t drained[FA_INST_STAGES], dq_staged[FA_INST_STAGES];
} fa_bws_ring;

/* The shared tiles at constant offsets from the first 1024-byte boundary of the dynamic
 * shared memory (the swizzle's period; fa_bws_tiles): one pointer to keep, which the
 * producer warpgroup's 24 registers afford. LSE, D and dQ are fp32. */
#define FA_BWS_V_AT FA_BWS_KV_BYTES
#define FA_BWS_Q_AT (2 * FA_BWS_KV_BYTES)                             /* [stages] */
#define FA_BWS_DO_AT (FA_BWS_Q_AT + FA_INST_STAGES * FA_BWS_Q_BYTES)  /* [stages] */
#define FA_BWS_DS_AT (FA_BWS_DO_AT + FA_INST_STAGES * FA_BWS_Q_BYTES) /* [2]      */
#define FA_BWS_PT_AT (FA_BWS_DS_AT + 2 * FA_BWS_DS_BYTES)             /* [FA_BWS_PT_BUFFERS] */
#define FA_BWS_LSE_AT (FA_BWS_PT_AT + FA_BWS_PT_BUFFERS * FA_BWS_DS_BYTES) /* [stages][FA_INST_M] */
#define FA_BWS_DELTA_AT (FA_BWS_LSE_AT + 4 * FA_INST_STAGES * FA_INST_M)
#define FA_BWS_DQ_AT (FA_BWS_DELTA_AT + 4 * FA_INST_STAGES * FA_INST_M) /* M x D, dq_accum.h's; FA_BWS_DQ_BUFFER */
/* Without the buffer: where stage st's dQ rows below FA_INST_M / 2 (upper 0: Q's place)
 * or from there on (upper 1: dO's) are staged. */
#define FA_BWS_DQ_HALF_AT(st, upper) (((upper) ? FA_BWS_DO_AT : FA_BWS_Q_AT) + (st) * FA_BWS_Q_BYTES)
/* The layout ends within what the launch gives (smem_bytes.h's rule, which keeps 1024
 * bytes for the alignment of the first tile): the two are written apart. */
#if FA_BWS_DQ_AT + (FA_BWS_DQ_BUFFER ? 4 * FA_INST_M * FA_INST_D : 0) + 1024 > \
    FA_BWS_SMEM_BYTES(FA_INST_D, FA_INST_M, FA_INST_N, FA_INST_STAGES)
#error "the warpgroup backward's shared tiles outgrow FA_BWS_SMEM_BYTES"
#endif

FA_DEVICE unsigned char *fa_bws_tiles(unsigned char *smem)
{
    return smem + ((1024u - (fa_smem_addr(smem) & 1023u)) & 1023u);
}
FA_DEVICE float *fa_bws_rows(unsigned char *tiles, int at, int stage)
{
    return (float *)(tiles + at) + stage * FA_INST_M;
}

/* The block's key tile and what it visits (fa_bws_find_block). */
typedef struct fa_bws_block {
    int active;     /* 0: no key rows, past the last pair of a folded grid, or a bad sequence */
    int batch, kv_head, n0;
    int map_batch;  /* the maps' batch coordinate: 0 in a varlen call (one packed entry)       */
    int keys_valid; /* keys of the block that count (seqused_k applied)                        */
    int rows_out;   /* rows of dK and dV the block writes: its keys in the operands            */
    int steps;      /* query tiles x heads of the GQA group                                    */
    fa_sequence seq;
    fa_bwd_key_block visits;
    long long q_global_row0;
} fa_bws_block;

/* The key block and pair this block takes (launch_grid.h's fa_bws_block_order, in
 * sections of pairs under a mask or in a deterministic call); in a deterministic call the
 * key blocks of each pair from the last down (see the header). */
FA_DEVICE void fa_bws_block_of(const fa_bwd_args *args, int *key_block, unsigned *kv_head, unsigned *batch)
{
    const unsigned long long linear =
        blockIdx.x + (unsigned long long)gridDim.x * (blockIdx.y + (unsigned long long)gridDim.y * blockIdx.z);
    const int sectioned = args->dq_order || args->fwd.window_left >= 0 || args->fwd.window_right >= 0;
    unsigned k, pair;
    fa_bws_block_order(linear, gridDim.x, gridDim.y * gridDim.z, fa_bws_section_pairs(gridDim.x, sectioned), &k,
                       &pair);
    *key_block = args->dq_order ? (int)(gridDim.x - 1 - k) : (int)k;
    fa_grid_pair(pair % gridDim.y, pair / gridDim.y, gridDim.y, (unsigned)args->fwd.heads_k,
                 (unsigned)args->fwd.batch, kv_head, batch);
}

/* A block past seqused_k (keys_valid 0, rows_out > 0) is active with no steps: it writes
 * its rows of dK and dV as zeros. `ragged` (varlen or seqused_k) is a constant of each
 * inlined copy: without it every sequence has the call's lengths and starts at row 0 of
 * its batch entry. */
FA_DEVICE void fa_bws_describe_block(const fa_bwd_args *args, int ragged, fa_bws_block *b)
{
    const fa_fwd_args *f = &args->fwd;
    unsigned kv_head, batch;
    int key_block;
    fa_bws_block_of(args, &key_block, &kv_head, &batch);
    b->batch = (int)batch;
    b->kv_head = (int)kv_head;
    b->n0 = key_block * FA_INST_N;
    b->map_batch = ragged && f->cu_seqlens_q ? 0 : b->batch;
    b->seq.batch = b->batch;
    b->seq.q_row0 = 0;
    b->seq.k_row0 = 0;
    b->seq.seqlen_q = f->seqlen_q;
    b->seq.seqlen_k = f->seqlen_k;
    if (ragged)
        b->seq = fa_find_sequence(f, b->batch);
    const int key_rows = ragged ? fa_key_rows(f, b->batch) : f->seqlen_k;
    b->active = b->n0 < key_rows && b->batch != f->batch && !fa_sequence_bad(f, b->batch);
    b->keys_valid = max(min(FA_INST_N, b->seq.seqlen_k - b->n0), 0);
    b->rows_out = min(FA_INST_N, key_rows - b->n0);
    b->visits = fa_bwd_key_block_at(f, &b->seq, b->n0, b->keys_valid, FA_INST_N, FA_INST_M);
    b->steps = b->active ? f->heads / f->heads_k * b->visits.m_tiles : 0;
    b->q_global_row0 = ragged ? fa_global_q_row0(f, b->batch, b->seq.q_row0) : (long long)b->batch * f->seqlen_q;
}

/* d256's dQ keeper (two bulk reductions a step, fa_bws_reduce_dq) reads its block from
 * shared memory in every call: in the producer's 24 registers its fixed-length copy
 * spilled 12-20 bytes. Up to d192 it derives it, as the consumers do: read from shared
 * memory there, the d64 and d192 defaults ran 1-4% slower in one run (bench/NOTES.md, b18). */
#define FA_BWS_KEEPER_READS_SHARED (!FA_BWS_DQ_BUFFER)

/* A role's view of the block. In a fixed-length call it is derived from the parameters
 * and blockIdx alone, into `own`, which the compiler derives again where it is used rather
 * than keeping it in registers through the loop (the consumers have none to spare: ptxas
 * spilled them otherwise). In a ragged call the lengths come from cu_seqlens and
 * seqused_k, which it could not derive again: thread 0 found the block once into shared
 * memory (the kernel, before the roles split), from where each use loads it after the
 * loop's barriers; so it does in a fixed-length call for d256's dQ keeper
 * (FA_BWS_KEEPER_READS_SHARED) and a deterministic call's keepers (fa_bws_keep_dq). */
FA_DEVICE const fa_bws_block *fa_bws_find_block(const fa_bwd_args *args, const fa_bws_block *shared, int ragged,
                                                fa_bws_block *own)
{
    if (ragged)
        return shared;
    fa_bws_describe_block(args, 0, own);
    return own;
}

FA_DEVICE fa_bwd_cursor fa_bws_first_step(const fa_fwd_args *f, const fa_bws_block *b)
{
    const int head = b->kv_head * (f->heads / f->heads_k);
    fa_bwd_cursor c = {head, b->visits.m_first, fa_head_row(f, head, 0)};
    return c;
}

/* The first row of the step's query tile among the [heads][total_q] rows (LSE, D, the dQ
 * accumulator and the order flags). */
FA_DEVICE long long fa_bws_step_row(const fa_bws_block *b, const fa_bwd_cursor *at)
{
    return at->head_row + b->q_global_row0 + at->tile * FA_INST_M;
}
/* The step's query rows in its sequence: FA_INST_M but at a sequence's last tile. */
FA_DEVICE int fa_bws_step_rows(const fa_bws_block *b, const fa_bwd_cursor *at)
{
    return min(FA_INST_M, b->seq.seqlen_q - at->tile * FA_INST_M);
}

FA_DEVICE void fa_bws_next_step(const fa_fwd_args *f, const fa_bws_block *b, fa_bwd_cursor *c)
{
    fa_bwd_cursor_next(c, b->visits.m_first, b->visits.m_first + b->visits.m_tiles, f->total_q);
}
FA_DEVICE void fa_bws_skip_steps(const fa_fwd_args *f, const fa_bws_block *b, fa_bwd_cursor *c, int steps)
{
    for (int i = 0; i < steps; ++i)
        fa_bws_next_step(f, b, c);
}

/* A tile of `rows` rows at (row, head, batch) of an operand's map, as D / 64 boxes of 64
 * columns into consecutive column blocks, on one barrier. */
FA_DEVICE void fa_bws_load(unsigned char *dst, const void *map, int rows, int head, long long row, int batch,
                           uint64_t *bar)
{
#pragma unroll
    for (int blk = 0; blk < FA_INST_D / 64; ++blk)
        fa_tma_load_4d(dst + blk * FA_BWS_BLOCK(rows), map, 64 * blk, head, (int)row, batch, bar);
}

/* A warp's copy of one step's fp32 row values (LSE or D, [heads][total_q]) beside the
 * stage: rows past the sequence's end are 0 (those elements are masked:
 * fa_bwd_key_block_at). */
#if FA_INST_M % FA_WARP_SIZE != 0
/* Unrolled, the copy of 80 rows (a last pass of 16 lanes) spilled 16 bytes of the
 * producer's 24 registers. */
#define FA_BWS_COPY_ROWS_UNROLL _Pragma("unroll 1")
#else
#define FA_BWS_COPY_ROWS_UNROLL
#endif
FA_DEVICE void fa_bws_copy_rows(float *dst, const float *src, long long row, int m0, int seqlen_q)
{
    FA_BWS_COPY_ROWS_UNROLL
    for (int r = fa_lane(); r < FA_INST_M; r += FA_WARP_SIZE)
        dst[r] = m0 + r < seqlen_q ? src[row + r] : 0.f;
}

/* The producer's first and third warps: each step's stage once the consumers released its
 * previous use. The first warp's lane 0 loads K and V once, and each step's Q and dO
 * tiles; the first warp copies the LSE rows, the third the D rows (one warp's loads of
 * both need more than the role's 24 registers). */
FA_DEVICE void fa_bws_produce(const fa_bwd_args *args, const fa_tma_maps *maps, const fa_bws_block *shared,
                              int ragged, fa_bws_ring *ring, unsigned char *tiles, int copies_tiles)
{
    const fa_fwd_args *f = &args->fwd;
    fa_bws_block own;
    const fa_bws_block *b = fa_bws_find_block(args, shared, ragged, &own);
    if (!b->active || b->steps == 0)
        return;
    const int issues = copies_tiles && fa_lane() == 0;
    if (issues) {
        fa_tma_prefetch_map(maps->q);
        fa_tma_prefetch_map(maps->dout);
        fa_mbar_arrive_expect_tx(&ring->kv_full, 2 * FA_BWS_KV_BYTES);
        const long long k_row = b->seq.k_row0 + b->n0;
        fa_bws_load(tiles, maps->k, FA_INST_N, b->kv_head, k_row, b->map_batch, &ring->kv_full);
        fa_bws_load(tiles + FA_BWS_V_AT, maps->v, FA_INST_N, b->kv_head, k_row, b->map_batch, &ring->kv_full);
    }
    fa_bwd_cursor at = fa_bws_first_step(f, b);
    for (int i = 0; i < b->steps; ++i) {
        const int st = i % FA_INST_STAGES, m0 = at.tile * FA_INST_M;
        if (i >= FA_INST_STAGES)
            fa_mbar_wait(&ring->empty[st], ((i / FA_INST_STAGES) & 1) ^ 1);
        if (issues) { /* the copies first: the row loads below wait on memory */
            fa_mbar_expect_tx(&ring->full[st], 2 * FA_BWS_Q_BYTES);
            const long long q_row = b->seq.q_row0 + m0;
            fa_bws_load(tiles + FA_BWS_Q_AT + st * FA_BWS_Q_BYTES, maps->q, FA_INST_M, at.head, q_row, b->map_batch,
                        &ring->full[st]);
            fa_bws_load(tiles + FA_BWS_DO_AT + st * FA_BWS_Q_BYTES, maps->dout, FA_INST_M, at.head, q_row,
                        b->map_batch, &ring->full[st]);
        }
        const long long row = fa_bws_step_row(b, &at);
        if (copies_tiles)
            fa_bws_copy_rows(fa_bws_rows(tiles, FA_BWS_LSE_AT, st), args->lse_log2, row, m0, b->seq.seqlen_q);
        else
            fa_bws_copy_rows(fa_bws_rows(tiles, FA_BWS_DELTA_AT, st), args->delta, row, m0, b->seq.seqlen_q);
        fa_mbar_arrive(&ring->full[st]);
        fa_bws_next_step(f, b, &at);
    }
}

/* In a deterministic call, the first query tile this block shares with the key block
 * above it, which adds its dQ tiles there first; INT_MAX when it shares none or the call
 * is not deterministic. The tiles a key block visits are a range whose both ends never
 * move down from one key block to the next (masks are bands), so the block above visits
 * every tile of this block's from that one on, and no key block further up visits a tile
 * it does not. */
FA_DEVICE int fa_bws_first_tile_after_above(const fa_bwd_args *args, const fa_bws_block *b)
{
    const int n0 = b->n0 + FA_INST_N;
    if (!args->dq_order || n0 >= b->seq.seqlen_k)
        return INT_MAX;
    const fa_bwd_key_block above =
        fa_bwd_key_block_at(&args->fwd, &b->seq, n0, min(FA_INST_N, b->seq.seqlen_k - n0), FA_INST_N, FA_INST_M);
    return above.m_tiles > 0 ? above.m_first : INT_MAX;
}

/* A deterministic call's order flag of the query tile whose first row is `row` holds
 * k + 1 once key block k has added its dQ tile there; then the value this block waits
 * for there (the block above's) and the one it sets. */
FA_DEVICE int *fa_bws_order_flag(const fa_bwd_args *args, long long row)
{
    return args->dq_order + row;
}
FA_DEVICE int fa_bws_above_added(const fa_bws_block *b) { return b->n0 / FA_INST_N + 2; }
FA_DEVICE int fa_bws_keepers(const fa_bwd_args *args) { return args->dq_order ? FA_BWS_ORDERED_KEEPERS : 1; }
FA_DEVICE int fa_bws_own_added(const fa_bws_block *b) { return b->n0 / FA_INST_N + 1; }

/* The step's staged dQ tile (its valid rows x the head dim as the accumulator lays them
 * out, fa_bws_stage_dq) into the accumulator at `dst` by bulk reduction, once the
 * consumers staged it; the place it was staged in freed once read: the dQ buffer
 * (dq_free), or the step's stage (empty), half a tile where Q was and half where dO was. */
FA_DEVICE void fa_bws_reduce_dq(fa_bws_ring *ring, unsigned char *tiles, int step, int keepers, float *dst,
                                int rows, int head_dim)
{
#if FA_BWS_DQ_BUFFER
    fa_mbar_wait(&ring->dq_full[step % keepers], (step / keepers) & 1);
    fa_bulk_reduce_add_f32(dst, tiles + FA_BWS_DQ_AT, 4u * (unsigned)(rows * head_dim));
    fa_bulk_commit();
    fa_bulk_wait_reads();
    fa_mbar_arrive(&ring->dq_free);
#else
    const int st = step % FA_INST_STAGES;
    const unsigned bytes = 4u * (unsigned)(rows * head_dim), half = 2u * (unsigned)(FA_INST_M * head_dim);
    fa_mbar_wait(&ring->dq_staged[st], (step / FA_INST_STAGES) & 1);
    fa_bulk_reduce_add_f32(dst, tiles + FA_BWS_DQ_HALF_AT(st, 0), min(bytes, half));
    if (bytes > half)
        fa_bulk_reduce_add_f32((float *)((char *)dst + half), tiles + FA_BWS_DQ_HALF_AT(st, 1), bytes - half);
    fa_bulk_commit();
    fa_bulk_wait_reads();
    fa_mbar_arrive(&ring->empty[st]);
#endif
}

/* Keeper `keeper` of `keepers` (FA_BWS_ORDERED_KEEPERS), over its steps i = keeper (mod
 * keepers): in a deterministic call it waits for the key block above first (see the
 * header), then reduces the step's dQ tile (fa_bws_reduce_dq), so the polling of global
 * memory stays off the consumers. In a deterministic call it then publishes the step once
 * the reduction is complete (the release cumulates what the mbarrier ordered before it,
 * as CUTLASS's generic barrier does after a block barrier; the other keeper's reduction
 * meanwhile in flight), and looks at its next step's flag while that completes: the
 * look's round trip to L2 would otherwise come after the release, every step, on the way
 * to the next reduction (b17, bench/NOTES.md). */
FA_DEVICE void fa_bws_keep_dq_steps(const fa_bwd_args *args, const fa_bws_block *shared, int reads_shared,
                                    fa_bws_ring *ring, unsigned char *tiles, int keeper, int keepers)
{
    const fa_fwd_args *f = &args->fwd;
    fa_bws_block own;
    const fa_bws_block *b = fa_bws_find_block(args, shared, reads_shared, &own);
    if (!b->active)
        return;
    const int wait_from = fa_bws_first_tile_after_above(args, b);
    fa_bwd_cursor at = fa_bws_first_step(f, b);
    fa_bws_skip_steps(f, b, &at, keeper);
    int above_seen = 0;
    for (int i = keeper; i < b->steps; i += keepers) {
        const long long row = fa_bws_step_row(b, &at);
        if (above_seen)
            fa_flag_seen();
        else if (at.tile >= wait_from)
            fa_flag_wait_acquire(fa_bws_order_flag(args, row), fa_bws_above_added(b));
        fa_bws_reduce_dq(ring, tiles, i, keepers, args->dq_accum + row * f->head_dim, fa_bws_step_rows(b, &at),
                         f->head_dim);
        fa_bws_skip_steps(f, b, &at, keepers);
        if (args->dq_order) {
            const int *look = i + keepers < b->steps && at.tile >= wait_from
                                  ? fa_bws_order_flag(args, fa_bws_step_row(b, &at))
                                  : NULL;
            above_seen = fa_flag_release_bulk(fa_bws_order_flag(args, row), fa_bws_own_added(b), look) ==
                         fa_bws_above_added(b);
        }
    }
    fa_bulk_wait_all();
}

/* The keepers, each copy with constant arguments: a default call's one keeper (its
 * block derived but in ragged calls and at d256); a deterministic call's two, which read
 * their block from shared memory (deriving it beside a run-time stride spilled 44 bytes
 * of the producer's 24 registers). */
FA_DEVICE void fa_bws_keep_dq(const fa_bwd_args *args, const fa_bws_block *shared, int ragged, fa_bws_ring *ring,
                              unsigned char *tiles, int keeper)
{
    if (args->dq_order)
        fa_bws_keep_dq_steps(args, shared, 1, ring, tiles, keeper, FA_BWS_ORDERED_KEEPERS);
    else if (keeper == 0)
        fa_bws_keep_dq_steps(args, shared, ragged || FA_BWS_KEEPER_READS_SHARED, ring, tiles, 0, 1);
}

/* A warp's 16 rows of its dQ share (ntiles n-tiles of FA_MMA_N columns from d0, a
 * constant at each call; rows from row0 of the step's `rows`) into the staged tile at
 * shared address `tile`, laid out as the
 * accumulator lays out those rows for the call's head dim (dq_accum.h: whole 16-row
 * blocks in fragment order, a last partial block row-major), so that the tile's valid
 * part is one stretch of rows x head_dim floats. */
FA_DEVICE void fa_bws_stage_dq(uint32_t tile, int row0, int d0, const float (*acc)[FA_ACC_REGS], int rows,
                               int head_dim, int ntiles)
{
    const int lane = fa_lane();
    if (rows == FA_INST_M && head_dim == FA_INST_D) { /* every tile but a sequence's last */
#pragma unroll
        for (int nf = 0; nf < ntiles; ++nf)
            fa_store_shared_f32x4(
                tile + 4u * (uint32_t)(fa_dq_accum_tile(0, row0, d0 + nf * FA_MMA_N, FA_INST_D, FA_MMA_M) +
                                       lane * FA_ACC_REGS),
                acc[nf]);
        return;
    }
    const int whole = fa_dq_accum_fragment_order(row0, rows, head_dim, FA_MMA_M, FA_MMA_N);
#pragma unroll
    for (int nf = 0; nf < ntiles; ++nf) {
        const int col_block = d0 + nf * FA_MMA_N;
        if (col_block >= head_dim)
            continue;
        if (whole) {
            fa_store_shared_f32x4(
                tile + 4u * (uint32_t)(fa_dq_accum_tile(0, row0, col_block, head_dim, FA_MMA_M) + lane * FA_ACC_REGS),
                acc[nf]);
            continue;
        }
#pragma unroll
        for (int r = 0; r < FA_ACC_REGS; ++r) {
            const int row = row0 + fa_acc_row(lane, r), col = col_block + fa_acc_col(lane, r);
            if (row < rows)
                fa_store_shared_f32(tile + 4u * (uint32_t)(row * head_dim + col), acc[nf][r]);
        }
    }
}

/* With dQᵀ (FA_BWS_DQ_T): a warp's 16 head-dim columns of it from col0 (n-tile nf: the
 * step's queries 8 nf .. 8 nf + 7) into the staged tile, in dq_accum.h's transposed
 * order, so that the tile's valid part is again one stretch of rows x head_dim floats:
 * a 16-byte store per n-tile in whole row blocks, the elements of a last partial one
 * row-major; columns past the call's head dim (an instance wider than the call's) are
 * not the accumulator's. */
FA_DEVICE void fa_bws_stage_dq_t(uint32_t tile, int col0, const float (*acc)[FA_ACC_REGS], int rows, int head_dim)
{
    const int lane = fa_lane();
    if (rows == FA_INST_M && head_dim == FA_INST_D) { /* every tile but a sequence's last */
#pragma unroll
        for (int nf = 0; nf < FA_INST_M / FA_MMA_N; ++nf)
            fa_store_shared_f32x4(
                tile + 4u * (uint32_t)(fa_dq_accum_tile_t(0, FA_MMA_M * (nf / 2), nf % 2, col0, FA_INST_D, FA_MMA_M,
                                                          FA_MMA_N) +
                                       lane * FA_ACC_REGS),
                acc[nf]);
        return;
    }
    if (col0 >= head_dim)
        return;
#pragma unroll
    for (int nf = 0; nf < FA_INST_M / FA_MMA_N; ++nf) {
        const int row_block = FA_MMA_M * (nf / 2), h = nf % 2;
        if (fa_dq_accum_fragment_order_t(row_block, rows, head_dim, FA_MMA_M)) {
            fa_store_shared_f32x4(
                tile + 4u * (uint32_t)(fa_dq_accum_tile_t(0, row_block, h, col0, head_dim, FA_MMA_M, FA_MMA_N) +
                                       lane * FA_ACC_REGS),
                acc[nf]);
            continue;
        }
#pragma unroll
        for (int r = 0; r < FA_ACC_REGS; ++r) {
            const int row = FA_MMA_N * nf + fa_acc_col(lane, r), col = col0 + fa_acc_row(lane, r);
            if (row < rows && col < head_dim)
                fa_store_shared_f32(tile + 4u * (uint32_t)(row * head_dim + col), acc[nf][r]);
        }
    }
}

/* The warp's dQ share staged (fa_bws_stage_dq, or fa_bws_stage_dq_t for dQᵀ), made
 * visible to the bulk reduction and reported to the keeper (`staged`: dq_full or the
 * stage's dq_staged). */
FA_DEVICE void fa_bws_hand_dq(uint64_t *staged, uint32_t tile, int row0, int d0, const float (*acc)[FA_ACC_REGS],
                              int rows, int head_dim, int ntiles)
{
#if FA_BWS_DQ_T
    fa_bws_stage_dq_t(tile, d0, acc, rows, head_dim); /* d0: the warp's first column of dQᵀ's 16 */
#else
    fa_bws_stage_dq(tile, row0, d0, acc, rows, head_dim, ntiles);
#endif
    fa_fence_async_smem();
    fa_mbar_arrive(staged);
}

/* A consumer warp is done reading a stage: its lane 0 arrives (the warpgroup's wgmma
 * wait, which every lane passed, covers the reads). */
FA_DEVICE void fa_bws_release(uint64_t *empty)
{
    __syncwarp();
    if (fa_lane() == 0)
        fa_mbar_arrive(empty);
}

/* A warp's 16 rows of dSᵀ or Pᵀ (its A operands, ds[ks]: queries col0 + 16 ks .. + 15)
 * into the shared [key][query] tile, rows from key_row0 (with FA_BWS_DQ_T, dS into the
 * [query][key] tile: its 16 columns from key_row0). Register j of an A operand holds two
 * adjacent queries of row (j & 1) * 8 + lane / 4, at column 8 * (j / 2) + 2 * (lane % 4)
 * of its k-step (the mma.sync A layout, fa_acc_pair_to_a). */
FA_DEVICE void fa_bws_store_ds(unsigned char *tile, int key_row0, int col0, const uint32_t ds[FA_BWS_QK][FA_A_REGS])
{
    const int lane = fa_lane();
#if FA_BWS_DQ_T
    /* dS itself, [query][key] (FA_WG_KTDS's K-major B): each register's 8 x 8 matrix stored
     * transposed, a k-step one stmatrix; lane 8 j + r gives query row r of matrix j, the
     * 16-byte chunk of its 8 keys in the swizzled row. */
    const int query = col0 + 8 * (lane >> 4) + (lane & 7), key = key_row0 + 8 * ((lane >> 3) & 1);
    const uint32_t at = fa_smem_addr(tile);
#pragma unroll
    for (int ks = 0; ks < FA_BWS_QK; ++ks)
        fa_stmatrix_x4_trans(at + fa_wg_tile_offset(FA_INST_M, query + 16 * ks, key), ds[ks][0], ds[ks][1], ds[ks][2],
                             ds[ks][3]);
#else
#pragma unroll
    for (int ks = 0; ks < FA_BWS_QK; ++ks)
#pragma unroll
        for (int j = 0; j < FA_A_REGS; ++j) {
            const int row = key_row0 + (j & 1) * 8 + lane / 4, col = col0 + 16 * ks + 8 * (j / 2) + 2 * (lane % 4);
            *(uint32_t *)(tile + fa_wg_tile_offset(FA_INST_N, row, col)) = ds[ks][j];
        }
#endif
}

/* A warp's score tile of one step (attn_bwd_parts.h): its 16 keys from key_row0 of the
 * block, the step's queries from col0. Opaque: what the masks derive from the row and the
 * lengths is derived again at each step, not hoisted out of the loop into registers the
 * consumers do not have. */
FA_DEVICE fa_bwd_tile fa_bws_step_tile(const fa_bws_block *b, int key_row0, int m0, int col0)
{
    fa_bwd_tile t;
    t.row0 = b->n0 + key_row0;
    t.col0 = col0;
    t.seqlen_q = b->seq.seqlen_q;
    t.seqlen_k = b->seq.seqlen_k;
    t.keys_are_rows = 1;
    t.masked = m0 < b->visits.full_lo || m0 > b->visits.full_hi - FA_INST_M;
    fa_opaque_int(t.row0);
    fa_opaque_int(t.seqlen_q);
    fa_opaque_int(t.seqlen_k);
    return t;
}

/* The step's head's ALiBi slope in log2 units, 0 without ALiBi. */
FA_DEVICE float fa_bws_alibi_log2(const fa_fwd_args *f, const fa_bws_block *b, const fa_bwd_cursor *at)
{
    return f->alibi_slopes ? f->alibi_slopes[b->batch * f->alibi_batch + at->head] * FA_LOG2E : 0.f;
}

/* Rows `from` .. rows - 1 of a loaded tile of `rows` rows set to zero by the consumers
 * together (see Ragged calls in the header); fa_bws_zeroed, once a step's zeroing is
 * done, makes it visible to wgmma's reads and waits for every consumer's. */
FA_DEVICE void fa_bws_zero_rows(unsigned char *tile, int rows, int from)
{
    fa_wg_zero_rows(tile, rows, from, FA_INST_D / 64, (int)threadIdx.x - FA_WARPGROUP_THREADS,
                    FA_BWS_CONSUMER_THREADS);
}
FA_DEVICE void fa_bws_zeroed(void)
{
    fa_fence_async_smem();
    fa_bws_consumers_sync(FA_BWS_TAIL_BARRIER);
}

/* A consumer's dK and dV start at zero; it waits for K and V when the block has steps, and
 * in a ragged call zeroes their rows past the keys that count. */
FA_DEVICE void fa_bws_consumer_start(const fa_fwd_args *f, fa_bws_ring *ring, const fa_bws_block *b, int ragged,
                                     unsigned char *tiles, float (*acc_dk)[FA_ACC_REGS], float (*acc_dv)[FA_ACC_REGS])
{
    fa_bwd_zero(acc_dk, FA_BWS_DF);
    fa_bwd_zero(acc_dv, FA_BWS_DF);
    if (b->steps == 0)
        return;
    fa_mbar_wait(&ring->kv_full, 0);
    if (ragged && b->keys_valid < FA_INST_N) {
        fa_bws_zero_rows(tiles, FA_INST_N, b->keys_valid);
        fa_bws_zero_rows(tiles + FA_BWS_V_AT, FA_INST_N, b->keys_valid);
        fa_bws_zeroed();
    }
}

/* In a varlen call, the rows of a step's Q and dO stages past the sequence's end (the
 * next sequence's) set to zero; both consumers take every step, so both come here. */
FA_DEVICE void fa_bws_zero_query_tail(const fa_fwd_args *f, const fa_bws_block *b, int ragged, unsigned char *tiles,
                                      int st, int m0)
{
    if (!ragged || !f->cu_seqlens_q || m0 <= b->seq.seqlen_q - FA_INST_M)
        return;
    fa_bws_zero_rows(tiles + FA_BWS_Q_AT + st * FA_BWS_Q_BYTES, FA_INST_M, b->seq.seqlen_q - m0);
    fa_bws_zero_rows(tiles + FA_BWS_DO_AT + st * FA_BWS_Q_BYTES, FA_INST_M, b->seq.seqlen_q - m0);
    fa_bws_zeroed();
}

/* Rows 0 .. rows - 1 of a staged tile (fa_wg_tile_offset's layout) to `dst`, rows
 * row_stride elements apart, columns below the head dim, 16 bytes per consumer thread and
 * instruction. */
FA_DEVICE void fa_bws_store_rows(unsigned short *dst, long long row_stride, const unsigned char *tile, int rows,
                                 int head_dim)
{
    const int chunks = FA_INST_D / 8; /* per row */
    for (int i = (int)threadIdx.x - FA_WARPGROUP_THREADS; i < rows * chunks; i += FA_BWS_CONSUMER_THREADS) {
        const int row = i / chunks, col = 8 * (i % chunks);
        if (col < head_dim)
            *(uint4 *)(dst + row * row_stride + col) =
                *(const uint4 *)(tile + fa_wg_tile_offset(FA_INST_N, row, col));
    }
}

/* dK (times the softmax scale) and dV out by TMA (the dispatcher runs this family only
 * where their maps can be made). K and V are dead once every consumer's last products
 * are done (a barrier: a consumer reads the others' rows or columns of them), so each
 * warp writes its 16 rows of dK and dV, head-dim columns from d0, into the K and V
 * tiles in the layout their maps load (fa_wg_stage_acc), and after
 * a second barrier one thread stores both (a box per 64 columns; TMA drops the rows past
 * the map's end, a fixed-length sequence's, and the columns past the head dim) and keeps
 * the block until the copy engine has read them. The direct stores, 4 bytes per lane
 * over 8 rows per instruction, sat at every block's end (bench/NOTES.md, issue 14 b10).
 * A key tile that runs past its varlen sequence, where the box would write the next
 * sequence's rows, is stored by the consumers' threads instead, its rows_out rows only.
 * `ntiles`: the warp's n-tiles of dK and dV, a constant at each call. */
FA_DEVICE void fa_bws_store_dkdv(const fa_bwd_args *args, const fa_tma_maps *maps, const fa_bws_block *b,
                                 int ragged, unsigned char *tiles, int key_row0, int d0,
                                 const float (*acc_dk)[FA_ACC_REGS], const float (*acc_dv)[FA_ACC_REGS], int ntiles)
{
    const uint32_t k_tile = fa_smem_addr(tiles), v_tile = k_tile + FA_BWS_V_AT;
    float dk_scale[FA_ACC_ROWS], dv_scale[FA_ACC_ROWS];
#pragma unroll
    for (int g = 0; g < FA_ACC_ROWS; ++g) {
        dk_scale[g] = args->scale;
        dv_scale[g] = 1.f;
    }
    fa_bws_consumers_sync(FA_BWS_END_BARRIER);
    fa_wg_stage_acc(k_tile, FA_INST_N, key_row0, d0, acc_dk, ntiles, dk_scale);
    fa_wg_stage_acc(v_tile, FA_INST_N, key_row0, d0, acc_dv, ntiles, dv_scale);
    const long long k_row = b->seq.k_row0 + b->n0;
    if (ragged && args->fwd.cu_seqlens_q && b->rows_out < FA_INST_N) {
        fa_bws_consumers_sync(FA_BWS_END_BARRIER);
        fa_bws_store_rows((unsigned short *)args->dk + fa_row_at(&args->dk_layout, b->batch, k_row, b->kv_head),
                          args->dk_layout.row, tiles, b->rows_out, args->fwd.head_dim);
        fa_bws_store_rows((unsigned short *)args->dv + fa_row_at(&args->dv_layout, b->batch, k_row, b->kv_head),
                          args->dv_layout.row, tiles + FA_BWS_V_AT, b->rows_out, args->fwd.head_dim);
        return;
    }
    fa_fence_async_smem();
    fa_bws_consumers_sync(FA_BWS_END_BARRIER);
    if (threadIdx.x != FA_WARPGROUP_THREADS)
        return;
#pragma unroll
    for (int blk = 0; blk < FA_INST_D / 64; ++blk) {
        fa_tma_store_4d(maps->dk, tiles + blk * FA_BWS_BLOCK(FA_INST_N), 64 * blk, b->kv_head, (int)k_row,
                        b->map_batch);
        fa_tma_store_4d(maps->dv, tiles + FA_BWS_V_AT + blk * FA_BWS_BLOCK(FA_INST_N), 64 * blk, b->kv_head,
                        (int)k_row, b->map_batch);
    }
    fa_bulk_commit();
    fa_bulk_wait_reads();
}

#if !FA_BWS_SPLIT_D
/* fa_bws_consume's step, over its registers: dK += dSᵀ·Q and this consumer's share of dQ =
 * dS·K issued, each a commit group (in the order FA_BWS_DQ_BEFORE_DK says), and the dQ
 * share handed to the keeper once done. */
#define FA_BWS_ISSUE_DK()                                                                             \
    do {                                                                                              \
        fa_wg_pin(&acc_dk[0][0], FA_BWS_DF * FA_ACC_REGS);                                            \
        fa_wg_pin_u32(&ds[0][0], FA_BWS_QK * FA_A_REGS);                                              \
        fa_wg_fence();                                                                                \
        FA_WG_PV(FA_INST_M, FA_INST_D, FA_BWS_TYPE, &acc_dk[0][0], ds, q_stage, FA_BWS_STEPPED_DESCRIPTORS); \
        fa_wg_commit();                                                                               \
    } while (0)
#if FA_BWS_DQ_T
#define FA_BWS_DQ_PRODUCT()                                                                           \
    FA_WG_KTDS(FA_BWS_DQ_N, FA_INST_N, FA_BWS_TYPE, &acc_dq[0][0], k_addr + FA_BWS_BLOCK(FA_INST_N) * (dq_col0 / 64), \
               ds_buf, FA_BWS_BLOCK(FA_INST_M))
#else
#define FA_BWS_DQ_PRODUCT()                                                                           \
    FA_WG_DSK(FA_BWS_DQ_N, FA_INST_N, FA_BWS_TYPE, &acc_dq[0][0],                                     \
              ds_buf + FA_BWS_BLOCK(FA_INST_N) * FA_BWS_DQ_ROW_BLOCK(consumer), FA_BWS_BLOCK(FA_INST_N),   \
              k_addr + FA_BWS_BLOCK(FA_INST_N) * (dq_col0 / 64))
#endif
#define FA_BWS_ISSUE_DQ()                                                                             \
    do {                                                                                              \
        fa_wg_pin(&acc_dq[0][0], FA_BWS_DQ_N / FA_MMA_N * FA_ACC_REGS);                               \
        fa_wg_fence();                                                                                \
        FA_BWS_DQ_PRODUCT();                                                                          \
        fa_wg_commit();                                                                               \
    } while (0)
/* The warp's part of the consumer's share: 16 rows of it, or with dQᵀ 16 head-dim columns. */
#if FA_BWS_DQ_T
#define FA_BWS_WARP_DQ_ROW0 dq_row0 /* 0: every row */
#define FA_BWS_WARP_DQ_COL0 (dq_col0 + FA_MMA_M * warp_in_group)
#else
#define FA_BWS_WARP_DQ_ROW0 (dq_row0 + FA_MMA_M * warp_in_group)
#define FA_BWS_WARP_DQ_COL0 dq_col0
#endif
#define FA_BWS_HAND_DQ()                                                                              \
    fa_bws_hand_dq(&ring->dq_full[i % fa_bws_keepers(args)], k_addr + FA_BWS_DQ_AT, FA_BWS_WARP_DQ_ROW0,  \
                   FA_BWS_WARP_DQ_COL0, acc_dq, fa_bws_step_rows(b, &at), f->head_dim, FA_BWS_DQ_N / FA_MMA_N)

/* One consumer warpgroup's block: every step's five products, its share of dQ staged for
 * the bulk reduction, then dK and dV. */
FA_DEVICE void fa_bws_consume(const fa_bwd_args *args, const fa_tma_maps *maps, const fa_bws_block *shared,
                              int ragged, fa_bws_ring *ring, unsigned char *tiles, int consumer)
{
    const fa_fwd_args *f = &args->fwd;
    fa_bws_block own;
    const fa_bws_block *b = fa_bws_find_block(args, shared, ragged, &own);
    if (!b->active)
        return;
    const int warp_in_group = fa_warp() % 4;
    const int key_row0 = 64 * consumer + FA_MMA_M * warp_in_group; /* this warp's 16 keys */
    const uint32_t k_addr = fa_smem_addr(tiles), v_addr = k_addr + FA_BWS_V_AT;
    const uint32_t q_addr = k_addr + FA_BWS_Q_AT, do_addr = k_addr + FA_BWS_DO_AT, ds_addr = k_addr + FA_BWS_DS_AT;
    /* This consumer's 64 rows of K and V as A operands, and its share of dQ. */
    const uint32_t k_rows_addr = k_addr + FA_BWS_BLOCK(64) * consumer;
    const uint32_t v_rows_addr = v_addr + FA_BWS_BLOCK(64) * consumer;
    const int dq_row0 = 64 * FA_BWS_DQ_ROW_BLOCK(consumer), dq_col0 = FA_BWS_DQ_COL0(consumer);

    float acc_dk[FA_BWS_DF][FA_ACC_REGS], acc_dv[FA_BWS_DF][FA_ACC_REGS];
    fa_bws_consumer_start(f, ring, b, ragged, tiles, acc_dk, acc_dv);
    fa_bwd_cursor at = fa_bws_first_step(f, b);
    for (int i = 0; i < b->steps; ++i) {
        const int st = i % FA_INST_STAGES, m0 = at.tile * FA_INST_M;
        const uint32_t q_stage = q_addr + st * FA_BWS_Q_BYTES, do_stage = do_addr + st * FA_BWS_Q_BYTES;
        const int buf = i & 1, use = i >> 1; /* the buffer's use count so far */
        const uint32_t ds_buf = ds_addr + buf * FA_BWS_DS_BYTES;
        float acc_s[FA_BWS_QF][FA_ACC_REGS], acc_dp[FA_BWS_QF][FA_ACC_REGS];
        fa_mbar_wait(&ring->full[st], (i / FA_INST_STAGES) & 1);
        fa_bws_zero_query_tail(f, b, ragged, tiles, st, m0);

        /* Sᵀ and dPᵀ, a commit group each. */
        fa_wg_pin(&acc_s[0][0], FA_BWS_QF * FA_ACC_REGS);
        fa_wg_pin(&acc_dp[0][0], FA_BWS_QF * FA_ACC_REGS);
        fa_wg_fence();
        FA_WG_QK(FA_INST_M, FA_INST_D, FA_BWS_TYPE, &acc_s[0][0], k_rows_addr, FA_BWS_BLOCK(FA_INST_N), q_stage,
                 FA_BWS_STEPPED_DESCRIPTORS);
        fa_wg_commit();
        FA_WG_QK(FA_INST_M, FA_INST_D, FA_BWS_TYPE, &acc_dp[0][0], v_rows_addr, FA_BWS_BLOCK(FA_INST_N), do_stage,
                 FA_BWS_STEPPED_DESCRIPTORS);
        fa_wg_commit();

        /* Pᵀ, then dV += Pᵀ·dO issued, then dSᵀ under it. */
        const fa_bwd_tile t = fa_bws_step_tile(b, key_row0, m0, m0);
        const float alibi_log2 = fa_bws_alibi_log2(f, b, &at);
        const float *lse = fa_bws_rows(tiles, FA_BWS_LSE_AT, st), *delta = fa_bws_rows(tiles, FA_BWS_DELTA_AT, st);
        const int together = !FA_BWS_EARLY_DV || f->softcap_log2 > 0.f; /* P and dS in one pass */
        fa_wg_wait(1);
        fa_wg_pin(&acc_s[0][0], FA_BWS_QF * FA_ACC_REGS);
        if (together) {
            fa_wg_wait(0);
            fa_wg_pin(&acc_dp[0][0], FA_BWS_QF * FA_ACC_REGS);
            fa_bwd_grad_scores(acc_s, acc_dp, 1, FA_BWS_QF, &t, f, alibi_log2, NULL, lse, NULL, delta);
        } else {
            fa_bwd_probs(acc_s, FA_BWS_QF, &t, f, alibi_log2, lse);
        }
        uint32_t p[FA_BWS_QK][FA_A_REGS], ds[FA_BWS_QK][FA_A_REGS];
#pragma unroll
        for (int ks = 0; ks < FA_BWS_QK; ++ks)
            fa_acc_to_a(p[ks], acc_s, ks);
        fa_wg_pin(&acc_dv[0][0], FA_BWS_DF * FA_ACC_REGS);
        fa_wg_pin_u32(&p[0][0], FA_BWS_QK * FA_A_REGS);
        fa_wg_fence();
        FA_WG_PV(FA_INST_M, FA_INST_D, FA_BWS_TYPE, &acc_dv[0][0], p, do_stage, FA_BWS_STEPPED_DESCRIPTORS);
        fa_wg_commit();
        fa_wg_wait(1); /* dPᵀ is done; dV may still run */
        fa_wg_pin(&acc_dp[0][0], FA_BWS_QF * FA_ACC_REGS);
        if (!together)
            fa_bwd_dscores(acc_s, acc_dp, FA_BWS_QF, delta);
#pragma unroll
        for (int ks = 0; ks < FA_BWS_QK; ++ks)
            fa_acc_to_a(ds[ks], acc_dp, ks);

        /* dSᵀ to its buffer (free once every consumer's dQ of two steps ago is done); once
         * every part is stored, this consumer's share of dQ = dS·K; dK += dSᵀ·Q before it
         * (running while the consumer waits for the others' parts) or after it (running
         * while dQ is staged), as FA_BWS_DQ_BEFORE_DK says. */
        if (use > 0)
            fa_mbar_wait(&ring->ds_free[buf], (use & 1) ^ 1);
        fa_bws_store_ds(tiles + FA_BWS_DS_AT + buf * FA_BWS_DS_BYTES, key_row0, 0, ds);
        fa_fence_async_smem();
        fa_mbar_arrive(&ring->ds_full[buf]);
        float acc_dq[FA_BWS_DQ_N / FA_MMA_N][FA_ACC_REGS];
#if FA_BWS_DQ_BEFORE_DK
        fa_mbar_wait(&ring->ds_full[buf], use & 1);
#if FA_BWS_DQ_T
        /* dV done first: its P registers are what dQᵀ's 40 more need (ptxas C7512 else). */
        fa_wg_wait(0);
        fa_wg_pin(&acc_dv[0][0], FA_BWS_DF * FA_ACC_REGS);
#endif
        FA_BWS_ISSUE_DQ();
        FA_BWS_ISSUE_DK();
        fa_wg_wait(1); /* dV and dQ are done; dK runs on */
        fa_wg_pin(&acc_dv[0][0], FA_BWS_DF * FA_ACC_REGS);
        fa_wg_pin(&acc_dq[0][0], FA_BWS_DQ_N / FA_MMA_N * FA_ACC_REGS);
        fa_mbar_arrive(&ring->ds_free[buf]);
        if (i > 0) /* the tile staged at the last step has been read */
            fa_mbar_wait(&ring->dq_free, (i & 1) ^ 1);
        FA_BWS_HAND_DQ();
        fa_wg_wait(0);
        fa_wg_pin(&acc_dk[0][0], FA_BWS_DF * FA_ACC_REGS);
        fa_bws_release(&ring->empty[st]);
#else
        FA_BWS_ISSUE_DK();
        fa_mbar_wait(&ring->ds_full[buf], use & 1);
        if (i > 0) /* the tile staged at the last step has been read */
            fa_mbar_wait(&ring->dq_free, (i & 1) ^ 1);
        FA_BWS_ISSUE_DQ();
        fa_wg_wait(0);
        fa_wg_pin(&acc_dk[0][0], FA_BWS_DF * FA_ACC_REGS);
        fa_wg_pin(&acc_dv[0][0], FA_BWS_DF * FA_ACC_REGS);
        fa_wg_pin(&acc_dq[0][0], FA_BWS_DQ_N / FA_MMA_N * FA_ACC_REGS);
        fa_mbar_arrive(&ring->ds_free[buf]);
        fa_bws_release(&ring->empty[st]);
        FA_BWS_HAND_DQ();
#endif
        fa_bws_next_step(f, b, &at);
    }

    fa_bws_store_dkdv(args, maps, b, ragged, tiles, key_row0, 0, acc_dk, acc_dv, FA_BWS_DF);
}
#else /* FA_BWS_SPLIT_D */
/* A consumer's head-dim columns under the split: a constant in each of its inlined copies
 * (fa_bws_roles). */
FA_DEVICE int fa_bws_d_share(int consumer)
{
    return consumer ? FA_BWS_D_SHARE_LAST : FA_BWS_D_SHARE;
}

/* A step's dQ share (`ntiles` n-tiles from column d0, a constant at each call) staged for
 * the keeper's bulk reduction: in the dQ buffer once the last step's tile has been read
 * (FA_BWS_DQ_BUFFER, d192), as the unsplit consumers do; else (d256) in the step's stage
 * once both consumers' products are done with it, rows below M/2 where Q was and the rest
 * where dO was (fa_bws_reduce_dq). */
FA_DEVICE void fa_bws_stage_dq_share(fa_bws_ring *ring, const fa_bws_block *b, const fa_bwd_cursor *at, int step,
                                     int keepers, uint32_t tiles_addr, int d0, const float (*acc)[FA_ACC_REGS],
                                     int ntiles, int head_dim)
{
    const int rows = fa_bws_step_rows(b, at), row0 = FA_MMA_M * (fa_warp() % 4);
#if FA_BWS_DQ_BUFFER
    if (step > 0)
        fa_mbar_wait(&ring->dq_free, (step & 1) ^ 1);
    fa_bws_hand_dq(&ring->dq_full[step % keepers], tiles_addr + FA_BWS_DQ_AT, row0, d0, acc, rows, head_dim, ntiles);
#else
    const int st = step % FA_INST_STAGES, half = FA_INST_M / 2;
    fa_mbar_wait(&ring->drained[st], (step / FA_INST_STAGES) & 1);
    const uint32_t tile = row0 < half ? tiles_addr + FA_BWS_DQ_HALF_AT(st, 0)
                                      : tiles_addr + FA_BWS_DQ_HALF_AT(st, 1) - 4u * (uint32_t)(half * head_dim);
    fa_bws_hand_dq(&ring->dq_staged[st], tile, row0, d0, acc, rows, head_dim, ntiles);
#endif
}

/* fa_bws_consume's products under the split over a consumer's SHARE head-dim columns from
 * d0 (a literal, per consumer): dQ first, staged in the dQ buffer while dV and dK run
 * (FA_BWS_DQ_BUFFER; in the stage it waits for both consumers' products). */
#define FA_BWS_SHARE_PRODUCTS(SHARE)                                                                  \
    do {                                                                                              \
        fa_wg_fence();                                                                                \
        FA_WG_DSK(SHARE, FA_INST_N, FA_BWS_TYPE, &acc_dq[0][0], ds_buf, FA_BWS_BLOCK(FA_INST_N),        \
                  k_addr + FA_BWS_BLOCK(FA_INST_N) * (d0 / 64));                                        \
        fa_wg_commit();                                                                               \
        FA_WG_TROWS(SHARE, FA_INST_M, FA_BWS_TYPE, &acc_dv[0][0], pt_buf,                               \
                    do_stage + FA_BWS_BLOCK(FA_INST_M) * (d0 / 64), FA_BWS_BLOCK(FA_INST_M));           \
        FA_WG_TROWS(SHARE, FA_INST_M, FA_BWS_TYPE, &acc_dk[0][0], ds_buf,                               \
                    q_stage + FA_BWS_BLOCK(FA_INST_M) * (d0 / 64), FA_BWS_BLOCK(FA_INST_M));            \
        fa_wg_commit();                                                                               \
        if (FA_BWS_DQ_BUFFER) {                                                                       \
            fa_wg_wait(1);                                                                            \
            fa_wg_pin(&acc_dq[0][0], FA_BWS_DF * FA_ACC_REGS);                                        \
            fa_bws_stage_dq_share(ring, b, &at, i, fa_bws_keepers(args), k_addr, d0, acc_dq,          \
                                  (SHARE) / FA_MMA_N, f->head_dim);                                   \
        }                                                                                             \
    } while (0)

/* One consumer warpgroup's block under the head-dim split: per step the scores of its
 * half of the queries (Sᵀ and dPᵀ over all 64 keys), Pᵀ and dSᵀ stored for both
 * consumers, then its head-dim share of dV += Pᵀ·dO, dK += dSᵀ·Q and dQ = dS·K, all three
 * from shared memory; dK and dV written once at the end. */
FA_DEVICE void fa_bws_consume(const fa_bwd_args *args, const fa_tma_maps *maps, const fa_bws_block *shared,
                              int ragged, fa_bws_ring *ring, unsigned char *tiles, int consumer)
{
    const fa_fwd_args *f = &args->fwd;
    fa_bws_block own;
    const fa_bws_block *b = fa_bws_find_block(args, shared, ragged, &own);
    if (!b->active)
        return;
    const int key_row0 = FA_MMA_M * (fa_warp() % 4); /* this warp's 16 keys */
    const int q0 = FA_BWS_SCORE_QUERIES * consumer, d0 = FA_BWS_D_SHARE * consumer;
    const uint32_t k_addr = fa_smem_addr(tiles), v_addr = k_addr + FA_BWS_V_AT;
    const uint32_t q_addr = k_addr + FA_BWS_Q_AT, do_addr = k_addr + FA_BWS_DO_AT;

    float acc_dk[FA_BWS_DF][FA_ACC_REGS], acc_dv[FA_BWS_DF][FA_ACC_REGS];
    fa_bws_consumer_start(f, ring, b, ragged, tiles, acc_dk, acc_dv);
    fa_bwd_cursor at = fa_bws_first_step(f, b);
    for (int i = 0; i < b->steps; ++i) {
        const int st = i % FA_INST_STAGES, m0 = at.tile * FA_INST_M;
        const uint32_t q_stage = q_addr + st * FA_BWS_Q_BYTES, do_stage = do_addr + st * FA_BWS_Q_BYTES;
        const int buf = i & 1, use = i >> 1; /* the buffers' use count so far */
        const uint32_t ds_buf = k_addr + FA_BWS_DS_AT + buf * FA_BWS_DS_BYTES;
        const uint32_t pt_buf = k_addr + FA_BWS_PT_AT + buf * FA_BWS_DS_BYTES;
        float acc_s[FA_BWS_QF][FA_ACC_REGS], acc_dp[FA_BWS_QF][FA_ACC_REGS];
        fa_mbar_wait(&ring->full[st], (i / FA_INST_STAGES) & 1);
        fa_bws_zero_query_tail(f, b, ragged, tiles, st, m0);

        fa_wg_pin(&acc_s[0][0], FA_BWS_QF * FA_ACC_REGS);
        fa_wg_pin(&acc_dp[0][0], FA_BWS_QF * FA_ACC_REGS);
        fa_wg_fence();
        FA_WG_QK_SLICE(FA_BWS_SCORE_QUERIES, FA_INST_D, FA_BWS_TYPE, &acc_s[0][0], k_addr, FA_BWS_BLOCK(FA_INST_N),
                       q_stage + 128u * q0, FA_BWS_BLOCK(FA_INST_M), FA_BWS_STEPPED_DESCRIPTORS);
        FA_WG_QK_SLICE(FA_BWS_SCORE_QUERIES, FA_INST_D, FA_BWS_TYPE, &acc_dp[0][0], v_addr, FA_BWS_BLOCK(FA_INST_N),
                       do_stage + 128u * q0, FA_BWS_BLOCK(FA_INST_M), FA_BWS_STEPPED_DESCRIPTORS);
        fa_wg_commit();

        const fa_bwd_tile t = fa_bws_step_tile(b, key_row0, m0, m0 + q0);
        const float alibi_log2 = fa_bws_alibi_log2(f, b, &at);
        const float *lse = fa_bws_rows(tiles, FA_BWS_LSE_AT, st) + q0;
        const float *delta = fa_bws_rows(tiles, FA_BWS_DELTA_AT, st) + q0;
        fa_wg_wait(0);
        fa_wg_pin(&acc_s[0][0], FA_BWS_QF * FA_ACC_REGS);
        fa_wg_pin(&acc_dp[0][0], FA_BWS_QF * FA_ACC_REGS);
        fa_bwd_grad_scores(acc_s, acc_dp, 1, FA_BWS_QF, &t, f, alibi_log2, NULL, lse, NULL, delta);
        uint32_t p[FA_BWS_QK][FA_A_REGS], ds[FA_BWS_QK][FA_A_REGS];
#pragma unroll
        for (int ks = 0; ks < FA_BWS_QK; ++ks) {
            fa_acc_to_a(p[ks], acc_s, ks);
            fa_acc_to_a(ds[ks], acc_dp, ks);
        }

        /* Both halves of Pᵀ and dSᵀ into this step's buffers (free once both consumers'
         * products of two steps ago are done), then the three products over all of them. */
        if (use > 0)
            fa_mbar_wait(&ring->ds_free[buf], (use & 1) ^ 1);
        fa_bws_store_ds(tiles + FA_BWS_PT_AT + buf * FA_BWS_DS_BYTES, key_row0, q0, p);
        fa_bws_store_ds(tiles + FA_BWS_DS_AT + buf * FA_BWS_DS_BYTES, key_row0, q0, ds);
        fa_fence_async_smem();
        fa_mbar_arrive(&ring->ds_full[buf]);
        fa_mbar_wait(&ring->ds_full[buf], use & 1);
        float acc_dq[FA_BWS_DF][FA_ACC_REGS];
        fa_wg_pin(&acc_dv[0][0], FA_BWS_DF * FA_ACC_REGS);
        fa_wg_pin(&acc_dk[0][0], FA_BWS_DF * FA_ACC_REGS);
        fa_wg_pin(&acc_dq[0][0], FA_BWS_DF * FA_ACC_REGS);
        if (FA_BWS_UNEVEN_SHARES && consumer)
            FA_BWS_SHARE_PRODUCTS(FA_BWS_D_SHARE_LAST);
        else
            FA_BWS_SHARE_PRODUCTS(FA_BWS_D_SHARE);
        fa_wg_wait(0);
        fa_wg_pin(&acc_dv[0][0], FA_BWS_DF * FA_ACC_REGS);
        fa_wg_pin(&acc_dk[0][0], FA_BWS_DF * FA_ACC_REGS);
        fa_mbar_arrive(&ring->ds_free[buf]);
        if (FA_BWS_DQ_BUFFER) {
            fa_bws_release(&ring->empty[st]);
        } else {
            fa_wg_pin(&acc_dq[0][0], FA_BWS_DF * FA_ACC_REGS);
            fa_bws_release(&ring->drained[st]);
            fa_bws_stage_dq_share(ring, b, &at, i, fa_bws_keepers(args), k_addr, d0, acc_dq,
                                  fa_bws_d_share(consumer) / FA_MMA_N, f->head_dim);
        }
        fa_bws_next_step(f, b, &at);
    }

    fa_bws_store_dkdv(args, maps, b, ragged, tiles, key_row0, d0, acc_dk, acc_dv, fa_bws_d_share(consumer) / FA_MMA_N);
}
#endif /* FA_BWS_SPLIT_D */

/* The roles of a block's warpgroups, in one inlined copy per value of `ragged` (the
 * kernel picks one per call): the fixed-length copy derives the block from its
 * parameters, the ragged one reads it from shared memory (`block`) and zeroes tails. */
FA_DEVICE void fa_bws_roles(const fa_bwd_args *args, const fa_tma_maps *maps, const fa_bws_block *block,
                            int ragged, fa_bws_ring *ring, unsigned char *tiles)
{
    if (fa_warpgroup() == 0) {
        fa_regs_shrink(FA_BWS_PRODUCER_REGS);
        if (fa_warp() == 0 || fa_warp() == 2)
            fa_bws_produce(args, maps, block, ragged, ring, tiles, fa_warp() == 0);
        else if (fa_lane() == 0 && (fa_warp() == 1 || fa_warp() == 3))
            fa_bws_keep_dq(args, block, ragged, ring, tiles, fa_warp() == 3);
        return;
    }
    fa_regs_grow(FA_BWS_CONSUMER_REGS);
    /* Unequal shares: each consumer its own inlined copy, its products' N a constant (one
     * copy with both sizes of products on the same accumulators serialized its wgmma,
     * ptxas C7511). */
    if (!FA_BWS_UNEVEN_SHARES)
        fa_bws_consume(args, maps, block, ragged, ring, tiles, fa_warpgroup() - 1);
    else if (fa_warpgroup() == 1)
        fa_bws_consume(args, maps, block, ragged, ring, tiles, 0);
    else
        fa_bws_consume(args, maps, block, ragged, ring, tiles, 1);
}

extern "C" FA_GLOBAL void __launch_bounds__(FA_THREADS, 1)
    FA_CAT(FA_INST_NAME, _dkdv)(fa_bwd_args args, const __grid_constant__ fa_tma_maps maps)
{
    FA_DYNAMIC_SMEM(fa_smem, FA_BWS_SMEM_BYTES(FA_INST_D, FA_INST_M, FA_INST_N, FA_INST_STAGES));
    __shared__ fa_bws_ring ring;
    __shared__ fa_bws_block block; /* fa_bws_find_block, fa_bws_keep_dq */
    const int ragged = args.fwd.cu_seqlens_q || args.fwd.seqused_k;

    if (threadIdx.x == 0) {
        if (ragged || FA_BWS_KEEPER_READS_SHARED || args.dq_order)
            fa_bws_describe_block(&args, ragged, &block);
        fa_mbar_init(&ring.kv_full, 1);
        for (int i = 0; i < FA_INST_STAGES; ++i) {
            fa_mbar_init(&ring.full[i], 2 * FA_WARP_SIZE);
            fa_mbar_init(&ring.empty[i], FA_BWS_DQ_BUFFER ? FA_BWS_CONSUMERS * 4 : 1);
            fa_mbar_init(&ring.drained[i], FA_BWS_CONSUMERS * 4);
            fa_mbar_init(&ring.dq_staged[i], FA_BWS_CONSUMER_THREADS);
        }
        for (int i = 0; i < 2; ++i) {
            fa_mbar_init(&ring.ds_full[i], FA_BWS_CONSUMER_THREADS);
            fa_mbar_init(&ring.ds_free[i], FA_BWS_CONSUMER_THREADS);
        }
        for (int i = 0; i < FA_BWS_ORDERED_KEEPERS; ++i)
            fa_mbar_init(&ring.dq_full[i], FA_BWS_CONSUMER_THREADS);
        fa_mbar_init(&ring.dq_free, 1);
        fa_mbar_init_fence();
    }
    __syncthreads();
    if (ragged)
        fa_bws_roles(&args, &maps, &block, 1, &ring, fa_bws_tiles(fa_smem));
    else
        fa_bws_roles(&args, &maps, &block, 0, &ring, fa_bws_tiles(fa_smem));
}
