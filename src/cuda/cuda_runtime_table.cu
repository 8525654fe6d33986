/*
 * cuda_runtime_table.cu - the CUDA runtime as src/common/gpu_host/gpu_runtime.h's table:
 * each entry one CUDA call (stream-ordered memory, dynamic shared memory raised once per
 * kernel). Everything else of the host side is src/common/gpu_host/gpu_backend.c.
 */
#include <cuda_runtime.h>
#include <stdio.h>

#include "gpu_host/gpu_runtime.h"

extern "C" const void *const fa_cuda_fwd_combine_handle, *const fa_cuda_bwd_preprocess_handle,
    *const fa_cuda_bwd_convert_dq_handle;

static cudaStream_t as_stream(void *stream) { return (cudaStream_t)stream; }

static int cuda_device_count(int *count) { return cudaGetDeviceCount(count); }

/* sm_<major><minor>; shared memory per block as opted in (above the 48 KiB default). */
static int cuda_properties(int device, fa_gpu_properties *out)
{
    cudaDeviceProp prop;
    cudaError_t err = cudaGetDeviceProperties(&prop, device);
    if (err != cudaSuccess)
        return err;
    snprintf(out->device_name, sizeof out->device_name, "%s", prop.name);
    snprintf(out->arch, sizeof out->arch, "sm_%d%d", prop.major, prop.minor);
    out->wave_size = prop.warpSize;
    out->smem_per_block = (int)prop.sharedMemPerBlockOptin;
    out->smem_per_sm = (int)prop.sharedMemPerMultiprocessor;
    out->regs_per_sm = prop.regsPerMultiprocessor;
    out->max_threads_per_block = prop.maxThreadsPerBlock;
    out->max_threads_per_sm = prop.maxThreadsPerMultiProcessor;
    out->sm_count = prop.multiProcessorCount;
    out->has_matrix_unit = prop.major >= 8; /* the mma.sync shapes the kernels use */
    return cudaSuccess;
}

static int cuda_set_device(int device) { return cudaSetDevice(device); }

static int cuda_alloc(void **ptr, size_t bytes, void *stream)
{
    return cudaMallocAsync(ptr, bytes, as_stream(stream));
}

static void cuda_release(void *ptr, void *stream) { (void)cudaFreeAsync(ptr, as_stream(stream)); }

static int cuda_copy_to_host(void *dst, const void *src, size_t bytes, void *stream)
{
    cudaError_t err = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, as_stream(stream));
    return err != cudaSuccess ? err : cudaStreamSynchronize(as_stream(stream));
}

static int cuda_prepare_kernel(const void *kernel, int smem_bytes)
{
    return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);
}

static int cuda_launch(const void *kernel, fa_grid grid, unsigned threads, void **args, size_t smem_bytes,
                       void *stream)
{
    return cudaLaunchKernel(kernel, dim3(grid.x, grid.y, grid.z), dim3(threads), args, smem_bytes,
                            as_stream(stream));
}

static const char *cuda_error_text(int error) { return cudaGetErrorString((cudaError_t)error); }

extern "C" const fa_gpu_runtime fa_cuda_runtime = {
    "CUDA", FA_BACKEND_CUDA, FA_VENDOR_NVIDIA, NULL, 1,
    cuda_device_count, cuda_properties, cuda_set_device, cuda_alloc, cuda_release,
    cuda_copy_to_host, cuda_prepare_kernel, cuda_launch, cuda_error_text,
    &fa_cuda_fwd_combine_handle, &fa_cuda_bwd_preprocess_handle, &fa_cuda_bwd_convert_dq_handle,
};
