/*
 * fa_runtime.h - the CUDA runtime's vocabulary for src/common/gpu_host/runtime_table.cpp,
 * which writes every vendor's runtime table once: the prefix of the runtime's names (the
 * calls the table makes are spelled alike in CUDA and HIP), the table's identity, and
 * what CUDA does its own way: the device's arch name and per-block shared memory (as
 * opted in, above the 48 KiB default), stream-ordered memory, mapped pinned host memory,
 * and dynamic shared memory
 * that each kernel must be allowed once before a launch passes it.
 */
#ifndef FA_RUNTIME_H
#define FA_RUNTIME_H

#include <cuda_runtime.h>
#include <stdio.h>

#include "gpu_host/gpu_runtime.h"

#define FA_RT(name) cuda##name
#define FA_RT_TABLE fa_cuda_runtime
#define FA_RT_HANDLE(kernel) fa_cuda_##kernel##_handle
#define FA_RT_NAME "CUDA"
#define FA_RT_DEVICE_KIND "NVIDIA GPU"
#define FA_RT_BACKEND FA_BACKEND_CUDA
#define FA_RT_VENDOR FA_VENDOR_NVIDIA
/* Every device may run: the build carries PTX of its newest target for later GPUs. */
#define FA_RT_BUILT_TARGETS NULL
#define FA_RT_TARGETS_OPTION "FA_CUDA_ARCHS"
typedef cudaDeviceProp fa_rt_device_prop;

/* sm_<major><minor>; the kernels' mma.sync shapes need sm_80 or later. */
static void fa_rt_vendor_props(const cudaDeviceProp *prop, fa_gpu_properties *out)
{
    snprintf(out->arch, sizeof out->arch, "sm_%d%d", prop->major, prop->minor);
    out->smem_per_block = (int)prop->sharedMemPerBlockOptin;
    out->smem_per_sm = (int)prop->sharedMemPerMultiprocessor;
    out->regs_per_sm = prop->regsPerMultiprocessor;
    out->has_matrix_unit = prop->major >= 8;
    /* Programmatic dependent launch needs an sm_90+ device running kernel code built for
     * sm_90+: fa_device.h's wait and release exist only there, and a build whose newest
     * target is older runs JIT-compiled PTX without them (FA_CUDA_NEWEST_ARCH: CMake). */
    out->launch_overlap = prop->major >= 9 && FA_CUDA_NEWEST_ARCH >= 90;
}

static int fa_rt_alloc(void **ptr, size_t bytes, void *stream)
{
    return cudaMallocAsync(ptr, bytes, (cudaStream_t)stream);
}

static void fa_rt_release(void *ptr, void *stream) { (void)cudaFreeAsync(ptr, (cudaStream_t)stream); }

/* Pinned host memory mapped into the device's address space. */
static cudaError_t fa_rt_host_alloc_mapped(void **host, size_t bytes)
{
    return cudaHostAlloc(host, bytes, cudaHostAllocMapped);
}

static cudaError_t fa_rt_host_free(void *host) { return cudaFreeHost(host); }

/* A launch with programmatic stream serialization (CUDA programming guide, programmatic
 * dependent launch; captured into graphs as a programmatic edge): the kernel's blocks may
 * start once every block of the previous kernel has called griddepcontrol.launch_dependents
 * or exited, and its fa_wait_prior_grid waits for that kernel's end. */
static cudaError_t fa_rt_launch_overlapping(const void *kernel, dim3 grid, dim3 block, void **args, size_t smem,
                                            cudaStream_t stream)
{
    cudaLaunchAttribute overlap;
    overlap.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    overlap.val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t config = {};
    config.gridDim = grid;
    config.blockDim = block;
    config.dynamicSmemBytes = smem;
    config.stream = stream;
    config.attrs = &overlap;
    config.numAttrs = 1;
    return cudaLaunchKernelExC(&config, kernel, args);
}

static int fa_rt_prepare_kernel(const void *kernel, int smem_bytes)
{
    return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);
}

#endif /* FA_RUNTIME_H */
