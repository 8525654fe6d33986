/*
 * kernel_table.h - the GPU kernels' symbols, written once for both vendors' runtime
 * mappings: X-macro bodies that declare every instance of an instance list and build
 * its launch table in registry order (list order, fp16 then bf16 per entry: dispatch.c
 * numbers kernel_id the same way). The kernels themselves are defined in the translation
 * units CMake generates from fwd_instances.h / bwd_instances.h.
 */
#ifndef FA_KERNEL_TABLE_H
#define FA_KERNEL_TABLE_H

#include "gpu_kernels/attn_args.h"

#define FA_DECLARE_FWD_KERNELS(d, m, n, w, s)                                        \
    extern "C" __global__ void fa_fwd_d##d##_f16_##m##x##n##x##s(fa_fwd_args args);  \
    extern "C" __global__ void fa_fwd_d##d##_bf16_##m##x##n##x##s(fa_fwd_args args);

#define FA_FWD_KERNEL_ENTRIES(d, m, n, w, s) \
    (const void *)fa_fwd_d##d##_f16_##m##x##n##x##s, (const void *)fa_fwd_d##d##_bf16_##m##x##n##x##s,

/* Backward: a (dK/dV, dQ) kernel pair per entry and dtype. */
#define FA_DECLARE_BWD_KERNELS(d, m, n, w, s)                                                \
    extern "C" __global__ void fa_bwd_d##d##_f16_##m##x##n##x##s##_dkdv(fa_bwd_args args);  \
    extern "C" __global__ void fa_bwd_d##d##_f16_##m##x##n##x##s##_dq(fa_bwd_args args);    \
    extern "C" __global__ void fa_bwd_d##d##_bf16_##m##x##n##x##s##_dkdv(fa_bwd_args args); \
    extern "C" __global__ void fa_bwd_d##d##_bf16_##m##x##n##x##s##_dq(fa_bwd_args args);

#define FA_BWD_KERNEL_ENTRIES(d, m, n, w, s)                                       \
    {(const void *)fa_bwd_d##d##_f16_##m##x##n##x##s##_dkdv,                      \
     (const void *)fa_bwd_d##d##_f16_##m##x##n##x##s##_dq},                       \
    {(const void *)fa_bwd_d##d##_bf16_##m##x##n##x##s##_dkdv,                     \
     (const void *)fa_bwd_d##d##_bf16_##m##x##n##x##s##_dq},

/* The kernels every instance list shares. */
extern "C" __global__ void fa_fwd_combine(fa_fwd_args args, int out_bf16);
extern "C" __global__ void fa_bwd_preprocess(fa_bwd_args args);
extern "C" __global__ void fa_bwd_convert_dq(fa_bwd_args args);

#endif /* FA_KERNEL_TABLE_H */
