/*
 * gpu_kvcache.h - host helpers of fa_fwd_kvcache shared by the GPU backends: the append
 * kernel's arguments and grid, the call's workspace (its layout below), the attention
 * problem the forward then runs, and the checks made before any launch. Defined in
 * gpu_kvcache.c; gpu_backend.c runs the launches.
 */
#ifndef FA_GPU_KVCACHE_H
#define FA_GPU_KVCACHE_H

#include "api/problem.h"
#include "gpu_host/gpu_args.h"
#include "gpu_kernels/append_args.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The workspace of a kvcache call, in order, each part 256-byte aligned: seqused int32
 * [b] (n_b + s_new, the attention's seqused_k), the rotated q [b, s_q, h, d] in q's dtype
 * (rotary only), the forward's split-KV partials (fa_split_bytes), then seq_ok int32
 * [b] (fa_kvcache_seq_ok), then the forward walk's tickets (fa_kvcache_walk_tickets). */
size_t fa_kvcache_workspace_bytes(const fa_kvcache_problem *p, const fa_selection *sel);

/* seq_ok in the call's workspace (the device check writes it, the append and the
 * attention read it). */
int *fa_kvcache_seq_ok(const fa_kvcache_problem *p, const fa_selection *sel, void *workspace);
/* The attention's walk tickets (fa_walk_tickets_bytes) after seq_ok, or NULL. */
unsigned *fa_kvcache_walk_tickets(const fa_kvcache_problem *p, const fa_selection *sel, void *workspace);
/* The device check of an fa_fwd_kvcache call: cache_seqlens (>= 0, + s_new within the
 * capacity, and >= s_q with rotary), cache_batch_idx, and the paged table. */
fa_seq_check_args fa_make_kvcache_check_args(const fa_kvcache_problem *p, int *seq_ok,
                                             fa_device_status *status);
/* The append kernel's arguments over that workspace; seq_ok the device check's (the
 * kernel trusts it for every device-data rule). */
fa_append_args fa_make_append_args(const fa_kvcache_problem *p, void *workspace, const int *seq_ok);

/* Rows x (1, batch) pairs: x covers the new rows and, with rotary, the q rows (at least
 * one, whose block writes seqused). */
fa_grid fa_append_grid(const fa_kvcache_problem *p);

/* The forward the append feeds: p->attn reading the cache with seqused_k from the
 * workspace and, with rotary, q from its rotated copy. */
fa_problem fa_kvcache_attention(const fa_kvcache_problem *p, const fa_append_args *a);

/* The split-KV partials' part of the workspace. */
void *fa_kvcache_split_workspace(const fa_kvcache_problem *p, void *workspace);

/* The checks before any launch (paging, the append's 16-byte rows, and the forward's
 * own checks when there are query rows), and the workspace query that makes the same
 * ones but alignment; failures name `backend`. */
fa_status fa_gpu_check_kvcache(fa_context *ctx, const fa_kvcache_problem *p, const fa_selection *sel,
                               const char *backend);
fa_status fa_gpu_kvcache_workspace(fa_context *ctx, const fa_kvcache_problem *p,
                                   const fa_selection *sel, const char *backend, size_t *bytes);

#ifdef __cplusplus
}
#endif

#endif /* FA_GPU_KVCACHE_H */
