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

// workspace_fill >= 0: the call gets a workspace of its own, every byte set to that
// value first (what it must not count on); else the library allocates it.
inline Outcome run_case(const Case &c, uint64_t seed, int workspace_fill = -1)
{
    GpuProblem p(c, seed);
    Context ctx;
    size_t bytes = 0;
    void *workspace = nullptr;
    if (workspace_fill >= 0) {
        REQUIRE(fa_fwd_workspace_size(ctx.ctx, &p.dq->view, &p.dk->view, &p.dv->view, &p.dev_params, &bytes) ==
                FA_OK);
        REQUIRE(cudaMalloc(&workspace, bytes ? bytes : 1) == cudaSuccess);
        REQUIRE(cudaMemset(workspace, workspace_fill, bytes) == cudaSuccess);
    }
    fa_status st = fa_fwd(ctx.ctx, &p.dq->view, &p.dk->view, &p.dv->view, &p.dev_params, &p.dout->view,
                          &p.dlse->view, workspace, bytes);
    INFO("fa_fwd: " << fa_status_string(st) << ": " << fa_last_error(ctx.ctx));
    const cudaError_t synced = cudaDeviceSynchronize();
    if (workspace)
        cudaFree(workspace);
    REQUIRE(st == FA_OK);
    REQUIRE(synced == cudaSuccess);
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

inline void check_case(const Case &c, uint64_t seed, int workspace_fill = -1)
{
    Outcome o = run_case(c, seed, workspace_fill);
    INFO(describe(c));
    INFO("out error " << o.out_error << " (bound " << o.out_bound << "), lse error " << o.lse_error
                      << " (bound " << o.lse_bound << ")");
    CHECK(o.out_error <= o.out_bound);
    CHECK(o.lse_error <= o.lse_bound);
}
