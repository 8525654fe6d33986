/*
 * problem.h - what the API layer hands to backends: the validated, resolved problem
 * (fa_problem), the context, and the backend operations table each backend provides.
 * api.c checks every argument before a backend sees it; backends may trust fa_problem.
 */
#ifndef FA_PROBLEM_H
#define FA_PROBLEM_H

#include <stddef.h>
#include <stdint.h>

#include "flashattn.h"
#include "select/arch_table.h"
#include "select/dispatch.h"
#include "api/mask.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Element strides of one [batch, row, head, dim] operand; batch stride 0 when varlen. */
typedef struct fa_strides {
    int64_t batch;
    int64_t row;
    int64_t head;
} fa_strides;

typedef struct fa_problem {
    fa_dtype dtype;
    int batch;
    int heads;
    int heads_k;
    int head_dim;
    int64_t seqlen_q;        /* fixed-length s_q; varlen: a bound of the lengths (host */
    int64_t seqlen_k;        /* arrays: the longest; device: max_seqlen_q/k, <= rows)  */
    int varlen;
    int64_t total_q;         /* varlen rows of q / k; fixed: batch * seqlen */
    int64_t total_k;

    const void *q, *k, *v;
    void *out;
    float *lse;              /* NULL: not requested */
    fa_strides q_stride, k_stride, v_stride, out_stride;
    /* LSE strides: [b, h, s_q] fixed; varlen [h, total_q] has batch 0 and row offsets  */
    /* taken from cu_seqlens_q. */
    fa_strides lse_stride;

    const int32_t *cu_seqlens_q, *cu_seqlens_k, *seqused_k; /* backend memory */
    const float *alibi_slopes;                              /* backend memory */
    int64_t alibi_batch_stride;

    /* Backward only (NULL for the forward): out and lse above are then inputs. dq has
     * q's shape, dk/dv k's; dout out's. */
    const void *dout;
    void *dq, *dk, *dv;
    fa_strides dout_stride, dq_stride, dk_stride, dv_stride;

    /* Paged K/V (block_table non-NULL): k and v are page pools whose batch stride is
     * the stride between pages; logical key r of sequence b is row r % page_size of page
     * block_table[b * block_table_stride + r / page_size] (backend memory). seqlen_k is
     * then block_table_width * page_size (fixed length) or the longest sequence
     * (varlen, whose cu_seqlens_k give lengths only: every k_row0 is 0); seqused_k cuts
     * as usual. Page ids are not validated on the host (device data). */
    const int32_t *block_table;
    int64_t block_table_stride;
    int block_table_width;
    int page_size;
    int64_t num_pages;

    float softmax_scale;     /* resolved (never 0)                         */
    float softcap;           /* 0: off                                     */
    fa_window window;        /* causal folded in: right = 0                */
    int num_splits_request;
    int deterministic;
} fa_problem;

/* TMA tensor maps (the warpgroup kernels) take 16-byte-aligned data and byte strides
 * that are positive multiples of 16 below 2^40 (cuTensorMapEncodeTiled's rules; 16-bit
 * elements, so multiples of 8 elements). A varlen operand's batch stride (0) is not one
 * of its map's strides. */
static inline int fa_tma_stride_ok(int64_t elements)
{
    return elements > 0 && elements % 8 == 0 && elements < ((int64_t)1 << 39);
}
static inline int fa_tma_operand_ok(const void *data, const fa_strides *s, int varlen)
{
    return data != NULL && (uintptr_t)data % 16 == 0 && fa_tma_stride_ok(s->row) && fa_tma_stride_ok(s->head) &&
           (varlen || fa_tma_stride_ok(s->batch));
}

/* A validated fa_fwd_kvcache call: the append, and the attention over the cache it
 * feeds. attn is the forward over the cache as fa_fwd would take it: q as given, k/v the
 * cache, seqlen_k the capacity, seqused_k NULL (each backend supplies n_i + s_new from
 * its own memory), and the paging fields set for a paged cache, or, for cache_batch_idx,
 * the contiguous cache read as a pool of b_cache one-page rows with cache_batch_idx as a
 * [b, 1] block table (page_size s_max rounded up to FA_ONE_PAGE_GRANULE keys, at most
 * FA_ONE_PAGE_MAX: the kernels read pages as whole 16-key groups; capacity stays s_max). */
#define FA_ONE_PAGE_GRANULE 256 /* the longest key tile of any instance */
#define FA_ONE_PAGE_MAX (INT32_MAX / FA_ONE_PAGE_GRANULE * FA_ONE_PAGE_GRANULE)
typedef struct fa_kvcache_problem {
    fa_problem attn;
    const void *k_new, *v_new;          /* NULL: no append                                */
    fa_strides k_new_stride, v_new_stride;
    int64_t seqlen_new;                 /* s_new (0 without k_new)                        */
    int64_t capacity;                   /* keys a cache row holds                         */
    int cache_rows;                     /* b_cache (contiguous) or num_pages (paged)      */
    const int32_t *cache_seqlens;       /* backend memory, [batch]                        */
    const int32_t *cache_batch_idx;     /* NULL or [batch] (then attn.block_table too)    */
    const void *rotary_cos, *rotary_sin; /* NULL: no rotary                               */
    int rotary_dim, rotary_interleaved;
    int64_t rotary_seqlen;
} fa_kvcache_problem;

/* A validated fa_combine call: n partials of one layout ([b, s_q, h, d] with batch
 * strides, or varlen rows with batch 0 and rows = total_q). */
typedef struct fa_combine_problem {
    fa_dtype dtype;
    int n;
    int64_t batch, rows, heads, head_dim; /* batch 1 and rows total_q when varlen */
    const void *part_out[FA_MAX_COMBINE_PARTIALS];
    fa_strides part_out_stride[FA_MAX_COMBINE_PARTIALS];
    const float *part_lse[FA_MAX_COMBINE_PARTIALS];
    fa_strides part_lse_stride[FA_MAX_COMBINE_PARTIALS];
    void *out;
    fa_strides out_stride;
    float *lse; /* NULL: not requested */
    fa_strides lse_stride;
} fa_combine_problem;

typedef struct fa_backend_ops fa_backend_ops;

struct fa_context {
    fa_backend backend;
    int device;
    void *stream;
    int num_threads;
    fa_arch_row row;             /* the table row (or fallback) this device uses */
    fa_device_info info;
    const fa_backend_ops *ops;
    void *state;                 /* backend private */
    char last_error[512];
};

struct fa_backend_ops {
    /* Fill ctx->row, ctx->info; may allocate ctx->state. Message into `why` on error. */
    fa_status (*init)(fa_context *ctx, char *why, size_t why_len);
    void (*destroy)(fa_context *ctx);
    fa_status (*set_stream)(fa_context *ctx, void *stream);
    /* The device-check record of a backend whose index arrays live in device memory
     * (fa_device_error): FA_OK, or FA_ERR_DEVICE_CHECK with the message, clearing it;
     * wait = 1 drains the context's stream first. NULL: the backend's arrays are host
     * memory, checked by api.c before the call (the CPU). */
    fa_status (*device_error)(fa_context *ctx, int wait);
    fa_status (*fwd_workspace)(fa_context *ctx, const fa_problem *p, const fa_selection *sel,
                               size_t *bytes);
    /* Run the forward with the selected config. workspace may be NULL (allocate). */
    fa_status (*fwd)(fa_context *ctx, const fa_problem *p, const fa_selection *sel,
                     void *workspace, size_t workspace_bytes);
    /* Optional (NULL: the request is only recorded): apply a fa_set_num_threads request,
     * e.g. the CPU turns it into ctx->row.sm_count. Last, so tables may omit it. */
    fa_status (*set_num_threads)(fa_context *ctx, int num_threads);
    /* Backward pass (p->dout/dq/dk/dv set); NULL when the backend has none yet. */
    fa_status (*bwd_workspace)(fa_context *ctx, const fa_problem *p, const fa_selection *sel,
                               size_t *bytes);
    fa_status (*bwd)(fa_context *ctx, const fa_problem *p, const fa_selection *sel,
                     void *workspace, size_t workspace_bytes);
    /* fa_combine; NULL where the backend has none yet. */
    fa_status (*combine)(fa_context *ctx, const fa_combine_problem *p);
    /* fa_fwd_kvcache: sel is the selection for p->attn (the "none" config when it has no
     * query rows: then only the append runs). NULL where the backend has none. */
    fa_status (*fwd_kvcache_workspace)(fa_context *ctx, const fa_kvcache_problem *p,
                                       const fa_selection *sel, size_t *bytes);
    fa_status (*fwd_kvcache)(fa_context *ctx, const fa_kvcache_problem *p,
                             const fa_selection *sel, void *workspace, size_t workspace_bytes);
};

/* Backend tables: the CPU's, and the one table of every GPU backend (gpu_host/
 * gpu_backend.c) over the vendor runtimes built in; fa_gpu_backend_built says which. */
extern const fa_backend_ops fa_cpu_ops;
extern const fa_backend_ops fa_gpu_ops;
int fa_gpu_backend_built(fa_backend backend);

/* printf-style message into ctx->last_error; returns status for `return fa_fail(...)`. */
fa_status fa_fail(fa_context *ctx, fa_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Rows of sequence `b` in q/k (varlen aware; seqused_k applied to k). Host-side helpers
 * for backends whose cu_seqlens live in host memory (the CPU backend). row0_k is 0 for
 * paged K/V, whose rows are found through the block table. */
int64_t fa_problem_seqlen_q(const fa_problem *p, int b);
int64_t fa_problem_seqlen_k(const fa_problem *p, int b);
int64_t fa_problem_row0_q(const fa_problem *p, int b); /* first varlen row; 0 if fixed */
int64_t fa_problem_row0_k(const fa_problem *p, int b);

#ifdef __cplusplus
}
#endif

#endif /* FA_PROBLEM_H */
