// test_cuda_warpgroup.cpp - the warpgroup forward family (ws_instances.txt, attn_fwd_ws.h:
// wgmma, TMA, warp specialisation; sm_90a) on an sm_90 device: which family the plan
// names and why (covered head dims, head dims it would pad more than mma.sync, a batch
// stride of 0, which TMA cannot address), head dims below their instance's, and every
// compiled forward tile of both families, forced with FLASHATTN_FORCE_TILE, against the
// fp64 oracle on odd lengths, GQA 6/2, causal both ways and varlen with seqused_k (the V
// tail the kernel zeroes), and masked calls, whose blocks draw their work tiles from a
// counter the call zeroes in its workspace; calls of one key tile, split-KV with one tile
// per split, and windows that leave a warp's first tile all masked. The rest of the GPU
// sweep (test_cuda_forward.cpp) runs on this family already wherever the dispatcher
// picks it. On a device other than sm_90, or a build without sm_90a code, each case
// WARNs and passes (Catch2 2 has no skip). Exits with code 4 without a CUDA device.
#include <catch2/catch.hpp>
#include <cuda_runtime.h>

#include <cstdlib>
#include <string>

#include "forward_check.hpp"
#include "gpu_case.hpp"
#include "graph_capture.hpp"

namespace {

// Each case's first statement: where the warpgroup forward cannot run, the case WARNs
// and ends.
#define SKIP_UNLESS_WARPGROUP_FORWARD()                                                         \
    do {                                                                                        \
        if (!warpgroup_device(FA_PASS_FWD)) {                                                   \
            WARN("not an sm_90 device with sm_90a kernels: the warpgroup family is not run");    \
            return;                                                                             \
        }                                                                                       \
    } while (0)

bool starts(const std::string &s, const char *prefix) { return s.rfind(prefix, 0) == 0; }

Case prefill_case(int head_dim, fa_dtype dtype)
{
    Case c;
    c.batch = 2;
    c.heads = 6;
    c.heads_k = 2;
    c.seqlen_q = 301;
    c.seqlen_k = 517;
    c.head_dim = head_dim;
    c.dtype = dtype;
    return c;
}

// The query and key tile sizes of a warpgroup kernel, from its name
// (fa_cuda_ws_d<head_dim>_<dtype>_<tile_m>x<tile_n>x<stages>).
struct Tile {
    int m, n;
};
Tile tile_of(const std::string &kernel)
{
    const size_t m_at = kernel.rfind('_') + 1, n_at = kernel.find('x', m_at) + 1;
    return {std::stoi(kernel.substr(m_at)), std::stoi(kernel.substr(n_at))};
}

}  // namespace

TEST_CASE("cuda warpgroup: the plan names the family and why", "[cuda][warpgroup]")
{
    SKIP_UNLESS_WARPGROUP_FORWARD();
    for (int d : {64, 128, 192, 256, 56, 120}) {
        const Plan plan = plan_of(prefill_case(d, FA_DTYPE_BF16));
        INFO("d" << d << ": " << plan.kernel << ": " << plan.reason);
        CHECK(starts(plan.kernel, "fa_cuda_ws_"));
        CHECK(plan.reason.find("warpgroup family (wgmma + TMA, sm_90a)") != std::string::npos);
    }
    // Head dims below their instance's, on the persistent instances: O's map ends at the
    // head dim, so its TMA store drops the columns past it.
    uint64_t seed = 5050;
    for (int d : {56, 120}) {
        Case c = prefill_case(d, FA_DTYPE_BF16);
        check_case(c, seed++);
        c.causal = true;
        check_case(c, seed++);
    }
    // d32 and d96 have mma.sync instances of their own: the warpgroup d64 / d128 would pad more.
    for (int d : {32, 96}) {
        const Plan plan = plan_of(prefill_case(d, FA_DTYPE_F16));
        INFO("d" << d << ": " << plan.kernel << ": " << plan.reason);
        CHECK(starts(plan.kernel, "fa_cuda_fwd_"));
        CHECK(plan.reason.find("pads less than the warpgroup family") != std::string::npos);
    }
    // K and V shared by every batch entry (batch stride 0): the backend takes it, a tensor
    // map cannot (its strides are positive), so mma.sync runs it. (Rows that are not whole
    // 16-byte steps apart are refused by the CUDA backend as a whole, before any family.)
    Case shared = prefill_case(128, FA_DTYPE_BF16);
    shared.shared_kv = true;
    const Plan plan = plan_of(shared);
    INFO(plan.kernel << ": " << plan.reason);
    CHECK(starts(plan.kernel, "fa_cuda_fwd_"));
    CHECK(plan.reason.find("not TMA-addressable") != std::string::npos);
    check_case(shared, 5100);
}

TEST_CASE("cuda warpgroup: every compiled forward tile of both families, forced, against the oracle",
          "[cuda][warpgroup]")
{
    SKIP_UNLESS_WARPGROUP_FORWARD();
    int count = 0;
    const fa_kernel_config *reg = fa_registry(FA_BACKEND_CUDA, &count);
    uint64_t seed = 5200;
    int warpgroup_tiles = 0;
    for (int i = 0; i < count; ++i) {
        const fa_kernel_config &k = reg[i];
        if (k.pass != FA_PASS_FWD || k.pack_gqa || !k.compiled)
            continue;
        const std::string tile =
            std::to_string(k.tile_m) + "x" + std::to_string(k.tile_n) + ":" + std::to_string(k.stages);
        REQUIRE(setenv("FLASHATTN_FORCE_TILE", tile.c_str(), 1) == 0);
        Case c = prefill_case(k.head_dim, k.dtype);
        INFO(k.name << " forced as " << tile);
        // A forced tile that both families have at this head dim runs the warpgroup one.
        if (k.warpgroup)
            CHECK(plan_of(c).kernel == k.name);
        check_case(c, seed++);
        c.causal = true;
        c.seqlen_q = 517; // causal with more queries than keys
        c.seqlen_k = 301;
        check_case(c, seed++);
        if (k.warpgroup) {
            // A sequence's last key tile runs into rows that are not its keys: the next
            // sequence's (varlen) or unused ones (seqused_k), which the kernel zeroes in V
            // before P·V.
            Case v = prefill_case(k.head_dim, k.dtype);
            v.cu_q = {0, 77, 77, 301};
            v.cu_k = {0, 200, 333, 517};
            check_case(v, seed++);
            Case u = prefill_case(k.head_dim, k.dtype);
            u.seqused_k = {150, 7};
            u.causal = true;
            u.inf_past_used_keys = true;
            check_case(u, seed++);
            ++warpgroup_tiles;
        }
        unsetenv("FLASHATTN_FORCE_TILE");
    }
    CHECK(warpgroup_tiles >= 8); // four head dims x two dtypes
}

TEST_CASE("cuda warpgroup: more query tiles than SMs, Inf past the used keys", "[cuda][warpgroup]")
{
    SKIP_UNLESS_WARPGROUP_FORWARD();
    // 3 x 16 heads x 6 query tiles of d128 = 288 tiles: a persistent grid of 132 blocks
    // walks two or three each, the ring and the turns running on from one to the next.
    uint64_t seed = 5300;
    for (int d : {64, 128})
        for (bool causal : {false, true}) {
            Case c = prefill_case(d, FA_DTYPE_BF16);
            c.batch = 3;
            c.heads = 16;
            c.heads_k = 4;
            c.seqlen_q = 700;
            c.seqlen_k = 700;
            c.causal = causal;
            check_case(c, seed++);
            c.seqused_k = {700, 333, 1};
            c.inf_past_used_keys = true;
            check_case(c, seed++);
        }
    Case v = prefill_case(128, FA_DTYPE_F16);
    v.cu_q = {0, 400, 400, 1100, 1500};
    v.cu_k = {0, 300, 650, 1300, 1777};
    v.heads = 16;
    v.heads_k = 4;
    check_case(v, seed++);
}

// Masked calls: the persistent blocks draw their work tiles from a counter in the
// workspace, which the call zeroes first. Most cases get a workspace of their own filled
// with 0x7F bytes: a counter left at 0x7F7F7F7F would end every block after its first
// tile, and the rows of the rest would stay poisoned. Each has more work tiles than the
// 132 blocks: causal both ways, short and long, a window, GQA, lengths off the tiles, a
// forced split-KV (its partials in the same 0x7F workspace), and a varlen call with an
// empty sequence.
TEST_CASE("cuda warpgroup: masked calls draw their tiles, from a zeroed counter",
          "[cuda][warpgroup]")
{
    SKIP_UNLESS_WARPGROUP_FORWARD();
    struct Shape {
        int d, seqlen_q, seqlen_k, window_left, fill, splits;
    };
    const Shape shapes[] = {{64, 1100, 1100, -1, 0x7F, 0},
                            {128, 1300, 1100, -1, 0x7F, 0},
                            {128, 1100, 1200, 500, -1, 0},
                            {64, 1500, 333, -1, 0x7F, 0},
                            {128, 700, 3000, -1, 0x7F, 3}};
    uint64_t seed = 5400;
    for (const Shape &sh : shapes) {
        Case c = prefill_case(sh.d, sh.d == 64 ? FA_DTYPE_F16 : FA_DTYPE_BF16);
        c.batch = 2;
        c.heads = 16;
        c.heads_k = 4;
        c.seqlen_q = sh.seqlen_q;
        c.seqlen_k = sh.seqlen_k;
        c.num_splits = sh.splits;
        c.causal = sh.window_left < 0;
        if (!c.causal) {
            c.window_left = sh.window_left;
            c.window_right = 60;
        }
        INFO(describe(c));
        const Plan plan = plan_of(c);
        INFO(plan.reason);
        CHECK(starts(plan.kernel, "fa_cuda_ws_"));
        CHECK(plan.reason.find("persistent blocks drawing their tiles") != std::string::npos);
        check_case(c, seed++, sh.fill);
    }
    Case v = prefill_case(128, FA_DTYPE_BF16);
    v.cu_q = {0, 1300, 1300, 2500};
    v.cu_k = {0, 1500, 1520, 3000};
    v.heads = 16;
    v.heads_k = 16;
    v.causal = true;
    CHECK(plan_of(v).reason.find("persistent blocks drawing their tiles") != std::string::npos);
    check_case(v, seed++, 0x7F);
}

// A walking block meets work tiles without keys (batch entries whose seqused_k is 0)
// among tiles with keys (1 key up to all 1000), single-key tiles among long ones, and
// the V tail past each used count with +Inf beyond it; many tiles per block (16 query
// heads over 4 KV heads, 10 batch entries, 2-3 query tiles each: 320-480 tiles on 132
// blocks), static without a mask and drawn with one. Every tile must be written (the
// outputs start as NaN), the keyless ones as rows that saw no key.
TEST_CASE("cuda warpgroup: walks through tiles without keys write every tile",
          "[cuda][warpgroup]")
{
    SKIP_UNLESS_WARPGROUP_FORWARD();
    uint64_t seed = 5600;
    for (int d : {64, 128})
        for (bool causal : {false, true}) {
            Case c = prefill_case(d, d == 64 ? FA_DTYPE_F16 : FA_DTYPE_BF16);
            c.batch = 10;
            c.heads = 16;
            c.heads_k = 4;
            c.seqlen_q = 333;
            c.seqlen_k = 1000;
            c.causal = causal;
            c.seqused_k = {0, 1000, 1, 0, 65, 0, 0, 999, 128, 0};
            c.inf_past_used_keys = true;
            INFO(describe(c));
            const Plan plan = plan_of(c);
            INFO(plan.kernel << ": " << plan.reason);
            CHECK(starts(plan.kernel, "fa_cuda_ws_"));
            CHECK(plan.reason.find("persistent blocks") != std::string::npos);
            CHECK((plan.reason.find("drawing their tiles") != std::string::npos) == causal);
            check_case(c, seed++);
        }
}

// Calls whose walk is short at the edges of the consumer's loop: one key tile in all (a
// single key, and exactly one tile: the first turn is also the last), split-KV with one
// key tile per split, and windows narrower than a key tile, whose first processed tile is
// all masked for some warps' 16 rows while others see keys in it (and the last tile the
// other way round), off the tiles in both lengths.
TEST_CASE("cuda warpgroup: one key tile, one tile per split, and windows that mask a warp's first tile",
          "[cuda][warpgroup]")
{
    SKIP_UNLESS_WARPGROUP_FORWARD();
    uint64_t seed = 5700;
    for (int d : {64, 128, 192, 256}) {
        const fa_dtype dtype = d % 128 == 0 ? FA_DTYPE_BF16 : FA_DTYPE_F16;
        const int tile_n = tile_of(plan_of(prefill_case(d, dtype)).kernel).n;
        INFO("d" << d << ": key tiles of " << tile_n);
        for (int seqlen_k : {1, tile_n})
            for (bool causal : {false, true}) {
                Case c = prefill_case(d, dtype);
                c.seqlen_k = seqlen_k;
                c.causal = causal;
                INFO(describe(c));
                CHECK(starts(plan_of(c).kernel, "fa_cuda_ws_"));
                check_case(c, seed++);
            }
        Case split = prefill_case(d, dtype);
        split.seqlen_k = 3 * tile_n - 7;
        split.num_splits = 3;
        INFO(describe(split));
        CHECK(starts(plan_of(split).kernel, "fa_cuda_ws_"));
        check_case(split, seed++, 0x7F);
        split.causal = true;
        check_case(split, seed++, 0x7F);
        const int windows[][2] = {{20, 0}, {0, 30}, {3, 5}};
        for (const auto &w : windows) {
            Case c = prefill_case(d, dtype);
            c.seqlen_q = 517;
            c.seqlen_k = 450;
            c.window_left = w[0];
            c.window_right = w[1];
            INFO(describe(c));
            CHECK(starts(plan_of(c).kernel, "fa_cuda_ws_"));
            check_case(c, seed++, 0x7F);
        }
    }
}

// The counter a drawn call leaves: every block draws until its ticket lies past the walk,
// so a call draws exactly one ticket per work tile (its blocks' first tiles are not drawn,
// and each block's last draw is past the walk). A walk that did not draw would leave 0; a
// replay that did not zero it again would start past the walk, end each block after its
// first tile and leave more. Fixed length, one split: the workspace is the counter alone.
TEST_CASE("cuda warpgroup: a drawn walk draws one ticket per work tile, in a replayed graph too",
          "[cuda][warpgroup]")
{
    SKIP_UNLESS_WARPGROUP_FORWARD();
    Case c = prefill_case(128, FA_DTYPE_BF16);
    c.batch = 2;
    c.heads = 16;
    c.heads_k = 4;
    c.seqlen_q = 1300;
    c.seqlen_k = 1100;
    c.causal = true;
    const Plan plan = plan_of(c);
    INFO(plan.kernel << ": " << plan.reason);
    REQUIRE(starts(plan.kernel, "fa_cuda_ws_d128_bf16_"));
    const int tile_m = tile_of(plan.kernel).m;
    const unsigned work_tiles = static_cast<unsigned>((c.seqlen_q + tile_m - 1) / tile_m * c.heads * c.batch);

    GpuProblem p(c, 5500);
    Context ctx;
    Stream stream;
    REQUIRE(fa_set_stream(ctx.ctx, stream.s) == FA_OK);
    size_t bytes = 0;
    REQUIRE(fa_fwd_workspace_size(ctx.ctx, &p.dq->view, &p.dk->view, &p.dv->view, &p.dev_params, &bytes) == FA_OK);
    REQUIRE(bytes == 256);
    DeviceBuffer workspace(bytes);
    const auto tickets = [&]() {
        unsigned drawn = 0;
        REQUIRE(cudaMemcpy(&drawn, workspace.ptr, sizeof drawn, cudaMemcpyDeviceToHost) == cudaSuccess);
        return drawn;
    };
    const auto call = [&]() {
        return fa_fwd(ctx.ctx, &p.dq->view, &p.dk->view, &p.dv->view, &p.dev_params, &p.dout->view, &p.dlse->view,
                      workspace.ptr, bytes);
    };

    REQUIRE(cudaMemset(workspace.ptr, 0x7F, bytes) == cudaSuccess);
    REQUIRE(call() == FA_OK);
    REQUIRE(cudaStreamSynchronize(stream.s) == cudaSuccess);
    CHECK(tickets() == work_tiles);
    const std::vector<unsigned char> first = download(*p.dout);

    Graph g;
    REQUIRE(cudaMemset(workspace.ptr, 0x7F, bytes) == cudaSuccess);
    capture(ctx.ctx, stream.s, g, call);
    for (int replay = 0; replay < 2; ++replay) {
        reset(*p.dout);
        g.replay(stream.s);
        CHECK(tickets() == work_tiles);
        CHECK(same_bytes(download(*p.dout), first));
    }
}
