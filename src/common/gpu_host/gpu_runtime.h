/*
 * gpu_runtime.h - the table through which the one GPU host layer (gpu_backend.c) drives
 * a vendor's runtime. runtime_table.cpp writes each vendor's table once over the
 * vendor's runtime vocabulary (src/cuda/fa_runtime.h, src/hip/fa_runtime.h); nothing
 * else of the host side is per vendor. Functions return the runtime's own error code, 0
 * on success, which error_text names.
 */
#ifndef FA_GPU_RUNTIME_H
#define FA_GPU_RUNTIME_H

#include <stddef.h>

#include "flashattn.h"
#include "gpu_host/gpu_args.h"
#include "select/arch_table.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a runtime reports about one device, in the arch table's terms (arch_table.h). */
typedef struct fa_gpu_properties {
    char device_name[256];
    char arch[32];            /* the arch table's row name: "sm_90", "gfx942"              */
    int wave_size;
    int smem_per_block;       /* the most one block may use (opted in where that is asked) */
    int smem_per_sm;
    int regs_per_sm;
    int max_threads_per_block;
    int max_threads_per_sm;
    int sm_count;
    int has_matrix_unit;
    int launch_overlap;       /* launches may overlap the previous kernel (`launch`'s overlap) */
    int has_tensor_maps;      /* the driver encodes TMA tensor maps (encode_maps works)      */
} fa_gpu_properties;

typedef struct fa_gpu_runtime {
    const char *name;         /* "CUDA", in messages                                      */
    const char *device_kind;  /* "NVIDIA GPU": what fa_create found none of               */
    fa_backend backend;
    fa_vendor vendor;         /* the arch-table rows its devices match                    */
    /* Comma-separated targets this library holds machine code for; NULL: every device
     * runs (a build with PTX for later GPUs). */
    const char *built_targets;
    const char *targets_option; /* the CMake option that lists them, for that message      */

    int (*device_count)(int *count);
    int (*properties)(int device, fa_gpu_properties *out);
    int (*set_device)(int device);
    /* Device memory usable in the stream's order; release frees it once the work queued
     * on the stream no longer needs it. */
    int (*alloc)(void **ptr, size_t bytes, void *stream);
    void (*release)(void *ptr, void *stream);
    /* Returns once the work queued on the stream has finished. */
    int (*stream_sync)(void *stream);
    /* Raises a kernel's shared-memory limit to smem_bytes, once per context before its
     * first launch; launches then pass the kernel's shared memory as dynamic bytes. NULL:
     * the kernels size it statically, and launches pass none. */
    int (*prepare_kernel)(const void *kernel, int smem_bytes);
    /* overlap 1: the kernel may be scheduled while the stream's previous kernel finishes
     * (it waits in fa_wait_prior_grid before reading what that kernel wrote); a runtime
     * without such launches runs it after, as for 0. */
    int (*launch)(const void *kernel, fa_grid grid, unsigned threads, void **args, size_t smem_bytes,
                  void *stream, int overlap);
    const char *(*error_text)(int error);

    /* Launch handles of the kernels every instance shares (the vendor's generated
     * fa_<vendor>_shared_kernels unit). */
    const void *const *combine;
    const void *const *bwd_preprocess;
    const void *const *bwd_convert_dq;
    const void *const *kv_append;   /* fa_fwd_kvcache's append (kv_append.h) */

    /* Pinned host memory the device reads and writes (the device-check record):
     * *host for the host, *device the address kernels take. NULL: the runtime has none,
     * and the context keeps no record (the check kernels then report nothing). */
    int (*host_alloc_mapped)(void **host, void **device, size_t bytes);
    void (*host_free)(void *host);
    /* *active = 1 while the stream is being captured into a graph. */
    int (*stream_capturing)(void *stream, int *active);
    /* The device check of a call's indices (seq_check.h). */
    const void *const *seq_check;
    const void *const *seq_check_pages;
    /* The warpgroup kernels' tensor maps (attn_args.h, fa_tma_maps) of q, k and v for the
     * call `args` describes; of out when args->out_by_tma (the forward); with `bwd` (the
     * backward's arguments, whose fwd is args) of dout, dk and dv: rows_q / rows_k rows
     * per batch entry (varlen: the operand's total, as one batch entry), boxes of 64
     * columns by tile_m (q, dout), tile_n (k, v, dk, dv) or FA_WS_O_BOX_ROWS (out) rows.
     * Host work only. NULL: the runtime has no such kernels. */
    int (*encode_maps)(const fa_fwd_args *args, const fa_bwd_args *bwd, int bf16, long long rows_q,
                       long long rows_k, int tile_m, int tile_n, fa_tma_maps *maps);
    /* Sets `bytes` of device memory to zero in the stream's order (a counter the next
     * kernel of the call counts on: the forward walk's tickets). */
    int (*zero)(void *ptr, size_t bytes, void *stream);
} fa_gpu_runtime;

/* Binds ctx (backend and device set) to a runtime: finds the device, fills ctx->row and
 * ctx->info, creates the per-context state fa_gpu_ops works with. What fa_gpu_ops' init
 * does with the runtime of ctx->backend; tests bind a runtime of their own. */
fa_status fa_gpu_attach(fa_context *ctx, const fa_gpu_runtime *rt, char *why, size_t why_len);

#ifdef FA_HAVE_CUDA
extern const fa_gpu_runtime fa_cuda_runtime;
#endif
#ifdef FA_HAVE_HIP
extern const fa_gpu_runtime fa_hip_runtime;
#endif

#ifdef __cplusplus
}
#endif

#endif /* FA_GPU_RUNTIME_H */
