/*
 * cpu_bwd.c - the CPU backward, FlashAttention-2's algorithm: P is recomputed from q, k
 * and the forward's LSE, dP = dO V^T, dS = P (dP - D) with D = rowsum(dO o O) (times
 * 1 - tanh^2 under softcap), and dV = P^T dO, dK = scale dS^T Q, dQ = scale dS K, all
 * accumulated in fp32.
 *
 * Two kinds of work item share one pool of workers (cpu_work.c):
 *  - key items (batch, kv head, key tile) own dK and dV of their tile: they loop over
 *    the query heads of the GQA group and the query tiles that see the tile, always in
 *    the same order, so the sums over the group need no atomics and no reduction;
 *  - query items (batch, head, query tile) own dQ of their tile: they loop over the key
 *    tiles the query tile sees and recompute P and dS a second time.
 * The second pass costs two more tile products (7 instead of 5) but every output
 * element is written by exactly one item, computed the same way whichever worker runs
 * it: results are bitwise identical run to run and for any thread count, so
 * params.deterministic is always honoured, and no worker needs an s_q x d dQ buffer.
 * A worker holds O(tile) fp32 scratch; nothing is s_q x s_k.
 *
 * Key items work on the transposed block (rows are keys, columns queries: S^T = K Q^T),
 * which turns all four of their products into the forward's two primitives,
 * fa_cpu_scores (A B^T) and fa_cpu_accumulate (C += A B).
 */
#include "cpu/cpu_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Tiles when the selection hands over no CPU config: dispatch.c's larger tile of the d256
 * class, which fits every head dim. */
#define BWD_DEFAULT_TILE_M 64
#define BWD_DEFAULT_TILE_N 128

typedef struct bwd_job {
    const fa_problem *p;
    fa_cpu_shape key_shape;   /* key items: rows are the key tile, columns a query tile */
    fa_cpu_shape query_shape; /* query items: rows are the query tile, columns a key tile */
    int64_t *key_start;       /* batch + 1 entries: first key item of each sequence */
    int64_t *query_start;     /* batch + 1 entries: first query item, counted from 0 */
    int64_t key_items;        /* items [0, key_items) are key items, the rest query items */
} bwd_job;

/* One worker's fp32 scratch for one shape (rows x columns). */
typedef struct bwd_tiles {
    float *a, *b;        /* row operands, rows_pad x head_dim: K scaled and V (key items),
                            Q scaled and dO (query items) */
    float *s, *ds;       /* rows_pad x keys_pad: scores, then P; dP, then dS */
    float *acc0, *acc1;  /* rows_pad x dim_pad: dK and dV (key items), dQ (query items) */
    float *stage[4];     /* keys_pad x dim_pad: column operands staged for the products */
    float *lse2, *delta; /* one per query row: LSE in log2 units (+inf: empty row), D */
} bwd_tiles;

/* One sequence of the batch. */
typedef struct bwd_seq {
    int b;
    int64_t seqlen_q, seqlen_k; /* seqlen_k: the keys that count (seqused_k applied) */
    int64_t row0_q, row0_k;     /* first varlen row; 0 when fixed-length */
} bwd_seq;

/* Where one row of a block lies: element c is query `query + c * query_step` against
 * key `key + c * key_step`; columns [lo, hi) are visible; its LSE and D are
 * lse2[c * step] and delta[c * step] (step 0: one value for the whole row). */
typedef struct bwd_row {
    int64_t query, key;
    int query_step, key_step;
    int64_t lo, hi;
    const float *lse2, *delta;
    int step;
} bwd_row;

static int min_int(int64_t a, int64_t b)
{
    return (int)(a < b ? a : b);
}

/* ---- scratch ------------------------------------------------------------------------ */

/* Reserves `count` floats at *offset; with base NULL only the size is counted. */
static float *place(char *base, size_t *offset, int count)
{
    float *at = base ? (float *)(base + *offset) : NULL;
    *offset += fa_cpu_aligned_floats(count);
    return at;
}

static bwd_tiles carve(const fa_cpu_shape *sh, char *base, size_t *bytes)
{
    bwd_tiles t;
    size_t offset = 0;
    int per_query = sh->rows_pad > sh->keys_pad ? sh->rows_pad : sh->keys_pad;
    int i;
    t.a = place(base, &offset, sh->rows_pad * sh->head_dim);
    t.b = place(base, &offset, sh->rows_pad * sh->head_dim);
    t.s = place(base, &offset, sh->rows_pad * sh->keys_pad);
    t.ds = place(base, &offset, sh->rows_pad * sh->keys_pad);
    t.acc0 = place(base, &offset, sh->rows_pad * sh->dim_pad);
    t.acc1 = place(base, &offset, sh->rows_pad * sh->dim_pad);
    for (i = 0; i < 4; i++)
        t.stage[i] = place(base, &offset, sh->keys_pad * sh->dim_pad);
    t.lse2 = place(base, &offset, per_query);
    t.delta = place(base, &offset, per_query);
    if (bytes)
        *bytes = offset;
    return t;
}

static size_t thread_bytes(const bwd_job *job)
{
    size_t key_bytes, query_bytes;
    carve(&job->key_shape, NULL, &key_bytes);
    carve(&job->query_shape, NULL, &query_bytes);
    return key_bytes > query_bytes ? key_bytes : query_bytes;
}

static void make_shapes(const fa_problem *p, const fa_selection *sel, bwd_job *job)
{
    int tile_m, tile_n;
    fa_cpu_tiles_of(sel, BWD_DEFAULT_TILE_M, BWD_DEFAULT_TILE_N, &tile_m, &tile_n);
    job->key_shape = fa_cpu_make_shape(tile_n, tile_m, p->head_dim);
    job->query_shape = fa_cpu_make_shape(tile_m, tile_n, p->head_dim);
}

fa_status fa_cpu_bwd_workspace(fa_context *ctx, const fa_problem *p, const fa_selection *sel,
                               size_t *bytes)
{
    bwd_job job;
    make_shapes(p, sel, &job);
    *bytes = fa_cpu_workspace_bytes(thread_bytes(&job), ctx->row.sm_count);
    return FA_OK;
}

/* ---- sequences and per-row terms ---------------------------------------------------- */

/* Key rows sequence b has in the tensors, seqused_k not applied: each gets a gradient,
 * zero past seqused_k. */
static int64_t key_rows(const fa_problem *p, int b)
{
    return p->varlen ? (int64_t)p->cu_seqlens_k[b + 1] - p->cu_seqlens_k[b] : p->seqlen_k;
}

static bwd_seq sequence(const fa_problem *p, int b)
{
    bwd_seq sq;
    sq.b = b;
    sq.seqlen_q = fa_problem_seqlen_q(p, b);
    sq.seqlen_k = fa_problem_seqlen_k(p, b);
    sq.row0_q = fa_problem_row0_q(p, b);
    sq.row0_k = fa_problem_row0_k(p, b);
    return sq;
}

static const char *q_row(const fa_problem *p, const bwd_seq *sq, const void *base,
                         const fa_strides *stride, int head, int64_t row)
{
    return fa_cpu_operand_at(base, p->dtype, stride, sq->b, sq->row0_q + row, head);
}

static const char *k_row(const fa_problem *p, const bwd_seq *sq, const void *base,
                         const fa_strides *stride, int head_k, int64_t row)
{
    return fa_cpu_operand_at(base, p->dtype, stride, sq->b, sq->row0_k + row, head_k);
}

static float alibi_log2(const fa_problem *p, const bwd_seq *sq, int head)
{
    if (!p->alibi_slopes)
        return 0.0f;
    return p->alibi_slopes[(int64_t)sq->b * p->alibi_batch_stride + head] * FA_LOG2E;
}

/* +inf for a row that saw no key (LSE -inf): its probabilities come out exp2(-inf) = 0
 * instead of exp2(-inf + inf) = NaN. */
static float lse_log2(const fa_problem *p, const bwd_seq *sq, int head, int64_t row)
{
    float lse = p->lse[(int64_t)sq->b * p->lse_stride.batch + (int64_t)head * p->lse_stride.head +
                       (sq->row0_q + row) * p->lse_stride.row];
    return lse == -INFINITY ? INFINITY : lse * FA_LOG2E;
}

/* D = dO . O of one query row, in fp32 from the stored (possibly fp16/bf16) values. */
static float row_delta(const fa_problem *p, const bwd_seq *sq, int head, int64_t row)
{
    return fa_cpu_dot_rows(q_row(p, sq, p->out, &p->out_stride, head, row),
                           q_row(p, sq, p->dout, &p->dout_stride, head, row), p->dtype,
                           p->head_dim);
}

static void load_row_terms(const fa_problem *p, const bwd_seq *sq, int head, int64_t row0,
                           int count, float *lse2, float *delta)
{
    int r;
    for (r = 0; r < count; r++) {
        lse2[r] = lse_log2(p, sq, head, row0 + r);
        delta[r] = row_delta(p, sq, head, row0 + r);
    }
}

/* ---- scores to gradients ------------------------------------------------------------ */

/* Softcap in the log2 domain, and the chain rule through it: s holds q.k * scale / cap. */
static void softcap_row(float cap_log2, float *s, float *ds, int count)
{
    int c;
    for (c = 0; c < count; c++) {
        float t = tanhf(s[c]);
        s[c] = cap_log2 * t;
        ds[c] *= 1.0f - t * t;
    }
}

static void alibi_row(const bwd_seq *sq, float slope_log2, const bwd_row *at, float *s,
                      int count)
{
    int c;
    for (c = 0; c < count; c++)
        s[c] -= slope_log2 * fa_alibi_distance(at->query + (int64_t)c * at->query_step,
                                               at->key + (int64_t)c * at->key_step,
                                               sq->seqlen_q, sq->seqlen_k);
}

static void fill(float *x, int64_t n, float value)
{
    int64_t c;
    for (c = 0; c < n; c++)
        x[c] = value;
}

static void mask_row(const bwd_row *at, float *s, int count)
{
    int64_t lo = at->lo < 0 ? 0 : at->lo > count ? count : at->lo;
    int64_t hi = at->hi < lo ? lo : at->hi > count ? count : at->hi;
    fill(s, lo, -INFINITY);
    fill(s + hi, count - hi, -INFINITY);
}

/* Turns one row of raw scores s and of dP into P and dS, the gradient with respect to
 * the score before softcap (the one q.k * scale feeds). */
static void gradient_row(const fa_problem *p, const bwd_seq *sq, float slope_log2,
                         const bwd_row *at, float *s, float *ds, int count)
{
    int c;
    for (c = 0; c < count; c++)
        ds[c] -= at->delta[c * at->step];
    if (p->softcap > 0.0f)
        softcap_row(p->softcap * FA_LOG2E, s, ds, count);
    if (p->alibi_slopes)
        alibi_row(sq, slope_log2, at, s, count);
    mask_row(at, s, count);
    for (c = 0; c < count; c++)
        s[c] -= at->lse2[c * at->step];
    fa_cpu_exp2_row(s, count, 0.0f);
    for (c = 0; c < count; c++)
        ds[c] *= s[c];
}

static void store_tile(const fa_problem *p, void *base, const fa_strides *stride, int b,
                       int64_t row0, int head, const float *acc, int dim_pad, int rows,
                       float scale)
{
    int r;
    for (r = 0; r < rows; r++)
        fa_cpu_store_row((char *)fa_cpu_operand_at(base, p->dtype, stride, b, row0 + r, head),
                         p->dtype, acc + (size_t)r * dim_pad, p->head_dim, scale);
}

/* ---- key items: dK and dV ----------------------------------------------------------- */

/* keys x queries block of query head `head`: the key tile is in t->a (K scaled) and
 * t->b (V); adds P^T dO to dV and dS^T Q to dK. */
static void key_block(const bwd_job *job, const bwd_seq *sq, const bwd_tiles *t, int head,
                      int64_t k0, int keys, int64_t i0, int queries)
{
    const fa_problem *p = job->p;
    const fa_cpu_shape *sh = &job->key_shape;
    const char *q = q_row(p, sq, p->q, &p->q_stride, head, i0);
    const char *dout = q_row(p, sq, p->dout, &p->dout_stride, head, i0);
    int masked = fa_cpu_block_masked(p, sq->seqlen_q, sq->seqlen_k, i0, queries, k0, keys);
    float slope = alibi_log2(p, sq, head);
    fa_cpu_matrix q_cols, dout_cols;
    int r;

    load_row_terms(p, sq, head, i0, queries, t->lse2, t->delta);
    q_cols = fa_cpu_stage_keys(sh, t->stage[0], q, p->dtype, p->q_stride.row, queries);
    dout_cols = fa_cpu_stage_keys(sh, t->stage[1], dout, p->dtype, p->dout_stride.row, queries);
    fa_cpu_scores(sh, t->s, t->a, q_cols, keys, queries);
    fa_cpu_scores(sh, t->ds, t->b, dout_cols, keys, queries);
    for (r = 0; r < keys; r++) {
        int64_t key = k0 + r;
        bwd_row at = {.query = i0, .key = key, .query_step = 1, .hi = queries,
                      .lse2 = t->lse2, .delta = t->delta, .step = 1};
        if (masked) {
            at.lo = fa_first_query_seeing(key, sq->seqlen_q, sq->seqlen_k, p->window) - i0;
            at.hi = fa_end_query_seeing(key, sq->seqlen_q, sq->seqlen_k, p->window) - i0;
        }
        gradient_row(p, sq, slope, &at, t->s + (size_t)r * sh->keys_pad,
                     t->ds + (size_t)r * sh->keys_pad, queries);
    }
    if (!fa_cpu_staging_shared()) {
        dout_cols = fa_cpu_stage_values(sh, t->stage[3], dout, p->dtype, p->dout_stride.row,
                                        queries);
        q_cols = fa_cpu_stage_values(sh, t->stage[2], q, p->dtype, p->q_stride.row, queries);
    }
    fa_cpu_accumulate(sh, t->acc1, t->s, dout_cols, keys, queries);
    fa_cpu_accumulate(sh, t->acc0, t->ds, q_cols, keys, queries);
}

/* Every query head of the group and every query tile that sees keys [k0, k0 + keys). */
static void key_tile_gradients(const bwd_job *job, const bwd_seq *sq, const bwd_tiles *t,
                               int head_k, int64_t k0, int keys)
{
    const fa_problem *p = job->p;
    const fa_cpu_shape *sh = &job->key_shape;
    int group = p->heads / p->heads_k, head;
    int64_t q_begin = fa_first_query_seeing(k0, sq->seqlen_q, sq->seqlen_k, p->window);
    int64_t q_end = fa_end_query_seeing(k0 + keys - 1, sq->seqlen_q, sq->seqlen_k, p->window);
    int64_t i0;

    fa_cpu_load_tile(sh, t->a, k_row(p, sq, p->k, &p->k_stride, head_k, k0), p->dtype,
                     p->k_stride.row, keys, fa_cpu_query_scale(p));
    fa_cpu_load_tile(sh, t->b, k_row(p, sq, p->v, &p->v_stride, head_k, k0), p->dtype,
                     p->v_stride.row, keys, 1.0f);
    for (head = head_k * group; head < (head_k + 1) * group; head++)
        for (i0 = q_begin; i0 < q_end; i0 += sh->tile_n)
            key_block(job, sq, t, head, k0, keys, i0, min_int(q_end - i0, sh->tile_n));
}

/* Item = (key tile, kv head) of a sequence, kv heads fastest. Keys past seqused_k (and
 * keys no query sees) get zero gradients. */
static void run_key_item(const bwd_job *job, char *scratch, int64_t item)
{
    const fa_problem *p = job->p;
    const fa_cpu_shape *sh = &job->key_shape;
    bwd_tiles t = carve(sh, scratch, NULL);
    fa_cpu_item_pos pos = fa_cpu_item_locate(job->key_start, p->batch, item, sh->tile_m, p->heads_k);
    int b = pos.batch, head_k = pos.slot;
    int64_t k0 = pos.row0;
    int rows = min_int(key_rows(p, b) - k0, sh->tile_m);
    bwd_seq sq = sequence(p, b);
    int live = min_int(sq.seqlen_k - k0 > 0 ? sq.seqlen_k - k0 : 0, rows);
    size_t acc_bytes = (size_t)sh->rows_pad * sh->dim_pad * sizeof(float);

    memset(t.acc0, 0, acc_bytes);
    memset(t.acc1, 0, acc_bytes);
    if (live > 0)
        key_tile_gradients(job, &sq, &t, head_k, k0, live);
    store_tile(p, p->dk, &p->dk_stride, b, sq.row0_k + k0, head_k, t.acc0, sh->dim_pad, rows,
               p->softmax_scale);
    store_tile(p, p->dv, &p->dv_stride, b, sq.row0_k + k0, head_k, t.acc1, sh->dim_pad, rows,
               1.0f);
}

/* ---- query items: dQ ---------------------------------------------------------------- */

/* queries x keys block: the query tile is in t->a (Q scaled) and t->b (dO); adds dS K
 * to dQ. */
static void query_block(const bwd_job *job, const bwd_seq *sq, const bwd_tiles *t, int head,
                        int64_t i0, int queries, int64_t k0, int keys)
{
    const fa_problem *p = job->p;
    const fa_cpu_shape *sh = &job->query_shape;
    int head_k = head / (p->heads / p->heads_k);
    const char *k = k_row(p, sq, p->k, &p->k_stride, head_k, k0);
    const char *v = k_row(p, sq, p->v, &p->v_stride, head_k, k0);
    int masked = fa_cpu_block_masked(p, sq->seqlen_q, sq->seqlen_k, i0, queries, k0, keys);
    float slope = alibi_log2(p, sq, head);
    fa_cpu_matrix k_cols = fa_cpu_stage_keys(sh, t->stage[0], k, p->dtype, p->k_stride.row, keys);
    int r;

    fa_cpu_scores(sh, t->s, t->a, k_cols, queries, keys);
    fa_cpu_scores(sh, t->ds, t->b,
                  fa_cpu_stage_keys(sh, t->stage[1], v, p->dtype, p->v_stride.row, keys),
                  queries, keys);
    for (r = 0; r < queries; r++) {
        int64_t query = i0 + r;
        bwd_row at = {.query = query, .key = k0, .key_step = 1, .hi = keys,
                      .lse2 = t->lse2 + r, .delta = t->delta + r, .step = 0};
        if (masked) {
            at.lo = fa_first_visible_key(query, sq->seqlen_q, sq->seqlen_k, p->window) - k0;
            at.hi = fa_end_visible_key(query, sq->seqlen_q, sq->seqlen_k, p->window) - k0;
        }
        gradient_row(p, sq, slope, &at, t->s + (size_t)r * sh->keys_pad,
                     t->ds + (size_t)r * sh->keys_pad, keys);
    }
    if (!fa_cpu_staging_shared())
        k_cols = fa_cpu_stage_values(sh, t->stage[2], k, p->dtype, p->k_stride.row, keys);
    fa_cpu_accumulate(sh, t->acc0, t->ds, k_cols, queries, keys);
}

/* Item = (query tile, head) of a sequence, heads fastest. Visibility bounds are
 * monotone in the row, so the tile's keys lie between the first row's first key and the
 * last row's end. */
static void run_query_item(const bwd_job *job, char *scratch, int64_t item)
{
    const fa_problem *p = job->p;
    const fa_cpu_shape *sh = &job->query_shape;
    bwd_tiles t = carve(sh, scratch, NULL);
    fa_cpu_item_pos pos = fa_cpu_item_locate(job->query_start, p->batch, item, sh->tile_m, p->heads);
    int b = pos.batch, head = pos.slot;
    int64_t i0 = pos.row0;
    bwd_seq sq = sequence(p, b);
    int rows = min_int(sq.seqlen_q - i0, sh->tile_m);
    int64_t k_begin = fa_first_visible_key(i0, sq.seqlen_q, sq.seqlen_k, p->window);
    int64_t k_end = fa_end_visible_key(i0 + rows - 1, sq.seqlen_q, sq.seqlen_k, p->window);
    int64_t j;

    fa_cpu_load_tile(sh, t.a, q_row(p, &sq, p->q, &p->q_stride, head, i0), p->dtype,
                     p->q_stride.row, rows, fa_cpu_query_scale(p));
    fa_cpu_load_tile(sh, t.b, q_row(p, &sq, p->dout, &p->dout_stride, head, i0), p->dtype,
                     p->dout_stride.row, rows, 1.0f);
    load_row_terms(p, &sq, head, i0, rows, t.lse2, t.delta);
    memset(t.acc0, 0, (size_t)sh->rows_pad * sh->dim_pad * sizeof(float));
    for (j = k_begin; j < k_end; j += sh->tile_n)
        query_block(job, &sq, &t, head, i0, rows, j, min_int(k_end - j, sh->tile_n));
    store_tile(p, p->dq, &p->dq_stride, b, sq.row0_q + i0, head, t.acc0, sh->dim_pad, rows,
               p->softmax_scale);
}

/* ---- the call ----------------------------------------------------------------------- */

/* Key items first: with GQA they are the larger ones, so the dynamic hand-out ends on
 * the small query items. */
static void run_item(const void *job_arg, char *scratch, int64_t item)
{
    const bwd_job *job = job_arg;
    if (item < job->key_items)
        run_key_item(job, scratch, item);
    else
        run_query_item(job, scratch, item - job->key_items);
}

fa_status fa_cpu_bwd(fa_context *ctx, const fa_problem *p, const fa_selection *sel,
                     void *workspace, size_t workspace_bytes)
{
    bwd_job job;
    fa_cpu_work work;
    fa_status st;

    job.p = p;
    make_shapes(p, sel, &job);
    job.key_start = fa_cpu_item_starts(p, key_rows, job.key_shape.tile_m, p->heads_k);
    job.query_start = fa_cpu_item_starts(p, fa_problem_seqlen_q, job.query_shape.tile_m,
                                         p->heads);
    if (!job.key_start || !job.query_start) {
        free(job.key_start);
        free(job.query_start);
        return fa_fail(ctx, FA_ERR_OUT_OF_MEMORY, "cpu backward: out of memory for the work plan");
    }
    job.key_items = job.key_start[p->batch];
    work.run = run_item;
    work.job = &job;
    work.item_count = job.key_items + job.query_start[p->batch];
    work.thread_bytes = thread_bytes(&job);
    work.name = "cpu backward";
    st = fa_cpu_run(ctx, &work, workspace, workspace_bytes);
    free(job.key_start);
    free(job.query_start);
    return st;
}
