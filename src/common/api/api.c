/*
 * api.c - the public entry points of flashattn.h that are not a backend: contexts and
 * backend choice, tensor constructors, and the one
 * argument checker that turns (q, k, v, params, out, lse) into a resolved fa_problem.
 * fa_fwd, fa_fwd_workspace_size and fa_plan_fwd all go through prepare_forward(), fa_bwd,
 * fa_bwd_workspace_size and fa_plan_bwd through prepare_backward(), fa_fwd_kvcache and
 * its workspace query through prepare_kvcache(), so "is this supported", "how much
 * workspace" and "what runs" can never disagree.
 */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/export.h"
#include "api/problem.h"
#include "api/tensor_geometry.h"
#include "select/registry.h"

#if defined(__GNUC__)
#define FA_THREAD_LOCAL __thread
#elif defined(_MSC_VER)
#define FA_THREAD_LOCAL __declspec(thread)
#else
#define FA_THREAD_LOCAL
#endif

#define FA_INT32_MAX 2147483647LL

static int dtype_is_known(fa_dtype dtype)
{
    return dtype == FA_DTYPE_F32 || dtype == FA_DTYPE_F16 || dtype == FA_DTYPE_BF16;
}

/* A backend that failed without a message still leaves the user a reason. */
static fa_status backend_failed(fa_context *ctx, fa_status status, const char *what)
{
    if (status != FA_OK && ctx->last_error[0] == '\0')
        fa_fail(ctx, status, "%s backend: %s failed (%s)", fa_backend_name(ctx->backend), what,
                fa_status_string(status));
    return status;
}

FA_EXPORT const char *fa_last_error(const fa_context *ctx)
{
    return ctx == NULL ? "context is NULL" : ctx->last_error;
}

static FA_THREAD_LOCAL char create_error[512];

FA_EXPORT const char *fa_create_error(void)
{
    return create_error;
}

static fa_status create_failed(fa_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static fa_status create_failed(fa_status status, const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    vsnprintf(create_error, sizeof create_error, fmt, args);
    va_end(args);
    return status;
}

/* ------------------------------------------------------------------------------------ */
/* Tensors and params                                                                   */
/* ------------------------------------------------------------------------------------ */

/* stride * extent, saturating at INT64_MAX: a shape whose row-major strides do not fit
 * int64 (or a negative extent) gets strides no call accepts (FA_ERR_BAD_SIZE), never an
 * overflowed product. */
static int64_t next_stride(int64_t stride, int64_t extent)
{
    if (extent < 0 || (extent > 0 && stride > INT64_MAX / extent))
        return INT64_MAX;
    return stride * extent;
}

static fa_tensor contiguous_tensor(void *data, fa_dtype dtype, int ndim, const int64_t *shape)
{
    fa_tensor t;
    int64_t stride = 1;
    int i;
    memset(&t, 0, sizeof t);
    t.data = data;
    t.dtype = dtype;
    t.ndim = ndim;
    for (i = ndim - 1; i >= 0; --i) {
        t.shape[i] = shape[i];
        t.stride[i] = stride;
        stride = next_stride(stride, shape[i]);
    }
    return t;
}

FA_EXPORT fa_tensor fa_tensor_bshd(void *data, fa_dtype dtype, int64_t b, int64_t s, int64_t h,
                                   int64_t d)
{
    int64_t shape[4];
    shape[0] = b;
    shape[1] = s;
    shape[2] = h;
    shape[3] = d;
    return contiguous_tensor(data, dtype, 4, shape);
}

FA_EXPORT fa_tensor fa_tensor_thd(void *data, fa_dtype dtype, int64_t total, int64_t h, int64_t d)
{
    int64_t shape[3];
    shape[0] = total;
    shape[1] = h;
    shape[2] = d;
    return contiguous_tensor(data, dtype, 3, shape);
}

FA_EXPORT fa_tensor fa_tensor_lse(float *data, int64_t b, int64_t h, int64_t s_q)
{
    int64_t shape[3];
    shape[0] = b;
    shape[1] = h;
    shape[2] = s_q;
    return contiguous_tensor(data, FA_DTYPE_F32, 3, shape);
}

FA_EXPORT fa_tensor fa_tensor_lse_varlen(float *data, int64_t h, int64_t total_q)
{
    int64_t shape[2];
    shape[0] = h;
    shape[1] = total_q;
    return contiguous_tensor(data, FA_DTYPE_F32, 2, shape);
}

FA_EXPORT void fa_params_init(fa_params *params)
{
    if (params == NULL)
        return;
    memset(params, 0, sizeof *params);
    params->window_left = -1;
    params->window_right = -1;
}

/* ------------------------------------------------------------------------------------ */
/* Contexts                                                                             */
/* ------------------------------------------------------------------------------------ */

/* The ops table of a backend compiled into this build, or NULL. */
static const fa_backend_ops *compiled_ops(fa_backend backend)
{
    if (backend == FA_BACKEND_CPU)
        return &fa_cpu_ops;
    return fa_gpu_backend_built(backend) ? &fa_gpu_ops : NULL;
}

/* Allocates a context and runs the backend's init; on failure create_error says why. */
static fa_status open_backend(fa_backend backend, int device, fa_context **out)
{
    char why[sizeof create_error];
    fa_status st;
    fa_context *ctx = (fa_context *)calloc(1, sizeof *ctx);
    if (ctx == NULL)
        return create_failed(FA_ERR_OUT_OF_MEMORY, "out of memory allocating the context");
    ctx->backend = backend;
    ctx->device = device;
    ctx->ops = compiled_ops(backend);
    why[0] = '\0';
    st = ctx->ops->init(ctx, why, sizeof why);
    if (st != FA_OK) {
        free(ctx);
        return create_failed(st, "%s backend, device %d: %s", fa_backend_name(backend), device,
                             why[0] ? why : fa_status_string(st));
    }
    *out = ctx;
    return FA_OK;
}

static fa_status open_cpu(int device, fa_context **out)
{
    if (device != 0)
        return create_failed(FA_ERR_BAD_BACKEND,
                             "device %d: the cpu backend has a single device, index 0", device);
    return open_backend(FA_BACKEND_CPU, device, out);
}

/* AUTO: the first GPU backend compiled in that finds a device, else the CPU. Any error
 * other than "no device" (a bad index, a broken driver) is reported, never skipped. */
static fa_status open_auto(int device, fa_context **out)
{
    static const fa_backend gpu_order[] = {FA_BACKEND_CUDA, FA_BACKEND_HIP};
    size_t i;
    for (i = 0; i < sizeof gpu_order / sizeof gpu_order[0]; ++i) {
        fa_status st;
        if (compiled_ops(gpu_order[i]) == NULL)
            continue;
        st = open_backend(gpu_order[i], device, out);
        if (st != FA_ERR_NO_DEVICE)
            return st;
    }
    return open_cpu(device, out);
}

FA_EXPORT fa_status fa_create(fa_context **ctx, fa_backend backend, int device)
{
    fa_status st;
    create_error[0] = '\0';
    if (ctx == NULL)
        return create_failed(FA_ERR_NULL_POINTER, "ctx (the fa_context ** argument) is NULL");
    *ctx = NULL;
    if (device < 0)
        return create_failed(FA_ERR_BAD_BACKEND, "device index %d is negative", device);
    switch (backend) {
    case FA_BACKEND_AUTO:
        st = open_auto(device, ctx);
        break;
    case FA_BACKEND_CPU:
        st = open_cpu(device, ctx);
        break;
    case FA_BACKEND_CUDA:
    case FA_BACKEND_HIP:
        if (compiled_ops(backend) == NULL)
            return create_failed(FA_ERR_UNSUPPORTED, "built without %s (configure with %s=ON)",
                                 backend == FA_BACKEND_CUDA ? "CUDA" : "HIP",
                                 backend == FA_BACKEND_CUDA ? "FA_ENABLE_CUDA" : "FA_ENABLE_HIP");
        st = open_backend(backend, device, ctx);
        break;
    default:
        return create_failed(FA_ERR_BAD_BACKEND, "backend %d is not a known fa_backend value",
                             (int)backend);
    }
    if (st == FA_OK)
        create_error[0] = '\0';
    return st;
}

FA_EXPORT void fa_destroy(fa_context *ctx)
{
    if (ctx == NULL)
        return;
    if (ctx->ops->destroy != NULL)
        ctx->ops->destroy(ctx);
    free(ctx);
}

FA_EXPORT fa_backend fa_context_backend(const fa_context *ctx)
{
    return ctx == NULL ? FA_BACKEND_AUTO : ctx->backend;
}

FA_EXPORT fa_status fa_set_stream(fa_context *ctx, void *stream)
{
    fa_status st;
    if (ctx == NULL)
        return FA_ERR_NULL_POINTER;
    ctx->last_error[0] = '\0';
    if (ctx->ops->set_stream == NULL) {
        if (stream != NULL)
            return fa_fail(ctx, FA_ERR_BAD_PARAM, "stream must be NULL on the %s backend",
                           fa_backend_name(ctx->backend));
        return FA_OK;
    }
    st = ctx->ops->set_stream(ctx, stream);
    if (st != FA_OK)
        return backend_failed(ctx, st, "set_stream");
    ctx->stream = stream;
    return FA_OK;
}

FA_EXPORT fa_status fa_set_num_threads(fa_context *ctx, int num_threads)
{
    fa_status st;
    if (ctx == NULL)
        return FA_ERR_NULL_POINTER;
    ctx->last_error[0] = '\0';
    if (num_threads < 0)
        return fa_fail(ctx, FA_ERR_BAD_PARAM, "num_threads %d is negative (0 means all cores)",
                       num_threads);
    if (ctx->ops->set_num_threads != NULL) {
        st = ctx->ops->set_num_threads(ctx, num_threads);
        if (st != FA_OK)
            return backend_failed(ctx, st, "set_num_threads");
    }
    ctx->num_threads = num_threads;
    return FA_OK;
}

static void copy_name(char *dst, size_t dst_len, const char *src)
{
    snprintf(dst, dst_len, "%s", src);
}

FA_EXPORT fa_status fa_get_device_info(fa_context *ctx, fa_device_info *info)
{
    if (ctx == NULL)
        return FA_ERR_NULL_POINTER;
    ctx->last_error[0] = '\0';
    if (info == NULL)
        return fa_fail(ctx, FA_ERR_NULL_POINTER, "info is NULL");
    *info = ctx->info;
    info->backend = ctx->backend;
    copy_name(info->arch, sizeof info->arch, ctx->row.name);
    return FA_OK;
}

/* ------------------------------------------------------------------------------------ */
/* Operand checks                                                                       */
/* ------------------------------------------------------------------------------------ */

/* One q/k/v/out-like operand read as (batch, seqlen, heads, head_dim) whatever its rank:
 * a varlen [total, h, d] tensor has batch 0 here and seqlen = total rows. */
typedef struct operand_dims {
    int64_t batch, seqlen, heads, head_dim;
    fa_strides stride;
} operand_dims;

/* How a kind of tensor is laid out: its rank, the names of its dims for messages, and
 * which dims may be 0 (an empty problem: no batch, no rows); heads and head_dim never. */
typedef struct tensor_layout {
    int rank;
    const char *text;
    const char *dims[4];
    unsigned empty_ok; /* bit i: dim i may be 0 */
} tensor_layout;

static const tensor_layout bshd_layout = {4, "[b, s, h, d]", {"batch", "seqlen", "heads", "head_dim"}, 0x3u};
static const tensor_layout thd_layout = {3, "[total, h, d] (varlen)", {"total rows", "heads", "head_dim"}, 0x1u};
static const tensor_layout lse_layout = {3, "[b, h, s_q]", {"batch", "heads", "seqlen"}, 0x5u};
static const tensor_layout lse_varlen_layout = {2, "[h, total_q] (varlen)", {"heads", "total rows"}, 0x2u};

/* Every dim in 0..INT32_MAX (1.. for those that may not be empty; kernels index rows and
 * heads with int32, cu_seqlens are int32) and every stride >= 0. */
static fa_status check_dims(fa_context *ctx, const char *name, const fa_tensor *t,
                            const tensor_layout *layout)
{
    int i;
    for (i = 0; i < layout->rank; ++i) {
        int64_t least = (layout->empty_ok >> i) & 1u ? 0 : 1;
        if (t->shape[i] < least || t->shape[i] > FA_INT32_MAX)
            return fa_fail(ctx, FA_ERR_BAD_SIZE, "%s %s %lld is out of range %lld..%lld", name,
                           layout->dims[i], (long long)t->shape[i], (long long)least,
                           FA_INT32_MAX);
        if (t->stride[i] < 0)
            return fa_fail(ctx, FA_ERR_BAD_STRIDE, "%s stride[%d] = %lld is negative", name, i,
                           (long long)t->stride[i]);
    }
    return FA_OK;
}

/* Every address a backend forms from the tensor, in bytes, representable in int64, so no
 * address arithmetic can overflow: the last element's offset plus one more step along any
 * dim (a pointer one past the end, e.g. where an empty varlen sequence after the last row
 * starts). Zero extents count as 1: an empty tensor's sequences still get base pointers. */
static fa_status check_offsets(fa_context *ctx, const char *name, const fa_tensor *t,
                               const tensor_layout *layout)
{
    int64_t max_offset = 0, max_stride = 0;
    int64_t limit = INT64_MAX / (int64_t)fa_dtype_bytes(t->dtype);
    int i;
    for (i = 0; i < t->ndim; ++i)
        if (t->stride[i] > max_stride)
            max_stride = t->stride[i];
    if (max_stride > limit)
        return fa_fail(ctx, FA_ERR_BAD_SIZE, "%s element offsets overflow int64 (stride %lld)",
                       name, (long long)max_stride);
    limit -= max_stride;
    for (i = 0; i < t->ndim; ++i) {
        int64_t steps = t->shape[i] > 0 ? t->shape[i] - 1 : 0;
        if (steps > 0 && t->stride[i] > (limit - max_offset) / steps)
            return fa_fail(ctx, FA_ERR_BAD_SIZE,
                           "%s element offsets overflow int64 (%s %lld x stride %lld)", name,
                           layout->dims[i], (long long)t->shape[i], (long long)t->stride[i]);
        max_offset += steps * t->stride[i];
    }
    return FA_OK;
}

/* Present, of the layout's rank and a known dtype, with valid dims and offsets; its data
 * may be NULL exactly when it has no elements (PyTorch hands NULL for empty tensors). */
static fa_status check_present(fa_context *ctx, const char *name, const fa_tensor *t,
                               const tensor_layout *layout)
{
    fa_status st;
    if (t == NULL)
        return fa_fail(ctx, FA_ERR_NULL_POINTER, "%s is NULL", name);
    if (t->ndim != layout->rank)
        return fa_fail(ctx, FA_ERR_BAD_RANK, "%s has %d dims, expected %d %s", name, t->ndim,
                       layout->rank, layout->text);
    if (!dtype_is_known(t->dtype))
        return fa_fail(ctx, FA_ERR_BAD_DTYPE, "%s dtype %d is not a known fa_dtype", name,
                       (int)t->dtype);
    st = check_dims(ctx, name, t, layout);
    if (st == FA_OK)
        st = check_offsets(ctx, name, t, layout);
    if (st == FA_OK && t->data == NULL && fa_tensor_has_elements(t))
        return fa_fail(ctx, FA_ERR_NULL_POINTER, "%s data is NULL", name);
    return st;
}

/* An output whose elements do not share memory: with its dims of extent > 1 in order of
 * stride, each stride reaches past everything the smaller ones span. (Sufficient, and
 * what every dense or padded layout meets; a stride-0 or interleaved output would make
 * the backends' writes race.) Assumes check_present passed. */
static fa_status check_no_self_overlap(fa_context *ctx, const char *name, const fa_tensor *t)
{
    int64_t span; /* elements covered by the dims with smaller strides */
    const int dim = fa_tensor_has_elements(t) ? fa_tensor_overlap_dim(t, &span) : -1;
    if (dim >= 0)
        return fa_fail(ctx, FA_ERR_BAD_STRIDE,
                       "%s overlaps itself: stride[%d] = %lld is less than the %lld elements "
                       "the dims with smaller strides span",
                       name, dim, (long long)t->stride[dim], (long long)span);
    return FA_OK;
}

/* The outputs a call writes: out and lse (forward), dq, dk, dv (backward). */
static fa_status check_outputs_disjoint(fa_context *ctx, const char *const *names,
                                        const fa_tensor *const *outputs, int count)
{
    int i;
    fa_status st = FA_OK;
    for (i = 0; i < count && st == FA_OK; ++i)
        if (outputs[i] != NULL)
            st = check_no_self_overlap(ctx, names[i], outputs[i]);
    return st;
}

static void read_dims(const fa_tensor *t, int varlen, operand_dims *dims)
{
    if (varlen) {
        dims->batch = 0;
        dims->seqlen = t->shape[0];
        dims->heads = t->shape[1];
        dims->head_dim = t->shape[2];
        dims->stride.batch = 0;
        dims->stride.row = t->stride[0];
        dims->stride.head = t->stride[1];
        return;
    }
    dims->batch = t->shape[0];
    dims->seqlen = t->shape[1];
    dims->heads = t->shape[2];
    dims->head_dim = t->shape[3];
    dims->stride.batch = t->stride[0];
    dims->stride.row = t->stride[1];
    dims->stride.head = t->stride[2];
}

/* q, k, v, out and the gradients: [b, s, h, d] (or [total, h, d] varlen), last dim
 * contiguous. */
static fa_status check_operand(fa_context *ctx, const char *name, const fa_tensor *t,
                               int varlen, operand_dims *dims)
{
    fa_status st;
    const tensor_layout *layout = varlen ? &thd_layout : &bshd_layout;
    int rank = layout->rank;
    st = check_present(ctx, name, t, layout);
    if (st != FA_OK)
        return st;
    if (t->stride[rank - 1] != 1)
        return fa_fail(ctx, FA_ERR_BAD_STRIDE, "%s head_dim stride is %lld, must be 1", name,
                       (long long)t->stride[rank - 1]);
    read_dims(t, varlen, dims);
    return FA_OK;
}

static fa_status check_same_dim(fa_context *ctx, const char *name, const char *ref_name,
                                const char *what, int64_t value, int64_t ref_value)
{
    if (value != ref_value)
        return fa_fail(ctx, FA_ERR_SHAPE_MISMATCH, "%s %s %lld != %s %s %lld", name, what,
                       (long long)value, ref_name, what, (long long)ref_value);
    return FA_OK;
}

/* A tensor that must have exactly the shape and dtype of another (out like q, v like k). */
static fa_status check_like(fa_context *ctx, const char *name, const fa_tensor *t,
                            const operand_dims *d, const char *ref_name,
                            const fa_tensor *ref, const operand_dims *ref_d)
{
    fa_status st;
    if (t->dtype != ref->dtype)
        return fa_fail(ctx, FA_ERR_BAD_DTYPE, "%s dtype %s != %s dtype %s", name,
                       fa_dtype_name(t->dtype), ref_name, fa_dtype_name(ref->dtype));
    st = check_same_dim(ctx, name, ref_name, "batch", d->batch, ref_d->batch);
    if (st == FA_OK)
        st = check_same_dim(ctx, name, ref_name, "seqlen", d->seqlen, ref_d->seqlen);
    if (st == FA_OK)
        st = check_same_dim(ctx, name, ref_name, "heads", d->heads, ref_d->heads);
    if (st == FA_OK)
        st = check_same_dim(ctx, name, ref_name, "head_dim", d->head_dim, ref_d->head_dim);
    return st;
}

static fa_status check_head_dim(fa_context *ctx, int64_t head_dim)
{
    if (head_dim % 8 != 0)
        return fa_fail(ctx, FA_ERR_BAD_HEAD_DIM, "q head_dim %lld is not a multiple of 8",
                       (long long)head_dim);
    if (head_dim > FA_MAX_HEAD_DIM)
        return fa_fail(ctx, FA_ERR_BAD_HEAD_DIM, "q head_dim %lld > %d (the largest supported)",
                       (long long)head_dim, FA_MAX_HEAD_DIM);
    return FA_OK;
}

/* GPU backends compute in fp16/bf16 only; fp32 is a CPU-backend convenience. */
static fa_status check_dtype_on_backend(fa_context *ctx, fa_dtype dtype)
{
    if (dtype == FA_DTYPE_F32 && ctx->backend != FA_BACKEND_CPU)
        return fa_fail(ctx, FA_ERR_UNSUPPORTED,
                       "q dtype f32 is supported on the cpu backend only; the %s backend takes "
                       "f16 or bf16",
                       fa_backend_name(ctx->backend));
    return FA_OK;
}

/* LSE: fp32 [b, h, s_q] (varlen [h, total_q]), any non-negative strides. */
static fa_status check_lse(fa_context *ctx, const char *name, const fa_tensor *lse, int varlen,
                           const operand_dims *q, int64_t batch, fa_strides *stride)
{
    fa_status st;
    st = check_present(ctx, name, lse, varlen ? &lse_varlen_layout : &lse_layout);
    if (st != FA_OK)
        return st;
    if (lse->dtype != FA_DTYPE_F32)
        return fa_fail(ctx, FA_ERR_BAD_DTYPE, "%s dtype %s must be f32", name,
                       fa_dtype_name(lse->dtype));
    if (varlen) {
        st = check_same_dim(ctx, name, "q", "heads", lse->shape[0], q->heads);
        if (st == FA_OK)
            st = check_same_dim(ctx, name, "q", "total rows", lse->shape[1], q->seqlen);
        stride->batch = 0;
        stride->head = lse->stride[0];
        stride->row = lse->stride[1];
        return st;
    }
    st = check_same_dim(ctx, name, "q", "batch", lse->shape[0], batch);
    if (st == FA_OK)
        st = check_same_dim(ctx, name, "q", "heads", lse->shape[1], q->heads);
    if (st == FA_OK)
        st = check_same_dim(ctx, name, "q", "seqlen", lse->shape[2], q->seqlen);
    stride->batch = lse->stride[0];
    stride->head = lse->stride[1];
    stride->row = lse->stride[2];
    return st;
}

/* ------------------------------------------------------------------------------------ */
/* Parameter checks                                                                     */
/* ------------------------------------------------------------------------------------ */

/* Every backend folds the score transform into fp32 constants: scale * log2(e), and
 * with softcap scale / softcap and softcap * log2(e), whose scores differ by up to twice
 * that. Each must be a finite, normal fp32 number, else rows that see keys come out 0,
 * -inf or NaN (softcap 1e-45 or FLT_MAX, scale FLT_MAX). */
static fa_status check_score_transform(fa_context *ctx, const fa_params *p, int64_t head_dim)
{
    const double log2e = 1.4426950408889634, fp32_max = 3.4028234663852886e38;
    const double fp32_min = 1.1754943508222875e-38;
    double scale = p->softmax_scale != 0.0f ? (double)p->softmax_scale : 1.0 / sqrt((double)head_dim);
    if (scale * log2e > fp32_max)
        return fa_fail(ctx, FA_ERR_BAD_PARAM,
                       "softmax_scale %g overflows fp32 in the log2 domain (scale * log2(e))", scale);
    if (p->softcap > 0.0f &&
        (2.0 * p->softcap * log2e > fp32_max || scale / p->softcap > fp32_max ||
         scale / p->softcap < fp32_min))
        return fa_fail(ctx, FA_ERR_BAD_PARAM,
                       "softcap %g with softmax_scale %g leaves fp32's range (scale / softcap and "
                       "2 * softcap * log2(e) must be normal fp32 numbers)",
                       (double)p->softcap, scale);
    return FA_OK;
}

static fa_status check_scalars(fa_context *ctx, const fa_params *p, int64_t head_dim)
{
    int i;
    fa_status st;
    if (!isfinite(p->softmax_scale) || p->softmax_scale < 0.0f)
        return fa_fail(ctx, FA_ERR_BAD_PARAM,
                       "softmax_scale %g must be finite and >= 0 (0 means 1/sqrt(d))",
                       (double)p->softmax_scale);
    if (!isfinite(p->softcap) || p->softcap < 0.0f)
        return fa_fail(ctx, FA_ERR_BAD_PARAM, "softcap %g must be finite and >= 0 (0 is off)",
                       (double)p->softcap);
    st = check_score_transform(ctx, p, head_dim);
    if (st != FA_OK)
        return st;
    if (p->window_left < -1)
        return fa_fail(ctx, FA_ERR_BAD_PARAM, "window_left %d < -1 (-1 means unbounded)",
                       p->window_left);
    if (p->window_right < -1)
        return fa_fail(ctx, FA_ERR_BAD_PARAM, "window_right %d < -1 (-1 means unbounded)",
                       p->window_right);
    if (p->num_splits < 0)
        return fa_fail(ctx, FA_ERR_BAD_PARAM, "num_splits %d is negative (0 means auto)",
                       p->num_splits);
    if (p->alibi_batch_stride < 0)
        return fa_fail(ctx, FA_ERR_BAD_PARAM, "alibi_batch_stride %lld is negative",
                       (long long)p->alibi_batch_stride);
    for (i = 0; i < (int)(sizeof p->reserved / sizeof p->reserved[0]); ++i)
        if (p->reserved[i] != 0)
            return fa_fail(ctx, FA_ERR_BAD_PARAM, "params.reserved[%d] = %d, must be 0", i,
                           p->reserved[i]);
    return FA_OK;
}

/* Keys one block-table row reaches: block_table_width pages of page_block_size. */
static int64_t table_row_keys(const fa_params *p)
{
    return (int64_t)p->block_table_width * p->page_block_size;
}

/* The paged-K/V fields (PAGED KV CACHE in flashattn.h): all 0 without a block table;
 * with one, a page size the kernels tile (multiples of 16 up to 1024), rows of at least
 * one entry that do not overlap, sequences within int32 keys and table offsets within
 * int64 bytes. The page ids themselves are device data, checked where the call runs. */
static fa_status check_paging(fa_context *ctx, const fa_params *p, int64_t batch)
{
    int64_t stride = p->block_table_batch_stride;
    if (p->block_table == NULL) {
        if (stride != 0 || p->page_block_size != 0 || p->block_table_width != 0)
            return fa_fail(ctx, FA_ERR_BAD_PARAM,
                           "block_table_batch_stride %lld, page_block_size %d and "
                           "block_table_width %d must be 0 without block_table",
                           (long long)stride, p->page_block_size, p->block_table_width);
        return FA_OK;
    }
    if (p->page_block_size < 16 || p->page_block_size > 1024 || p->page_block_size % 16 != 0)
        return fa_fail(ctx, FA_ERR_BAD_PARAM,
                       "page_block_size %d must be a multiple of 16 in 16..1024",
                       p->page_block_size);
    if (p->block_table_width < 1)
        return fa_fail(ctx, FA_ERR_BAD_PARAM, "block_table_width %d must be >= 1 with block_table",
                       p->block_table_width);
    if (stride < p->block_table_width)
        return fa_fail(ctx, FA_ERR_BAD_PARAM,
                       "block_table_batch_stride %lld < block_table_width %d (rows would overlap)",
                       (long long)stride, p->block_table_width);
    if (table_row_keys(p) > FA_INT32_MAX)
        return fa_fail(ctx, FA_ERR_BAD_SIZE,
                       "block_table_width %d x page_block_size %d keys per sequence > %lld",
                       p->block_table_width, p->page_block_size, FA_INT32_MAX);
    if (batch > 1 && stride > (INT64_MAX / 4 - p->block_table_width) / (batch - 1))
        return fa_fail(ctx, FA_ERR_BAD_SIZE,
                       "block_table offsets overflow int64 (batch %lld x block_table_batch_stride "
                       "%lld)", (long long)batch, (long long)stride);
    if (p->cu_seqlens_k != NULL && p->max_seqlen_k > table_row_keys(p))
        return fa_fail(ctx, FA_ERR_BAD_PARAM,
                       "max_seqlen_k %d > block_table_width %d x page_block_size %d (the keys a "
                       "block-table row reaches)",
                       p->max_seqlen_k, p->block_table_width, p->page_block_size);
    return FA_OK;
}

/* Varlen needs both cu_seqlens arrays, a batch (0: an empty call, cu_seqlens [0]) and
 * non-negative max lengths. */
static fa_status check_varlen_params(fa_context *ctx, const fa_params *p)
{
    int has_q = p->cu_seqlens_q != NULL, has_k = p->cu_seqlens_k != NULL;
    if (has_q != has_k)
        return fa_fail(ctx, FA_ERR_BAD_PARAM,
                       "varlen needs both cu_seqlens_q and cu_seqlens_k; only %s is set",
                       has_q ? "cu_seqlens_q" : "cu_seqlens_k");
    if (!has_q)
        return FA_OK;
    /* cu_seqlens hold varlen_batch + 1 entries: that count must itself be an int. */
    if (p->varlen_batch < 0 || p->varlen_batch >= 2147483647)
        return fa_fail(ctx, FA_ERR_BAD_PARAM,
                       "varlen_batch %d must be in 0..2147483646 with cu_seqlens",
                       p->varlen_batch);
    if (p->max_seqlen_q < 0 || p->max_seqlen_k < 0)
        return fa_fail(ctx, FA_ERR_BAD_PARAM, "max_seqlen_q %d / max_seqlen_k %d is negative",
                       p->max_seqlen_q, p->max_seqlen_k);
    return FA_OK;
}

/* The slopes a call reads, [b, h] at alibi_batch_stride, addressable in int64 bytes
 * like every tensor's offsets. */
static fa_status check_alibi(fa_context *ctx, const fa_params *p, int64_t batch, int64_t heads)
{
    int64_t limit = INT64_MAX / (int64_t)sizeof(float) - (heads - 1);
    if (p->alibi_slopes == NULL || batch <= 1 || p->alibi_batch_stride <= 0)
        return FA_OK;
    if (p->alibi_batch_stride > limit / (batch - 1))
        return fa_fail(ctx, FA_ERR_BAD_SIZE,
                       "alibi slope offsets overflow int64 (batch %lld x alibi_batch_stride %lld)",
                       (long long)batch, (long long)p->alibi_batch_stride);
    return FA_OK;
}

/* cu_seqlens: starts at 0, non-decreasing, ends at the tensor's rows (total_rows; < 0:
 * the array gives lengths only, paged K/V), every length within max_seqlen. *longest
 * receives the largest length. */
static fa_status check_cu_seqlens(fa_context *ctx, const char *name, const int32_t *cu,
                                  int batch, int64_t total_rows, int max_seqlen,
                                  const char *max_name, int64_t *longest)
{
    int i;
    *longest = 0;
    if (cu[0] != 0)
        return fa_fail(ctx, FA_ERR_BAD_SEQLENS, "%s[0] = %d, must be 0", name, cu[0]);
    for (i = 0; i < batch; ++i) {
        int64_t len = (int64_t)cu[i + 1] - cu[i];
        if (len < 0)
            return fa_fail(ctx, FA_ERR_BAD_SEQLENS, "%s decreases: [%d] = %d > [%d] = %d", name,
                           i, cu[i], i + 1, cu[i + 1]);
        if (len > max_seqlen)
            return fa_fail(ctx, FA_ERR_BAD_SEQLENS,
                           "%s sequence %d has length %lld > %s %d", name, i, (long long)len,
                           max_name, max_seqlen);
        if (len > *longest)
            *longest = len;
    }
    if (total_rows >= 0 && cu[batch] != total_rows)
        return fa_fail(ctx, FA_ERR_BAD_SEQLENS, "%s[%d] = %d != the tensor's total rows %lld",
                       name, batch, cu[batch], (long long)total_rows);
    return FA_OK;
}

/* seqused_k[i] within 0 .. the number of keys sequence i has. */
static fa_status check_seqused(fa_context *ctx, const int32_t *used, const int32_t *cu_k,
                               int batch, int64_t seqlen_k)
{
    int i;
    for (i = 0; i < batch; ++i) {
        int64_t keys = cu_k != NULL ? (int64_t)cu_k[i + 1] - cu_k[i] : seqlen_k;
        if (used[i] < 0 || used[i] > keys)
            return fa_fail(ctx, FA_ERR_BAD_SEQLENS,
                           "seqused_k[%d] = %d is outside 0..%lld (the keys of sequence %d)", i,
                           used[i], (long long)keys, i);
    }
    return FA_OK;
}

/* Where a backend's cu_seqlens and seqused_k live: host memory on the CPU backend, which
 * api.c checks before the call; device memory elsewhere, which the host never reads (the
 * device check, seq_check.h, does). */
static int indices_on_host(const fa_context *ctx)
{
    return ctx->ops->device_error == NULL;
}

/* The host-side checks of cu_seqlens and seqused_k (host memory). Varlen resolves
 * seqlen_q/k to the longest sequence actually present. */
static fa_status check_host_sequences(fa_context *ctx, const fa_params *params, fa_problem *p)
{
    const int32_t *cu_k = p->varlen ? params->cu_seqlens_k : NULL;
    fa_status st = FA_OK;
    if (p->varlen) {
        st = check_cu_seqlens(ctx, "cu_seqlens_q", params->cu_seqlens_q, p->batch, p->total_q,
                              params->max_seqlen_q, "max_seqlen_q", &p->seqlen_q);
        if (st == FA_OK)
            st = check_cu_seqlens(ctx, "cu_seqlens_k", cu_k, p->batch,
                                  p->block_table ? -1 : p->total_k, params->max_seqlen_k,
                                  "max_seqlen_k", &p->seqlen_k);
        if (st == FA_OK)
            p->total_k = cu_k[p->batch]; /* paged: the logical keys */
    }
    if (st == FA_OK && params->seqused_k != NULL && p->batch > 0)
        st = check_seqused(ctx, params->seqused_k, cu_k, p->batch, p->seqlen_k);
    return st;
}

/* cu_seqlens and seqused_k: checked here when they are host memory; else left to the
 * device check, and a varlen call's lengths are bounded by max_seqlen_q/k (which the
 * device check enforces per sequence), capped at the tensors' rows, which no sequence of
 * a valid call exceeds. The GPU grids are sized from these. */
static fa_status check_sequences(fa_context *ctx, const fa_params *params, fa_problem *p)
{
    if (indices_on_host(ctx))
        return check_host_sequences(ctx, params, p);
    if (p->varlen) {
        p->seqlen_q = params->max_seqlen_q < p->total_q ? params->max_seqlen_q : p->total_q;
        p->seqlen_k = params->max_seqlen_k < p->total_k ? params->max_seqlen_k : p->total_k;
    }
    return FA_OK;
}

/* ------------------------------------------------------------------------------------ */
/* The one argument checker                                                             */
/* ------------------------------------------------------------------------------------ */

/* The tensors of a call. out/lse are NULL for the queries (workspace size, plan). */
typedef struct call_tensors {
    const fa_tensor *q, *k, *v, *out, *lse;
} call_tensors;

/* The dims of each checked tensor of a call. */
typedef struct call_dims {
    operand_dims q, k, v, out;
} call_dims;

/* pool: k and v are [pages or cache rows, rows, h_k, d] whatever q's rank, their first
 * dim unrelated to q's batch (page pools, caches read through cache_batch_idx). */
static fa_status check_qkv(fa_context *ctx, const call_tensors *t, int varlen, int pool,
                           call_dims *d)
{
    const operand_dims *q = &d->q, *k = &d->k;
    fa_status st = check_operand(ctx, "q", t->q, varlen, &d->q);
    if (st == FA_OK)
        st = check_operand(ctx, "k", t->k, varlen && !pool, &d->k);
    if (st == FA_OK)
        st = check_operand(ctx, "v", t->v, varlen && !pool, &d->v);
    if (st == FA_OK)
        st = check_head_dim(ctx, q->head_dim);
    if (st == FA_OK && t->k->dtype != t->q->dtype)
        st = fa_fail(ctx, FA_ERR_BAD_DTYPE, "k dtype %s != q dtype %s",
                     fa_dtype_name(t->k->dtype), fa_dtype_name(t->q->dtype));
    if (st == FA_OK)
        st = check_dtype_on_backend(ctx, t->q->dtype);
    if (st == FA_OK && !pool)
        st = check_same_dim(ctx, "k", "q", "batch", k->batch, q->batch);
    if (st == FA_OK)
        st = check_same_dim(ctx, "k", "q", "head_dim", k->head_dim, q->head_dim);
    if (st == FA_OK)
        st = check_like(ctx, "v", t->v, &d->v, "k", t->k, k);
    if (st == FA_OK && q->heads % k->heads != 0)
        st = fa_fail(ctx, FA_ERR_BAD_GQA, "q heads %lld is not a multiple of k heads %lld",
                     (long long)q->heads, (long long)k->heads);
    return st;
}

/* out and the gradients must match q (or k) exactly: same dtype and dims. */
static fa_status check_operand_like(fa_context *ctx, const char *name, const fa_tensor *t,
                                    int varlen, const char *ref_name, const fa_tensor *ref,
                                    const operand_dims *ref_dims, operand_dims *dims)
{
    fa_status st = check_operand(ctx, name, t, varlen, dims);
    if (st != FA_OK)
        return st;
    return check_like(ctx, name, t, dims, ref_name, ref, ref_dims);
}

static void fill_problem(const call_tensors *t, const fa_params *params, int varlen,
                         int64_t batch, const call_dims *d, fa_problem *p)
{
    const operand_dims *q = &d->q, *k = &d->k;
    memset(p, 0, sizeof *p);
    p->dtype = t->q->dtype;
    p->batch = (int)batch;
    p->heads = (int)q->heads;
    p->heads_k = (int)k->heads;
    p->head_dim = (int)q->head_dim;
    p->varlen = varlen;
    p->seqlen_q = q->seqlen; /* varlen: bounded by check_sequences */
    p->seqlen_k = k->seqlen;
    p->total_q = varlen ? q->seqlen : batch * q->seqlen;
    p->total_k = varlen ? k->seqlen : batch * k->seqlen;
    p->q = t->q->data;
    p->k = t->k->data;
    p->v = t->v->data;
    p->out = t->out != NULL ? t->out->data : NULL;
    p->q_stride = q->stride;
    p->k_stride = k->stride;
    p->v_stride = d->v.stride;
    p->out_stride = d->out.stride;
    p->cu_seqlens_q = params->cu_seqlens_q;
    p->cu_seqlens_k = params->cu_seqlens_k;
    p->seqused_k = params->seqused_k;
    p->alibi_slopes = params->alibi_slopes;
    p->alibi_batch_stride = params->alibi_batch_stride;
    p->softmax_scale = params->softmax_scale != 0.0f
                           ? params->softmax_scale
                           : (float)(1.0 / sqrt((double)q->head_dim));
    p->softcap = params->softcap;
    p->window.left = params->window_left;
    p->window.right = params->causal ? 0 : params->window_right;
    p->num_splits_request = params->num_splits;
    p->deterministic = params->deterministic;
}

/* A paged problem's table, and its logical keys: width x page_block_size per sequence
 * (varlen: check_sequences resolves them from cu_seqlens_k). */
static void fill_paging(const fa_params *params, int64_t num_pages, fa_problem *p)
{
    if (params->block_table == NULL)
        return;
    p->block_table = params->block_table;
    p->block_table_stride = params->block_table_batch_stride;
    p->block_table_width = params->block_table_width;
    p->page_size = params->page_block_size;
    p->num_pages = num_pages;
    p->seqlen_k = table_row_keys(params);
    p->total_k = (int64_t)p->batch * p->seqlen_k;
}

/* The rows of each page of a pool are page_block_size. */
static fa_status check_page_rows(fa_context *ctx, const fa_params *params, const operand_dims *k)
{
    if (params->block_table == NULL || k->seqlen == params->page_block_size)
        return FA_OK;
    return fa_fail(ctx, FA_ERR_SHAPE_MISMATCH,
                   "k (a page pool) has %lld rows per page != page_block_size %d",
                   (long long)k->seqlen, params->page_block_size);
}

/* Every check of a forward (or backward) call, in one place, producing the resolved
 * problem. Nothing is written anywhere but *p and ctx->last_error. */
static fa_status build_problem(fa_context *ctx, const call_tensors *t, const fa_params *params,
                               fa_problem *p)
{
    call_dims d;
    fa_strides lse_stride;
    int64_t batch;
    int varlen;
    fa_status st;
    if (params == NULL)
        return fa_fail(ctx, FA_ERR_NULL_POINTER, "params is NULL (use fa_params_init)");
    st = check_varlen_params(ctx, params);
    if (st != FA_OK)
        return st;
    varlen = params->cu_seqlens_q != NULL;
    memset(&d, 0, sizeof d);
    st = check_qkv(ctx, t, varlen, params->block_table != NULL, &d);
    if (st == FA_OK && t->out != NULL)
        st = check_operand_like(ctx, "out", t->out, varlen, "q", t->q, &d.q, &d.out);
    if (st != FA_OK)
        return st;
    batch = varlen ? params->varlen_batch : d.q.batch;
    st = check_alibi(ctx, params, batch, d.q.heads);
    if (st != FA_OK)
        return st;
    if (t->lse != NULL) {
        st = check_lse(ctx, "lse", t->lse, varlen, &d.q, batch, &lse_stride);
        if (st != FA_OK)
            return st;
    }
    st = check_scalars(ctx, params, d.q.head_dim);
    if (st == FA_OK)
        st = check_paging(ctx, params, batch);
    if (st == FA_OK)
        st = check_page_rows(ctx, params, &d.k);
    if (st != FA_OK)
        return st;
    fill_problem(t, params, varlen, batch, &d, p);
    fill_paging(params, d.k.batch, p);
    if (t->lse != NULL) {
        p->lse = (float *)t->lse->data;
        p->lse_stride = lse_stride;
    }
    return check_sequences(ctx, params, p);
}

/* ------------------------------------------------------------------------------------ */
/* Selection and the forward entry points                                               */
/* ------------------------------------------------------------------------------------ */

/* The tile override of a pass: the forward and the backward are tuned separately. */
static const char *tile_override_variable(fa_pass pass)
{
    return pass == FA_PASS_BWD ? "FLASHATTN_FORCE_BWD_TILE" : "FLASHATTN_FORCE_TILE";
}

static fa_status read_tile_override(fa_context *ctx, fa_pass pass, fa_tile_override *force)
{
    const char *name = tile_override_variable(pass);
    const char *text = getenv(name);
    memset(force, 0, sizeof *force);
    if (fa_parse_tile_override(text, force) != FA_OK)
        return fa_fail(ctx, FA_ERR_BAD_TILE_OVERRIDE,
                       "%s=\"%s\" is malformed: expected MxN or MxN:S "
                       "(e.g. 128x64 or 128x64:2)",
                       name, text);
    return FA_OK;
}

/* The backward's dout, dk and dv too (its warpgroup kernel stores dK and dV by TMA); a
 * plan or workspace query has none, and answers for ones that are addressable. The
 * workspace it answers is then never too small: both families
 * on a row with warpgroup MMA sum dQ by atomics, and for a deterministic call the
 * warpgroup family's (accumulator and order rows) is the larger one. */
static int tma_absent_or_ok(const void *data, const fa_strides *s, int varlen)
{
    return data == NULL || fa_tma_operand_ok(data, s, varlen);
}

static int tma_addressable(const fa_problem *p, fa_pass pass)
{
    if (!fa_tma_operand_ok(p->q, &p->q_stride, p->varlen) || !fa_tma_operand_ok(p->k, &p->k_stride, p->varlen) ||
        !fa_tma_operand_ok(p->v, &p->v_stride, p->varlen))
        return 0;
    return pass != FA_PASS_BWD || (tma_absent_or_ok(p->dout, &p->dout_stride, p->varlen) &&
                                   tma_absent_or_ok(p->dk, &p->dk_stride, p->varlen) &&
                                   tma_absent_or_ok(p->dv, &p->dv_stride, p->varlen));
}

static fa_status select_kernel(fa_context *ctx, const fa_problem *p, fa_pass pass,
                               fa_selection *sel)
{
    fa_problem_shape shape;
    fa_tile_override force;
    const fa_kernel_config *registry;
    int count = 0;
    fa_status st = read_tile_override(ctx, pass, &force);
    if (st != FA_OK)
        return st;
    memset(&shape, 0, sizeof shape);
    shape.pass = pass;
    shape.dtype = p->dtype;
    shape.batch = p->batch;
    shape.heads = p->heads;
    shape.heads_k = p->heads_k;
    shape.head_dim = p->head_dim;
    shape.seqlen_q = p->seqlen_q;
    shape.seqlen_k = p->seqlen_k;
    shape.has_mask = p->window.left >= 0 || p->window.right >= 0;
    shape.num_splits_request = p->num_splits_request;
    shape.paged = p->block_table != NULL;
    shape.page_size = p->page_size;
    shape.tma_ok = tma_addressable(p, pass);
    shape.deterministic = pass == FA_PASS_BWD && p->deterministic;
    memset(sel, 0, sizeof *sel);
    registry = pass == FA_PASS_BWD ? fa_registry_bwd(ctx->backend, &count)
                                   : fa_registry(ctx->backend, &count);
    st = fa_select_config(&ctx->row, registry, count, &shape, &force, sel);
    if (st == FA_ERR_BAD_TILE_OVERRIDE)
        return fa_fail(ctx, st, "%s=\"%s\": %s", tile_override_variable(pass),
                       getenv(tile_override_variable(pass)), sel->reason);
    if (st != FA_OK)
        return fa_fail(ctx, st, "no %s %s kernel for %s d=%d on %s: %s",
                       fa_backend_name(ctx->backend),
                       pass == FA_PASS_BWD ? "backward" : "forward", fa_dtype_name(p->dtype),
                       p->head_dim, ctx->row.name, sel->reason);
    return FA_OK;
}

/* The "kernel" of a call with nothing to compute: its plan names it, nothing launches. */
static const fa_kernel_config no_kernel = {"none", FA_BACKEND_AUTO, FA_VENDOR_CPU, FA_PASS_FWD,
                                           FA_DTYPE_F32, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, {NULL, NULL}};

/* Empty problems are valid calls: a forward without query rows, or a backward without
 * query and key rows, has no output element to write. A backward with rows on one side
 * only still runs, to write its zero gradients. */
static int nothing_to_compute(const fa_problem *p, fa_pass pass)
{
    return pass == FA_PASS_BWD ? p->total_q == 0 && p->total_k == 0 : p->total_q == 0;
}

/* Nothing is selected, but a malformed tile override fails this call as any other. */
static fa_status select_no_kernel(fa_context *ctx, const fa_problem *p, fa_pass pass,
                                  fa_selection *sel, size_t *workspace_bytes)
{
    fa_tile_override force;
    fa_status st = read_tile_override(ctx, pass, &force);
    if (st != FA_OK)
        return st;
    memset(sel, 0, sizeof *sel);
    sel->config = &no_kernel;
    sel->num_splits = 1;
    snprintf(sel->reason, sizeof sel->reason,
             "empty problem (batch %d, %s): nothing to compute, no kernel runs", p->batch,
             pass == FA_PASS_BWD ? "no query or key rows" : "no query rows");
    *workspace_bytes = 0;
    return FA_OK;
}

/* Validation, selection and the workspace query: everything a forward does but launch. */
static fa_status prepare_forward(fa_context *ctx, const call_tensors *t, const fa_params *params,
                                 fa_problem *p, fa_selection *sel, size_t *workspace_bytes)
{
    fa_status st = build_problem(ctx, t, params, p);
    if (st == FA_OK && nothing_to_compute(p, FA_PASS_FWD))
        return select_no_kernel(ctx, p, FA_PASS_FWD, sel, workspace_bytes);
    if (st == FA_OK)
        st = select_kernel(ctx, p, FA_PASS_FWD, sel);
    if (st != FA_OK)
        return st;
    *workspace_bytes = 0;
    st = ctx->ops->fwd_workspace(ctx, p, sel, workspace_bytes);
    return backend_failed(ctx, st, "workspace query");
}

/* A caller's workspace must hold what the query said; NULL means the backend allocates. */
/* A caller's workspace: large enough, and 16-byte aligned (the backends read fp32
 * sub-buffers of it with 16-byte vector accesses). */
static fa_status check_workspace(fa_context *ctx, const void *workspace, size_t workspace_bytes,
                                 size_t needed, const char *query)
{
    if (workspace != NULL && workspace_bytes < needed)
        return fa_fail(ctx, FA_ERR_WORKSPACE_TOO_SMALL, "workspace of %zu bytes < %zu bytes needed (%s)",
                       workspace_bytes, needed, query);
    if (workspace != NULL && needed > 0 && (uintptr_t)workspace % 16 != 0)
        return fa_fail(ctx, FA_ERR_UNSUPPORTED,
                       "workspace %p is not 16-byte aligned (malloc, cudaMalloc and hipMalloc "
                       "return aligned memory)", workspace);
    return FA_OK;
}

/* Entry of every call on a context: clear the message, then fail with a violation the
 * device check recorded since it was last read (one host load when there is none); NULL
 * ctx has nowhere to say why. */
static fa_status begin_call(fa_context *ctx)
{
    if (ctx == NULL)
        return FA_ERR_NULL_POINTER;
    ctx->last_error[0] = '\0';
    return indices_on_host(ctx) ? FA_OK : ctx->ops->device_error(ctx, 0);
}

FA_EXPORT fa_status fa_device_error(fa_context *ctx, int wait)
{
    if (ctx == NULL)
        return FA_ERR_NULL_POINTER;
    ctx->last_error[0] = '\0';
    if (wait != 0 && wait != 1)
        return fa_fail(ctx, FA_ERR_BAD_PARAM, "wait = %d, must be 0 or 1", wait);
    return indices_on_host(ctx) ? FA_OK : ctx->ops->device_error(ctx, wait);
}

FA_EXPORT fa_status fa_fwd(fa_context *ctx, const fa_tensor *q, const fa_tensor *k,
                           const fa_tensor *v, const fa_params *params, fa_tensor *out,
                           fa_tensor *lse, void *workspace, size_t workspace_bytes)
{
    call_tensors t = {q, k, v, out, lse};
    fa_problem p;
    fa_selection sel;
    size_t needed;
    fa_status st = begin_call(ctx);
    if (st != FA_OK)
        return st;
    if (out == NULL)
        return fa_fail(ctx, FA_ERR_NULL_POINTER, "out is NULL");
    st = prepare_forward(ctx, &t, params, &p, &sel, &needed);
    if (st == FA_OK) {
        static const char *const names[2] = {"out", "lse"};
        const fa_tensor *const outputs[2] = {out, lse};
        st = check_outputs_disjoint(ctx, names, outputs, 2);
    }
    if (st != FA_OK)
        return st;
    st = check_workspace(ctx, workspace, workspace_bytes, needed, "fa_fwd_workspace_size");
    if (st != FA_OK || sel.config == &no_kernel)
        return st;
    st = ctx->ops->fwd(ctx, &p, &sel, workspace, workspace != NULL ? workspace_bytes : 0);
    return backend_failed(ctx, st, "forward");
}

/* ------------------------------------------------------------------------------------ */
/* KV cache: append, then attend over the cache                                          */
/* ------------------------------------------------------------------------------------ */

FA_EXPORT void fa_kvcache_params_init(fa_kvcache_params *kv)
{
    if (kv != NULL)
        memset(kv, 0, sizeof *kv);
}

/* The tensors of a fa_fwd_kvcache call; out/lse NULL for the workspace query. */
typedef struct kvcache_tensors {
    const fa_tensor *q, *k_cache, *v_cache, *k_new, *v_new, *out, *lse;
} kvcache_tensors;

/* What fa_fwd_kvcache takes from elsewhere: the cache lengths replace varlen and
 * seqused_k, and a paged cache has no cache rows to pick. */
static fa_status check_kvcache_params(fa_context *ctx, const fa_kvcache_params *kv,
                                      const fa_params *params)
{
    int i;
    if (kv == NULL)
        return fa_fail(ctx, FA_ERR_NULL_POINTER, "kv (fa_kvcache_params) is NULL");
    if (params == NULL)
        return fa_fail(ctx, FA_ERR_NULL_POINTER, "params is NULL (use fa_params_init)");
    for (i = 0; i < (int)(sizeof kv->reserved / sizeof kv->reserved[0]); ++i)
        if (kv->reserved[i] != 0)
            return fa_fail(ctx, FA_ERR_BAD_PARAM, "kv.reserved[%d] = %d, must be 0", i,
                           kv->reserved[i]);
    if (params->cu_seqlens_q != NULL || params->cu_seqlens_k != NULL)
        return fa_fail(ctx, FA_ERR_UNSUPPORTED,
                       "fa_fwd_kvcache takes no varlen q (cu_seqlens_q/k): q is [b, s_q, h, d] "
                       "and kv.cache_seqlens gives the cache lengths");
    if (params->seqused_k != NULL)
        return fa_fail(ctx, FA_ERR_UNSUPPORTED,
                       "fa_fwd_kvcache takes no seqused_k: the keys of entry i are "
                       "cache_seqlens[i] + s_new");
    if (kv->cache_batch_idx != NULL && params->block_table != NULL)
        return fa_fail(ctx, FA_ERR_UNSUPPORTED,
                       "cache_batch_idx with a paged cache (block_table): the block table already "
                       "picks each entry's pages");
    return FA_OK;
}

/* k_new and v_new: both absent, or both [b, s_new, h_k, d] in q's dtype. */
static fa_status check_new_keys(fa_context *ctx, const kvcache_tensors *t, const call_dims *d,
                                fa_kvcache_problem *kp)
{
    operand_dims kn, vn;
    fa_status st;
    if ((t->k_new == NULL) != (t->v_new == NULL))
        return fa_fail(ctx, FA_ERR_NULL_POINTER, "%s is NULL but %s is not (both or neither)",
                       t->k_new == NULL ? "k_new" : "v_new", t->k_new == NULL ? "v_new" : "k_new");
    if (t->k_new == NULL)
        return FA_OK;
    st = check_operand(ctx, "k_new", t->k_new, 0, &kn);
    if (st == FA_OK && t->k_new->dtype != t->q->dtype)
        st = fa_fail(ctx, FA_ERR_BAD_DTYPE, "k_new dtype %s != q dtype %s",
                     fa_dtype_name(t->k_new->dtype), fa_dtype_name(t->q->dtype));
    if (st == FA_OK)
        st = check_same_dim(ctx, "k_new", "q", "batch", kn.batch, d->q.batch);
    if (st == FA_OK)
        st = check_same_dim(ctx, "k_new", "k_cache", "heads", kn.heads, d->k.heads);
    if (st == FA_OK)
        st = check_same_dim(ctx, "k_new", "k_cache", "head_dim", kn.head_dim, d->k.head_dim);
    if (st == FA_OK)
        st = check_operand_like(ctx, "v_new", t->v_new, 0, "k_new", t->k_new, &kn, &vn);
    if (st == FA_OK && kn.seqlen > kp->capacity)
        st = fa_fail(ctx, FA_ERR_SHAPE_MISMATCH,
                     "k_new has %lld rows, more than a cache row holds (%lld)",
                     (long long)kn.seqlen, (long long)kp->capacity);
    if (st != FA_OK)
        return st;
    kp->k_new = t->k_new->data;
    kp->v_new = t->v_new->data;
    kp->k_new_stride = kn.stride;
    kp->v_new_stride = vn.stride;
    kp->seqlen_new = kn.seqlen;
    return FA_OK;
}

/* Rotary tables: both or neither; rotary_dim a multiple of 16 within the head, and a
 * row of cos/sin for every position a cache row holds. */
static fa_status check_rotary(fa_context *ctx, const fa_kvcache_params *kv, int64_t head_dim,
                              fa_kvcache_problem *kp)
{
    if ((kv->rotary_cos == NULL) != (kv->rotary_sin == NULL))
        return fa_fail(ctx, FA_ERR_NULL_POINTER, "%s is NULL but %s is not (both or neither)",
                       kv->rotary_cos == NULL ? "rotary_cos" : "rotary_sin",
                       kv->rotary_cos == NULL ? "rotary_sin" : "rotary_cos");
    if (kv->rotary_cos == NULL) {
        if (kv->rotary_dim != 0 || kv->rotary_interleaved != 0 || kv->rotary_seqlen != 0)
            return fa_fail(ctx, FA_ERR_BAD_PARAM,
                           "rotary_dim %d, rotary_interleaved %d and rotary_seqlen %lld must be 0 "
                           "without rotary_cos",
                           kv->rotary_dim, kv->rotary_interleaved, (long long)kv->rotary_seqlen);
        return FA_OK;
    }
    if (kv->rotary_dim < 16 || kv->rotary_dim % 16 != 0 || kv->rotary_dim > head_dim)
        return fa_fail(ctx, FA_ERR_BAD_PARAM,
                       "rotary_dim %d must be a multiple of 16 in 16..head_dim %lld",
                       kv->rotary_dim, (long long)head_dim);
    if (kv->rotary_interleaved != 0 && kv->rotary_interleaved != 1)
        return fa_fail(ctx, FA_ERR_BAD_PARAM, "rotary_interleaved %d must be 0 or 1",
                       kv->rotary_interleaved);
    if (kv->rotary_seqlen < kp->capacity)
        return fa_fail(ctx, FA_ERR_BAD_PARAM,
                       "rotary_seqlen %lld < the cache's capacity %lld (cos/sin need a row for "
                       "every position a cache row holds)",
                       (long long)kv->rotary_seqlen, (long long)kp->capacity);
    kp->rotary_cos = kv->rotary_cos;
    kp->rotary_sin = kv->rotary_sin;
    kp->rotary_dim = kv->rotary_dim;
    kp->rotary_interleaved = kv->rotary_interleaved;
    kp->rotary_seqlen = kv->rotary_seqlen;
    return FA_OK;
}

/* The page size of a one-page table over cache rows of s_max keys: s_max rounded up to
 * whole key tiles (the GPU kernels read pages as multiples of 16 keys, and a tile that
 * lies in one page as one copy); the keys past s_max are never read (capacity stays
 * s_max). Saturates below INT_MAX; check_cache refuses a row longer than that. */
static int one_page_size(int64_t s_max)
{
    const int64_t tiles = (s_max + FA_ONE_PAGE_GRANULE - 1) / FA_ONE_PAGE_GRANULE * FA_ONE_PAGE_GRANULE;
    return (int)(tiles < FA_ONE_PAGE_MAX ? tiles : FA_ONE_PAGE_MAX);
}

/* The cache as the attention reads it: a paged cache through the caller's table; a
 * contiguous one read through cache_batch_idx as a pool of b_cache one-page rows (the
 * paged kernels then serve both); otherwise row i for entry i, seqlen_k the capacity. */
static void fill_cache_view(const fa_kvcache_params *kv, const call_dims *d,
                            fa_kvcache_problem *kp)
{
    fa_problem *a = &kp->attn;
    kp->cache_seqlens = kv->cache_seqlens;
    kp->cache_batch_idx = kv->cache_batch_idx;
    kp->cache_rows = (int)d->k.batch;
    a->seqlen_k = kp->capacity;
    a->total_k = (int64_t)a->batch * kp->capacity;
    if (kv->cache_batch_idx == NULL)
        return;
    a->block_table = kv->cache_batch_idx;
    a->block_table_stride = 1;
    a->block_table_width = 1;
    a->page_size = one_page_size(d->k.seqlen);
    a->num_pages = d->k.batch;
}

/* The cache tensors, and the capacity of a cache row. */
static fa_status check_cache(fa_context *ctx, const kvcache_tensors *t,
                             const fa_kvcache_params *kv, const fa_params *params, call_dims *d,
                             fa_kvcache_problem *kp)
{
    call_tensors ct = {t->q, t->k_cache, t->v_cache, t->out, t->lse};
    int pool = params->block_table != NULL || kv->cache_batch_idx != NULL;
    fa_status st = check_qkv(ctx, &ct, 0, pool, d);
    if (st == FA_OK)
        st = check_scalars(ctx, params, d->q.head_dim);
    if (st == FA_OK)
        st = check_paging(ctx, params, d->q.batch);
    if (st == FA_OK)
        st = check_page_rows(ctx, params, &d->k);
    if (st == FA_OK && kv->cache_seqlens == NULL && d->q.batch > 0)
        st = fa_fail(ctx, FA_ERR_NULL_POINTER, "kv.cache_seqlens is NULL");
    kp->capacity = params->block_table != NULL ? table_row_keys(params) : d->k.seqlen;
    if (st == FA_OK && kv->cache_batch_idx != NULL && d->k.seqlen > FA_ONE_PAGE_MAX)
        st = fa_fail(ctx, FA_ERR_UNSUPPORTED,
                     "cache_batch_idx with cache rows of %lld keys: at most %d keys a row are supported",
                     (long long)d->k.seqlen, FA_ONE_PAGE_MAX);
    return st;
}

/* The caches are written when appending: like any output, they must not overlap. */
static fa_status check_kvcache_outputs(fa_context *ctx, const kvcache_tensors *t)
{
    static const char *const names[4] = {"out", "lse", "k_cache", "v_cache"};
    const fa_tensor *const outputs[4] = {t->out, t->lse, t->k_new ? t->k_cache : NULL,
                                         t->k_new ? t->v_cache : NULL};
    return check_outputs_disjoint(ctx, names, outputs, 4);
}

/* Every host check of a fa_fwd_kvcache call, producing the resolved problem. */
static fa_status build_kvcache(fa_context *ctx, const kvcache_tensors *t,
                               const fa_kvcache_params *kv, const fa_params *params,
                               fa_kvcache_problem *kp)
{
    call_tensors ct = {t->q, t->k_cache, t->v_cache, t->out, t->lse};
    call_dims d;
    fa_strides lse_stride;
    fa_status st = check_kvcache_params(ctx, kv, params);
    memset(kp, 0, sizeof *kp);
    memset(&d, 0, sizeof d);
    if (st == FA_OK)
        st = check_cache(ctx, t, kv, params, &d, kp);
    if (st == FA_OK && t->out != NULL)
        st = check_operand_like(ctx, "out", t->out, 0, "q", t->q, &d.q, &d.out);
    if (st == FA_OK && t->lse != NULL)
        st = check_lse(ctx, "lse", t->lse, 0, &d.q, d.q.batch, &lse_stride);
    if (st == FA_OK)
        st = check_alibi(ctx, params, d.q.batch, d.q.heads);
    if (st == FA_OK)
        st = check_new_keys(ctx, t, &d, kp);
    if (st == FA_OK)
        st = check_rotary(ctx, kv, d.q.head_dim, kp);
    if (st == FA_OK && t->out != NULL)
        st = check_kvcache_outputs(ctx, t);
    if (st != FA_OK)
        return st;
    fill_problem(&ct, params, 0, d.q.batch, &d, &kp->attn);
    fill_paging(params, d.k.batch, &kp->attn);
    fill_cache_view(kv, &d, kp);
    if (t->lse != NULL) {
        kp->attn.lse = (float *)t->lse->data;
        kp->attn.lse_stride = lse_stride;
    }
    return FA_OK;
}

/* A call with no entry, or with neither query rows nor new keys, does nothing. */
static int kvcache_is_empty(const fa_kvcache_problem *kp)
{
    return kp->attn.batch == 0 || (kp->attn.total_q == 0 && kp->seqlen_new == 0);
}

/* Checks, selection for the attention over the cache, and the workspace query. */
static fa_status prepare_kvcache(fa_context *ctx, const kvcache_tensors *t,
                                 const fa_kvcache_params *kv, const fa_params *params,
                                 fa_kvcache_problem *kp, fa_selection *sel, size_t *needed)
{
    fa_status st = build_kvcache(ctx, t, kv, params, kp);
    *needed = 0;
    if (st != FA_OK)
        return st;
    if (ctx->ops->fwd_kvcache == NULL || ctx->ops->fwd_kvcache_workspace == NULL)
        return fa_fail(ctx, FA_ERR_UNSUPPORTED, "fa_fwd_kvcache is not implemented on the %s backend",
                       fa_backend_name(ctx->backend));
    st = kp->attn.total_q == 0 ? select_no_kernel(ctx, &kp->attn, FA_PASS_FWD, sel, needed)
                               : select_kernel(ctx, &kp->attn, FA_PASS_FWD, sel);
    if (st != FA_OK || kvcache_is_empty(kp))
        return st;
    st = ctx->ops->fwd_kvcache_workspace(ctx, kp, sel, needed);
    return backend_failed(ctx, st, "kvcache workspace query");
}

FA_EXPORT fa_status fa_fwd_kvcache_workspace_size(fa_context *ctx, const fa_tensor *q,
                                                  const fa_tensor *k_cache, const fa_tensor *v_cache,
                                                  const fa_tensor *k_new, const fa_tensor *v_new,
                                                  const fa_kvcache_params *kv,
                                                  const fa_params *params, size_t *bytes)
{
    kvcache_tensors t = {q, k_cache, v_cache, k_new, v_new, NULL, NULL};
    fa_kvcache_problem kp;
    fa_selection sel;
    size_t needed;
    fa_status st = begin_call(ctx);
    if (st != FA_OK)
        return st;
    if (bytes == NULL)
        return fa_fail(ctx, FA_ERR_NULL_POINTER, "bytes is NULL");
    st = prepare_kvcache(ctx, &t, kv, params, &kp, &sel, &needed);
    if (st == FA_OK)
        *bytes = needed;
    return st;
}

FA_EXPORT fa_status fa_fwd_kvcache(fa_context *ctx, const fa_tensor *q, fa_tensor *k_cache,
                                   fa_tensor *v_cache, const fa_tensor *k_new,
                                   const fa_tensor *v_new, const fa_kvcache_params *kv,
                                   const fa_params *params, fa_tensor *out, fa_tensor *lse,
                                   void *workspace, size_t workspace_bytes)
{
    kvcache_tensors t = {q, k_cache, v_cache, k_new, v_new, out, lse};
    fa_kvcache_problem kp;
    fa_selection sel;
    size_t needed;
    fa_status st = begin_call(ctx);
    if (st != FA_OK)
        return st;
    if (out == NULL)
        return fa_fail(ctx, FA_ERR_NULL_POINTER, "out is NULL");
    st = prepare_kvcache(ctx, &t, kv, params, &kp, &sel, &needed);
    if (st == FA_OK)
        st = check_workspace(ctx, workspace, workspace_bytes, needed, "fa_fwd_kvcache_workspace_size");
    if (st != FA_OK || kvcache_is_empty(&kp))
        return st;
    st = ctx->ops->fwd_kvcache(ctx, &kp, &sel, workspace, workspace != NULL ? workspace_bytes : 0);
    return backend_failed(ctx, st, "kvcache forward");
}

/* ------------------------------------------------------------------------------------ */
/* Backward                                                                             */
/* ------------------------------------------------------------------------------------ */

/* The gradient tensors of a backward call; NULL for the workspace query. */
typedef struct grad_tensors {
    const fa_tensor *dout, *dq, *dk, *dv;
} grad_tensors;

/* dout and dq are shaped like q, dk and dv like k (dtype included); their data and
 * strides go into p. */
static fa_status check_gradients(fa_context *ctx, const call_tensors *t, const grad_tensors *g,
                                 fa_problem *p)
{
    operand_dims q, k, dout, dq, dk, dv;
    fa_status st = check_operand(ctx, "q", t->q, p->varlen, &q);
    if (st == FA_OK)
        st = check_operand(ctx, "k", t->k, p->varlen, &k);
    if (st == FA_OK)
        st = check_operand_like(ctx, "dout", g->dout, p->varlen, "q", t->q, &q, &dout);
    if (st == FA_OK)
        st = check_operand_like(ctx, "dq", g->dq, p->varlen, "q", t->q, &q, &dq);
    if (st == FA_OK)
        st = check_operand_like(ctx, "dk", g->dk, p->varlen, "k", t->k, &k, &dk);
    if (st == FA_OK)
        st = check_operand_like(ctx, "dv", g->dv, p->varlen, "k", t->k, &k, &dv);
    if (st == FA_OK) {
        static const char *const names[3] = {"dq", "dk", "dv"};
        const fa_tensor *const grads[3] = {g->dq, g->dk, g->dv};
        st = check_outputs_disjoint(ctx, names, grads, 3);
    }
    if (st != FA_OK)
        return st;
    p->dout = g->dout->data;
    p->dq = g->dq->data;
    p->dk = g->dk->data;
    p->dv = g->dv->data;
    p->dout_stride = dout.stride;
    p->dq_stride = dq.stride;
    p->dk_stride = dk.stride;
    p->dv_stride = dv.stride;
    return FA_OK;
}

/* Validation, selection and the workspace query of a backward: everything but the run.
 * g is NULL for the workspace query, which sees only q, k, v and params. */
static fa_status prepare_backward(fa_context *ctx, const call_tensors *t, const grad_tensors *g,
                                  const fa_params *params, fa_problem *p, fa_selection *sel,
                                  size_t *workspace_bytes)
{
    fa_status st = build_problem(ctx, t, params, p);
    if (st == FA_OK && g != NULL)
        st = check_gradients(ctx, t, g, p);
    if (st != FA_OK)
        return st;
    if (ctx->ops->bwd == NULL || ctx->ops->bwd_workspace == NULL)
        return fa_fail(ctx, FA_ERR_UNSUPPORTED,
                       "the %s backend has no backward pass in this build",
                       fa_backend_name(ctx->backend));
    if (p->block_table != NULL)
        return fa_fail(ctx, FA_ERR_UNSUPPORTED,
                       "the backward has no paged K/V (block_table): pass contiguous k and v");
    if (nothing_to_compute(p, FA_PASS_BWD))
        return select_no_kernel(ctx, p, FA_PASS_BWD, sel, workspace_bytes);
    st = select_kernel(ctx, p, FA_PASS_BWD, sel);
    if (st != FA_OK)
        return st;
    *workspace_bytes = 0;
    st = ctx->ops->bwd_workspace(ctx, p, sel, workspace_bytes);
    return backend_failed(ctx, st, "backward workspace query");
}

FA_EXPORT fa_status fa_bwd(fa_context *ctx, const fa_tensor *q, const fa_tensor *k,
                           const fa_tensor *v, const fa_tensor *out, const fa_tensor *lse,
                           const fa_tensor *dout, const fa_params *params, fa_tensor *dq,
                           fa_tensor *dk, fa_tensor *dv, void *workspace, size_t workspace_bytes)
{
    call_tensors t = {q, k, v, out, lse};
    grad_tensors g = {dout, dq, dk, dv};
    fa_problem p;
    fa_selection sel;
    size_t needed;
    fa_status st = begin_call(ctx);
    if (st != FA_OK)
        return st;
    if (out == NULL)
        return fa_fail(ctx, FA_ERR_NULL_POINTER, "out is NULL (the backward needs it)");
    if (lse == NULL)
        return fa_fail(ctx, FA_ERR_NULL_POINTER, "lse is NULL (the backward needs it)");
    st = prepare_backward(ctx, &t, &g, params, &p, &sel, &needed);
    if (st != FA_OK)
        return st;
    st = check_workspace(ctx, workspace, workspace_bytes, needed, "fa_bwd_workspace_size");
    if (st != FA_OK || sel.config == &no_kernel)
        return st;
    st = ctx->ops->bwd(ctx, &p, &sel, workspace, workspace != NULL ? workspace_bytes : 0);
    return backend_failed(ctx, st, "backward");
}

/* ------------------------------------------------------------------------------------ */
/* Queries: workspace sizes and plans                                                   */
/* ------------------------------------------------------------------------------------ */

/* The checks and selection a forward (or backward) call with these inputs would make;
 * `result` is the query's output pointer, named `result_name` when it is NULL. */
static fa_status prepare_query(fa_context *ctx, const fa_tensor *q, const fa_tensor *k,
                               const fa_tensor *v, const fa_params *params, fa_pass pass,
                               const void *result, const char *result_name, fa_selection *sel,
                               size_t *needed)
{
    call_tensors t = {q, k, v, NULL, NULL};
    fa_problem p;
    fa_status st = begin_call(ctx);
    if (st != FA_OK)
        return st;
    if (result == NULL)
        return fa_fail(ctx, FA_ERR_NULL_POINTER, "%s is NULL", result_name);
    return pass == FA_PASS_BWD ? prepare_backward(ctx, &t, NULL, params, &p, sel, needed)
                               : prepare_forward(ctx, &t, params, &p, sel, needed);
}

static fa_status workspace_query(fa_context *ctx, const fa_tensor *q, const fa_tensor *k,
                                 const fa_tensor *v, const fa_params *params, fa_pass pass,
                                 size_t *bytes)
{
    fa_selection sel;
    size_t needed;
    fa_status st = prepare_query(ctx, q, k, v, params, pass, bytes, "bytes", &sel, &needed);
    if (st == FA_OK)
        *bytes = needed;
    return st;
}

/* CPU plans report worker threads (the backend keeps them as the row's "SMs"); GPU
 * plans report threads per block. */
static int plan_threads(const fa_context *ctx, const fa_kernel_config *config)
{
    if (config == &no_kernel)
        return 0;
    return ctx->backend == FA_BACKEND_CPU ? ctx->row.sm_count : config->threads;
}

/* The plan of a prepared call: its selection and workspace size. */
static void fill_plan(const fa_context *ctx, const fa_selection *sel, size_t workspace_bytes,
                      fa_plan *plan)
{
    memset(plan, 0, sizeof *plan);
    plan->backend = ctx->backend;
    copy_name(plan->arch, sizeof plan->arch, ctx->row.name);
    copy_name(plan->kernel, sizeof plan->kernel, sel->config->name);
    plan->head_dim_instance = sel->config->head_dim;
    plan->tile_m = sel->config->tile_m;
    plan->tile_n = sel->config->tile_n;
    plan->threads = plan_threads(ctx, sel->config);
    plan->stages = sel->config->stages;
    plan->smem_bytes = sel->config->smem_bytes;
    plan->blocks_per_sm = sel->blocks_per_sm;
    plan->num_splits = sel->num_splits;
    plan->workspace_bytes = workspace_bytes;
    copy_name(plan->reason, sizeof plan->reason, sel->reason);
}

static fa_status plan_query(fa_context *ctx, const fa_tensor *q, const fa_tensor *k,
                            const fa_tensor *v, const fa_params *params, fa_pass pass, fa_plan *plan)
{
    fa_selection sel;
    size_t needed;
    fa_status st = prepare_query(ctx, q, k, v, params, pass, plan, "plan", &sel, &needed);
    if (st == FA_OK)
        fill_plan(ctx, &sel, needed, plan);
    return st;
}

FA_EXPORT fa_status fa_fwd_workspace_size(fa_context *ctx, const fa_tensor *q, const fa_tensor *k,
                                          const fa_tensor *v, const fa_params *params,
                                          size_t *bytes)
{
    return workspace_query(ctx, q, k, v, params, FA_PASS_FWD, bytes);
}

FA_EXPORT fa_status fa_bwd_workspace_size(fa_context *ctx, const fa_tensor *q, const fa_tensor *k,
                                          const fa_tensor *v, const fa_params *params,
                                          size_t *bytes)
{
    return workspace_query(ctx, q, k, v, params, FA_PASS_BWD, bytes);
}

FA_EXPORT fa_status fa_plan_fwd(fa_context *ctx, const fa_tensor *q, const fa_tensor *k,
                                const fa_tensor *v, const fa_params *params, fa_plan *plan)
{
    return plan_query(ctx, q, k, v, params, FA_PASS_FWD, plan);
}

FA_EXPORT fa_status fa_plan_bwd(fa_context *ctx, const fa_tensor *q, const fa_tensor *k,
                                const fa_tensor *v, const fa_params *params, fa_plan *plan)
{
    return plan_query(ctx, q, k, v, params, FA_PASS_BWD, plan);
}

/* ------------------------------------------------------------------------------------ */
/* Combining partial results                                                            */
/* ------------------------------------------------------------------------------------ */

/* An output that shares no byte range with a tensor the call reads or writes (a span
 * test: sufficient, and what separate allocations or the slices of a stacked tensor meet). */
static fa_status check_apart(fa_context *ctx, const char *name, const fa_tensor *t,
                             const char *other_name, int other_index, const fa_tensor *other)
{
    if (other != NULL && fa_tensor_spans_meet(t, other))
        return fa_fail(ctx, FA_ERR_BAD_STRIDE, "fa_combine: %s overlaps %s[%d]", name, other_name,
                       other_index);
    return FA_OK;
}

/* partial_out[i] like out, partial_lse[i] an LSE of out's rows. */
static fa_status check_partial(fa_context *ctx, int i, const fa_tensor *part, const fa_tensor *lse,
                               const fa_tensor *out, const operand_dims *od, int varlen,
                               fa_combine_problem *p)
{
    char name[32], lse_name[32];
    operand_dims d;
    fa_status st;
    snprintf(name, sizeof name, "partial_out[%d]", i);
    snprintf(lse_name, sizeof lse_name, "partial_lse[%d]", i);
    st = check_operand_like(ctx, name, part, varlen, "out", out, od, &d);
    if (st == FA_OK)
        st = check_lse(ctx, lse_name, lse, varlen, od, od->batch, &p->part_lse_stride[i]);
    if (st != FA_OK)
        return st;
    p->part_out[i] = part->data;
    p->part_out_stride[i] = d.stride;
    p->part_lse[i] = (const float *)lse->data;
    return FA_OK;
}

static fa_status check_combine(fa_context *ctx, int n, const fa_tensor *partial_out,
                               const fa_tensor *partial_lse, fa_tensor *out, fa_tensor *lse,
                               fa_combine_problem *p)
{
    operand_dims od;
    fa_status st;
    int varlen, i;
    if (n < 1 || n > FA_MAX_COMBINE_PARTIALS)
        return fa_fail(ctx, FA_ERR_BAD_PARAM, "fa_combine: n = %d partials, must be 1..%d", n,
                       FA_MAX_COMBINE_PARTIALS);
    if (partial_out == NULL || partial_lse == NULL || out == NULL)
        return fa_fail(ctx, FA_ERR_NULL_POINTER, "fa_combine: %s is NULL",
                       out == NULL ? "out" : partial_out == NULL ? "partial_out" : "partial_lse");
    varlen = out->ndim == 3;
    st = check_operand(ctx, "out", out, varlen, &od);
    if (st == FA_OK)
        st = check_dtype_on_backend(ctx, out->dtype);
    memset(p, 0, sizeof *p);
    if (st == FA_OK && lse != NULL)
        st = check_lse(ctx, "lse", lse, varlen, &od, od.batch, &p->lse_stride);
    for (i = 0; i < n && st == FA_OK; i++)
        st = check_partial(ctx, i, &partial_out[i], &partial_lse[i], out, &od, varlen, p);
    if (st == FA_OK)
        st = check_no_self_overlap(ctx, "out", out);
    if (st == FA_OK && lse != NULL)
        st = check_no_self_overlap(ctx, "lse", lse);
    if (st == FA_OK && lse != NULL)
        st = check_apart(ctx, "out", out, "lse", 0, lse);
    for (i = 0; i < n && st == FA_OK; i++) {
        st = check_apart(ctx, "out", out, "partial_out", i, &partial_out[i]);
        if (st == FA_OK)
            st = check_apart(ctx, "out", out, "partial_lse", i, &partial_lse[i]);
        if (st == FA_OK && lse != NULL)
            st = check_apart(ctx, "lse", lse, "partial_out", i, &partial_out[i]);
        if (st == FA_OK && lse != NULL)
            st = check_apart(ctx, "lse", lse, "partial_lse", i, &partial_lse[i]);
    }
    p->dtype = out->dtype;
    p->n = n;
    p->batch = varlen ? 1 : od.batch;
    p->rows = od.seqlen;
    p->heads = od.heads;
    p->head_dim = od.head_dim;
    p->out = out->data;
    p->out_stride = od.stride;
    p->lse = lse != NULL ? (float *)lse->data : NULL;
    return st;
}

FA_EXPORT fa_status fa_combine(fa_context *ctx, int n, const fa_tensor *partial_out,
                               const fa_tensor *partial_lse, fa_tensor *out, fa_tensor *lse)
{
    fa_combine_problem *p;
    fa_status st = begin_call(ctx);
    if (st != FA_OK)
        return st;
    p = (fa_combine_problem *)malloc(sizeof *p);
    if (p == NULL)
        return fa_fail(ctx, FA_ERR_OUT_OF_MEMORY, "fa_combine: out of host memory");
    st = check_combine(ctx, n, partial_out, partial_lse, out, lse, p);
    if (st == FA_OK && ctx->ops->combine == NULL)
        st = fa_fail(ctx, FA_ERR_UNSUPPORTED, "fa_combine is not implemented on the %s backend yet",
                     fa_backend_name(ctx->backend));
    if (st == FA_OK && p->batch * p->rows * p->heads > 0)
        st = backend_failed(ctx, ctx->ops->combine(ctx, p), "combine");
    free(p);
    return st;
}
