/*
 * ring_nccl_kernels.h - the C face of ring_nccl_kernels.cu: a 4-D strided view as plain
 * numbers (the kernel's argument) and the launch of the element-wise convert.
 */
#ifndef FA_RING_NCCL_KERNELS_H
#define FA_RING_NCCL_KERNELS_H

#include "flashattn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fa_ring_view {
    void *data;
    int dtype;               /* fa_dtype */
    long long shape[4];
    long long stride[4];     /* elements; stride[3] is 1 */
} fa_ring_view;

/* dst = src, or (add) dst += src with dst fp32, on `stream` (a cudaStream_t). Returns the
 * cudaError_t of the launch (0: cudaSuccess). */
int fa_ring_cuda_convert(fa_ring_view dst, fa_ring_view src, int add, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* FA_RING_NCCL_KERNELS_H */
