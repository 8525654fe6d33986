// test_hip_bwd_dispatch.cpp - what the dispatcher selects for the AMD rows from the HIP
// backward registry (test_registry.cpp checks the registry itself). Pure host code: runs
// in every build.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "select/registry.h"

namespace {

// Largest head dim the HIP backward configs of a wave size cover (RDNA builds a subset).
int max_head_dim(int wave)
{
    int count = 0, best = 0;
    const fa_kernel_config *reg = fa_registry_bwd(FA_BACKEND_HIP, &count);
    for (int i = 0; i < count; i++)
        if (reg[i].min_wave_size == wave && reg[i].head_dim > best) best = reg[i].head_dim;
    return best;
}

} // namespace

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
        const int covered = max_head_dim(row->wave_size);
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
