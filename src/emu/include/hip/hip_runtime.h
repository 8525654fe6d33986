/*
 * hip/hip_runtime.h (emulated) - the HIP words src/hip/fa_device.h and the kernels of
 * src/common/gpu_kernels use, for the host build of the emulated AMD device (test-only,
 * issue 15): found ahead of ROCm's header by the include path, so the emulated build
 * needs no ROCm at all. Lane coordinates and barriers come from the running fiber
 * (fa_emu.h); a kernel's launch handle is a descriptor of it (fa_emu_kernel.h).
 */
#ifndef FA_EMU_HIP_RUNTIME_H
#define FA_EMU_HIP_RUNTIME_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "../../fa_emu.h"
#include "../../fa_emu_kernel.h"

/* Kernels and device functions are plain host functions. */
#define __device__
#define __host__
#define __global__
#define __forceinline__ inline __attribute__((always_inline))
/* Not checked: FA_EMU_MAX_LANES bounds every launch (research note 3.4 asks more). */
#define __launch_bounds__(...)
/* No __shared__: the kernels declare every LDS byte through the thin names
 * FA_AMD_LDS_ARRAY and FA_AMD_LDS_OBJECT, which the emulator maps to its poisoned,
 * counted and exactly sized arena (fa_emu_lds_array); LDS declared any other way does
 * not compile here, rather than escape those checks. */

#define threadIdx (fa_emu_thread_idx())
#define blockIdx (fa_emu_block_idx())
#define blockDim (fa_emu_block_dim())
#define gridDim (fa_emu_grid_dim())

static inline void __syncthreads(void) { (void)fa_emu_barrier(0, 0); }
static inline int __syncthreads_or(int predicate) { return fa_emu_barrier(1, predicate); }

/* One host thread runs every lane and every store is visible at once (research note
 * 2.4): an exchange needs no atomics and a fence does nothing. */
static inline int atomicExch(int *p, int value)
{
    const int old = *p;
    *p = value;
    return old;
}
static inline void __threadfence_system(void) {}

/* HIP's overload set (amd_math_functions.h): one type for both arguments, or int, so
 * min(long long, long long) stays 64-bit and min(int, long long) converts to int as on
 * the device. */
template <class T> static inline T min(T a, T b) { return a < b ? a : b; }
template <class T> static inline T max(T a, T b) { return a > b ? a : b; }
static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }
/* HIP compares these as unsigned too (the usual conversions), so the shim does. */
static inline int min(uint32_t a, int b) { return a < (uint32_t)b ? (int)a : b; }
static inline int max(uint32_t a, int b) { return a > (uint32_t)b ? (int)a : b; }
static inline float min(float a, float b) { return fminf(a, b); }
static inline float max(float a, float b) { return fmaxf(a, b); }

/* v_log_f32's rounding is not modelled (research note 2.4, 3.8). A macro: glibc's
 * math.h declares a __logf of its own. */
#define __logf(x) logf(x)

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

/* A kernel's launch handle (cmake/kernel_unit.in's FA_KERNEL_HANDLE_VALUE): one
 * descriptor per kernel, whose entry hands each lane its own copy of the argument struct,
 * as a launch by value does. */
template <class A> A fa_emu_kernel_arg(void (*)(A));
template <auto F> void fa_emu_kernel_entry(void *arg) { F(*static_cast<decltype(fa_emu_kernel_arg(F)) *>(arg)); }
template <auto F> const void *fa_emu_kernel_handle(const char *name)
{
    static const fa_emu_kernel kernel = {name, fa_emu_kernel_entry<F>};
    return &kernel;
}
#define FA_KERNEL_HANDLE_VALUE(symbol) fa_emu_kernel_handle<symbol>(#symbol)

#endif /* FA_EMU_HIP_RUNTIME_H */
