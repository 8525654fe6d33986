// test_cuda_combine.cpp - fa_combine on the CUDA backend: partial attentions over random
// disjoint key ranges (fp64 oracle, rounded to f16/bf16; empty ranges among them, and per
// sequence in varlen) combine into the fp64 attention over all keys. Partials that saw no
// key hold NaN outs with lse -inf or +inf, which must not be read; varlen sequences
// without keys give rows without any partial (0 and -inf). n = 1 .. 128, head dims 8 to
// 256, strided outputs and LSEs, lse NULL; bad arguments fail with their named status and
// leave out and lse as they were. A hidden [.bench] case times the kernel.
#include <catch2/catch.hpp>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "api/dtype.h"
#include "device_tensors.hpp"
#include "oracle.hpp"

using fa_oracle::HostTensor;
using fa_oracle::Reference;

namespace {

struct Spec {
    fa_dtype dtype = FA_DTYPE_F16;
    int batch = 2, seqlen_q = 37, heads = 4, heads_k = 2, head_dim = 72, seqlen_k = 150;
    int n = 2;
    std::vector<int32_t> cu_q, cu_k; // varlen when non-empty (batch = size - 1)
    int out_pad = 0, part_pad = 0;   // extra elements between rows (multiples of 8)
    int lse_pad = 0;                 // extra elements between the LSE's rows of one head
    bool with_lse = true;
};

std::string describe(const Spec &s)
{
    std::ostringstream os;
    os << fa_dtype_name(s.dtype) << " n=" << s.n << " b=" << s.batch << " s_q=" << s.seqlen_q << " s_k="
       << s.seqlen_k << " h=" << s.heads << "/" << s.heads_k << " d=" << s.head_dim
       << " varlen=" << !s.cu_q.empty() << " pads=" << s.out_pad << "," << s.part_pad << "," << s.lse_pad
       << " lse=" << s.with_lse;
    return os.str();
}

// n ranges [c[i], c[i + 1]) cutting 0 .. len at random; ranges 1, 4, 7, ... are empty.
std::vector<int64_t> random_cuts(int n, int64_t len, std::mt19937 &rng)
{
    std::uniform_int_distribution<int64_t> pick(0, len);
    std::vector<int64_t> c(n + 1, 0);
    c[n] = len;
    for (int i = 1; i < n; ++i) c[i] = pick(rng);
    std::sort(c.begin(), c.end());
    for (int i = 2; i < n; i += 3) c[i] = c[i - 1];
    return c;
}

void set_element(HostTensor &t, const std::vector<int64_t> &index, double value)
{
    int64_t at = 0;
    for (size_t i = 0; i < index.size(); ++i) at += index[i] * t.view.stride[i];
    unsigned char *p = static_cast<unsigned char *>(t.view.data) + at * fa_oracle::dtype_size(t.view.dtype);
    const float f = static_cast<float>(value);
    if (t.view.dtype == FA_DTYPE_F32) {
        std::memcpy(p, &f, 4);
        return;
    }
    const uint16_t bits = t.view.dtype == FA_DTYPE_F16 ? fa_f32_to_f16(f) : fa_f32_to_bf16(f);
    std::memcpy(p, &bits, 2);
}

// [b, s, h, d] (varlen [total, h, d]) with `pad` elements after each row's heads.
HostTensor make_rows(const Spec &s, fa_dtype dtype, int heads, int64_t rows, int pad)
{
    const int64_t row = static_cast<int64_t>(heads) * s.head_dim + pad;
    if (!s.cu_q.empty())
        return fa_oracle::make_tensor(dtype, {rows, heads, s.head_dim}, {row, s.head_dim, 1});
    return fa_oracle::make_tensor(dtype, {s.batch, rows, heads, s.head_dim},
                                  {rows * row, row, s.head_dim, 1});
}

// fp32 [b, h, s_q] (varlen [h, total_q]) with `pad` elements after each head's rows.
HostTensor make_lse(const Spec &s, int64_t rows, int pad)
{
    if (!s.cu_q.empty())
        return fa_oracle::make_tensor(FA_DTYPE_F32, {s.heads, rows}, {rows + pad, 1});
    return fa_oracle::make_tensor(FA_DTYPE_F32, {s.batch, s.heads, rows},
                                  {s.heads * (rows + pad), rows + pad, 1});
}

// The keys of one partial: a view of the fixed-length k (the same range for every batch
// entry), or for varlen a packed copy of each sequence's own range, with its cu_seqlens_k.
struct KeyPart {
    HostTensor k, v;
    std::vector<int32_t> cu_k;
};

fa_tensor key_view(const HostTensor &t, int64_t lo, int64_t hi)
{
    fa_tensor view = t.view;
    view.data = static_cast<unsigned char *>(view.data) + lo * view.stride[1] * fa_oracle::dtype_size(view.dtype);
    view.shape[1] = hi - lo;
    return view;
}

void gather_rows(const HostTensor &from, HostTensor &to, int64_t from_row, int64_t to_row, int64_t count)
{
    const size_t row_bytes = static_cast<size_t>(from.view.stride[0]) * fa_oracle::dtype_size(from.view.dtype);
    std::memcpy(static_cast<unsigned char *>(to.view.data) + to_row * row_bytes,
                static_cast<const unsigned char *>(from.view.data) + from_row * row_bytes, count * row_bytes);
}

// Rows of one (global row, head) in the views of fa_fwd's layouts.
std::vector<int64_t> out_index(const Spec &s, int64_t g, int h, int64_t c)
{
    if (!s.cu_q.empty()) return {g, h, c};
    return {g / s.seqlen_q, g % s.seqlen_q, h, c};
}
std::vector<int64_t> lse_index(const Spec &s, int64_t g, int h)
{
    if (!s.cu_q.empty()) return {h, g};
    return {g / s.seqlen_q, h, g % s.seqlen_q};
}

// One partial written from its reference: out rounded to the dtype, the LSE as fp32; where
// it saw no key, out NaN (it must not be read) and lse -inf, or +inf on every other row
// (FlashAttention-2's spelling of "no key"). Returns the largest |out| written.
double write_partial(const Spec &s, const Reference &ref, int index, HostTensor &out, HostTensor &lse)
{
    double largest = 0.0;
    for (int64_t g = 0; g < ref.rows; ++g)
        for (int h = 0; h < s.heads; ++h) {
            const double l = ref.lse[g * s.heads + h];
            const bool empty = std::isinf(l);
            set_element(lse, lse_index(s, g, h), empty && (g + h + index) % 2 ? INFINITY : l);
            for (int64_t c = 0; c < s.head_dim; ++c) {
                const double x = ref.out[(g * s.heads + h) * s.head_dim + c];
                set_element(out, out_index(s, g, h, c), empty ? NAN : x);
                largest = std::max(largest, empty ? 0.0 : std::fabs(x));
            }
        }
    return largest;
}

void check_combine(const Spec &s, uint64_t seed)
{
    INFO(describe(s));
    const bool varlen = !s.cu_q.empty();
    const int batch = varlen ? static_cast<int>(s.cu_q.size()) - 1 : s.batch;
    const int64_t rows_q = varlen ? s.cu_q.back() : s.seqlen_q;
    const int64_t rows_k = varlen ? s.cu_k.back() : s.seqlen_k;
    HostTensor q = make_rows(s, s.dtype, s.heads, rows_q, 0);
    HostTensor k = make_rows(s, s.dtype, s.heads_k, rows_k, 0), v = make_rows(s, s.dtype, s.heads_k, rows_k, 0);
    fa_oracle::fill_normal(q, seed);
    fa_oracle::fill_normal(k, seed + 1);
    fa_oracle::fill_normal(v, seed + 2);
    fa_params params;
    fa_params_init(&params);
    if (varlen) {
        params.cu_seqlens_q = s.cu_q.data();
        params.cu_seqlens_k = s.cu_k.data();
        params.varlen_batch = batch;
    }
    const Reference full = fa_oracle::reference_attention(q.view, k.view, v.view, params, fa_oracle::Precision::Exact);

    // The partials' key ranges: one set for the batch, or per sequence.
    std::mt19937 rng(static_cast<unsigned>(seed));
    std::vector<std::vector<int64_t>> cuts;
    for (int b = 0; b < (varlen ? batch : 1); ++b)
        cuts.push_back(random_cuts(s.n, varlen ? s.cu_k[b + 1] - s.cu_k[b] : s.seqlen_k, rng));
    std::vector<HostTensor> part_out, part_lse;
    std::vector<std::unique_ptr<DeviceTensor>> dev_out, dev_lse;
    std::vector<fa_tensor> out_views, lse_views;
    double largest = 0.0, largest_lse = 0.0;
    part_out.reserve(s.n);
    part_lse.reserve(s.n);
    for (int i = 0; i < s.n; ++i) {
        Reference ref;
        if (varlen) {
            KeyPart kp;
            kp.cu_k.push_back(0);
            for (int b = 0; b < batch; ++b) kp.cu_k.push_back(kp.cu_k.back() + static_cast<int32_t>(cuts[b][i + 1] - cuts[b][i]));
            kp.k = make_rows(s, s.dtype, s.heads_k, kp.cu_k.back(), 0);
            kp.v = make_rows(s, s.dtype, s.heads_k, kp.cu_k.back(), 0);
            for (int b = 0; b < batch; ++b) {
                gather_rows(k, kp.k, s.cu_k[b] + cuts[b][i], kp.cu_k[b], kp.cu_k[b + 1] - kp.cu_k[b]);
                gather_rows(v, kp.v, s.cu_k[b] + cuts[b][i], kp.cu_k[b], kp.cu_k[b + 1] - kp.cu_k[b]);
            }
            fa_params pp = params;
            pp.cu_seqlens_k = kp.cu_k.data();
            ref = fa_oracle::reference_attention(q.view, kp.k.view, kp.v.view, pp, fa_oracle::Precision::Exact);
        } else {
            ref = fa_oracle::reference_attention(q.view, key_view(k, cuts[0][i], cuts[0][i + 1]),
                                                 key_view(v, cuts[0][i], cuts[0][i + 1]), params,
                                                 fa_oracle::Precision::Exact);
        }
        part_out.push_back(make_rows(s, s.dtype, s.heads, rows_q, s.part_pad));
        part_lse.push_back(make_lse(s, rows_q, s.lse_pad));
        largest = std::max(largest, write_partial(s, ref, i, part_out.back(), part_lse.back()));
        for (double l : ref.lse)
            if (!std::isinf(l)) largest_lse = std::max(largest_lse, std::fabs(l));
    }
    for (int i = 0; i < s.n; ++i) {
        dev_out.emplace_back(new DeviceTensor(part_out[i]));
        dev_lse.emplace_back(new DeviceTensor(part_lse[i]));
        out_views.push_back(dev_out.back()->view);
        lse_views.push_back(dev_lse.back()->view);
    }

    HostTensor out = make_rows(s, s.dtype, s.heads, rows_q, s.out_pad), lse = make_lse(s, rows_q, s.lse_pad);
    DeviceTensor d_out(out), d_lse(lse);
    Context ctx;
    fa_status st = fa_combine(ctx.ctx, s.n, out_views.data(), lse_views.data(), &d_out.view,
                              s.with_lse ? &d_lse.view : nullptr);
    INFO("fa_combine: " << fa_status_string(st) << ": " << fa_last_error(ctx.ctx));
    REQUIRE(st == FA_OK);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    d_out.copy_back();
    d_lse.copy_back();

    // Rounding: each partial's out (half an ulp, unit roundoff u, of at most `largest`),
    // then the result's; the LSE in fp32 from fp32 LSEs.
    const double u = s.dtype == FA_DTYPE_F16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
    const double out_bound = 2.5 * u * std::max(largest, 1.0), lse_bound = 1e-5 * (1.0 + largest_lse);
    const double out_error = fa_oracle::max_out_error(out.view, full);
    INFO("out error " << out_error << " (bound " << out_bound << ")");
    CHECK(out_error <= out_bound);
    CHECK(fa_oracle::all_elements_written(out));
    CHECK(fa_oracle::gaps_untouched(out));
    if (s.with_lse) {
        const double lse_error = fa_oracle::max_lse_error(lse.view, full);
        INFO("lse error " << lse_error << " (bound " << lse_bound << ")");
        CHECK(lse_error <= lse_bound);
        CHECK(fa_oracle::all_elements_written(lse));
        CHECK(fa_oracle::gaps_untouched(lse));
    } else {
        CHECK(!fa_oracle::all_elements_written(lse)); // never passed: still poison
    }
}

const fa_dtype kDtypes[] = {FA_DTYPE_F16, FA_DTYPE_BF16};

// Varlen sequences: query lengths with an empty one, key lengths with an empty one (rows
// that no partial saw), lengths off every tile.
Spec varlen_spec(fa_dtype dt, int n, int head_dim)
{
    Spec s;
    s.dtype = dt;
    s.n = n;
    s.head_dim = head_dim;
    s.heads = 3;
    s.heads_k = 1;
    s.cu_q = {0, 5, 5, 22, 23, 60};
    s.cu_k = {0, 40, 97, 97, 98, 211};
    return s;
}

} // namespace

TEST_CASE("cuda combine: partials over random key ranges give the attention over all keys",
          "[cuda][combine][sanitize]")
{
    uint64_t seed = 1;
    for (fa_dtype dt : kDtypes) {
        for (int n : {1, 2, 7}) {
            Spec s;
            s.dtype = dt;
            s.n = n;
            check_combine(s, seed++);
        }
        Spec many; // 128 partials of 300 keys: most hold a few keys, many none
        many.dtype = dt;
        many.n = 128;
        many.head_dim = 8;
        many.seqlen_k = 300;
        many.seqlen_q = 19;
        check_combine(many, seed++);
        Spec wide; // d256 (32 chunk lanes), d128, one head
        wide.dtype = dt;
        wide.n = 7;
        wide.head_dim = 256;
        wide.batch = 3;
        wide.seqlen_q = 67;
        wide.heads = 5;
        wide.heads_k = 5;
        check_combine(wide, seed++);
        wide.head_dim = 128;
        wide.heads = wide.heads_k = 1;
        check_combine(wide, seed++);
    }
}

TEST_CASE("cuda combine: varlen, with sequences no partial saw a key of", "[cuda][combine][sanitize]")
{
    uint64_t seed = 100;
    for (fa_dtype dt : kDtypes)
        for (int n : {1, 2, 7, 128})
            for (int d : {8, 72, 256})
                if (n != 128 || d != 256) check_combine(varlen_spec(dt, n, d), seed++);
}

TEST_CASE("cuda combine: strided outputs, partials and LSEs; lse NULL", "[cuda][combine][sanitize]")
{
    uint64_t seed = 200;
    for (fa_dtype dt : kDtypes) {
        Spec s;
        s.dtype = dt;
        s.n = 7;
        s.out_pad = 16;
        s.part_pad = 8;
        s.lse_pad = 3;
        check_combine(s, seed++);
        s.with_lse = false;
        check_combine(s, seed++);
        Spec v = varlen_spec(dt, 7, 72);
        v.out_pad = 8;
        v.part_pad = 24;
        v.lse_pad = 5;
        check_combine(v, seed++);
    }
}

namespace {

// n partials of one row (b = s_q = h = 1, d = 8) on the device, from the given LSEs and
// one value per partial's out.
struct OneRow {
    fa_dtype dtype;
    std::vector<float> outs, lses;
    std::vector<float> out = std::vector<float>(8);
    float lse = 0.f;
    fa_status combine(fa_context *ctx)
    {
        const int n = static_cast<int>(outs.size());
        std::vector<HostTensor> h_out, h_lse;
        h_out.reserve(n);
        h_lse.reserve(n);
        std::vector<std::unique_ptr<DeviceTensor>> d;
        std::vector<fa_tensor> po, pl;
        for (int i = 0; i < n; ++i) {
            h_out.push_back(fa_oracle::make_tensor(dtype, {1, 1, 1, 8}));
            h_lse.push_back(fa_oracle::make_tensor(FA_DTYPE_F32, {1, 1, 1}));
            for (int64_t c = 0; c < 8; ++c) set_element(h_out.back(), {0, 0, 0, c}, outs[i]);
            set_element(h_lse.back(), {0, 0, 0}, lses[i]);
            d.emplace_back(new DeviceTensor(h_out.back()));
            po.push_back(d.back()->view);
            d.emplace_back(new DeviceTensor(h_lse.back()));
            pl.push_back(d.back()->view);
        }
        HostTensor o = fa_oracle::make_tensor(dtype, {1, 1, 1, 8}), l = fa_oracle::make_tensor(FA_DTYPE_F32, {1, 1, 1});
        DeviceTensor d_o(o), d_l(l);
        fa_status st = fa_combine(ctx, n, po.data(), pl.data(), &d_o.view, &d_l.view);
        REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
        d_o.copy_back();
        d_l.copy_back();
        for (int64_t c = 0; c < 8; ++c) out[c] = static_cast<float>(fa_oracle::element(o.view, std::vector<int64_t>{0, 0, 0, c}.data()));
        lse = static_cast<float>(fa_oracle::element(l.view, std::vector<int64_t>{0, 0, 0}.data()));
        return st;
    }
};

} // namespace

TEST_CASE("cuda combine: partials without keys are not read; no partial: 0 and -inf; NaN: NaN",
          "[cuda][combine]")
{
    Context ctx;
    for (fa_dtype dt : kDtypes) {
        OneRow r{dt, {2.5f, NAN, NAN}, {0.75f, -INFINITY, INFINITY}};
        REQUIRE(r.combine(ctx.ctx) == FA_OK);
        for (float x : r.out) CHECK(x == 2.5f);
        CHECK(r.lse == 0.75f);

        r.lses = {-INFINITY, -INFINITY, INFINITY};
        REQUIRE(r.combine(ctx.ctx) == FA_OK);
        for (float x : r.out) CHECK(x == 0.f);
        CHECK(r.lse == -INFINITY);

        r.outs = {1.f, 1.f};
        r.lses = {0.f, NAN};
        REQUIRE(r.combine(ctx.ctx) == FA_OK);
        CHECK(std::isnan(r.out[0]));
        CHECK(std::isnan(r.lse));
    }
}

namespace {

// A device buffer holding `t`'s bytes and `extra` more; views into it may start anywhere
// (a misaligned one, say).
struct Raw {
    DeviceBuffer buf;
    Raw(const HostTensor &t, size_t extra) : buf(t.storage.size() + extra)
    {
        REQUIRE(cudaMemcpy(buf.ptr, t.storage.data(), t.storage.size(), cudaMemcpyHostToDevice) == cudaSuccess);
    }
    unsigned char *at(size_t byte) { return static_cast<unsigned char *>(buf.ptr) + byte; }
};

std::vector<unsigned char> device_bytes(const DeviceTensor &t)
{
    std::vector<unsigned char> bytes(t.host->storage.size());
    REQUIRE(cudaMemcpy(bytes.data(), t.buf->ptr, bytes.size(), cudaMemcpyDeviceToHost) == cudaSuccess);
    return bytes;
}

} // namespace

TEST_CASE("cuda combine: bad arguments fail with their status and write nothing", "[cuda][combine]")
{
    Context cx;
    const int64_t b = 2, sq = 3, h = 4, d = 16;
    HostTensor pa = fa_oracle::make_tensor(FA_DTYPE_BF16, {b, sq, h, d});
    HostTensor pb = fa_oracle::make_tensor(FA_DTYPE_BF16, {b, sq, h, d});
    HostTensor la = fa_oracle::make_tensor(FA_DTYPE_F32, {b, h, sq});
    HostTensor lb = fa_oracle::make_tensor(FA_DTYPE_F32, {b, h, sq});
    fa_oracle::fill_normal(pa, 1);
    fa_oracle::fill_normal(pb, 2);
    fa_oracle::fill_normal(la, 3);
    fa_oracle::fill_normal(lb, 4);
    HostTensor out = fa_oracle::make_tensor(FA_DTYPE_BF16, {b, sq, h, d});
    HostTensor lse = fa_oracle::make_tensor(FA_DTYPE_F32, {b, h, sq});
    HostTensor padded = fa_oracle::make_tensor(FA_DTYPE_BF16, {b, sq, h, d}, {sq * (h * d + 8), h * d + 8, d, 1});
    DeviceTensor d_pa(pa), d_pb(pb), d_la(la), d_lb(lb), d_out(out), d_lse(lse), d_padded(padded);
    Raw raw(pb, 64);
    const std::vector<unsigned char> out0 = device_bytes(d_out), lse0 = device_bytes(d_lse), pb0 = device_bytes(d_pb);
    fa_tensor parts[2] = {d_pa.view, d_pb.view}, lses[2] = {d_la.view, d_lb.view};
    auto status = [&](int n, const fa_tensor *po, const fa_tensor *pl, fa_tensor *o, fa_tensor *l) {
        fa_status st = fa_combine(cx.ctx, n, po, pl, o, l);
        REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
        return st;
    };
    auto says = [&](const char *what) { return std::string(fa_last_error(cx.ctx)).find(what) != std::string::npos; };

    CHECK(status(0, parts, lses, &d_out.view, &d_lse.view) == FA_ERR_BAD_PARAM);
    CHECK(status(FA_MAX_COMBINE_PARTIALS + 1, parts, lses, &d_out.view, &d_lse.view) == FA_ERR_BAD_PARAM);
    CHECK(status(2, nullptr, lses, &d_out.view, &d_lse.view) == FA_ERR_NULL_POINTER);
    CHECK(status(2, parts, lses, nullptr, &d_lse.view) == FA_ERR_NULL_POINTER);

    fa_tensor wrong[2] = {parts[0], parts[1]};
    wrong[1].shape[2] = 2;
    CHECK(status(2, wrong, lses, &d_out.view, &d_lse.view) == FA_ERR_SHAPE_MISMATCH);
    CHECK(says("partial_out[1]"));
    wrong[1] = parts[1];
    wrong[1].dtype = FA_DTYPE_F16;
    CHECK(status(2, wrong, lses, &d_out.view, &d_lse.view) == FA_ERR_BAD_DTYPE);
    fa_tensor f32[2] = {parts[0], parts[1]}, f32_out = d_out.view; // f32 is the CPU's only
    for (fa_tensor *t : {&f32[0], &f32[1], &f32_out}) {
        t->dtype = FA_DTYPE_F32;
        t->shape[3] = d / 2;
    }
    CHECK(status(2, f32, lses, &f32_out, &d_lse.view) == FA_ERR_UNSUPPORTED);

    // What the GPU kernel adds: one layout for every partial, 16-byte rows.
    wrong[1] = d_padded.view;
    CHECK(status(2, wrong, lses, &d_out.view, &d_lse.view) == FA_ERR_UNSUPPORTED);
    CHECK(says("one layout"));
    fa_tensor padded_lse[2] = {lses[0], lses[1]};
    HostTensor lpad = fa_oracle::make_tensor(FA_DTYPE_F32, {b, h, sq}, {h * (sq + 1), sq + 1, 1});
    DeviceTensor d_lpad(lpad);
    padded_lse[1] = d_lpad.view;
    CHECK(status(2, parts, padded_lse, &d_out.view, &d_lse.view) == FA_ERR_UNSUPPORTED);
    CHECK(says("partial_lse[1]"));
    wrong[1] = parts[1];
    wrong[1].data = raw.at(2);
    CHECK(status(2, wrong, lses, &d_out.view, &d_lse.view) == FA_ERR_UNSUPPORTED);
    CHECK(says("16-byte aligned rows"));
    fa_tensor narrow[2] = {parts[0], parts[1]}, narrow_out = d_out.view;
    for (fa_tensor *t : {&narrow[0], &narrow[1], &narrow_out}) {
        t->shape[3] = 12;
        t->stride[2] = 12;
        t->stride[1] = 48;
        t->stride[0] = 144;
    }
    CHECK(status(2, narrow, lses, &narrow_out, &d_lse.view) == FA_ERR_UNSUPPORTED);
    CHECK(says("head_dim a multiple of 8"));

    fa_tensor aliased = parts[1];
    CHECK(status(2, parts, lses, &aliased, &d_lse.view) == FA_ERR_BAD_STRIDE);
    CHECK(says("overlaps partial_out[1]"));
    fa_tensor lse_over_out = d_lse.view;
    lse_over_out.data = d_out.view.data;
    CHECK(status(2, parts, lses, &d_out.view, &lse_over_out) == FA_ERR_BAD_STRIDE);

    CHECK(device_bytes(d_out) == out0);
    CHECK(device_bytes(d_lse) == lse0);
    CHECK(device_bytes(d_pb) == pb0);

    REQUIRE(status(2, parts, lses, &d_out.view, &d_lse.view) == FA_OK); // the same call, well formed
    d_out.copy_back();
    d_lse.copy_back();
    CHECK(fa_oracle::all_elements_written(out));
    CHECK(fa_oracle::all_elements_written(lse));
}

namespace {

// One timed fa_combine: n bf16 partials [b, s_q, h, d] with finite random LSEs, the
// bytes it must move (each partial's out and LSE read once, out and lse written once),
// and a device-to-device copy of as many bytes read and written in the same run.
void time_combine(int n, int64_t b, int64_t sq, int64_t h, int64_t d)
{
    const int64_t elems = b * sq * h * d, rows = b * h * sq;
    DeviceBuffer parts(static_cast<size_t>(n * elems * 2)), plse(static_cast<size_t>(n * rows * 4));
    DeviceBuffer out(static_cast<size_t>(elems * 2)), lse(static_cast<size_t>(rows * 4));
    std::vector<float> lse_host(static_cast<size_t>(n * rows));
    std::mt19937 rng(5);
    std::normal_distribution<float> normal(0.f, 2.f);
    for (float &x : lse_host) x = normal(rng);
    REQUIRE(cudaMemcpy(plse.ptr, lse_host.data(), lse_host.size() * 4, cudaMemcpyHostToDevice) == cudaSuccess);
    REQUIRE(cudaMemset(parts.ptr, 0x3c, static_cast<size_t>(n * elems * 2)) == cudaSuccess);
    std::vector<fa_tensor> po, pl;
    for (int i = 0; i < n; ++i) {
        po.push_back(fa_tensor_bshd(static_cast<char *>(parts.ptr) + i * elems * 2, FA_DTYPE_BF16, b, sq, h, d));
        pl.push_back(fa_tensor_lse(static_cast<float *>(plse.ptr) + i * rows, b, h, sq));
    }
    fa_tensor to = fa_tensor_bshd(out.ptr, FA_DTYPE_BF16, b, sq, h, d);
    fa_tensor tl = fa_tensor_lse(static_cast<float *>(lse.ptr), b, h, sq);
    Context cx;
    cudaEvent_t start, stop;
    REQUIRE(cudaEventCreate(&start) == cudaSuccess);
    REQUIRE(cudaEventCreate(&stop) == cudaSuccess);
    const int reps = 50;
    float combine_ms = 0.f, copy_ms = 0.f;
    REQUIRE(fa_combine(cx.ctx, n, po.data(), pl.data(), &to, &tl) == FA_OK); // warm up
    cudaEventRecord(start);
    for (int r = 0; r < reps; ++r) fa_combine(cx.ctx, n, po.data(), pl.data(), &to, &tl);
    cudaEventRecord(stop);
    REQUIRE(cudaEventSynchronize(stop) == cudaSuccess);
    cudaEventElapsedTime(&combine_ms, start, stop);
    const double bytes = static_cast<double>(n) * (elems * 2 + rows * 4) + elems * 2 + rows * 4;
    const size_t half = static_cast<size_t>(bytes / 2) & ~static_cast<size_t>(255);
    DeviceBuffer copy(2 * half);
    cudaMemcpyAsync(copy.ptr, static_cast<char *>(copy.ptr) + half, half, cudaMemcpyDeviceToDevice);
    cudaEventRecord(start);
    for (int r = 0; r < reps; ++r)
        cudaMemcpyAsync(copy.ptr, static_cast<char *>(copy.ptr) + half, half, cudaMemcpyDeviceToDevice);
    cudaEventRecord(stop);
    REQUIRE(cudaEventSynchronize(stop) == cudaSuccess);
    cudaEventElapsedTime(&copy_ms, start, stop);
    const double us = 1e3 * combine_ms / reps, copy_us = 1e3 * copy_ms / reps;
    std::printf("fa_combine n=%d b=%lld s_q=%lld h=%lld d=%lld bf16: %.1f MB moved in %.2f us = %.0f GB/s "
                "(copy of the same bytes: %.2f us = %.0f GB/s)\n",
                n, (long long)b, (long long)sq, (long long)h, (long long)d, bytes / 1e6, us, bytes / us / 1e3,
                copy_us, 2.0 * half / copy_us / 1e3);
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
}

} // namespace

TEST_CASE("cuda combine: bandwidth", "[.bench]")
{
    time_combine(8, 16, 1, 32, 128);
    time_combine(128, 1, 1, 32, 128);
    time_combine(4, 4, 4096, 32, 128);
    time_combine(2, 1, 1, 32, 128);
}
