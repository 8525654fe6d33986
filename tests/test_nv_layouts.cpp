// test_nv_layouts.cpp - the NVIDIA fragment maps and shared-memory address arithmetic of
// src/cuda/fa_nv_layouts.h, which src/cuda/fa_device.h is written with, checked on the
// CPU (CI has no GPU):
//   - each loader's lane roles, pushed through a model of ldmatrix and compared with the
//     mma.m16n8k16 operand layouts, both written here from the PTX ISA (not from the
//     header);
//   - fa_nv_frag_addr (a lane part plus a constant XOR and offset) against the plain
//     layout rule of tile_layout.h for every instance pitch, and why it needs 128-byte
//     aligned tiles;
//   - the layout's promise that the 8 rows of one ldmatrix phase hit 8 distinct 16-byte
//     bank groups;
//   - the warpgroup maps of src/cuda/fa_hopper.h (issue 13): the wgmma m64nNk16
//     accumulator map covers the 64 x N tile once with each row held by one lane quad (so
//     fa_row_max / fa_row_sum apply), and the 128-byte swizzle is a permutation of 16-byte
//     chunks inside each 128-byte row that spreads 8 consecutive rows' chunk c over 8
//     chunk slots. Whether the hardware agrees is tests/gpu/test_cuda_hopper_primitives.cpp.
#include <catch2/catch.hpp>

#include <set>
#include <utility>

#include "../src/cuda/fa_nv_layouts.h"
#include "gpu_kernels/smem_bytes.h"

namespace {

// Element (row, col) of a 16 x 16 tile, as a value that names it.
int tag(int row, int col) { return 100 * row + col; }
using Pair = std::pair<int, int>; // the two 16-bit elements of one 32-bit register

// PTX ISA, "Matrix Fragments for mma.m16n8k16" (.f16/.bf16): with g = lane / 4 and
// t = lane % 4, A register i holds A[g + 8 (i % 2)][2t + 8 (i / 2) + 0/1] and B register
// i holds B[2t + 8 i + 0/1][g]; accumulator register r is C[g + 8 (r / 2)][2t + r % 2].
Pair a_expected(int lane, int i, int (*a)(int, int))
{
    int row = lane / 4 + 8 * (i % 2), k = 2 * (lane % 4) + 8 * (i / 2);
    return {a(row, k), a(row, k + 1)};
}
Pair b_expected(int lane, int i, int n0, int (*b)(int, int))
{
    int k = 2 * (lane % 4) + 8 * i, n = n0 + lane / 4;
    return {b(k, n), b(k + 1, n)};
}

// ldmatrix .x4 (PTX ISA): lanes 8j .. 8j + 7 give the addresses of rows 0..7 of matrix j;
// without .trans lane l receives, in register j, matrix j's row l / 4, elements 2 (l % 4)
// and + 1; with .trans the same positions of the transposed matrix. A lane's address is
// its (row, chunk) role in the stored 16 x 16 tile.
Pair ldmatrix(int lane, int j, bool trans, int (*role_row)(int), int (*role_chunk)(int),
              int (*stored)(int, int))
{
    int r = lane / 4, c = 2 * (lane % 4);
    auto elem = [&](int row_in, int col_in) {
        int src = 8 * j + row_in; // the lane whose address gives this matrix row
        return stored(role_row(src), 8 * role_chunk(src) + col_in);
    };
    if (!trans) return {elem(r, c), elem(r, c + 1)};
    return {elem(c, r), elem(c + 1, r)};
}

int stored_plain(int row, int col) { return tag(row, col); }
int stored_transposed(int row, int col) { return tag(col, row); }

// The pitches of every shared tile the instances use: head-dim tiles and the backward's
// score tiles (gpu_kernels/smem_bytes.h), padded or swizzled by FA_FWD_SMEM_PITCH.
const int kPitches[] = {FA_FWD_SMEM_PITCH(32),  FA_FWD_SMEM_PITCH(64),  FA_FWD_SMEM_PITCH(96),
                        FA_FWD_SMEM_PITCH(128), FA_FWD_SMEM_PITCH(160), FA_FWD_SMEM_PITCH(192),
                        FA_FWD_SMEM_PITCH(256)};

struct Role {
    const char *name;
    int (*row)(int);
    int (*chunk)(int);
};
const Role kRoles[] = {{"lda", fa_nv_lda_row, fa_nv_lda_chunk},
                       {"ldbt", fa_nv_ldbt_row, fa_nv_ldbt_chunk},
                       {"ldb", fa_nv_ldb_row, fa_nv_ldb_chunk}};

} // namespace

TEST_CASE("NVIDIA accumulator map covers the 16x8 tile once, register pairs adjacent", "[layout]")
{
    std::set<Pair> seen;
    for (int lane = 0; lane < 32; ++lane)
        for (int r = 0; r < 4; ++r) {
            int row = fa_nv_acc_row(lane, r), col = fa_nv_acc_col(lane, r);
            REQUIRE(row >= 0);
            REQUIRE(row < 16);
            REQUIRE(col >= 0);
            REQUIRE(col < 8);
            seen.insert({row, col});
            if (r % 2 == 1) { // fa_device.h: FA_ACC_ROWS 2 rows of pairs, FA_ACC_PAIR_STRIDE 1
                CHECK(row == fa_nv_acc_row(lane, r - 1));
                CHECK(col == fa_nv_acc_col(lane, r - 1) + 1);
            }
            CHECK(row == lane / 4 + 8 * (r / 2)); // the PTX table
        }
    CHECK(seen.size() == 16 * 8);
}

TEST_CASE("ldmatrix lane roles deliver the mma.m16n8k16 operand registers", "[layout]")
{
    for (int lane = 0; lane < 32; ++lane) {
        INFO("lane " << lane);
        for (int i = 0; i < 4; ++i) {
            INFO("register " << i);
            // fa_load_a: A = tile[row][k].
            CHECK(ldmatrix(lane, i, false, fa_nv_lda_row, fa_nv_lda_chunk, stored_plain) ==
                  a_expected(lane, i, stored_plain));
            // fa_load_at: A = tileᵀ, the tile stored [k][row] (.trans, ldbt roles).
            CHECK(ldmatrix(lane, i, true, fa_nv_ldbt_row, fa_nv_ldbt_chunk, stored_plain) ==
                  a_expected(lane, i, stored_transposed));
            // fa_load_bt_pair: B = Kᵀ, K stored [n][k]; registers 0, 1 are n-tile 0, 2, 3 n-tile 1.
            CHECK(ldmatrix(lane, i, false, fa_nv_ldbt_row, fa_nv_ldbt_chunk, stored_plain) ==
                  b_expected(lane, i % 2, 8 * (i / 2), stored_transposed));
            // fa_load_b_pair: B = V, V stored [k][n] (.trans).
            CHECK(ldmatrix(lane, i, true, fa_nv_ldb_row, fa_nv_ldb_chunk, stored_plain) ==
                  b_expected(lane, i % 2, 8 * (i / 2), stored_plain));
        }
    }
}

TEST_CASE("fragment addresses (lane part, constant XOR and offset) follow the tile layout", "[layout]")
{
    const unsigned bases[] = {0u, 128u, 46080u + 128u};
    for (int pitch : kPitches)
        for (const Role &role : kRoles)
            for (unsigned base : bases)
                for (int row0 = 0; row0 <= 120; row0 += 8)
                    for (int kc = 0; kc + 2 <= pitch / 8; kc += 2)
                        for (int lane = 0; lane < 32; ++lane) {
                            int lane_row = role.row(lane), lane_chunk = role.chunk(lane);
                            unsigned got = fa_nv_frag_addr(base, fa_tile_offset(pitch, lane_row, lane_chunk),
                                                           pitch, row0, kc);
                            unsigned want = base + 2u * (unsigned)fa_tile_offset(pitch, row0 + lane_row,
                                                                                 kc + lane_chunk);
                            if (got != want) {
                                INFO(role.name << " pitch " << pitch << " base " << base << " row0 " << row0
                                               << " kc " << kc << " lane " << lane);
                                REQUIRE(got == want);
                            }
                        }
}

TEST_CASE("swizzled fragment addresses need 128-byte aligned tiles", "[layout]")
{
    // The XOR acts on the whole address: a tile starting mid-group gets wrong addresses,
    // which is why every shared tile keeps 128-byte alignment (FA_TILE_KEEPS_ALIGNMENT).
    const int pitch = FA_FWD_SMEM_PITCH(128);
    REQUIRE(FA_TILE_SWIZZLED(pitch));
    const unsigned misaligned = 48u; // 16-byte aligned, as cp.async needs, but mid-group
    int wrong = 0;
    for (int kc = 2; kc < 8; kc += 2)
        for (int lane = 0; lane < 32; ++lane) {
            int lane_offset = fa_tile_offset(pitch, fa_nv_lda_row(lane), fa_nv_lda_chunk(lane));
            wrong += fa_nv_frag_addr(misaligned, lane_offset, pitch, 0, kc) !=
                     misaligned + 2u * (unsigned)fa_tile_offset(pitch, fa_nv_lda_row(lane), kc + fa_nv_lda_chunk(lane));
        }
    CHECK(wrong > 0);
    for (int rows : {16, 32, 64, 128})
        for (int pitch_of : {32, 64, 96, 128, 160, 192, 256})
            CHECK(FA_TILE_KEEPS_ALIGNMENT(rows, FA_FWD_SMEM_PITCH(pitch_of)));
}

TEST_CASE("the 8 rows of one ldmatrix phase fall in 8 distinct 16-byte bank groups", "[layout]")
{
    for (int pitch : kPitches)
        for (const Role &role : kRoles)
            for (int kc = 0; kc + 2 <= pitch / 8; kc += 2)
                for (int j = 0; j < 4; ++j) {
                    std::set<unsigned> groups;
                    for (int lane = 8 * j; lane < 8 * j + 8; ++lane) {
                        unsigned addr = fa_nv_frag_addr(
                            0u, fa_tile_offset(pitch, role.row(lane), role.chunk(lane)), pitch, 16, kc);
                        groups.insert((addr % 128u) / 16u);
                    }
                    INFO(role.name << " pitch " << pitch << " kc " << kc << " matrix " << j);
                    CHECK(groups.size() == 8);
                }
}

TEST_CASE("wgmma accumulator map covers the 64xN tile once, rows held by lane quads", "[layout][hopper]")
{
    for (int n : {64, 128, 176, 256}) {
        std::set<int> seen;
        for (int t = 0; t < 128; ++t)
            for (int i = 0; i < n / 2; ++i) {
                const int row = fa_wg_acc_row(t, i), col = fa_wg_acc_col(t, i);
                REQUIRE(row >= 0);
                REQUIRE(row < 64);
                REQUIRE(col >= 0);
                REQUIRE(col < n);
                REQUIRE(seen.insert(row * n + col).second);
                // The four lanes of a quad share the row; registers i, i + 1 (i even) are
                // adjacent columns (one 32-bit pair in the output).
                REQUIRE(fa_wg_acc_row(t ^ 1, i) == row);
                REQUIRE(fa_wg_acc_row(t ^ 2, i) == row);
                if (i % 2 == 0)
                    REQUIRE(fa_wg_acc_col(t, i + 1) == col + 1);
            }
        CHECK((int)seen.size() == 64 * n);
    }
}

TEST_CASE("the 128-byte swizzle permutes 16-byte chunks within each row", "[layout][hopper]")
{
    for (int row = 0; row < 64; ++row) {
        std::set<unsigned> chunks;
        for (int col = 0; col < 64; ++col) {
            const unsigned off = fa_sw128_offset(row, col);
            REQUIRE(off / 128 == (unsigned)row);
            REQUIRE(off % 2 == 0);
            if (col % 8 == 0)
                REQUIRE(chunks.insert((off % 128) / 16).second);
            else
                REQUIRE(off == fa_sw128_offset(row, col - 1) + 2);
        }
    }
    for (int c = 0; c < 8; ++c) {
        std::set<unsigned> slots;
        for (int row = 0; row < 8; ++row)
            slots.insert((fa_sw128_offset(row, 8 * c) % 128) / 16);
        CHECK(slots.size() == 8);
    }
}
