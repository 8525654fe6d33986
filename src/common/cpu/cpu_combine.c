/*
 * cpu_combine.c - fa_combine on the CPU: per (batch, row, head), the partials' LSEs give
 * the weights exp(lse_i - max) of the partials that saw a key (lse finite or NaN; -inf and
 * +inf contribute nothing), and out is their weighted mean, accumulated in fp64 and
 * rounded once to out's dtype. Single-threaded: the call reads each partial element once.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/dtype.h"
#include "cpu/cpu_internal.h"

/* A partial that saw no key: FlashAttention writes -inf, FlashAttention-2 +inf. */
static int contributes(float lse) { return !isinf(lse); }

static float lse_at(const float *base, const fa_strides *s, int64_t b, int64_t row, int64_t head)
{
    return base[b * s->batch + head * s->head + row * s->row];
}

/* Row (b, row, head): the weights into w[n] and the combined LSE; 0 when no partial
 * contributes. */
static int row_weights(const fa_combine_problem *p, int64_t b, int64_t row, int64_t head, double *w,
                       double *lse)
{
    double max = -INFINITY, sum = 0.0;
    int i, any = 0;
    for (i = 0; i < p->n; i++) {
        float l = lse_at(p->part_lse[i], &p->part_lse_stride[i], b, row, head);
        if (contributes(l) && (!any || l > max || isnan(l)))
            max = l;
        any |= contributes(l);
    }
    if (!any)
        return 0;
    for (i = 0; i < p->n; i++) {
        float l = lse_at(p->part_lse[i], &p->part_lse_stride[i], b, row, head);
        w[i] = contributes(l) ? exp((double)l - max) : 0.0;
        sum += w[i];
    }
    for (i = 0; i < p->n; i++)
        w[i] /= sum;
    *lse = max + log(sum);
    return 1;
}

static void combine_row(const fa_combine_problem *p, int64_t b, int64_t row, int64_t head, const double *w,
                        int any, double *acc)
{
    const size_t es = fa_dtype_bytes(p->dtype);
    char *out = (char *)fa_cpu_operand_at(p->out, p->dtype, &p->out_stride, (int)b, row, (int)head);
    int64_t c;
    int i;
    for (c = 0; c < p->head_dim; c++)
        acc[c] = 0.0;
    for (i = 0; any && i < p->n; i++) {
        const char *part;
        if (w[i] == 0.0 && !isnan(w[i]))
            continue; /* its out is not read: it may hold anything */
        part = fa_cpu_operand_at(p->part_out[i], p->dtype, &p->part_out_stride[i], (int)b, row, (int)head);
        for (c = 0; c < p->head_dim; c++)
            acc[c] += w[i] * fa_load_as_f32(part + c * es, p->dtype);
    }
    for (c = 0; c < p->head_dim; c++)
        fa_store_from_f32(out + c * es, p->dtype, (float)acc[c]);
}

fa_status fa_cpu_combine(fa_context *ctx, const fa_combine_problem *p)
{
    double *w = (double *)malloc(sizeof(double) * (size_t)(p->n + p->head_dim));
    int64_t b, row, head;
    if (w == NULL)
        return fa_fail(ctx, FA_ERR_OUT_OF_MEMORY, "fa_combine: out of host memory");
    for (b = 0; b < p->batch; b++)
        for (row = 0; row < p->rows; row++)
            for (head = 0; head < p->heads; head++) {
                double lse = -INFINITY;
                int any = row_weights(p, b, row, head, w, &lse);
                combine_row(p, b, row, head, w, any, w + p->n);
                if (p->lse)
                    p->lse[b * p->lse_stride.batch + head * p->lse_stride.head + row * p->lse_stride.row] =
                        (float)lse;
            }
    free(w);
    return FA_OK;
}
