// test_ring_nccl.cpp - ring attention over NCCL on the CUDA backend: one process drives
// every visible GPU (FA_RING_TEST_GPUS caps how many) with one thread, one context, one
// stream and one NCCL communicator per GPU (ncclCommInitAll), so the ring needs no MPI.
// Each rank's out, lse, dq, dk, dv are checked against the library's own fa_fwd / fa_bwd
// over the whole sequence on GPU 0 and against the fp64 reference, within the CPU tests'
// rule (ring_case.hpp). With one GPU the ring has one rank: the schedule, the transport's
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
#include "ring_case.hpp"

using namespace fa_oracle;
using namespace fa_ring_test;

namespace {

int gpu_count()
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess)
        return 0;
    const char *cap = std::getenv("FA_RING_TEST_GPUS");
    return cap != nullptr ? std::min(n, std::atoi(cap)) : n;
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

struct RankResult {
    Local local;
    fa_status fwd = FA_ERR_UNSUPPORTED, bwd = FA_ERR_UNSUPPORTED;
    std::string error;
    double seconds = 0.0;
};

// Rank `rank`'s whole part: its rows to its GPU, the ring forward and backward, back.
void run_rank(const Problem &p, const Whole &w, ncclComm_t comm, int rank, int world, RankResult *res)
{
    std::vector<int64_t> rows = rows_of(p, rank, world);
    fa_context *ctx = nullptr;
    fa_ring_comm *ring = nullptr;
    cudaStream_t stream = nullptr;
    cudaSetDevice(rank);
    cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    res->local = make_local(p, w, rows);
    if (fa_create(&ctx, FA_BACKEND_CUDA, rank) != FA_OK ||
        fa_ring_create_nccl(&ring, ctx, &comm, stream) != FA_OK) {
        res->error = std::string("create: ") + fa_create_error() + fa_ring_create_error();
        fa_destroy(ctx);
        return;
    }
    Local &l = res->local;
    DeviceTensor q(l.q), k(l.k), v(l.v), dout(l.dout), out(l.out), lse(l.lse), dq(l.dq), dk(l.dk), dv(l.dv);
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
    out.copy_to(l.out);
    lse.copy_to(l.lse);
    dq.copy_to(l.dq);
    dk.copy_to(l.dk);
    dv.copy_to(l.dv);
    fa_ring_destroy(ring);
    fa_destroy(ctx);
    cudaStreamDestroy(stream);
}

// The library over the whole sequence on GPU 0.
WholeResults single_gpu(const Problem &p, const Whole &w)
{
    WholeResults s = make_whole_results(p);
    fa_context *ctx = nullptr;
    fa_params params = params_of(p);
    cudaSetDevice(0);
    REQUIRE(fa_create(&ctx, FA_BACKEND_CUDA, 0) == FA_OK);
    DeviceTensor q(w.q), k(w.k), v(w.v), dout(w.dout), out(s.out), lse(s.lse), dq(s.dq), dk(s.dk), dv(s.dv);
    fa_status fwd = fa_fwd(ctx, &q.view, &k.view, &v.view, &params, &out.view, &lse.view, nullptr, 0);
    fa_status bwd = fa_bwd(ctx, &q.view, &k.view, &v.view, &out.view, &lse.view, &dout.view, &params, &dq.view,
                           &dk.view, &dv.view, nullptr, 0);
    cudaDeviceSynchronize();
    INFO(fa_last_error(ctx));
    CHECK(fwd == FA_OK);
    CHECK(bwd == FA_OK);
    out.copy_to(s.out);
    lse.copy_to(s.lse);
    dq.copy_to(s.dq);
    dk.copy_to(s.dk);
    dv.copy_to(s.dv);
    fa_destroy(ctx);
    return s;
}

void check_problem(const Problem &p, int world)
{
    INFO(describe(p) << " on " << world << " GPUs");
    Whole w = make_whole(p);
    std::vector<ncclComm_t> comms((size_t)world);
    std::vector<int> devices((size_t)world);
    for (int i = 0; i < world; i++)
        devices[(size_t)i] = i;
    REQUIRE(ncclCommInitAll(comms.data(), world, devices.data()) == ncclSuccess);
    std::vector<RankResult> res((size_t)world);
    std::vector<std::thread> threads;
    for (int r = 0; r < world; r++)
        threads.emplace_back(run_rank, std::cref(p), std::cref(w), comms[(size_t)r], r, world, &res[(size_t)r]);
    for (std::thread &t : threads)
        t.join();
    for (ncclComm_t c : comms)
        ncclCommDestroy(c);

    WholeResults library = single_gpu(p, w);
    Expected want = expected(p, w);
    const char *what[5] = {"out", "lse", "dq", "dk", "dv"};
    for (int r = 0; r < world; r++) {
        RankResult &mine = res[(size_t)r];
        INFO("rank " << r << ": " << mine.error);
        std::printf("rank %d of %d: fa_ring_fwd + fa_ring_bwd %.3f ms (first call, includes set-up)\n", r, world,
                    mine.seconds * 1e3);
        REQUIRE(mine.fwd == FA_OK);
        REQUIRE(mine.bwd == FA_OK);
        std::vector<int64_t> rows = rows_of(p, r, world);
        Errors vs_exact = errors(mine.local, want.exact, rows), vs_library = errors(mine.local, library, rows);
        for (int i = 0; i < 5; i++) {
            INFO(what[i]);
            CAPTURE(vs_exact.value[i], vs_library.value[i], want.bound[i]);
            CHECK(vs_exact.value[i] <= want.bound[i]);
            CHECK(vs_library.value[i] <= want.bound[i]);
        }
    }
}

Problem bf16_causal()
{
    Problem p;
    p.total = 1001;
    p.heads = 8;
    p.dim = 64;
    p.dtype = FA_DTYPE_BF16;
    p.causal = 1;
    p.seed = 11;
    return p;
}

}  // namespace

TEST_CASE("ring over NCCL: bf16 causal zigzag, GQA, 1001 rows", "[ring][nccl]")
{
    check_problem(bf16_causal(), gpu_count());
}

TEST_CASE("ring over NCCL: f16 not causal, contiguous split, strided, d128, 333 rows", "[ring][nccl]")
{
    Problem p = bf16_causal();
    p.total = 333;
    p.causal = 0;
    p.split = FA_RING_SPLIT_CONTIGUOUS;
    p.dtype = FA_DTYPE_F16;
    p.dim = 128;
    p.heads = 4;
    p.strided = true;
    check_problem(p, gpu_count());
}

// ---- timing (hidden: run with the tag "[.bench]") ------------------------------------

namespace {

// Environment knobs of the timing case, with their defaults.
int64_t env_int(const char *name, int64_t fallback)
{
    const char *v = std::getenv(name);
    return v != nullptr ? std::atoll(v) : fallback;
}

// A device buffer of `count` bf16 values drawn from a cheap generator (not constant:
// constant operands make GPUs run faster than real ones).
void *random_bf16(size_t count, uint64_t seed)
{
    std::vector<uint16_t> host(count);
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = 0; i < count; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        float f = (float)((int64_t)(x >> 40) - (1 << 23)) / (float)(1 << 23);
        uint32_t bits;
        std::memcpy(&bits, &f, 4);
        host[i] = (uint16_t)((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
    }
    void *d = nullptr;
    if (cudaMalloc(&d, count * 2) == cudaSuccess)
        cudaMemcpy(d, host.data(), count * 2, cudaMemcpyHostToDevice);
    return d;
}

struct Timing {
    double fwd_ms = 0.0, bwd_ms = 0.0;
    std::string error;
};

// The median of `iters` timed calls after one warm-up, each call waited for on the host.
template <typename Call> double median_ms(int iters, cudaStream_t stream, Call call, std::string *error)
{
    std::vector<double> ms;
    for (int i = 0; i <= iters; i++) {
        auto start = std::chrono::steady_clock::now();
        fa_status st = call();
        cudaStreamSynchronize(stream);
        if (st != FA_OK && error->empty())
            *error = fa_status_string(st);
        if (i > 0)
            ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
}

// Forward and backward of one rank (world 1 with the whole sequence: the baseline through
// fa_fwd / fa_bwd, no ring).
void time_rank(int64_t total, int heads, int heads_k, int dim, ncclComm_t comm, int rank, int world, int iters,
               Timing *t)
{
    Problem p;
    p.total = total;
    p.causal = 1;
    std::vector<int64_t> rows = rows_of(p, rank, world);
    int64_t n = comm != nullptr ? (int64_t)rows.size() : total;
    size_t qn = (size_t)(n * heads * dim), kn = (size_t)(n * heads_k * dim);
    fa_context *ctx = nullptr;
    fa_ring_comm *ring = nullptr;
    cudaStream_t stream = nullptr;
    cudaSetDevice(rank);
    cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    if (fa_create(&ctx, FA_BACKEND_CUDA, rank) != FA_OK || fa_set_stream(ctx, stream) != FA_OK ||
        (comm != nullptr && fa_ring_create_nccl(&ring, ctx, &comm, stream) != FA_OK)) {
        t->error = std::string("create: ") + fa_create_error() + fa_ring_create_error();
        fa_destroy(ctx);
        return;
    }
    void *q = random_bf16(qn, 1 + rank), *k = random_bf16(kn, 2 + rank), *v = random_bf16(kn, 3 + rank);
    void *dout = random_bf16(qn, 4 + rank), *out = nullptr, *dq = nullptr, *dk = nullptr, *dv = nullptr;
    float *lse = nullptr;
    cudaMalloc(&out, qn * 2);
    cudaMalloc(&dq, qn * 2);
    cudaMalloc(&dk, kn * 2);
    cudaMalloc(&dv, kn * 2);
    cudaMalloc((void **)&lse, (size_t)(n * heads) * 4);
    fa_tensor tq = fa_tensor_bshd(q, FA_DTYPE_BF16, 1, n, heads, dim);
    fa_tensor tk = fa_tensor_bshd(k, FA_DTYPE_BF16, 1, n, heads_k, dim);
    fa_tensor tv = fa_tensor_bshd(v, FA_DTYPE_BF16, 1, n, heads_k, dim);
    fa_tensor tdo = fa_tensor_bshd(dout, FA_DTYPE_BF16, 1, n, heads, dim);
    fa_tensor to = fa_tensor_bshd(out, FA_DTYPE_BF16, 1, n, heads, dim);
    fa_tensor tdq = fa_tensor_bshd(dq, FA_DTYPE_BF16, 1, n, heads, dim);
    fa_tensor tdk = fa_tensor_bshd(dk, FA_DTYPE_BF16, 1, n, heads_k, dim);
    fa_tensor tdv = fa_tensor_bshd(dv, FA_DTYPE_BF16, 1, n, heads_k, dim);
    fa_tensor tl = fa_tensor_lse(lse, 1, heads, n);
    fa_params params = params_of(p);
    fa_ring_layout layout{total, p.split};
    t->fwd_ms = median_ms(iters, stream, [&] {
        return ring != nullptr ? fa_ring_fwd(ring, &tq, &tk, &tv, &params, &layout, &to, &tl)
                               : fa_fwd(ctx, &tq, &tk, &tv, &params, &to, &tl, nullptr, 0);
    }, &t->error);
    t->bwd_ms = median_ms(iters, stream, [&] {
        return ring != nullptr
                   ? fa_ring_bwd(ring, &tq, &tk, &tv, &to, &tl, &tdo, &params, &layout, &tdq, &tdk, &tdv)
                   : fa_bwd(ctx, &tq, &tk, &tv, &to, &tl, &tdo, &params, &tdq, &tdk, &tdv, nullptr, 0);
    }, &t->error);
    if (ring != nullptr && t->error.size() > 0)
        t->error += std::string(": ") + fa_ring_last_error(ring);
    for (void *b : {q, k, v, dout, out, dq, dk, dv, (void *)lse})
        cudaFree(b);
    fa_ring_destroy(ring);
    fa_destroy(ctx);
    cudaStreamDestroy(stream);
}

} // namespace

// Time per call of the ring on every visible GPU against fa_fwd / fa_bwd over the whole
// sequence on GPU 0, bf16 causal (zigzag), b 1, FA_RING_BENCH_TOKENS tokens (131072),
// FA_RING_BENCH_HEADS / _KV_HEADS / _DIM (16 / 16 / 128), FA_RING_BENCH_ITERS timed
// calls after a warm-up (5); scaling efficiency = single / (world * ring), per pass.
TEST_CASE("ring over NCCL: time per call and scaling efficiency", "[.bench]")
{
    int world = gpu_count(), iters = (int)env_int("FA_RING_BENCH_ITERS", 5);
    int64_t total = env_int("FA_RING_BENCH_TOKENS", 131072);
    int heads = (int)env_int("FA_RING_BENCH_HEADS", 16), heads_k = (int)env_int("FA_RING_BENCH_KV_HEADS", 16);
    int dim = (int)env_int("FA_RING_BENCH_DIM", 128);
    Timing single;
    time_rank(total, heads, heads_k, dim, nullptr, 0, 1, iters, &single);
    INFO(single.error);
    REQUIRE(single.error.empty());

    std::vector<ncclComm_t> comms((size_t)world);
    std::vector<int> devices((size_t)world);
    for (int i = 0; i < world; i++)
        devices[(size_t)i] = i;
    REQUIRE(ncclCommInitAll(comms.data(), world, devices.data()) == ncclSuccess);
    std::vector<Timing> ranks((size_t)world);
    std::vector<std::thread> threads;
    for (int r = 0; r < world; r++)
        threads.emplace_back(time_rank, total, heads, heads_k, dim, comms[(size_t)r], r, world, iters,
                             &ranks[(size_t)r]);
    for (std::thread &t : threads)
        t.join();
    for (ncclComm_t c : comms)
        ncclCommDestroy(c);
    double fwd = 0.0, bwd = 0.0;
    for (const Timing &t : ranks) {
        INFO(t.error);
        REQUIRE(t.error.empty());
        fwd = std::max(fwd, t.fwd_ms);
        bwd = std::max(bwd, t.bwd_ms);
    }
    std::printf("ring bf16 causal b1 s%lld h%d/%d d%d on %d GPUs: forward %.2f ms (one GPU %.2f ms, efficiency "
                "%.2f), backward %.2f ms (one GPU %.2f ms, efficiency %.2f)\n",
                (long long)total, heads, heads_k, dim, world, fwd, single.fwd_ms, single.fwd_ms / (world * fwd),
                bwd, single.bwd_ms, single.bwd_ms / (world * bwd));
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
