// test_cuda_hopper_primitives.cpp - src/cuda/fa_hopper.h on an sm_90 device, one
// primitive at a time (issue 13, docs/research/issue13_hopper.md, landing step 1): wgmma
// tile products from 128-byte-swizzled shared memory (and A from registers) against an
// fp64 host product of the same rounded inputs, for f16 and bf16; TMA boxes landed on an
// mbarrier compared byte for byte with the swizzled image the wgmma descriptors assume,
// boxes crossing the tensor's edges included (zero fill); TMA-loaded d = 128 tiles
// feeding wgmma (S = Q·Kᵀ over two 64-column blocks); S accumulators repacked into the A
// registers of O = P·V (the attention inner loop's layout identity); one query tile of
// attention through a producer/consumer warpgroup pair and a 2-stage TMA ring on full and
// empty mbarriers; setmaxnreg with named barriers.
// The wgmma shapes are every N of src/cuda/fa_wgmma_shapes.h. Catch2 2 has no SKIP: on a device other than sm_90 each case says so (WARN) and
// returns; without a device the binary exits 4 (gpu_main.cpp). Built only when 90 is in
// FA_CUDA_ARCHS (the kernels are sm_90a code).
#include <catch2/catch.hpp>
#include <cuda.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "api/dtype.h"
#include "fa_nv_layouts.h"
#include "fa_tensor_map.h"
#include "hopper_primitives.h"

namespace {

bool device_is_sm90()
{
    int dev = 0;
    cudaDeviceProp prop;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&prop, dev) != cudaSuccess)
        return false;
    return prop.major == 9 && prop.minor == 0;
}

#define FA_REQUIRE_SM90()                                                         \
    do {                                                                          \
        if (!device_is_sm90()) {                                                  \
            WARN("skipped: the device is not sm_90 (these kernels are sm_90a)"); \
            return;                                                               \
        }                                                                         \
    } while (0)

struct Buffer {
    void *ptr = nullptr;
    explicit Buffer(size_t bytes) { REQUIRE(cudaMalloc(&ptr, bytes) == cudaSuccess); }
    ~Buffer() { cudaFree(ptr); }
    Buffer(const Buffer &) = delete;
    Buffer &operator=(const Buffer &) = delete;
};

uint16_t to_bits(float x, bool bf16) { return bf16 ? fa_f32_to_bf16(x) : fa_f32_to_f16(x); }
double to_value(uint16_t h, bool bf16) { return bf16 ? fa_bf16_to_f32(h) : fa_f16_to_f32(h); }

std::vector<uint16_t> random_matrix(size_t n, bool bf16, std::mt19937 &rng)
{
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    std::vector<uint16_t> m(n);
    for (uint16_t &x : m)
        x = to_bits(u(rng), bf16);
    return m;
}

struct WgmmaCase {
    FaTestWgmmaForm form;
    int n;
};

} // namespace

TEST_CASE("hopper wgmma tile products match an fp64 product", "[hopper][wgmma]")
{
    FA_REQUIRE_SM90();
    std::vector<WgmmaCase> cases = {{kSsNmaj, 64}};
    for (int n : kWgmmaShapes) {
        cases.push_back({kSsKmaj, n});
        cases.push_back({kRsNmaj, n});
    }
    std::mt19937 rng(1234);
    for (bool bf16 : {false, true})
        for (const WgmmaCase &c : cases) {
            static const char *const forms[] = {"ss, B K-major", "rs, B MN-major", "ss, B MN-major"};
            const bool b_kn = c.form != kSsKmaj; // B stored [k][n]
            INFO("m64n" << c.n << "k16 " << forms[c.form] << (bf16 ? " bf16" : " f16"));
            const int M = 64, K = 64, N = c.n;
            std::vector<uint16_t> a = random_matrix((size_t)M * K, bf16, rng);
            std::vector<uint16_t> b = random_matrix((size_t)N * K, bf16, rng);
            std::vector<float> d((size_t)M * N, NAN);
            Buffer da(a.size() * 2), db(b.size() * 2), dd(d.size() * 4);
            REQUIRE(cudaMemcpy(da.ptr, a.data(), a.size() * 2, cudaMemcpyHostToDevice) == cudaSuccess);
            REQUIRE(cudaMemcpy(db.ptr, b.data(), b.size() * 2, cudaMemcpyHostToDevice) == cudaSuccess);
            REQUIRE(cudaMemcpy(dd.ptr, d.data(), d.size() * 4, cudaMemcpyHostToDevice) == cudaSuccess); // poison
            REQUIRE(fa_test_wgmma(c.form, c.n, bf16, (const uint16_t *)da.ptr, (const uint16_t *)db.ptr,
                                  (float *)dd.ptr) == 0);
            REQUIRE(cudaMemcpy(d.data(), dd.ptr, d.size() * 4, cudaMemcpyDeviceToHost) == cudaSuccess);
            double worst = 0.0;
            int wrong = 0;
            for (int i = 0; i < M; ++i)
                for (int j = 0; j < N; ++j) {
                    double ref = 0.0;
                    for (int k = 0; k < K; ++k)
                        ref += to_value(a[(size_t)i * K + k], bf16) *
                               to_value(b_kn ? b[(size_t)k * N + j] : b[(size_t)j * K + k], bf16);
                    // fp32 accumulation of 64 products of magnitude < 1: well under 1e-4.
                    const double e = std::fabs((double)d[(size_t)i * N + j] - ref);
                    if (!(e <= 1e-4))
                        ++wrong;
                    worst = std::isnan(e) ? INFINITY : std::max(worst, e);
                }
            INFO("largest error " << worst << ", " << wrong << " of " << M * N << " elements off");
            CHECK(wrong == 0);
        }
}

namespace {

// One TMA case: a 16-bit tensor of `rank` dims (dims[0] innermost, byte strides), a box,
// and two box positions; the expected shared image is built on the host from the source.
struct TmaCase {
    const char *name;
    int rank;
    cuuint64_t dims[4];
    cuuint64_t pitch_elems[3]; // element strides of dims 1..rank-1
    cuuint32_t box[4];
    bool swizzle;
    int first[4], second[4];
};

// The bytes the box at `at` should leave in shared memory: box elements in box order
// (innermost fastest), 128-byte rows swizzled when asked, zeros outside the tensor.
std::vector<uint8_t> expected_box(const TmaCase &c, const std::vector<uint16_t> &src, const int at[4])
{
    size_t elems = 1;
    for (int r = 0; r < c.rank; ++r)
        elems *= c.box[r];
    std::vector<uint8_t> img(elems * 2, 0);
    const size_t row_elems = c.box[0];
    for (size_t e = 0; e < elems; ++e) {
        size_t rest = e;
        long long coord[4] = {0, 0, 0, 0};
        bool inside = true;
        size_t offset = 0;
        for (int r = 0; r < c.rank; ++r) {
            const long long local = (long long)(rest % c.box[r]);
            rest /= c.box[r];
            coord[r] = at[r] + local;
            inside = inside && coord[r] >= 0 && coord[r] < (long long)c.dims[r];
        }
        if (inside) {
            offset = (size_t)coord[0];
            for (int r = 1; r < c.rank; ++r)
                offset += (size_t)coord[r] * c.pitch_elems[r - 1];
        }
        const uint16_t v = inside ? src[offset] : 0;
        const size_t row = e / row_elems, col = e % row_elems;
        const size_t byte = c.swizzle ? fa_sw128_offset((int)row, (int)col) : e * 2;
        std::memcpy(&img[byte], &v, 2);
    }
    return img;
}

} // namespace

TEST_CASE("hopper TMA boxes land on an mbarrier, swizzled and zero-filled", "[hopper][tma]")
{
    FA_REQUIRE_SM90();
    fa_nv_encode_tiled_fn encode = fa_nv_find_encode_tiled();
    REQUIRE(encode != nullptr);
    // 2D: 100 rows of d = 56 (no multiple of 64: the last 8 columns of each 64-wide box
    // are outside), rows 72 elements apart; the second box starts at row 64 (36 rows in).
    // 3D: BSHD at one batch entry, (d 64, head 3, row 100), head stride 64, row stride 3 *
    // 64 + 8; a box of one head's 64 rows, the second crossing the last row. 4D: (d 64,
    // head 2, row 40, batch 2), the box 64 x 1 x 32 x 1 at batch 1, rows 32.. (8 in).
    const TmaCase cases[] = {
        {"2d swizzled", 2, {56, 100}, {72}, {64, 64}, true, {0, 0}, {0, 64}},
        {"2d plain", 2, {56, 100}, {72}, {64, 64}, false, {0, 10}, {0, 64}},
        {"3d swizzled bshd", 3, {64, 3, 100}, {64, 200}, {64, 1, 64}, true, {0, 1, 0}, {0, 2, 64}},
        {"4d swizzled bshd", 4, {64, 2, 40, 2}, {64, 136, 136 * 40}, {64, 1, 32, 1}, true, {0, 1, 0, 0}, {0, 0, 32, 1}},
    };
    std::mt19937 rng(99);
    for (const TmaCase &c : cases)
        for (bool bf16 : {false, true}) {
            INFO(c.name << (bf16 ? " bf16" : " f16"));
            size_t total = c.dims[0];
            for (int r = 1; r < c.rank; ++r)
                total = std::max(total, (size_t)(c.dims[r] * c.pitch_elems[r - 1]));
            std::vector<uint16_t> src = random_matrix(total, bf16, rng);
            Buffer dsrc(total * 2);
            REQUIRE(cudaMemcpy(dsrc.ptr, src.data(), total * 2, cudaMemcpyHostToDevice) == cudaSuccess);
            cuuint64_t strides[3];
            for (int r = 0; r + 1 < c.rank; ++r)
                strides[r] = c.pitch_elems[r] * 2;
            alignas(64) CUtensorMap map;
            REQUIRE(fa_nv_tensor_map_16bit(encode, &map, bf16, c.rank, dsrc.ptr, c.dims, strides, c.box, c.swizzle) ==
                    CUDA_SUCCESS);
            const std::vector<uint8_t> want0 = expected_box(c, src, c.first), want1 = expected_box(c, src, c.second);
            const unsigned bytes = (unsigned)want0.size();
            std::vector<uint8_t> got(2 * (size_t)bytes, 0x5A);
            Buffer dout(got.size());
            REQUIRE(cudaMemcpy(dout.ptr, got.data(), got.size(), cudaMemcpyHostToDevice) == cudaSuccess);
            REQUIRE(fa_test_tma_two_loads(&map, c.rank, c.first, c.second, bytes, (uint8_t *)dout.ptr) == 0);
            REQUIRE(cudaMemcpy(got.data(), dout.ptr, got.size(), cudaMemcpyDeviceToHost) == cudaSuccess);
            CHECK(std::memcmp(got.data(), want0.data(), bytes) == 0);
            CHECK(std::memcmp(got.data() + bytes, want1.data(), bytes) == 0);
        }
}

TEST_CASE("hopper TMA-loaded Q and K tiles of d 128 feed wgmma (S = Q·Kᵀ)", "[hopper][tma][wgmma]")
{
    FA_REQUIRE_SM90();
    fa_nv_encode_tiled_fn encode = fa_nv_find_encode_tiled();
    REQUIRE(encode != nullptr);
    std::mt19937 rng(7);
    for (bool bf16 : {false, true}) {
        INFO((bf16 ? "bf16" : "f16"));
        const int rows = 64, d = 128;
        std::vector<uint16_t> q = random_matrix((size_t)rows * d, bf16, rng), k = random_matrix((size_t)rows * d, bf16, rng);
        std::vector<float> s((size_t)rows * rows, NAN);
        Buffer dq(q.size() * 2), dk(k.size() * 2), ds(s.size() * 4);
        REQUIRE(cudaMemcpy(dq.ptr, q.data(), q.size() * 2, cudaMemcpyHostToDevice) == cudaSuccess);
        REQUIRE(cudaMemcpy(dk.ptr, k.data(), k.size() * 2, cudaMemcpyHostToDevice) == cudaSuccess);
        REQUIRE(cudaMemcpy(ds.ptr, s.data(), s.size() * 4, cudaMemcpyHostToDevice) == cudaSuccess);
        const cuuint64_t dims[2] = {(cuuint64_t)d, (cuuint64_t)rows}, strides[1] = {(cuuint64_t)d * 2};
        const cuuint32_t box[2] = {64, 64};
        alignas(64) CUtensorMap qmap, kmap;
        REQUIRE(fa_nv_tensor_map_16bit(encode, &qmap, bf16, 2, dq.ptr, dims, strides, box, 1) == CUDA_SUCCESS);
        REQUIRE(fa_nv_tensor_map_16bit(encode, &kmap, bf16, 2, dk.ptr, dims, strides, box, 1) == CUDA_SUCCESS);
        REQUIRE(fa_test_tma_qk(bf16, &qmap, &kmap, (float *)ds.ptr) == 0);
        REQUIRE(cudaMemcpy(s.data(), ds.ptr, s.size() * 4, cudaMemcpyDeviceToHost) == cudaSuccess);
        int wrong = 0;
        double worst = 0.0;
        for (int i = 0; i < rows; ++i)
            for (int j = 0; j < rows; ++j) {
                double ref = 0.0;
                for (int c = 0; c < d; ++c)
                    ref += to_value(q[(size_t)i * d + c], bf16) * to_value(k[(size_t)j * d + c], bf16);
                const double e = std::fabs((double)s[(size_t)i * rows + j] - ref);
                if (!(e <= 1e-4))
                    ++wrong;
                worst = std::isnan(e) ? INFINITY : std::max(worst, e);
            }
        INFO("largest error " << worst << ", " << wrong << " of " << rows * rows << " elements off");
        CHECK(wrong == 0);
    }
}

TEST_CASE("hopper S accumulators repack into the A registers of O = P·V", "[hopper][wgmma]")
{
    FA_REQUIRE_SM90();
    std::mt19937 rng(11);
    for (bool bf16 : {false, true}) {
        INFO((bf16 ? "bf16" : "f16"));
        const int n = 64;
        std::vector<uint16_t> q = random_matrix(n * n, bf16, rng), k = random_matrix(n * n, bf16, rng),
                              v = random_matrix(n * n, bf16, rng);
        std::vector<float> o(n * n, NAN);
        std::vector<uint16_t> p(n * n, 0xffff);
        Buffer dq(n * n * 2), dk(n * n * 2), dv(n * n * 2), dout(n * n * 4), dp(n * n * 2);
        REQUIRE(cudaMemcpy(dq.ptr, q.data(), n * n * 2, cudaMemcpyHostToDevice) == cudaSuccess);
        REQUIRE(cudaMemcpy(dk.ptr, k.data(), n * n * 2, cudaMemcpyHostToDevice) == cudaSuccess);
        REQUIRE(cudaMemcpy(dv.ptr, v.data(), n * n * 2, cudaMemcpyHostToDevice) == cudaSuccess);
        REQUIRE(cudaMemcpy(dout.ptr, o.data(), n * n * 4, cudaMemcpyHostToDevice) == cudaSuccess);
        REQUIRE(cudaMemcpy(dp.ptr, p.data(), n * n * 2, cudaMemcpyHostToDevice) == cudaSuccess);
        REQUIRE(fa_test_chain(bf16, (const uint16_t *)dq.ptr, (const uint16_t *)dk.ptr, (const uint16_t *)dv.ptr,
                              (float *)dout.ptr, (uint16_t *)dp.ptr) == 0);
        REQUIRE(cudaMemcpy(o.data(), dout.ptr, n * n * 4, cudaMemcpyDeviceToHost) == cudaSuccess);
        REQUIRE(cudaMemcpy(p.data(), dp.ptr, n * n * 2, cudaMemcpyDeviceToHost) == cudaSuccess);
        // P is S rounded once to the type: within half an ulp of the fp64 S (plus the fp32
        // accumulation's error); O is the fp64 product of that P with V.
        const double ulp = bf16 ? 1.0 / 128 : 1.0 / 1024; // spacing relative to the power of two below
        int bad_p = 0, bad_o = 0;
        for (int i = 0; i < n; ++i)
            for (int j = 0; j < n; ++j) {
                double s = 0.0, out = 0.0;
                for (int c = 0; c < n; ++c) {
                    s += to_value(q[i * n + c], bf16) * to_value(k[j * n + c], bf16);
                    out += to_value(p[i * n + c], bf16) * to_value(v[c * n + j], bf16);
                }
                const double pe = std::fabs(to_value(p[i * n + j], bf16) - s);
                if (!(pe <= 0.5 * ulp * std::fabs(s) + 1e-4))
                    ++bad_p;
                if (!(std::fabs((double)o[i * n + j] - out) <= 1e-3))
                    ++bad_o;
            }
        INFO(bad_p << " P and " << bad_o << " O elements off");
        CHECK(bad_p == 0);
        CHECK(bad_o == 0);
    }
}

TEST_CASE("hopper producer/consumer pipeline: one query tile of attention", "[hopper][pipe]")
{
    FA_REQUIRE_SM90();
    fa_nv_encode_tiled_fn encode = fa_nv_find_encode_tiled();
    REQUIRE(encode != nullptr);
    std::mt19937 rng(5);
    for (bool bf16 : {false, true})
        for (int d : {64, 128})
            for (int seqlen_k : {64, 300, 1000}) {
                INFO((bf16 ? "bf16" : "f16") << " d " << d << " s_k " << seqlen_k);
                const int m = 64;
                std::vector<uint16_t> q = random_matrix((size_t)m * d, bf16, rng),
                                      k = random_matrix((size_t)seqlen_k * d, bf16, rng),
                                      v = random_matrix((size_t)seqlen_k * d, bf16, rng);
                std::vector<float> o((size_t)m * d, NAN);
                Buffer dq(q.size() * 2), dk(k.size() * 2), dv(v.size() * 2), dout(o.size() * 4);
                REQUIRE(cudaMemcpy(dq.ptr, q.data(), q.size() * 2, cudaMemcpyHostToDevice) == cudaSuccess);
                REQUIRE(cudaMemcpy(dk.ptr, k.data(), k.size() * 2, cudaMemcpyHostToDevice) == cudaSuccess);
                REQUIRE(cudaMemcpy(dv.ptr, v.data(), v.size() * 2, cudaMemcpyHostToDevice) == cudaSuccess);
                REQUIRE(cudaMemcpy(dout.ptr, o.data(), o.size() * 4, cudaMemcpyHostToDevice) == cudaSuccess);
                const cuuint64_t stride[1] = {(cuuint64_t)d * 2};
                const cuuint64_t q_dims[2] = {(cuuint64_t)d, (cuuint64_t)m}, kv_dims[2] = {(cuuint64_t)d, (cuuint64_t)seqlen_k};
                const cuuint32_t box[2] = {64, 64};
                alignas(64) CUtensorMap qmap, kmap, vmap;
                REQUIRE(fa_nv_tensor_map_16bit(encode, &qmap, bf16, 2, dq.ptr, q_dims, stride, box, 1) == CUDA_SUCCESS);
                REQUIRE(fa_nv_tensor_map_16bit(encode, &kmap, bf16, 2, dk.ptr, kv_dims, stride, box, 1) == CUDA_SUCCESS);
                REQUIRE(fa_nv_tensor_map_16bit(encode, &vmap, bf16, 2, dv.ptr, kv_dims, stride, box, 1) == CUDA_SUCCESS);
                const double scale = 1.0 / std::sqrt((double)d);
                REQUIRE(fa_test_pipe(bf16, d, &qmap, &kmap, &vmap, seqlen_k, (float)(scale * 1.4426950408889634),
                                     (float *)dout.ptr) == 0);
                REQUIRE(cudaMemcpy(o.data(), dout.ptr, o.size() * 4, cudaMemcpyDeviceToHost) == cudaSuccess);
                // fp64 attention of the rounded inputs; the kernel rounds P to the type once
                // (at most 2^-8 / 2^-11 relative per weight), inside these bounds for |v| < 1.
                const double tol = bf16 ? 3e-3 : 1e-3;
                int wrong = 0;
                double worst = 0.0;
                std::vector<double> w(seqlen_k);
                for (int i = 0; i < m; ++i) {
                    double mx = -INFINITY, sum = 0.0;
                    for (int j = 0; j < seqlen_k; ++j) {
                        double dot = 0.0;
                        for (int c = 0; c < d; ++c)
                            dot += to_value(q[(size_t)i * d + c], bf16) * to_value(k[(size_t)j * d + c], bf16);
                        w[j] = dot * scale;
                        mx = std::max(mx, w[j]);
                    }
                    for (int j = 0; j < seqlen_k; ++j)
                        sum += (w[j] = std::exp(w[j] - mx));
                    for (int c = 0; c < d; ++c) {
                        double ref = 0.0;
                        for (int j = 0; j < seqlen_k; ++j)
                            ref += w[j] * to_value(v[(size_t)j * d + c], bf16);
                        ref /= sum;
                        const double e = std::fabs((double)o[(size_t)i * d + c] - ref);
                        if (!(e <= tol))
                            ++wrong;
                        worst = std::isnan(e) ? INFINITY : std::max(worst, e);
                    }
                }
                INFO("largest error " << worst << ", " << wrong << " of " << m * d << " elements off");
                CHECK(wrong == 0);
            }
}

TEST_CASE("hopper setmaxnreg and named barriers hand off between warpgroups", "[hopper][roles]")
{
    FA_REQUIRE_SM90();
    std::vector<int> out(256, 0);
    Buffer dout(out.size() * 4);
    REQUIRE(fa_test_roles((int *)dout.ptr) == 0);
    REQUIRE(cudaMemcpy(out.data(), dout.ptr, out.size() * 4, cudaMemcpyDeviceToHost) == cudaSuccess);
    int wrong = 0;
    for (int t = 0; t < 256; ++t)
        wrong += out[t] != (t < 128 ? 1001 + t : -1);
    CHECK(wrong == 0);
}
