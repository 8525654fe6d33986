// test_mask_band.cpp - mask.h's 32-bit band test (fa_band_of, fa_band_visible), which the
// backward's lean path runs per element on masked tiles, against the 64-bit rule it
// stands for (fa_key_visible, with rows past seqlen_q seeing nothing): causal, windows
// of every side, lengths equal and not, and the extremes where the window's shifted
// sides leave int (lengths and windows near 2^31).
#include <catch2/catch.hpp>

#include <climits>
#include <random>
#include <vector>

#include "api/mask.h"

namespace {

int expected(int row, int col, int seqlen_q, int seqlen_k, fa_window w)
{
    return row < seqlen_q && fa_key_visible(row, col, seqlen_q, seqlen_k, w);
}

// Positions worth testing for one problem: the ends, the diagonal's and the window's
// edges around a few rows, and random ones.
std::vector<int> positions(int seqlen, const std::vector<long long> &edges, std::mt19937 &rng)
{
    std::vector<int> out = {0, 1, seqlen - 1, seqlen, INT_MAX - 1};
    for (long long e : edges)
        for (long long d = -1; d <= 1; ++d)
            if (e + d >= 0 && e + d < INT_MAX)
                out.push_back((int)(e + d));
    std::uniform_int_distribution<int> any(0, seqlen);
    for (int i = 0; i < 8; ++i)
        out.push_back(any(rng));
    return out;
}

void check_problem(int seqlen_q, int seqlen_k, fa_window w, std::mt19937 &rng)
{
    const fa_band band = fa_band_of(seqlen_q, seqlen_k, w);
    const long long shift = (long long)seqlen_k - seqlen_q;
    for (int row : positions(seqlen_q, {0, -shift, (long long)seqlen_q - 1}, rng)) {
        const long long diag = row + shift;
        for (int col : positions(seqlen_k, {diag, diag - w.left, diag + w.right, (long long)seqlen_k - 1}, rng)) {
            INFO("s_q " << seqlen_q << ", s_k " << seqlen_k << ", window (" << w.left << ", " << w.right
                        << "), row " << row << ", col " << col);
            REQUIRE(fa_band_visible(&band, row, col) == expected(row, col, seqlen_q, seqlen_k, w));
        }
    }
}

} // namespace

TEST_CASE("the 32-bit band test agrees with mask.h's rule, extremes included")
{
    std::mt19937 rng(20261206);
    const int lengths[] = {1, 2, 37, 64, 300, 4096, 1 << 20, INT_MAX - 1, INT_MAX};
    const fa_window windows[] = {{-1, -1}, {-1, 0}, {0, 0}, {5, 0}, {0, 7}, {40, 300}, {-1, 3}, {3, -1},
                                 {INT_MAX, 0}, {INT_MAX, INT_MAX}, {0, INT_MAX}, {-1, INT_MAX}};
    for (int seqlen_q : lengths)
        for (int seqlen_k : lengths)
            for (fa_window w : windows)
                check_problem(seqlen_q, seqlen_k, w, rng);
}

TEST_CASE("the band's sides clamp where the shifted window leaves int")
{
    const fa_band wide = fa_band_of(INT_MAX, 1, {INT_MAX, INT_MAX});
    CHECK(wide.lo == INT_MIN); // 1 - (2^31 - 1) - (2^31 - 1) is below INT_MIN
    CHECK(wide.hi == 1 - INT_MAX + INT_MAX);
    const fa_band high = fa_band_of(1, INT_MAX, {0, INT_MAX});
    CHECK(high.hi == INT_MAX); // (2^31 - 2) + (2^31 - 1) is above INT_MAX
    CHECK(high.lo == INT_MAX - 1);
    const fa_band open = fa_band_of(10, 20, {-1, -1});
    CHECK(open.lo == INT_MIN);
    CHECK(open.hi == INT_MAX);
}
