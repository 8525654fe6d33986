// test_registry.cpp - the generated registry against the instance lists it is generated
// from (src/common/select/fwd_instances.txt, dec_instances.txt (the decode family, forward
// configs after fwd's), bwd_instances.txt, read here by a parser of
// the test's own): every row, for each dtype and wave size, in list order, with the
// fields, name, shared memory and launch handles the rules say. Also: names are unique,
// and configs of the vendors this build holds point at kernels, the others at none.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gpu_kernels/smem_bytes.h"
#include "select/registry.h"

namespace {

struct list_row {
    std::string vendor;
    int head_dim, tile_m, tile_n, warps, stages;
    std::vector<std::string> waves, dtypes;
};

std::vector<std::string> split_commas(const std::string &text)
{
    std::vector<std::string> out;
    std::stringstream in(text);
    for (std::string part; std::getline(in, part, ',');) out.push_back(part);
    return out;
}

std::vector<list_row> read_list(const char *pass)
{
    const std::string path = std::string(FA_INSTANCE_LIST_DIR) + "/" + pass + "_instances.txt";
    std::ifstream in(path);
    REQUIRE(in.good());
    std::vector<list_row> rows;
    for (std::string line; std::getline(in, line);) {
        std::stringstream fields(line);
        list_row r;
        std::string waves, dtypes;
        if (!(fields >> r.vendor) || r.vendor[0] == '#') continue;
        INFO(path << ": " << line);
        REQUIRE(fields >> r.head_dim >> r.tile_m >> r.tile_n >> r.warps >> r.stages >> waves >> dtypes);
        r.waves = split_commas(waves);
        r.dtypes = split_commas(dtypes);
        rows.push_back(r);
    }
    return rows;
}

fa_backend backend_of(const std::string &vendor)
{
    return vendor == "cuda" ? FA_BACKEND_CUDA : vendor == "hip" ? FA_BACKEND_HIP : FA_BACKEND_CPU;
}

fa_vendor vendor_of(const std::string &vendor)
{
    return vendor == "cuda" ? FA_VENDOR_NVIDIA : vendor == "hip" ? FA_VENDOR_AMD : FA_VENDOR_CPU;
}

fa_dtype dtype_of(const std::string &dtype)
{
    return dtype == "f32" ? FA_DTYPE_F32 : dtype == "f16" ? FA_DTYPE_F16 : FA_DTYPE_BF16;
}

bool built(fa_backend backend)
{
#ifdef FA_TEST_CUDA_BUILT
    if (backend == FA_BACKEND_CUDA) return true;
#endif
#ifdef FA_TEST_HIP_BUILT
    if (backend == FA_BACKEND_HIP) return true;
#endif
    return backend == FA_BACKEND_CPU;
}

// The warpgroup passes (ws_instances.txt, bws_instances.txt) are built only with an
// sm_90a target.
bool warpgroup_pass(const std::string &pass_name) { return pass_name == "ws" || pass_name == "bws"; }

bool pass_built(const std::string &pass_name)
{
#ifdef FA_TEST_WARPGROUP_BUILT
    return true;
#else
    return !warpgroup_pass(pass_name);
#endif
}

int expected_smem(fa_pass pass, const list_row &r, const std::string &pass_name)
{
    if (pass_name == "ws")
        return FA_WS_SMEM_BYTES(r.head_dim, r.tile_m, r.tile_n, r.stages);
    if (pass_name == "bws")
        return FA_BWS_SMEM_BYTES(r.head_dim, r.tile_m, r.tile_n, r.stages);
    if (pass_name == "qreg")
        return FA_QREG_SMEM_BYTES(r.head_dim, r.tile_m, r.tile_n, r.stages);
    if (r.vendor == "cpu")
        return pass == FA_PASS_FWD ? FA_CPU_FWD_TILE_BYTES(r.head_dim, r.tile_m, r.tile_n)
                                   : FA_CPU_BWD_TILE_BYTES(r.head_dim, r.tile_m, r.tile_n);
    return pass == FA_PASS_FWD ? FA_FWD_SMEM_BYTES(r.head_dim, r.tile_m, r.tile_n, r.stages)
                               : FA_BWD_SMEM_BYTES(r.head_dim, r.tile_m, r.tile_n, r.stages);
}

// One config against the row, dtype and wave it was generated from.
void check_config(const fa_kernel_config &c, fa_pass pass, const char *pass_name, const list_row &r,
                  const std::string &dtype, const std::string &wave)
{
    const std::string name = "fa_" + r.vendor + "_" + pass_name + "_d" + std::to_string(r.head_dim) + "_" +
                             dtype + "_" + std::to_string(r.tile_m) + "x" + std::to_string(r.tile_n) + "x" +
                             std::to_string(r.stages);
    const int wave_size = wave == "-" ? 0 : std::stoi(wave);
    INFO(c.name);
    CHECK(name == c.name);
    CHECK(c.backend == backend_of(r.vendor));
    CHECK(c.vendor == vendor_of(r.vendor));
    CHECK(c.pass == pass);
    CHECK(c.dtype == dtype_of(dtype));
    CHECK(c.head_dim == r.head_dim);
    CHECK(c.tile_m == r.tile_m);
    CHECK(c.tile_n == r.tile_n);
    CHECK(c.stages == r.stages);
    CHECK(c.min_wave_size == wave_size);
    CHECK(c.threads == r.warps * (wave_size ? wave_size : 1));
    CHECK(c.smem_bytes == expected_smem(pass, r, pass_name));
    CHECK(c.regs_per_thread == (warpgroup_pass(pass_name)            ? FA_WS_REGS_PER_THREAD(c.threads)
                                : std::string(pass_name) == "qreg" ? FA_QREG_REGS_PER_THREAD(c.threads)
                                                                   : 0));
    // attn_bwd.h's shape: 16 resident rows per warp, whole row groups per warp.
    if (std::string(pass_name) == "bwd" && r.vendor != "cpu") {
        CHECK(r.tile_n % 16 == 0);
        CHECK((16 * r.warps) % r.tile_n == 0);
    }
    // Wave32 AMD dK/dV kernels have no atomic dQ phase (src/hip/fa_device.h).
    CHECK(c.atomic_dq == (pass == FA_PASS_BWD && r.vendor != "cpu" && !(r.vendor == "hip" && wave_size == 32)));
    CHECK(c.pack_gqa == (std::string(pass_name) == "dec" ? 1 : 0));
    CHECK(c.warpgroup == (warpgroup_pass(pass_name) ? 1 : 0));
    // The warpgroup backward orders its dQ adds for deterministic calls (attn_bwd_ws.h).
    CHECK(c.ordered_dq == (std::string(pass_name) == "bws" ? 1 : 0));
    CHECK(c.compiled == (built(c.backend) && pass_built(pass_name) ? 1 : 0));
    const bool launchable = c.compiled && r.vendor != "cpu";
    CHECK((c.kernels[0] != nullptr) == launchable);
    // The warpgroup backward has its dK/dV kernel only (its atomics sum dQ).
    CHECK((c.kernels[1] != nullptr) == (launchable && pass == FA_PASS_BWD && std::string(pass_name) != "bws"));
}

void check_registry(fa_pass pass, std::initializer_list<const char *> lists)
{
    for (const char *vendor : {"cuda", "hip", "cpu"}) {
        int count = 0, i = 0;
        const fa_kernel_config *reg = fa_registry_of(backend_of(vendor), pass, &count);
        for (const char *list : lists)
            for (const list_row &r : read_list(list)) {
                if (r.vendor != vendor) continue;
                for (const std::string &dtype : r.dtypes)
                    for (const std::string &wave : r.waves) {
                        REQUIRE(i < count);
                        check_config(reg[i++], pass, list, r, dtype, wave);
                    }
            }
        INFO(vendor);
        CHECK(i == count);
        CHECK((count == 0) == (reg == nullptr));
    }
}

} // namespace

TEST_CASE("the forward registry is fwd_instances.txt, dec_instances.txt, ws_instances.txt, then "
          "qreg_instances.txt, row by row",
          "[registry]")
{
    check_registry(FA_PASS_FWD, {"fwd", "dec", "ws", "qreg"});
}

TEST_CASE("the backward registry is bwd_instances.txt, then bws_instances.txt, row by row", "[registry]")
{
    check_registry(FA_PASS_BWD, {"bwd", "bws"});
}

TEST_CASE("registry names are unique per backend, pass and wave size", "[registry]")
{
    for (fa_backend b : {FA_BACKEND_CPU, FA_BACKEND_CUDA, FA_BACKEND_HIP})
        for (fa_pass pass : {FA_PASS_FWD, FA_PASS_BWD}) {
            int count = 0;
            const fa_kernel_config *reg = fa_registry_of(b, pass, &count);
            for (int i = 0; i < count; i++)
                for (int j = i + 1; j < count; j++) {
                    INFO(reg[i].name);
                    CHECK(!(std::string(reg[i].name) == reg[j].name &&
                            reg[i].min_wave_size == reg[j].min_wave_size));
                }
        }
}

// 1 when some arch-table row of the config's vendor and wave size has room for it.
bool fits_some_row(const fa_kernel_config &c)
{
    for (int r = 0; r < fa_arch_count(); r++) {
        const fa_arch_row *row = fa_arch_at(r);
        if (row->vendor == c.vendor && (c.min_wave_size == 0 || row->wave_size == c.min_wave_size) &&
            c.smem_bytes <= row->smem_per_block && c.threads <= row->max_threads_per_block)
            return true;
    }
    return false;
}

TEST_CASE("every registry config fits some device of its vendor and wave size", "[registry]")
{
    for (fa_backend b : {FA_BACKEND_CPU, FA_BACKEND_CUDA, FA_BACKEND_HIP})
        for (fa_pass pass : {FA_PASS_FWD, FA_PASS_BWD}) {
            int count = 0;
            const fa_kernel_config *reg = fa_registry_of(b, pass, &count);
            for (int i = 0; i < count; i++) {
                INFO(reg[i].name << " wave " << reg[i].min_wave_size);
                CHECK(fits_some_row(reg[i]));
            }
        }
}

TEST_CASE("launch handles: one kernel per name, a backward's two kernels distinct", "[registry]")
{
    for (fa_backend b : {FA_BACKEND_CUDA, FA_BACKEND_HIP})
        for (fa_pass pass : {FA_PASS_FWD, FA_PASS_BWD}) {
            int count = 0;
            const fa_kernel_config *reg = fa_registry_of(b, pass, &count);
            for (int i = 0; i < count; i++) {
                INFO(reg[i].name);
                if (pass == FA_PASS_BWD && reg[i].kernels[0]) CHECK(reg[i].kernels[0] != reg[i].kernels[1]);
                for (int j = 0; j < count; j++) {
                    const bool same_name = std::string(reg[i].name) == reg[j].name;
                    if (reg[i].kernels[0] && reg[j].kernels[0])
                        CHECK((reg[i].kernels[0] == reg[j].kernels[0]) == same_name);
                }
            }
        }
}

TEST_CASE("a backend without configs for a pass has an empty registry", "[registry]")
{
    int count = -1;
    CHECK(fa_registry_of(FA_BACKEND_AUTO, FA_PASS_FWD, &count) == nullptr);
    CHECK(count == 0);
    CHECK(fa_registry_of(FA_BACKEND_CPU, FA_PASS_FWD, nullptr) != nullptr);
}
