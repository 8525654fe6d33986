/*
 * hip_backend.cpp - the HIP runtime mapping, mirroring src/cuda/cuda_backend.cu: device
 * discovery and the arch-table row, stream, device->host copies, workspace, and the
 * launch of the forward instance the dispatcher selected (plus the split-KV combine) and
 * of the backward (preprocess, then the dK/dV and dQ kernels of the selected instance).
 * Without an AMD GPU, fa_create(FA_BACKEND_HIP) fails with FA_ERR_NO_DEVICE and says so.
 * No attention logic lives here; the kernels' LDS is static (src/hip/fa_device.h), so
 * launches pass 0 dynamic bytes.
 */
#include <hip/hip_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fa_internal.h"
#include "attn_args.h"
#include "bwd_instances.h"
#include "fwd_instances.h"
#include "kernel_table.h"
#include "gpu_args.h"

FA_HIP_FWD_INSTANCES(FA_DECLARE_FWD_KERNELS)
static const void *const fa_fwd_kernels[] = {FA_HIP_FWD_INSTANCES(FA_FWD_KERNEL_ENTRIES)};
#define FA_KERNEL_COUNT ((int)(sizeof(fa_fwd_kernels) / sizeof(fa_fwd_kernels[0])))
FA_HIP_BWD_INSTANCES(FA_DECLARE_BWD_KERNELS)
static const void *const fa_bwd_kernels[][2] = {FA_HIP_BWD_INSTANCES(FA_BWD_KERNEL_ENTRIES)};
#define FA_BWD_KERNEL_COUNT ((int)(sizeof(fa_bwd_kernels) / sizeof(fa_bwd_kernels[0])))

/* The targets this library holds code objects for (FA_HIP_ARCHS, comma-separated by CMake). */
#ifndef FA_HIP_ARCH_LIST
#error "FA_HIP_ARCH_LIST must name the built AMD targets"
#endif

static fa_status fa_hip_error(fa_context *ctx, hipError_t err, const char *what)
{
    return fa_fail(ctx, FA_ERR_DEVICE_RUNTIME, "%s: %s", what, hipGetErrorString(err));
}

/* 1 when `arch` ("gfx942", target features already dropped) is in the ',' list. */
static int fa_arch_built(const char *arch)
{
    const char *p = FA_HIP_ARCH_LIST;
    size_t len = strlen(arch);
    while (*p) {
        size_t n = strcspn(p, ",");
        if (n == len && strncmp(p, arch, len) == 0)
            return 1;
        p += n + (p[n] == ',');
    }
    return 0;
}

static fa_status fa_hip_init(fa_context *ctx, char *why, size_t why_len)
{
    int count = 0;
    hipError_t err = hipGetDeviceCount(&count);
    if (err != hipSuccess || count == 0) {
        snprintf(why, why_len, "no AMD GPU (HIP): %s",
                 err != hipSuccess ? hipGetErrorString(err) : "device count is 0");
        return FA_ERR_NO_DEVICE;
    }
    if (ctx->device >= count) {
        snprintf(why, why_len, "HIP device index %d out of range (%d devices)", ctx->device, count);
        return FA_ERR_BAD_BACKEND;
    }
    hipDeviceProp_t prop;
    err = hipGetDeviceProperties(&prop, ctx->device);
    if (err != hipSuccess) {
        snprintf(why, why_len, "hipGetDeviceProperties: %s", hipGetErrorString(err));
        return FA_ERR_DEVICE_RUNTIME;
    }
    char name[16];
    snprintf(name, sizeof name, "%.*s", (int)strcspn(prop.gcnArchName, ":"), prop.gcnArchName);
    if (!fa_arch_built(name)) {
        snprintf(why, why_len, "device %s (%s) is not among the AMD targets this library was "
                 "built for (%s): rebuild with FA_HIP_ARCHS including it", prop.name, name,
                 FA_HIP_ARCH_LIST);
        return FA_ERR_UNSUPPORTED;
    }
    const fa_arch_row *row = fa_arch_find(name);
    /* Reported limits always win: a cut-down part or a future driver may differ. */
    ctx->row = fa_arch_from_device(name, FA_VENDOR_AMD, prop.warpSize, (int)prop.sharedMemPerBlock,
                                   (int)prop.maxSharedMemoryPerMultiProcessor, prop.regsPerBlock,
                                   prop.maxThreadsPerBlock, prop.maxThreadsPerMultiProcessor,
                                   prop.multiProcessorCount, 1);
    if (row) {
        ctx->row = *row;
        ctx->row.sm_count = prop.multiProcessorCount;
        if ((int)prop.sharedMemPerBlock < ctx->row.smem_per_block)
            ctx->row.smem_per_block = (int)prop.sharedMemPerBlock;
    }
    fa_device_info *info = &ctx->info;
    memset(info, 0, sizeof *info);
    info->backend = FA_BACKEND_HIP;
    snprintf(info->device_name, sizeof info->device_name, "%s", prop.name);
    snprintf(info->arch, sizeof info->arch, "%s", ctx->row.name);
    info->row_from_table = row != NULL;
    info->wave_size = ctx->row.wave_size;
    info->smem_per_block = ctx->row.smem_per_block;
    info->smem_per_sm = ctx->row.smem_per_sm;
    info->regs_per_sm = ctx->row.regs_per_sm;
    info->max_threads_per_block = ctx->row.max_threads_per_block;
    info->sm_count = ctx->row.sm_count;
    snprintf(info->matrix_unit, sizeof info->matrix_unit, "%s",
             ctx->row.matrix_unit == FA_MATRIX_MFMA ? "mfma"
             : ctx->row.matrix_unit == FA_MATRIX_WMMA ? "wmma" : "none");
    return FA_OK;
}

static void fa_hip_destroy(fa_context *ctx) { (void)ctx; }

static fa_status fa_hip_copy_to_host(fa_context *ctx, void *dst, const void *src, size_t bytes)
{
    hipError_t err = hipSetDevice(ctx->device);
    if (err == hipSuccess)
        err = hipMemcpyAsync(dst, src, bytes, hipMemcpyDeviceToHost, (hipStream_t)ctx->stream);
    if (err == hipSuccess)
        err = hipStreamSynchronize((hipStream_t)ctx->stream);
    return err == hipSuccess ? FA_OK : fa_hip_error(ctx, err, "reading cu_seqlens/seqused_k");
}

static fa_status fa_hip_launch(fa_context *ctx, const fa_selection *sel, const fa_problem *p,
                               fa_fwd_args *args)
{
    const fa_kernel_config *cfg = sel->config;
    hipStream_t stream = (hipStream_t)ctx->stream;
    const fa_grid g = fa_fwd_grid(p, sel);
    dim3 grid(g.x, g.y, g.z);
    void *kernel_args[] = {args};
    hipError_t err = hipLaunchKernel(fa_fwd_kernels[cfg->kernel_id], grid, dim3((unsigned)cfg->threads),
                                     kernel_args, 0, stream);
    if (err != hipSuccess)
        return fa_hip_error(ctx, err, "launching the forward kernel");
    if (sel->num_splits > 1) {
        int out_bf16 = p->dtype == FA_DTYPE_BF16;
        void *combine_args[] = {args, &out_bf16};
        const fa_grid c = fa_combine_grid(p);
        dim3 cgrid(c.x, c.y, c.z);
        err = hipLaunchKernel((const void *)fa_fwd_combine, cgrid, dim3(FA_COMBINE_THREADS), combine_args, 0, stream);
        if (err != hipSuccess)
            return fa_hip_error(ctx, err, "launching the split-KV combine");
    }
    return FA_OK;
}

static fa_status fa_hip_fwd(fa_context *ctx, const fa_problem *p, const fa_selection *sel,
                            void *workspace, size_t workspace_bytes)
{
    fa_status checked = fa_gpu_check_fwd(ctx, p, sel, FA_KERNEL_COUNT, "HIP");
    if (checked != FA_OK)
        return checked;
    hipError_t err = hipSetDevice(ctx->device);
    if (err != hipSuccess)
        return fa_hip_error(ctx, err, "hipSetDevice");
    size_t need = fa_split_bytes(p, sel->num_splits);
    void *owned = NULL;
    if (need > 0 && workspace == NULL) {
        err = hipMalloc(&owned, need);
        if (err != hipSuccess)
            return fa_fail(ctx, FA_ERR_OUT_OF_MEMORY, "split-KV workspace of %zu bytes: %s", need,
                           hipGetErrorString(err));
        workspace = owned;
    }
    (void)workspace_bytes; /* api.c has checked it against fa_gpu_fwd_workspace */
    fa_fwd_args args = fa_make_args(p, sel->num_splits, workspace);
    fa_status st = fa_hip_launch(ctx, sel, p, &args);
    if (owned) {
        /* hipFree waits for the device; ROCm 5.2 has no stream-ordered free to rely on. */
        (void)hipStreamSynchronize((hipStream_t)ctx->stream);
        (void)hipFree(owned);
    }
    return st;
}

/* Preprocess (FA_PREP_ROWS rows per block), then dK/dV over key tiles, then dQ (its
 * conversion, or its own pass over query tiles), all in stream order. */
static fa_status fa_hip_bwd_launch(fa_context *ctx, const fa_selection *sel, const fa_problem *p,
                                   fa_bwd_args *args)
{
    const fa_kernel_config *cfg = sel->config;
    hipStream_t stream = (hipStream_t)ctx->stream;
    const void *const *pair = fa_bwd_kernels[cfg->kernel_id];
    void *kernel_args[] = {args};
    const fa_grid prep = fa_bwd_prep_grid(p), dkdv = fa_bwd_dkdv_grid(p, cfg), dq = fa_bwd_dq_grid(p, cfg);
    const dim3 block((unsigned)cfg->threads);
    hipError_t err = hipLaunchKernel((const void *)fa_bwd_preprocess, dim3(prep.x, prep.y, prep.z), dim3(FA_PREP_ROWS),
                           kernel_args, 0, stream);
    if (err == hipSuccess)
        err = hipLaunchKernel(pair[0], dim3(dkdv.x, dkdv.y, dkdv.z), block, kernel_args, 0, stream);
    /* dQ: summed by the dK/dV pass's atomics and converted, or its own pass. */
    if (err == hipSuccess && args->dq_accum)
        err = hipLaunchKernel((const void *)fa_bwd_convert_dq, dim3(prep.x, prep.y, prep.z), dim3(FA_PREP_ROWS),
                               kernel_args, 0, stream);
    else if (err == hipSuccess)
        err = hipLaunchKernel(pair[1], dim3(dq.x, dq.y, dq.z), block, kernel_args, 0, stream);
    return err == hipSuccess ? FA_OK : fa_hip_error(ctx, err, "launching the backward kernels");
}

static fa_status fa_hip_bwd(fa_context *ctx, const fa_problem *p, const fa_selection *sel,
                            void *workspace, size_t workspace_bytes)
{
    fa_status checked = fa_gpu_check_bwd(ctx, p, sel, FA_BWD_KERNEL_COUNT, "HIP");
    if (checked != FA_OK)
        return checked;
    hipError_t err = hipSetDevice(ctx->device);
    if (err != hipSuccess)
        return fa_hip_error(ctx, err, "hipSetDevice");
    size_t need = fa_bwd_workspace_bytes(p, sel->config);
    void *owned = NULL;
    if (workspace == NULL) {
        err = hipMalloc(&owned, need);
        if (err != hipSuccess)
            return fa_fail(ctx, FA_ERR_OUT_OF_MEMORY, "backward workspace of %zu bytes: %s", need,
                           hipGetErrorString(err));
        workspace = owned;
    }
    (void)workspace_bytes; /* api.c has checked it against fa_gpu_bwd_workspace */
    fa_bwd_args args = fa_make_bwd_args(p, sel->config, workspace);
    fa_status st = fa_hip_bwd_launch(ctx, sel, p, &args);
    if (owned) {
        /* As in fa_hip_fwd: hipFree waits for the device. */
        (void)hipStreamSynchronize((hipStream_t)ctx->stream);
        (void)hipFree(owned);
    }
    return st;
}

extern "C" const fa_backend_ops fa_hip_ops = {
    fa_hip_init, fa_hip_destroy, fa_gpu_set_stream, fa_hip_copy_to_host,
    fa_gpu_fwd_workspace, fa_hip_fwd, NULL, fa_gpu_bwd_workspace, fa_hip_bwd,
};
