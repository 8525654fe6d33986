/*
 * registry.h - the registry: every kernel configuration of every vendor, compiled into
 * this library or only planned. The build generates it from the instance lists
 * (fwd_instances.txt, bwd_instances.txt; cmake/FlashattnInstances.cmake writes
 * generated/registry.c), so the dispatcher can never pick a kernel that was not built and
 * a kernel cannot be built without a registry row. Also the rules the generated rows use.
 */
#ifndef FA_REGISTRY_H
#define FA_REGISTRY_H

#include "select/dispatch.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The configs of one backend and pass, in list order (rows, then dtypes, then waves). */
typedef struct fa_registry_part {
    fa_backend backend;
    fa_pass pass;
    const fa_kernel_config *configs;
    int count;
} fa_registry_part;

/* Generated: every (backend, pass) with at least one row. */
extern const fa_registry_part fa_registry_parts[];
extern const int fa_registry_part_count;

/* The configs of `backend` for `pass` and their number (NULL and 0 where none). */
const fa_kernel_config *fa_registry_of(fa_backend backend, fa_pass pass, int *count);
/* Shorthands for the forward and the backward. */
const fa_kernel_config *fa_registry(fa_backend backend, int *count);
const fa_kernel_config *fa_registry_bwd(fa_backend backend, int *count);

/* One CPU worker's fp32 working set (the cpu rows' smem_bytes), tile_m query rows x
 * tile_n keys at head dim d. Forward: the Q tile and O accumulator (2 * m * d), the K and
 * V tiles (2 * n * d) and the score tile (m * n). Backward (cpu_bwd.c): two row operands
 * and two accumulators of each pass's row tile, the score and gradient tiles, and four
 * staged column operands. */
#define FA_CPU_FWD_TILE_BYTES(d, m, n) (4 * (2 * (m) * (d) + 2 * (n) * (d) + (m) * (n)))
#define FA_CPU_BWD_TILE_BYTES(d, m, n) (4 * (4 * ((m) + (n)) * (d) + 2 * (m) * (n)))

/* Which backward dK/dV kernels add dQ with atomics: all but AMD's wave32 ones, whose
 * code has no atomic phase (FA_BWD_ATOMIC_DQ in src/hip/fa_device.h; bench/
 * amd_resources.py checks the code objects agree). */
#define FA_BWD_ATOMIC_DQ_FOR(vendor, wave) ((vendor) != FA_VENDOR_AMD || (wave) == 64)

#ifdef __cplusplus
}
#endif

#endif /* FA_REGISTRY_H */
