// test_cuda_device_check.cpp - device-resident indices on CUDA: bad cu_seqlens and
// seqused_k are found on the device, the offending sequences write nothing (outputs
// poisoned first stay poisoned), the other sequences of the call still match the fp64
// oracle, and the context reports FA_ERR_DEVICE_CHECK on its next call and from
// fa_device_error with a message naming the check and the values, then clears it; the
// check kernel's paged and kvcache checks by a direct launch; CUDA-graph capture and
// replay of varlen forward and backward and seqused_k calls, with the workspace passed in
// and with new array contents between replays, equal to eager calls. Skipped (exit code
// 4) without a CUDA device.
#include <catch2/catch.hpp>
#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "device_tensors.hpp"
#include "gpu_case.hpp"
#include "graph_capture.hpp"
#include "gpu_kernels/seq_check_args.h"
#include "gpu_host/device_check.h"
#include "oracle.hpp"

using fa_oracle::Precision;

extern "C" const void *const fa_cuda_seq_check_handle, *const fa_cuda_seq_check_pages_handle;

namespace {

// Global query rows [g0, g1) of a forward output against the reference: the largest
// error, NaN counting as infinite. Fixed-length outputs ([b, s, h, d], s_q rows per
// sequence) or varlen ([total, h, d], s_q 0).
double rows_error(const fa_tensor &out, const fa_oracle::Reference &ref, int64_t g0, int64_t g1, int64_t s_q)
{
    double worst = 0.0;
    for (int64_t g = g0; g < g1; ++g)
        for (int h = 0; h < ref.heads; ++h)
            for (int c = 0; c < ref.dim; ++c) {
                const int64_t fixed[4] = {s_q ? g / s_q : 0, s_q ? g % s_q : 0, h, c};
                const int64_t varlen[3] = {g, h, c};
                const double x = fa_oracle::element(out, s_q ? fixed : varlen);
                const double e = std::fabs(x - ref.out[(g * ref.heads + h) * ref.dim + c]);
                worst = std::isnan(e) ? INFINITY : std::max(worst, e);
            }
    return worst;
}

// Every element of rows [g0, g1) (heads x dim columns; fixed-length as above) still NaN.
bool rows_poisoned(const HostTensor &t, int64_t g0, int64_t g1, int heads, int dim, int64_t s_q)
{
    for (int64_t g = g0; g < g1; ++g)
        for (int h = 0; h < heads; ++h)
            for (int c = 0; c < dim; ++c) {
                const int64_t fixed[4] = {s_q ? g / s_q : 0, s_q ? g % s_q : 0, h, c};
                const int64_t varlen[3] = {g, h, c};
                if (!std::isnan(fa_oracle::element(t.view, s_q ? fixed : varlen)))
                    return false;
            }
    return true;
}

// The LSE of rows [g0, g1) still NaN ([h, total_q] varlen, [b, h, s_q] fixed).
bool lse_poisoned(const HostTensor &lse, int64_t g0, int64_t g1, int heads, int64_t s_q)
{
    for (int64_t g = g0; g < g1; ++g)
        for (int h = 0; h < heads; ++h) {
            const int64_t fixed[3] = {s_q ? g / s_q : 0, h, s_q ? g % s_q : 0};
            const int64_t varlen[2] = {h, g};
            if (!std::isnan(fa_oracle::element(lse.view, s_q ? fixed : varlen)))
                return false;
        }
    return true;
}

fa_status forward(const Context &ctx, GpuProblem &p, const fa_params &params, void *ws = nullptr, size_t bytes = 0)
{
    return fa_fwd(ctx.ctx, &p.dq->view, &p.dk->view, &p.dv->view, &params, &p.dout->view, &p.dlse->view, ws,
                  bytes);
}

Case varlen_case()
{
    Case c;
    c.head_dim = 64;
    c.heads = 4;
    c.heads_k = 2;
    c.cu_q = {0, 40, 140, 203};
    c.cu_k = {0, 64, 300, 381};
    return c;
}

}  // namespace

TEST_CASE("device check: bad cu_seqlens write nothing and are reported once", "[cuda][device_check][sanitize]")
{
    GpuProblem p(varlen_case(), 4000);
    Context ctx;
    const int64_t total_q = p.spec.cu_q.back();
    SECTION("decreasing cu_seqlens_k: on the next call, which does nothing")
    {
        upload(*p.dcu_k, std::vector<int32_t>{0, 64, 50, 381});
        REQUIRE(forward(ctx, p, p.dev_params) == FA_OK); // no host sync: the call cannot know yet
        REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
        upload(*p.dcu_k, p.spec.cu_k);
        const fa_status st = forward(ctx, p, p.dev_params);
        const std::string msg = fa_last_error(ctx.ctx);
        INFO(msg);
        CHECK(st == FA_ERR_DEVICE_CHECK);
        CHECK(msg == "device check of an earlier fa_fwd: cu_seqlens_k decreases: [2] = 50 < [1] = 64; no "
                     "sequence of that call wrote anything");
        REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
        p.dout->copy_back();
        p.dlse->copy_back();
        CHECK(rows_poisoned(p.out, 0, total_q, 4, 64, 0)); // neither call wrote
        CHECK(lse_poisoned(p.lse, 0, total_q, 4, 0));
        CHECK(fa_device_error(ctx.ctx, 1) == FA_OK); // read once: cleared
        REQUIRE(forward(ctx, p, p.dev_params) == FA_OK);
        REQUIRE(fa_device_error(ctx.ctx, 1) == FA_OK);
        p.dout->copy_back();
        CHECK(fa_oracle::all_elements_written(p.out));
    }
    SECTION("cu_seqlens_q not ending at the rows, and not starting at 0: from fa_device_error(ctx, 1)")
    {
        upload(*p.dcu_q, std::vector<int32_t>{0, 40, 140, 202});
        REQUIRE(forward(ctx, p, p.dev_params) == FA_OK);
        CHECK(fa_device_error(ctx.ctx, 1) == FA_ERR_DEVICE_CHECK);
        CHECK(std::string(fa_last_error(ctx.ctx)) ==
              "device check of an earlier fa_fwd: cu_seqlens_q[3] = 202 != the tensor's total rows 203; no "
              "sequence of that call wrote anything");
        CHECK(fa_device_error(ctx.ctx, 1) == FA_OK);
        upload(*p.dcu_q, std::vector<int32_t>{1, 40, 140, 203});
        REQUIRE(forward(ctx, p, p.dev_params) == FA_OK);
        CHECK(fa_device_error(ctx.ctx, 1) == FA_ERR_DEVICE_CHECK);
        CHECK(contains(fa_last_error(ctx.ctx), "cu_seqlens_q[0] = 1, must be 0"));
        p.dout->copy_back();
        CHECK(rows_poisoned(p.out, 0, total_q, 4, 64, 0));
    }
    SECTION("a query on a context with a record fails too, and clears it")
    {
        upload(*p.dcu_k, std::vector<int32_t>{0, 64, 300, 390});
        REQUIRE(forward(ctx, p, p.dev_params) == FA_OK);
        REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
        size_t bytes = 0;
        CHECK(fa_fwd_workspace_size(ctx.ctx, &p.dq->view, &p.dk->view, &p.dv->view, &p.dev_params, &bytes) ==
              FA_ERR_DEVICE_CHECK);
        CHECK(contains(fa_last_error(ctx.ctx), "cu_seqlens_k[3] = 390 != the tensor's total rows 381"));
        CHECK(fa_fwd_workspace_size(ctx.ctx, &p.dq->view, &p.dk->view, &p.dv->view, &p.dev_params, &bytes) ==
              FA_OK);
        CHECK(bytes > 0);
    }
}

namespace {

// Three fixed-length sequences of c's shape, the last two with seqused_k out of range
// (`used` on the device): the call reports one of them, writes nothing for either, and
// sequence 0 (used[0] keys) matches the fp64 reference.
void check_seqused_out_of_range(Case c, int seed, const std::vector<int32_t> &used)
{
    c.batch = 3;
    c.seqused_k = std::vector<int32_t>(3, c.seqlen_k);
    GpuProblem p(c, seed);
    Context ctx;
    upload(*p.dused, used);
    REQUIRE(forward(ctx, p, p.dev_params) == FA_OK);
    CHECK(fa_device_error(ctx.ctx, 1) == FA_ERR_DEVICE_CHECK);
    const std::string msg = fa_last_error(ctx.ctx);
    INFO(msg);
    const std::string range = " is outside 0.." + std::to_string(c.seqlen_k);
    CHECK((contains(msg, "seqused_k[1] = " + std::to_string(used[1]) + range) ||
           contains(msg, "seqused_k[2] = " + std::to_string(used[2]) + range)));
    p.dout->copy_back();
    p.dlse->copy_back();
    const int64_t s_q = c.seqlen_q;
    CHECK(rows_poisoned(p.out, s_q, 3 * s_q, c.heads, c.head_dim, s_q));
    CHECK(lse_poisoned(p.lse, s_q, 3 * s_q, c.heads, s_q));
    fa_params ref_params = p.host_params;
    std::vector<int32_t> ref_used = {used[0], c.seqlen_k, c.seqlen_k};
    ref_params.seqused_k = ref_used.data();
    const fa_oracle::Reference exact =
        fa_oracle::reference_attention(p.q.view, p.k.view, p.v.view, ref_params, Precision::Exact);
    const fa_oracle::Reference naive =
        fa_oracle::reference_attention(p.q.view, p.k.view, p.v.view, ref_params, Precision::Naive);
    CHECK(rows_error(p.out.view, exact, 0, s_q, s_q) <= 2.0 * fa_oracle::max_out_difference(naive, exact) + 1e-5);
}

} // namespace

TEST_CASE("device check: only the offending sequence is left unwritten", "[cuda][device_check][sanitize]")
{
    SECTION("varlen: sequence 1 has more keys than max_seqlen_k")
    {
        GpuProblem p(varlen_case(), 4100);
        Context ctx;
        fa_params bad = p.dev_params;
        bad.max_seqlen_k = 200; // sequence 1 has 236 keys
        REQUIRE(forward(ctx, p, bad) == FA_OK);
        CHECK(fa_device_error(ctx.ctx, 1) == FA_ERR_DEVICE_CHECK);
        CHECK(std::string(fa_last_error(ctx.ctx)) ==
              "device check of an earlier fa_fwd: cu_seqlens_k: sequence 1 has 236 key rows > max_seqlen_k 200; "
              "sequence 1 of that call wrote nothing");
        p.dout->copy_back();
        p.dlse->copy_back();
        CHECK(rows_poisoned(p.out, 40, 140, 4, 64, 0));
        CHECK(lse_poisoned(p.lse, 40, 140, 4, 0));
        const fa_oracle::Reference exact =
            fa_oracle::reference_attention(p.q.view, p.k.view, p.v.view, p.host_params, Precision::Exact);
        const fa_oracle::Reference naive =
            fa_oracle::reference_attention(p.q.view, p.k.view, p.v.view, p.host_params, Precision::Naive);
        const double bound = 2.0 * fa_oracle::max_out_difference(naive, exact) + 1e-5;
        CHECK(rows_error(p.out.view, exact, 0, 40, 0) <= bound);
        CHECK(rows_error(p.out.view, exact, 140, 203, 0) <= bound);
    }
    SECTION("fixed length: seqused_k of sequences 1 and 2 out of range, split-KV forced")
    {
        Case c;
        c.seqlen_q = 70;
        c.seqlen_k = 150;
        c.heads = 4;
        c.heads_k = 1;
        c.head_dim = 128;
        c.num_splits = 3;
        check_seqused_out_of_range(c, 4200, {99, 151, -1});
    }
    SECTION("fixed length decode (one query row, GQA 8/2): seqused_k read beside the check, splits 1 and 3")
    {
        for (int splits : {1, 3}) {
            Case c;
            c.seqlen_q = 1;
            c.seqlen_k = 300;
            c.heads = 8;
            c.heads_k = 2;
            c.head_dim = 128;
            c.num_splits = splits;
            check_seqused_out_of_range(c, 4300 + splits, {211, 1 << 30, -3});
        }
    }
}

TEST_CASE("device check: the backward leaves dq, dk and dv of a bad sequence unwritten",
          "[cuda][device_check][backward][sanitize]")
{
    for (int deterministic : {0, 1}) {
        GpuProblem p(varlen_case(), 4300 + deterministic);
        Context ctx;
        REQUIRE(forward(ctx, p, p.dev_params) == FA_OK);
        HostTensor grad_out = make_like(p.out), dq = make_like(p.q), dk = make_like(p.k), dv = make_like(p.v);
        fa_oracle::fill_normal(grad_out, 4310);
        DeviceTensor d_grad_out(grad_out), ddq(dq), ddk(dk), ddv(dv);
        fa_params bad = p.dev_params;
        bad.max_seqlen_q = 99; // sequence 1 has 100 query rows
        bad.deterministic = deterministic;
        REQUIRE(fa_bwd(ctx.ctx, &p.dq->view, &p.dk->view, &p.dv->view, &p.dout->view, &p.dlse->view,
                       &d_grad_out.view, &bad, &ddq.view, &ddk.view, &ddv.view, nullptr, 0) == FA_OK);
        CHECK(fa_device_error(ctx.ctx, 1) == FA_ERR_DEVICE_CHECK);
        CHECK(std::string(fa_last_error(ctx.ctx)) ==
              "device check of an earlier fa_bwd: cu_seqlens_q: sequence 1 has 100 query rows > max_seqlen_q 99; "
              "sequence 1 of that call wrote nothing");
        ddq.copy_back();
        ddk.copy_back();
        ddv.copy_back();
        CHECK(rows_poisoned(dq, 40, 140, 4, 64, 0));
        CHECK(rows_poisoned(dk, 64, 300, 2, 64, 0));
        CHECK(rows_poisoned(dv, 64, 300, 2, 64, 0));
        const fa_oracle::GradReference exact = fa_oracle::reference_backward(
            p.q.view, p.k.view, p.v.view, grad_out.view, p.host_params, Precision::Exact);
        const fa_oracle::GradReference naive = fa_oracle::reference_backward(
            p.q.view, p.k.view, p.v.view, grad_out.view, p.host_params, Precision::Naive);
        const fa_oracle::GradErrors base = fa_oracle::grad_difference(naive, exact);
        fa_oracle::Reference as_q, as_k; // the gradients in the forward reference's layout
        as_q.heads = 4;
        as_q.dim = 64;
        as_q.out = exact.dq;
        as_k.heads = 2;
        as_k.dim = 64;
        for (int64_t g : {0, 2}) {
            const int64_t q0 = p.spec.cu_q[g], q1 = p.spec.cu_q[g + 1], k0 = p.spec.cu_k[g], k1 = p.spec.cu_k[g + 1];
            INFO("sequence " << g << " deterministic " << deterministic);
            CHECK(rows_error(dq.view, as_q, q0, q1, 0) <= 3 * base.dq + 1e-5);
            as_k.out = exact.dk;
            CHECK(rows_error(dk.view, as_k, k0, k1, 0) <= 3 * base.dk + 1e-5);
            as_k.out = exact.dv;
            CHECK(rows_error(dv.view, as_k, k0, k1, 0) <= 3 * base.dv + 1e-5);
        }
    }
}

// ---- the check kernel's paged and kvcache checks, launched directly ------------------

namespace {

// A mapped record and a seq_ok array, and the two check kernels over given arguments.
struct CheckRun {
    fa_device_status *record = nullptr, *record_device = nullptr;
    std::unique_ptr<DeviceBuffer> ok;
    CheckRun()
    {
        REQUIRE(cudaHostAlloc(reinterpret_cast<void **>(&record), sizeof *record, cudaHostAllocMapped) ==
                cudaSuccess);
        std::memset(record, 0, sizeof *record);
        REQUIRE(cudaHostGetDevicePointer(reinterpret_cast<void **>(&record_device), record, 0) == cudaSuccess);
    }
    ~CheckRun() { cudaFreeHost(record); }
    // seq_ok after the kernels the host launches for these arguments (fa_seq_check unless
    // the call is fixed-length and paged, then the pages kernel), poisoned first.
    std::vector<int> run(fa_seq_check_args a)
    {
        ok.reset(new DeviceBuffer(static_cast<size_t>(a.batch) * sizeof(int)));
        REQUIRE(cudaMemset(ok->ptr, 0xF9, static_cast<size_t>(a.batch) * sizeof(int)) == cudaSuccess);
        a.seq_ok = static_cast<int *>(ok->ptr);
        a.status = record_device;
        void *args[] = {&a};
        if (fa_check_needs_whole_pass(&a))
            REQUIRE(cudaLaunchKernel(fa_cuda_seq_check_handle, dim3(1), dim3(FA_CHECK_THREADS), args, 0, nullptr) ==
                    cudaSuccess);
        if (a.block_table)
            REQUIRE(cudaLaunchKernel(fa_cuda_seq_check_pages_handle, dim3(a.batch), dim3(FA_CHECK_PAGE_THREADS),
                                     args, 0, nullptr) == cudaSuccess);
        REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
        std::vector<int> out(static_cast<size_t>(a.batch));
        REQUIRE(cudaMemcpy(out.data(), ok->ptr, out.size() * sizeof(int), cudaMemcpyDeviceToHost) == cudaSuccess);
        return out;
    }
    // The recorded violation (check 0 when none), clearing the record.
    fa_device_status take()
    {
        fa_device_status st;
        std::memset(&st, 0, sizeof st);
        fa_take_device_check(record, &st);
        return st;
    }
};

fa_seq_check_args paged_args(const DeviceArray<int32_t> &table, const DeviceArray<int32_t> &used)
{
    fa_seq_check_args a;
    std::memset(&a, 0, sizeof a);
    a.batch = 4;
    a.call = FA_CHECK_CALL_FWD;
    a.seqlen_k = 100;
    a.seqused_k = used.get();
    a.block_table = table.get();
    a.block_table_stride = 5; // rows padded past the width
    a.block_table_width = 4;
    a.page_size = 16;
    a.num_pages = 10;
    return a;
}

}  // namespace

TEST_CASE("device check kernel: block tables and pages", "[cuda][device_check][sanitize]")
{
    CheckRun run;
    const std::vector<int32_t> used = {40, 64, 17, 0};
    // Row 0: 3 pages used, the 4th entry unread; row 3 has no keys: nothing read.
    std::vector<int32_t> table = {3, 1, 2, -5, 77, /**/ 0, 1, 2, 9, 77, /**/ 9, 4, 77, 77, 77, /**/ -1, -1, -1, -1, 77};
    DeviceArray<int32_t> dused(used), dtable(table);
    SECTION("every covering entry a page: all fine, nothing recorded")
    {
        CHECK(run.run(paged_args(dtable, dused)) == std::vector<int>{1, 1, 1, 1});
        CHECK(run.take().check == FA_CHECK_NONE);
    }
    SECTION("a page id past the pool")
    {
        table[5 + 3] = 10;
        upload(dtable, table);
        CHECK(run.run(paged_args(dtable, dused)) == std::vector<int>{1, 0, 1, 1});
        const fa_device_status st = run.take();
        CHECK((st.check == FA_CHECK_PAGE_ID && st.call == FA_CHECK_CALL_FWD && st.batch == 1 && st.index == 3 &&
               st.value == 10 && st.limit == 10));
    }
    SECTION("a negative page id")
    {
        table[10 + 1] = -1;
        upload(dtable, table);
        CHECK(run.run(paged_args(dtable, dused)) == std::vector<int>{1, 1, 0, 1});
        const fa_device_status st = run.take();
        CHECK((st.check == FA_CHECK_PAGE_ID && st.batch == 2 && st.index == 1 && st.value == -1));
    }
    SECTION("more keys than the row's pages hold")
    {
        DeviceArray<int32_t> over(std::vector<int32_t>{40, 65, 17, 0});
        CHECK(run.run(paged_args(dtable, over)) == std::vector<int>{1, 0, 1, 1});
        const fa_device_status st = run.take();
        CHECK((st.check == FA_CHECK_PAGED_KEYS && st.batch == 1 && st.value == 65 && st.limit == 64));
    }
    SECTION("the first violation stays until read; the later ones still mark their sequences")
    {
        table[5 + 3] = 10;
        table[10 + 1] = -1;
        upload(dtable, table);
        CHECK(run.run(paged_args(dtable, dused)) == std::vector<int>{1, 0, 0, 1});
        CHECK(run.record->check == FA_CHECK_PAGE_ID);
        table[0] = 12;
        upload(dtable, table);
        CHECK(run.run(paged_args(dtable, dused)) == std::vector<int>{0, 0, 0, 1});
        const fa_device_status st = run.take();
        CHECK(st.batch != 0); // recorded before sequence 0 went bad
        CHECK(run.run(paged_args(dtable, dused)) == std::vector<int>{0, 0, 0, 1});
        CHECK(run.take().check == FA_CHECK_PAGE_ID);
    }
}

TEST_CASE("device check kernel: cache_seqlens and cache_batch_idx", "[cuda][device_check][sanitize]")
{
    CheckRun run;
    struct Bad {
        std::vector<int32_t> cached, rows;
        int batch, check;
        long long value, limit;
    };
    const Bad cases[] = {
        {{10, 60, 0, 5}, {0, 1, 2, 3}, -1, FA_CHECK_NONE, 0, 0},   // 60 + 4 fills the capacity exactly
        {{10, -1, 0, 5}, {0, 1, 2, 3}, 1, FA_CHECK_CACHE_SEQLENS, -1, 0},
        {{10, 61, 0, 5}, {0, 1, 2, 3}, 1, FA_CHECK_CACHE_CAPACITY, 65, 64},
        {{10, 60, 0, 5}, {0, 1, 2, 7}, 3, FA_CHECK_CACHE_BATCH_IDX, 7, 7},
        {{10, 60, 0, 5}, {0, -1, 2, 3}, 1, FA_CHECK_CACHE_BATCH_IDX, -1, 7},
    };
    for (const Bad &c : cases) {
        DeviceArray<int32_t> cached(c.cached), rows(c.rows);
        fa_seq_check_args a;
        std::memset(&a, 0, sizeof a);
        a.batch = 4;
        a.call = FA_CHECK_CALL_FWD_KVCACHE;
        a.seqlen_k = 64;
        a.cache_seqlens = cached.get();
        a.s_new = 4;
        a.capacity = 64;
        a.cache_batch_idx = rows.get();
        a.cache_batch = 7;
        std::vector<int> expect = {1, 1, 1, 1};
        if (c.batch >= 0)
            expect[static_cast<size_t>(c.batch)] = 0;
        INFO("case with check " << c.check);
        CHECK(run.run(a) == expect);
        const fa_device_status st = run.take();
        CHECK(st.check == c.check);
        if (c.check != FA_CHECK_NONE) {
            CHECK((st.call == FA_CHECK_CALL_FWD_KVCACHE && st.batch == c.batch && st.value == c.value));
            CHECK(st.limit == c.limit);
        }
    }
    SECTION("paged appending: the pages of the new keys are checked too")
    {
        DeviceArray<int32_t> cached(std::vector<int32_t>{10, 29, 0, 5});
        DeviceArray<int32_t> table(std::vector<int32_t>{0, 9, 9, 9, 1, 2, 9, 9, 3, 9, 9, 9, 4, 9, 9, 9});
        fa_seq_check_args a;
        std::memset(&a, 0, sizeof a);
        a.batch = 4;
        a.call = FA_CHECK_CALL_FWD_KVCACHE;
        a.cache_seqlens = cached.get();
        a.s_new = 4; // sequence 1: 33 keys, 3 pages of 16, the third entry 9 >= num_pages 9
        a.capacity = 64;
        a.block_table = table.get();
        a.block_table_stride = 4;
        a.block_table_width = 4;
        a.page_size = 16;
        a.num_pages = 9;
        CHECK(run.run(a) == std::vector<int>{1, 0, 1, 1});
        const fa_device_status st = run.take();
        CHECK((st.check == FA_CHECK_PAGE_ID && st.batch == 1 && st.index == 2 && st.value == 9));
    }
}

TEST_CASE("device check kernel: cu_seqlens as arrays and per sequence", "[cuda][device_check]")
{
    CheckRun run;
    struct Cu {
        std::vector<int32_t> q, k;
        int check;
        std::vector<int> ok;
    };
    const Cu cases[] = {
        {{0, 3, 3, 9}, {0, 5, 12, 12}, FA_CHECK_NONE, {1, 1, 1}},
        {{0, 3, 2, 9}, {0, 5, 12, 12}, FA_CHECK_CU_Q_ORDER, {0, 0, 0}},
        {{0, 3, 3, 9}, {2, 5, 12, 12}, FA_CHECK_CU_K_START, {0, 0, 0}},
        {{0, 3, 3, 8}, {0, 5, 12, 12}, FA_CHECK_CU_Q_END, {0, 0, 0}},
        {{0, 3, 3, 9}, {0, 5, 12, 13}, FA_CHECK_CU_K_END, {0, 0, 0}},
        {{0, 7, 7, 9}, {0, 5, 12, 12}, FA_CHECK_SEQLEN_Q, {0, 1, 1}},  // 7 rows > 6
        {{0, 3, 3, 9}, {0, 5, 12, 12}, FA_CHECK_NONE, {1, 1, 1}},
        {{0, 1, 3, 9}, {0, 1, 9, 12}, FA_CHECK_SEQLEN_K, {1, 0, 1}},   // 8 keys > 7
    };
    for (const Cu &c : cases) {
        DeviceArray<int32_t> q(c.q), k(c.k);
        fa_seq_check_args a;
        std::memset(&a, 0, sizeof a);
        a.batch = 3;
        a.call = FA_CHECK_CALL_FWD;
        a.cu_seqlens_q = q.get();
        a.cu_seqlens_k = k.get();
        a.rows_q = 9;
        a.rows_k = 12;
        a.max_seqlen_q = 6;
        a.max_seqlen_k = 7;
        INFO("case with check " << c.check);
        CHECK(run.run(a) == c.ok);
        CHECK(run.take().check == c.check);
    }
}

// ---- CUDA graphs ------------------------------------------------------------------------


TEST_CASE("cuda graph: varlen forward captured on a fresh context, replayed with new cu_seqlens",
          "[cuda][graph]")
{
    GpuProblem p(varlen_case(), 4500);
    Context ctx; // fresh: its kernels are prepared (cudaFuncSetAttribute) inside the capture
    Stream stream;
    REQUIRE(fa_set_stream(ctx.ctx, stream.s) == FA_OK);
    size_t bytes = 0;
    REQUIRE(fa_fwd_workspace_size(ctx.ctx, &p.dq->view, &p.dk->view, &p.dv->view, &p.dev_params, &bytes) == FA_OK);
    REQUIRE(bytes > 0); // seq_ok at least
    DeviceBuffer ws(bytes);
    Graph g;
    capture(ctx.ctx, stream.s, g, [&] { return forward(ctx, p, p.dev_params, ws.ptr, bytes); });

    g.replay(stream.s);
    const std::vector<unsigned char> replayed = download(*p.dout), replayed_lse = download(*p.dlse);
    reset(*p.dout);
    reset(*p.dlse);
    REQUIRE(forward(ctx, p, p.dev_params, ws.ptr, bytes) == FA_OK);
    REQUIRE(cudaStreamSynchronize(stream.s) == cudaSuccess);
    CHECK(same_bytes(download(*p.dout), replayed));
    CHECK(same_bytes(download(*p.dlse), replayed_lse));
    p.dout->copy_back();
    CHECK(fa_oracle::all_elements_written(p.out));

    // New lengths, same totals and bounds: the replay reads them, as an eager call does.
    const std::vector<int32_t> cu_q = {0, 100, 103, 203}, cu_k = {0, 236, 300, 381};
    upload(*p.dcu_q, cu_q);
    upload(*p.dcu_k, cu_k);
    reset(*p.dout);
    g.replay(stream.s);
    const std::vector<unsigned char> moved = download(*p.dout);
    CHECK(!same_bytes(moved, replayed));
    REQUIRE(forward(ctx, p, p.dev_params, ws.ptr, bytes) == FA_OK);
    REQUIRE(cudaStreamSynchronize(stream.s) == cudaSuccess);
    CHECK(same_bytes(download(*p.dout), moved));
    CHECK(fa_device_error(ctx.ctx, 1) == FA_OK);

    // Bad contents: the replay writes nothing and the record says why.
    upload(*p.dcu_k, std::vector<int32_t>{0, 236, 300, 382});
    reset(*p.dout);
    g.replay(stream.s);
    CHECK(fa_device_error(ctx.ctx, 1) == FA_ERR_DEVICE_CHECK);
    CHECK(contains(fa_last_error(ctx.ctx), "cu_seqlens_k[3] = 382 != the tensor's total rows 381"));
    p.dout->copy_back();
    CHECK(rows_poisoned(p.out, 0, 203, 4, 64, 0));
}

TEST_CASE("cuda graph: varlen backward captured and replayed with new cu_seqlens", "[cuda][graph][backward]")
{
    for (int deterministic : {1, 0}) {
        GpuProblem p(varlen_case(), 4600 + deterministic);
        Context ctx;
        Stream stream;
        REQUIRE(fa_set_stream(ctx.ctx, stream.s) == FA_OK);
        REQUIRE(forward(ctx, p, p.dev_params) == FA_OK);
        HostTensor grad_out = make_like(p.out), dq = make_like(p.q), dk = make_like(p.k), dv = make_like(p.v);
        fa_oracle::fill_normal(grad_out, 4610);
        DeviceTensor d_grad_out(grad_out), ddq(dq), ddk(dk), ddv(dv);
        fa_params params = p.dev_params;
        params.deterministic = deterministic;
        size_t bytes = 0;
        REQUIRE(fa_bwd_workspace_size(ctx.ctx, &p.dq->view, &p.dk->view, &p.dv->view, &params, &bytes) == FA_OK);
        DeviceBuffer ws(bytes);
        auto backward = [&] {
            return fa_bwd(ctx.ctx, &p.dq->view, &p.dk->view, &p.dv->view, &p.dout->view, &p.dlse->view,
                          &d_grad_out.view, &params, &ddq.view, &ddk.view, &ddv.view, ws.ptr, bytes);
        };
        Graph g;
        capture(ctx.ctx, stream.s, g, backward);
        for (int round = 0; round < 2; ++round) {
            if (round == 1) { // new lengths, same totals and bounds; out/lse of the new batch
                upload(*p.dcu_q, std::vector<int32_t>{0, 100, 103, 203});
                upload(*p.dcu_k, std::vector<int32_t>{0, 236, 300, 381});
                REQUIRE(forward(ctx, p, p.dev_params) == FA_OK);
            }
            reset(ddq);
            reset(ddk);
            reset(ddv);
            g.replay(stream.s);
            const std::vector<unsigned char> gq = download(ddq), gk = download(ddk), gv = download(ddv);
            reset(ddq);
            reset(ddk);
            reset(ddv);
            REQUIRE(backward() == FA_OK);
            REQUIRE(cudaStreamSynchronize(stream.s) == cudaSuccess);
            INFO("round " << round << " deterministic " << deterministic);
            if (deterministic) {
                CHECK(same_bytes(download(ddq), gq));
                CHECK(same_bytes(download(ddk), gk));
                CHECK(same_bytes(download(ddv), gv));
            }
            // Both against the oracle for the lengths of the round.
            fa_params host = p.host_params;
            std::vector<int32_t> hq = round ? std::vector<int32_t>{0, 100, 103, 203} : p.spec.cu_q;
            std::vector<int32_t> hk = round ? std::vector<int32_t>{0, 236, 300, 381} : p.spec.cu_k;
            host.cu_seqlens_q = hq.data();
            host.cu_seqlens_k = hk.data();
            host.max_seqlen_q = 100;
            host.max_seqlen_k = 236;
            const fa_oracle::GradReference exact = fa_oracle::reference_backward(
                p.q.view, p.k.view, p.v.view, grad_out.view, host, Precision::Exact);
            const fa_oracle::GradReference naive = fa_oracle::reference_backward(
                p.q.view, p.k.view, p.v.view, grad_out.view, host, Precision::Naive);
            const fa_oracle::GradErrors base = fa_oracle::grad_difference(naive, exact);
            std::memcpy(dq.storage.data(), gq.data(), gq.size());
            std::memcpy(dk.storage.data(), gk.data(), gk.size());
            std::memcpy(dv.storage.data(), gv.data(), gv.size());
            const fa_oracle::GradErrors err = fa_oracle::grad_errors(dq.view, dk.view, dv.view, exact);
            INFO("replayed dq " << err.dq << " dk " << err.dk << " dv " << err.dv);
            CHECK(err.dq <= 3 * base.dq + 1e-5);
            CHECK(err.dk <= 3 * base.dk + 1e-5);
            CHECK(err.dv <= 3 * base.dv + 1e-5);
        }
        CHECK(fa_device_error(ctx.ctx, 1) == FA_OK);
    }
}

TEST_CASE("cuda graph: seqused_k forward replayed with new seqused_k", "[cuda][graph]")
{
    Case c;
    c.batch = 3;
    c.seqlen_q = 33;
    c.seqlen_k = 300;
    c.heads = 8;
    c.heads_k = 2;
    c.head_dim = 128;
    c.causal = true;
    c.seqused_k = {300, 17, 0};
    GpuProblem p(c, 4700);
    Context ctx;
    Stream stream;
    REQUIRE(fa_set_stream(ctx.ctx, stream.s) == FA_OK);
    size_t bytes = 0;
    REQUIRE(fa_fwd_workspace_size(ctx.ctx, &p.dq->view, &p.dk->view, &p.dv->view, &p.dev_params, &bytes) == FA_OK);
    DeviceBuffer ws(bytes);
    Graph g;
    capture(ctx.ctx, stream.s, g, [&] { return forward(ctx, p, p.dev_params, ws.ptr, bytes); });
    for (const std::vector<int32_t> &used : {std::vector<int32_t>{300, 17, 0}, std::vector<int32_t>{5, 299, 150}}) {
        upload(*p.dused, used);
        reset(*p.dout);
        g.replay(stream.s);
        const std::vector<unsigned char> replayed = download(*p.dout);
        REQUIRE(forward(ctx, p, p.dev_params, ws.ptr, bytes) == FA_OK);
        REQUIRE(cudaStreamSynchronize(stream.s) == cudaSuccess);
        CHECK(same_bytes(download(*p.dout), replayed));
        p.dout->copy_back();
        fa_params host = p.host_params;
        host.seqused_k = used.data();
        const fa_oracle::Reference exact =
            fa_oracle::reference_attention(p.q.view, p.k.view, p.v.view, host, Precision::Exact);
        const fa_oracle::Reference naive =
            fa_oracle::reference_attention(p.q.view, p.k.view, p.v.view, host, Precision::Naive);
        CHECK(fa_oracle::max_out_error(p.out.view, exact) <= 2.0 * fa_oracle::max_out_difference(naive, exact) + 1e-5);
    }
    CHECK(fa_device_error(ctx.ctx, 1) == FA_OK);
}

TEST_CASE("cuda graph: a call that allocates its workspace is captured too (allocation nodes)",
          "[cuda][graph]")
{
    Case c = varlen_case();
    c.num_splits = 2; // partials and seq_ok in the call's own workspace
    GpuProblem p(c, 4800);
    Context ctx;
    Stream stream;
    REQUIRE(fa_set_stream(ctx.ctx, stream.s) == FA_OK);
    Graph g;
    capture(ctx.ctx, stream.s, g, [&] { return forward(ctx, p, p.dev_params); });
    g.replay(stream.s);
    const std::vector<unsigned char> replayed = download(*p.dout);
    reset(*p.dout);
    REQUIRE(forward(ctx, p, p.dev_params) == FA_OK);
    REQUIRE(cudaStreamSynchronize(stream.s) == cudaSuccess);
    CHECK(same_bytes(download(*p.dout), replayed));
}
