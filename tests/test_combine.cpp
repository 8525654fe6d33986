// test_combine.cpp - fa_combine on the CPU: partial forwards over disjoint key ranges
// (empty ones included) combine into the forward over all keys, in f32, f16 and bf16,
// fixed-length and varlen; partials that saw no key (lse -inf or +inf) are not read; rows
// without any give 0 and -inf; a NaN lse gives NaN; bad arguments fail with their named
// status and write nothing.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "api/dtype.h"
#include "flashattn.h"

namespace {

struct cpu_context {
    fa_context *ctx = nullptr;
    cpu_context() { REQUIRE(fa_create(&ctx, FA_BACKEND_CPU, 0) == FA_OK); }
    ~cpu_context() { fa_destroy(ctx); }
};

// Host tensor storage of one dtype, held as raw 16- or 32-bit words.
struct buffer {
    fa_dtype dtype;
    std::vector<uint32_t> f32;
    std::vector<uint16_t> f16;
    buffer(fa_dtype dt, size_t n) : dtype(dt)
    {
        if (dt == FA_DTYPE_F32)
            f32.assign(n, 0);
        else
            f16.assign(n, 0);
    }
    void *data() { return dtype == FA_DTYPE_F32 ? (void *)f32.data() : (void *)f16.data(); }
    size_t size() const { return dtype == FA_DTYPE_F32 ? f32.size() : f16.size(); }
    float get(size_t i) const
    {
        if (dtype == FA_DTYPE_F32) return fa_bits_to_f32(f32[i]);
        return dtype == FA_DTYPE_F16 ? fa_f16_to_f32(f16[i]) : fa_bf16_to_f32(f16[i]);
    }
    void set(size_t i, float v)
    {
        if (dtype == FA_DTYPE_F32)
            f32[i] = fa_f32_to_bits(v);
        else
            f16[i] = dtype == FA_DTYPE_F16 ? fa_f32_to_f16(v) : fa_f32_to_bf16(v);
    }
    void fill(float v)
    {
        for (size_t i = 0; i < size(); i++) set(i, v);
    }
};

void randomize(buffer &b, std::mt19937 &rng)
{
    std::normal_distribution<float> dist(0.f, 1.f);
    for (size_t i = 0; i < b.size(); i++) b.set(i, dist(rng));
}

// Keys [lo, hi) of a [b, s_k, h_k, d] tensor as a view.
fa_tensor key_slice(fa_tensor t, int64_t lo, int64_t hi)
{
    t.data = (char *)t.data + lo * t.stride[1] * (t.dtype == FA_DTYPE_F32 ? 4 : 2);
    t.shape[1] = hi - lo;
    return t;
}

struct problem {
    int64_t b = 2, s_q = 37, h = 4, h_k = 2, d = 40, s_k = 150;
};

float tolerance(fa_dtype dt) { return dt == FA_DTYPE_F32 ? 2e-5f : dt == FA_DTYPE_F16 ? 4e-3f : 3e-2f; }

// The forward over all keys against the combine of forwards over the ranges of `cuts`.
void check_split(fa_dtype dt, const std::vector<int64_t> &cuts)
{
    cpu_context cx;
    problem pr;
    std::mt19937 rng(7);
    buffer q(dt, pr.b * pr.s_q * pr.h * pr.d), k(dt, pr.b * pr.s_k * pr.h_k * pr.d), v(dt, k.size());
    randomize(q, rng);
    randomize(k, rng);
    randomize(v, rng);
    fa_tensor tq = fa_tensor_bshd(q.data(), dt, pr.b, pr.s_q, pr.h, pr.d);
    fa_tensor tk = fa_tensor_bshd(k.data(), dt, pr.b, pr.s_k, pr.h_k, pr.d);
    fa_tensor tv = fa_tensor_bshd(v.data(), dt, pr.b, pr.s_k, pr.h_k, pr.d);
    fa_params params;
    fa_params_init(&params);

    buffer full(dt, q.size());
    std::vector<float> full_lse(pr.b * pr.h * pr.s_q);
    fa_tensor tfull = fa_tensor_bshd(full.data(), dt, pr.b, pr.s_q, pr.h, pr.d);
    fa_tensor tfull_lse = fa_tensor_lse(full_lse.data(), pr.b, pr.h, pr.s_q);
    REQUIRE(fa_fwd(cx.ctx, &tq, &tk, &tv, &params, &tfull, &tfull_lse, nullptr, 0) == FA_OK);

    const int n = static_cast<int>(cuts.size()) - 1;
    std::vector<buffer> outs(n, buffer(dt, q.size()));
    std::vector<std::vector<float>> lses(n, std::vector<float>(full_lse.size()));
    std::vector<fa_tensor> part_out(n), part_lse(n);
    for (int i = 0; i < n; i++) {
        fa_tensor ks = key_slice(tk, cuts[i], cuts[i + 1]), vs = key_slice(tv, cuts[i], cuts[i + 1]);
        part_out[i] = fa_tensor_bshd(outs[i].data(), dt, pr.b, pr.s_q, pr.h, pr.d);
        part_lse[i] = fa_tensor_lse(lses[i].data(), pr.b, pr.h, pr.s_q);
        REQUIRE(fa_fwd(cx.ctx, &tq, &ks, &vs, &params, &part_out[i], &part_lse[i], nullptr, 0) == FA_OK);
    }
    buffer out(dt, q.size());
    out.fill(NAN);
    std::vector<float> lse(full_lse.size(), NAN);
    fa_tensor tout = fa_tensor_bshd(out.data(), dt, pr.b, pr.s_q, pr.h, pr.d);
    fa_tensor tlse = fa_tensor_lse(lse.data(), pr.b, pr.h, pr.s_q);
    REQUIRE(fa_combine(cx.ctx, n, part_out.data(), part_lse.data(), &tout, &tlse) == FA_OK);
    float worst = 0.f, worst_lse = 0.f;
    for (size_t i = 0; i < out.size(); i++) worst = std::fmax(worst, std::fabs(out.get(i) - full.get(i)));
    for (size_t i = 0; i < lse.size(); i++) worst_lse = std::fmax(worst_lse, std::fabs(lse[i] - full_lse[i]));
    INFO("dtype " << fa_dtype_name(dt) << ", " << n << " partials");
    CHECK(worst <= tolerance(dt));
    CHECK(worst_lse <= 1e-5f * 8);
}

// n partials of one row (b = s_q = h = 1, d = 8) with the given LSEs and out values.
struct one_row {
    std::vector<std::vector<float>> outs;
    std::vector<float> lses;
    std::vector<fa_tensor> part_out, part_lse;
    std::vector<float> out = std::vector<float>(8, 123.f);
    float lse = 123.f;
    fa_status combine(fa_context *ctx)
    {
        part_out.clear();
        part_lse.clear();
        for (size_t i = 0; i < outs.size(); i++) {
            part_out.push_back(fa_tensor_bshd(outs[i].data(), FA_DTYPE_F32, 1, 1, 1, 8));
            part_lse.push_back(fa_tensor_lse(&lses[i], 1, 1, 1));
        }
        fa_tensor tout = fa_tensor_bshd(out.data(), FA_DTYPE_F32, 1, 1, 1, 8);
        fa_tensor tlse = fa_tensor_lse(&lse, 1, 1, 1);
        return fa_combine(ctx, static_cast<int>(outs.size()), part_out.data(), part_lse.data(), &tout, &tlse);
    }
};

} // namespace

TEST_CASE("fa_combine: partials over key ranges give the forward over all keys", "[combine]")
{
    for (fa_dtype dt : {FA_DTYPE_F32, FA_DTYPE_F16, FA_DTYPE_BF16}) {
        check_split(dt, {0, 150});               // one partial: itself
        check_split(dt, {0, 61, 150});           // two
        check_split(dt, {0, 0, 17, 17, 99, 150}); // with empty ranges (lse -inf)
    }
}

TEST_CASE("fa_combine: varlen rows", "[combine]")
{
    cpu_context cx;
    // Two partials of [total 5, h 2, d 8] with known LSEs: the combine is their weighted mean.
    std::vector<float> a(5 * 2 * 8), b(a.size()), out(a.size(), NAN);
    std::vector<float> la(2 * 5), lb(la.size()), lse(la.size(), NAN);
    for (size_t i = 0; i < a.size(); i++) {
        a[i] = static_cast<float>(i % 7);
        b[i] = -static_cast<float>(i % 5);
    }
    for (size_t i = 0; i < la.size(); i++) {
        la[i] = 0.25f * static_cast<float>(i);
        lb[i] = 1.0f - 0.5f * static_cast<float>(i);
    }
    fa_tensor parts[2] = {fa_tensor_thd(a.data(), FA_DTYPE_F32, 5, 2, 8), fa_tensor_thd(b.data(), FA_DTYPE_F32, 5, 2, 8)};
    fa_tensor lses[2] = {fa_tensor_lse_varlen(la.data(), 2, 5), fa_tensor_lse_varlen(lb.data(), 2, 5)};
    fa_tensor tout = fa_tensor_thd(out.data(), FA_DTYPE_F32, 5, 2, 8);
    fa_tensor tlse = fa_tensor_lse_varlen(lse.data(), 2, 5);
    REQUIRE(fa_combine(cx.ctx, 2, parts, lses, &tout, &tlse) == FA_OK);
    for (int row = 0; row < 5; row++)
        for (int h = 0; h < 2; h++) {
            const double l0 = la[h * 5 + row], l1 = lb[h * 5 + row];
            const double m = std::fmax(l0, l1), s = std::exp(l0 - m) + std::exp(l1 - m);
            CHECK(lse[h * 5 + row] == Approx(m + std::log(s)).epsilon(1e-6));
            for (int c = 0; c < 8; c++) {
                const size_t i = (row * 2 + h) * 8 + c;
                const double want = (std::exp(l0 - m) * a[i] + std::exp(l1 - m) * b[i]) / s;
                CHECK(out[i] == Approx(want).margin(1e-5));
            }
        }
}

TEST_CASE("fa_combine: partials without keys are not read; rows without any are 0 and -inf",
          "[combine]")
{
    cpu_context cx;
    one_row r;
    r.outs = {std::vector<float>(8, 2.5f), std::vector<float>(8, NAN), std::vector<float>(8, NAN)};
    r.lses = {0.75f, -INFINITY, INFINITY}; // +inf: FlashAttention-2's empty rows
    REQUIRE(r.combine(cx.ctx) == FA_OK);
    for (float x : r.out) CHECK(x == 2.5f);
    CHECK(r.lse == 0.75f);

    r.lses = {-INFINITY, -INFINITY, INFINITY};
    REQUIRE(r.combine(cx.ctx) == FA_OK);
    for (float x : r.out) CHECK(x == 0.f);
    CHECK(r.lse == -INFINITY);

    r.outs = {std::vector<float>(8, 1.f), std::vector<float>(8, 1.f)};
    r.lses = {0.f, NAN};
    REQUIRE(r.combine(cx.ctx) == FA_OK);
    CHECK(std::isnan(r.out[0]));
    CHECK(std::isnan(r.lse));
}

TEST_CASE("fa_combine: bad arguments fail with their status and write nothing", "[combine]")
{
    cpu_context cx;
    std::vector<float> a(2 * 3 * 4 * 8, 1.f), b(a.size(), 1.f), out(a.size(), 7.f);
    std::vector<float> la(2 * 4 * 3, 0.f), lb(la.size(), 0.f), lse(la.size(), 7.f);
    std::vector<uint16_t> half(a.size(), 0);
    fa_tensor parts[2] = {fa_tensor_bshd(a.data(), FA_DTYPE_F32, 2, 3, 4, 8),
                          fa_tensor_bshd(b.data(), FA_DTYPE_F32, 2, 3, 4, 8)};
    fa_tensor lses[2] = {fa_tensor_lse(la.data(), 2, 4, 3), fa_tensor_lse(lb.data(), 2, 4, 3)};
    fa_tensor tout = fa_tensor_bshd(out.data(), FA_DTYPE_F32, 2, 3, 4, 8);
    fa_tensor tlse = fa_tensor_lse(lse.data(), 2, 4, 3);
    auto untouched = [&] {
        for (float x : out)
            if (x != 7.f) return false;
        for (float x : lse)
            if (x != 7.f) return false;
        return true;
    };

    CHECK(fa_combine(cx.ctx, 0, parts, lses, &tout, &tlse) == FA_ERR_BAD_PARAM);
    CHECK(fa_combine(cx.ctx, FA_MAX_COMBINE_PARTIALS + 1, parts, lses, &tout, &tlse) == FA_ERR_BAD_PARAM);
    CHECK(fa_combine(cx.ctx, 2, nullptr, lses, &tout, &tlse) == FA_ERR_NULL_POINTER);
    CHECK(fa_combine(cx.ctx, 2, parts, lses, nullptr, &tlse) == FA_ERR_NULL_POINTER);
    CHECK(fa_combine(nullptr, 2, parts, lses, &tout, &tlse) == FA_ERR_NULL_POINTER);

    fa_tensor wrong[2] = {parts[0], fa_tensor_bshd(b.data(), FA_DTYPE_F32, 2, 3, 2, 8)};
    CHECK(fa_combine(cx.ctx, 2, wrong, lses, &tout, &tlse) == FA_ERR_SHAPE_MISMATCH);
    CHECK(std::string(fa_last_error(cx.ctx)).find("partial_out[1]") != std::string::npos);
    wrong[1] = fa_tensor_bshd(half.data(), FA_DTYPE_BF16, 2, 3, 4, 8);
    CHECK(fa_combine(cx.ctx, 2, wrong, lses, &tout, &tlse) == FA_ERR_BAD_DTYPE);
    fa_tensor wrong_lse[2] = {lses[0], fa_tensor_lse(lb.data(), 2, 4, 2)};
    CHECK(fa_combine(cx.ctx, 2, parts, wrong_lse, &tout, &tlse) == FA_ERR_SHAPE_MISMATCH);
    wrong_lse[1] = lses[1];
    wrong_lse[1].dtype = FA_DTYPE_F16;
    CHECK(fa_combine(cx.ctx, 2, parts, wrong_lse, &tout, &tlse) == FA_ERR_BAD_DTYPE);

    fa_tensor aliased = parts[1]; // out written over a partial
    CHECK(fa_combine(cx.ctx, 2, parts, lses, &aliased, &tlse) == FA_ERR_BAD_STRIDE);
    CHECK(std::string(fa_last_error(cx.ctx)).find("overlaps partial_out[1]") != std::string::npos);
    fa_tensor lse_over_out = fa_tensor_lse(out.data(), 2, 4, 3);
    CHECK(fa_combine(cx.ctx, 2, parts, lses, &tout, &lse_over_out) == FA_ERR_BAD_STRIDE);
    fa_tensor self_overlap = tout;
    self_overlap.stride[1] = 1;
    CHECK(fa_combine(cx.ctx, 2, parts, lses, &self_overlap, &tlse) == FA_ERR_BAD_STRIDE);
    CHECK(untouched());
    CHECK(std::all_of(b.begin(), b.end(), [](float x) { return x == 1.f; }));

    REQUIRE(fa_combine(cx.ctx, 2, parts, lses, &tout, nullptr) == FA_OK); // lse optional
    CHECK(out[0] == 1.f);
    CHECK(lse[0] == 7.f);
}

TEST_CASE("fa_combine: an empty problem is a valid call", "[combine]")
{
    cpu_context cx;
    fa_tensor part = fa_tensor_bshd(nullptr, FA_DTYPE_F32, 2, 0, 4, 8);
    fa_tensor plse = fa_tensor_lse(nullptr, 2, 4, 0);
    fa_tensor out = fa_tensor_bshd(nullptr, FA_DTYPE_F32, 2, 0, 4, 8);
    CHECK(fa_combine(cx.ctx, 1, &part, &plse, &out, nullptr) == FA_OK);
}
