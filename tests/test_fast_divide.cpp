// test_fast_divide.cpp - the multiply-and-shift division the paged decode kernel uses
// for the page size (src/common/gpu_kernels/fast_divide.h) against C's division, over
// divisors from 1 to 2^31 - 1 (every page size a cache may have, and the extremes) and
// dividends at the edges (0, multiples of d and their neighbours, 2^31 - 1) and at random.
#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <vector>

#include "gpu_kernels/fast_divide.h"

namespace {

void check_dividend(int n, int d, fa_divisor v)
{
    INFO("n = " << n << ", d = " << d);
    REQUIRE(fa_divide(n, v) == n / d);
    REQUIRE(fa_remainder(n, v) == n % d);
}

void check_divisor(int d, std::mt19937 &rng)
{
    const fa_divisor v = fa_divisor_of(d);
    REQUIRE(v.d == d);
    const int max = INT32_MAX;
    for (int n : {0, 1, d - 1, d, max, max - 1, max - d})
        if (n >= 0)
            check_dividend(n, d, v);
    for (long long q : {1LL, 2LL, 3LL, 1000LL, (long long)max / d - 1, (long long)max / d})
        for (long long n = q * d - 1; n <= q * d + 1; ++n)
            if (n >= 0 && n <= max)
                check_dividend((int)n, d, v);
    std::uniform_int_distribution<int> any(0, max);
    for (int i = 0; i < 2000; ++i)
        check_dividend(any(rng), d, v);
}

} // namespace

TEST_CASE("fast divide: every page size and the extremes agree with C's division", "[divide]")
{
    std::mt19937 rng(7);
    std::vector<int> divisors = {1, 2, 3, 5, 7, 1 << 30, (1 << 30) + 1, INT32_MAX, INT32_MAX - 1, 65535, 65537};
    for (int page = 16; page <= 1024; page += 16) // every page size the API accepts
        divisors.push_back(page);
    std::uniform_int_distribution<int> any(1, INT32_MAX);
    for (int i = 0; i < 200; ++i)
        divisors.push_back(any(rng));
    for (int d : divisors)
        check_divisor(d, rng);
}
