/*
 * attn_fwd.h - the forward attention kernel, written once for every vendor against the
 * device vocabulary of fa_device.h (src/cuda or src/hip). One translation unit includes
 * it once, after defining the instance:
 *   FA_INST_D (head dim), FA_INST_M x FA_INST_N (query x key tile), FA_INST_WARPS,
 *   FA_INST_STAGES (K/V buffers), FA_INST_BF16 (else fp16), FA_INST_NAME (kernel name),
 *   FA_INST_PACK_GQA (1: the decode family, below; else 0 or undefined),
 *   FA_INST_Q_IN_REGS (defined: the Q-in-registers family, below).
 *
 * Algorithm (FlashAttention-2): the Q tile stays in shared memory; K/V tiles stream
 * through FA_INST_STAGES shared buffers with asynchronous copies; each warp owns
 * FA_INST_M / FA_INST_WARPS query rows; S = Q·Kᵀ on the matrix units; masking only on
 * tiles that straddle a mask edge (fully masked tiles are never visited); online softmax
 * in the exp2 domain with the scale folded in; P stays in registers for O += P·V; O and
 * LSE are written once (or, with split-KV, fp32 partials for the combine kernel).
 * Blocks: query tiles along grid x, (head, batch * splits + split) pairs laid over y and
 * z by launch_grid.h.
 *
 * The decode family (FA_INST_PACK_GQA, dec_instances.txt) packs the G = heads / heads_k
 * query heads of a GQA group and the query positions into one tile of G * s_q rows,
 * head fastest (packed row r is position r / G of query head kv * G + r % G, FA3's
 * PackGQA order), so each K/V tile is read once per KV head instead of once per query
 * head; blocks are then (kv head, batch * splits + split) pairs. Masks and ALiBi work on
 * the row's position and head. It also reads paged K/V (args.block_table): logical key
 * j of a sequence is row j % page_size of page block_table[batch][j / page_size] of the
 * k and v pools, whose batch stride is the stride between pages; page_size is a multiple
 * of 16 (the API's rule; the host's own one-page tables round up to whole key tiles).
 *
 * The Q-in-registers family (FA_INST_Q_IN_REGS, qreg_instances.txt; AMD CDNA) loads each
 * wave's Q fragments from global memory into registers once, before the key loop, and
 * gives shared memory to K and V alone: a 256-query tile of eight waves then shares every
 * K/V tile in 64 KiB of LDS, where Q in LDS would take it all. V is stored transposed
 * ([d][key]) as its held copy goes to LDS, so P·V reads four consecutive keys at once
 * instead of gathering them. The vendor runs this family on its widest matrix shape
 * (src/hip: 32 x 32 x 8). Its waves run as two groups in ping-pong (FA_PING_PONG below):
 * one group's matrix products while the other computes its softmax.
 */
#ifdef FA_ATTN_FWD_INCLUDED
#error "attn_fwd.h instantiates one kernel per translation unit"
#endif
#define FA_ATTN_FWD_INCLUDED
#ifndef FA_INST_PACK_GQA
#define FA_INST_PACK_GQA 0
#endif
#if defined(FA_INST_Q_IN_REGS)
#define FA_Q_IN_REGS 1
#else
#define FA_Q_IN_REGS 0
#endif

#include "fa_device.h"
/* The decode family streams K/V and little else: where its copies go through registers
 * on wave64 (CDNA) and it does not hold the next tile (FA_DEC_HELD, below), a thread
 * issues a whole K or V tile's loads (up to 16 chunks, 64 registers) before it stores
 * them (attn_tile.h, FA_COPY_BATCH); wave32 lanes hold twice the chunks, and RDNA's
 * decode kernels had no registers to spare (dec_instances.txt). */
#if FA_INST_PACK_GQA && FA_SYNC_COPIES && FA_WARP_SIZE == 64
#define FA_COPY_BATCH 16
#endif
#include "gpu_kernels/attn_args.h"
#include "gpu_kernels/attn_sequence.h"
#include "gpu_kernels/attn_tile.h"
#include "gpu_kernels/check_report.h"
#include "api/mask.h"

/* The decode family gives each warp 16 rows; when the tile has fewer rows than warps x
 * 16, FA_KEY_WARPS warps share a row group, each on its own slice of every key tile with
 * its own softmax state, merged at the end (fa_merge_key_warps; each warp merges and
 * writes its share of O's columns): a 16-row decode tile then still has several warps
 * issuing per block (one warp alone is latency-bound on its own instruction stream,
 * measured: bench/NOTES.md). The prefill family: 1. */
#if FA_INST_PACK_GQA
#define FA_KEY_WARPS (FA_INST_WARPS * FA_MMA_M / FA_INST_M)
#else
#define FA_KEY_WARPS 1
#endif
#define FA_WARP_ROWS (FA_INST_M * FA_KEY_WARPS / FA_INST_WARPS)
#define FA_WARP_KEYS (FA_INST_N / FA_KEY_WARPS) /* keys of each tile one warp scores    */
#define FA_MF (FA_WARP_ROWS / FA_MMA_M)       /* m-tiles per warp                       */
#define FA_NF (FA_WARP_KEYS / FA_MMA_N)       /* n-tiles of S per warp                  */
#define FA_DF (FA_INST_D / FA_MMA_N)          /* n-tiles of O per warp                  */
#define FA_KS (FA_WARP_KEYS / FA_MMA_K)       /* k-steps of P·V (A operands of P)       */
#define FA_DF_OUT (FA_DF / FA_KEY_WARPS)      /* n-tiles of O each key warp merges, writes */
/* Small head dims compute a tile too quickly to hide a whole K+V tile load behind one
 * tile of work, so they (and single-buffer instances) wait for K and V separately;
 * larger ones load K and V as one group with one barrier per tile (measured:
 * bench/NOTES.md). The decode family is memory-bound at every head dim: one group. */
#define FA_JOINT_KV_TILES (FA_INST_STAGES >= 2 && (FA_INST_D > 64 || FA_INST_PACK_GQA))
/* The decode family keeps all S stages in flight while it waits for a tile, at the cost
 * of a second barrier per tile: a decode block streams few tiles (4 at b 1 x 8192), so
 * the S-1 tiles in flight of the one-barrier schedule leave one DRAM latency per tile
 * exposed, not just the first (bench/NOTES.md dec8). */
#define FA_LOAD_AHEAD (FA_JOINT_KV_TILES && FA_INST_PACK_GQA)
/* Where a copy goes through the thread's registers (FA_SYNC_COPIES: HIP), the prefill
 * family holds the next K/V tile there while it works on the current one: its global
 * loads are in flight through the whole tile's work instead of stalling the copy ahead
 * of it (docs/research/issue19_cdna3.md, section 5). Wave64 only: a wave32 lane holds
 * twice the chunks, and gfx1100's d64 and d128 bf16 forward spilled 16-20 bytes. */
#define FA_HELD_COPIES (FA_SYNC_COPIES && !FA_INST_PACK_GQA && FA_INST_STAGES == 1 && FA_WARP_SIZE == 64 && !FA_Q_IN_REGS)
/* The Q-in-registers family's schedule: its waves in two groups, the second one barrier
 * phase behind the first, each tile in two phases ended by workgroup barriers: a matrix
 * phase (store the held copies, issue the next loads, P·V of the previous tile, Q·Kᵀ of
 * this one) and a softmax phase. Every barrier then separates one group's matrix phase
 * from the other's softmax, so on each SIMD (one wave of each group) the matrix unit and
 * the exp units have work at once: HipKittens' and aiter's 8-wave schedule
 * (docs/research/issue19_cdna3.md section 12). The stagger keeps two K and two Vᵀ tiles
 * live (K of tile t+1 is stored while tile t is read, Vᵀ of tile t while P·V reads tile
 * t-1): two stages. Copies go through registers (held a phase pair ahead, as
 * FA_HELD_COPIES), and V is stored transposed on the way. */
#define FA_PING_PONG FA_Q_IN_REGS
#if FA_PING_PONG && !(FA_SYNC_COPIES && FA_WARP_SIZE == 64 && FA_INST_STAGES == 2 && FA_INST_WARPS % 2 == 0)
#error "the Q-in-registers forward needs two stages, an even wave count and wave64 copies through registers"
#endif

/* N-tiles of Kᵀ one B-operand load gives: two (an ldmatrix x4, or two rows of 16-wide
 * fragments) unless the vocabulary says otherwise (32 x 32 x 8: one, so a wave may score
 * 32 keys per tile). */
#ifndef FA_B_LOAD_TILES
#define FA_B_LOAD_TILES 2
#define fa_load_bt_tiles fa_load_bt_pair
#endif

#if FA_KEY_WARPS < 1 || FA_WARP_ROWS % FA_MMA_M != 0 || FA_WARP_KEYS % (FA_B_LOAD_TILES * FA_MMA_N) != 0 || \
    FA_INST_D % (2 * FA_MMA_N) != 0 || FA_WARP_KEYS % FA_MMA_K != 0 || FA_INST_D % FA_MMA_K != 0 || \
    FA_DF % FA_KEY_WARPS != 0
#error "instance tile does not divide into matrix-unit tiles"
#endif

/* Every shared tile starts 128-byte aligned. */
#if !FA_TILE_KEEPS_ALIGNMENT(FA_INST_M, FA_PITCH) || !FA_TILE_KEEPS_ALIGNMENT(FA_INST_N, FA_PITCH)
#error "forward shared tiles must keep 128-byte alignment"
#endif

#include "gpu_kernels/attn_fwd_parts.h"

#if FA_INST_PACK_GQA

/* The packed Q tile: row r of the tile is position (m0 + r) / G of query head
 * kv * G + (m0 + r) % G, a gather (each row has its own address; with BSHD the G heads
 * of a position are adjacent). Rows past the sequence and columns past the head dim are
 * zero-filled as in fa_load_tile. */
FA_DEVICE void fa_load_q_packed(fa_elem *smem, const fa_fwd_args *args, const fa_block_span *s)
{
    const int step = FA_THREADS / FA_CHUNKS;
    const int row0 = threadIdx.x / FA_CHUNKS;
    const int chunk = threadIdx.x % FA_CHUNKS;
    const fa_elem *q = (const fa_elem *)args->q;
    if (threadIdx.x >= step * FA_CHUNKS)
        return;
    const int col_valid = chunk * 8 < args->head_dim;
#pragma unroll
    for (int i = 0; i < (FA_INST_M + step - 1) / step; ++i) {
        int row = row0 + i * step;
        /* A test around the body, not an exit: the loop stays unrollable for every step. */
        if (FA_INST_M % step == 0 || row < FA_INST_M) {
            int packed = s->m0 + row;
            int valid = col_valid && row < s->rows_valid;
            const fa_elem *src = q;
            if (valid)
                src = q + fa_row_at(&args->q_layout, s->batch, s->q_row0 + fa_packed_position(s, packed),
                                    fa_packed_head(s, packed)) + chunk * 8;
            fa_async_copy16(smem + fa_smem_offset(row, chunk), src, valid);
        }
    }
}

/* A paged K/V tile's rows by thread: FA_KV_ROW_STEP threads' worth of rows per pass, as
 * fa_load_tile, but when the passes divide the tile into runs whose length divides 16
 * (and is at most 8), each thread takes a run of FA_KV_ROW_ITERS consecutive rows (a warp
 * still reads whole rows per copy) rather than every FA_KV_ROW_STEP-th one: such a run
 * starts at a multiple of its length, so it lies in one 16-key group and thus one page
 * (page sizes are multiples of 16), and the thread reads the table and forms a page
 * address once per tile, then steps by rows; rows FA_KV_ROW_STEP apart fall in different
 * pages every 16 / FA_KV_ROW_STEP rows (bench/NOTES.md dec7). Runs of 16 held a copy's
 * registers per row on HIP's synchronous copies (gfx1100's d96 decode kernel: 256 VGPRs
 * and 20 bytes of scratch). Row i of a thread is fa_kv_row(i). A row starts a group
 * (FA_STARTS_GROUP: it takes its page from the table; the thread's later rows of the same
 * 16-key group step from it) when it is the thread's first row in its 16-row group. */
#define FA_KV_ROW_STEP (FA_THREADS / FA_CHUNKS)
#define FA_KV_ROW_ITERS ((FA_INST_N + FA_KV_ROW_STEP - 1) / FA_KV_ROW_STEP)
#define FA_KV_ROW_RUNS (FA_INST_N % FA_KV_ROW_STEP == 0 && FA_KV_ROW_ITERS <= 8 && 16 % FA_KV_ROW_ITERS == 0)
#define FA_KV_ROW_STRIDE (FA_KV_ROW_RUNS ? 1 : FA_KV_ROW_STEP)
#define FA_STARTS_GROUP(i)                                                                 \
    (FA_KV_ROW_RUNS ? (i) == 0                                                             \
                    : FA_KV_ROW_STEP >= 16 || 16 % FA_KV_ROW_STEP != 0 || ((i) * FA_KV_ROW_STEP) % 16 == 0)
/* The decode family's held copies (FA_DEC_HELD): where copies go through registers, on
 * wave64 with one stage, tile t+1's K and V are loaded into registers while tile t
 * computes and stored after it, so their round trip overlaps the tile's work instead of
 * following it (the prefill family's FA_HELD_COPIES, with paged reads). A tile's share of
 * a lane is FA_KV_ROW_ITERS chunks of each operand: at most 8 (64 registers for K and V),
 * which d128 16x32 and 64x64, d64 16x64 and d32 16x128 hold without spilling; the others
 * keep the batched synchronous copies (attn_tile.h FA_COPY_BATCH). bench/amd_decode_model.py
 * predicts the d128 16x32 held loop 4.4-5.0 TB/s on the MI300X's rows of >= 512 MiB
 * against 3.6-4.7 for the batched one (docs/research/issue19_cdna3.md section 11). */
#define FA_DEC_HELD (FA_SYNC_COPIES && FA_WARP_SIZE == 64 && FA_INST_STAGES == 1 && FA_KV_ROW_ITERS <= 8)
FA_DEVICE int fa_kv_row(int i)
{
    const int thread_row = threadIdx.x / FA_CHUNKS;
    return FA_KV_ROW_RUNS ? thread_row * FA_KV_ROW_ITERS + i : thread_row + i * FA_KV_ROW_STEP;
}

/* The pages one thread's rows of a K/V tile lie in, read from the block table a tile
 * ahead of the copies that use them: a table entry is a load whose value the copy
 * address needs, and waited for at the copy it would stall the issuing warp (and its
 * share of the tile's math) once per tile. K and V of a tile share them. Entry i is the
 * page of row i (read where FA_STARTS_GROUP(i)); a tile inside one page uses entry 0. */
typedef struct {
    int page[FA_KV_ROW_ITERS];
} fa_tile_pages;

/* Moves a key's place in the pages (`index` into the table row, `in_page` the row within
 * the page) `keys` keys on, without a division: this runs for every row of every tile.
 * keys is a constant; up to 16 (a page holds at least 16 keys) it wraps at most once, a
 * select rather than a loop (a loop costs a convergence barrier per row, seen in SASS). */
FA_DEVICE void fa_page_advance(int *index, int *in_page, int keys, int page_size)
{
    *in_page += keys;
    if (keys <= 16) {
        const int wraps = *in_page >= page_size;
        *in_page -= wraps ? page_size : 0;
        *index += wraps;
        return;
    }
    while (*in_page >= page_size) {
        *in_page -= page_size;
        ++*index;
    }
}

/* A page id of the table, read as page 0 when it lies outside the pools: the forward may
 * read the table before the device check has judged it (args.checked_late, or
 * args.checks_itself with split-KV, where most blocks never judge), and then
 * writes nothing for the sequence; a checked table never takes the substitute. */
FA_DEVICE int fa_page_in_pool(int page, int num_pages) { return (unsigned)page < (unsigned)num_pages ? page : 0; }

FA_DEVICE void fa_fetch_tile_pages(fa_tile_pages *pages, const int *table, fa_divisor page_size, int num_pages,
                                   int n0, int rows_valid)
{
    if (page_size.d % FA_INST_N == 0) {
        pages->page[0] = fa_page_in_pool(table[fa_divide(n0, page_size)], num_pages);
        return;
    }
    const int row0 = fa_kv_row(0);
    int index = fa_divide(n0 + row0, page_size), in_page = n0 + row0 - index * page_size.d;
#pragma unroll
    for (int i = 0; i < FA_KV_ROW_ITERS; ++i) {
        if (i > 0)
            fa_page_advance(&index, &in_page, FA_KV_ROW_STRIDE, page_size.d);
        if (FA_STARTS_GROUP(i) && fa_kv_row(i) < rows_valid)
            pages->page[i] = fa_page_in_pool(table[index], num_pages);
    }
}

/* One K or V tile (keys n0 .. n0 + tile_n - 1 of the sequence, rows_valid of them
 * inside it) from a page pool: `pool` is the operand's data at this KV head, `pages` the
 * tile's pages (fa_fetch_tile_pages). A tile inside one page is fa_load_tile's copy;
 * otherwise the row that starts a thread's share of a 16-key group gets its address from
 * the group's page and its row in that page, and the group's later rows (the same page)
 * step from it by rows, as a contiguous tile's do. Only the pages of keys inside the
 * sequence are read. */
FA_DEVICE void fa_load_kv_paged(fa_elem *smem, const fa_elem *pool, const fa_operand_layout *layout,
                                const fa_tile_pages *pages, fa_divisor page_size, int n0, int rows_valid,
                                int head_dim)
{
    if (page_size.d % FA_INST_N == 0) {
        fa_load_tile(smem, pool + (long long)pages->page[0] * layout->batch +
                               (long long)fa_remainder(n0, page_size) * layout->row,
                     layout->row, rows_valid, head_dim, FA_INST_N);
        return;
    }
    const int chunk = threadIdx.x % FA_CHUNKS;
    const int col_valid = chunk * 8 < head_dim;
    if (threadIdx.x >= FA_KV_ROW_STEP * FA_CHUNKS)
        return;
    int index = 0, in_page = fa_remainder(n0 + fa_kv_row(0), page_size);
    const fa_elem *src = pool;
#if FA_BATCHED_COPIES
    /* All of a batch's loads, then its stores (attn_tile.h, FA_COPY_BATCH). */
    fa_chunk held[FA_COPY_BATCH];
    unsigned ok = 0;
#endif
#pragma unroll
    for (int i = 0; i < FA_KV_ROW_ITERS; ++i) {
        int row = fa_kv_row(i);
        if (i > 0)
            fa_page_advance(&index, &in_page, FA_KV_ROW_STRIDE, page_size.d);
        if (FA_KV_ROW_RUNS || row < FA_INST_N) {
            int valid = col_valid && row < rows_valid;
            if (FA_STARTS_GROUP(i))
                src = pool + (long long)(valid ? pages->page[i] : 0) * layout->batch +
                      (long long)in_page * layout->row + chunk * 8;
            else
                src += FA_KV_ROW_STRIDE * layout->row;
#if FA_BATCHED_COPIES
            held[i % FA_COPY_BATCH] = fa_chunk_load(valid ? src : pool);
            ok |= (unsigned)valid << (i % FA_COPY_BATCH);
#else
            fa_async_copy16(smem + fa_smem_offset(row, chunk), valid ? src : pool, valid);
#endif
        }
#if FA_BATCHED_COPIES
        if (i % FA_COPY_BATCH == FA_COPY_BATCH - 1 || i == FA_KV_ROW_ITERS - 1) {
#pragma unroll
            for (int j = i - i % FA_COPY_BATCH; j <= i; ++j)
                if (FA_KV_ROW_RUNS || fa_kv_row(j) < FA_INST_N)
                    fa_chunk_store(smem + fa_smem_offset(fa_kv_row(j), chunk),
                                   (ok >> (j % FA_COPY_BATCH)) & 1 ? held[j % FA_COPY_BATCH] : fa_chunk_zero());
            ok = 0;
        }
#endif
    }
}

/* A K or V tile of the packed kernel: contiguous (`base` at the sequence's first key) or
 * paged (`base` at the pool's KV head, `pages` from fa_fetch_tile_pages). */
FA_DEVICE void fa_load_kv(fa_elem *smem, const fa_elem *base, const fa_operand_layout *layout,
                          const fa_fwd_args *args, const fa_block_span *s, const fa_tile_pages *pages, int n0)
{
    if (args->block_table)
        fa_load_kv_paged(smem, base, layout, pages, args->page_size, n0, s->seqlen_k - n0, args->head_dim);
    else
        fa_load_tile(smem, base + (long long)n0 * layout->row, layout->row, s->seqlen_k - n0,
                     args->head_dim, FA_INST_N);
}

#if FA_DEC_HELD
/* fa_load_kv's global loads alone, into this thread's registers (attn_tile.h's
 * fa_held_tile), for the held-copy decode loop: issued before the work on the tile they
 * replace, stored by fa_store_kv after it. Rows by fa_kv_row for every layout (a
 * contiguous or single-page tile is one base plus rows; a paged one steps through its
 * pages as fa_load_kv_paged does); a chunk it does not copy loads `base`, which every
 * tile holds, and is stored as zeros: no load sits behind a branch. */
FA_DEVICE void fa_fetch_kv(fa_held_tile *held, const fa_elem *base, const fa_operand_layout *layout,
                           const fa_fwd_args *args, const fa_block_span *s, const fa_tile_pages *pages, int n0)
{
    const fa_divisor page_size = args->page_size;
    const int chunk = threadIdx.x % FA_CHUNKS;
    const int rows_valid = s->seqlen_k - n0;
    const int col_valid = chunk * 8 < args->head_dim && threadIdx.x < FA_KV_ROW_STEP * FA_CHUNKS;
    held->valid = 0;
    if (!args->block_table || page_size.d % FA_INST_N == 0) {
        const fa_elem *tile = args->block_table ? base + (long long)pages->page[0] * layout->batch +
                                                      (long long)fa_remainder(n0, page_size) * layout->row
                                                : base + (long long)n0 * layout->row;
#pragma unroll
        for (int i = 0; i < FA_KV_ROW_ITERS; ++i) {
            const int row = fa_kv_row(i);
            const int valid = col_valid && row < rows_valid && (FA_KV_ROW_RUNS || row < FA_INST_N);
            held->chunk[i] = fa_chunk_load(valid ? tile + (long long)row * layout->row + chunk * 8 : base);
            held->valid |= (unsigned)valid << i;
        }
        return;
    }
    int index = 0, in_page = fa_remainder(n0 + fa_kv_row(0), page_size);
    const fa_elem *src = base;
#pragma unroll
    for (int i = 0; i < FA_KV_ROW_ITERS; ++i) {
        const int row = fa_kv_row(i);
        if (i > 0)
            fa_page_advance(&index, &in_page, FA_KV_ROW_STRIDE, page_size.d);
        const int valid = col_valid && row < rows_valid && (FA_KV_ROW_RUNS || row < FA_INST_N);
        if (FA_STARTS_GROUP(i))
            src = base + (long long)(valid ? pages->page[i] : 0) * layout->batch + (long long)in_page * layout->row +
                  chunk * 8;
        else
            src += FA_KV_ROW_STRIDE * layout->row;
        held->chunk[i] = fa_chunk_load(valid ? src : base);
        held->valid |= (unsigned)valid << i;
    }
}

/* The shared-memory half of fa_fetch_kv: row fa_kv_row(i) of the tile gets chunk i. */
FA_DEVICE void fa_store_kv(fa_elem *smem, const fa_held_tile *held)
{
    const int chunk = threadIdx.x % FA_CHUNKS;
    if (threadIdx.x >= FA_KV_ROW_STEP * FA_CHUNKS)
        return;
#pragma unroll
    for (int i = 0; i < FA_KV_ROW_ITERS; ++i)
        if (FA_KV_ROW_RUNS || fa_kv_row(i) < FA_INST_N)
            fa_chunk_store(smem + fa_smem_offset(fa_kv_row(i), chunk),
                           (held->valid >> i) & 1 ? held->chunk[i] : fa_chunk_zero());
}
#endif
#undef FA_STARTS_GROUP

/* The device check of a fixed-length decode call made by the forward's own blocks
 * (args.checks_itself), the checks seq_check.h makes of such a call: seqused_k[batch] in
 * 0 .. seqlen_k, then every page id that covers its keys inside the pools. A thread takes
 * every FA_THREADS-th entry of the table row, FA_JUDGE_ROUND loads at a time (the host
 * lets the forward judge only rows of one round: fa_fwd_checks_itself); 1 when it found
 * a violation (reported: the record keeps the first of all). The check kernel ahead of the forward it replaces cost
 * a b 1 call its launch and a dependent read of the verdict (bench/NOTES.md dec7). */
FA_DEVICE int fa_judge_sequence(const fa_fwd_args *a, int batch)
{
    long long keys = a->seqlen_k;
    if (a->seqused_k) {
        const int used = a->seqused_k[batch];
        if (fa_used_keys_broken(threadIdx.x == 0 ? a->status : NULL, a->check_call, batch, used, keys))
            return 1;
        keys = used;
    }
    if (a->block_table == NULL)
        return 0;
    const int *row = a->block_table + batch * a->block_table_stride;
    const int pages = keys > 0 ? fa_divide((int)keys - 1, a->page_size) + 1 : 0;
    int bad = 0;
    for (int j0 = threadIdx.x; j0 < pages; j0 += FA_JUDGE_ROUND * FA_THREADS) {
        int page[FA_JUDGE_ROUND];
#pragma unroll
        for (int k = 0; k < FA_JUDGE_ROUND; ++k) /* a round's loads all in flight at once */
            page[k] = j0 + k * FA_THREADS < pages ? row[j0 + k * FA_THREADS] : 0;
#pragma unroll
        for (int k = 0; k < FA_JUDGE_ROUND; ++k) {
            const int j = j0 + k * FA_THREADS;
            if (j < pages)
                bad |= fa_page_id_broken(a->status, a->check_call, batch, j, page[k], a->num_pages);
        }
    }
    return bad;
}

/* The pages of tile n0 for fa_load_kv (nothing when K/V is not paged). */
FA_DEVICE void fa_fetch_pages(fa_tile_pages *pages, const fa_fwd_args *args, const fa_block_span *s, int n0)
{
    if (args->block_table)
        fa_fetch_tile_pages(pages, args->block_table + s->batch * args->block_table_stride, args->page_size,
                            args->num_pages, n0, s->seqlen_k - n0);
}
#endif

#define FA_QK_STEPS (FA_INST_D / FA_MMA_K) /* k-steps of Q·Kᵀ                          */
#if FA_Q_IN_REGS
/* Q's A operands, FA_QK_STEPS per m-tile, in registers for the whole key loop. */
#define FA_Q_SOURCE const uint32_t q_src[FA_MF][FA_QK_STEPS][FA_A_REGS]

/* The wave's Q fragments straight from global memory (q at the tile's first row): rows
 * past the sequence and columns past the head dim are zeros, as fa_load_tile fills them.
 * The loads carry no branch (an invalid one reads q itself and is replaced by zero), so
 * all of them are in flight together. */
FA_DEVICE void fa_load_q_regs(uint32_t q_frag[FA_MF][FA_QK_STEPS][FA_A_REGS], const fa_elem *q,
                              long long row_stride, int rows_valid, int head_dim, int warp_row0)
{
    const int lane = fa_lane();
#pragma unroll
    for (int mf = 0; mf < FA_MF; ++mf) {
        const int row = warp_row0 + mf * FA_MMA_M + fa_frag_row(lane);
#pragma unroll
        for (int ks = 0; ks < FA_QK_STEPS; ++ks) {
            const int col = ks * FA_MMA_K + fa_frag_k(lane);
            const int valid = row < rows_valid && col < head_dim;
            uint32_t frag[FA_A_REGS];
            fa_load_frag_global(frag, valid ? q + row * row_stride + col : q);
#pragma unroll
            for (int i = 0; i < FA_A_REGS; ++i)
                q_frag[mf][ks][i] = valid ? frag[i] : 0u;
        }
    }
}

/* Zeros over `elems` elements of shared memory (a multiple of 8 from a 16-byte boundary),
 * every thread a share. */
FA_DEVICE void fa_zero_smem(fa_elem *smem, int elems)
{
    for (int i = threadIdx.x * 8; i < elems; i += FA_THREADS * 8)
        fa_chunk_store(smem + i, fa_chunk_zero());
}
#else
#define FA_Q_SOURCE const fa_elem *q_src
#endif

/* Both products run over the instance's full head dim: the padded columns are zeros, and
 * a run-time exit inside these unrolled loops would stop the compiler from issuing the
 * next fragment loads ahead of the current matrix instructions. Q comes from its shared
 * tile, or from registers (FA_Q_IN_REGS). */
FA_DEVICE void fa_qk(float acc_s[FA_MF][FA_NF][FA_ACC_REGS], FA_Q_SOURCE, const fa_elem *smem_k, int warp_row0)
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
        for (int mf = 0; mf < FA_MF; ++mf) {
#if FA_Q_IN_REGS
            (void)warp_row0;
#pragma unroll
            for (int i = 0; i < FA_A_REGS; ++i)
                a[mf][i] = q_src[mf][k0 / FA_MMA_K][i];
#else
            fa_load_a(a[mf], q_src, FA_PITCH, warp_row0 + mf * FA_MMA_M, k0);
#endif
        }
#pragma unroll
        for (int nf = 0; nf < FA_NF; nf += FA_B_LOAD_TILES) {
            uint32_t b[FA_B_LOAD_TILES][FA_B_REGS];
            fa_load_bt_tiles(b, smem_k, FA_PITCH, nf * FA_MMA_N, k0);
#pragma unroll
            for (int mf = 0; mf < FA_MF; ++mf)
#pragma unroll
                for (int j = 0; j < FA_B_LOAD_TILES; ++j)
                    fa_mma(acc_s[mf][nf + j], a[mf], b[j]);
        }
    }
}

/* V is a [key][d] tile, or with Q in registers a Vᵀ tile ([d][key], FA_VT_PITCH), whose
 * operand is B = tileᵀ: contiguous keys, no gather. */
FA_DEVICE void fa_pv(float acc_o[FA_MF][FA_DF][FA_ACC_REGS], uint32_t p[FA_MF][FA_KS][FA_A_REGS],
                     const fa_elem *smem_v)
{
#pragma unroll
    for (int ks = 0; ks < FA_KS; ++ks)
#pragma unroll
        for (int df = 0; df < FA_DF; df += 2) {
            uint32_t b[2][FA_B_REGS];
#if FA_Q_IN_REGS
            fa_load_vt_pair(b, smem_v, FA_VT_PITCH(FA_INST_N), df * FA_MMA_N, ks * FA_MMA_K);
#else
            fa_load_b_pair(b, smem_v, FA_PITCH, ks * FA_MMA_K, df * FA_MMA_N);
#endif
#pragma unroll
            for (int mf = 0; mf < FA_MF; ++mf) {
                fa_mma(acc_o[mf][df], p[mf][ks], b[0]);
                fa_mma(acc_o[mf][df + 1], p[mf][ks], b[1]);
            }
        }
}

#if FA_KEY_WARPS > 1
/* Floats of one lane's softmax state: O accumulators, then the running max and sum of
 * each of its row groups. */
#define FA_STATE_FLOATS (FA_MF * FA_DF * FA_ACC_REGS + 2 * FA_MF * FA_ACC_ROWS)
#if FA_INST_WARPS * FA_WARP_SIZE * FA_STATE_FLOATS * 4 > 2 * 2 * FA_INST_STAGES * FA_INST_N * FA_PITCH
#error "the key warps' states do not fit the K/V buffers they reuse"
#endif

/* Merges the softmax states of the FA_KEY_WARPS warps of each row group: every warp
 * leaves its state in `scratch`, then each merges all of them, in warp order, into the
 * row's max and sum and into its own FA_DF_OUT n-tiles of O (`out`), which it writes: the
 * merge chain is a key warp's share long, not the whole row's (bench/NOTES.md dec7), and
 * the sums are bitwise those of one warp merging the others in order. Every warp holds
 * the same fragment layout, so lane l of one warp merges lane l of the others without
 * knowing it. `scratch` is the K/V buffers, free once every copy has landed and every warp
 * is past its last tile; laid out [warp][float][lane] (one bank per lane). */
FA_DEVICE void fa_merge_key_warps(float *scratch, const float acc_o[FA_MF][FA_DF][FA_ACC_REGS],
                                  float row_max[FA_MF][FA_ACC_ROWS], float row_sum[FA_MF][FA_ACC_ROWS],
                                  float out[FA_MF][FA_DF_OUT][FA_ACC_REGS])
{
    const int lane = fa_lane(), warp = fa_warp(), key_warp = warp % FA_KEY_WARPS;
    fa_barrier(); /* every warp is done reading K/V */
    float *slot = scratch + warp * FA_STATE_FLOATS * FA_WARP_SIZE + lane;
    int i = 0;
#pragma unroll
    for (int mf = 0; mf < FA_MF; ++mf) {
#pragma unroll
        for (int df = 0; df < FA_DF; ++df)
#pragma unroll
            for (int r = 0; r < FA_ACC_REGS; ++r)
                slot[FA_WARP_SIZE * i++] = acc_o[mf][df][r];
#pragma unroll
        for (int g = 0; g < FA_ACC_ROWS; ++g) {
            slot[FA_WARP_SIZE * i++] = row_max[mf][g];
            slot[FA_WARP_SIZE * i++] = row_sum[mf][g];
        }
    }
    fa_barrier();
    const float *first = scratch + (warp - key_warp) * FA_STATE_FLOATS * FA_WARP_SIZE + lane;
    const int df0 = key_warp * FA_DF_OUT;
#pragma unroll
    for (int mf = 0; mf < FA_MF; ++mf) {
        const int o_at = mf * (FA_DF * FA_ACC_REGS + 2 * FA_ACC_ROWS) + df0 * FA_ACC_REGS;
        const int state = mf * (FA_DF * FA_ACC_REGS + 2 * FA_ACC_ROWS) + FA_DF * FA_ACC_REGS;
#pragma unroll
        for (int g = 0; g < FA_ACC_ROWS; ++g) {
            row_max[mf][g] = first[FA_WARP_SIZE * (state + 2 * g)];
            row_sum[mf][g] = first[FA_WARP_SIZE * (state + 2 * g + 1)];
        }
#pragma unroll
        for (int df = 0; df < FA_DF_OUT; ++df)
#pragma unroll
            for (int r = 0; r < FA_ACC_REGS; ++r)
                out[mf][df][r] = first[FA_WARP_SIZE * (o_at + df * FA_ACC_REGS + r)];
#pragma unroll
        for (int other = 1; other < FA_KEY_WARPS; ++other) {
            const float *theirs_at = first + other * FA_STATE_FLOATS * FA_WARP_SIZE;
            float mine[FA_ACC_ROWS], theirs[FA_ACC_ROWS];
#pragma unroll
            for (int g = 0; g < FA_ACC_ROWS; ++g) {
                float their_max = theirs_at[FA_WARP_SIZE * (state + 2 * g)];
                float mx = fmaxf(row_max[mf][g], their_max);
                /* Both -inf (no visible key yet): both factors 0, the state stays empty. */
                float base = mx == -INFINITY ? 0.f : mx;
                mine[g] = fa_exp2(row_max[mf][g] - base);
                theirs[g] = fa_exp2(their_max - base);
                row_max[mf][g] = mx;
                row_sum[mf][g] = row_sum[mf][g] * mine[g] + theirs_at[FA_WARP_SIZE * (state + 2 * g + 1)] * theirs[g];
            }
#pragma unroll
            for (int df = 0; df < FA_DF_OUT; ++df)
#pragma unroll
                for (int r = 0; r < FA_ACC_REGS; ++r)
                    out[mf][df][r] = out[mf][df][r] * mine[r / FA_ACC_COLS] +
                                     theirs_at[FA_WARP_SIZE * (o_at + df * FA_ACC_REGS + r)] * theirs[r / FA_ACC_COLS];
        }
    }
}
#endif

extern "C" FA_GLOBAL void __launch_bounds__(FA_THREADS) FA_FWD_KERNEL_ATTRS FA_INST_NAME(fa_fwd_args args)
{
#if FA_Q_IN_REGS
    FA_DYNAMIC_SMEM(fa_smem, FA_QREG_SMEM_BYTES(FA_INST_D, FA_INST_M, FA_INST_N, FA_INST_STAGES));
    fa_elem *smem_k = (fa_elem *)fa_smem;
#else
    FA_DYNAMIC_SMEM(fa_smem, FA_FWD_SMEM_BYTES(FA_INST_D, FA_INST_M, FA_INST_N, FA_INST_STAGES));
    fa_elem *smem_q = (fa_elem *)fa_smem;
    fa_elem *smem_k = smem_q + FA_INST_M * FA_PITCH;
#endif
    fa_elem *smem_v = smem_k + FA_INST_STAGES * FA_INST_N * FA_PITCH;

    /* The device check or the append before this kernel wrote seq_ok, the cache; the
     * decode family waits for a check that only judges (args.checked_late) before its
     * writes instead (the prefill family keeps its registers: it spilled more so), or
     * judges its sequence itself (args.checks_itself: then no check kernel ran). */
    const int check_late = FA_INST_PACK_GQA && args.checked_late;
    const int judged_here = FA_INST_PACK_GQA && args.checks_itself;
    if (!check_late && !judged_here)
        fa_wait_prior_grid();
    /* The split-KV combine (the only kernel launched to overlap this one) is scheduled
     * once every block has passed here, so its launch and set-up hide behind the main
     * loop; it waits for this grid's end before it reads (bench/NOTES.md dec6). */
    fa_allow_next_grid();
    /* With check_late, the split-KV combine reads seq_ok after waiting for this grid only:
     * it relies on each sequence's blocks with rows passing the late wait below, which
     * ends after the check's grid. Keep every exit between here and there an exit of a
     * block that writes nothing. */
    const fa_block_span s = fa_find_span(&args);
    if (s.rows_valid <= 0 || s.batch == args.batch ||
        (!check_late && !judged_here && fa_sequence_bad(&args, s.batch)))
        return;
    /* Blocks that write out judge their sequence; with split-KV, whose blocks write only
     * partials, the block of KV head 0 and split 0 judges for the combine (seq_ok). */
    const int judges = judged_here && (args.num_splits == 1 || (s.head == 0 && s.split == 0));
    int judged_bad = 0;
    const int warp_row0 = (fa_warp() / FA_KEY_WARPS) * FA_WARP_ROWS;
    const int warp_key0 = (fa_warp() % FA_KEY_WARPS) * FA_WARP_KEYS;
    float alibi_log2 = 0.f;
#if FA_INST_PACK_GQA
    /* Paged: the pools at this KV head (pages come from the table); else the sequence. */
    const long long kv_batch = args.block_table ? 0 : s.batch;
    const long long kv_row0 = args.block_table ? 0 : s.k_row0;
    const fa_elem *k = (const fa_elem *)args.k + fa_row_at(&args.k_layout, (int)kv_batch, kv_row0, s.head);
    const fa_elem *v = (const fa_elem *)args.v + fa_row_at(&args.v_layout, (int)kv_batch, kv_row0, s.head);
#else
    const int kv_head = s.head / (args.heads / args.heads_k);
    const fa_elem *q = (const fa_elem *)args.q + fa_row_at(&args.q_layout, s.batch, s.q_row0 + s.m0, s.head);
    const fa_elem *k = (const fa_elem *)args.k + fa_row_at(&args.k_layout, s.batch, s.k_row0, kv_head);
    const fa_elem *v = (const fa_elem *)args.v + fa_row_at(&args.v_layout, s.batch, s.k_row0, kv_head);
    if (args.alibi_slopes)
        alibi_log2 = args.alibi_slopes[s.batch * args.alibi_batch + s.head] * FA_LOG2E;
#endif

    const int n_tiles = s.tile_hi - s.tile_lo;
    /* Tiles are visited from the last one down, so the tiles that straddle the causal
     * diagonal (the masked ones) come first. */
#define FA_TILE_N0(t) ((s.tile_hi - 1 - (t)) * FA_INST_N)
#if FA_INST_PACK_GQA
    /* With K and V in one group the pages of tile t are read a tile ahead of its copies
     * (FA_FETCH_PAGES), else right before each copy. */
    fa_tile_pages pages;
#define FA_FETCH_PAGES(t) fa_fetch_pages(&pages, &args, &s, FA_TILE_N0(t))
#define FA_LOAD_KV_TILE(buf, base, layout, t)                            \
    do {                                                                 \
        if (!FA_JOINT_KV_TILES)                                          \
            FA_FETCH_PAGES(t);                                           \
        fa_load_kv(buf, base, layout, &args, &s, &pages, FA_TILE_N0(t)); \
    } while (0)
#define FA_LOAD_K(t) FA_LOAD_KV_TILE(smem_k + ((t) % FA_INST_STAGES) * FA_INST_N * FA_PITCH, k, &args.k_layout, t)
#define FA_LOAD_V(t) FA_LOAD_KV_TILE(smem_v + ((t) % FA_INST_STAGES) * FA_INST_N * FA_PITCH, v, &args.v_layout, t)
#else
#define FA_LOAD_K(t)                                                                  \
    fa_load_tile(smem_k + ((t) % FA_INST_STAGES) * FA_INST_N * FA_PITCH,              \
                 k + (long long)FA_TILE_N0(t) * args.k_layout.row, args.k_layout.row, \
                 s.seqlen_k - FA_TILE_N0(t), args.head_dim, FA_INST_N)
#define FA_LOAD_V(t)                                                                  \
    fa_load_tile(smem_v + ((t) % FA_INST_STAGES) * FA_INST_N * FA_PITCH,              \
                 v + (long long)FA_TILE_N0(t) * args.v_layout.row, args.v_layout.row, \
                 s.seqlen_k - FA_TILE_N0(t), args.head_dim, FA_INST_N)
#endif

    /* Cleared after the prologue (FA_JUDGE), whose table reads then need no room beside
     * them: gfx1100's d96 decode kernel spilled 20 bytes otherwise. */
    float acc_o[FA_MF][FA_DF][FA_ACC_REGS];
    float row_max[FA_MF][FA_ACC_ROWS], row_sum[FA_MF][FA_ACC_ROWS];
#define FA_K_BUF(t) (smem_k + ((t) % FA_INST_STAGES) * FA_INST_N * FA_PITCH)
#define FA_V_BUF(t) (smem_v + ((t) % FA_INST_STAGES) * FA_INST_N * FA_PITCH)
/* Tile t's scores into acc_s, then its softmax: P into p, O and the row state rescaled. */
#define FA_SCORES(t) fa_qk(acc_s, FA_Q_OPERAND, FA_K_BUF(t) + warp_key0 * FA_PITCH, warp_row0)
#define FA_SOFTMAX(t)                                                                      \
    do {                                                                                   \
        const int n0 = FA_TILE_N0(t);                                                      \
        float logit_scale = fa_prepare_logits(acc_s, &s, &args, warp_row0, n0 + warp_key0, \
                                              fa_tile_needs_mask(&s, n0), alibi_log2);     \
        fa_online_softmax(acc_s, acc_o, row_max, row_sum, logit_scale);                    \
        fa_pack_p(p, acc_s);                                                               \
    } while (0)
#define FA_SOFTMAX_STEP(t)                       \
    float acc_s[FA_MF][FA_NF][FA_ACC_REGS];      \
    uint32_t p[FA_MF][FA_KS][FA_A_REGS];         \
    FA_SCORES(t);                                \
    FA_SOFTMAX(t)

    /* The judging blocks read the table while the first tiles' copies are in flight;
     * then the softmax state starts empty. */
#if FA_INST_PACK_GQA
#define FA_JUDGE()                                              \
    do {                                                        \
        if (judges)                                             \
            judged_bad = fa_judge_sequence(&args, s.batch);     \
        fa_clear_state(acc_o, row_max, row_sum);                \
    } while (0)
#else
#define FA_JUDGE() fa_clear_state(acc_o, row_max, row_sum)
#endif
    /* Copies complete in commit order, so "tile t has landed" is a fixed count of commit
     * groups still allowed in flight; every slot commits a group (empty past the last
     * tile) to keep that count exact. */
#if FA_INST_PACK_GQA
    fa_load_q_packed(smem_q, &args, &s);
#define FA_Q_OPERAND smem_q
#elif FA_Q_IN_REGS
    uint32_t q_frag[FA_MF][FA_QK_STEPS][FA_A_REGS];
    fa_load_q_regs(q_frag, q, args.q_layout.row, s.rows_valid, args.head_dim, warp_row0);
#define FA_Q_OPERAND q_frag
#else
    fa_load_tile(smem_q, q, args.q_layout.row, s.rows_valid, args.head_dim, FA_INST_M);
#define FA_Q_OPERAND smem_q
#endif
#if FA_PING_PONG
    /* FA_PING_PONG's schedule. Barrier phases, counted from the one after the prologue:
     * the first group runs tile t's matrix phase in phase 2t and its softmax in 2t + 1,
     * the second group one phase later (an extra barrier at the start; the first group
     * drains with one at the end, so both pass the same barriers). In its matrix phase of
     * tile t a wave stores its share of K_{t+1} and Vᵀ_t from the registers it loaded
     * them into a tile earlier, so every write to a buffer falls in phases 2t, 2t + 1,
     * after both groups' last read of its previous tile (K_{t-1}: Q·Kᵀ in 2t - 2 and
     * 2t - 1; Vᵀ_{t-2}: P·V in the matrix phases of tile t - 1, the same two) and before
     * the first read of its own (K_{t+1} in 2t + 2, Vᵀ_t by P·V in 2t + 2). */
    fa_held_tile k_held, v_held;
    float acc_s[FA_MF][FA_NF][FA_ACC_REGS];
    uint32_t p[FA_MF][FA_KS][FA_A_REGS];
    const int late_group = fa_wave_uniform(fa_warp() >= FA_INST_WARPS / 2);
#define FA_QK_MMAS (FA_MF * FA_NF * FA_QK_STEPS) /* matrix instructions of Q·Kᵀ and P·V */
#define FA_PV_MMAS (FA_MF * FA_DF * FA_KS)
#define FA_VT_BUF(t) (smem_v + ((t) % FA_INST_STAGES) * FA_INST_D * FA_VT_PITCH(FA_INST_N))
#define FA_FETCH(held, base, layout, t)                                                               \
    fa_fetch_tile(held, (base) + (long long)FA_TILE_N0(t) * (layout).row, (layout).row,               \
                  s.seqlen_k - FA_TILE_N0(t), args.head_dim)
    /* Vᵀ_t stored, K_{t+1} stored and V_{t+1} loaded, K_{t+2} loaded. */
#define FA_COPY_PHASE(t)                                                   \
    do {                                                                   \
        fa_store_tile(FA_VT_BUF(t), FA_VT_PITCH(FA_INST_N), &v_held);      \
        if ((t) + 1 < n_tiles) {                                           \
            fa_store_tile(FA_K_BUF((t) + 1), 0, &k_held);                  \
            FA_FETCH(&v_held, v, args.v_layout, (t) + 1);                  \
        }                                                                  \
        if ((t) + 2 < n_tiles)                                             \
            FA_FETCH(&k_held, k, args.k_layout, (t) + 2);                  \
    } while (0)
    /* The first matrix phase's P·V is of tile -1: P and its Vᵀ buffer start as zeros, so
     * every matrix phase runs P·V of the previous tile without a branch (one scheduling
     * region, one loop body) at the cost of one tile's P·V per block. */
#pragma unroll
    for (int mf = 0; mf < FA_MF; ++mf)
#pragma unroll
        for (int ks = 0; ks < FA_KS; ++ks)
#pragma unroll
            for (int i = 0; i < FA_A_REGS; ++i)
                p[mf][ks][i] = 0u;
    fa_zero_smem(FA_VT_BUF(1), FA_INST_D * FA_VT_PITCH(FA_INST_N));
    if (n_tiles > 0) {
        FA_FETCH(&k_held, k, args.k_layout, 0);
        fa_store_tile(FA_K_BUF(0), 0, &k_held);
        FA_FETCH(&v_held, v, args.v_layout, 0);
    }
    if (n_tiles > 1)
        FA_FETCH(&k_held, k, args.k_layout, 1);
    FA_JUDGE();
    fa_barrier(); /* K_0 and the zeros are in shared memory for every wave */
    if (late_group)
        fa_barrier(); /* the stagger */
    for (int t = 0; t < n_tiles; ++t) {
        fa_matrix_phase_begin();
        FA_COPY_PHASE(t);
        fa_pv(acc_o, p, FA_VT_BUF(t + 1)); /* tile t - 1's buffer */
        FA_SCORES(t);
        fa_matrix_phase_end(FA_QK_MMAS + FA_PV_MMAS);
        fa_phase_barrier();
        FA_SOFTMAX(t);
        fa_phase_barrier();
    }
    fa_matrix_phase_begin();
    fa_pv(acc_o, p, FA_VT_BUF(n_tiles + 1));
    fa_matrix_phase_end(FA_PV_MMAS);
    if (!late_group)
        fa_barrier(); /* the drain: the second group's last softmax phase ends here */
#undef FA_QK_MMAS
#undef FA_PV_MMAS
#undef FA_VT_BUF
#undef FA_FETCH
#undef FA_COPY_PHASE
#elif FA_HELD_COPIES || (FA_INST_PACK_GQA && FA_DEC_HELD)
    fa_held_tile k_held, v_held;
#if FA_HELD_COPIES
    /* One buffer per operand. Tile t+1's loads are issued before tile t's work and stored
     * after it; a barrier publishes each store, another tells that every wave is done
     * with the buffers the store overwrites. */
#define FA_FETCH_KV(t)                                                                                       \
    do {                                                                                                     \
        fa_fetch_tile(&k_held, k + (long long)FA_TILE_N0(t) * args.k_layout.row, args.k_layout.row,          \
                      s.seqlen_k - FA_TILE_N0(t), args.head_dim);                                            \
        fa_fetch_tile(&v_held, v + (long long)FA_TILE_N0(t) * args.v_layout.row, args.v_layout.row,          \
                      s.seqlen_k - FA_TILE_N0(t), args.head_dim);                                            \
    } while (0)
#define FA_STORE_KV()                       \
    do {                                    \
        fa_store_tile(smem_k, 0, &k_held);  \
        fa_store_tile(smem_v, 0, &v_held);  \
    } while (0)
#define FA_FIRST_PAGES() ((void)0)
#else
    /* As FA_HELD_COPIES above, through fa_fetch_kv / fa_store_kv: tile t+1's loads are
     * issued before tile t's work and stored after it. The pages of tile t+2 are read
     * into `ahead` just before tile t+1's loads go out: the wait for a table entry
     * (memory counters retire in order) then waits for no K/V load, where reading them
     * after the loads made the wait before the tile's work a wait for every load. */
#define FA_FETCH_KV(t)                                                                    \
    do {                                                                                  \
        fa_tile_pages ahead = pages;                                                      \
        if ((t) + 1 < n_tiles)                                                            \
            fa_fetch_pages(&ahead, &args, &s, FA_TILE_N0((t) + 1));                       \
        fa_fetch_kv(&k_held, k, &args.k_layout, &args, &s, &pages, FA_TILE_N0(t));        \
        fa_fetch_kv(&v_held, v, &args.v_layout, &args, &s, &pages, FA_TILE_N0(t));        \
        pages = ahead;                                                                    \
    } while (0)
#define FA_STORE_KV()                      \
    do {                                   \
        fa_store_kv(smem_k, &k_held);      \
        fa_store_kv(smem_v, &v_held);      \
    } while (0)
#define FA_FIRST_PAGES() FA_FETCH_PAGES(0)
#endif
    if (n_tiles > 0) {
        FA_FIRST_PAGES();
        FA_FETCH_KV(0);
        FA_STORE_KV();
    }
    FA_JUDGE();
    for (int t = 0; t < n_tiles; ++t) {
        fa_barrier(); /* tile t (and Q) is in shared memory for every thread */
        if (t + 1 < n_tiles)
            FA_FETCH_KV(t + 1);
        FA_SOFTMAX_STEP(t);
        fa_pv(acc_o, p, smem_v + warp_key0 * FA_PITCH);
        if (t + 1 < n_tiles) {
            fa_barrier(); /* every wave is done with tile t */
            FA_STORE_KV();
        }
    }
#undef FA_FETCH_KV
#undef FA_STORE_KV
#undef FA_FIRST_PAGES
#elif FA_LOAD_AHEAD
    /* One group per K/V tile, tiles t .. t+S-1 in flight while tile t is waited for: a
     * tile's buffer is refilled (tile t+S) right after every warp is done with it, and
     * the pages of tile t+S are read while tile t computes. */
#pragma unroll
    for (int t = 0; t < FA_INST_STAGES; ++t) {
        if (t < n_tiles) {
            FA_FETCH_PAGES(t);
            FA_LOAD_K(t);
            FA_LOAD_V(t);
        }
        fa_async_commit();
    }
    FA_JUDGE();
    for (int t = 0; t < n_tiles; ++t) {
        const int refill = t + FA_INST_STAGES < n_tiles;
        if (refill)
            FA_FETCH_PAGES(t + FA_INST_STAGES);
        fa_async_wait(FA_INST_STAGES - 1);
        fa_barrier(); /* tile t has landed for every thread */
        FA_SOFTMAX_STEP(t);
        fa_pv(acc_o, p, FA_V_BUF(t) + warp_key0 * FA_PITCH);
        fa_barrier(); /* every warp is done with tile t's buffer */
        if (refill) {
            FA_LOAD_K(t + FA_INST_STAGES);
            FA_LOAD_V(t + FA_INST_STAGES);
        }
        fa_async_commit();
    }
#elif FA_JOINT_KV_TILES
    /* The prefill family (contiguous K/V). One group per K/V tile; tiles t+1 .. t+S-1 are
     * in flight while tile t computes. The barrier at the top of an iteration both
     * publishes tile t and tells that every warp is done with tile t-1, whose buffer is
     * then refilled: one barrier per tile. */
#pragma unroll
    for (int t = 0; t < FA_INST_STAGES - 1; ++t) {
        if (t < n_tiles) {
            FA_LOAD_K(t);
            FA_LOAD_V(t);
        }
        fa_async_commit();
    }
    FA_JUDGE();
    for (int t = 0; t < n_tiles; ++t) {
        fa_async_wait(FA_INST_STAGES - 2);
        fa_barrier();
        if (t + FA_INST_STAGES - 1 < n_tiles) {
            FA_LOAD_K(t + FA_INST_STAGES - 1);
            FA_LOAD_V(t + FA_INST_STAGES - 1);
        }
        fa_async_commit();
        FA_SOFTMAX_STEP(t);
        fa_pv(acc_o, p, FA_V_BUF(t) + warp_key0 * FA_PITCH);
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
    FA_JUDGE();
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
        fa_pv(acc_o, p, FA_V_BUF(t) + warp_key0 * FA_PITCH);
    }
#endif
#undef FA_K_BUF
#undef FA_V_BUF
#undef FA_SOFTMAX_STEP
#undef FA_SCORES
#undef FA_SOFTMAX
#undef FA_Q_OPERAND
#undef FA_TILE_N0
#undef FA_LOAD_K
#undef FA_LOAD_V
#undef FA_LOAD_KV_TILE
#undef FA_FETCH_PAGES
#undef FA_JUDGE
    fa_async_wait(0); /* with no key tile, the Q copy is still in flight */
    /* A sequence the late check found bad writes nothing, except that a split still writes
     * its partial as one that saw no key (LSE -inf): the combine then reads the verdict
     * beside its loads, all of written memory (fa_combine_args.verdict_late). */
    int bad = 0;
    if (check_late) {
        fa_wait_prior_grid(); /* the device check beside this kernel wrote seq_ok */
        bad = fa_sequence_bad(&args, s.batch);
    }
    if (judges) {
        bad = fa_barrier_any(judged_bad);
        if (args.num_splits > 1 && threadIdx.x == 0)
            args.seq_ok[s.batch] = !bad;
    }
    if (bad && args.num_splits == 1)
        return;
    if (bad) /* every key warp's sum 0: the merged sums are 0 too */
        fa_forget_rows(row_sum);
#if FA_KEY_WARPS > 1
    float merged_o[FA_MF][FA_DF_OUT][FA_ACC_REGS];
    fa_merge_key_warps((float *)smem_k, acc_o, row_max, row_sum, merged_o);
    fa_write_output(&args, &s, warp_row0, (warp_key0 / FA_WARP_KEYS) * FA_DF_OUT, merged_o, row_max, row_sum, 0);
#else
    fa_write_output(&args, &s, warp_row0, 0, acc_o, row_max, row_sum, 0);
#endif
}
