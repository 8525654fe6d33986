/*
 * device_check.h - the host's side of the device-check record (seq_check_args.h): taking
 * the first violation a check kernel recorded, clearing the record, and the message that
 * names it. No runtime calls: the record is mapped host memory, read with plain loads.
 * Defined in device_check.c.
 */
#ifndef FA_DEVICE_CHECK_H
#define FA_DEVICE_CHECK_H

#include <stddef.h>

#include "gpu_kernels/seq_check_args.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 1 when the record holds a violation, copied into *out, and the record cleared for the
 * next one (check first, then claim); 0 when it holds none. */
int fa_take_device_check(volatile fa_device_status *record, fa_device_status *out);

/* The message of a taken violation: the check, the call, the sequence, the entry, its
 * value and the limit, and what was left unwritten. */
void fa_describe_device_check(const fa_device_status *st, char *text, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* FA_DEVICE_CHECK_H */
