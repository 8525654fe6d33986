/*
 * hip/hip_runtime.h (emulated) - the few HIP words src/hip's headers use, for the host
 * build of the emulated AMD device (test-only, issue 15): found ahead of ROCm's header
 * by the include path, so the emulated build needs no ROCm at all. Lane coordinates and
 * barriers come from the running fiber (fa_emu.h). More words join as the kernels are
 * compiled here (research note 3.1).
 */
#ifndef FA_EMU_HIP_RUNTIME_H
#define FA_EMU_HIP_RUNTIME_H

#include <stdint.h>
#include <string.h>

#include "../../fa_emu.h"

/* Kernels and device functions are plain host functions. */
#define __device__
#define __host__
#define __global__
#define __forceinline__ inline __attribute__((always_inline))
/* Ignored for now: the launch-bound check comes with the kernels (research note 3.4). */
#define __launch_bounds__(...)

#define threadIdx (fa_emu_thread_idx())
#define blockIdx (fa_emu_block_idx())
#define blockDim (fa_emu_block_dim())
#define gridDim (fa_emu_grid_dim())

static inline void __syncthreads(void) { (void)fa_emu_barrier(0, 0); }
static inline int __syncthreads_or(int predicate) { return fa_emu_barrier(1, predicate); }

/* One host thread runs every lane and every store is visible at once (research note
 * 2.4): a compare-and-swap needs no atomics and a fence does nothing. */
static inline int atomicCAS(int *p, int compare, int value)
{
    const int old = *p;
    if (old == compare)
        *p = value;
    return old;
}
static inline void __threadfence_system(void) {}

static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }

struct float2 {
    float x, y;
};
struct float4 {
    float x, y, z, w;
};
struct uint4 {
    unsigned x, y, z, w;
};
static inline float2 make_float2(float x, float y) { return {x, y}; }
static inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
static inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }

/* The bit casts: the same 32 bits read as the other type. */
static inline float __uint_as_float(unsigned u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
static inline unsigned __float_as_uint(float f)
{
    unsigned u;
    memcpy(&u, &f, sizeof u);
    return u;
}
static inline float __int_as_float(int i) { return __uint_as_float((unsigned)i); }
static inline int __float_as_int(float f) { return (int)__float_as_uint(f); }

#endif /* FA_EMU_HIP_RUNTIME_H */
