/*
 * cpu_work.c - what the CPU forward and backward share around their tile math: operand
 * addressing, the score scale, mask tests per block, the split of a batch into work
 * items, and the worker threads (pthreads pulling items from one atomic counter, each
 * with its own O(tile) scratch carved from one workspace).
 */
#define _POSIX_C_SOURCE 200809L /* pthreads under strict C99 */

#include "cpu/cpu_internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

const char *fa_cpu_operand_at(const void *base, fa_dtype dtype, const fa_strides *stride,
                              int b, int64_t row, int head)
{
    int64_t offset = (int64_t)b * stride->batch + row * stride->row + (int64_t)head * stride->head;
    if (base == NULL) /* an operand without elements (no keys, no queries): nothing to address */
        return NULL;
    return (const char *)base + offset * (int64_t)fa_dtype_bytes(dtype);
}

float fa_cpu_query_scale(const fa_problem *p)
{
    return p->softcap > 0.0f ? p->softmax_scale / p->softcap : p->softmax_scale * FA_LOG2E;
}

void fa_cpu_tiles_of(const fa_selection *sel, int default_m, int default_n, int *tile_m,
                     int *tile_n)
{
    const fa_kernel_config *config = sel ? sel->config : NULL;
    int is_cpu = config && config->backend == FA_BACKEND_CPU && config->tile_m > 0 &&
                 config->tile_n > 0;
    *tile_m = is_cpu ? config->tile_m : default_m;
    *tile_n = is_cpu ? config->tile_n : default_n;
}

/* Visibility bounds are monotone in the query row, so the block is fully visible exactly
 * when its last row sees its first key and its first row sees its last key. */
int fa_cpu_block_masked(const fa_problem *p, int64_t seqlen_q, int64_t seqlen_k, int64_t q0,
                        int rows, int64_t k0, int keys)
{
    int64_t q_last = q0 + rows - 1;
    return k0 < fa_first_visible_key(q_last, seqlen_q, seqlen_k, p->window) ||
           k0 + keys > fa_end_visible_key(q0, seqlen_q, seqlen_k, p->window);
}

static int64_t ceil_div(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}

int64_t *fa_cpu_item_starts(const fa_problem *p, int64_t (*rows)(const fa_problem *, int),
                            int tile, int per_tile)
{
    int64_t *start = malloc(sizeof(int64_t) * ((size_t)p->batch + 1));
    int b;
    if (!start)
        return NULL;
    start[0] = 0;
    for (b = 0; b < p->batch; b++)
        start[b + 1] = start[b] + ceil_div(rows(p, b), tile) * per_tile;
    return start;
}

fa_cpu_item_pos fa_cpu_item_locate(const int64_t *start, int batch, int64_t item, int tile, int per_tile)
{
    fa_cpu_item_pos pos;
    int lo = 0, hi = batch - 1; /* the sequence: the last b with start[b] <= item */
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        if (start[mid] <= item)
            lo = mid;
        else
            hi = mid - 1;
    }
    pos.batch = lo;
    pos.slot = (int)((item - start[lo]) % per_tile);
    pos.row0 = (item - start[lo]) / per_tile * tile;
    return pos;
}

size_t fa_cpu_workspace_bytes(size_t thread_bytes, int threads)
{
    return (size_t)threads * thread_bytes + FA_CPU_ALIGN;
}

/* The state the workers of one loop share. */
typedef struct pool {
    const fa_cpu_work *work;
    char *arena;       /* FA_CPU_ALIGN-aligned, thread_bytes per worker */
    int64_t next_item; /* atomic */
} pool;

typedef struct worker {
    pool *shared;
    int index;
    pthread_t thread;
} worker;

static void *worker_main(void *arg)
{
    worker *w = arg;
    const fa_cpu_work *work = w->shared->work;
    char *tiles = w->shared->arena + (size_t)w->index * work->thread_bytes;
    int64_t item;
    while ((item = __atomic_fetch_add(&w->shared->next_item, 1, __ATOMIC_RELAXED)) <
           work->item_count)
        work->run(work->job, tiles, item);
    return NULL;
}

/* Worker 0 is the calling thread; a thread that fails to start just leaves its share to
 * the others through the shared counter. */
static void run_workers(pool *shared, int count)
{
    worker workers[FA_CPU_MAX_THREADS];
    int started[FA_CPU_MAX_THREADS] = {0};
    int i;
    for (i = 0; i < count; i++) {
        workers[i].shared = shared;
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

/* Per-worker scratch from the caller's workspace (fewer workers if it holds fewer), or
 * from a call-owned allocation returned in *owned. */
static fa_status prepare_arena(fa_context *ctx, const fa_cpu_work *work, int *threads,
                               void *workspace, size_t workspace_bytes, pool *shared,
                               void **owned)
{
    size_t want = fa_cpu_workspace_bytes(work->thread_bytes, *threads);
    if (workspace) {
        size_t usable = workspace_bytes > FA_CPU_ALIGN ? workspace_bytes - FA_CPU_ALIGN : 0;
        size_t fit = usable / work->thread_bytes;
        if (fit < 1)
            return fa_fail(ctx, FA_ERR_WORKSPACE_TOO_SMALL,
                           "%s: workspace of %zu bytes holds no %zu-byte thread tile",
                           work->name, workspace_bytes, work->thread_bytes);
        *threads = fit < (size_t)*threads ? (int)fit : *threads;
    } else {
        workspace = *owned = malloc(want);
        if (!workspace)
            return fa_fail(ctx, FA_ERR_OUT_OF_MEMORY, "%s: cannot allocate %zu bytes of tiles",
                           work->name, want);
    }
    shared->arena = align_up(workspace);
    return FA_OK;
}

fa_status fa_cpu_run(fa_context *ctx, const fa_cpu_work *work, void *workspace,
                     size_t workspace_bytes)
{
    pool shared;
    void *owned = NULL;
    int threads = ctx->row.sm_count;
    fa_status st;

    if (work->item_count < threads) /* no idle threads; at least the caller's */
        threads = work->item_count > 0 ? (int)work->item_count : 1;
    memset(&shared, 0, sizeof shared);
    shared.work = work;
    st = prepare_arena(ctx, work, &threads, workspace, workspace_bytes, &shared, &owned);
    if (st == FA_OK) {
        int saved_blas = fa_cpu_blas_threads_begin();
        run_workers(&shared, threads);
        fa_cpu_blas_threads_end(saved_blas);
    }
    free(owned);
    return st;
}
