/*
 * device_common.h - the words of the device vocabulary that CUDA and HIP spell alike
 * (function qualifiers, lane and warp of a thread, the block barriers, the one-time claim
 * and system fence of the device-check record, the constants of exp2-based softmax),
 * included by each
 * vendor's fa_device.h once it has defined FA_WARP_SIZE.
 */
#ifndef FA_DEVICE_COMMON_H
#define FA_DEVICE_COMMON_H

#define FA_DEVICE __device__ __forceinline__
#define FA_GLOBAL __global__

#define FA_LOG2E 1.4426950408889634f
#define FA_LN2 0.6931471805599453f

FA_DEVICE int fa_lane(void) { return (int)(threadIdx.x & (FA_WARP_SIZE - 1)); }
FA_DEVICE int fa_warp(void) { return (int)(threadIdx.x / FA_WARP_SIZE); }
FA_DEVICE void fa_barrier(void) { __syncthreads(); }
/* A barrier that also tells every thread whether any thread's predicate was non-zero. */
FA_DEVICE int fa_barrier_any(int predicate) { return __syncthreads_or(predicate); }

/* 1 for exactly one caller of all that find *flag 0 (which it sets to 1). An exchange,
 * not a compare-and-swap: the AMD code-object check forbids CAS in every kernel (it is
 * how a float atomic add without hardware support compiles; bench/amd_resources.py). */
FA_DEVICE int fa_claim_once(int *flag) { return atomicExch(flag, 1) == 0; }
/* Orders this thread's earlier writes before its later ones for every observer,
 * the host included (mapped host memory). */
FA_DEVICE void fa_fence_system(void) { __threadfence_system(); }

#endif /* FA_DEVICE_COMMON_H */
