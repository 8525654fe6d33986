// test_api_errors.cpp - the public API's argument checking on the CPU backend: every bad
// input gets its own named status, a message that names the offending thing, and leaves
// the output buffers untouched, in the forward and the backward alike. Also the success
// paths of the API's small calls (names, version, plan, device info).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "flashattn.h"

namespace {

const unsigned char kPoison = 0xA5;

// Sets a tile override (FLASHATTN_FORCE_TILE unless named) for one scope and always
// unsets it afterwards.
struct ForcedTile {
    const char *name;
    explicit ForcedTile(const char *text, const char *variable = "FLASHATTN_FORCE_TILE")
        : name(variable)
    {
        setenv(name, text, 1);
    }
    ~ForcedTile() { unsetenv(name); }
};

// A valid fp32 GQA problem on the CPU backend (b=2, s_q=16, s_k=24, h=4, h_k=2, d=32) with
// outputs filled with a poison byte, and the backward's tensors: dout random, dq, dk, dv
// poisoned (out and lse are the backward's inputs). Buffers have headroom so a check
// that wrongly lets a bad shape through cannot read past them.
struct ApiFixture {
    static const int64_t b = 2, s_q = 16, s_k = 24, h = 4, h_k = 2, d = 32;
    static const size_t headroom = 8;

    fa_context *ctx = nullptr;
    std::vector<float> q_buf, k_buf, v_buf, out_buf, lse_buf;
    std::vector<float> out_before, lse_before;
    std::vector<float> dout_buf, dq_buf, dk_buf, dv_buf;
    fa_tensor q, k, v, out, lse;
    fa_tensor dout, dq, dk, dv;
    fa_params params;

    ApiFixture()
        : q_buf(b * s_q * h * d * headroom), k_buf(b * s_k * h_k * d * headroom),
          v_buf(k_buf.size()), out_buf(q_buf.size()), lse_buf(b * h * s_q * headroom),
          dout_buf(q_buf.size()), dq_buf(q_buf.size()), dk_buf(k_buf.size()),
          dv_buf(k_buf.size())
    {
        REQUIRE(fa_create(&ctx, FA_BACKEND_CPU, 0) == FA_OK);
        std::mt19937 rng(7);
        std::normal_distribution<float> normal(0.0f, 1.0f);
        for (std::vector<float> *buf : {&q_buf, &k_buf, &v_buf, &dout_buf})
            for (float &x : *buf)
                x = normal(rng);
        for (std::vector<float> *buf : {&out_buf, &lse_buf, &dq_buf, &dk_buf, &dv_buf})
            std::memset(buf->data(), kPoison, buf->size() * sizeof(float));
        out_before = out_buf;
        lse_before = lse_buf;
        q = fa_tensor_bshd(q_buf.data(), FA_DTYPE_F32, b, s_q, h, d);
        k = fa_tensor_bshd(k_buf.data(), FA_DTYPE_F32, b, s_k, h_k, d);
        v = fa_tensor_bshd(v_buf.data(), FA_DTYPE_F32, b, s_k, h_k, d);
        out = fa_tensor_bshd(out_buf.data(), FA_DTYPE_F32, b, s_q, h, d);
        lse = fa_tensor_lse(lse_buf.data(), b, h, s_q);
        dout = fa_tensor_bshd(dout_buf.data(), FA_DTYPE_F32, b, s_q, h, d);
        dq = fa_tensor_bshd(dq_buf.data(), FA_DTYPE_F32, b, s_q, h, d);
        dk = fa_tensor_bshd(dk_buf.data(), FA_DTYPE_F32, b, s_k, h_k, d);
        dv = fa_tensor_bshd(dv_buf.data(), FA_DTYPE_F32, b, s_k, h_k, d);
        fa_params_init(&params);
    }
    ~ApiFixture() { fa_destroy(ctx); }

    // Reshape q, k, v, out, lse and the gradients as varlen [total, h, d] with these
    // cu_seqlens.
    void make_varlen(const int32_t *cu_q, const int32_t *cu_k, int batch, int max_q, int max_k)
    {
        q = fa_tensor_thd(q_buf.data(), FA_DTYPE_F32, b * s_q, h, d);
        k = fa_tensor_thd(k_buf.data(), FA_DTYPE_F32, b * s_k, h_k, d);
        v = fa_tensor_thd(v_buf.data(), FA_DTYPE_F32, b * s_k, h_k, d);
        out = fa_tensor_thd(out_buf.data(), FA_DTYPE_F32, b * s_q, h, d);
        lse = fa_tensor_lse_varlen(lse_buf.data(), h, b * s_q);
        dout = fa_tensor_thd(dout_buf.data(), FA_DTYPE_F32, b * s_q, h, d);
        dq = fa_tensor_thd(dq_buf.data(), FA_DTYPE_F32, b * s_q, h, d);
        dk = fa_tensor_thd(dk_buf.data(), FA_DTYPE_F32, b * s_k, h_k, d);
        dv = fa_tensor_thd(dv_buf.data(), FA_DTYPE_F32, b * s_k, h_k, d);
        params.cu_seqlens_q = cu_q;
        params.cu_seqlens_k = cu_k;
        params.varlen_batch = batch;
        params.max_seqlen_q = max_q;
        params.max_seqlen_k = max_k;
    }

    fa_status fwd() { return fa_fwd(ctx, &q, &k, &v, &params, &out, &lse, nullptr, 0); }

    fa_status bwd(void *workspace = nullptr, size_t workspace_bytes = 0)
    {
        return fa_bwd(ctx, &q, &k, &v, &out, &lse, &dout, &params, &dq, &dk, &dv, workspace,
                      workspace_bytes);
    }

    bool grads_untouched() const
    {
        for (const std::vector<float> *buf : {&dq_buf, &dk_buf, &dv_buf}) {
            const unsigned char *bytes = reinterpret_cast<const unsigned char *>(buf->data());
            for (size_t n = 0; n < buf->size() * sizeof(float); ++n)
                if (bytes[n] != kPoison)
                    return false;
        }
        return true;
    }

    bool outputs_untouched() const
    {
        return std::memcmp(out_buf.data(), out_before.data(), out_buf.size() * sizeof(float)) == 0 &&
               std::memcmp(lse_buf.data(), lse_before.data(), lse_buf.size() * sizeof(float)) == 0;
    }

    // The forward fails with `want`, says so mentioning `mention`, and writes nothing.
    void expect_fwd_error(fa_status want, const char *mention)
    {
        fa_status got = fwd();
        INFO("fa_fwd: " << fa_status_string(got) << ": " << fa_last_error(ctx));
        CHECK(fa_status_string(got) == std::string(fa_status_string(want)));
        std::string message = fa_last_error(ctx);
        CHECK_FALSE(message.empty());
        CHECK(message.find(mention) != std::string::npos);
        CHECK(outputs_untouched());
    }

    // As expect_fwd_error, and the queries that share the checks agree with the forward.
    void expect_forward_error_everywhere(fa_status want, const char *mention)
    {
        expect_fwd_error(want, mention);
        size_t bytes = 12345;
        fa_status ws = fa_fwd_workspace_size(ctx, &q, &k, &v, &params, &bytes);
        CHECK(fa_status_string(ws) == std::string(fa_status_string(want)));
        CHECK(bytes == 12345u);
        fa_plan plan;
        std::memset(&plan, 0, sizeof plan);
        fa_status pl = fa_plan_fwd(ctx, &q, &k, &v, &params, &plan);
        CHECK(fa_status_string(pl) == std::string(fa_status_string(want)));
        CHECK(std::string(fa_last_error(ctx)).find(mention) != std::string::npos);
    }

    // The backward fails with `want`, says so mentioning `mention`, and writes nothing.
    void expect_bwd_error(fa_status want, const char *mention)
    {
        fa_status got = bwd();
        INFO("fa_bwd: " << fa_status_string(got) << ": " << fa_last_error(ctx));
        CHECK(fa_status_string(got) == std::string(fa_status_string(want)));
        CHECK(std::string(fa_last_error(ctx)).find(mention) != std::string::npos);
        CHECK(grads_untouched());
        CHECK(outputs_untouched());
    }

    // As expect_bwd_error, and the backward workspace query agrees.
    void expect_backward_error_everywhere(fa_status want, const char *mention)
    {
        expect_bwd_error(want, mention);
        size_t bytes = 12345;
        fa_status ws = fa_bwd_workspace_size(ctx, &q, &k, &v, &params, &bytes);
        INFO("fa_bwd_workspace_size: " << fa_status_string(ws) << ": " << fa_last_error(ctx));
        CHECK(fa_status_string(ws) == std::string(fa_status_string(want)));
        CHECK(std::string(fa_last_error(ctx)).find(mention) != std::string::npos);
        CHECK(bytes == 12345u);
    }

    // A bad q, k, v or params: every entry point refuses it the same way.
    void expect_error_everywhere(fa_status want, const char *mention)
    {
        expect_forward_error_everywhere(want, mention);
        expect_backward_error_everywhere(want, mention);
    }
};

} // namespace

// ---- null pointers ------------------------------------------------------------------

TEST_CASE("api: NULL context", "[api][errors]")
{
    ApiFixture f;
    CHECK(fa_fwd(nullptr, &f.q, &f.k, &f.v, &f.params, &f.out, &f.lse, nullptr, 0) ==
          FA_ERR_NULL_POINTER);
    CHECK(std::string(fa_last_error(nullptr)).find("context") != std::string::npos);
    CHECK(f.outputs_untouched());
    size_t bytes = 0;
    CHECK(fa_fwd_workspace_size(nullptr, &f.q, &f.k, &f.v, &f.params, &bytes) ==
          FA_ERR_NULL_POINTER);
    CHECK(fa_set_num_threads(nullptr, 1) == FA_ERR_NULL_POINTER);
    CHECK(fa_set_stream(nullptr, nullptr) == FA_ERR_NULL_POINTER);
    CHECK(fa_device_error(nullptr, 0) == FA_ERR_NULL_POINTER);
}

// The CPU backend checks its host-memory indices before each call: it never has a
// device-check record to report.
TEST_CASE_METHOD(ApiFixture, "api: fa_device_error on the CPU backend", "[api][errors][device_check]")
{
    CHECK(fa_device_error(ctx, 0) == FA_OK);
    CHECK(fa_device_error(ctx, 1) == FA_OK);
    CHECK(std::string(fa_last_error(ctx)).empty());
    CHECK(fa_device_error(ctx, 2) == FA_ERR_BAD_PARAM);
    CHECK(std::string(fa_last_error(ctx)) == "wait = 2, must be 0 or 1");
    CHECK(fa_device_error(ctx, -1) == FA_ERR_BAD_PARAM);
    CHECK(std::string(fa_status_string(FA_ERR_DEVICE_CHECK)) == "FA_ERR_DEVICE_CHECK");
}

TEST_CASE_METHOD(ApiFixture, "api: NULL q tensor", "[api][errors]")
{
    CHECK(fa_fwd(ctx, nullptr, &k, &v, &params, &out, &lse, nullptr, 0) == FA_ERR_NULL_POINTER);
    CHECK(std::string(fa_last_error(ctx)).find("q is NULL") != std::string::npos);
    CHECK(outputs_untouched());
}

TEST_CASE_METHOD(ApiFixture, "api: NULL k tensor", "[api][errors]")
{
    CHECK(fa_fwd(ctx, &q, nullptr, &v, &params, &out, &lse, nullptr, 0) == FA_ERR_NULL_POINTER);
    CHECK(std::string(fa_last_error(ctx)).find("k is NULL") != std::string::npos);
    CHECK(outputs_untouched());
}

TEST_CASE_METHOD(ApiFixture, "api: NULL v tensor", "[api][errors]")
{
    CHECK(fa_fwd(ctx, &q, &k, nullptr, &params, &out, &lse, nullptr, 0) == FA_ERR_NULL_POINTER);
    CHECK(std::string(fa_last_error(ctx)).find("v is NULL") != std::string::npos);
    CHECK(outputs_untouched());
}

TEST_CASE_METHOD(ApiFixture, "api: NULL out tensor", "[api][errors]")
{
    CHECK(fa_fwd(ctx, &q, &k, &v, &params, nullptr, &lse, nullptr, 0) == FA_ERR_NULL_POINTER);
    CHECK(std::string(fa_last_error(ctx)).find("out is NULL") != std::string::npos);
    CHECK(outputs_untouched());
}

TEST_CASE_METHOD(ApiFixture, "api: NULL params", "[api][errors]")
{
    CHECK(fa_fwd(ctx, &q, &k, &v, nullptr, &out, &lse, nullptr, 0) == FA_ERR_NULL_POINTER);
    CHECK(std::string(fa_last_error(ctx)).find("params") != std::string::npos);
    CHECK(outputs_untouched());
}

TEST_CASE_METHOD(ApiFixture, "api: NULL q data", "[api][errors]")
{
    q.data = nullptr;
    expect_error_everywhere(FA_ERR_NULL_POINTER, "q data");
}

TEST_CASE_METHOD(ApiFixture, "api: NULL out data", "[api][errors]")
{
    out.data = nullptr;
    expect_fwd_error(FA_ERR_NULL_POINTER, "out data");
}

TEST_CASE_METHOD(ApiFixture, "api: NULL query result pointers", "[api][errors]")
{
    CHECK(fa_fwd_workspace_size(ctx, &q, &k, &v, &params, nullptr) == FA_ERR_NULL_POINTER);
    CHECK(std::string(fa_last_error(ctx)).find("bytes") != std::string::npos);
    CHECK(fa_plan_fwd(ctx, &q, &k, &v, &params, nullptr) == FA_ERR_NULL_POINTER);
    CHECK(std::string(fa_last_error(ctx)).find("plan") != std::string::npos);
    CHECK(fa_get_device_info(ctx, nullptr) == FA_ERR_NULL_POINTER);
    CHECK(std::string(fa_last_error(ctx)).find("info") != std::string::npos);
}

// ---- rank ----------------------------------------------------------------------------

TEST_CASE_METHOD(ApiFixture, "api: q of rank 3 without cu_seqlens", "[api][errors]")
{
    q.ndim = 3;
    expect_error_everywhere(FA_ERR_BAD_RANK, "q has 3 dims");
}

TEST_CASE_METHOD(ApiFixture, "api: bshd q with cu_seqlens (varlen wants rank 3)", "[api][errors]")
{
    static const int32_t cu_q[] = {0, 16, 32}, cu_k[] = {0, 24, 48};
    make_varlen(cu_q, cu_k, 2, 16, 24);
    q = fa_tensor_bshd(q_buf.data(), FA_DTYPE_F32, b, s_q, h, d);
    expect_error_everywhere(FA_ERR_BAD_RANK, "q has 4 dims");
}

TEST_CASE_METHOD(ApiFixture, "api: lse of the wrong rank", "[api][errors]")
{
    lse.ndim = 2;
    expect_fwd_error(FA_ERR_BAD_RANK, "lse has 2 dims");
}

// ---- shape mismatches ----------------------------------------------------------------

TEST_CASE_METHOD(ApiFixture, "api: k batch differs from q", "[api][errors]")
{
    k.shape[0] = 1;
    v.shape[0] = 1;
    expect_error_everywhere(FA_ERR_SHAPE_MISMATCH, "k batch 1 != q batch 2");
}

TEST_CASE_METHOD(ApiFixture, "api: v seqlen differs from k", "[api][errors]")
{
    v.shape[1] = 20;
    expect_error_everywhere(FA_ERR_SHAPE_MISMATCH, "v seqlen 20 != k seqlen 24");
}

TEST_CASE_METHOD(ApiFixture, "api: v heads differ from k", "[api][errors]")
{
    v.shape[2] = 1;
    expect_error_everywhere(FA_ERR_SHAPE_MISMATCH, "v heads 1 != k heads 2");
}

TEST_CASE_METHOD(ApiFixture, "api: k head_dim differs from q", "[api][errors]")
{
    k = fa_tensor_bshd(k_buf.data(), FA_DTYPE_F32, b, s_k, h_k, 24);
    v = fa_tensor_bshd(v_buf.data(), FA_DTYPE_F32, b, s_k, h_k, 24);
    expect_error_everywhere(FA_ERR_SHAPE_MISMATCH, "k head_dim 24 != q head_dim 32");
}

TEST_CASE_METHOD(ApiFixture, "api: out seqlen differs from q", "[api][errors]")
{
    out = fa_tensor_bshd(out_buf.data(), FA_DTYPE_F32, b, s_q + 1, h, d);
    expect_fwd_error(FA_ERR_SHAPE_MISMATCH, "out seqlen 17 != q seqlen 16");
}

TEST_CASE_METHOD(ApiFixture, "api: out heads differ from q", "[api][errors]")
{
    out = fa_tensor_bshd(out_buf.data(), FA_DTYPE_F32, b, s_q, h_k, d);
    expect_fwd_error(FA_ERR_SHAPE_MISMATCH, "out heads 2 != q heads 4");
}

TEST_CASE_METHOD(ApiFixture, "api: out batch differs from q", "[api][errors]")
{
    out = fa_tensor_bshd(out_buf.data(), FA_DTYPE_F32, b + 1, s_q, h, d);
    expect_fwd_error(FA_ERR_SHAPE_MISMATCH, "out batch 3 != q batch 2");
}

TEST_CASE_METHOD(ApiFixture, "api: out head_dim differs from q", "[api][errors]")
{
    out = fa_tensor_bshd(out_buf.data(), FA_DTYPE_F32, b, s_q, h, d + 8);
    expect_fwd_error(FA_ERR_SHAPE_MISMATCH, "out head_dim 40 != q head_dim 32");
}

TEST_CASE_METHOD(ApiFixture, "api: out dtype differs from q", "[api][errors]")
{
    out.dtype = FA_DTYPE_BF16;
    expect_fwd_error(FA_ERR_BAD_DTYPE, "out dtype bf16 != q dtype f32");
}

TEST_CASE_METHOD(ApiFixture, "api: lse shape differs from [b, h, s_q]", "[api][errors]")
{
    lse = fa_tensor_lse(lse_buf.data(), b, h, s_q + 2);
    expect_fwd_error(FA_ERR_SHAPE_MISMATCH, "lse seqlen 18 != q seqlen 16");
}

TEST_CASE_METHOD(ApiFixture, "api: lse not fp32", "[api][errors]")
{
    lse.dtype = FA_DTYPE_F16;
    expect_fwd_error(FA_ERR_BAD_DTYPE, "lse dtype f16 must be f32");
}

// ---- head dim and GQA ----------------------------------------------------------------

TEST_CASE_METHOD(ApiFixture, "api: head_dim not a multiple of 8", "[api][errors]")
{
    q = fa_tensor_bshd(q_buf.data(), FA_DTYPE_F32, b, s_q, h, 12);
    k = fa_tensor_bshd(k_buf.data(), FA_DTYPE_F32, b, s_k, h_k, 12);
    v = fa_tensor_bshd(v_buf.data(), FA_DTYPE_F32, b, s_k, h_k, 12);
    out = fa_tensor_bshd(out_buf.data(), FA_DTYPE_F32, b, s_q, h, 12);
    expect_error_everywhere(FA_ERR_BAD_HEAD_DIM, "head_dim 12");
}

TEST_CASE_METHOD(ApiFixture, "api: head_dim above 256", "[api][errors]")
{
    q = fa_tensor_bshd(q_buf.data(), FA_DTYPE_F32, 1, 2, 1, 264);
    k = fa_tensor_bshd(k_buf.data(), FA_DTYPE_F32, 1, 2, 1, 264);
    v = fa_tensor_bshd(v_buf.data(), FA_DTYPE_F32, 1, 2, 1, 264);
    out = fa_tensor_bshd(out_buf.data(), FA_DTYPE_F32, 1, 2, 1, 264);
    lse = fa_tensor_lse(lse_buf.data(), 1, 1, 2);
    expect_error_everywhere(FA_ERR_BAD_HEAD_DIM, "head_dim 264");
}

TEST_CASE_METHOD(ApiFixture, "api: heads not a multiple of kv heads", "[api][errors]")
{
    k = fa_tensor_bshd(k_buf.data(), FA_DTYPE_F32, b, s_k, 3, d);
    v = fa_tensor_bshd(v_buf.data(), FA_DTYPE_F32, b, s_k, 3, d);
    expect_error_everywhere(FA_ERR_BAD_GQA, "q heads 4 is not a multiple of k heads 3");
}

// ---- strides and sizes ---------------------------------------------------------------

TEST_CASE_METHOD(ApiFixture, "api: non-contiguous last dim", "[api][errors]")
{
    k.stride[3] = 2;
    expect_error_everywhere(FA_ERR_BAD_STRIDE, "k head_dim stride is 2");
}

TEST_CASE_METHOD(ApiFixture, "api: negative stride", "[api][errors]")
{
    v.stride[1] = -v.stride[1];
    expect_error_everywhere(FA_ERR_BAD_STRIDE, "v stride[1]");
}

TEST_CASE_METHOD(ApiFixture, "api: negative lse stride", "[api][errors]")
{
    lse.stride[2] = -1;
    expect_fwd_error(FA_ERR_BAD_STRIDE, "lse stride[2]");
}

// Outputs whose elements share memory would make the workers' writes race: refused.
// Inputs may overlap (a stride-0 broadcast is fine).
TEST_CASE_METHOD(ApiFixture, "api: outputs that overlap themselves", "[api][errors]")
{
    out.stride[0] = 0;
    expect_fwd_error(FA_ERR_BAD_STRIDE, "out overlaps itself: stride[0] = 0");
    out = fa_tensor_bshd(out_buf.data(), FA_DTYPE_F32, b, s_q, h, d);
    lse.stride[1] = 1; // heads interleaved with rows
    expect_fwd_error(FA_ERR_BAD_STRIDE, "lse overlaps itself");
    lse = fa_tensor_lse(lse_buf.data(), b, h, s_q);
    REQUIRE(fwd() == FA_OK); // out and lse, the backward's inputs, stay as written now
    out_before = out_buf;
    lse_before = lse_buf;
    dk.stride[2] = d / 2; // kv heads half a row apart
    expect_bwd_error(FA_ERR_BAD_STRIDE, "dk overlaps itself: stride[2] = 16");
    dk = fa_tensor_bshd(dk_buf.data(), FA_DTYPE_F32, b, s_k, h_k, d);
    dq.stride[1] = dq.stride[0];
    expect_bwd_error(FA_ERR_BAD_STRIDE, "dq overlaps itself");
    dq = fa_tensor_bshd(dq_buf.data(), FA_DTYPE_F32, b, s_q, h, d);
    for (fa_tensor *t : {&q, &k, &v})
        t->stride[0] = 0; // broadcast inputs are fine
    CHECK(fwd() == FA_OK);
    CHECK(bwd() == FA_OK);
}

TEST_CASE_METHOD(ApiFixture, "api: negative size", "[api][errors]")
{
    q.shape[1] = -16;
    expect_error_everywhere(FA_ERR_BAD_SIZE, "q seqlen -16");
}

TEST_CASE_METHOD(ApiFixture, "api: zero size", "[api][errors]")
{
    k.shape[2] = 0;
    expect_error_everywhere(FA_ERR_BAD_SIZE, "k heads 0");
}

TEST_CASE_METHOD(ApiFixture, "api: seqlen beyond int32", "[api][errors]")
{
    q.shape[1] = int64_t(1) << 31;
    expect_error_everywhere(FA_ERR_BAD_SIZE, "q seqlen 2147483648");
}

TEST_CASE_METHOD(ApiFixture, "api: element offsets overflowing int64", "[api][errors]")
{
    q.shape[0] = 3;
    q.stride[0] = std::numeric_limits<int64_t>::max() / 2;
    expect_error_everywhere(FA_ERR_BAD_SIZE, "q element offsets overflow");
}

// The constructors' stride products overflow int64 for [2^31-1, 2^31-1, 1, 8] (the
// unused total) and [4, 2^31-1, 2^31-1, 8] (the batch stride): they saturate instead of
// overflowing, and every call refuses such a tensor.
TEST_CASE_METHOD(ApiFixture, "api: constructor strides overflowing int64", "[api][errors]")
{
    const int64_t big = std::numeric_limits<int32_t>::max();
    q = fa_tensor_bshd(q_buf.data(), FA_DTYPE_F32, big, big, 1, 8);
    CHECK(q.stride[0] == big * 8);
    expect_error_everywhere(FA_ERR_BAD_SIZE, "q element offsets overflow");
    q = fa_tensor_bshd(q_buf.data(), FA_DTYPE_F32, 4, big, big, 8);
    CHECK(q.stride[1] == big * 8);
    CHECK(q.stride[0] == std::numeric_limits<int64_t>::max());
    expect_error_everywhere(FA_ERR_BAD_SIZE, "q element offsets overflow");
    fa_tensor t = fa_tensor_thd(q_buf.data(), FA_DTYPE_F16, 4, std::numeric_limits<int64_t>::max(), 8);
    CHECK(t.stride[0] == std::numeric_limits<int64_t>::max());
    t = fa_tensor_lse(lse_buf.data(), 2, -3, 4);
    CHECK(t.stride[0] == std::numeric_limits<int64_t>::max());
}

// One row of k with row stride 2^62: its only element is at offset 0, but the empty
// sequences after it start one row past the end, at 2^62 elements = 2^63 bytes (fuzzer).
TEST_CASE_METHOD(ApiFixture, "api: one past the end overflowing int64", "[api][errors]")
{
    static const int32_t cu_q[] = {0, 16, 32}, cu_k[] = {0, 1, 1};
    make_varlen(cu_q, cu_k, 2, 16, 1);
    k.shape[0] = v.shape[0] = 1;
    k.stride[0] = int64_t(1) << 62;
    expect_forward_error_everywhere(FA_ERR_BAD_SIZE, "k element offsets overflow int64");
}

// batch 2^31-1 (stride 0, so the buffers are small): cu_seqlens-sized counts must not
// overflow int. Only the queries run: a forward would compute 2^31 batches.
TEST_CASE_METHOD(ApiFixture, "api: largest batch is planned without overflow", "[api]")
{
    const int64_t big = std::numeric_limits<int32_t>::max();
    for (fa_tensor *t : {&q, &k, &v}) {
        t->shape[0] = big;
        t->stride[0] = 0;
    }
    fa_plan plan;
    REQUIRE(fa_plan_fwd(ctx, &q, &k, &v, &params, &plan) == FA_OK);
    size_t bytes = 0;
    CHECK(fa_fwd_workspace_size(ctx, &q, &k, &v, &params, &bytes) == FA_OK);
    CHECK(fa_plan_bwd(ctx, &q, &k, &v, &params, &plan) == FA_OK);
}

// Slopes at alibi_batch_stride 2^62 over 3 batches lie past int64's reach.
TEST_CASE_METHOD(ApiFixture, "api: alibi slope offsets overflowing int64", "[api][errors]")
{
    std::vector<float> slopes(b * h, 0.5f);
    params.alibi_slopes = slopes.data();
    params.alibi_batch_stride = int64_t(1) << 62;
    expect_error_everywhere(FA_ERR_BAD_SIZE, "alibi slope offsets overflow int64");
    q.shape[0] = k.shape[0] = v.shape[0] = 1; // one batch reads no stride
    out.shape[0] = dout.shape[0] = dq.shape[0] = dk.shape[0] = dv.shape[0] = lse.shape[0] = 1;
    CHECK(fwd() == FA_OK);
}

// ---- dtypes --------------------------------------------------------------------------

TEST_CASE_METHOD(ApiFixture, "api: unknown dtype", "[api][errors]")
{
    q.dtype = static_cast<fa_dtype>(9);
    expect_error_everywhere(FA_ERR_BAD_DTYPE, "q dtype 9");
}

TEST_CASE_METHOD(ApiFixture, "api: k dtype differs from q", "[api][errors]")
{
    k.dtype = FA_DTYPE_F16;
    expect_error_everywhere(FA_ERR_BAD_DTYPE, "k dtype f16 != q dtype f32");
}

TEST_CASE_METHOD(ApiFixture, "api: fp32 is accepted on the CPU backend", "[api]")
{
    REQUIRE(fwd() == FA_OK);
    CHECK(std::string(fa_last_error(ctx)).empty());
    CHECK_FALSE(outputs_untouched());
    for (float x : std::vector<float>(out_buf.begin(), out_buf.begin() + b * s_q * h * d))
        CHECK(std::isfinite(x));
}

// ---- params --------------------------------------------------------------------------

TEST_CASE_METHOD(ApiFixture, "api: negative softcap", "[api][errors]")
{
    params.softcap = -1.0f;
    expect_error_everywhere(FA_ERR_BAD_PARAM, "softcap");
}

TEST_CASE_METHOD(ApiFixture, "api: non-finite softcap", "[api][errors]")
{
    params.softcap = std::numeric_limits<float>::quiet_NaN();
    expect_error_everywhere(FA_ERR_BAD_PARAM, "softcap");
}

// Finite values whose fp32 transform constants are not (found by the fuzzer: softcap
// 1e-45 gave rows that see keys out 0 and LSE -inf, FLT_MAX gave NaN, scale FLT_MAX -inf).
TEST_CASE_METHOD(ApiFixture, "api: softcap and scale outside fp32's reach", "[api][errors]")
{
    const float max = std::numeric_limits<float>::max();
    params.softcap = 1e-45f;
    expect_error_everywhere(FA_ERR_BAD_PARAM, "softcap 1.4013e-45 with softmax_scale");
    params.softcap = max;
    expect_error_everywhere(FA_ERR_BAD_PARAM, "leaves fp32's range");
    params.softcap = 0.0f;
    params.softmax_scale = max;
    expect_error_everywhere(FA_ERR_BAD_PARAM, "softmax_scale 3.40282e+38 overflows fp32");
    // Near the limits, still valid and finite.
    params.softmax_scale = 0.0f;
    params.softcap = 1e-30f;
    REQUIRE(fwd() == FA_OK);
    for (float x : out_buf)
        if (!std::isfinite(x))
            FAIL("non-finite output with softcap 1e-30");
    params.softcap = 1e37f;
    CHECK(fwd() == FA_OK);
}

TEST_CASE_METHOD(ApiFixture, "api: negative softmax_scale", "[api][errors]")
{
    params.softmax_scale = -0.5f;
    expect_error_everywhere(FA_ERR_BAD_PARAM, "softmax_scale");
}

TEST_CASE_METHOD(ApiFixture, "api: infinite softmax_scale", "[api][errors]")
{
    params.softmax_scale = std::numeric_limits<float>::infinity();
    expect_error_everywhere(FA_ERR_BAD_PARAM, "softmax_scale");
}

TEST_CASE_METHOD(ApiFixture, "api: window_left below -1", "[api][errors]")
{
    params.window_left = -2;
    expect_error_everywhere(FA_ERR_BAD_PARAM, "window_left -2");
}

TEST_CASE_METHOD(ApiFixture, "api: window_right below -1", "[api][errors]")
{
    params.window_right = -5;
    expect_error_everywhere(FA_ERR_BAD_PARAM, "window_right -5");
}

TEST_CASE_METHOD(ApiFixture, "api: negative num_splits", "[api][errors]")
{
    params.num_splits = -1;
    expect_error_everywhere(FA_ERR_BAD_PARAM, "num_splits");
}

TEST_CASE_METHOD(ApiFixture, "api: reserved params not zero", "[api][errors]")
{
    params.reserved[3] = 1;
    expect_error_everywhere(FA_ERR_BAD_PARAM, "reserved[3]");
}

TEST_CASE_METHOD(ApiFixture, "api: paged KV needs a block-table width", "[api][errors]")
{
    static const int32_t table[2] = {0, 1};
    params.block_table = table;
    params.page_block_size = 16;
    expect_error_everywhere(FA_ERR_BAD_PARAM, "block_table_width 0");
}

TEST_CASE_METHOD(ApiFixture, "api: paged fields without a block table", "[api][errors]")
{
    params.block_table_width = 2;
    expect_error_everywhere(FA_ERR_BAD_PARAM, "without block_table");
}

// ---- varlen --------------------------------------------------------------------------

TEST_CASE_METHOD(ApiFixture, "api: only cu_seqlens_q set", "[api][errors]")
{
    static const int32_t cu_q[] = {0, 16, 32};
    params.cu_seqlens_q = cu_q;
    params.varlen_batch = 2;
    expect_error_everywhere(FA_ERR_BAD_PARAM, "cu_seqlens_k");
}

TEST_CASE_METHOD(ApiFixture, "api: varlen_batch negative", "[api][errors]")
{
    static const int32_t cu_q[] = {0, 16, 32}, cu_k[] = {0, 24, 48};
    make_varlen(cu_q, cu_k, -1, 16, 24);
    expect_error_everywhere(FA_ERR_BAD_PARAM, "varlen_batch -1");
}

// An empty batch is valid, but cu_seqlens [0] must still end at the tensor's rows.
TEST_CASE_METHOD(ApiFixture, "api: varlen_batch 0 with rows in the tensors", "[api][errors]")
{
    static const int32_t cu_q[] = {0, 16, 32}, cu_k[] = {0, 24, 48};
    make_varlen(cu_q, cu_k, 0, 16, 24);
    expect_error_everywhere(FA_ERR_BAD_SEQLENS, "cu_seqlens_q[0] = 0 != the tensor's total rows 32");
}

TEST_CASE_METHOD(ApiFixture, "api: cu_seqlens not starting at 0", "[api][errors]")
{
    static const int32_t cu_q[] = {1, 16, 32}, cu_k[] = {0, 24, 48};
    make_varlen(cu_q, cu_k, 2, 16, 24);
    expect_error_everywhere(FA_ERR_BAD_SEQLENS, "cu_seqlens_q[0] = 1");
}

TEST_CASE_METHOD(ApiFixture, "api: cu_seqlens decreasing", "[api][errors]")
{
    static const int32_t cu_q[] = {0, 10, 16, 32}, cu_k[] = {0, 30, 20, 48};
    make_varlen(cu_q, cu_k, 3, 16, 30);
    expect_error_everywhere(FA_ERR_BAD_SEQLENS, "cu_seqlens_k decreases");
}

TEST_CASE_METHOD(ApiFixture, "api: cu_seqlens exceeding the total rows", "[api][errors]")
{
    static const int32_t cu_q[] = {0, 16, 33}, cu_k[] = {0, 24, 48};
    make_varlen(cu_q, cu_k, 2, 17, 24);
    expect_error_everywhere(FA_ERR_BAD_SEQLENS, "cu_seqlens_q[2] = 33");
}

TEST_CASE_METHOD(ApiFixture, "api: cu_seqlens longer than max_seqlen", "[api][errors]")
{
    static const int32_t cu_q[] = {0, 10, 32}, cu_k[] = {0, 24, 48};
    make_varlen(cu_q, cu_k, 2, 16, 24);
    expect_error_everywhere(FA_ERR_BAD_SEQLENS, "max_seqlen_q 16");
}

TEST_CASE_METHOD(ApiFixture, "api: varlen lse shape differs from [h, total_q]", "[api][errors]")
{
    static const int32_t cu_q[] = {0, 10, 32}, cu_k[] = {0, 30, 48};
    make_varlen(cu_q, cu_k, 2, 22, 30);
    lse = fa_tensor_lse_varlen(lse_buf.data(), h, b * s_q - 1);
    expect_fwd_error(FA_ERR_SHAPE_MISMATCH, "lse total rows 31 != q total rows 32");
}

TEST_CASE_METHOD(ApiFixture, "api: valid varlen call runs", "[api]")
{
    static const int32_t cu_q[] = {0, 10, 32}, cu_k[] = {0, 30, 48};
    make_varlen(cu_q, cu_k, 2, 22, 30);
    REQUIRE(fwd() == FA_OK);
    CHECK(std::string(fa_last_error(ctx)).empty());
}

TEST_CASE_METHOD(ApiFixture, "api: seqused_k negative", "[api][errors]")
{
    static const int32_t used[] = {-1, 3};
    params.seqused_k = used;
    expect_error_everywhere(FA_ERR_BAD_SEQLENS, "seqused_k[0] = -1");
}

TEST_CASE_METHOD(ApiFixture, "api: seqused_k beyond seqlen_k", "[api][errors]")
{
    static const int32_t used[] = {3, 25};
    params.seqused_k = used;
    expect_error_everywhere(FA_ERR_BAD_SEQLENS, "seqused_k[1] = 25");
}

// ---- backends ------------------------------------------------------------------------

TEST_CASE("api: unknown backend", "[api][errors]")
{
    fa_context *ctx = reinterpret_cast<fa_context *>(1);
    CHECK(fa_create(&ctx, static_cast<fa_backend>(42), 0) == FA_ERR_BAD_BACKEND);
    CHECK(ctx == nullptr);
    CHECK(std::string(fa_create_error()).find("42") != std::string::npos);
}

TEST_CASE("api: negative device index", "[api][errors]")
{
    fa_context *ctx = reinterpret_cast<fa_context *>(1);
    CHECK(fa_create(&ctx, FA_BACKEND_CPU, -1) == FA_ERR_BAD_BACKEND);
    CHECK(ctx == nullptr);
    CHECK(std::string(fa_create_error()).find("-1") != std::string::npos);
}

TEST_CASE("api: CPU device index other than 0", "[api][errors]")
{
    fa_context *ctx = nullptr;
    CHECK(fa_create(&ctx, FA_BACKEND_CPU, 1) == FA_ERR_BAD_BACKEND);
    CHECK(ctx == nullptr);
    CHECK(std::string(fa_create_error()).find("device 1") != std::string::npos);
}

TEST_CASE("api: NULL context out-pointer for fa_create", "[api][errors]")
{
    CHECK(fa_create(nullptr, FA_BACKEND_CPU, 0) == FA_ERR_NULL_POINTER);
    CHECK(std::string(fa_create_error()).find("NULL") != std::string::npos);
}

TEST_CASE("api: a GPU backend that is not built or has no device says so", "[api][errors]")
{
    const fa_backend gpus[] = {FA_BACKEND_CUDA, FA_BACKEND_HIP};
    for (fa_backend backend : gpus) {
        fa_context *ctx = nullptr;
        fa_status st = fa_create(&ctx, backend, 0);
        INFO(fa_backend_name(backend) << ": " << fa_status_string(st) << ": " << fa_create_error());
        if (st == FA_OK) {
            fa_destroy(ctx);
            continue;
        }
        CHECK(ctx == nullptr);
        CHECK_FALSE(std::string(fa_create_error()).empty());
        if (st == FA_ERR_UNSUPPORTED)
            CHECK(std::string(fa_create_error()).find("built without") != std::string::npos);
        else
            CHECK(st == FA_ERR_NO_DEVICE);
    }
}

TEST_CASE("api: AUTO backend always gives a context", "[api]")
{
    fa_context *ctx = nullptr;
    REQUIRE(fa_create(&ctx, FA_BACKEND_AUTO, 0) == FA_OK);
    CHECK(fa_context_backend(ctx) != FA_BACKEND_AUTO);
    CHECK(std::string(fa_create_error()).empty());
    fa_destroy(ctx);
}

TEST_CASE_METHOD(ApiFixture, "api: CPU rejects a non-NULL stream", "[api][errors]")
{
    int not_a_stream = 0;
    CHECK(fa_set_stream(ctx, &not_a_stream) != FA_OK);
    CHECK(std::string(fa_last_error(ctx)).find("stream") != std::string::npos);
    CHECK(fa_set_stream(ctx, nullptr) == FA_OK);
}

TEST_CASE_METHOD(ApiFixture, "api: negative thread count", "[api][errors]")
{
    CHECK(fa_set_num_threads(ctx, -2) == FA_ERR_BAD_PARAM);
    CHECK(std::string(fa_last_error(ctx)).find("num_threads -2") != std::string::npos);
    CHECK(fa_set_num_threads(ctx, 2) == FA_OK);
    CHECK(std::string(fa_last_error(ctx)).empty());
}

// ---- FLASHATTN_FORCE_TILE ------------------------------------------------------------

TEST_CASE_METHOD(ApiFixture, "api: forced tile with a missing number", "[api][errors]")
{
    ForcedTile force("12x");
    expect_forward_error_everywhere(FA_ERR_BAD_TILE_OVERRIDE, "FLASHATTN_FORCE_TILE");
}

TEST_CASE_METHOD(ApiFixture, "api: forced tile that is not numbers", "[api][errors]")
{
    ForcedTile force("axb");
    expect_forward_error_everywhere(FA_ERR_BAD_TILE_OVERRIDE, "FLASHATTN_FORCE_TILE");
}

TEST_CASE_METHOD(ApiFixture, "api: forced tile of zero rows", "[api][errors]")
{
    ForcedTile force("0x64");
    expect_forward_error_everywhere(FA_ERR_BAD_TILE_OVERRIDE, "FLASHATTN_FORCE_TILE");
}

TEST_CASE_METHOD(ApiFixture, "api: forced tile that names no config", "[api][errors]")
{
    ForcedTile force("7x9");
    expect_forward_error_everywhere(FA_ERR_BAD_TILE_OVERRIDE, "7x9");
}

// ---- workspace and backward ----------------------------------------------------------

TEST_CASE_METHOD(ApiFixture, "api: workspace smaller than the query", "[api][errors]")
{
    size_t needed = 0;
    REQUIRE(fa_fwd_workspace_size(ctx, &q, &k, &v, &params, &needed) == FA_OK);
    std::vector<unsigned char> workspace(needed + 1);
    // Any caller workspace of fewer bytes than needed is refused; 0 bytes is always fewer
    // unless nothing is needed, in which case the call must succeed.
    size_t given = needed > 0 ? needed - 1 : 0;
    fa_status st = fa_fwd(ctx, &q, &k, &v, &params, &out, &lse, workspace.data(), given);
    if (needed == 0) {
        CHECK(st == FA_OK);
        return;
    }
    CHECK(st == FA_ERR_WORKSPACE_TOO_SMALL);
    CHECK(std::string(fa_last_error(ctx)).find("workspace") != std::string::npos);
    CHECK(outputs_untouched());
    CHECK(fa_fwd(ctx, &q, &k, &v, &params, &out, &lse, workspace.data(), needed) == FA_OK);
}

// ---- backward ------------------------------------------------------------------------

TEST_CASE_METHOD(ApiFixture, "api: backward runs on the CPU", "[api][bwd]")
{
    REQUIRE(fwd() == FA_OK);
    REQUIRE(bwd() == FA_OK);
    CHECK(std::string(fa_last_error(ctx)).empty());
    size_t not_finite = 0;
    for (const std::vector<float> *buf : {&dq_buf, &dk_buf, &dv_buf}) {
        size_t used = buf == &dq_buf ? size_t(b * s_q * h * d) : size_t(b * s_k * h_k * d);
        for (size_t n = 0; n < used; ++n)
            not_finite += !std::isfinite((*buf)[n]);
    }
    CHECK(not_finite == 0);
    size_t bytes = 0;
    REQUIRE(fa_bwd_workspace_size(ctx, &q, &k, &v, &params, &bytes) == FA_OK);
    CHECK(bytes > 0);
}

TEST_CASE_METHOD(ApiFixture, "api: valid varlen backward runs", "[api][bwd]")
{
    static const int32_t cu_q[] = {0, 10, 32}, cu_k[] = {0, 30, 48};
    make_varlen(cu_q, cu_k, 2, 22, 30);
    REQUIRE(fwd() == FA_OK);
    REQUIRE(bwd() == FA_OK);
    CHECK(std::string(fa_last_error(ctx)).empty());
}

TEST_CASE("api: backward with a NULL context", "[api][errors]")
{
    ApiFixture f;
    CHECK(fa_bwd(nullptr, &f.q, &f.k, &f.v, &f.out, &f.lse, &f.dout, &f.params, &f.dq, &f.dk,
                 &f.dv, nullptr, 0) == FA_ERR_NULL_POINTER);
    size_t bytes = 0;
    CHECK(fa_bwd_workspace_size(nullptr, &f.q, &f.k, &f.v, &f.params, &bytes) ==
          FA_ERR_NULL_POINTER);
    CHECK(f.grads_untouched());
}

TEST_CASE_METHOD(ApiFixture, "api: backward NULL tensors", "[api][errors]")
{
    const char *names[] = {"out", "lse", "dout", "dq", "dk", "dv"};
    for (int n = 0; n < 6; ++n) {
        const fa_tensor *in[3] = {&out, &lse, &dout};
        fa_tensor *grad[3] = {&dq, &dk, &dv};
        if (n < 3)
            in[n] = nullptr;
        else
            grad[n - 3] = nullptr;
        fa_status st = fa_bwd(ctx, &q, &k, &v, in[0], in[1], in[2], &params, grad[0], grad[1],
                              grad[2], nullptr, 0);
        INFO(names[n] << ": " << fa_last_error(ctx));
        CHECK(st == FA_ERR_NULL_POINTER);
        CHECK(std::string(fa_last_error(ctx)).find(std::string(names[n]) + " is NULL") !=
              std::string::npos);
    }
    CHECK(grads_untouched());
    CHECK(outputs_untouched());
}

TEST_CASE_METHOD(ApiFixture, "api: backward NULL gradient data", "[api][errors]")
{
    dq.data = nullptr;
    expect_bwd_error(FA_ERR_NULL_POINTER, "dq data is NULL");
}

TEST_CASE_METHOD(ApiFixture, "api: backward workspace query with NULL bytes", "[api][errors]")
{
    CHECK(fa_bwd_workspace_size(ctx, &q, &k, &v, &params, nullptr) == FA_ERR_NULL_POINTER);
    CHECK(std::string(fa_last_error(ctx)).find("bytes") != std::string::npos);
}

TEST_CASE_METHOD(ApiFixture, "api: dout of the wrong rank", "[api][errors]")
{
    dout.ndim = 3;
    expect_bwd_error(FA_ERR_BAD_RANK, "dout has 3 dims");
}

TEST_CASE_METHOD(ApiFixture, "api: dout seqlen differs from q", "[api][errors]")
{
    dout = fa_tensor_bshd(dout_buf.data(), FA_DTYPE_F32, b, s_q - 1, h, d);
    expect_bwd_error(FA_ERR_SHAPE_MISMATCH, "dout seqlen 15 != q seqlen 16");
}

TEST_CASE_METHOD(ApiFixture, "api: dq batch differs from q", "[api][errors]")
{
    dq = fa_tensor_bshd(dq_buf.data(), FA_DTYPE_F32, 1, s_q, h, d);
    expect_bwd_error(FA_ERR_SHAPE_MISMATCH, "dq batch 1 != q batch 2");
}

TEST_CASE_METHOD(ApiFixture, "api: dk with q's heads instead of k's", "[api][errors]")
{
    dk = fa_tensor_bshd(dk_buf.data(), FA_DTYPE_F32, b, s_k, h, d);
    expect_bwd_error(FA_ERR_SHAPE_MISMATCH, "dk heads 4 != k heads 2");
}

TEST_CASE_METHOD(ApiFixture, "api: dk seqlen differs from k", "[api][errors]")
{
    dk = fa_tensor_bshd(dk_buf.data(), FA_DTYPE_F32, b, s_q, h_k, d);
    expect_bwd_error(FA_ERR_SHAPE_MISMATCH, "dk seqlen 16 != k seqlen 24");
}

TEST_CASE_METHOD(ApiFixture, "api: dv head_dim differs from k", "[api][errors]")
{
    dv = fa_tensor_bshd(dv_buf.data(), FA_DTYPE_F32, b, s_k, h_k, d - 8);
    expect_bwd_error(FA_ERR_SHAPE_MISMATCH, "dv head_dim 24 != k head_dim 32");
}

TEST_CASE_METHOD(ApiFixture, "api: varlen dq total rows differ from q", "[api][errors]")
{
    static const int32_t cu_q[] = {0, 10, 32}, cu_k[] = {0, 30, 48};
    make_varlen(cu_q, cu_k, 2, 22, 30);
    dq = fa_tensor_thd(dq_buf.data(), FA_DTYPE_F32, b * s_q - 2, h, d);
    expect_bwd_error(FA_ERR_SHAPE_MISMATCH, "dq seqlen 30 != q seqlen 32");
}

TEST_CASE_METHOD(ApiFixture, "api: gradient dtype differs from q", "[api][errors]")
{
    SECTION("dq")
    {
        dq.dtype = FA_DTYPE_BF16;
        expect_bwd_error(FA_ERR_BAD_DTYPE, "dq dtype bf16 != q dtype f32");
    }
    SECTION("dv")
    {
        dv.dtype = FA_DTYPE_F16;
        expect_bwd_error(FA_ERR_BAD_DTYPE, "dv dtype f16 != k dtype f32");
    }
    SECTION("dout")
    {
        dout.dtype = FA_DTYPE_BF16;
        expect_bwd_error(FA_ERR_BAD_DTYPE, "dout dtype bf16 != q dtype f32");
    }
}

TEST_CASE_METHOD(ApiFixture, "api: gradient strides", "[api][errors]")
{
    SECTION("dk last dim not contiguous")
    {
        dk.stride[3] = 2;
        expect_bwd_error(FA_ERR_BAD_STRIDE, "dk head_dim stride is 2");
    }
    SECTION("dv negative row stride")
    {
        dv.stride[1] = -dv.stride[1];
        expect_bwd_error(FA_ERR_BAD_STRIDE, "dv stride[1]");
    }
}

TEST_CASE_METHOD(ApiFixture, "api: backward inputs out and lse are checked", "[api][errors]")
{
    SECTION("out heads")
    {
        out = fa_tensor_bshd(out_buf.data(), FA_DTYPE_F32, b, s_q, h_k, d);
        expect_bwd_error(FA_ERR_SHAPE_MISMATCH, "out heads 2 != q heads 4");
    }
    SECTION("lse shape")
    {
        lse = fa_tensor_lse(lse_buf.data(), b, h, s_q + 2);
        expect_bwd_error(FA_ERR_SHAPE_MISMATCH, "lse seqlen 18 != q seqlen 16");
    }
    SECTION("lse dtype")
    {
        lse.dtype = FA_DTYPE_F16;
        expect_bwd_error(FA_ERR_BAD_DTYPE, "lse dtype f16 must be f32");
    }
}

TEST_CASE_METHOD(ApiFixture, "api: backward workspace smaller than the query", "[api][errors]")
{
    size_t needed = 0;
    REQUIRE(fa_bwd_workspace_size(ctx, &q, &k, &v, &params, &needed) == FA_OK);
    REQUIRE(needed > 0);
    std::vector<unsigned char> workspace(needed);
    CHECK(bwd(workspace.data(), needed - 1) == FA_ERR_WORKSPACE_TOO_SMALL);
    CHECK(std::string(fa_last_error(ctx)).find("fa_bwd_workspace_size") != std::string::npos);
    CHECK(grads_untouched());
    CHECK(bwd(workspace.data(), needed) == FA_OK);
}

TEST_CASE_METHOD(ApiFixture, "api: a workspace that is not 16-byte aligned is refused",
                 "[api][errors]")
{
    size_t needed = 0;
    REQUIRE(fa_bwd_workspace_size(ctx, &q, &k, &v, &params, &needed) == FA_OK);
    REQUIRE(needed > 0);
    std::vector<unsigned char> workspace(needed + 16);
    unsigned char *aligned = workspace.data() + (16 - reinterpret_cast<uintptr_t>(workspace.data()) % 16) % 16;
    CHECK(bwd(aligned + 4, needed) == FA_ERR_UNSUPPORTED);
    CHECK(std::string(fa_last_error(ctx)).find("16-byte aligned") != std::string::npos);
    CHECK(grads_untouched());
    CHECK(bwd(aligned, needed) == FA_OK);
}

TEST_CASE_METHOD(ApiFixture, "api: backward tiles are forced by their own variable", "[api]")
{
    SECTION("a forward override does not touch the backward")
    {
        ForcedTile force("7x9");
        CHECK(bwd() == FA_OK);
    }
    SECTION("a backward override that names no config")
    {
        ForcedTile force("7x9", "FLASHATTN_FORCE_BWD_TILE");
        expect_backward_error_everywhere(FA_ERR_BAD_TILE_OVERRIDE, "FLASHATTN_FORCE_BWD_TILE");
        CHECK(fwd() == FA_OK);
    }
    SECTION("a backward override that names a config")
    {
        ForcedTile force("64x64", "FLASHATTN_FORCE_BWD_TILE");
        CHECK(bwd() == FA_OK);
    }
}

// ---- success paths -------------------------------------------------------------------

TEST_CASE("api: every status has its own name", "[api]")
{
    std::vector<std::string> names;
    for (int s = 0; s < FA_STATUS_COUNT; ++s) {
        std::string name = fa_status_string(static_cast<fa_status>(s));
        CHECK(name.rfind("FA_", 0) == 0);
        CHECK(name != "FA_STATUS_UNKNOWN");
        for (const std::string &seen : names)
            CHECK(seen != name);
        names.push_back(name);
    }
    CHECK(std::string(fa_status_string(FA_OK)) == "FA_OK");
    CHECK(std::string(fa_status_string(FA_ERR_BAD_HEAD_DIM)) == "FA_ERR_BAD_HEAD_DIM");
    CHECK(std::string(fa_status_string(FA_STATUS_COUNT)) == "FA_STATUS_UNKNOWN");
    CHECK(std::string(fa_status_string(static_cast<fa_status>(-3))) == "FA_STATUS_UNKNOWN");
}

TEST_CASE("api: backend and dtype names", "[api]")
{
    CHECK(std::string(fa_backend_name(FA_BACKEND_AUTO)) == "auto");
    CHECK(std::string(fa_backend_name(FA_BACKEND_CPU)) == "cpu");
    CHECK(std::string(fa_backend_name(FA_BACKEND_CUDA)) == "cuda");
    CHECK(std::string(fa_backend_name(FA_BACKEND_HIP)) == "hip");
    CHECK(std::string(fa_dtype_name(FA_DTYPE_F32)) == "f32");
    CHECK(std::string(fa_dtype_name(FA_DTYPE_F16)) == "f16");
    CHECK(std::string(fa_dtype_name(FA_DTYPE_BF16)) == "bf16");
    CHECK(std::string(fa_dtype_name(static_cast<fa_dtype>(77))) == "unknown");
}

TEST_CASE("api: version macros", "[api]")
{
    CHECK(FLASHATTN_VERSION_MAJOR == 0);
    CHECK(FLASHATTN_VERSION_MINOR == 1);
    CHECK(FLASHATTN_VERSION == FLASHATTN_VERSION_MAJOR * 10000 + FLASHATTN_VERSION_MINOR * 100 +
                                   FLASHATTN_VERSION_PATCH);
    CHECK(FA_MAX_HEAD_DIM == 256);
}

TEST_CASE("api: params and tensor constructors", "[api]")
{
    fa_params p;
    std::memset(&p, 0x5C, sizeof p);
    fa_params_init(&p);
    CHECK(p.softmax_scale == 0.0f);
    CHECK(p.causal == 0);
    CHECK(p.window_left == -1);
    CHECK(p.window_right == -1);
    CHECK(p.cu_seqlens_q == nullptr);
    CHECK(p.block_table == nullptr);
    for (int r : p.reserved)
        CHECK(r == 0);
    float x = 0.0f;
    fa_tensor t = fa_tensor_bshd(&x, FA_DTYPE_BF16, 2, 3, 4, 8);
    CHECK(t.ndim == 4);
    CHECK(t.stride[0] == 96);
    CHECK(t.stride[1] == 32);
    CHECK(t.stride[2] == 8);
    CHECK(t.stride[3] == 1);
    fa_tensor l = fa_tensor_lse_varlen(&x, 4, 10);
    CHECK(l.ndim == 2);
    CHECK(l.dtype == FA_DTYPE_F32);
    CHECK(l.stride[0] == 10);
    CHECK(l.stride[1] == 1);
}

TEST_CASE_METHOD(ApiFixture, "api: plan on the CPU names a config and a reason", "[api]")
{
    fa_plan plan;
    std::memset(&plan, 0, sizeof plan);
    REQUIRE(fa_plan_fwd(ctx, &q, &k, &v, &params, &plan) == FA_OK);
    CHECK(plan.backend == FA_BACKEND_CPU);
    CHECK(std::string(plan.arch) == "cpu");
    CHECK_FALSE(std::string(plan.kernel).empty());
    CHECK_FALSE(std::string(plan.reason).empty());
    CHECK(plan.head_dim_instance >= int(d));
    CHECK(plan.tile_m > 0);
    CHECK(plan.tile_n > 0);
    CHECK(plan.threads > 0);
    CHECK(plan.num_splits >= 1);
    size_t bytes = 0;
    REQUIRE(fa_fwd_workspace_size(ctx, &q, &k, &v, &params, &bytes) == FA_OK);
    CHECK(plan.workspace_bytes == bytes);
    CHECK(std::string(fa_last_error(ctx)).empty());
}

TEST_CASE_METHOD(ApiFixture, "api: backward plan on the CPU matches what fa_bwd runs", "[api][backward]")
{
    fa_plan plan;
    std::memset(&plan, 0, sizeof plan);
    REQUIRE(fa_plan_bwd(ctx, &q, &k, &v, &params, &plan) == FA_OK);
    CHECK(plan.backend == FA_BACKEND_CPU);
    CHECK(std::string(plan.kernel).find("fa_cpu_bwd_") == 0);
    CHECK_FALSE(std::string(plan.reason).empty());
    CHECK(plan.head_dim_instance >= int(d));
    CHECK(plan.num_splits == 1);
    size_t bytes = 0;
    REQUIRE(fa_bwd_workspace_size(ctx, &q, &k, &v, &params, &bytes) == FA_OK);
    CHECK(plan.workspace_bytes == bytes);
    // The forward's plan names a forward config: the two selections are separate.
    fa_plan fwd_plan;
    REQUIRE(fa_plan_fwd(ctx, &q, &k, &v, &params, &fwd_plan) == FA_OK);
    CHECK(std::string(fwd_plan.kernel) != std::string(plan.kernel));
    // Bad inputs fail as the backward itself does, and leave the plan alone.
    CHECK(fa_plan_bwd(ctx, &q, &k, &v, &params, nullptr) == FA_ERR_NULL_POINTER);
    params.softcap = -1.0f;
    std::memset(&plan, 0x5a, sizeof plan);
    CHECK(fa_plan_bwd(ctx, &q, &k, &v, &params, &plan) == FA_ERR_BAD_PARAM);
    CHECK(static_cast<unsigned char>(plan.kernel[0]) == 0x5a);
}

TEST_CASE_METHOD(ApiFixture, "api: device info on the CPU", "[api]")
{
    fa_device_info info;
    std::memset(&info, 0, sizeof info);
    REQUIRE(fa_get_device_info(ctx, &info) == FA_OK);
    CHECK(info.backend == FA_BACKEND_CPU);
    CHECK(std::string(info.arch) == "cpu");
    CHECK_FALSE(std::string(info.device_name).empty());
    CHECK(info.sm_count > 0);
    CHECK(fa_context_backend(ctx) == FA_BACKEND_CPU);
}

// The dispatcher plans for the workers that run: a thread count set on the context shows
// in the device info, the plan, and the plan's reason alike.
TEST_CASE_METHOD(ApiFixture, "api: CPU workers follow fa_set_num_threads", "[api]")
{
    fa_device_info info;
    fa_plan plan;
    REQUIRE(fa_set_num_threads(ctx, 3) == FA_OK);
    REQUIRE(fa_get_device_info(ctx, &info) == FA_OK);
    CHECK(info.sm_count == 3);
    REQUIRE(fa_plan_fwd(ctx, &q, &k, &v, &params, &plan) == FA_OK);
    CHECK(plan.threads == 3);
    CHECK(std::string(plan.reason).find("on 3 workers") != std::string::npos);
    REQUIRE(fa_set_num_threads(ctx, 0) == FA_OK); // 0: every online core
    REQUIRE(fa_get_device_info(ctx, &info) == FA_OK);
    CHECK(info.sm_count >= 1);
    REQUIRE(fa_plan_fwd(ctx, &q, &k, &v, &params, &plan) == FA_OK);
    CHECK(plan.threads == info.sm_count);
}

TEST_CASE_METHOD(ApiFixture, "api: a success clears the last error", "[api]")
{
    params.softcap = -1.0f;
    REQUIRE(fwd() == FA_ERR_BAD_PARAM);
    CHECK_FALSE(std::string(fa_last_error(ctx)).empty());
    params.softcap = 0.0f;
    REQUIRE(fwd() == FA_OK);
    CHECK(std::string(fa_last_error(ctx)).empty());
}

TEST_CASE_METHOD(ApiFixture, "api: causal means window_right 0 whatever window_right says",
                 "[api]")
{
    params.causal = 1;
    REQUIRE(fwd() == FA_OK);
    std::vector<float> causal_out = out_buf;
    params.window_right = 7;
    REQUIRE(fwd() == FA_OK);
    CHECK(out_buf == causal_out);
    params.causal = 0;
    params.window_right = 0;
    REQUIRE(fwd() == FA_OK);
    CHECK(out_buf == causal_out);
}
