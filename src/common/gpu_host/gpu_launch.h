/*
 * gpu_launch.h - the launch sequences of the GPU forward and backward, written once for
 * both runtime mappings (src/cuda/cuda_backend.cu, src/hip/hip_backend.cpp). Each includes
 * it once, after its kernel tables (fa_fwd_kernels[FA_KERNEL_COUNT],
 * fa_bwd_kernels[FA_BWD_KERNEL_COUNT][2], FA_GPU_BACKEND_NAME) and this runtime
 * vocabulary:
 *
 *   fa_status fa_rt_set_device(fa_context *ctx);
 *   fa_status fa_rt_alloc(fa_context *ctx, size_t bytes, void **ptr, const char *what);
 *       device memory usable in stream order; FA_ERR_OUT_OF_MEMORY with the reason
 *   void fa_rt_release(fa_context *ctx, void *ptr);
 *       frees it once the work queued on the context's stream no longer needs it
 *   fa_status fa_rt_launch(fa_context *ctx, const void *kernel, fa_grid grid,
 *                          unsigned threads, void **args, int smem_bytes, int *prepared,
 *                          const char *what);
 *       smem_bytes: the kernel's shared memory; *prepared (0 at first) lets a runtime
 *       that sizes it at launch raise the kernel's limit once
 *
 * No attention logic lives here either: which kernels run, in what order, on which grid.
 */
#ifndef FA_GPU_LAUNCH_H
#define FA_GPU_LAUNCH_H

/* Per context: which kernels had their shared-memory limit prepared. */
typedef struct fa_gpu_state {
    int fwd_prepared[FA_KERNEL_COUNT];
    int bwd_prepared[FA_BWD_KERNEL_COUNT][2];
} fa_gpu_state;

static fa_status fa_gpu_state_create(fa_context *ctx, char *why, size_t why_len)
{
    ctx->state = calloc(1, sizeof(fa_gpu_state));
    if (ctx->state != NULL)
        return FA_OK;
    snprintf(why, why_len, "out of host memory");
    return FA_ERR_OUT_OF_MEMORY;
}

static void fa_gpu_state_destroy(fa_context *ctx)
{
    free(ctx->state);
    ctx->state = NULL;
}

/* The caller's workspace, or one allocated for the call (*owned, to release after). */
static fa_status fa_gpu_workspace(fa_context *ctx, void **workspace, size_t need, void **owned,
                                  const char *what)
{
    *owned = NULL;
    if (*workspace != NULL || need == 0)
        return FA_OK;
    fa_status st = fa_rt_alloc(ctx, need, owned, what);
    *workspace = *owned;
    return st;
}

/* A grid without blocks (an empty side of an empty problem) launches nothing: CUDA and
 * HIP refuse a zero grid dimension. */
static fa_status fa_gpu_launch(fa_context *ctx, const void *kernel, fa_grid grid, unsigned threads,
                               void **args, int smem_bytes, int *prepared, const char *what)
{
    if (grid.x == 0 || grid.y == 0 || grid.z == 0)
        return FA_OK;
    return fa_rt_launch(ctx, kernel, grid, threads, args, smem_bytes, prepared, what);
}

static fa_status fa_gpu_fwd_launch(fa_context *ctx, const fa_selection *sel, const fa_problem *p,
                                   fa_fwd_args *args)
{
    const fa_kernel_config *cfg = sel->config;
    fa_gpu_state *state = (fa_gpu_state *)ctx->state;
    void *kernel_args[] = {args};
    fa_status st = fa_gpu_launch(ctx, fa_fwd_kernels[cfg->kernel_id], fa_fwd_grid(p, sel),
                                (unsigned)cfg->threads, kernel_args, cfg->smem_bytes,
                                &state->fwd_prepared[cfg->kernel_id], "launching the forward kernel");
    if (st != FA_OK || sel->num_splits <= 1)
        return st;
    int out_bf16 = p->dtype == FA_DTYPE_BF16, ready = 1;
    void *combine_args[] = {args, &out_bf16};
    return fa_gpu_launch(ctx, (const void *)fa_fwd_combine, fa_combine_grid(p), FA_COMBINE_THREADS,
                        combine_args, 0, &ready, "launching the split-KV combine");
}

static fa_status fa_gpu_run_fwd(fa_context *ctx, const fa_problem *p, const fa_selection *sel,
                                void *workspace, size_t workspace_bytes)
{
    fa_status st = fa_gpu_check_fwd(ctx, p, sel, FA_KERNEL_COUNT, FA_GPU_BACKEND_NAME);
    void *owned = NULL;
    (void)workspace_bytes; /* api.c has checked it against fa_gpu_fwd_workspace */
    if (st == FA_OK)
        st = fa_rt_set_device(ctx);
    if (st == FA_OK)
        st = fa_gpu_workspace(ctx, &workspace, fa_split_bytes(p, sel->num_splits), &owned,
                              "split-KV workspace");
    if (st == FA_OK) {
        fa_fwd_args args = fa_make_args(p, sel->num_splits, workspace);
        st = fa_gpu_fwd_launch(ctx, sel, p, &args);
    }
    if (owned)
        fa_rt_release(ctx, owned);
    return st;
}

/* Preprocess (FA_PREP_ROWS rows per block), then dK/dV over key tiles, then dQ: the
 * conversion of what the dK/dV pass's atomics summed, or its own pass over query tiles.
 * All in stream order. */
static fa_status fa_gpu_bwd_launch(fa_context *ctx, const fa_selection *sel, const fa_problem *p,
                                   fa_bwd_args *args)
{
    const fa_kernel_config *cfg = sel->config;
    fa_gpu_state *state = (fa_gpu_state *)ctx->state;
    const void *const *pair = fa_bwd_kernels[cfg->kernel_id];
    int *prepared = state->bwd_prepared[cfg->kernel_id], ready = 1;
    void *kernel_args[] = {args};
    const char *what = "launching the backward kernels";
    fa_status st = fa_gpu_launch(ctx, (const void *)fa_bwd_preprocess, fa_bwd_prep_grid(p), FA_PREP_ROWS,
                                kernel_args, 0, &ready, what);
    if (st == FA_OK)
        st = fa_gpu_launch(ctx, pair[0], fa_bwd_dkdv_grid(p, cfg), (unsigned)cfg->threads, kernel_args,
                          cfg->smem_bytes, &prepared[0], what);
    if (st == FA_OK && args->dq_accum)
        st = fa_gpu_launch(ctx, (const void *)fa_bwd_convert_dq, fa_bwd_prep_grid(p), FA_PREP_ROWS,
                          kernel_args, 0, &ready, what);
    else if (st == FA_OK)
        st = fa_gpu_launch(ctx, pair[1], fa_bwd_dq_grid(p, cfg), (unsigned)cfg->threads, kernel_args,
                          cfg->smem_bytes, &prepared[1], what);
    return st;
}

static fa_status fa_gpu_run_bwd(fa_context *ctx, const fa_problem *p, const fa_selection *sel,
                                void *workspace, size_t workspace_bytes)
{
    fa_status st = fa_gpu_check_bwd(ctx, p, sel, FA_BWD_KERNEL_COUNT, FA_GPU_BACKEND_NAME);
    void *owned = NULL;
    (void)workspace_bytes; /* api.c has checked it against fa_gpu_bwd_workspace */
    if (st == FA_OK)
        st = fa_rt_set_device(ctx);
    if (st == FA_OK)
        st = fa_gpu_workspace(ctx, &workspace, fa_bwd_workspace_bytes(p, sel->config), &owned,
                              "backward workspace");
    if (st == FA_OK) {
        fa_bwd_args args = fa_make_bwd_args(p, sel->config, workspace);
        st = fa_gpu_bwd_launch(ctx, sel, p, &args);
    }
    if (owned)
        fa_rt_release(ctx, owned);
    return st;
}

#endif /* FA_GPU_LAUNCH_H */
