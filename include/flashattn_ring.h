/*
 * flashattn_ring.h - context-parallel (ring) attention over several processes (C99):
 * the optional library flashattn_ring, built on flashattn's own fa_fwd, fa_bwd and
 * fa_combine. Link flashattn::flashattn_ring (CMake) when the build has FA_BUILD_RING.
 *
 * WHAT IT COMPUTES
 *   One sequence (per batch entry) of total_seqlen tokens is cut into chunks spread over
 *   the world ranks of a communicator. Each rank passes the q, k and v rows of its chunks
 *   and gets back out, lse (forward) and dq, dk, dv (backward) for its own rows, exactly
 *   as one fa_fwd / fa_bwd over the whole sequence would give them for those rows (up to
 *   the rounding of the partial results: see PRECISION). The K/V blocks travel around the
 *   ring (rank r sends to r + 1 and receives from r - 1, modulo world); in the backward
 *   the dK/dV partial sums travel with them and arrive back at their owner.
 *
 * SPLITS AND CHUNK SIZES
 *   The sequence is cut into C chunks: C = 2 * world (FA_RING_SPLIT_ZIGZAG) or world
 *   (FA_RING_SPLIT_CONTIGUOUS). With n = total_seqlen, chunk c has
 *     n / C + (c < n % C)   rows (integer division: the first n % C chunks are one longer)
 *   and starts at c * (n / C) + min(c, n % C). Any n >= 0 works; chunks may be empty.
 *   Zigzag: rank r holds chunks r and 2 * world - 1 - r, in that order (its local rows
 *   are chunk r's rows followed by chunk 2 * world - 1 - r's). Under a causal mask every
 *   rank then does the same work (ring-flash-attention's and Megatron-LM's balanced
 *   split). Contiguous: rank r holds chunk r. fa_ring_rows() tells a rank its rows.
 *
 * LAYOUT
 *   q, out, dout, dq: [b, rows, h, d]; k, v, dk, dv: [b, rows, h_k, d], with rows the
 *   local row count of fa_ring_rows(); lse [b, h, rows] fp32. Any outer strides, last dim
 *   contiguous (as fa_fwd). Memory where the communicator's context computes.
 *
 * MASKS AND PARAMETERS
 *   params as fa_fwd's. causal applies to the whole sequence (query i sees key j <= i);
 *   sub-blocks use fa_fwd's own masks: a chunk attending to an earlier chunk runs
 *   without a mask, to itself with causal (s_q == s_k, so bottom-right is the diagonal),
 *   and later chunks are skipped. softmax_scale, softcap, GQA/MQA, num_splits and
 *   deterministic pass through. Sliding windows, ALiBi, varlen (cu_seqlens), seqused_k
 *   and paged K/V return FA_ERR_UNSUPPORTED (they would need positions the blocks do not
 *   carry).
 *
 * PRECISION
 *   Forward: each block's partial out is rounded to the dtype once and the partials of a
 *   chunk are merged by one fa_combine (fp64 on the CPU): two roundings, as a split-KV
 *   forward. Backward: each block's dq, dk, dv from fa_bwd (rounded to the dtype) are
 *   summed in fp32 and rounded once more at the end. fp32 inputs stay fp32 throughout.
 *   Every rank adds in ring order, so results are the same run to run.
 *
 * COLLECTIVE CALLS AND ERRORS
 *   fa_ring_fwd and fa_ring_bwd are collective: every rank of the communicator calls them
 *   with the same total_seqlen, split, batch, heads, head dim, dtype and params. Before
 *   anything moves, the ranks agree: if any rank's arguments are wrong (or disagree with
 *   another rank's), every rank returns an error and writes nothing. A rank whose own
 *   arguments were wrong returns their named status (FA_ERR_SHAPE_MISMATCH, ...); the
 *   others return the largest status among the ranks, fa_ring_last_error saying which
 *   ranks refused. Errors after that point (out of memory, a transport failure) are
 *   returned by the rank that saw them (a transport's failure as FA_ERR_DEVICE_RUNTIME,
 *   a message larger than the transport takes as FA_ERR_UNSUPPORTED); its peers may
 *   then fail in the transport too, or wait for it.
 *   fa_ring_last_error(comm) holds the message (fa_last_error's text of an inner fa_*
 *   call, prefixed with what the ring was doing).
 *
 * TRANSPORTS
 *   MPI (FA_RING_MPI, CPU contexts: host memory): nonblocking MPI_Isend/MPI_Irecv of the
 *   next K/V block are posted before the current block's attention. The communicator is
 *   duplicated at creation (MPI_Comm_dup, collective), so the ring's messages never
 *   match the caller's. MPI must be initialised; only the calling thread makes MPI
 *   calls (MPI_THREAD_FUNNELED is enough). Many MPIs (Open MPI's shared-memory transport
 *   among them) move a large message only inside MPI calls, so during each step the
 *   attention calls run on a helper thread while the calling thread keeps testing the
 *   messages (MPI_Testall); without a helper thread (pthread_create failing) the step
 *   runs on the calling thread and the messages move when it waits. A message must fit
 *   MPI's int count (a K/V block, and the fp32 dK/dV block: at most INT_MAX bytes).
 *   NCCL (FA_RING_NCCL, CUDA contexts: device memory): ncclSend/ncclRecv in a group on a
 *   stream of the ring's own, ordered against the context's stream with events; no host
 *   synchronisation except the argument agreement at the start of each call (one
 *   ncclAllReduce of a few integers, waited for on the host).
 *   Each call allocates its buffers (in the context's memory) and frees them before it
 *   returns: two K/V blocks, the forward's partials (world + 1 per local chunk, so world
 *   <= FA_MAX_COMBINE_PARTIALS - 1), and the backward's fp32 dq and two fp32 dK/dV blocks.
 *
 * THREADS
 *   A communicator is used by one thread at a time, with its context.
 */
#ifndef FLASHATTN_RING_H
#define FLASHATTN_RING_H

#include "flashattn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum fa_ring_split {
    FA_RING_SPLIT_ZIGZAG = 0,     /* 2 * world chunks; rank r: chunks r, 2 * world - 1 - r */
    FA_RING_SPLIT_CONTIGUOUS = 1  /* world chunks; rank r: chunk r                          */
} fa_ring_split;

/* The whole sequence, the same on every rank. */
typedef struct fa_ring_layout {
    int64_t total_seqlen;  /* tokens of the whole sequence (queries = keys), 0..INT32_MAX */
    fa_ring_split split;
} fa_ring_layout;

/* The global rows a rank holds: up to two ranges, in local order (length 0: unused). */
typedef struct fa_ring_span {
    int64_t begin;   /* first global row */
    int64_t length;  /* rows */
} fa_ring_span;

/* Rows of rank `rank` of `world` under `layout`: span[0] then span[1] (span[1].length is 0
 * for the contiguous split); *rows = their sum, the local row count. Errors:
 * FA_ERR_NULL_POINTER, FA_ERR_BAD_PARAM (world < 1, rank outside 0..world - 1, total
 * outside 0..INT32_MAX, unknown split). */
FA_API fa_status fa_ring_rows(const fa_ring_layout *layout, int world, int rank,
                              fa_ring_span span[2], int64_t *rows);

/* A ring: a transport over a communicator, and the context whose fa_* calls compute. */
typedef struct fa_ring_comm fa_ring_comm;

/* MPI transport. mpi_comm points to an MPI_Comm (kept out of this header so it needs no
 * mpi.h). Collective over the communicator (it is duplicated). ctx must be a CPU context
 * (else FA_ERR_UNSUPPORTED); it must outlive the ring. Returns FA_ERR_UNSUPPORTED when the
 * library was built without MPI. On error *comm is NULL and fa_ring_create_error() says
 * why. */
FA_API fa_status fa_ring_create_mpi(fa_ring_comm **comm, fa_context *ctx, const void *mpi_comm);

/* NCCL transport. nccl_comm points to an initialised ncclComm_t; stream is the
 * cudaStream_t the caller computes on (NULL: the default stream), which is set on ctx
 * (fa_set_stream). ctx must be a CUDA context (else FA_ERR_UNSUPPORTED). Not collective.
 * Returns FA_ERR_UNSUPPORTED when the library was built without NCCL. */
FA_API fa_status fa_ring_create_nccl(fa_ring_comm **comm, fa_context *ctx, const void *nccl_comm,
                                     void *stream);

/* Why the last failed fa_ring_create_* on this thread failed ("" if none). */
FA_API const char *fa_ring_create_error(void);
FA_API void fa_ring_destroy(fa_ring_comm *comm);
/* This rank and the ring's size (the communicator's rank order is the ring's order). */
FA_API int fa_ring_rank(const fa_ring_comm *comm);
FA_API int fa_ring_world(const fa_ring_comm *comm);
/* Last error message of this ring ("" after success). Valid until the next call. */
FA_API const char *fa_ring_last_error(const fa_ring_comm *comm);

/* Forward over the whole sequence for this rank's rows (collective). lse may be NULL.
 * Writes out (and lse) only when every rank's arguments were accepted. */
FA_API fa_status fa_ring_fwd(fa_ring_comm *comm, const fa_tensor *q, const fa_tensor *k,
                             const fa_tensor *v, const fa_params *params,
                             const fa_ring_layout *layout, fa_tensor *out, fa_tensor *lse);

/* Backward (collective): out and lse as fa_ring_fwd wrote them for this rank's rows,
 * dout shaped like out. dq for this rank's queries; dk and dv for this rank's keys,
 * summed over every rank's queries (and over each GQA group). All three are written. */
FA_API fa_status fa_ring_bwd(fa_ring_comm *comm, const fa_tensor *q, const fa_tensor *k,
                             const fa_tensor *v, const fa_tensor *out, const fa_tensor *lse,
                             const fa_tensor *dout, const fa_params *params,
                             const fa_ring_layout *layout, fa_tensor *dq, fa_tensor *dk,
                             fa_tensor *dv);

#ifdef __cplusplus
}
#endif

#endif /* FLASHATTN_RING_H */
