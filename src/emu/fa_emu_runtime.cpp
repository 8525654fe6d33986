/*
 * fa_emu_runtime.cpp - the emulated AMD device as flashattn's HIP runtime table
 * (gpu_runtime.h's fa_hip_runtime; test-only, issue 15, research note 3.6): one device,
 * described by the arch table's own row for the emulated target so the dispatcher
 * chooses what it would on the real part; device memory is host memory; a launch runs
 * every workgroup on the emulator (fa_emu.h) before it returns, so the stream is always
 * drained and never captured.
 *
 * FA_EMU_ORDER (forward, reverse, seeded; default forward) and FA_EMU_SEED pick the wave
 * order of every launch (research note 3.5). FA_EMU_LDS_LIMIT, when set, replaces the
 * row's LDS per workgroup as the launches' limit (not what properties report, so the
 * dispatcher plans as on the part): a test lowers it below a kernel's declaration to
 * show that the kernel's LDS is counted.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fa_emu.h"
#include "fa_emu_kernel.h"
#include "gpu_host/gpu_runtime.h"

/* The emulated part, named by the build: its arch row (FA_EMU_ARCH, e.g. "gfx90a") and
 * the instruction set its kernels were compiled for (FA_EMU_TARGET, src/emu/fa_amd_isa.h:
 * gfx90a's device pass selects gfx942's MFMA forms, so its target is 942). */
#ifndef FA_EMU_ARCH
#error "flashattn emulator: the build names the emulated part's arch row (FA_EMU_ARCH)"
#endif

extern "C" const void *const fa_hip_combine_handle, *const fa_hip_bwd_preprocess_handle,
    *const fa_hip_bwd_convert_dq_handle, *const fa_hip_kv_append_handle, *const fa_hip_seq_check_handle,
    *const fa_hip_seq_check_pages_handle;

/* The runtime's own error, past the emulator's (fa_emu.h) codes. */
enum { EMU_RT_NO_MEMORY = 1000, EMU_RT_NO_ROW, EMU_RT_BAD_DEVICE };

static const fa_arch_row *target_row(void) { return fa_arch_find(FA_EMU_ARCH); }

static int rt_device_count(int *count)
{
    *count = 1;
    return 0;
}

static int rt_properties(int device, fa_gpu_properties *out)
{
    const fa_arch_row *row = target_row();
    if (device != 0)
        return EMU_RT_BAD_DEVICE;
    if (row == NULL)
        return EMU_RT_NO_ROW;
    snprintf(out->device_name, sizeof out->device_name, "AMD %s (emulated)", row->name);
    snprintf(out->arch, sizeof out->arch, "%s", row->name);
    out->wave_size = row->wave_size;
    out->smem_per_block = row->smem_per_block;
    out->smem_per_sm = row->smem_per_sm;
    out->regs_per_sm = row->regs_per_sm;
    out->max_threads_per_block = row->max_threads_per_block;
    out->max_threads_per_sm = row->max_threads_per_sm;
    out->sm_count = row->sm_count;
    out->has_matrix_unit = 1;
    return 0;
}

static int rt_set_device(int device) { return device == 0 ? 0 : EMU_RT_BAD_DEVICE; }

/* 256-byte aligned as hipMalloc's blocks are at least; ASan tracks every block. Filled
 * with 0xFF bytes (NaN in every float type) where a device's memory holds whatever was
 * there: a kernel that reads workspace no one wrote gives NaN, not a lucky 0. */
static int rt_alloc(void **ptr, size_t bytes, void *stream)
{
    (void)stream;
    *ptr = NULL;
    if (posix_memalign(ptr, 256, bytes ? bytes : 1) != 0)
        return EMU_RT_NO_MEMORY;
    memset(*ptr, 0xFF, bytes);
    return 0;
}

static void rt_release(void *ptr, void *stream)
{
    (void)stream;
    free(ptr);
}

static int rt_stream_sync(void *stream) { return (void)stream, 0; }

static int rt_zero(void *ptr, size_t bytes, void *stream)
{
    (void)stream;
    memset(ptr, 0, bytes);
    return 0;
}

/* The wave order and LDS limit of the environment, read at every launch so a test may
 * change them. */
static fa_emu_device launch_device(void)
{
    const char *order = getenv("FA_EMU_ORDER"), *seed = getenv("FA_EMU_SEED");
    const char *lds_limit = getenv("FA_EMU_LDS_LIMIT");
    fa_emu_device dev = {FA_EMU_TARGET, (size_t)target_row()->smem_per_block, FA_EMU_ORDER_FORWARD, 0};
    if (order != NULL && *order) {
        const int parsed = fa_emu_parse_order(order);
        if (parsed < 0) {
            fprintf(stderr, "fa_emu: FA_EMU_ORDER=%s is none of forward, reverse, seeded\n", order);
            abort();
        }
        dev.order = (fa_emu_order)parsed;
    }
    if (seed != NULL)
        dev.seed = (uint32_t)strtoul(seed, NULL, 0);
    if (lds_limit != NULL && *lds_limit)
        dev.lds_limit = (size_t)strtoull(lds_limit, NULL, 0);
    return dev;
}

static char g_launch_error[1280];

/* Every workgroup of the grid, one after another; the first emulator error ends it and
 * error_text names the kernel with it. The LDS is static (prepare_kernel NULL), so
 * smem_bytes is 0; no launch overlaps another here. */
static int rt_launch(const void *handle, fa_grid grid, unsigned threads, void **args, size_t smem_bytes,
                     void *stream, int overlap)
{
    const fa_emu_kernel *kernel = (const fa_emu_kernel *)handle;
    const fa_emu_device dev = launch_device();
    (void)smem_bytes, (void)stream, (void)overlap;
    const int err = fa_emu_launch(&dev, {grid.x, grid.y, grid.z}, {threads, 1, 1}, kernel->entry, args[0]);
    if (err != FA_EMU_OK)
        snprintf(g_launch_error, sizeof g_launch_error, "%s (emulated %s): %s", kernel->name, FA_EMU_ARCH,
                 fa_emu_error_text());
    return err;
}

static const char *rt_error_text(int error)
{
    switch (error) {
    case 0: return "no error";
    case EMU_RT_NO_MEMORY: return "out of host memory (emulated device memory)";
    case EMU_RT_NO_ROW: return "the arch table has no row for the emulated " FA_EMU_ARCH;
    case EMU_RT_BAD_DEVICE: return "the emulator has one device, 0";
    }
    return g_launch_error;
}

/* Host memory is the device's: the kernels write the record through the same address. */
static int rt_host_alloc_mapped(void **host, void **device, size_t bytes)
{
    const int err = rt_alloc(host, bytes, NULL);
    *device = *host;
    return err;
}

static void rt_host_free(void *host) { free(host); }

static int rt_stream_capturing(void *stream, int *active)
{
    (void)stream;
    *active = 0;
    return 0;
}

extern "C" const fa_gpu_runtime fa_hip_runtime = {
    "HIP (emulated)", "AMD GPU", FA_BACKEND_HIP, FA_VENDOR_AMD, FA_EMU_ARCH, "FA_EMU_TARGET",
    rt_device_count, rt_properties, rt_set_device, rt_alloc, rt_release,
    rt_stream_sync, NULL, rt_launch, rt_error_text,
    &fa_hip_combine_handle, &fa_hip_bwd_preprocess_handle, &fa_hip_bwd_convert_dq_handle,
    &fa_hip_kv_append_handle,
    rt_host_alloc_mapped, rt_host_free, rt_stream_capturing,
    &fa_hip_seq_check_handle, &fa_hip_seq_check_pages_handle,
    NULL, /* encode_maps: no warpgroup (TMA) kernels on AMD */
    rt_zero,
};
