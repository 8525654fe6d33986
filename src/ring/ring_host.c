/*
 * ring_host.c - the ring's buffers in host memory, for transports that serve the CPU
 * backend (MPI): allocation, zeroing, and the element-wise copy / fp32 accumulation the
 * schedule uses to pack K/V blocks and to sum gradient partials.
 */
#include <stdlib.h>
#include <string.h>

#include "api/dtype.h"
#include "api/tensor_geometry.h"
#include "ring/ring_internal.h"

void *fa_ring_host_alloc(fa_ring_transport *t, size_t bytes)
{
    (void)t;
    return malloc(bytes > 0 ? bytes : 1); /* NULL only when out of memory */
}

void fa_ring_host_release(fa_ring_transport *t, void *p)
{
    (void)t;
    free(p);
}

fa_status fa_ring_host_zero(fa_ring_transport *t, void *p, size_t bytes)
{
    (void)t;
    memset(p, 0, bytes);
    return FA_OK;
}

/* One innermost row of d elements. */
static void convert_row(char *dst, fa_dtype dt, const char *src, fa_dtype st, int64_t d, int add)
{
    const size_t db = fa_dtype_bytes(dt), sb = fa_dtype_bytes(st);
    int64_t c;
    if (!add && dt == st) {
        memcpy(dst, src, (size_t)d * db);
        return;
    }
    for (c = 0; c < d; c++) {
        float value = fa_load_as_f32(src + (size_t)c * sb, st);
        if (add)
            value += fa_load_as_f32(dst + (size_t)c * db, dt);
        fa_store_from_f32(dst + (size_t)c * db, dt, value);
    }
}

fa_status fa_ring_host_convert(fa_ring_transport *t, fa_tensor *dst, const fa_tensor *src, int add)
{
    const size_t db = fa_dtype_bytes(dst->dtype), sb = fa_dtype_bytes(src->dtype);
    int64_t i, j, k;
    (void)t;
    for (i = 0; i < src->shape[0]; i++)
        for (j = 0; j < src->shape[1]; j++)
            for (k = 0; k < src->shape[2]; k++) {
                char *d = (char *)dst->data +
                          (size_t)(i * dst->stride[0] + j * dst->stride[1] + k * dst->stride[2]) * db;
                const char *s = (const char *)src->data +
                                (size_t)(i * src->stride[0] + j * src->stride[1] + k * src->stride[2]) * sb;
                convert_row(d, dst->dtype, s, src->dtype, src->shape[3], add);
            }
    return FA_OK;
}
