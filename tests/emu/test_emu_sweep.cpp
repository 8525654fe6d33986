// test_emu_sweep.cpp - issue 15's GPU sweep at reduced sizes on the emulated AMD device:
// the real HIP forward, decode, combine and backward kernels through the public API
// against the fp64 oracle (tests/emu/emu_api_checks.hpp, the CPU tests' tolerance rule).
// Every compiled tile of every head dim runs, forced by FLASHATTN_FORCE_TILE /
// FLASHATTN_FORCE_BWD_TILE, in fp16 and bf16, at odd lengths in both directions (causal
// with s_q > s_k leaves rows without a key); a head dim with no row for this target's
// wave size must be refused. Then masks (windows, softcap, ALiBi, mixed), GQA 6/6, 6/2,
// 6/1, fully masked rows (0 and -inf, also through split-KV), varlen with empty
// sequences, seqused_k, strided tensors, split-KV with its combine on every head dim, the
// decode family and paged K/V on every head dim it has, the backward (every tile) in
// both dQ modes, and every head dim bitwise the same in every wave order.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "cpu_case.hpp"
#include "emu_api_checks.hpp"
#include "flashattn.h"
#include "kvcache_case.hpp"
#include "oracle.hpp"
#include "select/registry.h"

using fa_emu_test::check_backward;
using fa_emu_test::check_forward;
using fa_emu_test::contains;
using fa_emu_test::EmuContext;
using fa_emu_test::ScopedEnv;
using fa_test::Alibi;
using fa_test::Case;
using fa_test::Run;

namespace {

const fa_dtype kDtypes[] = {FA_DTYPE_F16, FA_DTYPE_BF16};

// The compiled HIP configs of this target's wave size for a pass, dtype and instance
// head dim (forward: the prefill or the decode family), from the emulated library's
// registry: with FA_EMU_INSTANCES=all every row of the instance lists that the wave
// size lists.
std::vector<const fa_kernel_config *> compiled_tiles(fa_pass pass, fa_dtype dtype, int dim, int decode)
{
    int count = 0;
    const fa_kernel_config *reg = fa_registry_of(FA_BACKEND_HIP, pass, &count);
    std::vector<const fa_kernel_config *> tiles;
    for (int i = 0; i < count; ++i)
        if (reg[i].compiled && reg[i].min_wave_size == FA_EMU_WAVE_SIZE && reg[i].dtype == dtype &&
            reg[i].head_dim == dim && reg[i].pack_gqa == decode)
            tiles.push_back(&reg[i]);
    return tiles;
}

std::string tile_text(const fa_kernel_config *c) { return std::to_string(c->tile_m) + "x" + std::to_string(c->tile_n); }

// The head dims this target's wave size has rows for (src/common/select/*_instances.txt:
// wave32 rows end at d128 forward and d32 backward; AMD has no backward past d128).
bool forward_listed(int dim) { return FA_EMU_WAVE_SIZE == 64 || dim <= 128; }
bool backward_listed(int dim) { return dim <= (FA_EMU_WAVE_SIZE == 64 ? 128 : 32); }

Case sweep_case(fa_dtype dtype, int dim, int64_t s_q, int64_t s_k, int causal, uint64_t seed)
{
    Case c;
    c.dtype = dtype;
    c.dim = dim;
    c.seqlen_q = s_q;
    c.seqlen_k = s_k;
    c.heads = 6;
    c.heads_k = 2;
    c.causal = causal;
    c.seed = seed;
    return c;
}

// ---- the forward, every compiled tile of every head dim ----

// Each prefill tile of the head dim at s_q 37 / s_k 71, causal 71 / 37 (its first 34
// rows see no key) and causal tile_m + 37 / 150, each decode tile on a decode-sized
// problem (GQA 4, s_q 2, keys crossing several tiles, causal), in both dtypes; a head dim
// without rows is refused.
void forward_head_dim(int dim)
{
    uint64_t seed = (uint64_t)dim * 10;
    for (fa_dtype dt : kDtypes) {
        INFO(fa_dtype_name(dt) << " d" << dim);
        const auto prefill = compiled_tiles(FA_PASS_FWD, dt, dim, 0);
        const auto decode = compiled_tiles(FA_PASS_FWD, dt, dim, 1);
        CHECK(prefill.empty() == !forward_listed(dim));
        if (prefill.empty())
            CHECK(check_forward(sweep_case(dt, dim, 37, 71, 0, seed)) == FA_ERR_UNSUPPORTED);
        for (const fa_kernel_config *tile : prefill) {
            INFO(tile->name);
            ScopedEnv force("FLASHATTN_FORCE_TILE", tile_text(tile));
            fa_plan plan;
            CHECK(check_forward(sweep_case(dt, dim, 37, 71, 0, ++seed), 0, &plan) == FA_OK);
            CHECK(std::string(plan.kernel) == tile->name);
            CHECK(check_forward(sweep_case(dt, dim, 71, 37, 1, ++seed)) == FA_OK);
            // Rows in every wave of a first full tile and a second partial one: at 37 rows
            // a 256-row tile's later waves (the Q-in-registers forward's second group)
            // have none.
            CHECK(check_forward(sweep_case(dt, dim, tile->tile_m + 37, 150, 1, ++seed)) == FA_OK);
        }
        for (const fa_kernel_config *tile : decode) {
            INFO(tile->name);
            ScopedEnv force("FLASHATTN_FORCE_TILE", tile_text(tile));
            Case c = sweep_case(dt, dim, 2, 150, 1, ++seed);
            c.heads = 8;
            fa_plan plan;
            CHECK(check_forward(c, 0, &plan) == FA_OK);
            CHECK(std::string(plan.kernel) == tile->name);
        }
    }
}

TEST_CASE("forward_d32_every_tile_both_dtypes") { forward_head_dim(32); }
TEST_CASE("forward_d64_every_tile_both_dtypes") { forward_head_dim(64); }
TEST_CASE("forward_d96_every_tile_both_dtypes") { forward_head_dim(96); }
TEST_CASE("forward_d128_every_tile_both_dtypes") { forward_head_dim(128); }
TEST_CASE("forward_d192_every_tile_both_dtypes") { forward_head_dim(192); }
TEST_CASE("forward_d256_every_tile_both_dtypes") { forward_head_dim(256); }

// ---- masks and score transforms ----

// Windows, softcap and ALiBi at d64 (s_q 67 / s_k 131, batch 2 for per-batch slopes),
// dtypes alternating; the mixed case again on every head dim this target has.
TEST_CASE("forward_windows_softcap_alibi")
{
    Case base = sweep_case(FA_DTYPE_F16, 64, 67, 131, 0, 500);
    base.batch = 2;
    base.heads = 4;
    std::vector<Case> cases;
    auto add = [&](void (*edit)(Case &)) {
        Case c = base;
        edit(c);
        c.dtype = kDtypes[cases.size() % 2];
        c.seed = base.seed + cases.size();
        cases.push_back(c);
    };
    add([](Case &c) { c.window_left = 20; });
    add([](Case &c) { c.window_right = 5; });
    add([](Case &c) { c.window_left = c.window_right = 16; });
    add([](Case &c) { c.causal = 1, c.window_left = 24; });
    add([](Case &c) { c.softcap = 30.f; });
    add([](Case &c) { c.softcap = 5.f, c.window_left = 40, c.window_right = 10; });
    add([](Case &c) { c.alibi = Alibi::Shared; });
    add([](Case &c) { c.alibi = Alibi::PerBatch, c.causal = 1; });
    for (const Case &c : cases)
        CHECK(check_forward(c) == FA_OK);
}

TEST_CASE("forward_mixed_masks_on_every_head_dim")
{
    uint64_t seed = 550;
    for (int dim : {32, 96, 128, 192, 256}) {
        if (!forward_listed(dim))
            continue;
        Case c = sweep_case(kDtypes[seed % 2], dim, 67, 131, 1, seed);
        ++seed;
        c.alibi = Alibi::Shared;
        c.softcap = 20.f;
        c.window_left = 40;
        CHECK(check_forward(c) == FA_OK);
    }
}

TEST_CASE("forward_gqa_6_2_1_causal_both_ways")
{
    uint64_t seed = 600;
    for (int heads_k : {6, 2, 1})
        for (int64_t s_q : {45, 90}) {
            Case c = sweep_case(kDtypes[seed % 2], 64, s_q, 135 - s_q, 1, seed);
            ++seed;
            c.heads_k = heads_k;
            CHECK(check_forward(c) == FA_OK);
        }
}

// ---- rows without keys, varlen, seqused_k ----

// The rows that see no key hold 0 and -inf exactly (the contract, beyond the oracle's
// tolerance): causal s_q 100 > s_k 20 (rows 0-79), a one-key window (0, 0) with s_q 120
// > s_k 50 (rows 0-69), and causal s_q 230 > s_k 200 in three forced splits (rows 0-29:
// no key in any split, so the combine meets only empty partials).
TEST_CASE("forward_fully_masked_rows_give_zero_and_minus_infinity")
{
    struct Masked {
        Case c;
        int num_splits;
    };
    Masked causal = {sweep_case(FA_DTYPE_BF16, 96, 100, 20, 1, 700), 0};
    Masked window = {sweep_case(FA_DTYPE_F16, 64, 120, 50, 0, 701), 0};
    window.c.window_left = window.c.window_right = 0;
    Masked split = {sweep_case(FA_DTYPE_F16, 64, 230, 200, 1, 702), 3};
    for (const Masked &m : {causal, window, split}) {
        const Case &c = m.c;
        INFO(fa_test::describe(c) << " num_splits " << m.num_splits);
        Run r;
        fa_test::prepare(c, r);
        r.params.num_splits = m.num_splits;
        EmuContext cx;
        fa_plan plan;
        REQUIRE(fa_plan_fwd(cx.ctx, &r.q.view, &r.k.view, &r.v.view, &r.params, &plan) == FA_OK);
        CHECK(plan.num_splits == (m.num_splits ? m.num_splits : 1));
        REQUIRE(fa_emu_test::forward(cx, r, r.params) == FA_OK);
        fa_emu_test::check_against_oracle(r, r.params);
        bool exact = true;
        for (int64_t i = 0; i < c.seqlen_q - c.seqlen_k; ++i)
            for (int h = 0; h < c.heads; ++h) {
                const int64_t at_lse[3] = {0, h, i};
                exact = exact && fa_oracle::element(r.lse.view, at_lse) == -INFINITY;
                for (int d = 0; d < c.dim; ++d) {
                    const int64_t at[4] = {0, i, h, d};
                    exact = exact && fa_oracle::element(r.out.view, at) == 0.0;
                }
            }
        CHECK(exact);
    }
}

// Sequence 1 has no query rows, sequence 2 no keys (its rows give 0 and -inf).
Case varlen_case(fa_dtype dtype, int causal, uint64_t seed)
{
    Case c = sweep_case(dtype, 128, 0, 0, causal, seed);
    c.cu_q = {0, 30, 30, 77, 100};
    c.cu_k = {0, 50, 61, 61, 140};
    c.seqlen_q = 47;
    c.seqlen_k = 79;
    return c;
}

TEST_CASE("forward_varlen_with_empty_sequences_and_seqused_k")
{
    uint64_t seed = 720;
    for (fa_dtype dt : kDtypes)
        for (int causal = 0; causal < 2; ++causal)
            CHECK(check_forward(varlen_case(dt, causal, seed++)) == FA_OK);
    Case used = sweep_case(FA_DTYPE_F16, 64, 40, 100, 1, seed++);
    used.batch = 3;
    used.seqused_k = {100, 17, 0};
    CHECK(check_forward(used) == FA_OK);
}

// ---- split-KV and the decode family ----

// The forward of c with `splits` forced, against the oracle, and the plan ran that many.
void check_forced_splits(const Case &c, int splits)
{
    fa_plan plan;
    CHECK(check_forward(c, splits, &plan) == FA_OK);
    CHECK(plan.num_splits == splits);
}

// Three forced splits and their fp32 combine at d64 (three partials: a combine group of
// 32 lanes, within one wave on every target), both dtypes; then varlen with empty
// sequences in two splits (the combine finds its rows through cu_seqlens_q). Only d64,
// so that mutation_check.py's reduced build runs it: the one test whose combine group
// lies within a wave32 wave.
TEST_CASE("forward_split_kv_forced_with_the_combine")
{
    uint64_t seed = 800;
    for (fa_dtype dt : kDtypes) {
        check_forced_splits(sweep_case(dt, 64, 37, 150, 1, seed++), 3);
    }
    Case v = varlen_case(FA_DTYPE_BF16, 0, seed++);
    v.dim = 64;
    check_forced_splits(v, 2);
}

// Three forced splits on every other head dim this target has, dtypes alternating: the
// combine's group is 16 lanes at d32, 64 at d96 and d128 (two waves on wave32) and the
// whole block of 128 at d192 and d256 (two waves on gfx942), so its reductions run
// within a wave and, through its LDS, across waves.
TEST_CASE("forward_split_kv_forced_on_every_head_dim")
{
    uint64_t seed = 820;
    for (int dim : {32, 96, 128, 192, 256}) {
        if (!forward_listed(dim))
            continue;
        const fa_dtype dt = kDtypes[dim / 32 % 2];
        INFO(fa_dtype_name(dt) << " d" << dim);
        check_forced_splits(sweep_case(dt, dim, 37, 150, 1, seed++), 3);
    }
}

// Five forced splits under a sliding window: the first three see no key of any row, so
// their partials have LSE -inf (the forward writes their rows as 0; the workspace starts
// as NaN bytes here, so a row it skipped would show); the combine must add nothing of
// them and take the LSE from the other two.
TEST_CASE("forward_split_kv_with_keyless_splits")
{
    uint64_t seed = 805;
    for (fa_dtype dt : kDtypes) {
        Case c = sweep_case(dt, 64, 37, 300, 0, seed++);
        c.window_left = 20;
        c.window_right = 0;
        check_forced_splits(c, 5);
    }
}

// A decode-sized problem (s_q 1, GQA 8, d96: every target has a decode row) goes to the
// decode family, which chooses its own splits.
TEST_CASE("forward_decode_family_chooses_its_splits")
{
    uint64_t seed = 810;
    for (fa_dtype dt : kDtypes) {
        Case decode = sweep_case(dt, 96, 1, 700, 0, seed++);
        decode.heads = 8;
        decode.heads_k = 1;
        fa_plan plan;
        CHECK(check_forward(decode, 0, &plan) == FA_OK);
        CHECK(contains(plan.kernel, "fa_hip_dec_"));
    }
}

// Strided (padded, BHSD-like) q, k, v, out and lse, forward and backward.
TEST_CASE("strided_inputs_forward_and_backward")
{
    Case c = sweep_case(FA_DTYPE_BF16, 64, 45, 70, 1, 830);
    c.strided = true;
    CHECK(check_forward(c) == FA_OK);
    c.dim = FA_EMU_WAVE_SIZE == 64 ? 64 : 32;
    CHECK(check_backward(c, 1) == FA_OK);
}

// Research note 3.5 on every head dim: a missing barrier between a writer wave and a
// reader wave shows as a difference between wave orders. The forward (default tile)
// and the deterministic backward bitwise the same in the forward, reverse and seeded
// orders.
TEST_CASE("every_head_dim_is_the_same_in_every_wave_order")
{
    uint64_t seed = 850;
    for (int dim : {32, 64, 96, 128, 192, 256}) {
        INFO("d" << dim);
        const Case c = sweep_case(kDtypes[seed % 2], dim, 71, 37, 1, seed);
        ++seed;
        std::vector<Run> runs(3);
        std::vector<fa_emu_test::BackwardRun> grads(3);
        const char *orders[] = {"forward", "reverse", "seeded"};
        EmuContext cx;
        for (int o = 0; o < 3; ++o) {
            fa_emu_test::WaveOrder order(orders[o]);
            fa_test::prepare(c, runs[o]);
            const fa_status st = fa_emu_test::forward(cx, runs[o], runs[o].params);
            CHECK(st == (forward_listed(dim) ? FA_OK : FA_ERR_UNSUPPORTED));
            if (backward_listed(dim)) {
                fa_emu_test::prepare_backward(c, 1, grads[o]);
                REQUIRE(fa_emu_test::run_backward(cx, grads[o]) == FA_OK);
            }
        }
        for (int o = 1; o < 3; ++o) {
            INFO(orders[o]);
            CHECK(runs[o].out.storage == runs[0].out.storage);
            CHECK(runs[o].lse.storage == runs[0].lse.storage);
            CHECK(grads[o].dq.storage == grads[0].dq.storage);
            CHECK(grads[o].dk.storage == grads[0].dk.storage);
            CHECK(grads[o].dv.storage == grads[0].dv.storage);
        }
    }
}

// One paged forward on the emulated device, every output element written and equal to
// the reference over the contiguous K/V within the rule.
void run_paged_against_reference(EmuContext &cx, fa_paged::PagedRun &r)
{
    const fa_status st =
        fa_fwd(cx.ctx, &r.q.view, &r.k_pool.view, &r.v_pool.view, &r.paged, &r.out.view, &r.lse.view, nullptr, 0);
    INFO(fa_last_error(cx.ctx));
    REQUIRE(st == FA_OK);
    CHECK(fa_device_error(cx.ctx, 1) == FA_OK);
    REQUIRE(fa_oracle::all_elements_written(r.out));
    fa_paged::check_against_reference(r.q.view, r.k.view, r.v.view, r.contiguous, r.out.view, r.lse.view);
}

// Paged K/V (seq_check_pages, then the decode family over pages in random order) on
// every head dim with a decode row, both dtypes: varlen sequences ending inside a page,
// pages of 16, 48 and 64 keys (48: the page size is a divisor the host prepares,
// fast_divide.h, and a page then ends inside a 64-key tile), seqused_k, a page shared
// by two sequences.
TEST_CASE("paged_decode_every_head_dim_both_dtypes")
{
    uint64_t seed = 900;
    for (int dim : {32, 64, 96, 128, 192, 256})
        for (fa_dtype dt : kDtypes) {
            if (compiled_tiles(FA_PASS_FWD, dt, dim, 1).empty())
                continue;
            fa_paged::PagedCase c;
            c.dtype = dt;
            c.dim = dim;
            const int page_sizes[] = {16, 48, 64};
            c.page = page_sizes[seed % 3];
            c.width = 160 / c.page + 1;
            c.keys = {150, 71, 97};
            c.varlen = seed % 2 == 0;
            c.seqused = !c.varlen;
            c.seqused_cut = 9;
            c.shared = 1;
            c.causal = true;
            c.seed = seed++;
            INFO(fa_paged::describe(c) << " d" << dim);
            fa_paged::PagedRun r;
            fa_paged::prepare(c, r);
            EmuContext cx;
            run_paged_against_reference(cx, r);
        }
}

// The d128 decode kernel of CDNA holds the next K/V tile in registers while the current
// one computes and reads the pages of the tile after that ahead of its loads (attn_fwd.h
// FA_DEC_HELD): every page layout against its 32-key tile (pages of 16 and 48 keys inside
// and across tiles, 32 one page per tile, 64 and 128 several tiles per page), sequences
// of many tiles, of one tile and of one key, both dtypes.
TEST_CASE("paged_decode_d128_every_page_layout_many_tiles")
{
    uint64_t seed = 950;
    for (int page : {16, 32, 48, 64, 128})
        for (fa_dtype dt : kDtypes) {
            if (compiled_tiles(FA_PASS_FWD, dt, 128, 1).empty())
                continue;
            fa_paged::PagedCase c;
            c.dtype = dt;
            c.dim = 128;
            c.page = page;
            c.keys = {300, 1, 129, 32};
            c.width = 300 / page + 2;
            c.varlen = true;
            c.shared = 1;
            c.causal = seed % 2 == 0;
            c.seed = seed++;
            INFO(fa_paged::describe(c));
            fa_paged::PagedRun r;
            fa_paged::prepare(c, r);
            EmuContext cx;
            fa_plan plan;
            REQUIRE(fa_plan_fwd(cx.ctx, &r.q.view, &r.k_pool.view, &r.v_pool.view, &r.paged, &plan) == FA_OK);
            if (FA_EMU_WAVE_SIZE == 64)
                CHECK((contains(plan.kernel, "fa_hip_dec_d128_") && plan.tile_n == 32));
            run_paged_against_reference(cx, r);
        }
}

// ---- the backward ----

// Each compiled backward tile of the head dim in both dtypes: s_q 37 / s_k 71, and
// causal 71 / 37, each with dQ by atomics (wave64; wave32 kernels have no atomic phase
// and run their dQ pass either way) and deterministic; a head dim without rows is
// refused.
void backward_head_dim(int dim)
{
    uint64_t seed = (uint64_t)dim * 10 + 5000;
    for (fa_dtype dt : kDtypes) {
        INFO(fa_dtype_name(dt) << " d" << dim);
        const auto tiles = compiled_tiles(FA_PASS_BWD, dt, dim, 0);
        CHECK(tiles.empty() == !backward_listed(dim));
        if (tiles.empty())
            CHECK(check_backward(sweep_case(dt, dim, 37, 71, 0, seed), 0) == FA_ERR_UNSUPPORTED);
        for (const fa_kernel_config *tile : tiles) {
            INFO(tile->name);
            ScopedEnv force("FLASHATTN_FORCE_BWD_TILE", tile_text(tile));
            for (int deterministic = 0; deterministic < 2; ++deterministic) {
                CHECK(check_backward(sweep_case(dt, dim, 37, 71, 0, ++seed), deterministic) == FA_OK);
                CHECK(check_backward(sweep_case(dt, dim, 71, 37, 1, ++seed), deterministic) == FA_OK);
            }
        }
    }
}

TEST_CASE("backward_d32_every_tile_both_dtypes") { backward_head_dim(32); }
TEST_CASE("backward_d64_every_tile_both_dtypes") { backward_head_dim(64); }
TEST_CASE("backward_d96_every_tile_both_dtypes") { backward_head_dim(96); }
TEST_CASE("backward_d128_every_tile_both_dtypes") { backward_head_dim(128); }
TEST_CASE("backward_d192_is_refused") { backward_head_dim(192); }

// The largest head dim this target's backward has: d64 on wave64, d32 on wave32.
int backward_mask_dim() { return FA_EMU_WAVE_SIZE == 64 ? 64 : 32; }

// Softcap (causal, GQA 6/6), a small softcap with ALiBi and a window (GQA 6/1), in both
// dQ modes.
TEST_CASE("backward_softcap_alibi_window_gqa_both_dq_modes")
{
    uint64_t seed = 5500;
    for (int deterministic = 0; deterministic < 2; ++deterministic) {
        Case cap = sweep_case(FA_DTYPE_BF16, backward_mask_dim(), 45, 70, 1, seed++);
        cap.heads_k = 6;
        cap.softcap = 30.f;
        Case mix = sweep_case(FA_DTYPE_F16, backward_mask_dim(), 45, 70, 0, seed++);
        mix.heads_k = 1;
        mix.softcap = 5.f;
        mix.alibi = Alibi::Shared;
        mix.window_left = 30;
        mix.window_right = 10;
        CHECK(check_backward(cap, deterministic) == FA_OK);
        CHECK(check_backward(mix, deterministic) == FA_OK);
    }
}

// Varlen with a sequence without query rows and one without keys, causal s_q 60 > s_k
// 20 (rows without keys: zero dq; keys seen by no query: zero dk, dv), and seqused_k
// (keys past it: zero dk, dv), both modes.
TEST_CASE("backward_varlen_empty_sequences_fully_masked_rows_seqused_k_both_dq_modes")
{
    uint64_t seed = 5600;
    for (int deterministic = 0; deterministic < 2; ++deterministic) {
        Case v = varlen_case(FA_DTYPE_F16, 1, seed++);
        v.dim = backward_mask_dim();
        Case m = sweep_case(FA_DTYPE_BF16, backward_mask_dim(), 60, 20, 1, seed++);
        Case used = sweep_case(FA_DTYPE_F16, backward_mask_dim(), 40, 100, 0, seed++);
        used.batch = 3;
        used.seqused_k = {100, 17, 0};
        CHECK(check_backward(v, deterministic) == FA_OK);
        CHECK(check_backward(m, deterministic) == FA_OK);
        CHECK(check_backward(used, deterministic) == FA_OK);
    }
}

} // namespace
