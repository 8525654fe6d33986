// test_cpu_backward.cpp - the CPU backend's backward through the public API against the
// fp64 reference gradients: the forward's shape, head-dim, GQA, mask, softcap, ALiBi,
// varlen and stride sweeps; rows that see no key; the determinism and workspace
// contracts. out and lse are what the library's own forward wrote, as in training.
// Tolerance: fp32 a small absolute error; fp16/bf16 3x the error of a naive backward in
// the same precision plus 1e-5 (FlashAttention's rule for gradients), per gradient.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cpu_case.hpp"
#include "flashattn.h"
#include "oracle.hpp"

using namespace fa_oracle;
using namespace fa_test;

namespace {

// The backward's extra tensors: dout (random) and the three poisoned gradients.
struct Grads {
    HostTensor dout, dq, dk, dv;
};

void prepare_grads(const Case &c, Grads &g)
{
    g.dout = operand(c, rows_q(c), c.heads);
    g.dq = operand(c, rows_q(c), c.heads);
    g.dk = operand(c, rows_k(c), c.heads_k);
    g.dv = operand(c, rows_k(c), c.heads_k);
    fill_normal(g.dout, c.seed * 3 + 7);
}

fa_status run_backward(fa_context *ctx, Run &r, Grads &g, void *workspace = nullptr,
                       size_t workspace_bytes = 0)
{
    return fa_bwd(ctx, &r.q.view, &r.k.view, &r.v.view, &r.out.view, &r.lse.view,
                  &g.dout.view, &r.params, &g.dq.view, &g.dk.view, &g.dv.view, workspace,
                  workspace_bytes);
}

bool written_in_view_only(const HostTensor &t)
{
    return all_elements_written(t) && gaps_untouched(t);
}

// Forward, then backward, of a prepared case; every gradient element of the views is
// written, nothing outside them.
void forward_backward(const Case &c, Run &r, Grads &g)
{
    prepare(c, r);
    prepare_grads(c, g);
    forward(c, r);
    Context cx(c.threads);
    fa_status st = run_backward(cx.ctx, r, g);
    INFO(fa_last_error(cx.ctx));
    REQUIRE(st == FA_OK);
    REQUIRE(written_in_view_only(g.dq));
    REQUIRE(written_in_view_only(g.dk));
    REQUIRE(written_in_view_only(g.dv));
}

// Runs the case and checks every gradient element against the reference.
void check_case(const Case &c)
{
    INFO(describe(c));
    Run r;
    Grads g;
    forward_backward(c, r, g);

    GradReference exact = reference_backward(r.q.view, r.k.view, r.v.view, g.dout.view,
                                             r.params, Precision::Exact);
    GradErrors error = grad_errors(g.dq.view, g.dk.view, g.dv.view, exact);
    GradErrors bound{1e-4, 1e-4, 1e-4};
    if (c.dtype != FA_DTYPE_F32) {
        GradReference naive = reference_backward(r.q.view, r.k.view, r.v.view, g.dout.view,
                                                 r.params, Precision::Naive);
        GradErrors naive_error = grad_difference(naive, exact);
        bound = GradErrors{3.0 * naive_error.dq + 1e-5, 3.0 * naive_error.dk + 1e-5,
                           3.0 * naive_error.dv + 1e-5};
    }
    CAPTURE(error.dq, bound.dq, error.dk, bound.dk, error.dv, bound.dv);
    CHECK(error.dq <= bound.dq);
    CHECK(error.dk <= bound.dk);
    CHECK(error.dv <= bound.dv);
}

// Forces the backward tile for one scope and always unsets it afterwards.
struct ForcedBwdTile {
    explicit ForcedBwdTile(const char *tile) { setenv("FLASHATTN_FORCE_BWD_TILE", tile, 1); }
    ~ForcedBwdTile() { unsetenv("FLASHATTN_FORCE_BWD_TILE"); }
};

// Count of elements of a [b, s, h, d] gradient whose (row, head) satisfies `pick` and
// whose value is not exactly 0.
template <class Pick>
int64_t nonzero_where(const HostTensor &t, Pick pick)
{
    int64_t count = 0;
    for (int64_t b = 0; b < t.view.shape[0]; ++b)
        for (int64_t i = 0; i < t.view.shape[1]; ++i)
            for (int64_t h = 0; h < t.view.shape[2]; ++h)
                for (int64_t d = 0; pick(i) && d < t.view.shape[3]; ++d) {
                    int64_t index[4] = {b, i, h, d};
                    count += element(t.view, index) != 0.0;
                }
    return count;
}

} // namespace

TEST_CASE("cpu backward: sequence-length sweep, with and without causal", "[cpu][bwd]")
{
    for (const Case &c : length_sweep(700, 1100))
        check_case(c);
}

TEST_CASE("cpu backward: every head dim class in every dtype", "[cpu][bwd]")
{
    for (const Case &c : head_dim_sweep())
        check_case(c);
}

TEST_CASE("cpu backward: MHA, GQA and MQA sum dk and dv over the group", "[cpu][bwd]")
{
    for (const Case &c : gqa_sweep())
        check_case(c);
}

TEST_CASE("cpu backward: bottom-right causal with s_q > s_k and s_q < s_k", "[cpu][bwd]")
{
    for (const Case &c : causal_sweep())
        check_case(c);
}

TEST_CASE("cpu backward: sliding windows", "[cpu][bwd]")
{
    for (const Case &c : window_sweep())
        check_case(c);
}

TEST_CASE("cpu backward: softcap", "[cpu][bwd]")
{
    for (const Case &c : softcap_sweep())
        check_case(c);
}

TEST_CASE("cpu backward: ALiBi with shared and per-batch slopes", "[cpu][bwd]")
{
    for (const Case &c : alibi_sweep())
        check_case(c);
}

TEST_CASE("cpu backward: varlen with empty sequences and seqused_k", "[cpu][bwd]")
{
    for (const Case &c : varlen_sweep())
        check_case(c);
}

TEST_CASE("cpu backward: non-contiguous outer strides", "[cpu][bwd]")
{
    for (const Case &c : strided_sweep())
        check_case(c);
}

TEST_CASE("cpu backward: rows and keys outside every window get zero gradients", "[cpu][bwd]")
{
    for (fa_dtype dt : kAllDtypes) {
        // Causal with s_q = 300 > s_k = 100: rows 0..199 see no key (LSE -inf).
        Case c;
        c.dtype = dt;
        c.seqlen_q = 300;
        c.seqlen_k = 100;
        c.causal = 1;
        c.seed = 11;
        INFO(describe(c));
        Run r;
        Grads g;
        forward_backward(c, r, g);
        CHECK(nonzero_where(g.dq, [](int64_t i) { return i < 200; }) == 0);
        CHECK(nonzero_where(g.dq, [](int64_t i) { return i >= 200; }) > 0);

        // Window (0, 0) with s_q = 64, s_k = 200: query i sees key i + 136 only, so keys
        // 0..135 are seen by no query.
        Case w = c;
        w.seqlen_q = 64;
        w.seqlen_k = 200;
        w.causal = 0;
        w.window_left = 0;
        w.window_right = 0;
        INFO(describe(w));
        Run rw;
        Grads gw;
        forward_backward(w, rw, gw);
        CHECK(nonzero_where(gw.dk, [](int64_t j) { return j < 136; }) == 0);
        CHECK(nonzero_where(gw.dv, [](int64_t j) { return j < 136; }) == 0);
        CHECK(nonzero_where(gw.dv, [](int64_t j) { return j >= 136; }) > 0);
    }
}

TEST_CASE("cpu backward: every registered tile shape", "[cpu][bwd]")
{
    for (const char *tile : {"64x64", "64x128", "128x128", "128x256"})
        for (fa_dtype dt : {FA_DTYPE_F32, FA_DTYPE_BF16}) {
            ForcedBwdTile force(tile);
            Case c;
            c.dtype = dt;
            c.batch = 2;
            c.seqlen_q = 333;
            c.seqlen_k = 290;
            c.heads = 4;
            c.heads_k = 2;
            c.causal = 1;
            c.window_left = 100;
            c.seed = 5;
            INFO(tile);
            check_case(c);
        }
}

TEST_CASE("cpu backward: deterministic mode gives bitwise identical gradients", "[cpu][bwd]")
{
    Case c;
    c.dtype = FA_DTYPE_BF16;
    c.batch = 2;
    c.seqlen_q = 300;
    c.seqlen_k = 450;
    c.heads = 6;
    c.heads_k = 2;
    c.causal = 1;
    c.threads = 2;
    Run r;
    Grads first;
    forward_backward(c, r, first);
    r.params.deterministic = 1;
    for (int threads : {2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 1, 3}) {
        Context cx(threads);
        Grads again;
        prepare_grads(c, again);
        REQUIRE(run_backward(cx.ctx, r, again) == FA_OK);
        INFO("threads " << threads);
        CHECK(again.dq.storage == first.dq.storage);
        CHECK(again.dk.storage == first.dk.storage);
        CHECK(again.dv.storage == first.dv.storage);
    }
}

TEST_CASE("cpu backward: workspace is O(tile), independent of sequence lengths", "[cpu][bwd]")
{
    Context cx(2);
    fa_params params;
    fa_params_init(&params);
    size_t sizes[3];
    const int64_t lengths[][2] = {{4096, 256}, {65536, 65536}, {1 << 20, 1 << 20}};
    for (int n = 0; n < 3; ++n) {
        // Metadata only: the workspace query must not touch the data.
        static float dummy;
        fa_tensor q = fa_tensor_bshd(&dummy, FA_DTYPE_BF16, 1, lengths[n][0], 8, 128);
        fa_tensor kv = fa_tensor_bshd(&dummy, FA_DTYPE_BF16, 1, lengths[n][1], 8, 128);
        INFO(fa_last_error(cx.ctx));
        REQUIRE(fa_bwd_workspace_size(cx.ctx, &q, &kv, &kv, &params, &sizes[n]) == FA_OK);
    }
    CHECK(sizes[0] == sizes[1]);
    CHECK(sizes[1] == sizes[2]);
    CHECK(sizes[0] < (size_t(8) << 20)); // a few tiles per thread, not s_q x s_k

    Case c;
    c.dtype = FA_DTYPE_F16;
    c.seqlen_q = 200;
    c.seqlen_k = 333;
    c.heads = 4;
    c.heads_k = 2;
    c.dim = 128;
    Run r;
    Grads g;
    prepare(c, r);
    prepare_grads(c, g);
    forward(c, r);
    size_t bytes = 0;
    REQUIRE(fa_bwd_workspace_size(cx.ctx, &r.q.view, &r.k.view, &r.v.view, &r.params, &bytes) ==
            FA_OK);
    std::vector<unsigned char> workspace(bytes);

    SECTION("one byte less is refused and writes nothing")
    {
        CHECK(run_backward(cx.ctx, r, g, workspace.data(), bytes - 1) ==
              FA_ERR_WORKSPACE_TOO_SMALL);
        CHECK(std::string(fa_last_error(cx.ctx)).find("workspace") != std::string::npos);
        Grads untouched;
        prepare_grads(c, untouched);
        CHECK(g.dq.storage == untouched.dq.storage);
        CHECK(g.dk.storage == untouched.dk.storage);
        CHECK(g.dv.storage == untouched.dv.storage);
    }
    SECTION("a caller-provided workspace of that size is used")
    {
        REQUIRE(run_backward(cx.ctx, r, g, workspace.data(), workspace.size()) == FA_OK);
        GradReference exact = reference_backward(r.q.view, r.k.view, r.v.view, g.dout.view,
                                                 r.params, Precision::Exact);
        GradReference naive = reference_backward(r.q.view, r.k.view, r.v.view, g.dout.view,
                                                 r.params, Precision::Naive);
        GradErrors error = grad_errors(g.dq.view, g.dk.view, g.dv.view, exact);
        GradErrors naive_error = grad_difference(naive, exact);
        CHECK(error.dq <= 3.0 * naive_error.dq + 1e-5);
        CHECK(error.dk <= 3.0 * naive_error.dk + 1e-5);
        CHECK(error.dv <= 3.0 * naive_error.dv + 1e-5);
    }
}
