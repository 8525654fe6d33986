// test_ring_mpi.cpp - ring attention (include/flashattn_ring.h) over MPI on the CPU
// backend, run by ctest under mpiexec with 2, 3 and 4 ranks. Every rank makes the whole
// sequence's q, k, v and dout from one seed, keeps its own rows, runs the ring forward
// and backward, and checks its rows against (a) the library's own fa_fwd / fa_bwd over
// the whole sequence in this process and (b) the fp64 reference, within the CPU tests'
// rule (ring_case.hpp). Also the chunk sizes, bad arguments (a named status on every
// rank, nothing written), and run-to-run determinism.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "flashattn.h"
#include "flashattn_ring.h"
#include "oracle.hpp"
#include "ring_case.hpp"

using namespace fa_oracle;
using namespace fa_ring_test;

namespace {

int world_rank()
{
    int r;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}

int world_size()
{
    int n;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    return n;
}

// A CPU context on one worker thread (ranks share the cores) and a ring over it.
struct Ring {
    fa_context *ctx = nullptr;
    fa_ring_comm *comm = nullptr;
    Ring()
    {
        MPI_Comm world = MPI_COMM_WORLD;
        REQUIRE(fa_create(&ctx, FA_BACKEND_CPU, 0) == FA_OK);
        REQUIRE(fa_set_num_threads(ctx, 1) == FA_OK);
        fa_status st = fa_ring_create_mpi(&comm, ctx, &world);
        INFO(fa_ring_create_error());
        REQUIRE(st == FA_OK);
    }
    ~Ring()
    {
        fa_ring_destroy(comm);
        fa_destroy(ctx);
    }
};

void ring_forward_backward(Ring &ring, const Problem &p, Local &l)
{
    fa_params params = params_of(p);
    fa_ring_layout layout{p.total, p.split};
    fa_status st = fa_ring_fwd(ring.comm, &l.q.view, &l.k.view, &l.v.view, &params, &layout, &l.out.view,
                               &l.lse.view);
    INFO(fa_ring_last_error(ring.comm));
    REQUIRE(st == FA_OK);
    st = fa_ring_bwd(ring.comm, &l.q.view, &l.k.view, &l.v.view, &l.out.view, &l.lse.view, &l.dout.view,
                     &params, &layout, &l.dq.view, &l.dk.view, &l.dv.view);
    INFO(fa_ring_last_error(ring.comm));
    REQUIRE(st == FA_OK);
    CHECK(all_elements_written(l.out));
    CHECK(all_elements_written(l.lse));
    CHECK(all_elements_written(l.dq));
    CHECK(all_elements_written(l.dk));
    CHECK(all_elements_written(l.dv));
}

// The library over the whole sequence in one process.
WholeResults single_process(Ring &ring, const Problem &p, Whole &w)
{
    WholeResults s = make_whole_results(p);
    fa_params params = params_of(p);
    REQUIRE(fa_fwd(ring.ctx, &w.q.view, &w.k.view, &w.v.view, &params, &s.out.view, &s.lse.view, nullptr, 0) ==
            FA_OK);
    REQUIRE(fa_bwd(ring.ctx, &w.q.view, &w.k.view, &w.v.view, &s.out.view, &s.lse.view, &w.dout.view, &params,
                   &s.dq.view, &s.dk.view, &s.dv.view, nullptr, 0) == FA_OK);
    return s;
}

void check_problem(const Problem &p)
{
    INFO(describe(p) + " on " + std::to_string(world_size()) + " ranks, rank " + std::to_string(world_rank()));
    Ring ring;
    std::vector<int64_t> rows = rows_of(p, world_rank(), world_size());
    Whole w = make_whole(p);
    Local l = make_local(p, w, rows);
    ring_forward_backward(ring, p, l);
    CHECK(gaps_untouched(l.out));
    CHECK(gaps_untouched(l.dk));

    Expected want = expected(p, w);
    Errors vs_exact = errors(l, want.exact, rows);
    Errors vs_library = errors(l, single_process(ring, p, w), rows);
    const char *what[5] = {"out", "lse", "dq", "dk", "dv"};
    for (int i = 0; i < 5; i++) {
        INFO(what[i]);
        CAPTURE(vs_exact.value[i], vs_library.value[i], want.bound[i]);
        CHECK(vs_exact.value[i] <= want.bound[i]);
        CHECK(vs_library.value[i] <= want.bound[i]);
    }
}

}  // namespace

TEST_CASE("ring: chunk sizes cover the sequence once, longer chunks first", "[ring][layout]")
{
    const fa_ring_split splits[2] = {FA_RING_SPLIT_ZIGZAG, FA_RING_SPLIT_CONTIGUOUS};
    for (fa_ring_split split : splits)
        for (int world = 1; world <= 5; world++)
            for (int64_t total : {0, 1, 3, 7, 37, 101, 128}) {
                std::vector<int> seen((size_t)total, 0);
                int64_t chunks = split == FA_RING_SPLIT_ZIGZAG ? 2 * world : world;
                for (int r = 0; r < world; r++) {
                    fa_ring_layout layout{total, split};
                    fa_ring_span span[2];
                    int64_t rows;
                    REQUIRE(fa_ring_rows(&layout, world, r, span, &rows) == FA_OK);
                    for (int i = 0; i < 2; i++) {
                        int64_t c = i == 0 ? r : chunks - 1 - r;
                        if (split == FA_RING_SPLIT_CONTIGUOUS && i == 1) {
                            CHECK(span[1].length == 0);
                            continue;
                        }
                        CHECK(span[i].length == total / chunks + (c < total % chunks ? 1 : 0));
                        CHECK(span[i].begin == c * (total / chunks) + std::min<int64_t>(c, total % chunks));
                        for (int64_t g = span[i].begin; g < span[i].begin + span[i].length; g++)
                            seen[(size_t)g]++;
                    }
                }
                CHECK(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
            }
    // 37 rows on 2 ranks, zigzag: chunks of 10, 9, 9, 9; rank 0 holds chunks 0 and 3.
    fa_ring_layout layout{37, FA_RING_SPLIT_ZIGZAG};
    fa_ring_span span[2];
    int64_t rows;
    REQUIRE(fa_ring_rows(&layout, 2, 0, span, &rows) == FA_OK);
    CHECK((span[0].begin == 0 && span[0].length == 10 && span[1].begin == 28 && span[1].length == 9 && rows == 19));
    CHECK(fa_ring_rows(&layout, 2, 2, span, &rows) == FA_ERR_BAD_PARAM);
    CHECK(fa_ring_rows(&layout, 0, 0, span, &rows) == FA_ERR_BAD_PARAM);
    CHECK(fa_ring_rows(nullptr, 2, 0, span, &rows) == FA_ERR_NULL_POINTER);
}

TEST_CASE("ring: fp32, not causal, GQA, 101 rows (uneven)", "[ring][fp32]")
{
    Problem p;
    p.total = 101;
    check_problem(p);
}

TEST_CASE("ring: fp32, causal zigzag, MQA, 37 rows (uneven)", "[ring][fp32]")
{
    Problem p;
    p.causal = 1;
    p.heads = 2;
    p.heads_k = 1;
    p.dim = 64;
    check_problem(p);
}

TEST_CASE("ring: fp32, causal contiguous with softcap, 64 rows", "[ring][fp32]")
{
    Problem p;
    p.total = 64;
    p.causal = 1;
    p.split = FA_RING_SPLIT_CONTIGUOUS;
    p.softcap = 5.0f;
    check_problem(p);
}

TEST_CASE("ring: fp32, causal zigzag, fewer rows than chunks", "[ring][fp32]")
{
    Problem p;
    p.total = 3;
    p.causal = 1;
    p.batch = 1;
    check_problem(p);
}

TEST_CASE("ring: fp32, causal zigzag, strided tensors", "[ring][fp32]")
{
    Problem p;
    p.total = 45;
    p.causal = 1;
    p.strided = true;
    check_problem(p);
}

TEST_CASE("ring: an empty sequence", "[ring][fp32]")
{
    Problem p;
    p.total = 0;
    p.causal = 1;
    check_problem(p);
}

TEST_CASE("ring: bf16, causal zigzag, GQA, 101 rows", "[ring][bf16]")
{
    Problem p;
    p.total = 101;
    p.causal = 1;
    p.dtype = FA_DTYPE_BF16;
    check_problem(p);
}

TEST_CASE("ring: fp16, not causal, contiguous, 37 rows", "[ring][fp16]")
{
    Problem p;
    p.split = FA_RING_SPLIT_CONTIGUOUS;
    p.dtype = FA_DTYPE_F16;
    p.heads_k = 4;
    check_problem(p);
}

TEST_CASE("ring: results are bitwise the same run to run", "[ring][determinism]")
{
    Problem p;
    p.total = 101;
    p.causal = 1;
    p.dtype = FA_DTYPE_BF16;
    Ring ring;
    std::vector<int64_t> rows = rows_of(p, world_rank(), world_size());
    Whole w = make_whole(p);
    Local a = make_local(p, w, rows), b = make_local(p, w, rows);
    ring_forward_backward(ring, p, a);
    ring_forward_backward(ring, p, b);
    CHECK(a.out.storage == b.out.storage);
    CHECK(a.lse.storage == b.lse.storage);
    CHECK(a.dq.storage == b.dq.storage);
    CHECK(a.dk.storage == b.dk.storage);
    CHECK(a.dv.storage == b.dv.storage);
}

namespace {

// A forward whose arguments `spoil` changes on `bad_rank` (every rank when -1): every
// rank must return `expected` on the spoiled rank and the agreed status elsewhere, and
// write nothing.
template <typename Spoil>
void refuse_forward(int bad_rank, fa_status on_bad, fa_status on_others, Spoil spoil)
{
    Problem p;
    p.total = 37;
    p.causal = 1;
    Ring ring;
    int rank = world_rank();
    std::vector<int64_t> rows = rows_of(p, rank, world_size());
    Whole w = make_whole(p);
    Local l = make_local(p, w, rows);
    fa_params params = params_of(p);
    fa_ring_layout layout{p.total, p.split};
    fa_tensor q = l.q.view, out = l.out.view;
    if (bad_rank < 0 || bad_rank == rank)
        spoil(q, params, layout, out);
    fa_status st = fa_ring_fwd(ring.comm, &q, &l.k.view, &l.v.view, &params, &layout, &out, &l.lse.view);
    std::string message = fa_ring_last_error(ring.comm);
    INFO("rank " << rank << ": " << fa_status_string(st) << ": " << message);
    CHECK(st == (bad_rank < 0 || bad_rank == rank ? on_bad : on_others));
    CHECK(!message.empty());
    CHECK(untouched(l.out));
    CHECK(untouched(l.lse));
}

}  // namespace

TEST_CASE("ring: bad arguments on one rank fail every rank, writing nothing", "[ring][errors]")
{
    int last = world_size() - 1;
    SECTION("one rank's q has a row too many")
    {
        refuse_forward(last, FA_ERR_SHAPE_MISMATCH, FA_ERR_SHAPE_MISMATCH,
                       [](fa_tensor &q, fa_params &, fa_ring_layout &, fa_tensor &) { q.shape[1] += 1; });
    }
    SECTION("one rank's out has the wrong dtype")
    {
        refuse_forward(0, FA_ERR_BAD_DTYPE, FA_ERR_BAD_DTYPE,
                       [](fa_tensor &, fa_params &, fa_ring_layout &, fa_tensor &out) { out.dtype = FA_DTYPE_F16; });
    }
    SECTION("one rank's q is NULL")
    {
        refuse_forward(last, FA_ERR_NULL_POINTER, FA_ERR_NULL_POINTER,
                       [](fa_tensor &q, fa_params &, fa_ring_layout &, fa_tensor &) { q.data = nullptr; });
    }
    SECTION("one rank's head dim is not a multiple of 8")
    {
        refuse_forward(0, FA_ERR_BAD_HEAD_DIM, FA_ERR_BAD_HEAD_DIM,
                       [](fa_tensor &q, fa_params &, fa_ring_layout &, fa_tensor &) { q.shape[3] = 30; });
    }
    SECTION("the ranks disagree on the softmax scale")
    {
        if (world_size() > 1)
            refuse_forward(last, FA_ERR_BAD_PARAM, FA_ERR_BAD_PARAM,
                           [](fa_tensor &, fa_params &p, fa_ring_layout &, fa_tensor &) { p.softmax_scale = 0.5f; });
    }
    SECTION("a sliding window is unsupported on every rank")
    {
        refuse_forward(-1, FA_ERR_UNSUPPORTED, FA_ERR_UNSUPPORTED,
                       [](fa_tensor &, fa_params &p, fa_ring_layout &, fa_tensor &) { p.window_left = 8; });
    }
    SECTION("ALiBi is unsupported")
    {
        static const float slopes[4] = {0.5f, 0.25f, 0.125f, 0.0625f};
        refuse_forward(-1, FA_ERR_UNSUPPORTED, FA_ERR_UNSUPPORTED,
                       [](fa_tensor &, fa_params &p, fa_ring_layout &, fa_tensor &) { p.alibi_slopes = slopes; });
    }
    SECTION("an unknown split")
    {
        refuse_forward(-1, FA_ERR_BAD_PARAM, FA_ERR_BAD_PARAM,
                       [](fa_tensor &, fa_params &, fa_ring_layout &l, fa_tensor &) { l.split = (fa_ring_split)7; });
    }
}

TEST_CASE("ring: backward refuses a wrong LSE and writes no gradient", "[ring][errors]")
{
    Problem p;
    p.total = 37;
    Ring ring;
    std::vector<int64_t> rows = rows_of(p, world_rank(), world_size());
    Whole w = make_whole(p);
    Local l = make_local(p, w, rows);
    fa_params params = params_of(p);
    fa_ring_layout layout{p.total, p.split};
    REQUIRE(fa_ring_fwd(ring.comm, &l.q.view, &l.k.view, &l.v.view, &params, &layout, &l.out.view, &l.lse.view) ==
            FA_OK);
    fa_tensor lse = l.lse.view;
    if (world_rank() == 0)
        lse.shape[1] = 3;
    fa_status st = fa_ring_bwd(ring.comm, &l.q.view, &l.k.view, &l.v.view, &l.out.view, &lse, &l.dout.view,
                               &params, &layout, &l.dq.view, &l.dk.view, &l.dv.view);
    INFO(fa_ring_last_error(ring.comm));
    CHECK(st == FA_ERR_SHAPE_MISMATCH);
    CHECK(untouched(l.dq));
    CHECK(untouched(l.dk));
    CHECK(untouched(l.dv));
}

TEST_CASE("ring: backward refuses dk and dv in the same memory", "[ring][errors]")
{
    Problem p;
    Ring ring;
    std::vector<int64_t> rows = rows_of(p, world_rank(), world_size());
    Whole w = make_whole(p);
    Local l = make_local(p, w, rows);
    fa_params params = params_of(p);
    fa_ring_layout layout{p.total, p.split};
    REQUIRE(fa_ring_fwd(ring.comm, &l.q.view, &l.k.view, &l.v.view, &params, &layout, &l.out.view, &l.lse.view) ==
            FA_OK);
    fa_tensor dv = l.dk.view;
    fa_status st = fa_ring_bwd(ring.comm, &l.q.view, &l.k.view, &l.v.view, &l.out.view, &l.lse.view, &l.dout.view,
                               &params, &layout, &l.dq.view, &l.dk.view, &dv);
    INFO(fa_ring_last_error(ring.comm));
    CHECK(st == FA_ERR_BAD_STRIDE);
    CHECK(untouched(l.dq));
    CHECK(untouched(l.dk));
}

TEST_CASE("ring: creation errors are named", "[ring][errors]")
{
    fa_context *ctx = nullptr;
    fa_ring_comm *comm = nullptr;
    MPI_Comm world = MPI_COMM_WORLD;
    REQUIRE(fa_create(&ctx, FA_BACKEND_CPU, 0) == FA_OK);
    CHECK(fa_ring_create_mpi(&comm, nullptr, &world) == FA_ERR_NULL_POINTER);
    CHECK(fa_ring_create_mpi(&comm, ctx, nullptr) == FA_ERR_NULL_POINTER);
    CHECK(std::string(fa_ring_create_error()).find("must be set") != std::string::npos);
#ifndef FA_TEST_RING_NCCL
    CHECK(fa_ring_create_nccl(&comm, ctx, &world, nullptr) == FA_ERR_UNSUPPORTED);
    CHECK(comm == nullptr);
    CHECK(std::string(fa_ring_create_error()).find("without NCCL") != std::string::npos);
#endif
    CHECK(fa_ring_fwd(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr) ==
          FA_ERR_NULL_POINTER);
    fa_destroy(ctx);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int failed = Catch::Session().run(argc, argv);
    int any = 0;
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    return any != 0 ? 1 : 0;
}
