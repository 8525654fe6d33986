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
#include "kvcache_case.hpp"
#include "paged_case.hpp"

using namespace fa_oracle;
using namespace fa_paged;

namespace {

struct Cpu {
    fa_context *ctx = nullptr;
    Cpu() { REQUIRE(fa_create(&ctx, FA_BACKEND_CPU, 0) == FA_OK); }
    ~Cpu() { fa_destroy(ctx); }
};

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

fa_status run_kvcache(fa_context *ctx, KvRun &r)
{
    return fa_fwd_kvcache(ctx, &r.q.view, &r.k_cache.view, &r.v_cache.view, &r.k_new.view, &r.v_new.view,
                          &r.kv, &r.params, &r.out.view, &r.lse.view, nullptr, 0);
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
    {
        // cache_batch_idx reads each cache row as one page, rounded up to whole key tiles:
        // rows too long for that are refused (views only; no element is read).
        KvErrors g;
        g.c.cache_rows = 3;
        g.c.cache_batch_idx = {2, 0, 1};
        prepare(g.c, g.r);
        for (HostTensor *t : {&g.r.k_cache, &g.r.v_cache}) {
            t->view.shape[1] = 2147483500;
            t->view.stride[0] = t->view.shape[1] * t->view.stride[1];
        }
        CHECK(g.call("cache_batch_idx with cache rows of 2147483500 keys") == FA_ERR_UNSUPPORTED);
    }
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
