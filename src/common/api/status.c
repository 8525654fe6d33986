/*
 * status.c - the names of statuses, backends and dtypes, and fa_fail, the one way any
 * layer (the API's checks, a backend, the GPU host side) records why a call failed.
 */
#include <stdarg.h>
#include <stdio.h>

#include "api/export.h"
#include "api/problem.h"

/* ------------------------------------------------------------------------------------ */
/* Names                                                                                */
/* ------------------------------------------------------------------------------------ */

FA_EXPORT const char *fa_status_string(fa_status status)
{
    switch (status) {
    case FA_OK: return "FA_OK";
    case FA_ERR_NULL_POINTER: return "FA_ERR_NULL_POINTER";
    case FA_ERR_BAD_RANK: return "FA_ERR_BAD_RANK";
    case FA_ERR_BAD_SIZE: return "FA_ERR_BAD_SIZE";
    case FA_ERR_SHAPE_MISMATCH: return "FA_ERR_SHAPE_MISMATCH";
    case FA_ERR_BAD_HEAD_DIM: return "FA_ERR_BAD_HEAD_DIM";
    case FA_ERR_BAD_GQA: return "FA_ERR_BAD_GQA";
    case FA_ERR_BAD_STRIDE: return "FA_ERR_BAD_STRIDE";
    case FA_ERR_BAD_DTYPE: return "FA_ERR_BAD_DTYPE";
    case FA_ERR_BAD_SEQLENS: return "FA_ERR_BAD_SEQLENS";
    case FA_ERR_BAD_PARAM: return "FA_ERR_BAD_PARAM";
    case FA_ERR_BAD_BACKEND: return "FA_ERR_BAD_BACKEND";
    case FA_ERR_BAD_TILE_OVERRIDE: return "FA_ERR_BAD_TILE_OVERRIDE";
    case FA_ERR_WORKSPACE_TOO_SMALL: return "FA_ERR_WORKSPACE_TOO_SMALL";
    case FA_ERR_UNSUPPORTED: return "FA_ERR_UNSUPPORTED";
    case FA_ERR_NO_DEVICE: return "FA_ERR_NO_DEVICE";
    case FA_ERR_OUT_OF_MEMORY: return "FA_ERR_OUT_OF_MEMORY";
    case FA_ERR_DEVICE_RUNTIME: return "FA_ERR_DEVICE_RUNTIME";
    case FA_ERR_DEVICE_CHECK: return "FA_ERR_DEVICE_CHECK";
    case FA_STATUS_COUNT: break;
    }
    return "FA_STATUS_UNKNOWN";
}

FA_EXPORT const char *fa_backend_name(fa_backend backend)
{
    switch (backend) {
    case FA_BACKEND_AUTO: return "auto";
    case FA_BACKEND_CPU: return "cpu";
    case FA_BACKEND_CUDA: return "cuda";
    case FA_BACKEND_HIP: return "hip";
    }
    return "unknown";
}

FA_EXPORT const char *fa_dtype_name(fa_dtype dtype)
{
    switch (dtype) {
    case FA_DTYPE_F32: return "f32";
    case FA_DTYPE_F16: return "f16";
    case FA_DTYPE_BF16: return "bf16";
    }
    return "unknown";
}

fa_status fa_fail(fa_context *ctx, fa_status status, const char *fmt, ...)
{
    va_list args;
    if (ctx == NULL)
        return status;
    va_start(args, fmt);
    vsnprintf(ctx->last_error, sizeof ctx->last_error, fmt, args);
    va_end(args);
    return status;
}

