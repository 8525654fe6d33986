// gpu_case.hpp - one GPU test problem: a Case (shape, dtype, masks, varlen), its random
// normal host tensors (the oracle's side), their device mirrors with poisoned outputs,
// and the same fa_params twice: pointing at host arrays (oracle) and device arrays
// (fa_fwd / fa_bwd). Shared by the forward and backward GPU tests.
#ifndef FA_TEST_GPU_CASE_HPP
#define FA_TEST_GPU_CASE_HPP

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "device_tensors.hpp"
#include "select/registry.h"

struct Case {
    int batch = 1, seqlen_q = 128, seqlen_k = 128, heads = 6, heads_k = 6, head_dim = 64;
    fa_dtype dtype = FA_DTYPE_BF16;
    bool causal = false;
    int window_left = -1, window_right = -1;
    float softcap = 0.f;
    bool alibi = false;
    int num_splits = 0;
    // Varlen when non-empty (batch = size - 1); seqused_k when non-empty.
    std::vector<int32_t> cu_q, cu_k, seqused_k;
    // Extra elements between rows (packed-qkv style strides) when > 0.
    int row_padding = 0;
    // Fixed length with seqused_k: the K and V rows past each sequence's used keys hold
    // +Inf (a cache's unused rows may hold anything): no query sees them, so the output
    // stays finite and equal to the oracle's only if no kernel lets them into a product.
    bool inf_past_used_keys = false;
    // Fixed length: K and V with batch stride 0, one cache that every batch entry reads
    // (a shared prompt). The CUDA backend takes it; a tensor map cannot (strides > 0).
    bool shared_kv = false;
};

// One line naming a case, for failure messages.
inline std::string describe(const Case &c)
{
    std::ostringstream os;
    os << "b=" << c.batch << " s_q=" << c.seqlen_q << " s_k=" << c.seqlen_k << " h=" << c.heads << "/"
       << c.heads_k << " d=" << c.head_dim << " " << fa_dtype_name(c.dtype) << " causal=" << c.causal
       << " window=" << c.window_left << "," << c.window_right << " softcap=" << c.softcap
       << " alibi=" << c.alibi << " splits=" << c.num_splits << " varlen=" << !c.cu_q.empty();
    return os.str();
}

const fa_dtype kGpuDtypes[] = {FA_DTYPE_F16, FA_DTYPE_BF16};

// Every dtype x head dim, s_q 113 / s_k 203 non-causal then 203 / 113 causal, GQA 6/2.
inline std::vector<Case> head_dim_sweep(std::initializer_list<int> dims)
{
    std::vector<Case> cases;
    for (fa_dtype dt : kGpuDtypes)
        for (int d : dims) {
            Case c;
            c.dtype = dt;
            c.head_dim = d;
            c.seqlen_q = 113;
            c.seqlen_k = 203;
            c.heads_k = 2;
            cases.push_back(c);
            c.causal = true;
            c.seqlen_q = 203;
            c.seqlen_k = 113;
            cases.push_back(c);
        }
    return cases;
}

// Each (s_q, s_k) non-causal and causal at d128, kv heads 6/2/1 and dtypes rotating.
inline std::vector<Case> length_sweep(std::initializer_list<std::array<int, 2>> shapes)
{
    const int kv_heads[] = {6, 2, 1};
    std::vector<Case> cases;
    int i = 0;
    for (const std::array<int, 2> &sh : shapes)
        for (bool causal : {false, true}) {
            Case c;
            c.seqlen_q = sh[0];
            c.seqlen_k = sh[1];
            c.head_dim = 128;
            c.heads_k = kv_heads[i % 3];
            c.dtype = kGpuDtypes[i % 2];
            c.causal = causal;
            ++i;
            cases.push_back(c);
        }
    return cases;
}

// Varlen with `count` short sequences (query lengths 0..6, key lengths 1..9 in turn), GQA
// 2/1, d64: past 65535 sequences the kernels' (head, batch) grids fold
// (src/common/gpu_kernels/launch_grid.h).
inline Case many_sequences(int count)
{
    Case c;
    c.heads = 2;
    c.heads_k = 1;
    c.head_dim = 64;
    c.cu_q.push_back(0);
    c.cu_k.push_back(0);
    for (int b = 0; b < count; ++b) {
        c.cu_q.push_back(c.cu_q.back() + b % 7);
        c.cu_k.push_back(c.cu_k.back() + 1 + b % 9);
    }
    return c;
}

inline std::vector<int64_t> bshd_strides(int64_t s, int64_t h, int64_t d, int pad)
{
    int64_t row = h * d + pad;
    return {s * row, row, d, 1};
}

// Host arrays and params point into the object itself: construct in place, never copy.
struct GpuProblem {
    Case spec;
    bool varlen = false;
    int batch = 0;
    HostTensor q, k, v, out, lse;
    std::vector<float> slopes;
    fa_params host_params, dev_params;
    std::unique_ptr<DeviceTensor> dq, dk, dv, dout, dlse;
    std::unique_ptr<DeviceArray<float>> dslopes;
    std::unique_ptr<DeviceArray<int32_t>> dcu_q, dcu_k, dused;

    GpuProblem(const Case &c, uint64_t seed) : spec(c)
    {
        varlen = !spec.cu_q.empty();
        batch = varlen ? static_cast<int>(spec.cu_q.size()) - 1 : spec.batch;
        if (varlen) {
            q = fa_oracle::make_tensor(spec.dtype, {spec.cu_q.back(), spec.heads, spec.head_dim});
            k = fa_oracle::make_tensor(spec.dtype, {spec.cu_k.back(), spec.heads_k, spec.head_dim});
            v = fa_oracle::make_tensor(spec.dtype, {spec.cu_k.back(), spec.heads_k, spec.head_dim});
            out = fa_oracle::make_tensor(spec.dtype, {spec.cu_q.back(), spec.heads, spec.head_dim});
            lse = fa_oracle::make_tensor(FA_DTYPE_F32, {spec.heads, spec.cu_q.back()});
        } else {
            int p = spec.row_padding;
            std::vector<int64_t> kv_strides = bshd_strides(spec.seqlen_k, spec.heads_k, spec.head_dim, p);
            if (spec.shared_kv)
                kv_strides[0] = 0;
            q = fa_oracle::make_tensor(spec.dtype, {batch, spec.seqlen_q, spec.heads, spec.head_dim},
                                       bshd_strides(spec.seqlen_q, spec.heads, spec.head_dim, p));
            k = fa_oracle::make_tensor(spec.dtype, {batch, spec.seqlen_k, spec.heads_k, spec.head_dim}, kv_strides);
            v = fa_oracle::make_tensor(spec.dtype, {batch, spec.seqlen_k, spec.heads_k, spec.head_dim}, kv_strides);
            out = fa_oracle::make_tensor(spec.dtype, {batch, spec.seqlen_q, spec.heads, spec.head_dim},
                                         bshd_strides(spec.seqlen_q, spec.heads, spec.head_dim, p));
            lse = fa_oracle::make_tensor(FA_DTYPE_F32, {batch, spec.heads, spec.seqlen_q});
        }
        fa_oracle::fill_normal(q, seed);
        fa_oracle::fill_normal(k, seed + 1);
        fa_oracle::fill_normal(v, seed + 2);
        if (spec.inf_past_used_keys && !varlen && !spec.seqused_k.empty()) {
            set_rows_inf(k, spec.seqused_k);
            set_rows_inf(v, spec.seqused_k);
        }
        for (size_t b = 0; spec.inf_past_used_keys && varlen && b < spec.seqused_k.size(); ++b) {
            set_packed_rows_inf(k, spec.cu_k[b] + spec.seqused_k[b], spec.cu_k[b + 1]);
            set_packed_rows_inf(v, spec.cu_k[b] + spec.seqused_k[b], spec.cu_k[b + 1]);
        }
        fa_oracle::poison(out);
        fa_oracle::poison(lse);

        for (int h = 0; h < spec.heads; ++h)
            slopes.push_back(std::pow(2.f, -8.f * (h + 1) / spec.heads));

        fa_params_init(&host_params);
        host_params.causal = spec.causal;
        host_params.window_left = spec.window_left;
        host_params.window_right = spec.window_right;
        host_params.softcap = spec.softcap;
        host_params.num_splits = spec.num_splits;
        if (spec.alibi)
            host_params.alibi_slopes = slopes.data();
        if (varlen) {
            host_params.cu_seqlens_q = spec.cu_q.data();
            host_params.cu_seqlens_k = spec.cu_k.data();
            host_params.varlen_batch = batch;
            for (int b = 0; b < batch; ++b) {
                host_params.max_seqlen_q = std::max(host_params.max_seqlen_q, spec.cu_q[b + 1] - spec.cu_q[b]);
                host_params.max_seqlen_k = std::max(host_params.max_seqlen_k, spec.cu_k[b + 1] - spec.cu_k[b]);
            }
        }
        if (!spec.seqused_k.empty())
            host_params.seqused_k = spec.seqused_k.data();

        dq.reset(new DeviceTensor(q));
        dk.reset(new DeviceTensor(k));
        dv.reset(new DeviceTensor(v));
        dout.reset(new DeviceTensor(out));
        dlse.reset(new DeviceTensor(lse));
        dev_params = host_params;
        if (spec.alibi) {
            dslopes.reset(new DeviceArray<float>(slopes));
            dev_params.alibi_slopes = dslopes->get();
        }
        if (varlen) {
            dcu_q.reset(new DeviceArray<int32_t>(spec.cu_q));
            dcu_k.reset(new DeviceArray<int32_t>(spec.cu_k));
            dev_params.cu_seqlens_q = dcu_q->get();
            dev_params.cu_seqlens_k = dcu_k->get();
        }
        if (!spec.seqused_k.empty()) {
            dused.reset(new DeviceArray<int32_t>(spec.seqused_k));
            dev_params.seqused_k = dused->get();
        }
    }
    // Rows used[b] .. seqlen - 1 of every head of batch entry b of a [b, s, h, d] tensor
    // of 16-bit elements set to +Inf.
    static void set_rows_inf(HostTensor &t, const std::vector<int32_t> &used)
    {
        const uint16_t inf = t.view.dtype == FA_DTYPE_BF16 ? 0x7F80 : 0x7C00;
        uint16_t *data = reinterpret_cast<uint16_t *>(t.view.data);
        const int64_t *n = t.view.shape, *st = t.view.stride;
        for (int64_t b = 0; b < n[0]; ++b)
            for (int64_t r = used[b]; r < n[1]; ++r)
                for (int64_t h = 0; h < n[2]; ++h)
                    for (int64_t d = 0; d < n[3]; ++d)
                        data[b * st[0] + r * st[1] + h * st[2] + d * st[3]] = inf;
    }
    // Rows from .. to - 1 of every head of a contiguous varlen [total, h, d] tensor of
    // 16-bit elements set to +Inf.
    static void set_packed_rows_inf(HostTensor &t, int64_t from, int64_t to)
    {
        const uint16_t inf = t.view.dtype == FA_DTYPE_BF16 ? 0x7F80 : 0x7C00;
        uint16_t *data = reinterpret_cast<uint16_t *>(t.view.data);
        const int64_t row = t.view.stride[0];
        std::fill(data + from * row, data + to * row, inf);
    }
    GpuProblem(const GpuProblem &) = delete;
    GpuProblem &operator=(const GpuProblem &) = delete;
};

// 1 when this device runs sm_90a code and the build holds warpgroup kernels of `pass`
// (ws_instances.txt for the forward, bws_instances.txt for the backward).
inline bool warpgroup_device(fa_pass pass)
{
    cudaDeviceProp prop;
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess || cudaGetDeviceProperties(&prop, device) != cudaSuccess)
        return false;
    int count = 0;
    const fa_kernel_config *reg = fa_registry_of(FA_BACKEND_CUDA, pass, &count);
    bool built = false;
    for (int i = 0; i < count; ++i)
        built = built || (reg[i].warpgroup && reg[i].compiled);
    return prop.major == 9 && prop.minor == 0 && built;
}

// A poisoned host tensor with t's dtype, shape and strides.
inline HostTensor make_like(const HostTensor &t)
{
    std::vector<int64_t> shape(t.view.shape, t.view.shape + t.view.ndim);
    std::vector<int64_t> strides(t.view.stride, t.view.stride + t.view.ndim);
    return fa_oracle::make_tensor(t.view.dtype, shape, strides);
}

#endif  // FA_TEST_GPU_CASE_HPP
