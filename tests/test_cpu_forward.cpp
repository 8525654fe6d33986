// test_cpu_forward.cpp - the CPU backend's forward through the public API against the
// fp64 oracle: sequence-length, head-dim, GQA, mask, softcap, ALiBi, varlen, stride and
// dtype sweeps, plus the workspace and threading contracts.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "cpu_case.hpp"
#include "flashattn.h"
#include "oracle.hpp"

using namespace fa_oracle;
using namespace fa_test;

namespace {

// Runs the case and checks every written element against the oracle.
void check_case(const Case &c)
{
    INFO(describe(c));
    Run r;
    prepare(c, r);
    forward(c, r);
    REQUIRE(all_elements_written(r.out));
    REQUIRE(all_elements_written(r.lse));
    REQUIRE(gaps_untouched(r.out));
    REQUIRE(gaps_untouched(r.lse));

    Reference exact = reference_attention(r.q.view, r.k.view, r.v.view, r.params, Precision::Exact);
    double out_error = max_out_error(r.out.view, exact);
    double lse_error = max_lse_error(r.lse.view, exact);
    double out_bound = 1e-4, lse_bound = 1e-4;
    if (c.dtype != FA_DTYPE_F32) {
        Reference naive =
            reference_attention(r.q.view, r.k.view, r.v.view, r.params, Precision::Naive);
        out_bound = 2.0 * max_out_difference(naive, exact) + 1e-5;
        lse_bound = 2.0 * max_lse_difference(naive, exact) + 1e-5;
    }
    CAPTURE(out_error, out_bound, lse_error, lse_bound);
    CHECK(out_error <= out_bound);
    CHECK(lse_error <= lse_bound);
}

}  // namespace

TEST_CASE("cpu forward: sequence-length sweep, with and without causal", "[cpu][fwd]")
{
    for (const Case &c : length_sweep(1023, 1024))
        check_case(c);
}

TEST_CASE("cpu forward: every head dim class in every dtype", "[cpu][fwd]")
{
    for (const Case &c : head_dim_sweep())
        check_case(c);
}

TEST_CASE("cpu forward: MHA, GQA and MQA", "[cpu][fwd]")
{
    for (const Case &c : gqa_sweep())
        check_case(c);
}

TEST_CASE("cpu forward: bottom-right causal with s_q > s_k and s_q < s_k", "[cpu][fwd]")
{
    for (const Case &c : causal_sweep())
        check_case(c);
}

TEST_CASE("cpu forward: sliding windows", "[cpu][fwd]")
{
    for (const Case &c : window_sweep())
        check_case(c);
}

TEST_CASE("cpu forward: softcap", "[cpu][fwd]")
{
    for (const Case &c : softcap_sweep())
        check_case(c);
}

TEST_CASE("cpu forward: ALiBi with shared and per-batch slopes", "[cpu][fwd]")
{
    for (const Case &c : alibi_sweep())
        check_case(c);
}

TEST_CASE("cpu forward: varlen with empty sequences and seqused_k", "[cpu][fwd]")
{
    for (const Case &c : varlen_sweep())
        check_case(c);
}

TEST_CASE("cpu forward: non-contiguous outer strides", "[cpu][fwd]")
{
    for (const Case &c : strided_sweep())
        check_case(c);
}

TEST_CASE("cpu forward: rows with no visible key are 0 with LSE -inf", "[cpu][fwd]")
{
    for (fa_dtype dt : kAllDtypes) {
        Case c;
        c.dtype = dt;
        c.seqlen_q = 300;
        c.seqlen_k = 100;
        c.causal = 1;
        Run r;
        prepare(c, r);
        forward(c, r);
        // Row i sees keys j <= i - 200: rows 0..199 see nothing.
        int64_t wrong_lse = 0, nonzero_out = 0;
        for (int64_t i = 0; i < 300; ++i)
            for (int h = 0; h < c.heads; ++h) {
                int64_t lse_index[3] = {0, h, i};
                double lse = element(r.lse.view, lse_index);
                bool empty = i < 200;
                wrong_lse += empty ? !(std::isinf(lse) && lse < 0) : !std::isfinite(lse);
                for (int d = 0; empty && d < c.dim; ++d) {
                    int64_t out_index[4] = {0, i, h, d};
                    nonzero_out += element(r.out.view, out_index) != 0.0;
                }
            }
        INFO(fa_dtype_name(dt));
        CHECK(wrong_lse == 0);
        CHECK(nonzero_out == 0);
    }
}

TEST_CASE("cpu forward: decode against a long cache, one and many threads", "[cpu][fwd]")
{
    for (int threads : {1, 2, 3}) {
        Case c;
        c.dtype = FA_DTYPE_BF16;
        c.batch = 3;
        c.seqlen_q = 1;
        c.seqlen_k = 4096;
        c.heads = 8;
        c.heads_k = 2;
        c.dim = 128;
        c.threads = threads;
        check_case(c);
    }
}

TEST_CASE("cpu forward: results do not depend on the thread count", "[cpu][fwd]")
{
    Case c;
    c.dtype = FA_DTYPE_F16;
    c.batch = 2;
    c.seqlen_q = 300;
    c.seqlen_k = 700;
    c.heads = 4;
    c.heads_k = 2;
    c.causal = 1;
    c.threads = 1;
    Run one;
    prepare(c, one);
    forward(c, one);
    c.threads = 2;
    Run two;
    prepare(c, two);
    forward(c, two);
    CHECK(one.out.storage == two.out.storage);
    CHECK(one.lse.storage == two.lse.storage);
}

TEST_CASE("cpu forward: workspace is O(tile), independent of sequence lengths", "[cpu][fwd]")
{
    Context cx(2);
    fa_params params;
    fa_params_init(&params);
    size_t sizes[3];
    // Same s_q (the tile choice may depend on it), s_k from 256 to 2^20.
    const int64_t lengths[][2] = {{4096, 256}, {4096, 65536}, {4096, 1 << 20}};
    for (int n = 0; n < 3; ++n) {
        // Metadata only: the workspace query must not touch the data.
        static float dummy;
        fa_tensor q = fa_tensor_bshd(&dummy, FA_DTYPE_BF16, 1, lengths[n][0], 8, 128);
        fa_tensor kv = fa_tensor_bshd(&dummy, FA_DTYPE_BF16, 1, lengths[n][1], 8, 128);
        INFO(fa_last_error(cx.ctx));
        REQUIRE(fa_fwd_workspace_size(cx.ctx, &q, &kv, &kv, &params, &sizes[n]) == FA_OK);
    }
    CHECK(sizes[0] == sizes[1]);
    CHECK(sizes[1] == sizes[2]);
    CHECK(sizes[0] < (size_t(8) << 20)); // a few tiles per thread, not s_q x s_k

    SECTION("a caller-provided workspace of that size is used")
    {
        Case c;
        c.dtype = FA_DTYPE_BF16;
        c.seqlen_q = 200;
        c.seqlen_k = 333;
        c.dim = 128;
        c.heads = 8;
        Run r;
        prepare(c, r);
        size_t bytes = 0;
        REQUIRE(fa_fwd_workspace_size(cx.ctx, &r.q.view, &r.k.view, &r.v.view, &r.params,
                                      &bytes) == FA_OK);
        std::vector<unsigned char> workspace(bytes);
        REQUIRE(fa_fwd(cx.ctx, &r.q.view, &r.k.view, &r.v.view, &r.params, &r.out.view,
                       &r.lse.view, workspace.data(), workspace.size()) == FA_OK);
        Reference exact = reference_attention(r.q.view, r.k.view, r.v.view, r.params, Precision::Exact);
        Reference naive = reference_attention(r.q.view, r.k.view, r.v.view, r.params, Precision::Naive);
        CHECK(max_out_error(r.out.view, exact) <= 2.0 * max_out_difference(naive, exact) + 1e-5);
    }
}
