/*
 * bench_gpu.h - the GPU runtime the benchmark CLI calls, under CUDA's names: CUDA's runtime
 * when built with FA_BENCH_CUDA, HIP's (the same calls, hip-prefixed) with FA_BENCH_HIP.
 * FA_BENCH_GPU is defined in either case; FA_BENCH_BACKEND is the library backend whose
 * context computes on that memory.
 */
#ifndef FA_BENCH_GPU_H
#define FA_BENCH_GPU_H

#if defined(FA_BENCH_CUDA)
#include <cuda_runtime_api.h>
#define FA_BENCH_GPU 1
#define FA_BENCH_BACKEND FA_BACKEND_CUDA
#define FA_BENCH_RUNTIME "CUDA"
#elif defined(FA_BENCH_HIP)
#ifndef __HIP_PLATFORM_AMD__
#define __HIP_PLATFORM_AMD__
#endif
#include <hip/hip_runtime_api.h>
#define FA_BENCH_GPU 1
#define FA_BENCH_BACKEND FA_BACKEND_HIP
#define FA_BENCH_RUNTIME "HIP"
#define cudaError_t hipError_t
#define cudaEvent_t hipEvent_t
#define cudaSuccess hipSuccess
#define cudaGetErrorString hipGetErrorString
#define cudaSetDevice hipSetDevice
#define cudaMalloc hipMalloc
#define cudaFree hipFree
#define cudaMemset hipMemset
#define cudaMemcpy hipMemcpy
#define cudaMemcpyAsync hipMemcpyAsync
#define cudaMemcpyHostToDevice hipMemcpyHostToDevice
#define cudaMemcpyDeviceToHost hipMemcpyDeviceToHost
#define cudaMemcpyDeviceToDevice hipMemcpyDeviceToDevice
#define cudaEventCreate hipEventCreate
#define cudaEventDestroy hipEventDestroy
#define cudaEventRecord hipEventRecord
#define cudaEventSynchronize hipEventSynchronize
#define cudaEventElapsedTime hipEventElapsedTime
#define cudaRuntimeGetVersion hipRuntimeGetVersion
#define cudaDriverGetVersion hipDriverGetVersion
#define cudaDeviceGetAttribute hipDeviceGetAttribute
#define cudaDevAttrClockRate hipDeviceAttributeClockRate
#define cudaDevAttrMemoryClockRate hipDeviceAttributeMemoryClockRate
#define cudaDevAttrGlobalMemoryBusWidth hipDeviceAttributeMemoryBusWidth
#endif

#endif /* FA_BENCH_GPU_H */
