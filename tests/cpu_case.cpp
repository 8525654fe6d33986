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

std::vector<Case> length_sweep(int64_t longest_q, int64_t longest_k)
{
    std::vector<Case> cases;
    const int64_t lengths[][2] = {{1, 1},     {1, 239},   {113, 203},  {128, 217},
                                  {256, 512}, {512, 256}, {longest_q, longest_k}};
    for (const auto &len : lengths)
        for (int causal = 0; causal <= 1; ++causal)
            for (fa_dtype dt : {FA_DTYPE_F32, FA_DTYPE_BF16}) {
                Case c;
                c.dtype = dt;
                c.seqlen_q = len[0];
                c.seqlen_k = len[1];
                c.heads = 2;
                c.heads_k = 1;
                c.causal = causal;
                c.seed = static_cast<uint64_t>(len[0] * 7 + len[1] + causal);
                cases.push_back(c);
            }
    return cases;
}

std::vector<Case> head_dim_sweep()
{
    std::vector<Case> cases;
    for (int dim : {8, 40, 64, 96, 128, 200, 256})
        for (fa_dtype dt : kAllDtypes) {
            Case c;
            c.dtype = dt;
            c.seqlen_q = 113;
            c.seqlen_k = 203;
            c.heads = 6;
            c.heads_k = 2;
            c.dim = dim;
            c.causal = dim % 16 == 0;
            c.seed = static_cast<uint64_t>(dim);
            cases.push_back(c);
        }
    return cases;
}

std::vector<Case> gqa_sweep()
{
    std::vector<Case> cases;
    for (int heads_k : {6, 2, 1})
        for (fa_dtype dt : kAllDtypes) {
            Case c;
            c.dtype = dt;
            c.seqlen_q = 128;
            c.seqlen_k = 217;
            c.heads = 6;
            c.heads_k = heads_k;
            c.causal = 1;
            c.seed = static_cast<uint64_t>(heads_k) + 40;
            cases.push_back(c);
        }
    return cases;
}

std::vector<Case> causal_sweep()
{
    std::vector<Case> cases;
    const int64_t lengths[][2] = {{256, 128}, {128, 256}, {239, 1}, {200, 17}, {70, 300}};
    for (const auto &len : lengths)
        for (fa_dtype dt : kAllDtypes) {
            Case c;
            c.dtype = dt;
            c.seqlen_q = len[0];
            c.seqlen_k = len[1];
            c.batch = 2;
            c.causal = 1;
            c.seed = static_cast<uint64_t>(len[0] + len[1]);
            cases.push_back(c);
        }
    return cases;
}

std::vector<Case> window_sweep()
{
    std::vector<Case> cases;
    const int windows[][3] = {// left, right, causal
                              {32, -1, 0}, {-1, 16, 0}, {20, 7, 0}, {48, -1, 1}, {0, 0, 0}};
    const int64_t lengths[][2] = {{256, 512}, {512, 256}};
    for (const auto &w : windows)
        for (const auto &len : lengths)
            for (fa_dtype dt : {FA_DTYPE_F32, FA_DTYPE_F16}) {
                Case c;
                c.dtype = dt;
                c.seqlen_q = len[0];
                c.seqlen_k = len[1];
                c.window_left = w[0];
                c.window_right = w[1];
                c.causal = w[2];
                c.heads = 2;
                c.heads_k = 1;
                c.seed = static_cast<uint64_t>(w[0] * 3 + w[1] + len[0]);
                cases.push_back(c);
            }
    return cases;
}

std::vector<Case> softcap_sweep()
{
    std::vector<Case> cases;
    for (float cap : {30.0f, 2.0f})
        for (int causal = 0; causal <= 1; ++causal)
            for (fa_dtype dt : kAllDtypes) {
                Case c;
                c.dtype = dt;
                c.seqlen_q = 150;
                c.seqlen_k = 300;
                c.softcap = cap;
                c.causal = causal;
                c.seed = static_cast<uint64_t>(cap) + causal;
                cases.push_back(c);
            }
    return cases;
}

std::vector<Case> alibi_sweep()
{
    std::vector<Case> cases;
    for (Alibi alibi : {Alibi::Shared, Alibi::PerBatch})
        for (int causal = 0; causal <= 1; ++causal)
            for (fa_dtype dt : {FA_DTYPE_F32, FA_DTYPE_BF16}) {
                Case c;
                c.dtype = dt;
                c.batch = 2;
                c.seqlen_q = 97;
                c.seqlen_k = 301;
                c.heads = 4;
                c.heads_k = 2;
                c.alibi = alibi;
                c.causal = causal;
                c.softcap = causal ? 20.0f : 0.0f;
                c.seed = static_cast<uint64_t>(alibi) * 2 + causal;
                cases.push_back(c);
            }
    return cases;
}

std::vector<Case> varlen_sweep()
{
    std::vector<Case> cases;
    // (q, k) lengths: (37, 64), (0, 36), (113, 0), (1, 300), (0, 0), (200, 90)
    const std::vector<int32_t> cu_q{0, 37, 37, 150, 151, 151, 351};
    const std::vector<int32_t> cu_k{0, 64, 100, 100, 400, 400, 490};
    for (int used = 0; used <= 1; ++used)
        for (int causal = 0; causal <= 1; ++causal)
            for (fa_dtype dt : kAllDtypes) {
                Case c;
                c.dtype = dt;
                c.cu_q = cu_q;
                c.cu_k = cu_k;
                c.seqlen_q = 200;
                c.seqlen_k = 300;
                c.heads = 4;
                c.heads_k = 2;
                c.causal = causal;
                if (used)
                    c.seqused_k = {50, 10, 0, 299, 0, 90};
                c.seed = static_cast<uint64_t>(used * 2 + causal) + 90;
                cases.push_back(c);
            }
    return cases;
}

std::vector<Case> strided_sweep()
{
    std::vector<Case> cases;
    for (int varlen = 0; varlen <= 1; ++varlen)
        for (fa_dtype dt : kAllDtypes) {
            Case c;
            c.dtype = dt;
            c.strided = true;
            c.batch = 2;
            c.seqlen_q = 131;
            c.seqlen_k = 259;
            c.heads = 3;
            c.heads_k = 1;
            c.dim = 72;
            c.causal = 1;
            if (varlen) {
                c.cu_q = {0, 131, 200};
                c.cu_k = {0, 259, 300};
            }
            c.seed = static_cast<uint64_t>(varlen) + 70;
            cases.push_back(c);
        }
    return cases;
}

} // namespace fa_test
