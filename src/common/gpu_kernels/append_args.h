/*
 * append_args.h - the argument block of the kvcache append kernel (kv_append.h), filled
 * once by the host (gpu_host/gpu_args.c) from a validated fa_kvcache_problem: the new
 * keys and values, the cache they go to (contiguous rows or pages), q and its rotated
 * copy, the rotary tables, and the per-entry key counts the attention then reads as its
 * seqused_k. Plain C, shared by host and device code of both vendors.
 */
#ifndef FA_APPEND_ARGS_H
#define FA_APPEND_ARGS_H

#include "gpu_kernels/attn_args.h"

/* Threads per block of the append kernel: one 8-element chunk of a head row each. */
#define FA_APPEND_THREADS 128

typedef struct fa_append_args {
    const void *k_new, *v_new;      /* [b, s_new, h_k, d]; NULL: nothing to append       */
    void *k_cache, *v_cache;        /* contiguous [b, s_max, ..] or pools [pages, P, ..]  */
    const void *q;                  /* [b, s_q, h, d]                                     */
    void *q_rot;                    /* contiguous like q; NULL: no rotary (q not copied)  */
    const void *rotary_cos, *rotary_sin; /* [rotary_seqlen, rotary_dim / 2]; NULL: none  */
    fa_operand_layout k_new_layout, v_new_layout, k_cache_layout, v_cache_layout;
    fa_operand_layout q_layout, q_rot_layout;
    const int *cache_seqlens;       /* [b]: keys already in each cache row                */
    /* NULL: entry b's cache row is b. Else key r of entry b is row r % page_size of page
     * block_table[b * block_table_stride + r / page_size] (cache_batch_idx: a [b, 1]
     * table of cache rows, page_size the cache's s_max). */
    const int *block_table;
    const int *seq_ok;              /* [b] from the device check, which runs first and    */
                                    /* holds every device-data rule: 0 = leave entry b   */
    int *seqused;                   /* out [b]: n_b + s_new, 0 for an entry not appended  */
    long long block_table_stride;
    int batch, heads, heads_k, head_dim;
    int seqlen_q, seqlen_new;
    int page_size;
    int rotary_dim, rotary_interleaved;
    int bf16;                       /* element type: one kernel serves both               */
} fa_append_args;

#endif /* FA_APPEND_ARGS_H */
