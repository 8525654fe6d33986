/*
 * cpu_internal.h - pieces shared by the CPU backend's files: the per-thread tile layout
 * and the tile-level math primitives (products, exp2, row reductions, dtype staging).
 */
#ifndef FA_CPU_INTERNAL_H
#define FA_CPU_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "fa_internal.h"

/* Tile geometry of one forward call. Buffers are padded so the own-loop kernels can run
 * whole register blocks: rows to FA_CPU_ROW_BLOCK, keys and head dim to FA_CPU_COL_BLOCK. */
#define FA_CPU_ROW_BLOCK 4
#define FA_CPU_COL_BLOCK 32
#define FA_CPU_ALIGN 64
/* Upper bound on worker threads of one call (a larger request is capped). The workers
 * are the CPU's "SMs": cpu_backend.c keeps their count in ctx->row.sm_count. */
#define FA_CPU_MAX_THREADS 256

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

/* The forward and its workspace query (cpu_fwd.c), as fa_cpu_ops exposes them. */
fa_status fa_cpu_fwd_workspace(fa_context *ctx, const fa_problem *p, const fa_selection *sel,
                               size_t *bytes);
fa_status fa_cpu_fwd(fa_context *ctx, const fa_problem *p, const fa_selection *sel,
                     void *workspace, size_t workspace_bytes);

/* Keep the BLAS library single-threaded inside worker threads; returns what to restore. */
int fa_cpu_blas_threads_begin(void);
void fa_cpu_blas_threads_end(int saved);

#endif /* FA_CPU_INTERNAL_H */
