// hopper_primitives.h - the launchers of tests/gpu/hopper_primitives.cu (sm_90a kernels
// of the fa_hopper.h microtests) as the host-compiled test sees them. Each returns a
// cudaError_t value after synchronising the device (0: ran).
#ifndef FA_TEST_HOPPER_PRIMITIVES_H
#define FA_TEST_HOPPER_PRIMITIVES_H

#include <cuda.h>
#include <stdint.h>

// The largest TMA box the test kernel takes (its shared buffer).
constexpr int kTmaMaxBytes = 16384;

// wgmma: D (64 x N, fp32 row-major) = A (64 x 64 row-major) · B, K = 64, in one of three
// forms: kSsKmaj, A and B from shared memory, B [N n][64 k] (S = Q·Kᵀ); kRsNmaj, A from
// registers, B [64 k][N n] in 64-column blocks (O = P·V as the kernel runs it; N > 64
// exercises the leading byte offset); kSsNmaj, shared A with B [64 k][64 n] (N = 64 only).
// N: any of kWgmmaShapes (fa_wgmma_shapes.h's list).
enum FaTestWgmmaForm { kSsKmaj = 0, kRsNmaj = 1, kSsNmaj = 2 };
constexpr int kWgmmaShapes[] = {64, 80, 96, 112, 128, 144, 176, 192, 256};
constexpr int kWgmmaShapeCount = (int)(sizeof kWgmmaShapes / sizeof kWgmmaShapes[0]);

extern "C" int fa_test_wgmma(int form, int n, int bf16, const uint16_t *A, const uint16_t *B, float *D);
// Two loads of `map`'s box at element coordinates first and second (innermost first,
// `rank` of them used) into one shared buffer on one mbarrier (phases 0 and 1); out gets
// 2 * bytes: each load's buffer as it landed.
extern "C" int fa_test_tma_two_loads(const CUtensorMap *map, int rank, const int first[4], const int second[4],
                                     unsigned bytes, uint8_t *out);
// S (64 x 64 fp32 row-major) = Q·Kᵀ for Q and K [64][128] described by 2D maps (d 128
// innermost, 64 rows; box 64 x 64, 128-byte swizzle), loaded by TMA, multiplied by wgmma.
extern "C" int fa_test_tma_qk(int bf16, const CUtensorMap *q_map, const CUtensorMap *k_map, float *D);
// O = round(Q·Kᵀ)·V, all [64][64] (K, V [key][d]): S by SS wgmma, its accumulators
// repacked into A registers, O by RS wgmma. P gets the rounded S the product used.
extern "C" int fa_test_chain(int bf16, const uint16_t *Q, const uint16_t *K, const uint16_t *V, float *O,
                             uint16_t *P);
// One 64-row query tile of attention (no mask but s_k, scale_log2 = scale * log2 e) by a
// producer warpgroup (TMA into a 2-stage K/V ring on full/empty mbarriers) and a consumer
// warpgroup (wgmma, online softmax): O [64][d] fp32. Maps: 2D (d innermost, rows), box
// 64 x 64, 128-byte swizzle; d 64 or 128.
extern "C" int fa_test_pipe(int bf16, int d, const CUtensorMap *q_map, const CUtensorMap *k_map,
                            const CUtensorMap *v_map, int seqlen_k, float scale_log2, float *O);
// Warpgroup 0 shrinks to 40 registers and waits on named barrier 1; warpgroup 1 grows to
// 232, writes, arrives. out[256]: 1001 + t for t < 128, then -1.
extern "C" int fa_test_roles(int *out);

#endif
