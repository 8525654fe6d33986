// test_dq_accum.cpp - the fp32 dQ accumulator's layout (src/common/gpu_kernels/dq_accum.h) replayed on
// the CPU for the NVIDIA and AMD (MFMA16) accumulator maps: the dK/dV kernel's adds
// (attn_bwd.h, fa_bwd_dq_add: a vector per lane and MMA tile for fragment-ordered row
// blocks, element by element otherwise) and the convert kernel's reads
// (attn_bwd_prep.h, fa_bwd_convert_dq) must give back every element of every sequence,
// write nowhere twice and nowhere outside the sequence's own rows, and keep each lane's
// vector 16-byte aligned, for varlen batches whose sequences start anywhere and end
// mid-block, and head dims narrower than the instance.
#include <catch2/catch.hpp>

#include <algorithm>
#include <vector>

#include "../src/cuda/fa_nv_layouts.h"
#include "../src/hip/fa_amd_layouts.h"
#include "gpu_kernels/dq_accum.h"

namespace {

struct Vocabulary {
    const char *name;
    int tile_m, tile_n, lanes, regs;
    int (*acc_row)(int lane, int reg);
    int (*acc_col)(int lane, int reg);
};
int amd_row(int lane, int reg) { return (void)reg, fa_amd_acc_row(lane); }
int amd_col(int lane, int reg) { return fa_amd_acc_col(FA_AMD_MFMA16, lane, reg); }
const Vocabulary kVocabularies[] = {
    {"NVIDIA mma.m16n8k16", 16, 8, 32, 4, fa_nv_acc_row, fa_nv_acc_col},
    {"AMD v_mfma_f32_16x16x16", 16, 16, 64, 4, amd_row, amd_col},
};

long long tag(int seq, int row, int col) { return 1 + (long long)seq * 1000000 + row * 1000 + col; }

// One head's accumulator over a varlen batch: the kernels' adds land inside their own
// sequence's rows and nowhere twice; expect_rows checks what a read gave back.
struct Accumulator {
    const char *name;
    int hd;
    std::vector<int> row0;
    std::vector<long long> mem;
    Accumulator(const char *name_, const std::vector<int> &lengths, int hd_)
        : name(name_), hd(hd_), row0(lengths.size() + 1, 0)
    {
        for (size_t b = 0; b < lengths.size(); ++b) row0[b + 1] = row0[b] + lengths[b];
        mem.assign((size_t)row0.back() * hd, 0);
    }
    void add(int seq, long long at, long long value)
    {
        INFO(name << " hd " << hd << " sequence " << seq << " offset " << at);
        REQUIRE(at >= (long long)row0[seq] * hd); // inside its own rows
        REQUIRE(at < (long long)row0[seq + 1] * hd);
        REQUIRE(mem[(size_t)at] == 0); // nowhere twice
        mem[(size_t)at] = value;
    }
    void expect_rows(int seq, int len, const std::vector<long long> &out) const
    {
        for (int row = 0; row < len; ++row)
            for (int col = 0; col < hd; ++col)
                if (out[(size_t)row * hd + col] != tag(seq, row, col)) {
                    INFO(name << " hd " << hd << " sequence " << seq << " row " << row << " col " << col);
                    REQUIRE(out[(size_t)row * hd + col] == tag(seq, row, col));
                }
    }
};

// One head of a varlen batch: the dK/dV kernel's adds (each MMA tile of each step that the
// kernel runs: rows up to the sequence's end rounded to tile_m, columns up to d_inst),
// then the convert kernel's reads, for head dim hd of an instance of d_inst columns.
void replay(const Vocabulary &v, const std::vector<int> &lengths, int hd, int d_inst)
{
    Accumulator acc(v.name, lengths, hd);
    const std::vector<int> &row0 = acc.row0;
    const std::vector<long long> &mem = acc.mem;
    auto add = [&](int seq, long long at, long long value) { acc.add(seq, at, value); };
    for (size_t s = 0; s < lengths.size(); ++s) {
        const int len = lengths[s];
        for (int rb = 0; rb < len; rb += v.tile_m)
            for (int cb = 0; cb < d_inst; cb += v.tile_n) {
                if (fa_dq_accum_fragment_order(rb, len, hd, v.tile_m, v.tile_n)) {
                    if (cb >= hd) continue;
                    const long long at = fa_dq_accum_tile(row0[s], rb, cb, hd, v.tile_m);
                    for (int lane = 0; lane < v.lanes; ++lane) {
                        CHECK((at + lane * v.regs) * 4 % 16 == 0); // the vector atomic's alignment
                        for (int r = 0; r < v.regs; ++r)
                            add((int)s, at + lane * v.regs + r,
                                tag((int)s, rb + v.acc_row(lane, r), cb + v.acc_col(lane, r)));
                    }
                    continue;
                }
                for (int lane = 0; lane < v.lanes; ++lane)
                    for (int r = 0; r < v.regs; ++r) {
                        const int row = rb + v.acc_row(lane, r), col = cb + v.acc_col(lane, r);
                        if (row < len && col < hd)
                            add((int)s, (long long)(row0[s] + row) * hd + col, tag((int)s, row, col));
                    }
            }
    }
    for (size_t s = 0; s < lengths.size(); ++s) {
        const int len = lengths[s];
        std::vector<long long> out((size_t)len * hd, 0);
        for (int rb = 0; rb < len; rb += v.tile_m) {
            const long long block = (long long)(row0[s] + rb) * hd;
            if (fa_dq_accum_fragment_order(rb, len, hd, v.tile_m, v.tile_n)) {
                for (int tile = 0; tile < hd / v.tile_n; ++tile)
                    for (int lane = 0; lane < v.lanes; ++lane)
                        for (int r = 0; r < v.regs; ++r)
                            out[(size_t)(rb + v.acc_row(lane, r)) * hd + tile * v.tile_n + v.acc_col(lane, r)] =
                                mem[(size_t)(block + (long long)tile * v.tile_m * v.tile_n + lane * v.regs + r)];
            } else {
                for (int row = rb; row < len && row < rb + v.tile_m; ++row)
                    for (int col = 0; col < hd; ++col)
                        out[(size_t)row * hd + col] = mem[(size_t)(row0[s] + row) * hd + col];
            }
        }
        acc.expect_rows((int)s, len, out);
    }
}

// The same for the transposed order (NVIDIA's map, the only one with a kernel that uses it):
// the warpgroup backward's steps of `step` query rows (attn_bwd_ws.h, FA_BWS_DQ_T: d128's
// 80), each staged as fa_bws_stage_dq_t does (a warp's 16 head-dim columns of dQᵀ, n-tile
// nf the step's rows 8 nf ..) and added at the step's first row, then the convert's reads
// (fa_stage_dq_block with `transposed`).
void replay_transposed(const std::vector<int> &lengths, int hd, int d_inst, int step)
{
    const int tile_m = 16, tile_n = 8, lanes = 32, regs = 4;
    Accumulator acc("transposed", lengths, hd);
    const std::vector<int> &row0 = acc.row0;
    const std::vector<long long> &mem = acc.mem;
    auto add = [&](int seq, long long at, long long value) { acc.add(seq, at, value); };
    for (size_t s = 0; s < lengths.size(); ++s)
        for (int m0 = 0; m0 < lengths[s]; m0 += step) {
            const int rows = std::min(step, lengths[s] - m0);
            const long long step_at = (long long)(row0[s] + m0) * hd;
            for (int col0 = 0; col0 < d_inst && col0 < hd; col0 += tile_m)
                for (int nf = 0; nf < step / tile_n; ++nf) {
                    const int row_block = tile_m * (nf / 2), h = nf % 2;
                    if (fa_dq_accum_fragment_order_t(row_block, rows, hd, tile_m)) {
                        const long long at = fa_dq_accum_tile_t(0, row_block, h, col0, hd, tile_m, tile_n);
                        for (int lane = 0; lane < lanes; ++lane) {
                            CHECK((at + lane * regs) * 4 % 16 == 0); // the 16-byte staging store
                            for (int r = 0; r < regs; ++r)
                                add((int)s, step_at + at + lane * regs + r,
                                    tag((int)s, m0 + tile_n * nf + fa_nv_acc_col(lane, r),
                                        col0 + fa_nv_acc_row(lane, r)));
                        }
                        continue;
                    }
                    for (int lane = 0; lane < lanes; ++lane)
                        for (int r = 0; r < regs; ++r) {
                            const int row = tile_n * nf + fa_nv_acc_col(lane, r), col = col0 + fa_nv_acc_row(lane, r);
                            if (row < rows && col < hd)
                                add((int)s, step_at + (long long)row * hd + col, tag((int)s, m0 + row, col));
                        }
                }
        }
    for (size_t s = 0; s < lengths.size(); ++s) {
        const int len = lengths[s];
        std::vector<long long> out((size_t)len * hd, 0);
        for (int rb = 0; rb < len; rb += tile_m) {
            const long long block = (long long)(row0[s] + rb) * hd;
            if (fa_dq_accum_fragment_order_t(rb, len, hd, tile_m)) {
                for (int tile = 0; tile < hd / tile_n; ++tile)
                    for (int lane = 0; lane < lanes; ++lane)
                        for (int r = 0; r < regs; ++r)
                            out[(size_t)(rb + tile_n * (tile % 2) + fa_nv_acc_col(lane, r)) * hd + tile_m * (tile / 2) +
                                fa_nv_acc_row(lane, r)] =
                                mem[(size_t)(block + (long long)tile * tile_m * tile_n + lane * regs + r)];
            } else {
                for (int row = rb; row < len && row < rb + tile_m; ++row)
                    for (int col = 0; col < hd; ++col)
                        out[(size_t)row * hd + col] = mem[(size_t)(row0[s] + row) * hd + col];
            }
        }
        acc.expect_rows((int)s, len, out);
    }
}

} // namespace

TEST_CASE("dQ accumulator: the transposed order's staged steps and the convert's reads agree element by element",
          "[backward][layout]")
{
    // Steps of 80 rows ending mid-block and mid-step, sequences under a block, empty ones,
    // head dims narrower than the instance (multiples of 16 fragment-ordered, the rest
    // row-major).
    const std::vector<std::vector<int>> batches = {{80}, {160}, {37}, {5, 97, 0, 17, 3, 176}, {1, 16, 81, 95}};
    for (const auto &lengths : batches)
        for (int hd = 8; hd <= 128; hd += 8)
            replay_transposed(lengths, hd, 128, 80);
    CHECK(fa_dq_accum_fragment_order_t(0, 16, 128, 16));
    CHECK_FALSE(fa_dq_accum_fragment_order_t(0, 16, 120, 16)); // a head dim not a multiple of 16
    CHECK(fa_dq_accum_tile_t(5, 16, 1, 32, 128, 16, 8) == (5 + 16) * 128 + 32 * 16 + 16 * 8);
}

TEST_CASE("dQ accumulator: the kernels' adds and the convert's reads agree element by element",
          "[backward][layout]")
{
    // Sequences starting anywhere, ending mid-block, shorter than a block, empty.
    const std::vector<std::vector<int>> batches = {{64}, {37}, {5, 37, 0, 17, 3, 48}, {1, 16, 31, 33}};
    for (const Vocabulary &v : kVocabularies)
        for (const auto &lengths : batches)
            for (int d_inst : {32, 64, 128})
                for (int hd = 8; hd <= d_inst; hd += 8)
                    replay(v, lengths, hd, d_inst);
}

TEST_CASE("dQ accumulator: whole row blocks are fragment-ordered, the rest row-major", "[backward][layout]")
{
    CHECK(fa_dq_accum_fragment_order(0, 16, 64, 16, 8));
    CHECK(fa_dq_accum_fragment_order(16, 37, 64, 16, 8));
    CHECK_FALSE(fa_dq_accum_fragment_order(32, 37, 64, 16, 8)); // the partial last block
    CHECK_FALSE(fa_dq_accum_fragment_order(0, 15, 64, 16, 8));  // a sequence under one block
    CHECK_FALSE(fa_dq_accum_fragment_order(0, 64, 40, 16, 16)); // head dim not a multiple of N
    CHECK(fa_dq_accum_fragment_order(0, 64, 40, 16, 8));
    CHECK(fa_dq_accum_tile(5, 16, 8, 64, 16) == (5 + 16) * 64 + 8 * 16);
}

TEST_CASE("dQ accumulator: the last row blocks of a sequence of nearly 2^31 rows", "[backward][layout][int64]")
{
    // The longest sequence the API takes: its last block starts at 2^31 - 16 and is partial;
    // rb + 16 would wrap there and make it look whole (the kernels then wrote a whole
    // fragment-ordered block past the end of the accumulator).
    const int len = 2147483647, last = 2147483647 - 15; // 2^31 - 16
    CHECK_FALSE(fa_dq_accum_fragment_order(last, len, 128, 16, 8));
    CHECK(fa_dq_accum_fragment_order(last - 16, len, 128, 16, 8));
    CHECK(fa_dq_accum_fragment_order(last - 16, last, 128, 16, 16)); // ends exactly at the block
    CHECK_FALSE(fa_dq_accum_fragment_order(0, 0, 128, 16, 8));       // empty sequence

    // Offsets at the largest rows: a last sequence of 2^31 - 1 rows after 3 * 2^30 others,
    // d256. Its last whole block's last element (lane 31's last register of the last
    // 16x8 tile) sits 16 rows x 256 elements - 1 past the block's start, all past 2^31.
    const long long seq_row0 = 3LL << 30, hd = 256;
    const long long block = fa_dq_accum_tile(seq_row0, last - 16, 0, (int)hd, 16);
    CHECK(block == (seq_row0 + last - 16) * hd);
    CHECK(fa_dq_accum_tile(seq_row0, last - 16, (int)hd - 8, (int)hd, 16) + 31 * 4 + 3 ==
          block + 16 * hd - 1);
    CHECK(block + 16 * hd == (seq_row0 + last) * hd); // the partial block starts right after
}
