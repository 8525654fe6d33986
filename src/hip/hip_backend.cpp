/*
 * hip_backend.cpp - the HIP runtime mapping, mirroring src/cuda/cuda_backend.cu: device
 * discovery and the arch-table row, device->host copies, and the runtime vocabulary
 * (device, memory, kernel launch) through which src/common/gpu_launch.h runs the
 * forward and backward kernels the dispatcher selected. Without an AMD GPU,
 * fa_create(FA_BACKEND_HIP) fails with FA_ERR_NO_DEVICE and says so. No attention logic
 * lives here; the kernels' LDS is static (src/hip/fa_device.h), so launches pass 0
 * dynamic bytes.
 */
#include <hip/hip_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/problem.h"
#include "gpu_kernels/attn_args.h"
#include "select/bwd_instances.h"
#include "select/fwd_instances.h"
#include "gpu_kernels/kernel_table.h"
#include "gpu_host/gpu_args.h"

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

#define FA_GPU_BACKEND_NAME "HIP"

static fa_status fa_hip_error(fa_context *ctx, hipError_t err, const char *what)
{
    return fa_fail(ctx, FA_ERR_DEVICE_RUNTIME, "%s: %s", what, hipGetErrorString(err));
}

/* The runtime vocabulary of src/common/gpu_launch.h. */
static fa_status fa_rt_set_device(fa_context *ctx)
{
    hipError_t err = hipSetDevice(ctx->device);
    return err == hipSuccess ? FA_OK : fa_hip_error(ctx, err, "hipSetDevice");
}

static fa_status fa_rt_alloc(fa_context *ctx, size_t bytes, void **ptr, const char *what)
{
    hipError_t err = hipMalloc(ptr, bytes);
    if (err == hipSuccess)
        return FA_OK;
    *ptr = NULL;
    return fa_fail(ctx, FA_ERR_OUT_OF_MEMORY, "%s of %zu bytes: %s", what, bytes, hipGetErrorString(err));
}

/* hipFree waits for the device; ROCm 5.2 has no stream-ordered free to rely on, so the
 * stream is drained first. */
static void fa_rt_release(fa_context *ctx, void *ptr)
{
    (void)hipStreamSynchronize((hipStream_t)ctx->stream);
    (void)hipFree(ptr);
}

/* The kernels' LDS is static (src/hip/fa_device.h): nothing to prepare, 0 dynamic bytes. */
static fa_status fa_rt_launch(fa_context *ctx, const void *kernel, fa_grid grid, unsigned threads,
                              void **args, int smem_bytes, int *prepared, const char *what)
{
    (void)smem_bytes;
    *prepared = 1;
    hipError_t err = hipLaunchKernel(kernel, dim3(grid.x, grid.y, grid.z), dim3(threads), args, 0,
                                     (hipStream_t)ctx->stream);
    return err == hipSuccess ? FA_OK : fa_hip_error(ctx, err, what);
}

#include "gpu_host/gpu_launch.h"

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
    const fa_arch_row reported = fa_arch_from_device(
        name, FA_VENDOR_AMD, prop.warpSize, (int)prop.sharedMemPerBlock,
        (int)prop.maxSharedMemoryPerMultiProcessor, prop.regsPerBlock, prop.maxThreadsPerBlock,
        prop.maxThreadsPerMultiProcessor, prop.multiProcessorCount, 1);
    fa_gpu_describe_device(ctx, FA_BACKEND_HIP, prop.name, &reported);
    return fa_gpu_state_create(ctx, why, why_len);
}

static void fa_hip_destroy(fa_context *ctx) { fa_gpu_state_destroy(ctx); }

static fa_status fa_hip_copy_to_host(fa_context *ctx, void *dst, const void *src, size_t bytes)
{
    hipError_t err = hipSetDevice(ctx->device);
    if (err == hipSuccess)
        err = hipMemcpyAsync(dst, src, bytes, hipMemcpyDeviceToHost, (hipStream_t)ctx->stream);
    if (err == hipSuccess)
        err = hipStreamSynchronize((hipStream_t)ctx->stream);
    return err == hipSuccess ? FA_OK : fa_hip_error(ctx, err, "reading cu_seqlens/seqused_k");
}

extern "C" const fa_backend_ops fa_hip_ops = {
    fa_hip_init, fa_hip_destroy, fa_gpu_set_stream, fa_hip_copy_to_host,
    fa_gpu_fwd_workspace, fa_gpu_run_fwd, NULL, fa_gpu_bwd_workspace, fa_gpu_run_bwd,
};
