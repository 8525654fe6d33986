/*
 * consumer.c - the smallest real use of an installed flashattn: one causal fp32 forward
 * on the CPU backend, checked for a finite output and LSE. Exit 0 on success.
 */
#include <math.h>
#include <stdio.h>

#include <flashattn.h>

#define B 1
#define S 8
#define H 2
#define D 16

int main(void)
{
    static float q[B * S * H * D], k[B * S * H * D], v[B * S * H * D], out[B * S * H * D];
    static float lse[B * H * S];
    fa_context *ctx;
    fa_params params;
    fa_tensor tq, tk, tv, tout, tlse;
    fa_status st;
    int i;
    for (i = 0; i < B * S * H * D; ++i) {
        q[i] = (float)sin(0.1 * i);
        k[i] = (float)cos(0.07 * i);
        v[i] = (float)sin(0.03 * i + 1.0);
    }
    if (fa_create(&ctx, FA_BACKEND_CPU, 0) != FA_OK) {
        fprintf(stderr, "fa_create: %s\n", fa_create_error());
        return 1;
    }
    tq = fa_tensor_bshd(q, FA_DTYPE_F32, B, S, H, D);
    tk = fa_tensor_bshd(k, FA_DTYPE_F32, B, S, H, D);
    tv = fa_tensor_bshd(v, FA_DTYPE_F32, B, S, H, D);
    tout = fa_tensor_bshd(out, FA_DTYPE_F32, B, S, H, D);
    tlse = fa_tensor_lse(lse, B, H, S);
    fa_params_init(&params);
    params.causal = 1;
    st = fa_fwd(ctx, &tq, &tk, &tv, &params, &tout, &tlse, NULL, 0);
    if (st != FA_OK) {
        fprintf(stderr, "fa_fwd: %s: %s\n", fa_status_string(st), fa_last_error(ctx));
        fa_destroy(ctx);
        return 1;
    }
    fa_destroy(ctx);
    for (i = 0; i < B * S * H * D; ++i)
        if (!isfinite(out[i]))
            return 1;
    /* Row 0 sees only key 0 under the causal mask: its output is v row 0 exactly. */
    if (fabsf(out[0] - v[0]) > 1e-6f)
        return 1;
    printf("flashattn %d.%d.%d consumer: causal forward ok, lse[0] = %g\n",
           FLASHATTN_VERSION_MAJOR, FLASHATTN_VERSION_MINOR, FLASHATTN_VERSION_PATCH,
           (double)lse[0]);
    return 0;
}
