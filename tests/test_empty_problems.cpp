// test_empty_problems.cpp - empty problems on the CPU backend are valid calls: no batch,
// no query rows or no key rows (fixed-length and varlen, NULL data exactly where a
// tensor has no elements). Calls with nothing to write return FA_OK and touch nothing;
// calls with rows on one side write what the semantics say (out 0 and LSE -inf without
// keys, zero gradients on the side that has rows). Bad arguments still fail.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "flashattn.h"

namespace {

const unsigned char kPoison = 0xA5;

// One operand's host buffer, poisoned; NULL data when `null_if_empty` and it has no rows.
struct Buffer {
    std::vector<float> data; // fp32 storage, wide enough for any dtype
    explicit Buffer(size_t elements) : data(elements + 1) { poison(); }
    void poison() { std::memset(data.data(), kPoison, data.size() * sizeof(float)); }
    bool untouched() const
    {
        const unsigned char *bytes = reinterpret_cast<const unsigned char *>(data.data());
        for (size_t n = 0; n < data.size() * sizeof(float); ++n)
            if (bytes[n] != kPoison)
                return false;
        return true;
    }
};

// q/out/dout/dq [b, s_q, h, d], k/v/dk/dv [b, s_k, h_k, d] (varlen: [total, h, d]), lse.
struct EmptyCase {
    fa_context *ctx = nullptr;
    fa_dtype dtype;
    int64_t b, s_q, s_k, h = 4, h_k = 2, d = 40;
    bool varlen = false;
    std::vector<int32_t> cu_q, cu_k;
    Buffer q, k, v, out, lse, dout, dq, dk, dv;
    fa_tensor tq, tk, tv, tout, tlse, tdout, tdq, tdk, tdv;
    fa_params params;

    EmptyCase(fa_dtype dt, int64_t batch, int64_t rows_q, int64_t rows_k)
        : dtype(dt), b(batch), s_q(rows_q), s_k(rows_k), q(size_q()), k(size_k()), v(size_k()),
          out(size_q()), lse(size_t(b * h * s_q)), dout(size_q()), dq(size_q()), dk(size_k()),
          dv(size_k())
    {
        REQUIRE(fa_create(&ctx, FA_BACKEND_CPU, 0) == FA_OK);
        fa_params_init(&params);
        fill_inputs();
        make_tensors();
    }
    ~EmptyCase() { fa_destroy(ctx); }

    size_t size_q() const { return size_t(b * s_q * h * d); }
    size_t size_k() const { return size_t(b * s_k * h_k * d); }

    void fill_inputs()
    {
        for (Buffer *buf : {&q, &k, &v, &dout})
            for (size_t i = 0; i < buf->data.size(); ++i)
                buf->data[i] = dtype == FA_DTYPE_F32 ? 0.25f : 0.0f; // 0 is valid in every dtype
        // A forward's output and LSE are the backward's inputs: finite values.
        for (size_t i = 0; i < lse.data.size(); ++i)
            lse.data[i] = 1.0f;
    }

    void make_tensors()
    {
        tq = fa_tensor_bshd(q.data.data(), dtype, b, s_q, h, d);
        tk = fa_tensor_bshd(k.data.data(), dtype, b, s_k, h_k, d);
        tv = fa_tensor_bshd(v.data.data(), dtype, b, s_k, h_k, d);
        tout = fa_tensor_bshd(out.data.data(), dtype, b, s_q, h, d);
        tlse = fa_tensor_lse(lse.data.data(), b, h, s_q);
        tdout = fa_tensor_bshd(dout.data.data(), dtype, b, s_q, h, d);
        tdq = fa_tensor_bshd(dq.data.data(), dtype, b, s_q, h, d);
        tdk = fa_tensor_bshd(dk.data.data(), dtype, b, s_k, h_k, d);
        tdv = fa_tensor_bshd(dv.data.data(), dtype, b, s_k, h_k, d);
    }

    // The same rows as varlen [total, h, d]: `batch` sequences of lengths q_len / k_len
    // (each all-or-nothing: the totals are b * s_q and b * s_k).
    void make_varlen(int batch)
    {
        varlen = true;
        int64_t total_q = b * s_q, total_k = b * s_k;
        cu_q.assign(size_t(batch) + 1, 0);
        cu_k.assign(size_t(batch) + 1, 0);
        if (batch > 0) {
            cu_q.back() = int32_t(total_q);
            cu_k.back() = int32_t(total_k);
        }
        tq = fa_tensor_thd(q.data.data(), dtype, total_q, h, d);
        tk = fa_tensor_thd(k.data.data(), dtype, total_k, h_k, d);
        tv = fa_tensor_thd(v.data.data(), dtype, total_k, h_k, d);
        tout = fa_tensor_thd(out.data.data(), dtype, total_q, h, d);
        tlse = fa_tensor_lse_varlen(lse.data.data(), h, total_q);
        tdout = fa_tensor_thd(dout.data.data(), dtype, total_q, h, d);
        tdq = fa_tensor_thd(dq.data.data(), dtype, total_q, h, d);
        tdk = fa_tensor_thd(dk.data.data(), dtype, total_k, h_k, d);
        tdv = fa_tensor_thd(dv.data.data(), dtype, total_k, h_k, d);
        params.cu_seqlens_q = cu_q.data();
        params.cu_seqlens_k = cu_k.data();
        params.varlen_batch = batch;
        params.max_seqlen_q = int(total_q);
        params.max_seqlen_k = int(total_k);
    }

    // NULL data for every tensor without elements, as PyTorch passes them.
    void null_empty_data()
    {
        for (fa_tensor *t : {&tq, &tk, &tv, &tout, &tlse, &tdout, &tdq, &tdk, &tdv}) {
            bool empty = false;
            for (int i = 0; i < t->ndim; ++i)
                empty = empty || t->shape[i] == 0;
            if (empty)
                t->data = nullptr;
        }
    }

    fa_status fwd() { return fa_fwd(ctx, &tq, &tk, &tv, &params, &tout, &tlse, nullptr, 0); }
    fa_status bwd()
    {
        return fa_bwd(ctx, &tq, &tk, &tv, &tout, &tlse, &tdout, &params, &tdq, &tdk, &tdv,
                      nullptr, 0);
    }

    // Element i of a buffer holding this case's dtype, as float.
    float element(const Buffer &buf, size_t i) const
    {
        if (dtype == FA_DTYPE_F32)
            return buf.data[i];
        uint16_t bits;
        std::memcpy(&bits, reinterpret_cast<const char *>(buf.data.data()) + 2 * i, 2);
        if (dtype == FA_DTYPE_BF16) {
            uint32_t wide = uint32_t(bits) << 16;
            float x;
            std::memcpy(&x, &wide, 4);
            return x;
        }
        return bits == 0 ? 0.0f : std::nanf(""); // fp16: only +0 is expected here
    }

    bool all_zero(const Buffer &buf, size_t elements) const
    {
        for (size_t i = 0; i < elements; ++i)
            if (element(buf, i) != 0.0f)
                return false;
        return true;
    }
};

const fa_dtype kDtypes[] = {FA_DTYPE_F32, FA_DTYPE_F16, FA_DTYPE_BF16};

// Every entry point succeeds, the plans name no kernel, the workspaces are 0 bytes and
// nothing is written.
void expect_no_op(EmptyCase &c)
{
    INFO("last error: " << fa_last_error(c.ctx));
    size_t bytes = 12345;
    REQUIRE(fa_fwd_workspace_size(c.ctx, &c.tq, &c.tk, &c.tv, &c.params, &bytes) == FA_OK);
    CHECK(bytes == 0);
    fa_plan plan;
    REQUIRE(fa_plan_fwd(c.ctx, &c.tq, &c.tk, &c.tv, &c.params, &plan) == FA_OK);
    CHECK(std::string(plan.kernel) == "none");
    CHECK(std::string(plan.reason).find("empty problem") != std::string::npos);
    CHECK(plan.workspace_bytes == 0);
    REQUIRE(c.fwd() == FA_OK);
    CHECK(std::string(fa_last_error(c.ctx)).empty());
    CHECK(c.out.untouched());
}

} // namespace

TEST_CASE("empty: batch 0 is a no-op everywhere, NULL data allowed", "[empty]")
{
    for (fa_dtype dtype : kDtypes) {
        EmptyCase c(dtype, 0, 17, 33);
        c.lse.poison();
        c.null_empty_data();
        CHECK(c.tq.data == nullptr);
        expect_no_op(c);
        size_t bytes = 12345;
        REQUIRE(fa_bwd_workspace_size(c.ctx, &c.tq, &c.tk, &c.tv, &c.params, &bytes) == FA_OK);
        CHECK(bytes == 0);
        fa_plan plan;
        REQUIRE(fa_plan_bwd(c.ctx, &c.tq, &c.tk, &c.tv, &c.params, &plan) == FA_OK);
        CHECK(std::string(plan.kernel) == "none");
        REQUIRE(c.bwd() == FA_OK);
        CHECK(c.lse.untouched());
        CHECK(c.dq.untouched());
        CHECK(c.dk.untouched());
        CHECK(c.dv.untouched());
    }
}

TEST_CASE("empty: batch 0 with non-NULL data writes nothing", "[empty]")
{
    EmptyCase c(FA_DTYPE_BF16, 0, 5, 9);
    c.params.causal = 1;
    c.params.softcap = 30.0f;
    REQUIRE(c.fwd() == FA_OK);
    REQUIRE(c.bwd() == FA_OK);
    CHECK(c.out.untouched());
    CHECK(c.dq.untouched());
    CHECK(c.dk.untouched());
    CHECK(c.dv.untouched());
}

TEST_CASE("empty: no keys gives out 0 and LSE -inf; the backward gives dq 0", "[empty]")
{
    for (fa_dtype dtype : kDtypes)
        for (int varlen = 0; varlen < 2; ++varlen)
            for (int causal = 0; causal < 2; ++causal) {
                INFO("dtype " << fa_dtype_name(dtype) << " varlen " << varlen << " causal " << causal);
                EmptyCase c(dtype, 3, 21, 0);
                if (varlen)
                    c.make_varlen(3);
                c.null_empty_data();
                c.params.causal = causal;
                c.params.softcap = causal ? 10.0f : 0.0f;
                std::vector<float> slopes(size_t(c.b * c.h), 0.5f);
                if (!causal)
                    c.params.alibi_slopes = slopes.data();
                c.lse.poison();
                INFO("last error: " << fa_last_error(c.ctx));
                REQUIRE(c.fwd() == FA_OK);
                CHECK(c.all_zero(c.out, c.size_q()));
                for (size_t i = 0; i < size_t(c.b * c.h * c.s_q); ++i)
                    CHECK(c.lse.data[i] == -INFINITY);
                REQUIRE(c.bwd() == FA_OK);
                CHECK(c.all_zero(c.dq, c.size_q()));
            }
}

TEST_CASE("empty: no queries is a forward no-op; the backward gives dk, dv 0", "[empty]")
{
    for (fa_dtype dtype : kDtypes)
        for (int varlen = 0; varlen < 2; ++varlen) {
            INFO("dtype " << fa_dtype_name(dtype) << " varlen " << varlen);
            EmptyCase c(dtype, 2, 0, 19);
            if (varlen)
                c.make_varlen(2);
            c.null_empty_data();
            c.params.window_left = 4;
            expect_no_op(c);
            fa_plan plan;
            REQUIRE(fa_plan_bwd(c.ctx, &c.tq, &c.tk, &c.tv, &c.params, &plan) == FA_OK);
            CHECK(std::string(plan.kernel) != "none"); // the zero gradients are written
            REQUIRE(c.bwd() == FA_OK);
            CHECK(c.all_zero(c.dk, c.size_k()));
            CHECK(c.all_zero(c.dv, c.size_k()));
        }
}

TEST_CASE("empty: varlen with no sequences (varlen_batch 0, cu_seqlens [0])", "[empty]")
{
    EmptyCase c(FA_DTYPE_F16, 0, 8, 8);
    c.make_varlen(0);
    c.null_empty_data();
    expect_no_op(c);
    REQUIRE(c.bwd() == FA_OK);
}

TEST_CASE("empty: varlen with no query and no key rows", "[empty]")
{
    EmptyCase c(FA_DTYPE_F32, 4, 0, 0);
    c.make_varlen(4);
    c.null_empty_data();
    c.cu_q = {0, 0, 0, 0, 0};
    c.cu_k = {0, 0, 0, 0, 0};
    std::vector<int32_t> used(4, 0);
    c.params.seqused_k = used.data();
    expect_no_op(c);
    fa_plan plan;
    REQUIRE(fa_plan_bwd(c.ctx, &c.tq, &c.tk, &c.tv, &c.params, &plan) == FA_OK);
    CHECK(std::string(plan.kernel) == "none");
    REQUIRE(c.bwd() == FA_OK);
}

// Empty problems are checked like any other: only the sizes may be 0.
TEST_CASE("empty: bad arguments of an empty problem still fail", "[empty][errors]")
{
    EmptyCase c(FA_DTYPE_F32, 0, 4, 4);
    c.null_empty_data();
    fa_tensor bad = c.tk;
    bad.shape[3] = 36; // head dims differ
    CHECK(fa_fwd(c.ctx, &c.tq, &bad, &c.tv, &c.params, &c.tout, &c.tlse, nullptr, 0) ==
          FA_ERR_SHAPE_MISMATCH);
    CHECK_FALSE(std::string(fa_last_error(c.ctx)).empty());
    bad = c.tq;
    bad.shape[2] = 0; // heads may not be 0
    CHECK(fa_fwd(c.ctx, &bad, &c.tk, &c.tv, &c.params, &c.tout, &c.tlse, nullptr, 0) ==
          FA_ERR_BAD_SIZE);
    c.params.softcap = -1.0f;
    CHECK(c.fwd() == FA_ERR_BAD_PARAM);
    CHECK(c.bwd() == FA_ERR_BAD_PARAM);
    c.params.softcap = 0.0f;
    CHECK(fa_fwd(c.ctx, &c.tq, &c.tk, &c.tv, &c.params, nullptr, &c.tlse, nullptr, 0) ==
          FA_ERR_NULL_POINTER);
    // A tensor with elements still needs its data.
    EmptyCase d(FA_DTYPE_F32, 2, 3, 0);
    d.null_empty_data();
    d.tq.data = nullptr;
    CHECK(d.fwd() == FA_ERR_NULL_POINTER);
    CHECK(std::string(fa_last_error(d.ctx)).find("q data is NULL") != std::string::npos);
    CHECK(d.out.untouched());
}
