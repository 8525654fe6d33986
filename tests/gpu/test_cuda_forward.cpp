// test_cuda_forward.cpp - the CUDA forward against the fp64 oracle (tests/oracle.hpp) on
// random normal inputs: every head-dim instance and some in between, odd and unequal
// sequence lengths, GQA, every mask, varlen with empty sequences, split-KV, strides,
// determinism and O(s) memory. The binary exits with code 4 (ctest: skipped) when no
// CUDA device is present.
#include <catch2/catch.hpp>
#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "device_tensors.hpp"
#include "forward_check.hpp"
#include "gpu_case.hpp"
#include "oracle.hpp"

using fa_oracle::HostTensor;
using fa_oracle::Precision;

TEST_CASE("cuda forward: every head dim, fp16 and bf16", "[cuda][sanitize]")
{
    uint64_t seed = 100;
    for (const Case &c : head_dim_sweep({8, 32, 40, 64, 72, 96, 128, 192, 200, 256}))
        check_case(c, seed++);
}

TEST_CASE("cuda forward: sequence lengths, GQA and causal both ways", "[cuda]")
{
    uint64_t seed = 300;
    for (const Case &c : length_sweep({{1, 1}, {1, 239}, {113, 203}, {128, 217}, {256, 512}, {512, 256}, {1023, 1024}}))
        check_case(c, seed++);
}

TEST_CASE("cuda forward: windows, softcap, ALiBi", "[cuda][sanitize]")
{
    uint64_t seed = 500;
    for (fa_dtype dt : kGpuDtypes) {
        Case c;
        c.dtype = dt;
        c.seqlen_q = 300;
        c.seqlen_k = 421;
        c.heads_k = 3;
        c.head_dim = 64;
        Case left = c, right = c, both = c, cap = c, alibi = c, mix = c;
        left.window_left = 37;
        right.window_right = 5;
        both.window_left = 64;
        both.window_right = 64;
        cap.softcap = 30.f;
        alibi.alibi = true;
        mix.causal = true;
        mix.alibi = true;
        mix.softcap = 20.f;
        mix.window_left = 100;
        for (const Case *x : {&left, &right, &both, &cap, &alibi, &mix})
            check_case(*x, seed++);
    }
}

TEST_CASE("cuda forward: fully masked rows give 0 and -inf", "[cuda]")
{
    Case c;
    c.seqlen_q = 250;
    c.seqlen_k = 70; // causal: the first 180 query rows see no key
    c.causal = true;
    c.head_dim = 96;
    check_case(c, 600);
    Case w = c;
    w.causal = false;
    w.seqlen_k = 300;
    w.window_left = 0;
    w.window_right = -1;
    w.seqlen_q = 500; // rows whose diagonal is past the keys on the left edge see none
    check_case(w, 601);
}

TEST_CASE("cuda forward: varlen with empty sequences, seqused_k", "[cuda][sanitize]")
{
    uint64_t seed = 700;
    for (fa_dtype dt : kGpuDtypes)
        for (bool causal : {false, true}) {
            Case c;
            c.dtype = dt;
            c.causal = causal;
            c.head_dim = 128;
            c.heads_k = 2;
            c.cu_q = {0, 50, 50, 177, 400};
            c.cu_k = {0, 80, 95, 95, 350};
            check_case(c, seed++);
        }
    Case u;
    u.batch = 3;
    u.seqlen_q = 100;
    u.seqlen_k = 300;
    u.seqused_k = {300, 17, 0};
    u.causal = true;
    check_case(u, seed++);
    u.inf_past_used_keys = true; // unused cache rows may hold anything
    check_case(u, seed++);
}

TEST_CASE("cuda forward: split-KV forced and chosen for decode", "[cuda][sanitize]")
{
    uint64_t seed = 800;
    for (fa_dtype dt : kGpuDtypes) {
        Case forced;
        forced.dtype = dt;
        forced.seqlen_q = 77;
        forced.seqlen_k = 1500;
        forced.num_splits = 3;
        forced.causal = true;
        check_case(forced, seed++);
        Case decode;
        decode.dtype = dt;
        decode.heads = 8;
        decode.heads_k = 1;
        decode.seqlen_q = 1;
        decode.seqlen_k = 4099;
        decode.head_dim = 128;
        check_case(decode, seed++);
    }
}

TEST_CASE("cuda forward: more than 65535 sequences, and batch x splits past 65535 (folded grids)", "[cuda]")
{
    uint64_t seed = 850;
    for (bool causal : {false, true}) {
        Case c = many_sequences(70001);
        c.causal = causal;
        check_case(c, seed++);
    }
    Case fixed; // fixed-length: 66000 sequences of 5 rows
    fixed.batch = 66000;
    fixed.seqlen_q = fixed.seqlen_k = 5;
    fixed.heads = fixed.heads_k = 1;
    fixed.head_dim = 32;
    check_case(fixed, seed++);
    Case split; // 520 sequences x 128 forced splits: 66560 (batch, split) pairs, then the combine
    split.batch = 520;
    split.seqlen_q = 1;
    split.seqlen_k = 128 * 128 + 5;
    split.heads = split.heads_k = 1;
    split.head_dim = 32;
    split.num_splits = 128;
    check_case(split, seed++);
}

TEST_CASE("cuda plan: decode-like problems split the keys", "[cuda]")
{
    Context ctx;
    fa_tensor q = fa_tensor_bshd(reinterpret_cast<void *>(256), FA_DTYPE_BF16, 1, 1, 8, 128);
    fa_tensor k = fa_tensor_bshd(reinterpret_cast<void *>(256), FA_DTYPE_BF16, 1, 32768, 1, 128);
    fa_params p;
    fa_params_init(&p);
    fa_plan plan;
    REQUIRE(fa_plan_fwd(ctx.ctx, &q, &k, &k, &p, &plan) == FA_OK);
    INFO(plan.kernel << ": " << plan.reason);
    CHECK(plan.num_splits > 1);
    CHECK(plan.workspace_bytes > 0);
}

TEST_CASE("cuda forward: strided (packed) inputs and long sequences", "[cuda]")
{
    Case packed;
    packed.seqlen_q = 333;
    packed.seqlen_k = 517;
    packed.row_padding = 2 * 6 * 64; // rows of a packed [s, 3, h, d] qkv buffer
    packed.batch = 2;
    check_case(packed, 900);
    Case longer;
    longer.seqlen_q = 8192;
    longer.seqlen_k = 8192;
    longer.heads = 1;
    longer.heads_k = 1;
    longer.head_dim = 64;
    longer.causal = true;
    longer.dtype = FA_DTYPE_F16;
    check_case(longer, 901);
}

TEST_CASE("cuda forward: ten runs are bitwise identical", "[cuda]")
{
    const int b = 2, s = 777, h = 4, d = 128;
    HostTensor q = fa_oracle::make_tensor(FA_DTYPE_BF16, {b, s, h, d});
    fa_oracle::fill_normal(q, 42);
    DeviceTensor dq(q);
    HostTensor out = fa_oracle::make_tensor(FA_DTYPE_BF16, {b, s, h, d});
    HostTensor lse = fa_oracle::make_tensor(FA_DTYPE_F32, {b, h, s});
    fa_params p;
    fa_params_init(&p);
    p.causal = 1;
    p.num_splits = 2;
    Context ctx;
    std::vector<unsigned char> first_out, first_lse;
    for (int run = 0; run < 10; ++run) {
        fa_oracle::poison(out);
        fa_oracle::poison(lse);
        DeviceTensor dout(out), dlse(lse);
        REQUIRE(fa_fwd(ctx.ctx, &dq.view, &dq.view, &dq.view, &p, &dout.view, &dlse.view, nullptr, 0) == FA_OK);
        dout.copy_back();
        dlse.copy_back();
        if (run == 0) {
            first_out = out.storage;
            first_lse = lse.storage;
        } else {
            CHECK(out.storage == first_out);
            CHECK(lse.storage == first_lse);
        }
    }
}

TEST_CASE("cuda forward: extra device memory is O(s) at 32k and 128k", "[cuda]")
{
    Context ctx;
    for (int64_t s : {int64_t(32768), int64_t(131072)}) {
        const int d = 128;
        fa_tensor probe = fa_tensor_bshd(reinterpret_cast<void *>(256), FA_DTYPE_BF16, 1, s, 1, d);
        fa_params p;
        fa_params_init(&p);
        p.causal = 1;
        size_t workspace = 0;
        REQUIRE(fa_fwd_workspace_size(ctx.ctx, &probe, &probe, &probe, &p, &workspace) == FA_OK);
        // Linear in s: at most a few fp32 rows of head_dim per query row.
        CHECK(workspace <= static_cast<size_t>(s) * d * 4 * 8);

        HostTensor q = fa_oracle::make_tensor(FA_DTYPE_BF16, {1, s, 1, d});
        fa_oracle::fill_normal(q, 7 + s);
        HostTensor out = fa_oracle::make_tensor(FA_DTYPE_BF16, {1, s, 1, d});
        DeviceTensor dq(q), dout(out);
        REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
        size_t free_before = 0, free_after = 0, total = 0;
        cudaMemGetInfo(&free_before, &total);
        REQUIRE(fa_fwd(ctx.ctx, &dq.view, &dq.view, &dq.view, &p, &dout.view, nullptr, nullptr, 0) == FA_OK);
        REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
        cudaMemGetInfo(&free_after, &total);
        // Anything the call kept must be far below one s x s score matrix (2 * s^2 bytes).
        size_t kept = free_before > free_after ? free_before - free_after : 0;
        CHECK(kept <= static_cast<size_t>(s) * d * 4 * 8 + (64u << 20));
        dout.copy_back();
        CHECK(fa_oracle::all_elements_written(out));
    }
}
