// ring_case.hpp - what the ring tests of every transport share: a problem over the whole
// sequence, a rank's rows of it, and the check of a rank's results against the fp64
// reference and the library's single-process call, within the CPU tests' rule (fp32
// 1e-4; fp16/bf16 forward 2x and backward 3x the error of a naive computation in the
// same precision, plus 1e-5).
#ifndef FA_TEST_RING_CASE_HPP
#define FA_TEST_RING_CASE_HPP

#include <cstdint>
#include <string>
#include <vector>

#include "flashattn.h"
#include "flashattn_ring.h"
#include "oracle.hpp"

namespace fa_ring_test {

struct Problem {
    int64_t total = 37;
    fa_ring_split split = FA_RING_SPLIT_ZIGZAG;
    int batch = 2, heads = 4, heads_k = 2, dim = 32;
    fa_dtype dtype = FA_DTYPE_F32;
    int causal = 0;
    float softcap = 0.0f;
    bool strided = false;  // local tensors in a padded heads-outer layout
    uint64_t seed = 1;
};

std::string describe(const Problem &p);
fa_params params_of(const Problem &p);
// Global rows of `rank` in local order (empty when fa_ring_rows refuses).
std::vector<int64_t> rows_of(const Problem &p, int rank, int world);

// The whole sequence's inputs, from the problem's seed.
struct Whole {
    fa_oracle::HostTensor q, k, v, dout;
};
Whole make_whole(const Problem &p);

// A rank's tensors: its rows of the inputs, and poisoned outputs.
struct Local {
    fa_oracle::HostTensor q, k, v, dout, out, lse, dq, dk, dv;
};
Local make_local(const Problem &p, const Whole &w, const std::vector<int64_t> &rows);

// out, lse, dq, dk, dv over the whole sequence (from the library in one process).
struct WholeResults {
    fa_oracle::HostTensor out, lse, dq, dk, dv;
};
WholeResults make_whole_results(const Problem &p);

// The fp64 reference as whole-sequence tensors, and the rule's bound for each of out,
// lse, dq, dk, dv.
struct Expected {
    WholeResults exact;
    double bound[5];
};
Expected expected(const Problem &p, const Whole &w);

// Max |local - whole| over a rank's rows, per result (out, lse, dq, dk, dv).
struct Errors {
    double value[5];
};
Errors errors(const Local &mine, const WholeResults &whole, const std::vector<int64_t> &rows);

// Every element of the tensor's storage still holds the poison.
bool untouched(const fa_oracle::HostTensor &t);

} // namespace fa_ring_test

#endif // FA_TEST_RING_CASE_HPP
