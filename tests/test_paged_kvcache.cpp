// test_paged_kvcache.cpp - paged K/V in fa_fwd and fa_fwd_kvcache on the CPU backend:
// paged results equal those over the contiguous K/V the pages spell (and the fp64
// reference) for page sizes 16..256, random page orders, shared pages, varlen, seqused_k
// and GQA; the append lands at the right cache slots (across page boundaries, through
// cache_batch_idx) and the attention equals the reference over the appended cache;
// rotary in both layouts against the fp64 rotary of paged_case.hpp; and every bad
// table, page id, page size, width or cache length is a named error that writes nothing,
// the cache included.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "flashattn.h"
#include "oracle.hpp"
#include "paged_case.hpp"

using namespace fa_oracle;
using namespace fa_paged;

namespace {

struct Cpu {
    fa_context *ctx = nullptr;
    Cpu() { REQUIRE(fa_create(&ctx, FA_BACKEND_CPU, 0) == FA_OK); }
    ~Cpu() { fa_destroy(ctx); }
};

// The error bound of check_case in test_cpu_forward.cpp: fp32 1e-4, 16-bit dtypes twice
// what a naive same-dtype attention is off by.
void check_against_reference(const fa_tensor &q, const fa_tensor &k, const fa_tensor &v,
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

std::string describe(const PagedCase &c)
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

void prepare(const PagedCase &c, PagedRun &r)
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
HostTensor make_like_tensor(const HostTensor &t)
{
    return make_tensor(t.view.dtype, std::vector<int64_t>(t.view.shape, t.view.shape + t.view.ndim));
}

// Largest |a - b| / max(1, |b|) over two tensors of one shape (rank 2..4), -inf == -inf.
double max_difference(const fa_tensor &a, const fa_tensor &b)
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

void check_paged(const PagedCase &c)
{
    INFO(describe(c));
    Cpu cpu;
    PagedRun r;
    prepare(c, r);
    REQUIRE(fa_fwd(cpu.ctx, &r.q.view, &r.k_pool.view, &r.v_pool.view, &r.paged, &r.out.view, &r.lse.view,
                   nullptr, 0) == FA_OK);
    REQUIRE(fa_fwd(cpu.ctx, &r.q.view, &r.k.view, &r.v.view, &r.contiguous, &r.out_ref.view, &r.lse_ref.view,
                   nullptr, 0) == FA_OK);
    REQUIRE(all_elements_written(r.out));
    REQUIRE(all_elements_written(r.lse));
    check_against_reference(r.q.view, r.k.view, r.v.view, r.contiguous, r.out.view, r.lse.view);
    // Against the contiguous call: only the fp32 summation order (tiles end at page
    // boundaries) differs, so at most a rounding of the output dtype.
    CHECK(max_difference(r.out.view, r.out_ref.view) <= rounding_bound(c.dtype) * 2);
    CHECK(max_difference(r.lse.view, r.lse_ref.view) <= 1e-5);
}

}  // namespace

TEST_CASE("cpu paged: P 16 / 64 / 256, 1000-key sequences ending inside a page, random page order",
          "[cpu][paged]")
{
    for (int page : {16, 64, 256})
        for (fa_dtype dt : {FA_DTYPE_F32, FA_DTYPE_BF16}) {
            PagedCase c;
            c.dtype = dt;
            c.page = page;
            c.width = (1000 + page - 1) / page;
            c.keys = {1000, 1000};
            c.seqused = true; // 1000 of width * P keys
            check_paged(c);
            c.causal = true;
            c.seqlen_q = 5;
            check_paged(c);
        }
}

TEST_CASE("cpu paged: full rows without seqused_k, GQA and MQA", "[cpu][paged]")
{
    for (int heads_k : {4, 2, 1}) {
        PagedCase c;
        c.heads_k = heads_k;
        c.page = 32;
        c.width = 5;
        c.keys = {160, 160, 160};
        check_paged(c);
    }
}

TEST_CASE("cpu paged: shared prefix pages, table stride past the width", "[cpu][paged]")
{
    PagedCase c;
    c.page = 16;
    c.width = 40;
    c.extra_stride = 3;
    c.shared = 6;
    c.keys = {600, 130, 97, 640};
    c.seqused = true;
    check_paged(c);
}

TEST_CASE("cpu paged: varlen q and key lengths from cu_seqlens_k", "[cpu][paged]")
{
    for (int page : {16, 64}) {
        PagedCase c;
        c.varlen = true;
        c.page = page;
        c.width = (1000 + page - 1) / page;
        c.shared = 2;
        c.keys = {1000, 37, 0, 513};
        c.causal = page == 16;
        check_paged(c);
        c.seqused = true;
        c.seqused_cut = 17;
        c.keys = {999, 1, 64, 300};
        check_paged(c);
    }
}

// ---- paged errors: named, nothing written ---------------------------------------------

namespace {

// A small valid paged problem whose params a test breaks; call() runs fa_fwd and checks
// that a failure left out and lse poisoned.
struct PagedErrors {
    Cpu cpu;
    PagedCase c;
    PagedRun r;
    PagedErrors()
    {
        c.page = 16;
        c.width = 3;
        c.keys = {48, 48};
        prepare(c, r);
    }
    fa_status call(const char *needle)
    {
        fa_status st = fa_fwd(cpu.ctx, &r.q.view, &r.k_pool.view, &r.v_pool.view, &r.paged, &r.out.view,
                              &r.lse.view, nullptr, 0);
        std::string message = fa_last_error(cpu.ctx);
        INFO(message);
        CHECK(message.find(needle) != std::string::npos);
        CHECK(gaps_untouched(r.out));
        CHECK(!all_elements_written(r.out)); // still all poison
        return st;
    }
};

}  // namespace

TEST_CASE("cpu paged: the valid base problem of the error tests runs", "[cpu][paged][errors]")
{
    PagedErrors e;
    REQUIRE(fa_fwd(e.cpu.ctx, &e.r.q.view, &e.r.k_pool.view, &e.r.v_pool.view, &e.r.paged, &e.r.out.view,
                   &e.r.lse.view, nullptr, 0) == FA_OK);
}

TEST_CASE("cpu paged: page ids outside the pool", "[cpu][paged][errors]")
{
    PagedErrors e;
    e.r.table.entries[(size_t)e.r.table.stride + 2] = e.r.table.num_pages;
    CHECK(e.call("block_table[1][2]") == FA_ERR_BAD_SEQLENS);
    e.r.table.entries[(size_t)e.r.table.stride + 2] = -1;
    CHECK(e.call("block_table[1][2]") == FA_ERR_BAD_SEQLENS);
}

TEST_CASE("cpu paged: page sizes, widths and strides", "[cpu][paged][errors]")
{
    PagedErrors e;
    e.r.paged.page_block_size = 24;
    CHECK(e.call("multiple of 16") == FA_ERR_BAD_PARAM);
    e.r.paged.page_block_size = 2048;
    CHECK(e.call("multiple of 16") == FA_ERR_BAD_PARAM);
    e.r.paged.page_block_size = 0;
    CHECK(e.call("multiple of 16") == FA_ERR_BAD_PARAM);
    e.r.paged.page_block_size = 16;
    e.r.paged.block_table_width = 0;
    CHECK(e.call("block_table_width 0") == FA_ERR_BAD_PARAM);
    e.r.paged.block_table_width = 3;
    e.r.paged.block_table_batch_stride = 2;
    CHECK(e.call("rows would overlap") == FA_ERR_BAD_PARAM);
    e.r.paged.block_table_batch_stride = 3;
    e.r.paged.page_block_size = 32; // the pools hold 16 rows a page
    CHECK(e.call("rows per page") == FA_ERR_SHAPE_MISMATCH);
}

TEST_CASE("cpu paged: pools that disagree, and paged fields without a table", "[cpu][paged][errors]")
{
    PagedErrors e;
    e.r.v_pool = make_tensor(FA_DTYPE_F32, {e.r.table.num_pages - 1, 16, 2, 64});
    CHECK(e.call("v batch") == FA_ERR_SHAPE_MISMATCH);
    PagedErrors f;
    f.r.k_pool = f.r.k; // a contiguous problem with a page size but no table
    f.r.v_pool = f.r.v;
    f.r.paged = f.r.contiguous;
    f.r.paged.page_block_size = 16;
    CHECK(f.call("without block_table") == FA_ERR_BAD_PARAM);
}

TEST_CASE("cpu paged: varlen max_seqlen_k past what a table row reaches", "[cpu][paged][errors]")
{
    PagedErrors e;
    e.c.varlen = true;
    e.c.keys = {40, 8};
    prepare(e.c, e.r);
    e.r.paged.max_seqlen_k = 49;
    CHECK(e.call("max_seqlen_k 49") == FA_ERR_BAD_PARAM);
}

TEST_CASE("cpu paged: the backward refuses paging", "[cpu][paged][errors]")
{
    PagedErrors e;
    HostTensor dq = make_like_tensor(e.r.q), dk = make_like_tensor(e.r.k_pool), dv = make_like_tensor(e.r.v_pool);
    fa_status st = fa_bwd(e.cpu.ctx, &e.r.q.view, &e.r.k_pool.view, &e.r.v_pool.view, &e.r.out.view, &e.r.lse.view,
                          &e.r.q.view, &e.r.paged, &dq.view, &dk.view, &dv.view, nullptr, 0);
    CHECK(st == FA_ERR_UNSUPPORTED);
    CHECK(std::string(fa_last_error(e.cpu.ctx)).find("paged") != std::string::npos);
}

// ---- fa_fwd_kvcache --------------------------------------------------------------------

namespace {

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

std::string describe(const KvCase &c)
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

void prepare(const KvCase &c, KvRun &r)
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

fa_status run_kvcache(fa_context *ctx, KvRun &r)
{
    return fa_fwd_kvcache(ctx, &r.q.view, &r.k_cache.view, &r.v_cache.view, &r.k_new.view, &r.v_new.view,
                          &r.kv, &r.params, &r.out.view, &r.lse.view, nullptr, 0);
}

// Cache row (page) and row within it of logical key `key` of entry b.
void slot_of(const KvRun &r, int b, int64_t key, int64_t *row, int64_t *within)
{
    int64_t page = r.k_cache.view.shape[1];
    *row = r.table.entries[(size_t)(b * r.table.stride + key / page)];
    *within = key % page;
}

// Every appended slot holds k_new / v_new (k rotated at its position when rotary), and
// every other byte of the caches is as before.
void check_append(const KvCase &c, KvRun &r)
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
void check_attention(const KvCase &c, KvRun &r)
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

void check_kvcache(const KvCase &c)
{
    INFO(describe(c));
    Cpu cpu;
    KvRun r;
    prepare(c, r);
    fa_status st = run_kvcache(cpu.ctx, r);
    INFO(fa_last_error(cpu.ctx));
    REQUIRE(st == FA_OK);
    check_append(c, r);
    check_attention(c, r);
}

}  // namespace

TEST_CASE("cpu kvcache: append into contiguous caches, then attention over them", "[cpu][kvcache]")
{
    for (fa_dtype dt : {FA_DTYPE_F32, FA_DTYPE_BF16}) {
        KvCase c;
        c.dtype = dt;
        check_kvcache(c);
        c.causal = 0;
        c.s_q = 1; // decode
        check_kvcache(c);
        c.s_new = 0; // attention over the cache as it is
        c.cache_seqlens = {1, 37, 100};
        check_kvcache(c);
    }
}

TEST_CASE("cpu kvcache: cache_batch_idx picks the cache rows", "[cpu][kvcache]")
{
    KvCase c;
    c.cache_rows = 5;
    c.cache_batch_idx = {4, 1, 2};
    check_kvcache(c);
}

TEST_CASE("cpu kvcache: paged caches, appends across page boundaries", "[cpu][kvcache]")
{
    for (int page : {16, 64}) {
        KvCase c;
        c.page = page;
        c.s_max = 200;
        c.s_new = 7;
        c.s_q = 7;
        c.cache_seqlens = {14, 60, (int32_t)(((200 + page - 1) / page) * page - 7)};
        check_kvcache(c);
    }
}

TEST_CASE("cpu kvcache: rotary in both layouts, rotary_dim below the head dim", "[cpu][kvcache]")
{
    for (fa_dtype dt : {FA_DTYPE_F32, FA_DTYPE_BF16, FA_DTYPE_F16})
        for (int interleaved : {0, 1}) {
            KvCase c;
            c.dtype = dt;
            c.rotary_dim = 32;
            c.interleaved = interleaved;
            check_kvcache(c);
            c.page = 16;
            c.rotary_dim = 64; // the whole head
            c.causal = 0;
            c.s_q = 3;         // q rows aligned with the last three new keys
            check_kvcache(c);
        }
}

TEST_CASE("cpu kvcache: append only (no query rows) and the workspace query", "[cpu][kvcache]")
{
    KvCase c;
    c.s_q = 0;
    Cpu cpu;
    KvRun r;
    prepare(c, r);
    size_t bytes = 1;
    REQUIRE(fa_fwd_kvcache_workspace_size(cpu.ctx, &r.q.view, &r.k_cache.view, &r.v_cache.view, &r.k_new.view,
                                          &r.v_new.view, &r.kv, &r.params, &bytes) == FA_OK);
    CHECK(bytes == 0);
    REQUIRE(run_kvcache(cpu.ctx, r) == FA_OK);
    check_append(c, r);
}

// ---- fa_fwd_kvcache errors: named, nothing written (the cache included) ---------------

namespace {

struct KvErrors {
    Cpu cpu;
    KvCase c;
    KvRun r;
    KvErrors() { prepare(c, r); }
    fa_status call(const char *needle)
    {
        fa_status st = run_kvcache(cpu.ctx, r);
        std::string message = fa_last_error(cpu.ctx);
        INFO(message);
        CHECK(message.find(needle) != std::string::npos);
        CHECK(r.k_cache.storage == r.k_before);
        CHECK(r.v_cache.storage == r.v_before);
        CHECK(!all_elements_written(r.out));
        return st;
    }
};

}  // namespace

TEST_CASE("cpu kvcache: cache lengths past the capacity or negative", "[cpu][kvcache][errors]")
{
    KvErrors e;
    e.c.cache_seqlens[2] = 96; // + 5 new > 100
    CHECK(e.call("cache_seqlens[2] = 96") == FA_ERR_BAD_SEQLENS);
    e.c.cache_seqlens[2] = -1;
    CHECK(e.call("cache_seqlens[2] = -1") == FA_ERR_BAD_SEQLENS);
}

TEST_CASE("cpu kvcache: cache rows and pages outside the cache", "[cpu][kvcache][errors]")
{
    KvErrors e;
    e.c.cache_rows = 3;
    e.c.cache_batch_idx = {0, 3, 1};
    prepare(e.c, e.r);
    CHECK(e.call("cache_batch_idx[1] = 3") == FA_ERR_BAD_SEQLENS);
    KvErrors f;
    f.c.page = 16;
    prepare(f.c, f.r);
    f.r.table.entries[(size_t)f.r.table.stride + 2] = -5; // keys 32..47 of entry 1 (37 + 5 new)
    CHECK(f.call("block_table[1][2]") == FA_ERR_BAD_SEQLENS);
}

TEST_CASE("cpu kvcache: what fa_fwd_kvcache does not take", "[cpu][kvcache][errors]")
{
    KvErrors e;
    std::vector<int32_t> cu = {0, 5, 10, 15};
    e.r.params.cu_seqlens_q = cu.data();
    e.r.params.cu_seqlens_k = cu.data();
    e.r.params.varlen_batch = 3;
    CHECK(e.call("varlen") == FA_ERR_UNSUPPORTED);
    e.r.params.cu_seqlens_q = e.r.params.cu_seqlens_k = nullptr;
    e.r.params.varlen_batch = 0;
    e.r.params.seqused_k = cu.data();
    CHECK(e.call("seqused_k") == FA_ERR_UNSUPPORTED);
    KvErrors f;
    f.c.page = 16;
    prepare(f.c, f.r);
    std::vector<int32_t> rows = {0, 1, 2};
    f.r.kv.cache_batch_idx = rows.data();
    CHECK(f.call("cache_batch_idx with a paged cache") == FA_ERR_UNSUPPORTED);
}

TEST_CASE("cpu kvcache: rotary parameters", "[cpu][kvcache][errors]")
{
    KvErrors e;
    e.c.rotary_dim = 32;
    prepare(e.c, e.r);
    e.r.kv.rotary_dim = 24;
    CHECK(e.call("rotary_dim 24") == FA_ERR_BAD_PARAM);
    e.r.kv.rotary_dim = 80;
    CHECK(e.call("rotary_dim 80") == FA_ERR_BAD_PARAM);
    e.r.kv.rotary_dim = 32;
    e.r.kv.rotary_seqlen = 99;
    CHECK(e.call("rotary_seqlen 99") == FA_ERR_BAD_PARAM);
    e.r.kv.rotary_seqlen = 100;
    e.r.kv.rotary_sin = nullptr;
    CHECK(e.call("rotary_sin is NULL") == FA_ERR_NULL_POINTER);
    KvErrors f; // s_q 5 > 0 + 5 new keys + ... entry 0 has n 0: q row 0 sits at position 0
    f.c.rotary_dim = 32;
    f.c.s_q = 6;
    prepare(f.c, f.r);
    CHECK(f.call("before position 0") == FA_ERR_BAD_SEQLENS);
}

TEST_CASE("cpu kvcache: tensors that disagree", "[cpu][kvcache][errors]")
{
    KvErrors e;
    CHECK(fa_fwd_kvcache(e.cpu.ctx, &e.r.q.view, &e.r.k_cache.view, &e.r.v_cache.view, &e.r.k_new.view, nullptr,
                         &e.r.kv, &e.r.params, &e.r.out.view, &e.r.lse.view, nullptr, 0) == FA_ERR_NULL_POINTER);
    e.c.s_new = 101;
    prepare(e.c, e.r);
    CHECK(e.call("more than a cache row holds") == FA_ERR_SHAPE_MISMATCH);
    KvErrors f;
    f.c.cache_rows = 4; // b_cache != b without cache_batch_idx
    f.r.k_cache = make_tensor(FA_DTYPE_F32, {4, 100, 2, 64});
    f.r.v_cache = make_tensor(FA_DTYPE_F32, {4, 100, 2, 64});
    f.r.k_before = f.r.k_cache.storage;
    f.r.v_before = f.r.v_cache.storage;
    CHECK(f.call("k batch 4 != q batch 3") == FA_ERR_SHAPE_MISMATCH);
    KvErrors g;
    g.r.k_new = make_tensor(FA_DTYPE_F32, {3, 5, 1, 64});
    CHECK(g.call("k_new heads 1 != k_cache heads 2") == FA_ERR_SHAPE_MISMATCH);
}
