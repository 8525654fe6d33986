/*
 * hip_runtime_table.cpp - the HIP runtime as src/common/gpu_host/gpu_runtime.h's table.
 * The kernels' LDS is static (src/hip/fa_device.h): nothing to prepare, no dynamic
 * bytes. ROCm 5.2 has no stream-ordered free to rely on, so a release drains the stream
 * first. Only the targets this library holds code objects for run (FA_HIP_ARCH_LIST).
 */
#include <hip/hip_runtime.h>
#include <stdio.h>
#include <string.h>

#include "gpu_host/gpu_runtime.h"

#ifndef FA_HIP_ARCH_LIST
#error "FA_HIP_ARCH_LIST must name the built AMD targets"
#endif

extern "C" const void *const fa_hip_fwd_combine_handle, *const fa_hip_bwd_preprocess_handle,
    *const fa_hip_bwd_convert_dq_handle;

static hipStream_t hip_stream(void *stream) { return (hipStream_t)stream; }

static int hip_device_count(int *count) { return hipGetDeviceCount(count); }

/* The gfx name without target features ("gfx90a:sramecc+:xnack-" is gfx90a). */
static int hip_properties(int device, fa_gpu_properties *out)
{
    hipDeviceProp_t prop;
    hipError_t err = hipGetDeviceProperties(&prop, device);
    if (err != hipSuccess)
        return err;
    snprintf(out->device_name, sizeof out->device_name, "%s", prop.name);
    snprintf(out->arch, sizeof out->arch, "%.*s", (int)strcspn(prop.gcnArchName, ":"), prop.gcnArchName);
    out->wave_size = prop.warpSize;
    out->smem_per_block = (int)prop.sharedMemPerBlock;
    out->smem_per_sm = (int)prop.maxSharedMemoryPerMultiProcessor;
    out->regs_per_sm = prop.regsPerBlock;
    out->max_threads_per_block = prop.maxThreadsPerBlock;
    out->max_threads_per_sm = prop.maxThreadsPerMultiProcessor;
    out->sm_count = prop.multiProcessorCount;
    out->has_matrix_unit = 1;
    return hipSuccess;
}

static int hip_set_device(int device) { return hipSetDevice(device); }

static int hip_alloc(void **ptr, size_t bytes, void *stream)
{
    (void)stream;
    return hipMalloc(ptr, bytes);
}

static void hip_release(void *ptr, void *stream)
{
    (void)hipStreamSynchronize(hip_stream(stream));
    (void)hipFree(ptr);
}

static int hip_copy_to_host(void *dst, const void *src, size_t bytes, void *stream)
{
    hipError_t err = hipMemcpyAsync(dst, src, bytes, hipMemcpyDeviceToHost, hip_stream(stream));
    return err != hipSuccess ? err : hipStreamSynchronize(hip_stream(stream));
}

static int hip_launch(const void *kernel, fa_grid grid, unsigned threads, void **args, size_t smem_bytes,
                      void *stream)
{
    return hipLaunchKernel(kernel, dim3(grid.x, grid.y, grid.z), dim3(threads), args, smem_bytes,
                           hip_stream(stream));
}

static const char *hip_error_text(int error) { return hipGetErrorString((hipError_t)error); }

extern "C" const fa_gpu_runtime fa_hip_runtime = {
    "HIP", FA_BACKEND_HIP, FA_VENDOR_AMD, FA_HIP_ARCH_LIST, 0,
    hip_device_count, hip_properties, hip_set_device, hip_alloc, hip_release,
    hip_copy_to_host, NULL, hip_launch, hip_error_text,
    &fa_hip_fwd_combine_handle, &fa_hip_bwd_preprocess_handle, &fa_hip_bwd_convert_dq_handle,
};
