/*
 * attn_args.h - the argument blocks the GPU kernels receive (by value), filled once by
 * the host (gpu_host/gpu_args.c) from the validated fa_problem: each tensor operand as
 * its data and its layout (fa_operand_layout, addressed through fa_row_at), the masks,
 * the scales and the workspace. Plain C, shared by host and device code of both vendors.
 */
#ifndef FA_ATTN_ARGS_H
#define FA_ATTN_ARGS_H

#include "api/fa_hd.h"
#include "gpu_kernels/fast_divide.h"
#include "gpu_kernels/seq_check_args.h"

/* Table entries per thread a decode block that checks its own sequence reads at once
 * (attn_fwd.h fa_judge_sequence); longer rows keep the check kernel (gpu_args.c
 * fa_fwd_checks_itself). */
#define FA_JUDGE_ROUND 4

/* Rows per block of the backward's preprocess and dQ conversion, and the threads that
 * work on them (attn_bwd_prep.h). */
#define FA_PREP_ROWS 64
#define FA_PREP_THREADS 256

/* Where the rows of one operand lie: the element strides of its batch, row and head
 * dimensions (batch 0 when varlen, whose rows count over the whole batch). */
typedef struct fa_operand_layout {
    long long batch, row, head;
} fa_operand_layout;

/* The element offset of row `row` of head `head` of batch entry `batch` in a
 * [batch][row][head][head_dim] operand laid out as `layout`; `row` is the sequence's
 * first row in the operand (fa_sequence's q_row0 or k_row0) plus a row of the sequence.
 * Every product is 64-bit (each can pass 2^31). */
FA_HD long long fa_row_at(const fa_operand_layout *layout, int batch, long long row, int head)
{
    return batch * layout->batch + row * layout->row + head * layout->head;
}
/* The same for the LSE, whose dimensions are [batch][head][row]. */
FA_HD long long fa_lse_at(const fa_operand_layout *layout, int batch, int head, long long row)
{
    return batch * layout->batch + head * layout->head + row * layout->row;
}

/* Every operand's data comes ahead of all the layouts: the kernels read their parameters
 * at fixed offsets, and this order is the one their machine code is compared against
 * (bench/sass_dump.py). */
typedef struct fa_fwd_args {
    const void *q, *k, *v;
    void *out;
    float *lse;                           /* NULL: not requested                     */
    fa_operand_layout q_layout, k_layout, v_layout, out_layout, lse_layout;
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
    /* Paged K/V (the decode family only, attn_fwd.h): NULL, or [batch][stride] page ids */
    /* of the k and v pools, whose layouts' batch stride is the stride between pages.    */
    const int *block_table;
    long long block_table_stride;
    fa_divisor page_size;                 /* keys per page (any positive count), as a  */
                                          /* divisor (fast_divide.h)                   */
    /* Appended after everything above, whose offsets the kernels' code was compared at. */
    int *seq_ok;                          /* NULL, or [batch] from the device check   */
                                          /* (seq_check.h): 0 = the sequence is empty */
                                          /* (written here when checks_itself)        */
    /* 1: the device check may run beside the forward: the decode family (attn_fwd.h)   */
    /* waits for it only before its writes, reading seqused_k and the page ids          */
    /* unchecked until then, clamped into the operands (attn_sequence.h,                */
    /* fa_page_in_pool); other kernels wait for it first.                               */
    int checked_late;
    int num_pages;                        /* pages in each pool (paged), at most 2^31-1 */
    /* 1: no check kernel ran; the decode family checks the call's device indices itself */
    /* (fixed length: seqused_k, the page ids; attn_fwd.h fa_judge_sequence), reporting  */
    /* to `status` as the `check_call` entry point, and writes seq_ok for the combine.   */
    int checks_itself, check_call;
    fa_device_status *status;
    /* 1: the warpgroup forward stores O by TMA through its map (fa_tma_maps.out): one  */
    /* split, and O's pointer and strides as TMA takes them (the host checks).           */
    int out_by_tma;
    /* NULL, or a counter the host zeroed for this call: the warpgroup forward's          */
    /* persistent blocks draw their next work tiles from it (attn_fwd_ws.h, the walk).     */
    unsigned *walk_tickets;
} fa_fwd_args;

/* The warpgroup kernels' second parameter: the TMA tensor maps of q, k, v, the
 * backward's dout, dk and dv and the forward's out (CUtensorMap, 128 bytes each; out in
 * boxes of FA_WS_O_BOX_ROWS rows, one consumer's share), encoded by the host per call from
 * the same pointers and layouts as the arguments (the runtime table's encode_maps) and
 * passed by value. The
 * kernel hands their parameter-space addresses to TMA, which wants them 64-byte aligned;
 * the host side only copies the bytes. */
#ifdef __CUDACC__
#define FA_TMA_MAPS_ALIGN __align__(64)
#else
#define FA_TMA_MAPS_ALIGN
#endif
#define FA_TMA_MAP_BYTES 128
typedef struct FA_TMA_MAPS_ALIGN fa_tma_maps {
    unsigned char q[FA_TMA_MAP_BYTES], k[FA_TMA_MAP_BYTES], v[FA_TMA_MAP_BYTES], dout[FA_TMA_MAP_BYTES];
    unsigned char out[FA_TMA_MAP_BYTES], dk[FA_TMA_MAP_BYTES], dv[FA_TMA_MAP_BYTES];
} fa_tma_maps;
#define FA_WS_O_BOX_ROWS 64

/* The backward kernels' arguments: the forward's (q, k, v, out, lse, masks, scale) plus
 * the gradients and the fp32 workspace the preprocess kernel fills (or zeroes). */
typedef struct fa_bwd_args {
    fa_fwd_args fwd;
    const void *dout;
    void *dq, *dk, *dv;
    fa_operand_layout dout_layout, dq_layout, dk_layout, dv_layout;
    float *delta;      /* [heads][total_q]: rowsum(dO * O)                            */
    float *lse_log2;   /* [heads][total_q]: LSE in log2 units, +inf for empty rows     */
    float *dq_accum;   /* [heads][total_q][head_dim] fp32 (dq_accum.h), zeroed first:  */
                       /* dQ by atomics from the dK/dV pass; NULL: deterministic dQ pass */
    int *dq_order;     /* [heads][total_q], zeroed first, or NULL: at a query tile's    */
                       /* first row, 1 + the last key block that added its dQ tile: a  */
                       /* deterministic call's ordered adds (attn_bwd_ws.h)            */
    float scale;       /* softmax_scale: dS -> dQ, dK                                  */
    int out_bf16;      /* element type, for the dtype-agnostic preprocess kernel      */
    int dq_transposed; /* dq_accum in dq_accum.h's transposed order (attn_bwd_ws.h's    */
                       /* FA_BWS_DQ_T kernels)                                         */
} fa_bwd_args;

/* Element offsets into the fp32 workspace arrays above, written once for the kernels
 * that write and read them and for tests/test_gpu_args.cpp. All in 64 bits: each can
 * pass 2^31 for legal shapes (8 splits x 2^22 rows x 64 heads x d128 is 2^38; 2^22 rows x
 * 64 heads of dQ accumulator at d256 is 2^36), which the host's workspace limits keep
 * within int64 (gpu_args.c). `row` counts the [total_q] rows over the batch. */
FA_HD long long fa_partial_out_offset(const fa_fwd_args *a, int split, long long row, int head)
{
    return (((long long)split * a->total_q + row) * a->heads + head) * a->head_dim;
}
FA_HD long long fa_partial_lse_offset(const fa_fwd_args *a, int split, int head, long long row)
{
    return ((long long)split * a->heads + head) * a->total_q + row;
}
/* Row `row` of head `head` in the backward's [heads][total_q] arrays (delta, lse_log2). */
FA_HD long long fa_head_row(const fa_fwd_args *a, int head, long long row)
{
    return (long long)head * a->total_q + row;
}
/* The start of head `head`'s [total_q][head_dim] part of the dQ accumulator (dq_accum.h
 * lays out the rest). */
FA_HD long long fa_dq_accum_head(const fa_fwd_args *a, int head)
{
    return (long long)head * a->total_q * a->head_dim;
}

/* ---- the combine (attn_combine.h) ---------------------------------------------------- */

/* The most partials a combine merges: fa_combine's pointers and the split-KV forward's
 * splits. The kernel keeps nothing per partial (each lane reads the LSEs it weighs), so
 * this is the range the tests run (128 partials, tests/gpu/test_cuda_combine.cpp), not a
 * resource. */
#define FA_COMBINE_MAX_PARTIALS 128
/* Partials addressed by a pointer each (fa_combine's, n <= FA_MAX_COMBINE_PARTIALS); the
 * split-KV path addresses its own by one base and a split stride, so the kernel's limit
 * can pass this without the arguments outgrowing HIP's 4 KiB of kernel parameters. */
#define FA_COMBINE_POINTERS 128
/* A block: FA_COMBINE_THREADS threads in groups of `lanes` (a power of two, from
 * FA_COMBINE_MIN_LANES to the whole block), one group per (row, head); at most
 * FA_COMBINE_CHUNK_LANES of them (a warp or less) take an 8-element chunk of the row each. */
#define FA_COMBINE_THREADS 256
#define FA_COMBINE_MIN_LANES 8
#define FA_COMBINE_CHUNK_LANES 32

/* The combine's arguments: n partial results (out and LSE) of one shape, read through
 * one layout each, merged into out and lse. Partial i's out is at part_out[i], or, when
 * part_out_split is not 0, at part_out[0] + i * part_out_split elements (the same for its
 * LSE); rows are [batch][rows], or with cu_seqlens_q those of sequence b,
 * cu_seqlens_q[b] .. cu_seqlens_q[b + 1] (the split-KV path's varlen batches). */
typedef struct fa_combine_args {
    const void *part_out[FA_COMBINE_POINTERS];
    const float *part_lse[FA_COMBINE_POINTERS];
    long long part_out_split, part_lse_split; /* elements; 0: a pointer per partial     */
    void *out;
    float *lse;                               /* NULL: not requested                    */
    fa_operand_layout part_out_layout, part_lse_layout, out_layout, lse_layout;
    const int *cu_seqlens_q;                  /* NULL: batch x rows                     */
    long long rows;                           /* per batch entry (varlen: the longest)  */
    int n, batch, heads, head_dim;            /* head_dim: a multiple of 8              */
    int part_dtype, out_dtype;                /* fa_dtype: f32 (split-KV), f16, bf16    */
    int lanes_log2;                           /* 2^lanes_log2 threads per (row, head),   */
    int chunk_lanes_log2;                     /* of which 2^chunk_lanes_log2 take turns  */
                                              /* over 8-element chunks of a row (the    */
                                              /* rest split the partials)                */
    const int *seq_ok;                        /* NULL, or [batch] from the device check  */
                                              /* (split-KV): 0 = write nothing for it    */
    int read_ahead;                           /* 1: every partial's rows are readable    */
                                              /* (the split-KV workspace), so they are   */
                                              /* loaded before their weights are known   */
    int verdict_late;                         /* 1: the forward wrote every split's      */
                                              /* partials, a bad sequence's as empty, so */
                                              /* seq_ok is read beside the loads (it     */
                                              /* gates the writes only)                  */
} fa_combine_args;

/* Kernel parameters are passed by value: stay within HIP's classic 4 KiB limit. */
typedef char fa_combine_args_fit_4kib[sizeof(fa_combine_args) <= 4096 ? 1 : -1];

#endif /* FA_ATTN_ARGS_H */
