/*
 * fa_reference.h - the one reference attention of the project (C99), used by the tests
 * (through tests/oracle.hpp) and by the benchmark CLI's --check: straight loops over the
 * semantics of include/flashattn.h in fp64, forward and backward, over host tensors as
 * fa_fwd / fa_bwd take them (any dtype and strides, varlen, seqused_k, GQA, causal and
 * windows, softcap, ALiBi). FA_REF_NAIVE computes the same formulas the way a
 * straightforward implementation in the tensors' own dtype would (values rounded to the
 * dtype, fp32 accumulation): the yard stick of the fp16/bf16 tolerances.
 *
 * The work is row by row over one (sequence, query head) at a time, loaded as dense fp64
 * rows, so a caller can check every row (the tests) or a few sampled ones (the CLI).
 */
#ifndef FA_REFERENCE_H
#define FA_REFERENCE_H

#include <stdint.h>

#include "flashattn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum fa_ref_precision {
    FA_REF_EXACT = 0, /* fp64 throughout */
    FA_REF_NAIVE = 1  /* rounded to the tensors' dtype, fp32 accumulation */
} fa_ref_precision;

/* Nearest value of `dtype` (round to nearest even; fp16 subnormals, overflow to inf). */
double fa_ref_round_to_dtype(double x, fa_dtype dtype);
/* Element at `index` (t->ndim entries) of a host tensor, widened to double. */
double fa_ref_element(const fa_tensor *t, const int64_t *index);

/* The rows of sequence b: query rows [q_begin, q_begin + q_len) of the canonical row
 * numbering (fixed length b * s_q + i, varlen cu_seqlens_q[b] + i), keys likewise, k_len
 * already cut to seqused_k. */
typedef struct fa_ref_sequence {
    int64_t q_begin, q_len, k_begin, k_len;
} fa_ref_sequence;

/* fa_fwd's arguments resolved once: batch, heads, scale, window after causal. */
typedef struct fa_ref_problem {
    const fa_tensor *q, *k, *v;
    const fa_params *params;
    int varlen, batch, heads, heads_k, dim;
    double scale;
    int window_left, window_right;
} fa_ref_problem;

void fa_ref_describe(fa_ref_problem *p, const fa_tensor *q, const fa_tensor *k,
                     const fa_tensor *v, const fa_params *params);
fa_ref_sequence fa_ref_sequence_of(const fa_ref_problem *p, int batch);

/* One query head of one sequence, with its kv head's keys and values, as dense fp64 rows
 * (row-major, dim columns), and what every row of it needs. */
typedef struct fa_ref_head {
    const fa_ref_problem *problem;
    int batch, head, head_k;
    fa_ref_sequence seq;
    double *q, *k, *v;   /* seq.q_len, seq.k_len, seq.k_len rows */
    double scale;        /* rounded to fp32 when naive, as such a kernel holds it */
    double alibi_slope;  /* 0 without ALiBi */
    fa_dtype dtype;
    int naive;
} fa_ref_head;

/* Returns 0 when out of memory (h is then empty; fa_ref_head_free is still safe). */
int fa_ref_head_load(fa_ref_head *h, const fa_ref_problem *p, int batch, int head,
                     fa_ref_precision precision);
void fa_ref_head_free(fa_ref_head *h);
/* Rows of `t` (shaped like q: dout, out) of this head and sequence as dense fp64,
 * seq.q_len x dim, malloc'd (NULL when out of memory). */
double *fa_ref_head_query_rows(const fa_ref_head *h, const fa_tensor *t);

/* Query row i: prob[j] the softmax probability of key j (0 for keys it does not see) and
 * slope[j] = d score / d (scale * q.k) (1 - tanh^2 under softcap, else 1), both
 * seq.k_len long; returns the row's LSE (natural log, -inf when it sees no key). */
double fa_ref_row_probabilities(const fa_ref_head *h, int64_t i, double *prob, double *slope);
/* out[dim] = sum_j prob[j] v_j over the keys row i sees (0 when it sees none). */
void fa_ref_row_output(const fa_ref_head *h, int64_t i, const double *prob, double *out);
/* D = dout . out of one row. */
double fa_ref_row_delta(const fa_ref_head *h, const double *dout_row, const double *out_row);
/* dS of (row, key j): prob (dout . v_j - D) slope, before the softmax scale. */
double fa_ref_score_gradient(const fa_ref_head *h, int64_t j, double prob, double slope,
                             const double *dout_row, double delta);
/* Adds query row i's terms to key j's gradient rows: dS q_i to dk_row (before the softmax
 * scale) and prob dout_i to dv_row. */
void fa_ref_add_key_terms(const fa_ref_head *h, int64_t i, double prob, double ds,
                          const double *dout_row, double *dk_row, double *dv_row);
/* The backward of query row i: dq_row[dim] = scale * sum_j dS_j k_j, and adds the row's
 * unscaled terms dS_j q_i to dk and prob_j dout_i to dv, key j's row at dk + j *
 * kv_row_stride (likewise dv). Callers scale dk once all query heads are summed. */
void fa_ref_row_backward(const fa_ref_head *h, int64_t i, const double *prob,
                         const double *slope, const double *dout_row, const double *out_row,
                         double *dq_row, double *dk, double *dv, int64_t kv_row_stride);

#ifdef __cplusplus
}
#endif

#endif /* FA_REFERENCE_H */
