// hopper_primitives.h - the launchers of tests/gpu/hopper_primitives.cu (sm_90a kernels
// of the fa_hopper.h microtests) as the host-compiled test sees them. Each returns a
// cudaError_t value after synchronising the device (0: ran).
#ifndef FA_TEST_HOPPER_PRIMITIVES_H
#define FA_TEST_HOPPER_PRIMITIVES_H

#include <cuda.h>
#include <stdint.h>

// The largest TMA box the test kernel takes (its shared buffer).
constexpr int kTmaMaxBytes = 16384;

// wgmma variants: D (64 x N, fp32 row-major) = A (64 x 64 row-major) · B, K = 64.
enum FaTestWgmmaVariant {
    kSsN64Kmaj = 0,  // B [64 n][64 k], A and B from shared memory: S = Q·Kᵀ
    kSsN64Nmaj = 1,  // B [64 k][64 n]: P·V with P in shared memory
    kRsN64Nmaj = 2,  // B [64 k][64 n], A from registers: P·V as the kernel runs it
    kSsN128Kmaj = 3, // B [128 n][64 k]
    kRsN128Nmaj = 4, // B [64 k][128 n]: two 64-column blocks (the leading byte offset)
};

extern "C" int fa_test_wgmma(int variant, int bf16, const uint16_t *A, const uint16_t *B, float *D);
// Two loads of `map`'s box at element coordinates first and second (innermost first,
// `rank` of them used) into one shared buffer on one mbarrier (phases 0 and 1); out gets
// 2 * bytes: each load's buffer as it landed.
extern "C" int fa_test_tma_two_loads(const CUtensorMap *map, int rank, const int first[4], const int second[4],
                                     unsigned bytes, uint8_t *out);
// S (64 x 64 fp32 row-major) = Q·Kᵀ for Q and K [64][128] described by 2D maps (d 128
// innermost, 64 rows; box 64 x 64, 128-byte swizzle), loaded by TMA, multiplied by wgmma.
extern "C" int fa_test_tma_qk(int bf16, const CUtensorMap *q_map, const CUtensorMap *k_map, float *D);
// Warpgroup 0 shrinks to 40 registers and waits on named barrier 1; warpgroup 1 grows to
// 232, writes, arrives. out[256]: 1001 + t for t < 128, then -1.
extern "C" int fa_test_roles(int *out);

#endif
