/*
 * ring_mpi.c - the ring's MPI transport, for CPU contexts: host buffers (ring_host.c),
 * each step's messages as nonblocking MPI_Isend / MPI_Irecv (one tag per channel) on a
 * duplicate of the caller's communicator, and the agreement as one MPI_Allreduce.
 *
 * Many MPIs (Open MPI's shared-memory transport among them) move a large message only
 * while the process is inside an MPI call. So while a step computes, the step's fa_*
 * calls run on a helper thread and the calling thread keeps testing the messages; MPI
 * is only ever called from the calling thread (MPI_THREAD_FUNNELED is enough).
 */
#include <limits.h>
#include <mpi.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "ring/ring_internal.h"

typedef struct mpi_transport {
    fa_ring_transport base;
    MPI_Comm comm;
    MPI_Request requests[2 * FA_RING_CHANNELS];
    int pending;
} mpi_transport;

static mpi_transport *of(fa_ring_transport *t) { return (mpi_transport *)t; }

static fa_status mpi_fail(fa_ring_transport *t, const char *what, int code)
{
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    if (MPI_Error_string(code, text, &length) != MPI_SUCCESS)
        length = 0;
    text[length] = '\0';
    return fa_ring_transport_fail(t, FA_ERR_DEVICE_RUNTIME, "%s failed: %s", what, text);
}

/* MPI counts are int: a block of more than INT_MAX bytes is refused, not split. */
static fa_status post_one(mpi_transport *m, int send, const void *buf, size_t bytes, int tag)
{
    int peer = send ? (m->base.rank + 1) % m->base.world : (m->base.rank + m->base.world - 1) % m->base.world;
    int rc;
    if (bytes > INT_MAX)
        return fa_ring_transport_fail(&m->base, FA_ERR_UNSUPPORTED,
                                      "a message of %zu bytes exceeds MPI's int count", bytes);
    rc = send ? MPI_Isend(buf, (int)bytes, MPI_BYTE, peer, tag, m->comm, &m->requests[m->pending])
              : MPI_Irecv((void *)buf, (int)bytes, MPI_BYTE, peer, tag, m->comm, &m->requests[m->pending]);
    if (rc != MPI_SUCCESS)
        return mpi_fail(&m->base, send ? "MPI_Isend" : "MPI_Irecv", rc);
    m->pending++;
    return FA_OK;
}

static fa_status mpi_start(fa_ring_transport *t, const fa_ring_exchange *x)
{
    mpi_transport *m = of(t);
    fa_status st = FA_OK;
    int ch;
    for (ch = 0; ch < FA_RING_CHANNELS && st == FA_OK; ch++) {
        if (x->recv[ch] != NULL)
            st = post_one(m, 0, x->recv[ch], x->bytes[ch], ch);
        if (st == FA_OK && x->send[ch] != NULL)
            st = post_one(m, 1, x->send[ch], x->bytes[ch], ch);
    }
    return st;
}

static fa_status mpi_wait(mpi_transport *m)
{
    int rc = MPI_Waitall(m->pending, m->requests, MPI_STATUSES_IGNORE);
    m->pending = 0;
    return rc == MPI_SUCCESS ? FA_OK : mpi_fail(&m->base, "MPI_Waitall", rc);
}

/* A step's computation on the helper thread, and whether it has ended. */
typedef struct step_work {
    fa_status (*work)(void *);
    void *arg;
    fa_status status;
    int done;
    pthread_mutex_t lock;
} step_work;

static void *run_work(void *p)
{
    step_work *w = (step_work *)p;
    fa_status st = w->work(w->arg);
    pthread_mutex_lock(&w->lock);
    w->status = st;
    w->done = 1;
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

static int work_done(step_work *w)
{
    int done;
    pthread_mutex_lock(&w->lock);
    done = w->done;
    pthread_mutex_unlock(&w->lock);
    return done;
}

/* Tests the messages until the work ends (a pause between tests keeps the cores for the
 * work), then waits for whatever is left. */
static fa_status progress_while(mpi_transport *m, step_work *w)
{
    struct timespec pause = {0, 50000};
    int flag = 0, rc = MPI_SUCCESS;
    while (!work_done(w)) {
        if (!flag && rc == MPI_SUCCESS)
            rc = MPI_Testall(m->pending, m->requests, &flag, MPI_STATUSES_IGNORE);
        nanosleep(&pause, NULL);
    }
    return rc == MPI_SUCCESS ? FA_OK : mpi_fail(&m->base, "MPI_Testall", rc);
}

static fa_status mpi_overlap(fa_ring_transport *t, fa_status (*work)(void *), void *arg,
                             fa_status *work_status)
{
    mpi_transport *m = of(t);
    step_work w = {work, arg, FA_OK, 0, PTHREAD_MUTEX_INITIALIZER};
    pthread_t helper;
    fa_status st = FA_OK, waited;
    *work_status = FA_OK;
    /* Without a helper thread the work runs here and the messages move at the wait. */
    if (work != NULL && pthread_create(&helper, NULL, run_work, &w) != 0)
        *work_status = work(arg);
    else if (work != NULL) {
        st = progress_while(m, &w);
        pthread_join(helper, NULL);
        *work_status = w.status;
    }
    waited = mpi_wait(m);
    return st != FA_OK ? st : waited;
}

static fa_status mpi_agree_max(fa_ring_transport *t, int64_t *values, int count)
{
    int rc = MPI_Allreduce(MPI_IN_PLACE, values, count, MPI_INT64_T, MPI_MAX, of(t)->comm);
    return rc == MPI_SUCCESS ? FA_OK : mpi_fail(t, "MPI_Allreduce", rc);
}

static void mpi_destroy(fa_ring_transport *t)
{
    mpi_transport *m = of(t);
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized)
        MPI_Comm_free(&m->comm);
    free(m);
}

static const fa_ring_ops mpi_ops = {
    fa_ring_host_alloc, fa_ring_host_release, fa_ring_host_zero, fa_ring_host_convert,
    mpi_start,          mpi_overlap,          mpi_agree_max,     mpi_destroy};

fa_status fa_ring_create_mpi(fa_ring_comm **comm, fa_context *ctx, const void *mpi_comm)
{
    mpi_transport *m;
    int initialized = 0, rc;
    if (comm == NULL || ctx == NULL || mpi_comm == NULL)
        return fa_ring_create_fail(FA_ERR_NULL_POINTER,
                                   "fa_ring_create_mpi: comm, ctx and mpi_comm must be set");
    *comm = NULL;
    if (fa_context_backend(ctx) != FA_BACKEND_CPU)
        return fa_ring_create_fail(FA_ERR_UNSUPPORTED,
                                   "fa_ring_create_mpi: the MPI transport moves "
                                   "host memory and serves CPU contexts only (this one is %s)",
                                   fa_backend_name(fa_context_backend(ctx)));
    MPI_Initialized(&initialized);
    if (!initialized)
        return fa_ring_create_fail(FA_ERR_BAD_PARAM, "fa_ring_create_mpi: MPI is not initialised");
    m = (mpi_transport *)calloc(1, sizeof *m);
    if (m == NULL)
        return fa_ring_create_fail(FA_ERR_OUT_OF_MEMORY, "fa_ring_create_mpi: out of host memory");
    rc = MPI_Comm_dup(*(const MPI_Comm *)mpi_comm, &m->comm);
    if (rc != MPI_SUCCESS) {
        free(m);
        return fa_ring_create_fail(FA_ERR_BAD_PARAM, "fa_ring_create_mpi: MPI_Comm_dup failed (code %d)", rc);
    }
    /* Failures come back as codes (then FA_ERR_DEVICE_RUNTIME), not as an abort. */
    MPI_Comm_set_errhandler(m->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(m->comm, &m->base.rank);
    MPI_Comm_size(m->comm, &m->base.world);
    m->base.ops = &mpi_ops;
    m->base.name = "MPI";
    return fa_ring_wrap(comm, ctx, &m->base);
}
