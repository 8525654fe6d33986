// ring_case.cpp - the ring tests' shared problem set-up and checks (ring_case.hpp).
#include "ring_case.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

using namespace fa_oracle;

namespace fa_ring_test {

std::string describe(const Problem &p)
{
    return "total " + std::to_string(p.total) + (p.split == FA_RING_SPLIT_ZIGZAG ? " zigzag" : " contiguous") +
           " b" + std::to_string(p.batch) + " h" + std::to_string(p.heads) + "/" + std::to_string(p.heads_k) +
           " d" + std::to_string(p.dim) + " " + fa_dtype_name(p.dtype) + (p.causal ? " causal" : "") +
           (p.softcap > 0 ? " softcap" : "") + (p.strided ? " strided" : "");
}

fa_params params_of(const Problem &p)
{
    fa_params params;
    fa_params_init(&params);
    params.causal = p.causal;
    params.softcap = p.softcap;
    return params;
}

std::vector<int64_t> rows_of(const Problem &p, int rank, int world)
{
    fa_ring_layout layout{p.total, p.split};
    fa_ring_span span[2];
    int64_t rows = 0;
    std::vector<int64_t> g;
    if (fa_ring_rows(&layout, world, rank, span, &rows) != FA_OK)
        return g;
    for (const fa_ring_span &s : span)
        for (int64_t i = 0; i < s.length; i++)
            g.push_back(s.begin + i);
    return g;
}

Whole make_whole(const Problem &p)
{
    Whole w;
    w.q = make_tensor(p.dtype, {p.batch, p.total, p.heads, p.dim});
    w.k = make_tensor(p.dtype, {p.batch, p.total, p.heads_k, p.dim});
    w.v = make_tensor(p.dtype, {p.batch, p.total, p.heads_k, p.dim});
    w.dout = make_tensor(p.dtype, {p.batch, p.total, p.heads, p.dim});
    fill_normal(w.q, p.seed);
    fill_normal(w.k, p.seed + 1);
    fill_normal(w.v, p.seed + 2);
    fill_normal(w.dout, p.seed + 3);
    return w;
}

namespace {

// [b, n, h, d], contiguous or heads-outer with a padding row per head (no dim adjacent
// to its neighbour), storage poisoned.
HostTensor operand(const Problem &p, fa_dtype dtype, int64_t n, int64_t heads)
{
    if (!p.strided)
        return make_tensor(dtype, {p.batch, n, heads, p.dim});
    int64_t head = (n + 1) * p.dim;
    return make_tensor(dtype, {p.batch, n, heads, p.dim}, {heads * head + p.dim, p.dim, head, 1});
}

HostTensor lse_operand(const Problem &p, int64_t n)
{
    if (!p.strided)
        return make_tensor(FA_DTYPE_F32, {p.batch, p.heads, n});
    return make_tensor(FA_DTYPE_F32, {p.batch, p.heads, n}, {p.heads * (n + 3) + 1, n + 3, 1});
}

// Rows `rows` (dim 1) of a whole-sequence tensor into `local` (any strides), one
// contiguous last dim at a time.
void copy_rows(HostTensor &local, const HostTensor &whole, const std::vector<int64_t> &rows)
{
    const fa_tensor &w = whole.view, &l = local.view;
    size_t es = dtype_size(w.dtype), bytes = (size_t)w.shape[3] * es;
    for (int64_t b = 0; b < w.shape[0]; b++)
        for (size_t i = 0; i < rows.size(); i++)
            for (int64_t h = 0; h < w.shape[2]; h++)
                std::memcpy(local.storage.data() + (size_t)(b * l.stride[0] + (int64_t)i * l.stride[1] +
                                                            h * l.stride[2]) * es,
                            whole.storage.data() + (size_t)(b * w.stride[0] + rows[i] * w.stride[1] +
                                                            h * w.stride[2]) * es,
                            bytes);
}

HostTensor take_rows(const Problem &p, const HostTensor &whole, const std::vector<int64_t> &rows)
{
    HostTensor t = operand(p, whole.view.dtype, (int64_t)rows.size(), whole.view.shape[2]);
    copy_rows(t, whole, rows);
    return t;
}

// Canonical reference arrays (row g = b * s + i: out [g][h][c], lse [g][h]) as fp32
// tensors in fa_fwd's layout.
HostTensor dense(const std::vector<double> &values, const std::vector<int64_t> &shape, bool lse_layout)
{
    HostTensor t = make_tensor(FA_DTYPE_F32, shape);
    float *f = reinterpret_cast<float *>(t.storage.data());
    for (size_t i = 0; i < values.size(); i++) {
        size_t at = i;
        if (lse_layout) {
            int64_t H = shape[1], S = shape[2], h = (int64_t)i % H, g = (int64_t)i / H;
            at = (size_t)((g / S * H + h) * S + g % S);
        }
        f[at] = (float)values[i];
    }
    return t;
}

double row_error(const fa_tensor &local, const fa_tensor &whole, const std::vector<int64_t> &rows, int row_dim)
{
    double worst = 0.0;
    int64_t idx[4] = {0, 0, 0, 0}, widx[4] = {0, 0, 0, 0}, n = 1;
    for (int i = 0; i < local.ndim; i++)
        n *= local.shape[i];
    for (int64_t flat = 0; flat < n; flat++) {
        int64_t rest = flat;
        for (int i = local.ndim - 1; i >= 0; i--) {
            idx[i] = rest % local.shape[i];
            rest /= local.shape[i];
        }
        std::copy(idx, idx + 4, widx);
        widx[row_dim] = rows[(size_t)idx[row_dim]];
        double a = element(local, idx), b = element(whole, widx);
        double e = (std::isinf(a) && a == b) ? 0.0 : std::fabs(a - b);
        worst = std::isnan(e) ? INFINITY : std::max(worst, e);
    }
    return worst;
}

} // namespace

Local make_local(const Problem &p, const Whole &w, const std::vector<int64_t> &rows)
{
    Local l;
    int64_t n = (int64_t)rows.size();
    l.q = take_rows(p, w.q, rows);
    l.k = take_rows(p, w.k, rows);
    l.v = take_rows(p, w.v, rows);
    l.dout = take_rows(p, w.dout, rows);
    l.out = operand(p, p.dtype, n, p.heads);
    l.lse = lse_operand(p, n);
    l.dq = operand(p, p.dtype, n, p.heads);
    l.dk = operand(p, p.dtype, n, p.heads_k);
    l.dv = operand(p, p.dtype, n, p.heads_k);
    return l;
}

WholeResults make_whole_results(const Problem &p)
{
    WholeResults r;
    r.out = make_tensor(p.dtype, {p.batch, p.total, p.heads, p.dim});
    r.lse = make_tensor(FA_DTYPE_F32, {p.batch, p.heads, p.total});
    r.dq = make_tensor(p.dtype, {p.batch, p.total, p.heads, p.dim});
    r.dk = make_tensor(p.dtype, {p.batch, p.total, p.heads_k, p.dim});
    r.dv = make_tensor(p.dtype, {p.batch, p.total, p.heads_k, p.dim});
    return r;
}

Expected expected(const Problem &p, const Whole &w)
{
    fa_params params = params_of(p);
    Reference exact = reference_attention(w.q.view, w.k.view, w.v.view, params, Precision::Exact);
    GradReference gexact = reference_backward(w.q.view, w.k.view, w.v.view, w.dout.view, params, Precision::Exact);
    Expected e;
    e.exact.out = dense(exact.out, {p.batch, p.total, p.heads, p.dim}, false);
    e.exact.lse = dense(exact.lse, {p.batch, p.heads, p.total}, true);
    e.exact.dq = dense(gexact.dq, {p.batch, p.total, p.heads, p.dim}, false);
    e.exact.dk = dense(gexact.dk, {p.batch, p.total, p.heads_k, p.dim}, false);
    e.exact.dv = dense(gexact.dv, {p.batch, p.total, p.heads_k, p.dim}, false);
    std::fill(e.bound, e.bound + 5, 1e-4);
    if (p.dtype == FA_DTYPE_F32)
        return e;
    Reference naive = reference_attention(w.q.view, w.k.view, w.v.view, params, Precision::Naive);
    GradReference gnaive = reference_backward(w.q.view, w.k.view, w.v.view, w.dout.view, params, Precision::Naive);
    GradErrors ge = grad_difference(gnaive, gexact);
    e.bound[0] = 2.0 * max_out_difference(naive, exact) + 1e-5;
    e.bound[1] = 2.0 * max_lse_difference(naive, exact) + 1e-5;
    e.bound[2] = 3.0 * ge.dq + 1e-5;
    e.bound[3] = 3.0 * ge.dk + 1e-5;
    e.bound[4] = 3.0 * ge.dv + 1e-5;
    return e;
}

Errors errors(const Local &mine, const WholeResults &whole, const std::vector<int64_t> &rows)
{
    const HostTensor *got[5] = {&mine.out, &mine.lse, &mine.dq, &mine.dk, &mine.dv};
    const HostTensor *want[5] = {&whole.out, &whole.lse, &whole.dq, &whole.dk, &whole.dv};
    Errors e;
    for (int i = 0; i < 5; i++)
        e.value[i] = row_error(got[i]->view, want[i]->view, rows, i == 1 ? 2 : 1);
    return e;
}

bool untouched(const HostTensor &t)
{
    size_t es = dtype_size(t.view.dtype);
    for (size_t i = 0; i < t.storage.size(); i += es) {
        float f;
        uint16_t h;
        if (es == 4) {
            std::memcpy(&f, t.storage.data() + i, 4);
            if (!std::isnan(f))
                return false;
            continue;
        }
        std::memcpy(&h, t.storage.data() + i, 2);
        if ((h & 0x7fff) <= (t.view.dtype == FA_DTYPE_F16 ? 0x7c00 : 0x7f80))
            return false;
    }
    return true;
}

} // namespace fa_ring_test
