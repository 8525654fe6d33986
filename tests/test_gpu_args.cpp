// test_gpu_args.cpp - the host logic both GPU backends share (src/common/gpu_host/gpu_args.c):
// launch geometry, the pre-launch checks and the backward workspace layout, exercised on
// the CPU; and at shapes past 2^31 elements, the sizes, offsets (attn_args.h), grid folds
// (launch_grid.h) and limits the kernels rely on, computed without allocating anything.
#include <catch2/catch.hpp>
#include <algorithm>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "aligned_problem.hpp"
#include "api/problem.h"
#include "gpu_host/gpu_args.h"

namespace {

struct CpuContext {
    fa_context *ctx = nullptr;
    CpuContext() { REQUIRE(fa_create(&ctx, FA_BACKEND_CPU, 0) == FA_OK); }
    ~CpuContext() { fa_destroy(ctx); }
};

// `batch` fixed-length sequences with contiguous [b, s, h, d] operands of 16-byte
// aligned rows. Nothing lies behind the pointers: the functions under test only compute.
fa_problem big_problem(int batch, long long seqlen_q, long long seqlen_k, int heads, int heads_k, int head_dim)
{
    static unsigned char storage[64] __attribute__((aligned(16)));
    fa_problem p;
    std::memset(&p, 0, sizeof p);
    p.dtype = FA_DTYPE_BF16;
    p.batch = batch;
    p.heads = heads;
    p.heads_k = heads_k;
    p.head_dim = head_dim;
    p.seqlen_q = seqlen_q;
    p.seqlen_k = seqlen_k;
    p.total_q = batch * seqlen_q;
    p.total_k = batch * seqlen_k;
    p.q = p.k = p.v = p.dout = storage;
    p.out = p.dq = p.dk = p.dv = storage;
    const fa_strides st = {seqlen_q * heads * head_dim, (long long)heads * head_dim, head_dim};
    const fa_strides kst = {seqlen_k * heads_k * head_dim, (long long)heads_k * head_dim, head_dim};
    p.q_stride = p.out_stride = p.dout_stride = p.dq_stride = st;
    p.k_stride = p.v_stride = p.dk_stride = p.dv_stride = kst;
    p.softmax_scale = 1.f;
    return p;
}

// A selection of `cfg` with `splits` split-KV parts, as the dispatcher hands it over.
fa_selection selection_of(const fa_kernel_config &cfg, int splits)
{
    fa_selection sel;
    std::memset(&sel, 0, sizeof sel);
    sel.config = &cfg;
    sel.num_splits = splits;
    return sel;
}

// Any non-NULL launch handle: the checks only ask whether a config has kernels.
const void *const kFakeKernel = &kFakeKernel;

fa_kernel_config big_config(int tile_m, int tile_n, int threads)
{
    fa_kernel_config cfg;
    std::memset(&cfg, 0, sizeof cfg);
    cfg.name = "test_config";
    cfg.kernels[0] = &kFakeKernel;
    cfg.kernels[1] = &kFakeKernel;
    cfg.tile_m = tile_m;
    cfg.tile_n = tile_n;
    cfg.threads = threads;
    cfg.stages = 2;
    cfg.atomic_dq = 1;
    return cfg;
}

// A workspace address for the layout functions, never dereferenced.
char *const kFakeWorkspace = reinterpret_cast<char *>(static_cast<uintptr_t>(1) << 40);
uintptr_t at(const void *p) { return reinterpret_cast<uintptr_t>(p); }

// The launch machinery's HIP limits apply when the context's backend is HIP.
struct AsBackend {
    fa_context *ctx;
    fa_backend saved;
    AsBackend(fa_context *c, fa_backend b) : ctx(c), saved(c->backend) { ctx->backend = b; }
    ~AsBackend() { ctx->backend = saved; }
};

bool says(fa_context *ctx, const char *what) { return std::string(fa_last_error(ctx)).find(what) != std::string::npos; }

}  // namespace

TEST_CASE("gpu launch geometry covers every tile, head, batch and split", "[gpu_args]")
{
    fa_problem p = aligned_problem();
    fa_kernel_config cfg;
    std::memset(&cfg, 0, sizeof cfg);
    cfg.tile_m = 128;
    cfg.tile_n = 64;
    fa_selection sel = selection_of(cfg, 3);

    fa_grid g = fa_fwd_grid(&p, &sel);
    CHECK((g.x == 3 && g.y == 6 && g.z == 6)); // ceil(300/128), heads, batch * splits
    // The warpgroup family's persistent grid: its work tiles (3 x 6 x 6), at most one
    // block per slot.
    fa_kernel_config ws = cfg;
    ws.warpgroup = 1;
    fa_selection ws_sel = selection_of(ws, 3);
    ws_sel.persistent_blocks = 132;
    g = fa_fwd_grid(&p, &ws_sel);
    CHECK((g.x == 108 && g.y == 1 && g.z == 1));
    ws_sel.persistent_blocks = 100;
    g = fa_fwd_grid(&p, &ws_sel);
    CHECK((g.x == 100 && g.y == 1 && g.z == 1));
    ws_sel.persistent_blocks = 0; // not persistent: the same walk, a block per work tile
    g = fa_fwd_grid(&p, &ws_sel);
    CHECK((g.x == 108 && g.y == 1 && g.z == 1));
    ws.head_dim = 256; // no walk above d128 (FA_WS_PERSISTENT): the grid of the mma.sync kernels
    ws_sel = selection_of(ws, 3);
    g = fa_fwd_grid(&p, &ws_sel);
    CHECK((g.x == 3 && g.y == 6 && g.z == 6));
    // The combine: 600 rows x heads per batch entry over (1, batch); few of them, so
    // 32-lane groups (8 chunk lanes x 4 shares of the 3 splits), 8 per block.
    const fa_fwd_args fwd = fa_make_args(&p, 3, kFakeWorkspace);
    const fa_combine_args c = fa_make_split_combine_args(&p, &fwd);
    CHECK((c.lanes_log2 == 5 && c.chunk_lanes_log2 == 3));
    g = fa_combine_grid(&c);
    CHECK((g.x == 300 * 6 / 8 && g.y == 1 && g.z == 2));
    g = fa_bwd_prep_grid(&p);
    CHECK((g.x == (300 + FA_PREP_ROWS - 1) / FA_PREP_ROWS && g.y == 6 && g.z == 2));
    g = fa_bwd_dkdv_grid(&p, &cfg);
    CHECK((g.x == 3 && g.y == 2 && g.z == 2)); // ceil(130/64), kv heads, batch
    g = fa_bwd_dq_grid(&p, &cfg);
    CHECK((g.x == 5 && g.y == 6 && g.z == 2)); // ceil(300/64): resident query tiles of tile_n rows
}

TEST_CASE("gpu args carry every operand's strides as its layout, addressed by fa_row_at", "[gpu_args]")
{
    fa_problem p = aligned_problem();
    p.lse_stride = fa_strides{6 * 300, 1, 300}; // [b, h, s]
    p.dq_stride = fa_strides{0, 7 * 64, 64};    // a layout of its own
    fa_kernel_config cfg;
    std::memset(&cfg, 0, sizeof cfg);
    const fa_bwd_args b = fa_make_bwd_args(&p, &cfg, kFakeWorkspace);
    const fa_fwd_args &a = b.fwd;
    const fa_operand_layout *q[] = {&a.q_layout, &a.out_layout, &b.dout_layout};
    for (const fa_operand_layout *at : q)
        CHECK((at->batch == 300 * 6 * 64 && at->row == 6 * 64 && at->head == 64));
    const fa_operand_layout *k[] = {&a.k_layout, &a.v_layout, &b.dk_layout, &b.dv_layout};
    for (const fa_operand_layout *at : k)
        CHECK((at->batch == 130 * 2 * 64 && at->row == 2 * 64 && at->head == 64));
    CHECK((b.dq_layout.batch == 0 && b.dq_layout.row == 7 * 64 && b.dq_layout.head == 64));
    CHECK((a.lse_layout.batch == 6 * 300 && a.lse_layout.row == 1 && a.lse_layout.head == 300));

    // Row 299 of head 5 of batch entry 1: the last row of a contiguous q, and of the LSE.
    CHECK(fa_row_at(&a.q_layout, 1, 299, 5) + 63 == 2LL * 300 * 6 * 64 - 1);
    CHECK(fa_lse_at(&a.lse_layout, 1, 5, 299) == 2LL * 6 * 300 - 1);
    // Products in 64 bits: row 2^31 of a 2^31-row varlen operand.
    const fa_operand_layout wide = {0, 6 * 64, 64};
    CHECK(fa_row_at(&wide, 0, 1LL << 31, 5) == (1LL << 31) * 6 * 64 + 5 * 64);
}

TEST_CASE("gpu pre-launch checks refuse what the kernels cannot do, with the reason", "[gpu_args]")
{
    CpuContext cx;
    fa_problem p = aligned_problem();
    fa_kernel_config cfg;
    std::memset(&cfg, 0, sizeof cfg);
    cfg.name = "test_config";
    cfg.kernels[0] = &kFakeKernel;
    cfg.kernels[1] = &kFakeKernel;
    cfg.tile_m = 128; // the launch limits below look at the grids
    cfg.tile_n = 64;
    cfg.threads = 128;
    cfg.stages = 2;
    fa_selection sel;
    std::memset(&sel, 0, sizeof sel);
    sel.config = &cfg;

    CHECK(fa_gpu_check_fwd(cx.ctx, &p, &sel, "CUDA") == FA_OK);
    CHECK(fa_gpu_check_bwd(cx.ctx, &p, &sel, "CUDA") == FA_OK);

    fa_kernel_config unbuilt = cfg; // a config of a vendor this library was built without
    unbuilt.kernels[0] = nullptr;
    sel.config = &unbuilt;
    CHECK(fa_gpu_check_fwd(cx.ctx, &p, &sel, "CUDA") == FA_ERR_UNSUPPORTED);
    CHECK(std::string(fa_last_error(cx.ctx)).find("no CUDA kernel") != std::string::npos);
    unbuilt = cfg;
    unbuilt.pass = FA_PASS_BWD;
    unbuilt.kernels[1] = nullptr; // a backward needs its dQ kernel too
    CHECK(fa_gpu_check_bwd(cx.ctx, &p, &sel, "CUDA") == FA_ERR_UNSUPPORTED);
    CHECK(std::string(fa_last_error(cx.ctx)).find("no CUDA kernel") != std::string::npos);
    sel.config = &cfg;

    fa_problem odd = p;
    odd.q_stride.row = 6 * 64 + 4; // rows no longer 16-byte aligned
    CHECK(fa_gpu_check_fwd(cx.ctx, &odd, &sel, "HIP") == FA_ERR_UNSUPPORTED);
    CHECK(std::string(fa_last_error(cx.ctx)).find("16-byte aligned") != std::string::npos);
    odd = p;
    odd.dq_stride.head = 60;
    CHECK(fa_gpu_check_fwd(cx.ctx, &odd, &sel, "HIP") == FA_OK); // forward ignores dq
    CHECK(fa_gpu_check_bwd(cx.ctx, &odd, &sel, "HIP") == FA_ERR_UNSUPPORTED);

    fa_problem capped = p;
    capped.softcap = 30.f;
    CHECK(fa_gpu_check_fwd(cx.ctx, &capped, &sel, "CUDA") == FA_OK);
    CHECK(fa_gpu_check_bwd(cx.ctx, &capped, &sel, "CUDA") == FA_OK);
}

TEST_CASE("gpu backward workspace: the dQ accumulator exactly when the config adds dQ with "
          "atomics and the call is not deterministic or the config orders them; the order rows "
          "exactly for a deterministic call on an ordering config", "[gpu_args]")
{
    fa_problem p = aligned_problem();
    fa_kernel_config cfg;
    std::memset(&cfg, 0, sizeof cfg);
    alignas(256) static unsigned char workspace[1 << 20];
    const size_t rows = fa_align256(static_cast<size_t>(6) * 600 * sizeof(float)); // heads x total_q
    const size_t accum = fa_align256(static_cast<size_t>(6) * 600 * 64 * sizeof(float));
    for (int atomic : {0, 1})
        for (int ordered : {0, 1})
            for (int deterministic : {0, 1}) {
                cfg.atomic_dq = atomic;
                cfg.ordered_dq = ordered;
                p.deterministic = deterministic;
                const bool with_accum = atomic && (!deterministic || ordered);
                const bool with_order = atomic && ordered && deterministic;
                INFO("atomic_dq " << atomic << ", ordered_dq " << ordered << ", deterministic " << deterministic);
                CHECK(fa_bwd_workspace_bytes(&p, &cfg) ==
                      2 * rows + (with_accum ? accum : 0) + (with_order ? rows : 0));
                REQUIRE(fa_bwd_workspace_bytes(&p, &cfg) <= sizeof workspace);
                fa_bwd_args a = fa_make_bwd_args(&p, &cfg, workspace);
                CHECK(a.delta == reinterpret_cast<float *>(workspace));
                CHECK(a.lse_log2 == reinterpret_cast<float *>(workspace + rows));
                CHECK(a.dq_accum ==
                      (with_accum ? reinterpret_cast<float *>(workspace + 2 * rows) : nullptr));
                CHECK(a.dq_order ==
                      (with_order ? reinterpret_cast<int *>(workspace + 2 * rows + accum) : nullptr));
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
    CHECK(std::string(cx.ctx->info.matrix_unit) == "wgmma");
    CHECK(cx.ctx->info.sm_count == 114);
    // Without tensor maps the row's forwards take mma.sync (gpu_backend.c's attach).
    fa_gpu_set_matrix_unit(cx.ctx, FA_MATRIX_MMA_SYNC);
    CHECK(cx.ctx->row.matrix_unit == FA_MATRIX_MMA_SYNC);
    CHECK(std::string(cx.ctx->info.matrix_unit) == "mma.sync");

    // An architecture the table lacks: the reported row as it is.
    fa_arch_row unknown = fa_arch_from_device("gfx1151", FA_VENDOR_AMD, 32, 65536, 65536, 65536, 1024,
                                              2048, 20, 1);
    fa_gpu_describe_device(cx.ctx, FA_BACKEND_HIP, "test APU", &unknown);
    CHECK(std::string(cx.ctx->info.arch) == "gfx1151");
    CHECK(cx.ctx->info.row_from_table == 0);
    CHECK(cx.ctx->info.sm_count == 20);
    CHECK(cx.ctx->info.backend == FA_BACKEND_HIP);
}

TEST_CASE("gpu args past 2^31 rows: total_q, the backward's row offsets and its workspace stay whole",
          "[gpu_args][int64]")
{
    // 2^13 sequences of 2^20 rows: 2^33 rows, which the int copy of total_q made 0.
    fa_problem p = big_problem(1 << 13, 1 << 20, 1 << 20, 4, 4, 64);
    REQUIRE(p.total_q == (1LL << 33));
    const fa_kernel_config cfg = big_config(64, 128, 256);
    const fa_fwd_args a = fa_make_args(&p, 1, nullptr);
    CHECK(a.total_q == (1LL << 33));

    const long long rows = 4LL << 33; // heads x total_q
    CHECK(fa_head_row(&a, 3, a.total_q - 1) == rows - 1);
    CHECK(fa_dq_accum_head(&a, 3) + (a.total_q - 1) * 64 + 63 == rows * 64 - 1);
    const size_t row_bytes = static_cast<size_t>(rows) * 4; // both multiples of 256 already
    const size_t accum_bytes = static_cast<size_t>(rows) * 64 * 4;
    CHECK(fa_bwd_workspace_bytes(&p, &cfg) == 2 * row_bytes + accum_bytes);

    // The three buffers follow one another, each holding its last element.
    const fa_bwd_args b = fa_make_bwd_args(&p, &cfg, kFakeWorkspace);
    CHECK(at(b.delta) == at(kFakeWorkspace));
    CHECK(at(b.lse_log2) == at(b.delta) + row_bytes);
    CHECK(at(b.dq_accum) == at(b.lse_log2) + row_bytes);
    CHECK(at(b.delta + fa_head_row(&b.fwd, 3, a.total_q - 1) + 1) == at(b.lse_log2));
    CHECK(at(b.dq_accum + fa_dq_accum_head(&b.fwd, 3) + rows / 4 * 64) ==
          at(kFakeWorkspace) + fa_bwd_workspace_bytes(&p, &cfg));

    CpuContext cx;
    fa_selection sel = selection_of(cfg, 1);
    size_t bytes = 0;
    CHECK(fa_gpu_bwd_workspace(cx.ctx, &p, &sel, "CUDA", &bytes) == FA_OK);
    CHECK(bytes == 2 * row_bytes + accum_bytes);
}

TEST_CASE("gpu args: the split-KV combine reads each partial where the forward wrote it", "[gpu_args]")
{
    const int32_t cu[] = {0, 2, 2, 9}; // varlen: 3 sequences of 2, 0 and 7 rows
    for (int varlen : {0, 1}) {
        fa_problem p = big_problem(3, varlen ? 7 : 5, 11, 4, 2, 16);
        if (varlen) {
            p.varlen = 1;
            p.total_q = 9;
            p.cu_seqlens_q = cu;
            p.out_stride.batch = 0;
        }
        const fa_fwd_args fwd = fa_make_args(&p, 3, kFakeWorkspace);
        const fa_combine_args c = fa_make_split_combine_args(&p, &fwd);
        INFO("varlen " << varlen);
        CHECK(c.part_out[0] == static_cast<const void *>(fwd.partial_out));
        CHECK(c.part_lse[0] == fwd.partial_lse);
        CHECK((c.n == 3 && c.batch == 3 && c.rows == p.seqlen_q && c.heads == 4 && c.head_dim == 16));
        CHECK((c.part_dtype == FA_DTYPE_F32 && c.out_dtype == FA_DTYPE_BF16));
        CHECK(c.cu_seqlens_q == (varlen ? cu : nullptr));
        long long wrong = 0;
        for (int split = 0; split < 3; ++split)
            for (int b = 0; b < 3; ++b) {
                const long long row0 = varlen ? cu[b] : 0, rows = varlen ? cu[b + 1] - cu[b] : p.seqlen_q;
                for (long long r = row0; r < row0 + rows; ++r)
                    for (int h = 0; h < 4; ++h) {
                        const long long grow = varlen ? r : b * p.seqlen_q + r;
                        wrong += split * c.part_out_split + fa_row_at(&c.part_out_layout, b, r, h) !=
                                 fa_partial_out_offset(&fwd, split, grow, h);
                        wrong += split * c.part_lse_split + fa_lse_at(&c.part_lse_layout, b, h, r) !=
                                 fa_partial_lse_offset(&fwd, split, h, grow);
                    }
            }
        CHECK(wrong == 0);
    }
}

TEST_CASE("gpu args: the split-KV combine reads the device check's verdict beside its loads only "
          "after a decode-family forward that checked late", "[gpu_args]")
{
    static const int32_t used[2] = {5, 9}; // never read: the functions only compute
    fa_problem p = big_problem(2, 1, 11, 8, 2, 16);
    fa_kernel_config decode = big_config(16, 64, 128);
    decode.pack_gqa = 1;
    const fa_kernel_config prefill = big_config(64, 64, 128);
    fa_fwd_args fwd = fa_make_args(&p, 3, kFakeWorkspace);
    fwd.checked_late = 1;
    CHECK(fwd.seq_ok == nullptr); // no device indices: no verdict to read
    CHECK(fa_split_verdict_late(&fwd, &decode) == 0);
    p.seqused_k = used;
    fwd = fa_make_args(&p, 3, kFakeWorkspace);
    REQUIRE(fwd.seq_ok != nullptr);
    fwd.checked_late = 1; // run_pass: device indices, fixed length
    CHECK(fa_split_verdict_late(&fwd, &decode) == 1);
    CHECK(fa_split_verdict_late(&fwd, &prefill) == 0); // exits before writing a bad sequence's partials
    fwd.checked_late = 0; // varlen: checked before the forward, which then writes nothing for it
    CHECK(fa_split_verdict_late(&fwd, &decode) == 0);
}

TEST_CASE("gpu args: the decode family checks fixed-length device indices itself when a block "
          "reads its table row in one round", "[gpu_args]")
{
    static const int32_t used[2] = {5, 9}, table[2] = {0, 0}; // never read
    fa_problem p = big_problem(2, 1, 11, 8, 2, 16);
    fa_kernel_config decode = big_config(16, 64, 128);
    decode.pack_gqa = 1;
    const fa_kernel_config prefill = big_config(64, 64, 128);
    CHECK(fa_fwd_checks_itself(&p, &decode) == 0); // no device indices: nothing to check
    p.seqused_k = used;
    CHECK(fa_fwd_checks_itself(&p, &decode) == 1);
    CHECK(fa_fwd_checks_itself(&p, &prefill) == 0); // the check kernel, beside it
    p.block_table = table;
    p.page_size = 16;
    p.block_table_width = FA_JUDGE_ROUND * 128; // one round of loads for 128 threads
    p.block_table_stride = p.block_table_width;
    CHECK(fa_fwd_checks_itself(&p, &decode) == 1);
    p.block_table_width += 1; // a second round: the check kernel
    p.block_table_stride = p.block_table_width;
    CHECK(fa_fwd_checks_itself(&p, &decode) == 0);
    p.block_table_width = 4;
    p.block_table_stride = 4;
    p.num_pages = (long long)INT32_MAX + 1; // more than the kernels' int holds: the check kernel
    CHECK(fa_fwd_checks_itself(&p, &decode) == 0);
    p.num_pages = INT32_MAX;
    CHECK(fa_fwd_checks_itself(&p, &decode) == 1);
    p.varlen = 1; // cu_seqlens are checked whole, before the forward
    CHECK(fa_fwd_checks_itself(&p, &decode) == 0);
}

TEST_CASE("gpu args: the page size becomes the kernels' divisor; a cache of no rows (page size 0) gets none",
          "[gpu_args]")
{
    static const int32_t table[2] = {0, 0}; // never read
    fa_problem p = big_problem(2, 1, 48, 8, 2, 16);
    p.block_table = table;
    p.block_table_width = 1;
    p.block_table_stride = 1;
    p.page_size = 48;
    fa_fwd_args a = fa_make_args(&p, 1, nullptr);
    CHECK(a.page_size.d == 48);
    CHECK(fa_divide(47, a.page_size) == 0);
    CHECK(fa_divide(48, a.page_size) == 1);
    p.seqlen_k = 0; // fa_fwd_kvcache's cache_batch_idx over a cache of no rows
    p.page_size = 0;
    a = fa_make_args(&p, 1, nullptr);
    CHECK(a.page_size.d == 0);
    CHECK(a.page_size.mul == 0u);
}

TEST_CASE("gpu args: split-KV partial offsets and sizes at the largest split, row and head",
          "[gpu_args][int64]")
{
    // 8 splits of 2^22 + 3 rows x 64 heads x d256: 2^39 + ... fp32 partials (an odd row
    // count keeps the sizes off powers of two).
    fa_problem p = big_problem(1, (1 << 22) + 3, 1 << 22, 64, 8, 256);
    const long long tq = p.total_q, out_elems = 8LL * tq * 64 * 256, lse_elems = 8LL * 64 * tq;
    const size_t bytes = fa_split_bytes(&p, 8);
    CHECK(bytes == fa_align256(static_cast<size_t>(out_elems) * 4) + fa_align256(static_cast<size_t>(lse_elems) * 4));

    const fa_fwd_args a = fa_make_args(&p, 8, kFakeWorkspace);
    CHECK(at(a.partial_out) == at(kFakeWorkspace));
    const long long last_out = fa_partial_out_offset(&a, 7, tq - 1, 63) + 255;
    CHECK(last_out == out_elems - 1);
    CHECK(at(a.partial_out + last_out + 1) <= at(a.partial_lse));
    const long long last_lse = fa_partial_lse_offset(&a, 7, 63, tq - 1);
    CHECK(last_lse == lse_elems - 1);
    CHECK(at(a.partial_lse + last_lse + 1) <= at(kFakeWorkspace) + bytes);

    // A split's size is the offset of split 1's first value (the combine kernel's step).
    CHECK(fa_partial_out_offset(&a, 1, 0, 0) == tq * 64 * 256);
    CHECK(fa_partial_lse_offset(&a, 1, 0, 0) == 64 * tq);
    CHECK(fa_partial_out_offset(&a, 5, tq - 2, 3) ==
          fa_partial_out_offset(&a, 0, tq - 2, 3) + 5 * fa_partial_out_offset(&a, 1, 0, 0));
    CHECK(fa_partial_lse_offset(&a, 5, 3, tq - 2) ==
          fa_partial_lse_offset(&a, 0, 3, tq - 2) + 5 * fa_partial_lse_offset(&a, 1, 0, 0));

    CpuContext cx;
    const fa_kernel_config cfg = big_config(128, 64, 128);
    fa_selection sel = selection_of(cfg, 8);
    size_t query = 0;
    CHECK(fa_gpu_fwd_workspace(cx.ctx, &p, &sel, "CUDA", &query) == FA_OK);
    CHECK(query == bytes);
}

TEST_CASE("gpu launch grids fold (head, batch) pairs past 65535 over y and z, each pair once and "
          "in order", "[gpu_args][int64]")
{
    unsigned y = 0, z = 0;
    fa_grid_fold(64, FA_GRID_YZ_MAX, &y, &z); // fits: heads along y, batch along z
    CHECK((y == 64 && z == FA_GRID_YZ_MAX));
    fa_grid_fold(0, 100000, &y, &z); // empty: no blocks
    CHECK(static_cast<unsigned long long>(y) * z == 0);
    fa_grid_fold(65536, 65536, &y, &z); // 2^32 pairs: past the grid, for the host to refuse
    CHECK(z > FA_GRID_YZ_MAX);
    fa_grid_fold(2147483647, 2147483647LL * 128, &y, &z); // saturates instead of wrapping
    CHECK(z == FA_GRID_YZ_MAX + 1);
    fa_grid_fold(3, 1431612075, &y, &z); // exactly 65535^2 pairs: the grid's capacity
    CHECK((y == FA_GRID_YZ_MAX && z == FA_GRID_YZ_MAX));

    const long long shapes[][2] = {{64, 65536}, {1, 65537}, {3, 1000003}, {70000, 2}, {40, 1 << 20}};
    for (const auto &shape : shapes) {
        const long long inner = shape[0], outer = shape[1], pairs = inner * outer;
        INFO("inner " << inner << " x outer " << outer);
        fa_grid_fold(inner, outer, &y, &z);
        REQUIRE((y <= FA_GRID_YZ_MAX && z <= FA_GRID_YZ_MAX));
        const long long blocks = static_cast<long long>(y) * z;
        REQUIRE(blocks >= pairs);
        CHECK(blocks - pairs < z); // at most one row's worth of idle blocks
        // Every block either takes the next pair (blocks start in the pairs' order, so each
        // pair comes exactly once) or, past the last, none; checked without an assertion
        // per block (tens of millions of them).
        long long idle = 0, next = 0, wrong = 0;
        for (unsigned bz = 0; bz < z; ++bz)
            for (unsigned by = 0; by < y; ++by) {
                unsigned i = 0, o = 0;
                fa_grid_pair(by, bz, y, static_cast<unsigned>(inner), static_cast<unsigned>(outer), &i, &o);
                if (o == outer)
                    ++idle;
                else if (i >= inner || o > outer || static_cast<long long>(o) * inner + i != next++)
                    ++wrong;
                else if (idle > 0)
                    ++wrong; // an idle block before a working one
            }
        CHECK(wrong == 0);
        CHECK(next == pairs);
        CHECK(idle == blocks - pairs);
    }

    // The forward's (head, batch * splits) and the backward's (kv head, batch) pairs.
    fa_problem p = big_problem(1 << 20, 64, 64, 64, 8, 128);
    fa_kernel_config cfg = big_config(128, 64, 128);
    fa_selection sel = selection_of(cfg, 3);
    fa_grid g = fa_fwd_grid(&p, &sel);
    CHECK(g.x == 1);
    CHECK((g.y <= FA_GRID_YZ_MAX && g.z <= FA_GRID_YZ_MAX));
    CHECK(static_cast<long long>(g.y) * g.z >= 64LL * 3 << 20);
    g = fa_bwd_dkdv_grid(&p, &cfg);
    CHECK(static_cast<long long>(g.y) * g.z >= 8LL << 20);
    CHECK(static_cast<long long>(g.y) * g.z - (8LL << 20) < g.z);
}

TEST_CASE("gpu launch grids: the warpgroup backward takes every (key block, pair) once, key blocks of a "
          "pair in order, pair by pair or in sections of pairs key block by key block",
          "[gpu_args]")
{
    const unsigned shapes[][2] = {{8, 256}, {16, 128}, {3, 7}, {300, 5}, {256, 2}, {1, 1}, {100, 33}, {7, 65535}};
    for (const auto &shape : shapes) {
        const unsigned key_blocks = shape[0], pairs = shape[1];
        for (int sectioned : {0, 1}) {
        const unsigned per = fa_bws_section_pairs(key_blocks, sectioned);
        CHECK(per == (sectioned && key_blocks < FA_BWS_SECTION_BLOCKS ? FA_BWS_SECTION_BLOCKS / key_blocks : 1u));
        INFO(key_blocks << " key blocks x " << pairs << " pairs, " << per << " a section");
        std::vector<long long> at(static_cast<size_t>(key_blocks) * pairs, -1);
        std::vector<long long> last_k(pairs, -1);
        long long wrong = 0;
        for (unsigned long long linear = 0; linear < static_cast<unsigned long long>(key_blocks) * pairs; ++linear) {
            unsigned k = 0, pair = 0;
            fa_bws_block_order(linear, key_blocks, pairs, per, &k, &pair);
            if (k >= key_blocks || pair >= pairs) {
                ++wrong;
                continue;
            }
            long long &slot = at[static_cast<size_t>(pair) * key_blocks + k];
            if (slot >= 0 || static_cast<long long>(k) != last_k[pair] + 1) // once each, in order in a pair
                ++wrong;
            if (pair / per != linear / (static_cast<unsigned long long>(per) * key_blocks)) // its section
                ++wrong;
            slot = static_cast<long long>(linear);
            last_k[pair] = k;
        }
        CHECK(wrong == 0);
        CHECK(std::count(at.begin(), at.end(), -1LL) == 0);
        }
    }
    // Without sections, pair by pair: a pair's key blocks one after the other.
    unsigned k = 0, pair = 0;
    fa_bws_block_order(9, 8, 256, 1, &k, &pair);
    CHECK((k == 1 && pair == 1));
    // In a full section the first key block of each of its pairs comes before any second one.
    fa_bws_block_order(31, 8, 256, 32, &k, &pair); // 32 pairs of 8 key blocks a section
    CHECK((k == 0 && pair == 31));
    fa_bws_block_order(32, 8, 256, 32, &k, &pair);
    CHECK((k == 1 && pair == 0));
    fa_bws_block_order(256 + 3, 8, 256, 32, &k, &pair); // the second section
    CHECK((k == 0 && pair == 35));
}

TEST_CASE("gpu pre-launch checks: launch, step-count and size limits refused with the reason",
          "[gpu_args][int64]")
{
    CpuContext cx;
    fa_kernel_config cfg = big_config(64, 128, 256);
    fa_selection sel = selection_of(cfg, 1);
    size_t bytes = 0;

    // 2^20 sequences of 64 rows x 64 heads: more than 65535 of each grid dimension takes,
    // folded, so accepted.
    fa_problem many = big_problem(1 << 20, 64, 64, 64, 64, 128);
    CHECK(fa_gpu_check_fwd(cx.ctx, &many, &sel, "CUDA") == FA_OK);
    CHECK(fa_gpu_check_bwd(cx.ctx, &many, &sel, "CUDA") == FA_OK);

    // 2^16 heads x 2^16 sequences: more pairs than 65535^2, refused by the launch checks and
    // already by the workspace queries.
    fa_problem wide = big_problem(1 << 16, 8, 8, 1 << 16, 1 << 16, 8);
    CHECK(fa_gpu_check_fwd(cx.ctx, &wide, &sel, "CUDA") == FA_ERR_UNSUPPORTED);
    CHECK(says(cx.ctx, "cannot launch the forward kernel"));
    CHECK(fa_gpu_fwd_workspace(cx.ctx, &wide, &sel, "CUDA", &bytes) == FA_ERR_UNSUPPORTED);
    CHECK(fa_gpu_check_bwd(cx.ctx, &wide, &sel, "CUDA") == FA_ERR_UNSUPPORTED);
    CHECK(says(cx.ctx, "y and z at most 65535"));
    CHECK(fa_gpu_bwd_workspace(cx.ctx, &wide, &sel, "CUDA", &bytes) == FA_ERR_UNSUPPORTED);

    // 2^30 + 64 rows: 2^24 + 1 query tiles of 64 rows x 256 threads pass HIP's 2^32
    // work-items per grid dimension; CUDA counts blocks.
    fa_problem tall = big_problem(1, (1LL << 30) + 64, 64, 1, 1, 32);
    CHECK(fa_gpu_check_fwd(cx.ctx, &tall, &sel, "CUDA") == FA_OK);
    {
        AsBackend hip(cx.ctx, FA_BACKEND_HIP);
        CHECK(fa_gpu_check_fwd(cx.ctx, &tall, &sel, "HIP") == FA_ERR_UNSUPPORTED);
        CHECK(says(cx.ctx, "x times threads below 2^32"));
        // The split-KV combine runs 8 threads per (row, head) at d32 (the forward 4 per
        // row): 2^26 rows x 8 heads pass HIP's limit with the combine only.
        fa_problem rows = big_problem(1, 1LL << 26, 1 << 20, 8, 8, 32);
        CHECK(fa_gpu_check_fwd(cx.ctx, &rows, &sel, "HIP") == FA_OK);
        sel.num_splits = 2;
        CHECK(fa_gpu_check_fwd(cx.ctx, &rows, &sel, "HIP") == FA_ERR_UNSUPPORTED);
        CHECK(says(cx.ctx, "split-KV combine"));
        sel.num_splits = 1;
    }

    // The dK/dV kernel counts (query heads per kv head) x query tiles in int: 64 x 2^25
    // tiles of 64 rows is 2^31 steps.
    fa_problem mqa = big_problem(1, 2147483647, 64, 64, 1, 8);
    CHECK(fa_gpu_check_bwd(cx.ctx, &mqa, &sel, "CUDA") == FA_ERR_UNSUPPORTED);
    CHECK(says(cx.ctx, "step counter"));
    CHECK(fa_gpu_bwd_workspace(cx.ctx, &mqa, &sel, "CUDA", &bytes) == FA_ERR_UNSUPPORTED);
    mqa.heads = 32;
    CHECK(fa_gpu_check_bwd(cx.ctx, &mqa, &sel, "CUDA") == FA_OK);
    CHECK(fa_gpu_check_fwd(cx.ctx, &mqa, &sel, "CUDA") == FA_OK); // the forward has no such count

    // Workspaces past 64-bit sizes (only with operands whose strides repeat elements, e.g.
    // stride 0, can such a shape be legal): 2^20 heads x 2^40 rows.
    fa_problem huge = big_problem(1 << 20, 1 << 20, 8, 1 << 20, 1, 8);
    CHECK(fa_gpu_bwd_workspace(cx.ctx, &huge, &sel, "CUDA", &bytes) == FA_ERR_UNSUPPORTED);
    CHECK(says(cx.ctx, "64-bit sizes"));
    CHECK(fa_gpu_check_bwd(cx.ctx, &huge, &sel, "CUDA") == FA_ERR_UNSUPPORTED);
    sel.num_splits = 128;
    fa_problem split = big_problem(1 << 20, 1 << 20, 8, 1 << 10, 1, 256); // 2^7 x 2^40 x 2^10 x 2^8
    CHECK(fa_gpu_fwd_workspace(cx.ctx, &split, &sel, "CUDA", &bytes) == FA_ERR_UNSUPPORTED);
    CHECK(says(cx.ctx, "split-KV partials"));
}

// What the warpgroup kernels' tensor maps take (problem.h, fa_tma_operand_ok): the api's
// family choice for q, k, v, dout, dk and dv, and the forward's O-by-TMA choice
// (gpu_backend.c) rest on it.
TEST_CASE("gpu args: a TMA-addressable operand is 16-byte aligned with strides of whole 16 bytes",
          "[gpu_args][tma]")
{
    alignas(16) static unsigned char data[32];
    const fa_strides bshd = {8 * 1024 * 128, 8 * 128, 128}; // [b, s, h, d] of 8 heads, d128
    CHECK(fa_tma_operand_ok(data, &bshd, 0));
    CHECK_FALSE(fa_tma_operand_ok(nullptr, &bshd, 0));
    CHECK_FALSE(fa_tma_operand_ok(data + 8, &bshd, 0)); // 8-byte aligned only
    fa_strides odd_row = bshd;
    odd_row.row = 8 * 128 + 4; // rows 8 bytes off a 16-byte step
    CHECK_FALSE(fa_tma_operand_ok(data, &odd_row, 0));
    fa_strides odd_head = bshd;
    odd_head.head = 132;
    CHECK_FALSE(fa_tma_operand_ok(data, &odd_head, 0));
    // A batch stride of 0 (one K/V for every sequence, or an aliasing output) is no
    // map stride; a varlen operand has one batch entry, so its batch stride is not one.
    fa_strides shared = bshd;
    shared.batch = 0;
    CHECK_FALSE(fa_tma_operand_ok(data, &shared, 0));
    CHECK(fa_tma_operand_ok(data, &shared, 1));
    // Byte strides below 2^40 (elements below 2^39).
    fa_strides huge = bshd;
    huge.batch = (int64_t)1 << 39;
    CHECK_FALSE(fa_tma_operand_ok(data, &huge, 0));
    huge.batch = ((int64_t)1 << 39) - 8;
    CHECK(fa_tma_operand_ok(data, &huge, 0));
    fa_strides negative = bshd;
    negative.row = -8 * 128;
    CHECK_FALSE(fa_tma_operand_ok(data, &negative, 0));
}
