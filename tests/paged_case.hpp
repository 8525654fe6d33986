// paged_case.hpp - test support for paged K/V and fa_fwd_kvcache, shared by the CPU and
// GPU tests (header only, host side): random block tables (pages in random order, pages
// shared between sequences, entries past a sequence's keys set to garbage that must never
// be read), the contiguous K/V a pool spells through a table (what the fp64 reference
// takes), element stores, and an independent rotary reference in fp64.
#ifndef FA_TEST_PAGED_CASE_HPP
#define FA_TEST_PAGED_CASE_HPP

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "api/dtype.h"
#include "flashattn.h"
#include "oracle.hpp"

namespace fa_paged {

using fa_oracle::HostTensor;

// Never a page id: the entries past a sequence's keys hold it.
const int32_t kGarbageEntry = 1 << 30;

inline int64_t offset_of(const fa_tensor &t, const int64_t *index)
{
    int64_t at = 0;
    for (int i = 0; i < t.ndim; ++i)
        at += index[i] * t.stride[i];
    return at;
}

// Stores `value` rounded to the tensor's dtype at `index`.
inline void set_element(const fa_tensor &t, const int64_t *index, double value)
{
    char *at = static_cast<char *>(t.data) + offset_of(t, index) * (int64_t)fa_oracle::dtype_size(t.dtype);
    float f = (float)fa_oracle::round_to_dtype(value, t.dtype);
    if (t.dtype == FA_DTYPE_F32) {
        std::memcpy(at, &f, sizeof f);
        return;
    }
    uint16_t bits = t.dtype == FA_DTYPE_F16 ? fa_f32_to_f16(f) : fa_f32_to_bf16(f);
    std::memcpy(at, &bits, sizeof bits);
}

// The byte address of element (i0, i1, i2, 0) of a rank-4 tensor, or (i1, i2, 0) of a
// rank-3 one (i0 ignored).
inline char *row_at(const fa_tensor &t, int64_t i0, int64_t i1, int64_t i2)
{
    int64_t at = t.ndim == 4 ? i0 * t.stride[0] + i1 * t.stride[1] + i2 * t.stride[2]
                             : i1 * t.stride[0] + i2 * t.stride[1];
    return static_cast<char *>(t.data) + at * (int64_t)fa_oracle::dtype_size(t.dtype);
}

struct PageTable {
    int width = 0;
    int64_t stride = 0;
    int num_pages = 0;
    std::vector<int32_t> entries; // batch * stride
};

// Pages P, sequence b holding keys[b] keys. Every page a sequence uses is distinct from
// its others, pages are drawn in random order from a pool of `num_pages` (>= the pages
// needed), and sequences b > 0 start with the first `shared` pages of sequence 0 (a
// shared prefix); every other entry (past a sequence's keys, and the stride padding)
// holds kGarbageEntry.
inline PageTable make_table(const std::vector<int64_t> &keys, int page, int width, int64_t stride,
                            int shared, int num_pages, uint64_t seed)
{
    PageTable t;
    t.width = width;
    t.stride = stride;
    t.num_pages = num_pages;
    t.entries.assign(keys.size() * (size_t)stride, kGarbageEntry);
    std::mt19937_64 rng(seed);
    std::vector<int32_t> ids((size_t)num_pages);
    std::iota(ids.begin(), ids.end(), 0);
    for (size_t b = 0; b < keys.size(); ++b) {
        std::shuffle(ids.begin(), ids.end(), rng);
        int64_t used = (keys[b] + page - 1) / page;
        int from_first = b > 0 ? std::min<int64_t>(shared, used) : 0;
        size_t next = 0;
        for (int64_t j = 0; j < used; ++j) {
            int32_t id;
            if (j < from_first) {
                id = t.entries[(size_t)j];
            } else {
                do
                    id = ids[next++];
                while (std::find(t.entries.begin() + (int64_t)b * stride, t.entries.begin() + (int64_t)b * stride + j,
                                 id) != t.entries.begin() + (int64_t)b * stride + j);
            }
            t.entries[(size_t)((int64_t)b * stride + j)] = id;
        }
    }
    return t;
}

// The contiguous tensor a pool [num_pages, P, h_k, d] spells through the table: fixed
// length [b, width * P, h_k, d] (keys past keys[b] zero), or varlen [sum keys, h_k, d]
// with sequence b at rows cu[b].. .
inline HostTensor gather(const HostTensor &pool, const PageTable &t, const std::vector<int64_t> &keys,
                         bool varlen)
{
    const fa_tensor &p = pool.view;
    const int64_t page = p.shape[1], heads = p.shape[2], dim = p.shape[3];
    const size_t row_bytes = (size_t)dim * fa_oracle::dtype_size(p.dtype);
    int64_t total = 0;
    for (int64_t n : keys)
        total += n;
    HostTensor out = varlen ? fa_oracle::make_tensor(p.dtype, {total, heads, dim})
                            : fa_oracle::make_tensor(p.dtype, {(int64_t)keys.size(), (int64_t)t.width * page,
                                                               heads, dim});
    std::memset(out.storage.data(), 0, out.storage.size());
    int64_t row0 = 0;
    for (size_t b = 0; b < keys.size(); ++b) {
        for (int64_t r = 0; r < keys[b]; ++r) {
            int32_t id = t.entries[(size_t)((int64_t)b * t.stride + r / page)];
            for (int64_t h = 0; h < heads; ++h)
                std::memcpy(row_at(out.view, (int64_t)b, varlen ? row0 + r : r, h), row_at(p, id, r % page, h),
                            row_bytes);
        }
        row0 += keys[b];
    }
    return out;
}

// cos / sin tables [rows, rotary_dim / 2] of the usual RoPE frequencies, in `dtype`.
inline void rotary_tables(fa_dtype dtype, int64_t rows, int rotary_dim, HostTensor &cos_t, HostTensor &sin_t)
{
    cos_t = fa_oracle::make_tensor(dtype, {rows, rotary_dim / 2});
    sin_t = fa_oracle::make_tensor(dtype, {rows, rotary_dim / 2});
    for (int64_t pos = 0; pos < rows; ++pos)
        for (int64_t t = 0; t < rotary_dim / 2; ++t) {
            double angle = (double)pos * std::pow(10000.0, -2.0 * (double)t / rotary_dim);
            int64_t index[2] = {pos, t};
            set_element(cos_t.view, index, std::cos(angle));
            set_element(sin_t.view, index, std::sin(angle));
        }
}

// Row x (d values) rotated at `pos` in fp64, as include/flashattn.h defines it.
inline std::vector<double> rotate_reference(std::vector<double> x, const fa_tensor &cos_t,
                                            const fa_tensor &sin_t, int64_t pos, int rotary_dim,
                                            bool interleaved)
{
    const int half = rotary_dim / 2;
    for (int t = 0; t < half; ++t) {
        int a = interleaved ? 2 * t : t, b = interleaved ? 2 * t + 1 : t + half;
        int64_t index[2] = {pos, t};
        double c = fa_oracle::element(cos_t, index), s = fa_oracle::element(sin_t, index);
        double xa = x[(size_t)a], xb = x[(size_t)b];
        x[(size_t)a] = xa * c - xb * s;
        x[(size_t)b] = xa * s + xb * c;
    }
    return x;
}

// Head row (i0, i1, i2) of a tensor as doubles.
inline std::vector<double> head_row(const fa_tensor &t, int64_t i0, int64_t i1, int64_t i2)
{
    const int64_t dim = t.shape[t.ndim - 1];
    std::vector<double> row((size_t)dim);
    for (int64_t c = 0; c < dim; ++c) {
        int64_t index4[4] = {i0, i1, i2, c}, index3[3] = {i1, i2, c};
        row[(size_t)c] = fa_oracle::element(t, t.ndim == 4 ? index4 : index3);
    }
    return row;
}

// Largest |a - b| / max(1, |b|) over a row: fp32 to fp32 rounding, 16-bit dtypes to an ulp.
inline double row_error(const std::vector<double> &a, const std::vector<double> &b)
{
    double worst = 0;
    for (size_t i = 0; i < a.size(); ++i)
        worst = std::max(worst, std::fabs(a[i] - b[i]) / std::max(1.0, std::fabs(b[i])));
    return std::isnan(worst) ? INFINITY : worst;
}

// The tolerance of row_error for one rounding to `dtype` (after fp32 arithmetic).
inline double rounding_bound(fa_dtype dtype)
{
    return dtype == FA_DTYPE_F32 ? 1e-6 : dtype == FA_DTYPE_F16 ? 2e-3 : 1.6e-2;
}

}  // namespace fa_paged

#endif  // FA_TEST_PAGED_CASE_HPP
