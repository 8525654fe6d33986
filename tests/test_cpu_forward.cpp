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

const fa_dtype kAllDtypes[] = {FA_DTYPE_F32, FA_DTYPE_F16, FA_DTYPE_BF16};

}  // namespace

TEST_CASE("cpu forward: sequence-length sweep, with and without causal", "[cpu][fwd]")
{
    const int64_t lengths[][2] = {{1, 1},     {1, 239},   {113, 203},  {128, 217},
                                  {256, 512}, {512, 256}, {1023, 1024}};
    for (const auto &len : lengths)
        for (int causal = 0; causal <= 1; ++causal)
            for (fa_dtype dt : {FA_DTYPE_F32, FA_DTYPE_BF16}) {
                Case c;
                c.dtype = dt;
                c.seqlen_q = len[0];
                c.seqlen_k = len[1];
                c.heads = 2;
                c.heads_k = 1;
                c.causal = causal;
                c.seed = static_cast<uint64_t>(len[0] * 7 + len[1] + causal);
                check_case(c);
            }
}

TEST_CASE("cpu forward: every head dim class in every dtype", "[cpu][fwd]")
{
    for (int dim : {8, 40, 64, 96, 128, 200, 256})
        for (fa_dtype dt : kAllDtypes) {
            Case c;
            c.dtype = dt;
            c.seqlen_q = 113;
            c.seqlen_k = 203;
            c.heads = 6;
            c.heads_k = 2;
            c.dim = dim;
            c.causal = dim % 16 == 0;
            c.seed = static_cast<uint64_t>(dim);
            check_case(c);
        }
}

TEST_CASE("cpu forward: MHA, GQA and MQA", "[cpu][fwd]")
{
    for (int heads_k : {6, 2, 1})
        for (fa_dtype dt : {FA_DTYPE_F16, FA_DTYPE_BF16}) {
            Case c;
            c.dtype = dt;
            c.seqlen_q = 128;
            c.seqlen_k = 217;
            c.heads = 6;
            c.heads_k = heads_k;
            c.causal = 1;
            c.seed = static_cast<uint64_t>(heads_k) + 40;
            check_case(c);
        }
}

TEST_CASE("cpu forward: bottom-right causal with s_q > s_k and s_q < s_k", "[cpu][fwd]")
{
    const int64_t lengths[][2] = {{256, 128}, {128, 256}, {239, 1}, {200, 17}, {70, 300}};
    for (const auto &len : lengths)
        for (fa_dtype dt : kAllDtypes) {
            Case c;
            c.dtype = dt;
            c.seqlen_q = len[0];
            c.seqlen_k = len[1];
            c.batch = 2;
            c.causal = 1;
            c.seed = static_cast<uint64_t>(len[0] + len[1]);
            check_case(c);
        }
}

TEST_CASE("cpu forward: sliding windows", "[cpu][fwd]")
{
    const int windows[][3] = {// left, right, causal
                              {32, -1, 0}, {-1, 16, 0}, {20, 7, 0}, {48, -1, 1}, {0, 0, 0}};
    const int64_t lengths[][2] = {{256, 512}, {512, 256}};
    for (const auto &w : windows)
        for (const auto &len : lengths)
            for (fa_dtype dt : {FA_DTYPE_F32, FA_DTYPE_F16}) {
                Case c;
                c.dtype = dt;
                c.seqlen_q = len[0];
                c.seqlen_k = len[1];
                c.window_left = w[0];
                c.window_right = w[1];
                c.causal = w[2];
                c.heads = 2;
                c.heads_k = 1;
                c.seed = static_cast<uint64_t>(w[0] * 3 + w[1] + len[0]);
                check_case(c);
            }
}

TEST_CASE("cpu forward: softcap", "[cpu][fwd]")
{
    for (float cap : {30.0f, 2.0f})
        for (int causal = 0; causal <= 1; ++causal)
            for (fa_dtype dt : kAllDtypes) {
                Case c;
                c.dtype = dt;
                c.seqlen_q = 150;
                c.seqlen_k = 300;
                c.softcap = cap;
                c.causal = causal;
                c.seed = static_cast<uint64_t>(cap) + causal;
                check_case(c);
            }
}

TEST_CASE("cpu forward: ALiBi with shared and per-batch slopes", "[cpu][fwd]")
{
    for (Alibi alibi : {Alibi::Shared, Alibi::PerBatch})
        for (int causal = 0; causal <= 1; ++causal)
            for (fa_dtype dt : {FA_DTYPE_F32, FA_DTYPE_BF16}) {
                Case c;
                c.dtype = dt;
                c.batch = 2;
                c.seqlen_q = 97;
                c.seqlen_k = 301;
                c.heads = 4;
                c.heads_k = 2;
                c.alibi = alibi;
                c.causal = causal;
                c.softcap = causal ? 20.0f : 0.0f;
                c.seed = static_cast<uint64_t>(alibi) * 2 + causal;
                check_case(c);
            }
}

TEST_CASE("cpu forward: varlen with empty sequences and seqused_k", "[cpu][fwd]")
{
    // (q, k) lengths: (37, 64), (0, 36), (113, 0), (1, 300), (0, 0), (200, 90)
    const std::vector<int32_t> cu_q{0, 37, 37, 150, 151, 151, 351};
    const std::vector<int32_t> cu_k{0, 64, 100, 100, 400, 400, 490};
    for (int used = 0; used <= 1; ++used)
        for (int causal = 0; causal <= 1; ++causal)
            for (fa_dtype dt : kAllDtypes) {
                Case c;
                c.dtype = dt;
                c.cu_q = cu_q;
                c.cu_k = cu_k;
                c.seqlen_q = 200;
                c.seqlen_k = 300;
                c.heads = 4;
                c.heads_k = 2;
                c.causal = causal;
                if (used)
                    c.seqused_k = {50, 10, 0, 299, 0, 90};
                c.seed = static_cast<uint64_t>(used * 2 + causal) + 90;
                check_case(c);
            }
}

TEST_CASE("cpu forward: non-contiguous outer strides", "[cpu][fwd]")
{
    for (int varlen = 0; varlen <= 1; ++varlen)
        for (fa_dtype dt : kAllDtypes) {
            Case c;
            c.dtype = dt;
            c.strided = true;
            c.batch = 2;
            c.seqlen_q = 131;
            c.seqlen_k = 259;
            c.heads = 3;
            c.heads_k = 1;
            c.dim = 72;
            c.causal = 1;
            if (varlen) {
                c.cu_q = {0, 131, 200};
                c.cu_k = {0, 259, 300};
            }
            c.seed = static_cast<uint64_t>(varlen) + 70;
            check_case(c);
        }
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
