/*
 * fa_hd.h - FA_HD marks a function compiled for host and device alike (plain static
 * inline in C), for the rules written once for the CPU backend, the GPU kernels and the
 * CPU tests; FA_CAT pastes tokens after expanding them, for names made of generated
 * parts (kernel names, the wgmma shapes).
 */
#ifndef FA_HD_H
#define FA_HD_H

#if defined(__CUDACC__) || defined(__HIPCC__)
#define FA_HD __host__ __device__ __forceinline__
#else
#define FA_HD static inline
#endif

#define FA_CAT_(a, b) a##b
#define FA_CAT(a, b) FA_CAT_(a, b)

#endif /* FA_HD_H */
