// test_cuda_backward.cpp - the CUDA backward against the fp64 reference gradients
// (tests/oracle.hpp) on random normal inputs: head dims 8 to 256 and some in between,
// odd and unequal sequence lengths both ways, GQA, causal, windows, softcap, ALiBi,
// varlen with empty sequences, fully masked rows, seqused_k (zero dk, dv past it); dQ
// both by atomics (the default) and by its own pass (deterministic); bitwise
// reproducibility; the limits that return FA_ERR_UNSUPPORTED. On an sm_90 device the
// cases at d33-d64 and d97-d256 run the warpgroup dK/dV kernel
// (bws_instances.txt; deterministic ones with its ordered dQ adds; varlen and seqused_k
// too), which six cases check the plan names (one the d128 tiles that run past a
// sequence's end); one checks that a varlen sequence's gradients do not see the next
// sequence's rows, Inf included. Tolerance: error <= 3 x
// (error of a naive same-precision backward) + 1e-5, for dq, dk and dv. Skipped (exit
// code 4) without a CUDA device.
#include <catch2/catch.hpp>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>

#include "device_tensors.hpp"
#include "gpu_case.hpp"
#include "oracle.hpp"

using fa_oracle::Precision;

namespace {

// A case's gradients on the device, the grad_out they came from, and the call's status.
struct BackwardRun {
    HostTensor grad_out, dq, dk, dv;
    fa_status status;
    std::string message;
};

// Forward then backward of one case on the device; gradients land in the host tensors.
// `edit_grad_out`, if given, changes the random grad_out before it is uploaded.
void run_backward(GpuProblem &p, uint64_t seed, BackwardRun &r, int deterministic = 0,
                  const std::function<void(HostTensor &)> &edit_grad_out = nullptr)
{
    Context ctx;
    REQUIRE(fa_fwd(ctx.ctx, &p.dq->view, &p.dk->view, &p.dv->view, &p.dev_params, &p.dout->view,
                   &p.dlse->view, nullptr, 0) == FA_OK);
    r.grad_out = make_like(p.out);
    fa_oracle::fill_normal(r.grad_out, seed + 3);
    if (edit_grad_out)
        edit_grad_out(r.grad_out);
    r.dq = make_like(p.q);
    r.dk = make_like(p.k);
    r.dv = make_like(p.v);
    DeviceTensor d_grad_out(r.grad_out), ddq(r.dq), ddk(r.dk), ddv(r.dv);
    fa_params params = p.dev_params;
    params.deterministic = deterministic;
    r.status = fa_bwd(ctx.ctx, &p.dq->view, &p.dk->view, &p.dv->view, &p.dout->view, &p.dlse->view,
                      &d_grad_out.view, &params, &ddq.view, &ddk.view, &ddv.view, nullptr, 0);
    r.message = fa_last_error(ctx.ctx);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    p.dout->copy_back();
    ddq.copy_back();
    ddk.copy_back();
    ddv.copy_back();
}

// The largest |a - b| over the elements of two 4-d tensors of one shape, relative to the
// largest |b|.
double max_relative_difference(const HostTensor &a, const HostTensor &b)
{
    const int64_t *n = b.view.shape;
    double diff = 0.0, scale = 0.0;
    int64_t i[4];
    for (i[0] = 0; i[0] < n[0]; ++i[0])
        for (i[1] = 0; i[1] < n[1]; ++i[1])
            for (i[2] = 0; i[2] < n[2]; ++i[2])
                for (i[3] = 0; i[3] < n[3]; ++i[3]) {
                    const double x = fa_oracle::element(a.view, i), y = fa_oracle::element(b.view, i);
                    diff = std::max(diff, std::fabs(x - y));
                    scale = std::max(scale, std::fabs(y));
                }
    return diff / scale;
}

// Two runs' gradients, bit for bit.
void check_same_gradients(const BackwardRun &a, const BackwardRun &b)
{
    CHECK(a.dq.storage == b.dq.storage);
    CHECK(a.dk.storage == b.dk.storage);
    CHECK(a.dv.storage == b.dv.storage);
}

// Two deterministic runs of c on the same inputs, bit for bit.
void check_deterministic_repeat(const Case &c, uint64_t seed)
{
    GpuProblem p(c, seed);
    BackwardRun first, again;
    run_backward(p, seed, first, 1);
    run_backward(p, seed, again, 1);
    REQUIRE(first.status == FA_OK);
    REQUIRE(again.status == FA_OK);
    check_same_gradients(again, first);
}

void check_backward(const Case &c, uint64_t seed, int deterministic = 0)
{
    GpuProblem p(c, seed);
    BackwardRun r;
    run_backward(p, seed, r, deterministic);
    INFO(describe(c) << (deterministic ? " deterministic" : " dQ by atomics"));
    INFO("fa_bwd: " << fa_status_string(r.status) << ": " << r.message);
    REQUIRE(r.status == FA_OK);
    CHECK(fa_oracle::all_elements_written(r.dq));
    CHECK(fa_oracle::all_elements_written(r.dk));
    CHECK(fa_oracle::all_elements_written(r.dv));
    fa_oracle::GradReference exact = fa_oracle::reference_backward(p.q.view, p.k.view, p.v.view,
                                                                   r.grad_out.view, p.host_params,
                                                                   Precision::Exact);
    fa_oracle::GradReference naive = fa_oracle::reference_backward(p.q.view, p.k.view, p.v.view,
                                                                   r.grad_out.view, p.host_params,
                                                                   Precision::Naive);
    fa_oracle::GradErrors err = fa_oracle::grad_errors(r.dq.view, r.dk.view, r.dv.view, exact);
    fa_oracle::GradErrors base = fa_oracle::grad_difference(naive, exact);
    INFO("dq " << err.dq << " (naive " << base.dq << "), dk " << err.dk << " (naive " << base.dk << "), dv "
               << err.dv << " (naive " << base.dv << ")");
    CHECK(err.dq <= 3 * base.dq + 1e-5);
    CHECK(err.dk <= 3 * base.dk + 1e-5);
    CHECK(err.dv <= 3 * base.dv + 1e-5);
}

std::string backward_kernel(const Case &c, int deterministic)
{
    GpuProblem p(c, 1);
    Context ctx;
    fa_params params = p.dev_params;
    params.deterministic = deterministic;
    fa_plan plan;
    REQUIRE(fa_plan_bwd(ctx.ctx, &p.dq->view, &p.dk->view, &p.dv->view, &params, &plan) == FA_OK);
    INFO(plan.reason);
    return plan.kernel;
}

// Whether the plan of c's backward (deterministic or not) names the warpgroup dK/dV
// instance of head dim `instance`; the kernel it names goes to the caller's check.
bool plans_warpgroup(const Case &c, int deterministic, int instance)
{
    const std::string kernel = backward_kernel(c, deterministic);
    UNSCOPED_INFO(kernel);
    return kernel.rfind("fa_cuda_bws_d" + std::to_string(instance) + "_", 0) == 0;
}

// A warpgroup case runs only on an sm_90 device with sm_90a kernels; elsewhere it says so.
bool warpgroup_backward_runs()
{
    if (warpgroup_device(FA_PASS_BWD))
        return true;
    WARN("not an sm_90 device with sm_90a kernels: the warpgroup backward is not run");
    return false;
}

}  // namespace

TEST_CASE("cuda backward: sm_90 runs the warpgroup dK/dV kernel where the plan says, against the oracle",
          "[cuda][backward][warpgroup]")
{
    if (!warpgroup_backward_runs())
        return;
    uint64_t seed = 2400;
    for (int d : {64, 128, 192, 256})
        for (fa_dtype dtype : {FA_DTYPE_BF16, FA_DTYPE_F16})
            for (int shape = 0; shape < 3; ++shape) {
                Case c;
                c.batch = 2;
                c.heads = 6;
                c.heads_k = 2;
                c.head_dim = d;
                c.dtype = dtype;
                c.seqlen_q = shape == 2 ? 517 : 301; // causal both ways: more keys, then more queries
                c.seqlen_k = shape == 2 ? 301 : 517;
                c.causal = shape > 0;
                CHECK(plans_warpgroup(c, 0, d));
                CHECK(backward_kernel(c, 1) == backward_kernel(c, 0)); // deterministic: its adds ordered
                check_backward(c, seed++);
                check_backward(c, seed++, 1);
            }
    // Head dims below the instance's (the tensor maps zero the columns past them, dQ is
    // staged in the accumulator's layout for the call's head dim), with a window and ALiBi.
    for (int d : {40, 112, 136, 160, 184, 224}) {
        Case c;
        c.heads = 4;
        c.heads_k = 1;
        c.head_dim = d;
        c.seqlen_q = 333;
        c.seqlen_k = 250;
        c.window_left = 90;
        c.window_right = 7;
        c.alibi = true;
        const int instance = d <= 64 ? 64 : d <= 128 ? 128 : d <= 192 ? 192 : 256;
        CHECK(plans_warpgroup(c, 0, instance));
        check_backward(c, seed++);
        c.seqlen_q = 301; // a last query tile of 45 rows, deterministic (d256: its rows past 32 staged where dO was)
        check_backward(c, seed++, 1);
    }
}

// The d128 warpgroup backward (P before dS, fa_bwd_probs) without a left window side:
// every masked tile takes the lean path and clears what lies past the diagonal
// (fa_bwd_clear_above) and past the sequences' ends (fa_bwd_clear_past_ends, b15): key
// blocks and query tiles that end inside their tile, with no mask, a right side alone (0:
// causal; 19: off the diagonal), ALiBi (the distance per register, b13), more keys than
// queries and fewer; then varlen sequences of unequal lengths without a mask, deterministic
// calls bit for bit, and seqused_k with Inf in the unused keys.
TEST_CASE("cuda backward: sm_90's d128 warpgroup tiles that run past a sequence's end, against the oracle",
          "[cuda][backward][warpgroup]")
{
    if (!warpgroup_backward_runs())
        return;
    uint64_t seed = 2900;
    const struct {
        int right;
        bool alibi;
        int seqlen_q, seqlen_k;
    } variants[] = {{-1, false, 401, 389}, {-1, false, 389, 401}, {0, false, 401, 389}, {19, false, 401, 389},
                    {-1, true, 389, 401},  {0, true, 389, 401},   {-1, true, 401, 389}, {0, true, 401, 389}};
    for (const auto &v : variants) {
        Case c;
        c.heads = 4;
        c.heads_k = 2;
        c.head_dim = 128;
        c.seqlen_q = v.seqlen_q;
        c.seqlen_k = v.seqlen_k;
        c.window_right = v.right;
        c.alibi = v.alibi;
        INFO(describe(c));
        CHECK(plans_warpgroup(c, 0, 128));
        check_backward(c, seed++);
        check_backward(c, seed++, 1);
    }
    for (int used : {0, 1}) {
        Case v;
        v.head_dim = 128;
        v.dtype = kGpuDtypes[used];
        v.heads = 4;
        v.heads_k = 2;
        v.cu_q = {0, 77, 300, 301, 460};
        v.cu_k = {0, 130, 141, 399, 460};
        if (used) {
            v.seqused_k = {100, 11, 0, 37};
            v.inf_past_used_keys = true;
        }
        INFO(describe(v));
        CHECK(plans_warpgroup(v, 1, 128));
        check_backward(v, seed++);
        check_backward(v, seed++, 1);
        check_deterministic_repeat(v, seed++);
    }
}

TEST_CASE("cuda backward: every head dim, both dtypes, both causal directions",
          "[cuda][backward][sanitize]")
{
    uint64_t seed = 2000;
    for (int deterministic : {0, 1})
        for (const Case &c : head_dim_sweep({8, 32, 40, 64, 96, 128, 160, 192, 200, 256}))
            check_backward(c, seed++, deterministic);
}

TEST_CASE("cuda backward: softcap, alone and with ALiBi and a window", "[cuda][backward]")
{
    uint64_t seed = 2050;
    for (int deterministic : {0, 1})
        for (int d : {64, 128, 192, 256}) {
            Case c;
            c.head_dim = d;
            c.seqlen_q = 190;
            c.seqlen_k = 260;
            c.heads_k = 2;
            c.softcap = 30.f;
            c.causal = true;
            check_backward(c, seed++, deterministic);
            c.softcap = 5.f; // small cap: tanh far from linear
            c.causal = false;
            c.alibi = true;
            c.window_left = 70;
            c.window_right = 20;
            check_backward(c, seed++, deterministic);
        }
}

TEST_CASE("cuda backward: lengths, GQA 6/2/1, masks, ALiBi", "[cuda][backward]")
{
    uint64_t seed = 2100;
    for (const Case &c : length_sweep({{1, 1}, {1, 239}, {128, 217}, {256, 512}, {512, 256}, {1023, 1024}}))
        for (int deterministic : {0, 1})
            check_backward(c, seed++, deterministic);
    Case w;
    w.seqlen_q = 300;
    w.seqlen_k = 421;
    w.heads_k = 3;
    w.window_left = 37;
    w.window_right = 5;
    check_backward(w, seed++);
    // The same window at d128, without ALiBi: on sm_90 its edge tiles are the warpgroup
    // kernel's masked tiles on its P-first path (d64 above computes P and dS in one pass;
    // bench/NOTES.md issue 14 b8, b9).
    Case w128 = w;
    w128.head_dim = 128;
    check_backward(w128, seed++);
    Case a = w;
    a.window_left = a.window_right = -1;
    a.alibi = true;
    a.causal = true;
    check_backward(a, seed++);
}

TEST_CASE("cuda backward: varlen with empty sequences, fully masked rows", "[cuda][backward][sanitize]")
{
    Case v;
    v.head_dim = 64;
    v.heads_k = 2;
    v.causal = true;
    v.cu_q = {0, 50, 50, 177, 400};
    v.cu_k = {0, 80, 95, 95, 350};
    check_backward(v, 2200);
    Case m;
    m.seqlen_q = 250;
    m.seqlen_k = 70; // causal: the first 180 query rows see no key
    m.causal = true;
    m.head_dim = 96;
    check_backward(m, 2201);
}

// seqused_k in device memory: keys past seqused_k[b] are attended by no query, and their
// dK and dV rows (whole key tiles past it, and the rest of the tile it ends in) must be
// written, as zeros. Lengths end inside tiles of every size; 0 leaves a sequence no key.
TEST_CASE("cuda backward: seqused_k, fixed length and varlen, keys past it get zero dk, dv",
          "[cuda][gpu][backward][seqused][sanitize]")
{
    uint64_t seed = 2230;
    for (int deterministic : {0, 1})
        for (int d : {64, 128, 192, 256}) {
            Case c;
            c.batch = 4;
            c.seqlen_q = 150;
            c.seqlen_k = 200;
            c.seqused_k = {200, 77, 0, 130};
            c.heads = 4;
            c.heads_k = 2;
            c.head_dim = d;
            c.dtype = kGpuDtypes[d / 64 % 2];
            check_backward(c, seed++, deterministic);
            c.causal = true; // s_q < s_k: the diagonal ends at seqused_k[b]
            check_backward(c, seed++, deterministic);
            c.causal = false;
            c.window_left = 30; // keys no query sees inside the used ones too
            c.window_right = 10;
            c.seqlen_q = 40;
            check_backward(c, seed++, deterministic);
        }
    Case v;
    v.head_dim = 96;
    v.heads_k = 3;
    v.causal = true;
    v.cu_q = {0, 50, 50, 177, 400};
    v.cu_k = {0, 80, 95, 95, 350};
    v.seqused_k = {61, 0, 0, 200};
    check_backward(v, seed++);
    check_backward(v, seed++, 1);
}

// The warpgroup backward on ragged calls: its maps read a varlen call's packed rows, so a
// key or query tile that ends past its sequence holds the next sequence's rows (zeroed in
// shared memory), and the dK/dV rows of such a key tile are stored row by row; seqused_k's
// unused keys hold Inf here.
TEST_CASE("cuda backward: sm_90 runs the warpgroup dK/dV kernel on varlen and seqused_k, against the oracle",
          "[cuda][backward][warpgroup]")
{
    if (!warpgroup_backward_runs())
        return;
    uint64_t seed = 2260;
    for (int d : {64, 128, 192, 256})
        for (int mask = 0; mask < 3; ++mask) {
            Case v;
            v.head_dim = d;
            v.dtype = kGpuDtypes[(d / 64 + mask) % 2];
            v.heads = 6;
            v.heads_k = 2;
            v.cu_q = {0, 50, 50, 177, 400, 531};
            v.cu_k = {0, 80, 95, 95, 350, 413};
            v.causal = mask == 1;
            if (mask == 2) {
                v.window_left = 45;
                v.window_right = 12;
                v.alibi = true;
                v.seqused_k = {61, 0, 0, 200, 63};
                v.inf_past_used_keys = true;
            }
            INFO(describe(v));
            CHECK(plans_warpgroup(v, 0, d));
            check_backward(v, seed++);
            check_backward(v, seed++, 1);
            check_deterministic_repeat(v, seed++); // the ordered adds of packed sequences
        }
    // A long sequence whose first key tile runs into a short one's rows: were its dK and dV
    // stored as a whole tile, it would overwrite the short sequence's (written long before
    // the long sequence's block ends). Then a head dim below the instance's (the columns
    // past it are not stored) with softcap (P and dS in one pass).
    for (int d : {64, 128, 192, 256}) {
        Case v;
        v.head_dim = d;
        v.heads = 2;
        v.heads_k = 1;
        v.cu_q = {0, 1500, 1530};
        v.cu_k = {0, 100, 260};
        INFO(describe(v));
        check_backward(v, seed++);
        check_backward(v, seed++, 1);
    }
    Case sc;
    sc.head_dim = 112;
    sc.heads_k = 2;
    sc.softcap = 10.f;
    sc.causal = true;
    sc.cu_q = {0, 70, 70, 333};
    sc.cu_k = {0, 130, 200, 411};
    INFO(describe(sc));
    CHECK(plans_warpgroup(sc, 0, 128));
    check_backward(sc, seed++);
    check_backward(sc, seed++, 1);
    for (int d : {64, 128, 192, 256}) {
        Case u; // fixed length, seqused_k: Inf in the unused keys
        u.batch = 3;
        u.seqlen_q = 190;
        u.seqlen_k = 300;
        u.seqused_k = {300, 129, 0};
        u.inf_past_used_keys = true;
        u.heads = 4;
        u.heads_k = 2;
        u.head_dim = d;
        u.causal = d == 128;
        INFO(describe(u));
        CHECK(plans_warpgroup(u, 0, d));
        CHECK(plans_warpgroup(u, 1, d));
        check_backward(u, seed++);
        check_backward(u, seed++, 1);
    }
}

// Sequence 0 of a varlen call next to a sequence whose q, k, v and dout rows are all Inf:
// its gradients must be those of the same sequence alone (the oracle's, from a
// fixed-length problem whose random tensors are the varlen ones' first rows), on whatever
// kernel the device runs.
TEST_CASE("cuda backward: a varlen sequence's gradients never see the next sequence's rows, Inf included",
          "[cuda][backward][sanitize]")
{
    uint64_t seed = 2290;
    for (int d : {64, 128, 192, 256})
        for (int deterministic : {0, 1}) {
            Case alone;
            alone.batch = 1;
            alone.seqlen_q = 77;
            alone.seqlen_k = 93;
            alone.heads = 4;
            alone.heads_k = 2;
            alone.head_dim = d;
            alone.dtype = kGpuDtypes[d / 64 % 2];
            alone.causal = d == 128;
            Case packed = alone;
            packed.cu_q = {0, 77, 200};
            packed.cu_k = {0, 93, 250};
            GpuProblem one(alone, seed), p(packed, seed);
            GpuProblem::set_packed_rows_inf(p.q, 77, 200);
            GpuProblem::set_packed_rows_inf(p.k, 93, 250);
            GpuProblem::set_packed_rows_inf(p.v, 93, 250);
            p.dq.reset(new DeviceTensor(p.q));
            p.dk.reset(new DeviceTensor(p.k));
            p.dv.reset(new DeviceTensor(p.v));
            BackwardRun r;
            run_backward(p, seed, r, deterministic,
                         [](HostTensor &g) { GpuProblem::set_packed_rows_inf(g, 77, 200); });
            INFO(describe(packed) << (deterministic ? " deterministic" : " dQ by atomics") << ": " << r.message);
            REQUIRE(r.status == FA_OK);
            HostTensor grad_out = make_like(one.out);
            fa_oracle::fill_normal(grad_out, seed + 3); // run_backward's, sequence 0's rows
            fa_oracle::GradReference exact = fa_oracle::reference_backward(
                one.q.view, one.k.view, one.v.view, grad_out.view, one.host_params, Precision::Exact);
            fa_oracle::GradReference naive = fa_oracle::reference_backward(
                one.q.view, one.k.view, one.v.view, grad_out.view, one.host_params, Precision::Naive);
            const fa_tensor dq0 = fa_tensor_bshd(r.dq.view.data, r.dq.view.dtype, 1, 77, 4, d);
            const fa_tensor dk0 = fa_tensor_bshd(r.dk.view.data, r.dk.view.dtype, 1, 93, 2, d);
            const fa_tensor dv0 = fa_tensor_bshd(r.dv.view.data, r.dv.view.dtype, 1, 93, 2, d);
            fa_oracle::GradErrors err = fa_oracle::grad_errors(dq0, dk0, dv0, exact);
            fa_oracle::GradErrors base = fa_oracle::grad_difference(naive, exact);
            INFO("dq " << err.dq << " (naive " << base.dq << "), dk " << err.dk << " (naive " << base.dk
                       << "), dv " << err.dv << " (naive " << base.dv << ")");
            CHECK(err.dq <= 3 * base.dq + 1e-5); // a NaN counts as an infinite error
            CHECK(err.dk <= 3 * base.dk + 1e-5);
            CHECK(err.dv <= 3 * base.dv + 1e-5);
            ++seed;
        }
}

TEST_CASE("cuda backward: more than 65535 sequences (folded grids), dQ by atomics and deterministic",
          "[cuda][backward]")
{
    Case c = many_sequences(70001);
    c.causal = true;
    check_backward(c, 2250);
    check_backward(c, 2251, 1);
    Case fixed; // fixed-length: 66000 sequences of 5 rows
    fixed.batch = 66000;
    fixed.seqlen_q = fixed.seqlen_k = 5;
    fixed.heads = fixed.heads_k = 1;
    fixed.head_dim = 32;
    check_backward(fixed, 2252);
}

// Every element of an fp16 tensor set to the same bit pattern.
static void fill_f16_bits(HostTensor &t, uint16_t bits)
{
    REQUIRE(t.view.dtype == FA_DTYPE_F16);
    for (size_t i = 0; i + 1 < t.storage.size(); i += 2)
        std::memcpy(&t.storage[i], &bits, sizeof bits);
}

// q.k * scale = -1.75 * 64 / 8 = -14 for every pair, so lse = -14 + ln(s_k): a zero
// padding key of a partial tile would get P = e^14 / s_k, and dS = -P * D overflows fp16;
// the kernels must mask padding keys rather than rely on their zero K rows.
// d64 and d128: on sm_90 the warpgroup kernel at d128 clears the padding keys after its
// lean exponentials (fa_bwd_clear_past_ends), the other paths mask them element by element.
TEST_CASE("cuda backward: padding keys never turn very negative scores into NaN", "[cuda][backward]")
{
    for (int head_dim : {64, 128})
        for (int deterministic : {0, 1})
            for (int seqlen_k : {1, 3}) {
                Case c;
                c.dtype = FA_DTYPE_F16;
                c.head_dim = head_dim;
                c.seqlen_q = 50;
                c.seqlen_k = seqlen_k;
                c.heads = c.heads_k = 2;
                GpuProblem p(c, 2500 + seqlen_k);
                fill_f16_bits(p.q, 0xBF00); // -1.75
                fill_f16_bits(p.k, 0x3C00); // 1.0
                p.dq.reset(new DeviceTensor(p.q));
                p.dk.reset(new DeviceTensor(p.k));
                BackwardRun r;
                run_backward(p, 2500, r, deterministic);
                INFO("d " << head_dim << ", s_k " << seqlen_k
                          << (deterministic ? " deterministic" : " dQ by atomics") << ": " << r.message);
                REQUIRE(r.status == FA_OK);
                fa_oracle::GradReference exact = fa_oracle::reference_backward(
                    p.q.view, p.k.view, p.v.view, r.grad_out.view, p.host_params, Precision::Exact);
                fa_oracle::GradErrors err = fa_oracle::grad_errors(r.dq.view, r.dk.view, r.dv.view, exact);
                INFO("dq " << err.dq << ", dk " << err.dk << ", dv " << err.dv);
                CHECK(err.dq <= 0.05); // a NaN counts as an infinite error
                CHECK(err.dk <= 0.05);
                CHECK(err.dv <= 0.05);
            }
}

TEST_CASE("cuda backward: ten runs are bitwise identical", "[cuda][backward]")
{
    Case c;
    c.seqlen_q = 777;
    c.seqlen_k = 555;
    c.heads = 4;
    c.heads_k = 2;
    c.head_dim = 128;
    c.causal = true;
    GpuProblem p(c, 2300);
    BackwardRun first;
    run_backward(p, 2300, first, 1);
    REQUIRE(first.status == FA_OK);
    for (int run = 1; run < 10; ++run) {
        BackwardRun again;
        run_backward(p, 2300, again, 1);
        REQUIRE(again.status == FA_OK);
        check_same_gradients(again, first);
    }
}

// The warpgroup backward's ordered dQ adds: each query tile's from the highest key block
// down, under every mask shape that changes which tiles a key block visits (none, causal
// both ways, a window), and over a grid of far more blocks than the device holds at once
// (blocks wait only on blocks launched before them).
TEST_CASE("cuda backward: sm_90's deterministic warpgroup backward, against the oracle and bitwise "
          "repeatable", "[cuda][backward][warpgroup]")
{
    if (!warpgroup_backward_runs())
        return;
    uint64_t seed = 2700;
    for (int d : {64, 128, 192, 256})
        for (int mask = 0; mask < 4; ++mask) {
            Case c;
            c.batch = 2;
            c.heads = 4;
            c.heads_k = 2;
            c.head_dim = d;
            c.dtype = d == 64 ? FA_DTYPE_F16 : FA_DTYPE_BF16;
            c.seqlen_q = mask == 2 ? 520 : 700;
            c.seqlen_k = mask == 2 ? 700 : 520;
            c.causal = mask == 1 || mask == 2;
            if (mask == 3) {
                c.window_left = 300;
                c.window_right = 40;
            }
            INFO(describe(c));
            CHECK(plans_warpgroup(c, 1, d));
            check_backward(c, seed, 1);
            check_deterministic_repeat(c, seed);
            ++seed;
        }
}

TEST_CASE("cuda backward: sm_90's deterministic warpgroup backward over far more blocks than the device "
          "holds at once", "[cuda][backward][warpgroup]")
{
    if (!warpgroup_backward_runs())
        return;
    uint64_t seed = 2750;
    // 64 key blocks x 16 heads x 2 sequences: 2048 blocks, ~16 per SM.
    Case big;
    big.batch = 2;
    big.heads = 16;
    big.heads_k = 16;
    big.head_dim = 128;
    big.seqlen_q = 8000;
    big.seqlen_k = 8190;
    for (int causal : {0, 1}) {
        big.causal = causal;
        INFO(describe(big));
        CHECK(plans_warpgroup(big, 1, 128));
        GpuProblem p(big, seed);
        BackwardRun first, again, unordered;
        run_backward(p, seed, first, 1);
        run_backward(p, seed, again, 1);
        run_backward(p, seed, unordered, 0);
        REQUIRE(first.status == FA_OK);
        REQUIRE(again.status == FA_OK);
        REQUIRE(unordered.status == FA_OK);
        check_same_gradients(again, first);
        // The same sums in another order: dK and dV are the same kernel's, bit for bit;
        // dQ differs by rounding only.
        CHECK(unordered.dk.storage == first.dk.storage);
        CHECK(unordered.dv.storage == first.dv.storage);
        CHECK(max_relative_difference(unordered.dq, first.dq) < 0.02);
        ++seed;
    }
}

TEST_CASE("cuda backward: unsupported requests say why and write nothing", "[cuda][backward]")
{
    // q starting one element past a 16-byte boundary: the tile copies move 16-byte chunks.
    // The check comes before any launch, so the forward's outputs need not exist.
    Case c;
    GpuProblem p(c, 2400);
    Context ctx;
    HostTensor grad_out = make_like(p.out), dq = make_like(p.q), dk = make_like(p.k), dv = make_like(p.v);
    fa_oracle::fill_normal(grad_out, 2401);
    DeviceTensor d_grad_out(grad_out), ddq(dq), ddk(dk), ddv(dv);
    fa_tensor shifted_q = p.dq->view;
    shifted_q.data = static_cast<char *>(shifted_q.data) + 2;
    fa_status st = fa_bwd(ctx.ctx, &shifted_q, &p.dk->view, &p.dv->view, &p.dout->view, &p.dlse->view,
                          &d_grad_out.view, &p.dev_params, &ddq.view, &ddk.view, &ddv.view, nullptr, 0);
    std::string message = fa_last_error(ctx.ctx);
    INFO(message);
    CHECK(st == FA_ERR_UNSUPPORTED);
    CHECK(message.find("aligned") != std::string::npos);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    ddq.copy_back();
    ddk.copy_back();
    ddv.copy_back();
    CHECK(!fa_oracle::all_elements_written(dq)); // still the poison
    CHECK(!fa_oracle::all_elements_written(dk));
    CHECK(!fa_oracle::all_elements_written(dv));
}

TEST_CASE("cuda plan: backward tiles and the dQ accumulator it needs unless deterministic",
          "[cuda][backward]")
{
    Context ctx;
    const int s = 4096, heads = 16, d = 128;
    fa_tensor q = fa_tensor_bshd(reinterpret_cast<void *>(256), FA_DTYPE_BF16, 2, s, heads, d);
    fa_params p;
    fa_params_init(&p);
    fa_plan atomic_plan, det_plan;
    REQUIRE(fa_plan_bwd(ctx.ctx, &q, &q, &q, &p, &atomic_plan) == FA_OK);
    p.deterministic = 1;
    REQUIRE(fa_plan_bwd(ctx.ctx, &q, &q, &q, &p, &det_plan) == FA_OK);
    INFO(atomic_plan.kernel << ": " << atomic_plan.reason);
    // sm_90 runs the warpgroup dK/dV kernel, deterministic calls too, its dQ adds ordered
    // by int32 [heads][2 s] rows beside the accumulator (bws_instances.txt).
    const bool warpgroup = warpgroup_device(FA_PASS_BWD);
    const char *kernel = warpgroup ? "fa_cuda_bws_d128_bf16_" : "fa_cuda_bwd_d128_bf16_";
    CHECK(std::string(atomic_plan.kernel).find(kernel) == 0);
    CHECK(std::string(det_plan.kernel).find(kernel) == 0);
    CHECK(atomic_plan.num_splits == 1);
    const size_t rows = static_cast<size_t>(heads) * 2 * s * sizeof(float);
    if (warpgroup) {
        CHECK(det_plan.workspace_bytes - atomic_plan.workspace_bytes == rows);
    } else { // fp32 [heads][2 s][d] for the atomic path on top of the same D and LSE rows.
        CHECK(atomic_plan.workspace_bytes - det_plan.workspace_bytes == rows * d);
    }
}

TEST_CASE("cuda backward: forward + backward extra device memory is O(s) at 64k", "[cuda][backward]")
{
    const int64_t s = 65536;
    const int d = 128;
    Context ctx;
    fa_tensor probe = fa_tensor_bshd(reinterpret_cast<void *>(256), FA_DTYPE_BF16, 1, s, 1, d);
    fa_params p;
    fa_params_init(&p);
    p.causal = 1;
    size_t workspace = 0;
    REQUIRE(fa_bwd_workspace_size(ctx.ctx, &probe, &probe, &probe, &p, &workspace) == FA_OK);
    // D and LSE rows, and the fp32 dQ accumulator of the default (atomic) path.
    CHECK(workspace <= static_cast<size_t>(s) * (2 + d) * sizeof(float) + 1024);
    WARN("backward workspace at s = 64k, d = 128, one head: " << workspace / (1 << 20) << " MiB");

    HostTensor q = fa_oracle::make_tensor(FA_DTYPE_BF16, {1, s, 1, d});
    fa_oracle::fill_normal(q, 77);
    HostTensor out = fa_oracle::make_tensor(FA_DTYPE_BF16, {1, s, 1, d});
    HostTensor lse = fa_oracle::make_tensor(FA_DTYPE_F32, {1, 1, s});
    HostTensor grad = make_like(q);
    fa_oracle::fill_normal(grad, 78);
    HostTensor dq = make_like(q), dk = make_like(q), dv = make_like(q);
    DeviceTensor dq_in(q), dout(out), dlse(lse), dgrad(grad), ddq(dq), ddk(dk), ddv(dv);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    size_t free_before = 0, free_after = 0, total = 0;
    cudaMemGetInfo(&free_before, &total);
    REQUIRE(fa_fwd(ctx.ctx, &dq_in.view, &dq_in.view, &dq_in.view, &p, &dout.view, &dlse.view, nullptr, 0) ==
            FA_OK);
    REQUIRE(fa_bwd(ctx.ctx, &dq_in.view, &dq_in.view, &dq_in.view, &dout.view, &dlse.view, &dgrad.view, &p,
                   &ddq.view, &ddk.view, &ddv.view, nullptr, 0) == FA_OK);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    cudaMemGetInfo(&free_after, &total);
    // Anything kept must be far below one s x s matrix (8 GiB of bf16 at 64k).
    size_t kept = free_before > free_after ? free_before - free_after : 0;
    WARN("device memory kept after forward + backward: " << kept / (1 << 20) << " MiB");
    CHECK(kept <= static_cast<size_t>(s) * d * 4 * 8 + (64u << 20));
    ddq.copy_back();
    ddk.copy_back();
    ddv.copy_back();
    CHECK(fa_oracle::all_elements_written(dq));
    CHECK(fa_oracle::all_elements_written(dk));
    CHECK(fa_oracle::all_elements_written(dv));
}
