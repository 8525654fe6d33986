/*
 * cpu_fwd.c - the CPU forward: FlashAttention's tiled loop with an online softmax in
 * the exp2 domain. Work items are (batch, query tile, head), handed out dynamically to
 * the workers of cpu_work.c; each worker owns O(tile) fp32 buffers and never
 * materialises s_q x s_k. Keys are found through fa_cpu_key_row, the one place that
 * knows contiguous K/V from paged pools.
 */
#include "cpu/cpu_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Tiles when the selection hands over no CPU config: 64 query rows keep the K/V tile
 * reuse high, 256 keys keep K, V and the score tile inside a core's L2. */
#define FA_CPU_DEFAULT_TILE_M 64
#define FA_CPU_DEFAULT_TILE_N 256

typedef struct fa_cpu_job {
    const fa_problem *p;
    fa_cpu_shape shape;
    int64_t *item_start; /* batch + 1 entries: first work item of each sequence */
} fa_cpu_job;

/* One query tile of one head, resolved to pointers and per-sequence lengths. */
typedef struct fa_cpu_item {
    int64_t seqlen_q, seqlen_k;
    int64_t row_begin; /* first query row of the tile, within its sequence */
    int rows;
    int batch, head_k;
    const char *q;     /* first row of the tile */
    char *out;
    float *lse;            /* NULL when not requested */
    float alibi_log2;      /* slope * log2(e); 0 without ALiBi */
} fa_cpu_item;

static fa_cpu_shape problem_shape(const fa_problem *p, const fa_selection *sel)
{
    int tile_m, tile_n;
    fa_cpu_tiles_of(sel, FA_CPU_DEFAULT_TILE_M, FA_CPU_DEFAULT_TILE_N, &tile_m, &tile_n);
    return fa_cpu_make_shape(tile_m, tile_n, p->head_dim);
}

/* Workers: the count cpu_backend.c settled in the row, the one the dispatcher planned. */
fa_status fa_cpu_fwd_workspace(fa_context *ctx, const fa_problem *p, const fa_selection *sel,
                               size_t *bytes)
{
    fa_cpu_shape shape = problem_shape(p, sel);
    *bytes = fa_cpu_workspace_bytes(fa_cpu_thread_bytes(&shape), ctx->row.sm_count);
    return FA_OK;
}

const char *fa_cpu_key_row(const fa_problem *p, const void *base, const fa_strides *stride, int b,
                           int64_t key, int head_k)
{
    int32_t page;
    if (p->block_table == NULL)
        return fa_cpu_operand_at(base, p->dtype, stride, b, fa_problem_row0_k(p, b) + key, head_k);
    page = p->block_table[(int64_t)b * p->block_table_stride + key / p->page_size];
    return fa_cpu_operand_at(base, p->dtype, stride, page, key % p->page_size, head_k);
}

/* Keys from `key` on that lie evenly strided in memory, at most `count`: all of them
 * when contiguous, else up to the end of key's page. */
static int strided_keys(const fa_problem *p, int64_t key, int count)
{
    int64_t left;
    if (p->block_table == NULL)
        return count;
    left = p->page_size - key % p->page_size;
    return left < count ? (int)left : count;
}

static fa_cpu_item resolve_item(const fa_cpu_job *job, int64_t item)
{
    const fa_problem *p = job->p;
    fa_cpu_item_pos pos = fa_cpu_item_locate(job->item_start, p->batch, item, job->shape.tile_m, p->heads);
    int b = pos.batch, head = pos.slot;
    int head_k = head / (p->heads / p->heads_k);
    int64_t row0_q = fa_problem_row0_q(p, b);
    fa_cpu_item it;

    it.seqlen_q = fa_problem_seqlen_q(p, b);
    it.seqlen_k = fa_problem_seqlen_k(p, b);
    it.row_begin = pos.row0;
    it.rows = (int)(it.seqlen_q - it.row_begin < job->shape.tile_m ? it.seqlen_q - it.row_begin
                                                                    : job->shape.tile_m);
    it.q = fa_cpu_operand_at(p->q, p->dtype, &p->q_stride, b, row0_q + it.row_begin, head);
    it.out = (char *)fa_cpu_operand_at(p->out, p->dtype, &p->out_stride, b,
                                       row0_q + it.row_begin, head);
    it.batch = b;
    it.head_k = head_k;
    it.lse = p->lse ? p->lse + (int64_t)b * p->lse_stride.batch +
                          (int64_t)head * p->lse_stride.head +
                          (row0_q + it.row_begin) * p->lse_stride.row
                    : NULL;
    it.alibi_log2 = p->alibi_slopes
                        ? p->alibi_slopes[(int64_t)b * p->alibi_batch_stride + head] * FA_LOG2E
                        : 0.0f;
    return it;
}

static void reset_accumulators(const fa_cpu_shape *shape, const fa_cpu_tiles *t)
{
    int r;
    memset(t->o, 0, (size_t)shape->rows_pad * shape->dim_pad * sizeof(float));
    for (r = 0; r < shape->rows_pad; r++) {
        t->m[r] = -INFINITY;
        t->l[r] = 0.0f;
    }
}

static void fill(float *x, int64_t n, float value)
{
    int64_t c;
    for (c = 0; c < n; c++)
        x[c] = value;
}

/* Softcap and ALiBi, in the log2 domain, on one row of raw scores. */
static void transform_scores(const fa_problem *p, const fa_cpu_item *it, float *row,
                             int64_t query, int64_t key_begin, int count)
{
    int c;
    if (p->softcap > 0.0f) {
        float cap_log2 = p->softcap * FA_LOG2E;
        for (c = 0; c < count; c++)
            row[c] = cap_log2 * tanhf(row[c]);
    }
    if (p->alibi_slopes)
        for (c = 0; c < count; c++)
            row[c] -= it->alibi_log2 *
                      fa_alibi_distance(query, key_begin + c, it->seqlen_q, it->seqlen_k);
}

/* -inf on the keys of [key_begin, key_begin + count) this query row may not see. */
static void mask_row(const fa_problem *p, const fa_cpu_item *it, float *row, int64_t query,
                     int64_t key_begin, int count)
{
    int64_t lo = fa_first_visible_key(query, it->seqlen_q, it->seqlen_k, p->window) - key_begin;
    int64_t hi = fa_end_visible_key(query, it->seqlen_q, it->seqlen_k, p->window) - key_begin;
    lo = lo < 0 ? 0 : lo > count ? count : lo;
    hi = hi < lo ? lo : hi > count ? count : hi;
    fill(row, lo, -INFINITY);
    fill(row + hi, count - hi, -INFINITY);
}

/* Online softmax: turns row r's scores into probabilities against the new running max
 * and rescales what was accumulated under the old one. */
static void softmax_update(const fa_cpu_shape *shape, const fa_cpu_tiles *t, int r, int count)
{
    float *row = t->s + (size_t)r * shape->keys_pad;
    float tile_max = fa_cpu_row_max(row, count);
    float new_max = tile_max > t->m[r] ? tile_max : t->m[r];
    float rescale;
    if (new_max == -INFINITY) { /* nothing visible yet: contribute nothing */
        memset(row, 0, (size_t)count * sizeof(float));
        return;
    }
    rescale = exp2f(t->m[r] - new_max);
    t->l[r] = t->l[r] * rescale + fa_cpu_exp2_row(row, count, new_max);
    t->m[r] = new_max;
    if (rescale != 1.0f)
        fa_cpu_scale_row(t->o + (size_t)r * shape->dim_pad, shape->head_dim, rescale);
}

static void process_key_tile(const fa_cpu_job *job, const fa_cpu_item *it,
                             const fa_cpu_tiles *t, int64_t key_begin, int count)
{
    const fa_problem *p = job->p;
    const fa_cpu_shape *shape = &job->shape;
    int64_t k_row = p->k_stride.row, v_row = p->v_stride.row;
    int masked = fa_cpu_block_masked(p, it->seqlen_q, it->seqlen_k, it->row_begin, it->rows,
                                     key_begin, count);
    int shaped = p->softcap > 0.0f || p->alibi_slopes;
    fa_cpu_matrix keys = fa_cpu_stage_keys(
        shape, t->k, fa_cpu_key_row(p, p->k, &p->k_stride, it->batch, key_begin, it->head_k),
        p->dtype, k_row, count);
    fa_cpu_matrix values;
    int r;

    fa_cpu_scores(shape, t->s, t->q, keys, it->rows, count);
    for (r = 0; r < it->rows; r++) {
        float *row = t->s + (size_t)r * shape->keys_pad;
        if (shaped)
            transform_scores(p, it, row, it->row_begin + r, key_begin, count);
        if (masked)
            mask_row(p, it, row, it->row_begin + r, key_begin, count);
        softmax_update(shape, t, r, count);
    }
    values = fa_cpu_stage_values(
        shape, t->v, fa_cpu_key_row(p, p->v, &p->v_stride, it->batch, key_begin, it->head_k),
        p->dtype, v_row, count);
    fa_cpu_accumulate(shape, t->o, t->s, values, it->rows, count);
}

/* out = o / l and LSE = ln(2^m * l); rows that saw no key get 0 and -inf. */
static void write_rows(const fa_cpu_job *job, const fa_cpu_item *it, const fa_cpu_tiles *t)
{
    const fa_problem *p = job->p;
    size_t out_row_bytes = (size_t)p->out_stride.row * fa_dtype_bytes(p->dtype);
    int r;
    for (r = 0; r < it->rows; r++) {
        float l = t->l[r];
        fa_cpu_store_row(it->out + r * out_row_bytes, p->dtype,
                         t->o + (size_t)r * job->shape.dim_pad, p->head_dim,
                         l > 0.0f ? 1.0f / l : 0.0f);
        if (it->lse)
            it->lse[r * p->lse_stride.row] =
                l > 0.0f ? (t->m[r] + log2f(l)) * FA_LN2 : -INFINITY;
    }
}

static void run_item(const void *job_arg, char *tiles, int64_t item)
{
    const fa_cpu_job *job = job_arg;
    const fa_problem *p = job->p;
    fa_cpu_tiles t = fa_cpu_carve(&job->shape, tiles);
    fa_cpu_item it = resolve_item(job, item);
    int64_t last_row = it.row_begin + it.rows - 1;
    /* Visibility bounds are monotone in the row, so the tile's keys lie between the first
     * row's first key and the last row's end: keys outside are never loaded. */
    int64_t key_begin = fa_first_visible_key(it.row_begin, it.seqlen_q, it.seqlen_k, p->window);
    int64_t key_end = fa_end_visible_key(last_row, it.seqlen_q, it.seqlen_k, p->window);
    int64_t j;
    int count;

    fa_cpu_load_tile(&job->shape, t.q, it.q, p->dtype, p->q_stride.row, it.rows,
                     fa_cpu_query_scale(p));
    reset_accumulators(&job->shape, &t);
    /* A tile of paged keys stops at its page's end: each tile is one strided run. */
    for (j = key_begin; j < key_end; j += count) {
        count = strided_keys(p, j, (int)(key_end - j < job->shape.tile_n ? key_end - j
                                                                          : job->shape.tile_n));
        process_key_tile(job, &it, &t, j, count);
    }
    write_rows(job, &it, &t);
}

fa_status fa_cpu_fwd(fa_context *ctx, const fa_problem *p, const fa_selection *sel,
                     void *workspace, size_t workspace_bytes)
{
    fa_cpu_job job;
    fa_cpu_work work;
    fa_status st = fa_cpu_check_pages(ctx, p);

    if (st != FA_OK)
        return st;
    job.p = p;
    job.shape = problem_shape(p, sel);
    /* Heads fastest within a query tile, so heads sharing a KV head run close together. */
    job.item_start = fa_cpu_item_starts(p, fa_problem_seqlen_q, job.shape.tile_m, p->heads);
    if (!job.item_start)
        return fa_fail(ctx, FA_ERR_OUT_OF_MEMORY, "cpu forward: out of memory for the work plan");
    work.run = run_item;
    work.job = &job;
    work.item_count = job.item_start[p->batch];
    work.thread_bytes = fa_cpu_thread_bytes(&job.shape);
    work.name = "cpu forward";
    st = fa_cpu_run(ctx, &work, workspace, workspace_bytes);
    free(job.item_start);
    return st;
}
