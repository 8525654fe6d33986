/*
 * ring_internal.h - what the ring schedule (ring_core.c) needs from a transport: the
 * memory of the context's backend, the two message channels of the ring, and one
 * agreement among the ranks. Each transport (ring_mpi.c, ring_nccl.c) fills one table;
 * the schedule is written once against it.
 */
#ifndef FA_RING_INTERNAL_H
#define FA_RING_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "flashattn.h"
#include "flashattn_ring.h"

/* The ring's two kinds of message, each from a rank to the next: K/V blocks, and
 * (backward) the dK/dV sums of the block sent one step earlier. */
enum { FA_RING_KV = 0, FA_RING_DKV = 1, FA_RING_CHANNELS = 2 };

/* One step's messages, started together (one NCCL group): per channel, in channel order,
 * a send of bytes[ch] from send[ch] to the next rank and a receive of bytes[ch] into
 * recv[ch] from the previous rank; NULL: none. Every rank starts the same sequence of
 * exchanges, so the sends of one rank meet the receives of the next in order. */
typedef struct fa_ring_exchange {
    const void *send[FA_RING_CHANNELS];
    void *recv[FA_RING_CHANNELS];
    size_t bytes[FA_RING_CHANNELS];
} fa_ring_exchange;

typedef struct fa_ring_transport fa_ring_transport;

typedef struct fa_ring_ops {
    /* Memory where the context computes. alloc returns NULL when out of memory. */
    void *(*alloc)(fa_ring_transport *t, size_t bytes);
    void (*release)(fa_ring_transport *t, void *p);
    fa_status (*zero)(fa_ring_transport *t, void *p, size_t bytes);
    /* dst = src element by element (same shape, any dtypes, any strides); add: dst is
     * fp32 and dst += src. Ordered with the context's fa_* calls. */
    fa_status (*convert)(fa_ring_transport *t, fa_tensor *dst, const fa_tensor *src, int add);
    /* Starts an exchange and returns; its buffers stay untouched by the schedule until
     * overlap returns. A send carries everything the context computed before the start. */
    fa_status (*start)(fa_ring_transport *t, const fa_ring_exchange *x);
    /* Runs work(arg) (a step's fa_* calls) while the started exchange moves, and returns
     * once both are done: *work_status is work's status, the return the transport's. The
     * exchange is then complete for every later fa_* call and buffer op; work may be
     * NULL. */
    fa_status (*overlap)(fa_ring_transport *t, fa_status (*work)(void *), void *arg, fa_status *work_status);
    /* values[i] = the maximum of values[i] over the ranks (an all-reduce; blocking). */
    fa_status (*agree_max)(fa_ring_transport *t, int64_t *values, int count);
    void (*destroy)(fa_ring_transport *t);
} fa_ring_ops;

struct fa_ring_transport {
    const fa_ring_ops *ops;
    const char *name; /* "MPI", "NCCL" */
    int rank, world;
    char error[256]; /* the transport's own failure message */
};

struct fa_ring_comm {
    fa_ring_transport *transport;
    fa_context *ctx;
    char last_error[512];
};

/* A transport failure: the message into t->error; returns status. */
fa_status fa_ring_transport_fail(fa_ring_transport *t, fa_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* The ring around a transport; reports through fa_ring_create_error on failure. */
fa_status fa_ring_wrap(fa_ring_comm **comm, fa_context *ctx, fa_ring_transport *t);
/* The message fa_ring_create_error returns; returns status. */
fa_status fa_ring_create_fail(fa_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* One chunk of a rank's rows. */
typedef struct fa_ring_piece {
    int64_t chunk; /* index among the layout's chunks: their order is the sequence's */
    int64_t local; /* first row in the rank's tensors */
    int64_t length;
} fa_ring_piece;

/* A call as every rank agreed on it (ring_args.c), and this rank's place in it. */
typedef struct fa_ring_geometry {
    int world, rank, npieces;
    fa_ring_piece pieces[2];
    int64_t rows, max_rows; /* this rank's, and the largest over the ranks */
    int64_t batch, heads, heads_k, dim;
    fa_dtype dtype;
    int causal;
    fa_ring_layout layout;
} fa_ring_geometry;

/* Rank `rank`'s pieces in local order (span: their global rows); returns how many (1
 * for the contiguous split, 2 for zigzag; a piece may be empty). */
int fa_ring_pieces(const fa_ring_layout *layout, int world, int rank, fa_ring_piece p[2],
                   fa_ring_span span[2]);

/* Checks a call's arguments here and agrees on them with every rank; fills g. FA_OK
 * only when every rank accepted and all agree; otherwise nothing may be written. */
fa_status fa_ring_accept_fwd(fa_ring_comm *c, const fa_tensor *q, const fa_tensor *k, const fa_tensor *v,
                             const fa_params *params, const fa_ring_layout *layout, const fa_tensor *out,
                             const fa_tensor *lse, fa_ring_geometry *g);
fa_status fa_ring_accept_bwd(fa_ring_comm *c, const fa_tensor *q, const fa_tensor *k, const fa_tensor *v,
                             const fa_tensor *out, const fa_tensor *lse, const fa_tensor *dout,
                             const fa_params *params, const fa_ring_layout *layout, const fa_tensor *dq,
                             const fa_tensor *dk, const fa_tensor *dv, fa_ring_geometry *g);

/* The ring's own message into c->last_error; returns status. */
fa_status fa_ring_fail(fa_ring_comm *c, fa_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* An inner fa_* call failed at a ring step: its message, after what the ring did. */
fa_status fa_ring_fail_call(fa_ring_comm *c, fa_status st, const char *what, int step);
/* The transport failed: its message, after what the ring did. */
fa_status fa_ring_fail_transport(fa_ring_comm *c, fa_status st, const char *what);

/* Host memory: the CPU backend's half of a transport (ring_host.c). */
void *fa_ring_host_alloc(fa_ring_transport *t, size_t bytes);
void fa_ring_host_release(fa_ring_transport *t, void *p);
fa_status fa_ring_host_zero(fa_ring_transport *t, void *p, size_t bytes);
fa_status fa_ring_host_convert(fa_ring_transport *t, fa_tensor *dst, const fa_tensor *src, int add);

#endif /* FA_RING_INTERNAL_H */
