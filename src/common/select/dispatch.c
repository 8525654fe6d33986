/*
 * dispatch.c - the pure selection (arch row, problem) -> config over a registry
 * (select/registry.h), with the reason for the choice in words. Also parses the
 * FLASHATTN_FORCE_TILE syntax.
 *
 * Selection rule (fa_select_config):
 *  Family: on a row with warpgroup MMA (sm_90), every forward the decode family does not
 *    take goes to the warpgroup family (ws_instances.txt), and every backward to the
 *    warpgroup backward (bws_instances.txt; a deterministic call only to configs that
 *    order their dQ adds, ordered_dq), when its operands are TMA-addressable and one of its configs
 *    passes the filters below (the forced tile included) without padding the head dim
 *    more than the mma.sync kernels would; otherwise, and on every other row, to the
 *    mma.sync kernels, the reason saying which family ran and why.
 *  Decode family (forward, GPU vendors with decode configs): the decode family (pack_gqa,
 *    dec_instances.txt) serves paged K/V always, and every problem whose packed rows
 *    G * s_q (G = heads / heads_k) are at most FA_DECODE_PACKED_ROWS: one packed tile then
 *    reads each K/V tile once per KV head, where a prefill tile reads it once per query
 *    head and leaves most of its rows empty. Other forwards take the prefill family, and
 *    so does a decode-sized one that no decode config fits (device limits, or a forced
 *    prefill tile); paged K/V has no fallback.
 *  Filters, in order (the first one that removes every config names the failure):
 *    vendor and pass match the row / problem, and the config is of the family; dtype matches; instance head_dim >= the
 *    problem's; compiled into this build; fits the row: wave size the instance was written
 *    for, threads <= max per block, smem <= per-block and per-SM shared memory, and when
 *    the instance's register count is known, regs <= per-thread limit and
 *    regs * threads <= registers per SM; then the FLASHATTN_FORCE_TILE override, if any.
 *  Ranking, among the survivors:
 *    1. smallest instance head dim (never pad more than needed: padding is wasted work);
 *    2. estimated time, within a tolerance of 1/8: the busiest SM processes
 *       waves * resident_blocks * pairs_per_block query-key pairs, where
 *       blocks_per_sm = min(smem_per_sm / smem, max_threads_per_sm / threads,
 *       regs_per_sm / (regs * threads)); forward: grid = batch * heads * ceil(s_q / tile_m)
 *       (decode family: batch * heads_k * ceil(G * s_q / tile_m)) * splits and pairs_per_block = tile_m * the block's K/V rows; backward (a block
 *       holds one K/V tile and loops over the query tiles): grid = batch * heads *
 *       ceil(s_k / tile_n) and pairs_per_block = tile_n * ceil(s_q / tile_m) * tile_m;
 *       waves = ceil(grid / (sm_count * blocks_per_sm)), resident_blocks =
 *       min(blocks_per_sm, ceil(grid / sm_count)) (the block scheduler spreads blocks over
 *       SMs before stacking them, and co-resident blocks share one SM's throughput);
 *       the model is uniform in the mask (a causal problem scales every config alike);
 *       The decode family is memory-bound: its pairs_per_block are the K/V rows a block
 *       reads (tile_m does not change the bytes);
 *    3. decode family: smaller tile_m (less padded compute), then, for paged K/V, key
 *       tiles that lie inside one page (page_size a multiple of tile_n: one table read per
 *       tile instead of one per 16 keys); when none does, or the call reads fewer than
 *       DECODE_LATENCY_ROWS K/V rows per SM, more resident threads per SM (latency wants
 *       more loads and warps in flight; measured, bench/NOTES.md dec3); then larger
 *       tile_n (more
 *       work per warp between barriers: measured, dec_instances.txt); prefill family:
 *       larger tile_m * tile_n (fewer K/V re-reads per query row, which the time model
 *       does not see: that is why step 2 treats near-equal estimates as equal);
 *    4. lower estimated time, then more stages, then the earlier registry entry, so
 *       ties are deterministic.
 *  Split-KV (GPU forward configs only; the CPU backend parallelises over rows and the
 *  backward over key tiles, so neither splits):
 *    num_splits_request > 0 forces it, capped at ceil(s_k / tile_n) and FA_MAX_SPLITS;
 *    request 0, decode family: the count with the shortest makespan, counting each split's
 *    tiles plus DECODE_SPLIT_OVERHEAD tiles of fixed cost per block (Q load, pipeline
 *    fill, the partials' write) over the waves of blocks:
 *    waves(s) * (ceil(tiles / s) + overhead) + DECODE_COMBINE_COST when s > 1 (the
 *    combine's launch) + DECODE_COMBINE_ROUND_COST per LSE round past the first (one
 *    partial per lane of a warp), the smallest s within 1/32 of the best;
 *    request 0, prefill family: splits only when the grid fills less than 80% of one wave
 *    (sm_count * blocks_per_sm) and each split keeps at least 4 K/V tiles: splits =
 *    min(slots / grid, ceil(s_k / tile_n) / 4, FA_MAX_SPLITS), so the grid fills at most
 *    one wave and the combine step stays small.
 */
#include "select/dispatch.h"

#include "gpu_kernels/launch_grid.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define FA_MAX_SPLITS 128
#define FA_DECODE_PACKED_ROWS 64 /* dec_instances.txt's largest tile */
#define DECODE_SPLIT_OVERHEAD 2
#define DECODE_COMBINE_COST 3 /* the combine launch, in tiles of one block's time */
/* Each further warp-wide round of the combine's LSE reduction (attn_combine.h: a warp's
 * lanes take one partial each) costs about two tiles: measured at b 1 x 8192 d128
 * (bench/NOTES.md dec6), 32 splits 12.2 us, 43 splits (two rounds, one tile less) 12.8. */
#define DECODE_COMBINE_ROUND_COST 2
/* K/V rows per SM (the decode cost) below which a decode call is latency-bound: more
 * resident threads then beat longer tiles (measured, bench/NOTES.md dec3: 512 and 2048
 * rows per SM ran faster on 16x64's three blocks per SM, 8192 on 16x128's one). */
#define DECODE_LATENCY_ROWS 4096
#define DECODE_TIE_NUM 33 /* makespans within 33/32 of the best count as equal */
#define DECODE_TIE_DEN 32
#define SPLIT_FILL_NUM 4 /* split only below 4/5 = 80% of one wave */
#define SPLIT_FILL_DEN 5
#define MIN_KV_TILES_PER_SPLIT 4
#define COST_TIE_NUM 9 /* estimates within 9/8 of the best count as equal */
#define COST_TIE_DEN 8
#define KIB 1024

/* ---- names for reasons -------------------------------------------------------------- */

static const char *sm_word(fa_vendor vendor)
{
    return vendor == FA_VENDOR_NVIDIA ? "SM" : vendor == FA_VENDOR_AMD ? "CU" : "worker";
}

static long long ceil_div(long long a, long long b) { return b > 0 ? (a + b - 1) / b : 0; }

static long long min_ll(long long a, long long b) { return a < b ? a : b; }

/* ---- filters ------------------------------------------------------------------------ */

/* How far a config gets through the filters, in their order. */
typedef enum passed {
    PASSED_NONE = 0, /* other vendor or pass      */
    PASSED_VENDOR,   /* dtype differs             */
    PASSED_DTYPE,    /* head dim too small        */
    PASSED_HEAD_DIM, /* planned, not compiled     */
    PASSED_COMPILED, /* exceeds a limit of the row */
    PASSED_LIMITS    /* eligible                   */
} passed;

/* Writes a limit message (msg may be NULL with len 0) and returns 1, for limit_failure. */
static int limit_message(char *msg, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, len, fmt, ap);
    va_end(ap);
    return 1;
}

/* 0 when c fits the row's limits; else 1 with the limit it exceeds written to msg. */
static int limit_failure(const fa_arch_row *row, const fa_kernel_config *c, char *msg,
                         size_t len)
{
    long long regs = (long long)c->regs_per_thread * c->threads;
    int regs_known = c->regs_per_thread > 0;

    if (c->min_wave_size > 0 && c->min_wave_size != row->wave_size)
        return limit_message(msg, len, "%s is written for wave %d, %s runs wave %d", c->name,
                             c->min_wave_size, row->name, row->wave_size);
    if (c->threads > row->max_threads_per_block)
        return limit_message(msg, len, "%s needs %d threads per block, %s allows %d", c->name,
                             c->threads, row->name, row->max_threads_per_block);
    if (c->smem_bytes > row->smem_per_block || c->smem_bytes > row->smem_per_sm)
        return limit_message(msg, len,
                             "%s needs %d KiB shared memory per block, %s allows %d KiB",
                             c->name, c->smem_bytes / KIB, row->name, row->smem_per_block / KIB);
    if (regs_known && row->max_regs_per_thread > 0 &&
        c->regs_per_thread > row->max_regs_per_thread)
        return limit_message(msg, len, "%s needs %d registers per thread, %s allows %d",
                             c->name, c->regs_per_thread, row->name, row->max_regs_per_thread);
    if (regs_known && row->regs_per_sm > 0 && regs > row->regs_per_sm)
        return limit_message(msg, len, "%s needs %lld registers per block, %s has %d per %s",
                             c->name, regs, row->name, row->regs_per_sm, sm_word(row->vendor));
    return 0;
}

/* 1 for a warpgroup backward that cannot order its dQ adds, asked for a deterministic
 * call (the mma.sync kernels' dQ pass serves those). */
static int unordered_for(const fa_kernel_config *c, const fa_problem_shape *shape)
{
    return c->pass == FA_PASS_BWD && shape->deterministic && !c->ordered_dq;
}

static passed filter_stage(const fa_arch_row *row, const fa_kernel_config *c,
                           const fa_problem_shape *shape)
{
    if (c->vendor != row->vendor || c->pass != shape->pass || c->pack_gqa != shape->pack_gqa ||
        c->warpgroup != shape->warpgroup || (shape->warpgroup && unordered_for(c, shape)))
        return PASSED_NONE;
    if (c->dtype != shape->dtype) return PASSED_VENDOR;
    if (c->head_dim < shape->head_dim) return PASSED_DTYPE;
    if (!c->compiled) return PASSED_HEAD_DIM;
    if (limit_failure(row, c, NULL, 0)) return PASSED_COMPILED;
    return PASSED_LIMITS;
}

static int matches_override(const fa_kernel_config *c, const fa_tile_override *force)
{
    if (!force || force->tile_m <= 0) return 1;
    return c->tile_m == force->tile_m && c->tile_n == force->tile_n &&
           (force->stages <= 0 || c->stages == force->stages);
}

static int eligible(const fa_arch_row *row, const fa_kernel_config *c,
                    const fa_problem_shape *shape, const fa_tile_override *force)
{
    return filter_stage(row, c, shape) == PASSED_LIMITS && matches_override(c, force);
}

/* ---- the estimate ------------------------------------------------------------------- */

typedef struct estimate {
    int blocks_per_sm;
    const char *limiter; /* "smem", "threads" or "regs" */
    int splits;
    long long grid;      /* blocks including splits */
    double cost;         /* query-key pairs on the busiest SM */
} estimate;

static void consider_limit(int blocks, const char *what, estimate *e)
{
    if (blocks < e->blocks_per_sm) {
        e->blocks_per_sm = blocks;
        e->limiter = what;
    }
}

/* Blocks one SM holds at once; the first limit considered wins ties (smem). */
static void occupancy(const fa_arch_row *row, const fa_kernel_config *c, estimate *e)
{
    e->blocks_per_sm = INT_MAX;
    e->limiter = "smem";
    if (c->smem_bytes > 0) consider_limit(row->smem_per_sm / c->smem_bytes, "smem", e);
    if (c->threads > 0) consider_limit(row->max_threads_per_sm / c->threads, "threads", e);
    if (c->regs_per_thread > 0 && row->regs_per_sm > 0)
        consider_limit(row->regs_per_sm / (c->regs_per_thread * c->threads), "regs", e);
    if (e->blocks_per_sm == INT_MAX || e->blocks_per_sm < 1) e->blocks_per_sm = 1;
}

static int sm_count_of(const fa_arch_row *row) { return row->sm_count > 0 ? row->sm_count : 1; }

/* Grids past 2^53 blocks (legal only with stride-0 operands) all rank alike; the cap
 * keeps every product of the estimate, splits and the fill test included, in range. */
#define GRID_CAP (1LL << 53)

/* Blocks before split-KV: one per query tile (forward) or per key tile (backward). */
static long long base_grid(const fa_kernel_config *c, const fa_problem_shape *shape)
{
    long long group = c->pack_gqa ? shape->heads / shape->heads_k : 1;
    long long tiles = shape->pass == FA_PASS_BWD ? ceil_div(shape->seqlen_k, c->tile_n)
                                                 : ceil_div(shape->seqlen_q * group, c->tile_m);
    long long pairs = (long long)shape->batch * (c->pack_gqa ? shape->heads_k : shape->heads); /* < 2^62 */
    if (tiles > 0 && pairs > GRID_CAP / tiles)
        return GRID_CAP;
    return pairs * tiles;
}

/* Query-key pairs one block processes, padded to whole tiles; for the decode family,
 * which is memory-bound, the K/V rows it reads. */
static double block_pairs(const fa_kernel_config *c, const fa_problem_shape *shape, int splits)
{
    long long kv_rows;
    if (shape->pass == FA_PASS_BWD)
        return (double)c->tile_n * (double)(ceil_div(shape->seqlen_q, c->tile_m) * c->tile_m);
    kv_rows = ceil_div(ceil_div(shape->seqlen_k, c->tile_n), splits) * c->tile_n;
    return c->pack_gqa ? (double)kv_rows : (double)c->tile_m * (double)kv_rows;
}

/* The decode family's split count: the shortest makespan (see the header). */
static long long decode_splits(long long grid, long long kv_tiles, long long slots, long long cap, int wave_size)
{
    long long s, best = 1, best_cost = -1;
    long long costs[FA_MAX_SPLITS + 1];
    for (s = 1; s <= cap; s++) {
        long long per = ceil_div(kv_tiles, s);
        long long used = ceil_div(kv_tiles, per); /* splits that get tiles */
        long long rounds = ceil_div(used, wave_size);
        costs[s] = ceil_div(grid * used, slots) * (per + DECODE_SPLIT_OVERHEAD) +
                   (used > 1 ? DECODE_COMBINE_COST + (rounds - 1) * DECODE_COMBINE_ROUND_COST : 0);
        if (best_cost < 0 || costs[s] < best_cost) best_cost = costs[s];
    }
    for (s = cap; s >= 1; s--)
        if (costs[s] * DECODE_TIE_DEN <= best_cost * DECODE_TIE_NUM) best = s;
    return best;
}

static int choose_splits(const fa_arch_row *row, const fa_kernel_config *c,
                         const fa_problem_shape *shape, int blocks_per_sm)
{
    long long kv_tiles = ceil_div(shape->seqlen_k, c->tile_n);
    long long cap = min_ll(FA_MAX_SPLITS, kv_tiles > 0 ? kv_tiles : 1);
    long long grid = base_grid(c, shape);
    long long slots = (long long)sm_count_of(row) * blocks_per_sm;
    long long splits;

    if (c->vendor == FA_VENDOR_CPU || shape->pass == FA_PASS_BWD) return 1;
    if (shape->num_splits_request > 0) return (int)min_ll(shape->num_splits_request, cap);
    if (c->pack_gqa && grid > 0 && grid <= GRID_CAP / FA_MAX_SPLITS)
        return (int)decode_splits(grid, kv_tiles, slots, cap, row->wave_size);
    if (grid <= 0 || grid * SPLIT_FILL_DEN >= slots * SPLIT_FILL_NUM) return 1;
    splits = min_ll(min_ll(slots / grid, kv_tiles / MIN_KV_TILES_PER_SPLIT), cap);
    return splits > 1 ? (int)splits : 1;
}

static estimate estimate_config(const fa_arch_row *row, const fa_kernel_config *c,
                                const fa_problem_shape *shape)
{
    estimate e;
    long long sms = sm_count_of(row), waves, resident;

    occupancy(row, c, &e);
    e.splits = choose_splits(row, c, shape, e.blocks_per_sm);
    e.grid = base_grid(c, shape) * e.splits;
    waves = ceil_div(e.grid, sms * e.blocks_per_sm);
    resident = min_ll(e.blocks_per_sm, ceil_div(e.grid, sms));
    e.cost = (double)waves * (double)resident * block_pairs(c, shape, e.splits);
    return e;
}

/* ---- ranking ------------------------------------------------------------------------ */

static int smallest_head_dim(const fa_arch_row *row, const fa_kernel_config *reg, int count,
                             const fa_problem_shape *shape, const fa_tile_override *force)
{
    int i, best = INT_MAX;
    for (i = 0; i < count; i++)
        if (eligible(row, &reg[i], shape, force) && reg[i].head_dim < best)
            best = reg[i].head_dim;
    return best;
}

static double lowest_cost(const fa_arch_row *row, const fa_kernel_config *reg, int count,
                          const fa_problem_shape *shape, const fa_tile_override *force,
                          int head_dim)
{
    int i;
    double best = -1.0;
    for (i = 0; i < count; i++) {
        double cost;
        if (!eligible(row, &reg[i], shape, force) || reg[i].head_dim != head_dim) continue;
        cost = estimate_config(row, &reg[i], shape).cost;
        if (best < 0.0 || cost < best) best = cost;
    }
    return best;
}

/* Steps 3 and 4 of the ranking between two candidates inside the cost tolerance. */
/* 1 when a paged problem's every key tile of c lies inside one page: one table read per
 * tile instead of one per 16 keys (attn_fwd.h, fa_load_kv_paged). */
static int tile_in_page(const fa_kernel_config *c, const fa_problem_shape *shape)
{
    return shape->paged && shape->page_size > 0 && shape->page_size % c->tile_n == 0;
}

static int outranks(const fa_kernel_config *a, const estimate *ea, const fa_kernel_config *b,
                    const estimate *eb, const fa_problem_shape *shape, int latency_bound)
{
    long long area_a = (long long)a->tile_m * a->tile_n, area_b = (long long)b->tile_m * b->tile_n;
    /* Decode, among near-equal byte counts: the fewest padded rows, then the longest key
     * tiles (more work per warp between barriers; measured, dec_instances.txt). */
    if (a->pack_gqa && a->tile_m != b->tile_m) return a->tile_m < b->tile_m;
    if (a->pack_gqa && tile_in_page(a, shape) != tile_in_page(b, shape)) return tile_in_page(a, shape);
    /* Pages shorter than both tiles, or a call too small to reach the bandwidth: the more
     * threads resident per SM, the better the latency (of scattered page reads, or of
     * each block's fixed steps) is hidden (measured, bench/NOTES.md dec3). latency_bound
     * comes from the lowest estimate of all candidates, not from a or b: a test on each
     * pair's own costs would not be transitive. */
    if (a->pack_gqa && ((shape->paged && !tile_in_page(a, shape)) || latency_bound) &&
        (long long)ea->blocks_per_sm * a->threads != (long long)eb->blocks_per_sm * b->threads)
        return (long long)ea->blocks_per_sm * a->threads > (long long)eb->blocks_per_sm * b->threads;
    if (a->pack_gqa && a->tile_n != b->tile_n) return a->tile_n > b->tile_n;
    if (area_a != area_b) return area_a > area_b;
    if (ea->cost != eb->cost) return ea->cost < eb->cost;
    return a->stages > b->stages; /* equal: the earlier entry stays */
}

/* ---- reasons ------------------------------------------------------------------------ */

static void describe_choice(const fa_arch_row *row, const fa_kernel_config *c,
                            const fa_problem_shape *shape, const estimate *e, const char *family,
                            char *out, size_t len)
{
    long long slots = (long long)sm_count_of(row) * e->blocks_per_sm;
    const char *unit = sm_word(row->vendor);
    int n = 0;
    char detail[64];

    if (strcmp(e->limiter, "smem") == 0)
        snprintf(detail, sizeof detail, "%d KiB of %d KiB", c->smem_bytes / KIB,
                 row->smem_per_sm / KIB);
    else if (strcmp(e->limiter, "threads") == 0)
        snprintf(detail, sizeof detail, "%d of %d threads", c->threads, row->max_threads_per_sm);
    else
        snprintf(detail, sizeof detail, "%d regs/thread of %d", c->regs_per_thread,
                 row->regs_per_sm);

    n += snprintf(out + n, len - n, "d%d %s %dx%dx%d: %d blocks/%s by %s (%s), grid %lld blocks = %.1f waves on %d %ss",
                  c->head_dim, fa_dtype_name(c->dtype), c->tile_m, c->tile_n, c->stages,
                  e->blocks_per_sm, unit, e->limiter, detail, e->grid,
                  (double)e->grid / (double)slots, sm_count_of(row), unit);
    if (n > 0 && (size_t)n < len && c->pack_gqa)
        n += snprintf(out + n, len - n, ", decode family: %lld packed rows (%d query heads x %lld positions) per KV head%s",
                      (long long)(shape->heads / shape->heads_k) * shape->seqlen_q,
                      shape->heads / shape->heads_k, shape->seqlen_q, shape->paged ? ", paged K/V" : "");
    if (n > 0 && (size_t)n < len && e->splits > 1)
        n += snprintf(out + n, len - n, ", split-KV %d (%s)", e->splits,
                      shape->num_splits_request > 0 ? "requested"
                      : c->pack_gqa                 ? "shortest makespan"
                                                    : "grid under 80% of a wave");
    /* CPU loops take the head dim at run time: only GPU instances really pad. */
    if (n > 0 && (size_t)n < len && c->head_dim > shape->head_dim && c->vendor != FA_VENDOR_CPU)
        n += snprintf(out + n, len - n, ", head dim %d padded to %d", shape->head_dim, c->head_dim);
    if (n > 0 && (size_t)n < len && family[0])
        snprintf(out + n, len - n, ", %s", family);
}

static void describe_no_config(const fa_arch_row *row, const fa_problem_shape *shape,
                               passed furthest, const char *limit_msg, char *out, size_t len)
{
    const char *dt = fa_dtype_name(shape->dtype);
    const char *pass = shape->pass == FA_PASS_BWD ? "backward" : "forward";
    if (furthest == PASSED_NONE && shape->pass == FA_PASS_BWD)
        snprintf(out, len, "no backward kernel configs are registered for %s yet", row->name);
    else if (furthest == PASSED_NONE)
        snprintf(out, len, "no forward kernel configs are registered for %s", row->name);
    else if (furthest == PASSED_VENDOR)
        snprintf(out, len, "no %s kernel for dtype %s on %s", pass, dt, row->name);
    else if (furthest == PASSED_DTYPE)
        snprintf(out, len, "no %s instance on %s covers head dim %d", dt, row->name,
                 shape->head_dim);
    else if (furthest == PASSED_HEAD_DIM)
        snprintf(out, len, "the %s configs for head dim %d on %s are planned but not compiled "
                           "into this build", dt, shape->head_dim, row->name);
    else
        snprintf(out, len, "no config fits %s: %s", row->name, limit_msg);
}

/* 1 when a fitting config before index i has the same tile and stages as reg[i]. */
static int listed_before(const fa_arch_row *row, const fa_kernel_config *reg, int i,
                         const fa_problem_shape *shape)
{
    int j;
    for (j = 0; j < i; j++)
        if (filter_stage(row, &reg[j], shape) == PASSED_LIMITS &&
            reg[j].tile_m == reg[i].tile_m && reg[j].tile_n == reg[i].tile_n &&
            reg[j].stages == reg[i].stages)
            return 1;
    return 0;
}

/* Lists the tiles that would fit without the override ("128x64:2 64x64:1"), once each. */
static void describe_bad_override(const fa_arch_row *row, const fa_kernel_config *reg,
                                  int count, const fa_problem_shape *shape,
                                  const fa_tile_override *force, char *out, size_t len)
{
    int i, n;
    n = snprintf(out, len, "forced tile %dx%d", force->tile_m, force->tile_n);
    if (force->stages > 0 && n > 0 && (size_t)n < len)
        n += snprintf(out + n, len - n, ":%d", force->stages);
    if (n > 0 && (size_t)n < len)
        n += snprintf(out + n, len - n, " names no config that fits d%d %s on %s; fitting:",
                      shape->head_dim, fa_dtype_name(shape->dtype), row->name);
    for (i = 0; i < count && n > 0 && (size_t)n < len; i++)
        if (filter_stage(row, &reg[i], shape) == PASSED_LIMITS &&
            !listed_before(row, reg, i, shape))
            n += snprintf(out + n, len - n, " %dx%d:%d", reg[i].tile_m, reg[i].tile_n,
                          reg[i].stages);
}

/* ---- selection ---------------------------------------------------------------------- */

/* 1 when the forward goes to the decode family (see the header): only where the row's
 * vendor has decode configs for its wave size (the CPU's loops page by themselves). */
static int decode_family(const fa_arch_row *row, const fa_kernel_config *reg, int count,
                         const fa_problem_shape *shape)
{
    int i, has_family = 0;
    if (shape->pass != FA_PASS_FWD || shape->heads_k <= 0) return 0;
    for (i = 0; i < count && !has_family; i++)
        has_family = reg[i].vendor == row->vendor && reg[i].pack_gqa &&
                     (reg[i].min_wave_size == 0 || reg[i].min_wave_size == row->wave_size);
    if (!has_family) return 0;
    return shape->paged || (long long)(shape->heads / shape->heads_k) * shape->seqlen_q <= FA_DECODE_PACKED_ROWS;
}

/* The forward's work tiles of a launch with `tile_m`-row query tiles and `splits` splits:
 * query tiles x heads x batch x splits (fa_fwd_grid's walk). In double: the product can
 * pass 2^63, and near 2^31 it is exact. */
static double work_tiles(const fa_problem_shape *shape, int tile_m, int splits)
{
    return (double)((shape->seqlen_q + tile_m - 1) / tile_m) * shape->heads * shape->batch * splits;
}

/* The warpgroup walk's blocks are persistent (one per slot, each walking many work
 * tiles). Masked calls with more work tiles than blocks draw each next tile from a
 * counter (1); the others take every gridDim.x-th one (0): with no more tiles than
 * blocks each block takes its own (fa_fwd_grid) and a draw would only cost the
 * counter's memset. Measured (bench/NOTES.md): persistent is 1.09-1.20x faster than a
 * block per work tile at 512 - 1k keys, masked or not, and within 3% without a mask at
 * 2k - 16k (H200, ws3); but the static walk balances causal tiles worse than the
 * hardware hands out blocks: 5-15% slower at 4k - 16k causal keys (H100, issue 13
 * session 6), while the drawn walk is 5-12% faster than a block per tile at 2k - 4k
 * causal keys and 2-6% at 8k - 16k (H100, session 14), and 2-9% faster than the static
 * walk at 1k causal keys, -1% to +4% at 512 (H100, session 15; the counter's memset
 * included). Sliding windows count as masks here; only causal was measured. */
static int walk_draws(const fa_problem_shape *shape, const fa_kernel_config *c, int splits, int blocks)
{
    return shape->has_mask && work_tiles(shape, c->tile_m, splits) > blocks;
}

/* 1 when a warpgroup launch of this shape could walk FA_WS_WALK_TILES work tiles or more:
 * its smallest query tile (64 rows) and every split there could be. */
static int walk_too_long(const fa_problem_shape *shape)
{
    return work_tiles(shape, 64, FA_MAX_SPLITS) >= (double)FA_WS_WALK_TILES;
}

/* 1 when the call goes to the warpgroup family (see the header); on a row that has
 * warpgroup MMA, `note` says which family runs and, for mma.sync, why. */
static int warpgroup_family(const fa_arch_row *row, const fa_kernel_config *reg, int count,
                            const fa_problem_shape *shape, const fa_tile_override *force, char *note,
                            size_t len)
{
    fa_problem_shape wg = *shape, mma = *shape;
    int wg_head_dim, mma_head_dim;
    note[0] = '\0';
    if (row->matrix_unit != FA_MATRIX_WGMMA || shape->pack_gqa) return 0;
    wg.warpgroup = 1;
    mma.warpgroup = 0;
    wg_head_dim = smallest_head_dim(row, reg, count, &wg, force);
    mma_head_dim = smallest_head_dim(row, reg, count, &mma, force);
    if (!shape->tma_ok)
        snprintf(note, len, "mma.sync family: an operand is not TMA-addressable (data 16-byte aligned, "
                            "strides multiples of 8 elements)");
    else if (shape->pass == FA_PASS_FWD && walk_too_long(shape))
        snprintf(note, len, "mma.sync family: more work tiles than the warpgroup walk counts (2^31)");
    else if (wg_head_dim == INT_MAX)
        snprintf(note, len, "mma.sync family: no warpgroup instance %s", force && force->tile_m > 0
                 ? "has the forced tile"
                 : shape->pass == FA_PASS_BWD && shape->deterministic
                 ? "covers this head dim and dtype and orders its dQ adds (deterministic) in this build"
                 : "covers this head dim and dtype in this build");
    else if (wg_head_dim > mma_head_dim) /* never pad more than needed, across families too */
        snprintf(note, len, "mma.sync family: its d%d pads less than the warpgroup family's d%d", mma_head_dim,
                 wg_head_dim);
    else
        snprintf(note, len, "warpgroup family (wgmma + TMA, sm_90a)");
    return note[0] == 'w';
}

/* Why nothing is eligible: the furthest filter stage any config reached, and the first
 * limit message at the limits stage. Returns FA_ERR_BAD_TILE_OVERRIDE when configs fit
 * but the override excludes them all. */
static fa_status explain_failure(const fa_arch_row *row, const fa_kernel_config *reg,
                                 int count, const fa_problem_shape *shape,
                                 const fa_tile_override *force, fa_selection *out)
{
    passed furthest = PASSED_NONE;
    char limit_msg[160] = "";
    int i;

    for (i = 0; i < count; i++) {
        passed p = filter_stage(row, &reg[i], shape);
        if (p == PASSED_COMPILED && limit_msg[0] == '\0')
            limit_failure(row, &reg[i], limit_msg, sizeof limit_msg);
        if (p > furthest) furthest = p;
    }
    if (furthest == PASSED_LIMITS) {
        describe_bad_override(row, reg, count, shape, force, out->reason, sizeof out->reason);
        return FA_ERR_BAD_TILE_OVERRIDE;
    }
    describe_no_config(row, shape, furthest, limit_msg, out->reason, sizeof out->reason);
    return FA_ERR_UNSUPPORTED;
}

fa_status fa_select_config(const fa_arch_row *row, const fa_kernel_config *registry, int count,
                           const fa_problem_shape *shape, const fa_tile_override *force,
                           fa_selection *out)
{
    const fa_kernel_config *best = NULL;
    estimate best_e;
    double floor_cost;
    int i, head_dim;
    fa_problem_shape family;
    char family_note[128];

    memset(&best_e, 0, sizeof best_e);
    if (!out) return FA_ERR_NULL_POINTER;
    memset(out, 0, sizeof *out);
    if (!row || !shape || (count > 0 && !registry)) {
        snprintf(out->reason, sizeof out->reason, "fa_select_config: NULL argument");
        return FA_ERR_NULL_POINTER;
    }
    if (count < 0) count = 0;
    family = *shape;
    family.warpgroup = 0;
    family.pack_gqa = decode_family(row, registry, count, &family);
    /* A decode-sized problem no decode config fits (the device's limits, a forced prefill
     * tile) takes the prefill family; paged K/V has no other. */
    if (family.pack_gqa && !family.paged &&
        smallest_head_dim(row, registry, count, &family, force) == INT_MAX)
        family.pack_gqa = 0;
    family.warpgroup = warpgroup_family(row, registry, count, &family, force, family_note, sizeof family_note);
    shape = &family;

    head_dim = smallest_head_dim(row, registry, count, shape, force);
    if (head_dim == INT_MAX) return explain_failure(row, registry, count, shape, force, out);
    floor_cost = lowest_cost(row, registry, count, shape, force, head_dim);

    for (i = 0; i < count; i++) {
        const fa_kernel_config *c = &registry[i];
        estimate e;
        if (!eligible(row, c, shape, force) || c->head_dim != head_dim) continue;
        e = estimate_config(row, c, shape);
        if (e.cost * COST_TIE_DEN > floor_cost * COST_TIE_NUM) continue;
        if (best && !outranks(c, &e, best, &best_e, shape, floor_cost < DECODE_LATENCY_ROWS)) continue;
        best = c;
        best_e = e;
    }

    out->config = best;
    out->blocks_per_sm = best_e.blocks_per_sm;
    out->num_splits = best_e.splits;
    out->persistent_blocks = best->warpgroup && best->pass == FA_PASS_FWD && FA_WS_PERSISTENT(best->head_dim)
                                 ? sm_count_of(row) * best_e.blocks_per_sm
                                 : 0;
    out->walk_draws =
        out->persistent_blocks > 0 && walk_draws(shape, best, best_e.splits, out->persistent_blocks);
    describe_choice(row, best, shape, &best_e, family_note, out->reason, sizeof out->reason);
    if (out->persistent_blocks > 0) {
        const size_t n = strlen(out->reason);
        if (out->walk_draws)
            snprintf(out->reason + n, sizeof out->reason - n,
                     ", %d persistent blocks drawing their tiles (masked)", out->persistent_blocks);
        else
            snprintf(out->reason + n, sizeof out->reason - n, ", %d persistent blocks", out->persistent_blocks);
    }
    return FA_OK;
}

/* ---- FLASHATTN_FORCE_TILE ----------------------------------------------------------- */

/* A positive decimal integer without sign or spaces, at most 65536; advances *p. */
static int parse_positive(const char **p, int *value)
{
    long v = 0;
    const char *s = *p;
    if (*s < '0' || *s > '9') return 0;
    while (*s >= '0' && *s <= '9') {
        v = v * 10 + (*s - '0');
        if (v > 65536) return 0;
        s++;
    }
    if (v <= 0) return 0;
    *value = (int)v;
    *p = s;
    return 1;
}

fa_status fa_parse_tile_override(const char *text, fa_tile_override *out)
{
    fa_tile_override t = {0, 0, 0};
    const char *p = text;

    if (!out) return FA_ERR_NULL_POINTER;
    memset(out, 0, sizeof *out);
    if (!text || !*text) return FA_OK;
    if (!parse_positive(&p, &t.tile_m) || *p++ != 'x' || !parse_positive(&p, &t.tile_n))
        return FA_ERR_BAD_TILE_OVERRIDE;
    if (*p == ':' && (++p, !parse_positive(&p, &t.stages))) return FA_ERR_BAD_TILE_OVERRIDE;
    if (*p) return FA_ERR_BAD_TILE_OVERRIDE;
    *out = t;
    return FA_OK;
}
