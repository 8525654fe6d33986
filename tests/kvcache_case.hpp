// kvcache_case.hpp - the paged fa_fwd and fa_fwd_kvcache problems the CPU and GPU tests
// share (header only): a paged problem and the contiguous K/V its pages spell, a kvcache
// problem with its cache kept as it was before the call, and the checks of a call's
// results on the host: every appended slot (and no other byte of the cache), and out /
// lse against the fp64 reference over the appended cache.
#ifndef FA_TEST_KVCACHE_CASE_HPP
#define FA_TEST_KVCACHE_CASE_HPP

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "flashattn.h"
#include "oracle.hpp"
#include "paged_case.hpp"

namespace fa_paged {

using namespace fa_oracle;

// The error bound of check_case in test_cpu_forward.cpp: fp32 1e-4, 16-bit dtypes twice
// what a naive same-dtype attention is off by.
inline void check_against_reference(const fa_tensor &q, const fa_tensor &k, const fa_tensor &v,
                             const fa_params &params, const fa_tensor &out, const fa_tensor &lse)
{
    Reference exact = reference_attention(q, k, v, params, Precision::Exact);
    double out_bound = 1e-4, lse_bound = 1e-4;
    if (q.dtype != FA_DTYPE_F32) {
        Reference naive = reference_attention(q, k, v, params, Precision::Naive);
        out_bound = 2.0 * max_out_difference(naive, exact) + 1e-5;
        lse_bound = 2.0 * max_lse_difference(naive, exact) + 1e-5;
    }
    double out_error = max_out_error(out, exact), lse_error = max_lse_error(lse, exact);
    CAPTURE(out_error, out_bound, lse_error, lse_bound);
    CHECK(out_error <= out_bound);
    CHECK(lse_error <= lse_bound);
}

// One paged fa_fwd problem: a random pool and table, and the contiguous K/V they spell.
struct PagedCase {
    fa_dtype dtype = FA_DTYPE_F32;
    int page = 16, width = 4, extra_stride = 0, shared = 0, heads = 4, heads_k = 2, dim = 64;
    int64_t seqlen_q = 3;
    std::vector<int64_t> keys;     // per sequence; fixed length: each width * page unless seqused
    bool varlen = false, seqused = false, causal = false;
    int seqused_cut = 0;           // seqused_k = keys - cut
    uint64_t seed = 7;
};

inline std::string describe(const PagedCase &c)
{
    std::string s = std::string(fa_dtype_name(c.dtype)) + " P=" + std::to_string(c.page) +
                    " width=" + std::to_string(c.width) + " shared=" + std::to_string(c.shared) +
                    " varlen=" + std::to_string(c.varlen) + " seqused=" + std::to_string(c.seqused) +
                    " causal=" + std::to_string(c.causal) + " keys:";
    for (int64_t n : c.keys)
        s += " " + std::to_string(n);
    return s;
}

struct PagedRun {
    PageTable table;
    HostTensor q, k_pool, v_pool, k, v, out, lse, out_ref, lse_ref;
    std::vector<int32_t> cu_q, cu_k, used;
    fa_params paged, contiguous;
};

inline void prepare(const PagedCase &c, PagedRun &r)
{
    const int batch = (int)c.keys.size();
    int64_t used_pages = 0;
    for (int64_t n : c.keys)
        used_pages += (n + c.page - 1) / c.page;
    const int num_pages = (int)used_pages + 5;
    r.table = make_table(c.keys, c.page, c.width, c.width + c.extra_stride, c.shared, num_pages, c.seed);
    r.k_pool = make_tensor(c.dtype, {num_pages, c.page, c.heads_k, c.dim});
    r.v_pool = make_tensor(c.dtype, {num_pages, c.page, c.heads_k, c.dim});
    fill_normal(r.k_pool, c.seed + 1);
    fill_normal(r.v_pool, c.seed + 2);
    r.k = gather(r.k_pool, r.table, c.keys, c.varlen);
    r.v = gather(r.v_pool, r.table, c.keys, c.varlen);
    int64_t rows_q = c.varlen ? batch * c.seqlen_q : c.seqlen_q;
    r.q = c.varlen ? make_tensor(c.dtype, {rows_q, c.heads, c.dim})
                   : make_tensor(c.dtype, {batch, c.seqlen_q, c.heads, c.dim});
    fill_normal(r.q, c.seed + 3);
    r.out = c.varlen ? make_tensor(c.dtype, {rows_q, c.heads, c.dim})
                     : make_tensor(c.dtype, {batch, c.seqlen_q, c.heads, c.dim});
    r.lse = c.varlen ? make_tensor(FA_DTYPE_F32, {c.heads, rows_q})
                     : make_tensor(FA_DTYPE_F32, {batch, c.heads, c.seqlen_q});
    r.out_ref = r.out;
    r.lse_ref = r.lse;
    fa_params_init(&r.contiguous);
    r.contiguous.causal = c.causal;
    if (c.varlen) {
        r.cu_q.push_back(0);
        r.cu_k.push_back(0);
        for (int64_t n : c.keys) {
            r.cu_q.push_back(r.cu_q.back() + (int32_t)c.seqlen_q);
            r.cu_k.push_back(r.cu_k.back() + (int32_t)n);
            r.contiguous.max_seqlen_k = std::max<int>(r.contiguous.max_seqlen_k, (int)n);
        }
        r.contiguous.cu_seqlens_q = r.cu_q.data();
        r.contiguous.cu_seqlens_k = r.cu_k.data();
        r.contiguous.varlen_batch = batch;
        r.contiguous.max_seqlen_q = (int)c.seqlen_q;
    }
    if (c.seqused) {
        for (int64_t n : c.keys)
            r.used.push_back((int32_t)std::max<int64_t>(0, n - c.seqused_cut));
        r.contiguous.seqused_k = r.used.data();
    }
    r.paged = r.contiguous;
    r.paged.block_table = r.table.entries.data();
    r.paged.block_table_batch_stride = r.table.stride;
    r.paged.page_block_size = c.page;
    r.paged.block_table_width = c.width;
}

// A poisoned tensor of t's dtype and shape.
inline HostTensor make_like_tensor(const HostTensor &t)
{
    return make_tensor(t.view.dtype, std::vector<int64_t>(t.view.shape, t.view.shape + t.view.ndim));
}

// Largest |a - b| / max(1, |b|) over two tensors of one shape (rank 2..4), -inf == -inf.
inline double max_difference(const fa_tensor &a, const fa_tensor &b)
{
    double worst = 0;
    int64_t n = 1;
    for (int i = 0; i < a.ndim; ++i)
        n *= a.shape[i];
    for (int64_t flat = 0; flat < n; ++flat) {
        int64_t index[4], rest = flat;
        for (int i = a.ndim - 1; i >= 0; --i) {
            index[i] = rest % a.shape[i];
            rest /= a.shape[i];
        }
        double x = element(a, index), y = element(b, index);
        if (x == y)
            continue;
        double d = std::fabs(x - y) / std::max(1.0, std::fabs(y));
        worst = std::isnan(d) ? INFINITY : std::max(worst, d);
    }
    return worst;
}

struct KvCase {
    fa_dtype dtype = FA_DTYPE_F32;
    int batch = 3, heads = 4, heads_k = 2, dim = 64;
    int64_t s_max = 100, s_q = 5, s_new = 5;
    std::vector<int32_t> cache_seqlens = {0, 37, 95};
    int causal = 1;
    int page = 0;                          // > 0: paged, the cache a pool of this page size
    std::vector<int32_t> cache_batch_idx;  // contiguous cache rows (b_cache = cache_rows)
    int cache_rows = 0;
    int rotary_dim = 0, interleaved = 0;
    uint64_t seed = 11;
};

inline std::string describe(const KvCase &c)
{
    return std::string(fa_dtype_name(c.dtype)) + " s_q=" + std::to_string(c.s_q) + " s_new=" +
           std::to_string(c.s_new) + " page=" + std::to_string(c.page) + " cbi=" +
           std::to_string(!c.cache_batch_idx.empty()) + " rotary=" + std::to_string(c.rotary_dim) +
           (c.interleaved ? " interleaved" : "") + " causal=" + std::to_string(c.causal);
}

// Inputs of one call; the cache as a pool (contiguous caches: pages of s_max rows, a
// table of cache rows), so that gather() spells the logical keys of every kind alike.
struct KvRun {
    HostTensor q, k_cache, v_cache, k_new, v_new, out, lse, cos_t, sin_t;
    std::vector<unsigned char> k_before, v_before;
    PageTable table;   // the real table (paged) or the cache rows of each entry
    int64_t capacity = 0;
    fa_params params;
    fa_kvcache_params kv;
};

inline void prepare(const KvCase &c, KvRun &r)
{
    std::vector<int64_t> rows(c.batch);
    if (c.page > 0) {
        int width = (int)((c.s_max + c.page - 1) / c.page);
        r.capacity = (int64_t)width * c.page;
        std::fill(rows.begin(), rows.end(), r.capacity);
        int pages = c.batch * width + 3;
        r.table = make_table(rows, c.page, width, width + 1, 0, pages, c.seed);
        r.k_cache = make_tensor(c.dtype, {pages, c.page, c.heads_k, c.dim});
        r.v_cache = make_tensor(c.dtype, {pages, c.page, c.heads_k, c.dim});
    } else {
        int cache_rows = c.cache_batch_idx.empty() ? c.batch : c.cache_rows;
        r.capacity = c.s_max;
        r.table.width = 1;
        r.table.stride = 1;
        r.table.num_pages = cache_rows;
        for (int b = 0; b < c.batch; ++b)
            r.table.entries.push_back(c.cache_batch_idx.empty() ? b : c.cache_batch_idx[(size_t)b]);
        r.k_cache = make_tensor(c.dtype, {cache_rows, c.s_max, c.heads_k, c.dim});
        r.v_cache = make_tensor(c.dtype, {cache_rows, c.s_max, c.heads_k, c.dim});
    }
    fill_normal(r.k_cache, c.seed + 1);
    fill_normal(r.v_cache, c.seed + 2);
    r.k_before = r.k_cache.storage;
    r.v_before = r.v_cache.storage;
    r.k_new = make_tensor(c.dtype, {c.batch, c.s_new, c.heads_k, c.dim});
    r.v_new = make_tensor(c.dtype, {c.batch, c.s_new, c.heads_k, c.dim});
    fill_normal(r.k_new, c.seed + 3);
    fill_normal(r.v_new, c.seed + 4);
    r.q = make_tensor(c.dtype, {c.batch, c.s_q, c.heads, c.dim});
    fill_normal(r.q, c.seed + 5);
    r.out = make_tensor(c.dtype, {c.batch, c.s_q, c.heads, c.dim});
    r.lse = make_tensor(FA_DTYPE_F32, {c.batch, c.heads, c.s_q});
    fa_params_init(&r.params);
    r.params.causal = c.causal;
    if (c.page > 0) {
        r.params.block_table = r.table.entries.data();
        r.params.block_table_batch_stride = r.table.stride;
        r.params.page_block_size = c.page;
        r.params.block_table_width = r.table.width;
    }
    fa_kvcache_params_init(&r.kv);
    r.kv.cache_seqlens = c.cache_seqlens.data();
    r.kv.cache_batch_idx = c.cache_batch_idx.empty() ? nullptr : c.cache_batch_idx.data();
    if (c.rotary_dim > 0) {
        rotary_tables(c.dtype, r.capacity, c.rotary_dim, r.cos_t, r.sin_t);
        r.kv.rotary_cos = r.cos_t.view.data;
        r.kv.rotary_sin = r.sin_t.view.data;
        r.kv.rotary_dim = c.rotary_dim;
        r.kv.rotary_interleaved = c.interleaved;
        r.kv.rotary_seqlen = r.capacity;
    }
}

// Cache row (page) and row within it of logical key `key` of entry b.
inline void slot_of(const KvRun &r, int b, int64_t key, int64_t *row, int64_t *within)
{
    int64_t page = r.k_cache.view.shape[1];
    *row = r.table.entries[(size_t)(b * r.table.stride + key / page)];
    *within = key % page;
}

// Every appended slot holds k_new / v_new (k rotated at its position when rotary), and
// every other byte of the caches is as before.
inline void check_append(const KvCase &c, KvRun &r)
{
    const size_t row_bytes = (size_t)c.dim * dtype_size(c.dtype);
    double k_error = 0;
    for (int b = 0; b < c.batch; ++b)
        for (int64_t j = 0; j < c.s_new; ++j)
            for (int h = 0; h < c.heads_k; ++h) {
                int64_t key = c.cache_seqlens[(size_t)b] + j, row, within;
                slot_of(r, b, key, &row, &within);
                std::vector<double> want = head_row(r.k_new.view, b, j, h);
                if (c.rotary_dim > 0)
                    want = rotate_reference(want, r.cos_t.view, r.sin_t.view, key, c.rotary_dim, c.interleaved);
                k_error = std::max(k_error, row_error(head_row(r.k_cache.view, row, within, h), want));
                CHECK(std::memcmp(row_at(r.v_cache.view, row, within, h), row_at(r.v_new.view, b, j, h),
                                  row_bytes) == 0);
                size_t at = (size_t)(row_at(r.k_cache.view, row, within, h) - (char *)r.k_cache.storage.data());
                std::memcpy(r.k_before.data() + at, r.k_cache.storage.data() + at, row_bytes);
                std::memcpy(r.v_before.data() + at, r.v_cache.storage.data() + at, row_bytes);
            }
    CAPTURE(k_error);
    CHECK(k_error <= (c.rotary_dim > 0 ? rounding_bound(c.dtype) : 0.0));
    CHECK(r.k_before == r.k_cache.storage);
    CHECK(r.v_before == r.v_cache.storage);
}

// out and lse against the fp64 attention over the appended cache's logical keys, with q
// rotated by the reference rotary.
inline void check_attention(const KvCase &c, KvRun &r)
{
    std::vector<int64_t> keys;
    std::vector<int32_t> used;
    for (int32_t n : c.cache_seqlens) {
        keys.push_back(n + c.s_new);
        used.push_back((int32_t)(n + c.s_new));
    }
    HostTensor k = gather(r.k_cache, r.table, keys, false), v = gather(r.v_cache, r.table, keys, false);
    HostTensor q = r.q;
    if (c.rotary_dim > 0)
        for (int b = 0; b < c.batch; ++b)
            for (int64_t t = 0; t < c.s_q; ++t)
                for (int h = 0; h < c.heads; ++h) {
                    int64_t pos = keys[(size_t)b] - c.s_q + t;
                    std::vector<double> x = rotate_reference(head_row(r.q.view, b, t, h), r.cos_t.view,
                                                             r.sin_t.view, pos, c.rotary_dim, c.interleaved);
                    for (int64_t d = 0; d < c.dim; ++d) {
                        int64_t index[4] = {b, t, h, d};
                        set_element(q.view, index, x[(size_t)d]);
                    }
                }
    fa_params ref = r.params;
    ref.block_table = nullptr;
    ref.block_table_batch_stride = 0;
    ref.page_block_size = 0;
    ref.block_table_width = 0;
    ref.seqused_k = used.data();
    check_against_reference(q.view, k.view, v.view, ref, r.out.view, r.lse.view);
}

}  // namespace fa_paged

#endif  // FA_TEST_KVCACHE_CASE_HPP
