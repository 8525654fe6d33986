// test_cuda_decode.cpp - the CUDA decode family (dec_instances.txt: packed GQA tiles,
// split-KV by makespan) against the fp64 oracle: every GQA ratio from 1 to 32 and MQA,
// s_q from 1 to 16 with bottom-right causal, head dims off the instances, windows,
// softcap, per-head ALiBi, seqused_k, varlen, forced splits, every compiled decode tile
// (forced), and the plan that names it.
// Sizes are not tile multiples. Exits with code 4 (ctest: skipped) without a CUDA device.
#include <catch2/catch.hpp>
#include <cuda_runtime.h>

#include <cstdlib>
#include <string>

#include "forward_check.hpp"
#include "gpu_case.hpp"
#include "select/registry.h"

namespace {

Case decode_case(int heads, int heads_k, int s_q, int s_k, int head_dim)
{
    Case c;
    c.batch = 2;
    c.heads = heads;
    c.heads_k = heads_k;
    c.seqlen_q = s_q;
    c.seqlen_k = s_k;
    c.head_dim = head_dim;
    return c;
}

std::string plan_kernel(const Case &c) { return plan_of(c).kernel; }

}  // namespace

TEST_CASE("cuda decode: every GQA ratio and MQA, s_q 1 to 16, causal bottom-right", "[cuda][decode][sanitize]")
{
    uint64_t seed = 2000;
    const int groups[][2] = {{2, 2}, {4, 2}, {8, 2}, {12, 3}, {16, 2}, {32, 1}, {64, 2}};
    for (const auto &g : groups)
        for (int s_q : {1, 3, 16}) {
            Case c = decode_case(g[0], g[1], s_q, 1000 + s_q, 128);
            c.dtype = kGpuDtypes[seed % 2];
            c.causal = s_q > 1 && seed % 3 != 0;
            check_case(c, seed++);
        }
}

TEST_CASE("cuda decode: head dims on and off the instances", "[cuda][decode]")
{
    uint64_t seed = 2100;
    for (int d : {8, 32, 40, 64, 72, 96, 128, 160, 192, 256})
        for (fa_dtype dt : kGpuDtypes) {
            Case c = decode_case(8, 2, 2, 333, d);
            c.dtype = dt;
            c.causal = true;
            check_case(c, seed++);
        }
}

TEST_CASE("cuda decode: windows, softcap and per-head ALiBi on packed rows", "[cuda][decode][sanitize]")
{
    uint64_t seed = 2200;
    Case base = decode_case(16, 4, 5, 777, 64);
    Case left = base, right = base, cap = base, alibi = base, mix = base;
    left.window_left = 100;
    right.window_right = 2;
    right.window_left = 50;
    cap.softcap = 25.f;
    alibi.alibi = true;
    mix.causal = true;
    mix.alibi = true;
    mix.softcap = 15.f;
    mix.window_left = 64;
    for (const Case *x : {&left, &right, &cap, &alibi, &mix})
        for (fa_dtype dt : kGpuDtypes) {
            Case c = *x;
            c.dtype = dt;
            check_case(c, seed++);
        }
}

TEST_CASE("cuda decode: seqused_k, varlen with empty sequences, forced splits", "[cuda][decode][sanitize]")
{
    uint64_t seed = 2300;
    Case used = decode_case(8, 2, 1, 2000, 128);
    used.batch = 4;
    used.seqused_k = {2000, 17, 0, 1025};
    check_case(used, seed++);
    for (bool causal : {false, true}) {
        Case v = decode_case(8, 2, 1, 1, 128);
        v.causal = causal;
        v.cu_q = {0, 1, 5, 5, 9, 10};
        v.cu_k = {0, 300, 300, 301, 1900, 1990};
        check_case(v, seed++);
    }
    for (int splits : {1, 3, 7, 12, 64}) {
        Case f = decode_case(32, 8, 4, 1500, 128);
        f.num_splits = splits;
        f.causal = true;
        check_case(f, seed++);
    }
}

TEST_CASE("cuda plan: decode shapes take the decode family, prefill shapes the prefill one", "[cuda][decode]")
{
    CHECK(plan_kernel(decode_case(32, 8, 1, 8192, 128)).rfind("fa_cuda_dec_d128_bf16_16x", 0) == 0);
    // MQA's 32 packed rows: one 32-row tile per KV head on a grid that fills the machine;
    // a small batch may run two 16-row blocks with fewer splits instead (dispatch.c's
    // combine rounds; measured b 1 x 8192: 10.4 against 10.9 us, bench/NOTES.md dec6).
    Case mqa = decode_case(32, 1, 1, 8192, 128);
    mqa.batch = 16;
    CHECK(plan_kernel(mqa).rfind("fa_cuda_dec_d128_bf16_32x", 0) == 0);
    CHECK(plan_kernel(decode_case(32, 1, 1, 8192, 128)).rfind("fa_cuda_dec_d128_bf16_", 0) == 0);
    // A prefill shape: the warpgroup family where this build and device have it (sm_90,
    // sm_90a code), else the mma.sync one; never the decode family.
    const std::string prefill = plan_kernel(decode_case(32, 8, 128, 8192, 128));
    CHECK((prefill.rfind("fa_cuda_fwd_", 0) == 0 || prefill.rfind("fa_cuda_ws_", 0) == 0));
}

TEST_CASE("cuda decode: every compiled decode tile, forced, against the oracle", "[cuda][decode]")
{
    // The ranking picks one tile per head dim on this device; forcing each one
    // (FLASHATTN_FORCE_TILE) runs the others too: key-splitting warps of 2 and 4, 16- and
    // 64-row tiles, every head dim, both dtypes.
    int count = 0;
    const fa_kernel_config *reg = fa_registry(FA_BACKEND_CUDA, &count);
    uint64_t seed = 2400;
    int ran = 0;
    for (int i = 0; i < count; ++i) {
        const fa_kernel_config &c = reg[i];
        if (!c.pack_gqa || !c.compiled)
            continue;
        const std::string tile =
            std::to_string(c.tile_m) + "x" + std::to_string(c.tile_n) + ":" + std::to_string(c.stages);
        Case dc = decode_case(8, 2, 3, 777, c.head_dim);
        dc.dtype = c.dtype;
        dc.causal = true;
        REQUIRE(setenv("FLASHATTN_FORCE_TILE", tile.c_str(), 1) == 0);
        INFO(c.name << " forced as " << tile);
        CHECK(plan_kernel(dc) == c.name);
        check_case(dc, seed++);
        unsetenv("FLASHATTN_FORCE_TILE");
        ++ran;
    }
    CHECK(ran >= 20);
}
