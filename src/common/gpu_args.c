/*
 * gpu_args.c - the host helpers of gpu_args.h, shared by the CUDA and HIP backends.
 */
#include "gpu_args.h"

#include <string.h>

size_t fa_align256(size_t bytes) { return (bytes + 255) & ~(size_t)255; }

size_t fa_split_bytes(const fa_problem *p, int splits)
{
    size_t rows;
    if (splits <= 1)
        return 0;
    rows = (size_t)splits * (size_t)p->total_q * (size_t)p->heads;
    return fa_align256(rows * (size_t)p->head_dim * sizeof(float)) + fa_align256(rows * sizeof(float));
}

int fa_rows_aligned(const void *ptr, fa_strides st)
{
    return ((uintptr_t)ptr % 16) == 0 && st.batch % 8 == 0 && st.row % 8 == 0 && st.head % 8 == 0;
}

fa_fwd_args fa_make_args(const fa_problem *p, int splits, void *workspace)
{
    const float log2e = 1.4426950408889634f;
    fa_fwd_args a;
    memset(&a, 0, sizeof a);
    a.q = p->q; a.k = p->k; a.v = p->v; a.out = p->out; a.lse = p->lse;
    a.q_batch = p->q_stride.batch; a.q_row = p->q_stride.row; a.q_head = p->q_stride.head;
    a.k_batch = p->k_stride.batch; a.k_row = p->k_stride.row; a.k_head = p->k_stride.head;
    a.v_batch = p->v_stride.batch; a.v_row = p->v_stride.row; a.v_head = p->v_stride.head;
    a.o_batch = p->out_stride.batch; a.o_row = p->out_stride.row; a.o_head = p->out_stride.head;
    a.lse_batch = p->lse_stride.batch; a.lse_row = p->lse_stride.row; a.lse_head = p->lse_stride.head;
    a.cu_seqlens_q = p->varlen ? p->cu_seqlens_q : NULL;
    a.cu_seqlens_k = p->varlen ? p->cu_seqlens_k : NULL;
    a.seqused_k = p->seqused_k;
    a.alibi_slopes = p->alibi_slopes;
    a.alibi_batch = p->alibi_batch_stride;
    a.batch = p->batch; a.heads = p->heads; a.heads_k = p->heads_k; a.head_dim = p->head_dim;
    a.seqlen_q = (int)p->seqlen_q; a.seqlen_k = (int)p->seqlen_k;
    a.window_left = p->window.left; a.window_right = p->window.right;
    a.scale_log2 = p->softmax_scale * log2e;
    if (p->softcap > 0.f) {
        a.softcap_inv_scale = p->softmax_scale / p->softcap;
        a.softcap_log2 = p->softcap * log2e;
    }
    a.num_splits = splits;
    a.total_q = (int)p->total_q;
    if (splits > 1) {
        size_t rows = (size_t)splits * (size_t)p->total_q * (size_t)p->heads;
        a.partial_out = (float *)workspace;
        a.partial_lse = (float *)((char *)workspace + fa_align256(rows * (size_t)p->head_dim * sizeof(float)));
    }
    return a;
}
