/*
 * gpu_backend.c - the host side of every GPU backend, written once over a vendor's
 * runtime table (gpu_runtime.h): device discovery and the context's arch-table row, the
 * launch sequences of the forward, backward, combine and kvcache calls (which kernels run,
 * in what order, on which grid: the device check of the call's indices first),
 * call-owned workspaces, and the context's device-check record. No vendor API and no
 * attention logic lives here.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/problem.h"
#include "gpu_host/device_check.h"
#include "gpu_host/gpu_args.h"
#include "gpu_host/gpu_kvcache.h"
#include "gpu_host/gpu_runtime.h"
#include "select/registry.h"

static const fa_gpu_runtime *const k_runtimes[] = {
#ifdef FA_HAVE_CUDA
    &fa_cuda_runtime,
#endif
#ifdef FA_HAVE_HIP
    &fa_hip_runtime,
#endif
    NULL};

static const fa_gpu_runtime *runtime_for(fa_backend backend)
{
    const fa_gpu_runtime *const *rt;
    for (rt = k_runtimes; *rt != NULL; rt++)
        if ((*rt)->backend == backend)
            return *rt;
    return NULL;
}

int fa_gpu_backend_built(fa_backend backend) { return runtime_for(backend) != NULL; }

/* Per context: the runtime, the kernels whose shared-memory limit was raised (runtimes
 * with dynamic shared memory), room for every kernel of the registry, and the
 * device-check record in mapped host memory (NULL where the runtime has none): its host
 * address and the one the check kernels write through. */
typedef struct gpu_state {
    const fa_gpu_runtime *rt;
    const void *const **prepared;
    int prepared_count, prepared_capacity;
    fa_device_status *status_host, *status_device;
    int launch_overlap; /* the device and build allow overlapping launches */
} gpu_state;

static gpu_state *state_of(fa_context *ctx) { return (gpu_state *)ctx->state; }

static fa_status runtime_failed(fa_context *ctx, fa_status status, int err, const char *what)
{
    return fa_fail(ctx, status, "%s: %s", what, state_of(ctx)->rt->error_text(err));
}

/* FA_OK, or the runtime error `err` of `what` as FA_ERR_DEVICE_RUNTIME. */
static fa_status runtime_status(fa_context *ctx, int err, const char *what)
{
    return err == 0 ? FA_OK : runtime_failed(ctx, FA_ERR_DEVICE_RUNTIME, err, what);
}

/* ---- device discovery --------------------------------------------------------------- */

/* 1 when `arch` is in the comma-separated `list`. */
static int target_listed(const char *list, const char *arch)
{
    size_t len = strlen(arch);
    while (*list) {
        size_t n = strcspn(list, ",");
        if (n == len && strncmp(list, arch, len) == 0)
            return 1;
        list += n + (list[n] == ',');
    }
    return 0;
}

static fa_status find_device(const fa_gpu_runtime *rt, int device, fa_gpu_properties *props,
                             char *why, size_t why_len)
{
    int count = 0, err = rt->device_count(&count);
    if (err != 0 || count == 0) {
        snprintf(why, why_len, "no %s (%s): %s", rt->device_kind, rt->name,
                 err != 0 ? rt->error_text(err) : "device count is 0");
        return FA_ERR_NO_DEVICE;
    }
    if (device >= count) {
        snprintf(why, why_len, "%s device index %d out of range (%d devices)", rt->name, device, count);
        return FA_ERR_BAD_BACKEND;
    }
    err = rt->properties(device, props);
    if (err != 0) {
        snprintf(why, why_len, "reading the %s device's properties: %s", rt->name, rt->error_text(err));
        return FA_ERR_DEVICE_RUNTIME;
    }
    if (rt->built_targets && !target_listed(rt->built_targets, props->arch)) {
        snprintf(why, why_len, "device %s (%s) is not among the %s targets this library was built "
                 "for (%s): rebuild with %s including it", props->device_name, props->arch, rt->name,
                 rt->built_targets, rt->targets_option);
        return FA_ERR_UNSUPPORTED;
    }
    return FA_OK;
}

static fa_status create_state(fa_context *ctx, const fa_gpu_runtime *rt, char *why, size_t why_len)
{
    gpu_state *state = (gpu_state *)calloc(1, sizeof *state);
    int fwd_count = 0, bwd_count = 0;
    fa_registry(rt->backend, &fwd_count);
    fa_registry_bwd(rt->backend, &bwd_count);
    if (state != NULL) {
        state->rt = rt;
        state->prepared_capacity = 2 * (fwd_count + bwd_count) + 1;
        state->prepared = (const void *const **)calloc((size_t)state->prepared_capacity, sizeof *state->prepared);
    }
    if (state == NULL || state->prepared == NULL) {
        free(state);
        snprintf(why, why_len, "out of host memory");
        return FA_ERR_OUT_OF_MEMORY;
    }
    ctx->state = state;
    return FA_OK;
}

/* The device-check record, zeroed: allocated once here, outside any capture, so graphs
 * may bake its device address in. */
static fa_status create_status(fa_context *ctx, char *why, size_t why_len)
{
    gpu_state *state = state_of(ctx);
    const fa_gpu_runtime *rt = state->rt;
    void *host = NULL, *device = NULL;
    int err;
    if (rt->host_alloc_mapped == NULL)
        return FA_OK;
    err = rt->set_device(ctx->device);
    if (err == 0)
        err = rt->host_alloc_mapped(&host, &device, sizeof(fa_device_status));
    if (err != 0) {
        snprintf(why, why_len, "allocating the device-check record in mapped host memory: %s",
                 rt->error_text(err));
        return FA_ERR_DEVICE_RUNTIME;
    }
    memset(host, 0, sizeof(fa_device_status));
    state->status_host = (fa_device_status *)host;
    state->status_device = (fa_device_status *)device;
    return FA_OK;
}

static void destroy_state(fa_context *ctx)
{
    gpu_state *state = state_of(ctx);
    if (state == NULL)
        return;
    if (state->status_host)
        state->rt->host_free(state->status_host);
    free(state->prepared);
    free(state);
    ctx->state = NULL;
}

fa_status fa_gpu_attach(fa_context *ctx, const fa_gpu_runtime *rt, char *why, size_t why_len)
{
    fa_gpu_properties props;
    fa_status st;
    memset(&props, 0, sizeof props);
    st = find_device(rt, ctx->device, &props, why, why_len);
    if (st != FA_OK)
        return st;
    fa_arch_row reported = fa_arch_from_device(
        props.arch, rt->vendor, props.wave_size,
        props.smem_per_block, props.smem_per_sm, props.regs_per_sm, props.max_threads_per_block,
        props.max_threads_per_sm, props.sm_count, props.has_matrix_unit);
    fa_gpu_describe_device(ctx, rt->backend, props.device_name, &reported);
    st = create_state(ctx, rt, why, why_len);
    if (st == FA_OK)
        state_of(ctx)->launch_overlap = props.launch_overlap;
    /* No tensor maps (an old driver, a runtime without warpgroup kernels): the row's
     * warpgroup MMA is out of reach, its forwards and backwards take mma.sync. */
    if (st == FA_OK && ctx->row.matrix_unit == FA_MATRIX_WGMMA && (!props.has_tensor_maps || !rt->encode_maps))
        fa_gpu_set_matrix_unit(ctx, FA_MATRIX_MMA_SYNC);
    if (st == FA_OK)
        st = create_status(ctx, why, why_len);
    if (st != FA_OK)
        destroy_state(ctx);
    return st;
}

static fa_status gpu_init(fa_context *ctx, char *why, size_t why_len)
{
    const fa_gpu_runtime *rt = runtime_for(ctx->backend);
    if (rt == NULL) {
        snprintf(why, why_len, "the %s backend is not built into this library", fa_backend_name(ctx->backend));
        return FA_ERR_BAD_BACKEND;
    }
    return fa_gpu_attach(ctx, rt, why, why_len);
}

static void gpu_destroy(fa_context *ctx) { destroy_state(ctx); }

/* ---- the device-check record -------------------------------------------------------- */

/* wait = 1: the stream drained first, which a stream under capture cannot be. */
static fa_status drain_stream(fa_context *ctx)
{
    const fa_gpu_runtime *rt = state_of(ctx)->rt;
    int capturing = 0;
    fa_status st = runtime_status(ctx, rt->stream_capturing(ctx->stream, &capturing),
                                  "asking whether the stream is being captured");
    if (st == FA_OK && capturing)
        return fa_fail(ctx, FA_ERR_UNSUPPORTED,
                       "fa_device_error(ctx, 1) cannot wait for the context's stream while it is "
                       "being captured into a graph (ask with wait = 0, or after the capture)");
    if (st == FA_OK)
        st = runtime_status(ctx, rt->set_device(ctx->device), "selecting the device");
    if (st == FA_OK)
        st = runtime_status(ctx, rt->stream_sync(ctx->stream), "waiting for the context's stream");
    return st;
}

static fa_status gpu_device_error(fa_context *ctx, int wait)
{
    fa_device_status taken;
    fa_status st = wait ? drain_stream(ctx) : FA_OK;
    if (st != FA_OK || !fa_take_device_check(state_of(ctx)->status_host, &taken))
        return st;
    fa_describe_device_check(&taken, ctx->last_error, sizeof ctx->last_error);
    return FA_ERR_DEVICE_CHECK;
}

/* ---- launches ----------------------------------------------------------------------- */

static int was_prepared(const gpu_state *state, const void *const *kernel)
{
    int i;
    for (i = 0; i < state->prepared_count; i++)
        if (state->prepared[i] == kernel)
            return 1;
    return 0;
}

/* Past the capacity (only a config from outside the registry gets there) the kernel is
 * simply prepared again at its next launch. */
static void mark_prepared(gpu_state *state, const void *const *kernel)
{
    if (state->prepared_count < state->prepared_capacity)
        state->prepared[state->prepared_count++] = kernel;
}

/* One kernel on one grid: a grid without blocks (an empty side of an empty problem)
 * launches nothing, since CUDA and HIP refuse a zero grid dimension. A kernel with
 * dynamic shared memory has its limit raised once per context first. `stage` names the
 * step in a failure's message. overlap 1 (launch_next): the kernel follows another of
 * the same call and may be scheduled while that one finishes (gpu_runtime.h), where
 * the device and build allow it; else a plain launch. */
static fa_status launch_kernel(fa_context *ctx, const void *const *kernel, fa_grid grid, unsigned threads,
                               void **args, int smem_bytes, const char *stage, int overlap)
{
    gpu_state *state = state_of(ctx);
    const fa_gpu_runtime *rt = state->rt;
    size_t dynamic = rt->prepare_kernel ? (size_t)smem_bytes : 0;
    char what[96];
    int err;
    if (grid.x == 0 || grid.y == 0 || grid.z == 0)
        return FA_OK;
    if (dynamic > 0 && !was_prepared(state, kernel)) {
        snprintf(what, sizeof what, "raising the shared-memory limit of the %s", stage);
        err = rt->prepare_kernel(*kernel, smem_bytes);
        if (err != 0)
            return runtime_failed(ctx, FA_ERR_DEVICE_RUNTIME, err, what);
        mark_prepared(state, kernel);
    }
    snprintf(what, sizeof what, "launching the %s", stage);
    return runtime_status(
        ctx, rt->launch(*kernel, grid, threads, args, dynamic, ctx->stream, overlap && state->launch_overlap), what);
}

static fa_status launch(fa_context *ctx, const void *const *kernel, fa_grid grid, unsigned threads,
                        void **args, int smem_bytes, const char *stage)
{
    return launch_kernel(ctx, kernel, grid, threads, args, smem_bytes, stage, 0);
}

static fa_status launch_next(fa_context *ctx, const void *const *kernel, fa_grid grid, unsigned threads,
                             void **args, int smem_bytes, const char *stage)
{
    return launch_kernel(ctx, kernel, grid, threads, args, smem_bytes, stage, 1);
}

/* What every pass does before its launches, once its checks passed (st == FA_OK): select
 * the device, and take the caller's workspace or allocate `need` bytes for the call
 * (*owned, to release after the launches). */
static fa_status begin_pass(fa_context *ctx, fa_status st, size_t need, void **workspace, void **owned,
                            const char *what)
{
    const fa_gpu_runtime *rt = state_of(ctx)->rt;
    int err;
    *owned = NULL;
    if (st == FA_OK)
        st = runtime_status(ctx, rt->set_device(ctx->device), "selecting the device");
    if (st != FA_OK || *workspace != NULL || need == 0)
        return st;
    err = rt->alloc(owned, need, ctx->stream);
    if (err != 0) {
        *owned = NULL;
        return fa_fail(ctx, FA_ERR_OUT_OF_MEMORY, "%s of %zu bytes: %s", what, need, rt->error_text(err));
    }
    *workspace = *owned;
    return FA_OK;
}

static void release_workspace(fa_context *ctx, void *owned)
{
    if (owned)
        state_of(ctx)->rt->release(owned, ctx->stream);
}

/* The device check (seq_check.h) over `args`, ahead of the call's other kernels in the
 * stream: the scalar checks, then (paged) the block_table entries. It writes
 * args->seq_ok, which every later kernel of the call reads. A call with arrays fa_problem
 * does not hold (cache_seqlens, cache_batch_idx) fills them into fa_make_check_args'
 * block and launches it here. */
static fa_status launch_check(fa_context *ctx, fa_seq_check_args *args)
{
    const fa_gpu_runtime *rt = state_of(ctx)->rt;
    void *kernel_args[] = {args};
    const int whole = fa_check_needs_whole_pass(args);
    fa_status st = FA_OK;
    if (whole)
        st = launch(ctx, rt->seq_check, fa_seq_check_grid(), FA_CHECK_THREADS, kernel_args, 0,
                    "device check of the indices");
    if (st == FA_OK && args->block_table != NULL)
        st = launch_kernel(ctx, rt->seq_check_pages, fa_seq_check_pages_grid(args->batch), FA_CHECK_PAGE_THREADS,
                           kernel_args, 0, "device check of the block_table", whole);
    return st;
}

/* The device check of a pass with device indices (fa_has_device_indices); none without. */
static fa_status check_indices(fa_context *ctx, const fa_problem *p, int call, const int *seq_ok)
{
    fa_seq_check_args args;
    if (!fa_has_device_indices(p))
        return FA_OK;
    args = fa_make_check_args(p, call, (int *)seq_ok, state_of(ctx)->status_device);
    return launch_check(ctx, &args);
}

/* The forward kernel (after another kernel of the call when `follows`), then the split-KV
 * combine when the keys were split. */
static fa_status launch_fwd(fa_context *ctx, const fa_selection *sel, const fa_problem *p,
                            fa_fwd_args *args, int follows)
{
    const fa_kernel_config *cfg = sel->config;
    gpu_state *state = state_of(ctx);
    fa_tma_maps maps;
    void *kernel_args[] = {args, &maps}; /* the maps: the warpgroup kernels' second parameter */
    fa_status st;
    if (cfg->warpgroup) {
        int err;
        args->out_by_tma = sel->num_splits <= 1 && fa_tma_operand_ok(p->out, &p->out_stride, p->varlen);
        err = state->rt->encode_maps(args, NULL, p->dtype == FA_DTYPE_BF16,
                                         p->varlen ? p->total_q : p->seqlen_q, p->varlen ? p->total_k : p->seqlen_k,
                                         cfg->tile_m, cfg->tile_n, &maps);
        if (err != 0)
            return runtime_failed(ctx, FA_ERR_DEVICE_RUNTIME, err, "encoding the forward's TMA tensor maps");
    }
    st = launch_kernel(ctx, cfg->kernels[0], fa_fwd_grid(p, sel), (unsigned)cfg->threads, kernel_args,
                       cfg->smem_bytes, "forward kernel", follows);
    if (st != FA_OK || sel->num_splits <= 1)
        return st;
    fa_combine_args combine = fa_make_split_combine_args(p, args);
    combine.verdict_late = fa_split_verdict_late(args, cfg);
    void *combine_args[] = {&combine};
    return launch_next(ctx, state->rt->combine, fa_combine_grid(&combine), FA_COMBINE_THREADS, combine_args, 0,
                  "split-KV combine");
}

/* Preprocess (FA_PREP_ROWS rows per block), then dK/dV over key tiles, then dQ: the
 * conversion of what the dK/dV pass's atomics summed, or its own pass over query tiles.
 * All in stream order. The warpgroup dK/dV kernel also takes the tensor maps (a varlen
 * call's over the packed rows, as the forward's). */
static fa_status launch_bwd(fa_context *ctx, const fa_selection *sel, const fa_problem *p,
                            fa_bwd_args *args)
{
    const fa_kernel_config *cfg = sel->config;
    gpu_state *state = state_of(ctx);
    fa_tma_maps maps;
    void *kernel_args[] = {args};
    void *dkdv_args[] = {args, &maps};
    fa_status st = launch(ctx, state->rt->bwd_preprocess, fa_bwd_prep_grid(p), FA_PREP_THREADS, kernel_args, 0,
                          "backward preprocess");
    if (st == FA_OK && cfg->warpgroup) {
        int err = state->rt->encode_maps(&args->fwd, args, p->dtype == FA_DTYPE_BF16,
                                         p->varlen ? p->total_q : p->seqlen_q, p->varlen ? p->total_k : p->seqlen_k,
                                         cfg->tile_m, cfg->tile_n, &maps);
        if (err != 0)
            return runtime_failed(ctx, FA_ERR_DEVICE_RUNTIME, err, "encoding the backward's TMA tensor maps");
    }
    if (st == FA_OK)
        st = launch(ctx, cfg->kernels[0], fa_bwd_dkdv_grid(p, cfg), (unsigned)cfg->threads,
                    cfg->warpgroup ? dkdv_args : kernel_args, cfg->smem_bytes, "backward dK/dV kernel");
    if (st == FA_OK && args->dq_accum)
        st = launch(ctx, state->rt->bwd_convert_dq, fa_bwd_prep_grid(p), FA_PREP_THREADS, kernel_args, 0,
                    "backward dQ conversion");
    else if (st == FA_OK)
        st = launch(ctx, cfg->kernels[1], fa_bwd_dq_grid(p, cfg), (unsigned)cfg->threads, kernel_args,
                    cfg->smem_bytes, "backward dQ kernel");
    return st;
}

/* The forward walk's ticket counter (fa_walk_tickets_at) zeroed in the stream, ahead of
 * the call's kernels: its blocks count on it starting at 0. */
static fa_status zero_walk_tickets(fa_context *ctx, unsigned *tickets)
{
    if (tickets == NULL)
        return FA_OK;
    return runtime_status(ctx, state_of(ctx)->rt->zero(tickets, sizeof *tickets, ctx->stream),
                          "zeroing the forward walk's tickets");
}

/* One pass: its checks, the device, its workspace, its launches. */
static fa_status run_pass(fa_context *ctx, fa_pass pass, const fa_problem *p, const fa_selection *sel,
                          void *workspace)
{
    const char *backend = state_of(ctx)->rt->name;
    void *owned;
    fa_status st;
    if (pass == FA_PASS_BWD) {
        st = fa_gpu_check_bwd(ctx, p, sel, backend);
        st = begin_pass(ctx, st, fa_bwd_workspace_total(p, sel->config), &workspace, &owned,
                        "backward workspace");
    } else {
        st = fa_gpu_check_fwd(ctx, p, sel, backend);
        st = begin_pass(ctx, st, fa_fwd_workspace_total(p, sel), &workspace, &owned,
                        "forward workspace");
    }
    if (st == FA_OK && pass == FA_PASS_BWD) {
        fa_bwd_args args = fa_make_bwd_args(p, sel->config, workspace);
        st = check_indices(ctx, p, FA_CHECK_CALL_BWD, args.fwd.seq_ok);
        if (st == FA_OK)
            st = launch_bwd(ctx, sel, p, &args);
    } else if (st == FA_OK) {
        fa_fwd_args args = fa_make_args(p, sel->num_splits, workspace);
        args.walk_tickets = fa_walk_tickets_at(p, sel, workspace);
        /* Fixed-length sequences: seqused_k and the block table are the only device
         * indices, and the kernels clamp them, so the decode family checks them itself
         * and the other kernels let the check run beside them. */
        args.checks_itself = fa_fwd_checks_itself(p, sel->config);
        args.checked_late = !args.checks_itself && fa_has_device_indices(p) && !p->varlen;
        args.check_call = FA_CHECK_CALL_FWD;
        args.status = state_of(ctx)->status_device;
        st = zero_walk_tickets(ctx, args.walk_tickets);
        if (st == FA_OK && !args.checks_itself)
            st = check_indices(ctx, p, FA_CHECK_CALL_FWD, args.seq_ok);
        if (st == FA_OK)
            st = launch_fwd(ctx, sel, p, &args, fa_has_device_indices(p) && !args.checks_itself);
    }
    release_workspace(ctx, owned);
    return st;
}

/* api.c has checked workspace_bytes against gpu_fwd_workspace / gpu_bwd_workspace. */
static fa_status gpu_fwd(fa_context *ctx, const fa_problem *p, const fa_selection *sel,
                         void *workspace, size_t workspace_bytes)
{
    (void)workspace_bytes;
    return run_pass(ctx, FA_PASS_FWD, p, sel, workspace);
}

static fa_status gpu_bwd(fa_context *ctx, const fa_problem *p, const fa_selection *sel,
                         void *workspace, size_t workspace_bytes)
{
    (void)workspace_bytes;
    return run_pass(ctx, FA_PASS_BWD, p, sel, workspace);
}

/* fa_fwd_kvcache: the append (cache rows, rotated q, seqused in the workspace), then in
 * stream order the forward over the cache, on the problem fa_kvcache_attention derives.
 * No host synchronisation: the cache lengths are read on the device only. */
static fa_status gpu_fwd_kvcache(fa_context *ctx, const fa_kvcache_problem *p, const fa_selection *sel,
                                 void *workspace, size_t workspace_bytes)
{
    gpu_state *state = state_of(ctx);
    void *owned;
    fa_status st = fa_gpu_check_kvcache(ctx, p, sel, state->rt->name);
    (void)workspace_bytes;
    st = begin_pass(ctx, st, fa_kvcache_workspace_bytes(p, sel), &workspace, &owned, "kvcache workspace");
    if (st == FA_OK) {
        int *seq_ok = fa_kvcache_seq_ok(p, sel, workspace);
        fa_seq_check_args check = fa_make_kvcache_check_args(p, seq_ok, state->status_device);
        fa_append_args append = fa_make_append_args(p, workspace, seq_ok);
        void *append_args[] = {&append};
        unsigned *tickets = fa_kvcache_walk_tickets(p, sel, workspace);
        st = zero_walk_tickets(ctx, tickets);
        if (st == FA_OK)
            st = launch_check(ctx, &check);
        if (st == FA_OK)
            st = launch_next(ctx, state->rt->kv_append, fa_append_grid(p), FA_APPEND_THREADS, append_args, 0,
                             "kvcache append");
        if (st == FA_OK && p->attn.total_q > 0) {
            fa_problem attn = fa_kvcache_attention(p, &append);
            fa_fwd_args args = fa_make_args(&attn, sel->num_splits, fa_kvcache_split_workspace(p, workspace));
            args.walk_tickets = tickets;
            st = launch_fwd(ctx, sel, &attn, &args, 1);
        }
    }
    release_workspace(ctx, owned);
    return st;
}

static fa_status gpu_fwd_kvcache_workspace(fa_context *ctx, const fa_kvcache_problem *p,
                                           const fa_selection *sel, size_t *bytes)
{
    return fa_gpu_kvcache_workspace(ctx, p, sel, state_of(ctx)->rt->name, bytes);
}

/* The stream is only recorded: every runtime call of a context takes it. */
static fa_status gpu_set_stream(fa_context *ctx, void *stream)
{
    ctx->stream = stream;
    return FA_OK;
}

static fa_status gpu_fwd_workspace(fa_context *ctx, const fa_problem *p, const fa_selection *sel,
                                   size_t *bytes)
{
    return fa_gpu_fwd_workspace(ctx, p, sel, state_of(ctx)->rt->name, bytes);
}

static fa_status gpu_bwd_workspace(fa_context *ctx, const fa_problem *p, const fa_selection *sel,
                                   size_t *bytes)
{
    return fa_gpu_bwd_workspace(ctx, p, sel, state_of(ctx)->rt->name, bytes);
}

/* fa_combine: its GPU checks, the device, one launch (no workspace). */
static fa_status gpu_combine(fa_context *ctx, const fa_combine_problem *p)
{
    const fa_gpu_runtime *rt = state_of(ctx)->rt;
    fa_combine_args args;
    void *kernel_args[] = {&args};
    fa_status st = fa_gpu_combine_args(ctx, p, rt->name, &args);
    if (st == FA_OK)
        st = runtime_status(ctx, rt->set_device(ctx->device), "selecting the device");
    if (st == FA_OK)
        st = launch(ctx, rt->combine, fa_combine_grid(&args), FA_COMBINE_THREADS, kernel_args, 0,
                    "combine kernel");
    return st;
}

const fa_backend_ops fa_gpu_ops = {
    gpu_init, gpu_destroy, gpu_set_stream, gpu_device_error,
    gpu_fwd_workspace, gpu_fwd, NULL, gpu_bwd_workspace, gpu_bwd, gpu_combine,
    gpu_fwd_kvcache_workspace, gpu_fwd_kvcache,
};
