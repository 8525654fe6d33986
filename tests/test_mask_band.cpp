// test_mask_band.cpp - mask.h's 32-bit band test (fa_band_of, fa_band_visible), which the
// backward's lean path runs per element on masked tiles, against the 64-bit rule it
// stands for (fa_key_visible, with rows past seqlen_q seeing nothing): causal, windows
// of every side, lengths equal and not, and the extremes where the window's shifted
// sides leave int (lengths and windows near 2^31); and the diagonal's per-lane limit
// (fa_band_upper_limit) the way the d128 warpgroup backward applies it.
#include <catch2/catch.hpp>

#include <algorithm>
#include <climits>
#include <random>
#include <string>
#include <vector>

#include "api/mask.h"
#include "../src/cuda/fa_nv_layouts.h"

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

// fa_band_upper_limit as the d128 warpgroup backward uses it (attn_bwd_parts.h
// fa_bwd_clear_above): a warp tile of 16 keys by 64 queries in the wgmma accumulator
// layout (fa_nv_layouts.h), the limit taken once per lane from its first register and
// each register compared by its constant offset, against mask.h's rule for every
// element, on tiles that only the band's upper side can cut (no left window side, every
// key and query inside its sequence), near the diagonal and far from it, lengths to 2^31.
TEST_CASE("the diagonal's per-lane limit hides exactly the keys mask.h's rule hides")
{
    std::mt19937 rng(20261207);
    const int keys = 16, queries = 64; // a warp's slice of the d128 instance's step
    const int lengths[] = {64, 65, 301, 517, 4096, INT_MAX - 1, INT_MAX};
    const int rights[] = {0, 1, 19, 300, INT_MAX};
    long long hidden_seen = 0;
    std::string wrong;
    for (int seqlen_q : lengths)
        for (int seqlen_k : lengths)
            for (int right : rights) {
                const fa_window w = {-1, right};
                const long long shift = (long long)seqlen_k - seqlen_q;
                for (int trial = 0; trial < 40; ++trial) {
                    // A query tile anywhere, and a key tile near its diagonal (or anywhere).
                    const int query0 = std::uniform_int_distribution<int>(0, seqlen_q - queries)(rng);
                    long long near = query0 + shift + right + std::uniform_int_distribution<int>(-80, 16)(rng);
                    if (trial % 4 == 3)
                        near = std::uniform_int_distribution<int>(0, seqlen_k - keys)(rng);
                    const int key0 = (int)std::min<long long>(std::max<long long>(near, 0), seqlen_k - keys);
                    for (int lane = 0; lane < 32; ++lane) {
                        const int row_of_lane = fa_nv_acc_row(lane, 0), col_of_lane = fa_nv_acc_col(lane, 0);
                        const int lim = fa_band_upper_limit(seqlen_q, seqlen_k, w,
                                                            (long long)key0 + row_of_lane - query0 - col_of_lane);
                        for (int nf = 0; nf < queries / 8; ++nf)
                            for (int r = 0; r < 4; ++r) {
                                const int dk = fa_nv_acc_row(lane, r), dq = nf * 8 + fa_nv_acc_col(lane, r);
                                const int rel = (dk - row_of_lane) - (dq - col_of_lane);
                                const int hidden = !fa_key_visible(query0 + dq, key0 + dk, seqlen_q, seqlen_k, w);
                                if ((rel > lim) != hidden && wrong.empty())
                                    wrong = "s_q " + std::to_string(seqlen_q) + ", s_k " + std::to_string(seqlen_k) +
                                            ", right " + std::to_string(right) + ", key " + std::to_string(key0 + dk) +
                                            ", query " + std::to_string(query0 + dq);
                                hidden_seen += hidden;
                            }
                    }
                }
            }
    CHECK(wrong == ""); // the first element where the limit and the rule disagree
    CHECK(hidden_seen > 0); // the tiles do cross the diagonal
}

// The d128 warpgroup backward's lean path on any masked tile without a left window side
// (attn_bwd_parts.h fa_bwd_probs): the diagonal's per-lane limit when there is a right
// side, then fa_bwd_clear_past_ends (one key and one query limit per lane, each register
// compared by its constant offsets) hide together exactly what the whole rule hides, on
// tiles that run past a sequence's end one way or both (a varlen sequence's last key or
// query tile), causal or not.
TEST_CASE("the diagonal's and the sequence ends' per-lane limits together hide what the rule hides")
{
    std::mt19937 rng(20261206);
    const int keys = 16, queries = 64;
    const int lengths[] = {1, 15, 17, 63, 65, 301, 517, INT_MAX};
    const int rights[] = {-1, 0, 19, INT_MAX};
    long long past_end_seen = 0;
    std::string wrong;
    for (int seqlen_q : lengths)
        for (int seqlen_k : lengths)
            for (int right : rights) {
                const fa_window w = {-1, right};
                for (int trial = 0; trial < 40; ++trial) {
                    // The last key tile, the last query tile, or both, ending inside the tile.
                    const int key0 = trial % 3 != 1 ? std::max(0, seqlen_k - std::uniform_int_distribution<int>(1, keys)(rng))
                                                    : std::uniform_int_distribution<int>(0, std::max(0, seqlen_k - keys))(rng);
                    const int query0 = trial % 3 != 0
                                           ? std::max(0, seqlen_q - std::uniform_int_distribution<int>(1, queries)(rng))
                                           : std::uniform_int_distribution<int>(0, std::max(0, seqlen_q - queries))(rng);
                    for (int lane = 0; lane < 32; ++lane) {
                        const int row_of_lane = fa_nv_acc_row(lane, 0), col_of_lane = fa_nv_acc_col(lane, 0);
                        const int lim = fa_band_upper_limit(seqlen_q, seqlen_k, w,
                                                            (long long)key0 + row_of_lane - query0 - col_of_lane);
                        const int keys_left = seqlen_k - key0 - row_of_lane;
                        const int queries_left = seqlen_q - query0 - col_of_lane;
                        for (int nf = 0; nf < queries / 8; ++nf)
                            for (int r = 0; r < 4; ++r) {
                                const int dk = fa_nv_acc_row(lane, r), dq = nf * 8 + fa_nv_acc_col(lane, r);
                                const int rel = (dk - row_of_lane) - (dq - col_of_lane);
                                const bool cleared = (right >= 0 && rel > lim) || dk - row_of_lane >= keys_left ||
                                                     dq - col_of_lane >= queries_left;
                                const long long key = (long long)key0 + dk, query = (long long)query0 + dq;
                                const bool past_end = key >= seqlen_k || query >= seqlen_q;
                                const bool hidden =
                                    past_end || !fa_key_visible(query, key, seqlen_q, seqlen_k, w);
                                if (cleared != hidden && wrong.empty())
                                    wrong = "s_q " + std::to_string(seqlen_q) + ", s_k " + std::to_string(seqlen_k) +
                                            ", right " + std::to_string(right) + ", key " + std::to_string(key) +
                                            ", query " + std::to_string(query);
                                past_end_seen += past_end;
                            }
                    }
                }
            }
    CHECK(wrong == ""); // the first element where the limits and the rule disagree
    CHECK(past_end_seen > 0); // the tiles do run past the ends
}
