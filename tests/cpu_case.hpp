// cpu_case.hpp - one attention problem of the CPU tests (shape, masks, score transforms,
// varlen, layout, threads) made into oracle tensors and fa_params, and the CPU context
// and forward call they run with. Shared by the forward and backward tests.
#ifndef FA_TEST_CPU_CASE_HPP
#define FA_TEST_CPU_CASE_HPP

#include <cstdint>
#include <string>
#include <vector>

#include "flashattn.h"
#include "oracle.hpp"

namespace fa_test {

enum class Alibi { None, Shared, PerBatch };

struct Case {
    fa_dtype dtype = FA_DTYPE_F32;
    int batch = 1;
    int64_t seqlen_q = 64, seqlen_k = 64;
    int heads = 2, heads_k = 2, dim = 64;
    int causal = 0, window_left = -1, window_right = -1;
    float softcap = 0.0f;
    Alibi alibi = Alibi::None;
    bool strided = false;
    std::vector<int32_t> cu_q, cu_k; // varlen when set
    std::vector<int32_t> seqused_k;
    int threads = 0;
    uint64_t seed = 1;
};

const fa_dtype kAllDtypes[] = {FA_DTYPE_F32, FA_DTYPE_F16, FA_DTYPE_BF16};

// The case sweeps the forward and backward tests share (each test checks them its way).
// Every sequence-length pair with and without causal; the last pair is the caller's.
std::vector<Case> length_sweep(int64_t longest_q, int64_t longest_k);
std::vector<Case> head_dim_sweep();  // head dims 8..256, every dtype
std::vector<Case> gqa_sweep();       // kv heads 6 / 2 / 1
std::vector<Case> causal_sweep();    // s_q > s_k and s_q < s_k
std::vector<Case> window_sweep();    // left, right, both, with causal
std::vector<Case> softcap_sweep();
std::vector<Case> alibi_sweep();     // shared and per-batch slopes
std::vector<Case> varlen_sweep();    // empty sequences, seqused_k
std::vector<Case> strided_sweep();   // non-contiguous outer strides

std::string describe(const Case &c);
bool is_varlen(const Case &c);
// Rows of q (resp. k) in the tensors: s_q (s_k) per sequence, or the varlen totals.
int64_t rows_q(const Case &c);
int64_t rows_k(const Case &c);

// [b, s, h, d] (or varlen [total, h, d]); strided: a padded BHSD-like layout whose outer
// strides are all non-contiguous. Storage starts poisoned.
fa_oracle::HostTensor operand(const Case &c, int64_t rows, int heads);
fa_oracle::HostTensor lse_tensor(const Case &c, int64_t rows);

struct Run {
    fa_oracle::HostTensor q, k, v, out, lse;
    std::vector<float> slopes;
    fa_params params;
};

// Inputs, poisoned outputs and params for a case (params point into the Run and Case).
void prepare(const Case &c, Run &r);

// A CPU context with the case's thread count, destroyed with the scope.
struct Context {
    fa_context *ctx = nullptr;
    explicit Context(int threads);
    ~Context();
};

// fa_fwd into r.out and r.lse; the test fails unless it succeeds.
void forward(const Case &c, Run &r);

} // namespace fa_test

#endif // FA_TEST_CPU_CASE_HPP
