/*
 * seq_check.h - the device check of a call's device-resident indices, written once for
 * every vendor: fa_seq_check (one block) checks cu_seqlens, seqused_k, cache_seqlens and
 * cache_batch_idx and writes seq_ok[i] for every sequence; fa_seq_check_pages (one block
 * per sequence, paged calls only, after it in the stream) checks the block_table entries
 * of the sequences still fine. A fixed-length paged call runs fa_seq_check_pages alone
 * (fa_check_needs_whole_pass): each block then checks its sequence's scalars too. The
 * first violation goes into the context's record (seq_check_args.h). The call's other
 * kernels then treat a sequence with seq_ok 0 as empty (attn_sequence.h), so it writes
 * nothing. Included once by the vendor's shared-kernels translation unit.
 */
#ifndef FA_SEQ_CHECK_H
#define FA_SEQ_CHECK_H

#include "fa_device.h"
#include "gpu_kernels/attn_args.h"
#include "gpu_kernels/check_report.h"
#include "gpu_kernels/seq_check_args.h"

/* A violation of `a`'s call (check_report.h). */
FA_DEVICE void fa_check_report(const fa_seq_check_args *a, int check, int batch, long long index,
                               long long value, long long limit)
{
    fa_report_violation(a->status, a->call, check, batch, index, value, limit);
}

/* The whole-array checks of one cu_seqlens array (this thread's entries of it): starts
 * at 0, never decreases, ends at the operand's rows (rows < 0: the array gives lengths
 * only, paged K/V, and may end anywhere). `first` is its FA_CHECK_CU_*_START; ORDER and
 * END follow it. 1 when this thread found a violation. */
FA_DEVICE int fa_check_cu(const fa_seq_check_args *a, const int *cu, long long rows, int first)
{
    int bad = 0;
    for (int j = threadIdx.x; j <= a->batch; j += blockDim.x) {
        const int here = cu[j];
        const int prev = j > 0 ? cu[j - 1] : 0;
        if (j == 0 && here != 0) {
            fa_check_report(a, first, -1, 0, here, 0);
            bad = 1;
        } else if (here < prev) {
            fa_check_report(a, first + 1, j - 1, j, here, prev);
            bad = 1;
        } else if (j == a->batch && rows >= 0 && here != rows) {
            fa_check_report(a, first + 2, -1, j, here, rows);
            bad = 1;
        }
    }
    return bad;
}

/* The keys of sequence i (seq_check_args.h), read from arrays already checked fine. */
FA_DEVICE long long fa_check_keys(const fa_seq_check_args *a, int i)
{
    long long keys = a->cu_seqlens_k ? (long long)a->cu_seqlens_k[i + 1] - a->cu_seqlens_k[i] : a->seqlen_k;
    if (a->seqused_k)
        keys = a->seqused_k[i];
    if (a->cache_seqlens)
        keys = (long long)a->cache_seqlens[i] + a->s_new;
    return keys;
}

/* The checks of sequence i alone, in the order the keys are derived; 1 when it is fine. */
FA_DEVICE int fa_check_sequence(const fa_seq_check_args *a, int i)
{
    long long keys = a->seqlen_k;
    if (a->cu_seqlens_q) {
        const long long rows_q = (long long)a->cu_seqlens_q[i + 1] - a->cu_seqlens_q[i];
        keys = (long long)a->cu_seqlens_k[i + 1] - a->cu_seqlens_k[i];
        if (rows_q > a->max_seqlen_q) {
            fa_check_report(a, FA_CHECK_SEQLEN_Q, i, i, rows_q, a->max_seqlen_q);
            return 0;
        }
        if (keys > a->max_seqlen_k) {
            fa_check_report(a, FA_CHECK_SEQLEN_K, i, i, keys, a->max_seqlen_k);
            return 0;
        }
    }
    if (a->seqused_k) {
        const int used = a->seqused_k[i];
        if (fa_used_keys_broken(a->status, a->call, i, used, keys))
            return 0;
        keys = used;
    }
    if (a->cache_batch_idx) {
        const int row = a->cache_batch_idx[i];
        if (row < 0 || row >= a->cache_batch) {
            fa_check_report(a, FA_CHECK_CACHE_BATCH_IDX, i, i, row, a->cache_batch);
            return 0;
        }
    }
    if (a->cache_seqlens) {
        const int cached = a->cache_seqlens[i];
        keys = (long long)cached + a->s_new;
        if (cached < 0) {
            fa_check_report(a, FA_CHECK_CACHE_SEQLENS, i, i, cached, 0);
            return 0;
        }
        if (keys > a->capacity) {
            fa_check_report(a, FA_CHECK_CACHE_CAPACITY, i, i, keys, a->capacity);
            return 0;
        }
        if (keys < a->min_keys) {
            fa_check_report(a, FA_CHECK_ROTARY_KEYS, i, i, keys, a->min_keys);
            return 0;
        }
    }
    if (a->block_table && keys > (long long)a->block_table_width * a->page_size) {
        fa_check_report(a, FA_CHECK_PAGED_KEYS, i, i, keys, (long long)a->block_table_width * a->page_size);
        return 0;
    }
    return 1;
}

/* One block: the cu_seqlens arrays as a whole first (a violation there condemns every
 * sequence), then each sequence. */
extern "C" FA_GLOBAL void __launch_bounds__(FA_CHECK_THREADS)
    FA_CAT(FA_KERNEL_PREFIX, seq_check)(fa_seq_check_args args)
{
    int bad = 0;
    fa_allow_next_grid(); /* what comes next waits for this grid's end anyway */
    if (args.cu_seqlens_q) {
        bad = fa_check_cu(&args, args.cu_seqlens_q, args.rows_q, FA_CHECK_CU_Q_START);
        bad |= fa_check_cu(&args, args.cu_seqlens_k, args.rows_k, FA_CHECK_CU_K_START);
    }
    const int all_bad = fa_barrier_any(bad);
    for (int i = threadIdx.x; i < args.batch; i += blockDim.x)
        args.seq_ok[i] = !all_bad && fa_check_sequence(&args, i);
}

/* Block i: the block_table entries that cover sequence i's keys, when sequence i is fine
 * so far (fa_seq_check's verdict, or, when that kernel did not run, this block's own
 * fa_check_sequence); a page outside the pool makes it bad. */
extern "C" FA_GLOBAL void __launch_bounds__(FA_CHECK_PAGE_THREADS)
    FA_CAT(FA_KERNEL_PREFIX, seq_check_pages)(fa_seq_check_args args)
{
    const int i = blockIdx.x;
    /* The next kernel may start now: a forward that checks late (fa_fwd_args.checked_late)
     * then runs beside both checks; every kernel waits for this grid's end before it
     * reads seq_ok, and this grid ends after fa_seq_check's. */
    fa_allow_next_grid();
    fa_wait_prior_grid(); /* fa_seq_check before it wrote seq_ok */
    const int whole = fa_check_needs_whole_pass(&args);
    const int fine = whole ? args.seq_ok[i] : !fa_barrier_any(threadIdx.x == 0 && !fa_check_sequence(&args, i));
    int bad = 0;
    /* page_size 0 is a contiguous cache of no rows read as pages (cache_batch_idx): no
     * entry covers a key. */
    if (fine && args.page_size > 0) {
        const long long pages = (fa_check_keys(&args, i) + args.page_size - 1) / args.page_size;
        const int *row = args.block_table + i * args.block_table_stride;
        for (long long j = threadIdx.x; j < pages; j += blockDim.x) {
            bad |= fa_page_id_broken(args.status, args.call, i, j, row[j], args.num_pages);
        }
    }
    /* Every thread has read seq_ok[i] before it is changed; without fa_seq_check, this is
     * its only write. */
    bad = fa_barrier_any(bad);
    if (threadIdx.x == 0 && (bad || !whole))
        args.seq_ok[i] = fine && !bad;
}

#endif /* FA_SEQ_CHECK_H */
