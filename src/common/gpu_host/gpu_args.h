/*
 * gpu_args.h - host helpers every GPU backend (CUDA, HIP) shares: the forward and
 * backward kernel argument blocks from a validated problem, the device check's, their
 * workspace sizes and the 16-byte row alignment the tile copies need. Defined in
 * gpu_args.c.
 */
#ifndef FA_GPU_ARGS_H
#define FA_GPU_ARGS_H

#include "api/problem.h"
#include "gpu_kernels/attn_args.h"
#include "gpu_kernels/launch_grid.h"
#include "gpu_kernels/seq_check_args.h"

#ifdef __cplusplus
extern "C" {
#endif

/* bytes rounded up to a multiple of 256 (workspace sub-buffers start aligned). */
size_t fa_align256(size_t bytes);
/* The kernels' view of an operand's strides (attn_args.h). */
fa_operand_layout fa_layout_of(fa_strides st);

/* Bytes of fp32 partial outputs and LSEs for `splits` KV splits (0 when splits <= 1). */
size_t fa_split_bytes(const fa_problem *p, int splits);

/* The tile copies move 16-byte chunks: 1 when every row of the operand starts 16-byte
 * aligned (pointer aligned, outer strides multiples of 8 elements). */
int fa_rows_aligned(const void *ptr, fa_strides st);

/* 1 when the call reads indices from device memory (varlen, seqused_k, paged): it then
 * runs the device check (seq_check.h) first, whose seq_ok[batch] sits in the workspace
 * after the pass's own buffers. */
int fa_has_device_indices(const fa_problem *p);
/* Bytes of seq_ok (0 without device indices). */
size_t fa_seq_ok_bytes(const fa_problem *p);

/* Bytes of the warpgroup forward walk's ticket counter (256, or 0 unless sel->walk_draws),
 * after seq_ok in the workspace; where it is (NULL without it or without a workspace). */
size_t fa_walk_tickets_bytes(const fa_selection *sel);
unsigned *fa_walk_tickets_at(const fa_problem *p, const fa_selection *sel, void *workspace);

/* The whole workspaces of a forward as `sel` runs it (fa_split_bytes + seq_ok + the walk's
 * tickets) and of a backward (fa_bwd_workspace_bytes + seq_ok), as the queries report them. */
size_t fa_fwd_workspace_total(const fa_problem *p, const fa_selection *sel);
size_t fa_bwd_workspace_total(const fa_problem *p, const fa_kernel_config *cfg);

/* The device check's arguments for what fa_problem holds: the call's batch, cu_seqlens
 * (rows and max lengths), seqused_k and paged fields; cache fields stay 0 for callers
 * that have them to fill. seq_ok: the [batch] array in the workspace; status: the
 * context's record (device address) or NULL. */
fa_seq_check_args fa_make_check_args(const fa_problem *p, int call, int *seq_ok, fa_device_status *status);

/* The forward kernels' arguments; workspace holds the split partials when splits > 1,
 * then seq_ok when the call has device indices. */
fa_fwd_args fa_make_args(const fa_problem *p, int splits, void *workspace);

/* The combine's arguments for the split-KV partials of a forward's (fwd: fa_make_args's,
 * splits > 1): the workspace as fwd->num_splits partials, one base and a split stride. */
fa_combine_args fa_make_split_combine_args(const fa_problem *p, const fa_fwd_args *fwd);

/* 1 when the forward that wrote fwd's partials (kernels of cfg) wrote every split's for
 * every sequence: the decode family checking late or itself (attn_fwd.h).
 * Its combine may then read seq_ok beside its loads (fa_combine_args.verdict_late). */
int fa_split_verdict_late(const fa_fwd_args *fwd, const fa_kernel_config *cfg);

/* 1 when fa_fwd's kernels of cfg check the problem's device indices themselves, with no
 * check kernel ahead of them (fa_fwd_args.checks_itself): the decode family on fixed-
 * length sequences, whose device indices are seqused_k and the page ids, with table
 * rows of at most FA_JUDGE_ROUND entries per thread. */
int fa_fwd_checks_itself(const fa_problem *p, const fa_kernel_config *cfg);

/* fa_combine's arguments, after the checks the GPU kernel adds to api.c's: one layout
 * for every partial_out and one for every partial_lse, 16-byte aligned rows, batch and
 * heads within int, a grid the runtime takes; on failure ctx says why, naming `backend`. */
fa_status fa_gpu_combine_args(fa_context *ctx, const fa_combine_problem *p, const char *backend,
                              fa_combine_args *a);

/* 1 when every operand of the backward (q, k, v, out, dout, dq, dk, dv) has aligned rows. */
int fa_bwd_rows_aligned(const fa_problem *p);

/* Bytes of the backward workspace: D = rowsum(dO * O) and the log2 LSE, fp32
 * [heads][total_q] each, filled by the preprocess kernel; when the config adds dQ with
 * atomics (cfg->atomic_dq) and the call is not deterministic or the config orders its
 * adds (cfg->ordered_dq), the fp32 dQ accumulator [heads][total_q][head_dim] it zeroes;
 * and for a deterministic call on an ordered config, the int32 [heads][total_q] order
 * rows it zeroes too. */
size_t fa_bwd_workspace_bytes(const fa_problem *p, const fa_kernel_config *cfg);

/* The backward kernels' arguments; workspace holds fa_bwd_workspace_total(p, cfg) bytes,
 * seq_ok last. dq_accum and dq_order are set exactly when the buffers include them. */
fa_bwd_args fa_make_bwd_args(const fa_problem *p, const fa_kernel_config *cfg, void *workspace);

/* The workspaces the GPU launches need, the split-KV partials (forward) or the
 * backward's D and log2-LSE rows (and dQ accumulator), plus seq_ok, after the same size
 * limits the launch checks; failures name `backend`. */
fa_status fa_gpu_fwd_workspace(fa_context *ctx, const fa_problem *p, const fa_selection *sel,
                               const char *backend, size_t *bytes);
fa_status fa_gpu_bwd_workspace(fa_context *ctx, const fa_problem *p, const fa_selection *sel,
                               const char *backend, size_t *bytes);

/* The checks every GPU backend makes before a launch (row alignment, a kernel for the
 * config, and the limits: workspace sizes within 64 bits, the backward's step count
 * within 32, grids the runtime takes); on failure ctx says why, naming `backend`. The
 * workspace queries above check the same limits. */
fa_status fa_gpu_check_fwd(fa_context *ctx, const fa_problem *p, const fa_selection *sel,
                           const char *backend);
/* Paged K/V on the GPU (p->block_table: fa_fwd's pools, and fa_fwd_kvcache's paged
 * caches and cache_batch_idx) is read only by the decode family (attn_fwd.h with
 * FA_INST_PACK_GQA), which the dispatcher selects for every paged problem where the
 * vendor has one for the device's wave size; otherwise FA_ERR_UNSUPPORTED.
 * fa_gpu_check_fwd and the workspace query call it. */
fa_status fa_gpu_check_paging(fa_context *ctx, const fa_problem *p, const fa_selection *sel,
                              const char *backend);
fa_status fa_gpu_check_bwd(fa_context *ctx, const fa_problem *p, const fa_selection *sel,
                           const char *backend);

/* The context's arch row and device info from what the runtime reports (`reported`,
 * built by fa_arch_from_device): the table's row of that name when there is one, with
 * the reported SM count and, when smaller, the reported shared memory per block (a
 * cut-down part or a future driver may differ); else the reported row itself. */
/* The context's matrix unit (ctx->row and ctx->info) set to `unit`: a row whose unit the
 * runtime cannot drive (warpgroup MMA without tensor maps) falls back to an older one. */
void fa_gpu_set_matrix_unit(fa_context *ctx, fa_matrix_unit unit);
void fa_gpu_describe_device(fa_context *ctx, fa_backend backend, const char *device_name,
                            const fa_arch_row *reported);

/* Launch geometry, the same for every vendor (blocks per grid dimension): tiles or rows
 * along x, (head, batch) pairs over y and z as launch_grid.h folds them (y = heads and
 * z = batch while both fit). */
typedef struct fa_grid {
    unsigned x, y, z;
} fa_grid;
/* Forward: query tiles x (heads, batch * splits). */
fa_grid fa_fwd_grid(const fa_problem *p, const fa_selection *sel);
/* The combine: blocks of FA_COMBINE_THREADS threads over each batch entry's rows x heads,
 * (1, batch) pairs over y and z. */
fa_grid fa_combine_grid(const fa_combine_args *a);
/* The device check: one block (fa_seq_check), and one block per sequence
 * (fa_seq_check_pages). */
fa_grid fa_seq_check_grid(void);
fa_grid fa_seq_check_pages_grid(int batch);
/* Backward preprocess and dQ conversion (FA_PREP_ROWS rows per block), dK/dV (resident
 * key tiles x (kv heads, batch)) and dQ (resident query tiles x (heads, batch)); the
 * config's tile_n is the backward's resident rows per block (attn_bwd.h). */
fa_grid fa_bwd_prep_grid(const fa_problem *p);
fa_grid fa_bwd_dkdv_grid(const fa_problem *p, const fa_kernel_config *cfg);
fa_grid fa_bwd_dq_grid(const fa_problem *p, const fa_kernel_config *cfg);

#ifdef __cplusplus
}
#endif

#endif /* FA_GPU_ARGS_H */
