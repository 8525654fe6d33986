/*
 * ring_core.c - the ring attention schedule, written once for every transport: the
 * forward and backward rings built on fa_fwd, fa_bwd and fa_combine, once ring_args.c
 * has accepted the call on every rank.
 *
 * Step s of W: rank r holds the K/V block of rank (r - s) mod W, and starts sending it
 * on (and receiving the next) before it computes with it. Forward: each (query chunk,
 * key range) block's partial out and LSE go to a slot; after the ring, one fa_combine
 * per query chunk merges them. Backward: fa_bwd with the forward's final out and LSE
 * gives each block's exact share of the gradients (P and D are the whole sequence's);
 * dq is summed locally in fp32, and a block's fp32 dK/dV sum follows the block one step
 * behind it around the ring, arriving back at its owner after W hops.
 */
#include <stdlib.h>
#include <string.h>

#include "api/tensor_geometry.h"
#include "ring/ring_internal.h"

/* ---- views and buffers ------------------------------------------------------------- */

/* Rows [first, first + length) of a [b, rows, h, d] tensor (or of an LSE's last dim). */
static fa_tensor rows_of(const fa_tensor *t, int row_dim, int64_t first, int64_t length)
{
    fa_tensor r = *t;
    if (r.data != NULL)
        r.data = (char *)r.data + (size_t)(first * t->stride[row_dim]) * fa_dtype_bytes(t->dtype);
    r.shape[row_dim] = length;
    return r;
}

/* A contiguous block of up to max_rows rows: [b, max_rows, heads, d] of one dtype. */
static fa_tensor block_view(void *base, fa_dtype dtype, const fa_ring_geometry *g, int64_t heads,
                            int64_t first, int64_t length)
{
    fa_tensor t = fa_tensor_bshd(base, dtype, g->batch, g->max_rows, heads, g->dim);
    return rows_of(&t, 1, first, length);
}

static size_t block_elements(const fa_ring_geometry *g, int64_t heads)
{
    return (size_t)(g->batch * g->max_rows * heads * g->dim);
}

/* The K/V pair of a ring buffer: K, then V at one block's distance. */
typedef struct kv_block {
    void *base;
    fa_dtype dtype;
} kv_block;

static fa_tensor kv_part(const kv_block *b, const fa_ring_geometry *g, int which, int64_t first,
                         int64_t length)
{
    char *base = (char *)b->base + which * block_elements(g, g->heads_k) * fa_dtype_bytes(b->dtype);
    return block_view(base, b->dtype, g, g->heads_k, first, length);
}

static size_t kv_bytes(const fa_ring_geometry *g, fa_dtype dtype)
{
    return 2 * block_elements(g, g->heads_k) * fa_dtype_bytes(dtype);
}

/* The buffers of one call, released together. */
#define MAX_BUFFERS 16
typedef struct buffers {
    fa_ring_transport *t;
    void *p[MAX_BUFFERS];
    int n;
} buffers;

static void *take(buffers *b, size_t bytes)
{
    void *p = b->t->ops->alloc(b->t, bytes);
    if (p != NULL)
        b->p[b->n++] = p;
    return p;
}

static void release_all(buffers *b)
{
    while (b->n > 0)
        b->t->ops->release(b->t, b->p[--b->n]);
}

/* ---- the blocks of one step ---------------------------------------------------------- */

/* One attention call: a query piece against key rows [key_first, +key_length) of the
 * block in hand, with or without the causal mask. */
typedef struct job {
    int query_piece;
    int64_t key_first, key_length;
    int causal;
} job;

enum relation { SKIP, FULL, DIAGONAL };

static enum relation relate(const fa_ring_geometry *g, const fa_ring_piece *q, const fa_ring_piece *k)
{
    if (q->length == 0 || k->length == 0)
        return SKIP;
    if (!g->causal || k->chunk < q->chunk)
        return FULL;
    return k->chunk == q->chunk ? DIAGONAL : SKIP;
}

/* The calls against rank src's block; both of its pieces in one call when neither needs
 * a mask (they are adjacent in the block). Returns how many (at most 4). */
static int step_jobs(const fa_ring_geometry *g, int src, job *jobs)
{
    fa_ring_piece kp[2];
    fa_ring_span span[2];
    int qi, ki, n = 0;
    int kn = fa_ring_pieces(&g->layout, g->world, src, kp, span);
    for (qi = 0; qi < g->npieces; qi++) {
        enum relation rel[2] = {relate(g, &g->pieces[qi], &kp[0]),
                                kn > 1 ? relate(g, &g->pieces[qi], &kp[1]) : SKIP};
        if (rel[0] == FULL && rel[1] == FULL) {
            job j = {qi, 0, kp[0].length + kp[1].length, 0};
            jobs[n++] = j;
            continue;
        }
        for (ki = 0; ki < kn; ki++)
            if (rel[ki] != SKIP) {
                job j = {qi, kp[ki].local, kp[ki].length, rel[ki] == DIAGONAL};
                jobs[n++] = j;
            }
    }
    return n;
}

static fa_params job_params(const fa_params *p, const job *j)
{
    fa_params r = *p;
    r.causal = j->causal;
    return r;
}

/* Step s's exchange: the next K/V block (all steps but the last) and, backward, the
 * dK/dV sum of the block of step s - 1. */
static fa_status start_step(fa_ring_transport *t, const fa_ring_geometry *g, int s, const kv_block kv[2],
                            void *const dkv[2], size_t dkv_bytes)
{
    fa_ring_exchange x;
    memset(&x, 0, sizeof x);
    if (s < g->world - 1) {
        x.send[FA_RING_KV] = kv[s % 2].base;
        x.recv[FA_RING_KV] = kv[(s + 1) % 2].base;
        x.bytes[FA_RING_KV] = kv_bytes(g, g->dtype);
    }
    if (dkv != NULL && s > 0) {
        x.send[FA_RING_DKV] = dkv[(s - 1) % 2];
        x.recv[FA_RING_DKV] = dkv[s % 2];
        x.bytes[FA_RING_DKV] = dkv_bytes;
    }
    if (x.send[FA_RING_KV] == NULL && x.send[FA_RING_DKV] == NULL)
        return FA_OK;
    return t->ops->start(t, &x);
}

static int step_exchanges(const fa_ring_geometry *g, int s, int backward)
{
    return s < g->world - 1 || (backward && s > 0);
}

/* This rank's K and V into a ring buffer. */
static fa_status pack_own(fa_ring_transport *t, const fa_ring_geometry *g, const kv_block *b,
                          const fa_tensor *k, const fa_tensor *v)
{
    fa_tensor dk = kv_part(b, g, 0, 0, g->rows), dv = kv_part(b, g, 1, 0, g->rows);
    fa_status st = t->ops->convert(t, &dk, k, 0);
    return st == FA_OK ? t->ops->convert(t, &dv, v, 0) : st;
}

/* ---- forward ------------------------------------------------------------------------- */

typedef struct fwd_state {
    kv_block kv[2];
    /* per query piece: world + 1 slots of [b, length, h, d] out and [b, h, length] LSE */
    void *slot_out[2];
    float *slot_lse[2];
    fa_tensor part_out[2][FA_MAX_COMBINE_PARTIALS], part_lse[2][FA_MAX_COMBINE_PARTIALS];
    int used[2];
} fwd_state;

static fa_status fwd_buffers(buffers *b, const fa_ring_geometry *g, fwd_state *f)
{
    int i, slots = g->world + 1;
    for (i = 0; i < 2; i++) {
        f->kv[i].dtype = g->dtype;
        f->kv[i].base = take(b, kv_bytes(g, g->dtype));
        if (f->kv[i].base == NULL)
            return FA_ERR_OUT_OF_MEMORY;
    }
    for (i = 0; i < g->npieces; i++) {
        size_t rows = (size_t)(g->batch * g->pieces[i].length * g->heads);
        f->slot_out[i] = take(b, slots * rows * (size_t)g->dim * fa_dtype_bytes(g->dtype));
        f->slot_lse[i] = (float *)take(b, slots * rows * sizeof(float));
        if (f->slot_out[i] == NULL || f->slot_lse[i] == NULL)
            return FA_ERR_OUT_OF_MEMORY;
        f->used[i] = 0;
    }
    return FA_OK;
}

/* One block's partial out and LSE, into the next slot of its query piece. */
static fa_status fwd_job(fa_ring_comm *c, const fa_ring_geometry *g, fwd_state *f, const kv_block *kv,
                         const job *j, const fa_tensor *q, const fa_params *params)
{
    const fa_ring_piece *qp = &g->pieces[j->query_piece];
    int slot = f->used[j->query_piece]++;
    size_t rows = (size_t)(g->batch * qp->length * g->heads);
    char *out = (char *)f->slot_out[j->query_piece] + slot * rows * (size_t)g->dim * fa_dtype_bytes(g->dtype);
    fa_tensor tq = rows_of(q, 1, qp->local, qp->length);
    fa_tensor tk = kv_part(kv, g, 0, j->key_first, j->key_length);
    fa_tensor tv = kv_part(kv, g, 1, j->key_first, j->key_length);
    fa_tensor *to = &f->part_out[j->query_piece][slot], *tl = &f->part_lse[j->query_piece][slot];
    fa_params p = job_params(params, j);
    *to = fa_tensor_bshd(out, g->dtype, g->batch, qp->length, g->heads, g->dim);
    *tl = fa_tensor_lse(f->slot_lse[j->query_piece] + slot * rows, g->batch, g->heads, qp->length);
    return fa_fwd(c->ctx, &tq, &tk, &tv, &p, to, tl, NULL, 0);
}

/* The exchange started for a step (if any) moves while `work` computes the step; a
 * failed exchange is reported after a failed computation, never instead of it. */
static fa_status run_step(fa_ring_comm *c, int exchanging, fa_status (*work)(void *), void *arg,
                          const char *call)
{
    fa_ring_transport *t = c->transport;
    fa_status worked = FA_OK, moved;
    if (!exchanging)
        return work(arg);
    moved = t->ops->overlap(t, work, arg, &worked);
    if (moved != FA_OK && worked == FA_OK)
        return fa_ring_fail_transport(c, moved, call);
    return worked;
}

typedef struct fwd_step_args {
    fa_ring_comm *c;
    const fa_ring_geometry *g;
    fwd_state *f;
    const fa_tensor *q;
    const fa_params *params;
    int step;
} fwd_step_args;

/* Step s's attention calls against the block in hand. */
static fa_status fwd_step(void *arg)
{
    fwd_step_args *a = (fwd_step_args *)arg;
    const fa_ring_geometry *g = a->g;
    job jobs[4];
    int i, n = step_jobs(g, (g->rank - a->step + g->world) % g->world, jobs);
    for (i = 0; i < n; i++) {
        fa_status st = fwd_job(a->c, g, a->f, &a->f->kv[a->step % 2], &jobs[i], a->q, a->params);
        if (st != FA_OK)
            return fa_ring_fail_call(a->c, st, "fa_ring_fwd: fa_fwd", a->step);
    }
    return FA_OK;
}

static fa_status fwd_ring(fa_ring_comm *c, const fa_ring_geometry *g, fwd_state *f, const fa_tensor *q,
                          const fa_params *params)
{
    fwd_step_args a = {c, g, f, q, params, 0};
    fa_status st = FA_OK;
    for (a.step = 0; a.step < g->world && st == FA_OK; a.step++) {
        st = start_step(c->transport, g, a.step, f->kv, NULL, 0);
        if (st != FA_OK)
            return fa_ring_fail_transport(c, st, "fa_ring_fwd");
        st = run_step(c, step_exchanges(g, a.step, 0), fwd_step, &a, "fa_ring_fwd");
    }
    return st;
}

static fa_status fwd_combine(fa_ring_comm *c, const fa_ring_geometry *g, fwd_state *f, fa_tensor *out,
                             fa_tensor *lse)
{
    int i;
    for (i = 0; i < g->npieces; i++) {
        const fa_ring_piece *qp = &g->pieces[i];
        fa_tensor to = rows_of(out, 1, qp->local, qp->length), tl;
        fa_status st;
        if (qp->length == 0)
            continue;
        if (lse != NULL)
            tl = rows_of(lse, 2, qp->local, qp->length);
        st = fa_combine(c->ctx, f->used[i], f->part_out[i], f->part_lse[i], &to, lse ? &tl : NULL);
        if (st != FA_OK)
            return fa_ring_fail_call(c, st, "fa_ring_fwd: fa_combine", g->world);
    }
    return FA_OK;
}

fa_status fa_ring_fwd(fa_ring_comm *comm, const fa_tensor *q, const fa_tensor *k, const fa_tensor *v,
                      const fa_params *params, const fa_ring_layout *layout, fa_tensor *out, fa_tensor *lse)
{
    static const char call[] = "fa_ring_fwd";
    fa_ring_geometry g;
    fwd_state *f;
    buffers b;
    fa_status st;
    if (comm == NULL)
        return FA_ERR_NULL_POINTER;
    st = fa_ring_accept_fwd(comm, q, k, v, params, layout, out, lse, &g);
    if (st != FA_OK)
        return st;
    f = (fwd_state *)calloc(1, sizeof *f);
    if (f == NULL)
        return fa_ring_fail(comm, FA_ERR_OUT_OF_MEMORY, "%s: out of host memory", call);
    b.t = comm->transport;
    b.n = 0;
    st = fwd_buffers(&b, &g, f);
    if (st != FA_OK)
        fa_ring_fail(comm, st, "%s: out of %s memory for the ring's buffers", call,
                     fa_backend_name(fa_context_backend(comm->ctx)));
    if (st == FA_OK)
        st = pack_own(comm->transport, &g, &f->kv[0], k, v);
    if (st == FA_OK)
        st = fwd_ring(comm, &g, f, q, params);
    if (st == FA_OK)
        st = fwd_combine(comm, &g, f, out, lse);
    release_all(&b);
    free(f);
    return st;
}

/* ---- backward ------------------------------------------------------------------------ */

typedef struct bwd_state {
    kv_block kv[2];
    void *dkv[2];  /* fp32 dK/dV sums in flight ([2][b, max_rows, h_k, d] like kv) */
    kv_block mine; /* fp32: this step's dK/dV partials of the block in hand */
    kv_block part; /* dtype: one fa_bwd call's dk and dv */
    float *dq_sum; /* fp32 [b, rows, h, d] */
    void *dq_part; /* dtype [b, longest piece, h, d] */
} bwd_state;

static fa_status bwd_buffers(buffers *b, const fa_ring_geometry *g, bwd_state *s)
{
    int64_t longest = g->pieces[0].length > g->pieces[1].length ? g->pieces[0].length : g->pieces[1].length;
    size_t q_rows = (size_t)(g->batch * g->heads * g->dim);
    int i;
    for (i = 0; i < 2; i++) {
        s->kv[i].dtype = g->dtype;
        s->kv[i].base = take(b, kv_bytes(g, g->dtype));
        s->dkv[i] = take(b, kv_bytes(g, FA_DTYPE_F32));
        if (s->kv[i].base == NULL || s->dkv[i] == NULL)
            return FA_ERR_OUT_OF_MEMORY;
    }
    s->mine.dtype = FA_DTYPE_F32;
    s->mine.base = take(b, kv_bytes(g, FA_DTYPE_F32));
    s->part.dtype = g->dtype;
    s->part.base = take(b, kv_bytes(g, g->dtype));
    s->dq_sum = (float *)take(b, q_rows * (size_t)g->rows * sizeof(float));
    s->dq_part = take(b, q_rows * (size_t)longest * fa_dtype_bytes(g->dtype));
    if (s->mine.base == NULL || s->part.base == NULL || s->dq_sum == NULL || s->dq_part == NULL)
        return FA_ERR_OUT_OF_MEMORY;
    return FA_OK;
}

typedef struct bwd_inputs {
    const fa_tensor *q, *out, *lse, *dout;
    const fa_params *params;
} bwd_inputs;

/* One block's gradients: dq added to the local sum, dk and dv to this step's partials. */
static fa_status bwd_job(fa_ring_comm *c, const fa_ring_geometry *g, bwd_state *s, const kv_block *kv,
                         const job *j, const bwd_inputs *in)
{
    fa_ring_transport *t = c->transport;
    const fa_ring_piece *qp = &g->pieces[j->query_piece];
    fa_tensor tq = rows_of(in->q, 1, qp->local, qp->length);
    fa_tensor to = rows_of(in->out, 1, qp->local, qp->length);
    fa_tensor tdo = rows_of(in->dout, 1, qp->local, qp->length);
    fa_tensor tl = rows_of(in->lse, 2, qp->local, qp->length);
    fa_tensor tk = kv_part(kv, g, 0, j->key_first, j->key_length);
    fa_tensor tv = kv_part(kv, g, 1, j->key_first, j->key_length);
    fa_tensor dq = fa_tensor_bshd(s->dq_part, g->dtype, g->batch, qp->length, g->heads, g->dim);
    fa_tensor dk = kv_part(&s->part, g, 0, j->key_first, j->key_length);
    fa_tensor dv = kv_part(&s->part, g, 1, j->key_first, j->key_length);
    fa_tensor dq_sum = fa_tensor_bshd(s->dq_sum, FA_DTYPE_F32, g->batch, g->rows, g->heads, g->dim);
    fa_tensor mk = kv_part(&s->mine, g, 0, j->key_first, j->key_length);
    fa_tensor mv = kv_part(&s->mine, g, 1, j->key_first, j->key_length);
    fa_params p = job_params(in->params, j);
    fa_status st = fa_bwd(c->ctx, &tq, &tk, &tv, &to, &tl, &tdo, &p, &dq, &dk, &dv, NULL, 0);
    if (st != FA_OK)
        return st;
    dq_sum = rows_of(&dq_sum, 1, qp->local, qp->length);
    st = t->ops->convert(t, &dq_sum, &dq, 1);
    if (st == FA_OK)
        st = t->ops->convert(t, &mk, &dk, 1);
    return st == FA_OK ? t->ops->convert(t, &mv, &dv, 1) : st;
}

/* dkv[s % 2] (received, or zero at step 0) += this step's partials. */
static fa_status bwd_add_partials(fa_ring_transport *t, const fa_ring_geometry *g, bwd_state *s, int step)
{
    kv_block sum = {s->dkv[step % 2], FA_DTYPE_F32};
    fa_tensor dst, src;
    fa_status st = FA_OK;
    int w;
    if (step == 0)
        st = t->ops->zero(t, sum.base, kv_bytes(g, FA_DTYPE_F32));
    for (w = 0; w < 2 && st == FA_OK; w++) {
        dst = kv_part(&sum, g, w, 0, g->max_rows);
        src = kv_part(&s->mine, g, w, 0, g->max_rows);
        st = t->ops->convert(t, &dst, &src, 1);
    }
    return st;
}

typedef struct bwd_step_args {
    fa_ring_comm *c;
    const fa_ring_geometry *g;
    bwd_state *s;
    const bwd_inputs *in;
    int step;
} bwd_step_args;

/* Step s's gradient calls against the block in hand, into `mine`. */
static fa_status bwd_step(void *arg)
{
    bwd_step_args *a = (bwd_step_args *)arg;
    const fa_ring_geometry *g = a->g;
    fa_ring_transport *t = a->c->transport;
    job jobs[4];
    int i, n = step_jobs(g, (g->rank - a->step + g->world) % g->world, jobs);
    fa_status st = t->ops->zero(t, a->s->mine.base, kv_bytes(g, FA_DTYPE_F32));
    if (st != FA_OK)
        return fa_ring_fail_transport(a->c, st, "fa_ring_bwd");
    for (i = 0; i < n; i++) {
        st = bwd_job(a->c, g, a->s, &a->s->kv[a->step % 2], &jobs[i], a->in);
        if (st != FA_OK)
            return fa_ring_fail_call(a->c, st, "fa_ring_bwd: fa_bwd", a->step);
    }
    return FA_OK;
}

static fa_status bwd_ring(fa_ring_comm *c, const fa_ring_geometry *g, bwd_state *s, const bwd_inputs *in)
{
    fa_ring_transport *t = c->transport;
    size_t dkv_bytes = kv_bytes(g, FA_DTYPE_F32);
    bwd_step_args a = {c, g, s, in, 0};
    fa_status st =
        t->ops->zero(t, s->dq_sum, (size_t)(g->batch * g->rows * g->heads * g->dim) * sizeof(float));
    for (a.step = 0; a.step < g->world && st == FA_OK; a.step++) {
        st = start_step(t, g, a.step, s->kv, s->dkv, dkv_bytes);
        if (st != FA_OK)
            return fa_ring_fail_transport(c, st, "fa_ring_bwd");
        st = run_step(c, step_exchanges(g, a.step, 1), bwd_step, &a, "fa_ring_bwd");
        if (st == FA_OK)
            st = bwd_add_partials(t, g, s, a.step);
    }
    /* The last sum goes home: rank r's own block's sum comes from rank r - 1. */
    if (st == FA_OK && g->world > 1) {
        fa_status worked;
        st = start_step(t, g, g->world, s->kv, s->dkv, dkv_bytes);
        if (st == FA_OK)
            st = t->ops->overlap(t, NULL, NULL, &worked);
        if (st != FA_OK)
            st = fa_ring_fail_transport(c, st, "fa_ring_bwd");
    }
    return st;
}

static fa_status bwd_store(fa_ring_comm *c, const fa_ring_geometry *g, bwd_state *s, fa_tensor *dq,
                           fa_tensor *dk, fa_tensor *dv)
{
    fa_ring_transport *t = c->transport;
    kv_block sum = {s->dkv[g->world > 1 ? g->world % 2 : 0], FA_DTYPE_F32};
    fa_tensor dq_sum = fa_tensor_bshd(s->dq_sum, FA_DTYPE_F32, g->batch, g->rows, g->heads, g->dim);
    fa_tensor sk = kv_part(&sum, g, 0, 0, g->rows), sv = kv_part(&sum, g, 1, 0, g->rows);
    fa_status st = t->ops->convert(t, dq, &dq_sum, 0);
    if (st == FA_OK)
        st = t->ops->convert(t, dk, &sk, 0);
    if (st == FA_OK)
        st = t->ops->convert(t, dv, &sv, 0);
    return st == FA_OK ? FA_OK : fa_ring_fail_transport(c, st, "fa_ring_bwd");
}

fa_status fa_ring_bwd(fa_ring_comm *comm, const fa_tensor *q, const fa_tensor *k, const fa_tensor *v,
                      const fa_tensor *out, const fa_tensor *lse, const fa_tensor *dout,
                      const fa_params *params, const fa_ring_layout *layout, fa_tensor *dq, fa_tensor *dk,
                      fa_tensor *dv)
{
    static const char call[] = "fa_ring_bwd";
    bwd_inputs in = {q, out, lse, dout, params};
    fa_ring_geometry g;
    bwd_state s;
    buffers b;
    fa_status st;
    if (comm == NULL)
        return FA_ERR_NULL_POINTER;
    st = fa_ring_accept_bwd(comm, q, k, v, out, lse, dout, params, layout, dq, dk, dv, &g);
    if (st != FA_OK)
        return st;
    b.t = comm->transport;
    b.n = 0;
    st = bwd_buffers(&b, &g, &s);
    if (st != FA_OK)
        fa_ring_fail(comm, st, "%s: out of %s memory for the ring's buffers", call,
                     fa_backend_name(fa_context_backend(comm->ctx)));
    if (st == FA_OK)
        st = pack_own(comm->transport, &g, &s.kv[0], k, v);
    if (st == FA_OK)
        st = bwd_ring(comm, &g, &s, &in);
    if (st == FA_OK)
        st = bwd_store(comm, &g, &s, dq, dk, dv);
    release_all(&b);
    return st;
}
