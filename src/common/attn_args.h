/*
 * attn_args.h - the argument block every GPU forward kernel receives (by value), filled
 * once by the vendor backend from the validated fa_problem. Plain C, shared by host and
 * device code of both vendors.
 */
#ifndef FA_ATTN_ARGS_H
#define FA_ATTN_ARGS_H

/* Threads per block of the two small kernels (one thread per row or column pair). */
#define FA_PREP_ROWS 64
#define FA_COMBINE_THREADS 64

typedef struct fa_fwd_args {
    const void *q, *k, *v;
    void *out;
    float *lse;                           /* NULL: not requested                     */
    long long q_batch, q_row, q_head;     /* element strides (batch 0 when varlen)   */
    long long k_batch, k_row, k_head;
    long long v_batch, v_row, v_head;
    long long o_batch, o_row, o_head;
    long long lse_batch, lse_row, lse_head;
    const int *cu_seqlens_q, *cu_seqlens_k; /* NULL unless varlen                   */
    const int *seqused_k;                 /* NULL: all keys                          */
    const float *alibi_slopes;            /* NULL: no ALiBi                          */
    long long alibi_batch;
    int batch, heads, heads_k, head_dim;  /* head_dim: the problem's, <= instance's   */
    int seqlen_q, seqlen_k;               /* fixed-length sizes (varlen: maxima)     */
    int window_left, window_right;        /* -1: unbounded; causal has right = 0     */
    float scale_log2;                     /* softmax_scale * log2(e), no softcap      */
    float softcap_inv_scale;              /* softmax_scale / softcap (softcap on)     */
    float softcap_log2;                   /* softcap * log2(e); 0: softcap off        */
    int num_splits;                       /* 1: write out/lse; >1: write partials     */
    float *partial_out;                   /* fp32 [splits][total_q][heads][head_dim]  */
    float *partial_lse;                   /* fp32 [splits][heads][total_q]            */
    long long total_q;                    /* rows of q over the batch (fixed-length:  */
                                          /* batch * seqlen_q, which can pass 2^31)   */
} fa_fwd_args;

/* The backward kernels' arguments: the forward's (q, k, v, out, lse, masks, scale) plus
 * the gradients and the fp32 workspace the preprocess kernel fills (or zeroes). */
typedef struct fa_bwd_args {
    fa_fwd_args fwd;
    const void *dout;
    void *dq, *dk, *dv;
    long long do_batch, do_row, do_head;
    long long dq_batch, dq_row, dq_head;
    long long dk_batch, dk_row, dk_head;
    long long dv_batch, dv_row, dv_head;
    float *delta;      /* [heads][total_q]: rowsum(dO * O)                            */
    float *lse_log2;   /* [heads][total_q]: LSE in log2 units, +inf for empty rows     */
    float *dq_accum;   /* [heads][total_q][head_dim] fp32 (dq_accum.h), zeroed first:  */
                       /* dQ by atomics from the dK/dV pass; NULL: deterministic dQ pass */
    float scale;       /* softmax_scale: dS -> dQ, dK                                  */
    int out_bf16;      /* element type, for the dtype-agnostic preprocess kernel      */
} fa_bwd_args;

#endif /* FA_ATTN_ARGS_H */
