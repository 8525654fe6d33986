/*
 * ring_nccl.c - the ring's NCCL transport, for CUDA contexts: buffers in stream-ordered
 * device memory on the context's stream, each step's messages as one ncclGroup of
 * ncclSend / ncclRecv on a stream of the ring's own (ordered against the context's
 * stream by events, so the next block moves while the current one is computed, without
 * the host waiting), the element-wise converts as a small kernel
 * (ring_nccl_kernels.cu), and the agreement as one ncclAllReduce the host waits for.
 */
#include <cuda_runtime.h>
#include <nccl.h>
#include <stdlib.h>

#include "ring/ring_internal.h"
#include "ring/ring_nccl_kernels.h"

/* The most integers one agreement carries (ring_core.c sends 26). */
#define AGREE_MAX 64

typedef struct nccl_transport {
    fa_ring_transport base;
    ncclComm_t comm;      /* the caller's; not destroyed here */
    cudaStream_t compute; /* the context's stream */
    cudaStream_t moving;  /* the ring's: every ncclSend / ncclRecv */
    cudaEvent_t computed, moved;
    int64_t *agree_values; /* device, AGREE_MAX entries */
} nccl_transport;

static nccl_transport *of(fa_ring_transport *t) { return (nccl_transport *)t; }

static fa_status cuda_fail(fa_ring_transport *t, const char *what, cudaError_t e)
{
    return fa_ring_transport_fail(t, FA_ERR_DEVICE_RUNTIME, "%s: %s", what, cudaGetErrorString(e));
}

static fa_status nccl_fail(fa_ring_transport *t, const char *what, ncclResult_t r)
{
    return fa_ring_transport_fail(t, FA_ERR_DEVICE_RUNTIME, "%s: %s (%s)", what, ncclGetErrorString(r),
                                  ncclGetLastError(of(t)->comm));
}

static void *nccl_alloc(fa_ring_transport *t, size_t bytes)
{
    void *p = NULL;
    return cudaMallocAsync(&p, bytes > 0 ? bytes : 1, of(t)->compute) == cudaSuccess ? p : NULL;
}

static void nccl_release(fa_ring_transport *t, void *p) { (void)cudaFreeAsync(p, of(t)->compute); }

static fa_status nccl_zero(fa_ring_transport *t, void *p, size_t bytes)
{
    cudaError_t e = cudaMemsetAsync(p, 0, bytes, of(t)->compute);
    return e == cudaSuccess ? FA_OK : cuda_fail(t, "cudaMemsetAsync", e);
}

static fa_ring_view view_of(const fa_tensor *t)
{
    fa_ring_view v;
    int i;
    v.data = t->data;
    v.dtype = (int)t->dtype;
    for (i = 0; i < 4; i++) {
        v.shape[i] = t->shape[i];
        v.stride[i] = t->stride[i];
    }
    return v;
}

static fa_status nccl_convert(fa_ring_transport *t, fa_tensor *dst, const fa_tensor *src, int add)
{
    int e = fa_ring_cuda_convert(view_of(dst), view_of(src), add, of(t)->compute);
    return e == 0 ? FA_OK : cuda_fail(t, "the ring's convert kernel", (cudaError_t)e);
}

/* One channel's pair: the receive from the previous rank, the send to the next. */
static ncclResult_t post_channel(nccl_transport *n, const fa_ring_exchange *x, int ch)
{
    int next = (n->base.rank + 1) % n->base.world, prev = (n->base.rank + n->base.world - 1) % n->base.world;
    ncclResult_t r = ncclSuccess;
    if (x->recv[ch] != NULL)
        r = ncclRecv(x->recv[ch], x->bytes[ch], ncclUint8, prev, n->comm, n->moving);
    if (r == ncclSuccess && x->send[ch] != NULL)
        r = ncclSend(x->send[ch], x->bytes[ch], ncclUint8, next, n->comm, n->moving);
    return r;
}

static fa_status nccl_start(fa_ring_transport *t, const fa_ring_exchange *x)
{
    nccl_transport *n = of(t);
    ncclResult_t r;
    int ch;
    /* The messages wait for what the context computed so far (the blocks they send, and
     * the last reads of the buffers they overwrite). */
    cudaError_t e = cudaEventRecord(n->computed, n->compute);
    if (e == cudaSuccess)
        e = cudaStreamWaitEvent(n->moving, n->computed, 0);
    if (e != cudaSuccess)
        return cuda_fail(t, "ordering the ring's stream after the context's", e);
    r = ncclGroupStart();
    for (ch = 0; ch < FA_RING_CHANNELS && r == ncclSuccess; ch++)
        r = post_channel(n, x, ch);
    /* The group is closed even after a failed post, as NCCL requires. */
    if (r == ncclSuccess)
        r = ncclGroupEnd();
    else
        (void)ncclGroupEnd();
    return r == ncclSuccess ? FA_OK : nccl_fail(t, "ncclSend/ncclRecv", r);
}

/* The work is only queued on the context's stream, so it overlaps the ring's stream by
 * itself; the context's stream then waits for the messages, the host does not. */
static fa_status nccl_overlap(fa_ring_transport *t, fa_status (*work)(void *), void *arg,
                              fa_status *work_status)
{
    nccl_transport *n = of(t);
    cudaError_t e;
    *work_status = work != NULL ? work(arg) : FA_OK;
    e = cudaEventRecord(n->moved, n->moving);
    if (e == cudaSuccess)
        e = cudaStreamWaitEvent(n->compute, n->moved, 0);
    return e == cudaSuccess ? FA_OK : cuda_fail(t, "ordering the context's stream after the ring's", e);
}

static fa_status nccl_agree_max(fa_ring_transport *t, int64_t *values, int count)
{
    nccl_transport *n = of(t);
    size_t bytes = (size_t)count * sizeof *values;
    cudaError_t e;
    ncclResult_t r;
    if (count > AGREE_MAX)
        return fa_ring_transport_fail(t, FA_ERR_UNSUPPORTED, "agreement of %d values (at most %d)", count,
                                      AGREE_MAX);
    e = cudaMemcpyAsync(n->agree_values, values, bytes, cudaMemcpyHostToDevice, n->compute);
    if (e != cudaSuccess)
        return cuda_fail(t, "cudaMemcpyAsync", e);
    r = ncclAllReduce(n->agree_values, n->agree_values, (size_t)count, ncclInt64, ncclMax, n->comm,
                      n->compute);
    if (r != ncclSuccess)
        return nccl_fail(t, "ncclAllReduce", r);
    e = cudaMemcpyAsync(values, n->agree_values, bytes, cudaMemcpyDeviceToHost, n->compute);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(n->compute);
    return e == cudaSuccess ? FA_OK : cuda_fail(t, "the agreement's copy back", e);
}

static void nccl_destroy(fa_ring_transport *t)
{
    nccl_transport *n = of(t);
    if (n->agree_values != NULL)
        (void)cudaFree(n->agree_values);
    if (n->computed != NULL)
        (void)cudaEventDestroy(n->computed);
    if (n->moved != NULL)
        (void)cudaEventDestroy(n->moved);
    if (n->moving != NULL)
        (void)cudaStreamDestroy(n->moving);
    free(n);
}

static const fa_ring_ops nccl_ops = {nccl_alloc, nccl_release, nccl_zero,      nccl_convert,
                                     nccl_start, nccl_overlap, nccl_agree_max, nccl_destroy};

/* The communicator's place, and a device that is the one current here. */
static fa_status describe_comm(nccl_transport *n)
{
    int device = -1, current = -1;
    ncclResult_t r = ncclCommCount(n->comm, &n->base.world);
    if (r == ncclSuccess)
        r = ncclCommUserRank(n->comm, &n->base.rank);
    if (r == ncclSuccess)
        r = ncclCommCuDevice(n->comm, &device);
    if (r != ncclSuccess)
        return fa_ring_create_fail(FA_ERR_BAD_PARAM, "fa_ring_create_nccl: the communicator: %s",
                                   ncclGetErrorString(r));
    if (cudaGetDevice(&current) != cudaSuccess || current != device)
        return fa_ring_create_fail(FA_ERR_BAD_PARAM,
                                   "fa_ring_create_nccl: the communicator is on device "
                                   "%d but device %d is current; set it (cudaSetDevice) first",
                                   device, current);
    return FA_OK;
}

static fa_status make_resources(nccl_transport *n)
{
    cudaError_t e = cudaStreamCreateWithFlags(&n->moving, cudaStreamNonBlocking);
    if (e == cudaSuccess)
        e = cudaEventCreateWithFlags(&n->computed, cudaEventDisableTiming);
    if (e == cudaSuccess)
        e = cudaEventCreateWithFlags(&n->moved, cudaEventDisableTiming);
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&n->agree_values, AGREE_MAX * sizeof(int64_t));
    if (e != cudaSuccess)
        return fa_ring_create_fail(e == cudaErrorMemoryAllocation ? FA_ERR_OUT_OF_MEMORY
                                                                  : FA_ERR_DEVICE_RUNTIME,
                                   "fa_ring_create_nccl: %s", cudaGetErrorString(e));
    return FA_OK;
}

fa_status fa_ring_create_nccl(fa_ring_comm **comm, fa_context *ctx, const void *nccl_comm, void *stream)
{
    nccl_transport *n;
    fa_status st;
    if (comm == NULL || ctx == NULL || nccl_comm == NULL)
        return fa_ring_create_fail(FA_ERR_NULL_POINTER,
                                   "fa_ring_create_nccl: comm, ctx and nccl_comm must be set");
    *comm = NULL;
    if (fa_context_backend(ctx) != FA_BACKEND_CUDA)
        return fa_ring_create_fail(FA_ERR_UNSUPPORTED,
                                   "fa_ring_create_nccl: the NCCL transport moves CUDA "
                                   "device memory and serves CUDA contexts only (this one is %s)",
                                   fa_backend_name(fa_context_backend(ctx)));
    if (fa_set_stream(ctx, stream) != FA_OK)
        return fa_ring_create_fail(FA_ERR_BAD_PARAM, "fa_ring_create_nccl: fa_set_stream: %s",
                                   fa_last_error(ctx));
    n = (nccl_transport *)calloc(1, sizeof *n);
    if (n == NULL)
        return fa_ring_create_fail(FA_ERR_OUT_OF_MEMORY, "fa_ring_create_nccl: out of host memory");
    n->comm = *(const ncclComm_t *)nccl_comm;
    n->compute = (cudaStream_t)stream;
    n->base.ops = &nccl_ops;
    n->base.name = "NCCL";
    st = describe_comm(n);
    if (st == FA_OK)
        st = make_resources(n);
    if (st != FA_OK) {
        nccl_destroy(&n->base);
        return st;
    }
    return fa_ring_wrap(comm, ctx, &n->base);
}
