/*
 * cpu_fwd.c - the CPU forward: FlashAttention's tiled loop with an online softmax in
 * the exp2 domain. Work items are (batch, query tile, head), handed out dynamically to
 * pthreads; each thread owns O(tile) fp32 buffers and never materialises s_q x s_k.
 */
#define _POSIX_C_SOURCE 200809L /* pthreads under strict C99 */

#include "cpu_internal.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define FA_LOG2E 1.4426950408889634f
#define FA_LN2 0.69314718055994531f

/* Tiles when the selection hands over no CPU config: 64 query rows keep the K/V tile
 * reuse high, 256 keys keep K, V and the score tile inside a core's L2. */
#define FA_CPU_DEFAULT_TILE_M 64
#define FA_CPU_DEFAULT_TILE_N 256

typedef struct fa_cpu_job {
    const fa_problem *p;
    fa_cpu_shape shape;
    int64_t *item_start; /* batch + 1 entries: first work item of each sequence */
    int64_t item_count;
    char *arena;         /* FA_CPU_ALIGN-aligned, thread_bytes per worker */
    size_t thread_bytes;
    int64_t next_item;   /* shared counter, atomic */
} fa_cpu_job;

/* One query tile of one head, resolved to pointers and per-sequence lengths. */
typedef struct fa_cpu_item {
    int64_t seqlen_q, seqlen_k;
    int64_t row_begin; /* first query row of the tile, within its sequence */
    int rows;
    const char *q, *k, *v; /* first row of the tile (q) / of the sequence (k, v) */
    char *out;
    float *lse;            /* NULL when not requested */
    float alibi_log2;      /* slope * log2(e); 0 without ALiBi */
} fa_cpu_item;

static size_t element_bytes(fa_dtype dtype)
{
    return dtype == FA_DTYPE_F32 ? 4 : 2;
}

static void tile_sizes(const fa_selection *sel, int *tile_m, int *tile_n)
{
    const fa_kernel_config *config = sel ? sel->config : NULL;
    int is_cpu = config && config->backend == FA_BACKEND_CPU && config->tile_m > 0 &&
                 config->tile_n > 0;
    *tile_m = is_cpu ? config->tile_m : FA_CPU_DEFAULT_TILE_M;
    *tile_n = is_cpu ? config->tile_n : FA_CPU_DEFAULT_TILE_N;
}

static fa_cpu_shape problem_shape(const fa_problem *p, const fa_selection *sel)
{
    int tile_m, tile_n;
    tile_sizes(sel, &tile_m, &tile_n);
    return fa_cpu_make_shape(tile_m, tile_n, p->head_dim);
}

/* Worker threads of a call: the count cpu_backend.c settled, which is also the one the
 * dispatcher planned for. */
static int worker_threads(const fa_context *ctx)
{
    return ctx->row.sm_count;
}

/* Bytes of workspace for `threads` workers, with slack to align a caller's pointer. */
static size_t workspace_bytes_for(const fa_cpu_shape *shape, int threads)
{
    return (size_t)threads * fa_cpu_thread_bytes(shape) + FA_CPU_ALIGN;
}

fa_status fa_cpu_fwd_workspace(fa_context *ctx, const fa_problem *p, const fa_selection *sel,
                               size_t *bytes)
{
    fa_cpu_shape shape = problem_shape(p, sel);
    *bytes = workspace_bytes_for(&shape, worker_threads(ctx));
    return FA_OK;
}

static int64_t ceil_div(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}

/* Work items of sequence b are [item_start[b], item_start[b + 1]): its query tiles times
 * heads, heads fastest so heads sharing a KV head run close together. */
static int64_t *plan_items(const fa_problem *p, int tile_m)
{
    int64_t *start = malloc(sizeof(int64_t) * ((size_t)p->batch + 1));
    int b;
    if (!start)
        return NULL;
    start[0] = 0;
    for (b = 0; b < p->batch; b++)
        start[b + 1] = start[b] + ceil_div(fa_problem_seqlen_q(p, b), tile_m) * p->heads;
    return start;
}

/* The sequence holding `item`: the last b with item_start[b] <= item. */
static int item_batch(const fa_cpu_job *job, int64_t item)
{
    int lo = 0, hi = job->p->batch - 1;
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        if (job->item_start[mid] <= item)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

static const char *operand_at(const void *base, fa_dtype dtype, const fa_strides *st, int b,
                              int64_t row, int head)
{
    int64_t offset = (int64_t)b * st->batch + row * st->row + (int64_t)head * st->head;
    return (const char *)base + offset * (int64_t)element_bytes(dtype);
}

static fa_cpu_item resolve_item(const fa_cpu_job *job, int64_t item)
{
    const fa_problem *p = job->p;
    int b = item_batch(job, item);
    int64_t local = item - job->item_start[b];
    int head = (int)(local % p->heads);
    int head_k = head / (p->heads / p->heads_k);
    int64_t row0_q = fa_problem_row0_q(p, b), row0_k = fa_problem_row0_k(p, b);
    fa_cpu_item it;

    it.seqlen_q = fa_problem_seqlen_q(p, b);
    it.seqlen_k = fa_problem_seqlen_k(p, b);
    it.row_begin = local / p->heads * job->shape.tile_m;
    it.rows = (int)(it.seqlen_q - it.row_begin < job->shape.tile_m ? it.seqlen_q - it.row_begin
                                                                    : job->shape.tile_m);
    it.q = operand_at(p->q, p->dtype, &p->q_stride, b, row0_q + it.row_begin, head);
    it.out = (char *)operand_at(p->out, p->dtype, &p->out_stride, b, row0_q + it.row_begin, head);
    it.k = operand_at(p->k, p->dtype, &p->k_stride, b, row0_k, head_k);
    it.v = operand_at(p->v, p->dtype, &p->v_stride, b, row0_k, head_k);
    it.lse = p->lse ? p->lse + (int64_t)b * p->lse_stride.batch +
                          (int64_t)head * p->lse_stride.head +
                          (row0_q + it.row_begin) * p->lse_stride.row
                    : NULL;
    it.alibi_log2 = p->alibi_slopes
                        ? p->alibi_slopes[(int64_t)b * p->alibi_batch_stride + head] * FA_LOG2E
                        : 0.0f;
    return it;
}

/* Scale folded into q: the whole score transform when there is no softcap, else the
 * 1/softcap that tanh takes. */
static float query_scale(const fa_problem *p)
{
    return p->softcap > 0.0f ? p->softmax_scale / p->softcap : p->softmax_scale * FA_LOG2E;
}

static void load_queries(const fa_cpu_job *job, const fa_cpu_item *it, float *q)
{
    const fa_problem *p = job->p;
    const fa_cpu_shape *shape = &job->shape;
    size_t row_bytes = (size_t)p->q_stride.row * element_bytes(p->dtype);
    float scale = query_scale(p);
    int r;
    for (r = 0; r < it->rows; r++)
        fa_cpu_load_row(q + (size_t)r * shape->head_dim, it->q + r * row_bytes, p->dtype,
                        shape->head_dim, scale);
    memset(q + (size_t)it->rows * shape->head_dim, 0,
           (size_t)(shape->rows_pad - it->rows) * shape->head_dim * sizeof(float));
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

/* A key tile needs masking when some row of the query tile sees only part of it. */
static int tile_straddles_mask(const fa_problem *p, const fa_cpu_item *it, int64_t key_begin,
                               int count)
{
    int64_t first_row = it->row_begin, last_row = it->row_begin + it->rows - 1;
    return key_begin < fa_first_visible_key(last_row, it->seqlen_q, it->seqlen_k, p->window) ||
           key_begin + count > fa_end_visible_key(first_row, it->seqlen_q, it->seqlen_k, p->window);
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
    size_t esize = element_bytes(p->dtype);
    int masked = tile_straddles_mask(p, it, key_begin, count);
    int shaped = p->softcap > 0.0f || p->alibi_slopes;
    fa_cpu_matrix keys = fa_cpu_stage_keys(shape, t->k, it->k + key_begin * k_row * esize,
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
    values = fa_cpu_stage_values(shape, t->v, it->v + key_begin * v_row * esize, p->dtype,
                                 v_row, count);
    fa_cpu_accumulate(shape, t->o, t->s, values, it->rows, count);
}

/* out = o / l and LSE = ln(2^m * l); rows that saw no key get 0 and -inf. */
static void write_rows(const fa_cpu_job *job, const fa_cpu_item *it, const fa_cpu_tiles *t)
{
    const fa_problem *p = job->p;
    size_t out_row_bytes = (size_t)p->out_stride.row * element_bytes(p->dtype);
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

static void run_item(const fa_cpu_job *job, const fa_cpu_tiles *t, int64_t item)
{
    const fa_problem *p = job->p;
    fa_cpu_item it = resolve_item(job, item);
    int64_t last_row = it.row_begin + it.rows - 1;
    /* Visibility bounds are monotone in the row, so the tile's keys lie between the first
     * row's first key and the last row's end: keys outside are never loaded. */
    int64_t key_begin = fa_first_visible_key(it.row_begin, it.seqlen_q, it.seqlen_k, p->window);
    int64_t key_end = fa_end_visible_key(last_row, it.seqlen_q, it.seqlen_k, p->window);
    int64_t j;

    load_queries(job, &it, t->q);
    reset_accumulators(&job->shape, t);
    for (j = key_begin; j < key_end; j += job->shape.tile_n) {
        int count = (int)(key_end - j < job->shape.tile_n ? key_end - j : job->shape.tile_n);
        process_key_tile(job, &it, t, j, count);
    }
    write_rows(job, &it, t);
}

typedef struct fa_cpu_worker {
    fa_cpu_job *job;
    int index;
    pthread_t thread;
} fa_cpu_worker;

static void *worker_main(void *arg)
{
    fa_cpu_worker *w = arg;
    fa_cpu_job *job = w->job;
    fa_cpu_tiles tiles = fa_cpu_carve(&job->shape, job->arena + (size_t)w->index * job->thread_bytes);
    int64_t item;
    while ((item = __atomic_fetch_add(&job->next_item, 1, __ATOMIC_RELAXED)) < job->item_count)
        run_item(job, &tiles, item);
    return NULL;
}

/* Worker 0 is the calling thread; a thread that fails to start just leaves its share to
 * the others through the shared counter. */
static void run_workers(fa_cpu_job *job, fa_cpu_worker *workers, int count)
{
    int started[FA_CPU_MAX_THREADS] = {0};
    int i;
    for (i = 0; i < count; i++) {
        workers[i].job = job;
        workers[i].index = i;
    }
    for (i = 1; i < count; i++)
        started[i] = pthread_create(&workers[i].thread, NULL, worker_main, &workers[i]) == 0;
    worker_main(&workers[0]);
    for (i = 1; i < count; i++)
        if (started[i])
            pthread_join(workers[i].thread, NULL);
}

static char *align_up(void *ptr)
{
    uintptr_t x = (uintptr_t)ptr;
    return (char *)((x + FA_CPU_ALIGN - 1) / FA_CPU_ALIGN * FA_CPU_ALIGN);
}

/* Per-thread tiles from the caller's workspace (fewer threads if it holds fewer), or
 * from a call-owned allocation returned in *owned. */
static fa_status prepare_arena(fa_context *ctx, fa_cpu_job *job, int *threads, void *workspace,
                               size_t workspace_bytes, void **owned)
{
    if (workspace) {
        size_t usable = workspace_bytes > FA_CPU_ALIGN ? workspace_bytes - FA_CPU_ALIGN : 0;
        size_t fit = usable / job->thread_bytes;
        if (fit < 1)
            return fa_fail(ctx, FA_ERR_WORKSPACE_TOO_SMALL,
                           "cpu forward: workspace of %zu bytes holds no %zu-byte thread tile",
                           workspace_bytes, job->thread_bytes);
        *threads = fit < (size_t)*threads ? (int)fit : *threads;
    } else {
        workspace = *owned = malloc(workspace_bytes_for(&job->shape, *threads));
        if (!workspace)
            return fa_fail(ctx, FA_ERR_OUT_OF_MEMORY,
                           "cpu forward: cannot allocate %zu bytes of tiles",
                           workspace_bytes_for(&job->shape, *threads));
    }
    job->arena = align_up(workspace);
    return FA_OK;
}

fa_status fa_cpu_fwd(fa_context *ctx, const fa_problem *p, const fa_selection *sel,
                     void *workspace, size_t workspace_bytes)
{
    fa_cpu_job job;
    fa_cpu_worker workers[FA_CPU_MAX_THREADS];
    void *owned = NULL;
    int threads = worker_threads(ctx);
    fa_status st;

    memset(&job, 0, sizeof job);
    job.p = p;
    job.shape = problem_shape(p, sel);
    job.thread_bytes = fa_cpu_thread_bytes(&job.shape);
    job.item_start = plan_items(p, job.shape.tile_m);
    if (!job.item_start)
        return fa_fail(ctx, FA_ERR_OUT_OF_MEMORY, "cpu forward: out of memory for the work plan");
    job.item_count = job.item_start[p->batch];
    if (job.item_count < threads) /* no idle threads; at least the caller's */
        threads = job.item_count > 0 ? (int)job.item_count : 1;

    st = prepare_arena(ctx, &job, &threads, workspace, workspace_bytes, &owned);
    if (st == FA_OK) {
        int saved_blas = fa_cpu_blas_threads_begin();
        run_workers(&job, workers, threads);
        fa_cpu_blas_threads_end(saved_blas);
    }
    free(owned);
    free(job.item_start);
    return st;
}
