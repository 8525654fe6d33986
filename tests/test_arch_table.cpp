// test_arch_table.cpp - the architecture table's rows are present and internally
// consistent, key facts match their cited sources, and the fallback row built from a
// device's reported limits follows the documented rules.
#include <catch2/catch.hpp>

#include <cstring>
#include <set>
#include <string>

#include "select/arch_table.h"

static const char *const k_required[] = {"cpu",    "sm_80",  "sm_86",  "sm_89",
                                         "sm_90",  "sm_100", "gfx90a", "gfx942",
                                         "gfx950", "gfx1100", "gfx1201"};

TEST_CASE("every required architecture row exists, once", "[arch]")
{
    std::set<std::string> names;
    for (int i = 0; i < fa_arch_count(); i++) names.insert(fa_arch_at(i)->name);
    CHECK(names.size() == static_cast<size_t>(fa_arch_count()));
    for (const char *name : k_required) {
        INFO(name);
        const fa_arch_row *row = fa_arch_find(name);
        REQUIRE(row != nullptr);
        CHECK(std::string(row->name) == name);
    }
}

TEST_CASE("rows have sane, self-consistent limits", "[arch]")
{
    for (int i = 0; i < fa_arch_count(); i++) {
        const fa_arch_row *row = fa_arch_at(i);
        INFO(row->name);
        CHECK(row->smem_per_block > 0);
        CHECK(row->smem_per_block <= row->smem_per_sm);
        CHECK(row->max_threads_per_block > 0);
        CHECK(row->max_threads_per_block <= row->max_threads_per_sm);
        CHECK(row->sm_count > 0);
        if (row->vendor == FA_VENDOR_CPU) {
            CHECK(row->wave_size == 1);
            CHECK(row->matrix_unit == FA_MATRIX_NONE);
            continue;
        }
        CHECK((row->wave_size == 32 || row->wave_size == 64));
        CHECK(row->max_threads_per_block % row->wave_size == 0);
        CHECK(row->regs_per_sm >= 65536);
        CHECK(row->max_regs_per_thread >= 255);
        CHECK(row->max_threads_per_block == 1024);
    }
}

TEST_CASE("vendor families have their wave size, matrix unit and async copy", "[arch]")
{
    for (const char *name : {"sm_80", "sm_86", "sm_89", "sm_90", "sm_100"}) {
        INFO(name);
        const fa_arch_row *row = fa_arch_find(name);
        CHECK(row->vendor == FA_VENDOR_NVIDIA);
        CHECK(row->wave_size == 32);
        // sm_90 has warpgroup MMA (and mma.sync); the others mma.sync only.
        CHECK(row->matrix_unit == (std::string(name) == "sm_90" ? FA_MATRIX_WGMMA : FA_MATRIX_MMA_SYNC));
        CHECK(row->has_async_copy == 1);
        CHECK(row->regs_per_sm == 65536);
        CHECK(row->max_regs_per_thread == 255);
    }
    for (const char *name : {"gfx90a", "gfx942", "gfx950"}) {
        INFO(name);
        const fa_arch_row *row = fa_arch_find(name);
        CHECK(row->vendor == FA_VENDOR_AMD);
        CHECK(row->wave_size == 64);
        CHECK(row->matrix_unit == FA_MATRIX_MFMA);
        CHECK(row->has_async_copy == 0);
    }
    for (const char *name : {"gfx1100", "gfx1201"}) {
        INFO(name);
        const fa_arch_row *row = fa_arch_find(name);
        CHECK(row->vendor == FA_VENDOR_AMD);
        CHECK(row->wave_size == 32);
        CHECK(row->matrix_unit == FA_MATRIX_WMMA);
    }
}

TEST_CASE("key numbers match the cited sources", "[arch]")
{
    // CUDA C++ Programming Guide, technical specifications per compute capability.
    CHECK(fa_arch_find("sm_80")->smem_per_block == 166912); // 163 KB
    CHECK(fa_arch_find("sm_80")->smem_per_sm == 167936);    // 164 KB
    CHECK(fa_arch_find("sm_86")->smem_per_block == 101376); // 99 KB
    CHECK(fa_arch_find("sm_89")->smem_per_sm == 102400);    // 100 KB
    CHECK(fa_arch_find("sm_90")->smem_per_block == 232448); // 227 KB
    CHECK(fa_arch_find("sm_100")->smem_per_sm == 233472);   // 228 KB
    CHECK(fa_arch_find("sm_80")->max_threads_per_sm == 2048);
    CHECK(fa_arch_find("sm_86")->max_threads_per_sm == 1536);
    CHECK(fa_arch_find("sm_89")->max_threads_per_sm == 1536);
    CHECK(fa_arch_find("sm_90")->max_threads_per_sm == 2048);
    // SM / CU counts of the flagship parts.
    CHECK(fa_arch_find("sm_80")->sm_count == 108);
    CHECK(fa_arch_find("sm_90")->sm_count == 132);
    CHECK(fa_arch_find("sm_100")->sm_count == 148);
    CHECK(fa_arch_find("gfx942")->sm_count == 304);
    CHECK(fa_arch_find("gfx90a")->sm_count == 110);
    // AMD: LDS 64 KiB per workgroup except gfx950's 160 KiB; 512 KiB VGPRs per CDNA CU.
    CHECK(fa_arch_find("gfx942")->smem_per_block == 65536);
    CHECK(fa_arch_find("gfx950")->smem_per_block == 163840);
    CHECK(fa_arch_find("gfx942")->regs_per_sm == 131072);
    // RDNA rows count WGPs (HIP's multiProcessorCount): 128 KiB LDS per WGP.
    CHECK(fa_arch_find("gfx1100")->sm_count == 48);
    CHECK(fa_arch_find("gfx1100")->smem_per_sm == 131072);
}

TEST_CASE("lookups outside the table return NULL", "[arch]")
{
    CHECK(fa_arch_find("sm_75") == nullptr);
    CHECK(fa_arch_find("") == nullptr);
    CHECK(fa_arch_find(nullptr) == nullptr);
    CHECK(fa_arch_at(-1) == nullptr);
    CHECK(fa_arch_at(fa_arch_count()) == nullptr);
}

TEST_CASE("fallback row: reported limits win, the nearest row gives the matrix unit", "[arch]")
{
    // A newer NVIDIA part (sm_120-like): everything reported.
    fa_arch_row r = fa_arch_from_device("sm_120", FA_VENDOR_NVIDIA, 32, 101376, 102400, 65536,
                                        1024, 1536, 84, 1);
    CHECK(std::string(r.name) == "sm_120");
    CHECK(r.vendor == FA_VENDOR_NVIDIA);
    CHECK(r.smem_per_block == 101376);
    CHECK(r.smem_per_sm == 102400);
    CHECK(r.max_threads_per_sm == 1536);
    CHECK(r.sm_count == 84);
    CHECK(r.matrix_unit == FA_MATRIX_MMA_SYNC); // nearest older row: sm_100
    CHECK(r.has_async_copy == 1);
    CHECK(r.max_regs_per_thread == 255);

    // An sm_9x part the table lacks: sm_90's facts but not its warpgroup MMA, whose sm_90a
    // code runs on sm_90 alone; sm_90 itself, as reported, keeps it.
    r = fa_arch_from_device("sm_92", FA_VENDOR_NVIDIA, 32, 232448, 233472, 65536, 1024, 2048, 132, 1);
    CHECK(r.matrix_unit == FA_MATRIX_MMA_SYNC);
    r = fa_arch_from_device("sm_90", FA_VENDOR_NVIDIA, 32, 232448, 233472, 65536, 1024, 2048, 132, 1);
    CHECK(r.matrix_unit == FA_MATRIX_WGMMA);

    // sm_87 (Orin) falls back to sm_86's family facts.
    r = fa_arch_from_device("sm_87", FA_VENDOR_NVIDIA, 32, 166912, 167936, 65536, 1024, 2048,
                            16, 1);
    CHECK(r.matrix_unit == FA_MATRIX_MMA_SYNC);

    // sm_75 has no row at or below it: scalar path, no cp.async.
    r = fa_arch_from_device("sm_75", FA_VENDOR_NVIDIA, 32, 65536, 65536, 65536, 1024, 1024,
                            40, 1);
    CHECK(r.matrix_unit == FA_MATRIX_NONE);
    CHECK(r.has_async_copy == 0);

    // No matrix unit reported: none, whatever the nearest row has.
    r = fa_arch_from_device("sm_120", FA_VENDOR_NVIDIA, 32, 101376, 102400, 65536, 1024, 1536,
                            84, 0);
    CHECK(r.matrix_unit == FA_MATRIX_NONE);
}

TEST_CASE("fallback row: AMD families by gfx major", "[arch]")
{
    fa_arch_row r = fa_arch_from_device("gfx1151", FA_VENDOR_AMD, 32, 65536, 131072, 196608,
                                        1024, 2048, 20, 1);
    CHECK(r.matrix_unit == FA_MATRIX_WMMA); // RDNA3.5: nearest gfx1100
    CHECK(r.wave_size == 32);

    r = fa_arch_from_device("gfx1030", FA_VENDOR_AMD, 32, 65536, 131072, 131072, 1024, 2048,
                            40, 1);
    CHECK(r.matrix_unit == FA_MATRIX_NONE); // RDNA2: no gfx10 row, no WMMA

    r = fa_arch_from_device("gfx942:sramecc+:xnack-", FA_VENDOR_AMD, 64, 65536, 65536, 131072,
                            1024, 2048, 304, 1);
    CHECK(r.matrix_unit == FA_MATRIX_MFMA);
    CHECK(std::strlen(r.name) < sizeof r.name); // truncated, terminated
    CHECK(r.max_regs_per_thread == 512);
}

TEST_CASE("fallback row: missing limits take the vendor's smallest table values", "[arch]")
{
    fa_arch_row r = fa_arch_from_device("sm_999", FA_VENDOR_NVIDIA, 0, 0, 0, 0, 0, 0, 0, 1);
    CHECK(r.wave_size == 32);
    CHECK(r.smem_per_block == 101376); // sm_86/89: the smallest NVIDIA row
    CHECK(r.smem_per_sm == 102400);
    CHECK(r.regs_per_sm == 65536);
    CHECK(r.max_threads_per_block == 1024);
    CHECK(r.max_threads_per_sm == 1536);
    CHECK(r.sm_count == 1);

    r = fa_arch_from_device("gfx9zz", FA_VENDOR_AMD, 0, 0, 0, 0, 0, 0, 0, 1);
    CHECK(r.wave_size == 64);
    CHECK(r.smem_per_block == 65536);
    CHECK(r.matrix_unit == FA_MATRIX_NONE); // name does not parse: no family
}

TEST_CASE("fallback row: per-block limits never exceed per-SM ones", "[arch]")
{
    fa_arch_row r = fa_arch_from_device("sm_95", FA_VENDOR_NVIDIA, 32, 300000, 200000, 65536,
                                        2048, 1024, 10, 1);
    CHECK(r.smem_per_block == 200000);
    CHECK(r.max_threads_per_block == 1024);
}
