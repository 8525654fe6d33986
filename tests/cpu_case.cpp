// cpu_case.cpp - the CPU tests' problem builder of cpu_case.hpp.
#include "cpu_case.hpp"

#include <catch2/catch.hpp>

#include <cmath>

using namespace fa_oracle;

namespace fa_test {

std::string describe(const Case &c)
{
    return std::string(fa_dtype_name(c.dtype)) + " b=" + std::to_string(c.batch) +
           " s_q=" + std::to_string(c.seqlen_q) + " s_k=" + std::to_string(c.seqlen_k) +
           " h=" + std::to_string(c.heads) + "/" + std::to_string(c.heads_k) +
           " d=" + std::to_string(c.dim) + " causal=" + std::to_string(c.causal) +
           " window=" + std::to_string(c.window_left) + "," + std::to_string(c.window_right) +
           " softcap=" + std::to_string(c.softcap) + " alibi=" +
           std::to_string(static_cast<int>(c.alibi)) + " strided=" + std::to_string(c.strided) +
           " varlen=" + std::to_string(!c.cu_q.empty()) + " threads=" + std::to_string(c.threads);
}

bool is_varlen(const Case &c)
{
    return !c.cu_q.empty();
}

int64_t rows_q(const Case &c)
{
    return is_varlen(c) ? c.cu_q.back() : c.seqlen_q;
}

int64_t rows_k(const Case &c)
{
    return is_varlen(c) ? c.cu_k.back() : c.seqlen_k;
}

HostTensor operand(const Case &c, int64_t rows, int heads)
{
    if (is_varlen(c)) {
        std::vector<int64_t> shape{rows, heads, c.dim};
        if (!c.strided)
            return make_tensor(c.dtype, shape);
        return make_tensor(c.dtype, shape, {heads * (c.dim + 8) + 24, c.dim + 8, 1});
    }
    std::vector<int64_t> shape{c.batch, rows, heads, c.dim};
    if (!c.strided)
        return make_tensor(c.dtype, shape);
    int64_t row = c.dim + 8, head = rows * row;
    return make_tensor(c.dtype, shape, {heads * head + 16, row, head, 1});
}

HostTensor lse_tensor(const Case &c, int64_t rows)
{
    if (is_varlen(c)) {
        std::vector<int64_t> shape{c.heads, rows};
        return c.strided ? make_tensor(FA_DTYPE_F32, shape, {2 * rows + 3, 2})
                         : make_tensor(FA_DTYPE_F32, shape);
    }
    std::vector<int64_t> shape{c.batch, c.heads, rows};
    return c.strided ? make_tensor(FA_DTYPE_F32, shape, {c.heads * (2 * rows + 1), 2 * rows + 1, 2})
                     : make_tensor(FA_DTYPE_F32, shape);
}

void prepare(const Case &c, Run &r)
{
    r.q = operand(c, rows_q(c), c.heads);
    r.k = operand(c, rows_k(c), c.heads_k);
    r.v = operand(c, rows_k(c), c.heads_k);
    r.out = operand(c, rows_q(c), c.heads);
    r.lse = lse_tensor(c, rows_q(c));
    fill_normal(r.q, c.seed * 3 + 0);
    fill_normal(r.k, c.seed * 3 + 1);
    fill_normal(r.v, c.seed * 3 + 2);

    fa_params_init(&r.params);
    r.params.causal = c.causal;
    r.params.window_left = c.window_left;
    r.params.window_right = c.window_right;
    r.params.softcap = c.softcap;
    if (c.alibi != Alibi::None) {
        int sets = c.alibi == Alibi::PerBatch ? c.batch : 1;
        for (int n = 0; n < sets * c.heads; ++n)
            r.slopes.push_back(std::pow(2.0f, -1.0f - 0.5f * n));
        r.params.alibi_slopes = r.slopes.data();
        r.params.alibi_batch_stride = c.alibi == Alibi::PerBatch ? c.heads : 0;
    }
    if (is_varlen(c)) {
        r.params.cu_seqlens_q = c.cu_q.data();
        r.params.cu_seqlens_k = c.cu_k.data();
        r.params.varlen_batch = static_cast<int>(c.cu_q.size()) - 1;
        r.params.max_seqlen_q = static_cast<int>(c.seqlen_q);
        r.params.max_seqlen_k = static_cast<int>(c.seqlen_k);
    }
    if (!c.seqused_k.empty())
        r.params.seqused_k = c.seqused_k.data();
}

Context::Context(int threads)
{
    REQUIRE(fa_create(&ctx, FA_BACKEND_CPU, 0) == FA_OK);
    REQUIRE(fa_set_num_threads(ctx, threads) == FA_OK);
}

Context::~Context()
{
    fa_destroy(ctx);
}

void forward(const Case &c, Run &r)
{
    Context cx(c.threads);
    fa_status st = fa_fwd(cx.ctx, &r.q.view, &r.k.view, &r.v.view, &r.params, &r.out.view,
                          &r.lse.view, nullptr, 0);
    INFO(fa_last_error(cx.ctx));
    REQUIRE(st == FA_OK);
}

} // namespace fa_test
