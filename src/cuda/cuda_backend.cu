/*
 * cuda_backend.cu - the CUDA runtime mapping: device discovery and the arch-table row,
 * stream, device->host copies, workspace, and the launch of the forward instance the
 * dispatcher selected (plus the split-KV combine). No attention logic lives here.
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fa_internal.h"
#include "attn_args.h"
#include "gpu_args.h"
#include "bwd_instances.h"
#include "fwd_instances.h"
#include "kernel_table.h"

FA_CUDA_FWD_INSTANCES(FA_DECLARE_FWD_KERNELS)
static const void *const fa_fwd_kernels[] = {FA_CUDA_FWD_INSTANCES(FA_FWD_KERNEL_ENTRIES)};
#define FA_KERNEL_COUNT ((int)(sizeof(fa_fwd_kernels) / sizeof(fa_fwd_kernels[0])))
FA_CUDA_BWD_INSTANCES(FA_DECLARE_BWD_KERNELS)
static const void *const fa_bwd_kernels[][2] = {FA_CUDA_BWD_INSTANCES(FA_BWD_KERNEL_ENTRIES)};
#define FA_BWD_KERNEL_COUNT ((int)(sizeof(fa_bwd_kernels) / sizeof(fa_bwd_kernels[0])))

typedef struct fa_cuda_state {
    int smem_raised[FA_KERNEL_COUNT];         /* dynamic shared-memory limit already raised */
    int bwd_smem_raised[FA_BWD_KERNEL_COUNT];
} fa_cuda_state;

static fa_status fa_cuda_error(fa_context *ctx, cudaError_t err, const char *what)
{
    return fa_fail(ctx, FA_ERR_DEVICE_RUNTIME, "%s: %s", what, cudaGetErrorString(err));
}

static fa_status fa_cuda_init(fa_context *ctx, char *why, size_t why_len)
{
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess || count == 0) {
        snprintf(why, why_len, "no CUDA device: %s",
                 err != cudaSuccess ? cudaGetErrorString(err) : "device count is 0");
        return FA_ERR_NO_DEVICE;
    }
    if (ctx->device >= count) {
        snprintf(why, why_len, "CUDA device index %d out of range (%d devices)", ctx->device, count);
        return FA_ERR_BAD_BACKEND;
    }
    cudaDeviceProp prop;
    err = cudaGetDeviceProperties(&prop, ctx->device);
    if (err != cudaSuccess) {
        snprintf(why, why_len, "cudaGetDeviceProperties: %s", cudaGetErrorString(err));
        return FA_ERR_DEVICE_RUNTIME;
    }
    char name[16];
    snprintf(name, sizeof name, "sm_%d%d", prop.major, prop.minor);
    const fa_arch_row *row = fa_arch_find(name);
    /* Reported limits always win: a cut-down part or a future driver may differ. */
    ctx->row = fa_arch_from_device(name, FA_VENDOR_NVIDIA, prop.warpSize,
                                   (int)prop.sharedMemPerBlockOptin,
                                   (int)prop.sharedMemPerMultiprocessor, prop.regsPerMultiprocessor,
                                   prop.maxThreadsPerBlock, prop.maxThreadsPerMultiProcessor,
                                   prop.multiProcessorCount, prop.major >= 8);
    if (row) {
        ctx->row = *row;
        ctx->row.sm_count = prop.multiProcessorCount;
        if ((int)prop.sharedMemPerBlockOptin < ctx->row.smem_per_block)
            ctx->row.smem_per_block = (int)prop.sharedMemPerBlockOptin;
    }
    fa_device_info *info = &ctx->info;
    memset(info, 0, sizeof *info);
    info->backend = FA_BACKEND_CUDA;
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
             ctx->row.matrix_unit == FA_MATRIX_MMA_SYNC ? "mma.sync" : "none");

    fa_cuda_state *state = (fa_cuda_state *)calloc(1, sizeof *state);
    if (!state) {
        snprintf(why, why_len, "out of host memory");
        return FA_ERR_OUT_OF_MEMORY;
    }
    ctx->state = state;
    return FA_OK;
}

static void fa_cuda_destroy(fa_context *ctx)
{
    free(ctx->state);
    ctx->state = NULL;
}

static fa_status fa_cuda_copy_to_host(fa_context *ctx, void *dst, const void *src, size_t bytes)
{
    cudaError_t err = cudaSetDevice(ctx->device);
    if (err == cudaSuccess)
        err = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, (cudaStream_t)ctx->stream);
    if (err == cudaSuccess)
        err = cudaStreamSynchronize((cudaStream_t)ctx->stream);
    return err == cudaSuccess ? FA_OK : fa_cuda_error(ctx, err, "reading cu_seqlens/seqused_k");
}

static fa_status fa_cuda_launch(fa_context *ctx, const fa_selection *sel, const fa_problem *p,
                                fa_fwd_args *args)
{
    const fa_kernel_config *cfg = sel->config;
    fa_cuda_state *state = (fa_cuda_state *)ctx->state;
    const void *kernel = fa_fwd_kernels[cfg->kernel_id];
    cudaStream_t stream = (cudaStream_t)ctx->stream;
    cudaError_t err = cudaSuccess;
    if (!state->smem_raised[cfg->kernel_id]) {
        err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, cfg->smem_bytes);
        if (err != cudaSuccess)
            return fa_cuda_error(ctx, err, "raising the shared-memory limit");
        state->smem_raised[cfg->kernel_id] = 1;
    }
    const fa_grid g = fa_fwd_grid(p, sel);
    dim3 grid(g.x, g.y, g.z);
    void *kernel_args[] = {args};
    err = cudaLaunchKernel(kernel, grid, dim3((unsigned)cfg->threads), kernel_args,
                           (size_t)cfg->smem_bytes, stream);
    if (err != cudaSuccess)
        return fa_cuda_error(ctx, err, "launching the forward kernel");
    if (sel->num_splits > 1) {
        int out_bf16 = p->dtype == FA_DTYPE_BF16;
        void *combine_args[] = {args, &out_bf16};
        const fa_grid c = fa_combine_grid(p);
        dim3 cgrid(c.x, c.y, c.z);
        err = cudaLaunchKernel((const void *)fa_fwd_combine, cgrid, dim3(FA_COMBINE_THREADS), combine_args, 0, stream);
        if (err != cudaSuccess)
            return fa_cuda_error(ctx, err, "launching the split-KV combine");
    }
    return FA_OK;
}

static fa_status fa_cuda_fwd(fa_context *ctx, const fa_problem *p, const fa_selection *sel,
                             void *workspace, size_t workspace_bytes)
{
    fa_status checked = fa_gpu_check_fwd(ctx, p, sel, FA_KERNEL_COUNT, "CUDA");
    if (checked != FA_OK)
        return checked;
    cudaError_t err = cudaSetDevice(ctx->device);
    if (err != cudaSuccess)
        return fa_cuda_error(ctx, err, "cudaSetDevice");
    size_t need = fa_split_bytes(p, sel->num_splits);
    void *owned = NULL;
    if (need > 0 && workspace == NULL) {
        err = cudaMallocAsync(&owned, need, (cudaStream_t)ctx->stream);
        if (err != cudaSuccess)
            return fa_fail(ctx, FA_ERR_OUT_OF_MEMORY, "split-KV workspace of %zu bytes: %s", need,
                           cudaGetErrorString(err));
        workspace = owned;
    }
    (void)workspace_bytes; /* api.c has checked it against fa_gpu_fwd_workspace */
    fa_fwd_args args = fa_make_args(p, sel->num_splits, workspace);
    fa_status st = fa_cuda_launch(ctx, sel, p, &args);
    if (owned)
        cudaFreeAsync(owned, (cudaStream_t)ctx->stream);
    return st;
}

static fa_status fa_cuda_bwd_launch(fa_context *ctx, const fa_selection *sel, const fa_problem *p,
                                    fa_bwd_args *args)
{
    const fa_kernel_config *cfg = sel->config;
    fa_cuda_state *state = (fa_cuda_state *)ctx->state;
    cudaStream_t stream = (cudaStream_t)ctx->stream;
    const void *const *pair = fa_bwd_kernels[cfg->kernel_id];
    cudaError_t err = cudaSuccess;
    if (!state->bwd_smem_raised[cfg->kernel_id]) {
        for (int i = 0; i < 2 && err == cudaSuccess; ++i)
            err = cudaFuncSetAttribute(pair[i], cudaFuncAttributeMaxDynamicSharedMemorySize, cfg->smem_bytes);
        if (err != cudaSuccess)
            return fa_cuda_error(ctx, err, "raising the shared-memory limit");
        state->bwd_smem_raised[cfg->kernel_id] = 1;
    }
    void *kernel_args[] = {args};
    const fa_grid prep = fa_bwd_prep_grid(p), dkdv = fa_bwd_dkdv_grid(p, cfg), dq = fa_bwd_dq_grid(p, cfg);
    const dim3 block((unsigned)cfg->threads);
    err = cudaLaunchKernel((const void *)fa_bwd_preprocess, dim3(prep.x, prep.y, prep.z), dim3(FA_PREP_ROWS),
                           kernel_args, 0, stream);
    if (err == cudaSuccess)
        err = cudaLaunchKernel(pair[0], dim3(dkdv.x, dkdv.y, dkdv.z), block, kernel_args, (size_t)cfg->smem_bytes, stream);
    /* dQ: summed by the dK/dV pass's atomics and converted, or its own pass. */
    if (err == cudaSuccess && args->dq_accum)
        err = cudaLaunchKernel((const void *)fa_bwd_convert_dq, dim3(prep.x, prep.y, prep.z), dim3(FA_PREP_ROWS),
                               kernel_args, 0, stream);
    else if (err == cudaSuccess)
        err = cudaLaunchKernel(pair[1], dim3(dq.x, dq.y, dq.z), block, kernel_args, (size_t)cfg->smem_bytes, stream);
    return err == cudaSuccess ? FA_OK : fa_cuda_error(ctx, err, "launching the backward kernels");
}

static fa_status fa_cuda_bwd(fa_context *ctx, const fa_problem *p, const fa_selection *sel,
                             void *workspace, size_t workspace_bytes)
{
    fa_status checked = fa_gpu_check_bwd(ctx, p, sel, FA_BWD_KERNEL_COUNT, "CUDA");
    if (checked != FA_OK)
        return checked;
    cudaError_t err = cudaSetDevice(ctx->device);
    if (err != cudaSuccess)
        return fa_cuda_error(ctx, err, "cudaSetDevice");
    size_t need = fa_bwd_workspace_bytes(p, sel->config);
    void *owned = NULL;
    if (workspace == NULL) {
        err = cudaMallocAsync(&owned, need, (cudaStream_t)ctx->stream);
        if (err != cudaSuccess)
            return fa_fail(ctx, FA_ERR_OUT_OF_MEMORY, "backward workspace of %zu bytes: %s", need,
                           cudaGetErrorString(err));
        workspace = owned;
    }
    (void)workspace_bytes; /* api.c has checked it against fa_gpu_bwd_workspace */
    fa_bwd_args args = fa_make_bwd_args(p, sel->config, workspace);
    fa_status st = fa_cuda_bwd_launch(ctx, sel, p, &args);
    if (owned)
        cudaFreeAsync(owned, (cudaStream_t)ctx->stream);
    return st;
}

extern "C" const fa_backend_ops fa_cuda_ops = {
    fa_cuda_init, fa_cuda_destroy, fa_gpu_set_stream, fa_cuda_copy_to_host,
    fa_gpu_fwd_workspace, fa_cuda_fwd, NULL, fa_gpu_bwd_workspace, fa_cuda_bwd,
};
