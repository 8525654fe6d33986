// test_dispatch.cpp - the pure selection function over the registry, run for
// every architecture row on the CPU: fit, head-dim coverage, monotonicity in shared
// memory, split-KV, the tile override and its parser, failures with reasons, purity.
//
// The CUDA configs are only "compiled" in a CUDA build; to test the rules independently
// of the build, the tests copy the CUDA registry and mark every entry compiled.
#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "gpu_kernels/smem_bytes.h"
#include "select/registry.h"

namespace {

std::vector<fa_kernel_config> compiled_registry(fa_backend backend, fa_pass pass = FA_PASS_FWD)
{
    int count = 0;
    const fa_kernel_config *reg = fa_registry_of(backend, pass, &count);
    std::vector<fa_kernel_config> out(reg, reg + count);
    for (fa_kernel_config &c : out) c.compiled = 1;
    return out;
}

fa_problem_shape make_shape(fa_dtype dtype, int batch, int heads, int head_dim,
                            long long s_q, long long s_k)
{
    fa_problem_shape s;
    s.pass = FA_PASS_FWD;
    s.dtype = dtype;
    s.batch = batch;
    s.heads = heads;
    s.heads_k = heads;
    s.head_dim = head_dim;
    s.seqlen_q = s_q;
    s.seqlen_k = s_k;
    s.has_mask = 0;
    s.num_splits_request = 0;
    s.paged = 0;
    s.page_size = 0;
    s.tma_ok = 1;
    s.deterministic = 0;
    s.pack_gqa = 0;
    s.warpgroup = 0;
    return s;
}

// The registry a row selects from: its vendor's backend.
std::vector<fa_kernel_config> registry_for(const fa_arch_row *row)
{
    return compiled_registry(row->vendor == FA_VENDOR_CPU      ? FA_BACKEND_CPU
                             : row->vendor == FA_VENDOR_NVIDIA ? FA_BACKEND_CUDA
                                                               : FA_BACKEND_HIP);
}

// Largest head dim the AMD instances of a wave size cover (RDNA builds a subset).
int amd_max_head_dim(int wave)
{
    int count = 0, best = 0;
    const fa_kernel_config *reg = fa_registry(FA_BACKEND_HIP, &count);
    for (int i = 0; i < count; i++)
        if (reg[i].min_wave_size == wave && reg[i].head_dim > best) best = reg[i].head_dim;
    return best;
}

fa_status select(const fa_arch_row *row, const std::vector<fa_kernel_config> &reg,
                 const fa_problem_shape &shape, fa_selection *sel,
                 const fa_tile_override *force = nullptr)
{
    return fa_select_config(row, reg.data(), static_cast<int>(reg.size()), &shape, force, sel);
}

bool contains(const char *text, const char *part)
{
    return std::string(text).find(part) != std::string::npos;
}

struct seq_shape {
    int batch, heads;
    long long s_q, s_k;
};

const seq_shape k_shapes[] = {
    {1, 8, 1, 32768},    // decode
    {1, 16, 512, 512},   // small prefill
    {2, 32, 2048, 2048}, // medium
    {16, 16, 4096, 4096} // large
};

} // namespace

TEST_CASE("the CPU registry covers every dtype and head dim, inside the cpu row", "[dispatch]")
{
    int count = 0;
    const fa_kernel_config *reg = fa_registry(FA_BACKEND_CPU, &count);
    const fa_arch_row *cpu = fa_arch_find("cpu");
    REQUIRE(count > 0);
    for (fa_dtype dt : {FA_DTYPE_F32, FA_DTYPE_F16, FA_DTYPE_BF16}) {
        int n = 0;
        for (int i = 0; i < count; i++) n += reg[i].dtype == dt;
        CHECK(n >= 2);
    }
    for (int i = 0; i < count; i++) {
        INFO(reg[i].name);
        CHECK(reg[i].head_dim == FA_MAX_HEAD_DIM);
        CHECK(reg[i].compiled == 1);
        CHECK(reg[i].vendor == FA_VENDOR_CPU);
        CHECK(reg[i].smem_bytes <= cpu->smem_per_block);
    }
}

TEST_CASE("every row and head dim: the selection fits the row and covers the head dim",
          "[dispatch]")
{
    for (int r = 0; r < fa_arch_count(); r++) {
        const fa_arch_row *row = fa_arch_at(r);
        std::vector<fa_kernel_config> reg = registry_for(row);
        std::vector<fa_dtype> dtypes = {FA_DTYPE_F16, FA_DTYPE_BF16};
        if (row->vendor == FA_VENDOR_CPU) dtypes.push_back(FA_DTYPE_F32);
        for (fa_dtype dt : dtypes)
            for (int d = 8; d <= FA_MAX_HEAD_DIM; d += 8)
                for (const seq_shape &s : k_shapes) {
                    fa_problem_shape shape = make_shape(dt, s.batch, s.heads, d, s.s_q, s.s_k);
                    fa_selection sel;
                    fa_status st = select(row, reg, shape, &sel);
                    INFO(row->name << " d" << d << " dtype " << dt << " s_q " << s.s_q
                                   << ": " << sel.reason);
                    if (row->vendor == FA_VENDOR_AMD && d > amd_max_head_dim(row->wave_size)) {
                        CHECK(st == FA_ERR_UNSUPPORTED);
                        CHECK(sel.config == nullptr);
                        continue;
                    }
                    REQUIRE(st == FA_OK);
                    const fa_kernel_config *c = sel.config;
                    REQUIRE(c != nullptr);
                    CHECK(c->vendor == row->vendor);
                    if (row->vendor == FA_VENDOR_AMD) CHECK(c->min_wave_size == row->wave_size);
                    CHECK(c->dtype == dt);
                    CHECK(c->head_dim >= d);
                    CHECK(c->smem_bytes <= row->smem_per_block);
                    CHECK(c->threads <= row->max_threads_per_block);
                    CHECK(sel.blocks_per_sm >= 1);
                    CHECK(static_cast<long long>(sel.blocks_per_sm) * c->smem_bytes <=
                          row->smem_per_sm);
                    CHECK(sel.blocks_per_sm * c->threads <= row->max_threads_per_sm);
                    CHECK(sel.num_splits >= 1);
                    CHECK(sel.num_splits <= 128);
                    CHECK(sel.reason[0] != '\0');
                    // Never pad more than needed: no fitting config has a smaller
                    // covering head dim.
                    for (const fa_kernel_config &o : reg)
                        if (o.vendor == row->vendor && o.dtype == dt && o.head_dim >= d &&
                            (o.min_wave_size == 0 || o.min_wave_size == row->wave_size) &&
                            o.smem_bytes <= row->smem_per_block &&
                            o.threads <= row->max_threads_per_block)
                            CHECK(o.head_dim >= c->head_dim);
                }
    }
}

TEST_CASE("more shared memory never gives a smaller tile", "[dispatch]")
{
    // The rows are compared as they are, SM counts included. Should a future instance set
    // break this for small grids only, the cause is the machine's size, not its memory (a
    // machine with more SMs may prefer a smaller tile to fill them): then hold sm_count
    // equal here and say so.
    std::vector<fa_arch_row> rows;
    for (int r = 0; r < fa_arch_count(); r++)
        if (fa_arch_at(r)->vendor == FA_VENDOR_NVIDIA) rows.push_back(*fa_arch_at(r));
    std::vector<fa_kernel_config> reg = compiled_registry(FA_BACKEND_CUDA);

    for (int d = 8; d <= FA_MAX_HEAD_DIM; d += 8)
        for (const seq_shape &s : k_shapes)
            for (const fa_arch_row &big : rows)
                for (const fa_arch_row &small : rows) {
                    if (big.smem_per_block <= small.smem_per_block) continue;
                    fa_problem_shape shape =
                        make_shape(FA_DTYPE_BF16, s.batch, s.heads, d, s.s_q, s.s_k);
                    fa_selection a, b;
                    REQUIRE(select(&big, reg, shape, &a) == FA_OK);
                    REQUIRE(select(&small, reg, shape, &b) == FA_OK);
                    INFO("d" << d << " s_q " << s.s_q << ": " << big.name << " " << a.reason
                             << " | " << small.name << " " << b.reason);
                    CHECK(a.config->pack_gqa == b.config->pack_gqa);
                    // Decode calls too small for the bandwidth take the tile with the most
                    // resident threads, which may be a smaller one: then never a smaller
                    // tile with fewer resident threads too.
                    const bool larger = a.config->tile_m * a.config->tile_n >= b.config->tile_m * b.config->tile_n;
                    const bool more_threads = a.blocks_per_sm * a.config->threads >= b.blocks_per_sm * b.config->threads;
                    CHECK((larger || (a.config->pack_gqa && more_threads)));
                }
}

TEST_CASE("split-KV for decode on sm_90, not for big grids", "[dispatch]")
{
    const fa_arch_row *row = fa_arch_find("sm_90");
    std::vector<fa_kernel_config> reg = compiled_registry(FA_BACKEND_CUDA);
    fa_selection sel;

    fa_problem_shape decode = make_shape(FA_DTYPE_BF16, 1, 8, 128, 1, 32768);
    REQUIRE(select(row, reg, decode, &sel) == FA_OK);
    INFO(sel.reason);
    CHECK(sel.config->pack_gqa == 1);
    CHECK(sel.num_splits > 1);
    CHECK(sel.num_splits <= 128);
    // Enough blocks to fill every slot once, and no split without tiles.
    const long long tiles = 32768 / sel.config->tile_n;
    CHECK(8LL * sel.num_splits >= 1LL * row->sm_count * sel.blocks_per_sm * 3 / 4);
    CHECK((tiles + sel.num_splits - 1) / sel.num_splits * (sel.num_splits - 1) < tiles);
    CHECK(contains(sel.reason, "split-KV"));
    CHECK(contains(sel.reason, "shortest makespan"));

    // A prefill grid that fills the machine splits neither.
    fa_problem_shape big = make_shape(FA_DTYPE_BF16, 16, 16, 128, 4096, 4096);
    REQUIRE(select(row, reg, big, &sel) == FA_OK);
    CHECK(sel.config->pack_gqa == 0);
    CHECK(sel.num_splits == 1);
    // Nor does a decode grid of many blocks (64 x 8 KV heads, 4096 keys): the makespan
    // of one split is within the tie of the best.
    fa_problem_shape many = make_shape(FA_DTYPE_BF16, 64, 32, 128, 1, 4096);
    many.heads_k = 8;
    REQUIRE(select(row, reg, many, &sel) == FA_OK);
    INFO(sel.reason);
    CHECK(sel.config->pack_gqa == 1);
    CHECK(sel.num_splits <= 4);

    // Past one LSE round of the combine (a partial per lane of a warp) a split costs more:
    // b 1 x 8192 with 8 KV heads takes 32 splits of four 64-key tiles, not 43 of three
    // (measured 12.2 against 12.8 us, bench/NOTES.md dec6).
    fa_problem_shape b1 = make_shape(FA_DTYPE_BF16, 1, 32, 128, 1, 8192);
    b1.heads_k = 8;
    REQUIRE(select(row, reg, b1, &sel) == FA_OK);
    INFO(sel.reason);
    CHECK(sel.config->tile_n == 64);
    CHECK(sel.num_splits == 32);

    // A small grid with a short key sequence does not split either.
    fa_problem_shape short_k = make_shape(FA_DTYPE_BF16, 1, 8, 128, 1, 128);
    REQUIRE(select(row, reg, short_k, &sel) == FA_OK);
    CHECK(sel.num_splits == 1);
}

TEST_CASE("a requested num_splits is honored, capped at the K/V tile count", "[dispatch]")
{
    const fa_arch_row *row = fa_arch_find("sm_90");
    std::vector<fa_kernel_config> reg = compiled_registry(FA_BACKEND_CUDA);
    fa_selection sel;

    fa_problem_shape shape = make_shape(FA_DTYPE_F16, 16, 16, 128, 4096, 4096);
    shape.num_splits_request = 7;
    REQUIRE(select(row, reg, shape, &sel) == FA_OK);
    CHECK(sel.num_splits == 7);

    shape.num_splits_request = 1; // 1 = no split, even for decode
    shape.seqlen_q = 1;
    shape.seqlen_k = 32768;
    shape.batch = 1;
    REQUIRE(select(row, reg, shape, &sel) == FA_OK);
    CHECK(sel.num_splits == 1);

    shape.num_splits_request = 1000;
    shape.seqlen_k = 100; // 2 K/V tiles of 64
    REQUIRE(select(row, reg, shape, &sel) == FA_OK);
    CHECK(sel.num_splits == 2);
}

TEST_CASE("the CPU never splits", "[dispatch]")
{
    const fa_arch_row *row = fa_arch_find("cpu");
    std::vector<fa_kernel_config> reg = compiled_registry(FA_BACKEND_CPU);
    fa_selection sel;
    fa_problem_shape shape = make_shape(FA_DTYPE_F32, 1, 1, 64, 1, 1 << 20);
    REQUIRE(select(row, reg, shape, &sel) == FA_OK);
    CHECK(sel.num_splits == 1);
    shape.num_splits_request = 8;
    REQUIRE(select(row, reg, shape, &sel) == FA_OK);
    CHECK(sel.num_splits == 1);
}

TEST_CASE("FLASHATTN_FORCE_TILE syntax", "[dispatch]")
{
    fa_tile_override t;
    REQUIRE(fa_parse_tile_override("128x64", &t) == FA_OK);
    CHECK((t.tile_m == 128 && t.tile_n == 64 && t.stages == 0));
    REQUIRE(fa_parse_tile_override("64x128:3", &t) == FA_OK);
    CHECK((t.tile_m == 64 && t.tile_n == 128 && t.stages == 3));
    REQUIRE(fa_parse_tile_override(nullptr, &t) == FA_OK);
    CHECK(t.tile_m == 0);
    REQUIRE(fa_parse_tile_override("", &t) == FA_OK);
    CHECK(t.tile_m == 0);

    for (const char *bad : {"128", "128x", "x64", "128x64:", "128x64:0", "0x64", "128x0",
                            "-128x64", "+128x64", "128X64", "128*64", " 128x64", "128x64 ",
                            "128x64:2x", "128x64:2:3", "abc", "99999999999x64", "128x64x2"}) {
        INFO("\"" << bad << "\"");
        t.tile_m = 7;
        CHECK(fa_parse_tile_override(bad, &t) == FA_ERR_BAD_TILE_OVERRIDE);
        CHECK(t.tile_m == 0); // a rejected override is no override
    }
}

TEST_CASE("the tile override selects an existing tile or fails with a reason", "[dispatch]")
{
    std::vector<fa_kernel_config> reg = compiled_registry(FA_BACKEND_CUDA);
    fa_problem_shape shape = make_shape(FA_DTYPE_BF16, 2, 16, 128, 2048, 2048);
    fa_selection sel;

    // Every compiled tile that covers d128 can be forced within its family (prefill for
    // this shape, decode for a decode shape), and forcing it selects it.
    fa_problem_shape decode = make_shape(FA_DTYPE_BF16, 2, 16, 128, 1, 2048);
    for (const fa_kernel_config &c : reg) {
        if (c.dtype != FA_DTYPE_BF16 || c.head_dim < 128)
            continue;
        fa_tile_override force = {c.tile_m, c.tile_n, c.stages};
        INFO(c.name);
        REQUIRE(select(fa_arch_find("sm_90"), reg, c.pack_gqa ? decode : shape, &sel, &force) == FA_OK);
        CHECK((sel.config->tile_m == c.tile_m && sel.config->tile_n == c.tile_n &&
               sel.config->stages == c.stages));
    }

    // A tile that exists but does not fit the row's shared memory is refused, and the
    // reason names it and lists what would fit.
    fa_kernel_config big = reg[0];
    big.name = "test_d256_256x64x2";
    big.dtype = FA_DTYPE_BF16;
    big.head_dim = 256;
    big.tile_m = 256;
    big.tile_n = 64;
    big.stages = 2;
    big.smem_bytes = 128 * 1024;
    reg.push_back(big);
    fa_problem_shape wide = make_shape(FA_DTYPE_BF16, 2, 16, 256, 2048, 2048);
    fa_tile_override force = {256, 64, 0};
    REQUIRE(select(fa_arch_find("sm_90"), reg, wide, &sel, &force) == FA_OK);
    CHECK(select(fa_arch_find("sm_86"), reg, wide, &sel, &force) == FA_ERR_BAD_TILE_OVERRIDE);
    CHECK(sel.config == nullptr);
    CHECK(contains(sel.reason, "256x64"));
    CHECK(contains(sel.reason, "64x64")); // lists what would fit

    // No such tile; and a tile that exists only with other stages.
    force = {96, 96, 0};
    CHECK(select(fa_arch_find("sm_90"), reg, shape, &sel, &force) == FA_ERR_BAD_TILE_OVERRIDE);
    force = {128, 64, 7};
    CHECK(select(fa_arch_find("sm_90"), reg, shape, &sel, &force) == FA_ERR_BAD_TILE_OVERRIDE);

    // An override of zero is no override.
    force = {0, 0, 0};
    CHECK(select(fa_arch_find("sm_90"), reg, shape, &sel, &force) == FA_OK);
}

TEST_CASE("an unknown architecture's fallback row gets a config that fits it", "[dispatch]")
{
    std::vector<fa_kernel_config> reg = compiled_registry(FA_BACKEND_CUDA);
    fa_arch_row row = fa_arch_from_device("sm_120", FA_VENDOR_NVIDIA, 32, 101376, 102400, 65536,
                                          1024, 1536, 84, 1);
    for (int d = 8; d <= FA_MAX_HEAD_DIM; d += 8) {
        fa_selection sel;
        fa_problem_shape shape = make_shape(FA_DTYPE_F16, 4, 16, d, 1024, 1024);
        REQUIRE(select(&row, reg, shape, &sel) == FA_OK);
        CHECK(sel.config->smem_bytes <= row.smem_per_block);
        CHECK(sel.config->threads <= row.max_threads_per_block);
        CHECK(sel.config->head_dim >= d);
    }
    // A small reported shared memory leaves no d256 config: unsupported, with the limit.
    fa_arch_row tiny = fa_arch_from_device("sm_121", FA_VENDOR_NVIDIA, 32, 49152, 65536, 65536,
                                           1024, 1536, 20, 1);
    fa_selection sel;
    fa_problem_shape shape = make_shape(FA_DTYPE_F16, 4, 16, 256, 1024, 1024);
    CHECK(select(&tiny, reg, shape, &sel) == FA_ERR_UNSUPPORTED);
    CHECK(contains(sel.reason, "shared memory"));
}

TEST_CASE("unsupported requests say why", "[dispatch]")
{
    const fa_arch_row *sm90 = fa_arch_find("sm_90");
    std::vector<fa_kernel_config> reg = compiled_registry(FA_BACKEND_CUDA);
    fa_selection sel;

    // The CUDA backward covers d256 where its 145 KiB of shared memory fit (sm_80, sm_90);
    // sm_86's 99 KiB do not, and the reason says so.
    int bwd_count = 0;
    const fa_kernel_config *bwd_configs = fa_registry_bwd(FA_BACKEND_CUDA, &bwd_count);
    std::vector<fa_kernel_config> bwd_reg(bwd_configs, bwd_configs + bwd_count);
    for (fa_kernel_config &c : bwd_reg) {
        CHECK(c.atomic_dq == 1); // every CUDA dK/dV kernel has the atomic dQ phase
        c.compiled = 1;
    }
    fa_problem_shape bwd = make_shape(FA_DTYPE_BF16, 1, 8, 256, 128, 128);
    bwd.pass = FA_PASS_BWD;
    REQUIRE(select(sm90, bwd_reg, bwd, &sel) == FA_OK);
    CHECK(sel.config->head_dim == 256);
    CHECK(select(fa_arch_find("sm_86"), bwd_reg, bwd, &sel) == FA_ERR_UNSUPPORTED);
    CHECK(contains(sel.reason, "shared memory"));
    bwd.head_dim = 128;
    CHECK(select(sm90, bwd_reg, bwd, &sel) == FA_OK);
    CHECK(select(fa_arch_find("sm_86"), bwd_reg, bwd, &sel) == FA_OK);

    fa_problem_shape f32 = make_shape(FA_DTYPE_F32, 1, 8, 128, 128, 128);
    CHECK(select(sm90, reg, f32, &sel) == FA_ERR_UNSUPPORTED);
    CHECK(contains(sel.reason, "f32"));

    fa_problem_shape wide = make_shape(FA_DTYPE_BF16, 1, 8, 264, 128, 128);
    CHECK(select(sm90, reg, wide, &sel) == FA_ERR_UNSUPPORTED);
    CHECK(contains(sel.reason, "264"));

    // Planned (not compiled) configs are never selected.
    std::vector<fa_kernel_config> planned = reg;
    for (fa_kernel_config &c : planned) c.compiled = 0;
    fa_problem_shape ok = make_shape(FA_DTYPE_BF16, 1, 8, 128, 128, 128);
    CHECK(select(sm90, planned, ok, &sel) == FA_ERR_UNSUPPORTED);
    CHECK(contains(sel.reason, "not compiled"));

    // AMD rows against the real HIP registry: head dims above RDNA's subset say why.
    std::vector<fa_kernel_config> hip = compiled_registry(FA_BACKEND_HIP);
    REQUIRE(select(fa_arch_find("gfx942"), hip, ok, &sel) == FA_OK);
    CHECK(contains(sel.reason, "CU"));
    fa_problem_shape d256 = make_shape(FA_DTYPE_BF16, 1, 8, 256, 128, 128);
    CHECK(select(fa_arch_find("gfx1100"), hip, d256, &sel) == FA_ERR_UNSUPPORTED);
    CHECK(contains(sel.reason, "wave"));
}

TEST_CASE("the selection is pure: same inputs, same output", "[dispatch]")
{
    std::vector<fa_kernel_config> reg = compiled_registry(FA_BACKEND_CUDA);
    const std::vector<fa_kernel_config> before = reg;
    for (int r = 0; r < fa_arch_count(); r++) {
        const fa_arch_row *row = fa_arch_at(r);
        const fa_arch_row row_before = *row;
        std::vector<fa_kernel_config> rreg = registry_for(row);
        for (const seq_shape &s : k_shapes) {
            fa_problem_shape shape = make_shape(FA_DTYPE_BF16, s.batch, s.heads, 96, s.s_q, s.s_k);
            const fa_problem_shape shape_before = shape;
            fa_selection a, b, other;
            fa_status sa = select(row, rreg, shape, &a);
            fa_problem_shape unrelated = make_shape(FA_DTYPE_F16, 3, 5, 40, 77, 999);
            select(row, rreg, unrelated, &other);
            fa_status sb = select(row, rreg, shape, &b);
            INFO(row->name << ": " << a.reason);
            CHECK(sa == sb);
            CHECK(a.config == b.config);
            CHECK(a.blocks_per_sm == b.blocks_per_sm);
            CHECK(a.num_splits == b.num_splits);
            CHECK(std::string(a.reason) == b.reason);
            CHECK(std::memcmp(&shape, &shape_before, sizeof shape) == 0);
            CHECK(std::memcmp(row, &row_before, sizeof *row) == 0);
        }
    }
    CHECK(std::memcmp(reg.data(), before.data(), reg.size() * sizeof reg[0]) == 0);
}

TEST_CASE("the reason explains the choice in words", "[dispatch]")
{
    std::vector<fa_kernel_config> reg = compiled_registry(FA_BACKEND_CUDA);
    fa_selection sel;
    fa_problem_shape shape = make_shape(FA_DTYPE_BF16, 2, 32, 128, 2048, 2048);
    REQUIRE(select(fa_arch_find("sm_80"), reg, shape, &sel) == FA_OK);
    INFO(sel.reason);
    CHECK(contains(sel.reason, "d128 bf16 128x64x2"));
    CHECK(contains(sel.reason, "1 blocks/SM by smem"));
    CHECK(contains(sel.reason, "grid 1024 blocks"));
    CHECK(contains(sel.reason, "waves"));
    CHECK(!contains(sel.reason, "family ("));

    // sm_90: the warpgroup family, said so.
    REQUIRE(select(fa_arch_find("sm_90"), reg, shape, &sel) == FA_OK);
    INFO(sel.reason);
    CHECK(contains(sel.reason, "d128 bf16 128x128x2"));
    CHECK(contains(sel.reason, "warpgroup family (wgmma + TMA, sm_90a)"));
    CHECK(sel.config->warpgroup == 1);
    CHECK(sel.persistent_blocks == fa_arch_find("sm_90")->sm_count * sel.blocks_per_sm); // one per slot
    CHECK(sel.walk_draws == 0);
    CHECK(contains(sel.reason, "132 persistent blocks"));
    CHECK(!contains(sel.reason, "drawing"));
    // Masked, short or long: drawn tiles (walk_draws), once there are more work tiles
    // (128-row query tiles of 32 heads x 2 batch entries) than the 132 blocks.
    fa_problem_shape causal = shape;
    causal.has_mask = 1;
    for (int keys : {100, 256, 300, 1024, 1025}) {
        causal.seqlen_q = causal.seqlen_k = keys;
        REQUIRE(select(fa_arch_find("sm_90"), reg, causal, &sel) == FA_OK);
        INFO(keys << " keys: " << sel.reason);
        CHECK(sel.config->warpgroup == 1);
        CHECK(sel.config->tile_m == 128);
        CHECK(sel.persistent_blocks == fa_arch_find("sm_90")->sm_count * sel.blocks_per_sm);
        const bool more_tiles_than_blocks = (keys + 127) / 128 * 64 > 132;
        CHECK(sel.num_splits == 1);
        CHECK(sel.walk_draws == more_tiles_than_blocks);
        CHECK(contains(sel.reason, "132 persistent blocks drawing their tiles (masked)") == more_tiles_than_blocks);
    }
    // Not masked, any length: static.
    causal.has_mask = 0;
    REQUIRE(select(fa_arch_find("sm_90"), reg, causal, &sel) == FA_OK);
    CHECK(sel.persistent_blocks > 0);
    CHECK(sel.walk_draws == 0);
    // Its blocks take the whole register file (one per SM), which the estimate sees: the
    // d64 tile's shared memory alone would fit three.
    fa_problem_shape d64 = shape;
    d64.head_dim = 64;
    REQUIRE(select(fa_arch_find("sm_90"), reg, d64, &sel) == FA_OK);
    INFO(sel.reason);
    CHECK(sel.config->warpgroup == 1);
    CHECK(sel.blocks_per_sm == 1);
    CHECK(contains(sel.reason, "1 blocks/SM by regs (128 regs/thread"));

    // ... unless that pads more: d72 runs mma.sync's d96, not the warpgroup d128.
    shape.head_dim = 72;
    REQUIRE(select(fa_arch_find("sm_90"), reg, shape, &sel) == FA_OK);
    INFO(sel.reason);
    CHECK(contains(sel.reason, "padded to 96"));
    CHECK(contains(sel.reason, "mma.sync family: its d96 pads less than the warpgroup family's d128"));
    CHECK(sel.config->warpgroup == 0);
    CHECK(sel.persistent_blocks == 0);

    // ... or when the operands cannot be read through tensor maps.
    shape.head_dim = 128;
    shape.tma_ok = 0;
    REQUIRE(select(fa_arch_find("sm_90"), reg, shape, &sel) == FA_OK);
    INFO(sel.reason);
    CHECK(contains(sel.reason, "d128 bf16 128x64x2"));
    CHECK(contains(sel.reason, "mma.sync family: an operand is not TMA-addressable"));
    shape.tma_ok = 1;

    // ... or when its walk could count 2^31 work tiles or more: 2^20 sequences
    // (varlen, at most 1024 queries each) x 32 heads x 16 query tiles x up to 128 splits.
    fa_problem_shape many = shape;
    many.batch = 1 << 20;
    many.seqlen_q = 1024;
    REQUIRE(select(fa_arch_find("sm_90"), reg, many, &sel) == FA_OK);
    INFO(sel.reason);
    CHECK(sel.config->warpgroup == 0);
    CHECK(contains(sel.reason, "mma.sync family: more work tiles than the warpgroup walk counts (2^31)"));
    many.batch = 1 << 10; // 2^10 x 32 x 16 x 128 = 2^26: the warpgroup family
    REQUIRE(select(fa_arch_find("sm_90"), reg, many, &sel) == FA_OK);
    CHECK(sel.config->warpgroup == 1);

    // ... or when the forced tile is the mma.sync kernels' alone (the warpgroup family
    // has neither 128x64 nor 64x64).
    fa_tile_override mma_tile = {128, 64, 0};
    REQUIRE(select(fa_arch_find("sm_90"), reg, shape, &sel, &mma_tile) == FA_OK);
    INFO(sel.reason);
    CHECK(sel.config->warpgroup == 0);
    CHECK(contains(sel.reason, "mma.sync family: no warpgroup instance has the forced tile"));
    mma_tile = {64, 64, 0};
    REQUIRE(select(fa_arch_find("sm_90"), reg, shape, &sel, &mma_tile) == FA_OK);
    INFO(sel.reason);
    CHECK(sel.config->warpgroup == 0);
    CHECK(contains(sel.reason, "mma.sync family: no warpgroup instance has the forced tile"));

    // 4 x 8 x 4096 K/V rows are ~1000 per SM, latency-bound: the 16-row tile with the most
    // resident threads; 64 x 8 x 4096 are past DECODE_LATENCY_ROWS: the longest key tile.
    fa_problem_shape decode = make_shape(FA_DTYPE_BF16, 4, 32, 128, 1, 4096);
    decode.heads_k = 8;
    REQUIRE(select(fa_arch_find("sm_90"), reg, decode, &sel) == FA_OK);
    INFO(sel.reason);
    CHECK(contains(sel.reason, "d128 bf16 16x64x2"));
    fa_problem_shape big_decode = decode;
    big_decode.batch = 64;
    REQUIRE(select(fa_arch_find("sm_90"), reg, big_decode, &sel) == FA_OK);
    INFO(sel.reason);
    CHECK(contains(sel.reason, "d128 bf16 16x128x2"));
    CHECK(contains(sel.reason, "decode family: 4 packed rows (4 query heads x 1 positions)"));
}

TEST_CASE("sm_90 backwards run the warpgroup backward unless padded more, deterministic ones only where it "
          "orders dQ",
          "[dispatch]")
{
    std::vector<fa_kernel_config> reg = compiled_registry(FA_BACKEND_CUDA, FA_PASS_BWD);
    const fa_arch_row *sm90 = fa_arch_find("sm_90");
    fa_selection sel;
    fa_problem_shape shape = make_shape(FA_DTYPE_BF16, 4, 16, 128, 4096, 4096);
    shape.pass = FA_PASS_BWD;
    REQUIRE(select(sm90, reg, shape, &sel) == FA_OK);
    INFO(sel.reason);
    CHECK(std::string(sel.config->name) == "fa_cuda_bws_d128_bf16_80x128x2");
    CHECK(contains(sel.reason, "warpgroup family (wgmma + TMA, sm_90a)"));
    CHECK(sel.config->atomic_dq == 1);
    CHECK(sel.config->ordered_dq == 1);
    CHECK(sel.persistent_blocks == 0); // a block per key tile, as the mma.sync backward
    shape.deterministic = 1; // its dQ adds in key-block order
    REQUIRE(select(sm90, reg, shape, &sel) == FA_OK);
    CHECK(std::string(sel.config->name) == "fa_cuda_bws_d128_bf16_80x128x2");
    shape.deterministic = 0;
    shape.has_mask = 1; // 80-query steps under a causal mask too (as fast or faster, bws_instances.txt)
    REQUIRE(select(sm90, reg, shape, &sel) == FA_OK);
    CHECK(sel.config->warpgroup == 1);
    CHECK(std::string(sel.config->name) == "fa_cuda_bws_d128_bf16_80x128x2");
    // 64-query steps where 80 would pad the query rows by more than the cost tolerance.
    for (int s_q : {64, 128, 192, 256}) {
        fa_problem_shape short_q = make_shape(FA_DTYPE_BF16, 4, 16, 128, s_q, 4096);
        short_q.pass = FA_PASS_BWD;
        REQUIRE(select(sm90, reg, short_q, &sel) == FA_OK);
        INFO("s_q " << s_q << ": " << sel.reason);
        CHECK(std::string(sel.config->name) == "fa_cuda_bws_d128_bf16_64x128x2");
    }
    shape.head_dim = 64;
    shape.dtype = FA_DTYPE_F16;
    REQUIRE(select(sm90, reg, shape, &sel) == FA_OK);
    CHECK(std::string(sel.config->name) == "fa_cuda_bws_d64_f16_128x128x2");
    // d256 (and d224, d200: no mma.sync instance pads less) splits the head dim between
    // its consumers, and so does d192 (and d160, d176: the mma.sync d192 pads as much),
    // deterministic calls included.
    for (int d : {160, 176, 192, 200, 224, 256})
        for (int deterministic : {0, 1}) {
            shape.head_dim = d;
            shape.deterministic = deterministic;
            REQUIRE(select(sm90, reg, shape, &sel) == FA_OK);
            INFO(sel.reason);
            CHECK(std::string(sel.config->name) ==
                  (d <= 192 ? "fa_cuda_bws_d192_f16_64x64x2" : "fa_cuda_bws_d256_f16_64x64x2"));
            CHECK(sel.config->ordered_dq == 1);
        }
    shape.deterministic = 0;
    shape.head_dim = 64; // the checks below as before: d64 f16

    struct fallback {
        int head_dim, deterministic, tma_ok;
        const char *why;
    } const fallbacks[] = {
        {128, 0, 0, "mma.sync family: an operand is not TMA-addressable"},
        {96, 0, 1, "mma.sync family: its d96 pads less than the warpgroup family's d128"},
    };
    for (const fallback &f : fallbacks) {
        fa_problem_shape s = make_shape(FA_DTYPE_BF16, 4, 16, f.head_dim, 4096, 4096);
        s.pass = FA_PASS_BWD;
        s.deterministic = f.deterministic;
        s.tma_ok = f.tma_ok;
        REQUIRE(select(sm90, reg, s, &sel) == FA_OK);
        INFO(sel.reason);
        CHECK(sel.config->warpgroup == 0);
        CHECK(contains(sel.config->name, "_bwd_"));
        CHECK(contains(sel.reason, f.why));
    }
    // Rows without warpgroup MMA never see it.
    REQUIRE(select(fa_arch_find("sm_80"), reg, shape, &sel) == FA_OK);
    CHECK(sel.config->warpgroup == 0);

    // A warpgroup backward that could not order its dQ adds serves no deterministic call.
    std::vector<fa_kernel_config> unordered = reg;
    for (fa_kernel_config &c : unordered)
        c.ordered_dq = 0;
    shape.deterministic = 1;
    REQUIRE(select(sm90, unordered, shape, &sel) == FA_OK);
    INFO(sel.reason);
    CHECK(contains(sel.config->name, "_bwd_"));
    CHECK(contains(sel.reason, "orders its dQ adds (deterministic)"));
    shape.deterministic = 0;
    REQUIRE(select(sm90, unordered, shape, &sel) == FA_OK);
    CHECK(sel.config->warpgroup == 1);
}

// The ranking is a strict order whatever the candidates' estimates: the choice does not
// depend on where a config stands in the registry (only exact ties keep the earlier one,
// and no two configs of one family, head dim and dtype tie on every rule).
TEST_CASE("the choice does not depend on the registry's order", "[dispatch]")
{
    std::vector<fa_kernel_config> reg = compiled_registry(FA_BACKEND_CUDA);
    std::vector<fa_kernel_config> reversed(reg.rbegin(), reg.rend());
    for (int r = 0; r < fa_arch_count(); r++) {
        const fa_arch_row *row = fa_arch_at(r);
        if (row->vendor != FA_VENDOR_NVIDIA) continue;
        for (int d : {64, 96, 128, 256})
            for (long long b : {1LL, 2LL, 4LL, 16LL, 64LL})
                for (long long s_k : {4096LL, 8192LL, 32768LL})
                    for (int paged : {0, 1}) {
                        fa_problem_shape shape = make_shape(FA_DTYPE_BF16, b, 32, d, 1, s_k);
                        shape.heads_k = 8;
                        shape.paged = paged;
                        shape.page_size = paged ? 16 : 0;
                        fa_selection a, z;
                        REQUIRE(select(row, reg, shape, &a) == FA_OK);
                        REQUIRE(select(row, reversed, shape, &z) == FA_OK);
                        INFO(row->name << " d" << d << " b" << b << " s_k " << s_k << " paged " << paged << ": "
                                       << a.reason << " | " << z.reason);
                        CHECK(std::string(a.config->name) == z.config->name);
                    }
    }
}

TEST_CASE("the decode family takes paged K/V and packs that fit its tiles", "[dispatch]")
{
    const fa_arch_row *row = fa_arch_find("sm_90");
    std::vector<fa_kernel_config> reg = compiled_registry(FA_BACKEND_CUDA);
    fa_selection sel;
    struct family_case {
        int heads, heads_k;
        long long s_q;
        int paged, decode, tile_m;
    } cases[] = {
        {32, 8, 1, 0, 1, 16},     // G 4 x 1 position: a 16-row tile
        {32, 8, 4, 0, 1, 16},     // speculative s_q 4: 16 rows
        {32, 8, 16, 0, 1, 64},    // 64 packed rows: the 64-row tile
        {32, 1, 1, 0, 1, 32},     // MQA: 32 packed rows, the 32-row tile
        {32, 32, 1, 0, 1, 16},    // MHA decode
        {32, 8, 17, 0, 0, 128},   // 68 packed rows: prefill
        {32, 8, 4096, 1, 1, 64},  // paged prefill: decode family at any size
    };
    for (const family_case &fc : cases) {
        fa_problem_shape shape = make_shape(FA_DTYPE_BF16, 4, fc.heads, 128, fc.s_q, 8192);
        shape.heads_k = fc.heads_k;
        shape.paged = fc.paged;
        INFO("h " << fc.heads << " h_k " << fc.heads_k << " s_q " << fc.s_q << " paged " << fc.paged);
        REQUIRE(select(row, reg, shape, &sel) == FA_OK);
        INFO(sel.reason);
        CHECK(sel.config->pack_gqa == fc.decode);
        CHECK(sel.config->tile_m == fc.tile_m);
    }
    // Paged: a key tile inside one page wins among the 16-row tiles (sm_90 has 16x64 and
    // 16x128 at d128); pages of 16 fit none, so the tile with more resident threads per SM
    // wins (16x64: 3 blocks of 128 against 16x128's one).
    for (int page : {16, 64, 128, 256}) {
        fa_problem_shape paged_decode = make_shape(FA_DTYPE_BF16, 16, 32, 128, 1, 8192);
        paged_decode.heads_k = 8;
        paged_decode.paged = 1;
        paged_decode.page_size = page;
        REQUIRE(select(row, reg, paged_decode, &sel) == FA_OK);
        INFO("page " << page << ": " << sel.reason);
        CHECK(sel.config->tile_n == (page <= 64 ? 64 : 128));
    }
    // A forced prefill tile serves a decode-sized problem from the prefill family; a paged
    // one has no such fallback.
    fa_problem_shape decode = make_shape(FA_DTYPE_BF16, 4, 32, 128, 1, 8192);
    decode.heads_k = 8;
    fa_tile_override prefill_tile = {128, 64, 2};
    REQUIRE(select(row, reg, decode, &sel, &prefill_tile) == FA_OK);
    CHECK(sel.config->pack_gqa == 0);
    decode.paged = 1;
    CHECK(select(row, reg, decode, &sel, &prefill_tile) == FA_ERR_BAD_TILE_OVERRIDE);
    // The CPU has no decode family: its loops page by themselves.
    std::vector<fa_kernel_config> cpu = compiled_registry(FA_BACKEND_CPU);
    fa_problem_shape paged = make_shape(FA_DTYPE_BF16, 4, 32, 128, 1, 8192);
    paged.paged = 1;
    REQUIRE(select(fa_arch_find("cpu"), cpu, paged, &sel) == FA_OK);
    CHECK(sel.config->pack_gqa == 0);
}

// The Q-in-registers family (qreg_instances.txt: CDNA wave64, d64 and d128) against the
// real HIP registry: it runs CDNA's d128 prefill, never a wave32 row, never a decode-sized
// GQA call (the decode family's), never a head dim it does not list.
TEST_CASE("the Q-in-registers family runs CDNA's d128 prefill, not RDNA, decode or other head dims",
          "[dispatch]")
{
    std::vector<fa_kernel_config> hip = compiled_registry(FA_BACKEND_HIP);
    fa_selection sel;
    auto name_of = [&](const char *arch, fa_problem_shape shape) {
        INFO(arch << " d" << shape.head_dim << " s_q " << shape.seqlen_q);
        REQUIRE(select(fa_arch_find(arch), hip, shape, &sel) == FA_OK);
        return std::string(sel.config->name);
    };
    const fa_problem_shape prefill = make_shape(FA_DTYPE_BF16, 4, 32, 128, 4096, 4096);
    for (const char *arch : {"gfx942", "gfx90a"}) {
        const std::string name = name_of(arch, prefill);
        CHECK(contains(name.c_str(), "_qreg_d128_"));
        CHECK(sel.config->threads == 512);
        CHECK(sel.config->smem_bytes == FA_QREG_SMEM_BYTES(128, 256, 32, 2)); // the ping-pong's two stages
    }
    CHECK(!contains(name_of("gfx1100", prefill).c_str(), "_qreg_"));
    fa_problem_shape decode = make_shape(FA_DTYPE_BF16, 4, 32, 128, 1, 8192);
    decode.heads_k = 8;
    CHECK(contains(name_of("gfx942", decode).c_str(), "_dec_"));
    fa_problem_shape d96 = make_shape(FA_DTYPE_BF16, 4, 32, 96, 4096, 4096);
    CHECK(contains(name_of("gfx942", d96).c_str(), "_fwd_d96_"));
}

TEST_CASE("the CPU backward registry fits the cpu row and covers every head dim",
          "[dispatch][bwd]")
{
    int count = 0;
    const fa_kernel_config *reg = fa_registry_bwd(FA_BACKEND_CPU, &count);
    const fa_arch_row *cpu = fa_arch_find("cpu");
    REQUIRE(count > 0);
    for (int i = 0; i < count; i++) {
        INFO(reg[i].name);
        CHECK(reg[i].pass == FA_PASS_BWD);
        CHECK(reg[i].vendor == FA_VENDOR_CPU);
        CHECK(reg[i].compiled == 1);
        CHECK(reg[i].smem_bytes <= cpu->smem_per_block);
    }
    for (fa_dtype dt : {FA_DTYPE_F32, FA_DTYPE_F16, FA_DTYPE_BF16})
        for (int d = 8; d <= FA_MAX_HEAD_DIM; d += 8) {
            fa_problem_shape shape = make_shape(dt, 1, 16, d, 2048, 2048);
            shape.pass = FA_PASS_BWD;
            shape.num_splits_request = 4; // the backward never splits
            fa_selection sel;
            std::vector<fa_kernel_config> list(reg, reg + count);
            INFO("d" << d << " dtype " << dt);
            REQUIRE(select(cpu, list, shape, &sel) == FA_OK);
            CHECK(sel.config->pass == FA_PASS_BWD);
            CHECK(sel.config->dtype == dt);
            CHECK(sel.config->head_dim >= d);
            CHECK(sel.num_splits == 1);
        }
}

// The largest legal sizes (every dim at INT32_MAX, reachable with stride-0 operands) and
// empty ones: the estimate's products stay in range (UBSan runs this in CI) and every
// selection that succeeds has a split count, forward and backward.
TEST_CASE("extreme and empty sizes select without overflow", "[dispatch]")
{
    const long long big = 2147483647LL;
    for (int r = 0; r < fa_arch_count(); r++) {
        const fa_arch_row *row = fa_arch_at(r);
        fa_backend backend = row->vendor == FA_VENDOR_CPU      ? FA_BACKEND_CPU
                             : row->vendor == FA_VENDOR_NVIDIA ? FA_BACKEND_CUDA
                                                               : FA_BACKEND_HIP;
        for (fa_pass pass : {FA_PASS_FWD, FA_PASS_BWD}) {
            int count = 0;
            const fa_kernel_config *listed =
                pass == FA_PASS_BWD ? fa_registry_bwd(backend, &count) : fa_registry(backend, &count);
            std::vector<fa_kernel_config> compiled(listed, listed + count);
            for (fa_kernel_config &c : compiled) c.compiled = 1; // rank every config
            const fa_kernel_config *reg = compiled.data();
            for (long long s : {0LL, 1LL, big})
                for (int splits : {0, 128}) {
                    fa_problem_shape shape = make_shape(FA_DTYPE_F16, int(big), int(big), 32, s, big - s);
                    shape.pass = pass;
                    shape.num_splits_request = splits;
                    fa_selection sel;
                    fa_status st = fa_select_config(row, reg, count, &shape, nullptr, &sel);
                    INFO(row->name << " pass " << pass << " s_q " << s << ": " << sel.reason);
                    if (st == FA_OK)
                        CHECK(sel.num_splits >= 1);
                }
        }
    }
}
