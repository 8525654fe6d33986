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
#include <string.h>

#include "fa_tensor_map.h"
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
    out->has_tensor_maps = prop->major >= 9 && fa_nv_find_encode_tiled() != NULL;
}

/* One operand as a rank-4 map (head dim, head, row, batch) with the layout's strides in
 * bytes; a varlen operand (batch stride 0) is one batch entry of `rows` rows. */
static cudaError_t fa_rt_operand_map(fa_nv_encode_tiled_fn encode, unsigned char out[FA_TMA_MAP_BYTES],
                                     const void *data, const fa_operand_layout *layout, const fa_fwd_args *a,
                                     int bf16, int heads, long long rows, int box_rows)
{
    const int varlen = a->cu_seqlens_q != NULL;
    /* A map's dimensions are positive: an operand without rows (no keys at all) gets one,
     * which the kernel never reads (it has no key tile). */
    const cuuint64_t dims[4] = {(cuuint64_t)a->head_dim, (cuuint64_t)heads, (cuuint64_t)(rows > 0 ? rows : 1),
                                (cuuint64_t)(varlen ? 1 : a->batch)};
    const cuuint64_t strides[3] = {2ull * (cuuint64_t)layout->head, 2ull * (cuuint64_t)layout->row,
                                   2ull * (cuuint64_t)(varlen ? layout->row : layout->batch)};
    const cuuint32_t box[4] = {64, 1, (cuuint32_t)box_rows, 1};
    CUtensorMap map;
    if (fa_nv_tensor_map_16bit(encode, &map, bf16, 4, data, dims, strides, box, 1) != CUDA_SUCCESS)
        return cudaErrorInvalidValue;
    memcpy(out, &map, FA_TMA_MAP_BYTES);
    return cudaSuccess;
}

/* The runtime table's encode_maps; the driver function is looked up once. */
static int fa_rt_encode_maps(const fa_fwd_args *a, const fa_bwd_args *bwd, int bf16, long long rows_q,
                             long long rows_k, int tile_m, int tile_n, fa_tma_maps *maps)
{
    static const fa_nv_encode_tiled_fn encode = fa_nv_find_encode_tiled();
    typedef char fa_map_size_matches[sizeof(CUtensorMap) == FA_TMA_MAP_BYTES ? 1 : -1];
    cudaError_t err;
    if (!encode)
        return cudaErrorNotSupported;
    err = fa_rt_operand_map(encode, maps->q, a->q, &a->q_layout, a, bf16, a->heads, rows_q, tile_m);
    if (err == cudaSuccess)
        err = fa_rt_operand_map(encode, maps->k, a->k, &a->k_layout, a, bf16, a->heads_k, rows_k, tile_n);
    if (err == cudaSuccess)
        err = fa_rt_operand_map(encode, maps->v, a->v, &a->v_layout, a, bf16, a->heads_k, rows_k, tile_n);
    if (err == cudaSuccess && bwd)
        err = fa_rt_operand_map(encode, maps->dout, bwd->dout, &bwd->dout_layout, a, bf16, a->heads, rows_q, tile_m);
    if (err == cudaSuccess && bwd)
        err = fa_rt_operand_map(encode, maps->dk, bwd->dk, &bwd->dk_layout, a, bf16, a->heads_k, rows_k, tile_n);
    if (err == cudaSuccess && bwd)
        err = fa_rt_operand_map(encode, maps->dv, bwd->dv, &bwd->dv_layout, a, bf16, a->heads_k, rows_k, tile_n);
    if (err == cudaSuccess && a->out_by_tma)
        err = fa_rt_operand_map(encode, maps->out, a->out, &a->out_layout, a, bf16, a->heads, rows_q,
                                FA_WS_O_BOX_ROWS);
    return err;
}
#define FA_RT_ENCODE_MAPS fa_rt_encode_maps

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
