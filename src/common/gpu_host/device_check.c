/*
 * device_check.c - the host's side of the device-check record (device_check.h).
 */
#include "gpu_host/device_check.h"

#include <stdio.h>
#include <string.h>

/* Loads and stores of the record stay in program order for the device too (a host whose
 * memory model reorders them, such as an Arm one, needs the fence). */
static void full_fence(void)
{
#if defined(__GNUC__)
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
#endif
}

int fa_take_device_check(volatile fa_device_status *record, fa_device_status *out)
{
    if (record == NULL || record->check == FA_CHECK_NONE)
        return 0;
    full_fence(); /* the fields were written before check */
    out->claim = 1;
    out->check = record->check;
    out->call = record->call;
    out->batch = record->batch;
    out->index = record->index;
    out->value = record->value;
    out->limit = record->limit;
    record->check = FA_CHECK_NONE;
    full_fence();
    record->claim = 0;
    return 1;
}

static const char *call_name(int call)
{
    switch (call) {
    case FA_CHECK_CALL_FWD: return "fa_fwd";
    case FA_CHECK_CALL_BWD: return "fa_bwd";
    case FA_CHECK_CALL_FWD_KVCACHE: return "fa_fwd_kvcache";
    default: return "unknown";
    }
}

/* The cu_seqlens array a CU check is about, and its first check (START). */
static const char *cu_array(int check, int *first)
{
    *first = check < FA_CHECK_CU_K_START ? FA_CHECK_CU_Q_START : FA_CHECK_CU_K_START;
    return check < FA_CHECK_CU_K_START ? "cu_seqlens_q" : "cu_seqlens_k";
}

/* What was broken, in words (after "device check of an earlier <call>: "). */
static void describe_violation(const fa_device_status *st, char *text, size_t len)
{
    const long long v = st->value, lim = st->limit, j = st->index;
    const int b = st->batch;
    int first;
    const char *cu;
    switch (st->check) {
    case FA_CHECK_CU_Q_START: case FA_CHECK_CU_K_START:
    case FA_CHECK_CU_Q_ORDER: case FA_CHECK_CU_K_ORDER:
    case FA_CHECK_CU_Q_END: case FA_CHECK_CU_K_END:
        cu = cu_array(st->check, &first);
        if (st->check == first)
            snprintf(text, len, "%s[0] = %lld, must be 0", cu, v);
        else if (st->check == first + 1)
            snprintf(text, len, "%s decreases: [%lld] = %lld < [%lld] = %lld", cu, j, v, j - 1, lim);
        else
            snprintf(text, len, "%s[%lld] = %lld != the tensor's total rows %lld", cu, j, v, lim);
        return;
    case FA_CHECK_SEQLEN_Q:
        snprintf(text, len, "cu_seqlens_q: sequence %d has %lld query rows > max_seqlen_q %lld", b, v, lim);
        return;
    case FA_CHECK_SEQLEN_K:
        snprintf(text, len, "cu_seqlens_k: sequence %d has %lld key rows > max_seqlen_k %lld", b, v, lim);
        return;
    case FA_CHECK_SEQUSED_K:
        snprintf(text, len, "seqused_k[%d] = %lld is outside 0..%lld (the keys of sequence %d)", b, v, lim, b);
        return;
    case FA_CHECK_CACHE_SEQLENS:
        snprintf(text, len, "cache_seqlens[%d] = %lld is negative", b, v);
        return;
    case FA_CHECK_CACHE_CAPACITY:
        snprintf(text, len, "cache_seqlens[%d] + the new keys = %lld > the cache's capacity %lld", b, v, lim);
        return;
    case FA_CHECK_CACHE_BATCH_IDX:
        snprintf(text, len, "cache_batch_idx[%d] = %lld is outside 0..%lld (the cache's batch)", b, v, lim - 1);
        return;
    case FA_CHECK_PAGED_KEYS:
        snprintf(text, len, "sequence %d has %lld keys > block_table_width x page_block_size = %lld", b, v, lim);
        return;
    case FA_CHECK_PAGE_ID:
        snprintf(text, len, "block_table[%d][%lld] = %lld is outside 0..%lld (num_pages %lld)", b, j, v, lim - 1, lim);
        return;
    case FA_CHECK_ROTARY_KEYS:
        snprintf(text, len, "cache_seqlens[%d] + the new keys = %lld < s_q = %lld: rotary would place a query "
                 "row before position 0", b, v, lim);
        return;
    default:
        snprintf(text, len, "check %d (unknown), sequence %d, entry %lld: %lld against %lld", st->check, b, j, v, lim);
        return;
    }
}

void fa_describe_device_check(const fa_device_status *st, char *text, size_t len)
{
    char what[256];
    describe_violation(st, what, sizeof what);
    if (st->check >= FA_CHECK_CU_Q_START && st->check <= FA_CHECK_CU_K_END)
        snprintf(text, len, "device check of an earlier %s: %s; no sequence of that call wrote anything",
                 call_name(st->call), what);
    else
        snprintf(text, len, "device check of an earlier %s: %s; sequence %d of that call wrote nothing",
                 call_name(st->call), what, st->batch);
}
