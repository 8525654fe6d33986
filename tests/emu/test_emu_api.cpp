// test_emu_api.cpp - flashattn's public API on the emulated AMD device (issue 15, step
// 3): fa_create(FA_BACKEND_HIP) reaches the emulator, which reports the arch table's
// own row; the real HIP kernels then run through it. fa_combine (the shared kernels'
// combine) on random partials, empty ones included, against an fp64 combine; a varlen
// forward whose device check (seq_check) runs, passing a good call and reporting a bad
// one; the forward bitwise equal in the forward and the reverse wave order, the
// deterministic backward in three; paged decode and its page check, and
// fa_fwd_kvcache's append and attention; an emulator error named with its kernel by the
// runtime table; the combine's and a forward's LDS counted against the LDS limit. The
// forward and backward sweep against the oracle is test_emu_sweep.cpp's.
#include <catch2/catch.hpp>

#include <stdlib.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "api/dtype.h"
#include "cpu_case.hpp"
#include "emu_api_checks.hpp"
#include "flashattn.h"
#include "gpu_host/gpu_runtime.h"
#include "gpu_kernels/attn_args.h"
#include "gpu_kernels/seq_check_args.h"
#include "kvcache_case.hpp"
#include "oracle.hpp"

using fa_emu_test::BackwardRun;
using fa_emu_test::contains;
using fa_emu_test::check_against_oracle;
using fa_emu_test::EmuContext;
using fa_emu_test::forward;
using fa_emu_test::prepare_backward;
using fa_emu_test::run_backward;
using fa_emu_test::ScopedEnv;
using fa_emu_test::WaveOrder;
using fa_oracle::HostTensor;
using fa_test::Case;
using fa_test::Run;

namespace {

// ---- the combine ----

// n partials of [b, s_q, h, d] in one 16-bit dtype with their f32 LSEs, and the combine
// computed in fp64 from the values as stored.
struct Partials {
    fa_dtype dtype;
    int64_t b = 2, s_q = 37, h = 3, d;
    int n = 5;
    std::vector<std::vector<uint16_t>> outs;
    std::vector<std::vector<float>> lses;
    std::vector<double> want_out, want_lse;

    size_t rows() const { return (size_t)(b * s_q * h); }
    size_t out_at(int64_t bi, int64_t s, int64_t hi, int64_t c) const { return ((bi * s_q + s) * h + hi) * d + c; }
    size_t lse_at(int64_t bi, int64_t s, int64_t hi) const { return (bi * h + hi) * s_q + s; }
    float value(uint16_t bits) const { return dtype == FA_DTYPE_F16 ? fa_f16_to_f32(bits) : fa_bf16_to_f32(bits); }

    Partials(fa_dtype dt, int64_t head_dim) : dtype(dt), d(head_dim)
    {
        std::mt19937 rng((dt == FA_DTYPE_F16 ? 11 : 12) + (unsigned)head_dim);
        std::normal_distribution<float> normal(0.f, 1.f);
        outs.assign(n, std::vector<uint16_t>(rows() * d));
        lses.assign(n, std::vector<float>(rows()));
        for (int i = 0; i < n; ++i) {
            for (uint16_t &x : outs[i])
                x = dt == FA_DTYPE_F16 ? fa_f32_to_f16(normal(rng)) : fa_f32_to_bf16(normal(rng));
            for (float &l : lses[i])
                l = 3.f * normal(rng);
        }
        mark_empty();
        combine_fp64();
    }

    // Partial 1 saw no key anywhere (-inf), partial 3 none in batch 1 (+inf, as
    // FlashAttention-2 writes it); in batch 0, rows 5 and 36 of head 2 saw none at all.
    // In batch 0, row 7 of head 0, partial 3's LSE lies 150 above the others: exp of the
    // difference overflows fp32, so only a shift by the group's true maximum combines it
    // (a maximum over part of the group's lanes is still a valid shift elsewhere).
    void mark_empty()
    {
        lses[3][lse_at(0, 7, 0)] = 150.f;
        for (float &l : lses[1])
            l = -INFINITY;
        for (int64_t s = 0; s < s_q; ++s)
            for (int64_t hi = 0; hi < h; ++hi)
                lses[3][lse_at(1, s, hi)] = INFINITY;
        for (int i = 0; i < n; ++i)
            lses[i][lse_at(0, 5, 2)] = lses[i][lse_at(0, 36, 2)] = -INFINITY;
    }

    void combine_fp64()
    {
        want_out.assign(rows() * d, 0.0);
        want_lse.assign(rows(), -INFINITY);
        for (int64_t bi = 0; bi < b; ++bi)
            for (int64_t s = 0; s < s_q; ++s)
                for (int64_t hi = 0; hi < h; ++hi)
                    combine_row(bi, s, hi);
    }

    void combine_row(int64_t bi, int64_t s, int64_t hi)
    {
        const size_t row = lse_at(bi, s, hi);
        double top = -INFINITY, sum = 0.0;
        for (int i = 0; i < n; ++i)
            if (std::isfinite(lses[i][row]))
                top = std::max(top, (double)lses[i][row]);
        if (top == -INFINITY)
            return;
        for (int i = 0; i < n; ++i)
            if (std::isfinite(lses[i][row]))
                sum += std::exp(lses[i][row] - top);
        want_lse[row] = top + std::log(sum);
        for (int i = 0; i < n; ++i) {
            if (!std::isfinite(lses[i][row]))
                continue;
            const double w = std::exp(lses[i][row] - want_lse[row]);
            for (int64_t c = 0; c < d; ++c)
                want_out[out_at(bi, s, hi, c)] += w * value(outs[i][out_at(bi, s, hi, c)]);
        }
    }
};

// fa_combine of p's partials into out and lse, poisoned (NaN) first.
fa_status combine(const EmuContext &cx, Partials &p, std::vector<uint16_t> &out, std::vector<float> &lse)
{
    std::vector<fa_tensor> part_out, part_lse;
    for (int i = 0; i < p.n; ++i) {
        part_out.push_back(fa_tensor_bshd(p.outs[i].data(), p.dtype, p.b, p.s_q, p.h, p.d));
        part_lse.push_back(fa_tensor_lse(p.lses[i].data(), p.b, p.h, p.s_q));
    }
    out.assign(p.rows() * p.d, p.dtype == FA_DTYPE_F16 ? 0x7e00 : 0x7fc0);
    lse.assign(p.rows(), NAN);
    fa_tensor tout = fa_tensor_bshd(out.data(), p.dtype, p.b, p.s_q, p.h, p.d);
    fa_tensor tlse = fa_tensor_lse(lse.data(), p.b, p.h, p.s_q);
    return fa_combine(cx.ctx, p.n, part_out.data(), part_lse.data(), &tout, &tlse);
}

// Five partials take a group of 64 lanes at d64 (one wave on gfx942, two on wave32) and
// the whole block of 256 at d256 (four waves on gfx942, eight on wave32): the combine's
// sums across waves, through its LDS, run on every target.
TEST_CASE("combine_matches_the_fp64_combine_with_empty_partials")
{
    EmuContext cx;
    for (int64_t d : {64, 256})
        for (fa_dtype dt : {FA_DTYPE_F16, FA_DTYPE_BF16}) {
            INFO(fa_dtype_name(dt) << " d" << d);
            Partials p(dt, d);
            std::vector<uint16_t> out;
            std::vector<float> lse;
            const fa_status st = combine(cx, p, out, lse);
            INFO(fa_last_error(cx.ctx));
            REQUIRE(st == FA_OK);
            // One rounding of the result to the dtype, plus fp32 arithmetic.
            const double ulp = dt == FA_DTYPE_F16 ? 1.0 / 1024 : 1.0 / 128;
            double worst = 0.0, worst_lse = 0.0;
            for (size_t i = 0; i < out.size(); ++i) {
                const double e = std::fabs(p.value(out[i]) - p.want_out[i]) / (1.0 + std::fabs(p.want_out[i]));
                worst = std::isnan(e) ? INFINITY : std::max(worst, e);
            }
            for (size_t i = 0; i < lse.size(); ++i) {
                const bool none = p.want_lse[i] == -INFINITY;
                worst_lse = std::max(worst_lse, none ? (lse[i] == -INFINITY ? 0.0 : INFINITY)
                                                     : std::fabs(lse[i] - p.want_lse[i]));
            }
            CAPTURE(worst, worst_lse);
            CHECK(worst <= ulp);
            CHECK(worst_lse <= 1e-5);
            for (int64_t c = 0; c < p.d; ++c)
                CHECK(p.value(out[p.out_at(0, 5, 2, c)]) == 0.f);
        }
}

// ---- the device check ----

Case varlen_case()
{
    Case c;
    c.dtype = FA_DTYPE_F16;
    c.dim = 64;
    c.heads = 4;
    c.heads_k = 2;
    c.cu_q = {0, 37, 37, 101};
    c.cu_k = {0, 71, 90, 90};
    c.seqlen_q = 64;
    c.seqlen_k = 71;
    return c;
}

// Global query rows [g0, g1) of a varlen output still poisoned.
bool rows_poisoned(const HostTensor &out, int64_t g0, int64_t g1, int heads, int dim)
{
    for (int64_t g = g0; g < g1; ++g)
        for (int h = 0; h < heads; ++h)
            for (int c = 0; c < dim; ++c) {
                const int64_t at[3] = {g, h, c};
                if (!std::isnan(fa_oracle::element(out.view, at)))
                    return false;
            }
    return true;
}

TEST_CASE("varlen_forward_passes_its_device_check")
{
    const Case c = varlen_case();
    Run r;
    fa_test::prepare(c, r);
    EmuContext cx;
    REQUIRE(forward(cx, r, r.params) == FA_OK);
    CHECK(fa_device_error(cx.ctx, 1) == FA_OK);
    REQUIRE(fa_oracle::all_elements_written(r.out));
    check_against_oracle(r, r.params);
}

TEST_CASE("varlen_forward_device_check_reports_a_long_sequence")
{
    const Case c = varlen_case();
    Run r;
    fa_test::prepare(c, r);
    EmuContext cx;
    fa_params bad = r.params;
    bad.max_seqlen_k = 60; // sequence 0 has 71 keys
    REQUIRE(forward(cx, r, bad) == FA_OK);
    CHECK(fa_device_error(cx.ctx, 1) == FA_ERR_DEVICE_CHECK);
    const std::string msg = fa_last_error(cx.ctx);
    INFO(msg);
    CHECK(contains(msg, "sequence 0 has 71 key rows > max_seqlen_k 60"));
    CHECK(rows_poisoned(r.out, 0, 37, c.heads, c.dim));
    CHECK(!rows_poisoned(r.out, 37, 101, c.heads, c.dim));
    CHECK(fa_device_error(cx.ctx, 1) == FA_OK);
}

// ---- the forward ----

Case odd_gqa_case(int causal, fa_dtype dtype = FA_DTYPE_F16)
{
    Case c;
    c.dtype = dtype;
    c.batch = 2;
    c.seqlen_q = 37;
    c.seqlen_k = 71;
    c.heads = 6;
    c.heads_k = 2;
    c.dim = 64;
    c.causal = causal;
    c.seed = 40 + causal;
    return c;
}

TEST_CASE("context_is_the_emulated_target_row")
{
    EmuContext cx;
    fa_device_info info;
    REQUIRE(fa_get_device_info(cx.ctx, &info) == FA_OK);
    CHECK(std::string(info.arch) == fa_emu_test::emulated_arch);
    CHECK(info.row_from_table == 1);
    CHECK(contains(info.device_name, "emulated"));
}

TEST_CASE("forward_is_the_same_in_the_reverse_wave_order")
{
    const Case c = odd_gqa_case(1);
    Run fwd, rev;
    fa_test::prepare(c, fwd);
    fa_test::prepare(c, rev);
    EmuContext cx;
    {
        WaveOrder order("forward");
        REQUIRE(forward(cx, fwd, fwd.params) == FA_OK);
    }
    {
        WaveOrder order("reverse");
        REQUIRE(forward(cx, rev, rev.params) == FA_OK);
    }
    CHECK(fwd.out.storage == rev.out.storage);
    CHECK(fwd.lse.storage == rev.lse.storage);
}

// ---- paged K/V and the kvcache ----

// A decode-sized paged forward (the decode family, which checks seqused_k and the page ids
// itself): the decode kernel over pages in random order, sequences ending inside a page.
fa_paged::PagedCase paged_case()
{
    fa_paged::PagedCase c;
    c.dtype = FA_DTYPE_F16;
    c.page = 16;
    c.width = 5;
    c.keys = {80, 80};
    c.seqused = true;
    c.seqused_cut = 7;
    c.causal = true;
    return c;
}

fa_status paged_forward(const EmuContext &cx, fa_paged::PagedRun &r)
{
    return fa_fwd(cx.ctx, &r.q.view, &r.k_pool.view, &r.v_pool.view, &r.paged, &r.out.view, &r.lse.view, nullptr,
                  0);
}

// Sequence 0 of a two-sequence paged call written, sequence 1 (which the device check
// condemned) left as poisoned as it came.
void check_only_sequence_1_skipped(const fa_paged::PagedCase &c, const fa_paged::PagedRun &r)
{
    for (int64_t s = 0; s < c.seqlen_q; ++s)
        for (int h = 0; h < c.heads; ++h) {
            const int64_t written[4] = {0, s, h, 0}, skipped[4] = {1, s, h, 0};
            CHECK(!std::isnan(fa_oracle::element(r.out.view, written)));
            CHECK(std::isnan(fa_oracle::element(r.out.view, skipped)));
        }
}

TEST_CASE("paged_decode_matches_the_oracle")
{
    const fa_paged::PagedCase c = paged_case();
    fa_paged::PagedRun r;
    fa_paged::prepare(c, r);
    EmuContext cx;
    fa_plan plan;
    REQUIRE(fa_plan_fwd(cx.ctx, &r.q.view, &r.k_pool.view, &r.v_pool.view, &r.paged, &plan) == FA_OK);
    INFO(plan.kernel << ": " << plan.reason);
    CHECK(contains(plan.kernel, "fa_hip_dec_"));
    REQUIRE(paged_forward(cx, r) == FA_OK);
    CHECK(fa_device_error(cx.ctx, 1) == FA_OK);
    REQUIRE(fa_oracle::all_elements_written(r.out));
    fa_paged::check_against_reference(r.q.view, r.k.view, r.v.view, r.contiguous, r.out.view, r.lse.view);
}

TEST_CASE("paged_device_check_reports_a_page_outside_the_pool")
{
    const fa_paged::PagedCase c = paged_case();
    fa_paged::PagedRun r;
    fa_paged::prepare(c, r);
    r.table.entries[(size_t)r.table.stride + 2] = r.table.num_pages; // sequence 1, its third page
    EmuContext cx;
    REQUIRE(paged_forward(cx, r) == FA_OK);
    CHECK(fa_device_error(cx.ctx, 1) == FA_ERR_DEVICE_CHECK);
    const std::string msg = fa_last_error(cx.ctx);
    INFO(msg);
    CHECK(contains(msg, "block_table"));
    CHECK(contains(msg, "sequence 1"));
    check_only_sequence_1_skipped(c, r);
}

// A fixed-length paged call's decode kernel reads seqused_k and the page ids before any
// verdict (it judges the sequence itself: fa_fwd_args.checks_itself), clamped into the
// pools; here, under ASan, a read they let out of the pools would stop the test.
TEST_CASE("paged_decode_reads_out_of_range_indices_inside_the_pools")
{
    const fa_paged::PagedCase c = paged_case();
    fa_paged::PagedRun r;
    fa_paged::prepare(c, r);
    r.used[1] = 1 << 30;
    r.table.entries[(size_t)r.table.stride + 1] = -4; // sequence 1, its second page
    EmuContext cx;
    REQUIRE(paged_forward(cx, r) == FA_OK);
    CHECK(fa_device_error(cx.ctx, 1) == FA_ERR_DEVICE_CHECK);
    const std::string msg = fa_last_error(cx.ctx);
    INFO(msg);
    CHECK(contains(msg, "sequence 1"));
    check_only_sequence_1_skipped(c, r);
}

// With split-KV only the block of KV head 0 and split 0 judges a sequence (the decode
// kernel checks itself: fa_fwd_args.checks_itself) and writes seq_ok, the other blocks
// write their partials regardless, and the combine leaves a bad sequence unwritten. Rows
// of 260 pages (past FA_JUDGE_ROUND entries for a 64-lane block) take the check kernel.
TEST_CASE("paged_decode_with_split_kv_judges_once_and_the_combine_writes_nothing_for_it")
{
    for (int width : {20, 260})
    for (int bad_used : {0, 1}) {
        fa_paged::PagedCase c = paged_case();
        c.width = width; // at least three splits of the decode tile's 128 keys
        c.keys = {16 * width, 16 * width};
        fa_paged::PagedRun r;
        fa_paged::prepare(c, r);
        r.paged.num_splits = 3;
        if (bad_used)
            r.used[1] = -1;
        else
            r.table.entries[(size_t)r.table.stride + width - 1] = r.table.num_pages + 7; // sequence 1, last page
        INFO("width " << width << ", bad " << (bad_used ? "seqused_k" : "page id"));
        EmuContext cx;
        fa_plan plan;
        REQUIRE(fa_plan_fwd(cx.ctx, &r.q.view, &r.k_pool.view, &r.v_pool.view, &r.paged, &plan) == FA_OK);
        CHECK(plan.num_splits == 3);
        REQUIRE(paged_forward(cx, r) == FA_OK);
        CHECK(fa_device_error(cx.ctx, 1) == FA_ERR_DEVICE_CHECK);
        const std::string msg = fa_last_error(cx.ctx);
        INFO(msg);
        const std::string want = bad_used ? "seqused_k[1]" : "block_table[1][" + std::to_string(width - 1) + "]";
        CHECK(contains(msg, want.c_str()));
        check_only_sequence_1_skipped(c, r);
    }
}

// fa_fwd_kvcache: seq_check over the cache lengths, kv_append (rotating k when asked),
// then the forward over the appended cache.
TEST_CASE("kvcache_appends_and_attends_as_the_oracle")
{
    for (int rotary : {0, 32}) {
        fa_paged::KvCase c;
        c.dtype = FA_DTYPE_F16;
        c.rotary_dim = rotary;
        INFO(fa_paged::describe(c));
        fa_paged::KvRun r;
        fa_paged::prepare(c, r);
        EmuContext cx;
        const fa_status st = fa_fwd_kvcache(cx.ctx, &r.q.view, &r.k_cache.view, &r.v_cache.view, &r.k_new.view,
                                            &r.v_new.view, &r.kv, &r.params, &r.out.view, &r.lse.view, nullptr, 0);
        INFO(fa_last_error(cx.ctx));
        REQUIRE(st == FA_OK);
        CHECK(fa_device_error(cx.ctx, 1) == FA_OK);
        fa_paged::check_append(c, r);
        fa_paged::check_attention(c, r);
    }
}

// ---- the backward ----

// Research note 3.5: the deterministic backward is bitwise the same whichever wave runs
// first in each barrier interval.
TEST_CASE("deterministic_backward_is_the_same_in_every_wave_order")
{
    Case c = odd_gqa_case(1);
    c.dim = 32;
    EmuContext cx;
    BackwardRun want;
    prepare_backward(c, 1, want);
    {
        WaveOrder order("forward");
        REQUIRE(run_backward(cx, want) == FA_OK);
    }
    for (const char *name : {"reverse", "seeded"}) {
        INFO(name);
        BackwardRun got;
        prepare_backward(c, 1, got);
        WaveOrder order(name);
        REQUIRE(run_backward(cx, got) == FA_OK);
        CHECK(got.dq.storage == want.dq.storage);
        CHECK(got.dk.storage == want.dk.storage);
        CHECK(got.dv.storage == want.dv.storage);
    }
}

// ---- the runtime table ----

// A block that is not whole waves never starts; the table's error text names the
// kernel and the emulator's reason, which gpu_backend.c puts in fa_last_error.
TEST_CASE("runtime_table_names_the_kernel_of_a_failed_launch")
{
    fa_seq_check_args args;
    memset(&args, 0, sizeof args);
    void *kernel_args[] = {&args};
    const int err = fa_hip_runtime.launch(*fa_hip_runtime.seq_check, {1, 1, 1}, 48, kernel_args, 0, nullptr, 0);
    REQUIRE(err != 0);
    const std::string text = fa_hip_runtime.error_text(err);
    INFO(text);
    CHECK(contains(text, (std::string("fa_hip_seq_check (emulated ") + fa_emu_test::emulated_arch + ")").c_str()));
    CHECK(contains(text, "48 lanes are not whole waves"));
}

// ---- LDS against the limit ----

// A launch under FA_EMU_LDS_LIMIT `limit`: its status, and on failure whether the
// message names `kernel` and the emulator's LDS over-allocation.
struct LimitedLaunch {
    fa_status status;
    bool named;
};

template <class Launch> LimitedLaunch under_lds_limit(size_t limit, const char *kernel, Launch launch)
{
    ScopedEnv env("FA_EMU_LDS_LIMIT", std::to_string(limit));
    EmuContext cx;
    const fa_status st = launch(cx);
    const std::string error = fa_last_error(cx.ctx);
    UNSCOPED_INFO("limit " << limit << ": " << error);
    return {st, contains(error, kernel) && contains(error, "LDS over-allocation")};
}

// Every LDS byte of the kernels comes from the emulator's arena (poisoned, bounded by
// ASan), counted against the limit: the combine's object (attn_combine.h's
// fa_combine_smem, the 8192-byte group segment of the HIP build's fa_hip_combine) and
// a forward's array (the plan's smem_bytes). One byte short of either fails the launch
// with a message naming the kernel; the exact size passes.
TEST_CASE("kernels_lds_is_counted_against_the_limit")
{
    const size_t combine_lds = sizeof(float) * FA_COMBINE_THREADS * 8;
    CHECK(combine_lds == 8192);
    Partials p(FA_DTYPE_F16, 64);
    std::vector<uint16_t> out;
    std::vector<float> lse;
    auto run_combine = [&](const EmuContext &cx) { return combine(cx, p, out, lse); };
    const LimitedLaunch short_combine = under_lds_limit(combine_lds - 1, "fa_hip_combine", run_combine);
    CHECK(short_combine.status != FA_OK);
    CHECK(short_combine.named);
    CHECK(under_lds_limit(combine_lds, "fa_hip_combine", run_combine).status == FA_OK);

    const Case c = odd_gqa_case(1);
    Run r;
    fa_test::prepare(c, r);
    fa_plan plan;
    {
        EmuContext cx;
        REQUIRE(fa_plan_fwd(cx.ctx, &r.q.view, &r.k.view, &r.v.view, &r.params, &plan) == FA_OK);
    }
    INFO(plan.kernel << " smem_bytes " << plan.smem_bytes);
    auto run_forward = [&](const EmuContext &cx) { return forward(cx, r, r.params); };
    const LimitedLaunch short_forward = under_lds_limit((size_t)plan.smem_bytes - 1, plan.kernel, run_forward);
    CHECK(short_forward.status != FA_OK);
    CHECK(short_forward.named);
    REQUIRE(under_lds_limit((size_t)plan.smem_bytes, plan.kernel, run_forward).status == FA_OK);
    check_against_oracle(r, r.params);
}

} // namespace
