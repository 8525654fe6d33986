// test_hip_bwd_dispatch.cpp - the HIP backward registry against bwd_instances.h (kernel_id
// order = hip_backend.cpp's launch table) and what the dispatcher selects for the AMD
// rows from it. Pure host code: runs in every build.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "select/bwd_instances.h"
#include "select/dispatch.h"

namespace {

struct bwd_entry {
    int hd, m, n, w, s;
};

#define FA_TEST_ENTRY(hd, m, n, w, s) {hd, m, n, w, s},
const bwd_entry k_all[] = {FA_HIP_BWD_INSTANCES(FA_TEST_ENTRY)};
// A vector: the wave32 list may be empty.
const std::vector<bwd_entry> k_wave32 = {FA_HIP_WAVE32_BWD_INSTANCES(FA_TEST_ENTRY)};
#undef FA_TEST_ENTRY
const int k_n_all = static_cast<int>(sizeof k_all / sizeof k_all[0]);
const int k_n_w32 = static_cast<int>(k_wave32.size());

// Largest head dim the entries of a list cover.
int max_head_dim(const bwd_entry *list, int n)
{
    int best = 0;
    for (int i = 0; i < n; i++)
        if (list[i].hd > best) best = list[i].hd;
    return best;
}

} // namespace

TEST_CASE("the HIP backward registry expands bwd_instances.h: wave64 all, wave32 the W list",
          "[dispatch][bwd]")
{
    int count = 0;
    const fa_kernel_config *reg = fa_registry_bwd(FA_BACKEND_HIP, &count);
    REQUIRE(count == 2 * (k_n_all + k_n_w32));
    for (int i = 0; i < count; i++) {
        const fa_kernel_config &c = reg[i];
        const bool w64 = i < 2 * k_n_all;
        const bwd_entry &e = w64 ? k_all[i / 2] : k_wave32[(i - 2 * k_n_all) / 2];
        int index = 0; // the entry's place in the A list: its launch-table slot
        while (index < k_n_all && (k_all[index].hd != e.hd || k_all[index].m != e.m ||
                                   k_all[index].n != e.n || k_all[index].s != e.s))
            index++;
        INFO(c.name);
        REQUIRE(index < k_n_all);
        CHECK(c.kernel_id == 2 * index + (i % 2));
        CHECK(c.dtype == (i % 2 ? FA_DTYPE_BF16 : FA_DTYPE_F16));
        CHECK(c.pass == FA_PASS_BWD);
        CHECK(c.backend == FA_BACKEND_HIP);
        CHECK(c.vendor == FA_VENDOR_AMD);
        CHECK(c.min_wave_size == (w64 ? 64 : 32));
        // Only wave64 dK/dV kernels add dQ with atomics (src/hip/fa_device.h).
        CHECK(c.atomic_dq == (w64 ? 1 : 0));
        CHECK(c.threads == e.w * c.min_wave_size);
        // attn_bwd.h's shape: 16 resident rows per wave, whole row groups per wave.
        CHECK(c.tile_n % 16 == 0);
        CHECK((16 * e.w) % c.tile_n == 0);
        CHECK(c.smem_bytes == FA_BWD_SMEM_BYTES(e.hd, e.m, e.n, e.s));
        CHECK(c.smem_bytes <= 64 * 1024); // gfx90a, gfx942 and RDNA: 64 KiB per workgroup
    }
}

TEST_CASE("AMD rows select a HIP backward config up to the head dim their list covers",
          "[dispatch][bwd]")
{
    int count = 0;
    const fa_kernel_config *reg = fa_registry_bwd(FA_BACKEND_HIP, &count);
    std::vector<fa_kernel_config> compiled(reg, reg + count);
    for (fa_kernel_config &c : compiled) c.compiled = 1;
    for (const char *name : {"gfx90a", "gfx942", "gfx1100", "gfx1201"}) {
        const fa_arch_row *row = fa_arch_find(name);
        REQUIRE(row != nullptr);
        const int covered = row->wave_size == 64 ? max_head_dim(k_all, k_n_all)
                                                 : max_head_dim(k_wave32.data(), k_n_w32);
        for (fa_dtype dt : {FA_DTYPE_F16, FA_DTYPE_BF16})
            for (int d = 8; d <= FA_MAX_HEAD_DIM; d += 8) {
                fa_problem_shape shape = {};
                shape.pass = FA_PASS_BWD;
                shape.dtype = dt;
                shape.batch = 2;
                shape.heads = 16;
                shape.heads_k = 4;
                shape.head_dim = d;
                shape.seqlen_q = 2048;
                shape.seqlen_k = 2048;
                fa_selection sel;
                fa_status st = fa_select_config(row, compiled.data(), count, &shape, nullptr, &sel);
                INFO(name << " d" << d << " dtype " << dt << ": " << sel.reason);
                if (d > covered) {
                    CHECK(st == FA_ERR_UNSUPPORTED);
                    continue;
                }
                REQUIRE(st == FA_OK);
                CHECK(sel.config->pass == FA_PASS_BWD);
                CHECK(sel.config->dtype == dt);
                CHECK(sel.config->head_dim >= d);
                CHECK(sel.config->min_wave_size == row->wave_size);
                CHECK(sel.config->smem_bytes <= row->smem_per_block);
                CHECK(sel.num_splits == 1);
            }
    }
}
