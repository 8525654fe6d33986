/*
 * fa_tensor_map.h (NVIDIA, host) - TMA tensor maps (CUtensorMap) for 16-bit operands,
 * encoded on the host by the driver's cuTensorMapEncodeTiled. The library links only the
 * CUDA runtime (cudart_static), never libcuda, so the driver function is looked up at run
 * time through cudaGetDriverEntryPointByVersion (CUDA runtime API, "Driver Entry Point
 * Access"; the older cudaGetDriverEntryPoint is deprecated in CUDA 13). cuda.h is read
 * for its types only.
 *
 * Encoding is pure host work (no device call, no stream order), so a map can be made for
 * every call from that call's pointers and strides and passed by value as a
 * __grid_constant__ kernel parameter: a graph captures it with the launch like any
 * other argument (docs/research/issue13_hopper.md, "Host side").
 */
#ifndef FA_TENSOR_MAP_H
#define FA_TENSOR_MAP_H

#include <cuda.h>
#include <cuda_runtime.h>

typedef CUresult (*fa_nv_encode_tiled_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *,
                                          const cuuint64_t *, const cuuint32_t *, const cuuint32_t *,
                                          CUtensorMapInterleave, CUtensorMapSwizzle, CUtensorMapL2promotion,
                                          CUtensorMapFloatOOBfill);

/* The driver's cuTensorMapEncodeTiled with its CUDA 12.0 signature, or NULL when the
 * driver has none. The library looks it up once per context (fa_create) and keeps it in
 * its runtime table; tests call this directly. */
static inline fa_nv_encode_tiled_fn fa_nv_find_encode_tiled(void)
{
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found) !=
            cudaSuccess ||
        found != cudaDriverEntryPointSuccess)
        return NULL;
    return (fa_nv_encode_tiled_fn)fn;
}

/* A tiled map of a rank-`rank` (1..5) tensor of 16-bit elements: dims[0] innermost
 * (contiguous), byte strides of dims 1.. in strides[0 .. rank-2] (multiples of 16),
 * boxes of box[] elements (box[0] * 2 <= 128 with the 128-byte swizzle), every element
 * stride 1. Out-of-bounds elements load as zeros (FLOAT_OOB_FILL_NONE); L2 promotion
 * 128 bytes. Returns the driver's CUresult (CUDA_ERROR_NOT_SUPPORTED without a driver
 * function). */
static inline CUresult fa_nv_tensor_map_16bit(fa_nv_encode_tiled_fn encode, CUtensorMap *map, int bf16, int rank,
                                              const void *base, const cuuint64_t *dims, const cuuint64_t *strides,
                                              const cuuint32_t *box, int swizzle128)
{
    const cuuint32_t ones[5] = {1, 1, 1, 1, 1};
    if (!encode)
        return CUDA_ERROR_NOT_SUPPORTED;
    return encode(map, bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, (cuuint32_t)rank,
                  (void *)base, dims, strides, box, ones, CU_TENSOR_MAP_INTERLEAVE_NONE,
                  swizzle128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_NONE,
                  CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}

#endif /* FA_TENSOR_MAP_H */
