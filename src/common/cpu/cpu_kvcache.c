/*
 * cpu_kvcache.c - the CPU backend's paged-K/V page check and fa_fwd_kvcache: the device
 * data a GPU checks on the device (cache lengths, cache rows, page ids) checked here on
 * the host before anything is written, then the append of k_new / v_new into the cache
 * (k rotated when rotary is set), a rotated copy of q, and the ordinary CPU forward over
 * the cache with seqused_k = cache_seqlens + s_new. The cache rows are found through
 * fa_cpu_key_row, as the forward finds them.
 */
#include "cpu/cpu_internal.h"

#include <stdlib.h>
#include <string.h>

fa_status fa_cpu_check_pages(fa_context *ctx, const fa_problem *p)
{
    int b;
    int64_t j;
    if (p->block_table == NULL)
        return FA_OK;
    for (b = 0; b < p->batch; b++) {
        const int32_t *row = p->block_table + (int64_t)b * p->block_table_stride;
        int64_t pages = (fa_problem_seqlen_k(p, b) + p->page_size - 1) / p->page_size;
        for (j = 0; j < pages; j++)
            if (row[j] < 0 || row[j] >= p->num_pages)
                return fa_fail(ctx, FA_ERR_BAD_SEQLENS,
                               "block_table[%d][%lld] = %d is not a page of the pool (0..%lld)", b,
                               (long long)j, row[j], (long long)p->num_pages - 1);
    }
    return FA_OK;
}

/* Entry b's cache length, its cache row and, with rotary, its first q position: the
 * checks the GPU backends leave to the device. */
static fa_status check_entry(fa_context *ctx, const fa_kvcache_problem *kp, int b)
{
    int64_t n = kp->cache_seqlens[b], keys = n + kp->seqlen_new;
    if (n < 0 || keys > kp->capacity)
        return fa_fail(ctx, FA_ERR_BAD_SEQLENS,
                       "cache_seqlens[%d] = %lld with %lld new keys is outside 0..%lld (the cache "
                       "row's capacity)",
                       b, (long long)n, (long long)kp->seqlen_new, (long long)kp->capacity);
    if (kp->cache_batch_idx && (kp->cache_batch_idx[b] < 0 || kp->cache_batch_idx[b] >= kp->cache_rows))
        return fa_fail(ctx, FA_ERR_BAD_SEQLENS, "cache_batch_idx[%d] = %d is not a cache row (0..%d)",
                       b, kp->cache_batch_idx[b], kp->cache_rows - 1);
    if (kp->rotary_cos && keys < kp->attn.seqlen_q)
        return fa_fail(ctx, FA_ERR_BAD_SEQLENS,
                       "cache_seqlens[%d] = %lld + %lld new keys < s_q %lld: with rotary, q row 0 "
                       "would sit before position 0",
                       b, (long long)n, (long long)kp->seqlen_new, (long long)kp->attn.seqlen_q);
    return FA_OK;
}

/* Rows of fp32 scratch one rotation needs: the row, then cos and sin of its position. */
static float *rotation_scratch(const fa_kvcache_problem *kp)
{
    return (float *)malloc((size_t)(kp->attn.head_dim + kp->rotary_dim) * sizeof(float));
}

/* Rotates the first rotary_dim dims of the fp32 row x at position pos (flashattn.h's
 * pairs); cs holds rotary_dim floats of scratch. */
static void rotate(const fa_kvcache_problem *kp, float *x, int64_t pos, float *cs)
{
    const int half = kp->rotary_dim / 2;
    const size_t offset = (size_t)pos * (size_t)half * fa_dtype_bytes(kp->attn.dtype);
    float *c = cs, *s = cs + half;
    int t;
    fa_cpu_load_row(c, (const char *)kp->rotary_cos + offset, kp->attn.dtype, half, 1.0f);
    fa_cpu_load_row(s, (const char *)kp->rotary_sin + offset, kp->attn.dtype, half, 1.0f);
    for (t = 0; t < half; t++) {
        int a = kp->rotary_interleaved ? 2 * t : t;
        int b = kp->rotary_interleaved ? 2 * t + 1 : t + half;
        float xa = x[a], xb = x[b];
        x[a] = xa * c[t] - xb * s[t];
        x[b] = xa * s[t] + xb * c[t];
    }
}

/* One head row from src to dst, rotated at pos when rotate_it (scratch: rotation_scratch). */
static void copy_row(const fa_kvcache_problem *kp, void *dst, const void *src, int rotate_it,
                     int64_t pos, float *scratch)
{
    const int d = kp->attn.head_dim;
    if (!rotate_it) {
        memcpy(dst, src, (size_t)d * fa_dtype_bytes(kp->attn.dtype));
        return;
    }
    fa_cpu_load_row(scratch, src, kp->attn.dtype, d, 1.0f);
    rotate(kp, scratch, pos, scratch + d);
    fa_cpu_store_row(dst, kp->attn.dtype, scratch, d, 1.0f);
}

/* k_new / v_new row j of entry b to cache key n_b + j (k rotated at that position). */
static void append(const fa_kvcache_problem *kp, float *scratch)
{
    const fa_problem *a = &kp->attn;
    int b, h;
    int64_t j;
    for (b = 0; b < a->batch; b++)
        for (j = 0; j < kp->seqlen_new; j++)
            for (h = 0; h < a->heads_k; h++) {
                int64_t key = kp->cache_seqlens[b] + j;
                char *k_dst = (char *)fa_cpu_key_row(a, a->k, &a->k_stride, b, key, h);
                char *v_dst = (char *)fa_cpu_key_row(a, a->v, &a->v_stride, b, key, h);
                copy_row(kp, k_dst, fa_cpu_operand_at(kp->k_new, a->dtype, &kp->k_new_stride, b, j, h),
                         kp->rotary_cos != NULL, key, scratch);
                copy_row(kp, v_dst, fa_cpu_operand_at(kp->v_new, a->dtype, &kp->v_new_stride, b, j, h),
                         0, 0, scratch);
            }
}

/* q rotated into `rot`, contiguous [b, s_q, h, d]: row t of entry b at position
 * n_b + s_new - s_q + t. */
static void rotate_q(const fa_kvcache_problem *kp, char *rot, const fa_strides *rot_stride,
                     float *scratch)
{
    const fa_problem *a = &kp->attn;
    int b, h;
    int64_t t;
    for (b = 0; b < a->batch; b++)
        for (t = 0; t < a->seqlen_q; t++)
            for (h = 0; h < a->heads; h++) {
                int64_t pos = kp->cache_seqlens[b] + kp->seqlen_new - a->seqlen_q + t;
                char *dst = (char *)fa_cpu_operand_at(rot, a->dtype, rot_stride, b, t, h);
                copy_row(kp, dst, fa_cpu_operand_at(a->q, a->dtype, &a->q_stride, b, t, h), 1, pos,
                         scratch);
            }
}

fa_status fa_cpu_fwd_kvcache_workspace(fa_context *ctx, const fa_kvcache_problem *p,
                                       const fa_selection *sel, size_t *bytes)
{
    *bytes = 0;
    return p->attn.total_q > 0 ? fa_cpu_fwd_workspace(ctx, &p->attn, sel, bytes) : FA_OK;
}

/* The call's host buffers: the keys of each entry, the rotated q, rotation scratch. */
typedef struct kvcache_buffers {
    int32_t *seqused;
    char *q_rot;
    float *scratch;
} kvcache_buffers;

static fa_status alloc_buffers(fa_context *ctx, const fa_kvcache_problem *kp, kvcache_buffers *buf)
{
    const fa_problem *a = &kp->attn;
    size_t q_bytes = (size_t)a->total_q * (size_t)a->heads * (size_t)a->head_dim *
                     fa_dtype_bytes(a->dtype);
    int rotary = kp->rotary_cos != NULL;
    buf->seqused = (int32_t *)malloc((size_t)a->batch * sizeof(int32_t));
    buf->q_rot = rotary && q_bytes > 0 ? (char *)malloc(q_bytes) : NULL;
    buf->scratch = rotary ? rotation_scratch(kp) : NULL;
    if (buf->seqused == NULL || (rotary && q_bytes > 0 && buf->q_rot == NULL) ||
        (rotary && buf->scratch == NULL))
        return fa_fail(ctx, FA_ERR_OUT_OF_MEMORY, "cpu kvcache: out of host memory");
    return FA_OK;
}

/* Every device-data check, before anything is written: each entry's length, cache row
 * and q positions, then the pages the attention over n_b + s_new keys reads (which
 * include every page the append writes). */
static fa_status check_device_data(fa_context *ctx, const fa_kvcache_problem *kp, fa_problem *attn,
                                   int32_t *seqused)
{
    int b;
    fa_status st = FA_OK;
    for (b = 0; b < attn->batch && st == FA_OK; b++) {
        st = check_entry(ctx, kp, b);
        seqused[b] = (int32_t)(kp->cache_seqlens[b] + kp->seqlen_new);
    }
    attn->seqused_k = seqused;
    return st == FA_OK ? fa_cpu_check_pages(ctx, attn) : st;
}

fa_status fa_cpu_fwd_kvcache(fa_context *ctx, const fa_kvcache_problem *p, const fa_selection *sel,
                             void *workspace, size_t workspace_bytes)
{
    fa_problem attn = p->attn;
    kvcache_buffers buf = {NULL, NULL, NULL};
    fa_strides rot_stride;
    fa_status st = alloc_buffers(ctx, p, &buf);
    if (st == FA_OK)
        st = check_device_data(ctx, p, &attn, buf.seqused);
    if (st == FA_OK && p->seqlen_new > 0)
        append(p, buf.scratch);
    if (st == FA_OK && buf.q_rot != NULL) {
        rot_stride.head = attn.head_dim;
        rot_stride.row = (int64_t)attn.heads * attn.head_dim;
        rot_stride.batch = attn.seqlen_q * rot_stride.row;
        rotate_q(p, buf.q_rot, &rot_stride, buf.scratch);
        attn.q = buf.q_rot;
        attn.q_stride = rot_stride;
    }
    if (st == FA_OK && attn.total_q > 0)
        st = fa_cpu_fwd(ctx, &attn, sel, workspace, workspace_bytes);
    free(buf.seqused);
    free(buf.q_rot);
    free(buf.scratch);
    return st;
}
