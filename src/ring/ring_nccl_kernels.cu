/*
 * ring_nccl_kernels.cu - the one element-wise kernel the ring needs on CUDA devices:
 * dst = src (packing K/V into a ring buffer, storing fp32 gradient sums in the output
 * dtype) or dst += src into fp32 (summing a block's gradients), over 4-D strided views.
 * Not attention: the attention itself is flashattn's fa_fwd / fa_bwd / fa_combine.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "ring/ring_nccl_kernels.h"

namespace {

__device__ float load(const char *base, int dtype, long long i)
{
    if (dtype == FA_DTYPE_F32)
        return reinterpret_cast<const float *>(base)[i];
    if (dtype == FA_DTYPE_F16)
        return __half2float(reinterpret_cast<const __half *>(base)[i]);
    return __bfloat162float(reinterpret_cast<const __nv_bfloat16 *>(base)[i]);
}

__device__ void store(char *base, int dtype, long long i, float v)
{
    if (dtype == FA_DTYPE_F32)
        reinterpret_cast<float *>(base)[i] = v;
    else if (dtype == FA_DTYPE_F16)
        reinterpret_cast<__half *>(base)[i] = __float2half_rn(v);
    else
        reinterpret_cast<__nv_bfloat16 *>(base)[i] = __float2bfloat16_rn(v);
}

__device__ long long offset_of(const fa_ring_view &v, const long long *index)
{
    return index[0] * v.stride[0] + index[1] * v.stride[1] + index[2] * v.stride[2] + index[3];
}

__global__ void convert_kernel(fa_ring_view dst, fa_ring_view src, int add, long long n)
{
    long long flat;
    for (flat = blockIdx.x * (long long)blockDim.x + threadIdx.x; flat < n;
         flat += (long long)gridDim.x * blockDim.x) {
        long long index[4], rest = flat;
        for (int d = 3; d >= 0; d--) {
            index[d] = rest % src.shape[d];
            rest /= src.shape[d];
        }
        float v = load(static_cast<const char *>(src.data), src.dtype, offset_of(src, index));
        long long at = offset_of(dst, index);
        if (add)
            v += load(static_cast<const char *>(dst.data), dst.dtype, at);
        store(static_cast<char *>(dst.data), dst.dtype, at, v);
    }
}

} // namespace

extern "C" int fa_ring_cuda_convert(fa_ring_view dst, fa_ring_view src, int add, void *stream)
{
    long long n = src.shape[0] * src.shape[1] * src.shape[2] * src.shape[3];
    long long blocks = (n + 255) / 256;
    if (n == 0)
        return 0;
    convert_kernel<<<(unsigned)(blocks < 4096 ? blocks : 4096), 256, 0, static_cast<cudaStream_t>(stream)>>>(
        dst, src, add, n);
    return (int)cudaGetLastError();
}
