// emu_api_checks.cpp - the emulated device's shared API checks of emu_api_checks.hpp.
#include "emu_api_checks.hpp"

#include <catch2/catch.hpp>

#include <stdlib.h>

namespace fa_emu_test {

using fa_oracle::Precision;
using fa_oracle::Reference;
using fa_test::Case;
using fa_test::Run;

EmuContext::EmuContext()
{
    const fa_status st = fa_create(&ctx, FA_BACKEND_HIP, 0);
    INFO(fa_create_error());
    REQUIRE(st == FA_OK);
}

EmuContext::~EmuContext() { fa_destroy(ctx); }

WaveOrder::WaveOrder(const char *order) : had(getenv("FA_EMU_ORDER") != nullptr)
{
    if (had)
        saved = getenv("FA_EMU_ORDER");
    setenv("FA_EMU_ORDER", order, 1);
}

WaveOrder::~WaveOrder()
{
    if (had)
        setenv("FA_EMU_ORDER", saved.c_str(), 1);
    else
        unsetenv("FA_EMU_ORDER");
}

ScopedEnv::ScopedEnv(const char *n, const std::string &value) : name(n) { setenv(name, value.c_str(), 1); }

ScopedEnv::~ScopedEnv() { unsetenv(name); }

bool contains(const std::string &text, const char *part) { return text.find(part) != std::string::npos; }

fa_status forward(const EmuContext &cx, Run &r, const fa_params &params)
{
    const fa_status st = fa_fwd(cx.ctx, &r.q.view, &r.k.view, &r.v.view, &params, &r.out.view, &r.lse.view,
                                nullptr, 0);
    if (st != FA_OK)
        UNSCOPED_INFO(fa_last_error(cx.ctx)); // for the caller's check of st
    return st;
}

void check_against_oracle(const Run &r, const fa_params &params)
{
    const Reference exact = reference_attention(r.q.view, r.k.view, r.v.view, params, Precision::Exact);
    const Reference naive = reference_attention(r.q.view, r.k.view, r.v.view, params, Precision::Naive);
    const double out_error = max_out_error(r.out.view, exact), lse_error = max_lse_error(r.lse.view, exact);
    const double out_bound = 2.0 * max_out_difference(naive, exact) + 1e-5;
    const double lse_bound = 2.0 * max_lse_difference(naive, exact) + 1e-5;
    CAPTURE(out_error, out_bound, lse_error, lse_bound);
    CHECK(out_error <= out_bound);
    CHECK(lse_error <= lse_bound);
}

fa_status check_forward(const Case &c, int num_splits, fa_plan *plan_out)
{
    INFO(fa_test::describe(c) << " num_splits " << num_splits);
    Run r;
    fa_test::prepare(c, r);
    r.params.num_splits = num_splits;
    EmuContext cx;
    fa_plan plan;
    const bool planned = fa_plan_fwd(cx.ctx, &r.q.view, &r.k.view, &r.v.view, &r.params, &plan) == FA_OK;
    INFO((planned ? std::string(plan.kernel) + " splits " + std::to_string(plan.num_splits) + ": " + plan.reason
                  : "no plan"));
    if (planned) {
        CHECK(std::string(plan.arch) == emulated_arch);
        if (plan_out)
            *plan_out = plan;
    }
    const fa_status st = forward(cx, r, r.params);
    if (st != FA_OK) {
        UNSCOPED_INFO(fa_test::describe(c)); // for the caller's check of st
        return st;
    }
    CHECK(planned);
    REQUIRE(fa_oracle::all_elements_written(r.out));
    REQUIRE(fa_oracle::all_elements_written(r.lse));
    check_against_oracle(r, r.params);
    return FA_OK;
}

void prepare_backward(const Case &c, int deterministic, BackwardRun &b)
{
    fa_test::prepare(c, b.r);
    fa_test::forward(c, b.r);
    b.r.params.deterministic = deterministic;
    const int64_t rows_q = fa_test::rows_q(c), rows_k = fa_test::rows_k(c);
    b.dout = fa_test::operand(c, rows_q, c.heads);
    b.dq = fa_test::operand(c, rows_q, c.heads);
    b.dk = fa_test::operand(c, rows_k, c.heads_k);
    b.dv = fa_test::operand(c, rows_k, c.heads_k);
    fa_oracle::fill_normal(b.dout, c.seed * 3 + 7);
}

fa_status run_backward(const EmuContext &cx, BackwardRun &b)
{
    Run &r = b.r;
    const fa_status st = fa_bwd(cx.ctx, &r.q.view, &r.k.view, &r.v.view, &r.out.view, &r.lse.view, &b.dout.view,
                                &r.params, &b.dq.view, &b.dk.view, &b.dv.view, nullptr, 0);
    if (st != FA_OK)
        UNSCOPED_INFO(fa_last_error(cx.ctx)); // for the caller's check of st
    return st;
}

fa_status check_backward(const Case &c, int deterministic)
{
    INFO(fa_test::describe(c) << " deterministic " << deterministic);
    BackwardRun b;
    prepare_backward(c, deterministic, b);
    const Run &r = b.r;
    EmuContext cx;
    fa_plan plan;
    const bool planned = fa_plan_bwd(cx.ctx, &r.q.view, &r.k.view, &r.v.view, &r.params, &plan) == FA_OK;
    INFO((planned ? std::string(plan.kernel) + ": " + plan.reason : "no plan"));
    const fa_status st = run_backward(cx, b);
    if (st != FA_OK) {
        UNSCOPED_INFO(fa_test::describe(c) << " deterministic " << deterministic); // for the caller's check
        return st;
    }
    REQUIRE(fa_oracle::all_elements_written(b.dq));
    REQUIRE(fa_oracle::all_elements_written(b.dk));
    REQUIRE(fa_oracle::all_elements_written(b.dv));
    const auto exact = reference_backward(r.q.view, r.k.view, r.v.view, b.dout.view, r.params, Precision::Exact);
    const auto naive = reference_backward(r.q.view, r.k.view, r.v.view, b.dout.view, r.params, Precision::Naive);
    const fa_oracle::GradErrors error = grad_errors(b.dq.view, b.dk.view, b.dv.view, exact);
    const fa_oracle::GradErrors slack = grad_difference(naive, exact);
    CAPTURE(error.dq, slack.dq, error.dk, slack.dk, error.dv, slack.dv);
    CHECK(error.dq <= 3.0 * slack.dq + 1e-5);
    CHECK(error.dk <= 3.0 * slack.dk + 1e-5);
    CHECK(error.dv <= 3.0 * slack.dv + 1e-5);
    return FA_OK;
}

} // namespace fa_emu_test
