/*
 * seq_check_args.h - the device check of a call's device-resident indices (seq_check.h),
 * as host and device code of both vendors see it: the context's status record in mapped
 * host memory (fa_device_status), the names of the checks and calls it reports, and the
 * check kernels' one argument block (fa_seq_check_args), which covers every array of
 * indices a call can have. A call fills the fields it has and leaves the others NULL / 0
 * (gpu_args.c's fa_make_check_args fills those an fa_problem holds). Plain C.
 */
#ifndef FA_SEQ_CHECK_ARGS_H
#define FA_SEQ_CHECK_ARGS_H

#include "api/fa_hd.h"

/* fa_seq_check runs as one block of FA_CHECK_THREADS; fa_seq_check_pages as one block of
 * FA_CHECK_PAGE_THREADS per sequence. */
#define FA_CHECK_THREADS 1024
#define FA_CHECK_PAGE_THREADS 256

/* What a violation broke (fa_device_status.check; 0: nothing recorded). The cu_seqlens
 * checks condemn every sequence of the call, the others only sequence `batch`. */
enum fa_device_check {
    FA_CHECK_NONE = 0,
    FA_CHECK_CU_Q_START,      /* cu_seqlens_q[0] != 0                                      */
    FA_CHECK_CU_Q_ORDER,      /* cu_seqlens_q[index] < [index - 1]                         */
    FA_CHECK_CU_Q_END,        /* cu_seqlens_q[batch] != the rows of q                      */
    FA_CHECK_CU_K_START,
    FA_CHECK_CU_K_ORDER,
    FA_CHECK_CU_K_END,
    FA_CHECK_SEQLEN_Q,        /* a sequence's query rows > max_seqlen_q                    */
    FA_CHECK_SEQLEN_K,        /* a sequence's key rows > max_seqlen_k                      */
    FA_CHECK_SEQUSED_K,       /* seqused_k[i] outside 0 .. the keys of sequence i          */
    FA_CHECK_CACHE_SEQLENS,   /* cache_seqlens[i] < 0                                      */
    FA_CHECK_CACHE_CAPACITY,  /* cache_seqlens[i] + s_new > capacity                       */
    FA_CHECK_CACHE_BATCH_IDX, /* cache_batch_idx[i] outside 0 .. cache_batch - 1           */
    FA_CHECK_PAGED_KEYS,      /* the keys of sequence i > block_table_width * page_size    */
    FA_CHECK_PAGE_ID,         /* block_table row i, entry index: outside 0 .. num_pages - 1 */
    FA_CHECK_ROTARY_KEYS,     /* rotary q: cache_seqlens[i] + s_new < s_q (a position < 0) */
    FA_CHECK_COUNT
};

/* The entry point whose check kernel found it (fa_device_status.call). */
enum fa_check_call {
    FA_CHECK_CALL_FWD = 1,
    FA_CHECK_CALL_BWD = 2,
    FA_CHECK_CALL_FWD_KVCACHE = 3
};

/* The first violation since the host last read the record. A kernel claims the record
 * once (claim 0 -> 1, atomically), writes the fields, fences at system scope, then sets
 * check: the host reads check first and, when it is set, the rest. The host clears check,
 * then claim. Lives in mapped (pinned) host memory, one per GPU context. */
typedef struct fa_device_status {
    int claim;
    int check;       /* enum fa_device_check                                        */
    int call;        /* enum fa_check_call                                          */
    int batch;       /* the sequence; -1 where the check is of the whole array      */
    long long index; /* the entry of the array (cu_seqlens entry, block_table column) */
    long long value; /* what it held (or the sum that broke the limit)               */
    long long limit; /* what it had to equal or stay within                          */
} fa_device_status;

/* The check kernels' arguments. The keys of sequence i are cu_seqlens_k[i + 1] -
 * cu_seqlens_k[i] (varlen) or seqlen_k, replaced by seqused_k[i] when given, and by
 * cache_seqlens[i] + s_new when given. */
typedef struct fa_seq_check_args {
    int batch;                        /* sequences of the call                          */
    int call;                         /* enum fa_check_call, for the report             */
    /* Varlen (both NULL when not): batch + 1 entries each, from 0, non-decreasing, up to
     * exactly rows_q / rows_k (rows_k -1: paged K/V, whose cu_seqlens_k gives lengths
     * only), every length within max_seqlen_q / max_seqlen_k (the launch's grids cover
     * those). */
    const int *cu_seqlens_q, *cu_seqlens_k;
    long long rows_q, rows_k;
    int max_seqlen_q, max_seqlen_k;
    int seqlen_k;                     /* fixed-length: the keys of every sequence       */
    const int *seqused_k;             /* NULL or [batch]: 0 <= seqused_k[i] <= keys     */
    /* Appending (fa_fwd_kvcache); NULL / 0 when not. */
    const int *cache_seqlens;         /* NULL or [batch]: >= 0, + s_new <= capacity     */
    int s_new;                        /* new keys appended per sequence                 */
    long long capacity;               /* keys one cache row holds                       */
    const int *cache_batch_idx;       /* NULL or [batch]: in 0 .. cache_batch - 1       */
    int cache_batch;
    int min_keys;                     /* rotary q: cache_seqlens[i] + s_new >= s_q       */
    /* Paged K/V (block_table NULL when not): row i of the table at i * block_table_stride;
     * its first ceil(keys / page_size) entries must be pages in 0 .. num_pages - 1. */
    const int *block_table;
    long long block_table_stride;
    int block_table_width, page_size;
    long long num_pages;
    /* Results. */
    int *seq_ok;                      /* [batch], every entry written: 1 fine, 0 bad    */
    fa_device_status *status;         /* the context's record (device address); NULL:   */
                                      /* nothing reported                               */
} fa_seq_check_args;

/* Does a call's check need fa_seq_check, the one block that sees every sequence? Only for
 * the cu_seqlens arrays, checked whole, or without a block table; a fixed-length paged
 * call is checked by fa_seq_check_pages alone, each block judging its own sequence (one
 * kernel less ahead of the attention). */
FA_HD int fa_check_needs_whole_pass(const fa_seq_check_args *a)
{
    return a->block_table == 0 || a->cu_seqlens_q != 0;
}

#endif /* FA_SEQ_CHECK_ARGS_H */
