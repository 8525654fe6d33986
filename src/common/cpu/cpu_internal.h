/*
 * cpu_internal.h - pieces shared by the CPU backend's files: the per-thread tile layout,
 * the tile-level math primitives (products, exp2, row reductions, dtype staging), and the
 * work items and worker threads the forward and the backward both run on (cpu_work.c).
 */
#ifndef FA_CPU_INTERNAL_H
#define FA_CPU_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "api/problem.h"
#include "api/tensor_geometry.h"

/* Tile geometry of one forward call. Buffers are padded so the own-loop kernels can run
 * whole register blocks: rows to FA_CPU_ROW_BLOCK, keys and head dim to FA_CPU_COL_BLOCK. */
#define FA_CPU_ROW_BLOCK 4
#define FA_CPU_COL_BLOCK 32
#define FA_CPU_ALIGN 64
/* Upper bound on worker threads of one call (a larger request is capped). The workers
 * are the CPU's "SMs": cpu_backend.c keeps their count in ctx->row.sm_count. */
#define FA_CPU_MAX_THREADS 256

#define FA_LOG2E 1.4426950408889634f
#define FA_LN2 0.69314718055994531f

typedef struct fa_cpu_shape {
    int tile_m, tile_n, head_dim;
    int rows_pad;  /* tile_m rounded up to FA_CPU_ROW_BLOCK   */
    int keys_pad;  /* tile_n rounded up to FA_CPU_COL_BLOCK   */
    int dim_pad;   /* head_dim rounded up to FA_CPU_COL_BLOCK */
} fa_cpu_shape;

/* One thread's tiles, all fp32. q: rows_pad x head_dim (pre-scaled), s: rows_pad x keys_pad
 * (scores, then probabilities), o: rows_pad x dim_pad (unnormalised output), k and v:
 * staged key/value tiles (layout private to cpu_kernels.c), m and l: running row max
 * (log2 domain) and row sum. */
typedef struct fa_cpu_tiles {
    float *q, *s, *o, *k, *v, *m, *l;
} fa_cpu_tiles;

/* A read-only fp32 matrix: element (r, c) at data[r * ld + c] (layout per producer). */
typedef struct fa_cpu_matrix {
    const float *data;
    int64_t ld;
} fa_cpu_matrix;

fa_cpu_shape fa_cpu_make_shape(int tile_m, int tile_n, int head_dim);
/* Bytes of `count` floats rounded up to FA_CPU_ALIGN, so carved buffers stay aligned. */
size_t fa_cpu_aligned_floats(int count);
size_t fa_cpu_thread_bytes(const fa_cpu_shape *shape);
/* Carves one thread's tiles out of fa_cpu_thread_bytes() bytes at an FA_CPU_ALIGN base. */
fa_cpu_tiles fa_cpu_carve(const fa_cpu_shape *shape, void *base);

/* Widen `n` elements of `dtype` at src to fp32, times `scale`. */
void fa_cpu_load_row(float *dst, const void *src, fa_dtype dtype, int n, float scale);
/* Narrow `n` fp32 values times `scale` into `dtype` at dst. */
void fa_cpu_store_row(void *dst, fa_dtype dtype, const float *src, int n, float scale);

/* Present `rows` key (value) rows of `dtype` starting at src, `row_stride` elements apart,
 * to fa_cpu_scores (fa_cpu_accumulate): either in place or staged into `buf`. */
fa_cpu_matrix fa_cpu_stage_keys(const fa_cpu_shape *shape, float *buf, const void *src,
                                fa_dtype dtype, int64_t row_stride, int rows);
fa_cpu_matrix fa_cpu_stage_values(const fa_cpu_shape *shape, float *buf, const void *src,
                                  fa_dtype dtype, int64_t row_stride, int rows);

/* 1 when staged keys and staged values share one layout (the BLAS build), so a single
 * staging serves both products. */
int fa_cpu_staging_shared(void);

/* sum_c x[c] * y[c] over `n` elements of `dtype`, in fp32. */
float fa_cpu_dot_rows(const void *x, const void *y, fa_dtype dtype, int n);

/* s[r][c] = q[r] . key[c] for r < rows, c < keys (s row stride keys_pad). */
void fa_cpu_scores(const fa_cpu_shape *shape, float *s, const float *q, fa_cpu_matrix keys,
                   int rows, int keys_count);
/* o[r] += sum_c p[r][c] * value[c] for r < rows (p row stride keys_pad, o dim_pad). */
void fa_cpu_accumulate(const fa_cpu_shape *shape, float *o, const float *p,
                       fa_cpu_matrix values, int rows, int keys_count);

float fa_cpu_row_max(const float *x, int n);
/* x[c] = 2^(x[c] - shift); returns the sum of the new values. */
float fa_cpu_exp2_row(float *x, int n, float shift);
void fa_cpu_scale_row(float *x, int n, float factor);

/* Rows of `rows` elements of `dtype`, `row_stride` elements apart, widened times `scale`
 * into dst (row stride head_dim); rows rows..rows_pad-1 are zeroed so whole register
 * blocks of the products stay finite. */
void fa_cpu_load_tile(const fa_cpu_shape *shape, float *dst, const void *src, fa_dtype dtype,
                      int64_t row_stride, int rows, float scale);

/* ---- work items and workers (cpu_work.c) ---- */

/* Address of element (b, row, head, 0) of an operand with these strides. */
const char *fa_cpu_operand_at(const void *base, fa_dtype dtype, const fa_strides *stride,
                              int b, int64_t row, int head);
/* The factor q is scaled by before q.k: the whole score transform into the log2 domain
 * without softcap, else the 1/softcap that tanh takes. */
float fa_cpu_query_scale(const fa_problem *p);
/* The config's tiles when the selection is a CPU config, else the given defaults. */
void fa_cpu_tiles_of(const fa_selection *sel, int default_m, int default_n, int *tile_m,
                     int *tile_n);
/* 1 when some (query, key) pair of the block [q0, q0 + rows) x [k0, k0 + keys) is not
 * visible, i.e. the block needs masking. */
int fa_cpu_block_masked(const fa_problem *p, int64_t seqlen_q, int64_t seqlen_k, int64_t q0,
                        int rows, int64_t k0, int keys);

/* Work items of sequence b are [start[b], start[b + 1]): ceil(rows(p, b) / tile) tiles
 * times `per_tile`. Returns a malloc'ed array of batch + 1 entries, NULL when out of
 * memory. */
int64_t *fa_cpu_item_starts(const fa_problem *p, int64_t (*rows)(const fa_problem *, int),
                            int tile, int per_tile);
/* Where work item `item` of fa_cpu_item_starts(.., tile, per_tile) falls: its sequence,
 * its slot among the per_tile items of one tile (slots fastest) and its tile's first row. */
typedef struct fa_cpu_item_pos {
    int batch;
    int slot;
    int64_t row0;
} fa_cpu_item_pos;
fa_cpu_item_pos fa_cpu_item_locate(const int64_t *start, int batch, int64_t item, int tile, int per_tile);

/* One parallel loop: run(job, tiles, item) for every item in [0, item_count), handed out
 * dynamically to the workers; each worker owns thread_bytes of FA_CPU_ALIGN-aligned
 * scratch at `tiles`. `name` prefixes error messages ("cpu forward"). */
typedef struct fa_cpu_work {
    void (*run)(const void *job, char *tiles, int64_t item);
    const void *job;
    int64_t item_count;
    size_t thread_bytes;
    const char *name;
} fa_cpu_work;

/* Workspace for `threads` workers of thread_bytes each, with slack to align a caller's
 * pointer. */
size_t fa_cpu_workspace_bytes(size_t thread_bytes, int threads);
/* Runs the loop on ctx's workers (fewer when the items or a caller's workspace are
 * fewer), on the workspace or on a call-owned allocation when workspace is NULL. */
fa_status fa_cpu_run(fa_context *ctx, const fa_cpu_work *work, void *workspace,
                     size_t workspace_bytes);

/* Row `key` of sequence b's keys in k or v (base and stride of either): contiguous, or
 * through the block table of a paged problem. */
const char *fa_cpu_key_row(const fa_problem *p, const void *base, const fa_strides *stride, int b,
                           int64_t key, int head_k);

/* The page ids a paged problem reads (those covering each sequence's keys) lie in the
 * pool: the host check of device data that the GPU backends do on the device
 * (cpu_kvcache.c). FA_OK for contiguous problems. */
fa_status fa_cpu_check_pages(fa_context *ctx, const fa_problem *p);

/* fa_fwd_kvcache (cpu_kvcache.c): device data checked, append (with rotary), then the
 * forward over the cache. */
fa_status fa_cpu_fwd_kvcache_workspace(fa_context *ctx, const fa_kvcache_problem *p,
                                       const fa_selection *sel, size_t *bytes);
fa_status fa_cpu_fwd_kvcache(fa_context *ctx, const fa_kvcache_problem *p, const fa_selection *sel,
                             void *workspace, size_t workspace_bytes);

/* The forward and its workspace query (cpu_fwd.c), as fa_cpu_ops exposes them. */
fa_status fa_cpu_fwd_workspace(fa_context *ctx, const fa_problem *p, const fa_selection *sel,
                               size_t *bytes);
fa_status fa_cpu_fwd(fa_context *ctx, const fa_problem *p, const fa_selection *sel,
                     void *workspace, size_t workspace_bytes);

/* The backward and its workspace query (cpu_bwd.c). */
/* fa_combine over host tensors (cpu_combine.c). */
fa_status fa_cpu_combine(fa_context *ctx, const fa_combine_problem *p);
fa_status fa_cpu_bwd_workspace(fa_context *ctx, const fa_problem *p, const fa_selection *sel,
                               size_t *bytes);
fa_status fa_cpu_bwd(fa_context *ctx, const fa_problem *p, const fa_selection *sel,
                     void *workspace, size_t workspace_bytes);

/* Keep the BLAS library single-threaded inside worker threads; returns what to restore. */
int fa_cpu_blas_threads_begin(void);
void fa_cpu_blas_threads_end(int saved);

#endif /* FA_CPU_INTERNAL_H */
