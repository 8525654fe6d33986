/*
 * device_common.h - the words of the device vocabulary that CUDA and HIP spell alike
 * (function qualifiers, lane and warp of a thread, the block barrier), included by each
 * vendor's fa_device.h once it has defined FA_WARP_SIZE.
 */
#ifndef FA_DEVICE_COMMON_H
#define FA_DEVICE_COMMON_H

#define FA_DEVICE __device__ __forceinline__
#define FA_GLOBAL __global__
#define FA_SHARED __shared__

FA_DEVICE int fa_lane(void) { return (int)(threadIdx.x & (FA_WARP_SIZE - 1)); }
FA_DEVICE int fa_warp(void) { return (int)(threadIdx.x / FA_WARP_SIZE); }
FA_DEVICE void fa_barrier(void) { __syncthreads(); }

#endif /* FA_DEVICE_COMMON_H */
