// test_struct_size.cpp - fa_struct_size reports the sizeof of each public struct, as
// bindings that mirror the structs rely on, and 0 for values that name no struct.
#include <catch2/catch.hpp>

#include "flashattn.h"

TEST_CASE("fa_struct_size is sizeof of each public struct", "[api][layout]")
{
    CHECK(fa_struct_size(FA_STRUCT_TENSOR) == sizeof(fa_tensor));
    CHECK(fa_struct_size(FA_STRUCT_PARAMS) == sizeof(fa_params));
    CHECK(fa_struct_size(FA_STRUCT_PLAN) == sizeof(fa_plan));
    CHECK(fa_struct_size(FA_STRUCT_DEVICE_INFO) == sizeof(fa_device_info));
    CHECK(fa_struct_size(FA_STRUCT_KVCACHE_PARAMS) == sizeof(fa_kvcache_params));
}

TEST_CASE("fa_struct_size names every struct below FA_STRUCT_COUNT", "[api][layout]")
{
    for (int which = 0; which < FA_STRUCT_COUNT; ++which)
        CHECK(fa_struct_size(static_cast<fa_struct_id>(which)) > 0);
}

TEST_CASE("fa_struct_size is 0 for values that name no struct", "[api][layout]")
{
    CHECK(fa_struct_size(FA_STRUCT_COUNT) == 0);
    CHECK(fa_struct_size(static_cast<fa_struct_id>(-1)) == 0);
    CHECK(fa_struct_size(static_cast<fa_struct_id>(1000)) == 0);
}
