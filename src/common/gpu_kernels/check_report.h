/*
 * check_report.h - how a kernel records a device-check violation in the context's record
 * (seq_check_args.h's fa_device_status), written once for every vendor: the check kernels
 * (seq_check.h) and the decode forward that checks its own sequence (attn_fwd.h) both
 * report through it.
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

#endif /* FA_CHECK_REPORT_H */
