// oracle.cpp - oracle.hpp's tensor helpers and metrics, and its fp64 / same-precision
// attention (forward and backward) as whole-tensor calls over the project's one reference,
// tests/reference/fa_reference.c, row by row, its heads spread over the host's cores
// (results bitwise the same as one thread's: every output element has one writer, summed
// in the same order).
#include "oracle.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
#include <mutex>
#include <new>
#include <thread>
#include <vector>

#include "fa_reference.h"

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

// A head of the C reference that frees itself (tests may fail, that is throw, mid-loop).
class LoadedHead {
public:
    LoadedHead(const fa_ref_problem &p, int batch, int head, Precision precision)
    {
        fa_ref_precision mode = precision == Precision::Naive ? FA_REF_NAIVE : FA_REF_EXACT;
        if (!fa_ref_head_load(&head_, &p, batch, head, mode))
            throw std::bad_alloc();
    }
    ~LoadedHead() { fa_ref_head_free(&head_); }
    LoadedHead(const LoadedHead &) = delete;
    LoadedHead &operator=(const LoadedHead &) = delete;
    const fa_ref_head *get() const { return &head_; }

private:
    fa_ref_head head_;
};

// body(i) for every i in [0, n), on up to the host's core count of threads, each taking
// the next i in turn; the first exception a body throws is rethrown once all have ended.
// The GPU tests' oracle time was most of a GPU sweep's (the device host has 16 cores).
template <class Body>
void for_each_index(int n, Body body)
{
    const int threads = std::max(1, std::min<int>(n, static_cast<int>(std::thread::hardware_concurrency())));
    std::atomic<int> next(0);
    std::exception_ptr failure;
    std::mutex failure_lock;
    const auto work = [&]() {
        for (int i = next++; i < n; i = next++) {
            try {
                body(i);
            } catch (...) {
                std::lock_guard<std::mutex> hold(failure_lock);
                if (!failure)
                    failure = std::current_exception();
            }
        }
    };
    std::vector<std::thread> pool;
    for (int t = 1; t < threads; ++t)
        pool.emplace_back(work);
    work();
    for (std::thread &t : pool)
        t.join();
    if (failure)
        std::rethrow_exception(failure);
}

// Scratch of one key per entry; never empty, so data() is a real pointer.
std::vector<double> per_key(const fa_ref_head *head)
{
    return std::vector<double>(static_cast<size_t>(std::max<int64_t>(head->seq.k_len, 1)));
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
    return fa_ref_round_to_dtype(x, dtype);
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
    return fa_ref_element(&t, index);
}

Reference reference_attention(const fa_tensor &q, const fa_tensor &k, const fa_tensor &v,
                              const fa_params &params, Precision precision)
{
    fa_ref_problem p;
    fa_ref_describe(&p, &q, &k, &v, &params);
    Reference ref;
    ref.rows = rows_of(q);
    ref.heads = p.heads;
    ref.dim = p.dim;
    ref.out.assign(static_cast<size_t>(ref.rows * p.heads * p.dim), kNaN);
    ref.lse.assign(static_cast<size_t>(ref.rows * p.heads), kNaN);
    // A (batch, head) pair's rows are its own.
    for_each_index(p.batch * p.heads, [&](int pair) {
        const int b = pair / p.heads, h = pair % p.heads;
        LoadedHead loaded(p, b, h, precision);
        const fa_ref_head *head = loaded.get();
        std::vector<double> prob = per_key(head), slope = per_key(head);
        for (int64_t i = 0; i < head->seq.q_len; ++i) {
            int64_t g = head->seq.q_begin + i;
            ref.lse[g * p.heads + h] = fa_ref_row_probabilities(head, i, prob.data(), slope.data());
            fa_ref_row_output(head, i, prob.data(), &ref.out[(g * p.heads + h) * p.dim]);
        }
    });
    return ref;
}

GradReference reference_backward(const fa_tensor &q, const fa_tensor &k, const fa_tensor &v,
                                 const fa_tensor &dout, const fa_params &params,
                                 Precision precision)
{
    fa_ref_problem p;
    fa_ref_describe(&p, &q, &k, &v, &params);
    GradReference g;
    g.rows_q = rows_of(q);
    g.rows_k = rows_of(k);
    g.heads = p.heads;
    g.heads_k = p.heads_k;
    g.dim = p.dim;
    g.dq.assign(static_cast<size_t>(g.rows_q * p.heads * p.dim), kNaN);
    g.dk.assign(static_cast<size_t>(g.rows_k * p.heads_k * p.dim), 0.0);
    g.dv.assign(g.dk.size(), 0.0);
    const int64_t kv_row_stride = static_cast<int64_t>(p.heads_k) * p.dim;
    // One KV head's dk and dv rows take every query head of its group (and, with a batch
    // stride of 0, every batch entry): one thread per KV head, which adds them in the
    // order of a single thread's walk over (batch, head).
    const int group = p.heads_k > 0 ? p.heads / p.heads_k : 0;
    for_each_index(p.heads_k, [&](int kv_head) {
        for (int b = 0; b < p.batch; ++b)
            for (int h = kv_head * group; h < (kv_head + 1) * group; ++h) {
                LoadedHead loaded(p, b, h, precision);
                const fa_ref_head *head = loaded.get();
                std::unique_ptr<double, void (*)(void *)> dout_rows(fa_ref_head_query_rows(head, &dout), std::free);
                if (!dout_rows)
                    throw std::bad_alloc();
                const int64_t first_kv = (head->seq.k_begin * p.heads_k + head->head_k) * p.dim;
                std::vector<double> prob = per_key(head), slope = per_key(head), out(p.dim);
                for (int64_t i = 0; i < head->seq.q_len; ++i) {
                    int64_t row = head->seq.q_begin + i;
                    fa_ref_row_probabilities(head, i, prob.data(), slope.data());
                    fa_ref_row_output(head, i, prob.data(), out.data());
                    fa_ref_row_backward(head, i, prob.data(), slope.data(), dout_rows.get() + i * p.dim,
                                        out.data(), &g.dq[(row * p.heads + h) * p.dim], g.dk.data() + first_kv,
                                        g.dv.data() + first_kv, kv_row_stride);
                }
            }
    });
    // The softmax scale of dK and the final rounding, once every query head is summed.
    const bool naive = precision == Precision::Naive;
    const double scale = naive ? double(float(p.scale)) : p.scale;
    for (double &x : g.dk)
        x = naive ? round_to_dtype(scale * x, q.dtype) : scale * x;
    for (double &x : g.dv)
        x = naive ? round_to_dtype(x, q.dtype) : x;
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
