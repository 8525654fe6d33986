// test_ring_nccl.cpp - ring attention over NCCL on the CUDA backend: one process drives
// every visible GPU (FA_RING_TEST_GPUS caps how many) with one thread, one context, one
// stream and one NCCL communicator per GPU (ncclCommInitAll), so the ring needs no MPI.
// Each rank's out, lse, dq, dk, dv are checked against the library's own fa_fwd / fa_bwd
// over the whole sequence on GPU 0 and against the fp64 reference, with the CPU tests'
// fp16/bf16 rule (forward 2x, backward 3x the error of a naive computation in the same
// precision, plus 1e-5). With one GPU the ring has one rank: the schedule, the transport's
// device buffers, kernel, events and agreement run, but no message moves. Exits 4 (ctest:
// skipped) without a GPU.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "flashattn.h"
#include "flashattn_ring.h"
#include "oracle.hpp"

using namespace fa_oracle;

namespace {

int gpu_count()
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess)
        return 0;
    const char *cap = std::getenv("FA_RING_TEST_GPUS");
    return cap != nullptr ? std::min(n, std::atoi(cap)) : n;
}

struct Problem {
    int64_t total = 1001;
    fa_ring_split split = FA_RING_SPLIT_ZIGZAG;
    int batch = 2, heads = 8, heads_k = 2, dim = 64;
    fa_dtype dtype = FA_DTYPE_BF16;
    int causal = 1;
};

fa_params params_of(const Problem &p)
{
    fa_params params;
    fa_params_init(&params);
    params.causal = p.causal;
    return params;
}

std::vector<int64_t> rows_of(const Problem &p, int rank, int world)
{
    fa_ring_layout layout{p.total, p.split};
    fa_ring_span span[2];
    int64_t rows = 0;
    std::vector<int64_t> g;
    if (fa_ring_rows(&layout, world, rank, span, &rows) != FA_OK)
        return g;
    for (const fa_ring_span &s : span)
        for (int64_t i = 0; i < s.length; i++)
            g.push_back(s.begin + i);
    return g;
}

HostTensor take_rows(const HostTensor &whole, const std::vector<int64_t> &rows)
{
    const fa_tensor &w = whole.view;
    HostTensor t = make_tensor(w.dtype, {w.shape[0], (int64_t)rows.size(), w.shape[2], w.shape[3]});
    size_t es = dtype_size(w.dtype), row_bytes = (size_t)(w.shape[2] * w.shape[3]) * es;
    for (int64_t b = 0; b < w.shape[0]; b++)
        for (size_t i = 0; i < rows.size(); i++)
            std::memcpy(t.storage.data() + (size_t)(b * t.view.stride[0] + (int64_t)i * t.view.stride[1]) * es,
                        whole.storage.data() + (size_t)(b * w.stride[0] + rows[i] * w.stride[1]) * es, row_bytes);
    return t;
}

// A host tensor's twin in device memory (same shape and strides), freed with the scope.
struct DeviceTensor {
    void *data = nullptr;
    size_t bytes = 0;
    fa_tensor view;
    explicit DeviceTensor(const HostTensor &h) : bytes(h.storage.size()), view(h.view)
    {
        if (cudaMalloc(&data, bytes) == cudaSuccess)
            cudaMemcpy(data, h.storage.data(), bytes, cudaMemcpyHostToDevice);
        view.data = data;
    }
    void copy_to(HostTensor &h) const { cudaMemcpy(h.storage.data(), data, bytes, cudaMemcpyDeviceToHost); }
    ~DeviceTensor() { cudaFree(data); }
    DeviceTensor(const DeviceTensor &) = delete;
    DeviceTensor &operator=(const DeviceTensor &) = delete;
};

struct Whole {
    HostTensor q, k, v, dout;
};

struct Results {
    HostTensor out, lse, dq, dk, dv;
    fa_status fwd = FA_ERR_UNSUPPORTED, bwd = FA_ERR_UNSUPPORTED;
    std::string error;
    double seconds = 0.0;
};

Results make_results(const Problem &p, int64_t rows)
{
    Results r;
    r.out = make_tensor(p.dtype, {p.batch, rows, p.heads, p.dim});
    r.lse = make_tensor(FA_DTYPE_F32, {p.batch, p.heads, rows});
    r.dq = make_tensor(p.dtype, {p.batch, rows, p.heads, p.dim});
    r.dk = make_tensor(p.dtype, {p.batch, rows, p.heads_k, p.dim});
    r.dv = make_tensor(p.dtype, {p.batch, rows, p.heads_k, p.dim});
    return r;
}

// Rank `rank`'s whole part: its rows to its GPU, the ring forward and backward, back.
void run_rank(const Problem &p, const Whole &w, ncclComm_t comm, int rank, int world, Results *res)
{
    std::vector<int64_t> rows = rows_of(p, rank, world);
    fa_context *ctx = nullptr;
    fa_ring_comm *ring = nullptr;
    cudaStream_t stream = nullptr;
    cudaSetDevice(rank);
    cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    *res = make_results(p, (int64_t)rows.size());
    if (fa_create(&ctx, FA_BACKEND_CUDA, rank) != FA_OK ||
        fa_ring_create_nccl(&ring, ctx, &comm, stream) != FA_OK) {
        res->error = std::string("create: ") + fa_create_error() + fa_ring_create_error();
        fa_destroy(ctx);
        return;
    }
    HostTensor lq = take_rows(w.q, rows), lk = take_rows(w.k, rows), lv = take_rows(w.v, rows);
    HostTensor ldo = take_rows(w.dout, rows);
    DeviceTensor q(lq), k(lk), v(lv), dout(ldo), out(res->out), lse(res->lse), dq(res->dq), dk(res->dk),
        dv(res->dv);
    fa_params params = params_of(p);
    fa_ring_layout layout{p.total, p.split};
    auto start = std::chrono::steady_clock::now();
    res->fwd = fa_ring_fwd(ring, &q.view, &k.view, &v.view, &params, &layout, &out.view, &lse.view);
    if (res->fwd == FA_OK)
        res->bwd = fa_ring_bwd(ring, &q.view, &k.view, &v.view, &out.view, &lse.view, &dout.view, &params, &layout,
                               &dq.view, &dk.view, &dv.view);
    cudaStreamSynchronize(stream);
    res->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    res->error = fa_ring_last_error(ring);
    out.copy_to(res->out);
    lse.copy_to(res->lse);
    dq.copy_to(res->dq);
    dk.copy_to(res->dk);
    dv.copy_to(res->dv);
    fa_ring_destroy(ring);
    fa_destroy(ctx);
    cudaStreamDestroy(stream);
}

// The library over the whole sequence on GPU 0.
Results single_gpu(const Problem &p, const Whole &w)
{
    Results s = make_results(p, p.total);
    fa_context *ctx = nullptr;
    fa_params params = params_of(p);
    cudaSetDevice(0);
    REQUIRE(fa_create(&ctx, FA_BACKEND_CUDA, 0) == FA_OK);
    DeviceTensor q(w.q), k(w.k), v(w.v), dout(w.dout), out(s.out), lse(s.lse), dq(s.dq), dk(s.dk), dv(s.dv);
    s.fwd = fa_fwd(ctx, &q.view, &k.view, &v.view, &params, &out.view, &lse.view, nullptr, 0);
    s.bwd = fa_bwd(ctx, &q.view, &k.view, &v.view, &out.view, &lse.view, &dout.view, &params, &dq.view, &dk.view,
                   &dv.view, nullptr, 0);
    cudaDeviceSynchronize();
    out.copy_to(s.out);
    lse.copy_to(s.lse);
    dq.copy_to(s.dq);
    dk.copy_to(s.dk);
    dv.copy_to(s.dv);
    fa_destroy(ctx);
    return s;
}

double row_error(const fa_tensor &local, const fa_tensor &whole, const std::vector<int64_t> &rows, int row_dim)
{
    double worst = 0.0;
    int64_t idx[4] = {0, 0, 0, 0}, widx[4] = {0, 0, 0, 0}, n = 1;
    for (int i = 0; i < local.ndim; i++)
        n *= local.shape[i];
    for (int64_t flat = 0; flat < n; flat++) {
        int64_t rest = flat;
        for (int i = local.ndim - 1; i >= 0; i--) {
            idx[i] = rest % local.shape[i];
            rest /= local.shape[i];
        }
        std::copy(idx, idx + 4, widx);
        widx[row_dim] = rows[(size_t)idx[row_dim]];
        double a = element(local, idx), b = element(whole, widx);
        double e = (std::isinf(a) && a == b) ? 0.0 : std::fabs(a - b);
        worst = std::isnan(e) ? INFINITY : std::max(worst, e);
    }
    return worst;
}

// Canonical reference arrays as whole-sequence fp32 tensors in fa_fwd's layout.
HostTensor dense(const std::vector<double> &values, std::vector<int64_t> shape, bool lse_layout)
{
    HostTensor t = make_tensor(FA_DTYPE_F32, shape);
    float *f = reinterpret_cast<float *>(t.storage.data());
    for (size_t i = 0; i < values.size(); i++) {
        size_t at = i;
        if (lse_layout) {  // canonical [b, s, h] -> [b, h, s]
            int64_t H = shape[1], S = shape[2], h = (int64_t)i % H, bs = (int64_t)i / H;
            at = (size_t)((bs / S * H + h) * S + bs % S);
        }
        f[at] = (float)values[i];
    }
    return t;
}

void check_problem(const Problem &p, int world)
{
    INFO("total " << p.total << " world " << world << " causal " << p.causal << " " << fa_dtype_name(p.dtype));
    Whole w;
    w.q = make_tensor(p.dtype, {p.batch, p.total, p.heads, p.dim});
    w.k = make_tensor(p.dtype, {p.batch, p.total, p.heads_k, p.dim});
    w.v = make_tensor(p.dtype, {p.batch, p.total, p.heads_k, p.dim});
    w.dout = make_tensor(p.dtype, {p.batch, p.total, p.heads, p.dim});
    fill_normal(w.q, 11);
    fill_normal(w.k, 12);
    fill_normal(w.v, 13);
    fill_normal(w.dout, 14);

    std::vector<ncclComm_t> comms((size_t)world);
    std::vector<int> devices((size_t)world);
    for (int i = 0; i < world; i++)
        devices[(size_t)i] = i;
    REQUIRE(ncclCommInitAll(comms.data(), world, devices.data()) == ncclSuccess);
    std::vector<Results> res((size_t)world);
    std::vector<std::thread> threads;
    for (int r = 0; r < world; r++)
        threads.emplace_back(run_rank, std::cref(p), std::cref(w), comms[(size_t)r], r, world, &res[(size_t)r]);
    for (std::thread &t : threads)
        t.join();
    for (ncclComm_t c : comms)
        ncclCommDestroy(c);

    Results s = single_gpu(p, w);
    REQUIRE(s.fwd == FA_OK);
    REQUIRE(s.bwd == FA_OK);
    fa_params params = params_of(p);
    Reference exact = reference_attention(w.q.view, w.k.view, w.v.view, params, Precision::Exact);
    Reference naive = reference_attention(w.q.view, w.k.view, w.v.view, params, Precision::Naive);
    GradReference gexact = reference_backward(w.q.view, w.k.view, w.v.view, w.dout.view, params, Precision::Exact);
    GradReference gnaive = reference_backward(w.q.view, w.k.view, w.v.view, w.dout.view, params, Precision::Naive);
    GradErrors ge = grad_difference(gnaive, gexact);
    const double limit[5] = {2.0 * max_out_difference(naive, exact) + 1e-5,
                             2.0 * max_lse_difference(naive, exact) + 1e-5, 3.0 * ge.dq + 1e-5, 3.0 * ge.dk + 1e-5,
                             3.0 * ge.dv + 1e-5};
    HostTensor ref[5] = {dense(exact.out, {p.batch, p.total, p.heads, p.dim}, false),
                         dense(exact.lse, {p.batch, p.heads, p.total}, true),
                         dense(gexact.dq, {p.batch, p.total, p.heads, p.dim}, false),
                         dense(gexact.dk, {p.batch, p.total, p.heads_k, p.dim}, false),
                         dense(gexact.dv, {p.batch, p.total, p.heads_k, p.dim}, false)};
    const char *what[5] = {"out", "lse", "dq", "dk", "dv"};
    for (int r = 0; r < world; r++) {
        Results &mine = res[(size_t)r];
        INFO("rank " << r << ": " << mine.error);
        std::printf("rank %d of %d: fa_ring_fwd + fa_ring_bwd %.3f ms (first call, includes set-up)\n", r, world,
                    mine.seconds * 1e3);
        REQUIRE(mine.fwd == FA_OK);
        REQUIRE(mine.bwd == FA_OK);
        std::vector<int64_t> rows = rows_of(p, r, world);
        const HostTensor *got[5] = {&mine.out, &mine.lse, &mine.dq, &mine.dk, &mine.dv};
        const HostTensor *lib[5] = {&s.out, &s.lse, &s.dq, &s.dk, &s.dv};
        for (int i = 0; i < 5; i++) {
            int row_dim = i == 1 ? 2 : 1;
            double vs_exact = row_error(got[i]->view, ref[i].view, rows, row_dim);
            double vs_library = row_error(got[i]->view, lib[i]->view, rows, row_dim);
            INFO(what[i]);
            CAPTURE(vs_exact, vs_library, limit[i]);
            CHECK(vs_exact <= limit[i]);
            CHECK(vs_library <= limit[i]);
        }
    }
}

}  // namespace

TEST_CASE("ring over NCCL: bf16 causal zigzag, GQA, 1001 rows", "[ring][nccl]")
{
    check_problem(Problem{}, gpu_count());
}

TEST_CASE("ring over NCCL: f16 not causal, contiguous, d128, 333 rows", "[ring][nccl]")
{
    Problem p;
    p.total = 333;
    p.causal = 0;
    p.split = FA_RING_SPLIT_CONTIGUOUS;
    p.dtype = FA_DTYPE_F16;
    p.dim = 128;
    p.heads = 4;
    check_problem(p, gpu_count());
}

TEST_CASE("ring over NCCL: a CPU context is refused", "[ring][nccl]")
{
    fa_context *ctx = nullptr;
    fa_ring_comm *ring = nullptr;
    ncclComm_t comm = nullptr;
    REQUIRE(fa_create(&ctx, FA_BACKEND_CPU, 0) == FA_OK);
    CHECK(fa_ring_create_nccl(&ring, ctx, &comm, nullptr) == FA_ERR_UNSUPPORTED);
    CHECK(ring == nullptr);
    fa_destroy(ctx);
}

int main(int argc, char **argv)
{
    if (gpu_count() < 1) {
        std::printf("no CUDA device: skipped\n");
        return 4;
    }
    return Catch::Session().run(argc, argv);
}
