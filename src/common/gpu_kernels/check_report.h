/*
 * check_report.h - how a kernel records a device-check violation in the context's record
 * (seq_check_args.h's fa_device_status), and the rules that both the check kernels
 * (seq_check.h) and the decode forward that checks its own sequence (attn_fwd.h) apply,
 * written once for every vendor so the two paths judge alike.
 */
#ifndef FA_CHECK_REPORT_H
#define FA_CHECK_REPORT_H

#include "fa_device.h"
#include "gpu_kernels/seq_check_args.h"

/* Records a violation when it is the first since the host read the record: the fields,
 * a system-scope fence, then the check (which the host reads first). */
FA_DEVICE void fa_report_violation(fa_device_status *status, int call, int check, int batch, long long index,
                                   long long value, long long limit)
{
    volatile fa_device_status *st = status;
    /* Read before the exchange: a bad table can make many threads report, and each
     * exchange on the mapped record crosses the bus. */
    if (st == NULL || st->claim != 0 || !fa_claim_once(&status->claim))
        return;
    st->call = call;
    st->batch = batch;
    st->index = index;
    st->value = value;
    st->limit = limit;
    fa_fence_system();
    st->check = check;
}

/* seqused_k[batch] = used must lie in 0 .. keys; 1 when it does not, reported (status
 * NULL: not reported, as by all but one thread of a block judging alike). */
FA_DEVICE int fa_used_keys_broken(fa_device_status *status, int call, int batch, long long used, long long keys)
{
    if (used >= 0 && used <= keys)
        return 0;
    fa_report_violation(status, call, FA_CHECK_SEQUSED_K, batch, batch, used, keys);
    return 1;
}

/* Entry `entry` of sequence batch's block_table row must name a page of the pools; 1 when
 * it does not, reported. */
FA_DEVICE int fa_page_id_broken(fa_device_status *status, int call, int batch, long long entry, long long page,
                                long long num_pages)
{
    if (page >= 0 && page < num_pages)
        return 0;
    fa_report_violation(status, call, FA_CHECK_PAGE_ID, batch, entry, page, num_pages);
    return 1;
}

#endif /* FA_CHECK_REPORT_H */
