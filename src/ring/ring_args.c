/*
 * ring_args.c - what a ring call must satisfy before anything moves: the chunk layout
 * (fa_ring_rows), the ring's errors and its communicator, the argument checks (the
 * library's own for q, k, v and params, then the ring's), and the ranks' agreement on
 * them, one all-reduce after which every rank either goes ahead or fails.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/tensor_geometry.h"
#include "ring/ring_internal.h"

/* ---- layout ---------------------------------------------------------------------- */

static int64_t chunk_count(fa_ring_split split, int world)
{
    return split == FA_RING_SPLIT_ZIGZAG ? 2 * (int64_t)world : world;
}

static fa_ring_span chunk_span(int64_t total, int64_t chunks, int64_t c)
{
    fa_ring_span s;
    int64_t base = total / chunks, extra = total % chunks;
    s.begin = c * base + (c < extra ? c : extra);
    s.length = base + (c < extra);
    return s;
}

/* The rank's pieces in local order; returns how many (1 or 2). */
int fa_ring_pieces(const fa_ring_layout *layout, int world, int rank, fa_ring_piece p[2],
                   fa_ring_span span[2])
{
    int64_t chunks = chunk_count(layout->split, world);
    int n = layout->split == FA_RING_SPLIT_ZIGZAG ? 2 : 1, i;
    p[0].chunk = rank;
    p[1].chunk = chunks - 1 - rank;
    for (i = 0; i < 2; i++) {
        span[i] = chunk_span(layout->total_seqlen, chunks, p[i].chunk);
        if (i >= n)
            span[i].length = 0;
        p[i].length = span[i].length;
        p[i].local = i == 0 ? 0 : p[0].length;
    }
    return n;
}

fa_status fa_ring_rows(const fa_ring_layout *layout, int world, int rank, fa_ring_span span[2], int64_t *rows)
{
    fa_ring_piece p[2];
    if (layout == NULL || span == NULL || rows == NULL)
        return FA_ERR_NULL_POINTER;
    if (world < 1 || rank < 0 || rank >= world || layout->total_seqlen < 0 ||
        layout->total_seqlen > INT32_MAX ||
        (layout->split != FA_RING_SPLIT_ZIGZAG && layout->split != FA_RING_SPLIT_CONTIGUOUS))
        return FA_ERR_BAD_PARAM;
    fa_ring_pieces(layout, world, rank, p, span);
    *rows = p[0].length + p[1].length;
    return FA_OK;
}

/* ---- errors ---------------------------------------------------------------------- */

/* C99 has no thread-local storage class; the compilers' own spelling (as api.c). */
#if defined(__GNUC__)
#define RING_THREAD_LOCAL __thread
#else
#define RING_THREAD_LOCAL
#endif
static RING_THREAD_LOCAL char create_error[256];

const char *fa_ring_create_error(void) { return create_error; }

fa_status fa_ring_create_fail(fa_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(create_error, sizeof create_error, fmt, ap);
    va_end(ap);
    return status;
}

fa_status fa_ring_transport_fail(fa_ring_transport *t, fa_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->error, sizeof t->error, fmt, ap);
    va_end(ap);
    return status;
}

fa_status fa_ring_fail(fa_ring_comm *c, fa_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->last_error, sizeof c->last_error, fmt, ap);
    va_end(ap);
    return status;
}

/* An inner fa_* call failed: its own message, after what the ring was doing. */
fa_status fa_ring_fail_call(fa_ring_comm *c, fa_status st, const char *what, int step)
{
    return fa_ring_fail(c, st, "%s (ring step %d): %s", what, step, fa_last_error(c->ctx));
}

fa_status fa_ring_fail_transport(fa_ring_comm *c, fa_status st, const char *what)
{
    return fa_ring_fail(c, st, "%s: %s transport: %s", what, c->transport->name, c->transport->error);
}

/* ---- the communicator ------------------------------------------------------------ */

fa_status fa_ring_wrap(fa_ring_comm **comm, fa_context *ctx, fa_ring_transport *t)
{
    fa_ring_comm *c = (fa_ring_comm *)calloc(1, sizeof *c);
    if (c == NULL) {
        t->ops->destroy(t);
        return fa_ring_create_fail(FA_ERR_OUT_OF_MEMORY, "fa_ring_create: out of host memory");
    }
    c->transport = t;
    c->ctx = ctx;
    *comm = c;
    create_error[0] = '\0';
    return FA_OK;
}

void fa_ring_destroy(fa_ring_comm *comm)
{
    if (comm == NULL)
        return;
    comm->transport->ops->destroy(comm->transport);
    free(comm);
}

int fa_ring_rank(const fa_ring_comm *comm) { return comm == NULL ? -1 : comm->transport->rank; }
int fa_ring_world(const fa_ring_comm *comm) { return comm == NULL ? 0 : comm->transport->world; }
const char *fa_ring_last_error(const fa_ring_comm *comm)
{
    return comm == NULL ? "fa_ring: comm is NULL" : comm->last_error;
}

/* A build without a transport still links its entry point, which says so. */
#ifndef FA_RING_HAVE_MPI
fa_status fa_ring_create_mpi(fa_ring_comm **comm, fa_context *ctx, const void *mpi_comm)
{
    (void)ctx;
    (void)mpi_comm;
    if (comm != NULL)
        *comm = NULL;
    return fa_ring_create_fail(FA_ERR_UNSUPPORTED, "fa_ring_create_mpi: this flashattn_ring was built "
                               "without MPI (FA_RING_MPI)");
}
#endif
#ifndef FA_RING_HAVE_NCCL
fa_status fa_ring_create_nccl(fa_ring_comm **comm, fa_context *ctx, const void *nccl_comm, void *stream)
{
    (void)ctx;
    (void)nccl_comm;
    (void)stream;
    if (comm != NULL)
        *comm = NULL;
    return fa_ring_create_fail(FA_ERR_UNSUPPORTED, "fa_ring_create_nccl: this flashattn_ring was built "
                               "without NCCL (FA_RING_NCCL)");
}
#endif

/* ---- argument checks ------------------------------------------------------------- */

/* t has `shape` (ndim dims) and `dtype`; an output must not overlap itself. */
static fa_status check_like(fa_ring_comm *c, const char *call, const char *name, const fa_tensor *t,
                            const int64_t *shape, int ndim, fa_dtype dtype, int output)
{
    int64_t span;
    int i;
    if (t == NULL)
        return fa_ring_fail(c, FA_ERR_NULL_POINTER, "%s: %s is NULL", call, name);
    if (t->ndim != ndim)
        return fa_ring_fail(c, FA_ERR_BAD_RANK, "%s: %s has %d dims, expected %d", call, name, t->ndim, ndim);
    if (t->data == NULL && fa_tensor_has_elements(t))
        return fa_ring_fail(c, FA_ERR_NULL_POINTER, "%s: %s data is NULL", call, name);
    for (i = 0; i < ndim; i++)
        if (t->shape[i] != shape[i])
            return fa_ring_fail(c, FA_ERR_SHAPE_MISMATCH, "%s: %s dim %d is %lld, expected %lld", call, name,
                                i, (long long)t->shape[i], (long long)shape[i]);
    if (t->dtype != dtype)
        return fa_ring_fail(c, FA_ERR_BAD_DTYPE, "%s: %s is %s, expected %s", call, name,
                            fa_dtype_name(t->dtype), fa_dtype_name(dtype));
    for (i = 0; i < ndim; i++)
        if (t->stride[i] < 0 || (i == ndim - 1 && t->stride[i] != 1 && t->shape[i] > 1))
            return fa_ring_fail(c, FA_ERR_BAD_STRIDE,
                                "%s: %s stride[%d] = %lld (last dim contiguous, "
                                "none negative)",
                                call, name, i, (long long)t->stride[i]);
    if (output && fa_tensor_has_elements(t) && fa_tensor_overlap_dim(t, &span) >= 0)
        return fa_ring_fail(c, FA_ERR_BAD_STRIDE, "%s: output %s overlaps itself", call, name);
    return FA_OK;
}

/* Two outputs share no byte range (a span test, as fa_combine's: what separate
 * allocations and the slices of a stacked tensor meet). */
static fa_status check_apart(fa_ring_comm *c, const char *call, const char *a_name, const fa_tensor *a,
                             const char *b_name, const fa_tensor *b)
{
    if (a != NULL && b != NULL && fa_tensor_spans_meet(a, b))
        return fa_ring_fail(c, FA_ERR_BAD_STRIDE, "%s: outputs %s and %s overlap", call, a_name, b_name);
    return FA_OK;
}

/* Masks that need global positions the blocks do not carry. */
static fa_status check_params(fa_ring_comm *c, const char *call, const fa_params *p)
{
    const char *why = NULL;
    if (p->window_left != -1 || p->window_right != -1)
        why = "sliding windows";
    else if (p->alibi_slopes != NULL)
        why = "ALiBi";
    else if (p->cu_seqlens_q != NULL || p->cu_seqlens_k != NULL)
        why = "varlen (cu_seqlens)";
    else if (p->seqused_k != NULL)
        why = "seqused_k";
    else if (p->block_table != NULL)
        why = "paged K/V";
    if (why == NULL)
        return FA_OK;
    return fa_ring_fail(c, FA_ERR_UNSUPPORTED, "%s: %s across ring blocks are not supported", call, why);
}

/* q, k, v and params through the library's own checks (the workspace queries run them
 * and write nothing), then the ring's: rows, the combine's limit, the masks. */
static fa_status check_inputs(fa_ring_comm *c, const char *call, const fa_tensor *q, const fa_tensor *k,
                              const fa_tensor *v, const fa_params *params, const fa_ring_layout *layout,
                              int backward, fa_ring_geometry *g)
{
    fa_ring_span span[2];
    size_t bytes;
    fa_status st;
    if (q == NULL || k == NULL || v == NULL || params == NULL || layout == NULL)
        return fa_ring_fail(c, FA_ERR_NULL_POINTER, "%s: q, k, v, params and layout must be set", call);
    if (q->ndim != 4 || k->ndim != 4 || v->ndim != 4)
        return fa_ring_fail(c, FA_ERR_BAD_RANK, "%s: q, k, v must be [b, rows, heads, d] (no varlen)", call);
    if ((q->data == NULL && fa_tensor_has_elements(q)) || (k->data == NULL && fa_tensor_has_elements(k)) ||
        (v->data == NULL && fa_tensor_has_elements(v)))
        return fa_ring_fail(c, FA_ERR_NULL_POINTER, "%s: q, k or v data is NULL", call);
    st = check_params(c, call, params);
    if (st != FA_OK)
        return st;
    st = backward ? fa_bwd_workspace_size(c->ctx, q, k, v, params, &bytes)
                  : fa_fwd_workspace_size(c->ctx, q, k, v, params, &bytes);
    if (st != FA_OK)
        return fa_ring_fail(c, st, "%s: %s", call, fa_last_error(c->ctx));
    if (fa_ring_rows(layout, g->world, g->rank, span, &g->rows) != FA_OK)
        return fa_ring_fail(c, FA_ERR_BAD_PARAM, "%s: layout: total_seqlen %lld (0..INT32_MAX), split %d",
                            call, (long long)layout->total_seqlen, (int)layout->split);
    if (g->world + 1 > FA_MAX_COMBINE_PARTIALS)
        return fa_ring_fail(c, FA_ERR_UNSUPPORTED,
                            "%s: %d ranks: the forward merges up to world + 1 "
                            "partials per chunk with fa_combine (at most %d)",
                            call, g->world, FA_MAX_COMBINE_PARTIALS);
    if (q->shape[1] != g->rows || k->shape[1] != g->rows)
        return fa_ring_fail(c, FA_ERR_SHAPE_MISMATCH,
                            "%s: rank %d of %d holds %lld of %lld rows, but q has "
                            "%lld and k %lld",
                            call, g->rank, g->world, (long long)g->rows, (long long)layout->total_seqlen,
                            (long long)q->shape[1], (long long)k->shape[1]);
    g->layout = *layout;
    g->npieces = fa_ring_pieces(layout, g->world, g->rank, g->pieces, span);
    g->batch = q->shape[0];
    g->heads = q->shape[2];
    g->heads_k = k->shape[2];
    g->dim = q->shape[3];
    g->dtype = q->dtype;
    g->causal = params->causal != 0;
    return FA_OK;
}

/* ---- agreement --------------------------------------------------------------------- */

enum { AGREE_STATUS, AGREE_LOWEST, AGREE_FIELDS };
#define AGREE_COUNT 12

static void fields_of(const fa_ring_geometry *g, const fa_params *p, int backward, int64_t *f)
{
    uint32_t scale, softcap;
    memcpy(&scale, &p->softmax_scale, sizeof scale);
    memcpy(&softcap, &p->softcap, sizeof softcap);
    f[0] = g->layout.total_seqlen;
    f[1] = g->layout.split;
    f[2] = g->batch;
    f[3] = g->heads;
    f[4] = g->heads_k;
    f[5] = g->dim;
    f[6] = g->dtype;
    f[7] = g->causal;
    f[8] = scale;
    f[9] = softcap;
    f[10] = p->deterministic;
    f[11] = backward;
}

static const char *const field_names[AGREE_COUNT] = {
    "total_seqlen",  "split",    "batch",         "heads",
    "kv heads",      "head dim", "dtype",         "causal",
    "softmax_scale", "softcap",  "deterministic", "call (fa_ring_fwd / fa_ring_bwd)"};

/* Every rank's verdict and fields meet in one all-reduce of maxima (minima as negated
 * maxima). Returns the status every rank returns; FA_OK only if all accepted and agree. */
static fa_status agree(fa_ring_comm *c, const char *call, fa_status mine, const fa_ring_geometry *g,
                       const fa_params *p, int backward)
{
    int64_t v[AGREE_FIELDS + 2 * AGREE_COUNT], f[AGREE_COUNT];
    fa_ring_transport *t = c->transport;
    fa_status st;
    int i;
    memset(f, 0, sizeof f);
    if (mine == FA_OK)
        fields_of(g, p, backward, f);
    v[AGREE_STATUS] = mine;
    v[AGREE_LOWEST] = mine != FA_OK ? -(int64_t)t->rank : INT64_MIN;
    for (i = 0; i < AGREE_COUNT; i++) {
        v[AGREE_FIELDS + i] = f[i];
        v[AGREE_FIELDS + AGREE_COUNT + i] = -f[i];
    }
    st = t->ops->agree_max(t, v, AGREE_FIELDS + 2 * AGREE_COUNT);
    if (st != FA_OK)
        return fa_ring_fail_transport(c, st, call);
    if (mine != FA_OK)
        return mine;
    if (v[AGREE_STATUS] != FA_OK)
        return fa_ring_fail(c, (fa_status)v[AGREE_STATUS],
                            "%s: rank %lld (the lowest that refused) "
                            "refused its arguments; the ranks' worst status is %s",
                            call, (long long)-v[AGREE_LOWEST], fa_status_string((fa_status)v[AGREE_STATUS]));
    for (i = 0; i < AGREE_COUNT; i++)
        if (v[AGREE_FIELDS + i] != -v[AGREE_FIELDS + AGREE_COUNT + i])
            return fa_ring_fail(c, i <= 6 ? FA_ERR_SHAPE_MISMATCH : FA_ERR_BAD_PARAM,
                                "%s: the ranks disagree on %s (from %lld to %lld)", call, field_names[i],
                                (long long)-v[AGREE_FIELDS + AGREE_COUNT + i],
                                (long long)v[AGREE_FIELDS + i]);
    return FA_OK;
}

/* ---- accepting a call -------------------------------------------------------------- */

static void begin_call(fa_ring_comm *c, fa_ring_geometry *g)
{
    memset(g, 0, sizeof *g);
    c->last_error[0] = '\0';
    g->world = c->transport->world;
    g->rank = c->transport->rank;
}

static int64_t largest_rows(const fa_ring_geometry *g)
{
    int64_t best = 0, rows;
    fa_ring_span span[2];
    int r;
    for (r = 0; r < g->world; r++) {
        fa_ring_rows(&g->layout, g->world, r, span, &rows);
        best = rows > best ? rows : best;
    }
    return best;
}

fa_status fa_ring_accept_fwd(fa_ring_comm *c, const fa_tensor *q, const fa_tensor *k, const fa_tensor *v,
                             const fa_params *params, const fa_ring_layout *layout, const fa_tensor *out,
                             const fa_tensor *lse, fa_ring_geometry *g)
{
    static const char call[] = "fa_ring_fwd";
    fa_status st;
    begin_call(c, g);
    st = check_inputs(c, call, q, k, v, params, layout, 0, g);
    if (st == FA_OK) {
        int64_t shape[4] = {g->batch, g->rows, g->heads, g->dim},
                lse_shape[3] = {g->batch, g->heads, g->rows};
        st = check_like(c, call, "out", out, shape, 4, g->dtype, 1);
        if (st == FA_OK && lse != NULL)
            st = check_like(c, call, "lse", lse, lse_shape, 3, FA_DTYPE_F32, 1);
        if (st == FA_OK)
            st = check_apart(c, call, "out", out, "lse", lse);
    }
    st = agree(c, call, st, g, params, 0);
    g->max_rows = largest_rows(g);
    return st;
}

static fa_status check_bwd_tensors(fa_ring_comm *c, const char *call, const fa_ring_geometry *g,
                                   const fa_tensor *out, const fa_tensor *lse, const fa_tensor *dout,
                                   const fa_tensor *dq, const fa_tensor *dk, const fa_tensor *dv)
{
    int64_t qs[4] = {g->batch, g->rows, g->heads, g->dim}, ks[4] = {g->batch, g->rows, g->heads_k, g->dim};
    int64_t ls[3] = {g->batch, g->heads, g->rows};
    fa_status st = check_like(c, call, "out", out, qs, 4, g->dtype, 0);
    if (st == FA_OK)
        st = check_like(c, call, "lse", lse, ls, 3, FA_DTYPE_F32, 0);
    if (st == FA_OK)
        st = check_like(c, call, "dout", dout, qs, 4, g->dtype, 0);
    if (st == FA_OK)
        st = check_like(c, call, "dq", dq, qs, 4, g->dtype, 1);
    if (st == FA_OK)
        st = check_like(c, call, "dk", dk, ks, 4, g->dtype, 1);
    if (st == FA_OK)
        st = check_like(c, call, "dv", dv, ks, 4, g->dtype, 1);
    if (st == FA_OK)
        st = check_apart(c, call, "dq", dq, "dk", dk);
    if (st == FA_OK)
        st = check_apart(c, call, "dq", dq, "dv", dv);
    if (st == FA_OK)
        st = check_apart(c, call, "dk", dk, "dv", dv);
    return st;
}

fa_status fa_ring_accept_bwd(fa_ring_comm *c, const fa_tensor *q, const fa_tensor *k, const fa_tensor *v,
                             const fa_tensor *out, const fa_tensor *lse, const fa_tensor *dout,
                             const fa_params *params, const fa_ring_layout *layout, const fa_tensor *dq,
                             const fa_tensor *dk, const fa_tensor *dv, fa_ring_geometry *g)
{
    static const char call[] = "fa_ring_bwd";
    fa_status st;
    begin_call(c, g);
    st = check_inputs(c, call, q, k, v, params, layout, 1, g);
    if (st == FA_OK)
        st = check_bwd_tensors(c, call, g, out, lse, dout, dq, dk, dv);
    st = agree(c, call, st, g, params, 1);
    g->max_rows = largest_rows(g);
    return st;
}
