/*
 * cuda_backend.cu - the CUDA runtime mapping: device discovery and the arch-table row,
 * device->host copies, and the runtime vocabulary (device, stream-ordered memory, kernel
 * launch) through which src/common/gpu_launch.h runs the forward and backward kernels
 * the dispatcher selected. No attention logic lives here.
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/problem.h"
#include "gpu_kernels/attn_args.h"
#include "gpu_host/gpu_args.h"
#include "select/bwd_instances.h"
#include "select/fwd_instances.h"
#include "gpu_kernels/kernel_table.h"

FA_CUDA_FWD_INSTANCES(FA_DECLARE_FWD_KERNELS)
static const void *const fa_fwd_kernels[] = {FA_CUDA_FWD_INSTANCES(FA_FWD_KERNEL_ENTRIES)};
#define FA_KERNEL_COUNT ((int)(sizeof(fa_fwd_kernels) / sizeof(fa_fwd_kernels[0])))
FA_CUDA_BWD_INSTANCES(FA_DECLARE_BWD_KERNELS)
static const void *const fa_bwd_kernels[][2] = {FA_CUDA_BWD_INSTANCES(FA_BWD_KERNEL_ENTRIES)};
#define FA_BWD_KERNEL_COUNT ((int)(sizeof(fa_bwd_kernels) / sizeof(fa_bwd_kernels[0])))

#define FA_GPU_BACKEND_NAME "CUDA"

static fa_status fa_cuda_error(fa_context *ctx, cudaError_t err, const char *what)
{
    return fa_fail(ctx, FA_ERR_DEVICE_RUNTIME, "%s: %s", what, cudaGetErrorString(err));
}

/* The runtime vocabulary of src/common/gpu_launch.h. */
static fa_status fa_rt_set_device(fa_context *ctx)
{
    cudaError_t err = cudaSetDevice(ctx->device);
    return err == cudaSuccess ? FA_OK : fa_cuda_error(ctx, err, "cudaSetDevice");
}

static fa_status fa_rt_alloc(fa_context *ctx, size_t bytes, void **ptr, const char *what)
{
    cudaError_t err = cudaMallocAsync(ptr, bytes, (cudaStream_t)ctx->stream);
    if (err == cudaSuccess)
        return FA_OK;
    *ptr = NULL;
    return fa_fail(ctx, FA_ERR_OUT_OF_MEMORY, "%s of %zu bytes: %s", what, bytes, cudaGetErrorString(err));
}

static void fa_rt_release(fa_context *ctx, void *ptr) { cudaFreeAsync(ptr, (cudaStream_t)ctx->stream); }

/* Dynamic shared memory above 48 KiB needs the kernel's limit raised first (once). */
static fa_status fa_rt_launch(fa_context *ctx, const void *kernel, fa_grid grid, unsigned threads,
                              void **args, int smem_bytes, int *prepared, const char *what)
{
    cudaError_t err = cudaSuccess;
    if (!*prepared) {
        err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);
        if (err != cudaSuccess)
            return fa_cuda_error(ctx, err, "raising the shared-memory limit");
        *prepared = 1;
    }
    err = cudaLaunchKernel(kernel, dim3(grid.x, grid.y, grid.z), dim3(threads), args, (size_t)smem_bytes,
                           (cudaStream_t)ctx->stream);
    return err == cudaSuccess ? FA_OK : fa_cuda_error(ctx, err, what);
}

#include "gpu_host/gpu_launch.h"

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
    const fa_arch_row reported = fa_arch_from_device(
        name, FA_VENDOR_NVIDIA, prop.warpSize, (int)prop.sharedMemPerBlockOptin,
        (int)prop.sharedMemPerMultiprocessor, prop.regsPerMultiprocessor, prop.maxThreadsPerBlock,
        prop.maxThreadsPerMultiProcessor, prop.multiProcessorCount, prop.major >= 8);
    fa_gpu_describe_device(ctx, FA_BACKEND_CUDA, prop.name, &reported);
    return fa_gpu_state_create(ctx, why, why_len);
}

static void fa_cuda_destroy(fa_context *ctx) { fa_gpu_state_destroy(ctx); }

static fa_status fa_cuda_copy_to_host(fa_context *ctx, void *dst, const void *src, size_t bytes)
{
    cudaError_t err = cudaSetDevice(ctx->device);
    if (err == cudaSuccess)
        err = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, (cudaStream_t)ctx->stream);
    if (err == cudaSuccess)
        err = cudaStreamSynchronize((cudaStream_t)ctx->stream);
    return err == cudaSuccess ? FA_OK : fa_cuda_error(ctx, err, "reading cu_seqlens/seqused_k");
}

extern "C" const fa_backend_ops fa_cuda_ops = {
    fa_cuda_init, fa_cuda_destroy, fa_gpu_set_stream, fa_cuda_copy_to_host,
    fa_gpu_fwd_workspace, fa_gpu_run_fwd, NULL, fa_gpu_bwd_workspace, fa_gpu_run_bwd,
};
