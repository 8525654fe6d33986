// hopper_primitives.cu - the device side of tests/gpu/test_cuda_hopper_primitives.cpp:
// one-block kernels that each exercise a piece of src/cuda/fa_hopper.h alone (a wgmma
// tile product from swizzled shared memory, TMA tile loads completed on an mbarrier),
// with extern "C" launchers for the host-compiled test. Compiled only for sm_90a
// (tests/CMakeLists.txt), and only when 90 is among FA_CUDA_ARCHS.
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "fa_hopper.h"
#include "hopper_primitives.h"

namespace {

// Operand tiles: A 64 x 64 (one 128-byte column block), B up to 256 x 64 or 64 x 256.
constexpr int kA = 64 * 128, kB = 256 * 128;

// Dynamic shared memory, its first 1024-byte boundary: the 128-byte swizzle's pattern
// repeats every 1024 bytes and the descriptors (base offset 0) and the host's image of a
// TMA box assume a tile starts on one. Launches pass 1024 bytes of slack for it.
extern __shared__ __align__(128) uint8_t dyn_smem[];
__device__ uint8_t *smem_1024(void)
{
    const uint32_t addr = fa_hopper_smem_addr(dyn_smem);
    return dyn_smem + ((1024u - (addr & 1023u)) & 1023u);
}

// Writes a row-major rows x cols matrix of 16-bit elements into 128-byte-swizzled column
// blocks of 64 elements, each block rows * 128 bytes after the previous one: the layout
// the descriptors below (and a 128-byte-swizzled TMA box) assume.
__device__ void store_swizzled(uint8_t *tile, const uint16_t *src, int rows, int cols)
{
    for (int i = threadIdx.x; i < rows * cols; i += blockDim.x) {
        const int r = i / cols, c = i % cols;
        *(uint16_t *)(tile + (c / 64) * rows * 128 + fa_sw128_offset(r, c % 64)) = src[i];
    }
}

// The A operand of k-step ks from global memory in the register layout (per warp the
// mma.sync m16n8k16 A fragment of rows 16w .. 16w + 15).
__device__ void load_a_regs(uint32_t a[4], const uint16_t *A, int lda, int ks)
{
    const int t = fa_warpgroup_thread(), w = t / 32, g = (t & 31) / 4, q = t & 3;
    const int r0 = 16 * w + g, c0 = 16 * ks + 2 * q;
    const uint16_t *p[4] = {A + r0 * lda + c0, A + (r0 + 8) * lda + c0, A + r0 * lda + c0 + 8,
                            A + (r0 + 8) * lda + c0 + 8};
    for (int j = 0; j < 4; ++j)
        a[j] = (uint32_t)p[j][0] | ((uint32_t)p[j][1] << 16);
}

// Two floats rounded to the type, low element first (what fa_device.h's fa_pack2 does).
__device__ uint32_t fa_pack2_f16(float lo, float hi)
{
    __half2 v = __floats2half2_rn(lo, hi);
    return *(uint32_t *)&v;
}
__device__ uint32_t fa_pack2_bf16(float lo, float hi)
{
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *(uint32_t *)&v;
}

// D = A·B with K = 64 (four k-steps). A is 64 x 64 row-major; B is N x 64 ([n][k],
// variant kmaj: S = Q·Kᵀ) or 64 x N ([k][n], nmaj: O = P·V); D is 64 x N fp32 row-major.
// The accumulators start as NaN, which the first step (scale_d = 0) must not read.
#define FA_TEST_WGMMA_KERNEL(type, name, N, nmaj, rs, CALL)                                         \
    __global__ void __launch_bounds__(128) name(const uint16_t *A, const uint16_t *B, float *D)     \
    {                                                                                               \
        uint8_t *sa = smem_1024(), *sb = sa + kA;                                                   \
        if (!rs)                                                                                    \
            store_swizzled(sa, A, 64, 64);                                                          \
        store_swizzled(sb, B, nmaj ? 64 : N, nmaj ? N : 64);                                        \
        uint32_t a[4][4];                                                                           \
        if (rs)                                                                                     \
            for (int ks = 0; ks < 4; ++ks)                                                          \
                load_a_regs(a[ks], A, 64, ks);                                                      \
        fa_fence_async_smem(); /* the generic stores, before wgmma's async-proxy reads */           \
        __syncthreads();                                                                            \
        float acc[N / 2];                                                                           \
        for (int i = 0; i < N / 2; ++i)                                                             \
            acc[i] = __int_as_float(0x7fc00000);                                                    \
        const uint32_t a_addr = fa_hopper_smem_addr(sa), b_addr = fa_hopper_smem_addr(sb);          \
        fa_wg_fence();                                                                              \
        for (int ks = 0; ks < 4; ++ks) {                                                            \
            const uint64_t da = fa_wg_desc_sw128(a_addr + 32 * ks, 16, 1024);                       \
            const uint64_t db = nmaj ? fa_wg_desc_sw128(b_addr + 2048 * ks, 64 * 128, 1024)         \
                                     : fa_wg_desc_sw128(b_addr + 32 * ks, 16, 1024);                \
            (void)da;                                                                               \
            CALL;                                                                                   \
        }                                                                                           \
        fa_wg_commit();                                                                             \
        fa_wg_wait(0);                                                                              \
        fa_wg_pin(acc, N / 2);                                                                      \
        const int t = fa_warpgroup_thread();                                                        \
        for (int i = 0; i < N / 2; ++i)                                                             \
            D[fa_wg_acc_row(t, i) * N + fa_wg_acc_col(t, i)] = acc[i];                              \
    }

// Per type: B K-major (ss_kmaj, S = Q·Kᵀ) and B MN-major with A from registers
// (rs_nmaj, O = P·V) at every N of fa_wgmma_shapes.h, and B MN-major from shared A
// (ss_nmaj) at N = 64.
#define FA_TEST_WGMMA_N(type, N)                                                                      \
    FA_TEST_WGMMA_KERNEL(type, wg_ss_n##N##_kmaj_##type, N, 0, 0,                                     \
                         fa_wgmma_m64n##N##_ss_kmaj_##type(acc, da, db, ks > 0))                      \
    FA_TEST_WGMMA_KERNEL(type, wg_rs_n##N##_nmaj_##type, N, 1, 1,                                     \
                         fa_wgmma_m64n##N##_rs_nmaj_##type(acc, a[ks], db, ks > 0))
#define FA_TEST_WGMMA_KERNELS(type)                                                                   \
    FA_TEST_WGMMA_KERNEL(type, wg_ss_n64_nmaj_##type, 64, 1, 0, fa_wgmma_m64n64_ss_nmaj_##type(acc, da, db, ks > 0)) \
    FA_TEST_WGMMA_N(type, 64)                                                                         \
    FA_TEST_WGMMA_N(type, 80)                                                                         \
    FA_TEST_WGMMA_N(type, 96)                                                                         \
    FA_TEST_WGMMA_N(type, 112)                                                                        \
    FA_TEST_WGMMA_N(type, 128)                                                                        \
    FA_TEST_WGMMA_N(type, 144)                                                                        \
    FA_TEST_WGMMA_N(type, 176)                                                                        \
    FA_TEST_WGMMA_N(type, 192)                                                                        \
    FA_TEST_WGMMA_N(type, 256)

FA_TEST_WGMMA_KERNELS(f16)
FA_TEST_WGMMA_KERNELS(bf16)

typedef void (*wgmma_kernel)(const uint16_t *, const uint16_t *, float *);
// kWgmmaShapes order (hopper_primitives.h).
#define FA_TEST_WGMMA_TABLE(type, src, maj)                                                      \
    {wg_##src##_n64_##maj##_##type, wg_##src##_n80_##maj##_##type, wg_##src##_n96_##maj##_##type, \
     wg_##src##_n112_##maj##_##type, wg_##src##_n128_##maj##_##type, wg_##src##_n144_##maj##_##type, \
     wg_##src##_n176_##maj##_##type, wg_##src##_n192_##maj##_##type, wg_##src##_n256_##maj##_##type}

// Two TMA loads of one box into the same 1024-byte-aligned buffer, on one mbarrier
// (phase 0, then phase 1), each copied out whole. The buffer is filled with 0xA5 first,
// so zero fill past the tensor's edge is seen, not assumed. Coordinates are element
// coordinates, innermost first; unused ones 0.
__global__ void __launch_bounds__(128)
    tma_two_loads(const __grid_constant__ CUtensorMap map, int rank, int4 first, int4 second, unsigned bytes, uint8_t *out)
{
    uint8_t *tile = smem_1024();
    __shared__ uint64_t bar;
    for (unsigned i = threadIdx.x; i < bytes; i += blockDim.x)
        tile[i] = 0xA5;
    if (threadIdx.x == 0) {
        fa_mbar_init(&bar, 1);
        fa_mbar_init_fence();
        fa_tma_prefetch_map(&map);
    }
    fa_fence_async_smem(); /* the fill, before the async proxy's writes */
    __syncthreads();
    for (unsigned phase = 0; phase < 2; ++phase) {
        const int4 c = phase ? second : first;
        if (threadIdx.x == 0) {
            fa_mbar_arrive_expect_tx(&bar, bytes);
            if (rank == 2)
                fa_tma_load_2d(tile, &map, c.x, c.y, &bar);
            else if (rank == 3)
                fa_tma_load_3d(tile, &map, c.x, c.y, c.z, &bar);
            else
                fa_tma_load_4d(tile, &map, c.x, c.y, c.z, c.w, &bar);
        }
        fa_mbar_wait(&bar, phase);
        for (unsigned i = threadIdx.x; i < bytes; i += blockDim.x)
            out[phase * bytes + i] = tile[i];
        fa_fence_async_smem(); /* these reads, before the next load overwrites the tile */
        __syncthreads();
    }
}

// S = Q·Kᵀ the way the forward will compute it: Q (64 x 128) and K (64 keys x 128) each
// land by TMA as two 64-column boxes ([block][row][64], 128-byte swizzled) on one
// mbarrier, and the eight k-steps walk the first block in 32-byte steps, then the second
// (rows x 128 bytes on). D is 64 x 64 fp32 row-major.
#define FA_TEST_TMA_QK_KERNEL(type)                                                                   \
    __global__ void __launch_bounds__(128)                                                            \
        tma_qk_##type(const __grid_constant__ CUtensorMap q_map, const __grid_constant__ CUtensorMap k_map, \
                      float *D)                                                                       \
    {                                                                                                 \
        constexpr unsigned kBlock = 64 * 128;                                                         \
        uint8_t *sq = smem_1024(), *sk = sq + 2 * kBlock;                                             \
        __shared__ uint64_t bar;                                                                      \
        if (threadIdx.x == 0) {                                                                       \
            fa_mbar_init(&bar, 1);                                                                    \
            fa_mbar_init_fence();                                                                     \
        }                                                                                             \
        __syncthreads();                                                                              \
        if (threadIdx.x == 0) {                                                                       \
            fa_mbar_arrive_expect_tx(&bar, 4 * kBlock);                                               \
            for (int b = 0; b < 2; ++b) {                                                             \
                fa_tma_load_2d(sq + b * kBlock, &q_map, 64 * b, 0, &bar);                             \
                fa_tma_load_2d(sk + b * kBlock, &k_map, 64 * b, 0, &bar);                             \
            }                                                                                         \
        }                                                                                             \
        fa_mbar_wait(&bar, 0);                                                                        \
        float acc[32];                                                                                \
        const uint32_t q_addr = fa_hopper_smem_addr(sq), k_addr = fa_hopper_smem_addr(sk);            \
        fa_wg_fence();                                                                                \
        for (int ks = 0; ks < 8; ++ks) {                                                              \
            const uint32_t off = (ks / 4) * kBlock + 32 * (ks % 4);                                   \
            fa_wgmma_m64n64_ss_kmaj_##type(acc, fa_wg_desc_sw128(q_addr + off, 16, 1024),             \
                                           fa_wg_desc_sw128(k_addr + off, 16, 1024), ks > 0);         \
        }                                                                                             \
        fa_wg_commit();                                                                               \
        fa_wg_wait(0);                                                                                \
        fa_wg_pin(acc, 32);                                                                           \
        const int t = fa_warpgroup_thread();                                                          \
        for (int i = 0; i < 32; ++i)                                                                  \
            D[fa_wg_acc_row(t, i) * 64 + fa_wg_acc_col(t, i)] = acc[i];                               \
    }
FA_TEST_TMA_QK_KERNEL(f16)
FA_TEST_TMA_QK_KERNEL(bf16)

// The attention inner loop without the softmax: S = Q·Kᵀ (SS, B K-major), S rounded to
// the type and repacked from its accumulators into A registers exactly as attn_fwd.h does
// for mma.sync (k-step ks of P is accumulators 8 ks .. 8 ks + 7), then O = P·V (RS, V as
// stored: MN-major). Q, K, V are [64][64] row-major (K and V [key][d]); O 64 x 64 fp32 and
// P 64 x 64 (the rounded values the product used, for the host's reference) row-major.
#define FA_TEST_CHAIN_KERNEL(type)                                                                      \
    __global__ void __launch_bounds__(128)                                                              \
        chain_##type(const uint16_t *Q, const uint16_t *K, const uint16_t *V, float *O, uint16_t *P)    \
    {                                                                                                   \
        uint8_t *sq = smem_1024(), *sk = sq + kA, *sv = sk + kA;                                        \
        store_swizzled(sq, Q, 64, 64);                                                                  \
        store_swizzled(sk, K, 64, 64);                                                                  \
        store_swizzled(sv, V, 64, 64);                                                                  \
        fa_fence_async_smem();                                                                          \
        __syncthreads();                                                                                \
        const uint32_t q_addr = fa_hopper_smem_addr(sq), k_addr = fa_hopper_smem_addr(sk),              \
                       v_addr = fa_hopper_smem_addr(sv);                                                \
        float s[32], o[32];                                                                             \
        fa_wg_fence();                                                                                  \
        for (int ks = 0; ks < 4; ++ks)                                                                  \
            fa_wgmma_m64n64_ss_kmaj_##type(s, fa_wg_desc_sw128(q_addr + 32 * ks, 16, 1024),             \
                                           fa_wg_desc_sw128(k_addr + 32 * ks, 16, 1024), ks > 0);       \
        fa_wg_commit();                                                                                 \
        fa_wg_wait(0);                                                                                  \
        fa_wg_pin(s, 32);                                                                               \
        uint32_t p[4][4];                                                                               \
        for (int ks = 0; ks < 4; ++ks)                                                                  \
            for (int j = 0; j < 4; ++j)                                                                 \
                p[ks][j] = fa_pack2_##type(s[8 * ks + 2 * j], s[8 * ks + 2 * j + 1]);                   \
        fa_wg_fence(); /* the A registers were just written */                                          \
        for (int ks = 0; ks < 4; ++ks)                                                                  \
            fa_wgmma_m64n64_rs_nmaj_##type(o, p[ks], fa_wg_desc_sw128(v_addr + 2048 * ks, 64 * 128, 1024), \
                                           ks > 0);                                                     \
        fa_wg_commit();                                                                                 \
        fa_wg_wait(0);                                                                                  \
        fa_wg_pin(o, 32);                                                                               \
        const int t = fa_warpgroup_thread();                                                            \
        for (int i = 0; i < 32; i += 2) {                                                               \
            const int row = fa_wg_acc_row(t, i), col = fa_wg_acc_col(t, i);                             \
            O[row * 64 + col] = o[i];                                                                   \
            O[row * 64 + col + 1] = o[i + 1];                                                           \
            const uint32_t pair = p[i / 8][(i % 8) / 2];                                                \
            P[row * 64 + col] = (uint16_t)(pair & 0xffffu);                                             \
            P[row * 64 + col + 1] = (uint16_t)(pair >> 16);                                             \
        }                                                                                               \
    }
FA_TEST_CHAIN_KERNEL(f16)
FA_TEST_CHAIN_KERNEL(bf16)

// The warp-specialised pipeline in miniature (docs/research/issue13_hopper.md §3, §6 step
// 2): one block, warpgroup 0 the producer (setmaxnreg down, one thread issuing TMA),
// warpgroup 1 the consumer of 64 query rows (setmaxnreg up). K/V tiles of 64 keys stream
// through a 2-stage ring: a "full" mbarrier per stage (the producer's expect_tx, completed
// by TMA) and an "empty" one (128 consumer arrivals once the stage's wgmma are done), each
// waited on with its phase parity. The consumer runs S = Q·Kᵀ (SS), masks keys past s_k
// (the last tile's rows past the tensor land as zeros), an exp2-domain online softmax on
// the wgmma fragments (row max and sum over the lane quad), P into A registers, O += P·V
// (RS, V MN-major with N = D), then O / rowsum as fp32 [64][D]. Q [64][D], K and V
// [s_k][D] row-major, described by 2D maps with 64 x 64 boxes (D / 64 per tile).
#define FA_TEST_PIPE_KERNEL(type, D)                                                                    \
    __global__ void __launch_bounds__(256, 1)                                                           \
        pipe_d##D##_##type(const __grid_constant__ CUtensorMap q_map, const __grid_constant__ CUtensorMap k_map, \
                           const __grid_constant__ CUtensorMap v_map, int seqlen_k, float scale_log2, float *O) \
    {                                                                                                   \
        constexpr unsigned kBox = 64 * 128, kTile = (D / 64) * kBox; /* one 64 x D tile */              \
        uint8_t *sq = smem_1024(), *sk = sq + kTile, *sv = sk + 2 * kTile;                              \
        __shared__ uint64_t q_full, full[2], empty[2];                                                  \
        const int n_tiles = (seqlen_k + 63) / 64;                                                       \
        if (threadIdx.x == 0) {                                                                         \
            fa_mbar_init(&q_full, 1);                                                                   \
            for (int i = 0; i < 2; ++i) {                                                               \
                fa_mbar_init(&full[i], 1);                                                              \
                fa_mbar_init(&empty[i], FA_WARPGROUP_THREADS);                                          \
            }                                                                                           \
            fa_mbar_init_fence();                                                                       \
        }                                                                                               \
        __syncthreads();                                                                                \
        if (fa_warpgroup() == 0) {                                                                      \
            fa_regs_shrink(40);                                                                         \
            if (threadIdx.x != 0)                                                                       \
                return;                                                                                 \
            fa_mbar_arrive_expect_tx(&q_full, kTile);                                                   \
            for (int b = 0; b < D / 64; ++b)                                                            \
                fa_tma_load_2d(sq + b * kBox, &q_map, 64 * b, 0, &q_full);                              \
            for (int t = 0; t < n_tiles; ++t) {                                                         \
                const int st = t & 1;                                                                   \
                if (t >= 2)                                                                             \
                    fa_mbar_wait(&empty[st], ((t >> 1) - 1) & 1);                                       \
                fa_mbar_arrive_expect_tx(&full[st], 2 * kTile);                                         \
                for (int b = 0; b < D / 64; ++b) {                                                      \
                    fa_tma_load_2d(sk + st * kTile + b * kBox, &k_map, 64 * b, 64 * t, &full[st]);      \
                    fa_tma_load_2d(sv + st * kTile + b * kBox, &v_map, 64 * b, 64 * t, &full[st]);      \
                }                                                                                       \
            }                                                                                           \
            return;                                                                                     \
        }                                                                                               \
        fa_regs_grow(232);                                                                              \
        const int t = fa_warpgroup_thread();                                                            \
        float acc_o[D / 2], row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.f, 0.f};               \
        for (int i = 0; i < D / 2; ++i)                                                                 \
            acc_o[i] = 0.f;                                                                             \
        const uint32_t q_addr = fa_hopper_smem_addr(sq);                                                \
        fa_mbar_wait(&q_full, 0);                                                                       \
        for (int tile = 0; tile < n_tiles; ++tile) {                                                    \
            const int st = tile & 1;                                                                    \
            const uint32_t k_addr = fa_hopper_smem_addr(sk + st * kTile);                               \
            const uint32_t v_addr = fa_hopper_smem_addr(sv + st * kTile);                               \
            fa_mbar_wait(&full[st], (tile >> 1) & 1);                                                   \
            float s[32];                                                                                \
            fa_wg_fence();                                                                              \
            for (int ks = 0; ks < D / 16; ++ks) {                                                       \
                const uint32_t off = (ks / 4) * kBox + 32 * (ks % 4);                                   \
                fa_wgmma_m64n64_ss_kmaj_##type(s, fa_wg_desc_sw128(q_addr + off, 16, 1024),             \
                                               fa_wg_desc_sw128(k_addr + off, 16, 1024), ks > 0);       \
            }                                                                                           \
            fa_wg_commit();                                                                             \
            fa_wg_wait(0);                                                                              \
            fa_wg_pin(s, 32);                                                                           \
            float tile_max[2] = {-INFINITY, -INFINITY};                                                 \
            for (int i = 0; i < 32; ++i) {                                                              \
                const int key = 64 * tile + fa_wg_acc_col(t, i);                                        \
                s[i] = key < seqlen_k ? s[i] * scale_log2 : -INFINITY;                                  \
                tile_max[(i >> 1) & 1] = fmaxf(tile_max[(i >> 1) & 1], s[i]);                           \
            }                                                                                           \
            float factor[2];                                                                            \
            for (int r = 0; r < 2; ++r) {                                                               \
                float m = tile_max[r];                                                                  \
                m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));                                       \
                m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));                                       \
                const float new_max = fmaxf(row_max[r], m); /* every tile has a visible key */          \
                factor[r] = exp2f(row_max[r] - new_max);                                                \
                row_max[r] = new_max;                                                                   \
                row_sum[r] *= factor[r];                                                                \
            }                                                                                           \
            for (int i = 0; i < 32; ++i) {                                                              \
                s[i] = exp2f(s[i] - row_max[(i >> 1) & 1]);                                             \
                row_sum[(i >> 1) & 1] += s[i];                                                          \
            }                                                                                           \
            for (int i = 0; i < D / 2; ++i)                                                             \
                acc_o[i] *= factor[(i >> 1) & 1];                                                       \
            uint32_t p[4][4];                                                                           \
            for (int ks = 0; ks < 4; ++ks)                                                              \
                for (int j = 0; j < 4; ++j)                                                             \
                    p[ks][j] = fa_pack2_##type(s[8 * ks + 2 * j], s[8 * ks + 2 * j + 1]);               \
            fa_wg_fence(); /* acc_o was rescaled and P written since the last wgmma */                  \
            for (int ks = 0; ks < 4; ++ks)                                                              \
                fa_wgmma_m64n##D##_rs_nmaj_##type(acc_o, p[ks],                                         \
                                                  fa_wg_desc_sw128(v_addr + 2048 * ks, 64 * 128, 1024), 1); \
            fa_wg_commit();                                                                             \
            fa_wg_wait(0);                                                                              \
            fa_wg_pin(acc_o, D / 2);                                                                    \
            fa_mbar_arrive(&empty[st]);                                                                 \
        }                                                                                               \
        for (int r = 0; r < 2; ++r) {                                                                   \
            row_sum[r] += __shfl_xor_sync(0xffffffffu, row_sum[r], 1);                                  \
            row_sum[r] += __shfl_xor_sync(0xffffffffu, row_sum[r], 2);                                  \
        }                                                                                               \
        for (int i = 0; i < D / 2; ++i)                                                                 \
            O[fa_wg_acc_row(t, i) * D + fa_wg_acc_col(t, i)] = acc_o[i] / row_sum[(i >> 1) & 1];         \
    }
FA_TEST_PIPE_KERNEL(f16, 64)
FA_TEST_PIPE_KERNEL(bf16, 64)
FA_TEST_PIPE_KERNEL(f16, 128)
FA_TEST_PIPE_KERNEL(bf16, 128)

// setmaxnreg and named barriers in the warp-specialised shape: warpgroup 0 gives
// registers back and waits on barrier 1 until warpgroup 1 (more registers) has written;
// each thread writes its value once. A hang or a wrong order is the failure. The
// minimum of one block per SM lets ptxas fix the register count at entry, without which
// it drops setmaxnreg (ptxas info C7508).
__global__ void __launch_bounds__(256, 1) roles(int *out)
{
    __shared__ int handoff[128];
    if (fa_warpgroup() == 0) {
        fa_regs_shrink(40);
        fa_named_sync(1, 256);
        out[threadIdx.x] = handoff[fa_warpgroup_thread()] + 1;
    } else {
        fa_regs_grow(232);
        handoff[fa_warpgroup_thread()] = 1000 + fa_warpgroup_thread();
        out[threadIdx.x] = -1;
        fa_named_arrive(1, 256);
    }
}

} // namespace

extern "C" int fa_test_wgmma(int form, int n, int bf16, const uint16_t *A, const uint16_t *B, float *D)
{
    static const wgmma_kernel kmaj[2][kWgmmaShapeCount] = {FA_TEST_WGMMA_TABLE(f16, ss, kmaj),
                                                           FA_TEST_WGMMA_TABLE(bf16, ss, kmaj)};
    static const wgmma_kernel nmaj[2][kWgmmaShapeCount] = {FA_TEST_WGMMA_TABLE(f16, rs, nmaj),
                                                           FA_TEST_WGMMA_TABLE(bf16, rs, nmaj)};
    int shape = -1;
    for (int i = 0; i < kWgmmaShapeCount; ++i)
        if (kWgmmaShapes[i] == n)
            shape = i;
    wgmma_kernel kernel = nullptr;
    if (shape >= 0 && form == kSsKmaj)
        kernel = kmaj[bf16 ? 1 : 0][shape];
    else if (shape >= 0 && form == kRsNmaj)
        kernel = nmaj[bf16 ? 1 : 0][shape];
    else if (n == 64 && form == kSsNmaj)
        kernel = bf16 ? wg_ss_n64_nmaj_bf16 : wg_ss_n64_nmaj_f16;
    if (!kernel)
        return (int)cudaErrorInvalidValue;
    kernel<<<1, 128, kA + kB + 1024>>>(A, B, D);
    cudaError_t err = cudaGetLastError();
    return (int)(err != cudaSuccess ? err : cudaDeviceSynchronize());
}

extern "C" int fa_test_tma_two_loads(const CUtensorMap *map, int rank, const int first[4], const int second[4],
                                     unsigned bytes, uint8_t *out)
{
    if (bytes > (unsigned)kTmaMaxBytes)
        return (int)cudaErrorInvalidValue;
    tma_two_loads<<<1, 128, kTmaMaxBytes + 1024>>>(*map, rank, make_int4(first[0], first[1], first[2], first[3]),
                              make_int4(second[0], second[1], second[2], second[3]), bytes, out);
    cudaError_t err = cudaGetLastError();
    return (int)(err != cudaSuccess ? err : cudaDeviceSynchronize());
}

extern "C" int fa_test_tma_qk(int bf16, const CUtensorMap *q_map, const CUtensorMap *k_map, float *D)
{
    const int bytes = 4 * 64 * 128 + 1024;
    if (bf16)
        tma_qk_bf16<<<1, 128, bytes>>>(*q_map, *k_map, D);
    else
        tma_qk_f16<<<1, 128, bytes>>>(*q_map, *k_map, D);
    cudaError_t err = cudaGetLastError();
    return (int)(err != cudaSuccess ? err : cudaDeviceSynchronize());
}

extern "C" int fa_test_chain(int bf16, const uint16_t *Q, const uint16_t *K, const uint16_t *V, float *O, uint16_t *P)
{
    if (bf16)
        chain_bf16<<<1, 128, 3 * kA + 1024>>>(Q, K, V, O, P);
    else
        chain_f16<<<1, 128, 3 * kA + 1024>>>(Q, K, V, O, P);
    cudaError_t err = cudaGetLastError();
    return (int)(err != cudaSuccess ? err : cudaDeviceSynchronize());
}

extern "C" int fa_test_pipe(int bf16, int d, const CUtensorMap *q_map, const CUtensorMap *k_map,
                            const CUtensorMap *v_map, int seqlen_k, float scale_log2, float *O)
{
    typedef void (*pipe_kernel)(CUtensorMap, CUtensorMap, CUtensorMap, int, float, float *);
    pipe_kernel kernel = d == 64 ? (bf16 ? pipe_d64_bf16 : pipe_d64_f16)
                       : d == 128 ? (bf16 ? pipe_d128_bf16 : pipe_d128_f16)
                                  : nullptr;
    if (!kernel || seqlen_k < 1)
        return (int)cudaErrorInvalidValue;
    const int bytes = 5 * (d / 64) * 64 * 128 + 1024; /* Q, two K and two V tiles */
    cudaError_t err = cudaFuncSetAttribute((const void *)kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
    if (err != cudaSuccess)
        return (int)err;
    kernel<<<1, 256, bytes>>>(*q_map, *k_map, *v_map, seqlen_k, scale_log2, O);
    err = cudaGetLastError();
    return (int)(err != cudaSuccess ? err : cudaDeviceSynchronize());
}

extern "C" int fa_test_roles(int *out)
{
    roles<<<1, 256>>>(out);
    cudaError_t err = cudaGetLastError();
    return (int)(err != cudaSuccess ? err : cudaDeviceSynchronize());
}
