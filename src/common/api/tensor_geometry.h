/*
 * tensor_geometry.h - the memory an fa_tensor covers, written once for the library's
 * argument checks (api.c) and the ring's (src/ring/ring_args.c): element size, whether it
 * has elements, whether its strides let two elements share memory, the byte range it
 * spans and whether two such ranges meet. Strides are non-negative (the checks before
 * these ensure it). Host C99, header-only.
 */
#ifndef FA_TENSOR_GEOMETRY_H
#define FA_TENSOR_GEOMETRY_H

#include <stddef.h>
#include <stdint.h>

#include "flashattn.h"

static inline size_t fa_dtype_bytes(fa_dtype dtype) { return dtype == FA_DTYPE_F32 ? 4 : 2; }

static inline int fa_tensor_has_elements(const fa_tensor *t)
{
    int i;
    for (i = 0; i < t->ndim; ++i)
        if (t->shape[i] == 0)
            return 0;
    return 1;
}

/* Taken in order of stride, each dim of extent > 1 must have a stride that reaches past
 * everything the dims with smaller strides span (sufficient, and what every dense or
 * padded layout meets). Returns the first dim that does not, with *span the elements the
 * smaller ones span, or -1 when none: the tensor's elements never share memory. */
static inline int fa_tensor_overlap_dim(const fa_tensor *t, int64_t *span)
{
    int order[sizeof t->shape / sizeof t->shape[0]], count = 0, i, j;
    *span = 1;
    for (i = 0; i < t->ndim; ++i) {
        if (t->shape[i] <= 1)
            continue;
        for (j = count; j > 0 && t->stride[order[j - 1]] > t->stride[i]; --j)
            order[j] = order[j - 1];
        order[j] = i;
        ++count;
    }
    for (j = 0; j < count; ++j) {
        const int dim = order[j];
        if (t->stride[dim] < *span)
            return dim;
        *span += t->stride[dim] * (t->shape[dim] - 1);
    }
    return -1;
}

/* First and one-past-last byte the tensor's elements occupy. */
static inline void fa_tensor_byte_span(const fa_tensor *t, uintptr_t *first, uintptr_t *end)
{
    int64_t last = 0;
    int i;
    for (i = 0; i < t->ndim; ++i)
        last += (t->shape[i] - 1) * t->stride[i];
    *first = (uintptr_t)t->data;
    *end = *first + (uintptr_t)(last + 1) * fa_dtype_bytes(t->dtype);
}

/* 1 when both tensors have elements and their byte spans meet (a span test: separate
 * allocations and the slices of a stacked tensor never do). */
static inline int fa_tensor_spans_meet(const fa_tensor *a, const fa_tensor *b)
{
    uintptr_t a0, a1, b0, b1;
    if (!fa_tensor_has_elements(a) || !fa_tensor_has_elements(b))
        return 0;
    fa_tensor_byte_span(a, &a0, &a1);
    fa_tensor_byte_span(b, &b0, &b1);
    return a0 < b1 && b0 < a1;
}

#endif /* FA_TENSOR_GEOMETRY_H */
