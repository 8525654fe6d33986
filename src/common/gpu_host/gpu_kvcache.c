/*
 * gpu_kvcache.c - the host helpers of gpu_kvcache.h: fa_fwd_kvcache's workspace layout,
 * the append kernel's arguments and grid, the attention problem over the appended cache,
 * and the checks before any launch. Shared by the CUDA and HIP backends.
 */
#include "gpu_host/gpu_kvcache.h"

#include <string.h>

static size_t seqused_bytes(const fa_kvcache_problem *p)
{
    return fa_align256((size_t)p->attn.batch * sizeof(int));
}

static size_t q_rot_bytes(const fa_kvcache_problem *p)
{
    if (p->rotary_cos == NULL)
        return 0;
    return fa_align256((size_t)p->attn.total_q * (size_t)p->attn.heads * (size_t)p->attn.head_dim * 2);
}

/* The rotated q's strides: contiguous [b, s_q, h, d]. */
static fa_strides q_rot_strides(const fa_problem *a)
{
    fa_strides st;
    st.head = a->head_dim;
    st.row = (int64_t)a->heads * a->head_dim;
    st.batch = a->seqlen_q * st.row;
    return st;
}

/* The attention's split-KV partials when it runs. */
static size_t split_bytes(const fa_kvcache_problem *p, const fa_selection *sel)
{
    return p->attn.total_q > 0 ? fa_split_bytes(&p->attn, sel->num_splits) : 0;
}

/* seqused, the rotated q, the partials, then seq_ok: where fa_make_args puts it for the
 * attention problem over the appended cache (whose seqused_k makes it a call with device
 * indices), so the device check, the append and the attention share one array; then
 * the forward walk's tickets (fa_walk_tickets_bytes). */
size_t fa_kvcache_workspace_bytes(const fa_kvcache_problem *p, const fa_selection *sel)
{
    return seqused_bytes(p) + q_rot_bytes(p) + split_bytes(p, sel) + seqused_bytes(p) + fa_walk_tickets_bytes(sel);
}

unsigned *fa_kvcache_walk_tickets(const fa_kvcache_problem *p, const fa_selection *sel, void *workspace)
{
    return sel->walk_draws && p->attn.total_q > 0
               ? (unsigned *)((char *)fa_kvcache_seq_ok(p, sel, workspace) + seqused_bytes(p))
               : NULL;
}

int *fa_kvcache_seq_ok(const fa_kvcache_problem *p, const fa_selection *sel, void *workspace)
{
    return (int *)((char *)workspace + seqused_bytes(p) + q_rot_bytes(p) + split_bytes(p, sel));
}

void *fa_kvcache_split_workspace(const fa_kvcache_problem *p, void *workspace)
{
    return (char *)workspace + seqused_bytes(p) + q_rot_bytes(p);
}

fa_seq_check_args fa_make_kvcache_check_args(const fa_kvcache_problem *p, int *seq_ok,
                                             fa_device_status *status)
{
    fa_seq_check_args a = fa_make_check_args(&p->attn, FA_CHECK_CALL_FWD_KVCACHE, seq_ok, status);
    a.cache_seqlens = p->cache_seqlens;
    a.s_new = (int)p->seqlen_new;
    a.capacity = p->capacity;
    a.cache_batch_idx = p->cache_batch_idx;
    a.cache_batch = p->cache_rows;
    a.min_keys = p->rotary_cos && p->attn.total_q > 0 ? (int)p->attn.seqlen_q : 0;
    return a;
}

fa_append_args fa_make_append_args(const fa_kvcache_problem *p, void *workspace, const int *seq_ok)
{
    const fa_problem *at = &p->attn;
    fa_append_args a;
    memset(&a, 0, sizeof a);
    a.k_new = p->k_new; a.v_new = p->v_new;
    a.k_cache = (void *)at->k; a.v_cache = (void *)at->v;
    a.q = at->q;
    a.q_rot = p->rotary_cos ? (char *)workspace + seqused_bytes(p) : NULL;
    a.rotary_cos = p->rotary_cos; a.rotary_sin = p->rotary_sin;
    a.k_new_layout = fa_layout_of(p->k_new_stride);
    a.v_new_layout = fa_layout_of(p->v_new_stride);
    a.k_cache_layout = fa_layout_of(at->k_stride);
    a.v_cache_layout = fa_layout_of(at->v_stride);
    a.q_layout = fa_layout_of(at->q_stride);
    a.q_rot_layout = fa_layout_of(q_rot_strides(at));
    a.cache_seqlens = p->cache_seqlens;
    a.block_table = at->block_table;
    a.seq_ok = seq_ok;
    a.seqused = (int *)workspace;
    a.block_table_stride = at->block_table_stride;
    a.batch = at->batch; a.heads = at->heads; a.heads_k = at->heads_k; a.head_dim = at->head_dim;
    a.seqlen_q = (int)at->seqlen_q; a.seqlen_new = (int)p->seqlen_new;
    a.page_size = at->page_size;
    a.rotary_dim = p->rotary_dim; a.rotary_interleaved = p->rotary_interleaved;
    a.bf16 = at->dtype == FA_DTYPE_BF16;
    return a;
}

fa_grid fa_append_grid(const fa_kvcache_problem *p)
{
    int64_t rows = p->seqlen_new;
    fa_grid g;
    if (p->rotary_cos && p->attn.seqlen_q > rows)
        rows = p->attn.seqlen_q;
    g.x = (unsigned)(rows > 0 ? rows : 1);
    fa_grid_fold(1, p->attn.batch, &g.y, &g.z);
    return g;
}

fa_problem fa_kvcache_attention(const fa_kvcache_problem *p, const fa_append_args *a)
{
    fa_problem attn = p->attn;
    attn.seqused_k = a->seqused;
    if (a->q_rot) {
        attn.q = a->q_rot;
        attn.q_stride = q_rot_strides(&attn);
    }
    return attn;
}

/* The append reads and writes whole 16-byte chunks of every row it touches. */
static fa_status check_append_rows(fa_context *ctx, const fa_kvcache_problem *p, const char *backend)
{
    const fa_problem *a = &p->attn;
    int aligned = fa_rows_aligned(a->q, a->q_stride);
    if (p->k_new != NULL)
        aligned = aligned && fa_rows_aligned(p->k_new, p->k_new_stride) &&
                  fa_rows_aligned(p->v_new, p->v_new_stride) && fa_rows_aligned(a->k, a->k_stride) &&
                  fa_rows_aligned(a->v, a->v_stride);
    if (aligned)
        return FA_OK;
    return fa_fail(ctx, FA_ERR_UNSUPPORTED,
                   "the %s backend's kvcache append needs 16-byte aligned rows of q, k_new, v_new "
                   "and the caches: data pointers aligned to 16 bytes and outer strides that are "
                   "multiples of 8 elements", backend);
}

fa_status fa_gpu_check_kvcache(fa_context *ctx, const fa_kvcache_problem *p, const fa_selection *sel,
                               const char *backend)
{
    fa_status st = check_append_rows(ctx, p, backend);
    if (st == FA_OK && p->attn.total_q > 0)
        st = fa_gpu_check_fwd(ctx, &p->attn, sel, backend);
    return st;
}

fa_status fa_gpu_kvcache_workspace(fa_context *ctx, const fa_kvcache_problem *p,
                                   const fa_selection *sel, const char *backend, size_t *bytes)
{
    size_t ignored;
    fa_status st = FA_OK;
    *bytes = 0;
    if (st == FA_OK && p->attn.total_q > 0)
        st = fa_gpu_fwd_workspace(ctx, &p->attn, sel, backend, &ignored);
    if (st == FA_OK)
        *bytes = fa_kvcache_workspace_bytes(p, sel);
    return st;
}
