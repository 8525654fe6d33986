/*
 * cpu_kernels.c - tile-level math of the CPU forward: dtype staging, the two tile
 * products (OpenBLAS sgemm when FA_HAVE_BLAS, else register-blocked loops the compiler
 * vectorizes), and the softmax row primitives with a vectorizable exp2.
 */
#include "cpu/cpu_internal.h"

#include <limits.h>
#include <math.h>
#include <string.h>

#include "api/dtype.h"

#ifdef FA_HAVE_BLAS
#include <cblas.h>
#endif

/* The hot loops are built for AVX-512, AVX2+FMA and baseline x86-64, picked at load time,
 * because the library itself is compiled for the baseline ISA. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define FA_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define FA_CPU_CLONES
#endif

/* Helpers of the cloned loops must be inlined into each clone to get its ISA. */
#if defined(__GNUC__)
#define FA_CPU_INLINE static inline __attribute__((always_inline))
#else
#define FA_CPU_INLINE static inline
#endif

/* Independent partial results per lane let the compiler vectorize reductions without
 * reassociating float math. */
#define FA_CPU_LANES 16

static int round_up(int x, int multiple)
{
    return (x + multiple - 1) / multiple * multiple;
}

size_t fa_cpu_aligned_floats(int count)
{
    size_t bytes = (size_t)count * sizeof(float);
    return (bytes + FA_CPU_ALIGN - 1) / FA_CPU_ALIGN * FA_CPU_ALIGN;
}

fa_cpu_shape fa_cpu_make_shape(int tile_m, int tile_n, int head_dim)
{
    fa_cpu_shape shape;
    shape.tile_m = tile_m;
    shape.tile_n = tile_n;
    shape.head_dim = head_dim;
    shape.rows_pad = round_up(tile_m, FA_CPU_ROW_BLOCK);
    shape.keys_pad = round_up(tile_n, FA_CPU_COL_BLOCK);
    shape.dim_pad = round_up(head_dim, FA_CPU_COL_BLOCK);
    return shape;
}

size_t fa_cpu_thread_bytes(const fa_cpu_shape *shape)
{
    return fa_cpu_aligned_floats(shape->rows_pad * shape->head_dim) +
           fa_cpu_aligned_floats(shape->rows_pad * shape->keys_pad) +
           fa_cpu_aligned_floats(shape->rows_pad * shape->dim_pad) +
           2 * fa_cpu_aligned_floats(shape->keys_pad * shape->dim_pad) +
           2 * fa_cpu_aligned_floats(shape->rows_pad);
}

fa_cpu_tiles fa_cpu_carve(const fa_cpu_shape *shape, void *base)
{
    char *next = base;
    fa_cpu_tiles tiles;
    tiles.q = (float *)next;
    next += fa_cpu_aligned_floats(shape->rows_pad * shape->head_dim);
    tiles.s = (float *)next;
    next += fa_cpu_aligned_floats(shape->rows_pad * shape->keys_pad);
    tiles.o = (float *)next;
    next += fa_cpu_aligned_floats(shape->rows_pad * shape->dim_pad);
    tiles.k = (float *)next;
    next += fa_cpu_aligned_floats(shape->keys_pad * shape->dim_pad);
    tiles.v = (float *)next;
    next += fa_cpu_aligned_floats(shape->keys_pad * shape->dim_pad);
    tiles.m = (float *)next;
    next += fa_cpu_aligned_floats(shape->rows_pad);
    tiles.l = (float *)next;
    return tiles;
}

static size_t dtype_bytes(fa_dtype dtype)
{
    return dtype == FA_DTYPE_F32 ? 4 : 2;
}

FA_CPU_CLONES
void fa_cpu_load_row(float *dst, const void *src, fa_dtype dtype, int n, float scale)
{
    int c;
    if (dtype == FA_DTYPE_F32) {
        const float *x = src;
        for (c = 0; c < n; c++)
            dst[c] = x[c] * scale;
    } else if (dtype == FA_DTYPE_F16) {
        const uint16_t *x = src;
        for (c = 0; c < n; c++)
            dst[c] = fa_f16_to_f32(x[c]) * scale;
    } else {
        const uint16_t *x = src;
        for (c = 0; c < n; c++)
            dst[c] = fa_bf16_to_f32(x[c]) * scale;
    }
}

void fa_cpu_store_row(void *dst, fa_dtype dtype, const float *src, int n, float scale)
{
    int c;
    if (dtype == FA_DTYPE_F32) {
        float *y = dst;
        for (c = 0; c < n; c++)
            y[c] = src[c] * scale;
    } else if (dtype == FA_DTYPE_F16) {
        uint16_t *y = dst;
        for (c = 0; c < n; c++)
            y[c] = fa_f32_to_f16(src[c] * scale);
    } else {
        uint16_t *y = dst;
        for (c = 0; c < n; c++)
            y[c] = fa_f32_to_bf16(src[c] * scale);
    }
}

void fa_cpu_load_tile(const fa_cpu_shape *shape, float *dst, const void *src, fa_dtype dtype,
                      int64_t row_stride, int rows, float scale)
{
    size_t row_bytes = (size_t)row_stride * dtype_bytes(dtype);
    int r;
    for (r = 0; r < rows; r++)
        fa_cpu_load_row(dst + (size_t)r * shape->head_dim, (const char *)src + r * row_bytes,
                        dtype, shape->head_dim, scale);
    memset(dst + (size_t)rows * shape->head_dim, 0,
           (size_t)(shape->rows_pad - rows) * shape->head_dim * sizeof(float));
}

static const void *row_at(const void *src, fa_dtype dtype, int64_t row_stride, int row)
{
    return (const char *)src + (size_t)row * (size_t)row_stride * dtype_bytes(dtype);
}

/* Rows staged in row layout: buf[r * dim_pad + c]. */
static fa_cpu_matrix stage_rows(const fa_cpu_shape *shape, float *buf, const void *src,
                                fa_dtype dtype, int64_t row_stride, int rows)
{
    fa_cpu_matrix m;
    int r;
    for (r = 0; r < rows; r++)
        fa_cpu_load_row(buf + (size_t)r * shape->dim_pad, row_at(src, dtype, row_stride, r),
                        dtype, shape->head_dim, 1.0f);
    m.data = buf;
    m.ld = shape->dim_pad;
    return m;
}

#ifdef FA_HAVE_BLAS

/* fp32 rows that sgemm can address directly need no copy. */
static int usable_in_place(const fa_cpu_shape *shape, fa_dtype dtype, int64_t row_stride)
{
    return dtype == FA_DTYPE_F32 && row_stride >= shape->head_dim && row_stride <= INT_MAX;
}

static fa_cpu_matrix stage_for_blas(const fa_cpu_shape *shape, float *buf, const void *src,
                                    fa_dtype dtype, int64_t row_stride, int rows)
{
    fa_cpu_matrix m;
    if (!usable_in_place(shape, dtype, row_stride))
        return stage_rows(shape, buf, src, dtype, row_stride, rows);
    m.data = src;
    m.ld = row_stride;
    return m;
}

fa_cpu_matrix fa_cpu_stage_keys(const fa_cpu_shape *shape, float *buf, const void *src,
                                fa_dtype dtype, int64_t row_stride, int rows)
{
    return stage_for_blas(shape, buf, src, dtype, row_stride, rows);
}

fa_cpu_matrix fa_cpu_stage_values(const fa_cpu_shape *shape, float *buf, const void *src,
                                  fa_dtype dtype, int64_t row_stride, int rows)
{
    return stage_for_blas(shape, buf, src, dtype, row_stride, rows);
}

void fa_cpu_scores(const fa_cpu_shape *shape, float *s, const float *q, fa_cpu_matrix keys,
                   int rows, int keys_count)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, keys_count, shape->head_dim,
                1.0f, q, shape->head_dim, keys.data, (int)keys.ld, 0.0f, s, shape->keys_pad);
}

void fa_cpu_accumulate(const fa_cpu_shape *shape, float *o, const float *p,
                       fa_cpu_matrix values, int rows, int keys_count)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, shape->head_dim, keys_count,
                1.0f, p, shape->keys_pad, values.data, (int)values.ld, 1.0f, o, shape->dim_pad);
}

int fa_cpu_staging_shared(void)
{
    return 1;
}

int fa_cpu_blas_threads_begin(void)
{
    int saved = openblas_get_num_threads();
    if (saved != 1)
        openblas_set_num_threads(1);
    return saved;
}

void fa_cpu_blas_threads_end(int saved)
{
    if (saved != 1)
        openblas_set_num_threads(saved);
}

#else /* own loops */

/* Keys staged transposed, buf[c * keys_pad + r], so the score loop runs along keys; the
 * padding columns are zeroed so whole column blocks stay finite. */
fa_cpu_matrix fa_cpu_stage_keys(const fa_cpu_shape *shape, float *buf, const void *src,
                                fa_dtype dtype, int64_t row_stride, int rows)
{
    fa_cpu_matrix m;
    float row[FA_MAX_HEAD_DIM];
    int cols_end = round_up(rows, FA_CPU_COL_BLOCK);
    int r, c;
    for (r = 0; r < rows; r++) {
        fa_cpu_load_row(row, row_at(src, dtype, row_stride, r), dtype, shape->head_dim, 1.0f);
        for (c = 0; c < shape->head_dim; c++)
            buf[(size_t)c * shape->keys_pad + r] = row[c];
    }
    for (c = 0; c < shape->head_dim; c++)
        memset(buf + (size_t)c * shape->keys_pad + rows, 0,
               (size_t)(cols_end - rows) * sizeof(float));
    m.data = buf;
    m.ld = shape->keys_pad;
    return m;
}

/* Values in row layout with the head-dim padding zeroed, for whole column blocks. */
fa_cpu_matrix fa_cpu_stage_values(const fa_cpu_shape *shape, float *buf, const void *src,
                                  fa_dtype dtype, int64_t row_stride, int rows)
{
    int r;
    int pad = shape->dim_pad - shape->head_dim;
    for (r = 0; r < rows; r++)
        memset(buf + (size_t)r * shape->dim_pad + shape->head_dim, 0, (size_t)pad * sizeof(float));
    return stage_rows(shape, buf, src, dtype, row_stride, rows);
}

/* One FA_CPU_ROW_BLOCK x FA_CPU_COL_BLOCK block of scores, held in registers over the
 * head dim. */
FA_CPU_INLINE void score_block(const fa_cpu_shape *shape, float *s, const float *q,
                               const float *keys_t, int depth)
{
    float acc[FA_CPU_ROW_BLOCK][FA_CPU_COL_BLOCK] = {{0}};
    int kk, r, u;
    for (kk = 0; kk < depth; kk++) {
        const float *key_col = keys_t + (size_t)kk * shape->keys_pad;
        for (r = 0; r < FA_CPU_ROW_BLOCK; r++) {
            float qv = q[(size_t)r * depth + kk];
            for (u = 0; u < FA_CPU_COL_BLOCK; u++)
                acc[r][u] += qv * key_col[u];
        }
    }
    for (r = 0; r < FA_CPU_ROW_BLOCK; r++)
        memcpy(s + (size_t)r * shape->keys_pad, acc[r], sizeof acc[r]);
}

FA_CPU_CLONES
void fa_cpu_scores(const fa_cpu_shape *shape, float *s, const float *q, fa_cpu_matrix keys,
                   int rows, int keys_count)
{
    int r0, c0;
    for (r0 = 0; r0 < rows; r0 += FA_CPU_ROW_BLOCK)
        for (c0 = 0; c0 < keys_count; c0 += FA_CPU_COL_BLOCK)
            score_block(shape, s + (size_t)r0 * shape->keys_pad + c0,
                        q + (size_t)r0 * shape->head_dim, keys.data + c0, shape->head_dim);
}

/* One FA_CPU_ROW_BLOCK x FA_CPU_COL_BLOCK block of the output, held in registers over the
 * keys. */
FA_CPU_INLINE void accumulate_block(const fa_cpu_shape *shape, float *o, const float *p,
                                    const float *values, int keys_count)
{
    float acc[FA_CPU_ROW_BLOCK][FA_CPU_COL_BLOCK];
    int c, r, u;
    for (r = 0; r < FA_CPU_ROW_BLOCK; r++)
        memcpy(acc[r], o + (size_t)r * shape->dim_pad, sizeof acc[r]);
    for (c = 0; c < keys_count; c++) {
        const float *value_row = values + (size_t)c * shape->dim_pad;
        for (r = 0; r < FA_CPU_ROW_BLOCK; r++) {
            float pv = p[(size_t)r * shape->keys_pad + c];
            for (u = 0; u < FA_CPU_COL_BLOCK; u++)
                acc[r][u] += pv * value_row[u];
        }
    }
    for (r = 0; r < FA_CPU_ROW_BLOCK; r++)
        memcpy(o + (size_t)r * shape->dim_pad, acc[r], sizeof acc[r]);
}

FA_CPU_CLONES
void fa_cpu_accumulate(const fa_cpu_shape *shape, float *o, const float *p,
                       fa_cpu_matrix values, int rows, int keys_count)
{
    int r0, c0;
    for (r0 = 0; r0 < rows; r0 += FA_CPU_ROW_BLOCK)
        for (c0 = 0; c0 < shape->head_dim; c0 += FA_CPU_COL_BLOCK)
            accumulate_block(shape, o + (size_t)r0 * shape->dim_pad + c0,
                             p + (size_t)r0 * shape->keys_pad, values.data + c0, keys_count);
}

int fa_cpu_staging_shared(void)
{
    return 0;
}

int fa_cpu_blas_threads_begin(void)
{
    return 1;
}

void fa_cpu_blas_threads_end(int saved)
{
    (void)saved;
}

#endif /* FA_HAVE_BLAS */

/* 2^x for x <= 0 (0 below 2^-126, including -inf): 2^n exactly through the exponent
 * bits times 2^f, |f| <= 1/2, from the degree-7 Taylor series of e^(f ln 2), whose
 * truncation error (< 6e-9 relative) stays below half an ulp. */
FA_CPU_INLINE float exp2_nonpositive(float x)
{
    const float round_magic = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
    float clamped = x < -127.0f ? -127.0f : x;
    float shifted = clamped + round_magic;
    float n = shifted - round_magic;
    float f = clamped - n;
    uint32_t two_n = (fa_f32_to_bits(shifted) - fa_f32_to_bits(round_magic) + 127u) << 23;
    float poly = 1.5252733804059840e-5f;
    poly = poly * f + 1.5403530393381608e-4f;
    poly = poly * f + 1.3333558146428443e-3f;
    poly = poly * f + 9.6181291076284772e-3f;
    poly = poly * f + 5.5504108664821580e-2f;
    poly = poly * f + 2.4022650695910071e-1f;
    poly = poly * f + 6.9314718055994531e-1f;
    poly = poly * f + 1.0f;
    return x < -126.0f ? 0.0f : poly * fa_bits_to_f32(two_n);
}

FA_CPU_INLINE float element_at(const void *x, fa_dtype dtype, int c)
{
    if (dtype == FA_DTYPE_F32)
        return ((const float *)x)[c];
    if (dtype == FA_DTYPE_F16)
        return fa_f16_to_f32(((const uint16_t *)x)[c]);
    return fa_bf16_to_f32(((const uint16_t *)x)[c]);
}

FA_CPU_CLONES
float fa_cpu_dot_rows(const void *x, const void *y, fa_dtype dtype, int n)
{
    float lanes[FA_CPU_LANES] = {0};
    float sum = 0.0f;
    int c = 0, u;
    for (; c + FA_CPU_LANES <= n; c += FA_CPU_LANES)
        for (u = 0; u < FA_CPU_LANES; u++)
            lanes[u] += element_at(x, dtype, c + u) * element_at(y, dtype, c + u);
    for (; c < n; c++)
        sum += element_at(x, dtype, c) * element_at(y, dtype, c);
    for (u = 0; u < FA_CPU_LANES; u++)
        sum += lanes[u];
    return sum;
}

FA_CPU_CLONES
float fa_cpu_row_max(const float *x, int n)
{
    float lanes[FA_CPU_LANES];
    float best = -INFINITY;
    int c = 0, u;
    for (u = 0; u < FA_CPU_LANES; u++)
        lanes[u] = -INFINITY;
    for (; c + FA_CPU_LANES <= n; c += FA_CPU_LANES)
        for (u = 0; u < FA_CPU_LANES; u++)
            lanes[u] = x[c + u] > lanes[u] ? x[c + u] : lanes[u];
    for (; c < n; c++)
        best = x[c] > best ? x[c] : best;
    for (u = 0; u < FA_CPU_LANES; u++)
        best = lanes[u] > best ? lanes[u] : best;
    return best;
}

FA_CPU_CLONES
float fa_cpu_exp2_row(float *x, int n, float shift)
{
    float lanes[FA_CPU_LANES] = {0};
    float sum = 0.0f;
    int c = 0, u;
    for (; c + FA_CPU_LANES <= n; c += FA_CPU_LANES)
        for (u = 0; u < FA_CPU_LANES; u++) {
            x[c + u] = exp2_nonpositive(x[c + u] - shift);
            lanes[u] += x[c + u];
        }
    for (; c < n; c++) {
        x[c] = exp2_nonpositive(x[c] - shift);
        sum += x[c];
    }
    for (u = 0; u < FA_CPU_LANES; u++)
        sum += lanes[u];
    return sum;
}

FA_CPU_CLONES
void fa_cpu_scale_row(float *x, int n, float factor)
{
    int c;
    for (c = 0; c < n; c++)
        x[c] *= factor;
}
