/*
 * fa_runtime.h - the HIP runtime's vocabulary for src/common/gpu_host/runtime_table.cpp,
 * which writes every vendor's runtime table once: the prefix of the runtime's names (the
 * calls the table makes are spelled alike in HIP and CUDA), the table's identity, and
 * what HIP does its own way. Only the targets this library holds code objects for run
 * (FA_HIP_ARCH_LIST, from CMake). The kernels' LDS is static (src/hip/fa_device.h): no
 * dynamic bytes, nothing to prepare. ROCm 5.2 has no stream-ordered free to rely on, so
 * memory is plain hipMalloc and a release drains the stream first (so only a call given
 * its workspace is capturable). Mapped host memory is asked coherent.
 */
#ifndef FA_RUNTIME_H
#define FA_RUNTIME_H

#include <hip/hip_runtime.h>
#include <stdio.h>
#include <string.h>

#include "gpu_host/gpu_runtime.h"

#ifndef FA_HIP_ARCH_LIST
#error "FA_HIP_ARCH_LIST must name the built AMD targets"
#endif

#define FA_RT(name) hip##name
#define FA_RT_TABLE fa_hip_runtime
#define FA_RT_HANDLE(kernel) fa_hip_##kernel##_handle
#define FA_RT_NAME "HIP"
#define FA_RT_DEVICE_KIND "AMD GPU"
#define FA_RT_BACKEND FA_BACKEND_HIP
#define FA_RT_VENDOR FA_VENDOR_AMD
#define FA_RT_BUILT_TARGETS FA_HIP_ARCH_LIST
#define FA_RT_ENCODE_MAPS NULL /* no warpgroup kernels on AMD */
#define FA_RT_TARGETS_OPTION "FA_HIP_ARCHS"
#define fa_rt_prepare_kernel NULL
typedef hipDeviceProp_t fa_rt_device_prop;

/* HIP has no programmatic dependent launch: an overlapping launch is a plain one. */
static hipError_t fa_rt_launch_overlapping(const void *kernel, dim3 grid, dim3 block, void **args, size_t smem,
                                           hipStream_t stream)
{
    return hipLaunchKernel(kernel, grid, block, args, smem, stream);
}

/* The gfx name without its target features ("gfx90a:sramecc+:xnack-" is gfx90a); every
 * AMD target the arch table lists has matrix cores (MFMA or WMMA). */
static void fa_rt_vendor_props(const hipDeviceProp_t *prop, fa_gpu_properties *out)
{
    snprintf(out->arch, sizeof out->arch, "%.*s", (int)strcspn(prop->gcnArchName, ":"), prop->gcnArchName);
    out->smem_per_block = (int)prop->sharedMemPerBlock;
    out->smem_per_sm = (int)prop->maxSharedMemoryPerMultiProcessor;
    out->regs_per_sm = prop->regsPerBlock;
    out->has_matrix_unit = 1;
    out->launch_overlap = 0; /* no programmatic dependent launch */
    out->has_tensor_maps = 0;
}

static int fa_rt_alloc(void **ptr, size_t bytes, void *stream)
{
    (void)stream;
    return hipMalloc(ptr, bytes);
}

static void fa_rt_release(void *ptr, void *stream)
{
    (void)hipStreamSynchronize((hipStream_t)stream);
    (void)hipFree(ptr);
}

/* Pinned host memory mapped into the device's address space; coherent, so the device's
 * writes (the device-check record) reach the host without a synchronisation. */
static hipError_t fa_rt_host_alloc_mapped(void **host, size_t bytes)
{
    return hipHostMalloc(host, bytes, hipHostMallocMapped | hipHostMallocCoherent);
}

static hipError_t fa_rt_host_free(void *host) { return hipHostFree(host); }

#endif /* FA_RUNTIME_H */
