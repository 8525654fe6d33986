// oracle.hpp - host-only (C++14) test support shared by the CPU and GPU tests: owning
// host tensors over the public fa_tensor type, seeded random normal fills, NaN poisoning,
// an fp64 attention oracle (forward and backward), a "naive attention in the tensor's own
// precision" (the yard stick for fp16/bf16 tolerances), and max-abs-error metrics.
// The attention itself is tests/reference/fa_reference.h's, which the benchmark CLI's
// --check uses too; this header gives it whole-tensor C++ calls. Independent of any
// backend.
#ifndef FA_TEST_ORACLE_HPP
#define FA_TEST_ORACLE_HPP

#include <cstddef>
#include <cstdint>
#include <vector>

#include "flashattn.h"

namespace fa_oracle {

size_t dtype_size(fa_dtype dtype);
// Nearest value of `dtype` (round to nearest even, fp16 subnormals and overflow to inf).
double round_to_dtype(double x, fa_dtype dtype);

// Host memory owning one strided fa_tensor view.
struct HostTensor {
    std::vector<unsigned char> storage;
    fa_tensor view;
};

// A tensor of `shape` (rank 1..4). Empty `strides` means contiguous row-major; otherwise
// strides in elements, the storage sized to the largest offset. Storage starts poisoned.
HostTensor make_tensor(fa_dtype dtype, const std::vector<int64_t> &shape,
                       const std::vector<int64_t> &strides = {});
// Standard normal values (rounded to the dtype, never 0) in every element of the view,
// reproducible from `seed`.
void fill_normal(HostTensor &t, uint64_t seed);
// The dtype's quiet-NaN bit pattern in every byte of storage (elements and gaps alike).
void poison(HostTensor &t);
// Every element of the view holds a non-NaN value.
bool all_elements_written(const HostTensor &t);
// Every storage slot outside the view still holds the poison pattern.
bool gaps_untouched(const HostTensor &t);

// Element at `index` (ndim entries) of a view, widened to double.
double element(const fa_tensor &t, const int64_t *index);

enum class Precision {
    Exact,  // fp64 throughout
    Naive   // what a straightforward implementation in the tensor's dtype computes
};

// Attention results in a dense canonical layout: global query row g (fixed length:
// g = b * s_q + i; varlen: g = cu_seqlens_q[b] + i), out[(g * heads + h) * dim + c],
// lse[g * heads + h] (natural log, -inf where no key is visible).
struct Reference {
    int64_t rows = 0;
    int heads = 0;
    int dim = 0;
    std::vector<double> out;
    std::vector<double> lse;
};

// The semantics of include/flashattn.h computed directly: q, k, v as fa_fwd takes them
// (any dtype, strides, varlen, GQA, masks, softcap, ALiBi, seqused_k).
Reference reference_attention(const fa_tensor &q, const fa_tensor &k, const fa_tensor &v,
                              const fa_params &params, Precision precision);

// Max |actual - reference| over every element of `out` (resp. `lse`) in fa_fwd's layout
// ([b, s_q, h, d] / [b, h, s_q], or varlen [total_q, h, d] / [h, total_q], told apart by
// rank). NaN counts as infinite error; -inf matches only -inf.
double max_out_error(const fa_tensor &out, const Reference &ref);
double max_lse_error(const fa_tensor &lse, const Reference &ref);
// Same metrics between two references.
double max_out_difference(const Reference &a, const Reference &b);
double max_lse_difference(const Reference &a, const Reference &b);

// Gradients of reference_attention's output with respect to q, k and v for an output
// gradient dout (shaped like q), in a dense canonical layout: dq like Reference::out;
// dk and dv over global key rows g_k (fixed length: g_k = b * s_k + j; varlen:
// cu_seqlens_k[b] + j) as dk[(g_k * heads_k + h_k) * dim + c], summed over the query
// heads of each GQA group; keys past seqused_k or seen by no query get 0. Naive: inputs
// as stored, probabilities, out, D = rowsum(dout o out), dP and dS rounded to the dtype,
// fp32 accumulation, results rounded to the dtype (what a straightforward same-precision
// backward computes).
struct GradReference {
    int64_t rows_q = 0, rows_k = 0;
    int heads = 0, heads_k = 0, dim = 0;
    std::vector<double> dq, dk, dv;
};

GradReference reference_backward(const fa_tensor &q, const fa_tensor &k, const fa_tensor &v,
                                 const fa_tensor &dout, const fa_params &params,
                                 Precision precision);

// Max abs errors of the three gradients (NaN counts as infinite error).
struct GradErrors {
    double dq, dk, dv;
};
// dq, dk, dv in fa_bwd's layout (like q, k, v) against a reference.
GradErrors grad_errors(const fa_tensor &dq, const fa_tensor &dk, const fa_tensor &dv,
                       const GradReference &ref);
GradErrors grad_difference(const GradReference &a, const GradReference &b);

}  // namespace fa_oracle

#endif  // FA_TEST_ORACLE_HPP
