// forward_check.hpp - one GPU forward case against the fp64 oracle, shared by the forward
// test files: run it on random normal inputs with poisoned outputs, then require every
// element written, the gaps untouched, and out / LSE within twice the naive-precision
// reference's distance from the exact one.
#pragma once

#include <catch2/catch.hpp>
#include <cuda_runtime.h>

#include "device_tensors.hpp"
#include "gpu_case.hpp"
#include "oracle.hpp"

struct Outcome {
    double out_error, out_bound, lse_error, lse_bound;
};

inline Outcome run_case(const Case &c, uint64_t seed)
{
    GpuProblem p(c, seed);
    Context ctx;
    fa_status st = fa_fwd(ctx.ctx, &p.dq->view, &p.dk->view, &p.dv->view, &p.dev_params, &p.dout->view,
                          &p.dlse->view, nullptr, 0);
    INFO("fa_fwd: " << fa_status_string(st) << ": " << fa_last_error(ctx.ctx));
    REQUIRE(st == FA_OK);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    p.dout->copy_back();
    p.dlse->copy_back();

    CHECK(fa_oracle::all_elements_written(p.out));
    CHECK(fa_oracle::all_elements_written(p.lse));
    CHECK(fa_oracle::gaps_untouched(p.out));
    fa_oracle::Reference exact = fa_oracle::reference_attention(p.q.view, p.k.view, p.v.view, p.host_params,
                                                                fa_oracle::Precision::Exact);
    fa_oracle::Reference naive = fa_oracle::reference_attention(p.q.view, p.k.view, p.v.view, p.host_params,
                                                                fa_oracle::Precision::Naive);
    Outcome o;
    o.out_error = fa_oracle::max_out_error(p.out.view, exact);
    o.out_bound = 2.0 * fa_oracle::max_out_difference(naive, exact) + 1e-5;
    o.lse_error = fa_oracle::max_lse_error(p.lse.view, exact);
    o.lse_bound = 2.0 * fa_oracle::max_lse_difference(naive, exact) + 1e-5;
    return o;
}

// The kernel fa_plan_fwd names for a case, and its reason.
struct Plan {
    std::string kernel, reason;
};

inline Plan plan_of(const Case &c)
{
    GpuProblem p(c, 1);
    Context ctx;
    fa_plan plan;
    REQUIRE(fa_plan_fwd(ctx.ctx, &p.dq->view, &p.dk->view, &p.dv->view, &p.dev_params, &plan) == FA_OK);
    INFO(plan.reason);
    return {plan.kernel, plan.reason};
}

inline void check_case(const Case &c, uint64_t seed)
{
    Outcome o = run_case(c, seed);
    INFO(describe(c));
    INFO("out error " << o.out_error << " (bound " << o.out_bound << "), lse error " << o.lse_error
                      << " (bound " << o.lse_bound << ")");
    CHECK(o.out_error <= o.out_bound);
    CHECK(o.lse_error <= o.lse_bound);
}
