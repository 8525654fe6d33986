/*
 * registry.c - lookups over the generated registry (generated/registry.c, from the
 * instance lists): the configs of one backend and pass.
 */
#include "select/registry.h"

#include <stddef.h>

const fa_kernel_config *fa_registry_of(fa_backend backend, fa_pass pass, int *count)
{
    int i;
    for (i = 0; i < fa_registry_part_count; i++) {
        const fa_registry_part *part = &fa_registry_parts[i];
        if (part->backend == backend && part->pass == pass) {
            if (count) *count = part->count;
            return part->configs;
        }
    }
    if (count) *count = 0;
    return NULL;
}

const fa_kernel_config *fa_registry(fa_backend backend, int *count)
{
    return fa_registry_of(backend, FA_PASS_FWD, count);
}

const fa_kernel_config *fa_registry_bwd(fa_backend backend, int *count)
{
    return fa_registry_of(backend, FA_PASS_BWD, count);
}
