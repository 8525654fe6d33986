/*
 * gpu_args.c - the host helpers of gpu_args.h, shared by the CUDA and HIP backends.
 */
#include "gpu_host/gpu_args.h"
#include "gpu_kernels/smem_bytes.h"

#include <stdio.h>
#include <string.h>

fa_operand_layout fa_layout_of(fa_strides st)
{
    fa_operand_layout at;
    at.batch = st.batch;
    at.row = st.row;
    at.head = st.head;
    return at;
}

size_t fa_align256(size_t bytes) { return (bytes + 255) & ~(size_t)255; }

size_t fa_split_bytes(const fa_problem *p, int splits)
{
    size_t rows;
    if (splits <= 1)
        return 0;
    rows = (size_t)splits * (size_t)p->total_q * (size_t)p->heads;
    return fa_align256(rows * (size_t)p->head_dim * sizeof(float)) + fa_align256(rows * sizeof(float));
}

int fa_rows_aligned(const void *ptr, fa_strides st)
{
    return ((uintptr_t)ptr % 16) == 0 && st.batch % 8 == 0 && st.row % 8 == 0 && st.head % 8 == 0;
}

int fa_has_device_indices(const fa_problem *p)
{
    return p->varlen || p->seqused_k != NULL || p->block_table != NULL;
}

size_t fa_seq_ok_bytes(const fa_problem *p)
{
    return fa_has_device_indices(p) ? fa_align256((size_t)p->batch * sizeof(int)) : 0;
}

size_t fa_walk_tickets_bytes(const fa_selection *sel) { return sel->walk_draws ? 256 : 0; }

unsigned *fa_walk_tickets_at(const fa_problem *p, const fa_selection *sel, void *workspace)
{
    return sel->walk_draws && workspace != NULL
               ? (unsigned *)((char *)workspace + fa_split_bytes(p, sel->num_splits) + fa_seq_ok_bytes(p))
               : NULL;
}

size_t fa_fwd_workspace_total(const fa_problem *p, const fa_selection *sel)
{
    return fa_split_bytes(p, sel->num_splits) + fa_seq_ok_bytes(p) + fa_walk_tickets_bytes(sel);
}

size_t fa_bwd_workspace_total(const fa_problem *p, const fa_kernel_config *cfg)
{
    return fa_bwd_workspace_bytes(p, cfg) + fa_seq_ok_bytes(p);
}

/* seq_ok at `offset` into the workspace, or NULL for a call without device indices (or
 * without a workspace yet). */
static int *fa_seq_ok_at(const fa_problem *p, void *workspace, size_t offset)
{
    return fa_has_device_indices(p) && workspace != NULL ? (int *)((char *)workspace + offset) : NULL;
}

fa_seq_check_args fa_make_check_args(const fa_problem *p, int call, int *seq_ok, fa_device_status *status)
{
    fa_seq_check_args a;
    memset(&a, 0, sizeof a);
    a.batch = p->batch;
    a.call = call;
    if (p->varlen) {
        a.cu_seqlens_q = p->cu_seqlens_q;
        a.cu_seqlens_k = p->cu_seqlens_k;
        a.rows_q = p->total_q;
        a.rows_k = p->block_table ? -1 : p->total_k; /* paged: cu_seqlens_k gives lengths only */
        a.max_seqlen_q = (int)p->seqlen_q;
        a.max_seqlen_k = (int)p->seqlen_k;
    }
    a.seqlen_k = (int)p->seqlen_k;
    a.seqused_k = p->seqused_k;
    a.block_table = p->block_table;
    a.block_table_stride = p->block_table_stride;
    a.block_table_width = p->block_table_width;
    a.page_size = p->page_size;
    a.num_pages = p->num_pages;
    a.seq_ok = seq_ok;
    a.status = status;
    return a;
}

fa_fwd_args fa_make_args(const fa_problem *p, int splits, void *workspace)
{
    const float log2e = 1.4426950408889634f;
    fa_fwd_args a;
    memset(&a, 0, sizeof a);
    a.q = p->q; a.k = p->k; a.v = p->v; a.out = p->out; a.lse = p->lse;
    a.q_layout = fa_layout_of(p->q_stride);
    a.k_layout = fa_layout_of(p->k_stride);
    a.v_layout = fa_layout_of(p->v_stride);
    a.out_layout = fa_layout_of(p->out_stride);
    a.lse_layout = fa_layout_of(p->lse_stride);
    a.cu_seqlens_q = p->varlen ? p->cu_seqlens_q : NULL;
    a.cu_seqlens_k = p->varlen ? p->cu_seqlens_k : NULL;
    a.seqused_k = p->seqused_k;
    a.alibi_slopes = p->alibi_slopes;
    a.alibi_batch = p->alibi_batch_stride;
    a.batch = p->batch; a.heads = p->heads; a.heads_k = p->heads_k; a.head_dim = p->head_dim;
    a.seqlen_q = (int)p->seqlen_q; a.seqlen_k = (int)p->seqlen_k;
    a.window_left = p->window.left; a.window_right = p->window.right;
    a.scale_log2 = p->softmax_scale * log2e;
    if (p->softcap > 0.f) {
        a.softcap_inv_scale = p->softmax_scale / p->softcap;
        a.softcap_log2 = p->softcap * log2e;
    }
    a.num_splits = splits;
    a.total_q = p->total_q;
    a.block_table = p->block_table;
    a.block_table_stride = p->block_table_stride;
    /* A cache of no rows read through cache_batch_idx has page size 0 (seq_check.h): no
     * key to divide, and no divisor of 0. */
    if (p->block_table && p->page_size > 0)
        a.page_size = fa_divisor_of(p->page_size);
    a.num_pages = p->num_pages < INT32_MAX ? (int)p->num_pages : INT32_MAX;
    /* fa_fwd_limits sizes the combine's grid from args without a workspace: no partials
     * then (an offset from NULL is undefined behaviour). */
    if (splits > 1 && workspace != NULL) {
        size_t rows = (size_t)splits * (size_t)p->total_q * (size_t)p->heads;
        a.partial_out = (float *)workspace;
        a.partial_lse = (float *)((char *)workspace + fa_align256(rows * (size_t)p->head_dim * sizeof(float)));
    }
    a.seq_ok = fa_seq_ok_at(p, workspace, fa_split_bytes(p, splits));
    return a;
}

int fa_bwd_rows_aligned(const fa_problem *p)
{
    return fa_rows_aligned(p->q, p->q_stride) && fa_rows_aligned(p->k, p->k_stride) &&
           fa_rows_aligned(p->v, p->v_stride) && fa_rows_aligned(p->out, p->out_stride) &&
           fa_rows_aligned(p->dout, p->dout_stride) && fa_rows_aligned(p->dq, p->dq_stride) &&
           fa_rows_aligned(p->dk, p->dk_stride) && fa_rows_aligned(p->dv, p->dv_stride);
}

/* One of the two fp32 [heads][total_q] arrays of the backward workspace. */
static size_t fa_bwd_rows_bytes(const fa_problem *p)
{
    return fa_align256((size_t)p->heads * (size_t)p->total_q * sizeof(float));
}

/* 1 when dQ is summed by the dK/dV kernel's atomics: the config has the phase and the
 * caller did not ask for determinism, or the config can order its adds. */
static int fa_bwd_uses_atomics(const fa_problem *p, const fa_kernel_config *cfg)
{
    return cfg->atomic_dq && (!p->deterministic || cfg->ordered_dq);
}

/* 1 when the atomics add each query tile's dQ in a fixed order (a deterministic call on
 * an ordered_dq config), counted in the order rows. */
static int fa_bwd_orders_dq(const fa_problem *p, const fa_kernel_config *cfg)
{
    return cfg->atomic_dq && cfg->ordered_dq && p->deterministic;
}

/* 1 when the dK/dV kernel sums dQᵀ into the accumulator (dq_accum.h's transposed order):
 * a warpgroup backward whose steps are not whole 64-row blocks (smem_bytes.h). */
static int fa_bwd_dq_transposed(const fa_kernel_config *cfg)
{
    return cfg->pass == FA_PASS_BWD && cfg->warpgroup && FA_BWS_DQ_TRANSPOSED(cfg->tile_m);
}

/* The fp32 dQ accumulator of the atomic path. */
static size_t fa_bwd_dq_accum_bytes(const fa_problem *p, const fa_kernel_config *cfg)
{
    if (!fa_bwd_uses_atomics(p, cfg))
        return 0;
    return fa_align256((size_t)p->heads * (size_t)p->total_q * (size_t)p->head_dim * sizeof(float));
}

/* The int32 [heads][total_q] order rows: at a query tile's first row, the last key
 * block whose dQ tile has been added there (attn_bwd_ws.h). */
static size_t fa_bwd_order_bytes(const fa_problem *p, const fa_kernel_config *cfg)
{
    return fa_bwd_orders_dq(p, cfg) ? fa_bwd_rows_bytes(p) : 0;
}

size_t fa_bwd_workspace_bytes(const fa_problem *p, const fa_kernel_config *cfg)
{
    return 2 * fa_bwd_rows_bytes(p) + fa_bwd_dq_accum_bytes(p, cfg) + fa_bwd_order_bytes(p, cfg);
}

fa_bwd_args fa_make_bwd_args(const fa_problem *p, const fa_kernel_config *cfg, void *workspace)
{
    fa_bwd_args a;
    memset(&a, 0, sizeof a);
    a.fwd = fa_make_args(p, 1, NULL);
    a.dout = p->dout;
    a.dq = p->dq; a.dk = p->dk; a.dv = p->dv;
    a.dout_layout = fa_layout_of(p->dout_stride);
    a.dq_layout = fa_layout_of(p->dq_stride);
    a.dk_layout = fa_layout_of(p->dk_stride);
    a.dv_layout = fa_layout_of(p->dv_stride);
    a.delta = (float *)workspace;
    a.lse_log2 = (float *)((char *)workspace + fa_bwd_rows_bytes(p));
    if (fa_bwd_uses_atomics(p, cfg)) {
        a.dq_accum = (float *)((char *)workspace + 2 * fa_bwd_rows_bytes(p));
        a.dq_transposed = fa_bwd_dq_transposed(cfg);
    }
    if (fa_bwd_orders_dq(p, cfg))
        a.dq_order = (int *)((char *)workspace + 2 * fa_bwd_rows_bytes(p) + fa_bwd_dq_accum_bytes(p, cfg));
    a.scale = p->softmax_scale;
    a.out_bf16 = p->dtype == FA_DTYPE_BF16;
    a.fwd.seq_ok = fa_seq_ok_at(p, workspace, fa_bwd_workspace_bytes(p, cfg));
    return a;
}

static fa_status fa_unaligned(fa_context *ctx, const char *backend)
{
    return fa_fail(ctx, FA_ERR_UNSUPPORTED,
                   "the %s backend needs 16-byte aligned rows: data pointers aligned to 16 bytes "
                   "and outer strides that are multiples of 8 elements", backend);
}

/* A config of a vendor this library was built without has no kernels to launch. (A
 * warpgroup backward config has one: its dK/dV kernel sums dQ.) */
static fa_status fa_check_kernel(fa_context *ctx, const fa_selection *sel, const char *backend)
{
    const fa_kernel_config *c = sel->config;
    if (c->kernels[0] == NULL || (c->pass == FA_PASS_BWD && !c->warpgroup && c->kernels[1] == NULL))
        return fa_fail(ctx, FA_ERR_UNSUPPORTED, "config %s has no %s kernel", c->name, backend);
    return FA_OK;
}

/* The largest fp32 element count of a workspace buffer: its bytes, rounded up and added
 * to the other buffers', stay within size_t and within the kernels' int64 offsets. */
static long long fa_max_workspace_floats(void)
{
    const uint64_t bytes = (uint64_t)SIZE_MAX < (uint64_t)INT64_MAX ? (uint64_t)SIZE_MAX : (uint64_t)INT64_MAX;
    return (long long)(bytes / 16);
}

/* a * b for a, b >= 0; -1 when it passes limit or when either is -1 (chains stay -1). */
static long long fa_product_within(long long a, long long b, long long limit)
{
    if (a < 0 || b < 0 || (b != 0 && a > limit / b))
        return -1;
    return a * b;
}

/* Whether the runtime takes a grid: x below 2^31 blocks, y and z at most FA_GRID_YZ_MAX
 * (launch_grid.h's fold passes that only beyond FA_GRID_YZ_MAX^2 pairs) and, on HIP,
 * x * threads below 2^32: its dispatch packet counts the grid in work-items, 32 bits per
 * dimension. */
static fa_status fa_check_grid(fa_context *ctx, fa_grid g, int threads, const char *kernel,
                               const char *backend)
{
    const int hip = ctx->backend == FA_BACKEND_HIP;
    if (g.x <= INT32_MAX && g.y <= FA_GRID_YZ_MAX && g.z <= FA_GRID_YZ_MAX &&
        (!hip || (uint64_t)g.x * (uint64_t)threads <= UINT32_MAX))
        return FA_OK;
    return fa_fail(ctx, FA_ERR_UNSUPPORTED,
                   "the %s backend cannot launch the %s kernel for this shape: %u x %u x %u blocks of "
                   "%d threads pass the launch limits (x below 2^31, y and z at most %d%s)",
                   backend, kernel, g.x, g.y, g.z, threads, FA_GRID_YZ_MAX,
                   hip ? ", x times threads below 2^32" : "");
}

/* The forward's limits past alignment and kernel: the split-KV partials' sizes and
 * offsets within 64 bits, and grids the runtime takes. */
static fa_status fa_fwd_limits(fa_context *ctx, const fa_problem *p, const fa_selection *sel,
                               const char *backend)
{
    const long long cap = fa_max_workspace_floats();
    fa_status st;
    /* The decode family numbers a sequence's packed rows G * s_q in int (attn_fwd.h). */
    if (sel->config->pack_gqa && (long long)(p->heads / p->heads_k) * p->seqlen_q > INT32_MAX)
        return fa_fail(ctx, FA_ERR_UNSUPPORTED,
                       "the %s backend's decode kernels number %d query heads x %lld positions per KV "
                       "head in 32 bits; this call has more",
                       backend, p->heads / p->heads_k, (long long)p->seqlen_q);
    if (sel->num_splits > 1) {
        long long rows = fa_product_within(fa_product_within(sel->num_splits, p->total_q, cap), p->heads, cap);
        if (fa_product_within(rows, p->head_dim, cap) < 0)
            return fa_fail(ctx, FA_ERR_UNSUPPORTED,
                           "the %s backend's split-KV partials (%d splits x %lld rows x %d heads x %d "
                           "dims of fp32) pass 64-bit sizes",
                           backend, sel->num_splits, (long long)p->total_q, p->heads, p->head_dim);
    }
    if (sel->num_splits > FA_COMBINE_MAX_PARTIALS)
        return fa_fail(ctx, FA_ERR_UNSUPPORTED,
                       "the %s backend's combine merges at most %d splits, not %d", backend,
                       FA_COMBINE_MAX_PARTIALS, sel->num_splits);
    st = fa_check_grid(ctx, fa_fwd_grid(p, sel), sel->config->threads, "forward", backend);
    if (st == FA_OK && p->block_table != NULL && !fa_fwd_checks_itself(p, sel->config))
        st = fa_check_grid(ctx, fa_seq_check_pages_grid(p->batch), FA_CHECK_PAGE_THREADS, "block_table check", backend);
    if (st == FA_OK && sel->num_splits > 1) {
        const fa_fwd_args fwd = fa_make_args(p, sel->num_splits, NULL);
        const fa_combine_args combine = fa_make_split_combine_args(p, &fwd);
        st = fa_check_grid(ctx, fa_combine_grid(&combine), FA_COMBINE_THREADS, "split-KV combine", backend);
    }
    return st;
}

/* The backward config's tile_m is its streamed rows per step (attn_bwd.h): query rows
 * past the dK/dV kernel's resident keys, key rows past the dQ kernel's resident queries. */
static int fa_bwd_streamed_rows(const fa_kernel_config *cfg) { return cfg->tile_m; }

/* The backward's: its workspace within 64 bits, the dK/dV kernel's step count within its
 * 32-bit counter, and grids the runtime takes. */
static fa_status fa_bwd_limits(fa_context *ctx, const fa_problem *p, const fa_selection *sel,
                               const char *backend)
{
    const fa_kernel_config *cfg = sel->config;
    const long long cap = fa_max_workspace_floats();
    const long long rows = fa_product_within(p->heads, p->total_q, cap);
    const long long group = p->heads_k > 0 ? p->heads / p->heads_k : 0;
    const int streamed = fa_bwd_streamed_rows(cfg);
    const long long query_tiles = (p->seqlen_q + streamed - 1) / streamed;
    const long long steps = group * query_tiles;
    const int atomics = fa_bwd_uses_atomics(p, cfg);
    fa_status st;
    if (rows < 0 || (atomics && fa_product_within(rows, p->head_dim, cap) < 0))
        return fa_fail(ctx, FA_ERR_UNSUPPORTED,
                       "the %s backend's backward workspace (%d heads x %lld rows%s of fp32) passes "
                       "64-bit sizes",
                       backend, p->heads, (long long)p->total_q, atomics ? " x head_dim" : "");
    /* A dK/dV block walks every query tile of every query head of its kv head's group,
     * its pipeline up to stages - 1 steps ahead, counted in int. */
    if (steps > (long long)INT32_MAX - cfg->stages)
        return fa_fail(ctx, FA_ERR_UNSUPPORTED,
                       "the %s backward walks %lld query heads per kv head x %lld query tiles of %d "
                       "rows = %lld steps per key tile, more than its 32-bit step counter holds",
                       backend, group, query_tiles, streamed, steps);
    st = fa_check_grid(ctx, fa_bwd_prep_grid(p), FA_PREP_THREADS, "backward preprocess", backend);
    if (st == FA_OK)
        st = fa_check_grid(ctx, fa_bwd_dkdv_grid(p, cfg), cfg->threads, "backward dK/dV", backend);
    if (st == FA_OK && !atomics)
        st = fa_check_grid(ctx, fa_bwd_dq_grid(p, cfg), cfg->threads, "backward dQ", backend);
    return st;
}

fa_status fa_gpu_check_paging(fa_context *ctx, const fa_problem *p, const fa_selection *sel,
                              const char *backend)
{
    if (p->block_table == NULL || (sel->config && sel->config->pack_gqa))
        return FA_OK;
    return fa_fail(ctx, FA_ERR_UNSUPPORTED,
                   "the %s backend reads paged K/V (block_table; fa_fwd_kvcache's cache_batch_idx "
                   "reads the cache the same way) only with its decode kernels, and none fits %s",
                   backend, ctx->row.name);
}

fa_status fa_gpu_check_fwd(fa_context *ctx, const fa_problem *p, const fa_selection *sel,
                           const char *backend)
{
    fa_status st = fa_gpu_check_paging(ctx, p, sel, backend);
    if (st != FA_OK)
        return st;
    if (!fa_rows_aligned(p->q, p->q_stride) || !fa_rows_aligned(p->k, p->k_stride) ||
        !fa_rows_aligned(p->v, p->v_stride) || !fa_rows_aligned(p->out, p->out_stride))
        return fa_unaligned(ctx, backend);
    st = fa_check_kernel(ctx, sel, backend);
    return st == FA_OK ? fa_fwd_limits(ctx, p, sel, backend) : st;
}

fa_status fa_gpu_check_bwd(fa_context *ctx, const fa_problem *p, const fa_selection *sel,
                           const char *backend)
{
    fa_status st;
    if (!fa_bwd_rows_aligned(p))
        return fa_unaligned(ctx, backend);
    st = fa_check_kernel(ctx, sel, backend);
    return st == FA_OK ? fa_bwd_limits(ctx, p, sel, backend) : st;
}

static const char *fa_matrix_unit_name(fa_matrix_unit unit)
{
    switch (unit) {
    case FA_MATRIX_MMA_SYNC: return "mma.sync";
    case FA_MATRIX_WGMMA: return "wgmma";
    case FA_MATRIX_MFMA: return "mfma";
    case FA_MATRIX_WMMA: return "wmma";
    default: return "none";
    }
}

void fa_gpu_set_matrix_unit(fa_context *ctx, fa_matrix_unit unit)
{
    ctx->row.matrix_unit = unit;
    snprintf(ctx->info.matrix_unit, sizeof ctx->info.matrix_unit, "%s", fa_matrix_unit_name(unit));
}

void fa_gpu_describe_device(fa_context *ctx, fa_backend backend, const char *device_name,
                            const fa_arch_row *reported)
{
    const fa_arch_row *row = fa_arch_find(reported->name);
    fa_device_info *info = &ctx->info;
    ctx->row = *reported;
    if (row) {
        ctx->row = *row;
        ctx->row.sm_count = reported->sm_count;
        if (reported->smem_per_block < ctx->row.smem_per_block)
            ctx->row.smem_per_block = reported->smem_per_block;
    }
    memset(info, 0, sizeof *info);
    info->backend = backend;
    snprintf(info->device_name, sizeof info->device_name, "%s", device_name);
    snprintf(info->arch, sizeof info->arch, "%s", ctx->row.name);
    info->row_from_table = row != NULL;
    info->wave_size = ctx->row.wave_size;
    info->smem_per_block = ctx->row.smem_per_block;
    info->smem_per_sm = ctx->row.smem_per_sm;
    info->regs_per_sm = ctx->row.regs_per_sm;
    info->max_threads_per_block = ctx->row.max_threads_per_block;
    info->sm_count = ctx->row.sm_count;
    snprintf(info->matrix_unit, sizeof info->matrix_unit, "%s", fa_matrix_unit_name(ctx->row.matrix_unit));
}

static unsigned fa_blocks(int64_t rows, int tile) { return (unsigned)((rows + tile - 1) / tile); }

/* x blocks by the inner x outer pairs over y and z (launch_grid.h). */
static fa_grid fa_pair_grid(unsigned x, long long inner, long long outer)
{
    fa_grid g;
    g.x = x;
    fa_grid_fold(inner, outer, &g.y, &g.z);
    return g;
}

/* The decode family's blocks are packed tiles of a KV head's G * s_q rows. */
fa_grid fa_fwd_grid(const fa_problem *p, const fa_selection *sel)
{
    const fa_kernel_config *c = sel->config;
    if (c->warpgroup && FA_WS_PERSISTENT(c->head_dim)) { /* attn_fwd_ws.h's walk: blocks along x */
        const long long tiles = (long long)fa_blocks(p->seqlen_q, c->tile_m) * p->heads * p->batch * sel->num_splits;
        const long long blocks = sel->persistent_blocks > 0 && sel->persistent_blocks < tiles ? sel->persistent_blocks
                                                                                                : tiles;
        return fa_pair_grid((unsigned)blocks, 1, 1);
    }
    if (c->pack_gqa)
        return fa_pair_grid(fa_blocks(p->seqlen_q * (p->heads / p->heads_k), c->tile_m), p->heads_k,
                            (long long)p->batch * sel->num_splits);
    return fa_pair_grid(fa_blocks(p->seqlen_q, c->tile_m), p->heads, (long long)p->batch * sel->num_splits);
}

fa_grid fa_combine_grid(const fa_combine_args *a)
{
    const long long groups = FA_COMBINE_THREADS >> a->lanes_log2;
    const long long blocks = (a->rows * a->heads + groups - 1) / groups;
    return fa_pair_grid(blocks <= INT32_MAX ? (unsigned)blocks : UINT32_MAX, 1, a->batch);
}

fa_grid fa_seq_check_grid(void)
{
    fa_grid g = {1, 1, 1};
    return g;
}

fa_grid fa_seq_check_pages_grid(int batch)
{
    fa_grid g = {(unsigned)batch, 1, 1};
    return g;
}

fa_grid fa_bwd_prep_grid(const fa_problem *p)
{
    return fa_pair_grid(fa_blocks(p->seqlen_q, FA_PREP_ROWS), p->heads, p->batch);
}

/* The backward config's tile_n is its resident rows per block (attn_bwd.h): key tiles in
 * the dK/dV kernel, query tiles in the dQ kernel. */
static int fa_bwd_resident_rows(const fa_kernel_config *cfg) { return cfg->tile_n; }

fa_grid fa_bwd_dkdv_grid(const fa_problem *p, const fa_kernel_config *cfg)
{
    return fa_pair_grid(fa_blocks(p->seqlen_k, fa_bwd_resident_rows(cfg)), p->heads_k, p->batch);
}

fa_grid fa_bwd_dq_grid(const fa_problem *p, const fa_kernel_config *cfg)
{
    return fa_pair_grid(fa_blocks(p->seqlen_q, fa_bwd_resident_rows(cfg)), p->heads, p->batch);
}

/* The workspace queries refuse what the launch would (the size limits first: a size past
 * them would have wrapped), so that fa_*_workspace_size and fa_plan_* say so too. */
fa_status fa_gpu_fwd_workspace(fa_context *ctx, const fa_problem *p, const fa_selection *sel,
                               const char *backend, size_t *bytes)
{
    fa_status st = fa_gpu_check_paging(ctx, p, sel, backend);
    if (st == FA_OK)
        st = fa_fwd_limits(ctx, p, sel, backend);
    *bytes = st == FA_OK ? fa_fwd_workspace_total(p, sel) : 0;
    return st;
}

fa_status fa_gpu_bwd_workspace(fa_context *ctx, const fa_problem *p, const fa_selection *sel,
                               const char *backend, size_t *bytes)
{
    fa_status st = fa_bwd_limits(ctx, p, sel, backend);
    *bytes = st == FA_OK ? fa_bwd_workspace_total(p, sel->config) : 0;
    return st;
}

/* ---- the combine ---------------------------------------------------------------------- */

/* Every partial of fa_combine has a pointer of the arguments; the kernel takes them all. */
typedef char fa_combine_pointers_fit[FA_MAX_COMBINE_PARTIALS <= FA_COMBINE_POINTERS &&
                                     FA_COMBINE_POINTERS <= FA_COMBINE_MAX_PARTIALS ? 1 : -1];

/* Threads a combine's grid fills before its groups widen past one lane per chunk: about
 * one wave of a large GPU (an H200 holds 132 x 2048). A constant rather than the device's
 * count, so that a shape sums its partials in one order on every device. */
#define FA_COMBINE_FILL_THREADS (1LL << 17)

/* n's exponent, n a power of two. */
static int fa_log2_of(int n)
{
    int log2 = 0;
    while (1 << log2 < n)
        log2++;
    return log2;
}

/* The group of a (row, head): a lane per 8-element chunk (up to FA_COMBINE_CHUNK_LANES,
 * more chunks take turns), widened to FA_COMBINE_MIN_LANES, and while the grid is small,
 * up to the whole block, whose lanes then split the partials between them. */
static void fa_combine_lanes(fa_combine_args *a)
{
    const long long items = (long long)a->batch * a->rows * a->heads;
    const int chunks = a->head_dim / 8;
    int chunk_lanes = 1, lanes;
    while (chunk_lanes < chunks && chunk_lanes < FA_COMBINE_CHUNK_LANES)
        chunk_lanes *= 2;
    lanes = chunk_lanes < FA_COMBINE_MIN_LANES ? FA_COMBINE_MIN_LANES : chunk_lanes;
    while (lanes < FA_COMBINE_THREADS && lanes / chunk_lanes < a->n && items < FA_COMBINE_FILL_THREADS / lanes)
        lanes *= 2;
    a->lanes_log2 = fa_log2_of(lanes);
    a->chunk_lanes_log2 = fa_log2_of(chunk_lanes);
}

/* The split-KV partials (attn_args.h's offsets) as fa_combine's: one base and the split
 * stride, a row and head stride, and varlen rows found through cu_seqlens_q. */
fa_combine_args fa_make_split_combine_args(const fa_problem *p, const fa_fwd_args *fwd)
{
    fa_combine_args a;
    memset(&a, 0, sizeof a);
    a.part_out[0] = fwd->partial_out;
    a.part_lse[0] = fwd->partial_lse;
    a.part_out_split = fa_partial_out_offset(fwd, 1, 0, 0);
    a.part_lse_split = fa_partial_lse_offset(fwd, 1, 0, 0);
    a.part_out_layout.row = fa_partial_out_offset(fwd, 0, 1, 0);
    a.part_out_layout.head = fa_partial_out_offset(fwd, 0, 0, 1);
    a.part_out_layout.batch = p->varlen ? 0 : p->seqlen_q * a.part_out_layout.row;
    a.part_lse_layout.row = fa_partial_lse_offset(fwd, 0, 0, 1);
    a.part_lse_layout.head = fa_partial_lse_offset(fwd, 0, 1, 0);
    a.part_lse_layout.batch = p->varlen ? 0 : p->seqlen_q * a.part_lse_layout.row;
    a.out = p->out;
    a.lse = p->lse;
    a.out_layout = fa_layout_of(p->out_stride);
    a.lse_layout = fa_layout_of(p->lse_stride);
    a.cu_seqlens_q = p->varlen ? p->cu_seqlens_q : NULL;
    a.rows = p->seqlen_q;
    a.n = fwd->num_splits;
    a.batch = p->batch;
    a.heads = p->heads;
    a.head_dim = p->head_dim;
    a.part_dtype = FA_DTYPE_F32;
    a.out_dtype = p->dtype;
    a.seq_ok = fwd->seq_ok;
    a.read_ahead = 1; /* the workspace holds every split's rows, written or not */
    fa_combine_lanes(&a);
    return a;
}

int fa_split_verdict_late(const fa_fwd_args *fwd, const fa_kernel_config *cfg)
{
    return (fwd->checked_late || fwd->checks_itself) && fwd->seq_ok != NULL && cfg->pack_gqa;
}

int fa_fwd_checks_itself(const fa_problem *p, const fa_kernel_config *cfg)
{
    /* One block reads a whole table row: one round of loads at most. A b 1 x 131072 call
     * on 16-key pages (8192 entries) read in rounds of 512 took 25 us longer than with
     * the check kernel beside it (bench/NOTES.md dec7). */
    const int short_rows = p->block_table == NULL || p->block_table_width <= FA_JUDGE_ROUND * cfg->threads;
    /* The kernels hold num_pages in an int (fa_fwd_args): a larger pool is judged by the
     * check kernel, which compares page ids with the whole count. */
    const int pages_fit = p->num_pages <= INT32_MAX;
    return fa_has_device_indices(p) && !p->varlen && cfg->pack_gqa && short_rows && pages_fit;
}

static int fa_same_strides(fa_strides a, fa_strides b)
{
    return a.batch == b.batch && a.row == b.row && a.head == b.head;
}

/* The kernel reads every partial through one layout (the arguments have no room for one
 * per partial within 4 KiB), 16 bytes at a time. */
static fa_status fa_combine_layouts(fa_context *ctx, const fa_combine_problem *p, const char *backend)
{
    int i;
    for (i = 1; i < p->n; i++)
        if (!fa_same_strides(p->part_out_stride[i], p->part_out_stride[0]) ||
            !fa_same_strides(p->part_lse_stride[i], p->part_lse_stride[0]))
            return fa_fail(ctx, FA_ERR_UNSUPPORTED,
                           "the %s backend's fa_combine reads every partial through one layout: "
                           "partial_out[%d] and partial_lse[%d] must have the strides of "
                           "partial_out[0] and partial_lse[0]",
                           backend, i, i);
    for (i = 0; i < p->n && p->head_dim % 8 == 0; i++)
        if (!fa_rows_aligned(p->part_out[i], p->part_out_stride[i]))
            break;
    if (p->head_dim % 8 != 0 || i < p->n || !fa_rows_aligned(p->out, p->out_stride))
        return fa_fail(ctx, FA_ERR_UNSUPPORTED,
                       "the %s backend's fa_combine needs 16-byte aligned rows: head_dim a "
                       "multiple of 8, data pointers of out and every partial_out aligned to 16 "
                       "bytes and their outer strides multiples of 8 elements",
                       backend);
    if (p->batch > INT32_MAX || p->heads > INT32_MAX)
        return fa_fail(ctx, FA_ERR_UNSUPPORTED, "the %s backend's fa_combine takes batch and heads "
                       "below 2^31 (batch %lld, heads %lld)", backend, (long long)p->batch,
                       (long long)p->heads);
    return FA_OK;
}

fa_status fa_gpu_combine_args(fa_context *ctx, const fa_combine_problem *p, const char *backend,
                              fa_combine_args *a)
{
    fa_status st = fa_combine_layouts(ctx, p, backend);
    int i;
    memset(a, 0, sizeof *a);
    if (st != FA_OK)
        return st;
    for (i = 0; i < p->n; i++) {
        a->part_out[i] = p->part_out[i];
        a->part_lse[i] = p->part_lse[i];
    }
    a->part_out_layout = fa_layout_of(p->part_out_stride[0]);
    a->part_lse_layout = fa_layout_of(p->part_lse_stride[0]);
    a->out = p->out;
    a->lse = p->lse;
    a->out_layout = fa_layout_of(p->out_stride);
    a->lse_layout = fa_layout_of(p->lse_stride);
    a->rows = p->rows;
    a->n = p->n;
    a->batch = (int)p->batch;
    a->heads = (int)p->heads;
    a->head_dim = (int)p->head_dim;
    a->part_dtype = a->out_dtype = p->dtype;
    fa_combine_lanes(a);
    return fa_check_grid(ctx, fa_combine_grid(a), FA_COMBINE_THREADS, "combine", backend);
}
