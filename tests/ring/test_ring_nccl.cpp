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
