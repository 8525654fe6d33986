/*
 * fa_reference.c - the reference attention of fa_reference.h: fp64 (or naive
 * same-precision) loops over the semantics of include/flashattn.h. Speed is not a goal;
 * the visibility rules are the library's own (api/mask.h), everything else is written
 * out from the header's formulas.
 */
#include "fa_reference.h"

#include <math.h>
#include <stdlib.h>

#include "api/dtype.h"
#include "api/mask.h"

/* ------------------------------------------------------------------------------------ */
/* Numbers                                                                              */
/* ------------------------------------------------------------------------------------ */

/* |x| to `bits` significant bits with exponent floor `min_exponent` (subnormals),
 * overflowing to inf above `max_finite`. */
static double round_significand(double x, int bits, int min_exponent, double max_finite)
{
    int exponent;
    double quantum, rounded;
    if (!isfinite(x) || x == 0.0)
        return x;
    exponent = ilogb(fabs(x));
    if (exponent < min_exponent)
        exponent = min_exponent;
    quantum = ldexp(1.0, exponent - (bits - 1));
    rounded = nearbyint(fabs(x) / quantum) * quantum;
    return copysign(rounded > max_finite ? INFINITY : rounded, x);
}

double fa_ref_round_to_dtype(double x, fa_dtype dtype)
{
    switch (dtype) {
    case FA_DTYPE_F16: return round_significand(x, 11, -14, 65504.0);
    case FA_DTYPE_BF16: return round_significand(x, 8, -126, 0x1.fep127);
    default: return (double)(float)x;
    }
}

double fa_ref_element(const fa_tensor *t, const int64_t *index)
{
    int64_t offset = 0;
    int d;
    for (d = 0; d < t->ndim; ++d)
        offset += index[d] * t->stride[d];
    if (t->dtype == FA_DTYPE_F32)
        return ((const float *)t->data)[offset];
    if (t->dtype == FA_DTYPE_F16)
        return fa_f16_to_f32(((const uint16_t *)t->data)[offset]);
    return fa_bf16_to_f32(((const uint16_t *)t->data)[offset]);
}

/* The rounding of a naive same-dtype kernel: values to the dtype, sums to fp32. */
static double rounded(const fa_ref_head *h, double x)
{
    return h->naive ? fa_ref_round_to_dtype(x, h->dtype) : x;
}

static double accumulated(const fa_ref_head *h, double x)
{
    return h->naive ? (double)(float)x : x;
}

/* ------------------------------------------------------------------------------------ */
/* The problem, its sequences and heads                                                 */
/* ------------------------------------------------------------------------------------ */

void fa_ref_describe(fa_ref_problem *p, const fa_tensor *q, const fa_tensor *k,
                     const fa_tensor *v, const fa_params *params)
{
    p->q = q;
    p->k = k;
    p->v = v;
    p->params = params;
    p->varlen = params->cu_seqlens_q != NULL;
    p->batch = p->varlen ? params->varlen_batch : (int)q->shape[0];
    p->heads = (int)q->shape[q->ndim - 2];
    p->heads_k = (int)k->shape[k->ndim - 2];
    p->dim = (int)q->shape[q->ndim - 1];
    p->scale = params->softmax_scale != 0.0f ? params->softmax_scale : 1.0 / sqrt((double)p->dim);
    p->window_left = params->window_left;
    p->window_right = params->causal ? 0 : params->window_right;
}

fa_ref_sequence fa_ref_sequence_of(const fa_ref_problem *p, int batch)
{
    const fa_params *params = p->params;
    fa_ref_sequence s;
    if (p->varlen) {
        s.q_begin = params->cu_seqlens_q[batch];
        s.q_len = params->cu_seqlens_q[batch + 1] - s.q_begin;
        s.k_begin = params->cu_seqlens_k[batch];
        s.k_len = params->cu_seqlens_k[batch + 1] - s.k_begin;
    } else {
        s.q_begin = batch * p->q->shape[1];
        s.q_len = p->q->shape[1];
        s.k_begin = batch * p->k->shape[1];
        s.k_len = p->k->shape[1];
    }
    if (params->seqused_k != NULL && params->seqused_k[batch] < s.k_len)
        s.k_len = params->seqused_k[batch];
    return s;
}

/* `count` rows of one head of `t` from row `first` of the sequence, as dense fp64. */
static double *load_rows(const fa_ref_head *h, const fa_tensor *t, int64_t first,
                         int64_t count, int head)
{
    const fa_ref_problem *p = h->problem;
    double *rows = (double *)malloc((size_t)(count > 0 ? count : 1) * (size_t)p->dim * sizeof(double));
    int64_t r;
    int c;
    for (r = 0; rows != NULL && r < count; ++r)
        for (c = 0; c < p->dim; ++c) {
            int64_t fixed[4], varlen[3];
            fixed[0] = h->batch, fixed[1] = r, fixed[2] = head, fixed[3] = c;
            varlen[0] = first + r, varlen[1] = head, varlen[2] = c;
            rows[r * p->dim + c] = fa_ref_element(t, p->varlen ? varlen : fixed);
        }
    return rows;
}

int fa_ref_head_load(fa_ref_head *h, const fa_ref_problem *p, int batch, int head,
                     fa_ref_precision precision)
{
    const fa_params *params = p->params;
    h->problem = p;
    h->batch = batch;
    h->head = head;
    h->head_k = head / (p->heads / p->heads_k);
    h->seq = fa_ref_sequence_of(p, batch);
    h->dtype = p->q->dtype;
    h->naive = precision == FA_REF_NAIVE;
    h->scale = h->naive ? (double)(float)p->scale : p->scale;
    h->alibi_slope = params->alibi_slopes == NULL
                         ? 0.0
                         : params->alibi_slopes[batch * params->alibi_batch_stride + head];
    h->q = load_rows(h, p->q, h->seq.q_begin, h->seq.q_len, head);
    h->k = load_rows(h, p->k, h->seq.k_begin, h->seq.k_len, h->head_k);
    h->v = load_rows(h, p->v, h->seq.k_begin, h->seq.k_len, h->head_k);
    if (h->q != NULL && h->k != NULL && h->v != NULL)
        return 1;
    fa_ref_head_free(h);
    return 0;
}

void fa_ref_head_free(fa_ref_head *h)
{
    free(h->q);
    free(h->k);
    free(h->v);
    h->q = h->k = h->v = NULL;
}

double *fa_ref_head_query_rows(const fa_ref_head *h, const fa_tensor *t)
{
    return load_rows(h, t, h->seq.q_begin, h->seq.q_len, h->head);
}

/* ------------------------------------------------------------------------------------ */
/* Rows                                                                                 */
/* ------------------------------------------------------------------------------------ */

static fa_window head_window(const fa_ref_head *h)
{
    fa_window w;
    w.left = h->problem->window_left;
    w.right = h->problem->window_right;
    return w;
}

/* slope * |i + s_k - s_q - j|: exact in fp64, or the fp32 product a naive kernel forms. */
static double alibi_bias(const fa_ref_head *h, int64_t i, int64_t j)
{
    float distance = fa_alibi_distance(i, j, h->seq.q_len, h->seq.k_len);
    if (h->naive)
        return (double)((float)h->alibi_slope * distance);
    return h->alibi_slope * (double)distance;
}

/* The score of (row i, key j) as the header defines it; *slope its derivative by
 * scale * q.k. */
static double score(const fa_ref_head *h, int64_t i, int64_t j, double *slope)
{
    const fa_params *params = h->problem->params;
    const int dim = h->problem->dim;
    const double *q = h->q + i * dim, *key = h->k + j * dim;
    double dot = 0.0, s;
    int c;
    for (c = 0; c < dim; ++c)
        dot = accumulated(h, dot + q[c] * key[c]);
    s = rounded(h, rounded(h, dot) * h->scale);
    *slope = 1.0;
    if (params->softcap > 0.0f) {
        double t = tanh(s / params->softcap);
        s = rounded(h, params->softcap * t);
        *slope = rounded(h, 1.0 - t * t);
    }
    if (params->alibi_slopes != NULL)
        s = rounded(h, s - alibi_bias(h, i, j));
    return s;
}

double fa_ref_row_probabilities(const fa_ref_head *h, int64_t i, double *prob, double *slope)
{
    const fa_window w = head_window(h);
    const int64_t sq = h->seq.q_len, sk = h->seq.k_len;
    double max = -INFINITY, sum = 0.0;
    int64_t j;
    for (j = 0; j < sk; ++j) {
        prob[j] = slope[j] = 0.0;
        if (!fa_key_visible(i, j, sq, sk, w))
            continue;
        prob[j] = score(h, i, j, &slope[j]);
        if (prob[j] > max)
            max = prob[j];
    }
    if (max == -INFINITY)
        return -INFINITY;
    for (j = 0; j < sk; ++j)
        if (fa_key_visible(i, j, sq, sk, w)) {
            prob[j] = accumulated(h, exp(prob[j] - max));
            sum = accumulated(h, sum + prob[j]);
        }
    for (j = 0; j < sk; ++j)
        prob[j] = rounded(h, prob[j] / sum);
    return max + log(sum);
}

void fa_ref_row_output(const fa_ref_head *h, int64_t i, const double *prob, double *out)
{
    const fa_window w = head_window(h);
    const int dim = h->problem->dim;
    int64_t j;
    int c;
    for (c = 0; c < dim; ++c)
        out[c] = 0.0;
    for (j = 0; j < h->seq.k_len; ++j) {
        const double *value = h->v + j * dim;
        if (!fa_key_visible(i, j, h->seq.q_len, h->seq.k_len, w))
            continue;
        for (c = 0; c < dim; ++c)
            out[c] = accumulated(h, out[c] + prob[j] * value[c]);
    }
    for (c = 0; c < dim; ++c)
        out[c] = rounded(h, out[c]);
}

double fa_ref_row_delta(const fa_ref_head *h, const double *dout_row, const double *out_row)
{
    double delta = 0.0;
    int c;
    for (c = 0; c < h->problem->dim; ++c)
        delta = accumulated(h, delta + dout_row[c] * out_row[c]);
    return rounded(h, delta);
}

double fa_ref_score_gradient(const fa_ref_head *h, int64_t j, double prob, double slope,
                             const double *dout_row, double delta)
{
    const int dim = h->problem->dim;
    const double *value = h->v + j * dim;
    double dp = 0.0;
    int c;
    for (c = 0; c < dim; ++c)
        dp = accumulated(h, dp + dout_row[c] * value[c]);
    return rounded(h, rounded(h, prob * (rounded(h, dp) - delta)) * slope);
}

void fa_ref_add_key_terms(const fa_ref_head *h, int64_t i, double prob, double ds,
                          const double *dout_row, double *dk_row, double *dv_row)
{
    const int dim = h->problem->dim;
    const double *q = h->q + i * dim;
    int c;
    for (c = 0; c < dim; ++c) {
        dk_row[c] = accumulated(h, dk_row[c] + ds * q[c]);
        dv_row[c] = accumulated(h, dv_row[c] + prob * dout_row[c]);
    }
}

void fa_ref_row_backward(const fa_ref_head *h, int64_t i, const double *prob,
                         const double *slope, const double *dout_row, const double *out_row,
                         double *dq_row, double *dk, double *dv, int64_t kv_row_stride)
{
    const fa_window w = head_window(h);
    const int dim = h->problem->dim;
    const double delta = fa_ref_row_delta(h, dout_row, out_row);
    int64_t j;
    int c;
    for (c = 0; c < dim; ++c)
        dq_row[c] = 0.0;
    for (j = 0; j < h->seq.k_len; ++j) {
        const double *key = h->k + j * dim;
        double ds;
        if (!fa_key_visible(i, j, h->seq.q_len, h->seq.k_len, w))
            continue;
        ds = fa_ref_score_gradient(h, j, prob[j], slope[j], dout_row, delta);
        for (c = 0; c < dim; ++c)
            dq_row[c] = accumulated(h, dq_row[c] + ds * key[c]);
        fa_ref_add_key_terms(h, i, prob[j], ds, dout_row, dk + j * kv_row_stride,
                             dv + j * kv_row_stride);
    }
    for (c = 0; c < dim; ++c)
        dq_row[c] = rounded(h, h->scale * dq_row[c]);
}
