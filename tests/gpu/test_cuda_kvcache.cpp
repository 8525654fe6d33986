// test_cuda_kvcache.cpp - fa_fwd_kvcache and paged fa_fwd on the CUDA backend, checked
// on the host as the CPU tests check them (tests/kvcache_case.hpp): the appended cache
// slot by slot and untouched elsewhere, out / lse against the fp64 reference over the
// appended cache, rotary in both layouts, paged caches and cache_batch_idx (read by the
// decode family), and paged fa_fwd over page sizes 16 to 1024 with pages in random order,
// shared between sequences and partly filled.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "device_tensors.hpp"
#include "graph_capture.hpp"
#include "kvcache_case.hpp"

using namespace fa_paged;

namespace {

// The device side of a KvRun: mirrors of its tensors and arrays, the params pointing at
// them; results copied back into the KvRun's host tensors.
struct DeviceKvRun {
    std::unique_ptr<DeviceTensor> q, k_cache, v_cache, k_new, v_new, out, lse, cos_t, sin_t;
    std::unique_ptr<DeviceArray<int32_t>> seqlens, batch_idx, table;
    fa_params params;
    fa_kvcache_params kv;

    DeviceKvRun(const KvCase &c, KvRun &r)
    {
        q.reset(new DeviceTensor(r.q));
        k_cache.reset(new DeviceTensor(r.k_cache));
        v_cache.reset(new DeviceTensor(r.v_cache));
        k_new.reset(new DeviceTensor(r.k_new));
        v_new.reset(new DeviceTensor(r.v_new));
        out.reset(new DeviceTensor(r.out));
        lse.reset(new DeviceTensor(r.lse));
        params = r.params;
        kv = r.kv;
        seqlens.reset(new DeviceArray<int32_t>(c.cache_seqlens));
        kv.cache_seqlens = seqlens->get();
        if (!c.cache_batch_idx.empty()) {
            batch_idx.reset(new DeviceArray<int32_t>(c.cache_batch_idx));
            kv.cache_batch_idx = batch_idx->get();
        }
        if (c.page > 0) {
            table.reset(new DeviceArray<int32_t>(r.table.entries));
            params.block_table = table->get();
        }
        if (c.rotary_dim > 0) {
            cos_t.reset(new DeviceTensor(r.cos_t));
            sin_t.reset(new DeviceTensor(r.sin_t));
            kv.rotary_cos = cos_t->view.data;
            kv.rotary_sin = sin_t->view.data;
        }
    }
    fa_status run(fa_context *ctx, void *workspace, size_t bytes)
    {
        fa_status st = fa_fwd_kvcache(ctx, &q->view, &k_cache->view, &v_cache->view, &k_new->view, &v_new->view,
                                      &kv, &params, &out->view, &lse->view, workspace, bytes);
        REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
        k_cache->copy_back();
        v_cache->copy_back();
        out->copy_back();
        lse->copy_back();
        return st;
    }
};

// Runs the case with the library's own workspace, or with a caller's of the queried size.
void check_gpu_kvcache(const KvCase &c, bool caller_workspace)
{
    INFO(describe(c) << " caller_workspace=" << caller_workspace);
    Context gpu;
    KvRun r;
    prepare(c, r);
    DeviceKvRun d(c, r);
    size_t bytes = 0;
    fa_status st = fa_fwd_kvcache_workspace_size(gpu.ctx, &d.q->view, &d.k_cache->view, &d.v_cache->view,
                                                 &d.k_new->view, &d.v_new->view, &d.kv, &d.params, &bytes);
    std::unique_ptr<DeviceBuffer> ws;
    if (st == FA_OK && caller_workspace)
        ws.reset(new DeviceBuffer(bytes));
    if (st == FA_OK)
        st = d.run(gpu.ctx, ws ? ws->ptr : nullptr, bytes);
    INFO(fa_last_error(gpu.ctx));
    REQUIRE(st == FA_OK);
    check_append(c, r);
    check_attention(c, r);
}

}  // namespace

TEST_CASE("cuda kvcache: contiguous append then attention, against the fp64 reference", "[gpu][kvcache]")
{
    for (fa_dtype dt : {FA_DTYPE_BF16, FA_DTYPE_F16})
        for (int dim : {64, 128}) {
            KvCase c;
            c.dtype = dt;
            c.dim = dim;
            c.heads = 8;
            c.heads_k = 2;
            c.s_max = 301;
            c.cache_seqlens = {0, 137, 296};
            check_gpu_kvcache(c, false);
            c.s_q = 1;
            c.causal = 0;
            check_gpu_kvcache(c, true);
        }
}

TEST_CASE("cuda kvcache: no new keys, decode over the cache as it is", "[gpu][kvcache]")
{
    KvCase c;
    c.dtype = FA_DTYPE_BF16;
    c.s_new = 0;
    c.s_q = 1;
    c.cache_seqlens = {1, 64, 100};
    check_gpu_kvcache(c, false);
}

TEST_CASE("cuda kvcache: rotary in both layouts, rotary_dim below the head dim", "[gpu][kvcache]")
{
    for (fa_dtype dt : {FA_DTYPE_BF16, FA_DTYPE_F16})
        for (int interleaved : {0, 1})
            for (int rotary_dim : {32, 128}) {
                KvCase c;
                c.dtype = dt;
                c.dim = 128;
                c.rotary_dim = rotary_dim;
                c.interleaved = interleaved;
                c.s_max = 200;
                c.cache_seqlens = {3, 100, 195};
                check_gpu_kvcache(c, false);
                c.causal = 0;
                c.s_q = 2;
                check_gpu_kvcache(c, true);
            }
}

TEST_CASE("cuda kvcache: append only (no query rows)", "[gpu][kvcache]")
{
    KvCase c;
    c.dtype = FA_DTYPE_BF16;
    c.s_q = 0;
    c.rotary_dim = 32;
    Context gpu;
    KvRun r;
    prepare(c, r);
    DeviceKvRun d(c, r);
    REQUIRE(d.run(gpu.ctx, nullptr, 0) == FA_OK);
    check_append(c, r);
}

TEST_CASE("cuda kvcache: paged caches and cache_batch_idx", "[gpu][kvcache][paged][decode]")
{
    for (int page : {16, 256}) {
        KvCase c;
        c.dtype = FA_DTYPE_BF16;
        c.page = page;
        c.s_max = 600;
        c.s_new = 7;
        c.s_q = 7;
        c.cache_seqlens = {14, 250, (int32_t)(((600 + page - 1) / page) * page - 7)};
        check_gpu_kvcache(c, false);
    }
    KvCase c;
    c.dtype = FA_DTYPE_BF16;
    c.cache_rows = 5;
    c.cache_batch_idx = {4, 1, 2};
    check_gpu_kvcache(c, false);
}

// The device side of a PagedRun: its tensors, table and arrays on the GPU and the
// params pointing at them.
struct DevicePaged {
    DeviceTensor q, k_pool, v_pool, out, lse;
    DeviceArray<int32_t> table;
    std::unique_ptr<DeviceArray<int32_t>> used, cu_q, cu_k;
    fa_params params;

    explicit DevicePaged(PagedRun &r)
        : q(r.q), k_pool(r.k_pool), v_pool(r.v_pool), out(r.out), lse(r.lse), table(r.table.entries),
          params(r.paged)
    {
        params.block_table = table.get();
        if (params.seqused_k) {
            used.reset(new DeviceArray<int32_t>(r.used));
            params.seqused_k = used->get();
        }
        if (params.cu_seqlens_q) {
            cu_q.reset(new DeviceArray<int32_t>(r.cu_q));
            cu_k.reset(new DeviceArray<int32_t>(r.cu_k));
            params.cu_seqlens_q = cu_q->get();
            params.cu_seqlens_k = cu_k->get();
        }
    }
    fa_status forward(fa_context *ctx, void *workspace = nullptr, size_t bytes = 0)
    {
        return fa_fwd(ctx, &q.view, &k_pool.view, &v_pool.view, &params, &out.view, &lse.view, workspace, bytes);
    }
};

// A server's decode step: one new token per sequence, bf16, GQA 8/2, d 128, 16-key pages
// in a table `width` entries wide, seqused_k giving each sequence's keys.
PagedCase paged_decode_case(int width, std::vector<int64_t> keys)
{
    PagedCase c;
    c.dtype = FA_DTYPE_BF16;
    c.page = 16;
    c.width = width;
    c.keys = std::move(keys);
    c.seqused = true;
    c.heads = 8;
    c.heads_k = 2;
    c.dim = 128;
    c.seqlen_q = 1;
    return c;
}

// One paged forward on the GPU against the fp64 reference over the same keys laid out
// contiguously.
void check_gpu_paged(const PagedCase &c)
{
    INFO(describe(c));
    PagedRun r;
    prepare(c, r);
    DevicePaged d(r);
    Context gpu;
    fa_status st = d.forward(gpu.ctx);
    INFO(fa_last_error(gpu.ctx));
    REQUIRE(st == FA_OK);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    d.out.copy_back();
    d.lse.copy_back();
    check_against_reference(r.q.view, r.k.view, r.v.view, r.contiguous, r.out.view, r.lse.view);
}

TEST_CASE("cuda paged fa_fwd: page sizes 16 to 1024, random order, shared pages, partial last pages",
          "[gpu][paged][decode]")
{
    uint64_t seed = 40;
    for (int page : {16, 48, 64, 256, 1024})
        for (bool causal : {false, true}) {
            PagedCase c;
            c.dtype = seed % 2 ? FA_DTYPE_BF16 : FA_DTYPE_F16;
            c.page = page;
            c.width = (1000 + page - 1) / page;
            c.shared = 2;
            c.keys = {1000, 999, 37};
            c.seqused = true;
            c.heads = 8;
            c.heads_k = 2;
            c.dim = 128;
            c.seqlen_q = causal ? 4 : 1;
            c.causal = causal;
            c.seed = seed++;
            check_gpu_paged(c);
        }
}

TEST_CASE("cuda paged fa_fwd: varlen queries, MQA, head dims, prefill-sized queries", "[gpu][paged][decode]")
{
    PagedCase v;
    v.dtype = FA_DTYPE_BF16;
    v.page = 32;
    v.width = 40;
    v.keys = {1000, 17, 640};
    v.varlen = true;
    v.causal = true;
    v.heads = 4;
    v.heads_k = 2;
    v.dim = 64;
    check_gpu_paged(v);
    for (int dim : {40, 96, 256}) {
        PagedCase m;
        m.dtype = FA_DTYPE_F16;
        m.page = 16;
        m.width = 20;
        m.keys = {300, 317};
        m.seqused = true;
        m.heads = 32;
        m.heads_k = 1;
        m.dim = dim;
        m.seqlen_q = 2;
        check_gpu_paged(m);
    }
    PagedCase big; // 300 query rows x 4 heads: many packed tiles, still the decode family
    big.dtype = FA_DTYPE_BF16;
    big.page = 64;
    big.width = 8;
    big.keys = {512, 512};
    big.heads = 4;
    big.heads_k = 4;
    big.dim = 128;
    big.seqlen_q = 300;
    big.causal = true;
    check_gpu_paged(big);
}

TEST_CASE("cuda graph: paged decode captured, replayed with new lengths and a bad page", "[gpu][paged][graph][decode]")
{
    const PagedCase c = paged_decode_case(63, {1000, 517});
    PagedRun r;
    prepare(c, r);
    DevicePaged d(r);
    Context ctx;
    Stream stream;
    REQUIRE(fa_set_stream(ctx.ctx, stream.s) == FA_OK);
    size_t bytes = 0;
    REQUIRE(fa_fwd_workspace_size(ctx.ctx, &d.q.view, &d.k_pool.view, &d.v_pool.view, &d.params, &bytes) == FA_OK);
    DeviceBuffer ws(bytes);
    Graph g;
    capture(ctx.ctx, stream.s, g, [&] { return d.forward(ctx.ctx, ws.ptr, bytes); });

    g.replay(stream.s);
    d.out.copy_back();
    d.lse.copy_back();
    check_against_reference(r.q.view, r.k.view, r.v.view, r.contiguous, r.out.view, r.lse.view);
    const std::vector<unsigned char> replayed = download(d.out);

    // Shorter sequences: the replay reads the new seqused_k as an eager call does.
    upload(*d.used, std::vector<int32_t>{333, 17});
    reset(d.out);
    g.replay(stream.s);
    const std::vector<unsigned char> moved = download(d.out);
    CHECK(!same_bytes(moved, replayed));
    reset(d.out);
    REQUIRE(d.forward(ctx.ctx, ws.ptr, bytes) == FA_OK);
    REQUIRE(cudaStreamSynchronize(stream.s) == cudaSuccess);
    CHECK(same_bytes(download(d.out), moved));
    CHECK(fa_device_error(ctx.ctx, 1) == FA_OK);

    // A page id past the pool: the replay writes nothing for that sequence, and says so.
    std::vector<int32_t> bad = r.table.entries;
    bad[0] = static_cast<int32_t>(d.k_pool.view.shape[0]);
    upload(d.table, bad);
    reset(d.out);
    g.replay(stream.s);
    CHECK(fa_device_error(ctx.ctx, 1) == FA_ERR_DEVICE_CHECK);
    CHECK(contains(fa_last_error(ctx.ctx), "block_table[0][0]"));
    // Sequence 0 (the first half of out) stays poisoned, sequence 1 is as before.
    const std::vector<unsigned char> after = download(d.out);
    const size_t half = after.size() / 2;
    d.out.copy_back();
    CHECK(!fa_oracle::all_elements_written(r.out));
    CHECK(std::equal(after.begin() + half, after.end(), moved.begin() + half));
}

// A fixed-length paged decode reads seqused_k and the page ids before they are judged
// (by its own blocks, checks_itself, or by the check kernel beside it, checked_late:
// attn_args.h), clamped into the pools, and writes nothing for a sequence found bad. Run
// under memcheck (bench/device_run.sh) this shows the unchecked reads stay in bounds.
// Table rows of `width` entries.
void check_out_of_range_indices(int width)
{
    INFO("block_table_width " << width);
    const PagedCase c = paged_decode_case(width, {1000, 517, 700});
    PagedRun r;
    prepare(c, r);
    DevicePaged d(r);
    Context ctx;
    const size_t seq_bytes = (size_t)c.heads * c.dim * 2; // one sequence's out: s_q 1, bf16
    for (int splits : {1, 4}) {
        INFO("num_splits " << splits);
        d.params.num_splits = splits;
        upload(*d.used, r.used);
        upload(d.table, r.table.entries);
        reset(d.out);
        REQUIRE(d.forward(ctx.ctx) == FA_OK);
        const std::vector<unsigned char> good = download(d.out);
        d.out.copy_back();
        d.lse.copy_back();
        check_against_reference(r.q.view, r.k.view, r.v.view, r.contiguous, r.out.view, r.lse.view);

        // Sequence 1 uses 2^30 keys, sequence 2 has a negative page and one past the pool.
        std::vector<int32_t> used = r.used, table = r.table.entries;
        used[1] = 1 << 30;
        const int64_t stride = d.params.block_table_batch_stride;
        table[(size_t)(2 * stride + 3)] = -7;
        table[(size_t)(2 * stride + 40)] = static_cast<int32_t>(d.k_pool.view.shape[0]);
        upload(*d.used, used);
        upload(d.table, table);
        reset(d.out);
        REQUIRE(d.forward(ctx.ctx) == FA_OK);
        CHECK(fa_device_error(ctx.ctx, 1) == FA_ERR_DEVICE_CHECK);
        const std::string msg = fa_last_error(ctx.ctx);
        INFO(msg);
        CHECK((contains(msg, "seqused_k[1]") || contains(msg, "block_table[2][3]") ||
               contains(msg, "block_table[2][40]")));
        const std::vector<unsigned char> after = download(d.out);
        const std::vector<unsigned char> &poison = d.out.host->storage;
        CHECK(std::equal(after.begin(), after.begin() + seq_bytes, good.begin()));
        CHECK(std::equal(after.begin() + seq_bytes, after.end(), poison.begin() + seq_bytes));
    }
}

// Rows of 70 entries: the decode kernel judges each sequence itself; of 600 (past
// FA_JUDGE_ROUND entries a thread): the check kernel runs beside it.
TEST_CASE("cuda paged decode: out-of-range seqused_k and page ids, read beside the check, write nothing",
          "[gpu][paged][decode][device_check][sanitize]")
{
    check_out_of_range_indices(70);
    check_out_of_range_indices(600);
}

TEST_CASE("cuda graph: fa_fwd_kvcache (paged, rotary) captured and replayed", "[gpu][kvcache][paged][graph][decode]")
{
    KvCase c;
    c.dtype = FA_DTYPE_BF16;
    c.page = 16;
    c.s_max = 200;
    c.s_new = 3;
    c.s_q = 3;
    c.cache_seqlens = {14, 150, 0};
    c.rotary_dim = 32;
    KvRun r;
    prepare(c, r);
    DeviceKvRun d(c, r);
    Context ctx;
    Stream stream;
    REQUIRE(fa_set_stream(ctx.ctx, stream.s) == FA_OK);
    size_t bytes = 0;
    REQUIRE(fa_fwd_kvcache_workspace_size(ctx.ctx, &d.q->view, &d.k_cache->view, &d.v_cache->view, &d.k_new->view,
                                          &d.v_new->view, &d.kv, &d.params, &bytes) == FA_OK);
    DeviceBuffer ws(bytes);
    Graph g;
    capture(ctx.ctx, stream.s, g, [&] {
        return fa_fwd_kvcache(ctx.ctx, &d.q->view, &d.k_cache->view, &d.v_cache->view, &d.k_new->view,
                              &d.v_new->view, &d.kv, &d.params, &d.out->view, &d.lse->view, ws.ptr, bytes);
    });
    // Nothing ran during the capture: the cache is as it was.
    CHECK(same_bytes(download(*d.k_cache), r.k_before));

    g.replay(stream.s);
    d.k_cache->copy_back();
    d.v_cache->copy_back();
    d.out->copy_back();
    d.lse->copy_back();
    check_append(c, r);
    check_attention(c, r);

    // A length past the cache: the replay appends nothing for that entry and says so. The
    // other entries append the same rows at the same slots again, so the caches are
    // byte-equal to after the first replay; entry 1 gets no output rows.
    const std::vector<unsigned char> k_after = download(*d.k_cache), v_after = download(*d.v_cache);
    // The capacity is whole pages (13 x 16 = 208 keys for s_max 200), one key short here.
    const int32_t past = (int32_t)(r.capacity - c.s_new + 1);
    upload(*d.seqlens, std::vector<int32_t>{14, past, 0});
    reset(*d.out);
    g.replay(stream.s);
    CHECK(fa_device_error(ctx.ctx, 1) == FA_ERR_DEVICE_CHECK);
    CHECK(contains(fa_last_error(ctx.ctx), "cache_seqlens[1] + the new keys = " + std::to_string(r.capacity + 1) +
                                               " > the cache's capacity " + std::to_string(r.capacity)));
    CHECK(same_bytes(download(*d.k_cache), k_after));
    CHECK(same_bytes(download(*d.v_cache), v_after));
    d.out->copy_back();
    bool entry1_poisoned = true;
    for (int64_t t = 0; t < c.s_q; ++t)
        for (int h = 0; h < c.heads; ++h)
            for (int e = 0; e < c.dim; ++e) {
                const int64_t at[4] = {1, t, h, e};
                entry1_poisoned = entry1_poisoned && std::isnan(fa_oracle::element(r.out.view, at));
            }
    CHECK(entry1_poisoned);
    const int64_t first[4] = {0, 0, 0, 0};
    CHECK(!std::isnan(fa_oracle::element(r.out.view, first))); // entry 0 is written
}
