// oracle.cpp - the fp64 / same-precision attention oracle (forward and backward) and
// tensor helpers of oracle.hpp. Straight loops over the semantics in include/flashattn.h;
// speed is not a goal.
#include "oracle.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "api/mask.h"

namespace fa_oracle {
namespace {

const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

uint32_t f32_bits(float f)
{
    uint32_t b;
    std::memcpy(&b, &f, sizeof b);
    return b;
}

float bits_f32(uint32_t b)
{
    float f;
    std::memcpy(&f, &b, sizeof f);
    return f;
}

double f16_value(uint16_t h)
{
    int exponent = (h >> 10) & 0x1f;
    int mantissa = h & 0x3ff;
    double sign = (h & 0x8000) ? -1.0 : 1.0;
    if (exponent == 0x1f)
        return mantissa ? kNaN : sign * kInf;
    if (exponent == 0)
        return sign * std::ldexp(mantissa, -24);
    return sign * std::ldexp(1024 + mantissa, exponent - 25);
}

// `r` must already be an fp16 value (round_to_dtype).
uint16_t f16_encode(double r)
{
    uint16_t sign = std::signbit(r) ? 0x8000 : 0;
    double a = std::fabs(r);
    if (std::isnan(r))
        return 0x7e00;
    if (std::isinf(a))
        return sign | 0x7c00;
    if (a < std::ldexp(1.0, -14))
        return sign | static_cast<uint16_t>(a * std::ldexp(1.0, 24));
    int e = std::ilogb(a);
    int mantissa = static_cast<int>(a * std::ldexp(1.0, 10 - e)) - 1024;
    return sign | static_cast<uint16_t>(((e + 15) << 10) | mantissa);
}

// Round |x| to `bits` significant bits with exponent floor `min_exponent` (subnormals),
// overflowing to inf above `max_finite`.
double round_significand(double x, int bits, int min_exponent, double max_finite)
{
    if (!std::isfinite(x) || x == 0.0)
        return x;
    int e = std::max(std::ilogb(std::fabs(x)), min_exponent);
    double quantum = std::ldexp(1.0, e - (bits - 1));
    double r = std::nearbyint(std::fabs(x) / quantum) * quantum;
    return std::copysign(r > max_finite ? kInf : r, x);
}

uint16_t poison_16(fa_dtype dtype)
{
    return dtype == FA_DTYPE_F16 ? 0x7e00 : 0x7fc0;
}

int64_t offset_of(const fa_tensor &t, const int64_t *index)
{
    int64_t offset = 0;
    for (int i = 0; i < t.ndim; ++i)
        offset += index[i] * t.stride[i];
    return offset;
}

int64_t element_count(const fa_tensor &t)
{
    int64_t n = 1;
    for (int i = 0; i < t.ndim; ++i)
        n *= t.shape[i];
    return n;
}

// Calls f(index) for every index of the view, last dim fastest.
template <class F>
void for_each_index(const fa_tensor &t, F f)
{
    int64_t index[4] = {0, 0, 0, 0};
    int64_t n = element_count(t);
    for (int64_t e = 0; e < n; ++e) {
        f(static_cast<const int64_t *>(index));
        for (int i = t.ndim - 1; i >= 0; --i) {
            if (++index[i] < t.shape[i])
                break;
            index[i] = 0;
        }
    }
}

void store(const fa_tensor &t, int64_t offset, double value)
{
    char *p = static_cast<char *>(t.data) + offset * static_cast<int64_t>(dtype_size(t.dtype));
    if (t.dtype == FA_DTYPE_F32) {
        float f = static_cast<float>(value);
        std::memcpy(p, &f, 4);
        return;
    }
    uint16_t h = t.dtype == FA_DTYPE_F16
                     ? f16_encode(value)
                     : static_cast<uint16_t>(f32_bits(static_cast<float>(value)) >> 16);
    std::memcpy(p, &h, 2);
}

double load(const fa_tensor &t, int64_t offset)
{
    const char *p =
        static_cast<const char *>(t.data) + offset * static_cast<int64_t>(dtype_size(t.dtype));
    if (t.dtype == FA_DTYPE_F32) {
        float f;
        std::memcpy(&f, p, 4);
        return f;
    }
    uint16_t h;
    std::memcpy(&h, p, 2);
    return t.dtype == FA_DTYPE_F16 ? f16_value(h) : bits_f32(static_cast<uint32_t>(h) << 16);
}

bool slot_is_poison(const HostTensor &t, size_t slot)
{
    const unsigned char *p = t.storage.data() + slot * dtype_size(t.view.dtype);
    if (t.view.dtype == FA_DTYPE_F32) {
        uint32_t b;
        std::memcpy(&b, p, 4);
        return b == 0x7fc00000u;
    }
    uint16_t h;
    std::memcpy(&h, p, 2);
    return h == poison_16(t.view.dtype);
}

// splitmix64: small, seedable, identical on every platform.
struct Rng {
    uint64_t state;
    uint64_t next()
    {
        uint64_t z = (state += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    double uniform_open0()  // (0, 1]
    {
        return static_cast<double>((next() >> 11) + 1) * std::ldexp(1.0, -53);
    }
    double normal()  // Box-Muller
    {
        double radius = std::sqrt(-2.0 * std::log(uniform_open0()));
        return radius * std::cos(6.283185307179586 * uniform_open0());
    }
};

// What the oracle needs about the batch, resolved from tensors and params.
struct Batch {
    bool varlen;
    int count;
    int heads, heads_k, dim;
    double scale;
    fa_window window;
    std::vector<int64_t> q_begin, q_len, k_begin, k_len;
};

Batch describe(const fa_tensor &q, const fa_tensor &k, const fa_params &p)
{
    Batch bt;
    bt.varlen = p.cu_seqlens_q != nullptr;
    bt.count = bt.varlen ? p.varlen_batch : static_cast<int>(q.shape[0]);
    bt.heads = static_cast<int>(q.shape[q.ndim - 2]);
    bt.heads_k = static_cast<int>(k.shape[k.ndim - 2]);
    bt.dim = static_cast<int>(q.shape[q.ndim - 1]);
    bt.scale = p.softmax_scale != 0.0f ? p.softmax_scale : 1.0 / std::sqrt(double(bt.dim));
    bt.window.left = p.window_left;
    bt.window.right = p.causal ? 0 : p.window_right;
    for (int b = 0; b < bt.count; ++b) {
        int64_t qb = bt.varlen ? p.cu_seqlens_q[b] : b * q.shape[1];
        int64_t ql = bt.varlen ? p.cu_seqlens_q[b + 1] - p.cu_seqlens_q[b] : q.shape[1];
        int64_t kb = bt.varlen ? p.cu_seqlens_k[b] : 0;
        int64_t kl = bt.varlen ? p.cu_seqlens_k[b + 1] - p.cu_seqlens_k[b] : k.shape[1];
        if (p.seqused_k)
            kl = std::min<int64_t>(kl, p.seqused_k[b]);
        bt.q_begin.push_back(qb);
        bt.q_len.push_back(ql);
        bt.k_begin.push_back(kb);
        bt.k_len.push_back(kl);
    }
    return bt;
}

// Rows [0, count) of one head of sequence b as dense fp64 (row-major, dim columns).
std::vector<double> load_rows(const fa_tensor &t, const Batch &bt, int b, int64_t seq_begin,
                              int64_t count, int head)
{
    std::vector<double> rows(static_cast<size_t>(count * bt.dim));
    for (int64_t r = 0; r < count; ++r)
        for (int c = 0; c < bt.dim; ++c) {
            int64_t fixed[4] = {b, r, head, c};
            int64_t varlen[3] = {seq_begin + r, head, c};
            rows[r * bt.dim + c] = element(t, bt.varlen ? varlen : fixed);
        }
    return rows;
}

// One (sequence, head): its queries and the keys/values of its KV head, as fp64.
struct HeadData {
    int b, head;
    std::vector<double> q, k, v;
};

// Query head h of sequence b with its kv head's keys and values, in double.
HeadData load_head(const fa_tensor &q, const fa_tensor &k, const fa_tensor &v, const Batch &bt, int b,
                   int h, int head_k)
{
    return HeadData{b, h, load_rows(q, bt, b, bt.q_begin[b], bt.q_len[b], h),
                    load_rows(k, bt, b, bt.k_begin[b], bt.k_len[b], head_k),
                    load_rows(v, bt, b, bt.k_begin[b], bt.k_len[b], head_k)};
}

struct RowResult {
    std::vector<double> out;
    double lse;
};

// One query row's visible keys with their probabilities and d(score)/d(q.k * scale)
// (1 - tanh^2 under softcap, else 1).
struct RowProbabilities {
    std::vector<int64_t> keys;
    std::vector<double> prob, slope;
    double lse;
};

// Rounding of a naive same-dtype implementation: values rounded to the dtype, fp32
// accumulation. Exact: fp64 throughout.
struct Rounding {
    fa_dtype dtype;
    bool naive;
    double rnd(double x) const { return naive ? round_to_dtype(x, dtype) : x; }
    double acc(double x) const { return naive ? double(float(x)) : x; }
};

// Scores and probabilities of query row i: scores and normalised probabilities rounded
// to the dtype when naive.
RowProbabilities row_probabilities(const fa_params &p, const Batch &bt, const HeadData &hd,
                                   int64_t i, const Rounding &r)
{
    const int64_t sq = bt.q_len[hd.b], sk = bt.k_len[hd.b];
    const double *q = hd.q.data() + i * bt.dim;
    RowProbabilities row{{}, {}, {}, -kInf};

    for (int64_t j = 0; j < sk; ++j) {
        if (!fa_key_visible(i, j, sq, sk, bt.window))
            continue;
        const double *key = hd.k.data() + j * bt.dim;
        double dot = 0.0, slope = 1.0;
        for (int c = 0; c < bt.dim; ++c)
            dot = r.acc(dot + q[c] * key[c]);
        double s = r.rnd(r.rnd(dot) * (r.naive ? double(float(bt.scale)) : bt.scale));
        if (p.softcap > 0.0f) {
            double t = std::tanh(s / p.softcap);
            s = r.rnd(p.softcap * t);
            slope = r.rnd(1.0 - t * t);
        }
        if (p.alibi_slopes)
            s = r.rnd(s - p.alibi_slopes[hd.b * p.alibi_batch_stride + hd.head] *
                              fa_alibi_distance(i, j, sq, sk));
        row.keys.push_back(j);
        row.prob.push_back(s);
        row.slope.push_back(slope);
    }
    if (row.keys.empty())
        return row;
    double max = *std::max_element(row.prob.begin(), row.prob.end());
    double sum = 0.0;
    for (double &s : row.prob) {
        s = r.acc(std::exp(s - max));
        sum = r.acc(sum + s);
    }
    for (double &prob : row.prob)
        prob = r.rnd(prob / sum);
    row.lse = max + std::log(sum);
    return row;
}

std::vector<double> row_output(const Batch &bt, const HeadData &hd, const RowProbabilities &row,
                               const Rounding &r)
{
    std::vector<double> out(bt.dim, 0.0);
    for (size_t n = 0; n < row.keys.size(); ++n) {
        const double *value = hd.v.data() + row.keys[n] * bt.dim;
        for (int c = 0; c < bt.dim; ++c)
            out[c] = r.acc(out[c] + row.prob[n] * value[c]);
    }
    for (double &o : out)
        o = r.rnd(o);
    return out;
}

RowResult attend_row(const fa_params &p, const Batch &bt, const HeadData &hd, int64_t i,
                     fa_dtype dt, Precision precision)
{
    Rounding r{dt, precision == Precision::Naive};
    RowProbabilities row = row_probabilities(p, bt, hd, i, r);
    return RowResult{row_output(bt, hd, row, r), row.lse};
}

// Canonical rows: every row of a varlen q, b * s_q of a fixed-length one.
int64_t rows_of(const fa_tensor &out)
{
    return out.ndim == 4 ? out.shape[0] * out.shape[1] : out.shape[0];
}

}  // namespace

size_t dtype_size(fa_dtype dtype)
{
    return dtype == FA_DTYPE_F32 ? 4 : 2;
}

double round_to_dtype(double x, fa_dtype dtype)
{
    switch (dtype) {
    case FA_DTYPE_F16: return round_significand(x, 11, -14, 65504.0);
    case FA_DTYPE_BF16: return round_significand(x, 8, -126, 0x1.fep127);
    default: return static_cast<double>(static_cast<float>(x));
    }
}

HostTensor make_tensor(fa_dtype dtype, const std::vector<int64_t> &shape,
                       const std::vector<int64_t> &strides)
{
    HostTensor t;
    std::memset(&t.view, 0, sizeof t.view);
    t.view.dtype = dtype;
    t.view.ndim = static_cast<int>(shape.size());
    int64_t running = 1, last = 0;
    for (int i = t.view.ndim - 1; i >= 0; --i) {
        t.view.shape[i] = shape[i];
        t.view.stride[i] = strides.empty() ? running : strides[i];
        running *= shape[i];
        last += (shape[i] - 1) * t.view.stride[i];
    }
    t.storage.resize(static_cast<size_t>(last + 1) * dtype_size(dtype));
    t.view.data = t.storage.data();
    poison(t);
    return t;
}

void fill_normal(HostTensor &t, uint64_t seed)
{
    Rng rng{seed * 0x2545f4914f6cdd1dull + 1};
    for_each_index(t.view, [&](const int64_t *index) {
        double x = 0.0;
        while (x == 0.0)
            x = round_to_dtype(rng.normal(), t.view.dtype);
        store(t.view, offset_of(t.view, index), x);
    });
}

void poison(HostTensor &t)
{
    size_t slots = t.storage.size() / dtype_size(t.view.dtype);
    for (size_t s = 0; s < slots; ++s) {
        unsigned char *p = t.storage.data() + s * dtype_size(t.view.dtype);
        if (t.view.dtype == FA_DTYPE_F32) {
            uint32_t nan = 0x7fc00000u;
            std::memcpy(p, &nan, 4);
        } else {
            uint16_t nan = poison_16(t.view.dtype);
            std::memcpy(p, &nan, 2);
        }
    }
}

bool all_elements_written(const HostTensor &t)
{
    bool written = true;
    for_each_index(t.view, [&](const int64_t *index) {
        written = written && !std::isnan(element(t.view, index));
    });
    return written;
}

bool gaps_untouched(const HostTensor &t)
{
    std::vector<bool> in_view(t.storage.size() / dtype_size(t.view.dtype), false);
    for_each_index(t.view, [&](const int64_t *index) {
        in_view[static_cast<size_t>(offset_of(t.view, index))] = true;
    });
    for (size_t s = 0; s < in_view.size(); ++s)
        if (!in_view[s] && !slot_is_poison(t, s))
            return false;
    return true;
}

double element(const fa_tensor &t, const int64_t *index)
{
    return load(t, offset_of(t, index));
}

Reference reference_attention(const fa_tensor &q, const fa_tensor &k, const fa_tensor &v,
                              const fa_params &params, Precision precision)
{
    Batch bt = describe(q, k, params);
    Reference ref;
    ref.rows = rows_of(q);
    ref.heads = bt.heads;
    ref.dim = bt.dim;
    ref.out.assign(static_cast<size_t>(ref.rows * bt.heads * bt.dim), kNaN);
    ref.lse.assign(static_cast<size_t>(ref.rows * bt.heads), kNaN);
    for (int b = 0; b < bt.count; ++b)
        for (int h = 0; h < bt.heads; ++h) {
            int head_k = h / (bt.heads / bt.heads_k);
            HeadData hd = load_head(q, k, v, bt, b, h, head_k);
            for (int64_t i = 0; i < bt.q_len[b]; ++i) {
                RowResult r = attend_row(params, bt, hd, i, q.dtype, precision);
                int64_t g = bt.q_begin[b] + i;
                std::copy(r.out.begin(), r.out.end(),
                          ref.out.begin() + (g * bt.heads + h) * bt.dim);
                ref.lse[g * bt.heads + h] = r.lse;
            }
        }
    return ref;
}

namespace {

// Canonical row of key j of sequence b: fixed length b * s_k + j, varlen cu_seqlens_k[b] + j.
int64_t key_row(const Batch &bt, const fa_tensor &k, int b, int64_t j)
{
    return bt.varlen ? bt.k_begin[b] + j : b * k.shape[1] + j;
}

// One (sequence, head): writes its dq rows and adds its (unscaled, unrounded) dk and dv
// terms to the kv head's rows, which the query heads of a GQA group share.
void backward_head(const fa_params &p, const Batch &bt, const HeadData &hd,
                   const std::vector<double> &dout, int head_k, const fa_tensor &k,
                   const Rounding &r, GradReference &g)
{
    const double scale = r.naive ? double(float(bt.scale)) : bt.scale;
    for (int64_t i = 0; i < bt.q_len[hd.b]; ++i) {
        RowProbabilities row = row_probabilities(p, bt, hd, i, r);
        std::vector<double> out = row_output(bt, hd, row, r);
        std::vector<double> dq(bt.dim, 0.0);
        const double *q = hd.q.data() + i * bt.dim;
        const double *d_o = dout.data() + i * bt.dim;
        double delta = 0.0;
        for (int c = 0; c < bt.dim; ++c)
            delta = r.acc(delta + d_o[c] * out[c]);
        delta = r.rnd(delta);
        for (size_t n = 0; n < row.keys.size(); ++n) {
            const int64_t j = row.keys[n];
            const double *key = hd.k.data() + j * bt.dim;
            const double *value = hd.v.data() + j * bt.dim;
            double *dk = g.dk.data() + (key_row(bt, k, hd.b, j) * g.heads_k + head_k) * bt.dim;
            double *dv = g.dv.data() + (key_row(bt, k, hd.b, j) * g.heads_k + head_k) * bt.dim;
            double dp = 0.0;
            for (int c = 0; c < bt.dim; ++c)
                dp = r.acc(dp + d_o[c] * value[c]);
            double ds = r.rnd(r.rnd(row.prob[n] * (r.rnd(dp) - delta)) * row.slope[n]);
            for (int c = 0; c < bt.dim; ++c) {
                dq[c] = r.acc(dq[c] + ds * key[c]);
                dk[c] = r.acc(dk[c] + ds * q[c]);
                dv[c] = r.acc(dv[c] + row.prob[n] * d_o[c]);
            }
        }
        int64_t g_row = bt.q_begin[hd.b] + i;
        for (int c = 0; c < bt.dim; ++c)
            g.dq[(g_row * g.heads + hd.head) * bt.dim + c] = r.rnd(scale * dq[c]);
    }
}

}  // namespace

GradReference reference_backward(const fa_tensor &q, const fa_tensor &k, const fa_tensor &v,
                                 const fa_tensor &dout, const fa_params &params,
                                 Precision precision)
{
    Batch bt = describe(q, k, params);
    Rounding r{q.dtype, precision == Precision::Naive};
    GradReference g;
    g.rows_q = rows_of(q);
    g.rows_k = rows_of(k);
    g.heads = bt.heads;
    g.heads_k = bt.heads_k;
    g.dim = bt.dim;
    g.dq.assign(static_cast<size_t>(g.rows_q * bt.heads * bt.dim), kNaN);
    g.dk.assign(static_cast<size_t>(g.rows_k * bt.heads_k * bt.dim), 0.0);
    g.dv.assign(g.dk.size(), 0.0);
    for (int b = 0; b < bt.count; ++b)
        for (int h = 0; h < bt.heads; ++h) {
            int head_k = h / (bt.heads / bt.heads_k);
            HeadData hd = load_head(q, k, v, bt, b, h, head_k);
            backward_head(params, bt, hd, load_rows(dout, bt, b, bt.q_begin[b], bt.q_len[b], h),
                          head_k, k, r, g);
        }
    const double scale = r.naive ? double(float(bt.scale)) : bt.scale;
    for (double &x : g.dk)
        x = r.rnd(scale * x);
    for (double &x : g.dv)
        x = r.rnd(x);
    return g;
}

namespace {

double abs_error(double actual, double expected)
{
    if (std::isnan(actual))
        return kInf;
    if (std::isinf(expected) || std::isinf(actual))
        return actual == expected ? 0.0 : kInf;
    return std::fabs(actual - expected);
}

// Rows the reference leaves NaN belong to no sequence and are not compared.
double compare(double actual, double expected)
{
    return std::isnan(expected) ? 0.0 : abs_error(actual, expected);
}

// Max error of a [b, s, h, d] / varlen [total, h, d] tensor against canonical values
// [(g * heads + h) * dim + c] over `rows` canonical rows.
double max_rows_error(const fa_tensor &t, const std::vector<double> &expected, int64_t rows,
                      int heads, int dim)
{
    double worst = 0.0;
    int64_t seq = t.ndim == 4 ? t.shape[1] : 1;
    for (int64_t g = 0; g < rows; ++g)
        for (int h = 0; h < heads; ++h)
            for (int c = 0; c < dim; ++c) {
                int64_t fixed[4] = {g / seq, g % seq, h, c};
                int64_t varlen[3] = {g, h, c};
                double want = expected[(g * heads + h) * dim + c];
                worst = std::max(worst, compare(element(t, t.ndim == 4 ? fixed : varlen), want));
            }
    return worst;
}

double max_difference(const std::vector<double> &a, const std::vector<double> &b)
{
    double worst = 0.0;
    for (size_t n = 0; n < a.size(); ++n)
        worst = std::max(worst, compare(a[n], b[n]));
    return worst;
}

}  // namespace

double max_out_error(const fa_tensor &out, const Reference &ref)
{
    return max_rows_error(out, ref.out, ref.rows, ref.heads, ref.dim);
}

GradErrors grad_errors(const fa_tensor &dq, const fa_tensor &dk, const fa_tensor &dv,
                       const GradReference &ref)
{
    return GradErrors{max_rows_error(dq, ref.dq, ref.rows_q, ref.heads, ref.dim),
                      max_rows_error(dk, ref.dk, ref.rows_k, ref.heads_k, ref.dim),
                      max_rows_error(dv, ref.dv, ref.rows_k, ref.heads_k, ref.dim)};
}

GradErrors grad_difference(const GradReference &a, const GradReference &b)
{
    return GradErrors{max_difference(a.dq, b.dq), max_difference(a.dk, b.dk),
                      max_difference(a.dv, b.dv)};
}

double max_lse_error(const fa_tensor &lse, const Reference &ref)
{
    double worst = 0.0;
    int64_t seq = lse.ndim == 3 ? lse.shape[2] : 1;
    for (int64_t g = 0; g < ref.rows; ++g)
        for (int h = 0; h < ref.heads; ++h) {
            int64_t fixed[3] = {g / seq, h, g % seq};
            int64_t varlen[2] = {h, g};
            double expected = ref.lse[g * ref.heads + h];
            worst = std::max(worst, compare(element(lse, lse.ndim == 3 ? fixed : varlen), expected));
        }
    return worst;
}

double max_out_difference(const Reference &a, const Reference &b)
{
    return max_difference(a.out, b.out);
}

double max_lse_difference(const Reference &a, const Reference &b)
{
    return max_difference(a.lse, b.lse);
}

}  // namespace fa_oracle
