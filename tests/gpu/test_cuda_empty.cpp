// test_cuda_empty.cpp - empty problems on the CUDA backend: no batch, no query rows or no
// key rows (fixed-length and varlen, NULL data where a tensor has no elements) return
// FA_OK; calls with nothing to write launch nothing and leave every buffer as it was,
// calls with rows on one side write out 0 / LSE -inf (no keys) or zero gradients, in
// both dQ modes. Sizes are not tile multiples. Skipped without a device (gpu_main.cpp).
#include <catch2/catch.hpp>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "device_tensors.hpp"

namespace {

const unsigned char kPoison = 0xA5;

// A device buffer of `elements` 16-bit (or fp32) values, poisoned or filled with `fill`.
struct Operand {
    size_t bytes;
    std::unique_ptr<DeviceBuffer> buf;
    Operand(size_t elements, size_t element_bytes) : bytes(elements * element_bytes), buf(new DeviceBuffer(bytes))
    {
        poison();
    }
    void poison() { REQUIRE(cudaMemset(buf->ptr, kPoison, bytes ? bytes : 1) == cudaSuccess); }
    void fill16(uint16_t bits)
    {
        std::vector<uint16_t> host(bytes / 2, bits);
        REQUIRE(cudaMemcpy(buf->ptr, host.data(), bytes, cudaMemcpyHostToDevice) == cudaSuccess);
    }
    std::vector<unsigned char> read() const
    {
        std::vector<unsigned char> host(bytes ? bytes : 1);
        REQUIRE(cudaMemcpy(host.data(), buf->ptr, host.size(), cudaMemcpyDeviceToHost) == cudaSuccess);
        return host;
    }
    bool untouched() const
    {
        for (unsigned char byte : read())
            if (byte != kPoison)
                return false;
        return true;
    }
    bool all_zero() const // +0 or -0 in fp16 / bf16
    {
        std::vector<unsigned char> host = read();
        for (size_t i = 0; i + 1 < bytes; i += 2)
            if ((host[i] | (host[i + 1] & 0x7f)) != 0)
                return false;
        return true;
    }
};

// One problem, bf16 or fp16: q/out/dout/dq [b, s_q, h, d], k/v/dk/dv [b, s_k, h_k, d],
// varlen [total, h, d] with one sequence holding every row of the batch.
struct EmptyGpuCase {
    Context ctx;
    fa_dtype dtype;
    int64_t b, s_q, s_k, h = 6, h_k = 2, d = 72;
    Operand q, k, v, out, lse, dout, dq, dk, dv;
    fa_tensor tq, tk, tv, tout, tlse, tdout, tdq, tdk, tdv;
    fa_params params;
    std::unique_ptr<DeviceArray<int32_t>> cu_q, cu_k;

    EmptyGpuCase(fa_dtype dt, int64_t batch, int64_t rows_q, int64_t rows_k, bool varlen)
        : dtype(dt), b(batch), s_q(rows_q), s_k(rows_k), q(nq(), 2), k(nk(), 2), v(nk(), 2), out(nq(), 2),
          lse(size_t(b * h * s_q), 4), dout(nq(), 2), dq(nq(), 2), dk(nk(), 2), dv(nk(), 2)
    {
        uint16_t one = dtype == FA_DTYPE_BF16 ? 0x3F80 : 0x3C00;
        for (Operand *o : {&q, &k, &v, &dout})
            o->fill16(one);
        fa_params_init(&params);
        if (varlen) {
            int64_t total_q = b * s_q, total_k = b * s_k;
            std::vector<int32_t> cq(size_t(b) + 1, 0), ck(size_t(b) + 1, 0);
            cq.back() = int32_t(total_q);
            ck.back() = int32_t(total_k);
            cu_q.reset(new DeviceArray<int32_t>(cq));
            cu_k.reset(new DeviceArray<int32_t>(ck));
            params.cu_seqlens_q = cu_q->get();
            params.cu_seqlens_k = cu_k->get();
            params.varlen_batch = int(b);
            params.max_seqlen_q = int(total_q);
            params.max_seqlen_k = int(total_k);
            tq = fa_tensor_thd(data(q), dtype, total_q, h, d);
            tk = fa_tensor_thd(data(k), dtype, total_k, h_k, d);
            tv = fa_tensor_thd(data(v), dtype, total_k, h_k, d);
            tout = fa_tensor_thd(data(out), dtype, total_q, h, d);
            tlse = fa_tensor_lse_varlen(static_cast<float *>(data(lse)), h, total_q);
            tdout = fa_tensor_thd(data(dout), dtype, total_q, h, d);
            tdq = fa_tensor_thd(data(dq), dtype, total_q, h, d);
            tdk = fa_tensor_thd(data(dk), dtype, total_k, h_k, d);
            tdv = fa_tensor_thd(data(dv), dtype, total_k, h_k, d);
            return;
        }
        tq = fa_tensor_bshd(data(q), dtype, b, s_q, h, d);
        tk = fa_tensor_bshd(data(k), dtype, b, s_k, h_k, d);
        tv = fa_tensor_bshd(data(v), dtype, b, s_k, h_k, d);
        tout = fa_tensor_bshd(data(out), dtype, b, s_q, h, d);
        tlse = fa_tensor_lse(static_cast<float *>(data(lse)), b, h, s_q);
        tdout = fa_tensor_bshd(data(dout), dtype, b, s_q, h, d);
        tdq = fa_tensor_bshd(data(dq), dtype, b, s_q, h, d);
        tdk = fa_tensor_bshd(data(dk), dtype, b, s_k, h_k, d);
        tdv = fa_tensor_bshd(data(dv), dtype, b, s_k, h_k, d);
    }

    size_t nq() const { return size_t(b * s_q * h * d); }
    size_t nk() const { return size_t(b * s_k * h_k * d); }
    // NULL for operands without elements, as PyTorch passes them.
    static void *data(const Operand &o) { return o.bytes ? o.buf->ptr : nullptr; }

    fa_status fwd() { return fa_fwd(ctx.ctx, &tq, &tk, &tv, &params, &tout, &tlse, nullptr, 0); }
    fa_status bwd()
    {
        return fa_bwd(ctx.ctx, &tq, &tk, &tv, &tout, &tlse, &tdout, &params, &tdq, &tdk, &tdv, nullptr, 0);
    }
    void sync() { REQUIRE(cudaDeviceSynchronize() == cudaSuccess); }
};

const fa_dtype kDtypes[] = {FA_DTYPE_F16, FA_DTYPE_BF16};

} // namespace

TEST_CASE("cuda empty: batch 0 launches nothing and writes nothing", "[cuda][empty][sanitize]")
{
    for (fa_dtype dtype : kDtypes)
        for (bool varlen : {false, true}) {
            EmptyGpuCase c(dtype, 0, 77, 131, varlen);
            INFO(fa_dtype_name(dtype) << " varlen " << varlen << ": " << fa_last_error(c.ctx.ctx));
            CHECK(c.tq.data == nullptr);
            fa_plan plan;
            REQUIRE(fa_plan_fwd(c.ctx.ctx, &c.tq, &c.tk, &c.tv, &c.params, &plan) == FA_OK);
            CHECK(std::string(plan.kernel) == "none");
            REQUIRE(fa_plan_bwd(c.ctx.ctx, &c.tq, &c.tk, &c.tv, &c.params, &plan) == FA_OK);
            CHECK(std::string(plan.kernel) == "none");
            size_t bytes = 123;
            REQUIRE(fa_bwd_workspace_size(c.ctx.ctx, &c.tq, &c.tk, &c.tv, &c.params, &bytes) == FA_OK);
            CHECK(bytes == 0);
            REQUIRE(c.fwd() == FA_OK);
            REQUIRE(c.bwd() == FA_OK);
            c.sync();
        }
}

TEST_CASE("cuda empty: no keys gives out 0, LSE -inf and dq 0", "[cuda][empty][sanitize]")
{
    for (fa_dtype dtype : kDtypes)
        for (bool varlen : {false, true})
            for (int causal = 0; causal < 2; ++causal)
                for (int deterministic = 0; deterministic < 2; ++deterministic) {
                    EmptyGpuCase c(dtype, 3, 77, 0, varlen);
                    INFO(fa_dtype_name(dtype) << " varlen " << varlen << " causal " << causal
                                              << " deterministic " << deterministic);
                    c.params.causal = causal;
                    c.params.deterministic = deterministic;
                    REQUIRE(c.tk.data == nullptr);
                    fa_status st = c.fwd();
                    INFO("fa_fwd: " << fa_status_string(st) << ": " << fa_last_error(c.ctx.ctx));
                    REQUIRE(st == FA_OK);
                    c.sync();
                    CHECK(c.out.all_zero());
                    std::vector<unsigned char> lse = c.lse.read();
                    for (size_t i = 0; i < c.lse.bytes / 4; ++i) {
                        float x;
                        std::memcpy(&x, &lse[4 * i], 4);
                        CHECK(x == -INFINITY);
                    }
                    st = c.bwd();
                    INFO("fa_bwd: " << fa_status_string(st) << ": " << fa_last_error(c.ctx.ctx));
                    REQUIRE(st == FA_OK);
                    c.sync();
                    CHECK(c.dq.all_zero());
                }
}

TEST_CASE("cuda empty: no queries is a forward no-op, the backward gives dk, dv 0", "[cuda][empty][sanitize]")
{
    for (fa_dtype dtype : kDtypes)
        for (bool varlen : {false, true})
            for (int deterministic = 0; deterministic < 2; ++deterministic) {
                EmptyGpuCase c(dtype, 2, 0, 131, varlen);
                INFO(fa_dtype_name(dtype) << " varlen " << varlen << " deterministic " << deterministic);
                c.params.deterministic = deterministic;
                c.params.window_left = 9;
                REQUIRE(c.tq.data == nullptr);
                fa_status st = c.fwd();
                INFO("fa_fwd: " << fa_status_string(st) << ": " << fa_last_error(c.ctx.ctx));
                REQUIRE(st == FA_OK);
                st = c.bwd();
                INFO("fa_bwd: " << fa_status_string(st) << ": " << fa_last_error(c.ctx.ctx));
                REQUIRE(st == FA_OK);
                c.sync();
                CHECK(c.dk.all_zero());
                CHECK(c.dv.all_zero());
            }
}
