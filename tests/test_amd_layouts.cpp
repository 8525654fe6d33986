// test_amd_layouts.cpp - the AMD fragment maps of src/hip/fa_amd_layouts.h, which the HIP
// kernels compute their register contents from, exercised on the CPU: a 16x16x16 tile
// product is emulated lane by lane through an instruction model written here from the
// ISA documents (not from the header), with operands loaded and results read back through
// the header's maps, and compared with a plain matmul; then the P -> A conversion of P·V.
// Every primitive, fp16 and bf16; and the backward's score tiles through shared memory.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "../src/hip/fa_amd_layouts.h"
#include "api/dtype.h"
#include "gpu_kernels/smem_bytes.h"
#include "gpu_kernels/tile_layout.h"

namespace {

const int kPrims[] = {FA_AMD_MFMA16, FA_AMD_WMMA_GFX11, FA_AMD_WMMA_GFX12};

// The instructions' own operand layouts. X is the first source (16 x k), Y the second
// (k x 16), D = X·Y + C. Sources: AMD Matrix Instruction Calculator and CDNA3 ISA 7.1 for
// v_mfma_f32_16x16x16f16 / bf16_1k (lane l: X[l%16][4(l/16)+i], Y[4(l/16)+i][l%16],
// D reg r: D[4(l/16)+r][l%16]); RDNA3 ISA 7.9 for v_wmma_*_w32 (every lane holds all 16 k
// of row / column l%16, D reg r: D[2r + l/16][l%16]); RDNA4 ISA 7.9 (lanes 16-31 hold
// k = 8..15, D reg r: D[8(l/16)+r][l%16]).
struct Hw {
    int prim;
    int k_of(int lane, int i) const
    {
        if (prim == FA_AMD_MFMA16) return 4 * (lane / 16) + i;
        if (prim == FA_AMD_WMMA_GFX11) return i;
        return 8 * (lane / 16) + i;
    }
    int d_row(int lane, int r) const
    {
        if (prim == FA_AMD_MFMA16) return 4 * (lane / 16) + r;
        if (prim == FA_AMD_WMMA_GFX11) return 2 * r + lane / 16;
        return 8 * (lane / 16) + r;
    }
    int elems() const { return prim == FA_AMD_MFMA16 ? 4 : prim == FA_AMD_WMMA_GFX11 ? 16 : 8; }
    int regs() const { return prim == FA_AMD_MFMA16 ? 4 : 8; }
    int wave() const { return prim == FA_AMD_MFMA16 ? 64 : 32; }

    // One instruction: src1/src2 [lane][elem] (16-bit values as floats), acc [lane][reg].
    void run(const std::vector<std::vector<float>> &src1, const std::vector<std::vector<float>> &src2,
             std::vector<std::vector<float>> &acc) const
    {
        float x[16][16] = {}, y[16][16] = {};
        for (int l = 0; l < wave(); l++)
            for (int i = 0; i < elems(); i++) {
                x[l % 16][k_of(l, i)] = src1[l][i];
                y[k_of(l, i)][l % 16] = src2[l][i];
            }
        for (int l = 0; l < wave(); l++)
            for (int r = 0; r < regs(); r++) {
                int row = d_row(l, r), col = l % 16;
                double sum = acc[l][r];
                for (int k = 0; k < 16; k++) sum += (double)x[row][k] * y[k][col];
                acc[l][r] = (float)sum;
            }
    }
};

// A value rounded to the dtype, as the kernels store it.
float round_to(float v, bool bf16)
{
    return bf16 ? fa_bf16_to_f32(fa_f32_to_bf16(v)) : fa_f16_to_f32(fa_f32_to_f16(v));
}

// n values in [-1, 1] in steps of 1/8, exact in both dtypes.
std::vector<float> random_values(size_t n, uint32_t seed, bool bf16)
{
    std::vector<float> t(n);
    for (float &v : t) {
        seed = seed * 1664525u + 1013904223u;
        v = round_to((float)((int)(seed >> 20) % 17 - 8) / 8.f, bf16);
    }
    return t;
}

std::vector<float> random_tile(uint32_t seed, bool bf16) { return random_values(256, seed, bf16); }

// acc = A·B for row-major 16x16 tiles, the operands loaded through the kernel's maps
// (fa_load_a: A[row][k]; fa_load_bt_pair / fa_load_b_pair: B[k][col]) and issued swapped
// like fa_mma: src1 = b, src2 = a.
std::vector<std::vector<float>> product_through_maps(const Hw &hw, const std::vector<float> &a,
                                                     const std::vector<float> &b)
{
    std::vector<std::vector<float>> fa(hw.wave(), std::vector<float>(hw.elems()));
    std::vector<std::vector<float>> fb = fa;
    for (int l = 0; l < hw.wave(); l++)
        for (int i = 0; i < hw.elems(); i++) {
            fa[l][i] = a[fa_amd_a_row(l) * 16 + fa_amd_frag_k(hw.prim, l, i)];
            fb[l][i] = b[fa_amd_frag_k(hw.prim, l, i) * 16 + fa_amd_b_col(l)];
        }
    std::vector<std::vector<float>> acc(hw.wave(), std::vector<float>(hw.regs(), 0.f));
    hw.run(fb, fa, acc);
    return acc;
}

} // namespace

TEST_CASE("AMD layouts: compile-time facts agree with the maps", "[amd][layout]")
{
    for (int prim : kPrims) {
        Hw hw{prim};
        INFO("primitive " << prim);
        CHECK(fa_amd_wave_size(prim) == hw.wave());
        CHECK(fa_amd_frag_elems(prim) == hw.elems());
        CHECK(fa_amd_acc_regs(prim) == hw.regs());
        for (int l = 0; l < hw.wave(); l++) {
            // Fragments are read as consecutive k from one row (fa_device.h's LDS reads),
            // in 16-byte-chunk pieces that never straddle a chunk.
            for (int i = 0; i < hw.elems(); i++)
                CHECK(fa_amd_frag_k(prim, l, i) == fa_amd_frag_k(prim, l, 0) + i);
            int piece = hw.elems() < 8 ? hw.elems() : 8;
            CHECK(fa_amd_frag_k(prim, l, 0) % piece == 0);
            // One row per lane; pairs (r, r + 1) lie in one group of 8 columns at the
            // pair stride (fa_store_pair, the head_dim % 8 guard in attn_fwd.h).
            for (int r = 0; r + 1 < hw.regs(); r += 2) {
                int c0 = fa_amd_acc_col(prim, l, r), c1 = fa_amd_acc_col(prim, l, r + 1);
                CHECK(c1 - c0 == fa_amd_acc_pair_stride(prim));
                CHECK(c0 / 8 == c1 / 8);
            }
            // The row's lanes are l ^ 16 (and l ^ 32, l ^ 48 on wave64): fa_row_max/sum.
            CHECK(fa_amd_acc_row(l) == fa_amd_acc_row(l ^ 16));
            if (hw.wave() == 64) CHECK(fa_amd_acc_row(l) == fa_amd_acc_row(l ^ 32));
            // P sources: this lane or lane ^ 16 only (fa_acc_tile_to_a's one exchange).
            for (int i = 0; i < hw.elems(); i++) {
                int src = fa_amd_p_src_lane(prim, l, i);
                CHECK((src == l || src == (l ^ 16)));
            }
        }
        // Every (row, col) of the accumulator tile has exactly one owner of each lane row
        // group: the lanes of a row together hold all 16 columns once.
        for (int row = 0; row < 16; row++) {
            int seen[16] = {};
            for (int l = 0; l < hw.wave(); l++)
                for (int r = 0; r < hw.regs(); r++)
                    if (fa_amd_acc_row(l) == row) seen[fa_amd_acc_col(prim, l, r)]++;
            for (int c = 0; c < 16; c++) CHECK(seen[c] == hw.wave() / 16 * hw.regs() / 16);
        }
    }
}

TEST_CASE("AMD layouts: emulated tile products match a plain matmul", "[amd][layout]")
{
    for (int prim : kPrims)
        for (bool bf16 : {false, true}) {
            Hw hw{prim};
            INFO("primitive " << prim << (bf16 ? " bf16" : " fp16"));
            std::vector<float> a = random_tile(1u + prim, bf16), b = random_tile(77u + prim, bf16);
            std::vector<float> v = random_tile(123u + prim, bf16);
            // S = A·B through the kernel's operand maps.
            std::vector<std::vector<float>> acc = product_through_maps(hw, a, b);
            std::vector<float> s(256, 0.f);
            for (int row = 0; row < 16; row++)
                for (int col = 0; col < 16; col++)
                    for (int k = 0; k < 16; k++) s[row * 16 + col] += a[row * 16 + k] * b[k * 16 + col];
            for (int l = 0; l < hw.wave(); l++)
                for (int r = 0; r < hw.regs(); r++)
                    REQUIRE(acc[l][r] == Approx(s[fa_amd_acc_row(l) * 16 + fa_amd_acc_col(prim, l, r)]));

            // O = P·V with P = the accumulators above rounded to the dtype, turned into A
            // fragments by the P maps (fa_acc_tile_to_a), V read as B (fa_load_b_pair).
            std::vector<std::vector<float>> fp(hw.wave(), std::vector<float>(hw.elems()));
            std::vector<std::vector<float>> fv = fp;
            for (int l = 0; l < hw.wave(); l++)
                for (int i = 0; i < hw.elems(); i++) {
                    fp[l][i] = round_to(acc[fa_amd_p_src_lane(prim, l, i)][fa_amd_p_src_reg(prim, i)], bf16);
                    fv[l][i] = v[fa_amd_frag_k(prim, l, i) * 16 + fa_amd_b_col(l)];
                }
            std::vector<std::vector<float>> out(hw.wave(), std::vector<float>(hw.regs(), 0.f));
            hw.run(fv, fp, out);
            for (int l = 0; l < hw.wave(); l++)
                for (int r = 0; r < hw.regs(); r++) {
                    int row = fa_amd_acc_row(l), col = fa_amd_acc_col(prim, l, r);
                    double want = 0;
                    for (int k = 0; k < 16; k++)
                        want += (double)round_to(s[row * 16 + k], bf16) * v[k * 16 + col];
                    REQUIRE(out[l][r] == Approx(want));
                }
        }
}

// The backward's shared-memory routes (attn_bwd.h): a score tile stored through the
// accumulator maps (fa_bwd_store_scores) and read back as an A operand (fa_load_a, for
// dV = Pᵀ·dO), and read transposed (fa_load_at, A = tileᵀ, for dQ = dS·K).
TEST_CASE("AMD layouts: backward score tiles through shared memory, plain and transposed",
          "[amd][layout]")
{
    for (int prim : kPrims)
        for (bool bf16 : {false, true}) {
            Hw hw{prim};
            INFO("primitive " << prim << (bf16 ? " bf16" : " fp16"));
            std::vector<float> a = random_tile(5u + prim, bf16), b = random_tile(55u + prim, bf16);
            std::vector<float> k = random_tile(555u + prim, bf16);
            std::vector<std::vector<float>> acc = product_through_maps(hw, a, b);

            // Store: every lane writes its registers at (acc_row, acc_col), rounded.
            std::vector<float> tile(256, -99.f);
            for (int l = 0; l < hw.wave(); l++)
                for (int r = 0; r < hw.regs(); r++)
                    tile[fa_amd_acc_row(l) * 16 + fa_amd_acc_col(prim, l, r)] = round_to(acc[l][r], bf16);
            for (float t : tile) REQUIRE(t != -99.f); // every element written

            // Plain read (A = tile, fa_load_a) and transposed read (A = tileᵀ: fa_load_at
            // gathers A[row][k] = tile[k][row]), each times K as B.
            for (bool transposed : {false, true}) {
                INFO((transposed ? "transposed" : "plain"));
                std::vector<float> op(256);
                for (int row = 0; row < 16; row++)
                    for (int kk = 0; kk < 16; kk++)
                        op[row * 16 + kk] = transposed ? tile[kk * 16 + row] : tile[row * 16 + kk];
                std::vector<std::vector<float>> out = product_through_maps(hw, op, k);
                for (int l = 0; l < hw.wave(); l++)
                    for (int r = 0; r < hw.regs(); r++) {
                        int row = fa_amd_acc_row(l), col = fa_amd_acc_col(prim, l, r);
                        double want = 0;
                        for (int kk = 0; kk < 16; kk++)
                            want += (double)op[row * 16 + kk] * k[kk * 16 + col];
                        REQUIRE(out[l][r] == Approx(want));
                    }
            }
        }
}

namespace {

// v_mfma_f32_32x32x8f16 / bf16_1k's own layouts (AMD Matrix Instruction Calculator, CDNA3
// ISA 7.1): X (first source) 32 x 8, lane l: X[l%32][4(l/32)+i]; Y (second) 8 x 32:
// Y[4(l/32)+i][l%32]; D reg r: D[8(r/4) + 4(l/32) + r%4][l%32]. Written here from the
// documents, not from the header. Returns D = X·Y + acc, fragments as [lane][elem].
void mfma32_run(const std::vector<std::vector<float>> &src1, const std::vector<std::vector<float>> &src2,
                std::vector<std::vector<float>> &acc)
{
    float x[32][8] = {}, y[8][32] = {};
    for (int l = 0; l < 64; l++)
        for (int i = 0; i < 4; i++) {
            x[l % 32][4 * (l / 32) + i] = src1[l][i];
            y[4 * (l / 32) + i][l % 32] = src2[l][i];
        }
    for (int l = 0; l < 64; l++)
        for (int r = 0; r < 16; r++) {
            int row = 8 * (r / 4) + 4 * (l / 32) + r % 4, col = l % 32;
            double sum = acc[l][r];
            for (int k = 0; k < 8; k++) sum += (double)x[row][k] * y[k][col];
            acc[l][r] = (float)sum;
        }
}

} // namespace

// The Q-in-registers forward on 32 x 32 x 8 (src/hip/fa_device.h FA_AMD_SHAPE): C = A·B
// issued as Cᵀ = Bᵀ·Aᵀ with A's fragment at (fa_amd_mfma32_row, fa_amd_frag_k), B's at
// (fa_amd_frag_k, fa_amd_mfma32_row), C read at (fa_amd_mfma32_row, fa_amd_acc_col); and
// P·V with P's A operands taken from the accumulators of S in place (k-step s: registers
// 4 (s % 4) .. + 3 of tile s / 4, fa_device.h fa_acc_regs_to_a), over a 32 x 64 by 64 x 32
// product, against a plain matmul.
TEST_CASE("AMD layouts: 32x32x8 products through the maps, P in place as P·V's operand", "[amd][layout]")
{
    const int prim = FA_AMD_MFMA32;
    CHECK(fa_amd_wave_size(prim) == 64);
    CHECK(fa_amd_frag_elems(prim) == 4);
    CHECK(fa_amd_acc_regs(prim) == 16);
    for (int l = 0; l < 64; l++) {
        CHECK(fa_amd_mfma32_row(l) == fa_amd_mfma32_row(l ^ 32)); // one exchange per row
        for (int r = 0; r < 16; r += 2) // registers r, r + 1: adjacent columns (fa_store_pair)
            CHECK(fa_amd_acc_col(prim, l, r + 1) == fa_amd_acc_col(prim, l, r) + fa_amd_acc_pair_stride(prim));
    }
    for (bool bf16 : {false, true}) {
        INFO((bf16 ? "bf16" : "f16"));
        // S = Q·Kᵀ: Q 32 x 8, K 64 x 8 (two 32-key n-tiles), one k-step.
        const std::vector<float> q = random_values(32 * 8, 11, bf16), k = random_values(64 * 8, 12, bf16);
        const std::vector<float> v = random_values(64 * 32, 13, bf16);
        std::vector<std::vector<std::vector<float>>> s_acc(2, std::vector<std::vector<float>>(64, std::vector<float>(16, 0.f)));
        for (int nf = 0; nf < 2; nf++) {
            std::vector<std::vector<float>> fq(64, std::vector<float>(4)), fk = fq;
            for (int l = 0; l < 64; l++)
                for (int i = 0; i < 4; i++) {
                    fq[l][i] = q[fa_amd_mfma32_row(l) * 8 + fa_amd_frag_k(prim, l, i)];
                    fk[l][i] = k[(nf * 32 + fa_amd_mfma32_row(l)) * 8 + fa_amd_frag_k(prim, l, i)];
                }
            mfma32_run(fk, fq, s_acc[nf]);
        }
        std::vector<double> s(32 * 64, 0.0);
        for (int i = 0; i < 32; i++)
            for (int j = 0; j < 64; j++) {
                for (int d = 0; d < 8; d++) s[i * 64 + j] += (double)q[i * 8 + d] * k[j * 8 + d];
                s[i * 64 + j] = round_to((float)s[i * 64 + j], bf16); // P as the kernel packs it
            }
        for (int nf = 0; nf < 2; nf++)
            for (int l = 0; l < 64; l++)
                for (int r = 0; r < 16; r++) {
                    const int row = fa_amd_mfma32_row(l), col = nf * 32 + fa_amd_acc_col(prim, l, r);
                    REQUIRE(round_to(s_acc[nf][l][r], bf16) == (float)s[row * 64 + col]);
                    s_acc[nf][l][r] = round_to(s_acc[nf][l][r], bf16);
                }
        // O = P·V over 8 k-steps of 8 keys; V's B fragment at (fa_amd_frag_k, row).
        std::vector<std::vector<float>> o_acc(64, std::vector<float>(16, 0.f));
        for (int ks = 0; ks < 8; ks++) {
            std::vector<std::vector<float>> fp(64, std::vector<float>(4)), fv = fp;
            for (int l = 0; l < 64; l++)
                for (int i = 0; i < 4; i++) {
                    fp[l][i] = s_acc[ks / 4][l][4 * (ks % 4) + i];
                    fv[l][i] = v[(ks * 8 + fa_amd_frag_k(prim, l, i)) * 32 + fa_amd_mfma32_row(l)];
                }
            mfma32_run(fv, fp, o_acc);
        }
        for (int l = 0; l < 64; l++)
            for (int r = 0; r < 16; r++) {
                const int row = fa_amd_mfma32_row(l), col = fa_amd_acc_col(prim, l, r);
                double want = 0.0;
                for (int j = 0; j < 64; j++) want += s[row * 64 + j] * v[j * 32 + col];
                REQUIRE(o_acc[l][r] == Approx(want).epsilon(1e-6).margin(1e-6));
            }
    }
}

// The Q-in-registers forward's Vᵀ tile (tile_layout.h's fa_vt_offset, FA_VT_PITCH): each
// row a permutation of its keys that keeps 4-key groups whole (a B fragment's one 8-byte
// read), and the LDS banks its accesses meet. Bank model (CDNA3: 32 banks of 4 bytes,
// 128 bytes per clock, AMD_NOTES.md): a 2-byte store serves 32 lanes per pass, an 8-byte
// read 16; a pass takes as many cycles as the most distinct dwords one bank holds. The
// stores follow attn_tile.h's copy map (thread t: key t / (d / 8), head-dim chunk
// t % (d / 8); one store per element e of the chunk, row 8 * chunk + e); the reads the
// 32x32x8 B operand (lane l: row l % 32 of the n-tile, keys 4 (l / 32) .. + 3).
namespace {

struct BankLoad {
    int store_passes_max = 0; // distinct dwords in one bank, worst store pass
    int read_passes_max = 0;  // the same for the fragment reads
};

int worst_bank(const std::vector<int> &dwords)
{
    std::vector<std::vector<int>> bank(32);
    for (int w : dwords) {
        auto &b = bank[w % 32];
        if (std::find(b.begin(), b.end(), w) == b.end()) b.push_back(w);
    }
    size_t most = 0;
    for (auto &b : bank) most = std::max(most, b.size());
    return (int)most;
}

template <typename Offset> BankLoad vt_banks(int d, int keys, Offset offset)
{
    BankLoad load;
    const int chunks = d / 8;
    for (int t0 = 0; t0 < keys * chunks; t0 += 32)
        for (int e = 0; e < 8; ++e) {
            std::vector<int> dwords;
            for (int t = t0; t < t0 + 32; ++t)
                dwords.push_back(offset(8 * (t % chunks) + e, t / chunks) / 2);
            load.store_passes_max = std::max(load.store_passes_max, worst_bank(dwords));
        }
    for (int n0 = 0; n0 < d; n0 += 32)
        for (int k0 = 0; k0 < keys; k0 += 8)
            for (int l0 = 0; l0 < 64; l0 += 16) {
                std::vector<int> dwords;
                for (int l = l0; l < l0 + 16; ++l) {
                    const int at = offset(n0 + l % 32, k0 + 4 * (l / 32));
                    dwords.push_back(at / 2);
                    dwords.push_back(at / 2 + 1);
                }
                load.read_passes_max = std::max(load.read_passes_max, worst_bank(dwords));
            }
    return load;
}

} // namespace

TEST_CASE("AMD layouts: the Vᵀ tile keeps 4-key groups whole and spreads its stores over the banks",
          "[amd][layout]")
{
    for (int d : {64, 128})
        for (int keys : {32, 64}) {
            INFO("d " << d << ", " << keys << " keys");
            const int pitch = FA_VT_PITCH(keys);
            for (int row = 0; row < d; ++row) {
                std::vector<int> seen(pitch, 0);
                for (int key = 0; key < keys; ++key) {
                    const int at = fa_vt_offset(pitch, row, key);
                    REQUIRE(at >= row * pitch);
                    REQUIRE(at < row * pitch + keys);
                    REQUIRE(++seen[at - row * pitch] == 1);
                    if (key % 4) REQUIRE(at == fa_vt_offset(pitch, row, key - 1) + 1);
                    else REQUIRE(at % 4 == 0); // an 8-byte aligned read
                }
            }
            const BankLoad swizzled =
                vt_banks(d, keys, [&](int row, int key) { return fa_vt_offset(pitch, row, key); });
            // A store pass is 32 lanes: d64's 4 keys x 8 chunks meet no bank twice; d128's
            // 2 keys x 16 chunks put chunks c and c + 8 in one bank whatever the layout (32
            // keys hold 8 groups). Two lanes' halves of one dword count once.
            CHECK(swizzled.store_passes_max == (d == 128 ? 2 : 1));
            CHECK(swizzled.read_passes_max == 1);
            // Without the XOR (the layout before, pitch keys + 4) a store pass met one bank
            // d / 16 times: the check can tell.
            const BankLoad plain = vt_banks(d, keys, [&](int row, int key) { return row * (keys + 4) + key; });
            CHECK(plain.store_passes_max == d / 16);
        }
}
