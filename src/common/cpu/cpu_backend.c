/*
 * cpu_backend.c - the CPU backend's operations table: context setup from the "cpu"
 * architecture row, the worker count, and the forward, backward and kvcache entry points
 * of cpu_fwd.c, cpu_bwd.c and cpu_kvcache.c.
 */
#define _POSIX_C_SOURCE 200809L /* sysconf under strict C99 */

#include "cpu/cpu_internal.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Workers for a fa_set_num_threads request: all online cores for 0, at most
 * FA_CPU_MAX_THREADS. */
static int worker_count(int num_threads)
{
    long wanted = num_threads > 0 ? num_threads : sysconf(_SC_NPROCESSORS_ONLN);
    if (wanted < 1)
        return 1;
    return wanted > FA_CPU_MAX_THREADS ? FA_CPU_MAX_THREADS : (int)wanted;
}

/* One count for everyone: the dispatcher's wave estimate and reason, the device info,
 * the plan and the forward itself all read the workers from the row. */
static void set_workers(fa_context *ctx, int num_threads)
{
    ctx->row.sm_count = worker_count(num_threads);
    ctx->info.sm_count = ctx->row.sm_count;
}

static fa_status cpu_init(fa_context *ctx, char *why, size_t why_len)
{
    const fa_arch_row *row = fa_arch_find("cpu");
    fa_device_info *info = &ctx->info;
    if (!row) {
        snprintf(why, why_len, "the architecture table has no \"cpu\" row");
        return FA_ERR_UNSUPPORTED;
    }
    ctx->row = *row;
    memset(info, 0, sizeof *info);
    info->backend = FA_BACKEND_CPU;
    snprintf(info->device_name, sizeof info->device_name, "CPU");
    snprintf(info->arch, sizeof info->arch, "%s", row->name);
    info->row_from_table = 1;
    info->wave_size = row->wave_size;
    info->smem_per_block = row->smem_per_block;
    info->smem_per_sm = row->smem_per_sm;
    info->regs_per_sm = row->regs_per_sm;
    info->max_threads_per_block = row->max_threads_per_block;
    snprintf(info->matrix_unit, sizeof info->matrix_unit, "none");
    set_workers(ctx, ctx->num_threads);
    return FA_OK;
}

static void cpu_destroy(fa_context *ctx)
{
    (void)ctx;
}

static fa_status cpu_set_stream(fa_context *ctx, void *stream)
{
    if (stream)
        return fa_fail(ctx, FA_ERR_BAD_PARAM, "the CPU backend has no streams: stream must be NULL");
    return FA_OK;
}

static fa_status cpu_set_num_threads(fa_context *ctx, int num_threads)
{
    set_workers(ctx, num_threads);
    return FA_OK;
}

const fa_backend_ops fa_cpu_ops = {
    cpu_init, cpu_destroy, cpu_set_stream, NULL, fa_cpu_fwd_workspace, fa_cpu_fwd,
    cpu_set_num_threads, fa_cpu_bwd_workspace, fa_cpu_bwd, fa_cpu_combine,
    fa_cpu_fwd_kvcache_workspace, fa_cpu_fwd_kvcache,
};
