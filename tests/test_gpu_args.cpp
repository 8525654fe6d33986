// test_gpu_args.cpp - the host logic both GPU backends share (src/common/gpu_args.c):
// launch geometry, the pre-launch checks and the backward workspace layout, exercised on
// the CPU.
#include <catch2/catch.hpp>

#include <cstring>
#include <string>

#include "fa_internal.h"
#include "gpu_args.h"

namespace {

fa_problem aligned_problem()
{
    static unsigned char storage[64] __attribute__((aligned(16)));
    fa_problem p;
    std::memset(&p, 0, sizeof p);
    p.batch = 2;
    p.heads = 6;
    p.heads_k = 2;
    p.head_dim = 64;
    p.seqlen_q = 300;
    p.seqlen_k = 130;
    p.total_q = 600;
    p.q = p.k = p.v = p.dout = storage;
    p.out = p.dq = p.dk = p.dv = storage;
    fa_strides st = {300 * 6 * 64, 6 * 64, 64};
    p.q_stride = p.out_stride = p.dout_stride = p.dq_stride = st;
    fa_strides kst = {130 * 2 * 64, 2 * 64, 64};
    p.k_stride = p.v_stride = p.dk_stride = p.dv_stride = kst;
    return p;
}

struct CpuContext {
    fa_context *ctx = nullptr;
    CpuContext() { REQUIRE(fa_create(&ctx, FA_BACKEND_CPU, 0) == FA_OK); }
    ~CpuContext() { fa_destroy(ctx); }
};

}  // namespace

TEST_CASE("gpu launch geometry covers every tile, head, batch and split", "[gpu_args]")
{
    fa_problem p = aligned_problem();
    fa_kernel_config cfg;
    std::memset(&cfg, 0, sizeof cfg);
    cfg.tile_m = 128;
    cfg.tile_n = 64;
    fa_selection sel;
    std::memset(&sel, 0, sizeof sel);
    sel.config = &cfg;
    sel.num_splits = 3;

    fa_grid g = fa_fwd_grid(&p, &sel);
    CHECK((g.x == 3 && g.y == 6 && g.z == 6)); // ceil(300/128), heads, batch * splits
    g = fa_combine_grid(&p);
    CHECK((g.x == 300 && g.y == 6 && g.z == 2));
    g = fa_bwd_prep_grid(&p);
    CHECK((g.x == (300 + FA_PREP_ROWS - 1) / FA_PREP_ROWS && g.y == 6 && g.z == 2));
    g = fa_bwd_dkdv_grid(&p, &cfg);
    CHECK((g.x == 3 && g.y == 2 && g.z == 2)); // ceil(130/64), kv heads, batch
    g = fa_bwd_dq_grid(&p, &cfg);
    CHECK((g.x == 5 && g.y == 6 && g.z == 2)); // ceil(300/64): query tiles of tile_n rows
}

TEST_CASE("gpu pre-launch checks refuse what the kernels cannot do, with the reason", "[gpu_args]")
{
    CpuContext cx;
    fa_problem p = aligned_problem();
    fa_kernel_config cfg;
    std::memset(&cfg, 0, sizeof cfg);
    cfg.name = "test_config";
    cfg.kernel_id = 1;
    cfg.tile_m = 128; // the launch limits below look at the grids
    cfg.tile_n = 64;
    cfg.threads = 128;
    cfg.stages = 2;
    fa_selection sel;
    std::memset(&sel, 0, sizeof sel);
    sel.config = &cfg;

    CHECK(fa_gpu_check_fwd(cx.ctx, &p, &sel, 2, "CUDA") == FA_OK);
    CHECK(fa_gpu_check_bwd(cx.ctx, &p, &sel, 2, "CUDA") == FA_OK);

    CHECK(fa_gpu_check_fwd(cx.ctx, &p, &sel, 1, "CUDA") == FA_ERR_UNSUPPORTED);
    CHECK(std::string(fa_last_error(cx.ctx)).find("no CUDA kernel") != std::string::npos);

    fa_problem odd = p;
    odd.q_stride.row = 6 * 64 + 4; // rows no longer 16-byte aligned
    CHECK(fa_gpu_check_fwd(cx.ctx, &odd, &sel, 2, "HIP") == FA_ERR_UNSUPPORTED);
    CHECK(std::string(fa_last_error(cx.ctx)).find("16-byte aligned") != std::string::npos);
    odd = p;
    odd.dq_stride.head = 60;
    CHECK(fa_gpu_check_fwd(cx.ctx, &odd, &sel, 2, "HIP") == FA_OK); // forward ignores dq
    CHECK(fa_gpu_check_bwd(cx.ctx, &odd, &sel, 2, "HIP") == FA_ERR_UNSUPPORTED);

    fa_problem capped = p;
    capped.softcap = 30.f;
    CHECK(fa_gpu_check_fwd(cx.ctx, &capped, &sel, 2, "CUDA") == FA_OK);
    CHECK(fa_gpu_check_bwd(cx.ctx, &capped, &sel, 2, "CUDA") == FA_OK);
}

TEST_CASE("gpu backward workspace: the dQ accumulator exactly when the config adds dQ with "
          "atomics and the call is not deterministic", "[gpu_args]")
{
    fa_problem p = aligned_problem();
    fa_kernel_config cfg;
    std::memset(&cfg, 0, sizeof cfg);
    alignas(256) static unsigned char workspace[1 << 20];
    const size_t rows = fa_align256(static_cast<size_t>(6) * 600 * sizeof(float)); // heads x total_q
    const size_t accum = fa_align256(static_cast<size_t>(6) * 600 * 64 * sizeof(float));
    for (int atomic : {0, 1})
        for (int deterministic : {0, 1}) {
            cfg.atomic_dq = atomic;
            p.deterministic = deterministic;
            const bool with_accum = atomic && !deterministic;
            INFO("atomic_dq " << atomic << ", deterministic " << deterministic);
            CHECK(fa_bwd_workspace_bytes(&p, &cfg) == 2 * rows + (with_accum ? accum : 0));
            REQUIRE(fa_bwd_workspace_bytes(&p, &cfg) <= sizeof workspace);
            fa_bwd_args a = fa_make_bwd_args(&p, &cfg, workspace);
            CHECK(a.delta == reinterpret_cast<float *>(workspace));
            CHECK(a.lse_log2 == reinterpret_cast<float *>(workspace + rows));
            CHECK(a.dq_accum == (with_accum ? reinterpret_cast<float *>(workspace + 2 * rows) : nullptr));
        }
}

TEST_CASE("gpu device description: table row with the reported SM count and smaller limits, "
          "else the reported row", "[gpu_args]")
{
    CpuContext cx;
    const fa_arch_row *sm90 = fa_arch_find("sm_90");
    REQUIRE(sm90 != nullptr);
    // A cut-down part: fewer SMs and less shared memory per block than the table's row.
    fa_arch_row reported = fa_arch_from_device("sm_90", FA_VENDOR_NVIDIA, 32, sm90->smem_per_block - 1024,
                                               sm90->smem_per_sm, sm90->regs_per_sm, 1024, 2048, 114, 1);
    fa_gpu_describe_device(cx.ctx, FA_BACKEND_CUDA, "test H100 PCIe", &reported);
    CHECK(std::string(cx.ctx->row.name) == "sm_90");
    CHECK(cx.ctx->row.sm_count == 114);
    CHECK(cx.ctx->row.smem_per_block == sm90->smem_per_block - 1024);
    CHECK(cx.ctx->row.matrix_unit == sm90->matrix_unit);
    CHECK(cx.ctx->info.backend == FA_BACKEND_CUDA);
    CHECK(cx.ctx->info.row_from_table == 1);
    CHECK(std::string(cx.ctx->info.device_name) == "test H100 PCIe");
    CHECK(std::string(cx.ctx->info.matrix_unit) == "mma.sync");
    CHECK(cx.ctx->info.sm_count == 114);

    // An architecture the table lacks: the reported row as it is.
    fa_arch_row unknown = fa_arch_from_device("gfx1151", FA_VENDOR_AMD, 32, 65536, 65536, 65536, 1024,
                                              2048, 20, 1);
    fa_gpu_describe_device(cx.ctx, FA_BACKEND_HIP, "test APU", &unknown);
    CHECK(std::string(cx.ctx->info.arch) == "gfx1151");
    CHECK(cx.ctx->info.row_from_table == 0);
    CHECK(cx.ctx->info.sm_count == 20);
    CHECK(cx.ctx->info.backend == FA_BACKEND_HIP);
}
