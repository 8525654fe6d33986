/*
 * c99_header.c - proof that flashattn.h is strict C99: compiled with -std=c99 -pedantic
 * -Werror by the header_is_strict_c99 test (syntax only, never linked or run).
 */
#include <stdio.h>

#include "flashattn.h"

#if FLASHATTN_VERSION != FLASHATTN_VERSION_MAJOR * 10000 + FLASHATTN_VERSION_MINOR * 100 + \
                            FLASHATTN_VERSION_PATCH
#error "FLASHATTN_VERSION disagrees with its parts"
#endif

static int run_causal_bf16(void *q_ptr, void *k_ptr, void *v_ptr, void *out_ptr, float *lse_ptr)
{
    fa_context *ctx = NULL;
    fa_params params;
    fa_tensor q = fa_tensor_bshd(q_ptr, FA_DTYPE_BF16, 2, 128, 8, 64);
    fa_tensor k = fa_tensor_bshd(k_ptr, FA_DTYPE_BF16, 2, 128, 2, 64);
    fa_tensor v = fa_tensor_bshd(v_ptr, FA_DTYPE_BF16, 2, 128, 2, 64);
    fa_tensor out = fa_tensor_bshd(out_ptr, FA_DTYPE_BF16, 2, 128, 8, 64);
    fa_tensor lse = fa_tensor_lse(lse_ptr, 2, 8, 128);
    fa_plan plan;
    fa_status status;

    if (fa_create(&ctx, FA_BACKEND_AUTO, 0) != FA_OK) {
        fprintf(stderr, "%s\n", fa_create_error());
        return 1;
    }
    fa_params_init(&params);
    params.causal = 1;
    status = fa_plan_fwd(ctx, &q, &k, &v, &params, &plan);
    if (status == FA_OK)
        status = fa_plan_bwd(ctx, &q, &k, &v, &params, &plan);
    if (status == FA_OK)
        status = fa_fwd(ctx, &q, &k, &v, &params, &out, &lse, NULL, 0);
    if (status != FA_OK)
        fprintf(stderr, "%s: %s\n", fa_status_string(status), fa_last_error(ctx));
    fa_destroy(ctx);
    return status == FA_OK ? 0 : 1;
}

int main(void)
{
    static unsigned short q[2 * 128 * 8 * 64], kv[2][2 * 128 * 2 * 64], out[2 * 128 * 8 * 64];
    static float lse[2 * 8 * 128];
    return run_causal_bf16(q, kv[0], kv[1], out, lse);
}
