/*
 * hip_no_device.c - the HIP-linked library on a machine without an AMD GPU: fa_create
 * (FA_BACKEND_HIP) must return FA_ERR_NO_DEVICE with a message naming the reason, and
 * AUTO must fall back to the CPU; then the test reports itself skipped (exit code 4,
 * as tests/gpu/gpu_main.cpp does). With a device present there is nothing to check here.
 */
#include <stdio.h>
#include <string.h>

#include "flashattn.h"

int main(void)
{
    fa_context *ctx = NULL;
    fa_status st = fa_create(&ctx, FA_BACKEND_HIP, 0);
    if (st == FA_OK) {
        fa_destroy(ctx);
        printf("an AMD GPU is present: nothing to check without a device\n");
        return 0;
    }
    if (st != FA_ERR_NO_DEVICE || ctx != NULL || strstr(fa_create_error(), "no AMD GPU") == NULL) {
        printf("FAIL: fa_create(FA_BACKEND_HIP) gave %s: %s\n", fa_status_string(st), fa_create_error());
        return 1;
    }
    printf("fa_create(FA_BACKEND_HIP): %s: %s\n", fa_status_string(st), fa_create_error());
    st = fa_create(&ctx, FA_BACKEND_AUTO, 0);
    if (st != FA_OK || fa_context_backend(ctx) != FA_BACKEND_CPU) {
        printf("FAIL: FA_BACKEND_AUTO gave %s, backend %d\n", fa_status_string(st), (int)fa_context_backend(ctx));
        fa_destroy(ctx);
        return 1;
    }
    fa_destroy(ctx);
    printf("no AMD GPU present: HIP device tests skipped\n");
    return 4;
}
