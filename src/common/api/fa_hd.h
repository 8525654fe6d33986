/*
 * fa_hd.h - FA_HD marks a function compiled for host and device alike (plain static
 * inline in C), for the rules written once for the CPU backend, the GPU kernels and the
 * CPU tests.
 */
#ifndef FA_HD_H
#define FA_HD_H

#if defined(__CUDACC__) || defined(__HIPCC__)
#define FA_HD __host__ __device__ __forceinline__
#else
#define FA_HD static inline
#endif

#endif /* FA_HD_H */
