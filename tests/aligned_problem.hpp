// aligned_problem.hpp - one small validated-looking problem for the tests of the GPU host
// side on the CPU (test_gpu_args.cpp, test_gpu_backend.cpp): bf16, b = 2, h = 6 (h_k =
// 2), d = 64, s_q = 300, s_k = 130, contiguous [b, s, h, d] operands and gradients whose
// rows are 16-byte aligned. Nothing lies behind the pointers: the code under test only
// computes, or launches on a fake runtime.
#pragma once

#include <cstring>

#include "api/problem.h"

inline fa_problem aligned_problem()
{
    alignas(16) static unsigned char storage[64];
    fa_problem p;
    std::memset(&p, 0, sizeof p);
    p.dtype = FA_DTYPE_BF16;
    p.batch = 2;
    p.heads = 6;
    p.heads_k = 2;
    p.head_dim = 64;
    p.seqlen_q = 300;
    p.seqlen_k = 130;
    p.total_q = 600;
    p.total_k = 260;
    p.q = p.k = p.v = p.dout = storage;
    p.out = p.dq = p.dk = p.dv = storage;
    const fa_strides st = {300 * 6 * 64, 6 * 64, 64};
    const fa_strides kst = {130 * 2 * 64, 2 * 64, 64};
    p.q_stride = p.out_stride = p.dout_stride = p.dq_stride = st;
    p.k_stride = p.v_stride = p.dk_stride = p.dv_stride = kst;
    p.softmax_scale = 0.125f;
    p.window.left = p.window.right = -1;
    return p;
}
